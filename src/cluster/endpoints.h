/* Where the ranks of a layout listen.  Every rank that takes calls
 * (shoal_layout_rank_listens: servers, workers of a group spread over
 * processes) has an endpoint "host:port"; the others have "".  Lists are
 * NULL-terminated, one entry per rank, newly allocated (g_strfreev). */
#ifndef SHOAL_ENDPOINTS_H
#define SHOAL_ENDPOINTS_H

#include <glib.h>

#include "cluster/layout.h"

G_BEGIN_DECLS

/* Free loopback ports for the ranks that listen (`shoal run` on one
 * machine): ports below the kernel's ephemeral range, each socket bound
 * until all are chosen so no two ranks share one.  Another program
 * taking a port before the child binds it makes the child fail with a
 * clear bind error.  NULL with error when no free port is found. */
char **shoal_endpoints_loopback (const ShoalLayout *layout, GError **error);

/* The endpoints from an Open MPI style hostfile ("host" or "host slots=N"
 * per line, # comments): hosts are expanded by their slots in file
 * order, as mpirun maps ranks by slot, ranks beyond the slots wrap
 * around, and rank r listens on base_port + r.  *host_workers gets the
 * worker threads of every rank on `rank`'s host (for the BLAS thread
 * budget), *host_procs (may be NULL) those ranks.  NULL with an error
 * naming the file and line. */
char **shoal_endpoints_from_hostfile (const char *path, const ShoalLayout *layout, int base_port,
                                      int rank, int *host_workers, int *host_procs, GError **error);

/* The same from each rank's host (hosts[nprocs], a hostfile's or
 * Slurm's, cluster/slurm.h). */
char **shoal_endpoints_from_hosts (char **hosts, const ShoalLayout *layout, int base_port, int rank,
                                   int *host_workers, int *host_procs);
/* Each rank's host (ranks beyond the slots wrap around, as above). */
char **shoal_hosts_from_hostfile (const char *path, int nprocs, GError **error);
/* Each rank's host as its endpoint names it, "" for ranks that take no
 * calls (their hosts are not known). */
char **shoal_hosts_from_endpoints (char **endpoints);

/* Splits "host:port" (the port 1..65535); *host is newly allocated.
 * FALSE with error otherwise. */
gboolean shoal_endpoint_parse (const char *endpoint, char **host, int *port, GError **error);

G_END_DECLS

#endif
