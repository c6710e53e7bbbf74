/* A program that uses libshoal as a library: it adds its own layer type
 * (the swish activation, y = x * sigmoid(beta * x)), builds a net around
 * it from a conf, feeds the net its own data (a three-armed spiral) and
 * trains it with its own loop.  See README.md next to this file.
 *
 *   custom_layer [section.key=value ...]     e.g. "layer act.beta=2" */
#include <glib.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/conf.h"
#include "core/param.h"
#include "core/rng.h"
#include "core/updater.h"
#include "layers/layer.h"
#include "net/net.h"

/* ---- the swish layer ----------------------------------------------------
 * Its options are declared once in a table: the net checks the conf's
 * keys and values against it, with file:line errors and defaults. */

typedef struct {
  float beta;
} SwishPriv;

static const ShoalOption swish_options[] = {
  { "beta", SHOAL_OPT_FLOAT, "1", 0.01, 100, NULL, "sharpness; large beta approaches ReLU" },
  SHOAL_OPTION_END
};

static gboolean
swish_setup (ShoalLayer *layer, GError **error)
{
  SwishPriv *p = layer->priv;
  (void) error;
  p->beta = (float) shoal_layer_opt_float (layer, "beta");
  /* same shape as the input; the net allocates out (and grad if needed) */
  layer->out.shape = layer->srcs[0]->out.shape;
  return TRUE;
}

static inline float
sigmoidf (float z)
{
  return 1.0f / (1.0f + expf (-z));
}

static void
swish_forward (ShoalLayer *layer, ShoalPhase phase)
{
  const SwishPriv *p = layer->priv;
  const float *restrict x = layer->srcs[0]->out.data;
  float *restrict y = layer->out.data;
  size_t n = shoal_tensor_count (&layer->out);  /* the net set this batch's rows */
  (void) phase;
  for (size_t i = 0; i < n; i++)
    y[i] = x[i] * sigmoidf (p->beta * x[i]);
}

/* dy/dx = s + beta * x * s * (1 - s), s = sigmoid(beta * x).  The input is
 * still there, so s is recomputed instead of kept from the forward. */
static void
swish_backward (ShoalLayer *layer)
{
  const SwishPriv *p = layer->priv;
  ShoalTensor *dst = layer->src_grad[0];
  if (dst == NULL)  /* nothing below needs a gradient */
    return;
  const float *restrict x = layer->srcs[0]->out.data;
  const float *restrict dy = layer->grad.data;
  float *restrict dx = dst->data;
  size_t n = shoal_tensor_count (&layer->out);
  for (size_t i = 0; i < n; i++)
    {
      float s = sigmoidf (p->beta * x[i]);
      dx[i] = dy[i] * (s + p->beta * x[i] * s * (1.0f - s));  /* written, not added */
    }
}

/* static: the registry keeps a pointer for the life of the program */
static const ShoalLayerOps swish_ops = {
  .type = "swish",
  .summary = "x * sigmoid(beta * x)",
  .split = { .dims = SHOAL_SPLIT_BATCH | SHOAL_SPLIT_FEATURE },
  .min_srcs = 1,
  .max_srcs = 1,
  .options = swish_options,
  .priv_size = sizeof (SwishPriv),
  .setup = swish_setup,
  .forward = swish_forward,
  .backward = swish_backward,
};

/* ---- checking the layer's gradient ---------------------------------------
 * A new layer's backward is easy to get wrong and training would only be
 * slower, not fail.  This compares it with central differences of a tiny
 * net's loss; need_grad on the feed asks the net for d loss / d input. */
static gboolean
check_swish_gradient (void)
{
  static const char text[] =
    "[layer x]\ntype = feed\nshape = 4, 5\nneed_grad = true\n"
    "[layer y]\ntype = swish\nsrc = x\nbeta = 1.7\n"
    "[layer target]\ntype = feed\nshape = 4, 5\n"
    "[layer loss]\ntype = euclidean_loss\nsrc = y, target\n";
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data (text, "gradient check", &error);
  ShoalNet *net = conf ? shoal_net_new (conf, NULL, &error) : NULL;
  if (net == NULL)
    {
      fprintf (stderr, "custom_layer: %s\n", error->message);
      g_error_free (error);
      shoal_conf_free (conf);
      return FALSE;
    }
  ShoalLayer *x = shoal_net_find (net, "x");  /* feeds start with gaussian data */
  shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  shoal_net_backward (net);

  const float eps = 1e-2f;
  double worst = 0;
  for (size_t i = 0; i < shoal_tensor_count (&x->out); i++)
    {
      float saved = x->out.data[i];
      x->out.data[i] = saved + eps;
      double up = shoal_net_forward (net, SHOAL_PHASE_TRAIN);
      x->out.data[i] = saved - eps;
      double down = shoal_net_forward (net, SHOAL_PHASE_TRAIN);
      x->out.data[i] = saved;
      double numeric = (up - down) / (2 * eps);
      worst = fmax (worst, fabs (numeric - x->grad.data[i]) / (1e-3 + fabs (numeric)));
    }
  printf ("swish gradient check: worst relative error %.2g\n", worst);
  shoal_net_free (net);
  shoal_conf_free (conf);
  return worst < 1e-2;
}

/* ---- the net ------------------------------------------------------------
 * num_classes on the feed layer makes it carry labels, which this program
 * then overwrites with its own. */
#define BATCH 64
#define CLASSES 3

static const char net_conf[] =
  "[layer data]\n"
  "type = feed\n"
  "shape = 64, 2\n"
  "num_classes = 3\n"
  "\n"
  "[layer fc1]\n"
  "type = dense\n"
  "src = data\n"
  "num_output = 32\n"
  "weight_init = glorot_uniform\n"
  "\n"
  "[layer act]\n"
  "type = swish\n"
  "src = fc1\n"
  "beta = 1\n"
  "\n"
  "[layer fc2]\n"
  "type = dense\n"
  "src = act\n"
  "num_output = 32\n"
  "weight_init = glorot_uniform\n"
  "\n"
  "[layer act2]\n"
  "type = swish\n"
  "src = fc2\n"
  "\n"
  "[layer logits]\n"
  "type = dense\n"
  "src = act2\n"
  "num_output = 3\n"
  "\n"
  "[layer loss]\n"
  "type = softmax_loss\n"
  "src = logits, data\n"
  "\n"
  "[layer accuracy]\n"
  "type = accuracy\n"
  "src = logits, data\n";

/* ---- the data: three interleaved spiral arms, noisy ---------------------- */
#define PER_CLASS 130
#define POINTS (PER_CLASS * CLASSES)  /* 390: six full batches and one of 6 rows */

static void
make_spiral (float *xy, float *label, ShoalRng *rng)
{
  for (int c = 0; c < CLASSES; c++)
    for (int i = 0; i < PER_CLASS; i++)
      {
        int k = c * PER_CLASS + i;
        float r = (float) i / PER_CLASS;
        float t = 4.0f * r + 2.0f * (float) G_PI * c / CLASSES + 0.15f * shoal_rng_gaussian (rng);
        xy[2 * k] = r * sinf (t);
        xy[2 * k + 1] = r * cosf (t);
        label[k] = (float) c;
      }
}

/* Copies rows order[first .. first+rows) into the feed layer and tells the
 * net how many rows this batch has. */
static void
feed_batch (ShoalLayer *data, const float *xy, const float *label, const uint32_t *order,
            int first, int rows)
{
  shoal_tensor_set_rows (&data->out, rows);
  shoal_tensor_set_rows (&data->label, rows);
  for (int i = 0; i < rows; i++)
    {
      uint32_t k = order[first + i];
      data->out.data[2 * i] = xy[2 * k];
      data->out.data[2 * i + 1] = xy[2 * k + 1];
      data->label.data[i] = label[k];
    }
}

static void
read_metrics (ShoalNet *net, double *loss, double *acc)
{
  ShoalMetric m[4];
  guint n = shoal_net_metrics (net, m, G_N_ELEMENTS (m));
  for (guint i = 0; i < n; i++)
    {
      if (strcmp (m[i].layer, "loss") == 0)
        *loss = m[i].value;
      else if (strcmp (m[i].layer, "accuracy") == 0)
        *acc = m[i].value;
    }
}

/* Mean loss and accuracy over every point, the last batch partial. */
static void
evaluate (ShoalNet *net, const float *xy, const float *label, const uint32_t *order,
          double *loss, double *acc)
{
  ShoalLayer *data = shoal_net_find (net, "data");
  double sum_loss = 0, sum_acc = 0;
  for (int first = 0; first < POINTS; first += BATCH)
    {
      int rows = MIN (BATCH, POINTS - first);
      double l = 0, a = 0;
      feed_batch (data, xy, label, order, first, rows);
      shoal_net_forward (net, SHOAL_PHASE_TEST);
      read_metrics (net, &l, &a);
      sum_loss += l * rows;
      sum_acc += a * rows;
    }
  *loss = sum_loss / POINTS;
  *acc = sum_acc / POINTS;
}

int
main (int argc, char **argv)
{
  GError *error = NULL;

  if (!shoal_layer_register (&swish_ops, &error))
    {
      fprintf (stderr, "custom_layer: %s\n", error->message);
      g_error_free (error);
      return 1;
    }

  if (!check_swish_gradient ())
    return 1;

  ShoalConf *conf = shoal_conf_load_data (net_conf, "custom_layer.conf", &error);
  for (int i = 1; conf != NULL && i < argc; i++)
    if (!shoal_conf_override (conf, argv[i], &error))
      break;
  ShoalNet *net = error == NULL ? shoal_net_new (conf, &(ShoalNetOptions) { .seed = 7, .shard_count = 1 },
                                                 &error)
                                : NULL;
  if (net == NULL)
    {
      fprintf (stderr, "custom_layer: %s\n", error->message);
      g_error_free (error);
      shoal_conf_free (conf);
      return 1;
    }
  shoal_net_log_summary (net);

  /* params: initialised from their conf specs; optimiser state next to them */
  ShoalParamStore *store = shoal_net_params (net);
  shoal_param_store_init_values (store, 7);
  ShoalUpdaterConf updater;
  shoal_updater_conf_defaults (&updater, SHOAL_UPDATER_SGD);
  updater.schedule.lr = 0.2f;
  updater.momentum = 0.9f;
  updater.weight_decay = 1e-4f;
  int per_value = shoal_updater_state_per_value (updater.kind);
  shoal_param_store_allocate_state (store, per_value);

  float *xy = g_new (float, 2 * POINTS), *label = g_new (float, POINTS);
  uint32_t *order = g_new (uint32_t, POINTS);
  ShoalRng rng;
  shoal_rng_seed (&rng, 2024, 0);
  make_spiral (xy, label, &rng);
  for (uint32_t i = 0; i < POINTS; i++)
    order[i] = i;

  double first_loss = 0, first_acc = 0, loss = 0, acc = 0;
  evaluate (net, xy, label, order, &first_loss, &first_acc);
  printf ("before training: loss %.4f accuracy %.3f\n", first_loss, first_acc);

  ShoalLayer *data = shoal_net_find (net, "data");
  const int steps = 1000;
  int epoch_pos = POINTS;  /* shuffle before the first batch */
  for (int step = 0; step < steps; step++)
    {
      if (epoch_pos + BATCH > POINTS)
        {
          shoal_rng_shuffle_u32 (&rng, order, POINTS);
          epoch_pos = 0;
        }
      feed_batch (data, xy, label, order, epoch_pos, BATCH);
      epoch_pos += BATCH;

      shoal_net_forward (net, SHOAL_PHASE_TRAIN);
      shoal_param_store_zero_grads (store);
      shoal_net_backward (net);
      for (guint i = 0; i < store->params->len; i++)
        {
          ShoalParam *p = g_ptr_array_index (store->params, i);
          float *state_a = per_value > 0 ? store->state + p->offset : NULL;
          float *state_b = per_value > 1 ? store->state + store->total + p->offset : NULL;
          shoal_updater_apply (&updater, step, step + 1, p->lr_scale, p->wd_scale, p->value.data,
                               p->grad.data, state_a, state_b, p->count);
        }
      if ((step + 1) % 200 == 0)
        {
          read_metrics (net, &loss, &acc);
          printf ("step %4d: batch loss %.4f accuracy %.3f\n", step + 1, loss, acc);
        }
    }

  for (uint32_t i = 0; i < POINTS; i++)
    order[i] = i;
  evaluate (net, xy, label, order, &loss, &acc);
  printf ("after %d steps: loss %.4f accuracy %.3f\n", steps, loss, acc);
  printf ("first_loss=%.6f final_loss=%.6f final_accuracy=%.4f\n", first_loss, loss, acc);
  int status = isfinite (loss) && loss < first_loss ? 0 : 1;

  g_free (xy);
  g_free (label);
  g_free (order);
  shoal_net_free (net);
  shoal_conf_free (conf);
  return status;
}
