/* shoal compare JOB.conf: the same model, data and seeds under each
 * training scheme, one run after another, each exactly as `shoal run
 * JOB.conf --topology conf/SCHEME.conf` would run it (the launcher's own
 * code, shoal_launch, or in-process for a one-process layout), then one
 * report: DIR/report.md (a row per scheme and what each figure shows,
 * worked out from the numbers), DIR/results.csv (a row per run) and
 * PNG figures drawn by gnuplot from DIR/data and DIR/figures.gp
 * (compare_report.c) after everything else is written: without gnuplot
 * the report says how to draw them later, and the exit status is the
 * runs' own.
 *
 * Equal terms: every scheme gets the same budget of samples (all workers
 * together) or of seconds, the same seeds (repeat r runs with the job's
 * seed + r) and the same -o overrides; the target accuracy is the same
 * for all (--target, or 95 % of the best scheme's mean final accuracy). */
#include <errno.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cluster/layout.h"
#include "core/error.h"
#include "data/dataset.h"
#include "tools/commands.h"
#include "tools/compare.h"
#include "tools/gnuplot.h"
#include "emulate/calibration.h"
#include "emulate/emulator.h"
#include "job/job.h"
#include "run/runner.h"

static void
run_free (gpointer data)
{
  Run *r = data;
  g_free (r->workspace);
  shoal_run_log_free (r->log);
  g_free (r);
}

static void
scheme_free (gpointer data)
{
  Scheme *s = data;
  g_free (s->name);
  g_free (s->conf);
  g_free (s->base);
  g_ptr_array_free (s->runs, TRUE);
  g_free (s);
}

/* The schemes of conf/ in the order a report lists them; other confs in
 * the directory follow in name order. */
static const char *const known_schemes[] = {
  "sandblaster", "allreduce", "downpour", "hogwild", "ssp", "backup", "stale-lr", "downpour-dean", "elastic", NULL
};

/* ---- options ------------------------------------------------------------ */

static gboolean
parse_budget (const char *text, Budget *b, GError **error)
{
  b->kind = BUDGET_CONF;
  if (text == NULL)
    return TRUE;
  const char *eq = strchr (text, '=');
  char *end = NULL;
  if (eq != NULL)
    b->amount = g_ascii_strtod (eq + 1, &end);
  if (eq == NULL || end == eq + 1 || *end != '\0')
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                   "--budget: '%s' is not samples=N or seconds=S", text);
      return FALSE;
    }
  if (strncmp (text, "samples", (size_t) (eq - text)) == 0 && eq - text == 7)
    b->kind = BUDGET_SAMPLES;
  else if (strncmp (text, "seconds", (size_t) (eq - text)) == 0 && eq - text == 7)
    b->kind = BUDGET_SECONDS;
  else
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                   "--budget: '%.*s' is neither samples nor seconds", (int) (eq - text), text);
      return FALSE;
    }
  if (!(b->amount > 0) || !isfinite (b->amount) || (b->kind == BUDGET_SAMPLES && b->amount > 1e15))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "--budget %s: the budget must be above 0%s",
                   text, b->kind == BUDGET_SAMPLES ? " (and at most 1e15 samples)" : "");
      return FALSE;
    }
  return TRUE;
}

/* conf/ of the working directory, else the one beside the binary's
 * directory (build/shoal -> conf/). */
static char *
default_conf_dir (void)
{
  if (g_file_test ("conf", G_FILE_TEST_IS_DIR))
    return g_strdup ("conf");
  char *exe = g_file_read_link ("/proc/self/exe", NULL);
  if (exe == NULL)
    return g_strdup ("conf");
  char *bin = g_path_get_dirname (exe);
  char *dir = g_build_filename (bin, "..", "conf", NULL);
  g_free (bin);
  g_free (exe);
  return dir;
}

static int
str_cmp (gconstpointer a, gconstpointer b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

/* Every scheme of the conf directory: the known ones in their order,
 * then the others by name. */
static GPtrArray *
all_schemes (const char *dir, GError **error)
{
  GDir *d = g_dir_open (dir, 0, error);
  if (d == NULL)
    {
      g_prefix_error (error, "--conf-dir: ");
      return NULL;
    }
  GPtrArray *found = g_ptr_array_new_with_free_func (g_free);
  const char *name;
  while ((name = g_dir_read_name (d)) != NULL)
    if (g_str_has_suffix (name, ".conf"))
      g_ptr_array_add (found, g_strndup (name, strlen (name) - 5));
  g_dir_close (d);
  g_ptr_array_sort (found, str_cmp);
  GPtrArray *out = g_ptr_array_new_with_free_func (g_free);
  for (int k = 0; known_schemes[k] != NULL; k++)
    for (guint i = 0; i < found->len; i++)
      if (strcmp (g_ptr_array_index (found, i), known_schemes[k]) == 0)
        g_ptr_array_add (out, g_strdup (known_schemes[k]));
  for (guint i = 0; i < found->len; i++)
    if (!g_strv_contains (known_schemes, g_ptr_array_index (found, i)))
      g_ptr_array_add (out, g_strdup (g_ptr_array_index (found, i)));
  g_ptr_array_free (found, TRUE);
  if (out->len == 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "--conf-dir: %s holds no SCHEME.conf", dir);
      g_ptr_array_free (out, TRUE);
      return NULL;
    }
  return out;
}

/* The schemes asked for as (name, topology path) pairs. */
static GPtrArray *
resolve_schemes (const char *list, const char *dir, GError **error)
{
  GPtrArray *available = all_schemes (dir, error);
  if (available == NULL)
    return NULL;
  GPtrArray *out = g_ptr_array_new_with_free_func (scheme_free);
  char **names = list != NULL ? g_strsplit (list, ",", -1) : NULL;
  guint n = names != NULL ? g_strv_length (names) : available->len;
  for (guint i = 0; i < n; i++)
    {
      char *name = g_strstrip (g_strdup (names != NULL ? names[i] : g_ptr_array_index (available, i)));
      Scheme *s = g_new0 (Scheme, 1);
      s->runs = g_ptr_array_new_with_free_func (run_free);
      if (strchr (name, '/') != NULL || g_str_has_suffix (name, ".conf"))
        {
          /* a topology file of one's own */
          s->conf = g_strdup (name);
          char *base = g_path_get_basename (name);
          s->name = g_str_has_suffix (base, ".conf") ? g_strndup (base, strlen (base) - 5) : g_strdup (base);
          g_free (base);
          if (!g_file_test (s->conf, G_FILE_TEST_IS_REGULAR))
            {
              g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "--schemes: %s: no such topology file", name);
              scheme_free (s);
              g_free (name);
              goto fail;
            }
        }
      else
        {
          s->name = g_strdup (name);
          s->conf = g_strdup_printf ("%s/%s.conf", dir, name);
          gboolean known = FALSE;
          for (guint k = 0; k < available->len; k++)
            known |= strcmp (g_ptr_array_index (available, k), name) == 0;
          if (!known)
            {
              g_ptr_array_add (available, NULL);
              char *choices = g_strjoinv (", ", (char **) available->pdata);
              g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                           "--schemes: unknown scheme '%s' (%s has: %s; or give a topology file's path)",
                           name, dir, choices);
              g_free (choices);
              g_ptr_array_remove_index (available, available->len - 1);
              scheme_free (s);
              g_free (name);
              goto fail;
            }
        }
      for (guint j = 0; j < out->len; j++)
        if (strcmp (((Scheme *) g_ptr_array_index (out, j))->name, s->name) == 0)
          {
            g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "--schemes: '%s' is named twice", s->name);
            scheme_free (s);
            g_free (name);
            goto fail;
          }
      g_ptr_array_add (out, s);
      g_free (name);
    }
  if (out->len == 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "--schemes: no scheme given");
      goto fail;
    }
  g_strfreev (names);
  g_ptr_array_free (available, TRUE);
  return out;

fail:
  g_strfreev (names);
  g_ptr_array_free (available, TRUE);
  g_ptr_array_free (out, TRUE);
  return NULL;
}

/* ---- the budget in steps ------------------------------------------------ */

/* The layer that reads the data: the one whose group has batch_size. */
static char *
input_layer (ShoalJob *job, GError **error)
{
  GKeyFile *kf = shoal_conf_keyfile (job->conf);
  char **groups = g_key_file_get_groups (kf, NULL);
  char *found = NULL;
  for (int i = 0; groups[i] != NULL && found == NULL; i++)
    if (g_str_has_prefix (groups[i], "layer ") && g_key_file_has_key (kf, groups[i], "batch_size", NULL))
      found = g_strdup (groups[i]);
  g_strfreev (groups);
  if (found == NULL)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                 "%s: no layer with a batch_size: compare needs the input layer's batch to share the budget",
                 shoal_conf_origin (job->conf));
  return found;
}

/* The job's own length in samples for one group: train_steps x batch, or
 * epochs x the training set (an lmdb_input's `train`). */
static gboolean
conf_samples (ShoalJob *job, const char *layer, gint64 batch, double *samples, GError **error)
{
  if (job->train_steps > 0)
    {
      *samples = (double) job->train_steps * (double) batch;
      return TRUE;
    }
  GKeyFile *kf = shoal_conf_keyfile (job->conf);
  char *train = g_key_file_get_string (kf, layer, "train", NULL);
  if (train == NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                   "%s: [job] epochs with an input that is not lmdb_input: give --budget",
                   shoal_conf_origin (job->conf));
      return FALSE;
    }
  ShoalDataset *ds = shoal_dataset_open (g_strstrip (train), error);
  g_free (train);
  if (ds == NULL)
    return FALSE;
  *samples = job->epochs * (double) shoal_dataset_count (ds);
  shoal_dataset_unref (ds);
  return TRUE;
}

static gboolean
batch_of (ShoalJob *job, const char *layer, gint64 *batch, GError **error)
{
  char *raw = g_key_file_get_value (shoal_conf_keyfile (job->conf), layer, "batch_size", NULL);
  gboolean ok = raw != NULL && g_ascii_string_to_signed (g_strstrip (raw), 10, 1, G_MAXINT, batch, NULL);
  g_free (raw);
  if (!ok)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "[%s] batch_size is not a number", layer);
  return ok;
}

/* ---- running ------------------------------------------------------------ */


static char **
with_overrides (char **user, GPtrArray *more)
{
  GPtrArray *all = g_ptr_array_new ();
  for (int i = 0; user != NULL && user[i] != NULL; i++)
    g_ptr_array_add (all, g_strdup (user[i]));
  for (guint i = 0; i < more->len; i++)
    g_ptr_array_add (all, g_strdup (g_ptr_array_index (more, i)));
  g_ptr_array_add (all, NULL);
  return (char **) g_ptr_array_free (all, FALSE);
}

/* The job as scheme s runs it, with the user's overrides: an
 * asynchronous scheme's topology (several worker groups) leaves
 * [cluster] sync_lr, the synchronous schemes' rule, aside, so one -o
 * cluster.sync_lr=linear serves a compare of both kinds. */
static ShoalJob *
load_scheme (const char *job_path, const Scheme *s, char **overrides, GError **error)
{
  GKeyFile *kf = g_key_file_new ();
  gint64 groups = 1;
  if (g_key_file_load_from_file (kf, s->conf, G_KEY_FILE_NONE, NULL))
    {
      char *v = g_key_file_get_value (kf, "cluster", "nworker_groups", NULL);
      if (v != NULL)
        g_ascii_string_to_signed (g_strstrip (v), 10, 1, G_MAXINT, &groups, NULL);
      g_free (v);
    }
  g_key_file_free (kf);
  GPtrArray *more = g_ptr_array_new_with_free_func (g_free);
  if (groups > 1)
    {
      g_ptr_array_add (more, g_strdup ("cluster.sync_lr=none"));
      g_ptr_array_add (more, g_strdup ("cluster.sync_lr_warmup=0"));
    }
  char **all = with_overrides (overrides, more);
  g_ptr_array_free (more, TRUE);
  ShoalJob *job = shoal_job_load_topology (job_path, s->conf, (const char *const *) all, error);
  g_strfreev (all);
  return job;
}

/* The job scheme s runs as repeat r, with its Run added to s->runs
 * (status 1 until it ran); NULL with error when it cannot start. */
static ShoalJob *
prepare_run (Plan *plan, Scheme *s, int r, Run **run_out, GError **error)
{
  ShoalJob *base = load_scheme (plan->job_path, s, plan->overrides, error);
  if (base == NULL)
    return NULL;
  char **scaled = NULL;
  if (s->workers > 0)
    {
      /* a sweep's point: the scheme at its size, then as any scheme */
      gint64 job_batch = 0;
      char *group = input_layer (base, error);
      gboolean have = group != NULL && batch_of (base, group, &job_batch, error);
      GPtrArray *extra = g_ptr_array_new_with_free_func (g_free);
      if (have)
        {
          shoal_compare_scale_overrides (s, &base->cluster, job_batch, group, base->emulate.step_ms, extra);
          shoal_compare_sweep_defaults (plan, base, job_batch, extra);
        }
      g_free (group);
      shoal_job_free (base);
      scaled = with_overrides (plan->overrides, extra);
      g_ptr_array_free (extra, TRUE);
      base = have ? load_scheme (plan->job_path, s, scaled, error) : NULL;
      if (base == NULL)
        {
          g_strfreev (scaled);
          return NULL;
        }
    }
  char **user = scaled != NULL ? scaled : plan->overrides;
  s->async = base->cluster.nworker_groups > 1;
  s->staleness = base->cluster.staleness;
  s->groups = base->cluster.nworker_groups;
  GPtrArray *more = g_ptr_array_new_with_free_func (g_free);
  gint64 batch = 0;
  char *layer = input_layer (base, error);
  Run *run = g_new0 (Run, 1);
  run->repeat = r;
  run->seed = base->seed + (guint64) r;
  run->status = 1;
  run->workspace = g_strdup_printf ("%s/runs/%s-r%d", plan->out, s->name, r + 1);
  g_ptr_array_add (s->runs, run);
  *run_out = run;
  if (layer == NULL || !batch_of (base, layer, &batch, error))
    {
      g_free (layer);
      shoal_job_free (base);
      g_ptr_array_free (more, TRUE);
      g_strfreev (scaled);
      return NULL;
    }
  g_free (layer);
  g_ptr_array_add (more, g_strdup_printf ("job.seed=%" G_GUINT64_FORMAT, run->seed));
  if (plan->budget.kind == BUDGET_SECONDS)
    {
      run->train_steps = 1000000000;
      gint64 test_freq = base->test_freq > 0 ? base->test_freq : 50;
      g_ptr_array_add (more, g_strdup ("job.epochs=0"));
      g_ptr_array_add (more, g_strdup_printf ("job.train_steps=%" G_GINT64_FORMAT, run->train_steps));
      g_ptr_array_add (more, g_strdup_printf ("job.max_seconds=%g", plan->budget.amount));
      g_ptr_array_add (more, g_strdup_printf ("job.test_freq=%" G_GINT64_FORMAT, test_freq));
    }
  else
    {
      /* the samples of every group together: steps x batch x groups */
      double per_step = (double) batch * base->cluster.nworker_groups;
      run->train_steps = MAX ((gint64) ceil (plan->budget_samples / per_step), 1);
      gint64 test_freq = MAX (run->train_steps / plan->points, 1);
      gint64 disp_freq = MAX (MIN ((gint64) base->disp_freq, run->train_steps / 40), 1);
      g_ptr_array_add (more, g_strdup ("job.epochs=0"));
      g_ptr_array_add (more, g_strdup_printf ("job.train_steps=%" G_GINT64_FORMAT, run->train_steps));
      g_ptr_array_add (more, g_strdup_printf ("job.test_freq=%" G_GINT64_FORMAT, test_freq));
      g_ptr_array_add (more, g_strdup_printf ("job.disp_freq=%" G_GINT64_FORMAT, disp_freq));
    }
  shoal_job_free (base);
  char **all = with_overrides (user, more);
  g_ptr_array_free (more, TRUE);
  g_strfreev (scaled);
  ShoalJob *job = load_scheme (plan->job_path, s, all, error);
  g_strfreev (all);
  if (job == NULL)
    return NULL;
  printf ("==== %s, run %d of %d (seed %" G_GUINT64_FORMAT ", %" G_GINT64_FORMAT " steps%s): %s\n", s->name,
          r + 1, plan->repeats, run->seed, run->train_steps,
          plan->budget.kind == BUDGET_SECONDS ? " at most" : "", run->workspace);
  fflush (stdout);
  return job;
}

/* Runs a prepared job (in this process, or the launcher's processes);
 * returns its exit status (130: interrupted). */
int
shoal_compare_execute (const Plan *plan, const Scheme *s, ShoalJob *job, Run *run)
{
  GError *error = NULL;
  ShoalLayout *layout = shoal_layout_new (&job->cluster, job->conf, &error);
  if (layout == NULL)
    {
      fprintf (stderr, "shoal compare: %s: %s\n", s->name, error->message);
      g_error_free (error);
      return 1;
    }
  int status = 1;
  if (layout->nprocs > 1 && job->emulate.clock != SHOAL_CLOCK_VIRTUAL)
    {
      ShoalLaunchOptions lo = { .quiet = plan->quiet, .grace_s = 60 };
      status = shoal_launch (job, layout, run->workspace, &lo);
    }
  else
    {
      ShoalRunOptions opts = { .workspace = run->workspace, .quiet = plan->quiet, .resume_step = -1 };
      ShoalRunResult result = { 0 };
      GError *e = NULL;
      status = shoal_run_job (job, &opts, &result, &e) ? (result.stopped ? 130 : 0) : 1;
      if (e != NULL)
        {
          fprintf (stderr, "shoal compare: %s: %s\n", s->name, e->message);
          g_error_free (e);
        }
    }
  shoal_layout_free (layout);
  return status;
}

/* What a run that ended left: its metrics. */
void
shoal_compare_collect (Run *run, const Scheme *s)
{
  char *metrics = g_build_filename (run->workspace, "metrics.jsonl", NULL);
  GError *e = NULL;
  run->log = shoal_run_log_read (metrics, &e);
  if (run->log == NULL)
    {
      fprintf (stderr, "shoal compare: %s run %d: %s\n", s->name, run->repeat + 1, e->message);
      g_error_free (e);
    }
  else if (run->log->tests->len == 0)
    {
      fprintf (stderr, "shoal compare: %s run %d: no test result in %s\n", s->name, run->repeat + 1, metrics);
      g_clear_pointer (&run->log, shoal_run_log_free);
    }
  g_free (metrics);
}


/* The [emulate] keys as the runs got them, for the report's header. */
static char *
describe_emulation (ShoalJob *job, double step_ms, gboolean measured, double test_batch_ms)
{
  GKeyFile *kf = shoal_conf_keyfile (job->conf);
  GString *d = g_string_new (NULL);
  gsize n = 0;
  char **keys = g_key_file_get_keys (kf, "emulate", &n, NULL);
  for (gsize i = 0; i < n; i++)
    {
      if (strcmp (keys[i], "step_ms") == 0)
        continue;
      char *v = g_key_file_get_value (kf, "emulate", keys[i], NULL);
      g_string_append_printf (d, "%s`%s = %s`", d->len > 0 ? ", " : "", keys[i], g_strstrip (v));
      g_free (v);
    }
  g_strfreev (keys);
  if (job->emulate.nic_from_links)
    g_string_append_printf (d, "; every process's NIC takes %g Mbit/s each way, bandwidth_mbit's (no nic_mbit "
                            "given: a process's links all leave through its one NIC)", job->emulate.nic_mbit);
  if (job->emulate.clock == SHOAL_CLOCK_VIRTUAL && job->emulate.calibration != NULL && job->emulate.step_ms <= 0)
    g_string_append_printf (d, "; each step's time is drawn from the measured steps of the calibration file "
                            "`%s` (median %.3f ms for a group's batch on one machine): give the same file to "
                            "repeat every number", job->emulate.calibration, step_ms);
  else if (job->emulate.clock == SHOAL_CLOCK_VIRTUAL)
    g_string_append_printf (d, "; one step of a group's batch costs a machine %.3f ms%s", step_ms,
                            measured ? " (measured once on this machine, the same for every run)" : "");
  if (job->emulate.clock == SHOAL_CLOCK_VIRTUAL && test_batch_ms > 0)
    g_string_append_printf (d, "; a test pass costs the tester its batches at the calibration's %.3f ms each "
                            "(a synchronous group waits for it)", test_batch_ms);
  else if (job->emulate.clock == SHOAL_CLOCK_VIRTUAL)
    g_string_append_printf (d, "; test passes cost no virtual time (%s)",
                            job->emulate.calibration != NULL
                              ? "the calibration file has no test_batch_ms: `shoal calibrate` the job again"
                              : "only a calibration file measures them");
  return g_string_free (d, FALSE);
}

/* An earlier comparison's results are not overwritten without --force. */
static gboolean
out_is_free (const char *out, GError **error)
{
  static const char *const results[] = { "report.md", "results.csv", NULL };
  for (int i = 0; results[i] != NULL; i++)
    {
      char *path = g_build_filename (out, results[i], NULL);
      gboolean there = g_file_test (path, G_FILE_TEST_EXISTS);
      g_free (path);
      if (there)
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                       "--out %s holds an earlier comparison (%s): give another --out, or --force to replace it",
                       out, results[i]);
          return FALSE;
        }
    }
  return TRUE;
}

/* ---- the command -------------------------------------------------------- */

/* The command line of `shoal compare`. */
typedef struct {
  char *serve, *schemes_arg, *out, *budget_arg, *conf_dir, *emulate_file, *workers_arg;
  char **overrides;
  double target;   /* NaN: not given (0 is given, and refused) */
  int repeats, points, jobs;
  gboolean quiet, force;
} CompareArgs;

static void
compare_args_clear (CompareArgs *a)
{
  g_free (a->serve);
  g_free (a->schemes_arg);
  g_free (a->workers_arg);
  g_free (a->out);
  g_free (a->budget_arg);
  g_free (a->conf_dir);
  g_strfreev (a->overrides);
  g_free (a->emulate_file);
}

/* Parses the options into *a and checks them; *argc, *argv keep JOB.conf. */
static gboolean
parse_compare_args (int *argc, char ***argv, CompareArgs *a, GError **error)
{
  *a = (CompareArgs) { .target = NAN, .repeats = 1, .points = 10 };
  GOptionEntry entries[] = {
    { "schemes", 's', 0, G_OPTION_ARG_STRING, &a->schemes_arg,
      "comma list of schemes (conf/NAME.conf) or topology files; default: every conf in --conf-dir", "LIST" },
    { "repeats", 'n', 0, G_OPTION_ARG_INT, &a->repeats, "runs per scheme, repeat r with seed + r (default 1)", "N" },
    { "out", 'O', 0, G_OPTION_ARG_FILENAME, &a->out, "directory for report.md, results.csv, the runs and the PNGs "
      "(where gnuplot is installed; else their scripts, to draw later) (default compare/JOBNAME)", "DIR" },
    { "budget", 'b', 0, G_OPTION_ARG_STRING, &a->budget_arg,
      "per run: samples=N (all workers together) or seconds=S (of training); default: the job's own length "
      "for one group", "samples=N|seconds=S" },
    { "target", 'T', 0, G_OPTION_ARG_DOUBLE, &a->target,
      "test accuracy to time (0 < ACC <= 1), or the test loss where the net has no accuracy layer (an RBM); "
      "default: 95 percent of the best scheme's mean final accuracy (5 percent above the best mean final loss)",
      "ACC" },
    { "points", 0, 0, G_OPTION_ARG_INT, &a->points, "test passes per run with a samples budget (default 10)", "N" },
    { "override", 'o', 0, G_OPTION_ARG_STRING_ARRAY, &a->overrides, "set a conf key in every run",
      "SECTION.KEY=VALUE" },
    { "conf-dir", 0, 0, G_OPTION_ARG_FILENAME, &a->conf_dir, "where SCHEME.conf files are (default conf/)", "DIR" },
    { "emulate", 'e', 0, G_OPTION_ARG_FILENAME, &a->emulate_file,
      "a file with an [emulate] section for every run (stragglers, links, a lost group, the virtual clock; "
      "docs/SCHEMES.md); -o emulate.KEY=VALUE goes over it", "FILE" },
    { "workers", 'w', 0, G_OPTION_ARG_STRING, &a->workers_arg,
      "a scale sweep: every scheme at each of these worker counts (e.g. 1,2,4,8), with speedup, "
      "efficiency and time to target against workers (scale.csv, scale-*.png, report.md)", "LIST" },
    { "jobs", 'j', 0, G_OPTION_ARG_INT, &a->jobs,
      "virtual-clock runs at once, each in a process of its own (default: the machine's cores; real-clock runs "
      "go one at a time)", "N" },
    { "force", 'f', 0, G_OPTION_ARG_NONE, &a->force,
      "replace an earlier comparison in --out (its report.md, results.csv, figures and runs)", NULL },
    { "quiet", 'q', 0, G_OPTION_ARG_NONE, &a->quiet, "no progress lines from the runs", NULL },
    { "serve", 0, 0, G_OPTION_ARG_STRING, &a->serve,
      "watch the runs in a browser as they train, every scheme overlaid (shoal serve); a port alone listens "
      "on loopback", "[ADDRESS:]PORT" },
    { NULL, 0, 0, 0, NULL, NULL, NULL }
  };
  GOptionContext *ctx = g_option_context_new ("JOB.conf - train one job under several schemes and compare them");
  g_option_context_add_main_entries (ctx, entries, NULL);
  gboolean parsed = g_option_context_parse (ctx, argc, argv, error);
  g_option_context_free (ctx);
  if (!parsed)
    return FALSE;
  if (*argc != 2)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "expected one JOB.conf");
  else if (a->repeats < 1 || a->repeats > 1000)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "--repeats %d: give 1 to 1000 runs per scheme", a->repeats);
  else if (a->points < 1)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "--points %d: at least one test pass per run", a->points);
  else if (!isnan (a->target) && !isfinite (a->target))
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "--target %g: give a number", a->target);
  else
    return TRUE;
  return FALSE;
}

/* What the comparison measures (Plan.by_loss): the test accuracy where the
 * net has an accuracy layer, else the test loss; --target must be one. */
static gboolean
plan_measure (ShoalJob *first, double target, Plan *plan, GError **error)
{
  GKeyFile *kf = shoal_conf_keyfile (first->conf);
  char **groups = g_key_file_get_groups (kf, NULL);
  gboolean accuracy = FALSE;
  for (int i = 0; !accuracy && groups[i] != NULL; i++)
    if (g_str_has_prefix (groups[i], "layer "))
      {
        char *type = g_key_file_get_string (kf, groups[i], "type", NULL);
        accuracy = type != NULL && strcmp (g_strstrip (type), "accuracy") == 0;
        g_free (type);
      }
  g_strfreev (groups);
  plan->by_loss = !accuracy;
  if (accuracy && !isnan (target) && !(target > 0 && target <= 1))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "--target %g: a test accuracy is above 0 and at most 1",
                   target);
      return FALSE;
    }
  return TRUE;
}

/* --emulate FILE: its keys go before the user's -o, which go over them. */
static gboolean
prepend_emulate_file (const char *emulate_file, char ***overrides, GError **error)
{
  char **emu = shoal_emulate_file_overrides (emulate_file, error);
  if (emu == NULL)
    {
      g_prefix_error (error, "--emulate: ");
      return FALSE;
    }
  char **all = g_new0 (char *, g_strv_length (emu) + (*overrides ? g_strv_length (*overrides) : 0) + 1);
  int n = 0;
  for (int i = 0; emu[i] != NULL; i++)
    all[n++] = g_strdup (emu[i]);
  for (int i = 0; *overrides != NULL && (*overrides)[i] != NULL; i++)
    all[n++] = g_strdup ((*overrides)[i]);
  g_strfreev (emu);
  g_strfreev (*overrides);
  *overrides = all;
  return TRUE;
}

/* [emulate] clock = virtual: the step time every run is given (the conf's,
 * the calibration's median, or measured once here and added to
 * *overrides so that the runs repeat exactly); and the emulation's
 * description for the report. */
static gboolean
plan_emulation (ShoalJob *first, Plan *plan, char ***overrides, GError **error)
{
  gboolean measured = FALSE;
  double test_batch_ms = 0;
  if (first->emulate.clock == SHOAL_CLOCK_VIRTUAL)
    {
      plan->virtual_clock = TRUE;
      plan->step_ms = first->emulate.step_ms;
      if (first->emulate.calibration != NULL)
        {
          /* the calibration's measured steps: every run draws from them
           * (unless step_ms is given beside it); its test pass */
          ShoalCalibration cal;
          if (!shoal_calibration_load (first->emulate.calibration, first, &cal, error))
            return FALSE;
          if (plan->step_ms <= 0)
            plan->step_ms = shoal_calibration_median_ms (&cal);
          test_batch_ms = cal.test_batch_ms;
          shoal_calibration_clear (&cal);
        }
      else if (plan->step_ms <= 0)
        {
          /* once, the same for every scheme and repeat: the runs repeat exactly */
          if (!shoal_emulator_measure_step_ms (first, &plan->step_ms, error))
            return FALSE;
          measured = TRUE;
          guint n = *overrides ? g_strv_length (*overrides) : 0;
          *overrides = g_renew (char *, *overrides, n + 2);
          (*overrides)[n] = g_strdup_printf ("emulate.step_ms=%.3f", plan->step_ms);
          (*overrides)[n + 1] = NULL;
          printf ("virtual clock: one step of a group's batch measured once on this machine: %.3f ms, given to "
                  "every run (-o emulate.step_ms=%.3f repeats it)\n", plan->step_ms, plan->step_ms);
        }
    }
  if (shoal_emulate_active (&first->emulate))
    plan->emulation = describe_emulation (first, plan->step_ms, measured, test_batch_ms);
  return TRUE;
}

/* The other schemes' jobs load too (the first one's did): every error of
 * the confs shows before anything runs. */
static gboolean
check_schemes (const char *job_path, GPtrArray *schemes, char **overrides, GError **error)
{
  for (guint i = 1; i < schemes->len; i++)
    {
      Scheme *s = g_ptr_array_index (schemes, i);
      ShoalJob *j = load_scheme (job_path, s, overrides, error);
      if (j == NULL)
        return FALSE;
      shoal_job_free (j);
    }
  return TRUE;
}

/* plan->budget_samples: the budget given, or the job's own length. */
static gboolean
plan_budget_samples (ShoalJob *first, Plan *plan, GError **error)
{
  char *layer = input_layer (first, error);
  gint64 batch = 0;
  gboolean ok = layer != NULL && batch_of (first, layer, &batch, error);
  plan->budget_samples = plan->budget.amount;
  if (ok && plan->budget.kind == BUDGET_CONF)
    ok = conf_samples (first, layer, batch, &plan->budget_samples, error);
  g_free (layer);
  return ok;
}

/* --out (default compare/JOBNAME into *out): free of an earlier
 * comparison unless --force, and made. */
static gboolean
prepare_out (ShoalJob *first, gboolean force, char **out, GError **error)
{
  if (*out == NULL)
    *out = g_build_filename ("compare", first->name, NULL);
  if (!force && !out_is_free (*out, error))
    return FALSE;
  if (g_mkdir_with_parents (*out, 0755) != 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "--out %s: cannot create: %s", *out, g_strerror (errno));
      return FALSE;
    }
  return TRUE;
}

/* Every scheme, repeats times, until one is interrupted (*interrupted);
 * returns how many runs failed. */
static int
run_all (Plan *plan, GPtrArray *schemes, gboolean *interrupted)
{
  int failed = 0;
  *interrupted = FALSE;
  shoal_compare_run_points (plan, schemes, prepare_run, interrupted, &failed);
  return failed;
}

/* One line per scheme after the report, and the exit status. */
static int
summarize (GPtrArray *schemes, const Plan *plan, double target, gboolean interrupted, int failed)
{
  const char *measure = shoal_compare_measure (plan);
  printf ("shoal compare: %s/report.md, results.csv and the figures%s; ", plan->out,
          plan->gnuplot ? "" : "' data and scripts (not drawn: no gnuplot)");
  if (isnan (target))
    printf ("no target (no run finished)\n");
  else
    printf ("target %s %.4f\n", measure, target);
  for (guint i = 0; i < schemes->len; i++)
    {
      Scheme *s = g_ptr_array_index (schemes, i);
      if (s->finished == 0)
        printf ("  %-14s no run finished (results.csv has the exit status, the run's workspace its metrics)\n",
                s->name);
      else if (s->reached > 0)
        {
          char t[32];
          printf ("  %-14s final %s %.4f, target at %s s / %.0f samples, %.0f samples/s\n", s->name, measure,
                  s->final_mean, shoal_compare_seconds (s->time_to_target, t, sizeof t), s->samples_to_target,
                  s->sps);
        }
      else
        printf ("  %-14s final %s %.4f, target not reached, %.0f samples/s\n", s->name, measure, s->final_mean,
                s->sps);
    }
  if (interrupted)
    {
      fprintf (stderr, "shoal compare: interrupted; the report covers the runs that were done\n");
      return 130;
    }
  if (failed > 0)
    {
      fprintf (stderr, "shoal compare: %d run%s failed (results.csv has their exit status)\n", failed,
               failed == 1 ? "" : "s");
      return 1;
    }
  return 0;
}

int
shoal_cmd_compare (int argc, char **argv)
{
  CompareArgs a;
  ShoalDashboard *dashboard = NULL;
  GArray *workers = NULL;
  GError *error = NULL;
  int status = 2;
  GPtrArray *schemes = NULL;
  Plan plan = { 0 };
  ShoalJob *first = NULL;

  if (!parse_compare_args (&argc, &argv, &a, &error) || !parse_budget (a.budget_arg, &plan.budget, &error))
    goto out;
  if (a.workers_arg != NULL && (workers = shoal_compare_parse_workers (a.workers_arg, &error)) == NULL)
    goto out;
  if (a.emulate_file != NULL && !prepend_emulate_file (a.emulate_file, &a.overrides, &error))
    goto out;
  if (a.conf_dir == NULL)
    a.conf_dir = default_conf_dir ();
  schemes = resolve_schemes (a.schemes_arg, a.conf_dir, &error);
  if (schemes == NULL)
    goto out;
  if (workers != NULL && !shoal_compare_expand (schemes, workers, scheme_free, run_free, &error))
    goto out;

  status = 1;
  /* the job as the first scheme runs it: every error of the conf and the
   * overrides shows here, before anything runs */
  first = load_scheme (argv[1], g_ptr_array_index (schemes, 0), a.overrides, &error);
  if (first != NULL && !plan_measure (first, a.target, &plan, &error))
    {
      status = 2;   /* a usage error, as the options' own */
      goto out;
    }
  if (first == NULL || !plan_emulation (first, &plan, &a.overrides, &error)
      || !check_schemes (argv[1], schemes, a.overrides, &error) || !plan_budget_samples (first, &plan, &error)
      || !prepare_out (first, a.force, &a.out, &error) || !shoal_compare_resolve_jobs (&plan, a.jobs, &error))
    goto out;
  a.overrides = shoal_compare_jobs_overrides (&plan, a.overrides);
  plan.job_path = argv[1];
  plan.overrides = a.overrides;
  plan.points = a.points;
  plan.repeats = a.repeats;
  plan.quiet = a.quiet;
  plan.out = a.out;
  if (a.serve != NULL && (dashboard = shoal_serve_beside (a.out, a.serve, "shoal compare", &error)) == NULL)
    goto out;

  gboolean interrupted = FALSE;
  int failed = run_all (&plan, schemes, &interrupted);
  gboolean target_given = !isnan (a.target);
  /* every data file and report.md first, the figures after them: a
   * machine without gnuplot loses no report of the runs */
  plan.gnuplot = shoal_gnuplot_installed ();
  if (shoal_compare_report (schemes, &plan, &a.target, target_given, &error)
      && (workers == NULL || shoal_compare_scale_report (schemes, &plan, a.target, &error)))
    {
      gboolean drawn = shoal_compare_draw (schemes, &plan, &error);
      status = summarize (schemes, &plan, a.target, interrupted, failed);
      if (!drawn && status == 0)
        status = 1;
    }

out:
  if (error != NULL)
    {
      fprintf (stderr, "shoal compare: %s\n", error->message);
      g_error_free (error);
    }
  shoal_dashboard_free (dashboard);
  shoal_job_free (first);
  if (schemes != NULL)
    g_ptr_array_free (schemes, TRUE);
  if (workers != NULL)
    g_array_free (workers, TRUE);
  compare_args_clear (&a);
  g_free (plan.emulation);
  return status;
}
