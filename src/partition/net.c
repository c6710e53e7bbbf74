/* Building a net from a conf: graph checks, topological order, split
 * insertion for fan-out, set-up and memory.  The partitioner builds on
 * the same pieces to make the sub-nets of a worker group.
 *
 * A net on a GPU runs the same graph through the layers' GPU paths; what
 * only it needs (param traffic between the host store and the device,
 * overlapped with compute through events) is in the "GPU nets" part. */
#include "partition/net.h"

#include <math.h>
#include <string.h>

#include "core/error.h"
#include "layers/split.h"

struct _ShoalNet {
  ShoalConf *conf;                /* borrowed */
  ShoalLayerContext ctx;
  GPtrArray *layers;              /* ShoalLayer *, topological order, owned */
  ShoalParamStore *store;         /* owned */
  ShoalLayer *input;

  /* GPU nets (ctx.gpu != NULL), per layer index; NULL for layers without params */
  gboolean upload_every_forward;  /* forward uploads every param's values first */
  ShoalEvent **uploaded;          /* copy stream: the layer's param values are on the device */
  ShoalEvent **computed;          /* compute stream: the layer's backward is done */
  ShoalEvent **downloaded;        /* copy stream: its gradients are in staging */
  ShoalEvent *manual_upload;      /* the last shoal_net_upload_params */
  gboolean manual_pending;
  float *staging;                 /* pinned host, store->total floats: device gradients land here */
  GError *device_error;           /* the first device error */
};

#define LAYER_GROUP_PREFIX "layer "

static ShoalLayer *
layer_new (ShoalNet *net, const char *name, const ShoalLayerOps *ops, const char *group)
{
  ShoalLayer *layer = g_new0 (ShoalLayer, 1);
  layer->name = g_strdup (name);
  layer->ops = ops;
  layer->conf = net->conf;
  layer->group = g_strdup (group);
  layer->ctx = &net->ctx;
  layer->store = net->store;
  layer->loss_weight = 1.0f;
  layer->priv = ops->priv_size ? g_malloc0 (ops->priv_size) : NULL;
  return layer;
}

static void
layer_free (ShoalLayer *layer)
{
  if (layer->ctx->gpu != NULL && layer->ops->gpu != NULL && layer->ops->gpu->finalize != NULL)
    layer->ops->gpu->finalize (layer);
  if (layer->ops->finalize != NULL)
    layer->ops->finalize (layer);
  shoal_tensor_clear (&layer->out);
  shoal_tensor_clear (&layer->grad);
  shoal_tensor_clear (&layer->label);
  g_free (layer->priv);
  g_free (layer->name);
  g_free (layer->group);
  g_free (layer);
}

static void
free_events (ShoalEvent **events, guint n)
{
  for (guint i = 0; events != NULL && i < n; i++)
    shoal_event_free (events[i]);
  g_free (events);
}

void
shoal_net_free (ShoalNet *net)
{
  if (net == NULL)
    return;
  /* device memory is freed on its own device */
  shoal_device_activate (net->ctx.device);
  if (net->ctx.gpu != NULL)
    {
      GError *ignored = NULL;
      shoal_device_context_sync (net->ctx.gpu, &ignored);
      g_clear_error (&ignored);
    }
  for (guint i = 0; i < net->layers->len; i++)
    layer_free (g_ptr_array_index (net->layers, i));
  free_events (net->uploaded, net->layers->len);
  free_events (net->computed, net->layers->len);
  free_events (net->downloaded, net->layers->len);
  shoal_event_free (net->manual_upload);
  g_ptr_array_free (net->layers, TRUE);
  shoal_param_store_free (net->store);
  shoal_device_host_free (net->ctx.device, net->staging);
  shoal_device_context_free (net->ctx.gpu);
  g_clear_error (&net->device_error);
  g_free (net);
}

/* The <param>_<suffix> keys of the params a layer type declares, as an
 * option table of their own so that their values are checked like every
 * other key's (shoal_layer_declare_param reads them without checks).
 * Free with param_options_free. */
static ShoalOption *
param_options_new (const ShoalLayerOps *ops)
{
  GArray *table = g_array_new (TRUE, TRUE, sizeof (ShoalOption));
  for (const char *const *p = ops->param_names; p != NULL && *p != NULL; p++)
    for (const ShoalOption *opt = shoal_param_options; opt->key != NULL; opt++)
      {
        ShoalOption o = *opt;
        o.key = g_strconcat (*p, "_", opt->key, NULL);
        if (o.default_value == NULL)
          o.default_value = "";  /* no <param>_init: the layer's own default */
        g_array_append_val (table, o);
      }
  return (ShoalOption *) g_array_free (table, FALSE);
}

static void
param_options_free (ShoalOption *table)
{
  for (ShoalOption *o = table; o->key != NULL; o++)
    g_free ((char *) o->key);
  g_free (table);
}

/* Reads the [layer NAME] groups in file order, checking names, types and keys. */
static gboolean
read_layers (ShoalNet *net, GPtrArray *out, GError **error)
{
  GKeyFile *kf = shoal_conf_keyfile (net->conf);
  char **groups = g_key_file_get_groups (kf, NULL);
  gboolean ok = TRUE;
  static const ShoalOption *const common[] = { shoal_layer_common_options, NULL };

  for (int g = 0; ok && groups[g] != NULL; g++)
    {
      const char *group = groups[g];
      if (!g_str_has_prefix (group, LAYER_GROUP_PREFIX))
        continue;
      char *name = g_strstrip (g_strdup (group + strlen (LAYER_GROUP_PREFIX)));
      if (*name == '\0' || strpbrk (name, "./, \t") != NULL)
        {
          shoal_conf_error (net->conf, error, group, NULL,
                            "layer name '%s' must be non-empty without '.', '/', ',' or spaces", name);
          ok = FALSE;
        }
      for (guint i = 0; ok && i < out->len; i++)
        if (strcmp (((ShoalLayer *) g_ptr_array_index (out, i))->name, name) == 0)
          {
            shoal_conf_error (net->conf, error, group, NULL, "layer '%s' is defined twice", name);
            ok = FALSE;
          }
      char *type = NULL;
      if (ok)
        {
          type = g_key_file_get_value (kf, group, "type", NULL);
          if (type == NULL)
            {
              shoal_conf_error (net->conf, error, group, NULL, "missing required key 'type'");
              ok = FALSE;
            }
        }
      const ShoalLayerOps *ops = NULL;
      if (ok)
        {
          g_strstrip (type);
          ops = shoal_layer_lookup (type);
          if (ops == NULL)
            {
              shoal_conf_error (net->conf, error, group, "type", "unknown layer type '%s'", type);
              ok = FALSE;
            }
        }
      if (ok)
        {
          ShoalOption *param_options = param_options_new (ops);
          const ShoalOption *const tables[] = { shoal_layer_common_options, ops->options,
                                                param_options, NULL };
          ok = shoal_conf_check_group (net->conf, group, tables, NULL, NULL, error);
          param_options_free (param_options);
        }
      if (ok)
        {
          ShoalLayer *layer = layer_new (net, name, ops, group);
          layer->partition_dim = (int) shoal_conf_get_int (net->conf, group, common[0], "partition_dim");
          layer->loss_weight = (float) shoal_conf_get_float (net->conf, group, common[0], "loss_weight");
          g_ptr_array_add (out, layer);
        }
      g_free (type);
      g_free (name);
    }
  g_strfreev (groups);
  if (ok && out->len == 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "%s: no [layer NAME] groups",
                   shoal_conf_origin (net->conf));
      ok = FALSE;
    }
  return ok;
}

static ShoalLayer *
find_layer (GPtrArray *layers, const char *name)
{
  for (guint i = 0; i < layers->len; i++)
    {
      ShoalLayer *l = g_ptr_array_index (layers, i);
      if (strcmp (l->name, name) == 0)
        return l;
    }
  return NULL;
}

static gboolean
connect_sources (ShoalNet *net, GPtrArray *layers, GError **error)
{
  static const ShoalOption *common = shoal_layer_common_options;
  for (guint i = 0; i < layers->len; i++)
    {
      ShoalLayer *layer = g_ptr_array_index (layers, i);
      gsize n = 0;
      char **names = shoal_conf_get_string_list (net->conf, layer->group, common, "src", &n);
      gboolean ok = TRUE;
      if ((int) n < layer->ops->min_srcs || (int) n > layer->ops->max_srcs)
        {
          if (layer->ops->min_srcs == layer->ops->max_srcs)
            shoal_conf_error (net->conf, error, layer->group, "src",
                              "a %s layer takes %d source%s, got %zu", layer->ops->type,
                              layer->ops->min_srcs, layer->ops->min_srcs == 1 ? "" : "s", n);
          else
            shoal_conf_error (net->conf, error, layer->group, "src",
                              "a %s layer takes %d to %d sources, got %zu", layer->ops->type,
                              layer->ops->min_srcs, layer->ops->max_srcs, n);
          ok = FALSE;
        }
      for (gsize s = 0; ok && s < n; s++)
        {
          ShoalLayer *src = find_layer (layers, names[s]);
          if (src == NULL)
            {
              shoal_conf_error (net->conf, error, layer->group, "src", "unknown source layer '%s'",
                                names[s]);
              ok = FALSE;
            }
          else if (src == layer)
            {
              shoal_conf_error (net->conf, error, layer->group, "src", "a layer cannot feed itself");
              ok = FALSE;
            }
          else
            layer->srcs[layer->nsrcs++] = src;
        }
      g_strfreev (names);
      if (!ok)
        return FALSE;
    }
  return TRUE;
}

/* Kahn's algorithm, stable in conf order; reports a cycle by its members. */
static gboolean
sort_topologically (ShoalNet *net, GPtrArray *layers, GError **error)
{
  guint n = layers->len;
  GHashTable *index = g_hash_table_new (g_direct_hash, g_direct_equal);
  int *pending = g_new0 (int, n);
  gboolean *placed = g_new0 (gboolean, n);
  GPtrArray *sorted = g_ptr_array_new ();

  for (guint i = 0; i < n; i++)
    g_hash_table_insert (index, g_ptr_array_index (layers, i), GUINT_TO_POINTER (i));
  for (guint i = 0; i < n; i++)
    pending[i] = ((ShoalLayer *) g_ptr_array_index (layers, i))->nsrcs;

  gboolean progress = TRUE;
  while (sorted->len < n && progress)
    {
      progress = FALSE;
      for (guint i = 0; i < n; i++)
        {
          if (placed[i] || pending[i] > 0)
            continue;
          ShoalLayer *layer = g_ptr_array_index (layers, i);
          placed[i] = TRUE;
          progress = TRUE;
          g_ptr_array_add (sorted, layer);
          for (guint j = 0; j < n; j++)
            {
              ShoalLayer *other = g_ptr_array_index (layers, j);
              for (int s = 0; s < other->nsrcs; s++)
                if (other->srcs[s] == layer)
                  pending[j]--;
            }
          break; /* restart from the top to keep conf order */
        }
    }

  gboolean ok = sorted->len == n;
  if (!ok)
    {
      /* Unplaced layers are on a cycle or below one.  Every unplaced layer
       * has an unplaced source, so walking up the first unplaced source
       * from any of them must come back to a layer already seen: the
       * layers from there on are a cycle.  Name it in conf order. */
      int *seen = g_new0 (int, n);  /* walk position + 1 */
      guint at = 0;
      while (placed[at])
        at++;
      for (int pos = 1; seen[at] == 0; pos++)
        {
          seen[at] = pos;
          ShoalLayer *l = g_ptr_array_index (layers, at);
          for (int s = 0; s < l->nsrcs; s++)
            {
              guint j = GPOINTER_TO_UINT (g_hash_table_lookup (index, l->srcs[s]));
              if (!placed[j])
                {
                  at = j;
                  break;
                }
            }
        }
      int cycle_from = seen[at];
      GString *members = g_string_new (NULL);
      ShoalLayer *first = NULL;
      for (guint i = 0; i < n; i++)
        if (seen[i] >= cycle_from)
          {
            ShoalLayer *l = g_ptr_array_index (layers, i);
            first = first ? first : l;
            g_string_append_printf (members, "%s%s", members->len ? ", " : "", l->name);
          }
      shoal_conf_error (net->conf, error, first->group, "src", "the layers %s form a cycle",
                        members->str);
      g_string_free (members, TRUE);
      g_free (seen);
    }
  else
    for (guint i = 0; i < n; i++)
      g_ptr_array_index (layers, i) = g_ptr_array_index (sorted, i);

  g_ptr_array_free (sorted, TRUE);
  g_free (placed);
  g_free (pending);
  g_hash_table_destroy (index);
  return ok;
}

/* Where one output feeds several sources, put a split layer between. */
static void
insert_splits (ShoalNet *net, GPtrArray *layers)
{
  for (guint i = 0; i < layers->len; i++)
    {
      ShoalLayer *layer = g_ptr_array_index (layers, i);
      int consumers = 0;
      for (guint j = i + 1; j < layers->len; j++)
        {
          ShoalLayer *other = g_ptr_array_index (layers, j);
          for (int s = 0; s < other->nsrcs; s++)
            consumers += other->srcs[s] == layer;
        }
      if (consumers < 2)
        continue;
      char *name = g_strconcat (layer->name, "/split", NULL);
      ShoalLayer *split = layer_new (net, name, &shoal_layer_split_ops, layer->group);
      g_free (name);
      split->srcs[0] = layer;
      split->nsrcs = 1;
      split->partition_dim = layer->partition_dim;
      shoal_split_set_branches (split, consumers);
      for (guint j = i + 1; j < layers->len; j++)
        {
          ShoalLayer *other = g_ptr_array_index (layers, j);
          for (int s = 0; s < other->nsrcs; s++)
            if (other->srcs[s] == layer)
              other->srcs[s] = split;
        }
      g_ptr_array_insert (layers, (gint) i + 1, split);
      i++;
    }
}

/* A loss's or metric's 1-element out stays on the host on a GPU net:
 * the net and the workers read it after every forward. */
static gboolean
keeps_host_out (const ShoalLayer *layer)
{
  return (layer->ops->flags & (SHOAL_LAYER_LOSS | SHOAL_LAYER_METRIC)) != 0;
}

/* The GPU part of a layer's set-up, after ops->setup: out and grad in
 * device memory, then the layer's own GPU set-up, then a check that
 * nothing the next layers read was left on the host. */
static gboolean
setup_layer_gpu (ShoalNet *net, ShoalLayer *layer, GError **error)
{
  const ShoalLayerGpuOps *gpu = layer->ops->gpu;
  ShoalDevice dev = net->ctx.device;
  ShoalDevice cpu = { SHOAL_DEVICE_CPU, 0 };
  char *where = shoal_device_to_string (dev);
  gboolean ok = TRUE;

  if (gpu == NULL || gpu->forward == NULL || (layer->ops->backward != NULL && gpu->backward == NULL))
    {
      shoal_layer_error (layer, error, "type",
                         "layer '%s' (type %s) has no GPU path, and this net runs on %s "
                         "(a GPU worker never falls back to the CPU): run this worker on the CPU "
                         "or use layers that have one (`shoal layers`)",
                         layer->name, layer->ops->type, where);
      ok = FALSE;
    }
  if (ok)
    {
      GError *local = NULL;
      if (layer->out.data == NULL)
        ok = shoal_tensor_alloc_on (&layer->out, &layer->out.shape,
                                    keeps_host_out (layer) ? cpu : dev, &local);
      if (ok && layer->needs_grad && layer->grad.data == NULL && layer->ops != &shoal_layer_split_ops)
        ok = shoal_tensor_alloc_on (&layer->grad, &layer->out.shape, dev, &local);
      if (!ok)
        {
          shoal_layer_error (layer, error, NULL, "layer '%s': %s", layer->name, local->message);
          g_error_free (local);
        }
    }
  if (ok && gpu->setup != NULL)
    {
      GError *local = NULL;
      ok = gpu->setup (layer, &local);
      if (!ok && local == NULL)
        shoal_layer_error (layer, &local, NULL, "GPU set-up of layer '%s' on %s failed", layer->name,
                           where);
      if (!ok)
        g_propagate_error (error, local);
    }
  gboolean out_on_host = !keeps_host_out (layer) && layer->out.device.kind != dev.kind;
  gboolean labels_on_host = layer->label.data != NULL && layer->label.device.kind != dev.kind;
  if (ok && (out_on_host || labels_on_host))
    {
      shoal_layer_error (layer, error, NULL, "GPU set-up of layer '%s' (%s) left its %s on the host",
                         layer->name, layer->ops->type, out_on_host ? "output" : "labels");
      ok = FALSE;
    }
  g_free (where);
  return ok;
}

/* Every dim positive and the count within an int: layers index rows and
 * columns with int, and a product that wrapped would allocate too little. */
static gboolean
shape_fits (const ShoalShape *shape)
{
  guint64 count = 1;
  for (int i = 0; i < shape->ndim; i++)
    {
      if (shape->dim[i] <= 0)
        return FALSE;
      count *= (guint64) shape->dim[i];
      if (count > G_MAXINT32)
        return FALSE;
    }
  return TRUE;
}

static gboolean
setup_layers (ShoalNet *net, GError **error)
{
  for (guint i = 0; i < net->layers->len; i++)
    {
      ShoalLayer *layer = g_ptr_array_index (net->layers, i);
      GError *local = NULL;

      /* a stream per (layer, worker, group) so dropout masks differ by worker */
      guint64 stream = g_str_hash (layer->name) ^ ((guint64) net->ctx.group << 40)
                       ^ ((guint64) net->ctx.worker << 20);
      shoal_rng_seed (&layer->rng, net->ctx.seed, stream);

      if (!layer->ops->setup (layer, &local))
        {
          if (local == NULL)
            shoal_conf_error (net->conf, &local, layer->group, NULL, "set-up of layer '%s' failed",
                              layer->name);
          g_propagate_error (error, local);
          return FALSE;
        }
      if (layer->out.shape.ndim == 0)
        {
          shoal_layer_error (layer, error, NULL, "layer '%s' (%s) set no output shape", layer->name,
                             layer->ops->type);
          return FALSE;
        }
      if (!shape_fits (&layer->out.shape))
        {
          char *shape = shoal_shape_to_string (&layer->out.shape);
          shoal_layer_error (layer, error, NULL, "output %s is empty or holds more than 2^31 values",
                             shape);
          g_free (shape);
          return FALSE;
        }
      if ((layer->ops->flags & SHOAL_LAYER_INPUT) && net->input == NULL)
        net->input = layer;
      if (layer->nparams > 0)
        layer->needs_grad = TRUE;
      for (int s = 0; s < layer->nsrcs; s++)
        layer->needs_grad |= layer->srcs[s]->needs_grad;
      if (net->ctx.gpu != NULL)
        {
          if (!setup_layer_gpu (net, layer, error))
            return FALSE;
          continue;
        }
      if (layer->out.data == NULL)
        shoal_tensor_alloc (&layer->out, &layer->out.shape);
      /* consumers write d/d out here; a split's consumers use its branch buffers */
      if (layer->needs_grad && layer->grad.data == NULL && layer->ops != &shoal_layer_split_ops)
        shoal_tensor_alloc (&layer->grad, &layer->out.shape);
    }

  /* where backward writes each source's gradient */
  for (guint i = 0; i < net->layers->len; i++)
    {
      ShoalLayer *layer = g_ptr_array_index (net->layers, i);
      for (int s = 0; s < layer->nsrcs; s++)
        {
          ShoalLayer *src = layer->srcs[s];
          layer->src_grad[s] = NULL;
          if (!src->needs_grad || layer->ops->backward == NULL)
            continue;
          if (src->ops == &shoal_layer_split_ops)
            {
              /* the branch index is this edge's rank among the split's consumers */
              int branch = 0;
              for (guint j = 0; j < net->layers->len; j++)
                {
                  ShoalLayer *other = g_ptr_array_index (net->layers, j);
                  for (int t = 0; t < other->nsrcs; t++)
                    {
                      if (other == layer && t == s)
                        goto found;
                      branch += other->srcs[t] == src;
                    }
                }
            found:
              layer->src_grad[s] = shoal_split_branch_grad (src, branch);
            }
          else
            layer->src_grad[s] = &src->grad;
        }
    }
  return TRUE;
}

static double forward_gpu (ShoalNet *net, ShoalPhase phase);
static void backward_gpu (ShoalNet *net, ShoalParamsReadyFunc ready, gpointer user_data);
static gboolean prepare_gpu (ShoalNet *net, GError **error);

ShoalNet *
shoal_net_new (ShoalConf *conf, const ShoalNetOptions *opts, GError **error)
{
  ShoalNet *net = g_new0 (ShoalNet, 1);
  net->conf = conf;
  net->layers = g_ptr_array_new ();
  net->store = shoal_param_store_new ();
  net->ctx.shard_count = 1;
  if (opts != NULL)
    {
      net->ctx.seed = opts->seed;
      net->ctx.shard_index = opts->shard_index;
      net->ctx.shard_count = opts->shard_count > 0 ? opts->shard_count : 1;
      net->ctx.worker = opts->worker;
      net->ctx.group = opts->group;
      net->ctx.device = opts->device;
      net->ctx.cd_k = opts->cd_k;
    }
  if (!shoal_device_is_cpu (net->ctx.device))
    {
      /* checks the device first, then makes it current */
      net->ctx.gpu = shoal_device_context_new (net->ctx.device, error);
      if (net->ctx.gpu == NULL)
        {
          g_prefix_error (error, "%s: ", shoal_conf_origin (conf));
          net->ctx.device = (ShoalDevice) { SHOAL_DEVICE_CPU, 0 };
          shoal_net_free (net);
          return NULL;
        }
      net->upload_every_forward = TRUE;
    }

  if (!read_layers (net, net->layers, error) || !connect_sources (net, net->layers, error)
      || !sort_topologically (net, net->layers, error))
    {
      shoal_net_free (net);
      return NULL;
    }
  insert_splits (net, net->layers);
  if (!setup_layers (net, error))
    {
      shoal_net_free (net);
      return NULL;
    }
  shoal_param_store_allocate (net->store);
  if (net->ctx.gpu != NULL && !prepare_gpu (net, error))
    {
      shoal_net_free (net);
      return NULL;
    }
  return net;
}

/* Out's rows (and grad's) follow the first source's, unless the layer sets them. */
static void
follow_rows (ShoalLayer *layer)
{
  if (!(layer->ops->flags & SHOAL_LAYER_OWN_ROWS) && layer->nsrcs > 0)
    {
      int rows = shoal_tensor_rows (&layer->srcs[0]->out);
      shoal_tensor_set_rows (&layer->out, rows);
      if (layer->grad.data != NULL)
        shoal_tensor_set_rows (&layer->grad, rows);
    }
}

double
shoal_net_forward (ShoalNet *net, ShoalPhase phase)
{
  if (net->ctx.gpu != NULL)
    return forward_gpu (net, phase);
  double loss = 0;
  for (guint i = 0; i < net->layers->len; i++)
    {
      ShoalLayer *layer = g_ptr_array_index (net->layers, i);
      follow_rows (layer);
      layer->ops->forward (layer, phase);
      if (layer->ops->flags & SHOAL_LAYER_LOSS)
        loss += layer->loss_weight * layer->out.data[0];
    }
  return loss;
}

void
shoal_net_backward_notify (ShoalNet *net, ShoalParamsReadyFunc ready, gpointer user_data)
{
  if (net->ctx.gpu != NULL)
    {
      backward_gpu (net, ready, user_data);
      return;
    }
  for (guint i = net->layers->len; i-- > 0;)
    {
      ShoalLayer *layer = g_ptr_array_index (net->layers, i);
      if (!layer->needs_grad || layer->ops->backward == NULL)
        continue;
      layer->ops->backward (layer);
      if (ready != NULL && layer->nparams > 0)
        ready (layer, user_data);
    }
}

void
shoal_net_backward (ShoalNet *net)
{
  shoal_net_backward_notify (net, NULL, NULL);
}

ShoalParamStore *
shoal_net_params (ShoalNet *net)
{
  return net->store;
}

guint
shoal_net_n_layers (ShoalNet *net)
{
  return net->layers->len;
}

ShoalLayer *
shoal_net_layer (ShoalNet *net, guint i)
{
  g_return_val_if_fail (i < net->layers->len, NULL);
  return g_ptr_array_index (net->layers, i);
}

ShoalLayer *
shoal_net_find (ShoalNet *net, const char *name)
{
  return find_layer (net->layers, name);
}

ShoalLayer *
shoal_net_input (ShoalNet *net)
{
  return net->input;
}

guint
shoal_net_metrics (ShoalNet *net, ShoalMetric *out, guint n)
{
  guint k = 0;
  for (guint i = 0; i < net->layers->len && k < n; i++)
    {
      ShoalLayer *layer = g_ptr_array_index (net->layers, i);
      if (!(layer->ops->flags & (SHOAL_LAYER_LOSS | SHOAL_LAYER_METRIC)))
        continue;
      out[k].layer = layer->name;
      out[k].type = layer->ops->type;
      out[k].is_loss = (layer->ops->flags & SHOAL_LAYER_LOSS) != 0;
      out[k].value = layer->out.data[0];
      k++;
    }
  return k;
}

int
shoal_net_batch_rows (ShoalNet *net)
{
  return net->input ? shoal_tensor_rows (&net->input->out) : 0;
}

/* Records: u32 name length, name, u32 blob length, blob (the layer's own
 * state, or its 16-byte rng). */
GBytes *
shoal_net_save_state (ShoalNet *net)
{
  GByteArray *b = g_byte_array_new ();
  for (guint i = 0; i < net->layers->len; i++)
    {
      ShoalLayer *layer = g_ptr_array_index (net->layers, i);
      GBytes *own = layer->ops->save_state ? layer->ops->save_state (layer)
                                           : g_bytes_new (&layer->rng, sizeof layer->rng);
      gsize len = 0;
      gconstpointer data = g_bytes_get_data (own, &len);
      guint32 nlen = (guint32) strlen (layer->name), blen = (guint32) len;
      g_byte_array_append (b, (guint8 *) &nlen, sizeof nlen);
      g_byte_array_append (b, (guint8 *) layer->name, nlen);
      g_byte_array_append (b, (guint8 *) &blen, sizeof blen);
      g_byte_array_append (b, data, blen);
      g_bytes_unref (own);
    }
  return g_byte_array_free_to_bytes (b);
}

gboolean
shoal_net_load_state (ShoalNet *net, GBytes *state, GError **error)
{
  gsize len = 0;
  const guint8 *p = g_bytes_get_data (state, &len), *end = p + len;
  guint found = 0;
  while (p < end)
    {
      guint32 nlen, blen;
      if ((gsize) (end - p) < sizeof nlen)
        break;
      memcpy (&nlen, p, sizeof nlen);
      p += sizeof nlen;
      if ((gsize) (end - p) < (gsize) nlen + sizeof blen)
        break;
      char *name = g_strndup ((const char *) p, nlen);
      p += nlen;
      memcpy (&blen, p, sizeof blen);
      p += sizeof blen;
      if ((gsize) (end - p) < blen)
        {
          g_free (name);
          break;
        }
      ShoalLayer *layer = find_layer (net->layers, name);
      g_free (name);
      if (layer == NULL)
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                       "the checkpointed state names a layer this net does not have");
          return FALSE;
        }
      if (layer->ops->load_state != NULL)
        {
          GBytes *own = g_bytes_new (p, blen);
          gboolean ok = layer->ops->load_state (layer, own, error);
          g_bytes_unref (own);
          if (!ok)
            return FALSE;
        }
      else if (blen == sizeof layer->rng)
        memcpy (&layer->rng, p, sizeof layer->rng);
      p += blen;
      found++;
    }
  if (p != end || found != net->layers->len)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                   "the checkpointed layer state is damaged or of another net (%u of %u layers)", found,
                   net->layers->len);
      return FALSE;
    }
  return TRUE;
}

void
shoal_net_log_summary (ShoalNet *net)
{
  size_t total = 0;
  for (guint i = 0; i < net->layers->len; i++)
    {
      ShoalLayer *layer = g_ptr_array_index (net->layers, i);
      char *shape = shoal_shape_to_string (&layer->out.shape);
      size_t nparams = 0;
      for (int p = 0; p < layer->nparams; p++)
        nparams += layer->params[p]->count;
      total += nparams;
      g_message ("  %-14s %-14s out %-16s params %zu", layer->name, layer->ops->type, shape, nparams);
      g_free (shape);
    }
  g_message ("  %zu parameters (%.1f MiB)", total, total * 4.0 / (1 << 20));
}

/* ---- GPU nets -------------------------------------------------------------
 * The layers run on the context's compute stream.  Param values go up and
 * gradients come down on its copy stream, ordered by events, so that a
 * layer waits only for its own params in forward and a layer's gradient
 * travels while the layers below compute in backward.  Every entry point
 * returns with both streams idle, so the host buffers are the caller's
 * again (param clients write values and read grads between steps). */

/* Keeps the first device error and reports it once. */
static void
device_failed (ShoalNet *net, GError *error)
{
  if (net->device_error == NULL)
    {
      char *where = shoal_device_to_string (net->ctx.device);
      g_critical ("net on %s: %s", where, error->message);
      g_free (where);
      net->device_error = error;
    }
  else
    g_error_free (error);
}

static gboolean
prepare_gpu (ShoalNet *net, GError **error)
{
  ShoalDevice dev = net->ctx.device;
  guint n = net->layers->len;

  if (!shoal_param_store_allocate_device (net->store, dev, error))
    return FALSE;
  net->staging = shoal_device_host_alloc (dev, MAX (net->store->total, (size_t) 1) * sizeof (float),
                                          error);
  if (net->staging == NULL)
    return FALSE;
  net->uploaded = g_new0 (ShoalEvent *, n);
  net->computed = g_new0 (ShoalEvent *, n);
  net->downloaded = g_new0 (ShoalEvent *, n);
  net->manual_upload = shoal_event_new (dev, error);
  if (net->manual_upload == NULL)
    return FALSE;
  for (guint i = 0; i < n; i++)
    {
      ShoalLayer *layer = g_ptr_array_index (net->layers, i);
      if (layer->nparams == 0)
        continue;
      if ((net->uploaded[i] = shoal_event_new (dev, error)) == NULL
          || (net->computed[i] = shoal_event_new (dev, error)) == NULL
          || (net->downloaded[i] = shoal_event_new (dev, error)) == NULL)
        return FALSE;
    }
  return shoal_device_context_ready (net->ctx.gpu, error);
}

/* Every layer's param values, host -> device, in layer order. */
static void
upload_all (ShoalNet *net)
{
  ShoalStream *copy = shoal_device_context_copy (net->ctx.gpu);
  for (guint i = 0; i < net->layers->len; i++)
    {
      size_t b, e;
      if (net->uploaded[i] == NULL || !shoal_layer_param_range (g_ptr_array_index (net->layers, i), &b, &e))
        continue;
      shoal_stream_copy (copy, net->store->dev_values + b, net->store->values + b, (e - b) * sizeof (float));
      shoal_event_record (net->uploaded[i], copy);
    }
}

static double
forward_gpu (ShoalNet *net, ShoalPhase phase)
{
  ShoalStream *compute = shoal_device_context_compute (net->ctx.gpu);
  double loss = 0;

  shoal_device_activate (net->ctx.device);
  if (net->upload_every_forward)
    upload_all (net);
  if (net->manual_pending)
    {
      shoal_stream_wait (compute, net->manual_upload);
      net->manual_pending = FALSE;
    }
  for (guint i = 0; i < net->layers->len; i++)
    {
      ShoalLayer *layer = g_ptr_array_index (net->layers, i);
      follow_rows (layer);
      if (net->upload_every_forward && net->uploaded[i] != NULL)
        shoal_stream_wait (compute, net->uploaded[i]);
      layer->ops->gpu->forward (layer, phase);
    }
  GError *error = NULL;
  if (!shoal_device_context_sync (net->ctx.gpu, &error))
    {
      device_failed (net, error);
      return NAN;
    }
  for (guint i = 0; i < net->layers->len; i++)
    {
      ShoalLayer *layer = g_ptr_array_index (net->layers, i);
      if (layer->ops->flags & SHOAL_LAYER_LOSS)
        loss += layer->loss_weight * layer->out.data[0];
    }
  return loss;
}

/* Adds the downloaded gradients of the pending layers into the host
 * grads, oldest first, and hands each layer to `ready`; without `block`
 * only while their copies are done. */
static void
deliver (ShoalNet *net, GQueue *pending, gboolean block, ShoalParamsReadyFunc ready,
         gpointer user_data)
{
  while (!g_queue_is_empty (pending))
    {
      guint i = GPOINTER_TO_UINT (g_queue_peek_head (pending)) - 1;
      ShoalLayer *layer = g_ptr_array_index (net->layers, i);
      GError *error = NULL;
      if (!block && !shoal_event_done (net->downloaded[i]))
        return;
      g_queue_pop_head (pending);
      if (!shoal_event_sync (net->downloaded[i], &error))
        device_failed (net, error);
      else
        {
          size_t b, e;
          shoal_layer_param_range (layer, &b, &e);
          float *restrict g = net->store->grads + b;
          const float *restrict d = net->staging + b;
          for (size_t j = 0; j < e - b; j++)
            g[j] += d[j];
        }
      if (ready != NULL)
        ready (layer, user_data);
    }
}

static void
backward_gpu (ShoalNet *net, ShoalParamsReadyFunc ready, gpointer user_data)
{
  ShoalStream *compute = shoal_device_context_compute (net->ctx.gpu);
  ShoalStream *copy = shoal_device_context_copy (net->ctx.gpu);
  float *dev_grads = net->store->dev_grads;
  GQueue pending = G_QUEUE_INIT;

  shoal_device_activate (net->ctx.device);
  for (guint i = net->layers->len; i-- > 0;)
    {
      ShoalLayer *layer = g_ptr_array_index (net->layers, i);
      size_t b, e;
      if (!layer->needs_grad || layer->ops->backward == NULL)
        continue;
      layer->ops->gpu->backward (layer);
      if (shoal_layer_param_range (layer, &b, &e))
        {
          size_t bytes = (e - b) * sizeof (float);
          shoal_event_record (net->computed[i], compute);
          shoal_stream_wait (copy, net->computed[i]);
          shoal_stream_copy (copy, net->staging + b, dev_grads + b, bytes);
          shoal_stream_zero (copy, dev_grads + b, bytes);
          shoal_event_record (net->downloaded[i], copy);
          g_queue_push_tail (&pending, GUINT_TO_POINTER (i + 1));
        }
      deliver (net, &pending, FALSE, ready, user_data);
    }
  deliver (net, &pending, TRUE, ready, user_data);
  GError *error = NULL;
  if (!shoal_device_context_sync (net->ctx.gpu, &error))
    device_failed (net, error);
}

ShoalDevice
shoal_net_device (ShoalNet *net)
{
  return net->ctx.device;
}

void
shoal_net_set_param_upload (ShoalNet *net, gboolean every_forward)
{
  net->upload_every_forward = every_forward && net->ctx.gpu != NULL;
}

void
shoal_net_upload_params (ShoalNet *net, size_t begin, size_t end)
{
  if (net->ctx.gpu == NULL || end <= begin)
    return;
  g_return_if_fail (end <= net->store->total);
  ShoalStream *copy = shoal_device_context_copy (net->ctx.gpu);
  shoal_device_activate (net->ctx.device);
  shoal_stream_copy (copy, net->store->dev_values + begin, net->store->values + begin,
                     (end - begin) * sizeof (float));
  shoal_event_record (net->manual_upload, copy);
  net->manual_pending = TRUE;
}

gboolean
shoal_net_device_error (ShoalNet *net, GError **error)
{
  if (net->device_error == NULL)
    return TRUE;
  g_propagate_error (error, g_error_copy (net->device_error));
  return FALSE;
}
