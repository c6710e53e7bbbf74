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
  GError *local = NULL;
  if (!g_file_get_contents (path, &text, NULL, &local))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s", local->message);
      g_error_free (local);
      return NULL;
    }
  ShoalRunLog *log = g_new0 (ShoalRunLog, 1);
  log->tests = g_array_new (FALSE, FALSE, sizeof (ShoalRunPoint));
  log->train = g_array_new (FALSE, FALSE, sizeof (ShoalRunPoint));
  GPtrArray *units = g_ptr_array_new_with_free_func (unit_free);
  GHashTable *rank_bytes = g_hash_table_new_full (NULL, NULL, NULL, g_free);
  JsonParser *parser = json_parser_new ();
  char **lines = g_strsplit (text, "\n", -1);
  gboolean ok = TRUE;
  int first_worker = G_MAXINT;
  GArray *first_train = g_array_new (FALSE, FALSE, sizeof (ShoalRunPoint));
  GArray *test_units = g_array_new (FALSE, FALSE, sizeof (double));   /* worker of each test point */

  for (int i = 0; ok && lines[i] != NULL; i++)
    {
      if (*g_strstrip (lines[i]) == '\0')
        continue;
      JsonNode *root = NULL;
      if (!json_parser_load_from_data (parser, lines[i], -1, &local)
          || (root = json_parser_get_root (parser)) == NULL || JSON_NODE_TYPE (root) != JSON_NODE_OBJECT)
        {
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
          if (group == 0 && worker <= first_worker)
            {
              if (worker < first_worker)
                g_array_set_size (first_train, 0);
              first_worker = (int) worker;
              ShoalRunPoint r = { time, samples, loss, loss, (gint64) step };
              g_array_append_val (first_train, r);
            }
        }
      else if (group == 0)
        {
          double acc;
          gboolean has = number (o, "accuracy", &acc);
          log->has_accuracy |= has;
          ShoalRunPoint r = { time, samples, has ? acc : loss, loss, (gint64) step };
          g_array_append_val (log->tests, r);
          g_array_append_val (test_units, worker);
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
      for (guint i = 0; i < log->tests->len; i++)
        {
          ShoalRunPoint *p = &g_array_index (log->tests, ShoalRunPoint, i);
          p->samples = samples_at (units, p->time, 0, (int) g_array_index (test_units, double, i), p->samples);
        }
      for (guint i = 0; i < first_train->len; i++)
        {
          ShoalRunPoint *p = &g_array_index (first_train, ShoalRunPoint, i);
          p->samples = samples_at (units, p->time, 0, first_worker, p->samples);
        }
      g_array_sort (log->tests, by_time);
      g_array_sort (first_train, by_time);
      g_array_append_vals (log->train, first_train->data, first_train->len);
      GHashTableIter it;
      gpointer key, value;
      g_hash_table_iter_init (&it, rank_bytes);
      while (g_hash_table_iter_next (&it, &key, &value))
        {
          log->bytes_sent += (guint64) ((double *) value)[0];
          log->bytes_received += (guint64) ((double *) value)[1];
        }
    }
  g_array_free (first_train, TRUE);
  g_array_free (test_units, TRUE);
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
shoal_run_log_reached (const ShoalRunLog *log, double target)
{
  for (guint i = 0; i < log->tests->len; i++)
    {
      const ShoalRunPoint *p = &g_array_index (log->tests, ShoalRunPoint, i);
      if (p->value >= target)
        return p;
    }
  return NULL;
}

const ShoalRunPoint *
shoal_run_log_final (const ShoalRunLog *log)
{
  return log->tests->len > 0 ? &g_array_index (log->tests, ShoalRunPoint, log->tests->len - 1) : NULL;
}
