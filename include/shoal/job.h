/* Jobs: a whole job conf ([job], [updater], [cluster], layers) trained
 * by shoal's own loop, in this process, as `shoal run` trains a layout
 * that fits one process (one worker group; its workers as threads).
 * Layouts over several processes need `shoal run`'s launcher or `shoal
 * proc` under mpirun/srun, except on the virtual clock ([emulate] clock
 * = virtual), which emulates any layout in this process. */
#ifndef SHOAL_PUBLIC_JOB_H
#define SHOAL_PUBLIC_JOB_H

#include <glib.h>

G_BEGIN_DECLS

typedef struct _ShoalJob ShoalJob;

/* Loads and checks the conf at `path` with `overrides` ("section.key=
 * value", NULL-terminated, may be NULL) applied, and loads its [job]
 * plugins.  Returns a new job (shoal_job_free) or NULL with
 * SHOAL_ERROR_CONF naming file:line (or the -o), SHOAL_ERROR_IO, or a
 * plugin's error. */
ShoalJob *shoal_job_load (const char *path, const char *const *overrides, GError **error);
/* The same from text; `origin` names it in messages. */
ShoalJob *shoal_job_load_data (const char *text, const char *origin,
                               const char *const *overrides, GError **error);
void shoal_job_free (ShoalJob *job);

typedef struct {
  gint64 steps;            /* training steps run (all of them, unless stopped) */
  double test_loss;        /* the final test pass */
  double test_accuracy;    /* < 0 when the net has no accuracy layer */
  double samples_per_sec;
} ShoalTrainResult;

/* Trains the job into `workspace` (created with any parents it lacks;
 * its job.conf, metrics.jsonl and checkpoints), resuming from its newest
 * checkpoint when `resume`.  A fresh run into a workspace an earlier run
 * wrote moves that run's files to WORKSPACE/previous/N first.  result
 * may be NULL.  FALSE with:
 *  - SHOAL_ERROR_UNSUPPORTED: the layout needs several processes (and the
 *    clock is real), the net's device cannot be had, or another job is
 *    training in this process (a run sets process-wide state, BLAS and
 *    worker threads among it: one shoal_job_train at a time);
 *  - SHOAL_ERROR_CONF, SHAPE, MEMORY: the net's (shoal_net_new), or the
 *    job's conf where it does not fit the net (no input layer for data);
 *  - SHOAL_ERROR_DATA: the data, a checkpoint to resume from that is
 *    damaged or another run's, or a NaN loss;
 *  - SHOAL_ERROR_IO: the workspace or data cannot be read or written (a
 *    workspace another live run holds, nothing to resume from).
 * A run refused before it wrote anything leaves no folder it made. */
gboolean shoal_job_train (ShoalJob *job, const char *workspace, gboolean resume,
                          ShoalTrainResult *result, GError **error);

G_END_DECLS

#endif
