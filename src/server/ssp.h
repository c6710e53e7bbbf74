/* Stale synchronous parallel (SSP, Ho et al., NIPS 2013): the clocks of
 * the units that push to one slice, and the rule that bounds how far the
 * fastest may run ahead of the slowest.
 *
 * A unit's clock is the number of steps it has pushed (its last pushed
 * step + 1).  With bound s, a unit that pushed step t may go on to step
 * t + 1 only once every unit's clock is at least t + 1 - s: the fastest
 * is never more than s steps ahead of the slowest, and s = 0 is a
 * barrier after every step.  The slowest unit itself never waits, so the
 * rule cannot deadlock while every unit keeps pushing.  A unit whose
 * process was lost (server/liveness.h) is dropped: it no longer holds
 * the others back, and counts again once its clock (a rejoined process
 * pushing) reaches the slowest of the others.
 * Plain data: the caller (server.c, under the slice's lock) locks. */
#ifndef SHOAL_SSP_H
#define SHOAL_SSP_H

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  int units;
  gint64 *clock;   /* units entries */
  gboolean *dropped;
  gboolean *unheard;   /* since a resume: no push yet, so no clock to hold anyone to */
} ShoalClocks;

/* Every clock starts at 0.  Free with shoal_clocks_free. */
ShoalClocks *shoal_clocks_new (int units);
void shoal_clocks_free (ShoalClocks *clocks);
/* A resumed job: its units resume each at its own step (an asynchronous
 * stop), which the servers learn from their pushes.  Until a unit's
 * first push it holds nobody back; that push sets its clock. */
void shoal_clocks_resume (ShoalClocks *clocks);

/* Unit `unit` pushed step `step`: its clock becomes step + 1 (never
 * goes back). */
void shoal_clocks_advance (ShoalClocks *clocks, int unit, gint64 step);
/* Unit `unit` was lost: the bound no longer waits for it. */
void shoal_clocks_drop (ShoalClocks *clocks, int unit);
gboolean shoal_clocks_dropped (const ShoalClocks *clocks, int unit);
/* The slowest unit's clock, dropped ones aside (G_MAXINT64 when every
 * unit is dropped); *which (may be NULL) gets that unit (-1: none). */
gint64 shoal_clocks_slowest (const ShoalClocks *clocks, int *which);
/* Whether a unit that pushed `step` may begin step + 1 under bound s. */
gboolean shoal_clocks_may_go_on (const ShoalClocks *clocks, gint64 step, int bound);

G_END_DECLS

#endif
