/* marks: threads (they start threads: TSan runs this file in `make SANITIZE=thread test-threads`) */
/* The consistency rules beyond SINGA's, on the server in-process with
 * scripted pushes (no real time involved): staleness recorded exactly,
 * SSP's bound under a random schedule of fake group clocks, backup
 * workers' late gradients dropped and counted, the lr divided by the
 * staleness (async_lr = staleness); and the staleness histogram itself. */
#include <glib.h>
#include <string.h>

#include "core/error.h"
#include "server/server.h"
#include "server/ssp.h"
#include "server/staleness.h"

/* One param of 32 floats, all 1, in one slice. */
static ShoalParamStore *
make_layout (void)
{
  ShoalParamStore *store = shoal_param_store_new ();
  ShoalInitSpec init = { .kind = SHOAL_INIT_CONSTANT };
  ShoalShape a = shoal_shape_make (1, 32);
  shoal_param_store_declare (store, "w", &a, &init, 10, 10, 1, 1);
  g_assert_true (shoal_param_store_allocate (store, NULL));
  for (size_t i = 0; i < store->total; i++)
    store->values[i] = 1;
  return store;
}

static ShoalUpdaterConf
plain_sgd (float lr)
{
  ShoalUpdaterConf u;
  shoal_updater_conf_defaults (&u, SHOAL_UPDATER_SGD);
  u.schedule.lr = lr;
  return u;
}

static void
test_histogram (void)
{
  ShoalStaleness h = { 0 };
  g_assert_cmpint (shoal_staleness_quantile (&h, 0.95), ==, 0);
  g_assert_cmpfloat (shoal_staleness_mean (&h), ==, 0);
  g_assert_cmpint (shoal_staleness_used (&h), ==, 0);
  /* 0 x10, 1 x5, 2 x4, 7 x1: 20 updates */
  for (int i = 0; i < 10; i++)
    shoal_staleness_add (&h, 0);
  for (int i = 0; i < 5; i++)
    shoal_staleness_add (&h, 1);
  for (int i = 0; i < 4; i++)
    shoal_staleness_add (&h, 2);
  shoal_staleness_add (&h, 7);
  g_assert_cmpint (h.count, ==, 20);
  g_assert_cmpint (h.max, ==, 7);
  g_assert_cmpfloat_with_epsilon (shoal_staleness_mean (&h), (5 + 8 + 7) / 20.0, 1e-12);
  g_assert_cmpint (shoal_staleness_quantile (&h, 0.5), ==, 0);   /* rank 10 */
  g_assert_cmpint (shoal_staleness_quantile (&h, 0.75), ==, 1);  /* rank 15 */
  g_assert_cmpint (shoal_staleness_quantile (&h, 0.95), ==, 2);  /* rank 19 */
  g_assert_cmpint (shoal_staleness_quantile (&h, 1.0), ==, 7);
  g_assert_cmpint (shoal_staleness_used (&h), ==, 8);
  /* beyond the last bucket: the bucket's bound, and max exactly */
  ShoalStaleness big = { 0 };
  shoal_staleness_add (&big, 1000);
  shoal_staleness_add (&big, -3);   /* counts as 0 */
  g_assert_cmpint (big.buckets[SHOAL_STALENESS_BUCKETS - 1], ==, 1);
  g_assert_cmpint (big.buckets[0], ==, 1);
  g_assert_cmpint (shoal_staleness_quantile (&big, 1.0), ==, 1000);
  shoal_staleness_merge (&h, &big);
  g_assert_cmpint (h.count, ==, 22);
  g_assert_cmpint (h.max, ==, 1000);
  g_assert_cmpint (shoal_staleness_used (&h), ==, SHOAL_STALENESS_BUCKETS);
}

static void
push (ShoalServer *server, gint64 step, gint64 base, int unit, float value, gint64 *ready)
{
  float g[32];
  for (int i = 0; i < 32; i++)
    g[i] = value;
  ShoalPushOrigin origin = { base, unit };
  GError *error = NULL;
  g_assert_true (shoal_server_push_from (server, 0, g, 32, step, &origin, ready, &error));
  g_assert_no_error (error);
}

/* Two asynchronous units and a scripted order of pushes: the server
 * records staleness = its version at the push - the push's base version. */
static void
test_staleness_scripted (void)
{
  ShoalParamStore *layout = make_layout ();
  ShoalUpdaterConf u = plain_sgd (0.1f);
  ShoalServerOptions o = { .mode = SHOAL_UPDATE_ASYNC, .nslices = 1 };
  ShoalServer *server = shoal_server_new (layout, &u, &o, NULL);
  shoal_server_host_all (server);
  gint64 ready = -1;
  /* (base version, expected staleness): the version goes 0, 1, 2, ... */
  const struct { gint64 base; gint64 staleness; } script[] = {
    { 0, 0 },   /* A on version 0 at version 0 */
    { 0, 1 },   /* B also computed on version 0: one update (A's) in between */
    { 1, 1 },   /* A fetched version 1, two updates made it 2 */
    { 3, 0 },   /* B fetched the newest */
    { 1, 3 },   /* A did not fetch (n_fetch > 1): three behind */
    { 5, 0 },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (script); i++)
    {
      push (server, (gint64) i, script[i].base, (int) (i % 2), 1, &ready);
      g_assert_cmpint (ready, ==, (gint64) i + 1);   /* ASYNC: the version the push made */
    }
  /* a push without a base version (an old client) is applied, not recorded */
  push (server, 6, -1, 0, 1, &ready);
  ShoalStaleness h;
  shoal_server_take_staleness (server, &h);
  g_assert_cmpint (h.count, ==, G_N_ELEMENTS (script));
  g_assert_cmpint (h.sum, ==, 0 + 1 + 1 + 0 + 3 + 0);
  g_assert_cmpint (h.max, ==, 3);
  g_assert_cmpint (h.buckets[0], ==, 3);
  g_assert_cmpint (h.buckets[1], ==, 2);
  g_assert_cmpint (h.buckets[2], ==, 0);
  g_assert_cmpint (h.buckets[3], ==, 1);
  /* taken: the next take starts empty */
  shoal_server_take_staleness (server, &h);
  g_assert_cmpint (h.count, ==, 0);
  /* SYNC: every accepted gradient was computed on the step's values */
  ShoalServerOptions so = { .mode = SHOAL_UPDATE_SYNC, .sync_contributors = 2, .nslices = 1 };
  ShoalServer *sync = shoal_server_new (layout, &u, &so, NULL);
  shoal_server_host_all (sync);
  for (gint64 step = 0; step < 3; step++)
    for (int w = 0; w < 2; w++)
      {
        push (sync, step, step, w, 1, &ready);
        g_assert_cmpint (ready, ==, step + 1);
      }
  shoal_server_take_staleness (sync, &h);
  g_assert_cmpint (h.count, ==, 6);
  g_assert_cmpint (h.max, ==, 0);
  shoal_server_free (sync);
  shoal_server_free (server);
  shoal_param_store_free (layout);
}

/* async_lr = staleness: an update of staleness s moves the values by
 * lr * g / max (s, 1). */
static void
test_lr_by_staleness (void)
{
  ShoalParamStore *layout = make_layout ();
  ShoalUpdaterConf u = plain_sgd (0.5f);
  ShoalServerOptions o = { .mode = SHOAL_UPDATE_ASYNC, .nslices = 1, .lr_by_staleness = TRUE };
  ShoalServer *server = shoal_server_new (layout, &u, &o, NULL);
  shoal_server_host_all (server);
  float *v = shoal_server_values (server);
  push (server, 0, 0, 0, 1, NULL);          /* staleness 0: lr / 1 */
  g_assert_cmpfloat_with_epsilon (v[0], 1 - 0.5f, 1e-6);
  push (server, 0, 1, 1, 1, NULL);          /* staleness 0 */
  g_assert_cmpfloat_with_epsilon (v[0], 1 - 1.0f, 1e-6);
  push (server, 1, 0, 0, 1, NULL);          /* at version 2, computed on 0: lr / 2 */
  g_assert_cmpfloat_with_epsilon (v[0], 1 - 1.25f, 1e-6);
  push (server, 1, 0, 1, 4, NULL);          /* staleness 3: 0.5 * 4 / 3 */
  g_assert_cmpfloat_with_epsilon (v[0], 1 - 1.25f - 2.0f / 3, 1e-6);
  shoal_server_free (server);
  shoal_param_store_free (layout);
}

/* SSP with fake clocks: units push their steps in a random order (seeded);
 * a unit begins its next step only when the server lets it
 * (shoal_server_wait_bound with no wait).  Checked at every move: no unit
 * ever begins a step more than s steps ahead of the slowest unit's clock,
 * the slowest always may go on (no deadlock), and a unit is held back
 * exactly when the rule says so. */
static void
run_ssp_script (int units, int bound, guint32 seed)
{
  ShoalParamStore *layout = make_layout ();
  ShoalUpdaterConf u = plain_sgd (0.01f);
  ShoalServerOptions o = { .mode = SHOAL_UPDATE_ASYNC, .nslices = 1, .ssp_units = units,
                           .ssp_bound = bound };
  ShoalServer *server = shoal_server_new (layout, &u, &o, NULL);
  shoal_server_host_all (server);
  GRand *rand = g_rand_new_with_seed (seed);
  gint64 *next = g_new0 (gint64, units);     /* the step each unit is in */
  gboolean *held = g_new0 (gboolean, units); /* pushed next - 1, not yet let go */
  gint64 pushes = 0, holds = 0, max_lead = 0;
  const gint64 steps = 40;

  for (int move = 0; move < 4000; move++)
    {
      int w = g_rand_int_range (rand, 0, units);
      GError *error = NULL;
      if (held[w])
        {
          /* may w begin step next[w]?  The rule: every clock >= next[w] - s */
          gint64 min_clock = G_MAXINT64;
          for (int i = 0; i < units; i++)
            min_clock = MIN (min_clock, next[i]);
          gboolean expect = min_clock >= next[w] - bound;
          gboolean go = shoal_server_wait_bound (server, 0, w, next[w] - 1, 0, &error);
          g_assert_cmpint (go, ==, expect);
          if (go)
            {
              g_assert_no_error (error);
              held[w] = FALSE;
              max_lead = MAX (max_lead, next[w] - min_clock);
            }
          else
            {
              g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_TIMEOUT);
              g_assert_nonnull (strstr (error->message, "SSP"));
              g_clear_error (&error);
              holds++;
            }
        }
      else if (next[w] < steps)
        {
          push (server, next[w], -1, w, 0, NULL);
          next[w]++;
          held[w] = TRUE;
          pushes++;
        }
      /* the bound: a running unit is at most s steps past the slowest clock */
      gint64 min_clock = G_MAXINT64;
      for (int i = 0; i < units; i++)
        min_clock = MIN (min_clock, next[i]);
      for (int i = 0; i < units; i++)
        if (!held[i])
          g_assert_cmpint (next[i] - min_clock, <=, bound);
    }
  /* the slowest unit is never held: everyone got to the end */
  for (int i = 0; i < units; i++)
    {
      g_assert_cmpint (next[i], ==, steps);
      GError *error = NULL;
      g_assert_true (shoal_server_wait_bound (server, 0, i, steps - 1, 0, &error));
    }
  g_assert_cmpint (max_lead, ==, bound);   /* the random schedule pushed against the bound */
  g_assert_cmpint (holds, >, 0);
  g_assert_cmpint (pushes, ==, units * steps);
  g_free (next);
  g_free (held);
  g_rand_free (rand);
  shoal_server_free (server);
  shoal_param_store_free (layout);
}

static void
test_ssp_bound (void)
{
  run_ssp_script (2, 0, 1);
  run_ssp_script (2, 2, 2);
  run_ssp_script (3, 1, 3);
  run_ssp_script (4, 3, 4);
}

typedef struct {
  ShoalServer *server;
  gboolean ok;
} Waiter;

static gpointer
wait_thread (gpointer data)
{
  Waiter *w = data;
  GError *error = NULL;
  /* unit 0 pushed step 3 under s = 1: it waits for unit 1 to push step 2 */
  w->ok = shoal_server_wait_bound (w->server, 0, 0, 3, 30 * G_USEC_PER_SEC, &error);
  g_assert_no_error (error);
  return NULL;
}

/* A held unit is woken by the slow unit's push, and the clocks and
 * errors name what waits for what. */
static void
test_ssp_wakes (void)
{
  ShoalParamStore *layout = make_layout ();
  ShoalUpdaterConf u = plain_sgd (0.01f);
  ShoalServerOptions o = { .mode = SHOAL_UPDATE_ASYNC, .nslices = 1, .ssp_units = 2, .ssp_bound = 1 };
  ShoalServer *server = shoal_server_new (layout, &u, &o, NULL);
  shoal_server_host_all (server);
  for (gint64 step = 0; step < 4; step++)
    push (server, step, -1, 0, 0, NULL);
  push (server, 0, -1, 1, 0, NULL);
  push (server, 1, -1, 1, 0, NULL);
  GError *error = NULL;
  g_assert_false (shoal_server_wait_bound (server, 0, 0, 3, 1000, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_TIMEOUT);
  g_assert_nonnull (strstr (error->message, "waits (SSP, staleness 1) for unit 1"));
  g_clear_error (&error);
  Waiter w = { server, FALSE };
  GThread *t = g_thread_new ("waiter", wait_thread, &w);
  push (server, 2, -1, 1, 0, NULL);   /* unit 1's clock 3: 3 >= 3 + 1 - 1 */
  g_thread_join (t);
  g_assert_true (w.ok);
  /* a unit the server does not bound is refused */
  float g[32] = { 0 };
  ShoalPushOrigin bad = { -1, 2 };
  g_assert_false (shoal_server_push_from (server, 0, g, 32, 0, &bad, NULL, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC);
  g_assert_nonnull (strstr (error->message, "unit 2 is not one of the 2 units"));
  g_clear_error (&error);
  /* no SSP: never a wait */
  ShoalServerOptions plain = { .mode = SHOAL_UPDATE_ASYNC, .nslices = 1 };
  ShoalServer *free_running = shoal_server_new (layout, &u, &plain, NULL);
  shoal_server_host_all (free_running);
  g_assert_true (shoal_server_wait_bound (free_running, 0, 0, 1000, 0, &error));
  shoal_server_free (free_running);
  shoal_clocks_free (NULL);
  shoal_server_free (server);
  shoal_param_store_free (layout);
}

/* Sandblaster with backup workers: k = 3, b = 1.  The first two gradients
 * of a step make the update (their mean); the third comes late and is
 * dropped, counted, and answered with the current version at once. */
static void
test_backup_drops_late (void)
{
  ShoalParamStore *layout = make_layout ();
  ShoalUpdaterConf u = plain_sgd (1.0f);
  ShoalServerOptions o = { .mode = SHOAL_UPDATE_SYNC, .sync_contributors = 3, .backup_workers = 1,
                           .nslices = 1 };
  ShoalServer *server = shoal_server_new (layout, &u, &o, NULL);
  shoal_server_host_all (server);
  float *v = shoal_server_values (server);
  gint64 ready = -1;
  ShoalServerStats st;

  push (server, 0, 0, -1, 0.25f, &ready);   /* A */
  g_assert_cmpint (ready, ==, 1);
  g_assert_cmpint (shoal_server_slice_version (server, 0), ==, 0);
  push (server, 0, 0, -1, 0.75f, &ready);   /* B: the update, mean 0.5 */
  g_assert_cmpint (ready, ==, 1);
  g_assert_cmpint (shoal_server_slice_version (server, 0), ==, 1);
  g_assert_cmpfloat_with_epsilon (v[0], 0.5f, 1e-6);
  shoal_server_stats (server, &st);
  g_assert_cmpint (st.dropped, ==, 0);

  push (server, 0, 0, -1, 100, &ready);     /* C, late: dropped */
  g_assert_cmpint (ready, ==, 1);           /* go on from version 1 at once */
  g_assert_cmpfloat_with_epsilon (v[0], 0.5f, 1e-6);
  shoal_server_stats (server, &st);
  g_assert_cmpint (st.dropped, ==, 1);
  g_assert_cmpint (st.updates, ==, 1);
  /* a pull for the version it was told is there at once */
  GError *error = NULL;
  gint64 version = -1;
  g_assert_true (shoal_server_pull (server, 0, NULL, 32, ready, 0, &version, &error));
  g_assert_cmpint (version, ==, 1);

  /* step 1: C is on time now and counts; A is the late one */
  push (server, 1, 1, -1, 0.5f, &ready);    /* C */
  push (server, 1, 1, -1, 0.5f, &ready);    /* B */
  g_assert_cmpint (shoal_server_slice_version (server, 0), ==, 2);
  g_assert_cmpfloat_with_epsilon (v[0], 0.0f, 1e-6);
  /* two steps behind: still dropped, told version 2 */
  push (server, 0, 0, -1, 9, &ready);
  g_assert_cmpint (ready, ==, 2);
  shoal_server_stats (server, &st);
  g_assert_cmpint (st.dropped, ==, 2);
  /* ahead of the step being aggregated is still out of turn */
  float g[32] = { 0 };
  g_assert_false (shoal_server_push (server, 0, g, 32, 5, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC);
  g_clear_error (&error);
  /* only applied gradients have a staleness */
  ShoalStaleness h;
  shoal_server_take_staleness (server, &h);
  g_assert_cmpint (h.count, ==, 4);
  g_assert_cmpint (h.max, ==, 0);

  /* without backup workers a late gradient stays an error */
  ShoalServerOptions strict = { .mode = SHOAL_UPDATE_SYNC, .sync_contributors = 2, .nslices = 1 };
  ShoalServer *bsp = shoal_server_new (layout, &u, &strict, NULL);
  shoal_server_host_all (bsp);
  push (bsp, 0, 0, -1, 1, NULL);
  push (bsp, 0, 0, -1, 1, NULL);
  g_assert_false (shoal_server_push (bsp, 0, g, 32, 0, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC);
  g_clear_error (&error);
  shoal_server_free (bsp);
  shoal_server_free (server);
  shoal_param_store_free (layout);
}

/* A resumed SSP job (issue 23): its units come back each at its own stop
 * step, here 656 and 659 with bound 2 (a unit that said done stopped
 * holding the other).  No unit waits for one not heard from since the
 * resume, and once both pushed the bound holds again: the one ahead
 * waits for the slowest, which never waits.  (Clocks left at 0 made both
 * wait for ever.) */
static void
test_ssp_resume (void)
{
  ShoalClocks *c = shoal_clocks_new (2);
  shoal_clocks_advance (c, 0, 700);
  shoal_clocks_advance (c, 1, 701);
  shoal_clocks_resume (c);
  shoal_clocks_advance (c, 1, 659);
  g_assert_true (shoal_clocks_may_go_on (c, 659, 2));   /* unit 0 not heard yet */
  shoal_clocks_advance (c, 0, 656);
  g_assert_true (shoal_clocks_may_go_on (c, 656, 2));   /* the slowest goes on */
  g_assert_false (shoal_clocks_may_go_on (c, 659, 2));  /* 3 ahead: waits */
  shoal_clocks_advance (c, 0, 657);
  g_assert_true (shoal_clocks_may_go_on (c, 659, 2));
  shoal_clocks_free (c);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/consistency/staleness-histogram", test_histogram);
  g_test_add_func ("/consistency/staleness-scripted", test_staleness_scripted);
  g_test_add_func ("/consistency/lr-by-staleness", test_lr_by_staleness);
  g_test_add_func ("/consistency/ssp-bound", test_ssp_bound);
  g_test_add_func ("/consistency/ssp-wakes", test_ssp_wakes);
  g_test_add_func ("/consistency/ssp-resume", test_ssp_resume);
  g_test_add_func ("/consistency/backup-drops-late", test_backup_drops_late);
  return g_test_run ();
}
