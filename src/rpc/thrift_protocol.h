/* The Thrift binary protocol, hardened.
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
#ifndef SHOAL_THRIFT_PROTOCOL_H
#define SHOAL_THRIFT_PROTOCOL_H

#include <glib.h>

#include <thrift/c_glib/protocol/thrift_protocol.h>
#include <thrift/c_glib/transport/thrift_transport.h>

#include "rpc/thrift_socket.h"

G_BEGIN_DECLS

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

/* The next binary field written whose bytes are exactly buf[0 .. len)
 * goes out through shoal_thrift_socket_write_pinned with `pin` (copied
 * here), which releases it; once only.  Disarmed, releasing the pin if
 * it was not used, by shoal_thrift_protocol_clear_source. */
void shoal_thrift_protocol_set_source (ShoalThriftProtocol *protocol, const void *buf, guint32 len,
                                       const ShoalPinnedBytes *pin);
void shoal_thrift_protocol_clear_source (ShoalThriftProtocol *protocol);

GType shoal_thrift_protocol_get_type (void);

G_END_DECLS

#endif
