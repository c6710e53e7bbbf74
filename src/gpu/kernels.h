/* The CUDA kernels of the GPU layers (kernels.cu), as C functions that
 * launch on a stream and return the launch status.  Plain pointers and
 * sizes only: the kernels' file is compiled by nvcc as C++ and includes no
 * shoal or GLib header.
 *
 * Each mirrors a CPU reference in src/layers (named beside it) closely
 * enough that test/test_gpu.c compares them element by element. */
#ifndef SHOAL_GPU_KERNELS_H
#define SHOAL_GPU_KERNELS_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* relu.c with negative_slope > 0 (cuDNN has no leaky ReLU) */
cudaError_t shoal_k_leaky_relu_forward (const float *x, float *y, size_t n, float slope, cudaStream_t s);
cudaError_t shoal_k_leaky_relu_backward (const float *y, const float *dy, float *dx, size_t n,
                                         float slope, cudaStream_t s);
/* stanh.c: y = A tanh (B x), dx = dy * B (A - y^2 / A) */
cudaError_t shoal_k_stanh_forward (const float *x, float *y, size_t n, cudaStream_t s);
cudaError_t shoal_k_stanh_backward (const float *y, const float *dy, float *dx, size_t n, cudaStream_t s);

/* dropout.c: mask[i] = scale when a 16-bit draw of (seed, i) >= threshold,
 * else 0; y = x * mask.  The draws come from a counter-based hash, so
 * they differ from the CPU's stream but keep its quantised probability.
 * The seed is `seed`, or *seed_at (device memory) where seed_at is not
 * NULL: a CUDA graph's launch, whose seed the host refills (gpu/graph.c). */
cudaError_t shoal_k_dropout_forward (const float *x, float *y, float *mask, size_t n, uint64_t seed,
                                     const uint64_t *seed_at, uint32_t threshold, float scale, cudaStream_t s);
/* y = a * b */
cudaError_t shoal_k_multiply (const float *a, const float *b, float *y, size_t n, cudaStream_t s);
/* y = alpha * x */
cudaError_t shoal_k_scale (const float *x, float alpha, float *y, size_t n, cudaStream_t s);

/* What a loss kernel leaves on the device: the loss, and the first row
 * whose label is no class (-1 when none) with that label. */
typedef struct {
  float value;
  int bad_row;
  float bad_label;
} ShoalLossResult;

/* softmax_loss.c from log-probabilities logp (rows, k):
 * value = (sum over labelled rows of -logp[y]) / norm. */
cudaError_t shoal_k_softmax_loss (const float *logp, const float *label, int rows, int k, int norm,
                                  ShoalLossResult *out, cudaStream_t s);
/* dx = (exp (logp) - onehot (y)) * w; zero rows where the label is no class */
cudaError_t shoal_k_softmax_loss_backward (const float *logp, const float *label, int rows, int k,
                                           float w, float *dx, cudaStream_t s);
/* euclidean_loss.c: diff = a - b, value = 0.5 * sum diff^2 / norm */
cudaError_t shoal_k_euclidean_loss (const float *a, const float *b, float *diff, size_t n,
                                    int norm, ShoalLossResult *out, cudaStream_t s);
/* accuracy.c: *out = correct rows / labelled rows (0 when none) */
cudaError_t shoal_k_accuracy (const float *logits, const float *label, int rows, int k, int top_k,
                              float *out, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
