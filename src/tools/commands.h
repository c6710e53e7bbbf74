/* The subcommands of the shoal CLI; each parses its own flags with
 * GOptionContext and returns the process exit status. */
#ifndef SHOAL_COMMANDS_H
#define SHOAL_COMMANDS_H

#include "cluster/layout.h"
#include "worker/job.h"

int shoal_cmd_run (int argc, char **argv);
int shoal_cmd_proc (int argc, char **argv);
int shoal_cmd_import (int argc, char **argv);
int shoal_cmd_layers (int argc, char **argv);
int shoal_cmd_inspect (int argc, char **argv);
int shoal_cmd_compare (int argc, char **argv);
int shoal_cmd_plot (int argc, char **argv);

/* plot.c: the curves of the runs in `workspaces` (NULL-terminated; a
 * workspace or its metrics.jsonl) into the PNG `out`: x "time" or
 * "samples", y "accuracy" or "loss". */
gboolean shoal_plot_runs (char **workspaces, const char *out, const char *x, const char *y, GError **error);

/* launch.c: runs every rank of `layout` as a `shoal proc` child on
 * loopback with the job's resolved conf in `workspace`, waits for all and
 * prints each rank's exit and each group's final test result.  grace_s:
 * after a child failed, how long the others may go without writing
 * metrics before they are stopped.  Returns the exit status. */
int shoal_launch (ShoalJob *job, const ShoalLayout *layout, const char *workspace, gboolean quiet,
                  int grace_s,
                  gboolean resume, int max_restarts);

/* SIGINT and SIGTERM ask the workers of this process to stop at their next
 * step with a checkpoint (worker.h); a second signal ends the process. */
void shoal_install_stop_handlers (void);

#endif
