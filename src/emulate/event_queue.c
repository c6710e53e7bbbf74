/* The emulator's event queue; see emulate/event_queue.h.  A hand-written
 * heap rather than GSequence: the queue holds one or two events per unit
 * and slice, pushed and popped millions of times in a long emulation,
 * and a flat array does that without an allocation per event. */
#include "emulate/event_queue.h"

static gboolean
before (const ShoalTimedEvent *x, const ShoalTimedEvent *y)
{
  return x->t < y->t || (x->t == y->t && x->seq < y->seq);
}

void
shoal_event_queue_push (ShoalEventQueue *q, gint64 t, int kind, int a, int b, gint64 step)
{
  ShoalTimedEvent e = { t, q->next_seq++, kind, a, b, step };
  if (q->n == q->cap)
    {
      q->cap = MAX (q->cap * 2, 64);
      q->items = g_renew (ShoalTimedEvent, q->items, q->cap);
    }
  gsize i = q->n++;
  while (i > 0 && before (&e, &q->items[(i - 1) / 2]))
    {
      q->items[i] = q->items[(i - 1) / 2];
      i = (i - 1) / 2;
    }
  q->items[i] = e;
}

ShoalTimedEvent
shoal_event_queue_pop (ShoalEventQueue *q)
{
  g_assert (q->n > 0);
  ShoalTimedEvent top = q->items[0], last = q->items[--q->n];
  gsize i = 0;
  for (;;)
    {
      gsize l = 2 * i + 1, r = l + 1, m = i;
      const ShoalTimedEvent *best = &last;
      if (l < q->n && before (&q->items[l], best))
        {
          m = l;
          best = &q->items[l];
        }
      if (r < q->n && before (&q->items[r], best))
        m = r;
      if (m == i)
        break;
      q->items[i] = q->items[m];
      i = m;
    }
  if (q->n > 0)
    q->items[i] = last;
  return top;
}

gboolean
shoal_event_queue_empty (const ShoalEventQueue *q)
{
  return q->n == 0;
}

gint64
shoal_event_queue_next_time (const ShoalEventQueue *q)
{
  return q->n > 0 ? q->items[0].t : G_MAXINT64;
}

void
shoal_event_queue_clear (ShoalEventQueue *q)
{
  g_free (q->items);
  *q = (ShoalEventQueue) { 0 };
}
