/* What one process of a multi-process job knows of the others, and what
 * it does when one is lost (server/liveness.h holds the rules,
 * server/heartbeat.h sends and hears).
 *
 * A rank this process cannot do without - a process of its own worker
 * group, a server its workers push to, any worker of a synchronous group
 * - is fatal: the process stops the job, its RPC server refuses every
 * call with the reason (so the others fail with it), its workers give up
 * at their next step, and shoal_membership_check returns the error
 * naming the rank and why ("rank 2 (2 servers) lost: no heartbeat for
 * 15.1 s ...").  A worker group of an asynchronous scheme is dropped: SSP
 * no longer waits for its units, its shutdown is counted, Hogwild moves
 * the slices it mastered (shoal_membership_group_demoted), and the
 * others finish; with [cluster] all_groups_required = true such a loss
 * is fatal at once (the job cannot succeed), naming the group.  A refusal from a peer (this
 * process was declared lost, or the peer stops the job) is fatal too. */
#ifndef SHOAL_MEMBERSHIP_H
#define SHOAL_MEMBERSHIP_H

#include <glib.h>

#include "cluster/layout.h"
#include "server/liveness.h"
#include "server/rpc_server.h"
#include "server/server.h"

G_BEGIN_DECLS

typedef struct _ShoalMembership ShoalMembership;

typedef struct {
  const ShoalLayout *layout;    /* borrowed, outlives the membership */
  int rank;
  char **endpoints;             /* [nprocs] "host:port" ("" for ranks that take no calls); borrowed */
  char **hosts;                 /* [nprocs] each rank's host (a hostfile's, Slurm's), named in losses;
                                 * NULL: not known; borrowed */
  const char *token;
  gboolean group_pushes;        /* a group pushes as one unit (SSP's unit ids are groups) */
  gboolean rejoin;              /* this process restarts a rank of a running job */
  void (*on_fatal) (gpointer data, const GError *why);  /* may be NULL; once, from any thread */
  gpointer data;
} ShoalMembershipOptions;

/* Watches the other ranks and starts the heartbeat thread (one round at
 * once).  NULL with error when a thread cannot be started. */
ShoalMembership *shoal_membership_start (const ShoalMembershipOptions *opts, GError **error);
/* Stops the heartbeat thread and frees.  NULL is fine. */
void shoal_membership_free (ShoalMembership *m);

ShoalLiveness *shoal_membership_liveness (ShoalMembership *m);
/* What losses act on, once they exist (both may be NULL); losses seen
 * before are applied now. */
void shoal_membership_attach (ShoalMembership *m, ShoalServer *server, ShoalRpcServer *rpc);
/* Hogwild: whether server group `group` was ever lost (ShoalGroupDemotedFunc). */
gboolean shoal_membership_group_demoted (gpointer membership, int group);
/* Server groups whose processes were never lost. */
int shoal_membership_live_server_groups (ShoalMembership *m);
/* This process said it is done (server/liveness.h). */
void shoal_membership_self_done (ShoalMembership *m);

/* FALSE with the error when this process must fail: a rank it needs was
 * lost, or it was dropped, or (at_end) a worker group was lost and
 * [cluster] all_groups_required is true. */
gboolean shoal_membership_check (ShoalMembership *m, gboolean at_end, GError **error);
/* "group 1 (rank 1: no heartbeat for 15.2 s)" for each group dropped,
 * or NULL when none was.  Newly allocated. */
char *shoal_membership_lost_groups (ShoalMembership *m);

G_END_DECLS

#endif
