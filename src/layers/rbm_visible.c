/* The rbm_visible layer: the visible units of an RBM (rbm.h).  Its out is
 * its source's rows flattened, v0 of the chain, for the rbm_hidden layer
 * above; its param is the visible bias.  Backward turns what rbm_hidden
 * wrote into its gradient, (vk - v0) / n, into the bias gradient.  CD is
 * local to the RBM, so no gradient goes further down: layers below (the
 * lower RBMs' encoders of a stack) stay as they are. */
#include "layers/rbm.h"
#include "layers/split.h"

#include <string.h>

typedef struct {
  ShoalRbmUnits units;
  int visible;
} RbmVisiblePriv;

static const char *const rbm_visible_params[] = { "bias", NULL };

static const ShoalOption rbm_visible_options[] = {
  { "units", SHOAL_OPT_STRING, "binary", SHOAL_UNBOUNDED, "binary|gaussian",
    "binary: Bernoulli units with probabilities in [0, 1]; gaussian: unit-variance linear units "
    "(standardise the data)" },
  SHOAL_OPTION_END
};

static gboolean
rbm_visible_setup (ShoalLayer *layer, GError **error)
{
  RbmVisiblePriv *p = layer->priv;
  const ShoalTensor *x = &layer->srcs[0]->out;
  char *units = shoal_layer_opt_string (layer, "units");
  p->units = strcmp (units, "gaussian") == 0 ? SHOAL_RBM_GAUSSIAN : SHOAL_RBM_BINARY;
  g_free (units);
  p->visible = (int) shoal_tensor_row_size (x);
  layer->out.shape = shoal_shape_make (2, shoal_tensor_rows (x), p->visible);
  ShoalInitSpec init = { .kind = SHOAL_INIT_CONSTANT, .value = 0 };
  ShoalShape b = shoal_shape_make (1, p->visible);
  return shoal_layer_declare_param (layer, "bias", &b, p->visible, p->visible, &init, error) != NULL;
}

static void
rbm_visible_forward (ShoalLayer *layer, ShoalPhase phase)
{
  const ShoalTensor *x = &layer->srcs[0]->out;
  (void) phase;
  memcpy (layer->out.data, x->data, shoal_tensor_count (x) * sizeof (float));
}

static void
rbm_visible_backward (ShoalLayer *layer)
{
  RbmVisiblePriv *p = layer->priv;
  const int rows = shoal_tensor_rows (&layer->out), v = p->visible;
  float *restrict db = layer->params[0]->grad.data;
  for (int i = 0; i < rows; i++)
    {
      const float *restrict g = layer->grad.data + (size_t) i * v;
      for (int j = 0; j < v; j++)
        db[j] += g[j];
    }
  if (layer->src_grad[0] != NULL)
    {
      shoal_tensor_set_rows (layer->src_grad[0], rows);
      shoal_tensor_fill (layer->src_grad[0], 0.0f);
    }
}

const ShoalLayer *
shoal_rbm_through_splits (const ShoalLayer *layer)
{
  while (layer->ops == &shoal_layer_split_ops)
    layer = layer->srcs[0];
  return layer;
}

ShoalRbmUnits
shoal_rbm_visible_units (const ShoalLayer *visible)
{
  return ((const RbmVisiblePriv *) visible->priv)->units;
}

const ShoalLayerOps shoal_layer_rbm_visible_ops = {
  .type = "rbm_visible",
  .summary = "visible units of an RBM (binary or gaussian; param: bias); read by an rbm_hidden layer, "
             "trained by contrastive divergence ([job] alg = cd)",
  .flags = SHOAL_LAYER_CD,
  .split = { .dims = SHOAL_SPLIT_BATCH },
  .min_srcs = 1,
  .max_srcs = 1,
  .options = rbm_visible_options,
  .param_names = rbm_visible_params,
  .priv_size = sizeof (RbmVisiblePriv),
  .setup = rbm_visible_setup,
  .forward = rbm_visible_forward,
  .backward = rbm_visible_backward,
};
