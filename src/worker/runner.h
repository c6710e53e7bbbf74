/* Runs a job in this process: builds the net, the server(s) and the
 * param client, starts the worker threads, waits for them.  This is the
 * same path whether the cluster has one worker or many; only the layout
 * (which parts live in this process, and how the client reaches the
 * servers) changes. */
#ifndef SHOAL_RUNNER_H
#define SHOAL_RUNNER_H

#include <glib.h>

#include "worker/job.h"

G_BEGIN_DECLS

typedef struct {
  const char *workspace;   /* directory for metrics.jsonl and job.conf; created */
  gboolean quiet;          /* no progress lines */
} ShoalRunOptions;

typedef struct {
  gint64 steps;
  double test_loss;
  double test_accuracy;    /* < 0 when the net has no accuracy layer */
  double samples_per_sec;  /* training throughput of the run */
} ShoalRunResult;

gboolean shoal_run_job (ShoalJob *job, const ShoalRunOptions *opts, ShoalRunResult *result,
                        GError **error);

/* Sets and logs the BLAS threads of this process: `requested` or, when 0,
 * the cores divided among `local_workers`.  Returns the number set. */
int shoal_set_blas_threads (int requested, int local_workers);

G_END_DECLS

#endif
