/* RBMs trained by contrastive divergence as layers: CD-1 and CD-2 updates
 * equal ones computed here by hand (doubles, the same random draws), the
 * free energy and the reconstruction error, the error falling while an
 * RBM learns a small data set, the sigmoid cross-entropy loss of the
 * autoencoder, and the errors for nets and jobs that mix things up. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "layers/rbm.h"
#include "support/expect.h"
#include "support/gradcheck.h"
#include "job/job.h"

static ShoalNet *
build (const char *text, ShoalConf **conf, int cd_k)
{
  GError *error = NULL;
  *conf = shoal_conf_load_data (text, "test", &error);
  g_assert_no_error (error);
  ShoalNetOptions opts = { .seed = 3, .shard_count = 1, .cd_k = cd_k };
  ShoalNet *net = shoal_net_new (*conf, &opts, &error);
  g_assert_no_error (error);
  shoal_param_store_init_values (shoal_net_params (net), 3);
  return net;
}

static double
sig (double x)
{
  return 1 / (1 + exp (-x));
}

enum { N = 2, V = 3, H = 2 };

/* The CD-k update of a binary RBM, by hand: h sampled with the layer's
 * stream in its order, visible states as means. */
static void
hand_cd (int k, const double v0[N][V], const double w[H][V], const double c[H], const double b[V],
         ShoalRng *rng, double dw[H][V], double dc[H], double db[V], double *recon_err)
{
  double ph0[N][H], h[N][H], vk[N][V], phk[N][H];
  for (int i = 0; i < N; i++)
    for (int j = 0; j < H; j++)
      {
        double a = c[j];
        for (int x = 0; x < V; x++)
          a += w[j][x] * v0[i][x];
        ph0[i][j] = sig (a);
      }
  *recon_err = 0;
  for (int i = 0; i < N; i++)
    for (int x = 0; x < V; x++)
      {
        double a = b[x];
        for (int j = 0; j < H; j++)
          a += ph0[i][j] * w[j][x];
        *recon_err += (v0[i][x] - sig (a)) * (v0[i][x] - sig (a));
      }
  *recon_err /= N;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < H; j++)
      h[i][j] = shoal_rng_uniform (rng) < (float) ph0[i][j] ? 1 : 0;
  for (int step = 1; step <= k; step++)
    {
      for (int i = 0; i < N; i++)
        for (int x = 0; x < V; x++)
          {
            double a = b[x];
            for (int j = 0; j < H; j++)
              a += h[i][j] * w[j][x];
            vk[i][x] = sig (a);
          }
      for (int i = 0; i < N; i++)
        for (int j = 0; j < H; j++)
          {
            double a = c[j];
            for (int x = 0; x < V; x++)
              a += w[j][x] * vk[i][x];
            phk[i][j] = sig (a);
          }
      if (step < k)
        for (int i = 0; i < N; i++)
          for (int j = 0; j < H; j++)
            h[i][j] = shoal_rng_uniform (rng) < (float) phk[i][j] ? 1 : 0;
    }
  /* the gradient to descend: negative phase minus positive, over the batch */
  for (int j = 0; j < H; j++)
    {
      dc[j] = 0;
      for (int x = 0; x < V; x++)
        dw[j][x] = 0;
    }
  for (int x = 0; x < V; x++)
    db[x] = 0;
  for (int i = 0; i < N; i++)
    {
      for (int j = 0; j < H; j++)
        {
          dc[j] += (phk[i][j] - ph0[i][j]) / N;
          for (int x = 0; x < V; x++)
            dw[j][x] += (phk[i][j] * vk[i][x] - ph0[i][j] * v0[i][x]) / N;
        }
      for (int x = 0; x < V; x++)
        db[x] += (vk[i][x] - v0[i][x]) / N;
    }
}

static void
check_cd (int k)
{
  ShoalConf *conf;
  ShoalNet *net = build ("[layer x]\ntype = feed\nshape = 2,3\n"
                         "[layer v]\ntype = rbm_visible\nsrc = x\n"
                         "[layer h]\ntype = rbm_hidden\nsrc = v\nnum_output = 2\n", &conf, k);
  ShoalLayer *x = shoal_net_find (net, "x"), *vl = shoal_net_find (net, "v"), *hl = shoal_net_find (net, "h");
  const double v0[N][V] = { { 1, 0, 1 }, { 0.2, 0.9, 0.4 } };
  const double w[H][V] = { { 0.5, -0.3, 0.8 }, { -0.6, 0.4, 0.1 } };
  const double c[H] = { 0.1, -0.2 }, b[V] = { -0.1, 0.3, 0.05 };
  for (int i = 0; i < N; i++)
    for (int j = 0; j < V; j++)
      x->out.data[i * V + j] = (float) v0[i][j];
  for (int j = 0; j < H; j++)
    {
      hl->params[1]->value.data[j] = (float) c[j];
      for (int i = 0; i < V; i++)
        hl->params[0]->value.data[j * V + i] = (float) w[j][i];
    }
  for (int i = 0; i < V; i++)
    vl->params[0]->value.data[i] = (float) b[i];

  ShoalRng rng = hl->rng;  /* the draws the layer will make */
  double dw[H][V], dc[H], db[V], err;
  hand_cd (k, v0, w, c, b, &rng, dw, dc, db, &err);

  shoal_param_store_zero_grads (shoal_net_params (net));
  double loss = shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  g_assert_cmpfloat_with_epsilon (loss, err, 1e-6);
  shoal_net_backward (net);
  for (int j = 0; j < H; j++)
    {
      g_assert_cmpfloat_with_epsilon (hl->params[1]->grad.data[j], dc[j], 1e-6);
      for (int i = 0; i < V; i++)
        g_assert_cmpfloat_with_epsilon (hl->params[0]->grad.data[j * V + i], dw[j][i], 1e-6);
    }
  for (int i = 0; i < V; i++)
    g_assert_cmpfloat_with_epsilon (vl->params[0]->grad.data[i], db[i], 1e-6);
  /* one SGD step of lr 0.5 is the hand-computed update */
  float w00 = hl->params[0]->value.data[0];
  g_assert_cmpfloat_with_epsilon (w00 - 0.5f * hl->params[0]->grad.data[0], w[0][0] - 0.5 * dw[0][0], 1e-6);
  shoal_net_free (net);
  shoal_conf_free (conf);
}

static void
test_cd1_by_hand (void)
{
  check_cd (1);
}

static void
test_cd2_by_hand (void)
{
  check_cd (2);
}

/* F(v) = -b.v - sum_j softplus(c_j + W_j v) for binary units;
 * gaussian visible: |v - b|^2 / 2 - ...; gaussian hidden: - |c + W v|^2 / 2 */
static void
test_free_energy (void)
{
  const char *units[2] = { "binary", "gaussian" };
  for (int vu = 0; vu < 2; vu++)
    for (int hu = 0; hu < 2; hu++)
      {
        ShoalConf *conf;
        char *text = g_strdup_printf ("[layer x]\ntype = feed\nshape = 2,3\n"
                                      "[layer v]\ntype = rbm_visible\nsrc = x\nunits = %s\n"
                                      "[layer h]\ntype = rbm_hidden\nsrc = v\nnum_output = 2\nunits = %s\n"
                                      "[layer fe]\ntype = rbm_free_energy\nsrc = v, h\n", units[vu], units[hu]);
        ShoalNet *net = build (text, &conf, 1);
        ShoalLayer *x = shoal_net_find (net, "x"), *vl = shoal_net_find (net, "v"), *hl = shoal_net_find (net, "h");
        for (int i = 0; i < V; i++)
          vl->params[0]->value.data[i] = 0.1f * (float) (i + 1);
        shoal_net_forward (net, SHOAL_PHASE_TEST);
        double want = 0;
        for (int r = 0; r < N; r++)
          {
            const float *v = x->out.data + r * V;
            double f = 0;
            for (int i = 0; i < V; i++)
              {
                double bi = vl->params[0]->value.data[i];
                f += vu ? 0.5 * (v[i] - bi) * (v[i] - bi) : -bi * v[i];
              }
            for (int j = 0; j < H; j++)
              {
                double a = hl->params[1]->value.data[j];
                for (int i = 0; i < V; i++)
                  a += hl->params[0]->value.data[j * V + i] * v[i];
                f -= hu ? 0.5 * a * a : log1p (exp (a));
              }
            want += f / N;
          }
        g_assert_cmpfloat_with_epsilon (shoal_net_find (net, "fe")->out.data[0], want, 1e-5);
        shoal_net_free (net);
        shoal_conf_free (conf);
        g_free (text);
      }
}

/* An RBM of 8 hidden units learns 16-bit patterns made of two noisy
 * prototypes: its reconstruction error falls well below the start (CD-1,
 * plain SGD on the layer gradients, 300 steps of 20 rows). */
static void
test_error_falls (void)
{
  const char *units[2] = { "binary", "gaussian" };
  for (int hu = 0; hu < 2; hu++)
    {
      ShoalConf *conf;
      char *text = g_strdup_printf ("[layer x]\ntype = feed\nshape = 20,16\n"
                                    "[layer v]\ntype = rbm_visible\nsrc = x\n"
                                    "[layer h]\ntype = rbm_hidden\nsrc = v\nnum_output = 8\nunits = %s\n",
                                    units[hu]);
      ShoalNet *net = build (text, &conf, 1);
      ShoalLayer *x = shoal_net_find (net, "x");
      ShoalParamStore *store = shoal_net_params (net);
      ShoalRng data;
      shoal_rng_seed (&data, 11, 1);
      double first = 0, last = 0;
      for (int step = 0; step < 300; step++)
        {
          for (int r = 0; r < 20; r++)
            {
              int proto = (int) shoal_rng_below (&data, 2);
              for (int i = 0; i < 16; i++)
                {
                  int bit = proto ? (i < 8) : (i % 2);
                  if (shoal_rng_uniform (&data) < 0.05f)
                    bit = !bit;
                  x->out.data[r * 16 + i] = (float) bit;
                }
            }
          shoal_param_store_zero_grads (store);
          double err = shoal_net_forward (net, SHOAL_PHASE_TRAIN);
          shoal_net_backward (net);
          for (size_t i = 0; i < store->total; i++)
            store->values[i] -= (hu ? 0.02f : 0.1f) * store->grads[i];
          if (step < 20)
            first += err / 20;
          if (step >= 280)
            last += err / 20;
        }
      g_test_message ("%s hidden units: reconstruction error %.3f -> %.3f", units[hu], first, last);
      g_assert_cmpfloat (last, <, 0.5 * first);
      shoal_net_free (net);
      shoal_conf_free (conf);
      g_free (text);
    }
}

/* Without alg = cd (cd_k 0) the layers compute the error, no update. */
static void
test_no_cd_no_update (void)
{
  ShoalConf *conf;
  ShoalNet *net = build ("[layer x]\ntype = feed\nshape = 4,5\n"
                         "[layer v]\ntype = rbm_visible\nsrc = x\n"
                         "[layer h]\ntype = rbm_hidden\nsrc = v\nnum_output = 3\n", &conf, 0);
  ShoalParamStore *store = shoal_net_params (net);
  shoal_param_store_zero_grads (store);
  double err = shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  g_assert_cmpfloat (err, >, 0);
  shoal_net_backward (net);
  for (size_t i = 0; i < store->total; i++)
    g_assert_cmpfloat (store->grads[i], ==, 0);
  shoal_net_free (net);
  shoal_conf_free (conf);
}

static void
test_sigmoid_cross_entropy (void)
{
  const char *conf =
    "[layer x]\ntype = feed\nshape = 4,6\nneed_grad = true\n"
    "[layer t]\ntype = feed\nshape = 4,6\nneed_grad = true\n"
    "[layer loss]\ntype = sigmoid_cross_entropy_loss\nsrc = x, t\nloss_weight = 2\n";
  g_assert_cmpint (shoal_gradcheck_conf (conf, "loss", NULL, 5), >, 0);

  /* values, huge logits included */
  ShoalConf *c;
  ShoalNet *net = build ("[layer x]\ntype = feed\nshape = 2,2\n[layer t]\ntype = feed\nshape = 2,2\n"
                         "[layer loss]\ntype = sigmoid_cross_entropy_loss\nsrc = x, t\n", &c, 0);
  const float xs[4] = { 0.5f, -1, 200, -300 }, ts[4] = { 1, 0.25f, 0, 0 };
  memcpy (shoal_net_find (net, "x")->out.data, xs, sizeof xs);
  memcpy (shoal_net_find (net, "t")->out.data, ts, sizeof ts);
  /* -log s(0.5); -(0.25 log s(-1) + 0.75 log s(1)); -log(1 - s(200)) = 200; ~0 */
  double want = log1p (exp (-0.5)) + 0.25 * log1p (exp (1)) + 0.75 * log1p (exp (-1)) + 200;
  g_assert_cmpfloat_with_epsilon (shoal_net_forward (net, SHOAL_PHASE_TEST), want / 2, 1e-4);
  shoal_net_free (net);
  shoal_conf_free (c);
}

static void
test_bad_nets (void)
{
  shoal_expect_net_error ("[layer x]\ntype = feed\nshape = 4,5\n"
                          "[layer h]\ntype = rbm_hidden\nsrc = x\nnum_output = 3\n",
                          "bad.conf:6: [layer h] src: an rbm_hidden layer reads an rbm_visible layer directly; "
                          "'x' is a feed layer");
  shoal_expect_net_error ("[layer x]\ntype = feed\nshape = 4,5\n[layer v]\ntype = rbm_visible\nsrc = x\n"
                          "[layer h]\ntype = rbm_hidden\nsrc = v\nnum_output = 3\n"
                          "[layer f]\ntype = rbm_free_energy\nsrc = x, h\n",
                          "bad.conf:13: [layer f] src: an rbm_free_energy layer reads an RBM: its rbm_visible layer "
                          "and the rbm_hidden layer over it; 'x' is a feed layer, 'h' a rbm_hidden layer");
  shoal_expect_net_error ("[layer x]\ntype = feed\nshape = 4,5\n[layer t]\ntype = feed\nshape = 4,6\n"
                          "[layer l]\ntype = sigmoid_cross_entropy_loss\nsrc = x, t\n",
                          "bad.conf:9: [layer l] src: logits 'x' (4x5) and target 't' (4x6) differ in rows or row size");
}

static void
expect_job_error (const char *text, const char *message)
{
  GError *error = NULL;
  ShoalJob *job = shoal_job_load_data (text, "job.conf", NULL, &error);
  g_assert_null (job);
  g_assert_nonnull (error);
  if (strcmp (error->message, message) != 0)
    g_error ("got '%s', expected '%s'", error->message, message);
  g_error_free (error);
}

static void
test_job_algorithm (void)
{
  expect_job_error ("[job]\ntrain_steps = 1\nalg = cd\n[layer x]\ntype = feed\nshape = 2,2\n"
                    "[layer fc]\ntype = dense\nsrc = x\nnum_output = 2\n",
                    "job.conf:3: [job] alg: alg = cd trains RBM layers (rbm_visible, rbm_hidden) by contrastive "
                    "divergence, and this net has none");
  expect_job_error ("[job]\ntrain_steps = 1\n[layer x]\ntype = feed\nshape = 2,2\n"
                    "[layer v]\ntype = rbm_visible\nsrc = x\n[layer h]\ntype = rbm_hidden\nsrc = v\nnum_output = 2\n",
                    "job.conf:7: [layer v] type: rbm_visible layers are trained by contrastive divergence: "
                    "set [job] alg = cd");
  expect_job_error ("[job]\ntrain_steps = 1\nalg = ga\n[layer x]\ntype = feed\nshape = 2,2\n",
                    "job.conf:3: [job] alg: 'ga' is not one of bp|cd");
  GError *error = NULL;
  ShoalJob *job = shoal_job_load_data ("[job]\ntrain_steps = 1\nalg = cd\ncd_k = 3\n[layer x]\ntype = feed\n"
                                       "shape = 2,2\n[layer v]\ntype = rbm_visible\nsrc = x\n[layer h]\n"
                                       "type = rbm_hidden\nsrc = v\nnum_output = 2\n", "job.conf", NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpint (job->cd_k, ==, 3);
  shoal_job_free (job);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/rbm/cd1-by-hand", test_cd1_by_hand);
  g_test_add_func ("/rbm/cd2-by-hand", test_cd2_by_hand);
  g_test_add_func ("/rbm/free-energy", test_free_energy);
  g_test_add_func ("/rbm/error-falls", test_error_falls);
  g_test_add_func ("/rbm/no-cd-no-update", test_no_cd_no_update);
  g_test_add_func ("/rbm/sigmoid-cross-entropy", test_sigmoid_cross_entropy);
  g_test_add_func ("/rbm/bad-nets", test_bad_nets);
  g_test_add_func ("/rbm/job-algorithm", test_job_algorithm);
  return g_test_run ();
}
