/* bridge_dst: the consuming end of a cross-worker edge (see bridge.h).
 * It has no source in its own sub-net; its shape and whether it carries
 * labels are options, so that the layers after it can be set up before
 * the producing sub-net exists. */
#include "layers/bridge.h"

static const ShoalOption bridge_dst_options[] = {
  { "shape", SHOAL_OPT_INT_LIST, NULL, 1, 1 << 30, NULL, "output shape, batch first (the bridged layer's)" },
  { "labels", SHOAL_OPT_BOOL, "false", SHOAL_UNBOUNDED, NULL, "the bridged layer carries labels" },
  { "label_steps", SHOAL_OPT_INT, "1", 1, 1 << 24, NULL, "labels per row (a sequence's targets)" },
  { "grad", SHOAL_OPT_BOOL, "true", SHOAL_UNBOUNDED, NULL,
    "send the gradient back (false: nothing downstream learns)" },
  { "peer", SHOAL_OPT_STRING, "", SHOAL_UNBOUNDED, NULL, "the bridge_src end, for messages and graphs" },
  SHOAL_OPTION_END
};

static gboolean
bridge_dst_setup (ShoalLayer *layer, GError **error)
{
  ShoalBridgePriv *p = layer->priv;
  gsize n = 0;
  gint *dims = shoal_layer_opt_int_list (layer, "shape", &n);
  if (n < 1 || n > SHOAL_MAX_DIMS)
    {
      shoal_layer_error (layer, error, "shape", "needs 1 to %d dims, got %zu", SHOAL_MAX_DIMS, n);
      g_free (dims);
      return FALSE;
    }
  ShoalShape shape = { .ndim = (int) n };
  for (gsize i = 0; i < n; i++)
    shape.dim[i] = dims[i];
  g_free (dims);
  layer->out.shape = shape;
  /* consumers check for labels at their set-up; the transport re-binds them */
  if (shoal_layer_opt_bool (layer, "labels"))
    {
      int steps = (int) shoal_layer_opt_int (layer, "label_steps");
      ShoalShape rows = steps > 1 ? shoal_shape_make (2, shape.dim[0], steps) : shoal_shape_make (1, shape.dim[0]);
      if (!shoal_layer_alloc_tensor (layer, &layer->label, &rows, "labels", error))
        return FALSE;
    }
  p->grad = shoal_layer_opt_bool (layer, "grad");
  layer->needs_grad = p->grad;
  return TRUE;
}

static void
bridge_dst_forward (ShoalLayer *layer, ShoalPhase phase)
{
  ShoalBridgePriv *p = layer->priv;
  (void) phase;
  if (p->link == NULL)
    {
      if (!p->warned)
        g_critical ("bridge_dst '%s' has no link: only the partitioner makes bridges", layer->name);
      p->warned = TRUE;
      return;
    }
  p->link->transport->recv_data (p->link, layer);
  if (layer->grad.data != NULL)
    shoal_tensor_set_rows (&layer->grad, shoal_tensor_rows (&layer->out));
}

static void
bridge_dst_backward (ShoalLayer *layer)
{
  ShoalBridgePriv *p = layer->priv;
  if (p->grad && p->link != NULL)
    p->link->transport->send_grad (p->link, layer);
}

const ShoalLayerOps shoal_layer_bridge_dst_ops = {
  .type = "bridge_dst",
  .summary = "receiving end of an edge between two workers' sub-nets (inserted by the partitioner)",
  .flags = SHOAL_LAYER_OWN_ROWS | SHOAL_LAYER_CONNECTION,
  .split = { .dims = SHOAL_SPLIT_BATCH | SHOAL_SPLIT_FEATURE },
  .min_srcs = 0,
  .max_srcs = 0,
  .options = bridge_dst_options,
  .priv_size = sizeof (ShoalBridgePriv),
  .setup = bridge_dst_setup,
  .forward = bridge_dst_forward,
  .backward = bridge_dst_backward,
};
