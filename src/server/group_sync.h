/* Hogwild's group sync: a thread beside a server group that, whenever a
 * hosted slice has had `sync_freq` updates since its last sync, sends
 * what this group learned on it (values - baseline) to the slice's master
 * server group and takes the master's values back (model averaging
 * between server groups; server.h: take_delta, apply_delta,
 * merge_master).  A slice this group masters only restarts its count.
 * With elastic averaging (EASGD) the group sends its replica instead and
 * subtracts the master's answer d = alpha (replica - center) (server.h:
 * take_values, elastic_exchange, elastic_merge); a slice this group
 * masters meets its center locally.
 *
 * Where the masters live is the caller's knowledge (the cluster layout):
 * it gives, per slice, the master group and the endpoint of the server
 * there that serves the slice.
 *
 * A lost group is no single point of failure (server/liveness.h): the
 * master of a slice is the first group, from its own master on in
 * group order, that the caller's `demoted` says was never lost, so every
 * group that shares the liveness view picks the same one.  A call to a
 * master that fails on the way (refused, reset, timed out) is tried
 * again half a second later, the other slices going on meanwhile, until
 * the liveness rules decide; a group that becomes a slice's master under
 * EASGD starts the slice's center from its replica.  A refusal by a
 * master that answered ends the thread (a wrong rule must not be hid). */
#ifndef SHOAL_GROUP_SYNC_H
#define SHOAL_GROUP_SYNC_H

#include <glib.h>

#include "server/rpc_client.h"
#include "server/server.h"

G_BEGIN_DECLS

typedef struct {
  int group;       /* the server group that masters the slice */
  int endpoint;    /* index into ShoalGroupSyncOptions.endpoints: its server of the slice */
} ShoalSliceMaster;

/* Whether server group `group` was ever lost (then it masters nothing);
 * called from the sync thread. */
typedef gboolean (*ShoalGroupDemotedFunc) (gpointer data, int group);

typedef struct {
  ShoalServer *server;               /* borrowed: this group's server, made with keep_baseline */
  int server_group;                  /* this group's index */
  int sync_freq;                     /* updates of a slice between syncs, >= 1 */
  float elastic_alpha;               /* > 0: elastic averaging with this alpha; 0: averaging deltas */
  const ShoalSliceMaster *masters;   /* [shoal_server_n_slices (server)], copied */
  const ShoalRpcClientOptions *endpoints;  /* [nendpoints], copied (strings too) */
  int nendpoints;
  /* Moving masters: endpoints hold nserver_groups x servers_per_group
   * entries, group g's server i at g * servers_per_group + i; 0: masters
   * never move. */
  int nserver_groups, servers_per_group;
  ShoalGroupDemotedFunc demoted;     /* may be NULL: nobody is ever lost */
  gpointer data;
} ShoalGroupSyncOptions;

typedef struct _ShoalGroupSync ShoalGroupSync;

/* Starts the sync thread.  Connections to masters are made when first
 * needed.  Returns NULL with error when no thread can be started. */
ShoalGroupSync *shoal_group_sync_start (const ShoalGroupSyncOptions *opts, GError **error);
/* The group that masters `slice` now, and the endpoint index of its
 * server of the slice (*endpoint may be NULL). */
int shoal_group_sync_master (const ShoalGroupSyncOptions *opts, int slice, int *endpoint);
/* A restarted group rejoining a running job: every hosted slice whose
 * master is another group takes that master's values now (its values and
 * baseline; server.h put), before any worker of the group pulls. */
gboolean shoal_group_sync_take_masters (const ShoalGroupSyncOptions *opts, GError **error);
/* Stops and joins the thread, closes its connections and frees it.
 * FALSE with the error that ended the thread early (a master that could
 * not be reached, a refused call), if any.  NULL is fine (TRUE). */
gboolean shoal_group_sync_stop (ShoalGroupSync *sync, GError **error);

G_END_DECLS

#endif
