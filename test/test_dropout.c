/* Dropout: gradient check in the train phase (the harness restores every
 * layer's rng before each forward, so all of them draw the same mask),
 * identity in the test phase, the kept fraction and scale, backward
 * through the same mask, fresh masks per step, bad ratios. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "core/error.h"
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

static void
test_gradcheck_train (void)
{
  const char *conf =
    "[layer in]\ntype = feed\nshape = 7,13\nneed_grad = true\n"  /* odd count */
    "[layer drop]\ntype = dropout\nsrc = in\nratio = 0.4\n";
  g_assert_cmpint (shoal_gradcheck_conf (conf, "drop", NULL, 3), >, 0);
  const char *conf4 =
    "[layer in]\ntype = feed\nshape = 2,3,4,5\nneed_grad = true\n"
    "[layer drop]\ntype = dropout\nsrc = in\nratio = 0.5\n";
  g_assert_cmpint (shoal_gradcheck_conf (conf4, "drop", NULL, 4), >, 0);
}

static void
test_identity_in_test_phase (void)
{
  ShoalConf *conf;
  ShoalNet *net = build ("[layer in]\ntype = feed\nshape = 16,32\n"
                         "[layer drop]\ntype = dropout\nsrc = in\nratio = 0.7\n", &conf);
  ShoalLayer *in = shoal_net_find (net, "in"), *drop = shoal_net_find (net, "drop");
  shoal_net_forward (net, SHOAL_PHASE_TEST);
  g_assert_cmpmem (drop->out.data, 16 * 32 * sizeof (float), in->out.data, 16 * 32 * sizeof (float));
  shoal_net_free (net);
  shoal_conf_free (conf);
}

/* Kept units are x / (1 - ratio), dropped ones 0; about 1 - ratio are
 * kept; the gradient goes through exactly the kept units, same scale. */
static void
test_kept_fraction_and_backward (void)
{
  const double ratios[] = { 0.1, 0.3, 0.5, 0.9 };
  for (gsize r = 0; r < G_N_ELEMENTS (ratios); r++)
    {
      ShoalConf *conf;
      char *text = g_strdup_printf ("[layer in]\ntype = feed\nshape = 100,100\nneed_grad = true\n"
                                    "[layer drop]\ntype = dropout\nsrc = in\nratio = %g\n", ratios[r]);
      ShoalNet *net = build (text, &conf);
      ShoalLayer *in = shoal_net_find (net, "in"), *drop = shoal_net_find (net, "drop");
      const int n = 10000;
      shoal_tensor_fill (&in->out, 2.0f);
      shoal_net_forward (net, SHOAL_PHASE_TRAIN);

      int kept = 0;
      double sum = 0;
      for (int i = 0; i < n; i++)
        {
          float y = drop->out.data[i];
          sum += y;
          if (y != 0)
            {
              kept++;
              g_assert_cmpfloat_with_epsilon (y, 2.0 / (1.0 - ratios[r]), 2e-4 / (1.0 - ratios[r]));
            }
        }
      double frac = (double) kept / n, keep = 1 - ratios[r];
      double sigma = sqrt (keep * (1 - keep) / n);
      g_test_message ("ratio %g: kept %.4f, mean output %.4f", ratios[r], frac, sum / n);
      g_assert_cmpfloat (fabs (frac - keep), <, 5 * sigma);
      /* inverted dropout keeps the expectation: mean output ~ input */
      g_assert_cmpfloat (fabs (sum / n - 2.0), <, 5 * 2.0 * sigma / keep);

      for (int i = 0; i < n; i++)
        drop->grad.data[i] = 1.0f;
      drop->ops->backward (drop);
      for (int i = 0; i < n; i++)
        g_assert_cmpfloat (in->grad.data[i], ==, drop->out.data[i] / 2.0f);

      shoal_net_free (net);
      shoal_conf_free (conf);
      g_free (text);
    }
}

static void
test_fresh_mask_each_step (void)
{
  ShoalConf *conf;
  ShoalNet *net = build ("[layer in]\ntype = feed\nshape = 10,50\n"
                         "[layer drop]\ntype = dropout\nsrc = in\nratio = 0.5\n", &conf);
  ShoalLayer *drop = shoal_net_find (net, "drop");
  shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  float *first = g_memdup2 (drop->out.data, 500 * sizeof (float));
  shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  int differ = 0;
  for (int i = 0; i < 500; i++)
    differ += (first[i] == 0) != (drop->out.data[i] == 0);
  g_assert_cmpint (differ, >, 100);  /* ~250 expected */
  g_free (first);
  shoal_net_free (net);
  shoal_conf_free (conf);
}

static void
test_ratio_zero_is_identity (void)
{
  ShoalConf *conf;
  ShoalNet *net = build ("[layer in]\ntype = feed\nshape = 4,5\nneed_grad = true\n"
                         "[layer drop]\ntype = dropout\nsrc = in\nratio = 0\n", &conf);
  ShoalLayer *in = shoal_net_find (net, "in"), *drop = shoal_net_find (net, "drop");
  shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  g_assert_cmpmem (drop->out.data, 20 * sizeof (float), in->out.data, 20 * sizeof (float));
  for (int i = 0; i < 20; i++)
    drop->grad.data[i] = (float) i;
  drop->ops->backward (drop);
  g_assert_cmpmem (in->grad.data, 20 * sizeof (float), drop->grad.data, 20 * sizeof (float));
  shoal_net_free (net);
  shoal_conf_free (conf);
}

static void
test_bad_ratio (void)
{
  const char *bad[] = { "1", "1.5", "-0.1" };
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      GError *error = NULL;
      char *text = g_strdup_printf ("[layer in]\ntype = feed\nshape = 4,5\n"
                                    "[layer drop]\ntype = dropout\nsrc = in\nratio = %s\n", bad[i]);
      ShoalConf *conf = shoal_conf_load_data (text, "bad.conf", &error);
      g_assert_no_error (error);
      g_assert_null (shoal_net_new (conf, NULL, &error));
      g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
      g_assert_nonnull (strstr (error->message, "[layer drop] ratio"));
      g_error_free (error);
      shoal_conf_free (conf);
      g_free (text);
    }
}

/* The documented rounding (dropout.c, `shoal layers`): the drop
 * probability is a multiple of 1/65536 and kept units are scaled by
 * 1 / (1 - that): ratio 0.99 rounds to 64881/65536 and scales by
 * 65536/655 = 100.055 (torch: 100), so the output's mean is the input's. */
static void
test_ratio_rounding (void)
{
  ShoalConf *conf;
  ShoalNet *net = build ("[layer in]\ntype = feed\nshape = 200,100\n"
                         "[layer drop]\ntype = dropout\nsrc = in\nratio = 0.99\n", &conf);
  ShoalLayer *in = shoal_net_find (net, "in"), *drop = shoal_net_find (net, "drop");
  shoal_tensor_fill (&in->out, 1.0f);
  shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  const float scale = (float) (65536.0 / (65536.0 - 64881.0));
  int kept = 0;
  for (int i = 0; i < 20000; i++)
    if (drop->out.data[i] != 0.0f)
      {
        g_assert_cmpfloat (drop->out.data[i], ==, scale);
        kept++;
      }
  g_assert_cmpfloat_with_epsilon (scale, 100.055, 1e-3);
  g_assert_cmpint (kept, >, 0);
  shoal_net_free (net);
  shoal_conf_free (conf);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/dropout/gradcheck-train", test_gradcheck_train);
  g_test_add_func ("/dropout/identity-in-test-phase", test_identity_in_test_phase);
  g_test_add_func ("/dropout/kept-fraction-and-backward", test_kept_fraction_and_backward);
  g_test_add_func ("/dropout/fresh-mask-each-step", test_fresh_mask_each_step);
  g_test_add_func ("/dropout/ratio-zero-is-identity", test_ratio_zero_is_identity);
  g_test_add_func ("/dropout/bad-ratio", test_bad_ratio);
  g_test_add_func ("/dropout/ratio-rounding", test_ratio_rounding);
  return g_test_run ();
}
