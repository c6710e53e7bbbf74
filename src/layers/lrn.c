/* Local response normalisation across channels (Krizhevsky et al. 2012,
 * as in Caffe's LRN and PyTorch's LocalResponseNorm):
 *
 *   scale[c] = k + alpha / n * sum_{c' = c - (n-1)/2}^{c + (n-1)/2} x[c']^2
 *   y[c]     = x[c] * scale[c]^-beta
 *
 * with n = local_size (odd) and channels outside [0, C) counting as 0.
 * The window is symmetric, so c' is in the window of c exactly when c is
 * in the window of c', and the gradient is
 *
 *   dx[c] = dy[c] * scale[c]^-beta
 *           - 2 alpha beta / n * x[c] * sum_{c' in window (c)} dy[c'] y[c'] / scale[c'].
 *
 * forward keeps scale; backward recomputes scale^-beta.  Window sums are
 * taken afresh for every channel (n adds per element) rather than as a
 * running sum, whose subtractions would leave rounding residue from large
 * channels in the scale of small ones.  beta = 0.75 (AlexNet), 0.5 and 1
 * avoid powf through square roots, which GCC vectorises.
 *
 * Input (N, C, ...): every dimension after C is spatial. */
#pragma GCC optimize ("tree-vectorize", "no-trapping-math")

#include "layers/layer.h"

#include <math.h>
#include <string.h>

typedef struct {
  int size;           /* n: channels in a window, odd */
  float alpha, beta, k;
  int c;              /* channels */
  size_t plane;       /* elements per channel of one row */
  float *scale;       /* (capacity of out): scale of the last forward */
  float *ratio;       /* (c, plane): dy * y / scale of one row, backward */
} Lrn;

static const ShoalOption lrn_options[] = {
  { "local_size", SHOAL_OPT_INT, "5", 1, 1 << 20, NULL, "channels summed over, odd, centred on each" },
  { "alpha", SHOAL_OPT_FLOAT, "1e-4", 0, G_MAXFLOAT, NULL, "scale of the sum of squares" },
  { "beta", SHOAL_OPT_FLOAT, "0.75", 0, G_MAXFLOAT, NULL, "exponent" },
  { "k", SHOAL_OPT_FLOAT, "1", 1e-30, G_MAXFLOAT, NULL, "added to the scaled sum; > 0" },
  SHOAL_OPTION_END
};

static gboolean
lrn_setup (ShoalLayer *layer, GError **error)
{
  Lrn *lr = layer->priv;
  const ShoalTensor *in = &layer->srcs[0]->out;

  if (in->shape.ndim < 2)
    {
      char *s = shoal_shape_to_string (&in->shape);
      shoal_layer_error (layer, error, NULL,
                         "needs an (N, C, ...) input, source '%s' gives %s",
                         layer->srcs[0]->name, s);
      g_free (s);
      return FALSE;
    }
  lr->size = (int) shoal_layer_opt_int (layer, "local_size");
  if (lr->size % 2 == 0)
    {
      shoal_layer_error (layer, error, "local_size", "must be odd, got %d", lr->size);
      return FALSE;
    }
  lr->alpha = (float) shoal_layer_opt_float (layer, "alpha");
  lr->beta = (float) shoal_layer_opt_float (layer, "beta");
  lr->k = (float) shoal_layer_opt_float (layer, "k");
  lr->c = in->shape.dim[1];
  lr->plane = shoal_shape_row_size (&in->shape) / lr->c;
  layer->out.shape = in->shape;
  return (lr->scale = shoal_layer_alloc_floats (layer, shoal_shape_count (&in->shape), "scale", error)) != NULL
         && (lr->ratio = shoal_layer_alloc_floats (layer, (size_t) lr->c * lr->plane, "ratio", error)) != NULL;
}

/* p[i] = s[i]^-beta for i < n */
static void
neg_power (const Lrn *lr, const float *restrict s, float *restrict p, size_t n)
{
  if (lr->beta == 0.75f)
    for (size_t i = 0; i < n; i++)
      {
        float r = sqrtf (s[i]);
        p[i] = 1.0f / (r * sqrtf (r));
      }
  else if (lr->beta == 0.5f)
    for (size_t i = 0; i < n; i++)
      p[i] = 1.0f / sqrtf (s[i]);
  else if (lr->beta == 1.0f)
    for (size_t i = 0; i < n; i++)
      p[i] = 1.0f / s[i];
  else
    for (size_t i = 0; i < n; i++)
      p[i] = powf (s[i], -lr->beta);
}

/* dst[c] = sum of src over the window of c, for every channel of one row */
static void
window_sums (const Lrn *lr, const float *src, gboolean square, float *dst)
{
  const int half = (lr->size - 1) / 2;
  const size_t m = lr->plane;
  for (int c = 0; c < lr->c; c++)
    {
      float *restrict d = dst + (size_t) c * m;
      memset (d, 0, sizeof (float) * m);
      for (int j = MAX (c - half, 0); j <= MIN (c + half, lr->c - 1); j++)
        {
          const float *restrict s = src + (size_t) j * m;
          if (square)
            for (size_t q = 0; q < m; q++)
              d[q] += s[q] * s[q];
          else
            for (size_t q = 0; q < m; q++)
              d[q] += s[q];
        }
    }
}

static void
lrn_forward (ShoalLayer *layer, ShoalPhase phase)
{
  Lrn *lr = layer->priv;
  const int rows = shoal_tensor_rows (&layer->srcs[0]->out);
  const size_t row = (size_t) lr->c * lr->plane;
  const float an = lr->alpha / (float) lr->size;

  (void) phase;
  for (int n = 0; n < rows; n++)
    {
      const float *restrict x = layer->srcs[0]->out.data + n * row;
      float *restrict y = layer->out.data + n * row;
      float *restrict s = lr->scale + n * row;
      window_sums (lr, x, TRUE, s);
      for (size_t i = 0; i < row; i++)
        s[i] = lr->k + an * s[i];
      neg_power (lr, s, y, row);
      for (size_t i = 0; i < row; i++)
        y[i] *= x[i];
    }
}

static void
lrn_backward (ShoalLayer *layer)
{
  Lrn *lr = layer->priv;
  ShoalTensor *dxt = layer->src_grad[0];
  if (dxt == NULL)
    return;
  const int rows = shoal_tensor_rows (&layer->srcs[0]->out);
  const size_t row = (size_t) lr->c * lr->plane;
  const float coef = 2.0f * lr->alpha * lr->beta / (float) lr->size;

  for (int n = 0; n < rows; n++)
    {
      const float *restrict x = layer->srcs[0]->out.data + n * row;
      const float *restrict y = layer->out.data + n * row;
      const float *restrict dy = layer->grad.data + n * row;
      const float *restrict s = lr->scale + n * row;
      float *restrict dx = dxt->data + n * row;
      float *restrict ratio = lr->ratio;

      for (size_t i = 0; i < row; i++)
        ratio[i] = dy[i] * y[i] / s[i];
      /* dx holds the window sums of ratio, then the gradient */
      window_sums (lr, ratio, FALSE, dx);
      for (size_t i = 0; i < row; i++)
        ratio[i] = -coef * x[i] * dx[i];
      neg_power (lr, s, dx, row);
      for (size_t i = 0; i < row; i++)
        dx[i] = dy[i] * dx[i] + ratio[i];
    }
}

static void
lrn_finalize (ShoalLayer *layer)
{
  Lrn *lr = layer->priv;
  shoal_free_aligned (lr->scale);
  shoal_free_aligned (lr->ratio);
  lr->scale = lr->ratio = NULL;
}

const ShoalLayerOps shoal_layer_lrn_ops = {
  .type = "lrn",
  .summary = "local response normalisation across channels (AlexNet, Caffe LRN)",
  .flags = 0,
  .split = { .dims = SHOAL_SPLIT_BATCH },
  .min_srcs = 1,
  .max_srcs = 1,
  .options = lrn_options,
  .param_names = NULL,
  .priv_size = sizeof (Lrn),
  .setup = lrn_setup,
  .forward = lrn_forward,
  .backward = lrn_backward,
  .finalize = lrn_finalize,
  .num_records = NULL,
};
