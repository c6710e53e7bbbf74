/* Coverage by construction: every layer type the registry knows (the
 * built-ins of layers/layer_list.h and the data layers) has a gradient
 * check here, or a reason why none applies that the test verifies (no
 * backward to check), or a stated reason it cannot (a backward that is no
 * gradient); a type without an entry fails.  Every type of layer_list.h
 * has a GPU path or says why not; in a CUDA build the registered GPU
 * paths must be exactly the declared ones. */
#include <math.h>
#include <string.h>

#include "data/data_layers.h"
#include "layers/bridge.h"
#include "net/net.h"
#include "support/gradcheck.h"

/* ---- the bridge pair: one gradient check of both ends ---------------------------- */

/* A transport in one net: bridge_dst's forward copies what bridge_src
 * sent, bridge_src's backward what bridge_dst sent back. */
typedef struct {
  const float *data, *grad;
} TestWire;

static void
wire_send_data (ShoalBridgeLink *link, ShoalLayer *src)
{
  ((TestWire *) link->data)->data = src->out.data;
}

static void
wire_recv_data (ShoalBridgeLink *link, ShoalLayer *dst)
{
  memcpy (dst->out.data, ((TestWire *) link->data)->data, shoal_tensor_count (&dst->out) * sizeof (float));
}

static void
wire_send_grad (ShoalBridgeLink *link, ShoalLayer *dst)
{
  ((TestWire *) link->data)->grad = dst->grad.data;
}

static void
wire_recv_grad (ShoalBridgeLink *link, ShoalLayer *src)
{
  memcpy (src->src_grad[0]->data, ((TestWire *) link->data)->grad,
          shoal_tensor_count (src->src_grad[0]) * sizeof (float));
}

static const ShoalBridgeTransport test_transport = {
  .send_data = wire_send_data, .recv_data = wire_recv_data,
  .send_grad = wire_send_grad, .recv_grad = wire_recv_grad,
};

/* The pair carries x to y = x, so d J / d x = d J / d y: finite
 * differences of J = sum y * r through both ends' forwards against the
 * gradient both ends' backwards hand back to x.  Returns the elements
 * compared. */
static int
bridge_pair_check (void)
{
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data ("[layer x]\ntype = feed\nshape = 3,5\nneed_grad = true\n"
                                          "[layer s]\ntype = bridge_src\nsrc = x\n"
                                          "[layer d]\ntype = bridge_dst\nshape = 3,5\n"
                                          "[layer fc]\ntype = dense\nsrc = d\nnum_output = 2\n",
                                          "bridges", &error);
  g_assert_no_error (error);
  ShoalNet *net = shoal_net_new (conf, NULL, &error);
  g_assert_no_error (error);
  ShoalLayer *x = shoal_net_find (net, "x"), *s = shoal_net_find (net, "s"), *d = shoal_net_find (net, "d");
  TestWire wire = { 0 };
  ShoalBridgeLink link = { .transport = &test_transport, .data = &wire, .src = s, .dst = d };
  g_assert_true (shoal_bridge_link_attach (&link, &error));
  g_assert_no_error (error);

  const size_t n = shoal_tensor_count (&x->out);
  float r[15];
  ShoalRng rng;
  shoal_rng_seed (&rng, 5, 5);
  for (size_t i = 0; i < n; i++)
    r[i] = shoal_rng_gaussian (&rng);
#define J_OF_X(result)                                                  \
  G_STMT_START                                                       \
  {                                                                  \
    s->ops->forward (s, SHOAL_PHASE_TRAIN);                          \
    d->ops->forward (d, SHOAL_PHASE_TRAIN);                          \
    (result) = 0;                                                       \
    for (size_t k = 0; k < n; k++)                                   \
      (result) += (double) d->out.data[k] * r[k];                       \
  }                                                                  \
  G_STMT_END
  double j;
  J_OF_X (j);
  memcpy (d->grad.data, r, n * sizeof (float));
  shoal_tensor_fill (&x->grad, NAN);   /* bridge_src's backward must write all of it */
  d->ops->backward (d);
  s->ops->backward (s);
  const float *analytic = s->src_grad[0]->data;
  int checked = 0;
  for (size_t i = 0; i < n; i++)
    {
      const float eps = 1e-2f, saved = x->out.data[i];
      double jp, jm;
      x->out.data[i] = saved + eps;
      J_OF_X (jp);
      x->out.data[i] = saved - eps;
      J_OF_X (jm);
      x->out.data[i] = saved;
      g_assert_cmpfloat_with_epsilon (analytic[i], (jp - jm) / (2 * eps), 1e-3 + 1e-2 * fabs (analytic[i]));
      checked++;
    }
#undef J_OF_X
  shoal_net_free (net);
  shoal_conf_free (conf);
  return checked;
}

/* ---- the table ----------------------------------------------------------------- */

typedef struct {
  const char *type;
  const char *conf;        /* a net to check `layer` of with shoal_layer_gradcheck, or NULL */
  const char *layer;
  int (*check) (void);     /* a check of its own (returns the elements compared), or NULL */
  const char *no_backward; /* why no check applies: the type has no backward (verified) */
  const char *not_a_gradient; /* why none can: its backward is no gradient of its forward */
} Coverage;

#define FEED(shape) "[layer x]\ntype = feed\nshape = " shape "\nneed_grad = true\n"
/* a gradient check of layer l of the conf */
#define CHECK(type_name, conf_text) { .type = (type_name), .conf = (conf_text), .layer = "l" }
#define LABELS(rows, classes) "[layer y]\ntype = feed\nshape = " rows ",1\nnum_classes = " classes "\n"

static const Coverage table[] = {
  { .type = "accuracy", .no_backward = "a metric" },
  CHECK ("batchnorm", FEED ("3,4,3,2") "[layer l]\ntype = batchnorm\nsrc = x\n"),
  { .type = "bridge_dst", .check = bridge_pair_check },
  { .type = "bridge_src", .check = bridge_pair_check },
  CHECK ("concat", FEED ("2,3") "[layer z]\ntype = feed\nshape = 2,4\nneed_grad = true\n"
              "[layer l]\ntype = concat\nsrc = x, z\naxis = 1\n"),
  CHECK ("conv", FEED ("2,3,6,6") "[layer l]\ntype = conv\nsrc = x\nnum_filters = 3\nkernel = 3\npad = 1\n"),
  CHECK ("dense", FEED ("4,6") "[layer l]\ntype = dense\nsrc = x\nnum_output = 5\n"),
  CHECK ("dropout", FEED ("5,7") "[layer l]\ntype = dropout\nsrc = x\nratio = 0.3\n"),
  CHECK ("embedding", "[layer x]\ntype = feed\nshape = 3,4\n"
                 "[layer l]\ntype = embedding\nsrc = x\nvocab_size = 7\nembedding_dim = 3\n"),
  CHECK ("euclidean_loss", FEED ("4,3") "[layer t]\ntype = feed\nshape = 4,3\nneed_grad = true\n"
                      "[layer l]\ntype = euclidean_loss\nsrc = x, t\n"),
  { .type = "feed", .no_backward = "an input layer" },
  CHECK ("gru", FEED ("2,3,4") "[layer l]\ntype = gru\nsrc = x\nhidden_size = 4\n"),
  { .type = "lmdb_input", .no_backward = "an input layer" },
  CHECK ("lrn", FEED ("2,5,3,3") "[layer l]\ntype = lrn\nsrc = x\nlocal_size = 3\nalpha = 0.5\n"),
  CHECK ("lstm", FEED ("2,3,4") "[layer l]\ntype = lstm\nsrc = x\nhidden_size = 4\n"),
  CHECK ("pooling", FEED ("2,2,6,6") "[layer l]\ntype = pooling\nsrc = x\nkernel = 3\nstride = 2\npool = avg\n"),
  { .type = "rbm_free_energy", .no_backward = "a metric (the RBM's free energy)" },
  { .type = "rbm_hidden", .not_a_gradient = "its backward adds the contrastive-divergence estimate, which is "
                                           "no gradient of a forward (test_rbm: CD-1 and CD-2 by hand)" },
  { .type = "rbm_visible", .not_a_gradient = "its backward adds the contrastive-divergence estimate of the "
                                            "visible bias (test_rbm: CD-1 and CD-2 by hand)" },
  CHECK ("relu", FEED ("4,5") "[layer l]\ntype = relu\nsrc = x\n"),
  CHECK ("sigmoid", FEED ("4,5") "[layer l]\ntype = sigmoid\nsrc = x\n"),
  CHECK ("sigmoid_cross_entropy_loss", FEED ("4,3") "[layer t]\ntype = feed\nshape = 4,3\nneed_grad = true\n"
                                  "[layer l]\ntype = sigmoid_cross_entropy_loss\nsrc = x, t\n"),
  CHECK ("slice", FEED ("5,4") "[layer l]\ntype = slice\nsrc = x\naxis = 0\nparts = 2\nindex = 1\n"),
  CHECK ("softmax_loss", FEED ("4,3") LABELS ("4", "3") "[layer l]\ntype = softmax_loss\nsrc = x, y\n"),
  CHECK ("stanh", FEED ("4,5") "[layer l]\ntype = stanh\nsrc = x\n"),
  CHECK ("tanh", FEED ("4,5") "[layer l]\ntype = tanh\nsrc = x\n"),
  { .type = "text_input", .no_backward = "an input layer" },
};

static const Coverage *
entry_of (const char *type)
{
  for (gsize i = 0; i < G_N_ELEMENTS (table); i++)
    if (strcmp (table[i].type, type) == 0)
      return &table[i];
  return NULL;
}

typedef struct {
  const char *type;
  const char *cpu_only;   /* why it has no GPU path, or NULL */
} GpuStatus;

/* Every type of layers/layer_list.h, with its GPU status. */
static const GpuStatus gpu_status[] = {
#define SHOAL_LAYER(type) { #type, NULL },
#define SHOAL_LAYER_CPU_ONLY(type, why) { #type, why },
#include "layers/layer_list.h"
#undef SHOAL_LAYER
#undef SHOAL_LAYER_CPU_ONLY
};

/* Every type the registry knows is in the table, and its entry holds. */
static void
test_gradient_checks (void)
{
  const char **types = shoal_layer_types ();
  int n = 0;
  for (int i = 0; types[i] != NULL; i++, n++)
    {
      const ShoalLayerOps *ops = shoal_layer_lookup (types[i]);
      const Coverage *c = entry_of (types[i]);
      if (c == NULL)
        {
          g_test_message ("layer type '%s' has no gradient check and no reason in test_coverage.c", types[i]);
          g_test_fail ();
          continue;
        }
      if (c->no_backward != NULL)
        {
          if (ops->backward != NULL)
            {
              g_test_message ("'%s' is listed as %s without backward, but it has one", types[i], c->no_backward);
              g_test_fail ();
            }
          continue;
        }
      if (c->not_a_gradient != NULL)
        {
          g_test_message ("%s: no gradient check: %s", types[i], c->not_a_gradient);
          continue;
        }
      int checked = c->check != NULL ? c->check () : shoal_gradcheck_conf (c->conf, c->layer, NULL, 17);
      if (checked <= 0)
        {
          g_test_message ("%s: the gradient check compared nothing", types[i]);
          g_test_fail ();
        }
    }
  g_assert_cmpint (n, ==, (int) G_N_ELEMENTS (gpu_status) + 2);  /* layer_list.h's and the data module's 2 */
  g_free (types);
}

/* Every type of layer_list.h is in the registry; the CPU-only ones say
 * why; in a CUDA build the GPU paths registered are the declared ones. */
static void
test_gpu_paths (void)
{
  for (gsize i = 0; i < G_N_ELEMENTS (gpu_status); i++)
    {
      const GpuStatus *g = &gpu_status[i];
      const ShoalLayerOps *ops = shoal_layer_lookup (g->type);
      g_assert_nonnull (ops);
      g_assert_true (g->cpu_only == NULL || strlen (g->cpu_only) > 10);
#ifdef SHOAL_CUDA
      if ((shoal_layer_gpu_ops (ops) != NULL) != (g->cpu_only == NULL))
        {
          g_test_message ("'%s': layer_list.h says %s, the CUDA build registered %s", g->type,
                          g->cpu_only == NULL ? "a GPU path" : "none", shoal_layer_gpu_ops (ops) ? "one" : "none");
          g_test_fail ();
        }
#else
      /* a CPU build registers no GPU path at all */
      g_assert_null (shoal_layer_gpu_ops (ops));
#endif
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  shoal_data_register_layers ();
  g_test_add_func ("/coverage/gradient-checks", test_gradient_checks);
  g_test_add_func ("/coverage/gpu-paths", test_gpu_paths);
  return g_test_run ();
}
