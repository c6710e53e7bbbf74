/* marks: threads (they start threads: TSan runs this file in `make SANITIZE=thread test-threads`) */
/* [job] threads is the cores a process may use, shared by its worker
 * threads and their BLAS threads: these tests pin the split and the
 * warnings that name the numbers when a conf oversubscribes, and that the
 * BLAS knobs take effect. */
#include <glib.h>
#include <string.h>

#include "core/blas_threads.h"
#include "worker/threads.h"

static void
check (int requested, int local, int host, int cores, int want_cores, int want_blas,
       const char *warning_part)
{
  ShoalThreadPlan plan;
  shoal_thread_plan (requested, local, host, cores, &plan);
  g_assert_cmpint (plan.cores, ==, want_cores);
  g_assert_cmpint (plan.blas_threads, ==, want_blas);
  if (warning_part == NULL)
    g_assert_null (plan.warning);
  else
    {
      g_assert_nonnull (plan.warning);
      if (strstr (plan.warning, warning_part) == NULL)
        g_error ("warning '%s' lacks '%s'", plan.warning, warning_part);
    }
  g_free (plan.warning);
}

static void
test_auto (void)
{
  check (0, 1, 0, 2, 2, 2, NULL);           /* one worker takes both cores */
  check (0, 2, 0, 2, 2, 1, NULL);           /* a group of two: one BLAS thread each */
  check (0, 1, 2, 2, 2, 1, NULL);           /* two ranks with a worker each on the machine */
  check (0, 0, 0, 2, 2, 2, NULL);           /* a server process */
  check (0, 3, 0, 2, 2, 1, "3 worker threads on this machine share its 2 cores");
  check (0, 2, 4, 16, 16, 4, NULL);
}

static void
test_requested (void)
{
  check (2, 1, 0, 2, 2, 2, NULL);
  /* the case of issue 14: threads = 2 with two workers never gives each 2 */
  check (2, 2, 0, 2, 2, 1, NULL);
  check (4, 2, 0, 2, 2, 1, "job.threads = 4, but this process may use 2 cores: using 2");
  check (1, 2, 0, 2, 1, 1, "2 worker threads in this process on job.threads = 1 core");
  check (1, 1, 0, 8, 1, 1, NULL);
  check (6, 3, 0, 8, 6, 2, NULL);
  /* two processes on the machine that each want both cores */
  check (2, 1, 2, 2, 2, 2, "2 processes with workers on this machine at job.threads = 2 each want 4 cores");
  check (1, 1, 2, 2, 1, 1, NULL);
}

static void
test_blas_knobs (void)
{
  shoal_blas_set_threads (2);
  g_assert_cmpint (shoal_blas_threads (), ==, 2);
  int spin = shoal_blas_set_idle_spin (12);
  if (spin >= 0)
    {
      /* OpenBLAS: the pool restarted with the new spin, children inherit it */
      g_assert_cmpint (spin, ==, 12);
      g_assert_cmpstr (g_getenv ("OPENBLAS_THREAD_TIMEOUT"), ==, "12");
      g_assert_cmpint (shoal_blas_set_idle_spin (2), ==, 4);   /* OpenBLAS's floor */
    }
  shoal_blas_set_threads (1);
  g_assert_cmpint (shoal_blas_threads (), ==, 1);
}

int
main (int argc, char **argv)
{
  g_unsetenv ("OPENBLAS_THREAD_TIMEOUT");
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/threads/auto", test_auto);
  g_test_add_func ("/threads/requested", test_requested);
  g_test_add_func ("/threads/blas_knobs", test_blas_knobs);
  return g_test_run ();
}
