/* Running gnuplot and writing its data files (gnuplot.h). */
#include "tools/gnuplot.h"

#include <string.h>

#include "core/error.h"

gboolean
shoal_gnuplot_installed (void)
{
  char *gnuplot = g_find_program_in_path ("gnuplot");
  gboolean found = gnuplot != NULL;
  g_free (gnuplot);
  return found;
}

gboolean
shoal_gnuplot_run (const char *dir, const char *script, GError **error)
{
  char *gnuplot = g_find_program_in_path ("gnuplot");
  if (gnuplot == NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_UNSUPPORTED,
                   "gnuplot is not installed: `make deps` (or apt-get install gnuplot-nox) installs it");
      return FALSE;
    }
  char *argv[] = { gnuplot, (char *) script, NULL };
  char *err_text = NULL;
  int status = 0;
  GError *local = NULL;
  gboolean ok = g_spawn_sync (dir, argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL, NULL, NULL, NULL, &err_text,
                              &status, &local);
  if (!ok)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "running gnuplot: %s", local->message);
      g_error_free (local);
    }
  else if (!g_spawn_check_wait_status (status, &local))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "gnuplot %s/%s failed (%s): %s", dir, script,
                   local->message, err_text != NULL ? g_strstrip (err_text) : "");
      g_error_free (local);
      ok = FALSE;
    }
  g_free (err_text);
  g_free (gnuplot);
  return ok;
}

void
shoal_gnuplot_empty_frame (GString *gp, const char *why)
{
  char *q = shoal_gnuplot_quote (why);
  g_string_append_printf (gp, "set label 1 %s at graph 0.35,0.5\nplot [1:2][1:2] 4 notitle\nunset label 1\n", q);
  g_free (q);
}

char *
shoal_gnuplot_quote (const char *s)
{
  GString *q = g_string_new ("\"");
  for (const char *p = s; *p != '\0'; p++)
    {
      if (*p == '"' || *p == '\\')
        g_string_append_c (q, '\\');
      /* enhanced text: _ and ^ would subscript */
      if (*p == '_' || *p == '^' || *p == '@' || *p == '&' || *p == '~' || *p == '{' || *p == '}')
        g_string_append (q, "\\\\");
      g_string_append_c (q, *p);
    }
  g_string_append_c (q, '"');
  return g_string_free (q, FALSE);
}

gboolean
shoal_gnuplot_write_points (const char *path, const GArray *points, GError **error)
{
  GString *s = g_string_new ("# time samples value\n");
  char a[G_ASCII_DTOSTR_BUF_SIZE], b[G_ASCII_DTOSTR_BUF_SIZE], c[G_ASCII_DTOSTR_BUF_SIZE];
  for (guint i = 0; i < points->len; i++)
    {
      const ShoalRunPoint *p = &g_array_index (points, ShoalRunPoint, i);
      g_string_append_printf (s, "%s %s %s\n", g_ascii_formatd (a, sizeof a, "%.4f", p->time),
                              g_ascii_formatd (b, sizeof b, "%.0f", p->samples),
                              g_ascii_formatd (c, sizeof c, "%.6g", p->value));
    }
  gboolean ok = g_file_set_contents (path, s->str, (gssize) s->len, error);
  g_string_free (s, TRUE);
  return ok;
}
