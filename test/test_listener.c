/* marks: threads (they start threads: TSan runs this file in `make SANITIZE=thread test-threads`) */
/* The RPC listener's threads (rpc/listener.h) and the pool under it
 * (rpc/thread_pool.h): idle connections cost no thread, calls that block
 * on each other (a Sandblaster step) get threads beyond the pool's size
 * instead of deadlocking, a next call already read ahead is served, a
 * thread waiting for its connection's next call yields to other calls,
 * idle connections are closed, stop ends with calls blocked and hundreds
 * of connections open.  Thread counts come from /proc/self/status.
 * Every wait is bounded; no assertion is on a time. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>

#include "core/error.h"
#include "rpc/thread_pool.h"
#include "server/rpc_client.h"
#include "server/rpc_server.h"
#include "server/server.h"
#include "support/time_scale.h"

#define TOKEN "pool-secret"

/* ---- helpers -------------------------------------------------------------- */

static int
process_threads (void)
{
  char *status = NULL;
  int threads = -1;
  g_assert_true (g_file_get_contents ("/proc/self/status", &status, NULL, NULL));
  const char *line = strstr (status, "\nThreads:");
  g_assert_nonnull (line);
  threads = atoi (line + strlen ("\nThreads:"));
  g_free (status);
  g_assert_cmpint (threads, >, 0);
  return threads;
}

typedef struct {
  ShoalParamStore *layout;
  ShoalServer *server;
  ShoalRpcServer *rpc;
  int port;
} Env;

static void
env_start_opts (Env *env, ShoalUpdateMode mode, int contributors, int max_connections, gint64 idle_timeout_ms,
                int threads, gboolean threads_end_when_idle, gint64 next_call_wait_ms, int max_unproven,
                gint64 unproven_timeout_ms)
{
  ShoalInitSpec init = { 0 };
  ShoalUpdaterConf upd;
  ShoalServerOptions sopts = { .mode = mode, .sync_contributors = contributors, .nslices = 1 };
  ShoalRpcServerOptions ropts = { 0 };
  GError *error = NULL;

  memset (env, 0, sizeof *env);
  env->layout = shoal_param_store_new ();
  ShoalShape shape = shoal_shape_make (1, 64);
  shoal_param_store_declare (env->layout, "fc/weight", &shape, &init, 1, 1, 1.0f, 1.0f);
  g_assert_true (shoal_param_store_allocate (env->layout, NULL));
  shoal_updater_conf_defaults (&upd, SHOAL_UPDATER_SGD);
  upd.schedule.lr = 0.5f;
  env->server = shoal_server_new (env->layout, &upd, &sopts, NULL);
  shoal_server_host_slice (env->server, 0);
  ropts.bind_address = "127.0.0.1";
  ropts.token = TOKEN;
  ropts.io_timeout_ms = 10000;
  ropts.max_connections = max_connections;
  ropts.idle_timeout_ms = idle_timeout_ms;
  ropts.threads = threads;
  ropts.threads_end_when_idle = threads_end_when_idle;
  ropts.next_call_wait_ms = next_call_wait_ms;
  ropts.max_unproven = max_unproven;
  ropts.unproven_timeout_ms = unproven_timeout_ms;
  env->rpc = shoal_rpc_server_start (env->server, &ropts, &error);
  g_assert_no_error (error);
  env->port = shoal_rpc_server_port (env->rpc);
}

static void
env_start (Env *env, ShoalUpdateMode mode, int contributors, int max_connections, gint64 idle_timeout_ms,
           int threads)
{
  env_start_opts (env, mode, contributors, max_connections, idle_timeout_ms, threads, FALSE, 0, 0, 0);
}

static void
env_stop (Env *env)
{
  shoal_rpc_server_stop (env->rpc);
  shoal_server_free (env->server);
  shoal_param_store_free (env->layout);
}

static ShoalRpcClient *
client_new (Env *env)
{
  ShoalRpcClientOptions o = { "127.0.0.1", env->port, TOKEN, 0, 10000, 1, NULL };
  GError *error = NULL;
  ShoalRpcClient *c = shoal_rpc_client_connect (&o, &error);
  g_assert_no_error (error);
  return c;
}

static int
raw_connect (int port)
{
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons ((guint16) port) };
  struct timeval tv = { 10, 0 };
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  g_assert_cmpint (fd, >=, 0);
  a.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  g_assert_cmpint (connect (fd, (struct sockaddr *) &a, sizeof a), ==, 0);
  setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}

static void put_u8 (GByteArray *b, guint8 v) { g_byte_array_append (b, &v, 1); }
static void put_i32 (GByteArray *b, gint32 v) { guint32 x = GUINT32_TO_BE ((guint32) v); g_byte_array_append (b, (guint8 *) &x, 4); }
static void put_str (GByteArray *b, const char *s) { put_i32 (b, (gint32) strlen (s)); g_byte_array_append (b, (const guint8 *) s, (guint) strlen (s)); }

/* `count` stats calls as the binary protocol writes them, back to back. */
static GByteArray *
stats_calls (int count)
{
  GByteArray *b = g_byte_array_new ();
  for (int i = 0; i < count; i++)
    {
      put_i32 (b, (gint32) 0x80010001);   /* strict version 1, T_CALL */
      put_str (b, "stats");
      put_i32 (b, i + 1);
      put_u8 (b, 11);                      /* T_STRING, field 1: the token */
      put_u8 (b, 0);
      put_u8 (b, 1);
      put_str (b, TOKEN);
      put_u8 (b, 0);                       /* T_STOP */
    }
  return b;
}

static void
send_all (int fd, const GByteArray *b)
{
  g_assert_cmpint (send (fd, b->data, b->len, MSG_NOSIGNAL), ==, (gssize) b->len);
}

/* Reads until `count` stats replies arrived (each begins with the reply
 * header and the name); fails if the server closes or 10 s pass. */
static void
expect_stats_replies (int fd, int count)
{
  static const guint8 head[] = { 0x80, 0x01, 0x00, 0x02, 0, 0, 0, 5, 's', 't', 'a', 't', 's' };
  GByteArray *got = g_byte_array_new ();
  int seen = 0;
  while (seen < count)
    {
      guint8 buf[4096];
      ssize_t r = recv (fd, buf, sizeof buf, 0);
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0)
        g_error ("stats replies: %d of %d, then %s", seen, count, r == 0 ? "the server closed" : g_strerror (errno));
      g_byte_array_append (got, buf, (guint) r);
      seen = 0;
      for (guint i = 0; i + sizeof head <= got->len; i++)
        seen += memcmp (got->data + i, head, sizeof head) == 0;
    }
  g_assert_cmpint (seen, ==, count);
  g_byte_array_unref (got);
}

/* Waits (at most 10 s) until the listener holds `want` connections. */
static void
wait_open (Env *env, guint want)
{
  guint open = 0;
  for (int i = 0; i < 1000 && (open = shoal_rpc_server_reap (env->rpc)) != want; i++)
    g_usleep (10 * 1000);
  g_assert_cmpuint (open, ==, want);
}

/* ---- the listener ------------------------------------------------------- */

enum { IDLE = 300, KEEP = 4 };

/* 300 idle connections: no thread each; a call on each of them, one at a
 * time, is served by the pool's KEEP threads; two calls sent at once on
 * one connection (the second read ahead with the first) are both
 * answered; stop closes them all. */
static void
test_idle_connections (void)
{
  Env env;
  env_start (&env, SHOAL_UPDATE_ASYNC, 1, IDLE + 20, 0, KEEP);
  ShoalRpcClient *c = client_new (&env);
  ShoalServerStats st;
  GError *error = NULL;
  g_assert_true (shoal_rpc_client_stats (c, &st, &error));
  g_assert_no_error (error);
  /* the poller and the call's thread are running now */
  int before = process_threads ();

  int *fds = g_new (int, IDLE);
  for (int i = 0; i < IDLE; i++)
    fds[i] = raw_connect (env.port);
  wait_open (&env, IDLE + 1);
  int idle = process_threads ();
  g_test_message ("threads: %d with one connection, %d with %d more idle ones", before, idle, IDLE);
  g_assert_cmpint (idle, <=, before);

  GByteArray *one = stats_calls (1);
  int most = 0;
  for (int i = 0; i < IDLE; i++)
    {
      send_all (fds[i], one);
      expect_stats_replies (fds[i], 1);
      most = MAX (most, process_threads ());
    }
  g_test_message ("threads: at most %d while a call was made on each", most);
  /* the pool's KEEP threads (one already counted), plus one of slack for
   * the thread of a call that ends while the next begins */
  g_assert_cmpint (most, <=, before + KEEP);

  /* two calls in one send: the second waits in the socket's read-ahead,
   * where the poller cannot see it */
  GByteArray *two = stats_calls (2);
  send_all (fds[0], two);
  expect_stats_replies (fds[0], 2);
  g_byte_array_unref (two);
  g_byte_array_unref (one);

  /* the client's connection too was idle all along */
  g_assert_true (shoal_rpc_client_stats (c, &st, &error));
  g_assert_no_error (error);
  g_assert_cmpint (st.pulls, ==, 0);
  shoal_rpc_client_free (c);
  env_stop (&env);   /* with 300 connections open */
  for (int i = 0; i < IDLE; i++)
    {
      char byte;
      g_assert_cmpint (recv (fds[i], &byte, 1, 0), ==, 0);   /* closed by the stop */
      close (fds[i]);
    }
  g_free (fds);
}

/* Token holders first (issue 23): connections that never send the job
 * token fill every place (CAP of them, with no deadline), yet a client
 * with the token connects and is served - the oldest unproven connection
 * makes room - and the server never holds more than CAP; with a deadline,
 * unproven connections are closed while a proven one stays. */
enum { CAP = 64 };

static void
test_unproven_connections (void)
{
  Env env;
  env_start_opts (&env, SHOAL_UPDATE_ASYNC, 1, CAP, 0, KEEP, FALSE, 0, CAP / 2, 0);
  int *fds = g_new (int, CAP);
  /* said once a minute */
  g_test_expect_message (NULL, G_LOG_LEVEL_WARNING, "*made no call with the job token fill their share (32)*");
  for (int i = 0; i < CAP; i++)
    fds[i] = raw_connect (env.port);
  /* each beyond CAP / 2 closed the oldest: CAP / 2 stay */
  wait_open (&env, CAP / 2);
  g_test_assert_expected_messages ();
  for (int round = 0; round < 3; round++)
    {
      ShoalRpcClient *c = client_new (&env);
      ShoalServerStats st;
      GError *error = NULL;
      g_assert_true (shoal_rpc_client_stats (c, &st, &error));
      g_assert_no_error (error);
      shoal_rpc_client_free (c);
    }
  g_assert_cmpuint (shoal_rpc_server_reap (env.rpc), <=, CAP);
  for (int i = 0; i < CAP; i++)
    close (fds[i]);
  env_stop (&env);

  /* a deadline: the unproven ones go, the proven one stays */
  env_start_opts (&env, SHOAL_UPDATE_ASYNC, 1, CAP, 0, KEEP, FALSE, 0, CAP / 2, 200);
  ShoalRpcClient *c = client_new (&env);
  ShoalServerStats st;
  GError *error = NULL;
  g_assert_true (shoal_rpc_client_stats (c, &st, &error));
  g_assert_no_error (error);
  for (int i = 0; i < 8; i++)
    fds[i] = raw_connect (env.port);
  for (int i = 0; i < 8; i++)
    {
      char byte;
      g_assert_cmpint (recv (fds[i], &byte, 1, 0), ==, 0);   /* closed by the server (bounded: SO_RCVTIMEO 10 s) */
      close (fds[i]);
    }
  wait_open (&env, 1);
  g_assert_true (shoal_rpc_client_stats (c, &st, &error));
  g_assert_no_error (error);
  shoal_rpc_client_free (c);
  env_stop (&env);
  g_free (fds);
}

/* threads_end_when_idle (a fuzz harness's listener): a call still gets a
 * thread at once, and once its connection closed, reap counts down to
 * nothing left - no call thread outlives its call. */
static void
test_threads_end_when_idle (void)
{
  Env env;
  env_start_opts (&env, SHOAL_UPDATE_ASYNC, 1, 16, 0, KEEP, TRUE, 0, 0, 0);
  int before = process_threads ();   /* the poller */
  for (int round = 0; round < 3; round++)
    {
      int fd = raw_connect (env.port);
      GByteArray *one = stats_calls (1);
      send_all (fd, one);
      expect_stats_replies (fd, 1);
      g_byte_array_unref (one);
      close (fd);
      wait_open (&env, 0);
      g_assert_cmpint (process_threads (), ==, before);
    }
  env_stop (&env);
}

/* After a reply its thread waits for the connection's next call (here
 * for a minute), but not while a call on another connection waits for a
 * thread: one kept thread serves calls going round 16 connections, and
 * stop ends the waits.  Were the waiting threads to keep their
 * connections, every call on the next one would wait for the pool to
 * grow (5 ms) and each connection would end up with a thread of its own. */
static void
test_waiting_threads_yield (void)
{
  enum { CONNS = 16, ROUNDS = 3 };
  Env env;
  env_start_opts (&env, SHOAL_UPDATE_ASYNC, 1, CONNS + 4, 0, 1, FALSE, 60 * 1000, 0, 0);
  int before = process_threads ();   /* the poller */
  int fds[CONNS], most = before;
  for (int i = 0; i < CONNS; i++)
    fds[i] = raw_connect (env.port);
  wait_open (&env, CONNS);
  GByteArray *one = stats_calls (1);
  for (int round = 0; round < ROUNDS; round++)
    for (int i = 0; i < CONNS; i++)
      {
        send_all (fds[i], one);
        expect_stats_replies (fds[i], 1);
        most = MAX (most, process_threads ());
      }
  g_byte_array_unref (one);
  g_test_message ("call threads: at most %d for %d calls round %d connections", most - before, CONNS * ROUNDS,
                  CONNS);
  /* one, plus slack for a thread that took longer than the pool's 5 ms
   * to come free on a loaded machine */
  g_assert_cmpint (most - before, <=, CONNS / 4);
  env_stop (&env);
  for (int i = 0; i < CONNS; i++)
    close (fds[i]);
}

/* Idle connections are closed after the idle timeout, by the poller. */
static void
test_idle_timeout (void)
{
  Env env;
  env_start (&env, SHOAL_UPDATE_ASYNC, 1, 200, 300, 2);
  enum { N = 100 };
  int fds[N];
  for (int i = 0; i < N; i++)
    fds[i] = raw_connect (env.port);
  /* one used, then idle: its timer starts at the reply */
  GByteArray *one = stats_calls (1);
  send_all (fds[0], one);
  expect_stats_replies (fds[0], 1);
  g_byte_array_unref (one);
  for (int i = 0; i < N; i++)
    {
      char byte;
      ssize_t r = recv (fds[i], &byte, 1, 0);   /* SO_RCVTIMEO: 10 s */
      g_assert_true (r == 0 || (r < 0 && errno == ECONNRESET));
      close (fds[i]);
    }
  wait_open (&env, 0);
  env_stop (&env);
}

typedef struct {
  Env *env;
  int index;
  gboolean ok;
  gint64 version;
  char *error;
} Caller;

static gpointer
sync_push_pull (gpointer data)
{
  Caller *w = data;
  ShoalRpcClient *c = client_new (w->env);
  float grad[64], values[64];
  GError *error = NULL;
  for (int i = 0; i < 64; i++)
    grad[i] = (float) w->index;
  w->ok = shoal_rpc_client_push_pull (c, 0, grad, values, 64, 0, &w->version, &error);
  if (error != NULL)
    w->error = g_strdup (error->message);
  g_clear_error (&error);
  shoal_rpc_client_free (c);
  return NULL;
}

static gpointer
pull_never (gpointer data)
{
  Caller *w = data;
  ShoalRpcClient *c = client_new (w->env);
  float values[64];
  GError *error = NULL;
  /* version 100 never comes: this call waits until the server stops */
  w->ok = shoal_rpc_client_pull (c, 0, values, 64, 100, &w->version, &error);
  g_clear_error (&error);
  shoal_rpc_client_free (c);
  return NULL;
}

/* A synchronous step of 12 workers, each blocked in its push_pull until
 * the 12th gradient came, against a pool of 2 threads: a pool that could
 * not grow would hold 2 callers waiting for 10 that never get a thread.
 * Then stop with calls blocked: it ends them. */
static void
test_blocked_calls_outgrow_pool (void)
{
  enum { W = 12 };
  Env env;
  env_start (&env, SHOAL_UPDATE_SYNC, W, 64, 0, 2);
  Caller callers[W];
  GThread *threads[W];
  for (int i = 0; i < W; i++)
    {
      callers[i] = (Caller) { .env = &env, .index = i };
      threads[i] = g_thread_new ("caller", sync_push_pull, &callers[i]);
    }
  for (int i = 0; i < W; i++)
    {
      g_thread_join (threads[i]);
      if (!callers[i].ok)
        g_error ("worker %d: %s", i, callers[i].error);
      g_assert_cmpint (callers[i].version, ==, 1);
    }
  g_assert_cmpint (shoal_server_slice_version (env.server, 0), ==, 1);

  Caller waiting[3];
  GThread *waiters[3];
  for (int i = 0; i < 3; i++)
    {
      waiting[i] = (Caller) { .env = &env, .index = i };
      waiters[i] = g_thread_new ("waiter", pull_never, &waiting[i]);
    }
  ShoalServerStats st;
  for (int i = 0; i < 1000; i++)
    {
      shoal_server_stats (env.server, &st);
      if (st.pulls >= W + 3)
        break;
      g_usleep (10 * 1000);
    }
  g_assert_cmpint (st.pulls, >=, W + 3);   /* all three are waiting */
  shoal_rpc_server_stop (env.rpc);         /* returns: the waits see the stop */
  for (int i = 0; i < 3; i++)
    {
      g_thread_join (waiters[i]);
      g_assert_false (waiting[i].ok);
    }
  shoal_server_free (env.server);
  shoal_param_store_free (env.layout);
}

/* ---- the pool ----------------------------------------------------------- */

typedef struct {
  GMutex lock;
  GCond cond;
  int arrived;     /* items that entered work */
  int inside;      /* items in work now */
  int need;        /* work returns once this many arrived */
  int ran, dropped;
  int most_inside;
} Gate;

static void
gate_work (gpointer item, gpointer data)
{
  Gate *g = data;
  (void) item;
  g_mutex_lock (&g->lock);
  g->arrived++;
  g->inside++;
  g->most_inside = MAX (g->most_inside, g->inside);
  g_cond_broadcast (&g->cond);
  gint64 until = g_get_monotonic_time () + shoal_test_scaled_us (10 * G_USEC_PER_SEC);
  while (g->arrived < g->need)
    if (!g_cond_wait_until (&g->cond, &g->lock, until))
      g_error ("pool: %d of %d items met within %.0f s", g->arrived, g->need,
                 (double) shoal_test_scaled_us (10 * G_USEC_PER_SEC) / G_USEC_PER_SEC);
  g->ran++;
  g->inside--;
  g_mutex_unlock (&g->lock);
}

static void
gate_drop (gpointer item)
{
  Gate *g = item;
  g_mutex_lock (&g->lock);
  g->dropped++;
  g_mutex_unlock (&g->lock);
}

/* 8 items that each wait for all 8 with 1 thread kept: growing (as the
 * listener's poller calls it) gives each its own thread. */
static void
test_pool_grows_for_blocked_items (void)
{
  Gate g = { .need = 8 };
  g_mutex_init (&g.lock);
  g_cond_init (&g.cond);
  ShoalThreadPoolOptions o = { "test-pool", 1, 16, (gint64) 600 * G_USEC_PER_SEC, 1000 };
  ShoalThreadPool *pool = shoal_thread_pool_new (&o, gate_work, gate_drop, &g);
  for (int i = 0; i < 8; i++)
    g_assert_true (shoal_thread_pool_push (pool, &g, NULL));
  for (int i = 0; i < 10000; i++)
    {
      g_mutex_lock (&g.lock);
      gboolean done = g.ran == 8;
      g_mutex_unlock (&g.lock);
      if (done)
        break;
      gint64 next = shoal_thread_pool_grow (pool);
      if (next != G_MAXINT64)
        g_usleep ((gulong) CLAMP (next - g_get_monotonic_time (), 0, 1000));
      else
        g_usleep (1000);
    }
  g_assert_cmpint (g.ran, ==, 8);
  g_assert_cmpint (shoal_thread_pool_threads (pool), ==, 8);
  shoal_thread_pool_free (pool);
  g_assert_cmpint (g.dropped, ==, 0);
  g_mutex_clear (&g.lock);
  g_cond_clear (&g.cond);
}

/* Short items pushed faster than they run stay on the `keep` threads
 * while nobody asks the pool to grow; the maximum holds too. */
static void
test_pool_keeps_its_size (void)
{
  Gate g = { .need = 0 };
  g_mutex_init (&g.lock);
  g_cond_init (&g.cond);
  ShoalThreadPoolOptions o = { "test-pool", 2, 3, G_USEC_PER_SEC, (gint64) 3600 * G_USEC_PER_SEC };
  ShoalThreadPool *pool = shoal_thread_pool_new (&o, gate_work, gate_drop, &g);
  for (int i = 0; i < 500; i++)
    {
      g_assert_true (shoal_thread_pool_push (pool, &g, NULL));
      g_assert_cmpuint (shoal_thread_pool_threads (pool), <=, 2);
    }
  shoal_thread_pool_grow (pool);   /* nothing waited an hour */
  g_assert_cmpuint (shoal_thread_pool_threads (pool), <=, 2);
  shoal_thread_pool_free (pool);
  g_assert_cmpint (g.ran + g.dropped, ==, 500);
  g_mutex_clear (&g.lock);
  g_cond_clear (&g.cond);
}

/* Items still queued at free are dropped, the running one finishes:
 * each item once. */
static void
test_pool_free_drops_queued (void)
{
  Gate g = { .need = 1 };
  g_mutex_init (&g.lock);
  g_cond_init (&g.cond);
  ShoalThreadPoolOptions o = { "test-pool", 1, 1, G_USEC_PER_SEC, 1 };
  ShoalThreadPool *pool = shoal_thread_pool_new (&o, gate_work, gate_drop, &g);
  for (int i = 0; i < 20; i++)
    g_assert_true (shoal_thread_pool_push (pool, &g, NULL));
  shoal_thread_pool_grow (pool);
  g_assert_cmpuint (shoal_thread_pool_threads (pool), ==, 1);   /* max */
  shoal_thread_pool_free (pool);
  g_assert_cmpint (g.ran + g.dropped, ==, 20);
  g_assert_cmpint (g.most_inside, <=, 1);
  g_mutex_clear (&g.lock);
  g_cond_clear (&g.cond);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  /* GLib allocates the lock of its error domains at the first GError,
   * publishing it with an atomic TSan cannot see (libglib is not
   * instrumented): make that happen before any thread, not in three
   * clients failing at once */
  g_error_free (g_error_new_literal (SHOAL_ERROR, SHOAL_ERROR_RPC, "first error"));
  g_test_add_func ("/listener/idle-connections", test_idle_connections);
  g_test_add_func ("/listener/idle-timeout", test_idle_timeout);
  g_test_add_func ("/listener/unproven-connections", test_unproven_connections);
  g_test_add_func ("/listener/threads-end-when-idle", test_threads_end_when_idle);
  g_test_add_func ("/listener/waiting-threads-yield", test_waiting_threads_yield);
  g_test_add_func ("/listener/blocked-calls-outgrow-pool", test_blocked_calls_outgrow_pool);
  g_test_add_func ("/thread-pool/grows-for-blocked-items", test_pool_grows_for_blocked_items);
  g_test_add_func ("/thread-pool/keeps-its-size", test_pool_keeps_its_size);
  g_test_add_func ("/thread-pool/free-drops-queued", test_pool_free_drops_queued);
  return g_test_run ();
}
