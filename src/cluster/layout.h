/* The cluster layout: from SINGA's [cluster] fields to processes, the
 * workers and servers each one hosts, which server serves which slice,
 * and how the schemes behave.
 *
 *   scheme       groups  workers/group  server groups  separate  mode
 *   Sandblaster  1       k              1              yes       SYNC
 *   AllReduce    1       k              1 (k servers)  no        SYNC
 *   Downpour     g > 1   k              1              yes       ASYNC
 *   Hogwild      g > 1   k              g              no        ASYNC + group sync
 *
 * Ranks: worker processes first (workers packed nworkers_per_procs per
 * process in (group, worker) order), then, when servers are separate,
 * server processes (servers packed nservers_per_procs per process in
 * (server group, server) order).  When servers are not separate, server s
 * of server group sg lives in the process of worker (sg, s % k).
 * Worker group g talks to server group g % nserver_groups.
 * Slices: about lcm(nserver_groups, nservers_per_group) near-equal slices
 * (shoal_slice_range); slice i is served by server i % nservers_per_group
 * of each server group, and its master group (Hogwild) is
 * i % nserver_groups. */
#ifndef SHOAL_LAYOUT_H
#define SHOAL_LAYOUT_H

#include <glib.h>

#include "server/server.h"
#include "cluster/cluster_conf.h"

G_BEGIN_DECLS

typedef struct {
  int group, index;   /* worker (group, worker) or server (server group, server) */
} ShoalMember;

typedef struct {
  int rank;
  GArray *workers;    /* ShoalMember, the worker threads of this process */
  GArray *servers;    /* ShoalMember, the servers of this process */
} ShoalProcess;

typedef struct {
  ShoalClusterConf conf;
  int nprocs;
  int nworker_procs;          /* ranks [0, nworker_procs) host workers */
  int nslices;
  ShoalUpdateMode mode;       /* SYNC when there is one worker group */
  int sync_contributors;      /* SYNC: workers of the group */
  gboolean group_sync;        /* Hogwild: server groups sync deltas every conf.sync_freq updates */
  ShoalProcess *procs;        /* nprocs */
} ShoalLayout;

/* Validates the cluster conf and computes the layout.  Errors name the
 * conf place and say why the layout is impossible, e.g. "nworkers_per_procs
 * (3) must divide nworkers_per_group (4) or be a multiple of it".
 * `conf` (may be NULL) is used for file:line in messages. */
ShoalLayout *shoal_layout_new (const ShoalClusterConf *cluster, ShoalConf *conf, GError **error);
void shoal_layout_free (ShoalLayout *layout);

int shoal_layout_worker_rank (const ShoalLayout *layout, int group, int worker);
int shoal_layout_server_rank (const ShoalLayout *layout, int server_group, int server);
int shoal_layout_server_group_of (const ShoalLayout *layout, int worker_group);
int shoal_layout_server_of_slice (const ShoalLayout *layout, int slice);   /* index in its group */
int shoal_layout_master_group_of_slice (const ShoalLayout *layout, int slice);
/* Whether rank `rank` needs an endpoint others connect to: it serves
 * slices, or holds workers of a group spread over processes
 * (nworkers_per_procs < nworkers_per_group), whose processes send each
 * other bridge messages.  FALSE for a rank outside the layout. */
gboolean shoal_layout_rank_listens (const ShoalLayout *layout, int rank);

/* "rank 1 (2 workers of group 1, 2 servers)": what a rank holds, for
 * messages.  Newly allocated. */
char *shoal_layout_describe_rank (const ShoalLayout *layout, int rank);

/* Logs the layout: one line per process. */
void shoal_layout_log (const ShoalLayout *layout);

G_END_DECLS

#endif
