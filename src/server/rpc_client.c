/* The worker's end of the parameter service: the generated Thrift client
 * over a ShoalThriftSocket and ShoalThriftProtocol (rpc/thrift_socket.h, rpc/thrift_protocol.h).
 *
 * Floats never pass through an intermediate buffer on this side: a push
 * hands the caller's floats to the generated writer through a GByteArray
 * header that only points at them, and a pull arms the protocol's sink so
 * that the reply's values are received straight into the caller's dst.
 * The generated reader is then given dst as the field's buffer (it takes
 * it with g_byte_array_new_take, see thrift/fix-generated.awk) and this
 * file takes it back with g_byte_array_steal before the reply is freed.
 *
 * A connection that failed in any way is dropped and the next call
 * reconnects: c_glib does not check sequence ids, so a late reply could
 * otherwise pass for the next call's.  Before each call an idle
 * connection is checked for a close by the server (a restart) so that it
 * does not cost a failed call.  Calls are not retried: a push whose reply
 * was lost may have been applied. */
#include "server/rpc_client.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/codec.h"
#include "core/error.h"
#include "rpc/link_limit.h"
#include "rpc/shm_region.h"
#include "rpc/thrift_protocol.h"
#include "rpc/thrift_socket.h"
#include "server/rpc_types.h"

#if G_BYTE_ORDER != G_LITTLE_ENDIAN
#error "the parameter service sends float32 in host byte order, which must be little-endian"
#endif

#define RETRY_US (100 * 1000)

struct _ShoalRpcClient {
  char *host;
  int port;
  char *token;
  char *peer;                      /* "host:port" for errors */
  size_t max_message;
  gint64 timeout_ms;
  int retries;
  ShoalTls *tls;                   /* borrowed; NULL: the process's */
  gint64 stop_step;                /* from the last STOPPED reply; -1 none */
  ShoalThriftSocket *sock;         /* these three are NULL while disconnected */
  ShoalThriftProtocol *proto;
  ShoalParamServiceIf *client;
  /* shared memory (shoal_rpc_client_use_shm): the region to attach on
   * every connection, and whether this connection has it */
  gboolean shm_wanted;
  ShoalShmOffer shm_offer;
  gint64 shm_values_at, shm_grads_at;
  gboolean shm_attached;
  guint8 *scratch;                 /* encoded values of a reply (codecs) */
  size_t scratch_bytes;
};

static gboolean attach_shm (ShoalRpcClient *c, GError **error);

/* ---- connection ----------------------------------------------------------- */

static void
disconnect (ShoalRpcClient *c)
{
  c->shm_attached = FALSE;   /* the server detaches with the connection */
  g_clear_object (&c->client);
  g_clear_object (&c->proto);
  g_clear_object (&c->sock);   /* closes the socket */
}

/* Non-blocking connect bounded by the call timeout; errno on failure. */
static int
connect_addr (const struct addrinfo *ai, gint64 timeout_ms)
{
  int fd = socket (ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
  int err = 0;
  socklen_t elen = sizeof err;

  if (fd < 0)
    return -1;
  if (connect (fd, ai->ai_addr, ai->ai_addrlen) < 0)
    {
      if (errno != EINPROGRESS)
        goto fail;
      struct pollfd p = { fd, POLLOUT, 0 };
      gint64 deadline = g_get_monotonic_time () + timeout_ms * 1000;
      int r;
      do
        {
          gint64 left = (deadline - g_get_monotonic_time ()) / 1000;
          r = poll (&p, 1, (int) CLAMP (left, 0, G_MAXINT));
        }
      while (r < 0 && errno == EINTR);
      if (r == 0)
        {
          errno = ETIMEDOUT;
          goto fail;
        }
      if (r < 0)
        goto fail;
      if (getsockopt (fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0)
        goto fail;
      if (err != 0)
        {
          errno = err;
          goto fail;
        }
    }
  if (fcntl (fd, F_SETFL, fcntl (fd, F_GETFL) & ~O_NONBLOCK) < 0)
    goto fail;
  return fd;

fail:
  err = errno;
  close (fd);
  errno = err;
  return -1;
}

/* One attempt; *retry says whether another could succeed (the address
 * resolved but nobody answered yet). */
static gboolean
connect_once (ShoalRpcClient *c, gboolean *retry, GError **error)
{
  struct addrinfo hints = { 0 }, *res = NULL;
  char service[16];
  int fd = -1, err = ECONNREFUSED, rc;
  GError *e = NULL;

  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  g_snprintf (service, sizeof service, "%d", c->port);
  *retry = FALSE;
  if ((rc = getaddrinfo (c->host, service, &hints, &res)) != 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "%s: cannot resolve %s: %s", c->peer,
                   c->host, gai_strerror (rc));
      return FALSE;
    }
  for (struct addrinfo *ai = res; ai != NULL && fd < 0; ai = ai->ai_next)
    if ((fd = connect_addr (ai, c->timeout_ms)) < 0)
      err = errno;
  freeaddrinfo (res);
  if (fd < 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "%s: cannot connect: %s", c->peer,
                   g_strerror (err));
      *retry = TRUE;
      return FALSE;
    }
  if (!shoal_socket_tune (fd, c->timeout_ms, &e))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "%s: %s", c->peer, e->message);
      g_error_free (e);
      close (fd);
      return FALSE;
    }
  c->sock = shoal_thrift_socket_new_tls (fd, c->max_message, c->timeout_ms,
                                         c->tls != NULL ? c->tls : shoal_tls_get_default ());
  c->proto = shoal_thrift_protocol_new (shoal_thrift_socket_transport (c->sock));
  c->client = g_object_new (SHOAL_TYPE_PARAM_SERVICE_CLIENT,
                            "input_protocol", c->proto, "output_protocol", c->proto, NULL);
  /* FALSE only where the call itself failed (the connection is dropped) */
  return !c->shm_wanted || attach_shm (c, error) || c->client != NULL;
}

static GHashTable *peer_names;   /* "host:port" -> name; set before any connection */

void
shoal_rpc_client_set_peer_names (char **endpoints, char **names)
{
  g_clear_pointer (&peer_names, g_hash_table_unref);
  if (endpoints == NULL)
    return;
  peer_names = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  for (int i = 0; endpoints[i] != NULL && names[i] != NULL; i++)
    if (*endpoints[i] != '\0')
      g_hash_table_replace (peer_names, g_strdup (endpoints[i]), g_strdup (names[i]));
}

ShoalRpcClient *
shoal_rpc_client_connect (const ShoalRpcClientOptions *opts, GError **error)
{
  ShoalRpcClient *c;
  GError *e = NULL;

  g_return_val_if_fail (opts != NULL && opts->host != NULL, NULL);
  shoal_rpc_types_init ();
  if (opts->port <= 0 || opts->port > 65535)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "%s:%d: port out of range", opts->host,
                   opts->port);
      return NULL;
    }
  c = g_new0 (ShoalRpcClient, 1);
  c->host = g_strdup (opts->host);
  c->port = opts->port;
  c->token = g_strdup (opts->token != NULL ? opts->token : "");
  c->peer = strchr (opts->host, ':') != NULL ? g_strdup_printf ("[%s]:%d", opts->host, opts->port)
                                             : g_strdup_printf ("%s:%d", opts->host, opts->port);
  const char *name = peer_names != NULL ? g_hash_table_lookup (peer_names, c->peer) : NULL;
  if (name != NULL)
    {
      g_free (c->peer);
      c->peer = g_strdup (name);
    }
  c->max_message = opts->max_message_bytes > 0 ? MIN (opts->max_message_bytes, (size_t) G_MAXINT32)
                                               : ((size_t) 1 << 30);
  c->timeout_ms = opts->timeout_ms > 0 ? opts->timeout_ms : 60000;
  c->retries = opts->connect_retries > 0 ? opts->connect_retries : 50;
  c->tls = opts->tls;
  c->stop_step = -1;

  gint64 t0 = g_get_monotonic_time ();
  for (int attempt = 1;; attempt++)
    {
      gboolean retry;
      if (connect_once (c, &retry, &e))
        return c;
      if (!retry || attempt >= c->retries)
        {
          if (retry)
            {
              GError *e2 = g_error_new (SHOAL_ERROR, SHOAL_ERROR_RPC, "%s (%d attempts in %.1f s)",
                                        e->message, attempt,
                                        (double) (g_get_monotonic_time () - t0) / 1e6);
              g_error_free (e);
              e = e2;
            }
          break;
        }
      g_clear_error (&e);
      g_usleep (RETRY_US);
    }
  g_propagate_error (error, e);
  shoal_rpc_client_free (c);
  return NULL;
}

void
shoal_rpc_client_free (ShoalRpcClient *c)
{
  if (c == NULL)
    return;
  disconnect (c);
  g_free (c->scratch);
  g_free (c->host);
  g_free (c->token);
  g_free (c->peer);
  g_free (c);
}

gboolean
shoal_rpc_client_peer_closed (ShoalRpcClient *c)
{
  if (c->sock == NULL)
    return TRUE;
  /* the server never speaks unasked: anything readable is its close */
  struct pollfd p = { .fd = shoal_thrift_socket_fd (c->sock), .events = POLLIN | POLLRDHUP };
  return poll (&p, 1, 0) != 0;
}

/* ---- calls ---------------------------------------------------------------- */

/* "pull slice 3" for errors; slice < 0: just the call. */
static char *
call_name (const char *call, int slice)
{
  return slice >= 0 ? g_strdup_printf ("%s slice %d", call, slice) : g_strdup (call);
}

static gboolean
call_begin (ShoalRpcClient *c, const char *call, int slice, size_t n, GError **error)
{
  GError *e = NULL;

  if (n > (size_t) G_MAXINT32 / sizeof (float))
    {
      char *what = call_name (call, slice);
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC,
                   "%s: %s: %zu floats do not fit a Thrift message", c->peer, what, n);
      g_free (what);
      return FALSE;
    }
  if (c->client != NULL && !shoal_thrift_socket_idle_ok (c->sock))
    disconnect (c);   /* closed by the server while idle, or out of step */
  gboolean retry;
  if (c->client == NULL && !connect_once (c, &retry, &e))
    {
      char *what = call_name (call, slice);
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "%s (for %s)", e->message, what);
      g_free (what);
      g_error_free (e);
      return FALSE;
    }
  return TRUE;
}

/* Turns the outcome of a generated call into shoal's error: the server's
 * ParamError keeps the connection (STOPPED becomes SHOAL_ERROR_STOPPED
 * and keeps its step); anything else drops it. */
static gboolean
call_end (ShoalRpcClient *c, gboolean ok, const char *call, int slice, ShoalParamError *perr,
          GError *terr, GError **error)
{
  if (ok && perr == NULL && terr == NULL)
    return TRUE;
  if (perr != NULL)
    {
      gboolean stopped = perr->code == SHOAL_PARAM_FAULT_STOPPED || perr->code == SHOAL_PARAM_FAULT_STOPPING;
      gboolean lost = perr->code == SHOAL_PARAM_FAULT_LOST || perr->code == SHOAL_PARAM_FAULT_FAILED;
      if (perr->code == SHOAL_PARAM_FAULT_STOPPED)
        c->stop_step = perr->stop_step;
      g_set_error (error, SHOAL_ERROR, stopped ? SHOAL_ERROR_STOPPED : lost ? SHOAL_ERROR_LOST : SHOAL_ERROR_RPC,
                   "%s: %s", c->peer, perr->message != NULL ? perr->message : "refused");
      g_object_unref (perr);
    }
  else
    {
      char *what = call_name (call, slice);
      /* a link emulated slow enough to time calls out must not read as a
       * network fault: the error names it */
      ShoalLinkLimit link = shoal_link_limit_get_default ();
      char *note = link.bytes_per_s > 0 || link.latency_us > 0
                     ? g_strdup_printf (" (every link of this job is emulated at %g Mbit/s and %g ms latency: "
                                        "[emulate] bandwidth_mbit and latency_ms)",
                                        link.bytes_per_s * 8 / 1e6, (double) link.latency_us / 1000)
                     : g_strdup ("");
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "%s: %s: %s%s", c->peer, what,
                   terr != NULL ? terr->message : "failed", note);
      g_free (note);
      g_free (what);
      disconnect (c);
    }
  g_clear_error (&terr);
  return FALSE;
}

/* How long the server may wait for a version: less than the call's
 * timeout, so that a pull that waits too long comes back as an error
 * reply instead of a dead connection. */
static gint64
wait_ms (ShoalRpcClient *c)
{
  return c->timeout_ms - MIN (c->timeout_ms / 4, 2000);
}

/* A GByteArray header over caller memory, for the generated writers,
 * which read only data and len. */
static GByteArray
view (const float *v, size_t n)
{
  GByteArray a = { (guint8 *) (v), (guint) (n * sizeof (float)) };
  return a;
}

gboolean
shoal_rpc_client_push (ShoalRpcClient *c, int slice, const float *grad, size_t n, gint64 step,
                       GError **error)
{
  return shoal_rpc_client_push_from (c, slice, grad, n, step, NULL, error);
}

gboolean
shoal_rpc_client_push_from (ShoalRpcClient *c, int slice, const float *grad, size_t n, gint64 step,
                            const ShoalPushOrigin *origin, GError **error)
{
  return shoal_rpc_client_push_coded (c, slice, (const guint8 *) grad, SHOAL_CODEC_FP32, n, step,
                                      origin, error);
}

gboolean
shoal_rpc_client_push_coded (ShoalRpcClient *c, int slice, const guint8 *grad, ShoalCodec grad_codec,
                             size_t n, gint64 step, const ShoalPushOrigin *origin, GError **error)
{
  ShoalParamError *perr = NULL;
  GError *terr = NULL;
  gboolean ok;

  if (!call_begin (c, "push", slice, n, error))
    return FALSE;
  GByteArray g = { (guint8 *) grad, (guint) shoal_codec_bytes (grad_codec, n) };
  ok = shoal_param_service_if_push (c->client, c->token, slice, step, &g,
                                    origin != NULL ? origin->base_version : -1,
                                    origin != NULL ? origin->unit : -1, (gint32) grad_codec, &perr, &terr);
  return call_end (c, ok, "push", slice, perr, terr, error);
}

/* pull and push_pull share the reply: SliceValues, whose values (field 2)
 * sit in the result's success (field 0): depth 2 for the sink.  Values in
 * fp32, or kept `encoded` (dst then holds their bytes), land in dst;
 * others in the client's scratch buffer, decoded into dst by
 * take_values.  Returns where they land. */
static guint8 *
arm_values_sink (ShoalRpcClient *c, guint8 *dst, gboolean encoded, size_t n, ShoalCodec codec)
{
  size_t bytes = shoal_codec_bytes (codec, n);
  guint8 *into = dst;
  if (codec != SHOAL_CODEC_FP32 && !encoded)
    {
      if (c->scratch_bytes < bytes)
        {
          g_free (c->scratch);
          c->scratch = g_malloc (bytes);
          c->scratch_bytes = bytes;
        }
      into = c->scratch;
    }
  if (into != NULL && n > 0)
    shoal_thrift_protocol_set_sink (c->proto, into, (guint32) bytes, 2, 2, 0);
  return into;
}

/* After a call that may have received `values` into the sink at `into`:
 * takes `into` back out of the array, checks the length and decodes (or
 * copies, where the values came in their own buffer) into dst.  Returns
 * ok with *terr set on a bad reply. */
static gboolean
take_coded_values (ShoalRpcClient *c, gboolean ok, GByteArray *values, guint8 *into, ShoalCodec codec,
                   float *dst, size_t n, GError **terr)
{
  /* dst NULL: the caller keeps the encoding, in `into` */
  gsize bytes = values != NULL ? values->len : 0;
  gboolean in_sink = values != NULL && values->data == into && into != NULL;
  const guint8 *data = values != NULL ? values->data : NULL;

  shoal_thrift_protocol_clear_sink (c->proto);
  if (in_sink)
    g_byte_array_steal (values, NULL);   /* the memory is the caller's or the client's */
  if (!ok)
    return FALSE;
  if (bytes != shoal_codec_bytes (codec, n))
    {
      g_set_error (terr, SHOAL_ERROR, SHOAL_ERROR_RPC, "the reply holds %zu bytes, %zu expected",
                   bytes, shoal_codec_bytes (codec, n));
      return FALSE;
    }
  if ((codec == SHOAL_CODEC_FP32 || dst == NULL) && in_sink)
    return TRUE;
  if (dst == NULL)
    {
      memcpy (into, data, bytes);
      return TRUE;
    }
  if (!shoal_codec_decode (codec, in_sink ? into : data, bytes, dst, n))
    {
      g_set_error (terr, SHOAL_ERROR, SHOAL_ERROR_RPC, "the reply's values are no %s encoding",
                   shoal_codec_name (codec));
      return FALSE;
    }
  return TRUE;
}

static gboolean
take_values (ShoalRpcClient *c, gboolean ok, GByteArray *values, float *dst, size_t n,
             GError **terr)
{
  return take_coded_values (c, ok, values, (guint8 *) dst, SHOAL_CODEC_FP32, dst, n, terr);
}

gboolean
shoal_rpc_client_pull (ShoalRpcClient *c, int slice, float *dst, size_t n, gint64 min_version,
                       gint64 *version, GError **error)
{
  ShoalParamError *perr = NULL;
  GError *terr = NULL;
  ShoalSliceValues *ret;
  gboolean ok;

  if (!call_begin (c, "pull", slice, n, error))
    return FALSE;
  ret = g_object_new (SHOAL_TYPE_SLICE_VALUES, NULL);
  arm_values_sink (c, (guint8 *) dst, FALSE, n, SHOAL_CODEC_FP32);
  ok = shoal_param_service_if_pull (c->client, &ret, c->token, slice, min_version, wait_ms (c),
                                    SHOAL_CODEC_FP32, &perr, &terr);
  ok = take_values (c, ok, ret->values, dst, n, &terr);
  if (ok && version != NULL)
    *version = ret->version;
  g_object_unref (ret);
  return call_end (c, ok, "pull", slice, perr, terr, error);
}

gboolean
shoal_rpc_client_push_pull (ShoalRpcClient *c, int slice, const float *grad, float *dst,
                            size_t n, gint64 step, gint64 *version, GError **error)
{
  return shoal_rpc_client_push_pull_from (c, slice, grad, dst, n, step, NULL, version, error);
}

gboolean
shoal_rpc_client_push_pull_from (ShoalRpcClient *c, int slice, const float *grad, float *dst,
                                 size_t n, gint64 step, const ShoalPushOrigin *origin,
                                 gint64 *version, GError **error)
{
  return shoal_rpc_client_push_pull_coded (c, slice, (const guint8 *) grad, SHOAL_CODEC_FP32, dst,
                                           SHOAL_CODEC_FP32, n, step, origin, version, error);
}

/* push_pull_coded, and push_pull_encoded where dst is NULL and `keep`
 * receives the values' encoding */
static gboolean
push_pull (ShoalRpcClient *c, int slice, const guint8 *grad, ShoalCodec grad_codec, float *dst, guint8 *keep,
           ShoalCodec values_codec, size_t n, gint64 step, const ShoalPushOrigin *origin, gint64 *version,
           GError **error)
{
  ShoalParamError *perr = NULL;
  GError *terr = NULL;
  ShoalSliceValues *ret;
  gboolean ok;

  if (!call_begin (c, "push_pull", slice, n, error))
    return FALSE;
  GByteArray g = { (guint8 *) grad, (guint) shoal_codec_bytes (grad_codec, n) };
  ret = g_object_new (SHOAL_TYPE_SLICE_VALUES, NULL);
  guint8 *into = arm_values_sink (c, keep != NULL ? keep : (guint8 *) dst, keep != NULL, n, values_codec);
  ok = shoal_param_service_if_push_pull (c->client, &ret, c->token, slice, step, &g, wait_ms (c),
                                         origin != NULL ? origin->base_version : -1,
                                         origin != NULL ? origin->unit : -1, (gint32) grad_codec,
                                         (gint32) values_codec, &perr, &terr);
  ok = take_coded_values (c, ok, ret->values, into, values_codec, dst, n, &terr);
  if (ok && version != NULL)
    *version = ret->version;
  g_object_unref (ret);
  return call_end (c, ok, "push_pull", slice, perr, terr, error);
}

gboolean
shoal_rpc_client_push_pull_coded (ShoalRpcClient *c, int slice, const guint8 *grad,
                                  ShoalCodec grad_codec, float *dst, ShoalCodec values_codec,
                                  size_t n, gint64 step, const ShoalPushOrigin *origin,
                                  gint64 *version, GError **error)
{
  return push_pull (c, slice, grad, grad_codec, dst, NULL, values_codec, n, step, origin, version, error);
}

gboolean
shoal_rpc_client_push_pull_encoded (ShoalRpcClient *c, int slice, const guint8 *grad, ShoalCodec grad_codec,
                                    guint8 *values, ShoalCodec values_codec, size_t n, gint64 step,
                                    const ShoalPushOrigin *origin, gint64 *version, GError **error)
{
  return push_pull (c, slice, grad, grad_codec, NULL, values, values_codec, n, step, origin, version, error);
}

gboolean
shoal_rpc_client_put (ShoalRpcClient *c, int slice, const float *values, size_t n,
                      gint64 version, GError **error)
{
  ShoalParamError *perr = NULL;
  GError *terr = NULL;
  GByteArray v;
  gboolean ok;

  if (!call_begin (c, "put", slice, n, error))
    return FALSE;
  v = view (values, n);
  ok = shoal_param_service_if_put (c->client, c->token, slice, version, &v, &perr, &terr);
  return call_end (c, ok, "put", slice, perr, terr, error);
}

gboolean
shoal_rpc_client_apply_delta (ShoalRpcClient *c, int slice, const float *delta,
                              float *values_out, size_t n, GError **error)
{
  ShoalParamError *perr = NULL;
  GError *terr = NULL;
  GByteArray *ret = NULL, d;
  gboolean ok;

  if (!call_begin (c, "apply_delta", slice, n, error))
    return FALSE;
  d = view (delta, n);
  /* the binary return is the result's field 0 itself: depth 1 */
  if (values_out != NULL && n > 0)
    shoal_thrift_protocol_set_sink (c->proto, values_out, (guint32) (n * sizeof (float)), 1, 0, -1);
  ok = shoal_param_service_if_apply_delta (c->client, &ret, c->token, slice, &d, &perr, &terr);
  ok = take_values (c, ok, ret, values_out, n, &terr);
  if (ret != NULL)
    g_byte_array_unref (ret);
  return call_end (c, ok, "apply_delta", slice, perr, terr, error);
}

gboolean
shoal_rpc_client_elastic_exchange (ShoalRpcClient *c, int slice, const float *replica, float *diff_out,
                                   size_t n, float alpha, GError **error)
{
  ShoalParamError *perr = NULL;
  GError *terr = NULL;
  GByteArray *ret = NULL, d;
  gboolean ok;

  if (!call_begin (c, "elastic_exchange", slice, n, error))
    return FALSE;
  d = view (replica, n);
  /* the binary return is the result's field 0 itself: depth 1 */
  if (diff_out != NULL && n > 0)
    shoal_thrift_protocol_set_sink (c->proto, diff_out, (guint32) (n * sizeof (float)), 1, 0, -1);
  ok = shoal_param_service_if_elastic_exchange (c->client, &ret, c->token, slice, &d, alpha, &perr, &terr);
  ok = take_values (c, ok, ret, diff_out, n, &terr);
  if (ret != NULL)
    g_byte_array_unref (ret);
  return call_end (c, ok, "elastic_exchange", slice, perr, terr, error);
}

gboolean
shoal_rpc_client_stats (ShoalRpcClient *c, ShoalServerStats *stats, GError **error)
{
  ShoalParamError *perr = NULL;
  GError *terr = NULL;
  ShoalStatsReply *ret;
  gboolean ok;

  if (!call_begin (c, "stats", -1, 0, error))
    return FALSE;
  ret = g_object_new (SHOAL_TYPE_STATS_REPLY, NULL);
  ok = shoal_param_service_if_stats (c->client, &ret, c->token, &perr, &terr);
  if (ok)
    *stats = (ShoalServerStats) { ret->pushes, ret->pulls, ret->updates, ret->deltas,
                                  ret->bytes_in, ret->bytes_out, ret->dropped };
  g_object_unref (ret);
  return call_end (c, ok, "stats", -1, perr, terr, error);
}

gboolean
shoal_rpc_client_shutdown (ShoalRpcClient *c, int rank, GError **error)
{
  ShoalParamError *perr = NULL;
  GError *terr = NULL;
  gboolean ok;

  if (!call_begin (c, "shutdown", -1, 0, error))
    return FALSE;
  ok = shoal_param_service_if_shutdown (c->client, c->token, rank, &perr, &terr);
  return call_end (c, ok, "shutdown", -1, perr, terr, error);
}

gboolean
shoal_rpc_client_heartbeat (ShoalRpcClient *c, int rank, gint64 incarnation, gint64 progress,
                            gboolean rejoin, GBytes **lost, GError **error)
{
  ShoalParamError *perr = NULL;
  GError *terr = NULL;
  GByteArray *ret = NULL;
  gboolean ok;

  if (lost != NULL)
    *lost = NULL;
  if (!call_begin (c, "heartbeat", -1, 0, error))
    return FALSE;
  ok = shoal_param_service_if_heartbeat (c->client, &ret, c->token, rank, incarnation, progress, rejoin,
                                         &perr, &terr);
  if (ok && perr == NULL && terr == NULL && lost != NULL)
    *lost = ret != NULL ? g_bytes_new (ret->data, ret->len) : g_bytes_new (NULL, 0);
  if (ret != NULL)
    g_byte_array_unref (ret);
  return call_end (c, ok, "heartbeat", -1, perr, terr, error);
}

gboolean
shoal_rpc_client_checkpoint (ShoalRpcClient *c, gint64 step, GError **error)
{
  ShoalParamError *perr = NULL;
  GError *terr = NULL;
  gboolean ok;

  if (!call_begin (c, "checkpoint", -1, 0, error))
    return FALSE;
  ok = shoal_param_service_if_checkpoint (c->client, c->token, step, &perr, &terr);
  return call_end (c, ok, "checkpoint", -1, perr, terr, error);
}

gboolean
shoal_rpc_client_stop_at (ShoalRpcClient *c, gint64 step, gint64 *stopped_at, GError **error)
{
  ShoalParamError *perr = NULL;
  GError *terr = NULL;
  gint64 at = step;
  gboolean ok;

  if (!call_begin (c, "stop_at", -1, 0, error))
    return FALSE;
  ok = shoal_param_service_if_stop_at (c->client, &at, c->token, step, &perr, &terr);
  ok = call_end (c, ok, "stop_at", -1, perr, terr, error);
  if (ok && stopped_at != NULL)
    *stopped_at = at;
  return ok;
}

gint64
shoal_rpc_client_stop_step (ShoalRpcClient *c)
{
  return c->stop_step;
}

/* ---- shared memory -------------------------------------------------------- */

/* On a fresh connection: offers the region.  A refusal (another host,
 * another PID namespace, a check failed) keeps the connection on the
 * socket for good; a failed call drops the connection as any other. */
static gboolean
attach_shm (ShoalRpcClient *c, GError **error)
{
  ShoalParamError *perr = NULL;
  GError *terr = NULL;
  GByteArray nonce = { c->shm_offer.nonce, SHOAL_SHM_NONCE_BYTES };
  gboolean ok = shoal_param_service_if_attach_shm (c->client, c->token, c->shm_offer.pid,
                                                   c->shm_offer.fd, c->shm_offer.bytes, &nonce,
                                                   c->shm_offer.host, c->shm_values_at,
                                                   c->shm_grads_at, &perr, &terr);
  if (ok && perr == NULL && terr == NULL)
    {
      c->shm_attached = TRUE;
      g_debug ("%s: slices move through shared memory", c->peer);
      return TRUE;
    }
  if (perr != NULL)
    {
      g_debug ("%s: no shared memory (%s): slices go over the socket", c->peer,
               perr->message != NULL ? perr->message : "refused");
      c->shm_wanted = FALSE;
      g_object_unref (perr);
    }
  else
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "%s: attach_shm: %s", c->peer,
                   terr != NULL ? terr->message : "failed");
      disconnect (c);
    }
  g_clear_error (&terr);
  return FALSE;
}

gboolean
shoal_rpc_client_use_shm (ShoalRpcClient *c, const ShoalShmOffer *offer, gint64 values_at,
                          gint64 grads_at)
{
  c->shm_wanted = TRUE;
  c->shm_offer = *offer;
  c->shm_values_at = values_at;
  c->shm_grads_at = grads_at;
  if (c->client != NULL && !c->shm_attached)
    attach_shm (c, NULL);
  return c->shm_attached;
}

gboolean
shoal_rpc_client_shm_usable (ShoalRpcClient *c)
{
  return c->shm_attached || c->shm_wanted;
}

gboolean
shoal_rpc_client_push_pull_shm (ShoalRpcClient *c, const gint32 *slices, int count, gint64 step,
                                const gint64 *base_versions, int unit, gboolean fetch,
                                gboolean clear_grads, gint64 *versions, GError **error)
{
  ShoalParamError *perr = NULL;
  GError *terr = NULL;
  GByteArray *ret = NULL;
  gboolean ok;

  if (!call_begin (c, "push_pull_shm", slices[0], 0, error))
    return FALSE;
  if (!c->shm_attached)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC,
                   "%s: push_pull_shm slice %d: no shared memory on this connection", c->peer, slices[0]);
      return FALSE;
    }
  GByteArray ids = { (guint8 *) slices, (guint) ((size_t) count * sizeof (gint32)) };
  GByteArray bases = { (guint8 *) base_versions, (guint) ((size_t) count * sizeof (gint64)) };
  ok = shoal_param_service_if_push_pull_shm (c->client, &ret, c->token, &ids, step, wait_ms (c),
                                             &bases, unit, fetch, clear_grads, &perr, &terr);
  if (ok && perr == NULL && terr == NULL)
    {
      if (ret == NULL || ret->len != (guint) count * sizeof (gint64))
        g_set_error (&terr, SHOAL_ERROR, SHOAL_ERROR_RPC, "the reply holds %u bytes of versions, %zu expected",
                     ret != NULL ? ret->len : 0, (size_t) count * sizeof (gint64));
      else
        memcpy (versions, ret->data, ret->len);
    }
  if (ret != NULL)
    g_byte_array_unref (ret);
  return call_end (c, ok && terr == NULL, "push_pull_shm", slices[0], perr, terr, error);
}

gboolean
shoal_rpc_client_send_bridge (ShoalRpcClient *c, int group, guint32 channel, const void *data,
                              size_t len, GError **error)
{
  char *what = g_strdup_printf ("send_bridge group %d channel %u", group, channel);
  ShoalParamError *perr = NULL;
  GError *terr = NULL;
  gboolean ok = FALSE;

  /* the token and the call's header share the message */
  if (len > (size_t) G_MAXINT32 - strlen (c->token) - 1024)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC,
                 "%s: %s: %zu bytes do not fit a Thrift message", c->peer, what, len);
  else if (call_begin (c, what, -1, 0, error))
    {
      GByteArray d = { (guint8 *) data, (guint) len };
      ok = shoal_param_service_if_send_bridge (c->client, c->token, group, (gint32) channel, &d,
                                               &perr, &terr);
      ok = call_end (c, ok, what, -1, perr, terr, error);
    }
  g_free (what);
  return ok;
}
