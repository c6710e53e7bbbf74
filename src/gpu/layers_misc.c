/* GPU paths of the layers that are data movement or small kernels:
 * split, concat, feed, lmdb_input, dropout, accuracy, euclidean_loss,
 * stanh.  Each keeps its CPU file's contract (rows, labels, what
 * backward writes); the comments say only where the GPU differs. */
#include "gpu/gpu.h"

#include <math.h>
#include <string.h>

#include "gpu/graph.h"
#include "gpu/kernels.h"
#include "layers/split.h"

static void
free_priv (ShoalLayer *layer)
{
  g_free (layer->gpu_priv);
  layer->gpu_priv = NULL;
}

/* ---- split: views of its source; backward sums the branches ---------- */

static gboolean
split_gpu_setup (ShoalLayer *layer, GError **error)
{
  (void) error;
  shoal_gpu_tag (layer, &layer->out);
  if (layer->label.data != NULL)
    shoal_gpu_tag (layer, &layer->label);
  return TRUE;
}

static void
split_gpu_forward (ShoalLayer *layer, ShoalPhase phase)
{
  /* the CPU forward only re-binds pointers and shapes */
  layer->ops->forward (layer, phase);
}

static void
split_gpu_backward (ShoalLayer *layer)
{
  ShoalDeviceContext *ctx = shoal_gpu_ctx (layer);
  ShoalTensor *dst = layer->src_grad[0];
  if (dst == NULL)
    return;
  size_t n = shoal_tensor_count (&layer->out);
  const float one = 1.0f;
  gboolean first = TRUE;
  for (int b = 0; b < shoal_split_n_branches (layer); b++)
    {
      const ShoalTensor *g = shoal_split_written_branch (layer, b);
      if (g == NULL)
        continue;
      if (first)
        GPU_CUDA (layer, "backward",
                  cudaMemcpyAsync (dst->data, g->data, n * sizeof (float), cudaMemcpyDeviceToDevice, ctx->compute));
      else
        GPU_BLAS (layer, "backward", cublasSaxpy (ctx->blas, (int) n, &one, g->data, 1, dst->data, 1));
      first = FALSE;
    }
  if (first)
    GPU_CUDA (layer, "backward", cudaMemsetAsync (dst->data, 0, n * sizeof (float), ctx->compute));
}

const ShoalLayerGpuOps shoal_layer_split_gpu = {
  .setup = split_gpu_setup,
  .forward = split_gpu_forward,
  .backward = split_gpu_backward,
};

/* ---- concat: contiguous copies along rows, 2-D copies along dim 1 ---- */

typedef struct {
  int axis;
  size_t piece[SHOAL_LAYER_MAX_SRCS];   /* floats per row from each source */
  int label_src;                        /* axis 1: whose labels are passed on; -1 none */
  gboolean warned;
} ConcatGpu;

static gboolean
concat_gpu_setup (ShoalLayer *layer, GError **error)
{
  ConcatGpu *g = g_new0 (ConcatGpu, 1);
  layer->gpu_priv = g;
  g->axis = (int) shoal_layer_opt_int (layer, "axis");
  g->label_src = -1;
  for (int i = 0; i < layer->nsrcs; i++)
    g->piece[i] = shoal_tensor_row_size (&layer->srcs[i]->out);
  for (int i = layer->nsrcs - 1; i >= 0; i--)
    if (layer->srcs[i]->label.data != NULL)
      g->label_src = i;
  if (layer->label.data == NULL)
    return TRUE;
  if (layer->label.owns_data)
    /* axis 0: the stacked labels get a buffer of their own */
    return shoal_gpu_move_to_device (layer, &layer->label, error);
  shoal_gpu_tag (layer, &layer->label);
  return TRUE;
}

static void
concat_gpu_forward (ShoalLayer *layer, ShoalPhase phase)
{
  ConcatGpu *g = layer->gpu_priv;
  cudaStream_t s = shoal_gpu_ctx (layer)->compute;
  int rows = shoal_tensor_rows (&layer->srcs[0]->out);
  (void) phase;

  if (g->axis == 0)
    for (int i = 1; i < layer->nsrcs; i++)
      rows += shoal_tensor_rows (&layer->srcs[i]->out);
  else
    for (int i = 1; i < layer->nsrcs; i++)
      if (shoal_tensor_rows (&layer->srcs[i]->out) != rows && !g->warned)
        {
          g_critical ("layer '%s': source '%s' has %d rows, '%s' has %d; joining features needs equal rows",
                      layer->name, layer->srcs[i]->name, shoal_tensor_rows (&layer->srcs[i]->out), layer->srcs[0]->name,
                      rows);
          g->warned = TRUE;
        }
  shoal_tensor_set_rows (&layer->out, rows);
  if (layer->grad.data != NULL)
    shoal_tensor_set_rows (&layer->grad, rows);

  float *y = layer->out.data;
  if (g->axis == 0)
    {
      float *lab = layer->label.data;
      for (int i = 0; i < layer->nsrcs; i++)
        {
          const ShoalLayer *src = layer->srcs[i];
          size_t n = shoal_tensor_count (&src->out);
          GPU_CUDA (layer, "forward", cudaMemcpyAsync (y, src->out.data, n * sizeof (float),
                                                       cudaMemcpyDeviceToDevice, s));
          y += n;
          if (lab != NULL)
            {
              /* labels may come several per row (sequences) */
              size_t r = (size_t) shoal_tensor_rows (&src->out) * shoal_tensor_row_size (&src->label);
              GPU_CUDA (layer, "forward", cudaMemcpyAsync (lab, src->label.data, r * sizeof (float),
                                                           cudaMemcpyDeviceToDevice, s));
              lab += r;
            }
        }
      if (layer->label.data != NULL)
        shoal_tensor_set_rows (&layer->label, rows);
      return;
    }
  if (g->label_src >= 0)
    {
      ShoalShape lshape = layer->srcs[g->label_src]->label.shape;
      lshape.dim[0] = rows;
      shoal_tensor_view_on (&layer->label, layer->srcs[g->label_src]->label.data, &lshape, layer->ctx->device);
    }
  size_t width = shoal_tensor_row_size (&layer->out), offset = 0;
  for (int i = 0; i < layer->nsrcs; i++)
    {
      size_t piece = g->piece[i];
      if (rows > 0 && piece > 0)
        GPU_CUDA (layer, "forward",
                  cudaMemcpy2DAsync (y + offset, width * sizeof (float), layer->srcs[i]->out.data,
                                     piece * sizeof (float), piece * sizeof (float), (size_t) rows,
                                     cudaMemcpyDeviceToDevice, s));
      offset += piece;
    }
}

static void
concat_gpu_backward (ShoalLayer *layer)
{
  ConcatGpu *g = layer->gpu_priv;
  cudaStream_t s = shoal_gpu_ctx (layer)->compute;
  const float *dy = layer->grad.data;

  if (g->axis == 0)
    {
      for (int i = 0; i < layer->nsrcs; i++)
        {
          const ShoalTensor *x = &layer->srcs[i]->out;
          size_t n = shoal_tensor_count (x);
          ShoalTensor *dst = layer->src_grad[i];
          if (dst != NULL)
            {
              shoal_tensor_set_rows (dst, shoal_tensor_rows (x));
              GPU_CUDA (layer, "backward",
                        cudaMemcpyAsync (dst->data, dy, n * sizeof (float), cudaMemcpyDeviceToDevice, s));
            }
          dy += n;
        }
      return;
    }
  int rows = shoal_tensor_rows (&layer->out);
  size_t width = shoal_tensor_row_size (&layer->out), offset = 0;
  for (int i = 0; i < layer->nsrcs; i++)
    {
      size_t piece = g->piece[i];
      ShoalTensor *dst = layer->src_grad[i];
      if (dst != NULL)
        {
          shoal_tensor_set_rows (dst, rows);
          if (rows > 0 && piece > 0)
            GPU_CUDA (layer, "backward",
                      cudaMemcpy2DAsync (dst->data, piece * sizeof (float), dy + offset, width * sizeof (float),
                                         piece * sizeof (float), (size_t) rows, cudaMemcpyDeviceToDevice, s));
        }
      offset += piece;
    }
}

const ShoalLayerGpuOps shoal_layer_concat_gpu = {
  .setup = concat_gpu_setup,
  .forward = concat_gpu_forward,
  .backward = concat_gpu_backward,
  .finalize = free_priv,
};

/* ---- feed: the data (and labels) drawn at set-up move to the device ----
 * A program feeding a GPU net writes with shoal_tensor_upload. */

static gboolean
feed_gpu_setup (ShoalLayer *layer, GError **error)
{
  if (!shoal_gpu_move_to_device (layer, &layer->out, error))
    return FALSE;
  return layer->label.data == NULL || shoal_gpu_move_to_device (layer, &layer->label, error);
}

static void
feed_gpu_forward (ShoalLayer *layer, ShoalPhase phase)
{
  (void) layer;
  (void) phase;
}

const ShoalLayerGpuOps shoal_layer_feed_gpu = {
  .setup = feed_gpu_setup,
  .forward = feed_gpu_forward,
};

/* ---- lmdb_input: the CPU layer reads and decodes, then an upload --------
 * The CPU forward runs on the host tensors it made (the prefetch buffers
 * it swaps); each batch is then copied up on the compute stream.  The
 * buffers are pinned where possible, so the copy is asynchronous: the
 * layer refills a buffer only at a later forward, after the net's sync. */

#define MAX_PINNED 4

typedef struct {
  ShoalTensor host_out, host_label;   /* what the CPU layer works on */
  void *pinned[MAX_PINNED];
  int npinned;
  gboolean pin_failed;
} InputGpu;

/* `twin` on `device`, as large as `t` (its capacity in rows) and of its shape. */
static gboolean
twin_on (const ShoalLayer *layer, const ShoalTensor *t, ShoalTensor *twin, ShoalDevice device, GError **error)
{
  ShoalShape full = t->shape;
  size_t row = shoal_shape_row_size (&full);
  if (full.ndim > 0 && row > 0)
    full.dim[0] = (int) (t->capacity / row);
  GError *local = NULL;
  if (!shoal_tensor_alloc_on (twin, &full, device, &local))
    {
      g_set_error (error, local->domain, local->code, "layer '%s': %s", layer->name, local->message);
      g_error_free (local);
      return FALSE;
    }
  twin->shape = t->shape;
  return TRUE;
}

static gboolean
input_gpu_setup (ShoalLayer *layer, GError **error)
{
  InputGpu *g = g_new0 (InputGpu, 1);
  layer->gpu_priv = g;
  g->host_label = layer->label;
  memset (&layer->label, 0, sizeof layer->label);
  if (layer->out.device.kind != SHOAL_DEVICE_CPU)
    {
      /* a layer that leaves its output to the net (text_input) got it on
       * the device: its CPU forward writes into a host one beside it */
      ShoalDevice cpu = { SHOAL_DEVICE_CPU, 0 };
      if (!twin_on (layer, &layer->out, &g->host_out, cpu, error))
        return FALSE;
    }
  else
    {
      g->host_out = layer->out;
      memset (&layer->out, 0, sizeof layer->out);
      if (!twin_on (layer, &g->host_out, &layer->out, layer->ctx->device, error))
        return FALSE;
    }
  return g->host_label.data == NULL || twin_on (layer, &g->host_label, &layer->label, layer->ctx->device, error);
}

static void
pin (ShoalLayer *layer, InputGpu *g, void *p, size_t bytes)
{
  for (int i = 0; i < g->npinned; i++)
    if (g->pinned[i] == p)
      return;
  if (g->npinned == MAX_PINNED || g->pin_failed)
    return;
  if (shoal_device_host_register (layer->ctx->device, p, bytes))
    g->pinned[g->npinned++] = p;
  else
    g->pin_failed = TRUE;  /* pageable copies work, only synchronously */
}

static void
upload (ShoalLayer *layer, InputGpu *g, ShoalTensor *dev, const ShoalTensor *host)
{
  int rows = shoal_tensor_rows (host);
  shoal_tensor_set_rows (dev, rows);
  pin (layer, g, host->data, host->capacity * sizeof (float));
  GPU_CUDA (layer, "forward", cudaMemcpyAsync (dev->data, host->data, shoal_tensor_count (host) * sizeof (float),
                                               cudaMemcpyHostToDevice, shoal_gpu_ctx (layer)->compute));
}

static void
input_gpu_forward (ShoalLayer *layer, ShoalPhase phase)
{
  InputGpu *g = layer->gpu_priv;
  ShoalTensor dev_out = layer->out, dev_label = layer->label;
  layer->out = g->host_out;
  layer->label = g->host_label;
  layer->ops->forward (layer, phase);
  g->host_out = layer->out;
  g->host_label = layer->label;
  layer->out = dev_out;
  layer->label = dev_label;
  upload (layer, g, &layer->out, &g->host_out);
  if (g->host_label.data != NULL)
    upload (layer, g, &layer->label, &g->host_label);
}

static void
input_gpu_finalize (ShoalLayer *layer)
{
  InputGpu *g = layer->gpu_priv;
  if (g == NULL)
    return;
  for (int i = 0; i < g->npinned; i++)
    shoal_device_host_unregister (layer->ctx->device, g->pinned[i]);
  /* the CPU finalize then meets what its set-up made */
  shoal_tensor_clear (&layer->out);
  shoal_tensor_clear (&layer->label);
  layer->out = g->host_out;
  layer->label = g->host_label;
  free_priv (layer);
}

const ShoalLayerGpuOps shoal_layer_lmdb_input_gpu = {
  .setup = input_gpu_setup,
  .forward = input_gpu_forward,
  .finalize = input_gpu_finalize,
};

/* text_input: the same, its ids and next-id targets read on the host */
const ShoalLayerGpuOps shoal_layer_text_input_gpu = {
  .setup = input_gpu_setup,
  .forward = input_gpu_forward,
  .finalize = input_gpu_finalize,
};

/* ---- dropout: the mask from a counter-based hash on the device -------- */

typedef struct {
  guint32 threshold;
  float scale;
  float *mask;
} DropoutGpu;

static gboolean
dropout_gpu_setup (ShoalLayer *layer, GError **error)
{
  DropoutGpu *g = g_new0 (DropoutGpu, 1);
  layer->gpu_priv = g;
  /* dropout.c's quantised probability and scale */
  double ratio = shoal_layer_opt_float (layer, "ratio");
  g->threshold = (guint32) lround (ratio * 65536.0);
  if (g->threshold > 65535)
    g->threshold = 65535;
  g->scale = (float) (65536.0 / (65536.0 - g->threshold));
  return (g->mask = shoal_gpu_alloc_floats (layer, layer->out.capacity, error)) != NULL;
}

static void
dropout_gpu_forward (ShoalLayer *layer, ShoalPhase phase)
{
  DropoutGpu *g = layer->gpu_priv;
  cudaStream_t s = shoal_gpu_ctx (layer)->compute;
  size_t n = shoal_tensor_count (&layer->out);
  if (phase == SHOAL_PHASE_TEST || g->threshold == 0)
    {
      GPU_CUDA (layer, "forward", cudaMemcpyAsync (layer->out.data, layer->srcs[0]->out.data, n * sizeof (float),
                                                   cudaMemcpyDeviceToDevice, s));
      return;
    }
  /* a fresh seed from the layer's own stream: masks differ by step,
   * worker and layer (a step graph reads it from its argument block) */
  uint64_t seed;
  const uint64_t *seed_at = shoal_gpu_step_seed (layer, &seed);
  GPU_CUDA (layer, "forward", shoal_k_dropout_forward (layer->srcs[0]->out.data, layer->out.data, g->mask, n, seed,
                                                       seed_at, g->threshold, g->scale, s));
}

static void
dropout_gpu_backward (ShoalLayer *layer)
{
  DropoutGpu *g = layer->gpu_priv;
  cudaStream_t s = shoal_gpu_ctx (layer)->compute;
  ShoalTensor *dst = layer->src_grad[0];
  size_t n = shoal_tensor_count (&layer->out);
  if (dst == NULL)
    return;
  shoal_tensor_set_rows (dst, shoal_tensor_rows (&layer->out));
  if (g->threshold == 0)
    GPU_CUDA (layer, "backward", cudaMemcpyAsync (dst->data, layer->grad.data, n * sizeof (float),
                                                  cudaMemcpyDeviceToDevice, s));
  else
    GPU_CUDA (layer, "backward", shoal_k_multiply (layer->grad.data, g->mask, dst->data, n, s));
}

static void
dropout_gpu_finalize (ShoalLayer *layer)
{
  DropoutGpu *g = layer->gpu_priv;
  if (g == NULL)
    return;
  shoal_gpu_free (g->mask);
  free_priv (layer);
}

const ShoalLayerGpuOps shoal_layer_dropout_gpu = {
  .setup = dropout_gpu_setup,
  .forward = dropout_gpu_forward,
  .backward = dropout_gpu_backward,
  .finalize = dropout_gpu_finalize,
};

/* ---- accuracy ------------------------------------------------------------ */

typedef struct {
  int k, top_k;
  int steps;      /* labels per row: each row holds that many groups of k logits */
  float *value;   /* device */
} AccuracyGpu;

static gboolean
accuracy_gpu_setup (ShoalLayer *layer, GError **error)
{
  AccuracyGpu *g = g_new0 (AccuracyGpu, 1);
  layer->gpu_priv = g;
  g->steps = (int) shoal_tensor_row_size (&layer->srcs[1]->label);
  g->k = (int) (shoal_tensor_row_size (&layer->srcs[0]->out) / (size_t) g->steps);
  g->top_k = (int) shoal_layer_opt_int (layer, "top_k");
  return (g->value = shoal_gpu_alloc_floats (layer, 1, error)) != NULL;
}

static void
accuracy_gpu_forward (ShoalLayer *layer, ShoalPhase phase)
{
  AccuracyGpu *g = layer->gpu_priv;
  cudaStream_t s = shoal_gpu_ctx (layer)->compute;
  (void) phase;
  if (!GPU_CUDA (layer, "forward", shoal_k_accuracy (layer->srcs[0]->out.data, layer->srcs[1]->label.data,
                                                     shoal_tensor_rows (&layer->srcs[0]->out) * g->steps, g->k, g->top_k,
                                                     g->value, s)))
    return;
  GPU_CUDA (layer, "forward", cudaMemcpyAsync (layer->out.data, g->value, sizeof (float), cudaMemcpyDeviceToHost, s));
}

static void
accuracy_gpu_finalize (ShoalLayer *layer)
{
  AccuracyGpu *g = layer->gpu_priv;
  if (g == NULL)
    return;
  shoal_gpu_free (g->value);
  free_priv (layer);
}

const ShoalLayerGpuOps shoal_layer_accuracy_gpu = {
  .setup = accuracy_gpu_setup,
  .forward = accuracy_gpu_forward,
  .finalize = accuracy_gpu_finalize,
};

/* ---- euclidean_loss ------------------------------------------------------- */

typedef struct {
  float *diff;                 /* (capacity of the prediction) */
  ShoalLossResult *result;     /* device */
} EuclideanGpu;

static gboolean
euclidean_loss_gpu_setup (ShoalLayer *layer, GError **error)
{
  EuclideanGpu *g = g_new0 (EuclideanGpu, 1);
  layer->gpu_priv = g;
  if ((g->diff = shoal_gpu_alloc_floats (layer, layer->srcs[0]->out.capacity, error)) == NULL)
    return FALSE;
  g->result = (ShoalLossResult *) shoal_gpu_alloc_floats (layer, sizeof (ShoalLossResult) / sizeof (float) + 1,
                                                          error);
  return g->result != NULL;
}

static void
euclidean_loss_gpu_forward (ShoalLayer *layer, ShoalPhase phase)
{
  EuclideanGpu *g = layer->gpu_priv;
  cudaStream_t s = shoal_gpu_ctx (layer)->compute;
  const ShoalTensor *a = &layer->srcs[0]->out;
  (void) phase;
  if (!GPU_CUDA (layer, "forward", shoal_k_euclidean_loss (a->data, layer->srcs[1]->out.data, g->diff,
                                                           shoal_tensor_count (a), shoal_layer_loss_rows (layer, shoal_tensor_rows (a)),
                                                           g->result, s)))
    return;
  GPU_CUDA (layer, "forward", cudaMemcpyAsync (layer->out.data, &g->result->value, sizeof (float),
                                               cudaMemcpyDeviceToHost, s));
}

static void
euclidean_loss_gpu_backward (ShoalLayer *layer)
{
  EuclideanGpu *g = layer->gpu_priv;
  cudaStream_t s = shoal_gpu_ctx (layer)->compute;
  const int rows = shoal_tensor_rows (&layer->srcs[0]->out);
  const size_t n = shoal_tensor_count (&layer->srcs[0]->out);
  const float w = shoal_layer_loss_scale (layer, rows);
  for (int i = 0; i < 2; i++)
    {
      ShoalTensor *dst = layer->src_grad[i];
      if (dst == NULL)
        continue;
      shoal_tensor_set_rows (dst, rows);
      GPU_CUDA (layer, "backward", shoal_k_scale (g->diff, i == 0 ? w : -w, dst->data, n, s));
    }
}

static void
euclidean_loss_gpu_finalize (ShoalLayer *layer)
{
  EuclideanGpu *g = layer->gpu_priv;
  if (g == NULL)
    return;
  shoal_gpu_free (g->diff);
  shoal_gpu_free (g->result);
  free_priv (layer);
}

const ShoalLayerGpuOps shoal_layer_euclidean_loss_gpu = {
  .setup = euclidean_loss_gpu_setup,
  .forward = euclidean_loss_gpu_forward,
  .backward = euclidean_loss_gpu_backward,
  .finalize = euclidean_loss_gpu_finalize,
};

/* ---- stanh ------------------------------------------------------------------ */

static void
stanh_gpu_forward (ShoalLayer *layer, ShoalPhase phase)
{
  (void) phase;
  GPU_CUDA (layer, "forward", shoal_k_stanh_forward (layer->srcs[0]->out.data, layer->out.data,
                                                     shoal_tensor_count (&layer->out), shoal_gpu_ctx (layer)->compute));
}

static void
stanh_gpu_backward (ShoalLayer *layer)
{
  ShoalTensor *dst = layer->src_grad[0];
  if (dst == NULL)
    return;
  shoal_tensor_set_rows (dst, shoal_tensor_rows (&layer->out));
  GPU_CUDA (layer, "backward", shoal_k_stanh_backward (layer->out.data, layer->grad.data, dst->data,
                                                       shoal_tensor_count (&layer->out),
                                                       shoal_gpu_ctx (layer)->compute));
}

const ShoalLayerGpuOps shoal_layer_stanh_gpu = {
  .forward = stanh_gpu_forward,
  .backward = stanh_gpu_backward,
};
