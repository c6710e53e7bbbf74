/* marks: threads (they start threads: TSan runs this file in `make SANITIZE=thread test-threads`) */
/* The param client against in-process servers: slices pushed as layers
 * complete, values pulled back, Downpour's n_push / n_fetch, a
 * checkpoint of the servers it uses, a step refused by a stop, and the
 * wire codecs on a device refused for a store on the CPU. */
#include <glib.h>
#include <string.h>

#include "comm/param_client.h"
#include "core/error.h"
#include "support/address_limit.h"

/* 64 floats of value 1, in 4 slices of 16 */
static ShoalParamStore *
make_store (void)
{
  ShoalParamStore *store = shoal_param_store_new ();
  ShoalInitSpec init = { .kind = SHOAL_INIT_CONSTANT, .value = 1 };
  ShoalShape shape = shoal_shape_make (1, 64);
  shoal_param_store_declare (store, "l/weight", &shape, &init, 1, 1, 1, 1);
  g_assert_true (shoal_param_store_allocate (store, NULL));
  shoal_param_store_init_values (store, 1);
  return store;
}

static ShoalServer *
make_server (ShoalParamStore *layout, ShoalUpdateMode mode)
{
  ShoalUpdaterConf u;
  shoal_updater_conf_defaults (&u, SHOAL_UPDATER_SGD);
  u.schedule.lr = 0.5f;
  ShoalServerOptions o = { .mode = mode, .sync_contributors = 1, .nslices = 4 };
  ShoalServer *server = shoal_server_new (layout, &u, &o, NULL);
  shoal_server_host_all (server);
  return server;
}

static ShoalParamClient *
connect_local (ShoalParamStore *store, ShoalServer *server, ShoalUpdateMode mode)
{
  GError *error = NULL;
  ShoalParamClient *c = shoal_param_client_new (store, 4, mode);
  for (int s = 0; s < 4; s++)
    shoal_param_client_route_local (c, s, server);
  g_assert_true (shoal_param_client_start (c, &error));
  g_assert_no_error (error);
  return c;
}

static void
one_step (ShoalParamClient *c, ShoalParamStore *store, gint64 step, float grad)
{
  GError *error = NULL;
  for (size_t i = 0; i < 64; i++)
    store->grads[i] += grad;
  shoal_param_client_step_done (c, step);
  g_assert_true (shoal_param_client_wait (c, &error));
  g_assert_no_error (error);
}

static void
test_sync_round_trip (void)
{
  ShoalParamStore *layout = make_store (), *store = make_store ();
  ShoalServer *server = make_server (layout, SHOAL_UPDATE_SYNC);
  ShoalParamClient *c = connect_local (store, server, SHOAL_UPDATE_SYNC);

  one_step (c, store, 0, 1.0f);
  /* the update came back into the worker's values; its grads are cleared */
  for (size_t i = 0; i < 64; i++)
    {
      g_assert_cmpfloat_with_epsilon (store->values[i], 0.5f, 1e-6);
      g_assert_cmpfloat (store->grads[i], ==, 0);
    }
  for (int s = 0; s < 4; s++)
    g_assert_cmpint (shoal_server_slice_version (server, s), ==, 1);

  /* a step out of turn is an error the worker sees at wait */
  GError *error = NULL;
  shoal_param_client_step_done (c, 5);
  g_assert_false (shoal_param_client_wait (c, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC);
  g_clear_error (&error);

  shoal_param_client_free (c);
  shoal_server_free (server);
  shoal_param_store_free (store);
  shoal_param_store_free (layout);
}

static void
test_push_and_fetch_frequency (void)
{
  ShoalParamStore *layout = make_store (), *store = make_store ();
  ShoalServer *server = make_server (layout, SHOAL_UPDATE_ASYNC);
  ShoalParamClient *c = connect_local (store, server, SHOAL_UPDATE_ASYNC);
  shoal_param_client_set_frequency (c, 2, 4);

  /* steps 0 and 1: gradients 1 and 3 add up; step 1 pushes their mean 2 */
  one_step (c, store, 0, 1.0f);
  g_assert_cmpint (shoal_server_slice_version (server, 0), ==, 0);
  g_assert_cmpfloat (store->grads[0], ==, 1.0f);
  one_step (c, store, 1, 3.0f);
  g_assert_cmpint (shoal_server_slice_version (server, 0), ==, 1);
  g_assert_cmpfloat (store->grads[0], ==, 0);
  /* the server moved by lr * 2; the worker has not fetched yet (n_fetch 4) */
  g_assert_cmpfloat_with_epsilon (shoal_server_values (server)[0], 0.0f, 1e-6);
  g_assert_cmpfloat (store->values[0], ==, 1.0f);

  /* steps 2 and 3: the push of step 3 also fetches */
  one_step (c, store, 2, 1.0f);
  one_step (c, store, 3, 1.0f);
  g_assert_cmpint (shoal_server_slice_version (server, 0), ==, 2);
  g_assert_cmpfloat_with_epsilon (shoal_server_values (server)[0], -0.5f, 1e-6);
  g_assert_cmpfloat_with_epsilon (store->values[0], -0.5f, 1e-6);

  shoal_param_client_free (c);
  shoal_server_free (server);
  shoal_param_store_free (store);
  shoal_param_store_free (layout);
}

static void
test_checkpoint_servers (void)
{
  ShoalParamStore *layout = make_store (), *store = make_store ();
  ShoalServer *server = make_server (layout, SHOAL_UPDATE_SYNC);
  ShoalParamClient *c = connect_local (store, server, SHOAL_UPDATE_SYNC);
  char *dir = g_dir_make_tmp ("pc-XXXXXX", NULL);
  GError *error = NULL;
  ShoalCheckpoint *ckpt = shoal_checkpoint_open (dir, TRUE, &error);
  g_assert_no_error (error);

  one_step (c, store, 0, 1.0f);
  g_assert_true (shoal_param_client_checkpoint (c, ckpt, 1, &error));
  one_step (c, store, 1, 1.0f);

  /* a fresh server restored at step 1 holds the values after one step */
  ShoalServer *again = make_server (layout, SHOAL_UPDATE_SYNC);
  g_assert_true (shoal_server_restore (again, ckpt, 1, &error));
  g_assert_no_error (error);
  g_assert_cmpfloat_with_epsilon (shoal_server_values (again)[3], 0.5f, 1e-6);
  g_assert_cmpint (shoal_server_slice_version (again, 2), ==, 1);
  /* a server of another layout refuses the checkpoint */
  ShoalParamStore *other = shoal_param_store_new ();
  ShoalInitSpec init = { .kind = SHOAL_INIT_CONSTANT };
  ShoalShape shape = shoal_shape_make (1, 100);
  shoal_param_store_declare (other, "x/weight", &shape, &init, 1, 1, 1, 1);
  g_assert_true (shoal_param_store_allocate (other, NULL));
  ShoalServer *wrong = make_server (other, SHOAL_UPDATE_SYNC);
  g_assert_false (shoal_server_restore (wrong, ckpt, 1, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA);
  g_clear_error (&error);

  shoal_server_free (wrong);
  shoal_param_store_free (other);
  shoal_server_free (again);
  shoal_checkpoint_close (ckpt);
  char *cmd = g_strdup_printf ("rm -rf '%s'", dir);
  g_assert_cmpint (system (cmd), ==, 0);
  g_free (cmd);
  g_free (dir);
  shoal_param_client_free (c);
  shoal_server_free (server);
  shoal_param_store_free (store);
  shoal_param_store_free (layout);
}

/* Two SYNC units of one group: B pushes step 1 while A stops there
 * (stop_at).  B's wait fails with SHOAL_ERROR_STOPPED and the step the
 * servers stop at; B's values stay those of step 1 and no slice moved. */
static void
test_stop_refuses_step (void)
{
  ShoalParamStore *layout = make_store (), *sa = make_store (), *sb = make_store ();
  ShoalUpdaterConf u;
  shoal_updater_conf_defaults (&u, SHOAL_UPDATER_SGD);
  u.schedule.lr = 0.5f;
  ShoalServerOptions o = { .mode = SHOAL_UPDATE_SYNC, .sync_contributors = 2, .nslices = 4 };
  ShoalServer *server = shoal_server_new (layout, &u, &o, NULL);
  shoal_server_host_all (server);
  ShoalParamClient *a = connect_local (sa, server, SHOAL_UPDATE_SYNC);
  ShoalParamClient *b = connect_local (sb, server, SHOAL_UPDATE_SYNC);
  GError *error = NULL;

  /* step 0 together: values 1 - 0.5 * mean (1, 5) = -0.5 */
  for (size_t i = 0; i < 64; i++)
    {
      sa->grads[i] = 1.0f;
      sb->grads[i] = 5.0f;
    }
  shoal_param_client_step_done (a, 0);
  shoal_param_client_step_done (b, 0);
  g_assert_true (shoal_param_client_wait (a, &error));
  g_assert_true (shoal_param_client_wait (b, &error));
  g_assert_no_error (error);
  g_assert_cmpfloat_with_epsilon (sb->values[0], -0.5f, 1e-6);

  /* B goes on into step 1; A stops there */
  for (size_t i = 0; i < 64; i++)
    sb->grads[i] = 5.0f;
  shoal_param_client_step_done (b, 1);
  g_assert_cmpint (shoal_param_client_stop_step (a), ==, -1);
  g_assert_true (shoal_param_client_stop_at (a, 1, NULL, &error));
  g_assert_no_error (error);
  g_assert_false (shoal_param_client_wait (b, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_STOPPED);
  g_clear_error (&error);
  g_assert_cmpint (shoal_param_client_stop_step (b), ==, 1);
  for (size_t i = 0; i < 64; i++)
    g_assert_cmpfloat_with_epsilon (sb->values[i], -0.5f, 1e-6);
  for (int s = 0; s < 4; s++)
    g_assert_cmpint (shoal_server_slice_version (server, s), ==, 1);

  shoal_param_client_free (a);
  shoal_param_client_free (b);
  shoal_server_free (server);
  shoal_param_store_free (sa);
  shoal_param_store_free (sb);
  shoal_param_store_free (layout);
}

/* A comm thread that cannot start (ulimit -v, ulimit -u) is an error
 * naming the unit, not GLib's abort; the client is freed without a
 * thread to stop. */
static void
test_comm_thread_refused (void)
{
  if (g_test_subprocess ())
    {
      ShoalParamStore *layout = make_store (), *store = make_store ();
      ShoalServer *server = make_server (layout, SHOAL_UPDATE_ASYNC);
      ShoalParamClient *c = shoal_param_client_new (store, 4, SHOAL_UPDATE_ASYNC);
      shoal_param_client_set_unit (c, 3);
      for (int s = 0; s < 4; s++)
        shoal_param_client_route_local (c, s, server);
      GError *error = NULL;
      shoal_test_refuse_threads ();
      g_assert_false (shoal_param_client_start (c, &error));
      g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_MEMORY);
      if (!g_str_has_prefix (error->message, "unit 3: cannot start thread comm: ")
          || strstr (error->message, "ulimit -u") == NULL)
        g_error ("unexpected error: %s", error->message);
      g_error_free (error);
      shoal_param_client_free (c);
      shoal_test_uncap_address_space ();
      shoal_server_free (server);
      shoal_param_store_free (store);
      shoal_param_store_free (layout);
      return;
    }
  g_test_trap_subprocess (NULL, 60 * G_USEC_PER_SEC, 0);
  g_test_trap_assert_passed ();
}

/* The wire codecs on the device need a store on a GPU: on the CPU the
 * client says why and stays as it was, encoding on the host. */
static void
test_codecs_on_device_refused (void)
{
  ShoalParamStore *layout = make_store (), *store = make_store ();
  ShoalServer *server = make_server (layout, SHOAL_UPDATE_SYNC);
  ShoalParamClient *c = shoal_param_client_new (store, 4, SHOAL_UPDATE_SYNC);
  GError *error = NULL;
  g_assert_true (shoal_param_client_set_codecs (c, SHOAL_CODEC_FP16, SHOAL_CODEC_2BIT, &error));
  for (int s = 0; s < 4; s++)
    shoal_param_client_route_local (c, s, server);
  g_assert_false (shoal_param_client_codecs_on_device (c, NULL, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
  g_assert_nonnull (strstr (error->message, "not on a GPU"));
  g_clear_error (&error);
  g_assert_true (shoal_param_client_start (c, &error));
  g_assert_no_error (error);
  one_step (c, store, 0, 1.0f);
  for (size_t i = 0; i < 64; i++)
    g_assert_cmpfloat_with_epsilon (store->values[i], 0.5f, 1e-6);
  shoal_param_client_free (c);
  shoal_server_free (server);
  shoal_param_store_free (store);
  shoal_param_store_free (layout);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/param-client/sync-round-trip", test_sync_round_trip);
  g_test_add_func ("/param-client/push-and-fetch-frequency", test_push_and_fetch_frequency);
  g_test_add_func ("/param-client/checkpoint-servers", test_checkpoint_servers);
  g_test_add_func ("/param-client/stop-refuses-step", test_stop_refuses_step);
  g_test_add_func ("/param-client/comm-thread-refused", test_comm_thread_refused);
  g_test_add_func ("/param-client/codecs-on-device-refused", test_codecs_on_device_refused);
  return g_test_run ();
}
