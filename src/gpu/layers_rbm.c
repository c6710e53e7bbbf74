/* GPU paths of the RBM family (rbm_visible, rbm_hidden, rbm_free_energy)
 * and of sigmoid_cross_entropy_loss: cuBLAS for the products (row-major
 * matrices through the transpose identities, as layers_blas.c), kernels
 * for sampling and sums (kernels_models.cu).  The contract is rbm.h's;
 * where the GPU differs: the samples come from a counter-based hash
 * seeded from the layer's stream (different draws than the CPU's, the
 * same probabilities, the same checkpointed stream), and the free energy
 * and reconstruction error are summed on the device. */
#include "gpu/gpu.h"

#include "gpu/kernels_models.h"
#include "layers/rbm.h"

static const float one = 1.0f, zero = 0.0f;

/* ---- rbm_visible: a copy up, the bias gradient down --------------------- */

static gboolean
rbm_visible_gpu_setup (ShoalLayer *layer, GError **error)
{
  (void) error;
  shoal_gpu_ones_reserve (shoal_gpu_ctx (layer), (size_t) shoal_tensor_rows (&layer->out));
  return TRUE;
}

static void
rbm_visible_gpu_forward (ShoalLayer *layer, ShoalPhase phase)
{
  const ShoalTensor *x = &layer->srcs[0]->out;
  (void) phase;
  GPU_CUDA (layer, "forward", cudaMemcpyAsync (layer->out.data, x->data, shoal_tensor_count (x) * sizeof (float),
                                               cudaMemcpyDeviceToDevice, shoal_gpu_ctx (layer)->compute));
}

static void
rbm_visible_gpu_backward (ShoalLayer *layer)
{
  ShoalDeviceContext *ctx = shoal_gpu_ctx (layer);
  const int rows = shoal_tensor_rows (&layer->out), v = (int) shoal_tensor_row_size (&layer->out);
  /* db += column sums of grad: grad is column-major (v, rows) to cuBLAS */
  if (rows > 0)
    GPU_BLAS (layer, "backward", cublasSgemv (ctx->blas, CUBLAS_OP_N, v, rows, &one, layer->grad.data, v, ctx->ones,
                                              1, &one, layer->params[0]->grad.data, 1));
  if (layer->src_grad[0] != NULL)
    {
      ShoalTensor *d = layer->src_grad[0];
      shoal_tensor_set_rows (d, rows);
      GPU_CUDA (layer, "backward", cudaMemsetAsync (d->data, 0, shoal_tensor_count (d) * sizeof (float), ctx->compute));
    }
}

const ShoalLayerGpuOps shoal_layer_rbm_visible_gpu = {
  .setup = rbm_visible_gpu_setup,
  .forward = rbm_visible_gpu_forward,
  .backward = rbm_visible_gpu_backward,
};

/* ---- rbm_hidden ----------------------------------------------------------- */

typedef struct {
  const ShoalLayer *vis;
  int nv, nh;
  gboolean gv, gh, sample_visible;
  float *ph0, *h, *phk, *recon, *vk;   /* device */
  float *results;                      /* device: [0] reconstruction error, [1] free energy */
  gboolean chained;
} RbmGpu;

static gboolean
rbm_hidden_gpu_setup (ShoalLayer *layer, GError **error)
{
  RbmGpu *g = g_new0 (RbmGpu, 1);
  layer->gpu_priv = g;
  g->vis = shoal_rbm_through_splits (layer->srcs[0]);
  g->nv = (int) shoal_tensor_row_size (&g->vis->out);
  g->nh = layer->params[0]->shape.dim[0];
  g->gv = shoal_rbm_visible_units (g->vis) == SHOAL_RBM_GAUSSIAN;
  char *units = shoal_layer_opt_string (layer, "units");
  g->gh = g_strcmp0 (units, "gaussian") == 0;
  g_free (units);
  g->sample_visible = shoal_layer_opt_bool (layer, "sample_visible");
  size_t cap = (size_t) shoal_tensor_rows (&layer->srcs[0]->out);
  shoal_gpu_ones_reserve (shoal_gpu_ctx (layer), cap);
  return (g->ph0 = shoal_gpu_alloc_floats (layer, cap * g->nh, error)) != NULL
         && (g->h = shoal_gpu_alloc_floats (layer, cap * g->nh, error)) != NULL
         && (g->phk = shoal_gpu_alloc_floats (layer, cap * g->nh, error)) != NULL
         && (g->recon = shoal_gpu_alloc_floats (layer, cap * g->nv, error)) != NULL
         && (g->vk = shoal_gpu_alloc_floats (layer, cap * g->nv, error)) != NULL
         && (g->results = shoal_gpu_alloc_floats (layer, 2, error)) != NULL;
}

/* pre (n, nh) = v W^T + c; row-major W (nh, nv) is column-major (nv, nh) */
static void
hidden_pre (ShoalLayer *layer, RbmGpu *g, const float *v, float *pre, int n, const char *phase)
{
  ShoalDeviceContext *ctx = shoal_gpu_ctx (layer);
  GPU_CUDA (layer, phase, shoal_k_broadcast_rows (layer->params[1]->value.data, n, g->nh, pre, ctx->compute));
  GPU_BLAS (layer, phase, shoal_gpu_gemm (ctx, CUBLAS_OP_T, CUBLAS_OP_N, g->nh, n, g->nv, one,
                                          layer->params[0]->value.data, g->nv, v, g->nv, one, pre, g->nh));
}

static void
hidden_mean (ShoalLayer *layer, RbmGpu *g, const float *v, float *ph, int n, const char *phase)
{
  hidden_pre (layer, g, v, ph, n, phase);
  if (!g->gh)
    GPU_CUDA (layer, phase, shoal_k_sigmoid_in_place (ph, (size_t) n * g->nh, shoal_gpu_ctx (layer)->compute));
}

/* pv (n, nv) = h W + b */
static void
visible_mean (ShoalLayer *layer, RbmGpu *g, const float *h, float *pv, int n, const char *phase)
{
  ShoalDeviceContext *ctx = shoal_gpu_ctx (layer);
  GPU_CUDA (layer, phase, shoal_k_broadcast_rows (g->vis->params[0]->value.data, n, g->nv, pv, ctx->compute));
  GPU_BLAS (layer, phase, shoal_gpu_gemm (ctx, CUBLAS_OP_N, CUBLAS_OP_N, g->nv, n, g->nh, one,
                                          layer->params[0]->value.data, g->nv, h, g->nh, one, pv, g->nv));
  if (!g->gv)
    GPU_CUDA (layer, phase, shoal_k_sigmoid_in_place (pv, (size_t) n * g->nv, ctx->compute));
}

static guint64
next_seed (ShoalLayer *layer)
{
  guint64 hi = shoal_rng_u32 (&layer->rng);
  return (hi << 32) | shoal_rng_u32 (&layer->rng);
}

static void
rbm_hidden_gpu_forward (ShoalLayer *layer, ShoalPhase phase)
{
  RbmGpu *g = layer->gpu_priv;
  ShoalDeviceContext *ctx = shoal_gpu_ctx (layer);
  cudaStream_t s = ctx->compute;
  const float *v0 = layer->srcs[0]->out.data;
  const int n = shoal_tensor_rows (&layer->srcs[0]->out);
  const size_t nh = (size_t) n * g->nh, nv = (size_t) n * g->nv;

  hidden_pre (layer, g, v0, g->ph0, n, "forward");
  GPU_CUDA (layer, "forward", shoal_k_rbm_free_energy (v0, g->ph0, g->vis->params[0]->value.data, n, g->nv, g->nh,
                                                       g->gv, g->gh, g->results + 1, s));
  if (!g->gh)
    GPU_CUDA (layer, "forward", shoal_k_sigmoid_in_place (g->ph0, nh, s));
  visible_mean (layer, g, g->ph0, g->recon, n, "forward");
  GPU_CUDA (layer, "forward", shoal_k_sum_squared_diff (v0, g->recon, nv, shoal_layer_loss_rows (layer, n), g->results, s));
  GPU_CUDA (layer, "forward", cudaMemcpyAsync (layer->out.data, g->results, sizeof (float), cudaMemcpyDeviceToHost, s));

  g->chained = phase == SHOAL_PHASE_TRAIN && layer->ctx->cd_k > 0;
  if (!g->chained)
    return;
  GPU_CUDA (layer, "forward", shoal_k_sample (g->ph0, g->h, nh, g->gh, next_seed (layer), s));
  for (int k = 1; k <= layer->ctx->cd_k; k++)
    {
      visible_mean (layer, g, g->h, g->vk, n, "forward");
      if (g->sample_visible)
        GPU_CUDA (layer, "forward", shoal_k_sample (g->vk, g->vk, nv, g->gv, next_seed (layer), s));
      hidden_mean (layer, g, g->vk, g->phk, n, "forward");
      if (k < layer->ctx->cd_k)
        GPU_CUDA (layer, "forward", shoal_k_sample (g->phk, g->h, nh, g->gh, next_seed (layer), s));
    }
}

static void
rbm_hidden_gpu_backward (ShoalLayer *layer)
{
  RbmGpu *g = layer->gpu_priv;
  ShoalDeviceContext *ctx = shoal_gpu_ctx (layer);
  cudaStream_t s = ctx->compute;
  const float *v0 = layer->srcs[0]->out.data;
  const int n = shoal_tensor_rows (&layer->srcs[0]->out);
  const float w = shoal_layer_loss_scale (layer, n), mw = -w;
  ShoalTensor *dv = layer->src_grad[0];

  if (dv != NULL)
    shoal_tensor_set_rows (dv, n);
  if (!g->chained || n == 0)
    {
      if (dv != NULL)
        GPU_CUDA (layer, "backward", cudaMemsetAsync (dv->data, 0, shoal_tensor_count (dv) * sizeof (float), s));
      return;
    }
  /* dW (nh, nv) row-major = column-major (nv, nh): += w vk^T phk - w v0^T ph0 */
  float *dw = layer->params[0]->grad.data;
  GPU_BLAS (layer, "backward", shoal_gpu_gemm (ctx, CUBLAS_OP_N, CUBLAS_OP_T, g->nv, g->nh, n, w, g->vk, g->nv,
                                               g->phk, g->nh, one, dw, g->nv));
  GPU_BLAS (layer, "backward", shoal_gpu_gemm (ctx, CUBLAS_OP_N, CUBLAS_OP_T, g->nv, g->nh, n, mw, v0, g->nv, g->ph0,
                                               g->nh, one, dw, g->nv));
  /* dc += w (column sums of phk - ph0) */
  float *dc = layer->params[1]->grad.data;
  GPU_BLAS (layer, "backward", cublasSgemv (ctx->blas, CUBLAS_OP_N, g->nh, n, &w, g->phk, g->nh, ctx->ones, 1, &one,
                                            dc, 1));
  GPU_BLAS (layer, "backward", cublasSgemv (ctx->blas, CUBLAS_OP_N, g->nh, n, &mw, g->ph0, g->nh, ctx->ones, 1, &one,
                                            dc, 1));
  if (dv != NULL)
    GPU_CUDA (layer, "backward", shoal_k_scaled_diff (g->vk, v0, w, dv->data, (size_t) n * g->nv, s));
  (void) zero;
}

static void
rbm_hidden_gpu_finalize (ShoalLayer *layer)
{
  RbmGpu *g = layer->gpu_priv;
  if (g == NULL)
    return;
  shoal_gpu_free (g->ph0);
  shoal_gpu_free (g->h);
  shoal_gpu_free (g->phk);
  shoal_gpu_free (g->recon);
  shoal_gpu_free (g->vk);
  shoal_gpu_free (g->results);
  g_free (g);
  layer->gpu_priv = NULL;
}

const ShoalLayerGpuOps shoal_layer_rbm_hidden_gpu = {
  .setup = rbm_hidden_gpu_setup,
  .forward = rbm_hidden_gpu_forward,
  .backward = rbm_hidden_gpu_backward,
  .finalize = rbm_hidden_gpu_finalize,
};

/* ---- rbm_free_energy: the value rbm_hidden left on the device ---------- */

static void
rbm_free_energy_gpu_forward (ShoalLayer *layer, ShoalPhase phase)
{
  const RbmGpu *g = layer->srcs[1]->gpu_priv;
  (void) phase;
  GPU_CUDA (layer, "forward", cudaMemcpyAsync (layer->out.data, g->results + 1, sizeof (float), cudaMemcpyDeviceToHost,
                                               shoal_gpu_ctx (layer)->compute));
}

const ShoalLayerGpuOps shoal_layer_rbm_free_energy_gpu = {
  .forward = rbm_free_energy_gpu_forward,
};

/* ---- sigmoid_cross_entropy_loss ------------------------------------------ */

static gboolean
xent_gpu_setup (ShoalLayer *layer, GError **error)
{
  return (layer->gpu_priv = shoal_gpu_alloc_floats (layer, 1, error)) != NULL;
}

static void
xent_gpu_forward (ShoalLayer *layer, ShoalPhase phase)
{
  const ShoalTensor *x = &layer->srcs[0]->out;
  cudaStream_t s = shoal_gpu_ctx (layer)->compute;
  float *value = layer->gpu_priv;
  (void) phase;
  if (!GPU_CUDA (layer, "forward", shoal_k_sigmoid_xent (x->data, layer->srcs[1]->out.data, shoal_tensor_count (x),
                                                         shoal_layer_loss_rows (layer, shoal_tensor_rows (x)), value, s)))
    return;
  GPU_CUDA (layer, "forward", cudaMemcpyAsync (layer->out.data, value, sizeof (float), cudaMemcpyDeviceToHost, s));
}

static void
xent_gpu_backward (ShoalLayer *layer)
{
  const ShoalTensor *x = &layer->srcs[0]->out;
  const int rows = shoal_tensor_rows (x);
  const float w = shoal_layer_loss_scale (layer, rows);
  float *dx = NULL, *dt = NULL;
  for (int i = 0; i < 2; i++)
    if (layer->src_grad[i] != NULL)
      shoal_tensor_set_rows (layer->src_grad[i], rows);
  if (layer->src_grad[0] != NULL)
    dx = layer->src_grad[0]->data;
  if (layer->src_grad[1] != NULL)
    dt = layer->src_grad[1]->data;
  GPU_CUDA (layer, "backward", shoal_k_sigmoid_xent_backward (x->data, layer->srcs[1]->out.data, shoal_tensor_count (x),
                                                              w, dx, dt, shoal_gpu_ctx (layer)->compute));
}

static void
xent_gpu_finalize (ShoalLayer *layer)
{
  shoal_gpu_free (layer->gpu_priv);
  layer->gpu_priv = NULL;
}

const ShoalLayerGpuOps shoal_layer_sigmoid_cross_entropy_loss_gpu = {
  .setup = xent_gpu_setup,
  .forward = xent_gpu_forward,
  .backward = xent_gpu_backward,
  .finalize = xent_gpu_finalize,
};
