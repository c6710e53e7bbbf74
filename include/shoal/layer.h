/* Layers: the contract a layer type keeps, the accessors its functions
 * use, and the registry that makes a type usable in confs.
 *
 * A layer type is one const ShoalLayerOps table (a static that outlives
 * every net).  For each layer of a net, in topological order, the net
 * calls:
 *
 *   setup     read options (shoal_layer_opt_*), check the sources' shapes
 *             (shoal_layer_src_out), set the output shape
 *             (shoal_layer_set_out_shape), declare params
 *             (shoal_layer_declare_param) and allocate private buffers.
 *             On failure return FALSE with a GError made by
 *             shoal_layer_error (it names file, line, layer and key).  The
 *             net then allocates the output and, where some layer at or
 *             below has params, the output's gradient.
 *   forward   computes shoal_layer_out from the sources' outputs.  The
 *             batch may be smaller than at set-up (the last test batch):
 *             take the rows from shoal_tensor_rows of the first source;
 *             the net has already set the output's rows to the same
 *             (unless the type has SHOAL_LAYER_OWN_ROWS).
 *   backward  reads shoal_layer_grad (d loss / d out) and
 *             - ADDS (+=) into each param's gradient (shoal_param_grad), so
 *               that gradients accumulate over micro-batches and workers;
 *             - WRITES (=, not +=) d loss / d source i into
 *               shoal_layer_src_grad (layer, i), skipping sources for
 *               which it is NULL (they need none, e.g. the input).
 *             The net inserts a split layer where one output feeds several
 *             layers, so a source gradient has exactly one writer.
 *
 * Loss layers (SHOAL_LAYER_LOSS) have a 1-element output, the batch's mean
 * loss; their backward ignores shoal_layer_grad and seeds the gradient of
 * their sources scaled by shoal_layer_loss_scale.  Metric layers
 * (SHOAL_LAYER_METRIC) have a 1-element output reported with the loss.
 * Per-row labels travel beside the data (shoal_layer_label), made by input
 * layers.
 *
 * Every pointer the accessors return is borrowed from the layer's net and
 * valid while the net lives; tensors of a net on a GPU hold device memory.
 * shoal_layer_gradcheck checks a type numerically, including that its
 * backward adds into param gradients.  examples/custom-layer is a layer
 * type as a plugin, from ops table to `shoal run`. */
#ifndef SHOAL_PUBLIC_LAYER_H
#define SHOAL_PUBLIC_LAYER_H

#include <glib.h>

#include <shoal/conf.h>
#include <shoal/param.h>
#include <shoal/rng.h>
#include <shoal/tensor.h>

G_BEGIN_DECLS

typedef enum {
  SHOAL_PHASE_TRAIN,
  SHOAL_PHASE_TEST
} ShoalPhase;

typedef enum {
  SHOAL_LAYER_INPUT      = 1u << 0,  /* reads data from outside the net; no sources */
  SHOAL_LAYER_LOSS       = 1u << 1,  /* 1-element out: the batch's mean loss; seeds backward */
  SHOAL_LAYER_METRIC     = 1u << 2,  /* 1-element out reported each step, no backward */
  SHOAL_LAYER_OWN_ROWS   = 1u << 3,  /* sets out's rows itself in forward (inputs, losses) */
  SHOAL_LAYER_CONNECTION = 1u << 4,  /* joins partitions (split, slice, concat, bridges); the
                                      * partitioner inserts these where neighbours are cut differently */
  SHOAL_LAYER_CD         = 1u << 5   /* an RBM layer: with [job] alg = cd its train forward runs
                                      * the Gibbs chain and its backward ADDS the CD gradient,
                                      * averaged over loss_norm rows like a loss (layers/rbm.h) */
} ShoalLayerFlags;

#define SHOAL_LAYER_MAX_SRCS 8
#define SHOAL_LAYER_MAX_PARAMS 32  /* a stacked recurrent layer: 4 per level (layers/recurrent.h) */

typedef struct _ShoalLayer ShoalLayer;

/* Partition dims (docs/PARTITIONING.md). */
#define SHOAL_SPLIT_BATCH   (1u << 0)   /* partition_dim = 0: rows */
#define SHOAL_SPLIT_FEATURE (1u << 1)   /* partition_dim = 1: output units / filters */

/* How the partitioner may split a layer type among the workers of a group;
 * the layer says it, the partitioner never looks at type names.  All zero
 * (a type that says nothing): the layer runs whole on one worker.
 *  - batch split (dims & SHOAL_SPLIT_BATCH): each worker computes its
 *    share of the rows from the same share of its sources' rows.  An
 *    input layer reads its share when it names rows_key, the option that
 *    holds its batch rows (an int, or an int list whose first item is
 *    the rows).
 *  - feature split (dims & SHOAL_SPLIT_FEATURE): each worker computes a
 *    block of dim 1 (units, channels, filters).  With units_key (the int
 *    option holding the layer's output units: dense num_output, conv
 *    num_filters) a worker's part reads its whole input and gets its
 *    share of the units; without it the layer is element-wise or per
 *    channel: block j of its output comes from block j of its input.
 *  - refuse, when set, may still say no for a layer's options: it
 *    returns why the layer in conf group `group` cannot be split on dim
 *    (0 or 1) as a static string, or NULL when it can. */
typedef struct {
  guint dims;
  const char *units_key;
  const char *rows_key;
  const char *(*refuse) (ShoalConf *conf, const char *group, int dim);
} ShoalSplitRule;

/* A type's GPU path (see docs/GPU.md): the same contract with every
 * tensor in device memory, work enqueued on the net's compute stream. */
typedef struct {
  gboolean (*setup) (ShoalLayer *layer, GError **error);  /* may be NULL */
  void (*forward) (ShoalLayer *layer, ShoalPhase phase);
  void (*backward) (ShoalLayer *layer);                   /* NULL when ops->backward is */
  void (*finalize) (ShoalLayer *layer);                   /* may be NULL; runs before ops->finalize */
} ShoalLayerGpuOps;

typedef struct {
  const char *type;                 /* name in confs: "dense" */
  const char *summary;              /* one line for `shoal layers` */
  guint flags;                      /* ShoalLayerFlags */
  ShoalSplitRule split;             /* how the partitioner may split it */
  int min_srcs, max_srcs;           /* 0 .. SHOAL_LAYER_MAX_SRCS */
  const ShoalOption *options;       /* the type's keys, SHOAL_OPTION_END-terminated (may be NULL) */
  const char *const *param_names;   /* NULL-terminated ("weight", "bias"), or NULL */
  gsize priv_size;                  /* zeroed private state at shoal_layer_priv */
  gboolean (*setup) (ShoalLayer *layer, GError **error);
  void (*forward) (ShoalLayer *layer, ShoalPhase phase);
  void (*backward) (ShoalLayer *layer);           /* NULL: no backward (inputs, metrics) */
  void (*finalize) (ShoalLayer *layer);           /* frees what setup allocated; may be NULL */
  /* Input layers: records available to this shard in a phase; else NULL. */
  gint64 (*num_records) (ShoalLayer *layer, ShoalPhase phase);
  /* Input layers that take rows from the program (shoal_net_feed): rows
   * 1 .. batch of raw input (and labels, may be NULL) for the next
   * forward.  NULL: the type takes none. */
  gboolean (*feed) (ShoalLayer *layer, const float *data, int rows, const float *labels,
                    GError **error);
  /* State that is no param but must survive a checkpoint so that a
   * resumed run continues exactly (a data cursor, a hidden state).
   * save_state returns a new GBytes; load_state runs before the first
   * forward of a resumed run.  Types without them get their random
   * stream (shoal_layer_rng) saved. */
  GBytes *(*save_state) (ShoalLayer *layer);
  gboolean (*load_state) (ShoalLayer *layer, GBytes *state, GError **error);
  const ShoalLayerGpuOps *gpu;      /* the GPU path, or NULL (see shoal_layer_gpu_ops) */
} ShoalLayerOps;

/* ---- what a layer's functions use -------------------------------------------- */

const char *shoal_layer_name (const ShoalLayer *layer);
const ShoalLayerOps *shoal_layer_ops (const ShoalLayer *layer);
int shoal_layer_n_srcs (const ShoalLayer *layer);
/* Source i (0 .. n_srcs - 1), or NULL. */
ShoalLayer *shoal_layer_src (const ShoalLayer *layer, int i);
/* shoal_layer_out (shoal_layer_src (layer, i)). */
ShoalTensor *shoal_layer_src_out (const ShoalLayer *layer, int i);
/* Where backward writes d loss / d source i; NULL when source i needs no
 * gradient (then skip it). */
ShoalTensor *shoal_layer_src_grad (const ShoalLayer *layer, int i);
/* This layer's output, and d loss / d output (NULL when nothing at or
 * below this layer learns: then the net never calls backward). */
ShoalTensor *shoal_layer_out (ShoalLayer *layer);
ShoalTensor *shoal_layer_grad (ShoalLayer *layer);
/* Per-row labels this layer carries (input layers make them), or NULL. */
ShoalTensor *shoal_layer_label (ShoalLayer *layer);
/* setup: the output shape, batch first (dims > 0, at most 2^31 values;
 * the net's set-up fails naming the layer otherwise).  Only in setup:
 * called once the net allocated the output, or with an ndim outside
 * 0 .. SHOAL_MAX_DIMS, it is a programmer's error (a critical, the shape
 * stays). */
void shoal_layer_set_out_shape (ShoalLayer *layer, const ShoalShape *shape);
/* Param i in declaration order, or NULL. */
int shoal_layer_n_params (const ShoalLayer *layer);
ShoalParam *shoal_layer_param (const ShoalLayer *layer, int i);
/* ops->priv_size zeroed bytes, owned by the net. */
void *shoal_layer_priv (ShoalLayer *layer);
/* The layer's own random stream (dropout masks, shuffles), seeded from
 * the job seed, the worker and the layer, and checkpointed. */
ShoalRng *shoal_layer_rng (ShoalLayer *layer);
/* Loss layers: loss_weight / the rows the loss is averaged over (the
 * whole group's batch in a partitioned net, else `rows`). */
float shoal_layer_loss_scale (const ShoalLayer *layer, int rows);
/* Where the layer's net computes. */
ShoalDevice shoal_layer_device (const ShoalLayer *layer);

/* Option getters for the type's own table (ops->options); the conf was
 * checked against it, so these cannot fail, and absent keys give the
 * table's default.  Strings and lists are newly allocated (g_free).  A
 * key that is not in the table is a programmer's error: a critical, and
 * 0, FALSE, NULL or an empty list (*n = 0). */
gint64 shoal_layer_opt_int (const ShoalLayer *layer, const char *key);
double shoal_layer_opt_float (const ShoalLayer *layer, const char *key);
gboolean shoal_layer_opt_bool (const ShoalLayer *layer, const char *key);
char *shoal_layer_opt_string (const ShoalLayer *layer, const char *key);
gint *shoal_layer_opt_int_list (const ShoalLayer *layer, const char *key, gsize *n);
gboolean shoal_layer_opt_is_set (const ShoalLayer *layer, const char *key);

/* Sets *error to SHOAL_ERROR_CONF "FILE:LINE: [layer NAME] KEY: message"
 * (key may be NULL). */
void shoal_layer_error (const ShoalLayer *layer, GError **error, const char *key,
                        const char *format, ...) G_GNUC_PRINTF (4, 5);

/* setup: declares param `pname` (one of ops->param_names) with `shape`
 * (ndim 1 .. SHOAL_MAX_DIMS); its init, lr_scale and wd_scale come from
 * the conf keys <pname>_init, <pname>_std, ... with `default_init`
 * (required, copied) where the conf says nothing.
 * fan_in and fan_out feed the scaled initialisers.  Returns the param
 * (owned by the net's store; its tensors exist once setup of every layer
 * is done), or NULL with SHOAL_ERROR_CONF when the conf's init keys are
 * wrong. */
ShoalParam *shoal_layer_declare_param (ShoalLayer *layer, const char *pname,
                                       const ShoalShape *shape, int fan_in, int fan_out,
                                       const ShoalInitSpec *default_init, GError **error);
/* setup: declares a statistic `pname` (one of ops->param_names): values
 * the layer writes in its own forward and reads at test time (a running
 * mean or variance), with lr_scale and wd_scale 0 whatever the conf says.
 * Such a value is the unit's own, like PyTorch's buffers: no updater
 * moves it, servers never hold it (a pull cannot overwrite it), and it
 * is saved with the unit's checkpoint state and by name with the params.
 * Init keys as shoal_layer_declare_param. */
ShoalParam *shoal_layer_declare_statistic (ShoalLayer *layer, const char *pname,
                                           const ShoalShape *shape, const ShoalInitSpec *default_init,
                                           GError **error);

/* For layers of (scores, labels) sources - losses, metrics: checks that
 * the layer has two sources and source 1 carries labels, one per row of
 * source 0; else FALSE with a SHOAL_ERROR_CONF naming the layer. */
gboolean shoal_layer_check_labels (const ShoalLayer *layer, GError **error);
/* The same, for scores of one or several time steps: a row of source 1
 * holds *steps labels (1 for one label per row) and a row of source 0
 * *steps x *classes scores, step after step; else FALSE with a
 * SHOAL_ERROR_CONF naming the layer.  steps and classes are written on
 * success only. */
gboolean shoal_layer_check_step_labels (const ShoalLayer *layer, int *steps, int *classes, GError **error);
/* For sliding-window layers (conv, pooling) of an h x w input padded by
 * ph, pw on each side: checks, in 64-bit arithmetic, that the padded
 * input holds the kh x kw window and has at most G_MAXINT positions, so
 * that every size derived from it (output plane, window offsets) fits
 * an int; else FALSE with a SHOAL_ERROR_CONF naming the layer and `key`
 * ("kernel", "pad").  `window` names the window in the message. */
gboolean shoal_layer_check_window (const ShoalLayer *layer, const char *key, const char *window, int h, int w,
                                   int kh, int kw, int ph, int pw, GError **error);

/* ---- recurrent layers' carried state ------------------------------------------- */

/* A gru or lstm layer with stateful = true starts each batch of a phase
 * from the final states of its last batch of that phase, row by row
 * (each row one stream).  Level `level` (0 = the lowest of num_layers)
 * carries batch x hidden_size floats, row r the state of row r's stream:
 * torch.nn.GRU's h_n[level], and with cell = TRUE torch.nn.LSTM's
 * c_n[level]; `batch` is the batch the layer was set up with, n must be
 * batch * hidden_size.  get copies the state into out (after a forward:
 * the state the next forward starts from); set copies `values` in, so
 * that the next forward of `phase` starts from them (zeros: afresh).
 * FALSE with SHOAL_ERROR_CONF (not a recurrent layer, no such level, a
 * cell state of a GRU, or - set only - stateful = false, whose batches
 * all start from zeros) or SHOAL_ERROR_SHAPE (n). */
gboolean shoal_layer_get_carried_state (ShoalLayer *layer, ShoalPhase phase, int level, gboolean cell,
                                        float *out, size_t n, GError **error);
gboolean shoal_layer_set_carried_state (ShoalLayer *layer, ShoalPhase phase, int level, gboolean cell,
                                        const float *values, size_t n, GError **error);

/* ---- the registry ----------------------------------------------------------- */

/* The ops of a type known by name (built in, from the data module, or
 * registered), or NULL. */
const ShoalLayerOps *shoal_layer_lookup (const char *type);
/* Makes a type usable in confs.  `ops` must outlive every net (a static
 * const).  FALSE with:
 *  - SHOAL_ERROR_CONF: the type name is taken ("layer type 'x' is already
 *    registered");
 *  - SHOAL_ERROR_INTERNAL: the table breaks the contract (no type, setup
 *    or forward; sources outside 0 .. SHOAL_LAYER_MAX_SRCS; an options
 *    table with a key twice, a type outside ShoalOptType, or a default
 *    that is not a value of its key's type, bounds and choices; split
 *    keys that are not int options of the type). */
gboolean shoal_layer_register (const ShoalLayerOps *ops, GError **error);
/* Every known type name, sorted: a newly allocated NULL-terminated array
 * of borrowed names (g_free the array only). */
const char **shoal_layer_types (void);
/* The GPU path of a type: ops->gpu, else one registered for its name
 * (the built-ins' in a CUDA build), else NULL. */
const ShoalLayerGpuOps *shoal_layer_gpu_ops (const ShoalLayerOps *ops);
void shoal_layer_register_gpu (const char *type, const ShoalLayerGpuOps *gpu);

/* Keys every [layer NAME] group may hold besides the type's options, and
 * the <param>_<suffix> keys of every param (for help text). */
extern const ShoalOption shoal_layer_common_options[];
extern const ShoalOption shoal_param_options[];

/* ---- gradient checks -------------------------------------------------------- */

typedef struct {
  float eps;       /* finite-difference step; default 1e-2 */
  float rtol;      /* default 2e-2 */
  float atol;      /* default 1e-3 */
  float kink;      /* default 5e-2: elements whose one-sided differences disagree by more
                    * (relative) straddle a kink (ReLU at 0, a max-pool tie) and are skipped */
  int max_checks;  /* elements checked per tensor, spread evenly; 0 = all; default 200 */
  ShoalPhase phase;  /* default SHOAL_PHASE_TRAIN */
} ShoalGradcheckOptions;

void shoal_gradcheck_options_init (ShoalGradcheckOptions *opts);

/* Checks layer `layer` of the net described by conf_text (its inputs:
 * feed layers, filled with gaussian data; params initialised with
 * `seed`).  Uses J = sum_i out[i] * r[i] with r a fixed random vector (J
 * = out for a loss) and compares backward's gradients with central finite
 * differences for every param of the layer and every source that needs a
 * gradient (a feed with need_grad = true); a mismatch is
 * |analytic - numeric| > atol + rtol * max(|analytic|, |numeric|).  It
 * also checks the contract's accumulation: with every param gradient
 * pre-filled, backward must leave pre-fill + gradient, and two backwards
 * twice the gradient.  Every forward of the check starts the layer from
 * the same state: its random stream, and for a layer with ops->save_state
 * (a stateful GRU or LSTM) the state the net's first forward left, so
 * the carried state is checked from a non-zero one.  A feed that an
 * embedding reads holds ids drawn from [0, vocab_size), not gaussian
 * values.  *checked (may be NULL) gets the number of elements
 * compared.  FALSE with SHOAL_ERROR_GRADIENT listing the first mismatches
 * ("layer act: d/d src0 element 17: analytic 0.31, numeric 0.12"),
 * SHOAL_ERROR_CONF when the net has no such layer, it has no backward,
 * or there is nothing to compare (no params, and no source needs a
 * gradient: a pass would check nothing), or the net's own error when
 * conf_text does not build.  opts may be NULL; a phase that is neither
 * train nor test, an eps that is not > 0 or a max_checks below 0 is a
 * programmer's error (a critical, FALSE). */
gboolean shoal_layer_gradcheck (const char *conf_text, const char *layer,
                                const ShoalGradcheckOptions *opts, guint64 seed, int *checked,
                                GError **error);
/* The same on layer `layer` of a net that exists (its inputs fed, its
 * params set), e.g. to check a layer inside a larger model.  FALSE with
 * SHOAL_ERROR_CONF (no such layer, no backward, nothing to compare) or
 * SHOAL_ERROR_GRADIENT as above.  (ShoalNet, shoal/net.h's, is declared
 * here: a typedef written twice is C11, and the headers are C99 too.) */
typedef struct _ShoalNet ShoalNet;
gboolean shoal_net_gradcheck (ShoalNet *net, const char *layer, const ShoalGradcheckOptions *opts,
                              int *checked, GError **error);

G_END_DECLS

#endif
