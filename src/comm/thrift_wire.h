/* The group wire (partition/group_wire.h) over Thrift: the processes of a
 * worker group spread over processes send each other messages with the
 * send_bridge call, which puts them into the receiver's ShoalMailbox
 * (served by its rpc_server); a process reads its own mailbox.
 *
 * Each peer has a pool of connections: a sending thread takes an idle one
 * (or connects a new one) and gives it back after the call, so a
 * connection is used by one thread at a time and there are never more
 * connections to a peer than threads that sent to it at once.  A call
 * that failed drops its connection.  Messages to this process itself go
 * straight into the mailbox. */
#ifndef SHOAL_COMM_THRIFT_WIRE_H
#define SHOAL_COMM_THRIFT_WIRE_H

#include <glib.h>

#include "comm/mailbox.h"
#include "server/rpc_client.h"
#include "partition/group_wire.h"

G_BEGIN_DECLS

/* The wire of process `this_proc` of `nprocs` (>= 2) holding worker group
 * `group`.  peers[nprocs] say how to reach each process (host, port,
 * token, timeouts; copied, peers[this_proc] ignored); connect_retries 0
 * means 300 (30 s), since the processes of a job start at different
 * times.  `mailbox` (borrowed, must outlive the wire) is this process's,
 * the one its rpc_server puts send_bridge messages into.  Nothing
 * connects until the first send.  Returns a wire the caller frees with
 * shoal_thrift_wire_free. */
ShoalGroupWire *shoal_thrift_wire_new (int group, int nprocs, int this_proc,
                                       const ShoalRpcClientOptions *peers, ShoalMailbox *mailbox);
/* Closes every connection and frees the wire; no send or recv may be
 * running.  NULL is ignored. */
void shoal_thrift_wire_free (ShoalGroupWire *wire);

G_END_DECLS

#endif
