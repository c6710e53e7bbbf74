/* Param slices and their updates.  The value and state buffers are laid
 * out exactly like the workers' param stores, so a slice is an offset
 * range on both sides and nothing is repacked. */
#include "server/server.h"

#include <string.h>

typedef struct {
  size_t begin, end;
  gint64 version;
  GMutex lock;
} Slice;

typedef struct {
  size_t offset, count;
  float lr_scale, wd_scale;
  gint updates;    /* per param: Adam's bias-correction count; atomic, a param may span slices */
} Segment;

struct _ShoalServer {
  ShoalUpdaterConf updater;
  size_t total;
  float *values;
  float *state;        /* state_per_value * total */
  int state_per_value;
  int nslices;
  Slice *slices;
  int nsegments;
  Segment *segments;   /* params in offset order */
};

ShoalServer *
shoal_server_new (const ShoalParamStore *layout, const ShoalUpdaterConf *updater, int nslices)
{
  g_return_val_if_fail (layout->allocated && nslices >= 1, NULL);
  ShoalServer *server = g_new0 (ShoalServer, 1);
  server->updater = *updater;
  server->total = layout->total;
  server->values = shoal_alloc_floats (layout->total);
  memcpy (server->values, layout->values, layout->total * sizeof (float));
  server->state_per_value = shoal_updater_state_per_value (updater->kind);
  if (server->state_per_value > 0)
    server->state = shoal_alloc_floats (layout->total * (size_t) server->state_per_value);

  server->nsegments = (int) layout->params->len;
  server->segments = g_new0 (Segment, server->nsegments);
  for (int i = 0; i < server->nsegments; i++)
    {
      const ShoalParam *p = g_ptr_array_index (layout->params, i);
      server->segments[i] = (Segment) { p->offset, p->count, p->lr_scale, p->wd_scale, 0 };
    }

  if ((size_t) nslices > layout->total && layout->total > 0)
    nslices = (int) layout->total;
  server->nslices = nslices;
  server->slices = g_new0 (Slice, nslices);
  for (int i = 0; i < nslices; i++)
    {
      server->slices[i].begin = layout->total * (size_t) i / (size_t) nslices;
      server->slices[i].end = layout->total * (size_t) (i + 1) / (size_t) nslices;
      server->slices[i].version = -1;
      g_mutex_init (&server->slices[i].lock);
    }
  return server;
}

void
shoal_server_free (ShoalServer *server)
{
  if (server == NULL)
    return;
  for (int i = 0; i < server->nslices; i++)
    g_mutex_clear (&server->slices[i].lock);
  g_free (server->slices);
  g_free (server->segments);
  shoal_free_aligned (server->values);
  shoal_free_aligned (server->state);
  g_free (server);
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
  return server->nslices;
}

void
shoal_server_slice_range (ShoalServer *server, int slice, size_t *begin, size_t *end)
{
  g_return_if_fail (slice >= 0 && slice < server->nslices);
  *begin = server->slices[slice].begin;
  *end = server->slices[slice].end;
}

gint64
shoal_server_slice_version (ShoalServer *server, int slice)
{
  g_return_val_if_fail (slice >= 0 && slice < server->nslices, -1);
  Slice *s = &server->slices[slice];
  g_mutex_lock (&s->lock);
  gint64 v = s->version;
  g_mutex_unlock (&s->lock);
  return v;
}

/* Index of the first slice whose end is past `offset`. */
static int
slice_of (ShoalServer *server, size_t offset)
{
  int lo = 0, hi = server->nslices - 1;
  while (lo < hi)
    {
      int mid = (lo + hi) / 2;
      if (server->slices[mid].end <= offset)
        lo = mid + 1;
      else
        hi = mid;
    }
  return lo;
}

static void
apply_range (ShoalServer *server, size_t begin, size_t end, const float *grad, int step)
{
  for (int i = 0; i < server->nsegments; i++)
    {
      Segment *seg = &server->segments[i];
      size_t a = MAX (begin, seg->offset), b = MIN (end, seg->offset + seg->count);
      if (a >= b)
        continue;
      /* a param's count advances once per step, when its first value is updated */
      gint t = a == seg->offset ? g_atomic_int_add (&seg->updates, 1) + 1
                                : g_atomic_int_get (&seg->updates);
      float *state_a = server->state_per_value > 0 ? server->state + a : NULL;
      float *state_b = server->state_per_value > 1 ? server->state + server->total + a : NULL;
      shoal_updater_apply (&server->updater, step, MAX (t, 1), seg->lr_scale,
                           seg->wd_scale, server->values + a, grad + (a - begin), state_a, state_b,
                           b - a);
    }
}

void
shoal_server_update (ShoalServer *server, size_t begin, size_t end, const float *grad, int step)
{
  g_return_if_fail (begin <= end && end <= server->total);
  for (int s = slice_of (server, begin); s < server->nslices && server->slices[s].begin < end; s++)
    {
      Slice *slice = &server->slices[s];
      size_t a = MAX (begin, slice->begin), b = MIN (end, slice->end);
      g_mutex_lock (&slice->lock);
      apply_range (server, a, b, grad + (a - begin), step);
      slice->version = MAX (slice->version, step);
      g_mutex_unlock (&slice->lock);
    }
}

void
shoal_server_read (ShoalServer *server, size_t begin, size_t end, float *dst)
{
  g_return_if_fail (begin <= end && end <= server->total);
  for (int s = slice_of (server, begin); s < server->nslices && server->slices[s].begin < end; s++)
    {
      Slice *slice = &server->slices[s];
      size_t a = MAX (begin, slice->begin), b = MIN (end, slice->end);
      g_mutex_lock (&slice->lock);
      memcpy (dst + (a - begin), server->values + a, (b - a) * sizeof (float));
      g_mutex_unlock (&slice->lock);
    }
}
