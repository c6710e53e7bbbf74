/* The layer contract.
 *
 * A layer type is one file in src/layers exporting one const ShoalLayerOps
 * (named shoal_layer_<type>_ops) listed in src/layers/layer_list.h.  The
 * net calls, per layer, in topological order:
 *
 *   setup     read options (shoal_layer_opt_*), check the sources' shapes,
 *             set layer->out.shape (batch first), declare params with
 *             shoal_layer_declare_param, allocate private buffers.
 *             Failures return FALSE with a GError made by shoal_layer_error.
 *             The net then allocates out (unless setup bound it to a view)
 *             and, where some upstream layer has params, grad.
 *   forward   computes out from srcs[i]->out.  The batch may be smaller
 *             than at set-up (last test batch): read the rows from
 *             shoal_tensor_rows (&srcs[0]->out); the net has already set
 *             out's rows to the same (unless SHOAL_LAYER_OWN_ROWS).
 *   backward  reads layer->grad (d loss / d out) and
 *             - ADDS (+=) into each param's grad (so gradients accumulate
 *               over micro-batches and workers), and
 *             - WRITES (=, not +=) d loss / d srcs[i]->out into
 *               *layer->src_grad[i], skipping sources whose src_grad[i] is
 *               NULL (they need no gradient, e.g. the input layer).
 *             Fan-out is handled by the split layer the net inserts, so a
 *             src_grad is written by exactly one consumer.
 *
 * Loss layers (SHOAL_LAYER_LOSS) have a 1-element out holding the mean loss
 * of the batch; their backward ignores layer->grad and seeds the gradient,
 * scaled by loss_weight / loss_norm.  Metric layers (SHOAL_LAYER_METRIC,
 * e.g. accuracy) have a 1-element out reported with the loss.
 * Per-row labels travel in `label` (shape: rows), made by input layers and
 * passed through by layers that keep rows (split, slice, bridge).
 *
 * GPU path (ops->gpu, NULL = none).  On a net built for a GPU
 * (ShoalNetOptions.device) the net runs ops->setup as on the CPU (shapes,
 * params), allocates out and grad in device memory - except the
 * 1-element out of loss and metric layers, which stays on the host - and
 * then gpu->setup, which makes the layer's device state in gpu_priv and
 * moves to the device whatever ops->setup left on the host (labels, input
 * data; views of device memory get the device in their tag).
 * gpu->forward and gpu->backward keep the contract above with every
 * tensor in device memory: srcs' out, grad, src_grad, label, and the
 * params' value and grad views (the param store's host buffers are the
 * net's business, see partition/net.h).  They enqueue work on the net's
 * compute stream (layer->ctx->gpu) and do not wait for it; a loss or
 * metric layer enqueues the copy of its value into its host out.  A
 * layer type without a GPU path on a GPU net fails the net's set-up,
 * naming the layer: there is no silent CPU fallback. */
#ifndef SHOAL_LAYER_H
#define SHOAL_LAYER_H

#include <glib.h>

#include "core/conf.h"
#include "core/device.h"
#include "core/param.h"
#include "core/rng.h"
#include "core/tensor.h"

G_BEGIN_DECLS

typedef enum {
  SHOAL_PHASE_TRAIN,
  SHOAL_PHASE_TEST
} ShoalPhase;

/* Partition dims a layer can be split on (issue: partitioning). */
#define SHOAL_SPLIT_BATCH   (1u << 0)   /* partition_dim = 0: rows */
#define SHOAL_SPLIT_FEATURE (1u << 1)   /* partition_dim = 1: output units / filters */

typedef enum {
  SHOAL_LAYER_INPUT    = 1u << 0,  /* reads data from outside the net; no sources */
  SHOAL_LAYER_LOSS     = 1u << 1,  /* 1-element out: the batch's mean loss; seeds backward */
  SHOAL_LAYER_METRIC   = 1u << 2,  /* 1-element out reported each step, no backward */
  SHOAL_LAYER_OWN_ROWS = 1u << 3,  /* sets out's rows itself in forward (inputs, losses) */
  SHOAL_LAYER_CD       = 1u << 4   /* an RBM layer: with ctx->cd_k > 0 (`[job] alg = cd`) its train
                                    * forward runs the Gibbs chain and its backward ADDS the CD
                                    * gradient, averaged over loss_norm rows like a loss */
} ShoalLayerFlags;

#define SHOAL_LAYER_MAX_SRCS 8
#define SHOAL_LAYER_MAX_PARAMS 32  /* a stacked recurrent layer: 4 per level */

typedef struct _ShoalLayer ShoalLayer;

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

/* A layer type's GPU path; see the contract at the top. */
typedef struct {
  gboolean (*setup) (ShoalLayer *layer, GError **error);  /* may be NULL */
  void (*forward) (ShoalLayer *layer, ShoalPhase phase);
  void (*backward) (ShoalLayer *layer);                   /* NULL when ops->backward is */
  void (*finalize) (ShoalLayer *layer);                   /* may be NULL; runs before ops->finalize */
} ShoalLayerGpuOps;

typedef struct {
  const char *type;                 /* name in confs: "dense" */
  const char *summary;              /* one line for `shoal layers` / help */
  guint flags;                      /* ShoalLayerFlags */
  guint split_dims;                 /* SHOAL_SPLIT_* this layer supports */
  int min_srcs, max_srcs;
  const ShoalOption *options;       /* layer keys, SHOAL_OPTION_END-terminated */
  const char *const *param_names;   /* NULL-terminated ("weight", "bias"), or NULL */
  gsize priv_size;                  /* zeroed private state at layer->priv */
  gboolean (*setup) (ShoalLayer *layer, GError **error);
  void (*forward) (ShoalLayer *layer, ShoalPhase phase);
  void (*backward) (ShoalLayer *layer);           /* NULL: no backward (inputs, metrics) */
  void (*finalize) (ShoalLayer *layer);           /* frees what setup allocated; may be NULL */
  /* Input layers: records available to this shard in a phase; else NULL. */
  gint64 (*num_records) (ShoalLayer *layer, ShoalPhase phase);
  /* State that is no param but must survive a checkpoint so that a resumed
   * run continues exactly (a data cursor).  save_state returns a new
   * GBytes; load_state runs before the first forward of a resumed run.
   * Layers without them get their random stream (layer->rng) saved. */
  GBytes *(*save_state) (ShoalLayer *layer);
  gboolean (*load_state) (ShoalLayer *layer, GBytes *state, GError **error);
  const ShoalLayerGpuOps *gpu;      /* GPU path, or NULL: built-ins write SHOAL_LAYER_GPU (type) */
} ShoalLayerOps;

/* The GPU path of built-in type `type` (shoal_layer_<type>_gpu, defined
 * in src/gpu) in a CUDA build (make CUDA=1), NULL otherwise. */
#ifdef SHOAL_CUDA
#define SHOAL_LAYER_GPU(type) (&shoal_layer_##type##_gpu)
#else
#define SHOAL_LAYER_GPU(type) NULL
#endif
#define SHOAL_LAYER(type) extern const ShoalLayerGpuOps shoal_layer_##type##_gpu;
#include "layers/layer_list.h"
#undef SHOAL_LAYER

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
  void *gpu_priv;                   /* GPU nets: state of ops->gpu, made by its setup, freed by its finalize */
};

/* Option getters for this layer's own table (ops->options); defaults apply.
 * Strings and lists are newly allocated (g_free). */
gint64 shoal_layer_opt_int (const ShoalLayer *layer, const char *key);
double shoal_layer_opt_float (const ShoalLayer *layer, const char *key);
gboolean shoal_layer_opt_bool (const ShoalLayer *layer, const char *key);
char *shoal_layer_opt_string (const ShoalLayer *layer, const char *key);
gint *shoal_layer_opt_int_list (const ShoalLayer *layer, const char *key, gsize *n);
gboolean shoal_layer_opt_is_set (const ShoalLayer *layer, const char *key);

/* Sets a SHOAL_ERROR_SHAPE / _CONF error naming the file, line and layer. */
void shoal_layer_error (const ShoalLayer *layer, GError **error, const char *key,
                        const char *format, ...) G_GNUC_PRINTF (4, 5);

/* Declares param `pname` (one of ops->param_names) of this layer.  Its
 * init, lr_scale and wd_scale come from the conf keys <pname>_init,
 * <pname>_std, ... with `default_init` where the conf says nothing.
 * Returns the param (owned by the store), NULL with error set when the
 * conf's init keys are wrong. */
ShoalParam *shoal_layer_declare_param (ShoalLayer *layer, const char *pname,
                                       const ShoalShape *shape, int fan_in, int fan_out,
                                       const ShoalInitSpec *default_init, GError **error);

/* For layers of (scores, labels) sources - losses, metrics: checks that
 * srcs[1] carries labels, one per row of srcs[0]; else a set-up error. */
gboolean shoal_layer_check_labels (const ShoalLayer *layer, GError **error);

/* [begin, end) of the layer's params in the store (a layer declares its
 * params together, so they are contiguous); FALSE when it has none. */
gboolean shoal_layer_param_range (const ShoalLayer *layer, size_t *begin, size_t *end);

/* Registry.  Built-in types are in a static table; applications may add
 * their own before building a net.  Returns NULL for an unknown type. */
const ShoalLayerOps *shoal_layer_lookup (const char *type);
/* Fails when the type name is taken or the table is malformed.  The ops
 * table must outlive every net (use a static const). */
gboolean shoal_layer_register (const ShoalLayerOps *ops, GError **error);
/* Newly allocated NULL-terminated list of type names (g_free the array only). */
const char **shoal_layer_types (void);

/* Keys every [layer NAME] group may hold besides the layer's options. */
extern const ShoalOption shoal_layer_common_options[];
/* Keys <pname>_<suffix> for every param name: init, value, mean, std, low,
 * high, lr_scale, wd_scale. */
extern const ShoalOption shoal_param_options[];

G_END_DECLS

#endif
