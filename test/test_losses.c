/* Loss and metric layers: softmax_loss (gradient checks, a hand-computed
 * example, huge logits, loss_weight and loss_norm, unlabelled rows),
 * euclidean_loss (gradients to both sources, values, shape errors) and
 * accuracy (top-1 and top-k on hand-made logits, ties, NaN). */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "support/expect.h"
#include "support/gradcheck.h"

static ShoalNet *
build (const char *text, ShoalConf **conf)
{
  GError *error = NULL;
  *conf = shoal_conf_load_data (text, "test", &error);
  g_assert_no_error (error);
  ShoalNet *net = shoal_net_new (*conf, NULL, &error);
  g_assert_no_error (error);
  return net;
}

/* ---- softmax_loss ------------------------------------------------------- */

static void
test_softmax_gradcheck (void)
{
  const char *conf =
    "[layer x]\ntype = feed\nshape = 8,5\nneed_grad = true\n"
    "[layer y]\ntype = feed\nshape = 8,1\nnum_classes = 5\n"
    "[layer loss]\ntype = softmax_loss\nsrc = x, y\n";
  g_assert_cmpint (shoal_gradcheck_conf (conf, "loss", NULL, 11), >, 0);
  const char *weighted =
    "[layer x]\ntype = feed\nshape = 3,2,2,3\nneed_grad = true\n"
    "[layer y]\ntype = feed\nshape = 3,1\nnum_classes = 12\n"
    "[layer loss]\ntype = softmax_loss\nsrc = x, y\nloss_weight = 2.5\n";
  g_assert_cmpint (shoal_gradcheck_conf (weighted, "loss", NULL, 12), >, 0);
}

static ShoalNet *
softmax_net (int rows, int classes, const float *logits, const float *labels, ShoalConf **conf,
             const char *extra)
{
  char *text = g_strdup_printf ("[layer x]\ntype = feed\nshape = %d,%d\nneed_grad = true\n"
                                "[layer y]\ntype = feed\nshape = %d,1\nnum_classes = %d\n"
                                "[layer loss]\ntype = softmax_loss\nsrc = x, y\n%s",
                                rows, classes, rows, classes, extra);
  ShoalNet *net = build (text, conf);
  g_free (text);
  memcpy (shoal_net_find (net, "x")->out.data, logits, (size_t) rows * classes * sizeof (float));
  memcpy (shoal_net_find (net, "y")->label.data, labels, (size_t) rows * sizeof (float));
  return net;
}

/* logits (1, 2, 3) with label 2 and (1, 1, 1) with label 0:
 *   row 0: -log(e^3 / (e + e^2 + e^3)) = log(1 + e^-1 + e^-2) = 0.407606
 *   row 1: -log(1/3) = log 3 = 1.098612;  mean 0.753109
 * gradient (softmax - onehot) / 2:
 *   row 0: (e^-2, e^-1, 1) / (1 + e^-1 + e^-2) - (0, 0, 1), halved
 *        = (0.045015, 0.122364, -0.167379)
 *   row 1: (1/3 - 1, 1/3, 1/3) / 2 = (-0.333333, 0.166667, 0.166667) */
static void
test_softmax_values (void)
{
  const float logits[6] = { 1, 2, 3, 1, 1, 1 }, labels[2] = { 2, 0 };
  ShoalConf *conf;
  ShoalNet *net = softmax_net (2, 3, logits, labels, &conf, "loss_weight = 3\n");
  ShoalLayer *loss = shoal_net_find (net, "loss"), *x = shoal_net_find (net, "x");

  double total = shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  g_assert_cmpfloat_with_epsilon (loss->out.data[0], 0.753109, 1e-5);
  g_assert_cmpfloat_with_epsilon (total, 3 * 0.753109, 3e-5);  /* the net weighs the loss */

  shoal_net_backward (net);
  const float want[6] = { 0.045015f, 0.122364f, -0.167379f, -0.333333f, 0.166667f, 0.166667f };
  for (int i = 0; i < 6; i++)
    g_assert_cmpfloat_with_epsilon (x->grad.data[i], 3 * want[i], 3e-5);

  /* loss_norm (set by the partitioner for a split batch) replaces the rows */
  loss->loss_norm = 8;
  shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  g_assert_cmpfloat_with_epsilon (loss->out.data[0], 2 * 0.753109 / 8, 1e-5);
  shoal_net_backward (net);
  for (int i = 0; i < 6; i++)
    g_assert_cmpfloat_with_epsilon (x->grad.data[i], 3 * want[i] * 2 / 8, 1e-5);

  /* one row of a batch of two */
  loss->loss_norm = 0;
  shoal_tensor_set_rows (&x->out, 1);
  shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  g_assert_cmpfloat_with_epsilon (loss->out.data[0], 0.407606, 1e-5);
  shoal_net_backward (net);
  g_assert_cmpint (shoal_tensor_rows (&x->grad), ==, 1);
  g_assert_cmpfloat_with_epsilon (x->grad.data[2], 3 * 2 * want[2], 3e-5);
  shoal_net_free (net);
  shoal_conf_free (conf);
}

static void
test_softmax_large_logits (void)
{
  const float logits[12] = { 1000, 0, -1000,
                             1000, 0, -1000,
                             3e38f, -3e38f, 0,
                             -88.5f, 88.5f, 0 };
  const float labels[4] = { 0, 1, 1, 0 };
  ShoalConf *conf;
  ShoalNet *net = softmax_net (4, 3, logits, labels, &conf, "");
  ShoalLayer *loss = shoal_net_find (net, "loss"), *x = shoal_net_find (net, "x");
  shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  /* row 0: 0; row 1: 1000; row 2: 6e38, beyond float but summed in
   * double, and the mean 1.5e38 fits; row 3: 177 */
  double want = (0.0 + 1000.0 + 6e38 + 177.0) / 4;
  g_assert_true (isfinite (loss->out.data[0]));
  g_assert_cmpfloat_with_epsilon (loss->out.data[0], want, want * 1e-6);

  shoal_net_backward (net);
  for (int i = 0; i < 12; i++)
    g_assert_true (isfinite (x->grad.data[i]));
  /* confident and right: no gradient; confident and wrong: -1/4 on the label */
  g_assert_cmpfloat_with_epsilon (x->grad.data[0], 0, 1e-7);
  g_assert_cmpfloat_with_epsilon (x->grad.data[3], 0.25, 1e-7);
  g_assert_cmpfloat_with_epsilon (x->grad.data[4], -0.25, 1e-7);
  g_assert_cmpfloat_with_epsilon (x->grad.data[9], -0.25, 1e-7);
  g_assert_cmpfloat_with_epsilon (x->grad.data[10], 0.25, 1e-7);
  shoal_net_free (net);
  shoal_conf_free (conf);

  /* 19 classes: the maximum in the vector part and in the tail of a row */
  float wide[38];
  for (int i = 0; i < 38; i++)
    wide[i] = (float) (i % 7) - 3;
  wide[10] = 500;
  wide[19 + 17] = 700;
  const float wide_labels[2] = { 10, 3 };
  net = softmax_net (2, 19, wide, wide_labels, &conf, "");
  loss = shoal_net_find (net, "loss");
  shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  /* row 0 is right with certainty, row 1 costs 700 - logit of class 3 */
  double logit3 = wide[19 + 3];
  g_assert_cmpfloat_with_epsilon (loss->out.data[0], (700 - logit3) / 2, 1e-3);
  shoal_net_free (net);
  shoal_conf_free (conf);
}

/* A row whose label is not a class (-1: the record had none) adds no
 * loss and no gradient; the first one is reported. */
static void
test_softmax_unlabelled_rows (void)
{
  const float logits[6] = { 1, 2, 3, 1, 1, 1 }, labels[2] = { -1, 0 };
  ShoalConf *conf;
  ShoalNet *net = softmax_net (2, 3, logits, labels, &conf, "");
  ShoalLayer *loss = shoal_net_find (net, "loss"), *x = shoal_net_find (net, "x");
  g_test_expect_message (G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*layer 'loss': row 0 has label -1*");
  shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  g_test_assert_expected_messages ();
  g_assert_cmpfloat_with_epsilon (loss->out.data[0], log (3.0) / 2, 1e-5);
  shoal_net_backward (net);
  for (int i = 0; i < 3; i++)
    g_assert_cmpfloat (x->grad.data[i], ==, 0);
  g_assert_cmpfloat_with_epsilon (x->grad.data[3], (1 / 3.0 - 1) / 2, 1e-6);
  /* reported once, not every step */
  shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  shoal_net_free (net);
  shoal_conf_free (conf);
}

/* A label that is neither a class nor -1 (an off-by-one K, say) is bad
 * input, not a missing label: the loss is NaN and the row is named. */
static void
test_softmax_bad_label (void)
{
  const float logits[6] = { 1, 2, 3, 1, 1, 1 };
  const float bad[][2] = { { 0, 3 }, { -2, 0 }, { 0.5f, 1 } };
  for (gsize k = 0; k < G_N_ELEMENTS (bad); k++)
    {
      ShoalConf *conf;
      ShoalNet *net = softmax_net (2, 3, logits, bad[k], &conf, "");
      g_test_expect_message (G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*not a class of [0, 3)*the loss is NaN*");
      double loss = shoal_net_forward (net, SHOAL_PHASE_TRAIN);
      g_test_assert_expected_messages ();
      g_assert_true (isnan (loss));
      shoal_net_free (net);
      shoal_conf_free (conf);
    }
}

static void
test_softmax_bad_sources (void)
{
  shoal_expect_net_error ("[layer x]\ntype = feed\nshape = 4,3\n"
                    "[layer y]\ntype = feed\nshape = 4,1\n"
                    "[layer loss]\ntype = softmax_loss\nsrc = x, y\n",
                    "[layer loss] src: source 'y' carries no labels");
  shoal_expect_net_error ("[layer x]\ntype = feed\nshape = 4,3\n"
                    "[layer y]\ntype = feed\nshape = 5,1\nnum_classes = 3\n"
                    "[layer loss]\ntype = softmax_loss\nsrc = x, y\n",
                    "'x' has 4 rows but 'y' has 5 labels");
}

/* ---- euclidean_loss ----------------------------------------------------- */

static void
test_euclidean_gradcheck (void)
{
  const char *both =
    "[layer a]\ntype = feed\nshape = 6,4\nneed_grad = true\n"
    "[layer b]\ntype = feed\nshape = 6,4\nneed_grad = true\n"
    "[layer loss]\ntype = euclidean_loss\nsrc = a, b\n";
  g_assert_cmpint (shoal_gradcheck_conf (both, "loss", NULL, 21), >, 0);
  /* 4-D prediction against a flat target, weighted, only one gradient */
  const char *one =
    "[layer a]\ntype = feed\nshape = 3,2,2,2\nneed_grad = true\n"
    "[layer b]\ntype = feed\nshape = 3,8\n"
    "[layer loss]\ntype = euclidean_loss\nsrc = a, b\nloss_weight = 0.5\n";
  g_assert_cmpint (shoal_gradcheck_conf (one, "loss", NULL, 22), >, 0);
}

static void
test_euclidean_values (void)
{
  ShoalConf *conf;
  ShoalNet *net = build ("[layer a]\ntype = feed\nshape = 2,2\nneed_grad = true\n"
                         "[layer b]\ntype = feed\nshape = 2,2\nneed_grad = true\n"
                         "[layer loss]\ntype = euclidean_loss\nsrc = a, b\n", &conf);
  ShoalLayer *a = shoal_net_find (net, "a"), *b = shoal_net_find (net, "b");
  ShoalLayer *loss = shoal_net_find (net, "loss");
  const float av[4] = { 1, 2, 0, -1 }, bv[4] = { 0, 4, 0, 2 };
  memcpy (a->out.data, av, sizeof av);
  memcpy (b->out.data, bv, sizeof bv);
  /* 0.5 * (1 + 4 + 0 + 9) / 2 rows = 3.5 */
  g_assert_cmpfloat_with_epsilon (shoal_net_forward (net, SHOAL_PHASE_TRAIN), 3.5, 1e-6);
  g_assert_cmpfloat_with_epsilon (loss->out.data[0], 3.5, 1e-6);
  shoal_net_backward (net);
  for (int i = 0; i < 4; i++)
    {
      g_assert_cmpfloat_with_epsilon (a->grad.data[i], (av[i] - bv[i]) / 2, 1e-6);
      g_assert_cmpfloat_with_epsilon (b->grad.data[i], -(av[i] - bv[i]) / 2, 1e-6);
    }
  shoal_net_free (net);
  shoal_conf_free (conf);

  /* a long vector: the blocked sum matches double */
  net = build ("[layer a]\ntype = feed\nshape = 7,1001\n"
               "[layer b]\ntype = feed\nshape = 7,1001\n"
               "[layer loss]\ntype = euclidean_loss\nsrc = a, b\n", &conf);
  a = shoal_net_find (net, "a");
  b = shoal_net_find (net, "b");
  double want = 0;
  for (int i = 0; i < 7007; i++)
    want += 0.5 * ((double) a->out.data[i] - b->out.data[i]) * ((double) a->out.data[i] - b->out.data[i]);
  want /= 7;
  g_assert_cmpfloat_with_epsilon (shoal_net_forward (net, SHOAL_PHASE_TEST), want, want * 1e-6);
  shoal_net_free (net);
  shoal_conf_free (conf);
}

static void
test_euclidean_bad_shapes (void)
{
  shoal_expect_net_error ("[layer a]\ntype = feed\nshape = 4,3\n"
                    "[layer b]\ntype = feed\nshape = 4,2\n"
                    "[layer loss]\ntype = euclidean_loss\nsrc = a, b\n",
                    "[layer loss] src: prediction 'a' (4x3) and target 'b' (4x2) differ");
}

/* ---- accuracy ------------------------------------------------------------ */

static double
accuracy_of (int top_k, const float *logits, const float *labels, int rows)
{
  ShoalConf *conf;
  char *text = g_strdup_printf ("[layer x]\ntype = feed\nshape = %d,4\n"
                                "[layer y]\ntype = feed\nshape = %d,1\nnum_classes = 4\n"
                                "[layer acc]\ntype = accuracy\nsrc = x, y\ntop_k = %d\n",
                                rows, rows, top_k);
  ShoalNet *net = build (text, &conf);
  g_free (text);
  memcpy (shoal_net_find (net, "x")->out.data, logits, (size_t) rows * 4 * sizeof (float));
  memcpy (shoal_net_find (net, "y")->label.data, labels, (size_t) rows * sizeof (float));
  shoal_net_forward (net, SHOAL_PHASE_TEST);
  ShoalMetric m[2];
  g_assert_cmpuint (shoal_net_metrics (net, m, 2), ==, 1);
  g_assert_false (m[0].is_loss);
  double value = m[0].value;
  shoal_net_free (net);
  shoal_conf_free (conf);
  return value;
}

static void
test_accuracy (void)
{
  const float logits[] = {
    0.1f, 0.5f, 0.2f, 0.3f,   /* label 1: rank 0 */
    0.9f, 0.1f, 0.8f, 0.0f,   /* label 2: rank 1 */
    0.2f, 0.2f, 0.2f, 0.2f,   /* label 3: all tied, three smaller indices: rank 3 */
    -1, -2, -3, -4,           /* label 3: rank 3 */
    0.5f, 0.5f, 0.1f, 0,      /* label 0: tied with 1, smaller index: rank 0 */
    1, 2, 3, 4,               /* label -1: not counted */
  };
  const float labels[] = { 1, 2, 3, 3, 0, -1 };
  g_assert_cmpfloat_with_epsilon (accuracy_of (1, logits, labels, 6), 2.0 / 5, 1e-6);
  g_assert_cmpfloat_with_epsilon (accuracy_of (2, logits, labels, 6), 3.0 / 5, 1e-6);
  g_assert_cmpfloat_with_epsilon (accuracy_of (3, logits, labels, 6), 3.0 / 5, 1e-6);
  g_assert_cmpfloat_with_epsilon (accuracy_of (4, logits, labels, 6), 5.0 / 5, 1e-6);
  /* the first row alone, then the second alone */
  g_assert_cmpfloat (accuracy_of (1, logits, labels, 1), ==, 1);
  g_assert_cmpfloat (accuracy_of (1, logits + 4, labels + 1, 1), ==, 0);
  g_assert_cmpfloat (accuracy_of (2, logits + 4, labels + 1, 1), ==, 1);

  /* a NaN logit on the label is never right */
  const float nan_row[4] = { NAN, 0, 0, 0 }, zero_label[1] = { 0 };
  g_assert_cmpfloat (accuracy_of (4, nan_row, zero_label, 1), ==, 0);
}

static void
test_accuracy_bad_conf (void)
{
  shoal_expect_net_error ("[layer x]\ntype = feed\nshape = 4,3\n"
                    "[layer y]\ntype = feed\nshape = 4,1\nnum_classes = 3\n"
                    "[layer acc]\ntype = accuracy\nsrc = x, y\ntop_k = 4\n",
                    "[layer acc] top_k: is 4 but 'x' has only 3 classes");
  shoal_expect_net_error ("[layer x]\ntype = feed\nshape = 4,3\n"
                    "[layer acc]\ntype = accuracy\nsrc = x, x\n",
                    "carries no labels");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/losses/softmax/gradcheck", test_softmax_gradcheck);
  g_test_add_func ("/losses/softmax/values", test_softmax_values);
  g_test_add_func ("/losses/softmax/large-logits", test_softmax_large_logits);
  g_test_add_func ("/losses/softmax/unlabelled-rows", test_softmax_unlabelled_rows);
  g_test_add_func ("/losses/softmax/bad-label", test_softmax_bad_label);
  g_test_add_func ("/losses/softmax/bad-sources", test_softmax_bad_sources);
  g_test_add_func ("/losses/euclidean/gradcheck", test_euclidean_gradcheck);
  g_test_add_func ("/losses/euclidean/values", test_euclidean_values);
  g_test_add_func ("/losses/euclidean/bad-shapes", test_euclidean_bad_shapes);
  g_test_add_func ("/losses/accuracy/top-k", test_accuracy);
  g_test_add_func ("/losses/accuracy/bad-conf", test_accuracy_bad_conf);
  return g_test_run ();
}
