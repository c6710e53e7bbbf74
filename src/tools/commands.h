/* The subcommands of the shoal CLI; each parses its own flags with
 * GOptionContext and returns the process exit status. */
#ifndef SHOAL_COMMANDS_H
#define SHOAL_COMMANDS_H

#include "cluster/layout.h"
#include "dashboard/dashboard.h"
#include "job/job.h"
#include "job/model.h"

int shoal_cmd_run (int argc, char **argv);
int shoal_cmd_proc (int argc, char **argv);
int shoal_cmd_certs (int argc, char **argv);
int shoal_cmd_import (int argc, char **argv);
int shoal_cmd_layers (int argc, char **argv);
int shoal_cmd_inspect (int argc, char **argv);
int shoal_cmd_compare (int argc, char **argv);
int shoal_cmd_plot (int argc, char **argv);
int shoal_cmd_calibrate (int argc, char **argv);
int shoal_cmd_serve (int argc, char **argv);
/* serve.c: the dashboard's token made from the one in a file
 * (core/token.h: shoal_token_read_file, shoal_token_derive). */
char *shoal_serve_read_token (const char *path, GError **error);
/* run/compare --serve WHERE ([ADDRESS:]PORT; a port alone is loopback):
 * the dashboard over `dir` (made if missing) from a thread, its address
 * printed for `who`; a listen address that is not loopback gets a token
 * of its own.  Stop it with shoal_dashboard_free. */
ShoalDashboard *shoal_serve_beside (const char *dir, const char *where, const char *who, GError **error);

/* plot.c: the curves of the runs in `workspaces` (NULL-terminated; a
 * workspace or its metrics.jsonl) into the PNG `out`: x "time" or
 * "samples", y "accuracy" or "loss". */
gboolean shoal_plot_runs (char **workspaces, const char *out, const char *x, const char *y, GError **error);
int shoal_cmd_predict (int argc, char **argv);
int shoal_cmd_eval (int argc, char **argv);

/* model_data.c: a trained model for predict and eval. */
typedef struct {
  const char *conf;                /* JOB.conf (a workspace's job.conf is the conf as run) */
  char *from;                      /* workspace or params file */
  char *data;                      /* LMDB dataset dir or .csv; NULL: the conf's own test set */
  int label_column;                /* CSV: the label's column, -1 none */
  gboolean skip_header;            /* CSV */
  char **overrides;                /* -o, may be NULL */
  const char *output;              /* layer to predict with; NULL: the first loss's scores */
  gboolean probabilities;
  char **plugins;                  /* --plugin: loaded before the conf, may be NULL */
  gboolean partial;                /* --partial: params by name, the others ignored */
} ShoalToolModelArgs;
/* Adds the options predict and eval share (--from, --data,
 * --label-column, --header, -o, --plugin, --partial) to ctx's main group, filling *a (whose
 * label_column should be set to its default, 0, first); free what they
 * hold with shoal_tool_model_args_clear. */
void shoal_tool_model_add_options (GOptionContext *ctx, ShoalToolModelArgs *a);
void shoal_tool_model_args_clear (ShoalToolModelArgs *a);
/* The model with its input's test set set to a->data (a CSV is imported
 * into a new temporary directory, *tmpdir: give it to
 * shoal_tool_model_cleanup, also on failure). */
ShoalModel *shoal_tool_model_open (const ShoalToolModelArgs *a, char **tmpdir, GError **error);
void shoal_tool_model_cleanup (char *tmpdir);
int shoal_cmd_sample (int argc, char **argv);

typedef struct {
  gboolean quiet;
  int grace_s;              /* after a child failed, how long the others may go without writing
                             * metrics before they are stopped */
  gboolean resume;          /* continue the workspace's run from its newest common checkpoint */
  int max_restarts;         /* restarts after a server process died, and (rejoin) of lost groups */
  gboolean rejoin;          /* restart a lost worker group of an asynchronous scheme (all_groups_required
                             * = false) while the others train: it rejoins with the current values */
  gboolean overwrite;       /* remove an earlier run's files instead of moving them aside (--force) */
  gboolean oversubscribe;   /* start more processes per core than [cluster] max_procs_per_core */
} ShoalLaunchOptions;

/* launch.c: runs every rank of `layout` as a `shoal proc` child on
 * loopback with the job's resolved conf in `workspace`, waits for all and
 * prints each rank's exit and each group's final test result.  Returns
 * the exit status. */
int shoal_launch (ShoalJob *job, const ShoalLayout *layout, const char *workspace, const ShoalLaunchOptions *o);

/* SIGINT and SIGTERM ask the workers of this process to stop at their next
 * step with a checkpoint (worker.h); a second signal ends the process, and
 * so does `stop_timeout_s` passing after the first (a stop that waits on
 * a peer or link that does not answer): it exits with status 1, saying
 * so on stderr.  `rank` (-1: none) of a `shoal run` launcher's job also
 * tells the launcher of a signal it did not send (SHOAL_BEAT_STOP). */
void shoal_install_stop_handlers (double stop_timeout_s, int rank);
/* Whether shoal_install_stop_handlers found this process a rank of a
 * `shoal run` launcher. */
gboolean shoal_stop_has_launcher (void);

#endif
