/* Starting a thread as an error, never GLib's abort.
 *
 * g_thread_new aborts the process when the system refuses the thread: no
 * room for its stack under an address-space limit (ulimit -v), or too
 * many threads for the user (ulimit -u counts threads).  Every thread
 * shoal starts goes through g_thread_try_new; the ones that need no more
 * than a name in the message go through this. */
#ifndef SHOAL_THREAD_START_H
#define SHOAL_THREAD_START_H

#include <glib.h>

G_BEGIN_DECLS

/* g_thread_try_new; NULL with SHOAL_ERROR_MEMORY "cannot start thread
 * NAME: WHY (no room for its stack under ulimit -v, or too many threads:
 * ulimit -u)" when the thread cannot be created.  Callers prefix what
 * the thread is for (its rank, unit or group) and stop what they
 * started before it. */
GThread *shoal_thread_start (const char *name, GThreadFunc func, gpointer data, GError **error);

G_END_DECLS

#endif
