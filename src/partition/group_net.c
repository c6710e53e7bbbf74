/* Building a group net: the k sub-nets of a worker group (planned in
 * plan.c), one param store in the unpartitioned layout that they all
 * view, and the bridges between them (in-process: inproc_link.c; spread
 * over processes: spread.c).  Running it is group_run.c.
 *
 * The unpartitioned net is built first: it checks the user's conf with
 * the user's file and lines, and gives the shapes and the param layout;
 * it is freed once the sub-nets exist. */
#include "partition/partition.h"

#include <string.h>

#include "core/error.h"
#include "core/thread_start.h"
#include "layers/bridge.h"
#include "layers/slice.h"
#include "partition/group_priv.h"

const ShoalOption shoal_partition_options[] = {
  { "partition_dim", SHOAL_OPT_STRING, "auto", SHOAL_UNBOUNDED, "0|1|-1|auto",
    "default partition dim of the layers of a worker group's net: 0 batch, 1 feature, "
    "-1 whole on the group's worker 0, auto = by feature where a layer's weights outweigh twice "
    "its batch of inputs (and the element-wise layers after it), else by batch, for a group in "
    "one process (a spread group splits by batch); a layer's own partition_dim wins" },
  SHOAL_OPTION_END
};

void
shoal_group_net_free (ShoalGroupNet *g)
{
  if (g == NULL)
    return;
  if (g->wire != NULL)
    shoal_group_net_finish (g, TRUE);
  group_stop_threads (g);
  if (g->wire != NULL)
    spread_free (g);
  for (int w = 0; w < g->k; w++)
    shoal_net_free (g->nets[w]);
  g_free (g->nets);
  for (int w = 0; g->confs != NULL && w < g->k; w++)
    shoal_conf_free (g->confs[w]);
  g_free (g->confs);
  if (g->k > 1)
    shoal_param_store_free (g->store);
  if (g->links != NULL)
    g_ptr_array_free (g->links, TRUE);
  for (int i = 0; g->players != NULL && i < g->nplayers; i++)
    {
      ParamLayer *pl = &g->players[i];
      for (guint s = 0; pl->sums != NULL && s < pl->sums->len; s++)
        g_free (g_array_index (pl->sums, ParamSum, s).priv);
      if (pl->sums != NULL)
        g_array_free (pl->sums, TRUE);
    }
  g_free (g->players);
  if (g->views != NULL)
    g_array_free (g->views, TRUE);
  for (int w = 0; g->wctx != NULL && w < g->k; w++)
    {
      if (g->wctx[w].priv_grads != NULL)
        g_array_free (g->wctx[w].priv_grads, TRUE);
      g_free (g->wctx[w].fwd_s);
      g_free (g->wctx[w].bwd_s);
    }
  g_free (g->wctx);
  for (int l = 0; g->k > 1 && l < g->plan.norig; l++)
    {
      PlanLayer *o = &g->plan.origs[l];
      if (o->proxy != NULL)
        {
          g_free (o->proxy->name);
          g_free (o->proxy->group);
          g_free (o->proxy);
        }
    }
  shoal_plan_clear (&g->plan);
  g_mutex_clear (&g->lock);
  g_cond_clear (&g->wake);
  g_cond_clear (&g->done);
  g_free (g);
}

/* The group store: the unpartitioned net's layout, declared anew so that
 * the full net can go. */
static ShoalParamStore *
copy_layout (ShoalParamStore *full, ShoalConf *conf, GError **error)
{
  ShoalParamStore *store = shoal_param_store_new ();
  for (guint i = 0; i < full->params->len; i++)
    {
      ShoalParam *p = g_ptr_array_index (full->params, i);
      ShoalParam *q = shoal_param_store_declare (store, p->name, &p->shape, &p->init, p->fan_in,
                                                 p->fan_out, p->lr_scale, p->wd_scale);
      q->statistic = p->statistic;
    }
  if (!shoal_param_store_allocate (store, error))
    {
      g_prefix_error (error, "%s: the group's ", shoal_conf_origin (conf));
      shoal_param_store_free (store);
      return NULL;
    }
  for (guint i = 0; i < full->params->len; i++)
    g_assert (((ShoalParam *) g_ptr_array_index (store->params, i))->offset
              == ((ShoalParam *) g_ptr_array_index (full->params, i))->offset);
  return store;
}

/* Descriptions of the original layers with the group store's params. */
static void
make_proxies (ShoalGroupNet *g, ShoalNet *full)
{
  for (int l = 0; l < g->plan.norig; l++)
    {
      PlanLayer *o = &g->plan.origs[l];
      ShoalLayer *src = shoal_net_find (full, o->name);
      ShoalLayer *p = g_new0 (ShoalLayer, 1);
      p->name = g_strdup (o->name);
      p->group = g_strdup (o->group);
      p->ops = o->ops;
      p->conf = g->conf;
      p->partition_dim = o->dim;
      p->out.shape = o->shape;
      p->needs_grad = o->needs_grad;
      p->loss_weight = src->loss_weight;
      p->store = g->store;
      for (int i = 0; i < src->nparams; i++)
        p->params[p->nparams++] = shoal_param_store_find (g->store, src->params[i]->name);
      o->proxy = p;
    }
}

/* Leader of a spread group: the block of param fp that remote worker w's
 * gradient covers, and for a batch-split param the buffer it lands in
 * before the sum. */
static void
add_remote_range (ShoalGroupNet *g, ParamLayer *pl, ParamSum *sum, const ShoalParam *fp, int dim, int w)
{
  WireRange r = { fp->offset, fp->count, (int) (pl - g->players), NULL, NULL, fp->statistic };
  if (dim == 1)
    {
      int lo, hi;
      shoal_block_range (fp->shape.dim[0], g->k, w, &lo, &hi);
      size_t row = shoal_shape_row_size (&fp->shape);
      r.offset += (size_t) lo * row;
      r.count = (size_t) (hi - lo) * row;
    }
  else
    {
      r.land = shoal_alloc_floats (fp->count);
      g_ptr_array_add (g->land_bufs, r.land);
      sum->priv[w] = r.land;
    }
  g_array_append_val (g->ww[w].ranges, r);
}

/* Points every sub-net param at its place in the group store and lists
 * what backward must zero and sum. */
static gboolean
map_params (ShoalGroupNet *g, GError **error)
{
  int k = g->k;
  g->views = g_array_new (FALSE, FALSE, sizeof (ParamView));
  g->players = g_new0 (ParamLayer, g->plan.norig);
  for (int l = 0; l < g->plan.norig; l++)
    {
      PlanLayer *o = &g->plan.origs[l];
      if (o->proxy->nparams == 0)
        continue;
      o->param_layer = g->nplayers;
      ParamLayer *pl = &g->players[g->nplayers++];
      pl->orig = l;
      /* a follower sends its workers' own gradients: the leader sums */
      if (o->dim == 0 && k > 1 && g->first == 0)
        pl->sums = g_array_new (FALSE, TRUE, sizeof (ParamSum));
      for (int i = 0; i < o->proxy->nparams; i++)
        {
          ShoalParam *fp = o->proxy->params[i];
          ParamSum sum = { fp->offset, fp->count, g_new0 (float *, k) };
          for (int w = 0; w < k; w++)
            {
              ShoalLayer *part = o->parts[w];
              if (part == NULL && g->wire != NULL && g->first == 0 && shoal_plan_has_part (o, w))
                add_remote_range (g, pl, &sum, fp, o->dim, w);
              if (part == NULL)
                continue;
              if (part->nparams != o->proxy->nparams)
                {
                  g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL,
                               "layer '%s': worker %d's part has %d params, the layer %d",
                               o->name, w, part->nparams, o->proxy->nparams);
                  g_free (sum.priv);
                  return FALSE;
                }
              ShoalParam *sp = part->params[i];
              ParamView v = { sp, fp->offset, TRUE };
              ShoalShape expect = fp->shape;
              if (o->dim == 1)
                {
                  int lo, hi;
                  shoal_block_range (fp->shape.dim[0], k, w, &lo, &hi);
                  expect.dim[0] = hi - lo;
                  v.offset += (size_t) lo * shoal_shape_row_size (&fp->shape);
                }
              if (!shoal_shape_equal (&expect, &sp->shape))
                {
                  char *a = shoal_shape_to_string (&sp->shape), *b = shoal_shape_to_string (&fp->shape);
                  g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_UNSUPPORTED,
                               "layer '%s' (%s) split by %s: worker %d's param '%s' is %s, not its "
                               "block of rows of %s", o->name, o->ops->type, shoal_plan_dim_name (o->dim), w,
                               sp->name, a, b);
                  g_free (a);
                  g_free (b);
                  g_free (sum.priv);
                  return FALSE;
                }
              if (o->dim == 0 && w > 0)
                {
                  /* replicated: this worker's gradient is its own, summed after backward */
                  v.grad = FALSE;
                  sum.priv[w] = sp->grad.data;
                  PrivGrad pg = { sp->grad.data, sp->count, pl->sums != NULL };
                  g_array_append_val (g->wctx[w].priv_grads, pg);
                }
              if (g->wire != NULL && g->first > 0)
                {
                  WireRange r = { v.offset, sp->count, g->nplayers - 1, sp, NULL, fp->statistic };
                  g_array_append_val (g->ww[w].ranges, r);
                }
              g_array_append_val (g->views, v);
            }
          if (pl->sums != NULL)
            g_array_append_val (pl->sums, sum);
          else
            g_free (sum.priv);
        }
    }
  group_bind_values (g);
  /* the sub-nets' own value buffers are never read again */
  for (int w = g->first; w < g->first + g->nlocal; w++)
    {
      ShoalParamStore *sub = shoal_net_params (g->nets[w]);
      if (!sub->values_borrowed)
        shoal_free_aligned (sub->values);
      sub->values = NULL;
    }
  return TRUE;
}

static gboolean
make_links (ShoalGroupNet *g, GError **error)
{
  g->links = g_ptr_array_new_with_free_func ((GDestroyNotify) group_link_free);
  for (guint p = 0; p < g->plan.pairs->len; p++)
    {
      PlanPair *pair = g_ptr_array_index (g->plan.pairs, p);
      gboolean src_here = group_is_local (g, pair->src_worker), dst_here = group_is_local (g, pair->dst_worker);
      if (!src_here && !dst_here)
        continue;
      if (!src_here || !dst_here)
        {
          ShoalBridgeLink *link = g_new0 (ShoalBridgeLink, 1);
          g_ptr_array_add (g->links, link);
          link->src = src_here ? shoal_net_find (g->nets[pair->src_worker], pair->src->name) : NULL;
          link->dst = dst_here ? shoal_net_find (g->nets[pair->dst_worker], pair->dst->name) : NULL;
          if (!spread_link (g, link, pair->src_worker, pair->dst_worker, p, error))
            return FALSE;
          continue;
        }
      ShoalBridgeLink *link = group_inproc_link_new ();
      link->src = shoal_net_find (g->nets[pair->src_worker], pair->src->name);
      link->dst = shoal_net_find (g->nets[pair->dst_worker], pair->dst->name);
      g_ptr_array_add (g->links, link);
      if (link->src == NULL || link->dst == NULL)
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL, "bridge %s -> %s: an end is missing",
                       pair->src->name, pair->dst->name);
          return FALSE;
        }
      if (!shoal_bridge_link_attach (link, error))
        return FALSE;
    }
  return TRUE;
}

ShoalNetOptions
group_worker_options (const ShoalGroupNet *g, const ShoalNetOptions *opts, int w)
{
  ShoalNetOptions sub = { .shard_count = 1 };
  if (opts != NULL)
    sub = *opts;
  sub.shard_count = MAX (sub.shard_count, 1);
  if (g->k == 1)
    {
      sub.worker = 0;   /* the plain net is the group's whole net */
      return sub;
    }
  if (shoal_plan_split_input (&g->plan))
    {
      sub.shard_index = sub.shard_index * g->k + w;
      sub.shard_count *= g->k;
    }
  sub.worker = w;
  return sub;
}

static gboolean
build_partitioned (ShoalGroupNet *g, ShoalNet *full, const ShoalNetOptions *opts, GError **error)
{
  Plan *pl = &g->plan;
  int k = g->k;
  if (!shoal_plan_make (pl, error))
    return FALSE;
  /* batch-split inputs read a shard each; a whole input reads the group's */
  g->confs = g_new0 (ShoalConf *, k);
  for (int w = g->first; w < g->first + g->nlocal; w++)
    {
      ShoalNetOptions sub = group_worker_options (g, opts, w);
      g->confs[w] = shoal_plan_subnet_conf (pl, w, error);
      if (g->confs[w] == NULL)
        return FALSE;
      g->nets[w] = shoal_net_new (g->confs[w], &sub, error);
      if (g->nets[w] == NULL)
        return FALSE;
    }

  for (int l = 0; l < pl->norig; l++)
    {
      PlanLayer *o = &pl->origs[l];
      for (int w = 0; w < k; w++)
        o->parts[w] = shoal_plan_has_part (o, w) && g->nets[w] != NULL ? shoal_net_find (g->nets[w], o->name) : NULL;
      if ((o->ops->flags & SHOAL_LAYER_LOSS) && o->dim == 0)
        for (int w = g->first; w < g->first + g->nlocal; w++)
          o->parts[w]->loss_norm = o->batch_rows;  /* each part divides by the whole batch */
    }

  g->store = copy_layout (shoal_net_params (full), g->conf, error);
  if (g->store == NULL)
    return FALSE;
  make_proxies (g, full);
  g->wctx = g_new0 (WorkerCtx, k);
  for (int w = 0; w < k; w++)
    g->wctx[w] = (WorkerCtx) { g, w, g_array_new (FALSE, FALSE, sizeof (PrivGrad)), NULL, NULL };
  if (g->wire != NULL)
    {
      g->ww = g_new0 (WorkerWire, k);
      for (int w = 0; w < k; w++)
        g->ww[w] = (WorkerWire) { w / g->nlocal, g_array_new (FALSE, FALSE, sizeof (WireRange)), NULL, NULL };
      g->land_bufs = g_ptr_array_new_with_free_func (shoal_free_aligned);
    }
  if (!map_params (g, error) || !make_links (g, error) || (g->wire != NULL && !spread_prepare (g, error)))
    return FALSE;

  /* the plan's nodes are not needed once the sub-nets exist */
  shoal_plan_drop_nodes (pl);

  g->threads = g_new0 (GThread *, k);
  for (int w = g->first + 1; w < g->first + g->nlocal; w++)
    {
      char *name = g_strdup_printf ("group-%d-worker-%d", opts ? opts->group : 0, w);
      g->threads[w] = shoal_thread_start (name, group_helper_thread, &g->wctx[w], error);
      g_free (name);
      /* the caller frees the group, which stops the helpers started */
      if (g->threads[w] == NULL)
        {
          g_prefix_error (error, "group %d of %d workers: ", opts ? opts->group : 0, k);
          return FALSE;
        }
    }
  return TRUE;
}

static ShoalGroupNet *
group_net_new (ShoalConf *conf, int k, const ShoalNetOptions *opts, const ShoalGroupWire *wire,
               GError **error)
{
  if (k < 1)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "%s: a group needs at least 1 worker, got %d",
                   shoal_conf_origin (conf), k);
      return NULL;
    }
  if (wire != NULL && (wire->nprocs < 2 || k % wire->nprocs != 0 || wire->this_proc < 0
                       || wire->this_proc >= wire->nprocs))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                   "%s: a group of %d workers cannot be spread as process %d of %d: each of 2 or more "
                   "processes holds an equal share of the workers",
                   shoal_conf_origin (conf), k, wire->this_proc, wire->nprocs);
      return NULL;
    }
  if (k > 1 && opts != NULL && !shoal_device_is_cpu (opts->device))
    {
      /* sub-nets would trade activations through host bridges and sum
       * gradients on the host: a GPU group is one worker */
      char *dev = shoal_device_to_string (opts->device);
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_UNSUPPORTED,
                   "%s: group %d of %d workers in one process cannot run on %s: a partitioned group "
                   "runs on the CPU; give GPU groups nworkers_per_group = 1",
                   shoal_conf_origin (conf), opts->group, k, dev);
      g_free (dev);
      return NULL;
    }
  ShoalGroupNet *g = g_new0 (ShoalGroupNet, 1);
  g->k = k;
  g->conf = conf;
  g->nets = g_new0 (ShoalNet *, k);
  g->next_notify = -1;
  g->wire = wire;
  g->nlocal = wire != NULL ? k / wire->nprocs : k;
  g->first = wire != NULL ? wire->this_proc * g->nlocal : 0;
  g->wait_ms = 300 * 1000;
  g_mutex_init (&g->lock);
  g_cond_init (&g->wake);
  g_cond_init (&g->done);

  ShoalNetOptions full_opts = { .shard_count = 1 };
  if (opts != NULL)
    full_opts = *opts;
  full_opts.worker = 0;
  ShoalNet *full = shoal_net_new (conf, &full_opts, error);
  if (full == NULL)
    {
      shoal_group_net_free (g);
      return NULL;
    }
  shoal_plan_read (&g->plan, conf, k, full);
  g->plan.spread = wire != NULL;
  if (k == 1)
    {
      /* the plain net: no threads, no copies */
      g->nets[0] = full;
      g->store = shoal_net_params (full);
      g->wctx = g_new0 (WorkerCtx, 1);
      g->wctx[0] = (WorkerCtx) { g, 0, g_array_new (FALSE, FALSE, sizeof (PrivGrad)), NULL, NULL };
      for (int l = 0; l < g->plan.norig; l++)
        {
          PlanLayer *o = &g->plan.origs[l];
          o->parts[0] = shoal_net_find (full, o->name);
          o->proxy = o->parts[0];
        }
      return g;
    }
  gboolean ok = build_partitioned (g, full, opts, error);
  shoal_net_free (full);
  if (!ok)
    {
      shoal_group_net_free (g);
      return NULL;
    }
  return g;
}

gboolean
shoal_partition_batch_only (ShoalConf *conf, int k, ShoalMemoryBudget *budget,
                            gboolean *batch_only, GError **error)
{
  ShoalNetOptions opts = { .shard_count = 1, .budget = budget };
  ShoalNet *full = shoal_net_new (conf, &opts, error);
  if (full == NULL)
    return FALSE;
  Plan plan = { 0 };
  shoal_plan_read (&plan, conf, k, full);
  plan.spread = TRUE;   /* asked for a group spread over processes */
  gboolean ok = shoal_plan_make (&plan, error);
  *batch_only = TRUE;
  for (int l = 0; ok && l < plan.norig; l++)
    if (!(plan.origs[l].ops->flags & SHOAL_LAYER_INPUT) && plan.origs[l].dim != 0)
      *batch_only = FALSE;
  shoal_plan_clear (&plan);
  shoal_net_free (full);
  return ok;
}

ShoalGroupNet *
shoal_group_net_new (ShoalConf *conf, int k, const ShoalNetOptions *opts, GError **error)
{
  return group_net_new (conf, k, opts, NULL, error);
}

ShoalGroupNet *
shoal_group_net_new_spread (ShoalConf *conf, int k, const ShoalNetOptions *opts,
                            const ShoalGroupWire *wire, GError **error)
{
  g_return_val_if_fail (wire != NULL, NULL);
  return group_net_new (conf, k, opts, wire, error);
}

