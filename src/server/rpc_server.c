/* The parameter service of thrift/param.thrift over a ShoalServer.
 *
 * c_glib's only server takes one connection at a time, and its server
 * socket binds every address; so this file listens itself (on the bind
 * address asked for), accepts in one thread and gives every connection a
 * thread that loops thrift_processor_process around one shared processor.
 * The handler is a subclass of the generated one; every call checks the
 * token, the slice and the data length before it reaches the ShoalServer,
 * which is thread-safe.  Without a ShoalServer (a process holding only
 * workers of a group spread over processes) every param call fails the
 * slice check.  send_bridge hands its data to the mailbox without a copy:
 * the buffer was received for this call alone.  Connections use
 * ShoalThriftSocket and ShoalThriftProtocol (core/thrift_util.h): bounded
 * messages, garbage refused without allocating what it declares, payloads
 * sent and received without extra copies.  A bad message closes its
 * connection only.
 *
 * Stopping never waits for a peer: a pipe written at stop wakes every idle
 * connection and the accept loop, shutdown(2) wakes sockets blocked in
 * the middle of a message, and pulls waiting for a version wait in slices
 * of 100 ms that check for the stop. */
#include "server/rpc_server.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thrift/c_glib/processor/thrift_processor.h>

#include "core/error.h"
#include "core/thrift_util.h"
#include "server/rpc_types.h"

#if G_BYTE_ORDER != G_LITTLE_ENDIAN
#error "the parameter service sends float32 in host byte order, which must be little-endian"
#endif

#define HEADROOM (64 * 1024)              /* message bytes besides a slice's floats */
#define WAIT_SLICE_US (100 * 1000)        /* a waiting pull checks for stop this often */
#define MAX_WAIT_MS ((gint64) 24 * 3600 * 1000)
#define BRIDGE_MESSAGE_BYTES ((size_t) 256 << 20)   /* default limit where bridge messages come */

typedef struct {
  ShoalRpcServer *rpc;
  int fd;                   /* the socket until the connection ends, then -1; under rpc->lock */
  gboolean done;            /* under rpc->lock */
  char *peer;               /* "host:port" */
  ShoalThriftSocket *sock;
  GThread *thread;
} Conn;

struct _ShoalRpcServer {
  ShoalServer *server;      /* borrowed, may be NULL */
  ShoalMailbox *mailbox;    /* borrowed, may be NULL */
  char *token;
  gsize token_len;
  size_t max_message;
  gint64 io_timeout_ms;
  int expected_shutdowns;
  ShoalCheckpoint *checkpoint;  /* borrowed, may be NULL */
  gboolean (*give_up) (void);   /* may be NULL */
  int listen_fd;
  int port;
  char *address;
  int wake[2];              /* a pipe written once at stop; every poll watches wake[0] */
  GThread *acceptor;
  ThriftProcessor *processor;
  GObject *handler;

  GMutex lock;
  GCond cond;               /* shutdowns or stopping changed */
  GList *conns;             /* Conn *, under lock */
  int shutdowns;            /* under lock */
  gint stopping;            /* atomic */
};

/* The peer of the connection whose thread runs a handler, for logs. */
static GPrivate current_peer;

static const char *
peer (void)
{
  const char *p = g_private_get (&current_peer);
  return p != NULL ? p : "?";
}

/* ---- the handler ---------------------------------------------------------- */

typedef struct {
  ShoalParamServiceHandler parent;
  ShoalRpcServer *rpc;
} ShoalRpcHandler;

typedef struct {
  ShoalParamServiceHandlerClass parent;
} ShoalRpcHandlerClass;

GType shoal_rpc_handler_get_type (void);
G_DEFINE_TYPE (ShoalRpcHandler, shoal_rpc_handler, SHOAL_TYPE_PARAM_SERVICE_HANDLER)

static ShoalRpcServer *
rpc_of (ShoalParamServiceIf *iface)
{
  return ((ShoalRpcHandler *) iface)->rpc;
}

static gboolean fault (ShoalParamError **err, ShoalParamFault code, const char *fmt, ...)
  G_GNUC_PRINTF (3, 4);

/* Sets the ParamError the client gets; returns FALSE for the handler to return. */
static gboolean
fault (ShoalParamError **err, ShoalParamFault code, const char *fmt, ...)
{
  va_list ap;
  char *msg;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  if (*err != NULL)
    g_object_unref (*err);
  *err = g_object_new (SHOAL_TYPE_PARAM_ERROR, "code", (gint) code, "message", msg, NULL);
  g_free (msg);
  return FALSE;
}

/* A ShoalServer error becomes REFUSED with the server's own message, or
 * STOPPED with the step the job stops at. */
static gboolean
server_fault (ShoalRpcServer *rpc, ShoalParamError **err, GError *e)
{
  if (g_error_matches (e, SHOAL_ERROR, SHOAL_ERROR_STOPPED))
    {
      fault (err, SHOAL_PARAM_FAULT_STOPPED, "%s", e->message);
      (*err)->stop_step = shoal_server_stop_step (rpc->server);
      (*err)->__isset_stop_step = TRUE;
    }
  else
    fault (err, SHOAL_PARAM_FAULT_REFUSED, "%s", e != NULL ? e->message : "refused");
  g_clear_error (&e);
  return FALSE;
}

/* Compares in time independent of where the first difference is. */
static gboolean
token_ok (ShoalRpcServer *rpc, const char *call, const gchar *token, ShoalParamError **err)
{
  gsize n = token != NULL ? strlen (token) : 0;
  guint diff = n != rpc->token_len;

  for (gsize i = 0; i < n; i++)
    diff |= (guint8) token[i] ^ (guint8) rpc->token[rpc->token_len > 0 ? i % rpc->token_len : 0];
  if (diff == 0)
    return TRUE;
  g_warning ("rpc: %s from %s refused: wrong job token", call, peer ());
  return fault (err, SHOAL_PARAM_FAULT_BAD_TOKEN, "%s refused: wrong job token", call);
}

/* The slice must be hosted here; `data` (when has_data) must hold exactly
 * its floats.  Sets *n to the slice's length in floats. */
static gboolean
slice_ok (ShoalRpcServer *rpc, const char *call, gint32 slice, gboolean has_data,
          const GByteArray *data, size_t *n, ShoalParamError **err)
{
  size_t begin, end;

  if (rpc->server == NULL)
    return fault (err, SHOAL_PARAM_FAULT_UNKNOWN_SLICE,
                  "%s: slice %d: this process serves no slices", call, slice);
  int nslices = shoal_server_n_slices (rpc->server);
  if (slice < 0 || slice >= nslices)
    return fault (err, SHOAL_PARAM_FAULT_UNKNOWN_SLICE, "%s: unknown slice %d (the job has %d)",
                  call, slice, nslices);
  if (!shoal_server_hosts (rpc->server, slice))
    return fault (err, SHOAL_PARAM_FAULT_UNKNOWN_SLICE, "%s: slice %d is not served here", call,
                  slice);
  shoal_server_slice_range (rpc->server, slice, &begin, &end);
  *n = end - begin;
  if (has_data)
    {
      gsize bytes = data != NULL ? data->len : 0;
      if (bytes != *n * sizeof (float))
        return fault (err, SHOAL_PARAM_FAULT_BAD_LENGTH,
                      "%s: slice %d holds %zu floats (%zu bytes), got %zu bytes", call, slice, *n,
                      *n * sizeof (float), bytes);
    }
  return TRUE;
}

static float *
floats_of (const GByteArray *a)
{
  return a != NULL ? (float *) (void *) a->data : NULL;
}

/* shoal_server_pull in slices of WAIT_SLICE_US so that a stop is seen. */
static gboolean
wait_pull (ShoalRpcServer *rpc, const char *call, int slice, float *dst, size_t n,
           gint64 min_version, gint64 wait_ms, gint64 *version, ShoalParamError **err)
{
  gint64 deadline = g_get_monotonic_time () + CLAMP (wait_ms, 0, MAX_WAIT_MS) * 1000;

  for (;;)
    {
      gint64 t0 = g_get_monotonic_time ();
      gint64 chunk = MIN (MAX (deadline - t0, 0), WAIT_SLICE_US);
      GError *e = NULL;

      if (shoal_server_pull (rpc->server, slice, dst, n, min_version, chunk, version, &e))
        return TRUE;
      gint64 t1 = g_get_monotonic_time ();
      if (g_atomic_int_get (&rpc->stopping))
        {
          g_error_free (e);
          return fault (err, SHOAL_PARAM_FAULT_REFUSED, "%s: slice %d: server stopping", call,
                        slice);
        }
      /* a failure other than the wait running out: report it */
      if (t1 - t0 < chunk || g_error_matches (e, SHOAL_ERROR, SHOAL_ERROR_STOPPED)
          || shoal_server_slice_version (rpc->server, slice) >= min_version)
        return server_fault (rpc, err, e);
      if (t1 >= deadline)
        {
          fault (err, SHOAL_PARAM_FAULT_TIMEOUT, "%s: slice %d did not reach version %" G_GINT64_FORMAT
                 " within %" G_GINT64_FORMAT " ms (%s)", call, slice, min_version, wait_ms,
                 e->message);
          g_error_free (e);
          return FALSE;
        }
      g_error_free (e);
    }
}

static gboolean
handler_push (ShoalParamServiceIf *iface, const gchar *token, const gint32 slice,
              const gint64 step, const GByteArray *grad, ShoalParamError **err, GError **error)
{
  ShoalRpcServer *rpc = rpc_of (iface);
  GError *e = NULL;
  size_t n;

  (void) error;
  if (!token_ok (rpc, "push", token, err) || !slice_ok (rpc, "push", slice, TRUE, grad, &n, err))
    return FALSE;
  if (!shoal_server_push (rpc->server, slice, floats_of (grad), n, step, &e))
    return server_fault (rpc, err, e);
  return TRUE;
}

static void
set_values (ShoalSliceValues *ret, GByteArray *values, gint64 version)
{
  if (ret->values != NULL)
    g_byte_array_unref (ret->values);
  ret->values = values;
  ret->__isset_values = TRUE;
  ret->version = version;
  ret->__isset_version = TRUE;
}

static gboolean
handler_pull (ShoalParamServiceIf *iface, ShoalSliceValues **_return, const gchar *token,
              const gint32 slice, const gint64 min_version, const gint64 wait_ms,
              ShoalParamError **err, GError **error)
{
  ShoalRpcServer *rpc = rpc_of (iface);
  GByteArray *values;
  gint64 version = 0;
  size_t n;

  (void) error;
  if (!token_ok (rpc, "pull", token, err) || !slice_ok (rpc, "pull", slice, FALSE, NULL, &n, err))
    return FALSE;
  values = g_byte_array_sized_new ((guint) (n * sizeof (float)));
  g_byte_array_set_size (values, (guint) (n * sizeof (float)));
  if (!wait_pull (rpc, "pull", slice, floats_of (values), n, min_version, wait_ms, &version, err))
    {
      g_byte_array_unref (values);
      return FALSE;
    }
  set_values (*_return, values, version);
  return TRUE;
}

/* push, then pull the first version that holds this gradient.  That is
 * the version after the one seen before the push: in SYNC mode a push is
 * taken only for the step being aggregated (version == step), so this is
 * step + 1; in ASYNC mode the push itself made it.  The values go back in
 * the gradient's buffer: the call's arguments own it and are done with it. */
static gboolean
handler_push_pull (ShoalParamServiceIf *iface, ShoalSliceValues **_return, const gchar *token,
                   const gint32 slice, const gint64 step, const GByteArray *grad,
                   const gint64 wait_ms, ShoalParamError **err, GError **error)
{
  ShoalRpcServer *rpc = rpc_of (iface);
  GByteArray *values;
  GError *e = NULL;
  gint64 before, version = 0;
  size_t n;

  (void) error;
  if (!token_ok (rpc, "push_pull", token, err)
      || !slice_ok (rpc, "push_pull", slice, TRUE, grad, &n, err))
    return FALSE;
  before = shoal_server_slice_version (rpc->server, slice);
  if (!shoal_server_push (rpc->server, slice, floats_of (grad), n, step, &e))
    return server_fault (rpc, err, e);
  values = grad != NULL ? g_byte_array_ref ((GByteArray *) grad) : g_byte_array_new ();
  if (!wait_pull (rpc, "push_pull", slice, floats_of (values), n, before + 1, wait_ms, &version,
                  err))
    {
      g_byte_array_unref (values);
      return FALSE;
    }
  set_values (*_return, values, version);
  return TRUE;
}

static gboolean
handler_put (ShoalParamServiceIf *iface, const gchar *token, const gint32 slice,
             const gint64 version, const GByteArray *values, ShoalParamError **err,
             GError **error)
{
  ShoalRpcServer *rpc = rpc_of (iface);
  GError *e = NULL;
  size_t n;

  (void) error;
  if (!token_ok (rpc, "put", token, err) || !slice_ok (rpc, "put", slice, TRUE, values, &n, err))
    return FALSE;
  if (!shoal_server_put (rpc->server, slice, floats_of (values), n, version, &e))
    return server_fault (rpc, err, e);
  return TRUE;
}

/* The new values go back in the delta's buffer (server.h allows the alias). */
static gboolean
handler_apply_delta (ShoalParamServiceIf *iface, GByteArray **_return, const gchar *token,
                     const gint32 slice, const GByteArray *delta, ShoalParamError **err,
                     GError **error)
{
  ShoalRpcServer *rpc = rpc_of (iface);
  GByteArray *values;
  GError *e = NULL;
  size_t n;

  (void) error;
  if (!token_ok (rpc, "apply_delta", token, err)
      || !slice_ok (rpc, "apply_delta", slice, TRUE, delta, &n, err))
    return FALSE;
  values = delta != NULL ? g_byte_array_ref ((GByteArray *) delta) : g_byte_array_new ();
  if (!shoal_server_apply_delta (rpc->server, slice, floats_of (delta), floats_of (values), n, &e))
    {
      g_byte_array_unref (values);
      return server_fault (rpc, err, e);
    }
  if (*_return != NULL)
    g_byte_array_unref (*_return);
  *_return = values;
  return TRUE;
}

static gboolean
handler_stats (ShoalParamServiceIf *iface, ShoalStatsReply **_return, const gchar *token,
               ShoalParamError **err, GError **error)
{
  ShoalRpcServer *rpc = rpc_of (iface);
  ShoalServerStats st;
  ShoalStatsReply *r = *_return;

  (void) error;
  if (!token_ok (rpc, "stats", token, err))
    return FALSE;
  if (rpc->server == NULL)
    return fault (err, SHOAL_PARAM_FAULT_REFUSED, "stats: this process serves no slices");
  shoal_server_stats (rpc->server, &st);
  r->pushes = st.pushes;
  r->pulls = st.pulls;
  r->updates = st.updates;
  r->deltas = st.deltas;
  r->bytes_in = st.bytes_in;
  r->bytes_out = st.bytes_out;
  r->__isset_pushes = r->__isset_pulls = r->__isset_updates = TRUE;
  r->__isset_deltas = r->__isset_bytes_in = r->__isset_bytes_out = TRUE;
  return TRUE;
}

static gboolean
handler_shutdown (ShoalParamServiceIf *iface, const gchar *token, const gint32 rank,
                  ShoalParamError **err, GError **error)
{
  ShoalRpcServer *rpc = rpc_of (iface);
  int count;

  (void) error;
  if (!token_ok (rpc, "shutdown", token, err))
    return FALSE;
  g_mutex_lock (&rpc->lock);
  count = ++rpc->shutdowns;
  g_cond_broadcast (&rpc->cond);
  g_mutex_unlock (&rpc->lock);
  g_debug ("rpc: process %d (%s) is done, %d of %d", rank, peer (), count,
           rpc->expected_shutdowns);
  return TRUE;
}

static gboolean
handler_checkpoint (ShoalParamServiceIf *iface, const gchar *token, const gint64 step,
                    ShoalParamError **err, GError **error)
{
  ShoalRpcServer *rpc = rpc_of (iface);
  GError *e = NULL;

  (void) error;
  if (!token_ok (rpc, "checkpoint", token, err))
    return FALSE;
  if (rpc->server == NULL)
    return fault (err, SHOAL_PARAM_FAULT_REFUSED, "checkpoint: this process serves no slices");
  if (rpc->checkpoint == NULL)
    {
      g_set_error (&e, SHOAL_ERROR, SHOAL_ERROR_RPC, "checkpoint: this server keeps no checkpoints");
      return server_fault (rpc, err, e);
    }
  if (!shoal_server_checkpoint (rpc->server, rpc->checkpoint, step, &e))
    return server_fault (rpc, err, e);
  return TRUE;
}

static gboolean
handler_stop_at (ShoalParamServiceIf *iface, const gchar *token, const gint64 step,
                 ShoalParamError **err, GError **error)
{
  ShoalRpcServer *rpc = rpc_of (iface);
  GError *e = NULL;

  (void) error;
  if (!token_ok (rpc, "stop_at", token, err))
    return FALSE;
  if (rpc->server == NULL)
    return fault (err, SHOAL_PARAM_FAULT_REFUSED, "stop_at: this process serves no slices");
  if (!shoal_server_stop_at (rpc->server, step, &e))
    return server_fault (rpc, err, e);
  g_debug ("rpc: %s stops at step %" G_GINT64_FORMAT, peer (), step);
  return TRUE;
}

/* The message keeps the received buffer: the call's arguments are its
 * only other holders and are freed, emptied, after this returns. */
static gboolean
handler_send_bridge (ShoalParamServiceIf *iface, const gchar *token, const gint32 group,
                     const gint32 channel, const GByteArray *data, ShoalParamError **err,
                     GError **error)
{
  ShoalRpcServer *rpc = rpc_of (iface);
  GBytes *msg;

  (void) error;
  if (!token_ok (rpc, "send_bridge", token, err))
    return FALSE;
  if (rpc->mailbox == NULL)
    return fault (err, SHOAL_PARAM_FAULT_REFUSED,
                  "send_bridge group %d channel %u: this process takes no bridge messages", group,
                  (guint32) channel);
  if (data != NULL && data->len > 0)
    {
      gsize len = 0;
      guint8 *bytes = g_byte_array_steal ((GByteArray *) data, &len);
      msg = g_bytes_new_take (bytes, len);
    }
  else
    msg = g_bytes_new (NULL, 0);
  shoal_mailbox_put (rpc->mailbox, group, (guint32) channel, msg);
  return TRUE;
}

static void
shoal_rpc_handler_init (ShoalRpcHandler *self)
{
  self->rpc = NULL;
}

static void
shoal_rpc_handler_class_init (ShoalRpcHandlerClass *klass)
{
  ShoalParamServiceHandlerClass *h = (ShoalParamServiceHandlerClass *) klass;

  h->push = handler_push;
  h->pull = handler_pull;
  h->push_pull = handler_push_pull;
  h->put = handler_put;
  h->apply_delta = handler_apply_delta;
  h->stats = handler_stats;
  h->shutdown = handler_shutdown;
  h->checkpoint = handler_checkpoint;
  h->send_bridge = handler_send_bridge;
  h->stop_at = handler_stop_at;
}

/* ---- connections ---------------------------------------------------------- */

static void
conn_free (Conn *c)
{
  g_object_unref (c->sock);   /* closes the socket if still open */
  g_free (c->peer);
  g_free (c);
}

static gpointer
conn_main (gpointer data)
{
  Conn *c = data;
  ShoalRpcServer *rpc = c->rpc;
  ThriftTransport *transport = shoal_thrift_socket_transport (c->sock);
  ShoalThriftProtocol *sp = shoal_thrift_protocol_new (transport);
  ThriftProtocol *protocol = shoal_thrift_protocol_base (sp);

  g_private_set (&current_peer, c->peer);
  while (!g_atomic_int_get (&rpc->stopping)
         && shoal_thrift_socket_wait_message (c->sock, rpc->wake[0]) == 1)
    {
      GError *e = NULL;
      if (!thrift_processor_process (rpc->processor, protocol, protocol, &e))
        {
          if (!g_atomic_int_get (&rpc->stopping))
            g_message ("rpc: dropping the connection from %s: %s", c->peer,
                       e != NULL ? e->message : "the call failed");
          g_clear_error (&e);
          break;
        }
    }
  g_private_set (&current_peer, NULL);

  g_mutex_lock (&rpc->lock);
  c->fd = -1;
  thrift_transport_close (transport, NULL);
  c->done = TRUE;
  g_mutex_unlock (&rpc->lock);
  g_object_unref (sp);
  return NULL;
}

/* Joins and frees finished connections (all of them when `all`). */
static void
reap (ShoalRpcServer *rpc, gboolean all)
{
  GList *finished = NULL;

  g_mutex_lock (&rpc->lock);
  for (GList *l = rpc->conns, *next; l != NULL; l = next)
    {
      Conn *c = l->data;
      next = l->next;
      if (all || c->done)
        {
          rpc->conns = g_list_remove_link (rpc->conns, l);
          finished = g_list_concat (l, finished);
        }
    }
  g_mutex_unlock (&rpc->lock);
  for (GList *l = finished; l != NULL; l = l->next)
    {
      Conn *c = l->data;
      g_thread_join (c->thread);
      conn_free (c);
    }
  g_list_free (finished);
}

guint
shoal_rpc_server_reap (ShoalRpcServer *rpc)
{
  reap (rpc, FALSE);
  g_mutex_lock (&rpc->lock);
  guint open = g_list_length (rpc->conns);
  g_mutex_unlock (&rpc->lock);
  return open;
}

static char *
address_string (const struct sockaddr *addr, socklen_t len)
{
  char host[NI_MAXHOST], serv[NI_MAXSERV];

  if (getnameinfo (addr, len, host, sizeof host, serv, sizeof serv,
                   NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return g_strdup ("?");
  return addr->sa_family == AF_INET6 ? g_strdup_printf ("[%s]:%s", host, serv)
                                     : g_strdup_printf ("%s:%s", host, serv);
}

static gpointer
accept_main (gpointer data)
{
  ShoalRpcServer *rpc = data;

  for (;;)
    {
      struct pollfd p[2] = { { rpc->listen_fd, POLLIN, 0 }, { rpc->wake[0], POLLIN, 0 } };
      struct sockaddr_storage addr;
      socklen_t alen = sizeof addr;
      GError *e = NULL;
      int fd;

      if (poll (p, 2, -1) < 0)
        {
          if (errno == EINTR)
            continue;
          g_warning ("rpc: polling port %d: %s; no more connections accepted", rpc->port,
                     g_strerror (errno));
          break;
        }
      if (p[1].revents != 0 || g_atomic_int_get (&rpc->stopping))
        break;
      fd = accept4 (rpc->listen_fd, (struct sockaddr *) &addr, &alen, SOCK_CLOEXEC);
      if (fd < 0)
        {
          if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED)
            {
              g_warning ("rpc: accepting on port %d: %s", rpc->port, g_strerror (errno));
              g_usleep (100 * 1000);   /* out of descriptors: let connections end */
            }
          continue;
        }
      reap (rpc, FALSE);
      if (!shoal_socket_tune (fd, rpc->io_timeout_ms, &e))
        {
          g_warning ("rpc: a connection on port %d: %s", rpc->port, e->message);
          g_error_free (e);
          close (fd);
          continue;
        }

      Conn *c = g_new0 (Conn, 1);
      c->rpc = rpc;
      c->fd = fd;
      c->peer = address_string ((struct sockaddr *) &addr, alen);
      c->sock = shoal_thrift_socket_new (fd, rpc->max_message, rpc->io_timeout_ms);
      g_mutex_lock (&rpc->lock);
      if (g_atomic_int_get (&rpc->stopping))
        {
          g_mutex_unlock (&rpc->lock);
          conn_free (c);
          break;
        }
      c->thread = g_thread_try_new ("shoal-rpc-conn", conn_main, c, &e);
      if (c->thread == NULL)
        {
          g_mutex_unlock (&rpc->lock);
          g_warning ("rpc: no thread for the connection from %s: %s", c->peer, e->message);
          g_error_free (e);
          conn_free (c);
          continue;
        }
      rpc->conns = g_list_prepend (rpc->conns, c);
      g_mutex_unlock (&rpc->lock);
    }
  return NULL;
}

/* ---- start and stop ------------------------------------------------------- */

static int
listen_on (const char *address, int port, int *bound, GError **error)
{
  struct addrinfo hints = { 0 }, *res = NULL;
  char service[16];
  int fd = -1, err = 0, rc;

  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  g_snprintf (service, sizeof service, "%d", port);
  if ((rc = getaddrinfo (address, service, &hints, &res)) != 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "rpc server: bind address %s: %s",
                   address, gai_strerror (rc));
      return -1;
    }
  for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next)
    {
      int one = 1;
      fd = socket (ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
      if (fd < 0)
        {
          err = errno;
          continue;
        }
      setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (bind (fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen (fd, 128) == 0)
        break;
      err = errno;
      close (fd);
      fd = -1;
    }
  freeaddrinfo (res);
  if (fd < 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "rpc server: cannot listen on %s:%d: %s",
                   address, port, g_strerror (err));
      return -1;
    }

  struct sockaddr_storage addr;
  socklen_t alen = sizeof addr;
  if (getsockname (fd, (struct sockaddr *) &addr, &alen) < 0)
    {
      err = errno;
      close (fd);
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "rpc server: %s:%d: getsockname: %s",
                   address, port, g_strerror (err));
      return -1;
    }
  *bound = ntohs (addr.ss_family == AF_INET6 ? ((struct sockaddr_in6 *) &addr)->sin6_port
                                             : ((struct sockaddr_in *) &addr)->sin_port);
  return fd;
}

static size_t
largest_slice_bytes (ShoalServer *server)
{
  size_t most = 0;

  if (server == NULL)
    return 0;
  for (int i = 0; i < shoal_server_n_slices (server); i++)
    {
      size_t begin, end;
      shoal_server_slice_range (server, i, &begin, &end);
      most = MAX (most, (end - begin) * sizeof (float));
    }
  return most;
}

ShoalRpcServer *
shoal_rpc_server_start (ShoalServer *server, const ShoalRpcServerOptions *opts, GError **error)
{
  const char *address;
  size_t slice_bytes;
  ShoalRpcServer *rpc;
  int fd, port = 0;

  g_return_val_if_fail (opts != NULL, NULL);
  shoal_rpc_types_init ();
  address = opts->bind_address != NULL ? opts->bind_address : "127.0.0.1";
  if (opts->port < 0 || opts->port > 65535)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "rpc server: port %d out of range",
                   opts->port);
      return NULL;
    }
  slice_bytes = largest_slice_bytes (server);
  if (slice_bytes > (size_t) G_MAXINT32 - HEADROOM)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC,
                   "rpc server: a slice of %zu bytes does not fit a Thrift message (2 GiB); use more slices",
                   slice_bytes);
      return NULL;
    }
  if ((fd = listen_on (address, opts->port, &port, error)) < 0)
    return NULL;

  rpc = g_new0 (ShoalRpcServer, 1);
  rpc->server = server;
  rpc->mailbox = opts->mailbox;
  rpc->token = g_strdup (opts->token != NULL ? opts->token : "");
  rpc->token_len = strlen (rpc->token);
  /* bridge messages (activations, gradients of a batch) are not bounded
   * by the slices */
  rpc->max_message = opts->max_message_bytes > 0 ? MIN (opts->max_message_bytes, (size_t) G_MAXINT32)
                     : server == NULL || opts->mailbox != NULL
                       ? MIN (MAX (MAX (slice_bytes + HEADROOM, BRIDGE_MESSAGE_BYTES),
                                   opts->mailbox != NULL ? opts->mailbox_message_bytes : 0),
                              (size_t) G_MAXINT32)
                       : slice_bytes + HEADROOM;
  rpc->io_timeout_ms = opts->io_timeout_ms > 0 ? opts->io_timeout_ms : 60000;
  rpc->expected_shutdowns = opts->expected_shutdowns;
  rpc->checkpoint = opts->checkpoint;
  rpc->give_up = opts->give_up;
  rpc->listen_fd = fd;
  rpc->port = port;
  rpc->address = g_strdup (address);
  g_mutex_init (&rpc->lock);
  g_cond_init (&rpc->cond);
  if (pipe2 (rpc->wake, O_CLOEXEC) < 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "rpc server: pipe: %s", g_strerror (errno));
      close (fd);
      g_mutex_clear (&rpc->lock);
      g_cond_clear (&rpc->cond);
      g_free (rpc->token);
      g_free (rpc->address);
      g_free (rpc);
      return NULL;
    }

  ShoalRpcHandler *handler = g_object_new (shoal_rpc_handler_get_type (), NULL);
  handler->rpc = rpc;
  rpc->handler = G_OBJECT (handler);
  rpc->processor = g_object_new (SHOAL_TYPE_PARAM_SERVICE_PROCESSOR, "handler", handler, NULL);

  GError *e = NULL;
  rpc->acceptor = g_thread_try_new ("shoal-rpc-accept", accept_main, rpc, &e);
  if (rpc->acceptor == NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "rpc server: no accept thread: %s",
                   e->message);
      g_error_free (e);
      g_atomic_int_set (&rpc->stopping, 1);
      shoal_rpc_server_stop (rpc);
      return NULL;
    }
  g_debug ("rpc: serving %d slices%s on %s:%d, messages up to %zu bytes",
           server != NULL ? shoal_server_n_slices (server) : 0,
           opts->mailbox != NULL ? " and bridge messages" : "", address, port, rpc->max_message);
  return rpc;
}

int
shoal_rpc_server_port (ShoalRpcServer *rpc)
{
  return rpc->port;
}

void
shoal_rpc_server_wait (ShoalRpcServer *rpc)
{
  g_mutex_lock (&rpc->lock);
  while (!g_atomic_int_get (&rpc->stopping) && rpc->shutdowns < rpc->expected_shutdowns)
    {
      if (rpc->give_up == NULL)
        g_cond_wait (&rpc->cond, &rpc->lock);
      else if (!g_cond_wait_until (&rpc->cond, &rpc->lock, g_get_monotonic_time () + G_USEC_PER_SEC / 5)
               && rpc->give_up ())
        break;  /* a signal handler cannot signal the condition: look every 200 ms */
    }
  g_mutex_unlock (&rpc->lock);
}

void
shoal_rpc_server_stop (ShoalRpcServer *rpc)
{
  if (rpc == NULL)
    return;
  g_mutex_lock (&rpc->lock);
  g_atomic_int_set (&rpc->stopping, 1);
  g_cond_broadcast (&rpc->cond);
  g_mutex_unlock (&rpc->lock);
  if (write (rpc->wake[1], "x", 1) < 0)
    g_warning ("rpc: waking the server threads: %s", g_strerror (errno));
  if (rpc->acceptor != NULL)
    g_thread_join (rpc->acceptor);   /* no connection is added after this */

  g_mutex_lock (&rpc->lock);
  for (GList *l = rpc->conns; l != NULL; l = l->next)
    {
      Conn *c = l->data;
      if (c->fd >= 0)
        shutdown (c->fd, SHUT_RDWR);
    }
  g_mutex_unlock (&rpc->lock);
  reap (rpc, TRUE);

  close (rpc->listen_fd);
  close (rpc->wake[0]);
  close (rpc->wake[1]);
  g_object_unref (rpc->processor);
  g_object_unref (rpc->handler);
  g_mutex_clear (&rpc->lock);
  g_cond_clear (&rpc->cond);
  g_free (rpc->token);
  g_free (rpc->address);
  g_free (rpc);
}
