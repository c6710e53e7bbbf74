/* Building a net from a conf: graph checks, topological order, split
 * insertion for fan-out, set-up and memory; and running it on the CPU.
 * The partitioner builds on the same pieces to make the sub-nets of a
 * worker group.
 *
 * A net on a GPU runs the same graph through the layers' GPU paths; what
 * only it needs (param traffic between the host store and the device,
 * overlapped with compute through events) is net_gpu.c. */
#include "net/net_priv.h"

#include <math.h>
#include <string.h>

#include "core/error.h"
#include "layers/split.h"

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
  if (layer->gpu != NULL && layer->gpu->finalize != NULL)
    layer->gpu->finalize (layer);
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
      shoal_net_gpu_release (net);
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
  g_free (net->snapshot);
  shoal_memory_budget_release (net->budget, net->charged);
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
  if (!shoal_conf_check_sections (net->conf, error))
    return FALSE;
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

/* A layer's output (or its gradient) on the CPU: its size comes from the
 * conf, so running out of memory is an error naming the layer. */
static gboolean
alloc_out (ShoalLayer *layer, ShoalTensor *t, const char *what, GError **error)
{
  return shoal_layer_alloc_tensor (layer, t, &layer->out.shape, what, error);
}

/* The param store; out of memory is placed at the layer of the largest
 * param, the likeliest culprit. */
static gboolean
allocate_params (ShoalNet *net, GError **error)
{
  GError *local = NULL;
  shoal_memory_uncharge (net->charge, net->params_charged);
  net->params_charged = 0;
  if (shoal_param_store_allocate (net->store, &local))
    return TRUE;
  const ShoalParam *big = shoal_param_store_largest (net->store);
  for (guint i = 0; big != NULL && i < net->layers->len; i++)
    {
      ShoalLayer *layer = g_ptr_array_index (net->layers, i);
      for (int j = 0; j < layer->nparams; j++)
        if (layer->params[j] == big)
          {
            GError *placed = NULL;
            shoal_layer_error (layer, &placed, NULL, "%s", local->message);
            g_set_error_literal (error, local->domain, local->code, placed->message);
            g_error_free (placed);
            g_error_free (local);
            return FALSE;
          }
    }
  g_propagate_error (error, local);
  return FALSE;
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

/* A layer whose set-up allocated with an allocator that cannot fail
 * (shoal_alloc_floats) was charged past the budget: refused here, named. */
static gboolean
within_budget (ShoalNet *net, ShoalLayer *layer, GError **error)
{
  ShoalMemoryCharge *charge = net->charge;
  if (charge == NULL || charge->over_total == 0)
    return TRUE;
  GError *local = NULL;
  shoal_memory_over_error (charge->budget, &local, charge->over_by, charge->over_total);
  shoal_layer_error_nomem (layer, error, local, "set-up");
  return FALSE;
}

/* The params a layer declared are allocated later, in one store with all
 * the others; their values and gradients are charged now, with the
 * layer, so that the layer that crosses the budget is the one named.
 * allocate_params gives this back and charges the store itself. */
static gboolean
charge_params (ShoalNet *net, ShoalLayer *layer, size_t floats, GError **error)
{
  GError *local = NULL;
  guint64 bytes = (guint64) floats * sizeof (float) * 2;
  if (floats == 0 || shoal_memory_charge (net->charge, bytes, FALSE, &local))
    {
      net->params_charged += floats == 0 ? 0 : bytes;
      return TRUE;
    }
  shoal_layer_error_nomem (layer, error, local, "params and their gradients");
  return FALSE;
}

/* A stream per (layer, worker, group) so dropout masks differ by worker. */
static void
seed_layer (ShoalNet *net, ShoalLayer *layer)
{
  guint64 stream = g_str_hash (layer->name) ^ ((guint64) net->ctx.group << 40) ^ ((guint64) net->ctx.worker << 20);
  shoal_rng_seed (&layer->rng, net->ctx.seed, stream);
}

static gboolean
setup_layers (ShoalNet *net, GError **error)
{
  for (guint i = 0; i < net->layers->len; i++)
    {
      ShoalLayer *layer = g_ptr_array_index (net->layers, i);
      GError *local = NULL;

      seed_layer (net, layer);

      size_t params_before = net->store->total;
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
      if (!within_budget (net, layer, error)
          || !charge_params (net, layer, net->store->total - params_before, error))
        return FALSE;
      if ((layer->ops->flags & SHOAL_LAYER_INPUT) && net->input == NULL)
        net->input = layer;
      if (layer->nparams > 0)
        layer->needs_grad = TRUE;
      for (int s = 0; s < layer->nsrcs; s++)
        layer->needs_grad |= layer->srcs[s]->needs_grad;
      if (net->ctx.gpu != NULL)
        {
          if (!shoal_net_gpu_setup_layer (net, layer, error))
            return FALSE;
          continue;
        }
      if (layer->out.data == NULL && !alloc_out (layer, &layer->out, "output", error))
        return FALSE;
      /* consumers write d/d out here; a split's consumers use its branch buffers */
      if (layer->needs_grad && layer->grad.data == NULL && layer->ops != &shoal_layer_split_ops
          && !alloc_out (layer, &layer->grad, "output gradient", error))
        return FALSE;
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
              if (!shoal_split_branch_grad (src, branch, &layer->src_grad[s], error))
                return FALSE;
            }
          else
            layer->src_grad[s] = &src->grad;
        }
    }
  return TRUE;
}

/* A net that failed during set-up: what it was charged goes back with it. */
static void
net_free_charged (ShoalNet *net, ShoalMemoryCharge *charge)
{
  shoal_memory_uncharge (charge, net->params_charged);
  net->charged = charge->charged;
  charge->charged = 0;
  shoal_net_free (net);
}

static ShoalNet *
net_new (ShoalConf *conf, const ShoalNetOptions *opts, ShoalMemoryCharge *charge, GError **error)
{
  ShoalNet *net = g_new0 (ShoalNet, 1);
  net->conf = conf;
  net->charge = charge;
  net->budget = charge->budget;
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
          net_free_charged (net, charge);
          return NULL;
        }
      net->upload_every_forward = TRUE;
    }

  if (!read_layers (net, net->layers, error) || !connect_sources (net, net->layers, error)
      || !sort_topologically (net, net->layers, error))
    {
      net_free_charged (net, charge);
      return NULL;
    }
  insert_splits (net, net->layers);
  if (!setup_layers (net, error))
    {
      net_free_charged (net, charge);
      return NULL;
    }
  if (!allocate_params (net, error))
    {
      net_free_charged (net, charge);
      return NULL;
    }
  if (net->ctx.gpu != NULL && !shoal_net_gpu_prepare (net, error))
    {
      net_free_charged (net, charge);
      return NULL;
    }
  return net;
}

/* Everything the set-up allocates on this thread is charged to the
 * budget (core/memory_budget.c says why it is done in the allocator). */
ShoalNet *
shoal_net_new (ShoalConf *conf, const ShoalNetOptions *opts, GError **error)
{
  g_return_val_if_fail (conf != NULL, NULL);
  /* counts below zero mean nothing (a shard index outside 0 .. count - 1 is
   * the data layer's error, naming its conf line) */
  g_return_val_if_fail (opts == NULL || (opts->shard_count >= 0 && opts->cd_k >= 0), NULL);
  ShoalMemoryCharge charge;
  shoal_memory_charge_begin (&charge, opts != NULL ? opts->budget : NULL);
  ShoalNet *net = net_new (conf, opts, &charge, error);
  shoal_memory_charge_end (&charge);
  if (net != NULL)
    {
      net->charged = charge.charged;
      net->charge = NULL;
    }
  return net;
}

/* Out's rows (and grad's) follow the first source's, unless the layer sets them. */
void
shoal_net_follow_rows (ShoalLayer *layer)
{
  if (!(layer->ops->flags & SHOAL_LAYER_OWN_ROWS) && layer->nsrcs > 0)
    {
      int rows = shoal_tensor_rows (&layer->srcs[0]->out);
      shoal_tensor_set_rows (&layer->out, rows);
      if (layer->grad.data != NULL)
        shoal_tensor_set_rows (&layer->grad, rows);
    }
}

void
shoal_net_take_pending (ShoalNet *net)
{
  if (!net->step_pending)
    return;
  net->step_pending = FALSE;
  net->snapshot_unread = TRUE;
  net->snapshot_loss = net->ctx.gpu != NULL && net->params_resident ? shoal_net_gpu_finish_step (net)
                                                                    : net->pending_loss;
  if (net->snapshot == NULL)
    net->snapshot = g_new0 (float, net->layers->len);
  for (guint i = 0; i < net->layers->len; i++)
    {
      ShoalLayer *layer = g_ptr_array_index (net->layers, i);
      if (layer->ops->flags & (SHOAL_LAYER_LOSS | SHOAL_LAYER_METRIC))
        net->snapshot[i] = layer->out.data[0];
    }
}

/* A forward read at once: a late step not taken yet is taken first (the
 * next late call still returns it), and the metrics are the layers'
 * again. */
static void
read_now (ShoalNet *net)
{
  shoal_net_take_pending (net);
  net->snapshot_valid = FALSE;
}

static double forward_now (ShoalNet *net, ShoalPhase phase);

double
shoal_net_forward (ShoalNet *net, ShoalPhase phase)
{
  g_return_val_if_fail (net != NULL && (phase == SHOAL_PHASE_TRAIN || phase == SHOAL_PHASE_TEST), NAN);
  read_now (net);
  return forward_now (net, phase);
}

static double
forward_now (ShoalNet *net, ShoalPhase phase)
{
  net->train_outputs = phase == SHOAL_PHASE_TRAIN;
  if (net->ctx.gpu != NULL)
    return shoal_net_gpu_forward (net, phase);
  double loss = 0;
  for (guint i = 0; i < net->layers->len; i++)
    {
      ShoalLayer *layer = g_ptr_array_index (net->layers, i);
      shoal_net_follow_rows (layer);
      layer->ops->forward (layer, phase);
      if (layer->ops->flags & SHOAL_LAYER_LOSS)
        loss += layer->loss_weight * layer->out.data[0];
    }
  return loss;
}

double
shoal_net_train_step (ShoalNet *net, ShoalParamsReadyFunc ready, gpointer user_data)
{
  g_return_val_if_fail (net != NULL, NAN);
  read_now (net);
  net->snapshot_unread = FALSE;   /* a step read at once drops a late one not read */
  /* its backward follows its own train forward (the GPU path runs both
   * itself, past shoal_net_forward) */
  net->train_outputs = TRUE;
  if (net->ctx.gpu != NULL)
    return shoal_net_gpu_train_step (net, ready, user_data);
  double loss = forward_now (net, SHOAL_PHASE_TRAIN);
  shoal_net_backward_notify (net, ready, user_data);
  return loss;
}

double
shoal_net_train_step_late (ShoalNet *net, ShoalParamsReadyFunc ready, gpointer user_data, gboolean *previous)
{
  g_return_val_if_fail (net != NULL, NAN);
  net->train_outputs = TRUE;
  if (net->ctx.gpu != NULL && net->params_resident)
    /* takes the step before once this one's host work is done */
    shoal_net_gpu_train_step_begin (net, ready, user_data);
  else
    {
      shoal_net_take_pending (net);
      net->pending_loss = forward_now (net, SHOAL_PHASE_TRAIN);
      shoal_net_backward_notify (net, ready, user_data);
    }
  shoal_net_take_pending (net);   /* where begin could not reach that point */
  gboolean had = net->snapshot_unread;
  net->snapshot_unread = FALSE;
  net->snapshot_valid = had;
  net->step_pending = TRUE;
  if (previous != NULL)
    *previous = had;
  return had ? net->snapshot_loss : NAN;
}

gboolean
shoal_net_finish_step (ShoalNet *net, double *loss)
{
  g_return_val_if_fail (net != NULL, FALSE);
  shoal_net_take_pending (net);
  if (!net->snapshot_unread)
    return FALSE;
  net->snapshot_unread = FALSE;
  net->snapshot_valid = TRUE;
  if (loss != NULL)
    *loss = net->snapshot_loss;
  return TRUE;
}

/* Backward reads what the last forward left (a loss layer's
 * probabilities, dropout's mask, a recurrent layer's steps): with no
 * forward, or after a test forward, its gradients would be made of
 * another batch's or another phase's values.  A programmer's error for
 * shoal_net_backward (a critical, as g_return_if_fail), a GError for
 * shoal_net_backward_from. */
#define NO_TRAIN_FORWARD "no train forward ran since the net was built, or the last forward was a " \
                         "test forward (backward needs a train forward's outputs)"

void
shoal_net_backward_notify (ShoalNet *net, ShoalParamsReadyFunc ready, gpointer user_data)
{
  g_return_if_fail (net != NULL);
  if (!net->train_outputs)
    {
      g_critical ("%s: " NO_TRAIN_FORWARD, ready != NULL ? "shoal_net_backward_notify" : "shoal_net_backward");
      return;
    }
  if (net->ctx.gpu != NULL && !net->params_resident && !net->grads_resident)
    {
      shoal_net_gpu_backward (net, ready, user_data);
      return;
    }
  /* the CPU, or a GPU net whose params or gradients stay on the device:
   * there the caller consumes each layer's gradients on the compute
   * stream, after its backward, so the layer is handed over at once
   * (net_gpu.c) */
  shoal_device_activate (net->ctx.device);
  for (guint i = net->layers->len; i-- > 0;)
    {
      ShoalLayer *layer = g_ptr_array_index (net->layers, i);
      if (!layer->needs_grad || layer->ops->backward == NULL)
        continue;
      if (layer->gpu != NULL)
        layer->gpu->backward (layer);
      else
        layer->ops->backward (layer);
      if (ready != NULL && layer->nparams > 0)
        ready (layer, user_data);
    }
}

void
shoal_net_backward (ShoalNet *net)
{
  g_return_if_fail (net != NULL);
  shoal_net_backward_notify (net, NULL, NULL);
}

ShoalParamStore *
shoal_net_params (ShoalNet *net)
{
  g_return_val_if_fail (net != NULL, NULL);
  return net->store;
}

guint
shoal_net_n_layers (ShoalNet *net)
{
  g_return_val_if_fail (net != NULL, 0);
  return net->layers->len;
}

ShoalLayer *
shoal_net_layer (ShoalNet *net, guint i)
{
  g_return_val_if_fail (net != NULL, NULL);
  g_return_val_if_fail (i < net->layers->len, NULL);
  return g_ptr_array_index (net->layers, i);
}

ShoalLayer *
shoal_net_find (ShoalNet *net, const char *name)
{
  g_return_val_if_fail (net != NULL && name != NULL, NULL);
  return find_layer (net->layers, name);
}

ShoalLayer *
shoal_net_input (ShoalNet *net)
{
  g_return_val_if_fail (net != NULL, NULL);
  return net->input;
}

guint
shoal_net_metrics (ShoalNet *net, ShoalMetric *out, guint n)
{
  g_return_val_if_fail (net != NULL && (out != NULL || n == 0), 0);
  guint k = 0;
  for (guint i = 0; i < net->layers->len && k < n; i++)
    {
      ShoalLayer *layer = g_ptr_array_index (net->layers, i);
      if (!(layer->ops->flags & (SHOAL_LAYER_LOSS | SHOAL_LAYER_METRIC)))
        continue;
      out[k].layer = layer->name;
      out[k].type = layer->ops->type;
      out[k].is_loss = (layer->ops->flags & SHOAL_LAYER_LOSS) != 0;
      out[k].value = net->snapshot_valid ? net->snapshot[i] : layer->out.data[0];
      k++;
    }
  return k;
}

int
shoal_net_batch_rows (ShoalNet *net)
{
  g_return_val_if_fail (net != NULL, 0);
  return net->input ? shoal_tensor_rows (&net->input->out) : 0;
}

/* Records: u32 name length, name, u32 blob length, blob (the layer's own
 * state, or its 16-byte rng). */
GBytes *
shoal_net_save_state (ShoalNet *net)
{
  g_return_val_if_fail (net != NULL, NULL);
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
  g_return_val_if_fail (net != NULL && state != NULL, FALSE);
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
shoal_net_move (ShoalNet *net, int group, int worker, int shard_index, int shard_count)
{
  g_return_if_fail (net != NULL && shard_count > 0 && shard_index >= 0 && shard_index < shard_count);
  net->ctx.group = group;
  net->ctx.worker = worker;
  net->ctx.shard_index = shard_index;
  net->ctx.shard_count = shard_count;
  for (guint i = 0; i < net->layers->len; i++)
    seed_layer (net, g_ptr_array_index (net->layers, i));
}

void
shoal_net_log_summary (ShoalNet *net)
{
  g_return_if_fail (net != NULL);
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

/* ---- what applications drive themselves ------------------------------------ */

gboolean
shoal_net_feed (ShoalNet *net, const char *name, const float *data, int rows, const float *labels,
                GError **error)
{
  g_return_val_if_fail (net != NULL && name != NULL && data != NULL, FALSE);
  ShoalLayer *layer = shoal_net_find (net, name);
  if (layer == NULL || !(layer->ops->flags & SHOAL_LAYER_INPUT))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "%s: %s '%s'", shoal_conf_origin (net->conf),
                   layer == NULL ? "the net has no layer" : "feed: not an input layer:", name);
      return FALSE;
    }
  if (layer->ops->feed == NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_UNSUPPORTED,
                   "layer '%s' (type %s) takes no rows from the program", name, layer->ops->type);
      return FALSE;
    }
  int batch = (int) (layer->out.capacity / MAX (shoal_shape_row_size (&layer->out.shape), 1));
  if (rows < 1 || rows > batch)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_SHAPE,
                   "layer '%s' takes 1 to %d rows at a time, got %d", name, batch, rows);
      return FALSE;
    }
  return layer->ops->feed (layer, data, rows, labels, error);
}

gboolean
shoal_net_backward_from (ShoalNet *net, const char *name, const float *grad, GError **error)
{
  g_return_val_if_fail (net != NULL && name != NULL && grad != NULL, FALSE);
  ShoalLayer *layer = shoal_net_find (net, name);
  const char *why = layer == NULL ? "the net has no layer" : NULL;
  for (guint i = 0; why == NULL && i < net->layers->len; i++)
    {
      ShoalLayer *l = g_ptr_array_index (net->layers, i);
      for (int s = 0; s < l->nsrcs; s++)
        if (l->srcs[s] == layer)
          why = "other layers read the output of";
    }
  if (why == NULL && (!layer->needs_grad || layer->grad.data == NULL))
    why = "nothing learns at or below";
  if (why != NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "backward from '%s': %s '%s'", name, why, name);
      return FALSE;
    }
  if (!net->train_outputs)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "backward from '%s': " NO_TRAIN_FORWARD, name);
      return FALSE;
    }
  if (net->ctx.gpu != NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_UNSUPPORTED,
                   "backward from '%s': not on a GPU net (use a loss layer there)", name);
      return FALSE;
    }
  /* Only this gradient flows: every other d loss / d out starts at zero
   * (splits sum all their branches) and the loss layers do not run. */
  for (guint i = 0; i < net->layers->len; i++)
    {
      ShoalLayer *l = g_ptr_array_index (net->layers, i);
      if (l->grad.data != NULL && l != layer)
        shoal_tensor_fill (&l->grad, 0.0f);
    }
  memcpy (layer->grad.data, grad, shoal_tensor_count (&layer->out) * sizeof (float));
  for (guint i = net->layers->len; i-- > 0;)
    {
      ShoalLayer *l = g_ptr_array_index (net->layers, i);
      if (l->needs_grad && l->ops->backward != NULL && !(l->ops->flags & SHOAL_LAYER_LOSS))
        l->ops->backward (l);
    }
  return TRUE;
}

gboolean
shoal_net_save_params (ShoalNet *net, const char *path, GError **error)
{
  g_return_val_if_fail (net != NULL && path != NULL, FALSE);
  GBytes *bytes = shoal_param_store_to_bytes (net->store);
  gsize len = 0;
  const char *data = g_bytes_get_data (bytes, &len);
  GError *local = NULL;
  gboolean ok = g_file_set_contents (path, data, (gssize) len, &local);
  g_bytes_unref (bytes);
  if (!ok)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s", local->message);
      g_error_free (local);
    }
  return ok;
}

gboolean
shoal_net_load_params (ShoalNet *net, const char *path, ShoalParamsMatch match, GError **error)
{
  g_return_val_if_fail (net != NULL && path != NULL, FALSE);
  GBytes *bytes = shoal_param_file_read (path, error);
  if (bytes == NULL)
    return FALSE;
  gboolean ok = shoal_param_store_load_bytes (net->store, bytes, path, match, NULL, error);
  g_bytes_unref (bytes);
  return ok;
}
