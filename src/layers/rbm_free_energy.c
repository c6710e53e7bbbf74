/* The rbm_free_energy metric: the mean free energy F(v) of the batch's
 * data under the RBM of an rbm_hidden layer (its source), as that layer
 * computed it in its forward.  Lower means the RBM finds the data more
 * likely.  Its test value minus its train value is the free-energy gap
 * of Hinton's practical guide (section 6): it grows when the RBM starts
 * to over-fit its training data. */
#include "layers/rbm.h"

static gboolean
rbm_free_energy_setup (ShoalLayer *layer, GError **error)
{
  const ShoalLayer *src = layer->srcs[0];
  if (src->ops != &shoal_layer_rbm_hidden_ops)
    {
      shoal_layer_error (layer, error, "src", "an rbm_free_energy layer reads an rbm_hidden layer; "
                         "'%s' is a %s layer", src->name, src->ops->type);
      return FALSE;
    }
  layer->out.shape = shoal_shape_make (1, 1);
  return TRUE;
}

static void
rbm_free_energy_forward (ShoalLayer *layer, ShoalPhase phase)
{
  (void) phase;
  layer->out.data[0] = (float) shoal_rbm_hidden_free_energy (layer->srcs[0]);
}

const ShoalLayerOps shoal_layer_rbm_free_energy_ops = {
  .type = "rbm_free_energy",
  .summary = "metric: mean free energy of the batch's data under an rbm_hidden layer's RBM "
             "(test minus train: the free-energy gap)",
  .flags = SHOAL_LAYER_METRIC | SHOAL_LAYER_OWN_ROWS,
  .split_dims = SHOAL_SPLIT_BATCH,
  .min_srcs = 1,
  .max_srcs = 1,
  .setup = rbm_free_energy_setup,
  .forward = rbm_free_energy_forward,
  .gpu = SHOAL_LAYER_GPU (rbm_free_energy),
};
