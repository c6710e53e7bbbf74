/* metrics.jsonl: one JSON object per line, appended by every worker of
 * the process, so runs of different schemes can be compared and plotted.
 * Fields: time (s since the job started: $SHOAL_JOB_START_US, set by the
 * launcher for every process, else since the writer opened), step, group, worker, phase
 * ("train"/"test"), loss, accuracy, samples_per_sec (train only). */
#ifndef SHOAL_METRICS_H
#define SHOAL_METRICS_H

#include <glib.h>

G_BEGIN_DECLS

typedef struct _ShoalMetricsWriter ShoalMetricsWriter;

/* Creates or truncates `path` (append = TRUE keeps what is there).
 * Returns a writer or NULL with error set. */
ShoalMetricsWriter *shoal_metrics_open (const char *path, gboolean append, GError **error);
/* Flushes and closes; NULL is fine. */
void shoal_metrics_close (ShoalMetricsWriter *writer);

typedef struct {
  gint64 step;
  int group, worker;
  const char *phase;
  double loss;
  double accuracy;          /* < 0: not reported */
  double samples_per_sec;   /* < 0: not reported */
} ShoalMetricsRecord;

/* Thread-safe. */
void shoal_metrics_write (ShoalMetricsWriter *writer, const ShoalMetricsRecord *record);
double shoal_metrics_elapsed (ShoalMetricsWriter *writer);

G_END_DECLS

#endif
