/* `shoal import`: the command-line face of data/import.h.  It owns the
 * policy that library code should not: refusing to replace a dataset
 * without --force, the progress bar, messages and exit codes. */
#include <errno.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "data/import.h"
#include "tools/commands.h"

typedef struct {
  const char *what;
  gint64 start_us, last_us;
  int last_permille;
} Progress;

/* Draws "import idx [#######.......]  52%" on stderr, at most every 100 ms. */
static void
progress_draw (guint64 done, guint64 total, gpointer user_data)
{
  Progress *p = user_data;
  gint64 now = g_get_monotonic_time ();
  int permille = total > 0 ? (int) MIN (1000, done * 1000 / total) : 0;
  char bar[41];

  if (permille == p->last_permille || (now - p->last_us < 100000 && permille < 1000))
    return;
  p->last_permille = permille;
  p->last_us = now;
  for (int i = 0; i < 40; i++)
    bar[i] = i < permille * 40 / 1000 ? '#' : '.';
  bar[40] = '\0';
  fprintf (stderr, "\rimport %s [%s] %3d%%  %.1f s", p->what, bar, permille / 10,
           (now - p->start_us) / 1e6);
  fflush (stderr);
}

/* Refuses a non-empty out without force; with force removes the old LMDB
 * files only (never anything else the directory may hold). */
static gboolean
prepare_out (const char *out, gboolean force, gboolean *created, GError **error)
{
  GDir *dir;
  GError *local = NULL;
  gboolean empty = TRUE;

  *created = FALSE;
  if (!g_file_test (out, G_FILE_TEST_EXISTS))
    {
      *created = TRUE;
      return TRUE;
    }
  dir = g_dir_open (out, 0, &local);
  if (dir == NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: %s", out,
                   g_file_test (out, G_FILE_TEST_IS_DIR) ? local->message : "exists and is not a directory");
      g_error_free (local);
      return FALSE;
    }
  empty = g_dir_read_name (dir) == NULL;
  g_dir_close (dir);
  if (empty)
    return TRUE;
  if (!force)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO,
                   "%s exists and is not empty; use --force to replace the dataset in it", out);
      return FALSE;
    }
  static const char *const names[] = { "data.mdb", "lock.mdb" };
  for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
    {
      char *f = g_build_filename (out, names[i], NULL);
      if (g_unlink (f) != 0 && errno != ENOENT)
        {
          int e = errno;
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: cannot remove: %s", f, g_strerror (e));
          g_free (f);
          return FALSE;
        }
      g_free (f);
    }
  return TRUE;
}

static int
usage_error (GOptionContext *ctx, const char *cmd, const char *msg)
{
  char *help = g_option_context_get_help (ctx, TRUE, NULL);
  fprintf (stderr, "shoal import %s: %s\n\n%s", cmd, msg, help);
  g_free (help);
  return 2;
}

static int
import_main (int argc, char **argv, gboolean csv)
{
  char *images = NULL, *labels = NULL, *in = NULL, *out = NULL;
  int label_column = 0;
  gboolean skip_header = FALSE, force = FALSE, created = FALSE, ok;
  GError *error = NULL;
  ShoalImportStats stats = { 0 };
  const char *cmd = csv ? "csv" : "idx";
  int rc = 1;
  GOptionEntry idx_entries[] = {
    { "images", 0, 0, G_OPTION_ARG_FILENAME, &images, "IDX image file (magic 0x00000803), .gz or plain", "F" },
    { "labels", 0, 0, G_OPTION_ARG_FILENAME, &labels, "IDX label file (magic 0x00000801), .gz or plain", "F" },
    { "out", 0, 0, G_OPTION_ARG_FILENAME, &out, "dataset directory to create", "DIR" },
    { "force", 0, 0, G_OPTION_ARG_NONE, &force, "replace the dataset in a non-empty DIR", NULL },
    { NULL, 0, 0, 0, NULL, NULL, NULL }
  };
  GOptionEntry csv_entries[] = {
    { "in", 0, 0, G_OPTION_ARG_FILENAME, &in, "CSV file of numbers, .gz or plain", "F" },
    { "out", 0, 0, G_OPTION_ARG_FILENAME, &out, "dataset directory to create", "DIR" },
    { "label-column", 0, 0, G_OPTION_ARG_INT, &label_column,
      "0-based column of the integer label, -1 for none (default 0)", "N" },
    { "skip-header", 0, 0, G_OPTION_ARG_NONE, &skip_header, "the first line is a header", NULL },
    { "force", 0, 0, G_OPTION_ARG_NONE, &force, "replace the dataset in a non-empty DIR", NULL },
    { NULL, 0, 0, 0, NULL, NULL, NULL }
  };
  GOptionContext *ctx = g_option_context_new (csv ? "- make an LMDB dataset from a CSV file"
                                              : "- make an LMDB dataset from IDX files (MNIST, Fashion-MNIST)");
  char *prgname = g_strdup_printf ("shoal import %s", cmd);

  g_set_prgname (prgname);
  g_option_context_add_main_entries (ctx, csv ? csv_entries : idx_entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    {
      rc = usage_error (ctx, cmd, error->message);
      goto done;
    }
  if (argc > 1)
    {
      char *msg = g_strdup_printf ("unexpected argument '%s'", argv[1]);
      rc = usage_error (ctx, cmd, msg);
      g_free (msg);
      goto done;
    }
  if (out == NULL || (csv ? in == NULL : images == NULL || labels == NULL))
    {
      rc = usage_error (ctx, cmd, csv ? "--in and --out are required"
                        : "--images, --labels and --out are required");
      goto done;
    }
  if (csv && label_column < -1)
    {
      rc = usage_error (ctx, cmd, "--label-column must be -1 or a column index");
      goto done;
    }

  if (!prepare_out (out, force, &created, &error))
    goto fail;

  Progress progress = { .what = cmd, .start_us = g_get_monotonic_time (), .last_permille = -1 };
  gboolean tty = isatty (2);
  if (csv)
    ok = shoal_import_csv (in, out, label_column, skip_header, tty ? progress_draw : NULL,
                           &progress, &stats, &error);
  else
    ok = shoal_import_idx (images, labels, out, tty ? progress_draw : NULL, &progress, &stats,
                           &error);
  if (tty && progress.last_permille >= 0)
    fputc ('\n', stderr);
  if (!ok)
    {
      if (created)
        g_rmdir (out);
      goto fail;
    }

  {
    char *shape = shoal_shape_to_string (&stats.shape);
    char *data = g_build_filename (out, "data.mdb", NULL);
    GStatBuf st;
    double mib = g_stat (data, &st) == 0 ? st.st_size / 1048576.0 : 0;
    printf ("%s: %" G_GUINT64_FORMAT " records of %s %s, %.1f MiB, in %.2f s\n", out,
            stats.records, shape, stats.kind == SHOAL_RECORD_PIXELS ? "pixels" : "floats", mib,
            (g_get_monotonic_time () - progress.start_us) / 1e6);
    g_free (shape);
    g_free (data);
  }
  rc = 0;
  goto done;

fail:
  fprintf (stderr, "shoal import %s: %s\n", cmd, error->message);
  rc = 1;
done:
  g_clear_error (&error);
  g_option_context_free (ctx);
  g_free (prgname);
  g_free (images);
  g_free (labels);
  g_free (in);
  g_free (out);
  return rc;
}

int
shoal_cmd_import (int argc, char **argv)
{
  static const char usage[] =
    "usage: shoal import idx --images F --labels F --out DIR [--force]\n"
    "       shoal import csv --in F --out DIR [--label-column N] [--skip-header] [--force]\n"
    "Makes an LMDB dataset of Thrift Records; inputs may be gzip-compressed.\n"
    "`shoal import idx --help` and `shoal import csv --help` list the options.\n";

  if (argc >= 2 && strcmp (argv[1], "idx") == 0)
    return import_main (argc - 1, argv + 1, FALSE);
  if (argc >= 2 && strcmp (argv[1], "csv") == 0)
    return import_main (argc - 1, argv + 1, TRUE);
  if (argc >= 2 && (strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0))
    {
      fputs (usage, stdout);
      return 0;
    }
  if (argc >= 2)
    fprintf (stderr, "shoal import: unknown format '%s'\n", argv[1]);
  fputs (usage, stderr);
  return 2;
}
