/* Serving a process's ShoalServer over Apache Thrift (c_glib), on an
 * rpc/listener.h listener (a thread per connection, TCP_NODELAY,
 * timeouts).  The message limit is raised from the largest slice and
 * anything above it is refused.  Every call carries the job token; a call
 * without the right one is refused and logged.  The handler never exits
 * the process: a bad call gets an error reply and the server keeps
 * serving.
 *
 * The same port takes the bridge messages of a worker group spread over
 * processes (send_bridge, src/comm/thrift_wire.h) into a bridge sink (the
 * process's ShoalMailbox, comm/mailbox.h).  A
 * process that holds such workers but no server slices runs this with
 * server == NULL: its param calls are refused, its shutdowns counted. */
#ifndef SHOAL_RPC_SERVER_H
#define SHOAL_RPC_SERVER_H

#include <glib.h>

#include "server/liveness.h"
#include "server/server.h"

G_BEGIN_DECLS

typedef struct _ShoalRpcServer ShoalRpcServer;

/* Takes a bridge message (`msg` is handed over) for (group, channel);
 * called from connection threads, so it must be thread-safe. */
typedef void (*ShoalBridgeSink) (gpointer data, int group, guint32 channel, GBytes *msg);

typedef struct {
  const char *bind_address;   /* "127.0.0.1" by default (NULL) */
  int port;                   /* 0: any free port, see shoal_rpc_server_port */
  const char *token;          /* the job token every call must carry */
  size_t max_message_bytes;   /* largest accepted message; 0: the largest slice plus headroom,
                               * at least 256 MiB when bridge messages come or no server */
  gint64 io_timeout_ms;       /* per-socket send/receive timeout; 0: 60 s */
  int expected_shutdowns;     /* shoal_rpc_server_wait returns after this many shutdown calls */
  ShoalCheckpoint *checkpoint;  /* where checkpoint calls save; NULL: they are refused */
  gboolean (*give_up) (void);   /* shoal_rpc_server_wait also returns once this says TRUE (a stop
                                 * signal); NULL: only shutdowns end the wait */
  gboolean (*stop_signalled) (void); /* TRUE once this process was sent a stop signal: heartbeats
                                 * are answered STOPPING, so that every rank stops with a
                                 * checkpoint; NULL: never */
  ShoalBridgeSink bridge_sink;  /* where send_bridge puts messages; NULL: send_bridge is refused */
  gpointer bridge_data;         /* the sink's first argument; must outlive the RPC server */
  size_t bridge_message_bytes;  /* with a sink: its largest message (shoal_group_net_max_message_bytes);
                                 * the default limit is raised to it where it passes 256 MiB */
  int max_connections;          /* connections kept open at once; 0: no cap */
  int max_unproven;             /* connections no call with the job token came on yet, kept at once
                                 * (rpc/listener.h: token holders first); 0: all alike */
  gint64 unproven_timeout_ms;   /* with max_unproven: such a connection is closed this long after
                                 * its accept; 0: never */
  gint64 idle_timeout_ms;       /* connections idle this long between calls are closed; 0: never */
  int threads;                  /* call threads kept (rpc/listener.h: more start while all are busy,
                                 * up to max_connections); <= 0: SHOAL_RPC_LISTENER_THREADS */
  gboolean threads_end_when_idle; /* keep no call thread (rpc/listener.h; fuzz harnesses) */
  gint64 next_call_wait_ms;     /* a call thread's wait for its connection's next call (rpc/listener.h;
                                 * 0: SHOAL_RPC_LISTENER_NEXT_CALL_MS) */
  ShoalLiveness *liveness;      /* heartbeats and shutdowns go here; borrowed, must outlive the RPC
                                 * server; NULL: heartbeats are answered, nothing is recorded */
} ShoalRpcServerOptions;

/* Starts listening and serving `server` (borrowed; must outlive the RPC
 * server; NULL: no slices here, every param call is refused with
 * UNKNOWN_SLICE or REFUSED).  Returns NULL with error when the address
 * cannot be bound. */
ShoalRpcServer *shoal_rpc_server_start (ShoalServer *server, const ShoalRpcServerOptions *opts,
                                        GError **error);
int shoal_rpc_server_port (ShoalRpcServer *rpc);
/* Joins the threads of connections that ended (the acceptor does so at
 * its next connection); returns how many connections are still open
 * (with threads_end_when_idle, plus the call threads still running).
 * For harnesses that want no thread of a finished connection left
 * running (fuzz/fuzz_param_handler.c). */
guint shoal_rpc_server_reap (ShoalRpcServer *rpc);
/* What this server refused from these addresses (rpc/refusals.h,
 * shoal_refusals_resolve gives them): connections dropped (a TLS
 * handshake refused, a plain call at a TLS rank) and calls with a wrong
 * token; NULL or a newly allocated line. */
char *shoal_rpc_server_refusals (ShoalRpcServer *rpc, const char *const *addresses);
/* Blocks until `expected_shutdowns` ranks are finished - said they are
 * done (the shutdown call) or were lost (shoal_rpc_server_finished) -,
 * shoal_rpc_server_stop or _fail was called, or give_up says so
 * (checked every 200 ms).  FALSE when give_up ended it before every
 * expected rank was finished (a stop request while a worker process had
 * not said done). */
gboolean shoal_rpc_server_wait (ShoalRpcServer *rpc);
/* Counts `rank` finished (a lost rank), or no longer (it rejoined). */
void shoal_rpc_server_finished (ShoalRpcServer *rpc, int rank, gboolean finished);
/* This process stops the job, for `why`: every later param call and
 * heartbeat is refused with FAILED and the message, waiting pulls end,
 * shoal_rpc_server_wait returns.  The first reason holds. */
void shoal_rpc_server_fail (ShoalRpcServer *rpc, const char *why);
/* Stops accepting, closes connections, joins threads, frees. */
void shoal_rpc_server_stop (ShoalRpcServer *rpc);

G_END_DECLS

#endif
