/* Top-k accuracy of logits (srcs[0], (N, K)) against labels
 * (srcs[1]->label): out = correct rows / labelled rows.
 *
 * A row is correct when its label's rank is below top_k, the rank being
 * the number of classes with a larger logit plus the number with an
 * equal logit and a smaller index; so top-1 agrees with an argmax that
 * takes the first maximum, and ties never count as correct for free.
 * A NaN logit for the label is never correct.  Rows whose label is not
 * a class of [0, K) are left out of both counts, as softmax_loss leaves
 * them out of the loss.  Labels with S per row (sequences) make each row
 * of logits S groups of K classes, as in softmax_loss: out is then the
 * fraction of correct steps. */
#include "layers/layer.h"

#include <math.h>

typedef struct {
  int classes;
  int steps;
  int top_k;
} AccuracyPriv;

static const ShoalOption accuracy_options[] = {
  { "top_k", SHOAL_OPT_INT, "1", 1, 1 << 30, NULL,
    "a row is correct when its label is among the top_k logits" },
  SHOAL_OPTION_END
};

static gboolean
accuracy_setup (ShoalLayer *layer, GError **error)
{
  AccuracyPriv *p = layer->priv;
  const ShoalLayer *logits = layer->srcs[0];

  if (!shoal_layer_check_step_labels (layer, &p->steps, &p->classes, error))
    return FALSE;
  p->top_k = (int) shoal_layer_opt_int (layer, "top_k");
  if (p->top_k > p->classes)
    {
      shoal_layer_error (layer, error, "top_k", "is %d but '%s' has only %d classes", p->top_k,
                         logits->name, p->classes);
      return FALSE;
    }
  layer->out.shape = shoal_shape_make (1, 1);
  return TRUE;
}

static void
accuracy_forward (ShoalLayer *layer, ShoalPhase phase)
{
  const AccuracyPriv *p = layer->priv;
  const ShoalTensor *logits = &layer->srcs[0]->out;
  const float *label = layer->srcs[1]->label.data;
  const int rows = shoal_tensor_rows (logits), k = p->classes, groups = rows * p->steps;
  int correct = 0, labelled = 0;

  (void) phase;
  for (int i = 0; i < groups; i++)
    {
      float lab = label[i];
      if (!(lab >= 0.0f && lab < (float) k) || lab != floorf (lab))
        continue;
      labelled++;
      const float *x = logits->data + (size_t) i * k;
      int y = (int) lab;
      float v = x[y];
      if (isnan (v))
        continue;
      int rank = 0;
      for (int c = 0; c < k; c++)
        rank += x[c] > v || (x[c] == v && c < y);
      correct += rank < p->top_k;
    }
  layer->out.data[0] = labelled > 0 ? (float) correct / (float) labelled : 0.0f;
}

const ShoalLayerOps shoal_layer_accuracy_ops = {
  .type = "accuracy",
  .summary = "fraction of rows whose label is among the top_k logits",
  .flags = SHOAL_LAYER_METRIC | SHOAL_LAYER_OWN_ROWS,
  .split = { .dims = SHOAL_SPLIT_BATCH },
  .min_srcs = 2,
  .max_srcs = 2,
  .options = accuracy_options,
  .priv_size = sizeof (AccuracyPriv),
  .setup = accuracy_setup,
  .forward = accuracy_forward,
};
