/* What `[job] threads` means: the cores one process may use.  The
 * process's worker threads and the threads each of their BLAS calls runs
 * share them, so that nothing oversubscribes: k workers on T cores get
 * T / k BLAS threads each (at least 1).  Two pools of spinning threads on
 * the same cores cost 2-2.6x (shared/PERF_NOTES.md), so a conf that
 * oversubscribes anyway (more workers than cores, more cores than the
 * machine has) gets a warning that names the numbers.
 *
 * threads = 0 (the default): the machine's cores shared by every worker
 * thread on it (all ranks `shoal run` starts there, or `shoal proc
 * --host-workers`). */
#ifndef SHOAL_THREADS_H
#define SHOAL_THREADS_H

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  int cores;           /* the cores this process's workers share */
  int blas_threads;    /* threads of one BLAS call of one worker (>= 1) */
  int workers;         /* the worker threads sharing them */
  char *warning;       /* owned; NULL when nothing oversubscribes */
} ShoalThreadPlan;

/* requested: [job] threads (0: auto); local_workers: worker threads of
 * this process (0 for a process of servers only); host_workers: worker
 * threads of every process on this machine (0: just this one's);
 * machine_cores: the cores this process may run on.  Free plan->warning. */
void shoal_thread_plan (int requested, int local_workers, int host_workers, int machine_cores,
                        ShoalThreadPlan *plan);

/* Plans for this machine, sets the BLAS threads and OpenBLAS's idle spin,
 * logs the plan and warns where it oversubscribes.  Returns the BLAS
 * threads set. */
int shoal_threads_apply (int requested, int local_workers, int host_workers);

G_END_DECLS

#endif
