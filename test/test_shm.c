/* marks: threads (they start threads: TSan runs this file in `make SANITIZE=thread test-threads`) */
/* Shared memory for the slices of workers and servers on one host: the
 * region's checks (a region is validated like a message: the server must
 * never read or write outside what it mapped, whatever the peer does),
 * the push_pull_shm call and its refusals, and a param client that moves
 * its slices through shared memory ending with exactly the values of one
 * that sends them over the socket.  Values are small integers and the
 * SGD rate 0.5, so results are exact and compared bit for bit. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "comm/param_client.h"
#include "core/error.h"
#include "rpc/shm_region.h"
#include "server/rpc_client.h"
#include "server/rpc_server.h"
#include "server/server.h"

#define TOKEN "shm-token"

static void
assert_error_has (GError *error, const char *part)
{
  g_assert_nonnull (error);
  if (strstr (error->message, part) == NULL)
    g_error ("error \"%s\" does not say \"%s\"", error->message, part);
}

/* ---- the region ------------------------------------------------------------ */

static void
test_region_attach (void)
{
  GError *error = NULL;
  ShoalShmRegion *r = shoal_shm_region_create ("test", 10000, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (shoal_shm_region_data_bytes (r), >=, 10000);
  g_assert_cmpuint ((guintptr) shoal_shm_region_data (r) % 64, ==, 0);
  ShoalShmOffer offer;
  shoal_shm_region_offer (r, &offer);
  ShoalShmRegion *peer = shoal_shm_region_attach (&offer, 10000, &error);
  g_assert_no_error (error);
  /* one memory seen from both mappings */
  float *a = shoal_shm_region_data (r), *b = shoal_shm_region_data (peer);
  a[100] = 42.0f;
  g_assert_cmpfloat (b[100], ==, 42.0f);
  b[7] = -3.0f;
  g_assert_cmpfloat (a[7], ==, -3.0f);

  /* sealed: nobody can shrink the file under a mapping (SIGBUS) or grow it */
  int fd = offer.fd;
  g_assert_cmpint (ftruncate (fd, 4096), ==, -1);
  g_assert_cmpint (errno, ==, EPERM);
  g_assert_cmpint (ftruncate (fd, offer.bytes + 4096), ==, -1);
  shoal_shm_region_free (peer);
  shoal_shm_region_free (r);
}

static void
expect_refused (const ShoalShmOffer *offer, size_t want, const char *part)
{
  GError *error = NULL;
  ShoalShmRegion *r = shoal_shm_region_attach (offer, want, &error);
  g_assert_null (r);
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC);
  assert_error_has (error, part);
  g_clear_error (&error);
}

static void
test_region_refusals (void)
{
  GError *error = NULL;
  ShoalShmRegion *r = shoal_shm_region_create ("test", 8192, &error);
  g_assert_no_error (error);
  ShoalShmOffer good, bad;
  shoal_shm_region_offer (r, &good);

  bad = good;
  bad.nonce[3] ^= 1;
  expect_refused (&bad, 8192, "does not hold the region offered");
  bad = good;
  g_strlcpy (bad.host, "another-machine", sizeof bad.host);
  expect_refused (&bad, 8192, "on another host");
  bad = good;
  bad.bytes += 4096;
  expect_refused (&bad, 8192, "is not a file of the");
  expect_refused (&good, 1 << 20, "cannot hold");
  bad = good;
  bad.bytes = -5;
  expect_refused (&bad, 16, "cannot hold");
  bad = good;
  bad.fd = 9999;
  expect_refused (&bad, 8192, "/proc/");

  /* a pipe is never opened, whatever its number */
  int pipefd[2];
  g_assert_cmpint (pipe (pipefd), ==, 0);
  bad = good;
  bad.fd = pipefd[0];
  expect_refused (&bad, 8192, "is not a shoal region");
  close (pipefd[0]);
  close (pipefd[1]);

  /* a shoal memfd that is not sealed: its creator could shrink it */
  int fd = memfd_create ("shoal-unsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (ftruncate (fd, good.bytes), ==, 0);
  bad = good;
  bad.fd = fd;
  expect_refused (&bad, 8192, "not sealed against resizing");
  close (fd);
  shoal_shm_region_free (r);
}

/* ---- the calls ------------------------------------------------------------- */

typedef struct {
  ShoalParamStore *layout;
  ShoalServer *server;
  ShoalRpcServer *rpc;
  int port;
} Env;

#define NSLICES 6
#define FLOATS 1024   /* 6 slices of 160-176 floats */

static void
value_pattern (float *v, size_t n, int seed)
{
  for (size_t i = 0; i < n; i++)
    v[i] = (float) ((int) ((i * 7 + (size_t) seed * 13) % 201) - 100);
}

static ShoalParamStore *
make_store (void)
{
  ShoalParamStore *store = shoal_param_store_new ();
  ShoalInitSpec init = { 0 };
  ShoalShape a = shoal_shape_make (1, FLOATS / 2), b = shoal_shape_make (2, 2, FLOATS / 4);
  shoal_param_store_declare (store, "fc/weight", &a, &init, 1, 1, 1.0f, 1.0f);
  shoal_param_store_declare (store, "fc/bias", &b, &init, 1, 1, 1.0f, 1.0f);
  g_assert_true (shoal_param_store_allocate (store, NULL));
  value_pattern (store->values, store->total, 0);
  return store;
}

/* ssp_units 0: no SSP bound */
static void
env_start_ssp (Env *env, ShoalUpdateMode mode, int contributors, int ssp_units, int ssp_bound)
{
  ShoalUpdaterConf upd;
  ShoalServerOptions sopts = { .mode = mode, .sync_contributors = contributors, .nslices = NSLICES,
                               .ssp_units = ssp_units, .ssp_bound = ssp_bound };
  ShoalRpcServerOptions ropts = { .bind_address = "127.0.0.1", .token = TOKEN };
  GError *error = NULL;
  env->layout = make_store ();
  shoal_updater_conf_defaults (&upd, SHOAL_UPDATER_SGD);
  upd.schedule.lr = 0.5f;
  env->server = shoal_server_new (env->layout, &upd, &sopts, &error);
  g_assert_no_error (error);
  shoal_server_host_all (env->server);
  env->rpc = shoal_rpc_server_start (env->server, &ropts, &error);
  g_assert_no_error (error);
  env->port = shoal_rpc_server_port (env->rpc);
}

static void
env_start (Env *env, ShoalUpdateMode mode, int contributors)
{
  env_start_ssp (env, mode, contributors, 0, 0);
}

static void
env_stop (Env *env)
{
  shoal_rpc_server_stop (env->rpc);
  shoal_server_free (env->server);
  shoal_param_store_free (env->layout);
}

static ShoalRpcClient *
client_new (Env *env, const char *token)
{
  ShoalRpcClientOptions o = { "127.0.0.1", env->port, token, 0, 5000, 0, NULL };
  GError *error = NULL;
  ShoalRpcClient *c = shoal_rpc_client_connect (&o, &error);
  g_assert_no_error (error);
  return c;
}

/* A region laid out as a param client lays out its store: values, then
 * gradients at float `total`. */
static ShoalShmRegion *
worker_region (size_t total, ShoalShmOffer *offer)
{
  GError *error = NULL;
  ShoalShmRegion *r = shoal_shm_region_create ("test", 2 * total * sizeof (float), &error);
  g_assert_no_error (error);
  shoal_shm_region_offer (r, offer);
  return r;
}

static void
test_push_pull_shm (void)
{
  Env shm_env, sock_env;
  env_start (&shm_env, SHOAL_UPDATE_ASYNC, 1);
  env_start (&sock_env, SHOAL_UPDATE_ASYNC, 1);
  size_t total = shoal_server_total (shm_env.server);
  ShoalShmOffer offer;
  ShoalShmRegion *region = worker_region (total, &offer);
  float *values = shoal_shm_region_data (region), *grads = values + total;
  ShoalRpcClient *a = client_new (&shm_env, TOKEN), *b = client_new (&sock_env, TOKEN);
  g_assert_true (shoal_rpc_client_use_shm (a, &offer, 0, (gint64) total));
  float *sock_values = g_new0 (float, total);
  GError *error = NULL;

  for (int step = 0; step < 4; step++)
    {
      value_pattern (grads, total, step + 1);
      /* slices 5, 1, 3 in one call, then 0, 2, 4 */
      gint64 bases[3] = { -1, -1, -1 }, versions[3];
      const gint32 calls[2][3] = { { 5, 1, 3 }, { 0, 2, 4 } };
      for (int call = 0; call < 2; call++)
        {
          g_assert_true (shoal_rpc_client_push_pull_shm (a, calls[call], 3, step, bases, -1, TRUE, FALSE,
                                                         versions, &error));
          g_assert_no_error (error);
          for (int i = 0; i < 3; i++)
            g_assert_cmpint (versions[i], ==, step + 1);
        }
      for (int s = NSLICES - 1; s >= 0; s--)
        {
          size_t begin, end;
          shoal_server_slice_range (sock_env.server, s, &begin, &end);
          g_assert_true (shoal_rpc_client_push_pull (b, s, grads + begin, sock_values + begin,
                                                     end - begin, step, NULL, &error));
          g_assert_no_error (error);
        }
      g_assert_cmpmem (values, total * sizeof (float), sock_values, total * sizeof (float));
    }
  g_assert_cmpmem (shoal_server_values (shm_env.server), total * sizeof (float),
                   shoal_server_values (sock_env.server), total * sizeof (float));

  /* a push without a fetch leaves the worker's values alone */
  memset (values, 0, total * sizeof (float));
  gint64 base = 4, version;
  gint32 zero = 0;
  g_assert_true (shoal_rpc_client_push_pull_shm (a, &zero, 1, 4, &base, -1, FALSE, FALSE, &version, &error));
  g_assert_no_error (error);
  g_assert_cmpint (version, ==, 5);
  g_assert_cmpfloat (values[0], ==, 0);

  /* the connection drops: the next call attaches again */
  shoal_rpc_client_free (a);
  a = client_new (&shm_env, TOKEN);
  g_assert_true (shoal_rpc_client_use_shm (a, &offer, 0, (gint64) total));
  g_assert_true (shoal_rpc_client_push_pull_shm (a, &zero, 1, 5, &base, -1, TRUE, FALSE, &version, &error));
  g_assert_no_error (error);
  g_assert_cmpint (version, ==, 6);

  shoal_rpc_client_free (a);
  shoal_rpc_client_free (b);
  shoal_shm_region_free (region);
  g_free (sock_values);
  env_stop (&shm_env);
  env_stop (&sock_env);
}

typedef struct {
  Env *env;
  ShoalShmOffer *offer;
  size_t total;
  gboolean ok;
} SspCall;

/* unit 0's push of step 1 (bound 1: it waits for unit 1's step 0) */
static gpointer
ssp_push_step1 (gpointer data)
{
  SspCall *call = data;
  ShoalRpcClient *a = client_new (call->env, TOKEN);
  g_assert_true (shoal_rpc_client_use_shm (a, call->offer, 0, (gint64) call->total));
  gint32 zero = 0;
  gint64 base = 1, version = -1;
  GError *error = NULL;
  call->ok = shoal_rpc_client_push_pull_shm (a, &zero, 1, 1, &base, 0, TRUE, FALSE, &version, &error);
  g_assert_no_error (error);
  g_assert_cmpint (version, ==, 3);
  shoal_rpc_client_free (a);
  return NULL;
}

/* SSP: a reply held until the slowest unit catches up carries the values
 * of that moment, with the slowest unit's pushes in them: a worker at
 * step t must see every other unit's steps up to t - s - 1.  (The shared
 * memory path once wrote the values of the moment of the push, so the
 * worker missed them: topology_ssp saw updates 2s + 2 versions stale.) */
static void
test_ssp_reply_after_bound (void)
{
  Env env;
  env_start_ssp (&env, SHOAL_UPDATE_ASYNC, 1, 2, 1);
  size_t total = shoal_server_total (env.server), begin, end;
  shoal_server_slice_range (env.server, 0, &begin, &end);
  size_t n = end - begin;
  ShoalShmOffer offer;
  ShoalShmRegion *region = worker_region (total, &offer);
  float *values = shoal_shm_region_data (region), *grads = values + total;
  GError *error = NULL;

  /* unit 0, step 0: within the bound, answered at once */
  ShoalRpcClient *a = client_new (&env, TOKEN);
  g_assert_true (shoal_rpc_client_use_shm (a, &offer, 0, (gint64) total));
  value_pattern (grads, total, 1);
  gint32 zero = 0;
  gint64 base = 0, version = -1;
  g_assert_true (shoal_rpc_client_push_pull_shm (a, &zero, 1, 0, &base, 0, TRUE, FALSE, &version, &error));
  g_assert_no_error (error);
  g_assert_cmpint (version, ==, 1);
  shoal_rpc_client_free (a);

  /* unit 0, step 1: held until unit 1 pushes its step 0 */
  value_pattern (grads, total, 2);
  SspCall call = { &env, &offer, total, FALSE };
  GThread *t = g_thread_new ("ssp-unit-0", ssp_push_step1, &call);
  for (int i = 0; i < 500 && shoal_server_slice_version (env.server, 0) < 2; i++)
    g_usleep (10 * 1000);
  g_assert_cmpint (shoal_server_slice_version (env.server, 0), ==, 2);
  g_usleep (50 * 1000);  /* the reply waits on the bound */
  float *other = g_new (float, n);
  value_pattern (other, n, 3);
  ShoalPushOrigin unit1 = { 0, 1 };
  g_assert_true (shoal_server_push_from (env.server, 0, other, n, 0, &unit1, NULL, &error));
  g_assert_no_error (error);
  g_thread_join (t);
  g_assert_true (call.ok);
  /* the worker holds the server's values: unit 1's push included */
  g_assert_cmpmem (values + begin, n * sizeof (float), shoal_server_values (env.server) + begin,
                   n * sizeof (float));

  g_free (other);
  shoal_shm_region_free (region);
  env_stop (&env);
}

static void
test_shm_refusals (void)
{
  Env env;
  env_start (&env, SHOAL_UPDATE_ASYNC, 1);
  size_t total = shoal_server_total (env.server);
  GError *error = NULL;
  gint64 bases[NSLICES + 1] = { 0 }, versions[NSLICES + 1];
  gint32 all[NSLICES + 1] = { 0, 1, 2, 3, 4, 5, 0 };

  /* no region attached on this connection */
  ShoalRpcClient *c = client_new (&env, TOKEN);
  g_assert_false (shoal_rpc_client_push_pull_shm (c, all, 1, 0, bases, -1, TRUE, FALSE, versions, &error));
  assert_error_has (error, "no shared memory");
  g_clear_error (&error);

  /* a region too small for the layout, areas that overlap, a wrong
   * token: refused, and the client stays on the socket */
  ShoalShmOffer small_offer, offer;
  ShoalShmRegion *small = worker_region (total / 2, &small_offer);
  g_assert_false (shoal_rpc_client_use_shm (c, &small_offer, 0, (gint64) total));
  g_assert_false (shoal_rpc_client_shm_usable (c));
  shoal_rpc_client_free (c);
  ShoalShmRegion *region = worker_region (total, &offer);
  c = client_new (&env, TOKEN);
  g_assert_false (shoal_rpc_client_use_shm (c, &offer, 0, 16));
  shoal_rpc_client_free (c);
  c = client_new (&env, "wrong");
  g_test_expect_message (NULL, G_LOG_LEVEL_WARNING, "*attach_shm*refused: wrong job token*");
  g_assert_false (shoal_rpc_client_use_shm (c, &offer, 0, (gint64) total));
  g_test_assert_expected_messages ();
  shoal_rpc_client_free (c);

  /* attached: slices and versions outside the bounds */
  c = client_new (&env, TOKEN);
  g_assert_true (shoal_rpc_client_use_shm (c, &offer, 0, (gint64) total));
  gint32 six[] = { NSLICES }, minus[] = { -1 }, twice[] = { 3, 3 };
  struct { const gint32 *ids; int count; const char *part; } bad[] = {
    { six, 1, "unknown slice 6" },
    { minus, 1, "unknown slice -1" },
    { all, NSLICES + 1, "1 to 6 ids" },
    { all, 0, "1 to 6 ids" },
    { twice, 2, "slice 3 twice" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_assert_false (shoal_rpc_client_push_pull_shm (c, bad[i].count > 0 ? bad[i].ids : all,
                                                      bad[i].count, 0, bases, -1, TRUE, FALSE, versions, &error));
      assert_error_has (error, bad[i].part);
      g_clear_error (&error);
    }
  /* a NaN written into the region (issue 23: it read as "lower lr?" in
   * every worker): refused, naming the region and the float, and the
   * slice keeps its values */
  float *grads = (float *) shoal_shm_region_data (region) + total;
  size_t begin, end;
  shoal_server_slice_range (env.server, 2, &begin, &end);
  grads[begin + 5] = NAN;
  gint32 two[] = { 2 };
  g_assert_false (shoal_rpc_client_push_pull_shm (c, two, 1, 0, bases, -1, TRUE, FALSE, versions, &error));
  assert_error_has (error, "slice 2: the gradient in the shared-memory region holds nan at float 5");
  g_clear_error (&error);
  for (size_t i = begin; i < end; i++)
    g_assert_true (isfinite (shoal_server_values (env.server)[i]));
  grads[begin + 5] = 0;
  /* the server still serves it */
  g_assert_true (shoal_rpc_client_push_pull_shm (c, all, NSLICES, 0, bases, -1, TRUE, FALSE, versions, &error));
  g_assert_no_error (error);
  shoal_rpc_client_free (c);
  shoal_shm_region_free (small);
  shoal_shm_region_free (region);
  env_stop (&env);
}

/* Pushes step `step` of every slice from a socket client that makes the
 * update (the other contributor pushed before) and receives the values. */
static void
socket_push_pull_all (ShoalRpcClient *c, ShoalServer *server, const float *grads, float *values, int step)
{
  GError *error = NULL;
  for (int s = 0; s < NSLICES; s++)
    {
      size_t begin, end;
      shoal_server_slice_range (server, s, &begin, &end);
      g_assert_true (shoal_rpc_client_push_pull (c, s, grads + begin, values + begin, end - begin, step, NULL,
                                                 &error));
      g_assert_no_error (error);
    }
}

/* Whether the server's value storage is `values` (a mapping of it: the
 * server maps the region at another address): a change made there shows
 * in the server's values.  Lends the server's buffer, so last. */
static gboolean
stores_values_in (ShoalServer *server, float *values)
{
  volatile float *v = shoal_server_values (server);
  float keep = values[0];
  values[0] = keep + 1.0f;
  gboolean same = v[0] == keep + 1.0f;
  values[0] = keep;
  return same;
}

typedef struct {
  ShoalRpcClient *client;
  gint64 step;
  gboolean ok;
} ShmCall;

/* push_pull_shm of every slice with fetch, no clear_grads */
static gpointer
shm_call_main (gpointer data)
{
  ShmCall *call = data;
  gint32 all[NSLICES] = { 0, 1, 2, 3, 4, 5 };
  gint64 bases[NSLICES] = { -1, -1, -1, -1, -1, -1 }, versions[NSLICES];
  GError *error = NULL;
  call->ok = shoal_rpc_client_push_pull_shm (call->client, all, NSLICES, call->step, bases, -1, TRUE, FALSE,
                                             versions, &error);
  g_assert_no_error (error);
  return NULL;
}

/* SYNC: the first region attached becomes the server's value storage, so
 * its worker reads every update in place, even one that another
 * contributor's push made; the gradients it sends with clear_grads come
 * back zero.  The mapping outlives the worker's connection, a later
 * region is written a copy, and an ASYNC server adopts nothing. */
static void
test_sync_adopts_region (void)
{
  Env env, ref;
  env_start (&env, SHOAL_UPDATE_SYNC, 2);
  env_start (&ref, SHOAL_UPDATE_SYNC, 2);
  size_t total = shoal_server_total (env.server);
  ShoalShmOffer offer;
  ShoalShmRegion *region = worker_region (total, &offer);
  float *values = shoal_shm_region_data (region), *grads = values + total;
  ShoalRpcClient *a = client_new (&env, TOKEN), *b = client_new (&env, TOKEN);
  ShoalRpcClient *ra = client_new (&ref, TOKEN), *rb = client_new (&ref, TOKEN);
  g_assert_true (shoal_rpc_client_use_shm (a, &offer, 0, (gint64) total));
  /* the server's values were copied into the region when it attached */
  g_assert_cmpmem (values, total * sizeof (float), ref.layout->values, total * sizeof (float));
  float *ref_values = g_new0 (float, total), *b_values = g_new0 (float, total), *grad_a = g_new (float, total),
        *grad_b = g_new (float, total);
  gint32 all[NSLICES] = { 0, 1, 2, 3, 4, 5 };
  gint64 bases[NSLICES] = { -1, -1, -1, -1, -1, -1 }, versions[NSLICES];
  GError *error = NULL;

  for (int step = 0; step < 3; step++)
    {
      value_pattern (grad_a, total, 2 * step + 1);
      value_pattern (grad_b, total, 2 * step + 2);
      memcpy (grads, grad_a, total * sizeof (float));
      /* a pushes first (no fetch); b's push makes the update */
      g_assert_true (shoal_rpc_client_push_pull_shm (a, all, NSLICES, step, bases, -1, FALSE, TRUE, versions,
                                                     &error));
      g_assert_no_error (error);
      for (size_t i = 0; i < total; i++)
        g_assert_true (grads[i] == 0);
      for (int s = 0; s < NSLICES; s++)
        {
          size_t begin, end;
          shoal_server_slice_range (ref.server, s, &begin, &end);
          g_assert_true (shoal_rpc_client_push (ra, s, grad_a + begin, end - begin, step, &error));
          g_assert_no_error (error);
        }
      socket_push_pull_all (b, env.server, grad_b, b_values, step);
      socket_push_pull_all (rb, ref.server, grad_b, ref_values, step);
      g_assert_cmpmem (b_values, total * sizeof (float), ref_values, total * sizeof (float));
      /* a made no call since its push: the update wrote its region */
      g_assert_cmpmem (values, total * sizeof (float), ref_values, total * sizeof (float));
    }

  /* the worker goes (its connection and its mapping): the server keeps
   * the storage and goes on */
  shoal_rpc_client_free (a);
  shoal_shm_region_free (region);
  for (int step = 3; step < 5; step++)
    {
      value_pattern (grad_a, total, 2 * step + 1);
      value_pattern (grad_b, total, 2 * step + 2);
      for (int s = 0; s < NSLICES; s++)
        {
          size_t begin, end;
          shoal_server_slice_range (env.server, s, &begin, &end);
          g_assert_true (shoal_rpc_client_push (b, s, grad_a + begin, end - begin, step, &error));
          g_assert_true (shoal_rpc_client_push (ra, s, grad_a + begin, end - begin, step, &error));
          g_assert_no_error (error);
        }
      socket_push_pull_all (b, env.server, grad_b, b_values, step);
      socket_push_pull_all (rb, ref.server, grad_b, ref_values, step);
      g_assert_cmpmem (b_values, total * sizeof (float), ref_values, total * sizeof (float));
    }

  /* a second region is not adopted: the values are written into it */
  ShoalShmOffer offer2;
  ShoalShmRegion *region2 = worker_region (total, &offer2);
  float *values2 = shoal_shm_region_data (region2), *grads2 = values2 + total;
  ShoalRpcClient *c = client_new (&env, TOKEN);
  g_assert_true (shoal_rpc_client_use_shm (c, &offer2, 0, (gint64) total));
  value_pattern (grads2, total, 11);
  value_pattern (grad_b, total, 12);
  for (int s = 0; s < NSLICES; s++)
    {
      size_t begin, end;
      shoal_server_slice_range (ref.server, s, &begin, &end);
      g_assert_true (shoal_rpc_client_push (ra, s, grads2 + begin, end - begin, 5, &error));
      g_assert_no_error (error);
    }
  socket_push_pull_all (rb, ref.server, grad_b, ref_values, 5);
  ShmCall call = { c, 5, FALSE };
  GThread *t = g_thread_new ("shm-call", shm_call_main, &call);
  /* c's call waits for b's push of step 5 */
  socket_push_pull_all (b, env.server, grad_b, b_values, 5);
  g_thread_join (t);
  g_assert_true (call.ok);
  g_assert_cmpmem (values2, total * sizeof (float), ref_values, total * sizeof (float));
  g_assert_true (grads2[1] != 0);   /* kept: clear_grads was not asked */
  g_assert_false (stores_values_in (env.server, values2));

  /* ASYNC: the values change while workers compute: nothing adopted */
  Env async;
  env_start (&async, SHOAL_UPDATE_ASYNC, 1);
  ShoalRpcClient *d = client_new (&async, TOKEN);
  g_assert_true (shoal_rpc_client_use_shm (d, &offer2, 0, (gint64) total));
  g_assert_true (shoal_rpc_client_push_pull_shm (d, all, NSLICES, 0, bases, -1, TRUE, TRUE, versions, &error));
  g_assert_no_error (error);
  g_assert_cmpmem (values2, total * sizeof (float), shoal_server_values (async.server), total * sizeof (float));
  g_assert_false (stores_values_in (async.server, values2));
  for (size_t i = 0; i < total; i++)
    g_assert_true (grads2[i] == 0);
  shoal_rpc_client_free (d);
  env_stop (&async);

  g_free (ref_values);
  g_free (b_values);
  g_free (grad_a);
  g_free (grad_b);
  shoal_rpc_client_free (b);
  shoal_rpc_client_free (c);
  shoal_rpc_client_free (ra);
  shoal_rpc_client_free (rb);
  shoal_shm_region_free (region2);
  env_stop (&env);
  env_stop (&ref);
}

/* ---- the param client ------------------------------------------------------- */

static ShoalParamClient *
remote_client (ShoalParamStore *store, Env *env, gboolean shm)
{
  GError *error = NULL;
  ShoalParamClient *c = shoal_param_client_new (store, NSLICES, SHOAL_UPDATE_SYNC);
  ShoalRpcClientOptions o = { "127.0.0.1", env->port, TOKEN, 0, 5000, 0, NULL };
  for (int s = 0; s < NSLICES; s++)
    shoal_param_client_route_remote (c, s, &o);
  shoal_param_client_set_shared_memory (c, shm);
  g_assert_true (shoal_param_client_start (c, &error));
  g_assert_no_error (error);
  g_assert_cmpint (shoal_param_client_shared_memory (c), ==, shm);
  g_assert_true (shoal_param_client_fetch (c, &error));
  g_assert_no_error (error);
  return c;
}

static void
test_param_client_same_values (void)
{
  Env shm_env, sock_env;
  env_start (&shm_env, SHOAL_UPDATE_SYNC, 1);
  env_start (&sock_env, SHOAL_UPDATE_SYNC, 1);
  ShoalParamStore *a = make_store (), *b = make_store ();
  ShoalParamClient *ca = remote_client (a, &shm_env, TRUE), *cb = remote_client (b, &sock_env, FALSE);
  GError *error = NULL;
  size_t total = a->total;

  for (int step = 0; step < 5; step++)
    {
      value_pattern (a->grads, total, step + 3);
      value_pattern (b->grads, total, step + 3);
      shoal_param_client_step_done (ca, step);
      shoal_param_client_step_done (cb, step);
      g_assert_true (shoal_param_client_wait (ca, &error));
      g_assert_true (shoal_param_client_wait (cb, &error));
      g_assert_no_error (error);
      g_assert_cmpmem (a->values, total * sizeof (float), b->values, total * sizeof (float));
      /* sent gradients are cleared for the next backward either way */
      for (size_t i = 0; i < total; i++)
        g_assert_true (a->grads[i] == 0 && b->grads[i] == 0);
      g_assert_cmpint (shoal_param_client_catch_up_step (ca, step + 1), ==, step + 1);
    }
  /* SYNC with one worker: the server keeps its values in the worker's region */
  g_assert_true (stores_values_in (shm_env.server, a->values));
  g_assert_cmpmem (shoal_server_values (shm_env.server), total * sizeof (float),
                   shoal_server_values (sock_env.server), total * sizeof (float));
  shoal_param_client_free (ca);
  shoal_param_client_free (cb);
  /* the region stays with the store, which outlives the client */
  g_assert_cmpfloat (a->values[1], ==, b->values[1]);
  shoal_param_store_free (a);
  shoal_param_store_free (b);
  env_stop (&shm_env);
  env_stop (&sock_env);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/shm/region-attach", test_region_attach);
  g_test_add_func ("/shm/region-refusals", test_region_refusals);
  g_test_add_func ("/shm/push-pull-shm", test_push_pull_shm);
  g_test_add_func ("/shm/ssp-reply-after-bound", test_ssp_reply_after_bound);
  g_test_add_func ("/shm/refusals", test_shm_refusals);
  g_test_add_func ("/shm/sync-adopts-region", test_sync_adopts_region);
  g_test_add_func ("/shm/param-client-same-values", test_param_client_same_values);
  return g_test_run ();
}
