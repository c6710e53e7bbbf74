/* A job's TLS credentials (rpc/tls.h): a certificate authority made for
 * the job and one certificate per rank that it issues.  `shoal certs`
 * and `shoal run`'s launcher make them; a cluster's own PKI may stand in
 * ([tls] ca, cert, key).
 *
 * Keys are ECDSA P-256 (a handshake costs well under a millisecond);
 * certificates are X.509 v3, the CA's with CA:TRUE and keyCertSign only,
 * a rank's with CA:FALSE, digitalSignature and both TLS uses (every rank
 * is a client and a server).  The CA's key is never written by
 * shoal_tls_make_job_certs: once the ranks' certificates exist nobody,
 * their maker included, can issue another one for the job. */
#ifndef SHOAL_TLS_CERTS_H
#define SHOAL_TLS_CERTS_H

#include <glib.h>

G_BEGIN_DECLS

typedef struct _ShoalTlsIssuer ShoalTlsIssuer;

/* A fresh CA named after the job, valid `days` days from now. */
ShoalTlsIssuer *shoal_tls_issuer_new (const char *job_name, int days, GError **error);
void shoal_tls_issuer_free (ShoalTlsIssuer *ca);
/* Writes the CA's certificate (and, key_path not NULL, its key, mode 0600). */
gboolean shoal_tls_issuer_write (ShoalTlsIssuer *ca, const char *cert_path, const char *key_path, GError **error);
/* Issues rank's certificate with a new key, valid from now + from_s to
 * now + until_s (seconds; tests make expired ones with both negative);
 * the key is written mode 0600. */
gboolean shoal_tls_issuer_issue (ShoalTlsIssuer *ca, int rank, gint64 from_s, gint64 until_s,
                                 const char *cert_path, const char *key_path, GError **error);

/* The layout `shoal certs` writes in dir (made mode 0700): ca.crt,
 * rank-R.crt and rank-R.key for R < nranks, valid `days` days. */
gboolean shoal_tls_make_job_certs (const char *dir, const char *job_name, int nranks, int days, GError **error);
/* The paths of that layout (g_free). */
char *shoal_tls_ca_path (const char *dir);
char *shoal_tls_cert_path (const char *dir, int rank);
char *shoal_tls_key_path (const char *dir, int rank);

G_END_DECLS

#endif
