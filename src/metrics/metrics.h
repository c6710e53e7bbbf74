/* metrics.jsonl: one JSON object per line, appended by every process of
 * the job, so that runs of different schemes can be compared and
 * plotted (`shoal compare`, `shoal plot`; every field in README.md,
 * "Metrics").
 *
 * Every line starts with the same clock: "time", seconds since the job
 * started ($SHOAL_JOB_START_US, set by the launcher for every process,
 * else since the writer opened), then "phase":
 *   "train"    a worker unit's last disp_freq steps: step, group, worker,
 *              loss, accuracy, samples_per_sec, samples (its rows so
 *              far), compute_s, wait_s, peer_wait_s (this interval);
 *   "test"     a test pass: step, group, worker, loss, accuracy, samples;
 *   "process"  a process's traffic and its server's updates since its
 *              last such line: rank, bytes_sent, bytes_received (since
 *              the process started), and where it serves slices updates,
 *              dropped and the staleness summary and histogram;
 *   "cluster"  the launcher's view of the job (metrics/cluster_log.h):
 *              the layout, each rank's liveness, restarts.
 * Train and test lines end with "metrics": {LAYER: value} for the net's
 * metric layers other than the accuracy (an RBM's rbm_free_energy).
 * The clock fields are written in one place (line_begin in metrics.c):
 * a virtual-clock run (emulate/emulator.h) adds "vtime", its virtual
 * seconds, beside "time"; readers that know it (tools/runlog.c) use it
 * in place of "time", others need not change. */
#ifndef SHOAL_METRICS_H
#define SHOAL_METRICS_H

#include <glib.h>

#include "net/net.h"
#include "server/staleness.h"

G_BEGIN_DECLS

typedef struct _ShoalMetricsWriter ShoalMetricsWriter;

/* Creates or truncates `path` (append = TRUE keeps what is there).
 * Returns a writer or NULL with error set. */
ShoalMetricsWriter *shoal_metrics_open (const char *path, gboolean append, GError **error);
/* Closes, warning how many lines could not be written (a full disk: the
 * first failed line warns at once, a half-written one is taken back);
 * NULL is fine. */
void shoal_metrics_close (ShoalMetricsWriter *writer);

/* Means of the metric layers other than the loss and the accuracy, over
 * a window of train steps or a test pass: add each batch, weighted. */
#define SHOAL_METRICS_MAX_OTHERS 8
typedef struct {
  int n;
  const char *name[SHOAL_METRICS_MAX_OTHERS];  /* layer names, borrowed from the net */
  double sum[SHOAL_METRICS_MAX_OTHERS];
  double weight;
} ShoalOtherMetrics;

/* The metric reported as accuracy: the first accuracy layer's; -1 if none. */
double shoal_metrics_accuracy (const ShoalMetric *m, guint n);
void shoal_other_metrics_add (ShoalOtherMetrics *o, const ShoalMetric *m, guint n, double weight);
/* The mean of other metric i. */
double shoal_other_metrics_mean (const ShoalOtherMetrics *o, int i);
/* " NAME value" for each, appended to s (progress lines). */
void shoal_other_metrics_append (const ShoalOtherMetrics *o, GString *s);

/* A "train" or "test" line.  Numbers < 0 are not written. */
typedef struct {
  gint64 step;
  int group, worker;
  const char *phase;        /* "train" or "test" */
  double loss;
  double accuracy;          /* < 0: not reported */
  double samples_per_sec;   /* < 0: not reported */
  gint64 samples;           /* rows this unit trained on so far; < 0: not reported */
  double compute_s;         /* train: seconds in forward and backward this interval */
  double wait_s;            /* train: seconds blocked on the servers this interval */
  double peer_wait_s;       /* train: seconds (summed over the unit's threads) waiting for the
                             * group's other processes; < 0: not reported */
  const ShoalOtherMetrics *others;  /* the other metric layers; may be NULL */
} ShoalMetricsRecord;

/* A "process" line. */
typedef struct {
  int rank;
  guint64 bytes_sent, bytes_received;  /* since the process started */
  gboolean serves;                      /* the process serves slices: the fields below count */
  gint64 updates;                       /* updates applied this interval */
  gint64 dropped;                       /* late SYNC gradients dropped this interval */
  const ShoalStaleness *staleness;      /* of this interval's updates */
} ShoalProcessRecord;

/* Thread-safe. */
void shoal_metrics_write (ShoalMetricsWriter *writer, const ShoalMetricsRecord *record);
void shoal_metrics_write_process (ShoalMetricsWriter *writer, const ShoalProcessRecord *record);
/* A line of another phase: `fields` are the members after "phase", each
 * starting with a comma (",\"event\":\"layout\",..."). */
void shoal_metrics_write_fields (ShoalMetricsWriter *writer, const char *phase, const char *fields);
double shoal_metrics_elapsed (ShoalMetricsWriter *writer);
/* A resumed run's clock goes on: elapsed is `seconds` now (the job's
 * clock when its checkpoint was taken). */
void shoal_metrics_continue_clock (ShoalMetricsWriter *writer, double seconds);
/* The virtual clock: lines written from now on carry "vtime": vtime
 * (seconds; < 0: no field).  The emulator writes from one thread. */
void shoal_metrics_set_vtime (ShoalMetricsWriter *writer, double vtime);

/* Reading a line back: the number after "key": in one metrics.jsonl
 * line, into *out; FALSE where the key is absent or no number follows.
 * For the few fields the launcher and a resume look at, where parsing
 * the whole line as JSON would buy nothing. */
gboolean shoal_metrics_line_number (const char *line, const char *key, double *out);

G_END_DECLS

#endif
