/* shoal compare's report: each scheme's numbers over its runs (time and
 * samples to the target, accuracy, throughput, bytes, staleness, waiting),
 * DIR/results.csv, the data and gnuplot script of the figures, and
 * DIR/report.md with a "what this shows" paragraph per figure worked out
 * from the numbers.  compare.c makes the runs. */
#include <errno.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "tools/compare.h"
#include "tools/gnuplot.h"

/* ---- numbers ------------------------------------------------------------ */

const char *
shoal_compare_measure (const Plan *plan)
{
  return plan->by_loss ? "test loss" : "test accuracy";
}

const char *
shoal_compare_final_column (const Plan *plan)
{
  return plan->by_loss ? "final_test_loss" : "final_accuracy";
}

const char *
shoal_compare_seconds (double s, char *buf, gsize len)
{
  /* tenths from a second up; below it three significant digits, so that
   * a small model's times to target (hundredths of a virtual second) do
   * not all read 0.0 */
  g_snprintf (buf, len, s >= 1 ? "%.1f" : "%.3g", s);
  return buf;
}

/* The file names of the measure's two figures. */
static const char *
measure_png (const Plan *plan, gboolean samples)
{
  if (plan->by_loss)
    return samples ? "test-loss-samples.png" : "test-loss-time.png";
  return samples ? "accuracy-samples.png" : "accuracy-time.png";
}

/* target (unless NaN): the runs' first test pass at or above it (at or
 * below it by_loss) */
static void
summarise (Scheme *s, double target, gboolean by_loss)
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
      /* a run cut short (SIGINT: 130) or failed is not one of the "runs ok" */
      if (r->log == NULL || r->status != 0)
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
      const ShoalRunPoint *p = !isnan (target) ? shoal_run_log_reached (r->log, target, by_loss) : NULL;
      if (p != NULL)
        {
          t += p->time;
          n += p->samples;
          s->reached++;
        }
    }
  s->finished = count;
  s->final_mean = count > 0 ? sum / count : 0;
  s->final_sd = count > 1 ? sqrt (MAX (sq - sum * sum / count, 0) / (count - 1)) : 0;
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
write_csv (GPtrArray *schemes, const Plan *plan, double target, GError **error)
{
  GString *c = g_string_new (NULL);
  g_string_append_printf (c, "scheme,repeat,status,seed,train_steps,%s,target,time_to_target_s,"
                             "samples_to_target,samples,samples_per_sec,bytes_sent,bytes_per_sample,"
                             "staleness_mean,staleness_p95,staleness_max,updates,dropped,compute_s,wait_s,"
                             "peer_wait_s,wall_s\n", shoal_compare_final_column (plan));
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
          const ShoalRunPoint *hit = l != NULL ? shoal_run_log_reached (l, target, plan->by_loss) : NULL;
          csv_number (c, final ? final->value : 0, "%.4f", final != NULL);
          csv_number (c, target, "%.4f", !isnan (target));
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
  char *path = g_build_filename (plan->out, "results.csv", NULL);
  gboolean ok = g_file_set_contents (path, c->str, (gssize) c->len, error);
  g_free (path);
  g_string_free (c, TRUE);
  return ok;
}

/* One figure of curves: every run of every scheme, a colour per scheme;
 * a dashed line at target unless it is NaN. */
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
  if (!isnan (target))
    g_string_append_printf (plot, ", \\\n  %g with lines dt 2 lc rgb 'gray40' title 'target %.3f'", target, target);
  if (n > 0)
    g_string_append_printf (gp, "%s\n", plot->str);
  else
    shoal_gnuplot_empty_frame (gp, "no run has data");
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
figures_script (GPtrArray *schemes, const Plan *plan, double target, GPtrArray *pngs)
{
  GString *gp = g_string_new (SHOAL_GNUPLOT_HEADER);
  /* the curves rise (accuracy) or fall (loss): the key where they are not */
  g_string_append_printf (gp, "set key %s right inside\n", plan->by_loss ? "top" : "bottom");
  const char *clock = clock_name (schemes), *measure = shoal_compare_measure (plan);
  char *title = g_strdup_printf ("%s vs %s", measure, clock), *xlabel = g_strdup_printf ("%s (s)", clock);
  char *ylabel = g_strdup_printf ("%s (group 0)", measure);
  curves_figure (gp, schemes, measure_png (plan, FALSE), title, xlabel, ylabel, FALSE, 1, target);
  g_free (title);
  g_ptr_array_add (pngs, g_strdup (measure_png (plan, FALSE)));
  title = g_strdup_printf ("%s vs samples seen", measure);
  curves_figure (gp, schemes, measure_png (plan, TRUE), title, "samples seen (all workers)", ylabel, FALSE, 2, target);
  g_free (title);
  g_free (ylabel);
  g_ptr_array_add (pngs, g_strdup (measure_png (plan, TRUE)));
  g_string_append (gp, "set key top right inside\n");
  title = g_strdup_printf ("train loss vs %s", clock);
  curves_figure (gp, schemes, "loss-time.png", title, xlabel, "train loss (group 0, mean over disp_freq steps)",
                 TRUE, 1, NAN);
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
paragraph_time (GString *md, GPtrArray *schemes, const Plan *plan, double target)
{
  GPtrArray *r = ranked (schemes, key_time, FALSE);
  g_string_append (md, "**What this shows.** ");
  if (r->len == 0)
    g_string_append_printf (md, "No scheme reached the target %s %.4f within the budget.",
                            shoal_compare_measure (plan), target);
  else
    {
      Scheme *first = g_ptr_array_index (r, 0), *last = g_ptr_array_index (r, r->len - 1);
      char t1[32], t2[32];
      g_string_append_printf (md, "%s reached the target %s %.4f first, after %s s of %s "
                                  "(mean over %d run%s).", first->name, shoal_compare_measure (plan), target,
                              shoal_compare_seconds (first->time_to_target, t1, sizeof t1),
                              clock_name (schemes), first->reached, first->reached == 1 ? "" : "s");
      if (r->len > 1)
        g_string_append_printf (md, " %s was the slowest to get there, at %s s (%.2fx %s's time).", last->name,
                                shoal_compare_seconds (last->time_to_target, t2, sizeof t2), last->time_to_target / MAX (first->time_to_target, 1e-9),
                                first->name);
    }
  not_reached (md, schemes);
  if (virtual_runs (schemes))
    g_string_append (md, " The time is virtual: each worker had a machine of its own, each step cost its "
                         "compute time (the header says whether measured steps were drawn or one time "
                         "charged) times the worker's emulated slowdown, each message its bytes through "
                         "the emulated NICs and links (docs/SCALE.md, \"The timing model\"). It is what "
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

/* Whether the schemes are a scale sweep's points (--workers). */
static gboolean
sweep (GPtrArray *schemes)
{
  for (guint i = 0; i < schemes->len; i++)
    if (((Scheme *) g_ptr_array_index (schemes, i))->workers > 0)
      return TRUE;
  return FALSE;
}

/* s as one shell word: quoted only where a shell would split or expand
 * it (g_free). */
static char *
shell_word (const char *s)
{
  return strpbrk (s, " \t'\"$`\\()*?[]{};&|<>!#~") != NULL ? g_shell_quote (s) : g_strdup (s);
}

/* The overrides every run got, as -o arguments (quoted where a shell
 * would split them): with the topology, what reproduces a run. */
static char *
overrides_words (const Plan *plan)
{
  GString *w = g_string_new (NULL);
  for (int i = 0; plan->overrides != NULL && plan->overrides[i] != NULL; i++)
    {
      char *quoted = shell_word (plan->overrides[i]);
      g_string_append_printf (w, "%s-o %s", w->len > 0 ? " " : "", quoted);
      g_free (quoted);
    }
  return g_string_free (w, FALSE);
}

/* The command that draws the figures, run in the output folder. */
static const char *
draw_command (GPtrArray *schemes)
{
  return sweep (schemes) ? "gnuplot figures.gp && gnuplot scale.gp" : "gnuplot figures.gp";
}

static gboolean
write_report (GPtrArray *schemes, const Plan *plan, double target, gboolean target_given, GPtrArray *pngs,
              GError **error)
{
  GString *md = g_string_new (NULL);
  char *overrides = overrides_words (plan);
  char budget[128];
  GDateTime *now = g_date_time_new_now_local ();
  char *date = g_date_time_format (now, "%Y-%m-%d %H:%M");
  g_date_time_unref (now);
  g_string_append_printf (md, "# shoal compare: %s\n\n", plan->job_path);
  g_string_append_printf (md, "%s; %d run%s per scheme (repeat r uses the job's seed + r); budget %s; target "
                              "%s %.4f (%s). Each run is `shoal run %s --topology SCHEME.conf%s%s`%s; its "
                              "workspace is `runs/SCHEME-rN/`. Every number below is "
                              "computed from the runs' metrics.jsonl (README.md, \"Metrics\").\n\n",
                          date, plan->repeats, plan->repeats == 1 ? "" : "s",
                          budget_words (&plan->budget, plan->budget_samples, budget, sizeof budget),
                          shoal_compare_measure (plan), target,
                          target_given ? "--target"
                          : plan->by_loss ? "5 % above the best scheme's mean final test loss: the net has no "
                                            "accuracy layer, so the test loss is the measure, lower better"
                                          : "95 % of the best scheme's mean final accuracy",
                          plan->job_path, *overrides != '\0' ? " " : "", overrides,
                          sweep (schemes) ? " with its size's cluster keys (its workspace's job.conf has them all)"
                                          : "");
  g_free (date);
  g_free (overrides);
  if (plan->emulation != NULL)
    g_string_append_printf (md, "**Emulated** (docs/SCHEMES.md, \"Emulation\"): %s. This is emulation, not "
                                "measurement: slowed workers sleep or are charged their slowdown, links are "
                                "paced, and the numbers show what each scheme does under those conditions.\n\n",
                            plan->emulation);
  gboolean virt = virtual_runs (schemes);
  g_string_append_printf (md, "| scheme | runs ok | time to target (%ss) | samples to target | final %s | samples/s "
                              "| bytes sent / sample | staleness mean | staleness p95 | waiting / computing (%ss per "
                              "run) | late gradients dropped |\n"
                              "|---|---|---|---|---|---|---|---|---|---|---|\n",
                          virt ? "virtual " : "", shoal_compare_measure (plan), virt ? "virtual " : "");
  for (guint i = 0; i < schemes->len; i++)
    {
      Scheme *s = g_ptr_array_index (schemes, i);
      g_string_append_printf (md, "| %s | %d of %u | ", s->name, s->finished, s->runs->len);
      if (s->reached > 0)
        {
          char t[32];
          g_string_append (md, shoal_compare_seconds (s->time_to_target, t, sizeof t));
          if (s->reached < s->finished)
            g_string_append_printf (md, " (%d reached)", s->reached);
          g_string_append_printf (md, " | %.0f | ", s->samples_to_target);
        }
      else
        g_string_append (md, "not reached | - | ");
      if (s->finished > 0)
        g_string_append_printf (md, "%.4f ± %.4f | %.0f | %.0f | %.2f | %" G_GINT64_FORMAT " | %.1f / %.1f (%.0f %% waiting) | %"
                                G_GINT64_FORMAT " |\n", s->final_mean, s->final_sd, s->sps, s->bytes_per_sample,
                                shoal_staleness_mean (&s->staleness_hist),
                                shoal_staleness_quantile (&s->staleness_hist, 0.95), s->wait_s, s->compute_s,
                                wait_share (s), s->dropped);
      else
        g_string_append (md, "failed | - | - | - | - | - | - |\n");
    }
  g_string_append_printf (md, "\nfinal %s: group 0's last test pass, mean ± sd over the runs. time and samples to "
                       "target: group 0's first test pass at or %s the target (mean over the runs that got "
                       "there). bytes: %s. "
                       "staleness: over every update with a known base version, all servers together. waiting: "
                       "the workers' time blocked on the servers (summed over worker units), computing: their "
                       "forward and backward time.\n\n",
                          shoal_compare_measure (plan), plan->by_loss ? "below" : "above", virt ? "the payloads of the emulated messages between the layout's processes"
                               : "everything every process sent over the network, headers included");
  /* the image links stay: drawing the figures later in this folder
   * completes the report as it is */
  if (!plan->gnuplot)
    g_string_append_printf (md, "**The figures are not drawn**: gnuplot was not installed where this report was "
                                "made. Their data (data/) and scripts are in this folder; `%s` here draws them "
                                "(Debian's gnuplot-nox, or any gnuplot with the pngcairo terminal), and the image "
                                "links below show them.\n\n",
                            draw_command (schemes));
  for (guint i = 0; i < pngs->len; i++)
    {
      const char *png = g_ptr_array_index (pngs, i);
      g_string_append_printf (md, "## %s\n\n![%s](%s)\n\n", png, png, png);
      if (strcmp (png, measure_png (plan, FALSE)) == 0)
        paragraph_time (md, schemes, plan, target);
      else if (strcmp (png, measure_png (plan, TRUE)) == 0)
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

/* ---- the report ---------------------------------------------------------- */

gboolean
shoal_compare_report (GPtrArray *schemes, const Plan *plan, double *target, gboolean target_given,
                      GError **error)
{
  const char *out = plan->out;
  /* the target: given, or 95 % of the best mean final accuracy (5 % above
   * the best mean final test loss); NaN where no run finished */
  if (!target_given)
    {
      double best = NAN;
      for (guint i = 0; i < schemes->len; i++)
        {
          Scheme *s = g_ptr_array_index (schemes, i);
          summarise (s, NAN, plan->by_loss);
          if (s->finished > 0 && (isnan (best) || (plan->by_loss ? s->final_mean < best : s->final_mean > best)))
            best = s->final_mean;
        }
      *target = plan->by_loss ? best + 0.05 * fabs (best) : 0.95 * best;
    }
  for (guint i = 0; i < schemes->len; i++)
    summarise (g_ptr_array_index (schemes, i), *target, plan->by_loss);

  GPtrArray *pngs = g_ptr_array_new_with_free_func (g_free);
  GString *gp = NULL;
  gboolean ok = write_csv (schemes, plan, *target, error) && write_data (schemes, out, error);
  if (ok)
    {
      gp = figures_script (schemes, plan, *target, pngs);
      for (guint i = 0; i < pngs->len; i++)
        shoal_compare_clear_figure (plan, g_ptr_array_index (pngs, i));
      char *script = g_build_filename (out, "figures.gp", NULL);
      ok = g_file_set_contents (script, gp->str, (gssize) gp->len, error)
           && write_report (schemes, plan, *target, target_given, pngs, error);
      g_free (script);
      g_string_free (gp, TRUE);
    }
  g_ptr_array_free (pngs, TRUE);
  return ok;
}

/* ---- the figures ---------------------------------------------------------- */

void
shoal_compare_clear_figure (const Plan *plan, const char *png)
{
  char *path = g_build_filename (plan->out, png, NULL);
  if (g_unlink (path) != 0 && errno != ENOENT)
    g_warning ("%s: cannot remove the earlier comparison's figure (%s): it shows under report.md's link until the "
               "figures are drawn", path, g_strerror (errno));
  g_free (path);
}

gboolean
shoal_compare_draw (GPtrArray *schemes, const Plan *plan, GError **error)
{
  if (!plan->gnuplot)
    {
      char *dir = shell_word (plan->out);
      g_warning ("gnuplot is not installed: the figures are not drawn (%s has results.csv, report.md, the data and "
                 "the scripts); draw them later with `cd %s && %s` (`make deps` or apt-get install gnuplot-nox "
                 "installs gnuplot)", plan->out, dir, draw_command (schemes));
      g_free (dir);
      return TRUE;
    }
  /* each script draws figures of its own: a failing one does not keep
   * the other's from being drawn */
  const char *scripts[] = { "figures.gp", sweep (schemes) ? "scale.gp" : NULL };
  GString *failed = g_string_new (NULL);
  for (guint i = 0; i < G_N_ELEMENTS (scripts) && scripts[i] != NULL; i++)
    {
      GError *local = NULL;
      if (!shoal_gnuplot_run (plan->out, scripts[i], &local))
        {
          g_string_append_printf (failed, "%s%s", failed->len > 0 ? "; " : "", local->message);
          g_error_free (local);
        }
    }
  gboolean ok = failed->len == 0;
  if (!ok)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s (results.csv, report.md and the figures' data are written)",
                 failed->str);
  g_string_free (failed, TRUE);
  return ok;
}
