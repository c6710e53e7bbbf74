/* The net builder: order, split insertion and the gradient through a
 * fan-out (local gradient checks plus a finite-difference check of the
 * whole net's loss), which layers get gradients, the param layout and
 * initialisation, smaller batches, metrics. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "layers/split.h"
#include "net/net.h"
#include "support/gradcheck.h"

static ShoalNet *
build (const char *text, guint64 seed, ShoalConf **conf_out)
{
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data (text, "net.conf", &error);
  g_assert_no_error (error);
  ShoalNetOptions opts = { .seed = seed, .shard_count = 1 };
  ShoalNet *net = shoal_net_new (conf, &opts, &error);
  g_assert_no_error (error);
  shoal_param_store_init_values (shoal_net_params (net), seed);
  *conf_out = conf;
  return net;
}

static void
destroy (ShoalNet *net, ShoalConf *conf)
{
  shoal_net_free (net);
  shoal_conf_free (conf);
}

/* Every layer comes after its sources. */
static void
assert_topological (ShoalNet *net)
{
  for (guint i = 0; i < shoal_net_n_layers (net); i++)
    {
      ShoalLayer *layer = shoal_net_layer (net, i);
      for (int s = 0; s < layer->nsrcs; s++)
        {
          gboolean before = FALSE;
          for (guint j = 0; j < i; j++)
            before |= shoal_net_layer (net, j) == layer->srcs[s];
          g_assert_true (before);
        }
    }
}

static char *
layer_names (ShoalNet *net)
{
  GString *s = g_string_new (NULL);
  for (guint i = 0; i < shoal_net_n_layers (net); i++)
    g_string_append_printf (s, "%s%s", i ? " " : "", shoal_net_layer (net, i)->name);
  return g_string_free (s, FALSE);
}

/* One group per string, so that tests can reorder them. */
static const char *const chain_groups[] = {
  "[layer in]\ntype = feed\nshape = 4,5\nnum_classes = 3\n",
  "[layer fc1]\ntype = dense\nsrc = in\nnum_output = 6\n",
  "[layer act]\ntype = tanh\nsrc = fc1\n",
  "[layer fc2]\ntype = dense\nsrc = act\nnum_output = 3\n",
  "[layer loss]\ntype = softmax_loss\nsrc = fc2, in\n",
};

static char *
join_groups (const char *const *groups, const int *order, int n)
{
  GString *s = g_string_new (NULL);
  for (int i = 0; i < n; i++)
    g_string_append (s, groups[order[i]]);
  return g_string_free (s, FALSE);
}

static void
test_order_independent_of_file (void)
{
  const int orders[][5] = { { 0, 1, 2, 3, 4 }, { 4, 3, 2, 1, 0 }, { 2, 4, 0, 3, 1 }, { 3, 0, 4, 1, 2 } };
  char *first_names = NULL;
  double first_loss = 0;
  for (gsize k = 0; k < G_N_ELEMENTS (orders); k++)
    {
      char *text = join_groups (chain_groups, orders[k], 5);
      ShoalConf *conf;
      ShoalNet *net = build (text, 3, &conf);
      assert_topological (net);
      char *names = layer_names (net);
      /* a chain has one order; in feeds fc1 and the loss: a split */
      g_assert_cmpstr (names, ==, "in in/split fc1 act fc2 loss");
      double loss = shoal_net_forward (net, SHOAL_PHASE_TRAIN);
      g_assert_true (isfinite (loss) && loss > 0);
      if (first_names == NULL)
        {
          first_names = names;
          first_loss = loss;
        }
      else
        {
          /* same params by name, same feed data by name: same loss */
          g_assert_cmpfloat (loss, ==, first_loss);
          g_free (names);
        }
      destroy (net, conf);
      g_free (text);
    }
  g_free (first_names);

  /* branches: any valid order, in conf order where free */
  ShoalConf *conf;
  ShoalNet *net = build ("[layer b]\ntype = dense\nsrc = x\nnum_output = 2\n"
                         "[layer cat]\ntype = concat\nsrc = a, b\n"
                         "[layer a]\ntype = relu\nsrc = x\n"
                         "[layer x]\ntype = feed\nshape = 2,3\n",
                         1, &conf);
  assert_topological (net);
  char *names = layer_names (net);
  g_assert_cmpstr (names, ==, "x x/split b a cat");
  g_free (names);
  destroy (net, conf);
}

/* x feeds two dense layers whose outputs are compared. */
static const char fanout_conf[] =
  "[layer x]\ntype = feed\nshape = 4,5\nneed_grad = true\n"
  "[layer a]\ntype = dense\nsrc = x\nnum_output = 3\n"
  "[layer b]\ntype = dense\nsrc = x\nnum_output = 3\n"
  "[layer loss]\ntype = euclidean_loss\nsrc = a, b\n";

static void
test_split_inserted (void)
{
  ShoalConf *conf;
  ShoalNet *net = build (fanout_conf, 1, &conf);
  g_assert_cmpuint (shoal_net_n_layers (net), ==, 5);
  ShoalLayer *x = shoal_net_find (net, "x"), *split = shoal_net_find (net, "x/split");
  ShoalLayer *a = shoal_net_find (net, "a"), *b = shoal_net_find (net, "b");
  g_assert_nonnull (split);
  g_assert_true (shoal_net_layer (net, 1) == split);
  g_assert_cmpstr (split->ops->type, ==, "split");
  g_assert_true (split->srcs[0] == x);
  g_assert_true (a->srcs[0] == split && b->srcs[0] == split);
  /* no copy: consumers read the source's memory */
  g_assert_true (split->out.data == x->out.data);
  g_assert_true (shoal_shape_equal (&split->out.shape, &x->out.shape));
  /* each consumer writes its own gradient buffer, the split sums them into x */
  g_assert_nonnull (a->src_grad[0]);
  g_assert_nonnull (b->src_grad[0]);
  g_assert_true (a->src_grad[0] != b->src_grad[0]);
  g_assert_true (split->src_grad[0] == &x->grad);
  /* the loss reads a and b once each: no split for them */
  g_assert_null (shoal_net_find (net, "a/split"));

  shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  shoal_param_store_zero_grads (shoal_net_params (net));
  shoal_net_backward (net);
  size_t n = shoal_tensor_count (&x->out);
  for (size_t i = 0; i < n; i++)
    g_assert_cmpfloat (x->grad.data[i], ==, a->src_grad[0]->data[i] + b->src_grad[0]->data[i]);
  destroy (net, conf);
}

static void
test_split_gradcheck_consumers (void)
{
  /* the layers reading the split, against finite differences of their own output */
  g_assert_cmpint (shoal_gradcheck_conf (fanout_conf, "a", NULL, 4), >, 0);
  g_assert_cmpint (shoal_gradcheck_conf (fanout_conf, "b", NULL, 5), >, 0);
  g_assert_cmpint (shoal_gradcheck_conf (fanout_conf, "loss", NULL, 6), >, 0);
}

/* Compares analytic[i] with the central difference of the whole net's
 * loss in x[i], every element.  Returns the elements compared. */
static int
whole_net_check (ShoalNet *net, const char *what, float *x, const float *analytic, size_t n)
{
  const float eps = 1e-2f;
  int failures = 0;
  for (size_t i = 0; i < n; i++)
    {
      float saved = x[i];
      x[i] = saved + eps;
      double jp = shoal_net_forward (net, SHOAL_PHASE_TRAIN);
      x[i] = saved - eps;
      double jm = shoal_net_forward (net, SHOAL_PHASE_TRAIN);
      x[i] = saved;
      double numeric = (jp - jm) / (2.0 * eps);
      double tol = 1e-3 + 1e-2 * fmax (fabs (numeric), fabs (analytic[i]));
      if (fabs (numeric - analytic[i]) > tol)
        {
          if (failures++ < 10)
            g_test_message ("%s[%zu]: analytic %.6g, numeric %.6g", what, i, analytic[i], numeric);
        }
    }
  g_assert_cmpint (failures, ==, 0);
  return (int) n;
}

/* Runs forward and backward, then checks the gradients reaching the named
 * feed layer and the named params against the whole net's loss. */
static void
check_net_gradients (ShoalNet *net, const char *feed, const char *const *params)
{
  shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  shoal_param_store_zero_grads (shoal_net_params (net));
  shoal_net_backward (net);

  ShoalLayer *x = shoal_net_find (net, feed);
  size_t n = shoal_tensor_count (&x->out);
  float *dx = g_memdup2 (x->grad.data, n * sizeof (float));
  double norm = 0;
  for (size_t i = 0; i < n; i++)
    norm += fabs (dx[i]);
  g_assert_cmpfloat (norm, >, 1e-3);  /* the check must compare something */
  whole_net_check (net, feed, x->out.data, dx, n);
  g_free (dx);

  for (int p = 0; params[p] != NULL; p++)
    {
      ShoalParam *param = shoal_param_store_find (shoal_net_params (net), params[p]);
      g_assert_nonnull (param);
      float *dw = g_memdup2 (param->grad.data, param->count * sizeof (float));
      whole_net_check (net, params[p], param->value.data, dw, param->count);
      g_free (dw);
    }
}

static void
test_fanout_whole_net (void)
{
  ShoalConf *conf;
  ShoalNet *net = build (fanout_conf, 7, &conf);
  const char *const params[] = { "a/weight", "b/bias", NULL };
  check_net_gradients (net, "x", params);
  destroy (net, conf);

  /* x feeds three layers (one of them directly a concat), a hidden layer
   * feeds two, and a nonlinearity sits in between */
  net = build ("[layer x]\ntype = feed\nshape = 3,5\nneed_grad = true\n"
               "[layer t]\ntype = feed\nshape = 3,3\n"
               "[layer h]\ntype = dense\nsrc = x\nnum_output = 6\n"
               "[layer th]\ntype = tanh\nsrc = h\n"
               "[layer a]\ntype = dense\nsrc = th\nnum_output = 4\n"
               "[layer b]\ntype = dense\nsrc = th\nnum_output = 2\n"
               "[layer c]\ntype = sigmoid\nsrc = x\n"
               "[layer cat]\ntype = concat\nsrc = a, b, c, x\n"
               "[layer out]\ntype = dense\nsrc = cat\nnum_output = 3\n"
               "[layer loss]\ntype = euclidean_loss\nsrc = out, t\n",
               8, &conf);
  g_assert_nonnull (shoal_net_find (net, "x/split"));
  g_assert_nonnull (shoal_net_find (net, "th/split"));
  const char *const params2[] = { "h/weight", "h/bias", "a/weight", NULL };
  check_net_gradients (net, "x", params2);
  destroy (net, conf);
}

static void
test_needs_grad (void)
{
  ShoalConf *conf;
  ShoalNet *net = build ("[layer x]\ntype = feed\nshape = 4,5\n"
                         "[layer t]\ntype = feed\nshape = 4,2\n"
                         "[layer r]\ntype = relu\nsrc = x\n"
                         "[layer r2]\ntype = tanh\nsrc = x\n"
                         "[layer cat]\ntype = concat\nsrc = r, r2\n"
                         "[layer fc]\ntype = dense\nsrc = cat\nnum_output = 2\n"
                         "[layer s]\ntype = sigmoid\nsrc = fc\n"
                         "[layer loss]\ntype = euclidean_loss\nsrc = s, t\n",
                         2, &conf);
  const char *no_grad[] = { "x", "t", "x/split", "r", "r2", "cat" };
  for (gsize i = 0; i < G_N_ELEMENTS (no_grad); i++)
    {
      ShoalLayer *l = shoal_net_find (net, no_grad[i]);
      g_assert_nonnull (l);
      g_assert_false (l->needs_grad);
      g_assert_null (l->grad.data);
      for (int s = 0; s < l->nsrcs; s++)
        g_assert_null (l->src_grad[s]);
    }
  ShoalLayer *fc = shoal_net_find (net, "fc"), *s = shoal_net_find (net, "s");
  ShoalLayer *loss = shoal_net_find (net, "loss");
  g_assert_true (fc->needs_grad && s->needs_grad && loss->needs_grad);
  g_assert_null (fc->src_grad[0]);
  g_assert_true (s->src_grad[0] == &fc->grad);
  g_assert_true (loss->src_grad[0] == &s->grad);
  g_assert_null (loss->src_grad[1]);

  /* backward skips them and still yields the param gradients */
  shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  shoal_param_store_zero_grads (shoal_net_params (net));
  shoal_net_backward (net);
  const char *const params[] = { "fc/weight", "fc/bias", NULL };
  for (int p = 0; params[p] != NULL; p++)
    {
      ShoalParam *param = shoal_param_store_find (shoal_net_params (net), params[p]);
      float *dw = g_memdup2 (param->grad.data, param->count * sizeof (float));
      whole_net_check (net, params[p], param->value.data, dw, param->count);
      g_free (dw);
    }
  destroy (net, conf);
}

static const char ranges_conf[] =
  "[layer x]\ntype = feed\nshape = 2,5\nnum_classes = 3\n"
  "[layer fc1]\ntype = dense\nsrc = x\nnum_output = 7\n"
  "[layer r]\ntype = relu\nsrc = fc1\n"
  "[layer fc2]\ntype = dense\nsrc = r\nnum_output = 5\nbias = false\n"
  "[layer fc3]\ntype = dense\nsrc = fc2\nnum_output = 3\n"
  "[layer loss]\ntype = softmax_loss\nsrc = fc3, x\n";

static void
test_param_ranges (void)
{
  ShoalConf *conf;
  ShoalNet *net = build (ranges_conf, 1, &conf);
  ShoalParamStore *store = shoal_net_params (net);
  size_t prev_end = 0;
  int with_params = 0;
  for (guint i = 0; i < shoal_net_n_layers (net); i++)
    {
      ShoalLayer *layer = shoal_net_layer (net, i);
      size_t begin = 0, end = 0;
      if (!shoal_layer_param_range (layer, &begin, &end))
        {
          g_assert_cmpint (layer->nparams, ==, 0);
          continue;
        }
      with_params++;
      /* in net order, after the previous layer's range, nothing between
       * but the padding of the previous layer's last param */
      g_assert_cmpuint (begin, >=, prev_end);
      g_assert_cmpuint (begin - prev_end, <, 16);
      g_assert_cmpuint (end, <=, store->total);
      size_t inside = 0;
      for (int p = 0; p < layer->nparams; p++)
        {
          const ShoalParam *param = layer->params[p];
          g_assert_cmpuint (param->offset, >=, begin);
          g_assert_cmpuint (param->offset + param->count, <=, end);
          inside += param->count;
        }
      g_assert_cmpuint (end - begin, <, inside + 16 * (size_t) layer->nparams);
      /* no param of another layer inside the range */
      for (guint k = 0; k < store->params->len; k++)
        {
          const ShoalParam *param = g_ptr_array_index (store->params, k);
          gboolean mine = FALSE;
          for (int p = 0; p < layer->nparams; p++)
            mine |= layer->params[p] == param;
          if (!mine)
            g_assert_true (param->offset + param->count <= begin || param->offset >= end);
        }
      prev_end = end;
    }
  g_assert_cmpint (with_params, ==, 3);
  g_assert_cmpuint (store->params->len, ==, 5);
  destroy (net, conf);
}

static void
test_init_by_name (void)
{
  ShoalConf *c1, *c2, *c3, *c4;
  const int order[] = { 4, 2, 0, 3, 1 };
  char *shuffled = join_groups (chain_groups, order, 5);
  /* one more layer with params, declared before all others */
  char *extra = g_strconcat ("[layer first]\ntype = dense\nsrc = in\nnum_output = 9\n"
                             "[layer sink]\ntype = euclidean_loss\nsrc = first, first2\n"
                             "[layer first2]\ntype = dense\nsrc = in\nnum_output = 9\n",
                             shuffled, NULL);
  const int plain[] = { 0, 1, 2, 3, 4 };
  char *ordered = join_groups (chain_groups, plain, 5);
  ShoalNet *n1 = build (ordered, 11, &c1);
  ShoalNet *n2 = build (shuffled, 11, &c2);
  ShoalNet *n3 = build (extra, 11, &c3);
  ShoalNet *n4 = build (ordered, 12, &c4);
  ShoalParamStore *s1 = shoal_net_params (n1);
  g_assert_cmpuint (s1->params->len, ==, 4);
  for (guint i = 0; i < s1->params->len; i++)
    {
      ShoalParam *p1 = g_ptr_array_index (s1->params, i);
      ShoalParam *p2 = shoal_param_store_find (shoal_net_params (n2), p1->name);
      ShoalParam *p3 = shoal_param_store_find (shoal_net_params (n3), p1->name);
      ShoalParam *p4 = shoal_param_store_find (shoal_net_params (n4), p1->name);
      g_assert_nonnull (p2);
      g_assert_nonnull (p3);
      g_assert_cmpuint (p3->offset, !=, p1->offset);
      g_assert_true (memcmp (p1->value.data, p2->value.data, p1->count * sizeof (float)) == 0);
      g_assert_true (memcmp (p1->value.data, p3->value.data, p1->count * sizeof (float)) == 0);
      /* and the seed matters (weights are random; biases start at 0) */
      if (strstr (p1->name, "weight") != NULL)
        g_assert_false (memcmp (p1->value.data, p4->value.data, p1->count * sizeof (float)) == 0);
    }
  destroy (n1, c1);
  destroy (n2, c2);
  destroy (n3, c3);
  destroy (n4, c4);
  g_free (shuffled);
  g_free (extra);
  g_free (ordered);
}

/* feed (8 rows) -> dense -> relu -> dense -> softmax_loss and accuracy;
 * the feed fans out to three layers. */
static const char *
classifier_conf (int rows)
{
  static char text[1024];
  g_snprintf (text, sizeof text,
              "[layer x]\ntype = feed\nshape = %d,5\nnum_classes = 3\n"
              "[layer h]\ntype = dense\nsrc = x\nnum_output = 6\n"
              "[layer r]\ntype = relu\nsrc = h\n"
              "[layer out]\ntype = dense\nsrc = r\nnum_output = 3\n"
              "[layer loss]\ntype = softmax_loss\nsrc = out, x\nloss_weight = 0.5\n"
              "[layer acc]\ntype = accuracy\nsrc = out, x\n",
              rows);
  return text;
}

static void
test_smaller_batch (void)
{
  ShoalConf *c8, *c3;
  ShoalNet *big = build (classifier_conf (8), 21, &c8);
  ShoalNet *small = build (classifier_conf (3), 21, &c3);
  ShoalLayer *bx = shoal_net_find (big, "x"), *sx = shoal_net_find (small, "x");
  memcpy (sx->out.data, bx->out.data, 3 * 5 * sizeof (float));
  memcpy (sx->label.data, bx->label.data, 3 * sizeof (float));

  double full = shoal_net_forward (big, SHOAL_PHASE_TRAIN);
  g_assert_cmpint (shoal_net_batch_rows (big), ==, 8);

  /* the big net with only its first 3 rows */
  shoal_tensor_set_rows (&bx->out, 3);
  shoal_tensor_set_rows (&bx->label, 3);
  double part = shoal_net_forward (big, SHOAL_PHASE_TRAIN);
  double want = shoal_net_forward (small, SHOAL_PHASE_TRAIN);
  g_assert_cmpint (shoal_net_batch_rows (big), ==, 3);
  g_assert_cmpfloat_with_epsilon (part, want, 1e-6);
  g_assert_cmpfloat (part, !=, full);
  for (guint i = 0; i < shoal_net_n_layers (big); i++)
    {
      ShoalLayer *l = shoal_net_layer (big, i);
      if (!(l->ops->flags & (SHOAL_LAYER_LOSS | SHOAL_LAYER_METRIC)))
        g_assert_cmpint (shoal_tensor_rows (&l->out), ==, 3);
    }
  g_assert_cmpfloat_with_epsilon (shoal_net_find (big, "acc")->out.data[0],
                                  shoal_net_find (small, "acc")->out.data[0], 1e-6);

  /* the gradients match those of a net built for 3 rows */
  shoal_param_store_zero_grads (shoal_net_params (big));
  shoal_param_store_zero_grads (shoal_net_params (small));
  shoal_net_backward (big);
  shoal_net_backward (small);
  ShoalParamStore *sb = shoal_net_params (big), *ss = shoal_net_params (small);
  for (guint k = 0; k < sb->params->len; k++)
    {
      ShoalParam *pb = g_ptr_array_index (sb->params, k);
      ShoalParam *ps = shoal_param_store_find (ss, pb->name);
      for (size_t i = 0; i < pb->count; i++)
        g_assert_cmpfloat_with_epsilon (pb->grad.data[i], ps->grad.data[i], 1e-5);
    }

  /* and back to the full batch */
  shoal_tensor_set_rows (&bx->out, 8);
  shoal_tensor_set_rows (&bx->label, 8);
  g_assert_cmpfloat (shoal_net_forward (big, SHOAL_PHASE_TRAIN), ==, full);
  g_assert_cmpint (shoal_tensor_rows (&shoal_net_find (big, "out")->out), ==, 8);
  destroy (big, c8);
  destroy (small, c3);
}

static void
test_metrics (void)
{
  ShoalConf *conf;
  ShoalNet *net = build (classifier_conf (8), 5, &conf);
  double total = shoal_net_forward (net, SHOAL_PHASE_TEST);

  /* the loss and accuracy from the logits, here */
  ShoalLayer *out = shoal_net_find (net, "out"), *x = shoal_net_find (net, "x");
  double ce = 0;
  int correct = 0;
  for (int i = 0; i < 8; i++)
    {
      const float *z = out->out.data + i * 3;
      int y = (int) x->label.data[i], best = 0;
      double m = fmax (fmax (z[0], z[1]), z[2]), sum = 0;
      for (int c = 0; c < 3; c++)
        {
          sum += exp (z[c] - m);
          best = z[c] > z[best] ? c : best;
        }
      ce += log (sum) + m - z[y];
      correct += best == y;
    }
  ce /= 8;

  ShoalMetric m[4];
  g_assert_cmpuint (shoal_net_metrics (net, m, 4), ==, 2);
  g_assert_cmpstr (m[0].layer, ==, "loss");
  g_assert_true (m[0].is_loss);
  g_assert_cmpfloat_with_epsilon (m[0].value, ce, 1e-5);
  g_assert_cmpstr (m[1].layer, ==, "acc");
  g_assert_false (m[1].is_loss);
  g_assert_cmpfloat_with_epsilon (m[1].value, correct / 8.0, 1e-6);
  /* forward returns the weighted loss */
  g_assert_cmpfloat_with_epsilon (total, 0.5 * ce, 1e-5);
  g_assert_cmpuint (shoal_net_metrics (net, m, 1), ==, 1);
  g_assert_cmpstr (m[0].layer, ==, "loss");
  g_assert_true (shoal_net_input (net) == x);
  destroy (net, conf);
}

static void
record_ready (ShoalLayer *layer, gpointer user_data)
{
  GString *s = user_data;
  g_string_append_printf (s, "%s%s", s->len ? " " : "", layer->name);
}

static void
test_backward_notify (void)
{
  ShoalConf *conf;
  ShoalNet *net = build (ranges_conf, 1, &conf);
  GString *order = g_string_new (NULL);
  shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  shoal_param_store_zero_grads (shoal_net_params (net));
  shoal_net_backward_notify (net, record_ready, order);
  /* layers with params, last first, each once its grads are complete */
  g_assert_cmpstr (order->str, ==, "fc3 fc2 fc1");
  g_string_free (order, TRUE);
  destroy (net, conf);
}

/* One step of plain SGD on the host store, after the step's backward. */
static void
sgd_step (ShoalNet *net, float lr)
{
  ShoalParamStore *s = shoal_net_params (net);
  for (size_t i = 0; i < s->total; i++)
    s->values[i] -= lr * s->grads[i];
  shoal_param_store_zero_grads (s);
}

/* Steps read a step late (shoal_net_train_step_late) return, with the
 * next call, exactly the loss and metrics that the same steps read at
 * once gave; a test forward in between leaves the unread step to the
 * next call; shoal_net_finish_step reads the last one, then none. */
static void
test_late_steps (void)
{
  ShoalConf *ca, *cb;
  ShoalNet *now = build (classifier_conf (8), 7, &ca);
  ShoalNet *late = build (classifier_conf (8), 7, &cb);
  GRand *rand = g_rand_new_with_seed (7);
  double want_loss[6];
  ShoalMetric want[6][2], got[2], tested[2];
  for (int step = 0; step < 6; step++)
    {
      float x[8 * 5], y[8];
      for (guint i = 0; i < G_N_ELEMENTS (x); i++)
        x[i] = (float) g_rand_double_range (rand, -1, 1);
      for (guint i = 0; i < G_N_ELEMENTS (y); i++)
        y[i] = (float) g_rand_int_range (rand, 0, 3);
      GError *error = NULL;
      g_assert_true (shoal_net_feed (now, "x", x, 8, y, &error));
      g_assert_true (shoal_net_feed (late, "x", x, 8, y, &error));
      g_assert_no_error (error);
      want_loss[step] = shoal_net_train_step (now, NULL, NULL);
      g_assert_cmpuint (shoal_net_metrics (now, want[step], 2), ==, 2);
      sgd_step (now, 0.3f);

      gboolean previous = TRUE;
      double loss = shoal_net_train_step_late (late, NULL, NULL, &previous);
      sgd_step (late, 0.3f);
      g_assert_true (previous == (step > 0));
      if (step == 0)
        {
          g_assert_true (isnan (loss));
          continue;
        }
      g_assert_cmpfloat (loss, ==, want_loss[step - 1]);
      g_assert_cmpuint (shoal_net_metrics (late, got, 2), ==, 2);
      for (int m = 0; m < 2; m++)
        g_assert_cmpfloat (got[m].value, ==, want[step - 1][m].value);
      if (step == 3)
        {
          /* a test forward reads its own metrics, and keeps the unread step */
          shoal_net_forward (late, SHOAL_PHASE_TEST);
          shoal_net_forward (now, SHOAL_PHASE_TEST);
          g_assert_cmpuint (shoal_net_metrics (late, got, 2), ==, 2);
          g_assert_cmpuint (shoal_net_metrics (now, tested, 2), ==, 2);
          g_assert_cmpfloat (got[0].value, ==, tested[0].value);
        }
    }
  double last = 0;
  g_assert_true (shoal_net_finish_step (late, &last));
  g_assert_cmpfloat (last, ==, want_loss[5]);
  g_assert_cmpuint (shoal_net_metrics (late, got, 2), ==, 2);
  g_assert_cmpfloat (got[1].value, ==, want[5][1].value);
  g_assert_false (shoal_net_finish_step (late, &last));
  g_rand_free (rand);
  destroy (now, ca);
  destroy (late, cb);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/net/order-independent-of-file", test_order_independent_of_file);
  g_test_add_func ("/net/split-inserted", test_split_inserted);
  g_test_add_func ("/net/split-gradcheck-consumers", test_split_gradcheck_consumers);
  g_test_add_func ("/net/fanout-whole-net", test_fanout_whole_net);
  g_test_add_func ("/net/needs-grad", test_needs_grad);
  g_test_add_func ("/net/param-ranges", test_param_ranges);
  g_test_add_func ("/net/init-by-name", test_init_by_name);
  g_test_add_func ("/net/smaller-batch", test_smaller_batch);
  g_test_add_func ("/net/metrics", test_metrics);
  g_test_add_func ("/net/backward-notify", test_backward_notify);
  g_test_add_func ("/net/late-steps", test_late_steps);
  return g_test_run ();
}
