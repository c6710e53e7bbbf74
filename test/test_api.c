/* The public API as an application sees it: this file includes only
 * <shoal/shoal.h> and uses no struct field.  A net from conf text fed
 * with the program's arrays, trained with a ShoalUpdater, saved and
 * loaded into a fresh net with the same outputs to the bit, backward
 * from a gradient the program computed, a layer type of the program's
 * own registered and checked (and one that breaks the contract caught),
 * and the errors each call documents. */
#include <math.h>
#include <string.h>

#include <glib/gstdio.h>

#include <shoal/shoal.h>

static const char mlp_text[] =
  "[layer x]\ntype = feed\nshape = 8, 6\nlabels = true\n"
  "[layer fc1]\ntype = dense\nsrc = x\nnum_output = 10\n"
  "[layer act]\ntype = relu\nsrc = fc1\n"
  "[layer logits]\ntype = dense\nsrc = act\nnum_output = 3\n"
  "[layer loss]\ntype = softmax_loss\nsrc = logits, x\n"
  "[layer acc]\ntype = accuracy\nsrc = logits, x\n";

static ShoalNet *
net_of (const char *text, ShoalConf **conf)
{
  GError *error = NULL;
  *conf = shoal_conf_load_data (text, "api.conf", &error);
  g_assert_no_error (error);
  ShoalNetOptions opts = { .seed = 3 };
  ShoalNet *net = shoal_net_new (*conf, &opts, &error);
  g_assert_no_error (error);
  shoal_param_store_init_values (shoal_net_params (net), 3);
  return net;
}

/* 8 rows of 6 features whose class is which of three feature pairs is largest. */
static void
make_data (float *x, float *y)
{
  ShoalRng rng;
  shoal_rng_seed (&rng, 11, 1);
  for (int r = 0; r < 8; r++)
    {
      int cls = r % 3;
      for (int j = 0; j < 6; j++)
        x[r * 6 + j] = 0.3f * shoal_rng_gaussian (&rng) + (j / 2 == cls ? 1.5f : 0.0f);
      y[r] = (float) cls;
    }
}

static void
test_train_save_load (void)
{
  ShoalConf *conf, *conf2;
  ShoalNet *net = net_of (mlp_text, &conf);
  float x[48], y[8];
  make_data (x, y);
  GError *error = NULL;

  ShoalUpdaterConf uc;
  shoal_updater_conf_defaults (&uc, SHOAL_UPDATER_ADAM);
  uc.schedule.lr = 0.05f;
  ShoalUpdater *upd = shoal_updater_new (&uc, shoal_net_params (net));
  double first = 0, last = 0;
  for (int step = 0; step < 60; step++)
    {
      g_assert_true (shoal_net_feed (net, "x", x, 8, y, &error));
      g_assert_no_error (error);
      double loss = shoal_net_forward (net, SHOAL_PHASE_TRAIN);
      if (step == 0)
        first = loss;
      last = loss;
      shoal_param_store_zero_grads (shoal_net_params (net));
      shoal_net_backward (net);
      shoal_updater_step (upd, step);
    }
  g_assert_cmpfloat (last, <, 0.2 * first);
  ShoalMetric m[4];
  guint nm = shoal_net_metrics (net, m, 4);
  g_assert_cmpuint (nm, ==, 2);
  g_assert_cmpstr (m[1].layer, ==, "acc");
  g_assert_cmpfloat (m[1].value, ==, 1.0);

  /* fewer rows than the batch: the net follows */
  g_assert_true (shoal_net_feed (net, "x", x, 5, y, &error));
  shoal_net_forward (net, SHOAL_PHASE_TEST);
  g_assert_cmpint (shoal_net_batch_rows (net), ==, 5);
  g_assert_cmpint (shoal_tensor_rows (shoal_layer_out (shoal_net_find (net, "logits"))), ==, 5);

  /* save, load into a fresh net: the same logits to the bit */
  char *dir = g_dir_make_tmp ("shoal-api-XXXXXX", NULL);
  char *path = g_build_filename (dir, "mlp.params", NULL);
  g_assert_true (shoal_net_save_params (net, path, &error));
  g_assert_no_error (error);
  ShoalNet *fresh = net_of (mlp_text, &conf2);
  g_assert_true (shoal_net_load_params (fresh, path, SHOAL_PARAMS_BY_NAME_ALL, &error));
  g_assert_no_error (error);
  g_assert_true (shoal_net_feed (net, "x", x, 8, y, &error));
  g_assert_true (shoal_net_feed (fresh, "x", x, 8, y, &error));
  shoal_net_forward (net, SHOAL_PHASE_TEST);
  shoal_net_forward (fresh, SHOAL_PHASE_TEST);
  ShoalTensor *a = shoal_layer_out (shoal_net_find (net, "logits"));
  ShoalTensor *b = shoal_layer_out (shoal_net_find (fresh, "logits"));
  g_assert_cmpmem (shoal_tensor_data (a), shoal_tensor_count (a) * sizeof (float),
                   shoal_tensor_data (b), shoal_tensor_count (b) * sizeof (float));

  /* params by name through the accessors */
  ShoalParamStore *store = shoal_net_params (net);
  g_assert_cmpuint (shoal_param_store_n_params (store), ==, 4);
  ShoalParam *w = shoal_param_store_find (store, "fc1/weight");
  g_assert_nonnull (w);
  g_assert_cmpstr (shoal_param_name (w), ==, "fc1/weight");
  g_assert_cmpint (shoal_param_shape (w)->dim[0], ==, 10);
  g_assert_true (shoal_param_store_get (store, 0) == w);
  g_assert_null (shoal_param_store_get (store, 4));

  /* errors */
  g_assert_false (shoal_net_feed (net, "x", x, 9, y, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_SHAPE);
  g_assert_cmpstr (error->message, ==, "layer 'x' takes 1 to 8 rows at a time, got 9");
  g_clear_error (&error);
  g_assert_false (shoal_net_feed (net, "nope", x, 1, y, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
  g_assert_cmpstr (error->message, ==, "api.conf: the net has no layer 'nope'");
  g_clear_error (&error);
  g_assert_false (shoal_net_feed (net, "fc1", x, 1, y, &error));
  g_assert_cmpstr (error->message, ==, "api.conf: feed: not an input layer: 'fc1'");
  g_clear_error (&error);
  char *missing = g_build_filename (dir, "none.params", NULL);
  g_assert_false (shoal_net_load_params (fresh, missing, SHOAL_PARAMS_BY_NAME_ALL, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_IO);
  g_clear_error (&error);

  shoal_updater_free (upd);
  g_remove (path);
  g_rmdir (dir);
  g_free (missing);
  g_free (path);
  g_free (dir);
  shoal_net_free (fresh);
  shoal_conf_free (conf2);
  shoal_net_free (net);
  shoal_conf_free (conf);
}

/* d loss / d out given by the program: for y = x W^T + b and gradient g,
 * dW = g^T x and db = sum of g's rows. */
static void
test_backward_from (void)
{
  static const char text[] =
    "[layer x]\ntype = feed\nshape = 4, 3\n"
    "[layer y]\ntype = dense\nsrc = x\nnum_output = 2\n"
    "[layer z]\ntype = relu\nsrc = y\n";
  ShoalConf *conf;
  ShoalNet *net = net_of (text, &conf);
  float x[12], g[8];
  for (int i = 0; i < 12; i++)
    x[i] = (float) (i % 5) - 1.5f;
  for (int i = 0; i < 8; i++)
    g[i] = 0.25f * (float) (i + 1);
  GError *error = NULL;
  g_assert_true (shoal_net_feed (net, "x", x, 4, NULL, &error));
  shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  shoal_param_store_zero_grads (shoal_net_params (net));

  /* y is read by z: only an output takes a gradient */
  g_assert_false (shoal_net_backward_from (net, "y", g, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
  g_assert_cmpstr (error->message, ==, "backward from 'y': other layers read the output of 'y'");
  g_clear_error (&error);

  /* through z (relu): the gradient passes where y > 0 */
  g_assert_true (shoal_net_backward_from (net, "z", g, &error));
  g_assert_no_error (error);
  const float *y = shoal_tensor_data (shoal_layer_out (shoal_net_find (net, "y")));
  ShoalParam *w = shoal_param_store_find (shoal_net_params (net), "y/weight");
  ShoalParam *bias = shoal_param_store_find (shoal_net_params (net), "y/bias");
  const float *dw = shoal_tensor_data (shoal_param_grad (w)), *db = shoal_tensor_data (shoal_param_grad (bias));
  for (int o = 0; o < 2; o++)
    {
      double want_b = 0;
      for (int r = 0; r < 4; r++)
        want_b += y[r * 2 + o] > 0 ? g[r * 2 + o] : 0;
      g_assert_cmpfloat_with_epsilon (db[o], want_b, 1e-5);
      for (int i = 0; i < 3; i++)
        {
          double want = 0;
          for (int r = 0; r < 4; r++)
            want += (y[r * 2 + o] > 0 ? g[r * 2 + o] : 0) * x[r * 3 + i];
          g_assert_cmpfloat_with_epsilon (dw[o * 3 + i], want, 1e-5);
        }
    }
  shoal_net_free (net);
  shoal_conf_free (conf);
}

/* A layer of the program's own: y = a * x with a learned scalar a. */
static gboolean
scale_setup (ShoalLayer *layer, GError **error)
{
  shoal_layer_set_out_shape (layer, shoal_tensor_shape (shoal_layer_src_out (layer, 0)));
  ShoalShape one = shoal_shape_make (1, 1);
  ShoalInitSpec init = { .kind = SHOAL_INIT_CONSTANT, .value = 0.7f };
  return shoal_layer_declare_param (layer, "a", &one, 1, 1, &init, error) != NULL;
}

static void
scale_forward (ShoalLayer *layer, ShoalPhase phase)
{
  (void) phase;
  const float *x = shoal_tensor_data (shoal_layer_src_out (layer, 0));
  float a = shoal_tensor_data (shoal_param_value (shoal_layer_param (layer, 0)))[0];
  float *y = shoal_tensor_data (shoal_layer_out (layer));
  for (size_t i = 0; i < shoal_tensor_count (shoal_layer_out (layer)); i++)
    y[i] = a * x[i];
}

/* d/da adds (the contract); `overwrite` breaks it for the negative test. */
static void
scale_backward_with (ShoalLayer *layer, gboolean overwrite)
{
  const float *x = shoal_tensor_data (shoal_layer_src_out (layer, 0));
  const float *dy = shoal_tensor_data (shoal_layer_grad (layer));
  ShoalParam *p = shoal_layer_param (layer, 0);
  float a = shoal_tensor_data (shoal_param_value (p))[0];
  float *da = shoal_tensor_data (shoal_param_grad (p));
  size_t n = shoal_tensor_count (shoal_layer_out (layer));
  double sum = 0;
  for (size_t i = 0; i < n; i++)
    sum += (double) dy[i] * x[i];
  if (overwrite)
    da[0] = (float) sum;
  else
    da[0] += (float) sum;
  ShoalTensor *dx = shoal_layer_src_grad (layer, 0);
  if (dx != NULL)
    for (size_t i = 0; i < n; i++)
      shoal_tensor_data (dx)[i] = a * dy[i];
}

static void
scale_backward (ShoalLayer *layer)
{
  scale_backward_with (layer, FALSE);
}

static void
scale_backward_overwrites (ShoalLayer *layer)
{
  scale_backward_with (layer, TRUE);
}

static const char *const scale_params[] = { "a", NULL };

static const ShoalLayerOps scale_ops = {
  .type = "api_scale", .summary = "y = a x", .split = { .dims = SHOAL_SPLIT_BATCH | SHOAL_SPLIT_FEATURE },
  .min_srcs = 1, .max_srcs = 1, .param_names = scale_params,
  .setup = scale_setup, .forward = scale_forward, .backward = scale_backward,
};

static const ShoalLayerOps overwriting_ops = {
  .type = "api_scale_overwrites", .summary = "y = a x, backward writes d/da",
  .min_srcs = 1, .max_srcs = 1, .param_names = scale_params,
  .setup = scale_setup, .forward = scale_forward, .backward = scale_backward_overwrites,
};

static void
test_own_layer (void)
{
  GError *error = NULL;
  g_assert_true (shoal_layer_register (&scale_ops, &error));
  g_assert_no_error (error);
  g_assert_true (shoal_layer_register (&overwriting_ops, &error));
  g_assert_false (shoal_layer_register (&scale_ops, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
  g_assert_cmpstr (error->message, ==, "layer type 'api_scale' is already registered");
  g_clear_error (&error);

  static const char good[] = "[layer x]\ntype = feed\nshape = 3, 4\nneed_grad = true\n"
                             "[layer s]\ntype = api_scale\nsrc = x\n";
  int checked = 0;
  g_assert_true (shoal_layer_gradcheck (good, "s", NULL, 5, &checked, &error));
  g_assert_no_error (error);
  g_assert_cmpint (checked, ==, 13);   /* 12 inputs and a */

  /* writing d/da instead of adding is caught, though its value is right */
  static const char bad[] = "[layer x]\ntype = feed\nshape = 3, 4\n"
                            "[layer s]\ntype = api_scale_overwrites\nsrc = x\n";
  g_assert_false (shoal_layer_gradcheck (bad, "s", NULL, 5, &checked, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_GRADIENT);
  g_assert_nonnull (strstr (error->message, "s/a element 0: backward must ADD into param gradients"));
  g_clear_error (&error);

  /* a type whose split keys are not its options is refused */
  static const ShoalLayerOps bad_split = {
    .type = "api_bad_split", .split = { .dims = SHOAL_SPLIT_FEATURE, .units_key = "units" },
    .min_srcs = 1, .max_srcs = 1, .setup = scale_setup, .forward = scale_forward,
  };
  g_assert_false (shoal_layer_register (&bad_split, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL);
  g_clear_error (&error);
}

/* A recurrent layer's carried state through the public getter and
 * setter: after a forward it is each row's last step (the top level's
 * output at step T-1); set to zeros the next forward repeats the first
 * one (which started from zeros) to the bit; set to the same states
 * twice, two forwards agree with each other and not with the first. */
static void
test_carried_state (void)
{
  const char *types[] = { "gru", "lstm" };
  for (int k = 0; k < 2; k++)
    {
      char *text = g_strdup_printf ("[layer x]\ntype = feed\nshape = 2, 3, 4\n"
                                    "[layer r]\ntype = %s\nsrc = x\nhidden_size = 5\nnum_layers = 2\n"
                                    "[layer fc]\ntype = dense\nsrc = x\nnum_output = 2\n", types[k]);
      ShoalConf *conf;
      ShoalNet *net = net_of (text, &conf);
      ShoalLayer *r = shoal_net_find (net, "r");
      GError *error = NULL;
      float x[24];
      ShoalRng rng;
      shoal_rng_seed (&rng, 4, 4);
      for (int i = 0; i < 24; i++)
        x[i] = shoal_rng_gaussian (&rng);
      g_assert_true (shoal_net_feed (net, "x", x, 2, NULL, &error));
      shoal_net_forward (net, SHOAL_PHASE_TRAIN);
      const size_t nout = shoal_tensor_count (shoal_layer_out (r)), n = 2 * 5;
      float *out0 = g_memdup2 (shoal_tensor_data (shoal_layer_out (r)), nout * sizeof (float));
      float h[10], zeros[10] = { 0 }, s[10];
      g_assert_true (shoal_layer_get_carried_state (r, SHOAL_PHASE_TRAIN, 1, FALSE, h, n, &error));
      g_assert_no_error (error);
      for (int b = 0; b < 2; b++)
        for (int j = 0; j < 5; j++)
          g_assert_cmpfloat (h[b * 5 + j], ==, out0[(b * 3 + 2) * 5 + j]);
      if (k == 1)
        g_assert_true (shoal_layer_get_carried_state (r, SHOAL_PHASE_TRAIN, 0, TRUE, h, n, &error));

      for (int l = 0; l < 2; l++)
        g_assert_true (shoal_layer_set_carried_state (r, SHOAL_PHASE_TRAIN, l, FALSE, zeros, n, &error));
      if (k == 1)
        for (int l = 0; l < 2; l++)
          g_assert_true (shoal_layer_set_carried_state (r, SHOAL_PHASE_TRAIN, l, TRUE, zeros, n, &error));
      shoal_net_forward (net, SHOAL_PHASE_TRAIN);
      g_assert_cmpmem (shoal_tensor_data (shoal_layer_out (r)), nout * sizeof (float), out0, nout * sizeof (float));

      for (int i = 0; i < 10; i++)
        s[i] = 0.5f * shoal_rng_gaussian (&rng);
      g_assert_true (shoal_layer_set_carried_state (r, SHOAL_PHASE_TRAIN, 0, FALSE, s, n, &error));
      float saved[2][2][10];   /* [level][cell]: every state the next forward starts from */
      for (int l = 0; l < 2; l++)
        for (int c = 0; c <= k; c++)
          g_assert_true (shoal_layer_get_carried_state (r, SHOAL_PHASE_TRAIN, l, c, saved[l][c], n, &error));
      shoal_net_forward (net, SHOAL_PHASE_TRAIN);
      float *out_s = g_memdup2 (shoal_tensor_data (shoal_layer_out (r)), nout * sizeof (float));
      g_assert_true (memcmp (out_s, out0, nout * sizeof (float)) != 0);
      for (int l = 0; l < 2; l++)
        for (int c = 0; c <= k; c++)
          g_assert_true (shoal_layer_set_carried_state (r, SHOAL_PHASE_TRAIN, l, c, saved[l][c], n, &error));
      shoal_net_forward (net, SHOAL_PHASE_TRAIN);
      g_assert_cmpmem (shoal_tensor_data (shoal_layer_out (r)), nout * sizeof (float), out_s, nout * sizeof (float));
      g_assert_no_error (error);

      /* what is refused */
      g_assert_false (shoal_layer_get_carried_state (r, SHOAL_PHASE_TRAIN, 2, FALSE, h, n, &error));
      g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
      g_clear_error (&error);
      g_assert_false (shoal_layer_get_carried_state (r, SHOAL_PHASE_TEST, 0, FALSE, h, n - 1, &error));
      g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_SHAPE);
      g_clear_error (&error);
      g_assert_false (shoal_layer_get_carried_state (shoal_net_find (net, "fc"), SHOAL_PHASE_TRAIN, 0, FALSE,
                                                     h, n, &error));
      g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
      g_clear_error (&error);
      if (k == 0)
        {
          g_assert_false (shoal_layer_get_carried_state (r, SHOAL_PHASE_TRAIN, 0, TRUE, h, n, &error));
          g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
          g_clear_error (&error);
        }
      g_free (out_s);
      g_free (out0);
      shoal_net_free (net);
      shoal_conf_free (conf);
      g_free (text);
    }
  /* a stateless layer takes no state */
  ShoalConf *conf;
  ShoalNet *net = net_of ("[layer x]\ntype = feed\nshape = 2, 3, 4\n"
                          "[layer r]\ntype = gru\nsrc = x\nhidden_size = 5\nstateful = false\n", &conf);
  float zeros[10] = { 0 };
  GError *error = NULL;
  g_assert_false (shoal_layer_set_carried_state (shoal_net_find (net, "r"), SHOAL_PHASE_TRAIN, 0, FALSE, zeros,
                                                 10, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
  g_clear_error (&error);
  shoal_net_free (net);
  shoal_conf_free (conf);
}

static void
test_version (void)
{
  g_assert_cmpstr (shoal_version (), ==, SHOAL_VERSION_STRING);
  g_assert_true (SHOAL_CHECK_VERSION (0, 0, 1));
  g_assert_false (SHOAL_CHECK_VERSION (SHOAL_MAJOR_VERSION + 1, 0, 0));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/api/train-save-load", test_train_save_load);
  g_test_add_func ("/api/backward-from", test_backward_from);
  g_test_add_func ("/api/own-layer", test_own_layer);
  g_test_add_func ("/api/carried-state", test_carried_state);
  g_test_add_func ("/api/version", test_version);
  return g_test_run ();
}
