/* [emulate] fault_group / fault_at in real time: the processes of the
 * lost group end themselves with SIGKILL at that moment of the job's
 * clock, exactly as if the machine had gone (no checkpoint, no goodbye
 * to the servers), and the launcher's rules for a lost group apply
 * (tools/launch.c, [cluster] all_groups_required). */
#ifndef SHOAL_FAULT_TIMER_H
#define SHOAL_FAULT_TIMER_H

#include <glib.h>

#include "metrics/metrics.h"

G_BEGIN_DECLS

typedef struct _ShoalFaultTimer ShoalFaultTimer;

/* Starts a thread that kills this process `at_s` seconds into the job
 * (the clock of `clock`, borrowed; it must outlive the timer).  `what`
 * names the process in the last log line and in the error.  NULL with
 * error when the thread cannot start ("WHAT: [emulate] fault timer:
 * cannot start thread fault-timer: ..."). */
ShoalFaultTimer *shoal_fault_timer_start (double at_s, ShoalMetricsWriter *clock, const char *what,
                                          GError **error);
/* The job ended first: stops and frees the timer.  NULL is fine. */
void shoal_fault_timer_stop (ShoalFaultTimer *timer);

G_END_DECLS

#endif
