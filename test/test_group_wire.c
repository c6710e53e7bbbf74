/* marks: threads (they start threads: TSan runs this file in `make SANITIZE=thread test-threads`) */
/* Bridge messages over Thrift: send_bridge into a process's mailbox, the
 * refusals around it (wrong token, no mailbox), an rpc server without
 * slices, and the Thrift group wire between two rpc servers on loopback
 * (both ways, four threads at once, 20 MiB messages, a peer that starts
 * late, one that never does).  Every wait is bounded: takes time out
 * after at most 10 s, connects give up after a few attempts. */
#include <stdlib.h>
#include <string.h>

#include "comm/thrift_wire.h"
#include "comm/mailbox.h"
#include "server/rpc_client.h"
#include "core/error.h"
#include "server/rpc_server.h"
#include "server/server.h"
#include "support/time_scale.h"

#define TOKEN "wire-secret-7"
#define TAKE_MS 10000
#define NTHREADS 4
#define PER_THREAD 25
#define BIG_BYTES (20u << 20)

/* Warnings the server logs on purpose (wrong tokens) are counted, not
 * fatal; any other warning or critical still aborts the test. */
static gint expected_warnings;

static void
log_handler (const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer data)
{
  if ((level & G_LOG_LEVEL_WARNING) && message != NULL && g_str_has_prefix (message, "rpc: "))
    {
      g_atomic_int_inc (&expected_warnings);
      return;
    }
  g_log_default_handler (domain, level, message, data);
  if (level & (G_LOG_LEVEL_WARNING | G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_ERROR))
    abort ();
}

static void
assert_error_has (GError *error, const char *part)
{
  g_assert_nonnull (error);
  g_assert_true (g_error_matches (error, SHOAL_ERROR, SHOAL_ERROR_RPC)
                 || g_error_matches (error, SHOAL_ERROR, SHOAL_ERROR_TIMEOUT));
  if (strstr (error->message, part) == NULL)
    g_error ("error \"%s\" does not say \"%s\"", error->message, part);
}

/* An rpc server on 127.0.0.1 (port 0: any) over `server` (may be NULL)
 * putting bridge messages into `mailbox` (may be NULL). */
static ShoalRpcServer *
rpc_start (ShoalServer *server, ShoalMailbox *mailbox, int port, int expected_shutdowns)
{
  ShoalRpcServerOptions o = { .bind_address = "127.0.0.1", .port = port, .token = TOKEN,
                              .io_timeout_ms = 10000, .expected_shutdowns = expected_shutdowns,
                              .bridge_sink = mailbox != NULL ? shoal_mailbox_sink : NULL,
                              .bridge_data = mailbox };
  GError *error = NULL;
  ShoalRpcServer *rpc = shoal_rpc_server_start (server, &o, &error);
  g_assert_no_error (error);
  g_assert_nonnull (rpc);
  return rpc;
}

static ShoalRpcClient *
client_new (int port, const char *token)
{
  ShoalRpcClientOptions o = { .host = "127.0.0.1", .port = port, .token = token,
                              .timeout_ms = 10000 };
  GError *error = NULL;
  ShoalRpcClient *c = shoal_rpc_client_connect (&o, &error);
  g_assert_no_error (error);
  g_assert_nonnull (c);
  return c;
}

static void
send_str (ShoalRpcClient *c, int group, guint32 channel, const char *text)
{
  GError *error = NULL;
  g_assert_true (shoal_rpc_client_send_bridge (c, group, channel, text, strlen (text), &error));
  g_assert_no_error (error);
}

/* The next message under (group, channel) must be `text`. */
static void
assert_take (ShoalMailbox *mb, int group, guint32 channel, const char *text)
{
  GError *error = NULL;
  GBytes *msg = shoal_mailbox_take (mb, group, channel, TAKE_MS, &error);
  g_assert_no_error (error);
  g_assert_nonnull (msg);
  gsize len;
  const char *got = g_bytes_get_data (msg, &len);
  g_assert_cmpmem (got, len, text, strlen (text));
  g_bytes_unref (msg);
}

/* A small ShoalServer of one param hosting every slice. */
typedef struct {
  ShoalParamStore *layout;
  ShoalServer *server;
} Slices;

static void
slices_new (Slices *s, int nslices, int floats)
{
  ShoalInitSpec init = { 0 };
  ShoalUpdaterConf upd;
  ShoalServerOptions so = { .mode = SHOAL_UPDATE_ASYNC, .sync_contributors = 1, .nslices = nslices };
  ShoalShape shape = shoal_shape_make (1, floats);

  s->layout = shoal_param_store_new ();
  shoal_param_store_declare (s->layout, "w", &shape, &init, 1, 1, 1.0f, 1.0f);
  g_assert_true (shoal_param_store_allocate (s->layout, NULL));
  shoal_updater_conf_defaults (&upd, SHOAL_UPDATER_SGD);
  s->server = shoal_server_new (s->layout, &upd, &so, NULL);
  for (int i = 0; i < nslices; i++)
    shoal_server_host_slice (s->server, i);
}

static void
slices_free (Slices *s)
{
  shoal_server_free (s->server);
  shoal_param_store_free (s->layout);
}

/* ---- send_bridge ---------------------------------------------------------- */

static void
test_send_bridge_mailbox (void)
{
  ShoalMailbox *mb = shoal_mailbox_new ();
  ShoalRpcServer *rpc = rpc_start (NULL, mb, 0, 0);
  ShoalRpcClient *c = client_new (shoal_rpc_server_port (rpc), TOKEN);
  GError *error = NULL;

  /* interleaved over three queues, and the largest channel number */
  send_str (c, 0, 1, "a0");
  send_str (c, 0, 2, "b0");
  send_str (c, 0, 1, "a1");
  send_str (c, 1, 1, "c0");
  send_str (c, 0, 1, "a2");
  send_str (c, 3, G_MAXUINT32, "top");
  g_assert_true (shoal_rpc_client_send_bridge (c, 0, 2, NULL, 0, &error));
  g_assert_no_error (error);
  /* send_bridge returned: each message is in the mailbox already */
  g_assert_cmpuint (shoal_mailbox_pending (mb), ==, 7);

  assert_take (mb, 1, 1, "c0");
  assert_take (mb, 0, 1, "a0");
  assert_take (mb, 0, 1, "a1");
  assert_take (mb, 0, 2, "b0");
  assert_take (mb, 0, 2, "");
  assert_take (mb, 0, 1, "a2");
  assert_take (mb, 3, G_MAXUINT32, "top");
  g_assert_cmpuint (shoal_mailbox_pending (mb), ==, 0);
  g_assert_null (shoal_mailbox_take (mb, 0, 1, 50, &error));
  assert_error_has (error, "group 0 channel 1: no message");
  g_clear_error (&error);

  shoal_rpc_client_free (c);
  shoal_rpc_server_stop (rpc);
  shoal_mailbox_free (mb);
}

static void
test_send_bridge_refusals (void)
{
  ShoalMailbox *mb = shoal_mailbox_new ();
  ShoalRpcServer *rpc = rpc_start (NULL, mb, 0, 0);
  GError *error = NULL;

  /* a wrong token: refused, logged, nothing queued */
  int before = g_atomic_int_get (&expected_warnings);
  ShoalRpcClient *bad = client_new (shoal_rpc_server_port (rpc), "guess");
  g_assert_false (shoal_rpc_client_send_bridge (bad, 0, 1, "x", 1, &error));
  assert_error_has (error, "send_bridge refused: wrong job token");
  g_assert_null (strstr (error->message, TOKEN));
  g_clear_error (&error);
  g_assert_cmpint (g_atomic_int_get (&expected_warnings), ==, before + 1);
  g_assert_cmpuint (shoal_mailbox_pending (mb), ==, 0);
  shoal_rpc_client_free (bad);
  shoal_rpc_server_stop (rpc);
  shoal_mailbox_free (mb);

  /* a server that takes no bridge messages, and still serves its slices */
  Slices s;
  slices_new (&s, 2, 64);
  rpc = rpc_start (s.server, NULL, 0, 0);
  ShoalRpcClient *c = client_new (shoal_rpc_server_port (rpc), TOKEN);
  g_assert_false (shoal_rpc_client_send_bridge (c, 2, 5, "x", 1, &error));
  assert_error_has (error, "send_bridge group 2 channel 5: this process takes no bridge messages");
  g_clear_error (&error);
  float values[32];
  gint64 version = -1;
  g_assert_true (shoal_rpc_client_pull (c, 1, values, 32, 0, &version, &error));
  g_assert_no_error (error);
  g_assert_cmpint (version, ==, 0);
  shoal_rpc_client_free (c);
  shoal_rpc_server_stop (rpc);
  slices_free (&s);
}

/* Beside slices of 256 bytes, a mailbox still takes messages far larger
 * than a slice. */
static void
test_send_bridge_beside_slices (void)
{
  Slices s;
  slices_new (&s, 2, 128);
  ShoalMailbox *mb = shoal_mailbox_new ();
  ShoalRpcServer *rpc = rpc_start (s.server, mb, 0, 0);
  ShoalRpcClient *c = client_new (shoal_rpc_server_port (rpc), TOKEN);
  size_t len = 4u << 20;
  guint8 *big = g_malloc (len);
  GError *error = NULL;

  for (size_t i = 0; i < len; i++)
    big[i] = (guint8) (i * 31 + 7);
  g_assert_true (shoal_rpc_client_send_bridge (c, 0, 0, big, len, &error));
  g_assert_no_error (error);
  GBytes *msg = shoal_mailbox_take (mb, 0, 0, TAKE_MS, &error);
  g_assert_no_error (error);
  gsize got_len;
  const void *got = g_bytes_get_data (msg, &got_len);
  g_assert_cmpmem (got, got_len, big, len);
  g_bytes_unref (msg);
  float values[64];
  g_assert_true (shoal_rpc_client_pull (c, 0, values, 64, 0, NULL, &error));
  g_assert_no_error (error);

  g_free (big);
  shoal_rpc_client_free (c);
  shoal_rpc_server_stop (rpc);
  shoal_mailbox_free (mb);
  slices_free (&s);
}

/* No ShoalServer: every param call is refused with a message saying so,
 * on the same connection, which then still carries bridge messages and
 * the shutdown the server waits for. */
static void
test_no_server (void)
{
  ShoalMailbox *mb = shoal_mailbox_new ();
  ShoalRpcServer *rpc = rpc_start (NULL, mb, 0, 1);
  ShoalRpcClient *c = client_new (shoal_rpc_server_port (rpc), TOKEN);
  float buf[16] = { 0 };
  ShoalServerStats st;
  GError *error = NULL;

  g_assert_false (shoal_rpc_client_push (c, 0, buf, 16, 0, &error));
  assert_error_has (error, "push: slice 0: this process serves no slices");
  g_clear_error (&error);
  g_assert_false (shoal_rpc_client_pull (c, 3, buf, 16, 0, NULL, &error));
  assert_error_has (error, "pull: slice 3: this process serves no slices");
  g_clear_error (&error);
  g_assert_false (shoal_rpc_client_push_pull (c, 0, buf, buf, 16, 0, NULL, &error));
  assert_error_has (error, "push_pull: slice 0: this process serves no slices");
  g_clear_error (&error);
  g_assert_false (shoal_rpc_client_put (c, 1, buf, 16, 0, &error));
  assert_error_has (error, "put: slice 1: this process serves no slices");
  g_clear_error (&error);
  g_assert_false (shoal_rpc_client_apply_delta (c, 0, buf, buf, 16, &error));
  assert_error_has (error, "apply_delta: slice 0: this process serves no slices");
  g_clear_error (&error);
  g_assert_false (shoal_rpc_client_stats (c, &st, &error));
  assert_error_has (error, "stats: this process serves no slices");
  g_clear_error (&error);
  g_assert_false (shoal_rpc_client_checkpoint (c, 4, &error));
  assert_error_has (error, "checkpoint: this process serves no slices");
  g_clear_error (&error);

  send_str (c, 0, 9, "still here");
  assert_take (mb, 0, 9, "still here");
  g_assert_true (shoal_rpc_client_shutdown (c, 1, &error));
  g_assert_no_error (error);
  shoal_rpc_server_wait (rpc);   /* returns: the one shutdown expected came */

  shoal_rpc_client_free (c);
  shoal_rpc_server_stop (rpc);
  shoal_mailbox_free (mb);
}

/* ---- the Thrift group wire ------------------------------------------------ */

/* Two processes of group 5 in one test: each an rpc server without slices
 * around its own mailbox, and a wire reaching the other. */
typedef struct {
  ShoalMailbox *mailbox[2];
  ShoalRpcServer *rpc[2];
  ShoalGroupWire *wire[2];
} Pair;

#define GROUP 5

static void
pair_wires (Pair *p, int retries)
{
  for (int j = 0; j < 2; j++)
    {
      ShoalRpcClientOptions peers[2];
      for (int k = 0; k < 2; k++)
        peers[k] = (ShoalRpcClientOptions) {
          .host = k == j ? NULL : "127.0.0.1", .port = p->rpc[k] ? shoal_rpc_server_port (p->rpc[k]) : 0,
          .token = TOKEN, .timeout_ms = 10000, .connect_retries = retries };
      p->wire[j] = shoal_thrift_wire_new (GROUP, 2, j, peers, p->mailbox[j]);
      g_assert_nonnull (p->wire[j]);
      g_assert_cmpint (p->wire[j]->nprocs, ==, 2);
      g_assert_cmpint (p->wire[j]->this_proc, ==, j);
    }
}

static void
pair_start (Pair *p)
{
  memset (p, 0, sizeof *p);
  for (int j = 0; j < 2; j++)
    {
      p->mailbox[j] = shoal_mailbox_new ();
      p->rpc[j] = rpc_start (NULL, p->mailbox[j], 0, 0);
    }
  pair_wires (p, 5);
}

static void
pair_stop (Pair *p)
{
  for (int j = 0; j < 2; j++)
    {
      shoal_thrift_wire_free (p->wire[j]);
      shoal_rpc_server_stop (p->rpc[j]);
      g_assert_cmpuint (shoal_mailbox_pending (p->mailbox[j]), ==, 0);
      shoal_mailbox_free (p->mailbox[j]);
    }
}

/* Message `seq` of thread `t` of process `from`: a header naming all
 * three, then a pattern of a length that varies with seq. */
static GBytes *
make_msg (int from, int t, int seq, size_t len)
{
  len = MAX (len, 3 * sizeof (gint32));
  guint8 *b = g_malloc (len);
  gint32 head[3] = { from, t, seq };
  memcpy (b, head, sizeof head);
  for (size_t i = sizeof head; i < len; i++)
    b[i] = (guint8) (i * 13 + (size_t) seq * 7 + (size_t) t);
  return g_bytes_new_take (b, len);
}

static void
assert_msg (GBytes *msg, int from, int t, int seq, size_t len)
{
  GBytes *want = make_msg (from, t, seq, len);
  gsize got_len, want_len;
  const void *got = g_bytes_get_data (msg, &got_len);
  const void *w = g_bytes_get_data (want, &want_len);
  g_assert_cmpmem (got, got_len, w, want_len);
  g_bytes_unref (want);
}

static size_t
msg_len (int t, int seq)
{
  /* thread 0 sends one 20 MiB message among small ones */
  return t == 0 && seq == PER_THREAD / 2 ? BIG_BYTES : (size_t) (seq * 997 % 70000);
}

typedef struct {
  Pair *pair;
  int from, t;
} Sender;

static gpointer
sender_main (gpointer data)
{
  Sender *s = data;
  ShoalGroupWire *w = s->pair->wire[s->from];
  for (int seq = 0; seq < PER_THREAD; seq++)
    {
      GError *error = NULL;
      GBytes *msg = make_msg (s->from, s->t, seq, msg_len (s->t, seq));
      /* thread t sends on channel 100 + t to the other process */
      if (!w->send (w->data, 1 - s->from, 100 + (guint32) s->t, msg, &error))
        g_error ("process %d thread %d message %d: %s", s->from, s->t, seq, error->message);
      g_bytes_unref (msg);
    }
  return NULL;
}

static void
test_wire_both_ways (void)
{
  Pair p;
  Sender senders[2][NTHREADS];
  GThread *threads[2][NTHREADS];
  GError *error = NULL;

  pair_start (&p);
  /* both processes send from four threads at once */
  for (int j = 0; j < 2; j++)
    for (int t = 0; t < NTHREADS; t++)
      {
        senders[j][t] = (Sender) { &p, j, t };
        threads[j][t] = g_thread_new ("sender", sender_main, &senders[j][t]);
      }
  /* each channel's messages come in the order their thread sent them */
  for (int j = 0; j < 2; j++)
    for (int t = 0; t < NTHREADS; t++)
      for (int seq = 0; seq < PER_THREAD; seq++)
        {
          ShoalGroupWire *w = p.wire[1 - j];
          GBytes *msg = w->recv (w->data, 100 + (guint32) t, TAKE_MS, &error);
          g_assert_no_error (error);
          assert_msg (msg, j, t, seq, msg_len (t, seq));
          g_bytes_unref (msg);
        }
  for (int j = 0; j < 2; j++)
    for (int t = 0; t < NTHREADS; t++)
      g_thread_join (threads[j][t]);

  /* to itself: straight into its own mailbox */
  GBytes *self = make_msg (0, 9, 1, 100);
  g_assert_true (p.wire[0]->send (p.wire[0]->data, 0, 7, self, &error));
  g_assert_no_error (error);
  g_bytes_unref (self);
  g_assert_cmpuint (shoal_mailbox_pending (p.mailbox[0]), ==, 1);
  GBytes *msg = p.wire[0]->recv (p.wire[0]->data, 7, TAKE_MS, &error);
  g_assert_no_error (error);
  assert_msg (msg, 0, 9, 1, 100);
  g_bytes_unref (msg);

  /* only group 5's queues were used */
  g_assert_null (shoal_mailbox_take (p.mailbox[1], 0, 100, 10, &error));
  g_clear_error (&error);

  /* nothing sent: recv gives up with an error naming the channel */
  gint64 t0 = g_get_monotonic_time ();
  g_assert_null (p.wire[1]->recv (p.wire[1]->data, 42, 200, &error));
  assert_error_has (error, "group 5 channel 42: no message");
  g_assert_cmpint (g_get_monotonic_time () - t0, >=, 190 * 1000);
  g_clear_error (&error);

  /* no such process */
  msg = make_msg (0, 0, 0, 10);
  g_assert_false (p.wire[0]->send (p.wire[0]->data, 2, 1, msg, &error));
  assert_error_has (error, "group 5: send on channel 1 to process 2: the group has 2 processes");
  g_clear_error (&error);
  g_bytes_unref (msg);
  /* every connection still idle in the pools is freed here */
  pair_stop (&p);
}

/* A peer that is not up yet when the first message goes: the wire keeps
 * trying to connect (the default, 300 attempts) until it is. */
static void
test_wire_late_peer (void)
{
  Pair p;
  GError *error = NULL;

  memset (&p, 0, sizeof p);
  for (int j = 0; j < 2; j++)
    p.mailbox[j] = shoal_mailbox_new ();
  p.rpc[0] = rpc_start (NULL, p.mailbox[0], 0, 0);
  /* a port that was free a moment ago, for process 1 to start on later */
  ShoalRpcServer *probe = rpc_start (NULL, NULL, 0, 0);
  int port1 = shoal_rpc_server_port (probe);
  shoal_rpc_server_stop (probe);
  ShoalRpcClientOptions peers[2] = {
    { .host = NULL },
    { .host = "127.0.0.1", .port = port1, .token = TOKEN, .timeout_ms = 10000 },
  };
  p.wire[0] = shoal_thrift_wire_new (GROUP, 2, 0, peers, p.mailbox[0]);

  Sender s = { &p, 0, 1 };
  GThread *th = g_thread_new ("sender", sender_main, &s);
  g_usleep (400 * 1000);
  p.rpc[1] = rpc_start (NULL, p.mailbox[1], port1, 0);
  for (int seq = 0; seq < PER_THREAD; seq++)
    {
      GBytes *msg = shoal_mailbox_take (p.mailbox[1], GROUP, 101, TAKE_MS, &error);
      g_assert_no_error (error);
      assert_msg (msg, 0, 1, seq, msg_len (1, seq));
      g_bytes_unref (msg);
    }
  g_thread_join (th);

  shoal_thrift_wire_free (p.wire[0]);
  for (int j = 0; j < 2; j++)
    {
      shoal_rpc_server_stop (p.rpc[j]);
      shoal_mailbox_free (p.mailbox[j]);
    }
}

/* A peer that is gone: the send fails, naming the group, the process and
 * the address, after the few attempts allowed; once the peer is back at
 * that address the same wire delivers again. */
static void
test_wire_peer_down (void)
{
  Pair p;
  GError *error = NULL;

  pair_start (&p);   /* 5 connect attempts, 0.5 s */
  int port1 = shoal_rpc_server_port (p.rpc[1]);
  GBytes *msg = make_msg (0, 0, 0, 64);
  g_assert_true (p.wire[0]->send (p.wire[0]->data, 1, 3, msg, &error));
  g_assert_no_error (error);
  GBytes *got = shoal_mailbox_take (p.mailbox[1], GROUP, 3, TAKE_MS, &error);
  g_assert_no_error (error);
  assert_msg (got, 0, 0, 0, 64);
  g_bytes_unref (got);
  g_assert_true (p.wire[0]->alive (p.wire[0]->data, 1, &error));
  g_assert_no_error (error);

  shoal_rpc_server_stop (p.rpc[1]);
  p.rpc[1] = NULL;
  /* a waiting peer sees it gone: its pooled connection closed, no new one opens */
  g_assert_false (p.wire[0]->alive (p.wire[0]->data, 1, &error));
  assert_error_has (error, "group 5: process 1 is gone");
  g_clear_error (&error);
  /* a process reached before that cannot be reached now is gone */
  char *where = g_strdup_printf ("group 5: process 1 is gone: 127.0.0.1:%d: cannot connect", port1);
  /* the pooled connection was closed by the peer, and no new one opens */
  g_assert_false (p.wire[0]->send (p.wire[0]->data, 1, 3, msg, &error));
  assert_error_has (error, where);
  g_clear_error (&error);
  /* with no pooled connection: a new one, given up after 5 attempts */
  gint64 t0 = g_get_monotonic_time ();
  g_assert_false (p.wire[0]->send (p.wire[0]->data, 1, 3, msg, &error));
  assert_error_has (error, where);
  assert_error_has (error, "(5 attempts in");
  g_assert_cmpint (g_get_monotonic_time () - t0, <, shoal_test_scaled_us (5 * G_USEC_PER_SEC));
  g_clear_error (&error);
  g_free (where);
  g_assert_cmpuint (shoal_mailbox_pending (p.mailbox[1]), ==, 0);

  p.rpc[1] = rpc_start (NULL, p.mailbox[1], port1, 0);
  g_assert_true (p.wire[0]->alive (p.wire[0]->data, 1, &error));
  g_assert_no_error (error);
  g_assert_true (p.wire[0]->send (p.wire[0]->data, 1, 3, msg, &error));
  g_assert_no_error (error);
  got = shoal_mailbox_take (p.mailbox[1], GROUP, 3, TAKE_MS, &error);
  g_assert_no_error (error);
  assert_msg (got, 0, 0, 0, 64);
  g_bytes_unref (got);
  g_bytes_unref (msg);
  pair_stop (&p);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  /* warnings go through log_handler, which counts the expected ones */
  g_log_set_always_fatal (G_LOG_FATAL_MASK | G_LOG_LEVEL_CRITICAL);
  g_log_set_default_handler (log_handler, NULL);
  g_test_add_func ("/bridge/send-into-mailbox", test_send_bridge_mailbox);
  g_test_add_func ("/bridge/refusals", test_send_bridge_refusals);
  g_test_add_func ("/bridge/beside-slices", test_send_bridge_beside_slices);
  g_test_add_func ("/bridge/no-server", test_no_server);
  g_test_add_func ("/group-wire/both-ways", test_wire_both_ways);
  g_test_add_func ("/group-wire/late-peer", test_wire_late_peer);
  g_test_add_func ("/group-wire/peer-down", test_wire_peer_down);
  return g_test_run ();
}
