/* Nets: the graph of layers a conf's [layer NAME] groups describe.
 *
 * shoal_net_new checks the graph (known types, known sources, no cycle,
 * source counts, every layer's keys), orders the layers topologically,
 * inserts a split layer wherever one output feeds several layers, runs
 * every layer's setup, and lays out all params in one store.  Params are
 * NOT initialised: call shoal_param_store_init_values (or load saved
 * params) before the first forward.
 *
 * A training step an application drives itself:
 *
 *   shoal_net_feed (net, "data", x, rows, labels, &error);
 *   double loss = shoal_net_forward (net, SHOAL_PHASE_TRAIN);
 *   shoal_param_store_zero_grads (shoal_net_params (net));
 *   shoal_net_backward (net);
 *   shoal_updater_step (updater, step);
 *
 * Use a net from one thread at a time.  Everything the accessors return
 * is borrowed from the net and valid while it lives. */
#ifndef SHOAL_PUBLIC_NET_H
#define SHOAL_PUBLIC_NET_H

#include <glib.h>

#include <shoal/conf.h>
#include <shoal/layer.h>
#include <shoal/param.h>

G_BEGIN_DECLS

/* ShoalNet: declared in shoal/layer.h (its gradient check takes one). */

typedef struct {
  guint64 seed;                   /* of the layers' random streams (dropout, shuffles) */
  int shard_index, shard_count;   /* data shard of the input layers; 0 of 1 by default */
  int worker, group;              /* which worker this net is (seeds, logs); 0, 0 */
  ShoalDevice device;             /* where it computes: the CPU (all zero) or a GPU */
  int cd_k;                       /* [job] alg = cd: Gibbs steps of the RBM layers; 0 (BP) by default */
  ShoalMemoryBudget *budget;      /* borrowed, outlives the net: caps its host memory with the other
                                   * nets sharing it (shoal/tensor.h); NULL: no cap */
} ShoalNetOptions;

typedef struct {
  const char *layer;              /* borrowed from the net */
  const char *type;               /* the layer's type, static */
  gboolean is_loss;
  double value;
} ShoalMetric;

/* Builds the net of conf's [layer NAME] groups.  `conf` is borrowed and
 * must outlive the net; opts may be NULL (seed 0, shard 0 of 1, CPU); a
 * shard_count or cd_k below 0 is a programmer's error (a critical, NULL).
 * Returns a new net (shoal_net_free), or NULL with:
 *  - SHOAL_ERROR_CONF: an unknown section (a job's [job], [updater],
 *    [cluster], [emulate] and [tls] are known; a misspelt [layr fc] is
 *    no layer left out), type, key or source, a cycle, a value that does
 *    not parse or is out of range (the message names file, line, layer
 *    and key);
 *  - SHOAL_ERROR_SHAPE: a layer's sources do not fit it;
 *  - SHOAL_ERROR_MEMORY: a layer's output, workspace or params cannot be
 *    allocated, or would cross opts->budget (the message names the
 *    layer and the bytes);
 *  - SHOAL_ERROR_UNSUPPORTED: opts->device is a GPU this build or machine
 *    cannot use, or a layer has no GPU path;
 *  - a data layer's own errors (SHOAL_ERROR_DATA, SHOAL_ERROR_IO). */
ShoalNet *shoal_net_new (ShoalConf *conf, const ShoalNetOptions *opts, GError **error);
/* NULL is ignored. */
void shoal_net_free (ShoalNet *net);

/* Gives the input layer called `layer` the next `rows` rows of input,
 * for the next forward: data holds rows * row_size floats in the layer's
 * raw form (a `feed` layer: its output values; lmdb_input: what its
 * records hold, to which it applies its scale, mean and std), labels (may
 * be NULL) the layer's labels of those rows: one float per row, or
 * label_steps floats per row (a sequence's targets, row after row) where
 * a feed has label_steps > 1.  rows may be fewer than the batch the
 * layer was set up with, not more.  FALSE with SHOAL_ERROR_CONF (no such
 * layer), SHOAL_ERROR_UNSUPPORTED (its type takes no caller rows:
 * ops->feed is NULL) or SHOAL_ERROR_SHAPE (rows out of 1 .. batch). */
gboolean shoal_net_feed (ShoalNet *net, const char *layer, const float *data, int rows,
                         const float *labels, GError **error);

/* Runs every layer forward; returns the sum of the weighted losses (0
 * without loss layers; NaN after a device error on a GPU net). */
double shoal_net_forward (ShoalNet *net, ShoalPhase phase);
/* Runs every layer backward after a train forward.  Params' gradients
 * are ADDED to: zero them first (shoal_param_store_zero_grads) unless
 * accumulating.  The loss layers seed the gradient.  With no forward
 * since the net was built, or after a test forward, it runs nothing and
 * logs a critical (a programmer's error, as a NULL net). */
void shoal_net_backward (ShoalNet *net);
/* For applications that compute the loss themselves: after a train
 * forward, sets d loss / d out of `layer` (an output: no layer of the net
 * reads it) to `grad` (shoal_tensor_count of its output floats) and runs
 * backward from it alone - the net's loss layers seed nothing - adding
 * into the params' gradients as shoal_net_backward does.  FALSE with
 * SHOAL_ERROR_CONF (no such layer, other layers read it, or nothing at
 * or below it learns, or no train forward came before: see
 * shoal_net_backward) or SHOAL_ERROR_UNSUPPORTED (a GPU net); nothing is
 * run then. */
gboolean shoal_net_backward_from (ShoalNet *net, const char *layer, const float *grad,
                                  GError **error);
/* Called during backward right after `layer` (one with params) finished,
 * i.e. when its params' gradients are complete (SINGA pushes them to the
 * servers then, while the layers below still compute). */
typedef void (*ShoalParamsReadyFunc) (ShoalLayer *layer, gpointer user_data);
/* Runs backward as shoal_net_backward does (it is not a callback to keep:
 * it runs now, with the same precondition), calling `ready` (may be
 * NULL) with user_data after each layer that has params. */
void shoal_net_backward_notify (ShoalNet *net, ShoalParamsReadyFunc ready, gpointer user_data);

ShoalParamStore *shoal_net_params (ShoalNet *net);
guint shoal_net_n_layers (ShoalNet *net);
/* Layer i in topological order (inserted split layers included), or NULL. */
ShoalLayer *shoal_net_layer (ShoalNet *net, guint i);
ShoalLayer *shoal_net_find (ShoalNet *net, const char *name);
/* The first input layer, or NULL. */
ShoalLayer *shoal_net_input (ShoalNet *net);
/* Loss and metric layers' values after the last forward; returns how many
 * were written (at most n). */
guint shoal_net_metrics (ShoalNet *net, ShoalMetric *out, guint n);
/* Rows of the last forward's batch (from the first input layer). */
int shoal_net_batch_rows (ShoalNet *net);

/* Every param's values to the file at `path` (shoal_param_store_to_bytes;
 * written to a temporary file and renamed, so a crash leaves the old
 * file).  FALSE with SHOAL_ERROR_IO naming the path and the reason. */
gboolean shoal_net_save_params (ShoalNet *net, const char *path, GError **error);
/* Loads a file written by shoal_net_save_params into the params of the
 * same names (a run's workspace: shoal_model_load); under
 * SHOAL_PARAMS_BY_NAME_ALL every param of the net must be there.  FALSE
 * with SHOAL_ERROR_IO (cannot read), or shoal_param_store_load_bytes's
 * errors. */
gboolean shoal_net_load_params (ShoalNet *net, const char *path, ShoalParamsMatch match,
                                GError **error);

/* The state a checkpoint needs beside the params: every layer's random
 * stream or its own state (ops->save_state).  A new GBytes. */
GBytes *shoal_net_save_state (ShoalNet *net);
/* Restores it before the first forward; FALSE with SHOAL_ERROR_DATA when
 * the state is another net's. */
gboolean shoal_net_load_state (ShoalNet *net, GBytes *state, GError **error);

/* Logs one line per layer (name, type, output shape, params) to g_log. */
void shoal_net_log_summary (ShoalNet *net);

G_END_DECLS

#endif
