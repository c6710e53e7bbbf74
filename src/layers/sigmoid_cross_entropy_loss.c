/* Sigmoid cross-entropy: srcs = logits x (N, D) and a target layer whose
 * out t (N, D, values in [0, 1]) is what the sigmoid of x should be, as
 * an autoencoder's input pixels are for its reconstruction (Caffe's
 * SigmoidCrossEntropyLoss, torch's BCEWithLogitsLoss summed over a row):
 *   out = sum over rows and units of  -t log s(x) - (1 - t) log(1 - s(x))  / norm
 * with norm = loss_norm or the rows, computed as max(x, 0) - x t +
 * log(1 + e^-|x|), finite for logits of any size.  Backward writes
 * (s(x) - t) w / norm to the logits and -x w / norm to a target that
 * asks for a gradient. */
#pragma GCC optimize ("tree-vectorize", "no-trapping-math")

#include "layers/layer.h"
#include "layers/vmath.h"

#include <math.h>

static gboolean
sigmoid_cross_entropy_loss_setup (ShoalLayer *layer, GError **error)
{
  const ShoalTensor *a = &layer->srcs[0]->out, *b = &layer->srcs[1]->out;
  if (shoal_tensor_rows (a) != shoal_tensor_rows (b) || shoal_tensor_row_size (a) != shoal_tensor_row_size (b))
    {
      char *sa = shoal_shape_to_string (&a->shape), *sb = shoal_shape_to_string (&b->shape);
      shoal_layer_error (layer, error, "src", "logits '%s' (%s) and target '%s' (%s) differ in rows or row size",
                         layer->srcs[0]->name, sa, layer->srcs[1]->name, sb);
      g_free (sa);
      g_free (sb);
      return FALSE;
    }
  layer->out.shape = shoal_shape_make (1, 1);
  return TRUE;
}

static void
sigmoid_cross_entropy_loss_forward (ShoalLayer *layer, ShoalPhase phase)
{
  const ShoalTensor *x = &layer->srcs[0]->out;
  const float *t = layer->srcs[1]->out.data;
  const size_t n = shoal_tensor_count (x);
  double total = 0;
  (void) phase;
  for (size_t start = 0; start < n; start += 256)
    {
      size_t end = MIN (start + 256, n);
      float part = 0;
      for (size_t i = start; i < end; i++)
        {
          float v = x->data[i], a = fabsf (v);
          part += (v > 0 ? v : 0) - v * t[i] + logf (1.0f + shoal_vexpf (-a));
        }
      total += part;
    }
  layer->out.data[0] = (float) (total / shoal_layer_loss_rows (layer, shoal_tensor_rows (x)));
}

static void
sigmoid_cross_entropy_loss_backward (ShoalLayer *layer)
{
  const ShoalTensor *x = &layer->srcs[0]->out;
  const float *restrict t = layer->srcs[1]->out.data;
  const int rows = shoal_tensor_rows (x);
  const size_t n = shoal_tensor_count (x);
  const float w = shoal_layer_loss_scale (layer, rows);
  if (layer->src_grad[0] != NULL)
    {
      shoal_tensor_set_rows (layer->src_grad[0], rows);
      float *restrict d = layer->src_grad[0]->data;
      const float *restrict v = x->data;
      for (size_t i = 0; i < n; i++)
        d[i] = w * (1.0f / (1.0f + shoal_vexpf (-v[i])) - t[i]);
    }
  if (layer->src_grad[1] != NULL)
    {
      shoal_tensor_set_rows (layer->src_grad[1], rows);
      float *restrict d = layer->src_grad[1]->data;
      for (size_t i = 0; i < n; i++)
        d[i] = -w * x->data[i];
    }
}

const ShoalLayerOps shoal_layer_sigmoid_cross_entropy_loss_ops = {
  .type = "sigmoid_cross_entropy_loss",
  .summary = "cross-entropy of sigmoid(logits) (src 1) against targets in [0, 1] (src 2's out), "
             "summed over units: an autoencoder's reconstruction loss",
  .flags = SHOAL_LAYER_LOSS | SHOAL_LAYER_OWN_ROWS,
  .split = { .dims = SHOAL_SPLIT_BATCH },
  .min_srcs = 2,
  .max_srcs = 2,
  .setup = sigmoid_cross_entropy_loss_setup,
  .forward = sigmoid_cross_entropy_loss_forward,
  .backward = sigmoid_cross_entropy_loss_backward,
};
