/* Private to run/runner.c and run/runner_servers.c: the state of
 * one process's share of a job, which the two files build together (the
 * servers and their RPC service in runner_servers.c, the worker threads
 * in runner.c). */
#ifndef SHOAL_RUNNER_PROCESS_H
#define SHOAL_RUNNER_PROCESS_H

#include <glib.h>

#include "cluster/layout.h"
#include "comm/thrift_wire.h"
#include "comm/mailbox.h"
#include "data/checkpoint.h"
#include "partition/partition.h"
#include "server/group_sync.h"
#include "server/rpc_client.h"
#include "server/rpc_server.h"
#include "server/server.h"
#include "job/job.h"
#include "run/membership.h"
#include "metrics/metrics.h"
#include "metrics/process_report.h"
#include "run/runner.h"

G_BEGIN_DECLS

typedef struct {
  ShoalJob *job;
  const ShoalRunOptions *opts;
  ShoalLayout *layout;
  ShoalProcess *proc;
  int nslices;
  gboolean whole_groups;         /* each group's workers all live in one process */
  gboolean spread_net;           /* a group spread over processes runs as one group net with
                                  * bridges between them (its layers are not all batch-split) */
  GArray *units;                 /* ShoalMember: (group, first worker) of each local group net */
  int unit_size;                 /* workers per group net: k for whole or spread nets, else 1 */
  ShoalMailbox *mailbox;         /* spread net: messages from the group's other processes */
  ShoalGroupWire *wire;          /* spread net: to them */
  ShoalGroupNet *layout_net;     /* the param layout; also the first unit's net when there is one */
  ShoalServer *server;           /* this process's server group, or NULL */
  guint64 memory_held;           /* charged to [job] memory_limit besides the nets: the servers'
                                  * slices and the checkpoint buffers (given back at the end) */
  guint64 server_bytes;          /* of which the servers' slices */
  int server_group;
  ShoalRpcServer *rpc;
  ShoalMetricsWriter *metrics;
  ShoalProcessReport *report;    /* this process's "process" lines */
  ShoalGroupSync *group_sync;     /* Hogwild: this server group's sync with the masters */
  ShoalMembership *membership;   /* multi-process: the other ranks, alive or lost */
  ShoalCheckpoint *ckpt;         /* this rank's checkpoint store */
  GBytes *conf_blob;             /* the job's conf as run, saved with each unit's checkpoint: what a
                                  * rank resumed without a launcher compares (workspace/run_identity.h) */
  gint64 resume_step;            /* -1: a fresh run */
  gint64 stop_step;              /* shared by the workers; G_MAXINT64 until a stop is asked */
  gboolean cuda_graph_noted;     /* said once why [job] cuda_graph does nothing here */
} RunnerProcess;

/* The client options and host (owned by the caller, g_free) of `rank`'s
 * RPC endpoint. */
gboolean runner_endpoint_options (RunnerProcess *p, int rank, ShoalRpcClientOptions *o, char **host,
                                  GError **error);
/* This process's server group (restored on resume) and its RPC service;
 * a process with no servers starts the service only for a spread net's
 * messages. */
gboolean runner_start_servers (RunnerProcess *p, GError **error);
/* Hogwild: the sync thread beside this process's server group. */
gboolean runner_start_group_sync (RunnerProcess *p, GError **error);

G_END_DECLS

#endif /* SHOAL_RUNNER_PROCESS_H */
