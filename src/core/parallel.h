/* Element-wise loops over memory (the optimiser's update, sums of
 * gradients) spread over the cores the process may use.
 *
 * On two cores the update of a large layer runs while the second BLAS
 * thread sleeps: one thread streams the values, gradients and optimiser
 * state while a core idles.  shoal_parallel_for hands out chunks of a
 * range to a few helper threads and the caller, each taking the next
 * chunk when it is free.  A helper that does not get a core in time
 * simply takes no chunk, so a busy machine costs the caller one chunk at
 * most, never a wait for a thread the scheduler has not run.  Helpers
 * sleep on a condition variable between loops: they never spin.
 *
 * Only for loops whose chunks are independent: every element computed
 * from the same elements whichever thread runs it, so the results are
 * the same to the bit as one thread's. */
#ifndef SHOAL_PARALLEL_H
#define SHOAL_PARALLEL_H

#include <glib.h>
#include <stddef.h>

G_BEGIN_DECLS

/* Threads a loop may use, the caller included (1: every loop runs in the
 * caller).  Starts or stops helpers; call while no loop runs. */
void shoal_parallel_set_threads (int threads);
int shoal_parallel_threads (void);

typedef void (*ShoalRangeFunc) (size_t begin, size_t end, gpointer data);

/* Runs fn over [0, n) in chunks of `grain` elements (the last shorter):
 * fn (begin, end, data) for each, on the caller and the helpers.  Returns
 * once every chunk is done.  Loops shorter than 2 grains, and loops
 * started while another one runs (from another thread), run in the
 * caller alone. */
void shoal_parallel_for (size_t n, size_t grain, ShoalRangeFunc fn, gpointer data);

/* A grain that is worth a hand-off: about 10 us of streaming floats. */
#define SHOAL_PARALLEL_GRAIN ((size_t) 32 * 1024)

G_END_DECLS

#endif
