/* A thread waiting for the emulated fault's moment; see fault_timer.h. */
#include "emulate/fault_timer.h"

#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "core/thread_start.h"

struct _ShoalFaultTimer {
  double at_s;
  ShoalMetricsWriter *clock;
  char *what;
  GMutex lock;
  GCond wake;
  gboolean stop;
  GThread *thread;
};

static gpointer
timer_main (gpointer data)
{
  ShoalFaultTimer *t = data;
  g_mutex_lock (&t->lock);
  for (;;)
    {
      double left = t->at_s - shoal_metrics_elapsed (t->clock);
      if (t->stop || left <= 0)
        break;
      g_cond_wait_until (&t->wake, &t->lock, g_get_monotonic_time () + (gint64) (MIN (left, 1.0) * 1e6) + 1);
    }
  gboolean fire = !t->stop;
  g_mutex_unlock (&t->lock);
  if (fire)
    {
      g_message ("%s: [emulate] fault: this process dies now, %.3f s into the job (SIGKILL, as kill -9)",
                 t->what, shoal_metrics_elapsed (t->clock));
      fflush (NULL);
      kill (getpid (), SIGKILL);
    }
  return NULL;
}

static void
timer_free (ShoalFaultTimer *t)
{
  g_mutex_clear (&t->lock);
  g_cond_clear (&t->wake);
  g_free (t->what);
  g_free (t);
}

ShoalFaultTimer *
shoal_fault_timer_start (double at_s, ShoalMetricsWriter *clock, const char *what, GError **error)
{
  ShoalFaultTimer *t = g_new0 (ShoalFaultTimer, 1);
  t->at_s = at_s;
  t->clock = clock;
  t->what = g_strdup (what);
  g_mutex_init (&t->lock);
  g_cond_init (&t->wake);
  t->thread = shoal_thread_start ("fault-timer", timer_main, t, error);
  if (t->thread == NULL)
    {
      g_prefix_error (error, "%s: [emulate] fault timer: ", what);
      timer_free (t);
      return NULL;
    }
  return t;
}

void
shoal_fault_timer_stop (ShoalFaultTimer *t)
{
  if (t == NULL)
    return;
  g_mutex_lock (&t->lock);
  t->stop = TRUE;
  g_cond_signal (&t->wake);
  g_mutex_unlock (&t->lock);
  g_thread_join (t->thread);
  timer_free (t);
}
