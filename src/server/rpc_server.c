/* The parameter service of thrift/param.thrift over a ShoalServer,
 * served by an rpc/listener.h listener (a pool of call threads that
 * grows while handlers wait).
 *
 * The handler is a subclass of the generated one; every call checks the
 * token, the slice and the data length (rpc_calls.c) before it reaches
 * the ShoalServer, which is thread-safe; the calls of shared memory are in
 * rpc_shm_calls.c.  Without a ShoalServer (a process holding only
 * workers of a group spread over processes) every param call fails the
 * slice check.  send_bridge hands its data to the bridge sink without a
 * copy: the buffer was received for this call alone.  Pulls waiting for a
 * version wait in slices of 100 ms that check for the stop, so stopping
 * never waits for a peer.  fp32 values are sent without a copy (in place
 * where they are stable, else pinned while sent; reply_values). */
#include "server/rpc_server.h"

#include <string.h>

#include "core/codec.h"
#include "core/error.h"
#include "rpc/listener.h"
#include "server/liveness.h"
#include "server/rpc_calls.h"
#include "server/rpc_types.h"

#if G_BYTE_ORDER != G_LITTLE_ENDIAN
#error "the parameter service sends float32 in host byte order, which must be little-endian"
#endif

#define HEADROOM (64 * 1024)              /* message bytes besides a slice's floats */
#define BRIDGE_MESSAGE_BYTES ((size_t) 256 << 20)   /* default limit where bridge messages come */

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

ShoalRpcServer *
shoal_rpc_call_server (ShoalParamServiceIf *iface)
{
  return ((ShoalRpcHandler *) iface)->rpc;
}

static float *
floats_of (const GByteArray *a)
{
  return a != NULL ? (float *) (void *) a->data : NULL;
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
      shoal_rpc_call_fault (err, SHOAL_PARAM_FAULT_BAD_LENGTH, "%s: slice %d: unknown gradient codec %d", call,
                            slice, codec);
      return NULL;
    }
  *decoded = g_new (float, MAX (n, 1));
  gsize bytes = grad != NULL ? grad->len : 0;
  if (!shoal_codec_decode ((ShoalCodec) codec, grad != NULL ? grad->data : NULL, bytes, *decoded, n))
    {
      g_clear_pointer (decoded, g_free);
      shoal_rpc_call_fault (err, SHOAL_PARAM_FAULT_BAD_LENGTH,
                            "%s: slice %d: %zu bytes are not a %s encoding of its %zu floats (%zu bytes)", call,
                            slice, bytes, shoal_codec_name ((ShoalCodec) codec), n,
                            shoal_codec_bytes ((ShoalCodec) codec, n));
      return NULL;
    }
  return *decoded;
}

static gboolean
values_codec_ok (const char *call, int slice, gint32 codec, ShoalParamError **err)
{
  if (codec == SHOAL_CODEC_FP32 || codec == SHOAL_CODEC_FP16 || codec == SHOAL_CODEC_BF16)
    return TRUE;
  return shoal_rpc_call_fault (err, SHOAL_PARAM_FAULT_BAD_LENGTH,
                               "%s: slice %d: values cannot be sent as codec %d", call, slice, codec);
}

static gboolean
handler_push (ShoalParamServiceIf *iface, const gchar *token, const gint32 slice,
              const gint64 step, const GByteArray *grad, const gint64 base_version,
              const gint32 unit, const gint32 grad_codec, ShoalParamError **err, GError **error)
{
  ShoalRpcServer *rpc = shoal_rpc_call_server (iface);
  ShoalPushOrigin origin = { base_version, unit };
  GError *e = NULL;
  size_t n;
  float *decoded;

  (void) error;
  if (!shoal_rpc_call_token_ok (rpc, "push", token, err)
      || !shoal_rpc_call_slice_ok (rpc, "push", slice, grad_codec == SHOAL_CODEC_FP32, grad, &n, err))
    return FALSE;
  const float *g = grad_floats ("push", slice, grad, grad_codec, n, &decoded, err);
  if (g == NULL)
    return FALSE;
  gboolean ok = shoal_server_push_from (rpc->server, slice, g, n, step, &origin, NULL, &e);
  g_free (decoded);
  if (!ok)
    return shoal_rpc_call_server_error (rpc, err, e);
  return shoal_rpc_call_wait_bound (rpc, "push", slice, unit, step, PUSH_BOUND_WAIT_MS, err);
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
      if (!shoal_rpc_call_wait_pull (rpc, call, slice, NULL, n, min_version, wait_ms, version, err))
        return FALSE;
      *values = lend_values (shoal_server_lend_values (rpc->server, slice), n, NULL);
      return TRUE;
    }
  const float *pinned = NULL;
  if (!shoal_rpc_call_wait_pull_into (rpc, call, slice, NULL, &pinned, n, min_version, wait_ms, version, err))
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
  if (!shoal_rpc_call_wait_pull (rpc, call, slice, floats_of (copy), n, *version, wait_ms, version, err))
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
  if (!shoal_rpc_call_wait_pull (rpc, call, slice, floats, n, min_version, wait_ms, version, err))
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
  ShoalRpcServer *rpc = shoal_rpc_call_server (iface);
  GByteArray *values;
  gint64 version = 0;
  size_t n;

  (void) error;
  if (!shoal_rpc_call_token_ok (rpc, "pull", token, err)
      || !shoal_rpc_call_slice_ok (rpc, "pull", slice, FALSE, NULL, &n, err)
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
  ShoalRpcServer *rpc = shoal_rpc_call_server (iface);
  ShoalPushOrigin origin = { base_version, unit };
  GByteArray *values;
  GError *e = NULL;
  gint64 ready = 0, version = 0;
  size_t n;
  float *decoded;

  (void) error;
  if (!shoal_rpc_call_token_ok (rpc, "push_pull", token, err)
      || !shoal_rpc_call_slice_ok (rpc, "push_pull", slice, grad_codec == SHOAL_CODEC_FP32, grad, &n, err)
      || !values_codec_ok ("push_pull", slice, values_codec, err))
    return FALSE;
  const float *g = grad_floats ("push_pull", slice, grad, grad_codec, n, &decoded, err);
  if (g == NULL)
    return FALSE;
  gboolean pushed = shoal_server_push_from (rpc->server, slice, g, n, step, &origin, &ready, &e);
  g_free (decoded);
  if (!pushed)
    return shoal_rpc_call_server_error (rpc, err, e);
  if (!shoal_rpc_call_wait_bound (rpc, "push_pull", slice, unit, step, wait_ms, err))
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
  ShoalRpcServer *rpc = shoal_rpc_call_server (iface);
  GError *e = NULL;
  size_t n;

  (void) error;
  if (!shoal_rpc_call_token_ok (rpc, "put", token, err)
      || !shoal_rpc_call_slice_ok (rpc, "put", slice, TRUE, values, &n, err))
    return FALSE;
  if (!shoal_server_put (rpc->server, slice, floats_of (values), n, version, &e))
    return shoal_rpc_call_server_error (rpc, err, e);
  return TRUE;
}

/* The new values go back in the delta's buffer (server.h allows the alias). */
static gboolean
handler_apply_delta (ShoalParamServiceIf *iface, GByteArray **_return, const gchar *token,
                     const gint32 slice, const GByteArray *delta, ShoalParamError **err,
                     GError **error)
{
  ShoalRpcServer *rpc = shoal_rpc_call_server (iface);
  GByteArray *values;
  GError *e = NULL;
  size_t n;

  (void) error;
  if (!shoal_rpc_call_token_ok (rpc, "apply_delta", token, err)
      || !shoal_rpc_call_slice_ok (rpc, "apply_delta", slice, TRUE, delta, &n, err))
    return FALSE;
  values = delta != NULL ? g_byte_array_ref ((GByteArray *) delta) : g_byte_array_new ();
  if (!shoal_server_apply_delta (rpc->server, slice, floats_of (delta), floats_of (values), n, &e))
    {
      g_byte_array_unref (values);
      return shoal_rpc_call_server_error (rpc, err, e);
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
  ShoalRpcServer *rpc = shoal_rpc_call_server (iface);
  GByteArray *diff;
  GError *e = NULL;
  size_t n;

  (void) error;
  if (!shoal_rpc_call_token_ok (rpc, "elastic_exchange", token, err)
      || !shoal_rpc_call_slice_ok (rpc, "elastic_exchange", slice, TRUE, values, &n, err))
    return FALSE;
  diff = values != NULL ? g_byte_array_ref ((GByteArray *) values) : g_byte_array_new ();
  if (!shoal_server_elastic_exchange (rpc->server, slice, floats_of (values), floats_of (diff), n, (float) alpha, &e))
    {
      g_byte_array_unref (diff);
      return shoal_rpc_call_server_error (rpc, err, e);
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
  ShoalRpcServer *rpc = shoal_rpc_call_server (iface);
  ShoalServerStats st;
  ShoalStatsReply *r = *_return;

  (void) error;
  if (!shoal_rpc_call_token_ok (rpc, "stats", token, err))
    return FALSE;
  if (rpc->server == NULL)
    return shoal_rpc_call_fault (err, SHOAL_PARAM_FAULT_REFUSED, "stats: this process serves no slices");
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
  ShoalRpcServer *rpc = shoal_rpc_call_server (iface);
  int count;

  (void) error;
  if (!shoal_rpc_call_token_ok (rpc, "shutdown", token, err))
    return FALSE;
  if (rpc->liveness != NULL)
    shoal_liveness_done (rpc->liveness, rank);
  g_mutex_lock (&rpc->lock);
  g_hash_table_add (rpc->finished, GINT_TO_POINTER (rank));
  count = (int) g_hash_table_size (rpc->finished);
  g_cond_broadcast (&rpc->cond);
  g_mutex_unlock (&rpc->lock);
  g_debug ("rpc: process %d (%s) is done, %d of %d", rank, shoal_rpc_listener_peer (), count,
           rpc->expected_shutdowns);
  return TRUE;
}

/* Liveness: records the sender's word and answers with the lost ranks,
 * or LOST when the sender was dropped, or FAILED when this process stops
 * the job, or STOPPING when it was sent a stop signal. */
static gboolean
handler_heartbeat (ShoalParamServiceIf *iface, GByteArray **_return, const gchar *token,
                   const gint32 rank, const gint64 incarnation, const gint64 progress,
                   const gboolean rejoin, ShoalParamError **err, GError **error)
{
  ShoalRpcServer *rpc = shoal_rpc_call_server (iface);

  (void) error;
  if (!shoal_rpc_call_token_ok (rpc, "heartbeat", token, err))
    return FALSE;
  GBytes *lost = NULL;
  if (rpc->liveness != NULL)
    {
      char *why = NULL;
      if (shoal_liveness_heard (rpc->liveness, rank, incarnation, progress, rejoin,
                                g_get_monotonic_time (), &why) == SHOAL_HEARD_REFUSED)
        {
          shoal_rpc_call_fault (err, SHOAL_PARAM_FAULT_LOST, "%s", why);
          g_free (why);
          return FALSE;
        }
      lost = shoal_liveness_lost_list (rpc->liveness);
    }
  gboolean answered = shoal_rpc_call_not_failed (rpc, "heartbeat", err);
  if (answered && rpc->stop_signalled != NULL && rpc->stop_signalled ())
    answered = shoal_rpc_call_fault (err, SHOAL_PARAM_FAULT_STOPPING, "heartbeat: this process was sent a stop "
                                     "signal; the job stops with a checkpoint");
  if (!answered)
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
  ShoalRpcServer *rpc = shoal_rpc_call_server (iface);
  GError *e = NULL;

  (void) error;
  if (!shoal_rpc_call_token_ok (rpc, "checkpoint", token, err))
    return FALSE;
  if (rpc->server == NULL)
    return shoal_rpc_call_fault (err, SHOAL_PARAM_FAULT_REFUSED, "checkpoint: this process serves no slices");
  if (rpc->checkpoint == NULL)
    {
      g_set_error (&e, SHOAL_ERROR, SHOAL_ERROR_RPC, "checkpoint: this server keeps no checkpoints");
      return shoal_rpc_call_server_error (rpc, err, e);
    }
  if (!shoal_server_checkpoint (rpc->server, rpc->checkpoint, step, &e))
    return shoal_rpc_call_server_error (rpc, err, e);
  return TRUE;
}

static gboolean
handler_stop_at (ShoalParamServiceIf *iface, gint64 *stopped_at, const gchar *token, const gint64 step,
                 ShoalParamError **err, GError **error)
{
  ShoalRpcServer *rpc = shoal_rpc_call_server (iface);
  GError *e = NULL;

  (void) error;
  if (!shoal_rpc_call_token_ok (rpc, "stop_at", token, err))
    return FALSE;
  if (rpc->server == NULL)
    return shoal_rpc_call_fault (err, SHOAL_PARAM_FAULT_REFUSED, "stop_at: this process serves no slices");
  if (!shoal_server_stop_at (rpc->server, step, stopped_at, &e))
    return shoal_rpc_call_server_error (rpc, err, e);
  g_debug ("rpc: %s stops at step %" G_GINT64_FORMAT ": the servers stop at %" G_GINT64_FORMAT,
           shoal_rpc_listener_peer (), step, *stopped_at);
  return TRUE;
}

/* The message keeps the received buffer: the call's arguments are its
 * only other holders and are freed, emptied, after this returns. */
static gboolean
handler_send_bridge (ShoalParamServiceIf *iface, const gchar *token, const gint32 group,
                     const gint32 channel, const GByteArray *data, ShoalParamError **err,
                     GError **error)
{
  ShoalRpcServer *rpc = shoal_rpc_call_server (iface);
  GBytes *msg;

  (void) error;
  if (!shoal_rpc_call_token_ok (rpc, "send_bridge", token, err))
    return FALSE;
  if (rpc->bridge_sink == NULL)
    return shoal_rpc_call_fault (err, SHOAL_PARAM_FAULT_REFUSED,
                                 "send_bridge group %d channel %u: this process takes no bridge messages",
                                 group, (guint32) channel);
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
  h->attach_shm = shoal_rpc_call_attach_shm;
  h->push_pull_shm = shoal_rpc_call_push_pull_shm;
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
  rpc->stop_signalled = opts->stop_signalled;
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
    .max_unproven = opts->max_unproven,
    .unproven_timeout_ms = opts->unproven_timeout_ms,
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

char *
shoal_rpc_server_refusals (ShoalRpcServer *rpc, const char *const *addresses)
{
  return shoal_rpc_listener_refusals (rpc->listener, addresses);
}

gboolean
shoal_rpc_server_wait (ShoalRpcServer *rpc)
{
  gboolean all = TRUE;
  g_mutex_lock (&rpc->lock);
  rpc->waiters++;
  while (!g_atomic_int_get (&rpc->stopping) && !g_atomic_int_get (&rpc->failed)
         && (int) g_hash_table_size (rpc->finished) < rpc->expected_shutdowns)
    {
      if (rpc->give_up == NULL)
        g_cond_wait (&rpc->cond, &rpc->lock);
      else if (!g_cond_wait_until (&rpc->cond, &rpc->lock, g_get_monotonic_time () + G_USEC_PER_SEC / 5)
               && rpc->give_up ())
        {
          all = FALSE;
          break;  /* a signal handler cannot signal the condition: look every 200 ms */
        }
    }
  rpc->waiters--;
  g_cond_broadcast (&rpc->cond);
  g_mutex_unlock (&rpc->lock);
  return all;
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
