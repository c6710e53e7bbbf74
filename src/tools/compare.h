/* What shoal compare's two halves share: the runs of each scheme
 * (compare.c) and the report made from them (compare_report.c). */
#ifndef SHOAL_COMPARE_H
#define SHOAL_COMPARE_H

#include <glib.h>

#include "cluster/cluster_conf.h"
#include "tools/runlog.h"

G_BEGIN_DECLS

typedef enum { BUDGET_CONF, BUDGET_SAMPLES, BUDGET_SECONDS } BudgetKind;

typedef struct {
  BudgetKind kind;
  double amount;
} Budget;

typedef struct {
  int repeat;
  guint64 seed;
  gint64 train_steps;
  char *workspace;
  int status;           /* the run's exit status */
  ShoalRunLog *log;     /* NULL when it left no readable metrics */
} Run;

typedef struct {
  char *name;
  char *conf;           /* the topology file */
  char *base;           /* a scale sweep's point: the scheme's own name (owned); NULL: not a sweep */
  int workers;          /* a sweep's point: workers it runs with; 0: the topology's own */
  gboolean async;
  int staleness;        /* [cluster] staleness, -1 none */
  int groups;
  GPtrArray *runs;      /* Run * */
  /* over the runs with a log */
  double acc_mean, acc_sd, sps, bytes_per_sample, wait_s, compute_s, peer_wait_s, final_loss;
  double time_to_target, samples_to_target;   /* means over the runs that reached it; < 0 none */
  int reached, finished;
  gint64 dropped;
  ShoalStaleness staleness_hist;
} Scheme;


typedef struct {
  const char *job_path;
  char **overrides;
  Budget budget;
  double budget_samples;   /* BUDGET_CONF: the job's own; BUDGET_SAMPLES: given */
  int points;              /* test passes per run */
  int repeats;
  const char *out;
  gboolean quiet;
  /* [emulate] of every run (the first scheme's job says): its words for
   * the report, and the virtual clock's step, measured once */
  char *emulation;
  gboolean virtual_clock;
  double step_ms;
} Plan;

/* ---- the scale sweep (compare_scale.c): --workers 1,2,4,... ---------- */

/* "1,2,4": each a worker count of 1 to SHOAL_COMPARE_MAX_WORKERS, none
 * twice; the list sorted.  FALSE with an error naming --workers. */
#define SHOAL_COMPARE_MAX_WORKERS 4096
GArray *shoal_compare_parse_workers (const char *text, GError **error);
/* Each scheme once per worker count, named SCHEME-wN (schemes is
 * replaced; the free functions of a Scheme and a Run). */
void shoal_compare_expand (GPtrArray *schemes, const GArray *workers, GDestroyNotify scheme_free,
                           GDestroyNotify run_free);
/* The overrides that run scheme point s (s->workers > 0) at its size:
 * a synchronous scheme's one group gets s->workers workers, one to a
 * process, each with the job's batch (the group's batch grows with it:
 * weak scaling, where [cluster] sync_lr applies); an asynchronous one
 * gets s->workers groups of one worker, Hogwild a server group each,
 * AllReduce's co-located servers one per worker, backup workers about
 * 5 % of them (Chen et al.).  `cluster` is the scheme's own, batch the
 * job's, input_group its input layer's conf group, step_ms the job's
 * [emulate] step_ms (a group batch's: scaled with it; 0: none). */
void shoal_compare_scale_overrides (const Scheme *s, const ShoalClusterConf *cluster, gint64 batch,
                                    const char *input_group, double step_ms, GPtrArray *out);
/* scale.csv, the scaling figures (speedup, efficiency, time to target
 * against workers, per scheme) and their section at the end of
 * report.md; after shoal_compare_report. */
gboolean shoal_compare_scale_report (GPtrArray *schemes, const Plan *plan, double target, GError **error);

/* Summarises every scheme, chooses the target (given in *target, or 95 %
 * of the best mean final accuracy, written back) and writes
 * results.csv, the figures' data and script, the PNGs (gnuplot) and
 * report.md into plan->out.  FALSE with an IO error naming the file. */
gboolean shoal_compare_report (GPtrArray *schemes, const Plan *plan, double *target,
                               gboolean target_given, GError **error);

G_END_DECLS

#endif
