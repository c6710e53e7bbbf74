/* Where a resumed multi-process job goes on from.
 *
 * A synchronous job (one worker group) has one step: the newest that
 * every rank's checkpoint store holds.  In an asynchronous scheme each
 * worker group counts its own steps and stops at its own (a SIGINT finds
 * Downpour's groups at 105 and 106): every rank goes on from its own
 * newest step that the ranks sharing a worker group with it hold too, a
 * server-only rank from its own newest (its servers saved their slices
 * on every group's request, the last one after every group's last push:
 * server/server_checkpoint.c).  The job's clock goes on from the latest
 * of those checkpoints' clocks. */
#ifndef SHOAL_RESUME_PLAN_H
#define SHOAL_RESUME_PLAN_H

#include <glib.h>

#include "cluster/layout.h"

G_BEGIN_DECLS

typedef struct {
  int nprocs, ngroups;
  gint64 *rank_steps;    /* nprocs: the step each rank resumes at */
  gint64 *group_steps;   /* ngroups: the step each worker group resumes at */
  double clock;          /* the job's clock at those checkpoints; -1 unknown */
} ShoalResumePlan;

/* NULL with error (SHOAL_ERROR_DATA) when a rank has no step to resume at. */
ShoalResumePlan *shoal_resume_plan_new (const ShoalLayout *layout, const char *workspace, GError **error);
void shoal_resume_plan_free (ShoalResumePlan *plan);

/* "step 120", or "group 0 at step 105, group 1 at step 106" (g_free). */
char *shoal_resume_plan_describe (const ShoalResumePlan *plan);
/* Whether no rank's checkpoint in workspace holds anything yet (its
 * stores are made when a job starts, their first step saved only at
 * checkpoint_freq or a stop): a requeued job then starts over.  A store
 * that cannot be read may hold something: FALSE. */
gboolean shoal_resume_plan_nothing_saved (const ShoalLayout *layout, const char *workspace);

G_END_DECLS

#endif
