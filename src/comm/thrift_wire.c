/* ShoalGroupWire over send_bridge calls (see comm/thrift_wire.h).
 *
 * The pool is a stack per peer under the peer's lock, held only to push
 * or pop: connecting and calling happen outside it, so a slow peer or a
 * large message holds up only the thread sending it. */
#include "comm/thrift_wire.h"

#include <string.h>

#include "core/error.h"

#define DEFAULT_CONNECT_RETRIES 300   /* 30 s at rpc_client's 100 ms between attempts */
/* A peer that answered before and now refuses has most likely died: its
 * group is lost, and a leader telling the others to stop should not wait
 * 30 s per dead peer for that. */
#define RECONNECT_RETRIES 5
/* a live process answers a probe call within milliseconds */
#define PROBE_TIMEOUT_MS 2000

typedef struct {
  GMutex lock;
  GPtrArray *idle;              /* ShoalRpcClient *, under lock */
  ShoalRpcClientOptions opts;   /* host and token point at the copies below */
  char *host;
  char *token;
  gboolean reached;             /* a send got through once; under lock */
} Peer;

typedef struct {
  ShoalGroupWire wire;          /* what callers get; wire.data points back here */
  int group;
  ShoalMailbox *mailbox;        /* borrowed */
  Peer *peers;                  /* nprocs; this_proc's unused */
} ThriftWire;

/* A failed send to a process that was reached before: whether the error
 * reads "cannot connect", "receive: Connection reset by peer" or "send:
 * Broken pipe" depends only on where the call was when the process died,
 * and a dying process may still accept a connection for a moment.  So a
 * probe call (stats: any answer, a refusal included, means alive) tells a
 * dead process ("is gone", as wire_alive says it) from a call that failed
 * on a live one.  `connecting`: the send failed to connect, which already
 * is the probe.  Takes `e`. */
static void
fail_send (ThriftWire *tw, int proc, gboolean connecting, GError *e, GError **error)
{
  Peer *peer = &tw->peers[proc];
  g_mutex_lock (&peer->lock);
  gboolean reached = peer->reached;
  ShoalRpcClientOptions opts = peer->opts;
  opts.connect_retries = MIN (opts.connect_retries, RECONNECT_RETRIES);
  opts.timeout_ms = PROBE_TIMEOUT_MS;
  g_mutex_unlock (&peer->lock);

  GError *probe = NULL;
  gboolean gone = FALSE;
  if (reached && connecting)
    gone = TRUE;
  else if (reached)
    {
      ShoalRpcClient *c = shoal_rpc_client_connect (&opts, &probe);
      if (c != NULL)
        {
          ShoalServerStats st;
          gone = !shoal_rpc_client_stats (c, &st, &probe) && shoal_rpc_client_peer_closed (c)
                 /* a stopped (SIGSTOP) or wedged process is not gone */
                 && strstr (probe->message, "timed out") == NULL;
          shoal_rpc_client_free (c);
        }
      else
        gone = TRUE;
    }
  if (gone && probe != NULL)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "group %d: process %d is gone: %s (a call to it "
                 "failed: %s)", tw->group, proc, probe->message, e->message);
  else if (gone)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "group %d: process %d is gone: %s", tw->group, proc,
                 e->message);
  else
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "group %d: process %d: %s", tw->group, proc,
                 e->message);
  g_clear_error (&probe);
  g_error_free (e);
}

static gboolean
wire_send (gpointer data, int proc, guint32 channel, GBytes *msg, GError **error)
{
  ThriftWire *tw = data;
  GError *e = NULL;

  if (proc < 0 || proc >= tw->wire.nprocs)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC,
                   "group %d: send on channel %u to process %d: the group has %d processes",
                   tw->group, channel, proc, tw->wire.nprocs);
      return FALSE;
    }
  if (proc == tw->wire.this_proc)
    {
      /* msg is borrowed: the mailbox gets a copy of its own */
      gsize len = 0;
      gconstpointer bytes = g_bytes_get_data (msg, &len);
      shoal_mailbox_put (tw->mailbox, tw->group, channel, g_bytes_new (bytes, len));
      return TRUE;
    }

  Peer *peer = &tw->peers[proc];
  g_mutex_lock (&peer->lock);
  ShoalRpcClient *c = peer->idle->len > 0 ? g_ptr_array_steal_index_fast (peer->idle, peer->idle->len - 1)
                                          : NULL;
  ShoalRpcClientOptions opts = peer->opts;
  if (peer->reached)
    opts.connect_retries = MIN (opts.connect_retries, RECONNECT_RETRIES);
  g_mutex_unlock (&peer->lock);
  gboolean connecting = c == NULL;
  if (c == NULL)
    c = shoal_rpc_client_connect (&opts, &e);

  gsize len = 0;
  const void *bytes = g_bytes_get_data (msg, &len);
  if (c == NULL || !shoal_rpc_client_send_bridge (c, tw->group, channel, bytes, len, &e))
    {
      /* a refused or broken call: the next send starts from a fresh connection */
      gboolean connect_failed = connecting && c == NULL;
      shoal_rpc_client_free (c);
      fail_send (tw, proc, connect_failed, e, error);
      return FALSE;
    }
  g_mutex_lock (&peer->lock);
  g_ptr_array_add (peer->idle, c);
  peer->reached = TRUE;
  g_mutex_unlock (&peer->lock);
  return TRUE;
}

static gboolean
wire_alive (gpointer data, int proc, GError **error)
{
  ThriftWire *tw = data;
  if (proc < 0 || proc >= tw->wire.nprocs || proc == tw->wire.this_proc)
    return TRUE;
  Peer *peer = &tw->peers[proc];
  GPtrArray *closed = g_ptr_array_new_with_free_func ((GDestroyNotify) shoal_rpc_client_free);
  gboolean open = FALSE;
  g_mutex_lock (&peer->lock);
  if (!peer->reached)
    {
      /* never reached: it may still be starting; the wait's timeout decides */
      g_mutex_unlock (&peer->lock);
      g_ptr_array_free (closed, TRUE);
      return TRUE;
    }
  for (guint i = peer->idle->len; i-- > 0;)
    if (shoal_rpc_client_peer_closed (g_ptr_array_index (peer->idle, i)))
      g_ptr_array_add (closed, g_ptr_array_steal_index_fast (peer->idle, i));
    else
      open = TRUE;
  ShoalRpcClientOptions opts = peer->opts;
  opts.connect_retries = MIN (opts.connect_retries, RECONNECT_RETRIES);
  g_mutex_unlock (&peer->lock);
  g_ptr_array_free (closed, TRUE);
  if (open)
    return TRUE;
  /* no connection to look at, or the peer closed them all: can it be reached? */
  GError *e = NULL;
  ShoalRpcClient *c = shoal_rpc_client_connect (&opts, &e);
  if (c == NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "group %d: process %d is gone: %s", tw->group,
                   proc, e->message);
      g_error_free (e);
      return FALSE;
    }
  g_mutex_lock (&peer->lock);
  g_ptr_array_add (peer->idle, c);
  g_mutex_unlock (&peer->lock);
  return TRUE;
}

static GBytes *
wire_recv (gpointer data, guint32 channel, gint64 timeout_ms, GError **error)
{
  ThriftWire *tw = data;
  return shoal_mailbox_take (tw->mailbox, tw->group, channel, timeout_ms, error);
}

ShoalGroupWire *
shoal_thrift_wire_new (int group, int nprocs, int this_proc, const ShoalRpcClientOptions *peers,
                       ShoalMailbox *mailbox)
{
  g_return_val_if_fail (nprocs >= 2 && this_proc >= 0 && this_proc < nprocs, NULL);
  g_return_val_if_fail (peers != NULL && mailbox != NULL, NULL);

  ThriftWire *tw = g_new0 (ThriftWire, 1);
  tw->wire = (ShoalGroupWire) { .nprocs = nprocs, .this_proc = this_proc, .send = wire_send,
                                .recv = wire_recv, .alive = wire_alive, .data = tw };
  tw->group = group;
  tw->mailbox = mailbox;
  tw->peers = g_new0 (Peer, nprocs);
  for (int j = 0; j < nprocs; j++)
    {
      Peer *peer = &tw->peers[j];
      g_mutex_init (&peer->lock);
      peer->idle = g_ptr_array_new ();
      if (j == this_proc)
        continue;
      peer->opts = peers[j];
      peer->host = g_strdup (peers[j].host);
      peer->token = g_strdup (peers[j].token);
      peer->opts.host = peer->host;
      peer->opts.token = peer->token;
      if (peer->opts.connect_retries <= 0)
        peer->opts.connect_retries = DEFAULT_CONNECT_RETRIES;
    }
  return &tw->wire;
}

void
shoal_thrift_wire_free (ShoalGroupWire *wire)
{
  if (wire == NULL)
    return;
  ThriftWire *tw = wire->data;
  for (int j = 0; j < wire->nprocs; j++)
    {
      Peer *peer = &tw->peers[j];
      for (guint i = 0; i < peer->idle->len; i++)
        shoal_rpc_client_free (g_ptr_array_index (peer->idle, i));
      g_ptr_array_free (peer->idle, TRUE);
      g_mutex_clear (&peer->lock);
      g_free (peer->host);
      g_free (peer->token);
    }
  g_free (tw->peers);
  g_free (tw);
}
