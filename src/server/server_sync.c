/* The server side of Hogwild's group sync and of elastic averaging
 * (server/group_sync.c drives them): a master applies a group's delta or
 * exchanges with its replica; a group's server takes the delta since the
 * last sync and merges the master's values; the sync thread waits for
 * slices that are due. */
#include "server/server_priv.h"

#include <string.h>

#include "core/error.h"

gboolean
shoal_server_apply_delta (ShoalServer *server, int slice, const float *delta, float *values_out,
                          size_t n, GError **error)
{
  Slice *s = shoal_server_checked_slice (server, "apply_delta", slice, n, error);
  if (s == NULL)
    return FALSE;
  shoal_server_stat_add (&server->stats.deltas, 1);
  g_mutex_lock (&s->lock);
  shoal_server_wait_readers (s);
  float *restrict v = server->values + s->begin;
  const float scale = server->opts.delta_scale;
  for (size_t i = 0; i < n; i++)
    v[i] += scale * delta[i];
  memcpy (values_out, v, n * sizeof (float));
  s->version++;
  g_cond_broadcast (&s->changed);
  g_mutex_unlock (&s->lock);
  return TRUE;
}

gboolean
shoal_server_elastic_exchange (ShoalServer *server, int slice, const float *replica, float *diff_out,
                               size_t n, float alpha, GError **error)
{
  Slice *s = shoal_server_checked_slice (server, "elastic_exchange", slice, n, error);
  if (s == NULL)
    return FALSE;
  if (!(alpha > 0 && alpha <= 1))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "elastic_exchange: slice %d: alpha %g is not in (0, 1]",
                   slice, (double) alpha);
      return FALSE;
    }
  if (s->center == NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC,
                   "elastic_exchange: slice %d keeps no center here (not a master of elastic averaging)", slice);
      return FALSE;
    }
  shoal_server_stat_add (&server->stats.deltas, 1);
  g_mutex_lock (&s->lock);
  float *restrict c = s->center;
  for (size_t i = 0; i < n; i++)
    {
      float d = alpha * (replica[i] - c[i]);
      c[i] += d;
      diff_out[i] = d;
    }
  g_mutex_unlock (&s->lock);
  return TRUE;
}

gboolean
shoal_server_take_values (ShoalServer *server, int slice, float *values_out, size_t n, GError **error)
{
  Slice *s = shoal_server_checked_slice (server, "take_values", slice, n, error);
  if (s == NULL)
    return FALSE;
  g_mutex_lock (&s->lock);
  memcpy (values_out, server->values + s->begin, n * sizeof (float));
  s->updates_since_sync = 0;
  g_mutex_unlock (&s->lock);
  return TRUE;
}

gboolean
shoal_server_elastic_merge (ShoalServer *server, int slice, const float *diff, size_t n, GError **error)
{
  Slice *s = shoal_server_checked_slice (server, "elastic_merge", slice, n, error);
  if (s == NULL)
    return FALSE;
  g_mutex_lock (&s->lock);
  shoal_server_wait_readers (s);
  float *restrict v = server->values + s->begin;
  for (size_t i = 0; i < n; i++)
    v[i] -= diff[i];
  g_cond_broadcast (&s->changed);
  g_mutex_unlock (&s->lock);
  return TRUE;
}

gboolean
shoal_server_take_delta (ShoalServer *server, int slice, float *delta_out, size_t n, GError **error)
{
  Slice *s = shoal_server_checked_slice (server, "take_delta", slice, n, error);
  if (s == NULL)
    return FALSE;
  g_mutex_lock (&s->lock);
  const float *restrict v = server->values + s->begin;
  if (s->baseline == NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL,
                   "take_delta: slice %d keeps no baseline (server made without keep_baseline)", slice);
      g_mutex_unlock (&s->lock);
      return FALSE;
    }
  float *restrict b = s->baseline;
  for (size_t i = 0; i < n; i++)
    {
      delta_out[i] = v[i] - b[i];
      b[i] = v[i];
    }
  s->updates_since_sync = 0;
  g_mutex_unlock (&s->lock);
  return TRUE;
}

gboolean
shoal_server_merge_master (ShoalServer *server, int slice, const float *master_values, size_t n,
                           GError **error)
{
  Slice *s = shoal_server_checked_slice (server, "merge_master", slice, n, error);
  if (s == NULL)
    return FALSE;
  g_mutex_lock (&s->lock);
  shoal_server_wait_readers (s);
  float *restrict v = server->values + s->begin;
  float *restrict b = s->baseline;
  for (size_t i = 0; i < n; i++)
    {
      v[i] = v[i] - (b ? b[i] : v[i]) + master_values[i];
      if (b)
        b[i] = master_values[i];
    }
  g_cond_broadcast (&s->changed);
  g_mutex_unlock (&s->lock);
  return TRUE;
}

gint64
shoal_server_updates_since_sync (ShoalServer *server, int slice)
{
  g_return_val_if_fail (slice >= 0 && slice < server->opts.nslices, 0);
  Slice *s = &server->slices[slice];
  g_mutex_lock (&s->lock);
  gint64 u = s->updates_since_sync;
  g_mutex_unlock (&s->lock);
  return u;
}

static int
first_due (ShoalServer *server, gint64 sync_freq, const gint64 *not_before_us)
{
  gint64 now = not_before_us != NULL ? g_get_monotonic_time () : 0;
  for (int i = 0; i < server->opts.nslices; i++)
    if (server->slices[i].hosted && (not_before_us == NULL || not_before_us[i] <= now)
        && shoal_server_updates_since_sync (server, i) >= sync_freq)
      return i;
  return -1;
}

int
shoal_server_wait_sync_due (ShoalServer *server, gint64 sync_freq, gint64 timeout_us)
{
  return shoal_server_wait_sync_due_after (server, sync_freq, timeout_us, NULL);
}

int
shoal_server_wait_sync_due_after (ShoalServer *server, gint64 sync_freq, gint64 timeout_us,
                                  const gint64 *not_before_us)
{
  gint64 deadline = timeout_us >= 0 ? g_get_monotonic_time () + timeout_us : G_MAXINT64;
  int due = -1;
  g_mutex_lock (&server->sync_lock);
  /* slice locks are taken inside sync_lock; push takes sync_lock only
   * after releasing its slice lock, so there is no cycle */
  while ((due = first_due (server, sync_freq, not_before_us)) < 0 && !g_atomic_int_get (&server->stopping))
    if (!g_cond_wait_until (&server->sync_due, &server->sync_lock, deadline))
      break;
  g_mutex_unlock (&server->sync_lock);
  return g_atomic_int_get (&server->stopping) ? -1 : due;
}

void
shoal_server_set_delta_scale (ShoalServer *server, float scale)
{
  g_return_if_fail (scale > 0);
  /* read under each slice's lock by apply_delta: take them in turn */
  for (int i = 0; i < server->opts.nslices; i++)
    g_mutex_lock (&server->slices[i].lock);
  server->opts.delta_scale = scale;
  for (int i = 0; i < server->opts.nslices; i++)
    g_mutex_unlock (&server->slices[i].lock);
}

gboolean
shoal_server_adopt_center (ShoalServer *server, int slice, GError **error)
{
  Slice *s = slice >= 0 && slice < server->opts.nslices ? &server->slices[slice] : NULL;
  if (s == NULL || !s->hosted || s->center == NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL,
                   "adopt_center: slice %d keeps no center here", slice);
      return FALSE;
    }
  g_mutex_lock (&s->lock);
  memcpy (s->center, server->values + s->begin, (s->end - s->begin) * sizeof (float));
  g_mutex_unlock (&s->lock);
  return TRUE;
}
