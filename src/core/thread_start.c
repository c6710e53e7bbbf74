/* A thread that cannot start is an error naming it; see thread_start.h. */
#include "core/thread_start.h"

#include "core/error.h"

GThread *
shoal_thread_start (const char *name, GThreadFunc func, gpointer data, GError **error)
{
  GError *why = NULL;
  GThread *thread = g_thread_try_new (name, func, data, &why);
  if (thread == NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_MEMORY,
                   "cannot start thread %s: %s (no room for its stack under ulimit -v, or too many "
                   "threads: ulimit -u)", name, why->message);
      g_error_free (why);
    }
  return thread;
}
