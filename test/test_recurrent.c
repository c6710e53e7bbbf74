/* The recurrent family: gru, lstm, embedding, per-step dense and
 * softmax_loss.  Gradient checks through several time steps (stacked,
 * with dropout between levels), the state carried from batch to batch
 * (two batches of T steps equal one of 2T; a restart mark starts a row
 * afresh), the checkpointed state, and bad sources. */
#include <glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/updater.h"
#include "layers/recurrent.h"
#include "support/expect.h"
#include "support/gradcheck.h"

static ShoalNet *
build (const char *text, ShoalConf **conf, guint64 seed)
{
  GError *error = NULL;
  *conf = shoal_conf_load_data (text, "test", &error);
  g_assert_no_error (error);
  ShoalNetOptions opts = { .seed = seed, .shard_count = 1 };
  ShoalNet *net = shoal_net_new (*conf, &opts, &error);
  g_assert_no_error (error);
  shoal_param_store_init_values (shoal_net_params (net), seed);
  return net;
}

static void
gradcheck_cell (const char *type)
{
  ShoalGradcheckOptions o;
  shoal_gradcheck_options_init (&o);
  o.eps = 3e-3f;
  o.max_checks = 120;
  /* one level, 5 steps */
  char *one = g_strdup_printf ("[layer x]\ntype = feed\nshape = 3,5,4\nneed_grad = true\n"
                               "[layer r]\ntype = %s\nsrc = x\nhidden_size = 6\nstateful = false\n", type);
  g_assert_cmpint (shoal_gradcheck_conf (one, "r", &o, 3), >, 0);
  /* three levels with dropout between them (the check replays the masks) */
  char *stack = g_strdup_printf ("[layer x]\ntype = feed\nshape = 2,4,3\nneed_grad = true\n"
                                 "[layer r]\ntype = %s\nsrc = x\nhidden_size = 5\nnum_layers = 3\n"
                                 "dropout = 0.3\nstateful = false\n", type);
  g_assert_cmpint (shoal_gradcheck_conf (stack, "r", &o, 4), >, 0);
  /* no bias, and the test phase (no dropout) */
  char *nobias = g_strdup_printf ("[layer x]\ntype = feed\nshape = 2,3,3\nneed_grad = true\n"
                                  "[layer r]\ntype = %s\nsrc = x\nhidden_size = 4\nnum_layers = 2\n"
                                  "bias = false\ndropout = 0.5\nstateful = false\n", type);
  o.phase = SHOAL_PHASE_TEST;
  g_assert_cmpint (shoal_gradcheck_conf (nobias, "r", &o, 5), >, 0);
  g_free (one);
  g_free (stack);
  g_free (nobias);
}

static void
test_gru_gradcheck (void)
{
  gradcheck_cell ("gru");
}

static void
test_lstm_gradcheck (void)
{
  gradcheck_cell ("lstm");
}

/* Gradients with a non-zero initial state (the carried one): a finite
 * difference check of its own, since every forward of a stateful layer
 * moves the state on. */
static void
test_gradcheck_initial_state (void)
{
  const char *types[] = { "gru", "lstm" };
  for (int k = 0; k < 2; k++)
    {
      ShoalConf *conf;
      char *text = g_strdup_printf ("[layer x]\ntype = feed\nshape = 2,3,4\nneed_grad = true\n"
                                    "[layer r]\ntype = %s\nsrc = x\nhidden_size = 3\nnum_layers = 2\n"
                                    "\n", types[k]);
      ShoalNet *net = build (text, &conf, 8);
      ShoalLayer *r = shoal_net_find (net, "r");
      ShoalRecurrentPriv *p = r->priv;
      /* the carried state is set again before every forward: the layer
       * starts each from the same non-zero h0 (and c0) */
      ShoalRng rng;
      shoal_rng_seed (&rng, 5, 5);
      size_t hn = (size_t) p->levels * p->cap * p->hidden;
      float *h0 = g_new (float, hn), *c0 = g_new (float, hn);
      for (size_t i = 0; i < hn; i++)
        {
          h0[i] = 0.5f * shoal_rng_gaussian (&rng);
          c0[i] = 0.5f * shoal_rng_gaussian (&rng);
        }
      ShoalLayer *x = shoal_net_find (net, "x");
      size_t nout = shoal_tensor_count (&r->out);
      float *w = g_new (float, nout);
      for (size_t i = 0; i < nout; i++)
        w[i] = shoal_rng_gaussian (&rng);
#define SET_STATE()                                                                   \
      do {                                                                            \
        memcpy (p->state_h[0], h0, hn * sizeof (float));                              \
        if (p->cell->has_cell)                                                        \
          memcpy (p->state_c[0], c0, hn * sizeof (float));                            \
      } while (0)
      /* J = sum out * w */
      SET_STATE ();
      r->ops->forward (r, SHOAL_PHASE_TRAIN);
      memcpy (r->grad.data, w, nout * sizeof (float));
      shoal_param_store_zero_grads (shoal_net_params (net));
      r->ops->backward (r);
      const float eps = 3e-3f;
      int checked = 0;
      /* inputs and every param */
      for (int what = -1; what < r->nparams; what++)
        {
          float *v = what < 0 ? x->out.data : r->params[what]->value.data;
          const float *g = what < 0 ? x->grad.data : r->params[what]->grad.data;
          size_t n = what < 0 ? shoal_tensor_count (&x->out) : r->params[what]->count;
          for (size_t i = 0; i < n; i += 3)
            {
              float saved = v[i];
              double j[2];
              for (int s = 0; s < 2; s++)
                {
                  v[i] = saved + (s ? -eps : eps);
                  SET_STATE ();
                  r->ops->forward (r, SHOAL_PHASE_TRAIN);
                  j[s] = 0;
                  for (size_t o = 0; o < nout; o++)
                    j[s] += (double) r->out.data[o] * w[o];
                }
              v[i] = saved;
              double numeric = (j[0] - j[1]) / (2 * eps);
              g_assert_cmpfloat_with_epsilon (g[i], numeric, 2e-3 + 2e-2 * fabs (numeric));
              checked++;
            }
        }
      g_assert_cmpint (checked, >, 50);
#undef SET_STATE
      g_free (h0);
      g_free (c0);
      g_free (w);
      g_free (text);
      shoal_net_free (net);
      shoal_conf_free (conf);
    }
}

/* shoal_layer_gradcheck with the default keys: a stateful layer (each
 * finite-difference forward would move the carried state on; the check
 * restores it) and an embedding over a feed (which holds valid ids then:
 * gaussian values would all be outside the vocabulary, a warning that
 * GTest makes fatal, and zero vectors compared with zero). */
static void
test_gradcheck_default_keys (void)
{
  ShoalGradcheckOptions o;
  shoal_gradcheck_options_init (&o);
  o.eps = 3e-3f;
  const char *types[] = { "gru", "lstm" };
  for (int k = 0; k < 2; k++)
    {
      char *text = g_strdup_printf ("[layer x]\ntype = feed\nshape = 3,4,3\nneed_grad = true\n"
                                    "[layer r]\ntype = %s\nsrc = x\nhidden_size = 5\nnum_layers = 2\n",
                                    types[k]);
      g_assert_cmpint (shoal_gradcheck_conf (text, "r", &o, 11 + k), >, 100);
      g_free (text);
    }
  int checked = 0;
  GError *error = NULL;
  const char *embed = "[layer ids]\ntype = feed\nshape = 3,4\n"
                      "[layer e]\ntype = embedding\nsrc = ids\nvocab_size = 6\nembedding_dim = 5\n";
  g_assert_true (shoal_layer_gradcheck (embed, "e", NULL, 3, &checked, &error));
  g_assert_no_error (error);
  g_assert_cmpint (checked, ==, 30);   /* every element of the 6 x 5 weight */
}

/* Two batches of T steps from the carried state equal one batch of 2T;
 * a restart mark in the stream source makes that row start from zeros. */
static void
test_state_carries (void)
{
  const char *types[] = { "gru", "lstm" };
  for (int k = 0; k < 2; k++)
    {
      ShoalConf *c_long, *c_short;
      char *tl = g_strdup_printf ("[layer x]\ntype = feed\nshape = 2,6,3\n"
                                  "[layer r]\ntype = %s\nsrc = x\nhidden_size = 4\nnum_layers = 2\n", types[k]);
      char *ts = g_strdup_printf ("[layer x]\ntype = feed\nshape = 2,3,3\n"
                                  "[layer m]\ntype = feed\nshape = 2,1\n"
                                  "[layer r]\ntype = %s\nsrc = x, m\nhidden_size = 4\nnum_layers = 2\n", types[k]);
      ShoalNet *nl = build (tl, &c_long, 2), *ns = build (ts, &c_short, 2);
      ShoalLayer *xl = shoal_net_find (nl, "x"), *xs = shoal_net_find (ns, "x"), *m = shoal_net_find (ns, "m");
      ShoalLayer *rl = shoal_net_find (nl, "r"), *rs = shoal_net_find (ns, "r");
      /* same params: same names, same seed */
      m->out.data[0] = m->out.data[1] = 1.0f;  /* no restart */
      shoal_net_forward (nl, SHOAL_PHASE_TRAIN);
      float second[2 * 3 * 4];
      for (int half = 0; half < 2; half++)
        {
          for (int b = 0; b < 2; b++)
            memcpy (xs->out.data + b * 9, xl->out.data + b * 18 + half * 9, 9 * sizeof (float));
          shoal_net_forward (ns, SHOAL_PHASE_TRAIN);
          for (int b = 0; b < 2; b++)
            for (int i = 0; i < 12; i++)
              g_assert_cmpfloat_with_epsilon (rs->out.data[b * 12 + i], rl->out.data[b * 24 + half * 12 + i], 1e-5);
          memcpy (second, rs->out.data, sizeof second);
        }
      /* the test phase has its own state: it starts from zeros */
      shoal_net_forward (ns, SHOAL_PHASE_TEST);
      float fresh[24];
      memcpy (fresh, rs->out.data, sizeof fresh);
      /* row 1 restarts in the train phase: its outputs are the fresh ones,
       * row 0 goes on from its state (differs from the fresh outputs) */
      m->out.data[1] = -3.0f;
      shoal_net_forward (ns, SHOAL_PHASE_TRAIN);
      for (int i = 0; i < 12; i++)
        g_assert_cmpfloat_with_epsilon (rs->out.data[12 + i], fresh[12 + i], 1e-6);
      gboolean differs = FALSE;
      for (int i = 0; i < 12; i++)
        differs |= fabsf (rs->out.data[i] - fresh[i]) > 1e-4f;
      g_assert_true (differs);
      /* the state survives save and load: a copy of the net continues alike */
      GBytes *state = shoal_net_save_state (ns);
      ShoalConf *c2;
      ShoalNet *n2 = build (ts, &c2, 2);
      GError *error = NULL;
      g_assert_true (shoal_net_load_state (n2, state, &error));
      g_assert_no_error (error);
      memcpy (shoal_net_find (n2, "x")->out.data, xs->out.data, 18 * sizeof (float));
      shoal_net_find (n2, "m")->out.data[0] = shoal_net_find (n2, "m")->out.data[1] = 1.0f;
      m->out.data[1] = 1.0f;
      shoal_net_forward (ns, SHOAL_PHASE_TRAIN);
      shoal_net_forward (n2, SHOAL_PHASE_TRAIN);
      ShoalLayer *r2 = shoal_net_find (n2, "r");
      for (int i = 0; i < 24; i++)
        g_assert_cmpfloat (r2->out.data[i], ==, rs->out.data[i]);
      /* a state of another shape is refused */
      ShoalConf *c3;
      char *t3 = g_strdup_printf ("[layer x]\ntype = feed\nshape = 2,3,3\n"
                                  "[layer m]\ntype = feed\nshape = 2,1\n"
                                  "[layer r]\ntype = %s\nsrc = x, m\nhidden_size = 5\nnum_layers = 2\n", types[k]);
      ShoalNet *n3 = build (t3, &c3, 2);
      g_assert_false (shoal_net_load_state (n3, state, &error));
      g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA);
      g_assert_nonnull (strstr (error->message, "layer 'r': the checkpointed recurrent state is of another shape"));
      g_clear_error (&error);
      (void) second;
      g_bytes_unref (state);
      shoal_net_free (n3);
      shoal_conf_free (c3);
      g_free (t3);
      shoal_net_free (n2);
      shoal_conf_free (c2);
      shoal_net_free (nl);
      shoal_net_free (ns);
      shoal_conf_free (c_long);
      shoal_conf_free (c_short);
      g_free (tl);
      g_free (ts);
    }
}

/* embedding: ids set by hand (negative ones are restart marks), then
 * the usual check of the weight's gradient. */
static void
test_embedding (void)
{
  ShoalConf *conf;
  ShoalNet *net = build ("[layer ids]\ntype = feed\nshape = 3,4\n"
                         "[layer e]\ntype = embedding\nsrc = ids\nvocab_size = 7\nembedding_dim = 5\n",
                         &conf, 1);
  ShoalLayer *ids = shoal_net_find (net, "ids"), *e = shoal_net_find (net, "e");
  const float v[12] = { 0, 6, 3, 3, -2, 1, 1, 5, 2, 2, 0, 4 };  /* -2 is id 1 */
  memcpy (ids->out.data, v, sizeof v);
  g_assert_cmpint (e->out.shape.ndim, ==, 3);
  g_assert_cmpint (e->out.shape.dim[2], ==, 5);
  shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  const float *w = e->params[0]->value.data;
  for (int i = 0; i < 12; i++)
    {
      int id = v[i] < 0 ? (int) (-v[i] - 1) : (int) v[i];
      for (int j = 0; j < 5; j++)
        g_assert_cmpfloat (e->out.data[i * 5 + j], ==, w[id * 5 + j]);
    }
  int checked = shoal_gradcheck_net (net, "e", NULL);
  g_assert_cmpint (checked, >, 0);
  /* an id beyond the vocabulary: a zero vector and a warning */
  ids->out.data[0] = 9;
  g_test_expect_message (G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*id 9 is not one of [0, 7)*");
  shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  g_test_assert_expected_messages ();
  for (int j = 0; j < 5; j++)
    g_assert_cmpfloat (e->out.data[j], ==, 0.0f);
  shoal_net_free (net);
  shoal_conf_free (conf);
}

/* dense with axis = 2 over a sequence, and a per-step softmax loss:
 * gradient checks, and the loss equals the mean over rows and steps of
 * the per-step cross-entropies computed here. */
static void
test_per_step_layers (void)
{
  const char *dense =
    "[layer x]\ntype = feed\nshape = 3,4,5\nneed_grad = true\n"
    "[layer fc]\ntype = dense\nsrc = x\nnum_output = 6\naxis = 2\n";
  g_assert_cmpint (shoal_gradcheck_conf (dense, "fc", NULL, 7), >, 0);
  const char *loss =
    "[layer x]\ntype = feed\nshape = 3,4,6\nneed_grad = true\n"
    "[layer y]\ntype = feed\nshape = 3,1\nnum_classes = 6\nlabel_steps = 4\n"
    "[layer loss]\ntype = softmax_loss\nsrc = x, y\nloss_weight = 1.5\n";
  g_assert_cmpint (shoal_gradcheck_conf (loss, "loss", NULL, 8), >, 0);

  ShoalConf *conf;
  ShoalNet *net = build ("[layer x]\ntype = feed\nshape = 3,4,6\n"
                         "[layer y]\ntype = feed\nshape = 3,1\nnum_classes = 6\nlabel_steps = 4\n"
                         "[layer loss]\ntype = softmax_loss\nsrc = x, y\n"
                         "[layer acc]\ntype = accuracy\nsrc = x, y\n", &conf, 9);
  ShoalLayer *x = shoal_net_find (net, "x"), *y = shoal_net_find (net, "y");
  shoal_net_forward (net, SHOAL_PHASE_TEST);
  double want = 0;
  int correct = 0;
  for (int g = 0; g < 12; g++)
    {
      const float *l = x->out.data + g * 6;
      int lab = (int) y->label.data[g], best = 0;
      double s = 0;
      for (int c = 0; c < 6; c++)
        {
          s += exp (l[c]);
          best = l[c] > l[best] ? c : best;
        }
      want += log (s) - l[lab];
      correct += best == lab;
    }
  g_assert_cmpfloat_with_epsilon (shoal_net_find (net, "loss")->out.data[0], want / 12, 1e-5);
  g_assert_cmpfloat_with_epsilon (shoal_net_find (net, "acc")->out.data[0], correct / 12.0, 1e-6);
  shoal_net_free (net);
  shoal_conf_free (conf);
}

/* ---- equal to PyTorch ------------------------------------------------------
 * test/golden/rnn_*.txt come from test/golden/make_rnn_golden.py (torch
 * nn.GRU / nn.LSTM, 2 levels, batch_first, non-zero initial states): the
 * same params by name, the same x and initial states give the same y and
 * final states, and for the loss sum(y * dy) the same dx and gradient of
 * every param. */

static GHashTable *
load_golden (const char *path)
{
  char *text = NULL;
  GError *error = NULL;
  if (!g_file_get_contents (path, &text, NULL, &error))
    g_error ("%s (run the tests from the repository root)", error->message);
  GHashTable *t = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) g_array_unref);
  char **lines = g_strsplit (text, "\n", -1);
  for (int i = 0; lines[i] != NULL; i++)
    {
      if (lines[i][0] == '#' || lines[i][0] == '\0')
        continue;
      char **f = g_strsplit (lines[i], " ", -1);
      int ndim = atoi (f[1]);
      size_t count = 1;
      for (int d = 0; d < ndim; d++)
        count *= (size_t) atoi (f[2 + d]);
      GArray *v = g_array_sized_new (FALSE, FALSE, sizeof (float), (guint) count);
      for (size_t j = 0; j < count; j++)
        {
          g_assert_nonnull (f[2 + ndim + j]);
          float x = (float) g_ascii_strtod (f[2 + ndim + j], NULL);
          g_array_append_val (v, x);
        }
      g_hash_table_insert (t, g_strdup (f[0]), v);
      g_strfreev (f);
    }
  g_strfreev (lines);
  g_free (text);
  return t;
}

static const float *
golden (GHashTable *t, const char *name, size_t count)
{
  GArray *v = g_hash_table_lookup (t, name);
  if (v == NULL)
    g_error ("golden tensor %s missing", name);
  g_assert_cmpuint (v->len, ==, count);
  return (const float *) v->data;
}

static void
assert_close (const char *what, const float *got, const float *want, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (fabsf (got[i] - want[i]) > 2e-5f + 2e-5f * fabsf (want[i]))
      g_error ("%s[%zu]: shoal %.8g, torch %.8g", what, i, got[i], want[i]);
}

static void
check_torch (const char *type, const char *path)
{
  GHashTable *t = load_golden (path);
  enum { B = 3, T = 4, I = 5, H = 6, L = 2 };
  ShoalConf *conf;
  char *text = g_strdup_printf ("[layer x]\ntype = feed\nshape = 3,4,5\nneed_grad = true\n"
                                "[layer r]\ntype = %s\nsrc = x\nhidden_size = 6\nnum_layers = 2\n", type);
  ShoalNet *net = build (text, &conf, 1);
  ShoalLayer *x = shoal_net_find (net, "x"), *r = shoal_net_find (net, "r");
  gboolean lstm = strcmp (type, "lstm") == 0;
  memcpy (x->out.data, golden (t, "x", B * T * I), B * T * I * sizeof (float));
  for (int p = 0; p < r->nparams; p++)
    {
      const char *name = strchr (r->params[p]->name, '/') + 1;
      memcpy (r->params[p]->value.data, golden (t, name, r->params[p]->count), r->params[p]->count * sizeof (float));
    }
  g_assert_cmpint (r->nparams, ==, 4 * L);
  for (int l = 0; l < L; l++)
    {
      memcpy (shoal_recurrent_state (r, SHOAL_PHASE_TRAIN, l, FALSE), golden (t, "h0", L * B * H) + l * B * H,
              B * H * sizeof (float));
      if (lstm)
        memcpy (shoal_recurrent_state (r, SHOAL_PHASE_TRAIN, l, TRUE), golden (t, "c0", L * B * H) + l * B * H,
                B * H * sizeof (float));
    }
  shoal_param_store_zero_grads (shoal_net_params (net));
  shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  assert_close ("y", r->out.data, golden (t, "y", B * T * H), B * T * H);
  for (int l = 0; l < L; l++)
    {
      assert_close ("h_n", shoal_recurrent_state (r, SHOAL_PHASE_TRAIN, l, FALSE),
                    golden (t, "h_n", L * B * H) + l * B * H, B * H);
      if (lstm)
        assert_close ("c_n", shoal_recurrent_state (r, SHOAL_PHASE_TRAIN, l, TRUE),
                      golden (t, "c_n", L * B * H) + l * B * H, B * H);
    }
  memcpy (r->grad.data, golden (t, "dy", B * T * H), B * T * H * sizeof (float));
  shoal_net_backward (net);
  assert_close ("dx", x->grad.data, golden (t, "dx", B * T * I), B * T * I);
  for (int p = 0; p < r->nparams; p++)
    {
      char *name = g_strconcat ("grad_", strchr (r->params[p]->name, '/') + 1, NULL);
      assert_close (name, r->params[p]->grad.data, golden (t, name, r->params[p]->count), r->params[p]->count);
      g_free (name);
    }
  shoal_net_free (net);
  shoal_conf_free (conf);
  g_free (text);
  g_hash_table_destroy (t);
}

static void
test_gru_equals_torch (void)
{
  check_torch ("gru", "test/golden/rnn_gru.txt");
}

static void
test_lstm_equals_torch (void)
{
  check_torch ("lstm", "test/golden/rnn_lstm.txt");
}

/* [updater] clip_norm: the worker clips the whole store's gradient, the
 * recurrent layers' included, to that global L2 norm, keeping its
 * direction (shoal_clip_gradients, as worker.c calls it). */
static void
test_clip_norm (void)
{
  ShoalConf *conf;
  ShoalNet *net = build ("[layer ids]\ntype = feed\nshape = 4,6\nnum_classes = 9\nlabel_steps = 6\n"
                         "[layer e]\ntype = embedding\nsrc = ids\nvocab_size = 9\nembedding_dim = 5\n"
                         "[layer r]\ntype = lstm\nsrc = e\nhidden_size = 7\n"
                         "[layer fc]\ntype = dense\nsrc = r\nnum_output = 9\naxis = 2\n"
                         "[layer loss]\ntype = softmax_loss\nsrc = fc, ids\nloss_weight = 50\n", &conf, 4);
  ShoalLayer *ids = shoal_net_find (net, "ids");
  for (int i = 0; i < 24; i++)
    ids->out.data[i] = (float) (i % 9);
  ShoalParamStore *store = shoal_net_params (net);
  shoal_param_store_zero_grads (store);
  shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  shoal_net_backward (net);
  double norm = 0;
  for (size_t i = 0; i < store->total; i++)
    norm += (double) store->grads[i] * store->grads[i];
  norm = sqrt (norm);
  g_assert_cmpfloat (norm, >, 2.0);
  float *before = g_memdup2 (store->grads, store->total * sizeof (float));
  shoal_clip_gradients (store->grads, store->total, 0, 1.0f);
  double clipped = 0;
  for (size_t i = 0; i < store->total; i++)
    {
      clipped += (double) store->grads[i] * store->grads[i];
      g_assert_cmpfloat_with_epsilon (store->grads[i], before[i] / norm, 1e-6);
    }
  g_assert_cmpfloat_with_epsilon (sqrt (clipped), 1.0, 1e-5);
  /* a gradient inside the norm is left alone */
  memcpy (store->grads, before, store->total * sizeof (float));
  shoal_clip_gradients (store->grads, store->total, 0, (float) (2 * norm));
  g_assert_cmpmem (store->grads, store->total * sizeof (float), before, store->total * sizeof (float));
  g_free (before);
  shoal_net_free (net);
  shoal_conf_free (conf);
}

static void
test_bad_sources (void)
{
  shoal_expect_net_error ("[layer x]\ntype = feed\nshape = 4,5\n"
                    "[layer r]\ntype = gru\nsrc = x\nhidden_size = 3\n",
                    "bad.conf:6: [layer r] src: a gru layer reads a (batch, steps, features) source; 'x' is 4x5");
  shoal_expect_net_error ("[layer x]\ntype = feed\nshape = 4,2,5\n[layer m]\ntype = feed\nshape = 3,1\n"
                    "[layer r]\ntype = lstm\nsrc = x, m\nhidden_size = 3\n",
                    "bad.conf:9: [layer r] src: the stream source 'm' has 3 rows, the sequence 'x' 4");
  shoal_expect_net_error ("[layer x]\ntype = feed\nshape = 4,2,5\n"
                    "[layer r]\ntype = gru\nsrc = x\nhidden_size = 3\ndropout = 1\n",
                    "bad.conf:8: [layer r] dropout: must be below 1 (1 drops every unit), got 1");
  shoal_expect_net_error ("[layer x]\ntype = feed\nshape = 4,2,5\n"
                    "[layer r]\ntype = gru\nsrc = x\nhidden_size = 3\nnum_layers = 9\n",
                    "bad.conf:8: [layer r] num_layers: ");
  shoal_expect_net_error ("[layer x]\ntype = feed\nshape = 4,6\n"
                    "[layer y]\ntype = feed\nshape = 4,1\nnum_classes = 3\nlabel_steps = 4\n"
                    "[layer loss]\ntype = softmax_loss\nsrc = x, y\n",
                    "bad.conf:11: [layer loss] src: logits 'x' (4x6) are not 4 steps of classes, one per label of a row");
  shoal_expect_net_error ("[layer x]\ntype = feed\nshape = 4,6\n"
                    "[layer fc]\ntype = dense\nsrc = x\nnum_output = 2\naxis = 2\n",
                    "bad.conf:8: [layer fc] axis: is 2 but source 'x' (4x6) has only 2 dims");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/recurrent/gru-gradcheck", test_gru_gradcheck);
  g_test_add_func ("/recurrent/lstm-gradcheck", test_lstm_gradcheck);
  g_test_add_func ("/recurrent/gradcheck-initial-state", test_gradcheck_initial_state);
  g_test_add_func ("/recurrent/gradcheck-default-keys", test_gradcheck_default_keys);
  g_test_add_func ("/recurrent/state-carries", test_state_carries);
  g_test_add_func ("/recurrent/embedding", test_embedding);
  g_test_add_func ("/recurrent/per-step-layers", test_per_step_layers);
  g_test_add_func ("/recurrent/gru-equals-torch", test_gru_equals_torch);
  g_test_add_func ("/recurrent/lstm-equals-torch", test_lstm_equals_torch);
  g_test_add_func ("/recurrent/clip-norm", test_clip_norm);
  g_test_add_func ("/recurrent/bad-sources", test_bad_sources);
  return g_test_run ();
}
