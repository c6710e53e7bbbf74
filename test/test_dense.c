/* Dense layer: gradient checks and a forward value check. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "support/gradcheck.h"

static void
test_dense_gradcheck (void)
{
  const char *conf =
    "[layer in]\ntype = feed\nshape = 5,7\nneed_grad = true\n"
    "[layer fc]\ntype = dense\nsrc = in\nnum_output = 4\n";
  g_assert_cmpint (shoal_gradcheck_conf (conf, "fc", NULL, 1), >, 0);
}

static void
test_dense_gradcheck_4d_no_bias (void)
{
  const char *conf =
    "[layer in]\ntype = feed\nshape = 3,2,3,3\nneed_grad = true\n"
    "[layer fc]\ntype = dense\nsrc = in\nnum_output = 6\nbias = false\n";
  g_assert_cmpint (shoal_gradcheck_conf (conf, "fc", NULL, 2), >, 0);
}

static void
test_dense_forward_values (void)
{
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data (
    "[layer in]\ntype = feed\nshape = 2,3\n"
    "[layer fc]\ntype = dense\nsrc = in\nnum_output = 2\n", "test", &error);
  g_assert_no_error (error);
  ShoalNet *net = shoal_net_new (conf, NULL, &error);
  g_assert_no_error (error);
  ShoalLayer *in = shoal_net_find (net, "in"), *fc = shoal_net_find (net, "fc");
  const float x[6] = { 1, 2, 3, 4, 5, 6 }, w[6] = { 1, 0, -1, 0.5f, 0.5f, 0.5f }, b[2] = { 10, 20 };
  memcpy (in->out.data, x, sizeof x);
  memcpy (fc->params[0]->value.data, w, sizeof w);
  memcpy (fc->params[1]->value.data, b, sizeof b);
  shoal_net_forward (net, SHOAL_PHASE_TEST);
  /* row0: (1-3)+10 = 8, 0.5*6+20 = 23; row1: (4-6)+10 = 8, 0.5*15+20 = 27.5 */
  const float want[4] = { 8, 23, 8, 27.5f };
  for (int i = 0; i < 4; i++)
    g_assert_cmpfloat_with_epsilon (fc->out.data[i], want[i], 1e-5);

  /* fewer rows than at set-up */
  shoal_tensor_set_rows (&in->out, 1);
  shoal_net_forward (net, SHOAL_PHASE_TEST);
  g_assert_cmpint (shoal_tensor_rows (&fc->out), ==, 1);
  g_assert_cmpfloat_with_epsilon (fc->out.data[1], 23, 1e-5);
  shoal_net_free (net);
  shoal_conf_free (conf);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/dense/gradcheck", test_dense_gradcheck);
  g_test_add_func ("/dense/gradcheck-4d-no-bias", test_dense_gradcheck_4d_no_bias);
  g_test_add_func ("/dense/forward-values", test_dense_forward_values);
  return g_test_run ();
}
