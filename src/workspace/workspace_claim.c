/* Who owns a workspace, and its metrics on resume; see
 * workspace/workspace_claim.h. */
#include "workspace/workspace_claim.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "data/checkpoint.h"
#include "metrics/metrics.h"
#include "workspace/run_identity.h"
#include "workspace/workspace.h"
#include "workspace/workspace_lock.h"

/* What an earlier run leaves in a workspace. */
static const char *const run_files[] = { "checkpoint", "job.conf", "metrics.jsonl", NULL };

/* A resumed run continues the run whose job.conf is there; checked before
 * anything in the workspace changes.  Without a readable job.conf nothing
 * says which model, data and layout the checkpoints hold: the servers'
 * own check came only after metrics.jsonl was trimmed and job.conf
 * written, and a model of the same size passes it, so the resume is
 * refused, saying how to go on. */
gboolean
shoal_workspace_check_resume (const char *workspace, ShoalConf *conf, GError **error)
{
  char *path = g_build_filename (workspace, "job.conf", NULL);
  GKeyFile *was = g_key_file_new ();
  GError *e = NULL;
  gboolean ok = g_key_file_load_from_file (was, path, G_KEY_FILE_NONE, &e);
  if (ok && !g_key_file_has_group (was, "job"))
    g_set_error (&e, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_GROUP_NOT_FOUND, "it holds no [job] section (cut short?)");
  if (e != NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                   "%s: cannot resume: %s: %s; it names the model, data and layout the checkpoints belong to, "
                   "and a resume is checked against it before the workspace changes (put the conf that run "
                   "was started with back there, its -o overrides and topology written in, or start this job "
                   "without --resume: the earlier run then moves to %s/previous/)",
                   workspace, path,
                   g_error_matches (e, G_FILE_ERROR, G_FILE_ERROR_NOENT) ? "missing" : e->message, workspace);
      g_clear_error (&e);
      ok = FALSE;
    }
  else
    ok = shoal_run_identity_check (workspace, path, was, shoal_conf_keyfile (conf), error);
  g_key_file_free (was);
  g_free (path);
  return ok;
}

static gboolean
remove_tree (const char *path, GError **error)
{
  GStatBuf st;
  if (g_lstat (path, &st) != 0)
    return TRUE;
  if (S_ISDIR (st.st_mode))
    {
      GDir *dir = g_dir_open (path, 0, NULL);
      const char *name;
      while (dir != NULL && (name = g_dir_read_name (dir)) != NULL)
        {
          char *child = g_build_filename (path, name, NULL);
          gboolean ok = remove_tree (child, error);
          g_free (child);
          if (!ok)
            {
              g_dir_close (dir);
              return FALSE;
            }
        }
      if (dir != NULL)
        g_dir_close (dir);
    }
  if (g_remove (path) != 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: cannot remove: %s", path, g_strerror (errno));
      return FALSE;
    }
  return TRUE;
}

/* An earlier run's files move into WORKSPACE/previous/N (N the first free). */
static gboolean
move_aside (const char *workspace, gboolean overwrite, char **moved_to, GError **error)
{
  gboolean any = FALSE;
  for (int i = 0; run_files[i] != NULL; i++)
    {
      char *p = g_build_filename (workspace, run_files[i], NULL);
      any |= g_file_test (p, G_FILE_TEST_EXISTS);
      g_free (p);
    }
  if (!any)
    return TRUE;
  if (overwrite)
    {
      for (int i = 0; run_files[i] != NULL; i++)
        {
          char *p = g_build_filename (workspace, run_files[i], NULL);
          gboolean ok = remove_tree (p, error);
          g_free (p);
          if (!ok)
            return FALSE;
        }
      return TRUE;
    }
  char *dest = NULL;
  for (int n = 1; dest == NULL && n < 100000; n++)
    {
      char *leaf = g_strdup_printf ("%d", n);
      char *d = g_build_filename (workspace, "previous", leaf, NULL);
      g_free (leaf);
      if (!g_file_test (d, G_FILE_TEST_EXISTS))
        dest = d;
      else
        g_free (d);
    }
  if (dest == NULL || g_mkdir_with_parents (dest, 0755) != 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: cannot make a place for the earlier run's files: %s",
                   workspace, dest != NULL ? g_strerror (errno) : "previous/ is full");
      g_free (dest);
      return FALSE;
    }
  for (int i = 0; run_files[i] != NULL; i++)
    {
      char *from = g_build_filename (workspace, run_files[i], NULL);
      char *to = g_build_filename (dest, run_files[i], NULL);
      gboolean ok = !g_file_test (from, G_FILE_TEST_EXISTS) || g_rename (from, to) == 0;
      if (!ok)
        g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: cannot move it to %s: %s", from, to,
                     g_strerror (errno));
      g_free (from);
      g_free (to);
      if (!ok)
        {
          g_free (dest);
          return FALSE;
        }
    }
  if (moved_to != NULL)
    *moved_to = dest;
  else
    g_free (dest);
  return TRUE;
}

gboolean
shoal_workspace_make (const char *workspace, char **created_top, GError **error)
{
  *created_top = NULL;
  /* the topmost missing folder: the workspace itself, or its first missing parent */
  char *top = NULL, *p = g_canonicalize_filename (workspace, NULL);
  while (p != NULL && !g_file_test (p, G_FILE_TEST_EXISTS))
    {
      g_free (top);
      top = p;
      p = g_path_get_dirname (top);
      if (strcmp (p, top) == 0)
        g_clear_pointer (&p, g_free);
    }
  g_free (p);
  if (g_mkdir_with_parents (workspace, 0755) != 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: cannot create workspace: %s", workspace,
                   g_strerror (errno));
      g_free (top);
      return FALSE;
    }
  *created_top = top;
  return TRUE;
}

void
shoal_workspace_unmake (const char *workspace, const char *created_top)
{
  if (created_top == NULL)
    return;
  char *p = g_canonicalize_filename (workspace, NULL);
  /* g_rmdir removes an empty folder only: one that holds anything ends the walk */
  while (g_str_has_prefix (p, created_top) && g_rmdir (p) == 0 && strcmp (p, created_top) != 0)
    {
      char *up = g_path_get_dirname (p);
      g_free (p);
      p = up;
    }
  g_free (p);
}

gboolean
shoal_workspace_claim (const char *workspace, ShoalConf *conf, gboolean resume, gboolean overwrite,
                       char **moved_to, GError **error)
{
  if (moved_to != NULL)
    *moved_to = NULL;
  if (g_mkdir_with_parents (workspace, 0755) != 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: cannot create workspace: %s", workspace,
                   g_strerror (errno));
      return FALSE;
    }
  /* no other live run may write here (a run holding it already: a no-op) */
  if (!shoal_workspace_lock (workspace, -1, error))
    return FALSE;
  if (resume ? !shoal_workspace_check_resume (workspace, conf, error) : !move_aside (workspace, overwrite, moved_to, error))
    return FALSE;
  /* the conf as run, overrides applied: the run can be repeated from it */
  char *path = g_build_filename (workspace, "job.conf", NULL);
  gboolean ok = g_key_file_save_to_file (shoal_conf_keyfile (conf), path, error);
  g_free (path);
  return ok;
}

GBytes *
shoal_workspace_clock_blob (double seconds)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  g_ascii_formatd (buf, sizeof buf, "%.6f", seconds);
  return g_bytes_new (buf, strlen (buf));
}

double
shoal_workspace_store_clock (ShoalCheckpoint *c, gint64 step)
{
  double t = -1;
  GBytes *b = c != NULL ? shoal_checkpoint_load (c, "clock", step, NULL) : NULL;
  if (b != NULL)
    {
      gsize len = 0;
      const char *data = g_bytes_get_data (b, &len);
      char *text = g_strndup (data, len);
      char *end = NULL;
      double v = g_ascii_strtod (text, &end);
      if (end != text && v >= 0)
        t = v;
      g_free (text);
      g_bytes_unref (b);
    }
  return t;
}

double
shoal_workspace_checkpoint_clock (const char *workspace, int rank, gint64 step)
{
  char *dir = shoal_checkpoint_dir (workspace, rank);
  ShoalCheckpoint *c = g_file_test (dir, G_FILE_TEST_IS_DIR) ? shoal_checkpoint_open (dir, FALSE, NULL) : NULL;
  g_free (dir);
  double t = shoal_workspace_store_clock (c, step);
  shoal_checkpoint_close (c);
  return t;
}

/* Which rank wrote a metrics line: its "rank", else the rank holding the
 * unit of its "group" and "worker", else rank 0. */
static int
line_owner (const char *line, const ShoalLayout *layout)
{
  double r, g, w;
  if (shoal_metrics_line_number (line, "rank", &r))
    return (int) r;
  if (shoal_metrics_line_number (line, "group", &g) && shoal_metrics_line_number (line, "worker", &w))
    for (int p = 0; p < layout->nprocs; p++)
      for (guint i = 0; i < layout->procs[p].workers->len; i++)
        {
          ShoalMember m = g_array_index (layout->procs[p].workers, ShoalMember, i);
          if (m.group == (int) g && m.index == (int) w)
            return p;
        }
  return 0;
}

/* The lines of `text` a resume keeps (see shoal_workspace_trim_metrics);
 * with a layout, only rank `rank`'s lines can go.  *dropped counts the
 * others; *resume_clock (may be NULL) as in shoal_workspace_trim_metrics,
 * from the lines `rank` wrote where a layout is given. */
static GString *
kept_lines (const char *text, gsize len, gint64 step, const gint64 *group_steps, int ngroups, double clock,
            const ShoalLayout *layout, int rank, int *dropped, double *resume_clock)
{
  GString *kept = g_string_sized_new (len);
  char **lines = g_strsplit (text, "\n", -1);
  *dropped = 0;
  for (int i = 0; lines[i] != NULL; i++)
    {
      if (lines[i][0] == '\0')
        continue;
      double s, t, g;
      gint64 limit = step;
      gboolean own = layout == NULL || line_owner (lines[i], layout) == rank;
      if (shoal_metrics_line_number (lines[i], "group", &g) && g >= 0 && g < ngroups)
        limit = group_steps[(int) g];
      gboolean past = shoal_metrics_line_number (lines[i], "step", &s) ? s > (double) limit
                      : clock >= 0 && shoal_metrics_line_number (lines[i], "time", &t) && t > clock;
      if (own && past)
        (*dropped)++;
      else
        {
          g_string_append_printf (kept, "%s\n", lines[i]);
          if (own && resume_clock != NULL && shoal_metrics_line_number (lines[i], "time", &t)
              && t > *resume_clock)
            *resume_clock = t;
        }
    }
  g_strfreev (lines);
  return kept;
}

gboolean
shoal_workspace_trim_metrics (const char *workspace, gint64 step, const gint64 *group_steps, int ngroups,
                              double clock, double *resume_clock, GError **error)
{
  if (resume_clock != NULL)
    *resume_clock = clock;
  char *path = g_build_filename (workspace, "metrics.jsonl", NULL);
  char *text = NULL;
  gsize len = 0;
  GError *e = NULL;
  if (!g_file_get_contents (path, &text, &len, &e))
    {
      gboolean missing = g_error_matches (e, G_FILE_ERROR, G_FILE_ERROR_NOENT);
      if (!missing)
        g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s", e->message);
      g_error_free (e);
      g_free (path);
      return missing;
    }
  int dropped = 0;
  GString *kept = kept_lines (text, len, step, group_steps, ngroups, clock, NULL, 0, &dropped, resume_clock);
  gboolean ok = dropped == 0 || g_file_set_contents (path, kept->str, (gssize) kept->len, error);
  if (dropped > 0 && ok)
    g_message ("%s: %d line%s of the run past its checkpoint dropped", path, dropped, dropped == 1 ? "" : "s");
  g_string_free (kept, TRUE);
  g_free (text);
  g_free (path);
  return ok;
}

gboolean
shoal_workspace_trim_rank_metrics (const char *workspace, const ShoalLayout *layout, int rank, gint64 step,
                                   const gint64 *group_steps, int ngroups, double clock, double *resume_clock,
                                   GError **error)
{
  if (resume_clock != NULL)
    *resume_clock = clock;
  char *path = g_build_filename (workspace, "metrics.jsonl", NULL);
  int fd = open (path, O_RDWR | O_CLOEXEC);
  if (fd < 0)
    {
      gboolean missing = errno == ENOENT;
      if (!missing)
        g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: cannot open: %s", path, g_strerror (errno));
      g_free (path);
      return missing;
    }
  /* the other ranks append under this lock (metrics/metrics.c): the file
   * is rewritten in place, as their open files still point at it */
  GString *text = g_string_new (NULL);
  char buf[65536];
  ssize_t got = 0;
  gboolean ok = flock (fd, LOCK_EX) == 0;
  while (ok && (got = read (fd, buf, sizeof buf)) > 0)
    g_string_append_len (text, buf, got);
  ok = ok && got == 0;
  int dropped = 0;
  GString *kept = NULL;
  if (ok)
    {
      kept = kept_lines (text->str, text->len, step, group_steps, ngroups, clock, layout, rank, &dropped,
                         resume_clock);
      if (dropped > 0)
        ok = pwrite (fd, kept->str, kept->len, 0) == (ssize_t) kept->len && ftruncate (fd, (off_t) kept->len) == 0;
    }
  if (!ok)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: cannot trim rank %d's lines past the checkpoint: %s",
                 path, rank, g_strerror (errno));
  else if (dropped > 0)
    g_message ("%s: %d line%s of rank %d past its checkpoint dropped", path, dropped, dropped == 1 ? "" : "s",
               rank);
  close (fd);  /* and the lock with it */
  if (kept != NULL)
    g_string_free (kept, TRUE);
  g_string_free (text, TRUE);
  g_free (path);
  return ok;
}
