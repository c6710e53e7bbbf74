/* The wire codecs of core/codec.h as CUDA kernels (kernels_codec.cu),
 * launched from C (src/gpu/codec.c): plain pointers and numbers only, as
 * in kernels.h.  They make core/codec.c's operations in its order, so
 * that a device encoding is the host's byte for byte. */
#ifndef SHOAL_GPU_KERNELS_CODEC_H
#define SHOAL_GPU_KERNELS_CODEC_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* core/codec.h's ShoalCodec, without GLib */
typedef enum {
  SHOAL_K_CODEC_FP32 = 0,
  SHOAL_K_CODEC_FP16 = 1,
  SHOAL_K_CODEC_BF16 = 2,
  SHOAL_K_CODEC_2BIT = 3,
  SHOAL_K_CODEC_1BIT = 4
} ShoalKCodec;

/* Encodes g[0, n) - each value times scale first where scale != 1, and
 * zeroed as read when clear - into out (4-byte aligned).  The quantisers
 * add rin (NULL: zeroes) first and write what the encoding lost into
 * rout (NULL: nowhere; may be rin); block = SHOAL_CODEC_BLOCK. */
cudaError_t shoal_k_codec_encode (ShoalKCodec codec, float *g, float scale, int clear, const float *rin, float *rout,
                                  size_t n, unsigned char *out, int block, cudaStream_t s);

/* Decodes n values of fp32, fp16 or bf16 (in 4-byte aligned) into out. */
cudaError_t shoal_k_codec_decode (ShoalKCodec codec, const unsigned char *in, float *out, size_t n, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
