// test/e2e/codec_kernels.sh's driver: src/gpu/kernels_codec.cu run on the
// host (lib/cuda_emulation.h) against core/codec.c, the cases of
// test_gpu's /gpu/device-codecs and /gpu/device-decode (smaller), so that
// a change to either side that the other does not follow shows on a
// machine without a GPU.  NaN's bits aside, as there (the host's x86 and
// the emulation may pick another NaN than a GPU does).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

extern "C" {
#include "core/codec.h"
#include "gpu/kernels_codec.h"
}
#include "support/codec_cases.h"

namespace {

std::mt19937 rng (11);
int failures = 0;

float
input (bool special)
{
  if (rng () % 16 == 0)
    {
      const float s[] = { INFINITY, -INFINITY, NAN, -NAN };
      if (special && rng () % 2)
        return s[rng () % 4];
      return shoal_codec_edge_values[rng () % G_N_ELEMENTS (shoal_codec_edge_values)];
    }
  return (float) std::ldexp (std::uniform_real_distribution<double> (-1, 1) (rng), (int) (rng () % 53) - 40);
}

// bitwise, but a quantiser's levels as floats with NaN equal to NaN
bool
same_encoding (ShoalCodec codec, size_t n, const unsigned char *h, const unsigned char *d)
{
  if (!shoal_codec_lossy_feedback (codec))
    return memcmp (h, d, shoal_codec_bytes (codec, n)) == 0;
  size_t bits = codec == SHOAL_CODEC_2BIT ? 2 : 1;
  for (size_t b = 0; b < n; b += SHOAL_CODEC_BLOCK)
    {
      size_t len = n - b < SHOAL_CODEC_BLOCK ? n - b : SHOAL_CODEC_BLOCK, codes = (len * bits + 7) / 8;
      if (!shoal_same_float (h, d) || !shoal_same_float (h + 4, d + 4) || memcmp (h + 8, d + 8, codes) != 0)
        return false;
      h += 8 + codes;
      d += 8 + codes;
    }
  return true;
}

void
fail (ShoalCodec codec, size_t n, bool special, float scale, int step, const char *what)
{
  std::printf ("%s, %zu values%s, scale %g, step %d: the %s differ from core/codec.c's\n", shoal_codec_name (codec), n,
               special ? " with infinities and NaN" : "", scale, step, what);
  failures++;
}

// three steps with the residual carried, the kernels' residual in and
// out apart (or one buffer, in_place), as the param client keeps them
void
check (ShoalCodec codec, size_t n, bool special, float scale, bool in_place)
{
  size_t bytes = shoal_codec_bytes (codec, n);
  bool lossy = shoal_codec_lossy_feedback (codec);
  std::vector<float> src (n), residual (n, 0.0f), rin (n, 0.0f), rout (n, 0.0f);
  std::vector<unsigned char> host (bytes + 4), dev (bytes + 4);
  for (int step = 0; step < 3; step++)
    {
      for (float &v : src)
        v = input (special);
      if (step == 0 && n >= 3 * SHOAL_CODEC_BLOCK)
        for (size_t i = 0; i < SHOAL_CODEC_BLOCK; i++)
          {
            src[i] = 0.0f;
            src[SHOAL_CODEC_BLOCK + i] = -std::fabs (src[SHOAL_CODEC_BLOCK + i]);
          }
      std::vector<float> grad = src;
      if (scale != 1.0f)
        for (float &v : src)
          v *= scale;
      shoal_codec_encode (codec, src.data (), lossy ? residual.data () : nullptr, n, host.data ());
      float *out_residual = in_place ? rin.data () : rout.data ();
      if (shoal_k_codec_encode ((ShoalKCodec) codec, grad.data (), scale, 1, lossy ? rin.data () : nullptr,
                                lossy ? out_residual : nullptr, n, dev.data (), SHOAL_CODEC_BLOCK, nullptr)
          != cudaSuccess)
        fail (codec, n, special, scale, step, "launch's status");
      if (!same_encoding (codec, n, host.data (), dev.data ()))
        fail (codec, n, special, scale, step, "bytes");
      bool same_residual = true;
      for (size_t i = 0; i < n && lossy; i++)
        same_residual = same_residual && shoal_same_float (&residual[i], &out_residual[i]);
      if (!same_residual)
        fail (codec, n, special, scale, step, "residuals");
      for (float v : grad)
        if (v != 0.0f)
          {
            fail (codec, n, special, scale, step, "cleared gradients");
            break;
          }
      if (!in_place)
        std::swap (rin, rout);
    }
}

}  // namespace

int
main ()
{
  const size_t lengths[] = { 1, 3, 7, 255, 256, 257, 1000 };
  int cases = 0;
  for (int c = 0; c < SHOAL_CODEC_COUNT; c++)
    {
      for (size_t n : lengths)
        for (int special = 0; special < 2; special++, cases++)
          check ((ShoalCodec) c, n, special, 1.0f, false);
      check ((ShoalCodec) c, 1000, false, 1.0f / 3.0f, false);
      check ((ShoalCodec) c, 1000, true, 1.0f, true);
      cases += 2;
    }
  // every fp16 and bf16 pattern, and as many fp32 ones
  std::vector<unsigned short> codes (65536);
  for (size_t i = 0; i < codes.size (); i++)
    codes[i] = (unsigned short) i;
  std::vector<float> host (65536), dev (65536);
  for (ShoalCodec c : { SHOAL_CODEC_FP16, SHOAL_CODEC_BF16, SHOAL_CODEC_FP32 })
    {
      size_t count = c == SHOAL_CODEC_FP32 ? 32768 : 65536;
      const unsigned char *in = (const unsigned char *) codes.data ();
      shoal_codec_decode (c, in, shoal_codec_bytes (c, count), host.data (), count);
      if (shoal_k_codec_decode ((ShoalKCodec) c, in, dev.data (), count, nullptr) != cudaSuccess
          || memcmp (host.data (), dev.data (), count * sizeof (float)) != 0)
        {
          std::printf ("%s: the decoded values differ from core/codec.c's\n", shoal_codec_name (c));
          failures++;
        }
      cases++;
    }
  std::printf ("%d cases, %d failures\n", cases, failures);
  return failures != 0;
}
