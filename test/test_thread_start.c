/* marks: threads (they start threads: TSan runs this file in `make SANITIZE=thread test-threads`) */
/* A thread that cannot start (no room for its stack under ulimit -v, too
 * many threads under ulimit -u) is an error naming it and what it is
 * for, never GLib's abort.  Each refusal runs in a subprocess whose
 * address space is capped a little above what it maps, below one thread
 * stack; e2e/ulimit_threads.sh provokes the same with ulimit -u in whole
 * runs. */
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "core/error.h"
#include "core/thread_start.h"
#include "support/address_limit.h"
#include "emulate/fault_timer.h"
#include "metrics/metrics.h"
#include "metrics/process_report.h"

static const char hint[] = " (no room for its stack under ulimit -v, or too many threads: ulimit -u)";

static void
assert_refused (const GError *error, const char *prefix)
{
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_MEMORY);
  if (!g_str_has_prefix (error->message, prefix) || !g_str_has_suffix (error->message, hint))
    g_error ("the error '%s' is not '%s...%s'", error->message, prefix, hint);
}

static gpointer
echo (gpointer data)
{
  return data;
}

/* A metrics file in a fresh directory, for the clock and the report. */
static ShoalMetricsWriter *
open_metrics (char **dir, char **path)
{
  GError *error = NULL;
  *dir = g_dir_make_tmp ("shoal-thread-start-XXXXXX", &error);
  g_assert_no_error (error);
  *path = g_build_filename (*dir, "metrics.jsonl", NULL);
  ShoalMetricsWriter *m = shoal_metrics_open (*path, FALSE, &error);
  g_assert_no_error (error);
  return m;
}

static void
close_metrics (ShoalMetricsWriter *m, char *dir, char *path)
{
  shoal_metrics_close (m);
  g_remove (path);
  g_rmdir (dir);
  g_free (path);
  g_free (dir);
}

static void
test_start (void)
{
  GError *error = NULL;
  int marker = 0;
  if (g_test_subprocess ())
    {
      shoal_test_refuse_threads ();
      g_assert_null (shoal_thread_start ("probe", echo, &marker, &error));
      assert_refused (error, "cannot start thread probe: ");
      g_error_free (error);
      shoal_test_uncap_address_space ();
      return;
    }
  GThread *t = shoal_thread_start ("probe", echo, &marker, &error);
  g_assert_no_error (error);
  g_assert_true (g_thread_join (t) == &marker);
  g_test_trap_subprocess (NULL, 60 * G_USEC_PER_SEC, 0);
  g_test_trap_assert_passed ();
}

static void
test_fault_timer (void)
{
  char *dir, *path;
  ShoalMetricsWriter *m = open_metrics (&dir, &path);
  GError *error = NULL;
  if (g_test_subprocess ())
    {
      shoal_test_refuse_threads ();
      g_assert_null (shoal_fault_timer_start (1000, m, "rank 1 (group 1)", &error));
      assert_refused (error, "rank 1 (group 1): [emulate] fault timer: cannot start thread fault-timer: ");
      g_error_free (error);
      shoal_test_uncap_address_space ();
      close_metrics (m, dir, path);
      return;
    }
  /* one that starts is stopped before its moment */
  ShoalFaultTimer *t = shoal_fault_timer_start (1000, m, "rank 1 (group 1)", &error);
  g_assert_no_error (error);
  g_assert_nonnull (t);
  shoal_fault_timer_stop (t);
  close_metrics (m, dir, path);
  g_test_trap_subprocess (NULL, 60 * G_USEC_PER_SEC, 0);
  g_test_trap_assert_passed ();
}

static void
test_process_report (void)
{
  char *dir, *path;
  ShoalMetricsWriter *m = open_metrics (&dir, &path);
  GError *error = NULL;
  if (g_test_subprocess ())
    {
      shoal_test_refuse_threads ();
      g_assert_null (shoal_process_report_start (m, 2, NULL, 1.0, &error));
      assert_refused (error, "rank 2: process report: cannot start thread process-report: ");
      g_clear_error (&error);
      /* interval 0 needs no thread: only the final line */
      ShoalProcessReport *r = shoal_process_report_start (m, 2, NULL, 0, &error);
      g_assert_no_error (error);
      shoal_process_report_stop (r);
      shoal_test_uncap_address_space ();
      close_metrics (m, dir, path);
      return;
    }
  ShoalProcessReport *r = shoal_process_report_start (m, 2, NULL, 1.0, &error);
  g_assert_no_error (error);
  shoal_process_report_stop (r);
  close_metrics (m, dir, path);
  g_test_trap_subprocess (NULL, 60 * G_USEC_PER_SEC, 0);
  g_test_trap_assert_passed ();
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/thread_start/start", test_start);
  g_test_add_func ("/thread_start/fault_timer", test_fault_timer);
  g_test_add_func ("/thread_start/process_report", test_process_report);
  return g_test_run ();
}
