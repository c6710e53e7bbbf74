/* The staleness histogram of server.h, and the summaries metrics.jsonl
 * and `shoal compare` print from it. */
#include "server/staleness.h"

#include <math.h>

void
shoal_staleness_add (ShoalStaleness *h, gint64 staleness)
{
  gint64 s = MAX (staleness, 0);
  h->count++;
  h->sum += s;
  h->max = MAX (h->max, s);
  h->buckets[MIN (s, (gint64) SHOAL_STALENESS_BUCKETS - 1)]++;
}

void
shoal_staleness_merge (ShoalStaleness *into, const ShoalStaleness *h)
{
  into->count += h->count;
  into->sum += h->sum;
  into->max = MAX (into->max, h->max);
  for (int i = 0; i < SHOAL_STALENESS_BUCKETS; i++)
    into->buckets[i] += h->buckets[i];
}

double
shoal_staleness_mean (const ShoalStaleness *h)
{
  return h->count > 0 ? (double) h->sum / (double) h->count : 0;
}

gint64
shoal_staleness_quantile (const ShoalStaleness *h, double q)
{
  if (h->count == 0)
    return 0;
  /* the rank of the update asked for, 1-based: ceil (q * count), at least 1 */
  gint64 rank = (gint64) ceil (CLAMP (q, 0.0, 1.0) * (double) h->count);
  rank = MAX (rank, 1);
  gint64 seen = 0;
  for (int i = 0; i < SHOAL_STALENESS_BUCKETS - 1; i++)
    {
      seen += h->buckets[i];
      if (seen >= rank)
        return i;
    }
  /* in the open last bucket: only its top, max, is known exactly */
  return rank == h->count ? h->max : SHOAL_STALENESS_BUCKETS - 1;
}

int
shoal_staleness_used (const ShoalStaleness *h)
{
  for (int i = SHOAL_STALENESS_BUCKETS - 1; i >= 0; i--)
    if (h->buckets[i] != 0)
      return i + 1;
  return 0;
}
