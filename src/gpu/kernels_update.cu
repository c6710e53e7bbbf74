// The updater rules (core/updater.c) and gradient clipping on the GPU.
// Each rule is one fused pass over value, gradient and state: read them,
// write the new value and state and, for a pusher done with its
// gradient, a zero in its place, so an update costs one trip through
// memory.  The arithmetic is core/updater.c's, operation for operation,
// with the rounding intrinsics (__fmul_rn, ...) so that nvcc does not
// contract a multiply and an add into one FMA: the host (gcc -std=c11,
// no contraction) and the device then round identically and a device
// update equals the host's bit for bit.
#include "gpu/kernels_update.h"

namespace {

const int kThreads = 256;

inline int
blocks_for (size_t n, int cap)
{
  size_t b = (n + kThreads - 1) / kThreads;
  return (int) (b < (size_t) cap ? (b > 0 ? b : 1) : cap);
}

#define MUL __fmul_rn
#define ADD __fadd_rn
#define SUB __fsub_rn
#define DIV __fdiv_rn
#define SQRT __fsqrt_rn

// The scalars come by value, or (at != NULL: a CUDA graph's launch,
// gpu/graph.c) from device memory the host refills before each launch;
// the arithmetic is the same either way.
template <ShoalKRule R, bool CLEAR>
__global__ void
update (ShoalKUpdate kv, const ShoalKUpdate *__restrict__ at, float *__restrict__ w, float *__restrict__ g,
        float *__restrict__ a, float *__restrict__ b, size_t n)
{
  const ShoalKUpdate k = at != NULL ? *at : kv;
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n; i += (size_t) gridDim.x * blockDim.x)
    {
      float wi = w[i];
      // g = grad + wd * w in every rule
      float gi = ADD (g[i], MUL (k.wd, wi));
      if (CLEAR)
        g[i] = 0.0f;
      if (R == SHOAL_K_SGD)
        w[i] = SUB (wi, MUL (k.lr, gi));
      else if (R == SHOAL_K_MOMENTUM)
        {
          float vn = SUB (MUL (k.mom, a[i]), MUL (k.lr, gi));
          a[i] = vn;
          w[i] = ADD (wi, vn);
        }
      else if (R == SHOAL_K_NESTEROV)
        {
          float vo = a[i];
          float vn = SUB (MUL (k.mom, vo), MUL (k.lr, gi));
          a[i] = vn;
          w[i] = ADD (wi, SUB (MUL (ADD (1.0f, k.mom), vn), MUL (k.mom, vo)));
        }
      else if (R == SHOAL_K_ADAGRAD)
        {
          float hn = ADD (a[i], MUL (gi, gi));
          a[i] = hn;
          w[i] = SUB (wi, DIV (MUL (k.lr, gi), ADD (SQRT (hn), k.eps)));
        }
      else if (R == SHOAL_K_RMSPROP)
        {
          float hn = ADD (MUL (k.rho, a[i]), MUL (MUL (SUB (1.0f, k.rho), gi), gi));
          a[i] = hn;
          w[i] = SUB (wi, DIV (MUL (k.lr, gi), ADD (SQRT (hn), k.eps)));
        }
      else if (R == SHOAL_K_ADADELTA)
        {
          float rho1 = SUB (1.0f, k.rho);
          float hn = ADD (MUL (k.rho, a[i]), MUL (MUL (rho1, gi), gi));
          float ui = b[i];
          float d = MUL (DIV (-SQRT (ADD (ui, k.eps)), SQRT (ADD (hn, k.eps))), gi);
          a[i] = hn;
          b[i] = ADD (MUL (k.rho, ui), MUL (MUL (rho1, d), d));
          w[i] = ADD (wi, MUL (k.lr, d));
        }
      else if (R == SHOAL_K_ADAM)
        {
          float mn = ADD (MUL (k.b1, a[i]), MUL (SUB (1.0f, k.b1), gi));
          float vn = ADD (MUL (k.b2, b[i]), MUL (MUL (SUB (1.0f, k.b2), gi), gi));
          a[i] = mn;
          b[i] = vn;
          w[i] = SUB (wi, DIV (MUL (k.lr_c, mn), ADD (MUL (SQRT (vn), k.rs), k.eps)));
        }
    }
}

template <ShoalKRule R>
cudaError_t
launch (const ShoalKUpdate *k, const ShoalKUpdate *at, float *w, float *g, float *a, float *b, size_t n, int clear,
        cudaStream_t s)
{
  int blocks = blocks_for (n, 4096);
  if (clear)
    update<R, true><<<blocks, kThreads, 0, s>>> (*k, at, w, g, a, b, n);
  else
    update<R, false><<<blocks, kThreads, 0, s>>> (*k, at, w, g, a, b, n);
  return cudaGetLastError ();
}

// Sums of squares before and after clamping to +-c (c > 0 clamps in
// place), in double: per thread, then per block, then one atomic add per
// block into scratch[0] and scratch[1].
__global__ void
sumsq_clamp (float *__restrict__ x, size_t n, float c, double *scratch)
{
  __shared__ double before[kThreads], after[kThreads];
  double sb = 0.0, sa = 0.0;
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n; i += (size_t) gridDim.x * blockDim.x)
    {
      float v = x[i];
      sb += (double) v * (double) v;
      if (c > 0.0f)
        {
          v = v > c ? c : (v < -c ? -c : v);
          x[i] = v;
        }
      sa += (double) v * (double) v;
    }
  before[threadIdx.x] = sb;
  after[threadIdx.x] = sa;
  __syncthreads ();
  for (int stride = kThreads / 2; stride > 0; stride /= 2)
    {
      if (threadIdx.x < stride)
        {
          before[threadIdx.x] += before[threadIdx.x + stride];
          after[threadIdx.x] += after[threadIdx.x + stride];
        }
      __syncthreads ();
    }
  if (threadIdx.x == 0)
    {
      atomicAdd (&scratch[0], before[0]);
      atomicAdd (&scratch[1], after[0]);
    }
}

// x *= clip_norm / norm where the clamped norm exceeds clip_norm; the
// factor is computed from scratch[1] by every thread (no host round trip).
__global__ void
scale_to_norm (float *__restrict__ x, size_t n, float clip_norm, const double *scratch)
{
  double norm = sqrt (scratch[1]);
  if (!(norm > (double) clip_norm))
    return;
  float s = (float) ((double) clip_norm / norm);
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n; i += (size_t) gridDim.x * blockDim.x)
    x[i] = MUL (x[i], s);
}

}  // namespace

extern "C" cudaError_t
shoal_k_update (const ShoalKUpdate *k, float *w, float *g, float *a, float *b, size_t n, int clear, cudaStream_t s)
{
  return shoal_k_update_at (k, NULL, w, g, a, b, n, clear, s);
}

extern "C" cudaError_t
shoal_k_update_at (const ShoalKUpdate *k, const ShoalKUpdate *at, float *w, float *g, float *a, float *b, size_t n,
                   int clear, cudaStream_t s)
{
  typedef cudaError_t (*Launch) (const ShoalKUpdate *, const ShoalKUpdate *, float *, float *, float *, float *,
                                 size_t, int, cudaStream_t);
  // indexed by ShoalKRule
  static const Launch rules[] = {
    launch<SHOAL_K_SGD>, launch<SHOAL_K_MOMENTUM>, launch<SHOAL_K_NESTEROV>, launch<SHOAL_K_ADAGRAD>,
    launch<SHOAL_K_RMSPROP>, launch<SHOAL_K_ADADELTA>, launch<SHOAL_K_ADAM>,
  };
  if ((unsigned) k->rule >= sizeof rules / sizeof rules[0])
    return cudaErrorInvalidValue;
  return n == 0 ? cudaSuccess : rules[k->rule] (k, at, w, g, a, b, n, clear, s);
}

extern "C" cudaError_t
shoal_k_clip (float *g, size_t n, float clip_value, float clip_norm, double *scratch, cudaStream_t s)
{
  if (n == 0 || (clip_value <= 0.0f && clip_norm <= 0.0f))
    return cudaSuccess;
  cudaError_t status = cudaMemsetAsync (scratch, 0, 2 * sizeof (double), s);
  if (status != cudaSuccess)
    return status;
  int blocks = blocks_for (n, 1024);
  sumsq_clamp<<<blocks, kThreads, 0, s>>> (g, n, clip_value, scratch);
  if (clip_norm > 0.0f)
    scale_to_norm<<<blocks_for (n, 4096), kThreads, 0, s>>> (g, n, clip_norm, scratch);
  return cudaGetLastError ();
}
