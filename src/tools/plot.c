/* shoal plot WS... --out FILE.png: the curves of any finished runs in one
 * figure - test accuracy or train loss against wall time or samples
 * seen (runlog.h says which lines).  A WS is a workspace or its
 * metrics.jsonl.  The data and the gnuplot script go next to FILE.png
 * (FILE.data/), so the figure can be restyled. */
#include <errno.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "tools/commands.h"
#include "tools/gnuplot.h"
#include "tools/runlog.h"

/* WS's metrics.jsonl (g_free). */
static char *
metrics_path (const char *ws)
{
  if (g_file_test (ws, G_FILE_TEST_IS_DIR))
    return g_build_filename (ws, "metrics.jsonl", NULL);
  return g_strdup (ws);
}

/* A run's title: the workspace's name (the parent directory for a
 * metrics.jsonl given itself). */
static char *
run_title (const char *ws)
{
  char *path = g_file_test (ws, G_FILE_TEST_IS_DIR) ? g_strdup (ws) : g_path_get_dirname (ws);
  char *trimmed = g_strdup (path);
  gsize n = strlen (trimmed);
  while (n > 1 && trimmed[n - 1] == '/')
    trimmed[--n] = '\0';
  char *title = g_path_get_basename (trimmed);
  g_free (trimmed);
  g_free (path);
  return title;
}

gboolean
shoal_plot_runs (char **workspaces, const char *out, const char *x, const char *y, GError **error)
{
  gboolean by_samples = strcmp (x, "samples") == 0, loss = strcmp (y, "loss") == 0;
  char *out_abs = g_canonicalize_filename (out, NULL);
  char *dir = g_path_get_dirname (out_abs);
  char *base = g_path_get_basename (out_abs);
  char *data_dir = g_strconcat (out_abs, ".data", NULL);
  GString *script = g_string_new (SHOAL_GNUPLOT_HEADER);
  gboolean ok = TRUE;
  int curves = 0;

  if (g_mkdir_with_parents (data_dir, 0755) != 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: cannot create: %s", data_dir, g_strerror (errno));
      ok = FALSE;
    }
  char *q_out = shoal_gnuplot_quote (base);
  g_string_append_printf (script, "set output %s\n", q_out);
  g_free (q_out);
  GString *plot = g_string_new ("plot ");
  int virtual_runs = 0, runs = 0;
  for (int i = 0; ok && workspaces[i] != NULL; i++)
    {
      char *path = metrics_path (workspaces[i]);
      if (!g_file_test (path, G_FILE_TEST_IS_REGULAR))
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: no metrics.jsonl (not the workspace of a run)",
                       workspaces[i]);
          g_free (path);
          ok = FALSE;
          break;
        }
      ShoalRunLog *log = shoal_run_log_read (path, error);
      g_free (path);
      if (log == NULL)
        {
          ok = FALSE;
          break;
        }
      GArray *points = loss ? log->train : log->tests;
      virtual_runs += log->virtual_time;
      runs++;
      if (!loss && !log->has_accuracy && points->len > 0)
        g_message ("%s: the net has no accuracy layer; plotting its test loss", workspaces[i]);
      if (points->len == 0)
        g_message ("%s: no %s lines; left out", workspaces[i], loss ? "train" : "test");
      else
        {
          char *file = g_strdup_printf ("run%d.dat", i + 1);
          char *full = g_build_filename (data_dir, file, NULL);
          ok = shoal_gnuplot_write_points (full, points, error);
          char *title = run_title (workspaces[i]);
          char *q_title = shoal_gnuplot_quote (title);
          char *data_name = g_path_get_basename (data_dir);
          char *rel = g_build_filename (data_name, file, NULL);
          char *q_rel = shoal_gnuplot_quote (rel);
          g_string_append_printf (plot, "%s%s using %d:3 with linespoints lw 2 title %s", curves > 0 ? ", \\\n  " : "",
                                  q_rel, by_samples ? 2 : 1, q_title);
          curves++;
          g_free (q_rel);
          g_free (rel);
          g_free (data_name);
          g_free (q_title);
          g_free (title);
          g_free (full);
          g_free (file);
        }
      shoal_run_log_free (log);
    }
  if (ok && curves == 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA, "no run has %s lines to plot", loss ? "train" : "test");
      ok = FALSE;
    }
  if (ok && virtual_runs > 0 && virtual_runs < runs && !by_samples)
    g_message ("%d of the %d runs ran on the virtual clock: their times are virtual, the others' wall time",
               virtual_runs, runs);
  if (ok)
    {
      /* the virtual clock's runs (emulator.h) are plotted in virtual time */
      const char *clock = virtual_runs == runs ? "virtual time" : virtual_runs > 0 ? "virtual or wall time" : "wall time";
      g_string_append_printf (script, "set xlabel \"%s%s\"\nset ylabel \"%s\"\nset title \"%s vs %s\"\n",
                              by_samples ? "samples seen (all workers)" : clock, by_samples ? "" : " (s)",
                              loss ? "train loss (group 0)" : "test accuracy (group 0)",
                              loss ? "train loss" : "test accuracy", by_samples ? "samples seen" : clock);
      g_string_append_printf (script, "%s\n", plot->str);
      char *script_path = g_strconcat (out_abs, ".gp", NULL);
      char *script_name = g_path_get_basename (script_path);
      ok = g_file_set_contents (script_path, script->str, (gssize) script->len, error)
           && shoal_gnuplot_run (dir, script_name, error);
      g_free (script_name);
      g_free (script_path);
    }
  g_string_free (plot, TRUE);
  g_string_free (script, TRUE);
  g_free (data_dir);
  g_free (base);
  g_free (dir);
  g_free (out_abs);
  return ok;
}

int
shoal_cmd_plot (int argc, char **argv)
{
  char *out = NULL, *x = NULL, *y = NULL;
  GOptionEntry entries[] = {
    { "out", 'O', 0, G_OPTION_ARG_FILENAME, &out, "the PNG to write (required); its data and gnuplot "
      "script go to FILE.png.data/ and FILE.png.gp", "FILE.png" },
    { "x", 'x', 0, G_OPTION_ARG_STRING, &x, "time (wall time, the default; virtual time for virtual-clock runs) or "
      "samples (seen by all workers)", "time|samples" },
    { "y", 'y', 0, G_OPTION_ARG_STRING, &y, "accuracy (group 0's test accuracy, the default) or loss "
      "(group 0's train loss)", "accuracy|loss" },
    { NULL, 0, 0, 0, NULL, NULL, NULL }
  };
  GOptionContext *ctx = g_option_context_new ("WORKSPACE... - the curves of finished runs in one PNG");
  g_option_context_add_main_entries (ctx, entries, NULL);
  GError *error = NULL;
  int status = 2;

  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    fprintf (stderr, "shoal plot: %s\n", error->message);
  else if (argc < 2)
    fprintf (stderr, "shoal plot: expected at least one WORKSPACE (or its metrics.jsonl)\n");
  else if (out == NULL)
    fprintf (stderr, "shoal plot: --out FILE.png is required\n");
  else if (x != NULL && strcmp (x, "time") != 0 && strcmp (x, "samples") != 0)
    fprintf (stderr, "shoal plot: --x: '%s' is not time or samples\n", x);
  else if (y != NULL && strcmp (y, "accuracy") != 0 && strcmp (y, "loss") != 0)
    fprintf (stderr, "shoal plot: --y: '%s' is not accuracy or loss\n", y);
  else if (!shoal_plot_runs (argv + 1, out, x != NULL ? x : "time", y != NULL ? y : "accuracy", &error))
    {
      fprintf (stderr, "shoal plot: %s\n", error->message);
      status = 1;
    }
  else
    {
      printf ("wrote %s\n", out);
      status = 0;
    }
  g_clear_error (&error);
  g_free (out);
  g_free (x);
  g_free (y);
  g_option_context_free (ctx);
  return status;
}
