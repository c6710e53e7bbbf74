/* The checks and the bounded waits of the parameter service's calls;
 * see rpc_calls.h. */
#include "server/rpc_calls.h"

#include <stdarg.h>
#include <string.h>

#include "core/error.h"
#include "rpc/listener.h"

#define WAIT_SLICE_US (100 * 1000)        /* a waiting pull checks for stop this often */
#define MAX_WAIT_MS ((gint64) 24 * 3600 * 1000)

/* Sets the ParamError the client gets; returns FALSE for the handler to return. */
gboolean
shoal_rpc_call_fault (ShoalParamError **err, ShoalParamFault code, const char *fmt, ...)
{
  va_list ap;
  char *msg;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  if (*err != NULL)
    g_object_unref (*err);
  *err = g_object_new (SHOAL_TYPE_PARAM_ERROR, "code", (gint) code, "message", msg, NULL);
  g_free (msg);
  return FALSE;
}

/* A ShoalServer error becomes REFUSED with the server's own message, or
 * STOPPED with the step the job stops at. */
gboolean
shoal_rpc_call_server_error (ShoalRpcServer *rpc, ShoalParamError **err, GError *e)
{
  if (g_error_matches (e, SHOAL_ERROR, SHOAL_ERROR_STOPPED))
    {
      shoal_rpc_call_fault (err, SHOAL_PARAM_FAULT_STOPPED, "%s", e->message);
      (*err)->stop_step = shoal_server_stop_step (rpc->server);
      (*err)->__isset_stop_step = TRUE;
    }
  else
    shoal_rpc_call_fault (err, SHOAL_PARAM_FAULT_REFUSED, "%s", e != NULL ? e->message : "refused");
  g_clear_error (&e);
  return FALSE;
}

/* FAILED with the reason, once shoal_rpc_server_fail was called. */
gboolean
shoal_rpc_call_not_failed (ShoalRpcServer *rpc, const char *call, ShoalParamError **err)
{
  if (!g_atomic_int_get (&rpc->failed))
    return TRUE;
  g_mutex_lock (&rpc->lock);
  shoal_rpc_call_fault (err, SHOAL_PARAM_FAULT_FAILED, "%s refused: %s", call, rpc->failure);
  g_mutex_unlock (&rpc->lock);
  return FALSE;
}

/* Compares in time independent of where the first difference is. */
gboolean
shoal_rpc_call_token_ok (ShoalRpcServer *rpc, const char *call, const gchar *token, ShoalParamError **err)
{
  gsize n = token != NULL ? strlen (token) : 0;
  guint diff = n != rpc->token_len;

  for (gsize i = 0; i < n; i++)
    diff |= (guint8) token[i] ^ (guint8) rpc->token[rpc->token_len > 0 ? i % rpc->token_len : 0];
  if (diff == 0)
    {
      shoal_rpc_listener_proven ();   /* its connection is the job's: it goes before unproven ones */
      return TRUE;
    }
  g_warning ("rpc: %s from %s refused: wrong job token", call, shoal_rpc_listener_peer ());
  shoal_rpc_listener_refused ("a call with a wrong job token");
  return shoal_rpc_call_fault (err, SHOAL_PARAM_FAULT_BAD_TOKEN, "%s refused: wrong job token", call);
}

/* The slice must be hosted here; `data` (when has_data) must hold exactly
 * its floats.  Sets *n to the slice's length in floats. */
gboolean
shoal_rpc_call_slice_ok (ShoalRpcServer *rpc, const char *call, gint32 slice, gboolean has_data,
                         const GByteArray *data, size_t *n, ShoalParamError **err)
{
  size_t begin, end;

  if (!shoal_rpc_call_not_failed (rpc, call, err))
    return FALSE;
  if (rpc->server == NULL)
    return shoal_rpc_call_fault (err, SHOAL_PARAM_FAULT_UNKNOWN_SLICE,
                                 "%s: slice %d: this process serves no slices", call, slice);
  int nslices = shoal_server_n_slices (rpc->server);
  if (slice < 0 || slice >= nslices)
    return shoal_rpc_call_fault (err, SHOAL_PARAM_FAULT_UNKNOWN_SLICE, "%s: unknown slice %d (the job has %d)",
                                 call, slice, nslices);
  if (!shoal_server_hosts (rpc->server, slice))
    return shoal_rpc_call_fault (err, SHOAL_PARAM_FAULT_UNKNOWN_SLICE, "%s: slice %d is not served here", call,
                                 slice);
  shoal_server_slice_range (rpc->server, slice, &begin, &end);
  *n = end - begin;
  if (has_data)
    {
      gsize bytes = data != NULL ? data->len : 0;
      if (bytes != *n * sizeof (float))
        return shoal_rpc_call_fault (err, SHOAL_PARAM_FAULT_BAD_LENGTH,
                                     "%s: slice %d holds %zu floats (%zu bytes), got %zu bytes", call, slice,
                                     *n, *n * sizeof (float), bytes);
    }
  return TRUE;
}

/* After a slice of a wait: FALSE (e freed, FAILED or REFUSED set) when
 * the server failed or stops, so the call ends now. */
static gboolean
wait_goes_on (ShoalRpcServer *rpc, const char *call, int slice, GError *e, ShoalParamError **err)
{
  if (!shoal_rpc_call_not_failed (rpc, call, err))
    {
      g_error_free (e);
      return FALSE;
    }
  if (g_atomic_int_get (&rpc->stopping))
    {
      g_error_free (e);
      return shoal_rpc_call_fault (err, SHOAL_PARAM_FAULT_REFUSED, "%s: slice %d: server stopping", call, slice);
    }
  return TRUE;
}

/* shoal_server_pull in slices of WAIT_SLICE_US so that a stop is seen. */
gboolean
shoal_rpc_call_wait_pull_into (ShoalRpcServer *rpc, const char *call, int slice, float *dst,
                               const float **pinned, size_t n, gint64 min_version, gint64 wait_ms,
                               gint64 *version, ShoalParamError **err)
{
  gint64 deadline = g_get_monotonic_time () + CLAMP (wait_ms, 0, MAX_WAIT_MS) * 1000;

  for (;;)
    {
      gint64 t0 = g_get_monotonic_time ();
      gint64 chunk = MIN (MAX (deadline - t0, 0), WAIT_SLICE_US);
      GError *e = NULL;

      if (pinned != NULL ? shoal_server_pull_pinned (rpc->server, slice, n, min_version, chunk, version,
                                                     pinned, &e)
                         : shoal_server_pull (rpc->server, slice, dst, n, min_version, chunk, version, &e))
        return TRUE;
      gint64 t1 = g_get_monotonic_time ();
      if (!wait_goes_on (rpc, call, slice, e, err))
        return FALSE;
      /* a failure other than the wait running out: report it */
      if (t1 - t0 < chunk || g_error_matches (e, SHOAL_ERROR, SHOAL_ERROR_STOPPED)
          || shoal_server_slice_version (rpc->server, slice) >= min_version)
        return shoal_rpc_call_server_error (rpc, err, e);
      if (t1 >= deadline)
        {
          shoal_rpc_call_fault (err, SHOAL_PARAM_FAULT_TIMEOUT,
                                "%s: slice %d did not reach version %" G_GINT64_FORMAT
                                " within %" G_GINT64_FORMAT " ms (%s)", call, slice, min_version, wait_ms,
                                e->message);
          g_error_free (e);
          return FALSE;
        }
      g_error_free (e);
    }
}

gboolean
shoal_rpc_call_wait_pull (ShoalRpcServer *rpc, const char *call, int slice, float *dst, size_t n,
                          gint64 min_version, gint64 wait_ms, gint64 *version, ShoalParamError **err)
{
  return shoal_rpc_call_wait_pull_into (rpc, call, slice, dst, NULL, n, min_version, wait_ms, version, err);
}

/* SSP: shoal_server_wait_bound in slices of WAIT_SLICE_US so that a
 * stop is seen; the wait is bounded by the call's wait_ms. */
gboolean
shoal_rpc_call_wait_bound (ShoalRpcServer *rpc, const char *call, int slice, int unit, gint64 step,
                           gint64 wait_ms, ShoalParamError **err)
{
  gint64 deadline = g_get_monotonic_time () + CLAMP (wait_ms, 0, MAX_WAIT_MS) * 1000;

  for (;;)
    {
      gint64 chunk = MIN (MAX (deadline - g_get_monotonic_time (), 0), WAIT_SLICE_US);
      GError *e = NULL;

      if (shoal_server_wait_bound (rpc->server, slice, unit, step, chunk, &e))
        return TRUE;
      if (!wait_goes_on (rpc, call, slice, e, err))
        return FALSE;
      if (!g_error_matches (e, SHOAL_ERROR, SHOAL_ERROR_TIMEOUT))
        return shoal_rpc_call_server_error (rpc, err, e);
      if (g_get_monotonic_time () >= deadline)
        {
          shoal_rpc_call_fault (err, SHOAL_PARAM_FAULT_TIMEOUT, "%s: %s (for %" G_GINT64_FORMAT " ms)", call,
                                e->message, wait_ms);
          g_error_free (e);
          return FALSE;
        }
      g_error_free (e);
    }
}
