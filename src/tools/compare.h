/* What shoal compare's two halves share: the runs of each scheme
 * (compare.c) and the report made from them (compare_report.c). */
#ifndef SHOAL_COMPARE_H
#define SHOAL_COMPARE_H

#include <glib.h>

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

/* Summarises every scheme, chooses the target (given in *target, or 95 %
 * of the best mean final accuracy, written back) and writes
 * results.csv, the figures' data and script, the PNGs (gnuplot) and
 * report.md into plan->out.  FALSE with an IO error naming the file. */
gboolean shoal_compare_report (GPtrArray *schemes, const Plan *plan, double *target,
                               gboolean target_given, GError **error);

G_END_DECLS

#endif
