/* The [cluster] section of a job conf: SINGA's layout fields, the
 * asynchronous schemes' knobs and the placement of worker units on GPUs,
 * described once in an option table.  The layout they make is
 * cluster/layout.h. */
#include "cluster/cluster_conf.h"

#include "cluster/layout.h"
#include "core/error.h"

const ShoalOption shoal_cluster_options[] = {
  { "nworker_groups", SHOAL_OPT_INT, "1", 1, 4096, NULL, "worker groups (async between groups)" },
  { "nworkers_per_group", SHOAL_OPT_INT, "1", 1, 4096, NULL, "workers per group (sync inside)" },
  { "nserver_groups", SHOAL_OPT_INT, "1", 1, 4096, NULL, "server groups" },
  { "nservers_per_group", SHOAL_OPT_INT, "1", 1, 4096, NULL, "servers per server group" },
  { "nworkers_per_procs", SHOAL_OPT_INT, "1", 1, 4096, NULL, "worker threads per process" },
  { "nservers_per_procs", SHOAL_OPT_INT, "1", 1, 4096, NULL, "servers per process" },
  { "server_worker_separate", SHOAL_OPT_BOOL, "false", SHOAL_UNBOUNDED, NULL,
    "servers in processes of their own" },
  { "sync_freq", SHOAL_OPT_INT, "1", 1, 1e9, NULL, "updates between server-group syncs (Hogwild)" },
  { "all_groups_required", SHOAL_OPT_BOOL, "true", SHOAL_UNBOUNDED, NULL,
    "asynchronous schemes: a lost worker group fails the job (false: the others finish it)" },
  { "n_push", SHOAL_OPT_INT, "1", 1, 1e6, NULL,
    "asynchronous schemes: steps whose gradients a worker sums before pushing (Downpour's n_push)" },
  { "n_fetch", SHOAL_OPT_INT, "1", 1, 1e6, NULL,
    "asynchronous schemes: steps between fetches of fresh params (Downpour's n_fetch)" },
  { "gpus", SHOAL_OPT_INT_LIST, "", -1, 1023, NULL,
    "GPU of each worker unit (a group sharing a process, else a worker), cycling: unit i on "
    "cuda:gpus[i % n], -1 on the CPU; empty: all on the CPU (needs make CUDA=1)" },
  SHOAL_OPTION_END
};

gboolean
shoal_cluster_conf_read (ShoalConf *conf, ShoalClusterConf *c, GError **error)
{
  const char *g = "cluster";
  const ShoalOption *t = shoal_cluster_options;
  c->nworker_groups = (int) shoal_conf_get_int (conf, g, t, "nworker_groups");
  c->nworkers_per_group = (int) shoal_conf_get_int (conf, g, t, "nworkers_per_group");
  c->nserver_groups = (int) shoal_conf_get_int (conf, g, t, "nserver_groups");
  c->nservers_per_group = (int) shoal_conf_get_int (conf, g, t, "nservers_per_group");
  c->nworkers_per_procs = (int) shoal_conf_get_int (conf, g, t, "nworkers_per_procs");
  c->nservers_per_procs = (int) shoal_conf_get_int (conf, g, t, "nservers_per_procs");
  c->server_worker_separate = shoal_conf_get_bool (conf, g, t, "server_worker_separate");
  c->sync_freq = (int) shoal_conf_get_int (conf, g, t, "sync_freq");
  c->all_groups_required = shoal_conf_get_bool (conf, g, t, "all_groups_required");
  c->n_push = (int) shoal_conf_get_int (conf, g, t, "n_push");
  c->n_fetch = (int) shoal_conf_get_int (conf, g, t, "n_fetch");
  if (c->nworker_groups == 1 && (c->n_push > 1 || c->n_fetch > 1))
    {
      shoal_conf_error (conf, error, g, c->n_push > 1 ? "n_push" : "n_fetch",
                        "only asynchronous schemes (nworker_groups > 1) skip pushes or fetches; "
                        "one worker group trains synchronously");
      return FALSE;
    }
  gsize ngpus = 0;
  gint *gpus = shoal_conf_get_int_list (conf, g, t, "gpus", &ngpus);
  gboolean any_gpu = FALSE;
  for (gsize i = 0; i < ngpus && i < SHOAL_MAX_GPU_LIST; i++)
    {
      c->gpus[i] = gpus[i];
      any_gpu |= gpus[i] >= 0;
    }
  g_free (gpus);
  c->ngpus = (int) MIN (ngpus, (gsize) SHOAL_MAX_GPU_LIST);
  if (ngpus > SHOAL_MAX_GPU_LIST)
    {
      shoal_conf_error (conf, error, g, "gpus", "at most %d entries, got %zu", SHOAL_MAX_GPU_LIST, ngpus);
      return FALSE;
    }
  if (any_gpu && c->nworkers_per_group > 1 && c->nworkers_per_procs >= c->nworkers_per_group)
    {
      /* such a group is one partitioned net with host bridges */
      shoal_conf_error (conf, error, g, "gpus",
                        "a group of %d workers in one process runs partitioned on the CPU; GPU workers "
                        "need nworkers_per_group = 1 or groups spread over processes",
                        c->nworkers_per_group);
      return FALSE;
    }

  /* the layout's checks name the field and say why a layout is impossible */
  ShoalLayout *layout = shoal_layout_new (c, conf, error);
  if (layout == NULL)
    return FALSE;
  shoal_layout_free (layout);
  return TRUE;
}

ShoalDevice
shoal_cluster_device (const ShoalClusterConf *c, int group, int worker)
{
  ShoalDevice cpu = { SHOAL_DEVICE_CPU, 0 };
  if (c->ngpus == 0)
    return cpu;
  gboolean whole_groups = c->nworkers_per_procs >= c->nworkers_per_group;
  int unit = whole_groups ? group : group * c->nworkers_per_group + worker;
  int gpu = c->gpus[unit % c->ngpus];
  return gpu < 0 ? cpu : (ShoalDevice) { SHOAL_DEVICE_CUDA, gpu };
}
