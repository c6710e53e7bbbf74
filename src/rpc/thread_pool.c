/* A growing pool of threads with a floor that stays and a ceiling; see
 * rpc/thread_pool.h for why not GThreadPool. */
#include "rpc/thread_pool.h"

#include "core/error.h"

typedef struct {
  gpointer item;
  gint64 since;         /* monotonic us it was queued */
} Queued;

typedef struct {
  ShoalThreadPool *pool;
  GThread *thread;      /* set by the starter under the lock */
  gboolean ended;       /* under the lock: the thread returns, join it */
} Worker;

struct _ShoalThreadPool {
  char *name;
  int keep, max;
  gint64 linger_us, grow_after_us;
  GFunc work;
  GDestroyNotify drop;
  gpointer data;

  GMutex lock;
  GCond more;           /* an item was queued, or free began */
  GQueue queue;         /* Queued *, oldest first */
  GList *workers;       /* Worker *, running or ended and not joined yet */
  int running;          /* threads not ended */
  int waiting;          /* threads waiting for an item */
  int starting;         /* threads started that did not look at the queue yet */
  gboolean closing;
};

static gpointer
worker_main (gpointer data)
{
  Worker *w = data;
  ShoalThreadPool *pool = w->pool;

  g_mutex_lock (&pool->lock);
  pool->starting--;
  for (;;)
    {
      Queued *q = g_queue_pop_head (&pool->queue);
      if (q != NULL)
        {
          gpointer item = q->item;
          g_free (q);
          g_mutex_unlock (&pool->lock);
          pool->work (item, pool->data);
          g_mutex_lock (&pool->lock);
          continue;
        }
      if (pool->closing)
        break;
      pool->waiting++;
      gboolean woken = g_cond_wait_until (&pool->more, &pool->lock, g_get_monotonic_time () + pool->linger_us);
      pool->waiting--;
      /* a spare thread that found no work for linger_us ends */
      if (!woken && g_queue_is_empty (&pool->queue) && pool->running > pool->keep && !pool->closing)
        break;
    }
  pool->running--;
  w->ended = TRUE;
  g_mutex_unlock (&pool->lock);
  return NULL;
}

ShoalThreadPool *
shoal_thread_pool_new (const ShoalThreadPoolOptions *opts, GFunc work, GDestroyNotify drop, gpointer data)
{
  g_return_val_if_fail (opts != NULL && work != NULL && drop != NULL, NULL);
  g_return_val_if_fail (opts->keep >= 0 && opts->max >= 0 && opts->linger_us > 0 && opts->grow_after_us >= 0,
                        NULL);
  ShoalThreadPool *pool = g_new0 (ShoalThreadPool, 1);
  pool->name = g_strdup (opts->name != NULL ? opts->name : "shoal-pool");
  pool->keep = opts->keep;
  pool->max = opts->max;
  pool->linger_us = opts->linger_us;
  pool->grow_after_us = opts->grow_after_us;
  pool->work = work;
  pool->drop = drop;
  pool->data = data;
  g_mutex_init (&pool->lock);
  g_cond_init (&pool->more);
  g_queue_init (&pool->queue);
  return pool;
}

/* Joins and frees the workers whose thread ended (all of them when
 * `all`, which only free may ask once no thread can start). */
static void
join_ended (ShoalThreadPool *pool, gboolean all)
{
  GList *ended = NULL;

  g_mutex_lock (&pool->lock);
  for (GList *l = pool->workers, *next; l != NULL; l = next)
    {
      Worker *w = l->data;
      next = l->next;
      if (all || w->ended)
        {
          pool->workers = g_list_remove_link (pool->workers, l);
          ended = g_list_concat (l, ended);
        }
    }
  g_mutex_unlock (&pool->lock);
  for (GList *l = ended; l != NULL; l = l->next)
    {
      Worker *w = l->data;
      g_thread_join (w->thread);
      g_free (w);
    }
  g_list_free (ended);
}

void
shoal_thread_pool_reap (ShoalThreadPool *pool)
{
  join_ended (pool, FALSE);
}

/* Under the lock: one more thread.  FALSE (error set) when none could
 * be started. */
static gboolean
start_thread (ShoalThreadPool *pool, GError **error)
{
  Worker *w = g_new0 (Worker, 1);
  w->pool = pool;
  w->thread = g_thread_try_new (pool->name, worker_main, w, error);
  if (w->thread == NULL)
    {
      g_free (w);
      return FALSE;
    }
  pool->workers = g_list_prepend (pool->workers, w);
  pool->running++;
  pool->starting++;
  return TRUE;
}

static gboolean
may_start (ShoalThreadPool *pool)
{
  return pool->max == 0 || pool->running < pool->max;
}

gboolean
shoal_thread_pool_push (ShoalThreadPool *pool, gpointer item, GError **error)
{
  g_return_val_if_fail (item != NULL, FALSE);
  gboolean any_ended = FALSE;

  g_mutex_lock (&pool->lock);
  if (pool->closing)
    {
      g_mutex_unlock (&pool->lock);
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "%s: stopping", pool->name);
      return FALSE;
    }
  Queued *q = g_new (Queued, 1);
  q->item = item;
  q->since = g_get_monotonic_time ();
  g_queue_push_tail (&pool->queue, q);
  /* every waiting or starting thread takes one queued item: start one
   * more only when the queue holds more than they will take, at once
   * below `keep` (else shoal_thread_pool_grow does, if no thread comes
   * free in time) */
  if ((guint) (pool->waiting + pool->starting) >= g_queue_get_length (&pool->queue))
    g_cond_signal (&pool->more);
  else if ((pool->running < pool->keep || pool->grow_after_us == 0) && may_start (pool))
    {
      GError *e = NULL;
      if (!start_thread (pool, &e))
        {
          if (pool->running == 0)
            {
              g_free (g_queue_pop_tail (&pool->queue));
              g_mutex_unlock (&pool->lock);
              g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "%s: no thread: %s", pool->name, e->message);
              g_error_free (e);
              return FALSE;
            }
          g_warning ("%s: no thread for one more item (%d running, all busy; it waits for one): %s",
                     pool->name, pool->running, e->message);
          g_error_free (e);
          if (pool->waiting > 0)
            g_cond_signal (&pool->more);
        }
    }
  for (GList *l = pool->workers; l != NULL && !any_ended; l = l->next)
    any_ended = ((Worker *) l->data)->ended;
  g_mutex_unlock (&pool->lock);
  if (any_ended)
    join_ended (pool, FALSE);
  return TRUE;
}

gint64
shoal_thread_pool_grow (ShoalThreadPool *pool)
{
  gint64 now = g_get_monotonic_time (), next = G_MAXINT64;
  guint starved = 0;

  g_mutex_lock (&pool->lock);
  GList *l = pool->queue.head;
  for (; l != NULL && ((Queued *) l->data)->since + pool->grow_after_us <= now; l = l->next)
    starved++;
  /* the waiting and starting threads are about to take the oldest ones */
  int started = 0;
  for (guint k = (guint) (pool->waiting + pool->starting); k < starved && may_start (pool) && !pool->closing; k++)
    {
      GError *e = NULL;
      if (!start_thread (pool, &e))
        {
          g_warning ("%s: no thread for an item waiting for one (%d running, all busy): %s", pool->name,
                     pool->running, e->message);
          g_error_free (e);
          break;
        }
      started++;
    }
  if (started > 0)
    g_debug ("%s: %u items waited %" G_GINT64_FORMAT " us with every thread busy: %d more threads, %d in all",
             pool->name, starved, pool->grow_after_us, started, pool->running);
  if (l != NULL && may_start (pool))
    next = ((Queued *) l->data)->since + pool->grow_after_us;
  g_mutex_unlock (&pool->lock);
  return next;
}

guint
shoal_thread_pool_threads (ShoalThreadPool *pool)
{
  g_mutex_lock (&pool->lock);
  guint n = (guint) pool->running;
  g_mutex_unlock (&pool->lock);
  return n;
}

guint
shoal_thread_pool_unclaimed (ShoalThreadPool *pool)
{
  g_mutex_lock (&pool->lock);
  int n = (int) g_queue_get_length (&pool->queue) - pool->waiting - pool->starting;
  g_mutex_unlock (&pool->lock);
  return (guint) MAX (n, 0);
}

void
shoal_thread_pool_free (ShoalThreadPool *pool)
{
  if (pool == NULL)
    return;
  GQueue left = G_QUEUE_INIT;

  g_mutex_lock (&pool->lock);
  pool->closing = TRUE;
  left = pool->queue;
  g_queue_init (&pool->queue);
  g_cond_broadcast (&pool->more);
  g_mutex_unlock (&pool->lock);
  for (GList *l = left.head; l != NULL; l = l->next)
    {
      Queued *q = l->data;
      pool->drop (q->item);
      g_free (q);
    }
  g_queue_clear (&left);
  join_ended (pool, TRUE);   /* no thread starts once closing */
  g_mutex_clear (&pool->lock);
  g_cond_clear (&pool->more);
  g_free (pool->name);
  g_free (pool);
}
