/* How many threads the BLAS library runs one call on, and how long its
 * idle threads spin before they sleep.
 *
 * OpenBLAS (pthreads build) reads its spin time, OPENBLAS_THREAD_TIMEOUT,
 * once when it starts its thread pool: an idle pool thread calls
 * sched_yield in a loop for 2^28 TSC cycles (about 0.1 s here) after every
 * call before it sleeps, so between two matrix products it keeps a core
 * busy that shoal's own threads (a second worker, the comm thread, a
 * server beside it) want.  shoal_blas_set_idle_spin restarts the pool with
 * a short spin: long enough to cover the gap between the products of one
 * layer, short enough to be asleep while the worker waits on anything
 * else.  A user's own OPENBLAS_THREAD_TIMEOUT is kept.
 *
 * Both calls change process-wide state: call them before threads that use
 * BLAS start, never while a BLAS call runs. */
#ifndef SHOAL_BLAS_THREADS_H
#define SHOAL_BLAS_THREADS_H

#include <glib.h>

G_BEGIN_DECLS

/* Threads of one BLAS call (>= 1). */
void shoal_blas_set_threads (int threads);
int shoal_blas_threads (void);

/* The spin OpenBLAS's idle threads get, as log2 of TSC cycles (OpenBLAS
 * clamps it to 4 .. 30), unless OPENBLAS_THREAD_TIMEOUT is set in the
 * environment (then the user's value holds).  Restarts the pool when it
 * must.  Returns the value in force, or -1 where the BLAS library has no
 * such knob (then nothing changed). */
int shoal_blas_set_idle_spin (int log2_cycles);

/* What shoal asks for by default: 2^18 cycles, about 0.1 ms at 2.6 GHz. */
#define SHOAL_BLAS_IDLE_SPIN 18

/* The buffer OpenBLAS maps for each thread that calls it (Debian's
 * 0.3.21: 128 MiB), and room for the thread's malloc arena beside it. */
#define SHOAL_BLAS_THREAD_BUFFER ((size_t) 128 << 20)
#define SHOAL_BLAS_THREAD_MARGIN ((size_t) 64 << 20)

/* Call in a thread before its first BLAS call.  Under an address-space
 * limit (ulimit -v, RLIMIT_AS) OpenBLAS maps its per-thread buffer on
 * the thread's first call and, when the map fails, tries again for ever:
 * the thread hangs and ignores SIGTERM (a run under ulimit -v 1200000 did
 * for 83 minutes; the data sets' and checkpoint's LMDB maps had taken
 * most of it).  This maps and unmaps that much first: FALSE with
 * SHOAL_ERROR_MEMORY saying the limit, what is mapped and what is
 * needed, where it does not fit.  TRUE at once without a limit. */
gboolean shoal_blas_thread_headroom (GError **error);

G_END_DECLS

#endif
