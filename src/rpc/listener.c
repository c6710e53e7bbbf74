/* The poller and the pool of a Thrift service; see rpc/listener.h.
 *
 * Who owns a connection: while it is idle, the poller (it sits in
 * rpc->idle and is armed in the epoll set, one-shot); from the moment
 * its next message begins until its reply is written, the one pool
 * thread serving it.  The hand-overs go through rpc->lock (the idle
 * queue), so the fields the serving thread wrote are seen by the poller
 * and the next thread.  A connection whose next message is already in
 * its socket's read-ahead buffer (the client sent it with the last one)
 * would never wake the poller: the thread serves it at once instead.
 *
 * After a reply the thread stays with its connection a while for the
 * next call (next_call_soon): a worker's calls come in runs, one per
 * slice and step, and a call that finds its thread waiting saves two
 * thread hand-overs (the poller's wake-up, then a pool thread's).  It
 * stays only while no call waits for a thread: the poller keeps
 * backlog_fd readable whenever its last hand-outs left calls queued, and
 * every waiting thread then gives its connection back at once. */
#include "rpc/listener.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/error.h"
#include "core/thread_start.h"
#include "rpc/refusals.h"
#include "rpc/thread_pool.h"
#include "rpc/thrift_protocol.h"
#include "rpc/thrift_socket.h"

#define LINGER_US (10 * G_USEC_PER_SEC)   /* a pool thread beyond `threads` idle this long ends */
#define GROW_AFTER_US (5 * 1000)           /* beyond `threads`: a call waiting this long for a thread gets one */
#define ACCEPT_PAUSE_US (100 * 1000)      /* after accept failed for want of descriptors */
#define EVENTS 64                          /* epoll events taken per wake-up */

typedef struct {
  ShoalRpcListener *rpc;
  int fd;                   /* the socket until the connection ends, then -1; under rpc->lock */
  char *peer;               /* "host:port" */
  ShoalThriftSocket *sock;
  ShoalThriftProtocol *protocol;
  GList open_link;          /* in rpc->open, under rpc->lock */
  GList idle_link;          /* in rpc->idle while the poller holds it, under rpc->lock */
  gboolean idle;            /* idle_link is in rpc->idle, under rpc->lock */
  gint64 idle_since;        /* monotonic us it went idle, under rpc->lock */
  GList unproven_link;      /* in rpc->unproven until a call proved the peer (shoal_rpc_listener_proven) */
  gboolean unproven;        /* unproven_link is in rpc->unproven, under rpc->lock */
  gint64 accepted_at;       /* monotonic us */
  gpointer data;            /* shoal_rpc_listener_set_conn_data; only its owner (see above) */
  GDestroyNotify destroy;
  GDestroyNotify after;     /* shoal_rpc_listener_after_reply; only the thread serving it */
  gpointer after_data;
} Conn;

struct _ShoalRpcListener {
  char *name;
  ThriftProcessor *processor;   /* a reference */
  size_t max_message;
  gint64 io_timeout_ms;
  int next_call_wait_ms;        /* see next_call_soon */
  gboolean threads_end_when_idle;  /* shoal_rpc_listener_reap counts the pool's threads */
  int max_connections;      /* 0: no cap */
  gint64 idle_timeout_ms;   /* 0: none */
  int max_unproven;         /* 0: connections are not told apart */
  gint64 unproven_timeout_ms;  /* 0: none */
  gint64 evicted;           /* unproven connections closed for newcomers since the last log line (poller only) */
  gint64 evicted_logged_at; /* monotonic us of that line; 0: never */
  gint64 refused;           /* connections refused at the cap since the last log line (poller only) */
  gint64 refused_logged_at; /* monotonic us of that line; 0: never */
  gint64 accept_paused_until; /* monotonic us; 0: accepting (poller only) */
  gint64 grow_at;           /* monotonic us the pool wants shoal_thread_pool_grow (poller only) */
  int listen_fd;            /* non-blocking */
  int port;
  int wake[2];              /* a pipe written once at stop; the poller watches wake[0] */
  int backlog_fd;           /* an eventfd, readable while calls wait for a thread (poller writes) */
  gboolean backlog;         /* backlog_fd is readable (poller only) */
  int epoll_fd;
  GThread *poller;
  ShoalThreadPool *pool;

  GMutex lock;
  GQueue open;              /* every connection not yet freed (Conn.open_link), under lock */
  guint closing;            /* connections taken out of `open` and being freed, under lock */
  GQueue idle;              /* the poller's connections (Conn.idle_link), oldest idle first, under lock */
  GQueue unproven;          /* connections no call proved yet (Conn.unproven_link), oldest first, under lock */
  gint stopping;            /* atomic */
  ShoalRefusals *refusals;  /* what was refused, per peer host (its own lock) */
};

/* The connection whose call the calling thread serves: its peer for logs, its data. */
static GPrivate current_conn;

const char *
shoal_rpc_listener_peer (void)
{
  Conn *c = g_private_get (&current_conn);
  return c != NULL ? c->peer : "?";
}

void
shoal_rpc_listener_refused (const char *why)
{
  Conn *c = g_private_get (&current_conn);
  if (c != NULL)
    shoal_refusals_note (c->rpc->refusals, c->peer, why);
}

char *
shoal_rpc_listener_refusals (ShoalRpcListener *rpc, const char *const *addresses)
{
  return shoal_refusals_describe (rpc->refusals, addresses);
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
  if (c == NULL)
    {
      pin->release (pin->data);
      return;
    }
  shoal_thrift_protocol_set_source (c->protocol, buf, len, pin);
}

static void
run_after_reply (Conn *c)
{
  shoal_thrift_protocol_clear_source (c->protocol);
  if (c->after != NULL)
    {
      GDestroyNotify func = c->after;
      c->after = NULL;
      func (c->after_data);
    }
}

void
shoal_rpc_listener_proven (void)
{
  Conn *c = g_private_get (&current_conn);
  if (c == NULL)
    return;
  ShoalRpcListener *rpc = c->rpc;
  g_mutex_lock (&rpc->lock);
  if (c->unproven)
    g_queue_unlink (&rpc->unproven, &c->unproven_link);
  c->unproven = FALSE;
  g_mutex_unlock (&rpc->lock);
}

gpointer
shoal_rpc_listener_conn_data (void)
{
  Conn *c = g_private_get (&current_conn);
  return c != NULL ? c->data : NULL;
}

/* Closes and frees a connection that nobody else holds (not idle, not
 * being served by another thread). */
static void
conn_end (ShoalRpcListener *rpc, Conn *c)
{
  conn_data_clear (c);
  g_mutex_lock (&rpc->lock);
  g_queue_unlink (&rpc->open, &c->open_link);
  if (c->unproven)
    g_queue_unlink (&rpc->unproven, &c->unproven_link);
  c->unproven = FALSE;
  rpc->closing++;
  if (c->fd >= 0)
    epoll_ctl (rpc->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);   /* it may never have been added */
  c->fd = -1;
  thrift_transport_close (shoal_thrift_socket_transport (c->sock), NULL);
  g_mutex_unlock (&rpc->lock);
  g_object_unref (c->protocol);
  g_object_unref (c->sock);
  g_free (c->peer);
  g_free (c);
  g_mutex_lock (&rpc->lock);
  rpc->closing--;
  g_mutex_unlock (&rpc->lock);
}

/* Gives the connection to the poller until its next message begins
 * (op: EPOLL_CTL_ADD for a new one, EPOLL_CTL_MOD to re-arm).  Under the
 * lock, so that the poller cannot time it out and close its descriptor
 * between the two steps.  The caller must not touch c afterwards. */
static void
conn_watch (ShoalRpcListener *rpc, Conn *c, int op)
{
  struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT, .data.ptr = c };

  g_mutex_lock (&rpc->lock);
  c->idle_since = g_get_monotonic_time ();
  g_queue_push_tail_link (&rpc->idle, &c->idle_link);
  c->idle = TRUE;
  int r = epoll_ctl (rpc->epoll_fd, op, c->fd, &ev);
  int err = errno;
  if (r < 0)
    {
      g_queue_unlink (&rpc->idle, &c->idle_link);
      c->idle = FALSE;
    }
  g_mutex_unlock (&rpc->lock);
  if (r < 0)
    {
      g_warning ("%s: watching the connection from %s: %s; closing it", rpc->name, c->peer, g_strerror (err));
      conn_end (rpc, c);
    }
}

/* After a reply: TRUE when the connection's next call begins within
 * next_call_wait_ms, while no other call waits for a thread (FALSE at once
 * when one starts to wait, or the listener stops).  A client's calls
 * come back to back (a push, then the pull of the same slice; the
 * slices of a step, then the next step's): the thread that is still here
 * serves the next one without the two hand-overs through the poller
 * (about 20% of a 64 KiB push+pull on loopback, and 5% of a 1 MiB one
 * whose first call comes after a pause; bench/rpc.sh). */
static gboolean
next_call_soon (ShoalRpcListener *rpc, Conn *c)
{
  if (shoal_thread_pool_unclaimed (rpc->pool) > 0)
    return FALSE;
  struct pollfd p[3] = { { c->fd, POLLIN, 0 }, { rpc->wake[0], POLLIN, 0 }, { rpc->backlog_fd, POLLIN, 0 } };
  if (poll (p, 3, rpc->next_call_wait_ms) <= 0 || p[1].revents != 0 || p[2].revents != 0
      || !(p[0].revents & POLLIN))
    return FALSE;
  guint8 byte;
  return recv (c->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

/* A pool thread: the connection's next message has begun; serves it
 * (and any further one already read ahead, or arriving at once), then
 * gives the connection back to the poller or ends it. */
static void
serve (gpointer item, gpointer data)
{
  Conn *c = item;
  ShoalRpcListener *rpc = data;
  ThriftProtocol *protocol = shoal_thrift_protocol_base (c->protocol);

  do
    {
      GError *e = NULL;
      g_private_set (&current_conn, c);
      gboolean ok = thrift_processor_process (rpc->processor, protocol, protocol, &e);
      run_after_reply (c);
      g_private_set (&current_conn, NULL);
      if (!ok)
        {
          if (!g_atomic_int_get (&rpc->stopping))
            {
              const char *why = e != NULL ? e->message : "the call failed";
              shoal_refusals_note (rpc->refusals, c->peer, why);
              g_message ("%s: dropping the connection from %s: %s", rpc->name, c->peer, why);
            }
          g_clear_error (&e);
          conn_end (rpc, c);
          return;
        }
      if (g_atomic_int_get (&rpc->stopping))
        {
          conn_end (rpc, c);
          return;
        }
    }
  while (shoal_thrift_socket_buffered (c->sock) > 0 || next_call_soon (rpc, c));
  conn_watch (rpc, c, EPOLL_CTL_MOD);
}

/* A queued connection the pool never served (it is stopping). */
static void
drop (gpointer item)
{
  Conn *c = item;
  conn_end (c->rpc, c);
}

/* The poller, after each batch of events: makes backlog_fd readable
 * while calls wait for a busy thread (the threads waiting for their
 * connections' next calls then give them back and take the queued
 * ones), and not otherwise. */
static void
backlog_update (ShoalRpcListener *rpc)
{
  gboolean waiting = shoal_thread_pool_unclaimed (rpc->pool) > 0;
  guint64 v = 1;
  if (waiting == rpc->backlog)
    return;
  if ((waiting ? write (rpc->backlog_fd, &v, sizeof v) : read (rpc->backlog_fd, &v, sizeof v)) < 0
      && errno != EAGAIN)
    g_warning ("%s: the backlog signal: %s", rpc->name, g_strerror (errno));
  rpc->backlog = waiting;
}

static void
dispatch (ShoalRpcListener *rpc, Conn *c)
{
  GError *e = NULL;
  if (!shoal_thread_pool_push (rpc->pool, c, &e))
    {
      if (!g_atomic_int_get (&rpc->stopping))
        g_warning ("%s: the call from %s cannot be served: %s; closing the connection", rpc->name, c->peer,
                   e->message);
      g_error_free (e);
      conn_end (rpc, c);
    }
}

/* The poller: the epoll set said something about an idle connection. */
static void
conn_event (ShoalRpcListener *rpc, Conn *c)
{
  g_mutex_lock (&rpc->lock);
  g_queue_unlink (&rpc->idle, &c->idle_link);
  c->idle = FALSE;
  g_mutex_unlock (&rpc->lock);
  guint8 byte;
  gssize n;
  while ((n = recv (c->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT)) < 0 && errno == EINTR)
    ;
  if (n > 0)
    dispatch (rpc, c);
  else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
    conn_watch (rpc, c, EPOLL_CTL_MOD);   /* nothing after all */
  else
    conn_end (rpc, c);                    /* closed by the peer, or broken */
}

/* The poller: closes the connections idle for idle_timeout_ms. */
static void
expire_idle (ShoalRpcListener *rpc)
{
  if (rpc->idle_timeout_ms <= 0)
    return;
  gint64 limit = g_get_monotonic_time () - rpc->idle_timeout_ms * 1000;
  GPtrArray *expired = g_ptr_array_new ();
  g_mutex_lock (&rpc->lock);
  while (rpc->idle.head != NULL && ((Conn *) rpc->idle.head->data)->idle_since <= limit)
    {
      Conn *c = rpc->idle.head->data;
      g_queue_unlink (&rpc->idle, &c->idle_link);
      c->idle = FALSE;
      g_ptr_array_add (expired, c);
    }
  g_mutex_unlock (&rpc->lock);
  for (guint i = 0; i < expired->len; i++)
    {
      Conn *c = expired->pdata[i];
      g_debug ("%s: closing the connection from %s: idle for %" G_GINT64_FORMAT " ms", rpc->name, c->peer,
               rpc->idle_timeout_ms);
      conn_end (rpc, c);
    }
  g_ptr_array_free (expired, TRUE);
}

/* Takes an idle connection from the poller's set, to end it.  Under the lock. */
static void
take_idle (ShoalRpcListener *rpc, Conn *c)
{
  g_queue_unlink (&rpc->idle, &c->idle_link);
  c->idle = FALSE;
  epoll_ctl (rpc->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
}

/* The poller: closes the idle connections that proved nothing within
 * unproven_timeout_ms of their accept (one in a call ends with it, when
 * its call fails, or stays if the call proves it). */
static void
expire_unproven (ShoalRpcListener *rpc)
{
  if (rpc->unproven_timeout_ms <= 0)
    return;
  gint64 limit = g_get_monotonic_time () - rpc->unproven_timeout_ms * 1000;
  GPtrArray *expired = g_ptr_array_new ();
  g_mutex_lock (&rpc->lock);
  for (GList *l = rpc->unproven.head; l != NULL && ((Conn *) l->data)->accepted_at <= limit; l = l->next)
    {
      Conn *c = l->data;
      if (!c->idle)
        continue;
      take_idle (rpc, c);
      g_ptr_array_add (expired, c);
    }
  g_mutex_unlock (&rpc->lock);
  for (guint i = 0; i < expired->len; i++)
    {
      Conn *c = expired->pdata[i];
      g_debug ("%s: closing the connection from %s: no call with the job token within %" G_GINT64_FORMAT " ms",
               rpc->name, c->peer, rpc->unproven_timeout_ms);
      conn_end (rpc, c);
    }
  g_ptr_array_free (expired, TRUE);
}

/* The poller, before taking a new connection (after the batch's other
 * events: it frees a connection): while unproven connections fill their
 * share (max_unproven), or every place is taken, the oldest idle
 * unproven one makes room - so connections that never show the job
 * token cannot keep the job's own out. */
static void
evict_unproven (ShoalRpcListener *rpc)
{
  if (rpc->max_unproven <= 0)
    return;
  Conn *victim = NULL;
  g_mutex_lock (&rpc->lock);
  gboolean full = (rpc->max_connections > 0 && g_queue_get_length (&rpc->open) >= (guint) rpc->max_connections)
                  || g_queue_get_length (&rpc->unproven) >= (guint) rpc->max_unproven;
  for (GList *l = rpc->unproven.head; full && victim == NULL && l != NULL; l = l->next)
    if (((Conn *) l->data)->idle)
      victim = l->data;
  if (victim != NULL)
    take_idle (rpc, victim);
  g_mutex_unlock (&rpc->lock);
  if (victim == NULL)
    return;
  rpc->evicted++;
  gint64 now = g_get_monotonic_time ();
  if (rpc->evicted_logged_at == 0 || now - rpc->evicted_logged_at >= 60 * G_USEC_PER_SEC)
    {
      g_warning ("%s: port %d: connections that made no call with the job token fill their share (%d): "
                 "closed the oldest, from %s, for a new one (%" G_GINT64_FORMAT " since the last such line)",
                 rpc->name, rpc->port, rpc->max_unproven, victim->peer, rpc->evicted);
      rpc->evicted = 0;
      rpc->evicted_logged_at = now;
    }
  conn_end (rpc, victim);
}

/* The poller's wait in ms (-1: none): until the oldest idle connection
 * times out, accepting resumes, or a call waited long enough for a
 * thread that the pool should grow.  With no idle connection it waits at
 * most idle_timeout_ms: one that goes idle meanwhile times out later. */
static int
poll_timeout (ShoalRpcListener *rpc)
{
  gint64 now = g_get_monotonic_time (), until = G_MAXINT64;
  if (rpc->idle_timeout_ms > 0)
    {
      g_mutex_lock (&rpc->lock);
      until = rpc->idle.head != NULL ? ((Conn *) rpc->idle.head->data)->idle_since + rpc->idle_timeout_ms * 1000
                                     : now + rpc->idle_timeout_ms * 1000;
      g_mutex_unlock (&rpc->lock);
    }
  if (rpc->unproven_timeout_ms > 0)
    {
      g_mutex_lock (&rpc->lock);
      if (rpc->unproven.head != NULL)
        until = MIN (until, ((Conn *) rpc->unproven.head->data)->accepted_at + rpc->unproven_timeout_ms * 1000);
      g_mutex_unlock (&rpc->lock);
    }
  if (rpc->accept_paused_until > 0)
    until = MIN (until, rpc->accept_paused_until);
  until = MIN (until, rpc->grow_at);
  if (until == G_MAXINT64)
    return -1;
  return (int) CLAMP ((until - now + 999) / 1000, 0, G_MAXINT);
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
  guint open = g_queue_get_length (&rpc->open);
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

/* Listening on or off (out of descriptors: let connections end first). */
static void
accept_pause (ShoalRpcListener *rpc, gboolean pause)
{
  struct epoll_event ev = { .events = pause ? 0 : EPOLLIN, .data.ptr = &rpc->listen_fd };
  if (epoll_ctl (rpc->epoll_fd, EPOLL_CTL_MOD, rpc->listen_fd, &ev) < 0)
    g_warning ("%s: port %d: %s accepting: %s", rpc->name, rpc->port, pause ? "pausing" : "resuming",
               g_strerror (errno));
  rpc->accept_paused_until = pause ? g_get_monotonic_time () + ACCEPT_PAUSE_US : 0;
}

/* The poller: takes the connections waiting on the listening socket
 * (a bounded number per wake-up, so idle connections are not kept
 * waiting by a flood). */
static void
accept_some (ShoalRpcListener *rpc)
{
  for (int k = 0; k < EVENTS; k++)
    {
      struct sockaddr_storage addr;
      socklen_t alen = sizeof addr;
      GError *e = NULL;
      int fd = accept4 (rpc->listen_fd, (struct sockaddr *) &addr, &alen, SOCK_CLOEXEC);
      if (fd < 0)
        {
          if (errno == EAGAIN || errno == EWOULDBLOCK)
            return;
          if (errno == EINTR || errno == ECONNABORTED)
            continue;
          g_warning ("%s: accepting on port %d: %s", rpc->name, rpc->port, g_strerror (errno));
          accept_pause (rpc, TRUE);
          return;
        }
      evict_unproven (rpc);
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
      c->protocol = shoal_thrift_protocol_new (shoal_thrift_socket_transport (c->sock));
      c->open_link.data = c;
      c->idle_link.data = c;
      c->unproven_link.data = c;
      c->accepted_at = g_get_monotonic_time ();
      g_mutex_lock (&rpc->lock);
      g_queue_push_tail_link (&rpc->open, &c->open_link);
      if (rpc->max_unproven > 0)
        {
          g_queue_push_tail_link (&rpc->unproven, &c->unproven_link);
          c->unproven = TRUE;
        }
      g_mutex_unlock (&rpc->lock);
      conn_watch (rpc, c, EPOLL_CTL_ADD);
    }
}

/* GLib gives every thread a slice cache (2032 bytes, held only in the
 * thread's GPrivate slot, freed when the thread ends) on its first
 * g_slice call, here the first accept.  Taking it at the thread's start
 * puts that one allocation under this name: LeakSanitizer, in the fuzz
 * harness that restarts servers, now and then reported a live poller's
 * cache as lost (GLib's own valgrind suppressions list the allocation,
 * g_private_set_alloc0, as a known per-thread one), and fuzz/lsan.supp
 * can name exactly it and nothing else the poller allocates. */
static void __attribute__ ((noinline))
shoal_listener_take_slice_cache (void)
{
  g_slice_free1 (sizeof (gpointer), g_slice_alloc (sizeof (gpointer)));
}

static gpointer
poller_main (gpointer data)
{
  ShoalRpcListener *rpc = data;
  struct epoll_event ev[EVENTS];

  shoal_listener_take_slice_cache ();
  while (!g_atomic_int_get (&rpc->stopping))
    {
      int n = epoll_wait (rpc->epoll_fd, ev, EVENTS, poll_timeout (rpc));
      if (n < 0)
        {
          if (errno == EINTR)
            continue;
          g_warning ("%s: polling port %d: %s; no more calls served", rpc->name, rpc->port, g_strerror (errno));
          break;
        }
      gboolean accepting = FALSE;
      for (int i = 0; i < n && !g_atomic_int_get (&rpc->stopping); i++)
        {
          if (ev[i].data.ptr == &rpc->wake[0])
            break;   /* stopping */
          else if (ev[i].data.ptr == &rpc->listen_fd)
            accepting = TRUE;
          else
            conn_event (rpc, ev[i].data.ptr);
        }
      /* last: making room may end a connection this batch had an event for */
      if (accepting && !g_atomic_int_get (&rpc->stopping))
        accept_some (rpc);
      if (g_atomic_int_get (&rpc->stopping))
        break;
      rpc->grow_at = shoal_thread_pool_grow (rpc->pool);
      backlog_update (rpc);
      expire_idle (rpc);
      expire_unproven (rpc);
      if (rpc->accept_paused_until > 0 && g_get_monotonic_time () >= rpc->accept_paused_until)
        accept_pause (rpc, FALSE);
      shoal_thread_pool_reap (rpc->pool);
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
  rpc->next_call_wait_ms = (int) CLAMP (opts->next_call_wait_ms > 0 ? opts->next_call_wait_ms
                                                                   : SHOAL_RPC_LISTENER_NEXT_CALL_MS, 1, G_MAXINT);
  rpc->max_connections = MAX (opts->max_connections, 0);
  rpc->threads_end_when_idle = opts->threads_end_when_idle;
  rpc->idle_timeout_ms = MAX (opts->idle_timeout_ms, 0);
  rpc->max_unproven = MAX (opts->max_unproven, 0);
  rpc->unproven_timeout_ms = rpc->max_unproven > 0 ? MAX (opts->unproven_timeout_ms, 0) : 0;
  rpc->listen_fd = fd;
  rpc->port = port;
  rpc->wake[0] = rpc->wake[1] = rpc->epoll_fd = rpc->backlog_fd = -1;
  rpc->grow_at = G_MAXINT64;
  g_mutex_init (&rpc->lock);
  rpc->refusals = shoal_refusals_new ();
  g_queue_init (&rpc->open);
  g_queue_init (&rpc->idle);
  g_queue_init (&rpc->unproven);
  /* the pool never needs more threads than connections: each carries one
   * call at a time (listener.h says why it must be able to grow that far) */
  ShoalThreadPoolOptions po = {
    .name = "shoal-rpc-call",
    .keep = opts->threads_end_when_idle ? 0 : opts->threads > 0 ? opts->threads : SHOAL_RPC_LISTENER_THREADS,
    .max = rpc->max_connections,
    .linger_us = opts->threads_end_when_idle ? 1000 : LINGER_US,
    .grow_after_us = opts->threads_end_when_idle ? 0 : GROW_AFTER_US,
  };
  rpc->pool = shoal_thread_pool_new (&po, serve, drop, rpc);

  const char *what = NULL;
  if (fcntl (fd, F_SETFL, fcntl (fd, F_GETFL) | O_NONBLOCK) < 0)
    what = "O_NONBLOCK";
  else if (pipe2 (rpc->wake, O_CLOEXEC) < 0)
    what = "pipe";
  else if ((rpc->backlog_fd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
    what = "eventfd";
  else if ((rpc->epoll_fd = epoll_create1 (EPOLL_CLOEXEC)) < 0)
    what = "epoll_create1";
  else
    {
      struct epoll_event wake = { .events = EPOLLIN, .data.ptr = &rpc->wake[0] };
      struct epoll_event listen = { .events = EPOLLIN, .data.ptr = &rpc->listen_fd };
      if (epoll_ctl (rpc->epoll_fd, EPOLL_CTL_ADD, rpc->wake[0], &wake) < 0
          || epoll_ctl (rpc->epoll_fd, EPOLL_CTL_ADD, fd, &listen) < 0)
        what = "epoll_ctl";
    }
  if (what != NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "%s: %s:%d: %s: %s", name, address, port, what,
                   g_strerror (errno));
      shoal_rpc_listener_stop (rpc);
      return NULL;
    }
  rpc->poller = shoal_thread_start ("shoal-rpc-poll", poller_main, rpc, error);
  if (rpc->poller == NULL)
    {
      g_prefix_error (error, "%s: ", name);
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

guint
shoal_rpc_listener_reap (ShoalRpcListener *rpc)
{
  shoal_thread_pool_reap (rpc->pool);
  g_mutex_lock (&rpc->lock);
  guint open = g_queue_get_length (&rpc->open) + rpc->closing;
  g_mutex_unlock (&rpc->lock);
  return open + (rpc->threads_end_when_idle ? shoal_thread_pool_threads (rpc->pool) : 0);
}

guint
shoal_rpc_listener_threads (ShoalRpcListener *rpc)
{
  return shoal_thread_pool_threads (rpc->pool);
}

void
shoal_rpc_listener_stop (ShoalRpcListener *rpc)
{
  if (rpc == NULL)
    return;
  g_atomic_int_set (&rpc->stopping, 1);
  if (rpc->wake[1] >= 0 && write (rpc->wake[1], "x", 1) < 0)
    g_warning ("%s: waking the poller: %s", rpc->name, g_strerror (errno));
  if (rpc->poller != NULL)
    g_thread_join (rpc->poller);   /* no connection is accepted or handed out after this */

  /* calls blocked reading or writing a message fail at once */
  g_mutex_lock (&rpc->lock);
  for (GList *l = rpc->open.head; l != NULL; l = l->next)
    {
      Conn *c = l->data;
      if (c->fd >= 0)
        shutdown (c->fd, SHUT_RDWR);
    }
  g_mutex_unlock (&rpc->lock);
  /* waits for the calls in progress; each ends its connection */
  shoal_thread_pool_free (rpc->pool);
  /* the idle ones, nobody's now */
  while (rpc->open.head != NULL)
    conn_end (rpc, rpc->open.head->data);

  close (rpc->listen_fd);
  if (rpc->epoll_fd >= 0)
    close (rpc->epoll_fd);
  if (rpc->backlog_fd >= 0)
    close (rpc->backlog_fd);
  if (rpc->wake[0] >= 0)
    {
      close (rpc->wake[0]);
      close (rpc->wake[1]);
    }
  g_object_unref (rpc->processor);
  g_mutex_clear (&rpc->lock);
  shoal_refusals_free (rpc->refusals);
  g_free (rpc->name);
  g_free (rpc);
}
