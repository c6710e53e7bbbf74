/* shoal_job_train (shoal/job.h): a job trained in the calling process,
 * as `shoal run` does when the layout fits one process. */
#include "job/job.h"

#include "cluster/layout.h"
#include "core/error.h"
#include "run/runner.h"

gboolean
shoal_job_train (ShoalJob *job, const char *workspace, gboolean resume, ShoalTrainResult *result,
                 GError **error)
{
  g_return_val_if_fail (job != NULL && workspace != NULL, FALSE);
  ShoalLayout *layout = shoal_layout_new (&job->cluster, job->conf, error);
  if (layout == NULL)
    return FALSE;
  int nprocs = layout->nprocs;
  shoal_layout_free (layout);
  /* the virtual clock runs any layout in this process */
  if (nprocs > 1 && job->emulate.clock != SHOAL_CLOCK_VIRTUAL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_UNSUPPORTED,
                   "%s: the [cluster] layout has %d processes; train it with `shoal run` (or shoal proc "
                   "under mpirun/srun)", shoal_conf_origin (job->conf), nprocs);
      return FALSE;
    }
  /* a run sets what the whole process shares (BLAS and worker thread
   * counts, the RPC client's peer names, the stop and abort flags): two
   * at once in one process raced on them (a TSan run of two threads each
   * training a job) */
  static gint training;
  if (!g_atomic_int_compare_and_exchange (&training, 0, 1))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_UNSUPPORTED,
                   "%s: another job is training in this process; a run sets process-wide state "
                   "(BLAS threads, stop flags): train one job at a time", shoal_conf_origin (job->conf));
      return FALSE;
    }
  ShoalRunOptions opts = { .workspace = workspace, .quiet = TRUE, .resume = resume, .resume_step = -1 };
  ShoalRunResult run = { 0 };
  gboolean ran = shoal_run_job (job, &opts, &run, error);
  g_atomic_int_set (&training, 0);
  if (!ran)
    return FALSE;
  if (result != NULL)
    *result = (ShoalTrainResult) { .steps = run.steps, .test_loss = run.test_loss,
                                   .test_accuracy = run.test_accuracy,
                                   .samples_per_sec = run.samples_per_sec };
  return TRUE;
}
