/* Which run owns a workspace.  job.conf, metrics.jsonl and checkpoint/
 * must describe one run: the run whose checkpoints they are.
 * - The workspace is this run's alone while it runs: the claim takes its
 *   lock (workspace/workspace_lock.h) and refuses a run that finds it held.
 * - A fresh run into a workspace an earlier run wrote moves that run's
 *   files aside, into WORKSPACE/previous/N/, and says where (with
 *   `overwrite`, shoal run --force, it removes them instead).
 * - A resumed run must be the same model, data and layout as the run
 *   whose checkpoints it continues: job.conf is compared with its conf by
 *   the rule of workspace/run_identity.h (what may change on a resume:
 *   how long and how often, the updater's rates, the [cluster] timeouts
 *   and limits, a data layer's paths); the first other difference is an
 *   error naming the key and both values (and the two model fingerprints
 *   where it is the model's).  A job.conf missing, unreadable or damaged
 *   refuses the resume, naming it: nothing else says which run the
 *   checkpoints are.
 * - job.conf is written only once the run is accepted, so a refused run
 *   leaves the workspace as it was.
 * And on resume, metrics.jsonl keeps only what the checkpoint holds: the
 * lines up to its step, and the job's clock goes on from the time the
 * checkpoint was taken (a "clock" blob every unit saves beside its
 * state). */
#ifndef SHOAL_WORKSPACE_CLAIM_H
#define SHOAL_WORKSPACE_CLAIM_H

#include <glib.h>

#include "cluster/layout.h"
#include "core/conf.h"
#include "data/checkpoint.h"

G_BEGIN_DECLS

/* Makes the folder `workspace` and any parents it lacks.  *created_top
 * gets the topmost folder this call made (g_free; NULL when the workspace
 * was there), so that a run refused before it wrote anything can remove
 * what it made with shoal_workspace_unmake.  FALSE with SHOAL_ERROR_IO. */
gboolean shoal_workspace_make (const char *workspace, char **created_top, GError **error);
/* Removes `workspace` and its parents up to created_top, each only while
 * it is empty (a file someone put there keeps it).  created_top NULL:
 * nothing. */
void shoal_workspace_unmake (const char *workspace, const char *created_top);

/* Takes `workspace` (created) for a run of `conf` (as resolved: topology
 * and overrides applied), then writes conf as WORKSPACE/job.conf.
 * *moved_to (may be NULL) gets where an earlier run's files went (g_free;
 * NULL when nothing moved).  FALSE with error, the workspace as it was: a
 * resume of another run or without job.conf, a directory that cannot be
 * made or moved. */
gboolean shoal_workspace_claim (const char *workspace, ShoalConf *conf, gboolean resume, gboolean overwrite,
                                char **moved_to, GError **error);

/* Whether a run of `conf` may resume the run in `workspace`, as
 * shoal_workspace_claim checks it (job.conf read, nothing changed). */
gboolean shoal_workspace_check_resume (const char *workspace, ShoalConf *conf, GError **error);

/* The job's clock (seconds) when the checkpoint of `step` was taken: the
 * latest "clock" blob of that step in rank `rank`'s store, or -1 when it
 * has none (an older checkpoint, a server-only rank). */
double shoal_workspace_checkpoint_clock (const char *workspace, int rank, gint64 step);
/* The same from one store this process holds open (LMDB allows one open
 * environment per file and process). */
double shoal_workspace_store_clock (ShoalCheckpoint *store, gint64 step);

/* Resume: rewrites WORKSPACE/metrics.jsonl without the lines a killed run
 * wrote past the checkpoint - a "step" beyond its group's step
 * (group_steps[g] for groups 0 .. ngroups - 1; `step` for the others and
 * lines without a group), or no step and a "time" beyond `clock` (when
 * clock >= 0).  Nothing when the file does
 * not exist.  *resume_clock (may be NULL): where the resumed run's clock
 * goes on from - `clock`, or the latest "time" of a kept line where that
 * is later (a test pass of the checkpoint's step runs after its
 * checkpoint was taken, and its line stays), so times never go back. */
gboolean shoal_workspace_trim_metrics (const char *workspace, gint64 step, const gint64 *group_steps, int ngroups,
                                       double clock, double *resume_clock, GError **error);
/* The same for a rank started without a launcher (mpirun, srun), whose
 * fellow ranks may be appending already: only rank `rank`'s own lines
 * past the checkpoint go (its "process" lines, those of the units
 * `layout` gives it; lines of no rank count as rank 0's), rewritten in
 * place under the lock the metrics writers append under (metrics.c).
 * *resume_clock from `clock` and rank's own kept lines. */
gboolean shoal_workspace_trim_rank_metrics (const char *workspace, const ShoalLayout *layout, int rank, gint64 step,
                                            const gint64 *group_steps, int ngroups, double clock,
                                            double *resume_clock, GError **error);

/* The blob a unit saves beside its state: the job's clock, seconds. */
GBytes *shoal_workspace_clock_blob (double seconds);

G_END_DECLS

#endif
