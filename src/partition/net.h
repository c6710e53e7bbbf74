/* A net: the DAG of layers built from the [layer NAME] groups of a job conf.
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

#include "core/conf.h"
#include "core/param.h"
#include "layers/layer.h"

G_BEGIN_DECLS

typedef struct _ShoalNet ShoalNet;

typedef struct {
  guint64 seed;
  int shard_index, shard_count;   /* data shard of this net's input layers; 0 of 1 by default */
  int worker, group;
  ShoalDevice device;             /* where the net computes: the CPU (zero) or a GPU, see below */
  int cd_k;                       /* [job] alg = cd: Gibbs steps of RBM layers; 0 (BP) by default */
} ShoalNetOptions;

typedef struct {
  const char *layer;  /* borrowed from the net */
  const char *type;   /* the layer's type, static */
  gboolean is_loss;
  double value;
} ShoalMetric;

/* Returns a new net (free with shoal_net_free) or NULL with error set.
 * conf must outlive the net.  opts may be NULL (seed 0, shard 0 of 1). */
ShoalNet *shoal_net_new (ShoalConf *conf, const ShoalNetOptions *opts, GError **error);
void shoal_net_free (ShoalNet *net);

/* Runs every layer forward; returns the sum of weighted losses. */
double shoal_net_forward (ShoalNet *net, ShoalPhase phase);
/* Runs every layer backward (after a train forward); params' grads are
 * ADDED to, so zero them first (shoal_param_store_zero_grads) unless
 * accumulating. */
void shoal_net_backward (ShoalNet *net);

/* Called during backward right after `layer` finished, i.e. when the
 * gradients of its params are complete (SINGA pushes them to the servers
 * at that moment, while lower layers still compute). */
typedef void (*ShoalParamsReadyFunc) (ShoalLayer *layer, gpointer user_data);
void shoal_net_backward_notify (ShoalNet *net, ShoalParamsReadyFunc ready, gpointer user_data);

/* Borrowed pointers, valid while the net lives. */
ShoalParamStore *shoal_net_params (ShoalNet *net);
guint shoal_net_n_layers (ShoalNet *net);
ShoalLayer *shoal_net_layer (ShoalNet *net, guint i);    /* topological order */
ShoalLayer *shoal_net_find (ShoalNet *net, const char *name);
ShoalLayer *shoal_net_input (ShoalNet *net);             /* first input layer, or NULL */

/* Loss and metric layers' values after the last forward; returns how many
 * were written (at most n). */
guint shoal_net_metrics (ShoalNet *net, ShoalMetric *out, guint n);
/* Rows of the last forward's batch (from the first input layer). */
int shoal_net_batch_rows (ShoalNet *net);

/* The state a checkpoint needs beside the params: every layer's random
 * stream, or its own state (ops->save_state, e.g. a data cursor).
 * Returns a new GBytes. */
GBytes *shoal_net_save_state (ShoalNet *net);
/* Restores it, before the first forward; fails with a message when the
 * state is of another net. */
gboolean shoal_net_load_state (ShoalNet *net, GBytes *state, GError **error);

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
 * slice as it comes back from the servers).  No effect on CPU nets. */
void shoal_net_set_param_upload (ShoalNet *net, gboolean every_forward);
/* Starts copying store->values[begin, end) to the device on the copy
 * stream; the next forward waits for it on the device, not on the host.
 * The host range must not change until that forward returned. */
void shoal_net_upload_params (ShoalNet *net, size_t begin, size_t end);
/* FALSE with the first device error the net met (TRUE on CPU nets). */
gboolean shoal_net_device_error (ShoalNet *net, GError **error);

/* Logs one line per layer: name, type, out shape, params. */
void shoal_net_log_summary (ShoalNet *net);

G_END_DECLS

#endif
