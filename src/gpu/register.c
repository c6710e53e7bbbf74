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

/* The GPU paths: every type layers/layer_list.h lists with SHOAL_LAYER
 * (its SHOAL_LAYER_CPU_ONLY types say why they have none), and the three
 * types outside that list: split (the net inserts it) and the data
 * layers lmdb_input and text_input (src/data registers their ops). */
#define OFF_LIST_GPU_LAYERS(X) X (split) X (lmdb_input) X (text_input)
#define SHOAL_LAYER_CPU_ONLY(type, why)

#define DECLARE(type) extern const ShoalLayerGpuOps shoal_layer_##type##_gpu;
#define SHOAL_LAYER(type) DECLARE (type)
#include "layers/layer_list.h"
#undef SHOAL_LAYER
OFF_LIST_GPU_LAYERS (DECLARE)
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
#define SHOAL_LAYER(type) REGISTER (type)
#include "layers/layer_list.h"
#undef SHOAL_LAYER
  OFF_LIST_GPU_LAYERS (REGISTER)
#undef REGISTER
  g_once_init_leave (&done, 1);
}

__attribute__ ((constructor)) static void
gpu_load (void)
{
  shoal_gpu_register ();
}
