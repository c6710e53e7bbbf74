/* Where a resumed multi-process job goes on from; see
 * workspace/resume_plan.h. */
#include "workspace/resume_plan.h"

#include "core/error.h"
#include "data/checkpoint.h"
#include "workspace/workspace.h"
#include "workspace/workspace_claim.h"

static gboolean
holds_group (const ShoalProcess *proc, int group)
{
  for (guint i = 0; i < proc->workers->len; i++)
    if (g_array_index (proc->workers, ShoalMember, i).group == group)
      return TRUE;
  return FALSE;
}

/* Whether ranks a and b hold workers of one group (a group spread over
 * processes stops, and resumes, as one). */
static gboolean
share_group (const ShoalLayout *layout, int a, int b)
{
  const ShoalProcess *pa = &layout->procs[a];
  for (guint i = 0; i < pa->workers->len; i++)
    if (holds_group (&layout->procs[b], g_array_index (pa->workers, ShoalMember, i).group))
      return TRUE;
  return FALSE;
}

ShoalResumePlan *
shoal_resume_plan_new (const ShoalLayout *layout, const char *workspace, GError **error)
{
  ShoalResumePlan *plan = g_new0 (ShoalResumePlan, 1);
  plan->nprocs = layout->nprocs;
  plan->ngroups = layout->conf.nworker_groups;
  plan->rank_steps = g_new (gint64, plan->nprocs);
  plan->group_steps = g_new (gint64, MAX (plan->ngroups, 1));
  plan->clock = -1;
  char **dirs = g_new0 (char *, plan->nprocs + 1);
  for (int r = 0; r < plan->nprocs; r++)
    dirs[r] = shoal_checkpoint_dir (workspace, r);
  gboolean ok = TRUE;
  if (layout->mode == SHOAL_UPDATE_SYNC)
    {
      gint64 step = shoal_checkpoint_common_step ((const char *const *) dirs, error);
      ok = step >= 0;
      for (int r = 0; r < plan->nprocs; r++)
        plan->rank_steps[r] = step;
    }
  else
    for (int r = 0; ok && r < plan->nprocs; r++)
      {
        const char **mine = g_new0 (const char *, plan->nprocs + 1);
        int n = 0;
        for (int q = 0; q < plan->nprocs; q++)
          if (q == r || share_group (layout, r, q))
            mine[n++] = dirs[q];
        plan->rank_steps[r] = shoal_checkpoint_common_step (mine, error);
        g_free (mine);
        ok = plan->rank_steps[r] >= 0;
        if (!ok)
          g_prefix_error (error, "rank %d: ", r);
      }
  /* a rank with workers saves their state and the clock in one
   * transaction: a step without its clock is one whose save failed (the
   * first checkpoint on a full disk leaves only the servers' slices).  A
   * rank that saved nothing at all runs a spread net's follower units,
   * which keep no state of their own. */
  for (int r = 0; ok && r < plan->nprocs; r++)
    if (layout->procs[r].workers->len > 0)
      {
        ShoalCheckpoint *c = shoal_checkpoint_open (dirs[r], FALSE, error);
        char **names = c != NULL ? shoal_checkpoint_names (c) : NULL;
        ok = c != NULL && (names[0] == NULL || shoal_checkpoint_has (c, "clock", plan->rank_steps[r]));
        g_strfreev (names);
        if (c != NULL && !ok)
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                       "%s: the checkpoint of step %" G_GINT64_FORMAT " holds no state of rank %d's workers "
                       "(their save failed: a full disk?)", dirs[r], plan->rank_steps[r], r);
        shoal_checkpoint_close (c);
      }
  g_strfreev (dirs);
  if (!ok)
    {
      shoal_resume_plan_free (plan);
      return NULL;
    }
  for (int g = 0; g < plan->ngroups; g++)
    plan->group_steps[g] = plan->rank_steps[shoal_layout_worker_rank (layout, g, 0)];
  for (int r = 0; r < plan->nprocs; r++)
    plan->clock = MAX (plan->clock, shoal_workspace_checkpoint_clock (workspace, r, plan->rank_steps[r]));
  return plan;
}

void
shoal_resume_plan_free (ShoalResumePlan *plan)
{
  if (plan == NULL)
    return;
  g_free (plan->rank_steps);
  g_free (plan->group_steps);
  g_free (plan);
}

char *
shoal_resume_plan_describe (const ShoalResumePlan *plan)
{
  gboolean same = TRUE;
  for (int r = 1; r < plan->nprocs; r++)
    same &= plan->rank_steps[r] == plan->rank_steps[0];
  if (same)
    return g_strdup_printf ("step %" G_GINT64_FORMAT, plan->rank_steps[0]);
  GString *s = g_string_new (NULL);
  for (int g = 0; g < plan->ngroups; g++)
    g_string_append_printf (s, "%sgroup %d at step %" G_GINT64_FORMAT, g > 0 ? ", " : "", g,
                            plan->group_steps[g]);
  return g_string_free (s, FALSE);
}

gboolean
shoal_resume_plan_nothing_saved (const ShoalLayout *layout, const char *workspace)
{
  gboolean none = TRUE;
  for (int r = 0; none && r < layout->nprocs; r++)
    {
      char *dir = shoal_checkpoint_dir (workspace, r);
      if (g_file_test (dir, G_FILE_TEST_IS_DIR))
        {
          ShoalCheckpoint *c = shoal_checkpoint_open (dir, FALSE, NULL);
          char **names = c != NULL ? shoal_checkpoint_names (c) : NULL;
          none = names != NULL && names[0] == NULL;
          g_strfreev (names);
          shoal_checkpoint_close (c);
        }
      g_free (dir);
    }
  return none;
}
