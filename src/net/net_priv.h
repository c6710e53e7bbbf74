/* What net.c and net_gpu.c share (internal to src/net). */
#ifndef SHOAL_NET_PRIV_H
#define SHOAL_NET_PRIV_H

#include "core/memory_budget.h"
#include "net/net.h"

G_BEGIN_DECLS

struct _ShoalNet {
  ShoalConf *conf;                /* borrowed */
  ShoalLayerContext ctx;
  GPtrArray *layers;              /* ShoalLayer *, topological order, owned */
  ShoalParamStore *store;         /* owned */
  ShoalLayer *input;
  ShoalMemoryBudget *budget;      /* borrowed (ShoalNetOptions.budget); may be NULL */
  ShoalMemoryCharge *charge;      /* during shoal_net_new: what the set-up was charged */
  guint64 charged;                /* bytes charged to budget, given back by shoal_net_free */
  guint64 params_charged;         /* during set-up: declared params charged ahead of the store */
  gboolean train_outputs;         /* the last forward was a train forward: backward may run */

  /* GPU nets (ctx.gpu != NULL), per layer index; NULL for layers without params */
  gboolean upload_every_forward;  /* forward uploads every param's values first */
  ShoalEvent **uploaded;          /* copy stream: the layer's param values are on the device */
  ShoalEvent **computed;          /* compute stream: the layer's backward is done */
  ShoalEvent **downloaded;        /* copy stream: its gradients are in staging */
  ShoalEvent *manual_upload;      /* the last shoal_net_upload_params */
  gboolean manual_pending;
  float *staging;                 /* pinned host, store->total floats: device gradients land here */
  gboolean params_resident;       /* shoal_net_keep_params_on_device: no param traffic in a step */
  gboolean grads_resident;        /* shoal_net_keep_grads_on_device: backward leaves them to the caller */
  ShoalEvent *forward_done;       /* shoal_net_train_step on such a net: the forward's outputs are in */
  ShoalEvent *inputs_done;        /* ...: the inputs' uploads are done (their host buffers free again) */
  GPtrArray *pinned_outs;         /* losses' and metrics' host outs, pinned memory the layers' outs view */
  double *clip_scratch;           /* device, 2 doubles: shoal_net_clip_gradients' sums */
  GError *device_error;           /* the first device error */
  gboolean step_failed;           /* the pending step could not be enqueued: its loss is NaN */

  /* CUDA graphs of the step (shoal_net_set_cuda_graph; net_gpu.c) */
  gboolean graph_wanted;          /* on, and not given up */
  ShoalStepGraph *graph;
  int graph_warmup;               /* full-batch eager steps made before the capture */
  guint64 graph_steps;            /* steps the graph ran (the captured one and the replays) */

  /* a step whose loss is read later (shoal_net_train_step_late) */
  gboolean step_pending;          /* begun; its loss and metrics not taken yet */
  double pending_loss;            /* where the step ran whole (CPU nets): its loss */
  gboolean snapshot_unread;       /* the snapshot holds a late step no call returned yet */
  gboolean snapshot_valid;        /* shoal_net_metrics reads `snapshot`, a taken step's values */
  double snapshot_loss;
  float *snapshot;                /* per layer index: a loss's or metric's out[0] */
};

/* Out's rows (and grad's) follow the first source's, unless the layer sets them. */
void shoal_net_follow_rows (ShoalLayer *layer);

/* GPU nets (net_gpu.c).  The GPU part of a layer's set-up, after
 * ops->setup; then, after every layer's, the events and staging of the
 * param traffic. */
gboolean shoal_net_gpu_setup_layer (ShoalNet *net, ShoalLayer *layer, GError **error);
gboolean shoal_net_gpu_prepare (ShoalNet *net, GError **error);
double shoal_net_gpu_forward (ShoalNet *net, ShoalPhase phase);
void shoal_net_gpu_backward (ShoalNet *net, ShoalParamsReadyFunc ready, gpointer user_data);
double shoal_net_gpu_train_step (ShoalNet *net, ShoalParamsReadyFunc ready, gpointer user_data);
/* A net whose params stay on the device: enqueues a training step (a
 * graph's replay where it can) and returns without waiting for it; on
 * the way it takes the step before (shoal_net_take_pending) once this
 * step's inputs and host half are done, before its forward can
 * overwrite that step's losses ... */
void shoal_net_gpu_train_step_begin (ShoalNet *net, ShoalParamsReadyFunc ready, gpointer user_data);
/* ... and this waits for that step's forward and returns its loss. */
double shoal_net_gpu_finish_step (ShoalNet *net);
/* A late step (shoal_net_train_step_late) not taken yet: its loss and
 * its losses' and metrics' values into the snapshot (a GPU net waits for
 * its forward first). */
void shoal_net_take_pending (ShoalNet *net);
/* Unpins what set-up pinned (before the layers' memory goes). */
void shoal_net_gpu_release (ShoalNet *net);

G_END_DECLS

#endif
