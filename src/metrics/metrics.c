/* One line per record, flushed as written: a crashed run keeps every
 * line it got to, and `tail -f` shows progress. */
#include "metrics/metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "core/error.h"

struct _ShoalMetricsWriter {
  int fd;
  char *path;
  guint64 lost;      /* lines that could not be written (a full disk), under lock */
  GMutex lock;
  gint64 start_us;   /* real time origin of "time" */
  double vtime;      /* the virtual clock's seconds for the next lines; < 0: none */
};

ShoalMetricsWriter *
shoal_metrics_open (const char *path, gboolean append, GError **error)
{
  int fd = open (path, O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
  if (fd < 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: cannot open for writing: %s", path,
                   g_strerror (errno));
      return NULL;
    }
  ShoalMetricsWriter *w = g_new0 (ShoalMetricsWriter, 1);
  w->fd = fd;
  w->path = g_strdup (path);
  g_mutex_init (&w->lock);
  /* processes of one job share the launcher's clock origin, so their
   * lines can be compared; alone, a run starts its clock here */
  const char *origin = g_getenv ("SHOAL_JOB_START_US");
  gint64 start = 0;
  if (origin == NULL || !g_ascii_string_to_signed (origin, 10, 1, G_MAXINT64, &start, NULL))
    start = g_get_real_time ();
  w->start_us = start;
  w->vtime = -1;
  return w;
}

void
shoal_metrics_close (ShoalMetricsWriter *w)
{
  if (w == NULL)
    return;
  if (w->lost > 0)
    g_warning ("%s: %" G_GUINT64_FORMAT " metrics line%s could not be written", w->path, w->lost,
               w->lost == 1 ? "" : "s");
  close (w->fd);
  g_mutex_clear (&w->lock);
  g_free (w->path);
  g_free (w);
}

double
shoal_metrics_elapsed (ShoalMetricsWriter *w)
{
  return (double) (g_get_real_time () - w->start_us) / 1e6;
}

void
shoal_metrics_continue_clock (ShoalMetricsWriter *w, double seconds)
{
  if (w != NULL && seconds >= 0)
    w->start_us = g_get_real_time () - (gint64) (seconds * 1e6);
}

static void
put_number (GString *s, const char *key, double v)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  g_string_append_printf (s, ",\"%s\":%s", key, g_ascii_formatd (buf, sizeof buf, "%.6g", v));
}

static void
put_int (GString *s, const char *key, gint64 v)
{
  g_string_append_printf (s, ",\"%s\":%" G_GINT64_FORMAT, key, v);
}

void
shoal_metrics_set_vtime (ShoalMetricsWriter *w, double vtime)
{
  if (w != NULL)
    w->vtime = vtime;
}

/* The clock fields every line starts with: wall time, and the virtual
 * clock's beside it when there is one (microsecond resolution: a
 * virtual run's lines must repeat exactly). */
static GString *
line_begin (ShoalMetricsWriter *w)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  GString *s = g_string_new (NULL);
  g_string_append_printf (s, "{\"time\":%s", g_ascii_formatd (buf, sizeof buf, "%.3f", shoal_metrics_elapsed (w)));
  if (w->vtime >= 0)
    g_string_append_printf (s, ",\"vtime\":%s", g_ascii_formatd (buf, sizeof buf, "%.6f", w->vtime));
  return s;
}

static void
put_phase (GString *s, const char *phase)
{
  g_string_append_printf (s, ",\"phase\":\"%s\"", phase);
}

static void
line_end (ShoalMetricsWriter *w, GString *s)
{
  g_string_append (s, "}\n");
  g_mutex_lock (&w->lock);
  /* a rank resumed without a launcher rewrites its own lines in place
   * under this lock while the others may write (workspace_claim.h) */
  int fd = w->fd;
  gboolean locked = flock (fd, LOCK_EX) == 0;
  off_t end = lseek (fd, 0, SEEK_END);
  const char *at = s->str;
  gsize left = s->len;
  int err = 0;
  while (left > 0 && err == 0)
    {
      ssize_t n = write (fd, at, left);
      if (n > 0)
        {
          at += n;
          left -= (gsize) n;
        }
      else if (n == 0 || errno != EINTR)
        err = n == 0 ? EIO : errno;
    }
  /* a full disk took part of the line: no half line stays behind (every
   * writer appends under the lock) */
  if (err != 0 && at != s->str && end >= 0 && ftruncate (fd, end) != 0)
    g_debug ("%s: cannot take back a half-written line: %s", w->path, g_strerror (errno));
  if (locked)
    flock (fd, LOCK_UN);
  /* said once, and counted at the close: the run goes on (its
   * checkpoints are written apart and say so themselves) */
  if (err != 0 && w->lost++ == 0)
    g_warning ("%s: cannot write a metrics line: %s; lines are lost until there is room again (the run "
               "goes on)", w->path, g_strerror (err));
  g_mutex_unlock (&w->lock);
  g_string_free (s, TRUE);
}

void
shoal_metrics_write_fields (ShoalMetricsWriter *w, const char *phase, const char *fields)
{
  if (w == NULL)
    return;
  GString *s = line_begin (w);
  put_phase (s, phase);
  g_string_append (s, fields);
  line_end (w, s);
}

void
shoal_metrics_write (ShoalMetricsWriter *w, const ShoalMetricsRecord *r)
{
  if (w == NULL)
    return;
  /* the order of the first lines of shoal: scripts grep for it */
  GString *s = line_begin (w);
  put_int (s, "step", r->step);
  put_int (s, "group", r->group);
  put_int (s, "worker", r->worker);
  put_phase (s, r->phase);
  put_number (s, "loss", r->loss);
  if (r->accuracy >= 0)
    put_number (s, "accuracy", r->accuracy);
  if (r->samples_per_sec >= 0)
    put_number (s, "samples_per_sec", r->samples_per_sec);
  if (r->samples >= 0)
    put_int (s, "samples", r->samples);
  if (strcmp (r->phase, "train") == 0)
    {
      put_number (s, "compute_s", MAX (r->compute_s, 0));
      put_number (s, "wait_s", MAX (r->wait_s, 0));
      if (r->peer_wait_s >= 0)
        put_number (s, "peer_wait_s", r->peer_wait_s);
    }
  if (r->others != NULL && r->others->n > 0)
    {
      char buf[G_ASCII_DTOSTR_BUF_SIZE];
      g_string_append (s, ",\"metrics\":{");
      for (int i = 0; i < r->others->n; i++)
        {
          char *name = g_strescape (r->others->name[i], NULL);
          g_string_append_printf (s, "%s\"%s\":%s", i ? "," : "", name,
                                  g_ascii_formatd (buf, sizeof buf, "%.6g", shoal_other_metrics_mean (r->others, i)));
          g_free (name);
        }
      g_string_append_c (s, '}');
    }
  line_end (w, s);
}

void
shoal_metrics_write_process (ShoalMetricsWriter *w, const ShoalProcessRecord *r)
{
  if (w == NULL)
    return;
  GString *s = line_begin (w);
  put_phase (s, "process");
  put_int (s, "rank", r->rank);
  put_int (s, "bytes_sent", (gint64) r->bytes_sent);
  put_int (s, "bytes_received", (gint64) r->bytes_received);
  if (r->serves && r->staleness != NULL)
    {
      const ShoalStaleness *h = r->staleness;
      put_int (s, "updates", r->updates);
      put_int (s, "dropped", r->dropped);
      put_int (s, "staleness_count", h->count);
      put_number (s, "staleness_mean", shoal_staleness_mean (h));
      put_int (s, "staleness_p95", shoal_staleness_quantile (h, 0.95));
      put_int (s, "staleness_max", h->max);
      g_string_append (s, ",\"staleness_hist\":[");
      for (int i = 0; i < shoal_staleness_used (h); i++)
        g_string_append_printf (s, "%s%" G_GINT64_FORMAT, i > 0 ? "," : "", h->buckets[i]);
      g_string_append_c (s, ']');
    }
  line_end (w, s);
}

double
shoal_metrics_accuracy (const ShoalMetric *m, guint n)
{
  for (guint i = 0; i < n; i++)
    if (!m[i].is_loss && strcmp (m[i].type, "accuracy") == 0)
      return m[i].value;
  return -1;
}

void
shoal_other_metrics_add (ShoalOtherMetrics *o, const ShoalMetric *m, guint n, double weight)
{
  gboolean accuracy_seen = FALSE;
  int k = 0;
  for (guint i = 0; i < n && k < SHOAL_METRICS_MAX_OTHERS; i++)
    {
      if (m[i].is_loss)
        continue;
      if (!accuracy_seen && strcmp (m[i].type, "accuracy") == 0)
        {
          accuracy_seen = TRUE;  /* reported as accuracy */
          continue;
        }
      o->name[k] = m[i].layer;
      o->sum[k] += m[i].value * weight;
      k++;
    }
  o->n = k;
  o->weight += weight;
}

double
shoal_other_metrics_mean (const ShoalOtherMetrics *o, int i)
{
  return o->weight > 0 ? o->sum[i] / o->weight : 0;
}

void
shoal_other_metrics_append (const ShoalOtherMetrics *o, GString *s)
{
  for (int i = 0; i < o->n; i++)
    g_string_append_printf (s, " %s %.4f", o->name[i], shoal_other_metrics_mean (o, i));
}

gboolean
shoal_metrics_line_number (const char *line, const char *key, double *out)
{
  char *pattern = g_strdup_printf ("\"%s\":", key);
  const char *p = strstr (line, pattern);
  gsize plen = strlen (pattern);
  g_free (pattern);
  if (p == NULL)
    return FALSE;
  char *end = NULL;
  *out = g_ascii_strtod (p + plen, &end);
  return end != p + plen;
}
