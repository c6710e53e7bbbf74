/* Runs a job in this process: builds the net, the server(s) and the
 * param client, starts the worker threads, waits for them.  This is the
 * same path whether the cluster has one worker or many; only the layout
 * (which parts live in this process, and how the client reaches the
 * servers) changes. */
#ifndef SHOAL_RUNNER_H
#define SHOAL_RUNNER_H

#include <glib.h>

#include "worker/job_run.h"

G_BEGIN_DECLS

/* Runs this process's part of the job: with opts->endpoints NULL the
 * whole layout must fit in one process; otherwise the part of rank
 * opts->rank.  result (may be NULL) gets the numbers of this process's
 * first worker (group, worker as in result->group / worker). */
gboolean shoal_run_job (ShoalJob *job, const ShoalRunOptions *opts, ShoalRunResult *result,
                        GError **error);

G_END_DECLS

#endif
