/* The calls of ranks on one host whose slices' bytes lie in the
 * client's shared memory (rpc/shm_region.h): attach_shm maps the
 * region for the connection, push_pull_shm pushes the gradients and
 * writes the values in place.  The calls stay Thrift; only the bytes
 * do not cross the socket. */
#include "server/rpc_calls.h"

#include <math.h>
#include <string.h>

#include "rpc/listener.h"
#include "rpc/shm_region.h"

/* A connection's attached region: the worker's values and gradients in
 * the job's flat layout (the connection's data, see listener.h).
 * Reference-counted: a server that adopted the values as its storage
 * keeps the mapping past the connection. */
typedef struct {
  ShoalShmRegion *region;
  float *values, *grads;
} ConnShm;

static void
conn_shm_clear (gpointer data)
{
  shoal_shm_region_free (((ConnShm *) data)->region);
}

static void
conn_shm_free (gpointer data)
{
  g_atomic_rc_box_release_full (data, conn_shm_clear);
}

gboolean
shoal_rpc_call_attach_shm (ShoalParamServiceIf *iface, const gchar *token, const gint32 pid, const gint32 fd,
                           const gint64 bytes, const GByteArray *nonce, const gchar *host,
                           const gint64 values_at, const gint64 grads_at, ShoalParamError **err, GError **error)
{
  ShoalRpcServer *rpc = shoal_rpc_call_server (iface);
  GError *e = NULL;

  (void) error;
  if (!shoal_rpc_call_token_ok (rpc, "attach_shm", token, err))
    return FALSE;
  if (rpc->server == NULL)
    return shoal_rpc_call_fault (err, SHOAL_PARAM_FAULT_REFUSED, "attach_shm: this process serves no slices");
  /* the two areas in the layout's float offsets, 64-byte aligned, apart */
  gint64 total = (gint64) shoal_server_total (rpc->server);
  if (values_at < 0 || grads_at < 0 || values_at % 16 != 0 || grads_at % 16 != 0
      || values_at > G_MAXINT64 / 8 - total || grads_at > G_MAXINT64 / 8 - total
      || (values_at < grads_at ? grads_at - values_at : values_at - grads_at) < total)
    return shoal_rpc_call_fault (err, SHOAL_PARAM_FAULT_BAD_LENGTH,
                                 "attach_shm: values at float %" G_GINT64_FORMAT " and gradients at %"
                                 G_GINT64_FORMAT " do not lay out two areas of %" G_GINT64_FORMAT " floats",
                                 values_at, grads_at, total);
  if (nonce == NULL || nonce->len != SHOAL_SHM_NONCE_BYTES)
    return shoal_rpc_call_fault (err, SHOAL_PARAM_FAULT_BAD_LENGTH, "attach_shm: the nonce must be %d bytes",
                                 SHOAL_SHM_NONCE_BYTES);
  ShoalShmOffer offer = { .pid = pid, .fd = fd, .bytes = bytes };
  memcpy (offer.nonce, nonce->data, SHOAL_SHM_NONCE_BYTES);
  g_strlcpy (offer.host, host != NULL ? host : "", sizeof offer.host);
  size_t need = (size_t) (MAX (values_at, grads_at) + total) * sizeof (float);
  ShoalShmRegion *region = shoal_shm_region_attach (&offer, need, &e);
  if (region == NULL)
    {
      g_debug ("rpc: %s: %s", shoal_rpc_listener_peer (), e->message);
      return shoal_rpc_call_server_error (rpc, err, e);
    }
  ConnShm *shm = g_atomic_rc_box_new0 (ConnShm);
  shm->region = region;
  shm->values = (float *) shoal_shm_region_data (region) + values_at;
  shm->grads = (float *) shoal_shm_region_data (region) + grads_at;
  shoal_rpc_listener_set_conn_data (shm, conn_shm_free);
  g_debug ("rpc: %s attached %" G_GINT64_FORMAT " bytes of shared memory of process %d",
           shoal_rpc_listener_peer (), bytes, pid);
  /* SYNC: the first worker's region becomes the server's value storage,
   * so that worker reads new values where the update writes them */
  if (shoal_server_adopt_values (rpc->server, shm->values, g_atomic_rc_box_acquire (shm), conn_shm_free))
    g_debug ("rpc: %s: its region holds this server's values from now on", shoal_rpc_listener_peer ());
  else
    conn_shm_free (shm);
  return TRUE;
}

/* push_pull of several slices whose bytes lie in the connection's region:
 * every push first (each update can run while the next slice's other
 * contributors are awaited, and a worker that sends these slices one by
 * one in any order finds them pushed), then SSP's wait, then the values. */
/* The index of the first NaN or infinity in g[0 .. n), or n.  A region
 * any process of the user's could write must not put NaN in every
 * worker's values, where it would read as a diverged loss.  x * 0 is 0
 * for every finite x and NaN otherwise: one sum tells, and vectorises. */
static size_t
first_not_finite (const float *g, size_t n)
{
  float probe = 0;
  for (size_t i = 0; i < n; i++)
    probe += g[i] * 0.0f;
  if (probe == 0)
    return n;
  for (size_t i = 0; i < n; i++)
    if (!isfinite (g[i]))
      return i;
  return n;
}

gboolean
shoal_rpc_call_push_pull_shm (ShoalParamServiceIf *iface, GByteArray **_return, const gchar *token,
                              const GByteArray *slices, const gint64 step, const gint64 wait_ms,
                              const GByteArray *base_versions, const gint32 unit, const gboolean fetch,
                              const gboolean clear_grads, ShoalParamError **err, GError **error)
{
  ShoalRpcServer *rpc = shoal_rpc_call_server (iface);
  ConnShm *shm = shoal_rpc_listener_conn_data ();

  (void) error;
  if (!shoal_rpc_call_token_ok (rpc, "push_pull_shm", token, err))
    return FALSE;
  if (shm == NULL)
    return shoal_rpc_call_fault (err, SHOAL_PARAM_FAULT_REFUSED,
                                 "push_pull_shm: no shared memory attached on this connection");
  int nslices = rpc->server != NULL ? shoal_server_n_slices (rpc->server) : 0;
  guint bytes = slices != NULL ? slices->len : 0;
  int count = (int) (bytes / sizeof (gint32));
  if (bytes % sizeof (gint32) != 0 || count < 1 || count > nslices)
    return shoal_rpc_call_fault (err, SHOAL_PARAM_FAULT_UNKNOWN_SLICE,
                                 "push_pull_shm: %u bytes of slice ids: 1 to %d ids of 4 bytes expected", bytes,
                                 nslices);
  if (base_versions == NULL || base_versions->len != (guint) count * sizeof (gint64))
    return shoal_rpc_call_fault (err, SHOAL_PARAM_FAULT_BAD_LENGTH,
                                 "push_pull_shm: %d slices need %zu bytes of base versions, got %u", count,
                                 (size_t) count * sizeof (gint64),
                                 base_versions != NULL ? base_versions->len : 0);
  gint32 *ids = g_new (gint32, count);
  gint64 *ready = g_new (gint64, count);
  guint8 *seen = g_new0 (guint8, nslices);
  gboolean *mirrored = g_new0 (gboolean, count);
  memcpy (ids, slices->data, (size_t) count * sizeof (gint32));
  gboolean ok = TRUE;
  size_t n;
  for (int i = 0; i < count && ok; i++)
    {
      ok = shoal_rpc_call_slice_ok (rpc, "push_pull_shm", ids[i], FALSE, NULL, &n, err);
      if (ok && seen[ids[i]]++)
        ok = shoal_rpc_call_fault (err, SHOAL_PARAM_FAULT_UNKNOWN_SLICE,
                                   "push_pull_shm: slice %d twice in one call", ids[i]);
    }
  for (int i = 0; i < count && ok; i++)
    {
      size_t begin, end;
      gint64 base;
      GError *e = NULL;
      memcpy (&base, base_versions->data + (size_t) i * sizeof base, sizeof base);
      ShoalPushOrigin origin = { base, unit };
      shoal_server_slice_range (rpc->server, ids[i], &begin, &end);
      /* the update that this push makes writes the worker's values too,
       * unless SSP holds the reply (then they are pulled after the wait) */
      float *grad = shm->grads + begin, *mirror = fetch ? shm->values + begin : NULL;
      size_t bad = first_not_finite (grad, end - begin);
      if (bad < end - begin)
        {
          ok = shoal_rpc_call_fault (err, SHOAL_PARAM_FAULT_REFUSED,
                                     "push_pull_shm: slice %d: the gradient in the shared-memory region holds %g "
                                     "at float %zu (the worker's loss diverged - lower [updater] lr? - or another "
                                     "process wrote into the region); not applied", ids[i], grad[bad], bad);
          break;
        }
      if (clear_grads ? !shoal_server_push_consume (rpc->server, ids[i], grad, end - begin, step, &origin,
                                                    mirror, &ready[i], &mirrored[i], &e)
                      : !shoal_server_push_mirrored (rpc->server, ids[i], grad, end - begin, step, &origin,
                                                     mirror, &ready[i], &mirrored[i], &e))
        ok = shoal_rpc_call_server_error (rpc, err, e);
    }
  for (int i = 0; i < count && ok; i++)
    ok = shoal_rpc_call_wait_bound (rpc, "push_pull_shm", ids[i], unit, step, wait_ms, err);
  for (int i = 0; i < count && ok && fetch; i++)
    {
      size_t begin, end;
      if (mirrored[i])
        continue;   /* the update wrote them */
      shoal_server_slice_range (rpc->server, ids[i], &begin, &end);
      ok = shoal_rpc_call_wait_pull (rpc, "push_pull_shm", ids[i], shm->values + begin, end - begin, ready[i],
                                     wait_ms, &ready[i], err);
    }
  if (ok)
    {
      GByteArray *versions = g_byte_array_sized_new ((guint) count * sizeof (gint64));
      g_byte_array_append (versions, (const guint8 *) ready, (guint) count * sizeof (gint64));
      if (*_return != NULL)
        g_byte_array_unref (*_return);
      *_return = versions;
    }
  g_free (ids);
  g_free (ready);
  g_free (seen);
  g_free (mirrored);
  return ok;
}
