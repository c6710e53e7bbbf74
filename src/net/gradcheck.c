/* Finite-difference gradient checks of one layer (shoal/layer.h's
 * shoal_layer_gradcheck), local to the layer: only the layer under test
 * runs during the perturbations, so the perturbed source outputs stay as
 * they are and the check isolates that layer's backward.  It also checks
 * the two halves of the backward contract the numbers alone cannot see:
 * source gradients are written (every element, pre-filled with NaN) and
 * param gradients are added to (pre-filled, then compared). */
#include "net/net.h"

#include <math.h>
#include <string.h>

#include "core/error.h"

#define MAX_REPORTED 8

void
shoal_gradcheck_options_init (ShoalGradcheckOptions *opts)
{
  g_return_if_fail (opts != NULL);
  opts->eps = 1e-2f;
  opts->rtol = 2e-2f;
  opts->atol = 1e-3f;
  opts->kink = 5e-2f;
  opts->max_checks = 200;
  opts->phase = SHOAL_PHASE_TRAIN;
}

typedef struct {
  ShoalNet *net;
  ShoalLayer *layer;
  const float *r;     /* objective weights, out count */
  ShoalRng *saved;    /* every layer's rng as before the first forward */
  GBytes *state;      /* the layer's own state (ops->save_state) after the whole net's forward */
  gboolean state_refused;  /* its load_state refused those bytes */
  ShoalPhase phase;
  GString *report;    /* the first mismatches */
  int failures;
} Check;

static void
restore_rngs (Check *c)
{
  for (guint i = 0; i < shoal_net_n_layers (c->net); i++)
    shoal_net_layer (c->net, i)->rng = c->saved[i];
}

/* J for the current source values: the layer's own forward only, from
 * the same state each time.  A stateful layer (a GRU or LSTM carrying
 * its rows' states from batch to batch) moves its state on in every
 * forward: without the restore each finite difference would start from
 * another initial state.  The state restored is the one the whole net's
 * forward left, so a recurrent layer is checked from a non-zero one. */
static double
objective (Check *c)
{
  ShoalLayer *layer = c->layer;
  restore_rngs (c);
  if (c->state != NULL && !layer->ops->load_state (layer, c->state, NULL))
    c->state_refused = TRUE;  /* the type breaks the contract: reported as a mismatch */
  layer->ops->forward (layer, c->phase);
  if (layer->ops->flags & SHOAL_LAYER_LOSS)
    return (double) layer->loss_weight * layer->out.data[0];
  double j = 0;
  size_t n = shoal_tensor_count (&layer->out);
  for (size_t i = 0; i < n; i++)
    j += (double) layer->out.data[i] * c->r[i];
  return j;
}

static void
mismatch (Check *c, const char *format, ...) G_GNUC_PRINTF (2, 3);

static void
mismatch (Check *c, const char *format, ...)
{
  if (c->failures++ < MAX_REPORTED)
    {
      va_list ap;
      va_start (ap, format);
      g_string_append (c->report, "\n  ");
      g_string_append_vprintf (c->report, format, ap);
      va_end (ap);
    }
}

/* Compares analytic[] with finite differences of J in x[]; returns checked count. */
static int
compare (Check *c, const char *what, float *x, const float *analytic, size_t n,
         const ShoalGradcheckOptions *opts)
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
      if (!(fabs (a - numeric) <= tol))   /* NaN fails too */
        mismatch (c, "%s element %zu: analytic %.6g, numeric %.6g", what, i, a, numeric);
    }
  objective (c);  /* leave the layer's output as it was */
  return checked;
}

/* The layer's backward with d J / d out = r. */
static void
run_backward (Check *c)
{
  ShoalLayer *layer = c->layer;
  if (layer->grad.data != NULL)
    memcpy (layer->grad.data, c->r, shoal_tensor_count (&layer->out) * sizeof (float));
  layer->ops->backward (layer);
}

/* Backward ADDS into param gradients: with every gradient pre-filled with
 * base[i], it must leave base[i] + analytic[i]. */
static void
check_accumulation (Check *c, float **analytic)
{
  ShoalLayer *layer = c->layer;
  for (int p = 0; p < layer->nparams; p++)
    for (size_t i = 0; i < layer->params[p]->count; i++)
      layer->params[p]->grad.data[i] = 0.5f + 0.25f * (float) (i % 7);
  objective (c);
  run_backward (c);
  for (int p = 0; p < layer->nparams; p++)
    {
      ShoalParam *param = layer->params[p];
      for (size_t i = 0; i < param->count; i++)
        {
          double base = 0.5 + 0.25 * (double) (i % 7), want = base + analytic[p][i];
          double got = param->grad.data[i];
          if (!(fabs (got - want) <= 1e-4 * (fabs (base) + fabs (analytic[p][i])) + 1e-6))
            {
              mismatch (c, "%s element %zu: backward must ADD into param gradients: pre-filled %.6g, "
                        "gradient %.6g, got %.6g", param->name, i, base, analytic[p][i], got);
              break;
            }
        }
    }
}

gboolean
shoal_net_gradcheck (ShoalNet *net, const char *layer_name, const ShoalGradcheckOptions *opts_in,
                     int *checked_out, GError **error)
{
  g_return_val_if_fail (net != NULL && layer_name != NULL, FALSE);
  ShoalGradcheckOptions opts;
  if (opts_in != NULL)
    opts = *opts_in;
  else
    shoal_gradcheck_options_init (&opts);
  /* a phase that is neither, or a step that is no step: nothing would be checked */
  g_return_val_if_fail (opts.phase == SHOAL_PHASE_TRAIN || opts.phase == SHOAL_PHASE_TEST, FALSE);
  g_return_val_if_fail (opts.eps > 0 && isfinite (opts.eps) && opts.max_checks >= 0, FALSE);

  ShoalLayer *layer = shoal_net_find (net, layer_name);
  if (layer == NULL || layer->ops->backward == NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "gradient check: %s '%s'",
                   layer == NULL ? "the net has no layer" : "no backward to check in layer", layer_name);
      return FALSE;
    }

  Check c = { .net = net, .layer = layer, .phase = opts.phase, .report = g_string_new (NULL) };
  guint nlayers = shoal_net_n_layers (net);
  c.saved = g_new (ShoalRng, nlayers);
  for (guint i = 0; i < nlayers; i++)
    c.saved[i] = shoal_net_layer (net, i)->rng;

  /* the whole net once, so that every source holds its output */
  restore_rngs (&c);
  shoal_net_forward (net, opts.phase);
  if (layer->ops->save_state != NULL && layer->ops->load_state != NULL)
    c.state = layer->ops->save_state (layer);

  size_t nout = layer->out.capacity;
  float *r = g_new (float, MAX (nout, 1));
  ShoalRng rrng;
  shoal_rng_seed (&rrng, 42, 7);
  for (size_t i = 0; i < nout; i++)
    r[i] = shoal_rng_gaussian (&rrng);
  c.r = r;

  /* analytic gradients, from zeroed param gradients */
  objective (&c);
  shoal_param_store_zero_grads (shoal_net_params (net));
  for (int s = 0; s < layer->nsrcs; s++)
    if (layer->src_grad[s] != NULL)
      shoal_tensor_fill (layer->src_grad[s], NAN);  /* backward must write every element */
  run_backward (&c);
  float **param_analytic = g_new0 (float *, MAX (layer->nparams, 1));
  for (int p = 0; p < layer->nparams; p++)
    param_analytic[p] = g_memdup2 (layer->params[p]->grad.data, layer->params[p]->count * sizeof (float));

  int checked = 0;
  for (int s = 0; s < layer->nsrcs; s++)
    {
      if (layer->src_grad[s] == NULL)
        continue;
      size_t n = shoal_tensor_count (&layer->srcs[s]->out);
      float *analytic = g_memdup2 (layer->src_grad[s]->data, n * sizeof (float));
      char *what = g_strdup_printf ("d/d %s", layer->srcs[s]->name);
      checked += compare (&c, what, layer->srcs[s]->out.data, analytic, n, &opts);
      g_free (what);
      g_free (analytic);
    }
  for (int p = 0; p < layer->nparams; p++)
    checked += compare (&c, layer->params[p]->name, layer->params[p]->value.data, param_analytic[p],
                        layer->params[p]->count, &opts);
  check_accumulation (&c, param_analytic);
  if (c.state_refused)
    mismatch (&c, "its load_state refused the bytes its save_state made");

  for (int p = 0; p < layer->nparams; p++)
    g_free (param_analytic[p]);
  g_free (param_analytic);
  g_free (r);
  g_free (c.saved);
  if (c.state != NULL)
    g_bytes_unref (c.state);
  if (checked_out != NULL)
    *checked_out = checked;
  gboolean ok = c.failures == 0 && checked > 0;
  if (c.failures > 0)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_GRADIENT, "layer %s: %d gradient mismatches (%d elements compared):%s",
                 layer_name, c.failures, checked, c.report->str);
  else if (!ok)
    /* a pass that compared nothing would say the layer is right unchecked */
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                 "gradient check of layer '%s': nothing to compare (it has no params and no source "
                 "needs a gradient: give its feed need_grad = true)", layer_name);
  g_string_free (c.report, TRUE);
  return ok;
}

/* A feed layer's gaussian values are no ids: where an embedding reads a
 * feed, the feed holds ids drawn uniformly from [0, vocab_size) instead,
 * so that every lookup reads a row (gaussian values are all outside the
 * vocabulary: zero vectors, nothing checked). */
static void
fill_embedding_ids (ShoalNet *net, guint64 seed)
{
  ShoalRng rng;
  shoal_rng_seed (&rng, seed, 98);
  for (guint i = 0; i < shoal_net_n_layers (net); i++)
    {
      ShoalLayer *l = shoal_net_layer (net, i);
      if (strcmp (l->ops->type, "embedding") != 0 || l->nsrcs < 1)
        continue;
      ShoalLayer *src = l->srcs[0];
      if (strcmp (src->ops->type, "feed") != 0)
        continue;
      guint32 vocab = (guint32) shoal_layer_opt_int (l, "vocab_size");
      for (size_t k = 0; k < shoal_tensor_count (&src->out); k++)
        src->out.data[k] = (float) shoal_rng_below (&rng, vocab);
    }
}

gboolean
shoal_layer_gradcheck (const char *conf_text, const char *layer, const ShoalGradcheckOptions *opts,
                       guint64 seed, int *checked, GError **error)
{
  g_return_val_if_fail (conf_text != NULL && layer != NULL, FALSE);
  ShoalConf *conf = shoal_conf_load_data (conf_text, "gradcheck", error);
  if (conf == NULL)
    return FALSE;
  ShoalNetOptions nopts = { .seed = seed, .shard_count = 1 };
  ShoalNet *net = shoal_net_new (conf, &nopts, error);
  if (net == NULL)
    {
      shoal_conf_free (conf);
      return FALSE;
    }
  ShoalParamStore *store = shoal_net_params (net);
  shoal_param_store_init_values (store, seed);
  /* biases start at 0; make them non-trivial so their gradients matter */
  ShoalRng rng;
  shoal_rng_seed (&rng, seed, 99);
  for (guint i = 0; i < store->params->len; i++)
    {
      ShoalParam *p = g_ptr_array_index (store->params, i);
      if (p->init.kind == SHOAL_INIT_CONSTANT)
        for (size_t k = 0; k < p->count; k++)
          p->value.data[k] += 0.1f * shoal_rng_gaussian (&rng);
    }
  fill_embedding_ids (net, seed);
  gboolean ok = shoal_net_gradcheck (net, layer, opts, checked, error);
  shoal_net_free (net);
  shoal_conf_free (conf);
  return ok;
}
