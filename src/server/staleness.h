/* A histogram of update staleness: how many versions a slice moved on
 * between the values a gradient was computed on and the moment the
 * gradient was applied (server version minus the gradient's base
 * version).  0 means the gradient was computed on the values it updates
 * (synchronous schemes, or an asynchronous push that met no other).
 *
 * Buckets 0 .. SHOAL_STALENESS_BUCKETS - 2 count one staleness each; the
 * last counts that many or more.  count, sum and max are exact, so the
 * mean and max are exact and a quantile is exact below the last bucket.
 * Plain data: the caller locks. */
#ifndef SHOAL_STALENESS_H
#define SHOAL_STALENESS_H

#include <glib.h>

G_BEGIN_DECLS

#define SHOAL_STALENESS_BUCKETS 64

typedef struct {
  gint64 count;     /* updates recorded */
  gint64 sum;       /* their staleness added up */
  gint64 max;       /* the largest; 0 when count is 0 */
  gint64 buckets[SHOAL_STALENESS_BUCKETS];
} ShoalStaleness;

/* Records one update of staleness `staleness` (negative counts as 0). */
void shoal_staleness_add (ShoalStaleness *h, gint64 staleness);
/* into += h. */
void shoal_staleness_merge (ShoalStaleness *into, const ShoalStaleness *h);
/* The mean; 0 for an empty histogram. */
double shoal_staleness_mean (const ShoalStaleness *h);
/* The smallest staleness q (0 .. 1) of the updates are at or below;
 * 0 for an empty histogram.  In the last bucket: its lower bound, or max
 * when every update above that bound has max's staleness. */
gint64 shoal_staleness_quantile (const ShoalStaleness *h, double q);
/* How many buckets hold something: 1 + the last non-empty bucket's
 * index (0 when empty).  Writers print buckets [0, used). */
int shoal_staleness_used (const ShoalStaleness *h);

G_END_DECLS

#endif
