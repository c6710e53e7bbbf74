/* marks: threads (they start threads: TSan runs this file in `make SANITIZE=thread test-threads`) */
/* Statistics in the param store (core/param_statistics.c): batchnorm's
 * running mean and variance lie past `served`, so servers slice only the
 * trained params, a pull never overwrites what a unit computed, and a
 * unit's checkpoint state carries them (issue 12, item 12). */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "comm/param_client.h"
#include "core/error.h"
#include "net/net.h"
#include "partition/partition.h"

#define BN_NET \
  "[job]\nname = bn\n[updater]\ntype = sgd\nlr_list = 0.1\n" \
  "[layer in]\ntype = feed\nshape = 16, 6\nnum_classes = 3\n" \
  "[layer fc1]\ntype = dense\nsrc = in\nnum_output = 8\n" \
  "[layer bn1]\ntype = batchnorm\nsrc = fc1\n" \
  "[layer fc2]\ntype = dense\nsrc = bn1\nnum_output = 3\n" \
  "[layer loss]\ntype = softmax_loss\nsrc = fc2, in\n"

static ShoalConf *
bn_conf (void)
{
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data (BN_NET, "bn.conf", &error);
  g_assert_no_error (error);
  return conf;
}

static void
feed_rows (ShoalNet *net, guint32 seed, int rows)
{
  GRand *rand = g_rand_new_with_seed (seed);
  float x[16 * 6], y[16];
  for (int i = 0; i < 16 * 6; i++)
    x[i] = (float) g_rand_double_range (rand, -1, 3);
  for (int i = 0; i < 16; i++)
    y[i] = (float) g_rand_int_range (rand, 0, 3);
  g_rand_free (rand);
  GError *error = NULL;
  gboolean ok = shoal_net_feed (net, "in", x, rows, y, &error);
  g_assert_no_error (error);
  g_assert_true (ok);
}

static void
feed (ShoalNet *net, guint32 seed)
{
  feed_rows (net, seed, 16);
}

/* The statistics come last, after every trained param, whatever the
 * declaration order; `served` ends before them. */
static void
test_placement (void)
{
  ShoalParamStore *store = shoal_param_store_new ();
  ShoalInitSpec init = { .kind = SHOAL_INIT_CONSTANT, .value = 1 };
  ShoalShape shape = shoal_shape_make (1, 20);
  ShoalParam *a = shoal_param_store_declare (store, "a/w", &shape, &init, 1, 1, 1, 1);
  ShoalParam *s = shoal_param_store_declare (store, "a/mean", &shape, &init, 1, 1, 0, 0);
  ShoalParam *b = shoal_param_store_declare (store, "b/w", &shape, &init, 1, 1, 1, 1);
  s->statistic = TRUE;
  g_assert_true (shoal_param_store_allocate (store, NULL));
  g_assert_cmpuint (a->offset, ==, 0);
  g_assert_cmpuint (b->offset, ==, 32);
  g_assert_cmpuint (store->served, ==, 64);
  g_assert_cmpuint (s->offset, ==, 64);
  g_assert_cmpuint (store->total, ==, 96);
  g_assert_cmpuint (shoal_param_store_n_statistics (store), ==, 1);
  shoal_param_store_free (store);

  /* batchnorm declares its running statistics as such */
  ShoalConf *conf = bn_conf ();
  ShoalNetOptions opts = { .seed = 1, .shard_count = 1 };
  GError *error = NULL;
  ShoalNet *net = shoal_net_new (conf, &opts, &error);
  g_assert_no_error (error);
  ShoalParamStore *ps = shoal_net_params (net);
  g_assert_true (shoal_param_is_statistic (shoal_param_store_find (ps, "bn1/mean")));
  g_assert_true (shoal_param_is_statistic (shoal_param_store_find (ps, "bn1/var")));
  g_assert_false (shoal_param_is_statistic (shoal_param_store_find (ps, "bn1/scale")));
  g_assert_cmpuint (shoal_param_store_find (ps, "bn1/mean")->offset, >=, ps->served);
  g_assert_cmpuint (shoal_param_store_find (ps, "fc2/bias")->offset, <, ps->served);
  /* a layer's range (what its completion pushes) leaves them out */
  size_t begin, end;
  g_assert_true (shoal_layer_param_range (shoal_net_find (net, "bn1"), &begin, &end));
  g_assert_cmpuint (end, <=, ps->served);
  shoal_net_free (net);
  shoal_conf_free (conf);
}

/* A worker trains against a server of its own layout (a store that does
 * not borrow the server's values: every scheme but one process and one
 * worker): the pulls bring the trained params back and leave the
 * statistics as its forward wrote them; the server's slices end before
 * them.  The statistics once lay in a slice, and each pull put back the
 * server's copy, which nothing updated: the initial 0 and 1. */
static void
test_pull_keeps_statistics (void)
{
  ShoalConf *conf = bn_conf ();
  ShoalNetOptions opts = { .seed = 1, .shard_count = 1 };
  GError *error = NULL;
  ShoalNet *net = shoal_net_new (conf, &opts, &error), *layout = shoal_net_new (conf, &opts, &error);
  g_assert_no_error (error);
  ShoalParamStore *store = shoal_net_params (net), *lstore = shoal_net_params (layout);
  shoal_param_store_init_values (store, 1);
  shoal_param_store_init_values (lstore, 1);
  ShoalUpdaterConf u;
  shoal_updater_conf_defaults (&u, SHOAL_UPDATER_SGD);
  u.schedule.lr = 0.1f;
  ShoalServerOptions o = { .mode = SHOAL_UPDATE_SYNC, .sync_contributors = 1, .nslices = 2 };
  ShoalServer *server = shoal_server_new (lstore, &u, &o, &error);
  g_assert_no_error (error);
  shoal_server_host_all (server);
  size_t b, e;
  shoal_server_slice_range (server, 1, &b, &e);
  g_assert_cmpuint (e, ==, store->served);
  ShoalParamClient *c = shoal_param_client_new (store, 2, SHOAL_UPDATE_SYNC);
  g_assert_no_error (error);
  for (int s = 0; s < 2; s++)
    shoal_param_client_route_local (c, s, server);
  g_assert_true (shoal_param_client_start (c, &error));

  ShoalParam *mean = shoal_param_store_find (store, "bn1/mean"), *var = shoal_param_store_find (store, "bn1/var");
  ShoalParam *w = shoal_param_store_find (store, "fc1/weight");
  float written[16], before_w = w->value.data[0];
  for (gint64 step = 0; step < 3; step++)
    {
      feed (net, (guint32) step + 1);
      shoal_net_forward (net, SHOAL_PHASE_TRAIN);
      memcpy (written, mean->value.data, 8 * sizeof (float));
      memcpy (written + 8, var->value.data, 8 * sizeof (float));
      shoal_net_backward (net);
      shoal_param_client_step_done (c, step);
      g_assert_true (shoal_param_client_wait (c, &error));
      g_assert_no_error (error);
      /* the pull changed the trained params, not the statistics */
      g_assert_cmpmem (mean->value.data, 8 * sizeof (float), written, 8 * sizeof (float));
      g_assert_cmpmem (var->value.data, 8 * sizeof (float), written + 8, 8 * sizeof (float));
    }
  g_assert_cmpfloat (w->value.data[0], !=, before_w);
  /* moved from the initial 0 (inputs have mean 1) */
  g_assert_cmpfloat (fabsf (mean->value.data[0]) + fabsf (mean->value.data[1]), >, 1e-3);
  /* the server's copy of them is the initial one: it never holds them */
  const float *sv = shoal_server_values (server);
  g_assert_cmpfloat (sv[mean->offset], ==, 0);
  g_assert_cmpfloat (sv[var->offset], ==, 1);

  shoal_param_client_free (c);
  shoal_server_free (server);
  shoal_net_free (net);
  shoal_net_free (layout);
  shoal_conf_free (conf);
}

/* A unit's checkpoint state carries its statistics: a group (k = 2, bn1
 * split by feature, each worker writing its channels) saved after a
 * train step and loaded into a fresh one gives the fresh one the same
 * statistics, and their test forwards the same loss. */
static void
test_state_carries_statistics (void)
{
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data (BN_NET, "bn.conf", &error);
  g_assert_no_error (error);
  g_key_file_set_integer (shoal_conf_keyfile (conf), "layer fc1", "partition_dim", 1);
  g_key_file_set_integer (shoal_conf_keyfile (conf), "layer bn1", "partition_dim", 1);
  ShoalNetOptions opts = { .seed = 1, .shard_count = 1 };
  ShoalGroupNet *g = shoal_group_net_new (conf, 2, &opts, &error), *h = shoal_group_net_new (conf, 2, &opts, &error);
  g_assert_no_error (error);
  shoal_param_store_init_values (shoal_group_net_params (g), 1);
  shoal_param_store_init_values (shoal_group_net_params (h), 1);
  /* the input is whole on worker 0 (bn1's feature split needs fc1's whole input) */
  feed (shoal_group_net_worker (g, 0), 7);
  shoal_group_net_forward (g, SHOAL_PHASE_TRAIN);
  GBytes *state = shoal_group_net_save_state (g, &error);
  g_assert_no_error (error);
  ShoalParamStore *gs = shoal_group_net_params (g), *hs = shoal_group_net_params (h);
  /* the trained params come from the servers, not from the state */
  memcpy (hs->values, gs->values, gs->served * sizeof (float));
  g_assert_true (memcmp (hs->values + gs->served, gs->values + gs->served,
                         (gs->total - gs->served) * sizeof (float)) != 0);
  g_assert_true (shoal_group_net_load_state (h, state, &error));
  g_assert_no_error (error);
  g_assert_cmpmem (hs->values + hs->served, (hs->total - hs->served) * sizeof (float),
                   gs->values + gs->served, (gs->total - gs->served) * sizeof (float));
  /* and the same test forward */
  feed (shoal_group_net_worker (g, 0), 8);
  feed (shoal_group_net_worker (h, 0), 8);
  double lg = shoal_group_net_forward (g, SHOAL_PHASE_TEST), lh = shoal_group_net_forward (h, SHOAL_PHASE_TEST);
  g_assert_cmpfloat (lg, ==, lh);
  g_bytes_unref (state);
  shoal_group_net_free (g);
  shoal_group_net_free (h);
  shoal_conf_free (conf);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/statistics/placement", test_placement);
  g_test_add_func ("/statistics/pull-keeps-statistics", test_pull_keeps_statistics);
  g_test_add_func ("/statistics/state-carries-statistics", test_state_carries_statistics);
  return g_test_run ();
}
