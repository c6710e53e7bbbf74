/* A pool of threads that run queued work items, for the RPC listener's
 * calls (rpc/listener.c).
 *
 * GThreadPool does not fit: an exclusive one starts all its threads at
 * once and never lets one go, a shared one keeps its spare threads in a
 * process-wide set that outlives the pool (nothing to join when a
 * listener stops), and neither can say "start one more now, the others
 * are all taken".  This one:
 *
 * - starts threads only when work comes and no thread is free: at once
 *   up to `keep`, and beyond that, up to `max` (0: no bound), for an
 *   item that waited `grow_after_us` in the queue without a thread
 *   coming free (shoal_thread_pool_grow).  So a burst of short items is
 *   run by the `keep` threads, and items that would wait behind threads
 *   blocked for long still get threads of their own; an item pushed
 *   while all `max` are busy waits for the first that is done;
 * - keeps `keep` threads waiting for work once they were started; one
 *   more than that ends after `linger_us` without work;
 * - at free, lets every thread finish its item, hands the items still
 *   queued to `drop` and joins every thread: nothing is left running.
 *
 * Work items are run in the order they were pushed, each once.  All
 * calls are thread-safe; push may be called from a work function. */
#ifndef SHOAL_THREAD_POOL_H
#define SHOAL_THREAD_POOL_H

#include <glib.h>

G_BEGIN_DECLS

typedef struct _ShoalThreadPool ShoalThreadPool;

typedef struct {
  const char *name;     /* the threads' name (15 characters show in ps) */
  int keep;             /* threads kept waiting for work once started (>= 0) */
  int max;              /* threads at most; 0: no bound */
  gint64 linger_us;     /* a thread beyond `keep` this long without work ends (> 0) */
  gint64 grow_after_us; /* beyond `keep`: a thread for an item queued this long (0: at once) */
} ShoalThreadPoolOptions;

/* work (item, data) runs an item; drop (item) takes one that never ran
 * (at free, or when push refuses it is the caller's).  Starts no thread. */
ShoalThreadPool *shoal_thread_pool_new (const ShoalThreadPoolOptions *opts, GFunc work,
                                        GDestroyNotify drop, gpointer data);

/* Queues item and wakes a free thread or starts one.  FALSE, with the
 * item still the caller's, once free began, or when no thread runs and
 * none can be started (error says why; a thread that cannot be started
 * while others run is logged and the item waits for them). */
gboolean shoal_thread_pool_push (ShoalThreadPool *pool, gpointer item, GError **error);

/* Starts a thread for every queued item that waited grow_after_us while
 * no thread was free (up to `max`).  Returns when to call it again
 * (monotonic us; G_MAXINT64: only after the next push).  Whoever pushes
 * calls it on time; grow_after_us = 0 needs no call. */
gint64 shoal_thread_pool_grow (ShoalThreadPool *pool);

/* Threads running now (working or waiting for work). */
guint shoal_thread_pool_threads (ShoalThreadPool *pool);
/* Items queued that no free or starting thread is about to take: they
 * wait for a busy thread to finish its item (or for grow). */
guint shoal_thread_pool_unclaimed (ShoalThreadPool *pool);

/* Joins threads that ended for lack of work (push does so too). */
void shoal_thread_pool_reap (ShoalThreadPool *pool);

/* Waits for the items being run, drops the queued ones, joins every
 * thread and frees the pool.  Not from a work function.  NULL ignored. */
void shoal_thread_pool_free (ShoalThreadPool *pool);

G_END_DECLS

#endif
