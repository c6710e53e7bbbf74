/* The parameter server in-process: slicing, BSP aggregation across
 * threads, async updates, Hogwild group sync, pull time-outs. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "server/server.h"

/* A store with two params (100 and 37 floats) of value i * 0.01. */
static ShoalParamStore *
make_layout (void)
{
  ShoalParamStore *store = shoal_param_store_new ();
  ShoalInitSpec init = { .kind = SHOAL_INIT_CONSTANT };
  ShoalShape a = shoal_shape_make (2, 10, 10), b = shoal_shape_make (1, 37);
  shoal_param_store_declare (store, "l/weight", &a, &init, 10, 10, 1, 1);
  shoal_param_store_declare (store, "l/bias", &b, &init, 10, 10, 2, 0);
  shoal_param_store_allocate (store);
  for (size_t i = 0; i < store->total; i++)
    store->values[i] = (float) i * 0.01f;
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
test_slice_ranges (void)
{
  for (size_t total = 1; total < 300; total += 17)
    for (int n = 1; n <= 7; n++)
      {
        size_t prev = 0;
        for (int s = 0; s < n; s++)
          {
            size_t b, e;
            shoal_slice_range (total, n, s, &b, &e);
            g_assert_cmpuint (b, ==, prev);
            g_assert_cmpuint (e, >=, b);
            if (e < total)
              g_assert_cmpuint (e % 16, ==, 0);
            prev = e;
          }
        g_assert_cmpuint (prev, ==, total);
      }
}

typedef struct {
  ShoalServer *server;
  int slice;
  float value;
  gint64 step;
} Pusher;

static gpointer
push_thread (gpointer data)
{
  Pusher *p = data;
  size_t b, e;
  shoal_server_slice_range (p->server, p->slice, &b, &e);
  float *grad = g_new (float, e - b);
  for (size_t i = 0; i < e - b; i++)
    grad[i] = p->value;
  GError *error = NULL;
  g_assert_true (shoal_server_push (p->server, p->slice, grad, e - b, p->step, &error));
  g_assert_no_error (error);
  g_free (grad);
  return NULL;
}

static void
test_sync_averages (void)
{
  ShoalParamStore *layout = make_layout ();
  ShoalUpdaterConf u = plain_sgd (0.5f);
  ShoalServerOptions o = { .mode = SHOAL_UPDATE_SYNC, .sync_contributors = 3, .nslices = 2 };
  ShoalServer *server = shoal_server_new (layout, &u, &o);
  shoal_server_host_all (server);
  size_t b, e;
  shoal_server_slice_range (server, 1, &b, &e);
  GError *error = NULL;

  /* two of three pushes: no update yet, a pull for version 1 times out */
  Pusher p[3] = { { server, 1, 1, 0 }, { server, 1, 2, 0 }, { server, 1, 6, 0 } };
  GThread *t0 = g_thread_new ("p0", push_thread, &p[0]);
  GThread *t1 = g_thread_new ("p1", push_thread, &p[1]);
  g_thread_join (t0);
  g_thread_join (t1);
  g_assert_false (shoal_server_pull (server, 1, NULL, e - b, 1, 20000, NULL, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC);
  g_clear_error (&error);
  /* a version no slice reaches is refused at once, however long the pull may wait */
  g_assert_false (shoal_server_pull (server, 1, NULL, e - b, SHOAL_SERVER_MAX_VERSION + 1, -1, NULL, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC);
  g_assert_nonnull (strstr (error->message, "beyond the highest a slice reaches"));
  g_clear_error (&error);

  /* the third arrives while a pull waits for it */
  GThread *t2 = g_thread_new ("p2", push_thread, &p[2]);
  float *got = g_new (float, e - b);
  gint64 version = -1;
  g_assert_true (shoal_server_pull (server, 1, got, e - b, 1, 10 * G_USEC_PER_SEC, &version, &error));
  g_assert_no_error (error);
  g_thread_join (t2);
  g_assert_cmpint (version, ==, 1);
  /* mean gradient 3, lr 0.5, and the bias's lr_scale 2 from its offset on */
  const ShoalParam *bias = g_ptr_array_index (layout->params, 1);
  for (size_t i = 0; i < e - b; i++)
    {
      size_t at = b + i;
      gboolean in_weight = at < 100, in_bias = at >= bias->offset && at < bias->offset + bias->count;
      if (!in_weight && !in_bias)
        continue;  /* padding between params is never read */
      float scale = in_bias ? 2.0f : 1.0f;
      g_assert_cmpfloat_with_epsilon (got[i], layout->values[at] - 0.5f * scale * 3.0f, 1e-5);
    }

  /* out of turn: step 0 again is refused */
  g_assert_false (shoal_server_push (server, 1, got, e - b, 0, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC);
  g_clear_error (&error);
  /* slice 0 never moved */
  g_assert_cmpint (shoal_server_slice_version (server, 0), ==, 0);

  g_free (got);
  shoal_server_free (server);
  shoal_param_store_free (layout);
}

static void
test_async_and_errors (void)
{
  ShoalParamStore *layout = make_layout ();
  ShoalUpdaterConf u = plain_sgd (0.1f);
  ShoalServerOptions o = { .mode = SHOAL_UPDATE_ASYNC, .nslices = 3 };
  ShoalServer *server = shoal_server_new (layout, &u, &o);
  shoal_server_host_slice (server, 0);
  size_t b, e;
  shoal_server_slice_range (server, 0, &b, &e);
  float *g = g_new0 (float, e - b + 1);
  GError *error = NULL;

  for (int i = 0; i < 5; i++)
    g_assert_true (shoal_server_push (server, 0, g, e - b, 7, &error));
  g_assert_cmpint (shoal_server_slice_version (server, 0), ==, 5);

  g_assert_false (shoal_server_push (server, 1, g, e - b, 0, &error));
  g_assert_nonnull (strstr (error->message, "not served here"));
  g_clear_error (&error);
  g_assert_false (shoal_server_push (server, 9, g, e - b, 0, &error));
  g_assert_nonnull (strstr (error->message, "unknown slice 9"));
  g_clear_error (&error);
  g_assert_false (shoal_server_push (server, 0, g, e - b + 1, 0, &error));
  g_assert_nonnull (strstr (error->message, "values, got"));
  g_clear_error (&error);

  ShoalServerStats st;
  shoal_server_stats (server, &st);
  g_assert_cmpint (st.pushes, ==, 5);
  g_assert_cmpint (st.updates, ==, 5);

  /* stop wakes a waiting pull with an error */
  shoal_server_stop (server);
  g_assert_false (shoal_server_pull (server, 0, NULL, e - b, 100, -1, NULL, &error));
  g_clear_error (&error);
  g_free (g);
  shoal_server_free (server);
  shoal_param_store_free (layout);
}

/* Two server groups learn different things; after a sync round through
 * the master both hold the same values, which contain both groups' work. */
static void
test_hogwild_groups_converge (void)
{
  ShoalParamStore *layout = make_layout ();
  ShoalUpdaterConf u = plain_sgd (1.0f);
  ShoalServerOptions o = { .mode = SHOAL_UPDATE_ASYNC, .nslices = 1, .keep_baseline = TRUE };
  ShoalServer *master = shoal_server_new (layout, &u, &o);
  ShoalServer *other = shoal_server_new (layout, &u, &o);
  shoal_server_host_all (master);
  shoal_server_host_all (other);
  size_t n = layout->total;
  float *g = g_new (float, n), *delta = g_new (float, n), *mv = g_new (float, n);
  GError *error = NULL;

  for (size_t i = 0; i < n; i++)
    g[i] = 1.0f;
  g_assert_true (shoal_server_push (master, 0, g, n, 0, &error));   /* master: -1 */
  for (size_t i = 0; i < n; i++)
    g[i] = 0.25f;
  g_assert_true (shoal_server_push (other, 0, g, n, 0, &error));    /* other: -0.25, twice */
  g_assert_true (shoal_server_push (other, 0, g, n, 0, &error));
  g_assert_cmpint (shoal_server_wait_sync_due (other, 2, 0), ==, 0);
  g_assert_cmpint (shoal_server_wait_sync_due (other, 3, 1000), ==, -1);

  g_assert_true (shoal_server_take_delta (other, 0, delta, n, &error));
  g_assert_cmpint (shoal_server_updates_since_sync (other, 0), ==, 0);
  /* the other group learns more while its delta travels */
  for (size_t i = 0; i < n; i++)
    g[i] = 0.125f;
  g_assert_true (shoal_server_push (other, 0, g, n, 1, &error));
  g_assert_true (shoal_server_apply_delta (master, 0, delta, mv, n, &error));
  g_assert_true (shoal_server_merge_master (other, 0, mv, n, &error));
  g_assert_no_error (error);

  const float *vm = shoal_server_values (master), *vo = shoal_server_values (other);
  const ShoalParam *bias = g_ptr_array_index (layout->params, 1);
  for (size_t i = 0; i < bias->offset + bias->count; i++)
    {
      if (i >= 100 && i < bias->offset)
        continue;  /* padding */
      float s = i >= bias->offset ? 2.0f : 1.0f;  /* the bias's lr_scale */
      g_assert_cmpfloat_with_epsilon (vm[i], layout->values[i] - s * (1.0f + 0.5f), 1e-5);
      g_assert_cmpfloat_with_epsilon (vo[i], vm[i] - s * 0.125f, 1e-5);
    }

  /* a second round with nothing new in between: identical values */
  g_assert_true (shoal_server_take_delta (other, 0, delta, n, &error));
  g_assert_true (shoal_server_apply_delta (master, 0, delta, mv, n, &error));
  g_assert_true (shoal_server_merge_master (other, 0, mv, n, &error));
  g_assert_cmpmem (shoal_server_values (master), n * sizeof (float), shoal_server_values (other),
                   n * sizeof (float));

  g_free (g);
  g_free (delta);
  g_free (mv);
  shoal_server_free (master);
  shoal_server_free (other);
  shoal_param_store_free (layout);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/server/slice-ranges", test_slice_ranges);
  g_test_add_func ("/server/sync-averages", test_sync_averages);
  g_test_add_func ("/server/async-and-errors", test_async_and_errors);
  g_test_add_func ("/server/hogwild-groups-converge", test_hogwild_groups_converge);
  return g_test_run ();
}
