/* shoal compare JOB.conf: the same model, data and seeds under each
 * training scheme, one run after another, each exactly as `shoal run
 * JOB.conf --topology conf/SCHEME.conf` would run it (the launcher's own
 * code, shoal_launch, or in-process for a one-process layout), then one
 * report: DIR/report.md (a row per scheme and what each figure shows,
 * worked out from the numbers), DIR/results.csv (a row per run) and
 * PNG figures drawn by gnuplot from DIR/data (gnuplot.h).
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
#include "tools/gnuplot.h"
#include "tools/runlog.h"
#include "worker/emulator.h"
#include "worker/job.h"
#include "worker/runner.h"

/* The schemes of conf/ in the order a report lists them; other confs in
 * the directory follow in name order. */
static const char *const known_schemes[] = {
  "sandblaster", "allreduce", "downpour", "hogwild", "ssp", "backup", "stale-lr", "downpour-dean", "elastic", NULL
};

typedef enum { BUDGET_CONF, BUDGET_SAMPLES, BUDGET_SECONDS } BudgetKind;

typedef struct {
  BudgetKind kind;
  double amount;
} Budget;

typedef struct {
  int repeat;
  guint64 seed;
  gint64 train_steps;
  char *workspace;
  int status;           /* the run's exit status */
  ShoalRunLog *log;     /* NULL when it left no readable metrics */
} Run;

typedef struct {
  char *name;
  char *conf;           /* the topology file */
  gboolean async;
  int staleness;        /* [cluster] staleness, -1 none */
  int groups;
  GPtrArray *runs;      /* Run * */
  /* over the runs with a log */
  double acc_mean, acc_sd, sps, bytes_per_sample, wait_s, compute_s, peer_wait_s, final_loss;
  double time_to_target, samples_to_target;   /* means over the runs that reached it; < 0 none */
  int reached, finished;
  gint64 dropped;
  ShoalStaleness staleness_hist;
} Scheme;

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
  g_ptr_array_free (s->runs, TRUE);
  g_free (s);
}

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

typedef struct {
  const char *job_path;
  char **overrides;
  Budget budget;
  double budget_samples;   /* BUDGET_CONF: the job's own; BUDGET_SAMPLES: given */
  int points;              /* test passes per run */
  int repeats;
  const char *out;
  gboolean quiet;
  /* [emulate] of every run (the first scheme's job says): its words for
   * the report, and the virtual clock's step, measured once */
  char *emulation;
  gboolean virtual_clock;
  double step_ms;
} Plan;

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

/* Runs scheme s, repeat r.  Returns the exit status (130: interrupted);
 * a run that could not start is 1 with error set. */
static int
run_one (Plan *plan, Scheme *s, int r, GError **error)
{
  ShoalJob *base = shoal_job_load_topology (plan->job_path, s->conf, (const char *const *) plan->overrides, error);
  if (base == NULL)
    return 1;
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
  if (layer == NULL || !batch_of (base, layer, &batch, error))
    {
      g_free (layer);
      shoal_job_free (base);
      g_ptr_array_free (more, TRUE);
      return 1;
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
  char **all = with_overrides (plan->overrides, more);
  g_ptr_array_free (more, TRUE);
  ShoalJob *job = shoal_job_load_topology (plan->job_path, s->conf, (const char *const *) all, error);
  g_strfreev (all);
  if (job == NULL)
    return 1;
  ShoalLayout *layout = shoal_layout_new (&job->cluster, job->conf, error);
  if (layout == NULL)
    {
      shoal_job_free (job);
      return 1;
    }
  printf ("==== %s, run %d of %d (seed %" G_GUINT64_FORMAT ", %" G_GINT64_FORMAT " steps%s): %s\n", s->name,
          r + 1, plan->repeats, run->seed, run->train_steps,
          plan->budget.kind == BUDGET_SECONDS ? " at most" : "", run->workspace);
  fflush (stdout);
  if (layout->nprocs > 1 && job->emulate.clock != SHOAL_CLOCK_VIRTUAL)
    {
      ShoalLaunchOptions lo = { .quiet = plan->quiet, .grace_s = 60 };
      run->status = shoal_launch (job, layout, run->workspace, &lo);
    }
  else
    {
      ShoalRunOptions opts = { .workspace = run->workspace, .quiet = plan->quiet, .resume_step = -1 };
      ShoalRunResult result = { 0 };
      GError *e = NULL;
      run->status = shoal_run_job (job, &opts, &result, &e) ? (result.stopped ? 130 : 0) : 1;
      if (e != NULL)
        {
          fprintf (stderr, "shoal compare: %s: %s\n", s->name, e->message);
          g_error_free (e);
        }
    }
  shoal_layout_free (layout);
  shoal_job_free (job);
  char *metrics = g_build_filename (run->workspace, "metrics.jsonl", NULL);
  GError *e = NULL;
  run->log = shoal_run_log_read (metrics, &e);
  if (run->log == NULL)
    {
      fprintf (stderr, "shoal compare: %s run %d: %s\n", s->name, r + 1, e->message);
      g_error_free (e);
    }
  else if (run->log->tests->len == 0)
    {
      fprintf (stderr, "shoal compare: %s run %d: no test result in %s\n", s->name, r + 1, metrics);
      g_clear_pointer (&run->log, shoal_run_log_free);
    }
  g_free (metrics);
  return run->status;
}

/* ---- numbers ------------------------------------------------------------ */

static void
summarise (Scheme *s, double target)
{
  double sum = 0, sq = 0, t = 0, n = 0, loss = 0;
  int count = 0;
  s->reached = s->finished = 0;
  s->sps = s->bytes_per_sample = s->wait_s = s->compute_s = s->peer_wait_s = 0;
  s->dropped = 0;
  memset (&s->staleness_hist, 0, sizeof s->staleness_hist);
  for (guint i = 0; i < s->runs->len; i++)
    {
      Run *r = g_ptr_array_index (s->runs, i);
      if (r->log == NULL)
        continue;
      const ShoalRunPoint *final = shoal_run_log_final (r->log);
      double acc = final->value;
      sum += acc;
      sq += acc * acc;
      count++;
      s->sps += r->log->samples_per_sec;
      s->bytes_per_sample += r->log->samples > 0 ? (double) r->log->bytes_sent / r->log->samples : 0;
      s->wait_s += r->log->wait_s;
      s->compute_s += r->log->compute_s;
      s->peer_wait_s += r->log->peer_wait_s;
      s->dropped += r->log->dropped;
      if (r->log->train->len > 0)
        loss += g_array_index (r->log->train, ShoalRunPoint, r->log->train->len - 1).value;
      shoal_staleness_merge (&s->staleness_hist, &r->log->staleness);
      const ShoalRunPoint *p = target > 0 ? shoal_run_log_reached (r->log, target) : NULL;
      if (p != NULL)
        {
          t += p->time;
          n += p->samples;
          s->reached++;
        }
    }
  s->finished = count;
  s->acc_mean = count > 0 ? sum / count : 0;
  s->acc_sd = count > 1 ? sqrt (MAX (sq - sum * sum / count, 0) / (count - 1)) : 0;
  if (count > 0)
    {
      s->sps /= count;
      s->bytes_per_sample /= count;
      s->wait_s /= count;
      s->compute_s /= count;
      s->peer_wait_s /= count;
      s->final_loss = loss / count;
    }
  s->time_to_target = s->reached > 0 ? t / s->reached : -1;
  s->samples_to_target = s->reached > 0 ? n / s->reached : -1;
}

static double
wait_share (const Scheme *s)
{
  double total = s->wait_s + s->compute_s;
  return total > 0 ? 100 * s->wait_s / total : 0;
}

/* ---- writing ------------------------------------------------------------ */

/* Whether the runs' times are virtual ([emulate] clock = virtual). */
static gboolean
virtual_runs (GPtrArray *schemes)
{
  for (guint i = 0; i < schemes->len; i++)
    {
      Scheme *s = g_ptr_array_index (schemes, i);
      for (guint j = 0; j < s->runs->len; j++)
        {
          Run *r = g_ptr_array_index (s->runs, j);
          if (r->log != NULL && r->log->virtual_time)
            return TRUE;
        }
    }
  return FALSE;
}

static const char *
clock_name (GPtrArray *schemes)
{
  return virtual_runs (schemes) ? "virtual time" : "wall time";
}


static void
csv_number (GString *c, double v, const char *format, gboolean have)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  g_string_append_c (c, ',');
  if (have)
    g_string_append (c, g_ascii_formatd (buf, sizeof buf, format, v));
}

static gboolean
write_csv (GPtrArray *schemes, const char *out, double target, GError **error)
{
  GString *c = g_string_new ("scheme,repeat,status,seed,train_steps,final_accuracy,target,time_to_target_s,"
                             "samples_to_target,samples,samples_per_sec,bytes_sent,bytes_per_sample,"
                             "staleness_mean,staleness_p95,staleness_max,updates,dropped,compute_s,wait_s,"
                             "peer_wait_s,wall_s\n");
  for (guint i = 0; i < schemes->len; i++)
    {
      Scheme *s = g_ptr_array_index (schemes, i);
      for (guint j = 0; j < s->runs->len; j++)
        {
          Run *r = g_ptr_array_index (s->runs, j);
          ShoalRunLog *l = r->log;
          g_string_append_printf (c, "%s,%d,%d,%" G_GUINT64_FORMAT ",%" G_GINT64_FORMAT, s->name, r->repeat + 1,
                                  r->status, r->seed, r->train_steps);
          const ShoalRunPoint *final = l != NULL ? shoal_run_log_final (l) : NULL;
          const ShoalRunPoint *hit = l != NULL ? shoal_run_log_reached (l, target) : NULL;
          csv_number (c, final ? final->value : 0, "%.4f", final != NULL);
          csv_number (c, target, "%.4f", TRUE);
          csv_number (c, hit ? hit->time : 0, "%.3f", hit != NULL);
          csv_number (c, hit ? hit->samples : 0, "%.0f", hit != NULL);
          csv_number (c, l ? l->samples : 0, "%.0f", l != NULL);
          csv_number (c, l ? l->samples_per_sec : 0, "%.1f", l != NULL);
          csv_number (c, l ? (double) l->bytes_sent : 0, "%.0f", l != NULL);
          csv_number (c, l && l->samples > 0 ? (double) l->bytes_sent / l->samples : 0, "%.1f", l != NULL);
          csv_number (c, l ? shoal_staleness_mean (&l->staleness) : 0, "%.3f", l != NULL);
          csv_number (c, l ? (double) shoal_staleness_quantile (&l->staleness, 0.95) : 0, "%.0f", l != NULL);
          csv_number (c, l ? (double) l->staleness.max : 0, "%.0f", l != NULL);
          csv_number (c, l ? (double) l->updates : 0, "%.0f", l != NULL);
          csv_number (c, l ? (double) l->dropped : 0, "%.0f", l != NULL);
          csv_number (c, l ? l->compute_s : 0, "%.3f", l != NULL);
          csv_number (c, l ? l->wait_s : 0, "%.3f", l != NULL);
          csv_number (c, l ? l->peer_wait_s : 0, "%.3f", l != NULL);
          csv_number (c, l ? l->end_time : 0, "%.3f", l != NULL);
          g_string_append_c (c, '\n');
        }
    }
  char *path = g_build_filename (out, "results.csv", NULL);
  gboolean ok = g_file_set_contents (path, c->str, (gssize) c->len, error);
  g_free (path);
  g_string_free (c, TRUE);
  return ok;
}

/* One figure of curves: every run of every scheme, a colour per scheme. */
static void
curves_figure (GString *gp, GPtrArray *schemes, const char *png, const char *title, const char *xlabel,
               const char *ylabel, gboolean train, int xcol, double target)
{
  g_string_append_printf (gp, "set output '%s'\nset title \"%s\"\nset xlabel \"%s\"\nset ylabel \"%s\"\n",
                          png, title, xlabel, ylabel);
  GString *plot = g_string_new ("plot ");
  int n = 0;
  for (guint i = 0; i < schemes->len; i++)
    {
      Scheme *s = g_ptr_array_index (schemes, i);
      gboolean titled = FALSE;
      for (guint j = 0; j < s->runs->len; j++)
        {
          Run *r = g_ptr_array_index (s->runs, j);
          if (r->log == NULL || (train ? r->log->train : r->log->tests)->len == 0)
            continue;
          char *q = shoal_gnuplot_quote (s->name);
          g_string_append_printf (plot, "%s'data/%s-r%d-%s.dat' using %d:3 with linespoints lc %u lw 2 pt 7 ps 0.6 %s%s",
                                  n > 0 ? ", \\\n  " : "", s->name, r->repeat + 1, train ? "train" : "test", xcol,
                                  i + 1, titled ? "notitle" : "title ", titled ? "" : q);
          g_free (q);
          titled = TRUE;
          n++;
        }
    }
  if (target > 0)
    g_string_append_printf (plot, ", \\\n  %g with lines dt 2 lc rgb 'gray40' title 'target %.3f'", target, target);
  if (n > 0)
    g_string_append_printf (gp, "%s\n", plot->str);
  else
    g_string_append (gp, "set label 1 'no run has data' at graph 0.4,0.5\nplot 1/0 notitle\nunset label 1\n");
  g_string_free (plot, TRUE);
}

static gboolean
write_data (GPtrArray *schemes, const char *out, GError **error)
{
  char *data = g_build_filename (out, "data", NULL);
  gboolean ok = g_mkdir_with_parents (data, 0755) == 0;
  if (!ok)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: cannot create: %s", data, g_strerror (errno));
  for (guint i = 0; ok && i < schemes->len; i++)
    {
      Scheme *s = g_ptr_array_index (schemes, i);
      for (guint j = 0; ok && j < s->runs->len; j++)
        {
          Run *r = g_ptr_array_index (s->runs, j);
          if (r->log == NULL)
            continue;
          for (int train = 0; ok && train < 2; train++)
            {
              char *name = g_strdup_printf ("%s/%s-r%d-%s.dat", data, s->name, r->repeat + 1,
                                            train ? "train" : "test");
              ok = shoal_gnuplot_write_points (name, train ? r->log->train : r->log->tests, error);
              g_free (name);
            }
        }
      if (ok && s->async && s->staleness_hist.count > 0)
        {
          GString *h = g_string_new ("# staleness updates\n");
          int used = shoal_staleness_used (&s->staleness_hist);
          for (int b = 0; b < used; b++)
            g_string_append_printf (h, "%d %" G_GINT64_FORMAT "\n", b, s->staleness_hist.buckets[b]);
          char *name = g_strdup_printf ("%s/%s-staleness.dat", data, s->name);
          ok = g_file_set_contents (name, h->str, (gssize) h->len, error);
          g_free (name);
          g_string_free (h, TRUE);
        }
    }
  if (ok)
    {
      GString *t = g_string_new ("# scheme samples_per_sec\n");
      char buf[G_ASCII_DTOSTR_BUF_SIZE];
      for (guint i = 0; i < schemes->len; i++)
        {
          Scheme *s = g_ptr_array_index (schemes, i);
          g_string_append_printf (t, "%s %s\n", s->name, g_ascii_formatd (buf, sizeof buf, "%.1f", s->sps));
        }
      char *name = g_build_filename (data, "throughput.dat", NULL);
      ok = g_file_set_contents (name, t->str, (gssize) t->len, error);
      g_free (name);
      g_string_free (t, TRUE);
    }
  g_free (data);
  return ok;
}

/* The figures' script; the PNGs it makes go into `pngs`. */
static GString *
figures_script (GPtrArray *schemes, double target, GPtrArray *pngs)
{
  GString *gp = g_string_new (SHOAL_GNUPLOT_HEADER);
  g_string_append (gp, "set key bottom right inside\n");
  const char *clock = clock_name (schemes);
  char *title = g_strdup_printf ("test accuracy vs %s", clock), *xlabel = g_strdup_printf ("%s (s)", clock);
  curves_figure (gp, schemes, "accuracy-time.png", title, xlabel, "test accuracy (group 0)", FALSE, 1, target);
  g_free (title);
  g_ptr_array_add (pngs, g_strdup ("accuracy-time.png"));
  curves_figure (gp, schemes, "accuracy-samples.png", "test accuracy vs samples seen",
                 "samples seen (all workers)", "test accuracy (group 0)", FALSE, 2, target);
  g_ptr_array_add (pngs, g_strdup ("accuracy-samples.png"));
  g_string_append (gp, "set key top right inside\n");
  title = g_strdup_printf ("train loss vs %s", clock);
  curves_figure (gp, schemes, "loss-time.png", title, xlabel, "train loss (group 0, mean over disp_freq steps)",
                 TRUE, 1, 0);
  g_free (title);
  g_free (xlabel);
  g_ptr_array_add (pngs, g_strdup ("loss-time.png"));
  g_string_append (gp, "set key off\nset style fill solid 0.6 border -1\nset boxwidth 0.8\n"
                       "set yrange [0:*]\nset xtics rotate by -30\n");
  for (guint i = 0; i < schemes->len; i++)
    {
      Scheme *s = g_ptr_array_index (schemes, i);
      if (!s->async || s->staleness_hist.count == 0)
        continue;
      char *png = g_strdup_printf ("staleness-%s.png", s->name);
      char *q = shoal_gnuplot_quote (s->name);
      g_string_append_printf (gp, "set output '%s'\nset title %s.\" : staleness of %" G_GINT64_FORMAT " updates\"\n"
                                  "set xlabel \"staleness (versions between the values a gradient was computed on and its update)\"\n"
                                  "set ylabel \"updates\"\nset xtics norotate autofreq\n"
                                  "plot 'data/%s-staleness.dat' using 1:2 with boxes lc %u\n",
                              png, q, s->staleness_hist.count, s->name, i + 1);
      g_free (q);
      g_ptr_array_add (pngs, png);
    }
  g_string_append_printf (gp, "set output 'throughput.png'\nset title \"throughput\"\nset xlabel \"scheme\"\n"
                              "set ylabel \"samples/s%s (all workers, test time excluded)\"\nset xtics rotate by -30\n",
                          virtual_runs (schemes) ? " of virtual time" : "");
  g_string_append (gp, 
                       "plot 'data/throughput.dat' using 0:2:($0+1):xtic(1) with boxes lc variable\n");
  g_ptr_array_add (pngs, g_strdup ("throughput.png"));
  return gp;
}

static const char *
budget_words (const Budget *b, double samples, char *buf, gsize len)
{
  if (b->kind == BUDGET_SECONDS)
    g_snprintf (buf, len, "%g s of training per run (virtual seconds on the virtual clock)", b->amount);
  else
    g_snprintf (buf, len, "%.0f samples per run (all workers together)%s", samples,
                b->kind == BUDGET_CONF ? ", the job's own length for one group" : "");
  return buf;
}

/* The schemes that finished, by a key: ascending; those with key < 0 left out. */
static GPtrArray *
ranked (GPtrArray *schemes, double (*key) (const Scheme *), gboolean descending)
{
  GPtrArray *out = g_ptr_array_new ();
  for (guint i = 0; i < schemes->len; i++)
    {
      Scheme *s = g_ptr_array_index (schemes, i);
      if (s->finished > 0 && key (s) >= 0)
        g_ptr_array_add (out, s);
    }
  for (guint i = 1; i < out->len; i++)
    for (guint j = i; j > 0; j--)
      {
        Scheme *a = g_ptr_array_index (out, j - 1), *b = g_ptr_array_index (out, j);
        gboolean swap = descending ? key (a) < key (b) : key (a) > key (b);
        if (!swap)
          break;
        out->pdata[j - 1] = b;
        out->pdata[j] = a;
      }
  return out;
}

static double key_time (const Scheme *s) { return s->time_to_target; }
static double key_samples (const Scheme *s) { return s->samples_to_target; }
static double key_loss (const Scheme *s) { return s->final_loss; }
static double key_sps (const Scheme *s) { return s->sps; }

static void
not_reached (GString *md, GPtrArray *schemes)
{
  GString *names = g_string_new (NULL);
  for (guint i = 0; i < schemes->len; i++)
    {
      Scheme *s = g_ptr_array_index (schemes, i);
      if (s->reached == 0)
        g_string_append_printf (names, "%s%s", names->len > 0 ? ", " : "", s->name);
    }
  if (names->len > 0)
    g_string_append_printf (md, " Did not reach the target in any run: %s.", names->str);
  g_string_free (names, TRUE);
}

static void
paragraph_time (GString *md, GPtrArray *schemes, double target)
{
  GPtrArray *r = ranked (schemes, key_time, FALSE);
  g_string_append (md, "**What this shows.** ");
  if (r->len == 0)
    g_string_append_printf (md, "No scheme reached the target accuracy %.4f within the budget.", target);
  else
    {
      Scheme *first = g_ptr_array_index (r, 0), *last = g_ptr_array_index (r, r->len - 1);
      g_string_append_printf (md, "%s reached the target accuracy %.4f first, after %.1f s of %s "
                                  "(mean over %d run%s).", first->name, target, first->time_to_target,
                              clock_name (schemes), first->reached, first->reached == 1 ? "" : "s");
      if (r->len > 1)
        g_string_append_printf (md, " %s was the slowest to get there, at %.1f s (%.2fx %s's time).", last->name,
                                last->time_to_target, last->time_to_target / MAX (first->time_to_target, 1e-9),
                                first->name);
    }
  not_reached (md, schemes);
  if (virtual_runs (schemes))
    g_string_append (md, " The time is virtual: each worker had a machine of its own, each step cost the "
                         "same measured compute time times the worker's emulated slowdown, each message "
                         "its bytes over the emulated link (docs/SCHEMES.md, \"Emulation\"). It is what "
                         "such a cluster would show under that model, not a measurement.\n\n");
  else
    g_string_append (md, " Wall time here is one machine's: the processes of every scheme share its cores, "
                         "so a scheme with more processes or threads pays for them in each step.\n\n");
  g_ptr_array_free (r, TRUE);
}

static void
paragraph_samples (GString *md, GPtrArray *schemes)
{
  GPtrArray *r = ranked (schemes, key_samples, FALSE);
  g_string_append (md, "**What this shows.** ");
  if (r->len == 0)
    g_string_append (md, "No scheme reached the target, so no sample counts compare.");
  else
    {
      Scheme *first = g_ptr_array_index (r, 0);
      g_string_append_printf (md, "%s needed the fewest samples to the target: %.0f.", first->name,
                              first->samples_to_target);
      double sync_sum = 0, async_sum = 0;
      int nsync = 0, nasync = 0;
      for (guint i = 0; i < r->len; i++)
        {
          Scheme *s = g_ptr_array_index (r, i);
          if (s->async)
            async_sum += s->samples_to_target, nasync++;
          else
            sync_sum += s->samples_to_target, nsync++;
        }
      if (nsync > 0 && nasync > 0)
        g_string_append_printf (md, " The synchronous schemes needed %.0f samples on average, the asynchronous "
                                    "ones %.0f (%.2fx): %s.", sync_sum / nsync, async_sum / nasync,
                                (async_sum / nasync) / MAX (sync_sum / nsync, 1e-9),
                                async_sum / nasync > sync_sum / nsync
                                  ? "stale gradients made each sample worth less"
                                  : "here staleness cost no samples");
    }
  g_string_append (md, " Samples are counted over all workers at the time of each test (interpolated between "
                       "their progress lines).\n\n");
  g_ptr_array_free (r, TRUE);
}

static void
paragraph_loss (GString *md, GPtrArray *schemes)
{
  GPtrArray *r = ranked (schemes, key_loss, FALSE);
  g_string_append (md, "**What this shows.** ");
  if (r->len == 0)
    g_string_append (md, "No run wrote train lines.");
  else
    {
      Scheme *lo = g_ptr_array_index (r, 0), *hi = g_ptr_array_index (r, r->len - 1);
      g_string_append_printf (md, "At the end %s had the lowest train loss (%.4f, group 0's last progress line, "
                                  "mean over its runs)", lo->name, lo->final_loss);
      if (r->len > 1)
        g_string_append_printf (md, " and %s the highest (%.4f)", hi->name, hi->final_loss);
      g_string_append_printf (md, ". The curves show how fast each scheme brings the loss down in %s, before "
                                  "the test passes see it.", clock_name (schemes));
    }
  g_string_append (md, "\n\n");
  g_ptr_array_free (r, TRUE);
}

static void
paragraph_staleness (GString *md, const Scheme *s)
{
  g_string_append_printf (md, "**What this shows.** %s's %" G_GINT64_FORMAT " updates were on average %.2f "
                              "versions stale (p95 %" G_GINT64_FORMAT ", max %" G_GINT64_FORMAT ")",
                          s->name, s->staleness_hist.count, shoal_staleness_mean (&s->staleness_hist),
                          shoal_staleness_quantile (&s->staleness_hist, 0.95), s->staleness_hist.max);
  /* SSP: while a group computes a step on values holding each other
   * group's pushes up to s steps behind it, that group may run on to s
   * steps ahead: at most 2s + 1 of its pushes per other group */
  gint64 bound = (gint64) (2 * s->staleness + 1) * (s->groups - 1);
  if (s->staleness >= 0)
    g_string_append_printf (md, "; its SSP bound is %d steps, so with %d groups no update can be more than "
                                "(2s + 1)(g - 1) = %" G_GINT64_FORMAT " versions stale, and %s", s->staleness,
                            s->groups, bound,
                            s->staleness_hist.max <= bound ? "none was" : "some were: the bound did not hold");
  g_string_append_printf (md, ". A staleness of s means s other updates reached the slice between the values "
                              "the gradient was computed on and its own update; with %d groups pushing in turn, "
                              "%d is what one round of the others' pushes costs.\n\n", s->groups,
                          MAX (s->groups - 1, 0));
}

static void
paragraph_throughput (GString *md, GPtrArray *schemes)
{
  GPtrArray *r = ranked (schemes, key_sps, TRUE);
  g_string_append (md, "**What this shows.** ");
  if (r->len > 0)
    {
      Scheme *top = g_ptr_array_index (r, 0), *low = g_ptr_array_index (r, r->len - 1);
      g_string_append_printf (md, "%s trained the most samples per second (%.0f), ", top->name, top->sps);
      if (r->len > 1)
        g_string_append_printf (md, "%s the fewest (%.0f, %.2fx fewer). ", low->name, low->sps,
                                top->sps / MAX (low->sps, 1e-9));
      g_string_append_printf (md, "Its workers spent %.0f %% of their step time blocked on the servers",
                              wait_share (top));
      if (r->len > 1)
        g_string_append_printf (md, ", %s's %.0f %%", low->name, wait_share (low));
      if (virtual_runs (schemes))
        g_string_append (md, ": waiting for values is where a synchronous step loses to an asynchronous one; "
                             "on the virtual clock every worker has a machine of its own, so nothing else does.");
      else
        g_string_append (md, ": waiting for values is where a synchronous step loses to an asynchronous one, and "
                             "shared cores are where every extra process loses.");
    }
  else
    g_string_append (md, "No run finished.");
  g_string_append (md, "\n\n");
  g_ptr_array_free (r, TRUE);
}

static gboolean
write_report (GPtrArray *schemes, const Plan *plan, double target, gboolean target_given, GPtrArray *pngs,
              GError **error)
{
  GString *md = g_string_new (NULL);
  char budget[128];
  GDateTime *now = g_date_time_new_now_local ();
  char *date = g_date_time_format (now, "%Y-%m-%d %H:%M");
  g_date_time_unref (now);
  g_string_append_printf (md, "# shoal compare: %s\n\n", plan->job_path);
  g_string_append_printf (md, "%s; %d run%s per scheme (repeat r uses the job's seed + r); budget %s; target "
                              "test accuracy %.4f (%s). Each run is `shoal run %s --topology SCHEME.conf` with "
                              "the same overrides; its workspace is `runs/SCHEME-rN/`. Every number below is "
                              "computed from the runs' metrics.jsonl (README.md, \"Metrics\").\n\n",
                          date, plan->repeats, plan->repeats == 1 ? "" : "s",
                          budget_words (&plan->budget, plan->budget_samples, budget, sizeof budget), target,
                          target_given ? "--target" : "95 % of the best scheme's mean final accuracy",
                          plan->job_path);
  g_free (date);
  if (plan->emulation != NULL)
    g_string_append_printf (md, "**Emulated** (docs/SCHEMES.md, \"Emulation\"): %s. This is emulation, not "
                                "measurement: slowed workers sleep or are charged their slowdown, links are "
                                "paced, and the numbers show what each scheme does under those conditions.\n\n",
                            plan->emulation);
  gboolean virt = virtual_runs (schemes);
  g_string_append_printf (md, "| scheme | runs ok | time to target (%ss) | samples to target | final accuracy | samples/s "
                              "| bytes sent / sample | staleness mean | staleness p95 | waiting / computing (%ss per "
                              "run) | late gradients dropped |\n"
                              "|---|---|---|---|---|---|---|---|---|---|---|\n",
                          virt ? "virtual " : "", virt ? "virtual " : "");
  for (guint i = 0; i < schemes->len; i++)
    {
      Scheme *s = g_ptr_array_index (schemes, i);
      g_string_append_printf (md, "| %s | %d of %u | ", s->name, s->finished, s->runs->len);
      if (s->reached > 0)
        {
          g_string_append_printf (md, "%.1f", s->time_to_target);
          if (s->reached < s->finished)
            g_string_append_printf (md, " (%d reached)", s->reached);
          g_string_append_printf (md, " | %.0f | ", s->samples_to_target);
        }
      else
        g_string_append (md, "not reached | - | ");
      if (s->finished > 0)
        g_string_append_printf (md, "%.4f ± %.4f | %.0f | %.0f | %.2f | %" G_GINT64_FORMAT " | %.1f / %.1f (%.0f %% waiting) | %"
                                G_GINT64_FORMAT " |\n", s->acc_mean, s->acc_sd, s->sps, s->bytes_per_sample,
                                shoal_staleness_mean (&s->staleness_hist),
                                shoal_staleness_quantile (&s->staleness_hist, 0.95), s->wait_s, s->compute_s,
                                wait_share (s), s->dropped);
      else
        g_string_append (md, "failed | - | - | - | - | - | - |\n");
    }
  g_string_append_printf (md, "\nfinal accuracy: group 0's last test pass, mean ± sd over the runs. time and samples to "
                       "target: group 0's first test pass at or above the target (mean over the runs that got "
                       "there). bytes: %s. "
                       "staleness: over every update with a known base version, all servers together. waiting: "
                       "the workers' time blocked on the servers (summed over worker units), computing: their "
                       "forward and backward time.\n\n",
                          virt ? "the payloads of the emulated messages between the layout's processes"
                               : "everything every process sent over the network, headers included");
  for (guint i = 0; i < pngs->len; i++)
    {
      const char *png = g_ptr_array_index (pngs, i);
      g_string_append_printf (md, "## %s\n\n![%s](%s)\n\n", png, png, png);
      if (strcmp (png, "accuracy-time.png") == 0)
        paragraph_time (md, schemes, target);
      else if (strcmp (png, "accuracy-samples.png") == 0)
        paragraph_samples (md, schemes);
      else if (strcmp (png, "loss-time.png") == 0)
        paragraph_loss (md, schemes);
      else if (strcmp (png, "throughput.png") == 0)
        paragraph_throughput (md, schemes);
      else
        for (guint j = 0; j < schemes->len; j++)
          {
            Scheme *s = g_ptr_array_index (schemes, j);
            char *name = g_strdup_printf ("staleness-%s.png", s->name);
            if (strcmp (png, name) == 0)
              paragraph_staleness (md, s);
            g_free (name);
          }
    }
  char *path = g_build_filename (plan->out, "report.md", NULL);
  gboolean ok = g_file_set_contents (path, md->str, (gssize) md->len, error);
  g_free (path);
  g_string_free (md, TRUE);
  return ok;
}

/* The [emulate] keys as the runs got them, for the report's header. */
static char *
describe_emulation (ShoalJob *job, double step_ms, gboolean measured)
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
  if (job->emulate.clock == SHOAL_CLOCK_VIRTUAL)
    g_string_append_printf (d, "; one step of a group's batch costs a machine %.3f ms%s", step_ms,
                            measured ? " (measured once on this machine, the same for every run)" : "");
  return g_string_free (d, FALSE);
}

/* ---- the command -------------------------------------------------------- */

int
shoal_cmd_compare (int argc, char **argv)
{
  char *schemes_arg = NULL, *out = NULL, *budget_arg = NULL, *conf_dir = NULL, *emulate_file = NULL;
  char **overrides = NULL;
  double target = 0;
  int repeats = 1, points = 10;
  gboolean quiet = FALSE;
  GOptionEntry entries[] = {
    { "schemes", 's', 0, G_OPTION_ARG_STRING, &schemes_arg,
      "comma list of schemes (conf/NAME.conf) or topology files; default: every conf in --conf-dir", "LIST" },
    { "repeats", 'n', 0, G_OPTION_ARG_INT, &repeats, "runs per scheme, repeat r with seed + r (default 1)", "N" },
    { "out", 'O', 0, G_OPTION_ARG_FILENAME, &out, "directory for report.md, results.csv, the PNGs and the runs "
      "(default compare/JOBNAME)", "DIR" },
    { "budget", 'b', 0, G_OPTION_ARG_STRING, &budget_arg,
      "per run: samples=N (all workers together) or seconds=S (of training); default: the job's own length "
      "for one group", "samples=N|seconds=S" },
    { "target", 'T', 0, G_OPTION_ARG_DOUBLE, &target,
      "test accuracy to time (0 < ACC <= 1); default: 95 percent of the best scheme's mean final accuracy", "ACC" },
    { "points", 0, 0, G_OPTION_ARG_INT, &points, "test passes per run with a samples budget (default 10)", "N" },
    { "override", 'o', 0, G_OPTION_ARG_STRING_ARRAY, &overrides, "set a conf key in every run", "SECTION.KEY=VALUE" },
    { "conf-dir", 0, 0, G_OPTION_ARG_FILENAME, &conf_dir, "where SCHEME.conf files are (default conf/)", "DIR" },
    { "emulate", 'e', 0, G_OPTION_ARG_FILENAME, &emulate_file,
      "a file with an [emulate] section for every run (stragglers, links, a lost group, the virtual clock; "
      "docs/SCHEMES.md); -o emulate.KEY=VALUE goes over it", "FILE" },
    { "quiet", 'q', 0, G_OPTION_ARG_NONE, &quiet, "no progress lines from the runs", NULL },
    { NULL, 0, 0, 0, NULL, NULL, NULL }
  };
  GOptionContext *ctx = g_option_context_new ("JOB.conf - train one job under several schemes and compare them");
  g_option_context_add_main_entries (ctx, entries, NULL);
  GError *error = NULL;
  int status = 2;
  GPtrArray *schemes = NULL;
  Plan plan = { 0 };
  ShoalJob *first = NULL;
  gboolean target_given = FALSE;

  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    goto out;
  if (argc != 2)
    {
      g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_CONF, "expected one JOB.conf");
      goto out;
    }
  if (repeats < 1 || repeats > 1000)
    {
      g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_CONF, "--repeats %d: give 1 to 1000 runs per scheme", repeats);
      goto out;
    }
  if (points < 1)
    {
      g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_CONF, "--points %d: at least one test pass per run", points);
      goto out;
    }
  target_given = target != 0;
  if (target_given && !(target > 0 && target <= 1))
    {
      g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                   "--target %g: a test accuracy is above 0 and at most 1", target);
      goto out;
    }
  if (!parse_budget (budget_arg, &plan.budget, &error))
    goto out;
  if (emulate_file != NULL)
    {
      /* its keys first: the user's -o go over them */
      char **emu = shoal_emulate_file_overrides (emulate_file, &error);
      if (emu == NULL)
        {
          g_prefix_error (&error, "--emulate: ");
          goto out;
        }
      char **all = g_new0 (char *, g_strv_length (emu) + (overrides ? g_strv_length (overrides) : 0) + 1);
      int n = 0;
      for (int i = 0; emu[i] != NULL; i++)
        all[n++] = g_strdup (emu[i]);
      for (int i = 0; overrides != NULL && overrides[i] != NULL; i++)
        all[n++] = g_strdup (overrides[i]);
      g_strfreev (emu);
      g_strfreev (overrides);
      overrides = all;
    }
  if (conf_dir == NULL)
    conf_dir = default_conf_dir ();
  schemes = resolve_schemes (schemes_arg, conf_dir, &error);
  if (schemes == NULL)
    goto out;

  status = 1;
  /* the job as the first scheme runs it: every error of the conf and the
   * overrides shows here, before anything runs */
  Scheme *s0 = g_ptr_array_index (schemes, 0);
  first = shoal_job_load_topology (argv[1], s0->conf, (const char *const *) overrides, &error);
  if (first == NULL)
    goto out;
  gboolean measured = FALSE;
  if (first->emulate.clock == SHOAL_CLOCK_VIRTUAL)
    {
      plan.virtual_clock = TRUE;
      plan.step_ms = first->emulate.step_ms;
      if (plan.step_ms <= 0)
        {
          /* once, the same for every scheme and repeat: the runs repeat exactly */
          if (!shoal_emulator_measure_step_ms (first, &plan.step_ms, &error))
            goto out;
          measured = TRUE;
          guint n = overrides ? g_strv_length (overrides) : 0;
          overrides = g_renew (char *, overrides, n + 2);
          overrides[n] = g_strdup_printf ("emulate.step_ms=%.3f", plan.step_ms);
          overrides[n + 1] = NULL;
          printf ("virtual clock: one step of a group's batch measured once on this machine: %.3f ms, given to "
                  "every run (-o emulate.step_ms=%.3f repeats it)\n", plan.step_ms, plan.step_ms);
        }
    }
  if (shoal_emulate_active (&first->emulate))
    plan.emulation = describe_emulation (first, plan.step_ms, measured);
  for (guint i = 1; i < schemes->len; i++)
    {
      Scheme *s = g_ptr_array_index (schemes, i);
      ShoalJob *j = shoal_job_load_topology (argv[1], s->conf, (const char *const *) overrides, &error);
      if (j == NULL)
        goto out;
      shoal_job_free (j);
    }
  char *layer = input_layer (first, &error);
  gint64 batch = 0;
  if (layer == NULL || !batch_of (first, layer, &batch, &error))
    {
      g_free (layer);
      goto out;
    }
  plan.budget_samples = plan.budget.amount;
  if (plan.budget.kind == BUDGET_CONF && !conf_samples (first, layer, batch, &plan.budget_samples, &error))
    {
      g_free (layer);
      goto out;
    }
  g_free (layer);
  plan.job_path = argv[1];
  plan.overrides = overrides;
  plan.points = points;
  plan.repeats = repeats;
  plan.quiet = quiet;
  plan.out = out != NULL ? out : (out = g_build_filename ("compare", first->name, NULL));
  if (g_mkdir_with_parents (out, 0755) != 0)
    {
      g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_IO, "--out %s: cannot create: %s", out, g_strerror (errno));
      goto out;
    }

  gboolean interrupted = FALSE;
  int failed = 0;
  for (int r = 0; r < repeats && !interrupted; r++)
    for (guint i = 0; i < schemes->len && !interrupted; i++)
      {
        Scheme *s = g_ptr_array_index (schemes, i);
        GError *e = NULL;
        int st = run_one (&plan, s, r, &e);
        if (e != NULL)
          {
            fprintf (stderr, "shoal compare: %s: %s\n", s->name, e->message);
            g_error_free (e);
          }
        interrupted = st == 130;
        failed += st != 0;
      }

  /* the target: given, or 95 % of the best mean final accuracy */
  if (!target_given)
    {
      double best = 0;
      for (guint i = 0; i < schemes->len; i++)
        {
          Scheme *s = g_ptr_array_index (schemes, i);
          summarise (s, 0);
          best = MAX (best, s->acc_mean);
        }
      target = 0.95 * best;
    }
  for (guint i = 0; i < schemes->len; i++)
    summarise (g_ptr_array_index (schemes, i), target);

  GPtrArray *pngs = g_ptr_array_new_with_free_func (g_free);
  GString *gp = NULL;
  gboolean ok = write_csv (schemes, out, target, &error) && write_data (schemes, out, &error);
  if (ok)
    {
      gp = figures_script (schemes, target, pngs);
      char *script = g_build_filename (out, "figures.gp", NULL);
      ok = g_file_set_contents (script, gp->str, (gssize) gp->len, &error)
           && shoal_gnuplot_run (out, "figures.gp", &error)
           && write_report (schemes, &plan, target, target_given, pngs, &error);
      g_free (script);
      g_string_free (gp, TRUE);
    }
  g_ptr_array_free (pngs, TRUE);
  if (!ok)
    goto out;
  printf ("shoal compare: %s/report.md, results.csv and the figures; target accuracy %.4f\n", out, target);
  for (guint i = 0; i < schemes->len; i++)
    {
      Scheme *s = g_ptr_array_index (schemes, i);
      if (s->reached > 0)
        printf ("  %-14s final accuracy %.4f, target at %.1f s / %.0f samples, %.0f samples/s\n", s->name,
                s->acc_mean, s->time_to_target, s->samples_to_target, s->sps);
      else
        printf ("  %-14s final accuracy %.4f, target not reached, %.0f samples/s\n", s->name, s->acc_mean, s->sps);
    }
  if (interrupted)
    {
      fprintf (stderr, "shoal compare: interrupted; the report covers the runs that were done\n");
      status = 130;
    }
  else if (failed > 0)
    {
      fprintf (stderr, "shoal compare: %d run%s failed (results.csv has their exit status)\n", failed,
               failed == 1 ? "" : "s");
      status = 1;
    }
  else
    status = 0;

out:
  if (error != NULL)
    {
      fprintf (stderr, "shoal compare: %s\n", error->message);
      g_error_free (error);
    }
  shoal_job_free (first);
  if (schemes != NULL)
    g_ptr_array_free (schemes, TRUE);
  g_free (schemes_arg);
  g_free (out);
  g_free (budget_arg);
  g_free (conf_dir);
  g_strfreev (overrides);
  g_free (emulate_file);
  g_free (plan.emulation);
  g_option_context_free (ctx);
  return status;
}
