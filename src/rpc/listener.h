/* A Thrift listener: binds an address, accepts connections and serves
 * their calls by running a ThriftProcessor on a bounded pool of threads.
 *
 * c_glib ships only a one-connection server whose socket binds every
 * address; this one binds the address asked for, gives every accepted
 * socket TCP_NODELAY and send/receive timeouts (shoal_socket_tune), and
 * reads and writes through ShoalThriftSocket and ShoalThriftProtocol
 * (rpc/thrift_socket.h, rpc/thrift_protocol.h): bounded messages, garbage refused without
 * allocating what it declares.  A bad message closes its connection
 * only; the listener keeps serving.
 *
 * Threads: an idle connection costs no thread.  One poller thread
 * watches the listening socket, the stop pipe and every connection
 * between calls (epoll, one-shot); when a connection's next message
 * begins it hands the connection to the pool, whose thread reads the
 * call, runs the handler, writes the reply, runs the after_reply hook
 * and gives the connection back to the poller.  A connection is served
 * by one thread at a time, so calls on it stay in order and its
 * per-connection data needs no lock.
 *
 * Pool size: `threads` threads stay once started.  A call that finds
 * none free waits for one; after 5 ms without one coming free it gets a
 * thread of its own, up to one per open connection (the cap).  The pool
 * must be able to grow that far: handlers block for as long as the job
 * needs (a Sandblaster pull waits for every group's gradient, an SSP
 * push for the slowest group's clock), so a fixed pool smaller than the
 * number of callers that may wait at once deadlocks the job, and that
 * number depends on clients (one connection per server and worker unit,
 * plus heartbeats, bridges, Hogwild's sync, and a retry's new connection
 * while the old call still waits), not on anything the server can count
 * reliably.  Each connection carries one call at a time, so the pool
 * never needs more threads than connections.  The 5 ms keep a burst of
 * short calls on the `threads` threads; threads beyond `threads` end
 * after 10 s without work.
 *
 * Bounds: at most max_connections connections at once; one past the cap
 * is closed as soon as it is accepted, with a log line naming the cap
 * (one a minute while it lasts); connections idle between calls for
 * idle_timeout_ms are closed.  Token holders first (max_unproven): a
 * connection counts as unproven until a call on it passes the service's
 * token check (shoal_rpc_listener_proven).  Unproven connections get
 * unproven_timeout_ms to prove themselves, and while they fill their
 * share or every place is taken, each new connection closes the oldest
 * idle unproven one (a log line a minute): 512 connections that never
 * send the token cannot lock the job's processes out.  A job's client
 * sends its first call as soon as it connects, so it is proven long
 * before max_unproven newer connections could push it out.  Threads: the poller, at most
 * max(threads, calls in progress) in the pool, so at most
 * max_connections + 1.
 *
 * Stopping never waits for a peer: a pipe written at stop wakes the
 * poller, and shutdown(2) wakes sockets blocked in the middle of a
 * message.  What a handler does while a call is in progress is its own
 * business: a handler that may block (a pull waiting for a version)
 * looks at shoal_rpc_listener_stopping. */
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
  int max_connections;        /* connections kept open at once; one more is closed at once and
                               * logged; 0: no cap */
  gint64 idle_timeout_ms;     /* a connection silent this long between calls is closed (the
                               * client reconnects at its next call); 0: never */
  int threads;                /* pool threads kept once started (<= 0: SHOAL_RPC_LISTENER_THREADS); more
                               * start while every one is busy, up to max_connections */
  gboolean threads_end_when_idle; /* keep no thread: one starts for every call that finds none
                               * free and ends 1 ms after its last; for a harness that must see
                               * no thread outlive its input (fuzz/fuzz_param_handler.c: GLib
                               * frees a thread's slice cache only when the thread ends, and
                               * LeakSanitizer reports a live pool thread's cache as lost) */
  int max_unproven;           /* connections that have not proven themselves yet (no call of theirs
                               * called shoal_rpc_listener_proven) kept at once: past it, or at
                               * max_connections, a new one closes the oldest idle such one; 0: all
                               * connections are alike */
  gint64 unproven_timeout_ms; /* with max_unproven: an idle connection not proven this long after its
                               * accept is closed; 0: never */
  gint64 next_call_wait_ms;   /* after a reply, how long its thread waits for the connection's next
                               * call while no other call waits for a thread (0:
                               * SHOAL_RPC_LISTENER_NEXT_CALL_MS) */
} ShoalRpcListenerOptions;

/* The pool threads a listener keeps when the options name none. */
#define SHOAL_RPC_LISTENER_THREADS 8
/* A worker's calls come in runs (the slices of a step, then the next
 * step's, tens of ms later): a thread that waits this long for its
 * connection's next call serves most of them without hand-overs. */
#define SHOAL_RPC_LISTENER_NEXT_CALL_MS 50

/* Binds and starts accepting; every call runs `processor` (referenced;
 * its handler is called from the pool's threads, so it must be
 * thread-safe).  NULL with a SHOAL_ERROR_RPC error naming the
 * address when it cannot be bound or no thread can be started. */
ShoalRpcListener *shoal_rpc_listener_start (ThriftProcessor *processor,
                                            const ShoalRpcListenerOptions *opts, GError **error);
int shoal_rpc_listener_port (ShoalRpcListener *listener);
/* Joins pool threads that ended; returns how many connections are open
 * or still being closed, plus, with threads_end_when_idle, the pool
 * threads still running (0: everything of every earlier connection was
 * freed).  For harnesses that wait until no connection is left
 * (fuzz/fuzz_param_handler.c). */
guint shoal_rpc_listener_reap (ShoalRpcListener *listener);
/* Pool threads running now (serving or waiting for calls), besides the
 * poller. */
guint shoal_rpc_listener_threads (ShoalRpcListener *listener);
/* TRUE once shoal_rpc_listener_stop began: handlers stop waiting. */
gboolean shoal_rpc_listener_stopping (ShoalRpcListener *listener);
/* Stops accepting, wakes and closes every connection, waits for the calls
 * in progress, joins every thread and frees the listener.  NULL is
 * ignored. */
void shoal_rpc_listener_stop (ShoalRpcListener *listener);

/* Inside a handler: "host:port" of the peer whose call the calling
 * thread serves, "?" elsewhere.  Borrowed, valid during the call. */
const char *shoal_rpc_listener_peer (void);

/* Inside a handler: the call was refused for `why` (a wrong job token),
 * counted with the connections dropped for their peer's host
 * (rpc/refusals.h).  Outside a handler: nothing. */
void shoal_rpc_listener_refused (const char *why);
/* What this listener refused from these addresses (rpc/refusals.h,
 * shoal_refusals_describe): NULL, or a newly allocated line. */
char *shoal_rpc_listener_refusals (ShoalRpcListener *listener, const char *const *addresses);

/* Inside a handler: the connection whose call the calling thread serves
 * proved itself (the service checked the job token it sent): it no
 * longer counts against max_unproven nor unproven_timeout_ms.  Outside a
 * handler: nothing. */
void shoal_rpc_listener_proven (void);

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
