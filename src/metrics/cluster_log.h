/* The launcher's "cluster" lines in metrics.jsonl: what a dashboard
 * (`shoal serve`) shows of the job's processes.  Every line has
 * "phase":"cluster" and an "event":
 *   "layout"   at each start: "host", the [cluster] heartbeat_interval,
 *              heartbeat_timeout and progress_timeout, "nslices", and
 *              "ranks": per rank "rank", "endpoint" (where it listens, if
 *              it does), "holds" (its workers and servers in words),
 *              "workers" and "servers" ([group, index] pairs) and
 *              "slices" (the param slices its servers serve);
 *   "rank"     a rank's state changed: "rank", "state" (waiting: started,
 *              no heartbeat yet; alive; late: no heartbeat for
 *              SHOAL_LATE_BEATS intervals; lost: silent past
 *              heartbeat_timeout, wedged, or killed from outside; rejoined:
 *              a restart of a lost rank, alive; done; failed: ended with
 *              an error; stopped: by the launcher), "pid", "why";
 *   "restart"  the launcher restarted a rank to rejoin (rank >= 0) or the
 *              job from its checkpoint (rank -1): "rank", "restarts" so
 *              far, "max_restarts", "why". */
#ifndef SHOAL_CLUSTER_LOG_H
#define SHOAL_CLUSTER_LOG_H

#include <glib.h>

#include "cluster/layout.h"
#include "metrics/metrics.h"

G_BEGIN_DECLS

/* heartbeats missed before a rank shows as late */
#define SHOAL_LATE_BEATS 2.5

/* endpoints: "host:port" per rank, NULL where none listens (may be NULL). */
void shoal_cluster_log_layout (ShoalMetricsWriter *w, const ShoalLayout *layout, char **endpoints);
void shoal_cluster_log_rank (ShoalMetricsWriter *w, int rank, const char *state, int pid, const char *why);
void shoal_cluster_log_restart (ShoalMetricsWriter *w, int rank, int restarts, int max_restarts, const char *why);

G_END_DECLS

#endif
