/* The rbm_free_energy metric: the mean free energy F(v) of the batch's
 * data under an RBM, as its rbm_hidden layer computed it in its forward.
 * Sources: the RBM's rbm_visible layer (the rows: a group that splits the
 * batch weighs each worker's value by them) and its rbm_hidden layer.  Lower means the RBM finds the data more
 * likely.  Its test value minus its train value is the free-energy gap
 * of Hinton's practical guide (section 6): it grows when the RBM starts
 * to over-fit its training data. */
#include "layers/rbm.h"
#include "layers/split.h"

static gboolean
rbm_free_energy_setup (ShoalLayer *layer, GError **error)
{
  const ShoalLayer *vis = shoal_rbm_through_splits (layer->srcs[0]), *hid = layer->srcs[1];
  if (vis->ops != &shoal_layer_rbm_visible_ops || hid->ops != &shoal_layer_rbm_hidden_ops
      || shoal_rbm_through_splits (hid->srcs[0]) != vis)
    {
      shoal_layer_error (layer, error, "src", "an rbm_free_energy layer reads an RBM: its rbm_visible layer "
                         "and the rbm_hidden layer over it; '%s' is a %s layer, '%s' a %s layer",
                         vis->name, vis->ops->type, hid->name, hid->ops->type);
      return FALSE;
    }
  layer->out.shape = shoal_shape_make (1, 1);
  return TRUE;
}

static void
rbm_free_energy_forward (ShoalLayer *layer, ShoalPhase phase)
{
  (void) phase;
  layer->out.data[0] = (float) shoal_rbm_hidden_free_energy (layer->srcs[1]);
}

const ShoalLayerOps shoal_layer_rbm_free_energy_ops = {
  .type = "rbm_free_energy",
  .summary = "metric: mean free energy of the batch's data under an RBM (src: its rbm_visible, "
             "its rbm_hidden); test minus train: the free-energy gap",
  .flags = SHOAL_LAYER_METRIC | SHOAL_LAYER_OWN_ROWS,
  .split = { .dims = SHOAL_SPLIT_BATCH },
  .min_srcs = 2,
  .max_srcs = 2,
  .setup = rbm_free_energy_setup,
  .forward = rbm_free_energy_forward,
};
