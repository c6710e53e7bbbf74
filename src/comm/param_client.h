/* The worker side of the server protocol.
 *
 * A client belongs to one worker thread.  It routes each slice to the
 * server that serves it: a server in this process (direct calls, no
 * serialisation) or one in another process (Thrift, src/server/rpc_client).
 * Communication runs on the client's own comm thread, so it overlaps
 * compute:
 *   - during backward the worker calls shoal_param_client_range_done after
 *     each layer with where that layer's params begin in the store; every
 *     slice whose gradient is now complete is queued and goes out from
 *     the store (the comm thread clears it after);
 *   - the comm thread pushes each queued slice and pulls its new values
 *     (SYNC: at the version after this step, i.e. once every worker of the
 *     group pushed; ASYNC: whatever the server has) straight into the
 *     worker's param values - safe, because a complete slice's values are
 *     no longer read in this step;
 *   - before the next forward the worker calls shoal_param_client_wait,
 *     which returns once every slice of the step came back.
 * A client made with shoal_param_client_new_shared reads the one local
 * server's values in place and needs no comm thread. */
#ifndef SHOAL_PARAM_CLIENT_H
#define SHOAL_PARAM_CLIENT_H

#include <glib.h>

#include "core/codec.h"
#include "server/rpc_client.h"
#include "core/param.h"
#include "server/server.h"

G_BEGIN_DECLS

typedef struct _ShoalParamClient ShoalParamClient;

/* The asynchronous schemes' rule ([cluster] n_push, n_fetch; 1 and 1 in
 * SYNC): step's gradients go out when shoal_push_due, summed over the
 * steps since the last push and sent as their mean (shoal_push_mean, so
 * lr means the same), and values come back when shoal_fetch_due.  The
 * client keeps it; the virtual clock (emulate/emulator.c) asks it. */
gboolean shoal_push_due (int n_push, gint64 step);
gboolean shoal_fetch_due (int n_fetch, gint64 step);
void shoal_push_mean (float *grads, size_t n, int n_push);

/* A client for the worker whose params are `store` (borrowed; must
 * outlive the client), over `nslices` slices (shoal_slice_range).
 * Route every slice, then start.  It needs no buffer the size of the
 * params (gradients go out from the store). */
ShoalParamClient *shoal_param_client_new (ShoalParamStore *store, int nslices, ShoalUpdateMode mode);
void shoal_param_client_route_local (ShoalParamClient *client, int slice, ShoalServer *server);
/* `endpoint` is copied; clients to the same host:port share a connection. */
void shoal_param_client_route_remote (ShoalParamClient *client, int slice,
                                      const ShoalRpcClientOptions *endpoint);
/* Asynchronous schemes (Downpour's knobs): push the summed gradients of
 * every n_push steps (scaled to their mean), fetch fresh values every
 * n_fetch steps; in between the worker keeps computing on the params it
 * has.  Default 1 and 1. */
void shoal_param_client_set_frequency (ShoalParamClient *client, int n_push, int n_fetch);
/* The unit this client pushes for, sent with every push so that an SSP
 * server counts its steps (ShoalPushOrigin.unit); -1 (default): none. */
void shoal_param_client_set_unit (ShoalParamClient *client, int unit);

/* What slices become on a socket ([cluster] wire_values, wire_grads;
 * core/codec.h): values fp32, fp16 or bf16, gradients any codec.  The
 * quantisers keep a residual per value (error feedback), committed at
 * each shoal_param_client_wait that ends a step every slice of which went
 * out, and saved with checkpoints.  Slices through shared memory or to a
 * server in this process are not encoded: nothing crosses a socket.
 * FALSE with SHOAL_ERROR_MEMORY when the residuals (2 x the params) do
 * not fit in memory. */
gboolean shoal_param_client_set_codecs (ShoalParamClient *client, ShoalCodec values_codec,
                                        ShoalCodec grads_codec, GError **error);
/* A worker net on a GPU that leaves its gradients to the client and
 * reads the values the client puts on the device (net.h,
 * shoal_net_set_grads_on_device and shoal_net_set_param_upload FALSE):
 * after routing, before start.  Each complete slice's gradient is
 * encoded there (store->dev_grads, cleared as read) with the wire codec
 * (core/codec.h, shoal_codec_encode_on: the bytes the host would send,
 * to the bit) on a stream of the client's, after the work enqueued so far
 * on `compute` (the net's stream, borrowed: the backward that completed
 * it) and beside the backward below; only the encoded bytes come down
 * (into pinned memory), and the comm thread sends them without encoding
 * again.  Values
 * that come back in fp16 or bf16 go up as they came and are decoded into
 * store->dev_values; values that come as floats (fp32, a server in this
 * process, the fetches) go up from store->values.  shoal_param_client_wait
 * returns once they are on the device.  A slice for a server in this
 * process goes as floats.  The residuals move to the device.  FALSE with
 * error when device or pinned memory is short; the client is then as
 * before (gradients from store->grads, encoded and decoded on the host). */
gboolean shoal_param_client_codecs_on_device (ShoalParamClient *client, ShoalStream *compute, GError **error);
/* Between steps: store->values as the device has them, for what reads
 * the host's (a checkpoint of the worker's params); TRUE at once where
 * the values are not decoded on the device.  FALSE with the device's
 * error. */
gboolean shoal_param_client_values_to_host (ShoalParamClient *client, GError **error);
/* The residuals as a checkpoint blob; NULL when the gradients are not
 * quantised.  Load checks the size (SHOAL_ERROR_DATA). */
gboolean shoal_param_client_has_residuals (ShoalParamClient *client);
GBytes *shoal_param_client_save_residuals (ShoalParamClient *client);
gboolean shoal_param_client_load_residuals (ShoalParamClient *client, GBytes *blob, GError **error);

/* Before start: whether the slices may move through shared memory to
 * servers on this host ([cluster] shared_memory; default off here, the
 * runner turns it on).  The store's values and grads then move into a
 * shared region the store keeps. */
void shoal_param_client_set_shared_memory (ShoalParamClient *client, gboolean enabled);
/* After start: whether some server takes slices through shared memory. */
gboolean shoal_param_client_shared_memory (ShoalParamClient *client);

/* Connects to remote servers and starts the comm thread; FALSE with
 * error when a server cannot be reached or the thread cannot start
 * ("unit U: cannot start thread comm: ..."); the client is then only
 * to be freed. */
gboolean shoal_param_client_start (ShoalParamClient *client, GError **error);

/* The single-process, single-worker case: the store borrows the server's
 * values; pushes update them directly in the worker's thread. */
ShoalParamClient *shoal_param_client_new_shared (ShoalParamStore *store, ShoalServer *server);

/* A shared client's server may run its updates on the worker net's GPU
 * (server.h, shoal_server_move_to_device): the client then pushes the
 * store's device gradients (store->dev_grads) instead of store->grads. */

/* Copies every slice's current values from the servers into the store
 * (start of training); blocks. */
gboolean shoal_param_client_fetch (ShoalParamClient *client, GError **error);
/* The same once every slice reached min_version (waits for it, up to the
 * pull timeout): a unit that stops at a step the others finish without it
 * (backup workers, shoal_param_client_stop_at) checkpoints their values. */
gboolean shoal_param_client_fetch_version (ShoalParamClient *client, gint64 min_version, GError **error);

/* Backward hook: the gradients of the store's values from `begin` up are
 * final in step `step` (a layer finished backward, and the layers after
 * it in the store did before).  Queues every slice that became complete
 * and clears its gradients in the store.  The client moves ranges of the
 * store; it knows no layer. */
void shoal_param_client_range_done (ShoalParamClient *client, size_t begin, gint64 step);
/* After backward (or after clipping): queues whatever is not queued yet. */
void shoal_param_client_step_done (ShoalParamClient *client, gint64 step);
/* Waits until every slice queued for the last step came back updated;
 * FALSE with error when a call failed (the error names server and slice;
 * SHOAL_ERROR_STOPPED: the servers stop the job at a step, see
 * shoal_param_client_stop_step, and the step's values did not change). */
gboolean shoal_param_client_wait (ShoalParamClient *client, GError **error);

/* After shoal_param_client_wait, before step `step` begins: the step the
 * servers are at.  SYNC with backup workers a unit whose gradients came
 * late got the newest values back (of a later version than `step`); it
 * goes on at the lowest version among its slices, where its next push is
 * taken (or dropped again, and it catches up again: never a wait for a
 * step that is gone).  Otherwise, and in ASYNC mode, `step`. */
gint64 shoal_param_client_catch_up_step (ShoalParamClient *client, gint64 step);

/* After shoal_param_client_wait failed with SHOAL_ERROR_STOPPED (a SYNC
 * step given up because a unit of the group stopped, see stop_at): the
 * step the servers stop the job at; -1 after any other outcome. */
gint64 shoal_param_client_stop_step (ShoalParamClient *client);

/* SYNC, between steps (after shoal_param_client_wait): this unit stops
 * at `step` and will not push it.  Tells every server this client uses
 * (shoal_server_stop_at), so that the group's units in other processes
 * that went on into `step` have it refused (SHOAL_ERROR_STOPPED) instead
 * of waiting for a gradient that never comes.  *stopped_at (may be NULL)
 * gets the step the servers stop at: `step`, or with backup workers a
 * later one that the others applied without this unit (it then catches
 * up to it, as after a late push).  ASYNC: does nothing (*stopped_at =
 * step). */
gboolean shoal_param_client_stop_at (ShoalParamClient *client, gint64 step, gint64 *stopped_at,
                                     GError **error);

/* Between steps (after shoal_param_client_wait): asks every server this
 * client uses to checkpoint its slices as of `step` - local servers into
 * `local_store`, remote ones into their own.  Servers save once per step. */
gboolean shoal_param_client_checkpoint (ShoalParamClient *client, ShoalCheckpoint *local_store,
                                        gint64 step, GError **error);

/* Tells every remote server process that worker process `rank` is done
 * (call once per process, from one client). */
gboolean shoal_param_client_shutdown_servers (ShoalParamClient *client, int rank, GError **error);

/* Stops the comm thread, closes connections, frees. */
void shoal_param_client_free (ShoalParamClient *client);

G_END_DECLS

#endif
