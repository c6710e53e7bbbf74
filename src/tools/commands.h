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
int shoal_cmd_sample (int argc, char **argv);

/* launch.c: the job conf at job_path with the [cluster] section of
 * topology_path (may be NULL) in place of its own, then the overrides.
 * The topology file must hold only [cluster] and be a valid layout by
 * itself; its errors name its own lines.  Returns a new job or NULL. */
ShoalJob *shoal_load_job_topology (const char *job_path, const char *topology_path,
                                   const char *const *overrides, GError **error);
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
