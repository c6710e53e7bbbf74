/* One line per record, flushed as written: a crashed run keeps every
 * line it got to, and `tail -f` shows progress. */
#include "worker/metrics.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"

struct _ShoalMetricsWriter {
  FILE *file;
  GMutex lock;
  gint64 start_us;   /* real time origin of "time" */
};

ShoalMetricsWriter *
shoal_metrics_open (const char *path, gboolean append, GError **error)
{
  FILE *f = fopen (path, append ? "a" : "w");
  if (f == NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: cannot open for writing: %s", path,
                   g_strerror (errno));
      return NULL;
    }
  ShoalMetricsWriter *w = g_new0 (ShoalMetricsWriter, 1);
  w->file = f;
  g_mutex_init (&w->lock);
  /* processes of one job share the launcher's clock origin, so their
   * lines can be compared; alone, a run starts its clock here */
  const char *origin = g_getenv ("SHOAL_JOB_START_US");
  gint64 start = 0;
  if (origin == NULL || !g_ascii_string_to_signed (origin, 10, 1, G_MAXINT64, &start, NULL))
    start = g_get_real_time ();
  w->start_us = start;
  return w;
}

void
shoal_metrics_close (ShoalMetricsWriter *w)
{
  if (w == NULL)
    return;
  fclose (w->file);
  g_mutex_clear (&w->lock);
  g_free (w);
}

double
shoal_metrics_elapsed (ShoalMetricsWriter *w)
{
  return (double) (g_get_real_time () - w->start_us) / 1e6;
}

static void
put_number (GString *s, const char *key, double v)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  g_string_append_printf (s, ",\"%s\":%s", key, g_ascii_formatd (buf, sizeof buf, "%.6g", v));
}

void
shoal_metrics_write (ShoalMetricsWriter *w, const ShoalMetricsRecord *r)
{
  if (w == NULL)
    return;
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  GString *s = g_string_new (NULL);
  g_string_append_printf (s, "{\"time\":%s,\"step\":%" G_GINT64_FORMAT ",\"group\":%d,\"worker\":%d,"
                          "\"phase\":\"%s\"",
                          g_ascii_formatd (buf, sizeof buf, "%.3f", shoal_metrics_elapsed (w)),
                          r->step, r->group, r->worker, r->phase);
  put_number (s, "loss", r->loss);
  if (r->accuracy >= 0)
    put_number (s, "accuracy", r->accuracy);
  if (r->samples_per_sec >= 0)
    put_number (s, "samples_per_sec", r->samples_per_sec);
  g_string_append (s, "}\n");
  g_mutex_lock (&w->lock);
  fputs (s->str, w->file);
  fflush (w->file);
  g_mutex_unlock (&w->lock);
  g_string_free (s, TRUE);
}
