/* The accept loop and the connection threads of a Thrift service; see
 * rpc/listener.h. */
#include "rpc/listener.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/error.h"
#include "rpc/thrift_protocol.h"
#include "rpc/thrift_socket.h"

typedef struct {
  ShoalRpcListener *rpc;
  int fd;                   /* the socket until the connection ends, then -1; under rpc->lock */
  gboolean done;            /* under rpc->lock */
  char *peer;               /* "host:port" */
  ShoalThriftSocket *sock;
  GThread *thread;
  gpointer data;            /* shoal_rpc_listener_set_conn_data; only the connection's thread */
  GDestroyNotify destroy;
  ShoalThriftProtocol *proto;  /* the connection's protocol; only its thread */
  GDestroyNotify after;     /* shoal_rpc_listener_after_reply; only the connection's thread */
  gpointer after_data;
} Conn;

struct _ShoalRpcListener {
  char *name;
  ThriftProcessor *processor;   /* a reference */
  size_t max_message;
  gint64 io_timeout_ms;
  int max_connections;      /* 0: no cap */
  gint64 idle_timeout_ms;   /* 0: none */
  gint64 refused;           /* connections refused at the cap since the last log line (acceptor only) */
  gint64 refused_logged_at; /* monotonic us of that line; 0: never */
  int listen_fd;
  int port;
  int wake[2];              /* a pipe written once at stop; every poll watches wake[0] */
  GThread *acceptor;

  GMutex lock;
  GList *conns;             /* Conn *, under lock */
  gint stopping;            /* atomic */
};

/* The connection whose thread runs a handler: its peer for logs, its data. */
static GPrivate current_conn;

const char *
shoal_rpc_listener_peer (void)
{
  Conn *c = g_private_get (&current_conn);
  return c != NULL ? c->peer : "?";
}

static void
conn_data_clear (Conn *c)
{
  if (c->destroy != NULL && c->data != NULL)
    c->destroy (c->data);
  c->data = NULL;
  c->destroy = NULL;
}

void
shoal_rpc_listener_set_conn_data (gpointer data, GDestroyNotify destroy)
{
  Conn *c = g_private_get (&current_conn);
  if (c == NULL)
    {
      if (destroy != NULL && data != NULL)
        destroy (data);
      return;
    }
  conn_data_clear (c);
  c->data = data;
  c->destroy = destroy;
}

void
shoal_rpc_listener_after_reply (GDestroyNotify func, gpointer data)
{
  Conn *c = g_private_get (&current_conn);
  if (c == NULL)
    {
      func (data);
      return;
    }
  g_return_if_fail (c->after == NULL);
  c->after = func;
  c->after_data = data;
}

void
shoal_rpc_listener_reply_pinned (const void *buf, guint32 len, const ShoalPinnedBytes *pin)
{
  Conn *c = g_private_get (&current_conn);
  if (c == NULL || c->proto == NULL)
    {
      pin->release (pin->data);
      return;
    }
  shoal_thrift_protocol_set_source (c->proto, buf, len, pin);
}

static void
run_after_reply (Conn *c)
{
  if (c->proto != NULL)
    shoal_thrift_protocol_clear_source (c->proto);
  if (c->after != NULL)
    {
      GDestroyNotify func = c->after;
      c->after = NULL;
      func (c->after_data);
    }
}

gpointer
shoal_rpc_listener_conn_data (void)
{
  Conn *c = g_private_get (&current_conn);
  return c != NULL ? c->data : NULL;
}

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
  ShoalRpcListener *rpc = c->rpc;
  ThriftTransport *transport = shoal_thrift_socket_transport (c->sock);
  ShoalThriftProtocol *sp = shoal_thrift_protocol_new (transport);
  ThriftProtocol *protocol = shoal_thrift_protocol_base (sp);

  g_private_set (&current_conn, c);
  c->proto = sp;
  int waited;
  while (!g_atomic_int_get (&rpc->stopping)
         && (waited = shoal_thrift_socket_wait_message_for (c->sock, rpc->wake[0], rpc->idle_timeout_ms)) != 0
         && waited != -1)
    {
      if (waited == 2)
        {
          g_debug ("%s: closing the connection from %s: idle for %" G_GINT64_FORMAT " ms", rpc->name, c->peer,
                   rpc->idle_timeout_ms);
          break;
        }
      GError *e = NULL;
      gboolean ok = thrift_processor_process (rpc->processor, protocol, protocol, &e);
      run_after_reply (c);
      if (!ok)
        {
          if (!g_atomic_int_get (&rpc->stopping))
            g_message ("%s: dropping the connection from %s: %s", rpc->name, c->peer,
                       e != NULL ? e->message : "the call failed");
          g_clear_error (&e);
          break;
        }
    }
  conn_data_clear (c);
  c->proto = NULL;
  g_private_set (&current_conn, NULL);

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
reap (ShoalRpcListener *rpc, gboolean all)
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
shoal_rpc_listener_reap (ShoalRpcListener *rpc)
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

/* At the cap: closes fd (a connection just accepted) and says so, once a
 * minute while connections keep coming.  FALSE when it was closed. */
static gboolean
room_for_one (ShoalRpcListener *rpc, int fd, const struct sockaddr *addr, socklen_t alen)
{
  g_mutex_lock (&rpc->lock);
  guint open = g_list_length (rpc->conns);
  g_mutex_unlock (&rpc->lock);
  if (open < (guint) rpc->max_connections)
    return TRUE;
  close (fd);
  rpc->refused++;
  gint64 now = g_get_monotonic_time ();
  if (rpc->refused_logged_at == 0 || now - rpc->refused_logged_at >= 60 * G_USEC_PER_SEC)
    {
      char *peer = address_string (addr, alen);
      g_warning ("%s: port %d: %u connections open, the cap ([cluster] rpc_max_connections = %d): refused "
                 "the connection from %s (%" G_GINT64_FORMAT " refused since the last such line)",
                 rpc->name, rpc->port, open, rpc->max_connections, peer, rpc->refused);
      g_free (peer);
      rpc->refused = 0;
      rpc->refused_logged_at = now;
    }
  return FALSE;
}

static gpointer
accept_main (gpointer data)
{
  ShoalRpcListener *rpc = data;

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
          g_warning ("%s: polling port %d: %s; no more connections accepted", rpc->name, rpc->port,
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
              g_warning ("%s: accepting on port %d: %s", rpc->name, rpc->port, g_strerror (errno));
              g_usleep (100 * 1000);   /* out of descriptors: let connections end */
            }
          continue;
        }
      reap (rpc, FALSE);
      if (rpc->max_connections > 0 && !room_for_one (rpc, fd, (struct sockaddr *) &addr, alen))
        continue;
      if (!shoal_socket_tune (fd, rpc->io_timeout_ms, &e))
        {
          g_warning ("%s: a connection on port %d: %s", rpc->name, rpc->port, e->message);
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
          g_warning ("%s: no thread for the connection from %s: %s", rpc->name, c->peer, e->message);
          g_error_free (e);
          conn_free (c);
          continue;
        }
      rpc->conns = g_list_prepend (rpc->conns, c);
      g_mutex_unlock (&rpc->lock);
    }
  return NULL;
}

static int
listen_on (const char *name, const char *address, int port, int *bound, GError **error)
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
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "%s: bind address %s: %s",
                   name, address, gai_strerror (rc));
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
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "%s: cannot listen on %s:%d: %s",
                   name, address, port, g_strerror (err));
      return -1;
    }

  struct sockaddr_storage addr;
  socklen_t alen = sizeof addr;
  if (getsockname (fd, (struct sockaddr *) &addr, &alen) < 0)
    {
      err = errno;
      close (fd);
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "%s: %s:%d: getsockname: %s",
                   name, address, port, g_strerror (err));
      return -1;
    }
  *bound = ntohs (addr.ss_family == AF_INET6 ? ((struct sockaddr_in6 *) &addr)->sin6_port
                                             : ((struct sockaddr_in *) &addr)->sin_port);
  return fd;
}


ShoalRpcListener *
shoal_rpc_listener_start (ThriftProcessor *processor, const ShoalRpcListenerOptions *opts,
                          GError **error)
{
  g_return_val_if_fail (processor != NULL && opts != NULL, NULL);
  g_return_val_if_fail (opts->max_message_bytes > 0 && opts->io_timeout_ms > 0, NULL);
  const char *name = opts->name != NULL ? opts->name : "rpc";
  const char *address = opts->bind_address != NULL ? opts->bind_address : "127.0.0.1";
  int fd, port = 0;

  if (opts->port < 0 || opts->port > 65535)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "%s: port %d out of range", name, opts->port);
      return NULL;
    }
  if ((fd = listen_on (name, address, opts->port, &port, error)) < 0)
    return NULL;

  ShoalRpcListener *rpc = g_new0 (ShoalRpcListener, 1);
  rpc->name = g_strdup (name);
  rpc->processor = g_object_ref (processor);
  rpc->max_message = opts->max_message_bytes;
  rpc->io_timeout_ms = opts->io_timeout_ms;
  rpc->max_connections = MAX (opts->max_connections, 0);
  rpc->idle_timeout_ms = MAX (opts->idle_timeout_ms, 0);
  rpc->listen_fd = fd;
  rpc->port = port;
  rpc->wake[0] = rpc->wake[1] = -1;
  g_mutex_init (&rpc->lock);
  if (pipe2 (rpc->wake, O_CLOEXEC) < 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "%s: pipe: %s", name, g_strerror (errno));
      shoal_rpc_listener_stop (rpc);
      return NULL;
    }
  GError *e = NULL;
  rpc->acceptor = g_thread_try_new ("shoal-rpc-accept", accept_main, rpc, &e);
  if (rpc->acceptor == NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "%s: no accept thread: %s", name, e->message);
      g_error_free (e);
      shoal_rpc_listener_stop (rpc);
      return NULL;
    }
  return rpc;
}

int
shoal_rpc_listener_port (ShoalRpcListener *rpc)
{
  return rpc->port;
}

gboolean
shoal_rpc_listener_stopping (ShoalRpcListener *rpc)
{
  return g_atomic_int_get (&rpc->stopping) != 0;
}

void
shoal_rpc_listener_stop (ShoalRpcListener *rpc)
{
  if (rpc == NULL)
    return;
  g_atomic_int_set (&rpc->stopping, 1);
  if (rpc->wake[1] >= 0 && write (rpc->wake[1], "x", 1) < 0)
    g_warning ("%s: waking the server threads: %s", rpc->name, g_strerror (errno));
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
  if (rpc->wake[0] >= 0)
    {
      close (rpc->wake[0]);
      close (rpc->wake[1]);
    }
  g_object_unref (rpc->processor);
  g_mutex_clear (&rpc->lock);
  g_free (rpc->name);
  g_free (rpc);
}
