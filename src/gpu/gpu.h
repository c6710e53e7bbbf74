/* What the CUDA backend and the GPU layers share (src/gpu only, built
 * with `make CUDA=1`): the per-net device context behind
 * ShoalDeviceContext, error capture, and small cuDNN helpers.
 *
 * Error handling.  GPU forward and backward return nothing and run
 * asynchronously, so a failing call is recorded in the context (the first
 * one, with the layer and the call) and reported by
 * shoal_device_context_sync, which the net calls at the end of every
 * forward and backward; later calls in the same pass still run but do no
 * harm (CUDA keeps sticky errors). */
#ifndef SHOAL_GPU_H
#define SHOAL_GPU_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "core/device_backend.h"
#include "layers/layer.h"

G_BEGIN_DECLS

struct _ShoalDeviceContext {
  ShoalDevice device;
  cudaStream_t compute;         /* layers */
  cudaStream_t copy;            /* param uploads and gradient downloads */
  cublasHandle_t blas;          /* bound to compute */
  cudnnHandle_t dnn;            /* bound to compute */
  gboolean tf32;                /* [job] precision tf32 or bf16: tensor cores may round FP32 operands */
  gboolean bf16;                /* [job] precision = bf16: GEMMs may run on BF16 tensor cores (gemm.c) */
  size_t workspace_want;        /* the most any layer asked for at set-up */
  size_t workspace_bytes;       /* allocated */
  void *workspace;
  guint64 workspace_generation; /* counts the workspace's moves (a captured graph points into it) */
  void *blas_workspace;         /* cuBLAS's (cublasSetWorkspace): no allocation in a captured step */
  size_t blas_workspace_bytes;
  size_t ones_want, ones_count; /* a vector of ones (bias sums), at least the longest batch */
  float *ones;
  GError *error;                /* first failure since the last sync */
};

/* The context of a layer on a GPU net. */
static inline ShoalDeviceContext *
shoal_gpu_ctx (const ShoalLayer *layer)
{
  return layer->ctx->gpu;
}

/* Record a failure of `what` in `layer` (the first one wins); TRUE when
 * the status is success.  `phase` is "set-up", "forward" or "backward". */
gboolean shoal_gpu_cuda_ok (const ShoalLayer *layer, const char *phase, cudaError_t status,
                            const char *what);
gboolean shoal_gpu_blas_ok (const ShoalLayer *layer, const char *phase, cublasStatus_t status,
                            const char *what);
gboolean shoal_gpu_dnn_ok (const ShoalLayer *layer, const char *phase, cudnnStatus_t status,
                           const char *what);

#define GPU_CUDA(layer, phase, call) shoal_gpu_cuda_ok ((layer), (phase), (call), #call)
#define GPU_BLAS(layer, phase, call) shoal_gpu_blas_ok ((layer), (phase), (call), #call)
#define GPU_DNN(layer, phase, call) shoal_gpu_dnn_ok ((layer), (phase), (call), #call)

/* Set-up failures: a GError naming the layer, from a status. */
gboolean shoal_gpu_dnn_setup (const ShoalLayer *layer, cudnnStatus_t status, const char *what,
                              GError **error);
gboolean shoal_gpu_cuda_setup (const ShoalLayer *layer, cudaError_t status, const char *what,
                               GError **error);
#define GPU_DNN_SETUP(layer, call, error) shoal_gpu_dnn_setup ((layer), (call), #call, (error))
#define GPU_CUDA_SETUP(layer, call, error) shoal_gpu_cuda_setup ((layer), (call), #call, (error))

/* Set-up: the layers' shared workspace must hold `bytes`; ones must hold
 * `count` floats.  Both are allocated by shoal_device_context_ready. */
void shoal_gpu_workspace_reserve (ShoalDeviceContext *ctx, size_t bytes);
void shoal_gpu_ones_reserve (ShoalDeviceContext *ctx, size_t count);
/* Forward/backward: the workspace, grown (rarely: a smaller last batch
 * may pick algorithms wanting more) to `bytes`; NULL with the failure
 * recorded when that fails. */
void *shoal_gpu_workspace (const ShoalLayer *layer, size_t bytes);

/* Device memory owned by a layer's GPU state: zeroed, NULL with error. */
float *shoal_gpu_alloc_floats (const ShoalLayer *layer, size_t count, GError **error);
void shoal_gpu_free (void *p);

/* C = alpha op(A) op(B) + beta C in column-major FP32 storage, at the
 * context's precision: cublasSgemm for fp32 and tf32 (its math mode);
 * for bf16, cuBLAS may round the operands to bfloat16, FP32 sums (gemm.c). */
cublasStatus_t shoal_gpu_gemm (const ShoalDeviceContext *ctx, cublasOperation_t op_a, cublasOperation_t op_b,
                               int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                               int ldb, float beta, float *c, int ldc);

/* An NCHW float tensor descriptor (n, c, h, w); set again when rows change. */
gboolean shoal_gpu_set_4d (cudnnTensorDescriptor_t desc, int n, int c, int h, int w);

/* The tensor is a view of device memory of the layer's net. */
void shoal_gpu_tag (const ShoalLayer *layer, ShoalTensor *t);

/* Moves a host tensor (owned or a view) to a new device tensor of the
 * same shape and capacity, copying its contents; the host memory is
 * freed when it was owned.  FALSE with error when out of memory. */
gboolean shoal_gpu_move_to_device (const ShoalLayer *layer, ShoalTensor *t, GError **error);

/* The backend's updater entries (update.c). */
/* Logs a failed launch of `what` (update.c) and clears the runtime's
 * last error; the failure surfaces again at the stream's next sync. */
void shoal_gpu_launch_failed (const char *what, cudaError_t status);
void shoal_cuda_update (ShoalStream *stream, const ShoalUpdateScalars *k, float *value, float *grad,
                        float *state_a, float *state_b, size_t n, gboolean clear_grad);
void shoal_cuda_clip (ShoalStream *stream, float *grad, size_t n, float clip_value, float clip_norm,
                      double *scratch);

/* The backend's codec entries (codec.c). */
void shoal_cuda_codec_encode (ShoalStream *stream, ShoalCodec codec, float *src, float scale, gboolean clear_src,
                              const float *residual_in, float *residual_out, size_t n, guint8 *out);
void shoal_cuda_codec_decode (ShoalStream *stream, ShoalCodec codec, const guint8 *in, float *out, size_t n);

G_END_DECLS

#endif
