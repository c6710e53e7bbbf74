/* TLS on the links between hosts; see rpc/tls.h and docs/SECURITY.md. */
#include "rpc/tls.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "core/error.h"

/* TLS 1.3 only: its suites are all AEAD with forward secrecy.  AES-GCM
 * first (AES-NI makes it the fastest here), ChaCha20 for CPUs without. */
#define SUITES "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
#define GROUPS "X25519:P-256"
/* how long a refused plain caller's request is read and dropped, so that
 * the reply saying why reaches it before the connection resets */
#define DRAIN_MS 500
#define DRAIN_BYTES (64u << 20)

struct _ShoalTls {
  ShoalTlsMode mode;
  SSL_CTX *ctx;
};

/* Records are at most 16 KiB: sent one by one, a 4 MiB payload would cost
 * 256 send calls.  They gather here and leave together. */
#define SEND_BUF (256 * 1024)
/* and arrive two at a time: with read-ahead OpenSSL moves what is left in
 * its buffer to the front before each record, so a buffer of many records
 * moves each byte many times (256 KiB: 8.5 ms of CPU per 4 MiB push+pull,
 * 34.5 KiB: 7.3 ms, bench/README.md) */
#define READ_BUF (2 * (16 * 1024 + 256) + 1024)

struct _ShoalTlsLink {
  SSL *ssl;
  int fd;
  gboolean ready;
  gint64 timeout_ms;
  int last_errno;   /* of the last failed send or recv below TLS */
  guint8 *out;      /* sealed records not yet sent: out[out_sent .. out_len) */
  gsize out_len, out_sent;
};

/* ---- errors ------------------------------------------------------------- */

/* OpenSSL's queue as one line, emptied. */
static char *
openssl_reasons (void)
{
  GString *s = g_string_new (NULL);
  unsigned long e;
  while ((e = ERR_get_error ()) != 0)
    {
      /* a file that cannot be opened is a system error carrying errno
       * ("No such file or directory"), which OpenSSL names only "OpenSSL
       * error 80000002", followed by its own "system lib" lines */
      if (!ERR_SYSTEM_ERROR (e) && ERR_GET_REASON (e) == ERR_R_SYS_LIB)
        continue;
      const char *r = ERR_SYSTEM_ERROR (e) ? g_strerror (ERR_GET_REASON (e)) : ERR_reason_error_string (e);
      char *text = r != NULL ? g_strdup (r) : g_strdup_printf ("OpenSSL error %lx", e);
      if (strstr (s->str, text) == NULL)
        g_string_append_printf (s, "%s%s", s->len > 0 ? "; " : "", text);
      g_free (text);
    }
  return g_string_free (s, FALSE);
}

static void
set_openssl_error (GError **error, const char *format, ...) G_GNUC_PRINTF (2, 3);

static void
set_openssl_error (GError **error, const char *format, ...)
{
  va_list ap;
  va_start (ap, format);
  char *what = g_strdup_vprintf (format, ap);
  va_end (ap);
  char *why = openssl_reasons ();
  g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "%s%s%s", what, *why != '\0' ? ": " : "", why);
  g_free (what);
  g_free (why);
}

/* A certificate check's result in words, saying what matters here. */
static const char *
verify_words (long result)
{
  switch (result)
    {
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_CERT_SIGNATURE_FAILURE:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:   /* a chain up to another CA */
      return "not issued by this job's CA";
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
      return "self-signed, not issued by this job's CA";
    default:
      return X509_verify_cert_error_string (result);
    }
}

/* The error of a failed SSL_* call on link. */
static void
link_error (ShoalTlsLink *l, int ret, const char *doing, GError **error)
{
  int e = SSL_get_error (l->ssl, ret);
  long verify = SSL_get_verify_result (l->ssl);
  char *why = openssl_reasons ();

  if (verify != X509_V_OK)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "TLS %s: the peer's certificate is refused: %s", doing,
                 verify_words (verify));
  else if (e == SSL_ERROR_ZERO_RETURN)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "TLS %s: connection closed by the peer", doing);
  else if (e == SSL_ERROR_SSL && strstr (why, "alert") != NULL)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "TLS %s: the peer refused this rank (%s)", doing, why);
  else if (e == SSL_ERROR_SSL)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "TLS %s: %s", doing, *why != '\0' ? why : "protocol error");
  else if (l->last_errno == EAGAIN || l->last_errno == EWOULDBLOCK)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "TLS %s: timed out after %g s", doing,
                 (double) l->timeout_ms / 1000.0);
  else if (l->last_errno != 0 && l->last_errno != ECONNRESET && l->last_errno != EPIPE)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "TLS %s: %s", doing, g_strerror (l->last_errno));
  else if (!l->ready)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC,
                 "TLS %s: connection closed by the peer (one that runs no TLS on this link - another "
                 "[tls] mode -, or refused this rank's certificate)", doing);
  else
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "TLS %s: connection closed by the peer", doing);
  g_free (why);
}

/* ---- the socket below TLS: send and recv, never SIGPIPE, EINTR retried -- */

/* Sends the gathered records from out_sent on; without wait, stops at a
 * full socket (EAGAIN in last_errno) and keeps the rest for later. */
static gboolean
send_out_some (ShoalTlsLink *l, gboolean wait)
{
  while (l->out_sent < l->out_len)
    {
      gssize r = send (l->fd, l->out + l->out_sent, l->out_len - l->out_sent,
                       MSG_NOSIGNAL | (wait ? 0 : MSG_DONTWAIT));
      if (r < 0 && errno == EINTR)
        continue;
      if (r < 0)
        {
          l->last_errno = errno;
          if (!wait && (errno == EAGAIN || errno == EWOULDBLOCK))
            return FALSE;
          l->out_len = l->out_sent = 0;
          return FALSE;
        }
      l->out_sent += (gsize) r;
    }
  l->out_len = l->out_sent = 0;
  return TRUE;
}

static gboolean
send_out (ShoalTlsLink *l)
{
  return send_out_some (l, TRUE);
}

/* Gathers records; a full buffer leaves at once, the rest at the flush
 * that ends every write (shoal_tls_link_write) and handshake flight. */
static int
bio_write (BIO *bio, const char *buf, int len)
{
  ShoalTlsLink *l = BIO_get_data (bio);
  l->last_errno = 0;
  if (l->out_len + (gsize) len > SEND_BUF && !send_out (l))
    return -1;
  if ((gsize) len > SEND_BUF)
    {
      gssize r;
      while ((r = send (l->fd, buf, (size_t) len, MSG_NOSIGNAL)) < 0 && errno == EINTR)
        ;
      l->last_errno = r < 0 ? errno : 0;
      return (int) r;
    }
  memcpy (l->out + l->out_len, buf, (size_t) len);
  l->out_len += (gsize) len;
  return len;
}

static int
bio_read (BIO *bio, char *buf, int len)
{
  ShoalTlsLink *l = BIO_get_data (bio);
  gssize r;
  while ((r = recv (l->fd, buf, (size_t) len, 0)) < 0 && errno == EINTR)
    ;
  l->last_errno = r < 0 ? errno : 0;
  return (int) r;
}

static long
bio_ctrl (BIO *bio, int cmd, long num, void *ptr)
{
  (void) num;
  (void) ptr;
  if (cmd == BIO_CTRL_FLUSH)
    return send_out (BIO_get_data (bio)) ? 1 : -1;
  if (cmd == BIO_CTRL_WPENDING)
    {
      ShoalTlsLink *l = BIO_get_data (bio);
      return (long) (l->out_len - l->out_sent);
    }
  return cmd == BIO_CTRL_DUP ? 1 : 0;
}

static int
bio_create (BIO *bio)
{
  BIO_set_init (bio, 1);
  return 1;
}

static BIO_METHOD *
socket_method (void)
{
  static BIO_METHOD *method;
  static gsize once;
  if (g_once_init_enter (&once))
    {
      method = BIO_meth_new (BIO_get_new_index () | BIO_TYPE_SOURCE_SINK, "shoal socket");
      BIO_meth_set_write (method, bio_write);
      BIO_meth_set_read (method, bio_read);
      BIO_meth_set_ctrl (method, bio_ctrl);
      BIO_meth_set_create (method, bio_create);
      g_once_init_leave (&once, 1);
    }
  return method;
}

/* ---- the job's credentials ---------------------------------------------- */

/* The certificate against the CA, as a peer will check it. */
static gboolean
check_own_certificate (SSL_CTX *ctx, const char *cert_path, const char *ca_path, GError **error)
{
  X509 *cert = SSL_CTX_get0_certificate (ctx);
  X509_STORE_CTX *vc = X509_STORE_CTX_new ();
  gboolean ok = vc != NULL && X509_STORE_CTX_init (vc, SSL_CTX_get_cert_store (ctx), cert, NULL) == 1
                && X509_verify_cert (vc) == 1;
  if (!ok)
    {
      int err = vc != NULL ? X509_STORE_CTX_get_error (vc) : X509_V_ERR_OUT_OF_MEM;
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "%s: %s (CA %s)", cert_path,
                   err == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY || err == X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT
                     ? "not issued by the job's CA"
                     : X509_verify_cert_error_string (err),
                   ca_path);
      ERR_clear_error ();
    }
  X509_STORE_CTX_free (vc);
  return ok;
}

ShoalTls *
shoal_tls_new (ShoalTlsMode mode, const char *ca_path, const char *cert_path, const char *key_path,
               GError **error)
{
  g_return_val_if_fail (ca_path != NULL && cert_path != NULL && key_path != NULL, NULL);
  SSL_CTX *ctx = SSL_CTX_new (TLS_method ());
  if (ctx == NULL)
    {
      set_openssl_error (error, "TLS: cannot make a context");
      return NULL;
    }
  SSL_CTX_set_min_proto_version (ctx, TLS1_3_VERSION);
  SSL_CTX_set_max_proto_version (ctx, TLS1_3_VERSION);
  /* no session tickets: a server would send them unasked after the
   * handshake, and a client takes anything unasked on an idle connection
   * for its close (server/rpc_client.c) */
  SSL_CTX_set_num_tickets (ctx, 0);
  SSL_CTX_set_session_cache_mode (ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_verify (ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
  SSL_CTX_set_read_ahead (ctx, 1);
  SSL_CTX_set_default_read_buffer_len (ctx, READ_BUF);
  SSL_CTX_set_mode (ctx, SSL_MODE_AUTO_RETRY);
  GStatBuf st;
  if (SSL_CTX_set_ciphersuites (ctx, SUITES) != 1 || SSL_CTX_set1_groups_list (ctx, GROUPS) != 1)
    set_openssl_error (error, "TLS: setting the suites");
  else if (SSL_CTX_load_verify_file (ctx, ca_path) != 1)
    set_openssl_error (error, "%s: cannot load the job CA", ca_path);
  else if (SSL_CTX_use_certificate_chain_file (ctx, cert_path) != 1)
    set_openssl_error (error, "%s: cannot load this rank's certificate", cert_path);
  else if (SSL_CTX_use_PrivateKey_file (ctx, key_path, SSL_FILETYPE_PEM) != 1)
    set_openssl_error (error, "%s: cannot load this rank's key for %s", key_path, cert_path);
  else if (check_own_certificate (ctx, cert_path, ca_path, error))
    {
      if (g_stat (key_path, &st) == 0 && (st.st_mode & 077) != 0)
        g_warning ("%s: this rank's TLS key is readable by other users (mode %03o); chmod 600 it", key_path,
                   (unsigned) (st.st_mode & 0777));
      ShoalTls *tls = g_new0 (ShoalTls, 1);
      tls->mode = mode;
      tls->ctx = ctx;
      return tls;
    }
  SSL_CTX_free (ctx);
  return NULL;
}

void
shoal_tls_free (ShoalTls *tls)
{
  if (tls == NULL)
    return;
  SSL_CTX_free (tls->ctx);
  g_free (tls);
}

ShoalTlsMode
shoal_tls_mode (const ShoalTls *tls)
{
  return tls != NULL ? tls->mode : SHOAL_TLS_OFF;
}

static ShoalTls *default_tls;

void
shoal_tls_set_default (ShoalTls *tls)
{
  ShoalTls *old = g_atomic_pointer_exchange (&default_tls, tls);
  shoal_tls_free (old);
}

ShoalTls *
shoal_tls_get_default (void)
{
  return g_atomic_pointer_get (&default_tls);
}

/* The address without its port; FALSE for a family other than IP. */
static gboolean
ip_of (const struct sockaddr_storage *a, const void **ip, gsize *len, gboolean *loopback)
{
  if (a->ss_family == AF_INET)
    {
      const struct sockaddr_in *in = (const struct sockaddr_in *) a;
      *ip = &in->sin_addr;
      *len = sizeof in->sin_addr;
      *loopback = (ntohl (in->sin_addr.s_addr) >> 24) == 127;
      return TRUE;
    }
  if (a->ss_family == AF_INET6)
    {
      const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *) a;
      *ip = &in6->sin6_addr;
      *len = sizeof in6->sin6_addr;
      *loopback = IN6_IS_ADDR_LOOPBACK (&in6->sin6_addr)
                  || (IN6_IS_ADDR_V4MAPPED (&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127);
      return TRUE;
    }
  return FALSE;
}

gboolean
shoal_tls_wanted (const ShoalTls *tls, int fd)
{
  if (tls == NULL || tls->mode == SHOAL_TLS_OFF)
    return FALSE;
  if (tls->mode == SHOAL_TLS_ALL)
    return TRUE;
  /* one host: both ends on loopback, or on the same address (a rank
   * that reaches another of its host through the host's own address) */
  struct sockaddr_storage here, there;
  socklen_t hl = sizeof here, tl = sizeof there;
  const void *a, *b;
  gsize al, bl;
  gboolean aloop, bloop;
  if (getsockname (fd, (struct sockaddr *) &here, &hl) < 0 || getpeername (fd, (struct sockaddr *) &there, &tl) < 0
      || !ip_of (&here, &a, &al, &aloop) || !ip_of (&there, &b, &bl, &bloop))
    return TRUE;   /* unknown: the safe side */
  if (aloop && bloop)
    return FALSE;
  return !(al == bl && memcmp (a, b, al) == 0);
}

/* ---- one link ----------------------------------------------------------- */

ShoalTlsLink *
shoal_tls_link_new (ShoalTls *tls, int fd)
{
  SSL *ssl = SSL_new (tls->ctx);
  BIO *bio = BIO_new (socket_method ());
  if (ssl == NULL || bio == NULL)
    {
      SSL_free (ssl);
      BIO_free (bio);
      return NULL;
    }
  ShoalTlsLink *l = g_new0 (ShoalTlsLink, 1);
  l->ssl = ssl;
  l->fd = fd;
  l->out = g_malloc (SEND_BUF);
  BIO_set_data (bio, l);
  SSL_set_bio (ssl, bio, bio);
  return l;
}

void
shoal_tls_link_free (ShoalTlsLink *l)
{
  if (l == NULL)
    return;
  /* no close_notify: a peer would take it for a call beginning and wake
   * a thread to read it; every Thrift message carries its own length,
   * so a cut one is never taken for whole */
  SSL_free (l->ssl);
  g_free (l->out);
  g_free (l);
}

void
shoal_tls_link_set_timeout (ShoalTlsLink *l, gint64 timeout_ms)
{
  l->timeout_ms = timeout_ms;
}

gboolean
shoal_tls_looks_like_hello (const guint8 *b, gsize len)
{
  /* a handshake record of TLS 1.x */
  return len >= 2 && b[0] == 0x16 && b[1] == 0x03;
}

static void
put_be32 (GByteArray *b, guint32 v)
{
  guint32 x = GUINT32_TO_BE (v);
  g_byte_array_append (b, (const guint8 *) &x, 4);
}

/* A plain Thrift caller at a TLS server: answers with an exception (the
 * caller's error then says why), reads and drops its request for a
 * moment so that the close does not reset the reply away, and closes. */
static void
refuse_plain_caller (ShoalTlsLink *l, const char *why)
{
  GByteArray *b = g_byte_array_new ();
  static const guint8 field_message[] = { 11, 0, 1 }, field_type[] = { 8, 0, 2 }, stop = 0;
  put_be32 (b, 0x80010003u);   /* binary protocol version 1, T_EXCEPTION */
  put_be32 (b, 0);             /* no method name */
  put_be32 (b, 0);             /* sequence id */
  g_byte_array_append (b, field_message, 3);
  put_be32 (b, (guint32) strlen (why));
  g_byte_array_append (b, (const guint8 *) why, (guint) strlen (why));
  g_byte_array_append (b, field_type, 3);
  put_be32 (b, 7);             /* TApplicationException PROTOCOL_ERROR */
  g_byte_array_append (b, &stop, 1);
  if (send (l->fd, b->data, b->len, MSG_NOSIGNAL | MSG_DONTWAIT) == (gssize) b->len)
    {
      shutdown (l->fd, SHUT_WR);
      guint8 sink[65536];
      gsize dropped = 0;
      gint64 until = g_get_monotonic_time () + DRAIN_MS * 1000;
      for (gint64 now = g_get_monotonic_time (); now < until && dropped < DRAIN_BYTES; now = g_get_monotonic_time ())
        {
          struct pollfd p = { l->fd, POLLIN, 0 };
          if (poll (&p, 1, (int) ((until - now + 999) / 1000)) <= 0)
            break;
          gssize r = recv (l->fd, sink, sizeof sink, MSG_DONTWAIT);
          if (r <= 0 && !(r < 0 && (errno == EINTR || errno == EAGAIN)))
            break;
          dropped += (gsize) MAX (r, 0);
        }
    }
  g_byte_array_free (b, TRUE);
}

gboolean
shoal_tls_link_ready (ShoalTlsLink *l, gboolean as_server, GError **error)
{
  if (l->ready)
    return TRUE;
  if (as_server)
    {
      guint8 head[2];
      gssize n;
      while ((n = recv (l->fd, head, sizeof head, MSG_PEEK | MSG_WAITALL)) < 0 && errno == EINTR)
        ;
      if (n == (gssize) sizeof head && !shoal_tls_looks_like_hello (head, sizeof head))
        {
          static const char why[] = "this rank takes TLS connections only ([tls] mode): a plain call is refused";
          refuse_plain_caller (l, why);
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC,
                       "refused a plain (unencrypted) call: this rank takes TLS only ([tls] mode)");
          return FALSE;
        }
    }
  ERR_clear_error ();
  int r = as_server ? SSL_accept (l->ssl) : SSL_connect (l->ssl);
  if (r != 1)
    {
      link_error (l, r, "handshake", error);
      return FALSE;
    }
  l->ready = TRUE;
  return TRUE;
}

gssize
shoal_tls_link_read (ShoalTlsLink *l, guint8 *dst, gsize len, gboolean wait_all, GError **error)
{
  gsize got = 0;
  do
    {
      size_t n = 0;
      ERR_clear_error ();
      int r = SSL_read_ex (l->ssl, dst + got, len - got, &n);
      if (r != 1)
        {
          link_error (l, r, "receive", error);
          return -1;
        }
      got += n;
    }
  while (wait_all && got < len);
  return (gssize) got;
}

/* All of src into OpenSSL's records (which go to the link's write BIO). */
static gboolean
write_all (ShoalTlsLink *l, const guint8 *src, gsize len, GError **error)
{
  while (len > 0)
    {
      size_t n = 0;
      ERR_clear_error ();
      int r = SSL_write_ex (l->ssl, src, len, &n);
      if (r != 1)
        {
          link_error (l, r, "send", error);
          return FALSE;
        }
      src += n;
      len -= n;
    }
  return TRUE;
}

gboolean
shoal_tls_link_seal (ShoalTlsLink *l, const guint8 *src, gsize len, GError **error)
{
  g_return_val_if_fail (len <= SHOAL_TLS_SEAL_MAX && l->out_len == 0, FALSE);
  return write_all (l, src, len, error);
}

int
shoal_tls_link_send_sealed (ShoalTlsLink *l, gboolean wait, GError **error)
{
  l->last_errno = 0;
  if (send_out_some (l, wait))
    return 1;
  if (!wait && (l->last_errno == EAGAIN || l->last_errno == EWOULDBLOCK))
    return 0;
  link_error (l, -1, "send", error);
  return -1;
}

gboolean
shoal_tls_link_write (ShoalTlsLink *l, const guint8 *src, gsize len, GError **error)
{
  if (!write_all (l, src, len, error))
    return FALSE;
  if (BIO_flush (SSL_get_wbio (l->ssl)) != 1)
    {
      link_error (l, -1, "send", error);
      return FALSE;
    }
  return TRUE;
}

gboolean
shoal_tls_link_pending (ShoalTlsLink *l)
{
  return SSL_has_pending (l->ssl) == 1;
}
