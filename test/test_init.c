/* Initialisers: every kind draws from the distribution init.h defines,
 * checked by sample moments (tolerances from the standard error), bounds
 * and shape; and every conf name init.h documents draws, value by value,
 * what a reference computed here from that documented formula draws. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "core/init.h"

#define N 400000
#define NSE 5.0   /* standard errors allowed */

typedef struct {
  double mean, std, min, max;
} Stats;

static Stats
stats_of (const float *x, size_t n)
{
  Stats s = { 0, 0, INFINITY, -INFINITY };
  double sum = 0, sumsq = 0;
  for (size_t i = 0; i < n; i++)
    {
      g_assert_true (isfinite (x[i]));
      sum += x[i];
      s.min = MIN (s.min, x[i]);
      s.max = MAX (s.max, x[i]);
    }
  s.mean = sum / n;
  for (size_t i = 0; i < n; i++)
    sumsq += (x[i] - s.mean) * (x[i] - s.mean);
  s.std = sqrt (sumsq / n);
  return s;
}

/* Fraction of x within radius of center. */
static double
fraction_within (const float *x, size_t n, double center, double radius)
{
  size_t in = 0;
  for (size_t i = 0; i < n; i++)
    in += fabs (x[i] - center) < radius;
  return (double) in / n;
}

static float *
draw (const ShoalInitSpec *spec, int fan_in, int fan_out, guint64 seed)
{
  float *x = g_new (float, N);
  ShoalRng rng;
  shoal_rng_seed (&rng, seed, 0);
  shoal_init_fill (spec, fan_in, fan_out, &rng, x, N);
  return x;
}

/* Mean and std of a gaussian sample, and its shape: P(|x - mean| < std)
 * is 0.6827 for a normal law (0.577 for a uniform one). */
static void
assert_gaussian (const float *x, double mean, double std)
{
  Stats s = stats_of (x, N);
  g_assert_cmpfloat (fabs (s.mean - mean), <, NSE * std / sqrt (N));
  g_assert_cmpfloat (fabs (s.std - std), <, NSE * std * sqrt (0.5 / N));
  double p = 0.682689492;
  g_assert_cmpfloat (fabs (fraction_within (x, N, mean, std) - p), <, NSE * sqrt (p * (1 - p) / N));
}

/* Bounds, mean and std (width / sqrt 12) of a uniform sample; the std of
 * the sample std of a uniform law is std * sqrt(0.2 / n). */
static void
assert_uniform (const float *x, double low, double high)
{
  Stats s = stats_of (x, N);
  double width = high - low, std = width / sqrt (12.0);
  /* float rounding may land a draw on the bound itself */
  double slack = 1e-6 * width;
  g_assert_cmpfloat (s.min, >=, low - slack);
  g_assert_cmpfloat (s.max, <=, high + slack);
  /* with 4e5 draws the extremes come within 1e-4 of the width */
  g_assert_cmpfloat (s.min - low, <, 1e-4 * width);
  g_assert_cmpfloat (high - s.max, <, 1e-4 * width);
  g_assert_cmpfloat (fabs (s.mean - (low + high) / 2), <, NSE * std / sqrt (N));
  g_assert_cmpfloat (fabs (s.std - std), <, NSE * std * sqrt (0.2 / N));
  /* flat, not bell-shaped: P(|x - mean| < std) = 2 std / width */
  double p = 1 / sqrt (3.0);
  g_assert_cmpfloat (fabs (fraction_within (x, N, (low + high) / 2, std) - p), <,
                     NSE * sqrt (p * (1 - p) / N));
}

/* A reference draw computed here from the RNG's primitives and the
 * formulas init.h documents (in double), not from init.c's code. */
typedef double (*Reference) (ShoalRng *rng, const ShoalInitSpec *spec, int fan_in, int fan_out);

static double
ref_constant (ShoalRng *rng, const ShoalInitSpec *spec, int fan_in, int fan_out)
{
  (void) rng, (void) fan_in, (void) fan_out;
  return spec->value;
}

static double
ref_gaussian (ShoalRng *rng, const ShoalInitSpec *spec, int fan_in, int fan_out)
{
  (void) fan_in, (void) fan_out;
  return spec->mean + spec->std * (double) shoal_rng_gaussian (rng);
}

static double
ref_uniform (ShoalRng *rng, const ShoalInitSpec *spec, int fan_in, int fan_out)
{
  (void) fan_in, (void) fan_out;
  return spec->low + (spec->high - (double) spec->low) * shoal_rng_uniform (rng);
}

/* "draw as gaussian/uniform and divide by sqrt(fan_in)" */
static double
ref_gaussian_sqrt_fan_in (ShoalRng *rng, const ShoalInitSpec *spec, int fan_in, int fan_out)
{
  return ref_gaussian (rng, spec, fan_in, fan_out) / sqrt ((double) fan_in);
}

static double
ref_uniform_sqrt_fan_in (ShoalRng *rng, const ShoalInitSpec *spec, int fan_in, int fan_out)
{
  return ref_uniform (rng, spec, fan_in, fan_out) / sqrt ((double) fan_in);
}

/* "uniform in +-sqrt(6 / (fan_in + fan_out))" */
static double
ref_glorot_uniform (ShoalRng *rng, const ShoalInitSpec *spec, int fan_in, int fan_out)
{
  (void) spec;
  double a = sqrt (6.0 / (fan_in + fan_out));
  return -a + 2 * a * shoal_rng_uniform (rng);
}

/* "normal with std sqrt(2 / (fan_in + fan_out))" */
static double
ref_glorot_normal (ShoalRng *rng, const ShoalInitSpec *spec, int fan_in, int fan_out)
{
  (void) spec;
  return sqrt (2.0 / (fan_in + fan_out)) * shoal_rng_gaussian (rng);
}

/* The conf names init.h documents, each with what it must draw. */
static const struct {
  const char *name;
  Reference ref;
} documented[] = {
  { "constant", ref_constant },
  { "gaussian", ref_gaussian },
  { "uniform", ref_uniform },
  { "gaussian_sqrt_fan_in", ref_gaussian_sqrt_fan_in },
  { "uniform_sqrt_fan_in", ref_uniform_sqrt_fan_in },
  { "xavier", ref_glorot_uniform },
  { "glorot_uniform", ref_glorot_uniform },
  { "glorot_normal", ref_glorot_normal },
};

/* Every documented name parses to a kind whose draws are the reference
 * draws of that name, value by value, from the same stream. */
static void
test_names_draw_their_formula (void)
{
  enum { M = 2000 };
  const int fan_in = 37, fan_out = 91;
  gboolean seen[SHOAL_INIT_COUNT] = { FALSE };
  for (gsize d = 0; d < G_N_ELEMENTS (documented); d++)
    {
      ShoalInitSpec spec = { .value = -0.375f, .mean = 0.25f, .std = 1.5f, .low = -0.5f, .high = 2.0f };
      g_assert_true (shoal_init_kind_parse (documented[d].name, &spec.kind));
      seen[spec.kind] = TRUE;
      float x[M];
      ShoalRng rng, ref;
      shoal_rng_seed (&rng, 11, d);
      shoal_rng_seed (&ref, 11, d);
      shoal_init_fill (&spec, fan_in, fan_out, &rng, x, M);
      for (int i = 0; i < M; i++)
        {
          double want = documented[d].ref (&ref, &spec, fan_in, fan_out);
          if (fabs (x[i] - want) > 1e-6 * MAX (1.0, fabs (want)))
            g_error ("%s: draw %d is %.9g, the formula gives %.9g", documented[d].name, i, x[i], want);
        }
    }
  /* every kind has a documented name, and names round-trip */
  for (int k = 0; k < SHOAL_INIT_COUNT; k++)
    {
      g_assert_true (seen[k]);
      ShoalInitKind parsed = SHOAL_INIT_COUNT;
      g_assert_true (shoal_init_kind_parse (shoal_init_kind_name (k), &parsed));
      g_assert_cmpint (parsed, ==, k);
    }

  ShoalInitKind kind = SHOAL_INIT_COUNT;
  g_assert_false (shoal_init_kind_parse ("normal", &kind));
  g_assert_false (shoal_init_kind_parse ("", &kind));
  g_assert_false (shoal_init_kind_parse ("Gaussian", &kind));
  g_assert_false (shoal_init_kind_parse ("gaussian ", &kind));
  g_assert_cmpint (kind, ==, SHOAL_INIT_COUNT);   /* untouched on failure */
}

static void
test_constant (void)
{
  ShoalInitSpec spec = { .kind = SHOAL_INIT_CONSTANT, .value = -0.25f, .mean = 3, .std = 3 };
  float *x = draw (&spec, 10, 10, 1);
  for (size_t i = 0; i < N; i++)
    g_assert_cmpfloat (x[i], ==, -0.25f);
  g_free (x);
}

static void
test_gaussian (void)
{
  ShoalInitSpec spec = { .kind = SHOAL_INIT_GAUSSIAN, .mean = 0.5f, .std = 2.0f };
  float *x = draw (&spec, 10, 10, 2);
  assert_gaussian (x, 0.5, 2.0);
  g_free (x);
}

static void
test_uniform (void)
{
  ShoalInitSpec spec = { .kind = SHOAL_INIT_UNIFORM, .low = -0.3f, .high = 0.7f };
  float *x = draw (&spec, 10, 10, 3);
  assert_uniform (x, -0.3, 0.7);
  g_free (x);
}

static void
test_gaussian_sqrt_fan_in (void)
{
  /* std sqrt(2): He init, std sqrt(2 / fan_in) = 0.2 for fan_in 50 */
  ShoalInitSpec spec = { .kind = SHOAL_INIT_GAUSSIAN_SQRT_FAN_IN, .mean = 0, .std = sqrtf (2.0f) };
  float *x = draw (&spec, 50, 7, 4);
  assert_gaussian (x, 0.0, 0.2);
  g_free (x);

  /* the mean is divided too (the whole draw is) */
  spec.mean = 1.0f;
  spec.std = 1.0f;
  x = draw (&spec, 16, 7, 5);
  assert_gaussian (x, 0.25, 0.25);

  /* fan_out plays no part */
  float *y = draw (&spec, 16, 9999, 5);
  g_assert_cmpmem (x, N * sizeof (float), y, N * sizeof (float));
  g_free (y);
  g_free (x);
}

static void
test_uniform_sqrt_fan_in (void)
{
  ShoalInitSpec spec = { .kind = SHOAL_INIT_UNIFORM_SQRT_FAN_IN, .low = -1.0f, .high = 3.0f };
  float *x = draw (&spec, 25, 3, 6);
  assert_uniform (x, -0.2, 0.6);
  float *y = draw (&spec, 25, 400, 6);
  g_assert_cmpmem (x, N * sizeof (float), y, N * sizeof (float));
  g_free (y);
  g_free (x);
}

static void
test_glorot (void)
{
  /* fan_in + fan_out = 400: uniform in +-sqrt(6/400), normal std sqrt(2/400).
   * The spec's own numbers do not matter to glorot. */
  ShoalInitSpec spec = { .kind = SHOAL_INIT_GLOROT_UNIFORM, .low = 5, .high = 6, .mean = 5, .std = 5 };
  float *x = draw (&spec, 300, 100, 7);
  double a = sqrt (6.0 / 400);
  assert_uniform (x, -a, a);
  g_free (x);

  /* same sum, other split: same distribution, and the same draws */
  float *y = draw (&spec, 100, 300, 7);
  x = draw (&spec, 300, 100, 7);
  g_assert_cmpmem (x, N * sizeof (float), y, N * sizeof (float));
  g_free (x);
  g_free (y);

  spec.kind = SHOAL_INIT_GLOROT_NORMAL;
  x = draw (&spec, 300, 100, 8);
  assert_gaussian (x, 0.0, sqrt (2.0 / 400));
  g_free (x);

  /* scaling with the fan: 4x the fans, half the spread */
  x = draw (&spec, 1200, 400, 8);
  assert_gaussian (x, 0.0, sqrt (2.0 / 1600));
  g_free (x);
}

static void
test_determinism (void)
{
  for (int k = 0; k < SHOAL_INIT_COUNT; k++)
    {
      ShoalInitSpec spec = { .kind = k, .value = 0.1f, .mean = 0.1f, .std = 1.0f,
                             .low = -1.0f, .high = 1.0f };
      enum { M = 1000 };
      float a[M], b[M], c[M];
      ShoalRng ra, rb, rc;
      shoal_rng_seed (&ra, 77, 2);
      shoal_rng_seed (&rb, 77, 2);
      shoal_rng_seed (&rc, 77, 3);
      shoal_init_fill (&spec, 20, 30, &ra, a, M);
      shoal_init_fill (&spec, 20, 30, &rb, b, M);
      shoal_init_fill (&spec, 20, 30, &rc, c, M);
      g_assert_cmpmem (a, sizeof a, b, sizeof b);
      if (k != SHOAL_INIT_CONSTANT)
        {
          int same = 0;
          for (int i = 0; i < M; i++)
            same += a[i] == c[i];
          g_assert_cmpint (same, <, 10);
        }

      /* a fill in two parts continues the same sequence */
      shoal_rng_seed (&ra, 77, 2);
      shoal_init_fill (&spec, 20, 30, &ra, c, 333);
      shoal_init_fill (&spec, 20, 30, &ra, c + 333, M - 333);
      g_assert_cmpmem (a, sizeof a, c, sizeof c);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/init/names-draw-their-formula", test_names_draw_their_formula);
  g_test_add_func ("/init/constant", test_constant);
  g_test_add_func ("/init/gaussian", test_gaussian);
  g_test_add_func ("/init/uniform", test_uniform);
  g_test_add_func ("/init/gaussian-sqrt-fan-in", test_gaussian_sqrt_fan_in);
  g_test_add_func ("/init/uniform-sqrt-fan-in", test_uniform_sqrt_fan_in);
  g_test_add_func ("/init/glorot", test_glorot);
  g_test_add_func ("/init/determinism", test_determinism);
  return g_test_run ();
}
