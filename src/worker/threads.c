/* Sharing a process's cores between its worker threads and their BLAS
 * threads; see threads.h. */
#include "worker/threads.h"

#include "core/blas_threads.h"
#include "core/parallel.h"

void
shoal_thread_plan (int requested, int local_workers, int host_workers, int machine_cores,
                   ShoalThreadPlan *plan)
{
  int cores = MAX (machine_cores, 1);
  int local = MAX (local_workers, 1);
  int host = MAX (host_workers, local);
  GString *warn = g_string_new (NULL);

  *plan = (ShoalThreadPlan) { 0 };
  if (requested <= 0)
    {
      /* every worker thread on the machine gets an equal share */
      plan->cores = cores;
      plan->workers = host;
      plan->blas_threads = MAX (1, cores / host);
      if (host > cores)
        g_string_append_printf (warn, "%d worker threads on this machine share its %d cores: "
                                "they oversubscribe it (fewer workers per machine, or more machines)",
                                host, cores);
    }
  else
    {
      int usable = requested;
      if (requested > cores)
        {
          g_string_append_printf (warn, "job.threads = %d, but this process may use %d cores: "
                                  "using %d", requested, cores, cores);
          usable = cores;
        }
      plan->cores = usable;
      plan->workers = local;
      plan->blas_threads = MAX (1, usable / local);
      if (local > usable)
        g_string_append_printf (warn, "%s%d worker threads in this process on job.threads = %d "
                                "core%s: each runs 1 BLAS thread and they still oversubscribe",
                                warn->len > 0 ? "; " : "", local, usable, usable == 1 ? "" : "s");
      int procs = (host + local - 1) / local;
      if (procs > 1 && procs * usable > cores)
        g_string_append_printf (warn, "%s%d processes with workers on this machine at job.threads = %d "
                                "each want %d cores; it has %d (leave job.threads at 0 to share them)",
                                warn->len > 0 ? "; " : "", procs, usable, procs * usable, cores);
    }
  plan->warning = g_string_free (warn, warn->len == 0);
}

int
shoal_threads_apply (int requested, int local_workers, int host_workers)
{
  ShoalThreadPlan plan;
  shoal_thread_plan (requested, local_workers, host_workers, (int) g_get_num_processors (), &plan);
  shoal_blas_set_threads (plan.blas_threads);
  int spin = shoal_blas_set_idle_spin (SHOAL_BLAS_IDLE_SPIN);
  /* element-wise loops (updates, sums) may use every core of the process */
  shoal_parallel_set_threads (plan.cores);
  if (plan.warning != NULL)
    g_warning ("threads: %s", plan.warning);
  g_message ("BLAS threads: %d (%d core%s, %d worker thread%s sharing them)", plan.blas_threads,
             plan.cores, plan.cores == 1 ? "" : "s", plan.workers, plan.workers == 1 ? "" : "s");
  if (spin >= 0)
    g_debug ("BLAS idle threads spin 2^%d cycles before they sleep", spin);
  g_free (plan.warning);
  return plan.blas_threads;
}
