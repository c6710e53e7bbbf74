/* metrics.jsonl back into curves and totals (runlog.h), one line at a
 * time through json-glib's parser.  Lines of several processes are
 * interleaved in time order only roughly (each process appends its own),
 * so the curves are sorted by time here. */
#include "tools/runlog.h"

#include <json-glib/json-glib.h>
#include <string.h>

#include "core/error.h"

typedef struct {
  double time, samples, sps;
} UnitPoint;

typedef struct {
  int group, worker;
  GArray *points;   /* UnitPoint */
} Unit;

static int
by_time (gconstpointer a, gconstpointer b)
{
  double ta = ((const ShoalRunPoint *) a)->time, tb = ((const ShoalRunPoint *) b)->time;
  return ta < tb ? -1 : ta > tb;
}

static int
unit_by_time (gconstpointer a, gconstpointer b)
{
  double ta = ((const UnitPoint *) a)->time, tb = ((const UnitPoint *) b)->time;
  return ta < tb ? -1 : ta > tb;
}

/* A train or test line's point, with its unit. */
typedef struct {
  ShoalRunPoint p;
  int group, worker;
} UnitRunPoint;

/* The group whose curves are the job's: group 0, unless it ended before
 * the others (it was lost: [emulate] fault_group, a killed process) -
 * then the lowest group of those that went furthest.  A lost group's
 * last test is no result of the job. */
static int
reporting_group (GArray *trains, GArray *tests)
{
  GHashTable *last = g_hash_table_new (NULL, NULL);   /* group -> 1 + its last step */
  gint64 furthest = -1;
  /* the test passes where there are any: a group lost at its last step
   * wrote that step's train line but never its final test */
  GArray *a = tests->len > 0 ? tests : trains;
  for (guint i = 0; i < a->len; i++)
    {
      const UnitRunPoint *t = &g_array_index (a, UnitRunPoint, i);
      gint64 had = GPOINTER_TO_SIZE (g_hash_table_lookup (last, GINT_TO_POINTER (t->group)));
      gint64 now = MAX (had, t->p.step + 1);
      g_hash_table_insert (last, GINT_TO_POINTER (t->group), GSIZE_TO_POINTER ((gsize) now));
      furthest = MAX (furthest, now);
    }
  int best = 0;
  gint64 at0 = GPOINTER_TO_SIZE (g_hash_table_lookup (last, GINT_TO_POINTER (0)));
  if (at0 < furthest)
    {
      best = G_MAXINT;
      GHashTableIter it;
      gpointer key, value;
      g_hash_table_iter_init (&it, last);
      while (g_hash_table_iter_next (&it, &key, &value))
        if ((gint64) GPOINTER_TO_SIZE (value) == furthest)
          best = MIN (best, GPOINTER_TO_INT (key));
    }
  g_hash_table_destroy (last);
  return best;
}

static Unit *
unit_of (GPtrArray *units, int group, int worker)
{
  for (guint i = 0; i < units->len; i++)
    {
      Unit *u = g_ptr_array_index (units, i);
      if (u->group == group && u->worker == worker)
        return u;
    }
  Unit *u = g_new0 (Unit, 1);
  u->group = group;
  u->worker = worker;
  u->points = g_array_new (FALSE, FALSE, sizeof (UnitPoint));
  g_ptr_array_add (units, u);
  return u;
}

static void
unit_free (gpointer data)
{
  Unit *u = data;
  g_array_free (u->points, TRUE);
  g_free (u);
}

/* A unit's samples at time t: linear between its points, from (0, 0). */
static double
unit_samples_at (const Unit *u, double t)
{
  double t0 = 0, s0 = 0;
  for (guint i = 0; i < u->points->len; i++)
    {
      const UnitPoint *p = &g_array_index (u->points, UnitPoint, i);
      if (p->time >= t)
        return p->time > t0 ? s0 + (p->samples - s0) * (t - t0) / (p->time - t0) : p->samples;
      t0 = p->time;
      s0 = p->samples;
    }
  return s0;
}

/* Job-wide samples at time t; the unit (group, worker) - the one that
 * wrote the point - counts exactly `own` (< 0: interpolated like the
 * others): a test pass takes time in which its unit trains nothing. */
static double
samples_at (GPtrArray *units, double t, int group, int worker, double own)
{
  double sum = 0;
  for (guint i = 0; i < units->len; i++)
    {
      const Unit *u = g_ptr_array_index (units, i);
      sum += own >= 0 && u->group == group && u->worker == worker ? own : unit_samples_at (u, t);
    }
  return sum;
}

static gboolean
number (JsonObject *o, const char *key, double *out)
{
  JsonNode *n = json_object_get_member (o, key);
  if (n == NULL || JSON_NODE_TYPE (n) != JSON_NODE_VALUE)
    return FALSE;
  GType t = json_node_get_value_type (n);
  if (t != G_TYPE_INT64 && t != G_TYPE_DOUBLE)
    return FALSE;
  *out = json_node_get_double (n);
  return TRUE;
}

static double
number_or (JsonObject *o, const char *key, double fallback)
{
  double v;
  return number (o, key, &v) ? v : fallback;
}

/* One process line: its traffic (the last line of a rank holds its
 * totals) and its server's updates and staleness of the interval. */
static void
add_process (ShoalRunLog *log, JsonObject *o, GHashTable *rank_bytes)
{
  double rank = number_or (o, "rank", -1);
  double *bytes = g_hash_table_lookup (rank_bytes, GINT_TO_POINTER ((int) rank + 1));
  if (bytes == NULL)
    {
      bytes = g_new0 (double, 2);
      g_hash_table_insert (rank_bytes, GINT_TO_POINTER ((int) rank + 1), bytes);
    }
  bytes[0] = MAX (bytes[0], number_or (o, "bytes_sent", 0));
  bytes[1] = MAX (bytes[1], number_or (o, "bytes_received", 0));
  log->updates += (gint64) number_or (o, "updates", 0);
  log->dropped += (gint64) number_or (o, "dropped", 0);
  JsonNode *hist = json_object_get_member (o, "staleness_hist");
  if (hist == NULL || JSON_NODE_TYPE (hist) != JSON_NODE_ARRAY)
    return;
  JsonArray *a = json_node_get_array (hist);
  ShoalStaleness h = { 0 };
  for (guint i = 0; i < json_array_get_length (a) && i < SHOAL_STALENESS_BUCKETS; i++)
    h.buckets[i] = json_array_get_int_element (a, i);
  h.count = (gint64) number_or (o, "staleness_count", 0);
  h.max = (gint64) number_or (o, "staleness_max", 0);
  h.sum = (gint64) (number_or (o, "staleness_mean", 0) * (double) h.count + 0.5);
  shoal_staleness_merge (&log->staleness, &h);
}

ShoalRunLog *
shoal_run_log_read (const char *path, GError **error)
{
  char *text = NULL;
  if (!shoal_file_read (path, &text, NULL, error))
    return NULL;
  GError *local = NULL;
  ShoalRunLog *log = g_new0 (ShoalRunLog, 1);
  log->tests = g_array_new (FALSE, FALSE, sizeof (ShoalRunPoint));
  log->train = g_array_new (FALSE, FALSE, sizeof (ShoalRunPoint));
  GPtrArray *units = g_ptr_array_new_with_free_func (unit_free);
  GHashTable *rank_bytes = g_hash_table_new_full (NULL, NULL, NULL, g_free);
  JsonParser *parser = json_parser_new ();
  char **lines = g_strsplit (text, "\n", -1);
  gboolean ok = TRUE;
  GArray *trains = g_array_new (FALSE, FALSE, sizeof (UnitRunPoint));  /* every unit's train lines */
  GArray *tests = g_array_new (FALSE, FALSE, sizeof (UnitRunPoint));   /* every group's test passes */

  for (int i = 0; ok && lines[i] != NULL; i++)
    {
      if (*g_strstrip (lines[i]) == '\0')
        continue;
      JsonNode *root = NULL;
      if (!json_parser_load_from_data (parser, lines[i], -1, &local)
          || (root = json_parser_get_root (parser)) == NULL || JSON_NODE_TYPE (root) != JSON_NODE_OBJECT)
        {
          if (lines[i + 1] == NULL)
            {
              /* no newline after it: a line still being written (a live
               * run's file) or cut short by a crash; the rest is whole */
              g_message ("%s:%d: the last line is cut short (a run still writing it?): left out", path, i + 1);
              g_clear_error (&local);
              break;
            }
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA, "%s:%d: not a JSON object%s%s", path, i + 1,
                       local != NULL ? ": " : "", local != NULL ? local->message : "");
          g_clear_error (&local);
          ok = FALSE;
          break;
        }
      JsonObject *o = json_node_get_object (root);
      const char *phase = json_object_has_member (o, "phase") ? json_object_get_string_member (o, "phase") : NULL;
      double time, group, worker, loss, samples, step;
      if (phase == NULL || !number (o, "time", &time))
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA, "%s:%d: a line without \"time\" and \"phase\"",
                       path, i + 1);
          ok = FALSE;
          break;
        }
      /* a virtual-clock run: its curves are in virtual time */
      double vtime;
      gboolean has_vtime = number (o, "vtime", &vtime);
      if (has_vtime)
        time = vtime;
      if (log->lines > 0 && has_vtime != log->virtual_time)
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA, "%s:%d: a line %s \"vtime\" among lines %s it: "
                       "two runs in one file?", path, i + 1, has_vtime ? "with" : "without",
                       has_vtime ? "without" : "with");
          ok = FALSE;
          break;
        }
      log->virtual_time = has_vtime;
      log->lines++;
      log->end_time = MAX (log->end_time, time);
      if (strcmp (phase, "process") == 0)
        {
          add_process (log, o, rank_bytes);
          continue;
        }
      if (strcmp (phase, "train") != 0 && strcmp (phase, "test") != 0)
        continue;  /* a phase of a later shoal: not ours to read */
      if (!number (o, "group", &group) || !number (o, "worker", &worker) || !number (o, "loss", &loss)
          || !number (o, "step", &step) || !number (o, "samples", &samples))
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                       "%s:%d: a %s line needs group, worker, step, loss and samples (metrics of an older shoal?)",
                       path, i + 1, phase);
          ok = FALSE;
          break;
        }
      if (strcmp (phase, "train") == 0)
        {
          Unit *u = unit_of (units, (int) group, (int) worker);
          UnitPoint p = { time, samples, number_or (o, "samples_per_sec", 0) };
          g_array_append_val (u->points, p);
          log->compute_s += number_or (o, "compute_s", 0);
          log->wait_s += number_or (o, "wait_s", 0);
          log->peer_wait_s += number_or (o, "peer_wait_s", 0);
          UnitRunPoint r = { { time, samples, loss, loss, (gint64) step }, (int) group, (int) worker };
          g_array_append_val (trains, r);
        }
      else
        {
          double acc;
          gboolean has = number (o, "accuracy", &acc);
          log->has_accuracy |= has;
          UnitRunPoint r = { { time, samples, has ? acc : loss, loss, (gint64) step }, (int) group, (int) worker };
          g_array_append_val (tests, r);
        }
    }
  g_strfreev (lines);
  g_free (text);
  g_object_unref (parser);

  if (ok)
    {
      for (guint i = 0; i < units->len; i++)
        {
          Unit *u = g_ptr_array_index (units, i);
          g_array_sort (u->points, unit_by_time);
          /* a unit's throughput: its samples over its train time, each
           * line's window taking (its samples) / (its samples/s) */
          double prev = 0, seconds = 0;
          for (guint j = 0; j < u->points->len; j++)
            {
              const UnitPoint *p = &g_array_index (u->points, UnitPoint, j);
              if (p->sps > 0)
                seconds += (p->samples - prev) / p->sps;
              prev = p->samples;
            }
          log->samples += prev;
          if (seconds > 0)
            log->samples_per_sec += prev / seconds;
        }
      log->units = (int) units->len;
      log->group = reporting_group (trains, tests);
      int first_worker = G_MAXINT;
      for (guint i = 0; i < trains->len; i++)
        {
          const UnitRunPoint *t = &g_array_index (trains, UnitRunPoint, i);
          if (t->group == log->group)
            first_worker = MIN (first_worker, t->worker);
        }
      for (guint i = 0; i < tests->len; i++)
        {
          UnitRunPoint *t = &g_array_index (tests, UnitRunPoint, i);
          if (t->group != log->group)
            continue;
          t->p.samples = samples_at (units, t->p.time, t->group, t->worker, t->p.samples);
          g_array_append_val (log->tests, t->p);
        }
      for (guint i = 0; i < trains->len; i++)
        {
          UnitRunPoint *t = &g_array_index (trains, UnitRunPoint, i);
          if (t->group != log->group || t->worker != first_worker)
            continue;
          t->p.samples = samples_at (units, t->p.time, t->group, t->worker, t->p.samples);
          g_array_append_val (log->train, t->p);
        }
      g_array_sort (log->tests, by_time);
      g_array_sort (log->train, by_time);
      GHashTableIter it;
      gpointer key, value;
      g_hash_table_iter_init (&it, rank_bytes);
      while (g_hash_table_iter_next (&it, &key, &value))
        {
          log->bytes_sent += (guint64) ((double *) value)[0];
          log->bytes_received += (guint64) ((double *) value)[1];
        }
    }
  g_array_free (trains, TRUE);
  g_array_free (tests, TRUE);
  g_hash_table_destroy (rank_bytes);
  g_ptr_array_free (units, TRUE);
  if (!ok)
    {
      shoal_run_log_free (log);
      return NULL;
    }
  return log;
}

void
shoal_run_log_free (ShoalRunLog *log)
{
  if (log == NULL)
    return;
  g_array_free (log->tests, TRUE);
  g_array_free (log->train, TRUE);
  g_free (log);
}

const ShoalRunPoint *
shoal_run_log_reached (const ShoalRunLog *log, double target, gboolean lower_is_better)
{
  for (guint i = 0; i < log->tests->len; i++)
    {
      const ShoalRunPoint *p = &g_array_index (log->tests, ShoalRunPoint, i);
      if (lower_is_better ? p->value <= target : p->value >= target)
        return p;
    }
  return NULL;
}

const ShoalRunPoint *
shoal_run_log_final (const ShoalRunLog *log)
{
  return log->tests->len > 0 ? &g_array_index (log->tests, ShoalRunPoint, log->tests->len - 1) : NULL;
}
