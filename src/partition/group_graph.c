/* Looking at a group net: per-layer timing, the partitioned graph as
 * Graphviz DOT (shoal inspect --graph) and the log summary. */
#include <string.h>

#include "layers/bridge.h"
#include "layers/split.h"
#include "partition/group_priv.h"

static gboolean is_connection (const ShoalLayer *layer);

void
shoal_group_net_set_timing (ShoalGroupNet *g, gboolean on)
{
  if (on && !shoal_device_is_cpu (shoal_net_device (g->nets[g->first])))
    {
      /* the layers only enqueue work there: host clocks would time nothing */
      g_warning ("per-layer timing is not available on a GPU net");
      on = FALSE;
    }
  for (int w = 0; w < g->k; w++)
    {
      if (g->nets[w] == NULL)
        continue;
      guint n = shoal_net_n_layers (g->nets[w]);
      g_free (g->wctx[w].fwd_s);
      g_free (g->wctx[w].bwd_s);
      g->wctx[w].fwd_s = on ? g_new0 (double, n) : NULL;
      g->wctx[w].bwd_s = on ? g_new0 (double, n) : NULL;
    }
  g->timing = on;
}

guint
shoal_group_net_timings (ShoalGroupNet *g, int worker, ShoalLayerTiming *out, guint n)
{
  g_return_val_if_fail (worker >= 0 && worker < g->k, 0);
  const WorkerCtx *c = &g->wctx[worker];
  ShoalNet *net = g->nets[worker];
  guint count = 0;
  for (guint i = 0; c->fwd_s != NULL && i < shoal_net_n_layers (net) && count < n; i++)
    {
      ShoalLayer *layer = shoal_net_layer (net, i);
      out[count++] = (ShoalLayerTiming) { layer->name, layer->ops->type, is_connection (layer),
                                          c->fwd_s[i], c->bwd_s[i] };
    }
  return count;
}

static void
dot_escape (GString *s, const char *text)
{
  for (const char *c = text; *c; c++)
    {
      if (*c == '"' || *c == '\\')
        g_string_append_c (s, '\\');
      g_string_append_c (s, *c);
    }
}

static gboolean
is_connection (const ShoalLayer *layer)
{
  /* a user's own concat or slice joins nothing the partitioner made: the
   * ones it inserts have a ':' in their names (plan.c) */
  return (layer->ops->flags & SHOAL_LAYER_CONNECTION)
         && (layer->ops == &shoal_layer_split_ops || strchr (layer->name, ':') != NULL);
}

char *
shoal_group_net_to_dot (ShoalGroupNet *g)
{
  static const char *const dim_colour[] = { "#f4d6a0", "#cfe3f7", "#d9f2d0" };  /* -1, 0, 1 */
  GString *s = g_string_new ("digraph shoal {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n");
  g_string_append_printf (s, "  label=\"%d workers: batch blue, feature green, whole orange; "
                          "dashed: bridges\";\n", g->k);
  for (int w = 0; w < g->k; w++)
    {
      ShoalNet *net = g->nets[w];
      if (net == NULL)
        continue;  /* a spread group draws its own process's workers */
      g_string_append_printf (s, "  subgraph cluster_w%d {\n    label=\"worker %d\";\n    style=rounded;\n", w, w);
      for (guint i = 0; i < shoal_net_n_layers (net); i++)
        {
          ShoalLayer *layer = shoal_net_layer (net, i);
          char *shape = shoal_shape_to_string (&layer->out.shape);
          g_string_append_printf (s, "    w%d_%u [label=\"", w, i);
          dot_escape (s, layer->name);
          g_string_append (s, "\\n");
          dot_escape (s, layer->ops->type);
          g_string_append_printf (s, " %s\"", shape);
          if (is_connection (layer))
            g_string_append (s, ", shape=ellipse, style=dashed");
          else
            g_string_append_printf (s, ", shape=box, style=filled, fillcolor=\"%s\"%s",
                                    dim_colour[CLAMP (layer->partition_dim, -1, 1) + 1],
                                    layer->nparams > 0 ? ", penwidth=2" : "");
          g_string_append (s, "];\n");
          g_free (shape);
        }
      for (guint i = 0; i < shoal_net_n_layers (net); i++)
        {
          ShoalLayer *layer = shoal_net_layer (net, i);
          for (int t = 0; t < layer->nsrcs; t++)
            for (guint j = 0; j < i; j++)
              if (shoal_net_layer (net, j) == layer->srcs[t])
                g_string_append_printf (s, "    w%d_%u -> w%d_%u;\n", w, j, w, i);
        }
      g_string_append (s, "  }\n");
    }
  for (guint p = 0; g->links != NULL && p < g->links->len; p++)
    {
      ShoalBridgeLink *link = g_ptr_array_index (g->links, p);
      if (link->src == NULL || link->dst == NULL)
        continue;
      int ends[2][2] = { { -1, -1 }, { -1, -1 } };  /* worker, index of src and dst */
      for (int w = 0; w < g->k; w++)
        for (guint i = 0; g->nets[w] != NULL && i < shoal_net_n_layers (g->nets[w]); i++)
          {
            ShoalLayer *layer = shoal_net_layer (g->nets[w], i);
            int e = layer == link->src ? 0 : layer == link->dst ? 1 : -1;
            if (e >= 0)
              {
                ends[e][0] = w;
                ends[e][1] = (int) i;
              }
          }
      g_string_append_printf (s, "  w%d_%d -> w%d_%d [style=dashed, color=\"#1f5fbf\"%s];\n",
                              ends[0][0], ends[0][1], ends[1][0], ends[1][1],
                              shoal_bridge_exchanges_grad (link->dst) ? ", dir=both" : "");
    }
  g_string_append (s, "}\n");
  return g_string_free (s, FALSE);
}

void
shoal_group_net_log_summary (ShoalGroupNet *g)
{
  GString *dims = g_string_new (NULL);
  for (int l = 0; l < g->plan.norig; l++)
    g_string_append_printf (dims, "%s%s:%d", l ? " " : "", g->plan.origs[l].name,
                            g->plan.origs[l].dim);
  g_message ("group of %d worker%s; partition dims %s", g->k, g->k == 1 ? "" : "s", dims->str);
  g_string_free (dims, TRUE);
  for (int w = 0; g->k > 1 && w < g->k; w++)
    {
      int connections = 0;
      ShoalNet *net = g->nets[w];
      if (net == NULL)
        continue;
      for (guint i = 0; i < shoal_net_n_layers (net); i++)
        connections += is_connection (shoal_net_layer (net, i));
      g_message ("  worker %d: %u layers, %d of them connection layers", w,
                 shoal_net_n_layers (net), connections);
    }
}

