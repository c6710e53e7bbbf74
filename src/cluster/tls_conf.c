/* The [tls] section; see cluster/tls_conf.h. */
#include "cluster/tls_conf.h"

#include <string.h>

#include "core/error.h"
#include "rpc/tls_certs.h"

#define G "tls"

const ShoalOption shoal_tls_options[] = {
  { "mode", SHOAL_OPT_STRING, "hosts", SHOAL_UNBOUNDED, "off|hosts|all",
    "hosts: links between hosts run TLS 1.3 with the job's certificates (one host's ranks talk in clear "
    "and through shared memory); all: every link, loopback too; off: every link in clear (parameters, "
    "gradients and the job token readable on the network)" },
  { "dir", SHOAL_OPT_STRING, "", SHOAL_UNBOUNDED, NULL,
    "the job's credentials as `shoal certs DIR --ranks N` writes them: ca.crt, rank-R.crt, rank-R.key" },
  { "ca", SHOAL_OPT_STRING, "", SHOAL_UNBOUNDED, NULL, "the job's CA certificate (PEM), instead of dir" },
  { "cert", SHOAL_OPT_STRING, "", SHOAL_UNBOUNDED, NULL,
    "this rank's certificate (PEM), issued by ca; {rank} stands for the rank" },
  { "key", SHOAL_OPT_STRING, "", SHOAL_UNBOUNDED, NULL, "this rank's private key (PEM); {rank} stands for the rank" },
  SHOAL_OPTION_END
};

/* The key's value, NULL when absent or empty. */
static char *
path_of (ShoalConf *conf, const char *key)
{
  char *v = shoal_conf_get_string (conf, G, shoal_tls_options, key);
  if (v != NULL && *g_strstrip (v) == '\0')
    g_clear_pointer (&v, g_free);
  return v;
}

gboolean
shoal_tls_conf_read (ShoalConf *conf, ShoalTlsConf *t, GError **error)
{
  memset (t, 0, sizeof *t);
  const ShoalOption *const tables[] = { shoal_tls_options, NULL };
  if (!shoal_conf_check_group (conf, G, tables, NULL, NULL, error))
    return FALSE;
  char *mode = shoal_conf_get_string (conf, G, shoal_tls_options, "mode");
  t->mode = strcmp (mode, "off") == 0 ? SHOAL_TLS_OFF : strcmp (mode, "all") == 0 ? SHOAL_TLS_ALL : SHOAL_TLS_HOSTS;
  g_free (mode);
  t->dir = path_of (conf, "dir");
  t->ca = path_of (conf, "ca");
  t->cert = path_of (conf, "cert");
  t->key = path_of (conf, "key");
  int given = (t->ca != NULL) + (t->cert != NULL) + (t->key != NULL);
  if (t->dir != NULL && given > 0)
    shoal_conf_error (conf, error, G, "dir", "give dir or ca, cert and key, not both");
  else if (given > 0 && given < 3)
    shoal_conf_error (conf, error, G, t->ca == NULL ? "ca" : t->cert == NULL ? "cert" : "key",
                      "missing: ca, cert and key go together");
  else
    return TRUE;
  shoal_tls_conf_clear (t);
  return FALSE;
}

void
shoal_tls_conf_clear (ShoalTlsConf *t)
{
  g_clear_pointer (&t->dir, g_free);
  g_clear_pointer (&t->ca, g_free);
  g_clear_pointer (&t->cert, g_free);
  g_clear_pointer (&t->key, g_free);
}

/* The distinct known hosts of the ranks, comma-separated; *n their number. */
static char *
distinct_hosts (char **rank_hosts, int *n)
{
  GPtrArray *hosts = g_ptr_array_new ();
  for (int r = 0; rank_hosts[r] != NULL; r++)
    {
      gboolean seen = *rank_hosts[r] == '\0';
      for (guint i = 0; i < hosts->len && !seen; i++)
        seen = strcmp (hosts->pdata[i], rank_hosts[r]) == 0;
      if (!seen)
        g_ptr_array_add (hosts, rank_hosts[r]);
    }
  *n = (int) hosts->len;
  g_ptr_array_add (hosts, NULL);
  char *list = g_strjoinv (", ", (char **) hosts->pdata);
  g_ptr_array_free (hosts, TRUE);
  return list;
}

static char *
with_rank (const char *path, int rank)
{
  char r[16];
  g_snprintf (r, sizeof r, "%d", rank);
  char **parts = g_strsplit (path, "{rank}", -1);
  char *out = g_strjoinv (r, parts);
  g_strfreev (parts);
  return out;
}

gboolean
shoal_tls_conf_open (const ShoalTlsConf *t, ShoalConf *conf, int rank, char **rank_hosts, const char *dir_override,
                     ShoalTls **tls, GError **error)
{
  *tls = NULL;
  if (t->mode == SHOAL_TLS_OFF || rank_hosts == NULL)
    return TRUE;
  int nhosts = 0;
  char *hosts = distinct_hosts (rank_hosts, &nhosts);
  const char *dir = dir_override != NULL ? dir_override : t->dir;
  if (t->mode == SHOAL_TLS_HOSTS && nhosts <= 1)
    {
      g_free (hosts);
      return TRUE;
    }
  if (dir == NULL && t->ca == NULL)
    {
      shoal_conf_error (conf, error, G, "mode",
                        "%s: the ranks talk over %s (%s) and [tls] names no credentials: make them with "
                        "`shoal certs DIR --ranks %u` and give [tls] dir = DIR (or shoal proc --tls-dir DIR), "
                        "or set [tls] mode = off to send parameters and the job token in clear",
                        t->mode == SHOAL_TLS_ALL ? "all" : "hosts",
                        nhosts > 1 ? "the network between hosts" : "loopback", hosts, g_strv_length (rank_hosts));
      g_free (hosts);
      return FALSE;
    }
  g_free (hosts);
  char *ca = dir != NULL ? shoal_tls_ca_path (dir) : g_strdup (t->ca);
  char *cert = dir != NULL ? shoal_tls_cert_path (dir, rank) : with_rank (t->cert, rank);
  char *key = dir != NULL ? shoal_tls_key_path (dir, rank) : with_rank (t->key, rank);
  *tls = shoal_tls_new (t->mode, ca, cert, key, error);
  if (*tls == NULL)
    g_prefix_error (error, "[tls] rank %d: ", rank);
  g_free (ca);
  g_free (cert);
  g_free (key);
  return *tls != NULL;
}
