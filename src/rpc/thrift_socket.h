/* A Thrift c_glib transport over a connected socket.
 *
 * ShoalThriftSocket replaces ThriftSocket + ThriftBufferedTransport.  The
 * stock pair reads every field with its own recv (the "buffered"
 * transport never reads ahead), calloc's and copies every large read
 * twice, counts no bytes towards the message limit across reads, does not
 * retry EINTR and raises SIGPIPE.  This one reads ahead into a 64 KiB
 * buffer, receives large payloads straight into their destination, sends
 * them straight from their source (writev of the buffered header and the
 * payload), bounds each message's total size, retries EINTR, never
 * raises SIGPIPE, and says "timed out after N s" when SO_RCVTIMEO or
 * SO_SNDTIMEO fire.  Where the process emulates a slow network
 * (rpc/link_limit.h), each socket paces what it sends and delays the end
 * of each message. */
#ifndef SHOAL_THRIFT_SOCKET_H
#define SHOAL_THRIFT_SOCKET_H

#include <glib.h>
#include <stddef.h>

#include <thrift/c_glib/transport/thrift_transport.h>

#include "rpc/tls.h"

G_BEGIN_DECLS

/* Socket options every RPC socket gets: TCP_NODELAY (without it small
 * calls stall ~40 ms on delayed ACKs), SO_RCVTIMEO and SO_SNDTIMEO of
 * timeout_ms (> 0), close-on-exec.  Fails with errno's message. */
gboolean shoal_socket_tune (int fd, gint64 timeout_ms, GError **error);

typedef struct _ShoalThriftSocket ShoalThriftSocket;

/* Wraps the connected socket `fd`, which the transport owns from now on
 * (closed by thrift_transport_close or when the object goes).  Messages
 * read are limited to max_message bytes; timeout_ms is what the socket's
 * timeouts were set to (for error messages only).  Unref when done. */
ShoalThriftSocket *shoal_thrift_socket_new (int fd, size_t max_message, gint64 timeout_ms);
/* The same with tls in place of the process's default (rpc/tls.h): the
 * link runs TLS where shoal_tls_wanted says so; NULL: in clear. */
ShoalThriftSocket *shoal_thrift_socket_new_tls (int fd, size_t max_message, gint64 timeout_ms, ShoalTls *tls);
/* Bytes every ShoalThriftSocket of this process sent and received since
 * it started (both may be NULL): what the process put on the network -
 * param calls, bridge messages, Hogwild deltas, headers included - for
 * metrics.jsonl.  Thread-safe. */
void shoal_thrift_socket_totals (guint64 *sent, guint64 *received);
ThriftTransport *shoal_thrift_socket_transport (ShoalThriftSocket *sock);
/* The socket, or -1 once closed. */
int shoal_thrift_socket_fd (ShoalThriftSocket *sock);

/* Between messages: waits until a message starts (1), the peer closed the
 * connection or wake_fd (-1: none) became readable (0), or an error (-1).
 * Waits forever otherwise: an idle connection is not an error. */
int shoal_thrift_socket_wait_message (ShoalThriftSocket *sock, int wake_fd);
/* The same, giving up after idle_ms of silence (2); idle_ms <= 0: no limit. */
int shoal_thrift_socket_wait_message_for (ShoalThriftSocket *sock, int wake_fd, gint64 idle_ms);

/* Bytes read ahead from the socket and not consumed yet: a next message
 * that arrived with the last one waits here, where polling the socket
 * does not see it. */
gsize shoal_thrift_socket_buffered (ShoalThriftSocket *sock);

/* Between calls, without waiting: TRUE when the connection is still
 * usable, FALSE when the peer closed it or sent bytes nobody asked for. */
gboolean shoal_thrift_socket_idle_ok (ShoalThriftSocket *sock);

GType shoal_thrift_socket_get_type (void);

/* Bytes a writer may read in place only while it holds a pin on them
 * (a slice's values that an update may change, server/rpc_server.c).
 * yield_wanted: whether someone waits to change them; release: the
 * writer reads them no more (called exactly once per write). */
typedef struct {
  gboolean (*yield_wanted) (gpointer data);
  void (*release) (gpointer data);
  gpointer data;
} ShoalPinnedBytes;

/* Writes len bytes of buf (after what is buffered) straight from buf
 * while the pin is held, never blocking on the peer meanwhile: when the
 * socket is full it waits for room in ticks of 1 ms, and once
 * pin->yield_wanted says someone waits, it copies the bytes not yet sent,
 * releases the pin and sends the copy, so that the one waiting waits a
 * tick and a copy at most, never on the peer.  The pin is released
 * before this returns, also on failure.  A transport other than a
 * ShoalThriftSocket, or an emulated link, copies at once. */
gboolean shoal_thrift_socket_write_pinned (ThriftTransport *transport, const guint8 *buf, guint32 len,
                                           const ShoalPinnedBytes *pin, GError **error);

G_END_DECLS

#endif
