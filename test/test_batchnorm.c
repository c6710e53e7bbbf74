/* Batch normalisation: gradient checks in the train phase (2-D and 4-D),
 * train outputs against statistics computed here in double, running
 * statistics update and convergence, the test phase using them, fewer
 * rows than at set-up, the params' names and scales, bad confs. */
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
  shoal_param_store_init_values (shoal_net_params (net), 5);
  return net;
}

static void
test_gradcheck (void)
{
  const char *conf2 =
    "[layer in]\ntype = feed\nshape = 6,5\nneed_grad = true\n"
    "[layer bn]\ntype = batchnorm\nsrc = in\n";
  g_assert_cmpint (shoal_gradcheck_conf (conf2, "bn", NULL, 7), >, 0);
  const char *conf4 =
    "[layer in]\ntype = feed\nshape = 3,4,3,2\nneed_grad = true\n"
    "[layer bn]\ntype = batchnorm\nsrc = in\nmomentum = 0.5\n";
  g_assert_cmpint (shoal_gradcheck_conf (conf4, "bn", NULL, 8), >, 0);
}

/* Per-channel mean and biased variance of x (n, c, s) in double. */
static void
channel_stats (const float *x, int n, int c, int s, int ch, double *mean, double *var)
{
  double sum = 0, sq = 0;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < s; k++)
      sum += x[((size_t) i * c + ch) * s + k];
  *mean = sum / (n * s);
  for (int i = 0; i < n; i++)
    for (int k = 0; k < s; k++)
      {
        double d = x[((size_t) i * c + ch) * s + k] - *mean;
        sq += d * d;
      }
  *var = sq / (n * s);
}

/* One train forward on (n, c, s) data with a non-zero mean: outputs
 * normalised per channel, running statistics moved by 1 - momentum. */
static void
check_train_forward (const char *shape, int n, int c, int s)
{
  ShoalConf *conf;
  char *text = g_strdup_printf ("[layer in]\ntype = feed\nshape = %s\n"
                                "[layer bn]\ntype = batchnorm\nsrc = in\nmomentum = 0.8\n"
                                "epsilon = 1e-3\n", shape);
  ShoalNet *net = build (text, &conf);
  ShoalLayer *in = shoal_net_find (net, "in"), *bn = shoal_net_find (net, "bn");
  size_t count = (size_t) n * c * s;
  for (size_t i = 0; i < count; i++)
    in->out.data[i] = 3.0f * in->out.data[i] + 10.0f + (float) ((i / s) % c);
  float *gamma = bn->params[0]->value.data, *beta = bn->params[1]->value.data;
  for (int ch = 0; ch < c; ch++)
    {
      gamma[ch] = 0.5f + ch;
      beta[ch] = -1.0f + 0.25f * ch;
    }
  shoal_net_forward (net, SHOAL_PHASE_TRAIN);

  const float *rmean = bn->params[2]->value.data, *rvar = bn->params[3]->value.data;
  for (int ch = 0; ch < c; ch++)
    {
      double mean, var;
      channel_stats (in->out.data, n, c, s, ch, &mean, &var);
      double istd = 1 / sqrt (var + 1e-3);
      for (int i = 0; i < n; i++)
        for (int k = 0; k < s; k++)
          {
            size_t j = ((size_t) i * c + ch) * s + k;
            double want = gamma[ch] * (in->out.data[j] - mean) * istd + beta[ch];
            g_assert_cmpfloat_with_epsilon (bn->out.data[j], want, 1e-4 * (1 + fabs (want)));
          }
      double m = (double) n * s;
      g_assert_cmpfloat_with_epsilon (rmean[ch], 0.2 * mean, 1e-4 * fabs (mean));
      g_assert_cmpfloat_with_epsilon (rvar[ch], 0.8 + 0.2 * var * m / (m - 1), 1e-4 * (1 + var));
    }
  shoal_net_free (net);
  shoal_conf_free (conf);
  g_free (text);
}

static void
test_train_forward (void)
{
  check_train_forward ("7,3", 7, 3, 1);
  check_train_forward ("4,3,5,2", 4, 3, 10);
}

/* Many train steps on the same batch: the running statistics reach the
 * batch's mean and unbiased variance, and the test phase then gives the
 * same outputs as the train phase (up to the unbiasing factor). */
static void
test_running_stats_and_test_phase (void)
{
  ShoalConf *conf;
  ShoalNet *net = build ("[layer in]\ntype = feed\nshape = 8,2,2,2\n"
                         "[layer bn]\ntype = batchnorm\nsrc = in\n", &conf);
  ShoalLayer *in = shoal_net_find (net, "in"), *bn = shoal_net_find (net, "bn");
  for (size_t i = 0; i < 64; i++)
    in->out.data[i] = in->out.data[i] * (1 + (i / 4) % 2) - 4.0f * ((i / 4) % 2);
  for (int step = 0; step < 300; step++)
    shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  const float *rmean = bn->params[2]->value.data, *rvar = bn->params[3]->value.data;
  double mean[2], var[2];
  for (int ch = 0; ch < 2; ch++)
    {
      channel_stats (in->out.data, 8, 2, 4, ch, &mean[ch], &var[ch]);
      g_assert_cmpfloat_with_epsilon (rmean[ch], mean[ch], 1e-4 * (1 + fabs (mean[ch])));
      g_assert_cmpfloat_with_epsilon (rvar[ch], var[ch] * 32 / 31, 1e-4 * (1 + var[ch]));
    }
  float train_out[64];
  memcpy (train_out, bn->out.data, sizeof train_out);

  /* the test phase with known running statistics, params untouched */
  float *rm = bn->params[2]->value.data, *rv = bn->params[3]->value.data;
  const float *gamma = bn->params[0]->value.data, *beta = bn->params[1]->value.data;
  rm[0] = 1.5f;
  rm[1] = -2.0f;
  rv[0] = 4.0f;
  rv[1] = 0.25f;
  shoal_net_forward (net, SHOAL_PHASE_TEST);
  g_assert_cmpfloat (rm[0], ==, 1.5f);
  g_assert_cmpfloat (rv[1], ==, 0.25f);
  for (size_t j = 0; j < 64; j++)
    {
      int ch = (int) (j / 4) % 2;
      double want = gamma[ch] * (in->out.data[j] - rm[ch]) / sqrt (rv[ch] + 1e-5) + beta[ch];
      g_assert_cmpfloat_with_epsilon (bn->out.data[j], want, 1e-4 * (1 + fabs (want)));
    }

  /* with the converged statistics back, test ~ train */
  rm[0] = (float) mean[0];
  rm[1] = (float) mean[1];
  rv[0] = (float) var[0];
  rv[1] = (float) var[1];
  shoal_net_forward (net, SHOAL_PHASE_TEST);
  for (size_t j = 0; j < 64; j++)
    g_assert_cmpfloat_with_epsilon (bn->out.data[j], train_out[j], 1e-4 * (1 + fabs (train_out[j])));
  shoal_net_free (net);
  shoal_conf_free (conf);
}

static void
test_params (void)
{
  ShoalConf *conf;
  ShoalNet *net = build ("[layer in]\ntype = feed\nshape = 4,6\n"
                         "[layer bn]\ntype = batchnorm\nsrc = in\n"
                         "mean_lr_scale = 3\nscale_lr_scale = 2\n", &conf);
  ShoalLayer *bn = shoal_net_find (net, "bn");
  static const char *const names[] = { "bn/scale", "bn/bias", "bn/mean", "bn/var" };
  static const float init[] = { 1, 0, 0, 1 };
  g_assert_cmpint (bn->nparams, ==, 4);
  shoal_param_store_init_values (shoal_net_params (net), 1);
  for (int p = 0; p < 4; p++)
    {
      g_assert_cmpstr (bn->params[p]->name, ==, names[p]);
      g_assert_cmpuint (bn->params[p]->count, ==, 6);
      for (int k = 0; k < 6; k++)
        g_assert_cmpfloat (bn->params[p]->value.data[k], ==, init[p]);
    }
  /* running statistics are never trained, whatever the conf says */
  g_assert_cmpfloat (bn->params[0]->lr_scale, ==, 2);
  g_assert_cmpfloat (bn->params[2]->lr_scale, ==, 0);
  g_assert_cmpfloat (bn->params[2]->wd_scale, ==, 0);
  g_assert_cmpfloat (bn->params[3]->lr_scale, ==, 0);
  g_assert_cmpfloat (bn->params[3]->wd_scale, ==, 0);

  /* backward adds to scale/bias grads and leaves the statistics' at 0 */
  shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  for (int i = 0; i < 24; i++)
    bn->grad.data[i] = (float) (i % 5) - 2;
  shoal_param_store_zero_grads (shoal_net_params (net));
  bn->ops->backward (bn);
  float once = bn->params[1]->grad.data[0];
  bn->ops->backward (bn);
  g_assert_cmpfloat_with_epsilon (bn->params[1]->grad.data[0], 2 * once, 1e-5);
  for (int k = 0; k < 6; k++)
    {
      g_assert_cmpfloat (bn->params[2]->grad.data[k], ==, 0);
      g_assert_cmpfloat (bn->params[3]->grad.data[k], ==, 0);
    }
  shoal_net_free (net);
  shoal_conf_free (conf);
}

/* A smaller batch normalises with its own rows' statistics only. */
static void
test_fewer_rows (void)
{
  ShoalConf *conf;
  ShoalNet *net = build ("[layer in]\ntype = feed\nshape = 6,3\nneed_grad = true\n"
                         "[layer bn]\ntype = batchnorm\nsrc = in\n", &conf);
  ShoalLayer *in = shoal_net_find (net, "in"), *bn = shoal_net_find (net, "bn");
  shoal_tensor_set_rows (&in->out, 4);
  shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  g_assert_cmpint (shoal_tensor_rows (&bn->out), ==, 4);
  for (int ch = 0; ch < 3; ch++)
    {
      double mean, var;
      channel_stats (in->out.data, 4, 3, 1, ch, &mean, &var);
      for (int i = 0; i < 4; i++)
        {
          double want = (in->out.data[i * 3 + ch] - mean) / sqrt (var + 1e-5);
          g_assert_cmpfloat_with_epsilon (bn->out.data[i * 3 + ch], want, 1e-4 * (1 + fabs (want)));
        }
    }
  /* the gradient of a constant upstream gradient through BN is 0 */
  shoal_tensor_fill (&bn->grad, 1.0f);
  shoal_net_backward (net);
  g_assert_cmpint (shoal_tensor_rows (&in->grad), ==, 4);
  for (int i = 0; i < 12; i++)
    g_assert_cmpfloat_with_epsilon (in->grad.data[i], 0, 1e-5);
  shoal_net_free (net);
  shoal_conf_free (conf);
}

static void
check_conf_error (const char *text, const char *key)
{
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data (text, "bad.conf", &error);
  g_assert_no_error (error);
  g_assert_null (shoal_net_new (conf, NULL, &error));
  g_assert_nonnull (error);
  g_test_message ("%s", error->message);
  g_assert_nonnull (strstr (error->message, key));
  g_error_free (error);
  shoal_conf_free (conf);
}

static void
test_bad_conf (void)
{
  check_conf_error ("[layer in]\ntype = feed\nshape = 6\n"
                    "[layer bn]\ntype = batchnorm\nsrc = in\n", "[layer bn] src");
  check_conf_error ("[layer in]\ntype = feed\nshape = 6,2\n"
                    "[layer bn]\ntype = batchnorm\nsrc = in\nepsilon = 0\n", "[layer bn] epsilon");
  check_conf_error ("[layer in]\ntype = feed\nshape = 6,2\n"
                    "[layer bn]\ntype = batchnorm\nsrc = in\nmomentum = 2\n", "[layer bn] momentum");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/batchnorm/gradcheck", test_gradcheck);
  g_test_add_func ("/batchnorm/train-forward", test_train_forward);
  g_test_add_func ("/batchnorm/running-stats-and-test-phase", test_running_stats_and_test_phase);
  g_test_add_func ("/batchnorm/params", test_params);
  g_test_add_func ("/batchnorm/fewer-rows", test_fewer_rows);
  g_test_add_func ("/batchnorm/bad-conf", test_bad_conf);
  return g_test_run ();
}
