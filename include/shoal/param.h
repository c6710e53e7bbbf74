/* Params: a net's learned values, each named "<layer>/<param>"
 * ("fc1/weight"), all in one param store.  The store owns three flat
 * buffers - values, gradients, optimiser state - and every param is a
 * range of them (64-byte aligned), so a slice for a server or a save to
 * disk is a pointer range.  A store belongs to its net
 * (shoal_net_params); params and tensors from it are borrowed, valid
 * while the net lives. */
#ifndef SHOAL_PUBLIC_PARAM_H
#define SHOAL_PUBLIC_PARAM_H

#include <glib.h>

#include <shoal/rng.h>
#include <shoal/tensor.h>

G_BEGIN_DECLS

/* ---- initialisers ---------------------------------------------------------- */

typedef enum {
  SHOAL_INIT_CONSTANT,
  SHOAL_INIT_GAUSSIAN,
  SHOAL_INIT_UNIFORM,
  SHOAL_INIT_GAUSSIAN_SQRT_FAN_IN,   /* gaussian, std / sqrt (fan_in) */
  SHOAL_INIT_UNIFORM_SQRT_FAN_IN,    /* uniform in +- 1 / sqrt (fan_in) */
  SHOAL_INIT_GLOROT_UNIFORM,         /* "xavier" */
  SHOAL_INIT_GLOROT_NORMAL,
  SHOAL_INIT_COUNT
} ShoalInitKind;

/* How a param starts; a conf's <param>_init, _value, _mean, _std, _low,
 * _high keys override the layer's default. */
typedef struct {
  ShoalInitKind kind;
  float value;      /* constant */
  float mean, std;  /* gaussian kinds */
  float low, high;  /* uniform kinds */
} ShoalInitSpec;

/* ---- params ---------------------------------------------------------------- */

typedef struct _ShoalParam ShoalParam;
typedef struct _ShoalParamStore ShoalParamStore;

const char *shoal_param_name (const ShoalParam *param);        /* borrowed */
const ShoalShape *shoal_param_shape (const ShoalParam *param);  /* borrowed */
/* The values and the gradient (d loss / d value, which backward ADDS
 * into).  Borrowed; on a GPU net device memory. */
ShoalTensor *shoal_param_value (ShoalParam *param);
ShoalTensor *shoal_param_grad (ShoalParam *param);
/* Multipliers of the learning rate and weight decay for this param
 * (<param>_lr_scale, <param>_wd_scale). */
float shoal_param_lr_scale (const ShoalParam *param);
float shoal_param_wd_scale (const ShoalParam *param);
/* Whether the param is a statistic (shoal_layer_declare_statistic: a
 * running mean or variance its layer writes in forward), which is not
 * trained and never leaves the unit that computed it for a server. */
gboolean shoal_param_is_statistic (const ShoalParam *param);

/* ---- the store ------------------------------------------------------------- */

guint shoal_param_store_n_params (const ShoalParamStore *store);
/* Param i in declaration order (topological layer order), or NULL. */
ShoalParam *shoal_param_store_get (ShoalParamStore *store, guint i);
/* The param called `name`, or NULL. */
ShoalParam *shoal_param_store_find (ShoalParamStore *store, const char *name);
/* The flat host buffers, shoal_param_store_size floats each (padding
 * between params included): every param's values, and gradients.
 * Borrowed; a GPU net keeps its host copies here. */
float *shoal_param_store_values (ShoalParamStore *store);
float *shoal_param_store_grads (ShoalParamStore *store);
size_t shoal_param_store_size (const ShoalParamStore *store);

/* Initialises every param from its spec.  Each param draws from its own
 * stream derived from (seed, param name), so values do not depend on the
 * order of layers or on how a net is partitioned. */
void shoal_param_store_init_values (ShoalParamStore *store, guint64 seed);
/* Zeroes every gradient (backward adds into them). */
void shoal_param_store_zero_grads (ShoalParamStore *store);

/* ---- params by name, as bytes ---------------------------------------------- */

/* Every param of the store with its host values, in the format of
 * model files, checkpoints and `[job] init_from` files.  A new GBytes.
 * The layout, every integer and float little-endian, nothing padded:
 *   "SHOALPRM"               8 bytes, the magic
 *   u32 version              1
 *   u32 count                the params that follow
 *   count times:
 *     u32 name_len, name     name_len bytes, no NUL ("fc1/weight")
 *     u32 ndim               1 .. 4
 *     i32 dim[ndim]          the shape, batch-free (a dense weight: out, in)
 *     u64 n                  the product of the dims
 *     f32 values[n]          row-major (C order, as numpy's tobytes ())
 * So weights from another framework load by name: write one entry per
 * param in this layout (a numpy or torch tensor's bytes as they are, with
 * shoal's names and shapes: `shoal layers` lists each type's params, and
 * the recurrent layers use torch's names and layout). */
GBytes *shoal_param_store_to_bytes (const ShoalParamStore *store);

typedef enum {
  SHOAL_PARAMS_BY_NAME_ANY,   /* copy the params whose names match; at least one must */
  SHOAL_PARAMS_BY_NAME_ALL,   /* every param of the store must be in the bytes */
  SHOAL_PARAMS_EXACT          /* ALL, and every param of the bytes must be one of the store's:
                               * the bytes are this model's params, no other's */
} ShoalParamsMatch;

/* Copies params from bytes made by shoal_param_store_to_bytes into the
 * store's host values, by name; messages name `origin` (a file, a
 * workspace).  FALSE with:
 *  - SHOAL_ERROR_SHAPE: a param of both has another shape ("param
 *    fc1/weight is 10x784 in ORIGIN but 20x784 here");
 *  - SHOAL_ERROR_DATA: the bytes are damaged or of another format
 *    version, no name matches, (BY_NAME_ALL, EXACT) a param of the store
 *    is missing ("... they are another model's"), or (EXACT) the bytes
 *    hold params the store has not, named in the message.
 * On failure the store may hold some of the values.  *copied (may be
 * NULL) gets the number of params copied. */
gboolean shoal_param_store_load_bytes (ShoalParamStore *store, GBytes *bytes, const char *origin,
                                       ShoalParamsMatch match, int *copied, GError **error);

G_END_DECLS

#endif
