/* Param slices, their versions and updates.  The value and state buffers
 * are laid out exactly like the workers' param stores, so a slice is an
 * offset range on both sides and nothing is repacked. */
#include "server/server.h"

#include <string.h>

#include "core/error.h"
#include "core/parallel.h"
#include "server/ssp.h"

#define SLICE_ALIGN 16

typedef struct {
  size_t begin, end;
  gboolean hosted;
  gint64 version;          /* updates applied */
  int contributions;       /* SYNC: gradients summed for step == version */
  float *accumulator;      /* SYNC with several contributors: the running sum; owned */
  float *baseline;         /* Hogwild: values at the last sync; owned, NULL until first take */
  float *center;           /* EASGD master: the center variable; owned, NULL without elastic_center */
  gint64 updates_since_sync;
  ShoalClocks *clocks;     /* SSP: the pushing units' clocks; owned, NULL without SSP */
  int readers;             /* replies sending the values in place (shoal_server_pull_pinned) */
  gint writers_waiting;    /* atomic: writers waiting for them (wait_readers) */
  GMutex lock;
  GCond changed;
} Slice;

typedef struct {
  size_t offset, count;
  float lr_scale, wd_scale;
  gint updates;    /* Adam's bias-correction count (what the checkpoint keeps); atomic */
} Segment;

struct _ShoalServer {
  ShoalUpdaterConf updater;
  ShoalServerOptions opts;
  size_t total;
  float *values;
  float *state;             /* state_per_value * total */
  int state_per_value;
  Slice *slices;
  int nsegments;
  /* [slice * nsegments + segment]: updates of the segment's values inside
   * the slice (under the slice's lock).  A param that spans slices gets
   * one update per slice, in whatever order the slices arrive: each part
   * counts its own, so Adam corrects every value by the updates its
   * moments saw (one count per param lagged a step for the parts applied
   * before the part holding the param's start). */
  gint *part_updates;
  Segment *segments;        /* params in offset order */
  gint stopping;            /* atomic */
  gint64 stop_step;         /* SYNC: the job stops here (shoal_server_stop_at); G_MAXINT64 none;
                             * atomic, set before each slice's waiters are woken */
  GMutex checkpoint_lock;
  gint64 last_checkpoint;   /* step of the last save; -1 none */
  GMutex sync_lock;         /* Hogwild: wakes the sync thread after updates */
  GCond sync_due;
  ShoalServerStats stats;   /* atomics */
  GMutex staleness_lock;    /* taken inside slice locks */
  ShoalStaleness staleness; /* since the last shoal_server_take_staleness */
};

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
  server->values = values;
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
  shoal_free_aligned (server->values);
  shoal_free_aligned (server->state);
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
  return server->values;
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
static Slice *
checked_slice (ShoalServer *server, const char *what, int slice, size_t n, GError **error)
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
} SegmentUpdate;

static void
update_chunk (size_t begin, size_t end, gpointer data)
{
  SegmentUpdate *u = data;
  shoal_updater_apply (u->updater, u->step, u->t, u->lr_scale, u->wd_scale, u->values + begin,
                       u->grad + begin, u->state_a != NULL ? u->state_a + begin : NULL,
                       u->state_b != NULL ? u->state_b + begin : NULL, end - begin);
  /* while the chunk is in cache */
  if (u->mirror != NULL)
    memcpy (u->mirror + begin, u->values + begin, (end - begin) * sizeof (float));
}

/* Applies one update of [begin, end) with gradient grad[0 .. end-begin),
 * its learning rate multiplied by lr_mult; large segments on the cores
 * that idle meanwhile (core/parallel.h).  mirror (or NULL): [begin, end)
 * of a copy of the values that gets the new ones too. */
static void
apply_range (ShoalServer *server, int slice, size_t begin, size_t end, const float *grad, gint64 step,
             float lr_mult, float *mirror)
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
      SegmentUpdate u = {
        &server->updater, (int) MIN (step, G_MAXINT), MAX (t, 1),
        seg->lr_scale * server->opts.lr_scale * lr_mult, seg->wd_scale, server->values + a,
        server->state_per_value > 0 ? server->state + a : NULL,
        server->state_per_value > 1 ? server->state + server->total + a : NULL, grad + (a - begin),
        mirror != NULL ? mirror + (a - begin) : NULL,
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

static void
wait_readers (Slice *s)
{
  while (s->readers > 0)
    wait_reader (s);
}

static void
stat_add (gint64 *counter, gint64 v)
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

gboolean
shoal_server_push_mirrored (ShoalServer *server, int slice, const float *grad, size_t n, gint64 step,
                            const ShoalPushOrigin *origin, float *mirror, gint64 *ready_version,
                            gboolean *mirrored_out, GError **error)
{
  gboolean mirrored = FALSE;
  if (mirrored_out != NULL)
    *mirrored_out = FALSE;
  Slice *s = checked_slice (server, "push", slice, n, error);
  if (s == NULL)
    return FALSE;
  gint64 base = origin != NULL ? origin->base_version : -1;
  int unit = origin != NULL ? origin->unit : -1;
  if (s->clocks != NULL && unit >= server->opts.ssp_units)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC,
                   "push: slice %d: unit %d is not one of the %d units this server bounds (SSP)",
                   slice, unit, server->opts.ssp_units);
      return FALSE;
    }
  stat_add (&server->stats.pushes, 1);
  stat_add (&server->stats.bytes_in, (gint64) (n * sizeof (float)));

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
      apply_range (server, (int) (s - server->slices), s->begin, s->end, grad, step, mult, mirror);
      mirrored = mirror != NULL;
      if (base >= 0)
        record_staleness (server, staleness);
      s->version++;
      s->updates_since_sync++;
      if (s->clocks != NULL && unit >= 0)
        shoal_clocks_advance (s->clocks, unit, step);
      ready = s->version;
      stat_add (&server->stats.updates, 1);
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
      stat_add (&server->stats.dropped, 1);
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
          apply_range (server, (int) (s - server->slices), s->begin, s->end, sum, step, 1.0f, mirror);
          mirrored = mirror != NULL;
          s->contributions = 0;
          s->version++;
          s->updates_since_sync++;
          stat_add (&server->stats.updates, 1);
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
    stat_add (&server->stats.bytes_out, (gint64) (n * sizeof (float)));
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
  stat_add (&server->stats.bytes_out, (gint64) ((s->end - s->begin) * sizeof (float)));
  return server->values + s->begin;
}

static gboolean
pull_values (ShoalServer *server, int slice, float *dst, const float **pinned, size_t n,
             gint64 min_version, gint64 timeout_us, gint64 *version, GError **error)
{
  Slice *s = checked_slice (server, "pull", slice, n, error);
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
  stat_add (&server->stats.pulls, 1);  /* calls received, waiting ones included */
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
          memcpy (dst, server->values + s->begin, n * sizeof (float));
          stat_add (&server->stats.bytes_out, (gint64) (n * sizeof (float)));
        }
      else if (pinned != NULL && !g_atomic_int_get (&s->writers_waiting))
        {
          /* a writer waiting goes first: no new readers meanwhile */
          s->readers++;
          *pinned = server->values + s->begin;
          stat_add (&server->stats.bytes_out, (gint64) (n * sizeof (float)));
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
  Slice *s = checked_slice (server, "put", slice, n, error);
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
  wait_readers (s);
  memcpy (server->values + s->begin, values, n * sizeof (float));
  s->version = version;
  s->contributions = 0;
  if (s->baseline != NULL)
    memcpy (s->baseline, values, n * sizeof (float));
  g_cond_broadcast (&s->changed);
  g_mutex_unlock (&s->lock);
  return TRUE;
}

gboolean
shoal_server_apply_delta (ShoalServer *server, int slice, const float *delta, float *values_out,
                          size_t n, GError **error)
{
  Slice *s = checked_slice (server, "apply_delta", slice, n, error);
  if (s == NULL)
    return FALSE;
  stat_add (&server->stats.deltas, 1);
  g_mutex_lock (&s->lock);
  wait_readers (s);
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
  Slice *s = checked_slice (server, "elastic_exchange", slice, n, error);
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
  stat_add (&server->stats.deltas, 1);
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
  Slice *s = checked_slice (server, "take_values", slice, n, error);
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
  Slice *s = checked_slice (server, "elastic_merge", slice, n, error);
  if (s == NULL)
    return FALSE;
  g_mutex_lock (&s->lock);
  wait_readers (s);
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
  Slice *s = checked_slice (server, "take_delta", slice, n, error);
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
  Slice *s = checked_slice (server, "merge_master", slice, n, error);
  if (s == NULL)
    return FALSE;
  g_mutex_lock (&s->lock);
  wait_readers (s);
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

/* ---- checkpoints --------------------------------------------------------- */

#define STATE_MAGIC 0x56534853u  /* "SHSV" */
/* Format 1: per hosted slice its id, version, values and optimiser
 * state.  Format 2 (a server keeping EASGD centers): the slice's center
 * follows, so that a resumed elastic job continues exactly. */
#define STATE_FORMAT 1
#define STATE_FORMAT_CENTERS 2

typedef struct {
  guint32 magic, format;
  guint64 total;
  gint32 nslices, state_per_value, nsegments, nhosted;
} StateHeader;

gboolean
shoal_server_checkpoint (ShoalServer *server, ShoalCheckpoint *ckpt, gint64 step, GError **error)
{
  g_mutex_lock (&server->checkpoint_lock);
  if (step <= server->last_checkpoint)
    {
      g_mutex_unlock (&server->checkpoint_lock);
      return TRUE;
    }
  gboolean centers = server->opts.elastic_center;
  StateHeader h = { STATE_MAGIC, centers ? STATE_FORMAT_CENTERS : STATE_FORMAT, server->total,
                    server->opts.nslices, server->state_per_value, server->nsegments, 0 };
  for (int i = 0; i < server->opts.nslices; i++)
    h.nhosted += server->slices[i].hosted;
  GByteArray *b = g_byte_array_new ();
  g_byte_array_append (b, (guint8 *) &h, sizeof h);
  for (int i = 0; i < server->nsegments; i++)
    {
      gint32 u = g_atomic_int_get (&server->segments[i].updates);
      g_byte_array_append (b, (guint8 *) &u, sizeof u);
    }
  for (int i = 0; i < server->opts.nslices; i++)
    {
      Slice *sl = &server->slices[i];
      if (!sl->hosted)
        continue;
      size_t n = sl->end - sl->begin;
      gint32 id = i;
      g_mutex_lock (&sl->lock);
      gint64 version = sl->version;
      g_byte_array_append (b, (guint8 *) &id, sizeof id);
      g_byte_array_append (b, (guint8 *) &version, sizeof version);
      g_byte_array_append (b, (guint8 *) (server->values + sl->begin), (guint) (n * sizeof (float)));
      for (int k = 0; k < server->state_per_value; k++)
        g_byte_array_append (b, (guint8 *) (server->state + (size_t) k * server->total + sl->begin),
                             (guint) (n * sizeof (float)));
      if (centers)
        g_byte_array_append (b, (guint8 *) (sl->center != NULL ? sl->center : server->values + sl->begin),
                             (guint) (n * sizeof (float)));
      g_mutex_unlock (&sl->lock);
    }
  GBytes *blob = g_byte_array_free_to_bytes (b);
  const char *names[] = { "server", NULL };
  GBytes *blobs[] = { blob, NULL };
  gboolean ok = shoal_checkpoint_save (ckpt, step, names, blobs, error);
  g_bytes_unref (blob);
  if (ok)
    server->last_checkpoint = step;
  g_mutex_unlock (&server->checkpoint_lock);
  return ok;
}

gboolean
shoal_server_restore (ShoalServer *server, ShoalCheckpoint *ckpt, gint64 step, GError **error)
{
  GBytes *blob = shoal_checkpoint_load (ckpt, "server", step, error);
  if (blob == NULL)
    return FALSE;
  gsize len = 0;
  const guint8 *p = g_bytes_get_data (blob, &len), *end = p + len;
  StateHeader h;
  gboolean ok = len >= sizeof h;
  if (ok)
    memcpy (&h, p, sizeof h);
  if (!ok || h.magic != STATE_MAGIC || (h.format != STATE_FORMAT && h.format != STATE_FORMAT_CENTERS))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA, "server checkpoint at step %" G_GINT64_FORMAT " is damaged", step);
      g_bytes_unref (blob);
      return FALSE;
    }
  if (h.total != server->total || h.nslices != server->opts.nslices
      || h.state_per_value != server->state_per_value || h.nsegments != server->nsegments)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                   "the checkpoint at step %" G_GINT64_FORMAT " is of another model, layout or updater "
                   "(%" G_GUINT64_FORMAT " values in %d slices, %d state floats per value; this job: %zu in %d, %d)",
                   step, (guint64) h.total, h.nslices, h.state_per_value, server->total,
                   server->opts.nslices, server->state_per_value);
      g_bytes_unref (blob);
      return FALSE;
    }
  p += sizeof h;
  for (int i = 0; ok && i < server->nsegments; i++, p += sizeof (gint32))
    {
      gint32 u;
      ok = p + sizeof u <= end;
      if (ok)
        {
          memcpy (&u, p, sizeof u);
          g_atomic_int_set (&server->segments[i].updates, u);
          for (int sl = 0; sl < server->opts.nslices; sl++)
            server->part_updates[(size_t) sl * server->nsegments + i] = u;
        }
    }
  int restored = 0;
  while (ok && p < end)
    {
      gint32 id;
      gint64 version;
      ok = p + sizeof id + sizeof version <= end;
      if (!ok)
        break;
      memcpy (&id, p, sizeof id);
      memcpy (&version, p + sizeof id, sizeof version);
      p += sizeof id + sizeof version;
      ok = id >= 0 && id < server->opts.nslices;
      if (!ok)
        break;
      Slice *sl = &server->slices[id];
      size_t n = sl->end - sl->begin, bytes = n * sizeof (float);
      size_t floats_per_value = (size_t) (1 + server->state_per_value) + (h.format == STATE_FORMAT_CENTERS);
      ok = p + bytes * floats_per_value <= end;
      if (!ok)
        break;
      if (sl->hosted)
        {
          g_mutex_lock (&sl->lock);
          wait_readers (sl);
          memcpy (server->values + sl->begin, p, bytes);
          for (int k = 0; k < server->state_per_value; k++)
            memcpy (server->state + (size_t) k * server->total + sl->begin, p + bytes * (size_t) (k + 1), bytes);
          sl->version = version;
          sl->contributions = 0;
          if (sl->baseline != NULL)
            memcpy (sl->baseline, p, bytes);
          /* EASGD's center as it was; a checkpoint without centers
           * (format 1) starts it again from the master replica's values,
           * as Hogwild's baseline does */
          if (sl->center != NULL)
            memcpy (sl->center, h.format == STATE_FORMAT_CENTERS ? p + bytes * (size_t) (1 + server->state_per_value)
                                                                 : p, bytes);
          g_cond_broadcast (&sl->changed);
          g_mutex_unlock (&sl->lock);
          restored++;
        }
      p += bytes * floats_per_value;
    }
  int hosted = 0;
  for (int i = 0; i < server->opts.nslices; i++)
    hosted += server->slices[i].hosted;
  if (ok && restored != hosted)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                   "the checkpoint at step %" G_GINT64_FORMAT " holds %d of the %d slices this server serves",
                   step, restored, hosted);
      ok = FALSE;
    }
  else if (!ok)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA, "server checkpoint at step %" G_GINT64_FORMAT " is truncated", step);
  if (ok)
    server->last_checkpoint = step;
  g_bytes_unref (blob);
  return ok;
}

gboolean
shoal_server_stop_at (ShoalServer *server, gint64 step, GError **error)
{
  if (step < 0 || step > SHOAL_SERVER_MAX_VERSION)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC,
                   "stop_at: step %" G_GINT64_FORMAT " is outside 0 .. 2^62", step);
      return FALSE;
    }
  if (server->opts.mode != SHOAL_UPDATE_SYNC)
    return TRUE;  /* asynchronous groups stop each at its own step */
  gint64 cur = stop_step (server);
  while (step < cur
         && !g_atomic_pointer_compare_and_exchange ((gssize *) &server->stop_step, (gssize) cur, (gssize) step))
    cur = stop_step (server);
  /* under each slice's lock: a pull that read the old stop step is waiting by now */
  for (int i = 0; i < server->opts.nslices; i++)
    {
      Slice *s = &server->slices[i];
      g_mutex_lock (&s->lock);
      g_cond_broadcast (&s->changed);
      g_mutex_unlock (&s->lock);
    }
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
