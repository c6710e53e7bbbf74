// The bfloat16 conversions of kernels_bf16.h: grid-stride loops over the
// NCHW side's elements (its reads or writes coalesce; the NHWC side's
// stride by the channels, which are few in the layers that use this).
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

// the NHWC index of NCHW element e
__device__ size_t
nhwc_index (size_t e, int channels, size_t plane)
{
  size_t p = e % plane, rest = e / plane;
  size_t c = rest % (size_t) channels, i = rest / (size_t) channels;
  return (i * plane + p) * (size_t) channels + c;
}

__global__ void
to_bf16_nhwc (const float *x, __nv_bfloat16 *y, size_t total, int channels, size_t plane)
{
  for (size_t e = blockIdx.x * (size_t) blockDim.x + threadIdx.x; e < total; e += (size_t) gridDim.x * blockDim.x)
    y[nhwc_index (e, channels, plane)] = __float2bfloat16_rn (x[e]);
}

__global__ void
from_bf16_nhwc (const __nv_bfloat16 *x, const float *bias, float *y, size_t total, int channels, size_t plane,
                int add)
{
  for (size_t e = blockIdx.x * (size_t) blockDim.x + threadIdx.x; e < total; e += (size_t) gridDim.x * blockDim.x)
    {
      float v = __bfloat162float (x[nhwc_index (e, channels, plane)]);
      if (bias != nullptr)
        v = __fadd_rn (v, bias[(e / plane) % (size_t) channels]);
      y[e] = add ? __fadd_rn (y[e], v) : v;
    }
}

}  // namespace

extern "C" {

cudaError_t
shoal_k_to_bf16_nhwc (const float *x, uint16_t *y, int n, int channels, size_t plane, cudaStream_t s)
{
  size_t total = (size_t) n * (size_t) channels * plane;
  if (total == 0)
    return cudaSuccess;
  to_bf16_nhwc<<<blocks_for (total), kThreads, 0, s>>> (x, reinterpret_cast<__nv_bfloat16 *> (y), total, channels,
                                                        plane);
  return cudaGetLastError ();
}

cudaError_t
shoal_k_from_bf16_nhwc (const uint16_t *x, const float *bias, float *y, int n, int channels, size_t plane, int add,
                        cudaStream_t s)
{
  size_t total = (size_t) n * (size_t) channels * plane;
  if (total == 0)
    return cudaSuccess;
  from_bf16_nhwc<<<blocks_for (total), kThreads, 0, s>>> (reinterpret_cast<const __nv_bfloat16 *> (x), bias, y,
                                                          total, channels, plane, add);
  return cudaGetLastError ();
}

}  // extern "C"
