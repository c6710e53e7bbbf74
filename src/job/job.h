/* A job: the [job], [updater] and [cluster] sections of a job conf,
 * validated, plus the conf itself for the net's [layer NAME] groups.
 *
 * [job]      name, train_steps | epochs, test_freq, test_steps, disp_freq,
 *            seed, threads, checkpoint_freq, init_from, alg, cd_k, max_seconds, metrics_interval,
 *            memory_limit, device_update, device_codecs, cuda_graph, precision
 * [updater]  type, lr and its schedule, momentum, weight_decay, betas, ...
 * [cluster]  SINGA's layout fields (see the confs in conf/ and docs/ARCHITECTURE.md)
 * [emulate]  a cluster that is not there (cluster/emulate_conf.h; docs/SCHEMES.md, "Emulation")
 * [tls]      TLS on the links between hosts (cluster/tls_conf.h; docs/SECURITY.md)
 * Any other group except "layer NAME" is an error. */
#ifndef SHOAL_JOB_H
#define SHOAL_JOB_H

#include <glib.h>

#include <shoal/job.h>

#include "cluster/cluster_conf.h"
#include "cluster/emulate_conf.h"
#include "cluster/tls_conf.h"
#include "core/conf.h"
#include "core/device.h"
#include "core/tensor.h"
#include "core/updater.h"

G_BEGIN_DECLS

struct _ShoalJob {
  ShoalConf *conf;          /* owned */
  char *name;
  gint64 train_steps;       /* resolved from epochs when given as epochs */
  double epochs;            /* 0 when the job gave train_steps */
  int test_freq;            /* steps between test runs; 0 = only at the end */
  int test_steps;           /* batches per test run; 0 = the whole test set */
  int test_groups;          /* groups that test, from 0; 0: every group */
  int disp_freq;            /* steps between progress lines */
  guint64 seed;
  int threads;              /* cores this process may use (worker/threads.h); 0 = its share */
  gint64 checkpoint_freq;   /* steps between checkpoints; 0 = only at the end */
  char **init_from;         /* workspaces whose params initialise ours by name; empty = none */
  int cd_k;                 /* alg = cd: Gibbs steps of the RBM layers; 0: alg = bp */
  double max_seconds;       /* training ends at the first step boundary past this job time; 0 = none */
  double metrics_interval;  /* seconds between "process" lines in metrics.jsonl; 0 = only at the end */
  gboolean device_update;   /* a GPU worker with its server in-process updates on the GPU */
  gboolean device_codecs;   /* a GPU worker runs the wire codecs to remote servers on the GPU */
  gboolean cuda_graph;      /* a GPU worker whose params stay on the GPU replays its step as a CUDA graph */
  ShoalPrecision precision; /* GPU nets' matrix arithmetic (core/device.h) */
  guint64 memory_limit;     /* bytes the nets of this process may allocate together; 0 = no limit */
  ShoalMemoryBudget *memory_budget; /* owned: give it to every net of the job (ShoalNetOptions.budget) */
  ShoalUpdaterConf updater;
  ShoalClusterConf cluster;
  ShoalEmulateConf emulate; /* [emulate]: stragglers, slow links, a lost group, the virtual clock */
  ShoalTlsConf tls;         /* [tls]: whether links run TLS, and the credentials */
};

/* shoal_job_load with the [cluster] section of the topology file at
 * topology_path (may be NULL: none) in place of the job's own, then the
 * overrides.  The topology file must hold only [cluster] and be a valid
 * layout by itself; its errors name its own lines (cluster/topology.h). */
ShoalJob *shoal_job_load_topology (const char *job_path, const char *topology_path,
                                   const char *const *overrides, GError **error);
/* Loads more plugins (`shoal run --plugin`), adding them to the job's
 * [job] plugins so every process of the job loads them.  FALSE with the
 * loader's error prefixed "--plugin: ". */
gboolean shoal_job_add_plugins (ShoalJob *job, const char *const *plugins, GError **error);

/* Resolves epochs into train_steps once the dataset size is known. */
void shoal_job_resolve_epochs (ShoalJob *job, gint64 records_per_epoch, int batch);
/* Whether worker `worker` of group `group` runs test passes: a group's
 * first worker, in the groups [job] test_groups names. */
gboolean shoal_job_tests (const ShoalJob *job, int group, int worker);

/* The option tables, for `shoal help conf`. */
extern const ShoalOption shoal_job_options[];
extern const ShoalOption shoal_updater_options[];

G_END_DECLS

#endif
