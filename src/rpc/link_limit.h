/* An emulated link: bandwidth and latency enforced by the sender, in
 * shoal's own socket transport (rpc/thrift_socket.c), so a slow network
 * can be emulated on loopback without root ([emulate] bandwidth_mbit and
 * latency_ms; docs/SCHEMES.md, "Emulation").
 *
 * Each socket is one link with its own limiter: a token bucket of
 * `bytes_per_s` that fills up to `burst` bytes, from which every send
 * takes what it sends (large sends go out in pieces of at most `piece`
 * bytes, 1 ms of traffic), plus `latency_us` of delay before the last
 * bytes of every message leave.  An idle link banks no credit, so a
 * message of n bytes on it arrives about n / rate + latency after it
 * was begun, and a request and its reply cost two latencies: the model
 * the virtual clock charges too (emulate/emulator.h, its per-pair
 * links).  Links do not share a NIC
 * here: two sockets of one process each get the full rate (the virtual
 * clock's nic_mbit models a shared NIC; the real transport does not). */
#ifndef SHOAL_LINK_LIMIT_H
#define SHOAL_LINK_LIMIT_H

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  double bytes_per_s;   /* 0: no bandwidth limit */
  gint64 latency_us;    /* added once per message */
} ShoalLinkLimit;

/* The limit of every ShoalThriftSocket this process makes from now on
 * (NULL or all zero: none).  The runner sets it from [emulate] before it
 * opens any connection. */
void shoal_link_limit_set_default (const ShoalLinkLimit *limit);
/* The current default (all zero when none). */
ShoalLinkLimit shoal_link_limit_get_default (void);
/* Mbit/s as bytes/s: 1 Mbit = 10^6 bits. */
double shoal_link_limit_bytes_per_s (double mbit);

/* One link's bucket.  Not thread-safe: a socket is used by one thread at
 * a time. */
typedef struct {
  ShoalLinkLimit limit;
  double burst;         /* bucket size in bytes */
  double piece;         /* the most bytes one send takes */
  double tokens;        /* bytes that may go now; negative: debt */
  gint64 last_us;       /* when tokens were last topped up */
  gboolean idle;        /* no message since the last one ended: the next banks no pause */
  gboolean latency_due; /* the message's last bytes are next: their wait adds the latency */
} ShoalLinkLimiter;

void shoal_link_limiter_init (ShoalLinkLimiter *l, const ShoalLinkLimit *limit, gint64 now_us);
/* The pure rule, for tests with a clock of their own: how many of `want`
 * bytes may go now (at most `piece`, at least 1) and how many
 * microseconds to wait before sending them (*wait_us); the bytes are
 * taken from the bucket as if sent at now_us + *wait_us.  A wait too
 * short to sleep for (under 50 us) is 0 and leaves the bucket in debt. */
gsize shoal_link_limiter_take (ShoalLinkLimiter *l, gsize want, gint64 now_us, gint64 *wait_us);
/* Gives back bytes taken but not sent (a short send). */
void shoal_link_limiter_refund (ShoalLinkLimiter *l, gsize bytes);
/* take() with the monotonic clock, sleeping the wait. */
gsize shoal_link_limiter_grant (ShoalLinkLimiter *l, gsize want);
/* Before the last bytes of a message leave: their wait (the next
 * take or grant) adds the latency; with no bandwidth limit, sleeps it
 * now.  No bytes are credited for the latency's time. */
void shoal_link_limiter_latency (ShoalLinkLimiter *l);
/* After the last bytes of a message left: the link is idle from then on,
 * and the next message's first piece finds no credit, whatever the
 * pause.  Called after the message's last send, not before:
 * marked before, the message's own last bytes (Thrift's few trailing
 * bytes) took the mark, the pause then banked a whole bucket, and every
 * message's first 20 ms of bytes went free (docs/SCALE.md, Validation). */
void shoal_link_limiter_message_end (ShoalLinkLimiter *l);

G_END_DECLS

#endif
