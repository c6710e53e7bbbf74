/* The layer contract, inside shoal.  The contract itself - setup,
 * forward, backward (param gradients ADDED to, source gradients
 * WRITTEN), loss and metric layers, labels - is written once, at the top
 * of the public shoal/layer.h; built-in layers keep it reading the struct
 * below directly, where plugins use the accessors: layer->out for
 * shoal_layer_out, layer->grad for shoal_layer_grad, srcs[i]->out and
 * src_grad[i] for shoal_layer_src_out and _src_grad, loss_weight /
 * shoal_layer_loss_rows for shoal_layer_loss_scale.
 *
 * A built-in type is one file in src/layers exporting one const
 * ShoalLayerOps (named shoal_layer_<type>_ops) listed in
 * src/layers/layer_list.h.  Labels pass through the layers that keep rows
 * (split, slice, bridge).
 *
 * GPU path (shoal_layer_gpu_ops: ops->gpu or a registered one; NULL = none).  On a net built for a GPU
 * (ShoalNetOptions.device) the net runs ops->setup as on the CPU (shapes,
 * params), allocates out and grad in device memory - except the
 * 1-element out of loss and metric layers, which stays on the host - and
 * then gpu->setup, which makes the layer's device state in gpu_priv and
 * moves to the device whatever ops->setup left on the host (labels, input
 * data; views of device memory get the device in their tag).
 * gpu->forward and gpu->backward keep the contract above with every
 * tensor in device memory: srcs' out, grad, src_grad, label, and the
 * params' value and grad views (the param store's host buffers are the
 * net's business, see net/net.h).  They enqueue work on the net's
 * compute stream (layer->ctx->gpu) and do not wait for it; a loss or
 * metric layer enqueues the copy of its value into its host out.  A
 * layer type without a GPU path on a GPU net fails the net's set-up,
 * naming the layer: there is no silent CPU fallback. */
#ifndef SHOAL_LAYER_H
#define SHOAL_LAYER_H

#include <glib.h>

#include <shoal/layer.h>

#include "core/conf.h"
#include "core/device.h"
#include "core/param.h"
#include "core/rng.h"
#include "core/tensor.h"

G_BEGIN_DECLS

/* What every layer of one net shares: where data comes from, seeds. */
typedef struct {
  guint64 seed;          /* job seed; layers derive their own streams */
  int shard_index;       /* this reader is shard_index of shard_count */
  int shard_count;
  int worker;            /* worker id inside the group, group id */
  int group;
  ShoalDevice device;    /* where the net computes; CPU unless built for a GPU */
  ShoalDeviceContext *gpu; /* GPU nets: streams and library handles; NULL on the CPU */
  int cd_k;              /* Gibbs steps of SHOAL_LAYER_CD layers ([job] alg = cd); 0: trained by BP */
} ShoalLayerContext;

struct _ShoalLayer {
  char *name;                       /* owned */
  const ShoalLayerOps *ops;
  ShoalConf *conf;                  /* borrowed: where options are read */
  char *group;                      /* "layer NAME", owned */
  const ShoalLayerContext *ctx;     /* borrowed, owned by the net */
  int partition_dim;                /* 0 batch, 1 feature, -1 whole */

  ShoalLayer *srcs[SHOAL_LAYER_MAX_SRCS];
  ShoalTensor *src_grad[SHOAL_LAYER_MAX_SRCS];  /* where backward writes d/d srcs[i]; NULL = not needed */
  int nsrcs;

  ShoalTensor out;                  /* (rows, ...) */
  ShoalTensor grad;                 /* d loss / d out; empty when no one upstream learns */
  ShoalTensor label;                /* (rows) labels, when this layer carries them */
  gboolean needs_grad;              /* some layer at or below this one has params */

  ShoalParamStore *store;           /* borrowed, for declaring params */
  ShoalParam *params[SHOAL_LAYER_MAX_PARAMS];
  int nparams;

  ShoalRng rng;                     /* this layer's own stream (dropout, shuffling) */
  float loss_weight;                /* loss layers; default 1 */
  int loss_norm;                    /* rows the loss is averaged over; 0 = this batch's rows */
  void *priv;                       /* ops->priv_size zeroed bytes, owned by the net */
  const ShoalLayerGpuOps *gpu;      /* GPU nets: the path it runs (shoal_layer_gpu_ops), set by the net */
  void *gpu_priv;                   /* GPU nets: state of that path, made by its setup, freed by its finalize */
};

/* Out of memory in a layer: moves `local` (taken) into error with the
 * layer's place and `what` in front ("mlp.conf:31: [layer fc1] output
 * 64x9000000: out of memory allocating ... bytes (2.1 GiB)"), keeping its
 * code (SHOAL_ERROR_MEMORY). */
void shoal_layer_error_nomem (const ShoalLayer *layer, GError **error, GError *local,
                              const char *what);
/* A layer's own float buffer (zero-filled, 64-byte aligned, free with
 * shoal_free_aligned) whose size the conf decides: NULL with an error
 * naming the layer, `what` and the bytes when memory is short or the
 * net's budget would be crossed (core/memory_budget.h). */
float *shoal_layer_alloc_floats (const ShoalLayer *layer, size_t count, const char *what,
                                 GError **error);
/* The same for a tensor the layer owns (out, label): FALSE with an error
 * naming the layer, `what`, the shape and the bytes. */
gboolean shoal_layer_alloc_tensor (const ShoalLayer *layer, ShoalTensor *t, const ShoalShape *shape,
                                   const char *what, GError **error);

/* An int option that falls back to another when it holds `unset`
 * (kernel_h = 0: kernel; pad_h = -1: pad). */
int shoal_layer_opt_int_or (const ShoalLayer *layer, const char *key, int unset, const char *fallback);

/* The rows a loss (or a CD layer's error) of `rows` rows is averaged
 * over: loss_norm when set (a partitioned batch's part divides by the
 * whole batch), else the rows, at least 1.  The one place of the rule:
 * forwards divide their sum by it, backwards scale by
 * shoal_layer_loss_scale (loss_weight / this). */
int shoal_layer_loss_rows (const ShoalLayer *layer, int rows);

/* [begin, end) of the layer's params in the store, statistics left out
 * (a layer declares its params together, so they are contiguous; its
 * statistics lie in the store's tail); FALSE when it has none but
 * statistics. */
gboolean shoal_layer_param_range (const ShoalLayer *layer, size_t *begin, size_t *end);

G_END_DECLS

#endif
