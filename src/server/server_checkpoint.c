/* A server's slices in a checkpoint: saved once per step, restored on
 * resume with their versions, optimiser state, Adam's counts and EASGD
 * centers, so that a resumed job continues exactly. */
#include "server/server_priv.h"

#include <string.h>

#include "core/error.h"

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
  /* SYNC: every unit asks at the same step, when no slice can move, so
   * one save serves them all.  ASYNC: each group asks at its own step
   * while the others push on; every request saves (its step, an older
   * one included), so that the newest save holds every group's pushes up
   * to its own request (workspace/resume_plan.h). */
  if (server->opts.mode == SHOAL_UPDATE_SYNC && step <= server->last_checkpoint)
    {
      g_mutex_unlock (&server->checkpoint_lock);
      return TRUE;
    }
  /* device mode: what the device computed since the last sync */
  if (!shoal_server_sync_host (server, error))
    {
      g_mutex_unlock (&server->checkpoint_lock);
      return FALSE;
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
    server->last_checkpoint = MAX (server->last_checkpoint, step);
  g_mutex_unlock (&server->checkpoint_lock);
  return ok;
}

/* The servers' blob of `step` (NULL with error) and its header, checked
 * against a server of `total` values in `nslices` slices, `segments`
 * params and `state_per_value` state floats a value. */
static GBytes *
load_fitting (ShoalCheckpoint *ckpt, gint64 step, size_t total, int nslices, int segments, int state_per_value,
              StateHeader *h, GError **error)
{
  GBytes *blob = shoal_checkpoint_load (ckpt, "server", step, error);
  if (blob == NULL)
    return NULL;
  gsize len = 0;
  const guint8 *p = g_bytes_get_data (blob, &len);
  gboolean ok = len >= sizeof *h;
  if (ok)
    memcpy (h, p, sizeof *h);
  if (!ok || h->magic != STATE_MAGIC || (h->format != STATE_FORMAT && h->format != STATE_FORMAT_CENTERS))
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA, "server checkpoint at step %" G_GINT64_FORMAT " is damaged", step);
  else if (h->total != total || h->nslices != nslices || h->state_per_value != state_per_value
           || h->nsegments != segments)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                 "the checkpoint at step %" G_GINT64_FORMAT " is of another model, layout or updater "
                 "(%" G_GUINT64_FORMAT " values in %d slices, %d state floats per value; this job: %zu in %d, %d)",
                 step, (guint64) h->total, h->nslices, h->state_per_value, total, nslices, state_per_value);
  else
    return blob;
  g_bytes_unref (blob);
  return NULL;
}

gboolean
shoal_server_checkpoint_fits (ShoalCheckpoint *ckpt, gint64 step, const ShoalParamStore *layout,
                              ShoalUpdaterKind kind, int nslices, GError **error)
{
  StateHeader h;
  GBytes *blob = load_fitting (ckpt, step, layout->total, nslices, (int) layout->params->len,
                               shoal_updater_state_per_value (kind), &h, error);
  if (blob != NULL)
    g_bytes_unref (blob);
  return blob != NULL;
}

gboolean
shoal_server_restore (ShoalServer *server, ShoalCheckpoint *ckpt, gint64 step, GError **error)
{
  StateHeader h;
  GBytes *blob = load_fitting (ckpt, step, server->total, server->opts.nslices, server->nsegments,
                               server->state_per_value, &h, error);
  if (blob == NULL)
    return FALSE;
  gsize len = 0;
  const guint8 *p = g_bytes_get_data (blob, &len), *end = p + len;
  gboolean ok = TRUE;
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
          shoal_server_wait_readers (sl);
          memcpy (server->values + sl->begin, p, bytes);
          for (int k = 0; k < server->state_per_value; k++)
            memcpy (server->state + (size_t) k * server->total + sl->begin, p + bytes * (size_t) (k + 1), bytes);
          shoal_server_device_upload (server, sl->begin, sl->end);
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
          /* SSP: the units come back each at its own stop step, which
           * may lie more than the bound apart once a unit that said done
           * stopped holding the others (ssp.h) */
          if (sl->clocks != NULL)
            shoal_clocks_resume (sl->clocks);
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
    server->last_checkpoint = MAX (server->last_checkpoint, step);
  g_bytes_unref (blob);
  return ok;
}
