/* The conversions of [job] precision = bf16 (kernels_bf16.cu): FP32 to
 * bfloat16 before a convolution reads its operands, and back after it
 * wrote its result.  bfloat16 values travel as uint16_t here (their bit
 * pattern), so this header needs no CUDA C++ type.  Rounding is to the
 * nearest, ties to even (__float2bfloat16_rn), as PyTorch's casts. */
#ifndef SHOAL_GPU_KERNELS_BF16_H
#define SHOAL_GPU_KERNELS_BF16_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* y[i] = bf16 (x[i]) */
cudaError_t shoal_k_to_bf16 (const float *x, uint16_t *y, size_t n, cudaStream_t s);
/* y[i] = float (x[i]) + (bias ? bias[(i / inner) % channels] : 0): an NCHW
 * convolution's output and its per-channel bias in one pass */
cudaError_t shoal_k_from_bf16_bias (const uint16_t *x, const float *bias, float *y, size_t n, int channels,
                                    size_t inner, cudaStream_t s);
/* y[i] += float (x[i]): a bfloat16 gradient added into an FP32 one */
cudaError_t shoal_k_add_bf16 (const uint16_t *x, float *y, size_t n, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
