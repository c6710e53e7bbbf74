/* PCG32 (O'Neill, pcg-random.org): small state, good statistics. */
#include "core/rng.h"

#include <math.h>

void
shoal_rng_seed (ShoalRng *rng, uint64_t seed, uint64_t stream)
{
  g_return_if_fail (rng != NULL);
  rng->state = 0;
  rng->inc = (stream << 1) | 1u;
  shoal_rng_u32 (rng);
  rng->state += seed;
  shoal_rng_u32 (rng);
}

uint32_t
shoal_rng_u32 (ShoalRng *rng)
{
  uint64_t old = rng->state;
  rng->state = old * 6364136223846793005ULL + rng->inc;
  uint32_t xorshifted = (uint32_t) (((old >> 18u) ^ old) >> 27u);
  uint32_t rot = (uint32_t) (old >> 59u);
  return (xorshifted >> rot) | (xorshifted << ((-rot) & 31));
}

uint32_t
shoal_rng_below (ShoalRng *rng, uint32_t bound)
{
  /* [0, 0) is empty: 0 would divide by zero below */
  g_return_val_if_fail (bound > 0, 0);
  /* rejection keeps the draw unbiased */
  uint32_t threshold = (-bound) % bound;
  for (;;)
    {
      uint32_t r = shoal_rng_u32 (rng);
      if (r >= threshold)
        return r % bound;
    }
}

float
shoal_rng_uniform (ShoalRng *rng)
{
  return (float) (shoal_rng_u32 (rng) >> 8) * (1.0f / 16777216.0f);
}

float
shoal_rng_gaussian (ShoalRng *rng)
{
  /* Box-Muller without a cached second value, so the state stays 16 bytes */
  double u1 = ((double) shoal_rng_u32 (rng) + 1.0) / 4294967297.0;
  double u2 = (double) shoal_rng_u32 (rng) / 4294967296.0;
  return (float) (sqrt (-2.0 * log (u1)) * cos (2.0 * G_PI * u2));
}

void
shoal_rng_shuffle_u32 (ShoalRng *rng, uint32_t *items, size_t n)
{
  g_return_if_fail (rng != NULL && (items != NULL || n == 0));
  for (size_t i = n; i > 1; i--)
    {
      uint32_t j = shoal_rng_below (rng, (uint32_t) i);
      uint32_t tmp = items[i - 1];
      items[i - 1] = items[j];
      items[j] = tmp;
    }
}
