/* The conversions of [job] precision = bf16 (kernels_bf16.cu): an FP32
 * NCHW tensor into the bfloat16 NHWC ("channels last") copy a tensor-core
 * convolution reads, and back after it wrote its result.  A filter
 * (K, C, R, S) converts as a tensor of K rows of C channels of R x S.
 * bfloat16 values travel as uint16_t here (their bit pattern), so this
 * header needs no CUDA C++ type.  Rounding is to the nearest, ties to
 * even (__float2bfloat16_rn), as PyTorch's casts. */
#ifndef SHOAL_GPU_KERNELS_BF16_H
#define SHOAL_GPU_KERNELS_BF16_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* y[(i * plane + p) * channels + c] = bf16 (x[(i * channels + c) * plane + p])
 * for rows i < n, channels c, positions p < plane */
cudaError_t shoal_k_to_bf16_nhwc (const float *x, uint16_t *y, int n, int channels, size_t plane,
                                  cudaStream_t s);
/* The way back: y[(i * channels + c) * plane + p] = float (x[(i * plane + p)
 * * channels + c]) + (bias ? bias[c] : 0), added to y's value when `add`
 * (a gradient added into an FP32 one) */
cudaError_t shoal_k_from_bf16_nhwc (const uint16_t *x, const float *bias, float *y, int n, int channels,
                                    size_t plane, int add, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
