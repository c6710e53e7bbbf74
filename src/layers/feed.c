/* The feed layer: data a program puts into the net itself.  Engineers
 * linking libshoal write their arrays into layer->out (and label); tests
 * use it as a seeded gaussian source.  forward leaves out untouched. */
#include "layers/layer.h"

#include <string.h>

static const ShoalOption feed_options[] = {
  { "shape", SHOAL_OPT_INT_LIST, NULL, 1, 1 << 30, NULL, "output shape, batch first: N,C,H,W or N,D" },
  { "need_grad", SHOAL_OPT_BOOL, "false", SHOAL_UNBOUNDED, NULL,
    "compute the gradient with respect to this data (gradient checks)" },
  { "num_classes", SHOAL_OPT_INT, "0", 0, 1 << 30, NULL,
    "when > 0, labels drawn uniformly from [0, num_classes)" },
  { "labels", SHOAL_OPT_BOOL, "false", SHOAL_UNBOUNDED, NULL,
    "carry labels, given with the data (shoal_net_feed); implied by num_classes > 0" },
  { "label_steps", SHOAL_OPT_INT, "1", 1, 1 << 24, NULL,
    "labels per row (> 1: a sequence's targets, one per step)" },
  SHOAL_OPTION_END
};

static gboolean
feed_setup (ShoalLayer *layer, GError **error)
{
  gsize n = 0;
  gint *dims = shoal_layer_opt_int_list (layer, "shape", &n);
  if (n < 1 || n > SHOAL_MAX_DIMS)
    {
      shoal_layer_error (layer, error, "shape", "needs 1 to %d dims, got %zu", SHOAL_MAX_DIMS, n);
      g_free (dims);
      return FALSE;
    }
  ShoalShape shape = { .ndim = (int) n };
  guint64 values = 1;
  for (gsize i = 0; i < n; i++)
    {
      shape.dim[i] = dims[i];
      values *= (guint64) dims[i];
    }
  g_free (dims);
  if (values > G_MAXINT32)
    {
      shoal_layer_error (layer, error, "shape", "holds more than 2^31 values");
      return FALSE;
    }

  if (!shoal_layer_alloc_tensor (layer, &layer->out, &shape, "output", error))
    return FALSE;
  size_t count = shoal_tensor_count (&layer->out);
  for (size_t i = 0; i < count; i++)
    layer->out.data[i] = shoal_rng_gaussian (&layer->rng);

  int classes = (int) shoal_layer_opt_int (layer, "num_classes");
  if (classes > 0 || shoal_layer_opt_bool (layer, "labels"))
    {
      int steps = (int) shoal_layer_opt_int (layer, "label_steps");
      ShoalShape rows = steps > 1 ? shoal_shape_make (2, shape.dim[0], steps) : shoal_shape_make (1, shape.dim[0]);
      if (!shoal_layer_alloc_tensor (layer, &layer->label, &rows, "labels", error))
        return FALSE;
      for (size_t i = 0; classes > 0 && i < shoal_tensor_count (&layer->label); i++)
        layer->label.data[i] = (float) shoal_rng_below (&layer->rng, (guint32) classes);
    }
  layer->needs_grad = shoal_layer_opt_bool (layer, "need_grad");
  return TRUE;
}

/* Rows from the program: they are the output values.  Labels go where
 * the layer carries labels (num_classes > 0, or made here on first use). */
static gboolean
feed_feed (ShoalLayer *layer, const float *data, int rows, const float *labels, GError **error)
{
  /* a GPU net's tensors are device memory: upload copies the new count */
  shoal_tensor_set_rows (&layer->out, rows);
  if (!shoal_device_is_cpu (layer->out.device))
    {
      if (!shoal_tensor_upload (&layer->out, data, error))
        return FALSE;
    }
  else
    memcpy (layer->out.data, data, (size_t) rows * shoal_tensor_row_size (&layer->out) * sizeof (float));
  if (layer->label.data == NULL)
    return TRUE;
  shoal_tensor_set_rows (&layer->label, rows);
  if (labels == NULL)
    return TRUE;
  if (!shoal_device_is_cpu (layer->label.device))
    return shoal_tensor_upload (&layer->label, labels, error);
  memcpy (layer->label.data, labels, (size_t) rows * shoal_tensor_row_size (&layer->label) * sizeof (float));
  return TRUE;
}

static void
feed_forward (ShoalLayer *layer, ShoalPhase phase)
{
  (void) layer;
  (void) phase;
}

const ShoalLayerOps shoal_layer_feed_ops = {
  .type = "feed",
  .summary = "data written into the net by the program (libshoal users, tests)",
  .flags = SHOAL_LAYER_INPUT | SHOAL_LAYER_OWN_ROWS,
  .split = { .dims = SHOAL_SPLIT_BATCH, .rows_key = "shape" },
  .min_srcs = 0,
  .max_srcs = 0,
  .options = feed_options,
  .setup = feed_setup,
  .forward = feed_forward,
  .feed = feed_feed,
};
