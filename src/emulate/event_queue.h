/* The virtual clock's queue of future events (emulate/emulator.c): a
 * binary min-heap ordered by (virtual time, creation number), so that
 * events due at the same instant run in the order they were scheduled
 * and a run never depends on which of two ties the heap met first. */
#ifndef SHOAL_EVENT_QUEUE_H
#define SHOAL_EVENT_QUEUE_H

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  gint64 t;        /* virtual ns */
  guint64 seq;     /* ties: creation order (set by shoal_event_queue_push) */
  int kind;        /* the emulator's event kind */
  int a, b;        /* what the kind says: unit, slice, server group */
  gint64 step;
} ShoalTimedEvent;

typedef struct {
  ShoalTimedEvent *items;  /* owned; free with shoal_event_queue_clear */
  gsize n, cap;
  guint64 next_seq;
} ShoalEventQueue;     /* zero-initialised is empty */

void shoal_event_queue_push (ShoalEventQueue *q, gint64 t, int kind, int a, int b, gint64 step);
/* The earliest event; the queue must not be empty. */
ShoalTimedEvent shoal_event_queue_pop (ShoalEventQueue *q);
gboolean shoal_event_queue_empty (const ShoalEventQueue *q);
/* The earliest event's time; G_MAXINT64 when the queue is empty. */
gint64 shoal_event_queue_next_time (const ShoalEventQueue *q);
void shoal_event_queue_clear (ShoalEventQueue *q);

G_END_DECLS

#endif /* SHOAL_EVENT_QUEUE_H */
