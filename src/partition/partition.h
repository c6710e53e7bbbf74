/* Partitioning a net among the k workers of a group (SINGA's model and
 * hybrid parallelism inside a group).
 *
 * Each layer has a partition dim (the [layer NAME] key partition_dim):
 *    0  batch:   worker i computes rows block i; params are replicated and
 *                their gradients summed over the group;
 *    1  feature: worker i computes block i of the output units (dense),
 *                filters (conv) or features / channels (element-wise and
 *                per-channel layers) for the whole batch, and owns block i
 *                of the rows of each param;
 *   -1  whole:   the layer runs on worker 0 only.
 * A layer without the key takes the net-wide default, the [cluster] key
 * partition_dim (default 0), or when its type cannot be split that way
 * the first of batch, feature, whole that it can; input layers without
 * the key stay whole (worker 0 reads the group's batch, every worker
 * views its rows).  Asking a layer explicitly for a split its type does
 * not support is an error naming the file, line, layer and dim.
 *
 * The partitioner makes one sub-net per worker, with the original layer
 * names for the workers' parts, and inserts concat, slice and bridge
 * layers where neighbours are cut differently (docs/PARTITIONING.md has
 * the rule table).  Blocks are cut by shoal_block_range (layers/slice.h),
 * so uneven splits work.
 *
 * Invariant (test/test_partition.c): the group computes the same loss and
 * the same parameter gradients as the unpartitioned net on the same batch.
 *
 * Params live in ONE store in the layout of the unpartitioned net
 * (shoal_group_net_params): the sub-nets read their values in place
 * (a feature-split param's block of rows is a contiguous range), so a
 * server update of that store is what the next forward uses; after
 * backward its gradients hold the group's sum.
 *
 * Execution: shoal_group_net_forward / _backward run the k sub-nets in k
 * threads, the caller's thread being worker 0 and k - 1 threads owned by
 * the group net.  Workers meet where data crosses between them (a bridge
 * waits on a condition variable, never spins) and at the end of every
 * forward and backward.  With k = 1 the group net is the plain net, in
 * the caller's thread, with no threads or copies. */
#ifndef SHOAL_PARTITION_H
#define SHOAL_PARTITION_H

#include <glib.h>

#include "core/conf.h"
#include "partition/group_wire.h"
#include "net/net.h"

G_BEGIN_DECLS

/* The [cluster] keys read by the partitioner (partition_dim), for the job's
 * validation table. */
extern const ShoalOption shoal_partition_options[];

typedef struct _ShoalGroupNet ShoalGroupNet;

/* Builds the k sub-nets of the [layer NAME] groups of `conf`.  conf must
 * outlive the group net.  opts (may be NULL) are the group's: seed, its
 * data shard (shard_index of shard_count: worker w's batch-split input
 * reads shard shard_index * k + w of shard_count * k), group; opts->worker
 * is ignored.  Params are NOT initialised (shoal_param_store_init_values
 * on shoal_group_net_params).  Returns NULL with error set on a bad conf
 * or an impossible partition. */
ShoalGroupNet *shoal_group_net_new (ShoalConf *conf, int k, const ShoalNetOptions *opts,
                                    GError **error);
/* Whether a group of k splits every layer but its inputs by batch (the
 * plan's choice: explicit dims, the [cluster] default, fallbacks).  Such a
 * group needs no bridges, so its workers can live in processes of their
 * own without a group net.  FALSE with error on a bad conf.  The net it
 * builds to find out is charged to budget (may be NULL) while it lives. */
gboolean shoal_partition_batch_only (ShoalConf *conf, int k, ShoalMemoryBudget *budget,
                                     gboolean *batch_only, GError **error);

/* The group spread over wire->nprocs processes (spread.c): this process
 * builds and runs only its own workers' sub-nets, first = this_proc * k /
 * nprocs onwards; bridges to workers elsewhere go over the wire.  Process
 * 0, the leader, is used like a group net in one process (forward,
 * train_step, params, metrics, save_state: the whole group's); the others
 * call shoal_group_net_serve.  wire must outlive the group net. */
ShoalGroupNet *shoal_group_net_new_spread (ShoalConf *conf, int k, const ShoalNetOptions *opts,
                                           const ShoalGroupWire *wire, GError **error);
/* A follower's loop: runs the leader's commands until it says quit.
 * FALSE with error when the leader failed or cannot be heard from. */
gboolean shoal_group_net_serve (ShoalGroupNet *group, GError **error);
/* Leader: tells the followers to quit (ok = FALSE: because the leader
 * failed); once, also done by shoal_group_net_free.  No-op elsewhere. */
void shoal_group_net_finish (ShoalGroupNet *group, gboolean ok);
/* FALSE with error once a spread group's wire failed (a peer died, a
 * timeout); the forwards of a failed step return NaN.  TRUE otherwise. */
gboolean shoal_group_net_ok (ShoalGroupNet *group, GError **error);
/* Seconds the group's workers in this process waited for bridge data and
 * results from its other processes since it was made, summed over the
 * workers (0 in one process). */
double shoal_group_net_peer_wait_seconds (ShoalGroupNet *group);
/* Largest message a spread group's process receives (0 in one process),
 * for the RPC server's limit. */
size_t shoal_group_net_max_message_bytes (ShoalGroupNet *group);

/* Stops the group's threads and frees everything. */
void shoal_group_net_free (ShoalGroupNet *group);

int shoal_group_net_size (ShoalGroupNet *group);

/* Runs every worker's sub-net forward; returns the group's loss (the sum
 * of weighted losses, each a mean over the group's batch, as the
 * unpartitioned net returns). */
double shoal_group_net_forward (ShoalGroupNet *group, ShoalPhase phase);
/* Runs every worker's sub-net backward (after a train forward) and ADDS
 * the group's gradient into the grads of shoal_group_net_params. */
void shoal_group_net_backward (ShoalGroupNet *group);
/* Same, calling `ready` in the caller's thread for each layer whose
 * params' gradients are complete in the group store, in the order of
 * decreasing param offsets (as shoal_net_backward_notify does), while the
 * workers go on with the layers below.  The layer passed is one of
 * shoal_group_net_layers: its params are the group store's. */
void shoal_group_net_backward_notify (ShoalGroupNet *group, ShoalParamsReadyFunc ready,
                                      gpointer user_data);

/* shoal_group_net_forward (train) then shoal_group_net_backward_notify,
 * with one wake-up and one barrier of the workers instead of two (each
 * worker goes on into backward as soon as its forward is done).  Returns
 * the forward's loss. */
double shoal_group_net_train_step (ShoalGroupNet *group, ShoalParamsReadyFunc ready,
                                   gpointer user_data);

/* The params in the unpartitioned net's layout (same names, offsets and
 * init streams).  Borrowed, valid while the group net lives.  Its values
 * may be re-bound (shoal_param_store_borrow_values); the next forward
 * follows them. */
ShoalParamStore *shoal_group_net_params (ShoalGroupNet *group);

/* Loss and metric values of the last forward for the whole group (losses
 * over the group's batch, metrics weighted by each worker's rows), one
 * per original layer in topological order; returns how many were written. */
guint shoal_group_net_metrics (ShoalGroupNet *group, ShoalMetric *out, guint n);
/* Rows of the group's last batch. */
int shoal_group_net_batch_rows (ShoalGroupNet *group);
/* Rows of a full batch of the group, as the unpartitioned net's input. */
int shoal_group_net_batch_size (ShoalGroupNet *group);
/* The first local worker's part of the first input layer (worker 0's but
 * on a spread group's follower; num_records for epochs: with a
 * batch-split input it counts that worker's shard).  NULL on a follower
 * whose workers read no input of their own. */
ShoalLayer *shoal_group_net_input (ShoalGroupNet *group);

/* Borrowed: worker w's sub-net (NULL for a worker of a spread group that
 * lives in another process). */
ShoalNet *shoal_group_net_worker (ShoalGroupNet *group, int worker);
/* Worker w's part of the original layer `name` (or a connection layer of
 * its sub-net); NULL when the worker has none or lives in another process. */
ShoalLayer *shoal_group_net_find (ShoalGroupNet *group, int worker, const char *name);
/* The original layers, topological order, each with the partition dim it
 * got (layer->partition_dim) and, for layers with params, the group
 * store's params.  They are descriptions: never run them. */
guint shoal_group_net_n_layers (ShoalGroupNet *group);
ShoalLayer *shoal_group_net_layer (ShoalGroupNet *group, guint i);

/* Every worker's shoal_net_save_state, for checkpoints (new GBytes, or
 * NULL with error when a spread group's follower cannot be reached), and
 * its restore (before the first forward of a resumed run).  The format
 * is the same for a group in one process and spread. */
GBytes *shoal_group_net_save_state (ShoalGroupNet *group, GError **error);
gboolean shoal_group_net_load_state (ShoalGroupNet *group, GBytes *state, GError **error);
/* The group becomes another unit's (the virtual clock's units borrow one
 * net in turn): each worker's net moves as shoal_net_move says, to the
 * group, worker and shard that shoal_group_net_new gives them for `opts`.
 * The unit's state (shoal_group_net_load_state) must be loaded before
 * the next forward.  Groups in one process only. */
void shoal_group_net_move (ShoalGroupNet *group, const ShoalNetOptions *opts);

/* Profiling (benchmarks, `shoal inspect`): with timing on, every worker
 * times each layer's forward and backward, connection layers' waits for
 * other workers included.  Switching it on zeroes the counts.  Timed
 * phases step through the layers in the group net's own loop, the same
 * as shoal_net_forward / shoal_net_backward_notify. */
typedef struct {
  const char *layer;         /* borrowed from the sub-net */
  const char *type;
  gboolean connection;       /* concat / slice / split / bridge made by the partitioner or the net */
  double forward, backward;  /* seconds */
} ShoalLayerTiming;

void shoal_group_net_set_timing (ShoalGroupNet *group, gboolean on);
/* Worker w's layers in order; returns how many were written (at most n). */
guint shoal_group_net_timings (ShoalGroupNet *group, int worker, ShoalLayerTiming *out, guint n);

/* The partitioned net as Graphviz DOT: one cluster per worker, an edge
 * per source, bridges as dashed edges between clusters.  Newly allocated. */
char *shoal_group_net_to_dot (ShoalGroupNet *group);
/* Logs each original layer's partition dim and each worker's layers. */
void shoal_group_net_log_summary (ShoalGroupNet *group);

G_END_DECLS

#endif
