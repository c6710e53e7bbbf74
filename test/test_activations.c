/* Activation layers (relu, leaky relu, sigmoid, tanh, stanh): gradient
 * checks on 2-D and 4-D inputs, forward values against libm in double,
 * saturation for large inputs, smaller batches than at set-up, and the
 * accuracy of the vectorisable exp/tanh they are built on. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "layers/vmath.h"
#include "support/gradcheck.h"

static ShoalNet *
build (const char *text, ShoalConf **conf)
{
  GError *error = NULL;
  *conf = shoal_conf_load_data (text, "test", &error);
  g_assert_no_error (error);
  ShoalNet *net = shoal_net_new (*conf, NULL, &error);
  g_assert_no_error (error);
  shoal_param_store_init_values (shoal_net_params (net), 1);
  return net;
}

static void
gradcheck_type (const char *type_and_options, const char *shape, guint64 seed)
{
  char *conf = g_strdup_printf ("[layer in]\ntype = feed\nshape = %s\nneed_grad = true\n"
                                "[layer act]\nsrc = in\n%s\n", shape, type_and_options);
  g_assert_cmpint (shoal_gradcheck_conf (conf, "act", NULL, seed), >, 0);
  g_free (conf);
}

static void
test_gradcheck (void)
{
  static const char *const types[] = {
    "type = relu", "type = relu\nnegative_slope = 0.1", "type = sigmoid", "type = tanh",
    "type = stanh",
  };
  for (gsize i = 0; i < G_N_ELEMENTS (types); i++)
    {
      gradcheck_type (types[i], "6,9", 10 + i);
      gradcheck_type (types[i], "2,3,4,5", 20 + i);
    }
}

/* Runs `type` forward over xs in the test phase and compares with f. */
static void
check_forward (const char *type, double (*f) (double), const float *xs, int n)
{
  ShoalConf *conf;
  char *text = g_strdup_printf ("[layer in]\ntype = feed\nshape = %d,1\n"
                                "[layer act]\nsrc = in\n%s\n", n, type);
  ShoalNet *net = build (text, &conf);
  ShoalLayer *in = shoal_net_find (net, "in"), *act = shoal_net_find (net, "act");
  memcpy (in->out.data, xs, (size_t) n * sizeof (float));
  shoal_net_forward (net, SHOAL_PHASE_TEST);
  for (int i = 0; i < n; i++)
    {
      double want = f (xs[i]);
      if (fabs (act->out.data[i] - want) > 1e-6 + 1e-6 * fabs (want))
        g_error ("%s(%g) = %.9g, want %.9g", type, xs[i], act->out.data[i], want);
      g_assert_true (isfinite (act->out.data[i]));
    }
  shoal_net_free (net);
  shoal_conf_free (conf);
  g_free (text);
}

static double relu_ref (double x) { return x > 0 ? x : 0; }
static double leaky_ref (double x) { return x > 0 ? x : 0.25 * x; }
static double sigmoid_ref (double x) { return 1 / (1 + exp (-x)); }
static double stanh_ref (double x) { return 1.7159 * tanh (x * 2.0 / 3.0); }

static const float values[] = { -1000, -90, -20, -3, -1, -0.3f, -1e-3f, -1e-20f, 0,
                                1e-20f, 1e-3f, 0.2f, 0.25f, 0.26f, 1, 3, 9.5f, 20, 90, 1000 };

static void
test_forward_values (void)
{
  int n = G_N_ELEMENTS (values);
  check_forward ("type = relu", relu_ref, values, n);
  check_forward ("type = relu\nnegative_slope = 0.25", leaky_ref, values, n);
  check_forward ("type = sigmoid", sigmoid_ref, values, n);
  check_forward ("type = tanh", tanh, values, n);
  check_forward ("type = stanh", stanh_ref, values, n);
}

/* Fewer rows than at set-up: only those rows are computed and their
 * gradients written; the rest of the source's gradient stays untouched. */
static void
test_fewer_rows (void)
{
  static const char *const types[] = { "relu", "sigmoid", "tanh", "stanh" };
  for (gsize t = 0; t < G_N_ELEMENTS (types); t++)
    {
      ShoalConf *conf;
      char *text = g_strdup_printf ("[layer in]\ntype = feed\nshape = 4,3\nneed_grad = true\n"
                                    "[layer act]\ntype = %s\nsrc = in\n", types[t]);
      ShoalNet *net = build (text, &conf);
      ShoalLayer *in = shoal_net_find (net, "in"), *act = shoal_net_find (net, "act");
      shoal_net_forward (net, SHOAL_PHASE_TRAIN);
      float full[12];
      memcpy (full, act->out.data, sizeof full);

      shoal_tensor_fill (&act->out, 7);
      shoal_tensor_set_rows (&in->out, 2);
      shoal_net_forward (net, SHOAL_PHASE_TRAIN);
      g_assert_cmpint (shoal_tensor_rows (&act->out), ==, 2);
      for (int i = 0; i < 6; i++)
        g_assert_cmpfloat (act->out.data[i], ==, full[i]);
      for (int i = 6; i < 12; i++)
        g_assert_cmpfloat (act->out.data[i], ==, 7);

      shoal_tensor_fill (&act->grad, 1);
      for (int i = 0; i < 12; i++)
        in->grad.data[i] = NAN;
      shoal_net_backward (net);
      g_assert_cmpint (shoal_tensor_rows (&in->grad), ==, 2);
      for (int i = 0; i < 6; i++)
        g_assert_true (isfinite (in->grad.data[i]));
      for (int i = 6; i < 12; i++)
        g_assert_true (isnan (in->grad.data[i]));
      shoal_net_free (net);
      shoal_conf_free (conf);
      g_free (text);
    }
}

/* Backward uses the output: exact derivatives at a few points. */
static void
test_backward_values (void)
{
  ShoalConf *conf;
  ShoalNet *net = build ("[layer in]\ntype = feed\nshape = 1,4\nneed_grad = true\n"
                         "[layer r]\ntype = relu\nsrc = in\nnegative_slope = 0.5\n"
                         "[layer s]\ntype = sigmoid\nsrc = in\n"
                         "[layer t]\ntype = tanh\nsrc = in\n"
                         "[layer st]\ntype = stanh\nsrc = in\n", &conf);
  const float x[4] = { -2, -0.5f, 0.5f, 3 };
  memcpy (shoal_net_find (net, "in")->out.data, x, sizeof x);
  shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  const char *names[4] = { "r", "s", "t", "st" };
  for (int l = 0; l < 4; l++)
    {
      ShoalLayer *layer = shoal_net_find (net, names[l]);
      for (int i = 0; i < 4; i++)
        layer->grad.data[i] = 2;
      layer->ops->backward (layer);
      for (int i = 0; i < 4; i++)
        {
          double d;
          switch (l)
            {
            case 0: d = x[i] > 0 ? 1 : 0.5; break;
            case 1: d = sigmoid_ref (x[i]) * (1 - sigmoid_ref (x[i])); break;
            case 2: d = 1 - tanh (x[i]) * tanh (x[i]); break;
            default: d = 1.7159 * 2 / 3 * (1 - tanh (x[i] * 2 / 3.0) * tanh (x[i] * 2 / 3.0)); break;
            }
          g_assert_cmpfloat_with_epsilon (layer->src_grad[0]->data[i], 2 * d, 1e-5);
        }
    }
  shoal_net_free (net);
  shoal_conf_free (conf);
}

static void
test_bad_slope (void)
{
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data ("[layer in]\ntype = feed\nshape = 2,2\n"
                                          "[layer r]\ntype = relu\nsrc = in\nnegative_slope = -1\n",
                                          "bad.conf", &error);
  g_assert_no_error (error);
  ShoalNet *net = shoal_net_new (conf, NULL, &error);
  g_assert_null (net);
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
  g_assert_nonnull (strstr (error->message, "negative_slope"));
  g_error_free (error);
  shoal_conf_free (conf);
}

/* The vectorisable functions against libm in double over their range. */
static void
test_vmath_accuracy (void)
{
  double worst_exp = 0, worst_tanh = 0, worst_sig = 0;
  for (double x = -87; x <= 88; x += 1.7e-3)
    {
      float f = (float) x;
      double e = exp ((double) f);
      worst_exp = fmax (worst_exp, fabs (shoal_vexpf (f) - e) / e);
    }
  for (double x = -30; x <= 30; x += 1.3e-4)
    {
      float f = (float) x;
      double t = tanh ((double) f), s = 1 / (1 + exp (-(double) f));
      if (t != 0)
        worst_tanh = fmax (worst_tanh, fabs (shoal_vtanhf (f) - t) / fabs (t));
      worst_sig = fmax (worst_sig, fabs (shoal_vsigmoidf (f) - s) / s);
    }
  g_test_message ("worst relative error: exp %.3g tanh %.3g sigmoid %.3g", worst_exp, worst_tanh,
                  worst_sig);
  g_assert_cmpfloat (worst_exp, <, 5e-7);
  g_assert_cmpfloat (worst_tanh, <, 5e-7);
  g_assert_cmpfloat (worst_sig, <, 5e-7);

  /* tiny arguments keep full relative precision */
  g_assert_cmpfloat (shoal_vtanhf (1e-30f), ==, 1e-30f);
  g_assert_cmpfloat (shoal_vtanhf (-3e-8f), ==, -3e-8f);
  /* no overflow, saturation, NaN propagates */
  g_assert_true (isfinite (shoal_vexpf (1000)));
  g_assert_cmpfloat (shoal_vexpf (-1000), >=, 0);
  g_assert_cmpfloat (shoal_vtanhf (1e30f), ==, 1);
  g_assert_cmpfloat (shoal_vtanhf (-1e30f), ==, -1);
  g_assert_cmpfloat (shoal_vsigmoidf (1e30f), ==, 1);
  g_assert_cmpfloat (shoal_vsigmoidf (-1e30f), <, 1e-37);
  g_assert_true (isnan (shoal_vexpf (NAN)));
  g_assert_true (isnan (shoal_vtanhf (NAN)));
  g_assert_true (isnan (shoal_vsigmoidf (NAN)));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/activations/gradcheck", test_gradcheck);
  g_test_add_func ("/activations/forward-values", test_forward_values);
  g_test_add_func ("/activations/backward-values", test_backward_values);
  g_test_add_func ("/activations/fewer-rows", test_fewer_rows);
  g_test_add_func ("/activations/bad-slope", test_bad_slope);
  g_test_add_func ("/activations/vmath-accuracy", test_vmath_accuracy);
  return g_test_run ();
}
