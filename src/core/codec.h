/* Smaller encodings of float32 tensors for the wire: values as 16-bit
 * floats, gradients quantised with error feedback.
 *
 *   fp32  4 bytes a value, as they are.
 *   fp16  IEEE binary16, rounded to nearest even (values beyond 65504
 *         become infinities: fine for weights and gradients of nets that
 *         train, which is why it is the values' option).
 *   bf16  the upper half of the float32, rounded to nearest even: float32's
 *         range with 8 bits of mantissa.
 *   2bit  2 bits a value: 0, or where |v| reaches a threshold t (the mean
 *         of |v| over the block of SHOAL_CODEC_BLOCK values) the mean of
 *         the block's values past t on that side, sent per block (MXNet's
 *         2-bit compression, with the threshold and the levels taken from
 *         the data instead of one fixed threshold).
 *   1bit  per block the mean of the values >= 0 and the mean of the others,
 *         and 1 bit a value saying which it gets (Seide et al. 2014, CNTK's
 *         1-bit SGD, per block of values instead of per matrix column).
 * The quantisers take the gradient plus the residual of earlier steps and
 * leave in `residual` what the encoding lost (error feedback), so that no
 * part of a gradient is ever dropped, only delayed.
 *
 * Decoding checks the length and the codes; any bits of a float header
 * decode (as any float32 a peer sends does). */
#ifndef SHOAL_CODEC_H
#define SHOAL_CODEC_H

#include <glib.h>
#include <stddef.h>

#include "core/device.h"

G_BEGIN_DECLS

typedef enum {
  SHOAL_CODEC_FP32 = 0,
  SHOAL_CODEC_FP16 = 1,
  SHOAL_CODEC_BF16 = 2,
  SHOAL_CODEC_2BIT = 3,
  SHOAL_CODEC_1BIT = 4,
  SHOAL_CODEC_COUNT
} ShoalCodec;

#define SHOAL_CODEC_BLOCK 256

const char *shoal_codec_name (ShoalCodec codec);
/* FALSE for an unknown name. */
gboolean shoal_codec_parse (const char *name, ShoalCodec *codec);
/* Whether the codec quantises (keeps a residual). */
gboolean shoal_codec_lossy_feedback (ShoalCodec codec);

/* Bytes that n values take in the codec. */
size_t shoal_codec_bytes (ShoalCodec codec, size_t n);

/* Encodes src (n values) into out (shoal_codec_bytes bytes).  For 2bit
 * and 1bit, residual (n values, may be NULL: no feedback) is added to src
 * first and then holds what the encoding lost; the other codecs ignore
 * it. */
void shoal_codec_encode (ShoalCodec codec, const float *src, float *residual, size_t n, guint8 *out);

/* Decodes `bytes` bytes of `in` into n values; FALSE when the length is
 * not the codec's for n values or a code is invalid. */
gboolean shoal_codec_decode (ShoalCodec codec, const guint8 *in, size_t bytes, float *out, size_t n);

/* The codecs on a GPU (the backend's kernels, src/gpu/kernels_codec.cu),
 * enqueued on `stream` (core/device.h) and working on device memory of
 * its GPU, so that only encoded bytes cross PCIe.  Encode: src's n
 * values, each multiplied by `scale` first where scale != 1 (the host's
 * shoal_push_mean) and zeroed as read with clear_src; the quantisers add
 * residual_in (NULL: no feedback) and leave what the encoding lost in
 * residual_out (NULL: nowhere; may be residual_in); out is 4-byte
 * aligned.  The bytes and the residual are shoal_codec_encode's to the
 * bit for the same input: the kernels make the same IEEE operations in
 * the same order (the block statistics of 2bit and 1bit as the host's
 * sequential double sums).  Decode: fp32, fp16 or bf16 (the values'
 * codecs), n values from `in` (4-byte aligned, the bytes checked by the
 * caller) into out.  Only where a GPU backend is registered; a launch
 * failure surfaces at the stream's next synchronisation. */
void shoal_codec_encode_on (ShoalStream *stream, ShoalCodec codec, float *src, float scale, gboolean clear_src,
                            const float *residual_in, float *residual_out, size_t n, guint8 *out);
void shoal_codec_decode_on (ShoalStream *stream, ShoalCodec codec, const guint8 *in, float *out, size_t n);

G_END_DECLS

#endif
