/* A server whose updates run on a GPU (server.h, shoal_server_move_to_device).
 *
 * A worker on a GPU with its server in the same process would otherwise
 * copy every gradient down, update on the host and copy every value back
 * up at each step: for a model of a few million params that is most of
 * the step (docs/GPU.md).  In device mode the server keeps its
 * bookkeeping (versions, Adam's counts, the schedule, stop steps,
 * checkpoints) on the host, as always, and only the arithmetic moves: the
 * update of each segment is a kernel on the worker net's compute stream,
 * after the backward that made the gradient and before the next forward
 * that reads the values, so neither side waits for the other.  The host
 * copies catch up only when someone reads them. */
#include "server/server_priv.h"

#include <string.h>

#include "core/error.h"

static gboolean
device_mode_refused (ShoalServer *server, GError **error)
{
  const char *why = NULL;
  if (server->opts.mode != SHOAL_UPDATE_SYNC)
    why = "it applies gradients asynchronously";
  else if (server->opts.sync_contributors - server->opts.backup_workers != 1)
    why = "it sums the gradients of several workers";
  else if (server->opts.keep_baseline || server->opts.elastic_center)
    why = "it keeps Hogwild or elastic-averaging state";
  else if (server->adopted != NULL)
    why = "its values are in a shared-memory region";
  else if (server->dev_values != NULL)
    why = "it is on a device already";
  if (why == NULL)
    return FALSE;
  g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "server: cannot run its updates on the worker's device: %s",
               why);
  return TRUE;
}

gboolean
shoal_server_move_to_device (ShoalServer *server, float *dev_values, ShoalDevice device, ShoalStream *stream,
                             GError **error)
{
  g_return_val_if_fail (server != NULL && dev_values != NULL && stream != NULL, FALSE);
  g_return_val_if_fail (!shoal_device_is_cpu (device), FALSE);
  if (device_mode_refused (server, error))
    return FALSE;
  shoal_device_activate (device);
  float *dev_state = NULL;
  size_t state_floats = server->total * (size_t) server->state_per_value;
  if (state_floats > 0)
    {
      dev_state = shoal_device_alloc (device, state_floats * sizeof (float), error);
      if (dev_state == NULL)
        return FALSE;
    }
  gboolean ok = TRUE;
  for (int i = 0; ok && i < server->opts.nslices; i++)
    {
      Slice *s = &server->slices[i];
      if (!s->hosted)
        continue;
      size_t bytes = (s->end - s->begin) * sizeof (float);
      ok = shoal_device_copy (dev_values + s->begin, server->values + s->begin, bytes, error);
      for (int k = 0; ok && k < server->state_per_value; k++)
        {
          size_t at = (size_t) k * server->total + s->begin;
          ok = shoal_device_copy (dev_state + at, server->state + at, bytes, error);
        }
    }
  if (!ok)
    {
      shoal_device_free (device, dev_state);
      return FALSE;
    }
  server->device = device;
  server->stream = stream;
  server->dev_values = dev_values;
  server->dev_state = dev_state;
  g_atomic_int_set (&server->host_stale, FALSE);
  return TRUE;
}

gboolean
shoal_server_move_to_host (ShoalServer *server, GError **error)
{
  if (server->dev_values == NULL)
    return TRUE;
  gboolean ok = shoal_server_sync_host (server, error);
  if (server->dev_state != NULL)
    shoal_device_free (server->device, server->dev_state);
  server->dev_state = NULL;
  server->dev_values = NULL;
  server->stream = NULL;
  return ok;
}

gboolean
shoal_server_on_device (ShoalServer *server)
{
  return server->dev_values != NULL;
}

gboolean
shoal_server_sync_host (ShoalServer *server, GError **error)
{
  if (server->dev_values == NULL || !g_atomic_int_get (&server->host_stale))
    return TRUE;
  shoal_device_activate (server->device);
  /* the updates were enqueued on the worker net's stream: wait for them,
   * then copy (a synchronous copy would also wait, but would report an
   * update's failure as its own) */
  if (!shoal_stream_sync (server->stream, error))
    return FALSE;
  g_atomic_int_set (&server->host_stale, FALSE);
  for (int i = 0; i < server->opts.nslices; i++)
    {
      Slice *s = &server->slices[i];
      if (!s->hosted)
        continue;
      size_t bytes = (s->end - s->begin) * sizeof (float);
      g_mutex_lock (&s->lock);
      shoal_server_wait_readers (s);
      gboolean ok = shoal_device_copy (server->values + s->begin, server->dev_values + s->begin, bytes, error);
      for (int k = 0; ok && k < server->state_per_value; k++)
        {
          size_t at = (size_t) k * server->total + s->begin;
          ok = shoal_device_copy (server->state + at, server->dev_state + at, bytes, error);
        }
      g_mutex_unlock (&s->lock);
      if (!ok)
        {
          g_atomic_int_set (&server->host_stale, TRUE);
          return FALSE;
        }
    }
  return TRUE;
}

void
shoal_server_device_apply (ShoalServer *server, int step, gint64 t, float lr_scale, float wd_scale, size_t a,
                           const float *grad, size_t n, gboolean clear)
{
  float *state_a = server->state_per_value > 0 ? server->dev_state + a : NULL;
  float *state_b = server->state_per_value > 1 ? server->dev_state + server->total + a : NULL;
  shoal_updater_apply_on (server->stream, &server->updater, step, t, lr_scale, wd_scale, server->dev_values + a,
                          (float *) grad, state_a, state_b, n, clear);
  g_atomic_int_set (&server->host_stale, TRUE);
}

void
shoal_server_clear_grad (ShoalServer *server, float *grad, size_t n)
{
  if (server->dev_values != NULL)
    shoal_stream_zero (server->stream, grad, n * sizeof (float));
  else
    memset (grad, 0, n * sizeof (float));
}

void
shoal_server_device_upload (ShoalServer *server, size_t begin, size_t end)
{
  if (server->dev_values == NULL || end <= begin)
    return;
  shoal_device_activate (server->device);
  /* after the updates already enqueued, before the next forward reads them */
  shoal_stream_copy (server->stream, server->dev_values + begin, server->values + begin,
                     (end - begin) * sizeof (float));
  for (int k = 0; k < server->state_per_value; k++)
    {
      size_t at = (size_t) k * server->total + begin;
      shoal_stream_copy (server->stream, server->dev_state + at, server->state + at, (end - begin) * sizeof (float));
    }
  /* the host buffers are what was copied: wait, so the caller may change them */
  GError *error = NULL;
  if (!shoal_stream_sync (server->stream, &error))
    {
      g_critical ("server: uploading values to the device: %s", error->message);
      g_error_free (error);
    }
}
