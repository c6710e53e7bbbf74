/* Layer types registered at run time, as a program linking libshoal
 * would: they are found by confs, validated like built-ins (their
 * options and param keys), gradient-checked, listed, and names that are
 * taken are refused. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "net/net.h"
#include "support/gradcheck.h"

/* ---- scale2: y = 2x ------------------------------------------------------ */

static const ShoalOption scale2_options[] = { SHOAL_OPTION_END };

static gboolean
scale2_setup (ShoalLayer *layer, GError **error)
{
  (void) error;
  layer->out.shape = layer->srcs[0]->out.shape;
  return TRUE;
}

static void
scale2_forward (ShoalLayer *layer, ShoalPhase phase)
{
  (void) phase;
  const float *x = layer->srcs[0]->out.data;
  size_t n = shoal_tensor_count (&layer->out);
  for (size_t i = 0; i < n; i++)
    layer->out.data[i] = 2.0f * x[i];
}

static void
scale2_backward (ShoalLayer *layer)
{
  ShoalTensor *dx = layer->src_grad[0];
  if (dx == NULL)
    return;
  size_t n = shoal_tensor_count (&layer->out);
  for (size_t i = 0; i < n; i++)
    dx->data[i] = 2.0f * layer->grad.data[i];
}

static const ShoalLayerOps scale2_ops = {
  .type = "scale2",
  .summary = "y = 2x (test)",
  .split = { .dims = SHOAL_SPLIT_BATCH | SHOAL_SPLIT_FEATURE },
  .min_srcs = 1,
  .max_srcs = 1,
  .options = scale2_options,
  .setup = scale2_setup,
  .forward = scale2_forward,
  .backward = scale2_backward,
};

/* ---- shift: y = x * gain + offset, offset learned per feature ------------- */

typedef struct {
  float gain;
} ShiftPriv;

static const ShoalOption shift_options[] = {
  { "gain", SHOAL_OPT_FLOAT, "1", -10, 10, NULL, "fixed factor before the offset" },
  SHOAL_OPTION_END
};

static const char *const shift_params[] = { "offset", NULL };

static gboolean
shift_setup (ShoalLayer *layer, GError **error)
{
  ShiftPriv *p = layer->priv;
  const ShoalShape *in = &layer->srcs[0]->out.shape;
  if (in->ndim != 2)
    {
      char *s = shoal_shape_to_string (in);
      shoal_layer_error (layer, error, "src", "needs (rows, features) input, got %s", s);
      g_free (s);
      return FALSE;
    }
  p->gain = (float) shoal_layer_opt_float (layer, "gain");
  layer->out.shape = *in;
  ShoalShape shape = shoal_shape_make (1, in->dim[1]);
  ShoalInitSpec init = { .kind = SHOAL_INIT_CONSTANT, .value = 0 };
  return shoal_layer_declare_param (layer, "offset", &shape, in->dim[1], in->dim[1], &init, error)
         != NULL;
}

static void
shift_forward (ShoalLayer *layer, ShoalPhase phase)
{
  const ShiftPriv *p = layer->priv;
  (void) phase;
  int rows = shoal_tensor_rows (&layer->out), d = layer->out.shape.dim[1];
  const float *x = layer->srcs[0]->out.data, *b = layer->params[0]->value.data;
  for (int r = 0; r < rows; r++)
    for (int j = 0; j < d; j++)
      layer->out.data[r * d + j] = p->gain * x[r * d + j] + b[j];
}

static void
shift_backward (ShoalLayer *layer)
{
  const ShiftPriv *p = layer->priv;
  int rows = shoal_tensor_rows (&layer->out), d = layer->out.shape.dim[1];
  const float *dy = layer->grad.data;
  float *db = layer->params[0]->grad.data;
  for (int r = 0; r < rows; r++)
    for (int j = 0; j < d; j++)
      db[j] += dy[r * d + j];
  if (layer->src_grad[0] != NULL)
    for (int i = 0; i < rows * d; i++)
      layer->src_grad[0]->data[i] = p->gain * dy[i];
}

static const ShoalLayerOps shift_ops = {
  .type = "shift",
  .summary = "y = gain * x + offset (test)",
  .split = { .dims = SHOAL_SPLIT_BATCH },
  .min_srcs = 1,
  .max_srcs = 1,
  .options = shift_options,
  .param_names = shift_params,
  .priv_size = sizeof (ShiftPriv),
  .setup = shift_setup,
  .forward = shift_forward,
  .backward = shift_backward,
};

static gpointer
register_once (gpointer unused)
{
  (void) unused;
  GError *error = NULL;
  g_assert_true (shoal_layer_register (&scale2_ops, &error));
  g_assert_no_error (error);
  g_assert_true (shoal_layer_register (&shift_ops, &error));
  g_assert_no_error (error);
  return NULL;
}

/* Each test may run alone (-p), so each makes sure the types exist. */
static void
ensure_registered (void)
{
  static GOnce once = G_ONCE_INIT;
  g_once (&once, register_once, NULL);
}

static ShoalNet *
build (const char *text, ShoalConf **conf_out, GError **error)
{
  ShoalConf *conf = shoal_conf_load_data (text, "reg.conf", error);
  g_assert_nonnull (conf);
  ShoalNet *net = shoal_net_new (conf, NULL, error);
  if (net == NULL)
    {
      shoal_conf_free (conf);
      return NULL;
    }
  shoal_param_store_init_values (shoal_net_params (net), 1);
  *conf_out = conf;
  return net;
}

static const char scale2_net[] =
  "[layer x]\ntype = feed\nshape = 3,4\nneed_grad = true\n"
  "[layer s]\ntype = scale2\nsrc = x\n"
  "[layer fc]\ntype = dense\nsrc = s\nnum_output = 2\n";

static void
test_build_and_forward (void)
{
  ensure_registered ();
  g_assert_true (shoal_layer_lookup ("scale2") == &scale2_ops);
  GError *error = NULL;
  ShoalConf *conf;
  ShoalNet *net = build (scale2_net, &conf, &error);
  g_assert_no_error (error);
  ShoalLayer *x = shoal_net_find (net, "x"), *s = shoal_net_find (net, "s");
  g_assert_true (s->ops == &scale2_ops);
  g_assert_true (s->needs_grad);  /* x asks for a gradient */
  shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  for (size_t i = 0; i < 12; i++)
    g_assert_cmpfloat (s->out.data[i], ==, 2.0f * x->out.data[i]);
  shoal_net_free (net);
  shoal_conf_free (conf);
}

static void
test_gradcheck (void)
{
  ensure_registered ();
  g_assert_cmpint (shoal_gradcheck_conf (scale2_net, "s", NULL, 3), >, 0);
  /* a custom layer with a param, between built-ins and fanned out */
  const char *shift_net =
    "[layer x]\ntype = feed\nshape = 5,3\nneed_grad = true\n"
    "[layer sh]\ntype = shift\nsrc = x\ngain = -1.5\n"
    "[layer a]\ntype = scale2\nsrc = sh\n"
    "[layer b]\ntype = tanh\nsrc = sh\n"
    "[layer loss]\ntype = euclidean_loss\nsrc = a, b\n";
  g_assert_cmpint (shoal_gradcheck_conf (shift_net, "sh", NULL, 4), >, 0);
  g_assert_cmpint (shoal_gradcheck_conf (shift_net, "a", NULL, 5), >, 0);
}

static void
test_custom_options (void)
{
  ensure_registered ();
  GError *error = NULL;
  ShoalConf *conf;
  const char *base = "[layer x]\ntype = feed\nshape = 2,3\n[layer sh]\ntype = shift\nsrc = x\n";

  /* param keys from param_names: init and value honoured */
  char *text = g_strconcat (base, "offset_value = 0.5\ngain = 3\n", NULL);
  ShoalNet *net = build (text, &conf, &error);
  g_assert_no_error (error);
  ShoalLayer *sh = shoal_net_find (net, "sh"), *x = shoal_net_find (net, "x");
  g_assert_cmpstr (sh->params[0]->name, ==, "sh/offset");
  for (int j = 0; j < 3; j++)
    g_assert_cmpfloat (sh->params[0]->value.data[j], ==, 0.5f);
  shoal_net_forward (net, SHOAL_PHASE_TEST);
  g_assert_cmpfloat_with_epsilon (sh->out.data[4], 3.0f * x->out.data[4] + 0.5f, 1e-6);
  shoal_net_free (net);
  shoal_conf_free (conf);
  g_free (text);

  struct { const char *extra, *msg; } bad[] = {
    { "gian = 2\n", "reg.conf:7: [layer sh] gian: unknown key (did you mean 'gain'?)" },
    { "gain = 11\n", "reg.conf:7: [layer sh] gain: 11 is out of range [-10, 10]" },
    { "offset_std = x\n", "reg.conf:7: [layer sh] offset_std: expected a number, got 'x'" },
    { "weight_std = 1\n", "reg.conf:7: [layer sh] weight_std: unknown key" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      text = g_strconcat (base, bad[i].extra, NULL);
      g_assert_null (build (text, &conf, &error));
      g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
      g_assert_cmpstr (error->message, ==, bad[i].msg);
      g_clear_error (&error);
      g_free (text);
    }
  /* the layer's own set-up error, with the place */
  g_assert_null (build ("[layer x]\ntype = feed\nshape = 2,3,4\n[layer sh]\ntype = shift\nsrc = x\n",
                        &conf, &error));
  g_assert_cmpstr (error->message, ==, "reg.conf:6: [layer sh] src: needs (rows, features) input, got 2x3x4");
  g_clear_error (&error);
}

static void
test_refused_names (void)
{
  ensure_registered ();
  GError *error = NULL;

  /* the same ops again, or another table under a taken name */
  g_assert_false (shoal_layer_register (&scale2_ops, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
  g_assert_cmpstr (error->message, ==, "layer type 'scale2' is already registered");
  g_clear_error (&error);

  static const char *const taken[] = { "dense", "feed", "softmax_loss", "split", "shift" };
  for (gsize i = 0; i < G_N_ELEMENTS (taken); i++)
    {
      ShoalLayerOps *ops = g_new (ShoalLayerOps, 1);
      *ops = scale2_ops;
      ops->type = taken[i];
      g_assert_false (shoal_layer_register (ops, &error));
      g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
      char *want = g_strdup_printf ("layer type '%s' is already registered", taken[i]);
      g_assert_cmpstr (error->message, ==, want);
      g_free (want);
      g_clear_error (&error);
      g_free (ops);
    }
  /* built-ins are still themselves */
  g_assert_true (shoal_layer_lookup ("dense") != &scale2_ops);
  g_assert_cmpstr (shoal_layer_lookup ("dense")->type, ==, "dense");

  /* malformed tables */
  ShoalLayerOps broken = scale2_ops;
  broken.type = "broken";
  broken.setup = NULL;
  g_assert_false (shoal_layer_register (&broken, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL);
  g_clear_error (&error);
  broken = scale2_ops;
  broken.type = "broken";
  broken.max_srcs = SHOAL_LAYER_MAX_SRCS + 1;
  g_assert_false (shoal_layer_register (&broken, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL);
  g_assert_cmpstr (error->message, ==, "layer type 'broken': sources must be within 0..8");
  g_clear_error (&error);
  g_assert_null (shoal_layer_lookup ("broken"));
}

static void
test_types_listed (void)
{
  ensure_registered ();
  const char **types = shoal_layer_types ();
  int scale2 = 0, shift = 0, dense = 0, split = 0, n = 0;
  for (const char **t = types; *t != NULL; t++, n++)
    {
      scale2 += strcmp (*t, "scale2") == 0;
      shift += strcmp (*t, "shift") == 0;
      dense += strcmp (*t, "dense") == 0;
      split += strcmp (*t, "split") == 0;
      /* every listed name is found */
      g_assert_nonnull (shoal_layer_lookup (*t));
    }
  g_assert_cmpint (scale2, ==, 1);
  g_assert_cmpint (shift, ==, 1);
  g_assert_cmpint (dense, ==, 1);
  g_assert_cmpint (split, ==, 0);  /* not a type a conf may name */
  g_assert_cmpint (n, >=, 4);
  g_free (types);
  g_assert_null (shoal_layer_lookup ("nope"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/registry/build-and-forward", test_build_and_forward);
  g_test_add_func ("/registry/gradcheck", test_gradcheck);
  g_test_add_func ("/registry/custom-options", test_custom_options);
  g_test_add_func ("/registry/refused-names", test_refused_names);
  g_test_add_func ("/registry/types-listed", test_types_listed);
  return g_test_run ();
}
