/* Slice routing and the comm thread of one worker. */
#include "comm/param_client.h"

#include <string.h>

#include "core/error.h"

#define STOP_ITEM (-1)  /* queue items must not be NULL */
#define PULL_TIMEOUT_US (G_GINT64_CONSTANT (600) * G_USEC_PER_SEC)

typedef struct {
  ShoalRpcClientOptions opts;  /* host and token owned */
  ShoalRpcClient *rpc;
} Connection;

typedef struct {
  ShoalServer *local;  /* or */
  int connection;      /* index into connections; -1 when local */
} Route;

struct _ShoalParamClient {
  ShoalParamStore *store;
  int nslices;
  ShoalUpdateMode mode;
  Route *routes;
  size_t *begin, *end;
  GPtrArray *connections;     /* Connection * */
  ShoalServer *shared;        /* new_shared: the one local server */

  int n_push, n_fetch;        /* async knobs, >= 1 */
  int unit;                   /* SSP clock id sent with every push; -1 none */
  gint64 *have_version;       /* per slice: the version of the values in the store (what its
                               * next gradient is computed on); written by the comm thread,
                               * read by the worker after shoal_param_client_wait */

  /* the step in flight; written by the worker before queuing */
  gint64 step;
  size_t done_from;           /* gradients of offsets >= done_from are complete */
  int unqueued;               /* slices [0, unqueued) not queued yet this step */
  float *sendbuf;             /* store->total floats: gradients being sent */

  GThread *thread;
  GAsyncQueue *queue;         /* GINT_TO_POINTER (slice + 1); STOP_ITEM = stop */
  GMutex lock;
  GCond idle;
  int outstanding;            /* queued and not finished */
  GError *error;              /* first failure of the comm thread */
  gint64 stop_step;           /* the servers' stop step when error is SHOAL_ERROR_STOPPED, else -1 */
};

static ShoalParamClient *
client_alloc (ShoalParamStore *store, int nslices, ShoalUpdateMode mode)
{
  ShoalParamClient *c = g_new0 (ShoalParamClient, 1);
  c->store = store;
  c->nslices = nslices;
  c->mode = mode;
  c->routes = g_new0 (Route, nslices);
  c->begin = g_new0 (size_t, nslices);
  c->end = g_new0 (size_t, nslices);
  for (int s = 0; s < nslices; s++)
    {
      shoal_slice_range (store->served, nslices, s, &c->begin[s], &c->end[s]);
      c->routes[s].connection = -1;
    }
  c->connections = g_ptr_array_new ();
  c->unqueued = nslices;
  c->done_from = store->served;
  c->n_push = c->n_fetch = 1;
  c->unit = -1;
  c->have_version = g_new0 (gint64, nslices);
  c->stop_step = -1;
  g_mutex_init (&c->lock);
  g_cond_init (&c->idle);
  return c;
}

ShoalParamClient *
shoal_param_client_new (ShoalParamStore *store, int nslices, ShoalUpdateMode mode, GError **error)
{
  g_return_val_if_fail (store->allocated && nslices >= 1, NULL);
  float *sendbuf = shoal_try_alloc_floats (store->total, error);
  if (sendbuf == NULL)
    {
      shoal_param_store_prefix_nomem (store, error, "param client: send buffer");
      return NULL;
    }
  ShoalParamClient *c = client_alloc (store, nslices, mode);
  c->sendbuf = sendbuf;
  return c;
}

ShoalParamClient *
shoal_param_client_new_shared (ShoalParamStore *store, ShoalServer *server)
{
  ShoalParamClient *c = client_alloc (store, shoal_server_n_slices (server), SHOAL_UPDATE_SYNC);
  c->shared = server;
  for (int s = 0; s < c->nslices; s++)
    c->routes[s].local = server;
  shoal_param_store_borrow_values (store, shoal_server_values (server));
  return c;
}

void
shoal_param_client_route_local (ShoalParamClient *c, int slice, ShoalServer *server)
{
  g_return_if_fail (slice >= 0 && slice < c->nslices);
  c->routes[slice].local = server;
  c->routes[slice].connection = -1;
}

void
shoal_param_client_route_remote (ShoalParamClient *c, int slice, const ShoalRpcClientOptions *endpoint)
{
  g_return_if_fail (slice >= 0 && slice < c->nslices);
  for (guint i = 0; i < c->connections->len; i++)
    {
      Connection *conn = g_ptr_array_index (c->connections, i);
      if (conn->opts.port == endpoint->port && strcmp (conn->opts.host, endpoint->host) == 0)
        {
          c->routes[slice].connection = (int) i;
          c->routes[slice].local = NULL;
          return;
        }
    }
  Connection *conn = g_new0 (Connection, 1);
  conn->opts = *endpoint;
  conn->opts.host = g_strdup (endpoint->host);
  conn->opts.token = g_strdup (endpoint->token);
  g_ptr_array_add (c->connections, conn);
  c->routes[slice].connection = (int) c->connections->len - 1;
  c->routes[slice].local = NULL;
}

void
shoal_param_client_set_unit (ShoalParamClient *c, int unit)
{
  c->unit = unit;
}

void
shoal_param_client_set_frequency (ShoalParamClient *c, int n_push, int n_fetch)
{
  g_return_if_fail (n_push >= 1 && n_fetch >= 1);
  g_return_if_fail (c->mode == SHOAL_UPDATE_ASYNC || (n_push == 1 && n_fetch == 1));
  c->n_push = n_push;
  c->n_fetch = n_fetch;
}

/* Whether step's gradients go out now, and whether values come back. */
static gboolean
pushes_at (const ShoalParamClient *c, gint64 step)
{
  return (step + 1) % c->n_push == 0;
}

static gboolean
fetches_at (const ShoalParamClient *c, gint64 step)
{
  return (step + 1) % c->n_fetch == 0;
}

/* Pushes the slice's gradient from sendbuf and pulls its values into
 * the store, with the version they are of.  The push says which version
 * the gradient was computed on, so the server can tell its staleness. */
static gboolean
exchange (ShoalParamClient *c, int s, GError **error)
{
  size_t b = c->begin[s], n = c->end[s] - b;
  float *values = c->store->values + b;
  const float *grad = c->sendbuf + b;
  ShoalPushOrigin origin = { c->have_version[s], c->unit };
  Route *r = &c->routes[s];

  if (r->local != NULL)
    {
      gint64 ready = 0;
      return shoal_server_push_from (r->local, s, grad, n, c->step, &origin, &ready, error)
             && shoal_server_wait_bound (r->local, s, c->unit, c->step, PULL_TIMEOUT_US, error)
             && (!fetches_at (c, c->step)
                 || shoal_server_pull (r->local, s, values, n, ready, PULL_TIMEOUT_US,
                                       &c->have_version[s], error));
    }
  ShoalRpcClient *rpc = ((Connection *) g_ptr_array_index (c->connections, r->connection))->rpc;
  if (c->mode == SHOAL_UPDATE_ASYNC && !fetches_at (c, c->step))
    return shoal_rpc_client_push_from (rpc, s, grad, n, c->step, &origin, error);
  /* one round trip: the server answers once the update is in (SYNC: once
   * every worker of the group pushed) */
  return shoal_rpc_client_push_pull_from (rpc, s, grad, values, n, c->step, &origin,
                                          &c->have_version[s], error);
}

/* After a call for slice s failed with SHOAL_ERROR_STOPPED: the step its
 * server stops the job at. */
static gint64
route_stop_step (ShoalParamClient *c, int s)
{
  Route *r = &c->routes[s];
  if (r->local != NULL)
    return shoal_server_stop_step (r->local);
  return shoal_rpc_client_stop_step (((Connection *) g_ptr_array_index (c->connections, r->connection))->rpc);
}

/* Keeps the first failure of a step (under c->lock, or in the worker's
 * thread when there is no comm thread); frees the others. */
static void
keep_failure (ShoalParamClient *c, int s, GError *error)
{
  if (c->error != NULL)
    {
      g_error_free (error);
      return;
    }
  c->error = error;
  c->stop_step = g_error_matches (error, SHOAL_ERROR, SHOAL_ERROR_STOPPED) ? route_stop_step (c, s) : -1;
}

static gpointer
comm_thread (gpointer data)
{
  ShoalParamClient *c = data;
  for (;;)
    {
      int item = GPOINTER_TO_INT (g_async_queue_pop (c->queue));
      if (item == STOP_ITEM)
        break;
      GError *error = NULL;
      gboolean failed_before;
      g_mutex_lock (&c->lock);
      failed_before = c->error != NULL;
      g_mutex_unlock (&c->lock);
      /* after a failure (a STOPPED refusal too) the step is given up:
       * the rest of its slices are not sent */
      if (!failed_before && !exchange (c, item - 1, &error))
        {
          g_mutex_lock (&c->lock);
          keep_failure (c, item - 1, error);
          g_mutex_unlock (&c->lock);
        }
      g_mutex_lock (&c->lock);
      if (--c->outstanding == 0)
        g_cond_broadcast (&c->idle);
      g_mutex_unlock (&c->lock);
    }
  return NULL;
}

gboolean
shoal_param_client_start (ShoalParamClient *c, GError **error)
{
  if (c->shared != NULL)
    return TRUE;
  for (guint i = 0; i < c->connections->len; i++)
    {
      Connection *conn = g_ptr_array_index (c->connections, i);
      conn->rpc = shoal_rpc_client_connect (&conn->opts, error);
      if (conn->rpc == NULL)
        return FALSE;
    }
  for (int s = 0; s < c->nslices; s++)
    if (c->routes[s].local == NULL && c->routes[s].connection < 0)
      {
        g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL, "slice %d has no server", s);
        return FALSE;
      }
  c->queue = g_async_queue_new ();
  c->thread = g_thread_new ("comm", comm_thread, c);
  return TRUE;
}

gboolean
shoal_param_client_fetch (ShoalParamClient *c, GError **error)
{
  if (c->shared != NULL)
    {
      for (int s = 0; s < c->nslices; s++)
        c->have_version[s] = shoal_server_slice_version (c->shared, s);
      return TRUE;
    }
  for (int s = 0; s < c->nslices; s++)
    {
      size_t b = c->begin[s], n = c->end[s] - b;
      Route *r = &c->routes[s];
      gboolean ok;
      if (r->local != NULL)
        ok = shoal_server_pull (r->local, s, c->store->values + b, n, 0, PULL_TIMEOUT_US,
                                &c->have_version[s], error);
      else
        ok = shoal_rpc_client_pull (((Connection *) g_ptr_array_index (c->connections, r->connection))->rpc,
                                    s, c->store->values + b, n, 0, &c->have_version[s], error);
      if (!ok)
        return FALSE;
    }
  return TRUE;
}

/* Queues (or, shared, applies) slices [from, unqueued). */
static void
queue_slices (ShoalParamClient *c, int from, gint64 step)
{
  float *grads = c->store->grads;
  for (int s = c->unqueued - 1; s >= from; s--)
    {
      size_t b = c->begin[s], n = c->end[s] - b;
      if (c->shared != NULL)
        {
          GError *error = NULL;
          ShoalPushOrigin origin = { c->have_version[s], c->unit };
          if (!shoal_server_push_from (c->shared, s, grads + b, n, step, &origin, &c->have_version[s],
                                       &error))
            keep_failure (c, s, error);
        }
      else
        {
          if (c->n_push == 1)
            memcpy (c->sendbuf + b, grads + b, n * sizeof (float));
          else
            {
              /* the mean of the summed steps, so lr means the same */
              float inv = 1.0f / (float) c->n_push;
              for (size_t i = 0; i < n; i++)
                c->sendbuf[b + i] = grads[b + i] * inv;
            }
          g_mutex_lock (&c->lock);
          c->outstanding++;
          g_mutex_unlock (&c->lock);
          g_async_queue_push (c->queue, GINT_TO_POINTER (s + 1));
        }
      memset (grads + b, 0, n * sizeof (float));
    }
  c->unqueued = MIN (c->unqueued, from);
}

/* The comm thread reads c->step while it sends this step's slices; a
 * step's first call writes it (nothing is in flight after the wait), its
 * later calls must not rewrite it, even with the same value: that was a
 * data race (TSan, make SANITIZE=thread test-threads). */
static void
set_step (ShoalParamClient *c, gint64 step)
{
  if (c->step != step)
    c->step = step;
}

void
shoal_param_client_layer_done (ShoalParamClient *c, ShoalLayer *layer, gint64 step)
{
  size_t begin, end;
  set_step (c, step);
  if (!pushes_at (c, step))
    return;  /* gradients keep adding up in the store */
  if (!shoal_layer_param_range (layer, &begin, &end))
    return;
  c->done_from = MIN (c->done_from, begin);
  /* the first slice lying wholly at or above done_from */
  int from = c->unqueued;
  while (from > 0 && c->begin[from - 1] >= c->done_from)
    from--;
  if (from < c->unqueued)
    queue_slices (c, from, step);
}

void
shoal_param_client_step_done (ShoalParamClient *c, gint64 step)
{
  set_step (c, step);
  if (pushes_at (c, step))
    queue_slices (c, 0, step);
}

gboolean
shoal_param_client_wait (ShoalParamClient *c, GError **error)
{
  g_mutex_lock (&c->lock);
  while (c->outstanding > 0)
    g_cond_wait (&c->idle, &c->lock);
  GError *failure = c->error;
  c->error = NULL;
  g_mutex_unlock (&c->lock);
  c->unqueued = c->nslices;
  c->done_from = c->store->served;
  if (failure != NULL)
    {
      g_propagate_error (error, failure);
      return FALSE;
    }
  return TRUE;
}

gint64
shoal_param_client_catch_up_step (ShoalParamClient *c, gint64 step)
{
  if (c->mode != SHOAL_UPDATE_SYNC)
    return step;
  gint64 at = G_MAXINT64;
  for (int s = 0; s < c->nslices; s++)
    at = MIN (at, c->have_version[s]);
  return MAX (step, at);
}

gint64
shoal_param_client_stop_step (ShoalParamClient *c)
{
  g_mutex_lock (&c->lock);
  gint64 step = c->stop_step;
  g_mutex_unlock (&c->lock);
  return step;
}

gboolean
shoal_param_client_stop_at (ShoalParamClient *c, gint64 step, GError **error)
{
  if (c->mode != SHOAL_UPDATE_SYNC)
    return TRUE;
  ShoalServer *done = NULL;  /* as in checkpoint: at most one local server */
  for (int s = 0; s < c->nslices; s++)
    {
      ShoalServer *local = c->routes[s].local;
      if (local == NULL || local == done)
        continue;
      if (!shoal_server_stop_at (local, step, error))
        return FALSE;
      done = local;
    }
  for (guint i = 0; i < c->connections->len; i++)
    {
      Connection *conn = g_ptr_array_index (c->connections, i);
      if (conn->rpc != NULL && !shoal_rpc_client_stop_at (conn->rpc, step, error))
        return FALSE;
    }
  return TRUE;
}

gboolean
shoal_param_client_checkpoint (ShoalParamClient *c, ShoalCheckpoint *local_store, gint64 step,
                               GError **error)
{
  ShoalServer *done = NULL;  /* clients use at most one local server (their group's) */
  for (int s = 0; s < c->nslices; s++)
    {
      ShoalServer *local = c->routes[s].local;
      if (local == NULL || local == done)
        continue;
      if (!shoal_server_checkpoint (local, local_store, step, error))
        return FALSE;
      done = local;
    }
  for (guint i = 0; i < c->connections->len; i++)
    {
      Connection *conn = g_ptr_array_index (c->connections, i);
      if (conn->rpc != NULL && !shoal_rpc_client_checkpoint (conn->rpc, step, error))
        return FALSE;
    }
  return TRUE;
}

gboolean
shoal_param_client_shutdown_servers (ShoalParamClient *c, int rank, GError **error)
{
  for (guint i = 0; i < c->connections->len; i++)
    {
      Connection *conn = g_ptr_array_index (c->connections, i);
      if (conn->rpc != NULL && !shoal_rpc_client_shutdown (conn->rpc, rank, error))
        return FALSE;
    }
  return TRUE;
}

void
shoal_param_client_free (ShoalParamClient *c)
{
  if (c == NULL)
    return;
  if (c->thread != NULL)
    {
      g_async_queue_push_front (c->queue, GINT_TO_POINTER (STOP_ITEM));
      g_thread_join (c->thread);
    }
  if (c->queue != NULL)
    g_async_queue_unref (c->queue);
  for (guint i = 0; i < c->connections->len; i++)
    {
      Connection *conn = g_ptr_array_index (c->connections, i);
      shoal_rpc_client_free (conn->rpc);
      g_free ((char *) conn->opts.host);
      g_free ((char *) conn->opts.token);
      g_free (conn);
    }
  g_ptr_array_free (c->connections, TRUE);
  if (c->error != NULL)
    g_error_free (c->error);
  shoal_free_aligned (c->sendbuf);
  g_mutex_clear (&c->lock);
  g_cond_clear (&c->idle);
  g_free (c->routes);
  g_free (c->have_version);
  g_free (c->begin);
  g_free (c->end);
  g_free (c);
}
