/* GPU paths of the layers cuDNN computes: convolution, pooling, LRN,
 * ReLU / sigmoid / tanh, batch normalisation and the softmax of
 * softmax_loss.
 *
 * They use cuDNN's classic descriptor API (cudnnConvolutionForward and
 * friends).  cuDNN 9 still ships it in cudnn_cnn / cudnn_ops but marks it
 * deprecated in favour of the graph API, hence the pragma; moving to the
 * graph API is a rewrite of this file, nothing else.
 *
 * Each layer re-reads its options with the same rules as its CPU file
 * and takes shapes from what the CPU set-up decided (out shape, params),
 * so the two paths cannot disagree on geometry.  Descriptors carry the
 * batch size: they are set again when a forward brings another number of
 * rows (the last test batch). */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include "gpu/gpu.h"

#include <math.h>
#include <string.h>

#include "gpu/kernels.h"

static const float one = 1.0f, zero = 0.0f;

/* Largest workspace an algorithm may ask for: a quarter of what is free
 * at set-up, at most 1 GiB. */
static size_t
workspace_limit (void)
{
  size_t free_bytes = 0, total = 0;
  if (cudaMemGetInfo (&free_bytes, &total) != cudaSuccess)
    {
      cudaGetLastError ();
      return (size_t) 256 << 20;
    }
  return MIN (free_bytes / 4, (size_t) 1 << 30);
}

static gboolean
math_allowed (const ShoalDeviceContext *ctx, cudnnMathType_t m)
{
  return ctx->tf32 || (m != CUDNN_TENSOR_OP_MATH && m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION);
}

/* ---- convolution -------------------------------------------------------- */

/* [job] precision = bf16 leaves convolutions on FP32 plans with TF32
 * allowed (ctx->tf32 is set for bf16 too).  cuDNN's bfloat16
 * convolutions through this API (bfloat16 copies of x, W, dy, FP32 sums)
 * were built and measured on an H100: LeNet at batch 512 ran 131k
 * samples/s in NCHW and 110k in NHWC against FP32's 344-369k, and with
 * 32/64 filters (channels in multiples of 8, tensor-core shapes) 56k
 * against 321k; PyTorch's autocast lost too (0.82x).  docs/GPU.md. */

typedef struct {
  int c, h, w, f, kh, kw, oh, ow;
  int rows;                                   /* rows the descriptors hold */
  cudnnTensorDescriptor_t x, y, bias;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t fwd, bwd_data, bwd_filter;
  cudnnConvolutionFwdAlgo_t fwd_algo;
  cudnnConvolutionBwdDataAlgo_t data_algo;
  cudnnConvolutionBwdFilterAlgo_t filter_algo;
  size_t ws;                                  /* workspace of the three algorithms at `rows` */
} ConvGpu;

static gboolean
conv_workspace (ShoalLayer *layer, ConvGpu *g, GError **error)
{
  ShoalDeviceContext *ctx = shoal_gpu_ctx (layer);
  size_t a = 0, b = 0, c = 0;
  if (!GPU_DNN_SETUP (layer, cudnnGetConvolutionForwardWorkspaceSize (ctx->dnn, g->x, g->wd, g->fwd, g->y,
                                                                       g->fwd_algo, &a), error)
      || !GPU_DNN_SETUP (layer, cudnnGetConvolutionBackwardDataWorkspaceSize (ctx->dnn, g->wd, g->y,
                                                                               g->bwd_data, g->x,
                                                                               g->data_algo, &b), error)
      || !GPU_DNN_SETUP (layer, cudnnGetConvolutionBackwardFilterWorkspaceSize (ctx->dnn, g->x, g->y,
                                                                                 g->bwd_filter, g->wd,
                                                                                 g->filter_algo, &c), error))
    return FALSE;
  g->ws = MAX (a, MAX (b, c));
  return TRUE;
}

/* What conv_choose reads of an algorithm cuDNN offers (its three
 * directions' perf structs are three types with these fields). */
typedef struct {
  cudnnStatus_t status;
  size_t memory;
  cudnnMathType_t math;
  cudnnDeterminism_t determinism;
} AlgoOffer;

#define ALGO_OFFERS(perf, n, offers)                                                                           \
  for (int i_ = 0; i_ < (n); i_++)                                                                               \
  (offers)[i_] = (AlgoOffer) { (perf)[i_].status, (perf)[i_].memory, (perf)[i_].mathType, (perf)[i_].determinism }

/* The first algorithm of cuDNN's heuristics (sorted by expected speed)
 * that runs, fits the workspace limit and keeps FP32 exact unless TF32 is
 * allowed, a deterministic one first (pass 0), any after (pass 1): two
 * runs of a step from the same values then give the same bits, which a
 * CUDA graph's check against the eager step (test_gpu /gpu/graph-bitwise)
 * and a resumed run need; cuDNN's non-deterministic ones sum with
 * atomics.  Sets its math (TF32's where allowed, else `base`) on the
 * direction's descriptor; its index in *chosen. */
static gboolean
conv_pick (ShoalLayer *layer, const AlgoOffer *offers, int n, size_t limit, cudnnMathType_t base,
           cudnnConvolutionDescriptor_t desc, const char *direction, int *chosen, GError **error)
{
  ShoalDeviceContext *ctx = shoal_gpu_ctx (layer);
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < n; i++)
      if (offers[i].status == CUDNN_STATUS_SUCCESS && offers[i].memory <= limit
          && math_allowed (ctx, offers[i].math) && (pass == 1 || offers[i].determinism == CUDNN_DETERMINISTIC))
        {
          *chosen = i;
          return GPU_DNN_SETUP (layer, cudnnSetConvolutionMathType (desc, ctx->tf32 ? offers[i].math : base),
                                error);
        }
  shoal_layer_error (layer, error, NULL, "cuDNN offers no %s convolution algorithm for layer '%s'", direction,
                     layer->name);
  return FALSE;
}

/* Each direction on its own descriptor with its algorithm's math. */
static gboolean
conv_choose (ShoalLayer *layer, ConvGpu *g, GError **error)
{
  ShoalDeviceContext *ctx = shoal_gpu_ctx (layer);
  size_t limit = workspace_limit ();
  cudnnMathType_t base = ctx->tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  int n = 0, i = 0;

  if (!GPU_DNN_SETUP (layer, cudnnSetConvolutionMathType (g->fwd, base), error)
      || !GPU_DNN_SETUP (layer, cudnnSetConvolutionMathType (g->bwd_data, base), error)
      || !GPU_DNN_SETUP (layer, cudnnSetConvolutionMathType (g->bwd_filter, base), error))
    return FALSE;

  AlgoOffer offers[MAX ((int) CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                        MAX ((int) CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                             (int) CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT))];
  cudnnConvolutionFwdAlgoPerf_t fp[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  if (!GPU_DNN_SETUP (layer, cudnnGetConvolutionForwardAlgorithm_v7 (ctx->dnn, g->x, g->wd, g->fwd, g->y,
                                                                      CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                                      &n, fp), error))
    return FALSE;
  ALGO_OFFERS (fp, n, offers);
  if (!conv_pick (layer, offers, n, limit, base, g->fwd, "forward", &i, error))
    return FALSE;
  g->fwd_algo = fp[i].algo;

  cudnnConvolutionBwdDataAlgoPerf_t dp[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
  if (!GPU_DNN_SETUP (layer, cudnnGetConvolutionBackwardDataAlgorithm_v7 (ctx->dnn, g->wd, g->y, g->bwd_data,
                                                                           g->x,
                                                                           CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                                                           &n, dp), error))
    return FALSE;
  ALGO_OFFERS (dp, n, offers);
  if (!conv_pick (layer, offers, n, limit, base, g->bwd_data, "backward-data", &i, error))
    return FALSE;
  g->data_algo = dp[i].algo;

  cudnnConvolutionBwdFilterAlgoPerf_t wp[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  if (!GPU_DNN_SETUP (layer, cudnnGetConvolutionBackwardFilterAlgorithm_v7 (
                                 ctx->dnn, g->x, g->y, g->bwd_filter, g->wd,
                                 CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, wp), error))
    return FALSE;
  ALGO_OFFERS (wp, n, offers);
  if (!conv_pick (layer, offers, n, limit, base, g->bwd_filter, "backward-filter", &i, error))
    return FALSE;
  g->filter_algo = wp[i].algo;
  return conv_workspace (layer, g, error);
}

static gboolean
conv_gpu_setup (ShoalLayer *layer, GError **error)
{
  ConvGpu *g = g_new0 (ConvGpu, 1);
  layer->gpu_priv = g;
  const ShoalShape *in = &layer->srcs[0]->out.shape, *out = &layer->out.shape;
  g->c = in->dim[1];
  g->h = in->dim[2];
  g->w = in->dim[3];
  g->f = out->dim[1];
  g->oh = out->dim[2];
  g->ow = out->dim[3];
  g->kh = shoal_layer_opt_int_or (layer, "kernel_h", 0, "kernel");
  g->kw = shoal_layer_opt_int_or (layer, "kernel_w", 0, "kernel");
  int sh = shoal_layer_opt_int_or (layer, "stride_h", 0, "stride"), sw = shoal_layer_opt_int_or (layer, "stride_w", 0, "stride");
  int ph = shoal_layer_opt_int_or (layer, "pad_h", -1, "pad"), pw = shoal_layer_opt_int_or (layer, "pad_w", -1, "pad");
  g->rows = in->dim[0];

  if (!GPU_DNN_SETUP (layer, cudnnCreateTensorDescriptor (&g->x), error)
      || !GPU_DNN_SETUP (layer, cudnnCreateTensorDescriptor (&g->y), error)
      || !GPU_DNN_SETUP (layer, cudnnCreateTensorDescriptor (&g->bias), error)
      || !GPU_DNN_SETUP (layer, cudnnCreateFilterDescriptor (&g->wd), error)
      || !GPU_DNN_SETUP (layer, cudnnCreateConvolutionDescriptor (&g->fwd), error)
      || !GPU_DNN_SETUP (layer, cudnnCreateConvolutionDescriptor (&g->bwd_data), error)
      || !GPU_DNN_SETUP (layer, cudnnCreateConvolutionDescriptor (&g->bwd_filter), error))
    return FALSE;
  cudnnConvolutionDescriptor_t convs[3] = { g->fwd, g->bwd_data, g->bwd_filter };
  for (int i = 0; i < 3; i++)
    if (!GPU_DNN_SETUP (layer, cudnnSetConvolution2dDescriptor (convs[i], ph, pw, sh, sw, 1, 1,
                                                                CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                        error))
      return FALSE;
  if (!shoal_gpu_set_4d (g->x, g->rows, g->c, g->h, g->w) || !shoal_gpu_set_4d (g->y, g->rows, g->f, g->oh, g->ow)
      || !shoal_gpu_set_4d (g->bias, 1, g->f, 1, 1)
      || !GPU_DNN_SETUP (layer, cudnnSetFilter4dDescriptor (g->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, g->f,
                                                            g->c, g->kh, g->kw), error))
    {
      if (error != NULL && *error == NULL)
        shoal_layer_error (layer, error, NULL, "layer '%s': cuDNN refused its tensor shapes", layer->name);
      return FALSE;
    }
  int n, c, h, w;
  if (!GPU_DNN_SETUP (layer, cudnnGetConvolution2dForwardOutputDim (g->fwd, g->x, g->wd, &n, &c, &h, &w),
                      error))
    return FALSE;
  if (c != g->f || h != g->oh || w != g->ow)
    {
      shoal_layer_error (layer, error, NULL, "layer '%s': cuDNN computes a %dx%dx%d output, the layer %dx%dx%d",
                         layer->name, c, h, w, g->f, g->oh, g->ow);
      return FALSE;
    }
  if (!conv_choose (layer, g, error))
    return FALSE;
  shoal_gpu_workspace_reserve (shoal_gpu_ctx (layer), g->ws);
  return TRUE;
}

/* Descriptors for this pass's rows (and the workspace they need). */
static gboolean
conv_rows (ShoalLayer *layer, ConvGpu *g, const char *phase)
{
  int rows = shoal_tensor_rows (&layer->srcs[0]->out);
  if (rows == g->rows)
    return TRUE;
  g->rows = rows;
  GError *error = NULL;
  if (!shoal_gpu_set_4d (g->x, rows, g->c, g->h, g->w) || !shoal_gpu_set_4d (g->y, rows, g->f, g->oh, g->ow)
      || !conv_workspace (layer, g, &error))
    {
      GPU_DNN (layer, phase, CUDNN_STATUS_BAD_PARAM);
      g_clear_error (&error);
      return FALSE;
    }
  return TRUE;
}

static void
conv_gpu_forward (ShoalLayer *layer, ShoalPhase phase)
{
  ConvGpu *g = layer->gpu_priv;
  ShoalDeviceContext *ctx = shoal_gpu_ctx (layer);
  (void) phase;
  if (shoal_tensor_rows (&layer->srcs[0]->out) == 0 || !conv_rows (layer, g, "forward"))
    return;
  void *ws = shoal_gpu_workspace (layer, g->ws);
  if (ws == NULL && g->ws > 0)
    return;
  GPU_DNN (layer, "forward",
           cudnnConvolutionForward (ctx->dnn, &one, g->x, layer->srcs[0]->out.data, g->wd,
                                    layer->params[0]->value.data, g->fwd, g->fwd_algo, ws, g->ws, &zero, g->y,
                                    layer->out.data));
  if (layer->nparams > 1)
    GPU_DNN (layer, "forward",
             cudnnAddTensor (ctx->dnn, &one, g->bias, layer->params[1]->value.data, &one, g->y, layer->out.data));
}

static void
conv_gpu_backward (ShoalLayer *layer)
{
  ConvGpu *g = layer->gpu_priv;
  ShoalDeviceContext *ctx = shoal_gpu_ctx (layer);
  ShoalTensor *dx = layer->src_grad[0];
  if (shoal_tensor_rows (&layer->srcs[0]->out) == 0 || !conv_rows (layer, g, "backward"))
    return;
  void *ws = shoal_gpu_workspace (layer, g->ws);
  if (ws == NULL && g->ws > 0)
    return;
  if (layer->nparams > 1)
    GPU_DNN (layer, "backward",
             cudnnConvolutionBackwardBias (ctx->dnn, &one, g->y, layer->grad.data, &one, g->bias,
                                           layer->params[1]->grad.data));
  GPU_DNN (layer, "backward",
           cudnnConvolutionBackwardFilter (ctx->dnn, &one, g->x, layer->srcs[0]->out.data, g->y, layer->grad.data,
                                           g->bwd_filter, g->filter_algo, ws, g->ws, &one, g->wd,
                                           layer->params[0]->grad.data));
  if (dx != NULL)
    GPU_DNN (layer, "backward",
             cudnnConvolutionBackwardData (ctx->dnn, &one, g->wd, layer->params[0]->value.data, g->y,
                                           layer->grad.data, g->bwd_data, g->data_algo, ws, g->ws, &zero, g->x,
                                           dx->data));
}

static void
conv_gpu_finalize (ShoalLayer *layer)
{
  ConvGpu *g = layer->gpu_priv;
  if (g == NULL)
    return;
  if (g->x)
    cudnnDestroyTensorDescriptor (g->x);
  if (g->y)
    cudnnDestroyTensorDescriptor (g->y);
  if (g->bias)
    cudnnDestroyTensorDescriptor (g->bias);
  if (g->wd)
    cudnnDestroyFilterDescriptor (g->wd);
  if (g->fwd)
    cudnnDestroyConvolutionDescriptor (g->fwd);
  if (g->bwd_data)
    cudnnDestroyConvolutionDescriptor (g->bwd_data);
  if (g->bwd_filter)
    cudnnDestroyConvolutionDescriptor (g->bwd_filter);
  g_free (g);
  layer->gpu_priv = NULL;
}

const ShoalLayerGpuOps shoal_layer_conv_gpu = {
  .setup = conv_gpu_setup,
  .forward = conv_gpu_forward,
  .backward = conv_gpu_backward,
  .finalize = conv_gpu_finalize,
};

/* ---- pooling ------------------------------------------------------------ */

typedef struct {
  int c, h, w, oh, ow, rows;
  cudnnPoolingDescriptor_t pool;
  cudnnTensorDescriptor_t x, y;
} PoolGpu;

static gboolean
pooling_gpu_setup (ShoalLayer *layer, GError **error)
{
  PoolGpu *g = g_new0 (PoolGpu, 1);
  layer->gpu_priv = g;
  const ShoalShape *in = &layer->srcs[0]->out.shape, *out = &layer->out.shape;
  g->c = in->dim[1];
  g->h = in->dim[2];
  g->w = in->dim[3];
  g->oh = out->dim[2];
  g->ow = out->dim[3];
  g->rows = in->dim[0];

  char *kind = shoal_layer_opt_string (layer, "pool");
  gboolean avg = strcmp (kind, "avg") == 0;
  g_free (kind);
  int kh = shoal_layer_opt_int_or (layer, "kernel_h", 0, "kernel"), kw = shoal_layer_opt_int_or (layer, "kernel_w", 0, "kernel");
  int stride = (int) shoal_layer_opt_int (layer, "stride");
  int sh = (int) shoal_layer_opt_int (layer, "stride_h"), sw = (int) shoal_layer_opt_int (layer, "stride_w");
  if (sh == 0)
    sh = stride > 0 ? stride : kh;
  if (sw == 0)
    sw = stride > 0 ? stride : kw;
  int ph = shoal_layer_opt_int_or (layer, "pad_h", -1, "pad"), pw = shoal_layer_opt_int_or (layer, "pad_w", -1, "pad");
  cudnnPoolingMode_t mode = !avg ? CUDNN_POOLING_MAX_DETERMINISTIC
                            : shoal_layer_opt_bool (layer, "exclude_pad") ? CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING
                                                                          : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;

  if (!GPU_DNN_SETUP (layer, cudnnCreatePoolingDescriptor (&g->pool), error)
      || !GPU_DNN_SETUP (layer, cudnnCreateTensorDescriptor (&g->x), error)
      || !GPU_DNN_SETUP (layer, cudnnCreateTensorDescriptor (&g->y), error)
      || !GPU_DNN_SETUP (layer, cudnnSetPooling2dDescriptor (g->pool, mode, CUDNN_NOT_PROPAGATE_NAN, kh, kw, ph, pw,
                                                             sh, sw), error))
    return FALSE;
  if (!shoal_gpu_set_4d (g->x, g->rows, g->c, g->h, g->w) || !shoal_gpu_set_4d (g->y, g->rows, g->c, g->oh, g->ow))
    {
      shoal_layer_error (layer, error, NULL, "layer '%s': cuDNN refused its tensor shapes", layer->name);
      return FALSE;
    }
  int n, c, h, w;
  if (!GPU_DNN_SETUP (layer, cudnnGetPooling2dForwardOutputDim (g->pool, g->x, &n, &c, &h, &w), error))
    return FALSE;
  if (h != g->oh || w != g->ow)
    {
      /* ceil_mode's extra window: cuDNN only rounds down */
      shoal_layer_error (layer, error, "ceil_mode",
                         "layer '%s' has no GPU path for an output of %dx%d (cuDNN pools to %dx%d: ceil_mode "
                         "windows are CPU only)", layer->name, g->oh, g->ow, h, w);
      return FALSE;
    }
  return TRUE;
}

static gboolean
pool_rows (ShoalLayer *layer, PoolGpu *g, const char *phase)
{
  int rows = shoal_tensor_rows (&layer->srcs[0]->out);
  if (rows == g->rows)
    return TRUE;
  g->rows = rows;
  if (!shoal_gpu_set_4d (g->x, rows, g->c, g->h, g->w) || !shoal_gpu_set_4d (g->y, rows, g->c, g->oh, g->ow))
    return GPU_DNN (layer, phase, CUDNN_STATUS_BAD_PARAM);
  return TRUE;
}

static void
pooling_gpu_forward (ShoalLayer *layer, ShoalPhase phase)
{
  PoolGpu *g = layer->gpu_priv;
  (void) phase;
  if (shoal_tensor_rows (&layer->srcs[0]->out) == 0 || !pool_rows (layer, g, "forward"))
    return;
  GPU_DNN (layer, "forward",
           cudnnPoolingForward (shoal_gpu_ctx (layer)->dnn, g->pool, &one, g->x, layer->srcs[0]->out.data, &zero,
                                g->y, layer->out.data));
}

static void
pooling_gpu_backward (ShoalLayer *layer)
{
  PoolGpu *g = layer->gpu_priv;
  ShoalTensor *dx = layer->src_grad[0];
  if (dx == NULL || shoal_tensor_rows (&layer->srcs[0]->out) == 0 || !pool_rows (layer, g, "backward"))
    return;
  GPU_DNN (layer, "backward",
           cudnnPoolingBackward (shoal_gpu_ctx (layer)->dnn, g->pool, &one, g->y, layer->out.data, g->y,
                                 layer->grad.data, g->x, layer->srcs[0]->out.data, &zero, g->x, dx->data));
}

static void
pooling_gpu_finalize (ShoalLayer *layer)
{
  PoolGpu *g = layer->gpu_priv;
  if (g == NULL)
    return;
  if (g->pool)
    cudnnDestroyPoolingDescriptor (g->pool);
  if (g->x)
    cudnnDestroyTensorDescriptor (g->x);
  if (g->y)
    cudnnDestroyTensorDescriptor (g->y);
  g_free (g);
  layer->gpu_priv = NULL;
}

const ShoalLayerGpuOps shoal_layer_pooling_gpu = {
  .setup = pooling_gpu_setup,
  .forward = pooling_gpu_forward,
  .backward = pooling_gpu_backward,
  .finalize = pooling_gpu_finalize,
};

/* ---- element-wise and per-channel layers: (rows, C, S, 1) descriptors --- */

/* dim 1 and the rest of a row, as cuDNN's C and H (W = 1) */
static void
channels_of (const ShoalTensor *t, int *c, int *s)
{
  *c = t->shape.ndim > 1 ? t->shape.dim[1] : 1;
  size_t row = shoal_tensor_row_size (t);
  *s = *c > 0 ? (int) (row / (size_t) *c) : 1;
}

/* ---- LRN ---------------------------------------------------------------- */

typedef struct {
  int c, s, rows;
  cudnnLRNDescriptor_t lrn;
  cudnnTensorDescriptor_t x;
} LrnGpu;

static gboolean
lrn_gpu_setup (ShoalLayer *layer, GError **error)
{
  LrnGpu *g = g_new0 (LrnGpu, 1);
  layer->gpu_priv = g;
  int size = (int) shoal_layer_opt_int (layer, "local_size");
  double alpha = shoal_layer_opt_float (layer, "alpha"), beta = shoal_layer_opt_float (layer, "beta");
  double k = shoal_layer_opt_float (layer, "k");
  if (size < CUDNN_LRN_MIN_N || size > CUDNN_LRN_MAX_N || beta < CUDNN_LRN_MIN_BETA || k < CUDNN_LRN_MIN_K)
    {
      shoal_layer_error (layer, error, "local_size",
                         "layer '%s' has no GPU path for local_size %d, beta %g, k %g (cuDNN takes local_size "
                         "%d to %d, beta >= %g, k >= %g)", layer->name, size, beta, k, CUDNN_LRN_MIN_N,
                         CUDNN_LRN_MAX_N, CUDNN_LRN_MIN_BETA, CUDNN_LRN_MIN_K);
      return FALSE;
    }
  channels_of (&layer->srcs[0]->out, &g->c, &g->s);
  g->rows = shoal_tensor_rows (&layer->srcs[0]->out);
  /* cuDNN divides alpha by the window, as lrn.c does */
  if (!GPU_DNN_SETUP (layer, cudnnCreateLRNDescriptor (&g->lrn), error)
      || !GPU_DNN_SETUP (layer, cudnnSetLRNDescriptor (g->lrn, (unsigned) size, alpha, beta, k), error)
      || !GPU_DNN_SETUP (layer, cudnnCreateTensorDescriptor (&g->x), error))
    return FALSE;
  if (!shoal_gpu_set_4d (g->x, g->rows, g->c, g->s, 1))
    {
      shoal_layer_error (layer, error, NULL, "layer '%s': cuDNN refused its tensor shape", layer->name);
      return FALSE;
    }
  return TRUE;
}

static gboolean
lrn_rows (ShoalLayer *layer, LrnGpu *g, const char *phase)
{
  int rows = shoal_tensor_rows (&layer->srcs[0]->out);
  if (rows == g->rows)
    return TRUE;
  g->rows = rows;
  return shoal_gpu_set_4d (g->x, rows, g->c, g->s, 1) || GPU_DNN (layer, phase, CUDNN_STATUS_BAD_PARAM);
}

static void
lrn_gpu_forward (ShoalLayer *layer, ShoalPhase phase)
{
  LrnGpu *g = layer->gpu_priv;
  (void) phase;
  if (shoal_tensor_rows (&layer->srcs[0]->out) == 0 || !lrn_rows (layer, g, "forward"))
    return;
  GPU_DNN (layer, "forward",
           cudnnLRNCrossChannelForward (shoal_gpu_ctx (layer)->dnn, g->lrn, CUDNN_LRN_CROSS_CHANNEL_DIM1, &one, g->x,
                                        layer->srcs[0]->out.data, &zero, g->x, layer->out.data));
}

static void
lrn_gpu_backward (ShoalLayer *layer)
{
  LrnGpu *g = layer->gpu_priv;
  ShoalTensor *dx = layer->src_grad[0];
  if (dx == NULL || shoal_tensor_rows (&layer->srcs[0]->out) == 0 || !lrn_rows (layer, g, "backward"))
    return;
  GPU_DNN (layer, "backward",
           cudnnLRNCrossChannelBackward (shoal_gpu_ctx (layer)->dnn, g->lrn, CUDNN_LRN_CROSS_CHANNEL_DIM1, &one,
                                         g->x, layer->out.data, g->x, layer->grad.data, g->x,
                                         layer->srcs[0]->out.data, &zero, g->x, dx->data));
}

static void
lrn_gpu_finalize (ShoalLayer *layer)
{
  LrnGpu *g = layer->gpu_priv;
  if (g == NULL)
    return;
  if (g->lrn)
    cudnnDestroyLRNDescriptor (g->lrn);
  if (g->x)
    cudnnDestroyTensorDescriptor (g->x);
  g_free (g);
  layer->gpu_priv = NULL;
}

const ShoalLayerGpuOps shoal_layer_lrn_gpu = {
  .setup = lrn_gpu_setup,
  .forward = lrn_gpu_forward,
  .backward = lrn_gpu_backward,
  .finalize = lrn_gpu_finalize,
};

/* ---- ReLU, sigmoid, tanh ------------------------------------------------- */

typedef struct {
  cudnnActivationDescriptor_t act;   /* NULL: leaky ReLU, own kernel */
  cudnnTensorDescriptor_t x;         /* (rows, row size, 1, 1) */
  int rows, row;
  float slope;
} ActGpu;

static gboolean
act_setup (ShoalLayer *layer, cudnnActivationMode_t mode, float slope, GError **error)
{
  ActGpu *g = g_new0 (ActGpu, 1);
  layer->gpu_priv = g;
  g->slope = slope;
  g->rows = shoal_tensor_rows (&layer->srcs[0]->out);
  g->row = (int) shoal_tensor_row_size (&layer->srcs[0]->out);
  if (slope != 0.0f)
    return TRUE;
  if (!GPU_DNN_SETUP (layer, cudnnCreateActivationDescriptor (&g->act), error)
      || !GPU_DNN_SETUP (layer, cudnnSetActivationDescriptor (g->act, mode, CUDNN_NOT_PROPAGATE_NAN, 0.0), error)
      || !GPU_DNN_SETUP (layer, cudnnCreateTensorDescriptor (&g->x), error))
    return FALSE;
  if (!shoal_gpu_set_4d (g->x, g->rows, g->row, 1, 1))
    {
      shoal_layer_error (layer, error, NULL, "layer '%s': cuDNN refused its tensor shape", layer->name);
      return FALSE;
    }
  return TRUE;
}

static gboolean
relu_gpu_setup (ShoalLayer *layer, GError **error)
{
  return act_setup (layer, CUDNN_ACTIVATION_RELU, (float) shoal_layer_opt_float (layer, "negative_slope"),
                    error);
}

static gboolean
sigmoid_gpu_setup (ShoalLayer *layer, GError **error)
{
  return act_setup (layer, CUDNN_ACTIVATION_SIGMOID, 0.0f, error);
}

static gboolean
tanh_gpu_setup (ShoalLayer *layer, GError **error)
{
  return act_setup (layer, CUDNN_ACTIVATION_TANH, 0.0f, error);
}

static gboolean
act_rows (ShoalLayer *layer, ActGpu *g, const char *phase)
{
  int rows = shoal_tensor_rows (&layer->out);
  if (rows == g->rows || g->act == NULL)
    return TRUE;
  g->rows = rows;
  return shoal_gpu_set_4d (g->x, rows, g->row, 1, 1) || GPU_DNN (layer, phase, CUDNN_STATUS_BAD_PARAM);
}

static void
act_gpu_forward (ShoalLayer *layer, ShoalPhase phase)
{
  ActGpu *g = layer->gpu_priv;
  ShoalDeviceContext *ctx = shoal_gpu_ctx (layer);
  size_t n = shoal_tensor_count (&layer->out);
  (void) phase;
  if (n == 0 || !act_rows (layer, g, "forward"))
    return;
  if (g->act == NULL)
    {
      GPU_CUDA (layer, "forward",
                shoal_k_leaky_relu_forward (layer->srcs[0]->out.data, layer->out.data, n, g->slope, ctx->compute));
      return;
    }
  GPU_DNN (layer, "forward",
           cudnnActivationForward (ctx->dnn, g->act, &one, g->x, layer->srcs[0]->out.data, &zero, g->x,
                                   layer->out.data));
}

static void
act_gpu_backward (ShoalLayer *layer)
{
  ActGpu *g = layer->gpu_priv;
  ShoalDeviceContext *ctx = shoal_gpu_ctx (layer);
  ShoalTensor *dx = layer->src_grad[0];
  size_t n = shoal_tensor_count (&layer->out);
  if (dx == NULL)
    return;
  shoal_tensor_set_rows (dx, shoal_tensor_rows (&layer->out));
  if (n == 0 || !act_rows (layer, g, "backward"))
    return;
  if (g->act == NULL)
    {
      GPU_CUDA (layer, "backward",
                shoal_k_leaky_relu_backward (layer->out.data, layer->grad.data, dx->data, n, g->slope,
                                             ctx->compute));
      return;
    }
  GPU_DNN (layer, "backward",
           cudnnActivationBackward (ctx->dnn, g->act, &one, g->x, layer->out.data, g->x, layer->grad.data, g->x,
                                    layer->srcs[0]->out.data, &zero, g->x, dx->data));
}

static void
act_gpu_finalize (ShoalLayer *layer)
{
  ActGpu *g = layer->gpu_priv;
  if (g == NULL)
    return;
  if (g->act)
    cudnnDestroyActivationDescriptor (g->act);
  if (g->x)
    cudnnDestroyTensorDescriptor (g->x);
  g_free (g);
  layer->gpu_priv = NULL;
}

const ShoalLayerGpuOps shoal_layer_relu_gpu = {
  .setup = relu_gpu_setup,
  .forward = act_gpu_forward,
  .backward = act_gpu_backward,
  .finalize = act_gpu_finalize,
};

const ShoalLayerGpuOps shoal_layer_sigmoid_gpu = {
  .setup = sigmoid_gpu_setup,
  .forward = act_gpu_forward,
  .backward = act_gpu_backward,
  .finalize = act_gpu_finalize,
};

const ShoalLayerGpuOps shoal_layer_tanh_gpu = {
  .setup = tanh_gpu_setup,
  .forward = act_gpu_forward,
  .backward = act_gpu_backward,
  .finalize = act_gpu_finalize,
};

/* ---- batch normalisation -------------------------------------------------
 * Spatial mode over (N, C, S, 1): statistics per channel over the batch
 * and S, as batchnorm.c.  cuDNN's running average is
 * running = factor * batch + (1 - factor) * running with the unbiased
 * batch variance, so factor = 1 - momentum.  The running statistics are
 * params whose host values the CPU layer updates in place; the GPU layer
 * copies the updated device values back into the host store after a
 * train forward, so a checkpoint or a test net sees the same. */

typedef struct {
  int c, s, rows;
  double epsilon, momentum;
  cudnnTensorDescriptor_t x, bn;
  float *save_mean, *save_inv_var;   /* (C) of the last train forward */
  float *dx_scratch;                 /* cuDNN always writes dx: where, when no one needs it */
} BnGpu;

static gboolean
batchnorm_gpu_setup (ShoalLayer *layer, GError **error)
{
  BnGpu *g = g_new0 (BnGpu, 1);
  layer->gpu_priv = g;
  channels_of (&layer->srcs[0]->out, &g->c, &g->s);
  g->rows = shoal_tensor_rows (&layer->srcs[0]->out);
  g->epsilon = shoal_layer_opt_float (layer, "epsilon");
  g->momentum = shoal_layer_opt_float (layer, "momentum");
  if (g->epsilon < CUDNN_BN_MIN_EPSILON)
    {
      shoal_layer_error (layer, error, "epsilon", "layer '%s': cuDNN needs epsilon >= %g", layer->name,
                         CUDNN_BN_MIN_EPSILON);
      return FALSE;
    }
  if (!GPU_DNN_SETUP (layer, cudnnCreateTensorDescriptor (&g->x), error)
      || !GPU_DNN_SETUP (layer, cudnnCreateTensorDescriptor (&g->bn), error))
    return FALSE;
  if (!shoal_gpu_set_4d (g->x, g->rows, g->c, g->s, 1))
    {
      shoal_layer_error (layer, error, NULL, "layer '%s': cuDNN refused its tensor shape", layer->name);
      return FALSE;
    }
  if (!GPU_DNN_SETUP (layer, cudnnDeriveBNTensorDescriptor (g->bn, g->x, CUDNN_BATCHNORM_SPATIAL), error))
    return FALSE;
  if ((g->save_mean = shoal_gpu_alloc_floats (layer, (size_t) g->c, error)) == NULL
      || (g->save_inv_var = shoal_gpu_alloc_floats (layer, (size_t) g->c, error)) == NULL)
    return FALSE;
  /* src_grad[0] will be NULL exactly when the source needs no gradient */
  if (!layer->srcs[0]->needs_grad
      && (g->dx_scratch = shoal_gpu_alloc_floats (layer, layer->out.capacity, error)) == NULL)
    return FALSE;
  return TRUE;
}

static gboolean
bn_rows (ShoalLayer *layer, BnGpu *g, const char *phase)
{
  int rows = shoal_tensor_rows (&layer->srcs[0]->out);
  if (rows == g->rows)
    return TRUE;
  g->rows = rows;
  return shoal_gpu_set_4d (g->x, rows, g->c, g->s, 1) || GPU_DNN (layer, phase, CUDNN_STATUS_BAD_PARAM);
}

/* scale, bias, mean, var: the order batchnorm.c declares them */
static void
batchnorm_gpu_forward (ShoalLayer *layer, ShoalPhase phase)
{
  BnGpu *g = layer->gpu_priv;
  ShoalDeviceContext *ctx = shoal_gpu_ctx (layer);
  ShoalParam *scale = layer->params[0], *bias = layer->params[1], *mean = layer->params[2], *var = layer->params[3];
  if (shoal_tensor_rows (&layer->srcs[0]->out) == 0 || !bn_rows (layer, g, "forward"))
    return;
  if (phase != SHOAL_PHASE_TRAIN)
    {
      GPU_DNN (layer, "forward",
               cudnnBatchNormalizationForwardInference (ctx->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, g->x,
                                                        layer->srcs[0]->out.data, g->x, layer->out.data, g->bn,
                                                        scale->value.data, bias->value.data, mean->value.data,
                                                        var->value.data, g->epsilon));
      return;
    }
  if (!GPU_DNN (layer, "forward",
                cudnnBatchNormalizationForwardTraining (ctx->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, g->x,
                                                        layer->srcs[0]->out.data, g->x, layer->out.data, g->bn,
                                                        scale->value.data, bias->value.data, 1.0 - g->momentum,
                                                        mean->value.data, var->value.data, g->epsilon,
                                                        g->save_mean, g->save_inv_var)))
    return;
  /* the running statistics reach the host store, as on the CPU */
  float *host = layer->store->values;
  size_t bytes = (size_t) g->c * sizeof (float);
  GPU_CUDA (layer, "forward", cudaMemcpyAsync (host + mean->offset, mean->value.data, bytes, cudaMemcpyDeviceToHost,
                                               ctx->compute));
  GPU_CUDA (layer, "forward", cudaMemcpyAsync (host + var->offset, var->value.data, bytes, cudaMemcpyDeviceToHost,
                                               ctx->compute));
}

static void
batchnorm_gpu_backward (ShoalLayer *layer)
{
  BnGpu *g = layer->gpu_priv;
  ShoalDeviceContext *ctx = shoal_gpu_ctx (layer);
  ShoalTensor *dx = layer->src_grad[0];
  if (shoal_tensor_rows (&layer->srcs[0]->out) == 0 || !bn_rows (layer, g, "backward"))
    return;
  if (dx != NULL)
    shoal_tensor_set_rows (dx, shoal_tensor_rows (&layer->out));
  float *dxp = dx != NULL ? dx->data : g->dx_scratch;
  if (dxp == NULL)
    {
      GPU_CUDA (layer, "backward", cudaErrorInvalidValue);
      return;
    }
  /* params' gradients add (beta 1), the input's is written (beta 0) */
  GPU_DNN (layer, "backward",
           cudnnBatchNormalizationBackward (ctx->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &one, g->x,
                                            layer->srcs[0]->out.data, g->x, layer->grad.data, g->x, dxp, g->bn,
                                            layer->params[0]->value.data, layer->params[0]->grad.data,
                                            layer->params[1]->grad.data, g->epsilon, g->save_mean,
                                            g->save_inv_var));
}

static void
batchnorm_gpu_finalize (ShoalLayer *layer)
{
  BnGpu *g = layer->gpu_priv;
  if (g == NULL)
    return;
  if (g->x)
    cudnnDestroyTensorDescriptor (g->x);
  if (g->bn)
    cudnnDestroyTensorDescriptor (g->bn);
  shoal_gpu_free (g->save_mean);
  shoal_gpu_free (g->save_inv_var);
  shoal_gpu_free (g->dx_scratch);
  g_free (g);
  layer->gpu_priv = NULL;
}

const ShoalLayerGpuOps shoal_layer_batchnorm_gpu = {
  .setup = batchnorm_gpu_setup,
  .forward = batchnorm_gpu_forward,
  .backward = batchnorm_gpu_backward,
  .finalize = batchnorm_gpu_finalize,
};

/* ---- softmax_loss ----------------------------------------------------------
 * cuDNN's log-softmax (CUDNN_SOFTMAX_LOG) gives -log p_y exactly where p_y
 * underflows, as softmax_loss.c's log-sum-exp does; a kernel sums the
 * loss, another makes the gradient from exp (logp).  The unlabelled-row
 * warning comes from the device with the loss: it is read after the
 * forward's sync, i.e. logged at the next call of the layer. */

typedef struct {
  int k, rows;                      /* rows: groups of K logits (rows of the batch x steps) */
  int steps;                        /* labels per row of the batch (sequences: > 1) */
  cudnnTensorDescriptor_t x;        /* (rows, K, 1, 1) */
  float *logp;                      /* (capacity of the logits) */
  ShoalLossResult *dev_result;
  ShoalLossResult *host_result;     /* pinned */
  gboolean pending, warned;
} SoftmaxGpu;

static gboolean
softmax_loss_gpu_setup (ShoalLayer *layer, GError **error)
{
  SoftmaxGpu *g = g_new0 (SoftmaxGpu, 1);
  layer->gpu_priv = g;
  const ShoalTensor *logits = &layer->srcs[0]->out;
  g->steps = (int) shoal_tensor_row_size (&layer->srcs[1]->label);
  g->k = (int) (shoal_tensor_row_size (logits) / (size_t) g->steps);
  g->rows = shoal_tensor_rows (logits) * g->steps;
  if (!GPU_DNN_SETUP (layer, cudnnCreateTensorDescriptor (&g->x), error))
    return FALSE;
  if (!shoal_gpu_set_4d (g->x, g->rows, g->k, 1, 1))
    {
      shoal_layer_error (layer, error, NULL, "layer '%s': cuDNN refused its tensor shape", layer->name);
      return FALSE;
    }
  if ((g->logp = shoal_gpu_alloc_floats (layer, logits->capacity, error)) == NULL)
    return FALSE;
  g->dev_result = (ShoalLossResult *) shoal_gpu_alloc_floats (layer, sizeof (ShoalLossResult) / sizeof (float) + 1,
                                                              error);
  if (g->dev_result == NULL)
    return FALSE;
  if (!GPU_CUDA_SETUP (layer, cudaHostAlloc ((void **) &g->host_result, sizeof (ShoalLossResult),
                                             cudaHostAllocPortable), error))
    {
      g->host_result = NULL;
      return FALSE;
    }
  memset (g->host_result, 0, sizeof (ShoalLossResult));
  /* no unlabelled row until a forward's copy says so: on a net whose
   * params stay on the device the backward comes right after the
   * forward is enqueued, and reads this before the first copy lands */
  g->host_result->bad_row = -1;
  return TRUE;
}

/* The previous forward's unlabelled row, now that it was synchronised
 * (on a net whose params stay on the device the backward may read it
 * before this forward's copy is in: then the step before's). */
static void
softmax_warn (ShoalLayer *layer, SoftmaxGpu *g)
{
  if (!g->pending)
    return;
  g->pending = FALSE;
  if (g->host_result->bad_row >= 0 && !g->warned)
    {
      g_warning ("layer '%s': row %d has label %g, not a class of [0, %d); such rows add no loss", layer->name,
                 g->host_result->bad_row, g->host_result->bad_label, g->k);
      g->warned = TRUE;
    }
}

static void
softmax_loss_gpu_forward (ShoalLayer *layer, ShoalPhase phase)
{
  SoftmaxGpu *g = layer->gpu_priv;
  ShoalDeviceContext *ctx = shoal_gpu_ctx (layer);
  const ShoalTensor *logits = &layer->srcs[0]->out;
  int batch = shoal_tensor_rows (logits), rows = batch * g->steps;
  (void) phase;
  softmax_warn (layer, g);
  if (rows != g->rows)
    {
      g->rows = rows;
      if (rows > 0 && !shoal_gpu_set_4d (g->x, rows, g->k, 1, 1))
        {
          GPU_DNN (layer, "forward", CUDNN_STATUS_BAD_PARAM);
          return;
        }
    }
  if (rows > 0
      && !GPU_DNN (layer, "forward",
                   cudnnSoftmaxForward (ctx->dnn, CUDNN_SOFTMAX_LOG, CUDNN_SOFTMAX_MODE_INSTANCE, &one, g->x,
                                        logits->data, &zero, g->x, g->logp)))
    return;
  if (!GPU_CUDA (layer, "forward",
                 shoal_k_softmax_loss (g->logp, layer->srcs[1]->label.data, rows, g->k,
                                       shoal_layer_loss_rows (layer, batch) * g->steps, g->dev_result, ctx->compute)))
    return;
  GPU_CUDA (layer, "forward", cudaMemcpyAsync (g->host_result, g->dev_result, sizeof (ShoalLossResult),
                                               cudaMemcpyDeviceToHost, ctx->compute));
  GPU_CUDA (layer, "forward", cudaMemcpyAsync (layer->out.data, &g->dev_result->value, sizeof (float),
                                               cudaMemcpyDeviceToHost, ctx->compute));
  g->pending = TRUE;
}

static void
softmax_loss_gpu_backward (ShoalLayer *layer)
{
  SoftmaxGpu *g = layer->gpu_priv;
  ShoalDeviceContext *ctx = shoal_gpu_ctx (layer);
  int batch = shoal_tensor_rows (&layer->srcs[0]->out), rows = batch * g->steps;
  const float w = layer->loss_weight / ((float) shoal_layer_loss_rows (layer, batch) * (float) g->steps);
  softmax_warn (layer, g);
  if (layer->src_grad[1] != NULL)
    {
      /* the labels' layer gets no gradient through its out */
      ShoalTensor *d1 = layer->src_grad[1];
      shoal_tensor_set_rows (d1, shoal_tensor_rows (&layer->srcs[1]->out));
      GPU_CUDA (layer, "backward",
                cudaMemsetAsync (d1->data, 0, shoal_tensor_count (d1) * sizeof (float), ctx->compute));
    }
  ShoalTensor *dx = layer->src_grad[0];
  if (dx == NULL)
    return;
  shoal_tensor_set_rows (dx, batch);
  GPU_CUDA (layer, "backward",
            shoal_k_softmax_loss_backward (g->logp, layer->srcs[1]->label.data, rows, g->k, w, dx->data,
                                           ctx->compute));
}

static void
softmax_loss_gpu_finalize (ShoalLayer *layer)
{
  SoftmaxGpu *g = layer->gpu_priv;
  if (g == NULL)
    return;
  if (g->x)
    cudnnDestroyTensorDescriptor (g->x);
  shoal_gpu_free (g->logp);
  shoal_gpu_free (g->dev_result);
  /* checked, and the failure not left for the next launch to report */
  shoal_device_host_free (layer->ctx->device, g->host_result);
  g_free (g);
  layer->gpu_priv = NULL;
}

const ShoalLayerGpuOps shoal_layer_softmax_loss_gpu = {
  .setup = softmax_loss_gpu_setup,
  .forward = softmax_loss_gpu_forward,
  .backward = softmax_loss_gpu_backward,
  .finalize = softmax_loss_gpu_finalize,
};
