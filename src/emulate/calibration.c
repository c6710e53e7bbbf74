/* `shoal calibrate`'s measurements and their file (calibration.h). */
#include "emulate/calibration.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster/layout.h"
#include "comm/param_client.h"
#include "core/error.h"
#include "core/updater.h"
#include "server/rpc_client.h"
#include "server/rpc_server.h"
#include "server/server.h"
#include "worker/job_run.h"
#include "worker/push_hook.h"
#include "worker/threads.h"
#include "worker/worker.h"
#include "workspace/run_identity.h"

#define GROUP "calibration"

/* The keys absent from files made before they were measured (then 0),
 * each a number >= 0: first the passes of a process's other threads
 * (measure_service), in ns per byte, then the wire codecs' encoding and
 * decoding (measure_codecs), in ns per value. */
static const char *const optional_keys[] = {
  "pull_ns_per_byte", "sync_take_ns_per_byte", "sync_apply_ns_per_byte", "sync_merge_ns_per_byte",
  "encode_ns_per_value_fp16", "encode_ns_per_value_bf16", "encode_ns_per_value_2bit", "encode_ns_per_value_1bit",
  "decode_ns_per_value_fp16", "decode_ns_per_value_bf16", "decode_ns_per_value_2bit", "decode_ns_per_value_1bit",
};
#define N_SERVICE_KEYS 4
#define N_OPTIONAL_KEYS ((int) G_N_ELEMENTS (optional_keys))

static double *
optional_value (ShoalCalibration *cal, int i)
{
  double *values[] = {
    &cal->pull_ns_per_byte, &cal->sync_take_ns_per_byte, &cal->sync_apply_ns_per_byte, &cal->sync_merge_ns_per_byte,
    &cal->encode_ns_per_value[SHOAL_CODEC_FP16], &cal->encode_ns_per_value[SHOAL_CODEC_BF16],
    &cal->encode_ns_per_value[SHOAL_CODEC_2BIT], &cal->encode_ns_per_value[SHOAL_CODEC_1BIT],
    &cal->decode_ns_per_value[SHOAL_CODEC_FP16], &cal->decode_ns_per_value[SHOAL_CODEC_BF16],
    &cal->decode_ns_per_value[SHOAL_CODEC_2BIT], &cal->decode_ns_per_value[SHOAL_CODEC_1BIT],
  };
  G_STATIC_ASSERT (G_N_ELEMENTS (values) == G_N_ELEMENTS (optional_keys));
  return values[i];
}

/* The fingerprint calibration files carried before the rule of
 * workspace/run_identity.h (2026-11-27): every key of the [layer *]
 * sections but where the data are and the batch, every [updater] key
 * (its rates too), and alg.  A file made then still loads for the job
 * it was made for: a machine's calibration is a measurement that cannot
 * be remade once the machine is gone, and the figures made with it must
 * repeat.  New files carry shoal_model_fingerprint. */
static char *
fingerprint_before_run_identity (ShoalJob *job)
{
  GKeyFile *kf = shoal_conf_keyfile (job->conf);
  GString *text = g_string_new (NULL);
  char **groups = g_key_file_get_groups (kf, NULL);
  for (int i = 0; groups[i] != NULL; i++)
    {
      if (!g_str_has_prefix (groups[i], "layer ") && strcmp (groups[i], "updater") != 0)
        continue;
      g_string_append_printf (text, "[%s]\n", groups[i]);
      char **keys = g_key_file_get_keys (kf, groups[i], NULL, NULL);
      for (int k = 0; keys != NULL && keys[k] != NULL; k++)
        if (strcmp (keys[k], "train") != 0 && strcmp (keys[k], "test") != 0 && strcmp (keys[k], "data") != 0
            && strcmp (keys[k], "batch_size") != 0)
          {
            char *v = g_key_file_get_value (kf, groups[i], keys[k], NULL);
            g_string_append_printf (text, "%s=%s\n", keys[k], v != NULL ? g_strstrip (v) : "");
            g_free (v);
          }
      g_strfreev (keys);
    }
  g_string_append_printf (text, "alg=%d\n", job->cd_k);
  g_strfreev (groups);
  char *out = shoal_fingerprint_of_text (text->str);
  g_string_free (text, TRUE);
  return out;
}

/* VmRSS of /proc/self/status in bytes; 0 when unknown. */
static gint64
resident_bytes (void)
{
  char *status = NULL;
  gint64 kib = 0;
  if (g_file_get_contents ("/proc/self/status", &status, NULL, NULL))
    {
      const char *line = strstr (status, "VmRSS:");
      if (line != NULL)
        kib = g_ascii_strtoll (line + strlen ("VmRSS:"), NULL, 10);
    }
  g_free (status);
  return kib * 1024;
}

static int
by_value (gconstpointer a, gconstpointer b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

static double
median (const double *v, int n)
{
  double *s = g_memdup2 (v, sizeof (double) * (gsize) n);
  qsort (s, (size_t) n, sizeof (double), by_value);
  double m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  g_free (s);
  return m;
}

double
shoal_calibration_median_ms (const ShoalCalibration *cal)
{
  return cal->nsteps > 0 ? median (cal->step_ms, cal->nsteps) : 0;
}

double
shoal_calibration_ready_fraction (const ShoalCalibration *cal, size_t begin)
{
  size_t done_from = G_MAXSIZE;
  for (int i = 0; i < cal->n_ready; i++)
    {
      done_from = MIN (done_from, (size_t) cal->ready_from[i]);
      if (done_from <= begin)
        return cal->ready_fraction[i];
    }
  return 1.0;
}

/* A server of every param of `store` in `nslices` slices, applying the
 * job's updater to each push as it comes (NULL with error); with
 * keep_baseline, Hogwild's sync passes work on it too. */
static ShoalServer *
calibration_server (ShoalJob *job, ShoalParamStore *store, int nslices, gboolean keep_baseline, GError **error)
{
  ShoalServerOptions sopts = { .mode = SHOAL_UPDATE_ASYNC, .sync_contributors = 1, .nslices = nslices,
                               .keep_baseline = keep_baseline };
  ShoalServer *server = shoal_server_new (store, &job->updater, &sopts, error);
  if (server != NULL)
    shoal_server_host_all (server);
  return server;
}

/* A server's passes over every param as one slice: the update of a push
 * (PASS_UPDATE), and Hogwild's group sync: take_delta and merge_master
 * on the replica's side, apply_delta on the master's
 * (server/server_sync.c; elastic averaging's passes read and write as
 * many arrays).  The virtual clock charges the sync passes to the
 * process's cores (emulate/emulator.c, "a process's cores"); they come
 * in optional_keys' order, after the pull (measure_local_exchange). */
typedef enum { PASS_UPDATE, PASS_TAKE, PASS_APPLY, PASS_MERGE } ServerPass;

static gboolean
server_pass (ShoalServer *server, ServerPass pass, gint64 step, const float *in, float *out, size_t n,
             GError **error)
{
  gint64 version = 0;
  ShoalPushOrigin origin = { -1, -1 };
  switch (pass)
    {
    case PASS_UPDATE:
      return shoal_server_push_from (server, 0, in, n, step, &origin, &version, error);
    case PASS_TAKE:
      return shoal_server_take_delta (server, 0, out, n, error);
    case PASS_APPLY:
      return shoal_server_apply_delta (server, 0, in, out, n, error);
    case PASS_MERGE:
      return shoal_server_merge_master (server, 0, out, n, error);
    }
  g_return_val_if_reached (FALSE);
}

/* ns per byte of one pass over the n floats, the median of 9 after 2
 * warm-ups; with `between`, each after one of its training steps, as a
 * real process makes it: between two passes its worker's step has taken
 * the caches (back to back the pull cost about half as much on this
 * machine's EPYC); without, back to back, as a server process makes its
 * updates. */
static gboolean
time_pass (ShoalServer *server, ServerPass pass, ShoalGroupNet *between, const float *in, float *out, size_t n,
           double *ns_per_byte, GError **error)
{
  enum { WARM = 2, REPS = 9 };
  double t[REPS];
  for (int r = 0; r < WARM + REPS; r++)
    {
      if (between != NULL)
        {
          shoal_group_net_train_step (between, NULL, NULL);
          shoal_param_store_zero_grads (shoal_group_net_params (between));
        }
      gint64 t0 = g_get_monotonic_time ();
      if (!server_pass (server, pass, r, in, out, n, error))
        return FALSE;
      if (r >= WARM)
        t[r - WARM] = (double) (g_get_monotonic_time () - t0) * 1e3 / ((double) n * sizeof (float));
    }
  *ns_per_byte = median (t, REPS);
  return TRUE;
}

/* ns per byte of one server's update of every param (the job's updater,
 * one slice, one core). */
static gboolean
measure_update (ShoalJob *job, ShoalParamStore *store, double *ns_per_byte, GError **error)
{
  ShoalServer *server = calibration_server (job, store, 1, FALSE, error);
  if (server == NULL)
    return FALSE;
  size_t n = store->total;
  float *grad = g_new (float, n);
  for (size_t i = 0; i < n; i++)
    grad[i] = (float) ((int) (i % 17) - 8) * 1e-6f;
  gboolean ok = time_pass (server, PASS_UPDATE, NULL, grad, NULL, n, ns_per_byte, error);
  g_free (grad);
  shoal_server_free (server);
  return ok;
}

/* Slices of about 512 KiB, as the runner cuts a store of `total`
 * floats (shoal_runner_slice_count) where one server holds them all. */
static int
runner_slices (size_t total)
{
  size_t per = (512u << 10) / sizeof (float);
  return (int) MAX ((size_t) 1, (total + per - 1) / per);
}

/* The comm thread's exchange with a server in its own process beyond
 * that server's update (which the model charges the server): its copy
 * of the values back into the store, its zeroing of the gradients it
 * sent, its queue and the hand-offs between the worker's thread and it.
 * Through a real client (comm/param_client.c) routed to a server here,
 * every slice queued after one of net's training steps and waited for,
 * as a real step's end does (the median of 9 after 2 warm-ups), less
 * update_ns_per_byte: 0.045-0.085 ns/byte on the MLP here, where a pull
 * alone cost 0.043-0.05. */
static gboolean
measure_local_exchange (ShoalJob *job, ShoalGroupNet *net, double update_ns_per_byte, double *ns_per_byte,
                        GError **error)
{
  enum { WARM = 2, REPS = 9 };
  ShoalParamStore *store = shoal_group_net_params (net);
  int nslices = runner_slices (store->total);
  ShoalServer *server = calibration_server (job, store, nslices, FALSE, error);
  if (server == NULL)
    return FALSE;
  ShoalParamClient *client = shoal_param_client_new (store, nslices, SHOAL_UPDATE_ASYNC);
  for (int s = 0; s < nslices; s++)
    shoal_param_client_route_local (client, s, server);
  double t[REPS];
  gboolean ok = shoal_param_client_start (client, error);
  for (int r = 0; ok && r < WARM + REPS; r++)
    {
      shoal_group_net_train_step (net, NULL, NULL);
      gint64 t0 = g_get_monotonic_time ();
      shoal_param_client_step_done (client, r);
      ok = shoal_param_client_wait (client, error);
      if (r >= WARM)
        t[r - WARM] = (double) (g_get_monotonic_time () - t0) * 1e3 / ((double) store->total * sizeof (float));
    }
  shoal_param_client_free (client);
  shoal_server_free (server);
  if (ok)
    *ns_per_byte = MAX (0, median (t, REPS) - update_ns_per_byte);
  return ok;
}

/* The other passes of a process's threads, each after a step of net:
 * the comm thread's exchange with a server in its own process (the
 * first of optional_keys), Hogwild's sync passes (the next three). */
static gboolean
measure_service (ShoalJob *job, ShoalGroupNet *net, ShoalCalibration *out, GError **error)
{
  if (!measure_local_exchange (job, net, out->update_ns_per_byte, &out->pull_ns_per_byte, error))
    return FALSE;
  ShoalParamStore *store = shoal_group_net_params (net);
  ShoalServer *server = calibration_server (job, store, 1, TRUE, error);
  if (server == NULL)
    return FALSE;
  size_t n = store->total;
  float *delta = g_new (float, n), *buf = g_new0 (float, n);
  for (size_t i = 0; i < n; i++)
    delta[i] = (float) ((int) (i % 13) - 6) * 1e-7f;
  gboolean ok = TRUE;
  for (int i = 1; ok && i < N_SERVICE_KEYS; i++)
    ok = time_pass (server, PASS_TAKE + i - 1, net, delta, buf, n, optional_value (out, i), error);
  g_free (delta);
  g_free (buf);
  shoal_server_free (server);
  return ok;
}

/* The wire codecs' cost per value (core/codec.c), as a real client
 * encodes a remote slice's gradient and a server its reply's values, and
 * the other end decodes them: each codec over net's every param, its
 * gradient after a training step (the quantisers with a residual, as
 * error feedback keeps one) and its values, the median of 9 after 2
 * warm-ups.  2bit and 1bit read and write a residual beside the
 * gradient: their encoding costs several times fp16's. */
static void
measure_codecs (ShoalGroupNet *net, ShoalCalibration *out)
{
  enum { WARM = 2, REPS = 9 };
  ShoalParamStore *store = shoal_group_net_params (net);
  shoal_group_net_train_step (net, NULL, NULL);
  size_t n = store->total;
  float *residual = g_new0 (float, n), *decoded = g_new (float, n);
  guint8 *wire = g_malloc (MAX (shoal_codec_bytes (SHOAL_CODEC_FP32, n), (size_t) 1));
  for (int c = SHOAL_CODEC_FP16; c < SHOAL_CODEC_COUNT; c++)
    {
      ShoalCodec codec = (ShoalCodec) c;
      /* the values' codecs encode values, the quantisers gradients */
      const float *src = shoal_codec_lossy_feedback (codec) ? store->grads : store->values;
      double te[REPS], td[REPS];
      for (int r = 0; r < WARM + REPS; r++)
        {
          gint64 t0 = g_get_monotonic_time ();
          shoal_codec_encode (codec, src, residual, n, wire);
          gint64 t1 = g_get_monotonic_time ();
          shoal_codec_decode (codec, wire, shoal_codec_bytes (codec, n), decoded, n);
          gint64 t2 = g_get_monotonic_time ();
          if (r >= WARM)
            {
              te[r - WARM] = (double) (t1 - t0) * 1e3 / (double) n;
              td[r - WARM] = (double) (t2 - t1) * 1e3 / (double) n;
            }
        }
      out->encode_ns_per_value[c] = median (te, REPS);
      out->decode_ns_per_value[c] = median (td, REPS);
    }
  shoal_param_store_zero_grads (store);
  g_free (residual);
  g_free (decoded);
  g_free (wire);
}

/* Round trips of `reps` push-and-pulls of slice `slice` through a
 * running server and client (after `warm` untimed), as microseconds
 * each, into t. */
static gboolean
time_round_trips (ShoalRpcClient *client, int slice, float *grad, float *values, size_t n, int warm, int reps,
                  double *t, GError **error)
{
  for (int r = 0; r < warm + reps; r++)
    {
      gint64 t0 = g_get_monotonic_time (), version = 0;
      if (!shoal_rpc_client_push_pull (client, slice, grad, values, n, r, &version, error))
        return FALSE;
      if (r >= warm)
        t[r - warm] = (double) (g_get_monotonic_time () - t0);
    }
  return TRUE;
}

/* A server of `store` in `nslices` slices on loopback and a client of it,
 * as a run's processes talk (no link limit). */
typedef struct {
  ShoalServer *server;
  ShoalRpcServer *rpc;
  ShoalRpcClient *client;
} LoopbackServer;

static void
loopback_server_free (LoopbackServer *l)
{
  if (l->client != NULL)
    shoal_rpc_client_free (l->client);
  if (l->rpc != NULL)
    shoal_rpc_server_stop (l->rpc);
  if (l->server != NULL)
    shoal_server_free (l->server);
}

static gboolean
loopback_server_start (ShoalJob *job, ShoalParamStore *store, int nslices, LoopbackServer *l, GError **error)
{
  memset (l, 0, sizeof *l);
  l->server = calibration_server (job, store, nslices, FALSE, error);
  if (l->server == NULL)
    return FALSE;
  ShoalRpcServerOptions ro = { .bind_address = "127.0.0.1", .token = "calibrate" };
  l->rpc = shoal_rpc_server_start (l->server, &ro, error);
  if (l->rpc != NULL)
    {
      ShoalRpcClientOptions co = { .host = "127.0.0.1", .port = shoal_rpc_server_port (l->rpc), .token = "calibrate" };
      l->client = shoal_rpc_client_connect (&co, error);
    }
  if (l->client == NULL)
    {
      loopback_server_free (l);
      return FALSE;
    }
  return TRUE;
}

/* What a message costs beyond its bytes' wire time: a fixed part (the
 * calls into the kernel, the receiver's wake-up, Thrift's framing) and a
 * part per byte (serialising, the copies at both ends).  The fixed part
 * is half the round trip of a push-and-pull of a few values (median of
 * 200); the part per byte, from the runner's slices (about 512 KiB)
 * pushed and pulled one call at a time as the comm thread makes them
 * (median of 21 passes over the model: of 5, six calibrations here read
 * 0.09-0.17 ns/byte, of 21, 0.09-0.13): the round trip less the update
 * and the two messages' fixed part, over both directions' bytes.  Both
 * through a real server over loopback with no link limit, on this
 * machine as it is now: a loaded machine's slow wake-ups are in the
 * fixed part.  The model adds this time to the wire's: a message's
 * last bytes are read, and the message decoded, only once they have
 * crossed (docs/SCALE.md, Validation). */
static gboolean
measure_rpc (ShoalJob *job, ShoalParamStore *store, double update_ns_per_byte, double *message_us,
             double *ns_per_byte, GError **error)
{
  enum { FEW = 16, SMALL_WARM = 20, SMALL_REPS = 200, WARM = 2, REPS = 21 };
  ShoalParamStore *few = shoal_param_store_new ();
  ShoalInitSpec init = { .kind = SHOAL_INIT_CONSTANT };
  ShoalShape shape = shoal_shape_make (1, FEW);
  shoal_param_store_declare (few, "calibrate/few", &shape, &init, FEW, FEW, 1, 1);
  float small[2][FEW] = { { 0 } };
  double t_small[SMALL_REPS];
  LoopbackServer l;
  gboolean ok = shoal_param_store_allocate (few, error) && loopback_server_start (job, few, 1, &l, error);
  if (ok)
    {
      ok = time_round_trips (l.client, 0, small[0], small[1], FEW, SMALL_WARM, SMALL_REPS, t_small, error);
      loopback_server_free (&l);
    }
  shoal_param_store_free (few);

  size_t total = store->total;
  int nslices = runner_slices (total);
  float *grad = g_new0 (float, total), *values = g_new (float, total);
  double t[REPS];
  if (ok && (ok = loopback_server_start (job, store, nslices, &l, error)))
    {
      for (int r = 0; ok && r < WARM + REPS; r++)
        {
          gint64 t0 = g_get_monotonic_time ();
          for (int s = 0; ok && s < nslices; s++)
            {
              size_t b, e;
              shoal_slice_range (total, nslices, s, &b, &e);
              gint64 version = 0;
              ok = shoal_rpc_client_push_pull (l.client, s, grad + b, values + b, e - b, r, &version, error);
            }
          if (r >= WARM)
            t[r - WARM] = (double) (g_get_monotonic_time () - t0);
        }
      loopback_server_free (&l);
    }
  if (ok)
    {
      *message_us = median (t_small, SMALL_REPS) / 2;
      double bytes = (double) total * sizeof (float);
      double beyond_fixed_us = MAX (0, median (t, REPS) - 2 * nslices * *message_us);
      *ns_per_byte = MAX (0, (beyond_fixed_us * 1e3 / bytes - update_ns_per_byte) / 2);
    }
  else
    g_prefix_error (error, "calibrating the transport (a server on loopback): ");
  g_free (grad);
  g_free (values);
  return ok;
}

/* One of `concurrent` workers timing its steps (measure_compute): after
 * its warm-up it waits for the others at the start line, then times its
 * steps until it has enough, and keeps stepping, untimed, until every
 * worker has enough, so that each timed step ran with all the others
 * busy.  (Rewriting the params between steps, as a real worker's are by
 * its update or pull, made no difference to the median: 4 interleaved
 * pairs on the MLP, within 3 %, either way.) */
typedef struct {
  ShoalGroupNet *net;
  const ShoalCalibrationPlan *plan;
  GArray *step_ms;
  struct StartLine *line;
  /* the backward's hand-offs (note_ready): this step's, as (param offset,
   * monotonic us) pairs; every timed step's fractions of its time, per
   * hand-off; the offsets, which every step must repeat */
  GArray *marks;
  GArray *fractions;     /* doubles, hand-off after hand-off, step after step */
  GArray *ready_from;    /* ints, from the first timed step */
  gboolean ready_differ; /* a step's hand-offs were not the first's: none kept */
  double test_ms;        /* its timed test batches (timed_test_batch): their time and rows */
  gint64 test_rows;
} CalibrationWorker;

typedef struct {
  size_t from;
  gint64 at;
} ReadyMark;

struct StartLine {
  GMutex lock;
  GCond all_warm;
  int warm;          /* workers past their warm-up */
  int n;
  int timing;        /* workers still timing */
};

/* The net's backward hook, as a real worker's (worker/push_hook.c): the
 * gradients from the layer's params on are final now. */
static void
note_ready (ShoalLayer *layer, gpointer data)
{
  CalibrationWorker *w = data;
  size_t from = shoal_worker_ready_from (layer);
  if (from == G_MAXSIZE)
    return;
  ReadyMark m = { from, g_get_monotonic_time () };
  g_array_append_val (w->marks, m);
}

/* Keeps a timed step's hand-offs as fractions of its time t0..t1. */
static void
keep_ready (CalibrationWorker *w, gint64 t0, gint64 t1)
{
  GArray *marks = w->marks;
  if (w->ready_from->len == 0 && w->fractions->len == 0)
    for (guint i = 0; i < marks->len; i++)
      {
        /* the file's integers: a model past 2^31 params keeps none */
        size_t from = g_array_index (marks, ReadyMark, i).from;
        int at = from <= G_MAXINT ? (int) from : -1;
        w->ready_differ |= at < 0;
        g_array_append_val (w->ready_from, at);
      }
  gboolean same = marks->len == w->ready_from->len;
  for (guint i = 0; same && i < marks->len; i++)
    same = g_array_index (marks, ReadyMark, i).from == (size_t) g_array_index (w->ready_from, int, i);
  if (!same)
    w->ready_differ = TRUE;
  for (guint i = 0; same && i < marks->len; i++)
    {
      double f = (double) (g_array_index (marks, ReadyMark, i).at - t0) / (double) MAX (t1 - t0, 1);
      g_array_append_val (w->fractions, f);
    }
}

static double
timed_step (CalibrationWorker *w, gboolean keep)
{
  g_array_set_size (w->marks, 0);
  gint64 t0 = g_get_monotonic_time ();
  shoal_group_net_train_step (w->net, note_ready, w);
  gint64 t1 = g_get_monotonic_time ();
  double ms = (double) (t1 - t0) / 1000.0;
  shoal_param_store_zero_grads (shoal_group_net_params (w->net));
  if (keep)
    keep_ready (w, t0, t1);
  return ms;
}

/* A test pass's batch: one forward of the net's test batch as a
 * tester's pass runs it (shoal_worker_evaluate), after a training step,
 * its time and rows added to w's (keep; the last batch of the test set
 * may be short); nothing where the net has no test data. */
static void
timed_test_batch (CalibrationWorker *w, gboolean keep)
{
  ShoalLayer *input = shoal_group_net_input (w->net);
  if (input == NULL || input->ops->num_records == NULL || input->ops->num_records (input, SHOAL_PHASE_TEST) <= 0)
    return;
  gint64 t0 = g_get_monotonic_time ();
  ShoalEvalResult r = shoal_worker_evaluate (w->net, 1);
  if (keep)
    {
      w->test_ms += (double) (g_get_monotonic_time () - t0) / 1000.0;
      w->test_rows += r.samples;
    }
}

/* A test batch is timed after every STEPS_A_TEST_BATCH-th timed step,
 * so that the batches see what the steps saw over the same seconds (the
 * machine's other load; on this shared 2-core VM one pass of 16 batches
 * timed apart read 2.3 ms a batch in one calibration and 22 ms in the
 * next), and at least MIN_TEST_BATCHES in all. */
#define STEPS_A_TEST_BATCH 4
#define MIN_TEST_BATCHES 8

static gpointer
calibration_worker (gpointer data)
{
  CalibrationWorker *w = data;
  struct StartLine *line = w->line;
  enum { WARM = 3 };
  for (int i = 0; i < WARM; i++)
    timed_step (w, FALSE);
  timed_test_batch (w, FALSE);   /* the test cursor's first read, as a run's first pass makes it */
  g_mutex_lock (&line->lock);
  if (++line->warm == line->n)
    g_cond_broadcast (&line->all_warm);
  while (line->warm < line->n)
    g_cond_wait (&line->all_warm, &line->lock);
  g_mutex_unlock (&line->lock);
  gint64 deadline = g_get_monotonic_time () + (gint64) (w->plan->seconds * G_USEC_PER_SEC);
  for (;;)
    {
      double ms = timed_step (w, TRUE);
      g_array_append_val (w->step_ms, ms);
      int n = (int) w->step_ms->len;
      if (n % STEPS_A_TEST_BATCH == 0)
        timed_test_batch (w, TRUE);
      gboolean enough = w->plan->steps > 0 ? n >= w->plan->steps
                                           : (n >= SHOAL_CALIBRATION_MIN_STEPS && g_get_monotonic_time () >= deadline)
                                               || n >= SHOAL_CALIBRATION_MAX_STEPS;
      if (enough)
        break;
    }
  for (int i = (int) w->step_ms->len / STEPS_A_TEST_BATCH; i < MIN_TEST_BATCHES; i++)
    timed_test_batch (w, TRUE);
  g_atomic_int_dec_and_test (&line->timing);
  while (g_atomic_int_get (&line->timing) > 0)
    timed_step (w, FALSE);
  return NULL;
}

/* The hand-offs' fractions, each the median over every worker's timed
 * steps (each step's are in order, so their medians are too); none
 * where the workers' steps did not all make the same hand-offs, or the
 * net made none. */
static void
ready_medians (const CalibrationWorker *workers, int n, ShoalCalibration *out)
{
  const GArray *from = workers[0].ready_from;
  guint k = from->len;
  for (int i = 0; i < n; i++)
    if (k == 0 || workers[i].ready_differ || workers[i].ready_from->len != k
        || memcmp (workers[i].ready_from->data, from->data, k * sizeof (int)) != 0 || workers[i].fractions->len == 0)
      return;
  out->n_ready = (int) k;
  out->ready_from = g_memdup2 (from->data, k * sizeof (int));
  out->ready_fraction = g_new (double, k);
  GArray *one = g_array_new (FALSE, FALSE, sizeof (double));
  for (guint j = 0; j < k; j++)
    {
      g_array_set_size (one, 0);
      for (int i = 0; i < n; i++)
        for (guint t = j; t < workers[i].fractions->len; t += k)
          g_array_append_val (one, g_array_index (workers[i].fractions, double, t));
      out->ready_fraction[j] = median ((const double *) one->data, (int) one->len);
    }
  g_array_free (one, TRUE);
}

/* The compute: plan->concurrent nets of one worker's batch, each stepped
 * by a thread of its own (one alone: the calling thread's time is the
 * same), their timed steps one list, worker after worker. */
static gboolean
measure_compute (ShoalJob *job, const ShoalCalibrationPlan *plan, ShoalCalibration *out, ShoalGroupNet **first_net,
                 GError **error)
{
  int n = plan->concurrent;
  ShoalMember first = { 0, 0 };
  ShoalClusterConf one = job->cluster;
  one.nworker_groups = one.nworkers_per_group = one.nworkers_per_procs = 1;
  CalibrationWorker *workers = g_new0 (CalibrationWorker, n);
  struct StartLine line = { .n = n, .timing = n };
  g_mutex_init (&line.lock);
  g_cond_init (&line.all_warm);
  gint64 rss0 = resident_bytes ();
  gboolean ok = TRUE;
  for (int i = 0; ok && i < n; i++)
    {
      workers[i] = (CalibrationWorker) { .plan = plan, .line = &line,
                                         .step_ms = g_array_new (FALSE, FALSE, sizeof (double)),
                                         .marks = g_array_new (FALSE, FALSE, sizeof (ReadyMark)),
                                         .fractions = g_array_new (FALSE, FALSE, sizeof (double)),
                                         .ready_from = g_array_new (FALSE, FALSE, sizeof (int)) };
      workers[i].net = shoal_runner_unit_net (job, &one, first, 1, TRUE, FALSE, NULL, error);
      ok = workers[i].net != NULL;
      if (!ok && n > 1)
        g_prefix_error (error, "the net of worker %d of the %d stepping at once (--concurrent): ", i + 1, n);
    }
  if (ok)
    {
      GThread **threads = g_new (GThread *, n);
      for (int i = 0; i < n; i++)
        threads[i] = g_thread_new ("calibrate", calibration_worker, &workers[i]);
      for (int i = 0; i < n; i++)
        g_thread_join (threads[i]);
      g_free (threads);
      out->unit_bytes = MAX (resident_bytes () - rss0, 0) / n;
      out->batch = shoal_group_net_batch_size (workers[0].net);
      GArray *all = g_array_new (FALSE, FALSE, sizeof (double));
      for (int i = 0; i < n; i++)
        g_array_append_vals (all, workers[i].step_ms->data, workers[i].step_ms->len);
      out->nsteps = (int) all->len;
      out->step_ms = (double *) g_array_free (all, FALSE);
      out->concurrent = n;
      /* the mean of every worker's batches at the net's rows: a pass sums
       * tens of them, so its expected time is what the model needs */
      double test_ms = 0;
      gint64 test_rows = 0;
      for (int i = 0; i < n; i++)
        {
          test_ms += workers[i].test_ms;
          test_rows += workers[i].test_rows;
        }
      out->test_batch_ms = test_rows > 0 ? test_ms * out->batch / (double) test_rows : 0;
      ready_medians (workers, n, out);
      *first_net = g_steal_pointer (&workers[0].net);
    }
  for (int i = 0; i < n; i++)
    {
      if (workers[i].net != NULL)
        shoal_group_net_free (workers[i].net);
      if (workers[i].step_ms != NULL)
        {
          g_array_free (workers[i].step_ms, TRUE);
          g_array_free (workers[i].marks, TRUE);
          g_array_free (workers[i].fractions, TRUE);
          g_array_free (workers[i].ready_from, TRUE);
        }
    }
  g_free (workers);
  g_mutex_clear (&line.lock);
  g_cond_clear (&line.all_warm);
  return ok;
}

gboolean
shoal_calibration_measure (ShoalJob *job, const ShoalCalibrationPlan *plan, ShoalCalibration *out, GError **error)
{
  memset (out, 0, sizeof *out);
  g_return_val_if_fail (plan != NULL && plan->concurrent >= 1 && plan->concurrent <= SHOAL_CALIBRATION_MAX_CONCURRENT
                          && plan->steps >= 0 && plan->steps <= SHOAL_CALIBRATION_MAX_STEPS
                          && (plan->steps > 0 || plan->seconds > 0),
                        FALSE);
  out->threads = shoal_threads_apply (job->threads, plan->concurrent, 0);
  ShoalGroupNet *net = NULL;
  if (!measure_compute (job, plan, out, &net, error))
    return FALSE;
  ShoalParamStore *store = shoal_group_net_params (net);
  gboolean ok = measure_update (job, store, &out->update_ns_per_byte, error)
                && measure_service (job, net, out, error)
                && measure_rpc (job, store, out->update_ns_per_byte, &out->rpc_us_per_message, &out->rpc_ns_per_byte,
                                error);
  if (ok)
    measure_codecs (net, out);
  shoal_group_net_free (net);
  if (!ok)
    {
      shoal_calibration_clear (out);
      return FALSE;
    }
  out->model = shoal_model_fingerprint (shoal_conf_keyfile (job->conf));
  out->updater = g_strdup (shoal_updater_kind_name (job->updater.kind));
  char host[256] = "";
  gethostname (host, sizeof host - 1);
  out->host = g_strdup (host);
  return TRUE;
}

gboolean
shoal_calibration_save (const ShoalCalibration *cal, const char *path, GError **error)
{
  GKeyFile *kf = g_key_file_new ();
  g_key_file_set_comment (kf, NULL, NULL,
                          " shoal calibrate: what the virtual clock's timing model measured for one model on "
                          "one machine\n (docs/SCALE.md); give it with -o emulate.calibration=FILE", NULL);
  g_key_file_set_string (kf, GROUP, "model", cal->model);
  g_key_file_set_string (kf, GROUP, "host", cal->host);
  g_key_file_set_integer (kf, GROUP, "threads", cal->threads);
  g_key_file_set_integer (kf, GROUP, "concurrent", cal->concurrent);
  g_key_file_set_integer (kf, GROUP, "batch", cal->batch);
  g_key_file_set_string (kf, GROUP, "updater", cal->updater);
  g_key_file_set_double (kf, GROUP, "update_ns_per_byte", cal->update_ns_per_byte);
  g_key_file_set_double (kf, GROUP, "rpc_ns_per_byte", cal->rpc_ns_per_byte);
  g_key_file_set_double (kf, GROUP, "rpc_us_per_message", cal->rpc_us_per_message);
  ShoalCalibration values = *cal;   /* optional_value's fields, not its pointers' */
  for (int i = 0; i < N_OPTIONAL_KEYS; i++)
    g_key_file_set_double (kf, GROUP, optional_keys[i], *optional_value (&values, i));
  g_key_file_set_int64 (kf, GROUP, "unit_bytes", cal->unit_bytes);
  if (cal->test_batch_ms > 0)
    g_key_file_set_double (kf, GROUP, "test_batch_ms", cal->test_batch_ms);
  if (cal->n_ready > 0)
    {
      g_key_file_set_integer_list (kf, GROUP, "ready_from", cal->ready_from, (gsize) cal->n_ready);
      g_key_file_set_double_list (kf, GROUP, "ready_fraction", cal->ready_fraction, (gsize) cal->n_ready);
    }
  g_key_file_set_double_list (kf, GROUP, "step_ms", cal->step_ms, (gsize) cal->nsteps);
  char *sum = g_compute_checksum_for_data (G_CHECKSUM_SHA256, (const guchar *) cal->step_ms,
                                           sizeof (double) * (gsize) cal->nsteps);
  g_key_file_set_string (kf, GROUP, "step_ms_sha256", sum);
  g_free (sum);
  gboolean ok = g_key_file_save_to_file (kf, path, error);
  g_key_file_free (kf);
  if (!ok)
    g_prefix_error (error, "%s: ", path);
  return ok;
}

/* The key of a file's hand-offs that is damaged, with *why: ready_from
 * (missing beside ready_fraction, not integers, or one below 0),
 * ready_fraction (missing beside ready_from, not numbers, not as many,
 * outside 0..1 or out of order); NULL when they are sound or both
 * absent. */
static const char *
ready_hand_offs_damage (const int *from, gsize n_from, const GError *bad_from, const double *fraction,
                        gsize n_fraction, const GError *bad_fraction, const char **why)
{
  static const char offsets[] = "not a list of param offsets >= 0 beside ready_fraction";
  static const char fractions[] =
    "not one fraction of a step (0 to 1, each at least the one before) for each ready_from";
  if (from == NULL && fraction == NULL && bad_from == NULL && bad_fraction == NULL)
    return NULL;
  *why = offsets;
  if (from == NULL || bad_from != NULL)
    return "ready_from";
  for (gsize i = 0; i < n_from; i++)
    if (from[i] < 0)
      return "ready_from";
  *why = fractions;
  if (fraction == NULL || bad_fraction != NULL || n_fraction != n_from)
    return "ready_fraction";
  for (gsize i = 0; i < n_fraction; i++)
    if (!(fraction[i] >= 0 && fraction[i] <= 1) || (i > 0 && fraction[i] < fraction[i - 1]))
      return "ready_fraction";
  return NULL;
}

static gboolean
damaged (GError **error, const char *path, const char *key, const char *why)
{
  g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "%s: [calibration] %s: %s (run `shoal calibrate` again)", path,
               key, why);
  return FALSE;
}

/* The key of the first cost past any machine (1e6 ns a byte or a value,
 * 1e6 us a message; [emulate] update_ns_per_byte's most), or NULL: a
 * calibration saying 1e300 ns a byte put the virtual clock's events
 * past its nanoseconds and the run spun for ever at step 1. */
static const char *
past_any_machine (double update_per_byte, double rpc_per_byte, double rpc_per_message, const double *optional)
{
  if (update_per_byte > 1e6)
    return "update_ns_per_byte";
  if (rpc_per_byte > 1e6)
    return "rpc_ns_per_byte";
  if (rpc_per_message > 1e6)
    return "rpc_us_per_message";
  for (int i = 0; i < N_OPTIONAL_KEYS; i++)
    if (optional[i] > 1e6)
      return optional_keys[i];
  return NULL;
}

gboolean
shoal_calibration_load (const char *path, ShoalJob *job, ShoalCalibration *out, GError **error)
{
  memset (out, 0, sizeof *out);
  GKeyFile *kf = g_key_file_new ();
  GError *local = NULL;
  gboolean ok = FALSE;
  if (!g_key_file_load_from_file (kf, path, G_KEY_FILE_NONE, &local))
    {
      g_set_error (error, SHOAL_ERROR, g_error_matches (local, G_FILE_ERROR, G_FILE_ERROR_NOENT) ? SHOAL_ERROR_IO
                                                                                                 : SHOAL_ERROR_CONF,
                   "[emulate] calibration: %s: %s", path, local->message);
      g_error_free (local);
      g_key_file_free (kf);
      return FALSE;
    }
  gsize n = 0;
  char *model = g_key_file_get_string (kf, GROUP, "model", NULL);
  char *sum = g_key_file_get_string (kf, GROUP, "step_ms_sha256", NULL);
  double *steps = g_key_file_get_double_list (kf, GROUP, "step_ms", &n, NULL);
  double per_byte = g_key_file_get_double (kf, GROUP, "update_ns_per_byte", &local);
  /* absent from files made before it was measured: no transport cost */
  GError *no_rpc = NULL;
  double rpc_per_byte = g_key_file_has_key (kf, GROUP, "rpc_ns_per_byte", NULL)
                          ? g_key_file_get_double (kf, GROUP, "rpc_ns_per_byte", &no_rpc)
                          : 0;
  GError *no_message = NULL;
  double rpc_per_message = g_key_file_has_key (kf, GROUP, "rpc_us_per_message", NULL)
                             ? g_key_file_get_double (kf, GROUP, "rpc_us_per_message", &no_message)
                             : 0;
  double optional[N_OPTIONAL_KEYS];
  const char *bad_optional = NULL;
  for (int i = 0; i < N_OPTIONAL_KEYS; i++)
    {
      GError *bad = NULL;
      optional[i] = g_key_file_has_key (kf, GROUP, optional_keys[i], NULL)
                      ? g_key_file_get_double (kf, GROUP, optional_keys[i], &bad)
                      : 0;
      if ((bad != NULL || !(optional[i] >= 0) || !isfinite (optional[i])) && bad_optional == NULL)
        bad_optional = optional_keys[i];
      g_clear_error (&bad);
    }
  GError *no_batch = NULL;
  int batch = g_key_file_get_integer (kf, GROUP, "batch", &no_batch);
  /* absent from files made before it was measured, and where the model
   * has no test data: test passes cost nothing */
  GError *bad_test = NULL;
  gboolean has_test = g_key_file_has_key (kf, GROUP, "test_batch_ms", NULL);
  double test_batch_ms = has_test ? g_key_file_get_double (kf, GROUP, "test_batch_ms", &bad_test) : 0;
  /* absent from files made before it was recorded: one worker alone */
  GError *no_concurrent = NULL;
  int concurrent = g_key_file_has_key (kf, GROUP, "concurrent", NULL)
                     ? g_key_file_get_integer (kf, GROUP, "concurrent", &no_concurrent)
                     : 1;
  /* absent from files made before they were measured: no hand-offs */
  gsize n_from = 0, n_fraction = 0;
  GError *bad_from = NULL, *bad_fraction = NULL;
  int *ready_from = g_key_file_has_key (kf, GROUP, "ready_from", NULL)
                      ? g_key_file_get_integer_list (kf, GROUP, "ready_from", &n_from, &bad_from)
                      : NULL;
  double *ready_fraction = g_key_file_has_key (kf, GROUP, "ready_fraction", NULL)
                             ? g_key_file_get_double_list (kf, GROUP, "ready_fraction", &n_fraction, &bad_fraction)
                             : NULL;
  const char *ready_why = NULL, *past = NULL;
  const char *bad_ready = ready_hand_offs_damage (ready_from, n_from, bad_from, ready_fraction, n_fraction,
                                                  bad_fraction, &ready_why);
  char *mine = shoal_model_fingerprint (shoal_conf_keyfile (job->conf));
  char *check = steps != NULL ? g_compute_checksum_for_data (G_CHECKSUM_SHA256, (const guchar *) steps,
                                                             sizeof (double) * n)
                              : NULL;
  if (model != NULL && strcmp (model, mine) != 0)
    {
      char *before = fingerprint_before_run_identity (job);
      if (strcmp (model, before) == 0)
        {
          g_debug ("%s: [calibration] model %s: this job's model by the rule before 2026-11-27 (%s now)", path,
                   model, mine);
          g_free (model);
          model = g_strdup (mine);
        }
      g_free (before);
    }
  if (model == NULL)
    damaged (error, path, "model", "missing: not a calibration file");
  else if (strcmp (model, mine) != 0)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                 "%s: [calibration] model: %s is another model's calibration (this job's model is %s: other "
                 "layers or updater); run `shoal calibrate` on this job", path, model, mine);
  else if (steps == NULL || n == 0)
    damaged (error, path, "step_ms", "missing or not a list of numbers");
  else if (sum == NULL || strcmp (sum, check) != 0)
    damaged (error, path, "step_ms_sha256", "does not match step_ms: the file was changed or cut short");
  else if (local != NULL || !(per_byte >= 0) || !isfinite (per_byte))
    damaged (error, path, "update_ns_per_byte", "missing or not a number >= 0");
  else if (no_rpc != NULL || !(rpc_per_byte >= 0) || !isfinite (rpc_per_byte))
    damaged (error, path, "rpc_ns_per_byte", "not a number >= 0");
  else if (no_message != NULL || !(rpc_per_message >= 0) || !isfinite (rpc_per_message))
    damaged (error, path, "rpc_us_per_message", "not a number >= 0");
  else if (bad_optional != NULL)
    damaged (error, path, bad_optional, "not a number >= 0");
  else if (no_batch != NULL || batch < 1)
    damaged (error, path, "batch", "missing or not a number of rows >= 1");
  else if (has_test && (bad_test != NULL || !(test_batch_ms > 0) || !isfinite (test_batch_ms)))
    damaged (error, path, "test_batch_ms", "not a number above 0");
  else if (test_batch_ms > 1e9)
    damaged (error, path, "test_batch_ms", "above 1e9 ms ([emulate] step_ms's most): the file was changed or damaged");
  else if (no_concurrent != NULL || concurrent < 1)
    damaged (error, path, "concurrent", "not a number of workers >= 1");
  else if (bad_ready != NULL)
    damaged (error, path, bad_ready, ready_why);
  else if ((past = past_any_machine (per_byte, rpc_per_byte, rpc_per_message, optional)) != NULL)
    damaged (error, path, past, "above 1e6, past any machine's (the file was changed or damaged)");
  else
    {
      ok = TRUE;
      for (gsize i = 0; ok && i < n; i++)
        if (!(steps[i] > 0) || !isfinite (steps[i]))
          ok = damaged (error, path, "step_ms", "a step time is not a number above 0");
        else if (steps[i] > 1e9)
          ok = damaged (error, path, "step_ms", "a step time above 1e9 ms ([emulate] step_ms's most)");
    }
  if (ok)
    {
      out->model = g_steal_pointer (&model);
      out->step_ms = g_steal_pointer (&steps);
      out->nsteps = (int) n;
      out->update_ns_per_byte = per_byte;
      out->rpc_ns_per_byte = rpc_per_byte;
      out->rpc_us_per_message = rpc_per_message;
      for (int i = 0; i < N_OPTIONAL_KEYS; i++)
        *optional_value (out, i) = optional[i];
      out->batch = batch;
      out->test_batch_ms = test_batch_ms;
      out->concurrent = concurrent;
      out->updater = g_key_file_get_string (kf, GROUP, "updater", NULL);
      out->host = g_key_file_get_string (kf, GROUP, "host", NULL);
      out->threads = g_key_file_get_integer (kf, GROUP, "threads", NULL);
      out->unit_bytes = g_key_file_get_int64 (kf, GROUP, "unit_bytes", NULL);
      out->n_ready = (int) n_from;
      out->ready_from = n_from > 0 ? g_steal_pointer (&ready_from) : NULL;
      out->ready_fraction = n_from > 0 ? g_steal_pointer (&ready_fraction) : NULL;
    }
  g_free (ready_from);
  g_free (ready_fraction);
  g_clear_error (&bad_from);
  g_clear_error (&bad_fraction);
  g_clear_error (&local);
  g_clear_error (&no_batch);
  g_clear_error (&bad_test);
  g_clear_error (&no_rpc);
  g_clear_error (&no_message);
  g_clear_error (&no_concurrent);
  g_free (model);
  g_free (sum);
  g_free (steps);
  g_free (mine);
  g_free (check);
  g_key_file_free (kf);
  return ok;
}

void
shoal_calibration_clear (ShoalCalibration *cal)
{
  g_free (cal->ready_from);
  g_free (cal->ready_fraction);
  g_free (cal->model);
  g_free (cal->updater);
  g_free (cal->step_ms);
  g_free (cal->host);
  memset (cal, 0, sizeof *cal);
}
