/* A worker: one thread running the BP training loop on its net.  When
 * the k workers of a group share a process, the net is the group's
 * partitioned net (src/partition/partition.h) whose other k - 1 workers
 * are threads of the group net; to the servers the group is then one
 * worker that sends the group's summed gradient.
 *
 * Each step: wait until the last step's params came back, forward,
 * backward; as soon as a layer's param gradients are complete the param
 * client sends the slices they complete, so communication overlaps the
 * rest of backward.
 * Progress goes to the log every disp_freq steps and to metrics.jsonl;
 * the test set is evaluated every test_freq steps and at the end. */
#ifndef SHOAL_WORKER_H
#define SHOAL_WORKER_H

#include <glib.h>

#include "cluster/emulate_conf.h"
#include "comm/param_client.h"
#include "partition/partition.h"
#include "job/job.h"
#include "metrics/metrics.h"

G_BEGIN_DECLS

/* The train line's window: what the steps since the last line add up. */
typedef struct {
  double loss, acc;                /* sums over the steps */
  double compute_s, wait_s;        /* the caller's clock: seconds computing, waiting for the servers */
  gint64 samples;
  int steps;
  gboolean has_accuracy;           /* the net reports an accuracy (the metric of type accuracy) */
  ShoalOtherMetrics others;
} ShoalTrainWindow;

typedef struct _ShoalWorker {
  const ShoalJob *job;             /* borrowed */
  ShoalGroupNet *net;              /* borrowed: the worker's (partitioned) net; k = 1 is a plain net */
  ShoalParamClient *client;        /* borrowed */
  ShoalMetricsWriter *metrics;     /* borrowed, may be NULL */
  int group, worker;
  gboolean log_progress;           /* g_message progress lines */
  gboolean tester;                 /* runs the test phase (worker 0 of each group) */
  gint64 start_step;               /* 0, or the step a resumed run continues from */
  /* Called at step boundaries with every slice at that step's version:
   * every checkpoint_freq steps, at the end, and when a stop was asked. */
  gboolean (*checkpoint) (struct _ShoalWorker *worker, gint64 step, GError **error);
  gpointer checkpoint_data;
  gint64 *stop_step;               /* shared by the process's workers: stop at this step (atomic); may be NULL */
  ShoalSlowdown *slowdown;         /* [emulate]: how much longer this unit's steps take; borrowed, may be NULL */
  /* SYNC with other units pushing for the same steps from other processes
   * (a batch-split group spread over processes): a stop there can make
   * the servers refuse a step this unit began (shoal_param_client_stop_at),
   * so it keeps its state from each step's start, for checkpoint() */
  gboolean keep_step_state;
  GBytes *step_state;              /* that state; owned, NULL outside shoal_worker_train */
  gboolean stopped;                /* result: stopped early on request */
  gboolean gave_up_step;           /* result, with stopped: step steps_done was begun and given up
                                    * (another unit stopped there); checkpoint() must save
                                    * step_state, not the net's state now */

  /* results */
  gint64 steps_done;
  gint64 steps_skipped;            /* steps a late unit skipped to catch up (backup workers) */
  gint64 samples_seen;             /* rows trained on (metrics.jsonl's "samples") */
  ShoalTrainWindow window;         /* kept in checkpoints with samples_seen (shoal_worker_save_progress) */
  gboolean budget_end;             /* with stopped: [job] max_seconds ended training, the unit tested
                                    * as at train_steps */
  double test_loss, test_accuracy; /* of the last test run; accuracy < 0 if the net has none */
  double train_samples_per_sec;    /* over the whole run, test time excluded */
  GError *error;                   /* set when training stopped on an error */
} ShoalWorker;

typedef struct {
  double loss;
  double accuracy;   /* < 0 when the net has no accuracy layer */
  gint64 samples;
  ShoalOtherMetrics others;  /* the other metric layers' means */
} ShoalEvalResult;

/* ---- one step and its lines, as every clock runs them (the real
 * worker loop below and the virtual clock, emulate/emulator.c) ---------- */

/* One training step's computation: forward and backward of the unit's
 * net and the updater's gradient clipping.  ready (may be NULL) is
 * called as each layer's gradients are final, unless clipping needs the
 * whole gradient first.  Returns the loss; not finite: the run fails. */
double shoal_worker_compute_step (ShoalGroupNet *net, const ShoalUpdaterConf *updater, ShoalParamsReadyFunc ready,
                                  gpointer data);
/* The step's loss, metrics (the accuracy rule: shoal_metrics_accuracy)
 * and rows into the window; returns the rows. */
int shoal_train_window_add (ShoalTrainWindow *window, ShoalGroupNet *net, double loss);
/* Ends the window at `step` (the steps done) after `seconds` of training
 * on the caller's clock: the line to the log (log; unit_note follows the
 * samples/s) and to metrics (may be NULL; its time is the caller's), then
 * the window starts again.  Returns samples per second. */
double shoal_train_window_line (ShoalTrainWindow *window, ShoalMetricsWriter *metrics, gboolean log, int group,
                                int worker, gint64 step, gint64 samples_seen, double seconds, double peer_wait_s,
                                const char *unit_note);
/* A test pass at `step`: its line to the log (log) and to metrics (may
 * be NULL). */
ShoalEvalResult shoal_worker_test (ShoalGroupNet *net, const ShoalJob *job, ShoalMetricsWriter *metrics,
                                   gboolean log, int group, int worker, gint64 step, gint64 samples_seen);
/* What the unit's metrics carry from step to step - samples_seen and
 * the display window under way - as a checkpoint blob, so that a resumed
 * run writes the lines an uninterrupted one would.  Load: FALSE with
 * error when the blob is not one. */
GBytes *shoal_worker_save_progress (const ShoalWorker *w);
gboolean shoal_worker_load_progress (ShoalWorker *w, GBytes *blob, GError **error);

/* Asks every worker of the process to stop at its next step boundary,
 * with a checkpoint (async-signal-safe: SIGINT / SIGTERM handlers). */
void shoal_worker_request_stop (void);
gboolean shoal_worker_stop_requested (void);

/* Asks every worker of the process to give up at its next step boundary,
 * without a checkpoint: the job cannot go on (a process it needs was
 * lost, run/membership.h); workers then fail with SHOAL_ERROR_LOST.
 * shoal_worker_abort_reset clears it for the next job of the process. */
void shoal_worker_abort (void);
gboolean shoal_worker_abort_requested (void);
void shoal_worker_abort_reset (void);

/* Runs the whole training loop in the calling thread; FALSE with
 * worker->error on failure.  Moves the process's progress counter
 * (server/liveness.h) at every step and test batch. */
gboolean shoal_worker_train (ShoalWorker *worker);
/* Evaluates the net on the test phase: `batches` batches, or the whole
 * test set when 0. */
ShoalEvalResult shoal_worker_evaluate (ShoalGroupNet *net, int batches);
/* The batches shoal_worker_evaluate (net, batches) runs: `batches`, or
 * with 0 the test set's (at least 1). */
int shoal_worker_test_batches (ShoalGroupNet *net, int batches);

G_END_DECLS

#endif
