/* shoal compare --workers 1,2,4,...: every scheme at every size, each
 * point a run as compare makes it (compare.c), then the scaling numbers
 * per scheme - throughput, speedup and efficiency against the scheme's
 * smallest size, time to the target - as scale.csv, the figures' script
 * scale.gp and a section of report.md (compare.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "tools/compare.h"
#include "tools/gnuplot.h"

static int
int_cmp (gconstpointer a, gconstpointer b)
{
  return *(const int *) a - *(const int *) b;
}

GArray *
shoal_compare_parse_workers (const char *text, GError **error)
{
  GArray *out = g_array_new (FALSE, FALSE, sizeof (int));
  char **items = g_strsplit (text, ",", -1);
  gboolean ok = items[0] != NULL;
  if (!ok)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "--workers: give worker counts, e.g. 1,2,4,8");
  for (int i = 0; ok && items[i] != NULL; i++)
    {
      char *item = g_strstrip (items[i]);
      gint64 w = 0;
      GError *local = NULL;
      if (!g_ascii_string_to_signed (item, 10, G_MININT64, G_MAXINT64, &w, &local))
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "--workers: '%s' is not a number of workers", item);
          g_error_free (local);
          ok = FALSE;
        }
      else if (w < 1 || w > SHOAL_COMPARE_MAX_WORKERS)
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "--workers: %s is not a worker count (1 to %d)", item,
                       SHOAL_COMPARE_MAX_WORKERS);
          ok = FALSE;
        }
      for (guint j = 0; ok && j < out->len; j++)
        if (g_array_index (out, int, j) == (int) w)
          {
            g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "--workers: %s is named twice", item);
            ok = FALSE;
          }
      if (ok)
        {
          int v = (int) w;
          g_array_append_val (out, v);
        }
    }
  g_strfreev (items);
  if (!ok)
    {
      g_array_free (out, TRUE);
      return NULL;
    }
  g_array_sort (out, int_cmp);
  return out;
}

/* The fewest workers a scheme's topology runs with in a sweep, and why
 * (NULL: 1, any size).  Elastic averaging (hogwild_sync = elastic) pulls
 * each replica toward a center that the server groups hold together: one
 * worker is one replica with no group to meet, which the cluster conf
 * refuses (nserver_groups = 1). */
static int
sweep_min_workers (const char *topology, const char **why)
{
  GKeyFile *kf = g_key_file_new ();
  char *sync = g_key_file_load_from_file (kf, topology, G_KEY_FILE_NONE, NULL)
                 ? g_key_file_get_value (kf, "cluster", "hogwild_sync", NULL)
                 : NULL;
  gboolean elastic = sync != NULL && strcmp (g_strstrip (sync), "average") != 0;
  g_free (sync);
  g_key_file_free (kf);
  *why = elastic ? "its server groups meet by elastic averaging (hogwild_sync), which needs 2 replicas" : NULL;
  return elastic ? 2 : 1;
}

gboolean
shoal_compare_expand (GPtrArray *schemes, const GArray *workers, GDestroyNotify scheme_free, GDestroyNotify run_free,
                      GError **error)
{
  GPtrArray *base = g_ptr_array_new_with_free_func (scheme_free);
  while (schemes->len > 0)
    g_ptr_array_add (base, g_ptr_array_steal_index (schemes, 0));
  for (guint i = 0; i < base->len; i++)
    {
      Scheme *b = g_ptr_array_index (base, i);
      const char *why = NULL, *left_out = NULL;
      int min = sweep_min_workers (b->conf, &why);
      for (guint j = 0; j < workers->len; j++)
        {
          if (g_array_index (workers, int, j) < min)
            {
              fprintf (stderr, "shoal compare: %s at %d worker%s left out: %s; its curve starts at %d\n", b->name,
                       g_array_index (workers, int, j), g_array_index (workers, int, j) == 1 ? "" : "s", why, min);
              left_out = why;
              continue;
            }
          Scheme *s = g_new0 (Scheme, 1);
          s->fewer_why = left_out;
          s->workers = g_array_index (workers, int, j);
          s->base = g_strdup (b->name);
          s->name = g_strdup_printf ("%s-w%d", b->name, s->workers);
          s->conf = g_strdup (b->conf);
          s->runs = g_ptr_array_new_with_free_func (run_free);
          g_ptr_array_add (schemes, s);
        }
    }
  g_ptr_array_free (base, TRUE);
  if (schemes->len == 0)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "--workers: no scheme runs at these sizes (above)");
  return schemes->len > 0;
}

void
shoal_compare_scale_overrides (const Scheme *s, const ShoalClusterConf *c, gint64 batch, const char *input_group,
                               double step_ms, GPtrArray *out)
{
  int w = s->workers;
  gboolean sync = c->nworker_groups == 1;
  if (sync)
    {
      /* one group of w workers, each its own process and the job's batch */
      gboolean colocated = !c->server_worker_separate && c->nservers_per_group == c->nworkers_per_group;
      int backups = c->backup_workers > 0 && w > 1 ? MAX (1, (int) lround (0.05 * w)) : 0;
      g_ptr_array_add (out, g_strdup_printf ("cluster.nworkers_per_group=%d", w));
      g_ptr_array_add (out, g_strdup ("cluster.nworkers_per_procs=1"));
      g_ptr_array_add (out, g_strdup_printf ("cluster.backup_workers=%d", backups));
      if (colocated)
        {
          /* AllReduce: a server beside every worker */
          g_ptr_array_add (out, g_strdup_printf ("cluster.nservers_per_group=%d", w));
          g_ptr_array_add (out, g_strdup ("cluster.nservers_per_procs=1"));
        }
      g_ptr_array_add (out, g_strdup_printf ("%s.batch_size=%" G_GINT64_FORMAT, input_group, batch * w));
      if (step_ms > 0)
        /* the virtual clock's step_ms is the group batch's: w batches now */
        g_ptr_array_add (out, g_strdup_printf ("emulate.step_ms=%.17g", step_ms * w));
    }
  else
    {
      g_ptr_array_add (out, g_strdup_printf ("cluster.nworker_groups=%d", w));
      g_ptr_array_add (out, g_strdup ("cluster.nworkers_per_group=1"));
      g_ptr_array_add (out, g_strdup ("cluster.nworkers_per_procs=1"));
      if (c->nserver_groups > 1)
        g_ptr_array_add (out, g_strdup_printf ("cluster.nserver_groups=%d", w));   /* Hogwild: one each */
      /* the synchronous rules are not this scheme's */
      g_ptr_array_add (out, g_strdup ("cluster.sync_lr=none"));
      g_ptr_array_add (out, g_strdup ("cluster.sync_lr_warmup=0"));
      if (w == 1)
        {
          /* one group trains synchronously: the asynchronous keys do not apply */
          g_ptr_array_add (out, g_strdup ("cluster.staleness=-1"));
          g_ptr_array_add (out, g_strdup ("cluster.async_lr=groups"));
        }
    }
}

/* The user's own setting of `key` among the overrides, if any. */
static gboolean
overridden (char **overrides, const char *key)
{
  for (int i = 0; overrides != NULL && overrides[i] != NULL; i++)
    if (g_str_has_prefix (overrides[i], key) && overrides[i][strlen (key)] == '=')
      return TRUE;
  return FALSE;
}

void
shoal_compare_sweep_defaults (const Plan *plan, const ShoalJob *job, gint64 batch, GPtrArray *out)
{
  /* 256 asynchronous groups each testing the whole test set 10 times
   * ran 256 x 10 x 10,000 test rows beside 180,000 training rows */
  if (!overridden (plan->overrides, "job.test_groups") && job->test_groups == 0)
    g_ptr_array_add (out, g_strdup ("job.test_groups=1"));
  /* passes of 2,048 rows: the test cursor goes on from pass to pass, so
   * ten passes still read the whole test set twice */
  if (!overridden (plan->overrides, "job.test_steps") && job->test_steps == 0)
    g_ptr_array_add (out, g_strdup_printf ("job.test_steps=%" G_GINT64_FORMAT, MAX (2048 / MAX (batch, 1), 1)));
}

/* ---- the numbers ---------------------------------------------------------- */

typedef struct {
  const char *base;
  GPtrArray *points;   /* Scheme *, by workers (borrowed) */
} Curve;

static GArray *
curves_of (GPtrArray *schemes)
{
  GArray *curves = g_array_new (FALSE, TRUE, sizeof (Curve));
  for (guint i = 0; i < schemes->len; i++)
    {
      Scheme *s = g_ptr_array_index (schemes, i);
      if (s->base == NULL)
        continue;
      Curve *c = NULL;
      for (guint j = 0; j < curves->len && c == NULL; j++)
        if (strcmp (g_array_index (curves, Curve, j).base, s->base) == 0)
          c = &g_array_index (curves, Curve, j);
      if (c == NULL)
        {
          Curve n = { s->base, g_ptr_array_new () };
          g_array_append_val (curves, n);
          c = &g_array_index (curves, Curve, curves->len - 1);
        }
      g_ptr_array_add (c->points, s);
    }
  return curves;
}

static void
curves_free (GArray *curves)
{
  for (guint i = 0; i < curves->len; i++)
    g_ptr_array_free (g_array_index (curves, Curve, i).points, TRUE);
  g_array_free (curves, TRUE);
}

/* speedup of point p against the curve's first (smallest) point */
static double
speedup (const Curve *c, const Scheme *p)
{
  const Scheme *first = g_ptr_array_index (c->points, 0);
  return first->sps > 0 && p->finished > 0 ? p->sps / first->sps : 0;
}

static double
efficiency (const Curve *c, const Scheme *p)
{
  const Scheme *first = g_ptr_array_index (c->points, 0);
  return speedup (c, p) * first->workers / p->workers;
}

/* Whether curve c has a point gnuplot can draw in column col of its
 * data file (scale_figures): on log scales only positive values count,
 * and time to target only where it was reached. */
static gboolean
curve_has_points (const Curve *c, int col)
{
  for (guint j = 0; j < c->points->len; j++)
    {
      const Scheme *p = g_ptr_array_index (c->points, j);
      if (p->finished == 0)
        continue;
      double v = col == 2 ? p->sps : col == 3 ? speedup (c, p) : col == 4 ? efficiency (c, p) : 0;
      if (col == 5 ? p->reached > 0 : v > 0)
        return TRUE;
    }
  return FALSE;
}

static void
csv_cell (GString *s, double v, gboolean have, const char *fmt)
{
  g_string_append_c (s, ',');
  if (have)
    g_string_append_printf (s, fmt, v);
}

gboolean
shoal_compare_scale_report (GPtrArray *schemes, const Plan *plan, double target, GError **error)
{
  GArray *curves = curves_of (schemes);
  GString *csv = g_string_new (NULL);
  const char *final_column = shoal_compare_final_column (plan);
  g_string_append_printf (csv, "scheme,workers,runs_ok,%s,samples_per_sec,speedup,efficiency,time_to_target_s,"
                          "samples_to_target\n", final_column);
  GString *md = g_string_new (NULL);
  GString *gp = g_string_new (SHOAL_GNUPLOT_HEADER);
  gboolean ok = TRUE;
  char *data = g_build_filename (plan->out, "data", NULL);
  g_mkdir_with_parents (data, 0755);
  /* the curves that start above the sweep's smallest size (shoal_compare_expand left points out) */
  guint sizes = 0;
  GString *later = g_string_new (NULL);
  for (guint i = 0; i < curves->len; i++)
    {
      const Curve *c = &g_array_index (curves, Curve, i);
      const Scheme *first = g_ptr_array_index (c->points, 0);
      sizes = MAX (sizes, c->points->len);
      if (first->fewer_why != NULL)
        g_string_append_printf (later, " %s starts at %d workers: %s (its speedup is against that size).", c->base,
                                first->workers, first->fewer_why);
    }
  g_string_append_printf (md, "\n## Scaling\n\nEvery scheme at up to %u sizes, each point a run of the budget above "
                          "(the same samples at every size: its cost follows the samples, its time the "
                          "%s). Speedup is the scheme's throughput against its own smallest size, efficiency "
                          "the speedup over the workers added; a synchronous scheme's group keeps each "
                          "worker's batch (its group batch grows with the workers: weak scaling), an "
                          "asynchronous one gets a group per worker. scale.csv has every number.%s\n\n"
                          "| scheme | workers | final %s | samples/s | speedup | efficiency | time to %.4f |\n"
                          "|---|---:|---:|---:|---:|---:|---:|\n",
                          sizes, plan->virtual_clock ? "virtual clock's timing model" : "machine's cores", later->str,
                          shoal_compare_measure (plan), target);
  for (guint i = 0; ok && i < curves->len; i++)
    {
      const Curve *c = &g_array_index (curves, Curve, i);
      GString *dat = g_string_new (NULL);
      g_string_append_printf (dat, "# workers samples_per_sec speedup efficiency time_to_target_s %s\n",
                              final_column);
      for (guint j = 0; j < c->points->len; j++)
        {
          const Scheme *p = g_ptr_array_index (c->points, j);
          gboolean have = p->finished > 0, reached = p->reached > 0;
          g_string_append_printf (csv, "%s,%d,%d", c->base, p->workers, p->finished);
          csv_cell (csv, p->final_mean, have, "%.4f");
          csv_cell (csv, p->sps, have, "%.1f");
          csv_cell (csv, speedup (c, p), have, "%.3f");
          csv_cell (csv, efficiency (c, p), have, "%.3f");
          csv_cell (csv, p->time_to_target, reached, "%.4f");
          csv_cell (csv, p->samples_to_target, reached, "%.0f");
          g_string_append_c (csv, '\n');
          char tt[G_ASCII_DTOSTR_BUF_SIZE] = "NaN";
          if (reached)
            g_snprintf (tt, sizeof tt, "%.6g", p->time_to_target);
          if (have)
            g_string_append_printf (dat, "%d %.6g %.6g %.6g %s %.6g\n", p->workers, p->sps, speedup (c, p),
                                    efficiency (c, p), tt, p->final_mean);
          char ttt[64];
          if (reached)
            g_snprintf (ttt, sizeof ttt, "%.3f s", p->time_to_target);
          else
            g_snprintf (ttt, sizeof ttt, "not reached");
          if (have)
            g_string_append_printf (md, "| %s | %d | %.4f | %.0f | %.2f | %.2f | %s |\n", c->base, p->workers,
                                    p->final_mean, p->sps, speedup (c, p), efficiency (c, p), ttt);
          else
            g_string_append_printf (md, "| %s | %d | failed | | | | |\n", c->base, p->workers);
        }
      char *path = g_strdup_printf ("%s/scale-%s.dat", data, c->base);
      ok = g_file_set_contents (path, dat->str, (gssize) dat->len, error);
      g_free (path);
      g_string_free (dat, TRUE);
    }
  static const struct {
    const char *png, *title, *ylabel;
    int col;
  } figures[] = {
    { "scale-throughput.png", "throughput against workers", "samples/s (all workers)", 2 },
    { "scale-speedup.png", "speedup against workers (dashed: ideal)", "speedup over the smallest size", 3 },
    { "scale-efficiency.png", "efficiency against workers", "speedup / workers added", 4 },
    { "scale-time-to-target.png", "time to the target accuracy against workers", "seconds", 5 },
  };
  g_string_append (gp, "set logscale x 2\nset key top left inside\nset xlabel \"workers\"\n");
  for (guint f = 0; ok && f < G_N_ELEMENTS (figures); f++)
    {
      g_string_append_printf (gp, "set output '%s'\nset title \"%s\"\nset ylabel \"%s\"\n%s", figures[f].png,
                              figures[f].title, figures[f].ylabel,
                              f == 0 || f == 1 || f == 3 ? "set logscale y 2\n" : "unset logscale y\n");
      /* only the curves with a point to draw (gnuplot refuses a plot
       * whose every file is empty: no run finished, no size reached the
       * target) */
      GString *plot = g_string_new ("plot ");
      int plotted = 0;
      for (guint i = 0; i < curves->len; i++)
        {
          const Curve *c = &g_array_index (curves, Curve, i);
          if (!curve_has_points (c, figures[f].col))
            continue;
          char *q = shoal_gnuplot_quote (c->base);
          g_string_append_printf (plot, "%s'data/scale-%s.dat' using 1:%d with linespoints lw 2 pt 7 title %s",
                                  plotted > 0 ? ", \\\n  " : "", c->base, figures[f].col, q);
          g_free (q);
          plotted++;
        }
      if (plotted > 0 && f == 1)
        g_string_append (plot, ", \\\n  x / 1 with lines dt 2 lc rgb 'gray40' title 'ideal (from 1 worker)'");
      if (plotted > 0)
        g_string_append_printf (gp, "%s\n", plot->str);
      else
        shoal_gnuplot_empty_frame (gp, f == 3 ? "no size reached the target" : "no run has data");
      g_string_free (plot, TRUE);
      g_string_append_printf (md, "%s![%s](%s)\n", f == 0 ? "\n" : "", figures[f].title, figures[f].png);
      shoal_compare_clear_figure (plan, figures[f].png);
    }
  if (ok)
    {
      char *csv_path = g_build_filename (plan->out, "scale.csv", NULL);
      char *gp_path = g_build_filename (plan->out, "scale.gp", NULL);
      ok = g_file_set_contents (csv_path, csv->str, (gssize) csv->len, error)
           && g_file_set_contents (gp_path, gp->str, (gssize) gp->len, error);
      g_free (csv_path);
      g_free (gp_path);
    }
  if (ok)
    {
      char *report = g_build_filename (plan->out, "report.md", NULL);
      FILE *f = fopen (report, "a");
      gboolean written = f != NULL && fputs (md->str, f) >= 0;
      if (f != NULL && fclose (f) != 0)
        written = FALSE;
      if (!written)
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: %s", report, g_strerror (errno));
          ok = FALSE;
        }
      g_free (report);
    }
  g_free (data);
  g_string_free (csv, TRUE);
  g_string_free (md, TRUE);
  g_string_free (later, TRUE);
  g_string_free (gp, TRUE);
  curves_free (curves);
  return ok;
}
