/* Slice: block `index` of `parts` of the source along rows (axis 0) or
 * dim 1 (axis 1), blocks cut by shoal_block_range.
 *
 * Along rows the block is contiguous, so out (and label) are views into
 * the source, re-bound every forward like the split layer's (an input
 * layer may swap buffers); the block is taken of the rows the source has
 * at forward time, so a short last batch is cut the same way among the
 * workers.  Along dim 1 each row contributes one contiguous piece, copied.
 * Backward writes the whole source gradient: the block's rows or pieces,
 * zeros elsewhere (the other blocks' gradients arrive through other
 * consumers and are summed by the split in front of the source). */
#include "layers/slice.h"

#include <string.h>

typedef struct {
  int axis, parts, index;
  size_t inner;      /* axis 1: floats per item of dim 1 (H * W, or 1) */
  int lo, hi;        /* axis 1: the block of dim 1 */
} SlicePriv;

static const ShoalOption slice_options[] = {
  { "axis", SHOAL_OPT_INT, "0", 0, 1, NULL, "0 cuts rows, 1 cuts features / channels" },
  { "parts", SHOAL_OPT_INT, NULL, 1, 1 << 20, NULL, "number of blocks the axis is cut into" },
  { "index", SHOAL_OPT_INT, "0", 0, 1 << 20, NULL, "which block this layer outputs (0-based)" },
  SHOAL_OPTION_END
};

void
shoal_block_range (int n, int parts, int index, int *begin, int *end)
{
  int base = n / parts, extra = n % parts;
  *begin = index * base + MIN (index, extra);
  *end = *begin + base + (index < extra ? 1 : 0);
}

/* Views the rows block of the source's current rows. */
static void
bind_rows (ShoalLayer *layer)
{
  SlicePriv *p = layer->priv;
  const ShoalLayer *src = layer->srcs[0];
  int lo, hi;
  shoal_block_range (shoal_tensor_rows (&src->out), p->parts, p->index, &lo, &hi);
  ShoalShape shape = src->out.shape;
  shape.dim[0] = hi - lo;
  shoal_tensor_view (&layer->out, src->out.data + (size_t) lo * shoal_tensor_row_size (&src->out),
                     &shape);
  if (src->label.data != NULL)
    {
      /* labels may come several per row (a sequence's targets) */
      ShoalShape rows = src->label.shape;
      rows.dim[0] = hi - lo;
      shoal_tensor_view (&layer->label, src->label.data + (size_t) lo * shoal_tensor_row_size (&src->label),
                         &rows);
    }
  if (layer->grad.data != NULL)
    shoal_tensor_set_rows (&layer->grad, hi - lo);
}

static gboolean
slice_setup (ShoalLayer *layer, GError **error)
{
  SlicePriv *p = layer->priv;
  const ShoalLayer *src = layer->srcs[0];
  const ShoalShape *in = &src->out.shape;

  p->axis = (int) shoal_layer_opt_int (layer, "axis");
  p->parts = (int) shoal_layer_opt_int (layer, "parts");
  p->index = (int) shoal_layer_opt_int (layer, "index");
  if (p->index >= p->parts)
    {
      shoal_layer_error (layer, error, "index", "is %d but there are only %d parts", p->index,
                         p->parts);
      return FALSE;
    }
  if (in->ndim <= p->axis || in->dim[p->axis] < p->parts)
    {
      char *s = shoal_shape_to_string (in);
      shoal_layer_error (layer, error, "parts", "source '%s' (%s) cannot be cut into %d blocks along axis %d",
                         src->name, s, p->parts, p->axis);
      g_free (s);
      return FALSE;
    }
  if (p->axis == 0)
    {
      bind_rows (layer);
      return TRUE;
    }
  shoal_block_range (in->dim[1], p->parts, p->index, &p->lo, &p->hi);
  p->inner = in->dim[1] > 0 ? shoal_shape_row_size (in) / (size_t) in->dim[1] : 1;
  layer->out.shape = *in;
  layer->out.shape.dim[1] = p->hi - p->lo;
  if (src->label.data != NULL)
    shoal_tensor_view (&layer->label, src->label.data, &src->label.shape);
  return TRUE;
}

static void
slice_forward (ShoalLayer *layer, ShoalPhase phase)
{
  SlicePriv *p = layer->priv;
  const ShoalLayer *src = layer->srcs[0];
  (void) phase;

  if (p->axis == 0)
    {
      bind_rows (layer);
      return;
    }
  int rows = shoal_tensor_rows (&src->out);
  shoal_tensor_set_rows (&layer->out, rows);
  if (layer->grad.data != NULL)
    shoal_tensor_set_rows (&layer->grad, rows);
  if (src->label.data != NULL)
    shoal_tensor_view (&layer->label, src->label.data, &src->label.shape);

  size_t width = shoal_tensor_row_size (&src->out);
  size_t piece = (size_t) (p->hi - p->lo) * p->inner, offset = (size_t) p->lo * p->inner;
  const float *x = src->out.data;
  float *y = layer->out.data;
  for (int r = 0; r < rows; r++)
    memcpy (y + (size_t) r * piece, x + (size_t) r * width + offset, piece * sizeof (float));
}

static void
slice_backward (ShoalLayer *layer)
{
  SlicePriv *p = layer->priv;
  const ShoalLayer *src = layer->srcs[0];
  ShoalTensor *dst = layer->src_grad[0];
  if (dst == NULL)
    return;

  int rows = shoal_tensor_rows (&src->out);
  size_t width = shoal_tensor_row_size (&src->out);
  shoal_tensor_set_rows (dst, rows);
  const float *dy = layer->grad.data;
  float *dx = dst->data;

  if (p->axis == 0)
    {
      int lo, hi;
      shoal_block_range (rows, p->parts, p->index, &lo, &hi);
      memset (dx, 0, (size_t) lo * width * sizeof (float));
      memcpy (dx + (size_t) lo * width, dy, (size_t) (hi - lo) * width * sizeof (float));
      memset (dx + (size_t) hi * width, 0, (size_t) (rows - hi) * width * sizeof (float));
      return;
    }
  size_t piece = (size_t) (p->hi - p->lo) * p->inner, offset = (size_t) p->lo * p->inner;
  for (int r = 0; r < rows; r++)
    {
      float *row = dx + (size_t) r * width;
      memset (row, 0, offset * sizeof (float));
      memcpy (row + offset, dy + (size_t) r * piece, piece * sizeof (float));
      memset (row + offset + piece, 0, (width - offset - piece) * sizeof (float));
    }
}

static const char *
slice_refuse (ShoalConf *conf, const char *group, int dim)
{
  if (dim == 0 && shoal_conf_get_int (conf, group, slice_options, "axis") == 0)
    return "a block of one worker's rows is not a block of the batch";
  return NULL;
}

const ShoalLayerOps shoal_layer_slice_ops = {
  .type = "slice",
  .summary = "block `index` of `parts` of the source along rows (axis 0) or features / channels (axis 1)",
  .flags = SHOAL_LAYER_OWN_ROWS | SHOAL_LAYER_CONNECTION,
  /* a block of a worker's part is not a block of the whole */
  .split = { .dims = SHOAL_SPLIT_BATCH, .refuse = slice_refuse },
  .min_srcs = 1,
  .max_srcs = 1,
  .options = slice_options,
  .priv_size = sizeof (SlicePriv),
  .setup = slice_setup,
  .forward = slice_forward,
  .backward = slice_backward,
};
