/* Slice routing and the comm thread of one worker.
 *
 * Gradients go out from where backward left them: a queued slice's
 * gradients stay in the store until the comm thread has sent them, and
 * are cleared after - by the server's update as it reads them where it
 * reads them from shared memory (or in this process), by the comm thread
 * where they crossed a socket.  Nothing writes them in between -
 * a complete slice is not touched again in its step, and the next
 * backward starts only after shoal_param_client_wait - so the worker
 * neither copies nor clears 2 x the model per step on its own thread.
 *
 * On one host the slices' bytes need not cross a socket at all: the
 * client moves its store's values and gradients into a shared-memory
 * region (rpc/shm_region.h) and offers it to every server it reaches
 * over Thrift; a server that can open it reads the gradients and writes
 * the values in place, and one push_pull_shm call carries all the slices
 * a layer completed.  A server that cannot (another host) stays on the
 * socket, slice by slice. */
#include "comm/param_client.h"

#include <string.h>

#include "comm/device_wire.h"
#include "core/codec.h"
#include "core/error.h"
#include "core/thread_start.h"
#include "rpc/shm_region.h"

#define PULL_TIMEOUT_US (G_GINT64_CONSTANT (600) * G_USEC_PER_SEC)

typedef struct {
  ShoalRpcClientOptions opts;  /* host and token owned */
  ShoalRpcClient *rpc;
} Connection;

/* What one range_done (or step_done) completed: slices [from, to). */
typedef struct {
  int from, to;
  gboolean stop;               /* the comm thread's last item */
} Batch;

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

  ShoalCodec values_codec;    /* shoal_param_client_set_codecs: what crosses sockets */
  ShoalCodec grads_codec;
  float *residual;            /* quantised gradients: what earlier steps did not send; or NULL */
  float *residual_next;       /* this step's, committed once the whole step went through */
  gboolean residual_written;  /* this step encoded into residual_next */
  guint8 *wire;               /* the comm thread's encoded gradient */
  size_t wire_bytes;
  ShoalDeviceWire *dw;        /* shoal_param_client_codecs_on_device: gradients encoded and values decoded
                               * on the GPU, the residuals kept there; or NULL */

  gboolean shm_enabled;       /* shoal_param_client_set_shared_memory */
  ShoalShmRegion *shm;        /* the store's values and grads, offered to the servers; owned by
                               * the store (it outlives the client); or NULL */

  GThread *thread;
  GAsyncQueue *queue;         /* Batch *, owned by the queue until popped */
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
shoal_param_client_new (ShoalParamStore *store, int nslices, ShoalUpdateMode mode)
{
  g_return_val_if_fail (store->allocated && nslices >= 1, NULL);
  return client_alloc (store, nslices, mode);
}

gboolean
shoal_param_client_set_codecs (ShoalParamClient *c, ShoalCodec values_codec, ShoalCodec grads_codec,
                               GError **error)
{
  g_return_val_if_fail (values_codec == SHOAL_CODEC_FP32 || values_codec == SHOAL_CODEC_FP16
                        || values_codec == SHOAL_CODEC_BF16, FALSE);
  if (shoal_codec_lossy_feedback (grads_codec) && c->residual == NULL)
    {
      /* two buffers the size of the params: the conf decides, so running
       * out of memory is an error naming them, not an abort */
      float *residual = shoal_try_alloc_floats (c->store->total, error);
      float *next = residual != NULL ? shoal_try_alloc_floats (c->store->total, error) : NULL;
      if (next == NULL)
        {
          shoal_free_aligned (residual);
          shoal_param_store_prefix_nomem (c->store, error, "param client: gradient residuals");
          return FALSE;
        }
      c->residual = residual;
      c->residual_next = next;
    }
  c->values_codec = values_codec;
  c->grads_codec = grads_codec;
  return TRUE;
}

gboolean
shoal_param_client_codecs_on_device (ShoalParamClient *c, ShoalStream *compute, GError **error)
{
  g_return_val_if_fail (c->shared == NULL && c->thread == NULL, FALSE);
  ShoalCodec *codecs = g_new (ShoalCodec, 2 * c->nslices), *values = codecs + c->nslices;
  for (int s = 0; s < c->nslices; s++)
    {
      /* a server in this process takes and gives floats */
      gboolean local = c->routes[s].local != NULL;
      codecs[s] = local ? SHOAL_CODEC_FP32 : c->grads_codec;
      values[s] = local ? SHOAL_CODEC_FP32 : c->values_codec;
    }
  c->dw = shoal_device_wire_new (c->store, c->nslices, c->begin, c->end, codecs, values, compute, error);
  g_free (codecs);
  if (c->dw != NULL && c->residual != NULL && !shoal_device_wire_set_residual (c->dw, c->residual, error))
    g_clear_pointer (&c->dw, shoal_device_wire_free);
  return c->dw != NULL;
}

gboolean
shoal_param_client_values_to_host (ShoalParamClient *c, GError **error)
{
  /* the values of every slice are on the device (those that came as
   * floats went up from here): one copy of them all */
  return c->dw == NULL
         || shoal_device_copy (c->store->values, c->store->dev_values, c->store->served * sizeof (float), error);
}

#define RESIDUAL_MAGIC 0x53485253u   /* "SRHS" */

gboolean
shoal_param_client_has_residuals (ShoalParamClient *c)
{
  return c->residual != NULL;
}

GBytes *
shoal_param_client_save_residuals (ShoalParamClient *c)
{
  if (c->residual == NULL)
    return NULL;
  GError *error = NULL;
  if (c->dw != NULL && !shoal_device_wire_get_residual (c->dw, c->residual, &error))
    {
      /* the device failed: the step fails too; the last residuals the host saw are what there is */
      g_warning ("param client: the gradient residuals could not be read from the GPU: %s", error->message);
      g_error_free (error);
    }
  guint32 head[4] = { RESIDUAL_MAGIC, 1, (guint32) c->grads_codec, 0 };
  guint64 total = c->store->total;
  GByteArray *b = g_byte_array_sized_new ((guint) (sizeof head + sizeof total + total * sizeof (float)));
  g_byte_array_append (b, (const guint8 *) head, sizeof head);
  g_byte_array_append (b, (const guint8 *) &total, sizeof total);
  g_byte_array_append (b, (const guint8 *) c->residual, (guint) (total * sizeof (float)));
  return g_byte_array_free_to_bytes (b);
}

gboolean
shoal_param_client_load_residuals (ShoalParamClient *c, GBytes *blob, GError **error)
{
  gsize len;
  const guint8 *data = g_bytes_get_data (blob, &len);
  guint32 head[4];
  guint64 total;
  if (c->residual == NULL)
    return TRUE;
  if (len < sizeof head + sizeof total)
    goto bad;
  memcpy (head, data, sizeof head);
  memcpy (&total, data + sizeof head, sizeof total);
  if (head[0] != RESIDUAL_MAGIC || head[1] != 1 || total != c->store->total
      || len != sizeof head + sizeof total + total * sizeof (float))
    goto bad;
  if (head[2] != (guint32) c->grads_codec)
    {
      /* another quantiser: its residual is a fair start too, but say so */
      g_message ("param client: the checkpoint's residuals are of wire_grads = %s, this run quantises "
                 "with %s", head[2] < SHOAL_CODEC_COUNT ? shoal_codec_name ((ShoalCodec) head[2]) : "?",
                 shoal_codec_name (c->grads_codec));
    }
  memcpy (c->residual, data + sizeof head + sizeof total, total * sizeof (float));
  return c->dw == NULL || shoal_device_wire_set_residual (c->dw, c->residual, error);
bad:
  g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
               "the checkpoint's gradient residuals (%zu bytes) do not fit this model's %zu values", len,
               c->store->total);
  return FALSE;
}

void
shoal_param_client_set_shared_memory (ShoalParamClient *c, gboolean enabled)
{
  c->shm_enabled = enabled;
}

gboolean
shoal_param_client_shared_memory (ShoalParamClient *c)
{
  if (c->shm == NULL)
    return FALSE;
  for (guint i = 0; i < c->connections->len; i++)
    if (shoal_rpc_client_shm_usable (((Connection *) g_ptr_array_index (c->connections, i))->rpc))
      return TRUE;
  return FALSE;
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

gboolean
shoal_push_due (int n_push, gint64 step)
{
  return (step + 1) % n_push == 0;
}

gboolean
shoal_fetch_due (int n_fetch, gint64 step)
{
  return (step + 1) % n_fetch == 0;
}

void
shoal_push_mean (float *grads, size_t n, int n_push)
{
  if (n_push <= 1)
    return;
  float inv = 1.0f / (float) n_push;
  for (size_t i = 0; i < n; i++)
    grads[i] *= inv;
}

/* Whether step's gradients go out now, and whether values come back. */
static gboolean
pushes_at (const ShoalParamClient *c, gint64 step)
{
  return shoal_push_due (c->n_push, step);
}

static gboolean
fetches_at (const ShoalParamClient *c, gint64 step)
{
  return shoal_fetch_due (c->n_fetch, step);
}

/* Pushes the slice's gradient from the store and pulls its values into
 * it, with the version they are of.  The push says which version the
 * gradient was computed on, so the server can tell its staleness. */
static gboolean
exchange (ShoalParamClient *c, int s, GError **error)
{
  size_t b = c->begin[s], n = c->end[s] - b;
  float *values = c->store->values + b;
  /* encoded on the GPU: floats for a local server, the wire codec's bytes for a remote one */
  const guint8 *encoded = c->dw != NULL ? shoal_device_wire_grad_bytes (c->dw, s) : NULL;
  const float *grad = encoded != NULL ? (const float *) (const void *) encoded : c->store->grads + b;
  ShoalPushOrigin origin = { c->have_version[s], c->unit };
  Route *r = &c->routes[s];

  gboolean fetch = fetches_at (c, c->step);
  if (r->local != NULL)
    {
      gint64 ready = 0;
      gboolean ok = shoal_server_push_from (r->local, s, grad, n, c->step, &origin, &ready, error)
                    && shoal_server_wait_bound (r->local, s, c->unit, c->step, PULL_TIMEOUT_US, error)
                    && (!fetch
                        || shoal_server_pull (r->local, s, values, n, ready, PULL_TIMEOUT_US, &c->have_version[s],
                                              error));
      if (ok && fetch && c->dw != NULL)
        shoal_device_wire_values_arrived (c->dw, s, values);
      return ok;
    }
  ShoalRpcClient *rpc = ((Connection *) g_ptr_array_index (c->connections, r->connection))->rpc;
  const guint8 *wire = (const guint8 *) grad;
  if (c->grads_codec != SHOAL_CODEC_FP32 && encoded == NULL)
    {
      size_t bytes = shoal_codec_bytes (c->grads_codec, n);
      if (c->wire_bytes < bytes)
        {
          g_free (c->wire);
          c->wire = g_malloc (bytes);
          c->wire_bytes = bytes;
        }
      float *residual = NULL;
      if (c->residual != NULL)
        {
          /* the step's residual is committed only once all of it went out */
          residual = c->residual_next + b;
          memcpy (residual, c->residual + b, n * sizeof (float));
          c->residual_written = TRUE;
        }
      shoal_codec_encode (c->grads_codec, grad, residual, n, c->wire);
      wire = c->wire;
    }
  if (c->mode == SHOAL_UPDATE_ASYNC && !fetch)
    return shoal_rpc_client_push_coded (rpc, s, wire, c->grads_codec, n, c->step, &origin, error);
  /* one round trip: the server answers once the update is in (SYNC: once
   * every worker of the group pushed); values for the GPU stay encoded
   * until they are there */
  guint8 *encoded_values = c->dw != NULL ? shoal_device_wire_value_bytes (c->dw, s) : NULL;
  gboolean ok = encoded_values != NULL
                  ? shoal_rpc_client_push_pull_encoded (rpc, s, wire, c->grads_codec, encoded_values, c->values_codec,
                                                        n, c->step, &origin, &c->have_version[s], error)
                  : shoal_rpc_client_push_pull_coded (rpc, s, wire, c->grads_codec, values, c->values_codec, n,
                                                      c->step, &origin, &c->have_version[s], error);
  if (ok && c->dw != NULL)
    shoal_device_wire_values_arrived (c->dw, s, encoded_values != NULL ? NULL : values);
  return ok;
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

/* Whether slice s goes through shared memory, and over which client. */
static ShoalRpcClient *
shm_route (ShoalParamClient *c, int s)
{
  Route *r = &c->routes[s];
  if (c->shm == NULL || r->local != NULL)
    return NULL;
  ShoalRpcClient *rpc = ((Connection *) g_ptr_array_index (c->connections, r->connection))->rpc;
  return shoal_rpc_client_shm_usable (rpc) ? rpc : NULL;
}

/* One call carrying the slices `ids` (count) through shared memory; the
 * server leaves their gradients zero when it succeeds. */
static gboolean
exchange_shm (ShoalParamClient *c, ShoalRpcClient *rpc, const gint32 *ids, int count, GError **error)
{
  gint64 *bases = g_new (gint64, count), *versions = g_new (gint64, count);
  gboolean fetch = fetches_at (c, c->step);
  for (int i = 0; i < count; i++)
    bases[i] = c->have_version[ids[i]];
  gboolean ok = shoal_rpc_client_push_pull_shm (rpc, ids, count, c->step, bases, c->unit, fetch, TRUE,
                                                versions, error);
  for (int i = 0; i < count && ok && fetch; i++)
    c->have_version[ids[i]] = versions[i];
  g_free (bases);
  g_free (versions);
  return ok;
}

/* Sends (and fetches) the slices of one batch.  The slices are grouped by
 * the process that serves them and the groups taken in the order of
 * their top slice, which is the same in every unit of the job whatever
 * is local or remote to it: a group through shared memory is one call
 * that pushes all its slices before it waits, any other group goes slice
 * by slice from the top, and so no unit can wait for a slice that
 * another unit sends only after a call of its own that waits on the
 * first (the deadlock of two AllReduce workers each sending first what
 * the other's server holds). */
static gboolean
exchange_batch (ShoalParamClient *c, const Batch *batch, gboolean *cleared, GError **error)
{
  int n = batch->to - batch->from;
  gint32 *ids = g_new (gint32, n);
  gboolean *done = g_new0 (gboolean, n);
  gboolean ok = TRUE;
  for (int top = batch->to - 1; top >= batch->from && ok; top--)
    {
      if (done[top - batch->from])
        continue;
      Route *r = &c->routes[top];
      ShoalRpcClient *rpc = shm_route (c, top);
      int count = 0;
      for (int s = top; s >= batch->from; s--)
        if (!done[s - batch->from] && c->routes[s].local == r->local
            && c->routes[s].connection == r->connection)
          {
            done[s - batch->from] = TRUE;
            ids[count++] = s;
          }
      if (rpc != NULL)
        {
          ok = exchange_shm (c, rpc, ids, count, error);
          for (int i = 0; i < count && ok; i++)
            cleared[ids[i] - batch->from] = TRUE;
        }
      else
        for (int i = 0; i < count && ok; i++)
          ok = exchange (c, ids[i], error);
    }
  g_free (ids);
  g_free (done);
  return ok;
}

static gpointer
comm_thread (gpointer data)
{
  ShoalParamClient *c = data;
  for (;;)
    {
      Batch *batch = g_async_queue_pop (c->queue);
      if (batch->stop)
        {
          g_free (batch);
          break;
        }
      GError *error = NULL;
      gboolean failed_before;
      g_mutex_lock (&c->lock);
      failed_before = c->error != NULL;
      g_mutex_unlock (&c->lock);
      /* after a failure (a STOPPED refusal too) the step is given up:
       * the rest of its slices are not sent */
      gboolean *cleared = g_new0 (gboolean, batch->to - batch->from);
      /* bytes encoded on the GPU: their copy down is waited for even in a
       * step given up, as the next step's encoding overwrites the source */
      gboolean ok = c->dw == NULL || shoal_device_wire_wait (c->dw, batch->from, &error);
      if (ok && !failed_before)
        ok = exchange_batch (c, batch, cleared, &error);
      /* the values uploaded: the next forward may read them, and their
       * host buffers be received into again */
      if (c->dw != NULL && !shoal_device_wire_values_sync (c->dw, ok ? &error : NULL))
        ok = FALSE;
      if (!ok)
        {
          g_mutex_lock (&c->lock);
          keep_failure (c, batch->from, error);
          g_mutex_unlock (&c->lock);
        }
      /* sent (or given up): backward adds into zeroes next step; a server
       * that read them from shared memory cleared them already, and the
       * encoding on the GPU as it read them */
      for (int s = batch->from; s < batch->to && c->dw == NULL; s++)
        if (!cleared[s - batch->from])
          memset (c->store->grads + c->begin[s], 0, (c->end[s] - c->begin[s]) * sizeof (float));
      g_free (cleared);
      g_free (batch);
      g_mutex_lock (&c->lock);
      if (--c->outstanding == 0)
        g_cond_broadcast (&c->idle);
      g_mutex_unlock (&c->lock);
    }
  return NULL;
}

/* Moves the store into a shared region and offers it to every remote
 * server; servers on other hosts refuse it and stay on the socket. */
static void
share_store (ShoalParamClient *c)
{
  ShoalParamStore *store = c->store;
  GError *error = NULL;
  size_t total = (store->total + 15) / 16 * 16;   /* both areas 64-byte aligned */
  c->shm = shoal_shm_region_create ("params", 2 * total * sizeof (float), &error);
  if (c->shm == NULL)
    {
      g_debug ("param client: %s; slices go over the socket", error->message);
      g_error_free (error);
      return;
    }
  float *data = shoal_shm_region_data (c->shm);
  if (!shoal_param_store_move_to (store, data, data + total, c->shm,
                                  (GDestroyNotify) shoal_shm_region_free))
    {
      shoal_shm_region_free (c->shm);
      c->shm = NULL;
      return;
    }
  ShoalShmOffer offer;
  shoal_shm_region_offer (c->shm, &offer);
  for (guint i = 0; i < c->connections->len; i++)
    shoal_rpc_client_use_shm (((Connection *) g_ptr_array_index (c->connections, i))->rpc, &offer,
                              0, (gint64) total);
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
  if (c->shm_enabled && c->connections->len > 0 && c->store->dev_values == NULL)
    share_store (c);
  c->queue = g_async_queue_new ();
  c->thread = shoal_thread_start ("comm", comm_thread, c, error);
  if (c->thread == NULL)
    {
      if (c->unit >= 0)
        g_prefix_error (error, "unit %d: ", c->unit);
      return FALSE;
    }
  return TRUE;
}

gboolean
shoal_param_client_fetch (ShoalParamClient *c, GError **error)
{
  return shoal_param_client_fetch_version (c, 0, error);
}

gboolean
shoal_param_client_fetch_version (ShoalParamClient *c, gint64 min_version, GError **error)
{
  for (int s = 0; s < c->nslices; s++)
    {
      size_t b = c->begin[s], n = c->end[s] - b;
      Route *r = &c->routes[s];
      gboolean ok;
      if (c->shared != NULL && min_version <= 0)  /* the store is the server's values */
        c->have_version[s] = shoal_server_slice_version (c->shared, s), ok = TRUE;
      else if (c->shared != NULL)  /* the wait alone */
        ok = shoal_server_pull (c->shared, s, NULL, n, min_version, PULL_TIMEOUT_US, &c->have_version[s], error);
      else if (r->local != NULL)
        ok = shoal_server_pull (r->local, s, c->store->values + b, n, min_version, PULL_TIMEOUT_US,
                                &c->have_version[s], error);
      else
        ok = shoal_rpc_client_pull (((Connection *) g_ptr_array_index (c->connections, r->connection))->rpc,
                                    s, c->store->values + b, n, min_version, &c->have_version[s], error);
      if (!ok)
        return FALSE;
      if (c->dw != NULL)
        shoal_device_wire_values_arrived (c->dw, s, c->store->values + b);
    }
  return c->dw == NULL || shoal_device_wire_values_sync (c->dw, error);
}

/* Queues (or, shared, applies) slices [from, unqueued). */
static void
queue_slices (ShoalParamClient *c, int from, gint64 step)
{
  float *grads = c->store->grads;
  if (from >= c->unqueued)
    return;
  if (c->shared != NULL)
    {
      /* a server on the device takes the net's device gradients */
      if (shoal_server_on_device (c->shared))
        grads = c->store->dev_grads;
      for (int s = c->unqueued - 1; s >= from; s--)
        {
          size_t b = c->begin[s], n = c->end[s] - b;
          GError *error = NULL;
          ShoalPushOrigin origin = { c->have_version[s], c->unit };
          /* the update clears the gradients as it reads them */
          if (!shoal_server_push_consume (c->shared, s, grads + b, n, step, &origin, NULL, &c->have_version[s],
                                          NULL, &error))
            keep_failure (c, s, error);
        }
    }
  else
    {
      if (c->dw != NULL)
        c->residual_written |= shoal_device_wire_encode (c->dw, from, c->unqueued,
                                                       c->n_push > 1 ? 1.0f / (float) c->n_push : 1.0f);
      else
        shoal_push_mean (grads + c->begin[from], c->end[c->unqueued - 1] - c->begin[from], c->n_push);
      Batch *batch = g_new0 (Batch, 1);
      batch->from = from;
      batch->to = c->unqueued;
      g_mutex_lock (&c->lock);
      c->outstanding++;
      g_mutex_unlock (&c->lock);
      g_async_queue_push (c->queue, batch);
    }
  c->unqueued = from;
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
shoal_param_client_range_done (ShoalParamClient *c, size_t begin, gint64 step)
{
  set_step (c, step);
  if (!pushes_at (c, step))
    return;  /* gradients keep adding up in the store */
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
  if (c->residual_written && failure == NULL)
    {
      float *t = c->residual;
      c->residual = c->residual_next;
      c->residual_next = t;
      if (c->dw != NULL)
        shoal_device_wire_commit (c->dw);
    }
  c->residual_written = FALSE;
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
shoal_param_client_stop_at (ShoalParamClient *c, gint64 step, gint64 *stopped_at, GError **error)
{
  if (stopped_at != NULL)
    *stopped_at = step;
  if (c->mode != SHOAL_UPDATE_SYNC)
    return TRUE;
  /* each server is asked for the latest step one before it stops at:
   * with backup workers a step may be applied already (on one server and
   * not yet on another), and a server told of the earlier step would
   * refuse its other slices' last pushes */
  gint64 at = step, first = -1;
  ShoalServer *done = NULL;  /* as in checkpoint: at most one local server */
  for (int s = 0; s < c->nslices; s++)
    {
      ShoalServer *local = c->routes[s].local;
      if (local == NULL || local == done)
        continue;
      if (!shoal_server_stop_at (local, at, &at, error))
        return FALSE;
      first = first < 0 ? at : first;
      done = local;
    }
  for (guint i = 0; i < c->connections->len; i++)
    {
      Connection *conn = g_ptr_array_index (c->connections, i);
      if (conn->rpc == NULL)
        continue;
      if (!shoal_rpc_client_stop_at (conn->rpc, at, &at, error))
        return FALSE;
      first = first < 0 ? at : first;
    }
  if (first >= 0 && at != first)
    g_warning ("stop at step %" G_GINT64_FORMAT ": the servers stop at steps %" G_GINT64_FORMAT
               " and %" G_GINT64_FORMAT " (backup workers' step applied on one server process before the "
               "stop, not yet on another); the checkpoints may hold no common step",
               step, first, at);
  if (stopped_at != NULL)
    *stopped_at = at;
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
      Batch *stop = g_new0 (Batch, 1);
      stop->stop = TRUE;
      g_async_queue_push_front (c->queue, stop);
      g_thread_join (c->thread);
    }
  if (c->queue != NULL)
    {
      Batch *left;
      while ((left = g_async_queue_try_pop (c->queue)) != NULL)
        g_free (left);
      g_async_queue_unref (c->queue);
    }
  for (guint i = 0; i < c->connections->len; i++)
    {
      Connection *conn = g_ptr_array_index (c->connections, i);
      shoal_rpc_client_free (conn->rpc);
      g_free ((char *) conn->opts.host);
      g_free ((char *) conn->opts.token);
      g_free (conn);
    }
  g_ptr_array_free (c->connections, TRUE);
  shoal_device_wire_free (c->dw);
  if (c->error != NULL)
    g_error_free (c->error);
  shoal_free_aligned (c->residual);
  shoal_free_aligned (c->residual_next);
  g_free (c->wire);
  g_mutex_clear (&c->lock);
  g_cond_clear (&c->idle);
  g_free (c->routes);
  g_free (c->have_version);
  g_free (c->begin);
  g_free (c->end);
  g_free (c);
}
