/* A process's traffic and its server's staleness in metrics.jsonl
 * (process_report.h).  The staleness comes from the server's histogram
 * of the interval (shoal_server_take_staleness); bytes from every Thrift
 * socket of the process (shoal_thrift_socket_totals). */
#include "metrics/process_report.h"

#include "core/thread_start.h"
#include "rpc/thrift_socket.h"

struct _ShoalProcessReport {
  ShoalMetricsWriter *metrics;
  int rank;
  ShoalServer *server;
  gint64 interval_us;
  GThread *thread;
  GMutex lock;
  GCond stop_cond;
  gboolean stop;               /* under lock */
  ShoalServerStats last;       /* the server's counters at the last line */
  guint64 last_sent, last_received;
  gboolean wrote;              /* any line yet */
};

/* Writes a line if anything moved since the last one (or `force`). */
static void
report (ShoalProcessReport *r, gboolean force)
{
  ShoalProcessRecord rec = { .rank = r->rank, .serves = r->server != NULL };
  ShoalStaleness staleness = { 0 };
  ShoalServerStats now = { 0 };
  shoal_thrift_socket_totals (&rec.bytes_sent, &rec.bytes_received);
  if (r->server != NULL)
    {
      shoal_server_stats (r->server, &now);
      rec.updates = now.updates - r->last.updates;
      rec.dropped = now.dropped - r->last.dropped;
    }
  gboolean moved = rec.bytes_sent != r->last_sent || rec.bytes_received != r->last_received
                   || rec.updates != 0 || rec.dropped != 0;
  if (!moved && !(force && !r->wrote))
    return;
  if (r->server != NULL)
    {
      shoal_server_take_staleness (r->server, &staleness);
      rec.staleness = &staleness;
    }
  shoal_metrics_write_process (r->metrics, &rec);
  r->last = now;
  r->last_sent = rec.bytes_sent;
  r->last_received = rec.bytes_received;
  r->wrote = TRUE;
}

static gpointer
report_thread (gpointer data)
{
  ShoalProcessReport *r = data;
  g_mutex_lock (&r->lock);
  while (!r->stop)
    {
      gint64 until = g_get_monotonic_time () + r->interval_us;
      while (!r->stop && g_cond_wait_until (&r->stop_cond, &r->lock, until))
        ;
      if (r->stop)
        break;
      g_mutex_unlock (&r->lock);
      report (r, FALSE);
      g_mutex_lock (&r->lock);
    }
  g_mutex_unlock (&r->lock);
  return NULL;
}

ShoalProcessReport *
shoal_process_report_start (ShoalMetricsWriter *metrics, int rank, ShoalServer *server,
                            double interval_s, GError **error)
{
  ShoalProcessReport *r = g_new0 (ShoalProcessReport, 1);
  r->metrics = metrics;
  r->rank = rank;
  r->server = server;
  r->interval_us = (gint64) (interval_s * 1e6);
  g_mutex_init (&r->lock);
  g_cond_init (&r->stop_cond);
  if (r->interval_us > 0)
    {
      r->thread = shoal_thread_start ("process-report", report_thread, r, error);
      if (r->thread == NULL)
        {
          g_prefix_error (error, "rank %d: process report: ", rank);
          g_mutex_clear (&r->lock);
          g_cond_clear (&r->stop_cond);
          g_free (r);
          return NULL;
        }
    }
  return r;
}

void
shoal_process_report_stop (ShoalProcessReport *r)
{
  if (r == NULL)
    return;
  g_mutex_lock (&r->lock);
  r->stop = TRUE;
  g_cond_broadcast (&r->stop_cond);
  g_mutex_unlock (&r->lock);
  if (r->thread != NULL)
    g_thread_join (r->thread);
  report (r, TRUE);
  g_mutex_clear (&r->lock);
  g_cond_clear (&r->stop_cond);
  g_free (r);
}
