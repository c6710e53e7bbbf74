/* Restricted Boltzmann machines trained by contrastive divergence, as
 * layers (SINGA's RBMVis / RBMHid):
 *
 *   [layer v1] type = rbm_visible, src = data       visible units, param bias (V)
 *   [layer h1] type = rbm_hidden,  src = v1         hidden units, params weight (H, V), bias (H)
 *
 * With `[job] alg = cd` (the net's ctx->cd_k > 0) the train forward of
 * rbm_hidden runs the Gibbs chain v0 -> h0 -> v1 -> ... -> vk, hk from the
 * batch (CD-k), and the backward ADDS the CD gradient, the negative of
 * the log-likelihood's usual estimate, averaged over the batch:
 *   dW += (p(h|vk)^T vk - p(h|v0)^T v0) / n      dc += sum (p(h|vk) - p(h|v0)) / n
 * and writes (vk - v0) / n into the visible layer's gradient, whose column
 * sums rbm_visible adds to its bias gradient: db += sum (vk - v0) / n.
 * So the param store, the param client, every scheme's servers and
 * checkpoints train an RBM as they train any net: it is a loss-like layer
 * whose gradient is not a derivative.  n is the group's batch
 * (loss_norm) when the group splits the batch among its workers.
 *
 * rbm_hidden's out is the batch's reconstruction error: the mean over
 * rows of sum_i (v0_i - E[v_i | p(h|v0)])^2 (one deterministic mean-field
 * step), in both phases; it is a LOSS layer only in that it is reported
 * and averaged like one.  rbm_free_energy (a metric) reports the mean
 * free energy of the batch's data; the gap between its test and train
 * values grows when the RBM over-fits (Hinton's practical guide, 6).
 *
 * Units: binary (Bernoulli, mean sigmoid) or gaussian (unit variance,
 * mean linear) on either side; gaussian visible units expect data
 * standardised per feature.  The chain samples hidden states; visible
 * states are sampled only with sample_visible = true (the default uses
 * the probabilities / means, which is less noisy, Hinton's guide 3.2).
 * Random draws come from the layer's stream (checkpointed with it): row
 * by row, unit by unit, hidden then visible, step after step. */
#ifndef SHOAL_RBM_H
#define SHOAL_RBM_H

#include "layers/layer.h"

G_BEGIN_DECLS

typedef enum {
  SHOAL_RBM_BINARY,
  SHOAL_RBM_GAUSSIAN
} ShoalRbmUnits;

extern const ShoalLayerOps shoal_layer_rbm_visible_ops;
extern const ShoalLayerOps shoal_layer_rbm_hidden_ops;

/* The layer itself, or the one before the split layers the net put
 * after it (a layer feeding several). */
const ShoalLayer *shoal_rbm_through_splits (const ShoalLayer *layer);
/* The visible units of an rbm_visible layer. */
ShoalRbmUnits shoal_rbm_visible_units (const ShoalLayer *visible);
/* The mean free energy of the last forward's rows under the RBM of an
 * rbm_hidden layer. */
double shoal_rbm_hidden_free_energy (const ShoalLayer *hidden);

G_END_DECLS

#endif
