/* One Thrift connection from a worker (or a server group) to a server
 * process: the remote half of the param client.
 *
 * Not thread-safe: one connection per thread, or a lock around calls.
 * Every call has a timeout, so a dead peer never hangs a worker; after any
 * transport error the connection is closed and reopened on the next call
 * (c_glib does not check sequence ids, so a late reply could otherwise be
 * taken for the next call's).  Errors are SHOAL_ERROR_RPC (a STOPPED
 * refusal: SHOAL_ERROR_STOPPED; LOST or FAILED: SHOAL_ERROR_LOST) and name the peer: "127.0.0.1:4711: pull
 * slice 3: timed out after 60 s". */
#ifndef SHOAL_RPC_CLIENT_H
#define SHOAL_RPC_CLIENT_H

#include <glib.h>

#include "core/codec.h"
#include "rpc/shm_region.h"
#include "rpc/tls.h"
#include "server/server.h"

G_BEGIN_DECLS

typedef struct _ShoalRpcClient ShoalRpcClient;

typedef struct {
  const char *host;
  int port;
  const char *token;
  size_t max_message_bytes;   /* 0: 1 GiB */
  gint64 timeout_ms;          /* per call; 0: 60 s */
  int connect_retries;        /* attempts while the peer is still starting; 0: 50 (5 s) */
  ShoalTls *tls;              /* borrowed; NULL: the process's (rpc/tls.h shoal_tls_set_default) */
} ShoalRpcClientOptions;

/* How this process's errors name the peers it calls: names[i] for the
 * "host:port" endpoints[i] (both copied; NULL: "host:port" itself), e.g.
 * "rank 1 (2 servers) at 10.0.0.2:47001", so that a job across hosts says
 * which rank a failed call went to.  Set once, before any connection. */
void shoal_rpc_client_set_peer_names (char **endpoints, char **names);

/* Connects (retrying while the server starts).  Returns NULL with error. */
ShoalRpcClient *shoal_rpc_client_connect (const ShoalRpcClientOptions *opts, GError **error);
void shoal_rpc_client_free (ShoalRpcClient *client);

/* The server-side operations of server.h, remotely; same semantics. */
gboolean shoal_rpc_client_push (ShoalRpcClient *c, int slice, const float *grad, size_t n,
                                gint64 step, GError **error);
gboolean shoal_rpc_client_pull (ShoalRpcClient *c, int slice, float *dst, size_t n,
                                gint64 min_version, gint64 *version, GError **error);
/* push then pull in one round trip (ASYNC schemes: send a gradient, get fresh values) */
gboolean shoal_rpc_client_push_pull (ShoalRpcClient *c, int slice, const float *grad, float *dst,
                                     size_t n, gint64 step, gint64 *version, GError **error);
/* The same two, telling the server where the gradient comes from
 * (shoal_server_push_from; origin NULL: unknown).  push_pull then
 * returns the values at the version the server names: a backup worker's
 * late gradient gets the current ones at once. */
gboolean shoal_rpc_client_push_from (ShoalRpcClient *c, int slice, const float *grad, size_t n,
                                     gint64 step, const ShoalPushOrigin *origin, GError **error);
gboolean shoal_rpc_client_push_pull_from (ShoalRpcClient *c, int slice, const float *grad,
                                          float *dst, size_t n, gint64 step,
                                          const ShoalPushOrigin *origin, gint64 *version,
                                          GError **error);
/* The same two with the gradient encoded (`grad` holds
 * shoal_codec_bytes (grad_codec, n) bytes, core/codec.h) and the values
 * asked for in values_codec (fp32, fp16 or bf16), decoded into dst. */
gboolean shoal_rpc_client_push_coded (ShoalRpcClient *c, int slice, const guint8 *grad,
                                      ShoalCodec grad_codec, size_t n, gint64 step,
                                      const ShoalPushOrigin *origin, GError **error);
gboolean shoal_rpc_client_push_pull_coded (ShoalRpcClient *c, int slice, const guint8 *grad,
                                           ShoalCodec grad_codec, float *dst, ShoalCodec values_codec,
                                           size_t n, gint64 step, const ShoalPushOrigin *origin,
                                           gint64 *version, GError **error);
/* push_pull_coded that leaves the values as they came: `values` gets
 * their shoal_codec_bytes (values_codec, n) bytes (the length checked),
 * for a caller that decodes them elsewhere (a GPU worker's client). */
gboolean shoal_rpc_client_push_pull_encoded (ShoalRpcClient *c, int slice, const guint8 *grad,
                                             ShoalCodec grad_codec, guint8 *values, ShoalCodec values_codec,
                                             size_t n, gint64 step, const ShoalPushOrigin *origin,
                                             gint64 *version, GError **error);
gboolean shoal_rpc_client_put (ShoalRpcClient *c, int slice, const float *values, size_t n,
                               gint64 version, GError **error);
/* Hogwild: send a delta to the slice's master group, get its values back. */
gboolean shoal_rpc_client_apply_delta (ShoalRpcClient *c, int slice, const float *delta,
                                       float *values_out, size_t n, GError **error);
/* Hogwild with elastic averaging: the replica to the slice's master,
 * the master's d = alpha (replica - center) back (server.h). */
gboolean shoal_rpc_client_elastic_exchange (ShoalRpcClient *c, int slice, const float *replica,
                                            float *diff_out, size_t n, float alpha, GError **error);
gboolean shoal_rpc_client_stats (ShoalRpcClient *c, ShoalServerStats *stats, GError **error);
/* Asks the server process to checkpoint its slices as of `step`. */
gboolean shoal_rpc_client_checkpoint (ShoalRpcClient *c, gint64 step, GError **error);
/* SYNC: tells the server that a worker stops at `step` and will not push
 * it (shoal_server_stop_at).  Calls of the step the server stops at or a
 * later one then fail with SHOAL_ERROR_STOPPED, on every connection to
 * that server; *stopped_at (may be NULL) gets that step: later than
 * `step` where backup workers' steps went on without the caller. */
gboolean shoal_rpc_client_stop_at (ShoalRpcClient *c, gint64 step, gint64 *stopped_at, GError **error);
/* After a call failed with SHOAL_ERROR_STOPPED: the step the server said
 * the job stops at; -1 before any such reply. */
gint64 shoal_rpc_client_stop_step (ShoalRpcClient *c);
/* Whether the server closed this connection (it died, or dropped an idle
 * connection): a look at the socket, no call.  TRUE when disconnected. */
gboolean shoal_rpc_client_peer_closed (ShoalRpcClient *c);
/* Liveness (server/liveness.h): this process, `rank`, is alive with
 * `progress`; *lost (may be NULL) gets the peer's lost list.
 * SHOAL_ERROR_LOST when the peer declared this process lost, or stops
 * the job because some rank was. */
gboolean shoal_rpc_client_heartbeat (ShoalRpcClient *c, int rank, gint64 incarnation, gint64 progress,
                                     gboolean rejoin, GBytes **lost, GError **error);
/* Tells the server process that worker process `rank` is done. */
gboolean shoal_rpc_client_shutdown (ShoalRpcClient *c, int rank, GError **error);
/* Puts len bytes of data (borrowed; NULL when len is 0) into the peer
 * process's mailbox under (group, channel); returns once they are queued
 * there.  Refused by a peer that takes no bridge messages. */
gboolean shoal_rpc_client_send_bridge (ShoalRpcClient *c, int group, guint32 channel,
                                       const void *data, size_t len, GError **error);

/* Shared memory with a server on this host (rpc/shm_region.h): offers
 * the region, whose data holds the caller's values at float offset
 * values_at and its gradients at grads_at in the job's flat layout, now
 * and on every reconnect.  TRUE when this connection attached it; a
 * server that refuses it (another host, a check failed) is not asked
 * again and the client stays on the socket. */
gboolean shoal_rpc_client_use_shm (ShoalRpcClient *c, const ShoalShmOffer *offer, gint64 values_at,
                                   gint64 grads_at);
/* Whether push_pull_shm may be used: attached, or to be attached on the
 * next connection. */
gboolean shoal_rpc_client_shm_usable (ShoalRpcClient *c);
/* push_pull (fetch) or push of `count` slices (ids in `slices`, each
 * once) in one round trip, their gradients read from the region and their
 * values written into it: the server pushes all before it waits for any.
 * versions (count) get the versions of the values written (fetch) or
 * made ready (push).  clear_grads: on success the slices' gradients in
 * the region are zero (the server clears them as it reads them); on an
 * error the caller clears what it needs cleared. */
gboolean shoal_rpc_client_push_pull_shm (ShoalRpcClient *c, const gint32 *slices, int count,
                                         gint64 step, const gint64 *base_versions, int unit,
                                         gboolean fetch, gboolean clear_grads, gint64 *versions,
                                         GError **error);

G_END_DECLS

#endif
