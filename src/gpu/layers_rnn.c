/* GPU paths of the recurrent family: gru and lstm through cuDNN's RNN
 * API (v8 calls, cuDNN 9), embedding with two kernels.
 *
 * cuDNN's GRU and LSTM cells are torch's (PyTorch runs them on CUDA), and
 * cudnnGetRNNWeightParams gives the address of each gate block's matrix
 * and bias in cuDNN's weight space: level l, linear layer id g < G is the
 * input block g of weight_ih_l<l> (rows g*H..), id G + g the recurrent
 * block g of weight_hh_l<l>, both in torch's gate order (GRU r, z, n;
 * LSTM i, f, g, o) and row-major (H, in).  So each forward copies the
 * params (device views of the store) into the weight space block by block
 * and each backward adds the weight-space gradient back into the params'
 * gradients (cuBLAS axpy): the params stay named and laid out as on the
 * CPU, for servers, checkpoints and init_from.
 *
 * The carried states stay where recurrent.c keeps them, on the host
 * (pinned here), so save_state and load_state are the CPU's: each forward
 * uploads the phase's states of its rows as hx (and cx), zeroes the rows
 * whose stream restarts (a kernel reading src 2 on the device), and
 * downloads hy (and cy) into them; the net's end-of-forward sync makes
 * them current when forward returns.
 *
 * Dropout between levels is cuDNN's: its generator is seeded from the
 * layer's stream before each train forward that drops, so masks differ
 * from the CPU's (as the dropout layer's do) but a resumed run draws the
 * same ones. */
#include "gpu/gpu.h"

#include <string.h>

#include "gpu/kernels_models.h"
#include "layers/recurrent.h"

#define MAX_BLOCKS (2 * 4 * SHOAL_RECURRENT_MAX_LEVELS)

/* A gate's matrix or bias inside one of the level's params.  The param's
 * views are looked up at each use: at set-up they still point into the
 * host store, which the net moves to the device only afterwards
 * (shoal_net_gpu_prepare). */
typedef struct {
  ShoalParam *param;
  size_t at;      /* floats into the param */
  size_t offset;  /* bytes into the weight space */
  size_t count;   /* floats */
} Block;

typedef struct {
  cudnnRNNDescriptor_t rnn;
  cudnnDropoutDescriptor_t drop;
  cudnnRNNDataDescriptor_t xd, yd;
  cudnnTensorDescriptor_t hd;
  void *drop_states;
  size_t drop_bytes;
  int rows;                 /* rows the descriptors are set for */
  size_t wbytes, reserve_bytes, work_bytes;
  float *weights, *dweights;
  void *reserve;
  int32_t *seq_lengths;     /* device, capacity entries of steps */
  int *host_lengths;
  float *hx, *hy, *cx, *cy; /* (levels, capacity, H) device */
  float *dx_scratch;        /* when the source needs no gradient */
  Block blocks[MAX_BLOCKS];
  int nblocks;
  gboolean pinned;
} RnnGpu;

static gboolean
set_data (ShoalLayer *layer, RnnGpu *g, int rows)
{
  ShoalRecurrentPriv *p = layer->priv;
  int dims[3] = { p->levels, rows, p->hidden }, strides[3] = { rows * p->hidden, p->hidden, 1 };
  g->rows = rows;
  return cudnnSetRNNDataDescriptor (g->xd, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED, p->steps,
                                    rows, p->input, g->host_lengths, NULL) == CUDNN_STATUS_SUCCESS
         && cudnnSetRNNDataDescriptor (g->yd, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED,
                                       p->steps, rows, p->hidden, g->host_lengths, NULL) == CUDNN_STATUS_SUCCESS
         && cudnnSetTensorNdDescriptor (g->hd, CUDNN_DATA_FLOAT, 3, dims, strides) == CUDNN_STATUS_SUCCESS;
}

static gboolean
map_blocks (ShoalLayer *layer, RnnGpu *g, GError **error)
{
  ShoalRecurrentPriv *p = layer->priv;
  ShoalDeviceContext *ctx = shoal_gpu_ctx (layer);
  const int G = p->cell->gates, H = p->hidden;
  cudnnTensorDescriptor_t md, bd;
  gboolean ok = GPU_DNN_SETUP (layer, cudnnCreateTensorDescriptor (&md), error)
                && GPU_DNN_SETUP (layer, cudnnCreateTensorDescriptor (&bd), error);
  for (int l = 0; ok && l < p->levels; l++)
    {
      ShoalRecurrentLevel *lv = &p->level[l];
      for (int id = 0; ok && id < 2 * G; id++)
        {
          void *m = NULL, *b = NULL;
          ok = GPU_DNN_SETUP (layer, cudnnGetRNNWeightParams (ctx->dnn, g->rnn, l, g->wbytes, g->weights, id, md, &m,
                                                              bd, &b), error);
          if (!ok)
            break;
          gboolean rec = id >= G;
          int gate = id % G, in = rec ? H : lv->in;
          ShoalParam *w = rec ? lv->w_hh : lv->w_ih, *bias = rec ? lv->b_hh : lv->b_ih;
          g->blocks[g->nblocks++] = (Block) { w, (size_t) gate * H * in,
                                              (size_t) ((char *) m - (char *) g->weights), (size_t) H * in };
          if (bias != NULL && b != NULL)
            g->blocks[g->nblocks++] = (Block) { bias, (size_t) gate * H,
                                                (size_t) ((char *) b - (char *) g->weights), (size_t) H };
        }
    }
  if (md)
    cudnnDestroyTensorDescriptor (md);
  if (bd)
    cudnnDestroyTensorDescriptor (bd);
  return ok;
}

static gboolean
rnn_gpu_setup (ShoalLayer *layer, GError **error)
{
  ShoalRecurrentPriv *p = layer->priv;
  ShoalDeviceContext *ctx = shoal_gpu_ctx (layer);
  RnnGpu *g = g_new0 (RnnGpu, 1);
  layer->gpu_priv = g;
  const int cap = p->cap, H = p->hidden, L = p->levels;

  if (!GPU_DNN_SETUP (layer, cudnnCreateRNNDescriptor (&g->rnn), error)
      || !GPU_DNN_SETUP (layer, cudnnCreateDropoutDescriptor (&g->drop), error)
      || !GPU_DNN_SETUP (layer, cudnnCreateRNNDataDescriptor (&g->xd), error)
      || !GPU_DNN_SETUP (layer, cudnnCreateRNNDataDescriptor (&g->yd), error)
      || !GPU_DNN_SETUP (layer, cudnnCreateTensorDescriptor (&g->hd), error)
      || !GPU_DNN_SETUP (layer, cudnnDropoutGetStatesSize (ctx->dnn, &g->drop_bytes), error)
      || !GPU_CUDA_SETUP (layer, cudaMalloc (&g->drop_states, g->drop_bytes), error))
    return FALSE;
  guint64 seed = ((guint64) shoal_rng_u32 (&layer->rng) << 32);
  seed |= shoal_rng_u32 (&layer->rng);
  if (!GPU_DNN_SETUP (layer, cudnnSetDropoutDescriptor (g->drop, ctx->dnn, p->levels > 1 ? p->dropout : 0.0f,
                                                        g->drop_states, g->drop_bytes, seed), error)
      || !GPU_DNN_SETUP (layer, cudnnSetRNNDescriptor_v8 (g->rnn, CUDNN_RNN_ALGO_STANDARD,
                                                          p->cell->has_cell ? CUDNN_LSTM : CUDNN_GRU,
                                                          p->bias ? CUDNN_RNN_DOUBLE_BIAS : CUDNN_RNN_NO_BIAS,
                                                          CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT,
                                                          CUDNN_DATA_FLOAT,
                                                          ctx->tf32 ? CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION
                                                                    : CUDNN_FMA_MATH,
                                                          p->input, H, H, L, g->drop, CUDNN_RNN_PADDED_IO_ENABLED),
                             error))
    return FALSE;
  g->host_lengths = g_new (int, cap);
  for (int i = 0; i < cap; i++)
    g->host_lengths[i] = p->steps;
  if (!set_data (layer, g, cap))
    {
      shoal_layer_error (layer, error, NULL, "layer '%s': cuDNN refused its sequence shapes", layer->name);
      return FALSE;
    }
  if (!GPU_CUDA_SETUP (layer, cudaMalloc ((void **) &g->seq_lengths, (size_t) cap * sizeof (int32_t)), error)
      || !GPU_CUDA_SETUP (layer, cudaMemcpy (g->seq_lengths, g->host_lengths, (size_t) cap * sizeof (int32_t),
                                             cudaMemcpyHostToDevice), error)
      || !GPU_DNN_SETUP (layer, cudnnGetRNNWeightSpaceSize (ctx->dnn, g->rnn, &g->wbytes), error)
      || !GPU_DNN_SETUP (layer, cudnnGetRNNTempSpaceSizes (ctx->dnn, g->rnn, CUDNN_FWD_MODE_TRAINING, g->xd,
                                                           &g->work_bytes, &g->reserve_bytes), error))
    return FALSE;
  shoal_gpu_workspace_reserve (ctx, g->work_bytes);
  size_t hn = (size_t) L * cap * H;
  if ((g->weights = shoal_gpu_alloc_floats (layer, g->wbytes / sizeof (float) + 1, error)) == NULL
      || (g->dweights = shoal_gpu_alloc_floats (layer, g->wbytes / sizeof (float) + 1, error)) == NULL
      || (g->reserve = shoal_gpu_alloc_floats (layer, g->reserve_bytes / sizeof (float) + 1, error)) == NULL
      || (g->hx = shoal_gpu_alloc_floats (layer, hn, error)) == NULL
      || (g->hy = shoal_gpu_alloc_floats (layer, hn, error)) == NULL
      || (g->dx_scratch = shoal_gpu_alloc_floats (layer, layer->srcs[0]->out.capacity, error)) == NULL)
    return FALSE;
  if (p->cell->has_cell
      && ((g->cx = shoal_gpu_alloc_floats (layer, hn, error)) == NULL
          || (g->cy = shoal_gpu_alloc_floats (layer, hn, error)) == NULL))
    return FALSE;
  if (!map_blocks (layer, g, error))
    return FALSE;
  /* the carried states: pinned, so their copies run on the stream */
  g->pinned = TRUE;
  for (int ph = 0; ph < 2; ph++)
    {
      g->pinned &= shoal_device_host_register (layer->ctx->device, p->state_h[ph], hn * sizeof (float));
      if (p->cell->has_cell)
        g->pinned &= shoal_device_host_register (layer->ctx->device, p->state_c[ph], hn * sizeof (float));
    }
  return TRUE;
}

/* host states of `rows` rows (levels, cap, H) <-> device (levels, rows, H) */
static void
copy_states (ShoalLayer *layer, float *dev, float *host, int rows, gboolean up, const char *phase)
{
  ShoalRecurrentPriv *p = layer->priv;
  size_t row_bytes = (size_t) rows * p->hidden * sizeof (float);
  size_t host_pitch = (size_t) p->cap * p->hidden * sizeof (float);
  if (up)
    GPU_CUDA (layer, phase, cudaMemcpy2DAsync (dev, row_bytes, host, host_pitch, row_bytes, (size_t) p->levels,
                                               cudaMemcpyHostToDevice, shoal_gpu_ctx (layer)->compute));
  else
    GPU_CUDA (layer, phase, cudaMemcpy2DAsync (host, host_pitch, dev, row_bytes, row_bytes, (size_t) p->levels,
                                               cudaMemcpyDeviceToHost, shoal_gpu_ctx (layer)->compute));
}

static void
rnn_gpu_forward (ShoalLayer *layer, ShoalPhase phase)
{
  ShoalRecurrentPriv *p = layer->priv;
  RnnGpu *g = layer->gpu_priv;
  ShoalDeviceContext *ctx = shoal_gpu_ctx (layer);
  cudaStream_t s = ctx->compute;
  const int rows = shoal_tensor_rows (&layer->srcs[0]->out), ph = phase == SHOAL_PHASE_TEST;
  const size_t hn = (size_t) p->levels * rows * p->hidden;
  gboolean train = phase == SHOAL_PHASE_TRAIN;

  if (rows == 0)
    return;
  if (rows != g->rows && !set_data (layer, g, rows))
    {
      GPU_DNN (layer, "forward", CUDNN_STATUS_BAD_PARAM);
      return;
    }
  for (int i = 0; i < g->nblocks; i++)
    GPU_CUDA (layer, "forward", cudaMemcpyAsync ((char *) g->weights + g->blocks[i].offset,
                                                 g->blocks[i].param->value.data + g->blocks[i].at,
                                                 g->blocks[i].count * sizeof (float), cudaMemcpyDeviceToDevice, s));
  /* initial states: carried, or zero */
  if (p->stateful)
    {
      copy_states (layer, g->hx, p->state_h[ph], rows, TRUE, "forward");
      if (g->cx != NULL)
        copy_states (layer, g->cx, p->state_c[ph], rows, TRUE, "forward");
      if (layer->nsrcs == 2)
        {
          const ShoalTensor *m = &layer->srcs[1]->out;
          size_t stride = shoal_tensor_row_size (m);
          GPU_CUDA (layer, "forward", shoal_k_rnn_restart (g->hx, p->levels, rows, p->hidden, m->data, stride, s));
          if (g->cx != NULL)
            GPU_CUDA (layer, "forward", shoal_k_rnn_restart (g->cx, p->levels, rows, p->hidden, m->data, stride, s));
        }
    }
  else
    {
      GPU_CUDA (layer, "forward", cudaMemsetAsync (g->hx, 0, hn * sizeof (float), s));
      if (g->cx != NULL)
        GPU_CUDA (layer, "forward", cudaMemsetAsync (g->cx, 0, hn * sizeof (float), s));
    }
  if (train && p->dropout > 0 && p->levels > 1)
    {
      /* the masks follow the layer's checkpointed stream */
      guint64 seed = ((guint64) shoal_rng_u32 (&layer->rng) << 32);
      seed |= shoal_rng_u32 (&layer->rng);
      GPU_DNN (layer, "forward", cudnnSetDropoutDescriptor (g->drop, ctx->dnn, p->dropout, g->drop_states,
                                                            g->drop_bytes, seed));
    }
  void *work = shoal_gpu_workspace (layer, g->work_bytes);
  if (g->work_bytes > 0 && work == NULL)
    return;
  GPU_DNN (layer, "forward",
           cudnnRNNForward (ctx->dnn, g->rnn, train ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE,
                            g->seq_lengths, g->xd, layer->srcs[0]->out.data, g->yd, layer->out.data, g->hd, g->hx,
                            g->hy, g->hd, g->cx, g->cy, g->wbytes, g->weights, g->work_bytes, work,
                            g->reserve_bytes, g->reserve));
  /* the final states become the phase's carried ones */
  copy_states (layer, g->hy, p->state_h[ph], rows, FALSE, "forward");
  if (g->cy != NULL)
    copy_states (layer, g->cy, p->state_c[ph], rows, FALSE, "forward");
}

static void
rnn_gpu_backward (ShoalLayer *layer)
{
  ShoalRecurrentPriv *p = layer->priv;
  RnnGpu *g = layer->gpu_priv;
  ShoalDeviceContext *ctx = shoal_gpu_ctx (layer);
  cudaStream_t s = ctx->compute;
  const int rows = shoal_tensor_rows (&layer->srcs[0]->out);
  const float one = 1.0f;

  if (layer->src_grad[1] != NULL)
    {
      ShoalTensor *d1 = layer->src_grad[1];
      shoal_tensor_set_rows (d1, shoal_tensor_rows (&layer->srcs[1]->out));
      GPU_CUDA (layer, "backward", cudaMemsetAsync (d1->data, 0, shoal_tensor_count (d1) * sizeof (float), s));
    }
  if (rows == 0)
    return;
  float *dx = g->dx_scratch;
  if (layer->src_grad[0] != NULL)
    {
      shoal_tensor_set_rows (layer->src_grad[0], rows);
      dx = layer->src_grad[0]->data;
    }
  void *work = shoal_gpu_workspace (layer, g->work_bytes);
  if (g->work_bytes > 0 && work == NULL)
    return;
  /* truncated BPTT: nothing flows in from the next batch (dhy, dcy NULL = 0),
   * nothing is kept for the previous one (dhx, dcx NULL) */
  if (!GPU_DNN (layer, "backward",
                cudnnRNNBackwardData_v8 (ctx->dnn, g->rnn, g->seq_lengths, g->yd, layer->out.data, layer->grad.data,
                                         g->xd, dx, g->hd, g->hx, NULL, NULL, g->hd, g->cx, NULL, NULL, g->wbytes,
                                         g->weights, g->work_bytes, work, g->reserve_bytes, g->reserve)))
    return;
  /* cuDNN only adds weight gradients (CUDNN_WGRAD_MODE_SET is refused as
   * NOT_SUPPORTED), and the step's must stand alone before they are
   * added into the params' own */
  if (!GPU_CUDA (layer, "backward", cudaMemsetAsync (g->dweights, 0, g->wbytes, s))
      || !GPU_DNN (layer, "backward",
                cudnnRNNBackwardWeights_v8 (ctx->dnn, g->rnn, CUDNN_WGRAD_MODE_ADD, g->seq_lengths, g->xd,
                                            layer->srcs[0]->out.data, g->hd, g->hx, g->yd, layer->out.data, g->wbytes,
                                            g->dweights, g->work_bytes, work, g->reserve_bytes, g->reserve)))
    return;
  /* backward adds into the params' gradients, as on the CPU */
  for (int i = 0; i < g->nblocks; i++)
    GPU_BLAS (layer, "backward", cublasSaxpy (ctx->blas, (int) g->blocks[i].count, &one,
                                              (const float *) ((char *) g->dweights + g->blocks[i].offset), 1,
                                              g->blocks[i].param->grad.data + g->blocks[i].at, 1));
  (void) p;
}

static void
rnn_gpu_finalize (ShoalLayer *layer)
{
  ShoalRecurrentPriv *p = layer->priv;
  RnnGpu *g = layer->gpu_priv;
  if (g == NULL)
    return;
  if (g->pinned)
    for (int ph = 0; ph < 2; ph++)
      {
        shoal_device_host_unregister (layer->ctx->device, p->state_h[ph]);
        if (p->cell->has_cell)
          shoal_device_host_unregister (layer->ctx->device, p->state_c[ph]);
      }
  if (g->rnn)
    cudnnDestroyRNNDescriptor (g->rnn);
  if (g->drop)
    cudnnDestroyDropoutDescriptor (g->drop);
  if (g->xd)
    cudnnDestroyRNNDataDescriptor (g->xd);
  if (g->yd)
    cudnnDestroyRNNDataDescriptor (g->yd);
  if (g->hd)
    cudnnDestroyTensorDescriptor (g->hd);
  shoal_gpu_free (g->drop_states);
  shoal_gpu_free (g->seq_lengths);
  shoal_gpu_free (g->weights);
  shoal_gpu_free (g->dweights);
  shoal_gpu_free (g->reserve);
  shoal_gpu_free (g->hx);
  shoal_gpu_free (g->hy);
  shoal_gpu_free (g->cx);
  shoal_gpu_free (g->cy);
  shoal_gpu_free (g->dx_scratch);
  g_free (g->host_lengths);
  g_free (g);
  layer->gpu_priv = NULL;
}

const ShoalLayerGpuOps shoal_layer_gru_gpu = {
  .setup = rnn_gpu_setup,
  .forward = rnn_gpu_forward,
  .backward = rnn_gpu_backward,
  .finalize = rnn_gpu_finalize,
};

const ShoalLayerGpuOps shoal_layer_lstm_gpu = {
  .setup = rnn_gpu_setup,
  .forward = rnn_gpu_forward,
  .backward = rnn_gpu_backward,
  .finalize = rnn_gpu_finalize,
};

/* ---- embedding ------------------------------------------------------------ */

static void
embedding_gpu_forward (ShoalLayer *layer, ShoalPhase phase)
{
  const ShoalTensor *ids = &layer->srcs[0]->out;
  const ShoalParam *w = layer->params[0];
  (void) phase;
  GPU_CUDA (layer, "forward", shoal_k_embedding_forward (ids->data, shoal_tensor_count (ids), w->value.data,
                                                         w->shape.dim[0], w->shape.dim[1], layer->out.data,
                                                         shoal_gpu_ctx (layer)->compute));
}

static void
embedding_gpu_backward (ShoalLayer *layer)
{
  const ShoalTensor *ids = &layer->srcs[0]->out;
  const ShoalParam *w = layer->params[0];
  cudaStream_t s = shoal_gpu_ctx (layer)->compute;
  GPU_CUDA (layer, "backward", shoal_k_embedding_backward (ids->data, shoal_tensor_count (ids), layer->grad.data,
                                                           w->shape.dim[0], w->shape.dim[1], w->grad.data, s));
  if (layer->src_grad[0] != NULL)
    {
      ShoalTensor *d = layer->src_grad[0];
      shoal_tensor_set_rows (d, shoal_tensor_rows (ids));
      GPU_CUDA (layer, "backward", cudaMemsetAsync (d->data, 0, shoal_tensor_count (d) * sizeof (float), s));
    }
}

const ShoalLayerGpuOps shoal_layer_embedding_gpu = {
  .forward = embedding_gpu_forward,
  .backward = embedding_gpu_backward,
};
