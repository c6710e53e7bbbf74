/* Inverted dropout: in the train phase each unit is kept with probability
 * 1 - ratio and scaled by 1 / (1 - ratio), so the test phase is the
 * identity and needs no rescaling.
 *
 * The mask comes from layer->rng, drawn afresh by every train forward;
 * each 32-bit draw decides two units (16 bits each), halving the calls
 * into the generator.  That quantises the drop probability to multiples
 * of 1/65536, and the scale uses that quantised probability, so the
 * expectation of the output is exactly the input.  The draws go into a
 * buffer first and become the mask in a separate branch-free loop: with
 * the keep/drop test inside the drawing loop, mispredicted branches made
 * the forward 4.6 ns per element (ratio 0.5, 64x1024); split, it is
 * ~1 ns.  The mask is kept as floats (0 or the scale) so both passes end
 * in one vectorised multiply (backward 0.30 -> 0.12 ns per element with
 * the pragma; measured). */
#pragma GCC optimize ("tree-vectorize", "no-trapping-math")

#include "layers/layer.h"

#include "core/error.h"

#include <math.h>
#include <string.h>

typedef struct {
  guint32 threshold;   /* a 16-bit draw below it drops the unit */
  float scale;         /* 1 / (1 - threshold / 65536) */
  float *mask;         /* (capacity of out): 0 or scale, from the last train forward */
  guint32 *draws;      /* (capacity / 2 + 1) scratch for the generator's output */
} DropoutPriv;

static const ShoalOption dropout_options[] = {
  { "ratio", SHOAL_OPT_FLOAT, "0.5", 0, 1, NULL, "probability of dropping a unit, in [0, 1)" },
  SHOAL_OPTION_END
};

static gboolean
dropout_setup (ShoalLayer *layer, GError **error)
{
  DropoutPriv *p = layer->priv;
  double ratio = shoal_layer_opt_float (layer, "ratio");

  if (!(ratio < 1.0))
    {
      shoal_layer_error (layer, error, "ratio", "must be below 1 (1 drops every unit), got %g", ratio);
      return FALSE;
    }
  p->threshold = (guint32) lround (ratio * 65536.0);
  if (p->threshold > 65535)
    p->threshold = 65535;
  p->scale = (float) (65536.0 / (65536.0 - p->threshold));
  layer->out.shape = layer->srcs[0]->out.shape;
  size_t count = shoal_shape_count (&layer->out.shape);
  p->mask = shoal_layer_alloc_floats (layer, count, "mask", error);
  if (p->mask == NULL)
    return FALSE;
  p->draws = g_try_new (guint32, count / 2 + 1);
  if (p->draws == NULL)
    {
      shoal_layer_error_nomem (layer, error, g_error_new (SHOAL_ERROR, SHOAL_ERROR_MEMORY,
                                                          "out of memory allocating %zu bytes",
                                                          (count / 2 + 1) * sizeof (guint32)),
                               "random draws");
      return FALSE;
    }
  return TRUE;
}

static void
dropout_finalize (ShoalLayer *layer)
{
  DropoutPriv *p = layer->priv;
  shoal_free_aligned (p->mask);
  g_free (p->draws);
  p->mask = NULL;
  p->draws = NULL;
}

static void
multiply_kernel (const float *restrict a, const float *restrict b, float *restrict y, size_t n)
{
  for (size_t i = 0; i < n; i++)
    y[i] = a[i] * b[i];
}

/* Units [0, h) take the low halves of the draws, [h, n) the high ones. */
static void
mask_from_draws (const guint32 *restrict draws, guint32 threshold, float scale,
                 float *restrict mask, size_t n)
{
  size_t h = (n + 1) / 2;
  for (size_t i = 0; i < h; i++)
    mask[i] = (draws[i] & 0xffffu) >= threshold ? scale : 0.0f;
  for (size_t i = 0; i < n - h; i++)
    mask[h + i] = (draws[i] >> 16) >= threshold ? scale : 0.0f;
}

static void
draw_mask (DropoutPriv *p, ShoalRng *rng, size_t n)
{
  size_t h = (n + 1) / 2;
  for (size_t i = 0; i < h; i++)
    p->draws[i] = shoal_rng_u32 (rng);
  mask_from_draws (p->draws, p->threshold, p->scale, p->mask, n);
}

static void
dropout_forward (ShoalLayer *layer, ShoalPhase phase)
{
  DropoutPriv *p = layer->priv;
  const float *x = layer->srcs[0]->out.data;
  size_t n = shoal_tensor_count (&layer->out);

  if (phase == SHOAL_PHASE_TEST || p->threshold == 0)
    {
      memcpy (layer->out.data, x, n * sizeof (float));
      return;
    }
  draw_mask (p, &layer->rng, n);
  multiply_kernel (x, p->mask, layer->out.data, n);
}

static void
dropout_backward (ShoalLayer *layer)
{
  DropoutPriv *p = layer->priv;
  ShoalTensor *dst = layer->src_grad[0];
  size_t n = shoal_tensor_count (&layer->out);

  if (dst == NULL)
    return;
  shoal_tensor_set_rows (dst, shoal_tensor_rows (&layer->out));
  if (p->threshold == 0)
    memcpy (dst->data, layer->grad.data, n * sizeof (float));
  else
    multiply_kernel (layer->grad.data, p->mask, dst->data, n);
}

const ShoalLayerOps shoal_layer_dropout_ops = {
  .type = "dropout",
  .summary = "inverted dropout: drops units with probability ratio in training, rounded to a multiple "
             "of 1/65536 and scaled by 1 / (1 - that) (ratio 0.99 scales by 100.055; torch by 100)",
  .flags = 0,
  .split = { .dims = SHOAL_SPLIT_BATCH | SHOAL_SPLIT_FEATURE },
  .min_srcs = 1,
  .max_srcs = 1,
  .options = dropout_options,
  .priv_size = sizeof (DropoutPriv),
  .setup = dropout_setup,
  .forward = dropout_forward,
  .backward = dropout_backward,
  .finalize = dropout_finalize,
};
