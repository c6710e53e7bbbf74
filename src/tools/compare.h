/* What shoal compare's two halves share: the runs of each scheme
 * (compare.c) and the report made from them (compare_report.c). */
#ifndef SHOAL_COMPARE_H
#define SHOAL_COMPARE_H

#include <glib.h>

#include "cluster/cluster_conf.h"
#include "tools/runlog.h"
#include "job/job.h"

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
  const char *fewer_why;  /* a sweep's point: why the scheme has no point below its smallest size
                           * (shoal_compare_expand; a static string); NULL: none was left out */
  gboolean async;
  int staleness;        /* [cluster] staleness, -1 none */
  int groups;
  GPtrArray *runs;      /* Run * */
  /* over the runs with a log */
  double final_mean, final_sd;   /* group 0's last test pass: the comparison's measure (Plan) */
  double sps, bytes_per_sample, wait_s, compute_s, peer_wait_s, final_loss;
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
  /* what the target and the final numbers measure: group 0's test
   * accuracy, or where the net has no accuracy layer (an RBM, an
   * autoencoder) its test loss, which is better lower */
  gboolean by_loss;
  /* [emulate] of every run (the first scheme's job says): its words for
   * the report, and the virtual clock's step, measured once */
  char *emulation;
  gboolean virtual_clock;
  double step_ms;
  int jobs;                /* runs at once (--jobs): each in a process of its own when more than 1 */
  /* gnuplot is in PATH: shoal_compare_draw draws the figures; without
   * it report.md says how to draw them later */
  gboolean gnuplot;
} Plan;

/* ---- the scale sweep (compare_scale.c): --workers 1,2,4,... ---------- */

/* "1,2,4": each a worker count of 1 to SHOAL_COMPARE_MAX_WORKERS, none
 * twice; the list sorted.  FALSE with an error naming --workers. */
#define SHOAL_COMPARE_MAX_WORKERS 4096
GArray *shoal_compare_parse_workers (const char *text, GError **error);
/* Each scheme once per worker count, named SCHEME-wN (schemes is
 * replaced; the free functions of a Scheme and a Run), but for the
 * sizes its topology cannot run (elastic averaging at 1 worker: a line on
 * stderr says so); FALSE with an error naming --workers when no point
 * is left. */
gboolean shoal_compare_expand (GPtrArray *schemes, const GArray *workers, GDestroyNotify scheme_free,
                               GDestroyNotify run_free, GError **error);
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
/* scale.csv, the scaling figures' data and script scale.gp (speedup,
 * efficiency, time to target against workers, per scheme) and their
 * section at the end of report.md; after shoal_compare_report. */
gboolean shoal_compare_scale_report (GPtrArray *schemes, const Plan *plan, double target, GError **error);

/* A time to target in seconds as the report prints it, into buf. */
const char *shoal_compare_seconds (double s, char *buf, gsize len);
/* The measure's words: "test accuracy" or "test loss" (plan->by_loss),
 * and its CSV column: final_accuracy or final_test_loss. */
const char *shoal_compare_measure (const Plan *plan);
const char *shoal_compare_final_column (const Plan *plan);
/* Summarises every scheme, chooses the target (given in *target, or 95 %
 * of the best mean final accuracy, written back; with by_loss 5 % above
 * the best mean final test loss) and writes
 * results.csv, the figures' data and script figures.gp and report.md
 * into plan->out.  FALSE with an IO error naming the file. */
gboolean shoal_compare_report (GPtrArray *schemes, const Plan *plan, double *target,
                               gboolean target_given, GError **error);
/* The figures' PNGs from figures.gp (and a sweep's scale.gp), once every
 * data file and report.md is written: the figures are a rendering of
 * them.  Without gnuplot (plan->gnuplot) a warning names the command
 * that draws them later, and TRUE; a script gnuplot fails on is an
 * error naming it and gnuplot's complaint (the other is still drawn). */
gboolean shoal_compare_draw (GPtrArray *schemes, const Plan *plan, GError **error);
/* Removes plan->out/png, a figure the report links, before anything is
 * drawn: an earlier comparison's PNG of the name (--force) must not show
 * under the link where this one is not drawn (no gnuplot, a script
 * gnuplot failed on). */
void shoal_compare_clear_figure (const Plan *plan, const char *png);

/* A sweep's defaults that keep a point's cost following the samples it
 * trains (compare_scale.c): test passes of group 0 only ([job]
 * test_groups = 1: the report reads no other group's) of at most 2,048
 * rows each ([job] test_steps), unless the overrides set them. */
void shoal_compare_sweep_defaults (const Plan *plan, const ShoalJob *job, gint64 batch, GPtrArray *out);

/* compare.c: a prepared run, run (exit status; 130: interrupted), and
 * what it left read into run->log. */
typedef ShoalJob *(*ShoalComparePrepare) (Plan *plan, Scheme *s, int r, Run **run, GError **error);
int shoal_compare_execute (const Plan *plan, const Scheme *s, ShoalJob *job, Run *run);
void shoal_compare_collect (Run *run, const Scheme *s);
/* Every scheme's runs, repeat by repeat, plan->jobs at a time
 * (compare_jobs.c); counts the failed runs, stops starting runs once one
 * was interrupted. */
void shoal_compare_run_points (Plan *plan, GPtrArray *schemes, ShoalComparePrepare prepare, gboolean *interrupted,
                               int *failed);
/* --jobs' default and check: the cores for virtual-clock runs, 1 for
 * real ones (which time themselves against the machine: refused above
 * 1); FALSE with an error naming --jobs. */
gboolean shoal_compare_resolve_jobs (Plan *plan, int asked, GError **error);
/* The overrides every run gets, with job.threads = cores / jobs added
 * when several runs share the cores and the user set no job.threads
 * (takes `overrides`, returns the array to use). */
char **shoal_compare_jobs_overrides (const Plan *plan, char **overrides);

G_END_DECLS

#endif
