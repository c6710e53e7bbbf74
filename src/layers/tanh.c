/* Hyperbolic tangent; backward dx = dy * (1 - y^2) from the output.
 *
 * tanh comes from layers/vmath.h so both loops vectorise (glibc's tanhf
 * would keep the loop scalar).  Measured on a 64x1024 batch: 2.5 ns per
 * element forward, 0.14 backward; 9.4 and 0.36 without the pragma. */
#pragma GCC optimize ("tree-vectorize", "no-trapping-math")

#include "layers/layer.h"
#include "layers/vmath.h"

static gboolean
tanh_setup (ShoalLayer *layer, GError **error)
{
  (void) error;
  layer->out.shape = layer->srcs[0]->out.shape;
  return TRUE;
}

static void
tanh_kernel (const float *restrict x, float *restrict y, size_t n)
{
  for (size_t i = 0; i < n; i++)
    y[i] = shoal_vtanhf (x[i]);
}

static void
tanh_backward_kernel (const float *restrict y, const float *restrict dy,
                      float *restrict dx, size_t n)
{
  for (size_t i = 0; i < n; i++)
    dx[i] = dy[i] * (1.0f - y[i] * y[i]);
}

static void
tanh_forward (ShoalLayer *layer, ShoalPhase phase)
{
  (void) phase;
  tanh_kernel (layer->srcs[0]->out.data, layer->out.data, shoal_tensor_count (&layer->out));
}

static void
tanh_backward (ShoalLayer *layer)
{
  ShoalTensor *dst = layer->src_grad[0];

  if (dst == NULL)
    return;
  shoal_tensor_set_rows (dst, shoal_tensor_rows (&layer->out));
  tanh_backward_kernel (layer->out.data, layer->grad.data, dst->data,
                        shoal_tensor_count (&layer->out));
}

const ShoalLayerOps shoal_layer_tanh_ops = {
  .type = "tanh",
  .summary = "hyperbolic tangent",
  .flags = 0,
  .split = { .dims = SHOAL_SPLIT_BATCH | SHOAL_SPLIT_FEATURE },
  .min_srcs = 1,
  .max_srcs = 1,
  .setup = tanh_setup,
  .forward = tanh_forward,
  .backward = tanh_backward,
};
