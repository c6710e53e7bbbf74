/* The [cluster] section of a job conf: SINGA's layout fields, the
 * asynchronous schemes' knobs and the placement of worker units on GPUs,
 * described once in an option table.  The layout they make is
 * cluster/layout.h. */
#include "cluster/cluster_conf.h"

#include "cluster/layout.h"
#include "core/error.h"

#include <string.h>

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
  { "staleness", SHOAL_OPT_INT, "-1", -1, 1e6, NULL,
    "SSP (Ho et al. 2013): a worker group more than this many steps ahead of the slowest waits; "
    "-1 = unbounded (Downpour); needs nworker_groups > 1 sharing one server group" },
  { "backup_workers", SHOAL_OPT_INT, "0", 0, 4095, NULL,
    "Sandblaster with backup workers (Chen et al. 2016): a step is applied with the first "
    "nworkers_per_group - b gradients, the late ones dropped; needs workers pushing each their own "
    "gradient (nworkers_per_procs < nworkers_per_group)" },
  { "async_lr", SHOAL_OPT_STRING, "groups", SHOAL_UNBOUNDED, "none|groups|staleness",
    "asynchronous schemes: lr of one update: groups = lr / pushing groups, none = lr (Dean et al.), "
    "staleness = lr / the update's staleness (Zhang et al. 2016)" },
  { "sync_lr", SHOAL_OPT_STRING, "none", SHOAL_UNBOUNDED, "none|linear|sqrt",
    "synchronous schemes whose k workers each bring a batch of the size lr was tuned for: lr of a step "
    "= lr (none), k x lr (linear: Goyal et al. 2017) or sqrt(k) x lr (sqrt)" },
  { "sync_lr_warmup", SHOAL_OPT_INT, "0", 0, 1e9, NULL,
    "sync_lr: updates over which its factor rises linearly from 1 to its value (gradual warm-up, "
    "Goyal et al. 2017); 0 = from the first update" },
  { "shared_memory", SHOAL_OPT_STRING, "auto", SHOAL_UNBOUNDED, "auto|off",
    "slices between processes on one host: auto = through shared memory where the server can "
    "open the worker's region (the calls stay Thrift), else the socket; off = always the socket" },
  { "wire_values", SHOAL_OPT_STRING, "fp32", SHOAL_UNBOUNDED, "fp32|fp16|bf16",
    "params a server sends a worker over a socket: fp32, or fp16 / bf16 (half the bytes; the servers "
    "keep fp32)" },
  { "wire_grads", SHOAL_OPT_STRING, "fp32", SHOAL_UNBOUNDED, "fp32|fp16|bf16|2bit|1bit",
    "gradients a worker sends a server over a socket: fp32, fp16, bf16, or quantised with error "
    "feedback: 2bit (MXNet's, about 1/15 of the bytes), 1bit (CNTK's 1-bit SGD, about 1/25)" },
  { "hogwild_sync", SHOAL_OPT_STRING, "average", SHOAL_UNBOUNDED, "average|elastic",
    "Hogwild (nserver_groups > 1): average = deltas to the slice's master, weighted 1/g; elastic = "
    "elastic averaging (EASGD, Zhang et al. 2015): replica and master's center move toward each other" },
  { "elastic_alpha", SHOAL_OPT_FLOAT, "0.5", SHOAL_UNBOUNDED, NULL,
    "hogwild_sync = elastic: the moving rate alpha (0 < alpha <= 1): d = alpha (replica - center); "
    "replica -= d; center += d" },
  { "gpus", SHOAL_OPT_INT_LIST, "", -1, 1023, NULL,
    "GPU of each worker unit (a group sharing a process, else a worker), cycling: unit i on "
    "cuda:gpus[i % n], -1 on the CPU; empty: all on the CPU (needs make CUDA=1)" },
  /* liveness and limits: how a job runs, not its scheme (a --topology keeps them) */
  { "heartbeat_interval", SHOAL_OPT_FLOAT, "1", 0.05, 60, NULL,
    "multi-process jobs: seconds between the heartbeats every process sends to the launcher and "
    "to every process that takes calls" },
  { "heartbeat_timeout", SHOAL_OPT_FLOAT, "15", 0.2, 86400, NULL,
    "a process silent this many seconds (stopped, hung, unreachable) is lost: its group is dropped "
    "(asynchronous schemes) or the job fails naming it" },
  { "progress_timeout", SHOAL_OPT_FLOAT, "300", 1, 1e7, NULL,
    "a training process whose steps did not move this many seconds (wedged), or one never heard "
    "from this long after the start, is lost" },
  { "stop_timeout", SHOAL_OPT_FLOAT, "30", 1, 86400, NULL,
    "seconds a process told to stop (SIGINT, SIGTERM, its launcher gone) may take to checkpoint and "
    "end, and a process failing the job (a rank it needs lost) gives its threads to end; past it the "
    "process exits at once, whatever its links and peers do" },
  { "max_procs_per_core", SHOAL_OPT_INT, "8", 1, 4096, NULL,
    "processes of a job one machine may run per core: more is refused (shoal run --oversubscribe, "
    "shoal proc --oversubscribe start them anyway); more than one per core is warned about" },
  { "rpc_max_connections", SHOAL_OPT_INT, "512", 4, 1e6, NULL,
    "connections one process's RPC server keeps open at once (an idle one costs no thread); one "
    "more is closed at once and logged (a job needs about one per other process and worker thread)" },
  { "rpc_idle_timeout", SHOAL_OPT_FLOAT, "300", 1, 1e7, NULL,
    "seconds an RPC connection may stay idle between calls before the server closes it (clients "
    "reconnect at their next call)" },
  { "rpc_threads", SHOAL_OPT_INT, "8", 1, 65536, NULL,
    "threads one process's RPC server keeps for calls; while every one is busy (calls that wait for "
    "other groups, SSP's bound) one more starts, up to one per open connection, and ends after 10 s "
    "without work: a smaller pool could deadlock a job whose calls wait for each other" },
  SHOAL_OPTION_END
};

/* The consistency keys beyond SINGA's: each only where its scheme is. */
static gboolean
check_consistency (ShoalConf *conf, const ShoalClusterConf *c, GError **error)
{
  const char *g = "cluster";
  if (c->staleness >= 0 && c->nworker_groups == 1)
    {
      shoal_conf_error (conf, error, g, "staleness",
                        "SSP bounds how far worker groups run apart; one worker group trains "
                        "synchronously (nworker_groups = 1)");
      return FALSE;
    }
  if (c->staleness >= 0 && c->nserver_groups > 1)
    {
      shoal_conf_error (conf, error, g, "staleness",
                        "SSP bounds groups that share one server group; with nserver_groups = %d "
                        "each group updates a replica of its own (Hogwild)", c->nserver_groups);
      return FALSE;
    }
  if (c->backup_workers > 0 && c->nworker_groups > 1)
    {
      shoal_conf_error (conf, error, g, "backup_workers",
                        "backup workers are a synchronous scheme's (nworker_groups = 1); "
                        "%d worker groups train asynchronously", c->nworker_groups);
      return FALSE;
    }
  if (c->backup_workers > 0 && c->backup_workers >= c->nworkers_per_group)
    {
      shoal_conf_error (conf, error, g, "backup_workers",
                        "%d of the %d workers of the group: a step needs at least one gradient",
                        c->backup_workers, c->nworkers_per_group);
      return FALSE;
    }
  if (c->backup_workers > 0 && c->nworkers_per_procs >= c->nworkers_per_group)
    {
      shoal_conf_error (conf, error, g, "backup_workers",
                        "a group whose %d workers share a process pushes one summed gradient; "
                        "backup workers need each worker pushing its own (nworkers_per_procs < "
                        "nworkers_per_group)", c->nworkers_per_group);
      return FALSE;
    }
  if (c->hogwild_sync != SHOAL_HOGWILD_AVERAGE && c->nserver_groups == 1)
    {
      shoal_conf_error (conf, error, g, "hogwild_sync",
                        "is how Hogwild's server groups meet; with nserver_groups = 1 there is one replica");
      return FALSE;
    }
  if (g_key_file_has_key (shoal_conf_keyfile (conf), g, "elastic_alpha", NULL))
    {
      char buf[G_ASCII_DTOSTR_BUF_SIZE];
      if (c->hogwild_sync != SHOAL_HOGWILD_ELASTIC)
        {
          shoal_conf_error (conf, error, g, "elastic_alpha", "only elastic averaging uses it (hogwild_sync = elastic)");
          return FALSE;
        }
      if (!(c->elastic_alpha > 0 && c->elastic_alpha <= 1))
        {
          shoal_conf_error (conf, error, g, "elastic_alpha", "%s is not in (0, 1]: the replica and the center move "
                            "alpha of the way toward each other", g_ascii_formatd (buf, sizeof buf, "%g", c->elastic_alpha));
          return FALSE;
        }
    }
  if (c->sync_lr != SHOAL_SYNC_LR_NONE && c->nworker_groups > 1)
    {
      shoal_conf_error (conf, error, g, "sync_lr",
                        "sets the lr of synchronous steps; %d worker groups train asynchronously (async_lr)",
                        c->nworker_groups);
      return FALSE;
    }
  if (c->sync_lr_warmup > 0 && c->sync_lr == SHOAL_SYNC_LR_NONE)
    {
      shoal_conf_error (conf, error, g, "sync_lr_warmup", "warms up sync_lr's factor: set sync_lr = linear or sqrt");
      return FALSE;
    }
  if (c->async_lr != SHOAL_ASYNC_LR_GROUPS && c->nworker_groups == 1)
    {
      shoal_conf_error (conf, error, g, "async_lr",
                        "sets the lr of asynchronous updates; one worker group trains synchronously");
      return FALSE;
    }
  return TRUE;
}

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
  c->staleness = (int) shoal_conf_get_int (conf, g, t, "staleness");
  c->backup_workers = (int) shoal_conf_get_int (conf, g, t, "backup_workers");
  char *async_lr = shoal_conf_get_string (conf, g, t, "async_lr");
  c->async_lr = strcmp (async_lr, "none") == 0        ? SHOAL_ASYNC_LR_NONE
                : strcmp (async_lr, "staleness") == 0 ? SHOAL_ASYNC_LR_STALENESS
                                                      : SHOAL_ASYNC_LR_GROUPS;
  g_free (async_lr);
  char *sync_lr = shoal_conf_get_string (conf, g, t, "sync_lr");
  c->sync_lr = strcmp (sync_lr, "linear") == 0 ? SHOAL_SYNC_LR_LINEAR
               : strcmp (sync_lr, "sqrt") == 0 ? SHOAL_SYNC_LR_SQRT
                                               : SHOAL_SYNC_LR_NONE;
  g_free (sync_lr);
  c->sync_lr_warmup = (int) shoal_conf_get_int (conf, g, t, "sync_lr_warmup");
  char *shm = shoal_conf_get_string (conf, g, t, "shared_memory");
  c->shared_memory = strcmp (shm, "off") != 0;
  g_free (shm);
  char *wv = shoal_conf_get_string (conf, g, t, "wire_values");
  char *wg = shoal_conf_get_string (conf, g, t, "wire_grads");
  if (!shoal_codec_parse (wv, &c->wire_values))
    c->wire_values = SHOAL_CODEC_FP32;   /* the option's choices were checked */
  if (!shoal_codec_parse (wg, &c->wire_grads))
    c->wire_grads = SHOAL_CODEC_FP32;
  g_free (wv);
  g_free (wg);
  char *sync = shoal_conf_get_string (conf, g, t, "hogwild_sync");
  c->hogwild_sync = strcmp (sync, "elastic") == 0 ? SHOAL_HOGWILD_ELASTIC : SHOAL_HOGWILD_AVERAGE;
  g_free (sync);
  c->elastic_alpha = shoal_conf_get_float (conf, g, t, "elastic_alpha");
  c->heartbeat_interval = shoal_conf_get_float (conf, g, t, "heartbeat_interval");
  c->heartbeat_timeout = shoal_conf_get_float (conf, g, t, "heartbeat_timeout");
  c->progress_timeout = shoal_conf_get_float (conf, g, t, "progress_timeout");
  c->stop_timeout = shoal_conf_get_float (conf, g, t, "stop_timeout");
  c->max_procs_per_core = (int) shoal_conf_get_int (conf, g, t, "max_procs_per_core");
  c->rpc_max_connections = (int) shoal_conf_get_int (conf, g, t, "rpc_max_connections");
  c->rpc_idle_timeout = shoal_conf_get_float (conf, g, t, "rpc_idle_timeout");
  c->rpc_threads = (int) shoal_conf_get_int (conf, g, t, "rpc_threads");
  if (c->heartbeat_timeout < 2 * c->heartbeat_interval)
    {
      char a[G_ASCII_DTOSTR_BUF_SIZE], b[G_ASCII_DTOSTR_BUF_SIZE];
      shoal_conf_error (conf, error, g, "heartbeat_timeout",
                        "%s s is less than two heartbeat intervals (heartbeat_interval = %s s): every "
                        "process would be lost between two beats",
                        g_ascii_formatd (a, sizeof a, "%g", c->heartbeat_timeout),
                        g_ascii_formatd (b, sizeof b, "%g", c->heartbeat_interval));
      return FALSE;
    }
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
  return check_consistency (conf, c, error);
}

gboolean
shoal_cluster_check_host_procs (ShoalConf *conf, const ShoalClusterConf *c, int procs_here, int threads_here,
                                int cores, gboolean oversubscribe, const char *force_option, GError **error)
{
  cores = MAX (cores, 1);
  const char *what = procs_here >= threads_here ? "processes" : "worker threads";
  int n = MAX (procs_here, threads_here);
  if (n > cores * c->max_procs_per_core && !oversubscribe)
    {
      shoal_conf_error (conf, error, "cluster", "max_procs_per_core",
                        "this machine would run %d %s of the job on %d core%s, more than %d per core; "
                        "give %s to start them anyway (they share the cores and each runs that much slower)",
                        n, what, cores, cores == 1 ? "" : "s", c->max_procs_per_core, force_option);
      return FALSE;
    }
  if (procs_here > cores)
    g_warning ("this machine runs %d processes of the job on %d core%s: they share the cores (each runs "
               "slower than it would alone)", procs_here, cores, cores == 1 ? "" : "s");
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
