/* LRN: gradient checks with a strong normalisation (alpha large enough
 * that the nonlinear part dominates), for the beta values with their own
 * code (0.75, 0.5, 1) and a general one; forward and backward against the
 * formula evaluated here in double; windows wider than the channels; a
 * batch smaller than at set-up; set-up errors. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "support/expect.h"
#include "support/gradcheck.h"

static void
gradcheck (const char *feed_shape, const char *keys, guint64 seed)
{
  char *conf = g_strdup_printf ("[layer in]\ntype = feed\nshape = %s\nneed_grad = true\n"
                                "[layer norm]\ntype = lrn\nsrc = in\n%s\n", feed_shape, keys);
  g_assert_cmpint (shoal_gradcheck_conf (conf, "norm", NULL, seed), >, 0);
  g_free (conf);
}

static void
test_gradcheck (void)
{
  gradcheck ("2,7,3,3", "alpha = 1\nbeta = 0.75\nk = 2", 1);
  gradcheck ("1,6,4,2", "local_size = 3\nalpha = 2\nbeta = 0.5\nk = 1", 2);
  gradcheck ("3,5,2,3", "alpha = 1.5\nbeta = 1\nk = 1.5", 3);
  gradcheck ("2,8,3,3", "local_size = 7\nalpha = 1\nbeta = 0.6\nk = 1", 4);
  gradcheck ("2,2,3,3", "local_size = 5\nalpha = 1\nbeta = 0.75\nk = 1", 5);   /* window > C */
  gradcheck ("4,9", "local_size = 3\nalpha = 1\nbeta = 0.75\nk = 1", 6);       /* (N, C) */
  gradcheck ("2,6,3,3", "", 7);                                                 /* AlexNet defaults */
}

typedef struct {
  int n, c, plane;
  int size;
  double alpha, beta, k;
} Setting;

/* The formulas of the header, in double, for the first `rows` rows. */
static void
reference (const Setting *s, int rows, const float *x, const float *dy, double *y, double *dx)
{
  const int half = (s->size - 1) / 2;
  for (int n = 0; n < rows; n++)
    for (int q = 0; q < s->plane; q++)
      {
        double scale[64], yy[64];
        g_assert_cmpint (s->c, <=, 64);
#define X(ch) ((double) x[((size_t) n * s->c + (ch)) * s->plane + q])
#define DY(ch) ((double) dy[((size_t) n * s->c + (ch)) * s->plane + q])
        for (int c = 0; c < s->c; c++)
          {
            double sum = 0;
            for (int j = c - half; j <= c + half; j++)
              if (j >= 0 && j < s->c)
                sum += X (j) * X (j);
            scale[c] = s->k + s->alpha / s->size * sum;
            yy[c] = X (c) * pow (scale[c], -s->beta);
            y[((size_t) n * s->c + c) * s->plane + q] = yy[c];
          }
        /* dx[c] = sum_j dy[j] * d y[j] / d x[c], straight from the definition */
        for (int c = 0; c < s->c; c++)
          {
            double g = 0;
            for (int j = 0; j < s->c; j++)
              {
                double d = j == c ? pow (scale[j], -s->beta) : 0.0;
                if (abs (j - c) <= half)
                  d += X (j) * -s->beta * pow (scale[j], -s->beta - 1)
                       * s->alpha / s->size * 2 * X (c);
                g += DY (j) * d;
              }
            dx[((size_t) n * s->c + c) * s->plane + q] = g;
          }
#undef X
#undef DY
      }
}

static void
assert_close (const char *what, const float *got, const double *want, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (fabs (got[i] - want[i]) > 1e-5 + 1e-4 * fabs (want[i]))
      {
        g_test_message ("%s[%zu]: got %.7g, want %.7g", what, i, got[i], want[i]);
        g_test_fail ();
        return;
      }
}

static void
check_against_reference (const Setting *s, const int *rows_list, int nrows)
{
  char *text = g_strdup_printf ("[layer in]\ntype = feed\nshape = %d,%d,%d\nneed_grad = true\n"
                                "[layer norm]\ntype = lrn\nsrc = in\nlocal_size = %d\n"
                                "alpha = %g\nbeta = %g\nk = %g\n",
                                s->n, s->c, s->plane, s->size, s->alpha, s->beta, s->k);
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data (text, "test", &error);
  g_assert_no_error (error);
  ShoalNet *net = shoal_net_new (conf, NULL, &error);
  g_assert_no_error (error);
  ShoalLayer *in = shoal_net_find (net, "in"), *norm = shoal_net_find (net, "norm");
  g_assert_true (shoal_shape_equal (&norm->out.shape, &in->out.shape));

  size_t count = (size_t) s->n * s->c * s->plane;
  double *y = g_new (double, count), *dx = g_new (double, count);
  ShoalRng rng;
  shoal_rng_seed (&rng, 31, 2);
  for (int r = 0; r < nrows; r++)
    {
      int rows = rows_list[r];
      for (size_t i = 0; i < count; i++)
        in->out.data[i] = 2.0f * shoal_rng_gaussian (&rng);
      shoal_tensor_set_rows (&in->out, rows);
      shoal_net_forward (net, SHOAL_PHASE_TRAIN);
      for (size_t i = 0; i < count; i++)
        norm->grad.data[i] = shoal_rng_gaussian (&rng);
      shoal_tensor_fill (&in->grad, NAN);
      norm->ops->backward (norm);
      reference (s, rows, in->out.data, norm->grad.data, y, dx);
      size_t n = (size_t) rows * s->c * s->plane;
      assert_close ("y", norm->out.data, y, n);
      assert_close ("dx", in->grad.data, dx, n);
    }
  g_free (y);
  g_free (dx);
  shoal_net_free (net);
  shoal_conf_free (conf);
  g_free (text);
}

static void
test_reference (void)
{
  const Setting cases[] = {
    /* n  c  plane size alpha  beta  k */
    { 3, 10, 6, 5, 1e-4, 0.75, 1 },     /* AlexNet: nearly the identity */
    { 3, 10, 6, 5, 3.0, 0.75, 1 },
    { 2, 7, 5, 3, 2.0, 0.5, 2 },
    { 2, 7, 5, 1, 2.0, 1.0, 1 },        /* a window of one channel */
    { 2, 4, 5, 9, 1.0, 0.3, 0.5 },      /* window wider than C */
    { 2, 12, 3, 7, 0.5, 1.7, 1 },
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
  const Setting s = { 6, 9, 7, 5, 1.0, 0.75, 1 };
  const int rows[] = { 6, 1, 4, 6 };
  check_against_reference (&s, rows, G_N_ELEMENTS (rows));
}

/* A one-layer net on a feed of feed_shape must fail set-up saying `fragment`. */
static void
expect_setup_error (const char *feed_shape, const char *keys, const char *fragment)
{
  char *text = g_strdup_printf ("[layer in]\ntype = feed\nshape = %s\n"
                                "[layer norm]\ntype = lrn\nsrc = in\n%s\n", feed_shape, keys);
  shoal_expect_net_error (text, fragment);
  g_free (text);
}

static void
test_setup_errors (void)
{
  expect_setup_error ("2,4,3,3", "local_size = 4", "odd");
  expect_setup_error ("2,4,3,3", "k = 0", "k");
  expect_setup_error ("2,4,3,3", "alpha = -1", "alpha");
  expect_setup_error ("8", "", "(N, C, ...)");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/lrn/gradcheck", test_gradcheck);
  g_test_add_func ("/lrn/reference", test_reference);
  g_test_add_func ("/lrn/fewer-rows", test_fewer_rows);
  g_test_add_func ("/lrn/setup-errors", test_setup_errors);
  return g_test_run ();
}
