/* The group net: the k sub-nets of a worker group (planned in plan.c),
 * one param store in the unpartitioned layout that they all view, the
 * in-process bridge transport, and the threads that run the sub-nets.
 *
 * The unpartitioned net is built first: it checks the user's conf with
 * the user's file and lines, and gives the shapes and the param layout;
 * it is freed once the sub-nets exist. */
#include "partition/partition.h"

#include <math.h>
#include <string.h>
#include <time.h>

#include "core/error.h"
#include "layers/bridge.h"
#include "layers/slice.h"
#include "layers/split.h"
#include "partition/group_priv.h"

const ShoalOption shoal_partition_options[] = {
  { "partition_dim", SHOAL_OPT_INT, "0", -1, 1, NULL,
    "default partition dim of the layers of a worker group's net: 0 batch, 1 feature, "
    "-1 whole on the group's worker 0 (a layer's own partition_dim wins)" },
  SHOAL_OPTION_END
};

/* in-process bridges: pointers handed over under the link's lock */

typedef struct {
  GMutex lock;
  GCond cond;
  guint64 data_sent, data_taken, grad_sent, grad_taken;
} Inproc;

static void
inproc_attach (ShoalBridgeLink *link)
{
  ShoalLayer *src = link->src, *dst = link->dst;
  ShoalShape shape = dst->out.shape;
  /* the consumer's gradient is written straight where bridge_src's source reads it */
  if (shoal_bridge_exchanges_grad (dst))
    shoal_tensor_view (&dst->grad, src->src_grad[0]->data, &shape);
  /* the data is the producer's: drop the buffers the net gave the dst */
  shoal_tensor_view (&dst->out, src->out.data, &shape);
  if (dst->label.data != NULL)
    {
      ShoalShape rows = dst->label.shape;
      shoal_tensor_view (&dst->label, src->label.data, &rows);
    }
}

static void
inproc_send_data (ShoalBridgeLink *link, ShoalLayer *src)
{
  Inproc *in = link->data;
  (void) src;
  g_mutex_lock (&in->lock);
  in->data_sent++;
  g_cond_signal (&in->cond);
  g_mutex_unlock (&in->lock);
}

static void
inproc_recv_data (ShoalBridgeLink *link, ShoalLayer *dst)
{
  Inproc *in = link->data;
  g_mutex_lock (&in->lock);
  while (in->data_sent == in->data_taken)
    g_cond_wait (&in->cond, &in->lock);
  in->data_taken++;
  g_mutex_unlock (&in->lock);
  const ShoalLayer *src = link->src;
  dst->out.data = src->out.data;
  dst->out.shape = src->out.shape;
  dst->out.capacity = src->out.capacity;
  if (dst->label.data != NULL)
    {
      dst->label.data = src->label.data;
      dst->label.shape = src->label.shape;
      dst->label.capacity = src->label.capacity;
    }
}

static void
inproc_send_grad (ShoalBridgeLink *link, ShoalLayer *dst)
{
  Inproc *in = link->data;
  (void) dst;
  g_mutex_lock (&in->lock);
  in->grad_sent++;
  g_cond_signal (&in->cond);
  g_mutex_unlock (&in->lock);
}

static void
inproc_recv_grad (ShoalBridgeLink *link, ShoalLayer *src)
{
  Inproc *in = link->data;
  (void) src;
  g_mutex_lock (&in->lock);
  while (in->grad_sent == in->grad_taken)
    g_cond_wait (&in->cond, &in->lock);
  in->grad_taken++;
  g_mutex_unlock (&in->lock);
}

static const ShoalBridgeTransport inproc_transport = {
  .attach = inproc_attach,
  .send_data = inproc_send_data,
  .recv_data = inproc_recv_data,
  .send_grad = inproc_send_grad,
  .recv_grad = inproc_recv_grad,
};

static void
link_free (ShoalBridgeLink *link)
{
  if (link->transport == &inproc_transport)
    {
      Inproc *in = link->data;
      g_mutex_clear (&in->lock);
      g_cond_clear (&in->cond);
      g_free (in);
    }
  else
    g_free (link->data);
  g_free (link);
}

/* Sub-net params read their values in the group store. */
static void
bind_values (ShoalGroupNet *g)
{
  for (guint i = 0; i < g->views->len; i++)
    {
      ParamView *v = &g_array_index (g->views, ParamView, i);
      ShoalShape shape = v->param->shape;
      shoal_tensor_view (&v->param->value, g->store->values + v->offset, &shape);
      if (v->grad)
        shoal_tensor_view (&v->param->grad, g->store->grads + v->offset, &shape);
    }
  g->bound_values = g->store->values;
}

/* Adds the other workers' gradients of the layer's batch-split params. */
static void
sum_grads (ShoalGroupNet *g, ParamLayer *pl)
{
  for (guint i = 0; pl->sums != NULL && i < pl->sums->len; i++)
    {
      ParamSum *s = &g_array_index (pl->sums, ParamSum, i);
      float *restrict dst = g->store->grads + s->offset;
      for (int w = 1; w < g->k; w++)
        {
          const float *restrict src = s->priv[w];
          for (size_t j = 0; j < s->count; j++)
            dst[j] += src[j];
        }
    }
}

void
group_players_done (ShoalGroupNet *g, int i, int n)
{
  ParamLayer *pl = &g->players[i];
  g_mutex_lock (&g->lock);
  pl->remaining -= n;
  gboolean last = pl->remaining == 0 && n > 0;
  g_mutex_unlock (&g->lock);
  if (last)
    {
      sum_grads (g, pl);
      g_mutex_lock (&g->lock);
      pl->ready = TRUE;
      g_cond_broadcast (&g->done);
      g_mutex_unlock (&g->lock);
    }
}

/* Backward hook of every worker: the last one to finish a layer completes
 * its gradients; the first local worker (the caller's thread) hands ready
 * layers on. */
static void drain_ready (ShoalGroupNet *g);

static void
layer_done (ShoalLayer *layer, gpointer user_data)
{
  WorkerCtx *c = user_data;
  ShoalGroupNet *g = c->group;
  gpointer idx = g_hash_table_lookup (g->plan.orig_index, layer->name);
  if (idx == NULL)
    return;
  PlanLayer *o = &g->plan.origs[GPOINTER_TO_INT (idx) - 1];
  if (o->param_layer >= 0)
    group_players_done (g, o->param_layer, 1);
  if (c->worker == g->first)
    drain_ready (g);
}

/* Calls `ready` for the complete layers at the top of the order. */
static void
drain_ready (ShoalGroupNet *g)
{
  g_mutex_lock (&g->lock);
  while (g->next_notify >= 0 && g->players[g->next_notify].ready)
    {
      ParamLayer *pl = &g->players[g->next_notify--];
      if (g->ready != NULL)
        {
          g_mutex_unlock (&g->lock);
          g->ready (g->plan.origs[pl->orig].proxy, g->ready_data);
          g_mutex_lock (&g->lock);
        }
    }
  g_mutex_unlock (&g->lock);
}

static double
now_s (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

/* shoal_net_forward's loop with a clock around each layer. */
static void
timed_forward (ShoalNet *net, ShoalPhase phase, double *seconds)
{
  for (guint i = 0; i < shoal_net_n_layers (net); i++)
    {
      ShoalLayer *layer = shoal_net_layer (net, i);
      if (!(layer->ops->flags & SHOAL_LAYER_OWN_ROWS) && layer->nsrcs > 0)
        {
          int rows = shoal_tensor_rows (&layer->srcs[0]->out);
          shoal_tensor_set_rows (&layer->out, rows);
          if (layer->grad.data != NULL)
            shoal_tensor_set_rows (&layer->grad, rows);
        }
      double t0 = now_s ();
      layer->ops->forward (layer, phase);
      seconds[i] += now_s () - t0;
    }
}

/* shoal_net_backward_notify's loop with a clock around each layer. */
static void
timed_backward (ShoalNet *net, ShoalParamsReadyFunc ready, gpointer data, double *seconds)
{
  for (guint i = shoal_net_n_layers (net); i-- > 0;)
    {
      ShoalLayer *layer = shoal_net_layer (net, i);
      if (!layer->needs_grad || layer->ops->backward == NULL)
        continue;
      double t0 = now_s ();
      layer->ops->backward (layer);
      seconds[i] += now_s () - t0;
      if (ready != NULL && layer->nparams > 0)
        ready (layer, data);
    }
}

static void
run_worker (ShoalGroupNet *g, int w, Command cmd)
{
  WorkerCtx *c = &g->wctx[w];
  if (cmd == CMD_FORWARD || cmd == CMD_STEP)
    {
      if (g->timing)
        timed_forward (g->nets[w], g->phase, c->fwd_s);
      else
        shoal_net_forward (g->nets[w], g->phase);
      if (cmd == CMD_FORWARD)
        return;
    }
  GArray *priv = c->priv_grads;
  for (guint i = 0; i < priv->len; i++)
    {
      PrivGrad *p = &g_array_index (priv, PrivGrad, i);
      memset (p->data, 0, p->count * sizeof (float));
    }
  if (g->timing)
    timed_backward (g->nets[w], layer_done, c, c->bwd_s);
  else
    shoal_net_backward_notify (g->nets[w], layer_done, c);
}

static gpointer
helper_thread (gpointer data)
{
  WorkerCtx *c = data;
  ShoalGroupNet *g = c->group;
  guint64 seen = 0;

  g_mutex_lock (&g->lock);
  for (;;)
    {
      while (g->cmd_seq == seen)
        g_cond_wait (&g->wake, &g->lock);
      seen = g->cmd_seq;
      Command cmd = g->cmd;
      g_mutex_unlock (&g->lock);
      if (cmd == CMD_QUIT)
        return NULL;
      run_worker (g, c->worker, cmd);
      g_mutex_lock (&g->lock);
      if (--g->pending == 0)
        g_cond_broadcast (&g->done);
    }
}

/* Starts `cmd` on the helpers (and a spread group's followers), runs the
 * first local worker here, waits for the others (handing ready layers on
 * meanwhile). */
void
group_run_command (ShoalGroupNet *g, Command cmd)
{
  gboolean leads = g->wire != NULL && g->first == 0;
  if (leads)
    spread_send_command (g, cmd);
  g_mutex_lock (&g->lock);
  g->cmd = cmd;
  g->cmd_seq++;
  g->pending = g->nlocal - 1;
  g_cond_broadcast (&g->wake);
  g_mutex_unlock (&g->lock);

  run_worker (g, g->first, cmd);
  if (leads)
    spread_collect (g, cmd);

  g_mutex_lock (&g->lock);
  for (;;)
    {
      if (cmd != CMD_FORWARD && g->next_notify >= 0 && g->players[g->next_notify].ready)
        {
          g_mutex_unlock (&g->lock);
          drain_ready (g);
          g_mutex_lock (&g->lock);
          continue;
        }
      if (g->pending == 0)
        break;
      g_cond_wait (&g->done, &g->lock);
    }
  g_mutex_unlock (&g->lock);

  if (cmd != CMD_FORWARD)
    {
      /* layers whose backward never ran (none in the built-in types) */
      for (int i = 0; i < g->nplayers; i++)
        if (!g->players[i].ready)
          {
            sum_grads (g, &g->players[i]);
            g->players[i].ready = TRUE;
          }
      drain_ready (g);
    }
}

static void
stop_threads (ShoalGroupNet *g)
{
  if (g->threads == NULL)
    return;
  g_mutex_lock (&g->lock);
  g->cmd = CMD_QUIT;
  g->cmd_seq++;
  g_cond_broadcast (&g->wake);
  g_mutex_unlock (&g->lock);
  for (int w = 0; w < g->k; w++)
    if (g->threads[w] != NULL)
      g_thread_join (g->threads[w]);
  g_free (g->threads);
  g->threads = NULL;
}

void
shoal_group_net_free (ShoalGroupNet *g)
{
  if (g == NULL)
    return;
  if (g->wire != NULL)
    shoal_group_net_finish (g, TRUE);
  stop_threads (g);
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
copy_layout (ShoalParamStore *full)
{
  ShoalParamStore *store = shoal_param_store_new ();
  for (guint i = 0; i < full->params->len; i++)
    {
      ShoalParam *p = g_ptr_array_index (full->params, i);
      ShoalParam *q = shoal_param_store_declare (store, p->name, &p->shape, &p->init, p->fan_in,
                                                 p->fan_out, p->lr_scale, p->wd_scale);
      g_assert (q->offset == p->offset);
    }
  shoal_param_store_allocate (store);
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
  WireRange r = { fp->offset, fp->count, (int) (pl - g->players), NULL, NULL, fp->lr_scale == 0 };
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
                  PrivGrad pg = { sp->grad.data, sp->count };
                  g_array_append_val (g->wctx[w].priv_grads, pg);
                }
              if (g->wire != NULL && g->first > 0)
                {
                  WireRange r = { v.offset, sp->count, g->nplayers - 1, sp, NULL, fp->lr_scale == 0 };
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
  bind_values (g);
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
  g->links = g_ptr_array_new_with_free_func ((GDestroyNotify) link_free);
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
      ShoalBridgeLink *link = g_new0 (ShoalBridgeLink, 1);
      Inproc *in = g_new0 (Inproc, 1);
      g_mutex_init (&in->lock);
      g_cond_init (&in->cond);
      link->transport = &inproc_transport;
      link->data = in;
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

static gboolean
build_partitioned (ShoalGroupNet *g, ShoalNet *full, const ShoalNetOptions *opts, GError **error)
{
  Plan *pl = &g->plan;
  int k = g->k;
  if (!shoal_plan_make (pl, error))
    return FALSE;
  /* batch-split inputs read a shard each; a whole input reads the group's */
  gboolean split_input = shoal_plan_split_input (pl);
  g->confs = g_new0 (ShoalConf *, k);
  for (int w = g->first; w < g->first + g->nlocal; w++)
    {
      ShoalNetOptions sub = { .shard_count = 1 };
      if (opts != NULL)
        sub = *opts;
      sub.shard_count = MAX (sub.shard_count, 1);
      if (split_input)
        {
          sub.shard_index = sub.shard_index * k + w;
          sub.shard_count *= k;
        }
      sub.worker = w;
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

  g->store = copy_layout (shoal_net_params (full));
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
      g->threads[w] = g_thread_new (name, helper_thread, &g->wctx[w]);
      g_free (name);
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
shoal_partition_batch_only (ShoalConf *conf, int k, gboolean *batch_only, GError **error)
{
  ShoalNet *full = shoal_net_new (conf, NULL, error);
  if (full == NULL)
    return FALSE;
  Plan plan = { 0 };
  shoal_plan_read (&plan, conf, k, full);
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

int
shoal_group_net_size (ShoalGroupNet *g)
{
  return g->k;
}

static double combined_value (ShoalGroupNet *g, const PlanLayer *o);

static double
group_loss (ShoalGroupNet *g)
{
  double loss = 0;
  for (int l = 0; l < g->plan.norig; l++)
    {
      const PlanLayer *o = &g->plan.origs[l];
      if (o->ops->flags & SHOAL_LAYER_LOSS)
        loss += o->proxy->loss_weight * combined_value (g, o);
    }
  if (g->wire != NULL && !shoal_group_net_ok (g, NULL))
    return NAN;  /* the step did not happen everywhere */
  return loss;
}

double
shoal_group_net_forward (ShoalGroupNet *g, ShoalPhase phase)
{
  if (g->k == 1 && !g->timing)
    return shoal_net_forward (g->nets[0], phase);
  if (g->k == 1)
    {
      timed_forward (g->nets[0], phase, g->wctx[0].fwd_s);
      double loss = 0;
      for (int l = 0; l < g->plan.norig; l++)
        if (g->plan.origs[l].ops->flags & SHOAL_LAYER_LOSS)
          loss += g->plan.origs[l].proxy->loss_weight * g->plan.origs[l].proxy->out.data[0];
      return loss;
    }
  if (g->store->values != g->bound_values)
    bind_values (g);
  g->phase = phase;
  group_run_command (g, CMD_FORWARD);
  return group_loss (g);
}

/* Before a backward: every layer's count of workers, nothing handed on yet. */
void
group_arm_backward (ShoalGroupNet *g, ShoalParamsReadyFunc ready, gpointer user_data)
{
  g_mutex_lock (&g->lock);
  for (int i = 0; i < g->nplayers; i++)
    {
      PlanLayer *o = &g->plan.origs[g->players[i].orig];
      /* a follower hands nothing on: its layers complete at the end */
      if (g->wire != NULL && g->first > 0)
        g->players[i].remaining = 0;
      else
        g->players[i].remaining = o->dim < 0 ? 1 : g->k;
      g->players[i].ready = FALSE;
    }
  g->next_notify = g->nplayers - 1;
  g->ready = ready;
  g->ready_data = user_data;
  g_mutex_unlock (&g->lock);
}

void
shoal_group_net_backward_notify (ShoalGroupNet *g, ShoalParamsReadyFunc ready, gpointer user_data)
{
  if (g->k == 1)
    {
      if (g->timing)
        timed_backward (g->nets[0], ready, user_data, g->wctx[0].bwd_s);
      else
        shoal_net_backward_notify (g->nets[0], ready, user_data);
      return;
    }
  group_arm_backward (g, ready, user_data);
  group_run_command (g, CMD_BACKWARD);
  g->ready = NULL;
  g->ready_data = NULL;
}

double
shoal_group_net_train_step (ShoalGroupNet *g, ShoalParamsReadyFunc ready, gpointer user_data)
{
  if (g->k == 1)
    {
      double loss = shoal_group_net_forward (g, SHOAL_PHASE_TRAIN);
      shoal_group_net_backward_notify (g, ready, user_data);
      return loss;
    }
  if (g->store->values != g->bound_values)
    bind_values (g);
  g->phase = SHOAL_PHASE_TRAIN;
  group_arm_backward (g, ready, user_data);
  group_run_command (g, CMD_STEP);
  g->ready = NULL;
  g->ready_data = NULL;
  return group_loss (g);
}

void
shoal_group_net_backward (ShoalGroupNet *g)
{
  shoal_group_net_backward_notify (g, NULL, NULL);
}

ShoalParamStore *
shoal_group_net_params (ShoalGroupNet *g)
{
  return g->store;
}

/* The group's value of loss or metric layer o after a forward. */
static double
combined_value (ShoalGroupNet *g, const PlanLayer *o)
{
  if (o->dim < 0)
    return o->parts[0]->out.data[0];
  double sum = 0, weighted = 0;
  int rows = 0;
  for (int w = 0; w < g->k; w++)
    {
      ShoalLayer *part = o->parts[w];
      int r;
      double v;
      if (part != NULL)
        {
          r = part->nsrcs > 0 ? shoal_tensor_rows (&part->srcs[0]->out) : 1;
          v = part->out.data[0];
        }
      else if (g->ww != NULL && g->ww[w].value != NULL)
        {
          /* a worker in another process: as its last result said */
          r = g->ww[w].rows[o - g->plan.origs];
          v = g->ww[w].value[o - g->plan.origs];
        }
      else
        continue;
      sum += v;
      weighted += v * r;
      rows += r;
    }
  if (rows == 0)
    return 0;
  /* each part's loss is its rows' sum over the full batch's rows */
  if (o->ops->flags & SHOAL_LAYER_LOSS)
    return sum * o->batch_rows / rows;
  return weighted / rows;
}

guint
shoal_group_net_metrics (ShoalGroupNet *g, ShoalMetric *out, guint n)
{
  if (g->k == 1)
    return shoal_net_metrics (g->nets[0], out, n);
  guint count = 0;
  for (int l = 0; l < g->plan.norig && count < n; l++)
    {
      const PlanLayer *o = &g->plan.origs[l];
      if (!(o->ops->flags & (SHOAL_LAYER_LOSS | SHOAL_LAYER_METRIC)))
        continue;
      out[count].layer = o->name;
      out[count].type = o->ops->type;
      out[count].is_loss = (o->ops->flags & SHOAL_LAYER_LOSS) != 0;
      out[count].value = combined_value (g, o);
      count++;
    }
  return count;
}

int
shoal_group_net_batch_rows (ShoalGroupNet *g)
{
  if (g->plan.input < 0)
    return 0;
  const PlanLayer *o = &g->plan.origs[g->plan.input];
  int rows = 0;
  for (int w = 0; w < g->k; w++)
    if (o->parts[w] != NULL)
      rows += shoal_tensor_rows (&o->parts[w]->out);
    else if (g->ww != NULL && g->ww[w].rows != NULL && shoal_plan_has_part (o, w))
      rows += g->ww[w].rows[g->plan.input];
  return rows;
}

int
shoal_group_net_batch_size (ShoalGroupNet *g)
{
  return g->plan.input >= 0 ? g->plan.origs[g->plan.input].shape.dim[0] : 0;
}

ShoalLayer *
shoal_group_net_input (ShoalGroupNet *g)
{
  return g->plan.input >= 0 ? g->plan.origs[g->plan.input].parts[g->first] : NULL;
}

ShoalNet *
shoal_group_net_worker (ShoalGroupNet *g, int worker)
{
  g_return_val_if_fail (worker >= 0 && worker < g->k, NULL);
  return g->nets[worker];
}

ShoalLayer *
shoal_group_net_find (ShoalGroupNet *g, int worker, const char *name)
{
  g_return_val_if_fail (worker >= 0 && worker < g->k, NULL);
  return g->nets[worker] != NULL ? shoal_net_find (g->nets[worker], name) : NULL;
}

guint
shoal_group_net_n_layers (ShoalGroupNet *g)
{
  return (guint) g->plan.norig;
}

ShoalLayer *
shoal_group_net_layer (ShoalGroupNet *g, guint i)
{
  g_return_val_if_fail (i < (guint) g->plan.norig, NULL);
  return g->plan.origs[i].proxy;
}

/* ---- graph, summary, timing -------------------------------------------- */

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
  const char *t = layer->ops->type;
  return layer->ops == &shoal_layer_split_ops || strcmp (t, "bridge_src") == 0
         || strcmp (t, "bridge_dst") == 0
         || (strchr (layer->name, ':') != NULL
             && (strcmp (t, "concat") == 0 || strcmp (t, "slice") == 0));
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

/* Records: u32 length, one worker's net state; k of them. */
GBytes *
shoal_group_net_save_state (ShoalGroupNet *g, GError **error)
{
  GBytes **states = g_new0 (GBytes *, g->k);
  for (int w = g->first; w < g->first + g->nlocal; w++)
    states[w] = shoal_net_save_state (g->nets[w]);
  gboolean ok = g->wire == NULL || spread_save_states (g, states, error);
  GByteArray *b = g_byte_array_new ();
  for (int w = 0; w < g->k; w++)
    {
      if (ok)
        {
          gsize len = 0;
          gconstpointer data = g_bytes_get_data (states[w], &len);
          guint32 n = (guint32) len;
          g_byte_array_append (b, (guint8 *) &n, sizeof n);
          g_byte_array_append (b, data, n);
        }
      if (states[w] != NULL)
        g_bytes_unref (states[w]);
    }
  g_free (states);
  if (!ok)
    {
      g_byte_array_unref (b);
      return NULL;
    }
  return g_byte_array_free_to_bytes (b);
}

gboolean
shoal_group_net_load_state (ShoalGroupNet *g, GBytes *state, GError **error)
{
  gsize len = 0;
  const guint8 *p = g_bytes_get_data (state, &len), *end = p + len;
  GBytes **states = g_new0 (GBytes *, g->k);
  gboolean ok = TRUE;
  for (int w = 0; ok && w < g->k; w++)
    {
      guint32 n;
      if ((gsize) (end - p) < sizeof n || (memcpy (&n, p, sizeof n), (gsize) (end - p) - sizeof n < n))
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                       "the checkpointed state is of a group of another size or damaged");
          ok = FALSE;
          break;
        }
      states[w] = g_bytes_new (p + sizeof n, n);
      p += sizeof n + n;
    }
  if (ok && p != end)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                   "the checkpointed state is of a group of another size");
      ok = FALSE;
    }
  for (int w = g->first; ok && w < g->first + g->nlocal; w++)
    ok = shoal_net_load_state (g->nets[w], states[w], error);
  if (ok && g->wire != NULL)
    ok = spread_load_states (g, states, error);
  for (int w = 0; w < g->k; w++)
    if (states[w] != NULL)
      g_bytes_unref (states[w]);
  g_free (states);
  return ok;
}
