/* Vectorisable exp and tanh for the activation and loss layers.
 *
 * Why not expf/tanhf: glibc's scalar calls keep GCC from vectorising a
 * loop (libmvec needs -ffast-math), so a sigmoid over a 64x1024 batch
 * ran at 3.5 ns per element; these branch-free versions inline into the
 * loop and run at 1.4 ns per element with SSE2 (measured on the 2-core
 * Zen 3 VM).  Relative error below 4e-7 over the whole float range;
 * inputs are clamped so the result never overflows to inf (exp(88) is
 * the largest value returned, exp(x) for x < -87 returns exp(-87)).
 * NaN stays NaN.
 *
 * Loops calling these vectorise only when the file is compiled with
 * tree-vectorize and no-trapping-math (the clamps and selects are float
 * compares); the files that use them say so with a #pragma GCC optimize
 * before their first #include. */
#ifndef SHOAL_LAYERS_VMATH_H
#define SHOAL_LAYERS_VMATH_H

#include <stdint.h>
#include <string.h>

static inline float
shoal_vexpf (float x)
{
  const float log2e = 1.44269504088896341f;
  /* ln 2 split so that n * ln2_hi is exact for |n| < 2^11 */
  const float ln2_hi = 0.693145751953125f;
  const float ln2_lo = 1.42860682030941723212e-6f;
  /* adding and subtracting 1.5 * 2^23 rounds to the nearest integer */
  const float round_magic = 12582912.0f;

  x = x > 88.0f ? 88.0f : x;
  x = x < -87.0f ? -87.0f : x;
  float n = (x * log2e + round_magic) - round_magic;
  float r = x - n * ln2_hi;
  r = r - n * ln2_lo;
  /* |r| <= ln2 / 2: Taylor to r^6 leaves a relative error near 1e-7 */
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  /* 2^n built in the exponent field; n is in [-126, 127] after the clamp */
  int32_t bits = ((int32_t) n + 127) << 23;
  float scale;
  memcpy (&scale, &bits, sizeof scale);
  return p * scale;
}

static inline float
shoal_vtanhf (float x)
{
  float ax = x < 0.0f ? -x : x;
  /* 1 - 2 / (e^2|x| + 1) cancels for small |x|: use the series there */
  float e = shoal_vexpf (2.0f * ax);
  float big = 1.0f - 2.0f / (e + 1.0f);
  float x2 = ax * ax;
  float small = ax * (1.0f + x2 * (-1.0f / 3.0f + x2 * (2.0f / 15.0f
                 + x2 * (-17.0f / 315.0f + x2 * (62.0f / 2835.0f)))));
  float t = ax < 0.25f ? small : big;
  return x < 0.0f ? -t : t;
}

static inline float
shoal_vsigmoidf (float x)
{
  return 1.0f / (1.0f + shoal_vexpf (-x));
}

#endif
