/* The metrics writer: whole lines, and a disk that will not take them
 * said so, not lost in silence. */
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "metrics/metrics.h"
#include "support/temp_tree.h"

static void
test_lines (void)
{
  char *dir = g_dir_make_tmp ("metrics-XXXXXX", NULL);
  char *path = g_build_filename (dir, "metrics.jsonl", NULL);
  GError *error = NULL;
  ShoalMetricsWriter *w = shoal_metrics_open (path, FALSE, &error);
  g_assert_no_error (error);
  shoal_metrics_write_fields (w, "train", "\"step\":1");
  shoal_metrics_write_fields (w, "train", "\"step\":2");
  shoal_metrics_close (w);
  char *text = NULL;
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  char **lines = g_strsplit (text, "\n", -1);
  g_assert_cmpint (g_strv_length (lines), ==, 3);
  g_assert_nonnull (strstr (lines[0], "\"step\":1"));
  g_assert_nonnull (strstr (lines[1], "\"step\":2"));
  g_assert_cmpstr (lines[2], ==, "");
  g_strfreev (lines);
  g_free (text);
  g_assert_true (shoal_test_remove_tree (dir));
  g_free (path);
  g_free (dir);
}

/* A full disk (/dev/full: every write is ENOSPC): the run's metrics
 * stopped at the last line that fitted, a half line after it, and no
 * word; now the first failed line warns at once and the close counts. */
static void
test_full_disk (void)
{
  if (!g_file_test ("/dev/full", G_FILE_TEST_EXISTS))
    {
      g_test_skip ("no /dev/full");
      return;
    }
  GError *error = NULL;
  ShoalMetricsWriter *w = shoal_metrics_open ("/dev/full", TRUE, &error);
  g_assert_no_error (error);
  g_test_expect_message (NULL, G_LOG_LEVEL_WARNING,
                         "/dev/full: cannot write a metrics line: No space left on device; lines are lost until "
                         "there is room again (the run goes on)");
  shoal_metrics_write_fields (w, "train", "\"step\":1");
  shoal_metrics_write_fields (w, "train", "\"step\":2");
  shoal_metrics_write_fields (w, "train", "\"step\":3");
  g_test_assert_expected_messages ();
  g_test_expect_message (NULL, G_LOG_LEVEL_WARNING, "/dev/full: 3 metrics lines could not be written");
  shoal_metrics_close (w);
  g_test_assert_expected_messages ();
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/metrics/lines", test_lines);
  g_test_add_func ("/metrics/full-disk", test_full_disk);
  return g_test_run ();
}
