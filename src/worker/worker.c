/* The BP training loop of one worker. */
#include "worker/worker.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/blas_threads.h"
#include "core/error.h"
#include "server/liveness.h"
#include "worker/push_hook.h"

int
shoal_worker_test_batches (ShoalGroupNet *net, int batches)
{
  if (batches > 0)
    return batches;
  ShoalLayer *input = shoal_group_net_input (net);
  int batch = shoal_group_net_batch_size (net);
  gint64 n = (input && input->ops->num_records) ? input->ops->num_records (input, SHOAL_PHASE_TEST) : 0;
  return n > 0 ? (int) ((n + batch - 1) / batch) : 1;
}

ShoalEvalResult
shoal_worker_evaluate (ShoalGroupNet *net, int batches)
{
  ShoalEvalResult r = { 0 };
  batches = shoal_worker_test_batches (net, batches);
  double loss_sum = 0, acc_sum = 0;
  gboolean has_acc = FALSE;
  for (int b = 0; b < batches; b++)
    {
      double loss = shoal_group_net_forward (net, SHOAL_PHASE_TEST);
      shoal_progress_note ();
      int rows = shoal_group_net_batch_rows (net);
      ShoalMetric m[16];
      guint nm = shoal_group_net_metrics (net, m, G_N_ELEMENTS (m));
      double acc = shoal_metrics_accuracy (m, nm);
      shoal_other_metrics_add (&r.others, m, nm, rows);
      loss_sum += loss * rows;
      if (acc >= 0)
        {
          acc_sum += acc * rows;
          has_acc = TRUE;
        }
      r.samples += rows;
    }
  r.loss = r.samples ? loss_sum / (double) r.samples : 0;
  r.accuracy = has_acc && r.samples ? acc_sum / (double) r.samples : -1;
  return r;
}

ShoalEvalResult
shoal_worker_test (ShoalGroupNet *net, const ShoalJob *job, ShoalMetricsWriter *metrics, gboolean log, int group,
                   int worker, gint64 step, gint64 samples_seen)
{
  ShoalEvalResult r = shoal_worker_evaluate (net, job->test_steps);
  if (log)
    {
      GString *others = g_string_new (NULL);
      shoal_other_metrics_append (&r.others, others);
      if (r.accuracy >= 0)
        g_message ("[group %d worker %d] step %" G_GINT64_FORMAT " test: loss %.4f accuracy %.4f%s (%" G_GINT64_FORMAT " samples)",
                   group, worker, step, r.loss, r.accuracy, others->str, r.samples);
      else
        g_message ("[group %d worker %d] step %" G_GINT64_FORMAT " test: loss %.4f%s (%" G_GINT64_FORMAT " samples)",
                   group, worker, step, r.loss, others->str, r.samples);
      g_string_free (others, TRUE);
    }
  ShoalMetricsRecord rec = { .step = step, .group = group, .worker = worker, .phase = "test",
                             .loss = r.loss, .accuracy = r.accuracy, .samples_per_sec = -1,
                             .samples = samples_seen, .peer_wait_s = -1, .others = &r.others };
  if (metrics != NULL)
    shoal_metrics_write (metrics, &rec);
  return r;
}

static void
run_test (ShoalWorker *w, gint64 step)
{
  ShoalEvalResult r = shoal_worker_test (w->net, w->job, w->metrics, w->log_progress, w->group, w->worker, step,
                                         w->samples_seen);
  w->test_loss = r.loss;
  w->test_accuracy = r.accuracy;
}

/* The updater's clipping of the step's whole gradient, where it is. */
static void
clip_step (ShoalGroupNet *net, const ShoalUpdaterConf *up)
{
  if (up->clip_value > 0 || up->clip_norm > 0)
    {
      /* where the gradient is: on the GPU for a net whose params or
       * gradients stay there, else in the host store */
      ShoalNet *first = shoal_group_net_worker (net, 0);
      ShoalParamStore *store = shoal_group_net_params (net);
      if (first != NULL && (shoal_net_params_on_device (first) || shoal_net_grads_on_device (first)))
        shoal_net_clip_gradients (first, up->clip_value, up->clip_norm);
      else
        shoal_clip_gradients (store->grads, store->total, up->clip_value, up->clip_norm);
    }
}

double
shoal_worker_compute_step (ShoalGroupNet *net, const ShoalUpdaterConf *up, ShoalParamsReadyFunc ready,
                           gpointer data)
{
  /* with clipping the whole gradient must exist before anything is sent */
  gboolean clip = up->clip_value > 0 || up->clip_norm > 0;
  double loss = shoal_group_net_train_step (net, clip ? NULL : ready, data);
  clip_step (net, up);
  return loss;
}

/* The net of a unit whose steps are read a step late: one GPU net whose
 * params stay on its device (net.h, shoal_net_train_step_late), so that
 * the host never waits for the step it just enqueued; NULL elsewhere. */
static ShoalNet *
late_net (ShoalGroupNet *net)
{
  ShoalNet *first = shoal_group_net_size (net) == 1 ? shoal_group_net_worker (net, 0) : NULL;
  return first != NULL && shoal_net_params_on_device (first) ? first : NULL;
}

int
shoal_train_window_add (ShoalTrainWindow *win, ShoalGroupNet *net, double loss)
{
  ShoalMetric m[16];
  guint nm = shoal_group_net_metrics (net, m, G_N_ELEMENTS (m));
  int rows = shoal_group_net_batch_rows (net);
  double acc = shoal_metrics_accuracy (m, nm);
  win->loss += loss;
  win->acc += acc;
  win->has_accuracy = acc >= 0;
  shoal_other_metrics_add (&win->others, m, nm, 1);
  win->samples += rows;
  win->steps++;
  return rows;
}

double
shoal_train_window_line (ShoalTrainWindow *win, ShoalMetricsWriter *metrics, gboolean log, int group, int worker,
                         gint64 step, gint64 samples_seen, double seconds, double peer_wait_s, const char *unit_note)
{
  double sps = seconds > 0 ? (double) win->samples / seconds : 0;
  double mean_loss = win->steps > 0 ? win->loss / win->steps : 0;
  double mean_acc = win->has_accuracy && win->steps > 0 ? win->acc / win->steps : -1;
  if (log)
    {
      GString *others = g_string_new (NULL);
      if (mean_acc >= 0)
        g_string_append_printf (others, " accuracy %.4f", mean_acc);
      shoal_other_metrics_append (&win->others, others);
      g_message ("[group %d worker %d] step %" G_GINT64_FORMAT " loss %.4f%s %.0f samples/s%s", group, worker, step,
                 mean_loss, others->str, sps, unit_note != NULL ? unit_note : "");
      g_string_free (others, TRUE);
    }
  ShoalMetricsRecord rec = { .step = step, .group = group, .worker = worker, .phase = "train", .loss = mean_loss,
                             .accuracy = mean_acc, .samples_per_sec = sps, .samples = samples_seen,
                             .compute_s = win->compute_s, .wait_s = win->wait_s, .peer_wait_s = peer_wait_s,
                             .others = &win->others };
  if (metrics != NULL)
    shoal_metrics_write (metrics, &rec);
  *win = (ShoalTrainWindow) { 0 };
  return sps;
}

#define PROGRESS_MAGIC 0x47525053u  /* "SPRG" */

typedef struct {
  guint32 magic, nothers;
  gint64 samples_seen, window_samples, window_steps;
  double window_loss, window_acc, others_weight;
  double others_sum[SHOAL_METRICS_MAX_OTHERS];
} ProgressBlob;

GBytes *
shoal_worker_save_progress (const ShoalWorker *w)
{
  ProgressBlob b = { PROGRESS_MAGIC, (guint32) w->window.others.n, w->samples_seen, w->window.samples,
                     w->window.steps, w->window.loss, w->window.acc, w->window.others.weight, { 0 } };
  memcpy (b.others_sum, w->window.others.sum, sizeof b.others_sum);
  return g_bytes_new (&b, sizeof b);
}

gboolean
shoal_worker_load_progress (ShoalWorker *w, GBytes *blob, GError **error)
{
  ProgressBlob b;
  gsize len = 0;
  const void *data = g_bytes_get_data (blob, &len);
  if (len != sizeof b || (memcpy (&b, data, sizeof b), b.magic != PROGRESS_MAGIC)
      || b.nothers > SHOAL_METRICS_MAX_OTHERS || b.samples_seen < 0 || b.window_steps < 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA, "[group %d worker %d] the checkpointed metrics "
                   "progress is damaged", w->group, w->worker);
      return FALSE;
    }
  w->samples_seen = b.samples_seen;
  /* the names come back with the window's next step */
  w->window = (ShoalTrainWindow) { .loss = b.window_loss, .acc = b.window_acc, .samples = b.window_samples,
                                   .steps = (int) b.window_steps,
                                   .others = { .n = (int) b.nothers, .weight = b.others_weight } };
  memcpy (w->window.others.sum, b.others_sum, sizeof b.others_sum);
  return TRUE;
}

static volatile gint stop_requested;

void
shoal_worker_request_stop (void)
{
  g_atomic_int_set (&stop_requested, 1);
}

gboolean
shoal_worker_stop_requested (void)
{
  return g_atomic_int_get (&stop_requested) != 0;
}

static gint abort_requested;

void
shoal_worker_abort (void)
{
  g_atomic_int_set (&abort_requested, 1);
}

gboolean
shoal_worker_abort_requested (void)
{
  return g_atomic_int_get (&abort_requested) != 0;
}

void
shoal_worker_abort_reset (void)
{
  g_atomic_int_set (&abort_requested, 0);
}

/* Lowers the process's stop step to `step` (the lowest wins). */
static void
lower_stop_step (ShoalWorker *w, gint64 step)
{
  gint64 cur = (gint64) g_atomic_pointer_get ((gssize *) w->stop_step);
  while (step < cur
         && !g_atomic_pointer_compare_and_exchange ((gssize *) w->stop_step, (gssize) cur, (gssize) step))
    cur = (gint64) g_atomic_pointer_get ((gssize *) w->stop_step);
}

/* Whether this worker stops at `step`.  The first worker of the process to
 * see a stop request picks step + 1 for all of them, so that a worker one
 * step behind still finishes the step the others need from it.  A worker
 * that the servers stopped (stop_with_group) lowers it for the others. */
static gboolean
stops_at (ShoalWorker *w, gint64 step)
{
  if (w->stop_step == NULL)
    return FALSE;
  if (shoal_worker_stop_requested ())
    lower_stop_step (w, step + 1);
  return step >= (gint64) g_atomic_pointer_get ((gssize *) w->stop_step);
}

/* The servers refused `step` (w->error is SHOAL_ERROR_STOPPED): a unit of
 * the group in another process stopped at it and never pushes it.  The
 * processes of a group picked their stop steps each from its own step
 * counter, one step apart at most; this worker went on into the step the
 * other stopped at.  It stops there too, as if it had never begun it: no
 * slice of the step was updated anywhere, and its checkpoint takes the
 * state kept from the step's start (w->step_state).  FALSE (w->error
 * explains) when that is not what happened. */
static gboolean
stop_with_group (ShoalWorker *w, gint64 step)
{
  if (!g_error_matches (w->error, SHOAL_ERROR, SHOAL_ERROR_STOPPED))
    return FALSE;
  gint64 at = shoal_param_client_stop_step (w->client);
  if (at != step || w->step_state == NULL)
    {
      GError *e = w->error;
      w->error = NULL;
      g_set_error (&w->error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL,
                   "[group %d worker %d] step %" G_GINT64_FORMAT ": %s; %s", w->group, w->worker, step,
                   e->message,
                   at != step ? "that is not the step this worker is in, so it cannot stop there"
                              : "this worker kept no state from before the step (no other unit pushes for it)");
      g_error_free (e);
      return FALSE;
    }
  g_clear_error (&w->error);
  w->steps_done = step;
  w->stopped = TRUE;
  w->gave_up_step = TRUE;
  /* no signal here: the unit that stopped first ended the time budget */
  w->budget_end = w->job->max_seconds > 0 && !shoal_worker_stop_requested ();
  lower_stop_step (w, step);  /* this process's other workers stop there too */
  return TRUE;
}

/* This unit stops at `step` (a stop request, the time budget) and tells
 * its servers (SYNC).  With backup workers the others may have applied
 * `step` and later ones without it: the servers then stop at the first
 * step none of their slices applied, and this unit goes on from there as
 * a late unit catches up (the newest values, once the step before it is
 * in everywhere), so that every process checkpoints the same step.
 * FALSE (w->error says why) when the servers could not be told. */
static gboolean
stop_at_servers (ShoalWorker *w, gint64 step)
{
  gint64 at = step;
  if (!shoal_param_client_stop_at (w->client, step, &at, &w->error))
    return FALSE;
  if (at <= step)
    return TRUE;
  if (!shoal_param_client_fetch_version (w->client, at, &w->error))
    return FALSE;
  g_message ("[group %d worker %d] stops at step %" G_GINT64_FORMAT " with its group (the other workers "
             "finished step %" G_GINT64_FORMAT " without it)", w->group, w->worker, at, at - 1);
  w->steps_skipped += at - step;
  w->steps_done = at;
  return TRUE;
}

/* Test hook: SHOAL_INJECT_STEP_DELAY="GROUP:MS" makes every worker of
 * GROUP sleep MS milliseconds per step, to show that other groups do not
 * wait for a slow one in asynchronous schemes; "GROUP:MS@FROM" only from
 * step FROM on, so that a test can be sure a run is still training when
 * its signal comes (a stop request ends the sleep).  Several groups take
 * comma-separated entries ("0:20,1:10"): a test that kills one group
 * while another must still be training paces both.  Returns
 * microseconds; *from is the first step delayed. */
static gint64
injected_delay_us (int group, gint64 *from)
{
  const char *spec = g_getenv ("SHOAL_INJECT_STEP_DELAY");
  *from = 0;
  if (spec == NULL)
    return 0;
  g_auto (GStrv) entries = g_strsplit (spec, ",", -1);
  for (char **e = entries; *e != NULL; e++)
    {
      int g = -1, ms = 0, first = 0;
      if (sscanf (*e, "%d:%d@%d", &g, &ms, &first) < 2 || g != group || ms <= 0)
        continue;
      *from = MAX (first, 0);
      g_message ("[group %d] test hook: %d ms delay per step from step %d", group, ms, MAX (first, 0));
      return (gint64) ms * 1000;
    }
  return 0;
}

/* The injected delay, cut short by a stop request (SIGINT, SIGTERM). */
static void
injected_sleep (gint64 us)
{
  gint64 end = g_get_monotonic_time () + us;
  for (gint64 now = g_get_monotonic_time (); now < end && !shoal_worker_stop_requested ();
       now = g_get_monotonic_time ())
    g_usleep ((gulong) MIN (end - now, 10 * 1000));
}

/* Test hook: SHOAL_INJECT_BOUNDARY_DELAY="GROUP:WORKER:MS" makes that
 * worker sleep MS milliseconds at every step boundary before it looks for
 * a stop request, so that the processes of a group spread over processes
 * see a signal at different steps (test/e2e/stop_sync_spread.sh).
 * Returns microseconds. */
static gint64
injected_boundary_delay_us (int group, int worker)
{
  const char *spec = g_getenv ("SHOAL_INJECT_BOUNDARY_DELAY");
  int g = -1, wk = -1, ms = 0;
  if (spec == NULL || sscanf (spec, "%d:%d:%d", &g, &wk, &ms) != 3 || g != group || wk != worker || ms <= 0)
    return 0;
  g_message ("[group %d worker %d] test hook: %d ms delay at each step boundary", group, worker, ms);
  return (gint64) ms * 1000;
}

/* Test hook: SHOAL_INJECT_WEDGE="GROUP@STEP" makes worker 0 of GROUP
 * spin on the CPU at step STEP as a wedged thread would, sending
 * heartbeats but making no progress (the liveness test); it ends only
 * when the job is given up (shoal_worker_abort).  Returns the step, or -1. */
static gint64
injected_wedge_step (int group, int worker)
{
  const char *spec = g_getenv ("SHOAL_INJECT_WEDGE");
  int g = -1, step = -1;
  if (spec == NULL || sscanf (spec, "%d@%d", &g, &step) != 2 || g != group || worker != 0 || step < 0)
    return -1;
  g_message ("[group %d] test hook: wedged at step %d", group, step);
  return step;
}

static void
injected_spin (void)
{
  volatile guint64 x = 0;
  while (!shoal_worker_abort_requested ())
    for (int i = 0; i < 1000000; i++)
      x += (guint64) i;
}

/* Seconds on the job's clock (the one of metrics.jsonl). */
static double
job_seconds (ShoalWorker *w, gint64 started_us)
{
  return w->metrics != NULL ? shoal_metrics_elapsed (w->metrics)
                            : (double) (g_get_monotonic_time () - started_us) / 1e6;
}

/* [job] max_seconds: whether the time budget is spent at this step
 * boundary.  Then the unit ends here as at train_steps; in SYNC it first
 * tells its servers, so that the group's units in other processes that
 * went on into this step stop at it too (stop_with_group) instead of
 * waiting for its gradient. */
static gboolean
budget_spent (ShoalWorker *w, gint64 step, gint64 started_us)
{
  if (w->job->max_seconds <= 0 || job_seconds (w, started_us) < w->job->max_seconds)
    return FALSE;
  g_message ("[group %d worker %d] time budget of %g s spent at step %" G_GINT64_FORMAT,
             w->group, w->worker, w->job->max_seconds, step);
  w->budget_end = TRUE;
  return TRUE;
}

static gboolean train_loop (ShoalWorker *w);

gboolean
shoal_worker_train (ShoalWorker *w)
{
  if (!shoal_blas_thread_headroom (&w->error))
    {
      g_prefix_error (&w->error, "[group %d worker %d] ", w->group, w->worker);
      return FALSE;
    }
  shoal_progress_training (TRUE);
  gboolean ok = train_loop (w);
  shoal_progress_training (FALSE);
  return ok;
}

/* What the training loop carries from step to step. */
typedef struct {
  gint64 wedge_step, started_us, delay_from, delay_us, boundary_delay_us;   /* SHOAL_TEST_* injections */
  ShoalPushStep push;          /* what each layer's push-ready hook sends */
  double train_seconds;        /* summed over the display windows, tests left out */
  gint64 total_samples;
  gint64 window_start;
  double peer_wait_before;     /* the group net's peer wait at the window's start */
  gint64 next_test;
  ShoalNet *late;              /* late_net: its steps' losses come a step late */
  gint64 unread;               /* late: the step whose loss is still to come; -1 none */
} TrainLoop;

static void
train_loop_init (ShoalWorker *w, TrainLoop *l)
{
  const ShoalJob *job = w->job;
  *l = (TrainLoop) { .wedge_step = injected_wedge_step (w->group, w->worker),
                     .started_us = g_get_monotonic_time (),
                     .boundary_delay_us = injected_boundary_delay_us (w->group, w->worker),
                     .push = { .client = w->client },
                     .window_start = g_get_monotonic_time (),
                     .peer_wait_before = shoal_group_net_peer_wait_seconds (w->net),
                     .next_test = job->test_freq > 0 ? (w->start_step / job->test_freq + 1) * job->test_freq
                                                     : G_MAXINT64,
                     .late = late_net (w->net), .unread = -1 };
  l->delay_us = injected_delay_us (w->group, &l->delay_from);
}

/* Waits for the values of *step; with backup workers, a unit whose
 * gradients came late got the newest values and goes on at their step
 * (*step moves there).  FALSE: the loop ends, *ok says whether well. */
static gboolean
await_step (ShoalWorker *w, gint64 *step, gboolean *ok)
{
  const ShoalJob *job = w->job;
  gint64 t_wait = g_get_monotonic_time ();
  if (*step > w->start_step && !shoal_param_client_wait (w->client, &w->error))
    {
      *ok = stop_with_group (w, *step - 1);
      return FALSE;
    }
  w->window.wait_s += (double) (g_get_monotonic_time () - t_wait) / 1e6;
  gint64 at = shoal_param_client_catch_up_step (w->client, *step);
  if (at > *step)
    {
      w->steps_skipped += at - *step;
      *step = at;
      w->steps_done = MIN (*step, job->train_steps);
      if (*step >= job->train_steps)
        return FALSE;
    }
  return TRUE;
}

/* Whether the loop ends before this step's compute: a process the job
 * needs was lost, the time budget is spent, or a stop was asked for at
 * this step (*ok: whether it ended well).  The test due at this step runs
 * first: the checkpoint then holds the test cursor past it, and a run
 * resumed from this step (which does not test it again) reads the test
 * batches an uninterrupted one would. */
static gboolean
ends_before (ShoalWorker *w, TrainLoop *l, gint64 step, gboolean *ok)
{
  const ShoalJob *job = w->job;
  if (l->boundary_delay_us > 0 && step > w->start_step)
    g_usleep ((gulong) l->boundary_delay_us);
  if (step == l->wedge_step)
    injected_spin ();
  if (shoal_worker_abort_requested ())
    {
      g_set_error (&w->error, SHOAL_ERROR, SHOAL_ERROR_LOST,
                   "[group %d worker %d] step %" G_GINT64_FORMAT ": the job cannot go on (a process "
                   "it needs was lost)", w->group, w->worker, step);
      *ok = FALSE;
      return TRUE;
    }
  if (step > w->start_step && budget_spent (w, step, l->started_us))
    {
      w->stopped = TRUE;
      *ok = !w->keep_step_state || stop_at_servers (w, step);
      return TRUE;
    }
  if (w->tester && step > w->start_step && step >= l->next_test)
    {
      /* >=: a unit that caught up (backup workers) may skip the step itself */
      gint64 t0 = g_get_monotonic_time ();
      run_test (w, step);
      l->next_test = (step / job->test_freq + 1) * job->test_freq;
      l->window_start += g_get_monotonic_time () - t0;  /* test time is not training time */
    }
  if (step > w->start_step && stops_at (w, step))
    {
      /* before the checkpoint: units of the group in other processes
       * that went on into this step wait for this one's push */
      w->stopped = TRUE;
      *ok = stop_at_servers (w, step);
      return TRUE;
    }
  return FALSE;
}

/* Before the step: the state it may have to be given up to
 * (stop_with_group) and the checkpoint due at it. */
static gboolean
save_step (ShoalWorker *w, gint64 step)
{
  const ShoalJob *job = w->job;
  if (w->keep_step_state)
    {
      if (w->step_state != NULL)
        g_bytes_unref (w->step_state);
      w->step_state = shoal_group_net_save_state (w->net, &w->error);
      if (w->step_state == NULL)
        return FALSE;
    }
  return !(step > w->start_step && job->checkpoint_freq > 0 && step % job->checkpoint_freq == 0
           && w->checkpoint != NULL && !w->checkpoint (w, step, &w->error));
}

/* Forward and backward in one wake-up of the group's workers, pushing
 * each layer's gradients as they are ready; an emulated straggler sends
 * nothing before its step's end.  Returns the step's loss; read late
 * (l->late), the loss of step *done (-1 when there was none). */
static double
compute_step (ShoalWorker *w, TrainLoop *l, gint64 step, gint64 *done)
{
  if (l->delay_us > 0 && step >= l->delay_from)
    injected_sleep (l->delay_us);
  l->push.step = step;
  gint64 t_compute = g_get_monotonic_time ();
  ShoalParamsReadyFunc ready = w->slowdown ? NULL : shoal_worker_push_ready;
  const ShoalUpdaterConf *up = &w->job->updater;
  double loss;
  *done = step;
  if (l->late != NULL)
    {
      gboolean previous = FALSE;
      loss = shoal_net_train_step_late (l->late, up->clip_value > 0 || up->clip_norm > 0 ? NULL : ready, &l->push,
                                        &previous);
      clip_step (w->net, up);
      *done = previous ? l->unread : -1;
      l->unread = step;
    }
  else
    loss = shoal_worker_compute_step (w->net, up, ready, &l->push);
  if (w->slowdown != NULL)
    {
      /* [emulate]: as if computing took (factor x) longer, plus delays */
      double extra = shoal_slowdown_extra_s (w->slowdown, (double) (g_get_monotonic_time () - t_compute) / 1e6);
      if (extra > 0)
        injected_sleep ((gint64) (extra * 1e6));
    }
  shoal_param_client_step_done (w->client, step);
  shoal_progress_note ();
  w->window.compute_s += (double) (g_get_monotonic_time () - t_compute) / 1e6;
  return loss;
}

/* A loss that is not finite ends the run: a spread group that lost one of
 * its processes, or a GPU failure, shows up as a NaN loss, so say so
 * when it is one. */
static gboolean
loss_ok (ShoalWorker *w, gint64 step, double loss)
{
  if (isfinite (loss))
    return TRUE;
  if (!shoal_group_net_ok (w->net, &w->error)
      || !shoal_net_device_error (shoal_group_net_worker (w->net, 0), &w->error))
    return FALSE;
  g_set_error (&w->error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL,
               "[group %d worker %d] step %" G_GINT64_FORMAT ": the loss is %g; lower [updater] lr?",
               w->group, w->worker, step, loss);
  return FALSE;
}

/* The step's rows and loss into the display window, and the window's
 * line when it is full or the run's last step is done. */
static void
account_step (ShoalWorker *w, TrainLoop *l, gint64 step, double loss)
{
  const ShoalJob *job = w->job;
  int rows = shoal_train_window_add (&w->window, w->net, loss);
  l->total_samples += rows;
  w->samples_seen += rows;
  w->steps_done = step + 1;
  if (w->window.steps == job->disp_freq || step + 1 == job->train_steps)
    {
      gint64 now = g_get_monotonic_time ();
      double secs = (double) (now - l->window_start) / 1e6;
      l->train_seconds += secs;
      double peer_wait = shoal_group_net_peer_wait_seconds (w->net);
      shoal_train_window_line (&w->window, w->metrics, w->log_progress, w->group, w->worker, step + 1,
                               w->samples_seen, secs, peer_wait - l->peer_wait_before, NULL);
      l->peer_wait_before = peer_wait;
      l->window_start = g_get_monotonic_time ();
    }
}

/* After the loop (ok: it ended well): the last step's updates in, the
 * final checkpoint, and the final test unless the run was stopped. */
static gboolean
finish_training (ShoalWorker *w, const TrainLoop *l, gboolean ok)
{
  if (ok && w->steps_done > w->start_step && !w->stopped)
    ok = shoal_param_client_wait (w->client, &w->error) || stop_with_group (w, w->steps_done - 1);
  else if (!ok)
    {
      GError *ignored = NULL;
      shoal_param_client_wait (w->client, &ignored);
      g_clear_error (&ignored);
    }
  w->train_samples_per_sec = l->train_seconds > 0 ? (double) l->total_samples / l->train_seconds : 0;
  if (ok && w->checkpoint != NULL)
    ok = w->checkpoint (w, w->steps_done, &w->error);
  if (w->step_state != NULL)
    g_bytes_unref (w->step_state);
  w->step_state = NULL;
  if (!ok)
    return FALSE;
  if (w->stopped && !w->budget_end)
    {
      g_message ("[group %d worker %d] stopped at step %" G_GINT64_FORMAT " %s; checkpoint saved",
                 w->group, w->worker, w->steps_done,
                 w->gave_up_step ? "with its group (a worker in another process stopped there)" : "on request");
      return TRUE;
    }
  if (w->tester)
    run_test (w, w->steps_done);
  return TRUE;
}

/* Read late: the step still unread, now (waiting for its forward). */
static gboolean
account_unread (ShoalWorker *w, TrainLoop *l)
{
  double loss;
  gint64 step = l->unread;
  l->unread = -1;
  if (step < 0 || !shoal_net_finish_step (l->late, &loss))
    return TRUE;
  if (!loss_ok (w, step, loss))
    return FALSE;
  account_step (w, l, step, loss);
  return TRUE;
}

static gboolean
train_loop (ShoalWorker *w)
{
  TrainLoop l;
  train_loop_init (w, &l);
  shoal_param_store_zero_grads (shoal_group_net_params (w->net));
  gint64 t_wait = g_get_monotonic_time ();
  if (!shoal_param_client_fetch (w->client, &w->error))
    return FALSE;
  w->window.wait_s += (double) (g_get_monotonic_time () - t_wait) / 1e6;
  w->steps_done = w->start_step;
  gboolean ok = TRUE;
  for (gint64 step = w->start_step; step < w->job->train_steps && ok; step++)
    {
      if (!await_step (w, &step, &ok) || ends_before (w, &l, step, &ok))
        break;
      if (!save_step (w, step))
        {
          ok = FALSE;
          break;
        }
      gint64 done;
      double loss = compute_step (w, &l, step, &done);
      if (done >= 0 && !loss_ok (w, done, loss))
        {
          ok = FALSE;
          break;
        }
      if (done >= 0)
        account_step (w, &l, done, loss);
      /* read late, the step's own line comes with the next step; a test
       * due then comes after it, as when read at once */
      if (l.late != NULL && (l.next_test <= step + 1 || step + 1 == w->job->train_steps))
        ok = account_unread (w, &l);
    }
  if (l.late != NULL && ok)
    ok = account_unread (w, &l);
  else if (l.late != NULL)
    shoal_net_finish_step (l.late, NULL);
  /* the last step's updates must be in before the final checkpoint and test */
  return finish_training (w, &l, ok);
}
