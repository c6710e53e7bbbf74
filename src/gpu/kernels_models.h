/* CUDA kernels of the recurrent and RBM layers (kernels_models.cu), as C
 * functions that launch on a stream and return the launch status; plain
 * pointers and sizes, as kernels.h.  Each mirrors a CPU reference named
 * beside it. */
#ifndef SHOAL_GPU_KERNELS_MODELS_H
#define SHOAL_GPU_KERNELS_MODELS_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* embedding.c: out[i, :] = W[id(ids[i]), :] (zeros for an id outside
 * [0, vocab); -(id + 1) is id); backward dW[id, :] += dout[i, :] (atomic). */
cudaError_t shoal_k_embedding_forward (const float *ids, size_t n, const float *w, int vocab, int dim,
                                       float *out, cudaStream_t s);
cudaError_t shoal_k_embedding_backward (const float *ids, size_t n, const float *dout, int vocab, int dim,
                                        float *dw, cudaStream_t s);

/* recurrent.c's restarts: zeroes row r of every level of h (levels, rows,
 * hidden) where marks[r * mark_stride] < 0. */
cudaError_t shoal_k_rnn_restart (float *h, int levels, int rows, int hidden, const float *marks,
                                 size_t mark_stride, cudaStream_t s);

/* y (rows, m): every row = bias */
cudaError_t shoal_k_broadcast_rows (const float *bias, int rows, int m, float *y, cudaStream_t s);
/* x = 1 / (1 + exp (-x)) */
cudaError_t shoal_k_sigmoid_in_place (float *x, size_t n, cudaStream_t s);
/* rbm_hidden.c's sampling, from a counter-based hash of (seed, i):
 * binary out = u < mean; gaussian out = mean + N(0, 1). */
cudaError_t shoal_k_sample (const float *mean, float *out, size_t n, int gaussian, uint64_t seed, cudaStream_t s);
/* *out = sum (a - b)^2 / norm */
cudaError_t shoal_k_sum_squared_diff (const float *a, const float *b, size_t n, int norm, float *out,
                                      cudaStream_t s);
/* *out = w * (a - b), elementwise into y */
cudaError_t shoal_k_scaled_diff (const float *a, const float *b, float w, float *y, size_t n, cudaStream_t s);
/* rbm_hidden.c's mean free energy of rows of v (rows, nv) with
 * pre-activations pre (rows, nh) and visible bias b */
cudaError_t shoal_k_rbm_free_energy (const float *v, const float *pre, const float *b, int rows, int nv, int nh,
                                     int gaussian_visible, int gaussian_hidden, float *out, cudaStream_t s);

/* sigmoid_cross_entropy_loss.c: *out = sum (max (x, 0) - x t + log (1 + e^-|x|)) / norm;
 * backward dx = w (s(x) - t) (dx may be NULL), dt = -w x (dt may be NULL) */
cudaError_t shoal_k_sigmoid_xent (const float *x, const float *t, size_t n, int norm, float *out, cudaStream_t s);
cudaError_t shoal_k_sigmoid_xent_backward (const float *x, const float *t, size_t n, float w, float *dx, float *dt,
                                           cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
