/* The "process" lines of metrics.jsonl: every interval, what this process
 * sent and received and, where it serves slices, how many updates its
 * server applied, how many late gradients it dropped and the staleness
 * of the updates (server/staleness.h).  A line is written only when
 * something moved since the last one, so that an idle process writes
 * nothing (the launcher's watchdog reads a growing metrics.jsonl as
 * progress), and always once at the end. */
#ifndef SHOAL_PROCESS_REPORT_H
#define SHOAL_PROCESS_REPORT_H

#include <glib.h>

#include "server/server.h"
#include "metrics/metrics.h"

G_BEGIN_DECLS

typedef struct _ShoalProcessReport ShoalProcessReport;

/* Starts a thread writing to `metrics` (borrowed) every interval_s
 * seconds (0: only the final line, no thread); server (borrowed, may be
 * NULL) is this process's.  Both must outlive the report.  NULL with
 * error when the thread cannot start ("rank R: process report: cannot
 * start thread process-report: ..."). */
ShoalProcessReport *shoal_process_report_start (ShoalMetricsWriter *metrics, int rank,
                                                ShoalServer *server, double interval_s, GError **error);
/* Writes the final line, stops the thread, frees; NULL is fine. */
void shoal_process_report_stop (ShoalProcessReport *report);

G_END_DECLS

#endif
