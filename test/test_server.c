/* marks: threads (they start threads: TSan runs this file in `make SANITIZE=thread test-threads`) */
/* The parameter server in-process: slicing, BSP aggregation across
 * threads, async updates, Hogwild group sync, pull time-outs, and the
 * stop step of a SYNC job. */
#include <glib.h>
#include <math.h>
#include <stdlib.h>
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
  g_assert_true (shoal_param_store_allocate (store, NULL));
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
  ShoalServer *server = shoal_server_new (layout, &u, &o, NULL);
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

/* Adam on a param that spans two slices, the slices applied in either
 * order step after step: every value takes the same update as when the
 * whole param is one slice (bias correction counts the updates each
 * value's moments saw; a count per param lagged for the part applied
 * before the param's first part). */
static void
test_adam_param_across_slices (void)
{
  ShoalParamStore *layout = shoal_param_store_new ();
  ShoalInitSpec init = { .kind = SHOAL_INIT_CONSTANT };
  ShoalShape big = shoal_shape_make (1, 64);
  shoal_param_store_declare (layout, "l/weight", &big, &init, 8, 8, 1, 1);
  g_assert_true (shoal_param_store_allocate (layout, NULL));
  for (size_t i = 0; i < layout->total; i++)
    layout->values[i] = 0.5f;
  ShoalUpdaterConf u;
  shoal_updater_conf_defaults (&u, SHOAL_UPDATER_ADAM);
  u.schedule.lr = 0.1f;
  ShoalServerOptions one = { .mode = SHOAL_UPDATE_SYNC, .sync_contributors = 1, .nslices = 1 };
  ShoalServerOptions two = { .mode = SHOAL_UPDATE_SYNC, .sync_contributors = 1, .nslices = 2 };
  ShoalServer *whole = shoal_server_new (layout, &u, &one, NULL), *cut = shoal_server_new (layout, &u, &two, NULL);
  shoal_server_host_all (whole);
  shoal_server_host_all (cut);
  size_t b0, e0, b1, e1;
  shoal_server_slice_range (cut, 0, &b0, &e0);
  shoal_server_slice_range (cut, 1, &b1, &e1);
  g_assert_cmpuint (e0, ==, b1);
  g_assert_cmpuint (b1, <, 64);  /* the param spans both */
  float *grad = g_new (float, layout->total);
  GError *error = NULL;
  for (int step = 0; step < 5; step++)
    {
      for (size_t i = 0; i < layout->total; i++)
        grad[i] = (float) ((i * 7 + (size_t) step * 3) % 11) - 5.0f;
      g_assert_true (shoal_server_push (whole, 0, grad, layout->total, step, &error));
      /* the second slice first on even steps, as backward completes the buffer's end first */
      int first = step % 2 == 0 ? 1 : 0;
      for (int k = 0; k < 2; k++)
        {
          int sl = k == 0 ? first : 1 - first;
          size_t b = sl == 0 ? b0 : b1, e = sl == 0 ? e0 : e1;
          g_assert_true (shoal_server_push (cut, sl, grad + b, e - b, step, &error));
        }
      g_assert_no_error (error);
    }
  const float *w = shoal_server_values (whole), *c = shoal_server_values (cut);
  for (size_t i = 0; i < 64; i++)
    g_assert_cmpfloat_with_epsilon (c[i], w[i], 1e-6);
  g_free (grad);
  shoal_server_free (whole);
  shoal_server_free (cut);
  shoal_param_store_free (layout);
}

static void
test_async_and_errors (void)
{
  ShoalParamStore *layout = make_layout ();
  ShoalUpdaterConf u = plain_sgd (0.1f);
  ShoalServerOptions o = { .mode = SHOAL_UPDATE_ASYNC, .nslices = 3 };
  ShoalServer *server = shoal_server_new (layout, &u, &o, NULL);
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
  ShoalServer *master = shoal_server_new (layout, &u, &o, NULL);
  ShoalServer *other = shoal_server_new (layout, &u, &o, NULL);
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

typedef struct {
  ShoalServer *server;
  int slice;
  gint64 min_version;
  GError *error;
  gboolean ok;
} Waiter;

/* A pull that may wait 30 s: a stop must end it long before. */
static gpointer
pull_thread (gpointer data)
{
  Waiter *w = data;
  size_t b, e;
  shoal_server_slice_range (w->server, w->slice, &b, &e);
  w->ok = shoal_server_pull (w->server, w->slice, NULL, e - b, w->min_version, 30 * G_USEC_PER_SEC,
                             NULL, &w->error);
  return NULL;
}

/* Fills every hosted slice's gradient with `value` and pushes it for `step`. */
static void
push_all (ShoalServer *server, float value, gint64 step, float *grad)
{
  GError *error = NULL;
  for (int s = 0; s < shoal_server_n_slices (server); s++)
    {
      size_t b, e;
      shoal_server_slice_range (server, s, &b, &e);
      for (size_t i = 0; i < e - b; i++)
        grad[i] = value;
      g_assert_true (shoal_server_push (server, s, grad, e - b, step, &error));
      g_assert_no_error (error);
    }
}

/* SYNC, two contributors: one pushes step 1 of slice 1, the other stops
 * at step 1.  The pull waiting for version 2 is woken and refused
 * (STOPPED), later pushes of step 1 or beyond and pulls beyond version 1
 * are refused at once, version 1 is still served, and neither the values
 * nor the checkpoint hold anything of the half-summed step: a server
 * restored from it and given both gradients of step 1 ends where one
 * that never stopped does. */
static void
test_stop_at (void)
{
  ShoalParamStore *layout = make_layout ();
  ShoalUpdaterConf u = plain_sgd (0.5f);
  u.momentum = 0.9f;  /* optimiser state goes into the checkpoint too */
  ShoalServerOptions o = { .mode = SHOAL_UPDATE_SYNC, .sync_contributors = 2, .nslices = 2 };
  ShoalServer *server = shoal_server_new (layout, &u, &o, NULL);
  ShoalServer *never = shoal_server_new (layout, &u, &o, NULL);  /* the same steps, no stop */
  shoal_server_host_all (server);
  shoal_server_host_all (never);
  size_t total = layout->total, b1, e1;
  shoal_server_slice_range (server, 1, &b1, &e1);
  float *grad = g_new (float, total), *after0 = g_new (float, total);
  GError *error = NULL;

  g_assert_cmpint (shoal_server_stop_step (server), ==, -1);
  for (int w = 0; w < 2; w++)
    {
      push_all (server, (float) (w + 1), 0, grad);
      push_all (never, (float) (w + 1), 0, grad);
    }
  g_assert_cmpint (shoal_server_slice_version (server, 1), ==, 1);
  memcpy (after0, shoal_server_values (server), total * sizeof (float));

  /* one worker went on into step 1 and waits for it; the other stops there */
  for (size_t i = 0; i < e1 - b1; i++)
    grad[i] = 100.0f;
  g_assert_true (shoal_server_push (server, 1, grad, e1 - b1, 1, &error));
  Waiter w = { server, 1, 2, NULL, FALSE };
  GThread *t = g_thread_new ("pull", pull_thread, &w);
  g_usleep (50 * 1000);  /* most likely waiting by now; either way it must be refused */
  gint64 stopped_at = -1;
  g_assert_true (shoal_server_stop_at (server, 1, &stopped_at, &error));
  g_assert_no_error (error);
  g_assert_cmpint (stopped_at, ==, 1);
  g_thread_join (t);
  g_assert_false (w.ok);
  g_assert_error (w.error, SHOAL_ERROR, SHOAL_ERROR_STOPPED);
  g_assert_nonnull (strstr (w.error->message, "stops at step 1"));
  g_clear_error (&w.error);
  g_assert_cmpint (shoal_server_stop_step (server), ==, 1);

  /* a later stop step does not move it; a step out of range is refused */
  g_assert_true (shoal_server_stop_at (server, 5, &stopped_at, &error));
  g_assert_cmpint (stopped_at, ==, 1);
  g_assert_cmpint (shoal_server_stop_step (server), ==, 1);
  g_assert_false (shoal_server_stop_at (server, -1, NULL, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC);
  g_clear_error (&error);

  /* refused at once: pushes of step 1 and beyond, pulls beyond version 1
   * (timeout -1 would wait forever without the stop) */
  g_assert_false (shoal_server_push (server, 0, grad, b1, 1, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_STOPPED);
  g_clear_error (&error);
  g_assert_false (shoal_server_push (server, 1, grad, e1 - b1, 2, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_STOPPED);
  g_clear_error (&error);
  g_assert_false (shoal_server_pull (server, 0, NULL, b1, 2, -1, NULL, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_STOPPED);
  g_clear_error (&error);
  /* the step the job stops at is still there, untouched by the half sum */
  gint64 version = -1;
  float *got = g_new (float, e1 - b1);
  g_assert_true (shoal_server_pull (server, 1, got, e1 - b1, 1, -1, &version, &error));
  g_assert_no_error (error);
  g_assert_cmpint (version, ==, 1);
  g_assert_cmpmem (got, (e1 - b1) * sizeof (float), after0 + b1, (e1 - b1) * sizeof (float));
  g_assert_cmpmem (shoal_server_values (server), total * sizeof (float), after0, total * sizeof (float));

  /* the checkpoint at the stop step, restored, trains on like `never` */
  char *dir = g_dir_make_tmp ("server-XXXXXX", NULL);
  ShoalCheckpoint *ckpt = shoal_checkpoint_open (dir, TRUE, &error);
  g_assert_no_error (error);
  g_assert_true (shoal_server_checkpoint (server, ckpt, 1, &error));
  g_assert_no_error (error);
  ShoalServer *again = shoal_server_new (layout, &u, &o, NULL);
  shoal_server_host_all (again);
  g_assert_true (shoal_server_restore (again, ckpt, 1, &error));
  g_assert_no_error (error);
  g_assert_cmpint (shoal_server_stop_step (again), ==, -1);
  for (int w = 0; w < 2; w++)
    {
      push_all (again, (float) (3 * w + 1), 1, grad);
      push_all (never, (float) (3 * w + 1), 1, grad);
    }
  g_assert_cmpint (shoal_server_slice_version (again, 0), ==, 2);
  g_assert_cmpmem (shoal_server_values (again), total * sizeof (float), shoal_server_values (never),
                   total * sizeof (float));

  shoal_server_free (again);
  shoal_checkpoint_close (ckpt);
  char *cmd = g_strdup_printf ("rm -rf '%s'", dir);
  g_assert_cmpint (system (cmd), ==, 0);
  g_free (cmd);
  g_free (dir);
  g_free (got);
  g_free (grad);
  g_free (after0);
  shoal_server_free (never);
  shoal_server_free (server);
  shoal_param_store_free (layout);
}

/* ASYNC: groups stop each at its own step; stop_at changes nothing. */
/* The runner's words for one elastic exchange of every slice: the
 * replica `replica`, what the center sent back into diff. */
static void
exchange_all (ShoalServer *server, const float *replica, float *diff)
{
  GError *error = NULL;
  for (int s = 0; s < shoal_server_n_slices (server); s++)
    {
      size_t b, e;
      shoal_server_slice_range (server, s, &b, &e);
      g_assert_true (shoal_server_elastic_exchange (server, s, replica + b, diff + b, e - b, 0.5f, &error));
      g_assert_no_error (error);
    }
}

/* EASGD: the centers go into the checkpoint, so a restored master
 * exchanges exactly as one that never stopped (before, the center began
 * again from the master's values on resume); a checkpoint without
 * centers (format 1, or a server without them) still restores. */
static void
test_elastic_center_checkpoint (void)
{
  ShoalParamStore *layout = make_layout ();
  ShoalUpdaterConf u = plain_sgd (0.5f);
  u.momentum = 0.9f;
  ShoalServerOptions o = { .mode = SHOAL_UPDATE_ASYNC, .nslices = 2, .elastic_center = TRUE };
  ShoalServer *server = shoal_server_new (layout, &u, &o, NULL);
  shoal_server_host_all (server);
  size_t total = layout->total;
  float *grad = g_new (float, total), *replica = g_new (float, total);
  float *diff = g_new (float, total), *diff_again = g_new (float, total);
  GError *error = NULL;

  /* the center moves toward a replica that went its own way, the
   * master's values move on their own */
  for (size_t i = 0; i < total; i++)
    replica[i] = layout->values[i] + 1.0f + (float) (i % 7) * 0.25f;
  exchange_all (server, replica, diff);
  push_all (server, 0.5f, 0, grad);
  exchange_all (server, replica, diff);
  push_all (server, -0.25f, 1, grad);

  char *dir = g_dir_make_tmp ("server-XXXXXX", NULL);
  ShoalCheckpoint *ckpt = shoal_checkpoint_open (dir, TRUE, &error);
  g_assert_no_error (error);
  g_assert_true (shoal_server_checkpoint (server, ckpt, 2, &error));
  g_assert_no_error (error);
  ShoalServer *again = shoal_server_new (layout, &u, &o, NULL);
  shoal_server_host_all (again);
  g_assert_true (shoal_server_restore (again, ckpt, 2, &error));
  g_assert_no_error (error);
  g_assert_cmpmem (shoal_server_values (again), total * sizeof (float), shoal_server_values (server),
                   total * sizeof (float));
  /* the next exchange and the next step: exactly the same */
  for (size_t i = 0; i < total; i++)
    replica[i] -= 0.5f;
  exchange_all (server, replica, diff);
  exchange_all (again, replica, diff_again);
  g_assert_cmpmem (diff_again, total * sizeof (float), diff, total * sizeof (float));
  push_all (server, 0.125f, 2, grad);
  push_all (again, 0.125f, 2, grad);
  g_assert_cmpmem (shoal_server_values (again), total * sizeof (float), shoal_server_values (server),
                   total * sizeof (float));
  /* a server without centers reads the checkpoint too (it skips them) */
  ShoalServerOptions plain = { .mode = SHOAL_UPDATE_ASYNC, .nslices = 2 };
  ShoalServer *no_center = shoal_server_new (layout, &u, &plain, NULL);
  shoal_server_host_all (no_center);
  g_assert_true (shoal_server_restore (no_center, ckpt, 2, &error));
  g_assert_no_error (error);
  /* and a checkpoint without centers starts them at the master's values */
  g_assert_true (shoal_server_checkpoint (no_center, ckpt, 3, &error));
  ShoalServer *from_plain = shoal_server_new (layout, &u, &o, NULL);
  shoal_server_host_all (from_plain);
  g_assert_true (shoal_server_restore (from_plain, ckpt, 3, &error));
  g_assert_no_error (error);
  memcpy (replica, shoal_server_values (from_plain), total * sizeof (float));
  exchange_all (from_plain, replica, diff);
  for (size_t i = 0; i < total; i++)
    g_assert_cmpfloat (diff[i], ==, 0.0f);

  shoal_server_free (from_plain);
  shoal_server_free (no_center);
  shoal_server_free (again);
  shoal_checkpoint_close (ckpt);
  char *cmd = g_strdup_printf ("rm -rf '%s'", dir);
  g_assert_cmpint (system (cmd), ==, 0);
  g_free (cmd);
  g_free (dir);
  g_free (grad);
  g_free (replica);
  g_free (diff);
  g_free (diff_again);
  shoal_server_free (server);
  shoal_param_store_free (layout);
}

/* SYNC with a backup worker (3 contributors, 2 make a step): two workers
 * pushed step 0 to slice 0, which applied it, and one of them slice 1
 * so far; the third, late, stops at step 0.  The servers cannot stop
 * there (slice 0 applied it): they stop at step 1, say so, still take
 * the second gradient of step 0 on slice 1, and refuse step 1.  A stop
 * asked for where no slice went on stays where it was asked. */
static void
test_stop_at_backup (void)
{
  ShoalParamStore *layout = make_layout ();
  ShoalUpdaterConf u = plain_sgd (0.5f);
  ShoalServerOptions o = { .mode = SHOAL_UPDATE_SYNC, .sync_contributors = 3, .backup_workers = 1,
                           .nslices = 2 };
  ShoalServer *server = shoal_server_new (layout, &u, &o, NULL);
  shoal_server_host_all (server);
  size_t b1, e1;
  shoal_server_slice_range (server, 1, &b1, &e1);
  float *grad = g_new0 (float, layout->total);
  GError *error = NULL;

  g_assert_true (shoal_server_push (server, 0, grad, b1, 0, &error));
  g_assert_true (shoal_server_push (server, 0, grad, b1, 0, &error));
  g_assert_true (shoal_server_push (server, 1, grad, e1 - b1, 0, &error));
  g_assert_no_error (error);
  g_assert_cmpint (shoal_server_slice_version (server, 0), ==, 1);
  g_assert_cmpint (shoal_server_slice_version (server, 1), ==, 0);

  gint64 stopped_at = -1;
  g_assert_true (shoal_server_stop_at (server, 0, &stopped_at, &error));
  g_assert_no_error (error);
  g_assert_cmpint (stopped_at, ==, 1);
  g_assert_cmpint (shoal_server_stop_step (server), ==, 1);
  /* the step before the stop completes on every slice */
  g_assert_true (shoal_server_push (server, 1, grad, e1 - b1, 0, &error));
  g_assert_no_error (error);
  g_assert_cmpint (shoal_server_slice_version (server, 1), ==, 1);
  g_assert_true (shoal_server_pull (server, 1, NULL, e1 - b1, 1, 0, NULL, &error));
  g_assert_no_error (error);
  g_assert_false (shoal_server_push (server, 0, grad, b1, 1, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_STOPPED);
  g_clear_error (&error);
  /* the step the servers stop at holds for later callers, early or late */
  g_assert_true (shoal_server_stop_at (server, 0, &stopped_at, &error));
  g_assert_cmpint (stopped_at, ==, 1);
  g_assert_true (shoal_server_stop_at (server, 4, &stopped_at, &error));
  g_assert_cmpint (stopped_at, ==, 1);

  /* nothing applied beyond the step asked for: the stop stays there */
  ShoalServer *quiet = shoal_server_new (layout, &u, &o, NULL);
  shoal_server_host_all (quiet);
  g_assert_true (shoal_server_push (quiet, 0, grad, b1, 0, &error));
  g_assert_true (shoal_server_stop_at (quiet, 0, &stopped_at, &error));
  g_assert_no_error (error);
  g_assert_cmpint (stopped_at, ==, 0);
  g_assert_false (shoal_server_push (quiet, 0, grad, b1, 0, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_STOPPED);
  g_clear_error (&error);

  g_free (grad);
  shoal_server_free (quiet);
  shoal_server_free (server);
  shoal_param_store_free (layout);
}

static void
test_stop_at_async (void)
{
  ShoalParamStore *layout = make_layout ();
  ShoalUpdaterConf u = plain_sgd (0.1f);
  ShoalServerOptions o = { .mode = SHOAL_UPDATE_ASYNC, .nslices = 1 };
  ShoalServer *server = shoal_server_new (layout, &u, &o, NULL);
  shoal_server_host_all (server);
  float *grad = g_new0 (float, layout->total);
  GError *error = NULL;

  gint64 stopped_at = -1;
  g_assert_true (shoal_server_stop_at (server, 0, &stopped_at, &error));
  g_assert_cmpint (stopped_at, ==, 0);
  g_assert_cmpint (shoal_server_stop_step (server), ==, -1);
  g_assert_true (shoal_server_push (server, 0, grad, layout->total, 3, &error));
  g_assert_true (shoal_server_pull (server, 0, NULL, layout->total, 1, 0, NULL, &error));
  g_assert_no_error (error);

  g_free (grad);
  shoal_server_free (server);
  shoal_param_store_free (layout);
}

/* ---- pinned values ---------------------------------------------------------- */

typedef struct {
  ShoalServer *server;
  const float *grad;
  size_t n;
  gint done;    /* atomic */
} PinPush;

static gpointer
pin_push_main (gpointer data)
{
  PinPush *p = data;
  GError *error = NULL;
  g_assert_true (shoal_server_push (p->server, 0, p->grad, p->n, 0, &error));
  g_assert_no_error (error);
  g_atomic_int_set (&p->done, 1);
  return NULL;
}

/* ASYNC values lent in place under a pin: an update waits for the pin,
 * the pin's holder is told it waits, no new pin is given meanwhile, and
 * the update goes on once the pin is released. */
static void
test_pinned_values (void)
{
  ShoalParamStore *layout = make_layout ();
  ShoalUpdaterConf u = plain_sgd (1.0f);
  ShoalServerOptions o = { .mode = SHOAL_UPDATE_ASYNC, .sync_contributors = 1, .nslices = 1 };
  ShoalServer *server = shoal_server_new (layout, &u, &o, NULL);
  GError *error = NULL;
  shoal_server_host_all (server);
  size_t b, e;
  shoal_server_slice_range (server, 0, &b, &e);
  size_t n = e - b;
  float *before = g_memdup2 (layout->values + b, n * sizeof (float));
  float *grad = g_new (float, n);
  for (size_t i = 0; i < n; i++)
    grad[i] = 1.0f;

  const float *pinned = NULL;
  gint64 version = -1;
  g_assert_true (shoal_server_pull_pinned (server, 0, n, 0, 0, &version, &pinned, &error));
  g_assert_no_error (error);
  g_assert_nonnull (pinned);
  g_assert_cmpint (version, ==, 0);
  g_assert_false (shoal_server_pin_wanted (server, 0));

  PinPush p = { server, grad, n, 0 };
  GThread *t = g_thread_new ("push", pin_push_main, &p);
  /* bounded: the push says it waits, and waits */
  for (int i = 0; i < 10000 && !shoal_server_pin_wanted (server, 0); i++)
    g_usleep (1000);
  g_assert_true (shoal_server_pin_wanted (server, 0));
  g_assert_false (g_atomic_int_get (&p.done));
  g_assert_cmpmem (pinned, n * sizeof (float), before, n * sizeof (float));
  /* no new pin while a writer waits: the caller copies instead */
  const float *second = (const float *) 1;
  g_assert_true (shoal_server_pull_pinned (server, 0, n, 0, 0, &version, &second, &error));
  g_assert_null (second);

  shoal_server_unpin (server, 0);
  g_thread_join (t);
  g_assert_true (g_atomic_int_get (&p.done));
  g_assert_false (shoal_server_pin_wanted (server, 0));
  g_assert_cmpint (shoal_server_slice_version (server, 0), ==, 1);
  /* in place: the update wrote them */
  float *now = g_new (float, n);
  g_assert_true (shoal_server_pull (server, 0, now, n, 1, 0, NULL, &error));
  g_assert_cmpmem (pinned, n * sizeof (float), now, n * sizeof (float));
  g_assert_true (memcmp (now, before, n * sizeof (float)) != 0);
  g_free (now);

  g_free (grad);
  g_free (before);
  shoal_server_free (server);
  shoal_param_store_free (layout);
}

static gboolean
all_zero (const float *v, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (v[i] != 0)
      return FALSE;
  return TRUE;
}

/* shoal_server_push_consume makes the updates push_from makes and leaves
 * the gradient zero on every path: applied at once, summed into the step
 * (several contributors), dropped (a backup worker's late step) and
 * refused. */
static void
test_push_consume (void)
{
  ShoalParamStore *layout = make_layout ();
  ShoalUpdaterConf upd = plain_sgd (0.1f);
  upd.momentum = 0.9f;
  GError *error = NULL;
  ShoalServerOptions sync3 = { .mode = SHOAL_UPDATE_SYNC, .sync_contributors = 3, .backup_workers = 1,
                               .nslices = 2 };
  ShoalServerOptions async = { .mode = SHOAL_UPDATE_ASYNC, .sync_contributors = 1, .nslices = 2 };
  const ShoalServerOptions *modes[] = { &sync3, &async };
  for (guint m = 0; m < G_N_ELEMENTS (modes); m++)
    {
      ShoalServer *plain = shoal_server_new (layout, &upd, modes[m], &error);
      ShoalServer *consumed = shoal_server_new (layout, &upd, modes[m], &error);
      g_assert_no_error (error);
      shoal_server_host_all (plain);
      shoal_server_host_all (consumed);
      size_t begin, end;
      shoal_server_slice_range (plain, 0, &begin, &end);
      size_t n = end - begin;
      float *grad = g_new (float, n), *kept = g_new (float, n);
      for (gint64 step = 0; step < 3; step++)
        for (int contributor = 0; contributor < 3; contributor++)
          {
            for (size_t i = 0; i < n; i++)
              kept[i] = (float) ((int) ((i * 5 + (size_t) (step * 3 + contributor)) % 11) - 5) * 0.25f;
            memcpy (grad, kept, n * sizeof (float));
            ShoalPushOrigin origin = { step, contributor };
            gint64 v1 = -1, v2 = -1;
            g_assert_true (shoal_server_push_from (plain, 0, kept, n, step, &origin, &v1, &error));
            g_assert_true (shoal_server_push_consume (consumed, 0, grad, n, step, &origin, NULL, &v2, NULL,
                                                      &error));
            g_assert_no_error (error);
            g_assert_cmpint (v1, ==, v2);
            g_assert_true (all_zero (grad, n));
          }
      g_assert_cmpmem (shoal_server_values (plain) + begin, n * sizeof (float),
                       shoal_server_values (consumed) + begin, n * sizeof (float));
      if (modes[m] == &sync3)
        {
          /* the third contributor of each step came late: dropped */
          ShoalServerStats st;
          shoal_server_stats (consumed, &st);
          g_assert_cmpint (st.dropped, ==, 3);
        }
      /* refused (a step from the future, or a wrong length): cleared too */
      memcpy (grad, kept, n * sizeof (float));
      gboolean ok = shoal_server_push_consume (consumed, 0, grad, n, modes[m] == &sync3 ? 99 : 0, NULL, NULL,
                                               NULL, NULL, &error);
      if (modes[m] == &sync3)
        {
          g_assert_false (ok);
          g_clear_error (&error);
        }
      g_assert_true (all_zero (grad, n));
      memcpy (grad, kept, n * sizeof (float));
      g_assert_false (shoal_server_push_consume (consumed, 0, grad, n - 1, 3, NULL, NULL, NULL, NULL, &error));
      g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC);
      g_clear_error (&error);
      g_assert_true (all_zero (grad, n - 1));
      g_free (grad);
      g_free (kept);
      shoal_server_free (plain);
      shoal_server_free (consumed);
    }
  shoal_param_store_free (layout);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/server/slice-ranges", test_slice_ranges);
  g_test_add_func ("/server/sync-averages", test_sync_averages);
  g_test_add_func ("/server/adam-param-across-slices", test_adam_param_across_slices);
  g_test_add_func ("/server/async-and-errors", test_async_and_errors);
  g_test_add_func ("/server/hogwild-groups-converge", test_hogwild_groups_converge);
  g_test_add_func ("/server/stop-at", test_stop_at);
  g_test_add_func ("/server/stop-at-async", test_stop_at_async);
  g_test_add_func ("/server/stop-at-backup", test_stop_at_backup);
  g_test_add_func ("/server/pinned-values", test_pinned_values);
  g_test_add_func ("/server/elastic-center-checkpoint", test_elastic_center_checkpoint);
  g_test_add_func ("/server/push-consume", test_push_consume);
  return g_test_run ();
}
