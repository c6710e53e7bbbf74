/* The wire encodings of codec.h.  The 16-bit conversions are the
 * branch-light bit manipulations of F. Giesen's public-domain "half"
 * notes (round to nearest even, subnormals exact), written per value so
 * that the compiler vectorises the loops; the quantisers work block by
 * block: one pass for the block's statistic, one for the codes. */
#include "core/codec.h"

#include <math.h>
#include <string.h>

/* Not under TSan (as in updater.c): the clones' ifunc resolver runs while
 * the dynamic linker relocates, before TSan's runtime is up, and the
 * instrumented resolver crashes every program at start. */
#if defined(__x86_64__) && defined(__has_attribute) && !defined(__SANITIZE_THREAD__)
#if __has_attribute(target_clones)
#define HOT_LOOP __attribute__ ((target_clones ("avx2", "default")))
#endif
#endif
#ifndef HOT_LOOP
#define HOT_LOOP
#endif

static const char *const codec_names[] = {
  [SHOAL_CODEC_FP32] = "fp32",
  [SHOAL_CODEC_FP16] = "fp16",
  [SHOAL_CODEC_BF16] = "bf16",
  [SHOAL_CODEC_2BIT] = "2bit",
  [SHOAL_CODEC_1BIT] = "1bit",
};
G_STATIC_ASSERT (G_N_ELEMENTS (codec_names) == SHOAL_CODEC_COUNT);

const char *
shoal_codec_name (ShoalCodec codec)
{
  g_return_val_if_fail ((unsigned) codec < SHOAL_CODEC_COUNT, NULL);
  return codec_names[codec];
}

gboolean
shoal_codec_parse (const char *name, ShoalCodec *codec)
{
  for (int c = 0; c < SHOAL_CODEC_COUNT; c++)
    if (strcmp (name, codec_names[c]) == 0)
      {
        *codec = (ShoalCodec) c;
        return TRUE;
      }
  return FALSE;
}

gboolean
shoal_codec_lossy_feedback (ShoalCodec codec)
{
  return codec == SHOAL_CODEC_2BIT || codec == SHOAL_CODEC_1BIT;
}

/* block: header floats, then the codes */
#define BITS_2 2
#define BITS_1 1
static size_t
block_bytes (int bits, size_t values, int header_floats)
{
  return (size_t) header_floats * sizeof (float) + (values * (size_t) bits + 7) / 8;
}

static size_t
quantised_bytes (int bits, int header_floats, size_t n)
{
  size_t full = n / SHOAL_CODEC_BLOCK, rest = n % SHOAL_CODEC_BLOCK;
  return full * block_bytes (bits, SHOAL_CODEC_BLOCK, header_floats)
         + (rest > 0 ? block_bytes (bits, rest, header_floats) : 0);
}

size_t
shoal_codec_bytes (ShoalCodec codec, size_t n)
{
  switch (codec)
    {
    case SHOAL_CODEC_FP32:
      return n * sizeof (float);
    case SHOAL_CODEC_FP16:
    case SHOAL_CODEC_BF16:
      return n * sizeof (guint16);
    case SHOAL_CODEC_2BIT:
      return quantised_bytes (BITS_2, 2, n);
    case SHOAL_CODEC_1BIT:
      return quantised_bytes (BITS_1, 2, n);
    default:
      g_return_val_if_reached (0);
    }
}

/* ---- 16-bit floats ---------------------------------------------------------- */

static inline guint32
bits_of (float f)
{
  guint32 u;
  memcpy (&u, &f, sizeof u);
  return u;
}

static inline float
float_of (guint32 u)
{
  float f;
  memcpy (&f, &u, sizeof f);
  return f;
}

static inline guint16
to_half (float value)
{
  const guint32 f32_infinity = 255u << 23;
  const guint32 f16_overflow = (127u + 16u) << 23;
  const guint32 denorm_magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  guint32 x = bits_of (value);
  guint32 sign = x & 0x80000000u;
  guint16 h;
  x ^= sign;
  if (x >= f16_overflow)
    h = x > f32_infinity ? 0x7e00 : 0x7c00;   /* NaN stays NaN, too large: infinity */
  else if (x < (113u << 23))
    /* subnormal or zero: the float addition rounds to nearest even */
    h = (guint16) (bits_of (float_of (x) + float_of (denorm_magic)) - denorm_magic);
  else
    {
      guint32 mantissa_odd = (x >> 13) & 1u;
      x += ((15u - 127u) << 23) + 0xfffu;
      x += mantissa_odd;
      h = (guint16) (x >> 13);
    }
  return (guint16) (h | (sign >> 16));
}

static inline float
from_half (guint16 h)
{
  const guint32 shifted_exp = 0x7c00u << 13;
  guint32 o = (guint32) (h & 0x7fffu) << 13;
  guint32 exp = shifted_exp & o;
  o += (127u - 15u) << 23;
  if (exp == shifted_exp)
    o += (128u - 16u) << 23;                    /* infinity or NaN */
  else if (exp == 0)
    {
      o += 1u << 23;                            /* zero or subnormal: renormalise */
      o = bits_of (float_of (o) - float_of (113u << 23));
    }
  return float_of (o | ((guint32) (h & 0x8000u) << 16));
}

static inline guint16
to_bf16 (float value)
{
  guint32 x = bits_of (value);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return (guint16) ((x >> 16) | 0x40u);       /* NaN: keep it a (quiet) NaN */
  x += 0x7fffu + ((x >> 16) & 1u);
  return (guint16) (x >> 16);
}

static inline float
from_bf16 (guint16 b)
{
  return float_of ((guint32) b << 16);
}

HOT_LOOP static void
encode_half (const float *restrict src, guint16 *restrict out, size_t n)
{
  for (size_t i = 0; i < n; i++)
    out[i] = to_half (src[i]);
}

HOT_LOOP static void
decode_half (const guint16 *restrict in, float *restrict out, size_t n)
{
  for (size_t i = 0; i < n; i++)
    out[i] = from_half (in[i]);
}

HOT_LOOP static void
encode_bf16 (const float *restrict src, guint16 *restrict out, size_t n)
{
  for (size_t i = 0; i < n; i++)
    out[i] = to_bf16 (src[i]);
}

HOT_LOOP static void
decode_bf16 (const guint16 *restrict in, float *restrict out, size_t n)
{
  for (size_t i = 0; i < n; i++)
    out[i] = from_bf16 (in[i]);
}

/* ---- quantisers with error feedback ------------------------------------------ */

/* v = src + residual, into v (the block's working copy) */
static void
compensate (const float *restrict src, const float *restrict residual, float *restrict v, size_t n)
{
  for (size_t i = 0; i < n; i++)
    v[i] = src[i] + (residual != NULL ? residual[i] : 0.0f);
}

static void
encode_2bit_block (const float *src, float *residual, size_t n, guint8 *out)
{
  float v[SHOAL_CODEC_BLOCK];
  double sum = 0, pos = 0, neg = 0;
  size_t npos = 0, nneg = 0;
  compensate (src, residual, v, n);
  for (size_t i = 0; i < n; i++)
    sum += fabsf (v[i]);
  /* the threshold: the block's mean |v|; a value past it is sent as the
   * mean of the values past it on its side */
  float t = (float) (sum / (double) n);
  for (size_t i = 0; i < n && t > 0; i++)
    if (v[i] >= t)
      pos += v[i], npos++;
    else if (v[i] <= -t)
      neg += v[i], nneg++;
  float level[3] = { 0.0f, npos > 0 ? (float) (pos / (double) npos) : 0.0f,
                     nneg > 0 ? (float) (neg / (double) nneg) : 0.0f };
  memcpy (out, level + 1, 2 * sizeof (float));
  guint8 *codes = out + 2 * sizeof (float);
  memset (codes, 0, (n * BITS_2 + 7) / 8);
  for (size_t i = 0; i < n; i++)
    {
      guint8 code = t > 0 && v[i] >= t ? 1 : t > 0 && v[i] <= -t ? 2 : 0;
      codes[i / 4] |= (guint8) (code << (2 * (i % 4)));
      if (residual != NULL)
        residual[i] = v[i] - level[code];
    }
}

static gboolean
decode_2bit_block (const guint8 *in, float *out, size_t n)
{
  float level[3] = { 0.0f, 0.0f, 0.0f };
  memcpy (level + 1, in, 2 * sizeof (float));
  const guint8 *codes = in + 2 * sizeof (float);
  for (size_t i = 0; i < n; i++)
    {
      guint8 code = (codes[i / 4] >> (2 * (i % 4))) & 3u;
      if (code == 3)
        return FALSE;
      out[i] = level[code];
    }
  /* the unused codes of a last partial byte must be 0 */
  if (n % 4 != 0 && (codes[n / 4] >> (2 * (n % 4))) != 0)
    return FALSE;
  return TRUE;
}

static void
encode_1bit_block (const float *src, float *residual, size_t n, guint8 *out)
{
  float v[SHOAL_CODEC_BLOCK];
  double pos = 0, neg = 0;
  size_t npos = 0;
  compensate (src, residual, v, n);
  for (size_t i = 0; i < n; i++)
    if (v[i] >= 0)
      pos += v[i], npos++;
    else
      neg += v[i];
  float mean[2] = { n > npos ? (float) (neg / (double) (n - npos)) : 0.0f,
                    npos > 0 ? (float) (pos / (double) npos) : 0.0f };
  memcpy (out, mean, sizeof mean);
  guint8 *bits = out + sizeof mean;
  memset (bits, 0, (n + 7) / 8);
  for (size_t i = 0; i < n; i++)
    {
      int b = v[i] >= 0;
      bits[i / 8] |= (guint8) (b << (i % 8));
      if (residual != NULL)
        residual[i] = v[i] - mean[b];
    }
}

static gboolean
decode_1bit_block (const guint8 *in, float *out, size_t n)
{
  float mean[2];
  memcpy (mean, in, sizeof mean);
  const guint8 *bits = in + sizeof mean;
  for (size_t i = 0; i < n; i++)
    out[i] = mean[(bits[i / 8] >> (i % 8)) & 1u];
  if (n % 8 != 0 && (bits[n / 8] >> (n % 8)) != 0)
    return FALSE;
  return TRUE;
}

void
shoal_codec_encode (ShoalCodec codec, const float *src, float *residual, size_t n, guint8 *out)
{
  switch (codec)
    {
    case SHOAL_CODEC_FP32:
      memcpy (out, src, n * sizeof (float));
      break;
    case SHOAL_CODEC_FP16:
      encode_half (src, (guint16 *) (void *) out, n);
      break;
    case SHOAL_CODEC_BF16:
      encode_bf16 (src, (guint16 *) (void *) out, n);
      break;
    case SHOAL_CODEC_2BIT:
    case SHOAL_CODEC_1BIT:
      {
        gboolean two = codec == SHOAL_CODEC_2BIT;
        for (size_t b = 0; b < n; b += SHOAL_CODEC_BLOCK)
          {
            size_t len = MIN ((size_t) SHOAL_CODEC_BLOCK, n - b);
            float *r = residual != NULL ? residual + b : NULL;
            if (two)
              encode_2bit_block (src + b, r, len, out);
            else
              encode_1bit_block (src + b, r, len, out);
            out += block_bytes (two ? BITS_2 : BITS_1, len, 2);
          }
      }
      break;
    default:
      g_return_if_reached ();
    }
}

gboolean
shoal_codec_decode (ShoalCodec codec, const guint8 *in, size_t bytes, float *out, size_t n)
{
  if ((unsigned) codec >= SHOAL_CODEC_COUNT || bytes != shoal_codec_bytes (codec, n))
    return FALSE;
  switch (codec)
    {
    case SHOAL_CODEC_FP32:
      memcpy (out, in, bytes);
      return TRUE;
    case SHOAL_CODEC_FP16:
      {
        /* the wire's bytes need not be 2-byte aligned */
        if (((guintptr) in & 1u) == 0)
          decode_half ((const guint16 *) (const void *) in, out, n);
        else
          for (size_t i = 0; i < n; i++)
            {
              guint16 h;
              memcpy (&h, in + 2 * i, sizeof h);
              out[i] = from_half (h);
            }
        return TRUE;
      }
    case SHOAL_CODEC_BF16:
      if (((guintptr) in & 1u) == 0)
        decode_bf16 ((const guint16 *) (const void *) in, out, n);
      else
        for (size_t i = 0; i < n; i++)
          {
            guint16 b;
            memcpy (&b, in + 2 * i, sizeof b);
            out[i] = from_bf16 (b);
          }
      return TRUE;
    case SHOAL_CODEC_2BIT:
    case SHOAL_CODEC_1BIT:
      {
        gboolean two = codec == SHOAL_CODEC_2BIT;
        for (size_t b = 0; b < n; b += SHOAL_CODEC_BLOCK)
          {
            size_t len = MIN ((size_t) SHOAL_CODEC_BLOCK, n - b);
            if (!(two ? decode_2bit_block (in, out + b, len) : decode_1bit_block (in, out + b, len)))
              return FALSE;
            in += block_bytes (two ? BITS_2 : BITS_1, len, 2);
          }
        return TRUE;
      }
    default:
      return FALSE;
    }
}
