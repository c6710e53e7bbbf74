/* Job-level conf sections, described once in option tables so that
 * validation, defaults and `shoal help conf` come from one place. */
#include "worker/job.h"

#include <math.h>
#include <string.h>

#include "cluster/layout.h"
#include "core/error.h"
#include "partition/partition.h"

const ShoalOption shoal_job_options[] = {
  { "name", SHOAL_OPT_STRING, "job", SHOAL_UNBOUNDED, NULL, "name used in logs and the workspace" },
  { "train_steps", SHOAL_OPT_INT, "0", 0, 1e12, NULL, "training steps (batches); or give epochs" },
  { "epochs", SHOAL_OPT_FLOAT, "0", 0, 1e6, NULL, "training length in passes over the training set" },
  { "test_freq", SHOAL_OPT_INT, "0", 0, 1e12, NULL, "steps between test runs; 0 = only at the end" },
  { "test_steps", SHOAL_OPT_INT, "0", 0, 1e12, NULL, "batches per test run; 0 = whole test set" },
  { "disp_freq", SHOAL_OPT_INT, "100", 1, 1e12, NULL, "steps between progress lines" },
  { "seed", SHOAL_OPT_INT, "1", 0, 9.2e18, NULL, "seed of every random stream of the job" },
  { "threads", SHOAL_OPT_INT, "0", 0, 1024, NULL,
    "BLAS threads per process; 0 = cores divided by the worker threads on the machine "
    "(all ranks that `shoal run` starts, or `shoal proc --host-workers`)" },
  { "checkpoint_freq", SHOAL_OPT_INT, "0", 0, 1e12, NULL,
    "steps between checkpoints in WORKSPACE/checkpoint; 0 = only at the end (and on Ctrl-C)" },
  { "init_from", SHOAL_OPT_STRING_LIST, "", SHOAL_UNBOUNDED, NULL,
    "workspaces whose checkpointed params initialise the params of the same name (pre-training; "
    "a later workspace wins; <param>_init_from renames)" },
  { "alg", SHOAL_OPT_STRING, "bp", SHOAL_UNBOUNDED, "bp|cd",
    "training algorithm: bp (back-propagation, through time for recurrent layers) or cd "
    "(contrastive divergence of the RBM layers)" },
  { "cd_k", SHOAL_OPT_INT, "1", 1, 1000, NULL, "alg = cd: Gibbs steps per update (CD-k)" },
  SHOAL_OPTION_END
};

const ShoalOption shoal_updater_options[] = {
  { "type", SHOAL_OPT_STRING, "sgd", SHOAL_UNBOUNDED, "sgd|nesterov|adagrad|rmsprop|adadelta|adam",
    "update rule" },
  { "lr", SHOAL_OPT_FLOAT, "0.01", 0, 1e6, NULL, "base learning rate" },
  { "lr_policy", SHOAL_OPT_STRING, "fixed", SHOAL_UNBOUNDED, "fixed|step|fixed_step|exponential|inverse",
    "learning-rate schedule" },
  { "gamma", SHOAL_OPT_FLOAT, "0.1", 0, 1e6, NULL, "step/exponential/inverse: decay factor" },
  { "power", SHOAL_OPT_FLOAT, "0.75", 0, 1e6, NULL, "inverse: exponent" },
  { "step_size", SHOAL_OPT_INT, "1000", 1, 1e12, NULL, "step/exponential: steps per decay" },
  { "step_list", SHOAL_OPT_INT_LIST, "", 0, 1e12, NULL, "fixed_step: steps where lr changes (first 0)" },
  { "lr_list", SHOAL_OPT_FLOAT_LIST, "", 0, 1e6, NULL, "fixed_step: lr from each step_list entry on" },
  { "warmup_steps", SHOAL_OPT_INT, "0", 0, 1e12, NULL, "linear warm-up steps; 0 = none" },
  { "momentum", SHOAL_OPT_FLOAT, "0", 0, 1, NULL, "sgd/nesterov momentum" },
  { "weight_decay", SHOAL_OPT_FLOAT, "0", 0, 1e3, NULL, "L2 weight decay" },
  { "beta1", SHOAL_OPT_FLOAT, "0.9", 0, 1, NULL, "adam" },
  { "beta2", SHOAL_OPT_FLOAT, "0.999", 0, 1, NULL, "adam" },
  { "rho", SHOAL_OPT_FLOAT, "0", 0, 1, NULL, "rmsprop/adadelta decay; 0 = the rule's default" },
  { "epsilon", SHOAL_OPT_FLOAT, "0", 0, 1, NULL, "numerical guard; 0 = the rule's default" },
  { "clip_value", SHOAL_OPT_FLOAT, "0", 0, 1e9, NULL, "clip each gradient element to +-value; 0 = off" },
  { "clip_norm", SHOAL_OPT_FLOAT, "0", 0, 1e9, NULL, "clip the gradient's global L2 norm; 0 = off" },
  SHOAL_OPTION_END
};

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

static gboolean
check_groups (ShoalConf *conf, GError **error)
{
  char **groups = g_key_file_get_groups (shoal_conf_keyfile (conf), NULL);
  gboolean ok = TRUE;
  for (int i = 0; ok && groups[i] != NULL; i++)
    {
      const char *g = groups[i];
      if (strcmp (g, "job") == 0 || strcmp (g, "updater") == 0 || strcmp (g, "cluster") == 0
          || g_str_has_prefix (g, "layer "))
        continue;
      shoal_conf_error (conf, error, g, NULL,
                        "unknown section (expected [job], [updater], [cluster] or [layer NAME])");
      ok = FALSE;
    }
  g_strfreev (groups);
  return ok;
}

static gboolean
read_updater (ShoalConf *conf, ShoalUpdaterConf *u, GError **error)
{
  const char *g = "updater";
  const ShoalOption *t = shoal_updater_options;
  char *type = shoal_conf_get_string (conf, g, t, "type");
  ShoalUpdaterKind kind = SHOAL_UPDATER_SGD;
  shoal_updater_kind_parse (type, &kind);
  g_free (type);
  shoal_updater_conf_defaults (u, kind);

  ShoalLrSchedule *s = &u->schedule;
  char *policy = shoal_conf_get_string (conf, g, t, "lr_policy");
  shoal_lr_policy_parse (policy, &s->policy);
  g_free (policy);
  s->lr = (float) shoal_conf_get_float (conf, g, t, "lr");
  s->gamma = (float) shoal_conf_get_float (conf, g, t, "gamma");
  s->power = (float) shoal_conf_get_float (conf, g, t, "power");
  s->step_size = (int) shoal_conf_get_int (conf, g, t, "step_size");
  s->warmup_steps = (int) shoal_conf_get_int (conf, g, t, "warmup_steps");

  gsize nsteps = 0, nlrs = 0;
  gint *steps = shoal_conf_get_int_list (conf, g, t, "step_list", &nsteps);
  double *lrs = shoal_conf_get_float_list (conf, g, t, "lr_list", &nlrs);
  gboolean ok = TRUE;
  if (s->policy == SHOAL_LR_FIXED_STEP)
    {
      if (nsteps == 0 || nsteps != nlrs || nsteps > SHOAL_LR_MAX_STEPS)
        {
          shoal_conf_error (conf, error, g, "step_list",
                            "fixed_step needs step_list and lr_list of the same length (1 to %d), got %zu and %zu",
                            SHOAL_LR_MAX_STEPS, nsteps, nlrs);
          ok = FALSE;
        }
      for (gsize i = 0; ok && i < nsteps; i++)
        if ((i == 0 && steps[0] != 0) || (i > 0 && steps[i] <= steps[i - 1]))
          {
            shoal_conf_error (conf, error, g, "step_list", "must start at 0 and increase");
            ok = FALSE;
          }
      for (gsize i = 0; ok && i < nsteps; i++)
        {
          s->step_list[i] = steps[i];
          s->lr_list[i] = (float) lrs[i];
        }
      s->nsteps = ok ? (int) nsteps : 0;
    }
  g_free (steps);
  g_free (lrs);

  u->momentum = (float) shoal_conf_get_float (conf, g, t, "momentum");
  u->weight_decay = (float) shoal_conf_get_float (conf, g, t, "weight_decay");
  u->beta1 = (float) shoal_conf_get_float (conf, g, t, "beta1");
  u->beta2 = (float) shoal_conf_get_float (conf, g, t, "beta2");
  double rho = shoal_conf_get_float (conf, g, t, "rho");
  double eps = shoal_conf_get_float (conf, g, t, "epsilon");
  if (rho > 0)
    u->rho = (float) rho;
  if (eps > 0)
    u->epsilon = (float) eps;
  u->clip_value = (float) shoal_conf_get_float (conf, g, t, "clip_value");
  u->clip_norm = (float) shoal_conf_get_float (conf, g, t, "clip_norm");
  if (ok && (kind == SHOAL_UPDATER_ADAM) && (u->beta1 >= 1 || u->beta2 >= 1))
    {
      shoal_conf_error (conf, error, g, u->beta1 >= 1 ? "beta1" : "beta2", "must be below 1");
      ok = FALSE;
    }
  return ok;
}

static gboolean
read_cluster (ShoalConf *conf, ShoalClusterConf *c, GError **error)
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

/* alg = cd needs layers that CD trains, and BP cannot train them: the
 * layer types say which they are (SHOAL_LAYER_CD). */
static gboolean
check_algorithm (ShoalConf *conf, int cd_k, GError **error)
{
  GKeyFile *kf = shoal_conf_keyfile (conf);
  char **groups = g_key_file_get_groups (kf, NULL);
  char *cd_group = NULL, *cd_type = NULL;
  for (int i = 0; groups[i] != NULL && cd_group == NULL; i++)
    {
      if (!g_str_has_prefix (groups[i], "layer "))
        continue;
      char *type = g_key_file_get_value (kf, groups[i], "type", NULL);
      const ShoalLayerOps *ops = type ? shoal_layer_lookup (g_strstrip (type)) : NULL;
      if (ops != NULL && (ops->flags & SHOAL_LAYER_CD))
        {
          cd_group = g_strdup (groups[i]);
          cd_type = g_strdup (type);
        }
      g_free (type);
    }
  g_strfreev (groups);
  gboolean ok = TRUE;
  if (cd_k > 0 && cd_group == NULL)
    {
      shoal_conf_error (conf, error, "job", "alg",
                        "alg = cd trains RBM layers (rbm_visible, rbm_hidden) by contrastive divergence, "
                        "and this net has none");
      ok = FALSE;
    }
  else if (cd_k == 0 && cd_group != NULL)
    {
      shoal_conf_error (conf, error, cd_group, "type",
                        "%s layers are trained by contrastive divergence: set [job] alg = cd", cd_type);
      ok = FALSE;
    }
  g_free (cd_group);
  g_free (cd_type);
  return ok;
}

/* Applies the overrides to conf (taken) and validates the job. */
static ShoalJob *
job_from_conf (ShoalConf *conf, const char *const *overrides, GError **error)
{
  if (conf == NULL)
    return NULL;
  for (int i = 0; overrides != NULL && overrides[i] != NULL; i++)
    if (!shoal_conf_override (conf, overrides[i], error))
      {
        shoal_conf_free (conf);
        return NULL;
      }

  ShoalJob *job = g_new0 (ShoalJob, 1);
  job->conf = conf;
  const ShoalOption *const job_tables[] = { shoal_job_options, NULL };
  const ShoalOption *const updater_tables[] = { shoal_updater_options, NULL };
  const ShoalOption *const cluster_tables[] = { shoal_cluster_options, shoal_partition_options, NULL };
  if (!check_groups (conf, error)
      || !shoal_conf_check_group (conf, "job", job_tables, NULL, NULL, error)
      || !shoal_conf_check_group (conf, "updater", updater_tables, NULL, NULL, error)
      || !shoal_conf_check_group (conf, "cluster", cluster_tables, NULL, NULL, error))
    {
      shoal_job_free (job);
      return NULL;
    }

  const ShoalOption *t = shoal_job_options;
  job->name = shoal_conf_get_string (conf, "job", t, "name");
  job->train_steps = shoal_conf_get_int (conf, "job", t, "train_steps");
  job->epochs = shoal_conf_get_float (conf, "job", t, "epochs");
  job->test_freq = (int) shoal_conf_get_int (conf, "job", t, "test_freq");
  job->test_steps = (int) shoal_conf_get_int (conf, "job", t, "test_steps");
  job->disp_freq = (int) shoal_conf_get_int (conf, "job", t, "disp_freq");
  job->seed = (guint64) shoal_conf_get_int (conf, "job", t, "seed");
  job->threads = (int) shoal_conf_get_int (conf, "job", t, "threads");
  job->checkpoint_freq = shoal_conf_get_int (conf, "job", t, "checkpoint_freq");
  gsize ninit = 0;
  job->init_from = shoal_conf_get_string_list (conf, "job", t, "init_from", &ninit);
  char *alg = shoal_conf_get_string (conf, "job", t, "alg");
  job->cd_k = strcmp (alg, "cd") == 0 ? (int) shoal_conf_get_int (conf, "job", t, "cd_k") : 0;
  g_free (alg);

  gboolean ok = TRUE;
  if (job->train_steps > 0 && job->epochs > 0)
    {
      shoal_conf_error (conf, error, "job", "epochs", "give train_steps or epochs, not both");
      ok = FALSE;
    }
  else if (job->train_steps == 0 && job->epochs == 0)
    {
      shoal_conf_error (conf, error, "job", NULL, "missing train_steps or epochs");
      ok = FALSE;
    }
  if (ok)
    ok = check_algorithm (conf, job->cd_k, error) && read_updater (conf, &job->updater, error)
         && read_cluster (conf, &job->cluster, error);
  if (!ok)
    {
      shoal_job_free (job);
      return NULL;
    }
  return job;
}

ShoalJob *
shoal_job_load_data (const char *text, const char *origin, const char *const *overrides,
                     GError **error)
{
  return job_from_conf (shoal_conf_load_data (text, origin, error), overrides, error);
}

ShoalJob *
shoal_job_load (const char *path, const char *const *overrides, GError **error)
{
  return job_from_conf (shoal_conf_load_file (path, error), overrides, error);
}

void
shoal_job_free (ShoalJob *job)
{
  if (job == NULL)
    return;
  shoal_conf_free (job->conf);
  g_free (job->name);
  g_strfreev (job->init_from);
  g_free (job);
}

void
shoal_job_resolve_epochs (ShoalJob *job, gint64 records_per_epoch, int batch)
{
  if (job->epochs > 0 && batch > 0)
    job->train_steps = (gint64) ceil (job->epochs * (double) records_per_epoch / batch);
}
