/* The wire codecs on a GPU (core/codec.h): checked here, run by the GPU
 * backend's kernels (src/gpu/kernels_codec.cu).  In a build without the
 * backend nothing can hold device memory, so these are never reached
 * there. */
#include "core/codec.h"
#include "core/device_backend.h"

void
shoal_codec_encode_on (ShoalStream *stream, ShoalCodec codec, float *src, float scale, gboolean clear_src,
                       const float *residual_in, float *residual_out, size_t n, guint8 *out)
{
  const ShoalDeviceBackend *b = shoal_device_gpu_backend ();
  g_return_if_fail (stream != NULL && b != NULL && (unsigned) codec < SHOAL_CODEC_COUNT);
  if (n == 0)
    return;
  g_return_if_fail (src != NULL && out != NULL && ((guintptr) out & 3u) == 0);
  b->codec_encode (stream, codec, src, scale, clear_src, residual_in, residual_out, n, out);
}

void
shoal_codec_decode_on (ShoalStream *stream, ShoalCodec codec, const guint8 *in, float *out, size_t n)
{
  const ShoalDeviceBackend *b = shoal_device_gpu_backend ();
  g_return_if_fail (stream != NULL && b != NULL);
  g_return_if_fail (codec == SHOAL_CODEC_FP32 || codec == SHOAL_CODEC_FP16 || codec == SHOAL_CODEC_BF16);
  if (n == 0)
    return;
  g_return_if_fail (in != NULL && out != NULL && ((guintptr) in & 3u) == 0);
  b->codec_decode (stream, codec, in, out, n);
}
