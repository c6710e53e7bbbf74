/* A socket transport for Thrift c_glib 0.17; thrift_socket.h says what
 * is wrong with the stock one.  With it a large payload crosses user
 * space once per side, like a plain socket: pulling a 16 MiB slice on
 * loopback took 6-8 ms here, against 22-40 ms through ThriftSocket +
 * ThriftBufferedTransport (bench/rpc_throughput.c, a loaded 2-core
 * machine); profiles of the RPC bench show the kernel's socket copies
 * and the server's own work, not this code. */
#include "rpc/thrift_socket.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <thrift/c_glib/thrift.h>
#include <thrift/c_glib/thrift_configuration.h>

#include "core/error.h"
#include "rpc/link_limit.h"
#include "rpc/tls.h"

/* ---- sockets ------------------------------------------------------------ */

gboolean
shoal_socket_tune (int fd, gint64 timeout_ms, GError **error)
{
  int one = 1;
  struct timeval tv = { (time_t) (timeout_ms / 1000), (suseconds_t) ((timeout_ms % 1000) * 1000) };
  const char *what = NULL;

  g_return_val_if_fail (timeout_ms > 0, FALSE);
  if (setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0)
    what = "TCP_NODELAY";
  else if (setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0)
    what = "SO_RCVTIMEO";
  else if (setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) < 0)
    what = "SO_SNDTIMEO";
  else if (fcntl (fd, F_SETFD, FD_CLOEXEC) < 0)
    what = "FD_CLOEXEC";
  if (what != NULL)
    {
      int e = errno;
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "setting %s: %s", what, g_strerror (e));
      return FALSE;
    }
  return TRUE;
}

/* ---- transport ---------------------------------------------------------- */

#define SOCKET_BUF (64 * 1024)

struct _ShoalThriftSocket {
  ThriftTransport parent;
  int fd;
  guint8 *rbuf;          /* read-ahead: rbuf[rpos .. rlen) not yet consumed */
  gsize rpos, rlen;
  guint8 *wbuf;          /* bytes written but not yet sent */
  gsize wlen;
  gsize max_message;
  gsize consumed;        /* bytes read of the current message */
  gint64 timeout_ms;
  ShoalLinkLimiter *limiter;  /* [emulate] bandwidth and latency of this link; NULL: none */
  ShoalTlsLink *tls;         /* a link between hosts under [tls] (rpc/tls.h); NULL: in clear */
};

typedef struct {
  ThriftTransportClass parent;
} ShoalThriftSocketClass;

G_DEFINE_TYPE (ShoalThriftSocket, shoal_thrift_socket, THRIFT_TYPE_TRANSPORT)

static void
socket_error (ShoalThriftSocket *s, int code, int err, const char *doing, GError **error)
{
  if (err == EAGAIN || err == EWOULDBLOCK)
    g_set_error (error, THRIFT_TRANSPORT_ERROR, code, "timed out after %g s",
                 (double) s->timeout_ms / 1000.0);
  else
    g_set_error (error, THRIFT_TRANSPORT_ERROR, code, "%s: %s", doing, g_strerror (err));
}

static gboolean
check_open (ShoalThriftSocket *s, GError **error)
{
  if (s->fd >= 0)
    return TRUE;
  g_set_error (error, THRIFT_TRANSPORT_ERROR, THRIFT_TRANSPORT_ERROR_SOCKET, "connection closed");
  return FALSE;
}

/* The process's socket traffic (shoal_thrift_socket_totals); atomic. */
static gsize bytes_sent, bytes_received;

void
shoal_thrift_socket_totals (guint64 *sent, guint64 *received)
{
  if (sent != NULL)
    *sent = (guint64) g_atomic_pointer_get (&bytes_sent);
  if (received != NULL)
    *received = (guint64) g_atomic_pointer_get (&bytes_received);
}

/* Receives at least one byte, at most len; with MSG_WAITALL in flags
 * all len unless the timeout or a signal comes first. */
static gssize
recv_some (ShoalThriftSocket *s, guint8 *dst, gsize len, int flags, GError **error)
{
  if (s->tls != NULL)
    {
      /* a connection's first read is the accepting side's: it is the TLS server */
      gssize r = shoal_tls_link_ready (s->tls, TRUE, error)
                   ? shoal_tls_link_read (s->tls, dst, len, (flags & MSG_WAITALL) != 0, error) : -1;
      if (r > 0)
        g_atomic_pointer_add (&bytes_received, r);
      return r;
    }
  for (;;)
    {
      gssize r = recv (s->fd, dst, len, flags);
      if (r > 0)
        {
          g_atomic_pointer_add (&bytes_received, (gssize) r);
          return r;
        }
      if (r == 0)
        {
          g_set_error (error, THRIFT_TRANSPORT_ERROR, THRIFT_TRANSPORT_ERROR_RECEIVE,
                       "receive: connection closed by the peer");
          return -1;
        }
      if (errno != EINTR)
        {
          socket_error (s, THRIFT_TRANSPORT_ERROR_RECEIVE, errno, "receive", error);
          return -1;
        }
    }
}

static gboolean
budget (ShoalThriftSocket *s, glong n, GError **error)
{
  if (n >= 0 && (gsize) n <= s->max_message - s->consumed)
    return TRUE;
  g_set_error (error, THRIFT_TRANSPORT_ERROR, THRIFT_TRANSPORT_ERROR_MAX_MESSAGE_SIZE_REACHED,
               "message longer than the limit of %zu bytes (%ld more wanted after %zu)",
               s->max_message, n, s->consumed);
  return FALSE;
}

/* All or nothing, like the library's socket read. */
static gint32
socket_read (ThriftTransport *transport, gpointer buf, guint32 len, GError **error)
{
  ShoalThriftSocket *s = (ShoalThriftSocket *) transport;
  guint8 *dst = buf;
  gsize need = len, have = s->rlen - s->rpos;

  if (!check_open (s, error) || !budget (s, len, error))
    return -1;
  if (have >= need)
    {
      memcpy (dst, s->rbuf + s->rpos, need);
      s->rpos += need;
      s->consumed += len;
      return (gint32) len;
    }
  memcpy (dst, s->rbuf + s->rpos, have);
  dst += have;
  need -= have;
  s->rpos = s->rlen = 0;
  if (need >= SOCKET_BUF / 2)
    {
      /* large: straight into the destination, in as few wake-ups as the
       * kernel allows (one per socket buffer's worth, not per segment) */
      while (need > 0)
        {
          gssize r = recv_some (s, dst, need, MSG_WAITALL, error);
          if (r < 0)
            return -1;
          dst += r;
          need -= (gsize) r;
        }
    }
  else
    {
      while (s->rlen < need)
        {
          gssize r = recv_some (s, s->rbuf + s->rlen, SOCKET_BUF - s->rlen, 0, error);
          if (r < 0)
            return -1;
          s->rlen += (gsize) r;
        }
      memcpy (dst, s->rbuf, need);
      s->rpos = need;
    }
  if (s->consumed == 0 && s->tls == NULL && shoal_tls_looks_like_hello (buf, len))
    {
      /* no Thrift message begins so (as a length it would pass any limit) */
      g_set_error (error, THRIFT_TRANSPORT_ERROR, THRIFT_TRANSPORT_ERROR_RECEIVE,
                   "a TLS hello on a plain connection: the peer runs TLS on this link, this rank does not "
                   "(another [tls] mode: off here, or hosts here and both ends on one host)");
      return -1;
    }
  s->consumed += len;
  return (gint32) len;
}

static gboolean
socket_read_end (ThriftTransport *transport, GError **error)
{
  (void) error;
  ((ShoalThriftSocket *) transport)->consumed = 0;
  return TRUE;
}

/* An emulated link's rate: sends at most the bytes the limiter grants,
 * by cutting the iovec short in a copy (the caller's stays whole). */
static gssize
send_limited (ShoalThriftSocket *s, struct iovec *iov, int iovcnt)
{
  gsize want = 0;
  for (int i = 0; i < iovcnt; i++)
    want += iov[i].iov_len;
  gsize granted = shoal_link_limiter_grant (s->limiter, want);
  struct iovec cut[2];
  int n = 0;
  for (gsize left = granted; n < iovcnt && n < 2 && left > 0; n++)
    {
      cut[n] = iov[n];
      cut[n].iov_len = MIN (cut[n].iov_len, left);
      left -= cut[n].iov_len;
    }
  struct msghdr msg = { .msg_iov = cut, .msg_iovlen = (size_t) n };
  gssize r = sendmsg (s->fd, &msg, MSG_NOSIGNAL);
  shoal_link_limiter_refund (s->limiter, granted - (gsize) MAX (r, 0));
  return r;
}

/* Through TLS: each piece sealed and sent (an emulated link's rate
 * applies to what goes in). */
static gboolean
send_iov_tls (ShoalThriftSocket *s, const struct iovec *iov, int iovcnt, GError **error)
{
  /* a connection's first write is the connecting side's: it is the TLS client */
  if (!shoal_tls_link_ready (s->tls, FALSE, error))
    return FALSE;
  for (int i = 0; i < iovcnt; i++)
    {
      const guint8 *p = iov[i].iov_base;
      gsize left = iov[i].iov_len;
      while (left > 0)
        {
          gboolean limited = s->limiter != NULL && s->limiter->limit.bytes_per_s > 0;
          gsize n = limited ? shoal_link_limiter_grant (s->limiter, left) : left;
          if (!shoal_tls_link_write (s->tls, p, n, error))
            return FALSE;
          g_atomic_pointer_add (&bytes_sent, (gssize) n);
          p += n;
          left -= n;
        }
    }
  return TRUE;
}

static gboolean
send_iov (ShoalThriftSocket *s, struct iovec *iov, int iovcnt, GError **error)
{
  if (s->tls != NULL)
    return send_iov_tls (s, iov, iovcnt, error);
  while (iovcnt > 0)
    {
      struct msghdr msg = { .msg_iov = iov, .msg_iovlen = (size_t) iovcnt };
      gssize r = s->limiter != NULL && s->limiter->limit.bytes_per_s > 0 ? send_limited (s, iov, iovcnt)
                                                                        : sendmsg (s->fd, &msg, MSG_NOSIGNAL);
      if (r < 0)
        {
          if (errno == EINTR)
            continue;
          socket_error (s, THRIFT_TRANSPORT_ERROR_SEND, errno, "send", error);
          return FALSE;
        }
      g_atomic_pointer_add (&bytes_sent, r);
      while (iovcnt > 0 && (gsize) r >= iov->iov_len)
        {
          r -= (gssize) iov->iov_len;
          iov++;
          iovcnt--;
        }
      if (iovcnt > 0)
        {
          iov->iov_base = (guint8 *) iov->iov_base + r;
          iov->iov_len -= (gsize) r;
        }
    }
  return TRUE;
}

static gboolean
send_pending (ShoalThriftSocket *s, GError **error)
{
  struct iovec iov = { s->wbuf, s->wlen };
  gboolean ok = s->wlen == 0 || send_iov (s, &iov, 1, error);
  s->wlen = 0;
  return ok;
}

static gboolean
socket_write (ThriftTransport *transport, const gpointer buf, const guint32 len, GError **error)
{
  ShoalThriftSocket *s = (ShoalThriftSocket *) transport;

  if (!check_open (s, error))
    return FALSE;
  if (len <= SOCKET_BUF - s->wlen)
    {
      memcpy (s->wbuf + s->wlen, buf, len);
      s->wlen += len;
      return TRUE;
    }
  if (len < SOCKET_BUF / 2)
    {
      if (!send_pending (s, error))
        return FALSE;
      memcpy (s->wbuf, buf, len);
      s->wlen = len;
      return TRUE;
    }
  /* large: the buffered head and the payload in one sendmsg, no copy */
  struct iovec iov[2] = { { s->wbuf, s->wlen }, { buf, len } };
  gboolean ok = send_iov (s, s->wlen > 0 ? iov : iov + 1, s->wlen > 0 ? 2 : 1, error);
  s->wlen = 0;
  return ok;
}

#define PIN_TICK_MS 1

/* Advances iov past r bytes sent. */
static void
iov_advance (struct iovec **iov, int *iovcnt, gsize r)
{
  while (*iovcnt > 0 && r >= (*iov)->iov_len)
    {
      r -= (*iov)->iov_len;
      (*iov)++;
      (*iovcnt)--;
    }
  if (*iovcnt > 0)
    {
      (*iov)->iov_base = (guint8 *) (*iov)->iov_base + r;
      (*iov)->iov_len -= r;
    }
}

/* Sends what the link has sealed without waiting on the peer while the
 * pin is held: a full socket is waited on a tick at a time, as the plain
 * path below.  1: all sent; 0: someone waits for the pin (the rest of
 * what is sealed no longer reads the pinned bytes: send it after letting
 * go); -1: failed. */
static int
send_sealed_pinned (ShoalThriftSocket *s, const ShoalPinnedBytes *pin, GError **error)
{
  gint64 stalled_since = 0;
  for (;;)
    {
      int sent = shoal_tls_link_send_sealed (s->tls, FALSE, error);
      if (sent != 0)
        return sent;
      if (pin->yield_wanted (pin->data))
        return 0;
      gint64 now = g_get_monotonic_time ();
      if (stalled_since == 0)
        stalled_since = now;
      else if (s->timeout_ms > 0 && now - stalled_since > s->timeout_ms * 1000)
        {
          socket_error (s, THRIFT_TRANSPORT_ERROR_SEND, EAGAIN, "send", error);
          return -1;
        }
      struct pollfd p = { s->fd, POLLOUT, 0 };
      if (poll (&p, 1, PIN_TICK_MS) < 0 && errno != EINTR)
        {
          socket_error (s, THRIFT_TRANSPORT_ERROR_SEND, errno, "send", error);
          return -1;
        }
    }
}

/* The pinned write through TLS: the buffered head, then buf a piece at a
 * time, each sealed straight from where it lies (a seal reads its piece
 * once, into the link's buffer) and sent as above; once someone waits
 * for the pin, the rest of buf is copied, the pin let go, and what was
 * sealed and the copy sent, waiting on the peer as any write. */
static gboolean
write_pinned_tls (ShoalThriftSocket *s, const guint8 *buf, gsize len, const ShoalPinnedBytes *pin,
                  GError **error)
{
  /* the head (at most SOCKET_BUF) is one piece */
  G_STATIC_ASSERT (SOCKET_BUF <= SHOAL_TLS_SEAL_MAX);
  int sent = check_open (s, error) && shoal_tls_link_ready (s->tls, FALSE, error) ? 1 : -1;
  if (sent == 1 && s->wlen > 0)
    {
      sent = shoal_tls_link_seal (s->tls, s->wbuf, s->wlen, error) ? send_sealed_pinned (s, pin, error) : -1;
      if (sent >= 0)
        g_atomic_pointer_add (&bytes_sent, (gssize) s->wlen);
    }
  s->wlen = 0;
  while (sent == 1 && len > 0 && !pin->yield_wanted (pin->data))
    {
      gsize n = MIN (len, SHOAL_TLS_SEAL_MAX);
      sent = shoal_tls_link_seal (s->tls, buf, n, error) ? send_sealed_pinned (s, pin, error) : -1;
      if (sent >= 0)
        {
          g_atomic_pointer_add (&bytes_sent, (gssize) n);
          buf += n;
          len -= n;
        }
    }
  if (sent < 0 || (sent == 1 && len == 0))
    {
      pin->release (pin->data);
      return sent == 1;
    }
  /* someone waits: buf's rest copied, the pin let go, then what was
   * sealed and the copy sent */
  guint8 *copy = g_memdup2 (buf, len);
  pin->release (pin->data);
  gboolean ok = (sent == 1 || shoal_tls_link_send_sealed (s->tls, TRUE, error) == 1)
                && shoal_tls_link_write (s->tls, copy, len, error);
  if (ok)
    g_atomic_pointer_add (&bytes_sent, (gssize) len);
  g_free (copy);
  return ok;
}

gboolean
shoal_thrift_socket_write_pinned (ThriftTransport *transport, const guint8 *buf, guint32 len,
                                  const ShoalPinnedBytes *pin, GError **error)
{
  ShoalThriftSocket *s = G_TYPE_CHECK_INSTANCE_TYPE (transport, shoal_thrift_socket_get_type ())
                           ? (ShoalThriftSocket *) transport : NULL;
  if (s != NULL && s->limiter == NULL && s->tls != NULL)
    return write_pinned_tls (s, buf, len, pin, error);
  if (s == NULL || s->limiter != NULL)
    {
      /* no pinned path here: send a copy */
      guint8 *copy = g_memdup2 (buf, len);
      pin->release (pin->data);
      gboolean ok = thrift_transport_write (transport, copy, len, error);
      g_free (copy);
      return ok;
    }
  if (!check_open (s, error))
    {
      pin->release (pin->data);
      return FALSE;
    }
  struct iovec iov[2] = { { s->wbuf, s->wlen }, { (void *) buf, len } };
  struct iovec *v = s->wlen > 0 ? iov : iov + 1;
  int cnt = s->wlen > 0 ? 2 : 1;
  gboolean pinned = TRUE, ok = TRUE;
  guint8 *copy = NULL;
  gint64 stalled_since = 0;
  while (cnt > 0)
    {
      if (pinned && pin->yield_wanted (pin->data))
        {
          /* iov[1] holds what is left of buf (all of it while the head is unsent) */
          copy = g_memdup2 (iov[1].iov_base, iov[1].iov_len);
          iov[1].iov_base = copy;
          pin->release (pin->data);
          pinned = FALSE;
        }
      struct msghdr msg = { .msg_iov = v, .msg_iovlen = (size_t) cnt };
      gssize r = sendmsg (s->fd, &msg, MSG_NOSIGNAL | (pinned ? MSG_DONTWAIT : 0));
      if (r < 0 && errno == EINTR)
        continue;
      if (r < 0 && pinned && (errno == EAGAIN || errno == EWOULDBLOCK))
        {
          /* the peer's window is full: wait for room a tick at a time, up
           * to the socket's timeout, looking for one who waits to write */
          gint64 now = g_get_monotonic_time ();
          if (stalled_since == 0)
            stalled_since = now;
          else if (s->timeout_ms > 0 && now - stalled_since > s->timeout_ms * 1000)
            {
              socket_error (s, THRIFT_TRANSPORT_ERROR_SEND, EAGAIN, "send", error);
              ok = FALSE;
              break;
            }
          struct pollfd p = { s->fd, POLLOUT, 0 };
          if (poll (&p, 1, PIN_TICK_MS) < 0 && errno != EINTR)
            {
              socket_error (s, THRIFT_TRANSPORT_ERROR_SEND, errno, "send", error);
              ok = FALSE;
              break;
            }
          continue;
        }
      if (r < 0)
        {
          socket_error (s, THRIFT_TRANSPORT_ERROR_SEND, errno, "send", error);
          ok = FALSE;
          break;
        }
      stalled_since = 0;
      g_atomic_pointer_add (&bytes_sent, r);
      iov_advance (&v, &cnt, (gsize) r);
    }
  s->wlen = 0;
  if (pinned)
    pin->release (pin->data);
  g_free (copy);
  return ok;
}

static gboolean
socket_write_end (ThriftTransport *transport, GError **error)
{
  (void) transport;
  (void) error;
  return TRUE;
}

static gboolean
socket_flush (ThriftTransport *transport, GError **error)
{
  ShoalThriftSocket *s = (ShoalThriftSocket *) transport;

  s->consumed = 0;   /* a message was answered or sent: the next one starts afresh */
  if (!check_open (s, error))
    return FALSE;
  /* an emulated link: the message's last bytes leave `latency` later,
   * and the link is idle once they left */
  if (s->limiter != NULL && s->wlen > 0)
    shoal_link_limiter_latency (s->limiter);
  gboolean ok = send_pending (s, error);
  if (s->limiter != NULL)
    shoal_link_limiter_message_end (s->limiter);
  return ok;
}

static gboolean
socket_is_open (ThriftTransport *transport)
{
  return ((ShoalThriftSocket *) transport)->fd >= 0;
}

static gboolean
socket_open (ThriftTransport *transport, GError **error)
{
  if (socket_is_open (transport))
    return TRUE;
  g_set_error (error, THRIFT_TRANSPORT_ERROR, THRIFT_TRANSPORT_ERROR_CONNECT,
               "a closed ShoalThriftSocket cannot be reopened: make a new one");
  return FALSE;
}

static gboolean
socket_close (ThriftTransport *transport, GError **error)
{
  ShoalThriftSocket *s = (ShoalThriftSocket *) transport;

  (void) error;
  shoal_tls_link_free (s->tls);
  s->tls = NULL;
  if (s->fd >= 0)
    close (s->fd);
  s->fd = -1;
  s->rpos = s->rlen = s->wlen = 0;
  return TRUE;
}

int
shoal_thrift_socket_wait_message (ShoalThriftSocket *s, int wake_fd)
{
  return shoal_thrift_socket_wait_message_for (s, wake_fd, 0);
}

int
shoal_thrift_socket_wait_message_for (ShoalThriftSocket *s, int wake_fd, gint64 idle_ms)
{
  gint64 deadline = idle_ms > 0 ? g_get_monotonic_time () + idle_ms * 1000 : G_MAXINT64;
  for (;;)
    {
      if (s->rpos < s->rlen || (s->tls != NULL && shoal_tls_link_pending (s->tls)))
        return 1;
      if (s->fd < 0)
        return 0;
      struct pollfd p[2] = { { s->fd, POLLIN, 0 }, { wake_fd, POLLIN, 0 } };
      gint64 left_ms = deadline == G_MAXINT64 ? -1 : (deadline - g_get_monotonic_time () + 999) / 1000;
      if (deadline != G_MAXINT64 && left_ms <= 0)
        return 2;
      int r = poll (p, wake_fd >= 0 ? 2 : 1, (int) MIN (left_ms, G_MAXINT));
      if (r < 0)
        {
          if (errno == EINTR)
            continue;
          return -1;
        }
      if (r == 0)
        continue;   /* the deadline, looked at above */
      if (wake_fd >= 0 && (p[1].revents & (POLLIN | POLLHUP | POLLERR)))
        return 0;
      guint8 c;
      gssize n = recv (s->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n > 0)
        return 1;
      if (n == 0)
        return 0;
      if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)
        return -1;
    }
}

static gboolean
socket_peek (ThriftTransport *transport, GError **error)
{
  (void) error;
  return shoal_thrift_socket_wait_message ((ShoalThriftSocket *) transport, -1) == 1;
}

gsize
shoal_thrift_socket_buffered (ShoalThriftSocket *s)
{
  /* TLS reads ahead too: a record not yet handed out counts as a byte */
  return s->rlen - s->rpos + (s->tls != NULL && shoal_tls_link_pending (s->tls) ? 1 : 0);
}

gboolean
shoal_thrift_socket_idle_ok (ShoalThriftSocket *s)
{
  if (s->fd < 0 || s->rpos < s->rlen || (s->tls != NULL && shoal_tls_link_pending (s->tls)))
    return FALSE;
  struct pollfd p = { s->fd, POLLIN, 0 };
  int r;
  while ((r = poll (&p, 1, 0)) < 0 && errno == EINTR)
    ;
  return r == 0;
}

static gboolean
socket_check_available (ThriftTransport *transport, glong n, GError **error)
{
  ShoalThriftSocket *s = (ShoalThriftSocket *) transport;

  /* the binary protocol passes size * -1 for an unknown list element type
   * after setting its own error */
  if (n < 0 && error != NULL && *error != NULL)
    return FALSE;
  return budget (s, n, error);
}

static gboolean
socket_reset_consumed (ThriftTransport *transport, glong size, GError **error)
{
  (void) size;
  (void) error;
  ((ShoalThriftSocket *) transport)->consumed = 0;
  return TRUE;
}

static gboolean
socket_count_consumed (ThriftTransport *transport, glong n, GError **error)
{
  (void) transport;
  (void) n;
  (void) error;
  return TRUE;   /* socket_read counts every byte itself */
}

static gboolean
socket_update_known (ThriftTransport *transport, glong size, GError **error)
{
  (void) transport;
  (void) size;
  (void) error;
  return TRUE;
}

static void
shoal_thrift_socket_init (ShoalThriftSocket *s)
{
  s->fd = -1;
  s->rbuf = g_malloc (SOCKET_BUF);
  s->wbuf = g_malloc (SOCKET_BUF);
  s->max_message = DEFAULT_MAX_MESSAGE_SIZE;
  s->timeout_ms = 0;
}

static void
shoal_thrift_socket_finalize (GObject *object)
{
  ShoalThriftSocket *s = (ShoalThriftSocket *) object;

  socket_close (THRIFT_TRANSPORT (object), NULL);
  g_free (s->limiter);
  g_free (s->rbuf);
  g_free (s->wbuf);
  G_OBJECT_CLASS (shoal_thrift_socket_parent_class)->finalize (object);
}

static void
shoal_thrift_socket_class_init (ShoalThriftSocketClass *klass)
{
  ThriftTransportClass *tc = THRIFT_TRANSPORT_CLASS (klass);

  G_OBJECT_CLASS (klass)->finalize = shoal_thrift_socket_finalize;
  tc->is_open = socket_is_open;
  tc->peek = socket_peek;
  tc->open = socket_open;
  tc->close = socket_close;
  tc->read = socket_read;
  tc->read_all = socket_read;
  tc->read_end = socket_read_end;
  tc->write = socket_write;
  tc->write_end = socket_write_end;
  tc->flush = socket_flush;
  tc->checkReadBytesAvailable = socket_check_available;
  tc->resetConsumedMessageSize = socket_reset_consumed;
  tc->countConsumedMessageBytes = socket_count_consumed;
  tc->updateKnownMessageSize = socket_update_known;
}

ShoalThriftSocket *
shoal_thrift_socket_new (int fd, size_t max_message, gint64 timeout_ms)
{
  return shoal_thrift_socket_new_tls (fd, max_message, timeout_ms, shoal_tls_get_default ());
}

ShoalThriftSocket *
shoal_thrift_socket_new_tls (int fd, size_t max_message, gint64 timeout_ms, ShoalTls *tls)
{
  ShoalThriftSocket *s = g_object_new (shoal_thrift_socket_get_type (), NULL);

  s->fd = fd;
  s->max_message = max_message;
  s->timeout_ms = timeout_ms;
  ShoalLinkLimit limit = shoal_link_limit_get_default ();
  if (limit.bytes_per_s > 0 || limit.latency_us > 0)
    {
      s->limiter = g_new0 (ShoalLinkLimiter, 1);
      shoal_link_limiter_init (s->limiter, &limit, g_get_monotonic_time ());
    }
  if (tls != NULL && shoal_tls_wanted (tls, fd))
    {
      s->tls = shoal_tls_link_new (tls, fd);
      if (s->tls == NULL)
        g_error ("TLS: cannot make a connection's state (out of memory)");
      shoal_tls_link_set_timeout (s->tls, timeout_ms);
    }
  return s;
}

ThriftTransport *
shoal_thrift_socket_transport (ShoalThriftSocket *sock)
{
  return THRIFT_TRANSPORT (sock);
}

int
shoal_thrift_socket_fd (ShoalThriftSocket *sock)
{
  return sock->fd;
}
