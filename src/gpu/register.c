/* Plugs the CUDA backend into shoal: the device backend into core's
 * device table and each built-in layer type's GPU path into the layer
 * registry, by name.  Nothing below src/gpu names CUDA; this file is why
 * a CUDA build of the same sources runs on GPUs.
 *
 * It runs when the backend is loaded (libshoal.so of a CUDA build, or
 * this object in a static link: the Makefile's -u shoal_gpu_register
 * pulls it in), before main. */
#include "gpu/gpu.h"

extern const ShoalDeviceBackend shoal_cuda_backend;

#define GPU_LAYERS(X) X (accuracy) X (batchnorm) X (concat) X (conv) X (dense) X (dropout) \
  X (euclidean_loss) X (feed) X (lmdb_input) X (lrn) X (pooling) X (relu) X (sigmoid) \
  X (softmax_loss) X (split) X (stanh) X (tanh) \
  X (embedding) X (gru) X (lstm) X (text_input) X (rbm_visible) X (rbm_hidden) X (rbm_free_energy) \
  X (sigmoid_cross_entropy_loss)

#define DECLARE(type) extern const ShoalLayerGpuOps shoal_layer_##type##_gpu;
GPU_LAYERS (DECLARE)
#undef DECLARE

void shoal_gpu_register (void);

void
shoal_gpu_register (void)
{
  static gsize done;

  if (!g_once_init_enter (&done))
    return;
  shoal_device_register_backend (&shoal_cuda_backend);
#define REGISTER(type) shoal_layer_register_gpu (#type, &shoal_layer_##type##_gpu);
  GPU_LAYERS (REGISTER)
#undef REGISTER
  g_once_init_leave (&done, 1);
}

__attribute__ ((constructor)) static void
gpu_load (void)
{
  shoal_gpu_register ();
}
