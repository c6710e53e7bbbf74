/* bridge_src: the producing end of a cross-worker edge (see bridge.h).
 * Its out is a view of the bridged layer's out, like the split layer's,
 * so that a transport working in one address space hands over a pointer. */
#include "layers/bridge.h"

#include <string.h>

#include "core/error.h"

static const ShoalOption bridge_src_options[] = {
  { "grad", SHOAL_OPT_BOOL, "true", SHOAL_UNBOUNDED, NULL,
    "a gradient comes back over the bridge (false: nothing downstream learns)" },
  { "peer", SHOAL_OPT_STRING, "", SHOAL_UNBOUNDED, NULL, "the bridge_dst end, for messages and graphs" },
  SHOAL_OPTION_END
};

static void
bind_src (ShoalLayer *layer)
{
  ShoalLayer *src = layer->srcs[0];
  layer->out.data = src->out.data;
  layer->out.shape = src->out.shape;
  layer->out.capacity = src->out.capacity;
  if (src->label.data != NULL)
    {
      layer->label.data = src->label.data;
      layer->label.shape = src->label.shape;
      layer->label.capacity = src->label.capacity;
    }
}

static gboolean
bridge_src_setup (ShoalLayer *layer, GError **error)
{
  ShoalBridgePriv *p = layer->priv;
  ShoalLayer *src = layer->srcs[0];
  (void) error;
  p->grad = shoal_layer_opt_bool (layer, "grad");
  shoal_tensor_view (&layer->out, src->out.data, &src->out.shape);
  if (src->label.data != NULL)
    shoal_tensor_view (&layer->label, src->label.data, &src->label.shape);
  return TRUE;
}

static void
bridge_src_forward (ShoalLayer *layer, ShoalPhase phase)
{
  ShoalBridgePriv *p = layer->priv;
  (void) phase;
  bind_src (layer);
  if (p->link != NULL)
    p->link->transport->send_data (p->link, layer);
  else if (!p->warned)
    {
      g_critical ("bridge_src '%s' has no link: only the partitioner makes bridges", layer->name);
      p->warned = TRUE;
    }
}

static void
bridge_src_backward (ShoalLayer *layer)
{
  ShoalBridgePriv *p = layer->priv;
  ShoalTensor *dst = layer->src_grad[0];
  if (dst == NULL)
    return;
  shoal_tensor_set_rows (dst, shoal_tensor_rows (&layer->out));
  if (p->grad && p->link != NULL)
    p->link->transport->recv_grad (p->link, layer);
  else
    memset (dst->data, 0, shoal_tensor_count (dst) * sizeof (float));
}

gboolean
shoal_bridge_exchanges_grad (const ShoalLayer *bridge)
{
  const ShoalBridgePriv *p = bridge->priv;
  return p->grad;
}

gboolean
shoal_bridge_link_attach (ShoalBridgeLink *link, GError **error)
{
  ShoalLayer *src = link->src, *dst = link->dst;
  g_return_val_if_fail (src->ops == &shoal_layer_bridge_src_ops
                        && dst->ops == &shoal_layer_bridge_dst_ops, FALSE);
  ShoalBridgePriv *ps = src->priv, *pd = dst->priv;
  const char *problem = NULL;
  if (!shoal_shape_equal (&src->out.shape, &dst->out.shape))
    problem = "their shapes differ";
  else if ((src->label.data != NULL) != (dst->label.data != NULL))
    problem = "only one end carries labels";
  else if (ps->grad != pd->grad || (pd->grad && (!dst->needs_grad || src->src_grad[0] == NULL)))
    problem = "they disagree on exchanging a gradient";
  if (problem != NULL)
    {
      char *a = shoal_shape_to_string (&src->out.shape), *b = shoal_shape_to_string (&dst->out.shape);
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL,
                   "bridge '%s' (%s) -> '%s' (%s): %s", src->name, a, dst->name, b, problem);
      g_free (a);
      g_free (b);
      return FALSE;
    }
  ps->link = link;
  pd->link = link;
  if (link->transport->attach != NULL)
    link->transport->attach (link);
  return TRUE;
}

const ShoalLayerOps shoal_layer_bridge_src_ops = {
  .type = "bridge_src",
  .summary = "sending end of an edge between two workers' sub-nets (inserted by the partitioner)",
  .flags = SHOAL_LAYER_OWN_ROWS | SHOAL_LAYER_CONNECTION,
  .split = { .dims = SHOAL_SPLIT_BATCH | SHOAL_SPLIT_FEATURE },
  .min_srcs = 1,
  .max_srcs = 1,
  .options = bridge_src_options,
  .priv_size = sizeof (ShoalBridgePriv),
  .setup = bridge_src_setup,
  .forward = bridge_src_forward,
  .backward = bridge_src_backward,
};
