/* The rbm_hidden layer: the hidden units and weights of an RBM, the one
 * that runs contrastive divergence (rbm.h has the whole story).
 *
 * Matrices are row-major, rows of the batch first: v (n, V), h (n, H),
 * W (H, V) as a dense layer's, so an encoder `dense` of the same name
 * takes W and c by [job] init_from, and a decoder takes W^T
 * (weight_init_from = NAME/weight^T) and the visible bias. */
#pragma GCC optimize ("tree-vectorize", "no-trapping-math")

#include "layers/rbm.h"
#include "layers/vmath.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

typedef struct {
  const ShoalLayer *vis;  /* the rbm_visible layer (srcs[0], or before its split) */
  int visible, hidden, cap;
  ShoalRbmUnits vunits, hunits;
  gboolean sample_visible;
  float *ph0;        /* (cap, H) p(h | v0) */
  float *recon;      /* (cap, V) E[v | p(h | v0)]; then the chain's visible states */
  float *h;          /* (cap, H) sampled hidden states */
  float *vk;         /* (cap, V) the chain's last visible states */
  float *phk;        /* (cap, H) p(h | vk) */
  gboolean chained;  /* the last forward ran the chain (backward has statistics) */
  double free_energy;
} RbmHiddenPriv;

static const char *const rbm_hidden_params[] = { "weight", "bias", NULL };

static const ShoalOption rbm_hidden_options[] = {
  { "num_output", SHOAL_OPT_INT, NULL, 1, 1 << 24, NULL, "number of hidden units" },
  { "units", SHOAL_OPT_STRING, "binary", SHOAL_UNBOUNDED, "binary|gaussian",
    "binary: Bernoulli hidden units; gaussian: unit-variance linear units (a DBN's code layer)" },
  { "sample_visible", SHOAL_OPT_BOOL, "false", SHOAL_UNBOUNDED, NULL,
    "sample the chain's visible states (false: use their probabilities / means)" },
  SHOAL_OPTION_END
};

static gboolean
rbm_hidden_setup (ShoalLayer *layer, GError **error)
{
  RbmHiddenPriv *p = layer->priv;
  const ShoalLayer *vis = shoal_rbm_through_splits (layer->srcs[0]);

  p->vis = vis;
  if (vis->ops != &shoal_layer_rbm_visible_ops)
    {
      shoal_layer_error (layer, error, "src", "an rbm_hidden layer reads an rbm_visible layer directly; "
                         "'%s' is a %s layer", vis->name, vis->ops->type);
      return FALSE;
    }
  p->visible = (int) shoal_tensor_row_size (&vis->out);
  p->cap = shoal_tensor_rows (&vis->out);
  p->hidden = (int) shoal_layer_opt_int (layer, "num_output");
  p->vunits = shoal_rbm_visible_units (vis);
  char *units = shoal_layer_opt_string (layer, "units");
  p->hunits = strcmp (units, "gaussian") == 0 ? SHOAL_RBM_GAUSSIAN : SHOAL_RBM_BINARY;
  g_free (units);
  p->sample_visible = shoal_layer_opt_bool (layer, "sample_visible");
  layer->out.shape = shoal_shape_make (1, 1);

  /* Hinton's guide: small gaussian weights, zero biases */
  ShoalInitSpec wi = { .kind = SHOAL_INIT_GAUSSIAN, .mean = 0, .std = 0.01f };
  ShoalInitSpec bi = { .kind = SHOAL_INIT_CONSTANT, .value = 0 };
  ShoalShape w = shoal_shape_make (2, p->hidden, p->visible), b = shoal_shape_make (1, p->hidden);
  if (shoal_layer_declare_param (layer, "weight", &w, p->visible, p->hidden, &wi, error) == NULL
      || shoal_layer_declare_param (layer, "bias", &b, p->visible, p->hidden, &bi, error) == NULL)
    return FALSE;
  size_t nh = (size_t) p->cap * p->hidden, nv = (size_t) p->cap * p->visible;
  return (p->ph0 = shoal_layer_alloc_floats (layer, nh, "hidden probabilities", error)) != NULL
         && (p->h = shoal_layer_alloc_floats (layer, nh, "hidden sample", error)) != NULL
         && (p->phk = shoal_layer_alloc_floats (layer, nh, "chain's hidden probabilities", error)) != NULL
         && (p->recon = shoal_layer_alloc_floats (layer, nv, "reconstruction", error)) != NULL
         && (p->vk = shoal_layer_alloc_floats (layer, nv, "chain's visible sample", error)) != NULL;
}

static void
rbm_hidden_finalize (ShoalLayer *layer)
{
  RbmHiddenPriv *p = layer->priv;
  shoal_free_aligned (p->ph0);
  shoal_free_aligned (p->h);
  shoal_free_aligned (p->phk);
  shoal_free_aligned (p->recon);
  shoal_free_aligned (p->vk);
}

static void
sigmoid_in_place (float *restrict x, size_t n)
{
  for (size_t i = 0; i < n; i++)
    x[i] = shoal_vsigmoidf (x[i]);
}

/* y (n, m) = rows of bias, then y += a (n, k) . B, B (k, m) or B^T. */
static void
affine (const float *a, const float *b, gboolean transpose_b, const float *bias, float *y, int n,
        int k, int m)
{
  for (int i = 0; i < n; i++)
    memcpy (y + (size_t) i * m, bias, (size_t) m * sizeof (float));
  cblas_sgemm (CblasRowMajor, CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans, n, m, k, 1.0f, a, k,
               b, transpose_b ? k : m, 1.0f, y, m);
}

/* E[h | v] for n rows: sigmoid(v W^T + c), or the linear mean */
static void
hidden_mean (const ShoalLayer *layer, const float *v, float *ph, int n)
{
  const RbmHiddenPriv *p = layer->priv;
  affine (v, layer->params[0]->value.data, TRUE, layer->params[1]->value.data, ph, n, p->visible, p->hidden);
  if (p->hunits == SHOAL_RBM_BINARY)
    sigmoid_in_place (ph, (size_t) n * p->hidden);
}

/* E[v | h] for n rows: sigmoid(h W + b), or the linear mean */
static void
visible_mean (const ShoalLayer *layer, const float *h, float *pv, int n)
{
  const RbmHiddenPriv *p = layer->priv;
  affine (h, layer->params[0]->value.data, FALSE, p->vis->params[0]->value.data, pv, n, p->hidden,
          p->visible);
  if (p->vunits == SHOAL_RBM_BINARY)
    sigmoid_in_place (pv, (size_t) n * p->visible);
}

/* Samples units of the given kind from their means, in place order. */
static void
sample (ShoalRng *rng, ShoalRbmUnits units, const float *mean, float *out, size_t n)
{
  if (units == SHOAL_RBM_BINARY)
    for (size_t i = 0; i < n; i++)
      out[i] = shoal_rng_uniform (rng) < mean[i] ? 1.0f : 0.0f;
  else
    for (size_t i = 0; i < n; i++)
      out[i] = mean[i] + shoal_rng_gaussian (rng);
}

static double
softplus (double x)
{
  return x > 0 ? x + log1p (exp (-x)) : log1p (exp (x));
}

/* Mean over rows of F(v) = -b.v (binary) or |v - b|^2 / 2 (gaussian),
 * minus sum_j softplus(c_j + W_j v) (binary) or |c + W v|^2 / 2 (gaussian);
 * pre holds c + W v for each row (before any sigmoid). */
static double
mean_free_energy (const ShoalLayer *layer, const float *v, const float *pre, int n)
{
  const RbmHiddenPriv *p = layer->priv;
  const float *b = p->vis->params[0]->value.data;
  double total = 0;
  for (int i = 0; i < n; i++)
    {
      const float *x = v + (size_t) i * p->visible, *a = pre + (size_t) i * p->hidden;
      double f = 0;
      for (int j = 0; j < p->visible; j++)
        f += p->vunits == SHOAL_RBM_BINARY ? -(double) b[j] * x[j]
                                           : 0.5 * ((double) x[j] - b[j]) * ((double) x[j] - b[j]);
      for (int j = 0; j < p->hidden; j++)
        f -= p->hunits == SHOAL_RBM_BINARY ? softplus (a[j]) : 0.5 * (double) a[j] * a[j];
      total += f;
    }
  return n > 0 ? total / n : 0;
}

static void
rbm_hidden_forward (ShoalLayer *layer, ShoalPhase phase)
{
  RbmHiddenPriv *p = layer->priv;
  const float *v0 = layer->srcs[0]->out.data;
  const int n = shoal_tensor_rows (&layer->srcs[0]->out), H = p->hidden, V = p->visible;
  const size_t nh = (size_t) n * H, nv = (size_t) n * V;

  /* pre-activations first (for the free energy), then the means */
  affine (v0, layer->params[0]->value.data, TRUE, layer->params[1]->value.data, p->ph0, n, V, H);
  p->free_energy = mean_free_energy (layer, v0, p->ph0, n);
  if (p->hunits == SHOAL_RBM_BINARY)
    sigmoid_in_place (p->ph0, nh);

  /* reconstruction error of one mean-field step */
  visible_mean (layer, p->ph0, p->recon, n);
  double err = 0;
  for (size_t i = 0; i < nv; i++)
    {
      double d = (double) v0[i] - p->recon[i];
      err += d * d;
    }
  layer->out.data[0] = (float) (err / shoal_layer_loss_rows (layer, n));

  p->chained = phase == SHOAL_PHASE_TRAIN && layer->ctx->cd_k > 0;
  if (!p->chained)
    return;
  /* CD-k: h0 ~ p(h | v0); k times v ~ p(v | h), h ~ p(h | v) */
  sample (&layer->rng, p->hunits, p->ph0, p->h, nh);
  for (int k = 1; k <= layer->ctx->cd_k; k++)
    {
      visible_mean (layer, p->h, p->vk, n);
      if (p->sample_visible)
        sample (&layer->rng, p->vunits, p->vk, p->vk, nv);
      hidden_mean (layer, p->vk, p->phk, n);
      if (k < layer->ctx->cd_k)
        sample (&layer->rng, p->hunits, p->phk, p->h, nh);
    }
}

static void
rbm_hidden_backward (ShoalLayer *layer)
{
  RbmHiddenPriv *p = layer->priv;
  const float *v0 = layer->srcs[0]->out.data;
  const int n = shoal_tensor_rows (&layer->srcs[0]->out), H = p->hidden, V = p->visible;
  const float w = shoal_layer_loss_scale (layer, n);
  ShoalTensor *dv = layer->src_grad[0];

  if (dv != NULL)
    shoal_tensor_set_rows (dv, n);
  if (!p->chained)
    {
      /* trained by BP, or no train forward before: no CD statistics */
      if (dv != NULL)
        shoal_tensor_fill (dv, 0.0f);
      return;
    }
  /* dW += w (phk^T vk - ph0^T v0) */
  float *dw = layer->params[0]->grad.data;
  cblas_sgemm (CblasRowMajor, CblasTrans, CblasNoTrans, H, V, n, w, p->phk, H, p->vk, V, 1.0f, dw, V);
  cblas_sgemm (CblasRowMajor, CblasTrans, CblasNoTrans, H, V, n, -w, p->ph0, H, v0, V, 1.0f, dw, V);
  float *restrict dc = layer->params[1]->grad.data;
  for (int i = 0; i < n; i++)
    {
      const float *restrict a = p->phk + (size_t) i * H, *restrict b = p->ph0 + (size_t) i * H;
      for (int j = 0; j < H; j++)
        dc[j] += w * (a[j] - b[j]);
    }
  if (dv != NULL)
    {
      float *restrict d = dv->data;
      const float *restrict a = p->vk, *restrict b = v0;
      for (size_t i = 0; i < (size_t) n * V; i++)
        d[i] = w * (a[i] - b[i]);
    }
}

double
shoal_rbm_hidden_free_energy (const ShoalLayer *hidden)
{
  return ((const RbmHiddenPriv *) hidden->priv)->free_energy;
}

const ShoalLayerOps shoal_layer_rbm_hidden_ops = {
  .type = "rbm_hidden",
  .summary = "hidden units and weights of an RBM over an rbm_visible layer; [job] alg = cd trains it "
             "by CD-k; out: the reconstruction error (reported as its loss)",
  .flags = SHOAL_LAYER_LOSS | SHOAL_LAYER_OWN_ROWS | SHOAL_LAYER_CD,
  .split = { .dims = SHOAL_SPLIT_BATCH },
  .min_srcs = 1,
  .max_srcs = 1,
  .options = rbm_hidden_options,
  .param_names = rbm_hidden_params,
  .priv_size = sizeof (RbmHiddenPriv),
  .setup = rbm_hidden_setup,
  .forward = rbm_hidden_forward,
  .backward = rbm_hidden_backward,
  .finalize = rbm_hidden_finalize,
};
