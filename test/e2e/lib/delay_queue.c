/* delay_queue QUEUE MS SECONDS: holds every packet that iptables hands to
 * NFQUEUE QUEUE for MS milliseconds, then lets it go on (NF_ACCEPT), in
 * the order they came; exits after SECONDS (its bound) or on SIGTERM.
 *
 * The nearest real thing to `tc qdisc ... netem delay MS` on a kernel
 * without sch_netem (test/e2e/netns_chaos.sh): the packets are held in
 * the kernel, between the namespace's netfilter hooks, and leave MS later
 * (only their ids cross to this process), so TCP sees the longer round
 * trip, its retransmit timers and its window as over a slow link.
 * Unlike netem it holds every packet the same time (no jitter) and a
 * packet it cannot queue (queue full) is dropped by the kernel: the
 * queue takes 64k packets, far more than a test's window.
 * Hold packets where they arrive (INPUT), not where they leave (OUTPUT):
 * a packet held on its way out still counts against its socket's TCP
 * small queues, and with BBR (this kernel's default) that throttles the
 * sender to a couple of packets per delay - 512 KiB each way took 714 ms
 * at 5 ms held on departure, 50 ms at 20 ms held on arrival (cubic: 45
 * and 44 ms) - a slowdown a wire's latency does not cause.
 * Run it in the namespace whose incoming packets it delays:
 *   iptables -A INPUT -i eth0 -j NFQUEUE --queue-num 0 --queue-bypass
 *   delay_queue 0 20 120 & */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HELD_MAX 65536

typedef struct {
  uint32_t id;
  int64_t due_us;
} Held;

static Held held[HELD_MAX];
static size_t head, count;
static int64_t delay_us;
static volatile sig_atomic_t stop;

static int64_t
now_us (void)
{
  struct timespec t;
  clock_gettime (CLOCK_MONOTONIC, &t);
  return (int64_t) t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

static int
on_packet (struct nfq_q_handle *q, struct nfgenmsg *msg, struct nfq_data *data, void *unused)
{
  (void) msg;
  (void) unused;
  struct nfqnl_msg_packet_hdr *h = nfq_get_msg_packet_hdr (data);
  if (h == NULL)
    return 0;
  uint32_t id = ntohl (h->packet_id);
  if (count == HELD_MAX)   /* cannot hold it: it goes now rather than never */
    return nfq_set_verdict (q, id, NF_ACCEPT, 0, NULL);
  held[(head + count) % HELD_MAX] = (Held) { id, now_us () + delay_us };
  count++;
  return 0;
}

static void
on_signal (int sig)
{
  (void) sig;
  stop = 1;
}

static int
die (const char *what)
{
  fprintf (stderr, "delay_queue: %s: %s\n", what, strerror (errno));
  return 1;
}

int
main (int argc, char **argv)
{
  if (argc != 4)
    {
      fprintf (stderr, "usage: delay_queue QUEUE MS SECONDS\n");
      return 2;
    }
  int queue = atoi (argv[1]);
  delay_us = (int64_t) (atof (argv[2]) * 1000);
  int64_t end_us = now_us () + (int64_t) (atof (argv[3]) * 1e6);
  signal (SIGTERM, on_signal);
  signal (SIGINT, on_signal);

  struct nfq_handle *h = nfq_open ();
  if (h == NULL)
    return die ("nfq_open");
  struct nfq_q_handle *q = nfq_create_queue (h, (uint16_t) queue, on_packet, NULL);
  if (q == NULL)
    return die ("nfq_create_queue");
  if (nfq_set_mode (q, NFQNL_COPY_META, 0) < 0)
    return die ("nfq_set_mode");
  nfq_set_queue_maxlen (q, HELD_MAX);
  nfnl_rcvbufsiz (nfq_nfnlh (h), 16 << 20);
  int fd = nfq_fd (h);
  char buf[65536] __attribute__ ((aligned));
  printf ("delay_queue: holding the packets of queue %d for %s ms\n", queue, argv[2]);
  fflush (stdout);

  while (!stop && now_us () < end_us)
    {
      int64_t now = now_us ();
      while (count > 0 && held[head].due_us <= now)
        {
          nfq_set_verdict (q, held[head].id, NF_ACCEPT, 0, NULL);
          head = (head + 1) % HELD_MAX;
          count--;
        }
      int wait_ms = count > 0 ? (int) ((held[head].due_us - now + 999) / 1000) : 100;
      struct pollfd p = { fd, POLLIN, 0 };
      if (poll (&p, 1, wait_ms) <= 0)
        continue;
      ssize_t n;
      while ((n = recv (fd, buf, sizeof buf, MSG_DONTWAIT)) > 0)
        nfq_handle_packet (h, buf, (int) n);
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ENOBUFS)
        return die ("recv");
    }
  /* let what is still held go, so that nothing waits on this exit */
  for (; count > 0; count--, head = (head + 1) % HELD_MAX)
    nfq_set_verdict (q, held[head].id, NF_ACCEPT, 0, NULL);
  nfq_destroy_queue (q);
  nfq_close (h);
  return 0;
}
