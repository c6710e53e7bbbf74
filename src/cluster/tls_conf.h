/* The [tls] section of a job conf: whether the links between a job's
 * ranks run TLS (rpc/tls.h) and where each rank finds its credentials
 * (docs/SECURITY.md). */
#ifndef SHOAL_TLS_CONF_H
#define SHOAL_TLS_CONF_H

#include <glib.h>

#include "core/conf.h"
#include "rpc/tls.h"

G_BEGIN_DECLS

typedef struct {
  ShoalTlsMode mode;
  char *dir;                /* as `shoal certs` writes it; NULL: none */
  char *ca, *cert, *key;    /* explicit paths ({rank} in cert and key: the rank); NULL: none */
} ShoalTlsConf;

extern const ShoalOption shoal_tls_options[];

/* Reads and checks [tls]: a mode, and either dir or all of ca, cert, key
 * (or none).  FALSE with an error naming the conf place. */
gboolean shoal_tls_conf_read (ShoalConf *conf, ShoalTlsConf *t, GError **error);
void shoal_tls_conf_clear (ShoalTlsConf *t);

/* This rank's TLS for a job whose ranks run on rank_hosts (one host per
 * rank, "" where not known; NULL: one process, no link).  *tls stays
 * NULL where no link needs TLS: mode off, or mode hosts with every known
 * host the same.  Otherwise the
 * credentials come from dir_override (shoal proc --tls-dir) or the conf;
 * with none the job is refused, naming the hosts and the ways out. */
gboolean shoal_tls_conf_open (const ShoalTlsConf *t, ShoalConf *conf, int rank, char **rank_hosts,
                              const char *dir_override, ShoalTls **tls, GError **error);

G_END_DECLS

#endif
