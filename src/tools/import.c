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
#include "data/text.h"
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

/* shoal import text --in F [--in F ...] [F ...] --out DIR --seq-len N:
 * files in the order given (the examples sort them, so an import is the
 * same on every machine). */
static int
import_text_main (int argc, char **argv)
{
  char **in = NULL, *out = NULL;
  int seq_len = -1;   /* -1: not given */
  double val_fraction = 0.05;
  gboolean any_bytes = FALSE, force = FALSE, created = FALSE;
  GError *error = NULL;
  ShoalTextStats stats = { 0 };
  int rc = 1;
  GOptionEntry entries[] = {
    { "in", 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &in,
      "text file (.gz or plain); repeat it, or list more files after the options", "F" },
    { "out", 0, 0, G_OPTION_ARG_FILENAME, &out, "directory to create: train/, val/, vocab.ini", "DIR" },
    { "seq-len", 0, 0, G_OPTION_ARG_INT, &seq_len, "bytes per sequence (the model's steps per batch)", "N" },
    { "val-fraction", 0, 0, G_OPTION_ARG_DOUBLE, &val_fraction,
      "the last F of the text is validation data (default 0.05; 0: none)", "F" },
    { "bytes", 0, 0, G_OPTION_ARG_NONE, &any_bytes, "accept any bytes, not only UTF-8 text", NULL },
    { "force", 0, 0, G_OPTION_ARG_NONE, &force, "replace the datasets in a non-empty DIR", NULL },
    { NULL, 0, 0, 0, NULL, NULL, NULL }
  };
  GOptionContext *ctx = g_option_context_new ("[FILE...] - make LMDB datasets of byte sequences for "
                                              "character models (text_input)");
  g_set_prgname ("shoal import text");
  g_option_context_add_main_entries (ctx, entries, NULL);
  GPtrArray *files = g_ptr_array_new ();
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    {
      rc = usage_error (ctx, "text", error->message);
      goto done;
    }
  for (int i = 0; in != NULL && in[i] != NULL; i++)
    g_ptr_array_add (files, in[i]);
  for (int i = 1; i < argc; i++)
    g_ptr_array_add (files, argv[i]);
  g_ptr_array_add (files, NULL);
  if (out == NULL || files->len == 1 || seq_len == -1)
    {
      rc = usage_error (ctx, "text", "--in, --out and --seq-len are required");
      goto done;
    }
  if (seq_len < 1 || seq_len > 1 << 20)
    {
      rc = usage_error (ctx, "text", "--seq-len must be 1 to 1048576");
      goto done;
    }
  if (!(val_fraction >= 0 && val_fraction < 1))
    {
      rc = usage_error (ctx, "text", "--val-fraction must be in [0, 1)");
      goto done;
    }
  char *train = g_build_filename (out, "train", NULL), *val = g_build_filename (out, "val", NULL);
  gboolean ok = prepare_out (train, force, &created, &error) && prepare_out (val, force, &created, &error);
  g_free (train);
  g_free (val);
  if (!ok)
    goto fail;
  gint64 t0 = g_get_monotonic_time ();
  if (!shoal_import_text ((const char *const *) files->pdata, out, seq_len, val_fraction, any_bytes, NULL, NULL,
                          &stats, &error))
    goto fail;
  printf ("%s: %" G_GUINT64_FORMAT " bytes, vocabulary of %d (set vocab_size = %d), %" G_GUINT64_FORMAT
          " training and %" G_GUINT64_FORMAT " validation sequences of %d, in %.2f s\n",
          out, stats.bytes, stats.vocab_size, stats.vocab_size, stats.train_sequences, stats.val_sequences,
          seq_len, (g_get_monotonic_time () - t0) / 1e6);
  rc = 0;
  goto done;

fail:
  fprintf (stderr, "shoal import text: %s\n", error->message);
  rc = 1;
done:
  g_clear_error (&error);
  g_option_context_free (ctx);
  g_ptr_array_free (files, TRUE);
  g_strfreev (in);
  g_free (out);
  return rc;
}

int
shoal_cmd_import (int argc, char **argv)
{
  static const char usage[] =
    "usage: shoal import idx --images F --labels F --out DIR [--force]\n"
    "       shoal import csv --in F --out DIR [--label-column N] [--skip-header] [--force]\n"
    "       shoal import text --in F [F ...] --out DIR --seq-len N [--val-fraction F] [--bytes] [--force]\n"
    "Makes an LMDB dataset of Thrift Records; inputs may be gzip-compressed.\n"
    "`shoal import FORMAT --help` lists the options of a format.\n";

  if (argc >= 2 && strcmp (argv[1], "idx") == 0)
    return import_main (argc - 1, argv + 1, FALSE);
  if (argc >= 2 && strcmp (argv[1], "csv") == 0)
    return import_main (argc - 1, argv + 1, TRUE);
  if (argc >= 2 && strcmp (argv[1], "text") == 0)
    return import_text_main (argc - 1, argv + 1);
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
