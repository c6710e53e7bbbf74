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
 * there that serves the slice. */
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

typedef struct {
  ShoalServer *server;               /* borrowed: this group's server, made with keep_baseline */
  int server_group;                  /* this group's index */
  int sync_freq;                     /* updates of a slice between syncs, >= 1 */
  float elastic_alpha;               /* > 0: elastic averaging with this alpha; 0: averaging deltas */
  const ShoalSliceMaster *masters;   /* [shoal_server_n_slices (server)], copied */
  const ShoalRpcClientOptions *endpoints;  /* [nendpoints], copied (strings too) */
  int nendpoints;
} ShoalGroupSyncOptions;

typedef struct _ShoalGroupSync ShoalGroupSync;

/* Starts the sync thread.  Connections to masters are made when first
 * needed.  Returns NULL with error when no thread can be started. */
ShoalGroupSync *shoal_group_sync_start (const ShoalGroupSyncOptions *opts, GError **error);
/* Stops and joins the thread, closes its connections and frees it.
 * FALSE with the error that ended the thread early (a master that could
 * not be reached, a refused call), if any.  NULL is fine (TRUE). */
gboolean shoal_group_sync_stop (ShoalGroupSync *sync, GError **error);

G_END_DECLS

#endif
