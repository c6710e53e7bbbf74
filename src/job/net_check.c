/* `shoal run` with several processes forks its ranks only after it took
 * the workspace (an earlier run's files moved aside, job.conf written),
 * and each rank builds the net itself.  A conf that failed only there (an
 * unknown layer type, a bad key, a split a layer refuses, a missing
 * dataset) used to move the earlier run aside for a job that never
 * started, and named the workspace's copy of the conf.  So the launcher
 * builds the net once first, as a one-process run does before it claims
 * the workspace (runner.c). */
#include "job/net_check.h"

#include "core/error.h"
#include "partition/partition.h"

gboolean
shoal_job_check_net (ShoalJob *job, GError **error)
{
  ShoalNetOptions opts = { .seed = job->seed, .shard_count = 1, .budget = job->memory_budget };
  /* the group's plan checks every split; for k = 1 it is the plain net */
  ShoalGroupNet *g = shoal_group_net_new (job->conf, MAX (job->cluster.nworkers_per_group, 1), &opts, error);
  if (g == NULL)
    return FALSE;
  ShoalLayer *input = shoal_group_net_input (g);
  gboolean ok = input != NULL && input->ops->num_records != NULL;
  if (!ok)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "%s: the net has no data input layer",
                 shoal_conf_origin (job->conf));
  shoal_group_net_free (g);
  return ok;
}
