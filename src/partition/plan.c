/* The partitioner's plan: from the unpartitioned net and a group size k,
 * each worker's layers - its parts of the original layers with a share
 * of the rows or units, and the concat, slice and bridge layers where
 * neighbours are cut differently - written as one conf per worker.
 *
 * Why sub-nets are confs: a worker's part of a layer is the same layer
 * type with a share of the rows or units, so each sub-net is the original
 * [layer] groups with adjusted options plus the connection layers, built
 * by the ordinary net builder, which then does set-up, split insertion
 * and memory as for any net.
 *
 * Why the sub-nets' layers are written in one global order: every node
 * (a worker's part or connection layer) is created after its sources, and
 * each sub-net's groups are written in creation order, which the net
 * builder keeps.  Every worker then steps through its layers in an order
 * consistent with one topological order of the whole partitioned graph,
 * forward and (reversed) backward, so workers that block on each other's
 * bridges cannot deadlock. */
#include "partition/plan.h"

#include <stdlib.h>
#include <string.h>

#include "layers/slice.h"
#include "layers/split.h"
#include "partition/partition.h"

const char *
shoal_plan_dim_name (int dim)
{
  return dim == 0 ? "batch" : dim == 1 ? "feature" : "whole";
}

/* ---- the plan ----------------------------------------------------------- */

static void
node_free (PlanNode *n)
{
  g_free (n->name);
  g_ptr_array_free (n->srcs, TRUE);
  g_ptr_array_free (n->keys, TRUE);
  g_ptr_array_free (n->values, TRUE);
  g_free (n);
}

static PlanNode *
node_new (Plan *pl, int worker, char *name_owned, const char *type, PlanNodeRole role, int orig)
{
  PlanNode *n = g_new0 (PlanNode, 1);
  n->name = name_owned;
  n->type = type;
  n->role = role;
  n->orig = orig;
  n->worker = worker;
  n->dim = pl->origs[orig].dim;
  n->srcs = g_ptr_array_new_with_free_func (g_free);
  n->keys = g_ptr_array_new_with_free_func (g_free);
  n->values = g_ptr_array_new_with_free_func (g_free);
  g_ptr_array_add (pl->nodes[worker], n);
  return n;
}

static void
node_set (PlanNode *n, const char *key, char *value_owned)
{
  for (guint i = 0; i < n->keys->len; i++)
    if (strcmp (g_ptr_array_index (n->keys, i), key) == 0)
      {
        g_free (g_ptr_array_index (n->values, i));
        g_ptr_array_index (n->values, i) = value_owned;
        return;
      }
  g_ptr_array_add (n->keys, g_strdup (key));
  g_ptr_array_add (n->values, value_owned);
}

static void
node_add_src (PlanNode *n, const char *src)
{
  g_ptr_array_add (n->srcs, g_strdup (src));
}

static char *
shape_list (const ShoalShape *s)
{
  GString *str = g_string_new (NULL);
  for (int d = 0; d < s->ndim; d++)
    g_string_append_printf (str, "%s%d", d ? ", " : "", s->dim[d]);
  return g_string_free (str, FALSE);
}

/* Shape of worker i's part of o. */
static ShoalShape
part_shape (const Plan *pl, const PlanLayer *o, int i)
{
  ShoalShape s = o->shape;
  if (o->dim == 0 || o->dim == 1)
    {
      int lo, hi;
      shoal_block_range (s.dim[o->dim], pl->k, i, &lo, &hi);
      s.dim[o->dim] = hi - lo;
    }
  return s;
}

gboolean
shoal_plan_has_part (const PlanLayer *o, int worker)
{
  return o->dim >= 0 || worker == 0;
}

/* Moves the node just added to `nodes` (a bridge_src) right after its
 * source and the bridge_srcs already there: the data leaves as soon as it
 * exists, not when the worker reaches the layer that made the bridge
 * (which would make the consumer wait for the producer's next layers).
 * The order stays topological: a bridge_src reads its source only. */
static void
place_after_source (GPtrArray *nodes, const char *source)
{
  guint last = nodes->len - 1, at = 0;
  PlanNode *moved = g_ptr_array_index (nodes, last);
  while (strcmp (((PlanNode *) g_ptr_array_index (nodes, at))->name, source) != 0)
    at++;
  at++;
  while (at < last && ((PlanNode *) g_ptr_array_index (nodes, at))->role == NODE_BRIDGE_SRC
         && ((PlanNode *) g_ptr_array_index (nodes, at))->orig == moved->orig)
    at++;
  memmove (&nodes->pdata[at + 1], &nodes->pdata[at], (last - at) * sizeof (gpointer));
  nodes->pdata[at] = moved;
}

/* On worker j: worker i's part of o (a bridge from i when i != j). */
static const char *
piece (Plan *pl, int s, int i, int j)
{
  PlanLayer *o = &pl->origs[s];
  if (i == j)
    return o->native[j];
  const char **slot = &o->bridged[i * pl->k + j];
  if (*slot != NULL)
    return *slot;
  PlanNode *src = node_new (pl, i, g_strdup_printf ("%s:to%d", o->name, j), "bridge_src",
                        NODE_BRIDGE_SRC, s);
  node_add_src (src, o->native[i]);
  place_after_source (pl->nodes[i], o->native[i]);
  PlanNode *dst = node_new (pl, j, g_strdup_printf ("%s:from%d", o->name, i), "bridge_dst",
                        NODE_BRIDGE_DST, s);
  ShoalShape shape = part_shape (pl, o, i);
  node_set (dst, "shape", shape_list (&shape));
  node_set (dst, "labels", g_strdup (o->label ? "true" : "false"));
  if (o->label_steps > 1)
    node_set (dst, "label_steps", g_strdup_printf ("%d", o->label_steps));
  node_set (src, "peer", g_strdup_printf ("worker %d: %s", j, dst->name));
  node_set (dst, "peer", g_strdup_printf ("worker %d: %s", i, src->name));
  PlanPair *pair = g_new0 (PlanPair, 1);
  *pair = (PlanPair) { i, j, src, dst };
  g_ptr_array_add (pl->pairs, pair);
  *slot = dst->name;
  return *slot;
}

/* On worker j: the whole of o's output. */
static const char *
whole (Plan *pl, int s, int j)
{
  PlanLayer *o = &pl->origs[s];
  if (o->dim < 0)
    return piece (pl, s, 0, j);
  if (o->whole[j] != NULL)
    return o->whole[j];
  /* the pieces first: they are the concat's sources */
  const char **names = g_new0 (const char *, pl->k);
  for (int i = 0; i < pl->k; i++)
    names[i] = piece (pl, s, i, j);
  PlanNode *n = node_new (pl, j, g_strconcat (o->name, ":whole", NULL), "concat", NODE_CONCAT, s);
  for (int i = 0; i < pl->k; i++)
    node_add_src (n, names[i]);
  node_set (n, "axis", g_strdup_printf ("%d", o->dim));
  g_free (names);
  o->whole[j] = n->name;
  return n->name;
}

/* On worker j: block j of o's output along `axis`. */
static const char *
block (Plan *pl, int s, int j, int axis)
{
  PlanLayer *o = &pl->origs[s];
  if (o->dim == axis)
    return o->native[j];
  const char **cache = axis == 0 ? o->rows : o->features;
  if (cache[j] != NULL)
    return cache[j];
  const char *src = whole (pl, s, j);
  PlanNode *n = node_new (pl, j, g_strconcat (o->name, axis == 0 ? ":rows" : ":features", NULL),
                      "slice", NODE_SLICE, s);
  node_add_src (n, src);
  node_set (n, "axis", g_strdup_printf ("%d", axis));
  node_set (n, "parts", g_strdup_printf ("%d", pl->k));
  node_set (n, "index", g_strdup_printf ("%d", j));
  cache[j] = n->name;
  return n->name;
}

/* Worker j's part of original layer l, after what it reads. */
static void
plan_part (Plan *pl, int l, int j)
{
  PlanLayer *o = &pl->origs[l];
  const char *srcs[SHOAL_LAYER_MAX_SRCS];
  for (int i = 0; i < o->nsrcs; i++)
    {
      int s = o->srcs[i];
      if (o->dim == 0)
        srcs[i] = block (pl, s, j, 0);
      else if (o->dim == 1 && o->ops->split.units_key != NULL)
        srcs[i] = whole (pl, s, j);
      else if (o->dim == 1)
        srcs[i] = block (pl, s, j, 1);
      else
        srcs[i] = whole (pl, s, 0);
    }
  PlanNode *n = node_new (pl, j, g_strdup (o->name), o->ops->type, NODE_PART, l);
  for (int i = 0; i < o->nsrcs; i++)
    node_add_src (n, srcs[i]);
  int lo, hi;
  if (o->dim == 1 && o->ops->split.units_key != NULL)
    {
      shoal_block_range (o->units, pl->k, j, &lo, &hi);
      node_set (n, o->ops->split.units_key, g_strdup_printf ("%d", hi - lo));
    }
  if (o->dim == 0 && (o->ops->flags & SHOAL_LAYER_INPUT))
    {
      shoal_block_range (o->shape.dim[0], pl->k, j, &lo, &hi);
      const char *key = o->ops->split.rows_key;
      if (shoal_option_find (o->ops->options, key)->type == SHOAL_OPT_INT_LIST)
        {
          ShoalShape s = o->shape;   /* the list's first item is the rows */
          s.dim[0] = hi - lo;
          node_set (n, key, shape_list (&s));
        }
      else
        node_set (n, key, g_strdup_printf ("%d", hi - lo));
    }
  o->native[j] = n->name;
}

/* A bridge returns a gradient when the bridged layer learns from one and
 * some consumer on the far side runs backward (metrics do not). */
static void
plan_bridge_grads (Plan *pl)
{
  for (guint p = 0; p < pl->pairs->len; p++)
    {
      PlanPair *pair = g_ptr_array_index (pl->pairs, p);
      gboolean grad = FALSE;
      if (pl->origs[pair->dst->orig].needs_grad)
        {
          GPtrArray *nodes = pl->nodes[pair->dst_worker];
          for (guint i = 0; !grad && i < nodes->len; i++)
            {
              PlanNode *n = g_ptr_array_index (nodes, i);
              for (guint s = 0; s < n->srcs->len; s++)
                if (strcmp (g_ptr_array_index (n->srcs, s), pair->dst->name) == 0
                    && shoal_layer_lookup (n->type)->backward != NULL)
                  grad = TRUE;
            }
        }
      node_set (pair->src, "grad", g_strdup (grad ? "true" : "false"));
      node_set (pair->dst, "grad", g_strdup (grad ? "true" : "false"));
    }
}

/* Why a type cannot be split on dim in a group, or NULL. */
static const char *
refusal (const Plan *pl, const PlanLayer *o, int dim)
{
  guint bit = dim == 0 ? SHOAL_SPLIT_BATCH : SHOAL_SPLIT_FEATURE;
  if (dim < 0)
    return NULL;
  if (!(o->ops->split.dims & bit))
    return "its type does not support it";
  if (dim == 0 && (o->ops->flags & SHOAL_LAYER_INPUT) && o->ops->split.rows_key == NULL)
    return "its type does not say which option holds its batch rows";
  return o->ops->split.refuse != NULL ? o->ops->split.refuse (pl->conf, o->group, dim) : NULL;
}

static const char *
supported_dims (const Plan *pl, const PlanLayer *o)
{
  gboolean b = refusal (pl, o, 0) == NULL, f = refusal (pl, o, 1) == NULL;
  return b && f ? "batch (0), feature (1) or whole (-1)"
         : b    ? "batch (0) or whole (-1)"
         : f    ? "feature (1) or whole (-1)"
                : "whole (-1) only";
}

/* partition_dim = auto for a group in one process.  A batch split has
 * every worker read all of a layer's weights (BLAS packs them once per
 * worker) and write a private gradient that the group then sums: 2 to 3
 * passes over the weights per extra worker.  A feature split has each
 * worker read its block of the weights only, at the price of gathering
 * the layer's whole input and summing the input's gradient: about 2
 * passes over a batch of inputs.  So layers whose weights outweigh twice
 * their batch of inputs (a 784-1024 dense layer at batch 64: 803k values
 * against 100k) split by feature; element-wise layers follow their
 * source, so that no connection layer comes between; the rest by batch. */
static int
auto_dim (Plan *pl, const PlanLayer *o)
{
  if (!pl->spread && refusal (pl, o, 1) == NULL)
    {
      if (o->ops->split.units_key != NULL && o->param_floats > 2 * (size_t) o->batch_rows * o->in_floats)
        return 1;
      if (o->ops->split.units_key == NULL && o->param_floats == 0 && o->nsrcs == 1
          && pl->origs[o->srcs[0]].dim == 1 && !(o->ops->flags & (SHOAL_LAYER_LOSS | SHOAL_LAYER_METRIC)))
        return 1;
    }
  return 0;
}

/* The dim of every original layer, and the checks that its share exists. */
static gboolean
choose_dims (Plan *pl, int net_default, GError **error)
{
  GKeyFile *kf = shoal_conf_keyfile (pl->conf);
  for (int l = 0; l < pl->norig; l++)
    {
      PlanLayer *o = &pl->origs[l];
      gboolean explicit = g_key_file_has_key (kf, o->group, "partition_dim", NULL);
      const char *key = explicit ? "partition_dim" : NULL;
      if (explicit)
        {
          o->dim = (int) shoal_conf_get_int (pl->conf, o->group, shoal_layer_common_options,
                                             "partition_dim");
          const char *why = refusal (pl, o, o->dim);
          if (why != NULL)
            {
              shoal_conf_error (pl->conf, error, o->group, key,
                                "a %s layer cannot be split by %s (partition_dim %d): %s; it can "
                                "be split by %s", o->ops->type, shoal_plan_dim_name (o->dim), o->dim, why,
                                supported_dims (pl, o));
              return FALSE;
            }
        }
      else if (o->ops->flags & SHOAL_LAYER_INPUT)
        o->dim = -1;
      else
        {
          int first = net_default == SHOAL_PLAN_DIM_AUTO ? auto_dim (pl, o) : net_default;
          int order[4] = { first, 0, 1, -1 };
          for (int i = 0; i < 4; i++)
            if (refusal (pl, o, order[i]) == NULL)
              {
                o->dim = order[i];
                break;
              }
        }

      if (o->dim == 0 && o->batch_rows < pl->k)
        {
          shoal_conf_error (pl->conf, error, o->group, key,
                            "its batch of %d rows cannot be split by batch among %d workers",
                            o->batch_rows, pl->k);
          return FALSE;
        }
      if (o->dim == 1 && o->ops->split.units_key != NULL)
        {
          o->units = (int) shoal_conf_get_int (pl->conf, o->group, o->ops->options,
                                               o->ops->split.units_key);
          if (o->units < pl->k)
            {
              shoal_conf_error (pl->conf, error, o->group, o->ops->split.units_key,
                                "%d cannot be split by feature among %d workers", o->units, pl->k);
              return FALSE;
            }
        }
      else if (o->dim == 1 && (o->shape.ndim < 2 || o->shape.dim[1] < pl->k))
        {
          char *s = shoal_shape_to_string (&o->shape);
          shoal_conf_error (pl->conf, error, o->group, key,
                            "its output (%s) has fewer than %d features to split among %d workers",
                            s, pl->k, pl->k);
          g_free (s);
          return FALSE;
        }
    }
  return TRUE;
}

void
shoal_plan_drop_nodes (Plan *pl)
{
  for (int l = 0; l < pl->norig; l++)
    {
      PlanLayer *o = &pl->origs[l];
      g_free (o->native);
      g_free (o->whole);
      g_free (o->rows);
      g_free (o->features);
      g_free (o->bridged);
      o->native = o->whole = o->rows = o->features = o->bridged = NULL;
    }
  for (int w = 0; pl->nodes != NULL && w < pl->k; w++)
    g_ptr_array_free (pl->nodes[w], TRUE);
  g_free (pl->nodes);
  pl->nodes = NULL;
  if (pl->pairs != NULL)
    g_ptr_array_free (pl->pairs, TRUE);
  pl->pairs = NULL;
}

static void
plan_nodes (Plan *pl)
{
  int k = pl->k;
  pl->nodes = g_new0 (GPtrArray *, k);
  for (int w = 0; w < k; w++)
    pl->nodes[w] = g_ptr_array_new_with_free_func ((GDestroyNotify) node_free);
  pl->pairs = g_ptr_array_new_with_free_func (g_free);
  for (int l = 0; l < pl->norig; l++)
    {
      PlanLayer *o = &pl->origs[l];
      o->native = g_new0 (const char *, k);
      o->whole = g_new0 (const char *, k);
      o->rows = g_new0 (const char *, k);
      o->features = g_new0 (const char *, k);
      o->bridged = g_new0 (const char *, (gsize) k * k);
    }
  for (int l = 0; l < pl->norig; l++)
    for (int j = 0; j < k; j++)
      if (shoal_plan_has_part (&pl->origs[l], j))
        plan_part (pl, l, j);
  plan_bridge_grads (pl);
}

/* Worker w's sub-net as a conf.  Returns NULL with error set. */
ShoalConf *
shoal_plan_subnet_conf (Plan *pl, int w, GError **error)
{
  GKeyFile *src_kf = shoal_conf_keyfile (pl->conf);
  GKeyFile *kf = g_key_file_new ();
  GPtrArray *nodes = pl->nodes[w];

  for (guint i = 0; i < nodes->len; i++)
    {
      PlanNode *n = g_ptr_array_index (nodes, i);
      char *group = g_strconcat ("layer ", n->name, NULL);
      g_key_file_set_value (kf, group, "type", n->type);
      if (n->role == NODE_PART)
        {
          const char *from = pl->origs[n->orig].group;
          char **keys = g_key_file_get_keys (src_kf, from, NULL, NULL);
          for (char **key = keys; key != NULL && *key != NULL; key++)
            {
              if (strcmp (*key, "type") == 0 || strcmp (*key, "src") == 0
                  || strcmp (*key, "partition_dim") == 0)
                continue;
              char *v = g_key_file_get_value (src_kf, from, *key, NULL);
              g_key_file_set_value (kf, group, *key, v);
              g_free (v);
            }
          g_strfreev (keys);
          char *dim = g_strdup_printf ("%d", n->dim);
          g_key_file_set_value (kf, group, "partition_dim", dim);
          g_free (dim);
        }
      if (n->srcs->len > 0)
        {
          g_ptr_array_add (n->srcs, NULL);
          char *list = g_strjoinv (", ", (char **) n->srcs->pdata);
          g_ptr_array_set_size (n->srcs, n->srcs->len - 1);
          g_key_file_set_value (kf, group, "src", list);
          g_free (list);
        }
      for (guint o = 0; o < n->keys->len; o++)
        g_key_file_set_value (kf, group, g_ptr_array_index (n->keys, o),
                              g_ptr_array_index (n->values, o));
      g_free (group);
    }
  char *text = g_key_file_to_data (kf, NULL, NULL);
  g_key_file_free (kf);
  char *origin = g_strdup_printf ("%s (worker %d of %d)", shoal_conf_origin (pl->conf), w, pl->k);
  ShoalConf *conf = shoal_conf_load_data (text, origin, error);
  g_free (origin);
  g_free (text);
  return conf;
}

/* The original layers of `full` (splits left out, sources through them). */
void
shoal_plan_read (Plan *pl, ShoalConf *conf, int k, ShoalNet *full)
{
  pl->conf = conf;
  pl->k = k;
  guint n = shoal_net_n_layers (full);
  pl->origs = g_new0 (PlanLayer, n);
  pl->orig_index = g_hash_table_new (g_str_hash, g_str_equal);
  pl->input = -1;
  for (guint i = 0; i < n; i++)
    {
      ShoalLayer *layer = shoal_net_layer (full, i);
      if (layer->ops == &shoal_layer_split_ops)
        continue;
      int l = pl->norig++;
      PlanLayer *o = &pl->origs[l];
      o->name = g_strdup (layer->name);
      o->group = g_strdup (layer->group);
      o->ops = layer->ops;
      o->dim = layer->partition_dim;
      o->shape = layer->out.shape;
      o->label = layer->label.data != NULL;
      o->label_steps = o->label ? (int) shoal_tensor_row_size (&layer->label) : 0;
      o->needs_grad = layer->needs_grad;
      o->param_layer = -1;
      o->parts = g_new0 (ShoalLayer *, k);
      for (int s = 0; s < layer->nsrcs; s++)
        {
          ShoalLayer *src = layer->srcs[s];
          if (src->ops == &shoal_layer_split_ops)
            src = src->srcs[0];
          o->srcs[o->nsrcs++] = GPOINTER_TO_INT (g_hash_table_lookup (pl->orig_index, src->name)) - 1;
        }
      for (int i = 0; i < layer->nparams; i++)
        o->param_floats += layer->params[i]->count;
      if (layer->nsrcs > 0)
        o->in_floats = shoal_shape_row_size (&layer->srcs[0]->out.shape);
      o->batch_rows = shoal_tensor_rows (&layer->out);
      if ((o->ops->flags & (SHOAL_LAYER_LOSS | SHOAL_LAYER_METRIC)) && layer->nsrcs > 0)
        o->batch_rows = shoal_tensor_rows (&layer->srcs[0]->out);
      if ((o->ops->flags & SHOAL_LAYER_INPUT) && pl->input < 0)
        pl->input = l;
      g_hash_table_insert (pl->orig_index, o->name, GINT_TO_POINTER (l + 1));
    }
}

/* Net-wide default dim from [cluster] partition_dim, checked like any key. */
static gboolean
accept_other_keys (const char *key, gpointer user_data)
{
  (void) user_data;
  return strcmp (key, "partition_dim") != 0;
}

static gboolean
net_default_dim (ShoalConf *conf, int *dim, GError **error)
{
  *dim = SHOAL_PLAN_DIM_AUTO;   /* the default: the fastest correct split (docs/PARTITIONING.md) */
  if (!g_key_file_has_group (shoal_conf_keyfile (conf), "cluster"))
    return TRUE;
  const ShoalOption *const tables[] = { shoal_partition_options, NULL };
  if (!shoal_conf_check_group (conf, "cluster", tables, accept_other_keys, NULL, error))
    return FALSE;
  char *value = shoal_conf_get_string (conf, "cluster", shoal_partition_options, "partition_dim");
  *dim = strcmp (value, "auto") == 0 ? SHOAL_PLAN_DIM_AUTO : atoi (value);
  g_free (value);
  return TRUE;
}

gboolean
shoal_plan_make (Plan *pl, GError **error)
{
  int net_default = 0;
  if (!net_default_dim (pl->conf, &net_default, error) || !choose_dims (pl, net_default, error))
    return FALSE;
  for (int l = 0; l < pl->norig; l++)
    if (strchr (pl->origs[l].name, ':') != NULL)
      {
        shoal_conf_error (pl->conf, error, pl->origs[l].group, NULL,
                          "layer names of a partitioned net cannot hold ':' (the partitioner's "
                          "connection layers use it)");
        return FALSE;
      }
  plan_nodes (pl);
  return TRUE;
}

gboolean
shoal_plan_split_input (const Plan *pl)
{
  for (int l = 0; l < pl->norig; l++)
    if ((pl->origs[l].ops->flags & SHOAL_LAYER_INPUT) && pl->origs[l].dim == 0)
      return TRUE;
  return FALSE;
}

void
shoal_plan_clear (Plan *pl)
{
  shoal_plan_drop_nodes (pl);
  for (int l = 0; l < pl->norig; l++)
    {
      PlanLayer *o = &pl->origs[l];
      g_free (o->parts);
      g_free (o->name);
      g_free (o->group);
    }
  g_free (pl->origs);
  pl->origs = NULL;
  pl->norig = 0;
  if (pl->orig_index != NULL)
    g_hash_table_destroy (pl->orig_index);
  pl->orig_index = NULL;
}
