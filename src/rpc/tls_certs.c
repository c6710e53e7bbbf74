/* A job's CA and its ranks' certificates; see rpc/tls_certs.h. */
#include "rpc/tls_certs.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "core/error.h"

struct _ShoalTlsIssuer {
  EVP_PKEY *key;
  X509 *cert;
  char *job;
};

static gboolean
fail (GError **error, const char *what)
{
  unsigned long e = ERR_get_error ();
  const char *why = e != 0 ? ERR_reason_error_string (e) : NULL;
  g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "TLS certificates: %s%s%s", what, why != NULL ? ": " : "",
               why != NULL ? why : "");
  ERR_clear_error ();
  return FALSE;
}

static gboolean
add_ext (X509 *cert, X509 *issuer, int nid, const char *value)
{
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb (&ctx);
  X509V3_set_ctx (&ctx, issuer, cert, NULL, NULL, 0);
  X509_EXTENSION *ext = X509V3_EXT_conf_nid (NULL, &ctx, nid, value);
  gboolean ok = ext != NULL && X509_add_ext (cert, ext, -1) == 1;
  X509_EXTENSION_free (ext);
  return ok;
}

/* A certificate for key named cn, of `issuer` (NULL: itself), valid
 * from now + from_s to now + until_s, signed by sign_key. */
static X509 *
make_cert (EVP_PKEY *key, const char *job, const char *cn, X509 *issuer, EVP_PKEY *sign_key, gint64 from_s,
           gint64 until_s, gboolean ca, GError **error)
{
  X509 *cert = X509_new ();
  X509_NAME *name = X509_NAME_new ();
  BIGNUM *serial = BN_new ();
  gboolean ok = cert != NULL && name != NULL && serial != NULL && X509_set_version (cert, 2) == 1
                && BN_rand (serial, 128, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1
                && BN_to_ASN1_INTEGER (serial, X509_get_serialNumber (cert)) != NULL
                && X509_gmtime_adj (X509_getm_notBefore (cert), (long) from_s) != NULL
                && X509_gmtime_adj (X509_getm_notAfter (cert), (long) until_s) != NULL
                && X509_set_pubkey (cert, key) == 1
                && X509_NAME_add_entry_by_txt (name, "O", MBSTRING_UTF8, (const unsigned char *) job, -1, -1, 0) == 1
                && X509_NAME_add_entry_by_txt (name, "CN", MBSTRING_UTF8, (const unsigned char *) cn, -1, -1, 0) == 1
                && X509_set_subject_name (cert, name) == 1
                && X509_set_issuer_name (cert, issuer != NULL ? X509_get_subject_name (issuer) : name) == 1;
  X509 *by = issuer != NULL ? issuer : cert;
  if (ok && ca)
    ok = add_ext (cert, by, NID_basic_constraints, "critical,CA:TRUE,pathlen:0")
         && add_ext (cert, by, NID_key_usage, "critical,keyCertSign,cRLSign")
         && add_ext (cert, by, NID_subject_key_identifier, "hash");
  else if (ok)
    ok = add_ext (cert, by, NID_basic_constraints, "critical,CA:FALSE")
         && add_ext (cert, by, NID_key_usage, "critical,digitalSignature")
         && add_ext (cert, by, NID_ext_key_usage, "serverAuth,clientAuth")
         && add_ext (cert, by, NID_subject_key_identifier, "hash")
         && add_ext (cert, by, NID_authority_key_identifier, "keyid:always");
  ok = ok && X509_sign (cert, sign_key, EVP_sha256 ()) > 0;
  X509_NAME_free (name);
  BN_free (serial);
  if (!ok)
    {
      fail (error, cn);
      X509_free (cert);
      return NULL;
    }
  return cert;
}

/* path written with the PEM writer `write`, mode 0600 from the start. */
static gboolean
write_pem (const char *path, gboolean secret, gboolean (*write) (FILE *f, gpointer obj), gpointer obj, GError **error)
{
  int fd = g_open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, secret ? 0600 : 0644);
  FILE *f = fd >= 0 ? fdopen (fd, "w") : NULL;
  if (f == NULL)
    {
      int e = errno;
      if (fd >= 0)
        close (fd);
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: %s", path, g_strerror (e));
      return FALSE;
    }
  if (secret && fchmod (fd, 0600) < 0)
    g_warning ("%s: chmod 600: %s", path, g_strerror (errno));
  gboolean ok = write (f, obj);
  if (fclose (f) != 0 || !ok)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: cannot write", path);
      return FALSE;
    }
  return TRUE;
}

static gboolean
pem_cert (FILE *f, gpointer cert)
{
  return PEM_write_X509 (f, cert) == 1;
}

static gboolean
pem_key (FILE *f, gpointer key)
{
  return PEM_write_PrivateKey (f, key, NULL, NULL, 0, NULL, NULL) == 1;
}

static EVP_PKEY *
new_key (GError **error)
{
  EVP_PKEY *key = EVP_EC_gen ("P-256");
  if (key == NULL)
    fail (error, "making a P-256 key");
  return key;
}

ShoalTlsIssuer *
shoal_tls_issuer_new (const char *job_name, int days, GError **error)
{
  EVP_PKEY *key = new_key (error);
  if (key == NULL)
    return NULL;
  guint8 id[8];
  if (RAND_bytes (id, sizeof id) != 1)
    {
      EVP_PKEY_free (key);
      fail (error, "random bytes");
      return NULL;
    }
  /* two CAs of one job name differ by name too: a peer's error can tell them apart */
  char *cn = g_strdup_printf ("shoal job CA %02x%02x%02x%02x%02x%02x%02x%02x", id[0], id[1], id[2], id[3], id[4],
                              id[5], id[6], id[7]);
  X509 *cert = make_cert (key, job_name, cn, NULL, key, -300, (gint64) days * 86400, TRUE, error);
  g_free (cn);
  if (cert == NULL)
    {
      EVP_PKEY_free (key);
      return NULL;
    }
  ShoalTlsIssuer *ca = g_new0 (ShoalTlsIssuer, 1);
  ca->key = key;
  ca->cert = cert;
  ca->job = g_strdup (job_name);
  return ca;
}

void
shoal_tls_issuer_free (ShoalTlsIssuer *ca)
{
  if (ca == NULL)
    return;
  EVP_PKEY_free (ca->key);
  X509_free (ca->cert);
  g_free (ca->job);
  g_free (ca);
}

gboolean
shoal_tls_issuer_write (ShoalTlsIssuer *ca, const char *cert_path, const char *key_path, GError **error)
{
  return write_pem (cert_path, FALSE, pem_cert, ca->cert, error)
         && (key_path == NULL || write_pem (key_path, TRUE, pem_key, ca->key, error));
}

gboolean
shoal_tls_issuer_issue (ShoalTlsIssuer *ca, int rank, gint64 from_s, gint64 until_s, const char *cert_path,
                        const char *key_path, GError **error)
{
  EVP_PKEY *key = new_key (error);
  if (key == NULL)
    return FALSE;
  char *cn = g_strdup_printf ("shoal rank %d", rank);
  X509 *cert = make_cert (key, ca->job, cn, ca->cert, ca->key, from_s, until_s, FALSE, error);
  g_free (cn);
  gboolean ok = cert != NULL && write_pem (key_path, TRUE, pem_key, key, error)
                && write_pem (cert_path, FALSE, pem_cert, cert, error);
  X509_free (cert);
  EVP_PKEY_free (key);
  return ok;
}

char *
shoal_tls_ca_path (const char *dir)
{
  return g_build_filename (dir, "ca.crt", NULL);
}

static char *
rank_file (const char *dir, int rank, const char *ext)
{
  char *name = g_strdup_printf ("rank-%d.%s", rank, ext);
  char *path = g_build_filename (dir, name, NULL);
  g_free (name);
  return path;
}

char *
shoal_tls_cert_path (const char *dir, int rank)
{
  return rank_file (dir, rank, "crt");
}

char *
shoal_tls_key_path (const char *dir, int rank)
{
  return rank_file (dir, rank, "key");
}

gboolean
shoal_tls_make_job_certs (const char *dir, const char *job_name, int nranks, int days, GError **error)
{
  g_return_val_if_fail (nranks > 0 && days > 0, FALSE);
  if (g_mkdir_with_parents (dir, 0700) < 0 || g_chmod (dir, 0700) < 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: %s", dir, g_strerror (errno));
      return FALSE;
    }
  ShoalTlsIssuer *ca = shoal_tls_issuer_new (job_name, days, error);
  if (ca == NULL)
    return FALSE;
  char *ca_path = shoal_tls_ca_path (dir);
  gboolean ok = shoal_tls_issuer_write (ca, ca_path, NULL, error);
  for (int r = 0; ok && r < nranks; r++)
    {
      char *cert = shoal_tls_cert_path (dir, r), *key = shoal_tls_key_path (dir, r);
      ok = shoal_tls_issuer_issue (ca, r, -300, (gint64) days * 86400, cert, key, error);
      g_free (cert);
      g_free (key);
    }
  g_free (ca_path);
  shoal_tls_issuer_free (ca);
  return ok;
}
