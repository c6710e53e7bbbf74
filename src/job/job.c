/* Job-level conf sections, described once in option tables so that
 * validation, defaults and `shoal help conf` come from one place. */
#include "job/job.h"
#include "job/families.h"

#include <math.h>
#include <string.h>

#include "cluster/topology.h"
#include "core/error.h"
#include "core/memory_budget.h"
#include "data/data_layers.h"

#include <shoal/plugin.h>
#include "partition/partition.h"

const ShoalOption shoal_job_options[] = {
  { "name", SHOAL_OPT_STRING, "job", SHOAL_UNBOUNDED, NULL, "name used in logs and the workspace" },
  { "train_steps", SHOAL_OPT_INT, "0", 0, 1e12, NULL, "training steps (batches); or give epochs" },
  { "epochs", SHOAL_OPT_FLOAT, "0", 0, 1e6, NULL, "training length in passes over the training set" },
  { "test_freq", SHOAL_OPT_INT, "0", 0, 1e12, NULL, "steps between test runs; 0 = only at the end" },
  { "test_steps", SHOAL_OPT_INT, "0", 0, 1e12, NULL, "batches per test run; 0 = whole test set" },
  { "test_groups", SHOAL_OPT_INT, "0", 0, 1e9, NULL,
    "worker groups that run test passes (their first worker), from group 0; 0 = every group "
    "(a scale sweep of shoal compare tests group 0 only: its report reads no other)" },
  { "disp_freq", SHOAL_OPT_INT, "100", 1, 1e12, NULL, "steps between progress lines" },
  { "seed", SHOAL_OPT_INT, "1", 0, 9.2e18, NULL, "seed of every random stream of the job" },
  { "threads", SHOAL_OPT_INT, "0", 0, 1024, NULL,
    "cores this process may use, shared by its worker threads and their BLAS threads "
    "(k workers on T cores: T / k BLAS threads each); 0 = the machine's cores divided by the "
    "worker threads on it (all ranks that `shoal run` starts, or `shoal proc --host-workers`)" },
  { "checkpoint_freq", SHOAL_OPT_INT, "0", 0, 1e12, NULL,
    "steps between checkpoints in WORKSPACE/checkpoint; 0 = only at the end (and on Ctrl-C)" },
  { "init_from", SHOAL_OPT_STRING_LIST, "", SHOAL_UNBOUNDED, NULL,
    "workspaces (their newest checkpointed params) or params files (shoal_net_save_params's, or "
    "written in the layout of shoal/param.h, e.g. from PyTorch) that initialise the params of the "
    "same name (pre-training; a later one wins; <param>_init_from renames)" },
  { "alg", SHOAL_OPT_STRING, "bp", SHOAL_UNBOUNDED, "bp|cd",
    "training algorithm: bp (back-propagation, through time for recurrent layers) or cd "
    "(contrastive divergence of the RBM layers)" },
  { "cd_k", SHOAL_OPT_INT, "1", 1, 1000, NULL, "alg = cd: Gibbs steps per update (CD-k)" },
  { "max_seconds", SHOAL_OPT_FLOAT, "0", 0, 1e9, NULL,
    "time budget: training ends at the first step boundary after this many seconds of the job's "
    "clock, then tests as at train_steps; 0 = none" },
  { "metrics_interval", SHOAL_OPT_FLOAT, "1", 0, 1e6, NULL,
    "seconds between a process's \"process\" lines in metrics.jsonl (bytes, staleness); 0 = only at the end" },
  { "memory_limit", SHOAL_OPT_STRING, "80%", SHOAL_UNBOUNDED, NULL,
    "host memory the nets of this process may allocate together (every worker's outputs, gradients, "
    "params and layer workspaces), checked as each layer is set up: a net past it is refused naming "
    "the layer; bytes with an optional K, M, G or T (binary), N% of the machine's memory (or of "
    "ulimit -v where smaller), or 0 = no limit" },
  { "device_update", SHOAL_OPT_BOOL, "true", SHOAL_UNBOUNDED, NULL,
    "a GPU worker whose server is in its own process (one process, one worker unit) keeps the params "
    "and the updater's state on the GPU and updates them there, so that only data and metrics cross "
    "PCIe in a step (docs/GPU.md); false: gradients go down and values up at every step, and the "
    "host updates them, as for a server in another process" },
  { "device_codecs", SHOAL_OPT_BOOL, "true", SHOAL_UNBOUNDED, NULL,
    "a GPU worker whose slices go to servers in other processes with [cluster] wire_grads or wire_values "
    "other than fp32 encodes its gradients and decodes its values on the GPU (the same bytes as the "
    "host's codecs), so that only encoded bytes cross PCIe (docs/GPU.md); false: gradients come down "
    "and values go up as floats, and the host encodes and decodes" },
  { "cuda_graph", SHOAL_OPT_BOOL, "true", SHOAL_UNBOUNDED, NULL,
    "a GPU worker whose params stay on the GPU (device_update) captures a full batch's training step "
    "(forward, backward, the updates) once as a CUDA graph and replays it, one launch a step instead of one "
    "per kernel, each replay equal to the eager step bit for bit (docs/GPU.md); no effect on workers that "
    "run on the CPU, update on the host or hold a layer a graph cannot (GRU, LSTM, RBM: said once where "
    "the conf sets the key, else only in the debug log); false: every step eager" },
  { "precision", SHOAL_OPT_STRING, "fp32", SHOAL_UNBOUNDED, "fp32|tf32|bf16",
    "GPU workers' matrix products and convolutions: fp32 (IEEE, as on the CPU), tf32 (TF32 tensor "
    "cores: operands rounded to 10-bit mantissas, FP32 sums) or bf16 (dense and RBM products may run on "
    "bfloat16 tensor cores where cuBLAS has faster kernels than TF32's: operands rounded to 7-bit mantissas, FP32 "
    "sums; convolutions as tf32; every value kept "
    "in FP32 between layers; docs/GPU.md); the CPU computes in fp32 whatever this says" },
  { "plugins", SHOAL_OPT_STRING_LIST, "", SHOAL_UNBOUNDED, NULL,
    "shared libraries of layer types to load (shoal/plugin.h); a name without '/' is looked for "
    "in SHOAL_PLUGIN_PATH and the installed plugin directory" },
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

/* train_steps and epochs both give the training length: one of them set
 * with -o replaces the other from the file (the command line wins). */
static void
length_override_wins (ShoalConf *conf)
{
  static const char *const keys[2] = { "train_steps", "epochs" };
  GKeyFile *kf = shoal_conf_keyfile (conf);
  for (int i = 0; i < 2; i++)
    {
      const char *mine = keys[i], *other = keys[1 - i];
      if (!shoal_conf_is_override (conf, "job", mine) || shoal_conf_is_override (conf, "job", other)
          || !g_key_file_has_key (kf, "job", other, NULL))
        continue;
      char *raw = g_key_file_get_value (kf, "job", mine, NULL);
      double v = g_ascii_strtod (g_strstrip (raw), NULL);
      g_free (raw);
      if (v > 0)
        g_key_file_remove_key (kf, "job", other, NULL);
    }
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

/* `value` (a path relative to the working directory) made absolute; a
 * new string.  An empty value (no path) stays empty. */
static char *
absolute_path (const char *value)
{
  return *value == '\0' ? g_strdup ("") : g_canonicalize_filename (value, NULL);
}

/* Every path of the conf - the layers' SHOAL_OPT_PATH keys (datasets)
 * and [job] init_from - made absolute in the conf itself, as the plugins
 * are: the conf as run, which the workspace keeps as job.conf, then names
 * the same files from any working directory (shoal eval and predict, a
 * resumed run, another process of the job). */
static void
absolute_paths (ShoalJob *job)
{
  GKeyFile *kf = shoal_conf_keyfile (job->conf);
  char **groups = g_key_file_get_groups (kf, NULL);
  for (int g = 0; groups[g] != NULL; g++)
    {
      char *type = g_str_has_prefix (groups[g], "layer ") ? g_key_file_get_string (kf, groups[g], "type", NULL)
                                                         : NULL;
      const ShoalLayerOps *ops = type != NULL ? shoal_layer_lookup (type) : NULL;
      g_free (type);
      for (const ShoalOption *o = ops != NULL ? ops->options : NULL; o != NULL && o->key != NULL; o++)
        {
          char *value = o->type == SHOAL_OPT_PATH ? g_key_file_get_string (kf, groups[g], o->key, NULL) : NULL;
          if (value != NULL && !g_path_is_absolute (value) && *value != '\0')
            {
              char *abs = absolute_path (value);
              g_key_file_set_string (kf, groups[g], o->key, abs);
              g_free (abs);
            }
          g_free (value);
        }
    }
  g_strfreev (groups);
  if (job->init_from != NULL && job->init_from[0] != NULL)
    {
      for (int i = 0; job->init_from[i] != NULL; i++)
        {
          char *abs = absolute_path (job->init_from[i]);
          g_free (job->init_from[i]);
          job->init_from[i] = abs;
        }
      /* the conf's list syntax ("a, b") */
      char *joined = g_strjoinv (", ", job->init_from);
      g_key_file_set_string (kf, "job", "init_from", joined);
      g_free (joined);
    }
}

/* Loads the [job] plugins and `extra` ones (NULL-terminated, may be
 * NULL), and writes the full list back with paths made absolute, so that
 * the conf as run (what every process of the job loads) names the same
 * files from any working directory. */
static gboolean
load_plugins (ShoalJob *job, const char *const *extra, GError **error)
{
  gsize n = 0;
  char **listed = shoal_conf_get_string_list (job->conf, "job", shoal_job_options, "plugins", &n);
  GPtrArray *all = g_ptr_array_new_with_free_func (g_free);
  for (gsize i = 0; i < n; i++)
    g_ptr_array_add (all, g_strdup (listed[i]));
  for (int i = 0; extra != NULL && extra[i] != NULL; i++)
    g_ptr_array_add (all, g_strdup (extra[i]));
  g_strfreev (listed);
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < all->len; i++)
    {
      char *name = g_ptr_array_index (all, i);
      if (strchr (name, '/') != NULL && !g_path_is_absolute (name))
        {
          char *abs = g_canonicalize_filename (name, NULL);
          g_free (name);
          all->pdata[i] = name = abs;
        }
      GError *local = NULL;
      if (!shoal_plugin_load (name, &local))
        {
          if (i < n)
            {
              /* where in the conf, with the plugin's own code (IO for a
               * missing file, as shoal_plugin_load says), not CONF */
              GError *located = NULL;
              shoal_conf_error (job->conf, &located, "job", "plugins", "%s", local->message);
              g_set_error_literal (error, local->domain, local->code, located->message);
              g_error_free (located);
            }
          else
            g_set_error (error, local->domain, local->code, "--plugin: %s", local->message);
          g_error_free (local);
          ok = FALSE;
        }
    }
  if (ok && all->len > 0)
    {
      /* the conf's list syntax ("a, b"), not GKeyFile's ("a;b;") */
      g_ptr_array_add (all, NULL);
      char *joined = g_strjoinv (", ", (char **) all->pdata);
      g_key_file_set_string (shoal_conf_keyfile (job->conf), "job", "plugins", joined);
      g_free (joined);
    }
  g_ptr_array_free (all, TRUE);
  return ok;
}

gboolean
shoal_job_add_plugins (ShoalJob *job, const char *const *plugins, GError **error)
{
  return load_plugins (job, plugins, error);
}

/* Applies the overrides to conf (taken) and validates the job. */
/* [job] memory_limit: "0", "80%", "1500000000", "512M", "2G", "1.5GiB". */
static gboolean
read_memory_limit (ShoalJob *job, GError **error)
{
  char *raw = shoal_conf_get_string (job->conf, "job", shoal_job_options, "memory_limit");
  char *end = NULL;
  const char *text = g_strstrip (raw);
  double v = g_ascii_strtod (text, &end);
  double scale = 1;
  gboolean ok = end != text && isfinite (v) && v >= 0;
  if (ok && *end == '%')
    {
      guint64 machine = shoal_memory_of_machine ();
      ok = end[1] == '\0' && v > 0 && v <= 100;
      /* the machine's size unknown: no cap rather than a guess */
      scale = machine > 0 ? (double) machine / 100 : 0;
    }
  else if (ok && *end != '\0')
    {
      static const char units[] = "KMGT";
      const char *u = strchr (units, g_ascii_toupper (*end));
      ok = u != NULL && (end[1] == '\0' || g_ascii_strcasecmp (end + 1, "B") == 0
                         || g_ascii_strcasecmp (end + 1, "iB") == 0);
      for (const char *k = units; ok && k <= u; k++)
        scale *= 1024;
    }
  double bytes = v * scale;
  if (!ok || bytes >= 1.8e19)
    {
      shoal_conf_error (job->conf, error, "job", "memory_limit",
                        "'%s' is not a memory size (bytes with an optional K, M, G or T, N%% of the "
                        "machine's memory with 0 < N <= 100, or 0 for no limit)", text);
      g_free (raw);
      return FALSE;
    }
  g_free (raw);
  job->memory_limit = (guint64) bytes;
  if (job->memory_limit > 0 && job->memory_limit < 64)
    job->memory_limit = 64;  /* the smallest allocation: "1" means a cap, not none */
  job->memory_budget = shoal_memory_budget_new (job->memory_limit, "job.memory_limit");
  return TRUE;
}

/* Whether name is one folder below workspace/ (the default workspace). */
static gboolean
name_is_folder (const char *name)
{
  return name[0] != '\0' && strchr (name, '/') == NULL && strcmp (name, ".") != 0 && strcmp (name, "..") != 0;
}

static ShoalJob *
job_from_conf (ShoalConf *conf, const char *const *overrides, GError **error)
{
  if (conf == NULL)
    return NULL;
  shoal_data_register_layers ();   /* a job may read datasets: its input types must be known */
  for (int i = 0; overrides != NULL && overrides[i] != NULL; i++)
    if (!shoal_conf_override (conf, overrides[i], error))
      {
        shoal_conf_free (conf);
        return NULL;
      }

  length_override_wins (conf);
  ShoalJob *job = g_new0 (ShoalJob, 1);
  job->conf = conf;
  const ShoalOption *const job_tables[] = { shoal_job_options, NULL };
  const ShoalOption *const updater_tables[] = { shoal_updater_options, NULL };
  const ShoalOption *const cluster_tables[] = { shoal_cluster_options, shoal_partition_options, NULL };
  if (!shoal_conf_check_sections (conf, error)
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
  job->test_groups = (int) shoal_conf_get_int (conf, "job", t, "test_groups");
  job->disp_freq = (int) shoal_conf_get_int (conf, "job", t, "disp_freq");
  job->seed = (guint64) shoal_conf_get_int (conf, "job", t, "seed");
  job->threads = (int) shoal_conf_get_int (conf, "job", t, "threads");
  job->checkpoint_freq = shoal_conf_get_int (conf, "job", t, "checkpoint_freq");
  gsize ninit = 0;
  job->init_from = shoal_conf_get_string_list (conf, "job", t, "init_from", &ninit);
  char *alg = shoal_conf_get_string (conf, "job", t, "alg");
  job->cd_k = strcmp (alg, "cd") == 0 ? (int) shoal_conf_get_int (conf, "job", t, "cd_k") : 0;
  /* a key that does nothing is a mistake the user should hear of */
  gboolean cd_k_unused = job->cd_k == 0 && g_key_file_has_key (shoal_conf_keyfile (conf), "job", "cd_k", NULL);
  g_free (alg);
  job->max_seconds = shoal_conf_get_float (conf, "job", t, "max_seconds");
  job->metrics_interval = shoal_conf_get_float (conf, "job", t, "metrics_interval");
  job->device_update = shoal_conf_get_bool (conf, "job", t, "device_update");
  job->device_codecs = shoal_conf_get_bool (conf, "job", t, "device_codecs");
  job->cuda_graph = shoal_conf_get_bool (conf, "job", t, "cuda_graph");
  char *precision = shoal_conf_get_string (conf, "job", t, "precision");
  /* the table's choices were checked: only fp32, tf32 and bf16 get here */
  if (!shoal_precision_parse (precision, &job->precision))
    job->precision = SHOAL_PRECISION_FP32;
  g_free (precision);

  gboolean ok = read_memory_limit (job, error) && load_plugins (job, NULL, error);
  if (ok)
    absolute_paths (job);
  if (!ok)
    ;
  else if (!name_is_folder (job->name))
    {
      /* "..", "../../x" or "" put the workspace (checkpoint, job.conf,
       * metrics.jsonl, and --force's removals) outside workspace/ */
      shoal_conf_error (conf, error, "job", "name",
                        "'%s' cannot name the job's folder workspace/NAME: give a name without '/' that is not "
                        "empty, '.' or '..'", job->name);
      ok = FALSE;
    }
  else if (job->train_steps > 0 && job->epochs > 0)
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
    ok = shoal_job_check_families (conf, job->cd_k, error);
  /* after the families' check: an RBM net under alg = bp is told that first */
  if (ok && cd_k_unused)
    {
      shoal_conf_error (conf, error, "job", "cd_k",
                        "cd_k sets the Gibbs steps of alg = cd; this job trains with alg = bp (remove cd_k, "
                        "or set alg = cd)");
      ok = FALSE;
    }
  if (ok)
    ok = read_updater (conf, &job->updater, error)
         && shoal_cluster_conf_read (conf, &job->cluster, error)
         && shoal_emulate_conf_read (conf, &job->cluster, &job->emulate, error)
         && shoal_tls_conf_read (conf, &job->tls, error);
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
  g_return_val_if_fail (text != NULL, NULL);
  return job_from_conf (shoal_conf_load_data (text, origin, error), overrides, error);
}

ShoalJob *
shoal_job_load (const char *path, const char *const *overrides, GError **error)
{
  g_return_val_if_fail (path != NULL, NULL);
  return job_from_conf (shoal_conf_load_file (path, error), overrides, error);
}

ShoalJob *
shoal_job_load_topology (const char *job_path, const char *topology_path,
                         const char *const *overrides, GError **error)
{
  if (topology_path == NULL)
    return shoal_job_load (job_path, overrides, error);
  char **topo = shoal_topology_overrides (topology_path, error);
  if (topo == NULL)
    return NULL;
  char *text = NULL;
  if (!shoal_file_read (job_path, &text, NULL, error))
    {
      g_strfreev (topo);
      return NULL;
    }
  char *blanked = shoal_topology_blank_cluster (text, topology_path);
  GPtrArray *all = g_ptr_array_new ();
  for (int i = 0; topo[i] != NULL; i++)
    g_ptr_array_add (all, topo[i]);
  for (int i = 0; overrides != NULL && overrides[i] != NULL; i++)
    g_ptr_array_add (all, (gpointer) overrides[i]);
  g_ptr_array_add (all, NULL);
  ShoalJob *job = shoal_job_load_data (blanked, job_path, (const char *const *) all->pdata, error);
  g_ptr_array_free (all, TRUE);
  g_strfreev (topo);
  g_free (blanked);
  g_free (text);
  return job;
}

void
shoal_job_free (ShoalJob *job)
{
  if (job == NULL)
    return;
  shoal_conf_free (job->conf);
  shoal_emulate_conf_clear (&job->emulate);
  shoal_tls_conf_clear (&job->tls);
  g_free (job->name);
  g_strfreev (job->init_from);
  shoal_memory_budget_free (job->memory_budget);
  g_free (job);
}

void
shoal_job_resolve_epochs (ShoalJob *job, gint64 records_per_epoch, int batch)
{
  if (job->epochs > 0 && batch > 0)
    job->train_steps = (gint64) ceil (job->epochs * (double) records_per_epoch / batch);
}

gboolean
shoal_job_tests (const ShoalJob *job, int group, int worker)
{
  return worker == 0 && (job->test_groups == 0 || group < job->test_groups);
}
