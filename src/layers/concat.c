/* Concatenation of 2 to 8 sources along rows (axis 0: the batch pieces
 * of a partitioned layer) or along dim 1 (axis 1: features of (N, D)
 * inputs, channels of (N, C, H, W) ones).  Backward cuts the gradient
 * back into the same pieces.
 *
 * Every piece is contiguous: along rows a source is one block, along dim
 * 1 a source contributes dim1_i * (H * W) floats to each row, so both
 * directions are memcpy loops.  Along rows the output has the sum of the
 * sources' rows at forward time, which is why the layer sets its own
 * rows (SHOAL_LAYER_OWN_ROWS) and those of its gradient.
 *
 * Labels follow the rows: along rows, when every source carries labels,
 * they are stacked like the data (batch pieces joined before a loss);
 * along dim 1 the rows are those of every source, so the labels of the
 * first source that carries any are passed on as a view. */
#include "layers/layer.h"

#include <string.h>

typedef struct {
  int axis;
  size_t piece[SHOAL_LAYER_MAX_SRCS];  /* axis 1: floats per row from source i */
  int label_src;       /* axis 1: source whose labels are passed on; -1 none */
  gboolean warned;
} ConcatPriv;

static const ShoalOption concat_options[] = {
  { "axis", SHOAL_OPT_INT, "1", 0, 1, NULL, "0 stacks rows, 1 joins features / channels" },
  SHOAL_OPTION_END
};

static gboolean
concat_setup (ShoalLayer *layer, GError **error)
{
  ConcatPriv *p = layer->priv;
  const ShoalShape *first = &layer->srcs[0]->out.shape;
  ShoalShape out = *first;

  p->axis = (int) shoal_layer_opt_int (layer, "axis");
  if (first->ndim <= p->axis)
    {
      char *s = shoal_shape_to_string (first);
      shoal_layer_error (layer, error, "axis", "source '%s' (%s) has no dim %d",
                         layer->srcs[0]->name, s, p->axis);
      g_free (s);
      return FALSE;
    }
  out.dim[p->axis] = 0;
  for (int i = 0; i < layer->nsrcs; i++)
    {
      const ShoalShape *s = &layer->srcs[i]->out.shape;
      gboolean fits = s->ndim == first->ndim;
      for (int d = 0; fits && d < s->ndim; d++)
        fits = d == p->axis || s->dim[d] == first->dim[d];
      if (!fits)
        {
          char *a = shoal_shape_to_string (first), *b = shoal_shape_to_string (s);
          shoal_layer_error (layer, error, "src",
                             "sources '%s' (%s) and '%s' (%s) differ outside axis %d",
                             layer->srcs[0]->name, a, layer->srcs[i]->name, b, p->axis);
          g_free (a);
          g_free (b);
          return FALSE;
        }
      out.dim[p->axis] += s->dim[p->axis];
      p->piece[i] = shoal_shape_row_size (s);
    }
  layer->out.shape = out;

  int labelled = 0;
  p->label_src = -1;
  for (int i = layer->nsrcs - 1; i >= 0; i--)
    if (layer->srcs[i]->label.data != NULL)
      {
        labelled++;
        p->label_src = i;
      }
  if (p->axis == 0 && labelled == layer->nsrcs)
    {
      ShoalShape rows = layer->srcs[0]->label.shape;  /* labels may come several per row */
      rows.dim[0] = out.dim[0];
      if (!shoal_layer_alloc_tensor (layer, &layer->label, &rows, "labels", error))
        return FALSE;
    }
  else if (p->axis == 0)
    p->label_src = -1;
  else if (p->label_src >= 0)
    {
      /* bound now so that consumers see labels at their set-up */
      ShoalShape rows = layer->srcs[p->label_src]->label.shape;
      rows.dim[0] = out.dim[0];
      shoal_tensor_view (&layer->label, layer->srcs[p->label_src]->label.data, &rows);
    }
  return TRUE;
}

/* Out's rows (and grad's) for this forward. */
static int
concat_rows (ShoalLayer *layer)
{
  ConcatPriv *p = layer->priv;
  int rows = shoal_tensor_rows (&layer->srcs[0]->out);

  if (p->axis == 0)
    {
      for (int i = 1; i < layer->nsrcs; i++)
        rows += shoal_tensor_rows (&layer->srcs[i]->out);
      return rows;
    }
  for (int i = 1; i < layer->nsrcs; i++)
    if (shoal_tensor_rows (&layer->srcs[i]->out) != rows && !p->warned)
      {
        g_critical ("layer '%s': source '%s' has %d rows, '%s' has %d; joining features needs "
                    "equal rows", layer->name, layer->srcs[i]->name,
                    shoal_tensor_rows (&layer->srcs[i]->out), layer->srcs[0]->name, rows);
        p->warned = TRUE;
      }
  return rows;
}

static void
concat_forward (ShoalLayer *layer, ShoalPhase phase)
{
  ConcatPriv *p = layer->priv;
  int rows = concat_rows (layer);

  (void) phase;
  shoal_tensor_set_rows (&layer->out, rows);
  if (layer->grad.data != NULL)
    shoal_tensor_set_rows (&layer->grad, rows);

  float *y = layer->out.data;
  if (p->axis == 0)
    {
      float *lab = layer->label.data;
      for (int i = 0; i < layer->nsrcs; i++)
        {
          size_t n = shoal_tensor_count (&layer->srcs[i]->out);
          memcpy (y, layer->srcs[i]->out.data, n * sizeof (float));
          y += n;
          if (lab != NULL)
            {
              size_t r = (size_t) shoal_tensor_rows (&layer->srcs[i]->out)
                         * shoal_tensor_row_size (&layer->srcs[i]->label);
              memcpy (lab, layer->srcs[i]->label.data, r * sizeof (float));
              lab += r;
            }
        }
      if (layer->label.data != NULL)
        shoal_tensor_set_rows (&layer->label, rows);
      return;
    }
  if (p->label_src >= 0)
    {
      ShoalShape lshape = layer->srcs[p->label_src]->label.shape;
      lshape.dim[0] = rows;
      shoal_tensor_view (&layer->label, layer->srcs[p->label_src]->label.data, &lshape);
    }
  size_t width = shoal_tensor_row_size (&layer->out);
  size_t offset = 0;
  for (int i = 0; i < layer->nsrcs; i++)
    {
      const float *x = layer->srcs[i]->out.data;
      size_t piece = p->piece[i];
      for (int r = 0; r < rows; r++)
        memcpy (y + (size_t) r * width + offset, x + (size_t) r * piece, piece * sizeof (float));
      offset += piece;
    }
}

static void
concat_backward (ShoalLayer *layer)
{
  ConcatPriv *p = layer->priv;
  const float *dy = layer->grad.data;

  if (p->axis == 0)
    {
      for (int i = 0; i < layer->nsrcs; i++)
        {
          const ShoalTensor *x = &layer->srcs[i]->out;
          size_t n = shoal_tensor_count (x);
          ShoalTensor *dst = layer->src_grad[i];
          if (dst != NULL)
            {
              shoal_tensor_set_rows (dst, shoal_tensor_rows (x));
              memcpy (dst->data, dy, n * sizeof (float));
            }
          dy += n;
        }
      return;
    }
  int rows = shoal_tensor_rows (&layer->out);
  size_t width = shoal_tensor_row_size (&layer->out);
  size_t offset = 0;
  for (int i = 0; i < layer->nsrcs; i++)
    {
      size_t piece = p->piece[i];
      ShoalTensor *dst = layer->src_grad[i];
      if (dst != NULL)
        {
          shoal_tensor_set_rows (dst, rows);
          for (int r = 0; r < rows; r++)
            memcpy (dst->data + (size_t) r * piece, dy + (size_t) r * width + offset,
                    piece * sizeof (float));
        }
      offset += piece;
    }
}

static const char *
concat_refuse (ShoalConf *conf, const char *group, int dim)
{
  if (dim == 1 && shoal_conf_get_int (conf, group, concat_options, "axis") == 1)
    return "a block of joined features is not the join of the sources' blocks";
  return NULL;
}

const ShoalLayerOps shoal_layer_concat_ops = {
  .type = "concat",
  .summary = "joins 2 to 8 sources along rows (axis 0) or features / channels (axis 1)",
  .flags = SHOAL_LAYER_OWN_ROWS | SHOAL_LAYER_CONNECTION,
  .split = { .dims = SHOAL_SPLIT_BATCH | SHOAL_SPLIT_FEATURE, .refuse = concat_refuse },
  .min_srcs = 2,
  .max_srcs = SHOAL_LAYER_MAX_SRCS,
  .options = concat_options,
  .priv_size = sizeof (ConcatPriv),
  .setup = concat_setup,
  .forward = concat_forward,
  .backward = concat_backward,
};
