/* A job: the [job], [updater] and [cluster] sections of a job conf,
 * validated, plus the conf itself for the net's [layer NAME] groups.
 *
 * [job]      name, train_steps | epochs, test_freq, test_steps, disp_freq,
 *            seed, threads, checkpoint_freq, init_from, alg, cd_k
 * [updater]  type, lr and its schedule, momentum, weight_decay, betas, ...
 * [cluster]  SINGA's layout fields (see the confs in conf/ and docs/ARCHITECTURE.md)
 * Any other group except "layer NAME" is an error. */
#ifndef SHOAL_JOB_H
#define SHOAL_JOB_H

#include <glib.h>

#include "core/conf.h"
#include "core/tensor.h"
#include "core/updater.h"

G_BEGIN_DECLS

#define SHOAL_MAX_GPU_LIST 64

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
  int ngpus;                /* entries of gpus; 0: every worker on the CPU */
  int gpus[SHOAL_MAX_GPU_LIST];  /* GPU of worker unit i is gpus[i % ngpus]; -1: the CPU */
} ShoalClusterConf;

typedef struct {
  ShoalConf *conf;          /* owned */
  char *name;
  gint64 train_steps;       /* resolved from epochs when given as epochs */
  double epochs;            /* 0 when the job gave train_steps */
  int test_freq;            /* steps between test runs; 0 = only at the end */
  int test_steps;           /* batches per test run; 0 = the whole test set */
  int disp_freq;            /* steps between progress lines */
  guint64 seed;
  int threads;              /* BLAS threads of this process; 0 = cores / local workers */
  gint64 checkpoint_freq;   /* steps between checkpoints; 0 = only at the end */
  char **init_from;         /* workspaces whose params initialise ours by name; empty = none */
  int cd_k;                 /* alg = cd: Gibbs steps of the RBM layers; 0: alg = bp */
  ShoalUpdaterConf updater;
  ShoalClusterConf cluster;
} ShoalJob;

/* Loads and validates path with the -o overrides (NULL-terminated list,
 * may be NULL).  Returns a new job (shoal_job_free) or NULL with error. */
ShoalJob *shoal_job_load (const char *path, const char *const *overrides, GError **error);
/* Same from text; `origin` names it in messages. */
ShoalJob *shoal_job_load_data (const char *text, const char *origin,
                               const char *const *overrides, GError **error);
void shoal_job_free (ShoalJob *job);

/* Resolves epochs into train_steps once the dataset size is known. */
void shoal_job_resolve_epochs (ShoalJob *job, gint64 records_per_epoch, int batch);

/* Where worker `worker` of group `group` computes ([cluster] gpus).  A
 * worker unit is a group whose workers share a process (it runs as one
 * net), else one worker; unit i - the group, or group * nworkers_per_group
 * + worker - runs on cuda:gpus[i % ngpus], or on the CPU for -1 or an
 * empty list.  So `gpus = 0,1` alternates groups between two GPUs and
 * `gpus = 0,-1` runs even groups on cuda:0 and odd ones on the CPU. */
ShoalDevice shoal_cluster_device (const ShoalClusterConf *cluster, int group, int worker);

/* The option tables, for `shoal help conf`. */
extern const ShoalOption shoal_job_options[];
extern const ShoalOption shoal_updater_options[];
extern const ShoalOption shoal_cluster_options[];

G_END_DECLS

#endif
