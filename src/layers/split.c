/* Fan-out without copies: consumers read the source's memory, and each
 * has its own gradient buffer so that no consumer overwrites another's
 * contribution (backward writes, never adds, into src_grad). */
#include "layers/split.h"

#include <string.h>

typedef struct {
  int nbranches;
  ShoalTensor *branch_grad;  /* nbranches, owned */
  gboolean *writes;          /* nbranches */
} SplitPriv;

void
shoal_split_set_branches (ShoalLayer *split, int nbranches)
{
  SplitPriv *priv = split->priv;
  g_return_if_fail (split->ops == &shoal_layer_split_ops && nbranches >= 1);
  priv->nbranches = nbranches;
}

gboolean
shoal_split_branch_grad (ShoalLayer *split, int branch, ShoalTensor **grad, GError **error)
{
  SplitPriv *priv = split->priv;
  *grad = NULL;
  g_return_val_if_fail (branch >= 0 && branch < priv->nbranches, FALSE);
  if (!split->needs_grad)
    return TRUE;
  if (priv->branch_grad[branch].data == NULL)
    {
      GError *local = NULL;
      /* on the net's device: the consumer's GPU backward writes it */
      if (!shoal_tensor_alloc_on (&priv->branch_grad[branch], &split->out.shape, split->ctx->device,
                                  &local))
        {
          char *what = g_strdup_printf ("gradient of branch %d", branch);
          shoal_layer_error_nomem (split, error, local, what);
          g_free (what);
          return FALSE;
        }
    }
  priv->writes[branch] = TRUE;
  *grad = &priv->branch_grad[branch];
  return TRUE;
}

int
shoal_split_n_branches (ShoalLayer *split)
{
  SplitPriv *priv = split->priv;
  return priv->nbranches;
}

ShoalTensor *
shoal_split_written_branch (ShoalLayer *split, int branch)
{
  SplitPriv *priv = split->priv;
  g_return_val_if_fail (branch >= 0 && branch < priv->nbranches, NULL);
  return priv->writes[branch] ? &priv->branch_grad[branch] : NULL;
}

static gboolean
split_setup (ShoalLayer *layer, GError **error)
{
  SplitPriv *priv = layer->priv;
  (void) error;
  if (priv->nbranches < 1)
    priv->nbranches = 1;
  priv->branch_grad = g_new0 (ShoalTensor, priv->nbranches);
  priv->writes = g_new0 (gboolean, priv->nbranches);
  ShoalLayer *src = layer->srcs[0];
  /* out is re-bound every forward: an input layer may swap its buffers */
  shoal_tensor_view (&layer->out, src->out.data, &src->out.shape);
  if (src->label.data != NULL)
    shoal_tensor_view (&layer->label, src->label.data, &src->label.shape);
  return TRUE;
}

static void
split_forward (ShoalLayer *layer, ShoalPhase phase)
{
  ShoalLayer *src = layer->srcs[0];
  (void) phase;
  layer->out.data = src->out.data;
  layer->out.shape = src->out.shape;
  if (src->label.data != NULL)
    {
      layer->label.data = src->label.data;
      layer->label.shape = src->label.shape;
    }
  SplitPriv *priv = layer->priv;
  for (int b = 0; b < priv->nbranches; b++)
    if (priv->branch_grad[b].data != NULL)
      priv->branch_grad[b].shape = src->out.shape;
}

static void
split_backward (ShoalLayer *layer)
{
  SplitPriv *priv = layer->priv;
  ShoalTensor *dst = layer->src_grad[0];
  if (dst == NULL)
    return;
  size_t n = shoal_tensor_count (&layer->out);
  float *restrict d = dst->data;
  gboolean first = TRUE;

  for (int b = 0; b < priv->nbranches; b++)
    {
      if (!priv->writes[b])
        continue;
      const float *restrict g = priv->branch_grad[b].data;
      if (first)
        memcpy (d, g, n * sizeof (float));
      else
        for (size_t i = 0; i < n; i++)
          d[i] += g[i];
      first = FALSE;
    }
  if (first)
    memset (d, 0, n * sizeof (float));
}

static void
split_finalize (ShoalLayer *layer)
{
  SplitPriv *priv = layer->priv;
  for (int b = 0; priv->branch_grad != NULL && b < priv->nbranches; b++)
    shoal_tensor_clear (&priv->branch_grad[b]);
  g_free (priv->branch_grad);
  g_free (priv->writes);
}

static const ShoalOption split_options[] = { SHOAL_OPTION_END };

const ShoalLayerOps shoal_layer_split_ops = {
  .type = "split",
  .summary = "one source to several consumers (inserted by the net)",
  .flags = SHOAL_LAYER_OWN_ROWS | SHOAL_LAYER_CONNECTION,
  .split = { .dims = SHOAL_SPLIT_BATCH | SHOAL_SPLIT_FEATURE },
  .min_srcs = 1,
  .max_srcs = 1,
  .options = split_options,
  .priv_size = sizeof (SplitPriv),
  .setup = split_setup,
  .forward = split_forward,
  .backward = split_backward,
  .finalize = split_finalize,
};
