// The wire codecs (core/codec.c) on the GPU, so that a GPU worker sends
// its gradients' encoded bytes down PCIe instead of their floats, and a
// server cannot tell which side encoded them: every kernel makes
// core/codec.c's operations in core/codec.c's order.
//  - fp16, bf16: the same bit manipulations per value; the one float
//    addition (fp16's subnormals) and subtraction (their decoding) use
//    the rounding intrinsics, and nvcc's default keeps denormals (no
//    -ftz, as on the host).
//  - 2bit, 1bit: one thread block per codec block of 256 values.  Each
//    thread makes its value (gradient, scaled, plus residual: one float
//    addition, as the host's compensate); the block's statistics are
//    the host's sequential sums in double, so thread 0 makes them alone,
//    in the host's order (a tree reduction would round differently: the
//    values of a block may span more exponents than a double's 53 bits
//    hold exactly); then each thread packs one byte of codes and writes
//    the residuals of its values.  A block's statistics are 256 to 768
//    dependent double additions, a few microseconds, and every block of
//    a slice runs at once.
#include "gpu/kernels_codec.h"

#include <stdint.h>

namespace {

const int kThreads = 256;
const int kBlock = 256;   // SHOAL_CODEC_BLOCK

inline int
blocks_for (size_t n, int cap)
{
  size_t b = (n + kThreads - 1) / kThreads;
  return (int) (b < (size_t) cap ? (b > 0 ? b : 1) : cap);
}

__device__ inline uint32_t
bits_of (float f)
{
  return __float_as_uint (f);
}

__device__ inline float
float_of (uint32_t u)
{
  return __uint_as_float (u);
}

// core/codec.c's to_half, operation for operation
__device__ inline uint16_t
to_half (float value)
{
  const uint32_t f32_infinity = 255u << 23;
  const uint32_t f16_overflow = (127u + 16u) << 23;
  const uint32_t denorm_magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  uint32_t x = bits_of (value);
  uint32_t sign = x & 0x80000000u;
  uint16_t h;
  x ^= sign;
  if (x >= f16_overflow)
    h = x > f32_infinity ? 0x7e00 : 0x7c00;
  else if (x < (113u << 23))
    h = (uint16_t) (bits_of (__fadd_rn (float_of (x), float_of (denorm_magic))) - denorm_magic);
  else
    {
      uint32_t mantissa_odd = (x >> 13) & 1u;
      x += ((15u - 127u) << 23) + 0xfffu;
      x += mantissa_odd;
      h = (uint16_t) (x >> 13);
    }
  return (uint16_t) (h | (sign >> 16));
}

__device__ inline float
from_half (uint16_t h)
{
  const uint32_t shifted_exp = 0x7c00u << 13;
  uint32_t o = (uint32_t) (h & 0x7fffu) << 13;
  uint32_t exp = shifted_exp & o;
  o += (127u - 15u) << 23;
  if (exp == shifted_exp)
    o += (128u - 16u) << 23;
  else if (exp == 0)
    {
      o += 1u << 23;
      o = bits_of (__fsub_rn (float_of (o), float_of (113u << 23)));
    }
  return float_of (o | ((uint32_t) (h & 0x8000u) << 16));
}

__device__ inline uint16_t
to_bf16 (float value)
{
  uint32_t x = bits_of (value);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return (uint16_t) ((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t) (x >> 16);
}

// the gradient as the host encodes it: shoal_push_mean scaled it in place
// (only where scale != 1), and the comm thread cleared it after sending
template <bool CLEAR>
__device__ inline float
take (float *g, size_t i, float scale)
{
  float v = g[i];
  if (CLEAR)
    g[i] = 0.0f;
  return scale != 1.0f ? __fmul_rn (v, scale) : v;
}

template <bool CLEAR>
__global__ void
encode_fp32 (float *__restrict__ g, float scale, float *__restrict__ out, size_t n)
{
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n; i += (size_t) gridDim.x * blockDim.x)
    out[i] = take<CLEAR> (g, i, scale);
}

template <bool CLEAR, bool BF16>
__global__ void
encode_16 (float *__restrict__ g, float scale, uint16_t *__restrict__ out, size_t n)
{
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n; i += (size_t) gridDim.x * blockDim.x)
    {
      float v = take<CLEAR> (g, i, scale);
      out[i] = BF16 ? to_bf16 (v) : to_half (v);
    }
}

__device__ inline void
put_float (unsigned char *p, float f)
{
  uint32_t u = bits_of (f);
  for (int k = 0; k < 4; k++)
    p[k] = (unsigned char) (u >> (8 * k));   // little-endian, as the host's memcpy on x86 and arm
}

// One codec block per thread block (kThreads == kBlock threads): BITS 2
// or 1.  Block b starts at value b * kBlock and at byte b * (8 + kBlock
// * BITS / 8) of out (every block before it is full).  rin and rout may
// be one buffer: each value's residual is read before the barrier and
// written after it, by one thread.
template <int BITS, bool CLEAR>
__global__ void
encode_quantised (float *__restrict__ g, float scale, const float *rin, float *rout, size_t n,
                  unsigned char *__restrict__ out)
{
  __shared__ float v[kBlock];
  __shared__ float level[3];
  __shared__ float threshold;
  size_t first = (size_t) blockIdx.x * kBlock;
  int len = (int) (n - first < (size_t) kBlock ? n - first : (size_t) kBlock);
  int i = threadIdx.x;
  if (i < len)
    // core/codec.c's compensate: the residual, or 0.0f (so -0 becomes +0 as there)
    v[i] = __fadd_rn (take<CLEAR> (g, first + i, scale), rin != NULL ? rin[first + i] : 0.0f);
  __syncthreads ();
  unsigned char *block_out = out + (size_t) blockIdx.x * (8 + kBlock * BITS / 8);
  if (i == 0)
    {
      if (BITS == 2)
        {
          // encode_2bit_block: the threshold is the mean |v|, each level
          // the mean of the values past it on its side
          double sum = 0, pos = 0, neg = 0;
          size_t npos = 0, nneg = 0;
          for (int k = 0; k < len; k++)
            sum = __dadd_rn (sum, (double) fabsf (v[k]));
          float t = __double2float_rn (__ddiv_rn (sum, (double) len));
          for (int k = 0; k < len && t > 0; k++)
            if (v[k] >= t)
              pos = __dadd_rn (pos, (double) v[k]), npos++;
            else if (v[k] <= -t)
              neg = __dadd_rn (neg, (double) v[k]), nneg++;
          level[0] = 0.0f;
          level[1] = npos > 0 ? __double2float_rn (__ddiv_rn (pos, (double) npos)) : 0.0f;
          level[2] = nneg > 0 ? __double2float_rn (__ddiv_rn (neg, (double) nneg)) : 0.0f;
          threshold = t;
          put_float (block_out, level[1]);
          put_float (block_out + 4, level[2]);
        }
      else
        {
          // encode_1bit_block: the means of the values >= 0 and of the others
          double pos = 0, neg = 0;
          size_t npos = 0;
          for (int k = 0; k < len; k++)
            if (v[k] >= 0)
              pos = __dadd_rn (pos, (double) v[k]), npos++;
            else
              neg = __dadd_rn (neg, (double) v[k]);
          level[0] = (size_t) len > npos ? __double2float_rn (__ddiv_rn (neg, (double) ((size_t) len - npos))) : 0.0f;
          level[1] = npos > 0 ? __double2float_rn (__ddiv_rn (pos, (double) npos)) : 0.0f;
          put_float (block_out, level[0]);
          put_float (block_out + 4, level[1]);
        }
    }
  __syncthreads ();
  const int per_byte = 8 / BITS;
  if (i * per_byte < len)
    {
      unsigned byte = 0;
      for (int k = 0; k < per_byte; k++)
        {
          int j = i * per_byte + k;
          if (j >= len)
            break;   // the unused codes of a last partial byte stay 0
          float x = v[j];
          unsigned code;
          if (BITS == 2)
            {
              float t = threshold;
              code = t > 0 && x >= t ? 1u : t > 0 && x <= -t ? 2u : 0u;
            }
          else
            code = x >= 0 ? 1u : 0u;
          byte |= code << (BITS * k);
          if (rout != NULL)
            rout[first + j] = __fsub_rn (x, level[code]);
        }
      block_out[8 + i] = (unsigned char) byte;
    }
}

template <bool CLEAR>
cudaError_t
encode (ShoalKCodec codec, float *g, float scale, const float *rin, float *rout, size_t n, unsigned char *out,
        cudaStream_t s)
{
  int blocks = blocks_for (n, 4096);
  unsigned quantised_blocks = (unsigned) ((n + kBlock - 1) / kBlock);
  switch (codec)
    {
    case SHOAL_K_CODEC_FP32:
      encode_fp32<CLEAR><<<blocks, kThreads, 0, s>>> (g, scale, (float *) out, n);
      break;
    case SHOAL_K_CODEC_FP16:
      encode_16<CLEAR, false><<<blocks, kThreads, 0, s>>> (g, scale, (uint16_t *) out, n);
      break;
    case SHOAL_K_CODEC_BF16:
      encode_16<CLEAR, true><<<blocks, kThreads, 0, s>>> (g, scale, (uint16_t *) out, n);
      break;
    case SHOAL_K_CODEC_2BIT:
      encode_quantised<2, CLEAR><<<quantised_blocks, kThreads, 0, s>>> (g, scale, rin, rout, n, out);
      break;
    case SHOAL_K_CODEC_1BIT:
      encode_quantised<1, CLEAR><<<quantised_blocks, kThreads, 0, s>>> (g, scale, rin, rout, n, out);
      break;
    default:
      return cudaErrorInvalidValue;
    }
  return cudaGetLastError ();
}

template <bool BF16>
__global__ void
decode_16 (const uint16_t *__restrict__ in, float *__restrict__ out, size_t n)
{
  for (size_t i = blockIdx.x * (size_t) blockDim.x + threadIdx.x; i < n; i += (size_t) gridDim.x * blockDim.x)
    out[i] = BF16 ? float_of ((uint32_t) in[i] << 16) : from_half (in[i]);
}

}  // namespace

extern "C" cudaError_t
shoal_k_codec_encode (ShoalKCodec codec, float *g, float scale, int clear, const float *rin, float *rout, size_t n,
                      unsigned char *out, int block, cudaStream_t s)
{
  if (block != kBlock || ((uintptr_t) out & 3u) != 0)
    return cudaErrorInvalidValue;
  if (n == 0)
    return cudaSuccess;
  return clear ? encode<true> (codec, g, scale, rin, rout, n, out, s)
               : encode<false> (codec, g, scale, rin, rout, n, out, s);
}

extern "C" cudaError_t
shoal_k_codec_decode (ShoalKCodec codec, const unsigned char *in, float *out, size_t n, cudaStream_t s)
{
  if (((uintptr_t) in & 3u) != 0)
    return cudaErrorInvalidValue;
  if (n == 0)
    return cudaSuccess;
  int blocks = blocks_for (n, 4096);
  switch (codec)
    {
    case SHOAL_K_CODEC_FP32:
      return cudaMemcpyAsync (out, in, n * sizeof (float), cudaMemcpyDeviceToDevice, s);
    case SHOAL_K_CODEC_FP16:
      decode_16<false><<<blocks, kThreads, 0, s>>> ((const uint16_t *) in, out, n);
      break;
    case SHOAL_K_CODEC_BF16:
      decode_16<true><<<blocks, kThreads, 0, s>>> ((const uint16_t *) in, out, n);
      break;
    default:
      return cudaErrorInvalidValue;
    }
  return cudaGetLastError ();
}
