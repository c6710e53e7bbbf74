/* Linked into ThreadSanitizer builds only (make SANITIZE=thread): makes
 * GLib's synchronisation visible to TSan.
 *
 * GLib 2.74 implements GMutex and GCond on raw futexes and GAsyncQueue and
 * g_once on top of them, inside libglib, which is not instrumented: TSan
 * sees none of it, so every access guarded by a GMutex looks like a race.
 * The executable defines the GLib entry points shoal calls; each calls the
 * real one (found with dlsym RTLD_NEXT) and tells TSan what happened with
 * its mutex annotations, the same ones its pthread interceptors use.  TSan
 * then checks GMutex users as it checks pthread mutex users: data races,
 * lock-order inversions, unlocking a mutex not held.
 *
 * Only calls from shoal's code are seen: libglib binds its own internal
 * calls directly, so GLib's internals stay invisible (they are not ours
 * to check).  Reference counts kept by uninstrumented libraries
 * (g_object_unref, g_byte_array_unref) are invisible too. */
#include <dlfcn.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>

void __tsan_acquire (void *addr);
void __tsan_release (void *addr);
void __tsan_ignore_thread_begin (void);
void __tsan_ignore_thread_end (void);
void __tsan_mutex_create (void *addr, unsigned flags);
void __tsan_mutex_destroy (void *addr, unsigned flags);
void __tsan_mutex_pre_lock (void *addr, unsigned flags);
int __tsan_mutex_post_lock (void *addr, unsigned flags, int recursion);
int __tsan_mutex_pre_unlock (void *addr, unsigned flags);
void __tsan_mutex_post_unlock (void *addr, unsigned flags);

/* flag values of compiler-rt's tsan_interface.h */
#define TSAN_MUTEX_READ_LOCK 1u << 3
#define TSAN_MUTEX_TRY_LOCK 1u << 4
#define TSAN_MUTEX_TRY_LOCK_FAILED 1u << 5

/* Looked up on first use: libgobject's constructor already locks
 * mutexes, before any constructor of the executable runs.  Two threads
 * may look the same name up at once; both store the same pointer. */
static void *
real (void **slot, const char *name)
{
  void *f = __atomic_load_n (slot, __ATOMIC_ACQUIRE);
  if (f == NULL)
    {
      f = dlsym (RTLD_NEXT, name);
      if (f == NULL)
        {
          fprintf (stderr, "tsan_glib: no %s in the libraries: %s\n", name, dlerror ());
          abort ();
        }
      __atomic_store_n (slot, f, __ATOMIC_RELEASE);
    }
  return f;
}

/* REAL (g_mutex_lock, void, (GMutex *)) is the real g_mutex_lock. */
#define REAL(name, ret, args) \
  ({ static void *slot_; ((ret (*) args) real (&slot_, #name)); })

/* ---- mutexes ------------------------------------------------------------ */

void
g_mutex_init (GMutex *m)
{
  REAL (g_mutex_init, void, (GMutex *)) (m);
  __tsan_mutex_create (m, 0);
}

void
g_mutex_clear (GMutex *m)
{
  __tsan_mutex_destroy (m, 0);
  REAL (g_mutex_clear, void, (GMutex *)) (m);
}

void
g_mutex_lock (GMutex *m)
{
  __tsan_mutex_pre_lock (m, 0);
  REAL (g_mutex_lock, void, (GMutex *)) (m);
  __tsan_mutex_post_lock (m, 0, 0);
}

gboolean
g_mutex_trylock (GMutex *m)
{
  __tsan_mutex_pre_lock (m, TSAN_MUTEX_TRY_LOCK);
  gboolean ok = REAL (g_mutex_trylock, gboolean, (GMutex *)) (m);
  __tsan_mutex_post_lock (m, ok ? TSAN_MUTEX_TRY_LOCK : TSAN_MUTEX_TRY_LOCK | TSAN_MUTEX_TRY_LOCK_FAILED, 0);
  return ok;
}

void
g_mutex_unlock (GMutex *m)
{
  __tsan_mutex_pre_unlock (m, 0);
  REAL (g_mutex_unlock, void, (GMutex *)) (m);
  __tsan_mutex_post_unlock (m, 0);
}

void
g_rec_mutex_lock (GRecMutex *m)
{
  __tsan_mutex_pre_lock (m, 0);
  REAL (g_rec_mutex_lock, void, (GRecMutex *)) (m);
  __tsan_mutex_post_lock (m, 0, 0);
}

void
g_rec_mutex_unlock (GRecMutex *m)
{
  __tsan_mutex_pre_unlock (m, 0);
  REAL (g_rec_mutex_unlock, void, (GRecMutex *)) (m);
  __tsan_mutex_post_unlock (m, 0);
}

void
g_rw_lock_writer_lock (GRWLock *l)
{
  __tsan_mutex_pre_lock (l, 0);
  REAL (g_rw_lock_writer_lock, void, (GRWLock *)) (l);
  __tsan_mutex_post_lock (l, 0, 0);
}

void
g_rw_lock_writer_unlock (GRWLock *l)
{
  __tsan_mutex_pre_unlock (l, 0);
  REAL (g_rw_lock_writer_unlock, void, (GRWLock *)) (l);
  __tsan_mutex_post_unlock (l, 0);
}

void
g_rw_lock_reader_lock (GRWLock *l)
{
  __tsan_mutex_pre_lock (l, TSAN_MUTEX_READ_LOCK);
  REAL (g_rw_lock_reader_lock, void, (GRWLock *)) (l);
  __tsan_mutex_post_lock (l, TSAN_MUTEX_READ_LOCK, 0);
}

void
g_rw_lock_reader_unlock (GRWLock *l)
{
  __tsan_mutex_pre_unlock (l, TSAN_MUTEX_READ_LOCK);
  REAL (g_rw_lock_reader_unlock, void, (GRWLock *)) (l);
  __tsan_mutex_post_unlock (l, TSAN_MUTEX_READ_LOCK);
}

/* ---- condition variables: the wait releases and retakes the mutex ----- */

void
g_cond_wait (GCond *c, GMutex *m)
{
  __tsan_mutex_pre_unlock (m, 0);
  __tsan_mutex_post_unlock (m, 0);
  REAL (g_cond_wait, void, (GCond *, GMutex *)) (c, m);
  __tsan_mutex_pre_lock (m, 0);
  __tsan_mutex_post_lock (m, 0, 0);
}

gboolean
g_cond_wait_until (GCond *c, GMutex *m, gint64 end_time)
{
  __tsan_mutex_pre_unlock (m, 0);
  __tsan_mutex_post_unlock (m, 0);
  gboolean signalled = REAL (g_cond_wait_until, gboolean, (GCond *, GMutex *, gint64)) (c, m, end_time);
  __tsan_mutex_pre_lock (m, 0);
  __tsan_mutex_post_lock (m, 0, 0);
  return signalled;
}

/* ---- queues: what one thread pushed, the popping thread sees.  The
 * queue's own list node is allocated by the push and freed by the pop
 * inside libglib, on either side of its hidden mutex: TSan ignores the
 * accesses inside these two calls so that it does not take the node's
 * free for a race. ---------------------------------------------------- */

#define QUEUE_CALL(expr) \
  ({ __tsan_ignore_thread_begin (); __typeof__ (expr) r_ = (expr); __tsan_ignore_thread_end (); r_; })
#define QUEUE_CALL_VOID(expr) \
  do { __tsan_ignore_thread_begin (); expr; __tsan_ignore_thread_end (); } while (0)

void
g_async_queue_push (GAsyncQueue *q, gpointer item)
{
  __tsan_release (q);
  QUEUE_CALL_VOID (REAL (g_async_queue_push, void, (GAsyncQueue *, gpointer)) (q, item));
}

void
g_async_queue_push_front (GAsyncQueue *q, gpointer item)
{
  __tsan_release (q);
  QUEUE_CALL_VOID (REAL (g_async_queue_push_front, void, (GAsyncQueue *, gpointer)) (q, item));
}

gpointer
g_async_queue_pop (GAsyncQueue *q)
{
  gpointer item = QUEUE_CALL (REAL (g_async_queue_pop, gpointer, (GAsyncQueue *)) (q));
  __tsan_acquire (q);
  return item;
}

gpointer
g_async_queue_timeout_pop (GAsyncQueue *q, guint64 timeout)
{
  gpointer item = QUEUE_CALL (REAL (g_async_queue_timeout_pop, gpointer, (GAsyncQueue *, guint64)) (q, timeout));
  if (item != NULL)
    __tsan_acquire (q);
  return item;
}

gpointer
g_async_queue_try_pop (GAsyncQueue *q)
{
  gpointer item = QUEUE_CALL (REAL (g_async_queue_try_pop, gpointer, (GAsyncQueue *)) (q));
  if (item != NULL)
    __tsan_acquire (q);
  return item;
}

/* ---- g_once: the macro's fast path is an atomic load in shoal's code,
 * which TSan instruments; the release here pairs with it. ------------- */

gboolean
(g_once_init_enter) (volatile void *location)
{
  gboolean first = REAL (g_once_init_enter, gboolean, (volatile void *)) (location);
  if (!first)
    __tsan_acquire ((void *) location);
  return first;
}

void
(g_once_init_leave) (volatile void *location, gsize result)
{
  __tsan_release ((void *) location);
  REAL (g_once_init_leave, void, (volatile void *, gsize)) (location, result);
}
