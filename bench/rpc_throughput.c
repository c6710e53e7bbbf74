/* Throughput of the parameter service on loopback against a plain TCP
 * socket moving the same bytes.
 *
 * For each slice size it times, in one process (server threads and the
 * client share the machine exactly like the raw pair does):
 *   rpc push+pull   shoal_rpc_client_push then _pull of one slice
 *                   (the server applies SGD to every push)
 *   rpc put+pull    the same bytes without the update: transport only
 *   rpc push_pull   one round trip carrying the slice both ways
 *   shm push_pull   the same call on a connection with the client's shared
 *                   memory attached (rpc/shm_region.h), as ranks on one
 *                   host use it ([cluster] shared_memory = auto): the
 *                   gradients are read from, the new values written into,
 *                   the client's region; the call itself stays Thrift
 *   raw push+pull   a plain socket: the client sends a 16-byte header and
 *                   the slice (one sendmsg), the server receives it into a
 *                   buffer and answers 8 bytes; then the client asks with
 *                   a header and receives a length and the slice back
 *                   (TCP_NODELAY both ends, MSG_WAITALL receives)
 *   rpc sliced      the same bytes as a worker moves a param of that size:
 *                   cut into the runner's slices (~512 KiB each,
 *                   shoal_runner_slice_count), one push_pull per slice in
 *                   order on one connection, as the comm thread does
 *   raw exchange    the raw pair's one round trip: the client sends a
 *                   header and the slice, the server receives it and sends
 *                   it back (the raw form of push_pull)
 *   raw sliced      the raw pair moving the runner's slices, one exchange each
 *   stock pull      the stock c_glib client (ThriftSocket +
 *                   ThriftBufferedTransport, 64 KiB buffers) pulling the
 *                   same slice from the same server
 * MiB/s counts the slice bytes moved in both directions (one direction
 * for stock pull) divided by the median time of one operation.  The kinds
 * take turns operation by operation, so that load from other processes
 * (the machine may be shared) hits all alike, for about --seconds each;
 * medians make the figures robust to bursts of such load.  Then, for the
 * largest size, where a push+pull's time goes, also as medians.
 *
 * The server runs in --mode sync (Sandblaster's: a push of step t makes
 * version t + 1; its values stay put until the next step, so replies are
 * sent straight from them) or async (Downpour's: every push applied as it
 * comes; replies are sent from the values in place under a pin that an
 * update waits for, or from a copy when one comes meanwhile).  The update
 * runs on --threads threads (default: the machine's cores), as in a
 * process of servers, whose plan gives its loops every core.
 *
 * Usage: rpc_throughput [--sizes 1,4,16] [--seconds 1] [--kinds K,...] [--mode sync|async] [--threads N]
 *                       [--no-breakdown]
 * Output: one "rpc_throughput ..." line per size (key=value), then
 * "rpc_breakdown ..." lines. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <thrift/c_glib/protocol/thrift_binary_protocol.h>
#include <thrift/c_glib/thrift_configuration.h>
#include <thrift/c_glib/transport/thrift_buffered_transport.h>
#include <thrift/c_glib/transport/thrift_socket.h>

#include "core/parallel.h"
#include "median.h"
#include "server/rpc_client.h"
#include "server/rpc_server.h"
#include "server/rpc_types.h"
#include "server/server.h"
#include "run/runner.h"

#define MIB (1024.0 * 1024.0)

static void
die (const char *what, GError *error)
{
  fprintf (stderr, "rpc_throughput: %s: %s\n", what, error != NULL ? error->message : g_strerror (errno));
  exit (1);
}

/* ---- the raw pair ---------------------------------------------------------- */

typedef struct {
  int listen_fd, port;
  size_t max;
  GThread *thread;
} RawServer;

static void
nodelay (int fd)
{
  int one = 1;
  setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void
send_all (int fd, const void *buf, size_t len)
{
  const char *p = buf;
  while (len > 0)
    {
      ssize_t r = send (fd, p, len, MSG_NOSIGNAL);
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0)
        die ("raw send", NULL);
      p += r;
      len -= (size_t) r;
    }
}

/* A small head and a payload in one sendmsg, as the RPC transport does. */
static void
send_two (int fd, const void *head, size_t hlen, const void *buf, size_t len)
{
  struct iovec iov[2] = { { (void *) head, hlen }, { (void *) buf, len } };
  struct iovec *v = iov;
  int cnt = 2;
  while (cnt > 0)
    {
      struct msghdr msg = { .msg_iov = v, .msg_iovlen = (size_t) cnt };
      ssize_t r = sendmsg (fd, &msg, MSG_NOSIGNAL);
      if (r < 0 && errno == EINTR)
        continue;
      if (r < 0)
        die ("raw sendmsg", NULL);
      while (cnt > 0 && (size_t) r >= v->iov_len)
        {
          r -= (ssize_t) v->iov_len;
          v++;
          cnt--;
        }
      if (cnt > 0)
        {
          v->iov_base = (char *) v->iov_base + r;
          v->iov_len -= (size_t) r;
        }
    }
}

static gboolean
recv_all (int fd, void *buf, size_t len)
{
  char *p = buf;
  while (len > 0)
    {
      ssize_t r = recv (fd, p, len, MSG_WAITALL);
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0)
        return FALSE;
      p += r;
      len -= (size_t) r;
    }
  return TRUE;
}

/* header: op (1 push, 2 pull, 3 both in one round trip), length, and
 * where in the server's buffer the bytes go (a slice's offset, so that
 * sliced exchanges touch the whole buffer as the service's values do) */
typedef struct {
  guint32 op, pad;
  guint64 len, offset;
} RawHeader;

static gpointer
raw_server_main (gpointer data)
{
  RawServer *s = data;
  int fd = accept (s->listen_fd, NULL, NULL);
  guint8 *buf = g_malloc (s->max);
  RawHeader h;
  guint64 ack = 0;

  if (fd < 0)
    die ("raw accept", NULL);
  nodelay (fd);
  memset (buf, 0, s->max);
  while (recv_all (fd, &h, sizeof h))
    {
      if (h.len > s->max || h.offset > s->max - h.len)
        die ("raw header", NULL);
      if (h.op == 1)
        {
          if (!recv_all (fd, buf, h.len))
            break;
          send_all (fd, &ack, sizeof ack);
        }
      else if (h.op == 3)
        {
          if (!recv_all (fd, buf + h.offset, h.len))
            break;
          send_two (fd, &h.len, sizeof h.len, buf + h.offset, h.len);
        }
      else
        send_two (fd, &h.len, sizeof h.len, buf, h.len);
    }
  close (fd);
  g_free (buf);
  return NULL;
}

static int
raw_start (RawServer *s, size_t max)
{
  struct sockaddr_in a = { 0 };
  socklen_t alen = sizeof a;
  int fd;

  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  s->listen_fd = socket (AF_INET, SOCK_STREAM, 0);
  if (s->listen_fd < 0 || bind (s->listen_fd, (struct sockaddr *) &a, sizeof a) < 0
      || listen (s->listen_fd, 1) < 0 || getsockname (s->listen_fd, (struct sockaddr *) &a, &alen) < 0)
    die ("raw listen", NULL);
  s->port = ntohs (a.sin_port);
  s->max = max;
  s->thread = g_thread_new ("raw-server", raw_server_main, s);
  fd = socket (AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || connect (fd, (struct sockaddr *) &a, sizeof a) < 0)
    die ("raw connect", NULL);
  nodelay (fd);
  return fd;
}

static void
raw_push (int fd, const void *buf, size_t len)
{
  RawHeader h = { 1, 0, len, 0 };
  guint64 ack;
  send_two (fd, &h, sizeof h, buf, len);
  if (!recv_all (fd, &ack, sizeof ack))
    die ("raw ack", NULL);
}

static void
raw_pull (int fd, void *buf, size_t len)
{
  RawHeader h = { 2, 0, len, 0 };
  guint64 n;
  send_all (fd, &h, sizeof h);
  if (!recv_all (fd, &n, sizeof n) || n != len || !recv_all (fd, buf, len))
    die ("raw pull", NULL);
}

/* The slice out and back in one round trip: the raw form of push_pull. */
static void
raw_exchange (int fd, const void *out, void *in, size_t len, size_t offset)
{
  RawHeader h = { 3, 0, len, offset };
  guint64 n;
  send_two (fd, &h, sizeof h, out, len);
  if (!recv_all (fd, &n, sizeof n) || n != len || !recv_all (fd, in, len))
    die ("raw exchange", NULL);
}

/* ---- the stock c_glib client ----------------------------------------------- */

typedef struct {
  ThriftConfiguration *conf;
  ThriftSocket *socket;
  ThriftTransport *transport;
  ThriftProtocol *protocol;
  ShoalParamServiceIf *client;
} Stock;

static void
stock_open (Stock *s, int port)
{
  GError *error = NULL;
  glong big = G_MAXINT32;

  s->conf = g_object_new (THRIFT_TYPE_CONFIGURATION, "max_message_size", G_MAXINT32,
                          "max_frame_size", G_MAXINT32, NULL);
  s->socket = g_object_new (THRIFT_TYPE_SOCKET, "hostname", "127.0.0.1", "port", (guint) port,
                            "configuration", s->conf, "remainingmessagesize", big,
                            "knowmessagesize", big, NULL);
  s->transport = g_object_new (THRIFT_TYPE_BUFFERED_TRANSPORT, "transport", s->socket,
                               "r_buf_size", 65536u, "w_buf_size", 65536u,
                               "configuration", s->conf, "remainingmessagesize", big,
                               "knowmessagesize", big, NULL);
  s->protocol = g_object_new (THRIFT_TYPE_BINARY_PROTOCOL, "transport", s->transport, NULL);
  if (!thrift_transport_open (s->transport, &error))
    die ("stock open", error);
  nodelay (s->socket->sd);
  s->client = g_object_new (SHOAL_TYPE_PARAM_SERVICE_CLIENT, "input_protocol", s->protocol,
                            "output_protocol", s->protocol, NULL);
}

static void
stock_pull (Stock *s, const char *token, float *dst, size_t n)
{
  ShoalSliceValues *ret = g_object_new (SHOAL_TYPE_SLICE_VALUES, NULL);
  ShoalParamError *perr = NULL;
  GError *error = NULL;

  if (!shoal_param_service_if_pull (s->client, &ret, token, 0, 0, 10000, 0, &perr, &error)
      || ret->values == NULL || ret->values->len != n * sizeof (float))
    die ("stock pull", error);
  memcpy (dst, ret->values->data, n * sizeof (float));
  g_object_unref (ret);
}

static void
stock_close (Stock *s)
{
  thrift_transport_close (s->transport, NULL);
  g_object_unref (s->client);
  g_object_unref (s->protocol);
  g_object_unref (s->transport);
  g_object_unref (s->socket);
  g_object_unref (s->conf);
}

/* ---- timing ---------------------------------------------------------------- */

typedef enum {
  K_PUSH_PULL, K_PUT_PULL, K_PUSH_PULL_ONE, K_SHM, K_SLICED, K_RAW, K_RAW_EXCHANGE, K_RAW_SLICED, K_STOCK_PULL, K_COUNT
} Kind;

static const char *const kind_key[K_COUNT] = { "rpc_push_pull", "rpc_put_pull", "rpc_pushpull_call",
                                                "rpc_shm_call", "rpc_sliced", "raw_push_pull",
                                                "raw_exchange", "raw_sliced", "stock_pull" };

typedef struct {
  ShoalRpcClient *rpc;
  ShoalRpcClient *shm_rpc;   /* a second connection, the region attached */
  ShoalShmRegion *shm;       /* values at float 0, gradients at n */
  ShoalRpcClient *sliced_rpc;  /* to a server whose slices are the runner's */
  ShoalServer *sliced;
  gint64 sliced_version;
  int raw_fd;
  Stock stock;
  float *grad, *dst;
  size_t n;
  gint64 version;   /* the slice's version: the step of the next push */
  ShoalServer *server;
} Ctx;

static void
one (Ctx *c, Kind k)
{
  GError *error = NULL;
  size_t bytes = c->n * sizeof (float);

  switch (k)
    {
    case K_PUSH_PULL:
      if (!shoal_rpc_client_push (c->rpc, 0, c->grad, c->n, c->version++, &error)
          || !shoal_rpc_client_pull (c->rpc, 0, c->dst, c->n, c->version, NULL, &error))
        die ("push+pull", error);
      break;
    case K_PUT_PULL:
      if (!shoal_rpc_client_put (c->rpc, 0, c->grad, c->n, ++c->version, &error)
          || !shoal_rpc_client_pull (c->rpc, 0, c->dst, c->n, c->version, NULL, &error))
        die ("put+pull", error);
      break;
    case K_PUSH_PULL_ONE:
      if (!shoal_rpc_client_push_pull (c->rpc, 0, c->grad, c->dst, c->n, c->version++, NULL, &error))
        die ("push_pull", error);
      break;
    case K_SHM:
      {
        gint32 slice = 0;
        gint64 base = c->version, got;
        if (!shoal_rpc_client_push_pull_shm (c->shm_rpc, &slice, 1, c->version++, &base, 0, TRUE, FALSE, &got,
                                             &error))
          die ("push_pull_shm", error);
      }
      break;
    case K_SLICED:
      for (int s = 0; s < shoal_server_n_slices (c->sliced); s++)
        {
          size_t begin, end;
          shoal_server_slice_range (c->sliced, s, &begin, &end);
          if (!shoal_rpc_client_push_pull (c->sliced_rpc, s, c->grad + begin, c->dst + begin, end - begin,
                                           c->sliced_version, NULL, &error))
            die ("sliced push_pull", error);
        }
      c->sliced_version++;
      break;
    case K_RAW:
      raw_push (c->raw_fd, c->grad, bytes);
      raw_pull (c->raw_fd, c->dst, bytes);
      break;
    case K_RAW_EXCHANGE:
      raw_exchange (c->raw_fd, c->grad, c->dst, bytes, 0);
      break;
    case K_RAW_SLICED:
      for (int s = 0; s < shoal_server_n_slices (c->sliced); s++)
        {
          size_t begin, end;
          shoal_server_slice_range (c->sliced, s, &begin, &end);
          raw_exchange (c->raw_fd, c->grad + begin, c->dst + begin, (end - begin) * sizeof (float),
                        begin * sizeof (float));
        }
      break;
    case K_STOCK_PULL:
      stock_pull (&c->stock, "bench", c->dst, c->n);
      break;
    default:
      break;
    }
}

/* A server of one param of n floats cut into nslices, SGD on every
 * push, and its Thrift service on loopback. */
typedef struct {
  ShoalParamStore *layout;
  ShoalServer *server;
  ShoalRpcServer *rpc;
} Bench;

static void
bench_server_start (Bench *b, size_t n, gboolean sync, int nslices)
{
  ShoalShape shape = shoal_shape_make (1, (int) n);
  ShoalInitSpec init = { 0 };
  ShoalUpdaterConf upd;
  ShoalServerOptions so = { .mode = sync ? SHOAL_UPDATE_SYNC : SHOAL_UPDATE_ASYNC,
                            .sync_contributors = 1, .nslices = nslices };
  ShoalRpcServerOptions ro = { .bind_address = "127.0.0.1", .token = "bench" };
  GError *error = NULL;

  b->layout = shoal_param_store_new ();
  shoal_param_store_declare (b->layout, "w", &shape, &init, 1, 1, 1.0f, 1.0f);
  g_assert_true (shoal_param_store_allocate (b->layout, NULL));
  shoal_updater_conf_defaults (&upd, SHOAL_UPDATER_SGD);
  upd.schedule.lr = 1e-6f;
  b->server = shoal_server_new (b->layout, &upd, &so, NULL);
  shoal_server_host_all (b->server);
  if ((b->rpc = shoal_rpc_server_start (b->server, &ro, &error)) == NULL)
    die ("server", error);
}

static void
bench_server_stop (Bench *b)
{
  shoal_rpc_server_stop (b->rpc);
  shoal_server_free (b->server);
  shoal_param_store_free (b->layout);
}

/* The pieces of one push+pull of the largest slice, timed alone. */
typedef enum {
  B_RPC_PUSH, B_RAW_PUSH, B_SERVER_UPDATE, B_RPC_PULL, B_RAW_PULL, B_STOCK_PULL, B_SERVER_COPY,
  B_MALLOC_TOUCH, B_COUNT
} Piece;

static const char *const piece_key[B_COUNT] = {
  "rpc_push_ms", "raw_push_ms", "server_update_ms", "rpc_pull_ms", "raw_pull_ms",
  "stock_pull_ms", "server_copy_ms", "malloc_touch_ms"
};

static void
piece (Ctx *c, ShoalServer *server, Piece p)
{
  size_t bytes = c->n * sizeof (float);
  GError *error = NULL;
  gboolean ok = TRUE;

  switch (p)
    {
    case B_RPC_PUSH:
      ok = shoal_rpc_client_push (c->rpc, 0, c->grad, c->n, c->version++, &error);
      break;
    case B_RAW_PUSH:
      raw_push (c->raw_fd, c->grad, bytes);
      break;
    case B_SERVER_UPDATE:
      ok = shoal_server_push (server, 0, c->grad, c->n, c->version++, &error);
      break;
    case B_RPC_PULL:
      ok = shoal_rpc_client_pull (c->rpc, 0, c->dst, c->n, 0, NULL, &error);
      break;
    case B_RAW_PULL:
      raw_pull (c->raw_fd, c->dst, bytes);
      break;
    case B_STOCK_PULL:
      stock_pull (&c->stock, "bench", c->dst, c->n);
      break;
    case B_SERVER_COPY:
      ok = shoal_server_pull (server, 0, c->dst, c->n, 0, 0, NULL, &error);
      break;
    case B_MALLOC_TOUCH:
      {
        /* what a fresh receive buffer costs when the allocator maps new pages */
        guint8 *fresh = g_malloc (bytes);
        memset (fresh, 1, bytes);
        g_free (fresh);
      }
      break;
    default:
      break;
    }
  if (!ok)
    die (piece_key[p], error);
}

static double
piece_ms (Ctx *c, ShoalServer *server, Piece p, int reps)
{
  double t[64];
  reps = CLAMP (reps, 1, 64);
  piece (c, server, p);   /* warm */
  for (int i = 0; i < reps; i++)
    {
      gint64 t0 = g_get_monotonic_time ();
      piece (c, server, p);
      t[i] = (double) (g_get_monotonic_time () - t0) / 1e3;
    }
  return median (t, reps);
}

int
main (int argc, char **argv)
{
  char *sizes_arg = NULL, *kinds_arg = NULL, *mode_arg = NULL;
  gboolean breakdown = TRUE, no_breakdown = FALSE;
  double seconds = 1.0;
  int threads = 0;
  GError *error = NULL;
  GOptionEntry entries[] = {
    { "sizes", 0, 0, G_OPTION_ARG_STRING, &sizes_arg, "slice sizes in MiB (1,4,16)", "LIST" },
    { "seconds", 0, 0, G_OPTION_ARG_DOUBLE, &seconds, "seconds per kind and size (1)", "S" },
    { "kinds", 0, 0, G_OPTION_ARG_STRING, &kinds_arg, "kinds to time (all), e.g. rpc_push_pull,raw_push_pull", "LIST" },
    { "no-breakdown", 0, 0, G_OPTION_ARG_NONE, &no_breakdown, "skip the breakdown", NULL },
    { "mode", 0, 0, G_OPTION_ARG_STRING, &mode_arg, "the server's mode: sync (default) or async", "MODE" },
    { "threads", 0, 0, G_OPTION_ARG_INT, &threads,
      "threads of the server's update (default: the machine's cores, as a process of servers plans)", "N" },
    { NULL, 0, 0, 0, NULL, NULL, NULL }
  };
  GOptionContext *octx = g_option_context_new ("- parameter service throughput vs raw TCP");
  g_option_context_add_main_entries (octx, entries, NULL);
  if (!g_option_context_parse (octx, &argc, &argv, &error))
    die ("options", error);
  g_option_context_free (octx);
  breakdown = !no_breakdown;
  gboolean sync = mode_arg == NULL || strcmp (mode_arg, "async") != 0;
  gboolean want[K_COUNT];
  for (int k = 0; k < K_COUNT; k++)
    {
      want[k] = kinds_arg == NULL;
      if (kinds_arg != NULL)
        {
          char **names = g_strsplit (kinds_arg, ",", -1);
          for (char **nm = names; *nm != NULL; nm++)
            want[k] = want[k] || strcmp (*nm, kind_key[k]) == 0;
          g_strfreev (names);
        }
    }

  char **sizes = g_strsplit (sizes_arg != NULL ? sizes_arg : "1,4,16", ",", -1);
  size_t max_floats = 0;
  for (char **s = sizes; *s != NULL; s++)
    max_floats = MAX (max_floats, (size_t) (g_ascii_strtod (*s, NULL) * MIB) / sizeof (float));

  /* a process of servers only (shoal_threads_apply with no workers)
   * spreads its updates over every core */
  shoal_parallel_set_threads (threads > 0 ? threads : (int) g_get_num_processors ());
  shoal_rpc_types_init ();
  for (char **s = sizes; *s != NULL; s++)
    {
      double mb = g_ascii_strtod (*s, NULL);
      size_t n = ((size_t) (mb * MIB) / sizeof (float)) / 16 * 16;
      if (n == 0)
        continue;

      /* one param, one slice of n floats, SGD applied on every push */
      Bench one_slice, runner_slices;
      ShoalLayout one_server = { .nslices = 1 };
      bench_server_start (&one_slice, n, sync, 1);
      ShoalServer *server = one_slice.server;
      ShoalRpcServer *rpc = one_slice.rpc;
      ShoalRpcClientOptions co = { "127.0.0.1", shoal_rpc_server_port (rpc), "bench", 0, 0, 0, NULL };

      Ctx c = { 0 };
      if (want[K_SLICED] || want[K_RAW_SLICED])
        {
          ShoalRpcClientOptions sco = co;
          bench_server_start (&runner_slices, n, sync, shoal_runner_slice_count (&one_server, n));
          sco.port = shoal_rpc_server_port (runner_slices.rpc);
          if ((c.sliced_rpc = shoal_rpc_client_connect (&sco, &error)) == NULL)
            die ("client", error);
          c.sliced = runner_slices.server;
        }
      RawServer raw;
      c.n = n;
      c.grad = g_new (float, n);
      c.dst = g_new (float, n);
      for (size_t i = 0; i < n; i++)
        c.grad[i] = (float) (i % 7) * 0.25f;
      memset (c.dst, 0, n * sizeof (float));
      if ((c.rpc = shoal_rpc_client_connect (&co, &error)) == NULL)
        die ("client", error);
      if (want[K_SHM])
        {
          ShoalShmOffer offer;
          if ((c.shm = shoal_shm_region_create ("bench", 2 * n * sizeof (float), &error)) == NULL)
            die ("shared memory", error);
          memcpy ((float *) shoal_shm_region_data (c.shm) + n, c.grad, n * sizeof (float));
          shoal_shm_region_offer (c.shm, &offer);
          if ((c.shm_rpc = shoal_rpc_client_connect (&co, &error)) == NULL)
            die ("client", error);
          if (!shoal_rpc_client_use_shm (c.shm_rpc, &offer, 0, (gint64) n))
            die ("the server refused the shared region", NULL);
        }
      c.raw_fd = raw_start (&raw, n * sizeof (float));
      stock_open (&c.stock, shoal_rpc_server_port (rpc));

      for (int k = 0; k < K_COUNT; k++)
        for (int w = 0; w < 2 && want[k]; w++)
          one (&c, (Kind) k);   /* warm up: connections, page faults, arenas */
      enum { MAX_ROUNDS = 20000 };
      double *t = g_new (double, (size_t) K_COUNT * MAX_ROUNDS);
      gint64 start = g_get_monotonic_time ();
      int rounds = 0;
      while (rounds < MAX_ROUNDS
             && (rounds < 9 || (double) (g_get_monotonic_time () - start) < seconds * K_COUNT * 1e6))
        {
          for (int k = 0; k < K_COUNT; k++)
            {
              if (!want[k])
                continue;
              gint64 t0 = g_get_monotonic_time ();
              one (&c, (Kind) k);
              t[(size_t) k * MAX_ROUNDS + (size_t) rounds] = (double) (g_get_monotonic_time () - t0) / 1e6;
            }
          rounds++;
        }
      double med[K_COUNT];
      for (int k = 0; k < K_COUNT; k++)
        {
          med[k] = 0;
          if (!want[k])
            continue;
          double moved = (k == K_STOCK_PULL ? 1.0 : 2.0) * (double) (n * sizeof (float));
          med[k] = moved / MIB / median (t + (size_t) k * MAX_ROUNDS, rounds);
        }
      g_free (t);

      printf ("rpc_throughput mode=%s size_mib=%g", sync ? "sync" : "async", mb);
      for (int k = 0; k < K_COUNT; k++)
        if (want[k])
          printf (" %s=%.0f", kind_key[k], med[k]);
      for (int k = K_PUSH_PULL; k <= K_SLICED && want[K_RAW]; k++)
        if (want[k])
          printf (" ratio_%s=%.2f", kind_key[k] + 4, med[k] / med[K_RAW]);
      if (want[K_PUSH_PULL_ONE] && want[K_RAW_EXCHANGE])
        printf (" ratio_pushpull_call_raw_exchange=%.2f", med[K_PUSH_PULL_ONE] / med[K_RAW_EXCHANGE]);
      if (want[K_SLICED] && want[K_RAW_SLICED])
        printf (" ratio_sliced_raw_sliced=%.2f", med[K_SLICED] / med[K_RAW_SLICED]);
      printf (" rounds=%d\n", rounds);

      if (s[1] == NULL && breakdown)
        {
          /* where the time of one push+pull of the largest slice goes */
          printf ("rpc_breakdown mode=%s size_mib=%g", sync ? "sync" : "async", mb);
          for (int p = 0; p < B_COUNT; p++)
            printf (" %s=%.2f", piece_key[p], piece_ms (&c, server, (Piece) p, 31));
          printf ("\n");
        }

      stock_close (&c.stock);
      close (c.raw_fd);
      g_thread_join (raw.thread);
      close (raw.listen_fd);
      shoal_rpc_client_free (c.rpc);
      if (c.shm_rpc != NULL)
        shoal_rpc_client_free (c.shm_rpc);
      shoal_shm_region_free (c.shm);
      if (c.sliced_rpc != NULL)
        {
          shoal_rpc_client_free (c.sliced_rpc);
          bench_server_stop (&runner_slices);
        }
      bench_server_stop (&one_slice);
      g_free (c.grad);
      g_free (c.dst);
      fflush (stdout);
    }
  g_strfreev (sizes);
  g_free (sizes_arg);
  g_free (kinds_arg);
  g_free (mode_arg);
  return 0;
}
