/* metrics.jsonl: one JSON object per line, appended by every worker of
 * the process, so runs of different schemes can be compared and plotted.
 * Fields: time (s since the job started: $SHOAL_JOB_START_US, set by the
 * launcher for every process, else since the writer opened), step, group, worker, phase
 * ("train"/"test"), loss, accuracy, samples_per_sec (train only), and
 * "metrics": {LAYER: value} for the net's other metric layers (e.g. an
 * RBM's rbm_free_energy). */
#ifndef SHOAL_METRICS_H
#define SHOAL_METRICS_H

#include <glib.h>

#include "partition/net.h"

G_BEGIN_DECLS

typedef struct _ShoalMetricsWriter ShoalMetricsWriter;

/* Creates or truncates `path` (append = TRUE keeps what is there).
 * Returns a writer or NULL with error set. */
ShoalMetricsWriter *shoal_metrics_open (const char *path, gboolean append, GError **error);
/* Flushes and closes; NULL is fine. */
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

typedef struct {
  gint64 step;
  int group, worker;
  const char *phase;
  double loss;
  double accuracy;          /* < 0: not reported */
  double samples_per_sec;   /* < 0: not reported */
  const ShoalOtherMetrics *others;  /* may be NULL */
} ShoalMetricsRecord;

/* Thread-safe. */
void shoal_metrics_write (ShoalMetricsWriter *writer, const ShoalMetricsRecord *record);
double shoal_metrics_elapsed (ShoalMetricsWriter *writer);

G_END_DECLS

#endif
