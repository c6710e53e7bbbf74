/* The rules the real clock (run/runner.c) and the virtual one
 * (emulate/emulator.c) both apply: each unit's net, how groups run, the
 * slices and the server options. */
#include "worker/job_run.h"

#include <math.h>

#include "core/conf.h"
#include "job/named_params.h"

/* Slices of about this many bytes, so that large models are sent in
 * pieces that pipeline and small ones still update layer by layer. */
#define TARGET_SLICE_BYTES (512u << 10)

/* [job] init_from: initialises params from the init_from workspaces'
 * checkpoints, by name or as <param>_init_from renames them
 * (job/named_params.h). */
gboolean
shoal_runner_init_from (ShoalJob *job, ShoalParamStore *store, GError **error)
{
  int copied = 0;
  if (!shoal_named_params_init (store, job->conf, (const char *const *) job->init_from, &copied, error))
    return FALSE;
  g_message ("init_from: %d of %u params initialised by name", copied, store->params->len);
  return TRUE;
}

ShoalNetOptions
shoal_runner_unit_options (ShoalJob *job, const ShoalClusterConf *c, ShoalMember unit, gboolean per_group,
                           gboolean on_device)
{
  ShoalNetOptions nopts = { .seed = job->seed, .group = unit.group, .cd_k = job->cd_k,
                            .budget = job->memory_budget };
  if (on_device)
    nopts.device = shoal_cluster_device (&job->cluster, unit.group, unit.index);
  if (per_group)
    {
      /* worker w of the group reads shard group * k + w of groups * k */
      nopts.shard_index = unit.group;
      nopts.shard_count = c->nworker_groups;
    }
  else
    {
      nopts.shard_index = unit.group * c->nworkers_per_group + unit.index;
      nopts.shard_count = c->nworker_groups * c->nworkers_per_group;
      nopts.worker = unit.index;
    }
  return nopts;
}

ShoalGroupNet *
shoal_runner_unit_net (ShoalJob *job, const ShoalClusterConf *c, ShoalMember unit, int unit_size,
                       gboolean per_group, gboolean on_device, const ShoalGroupWire *wire, GError **error)
{
  ShoalNetOptions nopts = shoal_runner_unit_options (job, c, unit, per_group, on_device);
  ShoalGroupNet *net = wire != NULL ? shoal_group_net_new_spread (job->conf, unit_size, &nopts, wire, error)
                                    : shoal_group_net_new (job->conf, unit_size, &nopts, error);
  if (net == NULL)
    return NULL;
  shoal_param_store_init_values (shoal_group_net_params (net), job->seed);
  if (job->init_from != NULL && job->init_from[0] != NULL
      && !shoal_runner_init_from (job, shoal_group_net_params (net), error))
    {
      shoal_group_net_free (net);
      return NULL;
    }
  return net;
}

gboolean
shoal_runner_groups_as_one (ShoalJob *job, const ShoalClusterConf *c, gboolean *whole, gboolean *spread_net,
                            GError **error)
{
  *whole = c->nworkers_per_procs >= c->nworkers_per_group;
  *spread_net = FALSE;
  if (*whole)
    return TRUE;
  gboolean batch_only = TRUE;
  if (!shoal_partition_batch_only (job->conf, c->nworkers_per_group, job->memory_budget, &batch_only, error))
    return FALSE;
  *spread_net = !batch_only;
  return TRUE;
}

/* A batch-split group spread over processes without a group net: each
 * worker reads its share of the group's batch (batch_size is the
 * group's) and pushes its own gradient. */
gboolean
shoal_runner_share_batch (ShoalJob *job, int k, GError **error)
{
  GKeyFile *kf = shoal_conf_keyfile (job->conf);
  char **groups = g_key_file_get_groups (kf, NULL);
  gboolean ok = TRUE;
  for (int i = 0; ok && groups[i] != NULL; i++)
    {
      if (!g_str_has_prefix (groups[i], "layer ") || !g_key_file_has_key (kf, groups[i], "batch_size", NULL))
        continue;
      gint64 batch = 0;
      char *raw = g_key_file_get_value (kf, groups[i], "batch_size", NULL);
      g_ascii_string_to_signed (g_strstrip (raw), 10, 1, G_MAXINT, &batch, NULL);
      g_free (raw);
      if (batch % k != 0)
        {
          shoal_conf_error (job->conf, error, groups[i], "batch_size",
                            "%" G_GINT64_FORMAT " rows cannot be shared evenly by the %d workers of a group "
                            "spread over processes", batch, k);
          ok = FALSE;
          break;
        }
      char *o = g_strdup_printf ("%s.batch_size=%" G_GINT64_FORMAT, groups[i], batch / k);
      ok = shoal_conf_override (job->conf, o, error);
      g_free (o);
    }
  g_strfreev (groups);
  return ok;
}

/* How many slices: the layout's count times whatever brings slices near
 * TARGET_SLICE_BYTES; every process computes the same from the same net.
 * Being a multiple, slice s is served like the layout's slice s % nslices. */
int
shoal_runner_slice_count (const ShoalLayout *layout, size_t total_floats)
{
  size_t bytes = total_floats * sizeof (float);
  size_t per = (size_t) layout->nslices * TARGET_SLICE_BYTES;
  size_t factor = MAX ((size_t) 1, (bytes + per - 1) / per);
  return (int) MIN ((size_t) layout->nslices * factor, MAX (total_floats / 16, (size_t) 1));
}

gboolean
shoal_runner_reads_server_in_place (const ShoalLayout *layout, int units_in_process)
{
  return layout->nprocs == 1 && units_in_process == 1;
}

void
shoal_runner_server_options (const ShoalLayout *layout, gboolean group_pushes, int nslices,
                             ShoalServerOptions *out)
{
  ShoalServerOptions sopts = { .mode = layout->mode,
                               .sync_contributors = group_pushes ? 1 : layout->sync_contributors,
                               .nslices = nslices,
                               .keep_baseline = layout->group_sync };
  /* Asynchronous schemes compared on equal terms with synchronous ones:
   * the g groups (or g*k spread workers) pushing to one server group each
   * move it by lr/g, so one round of their pushes goes as far as one
   * synchronous step with the job's lr; likewise a Hogwild master adds
   * each group's delta weighted 1/g (model averaging). */
  const ShoalClusterConf *c = &layout->conf;
  if (layout->mode == SHOAL_UPDATE_ASYNC)
    {
      int groups_here = c->nworker_groups / c->nserver_groups;
      int pushers = group_pushes ? groups_here : groups_here * c->nworkers_per_group;
      /* [cluster] async_lr: groups (the above, the default), none (Dean
       * et al.'s Downpour: every update at lr), staleness (Zhang et al.:
       * lr / the update's staleness, measured by the server) */
      sopts.lr_scale = c->async_lr == SHOAL_ASYNC_LR_GROUPS ? 1.0f / (float) MAX (pushers, 1) : 1.0f;
      sopts.lr_by_staleness = c->async_lr == SHOAL_ASYNC_LR_STALENESS;
      if (layout->group_sync)
        sopts.delta_scale = 1.0f / (float) c->nserver_groups;
      sopts.elastic_center = layout->group_sync && c->hogwild_sync == SHOAL_HOGWILD_ELASTIC;
      if (c->staleness >= 0)
        {
          /* SSP: the units pushing here count their steps (unit_id) */
          sopts.ssp_units = group_pushes ? c->nworker_groups : c->nworker_groups * c->nworkers_per_group;
          sopts.ssp_bound = c->staleness;
        }
    }
  else
    {
      if (c->backup_workers > 0 && !group_pushes)
        sopts.backup_workers = c->backup_workers;
      /* [cluster] sync_lr: k workers' batches in one step */
      double k = c->nworkers_per_group;
      sopts.lr_scale = c->sync_lr == SHOAL_SYNC_LR_LINEAR ? (float) k
                       : c->sync_lr == SHOAL_SYNC_LR_SQRT ? (float) sqrt (k)
                                                          : 1.0f;
      sopts.lr_warmup = c->sync_lr_warmup;
    }
  *out = sopts;
}
