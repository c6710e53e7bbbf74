// Kernels of the recurrent and RBM layers (kernels_models.h): gathers and
// scatters of the embedding, restarts of carried states, the RBM's
// sampling and statistics, the sigmoid cross-entropy.  Element-wise work
// in grid-stride loops; sums in one block with double partials, so they
// are deterministic (the embedding's scatter uses atomics and is not).
#include "gpu/kernels_models.h"

#include <math.h>

namespace {

const int kThreads = 256;

inline int
blocks_for (size_t n)
{
  size_t b = (n + kThreads - 1) / kThreads;
  return (int) (b < 4096 ? b : 4096);
}

#define GRID_LOOP(i, n) \
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < (n); i += (size_t) gridDim.x * blockDim.x)

__device__ inline int
id_of (float v, int vocab)
{
  if (v < 0.0f)
    v = -v - 1.0f;
  if (!(v >= 0.0f && v < (float) vocab) || v != floorf (v))
    return -1;
  return (int) v;
}

__global__ void
embedding_forward (const float *__restrict__ ids, size_t n, const float *__restrict__ w, int vocab, int dim,
                   float *__restrict__ out)
{
  GRID_LOOP (k, n * (size_t) dim)
    {
      size_t i = k / (size_t) dim, j = k % (size_t) dim;
      int id = id_of (ids[i], vocab);
      out[k] = id >= 0 ? w[(size_t) id * dim + j] : 0.0f;
    }
}

__global__ void
embedding_backward (const float *__restrict__ ids, size_t n, const float *__restrict__ dout, int vocab, int dim,
                    float *__restrict__ dw)
{
  GRID_LOOP (k, n * (size_t) dim)
    {
      size_t i = k / (size_t) dim, j = k % (size_t) dim;
      int id = id_of (ids[i], vocab);
      if (id >= 0)
        atomicAdd (dw + (size_t) id * dim + j, dout[k]);
    }
}

__global__ void
rnn_restart (float *__restrict__ h, int levels, int rows, int hidden, const float *__restrict__ marks,
             size_t stride)
{
  size_t n = (size_t) levels * rows * hidden;
  GRID_LOOP (k, n)
    {
      size_t r = (k / (size_t) hidden) % (size_t) rows;
      if (marks[r * stride] < 0.0f)
        h[k] = 0.0f;
    }
}

__global__ void
broadcast_rows (const float *__restrict__ bias, int rows, int m, float *__restrict__ y)
{
  GRID_LOOP (k, (size_t) rows * m)
    y[k] = bias[k % (size_t) m];
}

__global__ void
sigmoid_in_place (float *__restrict__ x, size_t n)
{
  GRID_LOOP (i, n)
    x[i] = 1.0f / (1.0f + expf (-x[i]));
}

// splitmix64 of (seed, i), as kernels.cu's dropout
__device__ inline uint64_t
draw (uint64_t seed, uint64_t i)
{
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__device__ inline float
uniform_of (uint64_t bits)
{
  return (float) (bits >> 40) * (1.0f / 16777216.0f);  // 24 bits: [0, 1)
}

__global__ void
sample (const float *__restrict__ mean, float *__restrict__ out, size_t n, int gaussian, uint64_t seed)
{
  GRID_LOOP (i, n)
    {
      uint64_t bits = draw (seed, i);
      if (!gaussian)
        out[i] = uniform_of (bits) < mean[i] ? 1.0f : 0.0f;
      else
        {
          // Box-Muller from the two halves of one draw
          float u1 = ((float) (bits >> 40) + 1.0f) * (1.0f / 16777217.0f);
          float u2 = (float) ((bits >> 8) & 0xffffffu) * (1.0f / 16777216.0f);
          out[i] = mean[i] + sqrtf (-2.0f * logf (u1)) * cospif (2.0f * u2);
        }
    }
}

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
sum_squared_diff (const float *__restrict__ a, const float *__restrict__ b, size_t n, int norm, float *out)
{
  __shared__ double partial[kThreads];
  double s = 0;
  for (size_t i = threadIdx.x; i < n; i += kThreads)
    {
      double d = (double) a[i] - b[i];
      s += d * d;
    }
  double total = block_sum (s, partial);
  if (threadIdx.x == 0)
    *out = (float) (total / (norm > 0 ? norm : 1));
}

__global__ void
scaled_diff (const float *__restrict__ a, const float *__restrict__ b, float w, float *__restrict__ y, size_t n)
{
  GRID_LOOP (i, n)
    y[i] = w * (a[i] - b[i]);
}

__device__ inline double
softplus (double x)
{
  return x > 0 ? x + log1p (exp (-x)) : log1p (exp (x));
}

__global__ void
rbm_free_energy (const float *__restrict__ v, const float *__restrict__ pre, const float *__restrict__ b,
                 int rows, int nv, int nh, int gv, int gh, float *out)
{
  __shared__ double partial[kThreads];
  double s = 0;
  size_t n = (size_t) rows * nv;
  for (size_t i = threadIdx.x; i < n; i += kThreads)
    {
      double x = v[i], bi = b[i % (size_t) nv];
      s += gv ? 0.5 * (x - bi) * (x - bi) : -bi * x;
    }
  n = (size_t) rows * nh;
  for (size_t i = threadIdx.x; i < n; i += kThreads)
    {
      double a = pre[i];
      s -= gh ? 0.5 * a * a : softplus (a);
    }
  double total = block_sum (s, partial);
  if (threadIdx.x == 0)
    *out = (float) (rows > 0 ? total / rows : 0.0);
}

__global__ void
sigmoid_xent (const float *__restrict__ x, const float *__restrict__ t, size_t n, int norm, float *out)
{
  __shared__ double partial[kThreads];
  double s = 0;
  for (size_t i = threadIdx.x; i < n; i += kThreads)
    {
      double v = x[i];
      s += (v > 0 ? v : 0) - v * t[i] + log1p (exp (-fabs (v)));
    }
  double total = block_sum (s, partial);
  if (threadIdx.x == 0)
    *out = (float) (total / (norm > 0 ? norm : 1));
}

__global__ void
sigmoid_xent_backward (const float *__restrict__ x, const float *__restrict__ t, size_t n, float w,
                       float *__restrict__ dx, float *__restrict__ dt)
{
  GRID_LOOP (i, n)
    {
      if (dx != nullptr)
        dx[i] = w * (1.0f / (1.0f + expf (-x[i])) - t[i]);
      if (dt != nullptr)
        dt[i] = -w * x[i];
    }
}

}  // namespace

extern "C" {

cudaError_t
shoal_k_embedding_forward (const float *ids, size_t n, const float *w, int vocab, int dim, float *out,
                           cudaStream_t s)
{
  if (n == 0)
    return cudaSuccess;
  embedding_forward<<<blocks_for (n * (size_t) dim), kThreads, 0, s>>> (ids, n, w, vocab, dim, out);
  return cudaGetLastError ();
}

cudaError_t
shoal_k_embedding_backward (const float *ids, size_t n, const float *dout, int vocab, int dim, float *dw,
                            cudaStream_t s)
{
  if (n == 0)
    return cudaSuccess;
  embedding_backward<<<blocks_for (n * (size_t) dim), kThreads, 0, s>>> (ids, n, dout, vocab, dim, dw);
  return cudaGetLastError ();
}

cudaError_t
shoal_k_rnn_restart (float *h, int levels, int rows, int hidden, const float *marks, size_t mark_stride,
                     cudaStream_t s)
{
  size_t n = (size_t) levels * rows * hidden;
  if (n == 0)
    return cudaSuccess;
  rnn_restart<<<blocks_for (n), kThreads, 0, s>>> (h, levels, rows, hidden, marks, mark_stride);
  return cudaGetLastError ();
}

cudaError_t
shoal_k_broadcast_rows (const float *bias, int rows, int m, float *y, cudaStream_t s)
{
  size_t n = (size_t) rows * m;
  if (n == 0)
    return cudaSuccess;
  broadcast_rows<<<blocks_for (n), kThreads, 0, s>>> (bias, rows, m, y);
  return cudaGetLastError ();
}

cudaError_t
shoal_k_sigmoid_in_place (float *x, size_t n, cudaStream_t s)
{
  if (n == 0)
    return cudaSuccess;
  sigmoid_in_place<<<blocks_for (n), kThreads, 0, s>>> (x, n);
  return cudaGetLastError ();
}

cudaError_t
shoal_k_sample (const float *mean, float *out, size_t n, int gaussian, uint64_t seed, cudaStream_t s)
{
  if (n == 0)
    return cudaSuccess;
  sample<<<blocks_for (n), kThreads, 0, s>>> (mean, out, n, gaussian, seed);
  return cudaGetLastError ();
}

cudaError_t
shoal_k_sum_squared_diff (const float *a, const float *b, size_t n, int norm, float *out, cudaStream_t s)
{
  sum_squared_diff<<<1, kThreads, 0, s>>> (a, b, n, norm, out);
  return cudaGetLastError ();
}

cudaError_t
shoal_k_scaled_diff (const float *a, const float *b, float w, float *y, size_t n, cudaStream_t s)
{
  if (n == 0)
    return cudaSuccess;
  scaled_diff<<<blocks_for (n), kThreads, 0, s>>> (a, b, w, y, n);
  return cudaGetLastError ();
}

cudaError_t
shoal_k_rbm_free_energy (const float *v, const float *pre, const float *b, int rows, int nv, int nh,
                         int gaussian_visible, int gaussian_hidden, float *out, cudaStream_t s)
{
  rbm_free_energy<<<1, kThreads, 0, s>>> (v, pre, b, rows, nv, nh, gaussian_visible, gaussian_hidden, out);
  return cudaGetLastError ();
}

cudaError_t
shoal_k_sigmoid_xent (const float *x, const float *t, size_t n, int norm, float *out, cudaStream_t s)
{
  sigmoid_xent<<<1, kThreads, 0, s>>> (x, t, n, norm, out);
  return cudaGetLastError ();
}

cudaError_t
shoal_k_sigmoid_xent_backward (const float *x, const float *t, size_t n, float w, float *dx, float *dt,
                               cudaStream_t s)
{
  if (n == 0 || (dx == nullptr && dt == nullptr))
    return cudaSuccess;
  sigmoid_xent_backward<<<blocks_for (n), kThreads, 0, s>>> (x, t, n, w, dx, dt);
  return cudaGetLastError ();
}

}  // extern "C"
