/* SSP's clocks (ssp.h); the waiting itself is the server's. */
#include "server/ssp.h"

ShoalClocks *
shoal_clocks_new (int units)
{
  g_return_val_if_fail (units >= 1, NULL);
  ShoalClocks *c = g_new0 (ShoalClocks, 1);
  c->units = units;
  c->clock = g_new0 (gint64, units);
  c->dropped = g_new0 (gboolean, units);
  c->unheard = g_new0 (gboolean, units);
  return c;
}

void
shoal_clocks_free (ShoalClocks *c)
{
  if (c == NULL)
    return;
  g_free (c->clock);
  g_free (c->dropped);
  g_free (c->unheard);
  g_free (c);
}

void
shoal_clocks_resume (ShoalClocks *c)
{
  for (int u = 0; u < c->units; u++)
    {
      c->clock[u] = 0;
      c->unheard[u] = TRUE;
    }
}

void
shoal_clocks_advance (ShoalClocks *c, int unit, gint64 step)
{
  g_return_if_fail (unit >= 0 && unit < c->units);
  c->clock[unit] = MAX (c->clock[unit], step + 1);
  c->unheard[unit] = FALSE;
  /* a dropped unit (a rejoined process) counts again once it caught up */
  if (c->dropped[unit] && c->clock[unit] >= shoal_clocks_slowest (c, NULL))
    c->dropped[unit] = FALSE;
}

void
shoal_clocks_drop (ShoalClocks *c, int unit)
{
  g_return_if_fail (unit >= 0 && unit < c->units);
  c->dropped[unit] = TRUE;
}

gboolean
shoal_clocks_dropped (const ShoalClocks *c, int unit)
{
  return unit >= 0 && unit < c->units && c->dropped[unit];
}

gint64
shoal_clocks_slowest (const ShoalClocks *c, int *which)
{
  int slowest = -1;
  for (int u = 0; u < c->units; u++)
    if (!c->dropped[u] && !c->unheard[u] && (slowest < 0 || c->clock[u] < c->clock[slowest]))
      slowest = u;
  if (which != NULL)
    *which = slowest;
  return slowest >= 0 ? c->clock[slowest] : G_MAXINT64;
}

gboolean
shoal_clocks_may_go_on (const ShoalClocks *c, gint64 step, int bound)
{
  return shoal_clocks_slowest (c, NULL) >= step + 1 - bound;
}
