/* Param slices, their versions and updates.  The value and state buffers
 * are laid out exactly like the workers' param stores, so a slice is an
 * offset range on both sides and nothing is repacked. */
#include "server/server_priv.h"

#include <string.h>

#include "core/error.h"
#include "core/parallel.h"

void
shoal_slice_range (size_t total, int nslices, int slice, size_t *begin, size_t *end)
{
  size_t units = (total + SLICE_ALIGN - 1) / SLICE_ALIGN;
  *begin = MIN (total, units * (size_t) slice / (size_t) nslices * SLICE_ALIGN);
  *end = MIN (total, units * (size_t) (slice + 1) / (size_t) nslices * SLICE_ALIGN);
}

ShoalServer *
shoal_server_new (const ShoalParamStore *layout, const ShoalUpdaterConf *updater,
                  const ShoalServerOptions *opts, GError **error)
{
  g_return_val_if_fail (layout->allocated && opts->nslices >= 1, NULL);
  /* sized by the conf: out of memory is an error, not an abort */
  int state_per_value = shoal_updater_state_per_value (updater->kind);
  float *values = shoal_try_alloc_floats (layout->total, error);
  float *state = values != NULL && state_per_value > 0
                   ? shoal_try_alloc_floats (layout->total * (size_t) state_per_value, error) : NULL;
  if (values == NULL || (state_per_value > 0 && state == NULL))
    {
      shoal_param_store_prefix_nomem (layout, error, values == NULL ? "server: values" : "server: optimiser state");
      shoal_free_aligned (values);
      return NULL;
    }
  ShoalServer *server = g_new0 (ShoalServer, 1);
  server->updater = *updater;
  server->opts = *opts;
  if (server->opts.sync_contributors < 1)
    server->opts.sync_contributors = 1;
  if (server->opts.lr_scale <= 0)
    server->opts.lr_scale = 1;
  if (server->opts.delta_scale <= 0)
    server->opts.delta_scale = 1;
  server->opts.backup_workers = CLAMP (server->opts.backup_workers, 0, server->opts.sync_contributors - 1);
  server->opts.ssp_bound = MAX (server->opts.ssp_bound, 0);
  if (opts->mode != SHOAL_UPDATE_ASYNC)
    server->opts.ssp_units = 0;
  server->total = layout->total;
  server->values = server->own_values = values;
  memcpy (server->values, layout->values, layout->total * sizeof (float));
  server->state_per_value = state_per_value;
  server->state = state;

  server->nsegments = (int) layout->params->len;
  server->segments = g_new0 (Segment, server->nsegments);
  for (int i = 0; i < server->nsegments; i++)
    {
      const ShoalParam *p = g_ptr_array_index (layout->params, i);
      server->segments[i] = (Segment) { p->offset, p->count, p->lr_scale, p->wd_scale, 0 };
    }
  server->part_updates = g_new0 (gint, (gsize) opts->nslices * (gsize) MAX (server->nsegments, 1));

  g_mutex_init (&server->sync_lock);
  g_cond_init (&server->sync_due);
  g_mutex_init (&server->checkpoint_lock);
  g_mutex_init (&server->staleness_lock);
  server->last_checkpoint = -1;
  server->stop_step = G_MAXINT64;
  server->slices = g_new0 (Slice, opts->nslices);
  for (int i = 0; i < opts->nslices; i++)
    {
      Slice *s = &server->slices[i];
      /* statistics (the store's tail past served) are the units' own */
      shoal_slice_range (layout->served, opts->nslices, i, &s->begin, &s->end);
      g_mutex_init (&s->lock);
      g_cond_init (&s->changed);
      if (server->opts.ssp_units > 0)
        s->clocks = shoal_clocks_new (server->opts.ssp_units);
    }
  return server;
}

void
shoal_server_free (ShoalServer *server)
{
  if (server == NULL)
    return;
  for (int i = 0; i < server->opts.nslices; i++)
    {
      Slice *s = &server->slices[i];
      g_mutex_clear (&s->lock);
      g_cond_clear (&s->changed);
      shoal_free_aligned (s->accumulator);
      shoal_free_aligned (s->baseline);
      shoal_free_aligned (s->center);
      shoal_clocks_free (s->clocks);
    }
  g_mutex_clear (&server->staleness_lock);
  g_mutex_clear (&server->sync_lock);
  g_cond_clear (&server->sync_due);
  g_mutex_clear (&server->checkpoint_lock);
  g_free (server->slices);
  g_free (server->segments);
  g_free (server->part_updates);
  shoal_free_aligned (server->own_values);
  if (server->adopted_release != NULL)
    server->adopted_release (server->adopted);
  shoal_free_aligned (server->state);
  if (server->dev_state != NULL)
    shoal_device_free (server->device, server->dev_state);
  g_free (server);
}

void
shoal_server_host_slice (ShoalServer *server, int slice)
{
  g_return_if_fail (slice >= 0 && slice < server->opts.nslices);
  Slice *s = &server->slices[slice];
  s->hosted = TRUE;
  if (server->opts.keep_baseline && s->baseline == NULL)
    {
      /* Hogwild: every group starts from the same values (same seed), so
       * the first delta is exactly what this group learned */
      s->baseline = shoal_alloc_floats (s->end - s->begin);
      memcpy (s->baseline, server->values + s->begin, (s->end - s->begin) * sizeof (float));
    }
  if (server->opts.elastic_center && s->center == NULL)
    {
      /* EASGD: the center starts where every replica starts */
      s->center = shoal_alloc_floats (s->end - s->begin);
      memcpy (s->center, server->values + s->begin, (s->end - s->begin) * sizeof (float));
    }
}

void
shoal_server_host_all (ShoalServer *server)
{
  for (int i = 0; i < server->opts.nslices; i++)
    shoal_server_host_slice (server, i);
}

gboolean
shoal_server_hosts (ShoalServer *server, int slice)
{
  return slice >= 0 && slice < server->opts.nslices && server->slices[slice].hosted;
}

float *
shoal_server_values (ShoalServer *server)
{
  /* a borrower keeps this pointer: the storage never moves from now on */
  server->values_lent = TRUE;
  return server->values;
}

gboolean
shoal_server_adopt_values (ShoalServer *server, float *values, gpointer owner, GDestroyNotify release)
{
  g_return_val_if_fail (values != NULL, FALSE);
  if (!shoal_server_values_stable (server) || server->values_lent || server->adopted_release != NULL
      || g_atomic_int_get (&server->stopping))
    return FALSE;
  /* every slice lock, in order: no update, pull or checkpoint meanwhile
   * (nothing else takes two of them) */
  for (int i = 0; i < server->opts.nslices; i++)
    g_mutex_lock (&server->slices[i].lock);
  for (int i = 0; i < server->opts.nslices; i++)
    {
      Slice *s = &server->slices[i];
      if (s->hosted)
        memcpy (values + s->begin, server->values + s->begin, (s->end - s->begin) * sizeof (float));
    }
  /* replies under way that lent the old buffer go on reading it: it
   * stays allocated, and holds the same values */
  g_atomic_pointer_set (&server->values, values);
  server->adopted = owner;
  server->adopted_release = release;
  for (int i = server->opts.nslices - 1; i >= 0; i--)
    g_mutex_unlock (&server->slices[i].lock);
  return TRUE;
}

size_t
shoal_server_total (ShoalServer *server)
{
  return server->total;
}

int
shoal_server_n_slices (ShoalServer *server)
{
  return server->opts.nslices;
}

void
shoal_server_slice_range (ShoalServer *server, int slice, size_t *begin, size_t *end)
{
  g_return_if_fail (slice >= 0 && slice < server->opts.nslices);
  *begin = server->slices[slice].begin;
  *end = server->slices[slice].end;
}

gint64
shoal_server_slice_version (ShoalServer *server, int slice)
{
  g_return_val_if_fail (slice >= 0 && slice < server->opts.nslices, -1);
  Slice *s = &server->slices[slice];
  g_mutex_lock (&s->lock);
  gint64 v = s->version;
  g_mutex_unlock (&s->lock);
  return v;
}

/* The hosted slice, or NULL with an error naming what is wrong. */
Slice *
shoal_server_checked_slice (ShoalServer *server, const char *what, int slice, size_t n, GError **error)
{
  if (slice < 0 || slice >= server->opts.nslices)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "%s: unknown slice %d (the job has %d)",
                   what, slice, server->opts.nslices);
      return NULL;
    }
  Slice *s = &server->slices[slice];
  if (!s->hosted)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "%s: slice %d is not served here", what, slice);
      return NULL;
    }
  if (n != s->end - s->begin)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "%s: slice %d has %zu values, got %zu", what,
                   slice, s->end - s->begin, n);
      return NULL;
    }
  if (g_atomic_int_get (&server->stopping))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "%s: server stopping", what);
      return NULL;
    }
  return s;
}

/* One segment's update, cut into chunks for shoal_parallel_for: every
 * rule is element-wise, so the chunks give the same floats as one call. */
typedef struct {
  const ShoalUpdaterConf *updater;
  int step;
  gint t;
  float lr_scale, wd_scale;
  float *values, *state_a, *state_b;
  const float *grad;
  float *mirror;          /* or NULL */
  float *clear;           /* the gradient to zero once read (push_consume), or NULL */
} SegmentUpdate;

static void
update_chunk (size_t begin, size_t end, gpointer data)
{
  SegmentUpdate *u = data;
  shoal_updater_apply (u->updater, u->step, u->t, u->lr_scale, u->wd_scale, u->values + begin,
                       u->grad + begin, u->state_a != NULL ? u->state_a + begin : NULL,
                       u->state_b != NULL ? u->state_b + begin : NULL, end - begin);
  /* while the chunk is in cache */
  if (u->mirror != NULL && u->mirror != u->values)   /* adopted storage: no copy to make */
    memcpy (u->mirror + begin, u->values + begin, (end - begin) * sizeof (float));
  if (u->clear != NULL)
    memset (u->clear + begin, 0, (end - begin) * sizeof (float));
}

/* opts.lr_scale at `step`, warmed up from 1 over opts.lr_warmup steps. */
static float
lr_scale_at (const ShoalServer *server, gint64 step)
{
  float full = server->opts.lr_scale;
  int warm = server->opts.lr_warmup;
  if (warm <= 0 || step >= warm)
    return full;
  return 1.0f + (full - 1.0f) * (float) MAX (step, 0) / (float) warm;
}

/* Applies one update of [begin, end) with gradient grad[0 .. end-begin),
 * its learning rate multiplied by lr_mult; large segments on the cores
 * that idle meanwhile (core/parallel.h).  mirror (or NULL): [begin, end)
 * of a copy of the values that gets the new ones too.  clear (grad
 * itself, or NULL): zeroed chunk by chunk once the update read it. */
static void
apply_range (ShoalServer *server, int slice, size_t begin, size_t end, const float *grad, gint64 step,
             float lr_mult, float *mirror, float *clear)
{
  for (int i = 0; i < server->nsegments; i++)
    {
      Segment *seg = &server->segments[i];
      size_t a = MAX (begin, seg->offset), b = MIN (end, seg->offset + seg->count);
      if (a >= b)
        continue;
      if (a == seg->offset)
        g_atomic_int_add (&seg->updates, 1);
      /* Adam's count: this slice's part of the param on its own */
      gint t = ++server->part_updates[(size_t) slice * server->nsegments + i];
      float lr_scale = seg->lr_scale * lr_scale_at (server, step) * lr_mult;
      if (server->dev_values != NULL)
        {
          /* device mode: grad is device memory; no mirror there */
          shoal_server_device_apply (server, (int) MIN (step, G_MAXINT), MAX (t, 1), lr_scale, seg->wd_scale, a,
                                     grad + (a - begin), b - a, clear != NULL);
          continue;
        }
      SegmentUpdate u = {
        &server->updater, (int) MIN (step, G_MAXINT), MAX (t, 1),
        lr_scale, seg->wd_scale, server->values + a,
        server->state_per_value > 0 ? server->state + a : NULL,
        server->state_per_value > 1 ? server->state + server->total + a : NULL, grad + (a - begin),
        mirror != NULL ? mirror + (a - begin) : NULL, clear != NULL ? clear + (a - begin) : NULL,
      };
      shoal_parallel_for (b - a, SHOAL_PARALLEL_GRAIN, update_chunk, &u);
    }
}

/* Under the slice's lock, before its values change: waits until no
 * reply sends them in place.  Such a reply gives them up within a tick
 * of seeing a writer wait (rpc/thrift_socket.h,
 * shoal_thrift_socket_write_pinned), never waiting on its peer. */
static void
wait_reader (Slice *s)
{
  g_atomic_int_inc (&s->writers_waiting);
  g_cond_wait (&s->changed, &s->lock);
  g_atomic_int_add (&s->writers_waiting, -1);
}

void
shoal_server_wait_readers (Slice *s)
{
  while (s->readers > 0)
    wait_reader (s);
}

void
shoal_server_stat_add (gint64 *counter, gint64 v)
{
  g_atomic_pointer_add ((gssize *) counter, (gssize) v);
}

static gint64
stop_step (ShoalServer *server)
{
  return (gint64) g_atomic_pointer_get ((gssize *) &server->stop_step);
}

/* Under the slice's lock: one applied gradient's staleness. */
static void
record_staleness (ShoalServer *server, gint64 staleness)
{
  g_mutex_lock (&server->staleness_lock);
  shoal_staleness_add (&server->staleness, staleness);
  g_mutex_unlock (&server->staleness_lock);
}

gboolean
shoal_server_push (ShoalServer *server, int slice, const float *grad, size_t n, gint64 step,
                   GError **error)
{
  return shoal_server_push_from (server, slice, grad, n, step, NULL, NULL, error);
}

gboolean
shoal_server_push_from (ShoalServer *server, int slice, const float *grad, size_t n, gint64 step,
                        const ShoalPushOrigin *origin, gint64 *ready_version, GError **error)
{
  return shoal_server_push_mirrored (server, slice, grad, n, step, origin, NULL, ready_version, NULL,
                                     error);
}

static gboolean push_slice (ShoalServer *server, Slice *s, const float *grad, float *clear, size_t n,
                            gint64 step, const ShoalPushOrigin *origin, float *mirror, gint64 *ready_version,
                            gboolean *mirrored_out, gboolean *cleared, GError **error);

gboolean
shoal_server_push_mirrored (ShoalServer *server, int slice, const float *grad, size_t n, gint64 step,
                            const ShoalPushOrigin *origin, float *mirror, gint64 *ready_version,
                            gboolean *mirrored_out, GError **error)
{
  gboolean cleared = FALSE;
  if (mirrored_out != NULL)
    *mirrored_out = FALSE;
  Slice *s = shoal_server_checked_slice (server, "push", slice, n, error);
  return s != NULL
         && push_slice (server, s, grad, NULL, n, step, origin, mirror, ready_version, mirrored_out, &cleared,
                        error);
}

gboolean
shoal_server_push_consume (ShoalServer *server, int slice, float *grad, size_t n, gint64 step,
                           const ShoalPushOrigin *origin, float *mirror, gint64 *ready_version,
                           gboolean *mirrored_out, GError **error)
{
  gboolean cleared = FALSE, ok = FALSE;
  if (mirrored_out != NULL)
    *mirrored_out = FALSE;
  Slice *s = shoal_server_checked_slice (server, "push", slice, n, error);
  if (s != NULL)
    ok = push_slice (server, s, grad, grad, n, step, origin, mirror, ready_version, mirrored_out, &cleared,
                     error);
  if (!cleared)
    shoal_server_clear_grad (server, grad, n);
  return ok;
}

/* One push of a checked slice; clear (grad itself, or NULL) is zeroed in
 * the pass that reads it, and *cleared says whether that happened. */
static gboolean
push_slice (ShoalServer *server, Slice *s, const float *grad, float *clear, size_t n, gint64 step,
            const ShoalPushOrigin *origin, float *mirror, gint64 *ready_version, gboolean *mirrored_out,
            gboolean *cleared, GError **error)
{
  int slice = (int) (s - server->slices);
  gboolean mirrored = FALSE;
  gint64 base = origin != NULL ? origin->base_version : -1;
  int unit = origin != NULL ? origin->unit : -1;
  if (s->clocks != NULL && unit >= server->opts.ssp_units)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC,
                   "push: slice %d: unit %d is not one of the %d units this server bounds (SSP)",
                   slice, unit, server->opts.ssp_units);
      return FALSE;
    }
  shoal_server_stat_add (&server->stats.pushes, 1);
  shoal_server_stat_add (&server->stats.bytes_in, (gint64) (n * sizeof (float)));

  g_mutex_lock (&s->lock);
  /* a push that may make the update waits, before it looks at anything,
   * for replies that send the values in place */
  while (s->readers > 0
         && (server->opts.mode == SHOAL_UPDATE_ASYNC
             || s->contributions + 1 >= server->opts.sync_contributors - server->opts.backup_workers))
    wait_reader (s);
  gboolean ok = TRUE;
  gint64 ready = s->version;
  if (server->opts.mode == SHOAL_UPDATE_ASYNC)
    {
      gint64 staleness = base >= 0 ? MAX (s->version - base, 0) : 0;
      /* Zhang et al.: lr / staleness, staleness 0 counting as 1 */
      float mult = server->opts.lr_by_staleness ? 1.0f / (float) MAX (staleness, 1) : 1.0f;
      /* SSP: where this push's reply will wait for the slowest unit, the
       * values it carries are those of the moment the bound is met, with
       * that unit's pushes in them (a worker at step t sees every other
       * unit's steps up to t - s - 1): no mirror of the values of now.
       * Checked before this push advances its unit's clock. */
      if (mirror != NULL && s->clocks != NULL && unit >= 0
          && !shoal_clocks_may_go_on (s->clocks, step, server->opts.ssp_bound))
        mirror = NULL;
      apply_range (server, slice, s->begin, s->end, grad, step, mult, mirror, clear);
      *cleared = clear != NULL;
      mirrored = mirror != NULL;
      if (base >= 0)
        record_staleness (server, staleness);
      s->version++;
      s->updates_since_sync++;
      if (s->clocks != NULL && unit >= 0)
        shoal_clocks_advance (s->clocks, unit, step);
      ready = s->version;
      shoal_server_stat_add (&server->stats.updates, 1);
      g_cond_broadcast (&s->changed);
    }
  else if (step >= stop_step (server))
    {
      /* the step a worker stopped at never completes: keep nothing of it */
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_STOPPED,
                   "push: slice %d: the job stops at step %" G_GINT64_FORMAT " (a worker stopped there); "
                   "a gradient of step %" G_GINT64_FORMAT " is not taken",
                   slice, stop_step (server), step);
      ok = FALSE;
    }
  else if (step < s->version && server->opts.backup_workers > 0)
    {
      /* a backup worker's late gradient: its step was applied without it */
      shoal_server_stat_add (&server->stats.dropped, 1);
    }
  else if (step != s->version)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC,
                   "push: slice %d is aggregating step %" G_GINT64_FORMAT ", got a gradient of step %" G_GINT64_FORMAT,
                   slice, s->version, step);
      ok = FALSE;
    }
  else
    {
      /* the first `need` gradients of the step make the update */
      int need = server->opts.sync_contributors - server->opts.backup_workers;
      const float *sum = grad;
      if (base >= 0)
        record_staleness (server, MAX (s->version - base, 0));
      if (need > 1)
        {
          if (s->accumulator == NULL)
            s->accumulator = shoal_alloc_floats (n);
          float *restrict acc = s->accumulator;
          if (s->contributions == 0)
            memcpy (acc, grad, n * sizeof (float));
          else
            for (size_t i = 0; i < n; i++)
              acc[i] += grad[i];
          if (clear != NULL)
            memset (clear, 0, n * sizeof (float));
          *cleared = clear != NULL;
          sum = acc;
        }
      if (++s->contributions == need)
        {
          if (need > 1)
            {
              float inv = 1.0f / (float) need;
              for (size_t i = 0; i < n; i++)
                s->accumulator[i] *= inv;
            }
          apply_range (server, slice, s->begin, s->end, sum, step, 1.0f, mirror,
                       *cleared ? NULL : clear);
          *cleared = clear != NULL;
          mirrored = mirror != NULL;
          s->contributions = 0;
          s->version++;
          s->updates_since_sync++;
          shoal_server_stat_add (&server->stats.updates, 1);
          g_cond_broadcast (&s->changed);
        }
      ready = step + 1;
    }
  g_mutex_unlock (&s->lock);
  if (ok && ready_version != NULL)
    *ready_version = ready;
  if (ok && mirrored_out != NULL)
    *mirrored_out = mirrored;
  if (mirrored)
    shoal_server_stat_add (&server->stats.bytes_out, (gint64) (n * sizeof (float)));
  if (ok && server->opts.keep_baseline)
    {
      /* after the slice lock: the sync thread takes slice locks inside this one */
      g_mutex_lock (&server->sync_lock);
      g_cond_broadcast (&server->sync_due);
      g_mutex_unlock (&server->sync_lock);
    }
  return ok;
}

gboolean
shoal_server_wait_bound (ShoalServer *server, int slice, int unit, gint64 step, gint64 timeout_us,
                         GError **error)
{
  if (server->opts.ssp_units <= 0 || unit < 0)
    return TRUE;
  if (slice < 0 || slice >= server->opts.nslices || !server->slices[slice].hosted)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "wait_bound: slice %d is not served here", slice);
      return FALSE;
    }
  Slice *s = &server->slices[slice];
  gint64 deadline = timeout_us >= 0 ? g_get_monotonic_time () + timeout_us : G_MAXINT64;
  int bound = server->opts.ssp_bound;
  g_mutex_lock (&s->lock);
  while (!shoal_clocks_may_go_on (s->clocks, step, bound) && !g_atomic_int_get (&server->stopping))
    if (!g_cond_wait_until (&s->changed, &s->lock, deadline))
      break;
  gboolean ok = shoal_clocks_may_go_on (s->clocks, step, bound);
  if (!ok)
    {
      int slowest = 0;
      gint64 at = shoal_clocks_slowest (s->clocks, &slowest);
      g_set_error (error, SHOAL_ERROR, g_atomic_int_get (&server->stopping) ? SHOAL_ERROR_RPC : SHOAL_ERROR_TIMEOUT,
                   "slice %d: unit %d pushed step %" G_GINT64_FORMAT " and waits (SSP, staleness %d) for unit %d, "
                   "which pushed %" G_GINT64_FORMAT " steps%s", slice, unit, step, bound, slowest, at,
                   g_atomic_int_get (&server->stopping) ? "; server stopping" : "");
    }
  g_mutex_unlock (&s->lock);
  return ok;
}

gboolean
shoal_server_bound_ok (ShoalServer *server, int slice, int unit, gint64 step)
{
  if (server->opts.ssp_units <= 0 || unit < 0 || slice < 0 || slice >= server->opts.nslices)
    return TRUE;
  Slice *s = &server->slices[slice];
  g_mutex_lock (&s->lock);
  gboolean ok = shoal_clocks_may_go_on (s->clocks, step, server->opts.ssp_bound);
  g_mutex_unlock (&s->lock);
  return ok;
}

void
shoal_server_take_staleness (ShoalServer *server, ShoalStaleness *out)
{
  g_mutex_lock (&server->staleness_lock);
  *out = server->staleness;
  memset (&server->staleness, 0, sizeof server->staleness);
  g_mutex_unlock (&server->staleness_lock);
}

gboolean
shoal_server_values_stable (ShoalServer *server)
{
  /* ASYNC updates whenever a push comes; backup workers let a step pass
   * without a late worker, who may still be reading; Hogwild merges */
  return server->opts.mode == SHOAL_UPDATE_SYNC && server->opts.backup_workers == 0
         && !server->opts.keep_baseline;
}

const float *
shoal_server_lend_values (ShoalServer *server, int slice)
{
  g_return_val_if_fail (shoal_server_values_stable (server) && shoal_server_hosts (server, slice), NULL);
  Slice *s = &server->slices[slice];
  shoal_server_stat_add (&server->stats.bytes_out, (gint64) ((s->end - s->begin) * sizeof (float)));
  return (float *) g_atomic_pointer_get (&server->values) + s->begin;
}

static gboolean
pull_values (ShoalServer *server, int slice, float *dst, const float **pinned, size_t n,
             gint64 min_version, gint64 timeout_us, gint64 *version, GError **error)
{
  Slice *s = shoal_server_checked_slice (server, "pull", slice, n, error);
  if (s == NULL)
    return FALSE;
  if (min_version > SHOAL_SERVER_MAX_VERSION)
    {
      /* no put or update gets there: the wait could only time out */
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC,
                   "pull: slice %d: version %" G_GINT64_FORMAT " is beyond the highest a slice reaches (2^62)",
                   slice, min_version);
      return FALSE;
    }
  shoal_server_stat_add (&server->stats.pulls, 1);  /* calls received, waiting ones included */
  /* device mode: the host copy is what a pull sends */
  if ((dst != NULL || pinned != NULL) && !shoal_server_sync_host (server, error))
    return FALSE;
  gint64 deadline = timeout_us >= 0 ? g_get_monotonic_time () + timeout_us : G_MAXINT64;

  g_mutex_lock (&s->lock);
  /* stop_step is read under the slice lock, which stop_at takes to wake us */
  while (s->version < min_version && min_version <= stop_step (server)
         && !g_atomic_int_get (&server->stopping))
    if (!g_cond_wait_until (&s->changed, &s->lock, deadline))
      break;
  gboolean ok = s->version >= min_version;
  if (!ok && min_version > stop_step (server))
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_STOPPED,
                 "pull: slice %d: the job stops at step %" G_GINT64_FORMAT " (a worker stopped there); "
                 "version %" G_GINT64_FORMAT " never comes", slice, stop_step (server), min_version);
  else if (!ok)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC,
                 "pull: slice %d did not reach version %" G_GINT64_FORMAT " (at %" G_GINT64_FORMAT ")%s",
                 slice, min_version, s->version,
                 g_atomic_int_get (&server->stopping) ? ": server stopping" : " in time");
  else
    {
      if (dst != NULL)
        {
          if (dst != server->values + s->begin)   /* the adopted storage is its own mirror */
            memcpy (dst, server->values + s->begin, n * sizeof (float));
          shoal_server_stat_add (&server->stats.bytes_out, (gint64) (n * sizeof (float)));
        }
      else if (pinned != NULL && !g_atomic_int_get (&s->writers_waiting))
        {
          /* a writer waiting goes first: no new readers meanwhile */
          s->readers++;
          *pinned = server->values + s->begin;
          shoal_server_stat_add (&server->stats.bytes_out, (gint64) (n * sizeof (float)));
        }
      if (version != NULL)
        *version = s->version;
    }
  g_mutex_unlock (&s->lock);
  return ok;
}

gboolean
shoal_server_pull (ShoalServer *server, int slice, float *dst, size_t n, gint64 min_version,
                   gint64 timeout_us, gint64 *version, GError **error)
{
  return pull_values (server, slice, dst, NULL, n, min_version, timeout_us, version, error);
}

gboolean
shoal_server_pull_pinned (ShoalServer *server, int slice, size_t n, gint64 min_version, gint64 timeout_us,
                          gint64 *version, const float **values, GError **error)
{
  *values = NULL;
  return pull_values (server, slice, NULL, values, n, min_version, timeout_us, version, error);
}

void
shoal_server_unpin (ShoalServer *server, int slice)
{
  g_return_if_fail (slice >= 0 && slice < server->opts.nslices);
  Slice *s = &server->slices[slice];
  g_mutex_lock (&s->lock);
  gboolean pinned = s->readers > 0;
  if (pinned && --s->readers == 0)
    g_cond_broadcast (&s->changed);
  g_mutex_unlock (&s->lock);
  g_return_if_fail (pinned);
}

gboolean
shoal_server_pin_wanted (ShoalServer *server, int slice)
{
  g_return_val_if_fail (slice >= 0 && slice < server->opts.nslices, TRUE);
  return g_atomic_int_get (&server->slices[slice].writers_waiting) > 0;
}

gboolean
shoal_server_put (ShoalServer *server, int slice, const float *values, size_t n, gint64 version,
                  GError **error)
{
  Slice *s = shoal_server_checked_slice (server, "put", slice, n, error);
  if (s == NULL)
    return FALSE;
  /* a peer's put of G_MAXINT64 made the next update overflow the version
   * (found by fuzz/fuzz_param_handler.c) */
  if (version < 0 || version > SHOAL_SERVER_MAX_VERSION)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC,
                   "put: slice %d: version %" G_GINT64_FORMAT " is outside 0 .. 2^62", slice,
                   version);
      return FALSE;
    }
  g_mutex_lock (&s->lock);
  shoal_server_wait_readers (s);
  memcpy (server->values + s->begin, values, n * sizeof (float));
  shoal_server_device_upload (server, s->begin, s->end);
  s->version = version;
  s->contributions = 0;
  if (s->baseline != NULL)
    memcpy (s->baseline, values, n * sizeof (float));
  g_cond_broadcast (&s->changed);
  g_mutex_unlock (&s->lock);
  return TRUE;
}

void
shoal_server_drop_unit (ShoalServer *server, int unit)
{
  if (server->opts.ssp_units <= 0 || unit < 0 || unit >= server->opts.ssp_units)
    return;
  for (int i = 0; i < server->opts.nslices; i++)
    {
      Slice *s = &server->slices[i];
      if (s->clocks == NULL)
        continue;
      g_mutex_lock (&s->lock);
      shoal_clocks_drop (s->clocks, unit);
      g_cond_broadcast (&s->changed);   /* units waiting for it go on */
      g_mutex_unlock (&s->lock);
    }
}

void
shoal_server_stats (ShoalServer *server, ShoalServerStats *stats)
{
  stats->pushes = (gint64) g_atomic_pointer_get ((gssize *) &server->stats.pushes);
  stats->pulls = (gint64) g_atomic_pointer_get ((gssize *) &server->stats.pulls);
  stats->updates = (gint64) g_atomic_pointer_get ((gssize *) &server->stats.updates);
  stats->deltas = (gint64) g_atomic_pointer_get ((gssize *) &server->stats.deltas);
  stats->bytes_in = (gint64) g_atomic_pointer_get ((gssize *) &server->stats.bytes_in);
  stats->bytes_out = (gint64) g_atomic_pointer_get ((gssize *) &server->stats.bytes_out);
  stats->dropped = (gint64) g_atomic_pointer_get ((gssize *) &server->stats.dropped);
}

gboolean
shoal_server_stop_at (ShoalServer *server, gint64 step, gint64 *stopped_at, GError **error)
{
  if (step < 0 || step > SHOAL_SERVER_MAX_VERSION)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC,
                   "stop_at: step %" G_GINT64_FORMAT " is outside 0 .. 2^62", step);
      return FALSE;
    }
  if (server->opts.mode != SHOAL_UPDATE_SYNC)
    {
      if (stopped_at != NULL)
        *stopped_at = step;  /* asynchronous groups stop each at its own step */
      return TRUE;
    }
  /* Under every slice's lock at once (in slice order; nothing else holds
   * two): no push can apply a step while the stop step is chosen.  With
   * backup workers the others may have applied the caller's step without
   * it; stopping there would leave that step applied on some slices and
   * refused on the rest, and the processes checkpointing a step apart.
   * The stop then falls at the first step no slice has applied: the
   * workers that made the applied ones push it to every slice. */
  gint64 applied = 0;
  for (int i = 0; i < server->opts.nslices; i++)
    {
      Slice *s = &server->slices[i];
      g_mutex_lock (&s->lock);
      if (s->hosted)
        applied = MAX (applied, s->version);
    }
  gint64 cur = stop_step (server);
  gint64 at = MIN (cur, MAX (step, applied));
  g_atomic_pointer_set ((gssize *) &server->stop_step, (gssize) at);
  /* a pull that read the old stop step is waiting by now */
  for (int i = server->opts.nslices - 1; i >= 0; i--)
    {
      Slice *s = &server->slices[i];
      g_cond_broadcast (&s->changed);
      g_mutex_unlock (&s->lock);
    }
  if (stopped_at != NULL)
    *stopped_at = at;
  return TRUE;
}

gint64
shoal_server_stop_step (ShoalServer *server)
{
  gint64 step = stop_step (server);
  return step == G_MAXINT64 ? -1 : step;
}

void
shoal_server_stop (ShoalServer *server)
{
  g_atomic_int_set (&server->stopping, TRUE);
  g_mutex_lock (&server->sync_lock);
  g_cond_broadcast (&server->sync_due);
  g_mutex_unlock (&server->sync_lock);
  for (int i = 0; i < server->opts.nslices; i++)
    {
      Slice *s = &server->slices[i];
      g_mutex_lock (&s->lock);
      g_cond_broadcast (&s->changed);
      g_mutex_unlock (&s->lock);
    }
}
