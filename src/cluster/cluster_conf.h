/* The [cluster] section of a job conf (see cluster/layout.h for what it
 * makes, docs/ARCHITECTURE.md for the schemes). */
#ifndef SHOAL_CLUSTER_CONF_H
#define SHOAL_CLUSTER_CONF_H

#include <glib.h>

#include "core/codec.h"

#include "core/conf.h"
#include "core/tensor.h"

G_BEGIN_DECLS

#define SHOAL_MAX_GPU_LIST 64

/* [cluster] async_lr: the learning rate of one asynchronous update. */
typedef enum {
  SHOAL_ASYNC_LR_GROUPS,     /* lr / g for g units pushing to a server group (the default: one
                              * round of their pushes moves as far as one synchronous step) */
  SHOAL_ASYNC_LR_NONE,       /* lr, as Dean et al.'s Downpour */
  SHOAL_ASYNC_LR_STALENESS   /* lr / staleness of the update, at least 1 (Zhang et al. 2016) */
} ShoalAsyncLr;

/* [cluster] sync_lr: the learning rate of a synchronous step whose k
 * workers each bring a batch of the size lr was tuned for (a batch k
 * times larger: weak scaling, as `shoal compare --workers` runs it). */
typedef enum {
  SHOAL_SYNC_LR_NONE,        /* lr */
  SHOAL_SYNC_LR_LINEAR,      /* k x lr (Goyal et al. 2017's linear scaling rule) */
  SHOAL_SYNC_LR_SQRT         /* sqrt (k) x lr (Krizhevsky 2014's square-root rule) */
} ShoalSyncLr;

/* [cluster] hogwild_sync: how a Hogwild group's replica and the slice's
 * master meet every sync_freq updates. */
typedef enum {
  SHOAL_HOGWILD_AVERAGE,     /* the master adds each group's delta weighted 1/g (model averaging) */
  SHOAL_HOGWILD_ELASTIC      /* EASGD: replica and center move toward each other by elastic_alpha */
} ShoalHogwildSync;

typedef struct {
  int nworker_groups;
  int nworkers_per_group;
  int nserver_groups;
  int nservers_per_group;
  int nworkers_per_procs;
  int nservers_per_procs;
  gboolean server_worker_separate;
  int sync_freq;
  gboolean all_groups_required;  /* async: a lost group fails the job */
  int n_push;               /* async: steps summed per push */
  int n_fetch;              /* async: steps between fetches */
  int staleness;            /* SSP: steps the fastest group may be ahead of the slowest; -1: unbounded */
  int backup_workers;       /* SYNC: gradients of a step the servers do not wait for (Chen et al.) */
  gboolean shared_memory;   /* slices to servers on this host through shared memory where possible */
  ShoalCodec wire_values;   /* values servers send over sockets (core/codec.h) */
  ShoalCodec wire_grads;    /* gradients workers send over sockets */
  ShoalAsyncLr async_lr;
  ShoalSyncLr sync_lr;
  int sync_lr_warmup;       /* SYNC: updates over which sync_lr's factor rises from 1 (gradual warm-up) */
  ShoalHogwildSync hogwild_sync;
  double elastic_alpha;     /* EASGD: 0 < alpha <= 1 */
  double heartbeat_interval; /* seconds between heartbeats (server/liveness.h) */
  double heartbeat_timeout;  /* seconds of silence that make a process lost */
  double progress_timeout;   /* seconds without a step (or never heard) that make a process lost */
  double stop_timeout;       /* seconds a process told to stop may take before it exits at once */
  int max_procs_per_core;    /* processes per core on one machine before a job is refused */
  int rpc_max_connections;   /* connections an RPC server keeps open */
  double rpc_idle_timeout;   /* seconds before an idle RPC connection is closed */
  int rpc_threads;           /* RPC call threads kept; more start while all are busy */
  int ngpus;                /* entries of gpus; 0: every worker on the CPU */
  int gpus[SHOAL_MAX_GPU_LIST];  /* GPU of worker unit i is gpus[i % ngpus]; -1: the CPU */
} ShoalClusterConf;

/* Reads and validates [cluster] of conf into *c, including whether the
 * layout it describes is possible (shoal_layout_new's checks).  FALSE
 * with an error naming the conf place. */
gboolean shoal_cluster_conf_read (ShoalConf *conf, ShoalClusterConf *c, GError **error);

/* Where worker `worker` of group `group` computes ([cluster] gpus).  A
 * worker unit is a group whose workers share a process (it runs as one
 * net), else one worker; unit i - the group, or group * nworkers_per_group
 * + worker - runs on cuda:gpus[i % ngpus], or on the CPU for -1 or an
 * empty list.  So `gpus = 0,1` alternates groups between two GPUs and
 * `gpus = 0,-1` runs even groups on cuda:0 and odd ones on the CPU. */
ShoalDevice shoal_cluster_device (const ShoalClusterConf *cluster, int group, int worker);

/* Processes and worker threads of a job on one machine against its
 * cores: more than max_procs_per_core of either per core is refused (an
 * error naming the key, the numbers and `force_option`, the flag that
 * starts them anyway) unless oversubscribe; more processes than cores
 * are warned about. */
gboolean shoal_cluster_check_host_procs (ShoalConf *conf, const ShoalClusterConf *cluster, int procs_here,
                                         int threads_here, int cores, gboolean oversubscribe,
                                         const char *force_option, GError **error);

/* The keys of [cluster], for validation and `shoal help conf`. */
extern const ShoalOption shoal_cluster_options[];

G_END_DECLS

#endif
