/* Chunked loops on a few sleeping helper threads; see parallel.h. */
#include "core/parallel.h"

#define MAX_HELPERS 63

/* A loop, shared by its caller and the helpers that picked it up; freed
 * by the last of them (a helper may wake after the caller returned: it
 * then finds no chunk left and lets go). */
typedef struct {
  gint refs;                  /* atomic */
  ShoalRangeFunc fn;          /* fn and data are used only for a claimed chunk, */
  gpointer data;              /* while the caller still waits */
  size_t n, grain;
  gsize chunks;
  gsize next;                 /* atomic: the next chunk to claim */
  gsize finished;             /* atomic: chunks done */
} Loop;

static void
loop_unref (Loop *loop)
{
  if (g_atomic_int_dec_and_test (&loop->refs))
    g_free (loop);
}

static struct {
  GMutex lock;                /* guards everything below but the Loop counters */
  GCond wake;                 /* helpers: a loop began, or stop */
  GCond done;                 /* the caller: the last chunk finished */
  guint64 generation;         /* loops begun */
  Loop *loop;                 /* the loop running, or NULL */
  gint busy;                  /* atomic: a caller owns the pool */
  int helpers;
  GThread *threads[MAX_HELPERS];
  gboolean stop;
} pool;

/* Takes chunks until none is left; returns how many this thread ran. */
static gsize
run_chunks (Loop *loop)
{
  gsize ran = 0;
  for (;;)
    {
      gsize c = (gsize) g_atomic_pointer_add (&loop->next, 1);
      if (c >= loop->chunks)
        return ran;
      size_t begin = c * loop->grain;
      size_t end = MIN (begin + loop->grain, loop->n);
      loop->fn (begin, end, loop->data);
      ran++;
      if ((gsize) g_atomic_pointer_add (&loop->finished, 1) + 1 == loop->chunks)
        {
          /* the last chunk: wake the caller if it waits */
          g_mutex_lock (&pool.lock);
          g_cond_broadcast (&pool.done);
          g_mutex_unlock (&pool.lock);
        }
    }
}

static gpointer
helper_main (gpointer unused)
{
  guint64 seen;
  (void) unused;
  g_mutex_lock (&pool.lock);
  seen = pool.generation;
  for (;;)
    {
      while (!pool.stop && pool.generation == seen)
        g_cond_wait (&pool.wake, &pool.lock);
      if (pool.stop)
        break;
      seen = pool.generation;
      Loop *loop = pool.loop;
      if (loop == NULL)
        continue;
      g_atomic_int_inc (&loop->refs);
      g_mutex_unlock (&pool.lock);
      run_chunks (loop);
      loop_unref (loop);
      g_mutex_lock (&pool.lock);
    }
  g_mutex_unlock (&pool.lock);
  return NULL;
}

void
shoal_parallel_set_threads (int threads)
{
  int want = CLAMP (threads, 1, MAX_HELPERS + 1) - 1;
  if (want == pool.helpers)
    return;
  g_mutex_lock (&pool.lock);
  pool.stop = TRUE;
  g_cond_broadcast (&pool.wake);
  g_mutex_unlock (&pool.lock);
  for (int i = 0; i < pool.helpers; i++)
    g_thread_join (pool.threads[i]);
  pool.stop = FALSE;
  pool.helpers = 0;
  for (int i = 0; i < want; i++)
    {
      GError *error = NULL;
      pool.threads[i] = g_thread_try_new ("shoal-parallel", helper_main, NULL, &error);
      if (pool.threads[i] == NULL)
        {
          g_warning ("parallel loops: no helper thread: %s", error->message);
          g_error_free (error);
          break;
        }
      pool.helpers++;
    }
}

int
shoal_parallel_threads (void)
{
  return pool.helpers + 1;
}

void
shoal_parallel_for (size_t n, size_t grain, ShoalRangeFunc fn, gpointer data)
{
  grain = MAX (grain, 1);
  if (pool.helpers == 0 || n < 2 * grain || !g_atomic_int_compare_and_exchange (&pool.busy, 0, 1))
    {
      if (n > 0)
        fn (0, n, data);
      return;
    }
  Loop *loop = g_new (Loop, 1);
  *loop = (Loop) { 1, fn, data, n, grain, (n + grain - 1) / grain, 0, 0 };
  g_mutex_lock (&pool.lock);
  pool.loop = loop;
  pool.generation++;
  g_cond_broadcast (&pool.wake);
  g_mutex_unlock (&pool.lock);

  run_chunks (loop);
  /* only chunks a helper is running are left: short waits */
  g_mutex_lock (&pool.lock);
  pool.loop = NULL;   /* a helper waking late finds nothing */
  while ((gsize) g_atomic_pointer_get (&loop->finished) < loop->chunks)
    g_cond_wait (&pool.done, &pool.lock);
  g_mutex_unlock (&pool.lock);
  loop_unref (loop);
  g_atomic_int_set (&pool.busy, 0);
}
