/* A finished run's metrics.jsonl, read back (with json-glib) into the
 * curves and totals that `shoal compare` and `shoal plot` draw and
 * tabulate.  Every field is explained in README.md, "Metrics".
 *
 * "Samples seen" is job-wide: at time t, the rows every worker unit had
 * trained on, each unit's count interpolated linearly between its train
 * lines (a unit's count before its first line grows from 0 at time 0).
 * Where lines carry "vtime" (a virtual-clock run) it is the time.
 * Accuracy curves are the reporting group's test passes (the job's
 * reported accuracy); the loss curve is its first unit's train lines.
 * The reporting group is group 0, unless group 0 ended before others
 * (it was lost): then the lowest of the groups that went furthest. */
#ifndef SHOAL_RUNLOG_H
#define SHOAL_RUNLOG_H

#include <glib.h>

#include "server/staleness.h"

G_BEGIN_DECLS

typedef struct {
  double time;        /* s on the job's clock: virtual seconds for a virtual-clock run */
  double samples;     /* job-wide samples seen then */
  double value;       /* test accuracy (or loss where the net has no accuracy) / train loss */
  double loss;        /* test points: the test loss */
  gint64 step;
} ShoalRunPoint;

typedef struct {
  int group;                /* the reporting group (above) */
  GArray *tests;            /* ShoalRunPoint: its test passes in time order */
  GArray *train;            /* ShoalRunPoint: its first unit's train lines (value = loss) */
  gboolean has_accuracy;    /* the test points' value is an accuracy */
  double samples;           /* job-wide rows trained on at the end */
  double samples_per_sec;   /* the sum of the units' throughputs, test time excluded */
  double end_time;          /* the last line's time */
  guint64 bytes_sent;       /* every process, headers included */
  guint64 bytes_received;
  ShoalStaleness staleness; /* every server's updates with a known base version */
  gint64 updates, dropped;
  double compute_s, wait_s, peer_wait_s;  /* summed over the units */
  int units;                /* worker units that wrote train lines */
  gboolean virtual_time;    /* the lines carry "vtime" (a virtual-clock run): every time here is
                             * virtual, so are samples_per_sec, compute_s and wait_s */
  gint64 lines;
} ShoalRunLog;

/* Reads path; a line that is not a JSON object, or a train or test line
 * missing a field the log needs, is an error naming path:line. */
ShoalRunLog *shoal_run_log_read (const char *path, GError **error);
void shoal_run_log_free (ShoalRunLog *log);

/* The first test point at or above `target` (at or below it where
 * lower_is_better: a test loss); NULL when none. */
const ShoalRunPoint *shoal_run_log_reached (const ShoalRunLog *log, double target, gboolean lower_is_better);
/* The last test point (NULL when none). */
const ShoalRunPoint *shoal_run_log_final (const ShoalRunLog *log);

G_END_DECLS

#endif
