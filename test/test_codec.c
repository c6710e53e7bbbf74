/* The wire encodings: 16-bit floats rounded to nearest even (checked
 * against the compiler's own _Float16 conversion where it has one, and
 * on the edge cases: ties, subnormals, overflow, NaN), bf16, the
 * quantisers' error feedback (what a step does not send is carried, so
 * the sum of what is sent tracks the sum of the gradients), their sizes,
 * and decoding that refuses a wrong length or an invalid code. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "core/codec.h"

static guint32
bits (float f)
{
  guint32 u;
  memcpy (&u, &f, sizeof u);
  return u;
}

static float
roundtrip (ShoalCodec c, float x)
{
  guint8 buf[8];
  float y;
  shoal_codec_encode (c, &x, NULL, 1, buf);
  g_assert_true (shoal_codec_decode (c, buf, shoal_codec_bytes (c, 1), &y, 1));
  return y;
}

static void
test_fp16 (void)
{
  /* exact values stay exact */
  const float exact[] = { 0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f /* min normal */,
                          5.960464477539063e-08f /* min subnormal */, 0.333251953125f };
  for (guint i = 0; i < G_N_ELEMENTS (exact); i++)
    g_assert_cmpuint (bits (roundtrip (SHOAL_CODEC_FP16, exact[i])), ==, bits (exact[i]));
  /* ties to even: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10 */
  g_assert_cmpfloat (roundtrip (SHOAL_CODEC_FP16, 1.0f + 0.00048828125f), ==, 1.0f);
  g_assert_cmpfloat (roundtrip (SHOAL_CODEC_FP16, 1.0f + 3 * 0.00048828125f), ==, 1.0f + 4 * 0.00048828125f);
  g_assert_true (isinf (roundtrip (SHOAL_CODEC_FP16, 70000.0f)));
  g_assert_true (isinf (roundtrip (SHOAL_CODEC_FP16, -INFINITY)) && roundtrip (SHOAL_CODEC_FP16, -INFINITY) < 0);
  g_assert_true (isnan (roundtrip (SHOAL_CODEC_FP16, NAN)));
  g_assert_cmpfloat (roundtrip (SHOAL_CODEC_FP16, 1e-9f), ==, 0.0f);
#ifdef __FLT16_MAX__
  /* the compiler's conversion is IEEE's: compare on random bit patterns */
  GRand *rand = g_rand_new_with_seed (7);
  for (int i = 0; i < 200000; i++)
    {
      guint32 u = g_rand_int (rand);
      float x;
      memcpy (&x, &u, sizeof x);
      if (isnan (x))
        continue;
      _Float16 h = (_Float16) x;
      float want = (float) h;
      float got = roundtrip (SHOAL_CODEC_FP16, x);
      if (bits (got) != bits (want))
        g_error ("fp16 of %a: %a, the compiler says %a", (double) x, (double) got, (double) want);
    }
  g_rand_free (rand);
#endif
}

static void
test_bf16 (void)
{
  g_assert_cmpfloat (roundtrip (SHOAL_CODEC_BF16, 1.0f), ==, 1.0f);
  /* 1 + 2^-8 ties to 1; 1 + 3 * 2^-8 to 1 + 2^-6 */
  g_assert_cmpfloat (roundtrip (SHOAL_CODEC_BF16, 1.0f + 0.00390625f), ==, 1.0f);
  g_assert_cmpfloat (roundtrip (SHOAL_CODEC_BF16, 1.0f + 3 * 0.00390625f), ==, 1.0f + 0.015625f);
  g_assert_true (isnan (roundtrip (SHOAL_CODEC_BF16, NAN)));
  g_assert_true (isinf (roundtrip (SHOAL_CODEC_BF16, INFINITY)));
  /* relative error at most 2^-8 (8 bits of mantissa) */
  for (int i = 1; i < 10000; i++)
    {
      float x = (float) i * 0.37f - 1700.0f;
      float y = roundtrip (SHOAL_CODEC_BF16, x);
      g_assert_cmpfloat (fabsf (y - x), <=, fabsf (x) / 256.0f);
    }
}

static void
test_sizes (void)
{
  g_assert_cmpuint (shoal_codec_bytes (SHOAL_CODEC_FP32, 1000), ==, 4000);
  g_assert_cmpuint (shoal_codec_bytes (SHOAL_CODEC_FP16, 1000), ==, 2000);
  g_assert_cmpuint (shoal_codec_bytes (SHOAL_CODEC_BF16, 1000), ==, 2000);
  /* 2bit: per 256 values two floats and 64 bytes; 1bit: two floats and 32 */
  g_assert_cmpuint (shoal_codec_bytes (SHOAL_CODEC_2BIT, 512), ==, 2 * 72);
  g_assert_cmpuint (shoal_codec_bytes (SHOAL_CODEC_2BIT, 257), ==, 72 + 8 + 1);
  g_assert_cmpuint (shoal_codec_bytes (SHOAL_CODEC_1BIT, 512), ==, 2 * 40);
  g_assert_cmpuint (shoal_codec_bytes (SHOAL_CODEC_1BIT, 9), ==, 8 + 2);
  ShoalCodec c;
  g_assert_true (shoal_codec_parse ("1bit", &c) && c == SHOAL_CODEC_1BIT);
  g_assert_false (shoal_codec_parse ("3bit", &c));
  g_assert_cmpstr (shoal_codec_name (SHOAL_CODEC_BF16), ==, "bf16");
}

/* Over many steps the quantised sum tracks the true one: what was not
 * sent is in the residual, nothing is lost. */
static void
check_feedback (ShoalCodec c, size_t n)
{
  float *g = g_new (float, n), *r = g_new0 (float, n), *sent = g_new (float, n);
  double *sum_g = g_new0 (double, n), *sum_sent = g_new0 (double, n);
  guint8 *buf = g_malloc (shoal_codec_bytes (c, n));
  GRand *rand = g_rand_new_with_seed (3);
  for (int step = 0; step < 200; step++)
    {
      for (size_t i = 0; i < n; i++)
        {
          g[i] = (float) g_rand_double_range (rand, -1, 1) * 1e-3f * (float) (1 + i % 5);
          sum_g[i] += g[i];
        }
      shoal_codec_encode (c, g, r, n, buf);
      g_assert_true (shoal_codec_decode (c, buf, shoal_codec_bytes (c, n), sent, n));
      for (size_t i = 0; i < n; i++)
        sum_sent[i] += sent[i];
    }
  /* sum sent + residual = sum of gradients, up to float rounding */
  for (size_t i = 0; i < n; i++)
    if (fabs (sum_sent[i] + r[i] - sum_g[i]) > 1e-5)
      g_error ("%s value %zu: sent %g + residual %g != %g", shoal_codec_name (c), i, sum_sent[i],
               (double) r[i], sum_g[i]);
  g_rand_free (rand);
  g_free (g);
  g_free (r);
  g_free (sent);
  g_free (sum_g);
  g_free (sum_sent);
  g_free (buf);
}

static void
test_feedback (void)
{
  check_feedback (SHOAL_CODEC_2BIT, 1000);
  check_feedback (SHOAL_CODEC_1BIT, 1000);
  check_feedback (SHOAL_CODEC_1BIT, 3);
  /* 1bit of one block: the two means */
  float v[4] = { 1, 3, -2, -4 }, out[5];
  guint8 buf[16];
  shoal_codec_encode (SHOAL_CODEC_1BIT, v, NULL, 4, buf);
  g_assert_true (shoal_codec_decode (SHOAL_CODEC_1BIT, buf, shoal_codec_bytes (SHOAL_CODEC_1BIT, 4), out, 4));
  g_assert_cmpfloat (out[0], ==, 2);
  g_assert_cmpfloat (out[1], ==, 2);
  g_assert_cmpfloat (out[2], ==, -3);
  g_assert_cmpfloat (out[3], ==, -3);
  /* 2bit: the threshold is the mean |v| = 3; past it 3 and 5 (mean 4) and -4 */
  float w[5] = { 1, 3, -2, -4, 5 };
  shoal_codec_encode (SHOAL_CODEC_2BIT, w, NULL, 5, buf);
  g_assert_true (shoal_codec_decode (SHOAL_CODEC_2BIT, buf, shoal_codec_bytes (SHOAL_CODEC_2BIT, 5), out, 5));
  g_assert_cmpfloat (out[0], ==, 0);
  g_assert_cmpfloat (out[1], ==, 4);
  g_assert_cmpfloat (out[2], ==, 0);
  g_assert_cmpfloat (out[3], ==, -4);
  g_assert_cmpfloat (out[4], ==, 4);
}

static void
test_refusals (void)
{
  float out[16];
  guint8 buf[64] = { 0 };
  g_assert_false (shoal_codec_decode (SHOAL_CODEC_FP16, buf, 7, out, 4));
  g_assert_false (shoal_codec_decode (SHOAL_CODEC_1BIT, buf, 11, out, 9));
  g_assert_false (shoal_codec_decode ((ShoalCodec) 9, buf, 4, out, 1));
  /* 2bit: code 3 is no code */
  buf[8] = 0x3;
  g_assert_false (shoal_codec_decode (SHOAL_CODEC_2BIT, buf, shoal_codec_bytes (SHOAL_CODEC_2BIT, 4), out, 4));
  /* codes past the last value */
  memset (buf, 0, sizeof buf);
  buf[8] = 0x40;
  g_assert_false (shoal_codec_decode (SHOAL_CODEC_2BIT, buf, shoal_codec_bytes (SHOAL_CODEC_2BIT, 3), out, 3));
  memset (buf, 0, sizeof buf);
  buf[8] = 0x80;
  g_assert_false (shoal_codec_decode (SHOAL_CODEC_1BIT, buf, shoal_codec_bytes (SHOAL_CODEC_1BIT, 5), out, 5));
  /* an odd address decodes as an even one */
  float x[3] = { 1.5f, -2.25f, 1e-3f };
  guint8 wire[1 + 6];
  shoal_codec_encode (SHOAL_CODEC_FP16, x, NULL, 3, buf);
  memcpy (wire + 1, buf, 6);
  g_assert_true (shoal_codec_decode (SHOAL_CODEC_FP16, wire + 1, 6, out, 3));
  g_assert_cmpfloat (out[1], ==, -2.25f);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/codec/fp16", test_fp16);
  g_test_add_func ("/codec/bf16", test_bf16);
  g_test_add_func ("/codec/sizes", test_sizes);
  g_test_add_func ("/codec/feedback", test_feedback);
  g_test_add_func ("/codec/refusals", test_refusals);
  return g_test_run ();
}
