/* A layer type of your own as a shoal plugin: swish, y = x * sigmoid(beta * x)
 * (Ramachandran et al. 2017), an activation shoal does not have.
 *
 * Built as a shared library against the installed shoal, with nothing but
 * the public header:
 *
 *   cc -std=c11 -O2 -fPIC -shared -o libswish.so swish.c \
 *     $(pkg-config --cflags --libs shoal) -lm
 *
 * then usable in any conf as `type = swish`:
 *
 *   shoal run swish.conf --plugin ./libswish.so
 *
 * or from a program with shoal_plugin_load ("./libswish.so", &error).
 * See README.md next to this file. */
#include <shoal/shoal.h>

#include <math.h>

/* Options are declared once in a table: the net checks a conf's keys and
 * values against it (unknown keys, bounds) with file:line errors, and
 * `shoal layers` shows it as help. */
static const ShoalOption swish_options[] = {
  { "beta", SHOAL_OPT_FLOAT, "1", 0.01, 100, NULL, "sharpness: a large beta approaches ReLU" },
  SHOAL_OPTION_END
};

/* Per-layer state at shoal_layer_priv: ops->priv_size zeroed bytes that
 * the net owns and frees. */
typedef struct {
  float beta;
} SwishPriv;

static gboolean
swish_setup (ShoalLayer *layer, GError **error)
{
  SwishPriv *p = shoal_layer_priv (layer);
  (void) error;  /* the option table already checked beta's bounds */
  p->beta = (float) shoal_layer_opt_float (layer, "beta");
  /* element-wise: the output has the input's shape; the net allocates it
   * (and its gradient where something below learns) after setup */
  shoal_layer_set_out_shape (layer, shoal_tensor_shape (shoal_layer_src_out (layer, 0)));
  return TRUE;
}

static inline float
sigmoidf (float z)
{
  return 1.0f / (1.0f + expf (-z));
}

static void
swish_forward (ShoalLayer *layer, ShoalPhase phase)
{
  const SwishPriv *p = shoal_layer_priv (layer);
  const float *restrict x = shoal_tensor_data (shoal_layer_src_out (layer, 0));
  ShoalTensor *out = shoal_layer_out (layer);
  float *restrict y = shoal_tensor_data (out);
  /* the net has set out's rows to this batch's (the last one may be short) */
  size_t n = shoal_tensor_count (out);
  (void) phase;
  for (size_t i = 0; i < n; i++)
    y[i] = x[i] * sigmoidf (p->beta * x[i]);
}

/* dy/dx = s + beta * x * s * (1 - s), s = sigmoid(beta * x).  The input is
 * still there, so s is computed again instead of kept from the forward. */
static void
swish_backward (ShoalLayer *layer)
{
  ShoalTensor *dst = shoal_layer_src_grad (layer, 0);
  if (dst == NULL)  /* nothing below needs a gradient */
    return;
  const SwishPriv *p = shoal_layer_priv (layer);
  const float *restrict x = shoal_tensor_data (shoal_layer_src_out (layer, 0));
  const float *restrict dy = shoal_tensor_data (shoal_layer_grad (layer));
  float *restrict dx = shoal_tensor_data (dst);
  size_t n = shoal_tensor_count (shoal_layer_out (layer));
  for (size_t i = 0; i < n; i++)
    {
      float s = sigmoidf (p->beta * x[i]);
      dx[i] = dy[i] * (s + p->beta * x[i] * s * (1.0f - s));  /* written, not added */
    }
}

/* static const: the registry keeps the pointer for the life of the
 * process (a loaded plugin is never unloaded).  Element-wise, so a
 * partitioned group may split it by rows (batch) or by features: with no
 * units_key, block j of the output comes from block j of the input. */
static const ShoalLayerOps swish_ops = {
  .type = "swish",
  .summary = "x * sigmoid(beta * x) (plugin: examples/custom-layer)",
  .split = { .dims = SHOAL_SPLIT_BATCH | SHOAL_SPLIT_FEATURE },
  .min_srcs = 1,
  .max_srcs = 1,
  .options = swish_options,
  .priv_size = sizeof (SwishPriv),
  .setup = swish_setup,
  .forward = swish_forward,
  .backward = swish_backward,
};

/* Runs once per process when the plugin is loaded. */
static gboolean
swish_init (GError **error)
{
  return shoal_layer_register (&swish_ops, error);
}

SHOAL_PLUGIN_DEFINE ("swish", "the swish activation x * sigmoid(beta * x)", swish_init);
