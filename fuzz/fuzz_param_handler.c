/* libFuzzer target: the parameter service (thrift/param.thrift) as a peer
 * on the network sees it.  Each input is the byte stream of one TCP
 * connection to a running shoal_rpc_server on loopback: Thrift messages
 * through ShoalThriftSocket, ShoalThriftProtocol, the generated processor
 * and shoal's handler (token, slice and length checks) into a small
 * ShoalServer.  The first byte picks the server: ASYNC with every slice
 * hosted, or SYNC (two contributors) hosting only the even slices.
 *
 * The public API is all this needs, so the whole server path is fuzzed,
 * threads included (a connection thread per input).  A pull may ask to
 * wait for a version that never comes (up to a day, by design): when no
 * answer came within 20 ms the harness puts version 2^62 (the most a put
 * may set) into every hosted slice, which wakes it.  Every input starts
 * from the same values and versions; a SYNC server that an input gave a
 * stop step (stop_at, which lasts) is replaced by a fresh one.  The
 * connection's thread is joined before the input returns, and the
 * servers are stopped at exit (see stop_targets). */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <unistd.h>

#include <arpa/inet.h>

#include "fuzz_common.h"
#include "server/rpc_server.h"
#include "server/server.h"

#define TOKEN "fuzz-token"
#define FLOATS 96

typedef struct {
  ShoalServer *server;
  ShoalRpcServer *rpc;
  int port;
  int nslices;
  ShoalUpdateMode mode;
  int contributors;
  gboolean host_even;
} Target;

static ShoalParamStore *layout;
static Target targets[2];

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static void
target_start (Target *t, ShoalUpdateMode mode, int contributors, int nslices, gboolean host_even)
{
  t->mode = mode;
  t->contributors = contributors;
  t->host_even = host_even;
  ShoalUpdaterConf upd;
  ShoalServerOptions sopts = { .mode = mode, .sync_contributors = contributors, .nslices = nslices };
  ShoalRpcServerOptions ropts = { 0 };
  GError *error = NULL;

  shoal_updater_conf_defaults (&upd, SHOAL_UPDATER_SGD);
  t->server = shoal_server_new (layout, &upd, &sopts, NULL);
  t->nslices = nslices;
  for (int i = 0; i < nslices; i++)
    if (!host_even || i % 2 == 0)
      shoal_server_host_slice (t->server, i);
  ropts.bind_address = "127.0.0.1";
  ropts.token = TOKEN;
  ropts.io_timeout_ms = 2000;
  ropts.expected_shutdowns = 1;
  /* no call thread outlives its input (see the reap loop below) */
  ropts.threads_end_when_idle = TRUE;
  t->rpc = shoal_rpc_server_start (t->server, &ropts, &error);
  if (t->rpc == NULL)
    g_error ("fuzz: cannot start the rpc server: %s", error->message);
  t->port = shoal_rpc_server_port (t->rpc);
  for (int s = 0; s < nslices && fuzz_verbose; s++)
    {
      size_t begin, end;
      shoal_server_slice_range (t->server, s, &begin, &end);
      g_printerr ("fuzz: %s slice %d: [%zu, %zu)%s\n", mode == SHOAL_UPDATE_SYNC ? "sync" : "async",
                  s, begin, end, shoal_server_hosts (t->server, s) ? "" : " not hosted");
    }
}

/* At exit, before LeakSanitizer's last check: the acceptor threads end,
 * and GLib frees their slice magazines.  LeakSanitizer (clang 14, glibc
 * 2.36) reported the magazine of a live acceptor started after a target's
 * restart (GLib's ThreadMemory, 2032 bytes, from g_malloc0 under
 * g_slice_alloc, held only in the thread's GPrivate slot) as a direct
 * leak: seen in every run with restarts (at ~30 k runs mid-run, or at
 * exit), never without restarts (115 k runs), never once the targets are
 * stopped first (2 runs of 80-92 k runs with restarts); a real leak would
 * survive the stop and grow with the restarts, this is one block per run. */
static void
stop_targets (void)
{
  for (gsize i = 0; i < G_N_ELEMENTS (targets); i++)
    {
      shoal_rpc_server_stop (targets[i].rpc);
      shoal_server_free (targets[i].server);
      targets[i].rpc = NULL;
      targets[i].server = NULL;
    }
  shoal_param_store_free (layout);
  layout = NULL;
}

static void
init (void)
{
  ShoalInitSpec spec = { 0 };
  ShoalShape w = shoal_shape_make (2, 4, FLOATS / 8);
  ShoalShape b = shoal_shape_make (1, FLOATS / 2);

  fuzz_common_init ();
  layout = shoal_param_store_new ();
  shoal_param_store_declare (layout, "fc/weight", &w, &spec, 4, FLOATS / 8, 1.0f, 1.0f);
  shoal_param_store_declare (layout, "fc/bias", &b, &spec, 1, 1, 1.0f, 1.0f);
  g_assert_true (shoal_param_store_allocate (layout, NULL));
  for (size_t i = 0; i < layout->total; i++)
    layout->values[i] = (float) i;
  target_start (&targets[0], SHOAL_UPDATE_ASYNC, 1, 3, FALSE);
  target_start (&targets[1], SHOAL_UPDATE_SYNC, 2, 4, TRUE);
  atexit (stop_targets);
}

/* version SHOAL_SERVER_MAX_VERSION (wake) or 0 with the initial values (reset) */
static void
put_all (Target *t, gint64 version)
{
  for (int s = 0; s < t->nslices; s++)
    if (shoal_server_hosts (t->server, s))
      {
        size_t begin, end;
        GError *error = NULL;
        shoal_server_slice_range (t->server, s, &begin, &end);
        if (!shoal_server_put (t->server, s, layout->values + begin, end - begin, version, &error))
          g_error ("fuzz: put slice %d: %s", s, error->message);
      }
}

static int
connect_to (int port)
{
  struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons ((guint16) port) };
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  addr.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  if (fd < 0)
    g_error ("fuzz: socket: %s", g_strerror (errno));
  if (connect (fd, (struct sockaddr *) &addr, sizeof addr) != 0)
    {
      /* libFuzzer's timer signals interrupt connect, which goes on alone */
      int err = errno;
      socklen_t len = sizeof err;
      struct pollfd p = { fd, POLLOUT, 0 };
      while (err == EINTR && (poll (&p, 1, -1) >= 0 || errno == EINTR))
        if (p.revents != 0 && getsockopt (fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
          err = errno;
      if (err != 0)
        g_error ("fuzz: connecting to port %d: %s", port, g_strerror (err));
    }
  return fd;
}

/* Reads replies until the server closes; FALSE when 20 ms passed without
 * a byte (a pull waiting for its version, or a slow thread). */
static gboolean
drain (int fd, size_t *got)
{
  char buf[4096];
  for (;;)
    {
      struct pollfd p = { fd, POLLIN, 0 };
      int r = poll (&p, 1, 20);
      if (r == 0)
        return FALSE;
      if (r < 0 && errno == EINTR)
        continue;
      ssize_t n = recv (fd, buf, sizeof buf, 0);
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
        return TRUE;
      if (n > 0)
        *got += (size_t) n;
    }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  if (layout == NULL)
    init ();
  if (size < 1)
    return 0;
  Target *t = &targets[data[0] & 1];
  int fd = connect_to (t->port);

  for (size_t off = 1; off < size;)
    {
      ssize_t n = send (fd, data + off, size - off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;   /* the server dropped the connection: a refused message */
      off += (size_t) n;
    }
  shutdown (fd, SHUT_WR);
  size_t got = 0;
  int round = 0;
  for (; !drain (fd, &got); round++)
    {
      if (round == 200)
        g_error ("fuzz: the server neither answered nor closed after %d wake-ups", round);
      put_all (t, SHOAL_SERVER_MAX_VERSION);
    }
  close (fd);
  /* the connection and the call thread that served it are gone before
   * the next input, so no thread of an earlier input is still ending
   * while the next runs or while libFuzzer's leak check looks at the
   * heap (a pool thread that lingered and ended later was reported as
   * GLib's slice cache lost: fuzz/README.md); it also keeps the run 2-4x
   * faster than threads piling up */
  for (int spins = 0; shoal_rpc_server_reap (t->rpc) > 0; spins++)
    {
      if (spins == 10000)
        g_error ("fuzz: the connection or its call thread did not end within 10 s");
      g_usleep (1000);
    }
  if (fuzz_verbose)
    g_printerr ("fuzz: %zu bytes of replies, %d wake-ups\n", got, round);
  put_all (t, 0);
  if (shoal_server_stop_step (t->server) >= 0)
    {
      shoal_rpc_server_stop (t->rpc);
      shoal_server_free (t->server);
      target_start (t, t->mode, t->contributors, t->nslices, t->host_even);
    }
  return 0;
}
