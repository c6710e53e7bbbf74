/* Running a job: what it takes and gives (ShoalRunOptions,
 * ShoalRunResult), and the rules the real clock (run/runner.c) and the
 * virtual one (emulate/emulator.c) both apply, so that they run the same
 * units, slices and server options. */
#ifndef SHOAL_JOB_RUN_H
#define SHOAL_JOB_RUN_H

#include <glib.h>

#include "cluster/layout.h"
#include "partition/partition.h"
#include "server/server.h"
#include "job/job.h"

G_BEGIN_DECLS

typedef struct {
  const char *workspace;   /* directory for metrics.jsonl and job.conf; created */
  gboolean quiet;          /* no progress lines */
  /* Multi-process runs (`shoal proc`, or children forked by `shoal run`):
   * this process's rank, and per rank the "host:port" its RPC server
   * listens on (NULL for ranks without servers).  endpoints NULL: the
   * whole layout runs in this process. */
  int rank;
  char **endpoints;        /* nprocs entries; borrowed */
  const char *token;       /* job token carried by every call; borrowed */
  const char *tls_dir;     /* the job's TLS credentials (shoal certs) over [tls]'s; NULL: [tls]'s */
  char **hosts;            /* each rank's host (a hostfile's), for [tls]; NULL: the endpoints' */
  gboolean append_metrics; /* several processes append to one metrics.jsonl */
  /* Resume from WORKSPACE/checkpoint: at resume_step, or (resume_step < 0)
   * at the newest step this process's checkpoint has. */
  gboolean resume;
  gint64 resume_step;
  /* A rank resumed without a launcher (shoal proc --resume under mpirun,
   * srun): drops its own metrics lines past the job's resume plan and
   * gives the job's clock there (*clock, seconds; -1 unknown).  Called
   * once the rank's servers took the checkpoint up, so that a refused
   * resume leaves the lines; its clock then goes on from *clock.  NULL:
   * none. */
  gboolean (*trim_metrics) (gpointer data, double *clock, GError **error);
  gpointer trim_data;
  /* Worker threads of all the ranks on this machine: with [job] threads
   * 0 its cores are divided among them (worker/threads.h; two processes
   * with two BLAS threads each on two cores run 2.4x slower).  0: this
   * process's workers. */
  int host_workers;
  /* A restarted rank joining its running job (shoal proc --rejoin): its
   * units resume from this rank's newest checkpoint (or begin at 0), a
   * Hogwild server group takes the current values from the slices'
   * masters, and the others take the rank back (run/membership.h). */
  gboolean rejoin;
  /* A one-process run (endpoints NULL) into a workspace an earlier run
   * wrote: remove its files instead of moving them to
   * WORKSPACE/previous/N (workspace/workspace_claim.h; shoal run --force). */
  gboolean overwrite;
  /* Called once, from any thread, when this process must stop the job
   * because a rank it needs was lost (or it was dropped); may be NULL.
   * shoal_run_job still returns that error once its threads ended. */
  void (*on_fatal) (gpointer data, const GError *why);
  gpointer fatal_data;
} ShoalRunOptions;

typedef struct {
  int group, worker;       /* which worker these numbers are of; -1 when this process has none */
  gint64 steps;
  double test_loss;
  double test_accuracy;    /* < 0 when the net has no accuracy layer */
  double samples_per_sec;  /* training throughput of the run */
  gboolean stopped;        /* stopped early on request (SIGINT/SIGTERM), checkpoint saved; a process
                            * of servers alone (group -1): the request ended its wait for the
                            * worker processes before every one said done */
  gboolean follower;       /* this process's workers followed their group's leader (a group
                            * spread over processes): the leader has the numbers */
  char *lost_groups;       /* worker groups this process dropped, and why; NULL: none (free it) */
} ShoalRunResult;

/* How many slices the param buffer is cut into: the layout's count times
 * whatever brings slices near 512 KiB (the same in every process). */
int shoal_runner_slice_count (const ShoalLayout *layout, size_t total_floats);
/* Whether a unit's param client reads its server's values in place
 * (shoal_param_client_new_shared: no comm thread, no copy): the job's
 * only process holds the server and its only unit (units_in_process). */
gboolean shoal_runner_reads_server_in_place (const ShoalLayout *layout, int units_in_process);
/* The options of a server group's ShoalServer: mode, contributors, the
 * asynchronous schemes' lr scale (async_lr), SSP, backup workers,
 * Hogwild's baseline and delta weights.  group_pushes: a group pushes
 * one summed gradient (its workers share a process, or it runs as one
 * net spread over processes). */
void shoal_runner_server_options (const ShoalLayout *layout, gboolean group_pushes, int nslices,
                                  ShoalServerOptions *out);
/* A batch-split group of k workers spread over processes: each worker
 * reads batch_size / k rows (overrides the job's conf). */
gboolean shoal_runner_share_batch (ShoalJob *job, int k, GError **error);
/* How the layout's groups run: whole (each group's k workers share a
 * process: one partitioned net), or spread over processes as one net
 * with bridges (spread_net: not every layer is batch-split), or else as
 * k nets of one worker each pushing their own gradients. */
gboolean shoal_runner_groups_as_one (ShoalJob *job, const ShoalClusterConf *c, gboolean *whole,
                                     gboolean *spread_net, GError **error);
/* The options the net of one unit is built with: seed, group, worker,
 * data shard, cd_k, memory budget, device (shoal_runner_unit_net). */
ShoalNetOptions shoal_runner_unit_options (ShoalJob *job, const ShoalClusterConf *c, ShoalMember unit,
                                           gboolean per_group, gboolean on_device);
/* The net of one unit, with the job's seed, data shard, training
 * algorithm (cd_k) and init_from: the whole group of unit_size workers
 * partitioned among its threads (per_group), or one worker of a
 * batch-split group; wire: a group spread over processes (else NULL);
 * on_device: on the [cluster] device of the unit (else the host). */
ShoalGroupNet *shoal_runner_unit_net (ShoalJob *job, const ShoalClusterConf *c, ShoalMember unit, int unit_size,
                                      gboolean per_group, gboolean on_device, const ShoalGroupWire *wire,
                                      GError **error);
/* [job] init_from: copies params by name (or as <param>_init_from renames
 * them) from those workspaces' newest checkpoints into store. */
gboolean shoal_runner_init_from (ShoalJob *job, ShoalParamStore *store, GError **error);

G_END_DECLS

#endif
