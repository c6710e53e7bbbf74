/* What the device codecs' tests share (test_gpu's /gpu/device-codecs on a
 * GPU, test/e2e/codec_kernels.sh's emulation without one): the inputs
 * every codec must treat as core/codec.c does, and the comparison of
 * floats with NaN equal to NaN (IEEE leaves which NaN an operation makes
 * to the processor). */
#ifndef SHOAL_TEST_CODEC_CASES_H
#define SHOAL_TEST_CODEC_CASES_H

#include <glib.h>
#include <string.h>

/* Signed zeros, float denormals, fp16's subnormals and their halfway
 * points, fp16's largest value and the first that rounds past it, ties
 * of both 16-bit roundings, float's extremes.  Infinities and NaN come
 * on top, in the "special" inputs (they poison a quantiser's block). */
static const float shoal_codec_edge_values[] = {
  0.0f, -0.0f, 1e-40f, -1.4e-45f, 1.17549435e-38f, 5.96046448e-08f, 2.98023224e-08f, -8.94069672e-08f,
  6.10351562e-05f, 65504.0f, 65520.0f, -65519.0f, 1.00048828125f, 1.00390625f, 1.0f + 1.0f / 256 + 1.0f / 512,
  3.40282347e+38f, -3.40282347e+38f, 1e-30f,
};

/* Two floats (at any alignment) that are the same bits, or both NaN. */
static inline gboolean
shoal_same_float (const void *a, const void *b)
{
  float x, y;
  memcpy (&x, a, sizeof x);
  memcpy (&y, b, sizeof y);
  return memcmp (a, b, sizeof x) == 0 || (x != x && y != y);
}

#endif
