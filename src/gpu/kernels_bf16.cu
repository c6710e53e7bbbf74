// The bfloat16 conversions of kernels_bf16.h: grid-stride elementwise loops.
#include "gpu/kernels_bf16.h"

#include <cuda_bf16.h>

namespace {

const int kThreads = 256;

int
blocks_for (size_t n)
{
  size_t b = (n + kThreads - 1) / kThreads;
  return (int) (b < 4096 ? b : 4096);
}

__global__ void
to_bf16 (const float *x, __nv_bfloat16 *y, size_t n)
{
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n; i += (size_t) gridDim.x * blockDim.x)
    y[i] = __float2bfloat16_rn (x[i]);
}

__global__ void
from_bf16_bias (const __nv_bfloat16 *x, const float *bias, float *y, size_t n, int channels, size_t inner)
{
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n; i += (size_t) gridDim.x * blockDim.x)
    {
      float v = __bfloat162float (x[i]);
      if (bias != nullptr)
        v = __fadd_rn (v, bias[(i / inner) % (size_t) channels]);
      y[i] = v;
    }
}

__global__ void
add_bf16 (const __nv_bfloat16 *x, float *y, size_t n)
{
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n; i += (size_t) gridDim.x * blockDim.x)
    y[i] = __fadd_rn (y[i], __bfloat162float (x[i]));
}

}  // namespace

extern "C" {

cudaError_t
shoal_k_to_bf16 (const float *x, uint16_t *y, size_t n, cudaStream_t s)
{
  if (n == 0)
    return cudaSuccess;
  to_bf16<<<blocks_for (n), kThreads, 0, s>>> (x, reinterpret_cast<__nv_bfloat16 *> (y), n);
  return cudaGetLastError ();
}

cudaError_t
shoal_k_from_bf16_bias (const uint16_t *x, const float *bias, float *y, size_t n, int channels, size_t inner,
                        cudaStream_t s)
{
  if (n == 0)
    return cudaSuccess;
  from_bf16_bias<<<blocks_for (n), kThreads, 0, s>>> (reinterpret_cast<const __nv_bfloat16 *> (x), bias, y, n,
                                                      channels, inner);
  return cudaGetLastError ();
}

cudaError_t
shoal_k_add_bf16 (const uint16_t *x, float *y, size_t n, cudaStream_t s)
{
  if (n == 0)
    return cudaSuccess;
  add_bf16<<<blocks_for (n), kThreads, 0, s>>> (reinterpret_cast<const __nv_bfloat16 *> (x), y, n);
  return cudaGetLastError ();
}

}  // extern "C"
