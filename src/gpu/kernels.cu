// The CUDA kernels of the GPU layers: what cuBLAS and cuDNN do not
// cover (leaky ReLU, scaled tanh, dropout, the losses and accuracy).
// Element-wise kernels use grid-stride loops; the losses reduce in one
// block with double partial sums, so a loss is deterministic and as
// accurate as the CPU's double accumulation.
#include "gpu/kernels.h"

#include <math.h>

namespace {

const int kThreads = 256;

inline int
blocks_for (size_t n)
{
  size_t b = (n + kThreads - 1) / kThreads;
  return (int) (b < 4096 ? b : 4096);
}

__device__ inline int
label_class (float label, int k)
{
  if (!(label >= 0.0f && label < (float) k) || label != floorf (label))
    return -1;
  return (int) label;
}

__global__ void
leaky_relu_forward (const float *__restrict__ x, float *__restrict__ y, size_t n, float slope)
{
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n; i += (size_t) gridDim.x * blockDim.x)
    y[i] = x[i] > 0.0f ? x[i] : slope * x[i];
}

__global__ void
leaky_relu_backward (const float *__restrict__ y, const float *__restrict__ dy, float *__restrict__ dx,
                     size_t n, float slope)
{
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n; i += (size_t) gridDim.x * blockDim.x)
    dx[i] = y[i] > 0.0f ? dy[i] : slope * dy[i];
}

#define STANH_A 1.7159f
#define STANH_B (2.0f / 3.0f)

__global__ void
stanh_forward (const float *__restrict__ x, float *__restrict__ y, size_t n)
{
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n; i += (size_t) gridDim.x * blockDim.x)
    y[i] = STANH_A * tanhf (STANH_B * x[i]);
}

__global__ void
stanh_backward (const float *__restrict__ y, const float *__restrict__ dy, float *__restrict__ dx, size_t n)
{
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n; i += (size_t) gridDim.x * blockDim.x)
    dx[i] = dy[i] * (STANH_B * STANH_A - (STANH_B / STANH_A) * y[i] * y[i]);
}

// splitmix64 of (seed, i): independent 64-bit draws without state
__device__ inline uint64_t
draw (uint64_t seed, uint64_t i)
{
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__global__ void
dropout_forward (const float *__restrict__ x, float *__restrict__ y, float *__restrict__ mask, size_t n,
                 uint64_t seed_value, const uint64_t *__restrict__ seed_at, uint32_t threshold, float scale)
{
  const uint64_t seed = seed_at != NULL ? *seed_at : seed_value;
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n; i += (size_t) gridDim.x * blockDim.x)
    {
      float m = (uint32_t) (draw (seed, i) & 0xffffu) >= threshold ? scale : 0.0f;
      mask[i] = m;
      y[i] = x[i] * m;
    }
}

__global__ void
multiply (const float *__restrict__ a, const float *__restrict__ b, float *__restrict__ y, size_t n)
{
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n; i += (size_t) gridDim.x * blockDim.x)
    y[i] = a[i] * b[i];
}

__global__ void
scale (const float *__restrict__ x, float alpha, float *__restrict__ y, size_t n)
{
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n; i += (size_t) gridDim.x * blockDim.x)
    y[i] = alpha * x[i];
}

// Sums v over the block (kThreads threads); the result is valid in thread 0.
__device__ inline double
block_sum (double v, double *shared)
{
  shared[threadIdx.x] = v;
  __syncthreads ();
  for (int stride = kThreads / 2; stride > 0; stride >>= 1)
    {
      if ((int) threadIdx.x < stride)
        shared[threadIdx.x] += shared[threadIdx.x + stride];
      __syncthreads ();
    }
  return shared[0];
}

__global__ void
softmax_loss (const float *__restrict__ logp, const float *__restrict__ label, int rows, int k, int norm,
              ShoalLossResult *out)
{
  __shared__ double partial[kThreads];
  __shared__ int bad;
  if (threadIdx.x == 0)
    bad = rows;
  __syncthreads ();
  double sum = 0;
  for (int r = threadIdx.x; r < rows; r += kThreads)
    {
      int y = label_class (label[r], k);
      if (y < 0)
        atomicMin (&bad, r);
      else
        sum -= (double) logp[(size_t) r * k + y];
    }
  double total = block_sum (sum, partial);
  if (threadIdx.x == 0)
    {
      out->value = (float) (total / (norm > 0 ? norm : 1));
      out->bad_row = bad < rows ? bad : -1;
      out->bad_label = bad < rows ? label[bad] : 0.0f;
    }
}

__global__ void
softmax_loss_backward (const float *__restrict__ logp, const float *__restrict__ label, int rows, int k,
                       float w, float *__restrict__ dx)
{
  size_t n = (size_t) rows * k;
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n; i += (size_t) gridDim.x * blockDim.x)
    {
      int r = (int) (i / k), c = (int) (i % k);
      int y = label_class (label[r], k);
      dx[i] = y < 0 ? 0.0f : (expf (logp[i]) - (c == y ? 1.0f : 0.0f)) * w;
    }
}

__global__ void
difference (const float *__restrict__ a, const float *__restrict__ b, float *__restrict__ d, size_t n)
{
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n; i += (size_t) gridDim.x * blockDim.x)
    d[i] = a[i] - b[i];
}

__global__ void
half_sum_squares (const float *__restrict__ d, size_t n, int norm, ShoalLossResult *out)
{
  __shared__ double partial[kThreads];
  double sum = 0;
  for (size_t i = threadIdx.x; i < n; i += kThreads)
    sum += (double) d[i] * d[i];
  double total = block_sum (sum, partial);
  if (threadIdx.x == 0)
    {
      out->value = (float) (0.5 * total / (norm > 0 ? norm : 1));
      out->bad_row = -1;
      out->bad_label = 0.0f;
    }
}

__global__ void
accuracy (const float *__restrict__ logits, const float *__restrict__ label, int rows, int k, int top_k,
          float *out)
{
  __shared__ double partial[kThreads];
  double correct = 0, labelled = 0;
  for (int r = threadIdx.x; r < rows; r += kThreads)
    {
      int y = label_class (label[r], k);
      if (y < 0)
        continue;
      labelled += 1;
      const float *x = logits + (size_t) r * k;
      float v = x[y];
      if (isnan (v))
        continue;
      int rank = 0;
      for (int c = 0; c < k; c++)
        rank += x[c] > v || (x[c] == v && c < y);
      correct += rank < top_k;
    }
  double c = block_sum (correct, partial);
  __syncthreads ();
  double l = block_sum (labelled, partial);
  if (threadIdx.x == 0)
    *out = l > 0 ? (float) (c / l) : 0.0f;
}

}  // namespace

extern "C" {

cudaError_t
shoal_k_leaky_relu_forward (const float *x, float *y, size_t n, float slope, cudaStream_t s)
{
  if (n == 0)
    return cudaSuccess;
  leaky_relu_forward<<<blocks_for (n), kThreads, 0, s>>> (x, y, n, slope);
  return cudaGetLastError ();
}

cudaError_t
shoal_k_leaky_relu_backward (const float *y, const float *dy, float *dx, size_t n, float slope, cudaStream_t s)
{
  if (n == 0)
    return cudaSuccess;
  leaky_relu_backward<<<blocks_for (n), kThreads, 0, s>>> (y, dy, dx, n, slope);
  return cudaGetLastError ();
}

cudaError_t
shoal_k_stanh_forward (const float *x, float *y, size_t n, cudaStream_t s)
{
  if (n == 0)
    return cudaSuccess;
  stanh_forward<<<blocks_for (n), kThreads, 0, s>>> (x, y, n);
  return cudaGetLastError ();
}

cudaError_t
shoal_k_stanh_backward (const float *y, const float *dy, float *dx, size_t n, cudaStream_t s)
{
  if (n == 0)
    return cudaSuccess;
  stanh_backward<<<blocks_for (n), kThreads, 0, s>>> (y, dy, dx, n);
  return cudaGetLastError ();
}

cudaError_t
shoal_k_dropout_forward (const float *x, float *y, float *mask, size_t n, uint64_t seed, const uint64_t *seed_at,
                         uint32_t threshold, float scale_, cudaStream_t s)
{
  if (n == 0)
    return cudaSuccess;
  dropout_forward<<<blocks_for (n), kThreads, 0, s>>> (x, y, mask, n, seed, seed_at, threshold, scale_);
  return cudaGetLastError ();
}

cudaError_t
shoal_k_multiply (const float *a, const float *b, float *y, size_t n, cudaStream_t s)
{
  if (n == 0)
    return cudaSuccess;
  multiply<<<blocks_for (n), kThreads, 0, s>>> (a, b, y, n);
  return cudaGetLastError ();
}

cudaError_t
shoal_k_scale (const float *x, float alpha, float *y, size_t n, cudaStream_t s)
{
  if (n == 0)
    return cudaSuccess;
  scale<<<blocks_for (n), kThreads, 0, s>>> (x, alpha, y, n);
  return cudaGetLastError ();
}

cudaError_t
shoal_k_softmax_loss (const float *logp, const float *label, int rows, int k, int norm, ShoalLossResult *out,
                      cudaStream_t s)
{
  softmax_loss<<<1, kThreads, 0, s>>> (logp, label, rows, k, norm, out);
  return cudaGetLastError ();
}

cudaError_t
shoal_k_softmax_loss_backward (const float *logp, const float *label, int rows, int k, float w, float *dx,
                               cudaStream_t s)
{
  size_t n = (size_t) rows * k;
  if (n == 0)
    return cudaSuccess;
  softmax_loss_backward<<<blocks_for (n), kThreads, 0, s>>> (logp, label, rows, k, w, dx);
  return cudaGetLastError ();
}

cudaError_t
shoal_k_euclidean_loss (const float *a, const float *b, float *diff, size_t n, int norm, ShoalLossResult *out,
                        cudaStream_t s)
{
  if (n > 0)
    difference<<<blocks_for (n), kThreads, 0, s>>> (a, b, diff, n);
  half_sum_squares<<<1, kThreads, 0, s>>> (diff, n, norm, out);
  return cudaGetLastError ();
}

cudaError_t
shoal_k_accuracy (const float *logits, const float *label, int rows, int k, int top_k, float *out,
                  cudaStream_t s)
{
  accuracy<<<1, kThreads, 0, s>>> (logits, label, rows, k, top_k, out);
  return cudaGetLastError ();
}

}  // extern "C"
