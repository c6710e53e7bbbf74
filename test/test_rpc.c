/* marks: threads (they start threads: TSan runs this file in `make SANITIZE=thread test-threads`) */
/* The parameter service over Thrift on loopback: a ShoalServer behind
 * shoal_rpc_server, driven by shoal_rpc_client and by hand-written bytes
 * on raw sockets.  Values are small integers and the SGD rate 0.5, so
 * every expected value is exact in float32 and compared bit for bit.
 * Every wait is bounded; the stalls tested use timeouts of 0.3-0.5 s. */
#include <errno.h>
#include <stdlib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>

#include "server/rpc_client.h"
#include "core/error.h"
#include "server/rpc_server.h"
#include "server/server.h"
#include "support/slow_reader.h"
#include "support/time_scale.h"

#define TOKEN "job-secret-42"
#define LR 0.5f

/* ---- fixture -------------------------------------------------------------- */

typedef struct {
  ShoalParamStore *layout;
  ShoalServer *server;
  ShoalRpcServer *rpc;
  int port;
  int nslices;
} Env;

typedef struct {
  ShoalUpdateMode mode;
  int contributors;
  int nslices;
  size_t floats;               /* two params of about floats / 2 each */
  size_t max_message;          /* 0: derived */
  gint64 io_timeout_ms;        /* 0: default */
  int expected_shutdowns;
  int port;                    /* 0: any */
  gboolean host_some;          /* host only the even slices */
  int max_connections;         /* 0: no cap */
  gint64 idle_timeout_ms;      /* 0: none */
  ShoalUpdaterKind updater;    /* 0: SGD */
  float momentum;              /* 0: the updater's default */
} EnvConf;

static void
value_pattern (float *v, size_t n, int seed)
{
  for (size_t i = 0; i < n; i++)
    v[i] = (float) ((int) ((i * 7 + (size_t) seed * 13) % 2001) - 1000);
}

static void
env_start (Env *env, const EnvConf *conf)
{
  ShoalInitSpec init = { 0 };
  ShoalUpdaterConf upd;
  ShoalServerOptions sopts = { .mode = conf->mode, .sync_contributors = conf->contributors, .nslices = conf->nslices };
  ShoalRpcServerOptions ropts = { 0 };
  GError *error = NULL;

  memset (env, 0, sizeof *env);
  env->layout = shoal_param_store_new ();
  /* whole 64-byte lines: no padding between the params, which no update touches */
  int half = (int) ((conf->floats / 2 + 15) / 16 * 16);
  ShoalShape s1 = shoal_shape_make (1, half);
  ShoalShape s2 = shoal_shape_make (2, 1, half);
  shoal_param_store_declare (env->layout, "fc/weight", &s1, &init, 1, 1, 1.0f, 1.0f);
  shoal_param_store_declare (env->layout, "fc/bias", &s2, &init, 1, 1, 1.0f, 1.0f);
  g_assert_true (shoal_param_store_allocate (env->layout, NULL));
  value_pattern (env->layout->values, env->layout->total, 0);

  shoal_updater_conf_defaults (&upd, conf->updater);
  upd.schedule.lr = LR;
  if (conf->momentum > 0)
    upd.momentum = conf->momentum;
  env->server = shoal_server_new (env->layout, &upd, &sopts, NULL);
  env->nslices = conf->nslices;
  for (int i = 0; i < conf->nslices; i++)
    if (!conf->host_some || i % 2 == 0)
      shoal_server_host_slice (env->server, i);

  ropts.bind_address = "127.0.0.1";
  ropts.port = conf->port;
  ropts.token = TOKEN;
  ropts.max_message_bytes = conf->max_message;
  ropts.io_timeout_ms = conf->io_timeout_ms;
  ropts.expected_shutdowns = conf->expected_shutdowns;
  ropts.max_connections = conf->max_connections;
  ropts.idle_timeout_ms = conf->idle_timeout_ms;
  env->rpc = shoal_rpc_server_start (env->server, &ropts, &error);
  g_assert_no_error (error);
  g_assert_nonnull (env->rpc);
  env->port = shoal_rpc_server_port (env->rpc);
  g_assert_cmpint (env->port, >, 0);
}

static void
env_stop (Env *env)
{
  shoal_rpc_server_stop (env->rpc);
  shoal_server_free (env->server);
  shoal_param_store_free (env->layout);
}

static size_t
slice_len (Env *env, int slice, size_t *begin)
{
  size_t b, e;
  shoal_server_slice_range (env->server, slice, &b, &e);
  if (begin != NULL)
    *begin = b;
  return e - b;
}

static ShoalRpcClient *
client_new (Env *env, const char *token, gint64 timeout_ms)
{
  ShoalRpcClientOptions o = { "127.0.0.1", env->port, token, 0, timeout_ms, 0, NULL };
  GError *error = NULL;
  ShoalRpcClient *c = shoal_rpc_client_connect (&o, &error);
  g_assert_no_error (error);
  g_assert_nonnull (c);
  return c;
}

static void
assert_floats_equal (const float *a, const float *b, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (memcmp (&a[i], &b[i], sizeof (float)) != 0)
      g_error ("value %zu: %g, expected %g", i, (double) a[i], (double) b[i]);
}

static void
assert_error_has (GError *error, const char *part)
{
  g_assert_nonnull (error);
  g_assert_true (g_error_matches (error, SHOAL_ERROR, SHOAL_ERROR_RPC));
  if (strstr (error->message, part) == NULL)
    g_error ("error \"%s\" does not say \"%s\"", error->message, part);
}

/* Waits (at most 5 s) until the server counted that many pushes and
 * pulls (< 0: any), so that a test knows a call arrived. */
static void
wait_for_stat (Env *env, gint64 pushes, gint64 pulls)
{
  ShoalServerStats st;
  for (int i = 0; i < 500; i++)
    {
      shoal_server_stats (env->server, &st);
      if ((pushes < 0 || st.pushes >= pushes) && (pulls < 0 || st.pulls >= pulls))
        return;
      g_usleep (10 * 1000);
    }
  g_error ("the server saw %" G_GINT64_FORMAT " pushes and %" G_GINT64_FORMAT " pulls in 5 s",
           st.pushes, st.pulls);
}

/* A good client still gets exact values after whatever the test did. */
static void
assert_serves (Env *env, int slice)
{
  ShoalRpcClient *c = client_new (env, TOKEN, 2000);
  size_t n = slice_len (env, slice, NULL);
  float *got = g_new (float, n);
  float *want = g_new (float, n);
  gint64 version = -1;
  GError *error = NULL;

  g_assert_true (shoal_rpc_client_pull (c, slice, got, n, 0, &version, &error));
  g_assert_no_error (error);
  g_assert_true (shoal_server_pull (env->server, slice, want, n, 0, 0, NULL, &error));
  assert_floats_equal (got, want, n);
  g_assert_cmpint (version, ==, shoal_server_slice_version (env->server, slice));
  g_free (got);
  g_free (want);
  shoal_rpc_client_free (c);
}

/* Warnings the server logs on purpose (wrong tokens, garbage on the
 * port) are counted, not fatal; any other warning or critical still
 * aborts the test. */
static gint expected_warnings;

/* The first "connection cap" warning of the listener (test_connection_cap). */
static GMutex cap_lock;
static char *cap_line;

static void
log_handler (const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer data)
{
  if ((level & G_LOG_LEVEL_WARNING) && message != NULL && g_str_has_prefix (message, "rpc server: port ")
      && strstr (message, "the cap ([cluster] rpc_max_connections") != NULL)
    {
      g_mutex_lock (&cap_lock);
      if (cap_line == NULL)
        cap_line = g_strdup (message);
      g_mutex_unlock (&cap_lock);
      return;
    }
  if ((level & G_LOG_LEVEL_WARNING) && message != NULL
      && (g_str_has_prefix (message, "rpc: ") || strstr (message, "reading start of message") != NULL))
    {
      g_atomic_int_inc (&expected_warnings);
      return;
    }
  g_log_default_handler (domain, level, message, data);
  if (level & (G_LOG_LEVEL_WARNING | G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_ERROR))
    abort ();
}

/* ---- round trips ---------------------------------------------------------- */

static void
test_round_trip (void)
{
  EnvConf conf = { .mode = SHOAL_UPDATE_ASYNC, .contributors = 1, .nslices = 3, .floats = 5000 };
  Env env;
  GError *error = NULL;
  gint64 version = -1;

  env_start (&env, &conf);
  ShoalRpcClient *c = client_new (&env, TOKEN, 5000);
  size_t n = slice_len (&env, 1, NULL);
  float *vals = g_new (float, n), *got = g_new (float, n), *grad = g_new (float, n);
  float *want = g_new (float, n);

  /* put then pull: the same bits and version */
  value_pattern (vals, n, 5);
  vals[0] = -0.0f;
  vals[1] = 1e-38f;            /* subnormal-adjacent values survive too */
  vals[2] = 3.4e38f;
  g_assert_true (shoal_rpc_client_put (c, 1, vals, n, 7, &error));
  g_assert_no_error (error);
  g_assert_true (shoal_rpc_client_pull (c, 1, got, n, 7, &version, &error));
  g_assert_no_error (error);
  g_assert_cmpint (version, ==, 7);
  assert_floats_equal (got, vals, n);

  /* push: w - lr * g, version + 1 */
  value_pattern (vals, n, 9);
  g_assert_true (shoal_rpc_client_put (c, 1, vals, n, 0, &error));
  for (size_t i = 0; i < n; i++)
    {
      grad[i] = (float) ((int) (i % 5) - 2) * 2.0f;
      want[i] = vals[i] - LR * grad[i];
    }
  g_assert_true (shoal_rpc_client_push (c, 1, grad, n, 0, &error));
  g_assert_no_error (error);
  g_assert_true (shoal_rpc_client_pull (c, 1, got, n, 1, &version, &error));
  g_assert_no_error (error);
  g_assert_cmpint (version, ==, 1);
  assert_floats_equal (got, want, n);

  /* push_pull returns the values with this push in them; dst may alias grad */
  for (size_t i = 0; i < n; i++)
    want[i] -= LR * grad[i];
  memcpy (got, grad, n * sizeof (float));
  g_assert_true (shoal_rpc_client_push_pull (c, 1, got, got, n, 1, &version, &error));
  g_assert_no_error (error);
  g_assert_cmpint (version, ==, 2);
  assert_floats_equal (got, want, n);

  /* other slices are untouched */
  size_t b0, n0 = slice_len (&env, 0, &b0);
  float *s0 = g_new (float, n0);
  g_assert_true (shoal_rpc_client_pull (c, 0, s0, n0, 0, &version, &error));
  assert_floats_equal (s0, env.layout->values + b0, n0);
  g_assert_cmpint (version, ==, 0);

  g_free (s0);
  g_free (vals);
  g_free (got);
  g_free (grad);
  g_free (want);
  shoal_rpc_client_free (c);
  env_stop (&env);
}

/* Encoded gradients and values: the server applies what the codec
 * decodes to, and answers in the codec asked for; a wrong length, an
 * unknown codec or a quantised codec for values is refused. */
static void
test_codecs (void)
{
  EnvConf conf = { .mode = SHOAL_UPDATE_ASYNC, .contributors = 1, .nslices = 2, .floats = 3000 };
  Env env;
  GError *error = NULL;
  gint64 version = -1;

  env_start (&env, &conf);
  ShoalRpcClient *c = client_new (&env, TOKEN, 5000);
  size_t b, n = slice_len (&env, 1, &b);
  float *grad = g_new (float, n), *decoded = g_new (float, n), *got = g_new (float, n);
  float *want = g_new (float, n), *vals = g_new (float, n);
  for (ShoalCodec gc = SHOAL_CODEC_FP32; gc < SHOAL_CODEC_COUNT; gc++)
    for (ShoalCodec vc = SHOAL_CODEC_FP32; vc <= SHOAL_CODEC_BF16; vc++)
      {
        value_pattern (vals, n, (int) gc);
        g_assert_true (shoal_rpc_client_put (c, 1, vals, n, 0, &error));
        for (size_t i = 0; i < n; i++)
          grad[i] = (float) ((int) (i % 7) - 3) * 0.375f;
        guint8 *wire = g_malloc (shoal_codec_bytes (gc, n));
        shoal_codec_encode (gc, grad, NULL, n, wire);
        g_assert_true (shoal_codec_decode (gc, wire, shoal_codec_bytes (gc, n), decoded, n));
        for (size_t i = 0; i < n; i++)
          want[i] = vals[i] - LR * decoded[i];
        /* what the values' codec makes of them */
        guint8 *enc = g_malloc (shoal_codec_bytes (vc, n));
        shoal_codec_encode (vc, want, NULL, n, enc);
        g_assert_true (shoal_codec_decode (vc, enc, shoal_codec_bytes (vc, n), want, n));
        g_assert_true (shoal_rpc_client_push_pull_coded (c, 1, wire, gc, got, vc, n, 0, NULL, &version, &error));
        g_assert_no_error (error);
        g_assert_cmpint (version, ==, 1);
        assert_floats_equal (got, want, n);
        g_free (wire);
        g_free (enc);
      }

  /* refusals: the server keeps serving */
  guint8 *wire = g_malloc0 (n * sizeof (float));
  g_assert_false (shoal_rpc_client_push_coded (c, 1, wire, SHOAL_CODEC_FP16, n - 1, 0, NULL, &error));
  assert_error_has (error, "not a fp16 encoding");
  g_clear_error (&error);
  g_assert_false (shoal_rpc_client_push_pull_coded (c, 1, wire, SHOAL_CODEC_FP32, got, SHOAL_CODEC_1BIT, n, 0,
                                                    NULL, &version, &error));
  assert_error_has (error, "values cannot be sent as codec 4");
  g_clear_error (&error);
  g_free (wire);
  assert_serves (&env, 1);

  g_free (grad);
  g_free (decoded);
  g_free (got);
  g_free (want);
  g_free (vals);
  shoal_rpc_client_free (c);
  env_stop (&env);
}

/* A 4 MiB slice both ways, through the zero-copy paths. */
static void
test_large_slice (void)
{
  EnvConf conf = { .mode = SHOAL_UPDATE_ASYNC, .contributors = 1, .nslices = 2,
                   .floats = 2 * 1024 * 1024 };
  Env env;
  GError *error = NULL;
  gint64 version;

  env_start (&env, &conf);
  ShoalRpcClient *c = client_new (&env, TOKEN, 5000);
  size_t n = slice_len (&env, 1, NULL);
  g_assert_cmpuint (n, ==, 1024 * 1024);
  float *vals = g_new (float, n), *got = g_new (float, n), *grad = g_new (float, n);

  value_pattern (vals, n, 3);
  g_assert_true (shoal_rpc_client_put (c, 1, vals, n, 0, &error));
  g_assert_no_error (error);
  for (size_t i = 0; i < n; i++)
    {
      grad[i] = (float) (i % 3);
      vals[i] -= LR * grad[i];
    }
  g_assert_true (shoal_rpc_client_push_pull (c, 1, grad, got, n, 0, &version, &error));
  g_assert_no_error (error);
  g_assert_cmpint (version, ==, 1);
  assert_floats_equal (got, vals, n);
  memset (got, 0, n * sizeof (float));
  g_assert_true (shoal_rpc_client_pull (c, 1, got, n, 1, &version, &error));
  assert_floats_equal (got, vals, n);

  g_free (vals);
  g_free (got);
  g_free (grad);
  shoal_rpc_client_free (c);
  env_stop (&env);
}

/* ---- SYNC and ASYNC ------------------------------------------------------- */

typedef struct {
  Env *env;
  int slice;
  float gval;
  gboolean use_push_pull;
  gint64 step;
  float *got;
  gint64 version;
  gint64 pushed_at, pulled_at;   /* monotonic us: before the push was sent, after the pull */
  gboolean ok;
  char *error;
} SyncWorker;

static gpointer
sync_worker (gpointer data)
{
  SyncWorker *w = data;
  ShoalRpcClient *c = client_new (w->env, TOKEN, 5000);
  size_t n = slice_len (w->env, w->slice, NULL);
  float *grad = g_new (float, n);
  GError *error = NULL;

  for (size_t i = 0; i < n; i++)
    grad[i] = w->gval;
  if (w->use_push_pull)
    {
      w->pushed_at = g_get_monotonic_time ();
      w->ok = shoal_rpc_client_push_pull (c, w->slice, grad, w->got, n, w->step, &w->version,
                                          &error);
    }
  else
    {
      w->pushed_at = g_get_monotonic_time ();
      w->ok = shoal_rpc_client_push (c, w->slice, grad, n, w->step, &error);
      w->ok = w->ok && shoal_rpc_client_pull (c, w->slice, w->got, n, w->step + 1, &w->version,
                                              &error);
    }
  w->pulled_at = g_get_monotonic_time ();
  if (error != NULL)
    w->error = g_strdup (error->message);
  g_clear_error (&error);
  g_free (grad);
  shoal_rpc_client_free (c);
  return NULL;
}

static void
test_sync_two_workers (void)
{
  EnvConf conf = { .mode = SHOAL_UPDATE_SYNC, .contributors = 2, .nslices = 2, .floats = 3000 };
  Env env;
  size_t b, n;

  env_start (&env, &conf);
  n = slice_len (&env, 1, &b);
  float *want = g_new (float, n);

  for (int round = 0; round < 2; round++)
    {
      /* A pushes at once and must wait in its pull until B pushed 200 ms later.
       * Round 0 pushes then pulls, round 1 uses push_pull. */
      SyncWorker a = { &env, 1, 2.0f, round == 1, round, g_new0 (float, n), -1, 0, 0, FALSE, NULL };
      SyncWorker bw = { &env, 1, 6.0f, round == 1, round, g_new0 (float, n), -1, 0, 0, FALSE, NULL };
      g_assert_true (shoal_server_pull (env.server, 1, NULL, n, 0, 0, NULL, NULL));
      memcpy (want, shoal_server_values (env.server) + b, n * sizeof (float));

      GThread *ta = g_thread_new ("a", sync_worker, &a);
      wait_for_stat (&env, 2 * round + 1, -1);   /* A's push arrived */
      g_usleep (100 * 1000);
      GThread *tb = g_thread_new ("b", sync_worker, &bw);
      g_thread_join (ta);
      g_thread_join (tb);
      if (a.error != NULL || bw.error != NULL)
        g_error ("round %d: %s / %s", round, a.error, bw.error);
      g_assert_true (a.ok && bw.ok);
      g_assert_cmpint (a.version, ==, round + 1);
      g_assert_cmpint (bw.version, ==, round + 1);
      /* A's pull came back only after B pushed */
      g_assert_cmpint (a.pulled_at, >=, bw.pushed_at);
      g_assert_cmpint (a.pulled_at - a.pushed_at, >=, 100 * 1000);
      /* one update with the average gradient (2 + 6) / 2 */
      for (size_t i = 0; i < n; i++)
        want[i] -= LR * 4.0f;
      assert_floats_equal (a.got, want, n);
      assert_floats_equal (bw.got, want, n);
      g_free (a.got);
      g_free (bw.got);
    }

  /* a push for a step out of turn is refused with the server's reason */
  ShoalRpcClient *c = client_new (&env, TOKEN, 2000);
  float *grad = g_new0 (float, n);
  GError *error = NULL;
  g_assert_false (shoal_rpc_client_push (c, 1, grad, n, 5, &error));
  assert_error_has (error, "aggregating step 2");
  g_clear_error (&error);
  /* a pull waiting for a version nobody makes ends as an error reply
   * before the client's own timeout, and the connection stays usable */
  ShoalRpcClient *quick = client_new (&env, TOKEN, 2000);
  gint64 t0 = g_get_monotonic_time ();
  g_assert_false (shoal_rpc_client_pull (quick, 1, grad, n, 9, NULL, &error));
  g_assert_cmpint (g_get_monotonic_time () - t0, <, shoal_test_scaled_us (3000 * 1000));
  assert_error_has (error, "did not reach version 9");
  g_clear_error (&error);
  g_assert_true (shoal_rpc_client_pull (quick, 1, grad, n, 2, NULL, &error));
  g_assert_no_error (error);
  shoal_rpc_client_free (quick);
  g_free (grad);
  shoal_rpc_client_free (c);
  g_free (want);
  env_stop (&env);
}

static void
test_async_each_push (void)
{
  EnvConf conf = { .mode = SHOAL_UPDATE_ASYNC, .contributors = 1, .nslices = 1, .floats = 1000 };
  Env env;
  GError *error = NULL;
  gint64 version;

  env_start (&env, &conf);
  ShoalRpcClient *c = client_new (&env, TOKEN, 2000);
  size_t n = slice_len (&env, 0, NULL);
  float *grad = g_new (float, n), *got = g_new (float, n), *want = g_new (float, n);
  memcpy (want, env.layout->values, n * sizeof (float));
  for (int k = 0; k < 3; k++)
    {
      for (size_t i = 0; i < n; i++)
        {
          grad[i] = (float) (k + 1);
          want[i] -= LR * grad[i];
        }
      /* steps need not follow the version in ASYNC mode */
      g_assert_true (shoal_rpc_client_push (c, 0, grad, n, 10 - k, &error));
      g_assert_no_error (error);
    }
  g_assert_true (shoal_rpc_client_pull (c, 0, got, n, 0, &version, &error));
  g_assert_cmpint (version, ==, 3);
  assert_floats_equal (got, want, n);
  g_free (grad);
  g_free (got);
  g_free (want);
  shoal_rpc_client_free (c);
  env_stop (&env);
}

static void
test_apply_delta_and_stats (void)
{
  EnvConf conf = { .mode = SHOAL_UPDATE_ASYNC, .contributors = 1, .nslices = 2, .floats = 2000 };
  Env env;
  GError *error = NULL;
  ShoalServerStats st;

  env_start (&env, &conf);
  ShoalRpcClient *c = client_new (&env, TOKEN, 2000);
  size_t b, n = slice_len (&env, 0, &b);
  float *delta = g_new (float, n), *got = g_new (float, n), *want = g_new (float, n);

  for (size_t i = 0; i < n; i++)
    {
      delta[i] = (float) (i % 4);
      want[i] = env.layout->values[b + i] + delta[i];
    }
  g_assert_true (shoal_rpc_client_apply_delta (c, 0, delta, got, n, &error));
  g_assert_no_error (error);
  assert_floats_equal (got, want, n);
  /* values_out may be the delta itself */
  for (size_t i = 0; i < n; i++)
    want[i] += delta[i];
  g_assert_true (shoal_rpc_client_apply_delta (c, 0, delta, delta, n, &error));
  assert_floats_equal (delta, want, n);

  /* 2 deltas; now 1 push, 2 pulls that do not wait, 1 push_pull */
  g_assert_true (shoal_rpc_client_push (c, 0, got, n, 0, &error));
  g_assert_true (shoal_rpc_client_pull (c, 0, got, n, 0, NULL, &error));
  size_t n1 = slice_len (&env, 1, NULL);
  float *g1 = g_new0 (float, n1);
  g_assert_true (shoal_rpc_client_pull (c, 1, g1, n1, 0, NULL, &error));
  g_assert_true (shoal_rpc_client_push_pull (c, 1, g1, g1, n1, 0, NULL, &error));
  g_assert_no_error (error);
  g_assert_true (shoal_rpc_client_stats (c, &st, &error));
  g_assert_no_error (error);
  g_assert_cmpint (st.deltas, ==, 2);
  g_assert_cmpint (st.pushes, ==, 2);
  g_assert_cmpint (st.updates, ==, 2);
  g_assert_cmpint (st.pulls, ==, 3);
  g_assert_cmpint (st.bytes_in, ==, (gint64) ((n + n1) * sizeof (float)));
  g_assert_cmpint (st.bytes_out, ==, (gint64) ((n + 2 * n1) * sizeof (float)));
  ShoalServerStats direct;
  shoal_server_stats (env.server, &direct);
  g_assert_cmpmem (&st, sizeof st, &direct, sizeof direct);

  g_free (g1);
  g_free (delta);
  g_free (got);
  g_free (want);
  shoal_rpc_client_free (c);
  env_stop (&env);
}

/* ---- refusals ------------------------------------------------------------- */

static void
test_refusals (void)
{
  EnvConf conf = { .mode = SHOAL_UPDATE_ASYNC, .contributors = 1, .nslices = 4, .floats = 4000,
                   .host_some = TRUE };
  Env env;
  GError *error = NULL;

  env_start (&env, &conf);
  size_t n = slice_len (&env, 0, NULL);
  float *buf = g_new0 (float, 2 * n);   /* room for any slice of this layout */

  /* wrong token: refused, logged, and never echoed back */
  int before = g_atomic_int_get (&expected_warnings);
  ShoalRpcClient *bad = client_new (&env, "guess", 2000);
  g_assert_false (shoal_rpc_client_push (bad, 0, buf, n, 0, &error));
  assert_error_has (error, "push refused: wrong job token");
  g_assert_null (strstr (error->message, TOKEN));
  g_assert_cmpint (g_atomic_int_get (&expected_warnings), ==, before + 1);
  g_clear_error (&error);
  g_assert_false (shoal_rpc_client_stats (bad, &(ShoalServerStats) { 0 }, &error));
  assert_error_has (error, "stats refused: wrong job token");
  g_clear_error (&error);
  shoal_rpc_client_free (bad);
  ShoalRpcClient *none = client_new (&env, NULL, 2000);
  g_assert_false (shoal_rpc_client_pull (none, 0, buf, n, 0, NULL, &error));
  assert_error_has (error, "pull refused: wrong job token");
  g_clear_error (&error);
  shoal_rpc_client_free (none);
  g_assert_cmpint (shoal_server_slice_version (env.server, 0), ==, 0);

  ShoalRpcClient *c = client_new (&env, TOKEN, 2000);
  /* unknown and not hosted slices */
  g_assert_false (shoal_rpc_client_pull (c, 99, buf, n, 0, NULL, &error));
  assert_error_has (error, "127.0.0.1:");
  assert_error_has (error, "pull: unknown slice 99 (the job has 4)");
  g_clear_error (&error);
  g_assert_false (shoal_rpc_client_push (c, -1, buf, n, 0, &error));
  assert_error_has (error, "push: unknown slice -1");
  g_clear_error (&error);
  g_assert_false (shoal_rpc_client_put (c, 1, buf, slice_len (&env, 1, NULL), 0, &error));
  assert_error_has (error, "put: slice 1 is not served here");
  g_clear_error (&error);
  /* wrong lengths, both ways */
  char *msg = g_strdup_printf ("push: slice 0 holds %zu floats (%zu bytes), got %zu bytes", n,
                               4 * n, 4 * n - 4);
  g_assert_false (shoal_rpc_client_push (c, 0, buf, n - 1, 0, &error));
  assert_error_has (error, msg);
  g_free (msg);
  g_clear_error (&error);
  g_assert_false (shoal_rpc_client_apply_delta (c, 2, buf, buf, n + 1, &error));
  assert_error_has (error, "apply_delta: slice 2 holds");
  g_clear_error (&error);
  msg = g_strdup_printf ("pull slice 0: the reply holds %zu bytes, %zu expected", 4 * n, 4 * n - 4);
  g_assert_false (shoal_rpc_client_pull (c, 0, buf, n - 1, 0, NULL, &error));
  assert_error_has (error, msg);
  g_free (msg);
  g_clear_error (&error);
  /* the same client goes on after every refusal */
  g_assert_true (shoal_rpc_client_pull (c, 0, buf, n, 0, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpint (shoal_server_slice_version (env.server, 0), ==, 0);
  shoal_rpc_client_free (c);
  g_free (buf);
  env_stop (&env);
}

/* ---- the stop step of a SYNC job ----------------------------------------- */

typedef struct {
  Env *env;
  float *got;
  gboolean ok;
  GError *error;
  gint64 stop_step;
} StopWaiter;

/* Worker B: pushes step 0 of slice 1 and waits for the other gradient
 * (its call may take 30 s: the stop must end it long before). */
static gpointer
push_pull_step0 (gpointer data)
{
  StopWaiter *w = data;
  ShoalRpcClient *c = client_new (w->env, TOKEN, 30000);
  size_t n = slice_len (w->env, 1, NULL);
  float *grad = g_new (float, n);
  for (size_t i = 0; i < n; i++)
    grad[i] = 2.0f;
  w->ok = shoal_rpc_client_push_pull (c, 1, grad, w->got, n, 0, NULL, &w->error);
  w->stop_step = shoal_rpc_client_stop_step (c);
  g_free (grad);
  shoal_rpc_client_free (c);
  return NULL;
}

/* Two SYNC workers: B went on into step 0 and waits in push_pull, A stops
 * at step 0 (stop_at).  B's call comes back STOPPED with the step, its
 * values untouched; later pushes of the step and pulls beyond it are
 * refused the same way, the values of step 0 are still served, and the
 * connection goes on. */
static void
test_stop_at (void)
{
  EnvConf conf = { .mode = SHOAL_UPDATE_SYNC, .contributors = 2, .nslices = 2, .floats = 3000 };
  Env env;
  size_t b, n;
  GError *error = NULL;

  env_start (&env, &conf);
  n = slice_len (&env, 1, &b);
  float *initial = g_new (float, n), *zeros = g_new0 (float, n), *buf = g_new (float, n);
  memcpy (initial, shoal_server_values (env.server) + b, n * sizeof (float));

  StopWaiter w = { &env, g_new0 (float, n), FALSE, NULL, -1 };
  GThread *t = g_thread_new ("b", push_pull_step0, &w);
  wait_for_stat (&env, 1, -1);   /* B's push arrived */
  ShoalRpcClient *a = client_new (&env, TOKEN, 2000);
  g_assert_cmpint (shoal_rpc_client_stop_step (a), ==, -1);
  g_assert_true (shoal_rpc_client_stop_at (a, 0, NULL, &error));
  g_assert_no_error (error);
  g_thread_join (t);
  g_assert_false (w.ok);
  g_assert_error (w.error, SHOAL_ERROR, SHOAL_ERROR_STOPPED);
  if (strstr (w.error->message, "127.0.0.1:") == NULL || strstr (w.error->message, "stops at step 0") == NULL)
    g_error ("the refusal \"%s\" names neither the server nor the step", w.error->message);
  g_clear_error (&w.error);
  g_assert_cmpint (w.stop_step, ==, 0);
  g_assert_cmpmem (w.got, n * sizeof (float), zeros, n * sizeof (float));

  /* refused at once from now on: a push of the step, a pull beyond it */
  g_assert_false (shoal_rpc_client_push (a, 1, buf, n, 0, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_STOPPED);
  g_clear_error (&error);
  g_assert_false (shoal_rpc_client_pull (a, 1, buf, n, 1, NULL, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_STOPPED);
  g_clear_error (&error);
  g_assert_cmpint (shoal_rpc_client_stop_step (a), ==, 0);
  /* step 0's values, without B's half of the sum */
  gint64 version = -1;
  g_assert_true (shoal_rpc_client_pull (a, 1, buf, n, 0, &version, &error));
  g_assert_no_error (error);
  g_assert_cmpint (version, ==, 0);
  assert_floats_equal (buf, initial, n);

  /* a step out of range and a wrong token are refused */
  g_assert_false (shoal_rpc_client_stop_at (a, -3, NULL, &error));
  assert_error_has (error, "stop_at: step -3 is outside");
  g_clear_error (&error);
  ShoalRpcClient *bad = client_new (&env, "guess", 2000);
  g_assert_false (shoal_rpc_client_stop_at (bad, 0, NULL, &error));
  assert_error_has (error, "stop_at refused: wrong job token");
  g_clear_error (&error);
  shoal_rpc_client_free (bad);
  g_assert_cmpint (shoal_server_stop_step (env.server), ==, 0);

  assert_serves (&env, 1);
  shoal_rpc_client_free (a);
  g_free (w.got);
  g_free (initial);
  g_free (zeros);
  g_free (buf);
  env_stop (&env);
}

static void
test_message_limit (void)
{
  /* messages up to 16 KiB; slice 0 holds 1008 floats (4 KiB) */
  EnvConf conf = { .mode = SHOAL_UPDATE_ASYNC, .contributors = 1, .nslices = 4, .floats = 4000,
                   .max_message = 16 * 1024 };
  Env env;
  GError *error = NULL;

  env_start (&env, &conf);
  size_t n = slice_len (&env, 0, NULL);
  size_t big = 1 << 20;
  float *buf = g_new0 (float, big);
  ShoalRpcClient *c = client_new (&env, TOKEN, 2000);

  /* 4 MiB where 16 KiB are allowed: the server drops the connection */
  gint64 t0 = g_get_monotonic_time ();
  g_assert_false (shoal_rpc_client_push (c, 0, buf, big, 0, &error));
  assert_error_has (error, "push slice 0: ");
  g_assert_cmpint (g_get_monotonic_time () - t0, <, shoal_test_scaled_us (3000 * 1000));
  g_clear_error (&error);
  /* the client reconnects and the server serves on */
  g_assert_true (shoal_rpc_client_push (c, 0, buf, n, 0, &error));
  g_assert_no_error (error);
  g_assert_cmpint (shoal_server_slice_version (env.server, 0), ==, 1);
  assert_serves (&env, 0);

  /* the client's own limit on replies */
  ShoalRpcClientOptions o = { "127.0.0.1", env.port, TOKEN, 1024, 2000, 0, NULL };
  ShoalRpcClient *small = shoal_rpc_client_connect (&o, &error);
  g_assert_no_error (error);
  g_assert_false (shoal_rpc_client_pull (small, 0, buf, n, 0, NULL, &error));
  assert_error_has (error, "pull slice 0: message longer than the limit of 1024 bytes");
  g_clear_error (&error);
  shoal_rpc_client_free (small);

  shoal_rpc_client_free (c);
  g_free (buf);
  env_stop (&env);
}

/* ---- bytes by hand -------------------------------------------------------- */

static int
raw_connect (int port)
{
  struct sockaddr_in a = { 0 };
  struct timeval tv = { 5, 0 };
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  g_assert_cmpint (fd, >=, 0);
  a.sin_family = AF_INET;
  a.sin_port = htons ((uint16_t) port);
  a.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  g_assert_cmpint (connect (fd, (struct sockaddr *) &a, sizeof a), ==, 0);
  setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}

static void
raw_send (int fd, const void *bytes, size_t len)
{
  const guint8 *p = bytes;
  while (len > 0)
    {
      ssize_t r = send (fd, p, len, MSG_NOSIGNAL);
      if (r < 0 && errno == EINTR)
        continue;
      if (r < 0)
        return;   /* the server may have hung up already: that is the point */
      p += r;
      len -= (size_t) r;
    }
}

/* Reads until the server closes (0 or a reset); fails on a 5 s timeout.
 * Returns the bytes read before the close. */
static size_t
raw_until_closed (int fd)
{
  guint8 buf[4096];
  size_t total = 0;
  for (;;)
    {
      ssize_t r = recv (fd, buf, sizeof buf, 0);
      if (r > 0)
        {
          total += (size_t) r;
          continue;
        }
      if (r < 0 && errno == EINTR)
        continue;
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        g_error ("the server kept a connection with bad bytes open for 5 s");
      return total;
    }
}

static void put_u8 (GByteArray *b, guint8 v) { g_byte_array_append (b, &v, 1); }
static void put_i16 (GByteArray *b, gint16 v) { guint16 x = GUINT16_TO_BE ((guint16) v); g_byte_array_append (b, (guint8 *) &x, 2); }
static void put_i32 (GByteArray *b, gint32 v) { guint32 x = GUINT32_TO_BE ((guint32) v); g_byte_array_append (b, (guint8 *) &x, 4); }
static void put_i64 (GByteArray *b, gint64 v) { guint64 x = GUINT64_TO_BE ((guint64) v); g_byte_array_append (b, (guint8 *) &x, 8); }
static void put_str (GByteArray *b, const char *s) { put_i32 (b, (gint32) strlen (s)); g_byte_array_append (b, (const guint8 *) s, (guint) strlen (s)); }
static void put_field (GByteArray *b, guint8 type, gint16 id) { put_u8 (b, type); put_i16 (b, id); }

enum { TT_STOP = 0, TT_I32 = 8, TT_I64 = 10, TT_STRING = 11, TT_STRUCT = 12 };

/* A push call of `step` as the binary protocol writes it, up to the grad's bytes. */
static GByteArray *
push_head_at (int slice, gint64 step, gint32 grad_len)
{
  GByteArray *b = g_byte_array_new ();
  put_i32 (b, (gint32) 0x80010001);   /* strict version 1, T_CALL */
  put_str (b, "push");
  put_i32 (b, 1);
  put_field (b, TT_STRING, 1);
  put_str (b, TOKEN);
  put_field (b, TT_I32, 2);
  put_i32 (b, slice);
  put_field (b, TT_I64, 3);
  put_i64 (b, step);
  put_field (b, TT_STRING, 4);
  put_i32 (b, grad_len);
  return b;
}

static GByteArray *
push_head (int slice, gint32 grad_len)
{
  return push_head_at (slice, 0, grad_len);
}

typedef struct {
  const char *what;
  GByteArray *bytes;
  gboolean hang_up;      /* close our end after sending */
} BadCase;

static void
test_bad_bytes (void)
{
  EnvConf conf = { .mode = SHOAL_UPDATE_ASYNC, .contributors = 1, .nslices = 2, .floats = 2000 };
  Env env;
  int fd;

  env_start (&env, &conf);
  size_t n = slice_len (&env, 0, NULL);
  gint32 nbytes = (gint32) (n * sizeof (float));

  /* the hand-made push is right: a whole one is answered with a T_REPLY */
  {
    GByteArray *m = push_head (0, nbytes);
    float *zeros = g_new0 (float, n);
    g_byte_array_append (m, (guint8 *) zeros, (guint) nbytes);
    put_u8 (m, TT_STOP);
    fd = raw_connect (env.port);
    raw_send (fd, m->data, m->len);
    guint8 reply[8];
    g_assert_cmpint (recv (fd, reply, 4, MSG_WAITALL), ==, 4);
    g_assert_cmpint (reply[0], ==, 0x80);
    g_assert_cmpint (reply[3], ==, 2);   /* T_REPLY */
    close (fd);
    g_byte_array_unref (m);
    g_free (zeros);
  }

  BadCase cases[16];
  int ncases = 0;
  GByteArray *m;

  /* random bytes */
  m = g_byte_array_new ();
  GRand *rand = g_rand_new_with_seed (7);
  for (int i = 0; i < 4096; i++)
    put_u8 (m, (guint8) g_rand_int (rand));
  g_rand_free (rand);
  cases[ncases++] = (BadCase) { "random bytes", m, FALSE };
  /* text */
  m = g_byte_array_new ();
  g_byte_array_append (m, (const guint8 *) "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27);
  cases[ncases++] = (BadCase) { "http", m, FALSE };
  /* a non-strict header (old protocol): a name length first */
  m = g_byte_array_new ();
  put_str (m, "push");
  put_u8 (m, 1);
  put_i32 (m, 0);
  cases[ncases++] = (BadCase) { "non-strict header", m, FALSE };
  /* a method name of 2 GB */
  m = g_byte_array_new ();
  put_i32 (m, (gint32) 0x80010001);
  put_i32 (m, 0x7ffffff0);
  cases[ncases++] = (BadCase) { "huge name", m, FALSE };
  /* a token of 2 GB */
  m = g_byte_array_new ();
  put_i32 (m, (gint32) 0x80010001);
  put_str (m, "push");
  put_i32 (m, 1);
  put_field (m, TT_STRING, 1);
  put_i32 (m, 0x7fffffff);
  cases[ncases++] = (BadCase) { "huge token", m, FALSE };
  /* a gradient declared above the message limit, and a negative one */
  cases[ncases++] = (BadCase) { "huge grad", push_head (0, 0x7ffffff0), FALSE };
  cases[ncases++] = (BadCase) { "negative grad", push_head (0, -8), FALSE };
  /* the gradient twice */
  m = push_head (0, 4);
  put_i32 (m, 0);
  put_field (m, TT_STRING, 4);
  put_i32 (m, 4);
  put_i32 (m, 0);
  put_u8 (m, TT_STOP);
  cases[ncases++] = (BadCase) { "repeated field", m, FALSE };
  /* structs nested 1000 deep in an unknown field */
  m = push_head (0, 0);
  for (int i = 0; i < 1000; i++)
    put_field (m, TT_STRUCT, 9);
  cases[ncases++] = (BadCase) { "deep nesting", m, FALSE };
  /* an unknown field type */
  m = push_head (0, 0);
  put_field (m, 99, 5);
  cases[ncases++] = (BadCase) { "unknown type", m, FALSE };
  /* a message cut short, the sender gone */
  m = push_head (0, nbytes);
  g_byte_array_set_size (m, m->len + 100);
  cases[ncases++] = (BadCase) { "truncated, hung up", m, TRUE };

  for (int i = 0; i < ncases; i++)
    {
      fd = raw_connect (env.port);
      raw_send (fd, cases[i].bytes->data, cases[i].bytes->len);
      if (cases[i].hang_up)
        shutdown (fd, SHUT_WR);
      g_test_message ("%s", cases[i].what);
      size_t got = raw_until_closed (fd);
      (void) got;
      close (fd);
      g_byte_array_unref (cases[i].bytes);
      assert_serves (&env, 0);
    }
  g_assert_cmpint (shoal_server_slice_version (env.server, 0), ==, 1);   /* the good push only */
  env_stop (&env);
}

/* A message that stops in the middle while its sender stays connected is
 * dropped after the server's I/O timeout; other connections go on. */
static void
test_stalled_sender (void)
{
  EnvConf conf = { .mode = SHOAL_UPDATE_ASYNC, .contributors = 1, .nslices = 2, .floats = 2000,
                   .io_timeout_ms = 300 };
  Env env;

  env_start (&env, &conf);
  size_t n = slice_len (&env, 0, NULL);
  GByteArray *m = push_head (0, (gint32) (n * sizeof (float)));
  int fd = raw_connect (env.port);
  raw_send (fd, m->data, m->len + 0);
  assert_serves (&env, 0);   /* while the stalled one waits */
  gint64 t0 = g_get_monotonic_time ();
  raw_until_closed (fd);
  gint64 waited = g_get_monotonic_time () - t0;
  g_assert_cmpint (waited, <, shoal_test_scaled_us (3000 * 1000));
  close (fd);
  g_byte_array_unref (m);
  assert_serves (&env, 1);
  env_stop (&env);
}

/* ---- failures of the peer ------------------------------------------------- */

static void
test_dead_servers (void)
{
  EnvConf conf = { .mode = SHOAL_UPDATE_ASYNC, .contributors = 1, .nslices = 1, .floats = 1000 };
  Env env;
  GError *error = NULL;
  float buf[1024];

  env_start (&env, &conf);
  size_t n = slice_len (&env, 0, NULL);
  g_assert_cmpuint (n, <=, G_N_ELEMENTS (buf));
  ShoalRpcClient *c = client_new (&env, TOKEN, 2000);
  g_assert_true (shoal_rpc_client_pull (c, 0, buf, n, 0, NULL, &error));

  /* the server stops: the next call fails at once, naming peer and call */
  int port = env.port;
  env_stop (&env);
  gint64 t0 = g_get_monotonic_time ();
  g_assert_false (shoal_rpc_client_pull (c, 0, buf, n, 0, NULL, &error));
  g_assert_cmpint (g_get_monotonic_time () - t0, <, shoal_test_scaled_us (3000 * 1000));
  char *where = g_strdup_printf ("127.0.0.1:%d", port);
  assert_error_has (error, where);
  assert_error_has (error, "pull slice 0");
  g_free (where);
  g_clear_error (&error);

  /* the server comes back on the same port: the same client reconnects */
  conf.port = port;
  env_start (&env, &conf);
  gboolean ok = shoal_rpc_client_pull (c, 0, buf, n, 0, NULL, &error);
  g_assert_no_error (error);
  g_assert_true (ok);
  env_stop (&env);
  shoal_rpc_client_free (c);

  /* a peer that accepts but never answers: the call times out (0.3 s) */
  int lfd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = { 0 };
  socklen_t alen = sizeof a;
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  g_assert_cmpint (bind (lfd, (struct sockaddr *) &a, sizeof a), ==, 0);
  g_assert_cmpint (listen (lfd, 4), ==, 0);
  g_assert_cmpint (getsockname (lfd, (struct sockaddr *) &a, &alen), ==, 0);
  ShoalRpcClientOptions o = { "127.0.0.1", ntohs (a.sin_port), TOKEN, 0, 300, 0, NULL };
  ShoalRpcClient *mute = shoal_rpc_client_connect (&o, &error);
  g_assert_no_error (error);
  t0 = g_get_monotonic_time ();
  g_assert_false (shoal_rpc_client_stats (mute, &(ShoalServerStats) { 0 }, &error));
  gint64 took = g_get_monotonic_time () - t0;
  g_assert_cmpint (took, >=, 250 * 1000);
  g_assert_cmpint (took, <, shoal_test_scaled_us (3000 * 1000));
  where = g_strdup_printf ("127.0.0.1:%d: stats: timed out after 0.3 s", o.port);
  assert_error_has (error, where);
  g_free (where);
  g_clear_error (&error);
  shoal_rpc_client_free (mute);
  close (lfd);

  /* nobody listens: connect retries, then says how long it tried */
  o.port = port;
  o.connect_retries = 3;
  t0 = g_get_monotonic_time ();
  g_assert_null (shoal_rpc_client_connect (&o, &error));
  assert_error_has (error, "cannot connect: Connection refused (3 attempts in");
  g_assert_cmpint (g_get_monotonic_time () - t0, <, shoal_test_scaled_us (3000 * 1000));
  g_clear_error (&error);
}

typedef struct {
  EnvConf conf;
  Env env;
} LateStart;

static gpointer
late_start (gpointer data)
{
  LateStart *l = data;
  g_usleep (300 * 1000);
  env_start (&l->env, &l->conf);
  return NULL;
}

/* connect retries while the server is still starting */
static void
test_connect_retries (void)
{
  LateStart l = { { .mode = SHOAL_UPDATE_ASYNC, .contributors = 1, .nslices = 1, .floats = 100 },
                  { 0 } };
  GError *error = NULL;
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = { 0 };
  socklen_t alen = sizeof a;

  /* a port that was free a moment ago */
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  g_assert_cmpint (bind (fd, (struct sockaddr *) &a, sizeof a), ==, 0);
  g_assert_cmpint (getsockname (fd, (struct sockaddr *) &a, &alen), ==, 0);
  close (fd);
  l.conf.port = ntohs (a.sin_port);

  GThread *t = g_thread_new ("late", late_start, &l);
  ShoalRpcClientOptions o = { "127.0.0.1", l.conf.port, TOKEN, 0, 2000, 30, NULL };
  ShoalRpcClient *c = shoal_rpc_client_connect (&o, &error);
  g_assert_no_error (error);
  g_thread_join (t);
  ShoalServerStats st;
  g_assert_true (shoal_rpc_client_stats (c, &st, &error));
  g_assert_no_error (error);
  shoal_rpc_client_free (c);
  env_stop (&l.env);
}

/* The bind address is honoured: a server on 127.0.0.1 is not reachable
 * on 127.0.0.2 (the c_glib server socket binds every address). */
static void
test_bind_address (void)
{
  EnvConf conf = { .mode = SHOAL_UPDATE_ASYNC, .contributors = 1, .nslices = 1, .floats = 100 };
  Env env;
  GError *error = NULL;

  env_start (&env, &conf);
  ShoalRpcClientOptions o = { "127.0.0.2", env.port, TOKEN, 0, 500, 1, NULL };
  g_assert_null (shoal_rpc_client_connect (&o, &error));
  assert_error_has (error, "127.0.0.2:");
  g_clear_error (&error);
  env_stop (&env);

  /* an address of no interface here (TEST-NET-1) */
  ShoalRpcServerOptions ro = { .bind_address = "192.0.2.1", .token = TOKEN };
  ShoalParamStore *layout = shoal_param_store_new ();
  ShoalShape s = shoal_shape_make (1, 16);
  ShoalInitSpec init = { 0 };
  ShoalUpdaterConf upd;
  ShoalServerOptions so = { .mode = SHOAL_UPDATE_ASYNC, .sync_contributors = 1, .nslices = 1 };
  shoal_param_store_declare (layout, "w", &s, &init, 1, 1, 1, 1);
  g_assert_true (shoal_param_store_allocate (layout, NULL));
  shoal_updater_conf_defaults (&upd, SHOAL_UPDATER_SGD);
  ShoalServer *server = shoal_server_new (layout, &upd, &so, NULL);
  g_assert_null (shoal_rpc_server_start (server, &ro, &error));
  assert_error_has (error, "rpc server: cannot listen on 192.0.2.1:0: ");
  g_clear_error (&error);
  shoal_server_free (server);
  shoal_param_store_free (layout);
}

/* ---- shutdown and stop ---------------------------------------------------- */

typedef struct {
  ShoalRpcServer *rpc;
  GMutex lock;
  GCond cond;
  gboolean returned;
} Waiter;

static gpointer
waiter (gpointer data)
{
  Waiter *w = data;
  shoal_rpc_server_wait (w->rpc);
  g_mutex_lock (&w->lock);
  w->returned = TRUE;
  g_cond_signal (&w->cond);
  g_mutex_unlock (&w->lock);
  return NULL;
}

static gboolean
waiter_returned (Waiter *w, gint64 within_us)
{
  gint64 deadline = g_get_monotonic_time () + within_us;
  g_mutex_lock (&w->lock);
  while (!w->returned)
    if (!g_cond_wait_until (&w->cond, &w->lock, deadline))
      break;
  gboolean r = w->returned;
  g_mutex_unlock (&w->lock);
  return r;
}

static void
test_shutdown_calls (void)
{
  EnvConf conf = { .mode = SHOAL_UPDATE_ASYNC, .contributors = 1, .nslices = 1, .floats = 100,
                   .expected_shutdowns = 2 };
  Env env;
  GError *error = NULL;
  Waiter w = { 0 };

  env_start (&env, &conf);
  w.rpc = env.rpc;
  g_mutex_init (&w.lock);
  g_cond_init (&w.cond);
  GThread *t = g_thread_new ("wait", waiter, &w);
  ShoalRpcClient *c1 = client_new (&env, TOKEN, 2000), *c2 = client_new (&env, TOKEN, 2000);
  ShoalRpcClient *bad = client_new (&env, "nope", 2000);

  g_assert_true (shoal_rpc_client_shutdown (c1, 1, &error));
  g_assert_no_error (error);
  g_assert_false (shoal_rpc_client_shutdown (bad, 3, &error));   /* does not count */
  assert_error_has (error, "shutdown refused: wrong job token");
  g_clear_error (&error);
  g_assert_false (waiter_returned (&w, 200 * 1000));
  g_assert_true (shoal_rpc_client_shutdown (c2, 2, &error));
  g_assert_true (waiter_returned (&w, shoal_test_scaled_us (3000 * 1000)));
  g_thread_join (t);

  /* stop with a client still connected */
  shoal_rpc_client_free (c1);
  shoal_rpc_client_free (bad);
  gint64 t0 = g_get_monotonic_time ();
  env_stop (&env);
  g_assert_cmpint (g_get_monotonic_time () - t0, <, shoal_test_scaled_us (3000 * 1000));
  shoal_rpc_client_free (c2);
  g_mutex_clear (&w.lock);
  g_cond_clear (&w.cond);
}

typedef struct {
  Env *env;
  int slice;
  gint64 pulled_at;
  char *error;
} Puller;

static gpointer
blocked_pull (gpointer data)
{
  Puller *p = data;
  ShoalRpcClient *c = client_new (p->env, TOKEN, 10000);
  size_t n = slice_len (p->env, p->slice, NULL);
  float *buf = g_new (float, n);
  GError *error = NULL;
  if (shoal_rpc_client_pull (c, p->slice, buf, n, 100, NULL, &error))
    p->error = g_strdup ("the pull of a version nobody makes returned");
  else
    p->error = g_strdup (error->message);
  p->pulled_at = g_get_monotonic_time ();
  g_clear_error (&error);
  g_free (buf);
  shoal_rpc_client_free (c);
  return NULL;
}

/* stop with a pull waiting for a version (10 s client timeout) and an idle
 * client: no thread is left waiting and the pull fails at once */
static void
test_stop_wakes_waiting (void)
{
  EnvConf conf = { .mode = SHOAL_UPDATE_SYNC, .contributors = 2, .nslices = 1, .floats = 100,
                   .expected_shutdowns = 5 };
  Env env;
  Waiter w = { 0 };

  env_start (&env, &conf);
  w.rpc = env.rpc;
  g_mutex_init (&w.lock);
  g_cond_init (&w.cond);
  GThread *wt = g_thread_new ("wait", waiter, &w);
  Puller p = { &env, 0, 0, NULL };
  GThread *pt = g_thread_new ("pull", blocked_pull, &p);
  ShoalRpcClient *idle = client_new (&env, TOKEN, 2000);
  wait_for_stat (&env, -1, 1);   /* the pull is waiting */
  g_usleep (100 * 1000);
  gint64 t0 = g_get_monotonic_time ();
  shoal_rpc_server_stop (env.rpc);
  g_assert_cmpint (g_get_monotonic_time () - t0, <, shoal_test_scaled_us (3000 * 1000));
  g_thread_join (pt);
  g_assert_cmpint (p.pulled_at - t0, <, shoal_test_scaled_us (3000 * 1000));
  g_assert_nonnull (p.error);
  g_test_message ("waiting pull after stop: %s", p.error);
  g_free (p.error);
  g_assert_true (waiter_returned (&w, shoal_test_scaled_us (3000 * 1000)));
  g_thread_join (wt);
  shoal_rpc_client_free (idle);
  shoal_server_free (env.server);
  shoal_param_store_free (env.layout);
  g_mutex_clear (&w.lock);
  g_cond_clear (&w.cond);
}

/* ---- many clients at once ------------------------------------------------- */

typedef struct {
  Env *env;
  int slice;
  int calls;
  int errors;
  int wrong;
} Hammer;

static gpointer
hammer (gpointer data)
{
  Hammer *h = data;
  ShoalRpcClient *c = client_new (h->env, TOKEN, 5000);
  size_t b, n = slice_len (h->env, h->slice, &b);
  float *grad = g_new (float, n), *got = g_new (float, n), *want = g_new (float, n);
  GError *error = NULL;
  gint64 version;

  memcpy (want, h->env->layout->values + b, n * sizeof (float));
  for (int k = 0; k < h->calls / 2; k++)
    {
      for (size_t i = 0; i < n; i++)
        {
          grad[i] = (float) ((k + (int) i) % 3);
          want[i] -= LR * grad[i];
        }
      gboolean ok;
      if (k % 3 == 2)
        ok = shoal_rpc_client_push_pull (c, h->slice, grad, got, n, k, &version, &error)
             && shoal_rpc_client_stats (c, &(ShoalServerStats) { 0 }, &error);
      else
        ok = shoal_rpc_client_push (c, h->slice, grad, n, k, &error)
             && shoal_rpc_client_pull (c, h->slice, got, n, k + 1, &version, &error);
      if (!ok)
        {
          h->errors++;
          g_printerr ("slice %d call %d: %s\n", h->slice, k, error->message);
          g_clear_error (&error);
          continue;
        }
      if (version != k + 1 || memcmp (got, want, n * sizeof (float)) != 0)
        h->wrong++;
    }
  g_free (grad);
  g_free (got);
  g_free (want);
  shoal_rpc_client_free (c);
  return NULL;
}

static void
test_parallel_clients (void)
{
  EnvConf conf = { .mode = SHOAL_UPDATE_ASYNC, .contributors = 1, .nslices = 4, .floats = 8000 };
  Env env;
  Hammer h[4];
  GThread *t[4];

  env_start (&env, &conf);
  for (int i = 0; i < 4; i++)
    {
      h[i] = (Hammer) { &env, i, 500, 0, 0 };
      t[i] = g_thread_new ("hammer", hammer, &h[i]);
    }
  for (int i = 0; i < 4; i++)
    {
      g_thread_join (t[i]);
      g_assert_cmpint (h[i].errors, ==, 0);
      g_assert_cmpint (h[i].wrong, ==, 0);
      g_assert_cmpint (shoal_server_slice_version (env.server, i), ==, 250);
    }
  env_stop (&env);
}

/* 40 idle connections against a cap of 4: at most 4 are kept (4
 * threads), the others are closed at once with one log line naming the
 * cap; then the idle ones are closed after the idle timeout, and a client
 * whose connection was closed while idle reconnects on its next call. */
static void
test_connection_cap (void)
{
  EnvConf conf = { .mode = SHOAL_UPDATE_ASYNC, .contributors = 1, .nslices = 1, .floats = 64,
                   .max_connections = 4, .idle_timeout_ms = 400 };
  Env env;
  env_start (&env, &conf);
  ShoalRpcClient *c = client_new (&env, TOKEN, 2000);
  gint64 version = 0;
  float buf[64];
  GError *error = NULL;
  g_assert_true (shoal_rpc_client_pull (c, 0, buf, slice_len (&env, 0, NULL), 0, &version, &error));
  g_assert_no_error (error);

  enum { N = 40 };
  int fds[N];
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons ((guint16) env.port) };
  a.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  for (int i = 0; i < N; i++)
    {
      fds[i] = socket (AF_INET, SOCK_STREAM, 0);
      g_assert_cmpint (connect (fds[i], (struct sockaddr *) &a, sizeof a), ==, 0);
    }
  /* the refused ones see the connection closed (bounded: 10 s) */
  int closed = 0;
  for (int i = 0; i < N; i++)
    {
      struct timeval tv = { 10, 0 };
      setsockopt (fds[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
  guint open = G_MAXUINT;
  for (int tries = 0; tries < 100 && (open = shoal_rpc_server_reap (env.rpc)) > 4; tries++)
    g_usleep (20 * 1000);
  g_assert_cmpuint (open, <=, 4);
  /* the first 3 (the client holds one) stay until the idle timeout; the others were refused */
  for (int i = 0; i < N; i++)
    {
      char byte;
      ssize_t n = recv (fds[i], &byte, 1, 0);
      closed += n == 0 || (n < 0 && errno == ECONNRESET);
    }
  g_assert_cmpint (closed, ==, N);   /* refused, or closed once idle for 0.4 s */
  g_mutex_lock (&cap_lock);
  char *want = g_strdup_printf ("rpc server: port %d: 4 connections open, the cap ([cluster] "
                                "rpc_max_connections = 4): refused the connection from 127.0.0.1:", env.port);
  g_assert_nonnull (cap_line);
  g_assert_true (g_str_has_prefix (cap_line, want));
  g_clear_pointer (&cap_line, g_free);
  g_mutex_unlock (&cap_lock);
  g_free (want);
  for (int i = 0; i < N; i++)
    close (fds[i]);
  /* the client's connection was closed while idle: the next call reconnects */
  g_usleep (600 * 1000);
  g_assert_true (shoal_rpc_client_pull (c, 0, buf, slice_len (&env, 0, NULL), 0, &version, &error));
  g_assert_no_error (error);
  shoal_rpc_client_free (c);
  env_stop (&env);
}

/* ---- replies sent in place (ASYNC: pinned) ---------------------------------- */

/* A pull call as the binary protocol writes it. */
static GByteArray *
pull_call (int slice, gint64 min_version)
{
  GByteArray *b = g_byte_array_new ();
  put_i32 (b, (gint32) 0x80010001);
  put_str (b, "pull");
  put_i32 (b, 1);
  put_field (b, TT_STRING, 1);
  put_str (b, TOKEN);
  put_field (b, TT_I32, 2);
  put_i32 (b, slice);
  put_field (b, TT_I64, 3);
  put_i64 (b, min_version);
  put_field (b, TT_I64, 4);
  put_i64 (b, 2000);
  put_u8 (b, TT_STOP);
  return b;
}

static void
raw_read (int fd, void *dst, size_t len)
{
  guint8 *p = dst;
  while (len > 0)
    {
      ssize_t r = recv (fd, p, len, 0);
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0)
        g_error ("the reply ended early (%s)", r == 0 ? "closed" : g_strerror (errno));
      p += r;
      len -= (size_t) r;
    }
}

static gint64
raw_be (int fd, int bytes)
{
  guint8 b[8];
  gint64 v = 0;
  raw_read (fd, b, (size_t) bytes);
  for (int i = 0; i < bytes; i++)
    v = (v << 8) | b[i];
  return bytes == 4 ? (gint64) (gint32) v : v;
}

/* Reads the T_REPLY of pull_call: a SliceValues of n floats; returns its version. */
static gint64
raw_pull_reply (int fd, float *values, size_t n)
{
  gint64 version = -1;
  g_assert_cmpint (raw_be (fd, 4), ==, (gint32) 0x80010002);
  g_assert_cmpint (raw_be (fd, 4), ==, 4);
  char name[4];
  raw_read (fd, name, 4);
  g_assert_true (memcmp (name, "pull", 4) == 0);
  raw_be (fd, 4);                                    /* seqid */
  g_assert_cmpint (raw_be (fd, 1), ==, TT_STRUCT);   /* success */
  g_assert_cmpint (raw_be (fd, 2), ==, 0);
  for (;;)
    {
      gint64 type = raw_be (fd, 1);
      if (type == TT_STOP)
        break;
      gint64 id = raw_be (fd, 2);
      if (id == 1 && type == TT_I64)
        version = raw_be (fd, 8);
      else if (id == 2 && type == TT_STRING)
        {
          g_assert_cmpint (raw_be (fd, 4), ==, (gint64) (n * sizeof (float)));
          raw_read (fd, values, n * sizeof (float));
        }
      else
        g_error ("unexpected field %d of type %d in SliceValues", (int) id, (int) type);
    }
  g_assert_cmpint (raw_be (fd, 1), ==, TT_STOP);
  return version;
}

/* Every value moves by +1 per push (SGD, lr 0.5, gradient -2). */
static void
push_plus_one (ShoalRpcClient *c, size_t n, gint64 step)
{
  float *grad = g_new (float, n);
  GError *error = NULL;
  for (size_t i = 0; i < n; i++)
    grad[i] = -2.0f;
  g_assert_true (shoal_rpc_client_push (c, 0, grad, n, step, &error));
  g_assert_no_error (error);
  g_free (grad);
}

static void
assert_at_version (const float *got, const float *v0, size_t n, gint64 version)
{
  for (size_t i = 0; i < n; i++)
    if (got[i] != v0[i] + (float) version)
      g_error ("value %zu of version %" G_GINT64_FORMAT ": %g, expected %g (a torn reply)", i, version,
               (double) got[i], (double) (v0[i] + (float) version));
}

/* ASYNC replies are sent from the server's values in place while an
 * update waits for them: a client that asks and then does not read
 * (its receive buffer tiny, the reply 16 MiB) holds up no push - the
 * reply gives its values up, copying what it had not sent - and still
 * gets the values of the version it names, whole. */
static void
test_pinned_reply_gives_way (void)
{
  EnvConf conf = { .mode = SHOAL_UPDATE_ASYNC, .contributors = 1, .nslices = 1, .floats = (size_t) 4 << 20,
                   .io_timeout_ms = 30000 };
  Env env;
  GError *error = NULL;
  ShoalServerStats st;

  env_start (&env, &conf);
  size_t n = slice_len (&env, 0, NULL);
  float *v0 = g_memdup2 (env.layout->values, n * sizeof (float));
  float *got = g_new (float, n);

  int fd = shoal_test_slow_reader (env.port);
  GByteArray *m = pull_call (0, 0);
  raw_send (fd, m->data, m->len);
  g_byte_array_unref (m);
  /* the reply holds the values once the server counted them out */
  for (int i = 0; i < 10000; i++)
    {
      shoal_server_stats (env.server, &st);
      if (st.bytes_out >= (gint64) (n * sizeof (float)))
        break;
      g_usleep (1000);
    }
  g_assert_cmpint (st.bytes_out, >=, (gint64) (n * sizeof (float)));

  /* the push goes through within its client's 10 s while the reply is stuck
   * (the reply's own stall limit is the server's 30 s I/O timeout) */
  ShoalRpcClient *c = client_new (&env, TOKEN, 10000);
  push_plus_one (c, n, 0);
  g_assert_cmpint (shoal_server_slice_version (env.server, 0), ==, 1);

  g_assert_cmpint (raw_pull_reply (fd, got, n), ==, 0);
  assert_at_version (got, v0, n, 0);
  close (fd);

  gint64 version = -1;
  g_assert_true (shoal_rpc_client_pull (c, 0, got, n, 0, &version, &error));
  g_assert_no_error (error);
  g_assert_cmpint (version, ==, 1);
  assert_at_version (got, v0, n, 1);
  shoal_rpc_client_free (c);
  g_free (got);
  g_free (v0);
  env_stop (&env);
}

typedef struct {
  Env *env;
  size_t n;
  int pushes;
} Pusher;

static gpointer
pusher_main (gpointer data)
{
  Pusher *p = data;
  ShoalRpcClient *c = client_new (p->env, TOKEN, 20000);
  for (int k = 0; k < p->pushes; k++)
    push_plus_one (c, p->n, k);
  shoal_rpc_client_free (c);
  return NULL;
}

/* Pulls of ASYNC values while another client pushes: each reply holds
 * exactly the values of the version it names, never a mix of two. */
static void
test_async_pulls_whole (void)
{
  EnvConf conf = { .mode = SHOAL_UPDATE_ASYNC, .contributors = 1, .nslices = 1, .floats = (size_t) 1 << 20 };
  Env env;
  GError *error = NULL;
  enum { PUSHES = 40, PULLS = 40 };

  env_start (&env, &conf);
  size_t n = slice_len (&env, 0, NULL);
  float *v0 = g_memdup2 (env.layout->values, n * sizeof (float));
  float *got = g_new (float, n);
  Pusher p = { &env, n, PUSHES };
  GThread *t = g_thread_new ("pusher", pusher_main, &p);
  ShoalRpcClient *c = client_new (&env, TOKEN, 20000);
  gint64 last = 0;
  for (int k = 0; k < PULLS; k++)
    {
      gint64 version = -1;
      g_assert_true (shoal_rpc_client_pull (c, 0, got, n, 0, &version, &error));
      g_assert_no_error (error);
      g_assert_cmpint (version, >=, last);
      assert_at_version (got, v0, n, version);
      last = version;
    }
  g_thread_join (t);
  gint64 version = -1;
  g_assert_true (shoal_rpc_client_pull (c, 0, got, n, PUSHES, &version, &error));
  g_assert_cmpint (version, ==, PUSHES);
  assert_at_version (got, v0, n, PUSHES);
  shoal_rpc_client_free (c);
  g_free (got);
  g_free (v0);
  env_stop (&env);
}

/* ---- a push in pieces ------------------------------------------------------- */

static void
updater_of (const EnvConf *conf, ShoalUpdaterConf *upd)
{
  shoal_updater_conf_defaults (upd, conf->updater);
  upd->schedule.lr = LR;
  if (conf->momentum > 0)
    upd->momentum = conf->momentum;
}

/* Sends bytes in pieces of odd sizes, each its own segment (TCP_NODELAY):
 * the server's reads see the message cut anywhere. */
static void
send_in_pieces (int fd, const guint8 *bytes, size_t len, guint seed)
{
  static const size_t sizes[] = { 1, 3, 7, 4093, 13, 65537, 2, 32769, 511, 100003, 5 };
  int one = 1;
  setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  for (size_t off = 0, i = seed; off < len; i++)
    {
      size_t piece = MIN (sizes[i % G_N_ELEMENTS (sizes)], len - off);
      raw_send (fd, bytes + off, piece);
      off += piece;
    }
}

/* A push received in pieces of odd sizes gives the very floats of the
 * same gradient handed to the server in one buffer, for SGD, momentum and
 * Adam in both modes. */
static void
test_push_in_pieces (void)
{
  static const struct { ShoalUpdaterKind kind; float momentum; const char *name; } rules[] = {
    { SHOAL_UPDATER_SGD, 0, "sgd" }, { SHOAL_UPDATER_SGD, 0.9f, "momentum" }, { SHOAL_UPDATER_ADAM, 0, "adam" },
  };
  static const ShoalUpdateMode modes[] = { SHOAL_UPDATE_SYNC, SHOAL_UPDATE_ASYNC };

  for (guint r = 0; r < G_N_ELEMENTS (rules); r++)
    for (guint m = 0; m < G_N_ELEMENTS (modes); m++)
      {
        EnvConf conf = { .mode = modes[m], .contributors = 1, .nslices = 2, .floats = 300000,
                         .updater = rules[r].kind, .momentum = rules[r].momentum };
        Env env;
        ShoalUpdaterConf upd;
        GError *error = NULL;

        g_test_message ("%s, %s", rules[r].name, modes[m] == SHOAL_UPDATE_SYNC ? "sync" : "async");
        env_start (&env, &conf);
        updater_of (&conf, &upd);
        ShoalServerOptions sopts = { .mode = conf.mode, .sync_contributors = 1, .nslices = conf.nslices };
        ShoalServer *whole = shoal_server_new (env.layout, &upd, &sopts, NULL);
        shoal_server_host_all (whole);
        size_t n = slice_len (&env, 1, NULL);
        float *grad = g_new (float, n), *got = g_new (float, n), *want = g_new (float, n);
        GRand *rand = g_rand_new_with_seed (11 + r * 2 + m);
        for (int step = 0; step < 3; step++)
          {
            for (size_t i = 0; i < n; i++)
              grad[i] = (float) g_rand_double_range (rand, -1, 1);
            g_assert_true (shoal_server_push (whole, 1, grad, n, step, &error));
            g_assert_no_error (error);
            GByteArray *msg = push_head_at (1, step, (gint32) (n * sizeof (float)));
            g_byte_array_append (msg, (const guint8 *) grad, (guint) (n * sizeof (float)));
            put_field (msg, TT_I64, 5);   /* base_version, unit, grad_codec: as a Thrift client writes them */
            put_i64 (msg, step);
            put_field (msg, TT_I32, 6);
            put_i32 (msg, -1);
            put_field (msg, TT_I32, 7);
            put_i32 (msg, 0);
            put_u8 (msg, TT_STOP);
            int fd = raw_connect (env.port);
            send_in_pieces (fd, msg->data, msg->len, (guint) step);
            guint8 head[4];
            g_assert_cmpint (recv (fd, head, 4, MSG_WAITALL), ==, 4);
            g_assert_cmpint (head[3], ==, 2);   /* T_REPLY */
            close (fd);
            g_byte_array_unref (msg);
            /* the reply is written after the update */
            g_assert_cmpint (shoal_server_slice_version (env.server, 1), ==, step + 1);
          }
        g_assert_true (shoal_server_pull (env.server, 1, got, n, 0, 0, NULL, &error));
        g_assert_true (shoal_server_pull (whole, 1, want, n, 0, 0, NULL, &error));
        g_assert_no_error (error);
        assert_floats_equal (got, want, n);
        g_rand_free (rand);
        g_free (grad);
        g_free (got);
        g_free (want);
        shoal_server_free (whole);
        env_stop (&env);
      }
}

/* ---- a client that is not shoal's ----------------------------------------- */

/* Apache Thrift's own Python library against this server, with code the
 * stock compiler generates from thrift/param.thrift
 * (test/support/thrift_param_client.py says what it checks).  Python runs
 * isolated (-I): the repository's thrift/ folder would otherwise shadow
 * the thrift package. */
static void
python_client (ShoalUpdateMode mode)
{
  const char *probe[] = { "/usr/bin/python3", "-I", "-c", "import thrift.protocol.TBinaryProtocol", NULL };
  int status = -1;
  if (!g_spawn_sync (NULL, (char **) probe, NULL, G_SPAWN_STDOUT_TO_DEV_NULL | G_SPAWN_STDERR_TO_DEV_NULL,
                     NULL, NULL, NULL, NULL, &status, NULL)
      || !g_spawn_check_wait_status (status, NULL))
    {
      g_test_skip ("Debian's python3-thrift is not installed (make deps installs it)");
      return;
    }

  GError *error = NULL;
  char *gen = g_dir_make_tmp ("shoal-pythrift-XXXXXX", &error);
  g_assert_no_error (error);
  const char *compile[] = { "thrift", "--gen", "py", "-out", gen, "thrift/param.thrift", NULL };
  char *err_text = NULL;
  g_assert_true (g_spawn_sync (NULL, (char **) compile, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL,
                               &err_text, &status, &error));
  g_assert_no_error (error);
  if (!g_spawn_check_wait_status (status, NULL))
    g_error ("thrift --gen py thrift/param.thrift failed: %s", err_text);
  g_free (err_text);

  /* slices of about 1.5 MiB: buffered transports write them in pieces */
  EnvConf conf = { .mode = mode, .contributors = 1, .nslices = 3, .floats = 1200000 };
  Env env;
  env_start (&env, &conf);
  GPtrArray *argv = g_ptr_array_new_with_free_func (g_free);
  g_ptr_array_add (argv, g_strdup ("timeout"));
  g_ptr_array_add (argv, g_strdup ("120"));
  g_ptr_array_add (argv, g_strdup ("/usr/bin/python3"));
  g_ptr_array_add (argv, g_strdup ("-I"));
  g_ptr_array_add (argv, g_strdup ("test/support/thrift_param_client.py"));
  g_ptr_array_add (argv, g_strdup (gen));
  g_ptr_array_add (argv, g_strdup_printf ("%d", env.port));
  g_ptr_array_add (argv, g_strdup (TOKEN));
  for (int s = 0; s < env.nslices; s++)
    {
      size_t b, n = slice_len (&env, s, &b);
      g_ptr_array_add (argv, g_strdup_printf ("%zu:%zu", b, n));
    }
  g_ptr_array_add (argv, NULL);
  char *out = NULL;
  err_text = NULL;
  g_assert_true (g_spawn_sync (NULL, (char **) argv->pdata, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &out,
                               &err_text, &status, &error));
  g_assert_no_error (error);
  if (!g_spawn_check_wait_status (status, NULL))
    g_error ("the Python Thrift client failed (status %d): %s%s", status, out, err_text);
  g_test_message ("%s", out);

  /* and the server holds what the client was told: two SGD steps */
  for (int s = 0; s < env.nslices; s++)
    {
      size_t b, n = slice_len (&env, s, &b);
      float *got = g_new (float, n), *want = g_new (float, n);
      for (size_t i = 0; i < n; i++)
        {
          size_t x = b + i;
          want[i] = (float) ((int) ((x * 7) % 2001) - 1000);
          for (int step = 0; step < 2; step++)
            want[i] -= LR * (float) ((int) ((x * 3 + (size_t) step) % 7) - 3);
        }
      g_assert_true (shoal_server_pull (env.server, s, got, n, 0, 0, NULL, &error));
      g_assert_no_error (error);
      assert_floats_equal (got, want, n);
      g_assert_cmpint (shoal_server_slice_version (env.server, s), ==, 2);
      g_free (got);
      g_free (want);
    }
  env_stop (&env);
  g_free (out);
  g_free (err_text);
  g_ptr_array_free (argv, TRUE);
  const char *rm[] = { "rm", "-rf", gen, NULL };
  g_spawn_sync (NULL, (char **) rm, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL, NULL, NULL);
  g_free (gen);
}

static void
test_python_client (void)
{
  python_client (SHOAL_UPDATE_SYNC);
}

/* ASYNC replies go out pinned (shoal_thrift_socket_write_pinned): the
 * same bytes to a stock client */
static void
test_python_client_async (void)
{
  python_client (SHOAL_UPDATE_ASYNC);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_log_set_always_fatal (G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);
  g_log_set_default_handler (log_handler, NULL);
  g_test_add_func ("/rpc/round-trip", test_round_trip);
  g_test_add_func ("/rpc/large-slice", test_large_slice);
  g_test_add_func ("/rpc/codecs", test_codecs);
  g_test_add_func ("/rpc/sync-two-workers", test_sync_two_workers);
  g_test_add_func ("/rpc/async-each-push", test_async_each_push);
  g_test_add_func ("/rpc/apply-delta-and-stats", test_apply_delta_and_stats);
  g_test_add_func ("/rpc/refusals", test_refusals);
  g_test_add_func ("/rpc/stop-at", test_stop_at);
  g_test_add_func ("/rpc/message-limit", test_message_limit);
  g_test_add_func ("/rpc/bad-bytes", test_bad_bytes);
  g_test_add_func ("/rpc/stalled-sender", test_stalled_sender);
  g_test_add_func ("/rpc/dead-servers", test_dead_servers);
  g_test_add_func ("/rpc/connect-retries", test_connect_retries);
  g_test_add_func ("/rpc/bind-address", test_bind_address);
  g_test_add_func ("/rpc/shutdown-calls", test_shutdown_calls);
  g_test_add_func ("/rpc/stop-wakes-waiting", test_stop_wakes_waiting);
  g_test_add_func ("/rpc/parallel-clients", test_parallel_clients);
  g_test_add_func ("/rpc/connection-cap", test_connection_cap);
  g_test_add_func ("/rpc/pinned-reply-gives-way", test_pinned_reply_gives_way);
  g_test_add_func ("/rpc/async-pulls-whole", test_async_pulls_whole);
  g_test_add_func ("/rpc/push-in-pieces", test_push_in_pieces);
  g_test_add_func ("/rpc/python-client", test_python_client);
  g_test_add_func ("/rpc/python-client-async", test_python_client_async);
  return g_test_run ();
}
