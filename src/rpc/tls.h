/* TLS on the links between hosts (OpenSSL 3; docs/SECURITY.md).
 *
 * A job has its own certificate authority; every rank holds a
 * certificate it issued and the key of that certificate.  Both ends of a
 * connection present theirs and check the other's against the job CA
 * alone, so a peer without a certificate, with a self-signed one, an
 * expired one or one of another job's CA is refused.  Only TLS 1.3 with
 * AEAD suites (AES-GCM, ChaCha20-Poly1305) is spoken.  The job token still
 * travels in every call, now inside the tunnel: a second factor.
 *
 * A process sets its TLS once, before it opens or accepts a connection
 * (shoal_tls_set_default); every ShoalThriftSocket made afterwards on a
 * link that needs it (shoal_tls_wanted) runs TLS.  The side that speaks
 * first on a new connection (an RPC client writes before it reads) is
 * the TLS client, the other the server: the listener needs no change. */
#ifndef SHOAL_TLS_H
#define SHOAL_TLS_H

#include <glib.h>

G_BEGIN_DECLS

typedef enum {
  SHOAL_TLS_OFF,     /* every link in clear */
  SHOAL_TLS_HOSTS,   /* links between two addresses of different hosts; one host's ranks talk in
                      * clear (loopback, or the same address at both ends) and keep shared memory */
  SHOAL_TLS_ALL      /* every link, loopback too */
} ShoalTlsMode;

typedef struct _ShoalTls ShoalTls;

/* Loads the job CA, this rank's certificate and its key (PEM files) and
 * checks them now: the key belongs to the certificate, the certificate
 * was issued by the CA and is valid today.  Errors name the file. */
ShoalTls *shoal_tls_new (ShoalTlsMode mode, const char *ca_path, const char *cert_path, const char *key_path,
                         GError **error);
void shoal_tls_free (ShoalTls *tls);
ShoalTlsMode shoal_tls_mode (const ShoalTls *tls);

/* The TLS of every socket this process makes from now on (taken over;
 * NULL: none, the previous one is freed).  Call before any connection is
 * opened or accepted, and not while sockets exist. */
void shoal_tls_set_default (ShoalTls *tls);
ShoalTls *shoal_tls_get_default (void);

/* Whether the connected socket fd needs TLS under tls's mode. */
gboolean shoal_tls_wanted (const ShoalTls *tls, int fd);

/* One connection's TLS, made for a connected socket; the handshake comes
 * with the first read (server) or write (client). */
typedef struct _ShoalTlsLink ShoalTlsLink;
ShoalTlsLink *shoal_tls_link_new (ShoalTls *tls, int fd);
void shoal_tls_link_free (ShoalTlsLink *link);   /* no close_notify (tls.c says why) */
/* Handshakes if not done yet; FALSE with an error that says what failed
 * and, where the peer refused us or we refused it, why.  A server that
 * sees a plain Thrift call instead of a TLS hello answers it with a
 * Thrift exception saying that TLS is needed, so that its caller's error
 * says so too. */
gboolean shoal_tls_link_ready (ShoalTlsLink *link, gboolean as_server, GError **error);
/* At least one byte, at most len (all of it with wait_all): > 0 bytes
 * read; -1 with error (connection closed, timeout, TLS failure). */
gssize shoal_tls_link_read (ShoalTlsLink *link, guint8 *dst, gsize len, gboolean wait_all, GError **error);
/* All len bytes. */
gboolean shoal_tls_link_write (ShoalTlsLink *link, const guint8 *src, gsize len, GError **error);
/* The same in two halves, for a writer that must not wait on the peer
 * while it holds its source (rpc/thrift_socket.h, pinned bytes): seal
 * encrypts len <= SHOAL_TLS_SEAL_MAX bytes into the link's own buffer
 * (src is not read afterwards) and sends nothing; send_sealed sends them:
 * 1 all sent, 0 the socket is full (only without wait: call again), -1
 * with error.  A seal follows only a send_sealed that returned 1. */
#define SHOAL_TLS_SEAL_MAX (128 * 1024)
gboolean shoal_tls_link_seal (ShoalTlsLink *link, const guint8 *src, gsize len, GError **error);
int shoal_tls_link_send_sealed (ShoalTlsLink *link, gboolean wait, GError **error);
/* Bytes received and not yet handed out (decrypted or not): what polling
 * the socket does not see. */
gboolean shoal_tls_link_pending (ShoalTlsLink *link);
/* The transport's timeout, for "timed out after N s". */
void shoal_tls_link_set_timeout (ShoalTlsLink *link, gint64 timeout_ms);

/* Whether the first bytes of a plain connection's message are a TLS
 * hello (a TLS client at a plain server). */
gboolean shoal_tls_looks_like_hello (const guint8 *bytes, gsize len);

G_END_DECLS

#endif
