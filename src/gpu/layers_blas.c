/* GPU path of the dense layer through cuBLAS.
 *
 * cuBLAS is column-major; dense.c's tensors are row-major: x (n, d),
 * W (o, d), y (n, o).  A row-major (r, c) matrix is the column-major
 * (c, r) matrix of the same memory, its transpose, so with X = x^T (d, n),
 * Wc = W^T (d, o) and Y = y^T (o, n) as cuBLAS sees them:
 *   forward   Y   = Wc^T X                gemm (T, N) m=o n=n k=d, then
 *             Y  += b 1^T                 ger (the bias in every column)
 *   backward  dWc += X dY^T               gemm (N, T) m=d n=o k=n, beta 1:
 *                                         dW += dy^T x, dense.c's "adds"
 *             db += dY 1                  gemv, beta 1
 *             dX  = Wc dY                 gemm (N, N) m=d n=n k=o, beta 0
 * No copies or transposes of the data are needed. */
#include "gpu/gpu.h"

typedef struct {
  int d, o;
  int per_row;   /* input vectors per row (dense's axis > 1) */
} DenseGpu;

static gboolean
dense_gpu_setup (ShoalLayer *layer, GError **error)
{
  DenseGpu *g = g_new0 (DenseGpu, 1);
  const ShoalTensor *x = &layer->srcs[0]->out;
  (void) error;
  layer->gpu_priv = g;
  g->o = layer->out.shape.dim[layer->out.shape.ndim - 1];
  g->per_row = (int) (shoal_tensor_row_size (&layer->out) / (size_t) g->o);
  g->d = (int) (shoal_tensor_row_size (x) / (size_t) g->per_row);
  /* the bias rank-1 updates and sums run against a vector of ones */
  size_t rows = g->d > 0 ? x->capacity / (size_t) g->d : 1;
  shoal_gpu_ones_reserve (shoal_gpu_ctx (layer), MAX (rows, (size_t) 1));
  return TRUE;
}

static void
dense_gpu_forward (ShoalLayer *layer, ShoalPhase phase)
{
  DenseGpu *g = layer->gpu_priv;
  ShoalDeviceContext *ctx = shoal_gpu_ctx (layer);
  const ShoalTensor *x = &layer->srcs[0]->out;
  const int n = shoal_tensor_rows (x) * g->per_row;
  const float one = 1.0f, zero = 0.0f;
  (void) phase;
  if (n == 0)
    return;
  if (!GPU_BLAS (layer, "forward",
                 shoal_gpu_gemm (ctx, CUBLAS_OP_T, CUBLAS_OP_N, g->o, n, g->d, one, layer->params[0]->value.data,
                                 g->d, x->data, g->d, zero, layer->out.data, g->o)))
    return;
  if (layer->nparams > 1)
    GPU_BLAS (layer, "forward",
              cublasSger (ctx->blas, g->o, n, &one, layer->params[1]->value.data, 1, ctx->ones, 1,
                          layer->out.data, g->o));
}

static void
dense_gpu_backward (ShoalLayer *layer)
{
  DenseGpu *g = layer->gpu_priv;
  ShoalDeviceContext *ctx = shoal_gpu_ctx (layer);
  const ShoalTensor *x = &layer->srcs[0]->out;
  const int n = shoal_tensor_rows (x) * g->per_row;
  const float *dy = layer->grad.data;
  const float one = 1.0f, zero = 0.0f;
  if (n == 0)
    return;
  GPU_BLAS (layer, "backward",
            shoal_gpu_gemm (ctx, CUBLAS_OP_N, CUBLAS_OP_T, g->d, g->o, n, one, x->data, g->d, dy, g->o, one,
                            layer->params[0]->grad.data, g->d));
  if (layer->nparams > 1)
    GPU_BLAS (layer, "backward",
              cublasSgemv (ctx->blas, CUBLAS_OP_N, g->o, n, &one, dy, g->o, ctx->ones, 1, &one,
                           layer->params[1]->grad.data, 1));
  if (layer->src_grad[0] != NULL)
    GPU_BLAS (layer, "backward",
              shoal_gpu_gemm (ctx, CUBLAS_OP_N, CUBLAS_OP_N, g->d, n, g->o, one, layer->params[0]->value.data, g->d,
                              dy, g->o, zero, layer->src_grad[0]->data, g->d));
}

static void
dense_gpu_finalize (ShoalLayer *layer)
{
  g_free (layer->gpu_priv);
  layer->gpu_priv = NULL;
}

const ShoalLayerGpuOps shoal_layer_dense_gpu = {
  .setup = dense_gpu_setup,
  .forward = dense_gpu_forward,
  .backward = dense_gpu_backward,
  .finalize = dense_gpu_finalize,
};
