/* Thrift c_glib pieces shoal needs that the library (0.17) lacks or gets
 * wrong; used by both ends of the parameter service and, the protocol, by
 * the Record codec (data/record.c).
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
 * SO_SNDTIMEO fire.
 *
 * ShoalThriftProtocol is the binary protocol hardened for bytes from the
 * network: strict message headers only, strings and binary fields bounded
 * by the bytes the message may still hold (the stock reader allocates
 * whatever length garbage declares), nesting at most 32 deep, no field
 * repeated inside one struct (the generated readers mishandle repeats),
 * known field and container element types only, container counts bounded
 * by the bytes their elements take at the fewest, and optionally one list
 * field whose element type must be the schema's (see
 * shoal_thrift_protocol_expect_list).  A "sink" lets one expected binary
 * field of a reply land directly in caller memory (see
 * shoal_thrift_protocol_set_sink). */
#ifndef SHOAL_THRIFT_UTIL_H
#define SHOAL_THRIFT_UTIL_H

#include <glib.h>
#include <stddef.h>

#include <thrift/c_glib/protocol/thrift_protocol.h>
#include <thrift/c_glib/transport/thrift_transport.h>

G_BEGIN_DECLS

/* Registers the thrift library's and these types once (thread-safe).
 * Generated and library get_type functions are not: call this (and
 * g_type_ensure the generated types you use) before starting threads. */
void shoal_thrift_types_init (void);

/* Socket options every RPC socket gets: TCP_NODELAY (without it small
 * calls stall ~40 ms on delayed ACKs), SO_RCVTIMEO and SO_SNDTIMEO of
 * timeout_ms (> 0), close-on-exec.  Fails with errno's message. */
gboolean shoal_socket_tune (int fd, gint64 timeout_ms, GError **error);

/* ---- transport ---------------------------------------------------------- */

typedef struct _ShoalThriftSocket ShoalThriftSocket;

/* Wraps the connected socket `fd`, which the transport owns from now on
 * (closed by thrift_transport_close or when the object goes).  Messages
 * read are limited to max_message bytes; timeout_ms is what the socket's
 * timeouts were set to (for error messages only).  Unref when done. */
ShoalThriftSocket *shoal_thrift_socket_new (int fd, size_t max_message, gint64 timeout_ms);
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

/* Between calls, without waiting: TRUE when the connection is still
 * usable, FALSE when the peer closed it or sent bytes nobody asked for. */
gboolean shoal_thrift_socket_idle_ok (ShoalThriftSocket *sock);

/* ---- protocol ----------------------------------------------------------- */

typedef struct _ShoalThriftProtocol ShoalThriftProtocol;

/* A binary protocol (strict read and write) over `transport`, whose
 * checkReadBytesAvailable bounds every length read.  Unref when done. */
ShoalThriftProtocol *shoal_thrift_protocol_new (ThriftTransport *transport);
ThriftProtocol *shoal_thrift_protocol_base (ShoalThriftProtocol *protocol);

/* Forgets where a read that failed midway stopped.  Reading a message
 * header does this itself; a reader of bare structs (thrift_struct_read,
 * as the Record codec) calls it before every struct. */
void shoal_thrift_protocol_reset (ShoalThriftProtocol *protocol);

/* From now on a list that is the value of field `fid` of a struct at
 * nesting `depth` (1 = the outermost struct read) must declare elements of
 * `element_type`, or the read fails: the generated readers take a list's
 * elements as the schema says, whatever the list declares, and leak the
 * element being read when the data then ends midway.  depth 0 turns the
 * check off. */
void shoal_thrift_protocol_expect_list (ShoalThriftProtocol *protocol, int depth, int fid,
                                        ThriftType element_type);

/* Arms the sink for the next reply read: a binary field of exactly
 * `len` bytes with field id `fid` in a struct at nesting `depth` (1 = the
 * reply's result struct), whose enclosing field at depth - 1 has id
 * parent_fid (ignored at depth 1), is read into `dst` instead of a new
 * buffer.  The reader is then handed `dst` itself as the field's buffer:
 * the caller must take it back out of the decoded struct
 * (g_byte_array_steal) before that struct is freed.  The sink fires at
 * most once, only in a T_REPLY message, and only at that exact place,
 * which the generated reader never skips.  Disarmed by
 * shoal_thrift_protocol_clear_sink, which says whether it fired. */
void shoal_thrift_protocol_set_sink (ShoalThriftProtocol *protocol, void *dst, guint32 len,
                                     int depth, int fid, int parent_fid);
gboolean shoal_thrift_protocol_clear_sink (ShoalThriftProtocol *protocol);

G_END_DECLS

#endif
