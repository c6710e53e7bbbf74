/* The virtual clock's network (emulate/nic_model.h) on scripted flows:
 * two flows through one NIC each get half; an incast of n pushes into
 * one NIC ends at n x bytes / bandwidth; max-min fairness gives a flow
 * what a bottleneck elsewhere leaves it; rates change when a flow ends;
 * a per-pair link and an oversubscribed core cap what they carry; ties
 * end in begin order.  Times are virtual nanoseconds, exact. */
#include <glib.h>

#include "emulate/nic_model.h"

#define GBIT 125000000.0     /* 1 Gbit/s in bytes/s */
#define MB 1000000ull        /* 1 MB crosses 1 Gbit/s in 8 ms */

static ShoalTimedEvent
tag (int a)
{
  return (ShoalTimedEvent) { .kind = 1, .a = a };
}

/* Pops every flow: each one's tag and end, in end order. */
static int
pop_all (ShoalNicModel *m, int *tags, gint64 *ends, int max)
{
  int n = 0;
  ShoalTimedEvent e;
  while (n < max && shoal_nic_model_pop (m, &e))
    {
      tags[n] = e.a;
      ends[n++] = e.t;
    }
  return n;
}

static void
test_alone (void)
{
  ShoalNicModel *m = shoal_nic_model_new (2, GBIT, 0, 0);
  ShoalTimedEvent t = tag (7);
  shoal_nic_model_start (m, 1000, 0, 1, MB, &t);
  g_assert_cmpint (shoal_nic_model_next_end (m), ==, 1000 + 8000000);
  int tags[2] = { 0 };
  gint64 ends[2] = { 0 };
  g_assert_cmpint (pop_all (m, tags, ends, 2), ==, 1);
  g_assert_cmpint (tags[0], ==, 7);
  g_assert_cmpint (ends[0], ==, 1000 + 8000000);
  g_assert_cmpint (shoal_nic_model_next_end (m), ==, G_MAXINT64);
  shoal_nic_model_free (m);
}

/* Two flows out of one NIC (to two receivers): each gets half. */
static void
test_two_flows_half (void)
{
  ShoalNicModel *m = shoal_nic_model_new (3, GBIT, 0, 0);
  ShoalTimedEvent a = tag (1), b = tag (2);
  shoal_nic_model_start (m, 0, 0, 1, MB, &a);
  shoal_nic_model_start (m, 0, 0, 2, MB, &b);
  int tags[2] = { 0 };
  gint64 ends[2] = { 0 };
  g_assert_cmpint (pop_all (m, tags, ends, 2), ==, 2);
  g_assert_cmpint (ends[0], ==, 16000000);
  g_assert_cmpint (ends[1], ==, 16000000);
  /* a tie ends in begin order */
  g_assert_cmpint (tags[0], ==, 1);
  g_assert_cmpint (tags[1], ==, 2);
  shoal_nic_model_free (m);
}

/* n workers push one message each to a server at once: its in side
 * takes them together, all end at n x bytes / bandwidth. */
static void
test_incast (void)
{
  for (int n = 1; n <= 64; n *= 4)
    {
      ShoalNicModel *m = shoal_nic_model_new (n + 1, GBIT, 0, 0);
      for (int w = 1; w <= n; w++)
        {
          ShoalTimedEvent t = tag (w);
          shoal_nic_model_start (m, 0, w, 0, MB, &t);
        }
      int tags[64] = { 0 };
      gint64 ends[64] = { 0 };
      g_assert_cmpint (pop_all (m, tags, ends, 64), ==, n);
      for (int i = 0; i < n; i++)
        {
          g_assert_cmpint (ends[i], ==, (gint64) n * 8000000);
          g_assert_cmpint (tags[i], ==, i + 1);
        }
      shoal_nic_model_free (m);
    }
}

/* Max-min: three pushes into node 0 get a third each; node 3 also sends
 * to node 4, and its out side gives that flow the two thirds its push
 * leaves. */
static void
test_max_min (void)
{
  ShoalNicModel *m = shoal_nic_model_new (5, GBIT, 0, 0);
  for (int w = 1; w <= 3; w++)
    {
      ShoalTimedEvent t = tag (w);
      shoal_nic_model_start (m, 0, w, 0, MB, &t);
    }
  ShoalTimedEvent side = tag (9);
  shoal_nic_model_start (m, 0, 3, 4, MB, &side);
  int tags[4] = { 0 };
  gint64 ends[4] = { 0 };
  g_assert_cmpint (pop_all (m, tags, ends, 4), ==, 4);
  g_assert_cmpint (tags[0], ==, 9);
  g_assert_cmpint (ends[0], ==, 12000000);   /* 1 MB at 2/3 Gbit/s */
  for (int i = 1; i < 4; i++)
    g_assert_cmpint (ends[i], ==, 24000000);
  shoal_nic_model_free (m);
}

/* When one of two flows sharing a NIC ends, the other takes it all. */
static void
test_rates_follow_ends (void)
{
  ShoalNicModel *m = shoal_nic_model_new (3, GBIT, 0, 0);
  ShoalTimedEvent a = tag (1), b = tag (2);
  shoal_nic_model_start (m, 0, 0, 1, MB, &a);
  shoal_nic_model_start (m, 0, 0, 2, 2 * MB, &b);
  int tags[2] = { 0 };
  gint64 ends[2] = { 0 };
  g_assert_cmpint (pop_all (m, tags, ends, 2), ==, 2);
  g_assert_cmpint (ends[0], ==, 16000000);   /* 1 MB at half */
  g_assert_cmpint (ends[1], ==, 24000000);   /* then the last MB at full */
  /* a flow begun while another crosses: both at half from then on */
  ShoalTimedEvent c = tag (3), d = tag (4);
  shoal_nic_model_start (m, 30000000, 0, 1, MB, &c);
  shoal_nic_model_start (m, 34000000, 0, 2, MB, &d);   /* c has 0.5 MB left */
  g_assert_cmpint (pop_all (m, tags, ends, 2), ==, 2);
  g_assert_cmpint (ends[0], ==, 42000000);   /* 0.5 MB at half */
  g_assert_cmpint (ends[1], ==, 46000000);   /* 0.5 MB at half, 0.5 at full */
  shoal_nic_model_free (m);
}

/* Full duplex: a flow each way between two nodes does not share. */
static void
test_full_duplex (void)
{
  ShoalNicModel *m = shoal_nic_model_new (2, GBIT, 0, 0);
  ShoalTimedEvent a = tag (1), b = tag (2);
  shoal_nic_model_start (m, 0, 0, 1, MB, &a);
  shoal_nic_model_start (m, 0, 1, 0, MB, &b);
  int tags[2] = { 0 };
  gint64 ends[2] = { 0 };
  g_assert_cmpint (pop_all (m, tags, ends, 2), ==, 2);
  g_assert_cmpint (ends[0], ==, 8000000);
  g_assert_cmpint (ends[1], ==, 8000000);
  shoal_nic_model_free (m);
}

/* A per-pair link caps its flows together; an oversubscribed core caps
 * every flow between nodes together. */
static void
test_link_and_core (void)
{
  ShoalNicModel *m = shoal_nic_model_new (4, 0, GBIT, 0);
  g_assert_true (shoal_nic_model_limited (m));
  ShoalTimedEvent a = tag (1), b = tag (2), c = tag (3);
  shoal_nic_model_start (m, 0, 0, 1, MB, &a);
  shoal_nic_model_start (m, 0, 0, 1, MB, &b);   /* the same link: half each */
  shoal_nic_model_start (m, 0, 2, 3, MB, &c);   /* another link: full */
  int tags[3] = { 0 };
  gint64 ends[3] = { 0 };
  g_assert_cmpint (pop_all (m, tags, ends, 3), ==, 3);
  g_assert_cmpint (tags[0], ==, 3);
  g_assert_cmpint (ends[0], ==, 8000000);
  g_assert_cmpint (ends[1], ==, 16000000);
  g_assert_cmpint (ends[2], ==, 16000000);
  shoal_nic_model_free (m);

  /* 10 Gbit/s NICs behind a 1 Gbit/s core: two disjoint pairs get half */
  m = shoal_nic_model_new (4, 10 * GBIT, 0, GBIT);
  shoal_nic_model_start (m, 0, 0, 1, MB, &a);
  shoal_nic_model_start (m, 0, 2, 3, MB, &b);
  g_assert_cmpint (pop_all (m, tags, ends, 2), ==, 2);
  g_assert_cmpint (ends[0], ==, 16000000);
  g_assert_cmpint (ends[1], ==, 16000000);
  shoal_nic_model_free (m);
}

/* A node with a NIC of its own (a server's faster one). */
static void
test_own_nic (void)
{
  ShoalNicModel *m = shoal_nic_model_new (3, GBIT, 0, 0);
  shoal_nic_model_set_nic (m, 0, 2 * GBIT, 2 * GBIT);
  ShoalTimedEvent a = tag (1), b = tag (2);
  shoal_nic_model_start (m, 0, 1, 0, MB, &a);
  shoal_nic_model_start (m, 0, 2, 0, MB, &b);
  int tags[2] = { 0 };
  gint64 ends[2] = { 0 };
  g_assert_cmpint (pop_all (m, tags, ends, 2), ==, 2);
  g_assert_cmpint (ends[0], ==, 8000000);   /* each sender's own 1 Gbit/s */
  g_assert_cmpint (ends[1], ==, 8000000);
  shoal_nic_model_free (m);
  m = shoal_nic_model_new (3, 0, 0, 0);
  g_assert_false (shoal_nic_model_limited (m));
  shoal_nic_model_free (m);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/nic-model/alone", test_alone);
  g_test_add_func ("/nic-model/two-flows-half", test_two_flows_half);
  g_test_add_func ("/nic-model/incast", test_incast);
  g_test_add_func ("/nic-model/max-min", test_max_min);
  g_test_add_func ("/nic-model/rates-follow-ends", test_rates_follow_ends);
  g_test_add_func ("/nic-model/full-duplex", test_full_duplex);
  g_test_add_func ("/nic-model/link-and-core", test_link_and_core);
  g_test_add_func ("/nic-model/own-nic", test_own_nic);
  return g_test_run ();
}
