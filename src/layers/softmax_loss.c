/* Softmax cross-entropy: srcs = logits (N, K) and a layer carrying labels
 * (srcs[1]->label, N class indices stored as floats).  out holds
 * sum_i -log softmax(x_i)[y_i] / norm, norm = loss_norm or the rows.
 * Sequences: labels with S per row (text_input's (N, S) next-char
 * targets) make each row of logits S groups of K = row size / S classes
 * ((N, S, K): one softmax per time step), and norm is multiplied by S, so
 * the loss is the mean over rows and steps.
 *
 * Softmax and loss go through log-sum-exp with the row's maximum taken
 * out first, so logits of any size give finite results.  The forward
 * keeps the probabilities; backward is then (p - onehot) * w / norm.
 * A label of -1 (what a record without one holds) marks the row as
 * unlabelled: it adds no loss and no gradient, and the first one is
 * reported with a warning.  The mean still counts it: the loss is the sum
 * over the labelled rows divided by all N rows (loss_norm), where
 * torch.nn.CrossEntropyLoss(ignore_index=-1) divides by the labelled rows
 * only; a partitioned batch's parts each divide by the whole batch, which
 * a per-part labelled count would break (docs/LAYERS.md, `shoal layers`).
 * Any other label outside [0, K) (K or more, another negative, a
 * fraction) is bad input, not a missing label: the loss is NaN, so a run
 * stops at that step, and the row and label are logged. */
#pragma GCC optimize ("tree-vectorize", "no-trapping-math")

#include "layers/layer.h"
#include "layers/vmath.h"

#include <math.h>
#include <string.h>

typedef struct {
  int classes;     /* K */
  int steps;       /* S: labels (and groups of K logits) per row */
  float *prob;     /* (capacity of the logits): softmax of the last forward */
  gboolean warned;
} SoftmaxLossPriv;

static gboolean
softmax_loss_setup (ShoalLayer *layer, GError **error)
{
  SoftmaxLossPriv *p = layer->priv;
  const ShoalLayer *logits = layer->srcs[0];

  if (!shoal_layer_check_step_labels (layer, &p->steps, &p->classes, error))
    return FALSE;
  p->prob = shoal_layer_alloc_floats (layer, shoal_tensor_count (&logits->out), "probabilities", error);
  layer->out.shape = shoal_shape_make (1, 1);
  return p->prob != NULL;
}

static void
softmax_loss_finalize (ShoalLayer *layer)
{
  SoftmaxLossPriv *p = layer->priv;
  shoal_free_aligned (p->prob);
  p->prob = NULL;
}

/* Max and sum over a row in 8 lanes: the lanes break the dependency
 * chain, so GCC vectorises them without reassociation flags (a 64x1024
 * forward went from 2.7 to 1.5 ns per element; measured). */
static float
row_max (const float *restrict x, int k)
{
  float lane[8];
  int i = 0;
  for (int l = 0; l < 8; l++)
    lane[l] = x[0];
  for (; i + 8 <= k; i += 8)
    for (int l = 0; l < 8; l++)
      lane[l] = x[i + l] > lane[l] ? x[i + l] : lane[l];
  float m = lane[0];
  for (int l = 1; l < 8; l++)
    m = lane[l] > m ? lane[l] : m;
  for (; i < k; i++)
    m = x[i] > m ? x[i] : m;
  return m;
}

static float
row_sum (const float *restrict x, int k)
{
  float lane[8] = { 0 };
  int i = 0;
  for (; i + 8 <= k; i += 8)
    for (int l = 0; l < 8; l++)
      lane[l] += x[i + l];
  float s = 0;
  for (int l = 0; l < 8; l++)
    s += lane[l];
  for (; i < k; i++)
    s += x[i];
  return s;
}

/* e[k] = exp(x[k] - m) */
static void
exp_shifted (const float *restrict x, float m, float *restrict e, int k)
{
  for (int i = 0; i < k; i++)
    e[i] = shoal_vexpf (x[i] - m);
}

static void
scale_row (float *restrict e, float s, int k)
{
  for (int i = 0; i < k; i++)
    e[i] *= s;
}

/* The class index of a label, or -1 when it is not one of [0, k). */
static int
label_class (float label, int k)
{
  if (!(label >= 0.0f && label < (float) k) || label != floorf (label))
    return -1;
  return (int) label;
}

static void
softmax_loss_forward (ShoalLayer *layer, ShoalPhase phase)
{
  SoftmaxLossPriv *p = layer->priv;
  const ShoalTensor *logits = &layer->srcs[0]->out;
  const float *label = layer->srcs[1]->label.data;
  const int rows = shoal_tensor_rows (logits), k = p->classes, groups = rows * p->steps;
  double total = 0;

  (void) phase;
  for (int i = 0; i < groups; i++)
    {
      const float *x = logits->data + (size_t) i * k;
      float *e = p->prob + (size_t) i * k;
      float m = row_max (x, k);
      exp_shifted (x, m, e, k);
      float sum = row_sum (e, k);
      scale_row (e, 1.0f / sum, k);

      int y = label_class (label[i], k);
      if (y < 0 && label[i] != -1.0f)
        {
          g_warning ("layer '%s': row %d has label %g, not a class of [0, %d) (-1 marks a row without "
                     "one): the loss is NaN", layer->name, i, label[i], k);
          total = NAN;
          break;
        }
      if (y < 0)
        {
          if (!p->warned)
            g_warning ("layer '%s': row %d has label -1 (none); rows without a label add no loss",
                       layer->name, i);
          p->warned = TRUE;
          continue;
        }
      /* -log p_y = log(sum) - (x_y - m), exact even where p_y underflows */
      total += log ((double) sum) - ((double) x[y] - m);
    }
  layer->out.data[0] = (float) (total / ((double) shoal_layer_loss_rows (layer, rows) * p->steps));
}

static void
softmax_loss_backward (ShoalLayer *layer)
{
  SoftmaxLossPriv *p = layer->priv;
  const ShoalTensor *logits = &layer->srcs[0]->out;
  const float *label = layer->srcs[1]->label.data;
  const int rows = shoal_tensor_rows (logits), k = p->classes, groups = rows * p->steps;
  const float w = layer->loss_weight / ((float) shoal_layer_loss_rows (layer, rows) * (float) p->steps);

  if (layer->src_grad[1] != NULL)
    {
      /* the labels' layer gets no gradient through its out */
      shoal_tensor_set_rows (layer->src_grad[1], shoal_tensor_rows (&layer->srcs[1]->out));
      shoal_tensor_fill (layer->src_grad[1], 0.0f);
    }
  ShoalTensor *dst = layer->src_grad[0];
  if (dst == NULL)
    return;
  shoal_tensor_set_rows (dst, rows);
  for (int i = 0; i < groups; i++)
    {
      float *dx = dst->data + (size_t) i * k;
      int y = label_class (label[i], k);
      if (y < 0)
        {
          memset (dx, 0, (size_t) k * sizeof (float));
          continue;
        }
      memcpy (dx, p->prob + (size_t) i * k, (size_t) k * sizeof (float));
      dx[y] -= 1.0f;
      scale_row (dx, w, k);
    }
}

const ShoalLayerOps shoal_layer_softmax_loss_ops = {
  .type = "softmax_loss",
  .summary = "softmax cross-entropy of logits (src 1) against labels (src 2); labels with S per row: "
             "one softmax per step over (N, S, K) logits.  Rows labelled -1 add no loss but count in the "
             "mean (over all N rows; torch: over the labelled rows); any other label outside [0, K) "
             "makes the loss NaN",
  .flags = SHOAL_LAYER_LOSS | SHOAL_LAYER_OWN_ROWS,
  .split = { .dims = SHOAL_SPLIT_BATCH },
  .min_srcs = 2,
  .max_srcs = 2,
  .priv_size = sizeof (SoftmaxLossPriv),
  .setup = softmax_loss_setup,
  .forward = softmax_loss_forward,
  .backward = softmax_loss_backward,
  .finalize = softmax_loss_finalize,
};
