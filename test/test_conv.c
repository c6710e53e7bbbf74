/* Convolution: gradient checks over strides, padding, non-square kernels,
 * chunking and bias; forward and backward against a direct convolution
 * written here in double precision; a batch smaller than at set-up; set-up
 * errors. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "support/expect.h"
#include "support/gradcheck.h"

static void
gradcheck (const char *feed_shape, gboolean need_grad, const char *conv_keys, guint64 seed)
{
  char *conf = g_strdup_printf ("[layer in]\ntype = feed\nshape = %s\nneed_grad = %s\n"
                                "[layer conv]\ntype = conv\nsrc = in\n%s\n",
                                feed_shape, need_grad ? "true" : "false", conv_keys);
  g_assert_cmpint (shoal_gradcheck_conf (conf, "conv", NULL, seed), >, 0);
  g_free (conf);
}

static void
test_gradcheck_basic (void)
{
  gradcheck ("2,3,7,7", TRUE, "num_filters = 4\nkernel = 3", 1);
}

static void
test_gradcheck_stride_pad (void)
{
  gradcheck ("2,3,8,7", TRUE, "num_filters = 5\nkernel = 3\nstride = 2\npad = 1", 2);
  gradcheck ("1,2,9,9", TRUE, "num_filters = 3\nkernel = 4\nstride = 3\npad = 2", 3);
}

static void
test_gradcheck_non_square (void)
{
  gradcheck ("2,2,7,9", TRUE,
             "num_filters = 3\nkernel_h = 2\nkernel_w = 4\nstride_h = 1\nstride_w = 2\n"
             "pad_h = 0\npad_w = 1", 4);
  gradcheck ("3,1,6,5", TRUE, "num_filters = 2\nkernel_h = 3\nkernel_w = 1\npad_h = 1", 5);
}

static void
test_gradcheck_no_bias_batch1 (void)
{
  gradcheck ("1,4,6,6", TRUE, "num_filters = 6\nkernel = 3\nbias = false", 6);
}

/* 12x12 with a 5x5 kernel gives 64 output pixels: chunks of 8 images,
 * here 8 + 3.  28x28 gives 576 pixels: chunks of one image. */
static void
test_gradcheck_chunks (void)
{
  gradcheck ("11,2,12,12", TRUE, "num_filters = 3\nkernel = 5", 7);
  gradcheck ("2,1,28,28", TRUE, "num_filters = 2\nkernel = 5\npad = 1", 8);
}

/* The first layer after the data: no input gradient, params only. */
static void
test_gradcheck_no_input_grad (void)
{
  gradcheck ("3,2,6,6", FALSE, "num_filters = 3\nkernel = 3\npad = 1", 9);
}

typedef struct {
  int n, c, h, w, f, kh, kw, sh, sw, ph, pw;
  gboolean bias;
} Geometry;

static int
out_size (int in, int k, int s, int p)
{
  return (in + 2 * p - k) / s + 1;
}

/* Direct convolution and its gradients, in double, for the first `rows`
 * images.  dx may be NULL. */
static void
reference (const Geometry *g, int rows, const float *x, const float *w, const float *b,
           const float *dy, double *y, double *dx, double *dw, double *db)
{
  const int oh = out_size (g->h, g->kh, g->sh, g->ph), ow = out_size (g->w, g->kw, g->sw, g->pw);
  const int k = g->c * g->kh * g->kw;
  memset (dw, 0, sizeof (double) * g->f * k);
  memset (db, 0, sizeof (double) * g->f);
  if (dx != NULL)
    memset (dx, 0, sizeof (double) * rows * g->c * g->h * g->w);
  for (int n = 0; n < rows; n++)
    for (int f = 0; f < g->f; f++)
      for (int i = 0; i < oh; i++)
        for (int j = 0; j < ow; j++)
          {
            size_t yi = (((size_t) n * g->f + f) * oh + i) * ow + j;
            double acc = b != NULL ? b[f] : 0.0;
            for (int c = 0; c < g->c; c++)
              for (int u = 0; u < g->kh; u++)
                for (int v = 0; v < g->kw; v++)
                  {
                    int ih = i * g->sh - g->ph + u, iw = j * g->sw - g->pw + v;
                    if (ih < 0 || ih >= g->h || iw < 0 || iw >= g->w)
                      continue;
                    size_t xi = (((size_t) n * g->c + c) * g->h + ih) * g->w + iw;
                    size_t wi = (size_t) f * k + (c * g->kh + u) * g->kw + v;
                    acc += (double) w[wi] * x[xi];
                    dw[wi] += (double) dy[yi] * x[xi];
                    if (dx != NULL)
                      dx[xi] += (double) dy[yi] * w[wi];
                  }
            y[yi] = acc;
            db[f] += dy[yi];
          }
}

static void
fill_gaussian (float *data, size_t n, ShoalRng *rng)
{
  for (size_t i = 0; i < n; i++)
    data[i] = shoal_rng_gaussian (rng);
}

static void
assert_close (const char *what, const float *got, const double *want, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (fabs (got[i] - want[i]) > 1e-4 + 1e-4 * fabs (want[i]))
      {
        g_test_message ("%s[%zu]: got %.7g, want %.7g", what, i, got[i], want[i]);
        g_test_fail ();
        return;
      }
}

/* Builds feed + conv for g, runs forward and backward on `rows` images
 * (each list of rows in turn, on the same net) and compares with the
 * direct convolution. */
static void
check_against_reference (const Geometry *g, const int *rows_list, int nrows, gboolean need_grad)
{
  char *text = g_strdup_printf (
    "[layer in]\ntype = feed\nshape = %d,%d,%d,%d\nneed_grad = %s\n"
    "[layer conv]\ntype = conv\nsrc = in\nnum_filters = %d\nkernel_h = %d\nkernel_w = %d\n"
    "stride_h = %d\nstride_w = %d\npad_h = %d\npad_w = %d\nbias = %s\n",
    g->n, g->c, g->h, g->w, need_grad ? "true" : "false", g->f, g->kh, g->kw, g->sh, g->sw,
    g->ph, g->pw, g->bias ? "true" : "false");
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data (text, "test", &error);
  g_assert_no_error (error);
  ShoalNet *net = shoal_net_new (conf, NULL, &error);
  g_assert_no_error (error);
  ShoalLayer *in = shoal_net_find (net, "in"), *conv = shoal_net_find (net, "conv");
  const int oh = out_size (g->h, g->kh, g->sh, g->ph), ow = out_size (g->w, g->kw, g->sw, g->pw);
  g_assert_cmpint (conv->out.shape.ndim, ==, 4);
  g_assert_cmpint (conv->out.shape.dim[1], ==, g->f);
  g_assert_cmpint (conv->out.shape.dim[2], ==, oh);
  g_assert_cmpint (conv->out.shape.dim[3], ==, ow);
  g_assert_cmpint (conv->nparams, ==, g->bias ? 2 : 1);
  g_assert_true (need_grad == (conv->src_grad[0] != NULL));

  ShoalRng rng;
  shoal_rng_seed (&rng, 11, 3);
  const int k = g->c * g->kh * g->kw;
  float *w = conv->params[0]->value.data, *b = g->bias ? conv->params[1]->value.data : NULL;
  fill_gaussian (w, (size_t) g->f * k, &rng);
  if (b != NULL)
    fill_gaussian (b, g->f, &rng);

  size_t in_count = (size_t) g->n * g->c * g->h * g->w, out_count = (size_t) g->n * g->f * oh * ow;
  double *y = g_new (double, out_count), *dx = g_new (double, in_count);
  double *dw = g_new (double, (size_t) g->f * k), *db = g_new (double, g->f);

  for (int r = 0; r < nrows; r++)
    {
      int rows = rows_list[r];
      fill_gaussian (in->out.data, in_count, &rng);
      shoal_tensor_set_rows (&in->out, rows);
      shoal_net_forward (net, SHOAL_PHASE_TRAIN);
      g_assert_cmpint (shoal_tensor_rows (&conv->out), ==, rows);
      fill_gaussian (conv->grad.data, out_count, &rng);
      if (need_grad)
        shoal_tensor_fill (&in->grad, NAN);
      /* backward adds into param grads: start them from a known value */
      shoal_tensor_fill (&conv->params[0]->grad, 0.5f);
      if (b != NULL)
        shoal_tensor_fill (&conv->params[1]->grad, -0.25f);
      conv->ops->backward (conv);

      reference (g, rows, in->out.data, w, b, conv->grad.data, y, need_grad ? dx : NULL, dw, db);
      for (int i = 0; i < g->f * k; i++)
        dw[i] += 0.5;
      for (int i = 0; i < g->f; i++)
        db[i] -= 0.25;
      size_t rows_out = (size_t) rows * g->f * oh * ow;
      assert_close ("y", conv->out.data, y, rows_out);
      assert_close ("dw", conv->params[0]->grad.data, dw, (size_t) g->f * k);
      if (b != NULL)
        assert_close ("db", conv->params[1]->grad.data, db, g->f);
      if (need_grad)
        assert_close ("dx", in->grad.data, dx, (size_t) rows * g->c * g->h * g->w);
    }

  g_free (y);
  g_free (dx);
  g_free (dw);
  g_free (db);
  shoal_net_free (net);
  shoal_conf_free (conf);
  g_free (text);
}

static void
test_reference (void)
{
  const Geometry cases[] = {
    /* n  c   h   w   f  kh kw sh sw ph pw bias */
    { 4, 3, 9, 9, 5, 3, 3, 1, 1, 0, 0, TRUE },
    { 3, 2, 10, 8, 4, 3, 3, 2, 2, 1, 1, TRUE },
    { 2, 3, 7, 11, 3, 2, 5, 1, 3, 2, 1, FALSE },
    { 10, 4, 12, 12, 6, 5, 5, 1, 1, 0, 0, TRUE },   /* chunks of 8 */
    { 3, 1, 28, 28, 4, 5, 5, 1, 1, 2, 2, TRUE },    /* chunks of 1 */
    { 2, 2, 6, 6, 3, 6, 6, 1, 1, 0, 0, TRUE },      /* kernel = image: one pixel */
    { 2, 2, 5, 5, 3, 1, 1, 2, 2, 0, 0, TRUE },      /* 1x1, strided */
  };
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      int rows[] = { cases[i].n };
      check_against_reference (&cases[i], rows, 1, TRUE);
      check_against_reference (&cases[i], rows, 1, FALSE);
    }
}

/* Fewer rows than at set-up, including a partial last chunk and a
 * single image, then the full batch again on the same net. */
static void
test_fewer_rows (void)
{
  const Geometry g = { 19, 3, 12, 12, 4, 5, 5, 1, 1, 1, 1, TRUE };   /* 100 pixels: chunks of 6 */
  const int rows[] = { 19, 7, 1, 13, 19 };
  check_against_reference (&g, rows, G_N_ELEMENTS (rows), TRUE);
  const Geometry g1 = { 3, 2, 28, 28, 3, 5, 5, 1, 1, 0, 0, FALSE };
  const int rows1[] = { 2, 1, 3 };
  check_against_reference (&g1, rows1, G_N_ELEMENTS (rows1), TRUE);
}

/* A one-layer net on a feed of feed_shape must fail set-up saying `fragment`. */
static void
expect_setup_error (const char *feed_shape, const char *keys, const char *fragment)
{
  char *text = g_strdup_printf ("[layer in]\ntype = feed\nshape = %s\n"
                                "[layer conv]\ntype = conv\nsrc = in\n%s\n", feed_shape, keys);
  shoal_expect_net_error (text, fragment);
  g_free (text);
}

static void
test_setup_errors (void)
{
  expect_setup_error ("2,10", "num_filters = 2\nkernel = 3", "(N, C, H, W)");
  expect_setup_error ("2,1,5,5", "num_filters = 2", "kernel");
  expect_setup_error ("2,1,5,5", "num_filters = 2\nkernel = 6", "larger than the padded input");
  expect_setup_error ("2,1,5,5", "kernel = 3", "num_filters");
  expect_setup_error ("2,1,5,5", "num_filters = 0\nkernel = 3", "num_filters");
  /* sizes past an int (fuzz_conf: pad 4444444 overflowed oh * ow) */
  expect_setup_error ("2,3,12,14", "num_filters = 8\nkernel = 3\npad = 4444444", "more than 2^31 - 1 positions");
  expect_setup_error ("2,3,12,14", "num_filters = 8\nkernel = 3\npad = 2147483647", "more than 2^31 - 1 positions");
  expect_setup_error ("2,40000,12,14", "num_filters = 1\nkernel_h = 250\nkernel_w = 250\npad = 125",
                      "weights per filter");
}

/* The default init: weights uniform within +-1/sqrt(fan_in), bias 0. */
static void
test_default_init (void)
{
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data (
    "[layer in]\ntype = feed\nshape = 1,4,8,8\n"
    "[layer conv]\ntype = conv\nsrc = in\nnum_filters = 64\nkernel = 3\n", "test", &error);
  g_assert_no_error (error);
  ShoalNet *net = shoal_net_new (conf, NULL, &error);
  g_assert_no_error (error);
  shoal_param_store_init_values (shoal_net_params (net), 5);
  ShoalLayer *conv = shoal_net_find (net, "conv");
  const ShoalParam *w = conv->params[0], *b = conv->params[1];
  g_assert_cmpint (w->shape.dim[0], ==, 64);
  g_assert_cmpint (w->shape.dim[1], ==, 36);
  double bound = 1.0 / 6.0, maxabs = 0;
  for (size_t i = 0; i < w->count; i++)
    maxabs = fmax (maxabs, fabs (w->value.data[i]));
  g_assert_cmpfloat (maxabs, <=, bound);
  g_assert_cmpfloat (maxabs, >, 0.9 * bound);
  for (size_t i = 0; i < b->count; i++)
    g_assert_cmpfloat (b->value.data[i], ==, 0.0f);
  shoal_net_free (net);
  shoal_conf_free (conf);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/conv/gradcheck/basic", test_gradcheck_basic);
  g_test_add_func ("/conv/gradcheck/stride-pad", test_gradcheck_stride_pad);
  g_test_add_func ("/conv/gradcheck/non-square", test_gradcheck_non_square);
  g_test_add_func ("/conv/gradcheck/no-bias-batch1", test_gradcheck_no_bias_batch1);
  g_test_add_func ("/conv/gradcheck/chunks", test_gradcheck_chunks);
  g_test_add_func ("/conv/gradcheck/no-input-grad", test_gradcheck_no_input_grad);
  g_test_add_func ("/conv/reference", test_reference);
  g_test_add_func ("/conv/fewer-rows", test_fewer_rows);
  g_test_add_func ("/conv/setup-errors", test_setup_errors);
  g_test_add_func ("/conv/default-init", test_default_init);
  return g_test_run ();
}
