/* Batch normalisation (Ioffe & Szegedy): per channel of a (N, C, H, W)
 * input, per feature of a (N, D) input (generally: per index of dim 1,
 * statistics over the batch and every dim after 1).
 *
 *   train: y = scale * (x - mu_B) / sqrt(var_B + epsilon) + bias, with the
 *          batch's mean and biased variance, and an exact backward;
 *   test:  the same with the running mean and variance.
 *
 * Running statistics.  They are not trained, but a checkpoint must keep
 * them and a test net must see what the train net learned, so they are
 * params named "mean" (init 0) and "var" (init 1) declared as statistics
 * (shoal_layer_declare_statistic; PyTorch's buffers): lr_scale and
 * wd_scale 0 whatever the conf says, backward adds nothing to their
 * gradient, and the param store keeps them past the params servers
 * slice (core/param_statistics.c).  Each train forward updates them in
 * place:
 *   running = momentum * running + (1 - momentum) * batch
 * (momentum 0.9 keeps 90 % of the old value, Caffe's and Keras'
 * convention; PyTorch's momentum 0.1 means the same), with the unbiased
 * batch variance M / (M - 1) var_B, M = values per channel.
 * Under every scheme they are the statistics of the unit that computed
 * them (docs/SCHEMES.md): no push or pull carries them, so a unit's test
 * pass reads what its own forwards wrote (a group's: each worker writes
 * its block of channels; a spread group's followers send theirs to the
 * leader with every forward), its checkpoint state saves them
 * (partition/group_state.c), and group 0's first unit saves them by
 * name with the params that eval, predict and init_from read.  They once
 * lay in server slices, where no updater moved them, and every pull put
 * the initial 0 and 1 back (test/e2e/bn_schemes.sh).
 *
 * Split: by batch, each worker normalises with its own rows' statistics
 * (like unsynchronised BN elsewhere; the loss then differs from the
 * unsplit net); by feature, channels are independent, so it is exact.
 *
 * Layout: a row of the input is C * S contiguous floats (S = H * W, or 1
 * for 2-D).  Every loop runs along a whole row with per-channel values
 * expanded to row length once per pass, so the loops are contiguous and
 * vectorise for both 2-D and 4-D inputs.  With the pragma a train
 * forward takes 0.64 ns per element and backward 0.61 (64x1024 and
 * 64x32x16x16 alike); plain -O2 leaves them scalar at 1.9 (measured). */
#pragma GCC optimize ("tree-vectorize", "no-trapping-math")

#include "layers/layer.h"

#include <math.h>
#include <string.h>

typedef struct {
  int channels;        /* C */
  size_t spatial;      /* S */
  float momentum, epsilon;
  ShoalParam *scale, *bias, *mean, *var;
  float *xhat;         /* (capacity of out): normalised input of the last train forward */
  double *inv_std;     /* (C): 1 / sqrt(var_B + epsilon) of the last train forward */
  double *chan_a, *chan_b, *chan_c;  /* (C) scratch */
  float *row_acc;      /* (C * S) scratch: sums over the batch */
  float *row_a, *row_b, *row_c, *row_d;  /* (C * S) per-channel values expanded */
} BatchnormPriv;

static const char *const batchnorm_params[] = { "scale", "bias", "mean", "var", NULL };

static const ShoalOption batchnorm_options[] = {
  { "momentum", SHOAL_OPT_FLOAT, "0.9", 0, 1, NULL,
    "running = momentum * running + (1 - momentum) * batch statistic" },
  { "epsilon", SHOAL_OPT_FLOAT, "1e-5", 0, 1, NULL, "added to the variance; > 0" },
  SHOAL_OPTION_END
};

static gboolean
batchnorm_setup (ShoalLayer *layer, GError **error)
{
  BatchnormPriv *p = layer->priv;
  const ShoalShape *in = &layer->srcs[0]->out.shape;

  if (in->ndim < 2)
    {
      char *s = shoal_shape_to_string (in);
      shoal_layer_error (layer, error, "src",
                         "batchnorm needs (N, D) or (N, C, ...) input, source '%s' is %s",
                         layer->srcs[0]->name, s);
      g_free (s);
      return FALSE;
    }
  p->momentum = (float) shoal_layer_opt_float (layer, "momentum");
  p->epsilon = (float) shoal_layer_opt_float (layer, "epsilon");
  if (!(p->epsilon > 0))
    {
      shoal_layer_error (layer, error, "epsilon", "must be > 0, got %g", p->epsilon);
      return FALSE;
    }
  p->channels = in->dim[1];
  p->spatial = shoal_shape_row_size (in) / (size_t) p->channels;
  layer->out.shape = *in;

  int c = p->channels;
  ShoalShape shape = shoal_shape_make (1, c);
  const ShoalInitSpec one = { .kind = SHOAL_INIT_CONSTANT, .value = 1 };
  const ShoalInitSpec zero = { .kind = SHOAL_INIT_CONSTANT, .value = 0 };
  if ((p->scale = shoal_layer_declare_param (layer, "scale", &shape, c, c, &one, error)) == NULL
      || (p->bias = shoal_layer_declare_param (layer, "bias", &shape, c, c, &zero, error)) == NULL
      || (p->mean = shoal_layer_declare_statistic (layer, "mean", &shape, &zero, error)) == NULL
      || (p->var = shoal_layer_declare_statistic (layer, "var", &shape, &one, error)) == NULL)
    return FALSE;

  size_t row = (size_t) c * p->spatial;
  GError *local = NULL;
  double **chans[] = { &p->inv_std, &p->chan_a, &p->chan_b, &p->chan_c };
  for (guint i = 0; i < G_N_ELEMENTS (chans); i++)
    if ((*chans[i] = shoal_try_alloc_bytes ((size_t) c * sizeof (double), &local)) == NULL)
      {
        shoal_layer_error_nomem (layer, error, local, "per-channel sums");
        return FALSE;
      }
  return (p->xhat = shoal_layer_alloc_floats (layer, shoal_shape_count (in), "normalised input", error)) != NULL
         && (p->row_acc = shoal_layer_alloc_floats (layer, row, "row sums", error)) != NULL
         && (p->row_a = shoal_layer_alloc_floats (layer, row, "row sums", error)) != NULL
         && (p->row_b = shoal_layer_alloc_floats (layer, row, "row sums", error)) != NULL
         && (p->row_c = shoal_layer_alloc_floats (layer, row, "row sums", error)) != NULL
         && (p->row_d = shoal_layer_alloc_floats (layer, row, "row sums", error)) != NULL;
}

static void
batchnorm_finalize (ShoalLayer *layer)
{
  BatchnormPriv *p = layer->priv;
  shoal_free_aligned (p->xhat);
  shoal_free_aligned (p->inv_std);
  shoal_free_aligned (p->chan_a);
  shoal_free_aligned (p->chan_b);
  shoal_free_aligned (p->chan_c);
  shoal_free_aligned (p->row_acc);
  shoal_free_aligned (p->row_a);
  shoal_free_aligned (p->row_b);
  shoal_free_aligned (p->row_c);
  shoal_free_aligned (p->row_d);
  memset (p, 0, sizeof *p);
}

/* ---- kernels: n rows of r floats ---------------------------------------- */

/* acc[j] = sum over rows of x[j] */
static void
sum_rows (const float *restrict x, size_t n, size_t r, float *restrict acc)
{
  memset (acc, 0, r * sizeof (float));
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < r; j++)
      acc[j] += x[i * r + j];
}

/* acc[j] = sum over rows of (x[j] - m[j])^2 */
static void
sum_sq_dev_rows (const float *restrict x, const float *restrict m, size_t n, size_t r,
                 float *restrict acc)
{
  memset (acc, 0, r * sizeof (float));
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < r; j++)
      {
        float d = x[i * r + j] - m[j];
        acc[j] += d * d;
      }
}

/* acc[j] = sum over rows of a[j] * b[j] */
static void
sum_prod_rows (const float *restrict a, const float *restrict b, size_t n, size_t r,
               float *restrict acc)
{
  memset (acc, 0, r * sizeof (float));
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < r; j++)
      acc[j] += a[i * r + j] * b[i * r + j];
}

/* out[c] = sum of acc over channel c's s positions */
static void
reduce_channels (const float *acc, int channels, size_t s, double *out)
{
  for (int c = 0; c < channels; c++)
    {
      double t = 0;
      for (size_t k = 0; k < s; k++)
        t += acc[(size_t) c * s + k];
      out[c] = t;
    }
}

static void
expand_channels (const double *v, int channels, size_t s, float *row)
{
  for (int c = 0; c < channels; c++)
    {
      float f = (float) v[c];
      for (size_t k = 0; k < s; k++)
        row[(size_t) c * s + k] = f;
    }
}

/* xhat = (x - m) * is;  y = xhat * g + b */
static void
normalize_rows (const float *restrict x, const float *restrict m, const float *restrict is,
                const float *restrict g, const float *restrict b, size_t n, size_t r,
                float *restrict xhat, float *restrict y)
{
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < r; j++)
      {
        float h = (x[i * r + j] - m[j]) * is[j];
        xhat[i * r + j] = h;
        y[i * r + j] = h * g[j] + b[j];
      }
}

static void
affine_rows (const float *restrict x, const float *restrict a, const float *restrict b,
             size_t n, size_t r, float *restrict y)
{
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < r; j++)
      y[i * r + j] = x[i * r + j] * a[j] + b[j];
}

/* dx = k * (dy - m1 - xhat * m2) */
static void
backward_rows (const float *restrict dy, const float *restrict xhat, const float *restrict k,
               const float *restrict m1, const float *restrict m2, size_t n, size_t r,
               float *restrict dx)
{
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < r; j++)
      dx[i * r + j] = k[j] * (dy[i * r + j] - m1[j] - xhat[i * r + j] * m2[j]);
}

/* ---- passes ------------------------------------------------------------- */

static void
forward_train (ShoalLayer *layer, BatchnormPriv *p, size_t n, size_t r)
{
  const float *x = layer->srcs[0]->out.data;
  const int nc = p->channels;
  const double m = (double) n * (double) p->spatial;
  const float *gamma = p->scale->value.data, *beta = p->bias->value.data;
  float *rmean = p->mean->value.data, *rvar = p->var->value.data;
  double *mu = p->chan_a, *var = p->chan_b;

  sum_rows (x, n, r, p->row_acc);
  reduce_channels (p->row_acc, nc, p->spatial, mu);
  for (int c = 0; c < nc; c++)
    mu[c] /= m;
  expand_channels (mu, nc, p->spatial, p->row_a);

  /* centred second pass: no cancellation when |mean| >> std */
  sum_sq_dev_rows (x, p->row_a, n, r, p->row_acc);
  reduce_channels (p->row_acc, nc, p->spatial, var);
  const double unbias = m > 1 ? m / (m - 1) : 1.0;
  for (int c = 0; c < nc; c++)
    {
      var[c] /= m;
      p->inv_std[c] = 1.0 / sqrt (var[c] + p->epsilon);
      rmean[c] = (float) (p->momentum * rmean[c] + (1.0 - p->momentum) * mu[c]);
      rvar[c] = (float) (p->momentum * rvar[c] + (1.0 - p->momentum) * var[c] * unbias);
    }
  expand_channels (p->inv_std, nc, p->spatial, p->row_b);
  for (int c = 0; c < nc; c++)
    {
      p->chan_a[c] = gamma[c];
      p->chan_b[c] = beta[c];
    }
  expand_channels (p->chan_a, nc, p->spatial, p->row_c);
  expand_channels (p->chan_b, nc, p->spatial, p->row_d);
  normalize_rows (x, p->row_a, p->row_b, p->row_c, p->row_d, n, r, p->xhat, layer->out.data);
}

static void
forward_test (ShoalLayer *layer, BatchnormPriv *p, size_t n, size_t r)
{
  const int nc = p->channels;
  const float *gamma = p->scale->value.data, *beta = p->bias->value.data;
  const float *rmean = p->mean->value.data, *rvar = p->var->value.data;

  for (int c = 0; c < nc; c++)
    {
      double a = gamma[c] / sqrt ((double) rvar[c] + p->epsilon);
      p->chan_a[c] = a;
      p->chan_b[c] = beta[c] - rmean[c] * a;
    }
  expand_channels (p->chan_a, nc, p->spatial, p->row_a);
  expand_channels (p->chan_b, nc, p->spatial, p->row_b);
  affine_rows (layer->srcs[0]->out.data, p->row_a, p->row_b, n, r, layer->out.data);
}

static void
batchnorm_forward (ShoalLayer *layer, ShoalPhase phase)
{
  BatchnormPriv *p = layer->priv;
  size_t n = (size_t) shoal_tensor_rows (&layer->out);
  size_t r = (size_t) p->channels * p->spatial;

  if (phase == SHOAL_PHASE_TRAIN)
    forward_train (layer, p, n, r);
  else
    forward_test (layer, p, n, r);
}

static void
batchnorm_backward (ShoalLayer *layer)
{
  BatchnormPriv *p = layer->priv;
  const int nc = p->channels;
  size_t n = (size_t) shoal_tensor_rows (&layer->out);
  size_t r = (size_t) nc * p->spatial;
  const double m = (double) n * (double) p->spatial;
  const float *dy = layer->grad.data;
  double *sum_dy = p->chan_a, *sum_dy_xhat = p->chan_b;

  sum_rows (dy, n, r, p->row_acc);
  reduce_channels (p->row_acc, nc, p->spatial, sum_dy);
  sum_prod_rows (dy, p->xhat, n, r, p->row_acc);
  reduce_channels (p->row_acc, nc, p->spatial, sum_dy_xhat);

  float *dgamma = p->scale->grad.data, *dbeta = p->bias->grad.data;
  for (int c = 0; c < nc; c++)
    {
      dgamma[c] += (float) sum_dy_xhat[c];
      dbeta[c] += (float) sum_dy[c];
    }

  ShoalTensor *dst = layer->src_grad[0];
  if (dst == NULL)
    return;
  shoal_tensor_set_rows (dst, (int) n);
  const float *gamma = p->scale->value.data;
  double *k = p->chan_c;
  for (int c = 0; c < nc; c++)
    {
      k[c] = gamma[c] * p->inv_std[c];
      sum_dy[c] /= m;
      sum_dy_xhat[c] /= m;
    }
  expand_channels (k, nc, p->spatial, p->row_a);
  expand_channels (sum_dy, nc, p->spatial, p->row_b);
  expand_channels (sum_dy_xhat, nc, p->spatial, p->row_c);
  backward_rows (dy, p->xhat, p->row_a, p->row_b, p->row_c, n, r, dst->data);
}

/* Batch statistics are the whole batch's: a worker with a share of the
 * rows would normalise with its own rows' statistics, and every worker
 * would write the running statistics. */
static const char *
batchnorm_refuse (ShoalConf *conf, const char *group, int dim)
{
  (void) conf;
  (void) group;
  return dim == 0 ? "each worker would normalise with its own rows' statistics and all would write "
                    "the running statistics"
                  : NULL;
}

const ShoalLayerOps shoal_layer_batchnorm_ops = {
  .type = "batchnorm",
  .summary = "batch normalisation per channel (4-D) or feature (2-D), running stats for test",
  .flags = 0,
  .split = { .dims = SHOAL_SPLIT_BATCH | SHOAL_SPLIT_FEATURE, .refuse = batchnorm_refuse },
  .min_srcs = 1,
  .max_srcs = 1,
  .options = batchnorm_options,
  .param_names = batchnorm_params,
  .priv_size = sizeof (BatchnormPriv),
  .setup = batchnorm_setup,
  .forward = batchnorm_forward,
  .backward = batchnorm_backward,
  .finalize = batchnorm_finalize,
};
