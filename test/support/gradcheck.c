/* Finite-difference gradient checks, local to one layer: only the layer
 * under test runs during the perturbations, so the perturbed source
 * outputs stay as they are and the check isolates that layer's backward. */
#include "gradcheck.h"

#include <math.h>
#include <string.h>

#include "core/error.h"

void
shoal_gradcheck_options_init (ShoalGradcheckOptions *opts)
{
  opts->eps = 1e-2f;
  opts->rtol = 2e-2f;
  opts->atol = 1e-3f;
  opts->kink = 5e-2f;
  opts->max_checks = 200;
  opts->phase = SHOAL_PHASE_TRAIN;
}

/* What param gradients hold before the checked backward: a few distinct
 * values, exact in float, so that grad - prefill is the added gradient. */
static float
prefill (size_t i)
{
  return 0.5f - 0.125f * (float) (i % 9);
}

typedef struct {
  ShoalNet *net;
  ShoalLayer *layer;
  const float *r;     /* objective weights, out count */
  ShoalRng *saved;    /* every layer's rng as before the first forward */
  ShoalPhase phase;
} Check;

static void
restore_rngs (Check *c)
{
  for (guint i = 0; i < shoal_net_n_layers (c->net); i++)
    shoal_net_layer (c->net, i)->rng = c->saved[i];
}

/* J for the current source values: the layer's own forward only. */
static double
objective (Check *c)
{
  ShoalLayer *layer = c->layer;
  restore_rngs (c);
  layer->ops->forward (layer, c->phase);
  if (layer->ops->flags & SHOAL_LAYER_LOSS)
    return (double) layer->loss_weight * layer->out.data[0];
  double j = 0;
  size_t n = shoal_tensor_count (&layer->out);
  for (size_t i = 0; i < n; i++)
    j += (double) layer->out.data[i] * c->r[i];
  return j;
}

/* Compares analytic[] with finite differences of J in x[]; returns checked count. */
static int
compare (Check *c, const char *what, float *x, const float *analytic, size_t n,
         const ShoalGradcheckOptions *opts, int *failures)
{
  size_t stride = (opts->max_checks > 0 && n > (size_t) opts->max_checks) ? n / opts->max_checks : 1;
  int checked = 0;
  double j0 = objective (c);

  for (size_t i = 0; i < n; i += stride)
    {
      float saved = x[i];
      x[i] = saved + opts->eps;
      double jp = objective (c);
      x[i] = saved - opts->eps;
      double jm = objective (c);
      x[i] = saved;

      double numeric = (jp - jm) / (2.0 * opts->eps);
      double right = (jp - j0) / opts->eps, left = (j0 - jm) / opts->eps;
      double scale = fmax (fmax (fabs (right), fabs (left)), 1e-2);
      if (fabs (right - left) > opts->kink * scale + opts->atol)
        continue;  /* a kink inside [x-eps, x+eps] */
      double a = analytic[i];
      double tol = opts->atol + opts->rtol * fmax (fabs (a), fabs (numeric));
      checked++;
      if (fabs (a - numeric) > tol)
        {
          if (*failures < 10)
            g_test_message ("%s: %s[%zu]: analytic %.6g, numeric %.6g", c->layer->name, what, i, a,
                            numeric);
          (*failures)++;
        }
    }
  objective (c);  /* leave the layer's output as it was */
  return checked;
}

int
shoal_gradcheck_net (ShoalNet *net, const char *layer_name, const ShoalGradcheckOptions *opts_in)
{
  ShoalGradcheckOptions opts;
  if (opts_in != NULL)
    opts = *opts_in;
  else
    shoal_gradcheck_options_init (&opts);

  ShoalLayer *layer = shoal_net_find (net, layer_name);
  g_assert_nonnull (layer);
  g_assert_nonnull (layer->ops->backward);

  Check c = { .net = net, .layer = layer, .phase = opts.phase };
  guint nlayers = shoal_net_n_layers (net);
  c.saved = g_new (ShoalRng, nlayers);
  for (guint i = 0; i < nlayers; i++)
    c.saved[i] = shoal_net_layer (net, i)->rng;

  /* the whole net once, so that every source holds its output */
  restore_rngs (&c);
  shoal_net_forward (net, opts.phase);

  size_t nout = layer->out.capacity;
  float *r = g_new (float, nout);
  ShoalRng rrng;
  shoal_rng_seed (&rrng, 42, 7);
  for (size_t i = 0; i < nout; i++)
    r[i] = shoal_rng_gaussian (&rrng);
  c.r = r;

  /* analytic gradients */
  objective (&c);
  if (layer->grad.data != NULL)
    memcpy (layer->grad.data, r, shoal_tensor_count (&layer->out) * sizeof (float));
  /* backward ADDS into param gradients (layer.h): start them from a known
   * non-zero pattern and compare what was added; a backward that
   * overwrites them fails here */
  ShoalParamStore *store = shoal_net_params (net);
  for (size_t i = 0; i < store->total; i++)
    store->grads[i] = prefill (i);
  for (int s = 0; s < layer->nsrcs; s++)
    if (layer->src_grad[s] != NULL)
      shoal_tensor_fill (layer->src_grad[s], NAN);  /* backward must write every element */
  layer->ops->backward (layer);

  int failures = 0, checked = 0;
  for (int s = 0; s < layer->nsrcs; s++)
    {
      if (layer->src_grad[s] == NULL)
        continue;
      size_t n = shoal_tensor_count (&layer->srcs[s]->out);
      float *analytic = g_memdup2 (layer->src_grad[s]->data, n * sizeof (float));
      char *what = g_strdup_printf ("d/d %s", layer->srcs[s]->name);
      checked += compare (&c, what, layer->srcs[s]->out.data, analytic, n, &opts, &failures);
      g_free (what);
      g_free (analytic);
    }
  for (int p = 0; p < layer->nparams; p++)
    {
      ShoalParam *param = layer->params[p];
      float *analytic = g_memdup2 (param->grad.data, param->count * sizeof (float));
      for (size_t i = 0; i < param->count; i++)
        analytic[i] -= prefill (param->offset + i);
      checked += compare (&c, param->name, param->value.data, analytic, param->count, &opts,
                          &failures);
      g_free (analytic);
    }

  if (failures > 0)
    {
      g_test_message ("%s: %d of %d gradient elements differ", layer_name, failures, checked);
      g_test_fail ();
    }
  g_free (r);
  g_free (c.saved);
  return checked;
}

int
shoal_gradcheck_conf (const char *conf_text, const char *layer, const ShoalGradcheckOptions *opts,
                      guint64 seed)
{
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data (conf_text, "gradcheck", &error);
  g_assert_no_error (error);
  ShoalNetOptions nopts = { .seed = seed, .shard_count = 1 };
  ShoalNet *net = shoal_net_new (conf, &nopts, &error);
  g_assert_no_error (error);
  shoal_param_store_init_values (shoal_net_params (net), seed);
  /* biases start at 0; make them non-trivial so their gradients matter */
  ShoalParamStore *store = shoal_net_params (net);
  ShoalRng rng;
  shoal_rng_seed (&rng, seed, 99);
  for (guint i = 0; i < store->params->len; i++)
    {
      ShoalParam *p = g_ptr_array_index (store->params, i);
      if (p->init.kind == SHOAL_INIT_CONSTANT)
        for (size_t k = 0; k < p->count; k++)
          p->value.data[k] += 0.1f * shoal_rng_gaussian (&rng);
    }
  int checked = shoal_gradcheck_net (net, layer, opts);
  shoal_net_free (net);
  shoal_conf_free (conf);
  return checked;
}
