/* What every call of the parameter service checks, and how it waits;
 * shared by the handlers of rpc_server.c and of rpc_shm_calls.c, not
 * installed.
 *
 * A check that fails sets the ParamError the client gets (code and a
 * message naming the call and the slice) and returns FALSE, which the
 * handler returns as it is.  The waits run in slices of 100 ms that
 * check for the server's stop and failure, so no call outlives a stop
 * by more than that. */
#ifndef SHOAL_RPC_CALLS_H
#define SHOAL_RPC_CALLS_H

#include <glib.h>

#include "rpc/listener.h"
#include "server/liveness.h"
#include "server/rpc_server.h"
#include "server/rpc_types.h"

G_BEGIN_DECLS

struct _ShoalRpcServer {
  ShoalServer *server;      /* borrowed, may be NULL */
  ShoalBridgeSink bridge_sink;  /* NULL: send_bridge refused */
  gpointer bridge_data;
  char *token;
  gsize token_len;
  int expected_shutdowns;
  ShoalCheckpoint *checkpoint;  /* borrowed, may be NULL */
  gboolean (*give_up) (void);   /* may be NULL */
  gboolean (*stop_signalled) (void);  /* may be NULL */
  ShoalLiveness *liveness;      /* borrowed, may be NULL */
  ShoalRpcListener *listener;
  ThriftProcessor *processor;
  GObject *handler;

  GMutex lock;
  GCond cond;               /* finished or stopping changed */
  GHashTable *finished;     /* ranks done (shutdown) or lost, under lock */
  char *failure;            /* why this process stops the job (shoal_rpc_server_fail); under lock */
  gint failed;              /* atomic: failure is set */
  gint stopping;            /* atomic */
  int waiters;              /* threads in shoal_rpc_server_wait, under lock: stop waits for them to leave */
};

/* The RPC server a handler object serves (rpc_server.c). */
ShoalRpcServer *shoal_rpc_call_server (ShoalParamServiceIf *iface);

/* Sets the ParamError to code and the formatted message; FALSE. */
gboolean shoal_rpc_call_fault (ShoalParamError **err, ShoalParamFault code, const char *fmt, ...)
  G_GNUC_PRINTF (3, 4);
/* A ShoalServer error (freed) as REFUSED with its message, or STOPPED
 * with the step the job stops at; FALSE. */
gboolean shoal_rpc_call_server_error (ShoalRpcServer *rpc, ShoalParamError **err, GError *e);
/* FALSE with FAILED and the reason once shoal_rpc_server_fail was called. */
gboolean shoal_rpc_call_not_failed (ShoalRpcServer *rpc, const char *call, ShoalParamError **err);
/* The job's token, compared in time independent of the first difference
 * (BAD_TOKEN, logged with the peer). */
gboolean shoal_rpc_call_token_ok (ShoalRpcServer *rpc, const char *call, const gchar *token,
                                  ShoalParamError **err);
/* The slice is served here (UNKNOWN_SLICE) and, when has_data, data holds
 * exactly its floats (BAD_LENGTH); *n gets its length in floats. */
gboolean shoal_rpc_call_slice_ok (ShoalRpcServer *rpc, const char *call, gint32 slice, gboolean has_data,
                                  const GByteArray *data, size_t *n, ShoalParamError **err);

/* shoal_server_pull (into dst) or shoal_server_pull_pinned (pinned not
 * NULL) of version >= min_version within wait_ms (TIMEOUT after). */
gboolean shoal_rpc_call_wait_pull_into (ShoalRpcServer *rpc, const char *call, int slice, float *dst,
                                        const float **pinned, size_t n, gint64 min_version, gint64 wait_ms,
                                        gint64 *version, ShoalParamError **err);
gboolean shoal_rpc_call_wait_pull (ShoalRpcServer *rpc, const char *call, int slice, float *dst, size_t n,
                                   gint64 min_version, gint64 wait_ms, gint64 *version, ShoalParamError **err);
/* SSP: shoal_server_wait_bound within wait_ms. */
gboolean shoal_rpc_call_wait_bound (ShoalRpcServer *rpc, const char *call, int slice, int unit, gint64 step,
                                    gint64 wait_ms, ShoalParamError **err);

/* The calls whose slices lie in the client's shared memory
 * (rpc_shm_calls.c); the generated handler's signatures. */
gboolean shoal_rpc_call_attach_shm (ShoalParamServiceIf *iface, const gchar *token, const gint32 pid,
                                    const gint32 fd, const gint64 bytes, const GByteArray *nonce,
                                    const gchar *host, const gint64 values_at, const gint64 grads_at,
                                    ShoalParamError **err, GError **error);
gboolean shoal_rpc_call_push_pull_shm (ShoalParamServiceIf *iface, GByteArray **_return, const gchar *token,
                                       const GByteArray *slices, const gint64 step, const gint64 wait_ms,
                                       const GByteArray *base_versions, const gint32 unit, const gboolean fetch,
                                       const gboolean clear_grads, ShoalParamError **err, GError **error);

G_END_DECLS

#endif
