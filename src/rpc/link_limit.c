/* A token bucket per socket and a sleep per message: the simplest
 * limiter that holds a rate over any stretch longer than the bucket and
 * corrects its own oversleeping (time slept past a wait refills the
 * bucket, up to its size, so the next piece goes sooner).  An idle link
 * banks nothing: a real link carries a message's last byte its bytes'
 * time after the first left, whatever the pause before.  With the whole
 * bucket banked between messages a request/reply exchange (each side
 * idle while the other sends) crossed a 1000 Mbit/s link at twice its
 * rate; with one 16 KiB piece banked, a 108 KB message arrived 15 %
 * early (the virtual clock's validation, docs/SCALE.md). */
#include "rpc/link_limit.h"

#include <math.h>
#include <sys/prctl.h>

/* The bucket holds 20 ms of traffic (at least 16 KiB), so a sender
 * descheduled for less than that loses no rate: it catches up from the
 * credit.  It sends in pieces of 1 ms of traffic (at least 16 KiB, so a
 * fast link is not paced in tiny sends), as a real link streams a
 * message: the receiver wakes at its first bytes and copies the rest as
 * they come, where with the whole message sent after one wait its
 * wake-up and copy came after the wire time (a 512 KiB push-and-pull at
 * 1000 Mbit/s took the wire time + 450-460 us in pieces of 20 ms of
 * traffic, + 165-254 us in pieces of 1 ms; + 190 us with no link).  And
 * at most 128 KiB, so that what follows a message's wire time (the last
 * piece's copy) stays small at any rate, as a NIC's copies overlap its
 * wire: at 10 Gbit/s 1 ms was a whole 466 KB slice, written (0.1 ms of
 * copy) only after its wait, and real 1-worker Downpour ran 2,979-3,041
 * samples/s; in pieces of 0.1 ms, 3,414-3,446 (docs/SCALE.md). */
#define MIN_BURST 16384.0
#define BURST_SECONDS 0.02
#define PIECE_SECONDS 0.001
#define PIECE_MAX_BYTES 131072.0
/* A wait shorter than this is not slept: a sleep costs about this much
 * beyond what it asks (the wake-up), so a small message (a reply without
 * values, a heartbeat) goes at once and leaves the link in debt, which
 * the next wait repays: the rate holds, a burst of at most this long
 * goes early. */
#define SLEEP_FLOOR_US 50

static GMutex default_lock;
static ShoalLinkLimit default_limit;

void
shoal_link_limit_set_default (const ShoalLinkLimit *limit)
{
  g_mutex_lock (&default_lock);
  default_limit = limit != NULL ? *limit : (ShoalLinkLimit) { 0, 0 };
  g_mutex_unlock (&default_lock);
}

ShoalLinkLimit
shoal_link_limit_get_default (void)
{
  g_mutex_lock (&default_lock);
  ShoalLinkLimit l = default_limit;
  g_mutex_unlock (&default_lock);
  return l;
}

double
shoal_link_limit_bytes_per_s (double mbit)
{
  return mbit * 1e6 / 8;
}

void
shoal_link_limiter_init (ShoalLinkLimiter *l, const ShoalLinkLimit *limit, gint64 now_us)
{
  l->limit = *limit;
  l->burst = MAX (MIN_BURST, limit->bytes_per_s * BURST_SECONDS);
  l->piece = CLAMP (limit->bytes_per_s * PIECE_SECONDS, MIN_BURST, PIECE_MAX_BYTES);
  l->tokens = 0;
  l->last_us = now_us;
  l->idle = TRUE;
  l->latency_due = FALSE;
}

gsize
shoal_link_limiter_take (ShoalLinkLimiter *l, gsize want, gint64 now_us, gint64 *wait_us)
{
  /* the message's latency, if its last bytes are next: slept with their
   * wait, one wake-up, and not counted as time the link carried bytes */
  gint64 latency = l->latency_due ? l->limit.latency_us : 0;
  l->latency_due = FALSE;
  *wait_us = latency;
  if (l->limit.bytes_per_s <= 0)
    return want;
  double rate = l->limit.bytes_per_s;
  if (now_us > l->last_us)
    {
      l->tokens = MIN (l->burst, l->tokens + (double) (now_us - l->last_us) * rate / 1e6);
      l->last_us = now_us;
    }
  if (l->idle)
    {
      /* a message after a pause: no credit from the pause */
      l->tokens = MIN (l->tokens, 0);
      l->idle = FALSE;
    }
  gsize n = MAX (MIN (want, (gsize) l->piece), 1);
  /* the bucket counts what was sent as sent at last_us: a sleep that
   * ended early (link_sleep asks for its mean lateness less) leaves the
   * sender ahead of it, and the next wait makes that up, so an early
   * wake-up never adds to the next */
  gint64 ahead = l->last_us > now_us ? l->last_us - now_us : 0;
  gint64 wait = 0;
  if (l->tokens < (double) n)
    wait = (gint64) ceil (((double) n - l->tokens) * 1e6 / rate);
  if (latency == 0 && wait + ahead < SLEEP_FLOOR_US)
    wait = ahead = 0;   /* goes now, in debt */
  else
    l->tokens += (double) wait * rate / 1e6;   /* as if sent once the wait is over */
  l->tokens -= (double) n;
  l->last_us = MAX (l->last_us, now_us) + wait + latency;
  *wait_us = ahead + wait + latency;
  return n;
}

void
shoal_link_limiter_refund (ShoalLinkLimiter *l, gsize bytes)
{
  if (l->limit.bytes_per_s > 0)
    l->tokens = MIN (l->burst, l->tokens + (double) bytes);
}

/* Sleeps for an emulated link's wait.  Linux lets a sleep end up to the
 * thread's timer slack late (50 us by default) to batch wake-ups; a
 * message crossing a fast link waits once, and what it overslept is
 * lost with the link's idle mark: at 10 Gbit/s a 512 KiB slice needs
 * 0.42 ms, so 50 us more on each of a step's 30 messages is 1.5 ms a
 * step.  The thread that sleeps for a link (the comm, server or sync
 * thread of a run that emulates links) asks for 1 us of slack instead:
 * a real 1-worker run at 10 Gbit/s was faster with it in 6 of 6
 * interleaved pairs (Sandblaster 1.5-2.5 %, Downpour 8-25 %).  Even so
 * a wake-up comes late by the time the kernel takes to run the thread
 * again (about 50 us on this VM, more under load): each thread keeps
 * a running mean of its lateness and asks for that much less, so its
 * sleeps end on time on average (a 106 KB exchange at 1000 Mbit/s took
 * the wire time + 172 us in one process without it, against 66 us with
 * no link at all). */
static void
link_sleep (gint64 us)
{
  static __thread gboolean tight;
  static __thread double late_us;
  if (!tight)
    {
      prctl (PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
      tight = TRUE;
    }
  gint64 ask = us - (gint64) llround (late_us);
  if (ask <= 0)
    return;
  gint64 t0 = g_get_monotonic_time ();
  g_usleep ((gulong) ask);
  double late = (double) (g_get_monotonic_time () - t0 - ask);
  /* a sleep that ended very late was preempted, not slow to wake: it
   * moves the mean by a bounded step */
  late_us += 0.1 * (CLAMP (late, 0, 2 * late_us + 100) - late_us);
}

gsize
shoal_link_limiter_grant (ShoalLinkLimiter *l, gsize want)
{
  gint64 wait = 0;
  gsize n = shoal_link_limiter_take (l, want, g_get_monotonic_time (), &wait);
  if (wait > 0)
    link_sleep (wait);
  return n;
}

void
shoal_link_limiter_latency (ShoalLinkLimiter *l)
{
  if (l->limit.latency_us <= 0)
    return;
  if (l->limit.bytes_per_s > 0)
    l->latency_due = TRUE;   /* the next piece's wait takes it */
  else
    link_sleep (l->limit.latency_us);
}

void
shoal_link_limiter_message_end (ShoalLinkLimiter *l)
{
  l->idle = TRUE;
}
