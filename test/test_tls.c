/* TLS on the parameter service's links (rpc/tls.h): a job's credentials
 * load and are checked at load; calls round-trip through TLS; a peer
 * with no certificate, a self-signed one, an expired one, another job's,
 * or none of TLS at all is refused, with an error on both sides that
 * says why; and the bytes on the wire of a push and a pull, captured by
 * a relay between client and server, hold neither the job token nor a
 * run of the floats sent (the same relay sees both in clear without
 * TLS, so the check can fail).  Everything runs on loopback with
 * [tls] mode = all; every wait is bounded. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <glib/gstdio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "core/error.h"
#include "rpc/tls.h"
#include "rpc/tls_certs.h"
#include "server/rpc_client.h"
#include "server/rpc_server.h"
#include "server/server.h"
#include "support/slow_reader.h"
#include "support/time_scale.h"

#define TOKEN "tls-job-token-5f3a9c"
#define FLOATS 65536

/* ---- the listener's lines, kept ------------------------------------------- */

static GMutex log_lock;
static GString *server_log;

static void
log_handler (const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer data)
{
  if (message != NULL && (level & (G_LOG_LEVEL_MESSAGE | G_LOG_LEVEL_WARNING)))
    {
      g_mutex_lock (&log_lock);
      g_string_append_printf (server_log, "%s\n", message);
      g_mutex_unlock (&log_lock);
      if (level & G_LOG_LEVEL_MESSAGE)
        return;
    }
  if (level & G_LOG_LEVEL_WARNING)
    return;   /* kept above; a refused peer may cost the server a warning */
  g_log_default_handler (domain, level, message, data);
}

/* Waits (bounded) for a server line holding `what`; clears the log. */
static void
assert_server_said (const char *what)
{
  gboolean seen = FALSE;
  for (int i = 0; i < 200 && !seen; i++)
    {
      g_mutex_lock (&log_lock);
      seen = strstr (server_log->str, what) != NULL;
      g_mutex_unlock (&log_lock);
      if (!seen)
        g_usleep (10000);
    }
  if (!seen)
    g_error ("the server never said \"%s\"; it said:\n%s", what, server_log->str);
  g_mutex_lock (&log_lock);
  g_string_truncate (server_log, 0);
  g_mutex_unlock (&log_lock);
}

/* ---- a job's credentials ---------------------------------------------------- */

typedef struct {
  char *dir;
  char *ca, *cert[3], *key[3];   /* ranks 0, 1; 2: expired */
  char *other_ca, *other_cert, *other_key;   /* another job's CA and its rank 0 */
  char *self_cert, *self_key;    /* a self-signed certificate (a CA of its own) */
} Creds;

static void
creds_make (Creds *c)
{
  GError *error = NULL;
  c->dir = g_dir_make_tmp ("shoal-tls-XXXXXX", &error);
  g_assert_no_error (error);
  ShoalTlsIssuer *ca = shoal_tls_issuer_new ("job-a", 1, &error);
  g_assert_no_error (error);
  c->ca = shoal_tls_ca_path (c->dir);
  g_assert_true (shoal_tls_issuer_write (ca, c->ca, NULL, &error));
  for (int r = 0; r < 3; r++)
    {
      c->cert[r] = shoal_tls_cert_path (c->dir, r);
      c->key[r] = shoal_tls_key_path (c->dir, r);
      gint64 from = r < 2 ? -60 : -2 * 86400, until = r < 2 ? 86400 : -86400;
      g_assert_true (shoal_tls_issuer_issue (ca, r, from, until, c->cert[r], c->key[r], &error));
      g_assert_no_error (error);
    }
  shoal_tls_issuer_free (ca);

  ShoalTlsIssuer *other = shoal_tls_issuer_new ("job-b", 1, &error);
  g_assert_no_error (error);
  c->other_ca = g_build_filename (c->dir, "other-ca.crt", NULL);
  c->other_cert = g_build_filename (c->dir, "other-0.crt", NULL);
  c->other_key = g_build_filename (c->dir, "other-0.key", NULL);
  g_assert_true (shoal_tls_issuer_write (other, c->other_ca, NULL, &error));
  g_assert_true (shoal_tls_issuer_issue (other, 0, -60, 86400, c->other_cert, c->other_key, &error));
  shoal_tls_issuer_free (other);

  ShoalTlsIssuer *self = shoal_tls_issuer_new ("job-a", 1, &error);
  c->self_cert = g_build_filename (c->dir, "self.crt", NULL);
  c->self_key = g_build_filename (c->dir, "self.key", NULL);
  g_assert_true (shoal_tls_issuer_write (self, c->self_cert, c->self_key, &error));
  g_assert_no_error (error);
  shoal_tls_issuer_free (self);
}

static void
creds_free (Creds *c)
{
  char *files[] = { c->ca, c->cert[0], c->cert[1], c->cert[2], c->key[0], c->key[1], c->key[2], c->other_ca,
                    c->other_cert, c->other_key, c->self_cert, c->self_key };
  for (gsize i = 0; i < G_N_ELEMENTS (files); i++)
    {
      g_unlink (files[i]);
      g_free (files[i]);
    }
  g_rmdir (c->dir);
  g_free (c->dir);
}

static ShoalTls *
tls_of (ShoalTlsMode mode, const char *ca, const char *cert, const char *key)
{
  GError *error = NULL;
  ShoalTls *tls = shoal_tls_new (mode, ca, cert, key, &error);
  g_assert_no_error (error);
  g_assert_nonnull (tls);
  return tls;
}

/* ---- a parameter server on loopback --------------------------------------- */

typedef struct {
  ShoalParamStore *layout;
  ShoalServer *server;
  ShoalRpcServer *rpc;
  int port;
} Env;

/* Serves one slice of floats zeros (io_timeout_ms bounds each socket's
 * send or receive); the process's TLS is `tls` (taken). */
static void
env_start_sized (Env *env, ShoalTls *tls, size_t floats, gint64 io_timeout_ms)
{
  ShoalInitSpec init = { 0 };
  ShoalUpdaterConf upd;
  ShoalServerOptions sopts = { .mode = SHOAL_UPDATE_ASYNC, .sync_contributors = 1, .nslices = 1 };
  GError *error = NULL;

  shoal_tls_set_default (tls);
  env->layout = shoal_param_store_new ();
  ShoalShape s = shoal_shape_make (1, (int) floats);
  shoal_param_store_declare (env->layout, "w", &s, &init, 1, 1, 1.0f, 1.0f);
  g_assert_true (shoal_param_store_allocate (env->layout, NULL));
  memset (env->layout->values, 0, floats * sizeof (float));
  shoal_updater_conf_defaults (&upd, SHOAL_UPDATER_SGD);
  upd.schedule.lr = 1.0f;
  env->server = shoal_server_new (env->layout, &upd, &sopts, NULL);
  shoal_server_host_slice (env->server, 0);
  ShoalRpcServerOptions ropts = { .bind_address = "127.0.0.1", .token = TOKEN, .io_timeout_ms = io_timeout_ms };
  env->rpc = shoal_rpc_server_start (env->server, &ropts, &error);
  g_assert_no_error (error);
  env->port = shoal_rpc_server_port (env->rpc);
}

/* One slice of FLOATS floats, 3 s per send or receive. */
static void
env_start (Env *env, ShoalTls *tls)
{
  env_start_sized (env, tls, FLOATS, 3000);
}

static void
env_stop (Env *env)
{
  shoal_rpc_server_stop (env->rpc);
  shoal_server_free (env->server);
  shoal_param_store_free (env->layout);
  shoal_tls_set_default (NULL);
}

/* A client of port through tls; NULL with *error where it cannot even connect. */
static ShoalRpcClient *
client_of (int port, ShoalTls *tls)
{
  ShoalRpcClientOptions o = { .host = "127.0.0.1", .port = port, .token = TOKEN, .timeout_ms = 3000,
                              .connect_retries = 1, .tls = tls };
  GError *error = NULL;
  ShoalRpcClient *c = shoal_rpc_client_connect (&o, &error);
  g_assert_no_error (error);
  return c;
}

/* A recognisable gradient: no two neighbouring floats alike. */
static void
gradient (float *g, size_t n)
{
  for (size_t i = 0; i < n; i++)
    g[i] = 0.001f * (float) (i % 9973) + 0.5f;
}

/* A push through client fails, its error holding `says`. */
static void
assert_push_refused (ShoalRpcClient *client, const char *says)
{
  GError *error = NULL;
  float g[16] = { 0 };
  g_assert_false (shoal_rpc_client_push (client, 0, g, 16, 0, &error));
  g_assert_nonnull (error);
  if (strstr (error->message, says) == NULL)
    g_error ("the refused client says \"%s\", not \"%s\"", error->message, says);
  g_error_free (error);
}

/* ---- tests ------------------------------------------------------------------ */

static void
test_load (void)
{
  Creds c;
  GError *error = NULL;
  creds_make (&c);
  ShoalTls *tls = shoal_tls_new (SHOAL_TLS_HOSTS, c.ca, c.cert[1], c.key[1], &error);
  g_assert_no_error (error);
  g_assert_cmpint (shoal_tls_mode (tls), ==, SHOAL_TLS_HOSTS);
  shoal_tls_free (tls);

  struct { const char *cert, *key, *says; } bad[] = {
    { c.cert[2], c.key[2], "expired" },
    { c.other_cert, c.other_key, "not issued by the job's CA" },
    { c.self_cert, c.self_key, "not issued by the job's CA" },
    { c.cert[0], c.key[1], "cannot load this rank's key for" },
    /* a missing file reads as one (it read "OpenSSL error 80000002; system lib; system lib") */
    { "/nonexistent/rank.crt", c.key[0],
      "/nonexistent/rank.crt: cannot load this rank's certificate: No such file or directory" },
    { c.cert[0], "/nonexistent/rank.key",
      "No such file or directory" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_assert_null (shoal_tls_new (SHOAL_TLS_HOSTS, c.ca, bad[i].cert, bad[i].key, &error));
      g_assert_nonnull (error);
      if (strstr (error->message, bad[i].says) == NULL)
        g_error ("loading %s: \"%s\" does not say \"%s\"", bad[i].cert, error->message, bad[i].says);
      g_clear_error (&error);
    }
  creds_free (&c);
}

static void
test_round_trip (void)
{
  Creds c;
  Env env;
  GError *error = NULL;
  creds_make (&c);
  env_start (&env, tls_of (SHOAL_TLS_ALL, c.ca, c.cert[0], c.key[0]));
  ShoalTls *mine = tls_of (SHOAL_TLS_ALL, c.ca, c.cert[1], c.key[1]);
  ShoalRpcClient *client = client_of (env.port, mine);
  float *g = g_new (float, FLOATS), *got = g_new (float, FLOATS);
  gradient (g, FLOATS);
  gint64 version = -1;
  for (int step = 0; step < 3; step++)
    {
      g_assert_true (shoal_rpc_client_push_pull (client, 0, g, got, FLOATS, step, &version, &error));
      g_assert_no_error (error);
      g_assert_cmpint (version, ==, step + 1);
      for (size_t i = 0; i < FLOATS; i++)
        g_assert_cmpfloat (got[i], ==, -(float) (step + 1) * g[i]);
    }
  g_free (g);
  g_free (got);
  shoal_rpc_client_free (client);
  shoal_tls_free (mine);
  env_stop (&env);
  creds_free (&c);
}

/* A TLS client made by hand, as an intruder would: its certificate (or
 * none) and no check of the server's.  Returns TRUE when a call's
 * worth of bytes went through and an answer came back. */
static gboolean
intruder_gets_in (int port, const char *cert, const char *key)
{
  SSL_CTX *ctx = SSL_CTX_new (TLS_client_method ());
  g_assert_nonnull (ctx);
  if (cert != NULL)
    {
      g_assert_cmpint (SSL_CTX_use_certificate_file (ctx, cert, SSL_FILETYPE_PEM), ==, 1);
      g_assert_cmpint (SSL_CTX_use_PrivateKey_file (ctx, key, SSL_FILETYPE_PEM), ==, 1);
    }
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons ((guint16) port) };
  inet_pton (AF_INET, "127.0.0.1", &a.sin_addr);
  struct timeval tv = { 3, 0 };
  setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  g_assert_cmpint (connect (fd, (struct sockaddr *) &a, sizeof a), ==, 0);
  SSL *ssl = SSL_new (ctx);
  SSL_set_fd (ssl, fd);
  /* a heartbeat-sized message; the answer, if any, is what matters */
  static const guint8 call[] = { 0x80, 1, 0, 1, 0, 0, 0, 5, 's', 't', 'a', 't', 's', 0, 0, 0, 1, 0 };
  guint8 reply[64];
  size_t n = 0;
  gboolean in = SSL_connect (ssl) == 1 && SSL_write_ex (ssl, call, sizeof call, &n) == 1
                && SSL_read_ex (ssl, reply, sizeof reply, &n) == 1;
  ERR_clear_error ();
  SSL_free (ssl);
  close (fd);
  SSL_CTX_free (ctx);
  return in;
}

static void
test_refusals (void)
{
  Creds c;
  Env env;
  creds_make (&c);
  env_start (&env, tls_of (SHOAL_TLS_ALL, c.ca, c.cert[0], c.key[0]));

  /* by hand: no certificate, self-signed, expired, another job's */
  g_assert_false (intruder_gets_in (env.port, NULL, NULL));
  assert_server_said ("did not return a certificate");
  g_assert_false (intruder_gets_in (env.port, c.self_cert, c.self_key));
  assert_server_said ("the peer's certificate is refused: self-signed, not issued by this job's CA");
  g_assert_false (intruder_gets_in (env.port, c.cert[2], c.key[2]));
  assert_server_said ("the peer's certificate is refused: certificate has expired");
  g_assert_false (intruder_gets_in (env.port, c.other_cert, c.other_key));
  assert_server_said ("the peer's certificate is refused: not issued by this job's CA");
  /* the same certificate as the job's own: it gets in (the refusals above are the certificates') */
  g_assert_true (intruder_gets_in (env.port, c.cert[1], c.key[1]));

  /* shoal's own client with another job's credentials: it refuses the
   * server's certificate, and the server hears of it */
  ShoalTls *other = tls_of (SHOAL_TLS_ALL, c.other_ca, c.other_cert, c.other_key);
  ShoalRpcClient *client = client_of (env.port, other);
  assert_push_refused (client, "TLS handshake: the peer's certificate is refused: not issued by this job's CA");
  assert_server_said ("the peer refused this rank");
  shoal_rpc_client_free (client);
  shoal_tls_free (other);

  /* a plain-TCP client: the server answers that it takes TLS only */
  ShoalTls *plain = tls_of (SHOAL_TLS_OFF, c.ca, c.cert[1], c.key[1]);
  client = client_of (env.port, plain);
  assert_push_refused (client, "takes TLS connections only");
  assert_server_said ("refused a plain (unencrypted) call");
  shoal_rpc_client_free (client);
  /* each refusal counted for its host, the last named: what a rank lost
   * without a word is reported with (run/membership.c) */
  const char *const loopback[] = { "127.0.0.1", NULL }, *const elsewhere[] = { "127.0.0.2", NULL };
  char *refused = shoal_rpc_server_refusals (env.rpc, loopback);
  g_assert_nonnull (refused);
  char *end = NULL;
  guint64 count = g_ascii_strtoull (refused, &end, 10);
  if (count < 6 || !g_str_has_prefix (end, " from 127.0.0.1 (the last: refused a plain (unencrypted) call"))
    g_error ("the server's refusals from 127.0.0.1 read \"%s\"", refused);
  g_free (refused);
  g_assert_null (shoal_rpc_server_refusals (env.rpc, elsewhere));
  env_stop (&env);

  /* a TLS client at a plain server */
  env_start (&env, NULL);
  ShoalTls *mine = tls_of (SHOAL_TLS_ALL, c.ca, c.cert[1], c.key[1]);
  client = client_of (env.port, mine);
  assert_push_refused (client, "TLS handshake: connection closed by the peer (one that runs no TLS on this link");
  /* the server may have [tls] itself, in another mode: it does not say it has none */
  assert_server_said ("a TLS hello on a plain connection: the peer runs TLS on this link, this rank does not");
  shoal_rpc_client_free (client);
  shoal_tls_free (mine);
  shoal_tls_free (plain);
  env_stop (&env);
  creds_free (&c);
}

/* ---- a relay that keeps what crosses it ----------------------------------- */

typedef struct {
  int listen_fd, port, server_port;
  GByteArray *up, *down;   /* client to server, server to client */
} Relay;

static gboolean
relay_copy (int from, int to, GByteArray *keep)
{
  guint8 buf[65536];
  gssize n = recv (from, buf, sizeof buf, 0);
  if (n <= 0)
    return FALSE;
  g_byte_array_append (keep, buf, (guint) n);
  for (gssize off = 0; off < n;)
    {
      gssize w = send (to, buf + off, (size_t) (n - off), MSG_NOSIGNAL);
      if (w <= 0)
        return FALSE;
      off += w;
    }
  return TRUE;
}

/* One connection, both ways, until either end closes (or 20 s pass). */
static gpointer
relay_main (gpointer data)
{
  Relay *r = data;
  struct pollfd lp = { r->listen_fd, POLLIN, 0 };
  if (poll (&lp, 1, 20000) != 1)
    return NULL;
  int a = accept (r->listen_fd, NULL, NULL);
  int b = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in s = { .sin_family = AF_INET, .sin_port = htons ((guint16) r->server_port) };
  inet_pton (AF_INET, "127.0.0.1", &s.sin_addr);
  g_assert_cmpint (connect (b, (struct sockaddr *) &s, sizeof s), ==, 0);
  gint64 until = g_get_monotonic_time () + shoal_test_scaled_us (20 * G_USEC_PER_SEC);
  for (gboolean open = TRUE; open && g_get_monotonic_time () < until;)
    {
      struct pollfd p[2] = { { a, POLLIN, 0 }, { b, POLLIN, 0 } };
      if (poll (p, 2, 1000) <= 0)
        continue;
      if (p[0].revents)
        open = relay_copy (a, b, r->up);
      if (open && p[1].revents)
        open = relay_copy (b, a, r->down);
    }
  close (a);
  close (b);
  return NULL;
}

static gboolean
holds (const GByteArray *bytes, const void *what, gsize len)
{
  return memmem (bytes->data, bytes->len, what, len) != NULL;
}

/* Whether any 16-byte run of v (at 64 places) is in bytes. */
static gboolean
holds_floats (const GByteArray *bytes, const float *v, size_t n)
{
  for (size_t i = 0; i + 4 <= n; i += n / 64)
    if (holds (bytes, v + i, 4 * sizeof (float)))
      return TRUE;
  return FALSE;
}

/* Pushes and pulls through the relay; TRUE when the wire held the token
 * or the floats, either way. */
static gboolean
wire_shows_secrets (ShoalTls *server_tls, ShoalTls *client_tls)
{
  Env env;
  GError *error = NULL;
  env_start (&env, server_tls);
  Relay r = { .server_port = env.port, .up = g_byte_array_new (), .down = g_byte_array_new () };
  r.listen_fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = { .sin_family = AF_INET };
  inet_pton (AF_INET, "127.0.0.1", &a.sin_addr);
  socklen_t alen = sizeof a;
  g_assert_cmpint (bind (r.listen_fd, (struct sockaddr *) &a, sizeof a), ==, 0);
  g_assert_cmpint (listen (r.listen_fd, 1), ==, 0);
  getsockname (r.listen_fd, (struct sockaddr *) &a, &alen);
  r.port = ntohs (a.sin_port);
  GThread *t = g_thread_new ("relay", relay_main, &r);

  ShoalRpcClient *client = client_of (r.port, client_tls);
  float *g = g_new (float, FLOATS), *got = g_new (float, FLOATS);
  gradient (g, FLOATS);
  gint64 version = -1;
  g_assert_true (shoal_rpc_client_push (client, 0, g, FLOATS, 0, &error));
  g_assert_no_error (error);
  g_assert_true (shoal_rpc_client_pull (client, 0, got, FLOATS, 1, &version, &error));
  g_assert_no_error (error);
  shoal_rpc_client_free (client);   /* the relay ends with the connection */
  g_thread_join (t);
  close (r.listen_fd);

  g_assert_cmpuint (r.up->len, >, FLOATS * sizeof (float));
  g_assert_cmpuint (r.down->len, >, FLOATS * sizeof (float));
  gboolean shows = holds (r.up, TOKEN, strlen (TOKEN)) || holds_floats (r.up, g, FLOATS)
                   || holds_floats (r.down, got, FLOATS);
  g_free (g);
  g_free (got);
  g_byte_array_unref (r.up);
  g_byte_array_unref (r.down);
  env_stop (&env);
  return shows;
}

static void
put_be (GByteArray *b, guint64 v, int bytes)
{
  for (int i = bytes - 1; i >= 0; i--)
    {
      guint8 x = (guint8) (v >> (8 * i));
      g_byte_array_append (b, &x, 1);
    }
}

/* An ASYNC pull reply goes out sealed straight from the server's values
 * (shoal_thrift_socket_write_pinned through TLS) while no update waits:
 * a TLS client that asks and then does not read (its receive buffer
 * tiny, the reply 16 MiB) holds up no push - the reply gives the values
 * up, copying what it had not sealed - and still gets the values of
 * version 0, whole. */
static void
test_pinned_reply_gives_way (void)
{
  enum { N = 4 << 20 };
  Creds c;
  Env env;
  GError *error = NULL;
  creds_make (&c);
  env_start_sized (&env, tls_of (SHOAL_TLS_ALL, c.ca, c.cert[0], c.key[0]), N, 30000);
  ShoalTls *mine = tls_of (SHOAL_TLS_ALL, c.ca, c.cert[1], c.key[1]);

  int fd = shoal_test_slow_reader (env.port);
  ShoalTlsLink *stuck = shoal_tls_link_new (mine, fd);
  g_assert_true (shoal_tls_link_ready (stuck, FALSE, &error));
  g_assert_no_error (error);
  /* pull(token, slice 0, min_version 0, wait 2000 ms) as the binary protocol writes it */
  GByteArray *m = g_byte_array_new ();
  put_be (m, 0x80010001u, 4);
  put_be (m, 4, 4);
  g_byte_array_append (m, (const guint8 *) "pull", 4);
  put_be (m, 1, 4);
  put_be (m, 11, 1), put_be (m, 1, 2), put_be (m, strlen (TOKEN), 4);
  g_byte_array_append (m, (const guint8 *) TOKEN, (guint) strlen (TOKEN));
  put_be (m, 8, 1), put_be (m, 2, 2), put_be (m, 0, 4);
  put_be (m, 10, 1), put_be (m, 3, 2), put_be (m, 0, 8);
  put_be (m, 10, 1), put_be (m, 4, 2), put_be (m, 2000, 8);
  put_be (m, 0, 1);
  g_assert_true (shoal_tls_link_write (stuck, m->data, m->len, &error));
  g_assert_no_error (error);
  g_byte_array_unref (m);
  /* the reply holds the values once the server counted them out */
  ShoalServerStats st = { 0 };
  for (int i = 0; i < 10000 && st.bytes_out < (gint64) N * 4; i++)
    {
      g_usleep (1000);
      shoal_server_stats (env.server, &st);
    }
  g_assert_cmpint (st.bytes_out, >=, (gint64) N * 4);

  /* a push goes through within its client's 3 s while the reply is stuck */
  ShoalRpcClient *client = client_of (env.port, mine);
  float *g = g_new (float, N), *got = g_new (float, N);
  gradient (g, N);
  g_assert_true (shoal_rpc_client_push (client, 0, g, N, 0, &error) || error != NULL);
  g_assert_no_error (error);
  g_assert_cmpint (shoal_server_slice_version (env.server, 0), ==, 1);

  /* the stuck reply: header, result struct, version i64 0, the N floats, two stops */
  gsize len = 16 + 3 + 11 + 7 + (gsize) N * 4 + 2;
  guint8 *reply = g_malloc (len);
  g_assert_cmpint (shoal_tls_link_read (stuck, reply, len, TRUE, &error), ==, (gssize) len);
  g_assert_no_error (error);
  static const guint8 version0[] = { 10, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0 }, values[] = { 11, 0, 2 };
  g_assert_cmpmem (reply + 19, 11, version0, 11);
  g_assert_cmpmem (reply + 30, 3, values, 3);
  guint32 nbytes;   /* the list's length, at an odd offset: copied, not loaded in place */
  memcpy (&nbytes, reply + 33, sizeof nbytes);
  g_assert_cmpuint (GUINT32_FROM_BE (nbytes), ==, (guint) N * 4);
  for (gsize i = 0; i < (gsize) N * 4; i++)
    if (reply[37 + i] != 0)
      g_error ("byte %zu of the stuck reply is %d: not version 0's values (a torn reply)", i, reply[37 + i]);
  shoal_tls_link_free (stuck);
  close (fd);

  gint64 version = -1;
  g_assert_true (shoal_rpc_client_pull (client, 0, got, N, 0, &version, &error));
  g_assert_no_error (error);
  g_assert_cmpint (version, ==, 1);
  for (size_t i = 0; i < N; i++)
    g_assert_cmpfloat (got[i], ==, -g[i]);
  g_free (reply);
  g_free (g);
  g_free (got);
  shoal_rpc_client_free (client);
  env_stop (&env);
  shoal_tls_free (mine);
  creds_free (&c);
}

static void
test_wire_sealed (void)
{
  Creds c;
  creds_make (&c);
  /* in clear the relay sees them: the check below can fail */
  g_assert_true (wire_shows_secrets (NULL, NULL));
  ShoalTls *mine = tls_of (SHOAL_TLS_ALL, c.ca, c.cert[1], c.key[1]);
  g_assert_false (wire_shows_secrets (tls_of (SHOAL_TLS_ALL, c.ca, c.cert[0], c.key[0]), mine));
  shoal_tls_free (mine);
  creds_free (&c);
}

/* shoal_tls_wanted: in mode hosts, loopback and one address at both ends
 * are one host; mode all wants every link. */
static void
test_wanted (void)
{
  Creds c;
  creds_make (&c);
  ShoalTls *hosts = tls_of (SHOAL_TLS_HOSTS, c.ca, c.cert[0], c.key[0]);
  ShoalTls *all = tls_of (SHOAL_TLS_ALL, c.ca, c.cert[0], c.key[0]);
  int l = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = { .sin_family = AF_INET };
  inet_pton (AF_INET, "127.0.0.1", &a.sin_addr);
  socklen_t alen = sizeof a;
  g_assert_cmpint (bind (l, (struct sockaddr *) &a, sizeof a), ==, 0);
  g_assert_cmpint (listen (l, 1), ==, 0);
  getsockname (l, (struct sockaddr *) &a, &alen);
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  g_assert_cmpint (connect (fd, (struct sockaddr *) &a, sizeof a), ==, 0);
  g_assert_false (shoal_tls_wanted (hosts, fd));
  g_assert_true (shoal_tls_wanted (all, fd));
  g_assert_false (shoal_tls_wanted (NULL, fd));
  close (fd);
  close (l);
  shoal_tls_free (hosts);
  shoal_tls_free (all);
  creds_free (&c);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  server_log = g_string_new (NULL);
  g_log_set_always_fatal (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL);
  g_log_set_default_handler (log_handler, NULL);
  g_test_add_func ("/tls/load", test_load);
  g_test_add_func ("/tls/wanted", test_wanted);
  g_test_add_func ("/tls/round-trip", test_round_trip);
  g_test_add_func ("/tls/refusals", test_refusals);
  g_test_add_func ("/tls/wire-sealed", test_wire_sealed);
  g_test_add_func ("/tls/pinned-reply-gives-way", test_pinned_reply_gives_way);
  return g_test_run ();
}
