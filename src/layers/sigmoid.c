/* Logistic sigmoid y = 1 / (1 + e^-x); backward dx = dy * y * (1 - y).
 *
 * The exp comes from layers/vmath.h so both loops vectorise; with the
 * pragma a 64x1024 batch takes 1.4 ns per element forward instead of 3.5
 * with glibc's expf (4.7 with vmath but no pragma), backward 0.11 instead
 * of 0.55 (measured on the 2-core VM). */
#pragma GCC optimize ("tree-vectorize", "no-trapping-math")

#include "layers/layer.h"
#include "layers/vmath.h"

static gboolean
sigmoid_setup (ShoalLayer *layer, GError **error)
{
  (void) error;
  layer->out.shape = layer->srcs[0]->out.shape;
  return TRUE;
}

static void
sigmoid_kernel (const float *restrict x, float *restrict y, size_t n)
{
  for (size_t i = 0; i < n; i++)
    y[i] = shoal_vsigmoidf (x[i]);
}

static void
sigmoid_backward_kernel (const float *restrict y, const float *restrict dy,
                         float *restrict dx, size_t n)
{
  for (size_t i = 0; i < n; i++)
    dx[i] = dy[i] * y[i] * (1.0f - y[i]);
}

static void
sigmoid_forward (ShoalLayer *layer, ShoalPhase phase)
{
  (void) phase;
  sigmoid_kernel (layer->srcs[0]->out.data, layer->out.data, shoal_tensor_count (&layer->out));
}

static void
sigmoid_backward (ShoalLayer *layer)
{
  ShoalTensor *dst = layer->src_grad[0];

  if (dst == NULL)
    return;
  shoal_tensor_set_rows (dst, shoal_tensor_rows (&layer->out));
  sigmoid_backward_kernel (layer->out.data, layer->grad.data, dst->data,
                           shoal_tensor_count (&layer->out));
}

const ShoalLayerOps shoal_layer_sigmoid_ops = {
  .type = "sigmoid",
  .summary = "logistic sigmoid 1 / (1 + exp(-x))",
  .flags = 0,
  .split = { .dims = SHOAL_SPLIT_BATCH | SHOAL_SPLIT_FEATURE },
  .min_srcs = 1,
  .max_srcs = 1,
  .setup = sigmoid_setup,
  .forward = sigmoid_forward,
  .backward = sigmoid_backward,
};
