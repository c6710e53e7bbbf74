/* The GPU paths against their CPU references.
 *
 * Every GPU test builds the same conf twice, on the CPU and on cuda:0,
 * with the same seed (so feed data, labels and params are equal), runs
 * forward and backward on both, and compares every layer's output and
 * gradient and every param gradient; gradient checks run on the GPU path
 * alone (finite differences of the GPU loss); end-to-end tests train a
 * few SGD steps in lockstep and through lmdb_input.
 *
 * On a machine without a CUDA device (or a build without make CUDA=1)
 * these tests skip with "no CUDA device"; what runs everywhere are the
 * checks that a GPU request fails with a clear message and that the
 * device interface works for the CPU. */
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "comm/param_client.h"
#include "worker/push_hook.h"
#include "core/device.h"
#include "core/updater.h"
#include "core/error.h"
#include "data/data_layers.h"
#include "data/dataset.h"
#include "data/text.h"
#include "net/net.h"
#include "partition/partition.h"
#include "server/rpc_server.h"
#include "server/server.h"
#include "job/job.h"
#include "layers/recurrent.h"
#include "support/codec_cases.h"
#include "support/temp_tree.h"

#define SEED 11

#ifdef SHOAL_TEST_GPU_DRY_RUN
/* A check of this file itself on a machine without a GPU: built with
 * -DSHOAL_TEST_GPU_DRY_RUN the "GPU" net is a second CPU net, so every
 * conf, comparison, gradient check and training run is exercised (the
 * tests that need a real device skip). */
#define GPU0 ((ShoalDevice) { SHOAL_DEVICE_CPU, 0 })
#define DRY_RUN TRUE
static gboolean
have_gpu (void)
{
  return TRUE;
}
#else
#define GPU0 shoal_device_cuda (0)
#define DRY_RUN FALSE
static gboolean
have_gpu (void)
{
  if (shoal_device_count () > 0)
    return TRUE;
  g_test_skip (shoal_device_cuda_built () ? "no CUDA device" : "no CUDA device (built without make CUDA=1)");
  return FALSE;
}
#endif

/* Tests of what only a real device does (uploads, device errors). */
static gboolean
have_real_gpu (void)
{
  if (DRY_RUN)
    {
      g_test_skip ("dry run on the CPU");
      return FALSE;
    }
  return have_gpu ();
}

typedef struct {
  ShoalConf *conf;
  ShoalNet *cpu, *gpu;
} Pair;

static Pair
pair_new_on (const char *text, ShoalDevice device)
{
  GError *error = NULL;
  Pair p;
  p.conf = shoal_conf_load_data (text, "gpu.conf", &error);
  g_assert_no_error (error);
  ShoalNetOptions copts = { .seed = SEED, .shard_count = 1 };
  ShoalNetOptions gopts = { .seed = SEED, .shard_count = 1, .device = device };
  p.cpu = shoal_net_new (p.conf, &copts, &error);
  g_assert_no_error (error);
  p.gpu = shoal_net_new (p.conf, &gopts, &error);
  g_assert_no_error (error);
  shoal_param_store_init_values (shoal_net_params (p.cpu), SEED);
  shoal_param_store_init_values (shoal_net_params (p.gpu), SEED);
  return p;
}

static Pair
pair_new (const char *text)
{
  return pair_new_on (text, GPU0);
}

static void
pair_free (Pair *p)
{
  shoal_net_free (p->gpu);
  shoal_net_free (p->cpu);
  shoal_conf_free (p->conf);
}

/* A device tensor's current contents, newly allocated. */
static float *
download (const ShoalTensor *t)
{
  size_t n = shoal_tensor_count (t);
  float *host = g_new (float, MAX (n, (size_t) 1));
  if (t->device.kind == SHOAL_DEVICE_CPU)
    memcpy (host, t->data, n * sizeof (float));
  else
    {
      GError *error = NULL;
      g_assert_true (shoal_tensor_download (t, host, &error));
      g_assert_no_error (error);
    }
  return host;
}

/* |gpu - cpu| <= atol + rtol * max |cpu| over the tensor; reports the worst. */
static void
assert_close (const char *what, const float *cpu, const float *gpu, size_t n, double rtol, double atol)
{
  double scale = 0, worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < n; i++)
    scale = MAX (scale, fabs (cpu[i]));
  for (size_t i = 0; i < n; i++)
    {
      double d = fabs ((double) gpu[i] - cpu[i]);
      if (!(d <= worst))
        {
          worst = d;
          at = i;
        }
    }
  if (!(worst <= atol + rtol * scale))
    {
      g_test_message ("%s: element %zu differs: cpu %.8g gpu %.8g (|diff| %.3g, max |cpu| %.3g)", what, at,
                      cpu[at], gpu[at], worst, scale);
      g_test_fail ();
    }
}

static void
compare_tensors (const char *what, const ShoalTensor *c, const ShoalTensor *g, double rtol)
{
  if (c->data == NULL || g->data == NULL)
    {
      g_assert_true (c->data == NULL && g->data == NULL);
      return;
    }
  g_assert_true (shoal_shape_equal (&c->shape, &g->shape));
  float *hc = download (c), *hg = download (g);
  assert_close (what, hc, hg, shoal_tensor_count (c), rtol, 1e-6);
  g_free (hc);
  g_free (hg);
}

/* Every layer's output and labels, and gradients when `grads`. */
static void
compare_layers (Pair *p, gboolean grads, double rtol)
{
  g_assert_cmpuint (shoal_net_n_layers (p->cpu), ==, shoal_net_n_layers (p->gpu));
  for (guint i = 0; i < shoal_net_n_layers (p->cpu); i++)
    {
      ShoalLayer *c = shoal_net_layer (p->cpu, i), *g = shoal_net_layer (p->gpu, i);
      g_assert_cmpstr (c->name, ==, g->name);
      char *what = g_strdup_printf ("layer %s out", c->name);
      compare_tensors (what, &c->out, &g->out, rtol);
      g_free (what);
      what = g_strdup_printf ("layer %s label", c->name);
      compare_tensors (what, &c->label, &g->label, 0);
      g_free (what);
      if (grads && c->grad.data != NULL && !(c->ops->flags & SHOAL_LAYER_LOSS))
        {
          what = g_strdup_printf ("layer %s grad", c->name);
          compare_tensors (what, &c->grad, &g->grad, rtol);
          g_free (what);
        }
    }
}

/* Every param's gradient (the host store after backward) and value.  A
 * statistic (batchnorm's running mean and variance) has no gradient: no
 * layer writes its slots and the device's are never added into the
 * host's, so only its value is compared. */
static void
compare_params (Pair *p, double rtol)
{
  ShoalParamStore *cs = shoal_net_params (p->cpu), *gs = shoal_net_params (p->gpu);
  g_assert_cmpuint (cs->total, ==, gs->total);
  for (guint i = 0; i < cs->params->len; i++)
    {
      ShoalParam *cp = g_ptr_array_index (cs->params, i);
      char *what;
      if (!shoal_param_is_statistic (cp))
        {
          what = g_strdup_printf ("param %s grad", cp->name);
          assert_close (what, cs->grads + cp->offset, gs->grads + cp->offset, cp->count, rtol, 1e-6);
          g_free (what);
        }
      what = g_strdup_printf ("param %s value", cp->name);
      assert_close (what, cs->values + cp->offset, gs->values + cp->offset, cp->count, rtol, 1e-6);
      g_free (what);
    }
}

/* Backward ADDS into param gradients (layer.h), on the device as on the
 * CPU, and the net adds the device's gradients into the host's.  So the
 * step starts from known non-zero gradients: P on the GPU net's device
 * copy, Q on its host copy, P + Q on the CPU net; both must end at
 * P + Q + gradient (P and Q are exact in float). */
static void
prefill_grads (Pair *p)
{
  GError *error = NULL;
  ShoalParamStore *cs = shoal_net_params (p->cpu), *gs = shoal_net_params (p->gpu);
  g_assert_cmpuint (cs->total, ==, gs->total);
  float *dev = g_new (float, gs->total);
  for (size_t i = 0; i < gs->total; i++)
    {
      float pp = 0.5f - 0.125f * (float) (i % 9), qq = 0.25f * (float) (i % 5) - 0.5f;
      cs->grads[i] = pp + qq;
      gs->grads[i] = qq;
      dev[i] = pp;
    }
  g_assert_nonnull (gs->dev_grads);
  g_assert_true (shoal_device_copy (gs->dev_grads, dev, gs->total * sizeof (float), &error));
  g_assert_no_error (error);
  g_free (dev);
}

/* One train step on both nets, everything compared; returns the loss. */
static double
compare_step (Pair *p, double rtol)
{
  GError *error = NULL;
  prefill_grads (p);
  double lc = shoal_net_forward (p->cpu, SHOAL_PHASE_TRAIN);
  double lg = shoal_net_forward (p->gpu, SHOAL_PHASE_TRAIN);
  g_assert_true (shoal_net_device_error (p->gpu, &error));
  g_assert_no_error (error);
  /* the loss sums the whole output: it agrees an order closer than the
   * elements do, and never needs to be closer than 1e-4 */
  g_assert_cmpfloat_with_epsilon (lg, lc, MAX (1e-4, rtol / 10) * MAX (1.0, fabs (lc)));
  compare_layers (p, FALSE, rtol);
  shoal_net_backward (p->cpu);
  shoal_net_backward (p->gpu);
  g_assert_true (shoal_net_device_error (p->gpu, &error));
  compare_layers (p, TRUE, rtol);
  compare_params (p, rtol);
  return lc;
}

/* A test-phase forward on both nets, the losses compared. */
static void
compare_test_forward (Pair *p)
{
  double lc = shoal_net_forward (p->cpu, SHOAL_PHASE_TEST);
  double lg = shoal_net_forward (p->gpu, SHOAL_PHASE_TEST);
  g_assert_cmpfloat_with_epsilon (lg, lc, 1e-4 * MAX (1.0, fabs (lc)));
}

static void
compare_conf (const char *text, double rtol)
{
  Pair p = pair_new (text);
  compare_step (&p, rtol);
  /* a second step: uploads, zeroed device gradients and set-up state reused */
  compare_step (&p, rtol);
  pair_free (&p);
}

/* ---- gradient check of the GPU path ------------------------------------ */

static double
gpu_loss (ShoalNet *net)
{
  double l = shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  g_assert_true (isfinite (l));
  return l;
}

static gboolean
fd_agrees (double analytic, double lp, double lm, double l0, double eps, int *checked)
{
  double numeric = (lp - lm) / (2 * eps);
  double right = (lp - l0) / eps, left = (l0 - lm) / eps;
  /* a kink (ReLU at 0, a max-pool tie) inside the step: skip */
  if (fabs (right - left) > 5e-2 * MAX (1.0, MAX (fabs (right), fabs (left))))
    return TRUE;
  (*checked)++;
  return fabs (analytic - numeric) <= 2e-3 + 2e-2 * MAX (fabs (analytic), fabs (numeric));
}

/* Finite differences of the GPU net's loss against its backward, for up
 * to `per` elements of every param and of every feed with need_grad. */
static void
gpu_gradcheck (const char *text, int per)
{
  if (!have_gpu ())
    return;
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data (text, "gpu.conf", &error);
  g_assert_no_error (error);
  ShoalNetOptions opts = { .seed = SEED, .shard_count = 1, .device = GPU0 };
  ShoalNet *net = shoal_net_new (conf, &opts, &error);
  g_assert_no_error (error);
  ShoalParamStore *store = shoal_net_params (net);
  shoal_param_store_init_values (store, SEED);
  shoal_param_store_zero_grads (store);
  const double eps = 1e-2;
  double l0 = gpu_loss (net);
  shoal_net_backward (net);
  float *analytic = g_memdup2 (store->grads, store->total * sizeof (float));
  int checked = 0, bad = 0;

  for (guint i = 0; i < store->params->len; i++)
    {
      ShoalParam *prm = g_ptr_array_index (store->params, i);
      if (prm->lr_scale == 0)
        continue;  /* running statistics: no gradient */
      size_t step = MAX ((size_t) 1, prm->count / (size_t) per);
      for (size_t j = 0; j < prm->count; j += step)
        {
          float *v = store->values + prm->offset + j, keep = *v;
          *v = keep + (float) eps;
          double lp = gpu_loss (net);
          *v = keep - (float) eps;
          double lm = gpu_loss (net);
          *v = keep;
          if (!fd_agrees (analytic[prm->offset + j], lp, lm, l0, eps, &checked))
            {
              g_test_message ("%s[%zu]: backward %g, finite difference %g", prm->name, j,
                              analytic[prm->offset + j], (lp - lm) / (2 * eps));
              bad++;
            }
        }
    }
  for (guint i = 0; i < shoal_net_n_layers (net); i++)
    {
      ShoalLayer *in = shoal_net_layer (net, i);
      if (strcmp (in->ops->type, "feed") != 0 || in->grad.data == NULL)
        continue;
      float *x = download (&in->out), *dx = download (&in->grad);
      size_t n = shoal_tensor_count (&in->out), step = MAX ((size_t) 1, n / (size_t) per);
      for (size_t j = 0; j < n; j += step)
        {
          float keep = x[j];
          x[j] = keep + (float) eps;
          g_assert_true (shoal_tensor_upload (&in->out, x, &error));
          double lp = gpu_loss (net);
          x[j] = keep - (float) eps;
          g_assert_true (shoal_tensor_upload (&in->out, x, &error));
          double lm = gpu_loss (net);
          x[j] = keep;
          g_assert_true (shoal_tensor_upload (&in->out, x, &error));
          if (!fd_agrees (dx[j], lp, lm, l0, eps, &checked))
            {
              g_test_message ("%s input[%zu]: backward %g, finite difference %g", in->name, j, dx[j],
                              (lp - lm) / (2 * eps));
              bad++;
            }
        }
      g_free (x);
      g_free (dx);
    }
  g_assert_cmpint (checked, >, 0);
  if (bad > 0)
    g_test_fail ();
  g_free (analytic);
  shoal_net_free (net);
  shoal_conf_free (conf);
}

/* ---- layers --------------------------------------------------------------- */

#define TARGET(shape, src) \
  "[layer target]\ntype = feed\nshape = " shape "\n" \
  "[layer loss]\ntype = euclidean_loss\nsrc = " src ", target\n"

static void
test_dense (void)
{
  if (!have_gpu ())
    return;
  compare_conf ("[layer x]\ntype = feed\nshape = 8,13\nneed_grad = true\n"
                "[layer fc]\ntype = dense\nsrc = x\nnum_output = 7\n" TARGET ("8,7", "fc"), 1e-4);
  compare_conf ("[layer x]\ntype = feed\nshape = 5,2,3,4\nneed_grad = true\n"
                "[layer fc]\ntype = dense\nsrc = x\nnum_output = 9\nbias = false\n" TARGET ("5,9", "fc"), 1e-4);
  gpu_gradcheck ("[layer x]\ntype = feed\nshape = 4,6\nneed_grad = true\n"
                 "[layer fc]\ntype = dense\nsrc = x\nnum_output = 3\n" TARGET ("4,3", "fc"), 10);
  /* a target that needs a gradient too: euclidean_loss writes -w (a - b) there */
  compare_conf ("[layer x]\ntype = feed\nshape = 8,13\nneed_grad = true\n"
                "[layer fc]\ntype = dense\nsrc = x\nnum_output = 7\n"
                "[layer target]\ntype = feed\nshape = 8,7\nneed_grad = true\n"
                "[layer loss]\ntype = euclidean_loss\nsrc = fc, target\n", 1e-4);
}

static void
test_conv (void)
{
  if (!have_gpu ())
    return;
  compare_conf ("[layer x]\ntype = feed\nshape = 4,3,9,9\nneed_grad = true\n"
                "[layer conv]\ntype = conv\nsrc = x\nnum_filters = 5\nkernel = 3\nstride = 2\npad = 1\n"
                TARGET ("4,5,5,5", "conv"), 1e-3);
  compare_conf ("[layer x]\ntype = feed\nshape = 3,2,7,6\nneed_grad = true\n"
                "[layer conv]\ntype = conv\nsrc = x\nnum_filters = 4\nkernel_h = 3\nkernel_w = 2\nbias = false\n"
                TARGET ("3,4,5,5", "conv"), 1e-3);
  gpu_gradcheck ("[layer x]\ntype = feed\nshape = 2,2,5,5\nneed_grad = true\n"
                 "[layer conv]\ntype = conv\nsrc = x\nnum_filters = 3\nkernel = 3\npad = 1\n"
                 TARGET ("2,3,5,5", "conv"), 12);
}

static void
test_pooling (void)
{
  if (!have_gpu ())
    return;
  compare_conf ("[layer x]\ntype = feed\nshape = 4,3,8,8\nneed_grad = true\n"
                "[layer pool]\ntype = pooling\nsrc = x\nkernel = 2\n" TARGET ("4,3,4,4", "pool"), 1e-5);
  compare_conf ("[layer x]\ntype = feed\nshape = 4,3,8,8\nneed_grad = true\n"
                "[layer pool]\ntype = pooling\nsrc = x\nkernel = 3\nstride = 2\npad = 1\n"
                TARGET ("4,3,4,4", "pool"), 1e-5);
  compare_conf ("[layer x]\ntype = feed\nshape = 4,3,8,8\nneed_grad = true\n"
                "[layer pool]\ntype = pooling\nsrc = x\npool = avg\nkernel = 3\nstride = 2\npad = 1\n"
                TARGET ("4,3,4,4", "pool"), 1e-5);
  compare_conf ("[layer x]\ntype = feed\nshape = 4,3,8,8\nneed_grad = true\n"
                "[layer pool]\ntype = pooling\nsrc = x\npool = avg\nkernel = 3\nstride = 2\npad = 1\n"
                "exclude_pad = true\n" TARGET ("4,3,4,4", "pool"), 1e-5);
  gpu_gradcheck ("[layer x]\ntype = feed\nshape = 2,2,6,6\nneed_grad = true\n"
                 "[layer pool]\ntype = pooling\nsrc = x\nkernel = 2\n" TARGET ("2,2,3,3", "pool"), 20);
}

static void
test_lrn (void)
{
  if (!have_gpu ())
    return;
  compare_conf ("[layer x]\ntype = feed\nshape = 4,7,5,5\nneed_grad = true\n"
                "[layer lrn]\ntype = lrn\nsrc = x\nlocal_size = 5\nalpha = 0.5\n" TARGET ("4,7,5,5", "lrn"),
                1e-4);
  compare_conf ("[layer x]\ntype = feed\nshape = 6,9\nneed_grad = true\n"
                "[layer lrn]\ntype = lrn\nsrc = x\nlocal_size = 3\nalpha = 1\nbeta = 0.6\nk = 2\n"
                TARGET ("6,9", "lrn"), 1e-4);
  gpu_gradcheck ("[layer x]\ntype = feed\nshape = 2,5,2,2\nneed_grad = true\n"
                 "[layer lrn]\ntype = lrn\nsrc = x\nlocal_size = 3\nalpha = 0.5\n" TARGET ("2,5,2,2", "lrn"), 20);
}

static void
test_activations (void)
{
  if (!have_gpu ())
    return;
  const char *types[] = { "relu", "sigmoid", "tanh", "stanh" };
  for (guint i = 0; i < G_N_ELEMENTS (types); i++)
    {
      char *text = g_strdup_printf ("[layer x]\ntype = feed\nshape = 6,20\nneed_grad = true\n"
                                    "[layer act]\ntype = %s\nsrc = x\n" TARGET ("6,20", "act"), types[i]);
      compare_conf (text, 1e-5);
      gpu_gradcheck (text, 15);
      g_free (text);
    }
  compare_conf ("[layer x]\ntype = feed\nshape = 6,20\nneed_grad = true\n"
                "[layer act]\ntype = relu\nsrc = x\nnegative_slope = 0.1\n" TARGET ("6,20", "act"), 1e-6);
  /* more elements than one pass of a grid-stride kernel (4096 blocks of
   * 256): leaky ReLU, the loss's difference, sum and gradient loop */
  compare_conf ("[layer x]\ntype = feed\nshape = 4,300007\nneed_grad = true\n"
                "[layer act]\ntype = relu\nsrc = x\nnegative_slope = 0.1\n" TARGET ("4,300007", "act"), 1e-6);
}

/* Data with a large mean and a spread per channel, the same on both nets. */
static void
shift_feed (Pair *p, const char *name, int channels, size_t inner)
{
  ShoalLayer *c = shoal_net_find (p->cpu, name), *g = shoal_net_find (p->gpu, name);
  size_t n = shoal_tensor_count (&c->out);
  for (size_t i = 0; i < n; i++)
    c->out.data[i] = 3.0f * c->out.data[i] + 10.0f + (float) ((i / inner) % (size_t) channels);
  GError *error = NULL;
  g_assert_true (shoal_tensor_upload (&g->out, c->out.data, &error));
}

static void
check_batchnorm (const char *shape, const char *target, int channels, size_t inner)
{
  char *text = g_strdup_printf ("[layer x]\ntype = feed\nshape = %s\nneed_grad = true\n"
                                "[layer bn]\ntype = batchnorm\nsrc = x\nmomentum = 0.8\n"
                                "[layer target]\ntype = feed\nshape = %s\n"
                                "[layer loss]\ntype = euclidean_loss\nsrc = bn, target\n", shape, target);
  Pair p = pair_new (text);
  shift_feed (&p, "x", channels, inner);
  /* the running statistics (params mean, var) move on both, compared with the values */
  compare_step (&p, 1e-3);
  compare_step (&p, 1e-3);
  compare_test_forward (&p);
  compare_layers (&p, FALSE, 1e-3);
  pair_free (&p);
  gpu_gradcheck (text, 8);
  g_free (text);
}

static void
test_batchnorm (void)
{
  if (!have_gpu ())
    return;
  check_batchnorm ("8,3,5,5", "8,3,5,5", 3, 25);
  check_batchnorm ("16,6", "16,6", 6, 1);
}

static void
test_softmax_accuracy (void)
{
  if (!have_gpu ())
    return;
  const char *text =
    "[layer logits]\ntype = feed\nshape = 16,10\nneed_grad = true\n"
    "[layer labels]\ntype = feed\nshape = 16,1\nnum_classes = 10\n"
    "[layer loss]\ntype = softmax_loss\nsrc = logits, labels\n"
    "[layer top1]\ntype = accuracy\nsrc = logits, labels\n"
    "[layer top3]\ntype = accuracy\nsrc = logits, labels\ntop_k = 3\n";
  compare_conf (text, 1e-5);
  gpu_gradcheck (text, 40);

  /* large logits: the log-softmax stays finite where p_y underflows */
  Pair p = pair_new (text);
  ShoalLayer *c = shoal_net_find (p.cpu, "logits"), *g = shoal_net_find (p.gpu, "logits");
  for (size_t i = 0; i < shoal_tensor_count (&c->out); i++)
    c->out.data[i] *= 300.0f;
  GError *error = NULL;
  g_assert_true (shoal_tensor_upload (&g->out, c->out.data, &error));
  compare_step (&p, 1e-4);
  pair_free (&p);
}

static void
test_split_concat (void)
{
  if (!have_gpu ())
    return;
  /* x feeds two layers: the net inserts a split whose backward sums */
  compare_conf ("[layer x]\ntype = feed\nshape = 6,8\nneed_grad = true\n"
                "[layer a]\ntype = dense\nsrc = x\nnum_output = 4\n"
                "[layer b]\ntype = dense\nsrc = x\nnum_output = 5\n"
                "[layer ab]\ntype = concat\nsrc = a, b\naxis = 1\n" TARGET ("6,9", "ab"), 1e-4);
  compare_conf ("[layer x]\ntype = feed\nshape = 3,2,4,4\nneed_grad = true\n"
                "[layer y]\ntype = feed\nshape = 5,2,4,4\nneed_grad = true\n"
                "[layer xy]\ntype = concat\nsrc = x, y\naxis = 0\n" TARGET ("8,2,4,4", "xy"), 1e-6);
  compare_conf ("[layer x]\ntype = feed\nshape = 3,2,4,4\nneed_grad = true\n"
                "[layer y]\ntype = feed\nshape = 3,5,4,4\nneed_grad = true\n"
                "[layer xy]\ntype = concat\nsrc = x, y\naxis = 1\n" TARGET ("3,7,4,4", "xy"), 1e-6);
  /* labels stacked along rows reach the loss */
  compare_conf ("[layer x]\ntype = feed\nshape = 3,6\nneed_grad = true\nnum_classes = 6\n"
                "[layer y]\ntype = feed\nshape = 4,6\nneed_grad = true\nnum_classes = 6\n"
                "[layer xy]\ntype = concat\nsrc = x, y\naxis = 0\n"
                "[layer loss]\ntype = softmax_loss\nsrc = xy, xy\n", 1e-5);
}

static void
test_dropout (void)
{
  if (!have_gpu ())
    return;
  compare_conf ("[layer x]\ntype = feed\nshape = 6,20\nneed_grad = true\n"
                "[layer drop]\ntype = dropout\nsrc = x\nratio = 0\n" TARGET ("6,20", "drop"), 1e-6);

  /* ratio 0.5: each unit is 0 or 2x, about half are kept, backward uses the same mask */
  const char *text = "[layer x]\ntype = feed\nshape = 40,500\nneed_grad = true\n"
                     "[layer drop]\ntype = dropout\nsrc = x\nratio = 0.5\n" TARGET ("40,500", "drop");
  Pair p = pair_new (text);
  GError *error = NULL;
  ShoalLayer *x = shoal_net_find (p.gpu, "x"), *drop = shoal_net_find (p.gpu, "drop");
  float *first = NULL;
  for (int pass = 0; pass < 2; pass++)
    {
      shoal_param_store_zero_grads (shoal_net_params (p.gpu));
      shoal_net_forward (p.gpu, SHOAL_PHASE_TRAIN);
      shoal_net_backward (p.gpu);
      g_assert_true (shoal_net_device_error (p.gpu, &error));
      float *hx = download (&x->out), *hy = download (&drop->out), *dx = download (&x->grad),
            *dy = download (&drop->grad);
      size_t n = shoal_tensor_count (&drop->out), kept = 0;
      for (size_t i = 0; i < n; i++)
        {
          gboolean k = hy[i] != 0.0f;
          kept += k;
          g_assert_cmpfloat_with_epsilon (hy[i], k ? 2.0f * hx[i] : 0.0f, 1e-6);
          g_assert_cmpfloat_with_epsilon (dx[i], k ? 2.0f * dy[i] : 0.0f, 1e-6);
        }
      g_assert_cmpfloat (fabs ((double) kept / n - 0.5), <, 0.02);
      if (pass == 0)
        first = hy;
      else
        {
          /* a fresh mask every step */
          g_assert_true (memcmp (first, hy, n * sizeof (float)) != 0);
          g_free (hy);
        }
      g_free (hx);
      g_free (dx);
      g_free (dy);
    }
  g_free (first);
  /* test phase: the identity */
  shoal_net_forward (p.gpu, SHOAL_PHASE_TEST);
  float *hx = download (&x->out), *hy = download (&drop->out);
  assert_close ("dropout test phase", hx, hy, shoal_tensor_count (&x->out), 0, 0);
  g_free (hx);
  g_free (hy);
  pair_free (&p);
}

/* A type without a GPU path fails the set-up, naming the layer. */
static void
test_no_gpu_path (void)
{
  if (!have_real_gpu ())
    return;
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data ("[layer x]\ntype = feed\nshape = 4,6\n"
                                          "[layer half]\ntype = slice\nsrc = x\nparts = 2\n",
                                          "gpu.conf", &error);
  g_assert_no_error (error);
  ShoalNetOptions opts = { .seed = SEED, .shard_count = 1, .device = shoal_device_cuda (0) };
  ShoalNet *net = shoal_net_new (conf, &opts, &error);
  g_assert_null (net);
  g_assert_nonnull (error);
  g_assert_nonnull (strstr (error->message, "layer 'half' (type slice) has no GPU path"));
  g_error_free (error);
  shoal_conf_free (conf);
}

/* The caller uploads params itself: the next forward sees them. */
static void
test_manual_upload (void)
{
  if (!have_real_gpu ())
    return;
  Pair p = pair_new ("[layer x]\ntype = feed\nshape = 8,13\n"
                     "[layer fc]\ntype = dense\nsrc = x\nnum_output = 7\n" TARGET ("8,7", "fc"));
  shoal_net_set_param_upload (p.gpu, FALSE);
  ShoalParamStore *cs = shoal_net_params (p.cpu), *gs = shoal_net_params (p.gpu);
  shoal_net_upload_params (p.gpu, 0, gs->total);
  double lc = shoal_net_forward (p.cpu, SHOAL_PHASE_TRAIN);
  g_assert_cmpfloat_with_epsilon (shoal_net_forward (p.gpu, SHOAL_PHASE_TRAIN), lc, 1e-4 * MAX (1, fabs (lc)));
  for (size_t i = 0; i < cs->total; i++)
    {
      cs->values[i] *= 0.5f;
      gs->values[i] *= 0.5f;
    }
  /* not uploaded: the device still has the old values */
  double stale = shoal_net_forward (p.gpu, SHOAL_PHASE_TRAIN);
  g_assert_cmpfloat_with_epsilon (stale, lc, 1e-4 * MAX (1, fabs (lc)));
  shoal_net_upload_params (p.gpu, 0, gs->total);
  lc = shoal_net_forward (p.cpu, SHOAL_PHASE_TRAIN);
  g_assert_cmpfloat_with_epsilon (shoal_net_forward (p.gpu, SHOAL_PHASE_TRAIN), lc, 1e-4 * MAX (1, fabs (lc)));
  g_assert_cmpfloat (fabs (stale - lc), >, 1e-3);
  pair_free (&p);
}

/* Backward hands layers to `ready` only once their gradients are in the
 * host store, in the CPU's order. */
typedef struct {
  ShoalParamStore *store;
  GPtrArray *order;
  gboolean complete;
} ReadyLog;

static void
on_ready (ShoalLayer *layer, gpointer data)
{
  ReadyLog *log = data;
  size_t b, e;
  g_assert_true (shoal_layer_param_range (layer, &b, &e));
  gboolean nonzero = FALSE;
  for (size_t i = b; i < e; i++)
    nonzero |= log->store->grads[i] != 0.0f;
  log->complete &= nonzero;
  g_ptr_array_add (log->order, layer->name);
}

static void
test_backward_notify (void)
{
  if (!have_gpu ())
    return;
  Pair p = pair_new ("[layer x]\ntype = feed\nshape = 8,13\n"
                     "[layer fc1]\ntype = dense\nsrc = x\nnum_output = 16\n"
                     "[layer act]\ntype = tanh\nsrc = fc1\n"
                     "[layer fc2]\ntype = dense\nsrc = act\nnum_output = 7\n" TARGET ("8,7", "fc2"));
  ReadyLog lc = { shoal_net_params (p.cpu), g_ptr_array_new (), TRUE };
  ReadyLog lg = { shoal_net_params (p.gpu), g_ptr_array_new (), TRUE };
  shoal_net_forward (p.cpu, SHOAL_PHASE_TRAIN);
  shoal_net_forward (p.gpu, SHOAL_PHASE_TRAIN);
  shoal_net_backward_notify (p.cpu, on_ready, &lc);
  shoal_net_backward_notify (p.gpu, on_ready, &lg);
  g_assert_true (lg.complete);
  g_assert_cmpuint (lg.order->len, ==, 2);
  for (guint i = 0; i < lc.order->len; i++)
    g_assert_cmpstr (g_ptr_array_index (lc.order, i), ==, g_ptr_array_index (lg.order, i));
  compare_params (&p, 1e-4);
  /* gradients add up over backward passes, on the host as on the CPU */
  shoal_net_forward (p.cpu, SHOAL_PHASE_TRAIN);
  shoal_net_forward (p.gpu, SHOAL_PHASE_TRAIN);
  shoal_net_backward (p.cpu);
  shoal_net_backward (p.gpu);
  compare_params (&p, 1e-4);
  g_ptr_array_free (lc.order, TRUE);
  g_ptr_array_free (lg.order, TRUE);
  pair_free (&p);
}

/* Layers whose GPU path is one of our kernels (stanh, leaky ReLU) below
 * layers with params: backward polls each param layer's gradient copy
 * (cudaEventQuery, usually not ready yet) and then launches the kernel,
 * whose launch status must not be that poll's cudaErrorNotReady. */
static void
test_kernels_below_params (void)
{
  if (!have_gpu ())
    return;
  const char *text = "[layer x]\ntype = feed\nshape = 64,96\nneed_grad = true\n"
                     "[layer fc1]\ntype = dense\nsrc = x\nnum_output = 256\n"
                     "[layer st]\ntype = stanh\nsrc = fc1\n"
                     "[layer fc2]\ntype = dense\nsrc = st\nnum_output = 256\n"
                     "[layer leaky]\ntype = relu\nsrc = fc2\nnegative_slope = 0.1\n"
                     "[layer fc3]\ntype = dense\nsrc = leaky\nnum_output = 10\n" TARGET ("64,10", "fc3");
  Pair p = pair_new (text);
  for (int step = 0; step < 5; step++)
    compare_step (&p, 1e-4);
  pair_free (&p);
}

/* A batch with fewer rows than at set-up (the last batch), in train
 * forward and backward, then the full batch again: every descriptor,
 * workspace and vector of ones that depends on the rows is set again. */
static void
set_feed_rows (Pair *p, const char *name, int rows)
{
  ShoalLayer *c = shoal_net_find (p->cpu, name), *g = shoal_net_find (p->gpu, name);
  shoal_tensor_set_rows (&c->out, rows);
  shoal_tensor_set_rows (&g->out, rows);
  if (c->label.data != NULL)
    {
      shoal_tensor_set_rows (&c->label, rows);
      shoal_tensor_set_rows (&g->label, rows);
    }
}

static void
test_short_batch (void)
{
  if (!have_gpu ())
    return;
  Pair p = pair_new ("[layer x]\ntype = feed\nshape = 16,2,10,10\nneed_grad = true\n"
                     "[layer labels]\ntype = feed\nshape = 16,1\nnum_classes = 5\n"
                     "[layer conv]\ntype = conv\nsrc = x\nnum_filters = 6\nkernel = 3\npad = 1\n"
                     "[layer bn]\ntype = batchnorm\nsrc = conv\n"
                     "[layer relu]\ntype = relu\nsrc = bn\n"
                     "[layer pool]\ntype = pooling\nsrc = relu\nkernel = 2\n"
                     "[layer lrn]\ntype = lrn\nsrc = pool\nlocal_size = 3\n"
                     "[layer fc]\ntype = dense\nsrc = lrn\nnum_output = 5\n"
                     "[layer loss]\ntype = softmax_loss\nsrc = fc, labels\n"
                     "[layer acc]\ntype = accuracy\nsrc = fc, labels\n");
  compare_step (&p, 1e-3);
  set_feed_rows (&p, "x", 5);
  set_feed_rows (&p, "labels", 5);
  compare_step (&p, 1e-3);
  g_assert_cmpint (shoal_net_batch_rows (p.gpu), ==, 5);
  set_feed_rows (&p, "x", 16);
  set_feed_rows (&p, "labels", 16);
  compare_step (&p, 1e-3);
  pair_free (&p);
}

/* ---- end to end ----------------------------------------------------------- */

static void
sgd (ShoalParamStore *s, float lr)
{
  for (size_t i = 0; i < s->total; i++)
    s->values[i] -= lr * s->grads[i];
  shoal_param_store_zero_grads (s);
}

/* Steps of SGD on one fixed batch in lockstep on both nets: the losses
 * agree step by step and fall on the GPU. */
static void
train_lockstep (Pair *p, int steps, float lr, double rtol)
{
  ShoalParamStore *cs = shoal_net_params (p->cpu), *gs = shoal_net_params (p->gpu);
  shoal_param_store_zero_grads (cs);
  shoal_param_store_zero_grads (gs);
  double first = 0, last = 0;
  for (int step = 0; step < steps; step++)
    {
      double lc = shoal_net_forward (p->cpu, SHOAL_PHASE_TRAIN);
      double lg = shoal_net_forward (p->gpu, SHOAL_PHASE_TRAIN);
      if (!(fabs (lg - lc) <= rtol * MAX (1.0, fabs (lc))))
        {
          g_test_message ("step %d: cpu loss %.7g, gpu loss %.7g", step, lc, lg);
          g_test_fail ();
        }
      if (step == 0)
        first = lg;
      last = lg;
      shoal_net_backward (p->cpu);
      shoal_net_backward (p->gpu);
      sgd (cs, lr);
      sgd (gs, lr);
    }
  g_test_message ("GPU loss %.4f -> %.4f over %d steps", first, last, steps);
  g_assert_cmpfloat (last, <, 0.7 * first);
  compare_params (p, 100 * rtol);
}

#define MLP \
  "[layer x]\ntype = feed\nshape = 32,20\n" \
  "[layer labels]\ntype = feed\nshape = 32,1\nnum_classes = 4\n" \
  "[layer fc1]\ntype = dense\nsrc = x\nnum_output = 64\n" \
  "[layer act]\ntype = relu\nsrc = fc1\n" \
  "[layer fc2]\ntype = dense\nsrc = act\nnum_output = 4\n" \
  "[layer loss]\ntype = softmax_loss\nsrc = fc2, labels\n" \
  "[layer acc]\ntype = accuracy\nsrc = fc2, labels\n"

static void
test_train_mlp (void)
{
  if (!have_gpu ())
    return;
  Pair p = pair_new (MLP);
  train_lockstep (&p, 30, 0.2f, 1e-4);
  pair_free (&p);
}

static void
test_train_cnn (void)
{
  if (!have_gpu ())
    return;
  Pair p = pair_new ("[layer x]\ntype = feed\nshape = 16,1,12,12\n"
                     "[layer labels]\ntype = feed\nshape = 16,1\nnum_classes = 3\n"
                     "[layer conv1]\ntype = conv\nsrc = x\nnum_filters = 6\nkernel = 3\npad = 1\n"
                     "[layer bn1]\ntype = batchnorm\nsrc = conv1\n"
                     "[layer relu1]\ntype = relu\nsrc = bn1\n"
                     "[layer pool1]\ntype = pooling\nsrc = relu1\nkernel = 2\n"
                     "[layer norm1]\ntype = lrn\nsrc = pool1\nlocal_size = 3\n"
                     "[layer conv2]\ntype = conv\nsrc = norm1\nnum_filters = 8\nkernel = 3\n"
                     "[layer pool2]\ntype = pooling\nsrc = conv2\npool = avg\nkernel = 2\n"
                     "[layer drop]\ntype = dropout\nsrc = pool2\nratio = 0\n"
                     "[layer fc]\ntype = dense\nsrc = drop\nnum_output = 3\n"
                     "[layer loss]\ntype = softmax_loss\nsrc = fc, labels\n"
                     "[layer acc]\ntype = accuracy\nsrc = fc, labels\n");
  train_lockstep (&p, 40, 0.1f, 2e-3);
  pair_free (&p);
}

/* A second GPU, when there is one. */
static void
test_second_gpu (void)
{
  if (!have_gpu ())
    return;
  if (shoal_device_count () < 2)
    {
      g_test_skip ("one CUDA device");
      return;
    }
  Pair p = pair_new_on (MLP, shoal_device_cuda (1));
  train_lockstep (&p, 10, 0.2f, 1e-4);
  pair_free (&p);
}

/* lmdb_input uploads every batch (the prefetch thread's buffers), the
 * last test batch is short, and both nets read the same records. */
static void
test_lmdb_input (void)
{
  if (!have_gpu ())
    return;
  char *dir = g_dir_make_tmp ("shoal-gpu-XXXXXX", NULL);
  g_assert_nonnull (dir);
  const char *names[] = { "train", "test" };
  const int counts[] = { 40, 20 };
  for (int d = 0; d < 2; d++)
    {
      char *path = g_build_filename (dir, names[d], NULL);
      GError *error = NULL;
      ShoalDatasetWriter *wr = shoal_dataset_writer_new_full (path, 64 << 10, 64, &error);
      g_assert_no_error (error);
      guint8 px[36];
      ShoalRecordView rec = { .shape = shoal_shape_make (3, 1, 6, 6), .kind = SHOAL_RECORD_PIXELS, .pixels = px };
      for (int i = 0; i < counts[d]; i++)
        {
          for (int j = 0; j < 36; j++)
            px[j] = (guint8) ((i * 37 + j * 11 + d) & 0xff);
          rec.label = i % 3;
          g_assert_true (shoal_dataset_writer_put_record (wr, &rec, &error));
        }
      g_assert_true (shoal_dataset_writer_finish (wr, &error));
      g_assert_no_error (error);
      shoal_dataset_writer_free (wr);
      g_free (path);
    }
  char *text = g_strdup_printf ("[layer data]\ntype = lmdb_input\ntrain = %s/train\ntest = %s/test\n"
                                "batch_size = 8\n"
                                "[layer conv]\ntype = conv\nsrc = data\nnum_filters = 4\nkernel = 3\n"
                                "[layer pool]\ntype = pooling\nsrc = conv\nkernel = 2\n"
                                "[layer fc]\ntype = dense\nsrc = pool\nnum_output = 3\n"
                                "[layer loss]\ntype = softmax_loss\nsrc = fc, data\n"
                                "[layer acc]\ntype = accuracy\nsrc = fc, data\n", dir, dir);
  Pair p = pair_new (text);
  for (int step = 0; step < 6; step++)
    compare_step (&p, 1e-3);
  /* 20 test records in batches of 8: 8, 8, 4 */
  for (int b = 0; b < 3; b++)
    {
      compare_test_forward (&p);
      g_assert_cmpint (shoal_net_batch_rows (p.gpu), ==, b < 2 ? 8 : 4);
      compare_layers (&p, FALSE, 1e-3);
    }
  pair_free (&p);
  g_free (text);
  g_assert_true (shoal_test_remove_tree (dir));
  g_free (dir);
}

/* ---- everywhere ------------------------------------------------------------ */

/* Without a usable GPU, asking for one fails with a message saying why. */
static void
test_gpu_request_without_gpu (void)
{
  if (shoal_device_count () > 0)
    {
      g_test_skip ("this machine has a CUDA device");
      return;
    }
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data ("[layer x]\ntype = feed\nshape = 4,6\n", "gpu.conf", &error);
  g_assert_no_error (error);
  ShoalNetOptions opts = { .shard_count = 1, .device = shoal_device_cuda (0) };
  ShoalNet *net = shoal_net_new (conf, &opts, &error);
  g_assert_null (net);
  g_assert_nonnull (error);
  g_test_message ("%s", error->message);
  g_assert_true (g_str_has_prefix (error->message, "gpu.conf: cuda:0 was asked for, but "));
  if (shoal_device_cuda_built ())
    g_assert_nonnull (strstr (error->message, "no CUDA device"));
  else
    g_assert_nonnull (strstr (error->message, "built without CUDA (rebuild with make CUDA=1)"));
  g_error_free (error);
  shoal_conf_free (conf);
}

/* A partitioned group (k > 1 in one process) stays on the CPU. */
static void
test_partitioned_group_refused (void)
{
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data ("[layer x]\ntype = feed\nshape = 4,6\n", "gpu.conf", &error);
  g_assert_no_error (error);
  ShoalNetOptions opts = { .shard_count = 1, .group = 1, .device = shoal_device_cuda (0) };
  ShoalGroupNet *g = shoal_group_net_new (conf, 2, &opts, &error);
  g_assert_null (g);
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_UNSUPPORTED);
  g_assert_nonnull (strstr (error->message, "group 1 of 2 workers in one process cannot run on cuda:0"));
  g_error_free (error);
  shoal_conf_free (conf);
}

/* The device interface on the CPU: allocation, copies, views. */
static void
test_cpu_device (void)
{
  ShoalDevice cpu = { SHOAL_DEVICE_CPU, 0 };
  GError *error = NULL;
  g_assert_true (shoal_device_check (cpu, &error));
  char *s = shoal_device_to_string (cpu);
  g_assert_cmpstr (s, ==, "cpu");
  g_free (s);
  s = shoal_device_to_string (shoal_device_cuda (3));
  g_assert_cmpstr (s, ==, "cuda:3");
  g_free (s);

  ShoalTensor t = { 0 };
  ShoalShape shape = shoal_shape_make (2, 3, 5);
  g_assert_true (shoal_tensor_alloc_on (&t, &shape, cpu, &error));
  g_assert_true (t.owns_data && t.device.kind == SHOAL_DEVICE_CPU);
  for (size_t i = 0; i < 15; i++)
    g_assert_cmpfloat (t.data[i], ==, 0.0f);
  float in[15], out[15];
  for (int i = 0; i < 15; i++)
    in[i] = (float) i * 0.5f;
  g_assert_true (shoal_tensor_upload (&t, in, &error));
  g_assert_true (shoal_tensor_download (&t, out, &error));
  g_assert_cmpmem (in, sizeof in, out, sizeof out);
  ShoalTensor v = { 0 };
  shoal_tensor_view_on (&v, t.data + 5, &shape, cpu);
  g_assert_false (v.owns_data);
  shoal_tensor_clear (&v);
  shoal_tensor_clear (&t);
  g_assert_null (t.data);

  float *host = shoal_device_host_alloc (cpu, 100, &error);
  g_assert_nonnull (host);
  shoal_device_host_free (cpu, host);
}

/* ---- the recurrent and RBM families ------------------------------------- */

/* gru and lstm through cuDNN against recurrent.c: two levels, stateful
 * (the second step starts from the carried states, which the restart
 * source zeroes for one row), per-step dense and softmax. */
static void
test_recurrent (void)
{
  if (!have_gpu ())
    return;
  const char *types[] = { "gru", "lstm" };
  for (int i = 0; i < 2; i++)
    {
      char *text = g_strdup_printf ("[layer x]\ntype = feed\nshape = 5,7,6\nneed_grad = true\nnum_classes = 9\n"
                                    "label_steps = 7\n"
                                    "[layer m]\ntype = feed\nshape = 5,1\n"
                                    "[layer r]\ntype = %s\nsrc = x, m\nhidden_size = 8\nnum_layers = 2\n"
                                    "[layer fc]\ntype = dense\nsrc = r\nnum_output = 9\naxis = 2\n"
                                    "[layer loss]\ntype = softmax_loss\nsrc = fc, x\n"
                                    "[layer acc]\ntype = accuracy\nsrc = fc, x\n", types[i]);
      Pair p = pair_new (text);
      GError *error = NULL;
      ShoalLayer *mc = shoal_net_find (p.cpu, "m"), *mg = shoal_net_find (p.gpu, "m");
      for (int r = 0; r < 5; r++)
        mc->out.data[r] = r == 2 ? -1.0f : 1.0f;  /* row 2 restarts every batch */
      g_assert_true (shoal_tensor_upload (&mg->out, mc->out.data, &error));
      compare_step (&p, 1e-4);
      compare_step (&p, 1e-4);
      /* the carried states agree too (the GPU keeps them on the host) */
      ShoalLayer *rc = shoal_net_find (p.cpu, "r"), *rg = shoal_net_find (p.gpu, "r");
      ShoalRecurrentPriv *pc = rc->priv, *pg = rg->priv;
      size_t hn = (size_t) pc->levels * pc->cap * pc->hidden;
      assert_close ("carried h", pc->state_h[0], pg->state_h[0], hn, 1e-4, 1e-6);
      if (pc->cell->has_cell)
        assert_close ("carried c", pc->state_c[0], pg->state_c[0], hn, 1e-4, 1e-6);
      pair_free (&p);
      /* finite differences need the same initial states every forward */
      gchar **parts = g_strsplit (text, "[layer fc]", 2);
      char *stateless = g_strdup_printf ("%sstateful = false\n[layer fc]%s", parts[0], parts[1]);
      g_strfreev (parts);
      gpu_gradcheck (stateless, 20);
      g_free (stateless);
      g_free (text);
    }
}

/* text_input leaves its output to the net, which put it on the device:
 * the CPU forward must still write into host memory (the first char-RNN
 * on a GPU crashed there).  Both nets read the same sequences in order,
 * through embedding and a GRU, train and test. */
static void
test_text_input (void)
{
  if (!have_gpu ())
    return;
  GError *error = NULL;
  char *dir = g_dir_make_tmp ("shoal-gpu-text-XXXXXX", NULL);
  g_assert_nonnull (dir);
  char *file = g_build_filename (dir, "corpus.txt", NULL);
  GString *corpus = g_string_new (NULL);
  for (int i = 0; i < 60; i++)
    g_string_append_printf (corpus, "line %d: the quick brown fox jumps over the lazy dog\n", i);
  g_assert_true (g_file_set_contents (file, corpus->str, (gssize) corpus->len, &error));
  g_string_free (corpus, TRUE);
  char *data = g_build_filename (dir, "data", NULL);
  const char *files[] = { file, NULL };
  ShoalTextStats stats;
  g_assert_true (shoal_import_text (files, data, 12, 0.2, FALSE, NULL, NULL, &stats, &error));
  g_assert_no_error (error);
  char *text = g_strdup_printf ("[layer data]\ntype = text_input\ndata = %s\nbatch_size = 4\n"
                                "[layer embed]\ntype = embedding\nsrc = data\nvocab_size = %d\n"
                                "embedding_dim = 6\n"
                                "[layer r]\ntype = gru\nsrc = embed, data\nhidden_size = 8\n"
                                "[layer fc]\ntype = dense\nsrc = r\nnum_output = %d\naxis = 2\n"
                                "[layer loss]\ntype = softmax_loss\nsrc = fc, data\n", data,
                                stats.vocab_size, stats.vocab_size);
  Pair p = pair_new (text);
  for (int step = 0; step < 4; step++)
    compare_step (&p, 1e-3);
  for (int b = 0; b < 2; b++)
    compare_test_forward (&p);
  pair_free (&p);
  g_free (text);
  g_assert_true (shoal_test_remove_tree (dir));
  g_free (data);
  g_free (file);
  g_free (dir);
}

/* embedding: integer ids (restart marks included) written into both nets */
static void
test_embedding (void)
{
  if (!have_gpu ())
    return;
  const char *text = "[layer ids]\ntype = feed\nshape = 4,6\n"
                     "[layer e]\ntype = embedding\nsrc = ids\nvocab_size = 11\nembedding_dim = 5\n"
                     "[layer t]\ntype = feed\nshape = 4,30\n"
                     "[layer loss]\ntype = euclidean_loss\nsrc = e, t\n";
  Pair p = pair_new (text);
  ShoalLayer *c = shoal_net_find (p.cpu, "ids"), *g = shoal_net_find (p.gpu, "ids");
  for (int i = 0; i < 24; i++)
    c->out.data[i] = i % 6 == 0 ? -(float) (i % 11) - 1.0f : (float) ((i * 7) % 11);
  GError *error = NULL;
  g_assert_true (shoal_tensor_upload (&g->out, c->out.data, &error));
  compare_step (&p, 1e-5);
  pair_free (&p);
}

/* RBM layers: the deterministic parts (reconstruction error, free energy,
 * and no update without alg = cd) equal the CPU's; with CD-1 the GPU's
 * own samples train a small RBM: its error falls. */
static void
test_rbm (void)
{
  if (!have_gpu ())
    return;
  const char *text = "[layer x]\ntype = feed\nshape = 16,12\n"
                     "[layer v]\ntype = rbm_visible\nsrc = x\n"
                     "[layer h]\ntype = rbm_hidden\nsrc = v\nnum_output = 6\n"
                     "[layer fe]\ntype = rbm_free_energy\nsrc = v, h\n";
  compare_conf (text, 1e-5);
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data (text, "gpu.conf", &error);
  ShoalNetOptions opts = { .seed = SEED, .shard_count = 1, .device = GPU0, .cd_k = 1 };
  ShoalNet *net = shoal_net_new (conf, &opts, &error);
  g_assert_no_error (error);
  ShoalParamStore *store = shoal_net_params (net);
  shoal_param_store_init_values (store, SEED);
  ShoalLayer *x = shoal_net_find (net, "x");
  float data[16 * 12];
  for (int r = 0; r < 16; r++)
    for (int i = 0; i < 12; i++)
      data[r * 12 + i] = (float) ((r % 2) ? i < 6 : i % 2);
  g_assert_true (shoal_tensor_upload (&x->out, data, &error));
  double first = 0, last = 0;
  for (int step = 0; step < 200; step++)
    {
      shoal_param_store_zero_grads (store);
      double err = shoal_net_forward (net, SHOAL_PHASE_TRAIN);
      shoal_net_backward (net);
      g_assert_true (shoal_net_device_error (net, &error));
      for (size_t i = 0; i < store->total; i++)
        store->values[i] -= 0.3f * store->grads[i];
      first = step == 0 ? err : first;
      last = err;
    }
  g_test_message ("GPU CD-1: reconstruction error %.3f -> %.3f", first, last);
  g_assert_cmpfloat (last, <, 0.5 * first);
  shoal_net_free (net);
  shoal_conf_free (conf);
}

static void
test_sigmoid_cross_entropy (void)
{
  if (!have_gpu ())
    return;
  const char *text = "[layer x]\ntype = feed\nshape = 6,10\nneed_grad = true\n"
                     "[layer t]\ntype = feed\nshape = 6,10\nneed_grad = true\n"
                     "[layer loss]\ntype = sigmoid_cross_entropy_loss\nsrc = x, t\n";
  compare_conf (text, 1e-5);
  gpu_gradcheck (text, 30);
}

/* ---- updates on the device ------------------------------------------------ */

/* How many of n floats are bitwise equal, and the largest difference
 * relative to the largest host value; fails past rtol. */
static void
assert_update_close (const char *what, const float *host, const float *dev, size_t n, double rtol)
{
  size_t same = 0;
  for (size_t i = 0; i < n; i++)
    same += memcmp (&host[i], &dev[i], sizeof (float)) == 0;
  g_test_message ("%s: %zu of %zu values bitwise equal", what, same, n);
  assert_close (what, host, dev, n, rtol, 1e-30);
}

static float *
device_floats (const float *host, size_t n)
{
  GError *error = NULL;
  float *d = shoal_device_alloc (GPU0, n * sizeof (float), &error);
  g_assert_no_error (error);
  g_assert_true (shoal_device_copy (d, host, n * sizeof (float), &error));
  g_assert_no_error (error);
  return d;
}

static float *
host_floats (const float *dev, size_t n)
{
  GError *error = NULL;
  float *h = g_new (float, n);
  g_assert_true (shoal_device_copy (h, dev, n * sizeof (float), &error));
  g_assert_no_error (error);
  return h;
}

/* Every rule (sgd without and with momentum, nesterov, adagrad, rmsprop,
 * adadelta, adam) with weight decay and scales, three updates in a row
 * on host and device from the same values, gradients and state: the
 * kernels make the host's operations in its order, so the values and
 * the state agree to the bit (the check allows 1e-6 relative and counts
 * the bitwise-equal ones); the device gradient is zero afterwards. */
static void
test_device_updaters (void)
{
  if (!have_real_gpu ())
    return;
  const size_t n = 70001;   /* not a multiple of any vector or block width */
  struct { ShoalUpdaterKind kind; float momentum; } rules[] = {
    { SHOAL_UPDATER_SGD, 0 }, { SHOAL_UPDATER_SGD, 0.9f }, { SHOAL_UPDATER_NESTEROV, 0.9f },
    { SHOAL_UPDATER_ADAGRAD, 0 }, { SHOAL_UPDATER_RMSPROP, 0 }, { SHOAL_UPDATER_ADADELTA, 0 },
    { SHOAL_UPDATER_ADAM, 0 },
  };
  GError *error = NULL;
  ShoalStream *stream = shoal_stream_new (GPU0, &error);
  g_assert_no_error (error);
  GRand *rand = g_rand_new_with_seed (SEED);
  for (guint r = 0; r < G_N_ELEMENTS (rules); r++)
    {
      ShoalUpdaterConf conf;
      shoal_updater_conf_defaults (&conf, rules[r].kind);
      conf.momentum = rules[r].momentum;
      conf.weight_decay = 1e-3f;
      conf.schedule.lr = 0.05f;
      conf.schedule.policy = SHOAL_LR_STEP;
      conf.schedule.gamma = 0.5f;
      conf.schedule.step_size = 2;
      int per = shoal_updater_state_per_value (rules[r].kind);
      float *w = g_new (float, n), *g = g_new (float, n), *st = g_new0 (float, 2 * n);
      for (size_t i = 0; i < n; i++)
        w[i] = (float) g_rand_double_range (rand, -1, 1);
      /* squared-gradient sums are never negative */
      for (size_t i = 0; i < 2 * n; i++)
        st[i] = (float) g_rand_double_range (rand, 0, 0.01);
      float *dw = device_floats (w, n), *dst = device_floats (st, 2 * n);
      for (int step = 0; step < 3; step++)
        {
          for (size_t i = 0; i < n; i++)
            g[i] = (float) g_rand_double_range (rand, -2, 2);
          float *dg = device_floats (g, n);
          shoal_updater_apply (&conf, step, step + 1, 0.5f, 2.0f, w, g, per > 0 ? st : NULL, per > 1 ? st + n : NULL, n);
          shoal_updater_apply_on (stream, &conf, step, step + 1, 0.5f, 2.0f, dw, dg, per > 0 ? dst : NULL,
                                  per > 1 ? dst + n : NULL, n, TRUE);
          g_assert_true (shoal_stream_sync (stream, &error));
          g_assert_no_error (error);
          float *cleared = host_floats (dg, n);
          for (size_t i = 0; i < n; i++)
            g_assert_cmpfloat (cleared[i], ==, 0.0f);
          g_free (cleared);
          shoal_device_free (GPU0, dg);
        }
      char *what = g_strdup_printf ("%s%s values", shoal_updater_kind_name (rules[r].kind),
                                    rules[r].momentum != 0 && rules[r].kind == SHOAL_UPDATER_SGD ? "+momentum" : "");
      float *hw = host_floats (dw, n), *hst = host_floats (dst, 2 * n);
      assert_update_close (what, w, hw, n, 1e-6);
      if (per > 0)
        assert_update_close ("  state", st, hst, (size_t) per * n, 1e-6);
      g_free (what);
      g_free (hw);
      g_free (hst);
      shoal_device_free (GPU0, dw);
      shoal_device_free (GPU0, dst);
      g_free (w);
      g_free (g);
      g_free (st);
    }
  g_rand_free (rand);
  shoal_stream_free (stream);
}

/* Clipping on the device against the host: by value, by norm, both; and
 * a gradient under the norm stays as it is. */
static void
test_device_clip (void)
{
  if (!have_real_gpu ())
    return;
  const size_t n = 100003;
  struct { float value, norm, scale; } cases[] = { { 0.5f, 0, 1 }, { 0, 3, 1 }, { 0.5f, 3, 1 }, { 0, 1e6f, 1 } };
  GError *error = NULL;
  ShoalStream *stream = shoal_stream_new (GPU0, &error);
  g_assert_no_error (error);
  double *scratch = shoal_device_alloc (GPU0, 2 * sizeof (double), &error);
  g_assert_no_error (error);
  GRand *rand = g_rand_new_with_seed (SEED);
  for (guint c = 0; c < G_N_ELEMENTS (cases); c++)
    {
      float *g = g_new (float, n);
      for (size_t i = 0; i < n; i++)
        g[i] = (float) g_rand_double_range (rand, -1, 1);
      float *dg = device_floats (g, n);
      shoal_clip_gradients (g, n, cases[c].value, cases[c].norm);
      shoal_clip_gradients_on (stream, dg, n, cases[c].value, cases[c].norm, scratch);
      g_assert_true (shoal_stream_sync (stream, &error));
      g_assert_no_error (error);
      float *hg = host_floats (dg, n);
      char *what = g_strdup_printf ("clip value %g norm %g", cases[c].value, cases[c].norm);
      assert_update_close (what, g, hg, n, 1e-6);
      g_free (what);
      g_free (hg);
      g_free (g);
      shoal_device_free (GPU0, dg);
    }
  g_rand_free (rand);
  shoal_device_free (GPU0, scratch);
  shoal_stream_free (stream);
}

/* One worker with its server in-process, as the runner wires them
 * (shared param client, server of 4 slices, SYNC), on a net `device`. */
typedef struct {
  ShoalNet *net;
  ShoalServer *server;
  ShoalParamClient *client;
  ShoalPushStep push;
} InProcess;

static InProcess
in_process_new (ShoalConf *conf, ShoalDevice device, const ShoalUpdaterConf *u, gboolean on_device)
{
  GError *error = NULL;
  InProcess w = { 0 };
  ShoalNetOptions opts = { .seed = SEED, .shard_count = 1, .device = device };
  w.net = shoal_net_new (conf, &opts, &error);
  g_assert_no_error (error);
  ShoalParamStore *store = shoal_net_params (w.net);
  shoal_param_store_init_values (store, SEED);
  ShoalServerOptions so = { .mode = SHOAL_UPDATE_SYNC, .sync_contributors = 1, .nslices = 4 };
  w.server = shoal_server_new (store, u, &so, &error);
  g_assert_no_error (error);
  shoal_server_host_all (w.server);
  w.client = shoal_param_client_new_shared (store, w.server);
  w.push.client = w.client;
  if (on_device)
    {
      g_assert_true (shoal_net_keep_params_on_device (w.net, &error));
      g_assert_no_error (error);
      g_assert_true (shoal_server_move_to_device (w.server, store->dev_values, device,
                                                  shoal_net_compute_stream (w.net), &error));
      g_assert_no_error (error);
    }
  g_assert_true (shoal_param_client_fetch (w.client, &error));
  g_assert_no_error (error);
  return w;
}

/* One step as worker.c makes it: forward and backward, each layer handed
 * to the client (or, clipping, the whole gradient after), wait. */
static double
in_process_step (InProcess *w, const float *x, const float *labels, int rows, const ShoalUpdaterConf *u)
{
  GError *error = NULL;
  g_assert_true (shoal_net_feed (w->net, "x", x, rows, NULL, &error));
  g_assert_true (shoal_net_feed (w->net, "labels", labels, rows, labels, &error));
  g_assert_no_error (error);
  gboolean clip = u->clip_norm > 0 || u->clip_value > 0;
  double loss = shoal_net_train_step (w->net, clip ? NULL : shoal_worker_push_ready, &w->push);
  if (clip)
    shoal_net_clip_gradients (w->net, u->clip_value, u->clip_norm);
  shoal_param_client_step_done (w->client, w->push.step);
  g_assert_true (shoal_param_client_wait (w->client, &error));
  g_assert_no_error (error);
  w->push.step++;
  return loss;
}

static void
in_process_free (InProcess *w)
{
  shoal_param_client_free (w->client);
  GError *error = NULL;
  g_assert_true (shoal_server_move_to_host (w->server, &error));
  g_assert_no_error (error);
  shoal_server_free (w->server);
  shoal_net_free (w->net);
}

/* The same training three ways: the CPU, the GPU with the host update
 * (gradients down, values up), and the GPU with params, state and update
 * on the device (server.h, shoal_server_move_to_device).  The two GPU
 * runs differ only in where the update runs: the same losses step by
 * step and the same final values; the CPU agrees within float rounding.
 * Then the device server's host copy: a pull and a checkpoint see the
 * device's values, and a put reaches the device. */
static void
check_server_on_device (ShoalUpdaterKind kind, float clip_norm)
{
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data (MLP, "gpu.conf", &error);
  g_assert_no_error (error);
  ShoalUpdaterConf u;
  shoal_updater_conf_defaults (&u, kind);
  u.schedule.lr = kind == SHOAL_UPDATER_ADAM ? 0.01f : 0.1f;
  u.momentum = kind == SHOAL_UPDATER_SGD ? 0.9f : 0;
  u.weight_decay = 1e-4f;
  u.clip_norm = clip_norm;
  /* the same GPU compute and the same update arithmetic: only clipping's
   * norm sums in another order on the device */
  double gpu_rtol = clip_norm > 0 ? 1e-5 : 1e-6;
  ShoalDevice cpu = { SHOAL_DEVICE_CPU, 0 };
  InProcess c = in_process_new (conf, cpu, &u, FALSE);
  InProcess h = in_process_new (conf, GPU0, &u, FALSE);
  InProcess d = in_process_new (conf, GPU0, &u, TRUE);
  g_assert_true (shoal_server_on_device (d.server));
  g_assert_true (shoal_net_params_on_device (d.net));
  GRand *rand = g_rand_new_with_seed (SEED);
  float x[32 * 20], labels[32];
  double first = 0, last = 0;
  for (int step = 0; step < 25; step++)
    {
      for (guint i = 0; i < G_N_ELEMENTS (x); i++)
        x[i] = (float) g_rand_double_range (rand, -1, 1);
      for (guint i = 0; i < G_N_ELEMENTS (labels); i++)
        labels[i] = (float) (x[i * 20] > 0) + 2 * (float) (x[i * 20 + 1] > 0);
      double lc = in_process_step (&c, x, labels, 32, &u);
      double lh = in_process_step (&h, x, labels, 32, &u);
      double ld = in_process_step (&d, x, labels, 32, &u);
      if (!(fabs (ld - lh) <= gpu_rtol * MAX (1.0, fabs (lh))) || !(fabs (ld - lc) <= 1e-3 * MAX (1.0, fabs (lc))))
        {
          g_test_message ("step %d: loss cpu %.9g, gpu host update %.9g, gpu device update %.9g", step, lc, lh, ld);
          g_test_fail ();
        }
      first = step == 0 ? ld : first;
      last = ld;
    }
  g_test_message ("%s%s on the device: loss %.4f -> %.4f", shoal_updater_kind_name (kind),
                  clip_norm > 0 ? " (clipped)" : "", first, last);
  g_assert_cmpfloat (last, <, 0.8 * first);
  size_t served = shoal_net_params (d.net)->served;
  /* a pull reads the host copy: brought up to date first */
  float *pulled = g_new (float, served);
  for (int s = 0; s < 4; s++)
    {
      size_t b, e;
      shoal_server_slice_range (d.server, s, &b, &e);
      g_assert_true (shoal_server_pull (d.server, s, pulled + b, e - b, 0, 0, NULL, &error));
      g_assert_no_error (error);
    }
  float *dev_values = host_floats (shoal_net_params (d.net)->dev_values, served);
  assert_update_close ("pulled against the device's values", dev_values, pulled, served, 0);
  assert_update_close ("device update against host update", shoal_server_values (h.server),
                       shoal_server_values (d.server), served, gpu_rtol);
  assert_update_close ("device update against the CPU", shoal_server_values (c.server),
                       shoal_server_values (d.server), served, 1e-3);
  /* a put lands on the device: the next forward sees it */
  size_t b0, e0;
  shoal_server_slice_range (d.server, 0, &b0, &e0);
  for (size_t i = b0; i < e0; i++)
    pulled[i] = 0.25f;
  g_assert_true (shoal_server_put (d.server, 0, pulled + b0, e0 - b0, d.push.step, &error));
  g_assert_no_error (error);
  float *after = host_floats (shoal_net_params (d.net)->dev_values + b0, e0 - b0);
  for (size_t i = 0; i < e0 - b0; i++)
    g_assert_cmpfloat (after[i], ==, 0.25f);
  g_free (after);
  g_free (dev_values);
  g_free (pulled);
  g_rand_free (rand);
  in_process_free (&c);
  in_process_free (&h);
  in_process_free (&d);
  shoal_conf_free (conf);
}

static void
test_server_on_device (void)
{
  if (!have_real_gpu ())
    return;
  check_server_on_device (SHOAL_UPDATER_SGD, 0);
  check_server_on_device (SHOAL_UPDATER_ADAM, 0);
  check_server_on_device (SHOAL_UPDATER_SGD, 0.5f);
}

/* Device mode is for one worker: a server that sums the gradients of
 * several, or one on the CPU, says why it cannot. */
static void
test_server_on_device_refused (void)
{
  if (!have_real_gpu ())
    return;
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data (MLP, "gpu.conf", &error);
  g_assert_no_error (error);
  ShoalNetOptions opts = { .seed = SEED, .shard_count = 1, .device = GPU0 };
  ShoalNet *net = shoal_net_new (conf, &opts, &error);
  g_assert_no_error (error);
  ShoalUpdaterConf u;
  shoal_updater_conf_defaults (&u, SHOAL_UPDATER_SGD);
  ShoalServerOptions so = { .mode = SHOAL_UPDATE_SYNC, .sync_contributors = 2, .nslices = 2 };
  ShoalServer *server = shoal_server_new (shoal_net_params (net), &u, &so, &error);
  g_assert_no_error (error);
  shoal_server_host_all (server);
  g_assert_false (shoal_server_move_to_device (server, shoal_net_params (net)->dev_values, GPU0,
                                               shoal_net_compute_stream (net), &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
  g_assert_nonnull (strstr (error->message, "several workers"));
  g_clear_error (&error);
  g_assert_false (shoal_server_on_device (server));
  shoal_server_free (server);
  shoal_net_free (net);
  shoal_conf_free (conf);
}

/* ---- the wire codecs on the device ---------------------------------------- */

/* A value for a codec: mostly spread over many magnitudes, one in 16 an
 * edge case (support/codec_cases.h), with `special` half of those an
 * infinity or a NaN. */
static float
codec_input (GRand *rand, gboolean special)
{
  if (g_rand_int_range (rand, 0, 16) == 0)
    {
      if (special && g_rand_boolean (rand))
        {
          float s[] = { INFINITY, -INFINITY, NAN, -NAN };
          return s[g_rand_int_range (rand, 0, G_N_ELEMENTS (s))];
        }
      return shoal_codec_edge_values[g_rand_int_range (rand, 0, G_N_ELEMENTS (shoal_codec_edge_values))];
    }
  /* magnitudes spread over 2^-40 .. 2^12: sums in a block round */
  return (float) ldexp (g_rand_double_range (rand, -1, 1), g_rand_int_range (rand, -40, 13));
}

static void
assert_same_bytes (const char *what, const void *host, const void *dev, size_t bytes)
{
  const guint8 *h = host, *d = dev;
  for (size_t i = 0; i < bytes; i++)
    if (h[i] != d[i])
      {
        g_test_message ("%s: %zu bytes, the first difference at byte %zu (host %02x, device %02x)", what, bytes, i,
                        h[i], d[i]);
        g_test_fail ();
        return;
      }
}

/* The device's encoding is the host's byte for byte, but for NaN's
 * sign and payload: a block whose values hold a NaN, or infinities of
 * both signs, has NaN levels on both sides, and IEEE leaves which NaN an
 * operation makes to the processor (x86 passes on an operand's NaN, the
 * GPU makes its canonical one), so a quantiser's header floats and the
 * residuals are compared as floats with NaN equal to NaN.  The codes,
 * and fp16's and bf16's bytes (no arithmetic makes a NaN there; the push
 * mean's scale could, so its inputs here are finite), must be the host's
 * exactly. */
static void
assert_codec_bytes (const char *what, ShoalCodec codec, size_t n, const guint8 *host, const guint8 *dev)
{
  if (!shoal_codec_lossy_feedback (codec))
    {
      assert_same_bytes (what, host, dev, shoal_codec_bytes (codec, n));
      return;
    }
  size_t bits = codec == SHOAL_CODEC_2BIT ? 2 : 1;
  for (size_t b = 0; b < n; b += SHOAL_CODEC_BLOCK)
    {
      size_t len = MIN ((size_t) SHOAL_CODEC_BLOCK, n - b), codes = (len * bits + 7) / 8;
      if (!shoal_same_float (host, dev) || !shoal_same_float (host + 4, dev + 4))
        {
          g_test_message ("%s: the levels of the block at value %zu differ", what, b);
          g_test_fail ();
          return;
        }
      assert_same_bytes (what, host + 8, dev + 8, codes);
      host += 8 + codes;
      dev += 8 + codes;
    }
}

static void
assert_same_floats (const char *what, const float *host, const float *dev, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (!shoal_same_float (&host[i], &dev[i]))
      {
        g_test_message ("%s: value %zu differs (host %.9g, device %.9g)", what, i, host[i], dev[i]);
        g_test_fail ();
        return;
      }
}

/* One codec on n values, three steps with the residual carried (the
 * device's in separate buffers, in and out, as the param client keeps
 * them): each step's bytes and residual the host's (assert_codec_bytes:
 * bitwise, but for which NaN a NaN is), and the
 * device gradient cleared as read.  scale != 1: the mean of n_push
 * steps, which the host makes in place first. */
static void
check_codec_encode (ShoalStream *stream, GRand *rand, ShoalCodec codec, size_t n, gboolean special, float scale)
{
  GError *error = NULL;
  size_t bytes = shoal_codec_bytes (codec, n);
  gboolean lossy = shoal_codec_lossy_feedback (codec);
  float *src = g_new (float, n), *residual = g_new0 (float, n);
  guint8 *host = g_malloc (MAX (bytes, (size_t) 1)), *dev = g_malloc (MAX (bytes, (size_t) 1));
  float *d_rin = device_floats (residual, n), *d_rout = device_floats (residual, n);
  guint8 *d_out = shoal_device_alloc (GPU0, MAX (bytes, (size_t) 4), &error);
  g_assert_no_error (error);
  char *what = g_strdup_printf ("%s, %zu values%s, scale %g", shoal_codec_name (codec), n,
                                special ? " with infinities and NaN" : "", scale);
  for (int step = 0; step < 3; step++)
    {
      for (size_t i = 0; i < n; i++)
        src[i] = codec_input (rand, special);
      if (step == 0 && n >= 3 * SHOAL_CODEC_BLOCK)
        for (size_t i = 0; i < SHOAL_CODEC_BLOCK; i++)
          {
            src[i] = 0.0f;                                    /* a block of zeros: threshold 0 */
            src[SHOAL_CODEC_BLOCK + i] = -fabsf (src[SHOAL_CODEC_BLOCK + i]);  /* one side only */
          }
      float *d_src = device_floats (src, n);
      if (scale != 1.0f)
        for (size_t i = 0; i < n; i++)
          src[i] *= scale;
      shoal_codec_encode (codec, src, lossy ? residual : NULL, n, host);
      shoal_codec_encode_on (stream, codec, d_src, scale, TRUE, lossy ? d_rin : NULL, lossy ? d_rout : NULL, n,
                             d_out);
      g_assert_true (shoal_stream_sync (stream, &error));
      g_assert_no_error (error);
      g_assert_true (shoal_device_copy (dev, d_out, bytes, &error));
      g_assert_no_error (error);
      char *at = g_strdup_printf ("%s, step %d: bytes", what, step);
      assert_codec_bytes (at, codec, n, host, dev);
      float *cleared = host_floats (d_src, n);
      for (size_t i = 0; i < n; i++)
        g_assert_cmpfloat (cleared[i], ==, 0.0f);
      g_free (cleared);
      if (lossy)
        {
          float *r = host_floats (d_rout, n);
          g_free (at);
          at = g_strdup_printf ("%s, step %d: residual", what, step);
          assert_same_floats (at, residual, r, n);
          g_free (r);
          float *t = d_rin;   /* committed: the next step adds it */
          d_rin = d_rout;
          d_rout = t;
        }
      g_free (at);
      shoal_device_free (GPU0, d_src);
    }
  g_free (what);
  shoal_device_free (GPU0, d_rin);
  shoal_device_free (GPU0, d_rout);
  shoal_device_free (GPU0, d_out);
  g_free (src);
  g_free (residual);
  g_free (host);
  g_free (dev);
}

/* Every codec, lengths of one value, short of a byte of codes, a block
 * and one past, many blocks and a partial one (70001: no multiple of 4,
 * 8 or 256), plain and special inputs, without and with a push mean. */
static void
test_device_codecs (void)
{
  if (!have_real_gpu ())
    return;
  GError *error = NULL;
  ShoalStream *stream = shoal_stream_new (GPU0, &error);
  g_assert_no_error (error);
  GRand *rand = g_rand_new_with_seed (SEED);
  const size_t lengths[] = { 1, 3, 7, 255, 256, 257, 1000, 70001 };
  for (int c = 0; c < SHOAL_CODEC_COUNT; c++)
    for (guint l = 0; l < G_N_ELEMENTS (lengths); l++)
      for (int special = 0; special < 2; special++)
        check_codec_encode (stream, rand, (ShoalCodec) c, lengths[l], special, 1.0f);
  for (int c = 0; c < SHOAL_CODEC_COUNT; c++)
    check_codec_encode (stream, rand, (ShoalCodec) c, 70001, FALSE, 1.0f / 3.0f);
  g_rand_free (rand);
  shoal_stream_free (stream);
}

/* The values' codecs decoded on the device: every 16-bit pattern of
 * fp16 and bf16 (NaNs, infinities, subnormals, both zeros) and a
 * thousand floats of fp32 (NaN payloads too), bitwise the host's. */
static void
test_device_decode (void)
{
  if (!have_real_gpu ())
    return;
  GError *error = NULL;
  ShoalStream *stream = shoal_stream_new (GPU0, &error);
  g_assert_no_error (error);
  const size_t n = 65536;
  guint16 *codes = g_new (guint16, n);
  for (size_t i = 0; i < n; i++)
    codes[i] = (guint16) i;
  guint8 *d_in = shoal_device_alloc (GPU0, n * sizeof (float), &error);
  g_assert_no_error (error);
  float *host = g_new (float, n), *d_out = device_floats (host, n);
  ShoalCodec codecs[] = { SHOAL_CODEC_FP16, SHOAL_CODEC_BF16, SHOAL_CODEC_FP32 };
  for (guint c = 0; c < G_N_ELEMENTS (codecs); c++)
    {
      size_t count = codecs[c] == SHOAL_CODEC_FP32 ? n / 2 : n, bytes = shoal_codec_bytes (codecs[c], count);
      g_assert_true (shoal_device_copy (d_in, codes, bytes, &error));
      g_assert_no_error (error);
      g_assert_true (shoal_codec_decode (codecs[c], (const guint8 *) codes, bytes, host, count));
      shoal_codec_decode_on (stream, codecs[c], d_in, d_out, count);
      g_assert_true (shoal_stream_sync (stream, &error));
      g_assert_no_error (error);
      float *dev = host_floats (d_out, count);
      assert_same_bytes (shoal_codec_name (codecs[c]), host, dev, count * sizeof (float));
      g_free (dev);
    }
  shoal_device_free (GPU0, d_in);
  shoal_device_free (GPU0, d_out);
  g_free (host);
  g_free (codes);
  shoal_stream_free (stream);
}

/* A Downpour-like worker on the GPU whose server is "remote": served
 * over Thrift on loopback from this process (its params laid out by a
 * CPU net of the same conf), every slice routed through the socket, or
 * with `mixed` the even slices to the same server in-process (they go
 * as floats).  The client encodes and decodes on the host or, on_device,
 * on the GPU (shoal_param_client_codecs_on_device), where the net then
 * uploads no values itself. */
typedef struct {
  ShoalNet *layout;
  ShoalServer *server;
  ShoalRpcServer *rpc;
  ShoalNet *net;
  ShoalParamClient *client;
  ShoalPushStep push;
} RemoteWorker;

#define CODEC_TOKEN "codec-test"

static RemoteWorker
remote_worker_new (ShoalConf *conf, ShoalUpdateMode mode, ShoalCodec grads, ShoalCodec values, gboolean mixed,
                   gboolean on_device)
{
  GError *error = NULL;
  RemoteWorker w = { 0 };
  ShoalNetOptions cpu = { .seed = SEED, .shard_count = 1 };
  w.layout = shoal_net_new (conf, &cpu, &error);
  g_assert_no_error (error);
  shoal_param_store_init_values (shoal_net_params (w.layout), SEED);
  ShoalUpdaterConf u;
  shoal_updater_conf_defaults (&u, SHOAL_UPDATER_SGD);
  u.schedule.lr = 0.1f;
  u.momentum = 0.9f;
  ShoalServerOptions so = { .mode = mode, .sync_contributors = 1, .nslices = 4 };
  w.server = shoal_server_new (shoal_net_params (w.layout), &u, &so, &error);
  g_assert_no_error (error);
  shoal_server_host_all (w.server);
  ShoalRpcServerOptions ro = { .bind_address = "127.0.0.1", .token = CODEC_TOKEN };
  w.rpc = shoal_rpc_server_start (w.server, &ro, &error);
  g_assert_no_error (error);
  ShoalNetOptions gpu = { .seed = SEED, .shard_count = 1, .device = GPU0 };
  w.net = shoal_net_new (conf, &gpu, &error);
  g_assert_no_error (error);
  w.client = shoal_param_client_new (shoal_net_params (w.net), 4, mode);
  w.push.client = w.client;
  g_assert_true (shoal_param_client_set_codecs (w.client, values, grads, &error));
  g_assert_no_error (error);
  ShoalRpcClientOptions o = { .host = "127.0.0.1", .port = shoal_rpc_server_port (w.rpc), .token = CODEC_TOKEN };
  for (int s = 0; s < 4; s++)
    if (mixed && s % 2 == 0)
      shoal_param_client_route_local (w.client, s, w.server);
    else
      shoal_param_client_route_remote (w.client, s, &o);
  if (on_device)
    {
      g_assert_true (shoal_net_set_grads_on_device (w.net, TRUE, &error));
      g_assert_no_error (error);
      g_assert_true (shoal_param_client_codecs_on_device (w.client, shoal_net_compute_stream (w.net), &error));
      g_assert_no_error (error);
      shoal_net_set_param_upload (w.net, FALSE);
    }
  g_assert_true (shoal_param_client_start (w.client, &error));
  g_assert_no_error (error);
  g_assert_true (shoal_param_client_fetch (w.client, &error));
  g_assert_no_error (error);
  return w;
}

static double
remote_worker_step (RemoteWorker *w, const float *x, const float *labels, int rows)
{
  GError *error = NULL;
  g_assert_true (shoal_net_feed (w->net, "x", x, rows, NULL, &error));
  g_assert_true (shoal_net_feed (w->net, "labels", labels, rows, labels, &error));
  g_assert_no_error (error);
  double loss = shoal_net_train_step (w->net, shoal_worker_push_ready, &w->push);
  shoal_param_client_step_done (w->client, w->push.step);
  g_assert_true (shoal_param_client_wait (w->client, &error));
  g_assert_no_error (error);
  w->push.step++;
  return loss;
}

static void
remote_worker_free (RemoteWorker *w)
{
  shoal_param_client_free (w->client);
  shoal_net_free (w->net);
  shoal_rpc_server_stop (w->rpc);
  shoal_server_free (w->server);
  shoal_net_free (w->layout);
}

/* The same training with the wire codecs on the host and on the GPU:
 * the server receives the same bytes and the worker decodes the same
 * values, so the losses step by step, the server's final values, the
 * worker's device values and the residuals are the same to the bit. */
static void
check_device_codec_training (ShoalUpdateMode mode, ShoalCodec grads, ShoalCodec values, gboolean mixed)
{
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data (MLP, "gpu.conf", &error);
  g_assert_no_error (error);
  RemoteWorker h = remote_worker_new (conf, mode, grads, values, mixed, FALSE);
  RemoteWorker d = remote_worker_new (conf, mode, grads, values, mixed, TRUE);
  g_assert_true (shoal_net_grads_on_device (d.net));
  GRand *rand = g_rand_new_with_seed (SEED);
  float x[32 * 20], labels[32];
  double first = 0, last = 0;
  for (int step = 0; step < 20; step++)
    {
      for (guint i = 0; i < G_N_ELEMENTS (x); i++)
        x[i] = (float) g_rand_double_range (rand, -1, 1);
      for (guint i = 0; i < G_N_ELEMENTS (labels); i++)
        labels[i] = (float) (x[i * 20] > 0) + 2 * (float) (x[i * 20 + 1] > 0);
      double lh = remote_worker_step (&h, x, labels, 32);
      double ld = remote_worker_step (&d, x, labels, 32);
      if (lh != ld)
        {
          g_test_message ("step %d: loss with the host's encoding %.9g, the device's %.9g", step, lh, ld);
          g_test_fail ();
        }
      first = step == 0 ? ld : first;
      last = ld;
    }
  char *what = g_strdup_printf ("%s gradients, %s values, %s%s", shoal_codec_name (grads), shoal_codec_name (values),
                                mode == SHOAL_UPDATE_SYNC ? "sync" : "async", mixed ? ", half the slices local" : "");
  g_test_message ("%s, encoded on the GPU: loss %.4f -> %.4f", what, first, last);
  g_assert_cmpfloat (last, <, first);
  size_t served = shoal_net_params (d.layout)->served;
  assert_same_bytes (what, shoal_server_values (h.server), shoal_server_values (d.server), served * sizeof (float));
  /* the last values pulled: in the host store where the host decoded
   * them, on the device where it did, until a checkpoint asks for them */
  float *vd = host_floats (shoal_net_params (d.net)->dev_values, served);
  assert_same_bytes ("the worker's last values", shoal_net_params (h.net)->values, vd, served * sizeof (float));
  g_assert_true (shoal_param_client_values_to_host (d.client, &error));
  g_assert_no_error (error);
  assert_same_bytes ("the worker's last values on the host", shoal_net_params (h.net)->values,
                     shoal_net_params (d.net)->values, served * sizeof (float));
  g_free (vd);
  g_assert_cmpint (shoal_param_client_has_residuals (d.client), ==, shoal_codec_lossy_feedback (grads));
  if (shoal_codec_lossy_feedback (grads))
    {
      GBytes *rh = shoal_param_client_save_residuals (h.client), *rd = shoal_param_client_save_residuals (d.client);
      g_assert_true (g_bytes_equal (rh, rd));
      /* a restored residual reaches the device: zeroes in, zeroes out */
      gsize len;
      guint8 *zeroes = g_bytes_unref_to_data (rh, &len);
      memset (zeroes + 24, 0, len - 24);
      GBytes *blob = g_bytes_new_take (zeroes, len);
      g_assert_true (shoal_param_client_load_residuals (d.client, blob, &error));
      g_assert_no_error (error);
      GBytes *back = shoal_param_client_save_residuals (d.client);
      g_assert_true (g_bytes_equal (back, blob));
      g_bytes_unref (back);
      g_bytes_unref (blob);
      g_bytes_unref (rd);
    }
  g_free (what);
  g_rand_free (rand);
  remote_worker_free (&h);
  remote_worker_free (&d);
  shoal_conf_free (conf);
}

static void
test_device_codec_training (void)
{
  if (!have_real_gpu ())
    return;
  check_device_codec_training (SHOAL_UPDATE_ASYNC, SHOAL_CODEC_2BIT, SHOAL_CODEC_FP16, FALSE);
  check_device_codec_training (SHOAL_UPDATE_ASYNC, SHOAL_CODEC_1BIT, SHOAL_CODEC_BF16, FALSE);
  check_device_codec_training (SHOAL_UPDATE_ASYNC, SHOAL_CODEC_FP16, SHOAL_CODEC_FP32, FALSE);
  check_device_codec_training (SHOAL_UPDATE_SYNC, SHOAL_CODEC_BF16, SHOAL_CODEC_FP32, TRUE);
  check_device_codec_training (SHOAL_UPDATE_SYNC, SHOAL_CODEC_2BIT, SHOAL_CODEC_FP32, TRUE);
  check_device_codec_training (SHOAL_UPDATE_SYNC, SHOAL_CODEC_FP32, SHOAL_CODEC_BF16, FALSE);
}

/* [job] precision: fp32 by default, tf32 and bf16 taken, anything else
 * refused naming the key; a TF32 net's dense products differ from the
 * CPU's by TF32's rounding (10-bit mantissas), a BF16 net's by at least
 * as much, an FP32 net's by float sums only. */
static void
test_precision (void)
{
  const char *base = "[job]\ntrain_steps = 1\n%s[layer x]\ntype = feed\nshape = 4,8\n";
  struct { const char *line; gboolean ok; ShoalPrecision want; } cases[] = {
    { "", TRUE, SHOAL_PRECISION_FP32 }, { "precision = tf32\n", TRUE, SHOAL_PRECISION_TF32 },
    { "precision = fp32\n", TRUE, SHOAL_PRECISION_FP32 }, { "precision = bf16\n", TRUE, SHOAL_PRECISION_BF16 },
    { "precision = fp16\n", FALSE, 0 },
  };
  for (guint c = 0; c < G_N_ELEMENTS (cases); c++)
    {
      char *text = g_strdup_printf (base, cases[c].line);
      char *path = g_build_filename (g_get_tmp_dir (), "shoal-test-precision.conf", NULL);
      GError *error = NULL;
      g_assert_true (g_file_set_contents (path, text, -1, &error));
      ShoalJob *job = shoal_job_load (path, NULL, &error);
      if (cases[c].ok)
        {
          g_assert_no_error (error);
          g_assert_cmpint (job->precision, ==, cases[c].want);
        }
      else
        {
          g_assert_null (job);
          g_assert_nonnull (error);
          g_assert_nonnull (strstr (error->message, "precision"));
          g_clear_error (&error);
        }
      shoal_job_free (job);
      g_unlink (path);
      g_free (path);
      g_free (text);
    }
  if (!have_real_gpu ())
    return;
  const char *net = "[layer x]\ntype = feed\nshape = 64,1024\n"
                    "[layer fc]\ntype = dense\nsrc = x\nnum_output = 256\n" TARGET ("64,256", "fc");
  const ShoalPrecision precisions[] = { SHOAL_PRECISION_FP32, SHOAL_PRECISION_TF32, SHOAL_PRECISION_BF16 };
  double worst[3] = { 0, 0, 0 };
  for (int k = 0; k < 3; k++)
    {
      shoal_device_set_precision (precisions[k]);
      Pair p = pair_new (net);
      shoal_net_forward (p.cpu, SHOAL_PHASE_TRAIN);
      shoal_net_forward (p.gpu, SHOAL_PHASE_TRAIN);
      ShoalLayer *c = shoal_net_find (p.cpu, "fc"), *g = shoal_net_find (p.gpu, "fc");
      float *hg = download (&g->out);
      double scale = 0;
      for (size_t i = 0; i < shoal_tensor_count (&c->out); i++)
        scale = MAX (scale, fabs (c->out.data[i]));
      for (size_t i = 0; i < shoal_tensor_count (&c->out); i++)
        worst[k] = MAX (worst[k], fabs ((double) hg[i] - c->out.data[i]) / scale);
      g_free (hg);
      pair_free (&p);
    }
  shoal_device_set_precision (SHOAL_PRECISION_FP32);
  g_test_message ("dense 64x1024 . 1024x256 against the CPU: fp32 %.2g, tf32 %.2g, bf16 %.2g (relative to the "
                  "largest output)", worst[0], worst[1], worst[2]);
  g_assert_cmpfloat (worst[0], <, 1e-5);
  g_assert_cmpfloat (worst[1], <, 1e-2);
  g_assert_cmpfloat (worst[2], <, 3e-2);
  /* TF32 rounds the operands to 10 bits: it shows, where FP32 does not.
   * bf16 lets cuBLAS round them to 7 bits, or to TF32's 10 where it has
   * no faster bfloat16 kernel (the H100's cuBLAS 12 chose TF32 here:
   * bitwise the same result), so never less than TF32 */
  g_assert_cmpfloat (worst[1], >, worst[0]);
  g_assert_cmpfloat (worst[2], >=, worst[1]);
}

/* [job] precision = bf16: dense products on bfloat16 operands with FP32
 * sums, convolutions on TF32, everything else FP32.  Against the CPU's
 * FP32 every output, gradient and param stays within 3e-2 of the
 * tensor's largest value (bfloat16 keeps 8 significant bits: each operand
 * is off by up to 2^-9 relative, and the sums of products keep that
 * order); the rounding itself is shown by /gpu/precision. */
static void
test_bf16 (void)
{
  if (!have_gpu ())
    return;
  const double rtol = 3e-2;
  shoal_device_set_precision (SHOAL_PRECISION_BF16);
  compare_conf ("[layer x]\ntype = feed\nshape = 6,40\nneed_grad = true\n"
                "[layer fc]\ntype = dense\nsrc = x\nnum_output = 12\n" TARGET ("6,12", "fc"), rtol);
  compare_conf ("[layer x]\ntype = feed\nshape = 4,3,9,9\nneed_grad = true\n"
                "[layer conv]\ntype = conv\nsrc = x\nnum_filters = 8\nkernel = 3\nstride = 2\npad = 1\n"
                "[layer fc]\ntype = dense\nsrc = conv\nnum_output = 10\n" TARGET ("4,10", "fc"), rtol);
  compare_conf ("[layer x]\ntype = feed\nshape = 16,12\n"
                "[layer v]\ntype = rbm_visible\nsrc = x\n"
                "[layer h]\ntype = rbm_hidden\nsrc = v\nnum_output = 6\n"
                "[layer fe]\ntype = rbm_free_energy\nsrc = v, h\n", rtol);
  shoal_device_set_precision (SHOAL_PRECISION_FP32);
}

/* ---- CUDA graphs of the step and the loss read a step late ------------- */

/* The MLP with dropout before its last layer; the CNN of /gpu/train-cnn
 * with dropout on (every layer type but the recurrent and RBM ones a
 * graph holds). */
#define MLP_DROPOUT \
  "[layer x]\ntype = feed\nshape = 32,20\n" \
  "[layer labels]\ntype = feed\nshape = 32,1\nnum_classes = 4\n" \
  "[layer fc1]\ntype = dense\nsrc = x\nnum_output = 64\n" \
  "[layer act]\ntype = relu\nsrc = fc1\n" \
  "[layer drop]\ntype = dropout\nsrc = act\nratio = 0.5\n" \
  "[layer fc2]\ntype = dense\nsrc = drop\nnum_output = 4\n" \
  "[layer loss]\ntype = softmax_loss\nsrc = fc2, labels\n" \
  "[layer acc]\ntype = accuracy\nsrc = fc2, labels\n"
#define CNN_DROPOUT \
  "[layer x]\ntype = feed\nshape = 16,1,12,12\n" \
  "[layer labels]\ntype = feed\nshape = 16,1\nnum_classes = 4\n" \
  "[layer conv1]\ntype = conv\nsrc = x\nnum_filters = 6\nkernel = 3\npad = 1\n" \
  "[layer bn1]\ntype = batchnorm\nsrc = conv1\n" \
  "[layer relu1]\ntype = relu\nsrc = bn1\n" \
  "[layer pool1]\ntype = pooling\nsrc = relu1\nkernel = 2\n" \
  "[layer norm1]\ntype = lrn\nsrc = pool1\nlocal_size = 3\n" \
  "[layer conv2]\ntype = conv\nsrc = norm1\nnum_filters = 8\nkernel = 3\n" \
  "[layer pool2]\ntype = pooling\nsrc = conv2\npool = avg\nkernel = 2\n" \
  "[layer drop]\ntype = dropout\nsrc = pool2\nratio = 0.5\n" \
  "[layer fc]\ntype = dense\nsrc = drop\nnum_output = 4\n" \
  "[layer loss]\ntype = softmax_loss\nsrc = fc, labels\n" \
  "[layer acc]\ntype = accuracy\nsrc = fc, labels\n"

/* A batch of `rows` rows of `width` inputs in [-1, 1) and labels of 4
 * classes that depend on them. */
static void
graph_batch (GRand *rand, float *x, float *labels, int rows, int width)
{
  for (int i = 0; i < rows * width; i++)
    x[i] = (float) g_rand_double_range (rand, -1, 1);
  for (int i = 0; i < rows; i++)
    labels[i] = (float) (x[i * width] > 0) + 2 * (float) (x[i * width + 1] > 0);
}

/* An in-process worker with its update on the device, graphs on or off. */
static InProcess
graph_worker (ShoalConf *conf, const ShoalUpdaterConf *u, gboolean graph)
{
  InProcess w = in_process_new (conf, GPU0, u, TRUE);
  GError *error = NULL;
  g_assert_true (shoal_net_set_cuda_graph (w.net, graph, &error));
  g_assert_no_error (error);
  return w;
}

/* One step as in_process_step, with each layer handed over during the
 * backward (hand_over) or the whole gradient after it. */
static double
graph_step (InProcess *w, const float *x, const float *labels, int rows, gboolean hand_over)
{
  GError *error = NULL;
  g_assert_true (shoal_net_feed (w->net, "x", x, rows, NULL, &error));
  g_assert_true (shoal_net_feed (w->net, "labels", labels, rows, labels, &error));
  g_assert_no_error (error);
  double loss = shoal_net_train_step (w->net, hand_over ? shoal_worker_push_ready : NULL, &w->push);
  shoal_param_client_step_done (w->client, w->push.step);
  g_assert_true (shoal_param_client_wait (w->client, &error));
  g_assert_no_error (error);
  w->push.step++;
  return loss;
}

/* The servers' values (and so the params) of two workers, bit for bit. */
static void
assert_same_values (InProcess *a, InProcess *b, const char *what)
{
  GError *error = NULL;
  g_assert_true (shoal_server_sync_host (a->server, &error));
  g_assert_true (shoal_server_sync_host (b->server, &error));
  g_assert_no_error (error);
  size_t n = shoal_net_params (a->net)->served;
  const float *va = shoal_server_values (a->server), *vb = shoal_server_values (b->server);
  size_t same = 0;
  for (size_t i = 0; i < n; i++)
    same += memcmp (&va[i], &vb[i], sizeof (float)) == 0;
  g_test_message ("%s: %zu of %zu values bitwise equal", what, same, n);
  g_assert_cmpuint (same, ==, n);
}

/* `steps` steps of a net with graphs against the same net without, from
 * the same seed and batches: the same loss at every step and the same
 * params at the end, bit for bit (a replay is the eager step's kernels
 * with the eager step's scalars).  One batch in the middle is short (an
 * epoch's last): it runs eagerly and the graph goes on after it. */
static void
check_graph_bitwise (const char *text, int rows, int width, const ShoalUpdaterConf *u, const char *what)
{
  const int steps = 12, short_step = 6;
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data (text, "gpu.conf", &error);
  g_assert_no_error (error);
  InProcess e = graph_worker (conf, u, FALSE), g = graph_worker (conf, u, TRUE);
  GRand *rand = g_rand_new_with_seed (SEED);
  float *x = g_new (float, rows * width), *labels = g_new (float, rows);
  for (int step = 0; step < steps; step++)
    {
      int n = step == short_step ? rows - 3 : rows;
      graph_batch (rand, x, labels, n, width);
      double le = graph_step (&e, x, labels, n, TRUE);
      double lg = graph_step (&g, x, labels, n, TRUE);
      if (memcmp (&le, &lg, sizeof le) != 0)
        {
          g_test_message ("%s, step %d: eager loss %.9g, graph loss %.9g", what, step, le, lg);
          g_test_fail ();
        }
    }
  /* no fallback: step 0 eager (the warm-up), step 1 captured, the short
   * one eager, every other replayed */
  g_assert_true (shoal_net_cuda_graph (g.net));
  g_assert_cmpuint (shoal_net_cuda_graph_steps (g.net), ==, steps - 2);
  assert_same_values (&e, &g, what);
  g_free (x);
  g_free (labels);
  g_rand_free (rand);
  in_process_free (&e);
  in_process_free (&g);
  shoal_conf_free (conf);
}

static void
test_graph_bitwise (void)
{
  if (!have_real_gpu ())
    return;
  ShoalUpdaterConf momentum, adam;
  /* a learning rate that changes at every step, and a warm-up */
  shoal_updater_conf_defaults (&momentum, SHOAL_UPDATER_SGD);
  momentum.schedule.policy = SHOAL_LR_INVERSE;
  momentum.schedule.lr = 0.1f;
  momentum.schedule.gamma = 0.2f;
  momentum.schedule.power = 0.75f;
  momentum.schedule.warmup_steps = 3;
  momentum.momentum = 0.9f;
  momentum.weight_decay = 1e-4f;
  shoal_updater_conf_defaults (&adam, SHOAL_UPDATER_ADAM);
  adam.schedule.policy = SHOAL_LR_EXPONENTIAL;
  adam.schedule.lr = 0.01f;
  adam.schedule.gamma = 0.5f;
  adam.schedule.step_size = 4;
  check_graph_bitwise (MLP_DROPOUT, 32, 20, &momentum, "MLP, momentum");
  check_graph_bitwise (MLP_DROPOUT, 32, 20, &adam, "MLP, Adam");
  check_graph_bitwise (CNN_DROPOUT, 16, 144, &momentum, "CNN, momentum");
  check_graph_bitwise (CNN_DROPOUT, 16, 144, &adam, "CNN, Adam");
}

/* A step whose host half differs from the captured one (here the layers
 * are not handed over during the backward, so its updates come after
 * the step instead of inside it): the graph goes off with a message, the
 * step's device work runs eagerly with the seeds its host half drew, and
 * the values stay those of the eager net bit for bit. */
static void
test_graph_fallback (void)
{
  if (!have_real_gpu ())
    return;
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data (MLP_DROPOUT, "gpu.conf", &error);
  g_assert_no_error (error);
  ShoalUpdaterConf u;
  shoal_updater_conf_defaults (&u, SHOAL_UPDATER_ADAM);
  u.schedule.lr = 0.01f;
  InProcess e = graph_worker (conf, &u, FALSE), g = graph_worker (conf, &u, TRUE);
  GRand *rand = g_rand_new_with_seed (SEED);
  float x[32 * 20], labels[32];
  for (int step = 0; step < 8; step++)
    {
      gboolean hand_over = step != 5;
      graph_batch (rand, x, labels, 32, 20);
      double le = graph_step (&e, x, labels, 32, hand_over);
      double lg = graph_step (&g, x, labels, 32, hand_over);
      g_assert_cmpfloat (le, ==, lg);
      /* on until the step that differs, off after it */
      g_assert_true (shoal_net_cuda_graph (g.net) == (step < 5));
    }
  g_assert_cmpuint (shoal_net_cuda_graph_steps (g.net), ==, 4);
  assert_same_values (&e, &g, "after a fallback");
  g_rand_free (rand);
  in_process_free (&e);
  in_process_free (&g);
  shoal_conf_free (conf);
}

/* Graphs are refused, saying why, where the step waits on the host: a
 * CPU net, a GPU net whose params do not stay on the device.  The CPU
 * case runs everywhere. */
static void
test_graph_refused (void)
{
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data (MLP, "gpu.conf", &error);
  g_assert_no_error (error);
  ShoalNetOptions copts = { .seed = SEED, .shard_count = 1 };
  ShoalNet *cpu = shoal_net_new (conf, &copts, &error);
  g_assert_no_error (error);
  g_assert_false (shoal_net_set_cuda_graph (cpu, TRUE, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
  g_assert_nonnull (strstr (error->message, "CPU"));
  g_clear_error (&error);
  g_assert_false (shoal_net_cuda_graph (cpu));
  g_assert_true (shoal_net_set_cuda_graph (cpu, FALSE, &error));
  shoal_net_free (cpu);
  if (!DRY_RUN && shoal_device_count () > 0)
    {
      ShoalNetOptions gopts = { .seed = SEED, .shard_count = 1, .device = GPU0 };
      ShoalNet *gpu = shoal_net_new (conf, &gopts, &error);
      g_assert_no_error (error);
      g_assert_false (shoal_net_set_cuda_graph (gpu, TRUE, &error));
      g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
      g_assert_nonnull (strstr (error->message, "do not stay on the device"));
      g_clear_error (&error);
      shoal_net_free (gpu);
      /* a layer a graph cannot hold is named at once (graphs are on by
       * default in shoal run: such a net must say so there, not fail a
       * step later) */
      ShoalConf *rnn = shoal_conf_load_data ("[layer x]\ntype = feed\nshape = 4,3,5\nnum_classes = 6\n"
                                             "[layer r]\ntype = gru\nsrc = x\nhidden_size = 8\n"
                                             "[layer fc]\ntype = dense\nsrc = r\nnum_output = 6\naxis = 2\n"
                                             "[layer loss]\ntype = softmax_loss\nsrc = fc, x\n", "gru.conf", &error);
      g_assert_no_error (error);
      gpu = shoal_net_new (rnn, &gopts, &error);
      g_assert_no_error (error);
      g_assert_false (shoal_net_set_cuda_graph (gpu, TRUE, &error));
      g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
      g_assert_nonnull (strstr (error->message, "layer 'r' (gru)"));
      g_clear_error (&error);
      g_assert_false (shoal_net_cuda_graph (gpu));
      shoal_net_free (gpu);
      shoal_conf_free (rnn);
    }
  shoal_conf_free (conf);
}

/* The loss and metrics read a step late (shoal_net_train_step_late) are
 * those the same steps read at once gave, bit for bit, with graphs off
 * and on. */
static void
check_late_loss (gboolean graph)
{
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data (MLP_DROPOUT, "gpu.conf", &error);
  g_assert_no_error (error);
  ShoalUpdaterConf u;
  shoal_updater_conf_defaults (&u, SHOAL_UPDATER_SGD);
  u.schedule.lr = 0.1f;
  u.momentum = 0.9f;
  InProcess now = graph_worker (conf, &u, FALSE), late = graph_worker (conf, &u, graph);
  GRand *rand = g_rand_new_with_seed (SEED);
  float x[32 * 20], labels[32];
  const int steps = 8;
  double want[8];
  ShoalMetric want_m[8][2], got[2];
  for (int step = 0; step < steps; step++)
    {
      graph_batch (rand, x, labels, 32, 20);
      want[step] = graph_step (&now, x, labels, 32, TRUE);
      g_assert_cmpuint (shoal_net_metrics (now.net, want_m[step], 2), ==, 2);
      g_assert_true (shoal_net_feed (late.net, "x", x, 32, NULL, &error));
      g_assert_true (shoal_net_feed (late.net, "labels", labels, 32, labels, &error));
      g_assert_no_error (error);
      gboolean previous = FALSE;
      double loss = shoal_net_train_step_late (late.net, shoal_worker_push_ready, &late.push, &previous);
      shoal_param_client_step_done (late.client, late.push.step);
      g_assert_true (shoal_param_client_wait (late.client, &error));
      g_assert_no_error (error);
      late.push.step++;
      g_assert_true (previous == (step > 0));
      if (step == 0)
        continue;
      g_assert_cmpfloat (loss, ==, want[step - 1]);
      g_assert_cmpuint (shoal_net_metrics (late.net, got, 2), ==, 2);
      g_assert_cmpfloat (got[0].value, ==, want_m[step - 1][0].value);
      g_assert_cmpfloat (got[1].value, ==, want_m[step - 1][1].value);
    }
  double last = 0;
  g_assert_true (shoal_net_finish_step (late.net, &last));
  g_assert_cmpfloat (last, ==, want[steps - 1]);
  g_assert_false (shoal_net_finish_step (late.net, &last));
  if (graph)
    g_assert_cmpuint (shoal_net_cuda_graph_steps (late.net), ==, steps - 1);
  assert_same_values (&now, &late, graph ? "read late, graphs on" : "read late");
  g_rand_free (rand);
  in_process_free (&now);
  in_process_free (&late);
  shoal_conf_free (conf);
}

static void
test_late_loss (void)
{
  if (!have_real_gpu ())
    return;
  check_late_loss (FALSE);
  check_late_loss (TRUE);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  shoal_data_register_layers ();
  if (shoal_device_count () == 0)
    g_test_message ("no CUDA device%s: the GPU comparisons skip",
                    shoal_device_cuda_built () ? "" : " (built without make CUDA=1)");
  else
    for (int i = 0; i < shoal_device_count (); i++)
      {
        char *d = shoal_device_describe (shoal_device_cuda (i));
        g_test_message ("%s", d);
        g_free (d);
      }
  g_test_add_func ("/gpu/cpu-device", test_cpu_device);
  g_test_add_func ("/gpu/request-without-gpu", test_gpu_request_without_gpu);
  g_test_add_func ("/gpu/partitioned-group-refused", test_partitioned_group_refused);
  g_test_add_func ("/gpu/dense", test_dense);
  g_test_add_func ("/gpu/conv", test_conv);
  g_test_add_func ("/gpu/bf16", test_bf16);
  g_test_add_func ("/gpu/pooling", test_pooling);
  g_test_add_func ("/gpu/lrn", test_lrn);
  g_test_add_func ("/gpu/activations", test_activations);
  g_test_add_func ("/gpu/batchnorm", test_batchnorm);
  g_test_add_func ("/gpu/softmax-accuracy", test_softmax_accuracy);
  g_test_add_func ("/gpu/split-concat", test_split_concat);
  g_test_add_func ("/gpu/dropout", test_dropout);
  g_test_add_func ("/gpu/no-gpu-path", test_no_gpu_path);
  g_test_add_func ("/gpu/manual-upload", test_manual_upload);
  g_test_add_func ("/gpu/backward-notify", test_backward_notify);
  g_test_add_func ("/gpu/kernels-below-params", test_kernels_below_params);
  g_test_add_func ("/gpu/short-batch", test_short_batch);
  g_test_add_func ("/gpu/train-mlp", test_train_mlp);
  g_test_add_func ("/gpu/train-cnn", test_train_cnn);
  g_test_add_func ("/gpu/second-gpu", test_second_gpu);
  g_test_add_func ("/gpu/lmdb-input", test_lmdb_input);
  g_test_add_func ("/gpu/recurrent", test_recurrent);
  g_test_add_func ("/gpu/text-input", test_text_input);
  g_test_add_func ("/gpu/embedding", test_embedding);
  g_test_add_func ("/gpu/rbm", test_rbm);
  g_test_add_func ("/gpu/sigmoid-cross-entropy", test_sigmoid_cross_entropy);
  g_test_add_func ("/gpu/device-updaters", test_device_updaters);
  g_test_add_func ("/gpu/device-clip", test_device_clip);
  g_test_add_func ("/gpu/server-on-device", test_server_on_device);
  g_test_add_func ("/gpu/server-on-device-refused", test_server_on_device_refused);
  g_test_add_func ("/gpu/device-codecs", test_device_codecs);
  g_test_add_func ("/gpu/device-decode", test_device_decode);
  g_test_add_func ("/gpu/device-codec-training", test_device_codec_training);
  g_test_add_func ("/gpu/precision", test_precision);
  g_test_add_func ("/gpu/graph-bitwise", test_graph_bitwise);
  g_test_add_func ("/gpu/graph-fallback", test_graph_fallback);
  g_test_add_func ("/gpu/graph-refused", test_graph_refused);
  g_test_add_func ("/gpu/late-loss", test_late_loss);
  return g_test_run ();
}
