/* The CUDA backend's codec entries (core/device_backend.h: codec_encode,
 * codec_decode): core/codec.h's codecs into the kernels of
 * kernels_codec.cu, on the caller's stream.  As with the updater's
 * entries (update.c), a failed launch is logged (naming the codec) and
 * surfaces again at the stream's next synchronisation. */
#include "gpu/graph.h"
#include "gpu/kernels_codec.h"

G_STATIC_ASSERT ((int) SHOAL_K_CODEC_FP32 == (int) SHOAL_CODEC_FP32);
G_STATIC_ASSERT ((int) SHOAL_K_CODEC_FP16 == (int) SHOAL_CODEC_FP16);
G_STATIC_ASSERT ((int) SHOAL_K_CODEC_BF16 == (int) SHOAL_CODEC_BF16);
G_STATIC_ASSERT ((int) SHOAL_K_CODEC_2BIT == (int) SHOAL_CODEC_2BIT);
G_STATIC_ASSERT ((int) SHOAL_K_CODEC_1BIT == (int) SHOAL_CODEC_1BIT);

void
shoal_cuda_codec_encode (ShoalStream *stream, ShoalCodec codec, float *src, float scale, gboolean clear_src,
                         const float *residual_in, float *residual_out, size_t n, guint8 *out)
{
  shoal_gpu_step_other ("a wire codec");
  cudaError_t status = shoal_k_codec_encode ((ShoalKCodec) codec, src, scale, clear_src ? 1 : 0, residual_in,
                                             residual_out, n, out, SHOAL_CODEC_BLOCK, (cudaStream_t) stream);
  shoal_gpu_launch_failed (shoal_codec_name (codec), status);
}

void
shoal_cuda_codec_decode (ShoalStream *stream, ShoalCodec codec, const guint8 *in, float *out, size_t n)
{
  shoal_gpu_step_other ("a wire codec");
  cudaError_t status = shoal_k_codec_decode ((ShoalKCodec) codec, in, out, n, (cudaStream_t) stream);
  shoal_gpu_launch_failed (shoal_codec_name (codec), status);
}
