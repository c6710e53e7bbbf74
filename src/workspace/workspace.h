/* A workspace: the directory a run writes (`--workspace`, default
 * workspace/JOBNAME): job.conf (the conf as run), metrics.jsonl, and
 * checkpoint/rank-R (each rank's checkpoint store, data/checkpoint.h),
 * whose rank 0 also keeps the trained params by name ("params"). */
#ifndef SHOAL_WORKSPACE_H
#define SHOAL_WORKSPACE_H

#include <glib.h>

G_BEGIN_DECLS

/* The checkpoint directory of rank `rank` in a workspace (g_free). */
char *shoal_checkpoint_dir (const char *workspace, int rank);

/* The newest params blob (core/param_blob.h) a run saved in `workspace`,
 * a new GBytes, and its step in *step (may be NULL).  NULL with an error
 * naming the workspace when it has no checkpoint or no params. */
GBytes *shoal_workspace_params (const char *workspace, gint64 *step, GError **error);
/* Params from a workspace (its newest, as above) or from a params file
 * (the layout of shoal/param.h): what --from, shoal_model_load and
 * [job] init_from take.  NULL with SHOAL_ERROR_IO when it is neither. */
GBytes *shoal_workspace_params_from (const char *from, GError **error);

G_END_DECLS

#endif
