/* A net: the DAG of layers built from the [layer NAME] groups of a job conf
 * (the public half is shoal/net.h; this adds what GPU nets need).
 *
 * shoal_net_new checks the graph (known types, known sources, no cycle,
 * source counts), orders the layers topologically, inserts a split layer
 * wherever one output feeds several layers, runs every layer's setup,
 * allocates outputs and gradients and lays out all params in one store.
 * Params are NOT initialised: call shoal_param_store_init_values (or bind
 * the values to a server's) before the first forward. */
#ifndef SHOAL_NET_H
#define SHOAL_NET_H

#include <glib.h>

#include <shoal/net.h>

#include "core/conf.h"
#include "core/device.h"
#include "core/param.h"
#include "layers/layer.h"

G_BEGIN_DECLS

/* GPU nets.  A net made with opts->device a GPU (shoal_device_cuda (i))
 * computes there with every layer's GPU path: each layer's out, grad and
 * label and the params' value and grad views (ShoalParam.value, .grad)
 * are device memory.  The store's host buffers (store->values and
 * store->grads, pinned) stay what initialisation, servers, param clients
 * and checkpoints read and write:
 *  - shoal_net_forward first uploads each layer's param values from
 *    store->values on the net's copy stream; a layer waits only for its
 *    own params, so the copies overlap the layers before it;
 *  - shoal_net_backward_notify ADDS the device gradients into store->grads
 *    (as the CPU backward adds into them): once a layer's backward is
 *    done its gradient is copied down on the copy stream while the layers
 *    below compute, added, the device copy zeroed, and only then is
 *    `ready` called for that layer (in the same order as on the CPU);
 *  - both return with the device idle, so the host buffers are the
 *    caller's between calls; losses and metrics are host values as on the
 *    CPU.  A device error makes forward return NaN; the error itself is
 *    logged and kept for shoal_net_device_error.
 * The set-up fails, naming the layer, when a layer type has no GPU path
 * or device memory runs out.  Use a net from one thread at a time (any
 * thread: each call makes the net's GPU current in the calling thread). */
ShoalDevice shoal_net_device (ShoalNet *net);
/* every_forward FALSE: forward no longer uploads the param values; the
 * caller uploads what changed with shoal_net_upload_params (e.g. each
 * slice as it comes back from the servers), or writes store->dev_values
 * itself and waits for its writes before the next forward (a param
 * client with the wire codecs on the device).  No effect on CPU nets. */
void shoal_net_set_param_upload (ShoalNet *net, gboolean every_forward);
/* Starts copying store->values[begin, end) to the device on the copy
 * stream; the next forward waits for it on the device, not on the host.
 * The host range must not change until that forward returned. */
void shoal_net_upload_params (ShoalNet *net, size_t begin, size_t end);
/* Params that stay on the device: the values on the device become the
 * truth, and the caller updates them there (an in-process server in
 * device mode, server.h: shoal_server_move_to_device, which takes the
 * net's device values and compute stream).  Uploads store->values once
 * (waiting); from then on forward uploads nothing, and backward neither
 * copies gradients down nor waits: it calls `ready` for a layer as soon
 * as the layer's backward is enqueued, and the device gradients
 * (store->dev_grads, not store->grads) are the caller's to consume on the
 * compute stream, which orders them after that backward.  Errors of that
 * work surface at the next forward.  FALSE with error on a CPU net or a
 * device error. */
gboolean shoal_net_keep_params_on_device (ShoalNet *net, GError **error);
gboolean shoal_net_params_on_device (ShoalNet *net);
/* Gradients that stay on the device, for a caller that consumes them
 * there (a param client encoding them for the wire on the GPU,
 * comm/param_client.h): backward calls `ready` for a layer as soon as
 * its backward is enqueued and leaves store->dev_grads to the caller on
 * the compute stream, as with the params on the device, and clipping
 * runs there; forward still uploads the values.  `on` FALSE: back to
 * the gradients added into store->grads.  FALSE with error on a CPU net
 * or when device memory is short. */
gboolean shoal_net_set_grads_on_device (ShoalNet *net, gboolean on, GError **error);
gboolean shoal_net_grads_on_device (ShoalNet *net);
/* The stream a GPU net's layers run on (NULL on the CPU), for work the
 * caller enqueues between a backward and the next forward. */
ShoalStream *shoal_net_compute_stream (ShoalNet *net);
/* Clips the gradients of the last backward (shoal_clip_gradients' rule)
 * where they are: the device gradients of a net whose params or
 * gradients stay on the device (enqueued, no wait), else store->grads. */
void shoal_net_clip_gradients (ShoalNet *net, float clip_value, float clip_norm);
/* A training forward, then backward with `ready` as in
 * shoal_net_backward_notify; returns the loss.  On a GPU net whose params
 * stay on the device the host enqueues both before it waits for the
 * forward's end (not the backward's): the backward and what `ready`
 * enqueued run on while the caller prepares the next step. */
double shoal_net_train_step (ShoalNet *net, ShoalParamsReadyFunc ready, gpointer user_data);
/* A training step whose loss is read a step late: enqueues this step
 * (forward, then backward with `ready` as in shoal_net_train_step) and
 * returns the loss of the step before it, whose metrics
 * shoal_net_metrics reads from then on; NAN with *previous FALSE when no
 * step was left to read (the first, or after a synchronous forward or
 * step, which drop a step not read).  On a GPU net whose params stay on
 * the device the host then never waits for the step it just enqueued,
 * only, at the next call, for the previous step's forward (long done
 * unless the host outruns the device).  Elsewhere the step runs whole
 * and only its reading is late.  shoal_net_finish_step reads the last. */
double shoal_net_train_step_late (ShoalNet *net, ShoalParamsReadyFunc ready, gpointer user_data,
                                  gboolean *previous);
/* The loss of the step shoal_net_train_step_late left unread (waiting
 * for its forward); shoal_net_metrics then reads its metrics.  FALSE
 * when none was left. */
gboolean shoal_net_finish_step (ShoalNet *net, double *loss);
/* CUDA graphs of the training step ([job] cuda_graph; docs/GPU.md): a
 * GPU net whose params stay on the device captures a full batch's step
 * once and replays it from then on, each replay equal to the eager step
 * bit for bit.  FALSE with error (SHOAL_ERROR_CONF, nothing changed)
 * for a CPU net, a net with a layer a graph cannot hold (the error names
 * it: GRU/LSTM carry their state through the host, the RBM layers draw
 * seeds in their forward, a plugin's GPU path is unknown) or one whose
 * params do not stay on the device.  The net turns graphs off by itself
 * (one message saying why, steps eager from then on) where a capture or
 * replay fails. */
gboolean shoal_net_set_cuda_graph (ShoalNet *net, gboolean on, GError **error);
/* Whether graphs are on (FALSE once the net turned them off). */
gboolean shoal_net_cuda_graph (ShoalNet *net);
/* Steps the graph ran: the captured one and the replays. */
guint64 shoal_net_cuda_graph_steps (ShoalNet *net);
/* FALSE with the first device error the net met (TRUE on CPU nets). */
gboolean shoal_net_device_error (ShoalNet *net, GError **error);


/* The net becomes another unit's, as if set up for it (the virtual
 * clock's units borrow one net in turn, worker/unit_state.h): its
 * context's group, worker and data shard change, every layer's random
 * stream is seeded afresh for that unit, and the input layers whose
 * set-up read the shard follow it at their next load_state (which must
 * come before the next forward: shoal_net_load_state with the unit's
 * state).  Param values and gradients are the caller's. */
void shoal_net_move (ShoalNet *net, int group, int worker, int shard_index, int shard_count);

G_END_DECLS

#endif
