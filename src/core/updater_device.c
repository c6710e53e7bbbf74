/* The updater rules and gradient clipping on a GPU (core/updater.h):
 * the scalars are resolved here, by the same function the host loops
 * use, and the GPU backend's kernels (src/gpu/kernels_update.cu) do the
 * arithmetic.  In a build without the backend nothing can hold device
 * memory, so these are never reached there. */
#include "core/device_backend.h"

void
shoal_updater_apply_on (ShoalStream *stream, const ShoalUpdaterConf *conf, int step, gint64 t,
                        float lr_scale, float wd_scale, float *value, float *grad, float *state_a,
                        float *state_b, size_t n, gboolean clear_grad)
{
  const ShoalDeviceBackend *b = shoal_device_gpu_backend ();
  g_return_if_fail (stream != NULL && conf != NULL && b != NULL);
  if (n == 0)
    return;
  g_return_if_fail (value != NULL && grad != NULL);
  int per = shoal_updater_state_per_value (conf->kind);
  gboolean stateless = conf->kind == SHOAL_UPDATER_SGD && conf->momentum == 0.0f;
  g_return_if_fail (stateless || per < 1 || state_a != NULL);
  g_return_if_fail (per < 2 || state_b != NULL);
  ShoalUpdateScalars k;
  shoal_updater_scalars (conf, step, t, lr_scale, wd_scale, &k);
  b->update (stream, &k, value, grad, state_a, state_b, n, clear_grad);
}

void
shoal_clip_gradients_on (ShoalStream *stream, float *grad, size_t n, float clip_value, float clip_norm,
                         double *scratch)
{
  const ShoalDeviceBackend *b = shoal_device_gpu_backend ();
  g_return_if_fail (stream != NULL && b != NULL && scratch != NULL);
  if (n == 0 || (clip_value <= 0.0f && clip_norm <= 0.0f))
    return;
  b->clip (stream, grad, n, clip_value, clip_norm, scratch);
}
