/* The parameter service of thrift/param.thrift over a ShoalServer,
 * served by an rpc/listener.h listener (a pool of call threads that
 * grows while handlers wait).
 *
 * The handler is a subclass of the generated one; every call checks the
 * token, the slice and the data length before it reaches the ShoalServer,
 * which is thread-safe.  Without a ShoalServer (a process holding only
 * workers of a group spread over processes) every param call fails the
 * slice check.  send_bridge hands its data to the bridge sink without a
 * copy: the buffer was received for this call alone.  Pulls waiting for a
 * version wait in slices of 100 ms that check for the stop, so stopping
 * never waits for a peer.  fp32 values are sent without a copy (in place
 * where they are stable, else pinned while sent; reply_values). */
#include "server/rpc_server.h"

#include <stdarg.h>
#include <string.h>

#include "core/codec.h"
#include "core/error.h"
#include "rpc/listener.h"
#include "rpc/shm_region.h"
#include "server/liveness.h"
#include "server/rpc_types.h"

#if G_BYTE_ORDER != G_LITTLE_ENDIAN
#error "the parameter service sends float32 in host byte order, which must be little-endian"
#endif

#define HEADROOM (64 * 1024)              /* message bytes besides a slice's floats */
#define WAIT_SLICE_US (100 * 1000)        /* a waiting pull checks for stop this often */
#define MAX_WAIT_MS ((gint64) 24 * 3600 * 1000)
#define BRIDGE_MESSAGE_BYTES ((size_t) 256 << 20)   /* default limit where bridge messages come */

struct _ShoalRpcServer {
  ShoalServer *server;      /* borrowed, may be NULL */
  ShoalBridgeSink bridge_sink;  /* NULL: send_bridge refused */
  gpointer bridge_data;
  char *token;
  gsize token_len;
  int expected_shutdowns;
  ShoalCheckpoint *checkpoint;  /* borrowed, may be NULL */
  gboolean (*give_up) (void);   /* may be NULL */
  ShoalLiveness *liveness;      /* borrowed, may be NULL */
  ShoalRpcListener *listener;
  ThriftProcessor *processor;
  GObject *handler;

  GMutex lock;
  GCond cond;               /* finished or stopping changed */
  GHashTable *finished;     /* ranks done (shutdown) or lost, under lock */
  char *failure;            /* why this process stops the job (shoal_rpc_server_fail); under lock */
  gint failed;              /* atomic: failure is set */
  gint stopping;            /* atomic */
  int waiters;              /* threads in shoal_rpc_server_wait, under lock: stop waits for them to leave */
};

static const char *
peer (void)
{
  return shoal_rpc_listener_peer ();
}

/* ---- the handler ---------------------------------------------------------- */

typedef struct {
  ShoalParamServiceHandler parent;
  ShoalRpcServer *rpc;
} ShoalRpcHandler;

typedef struct {
  ShoalParamServiceHandlerClass parent;
} ShoalRpcHandlerClass;

GType shoal_rpc_handler_get_type (void);
G_DEFINE_TYPE (ShoalRpcHandler, shoal_rpc_handler, SHOAL_TYPE_PARAM_SERVICE_HANDLER)

static ShoalRpcServer *
rpc_of (ShoalParamServiceIf *iface)
{
  return ((ShoalRpcHandler *) iface)->rpc;
}

static gboolean fault (ShoalParamError **err, ShoalParamFault code, const char *fmt, ...)
  G_GNUC_PRINTF (3, 4);

/* Sets the ParamError the client gets; returns FALSE for the handler to return. */
static gboolean
fault (ShoalParamError **err, ShoalParamFault code, const char *fmt, ...)
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
static gboolean
server_fault (ShoalRpcServer *rpc, ShoalParamError **err, GError *e)
{
  if (g_error_matches (e, SHOAL_ERROR, SHOAL_ERROR_STOPPED))
    {
      fault (err, SHOAL_PARAM_FAULT_STOPPED, "%s", e->message);
      (*err)->stop_step = shoal_server_stop_step (rpc->server);
      (*err)->__isset_stop_step = TRUE;
    }
  else
    fault (err, SHOAL_PARAM_FAULT_REFUSED, "%s", e != NULL ? e->message : "refused");
  g_clear_error (&e);
  return FALSE;
}

/* FAILED with the reason, once shoal_rpc_server_fail was called. */
static gboolean
not_failed (ShoalRpcServer *rpc, const char *call, ShoalParamError **err)
{
  if (!g_atomic_int_get (&rpc->failed))
    return TRUE;
  g_mutex_lock (&rpc->lock);
  fault (err, SHOAL_PARAM_FAULT_FAILED, "%s refused: %s", call, rpc->failure);
  g_mutex_unlock (&rpc->lock);
  return FALSE;
}

/* Compares in time independent of where the first difference is. */
static gboolean
token_ok (ShoalRpcServer *rpc, const char *call, const gchar *token, ShoalParamError **err)
{
  gsize n = token != NULL ? strlen (token) : 0;
  guint diff = n != rpc->token_len;

  for (gsize i = 0; i < n; i++)
    diff |= (guint8) token[i] ^ (guint8) rpc->token[rpc->token_len > 0 ? i % rpc->token_len : 0];
  if (diff == 0)
    return TRUE;
  g_warning ("rpc: %s from %s refused: wrong job token", call, peer ());
  return fault (err, SHOAL_PARAM_FAULT_BAD_TOKEN, "%s refused: wrong job token", call);
}

/* The slice must be hosted here; `data` (when has_data) must hold exactly
 * its floats.  Sets *n to the slice's length in floats. */
static gboolean
slice_ok (ShoalRpcServer *rpc, const char *call, gint32 slice, gboolean has_data,
          const GByteArray *data, size_t *n, ShoalParamError **err)
{
  size_t begin, end;

  if (!not_failed (rpc, call, err))
    return FALSE;
  if (rpc->server == NULL)
    return fault (err, SHOAL_PARAM_FAULT_UNKNOWN_SLICE,
                  "%s: slice %d: this process serves no slices", call, slice);
  int nslices = shoal_server_n_slices (rpc->server);
  if (slice < 0 || slice >= nslices)
    return fault (err, SHOAL_PARAM_FAULT_UNKNOWN_SLICE, "%s: unknown slice %d (the job has %d)",
                  call, slice, nslices);
  if (!shoal_server_hosts (rpc->server, slice))
    return fault (err, SHOAL_PARAM_FAULT_UNKNOWN_SLICE, "%s: slice %d is not served here", call,
                  slice);
  shoal_server_slice_range (rpc->server, slice, &begin, &end);
  *n = end - begin;
  if (has_data)
    {
      gsize bytes = data != NULL ? data->len : 0;
      if (bytes != *n * sizeof (float))
        return fault (err, SHOAL_PARAM_FAULT_BAD_LENGTH,
                      "%s: slice %d holds %zu floats (%zu bytes), got %zu bytes", call, slice, *n,
                      *n * sizeof (float), bytes);
    }
  return TRUE;
}

static float *
floats_of (const GByteArray *a)
{
  return a != NULL ? (float *) (void *) a->data : NULL;
}

/* shoal_server_pull in slices of WAIT_SLICE_US so that a stop is seen. */
static gboolean
wait_pull_into (ShoalRpcServer *rpc, const char *call, int slice, float *dst, const float **pinned,
                size_t n, gint64 min_version, gint64 wait_ms, gint64 *version, ShoalParamError **err)
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
      if (!not_failed (rpc, call, err))
        {
          g_error_free (e);
          return FALSE;
        }
      if (g_atomic_int_get (&rpc->stopping))
        {
          g_error_free (e);
          return fault (err, SHOAL_PARAM_FAULT_REFUSED, "%s: slice %d: server stopping", call,
                        slice);
        }
      /* a failure other than the wait running out: report it */
      if (t1 - t0 < chunk || g_error_matches (e, SHOAL_ERROR, SHOAL_ERROR_STOPPED)
          || shoal_server_slice_version (rpc->server, slice) >= min_version)
        return server_fault (rpc, err, e);
      if (t1 >= deadline)
        {
          fault (err, SHOAL_PARAM_FAULT_TIMEOUT, "%s: slice %d did not reach version %" G_GINT64_FORMAT
                 " within %" G_GINT64_FORMAT " ms (%s)", call, slice, min_version, wait_ms,
                 e->message);
          g_error_free (e);
          return FALSE;
        }
      g_error_free (e);
    }
}

static gboolean
wait_pull (ShoalRpcServer *rpc, const char *call, int slice, float *dst, size_t n,
           gint64 min_version, gint64 wait_ms, gint64 *version, ShoalParamError **err)
{
  return wait_pull_into (rpc, call, slice, dst, NULL, n, min_version, wait_ms, version, err);
}

/* SSP: shoal_server_wait_bound in slices of WAIT_SLICE_US so that a
 * stop is seen; the wait is bounded by the call's wait_ms. */
static gboolean
wait_bound (ShoalRpcServer *rpc, const char *call, int slice, int unit, gint64 step,
            gint64 wait_ms, ShoalParamError **err)
{
  gint64 deadline = g_get_monotonic_time () + CLAMP (wait_ms, 0, MAX_WAIT_MS) * 1000;

  for (;;)
    {
      gint64 chunk = MIN (MAX (deadline - g_get_monotonic_time (), 0), WAIT_SLICE_US);
      GError *e = NULL;

      if (shoal_server_wait_bound (rpc->server, slice, unit, step, chunk, &e))
        return TRUE;
      if (!not_failed (rpc, call, err))
        {
          g_error_free (e);
          return FALSE;
        }
      if (g_atomic_int_get (&rpc->stopping))
        {
          g_error_free (e);
          return fault (err, SHOAL_PARAM_FAULT_REFUSED, "%s: slice %d: server stopping", call, slice);
        }
      if (!g_error_matches (e, SHOAL_ERROR, SHOAL_ERROR_TIMEOUT))
        return server_fault (rpc, err, e);
      if (g_get_monotonic_time () >= deadline)
        {
          fault (err, SHOAL_PARAM_FAULT_TIMEOUT, "%s: %s (for %" G_GINT64_FORMAT " ms)", call, e->message,
                 wait_ms);
          g_error_free (e);
          return FALSE;
        }
      g_error_free (e);
    }
}

/* The wait of a push (not push_pull) under SSP: about the client's call
 * timeout, which it does not send; 50 s leaves the default 60 s call room. */
#define PUSH_BOUND_WAIT_MS 50000

/* The gradient's floats: the data itself (fp32), or decoded from the
 * codec into *decoded (g_free it).  NULL with *err set when the data is
 * not the codec's encoding of the slice. */
static const float *
grad_floats (const char *call, int slice, const GByteArray *grad, gint32 codec, size_t n,
             float **decoded, ShoalParamError **err)
{
  *decoded = NULL;
  if (codec == SHOAL_CODEC_FP32)
    return floats_of (grad);
  if (codec < 0 || codec >= SHOAL_CODEC_COUNT)
    {
      fault (err, SHOAL_PARAM_FAULT_BAD_LENGTH, "%s: slice %d: unknown gradient codec %d", call, slice,
             codec);
      return NULL;
    }
  *decoded = g_new (float, MAX (n, 1));
  gsize bytes = grad != NULL ? grad->len : 0;
  if (!shoal_codec_decode ((ShoalCodec) codec, grad != NULL ? grad->data : NULL, bytes, *decoded, n))
    {
      g_clear_pointer (decoded, g_free);
      fault (err, SHOAL_PARAM_FAULT_BAD_LENGTH,
             "%s: slice %d: %zu bytes are not a %s encoding of its %zu floats (%zu bytes)", call, slice,
             bytes, shoal_codec_name ((ShoalCodec) codec), n, shoal_codec_bytes ((ShoalCodec) codec, n));
      return NULL;
    }
  return *decoded;
}

static gboolean
values_codec_ok (const char *call, int slice, gint32 codec, ShoalParamError **err)
{
  if (codec == SHOAL_CODEC_FP32 || codec == SHOAL_CODEC_FP16 || codec == SHOAL_CODEC_BF16)
    return TRUE;
  return fault (err, SHOAL_PARAM_FAULT_BAD_LENGTH, "%s: slice %d: values cannot be sent as codec %d",
                call, slice, codec);
}

static gboolean
handler_push (ShoalParamServiceIf *iface, const gchar *token, const gint32 slice,
              const gint64 step, const GByteArray *grad, const gint64 base_version,
              const gint32 unit, const gint32 grad_codec, ShoalParamError **err, GError **error)
{
  ShoalRpcServer *rpc = rpc_of (iface);
  ShoalPushOrigin origin = { base_version, unit };
  GError *e = NULL;
  size_t n;
  float *decoded;

  (void) error;
  if (!token_ok (rpc, "push", token, err)
      || !slice_ok (rpc, "push", slice, grad_codec == SHOAL_CODEC_FP32, grad, &n, err))
    return FALSE;
  const float *g = grad_floats ("push", slice, grad, grad_codec, n, &decoded, err);
  if (g == NULL)
    return FALSE;
  gboolean ok = shoal_server_push_from (rpc->server, slice, g, n, step, &origin, NULL, &e);
  g_free (decoded);
  if (!ok)
    return server_fault (rpc, err, e);
  return wait_bound (rpc, "push", slice, unit, step, PUSH_BOUND_WAIT_MS, err);
}

static void
set_values (ShoalSliceValues *ret, GByteArray *values, gint64 version)
{
  if (ret->values != NULL)
    g_byte_array_unref (ret->values);
  ret->values = values;
  ret->__isset_values = TRUE;
  ret->version = version;
  ret->__isset_version = TRUE;
}

/* A pin on a slice's values (shoal_server_pull_pinned) that the reply's
 * writer holds while it sends them; released once. */
typedef struct {
  ShoalServer *server;
  int slice;
  gint released;   /* atomic */
} ValuesPin;

static gboolean
pin_yield_wanted (gpointer data)
{
  ValuesPin *pin = data;
  return shoal_server_pin_wanted (pin->server, pin->slice);
}

static void
pin_release (gpointer data)
{
  ValuesPin *pin = data;
  if (g_atomic_int_compare_and_exchange (&pin->released, 0, 1))
    shoal_server_unpin (pin->server, pin->slice);
}

/* A reply straight from the server's values: the array lends them to the
 * generated writer, and a reference kept here outlives the reply object,
 * which unrefs its fields after writing; once the reply is written the
 * memory is taken back out of the array (never freed with it), and the
 * pin, if any, is released (the writer did so already unless the reply
 * failed before the values). */
typedef struct {
  GByteArray *array;
  ValuesPin *pin;    /* or NULL */
} Lent;

static void
lend_back (gpointer data)
{
  Lent *lent = data;
  g_byte_array_steal (lent->array, NULL);
  g_byte_array_unref (lent->array);
  if (lent->pin != NULL)
    {
      pin_release (lent->pin);
      g_free (lent->pin);
    }
  g_free (lent);
}

/* Takes `pin` (may be NULL). */
static GByteArray *
lend_values (const float *values, size_t n, ValuesPin *pin)
{
  Lent *lent = g_new (Lent, 1);
  lent->array = g_byte_array_new_take ((guint8 *) values, n * sizeof (float));
  lent->pin = pin;
  GByteArray *reply = g_byte_array_ref (lent->array);
  shoal_rpc_listener_after_reply (lend_back, lent);
  return reply;
}

/* The values to answer with, lent without a copy where that is safe:
 * where the server's values are stable (shoal_server_values_stable) in
 * place; else pinned while the reply sends them (writers wait for it,
 * and it gives way within a tick to one that waits, never waiting on the
 * client meanwhile), or - while a writer waits already - a copy into a
 * new array.  FALSE with *err set on failure. */
static gboolean
reply_values (ShoalRpcServer *rpc, const char *call, int slice, size_t n, gint64 min_version,
              gint64 wait_ms, GByteArray **values, gint64 *version, ShoalParamError **err)
{
  *values = NULL;
  if (shoal_server_values_stable (rpc->server))
    {
      if (!wait_pull (rpc, call, slice, NULL, n, min_version, wait_ms, version, err))
        return FALSE;
      *values = lend_values (shoal_server_lend_values (rpc->server, slice), n, NULL);
      return TRUE;
    }
  const float *pinned = NULL;
  if (!wait_pull_into (rpc, call, slice, NULL, &pinned, n, min_version, wait_ms, version, err))
    return FALSE;
  if (pinned != NULL)
    {
      ValuesPin *pin = g_new0 (ValuesPin, 1);
      pin->server = rpc->server;
      pin->slice = slice;
      ShoalPinnedBytes bytes = { pin_yield_wanted, pin_release, pin };
      *values = lend_values (pinned, n, pin);
      shoal_rpc_listener_reply_pinned (pinned, (guint32) (n * sizeof (float)), &bytes);
      return TRUE;
    }
  GByteArray *copy = g_byte_array_sized_new ((guint) (n * sizeof (float)));
  g_byte_array_set_size (copy, (guint) (n * sizeof (float)));
  if (!wait_pull (rpc, call, slice, floats_of (copy), n, *version, wait_ms, version, err))
    {
      g_byte_array_unref (copy);
      return FALSE;
    }
  *values = copy;
  return TRUE;
}

/* Values encoded for the reply: copied out under the slice's lock, then
 * encoded into a new array. */
static gboolean
coded_values (ShoalRpcServer *rpc, const char *call, int slice, size_t n, gint64 min_version,
              gint64 wait_ms, gint32 codec, GByteArray **out, gint64 *version, ShoalParamError **err)
{
  float *floats = g_new (float, MAX (n, 1));
  if (!wait_pull (rpc, call, slice, floats, n, min_version, wait_ms, version, err))
    {
      g_free (floats);
      return FALSE;
    }
  size_t bytes = shoal_codec_bytes ((ShoalCodec) codec, n);
  *out = g_byte_array_sized_new ((guint) bytes);
  g_byte_array_set_size (*out, (guint) bytes);
  shoal_codec_encode ((ShoalCodec) codec, floats, NULL, n, (*out)->data);
  g_free (floats);
  return TRUE;
}

static gboolean
handler_pull (ShoalParamServiceIf *iface, ShoalSliceValues **_return, const gchar *token,
              const gint32 slice, const gint64 min_version, const gint64 wait_ms,
              const gint32 values_codec, ShoalParamError **err, GError **error)
{
  ShoalRpcServer *rpc = rpc_of (iface);
  GByteArray *values;
  gint64 version = 0;
  size_t n;

  (void) error;
  if (!token_ok (rpc, "pull", token, err) || !slice_ok (rpc, "pull", slice, FALSE, NULL, &n, err)
      || !values_codec_ok ("pull", slice, values_codec, err))
    return FALSE;
  if (values_codec != SHOAL_CODEC_FP32)
    {
      if (!coded_values (rpc, "pull", slice, n, min_version, wait_ms, values_codec, &values, &version, err))
        return FALSE;
      set_values (*_return, values, version);
      return TRUE;
    }
  if (!reply_values (rpc, "pull", slice, n, min_version, wait_ms, &values, &version, err))
    return FALSE;
  set_values (*_return, values, version);
  return TRUE;
}

/* push, then pull the first version that holds this gradient, which the
 * server names (SYNC: step + 1, or at once for a backup worker's late
 * gradient; ASYNC: the version the push made), after SSP's wait.  fp32
 * values go out without a copy where that is safe (reply_values). */
static gboolean
handler_push_pull (ShoalParamServiceIf *iface, ShoalSliceValues **_return, const gchar *token,
                   const gint32 slice, const gint64 step, const GByteArray *grad,
                   const gint64 wait_ms, const gint64 base_version, const gint32 unit,
                   const gint32 grad_codec, const gint32 values_codec, ShoalParamError **err,
                   GError **error)
{
  ShoalRpcServer *rpc = rpc_of (iface);
  ShoalPushOrigin origin = { base_version, unit };
  GByteArray *values;
  GError *e = NULL;
  gint64 ready = 0, version = 0;
  size_t n;
  float *decoded;

  (void) error;
  if (!token_ok (rpc, "push_pull", token, err)
      || !slice_ok (rpc, "push_pull", slice, grad_codec == SHOAL_CODEC_FP32, grad, &n, err)
      || !values_codec_ok ("push_pull", slice, values_codec, err))
    return FALSE;
  const float *g = grad_floats ("push_pull", slice, grad, grad_codec, n, &decoded, err);
  if (g == NULL)
    return FALSE;
  gboolean pushed = shoal_server_push_from (rpc->server, slice, g, n, step, &origin, &ready, &e);
  g_free (decoded);
  if (!pushed)
    return server_fault (rpc, err, e);
  if (!wait_bound (rpc, "push_pull", slice, unit, step, wait_ms, err))
    return FALSE;
  if (values_codec != SHOAL_CODEC_FP32)
    {
      if (!coded_values (rpc, "push_pull", slice, n, ready, wait_ms, values_codec, &values, &version, err))
        return FALSE;
      set_values (*_return, values, version);
      return TRUE;
    }
  if (!reply_values (rpc, "push_pull", slice, n, ready, wait_ms, &values, &version, err))
    return FALSE;
  set_values (*_return, values, version);
  return TRUE;
}

static gboolean
handler_put (ShoalParamServiceIf *iface, const gchar *token, const gint32 slice,
             const gint64 version, const GByteArray *values, ShoalParamError **err,
             GError **error)
{
  ShoalRpcServer *rpc = rpc_of (iface);
  GError *e = NULL;
  size_t n;

  (void) error;
  if (!token_ok (rpc, "put", token, err) || !slice_ok (rpc, "put", slice, TRUE, values, &n, err))
    return FALSE;
  if (!shoal_server_put (rpc->server, slice, floats_of (values), n, version, &e))
    return server_fault (rpc, err, e);
  return TRUE;
}

/* The new values go back in the delta's buffer (server.h allows the alias). */
static gboolean
handler_apply_delta (ShoalParamServiceIf *iface, GByteArray **_return, const gchar *token,
                     const gint32 slice, const GByteArray *delta, ShoalParamError **err,
                     GError **error)
{
  ShoalRpcServer *rpc = rpc_of (iface);
  GByteArray *values;
  GError *e = NULL;
  size_t n;

  (void) error;
  if (!token_ok (rpc, "apply_delta", token, err)
      || !slice_ok (rpc, "apply_delta", slice, TRUE, delta, &n, err))
    return FALSE;
  values = delta != NULL ? g_byte_array_ref ((GByteArray *) delta) : g_byte_array_new ();
  if (!shoal_server_apply_delta (rpc->server, slice, floats_of (delta), floats_of (values), n, &e))
    {
      g_byte_array_unref (values);
      return server_fault (rpc, err, e);
    }
  if (*_return != NULL)
    g_byte_array_unref (*_return);
  *_return = values;
  return TRUE;
}

/* EASGD: d goes back in the replica's buffer (server.h allows the alias). */
static gboolean
handler_elastic_exchange (ShoalParamServiceIf *iface, GByteArray **_return, const gchar *token,
                          const gint32 slice, const GByteArray *values, const gdouble alpha, ShoalParamError **err,
                          GError **error)
{
  ShoalRpcServer *rpc = rpc_of (iface);
  GByteArray *diff;
  GError *e = NULL;
  size_t n;

  (void) error;
  if (!token_ok (rpc, "elastic_exchange", token, err)
      || !slice_ok (rpc, "elastic_exchange", slice, TRUE, values, &n, err))
    return FALSE;
  diff = values != NULL ? g_byte_array_ref ((GByteArray *) values) : g_byte_array_new ();
  if (!shoal_server_elastic_exchange (rpc->server, slice, floats_of (values), floats_of (diff), n, (float) alpha, &e))
    {
      g_byte_array_unref (diff);
      return server_fault (rpc, err, e);
    }
  if (*_return != NULL)
    g_byte_array_unref (*_return);
  *_return = diff;
  return TRUE;
}

static gboolean
handler_stats (ShoalParamServiceIf *iface, ShoalStatsReply **_return, const gchar *token,
               ShoalParamError **err, GError **error)
{
  ShoalRpcServer *rpc = rpc_of (iface);
  ShoalServerStats st;
  ShoalStatsReply *r = *_return;

  (void) error;
  if (!token_ok (rpc, "stats", token, err))
    return FALSE;
  if (rpc->server == NULL)
    return fault (err, SHOAL_PARAM_FAULT_REFUSED, "stats: this process serves no slices");
  shoal_server_stats (rpc->server, &st);
  r->pushes = st.pushes;
  r->pulls = st.pulls;
  r->updates = st.updates;
  r->deltas = st.deltas;
  r->bytes_in = st.bytes_in;
  r->bytes_out = st.bytes_out;
  r->dropped = st.dropped;
  r->__isset_pushes = r->__isset_pulls = r->__isset_updates = TRUE;
  r->__isset_deltas = r->__isset_bytes_in = r->__isset_bytes_out = TRUE;
  r->__isset_dropped = TRUE;
  return TRUE;
}

static gboolean
handler_shutdown (ShoalParamServiceIf *iface, const gchar *token, const gint32 rank,
                  ShoalParamError **err, GError **error)
{
  ShoalRpcServer *rpc = rpc_of (iface);
  int count;

  (void) error;
  if (!token_ok (rpc, "shutdown", token, err))
    return FALSE;
  if (rpc->liveness != NULL)
    shoal_liveness_done (rpc->liveness, rank);
  g_mutex_lock (&rpc->lock);
  g_hash_table_add (rpc->finished, GINT_TO_POINTER (rank));
  count = (int) g_hash_table_size (rpc->finished);
  g_cond_broadcast (&rpc->cond);
  g_mutex_unlock (&rpc->lock);
  g_debug ("rpc: process %d (%s) is done, %d of %d", rank, peer (), count,
           rpc->expected_shutdowns);
  return TRUE;
}

/* Liveness: records the sender's word and answers with the lost ranks,
 * or LOST when the sender was dropped, or FAILED when this process stops
 * the job. */
static gboolean
handler_heartbeat (ShoalParamServiceIf *iface, GByteArray **_return, const gchar *token,
                   const gint32 rank, const gint64 incarnation, const gint64 progress,
                   const gboolean rejoin, ShoalParamError **err, GError **error)
{
  ShoalRpcServer *rpc = rpc_of (iface);

  (void) error;
  if (!token_ok (rpc, "heartbeat", token, err))
    return FALSE;
  GBytes *lost = NULL;
  if (rpc->liveness != NULL)
    {
      char *why = NULL;
      if (shoal_liveness_heard (rpc->liveness, rank, incarnation, progress, rejoin,
                                g_get_monotonic_time (), &why) == SHOAL_HEARD_REFUSED)
        {
          fault (err, SHOAL_PARAM_FAULT_LOST, "%s", why);
          g_free (why);
          return FALSE;
        }
      lost = shoal_liveness_lost_list (rpc->liveness);
    }
  if (!not_failed (rpc, "heartbeat", err))
    {
      if (lost != NULL)
        g_bytes_unref (lost);
      return FALSE;
    }
  if (*_return != NULL)
    g_byte_array_unref (*_return);
  *_return = lost != NULL ? g_bytes_unref_to_array (lost) : g_byte_array_new ();
  return TRUE;
}

static gboolean
handler_checkpoint (ShoalParamServiceIf *iface, const gchar *token, const gint64 step,
                    ShoalParamError **err, GError **error)
{
  ShoalRpcServer *rpc = rpc_of (iface);
  GError *e = NULL;

  (void) error;
  if (!token_ok (rpc, "checkpoint", token, err))
    return FALSE;
  if (rpc->server == NULL)
    return fault (err, SHOAL_PARAM_FAULT_REFUSED, "checkpoint: this process serves no slices");
  if (rpc->checkpoint == NULL)
    {
      g_set_error (&e, SHOAL_ERROR, SHOAL_ERROR_RPC, "checkpoint: this server keeps no checkpoints");
      return server_fault (rpc, err, e);
    }
  if (!shoal_server_checkpoint (rpc->server, rpc->checkpoint, step, &e))
    return server_fault (rpc, err, e);
  return TRUE;
}

static gboolean
handler_stop_at (ShoalParamServiceIf *iface, const gchar *token, const gint64 step,
                 ShoalParamError **err, GError **error)
{
  ShoalRpcServer *rpc = rpc_of (iface);
  GError *e = NULL;

  (void) error;
  if (!token_ok (rpc, "stop_at", token, err))
    return FALSE;
  if (rpc->server == NULL)
    return fault (err, SHOAL_PARAM_FAULT_REFUSED, "stop_at: this process serves no slices");
  if (!shoal_server_stop_at (rpc->server, step, &e))
    return server_fault (rpc, err, e);
  g_debug ("rpc: %s stops at step %" G_GINT64_FORMAT, peer (), step);
  return TRUE;
}

/* The message keeps the received buffer: the call's arguments are its
 * only other holders and are freed, emptied, after this returns. */
static gboolean
handler_send_bridge (ShoalParamServiceIf *iface, const gchar *token, const gint32 group,
                     const gint32 channel, const GByteArray *data, ShoalParamError **err,
                     GError **error)
{
  ShoalRpcServer *rpc = rpc_of (iface);
  GBytes *msg;

  (void) error;
  if (!token_ok (rpc, "send_bridge", token, err))
    return FALSE;
  if (rpc->bridge_sink == NULL)
    return fault (err, SHOAL_PARAM_FAULT_REFUSED,
                  "send_bridge group %d channel %u: this process takes no bridge messages", group,
                  (guint32) channel);
  if (data != NULL && data->len > 0)
    {
      gsize len = 0;
      guint8 *bytes = g_byte_array_steal ((GByteArray *) data, &len);
      msg = g_bytes_new_take (bytes, len);
    }
  else
    msg = g_bytes_new (NULL, 0);
  rpc->bridge_sink (rpc->bridge_data, group, (guint32) channel, msg);
  return TRUE;
}

/* ---- shared memory -------------------------------------------------------- */

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

static gboolean
handler_attach_shm (ShoalParamServiceIf *iface, const gchar *token, const gint32 pid,
                    const gint32 fd, const gint64 bytes, const GByteArray *nonce, const gchar *host,
                    const gint64 values_at, const gint64 grads_at, ShoalParamError **err,
                    GError **error)
{
  ShoalRpcServer *rpc = rpc_of (iface);
  GError *e = NULL;

  (void) error;
  if (!token_ok (rpc, "attach_shm", token, err))
    return FALSE;
  if (rpc->server == NULL)
    return fault (err, SHOAL_PARAM_FAULT_REFUSED, "attach_shm: this process serves no slices");
  /* the two areas in the layout's float offsets, 64-byte aligned, apart */
  gint64 total = (gint64) shoal_server_total (rpc->server);
  if (values_at < 0 || grads_at < 0 || values_at % 16 != 0 || grads_at % 16 != 0
      || values_at > G_MAXINT64 / 8 - total || grads_at > G_MAXINT64 / 8 - total
      || (values_at < grads_at ? grads_at - values_at : values_at - grads_at) < total)
    return fault (err, SHOAL_PARAM_FAULT_BAD_LENGTH,
                  "attach_shm: values at float %" G_GINT64_FORMAT " and gradients at %" G_GINT64_FORMAT
                  " do not lay out two areas of %" G_GINT64_FORMAT " floats", values_at, grads_at, total);
  if (nonce == NULL || nonce->len != SHOAL_SHM_NONCE_BYTES)
    return fault (err, SHOAL_PARAM_FAULT_BAD_LENGTH, "attach_shm: the nonce must be %d bytes",
                  SHOAL_SHM_NONCE_BYTES);
  ShoalShmOffer offer = { .pid = pid, .fd = fd, .bytes = bytes };
  memcpy (offer.nonce, nonce->data, SHOAL_SHM_NONCE_BYTES);
  g_strlcpy (offer.host, host != NULL ? host : "", sizeof offer.host);
  size_t need = (size_t) (MAX (values_at, grads_at) + total) * sizeof (float);
  ShoalShmRegion *region = shoal_shm_region_attach (&offer, need, &e);
  if (region == NULL)
    {
      g_debug ("rpc: %s: %s", peer (), e->message);
      return server_fault (rpc, err, e);
    }
  ConnShm *shm = g_atomic_rc_box_new0 (ConnShm);
  shm->region = region;
  shm->values = (float *) shoal_shm_region_data (region) + values_at;
  shm->grads = (float *) shoal_shm_region_data (region) + grads_at;
  shoal_rpc_listener_set_conn_data (shm, conn_shm_free);
  g_debug ("rpc: %s attached %" G_GINT64_FORMAT " bytes of shared memory of process %d", peer (),
           bytes, pid);
  /* SYNC: the first worker's region becomes the server's value storage,
   * so that worker reads new values where the update writes them */
  if (shoal_server_adopt_values (rpc->server, shm->values, g_atomic_rc_box_acquire (shm), conn_shm_free))
    g_debug ("rpc: %s: its region holds this server's values from now on", peer ());
  else
    conn_shm_free (shm);
  return TRUE;
}

/* push_pull of several slices whose bytes lie in the connection's region:
 * every push first (each update can run while the next slice's other
 * contributors are awaited, and a worker that sends these slices one by
 * one in any order finds them pushed), then SSP's wait, then the values. */
static gboolean
handler_push_pull_shm (ShoalParamServiceIf *iface, GByteArray **_return, const gchar *token,
                       const GByteArray *slices, const gint64 step, const gint64 wait_ms,
                       const GByteArray *base_versions, const gint32 unit, const gboolean fetch,
                       const gboolean clear_grads, ShoalParamError **err, GError **error)
{
  ShoalRpcServer *rpc = rpc_of (iface);
  ConnShm *shm = shoal_rpc_listener_conn_data ();

  (void) error;
  if (!token_ok (rpc, "push_pull_shm", token, err))
    return FALSE;
  if (shm == NULL)
    return fault (err, SHOAL_PARAM_FAULT_REFUSED,
                  "push_pull_shm: no shared memory attached on this connection");
  int nslices = rpc->server != NULL ? shoal_server_n_slices (rpc->server) : 0;
  guint bytes = slices != NULL ? slices->len : 0;
  int count = (int) (bytes / sizeof (gint32));
  if (bytes % sizeof (gint32) != 0 || count < 1 || count > nslices)
    return fault (err, SHOAL_PARAM_FAULT_UNKNOWN_SLICE,
                  "push_pull_shm: %u bytes of slice ids: 1 to %d ids of 4 bytes expected", bytes, nslices);
  if (base_versions == NULL || base_versions->len != (guint) count * sizeof (gint64))
    return fault (err, SHOAL_PARAM_FAULT_BAD_LENGTH,
                  "push_pull_shm: %d slices need %zu bytes of base versions, got %u", count,
                  (size_t) count * sizeof (gint64), base_versions != NULL ? base_versions->len : 0);
  gint32 *ids = g_new (gint32, count);
  gint64 *ready = g_new (gint64, count);
  guint8 *seen = g_new0 (guint8, nslices);
  gboolean *mirrored = g_new0 (gboolean, count);
  memcpy (ids, slices->data, (size_t) count * sizeof (gint32));
  gboolean ok = TRUE;
  size_t n;
  for (int i = 0; i < count && ok; i++)
    {
      ok = slice_ok (rpc, "push_pull_shm", ids[i], FALSE, NULL, &n, err);
      if (ok && seen[ids[i]]++)
        ok = fault (err, SHOAL_PARAM_FAULT_UNKNOWN_SLICE, "push_pull_shm: slice %d twice in one call",
                    ids[i]);
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
      if (clear_grads ? !shoal_server_push_consume (rpc->server, ids[i], grad, end - begin, step, &origin,
                                                    mirror, &ready[i], &mirrored[i], &e)
                      : !shoal_server_push_mirrored (rpc->server, ids[i], grad, end - begin, step, &origin,
                                                     mirror, &ready[i], &mirrored[i], &e))
        ok = server_fault (rpc, err, e);
    }
  for (int i = 0; i < count && ok; i++)
    ok = wait_bound (rpc, "push_pull_shm", ids[i], unit, step, wait_ms, err);
  for (int i = 0; i < count && ok && fetch; i++)
    {
      size_t begin, end;
      if (mirrored[i])
        continue;   /* the update wrote them */
      shoal_server_slice_range (rpc->server, ids[i], &begin, &end);
      ok = wait_pull (rpc, "push_pull_shm", ids[i], shm->values + begin, end - begin, ready[i],
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

static void
shoal_rpc_handler_init (ShoalRpcHandler *self)
{
  self->rpc = NULL;
}

static void
shoal_rpc_handler_class_init (ShoalRpcHandlerClass *klass)
{
  ShoalParamServiceHandlerClass *h = (ShoalParamServiceHandlerClass *) klass;

  h->push = handler_push;
  h->pull = handler_pull;
  h->push_pull = handler_push_pull;
  h->put = handler_put;
  h->apply_delta = handler_apply_delta;
  h->elastic_exchange = handler_elastic_exchange;
  h->stats = handler_stats;
  h->shutdown = handler_shutdown;
  h->checkpoint = handler_checkpoint;
  h->send_bridge = handler_send_bridge;
  h->stop_at = handler_stop_at;
  h->attach_shm = handler_attach_shm;
  h->push_pull_shm = handler_push_pull_shm;
  h->heartbeat = handler_heartbeat;
}

/* ---- start and stop ------------------------------------------------------- */

static size_t
largest_slice_bytes (ShoalServer *server)
{
  size_t most = 0;

  if (server == NULL)
    return 0;
  for (int i = 0; i < shoal_server_n_slices (server); i++)
    {
      size_t begin, end;
      shoal_server_slice_range (server, i, &begin, &end);
      most = MAX (most, (end - begin) * sizeof (float));
    }
  return most;
}

ShoalRpcServer *
shoal_rpc_server_start (ShoalServer *server, const ShoalRpcServerOptions *opts, GError **error)
{
  g_return_val_if_fail (opts != NULL, NULL);
  shoal_rpc_types_init ();
  size_t slice_bytes = largest_slice_bytes (server);
  if (slice_bytes > (size_t) G_MAXINT32 - HEADROOM)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC,
                   "rpc server: a slice of %zu bytes does not fit a Thrift message (2 GiB); use more slices",
                   slice_bytes);
      return NULL;
    }

  ShoalRpcServer *rpc = g_new0 (ShoalRpcServer, 1);
  rpc->server = server;
  rpc->bridge_sink = opts->bridge_sink;
  rpc->bridge_data = opts->bridge_data;
  rpc->token = g_strdup (opts->token != NULL ? opts->token : "");
  rpc->token_len = strlen (rpc->token);
  rpc->expected_shutdowns = opts->expected_shutdowns;
  rpc->checkpoint = opts->checkpoint;
  rpc->give_up = opts->give_up;
  rpc->liveness = opts->liveness;
  rpc->finished = g_hash_table_new (NULL, NULL);
  g_mutex_init (&rpc->lock);
  g_cond_init (&rpc->cond);
  ShoalRpcHandler *handler = g_object_new (shoal_rpc_handler_get_type (), NULL);
  handler->rpc = rpc;
  rpc->handler = G_OBJECT (handler);
  rpc->processor = g_object_new (SHOAL_TYPE_PARAM_SERVICE_PROCESSOR, "handler", handler, NULL);

  /* bridge messages (activations, gradients of a batch) are not bounded
   * by the slices */
  gboolean bridges = opts->bridge_sink != NULL;
  ShoalRpcListenerOptions lo = {
    .bind_address = opts->bind_address,
    .port = opts->port,
    .max_message_bytes = opts->max_message_bytes > 0 ? MIN (opts->max_message_bytes, (size_t) G_MAXINT32)
                         : server == NULL || bridges
                           ? MIN (MAX (MAX (slice_bytes + HEADROOM, BRIDGE_MESSAGE_BYTES),
                                       bridges ? opts->bridge_message_bytes : 0),
                                  (size_t) G_MAXINT32)
                           : slice_bytes + HEADROOM,
    .io_timeout_ms = opts->io_timeout_ms > 0 ? opts->io_timeout_ms : 60000,
    .name = "rpc server",
    .max_connections = opts->max_connections,
    .idle_timeout_ms = opts->idle_timeout_ms,
    .threads = opts->threads,
    .threads_end_when_idle = opts->threads_end_when_idle,
    .next_call_wait_ms = opts->next_call_wait_ms,
  };
  rpc->listener = shoal_rpc_listener_start (rpc->processor, &lo, error);
  if (rpc->listener == NULL)
    {
      shoal_rpc_server_stop (rpc);
      return NULL;
    }
  g_debug ("rpc: serving %d slices%s on %s:%d, messages up to %zu bytes",
           server != NULL ? shoal_server_n_slices (server) : 0,
           bridges ? " and bridge messages" : "",
           opts->bind_address != NULL ? opts->bind_address : "127.0.0.1",
           shoal_rpc_listener_port (rpc->listener), lo.max_message_bytes);
  return rpc;
}

int
shoal_rpc_server_port (ShoalRpcServer *rpc)
{
  return shoal_rpc_listener_port (rpc->listener);
}

guint
shoal_rpc_server_reap (ShoalRpcServer *rpc)
{
  return shoal_rpc_listener_reap (rpc->listener);
}

void
shoal_rpc_server_wait (ShoalRpcServer *rpc)
{
  g_mutex_lock (&rpc->lock);
  rpc->waiters++;
  while (!g_atomic_int_get (&rpc->stopping) && !g_atomic_int_get (&rpc->failed)
         && (int) g_hash_table_size (rpc->finished) < rpc->expected_shutdowns)
    {
      if (rpc->give_up == NULL)
        g_cond_wait (&rpc->cond, &rpc->lock);
      else if (!g_cond_wait_until (&rpc->cond, &rpc->lock, g_get_monotonic_time () + G_USEC_PER_SEC / 5)
               && rpc->give_up ())
        break;  /* a signal handler cannot signal the condition: look every 200 ms */
    }
  rpc->waiters--;
  g_cond_broadcast (&rpc->cond);
  g_mutex_unlock (&rpc->lock);
}

void
shoal_rpc_server_stop (ShoalRpcServer *rpc)
{
  if (rpc == NULL)
    return;
  g_mutex_lock (&rpc->lock);
  g_atomic_int_set (&rpc->stopping, 1);   /* waiting pulls give up within 100 ms */
  g_cond_broadcast (&rpc->cond);
  /* a thread still in shoal_rpc_server_wait leaves it before the lock
   * and the server go (it returns at once now: stopping is set) */
  while (rpc->waiters > 0)
    g_cond_wait (&rpc->cond, &rpc->lock);
  g_mutex_unlock (&rpc->lock);
  shoal_rpc_listener_stop (rpc->listener);
  g_object_unref (rpc->processor);
  g_object_unref (rpc->handler);
  g_mutex_clear (&rpc->lock);
  g_cond_clear (&rpc->cond);
  g_hash_table_destroy (rpc->finished);
  g_free (rpc->failure);
  g_free (rpc->token);
  g_free (rpc);
}

void
shoal_rpc_server_finished (ShoalRpcServer *rpc, int rank, gboolean finished)
{
  g_mutex_lock (&rpc->lock);
  if (finished)
    g_hash_table_add (rpc->finished, GINT_TO_POINTER (rank));
  else
    g_hash_table_remove (rpc->finished, GINT_TO_POINTER (rank));
  g_cond_broadcast (&rpc->cond);
  g_mutex_unlock (&rpc->lock);
}

void
shoal_rpc_server_fail (ShoalRpcServer *rpc, const char *why)
{
  g_mutex_lock (&rpc->lock);
  if (rpc->failure == NULL)
    {
      rpc->failure = g_strdup (why);
      g_atomic_int_set (&rpc->failed, 1);
    }
  g_cond_broadcast (&rpc->cond);
  g_mutex_unlock (&rpc->lock);
}
