/* Just enough of CUDA to run src/gpu/kernels_codec.cu on the host, for
 * test/e2e/codec_kernels.sh: blocks run one after another; a kernel that
 * meets at barriers (__syncthreads) runs each thread of a block as a
 * host thread at a std::barrier, the others run their threads in turn.
 * The intrinsics are the host's IEEE operations, each rounded on its own
 * (volatile: no contraction), as the GPU's _rn intrinsics round. */
#ifndef SHOAL_TEST_CUDA_EMULATION_H
#define SHOAL_TEST_CUDA_EMULATION_H

#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "cuda_runtime_api.h"

#define __global__
#define __device__
#define __restrict__ __restrict
#define __shared__ static   /* one block at a time: one copy serves it */

struct EmuDim { unsigned x; };
static thread_local EmuDim threadIdx, blockIdx;
static EmuDim blockDim, gridDim;
static std::barrier<> *emu_barrier;

static inline void __syncthreads () { emu_barrier->arrive_and_wait (); }
static inline float __fadd_rn (float a, float b) { volatile float r = a + b; return r; }
static inline float __fsub_rn (float a, float b) { volatile float r = a - b; return r; }
static inline float __fmul_rn (float a, float b) { volatile float r = a * b; return r; }
static inline double __dadd_rn (double a, double b) { volatile double r = a + b; return r; }
static inline double __ddiv_rn (double a, double b) { volatile double r = a / b; return r; }
static inline float __double2float_rn (double a) { volatile float r = (float) a; return r; }
static inline uint32_t __float_as_uint (float f) { uint32_t u; memcpy (&u, &f, sizeof u); return u; }
static inline float __uint_as_float (uint32_t u) { float f; memcpy (&f, &u, sizeof f); return f; }

/* kernel<<<blocks, threads, 0, s>>> (...), as codec_kernels.sh rewrites it */
static inline void
emu_launch (bool barriers, unsigned blocks, unsigned threads, cudaStream_t stream, const std::function<void ()> &body)
{
  (void) stream;   /* one stream: everything runs as it is launched */
  gridDim.x = blocks;
  blockDim.x = threads;
  for (unsigned b = 0; b < blocks; b++)
    {
      if (!barriers)
        {
          blockIdx.x = b;
          for (unsigned t = 0; t < threads; t++)
            threadIdx.x = t, body ();
          continue;
        }
      std::barrier<> barrier (threads);
      emu_barrier = &barrier;
      std::vector<std::thread> team;
      for (unsigned t = 0; t < threads; t++)
        team.emplace_back ([&body, b, t] { blockIdx.x = b; threadIdx.x = t; body (); });
      for (auto &thread : team)
        thread.join ();
    }
}

#define cudaGetLastError() cudaSuccess
#define cudaMemcpyAsync(dst, src, bytes, kind, stream) (memcpy ((dst), (src), (bytes)), cudaSuccess)

#endif
