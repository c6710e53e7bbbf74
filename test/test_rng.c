/* PCG32 streams: reproducibility is what checkpoints and per-param init
 * rely on, and the distributions feed every initialiser and shuffle. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"

#define NDRAWS 1000000

static void
test_same_seed_same_sequence (void)
{
  ShoalRng a, b;
  shoal_rng_seed (&a, 42, 7);
  shoal_rng_seed (&b, 42, 7);
  for (int i = 0; i < 1000; i++)
    g_assert_cmpuint (shoal_rng_u32 (&a), ==, shoal_rng_u32 (&b));

  /* a copied state continues exactly where the original is */
  ShoalRng c = a;
  for (int i = 0; i < 100; i++)
    {
      g_assert_cmpfloat (shoal_rng_uniform (&a), ==, shoal_rng_uniform (&c));
      g_assert_cmpfloat (shoal_rng_gaussian (&a), ==, shoal_rng_gaussian (&c));
    }
}

static int
count_equal_draws (uint64_t seed_a, uint64_t stream_a, uint64_t seed_b, uint64_t stream_b)
{
  ShoalRng a, b;
  shoal_rng_seed (&a, seed_a, stream_a);
  shoal_rng_seed (&b, seed_b, stream_b);
  int same = 0;
  for (int i = 0; i < 1000; i++)
    same += shoal_rng_u32 (&a) == shoal_rng_u32 (&b);
  return same;
}

static void
test_streams_and_seeds_differ (void)
{
  /* two independent 32-bit sequences agree about once in 4e9 draws */
  g_assert_cmpint (count_equal_draws (42, 0, 42, 1), <=, 1);
  g_assert_cmpint (count_equal_draws (42, 3, 43, 3), <=, 1);
  g_assert_cmpint (count_equal_draws (0, 0, 0, 1), <=, 1);
  /* nor is one stream the other shifted by a few draws */
  ShoalRng a, b;
  shoal_rng_seed (&a, 5, 1);
  shoal_rng_seed (&b, 5, 2);
  uint32_t xa[64], xb[64];
  for (int i = 0; i < 64; i++)
    {
      xa[i] = shoal_rng_u32 (&a);
      xb[i] = shoal_rng_u32 (&b);
    }
  for (int shift = 1; shift < 8; shift++)
    {
      int same = 0;
      for (int i = 0; i + shift < 64; i++)
        same += xa[i + shift] == xb[i];
      g_assert_cmpint (same, <=, 1);
    }
}

static void
test_uniform_moments (void)
{
  ShoalRng rng;
  shoal_rng_seed (&rng, 1234, 0);
  double sum = 0, sumsq = 0;
  float lo = 1, hi = 0;
  for (int i = 0; i < NDRAWS; i++)
    {
      float x = shoal_rng_uniform (&rng);
      g_assert_cmpfloat (x, >=, 0.0f);
      g_assert_cmpfloat (x, <, 1.0f);
      lo = MIN (lo, x);
      hi = MAX (hi, x);
      sum += x;
      sumsq += (double) x * x;
    }
  double mean = sum / NDRAWS;
  double var = sumsq / NDRAWS - mean * mean;
  /* 5 standard errors; for U(0,1): var 1/12, 4th central moment 1/80 */
  g_assert_cmpfloat (fabs (mean - 0.5), <, 5 * sqrt (1.0 / 12 / NDRAWS));
  g_assert_cmpfloat (fabs (var - 1.0 / 12), <, 5 * sqrt ((1.0 / 80 - 1.0 / 144) / NDRAWS));
  /* the whole interval is reached */
  g_assert_cmpfloat (lo, <, 1e-4);
  g_assert_cmpfloat (hi, >, 1 - 1e-4);
}

static void
test_gaussian_moments (void)
{
  ShoalRng rng;
  shoal_rng_seed (&rng, 99, 3);
  double sum = 0, sumsq = 0, sum4 = 0;
  int within1 = 0;
  for (int i = 0; i < NDRAWS; i++)
    {
      double x = shoal_rng_gaussian (&rng);
      g_assert_true (isfinite (x));
      sum += x;
      sumsq += x * x;
      sum4 += x * x * x * x;
      within1 += fabs (x) < 1.0;
    }
  double mean = sum / NDRAWS;
  double std = sqrt (sumsq / NDRAWS - mean * mean);
  g_assert_cmpfloat (fabs (mean), <, 5 / sqrt (NDRAWS));
  g_assert_cmpfloat (fabs (std - 1), <, 5 * sqrt (0.5 / NDRAWS));
  /* shape, not just moments: P(|x| < 1) = 0.6827, kurtosis 3 (SE sqrt(96/n)) */
  double p = 0.682689492;
  g_assert_cmpfloat (fabs ((double) within1 / NDRAWS - p), <, 5 * sqrt (p * (1 - p) / NDRAWS));
  g_assert_cmpfloat (fabs (sum4 / NDRAWS - 3), <, 5 * sqrt (96.0 / NDRAWS));
}

static void
test_below_in_range (void)
{
  ShoalRng rng;
  shoal_rng_seed (&rng, 7, 7);
  const uint32_t bounds[] = { 1, 2, 3, 7, 10, 1000, 0x80000001u, 0xffffffffu };
  for (size_t b = 0; b < G_N_ELEMENTS (bounds); b++)
    for (int i = 0; i < 10000; i++)
      g_assert_cmpuint (shoal_rng_below (&rng, bounds[b]), <, bounds[b]);

  /* every value equally likely: chi-square with 9 degrees of freedom,
   * 40 is exceeded with probability ~5e-6 */
  int counts[10] = { 0 };
  const int ndraws = 100000;
  for (int i = 0; i < ndraws; i++)
    counts[shoal_rng_below (&rng, 10)]++;
  double chi2 = 0, expected = ndraws / 10.0;
  for (int k = 0; k < 10; k++)
    chi2 += (counts[k] - expected) * (counts[k] - expected) / expected;
  g_assert_cmpfloat (chi2, <, 40.0);

  /* with the bound 3 * 2^30 a plain modulo would put 5/8 of the draws in
   * the lower half; the rejection keeps it at 1/2 */
  int low = 0;
  for (int i = 0; i < ndraws; i++)
    low += shoal_rng_below (&rng, 0xc0000000u) < 0x60000000u;
  g_assert_cmpfloat (fabs ((double) low / ndraws - 0.5), <, 5 * sqrt (0.25 / ndraws));
}

static int
cmp_u32 (const void *a, const void *b)
{
  uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;
  return (x > y) - (x < y);
}

static void
test_shuffle_is_permutation (void)
{
  enum { N = 1000 };
  uint32_t items[N], again[N];
  for (uint32_t i = 0; i < N; i++)
    items[i] = again[i] = i;

  ShoalRng rng, rng2;
  shoal_rng_seed (&rng, 11, 0);
  shoal_rng_seed (&rng2, 11, 0);
  shoal_rng_shuffle_u32 (&rng, items, N);
  shoal_rng_shuffle_u32 (&rng2, again, N);
  g_assert_cmpmem (items, sizeof items, again, sizeof again);

  int fixed = 0;
  for (uint32_t i = 0; i < N; i++)
    fixed += items[i] == i;
  /* a random permutation has on average one fixed point */
  g_assert_cmpint (fixed, <, 10);

  qsort (items, N, sizeof items[0], cmp_u32);
  for (uint32_t i = 0; i < N; i++)
    g_assert_cmpuint (items[i], ==, i);

  /* every item lands in the first slot equally often */
  int first[5] = { 0 };
  const int nshuffles = 50000;
  for (int s = 0; s < nshuffles; s++)
    {
      uint32_t small[5] = { 0, 1, 2, 3, 4 };
      shoal_rng_shuffle_u32 (&rng, small, 5);
      first[small[0]]++;
    }
  for (int k = 0; k < 5; k++)
    g_assert_cmpfloat (fabs (first[k] / (double) nshuffles - 0.2), <, 5 * sqrt (0.16 / nshuffles));

  /* n = 0 and 1 are no-ops */
  uint32_t one = 17;
  shoal_rng_shuffle_u32 (&rng, &one, 1);
  shoal_rng_shuffle_u32 (&rng, NULL, 0);
  g_assert_cmpuint (one, ==, 17);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/rng/determinism", test_same_seed_same_sequence);
  g_test_add_func ("/rng/streams-differ", test_streams_and_seeds_differ);
  g_test_add_func ("/rng/uniform", test_uniform_moments);
  g_test_add_func ("/rng/gaussian", test_gaussian_moments);
  g_test_add_func ("/rng/below", test_below_in_range);
  g_test_add_func ("/rng/shuffle", test_shuffle_is_permutation);
  return g_test_run ();
}
