/* A Thrift listener: binds an address, accepts connections and serves
 * each on its own thread by looping a ThriftProcessor over it.
 *
 * c_glib ships only a one-connection server whose socket binds every
 * address; this one binds the address asked for, gives every accepted
 * socket TCP_NODELAY and send/receive timeouts (shoal_socket_tune), and
 * reads and writes through ShoalThriftSocket and ShoalThriftProtocol
 * (rpc/thrift_socket.h, rpc/thrift_protocol.h): bounded messages, garbage refused without
 * allocating what it declares.  A bad message closes its connection
 * only; the listener keeps serving.
 *
 * Bounds: at most max_connections connections (so threads) at once; one
 * past the cap is closed as soon as it is accepted, with a log line
 * naming the cap (one a minute while it lasts); connections idle
 * between calls for idle_timeout_ms are closed, freeing their threads.
 *
 * Stopping never waits for a peer: a pipe written at stop wakes every
 * idle connection and the accept loop, and shutdown(2) wakes sockets
 * blocked in the middle of a message.  What a handler does while a call
 * is in progress is its own business: a handler that may block (a pull
 * waiting for a version) looks at shoal_rpc_listener_stopping. */
#ifndef SHOAL_RPC_LISTENER_H
#define SHOAL_RPC_LISTENER_H

#include <glib.h>
#include <stddef.h>

#include <thrift/c_glib/processor/thrift_processor.h>

#include "rpc/thrift_socket.h"

G_BEGIN_DECLS

typedef struct _ShoalRpcListener ShoalRpcListener;

typedef struct {
  const char *bind_address;   /* "127.0.0.1" when NULL */
  int port;                   /* 0: any free port, see shoal_rpc_listener_port */
  size_t max_message_bytes;   /* largest message a connection reads (> 0) */
  gint64 io_timeout_ms;       /* per-socket send/receive timeout (> 0) */
  const char *name;           /* what the logs call it ("rpc") */
  int max_connections;        /* connections kept open at once (each holds a thread); one more is
                               * closed at once and logged; 0: no cap */
  gint64 idle_timeout_ms;     /* a connection silent this long between calls is closed (the
                               * client reconnects at its next call); 0: never */
} ShoalRpcListenerOptions;

/* Binds and starts accepting; every connection runs `processor`
 * (referenced; its handler is called from the connection threads, so it
 * must be thread-safe).  NULL with a SHOAL_ERROR_RPC error naming the
 * address when it cannot be bound or no thread can be started. */
ShoalRpcListener *shoal_rpc_listener_start (ThriftProcessor *processor,
                                            const ShoalRpcListenerOptions *opts, GError **error);
int shoal_rpc_listener_port (ShoalRpcListener *listener);
/* Joins the threads of connections that ended (the accept loop does so at
 * its next connection); returns how many connections are still open.
 * For harnesses that want no thread of a finished connection left
 * running (fuzz/fuzz_param_handler.c). */
guint shoal_rpc_listener_reap (ShoalRpcListener *listener);
/* TRUE once shoal_rpc_listener_stop began: handlers stop waiting. */
gboolean shoal_rpc_listener_stopping (ShoalRpcListener *listener);
/* Stops accepting, wakes and closes every connection, joins its threads
 * and frees the listener.  NULL is ignored. */
void shoal_rpc_listener_stop (ShoalRpcListener *listener);

/* Inside a handler: "host:port" of the peer whose call the calling
 * thread serves, "?" elsewhere.  Borrowed, valid during the call. */
const char *shoal_rpc_listener_peer (void);

/* Inside a handler: state kept with the connection whose call the
 * calling thread serves (a shared-memory region it attached), freed with
 * `destroy` when the connection ends or the data is replaced.  Outside a
 * handler set frees `data` at once and get returns NULL. */
void shoal_rpc_listener_set_conn_data (gpointer data, GDestroyNotify destroy);
gpointer shoal_rpc_listener_conn_data (void);
/* Inside a handler: calls func (data) once the call's reply is written,
 * before the connection reads its next call (a reply sent straight from
 * memory the handler lent it gives the memory back).  One per call;
 * outside a handler it runs at once. */
void shoal_rpc_listener_after_reply (GDestroyNotify func, gpointer data);
/* Inside a handler: the reply's binary field of exactly buf[0 .. len) is
 * sent in place under `pin` (rpc/thrift_socket.h,
 * shoal_thrift_socket_write_pinned), which is released once the field is
 * sent, or when the reply is done without it.  Outside a handler the pin
 * is released at once. */
void shoal_rpc_listener_reply_pinned (const void *buf, guint32 len, const ShoalPinnedBytes *pin);

G_END_DECLS

#endif
