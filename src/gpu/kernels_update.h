/* The updater rules and gradient clipping as CUDA kernels
 * (kernels_update.cu), launched from C (src/gpu/update.c): plain
 * pointers and numbers only, as in kernels.h.  The rules mirror
 * core/updater.c operation for operation. */
#ifndef SHOAL_GPU_KERNELS_UPDATE_H
#define SHOAL_GPU_KERNELS_UPDATE_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  SHOAL_K_SGD,
  SHOAL_K_MOMENTUM,
  SHOAL_K_NESTEROV,
  SHOAL_K_ADAGRAD,
  SHOAL_K_RMSPROP,
  SHOAL_K_ADADELTA,
  SHOAL_K_ADAM
} ShoalKRule;

/* core/updater.h's ShoalUpdateScalars without GLib types */
typedef struct {
  ShoalKRule rule;
  float lr, wd, mom, rho, eps, b1, b2, lr_c, rs;
} ShoalKUpdate;

/* One update of w[0, n) from g (zeroed as read when clear), with state
 * a (and b for adadelta and adam). */
cudaError_t shoal_k_update (const ShoalKUpdate *k, float *w, float *g, float *a, float *b, size_t n, int clear,
                            cudaStream_t s);

/* The same with the scalars read on the device from `at` (k->rule picks
 * the kernel, the rest of *k is not read): a CUDA graph's update, whose
 * scalars the host refills before each launch (gpu/graph.c). */
cudaError_t shoal_k_update_at (const ShoalKUpdate *k, const ShoalKUpdate *at, float *w, float *g, float *a, float *b,
                               size_t n, int clear, cudaStream_t s);

/* shoal_clip_gradients on g[0, n): clamp to +-clip_value (> 0), then
 * scale to L2 norm clip_norm (> 0) when above it.  scratch: 2 doubles
 * of device memory (the sums of squares before and after clamping). */
cudaError_t shoal_k_clip (float *g, size_t n, float clip_value, float clip_norm, double *scratch,
                          cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
