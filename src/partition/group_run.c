/* Running a group net: the threads of its workers (one per local worker
 * but the caller's), the commands they run (forward, backward, a whole
 * train step), the gradient sums of batch-split params handed to the
 * caller layer by layer as they complete, and the group's loss and
 * metrics combined from the workers' parts. */
#include <math.h>
#include <time.h>

#include "core/parallel.h"
#include "partition/group_priv.h"

/* Sub-net params read their values in the group store. */
void
group_bind_values (ShoalGroupNet *g)
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

typedef struct {
  ShoalGroupNet *g;
  ParamSum *sum;
} SumJob;

/* Worker 0's gradient plus the others', in worker order, element by
 * element: the same floats however the range is cut.  The others' are
 * zeroed as they are read, ready for the next backward to add into (one
 * pass instead of a sum and a memset). */
static void
sum_chunk (size_t begin, size_t end, gpointer data)
{
  SumJob *job = data;
  float *restrict dst = job->g->store->grads + job->sum->offset;
  for (int w = 1; w < job->g->k; w++)
    {
      float *restrict src = job->sum->priv[w];
      for (size_t j = begin; j < end; j++)
        {
          dst[j] += src[j];
          src[j] = 0;
        }
    }
}

/* Adds the other workers' gradients of the layer's batch-split params,
 * large ones on the cores that idle meanwhile (core/parallel.h). */
static void
sum_grads (ShoalGroupNet *g, ParamLayer *pl)
{
  for (guint i = 0; pl->sums != NULL && i < pl->sums->len; i++)
    {
      SumJob job = { g, &g_array_index (pl->sums, ParamSum, i) };
      shoal_parallel_for (job.sum->count, SHOAL_PARALLEL_GRAIN, sum_chunk, &job);
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
      if (!p->summed)
        memset (p->data, 0, p->count * sizeof (float));
    }
  if (g->timing)
    timed_backward (g->nets[w], layer_done, c, c->bwd_s);
  else
    shoal_net_backward_notify (g->nets[w], layer_done, c);
}

gpointer
group_helper_thread (gpointer data)
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
    group_bind_values (g);
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
  if (g->k == 1 && !g->timing)
    return shoal_net_train_step (g->nets[0], ready, user_data);
  if (g->k == 1)
    {
      double loss = shoal_group_net_forward (g, SHOAL_PHASE_TRAIN);
      shoal_group_net_backward_notify (g, ready, user_data);
      return loss;
    }
  if (g->store->values != g->bound_values)
    group_bind_values (g);
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

void
group_stop_threads (ShoalGroupNet *g)
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
