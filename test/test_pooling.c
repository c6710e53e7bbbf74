/* Pooling: gradient checks for max and average pooling over strides,
 * padding, non-square windows and ceil mode; forward and backward against
 * a direct implementation written here; output sizes; ties; a batch
 * smaller than at set-up; set-up errors. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "support/expect.h"
#include "support/gradcheck.h"

static void
gradcheck (const char *feed_shape, const char *pool_keys, guint64 seed)
{
  char *conf = g_strdup_printf ("[layer in]\ntype = feed\nshape = %s\nneed_grad = true\n"
                                "[layer pool]\ntype = pooling\nsrc = in\n%s\n",
                                feed_shape, pool_keys);
  g_assert_cmpint (shoal_gradcheck_conf (conf, "pool", NULL, seed), >, 0);
  g_free (conf);
}

static void
test_gradcheck_max (void)
{
  gradcheck ("2,3,8,8", "pool = max\nkernel = 2", 1);                       /* 2x2 tiles */
  gradcheck ("2,2,7,9", "pool = max\nkernel = 2", 2);                       /* odd sizes */
  gradcheck ("1,3,9,9", "pool = max\nkernel = 3\nstride = 2\npad = 1", 3);  /* overlapping, padded */
  gradcheck ("2,2,7,8", "pool = max\nkernel_h = 2\nkernel_w = 3\nstride_h = 1\nstride_w = 2", 4);
  gradcheck ("3,2,6,6", "pool = max\nkernel = 3\nstride = 2\nceil_mode = true", 5);
}

static void
test_gradcheck_avg (void)
{
  gradcheck ("2,3,8,8", "pool = avg\nkernel = 2", 6);
  gradcheck ("2,2,7,7", "pool = avg\nkernel = 3\nstride = 2\npad = 1", 7);
  gradcheck ("1,2,7,7", "pool = avg\nkernel = 3\nstride = 2\npad = 1\nexclude_pad = true", 8);
  gradcheck ("2,1,6,5", "pool = avg\nkernel_h = 3\nkernel_w = 2\npad_h = 1\nceil_mode = true", 9);
}

typedef struct {
  int n, c, h, w, kh, kw, sh, sw, ph, pw;
  gboolean avg, ceil_mode, exclude_pad;
} Geometry;

static int
pooled (int in, int k, int s, int p, gboolean ceil_mode)
{
  double q = (double) (in + 2 * p - k) / s;
  int out = (int) (ceil_mode ? ceil (q) : floor (q)) + 1;
  if (ceil_mode && (out - 1) * s >= in + p)
    out--;
  return out;
}

/* Direct pooling and its gradient, in double, for the first `rows` images. */
static void
reference (const Geometry *g, int rows, const float *x, const float *dy, double *y, double *dx)
{
  const int oh = pooled (g->h, g->kh, g->sh, g->ph, g->ceil_mode);
  const int ow = pooled (g->w, g->kw, g->sw, g->pw, g->ceil_mode);
  memset (dx, 0, sizeof (double) * rows * g->c * g->h * g->w);
  for (int pl = 0; pl < rows * g->c; pl++)
    for (int i = 0; i < oh; i++)
      for (int j = 0; j < ow; j++)
        {
          const float *xp = x + (size_t) pl * g->h * g->w;
          double *dxp = dx + (size_t) pl * g->h * g->w;
          size_t yi = ((size_t) pl * oh + i) * ow + j;
          int best = -1, inside = 0, padded = 0;
          double sum = 0;
          for (int u = 0; u < g->kh; u++)
            for (int v = 0; v < g->kw; v++)
              {
                int ih = i * g->sh - g->ph + u, iw = j * g->sw - g->pw + v;
                if (ih < g->h + g->ph && iw < g->w + g->pw)
                  padded++;
                if (ih < 0 || ih >= g->h || iw < 0 || iw >= g->w)
                  continue;
                inside++;
                sum += xp[ih * g->w + iw];
                if (best < 0 || xp[ih * g->w + iw] > xp[best])
                  best = ih * g->w + iw;
              }
          g_assert_cmpint (inside, >, 0);
          if (!g->avg)
            {
              y[yi] = xp[best];
              dxp[best] += dy[yi];
              continue;
            }
          int div = g->exclude_pad ? inside : padded;
          y[yi] = sum / div;
          for (int u = 0; u < g->kh; u++)
            for (int v = 0; v < g->kw; v++)
              {
                int ih = i * g->sh - g->ph + u, iw = j * g->sw - g->pw + v;
                if (ih >= 0 && ih < g->h && iw >= 0 && iw < g->w)
                  dxp[ih * g->w + iw] += (double) dy[yi] / div;
              }
        }
}

static void
assert_close (const char *what, const float *got, const double *want, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (fabs (got[i] - want[i]) > 1e-5 + 1e-5 * fabs (want[i]))
      {
        g_test_message ("%s[%zu]: got %.7g, want %.7g", what, i, got[i], want[i]);
        g_test_fail ();
        return;
      }
}

/* The net of `text` (taken: freed here) and its conf. */
static ShoalNet *
net_of_text (char *text, ShoalConf **conf)
{
  GError *error = NULL;
  *conf = shoal_conf_load_data (text, "test", &error);
  g_assert_no_error (error);
  ShoalNet *net = shoal_net_new (*conf, NULL, &error);
  g_assert_no_error (error);
  g_free (text);
  return net;
}

static ShoalNet *
build (const Geometry *g, ShoalConf **conf)
{
  char *text = g_strdup_printf (
    "[layer in]\ntype = feed\nshape = %d,%d,%d,%d\nneed_grad = true\n"
    "[layer pool]\ntype = pooling\nsrc = in\npool = %s\nkernel_h = %d\nkernel_w = %d\n"
    "stride_h = %d\nstride_w = %d\npad_h = %d\npad_w = %d\nceil_mode = %s\nexclude_pad = %s\n",
    g->n, g->c, g->h, g->w, g->avg ? "avg" : "max", g->kh, g->kw, g->sh, g->sw, g->ph, g->pw,
    g->ceil_mode ? "true" : "false", g->exclude_pad ? "true" : "false");
  return net_of_text (text, conf);
}

/* Forward and backward on each number of rows in turn, same net. */
static void
check_against_reference (const Geometry *g, const int *rows_list, int nrows)
{
  ShoalConf *conf;
  ShoalNet *net = build (g, &conf);
  ShoalLayer *in = shoal_net_find (net, "in"), *pool = shoal_net_find (net, "pool");
  const int oh = pooled (g->h, g->kh, g->sh, g->ph, g->ceil_mode);
  const int ow = pooled (g->w, g->kw, g->sw, g->pw, g->ceil_mode);
  g_assert_cmpint (pool->out.shape.dim[1], ==, g->c);
  g_assert_cmpint (pool->out.shape.dim[2], ==, oh);
  g_assert_cmpint (pool->out.shape.dim[3], ==, ow);

  size_t in_count = (size_t) g->n * g->c * g->h * g->w, out_count = (size_t) g->n * g->c * oh * ow;
  double *y = g_new (double, out_count), *dx = g_new (double, in_count);
  ShoalRng rng;
  shoal_rng_seed (&rng, 21, 1);
  for (int r = 0; r < nrows; r++)
    {
      int rows = rows_list[r];
      for (size_t i = 0; i < in_count; i++)
        in->out.data[i] = shoal_rng_gaussian (&rng);
      shoal_tensor_set_rows (&in->out, rows);
      shoal_net_forward (net, SHOAL_PHASE_TRAIN);
      g_assert_cmpint (shoal_tensor_rows (&pool->out), ==, rows);
      for (size_t i = 0; i < out_count; i++)
        pool->grad.data[i] = shoal_rng_gaussian (&rng);
      shoal_tensor_fill (&in->grad, NAN);
      pool->ops->backward (pool);
      reference (g, rows, in->out.data, pool->grad.data, y, dx);
      assert_close ("y", pool->out.data, y, (size_t) rows * g->c * oh * ow);
      assert_close ("dx", in->grad.data, dx, (size_t) rows * g->c * g->h * g->w);
    }
  g_free (y);
  g_free (dx);
  shoal_net_free (net);
  shoal_conf_free (conf);
}

static void
test_reference (void)
{
  const Geometry cases[] = {
    /* n  c  h   w  kh kw sh sw ph pw  avg    ceil   excl */
    { 3, 4, 8, 8, 2, 2, 2, 2, 0, 0, FALSE, FALSE, FALSE },
    { 3, 4, 8, 8, 2, 2, 2, 2, 0, 0, TRUE, FALSE, FALSE },
    { 2, 3, 9, 7, 2, 2, 2, 2, 0, 0, FALSE, FALSE, FALSE },   /* odd: last row/column unused */
    { 2, 3, 9, 7, 2, 2, 2, 2, 0, 0, TRUE, TRUE, FALSE },     /* odd, ceil: partial windows */
    { 2, 2, 9, 9, 3, 3, 2, 2, 1, 1, FALSE, FALSE, FALSE },
    { 2, 2, 9, 9, 3, 3, 2, 2, 1, 1, TRUE, FALSE, FALSE },
    { 2, 2, 9, 9, 3, 3, 2, 2, 1, 1, TRUE, FALSE, TRUE },
    { 2, 2, 10, 10, 3, 3, 2, 2, 1, 1, TRUE, TRUE, FALSE },
    { 2, 2, 10, 10, 3, 3, 2, 2, 1, 1, FALSE, TRUE, FALSE },
    { 2, 2, 7, 11, 2, 4, 1, 3, 1, 2, FALSE, TRUE, FALSE },
    { 2, 2, 7, 11, 2, 4, 1, 3, 1, 2, TRUE, TRUE, TRUE },
    { 1, 1, 5, 5, 5, 5, 1, 1, 0, 0, TRUE, FALSE, FALSE },    /* global average */
  };
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      int rows[] = { cases[i].n };
      check_against_reference (&cases[i], rows, 1);
    }
}

static void
test_fewer_rows (void)
{
  const int rows[] = { 5, 2, 1, 5 };
  const Geometry max2 = { 5, 3, 8, 8, 2, 2, 2, 2, 0, 0, FALSE, FALSE, FALSE };
  const Geometry avg3 = { 5, 3, 9, 9, 3, 3, 2, 2, 1, 1, TRUE, FALSE, FALSE };
  const Geometry max3 = { 5, 3, 9, 9, 3, 3, 2, 2, 1, 1, FALSE, TRUE, FALSE };
  check_against_reference (&max2, rows, G_N_ELEMENTS (rows));
  check_against_reference (&avg3, rows, G_N_ELEMENTS (rows));
  check_against_reference (&max3, rows, G_N_ELEMENTS (rows));
}

static int
out_dim (const char *feed_shape, const char *keys, int dim)
{
  char *text = g_strdup_printf ("[layer in]\ntype = feed\nshape = %s\n"
                                "[layer pool]\ntype = pooling\nsrc = in\n%s\n", feed_shape, keys);
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data (text, "test", &error);
  g_assert_no_error (error);
  ShoalNet *net = shoal_net_new (conf, NULL, &error);
  g_assert_no_error (error);
  int d = shoal_net_find (net, "pool")->out.shape.dim[dim];
  shoal_net_free (net);
  shoal_conf_free (conf);
  g_free (text);
  return d;
}

static void
test_output_size (void)
{
  /* LeNet: 24 -> 12, 8 -> 4; stride defaults to the window */
  g_assert_cmpint (out_dim ("1,1,24,24", "kernel = 2", 2), ==, 12);
  g_assert_cmpint (out_dim ("1,1,8,8", "kernel = 2", 3), ==, 4);
  /* floor by default, ceil on request */
  g_assert_cmpint (out_dim ("1,1,6,6", "kernel = 3\nstride = 2", 2), ==, 2);
  g_assert_cmpint (out_dim ("1,1,6,6", "kernel = 3\nstride = 2\nceil_mode = true", 2), ==, 3);
  g_assert_cmpint (out_dim ("1,1,7,7", "kernel = 2", 2), ==, 3);
  g_assert_cmpint (out_dim ("1,1,7,7", "kernel = 2\nceil_mode = true", 2), ==, 4);
  /* ceil never starts a window in the bottom padding: 5, k2 s2 p1 gives 3, not 4 */
  g_assert_cmpint (out_dim ("1,1,5,5", "kernel = 2\npad = 1\nceil_mode = true", 2), ==, 3);
  /* AlexNet: 55 -> 27 with 3x3 stride 2, either rounding */
  g_assert_cmpint (out_dim ("1,1,55,55", "kernel = 3\nstride = 2", 2), ==, 27);
  g_assert_cmpint (out_dim ("1,1,55,55", "kernel = 3\nstride = 2\nceil_mode = true", 2), ==, 27);
  g_assert_cmpint (out_dim ("1,1,6,9", "kernel_h = 2\nkernel_w = 3", 3), ==, 3);
}

/* A 1x1x6x6 feed (with a gradient) pooled with `keys`. */
static ShoalNet *
plane_net (const char *keys, ShoalConf **conf)
{
  char *text = g_strdup_printf ("[layer in]\ntype = feed\nshape = 1,1,6,6\nneed_grad = true\n"
                                "[layer pool]\ntype = pooling\nsrc = in\n%s\n", keys);
  return net_of_text (text, conf);
}

/* Equal values: the gradient goes to the first pixel of each window. */
static void
test_max_ties (void)
{
  const char *keys[] = { "kernel = 2", "kernel = 3\nstride = 3" };
  for (gsize k = 0; k < G_N_ELEMENTS (keys); k++)
    {
      ShoalConf *conf;
      ShoalNet *net = plane_net (keys[k], &conf);
      ShoalLayer *in = shoal_net_find (net, "in"), *pool = shoal_net_find (net, "pool");
      shoal_tensor_fill (&in->out, 1.5f);
      shoal_net_forward (net, SHOAL_PHASE_TRAIN);
      shoal_tensor_fill (&pool->grad, 1.0f);
      pool->ops->backward (pool);
      int win = k == 0 ? 2 : 3;
      for (int h = 0; h < 6; h++)
        for (int w = 0; w < 6; w++)
          g_assert_cmpfloat (in->grad.data[h * 6 + w], ==, (h % win == 0 && w % win == 0) ? 1.0f : 0.0f);
      shoal_net_free (net);
      shoal_conf_free (conf);
    }
}

/* The documented NaN rule (pooling.c, `shoal layers`): a NaN wins a max
 * window only as its first pixel (Caffe's rule; torch propagates a NaN
 * from anywhere in the window).  Both 2x2 paths (the vectorised stride-2
 * one and the general one, stride 1) and a 3x3 window. */
static void
test_max_nan (void)
{
  const char *keys[] = { "kernel = 2", "kernel = 2\nstride = 1", "kernel = 3\nstride = 3" };
  const int strides[] = { 2, 1, 3 };
  for (gsize k = 0; k < G_N_ELEMENTS (keys); k++)
    {
      ShoalConf *conf;
      ShoalNet *net = plane_net (keys[k], &conf);
      ShoalLayer *in = shoal_net_find (net, "in"), *pool = shoal_net_find (net, "pool");
      for (int i = 0; i < 36; i++)
        in->out.data[i] = (float) i;
      in->out.data[0] = NAN;        /* the first pixel of the first window */
      in->out.data[6 * 3 + 4] = NAN;  /* inside a window, not first in any */
      shoal_net_forward (net, SHOAL_PHASE_TRAIN);
      /* NaN exactly where the window's first pixel is NaN: (0,0) always,
       * and (3,4) only with stride 1, where a window starts there */
      const int ow = pool->out.shape.dim[3], s = strides[k];
      int nans = 0;
      for (size_t o = 0; o < shoal_tensor_count (&pool->out); o++)
        {
          int first = (int) (o / ow) * s * 6 + (int) (o % ow) * s;
          g_assert_cmpint (!!isnan (pool->out.data[o]), ==, !!isnan (in->out.data[first]));
          nans += isnan (pool->out.data[o]) != 0;
        }
      g_assert_cmpint (nans, ==, s == 1 ? 2 : 1);
      shoal_net_free (net);
      shoal_conf_free (conf);
    }
}

/* A one-layer net on a feed of feed_shape must fail set-up saying `fragment`. */
static void
expect_setup_error (const char *feed_shape, const char *keys, const char *fragment)
{
  char *text = g_strdup_printf ("[layer in]\ntype = feed\nshape = %s\n"
                                "[layer pool]\ntype = pooling\nsrc = in\n%s\n", feed_shape, keys);
  shoal_expect_net_error (text, fragment);
  g_free (text);
}

static void
test_setup_errors (void)
{
  expect_setup_error ("2,10", "kernel = 2", "(N, C, H, W)");
  expect_setup_error ("2,1,5,5", "pool = max", "kernel");
  expect_setup_error ("2,1,5,5", "kernel = 2\npad = 2", "smaller than the window");
  expect_setup_error ("2,1,5,5", "kernel = 6", "larger than the padded input");
  expect_setup_error ("2,1,5,5", "kernel = 2\npool = median", "pool");
  /* sizes past an int: the padded input, a stride near G_MAXINT in ceil mode */
  expect_setup_error ("2,1,5,5", "kernel = 2000000000\npad = 1999999999", "more than 2^31 - 1 positions");
}
/* A stride near G_MAXINT in ceil mode: one window, no overflow. */
static void
test_huge_stride (void)
{
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data ("[layer in]\ntype = feed\nshape = 2,1,5,5\n"
                                          "[layer pool]\ntype = pooling\nsrc = in\npool = avg\nkernel = 3\n"
                                          "stride = 2147483647\nceil_mode = true\n", "stride.conf", &error);
  g_assert_no_error (error);
  ShoalNet *net = shoal_net_new (conf, NULL, &error);
  g_assert_no_error (error);
  const ShoalShape *out = &shoal_net_find (net, "pool")->out.shape;
  g_assert_cmpint (out->dim[2], ==, 1);
  g_assert_cmpint (out->dim[3], ==, 1);
  shoal_net_free (net);
  shoal_conf_free (conf);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/pooling/gradcheck/max", test_gradcheck_max);
  g_test_add_func ("/pooling/gradcheck/avg", test_gradcheck_avg);
  g_test_add_func ("/pooling/reference", test_reference);
  g_test_add_func ("/pooling/fewer-rows", test_fewer_rows);
  g_test_add_func ("/pooling/output-size", test_output_size);
  g_test_add_func ("/pooling/max-ties", test_max_ties);
  g_test_add_func ("/pooling/max-nan", test_max_nan);
  g_test_add_func ("/pooling/setup-errors", test_setup_errors);
  g_test_add_func ("/pooling/huge-stride", test_huge_stride);
  return g_test_run ();
}
