/* Every public entry point with a NULL argument and with bad values, each
 * in a child process (g_test_trap_subprocess), as an application sees
 * the library: only <shoal/shoal.h>.  The child must end normally: a NULL
 * where an object is required logs a critical (GLib's g_return_if_fail)
 * and returns the call's failure value; a bad value returns FALSE or NULL
 * with the GError code the header documents.  A crash is a signal in the
 * child, and the parent fails.
 *
 * Not called with NULL, by design (shoal.h says so): the per-value draws
 * shoal_rng_u32, _below, _uniform and _gaussian (they run once per number
 * drawn), and the update-rule helpers of shoal/updater.h taking a
 * ShoalUpdaterConf or ShoalLrSchedule by pointer (shoal_lr_at,
 * shoal_updater_conf_defaults, shoal_updater_kind_parse,
 * shoal_lr_policy_parse). */
#include <math.h>
#include <string.h>

#include <glib/gstdio.h>

#include <shoal/shoal.h>

static const char net_text[] =
  "[layer x]\ntype = feed\nshape = 4, 3\nlabels = true\n"
  "[layer fc]\ntype = dense\nsrc = x\nnum_output = 2\n"
  "[layer loss]\ntype = softmax_loss\nsrc = fc, x\n";

/* A NULL (or out-of-contract) argument: one critical, and `ok` holds. */
#define EXPECT_CRITICAL(ok)                                                   \
  G_STMT_START                                                                \
  {                                                                           \
    g_test_expect_message (NULL, G_LOG_LEVEL_CRITICAL, "*");                  \
    g_assert_true (ok);                                                       \
    g_test_assert_expected_messages ();                                       \
  }                                                                           \
  G_STMT_END
#define EXPECT_CRITICAL_VOID(call)                                            \
  G_STMT_START                                                                \
  {                                                                           \
    g_test_expect_message (NULL, G_LOG_LEVEL_CRITICAL, "*");                  \
    call;                                                                     \
    g_test_assert_expected_messages ();                                       \
  }                                                                           \
  G_STMT_END
/* A bad value: the call fails with SHOAL_ERROR `code`, nothing logged. */
#define EXPECT_CODE(ok, code)                                                 \
  G_STMT_START                                                                \
  {                                                                           \
    GError *error_ = NULL;                                                    \
    GError **error = &error_;                                                 \
    g_assert_true (ok);                                                       \
    g_assert_error (error_, SHOAL_ERROR, (code));                             \
    g_error_free (error_);                                                    \
  }                                                                           \
  G_STMT_END

static ShoalConf *
make_conf (void)
{
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data (net_text, "pre.conf", &error);
  g_assert_no_error (error);
  return conf;
}

static ShoalNet *
make_net (ShoalConf *conf)
{
  GError *error = NULL;
  ShoalNet *net = shoal_net_new (conf, NULL, &error);
  g_assert_no_error (error);
  shoal_param_store_init_values (shoal_net_params (net), 1);
  return net;
}

/* ---- conf ------------------------------------------------------------------ */

static void
conf_calls (void)
{
  EXPECT_CRITICAL (shoal_conf_load_file (NULL, NULL) == NULL);
  EXPECT_CRITICAL (shoal_conf_load_data (NULL, "x", NULL) == NULL);
  EXPECT_CRITICAL (shoal_conf_origin (NULL) == NULL);
  ShoalConf *conf = make_conf ();
  EXPECT_CRITICAL (!shoal_conf_override (NULL, "job.name=x", NULL));
  EXPECT_CRITICAL (!shoal_conf_override (conf, NULL, NULL));
  EXPECT_CODE (!shoal_conf_override (conf, "no assignment", error), SHOAL_ERROR_CONF);
  /* what a key file cannot hold: a bracket in a section name (GLib refused it with a critical
   * and the call said TRUE), a line break in a value (it added lines of its own to job.conf) */
  EXPECT_CODE (!shoal_conf_override (conf, "a[b].k=v", error), SHOAL_ERROR_CONF);
  EXPECT_CODE (!shoal_conf_override (conf, "layer x.shape=1\n[job]\nname=y", error), SHOAL_ERROR_CONF);
  EXPECT_CODE (!shoal_conf_override (conf, "layer x.ke\ty=1", error), SHOAL_ERROR_CONF);
  EXPECT_CODE (shoal_conf_load_file ("/nonexistent/pre.conf", error) == NULL, SHOAL_ERROR_IO);
  EXPECT_CODE (shoal_conf_load_data ("[layer\nx", "bad", error) == NULL, SHOAL_ERROR_CONF);
  /* an origin of NULL (allowed): messages printed it with %s, "(null):2: ..." */
  GError *local = NULL;
  g_assert_null (shoal_conf_load_data ("[layer\nx", NULL, &local));
  g_assert_true (g_str_has_prefix (local->message, "conf text: "));
  g_clear_error (&local);
  ShoalConf *unnamed = shoal_conf_load_data ("[layer x]\ntype = conv3d\n", NULL, &local);
  g_assert_no_error (local);
  g_assert_cmpstr (shoal_conf_origin (unnamed), ==, "conf text");
  g_assert_null (shoal_net_new (unnamed, NULL, &local));
  g_assert_true (g_str_has_prefix (local->message, "conf text:2: [layer x] type: "));
  g_clear_error (&local);
  shoal_conf_free (unnamed);
  shoal_conf_free (NULL);
  shoal_conf_free (conf);
}

/* ---- nets ------------------------------------------------------------------ */

static int ready_calls;

static void
ready_count (ShoalLayer *layer, gpointer user_data)
{
  (void) layer;
  (*(int *) user_data)++;
}

static void
net_calls (void)
{
  ShoalConf *conf = make_conf ();
  ShoalNet *net = make_net (conf);
  float x[12] = { 0 }, y[4] = { 0 }, grad[8] = { 0 };
  ShoalMetric m[2];

  EXPECT_CRITICAL (shoal_net_new (NULL, NULL, NULL) == NULL);
  /* counts below zero: taken as their defaults, silently */
  ShoalNetOptions negative = { .shard_count = -1 };
  EXPECT_CRITICAL (shoal_net_new (conf, &negative, NULL) == NULL);
  negative = (ShoalNetOptions) { .cd_k = -3 };
  EXPECT_CRITICAL (shoal_net_new (conf, &negative, NULL) == NULL);
  /* a misspelt section: the net was built without that layer */
  ShoalConf *typo = shoal_conf_load_data ("[layer x]\ntype = feed\nshape = 2, 3\n[layr fc]\ntype = dense\n"
                                          "src = x\nnum_output = 2\n", "typo.conf", NULL);
  EXPECT_CODE (shoal_net_new (typo, NULL, error) == NULL, SHOAL_ERROR_CONF);
  shoal_conf_free (typo);
  EXPECT_CRITICAL (!shoal_net_feed (NULL, "x", x, 4, y, NULL));
  EXPECT_CRITICAL (!shoal_net_feed (net, NULL, x, 4, y, NULL));
  EXPECT_CRITICAL (!shoal_net_feed (net, "x", NULL, 4, y, NULL));
  EXPECT_CODE (!shoal_net_feed (net, "x", x, 0, y, error), SHOAL_ERROR_SHAPE);
  EXPECT_CODE (!shoal_net_feed (net, "x", x, 5, y, error), SHOAL_ERROR_SHAPE);
  EXPECT_CODE (!shoal_net_feed (net, "nope", x, 4, y, error), SHOAL_ERROR_CONF);
  EXPECT_CODE (!shoal_net_feed (net, "fc", x, 4, y, error), SHOAL_ERROR_CONF);
  EXPECT_CRITICAL (isnan (shoal_net_forward (NULL, SHOAL_PHASE_TRAIN)));
  EXPECT_CRITICAL (isnan (shoal_net_forward (net, (ShoalPhase) 7)));
  EXPECT_CRITICAL_VOID (shoal_net_backward (NULL));
  EXPECT_CRITICAL_VOID (shoal_net_backward_notify (NULL, NULL, NULL));
  /* backward with no forward, and after a test forward */
  EXPECT_CRITICAL_VOID (shoal_net_backward (net));
  /* the same through backward_notify, which runs backward now (its
   * critical named shoal_net_backward) */
  g_test_expect_message (NULL, G_LOG_LEVEL_CRITICAL, "shoal_net_backward_notify: no train forward*");
  shoal_net_backward_notify (net, ready_count, &ready_calls);
  g_test_assert_expected_messages ();
  g_assert_cmpint (ready_calls, ==, 0);
  EXPECT_CODE (!shoal_net_backward_from (net, "loss", grad, error), SHOAL_ERROR_CONF);
  shoal_net_forward (net, SHOAL_PHASE_TEST);
  EXPECT_CRITICAL_VOID (shoal_net_backward (net));
  EXPECT_CRITICAL (!shoal_net_backward_from (NULL, "loss", grad, NULL));
  EXPECT_CRITICAL (!shoal_net_backward_from (net, NULL, grad, NULL));
  EXPECT_CRITICAL (!shoal_net_backward_from (net, "loss", NULL, NULL));
  EXPECT_CODE (!shoal_net_backward_from (net, "nope", grad, error), SHOAL_ERROR_CONF);

  EXPECT_CRITICAL (shoal_net_params (NULL) == NULL);
  EXPECT_CRITICAL (shoal_net_n_layers (NULL) == 0);
  EXPECT_CRITICAL (shoal_net_layer (NULL, 0) == NULL);
  EXPECT_CRITICAL (shoal_net_layer (net, 99) == NULL);
  EXPECT_CRITICAL (shoal_net_find (NULL, "x") == NULL);
  EXPECT_CRITICAL (shoal_net_find (net, NULL) == NULL);
  g_assert_null (shoal_net_find (net, "nope"));
  EXPECT_CRITICAL (shoal_net_input (NULL) == NULL);
  EXPECT_CRITICAL (shoal_net_metrics (NULL, m, 2) == 0);
  EXPECT_CRITICAL (shoal_net_metrics (net, NULL, 2) == 0);
  g_assert_cmpuint (shoal_net_metrics (net, NULL, 0), ==, 0);
  EXPECT_CRITICAL (shoal_net_batch_rows (NULL) == 0);
  EXPECT_CRITICAL (shoal_net_save_state (NULL) == NULL);
  EXPECT_CRITICAL (!shoal_net_load_state (NULL, NULL, NULL));
  EXPECT_CRITICAL (!shoal_net_load_state (net, NULL, NULL));
  GBytes *junk = g_bytes_new_static ("junk", 4);
  EXPECT_CODE (!shoal_net_load_state (net, junk, error), SHOAL_ERROR_DATA);
  g_bytes_unref (junk);
  EXPECT_CRITICAL_VOID (shoal_net_log_summary (NULL));
  EXPECT_CRITICAL (!shoal_net_save_params (NULL, "p", NULL));
  EXPECT_CRITICAL (!shoal_net_save_params (net, NULL, NULL));
  EXPECT_CODE (!shoal_net_save_params (net, "/nonexistent/dir/p", error), SHOAL_ERROR_IO);
  EXPECT_CRITICAL (!shoal_net_load_params (NULL, "p", SHOAL_PARAMS_BY_NAME_ALL, NULL));
  EXPECT_CRITICAL (!shoal_net_load_params (net, NULL, SHOAL_PARAMS_BY_NAME_ALL, NULL));
  EXPECT_CODE (!shoal_net_load_params (net, "/nonexistent/p", SHOAL_PARAMS_BY_NAME_ALL, error),
               SHOAL_ERROR_IO);
  shoal_net_free (NULL);
  shoal_net_free (net);
  shoal_conf_free (conf);
}

/* ---- gradient checks -------------------------------------------------------------- */

static void
gradcheck_calls (void)
{
  ShoalConf *conf = make_conf ();
  ShoalNet *net = make_net (conf);
  EXPECT_CRITICAL_VOID (shoal_gradcheck_options_init (NULL));
  EXPECT_CRITICAL (!shoal_net_gradcheck (NULL, "fc", NULL, NULL, NULL));
  EXPECT_CRITICAL (!shoal_net_gradcheck (net, NULL, NULL, NULL, NULL));
  EXPECT_CODE (!shoal_net_gradcheck (net, "nope", NULL, NULL, error), SHOAL_ERROR_CONF);
  EXPECT_CRITICAL (!shoal_layer_gradcheck (NULL, "fc", NULL, 1, NULL, NULL));
  EXPECT_CRITICAL (!shoal_layer_gradcheck (net_text, NULL, NULL, 1, NULL, NULL));
  EXPECT_CODE (!shoal_layer_gradcheck ("[layer x]\ntype = conv3d\n", "x", NULL, 1, NULL, error),
               SHOAL_ERROR_CONF);
  /* a phase that is neither, a step that is none: it passed, checking nothing */
  ShoalGradcheckOptions opts;
  shoal_gradcheck_options_init (&opts);
  opts.phase = (ShoalPhase) 7;
  EXPECT_CRITICAL (!shoal_net_gradcheck (net, "fc", &opts, NULL, NULL));
  shoal_gradcheck_options_init (&opts);
  opts.eps = 0;
  EXPECT_CRITICAL (!shoal_net_gradcheck (net, "fc", &opts, NULL, NULL));
  shoal_gradcheck_options_init (&opts);
  opts.max_checks = -5;
  EXPECT_CRITICAL (!shoal_net_gradcheck (net, "fc", &opts, NULL, NULL));
  /* nothing to compare (no params, the feed needs no gradient): it passed with 0 compared */
  int checked = -1;
  EXPECT_CODE (!shoal_layer_gradcheck ("[layer x]\ntype = feed\nshape = 2, 3\n[layer a]\ntype = relu\nsrc = x\n",
                                       "a", NULL, 1, &checked, error), SHOAL_ERROR_CONF);
  g_assert_cmpint (checked, ==, 0);
  shoal_net_free (net);
  shoal_conf_free (conf);
}

/* ---- models and jobs -------------------------------------------------------------- */

static void
model_calls (void)
{
  char *dir = g_dir_make_tmp ("shoal-pre-XXXXXX", NULL);
  char *conf_path = g_build_filename (dir, "m.conf", NULL);
  char *params = g_build_filename (dir, "m.params", NULL);
  char *job_text = g_strconcat ("[job]\ntrain_steps = 1\n", net_text, NULL);
  g_assert_true (g_file_set_contents (conf_path, job_text, -1, NULL));
  g_free (job_text);
  ShoalConf *conf = make_conf ();
  ShoalNet *net = make_net (conf);
  g_assert_true (shoal_net_save_params (net, params, NULL));
  GError *local = NULL;
  ShoalModel *model = shoal_model_load (conf_path, params, NULL, &local);
  g_assert_no_error (local);
  float x[6] = { 0 }, out[4];

  EXPECT_CRITICAL (shoal_model_load (NULL, params, NULL, NULL) == NULL);
  EXPECT_CRITICAL (shoal_model_load (conf_path, NULL, NULL, NULL) == NULL);
  EXPECT_CODE (shoal_model_load ("/nonexistent/m.conf", params, NULL, error) == NULL, SHOAL_ERROR_IO);
  EXPECT_CODE (shoal_model_load (conf_path, "/nonexistent/p", NULL, error) == NULL, SHOAL_ERROR_IO);
  EXPECT_CRITICAL (shoal_model_net (NULL) == NULL);
  EXPECT_CRITICAL (shoal_model_input_size (NULL) == 0);
  EXPECT_CRITICAL (shoal_model_output_size (NULL) == 0);
  EXPECT_CRITICAL (!shoal_model_predict (NULL, x, 2, out, NULL));
  EXPECT_CRITICAL (!shoal_model_predict (model, NULL, 2, out, NULL));
  EXPECT_CRITICAL (!shoal_model_predict (model, x, 2, NULL, NULL));
  EXPECT_CODE (!shoal_model_predict (model, x, 0, out, error), SHOAL_ERROR_SHAPE);
  EXPECT_CODE (!shoal_model_predict (model, x, -3, out, error), SHOAL_ERROR_SHAPE);
  shoal_model_free (NULL);
  shoal_model_free (model);
  shoal_net_free (net);
  shoal_conf_free (conf);
  g_unlink (params);
  g_unlink (conf_path);
  g_rmdir (dir);
  g_free (params);
  g_free (conf_path);
  g_free (dir);
}

static void
job_calls (void)
{
  EXPECT_CRITICAL (shoal_job_load (NULL, NULL, NULL) == NULL);
  EXPECT_CRITICAL (shoal_job_load_data (NULL, "x", NULL, NULL) == NULL);
  EXPECT_CODE (shoal_job_load ("/nonexistent/job.conf", NULL, error) == NULL, SHOAL_ERROR_IO);
  /* a [job] plugin that is not there: IO, as shoal_plugin_load says, with the conf's line */
  EXPECT_CODE (shoal_job_load_data ("[job]\ntrain_steps = 2\nplugins = /nonexistent/libnone.so\n", "j.conf",
                                    NULL, error) == NULL, SHOAL_ERROR_IO);
  const char *const bad[] = { "job.train_steps", NULL };
  EXPECT_CODE (shoal_job_load_data ("[job]\ntrain_steps = 2\n", "j.conf", bad, error) == NULL,
               SHOAL_ERROR_CONF);
  GError *local = NULL;
  ShoalJob *job = shoal_job_load_data ("[job]\ntrain_steps = 2\n", "j.conf", NULL, &local);
  g_assert_no_error (local);
  EXPECT_CRITICAL (!shoal_job_train (NULL, "ws", FALSE, NULL, NULL));
  EXPECT_CRITICAL (!shoal_job_train (job, NULL, FALSE, NULL, NULL));
  shoal_job_free (NULL);
  shoal_job_free (job);

  /* a refused run leaves no folder behind, nor the parents it made for
   * its workspace (it left them: a later save into them then succeeded) */
  char *job_text = g_strconcat ("[job]\ntrain_steps = 1\n", net_text, NULL);
  job = shoal_job_load_data (job_text, "j.conf", NULL, &local);
  g_free (job_text);
  g_assert_no_error (local);
  char *dir = g_dir_make_tmp ("shoal-pre-XXXXXX", NULL);
  char *top = g_build_filename (dir, "a", NULL);
  char *ws = g_build_filename (top, "b", "ws", NULL);
  EXPECT_CODE (!shoal_job_train (job, ws, FALSE, NULL, error), SHOAL_ERROR_CONF);
  g_assert_false (g_file_test (top, G_FILE_TEST_EXISTS));
  g_assert_true (g_file_test (dir, G_FILE_TEST_IS_DIR));
  shoal_job_free (job);
  g_rmdir (dir);
  g_free (ws);
  g_free (top);
  g_free (dir);
}

static void
plugin_calls (void)
{
  EXPECT_CRITICAL (!shoal_plugin_load (NULL, NULL));
  EXPECT_CODE (!shoal_plugin_load ("/nonexistent/libnone.so", error), SHOAL_ERROR_IO);
  EXPECT_CODE (!shoal_plugin_load ("libshoal-no-such-plugin.so", error), SHOAL_ERROR_IO);
  /* a name without '/' is looked for in SHOAL_PLUGIN_PATH and the plugin
   * directory, never in the working directory (it loaded ./NAME) */
  char *dir = g_dir_make_tmp ("shoal-pre-XXXXXX", NULL);
  char *here = g_build_filename (dir, "libshoal-pre-cwd.so", NULL);
  g_assert_true (g_file_set_contents (here, "not a plugin", -1, NULL));
  char *cwd = g_get_current_dir ();
  g_assert_cmpint (g_chdir (dir), ==, 0);
  g_unsetenv ("SHOAL_PLUGIN_PATH");
  GError *local = NULL;
  g_assert_false (shoal_plugin_load ("libshoal-pre-cwd.so", &local));
  g_assert_error (local, SHOAL_ERROR, SHOAL_ERROR_IO);
  g_assert_nonnull (strstr (local->message, "libshoal-pre-cwd.so: no such file (looked in SHOAL_PLUGIN_PATH and "));
  g_clear_error (&local);
  g_assert_cmpint (g_chdir (cwd), ==, 0);
  g_unlink (here);
  g_rmdir (dir);
  g_free (cwd);
  g_free (here);
  g_free (dir);
}

/* ---- params, updaters, budgets, tensors, random streams ---------------------------- */

static void
param_calls (void)
{
  ShoalConf *conf = make_conf ();
  ShoalNet *net = make_net (conf);
  ShoalParamStore *store = shoal_net_params (net);
  EXPECT_CRITICAL (shoal_param_name (NULL) == NULL);
  EXPECT_CRITICAL (shoal_param_shape (NULL) == NULL);
  EXPECT_CRITICAL (shoal_param_value (NULL) == NULL);
  EXPECT_CRITICAL (shoal_param_grad (NULL) == NULL);
  EXPECT_CRITICAL (shoal_param_lr_scale (NULL) == 0);
  EXPECT_CRITICAL (shoal_param_wd_scale (NULL) == 0);
  EXPECT_CRITICAL (!shoal_param_is_statistic (NULL));
  EXPECT_CRITICAL (shoal_param_store_n_params (NULL) == 0);
  EXPECT_CRITICAL (shoal_param_store_get (NULL, 0) == NULL);
  g_assert_null (shoal_param_store_get (store, 99));
  EXPECT_CRITICAL (shoal_param_store_find (NULL, "fc/weight") == NULL);
  EXPECT_CRITICAL (shoal_param_store_find (store, NULL) == NULL);
  EXPECT_CRITICAL (shoal_param_store_values (NULL) == NULL);
  EXPECT_CRITICAL (shoal_param_store_grads (NULL) == NULL);
  EXPECT_CRITICAL (shoal_param_store_size (NULL) == 0);
  EXPECT_CRITICAL_VOID (shoal_param_store_init_values (NULL, 1));
  EXPECT_CRITICAL_VOID (shoal_param_store_zero_grads (NULL));
  EXPECT_CRITICAL (shoal_param_store_to_bytes (NULL) == NULL);
  GBytes *junk = g_bytes_new_static ("junk", 4);
  EXPECT_CRITICAL (!shoal_param_store_load_bytes (NULL, junk, "j", SHOAL_PARAMS_BY_NAME_ANY, NULL, NULL));
  EXPECT_CRITICAL (!shoal_param_store_load_bytes (store, NULL, "j", SHOAL_PARAMS_BY_NAME_ANY, NULL, NULL));
  EXPECT_CODE (!shoal_param_store_load_bytes (store, junk, "j", SHOAL_PARAMS_BY_NAME_ANY, NULL, error),
               SHOAL_ERROR_DATA);
  g_bytes_unref (junk);

  ShoalUpdaterConf uc;
  shoal_updater_conf_defaults (&uc, SHOAL_UPDATER_SGD);
  EXPECT_CRITICAL (shoal_updater_new (NULL, store) == NULL);
  EXPECT_CRITICAL (shoal_updater_new (&uc, NULL) == NULL);
  ShoalUpdater *u = shoal_updater_new (&uc, store);
  EXPECT_CRITICAL (shoal_updater_step (NULL, 0) == 0);
  EXPECT_CRITICAL (shoal_updater_step (u, -1) == 0);
  /* a kind none of the enum's values: it made an updater that updated nothing */
  ShoalUpdaterConf bad_kind = uc;
  bad_kind.kind = (ShoalUpdaterKind) 42;
  EXPECT_CRITICAL (shoal_updater_new (&bad_kind, store) == NULL);
  ShoalUpdaterConf bad_policy = uc;
  bad_policy.schedule.policy = (ShoalLrPolicy) 42;
  EXPECT_CRITICAL (shoal_updater_new (&bad_policy, store) == NULL);
  shoal_updater_free (NULL);
  shoal_updater_free (u);
  shoal_net_free (net);
  shoal_conf_free (conf);
}

static void
tensor_calls (void)
{
  EXPECT_CRITICAL (shoal_shape_make (SHOAL_MAX_DIMS + 1).ndim == 0);
  EXPECT_CRITICAL (shoal_shape_make (-1).ndim == 0);
  /* a negative dim counted as 2^64 - 3 floats */
  EXPECT_CRITICAL (shoal_shape_make (2, 4, -3).ndim == 0);
  ShoalShape negative = { 2, { 4, -3 } };
  EXPECT_CRITICAL (shoal_shape_count (&negative) == 0);
  EXPECT_CRITICAL (shoal_shape_row_size (&negative) == 0);
  EXPECT_CRITICAL (shoal_shape_count (NULL) == 0);
  EXPECT_CRITICAL (shoal_shape_row_size (NULL) == 0);
  ShoalShape s = shoal_shape_make (2, 3, 4);
  EXPECT_CRITICAL (!shoal_shape_equal (NULL, &s));
  EXPECT_CRITICAL (!shoal_shape_equal (&s, NULL));
  EXPECT_CRITICAL (shoal_shape_to_string (NULL) == NULL);
  EXPECT_CRITICAL (shoal_tensor_data (NULL) == NULL);
  EXPECT_CRITICAL (shoal_tensor_shape (NULL) == NULL);
  EXPECT_CRITICAL (shoal_tensor_rows (NULL) == 0);
  EXPECT_CRITICAL (shoal_tensor_count (NULL) == 0);
  EXPECT_CRITICAL (shoal_tensor_row_size (NULL) == 0);
  EXPECT_CRITICAL (shoal_tensor_device (NULL).kind == SHOAL_DEVICE_CPU);
  EXPECT_CODE (shoal_try_alloc_floats ((size_t) 1 << 61, error) == NULL, SHOAL_ERROR_MEMORY);
  EXPECT_CODE (shoal_try_alloc_bytes ((size_t) 1 << 62, error) == NULL, SHOAL_ERROR_MEMORY);
  shoal_free_aligned (NULL);

  EXPECT_CRITICAL (shoal_memory_budget_limit (NULL) == 0);
  EXPECT_CRITICAL (shoal_memory_budget_used (NULL) == 0);
  shoal_memory_budget_free (NULL);

  EXPECT_CRITICAL_VOID (shoal_rng_seed (NULL, 1, 1));
  EXPECT_CRITICAL_VOID (shoal_rng_shuffle_u32 (NULL, NULL, 0));
  ShoalRng rng;
  shoal_rng_seed (&rng, 1, 1);
  EXPECT_CRITICAL_VOID (shoal_rng_shuffle_u32 (&rng, NULL, 3));
  /* [0, 0) is empty: it divided by zero (SIGFPE) */
  EXPECT_CRITICAL (shoal_rng_below (&rng, 0) == 0);
  /* an ndim past dim[]: they read beyond the struct */
  ShoalShape wide = shoal_shape_make (2, 3, 4);
  wide.ndim = SHOAL_MAX_DIMS + 5;
  EXPECT_CRITICAL (shoal_shape_count (&wide) == 0);
  EXPECT_CRITICAL (shoal_shape_row_size (&wide) == 0);
  EXPECT_CRITICAL (shoal_shape_to_string (&wide) == NULL);
  EXPECT_CRITICAL (!shoal_shape_equal (&wide, &wide));
}

/* ---- layers: the accessors, the option getters, the registry ----------------------- */

static gboolean
pass_setup (ShoalLayer *layer, GError **error)
{
  (void) error;
  shoal_layer_set_out_shape (layer, shoal_tensor_shape (shoal_layer_src_out (layer, 0)));
  return TRUE;
}

static void
pass_forward (ShoalLayer *layer, ShoalPhase phase)
{
  (void) layer;
  (void) phase;
}

static const ShoalOption ten_default[] = {
  { "k", SHOAL_OPT_INT, "ten", SHOAL_UNBOUNDED, NULL, "an int whose default is none" }, SHOAL_OPTION_END
};
static const ShoalOption no_type[] = {
  { "k", (ShoalOptType) 99, "1", SHOAL_UNBOUNDED, NULL, "a type that is none" }, SHOAL_OPTION_END
};
static const ShoalOption one_key_twice[] = {
  { "k", SHOAL_OPT_INT, "1", SHOAL_UNBOUNDED, NULL, "k" },
  { "k", SHOAL_OPT_FLOAT, "1", SHOAL_UNBOUNDED, NULL, "k again" }, SHOAL_OPTION_END
};
#define PASS_OPS(name, table) { .type = (name), .min_srcs = 1, .max_srcs = 1, .options = (table), \
                                .setup = pass_setup, .forward = pass_forward }
static const ShoalLayerOps empty_name = PASS_OPS ("", NULL);
static const ShoalLayerOps bad_default = PASS_OPS ("pre_bad_default", ten_default);
static const ShoalLayerOps bad_type = PASS_OPS ("pre_bad_type", no_type);
static const ShoalLayerOps twice = PASS_OPS ("pre_twice", one_key_twice);

static void
layer_calls (void)
{
  ShoalConf *conf = make_conf ();
  ShoalNet *net = make_net (conf);
  ShoalLayer *fc = shoal_net_find (net, "fc");
  ShoalShape s = shoal_shape_make (1, 2);
  gsize n = 0;
  EXPECT_CRITICAL (shoal_layer_name (NULL) == NULL);
  EXPECT_CRITICAL (shoal_layer_ops (NULL) == NULL);
  EXPECT_CRITICAL (shoal_layer_n_srcs (NULL) == 0);
  EXPECT_CRITICAL (shoal_layer_src (NULL, 0) == NULL);
  g_assert_null (shoal_layer_src (fc, 5));
  EXPECT_CRITICAL (shoal_layer_src_out (NULL, 0) == NULL);
  EXPECT_CRITICAL (shoal_layer_src_grad (NULL, 0) == NULL);
  EXPECT_CRITICAL (shoal_layer_out (NULL) == NULL);
  EXPECT_CRITICAL (shoal_layer_grad (NULL) == NULL);
  EXPECT_CRITICAL (shoal_layer_label (NULL) == NULL);
  EXPECT_CRITICAL_VOID (shoal_layer_set_out_shape (NULL, &s));
  EXPECT_CRITICAL_VOID (shoal_layer_set_out_shape (fc, NULL));
  EXPECT_CRITICAL (shoal_layer_n_params (NULL) == 0);
  EXPECT_CRITICAL (shoal_layer_param (NULL, 0) == NULL);
  g_assert_null (shoal_layer_param (fc, 9));
  EXPECT_CRITICAL (shoal_layer_priv (NULL) == NULL);
  EXPECT_CRITICAL (shoal_layer_rng (NULL) == NULL);
  EXPECT_CRITICAL (shoal_layer_loss_scale (NULL, 4) == 0);
  EXPECT_CRITICAL (shoal_layer_device (NULL).kind == SHOAL_DEVICE_CPU);
  EXPECT_CRITICAL (shoal_layer_opt_int (NULL, "num_output") == 0);
  EXPECT_CRITICAL (shoal_layer_opt_int (fc, NULL) == 0);
  EXPECT_CRITICAL (shoal_layer_opt_float (NULL, "k") == 0);
  EXPECT_CRITICAL (!shoal_layer_opt_bool (NULL, "bias"));
  EXPECT_CRITICAL (shoal_layer_opt_string (NULL, "k") == NULL);
  EXPECT_CRITICAL (shoal_layer_opt_int_list (NULL, "k", &n) == NULL);
  EXPECT_CRITICAL (shoal_layer_opt_int_list (fc, "k", NULL) == NULL);
  EXPECT_CRITICAL (!shoal_layer_opt_is_set (NULL, "bias"));
  EXPECT_CRITICAL_VOID (shoal_layer_error (NULL, NULL, "k", "%s", "x"));
  EXPECT_CRITICAL (shoal_layer_declare_param (NULL, "weight", &s, 1, 1, NULL, NULL) == NULL);
  EXPECT_CRITICAL (shoal_layer_declare_param (fc, NULL, &s, 1, 1, NULL, NULL) == NULL);
  EXPECT_CRITICAL (shoal_layer_declare_statistic (NULL, "mean", &s, NULL, NULL) == NULL);
  EXPECT_CRITICAL (!shoal_layer_check_labels (NULL, NULL));
  /* a layer of one source (it read a second that is not there: SIGSEGV) */
  EXPECT_CODE (!shoal_layer_check_labels (fc, error), SHOAL_ERROR_CONF);
  int steps = 0, classes = 0;
  EXPECT_CODE (!shoal_layer_check_step_labels (fc, &steps, &classes, error), SHOAL_ERROR_CONF);
  EXPECT_CRITICAL (!shoal_layer_check_step_labels (fc, NULL, NULL, NULL));
  /* a key the type's table lacks (it aborted the process with g_error) */
  EXPECT_CRITICAL (shoal_layer_opt_int (fc, "no_such_key") == 0);
  EXPECT_CRITICAL (shoal_layer_opt_string (fc, "no_such_key") == NULL);
  n = 7;
  EXPECT_CRITICAL_VOID (g_free (shoal_layer_opt_int_list (fc, "no_such_key", &n)));
  g_assert_cmpuint (n, ==, 0);
  /* no default init (it dereferenced NULL), a shape past dim[] */
  ShoalInitSpec init = { .kind = SHOAL_INIT_CONSTANT };
  EXPECT_CRITICAL (shoal_layer_declare_param (fc, "weight", &s, 1, 1, NULL, NULL) == NULL);
  ShoalShape wide = s;
  wide.ndim = SHOAL_MAX_DIMS + 5;
  EXPECT_CRITICAL (shoal_layer_declare_param (fc, "weight", &wide, 1, 1, &init, NULL) == NULL);
  /* outside setup: the output is allocated for its shape, another would
   * make forward write past it */
  ShoalShape big = shoal_shape_make (2, 1000, 1000);
  EXPECT_CRITICAL_VOID (shoal_layer_set_out_shape (fc, &big));
  EXPECT_CRITICAL_VOID (shoal_layer_set_out_shape (fc, &wide));
  g_assert_cmpint (shoal_tensor_count (shoal_layer_out (fc)), ==, 8);
  EXPECT_CRITICAL (!shoal_layer_check_step_labels (NULL, NULL, NULL, NULL));
  EXPECT_CRITICAL (!shoal_layer_check_window (NULL, "kernel", "kernel", 4, 4, 2, 2, 0, 0, NULL));

  float state[4];
  EXPECT_CRITICAL (!shoal_layer_get_carried_state (NULL, SHOAL_PHASE_TRAIN, 0, FALSE, state, 4, NULL));
  EXPECT_CRITICAL (!shoal_layer_get_carried_state (fc, SHOAL_PHASE_TRAIN, 0, FALSE, NULL, 4, NULL));
  EXPECT_CODE (!shoal_layer_get_carried_state (fc, SHOAL_PHASE_TRAIN, 0, FALSE, state, 4, error), SHOAL_ERROR_CONF);
  EXPECT_CRITICAL (!shoal_layer_get_carried_state (fc, (ShoalPhase) 9, 0, FALSE, state, 4, NULL));
  EXPECT_CRITICAL (!shoal_layer_set_carried_state (fc, (ShoalPhase) 9, 0, FALSE, state, 4, NULL));
  EXPECT_CRITICAL (!shoal_layer_set_carried_state (NULL, SHOAL_PHASE_TRAIN, 0, FALSE, state, 4, NULL));
  EXPECT_CRITICAL (!shoal_layer_set_carried_state (fc, SHOAL_PHASE_TRAIN, 0, FALSE, NULL, 4, NULL));
  EXPECT_CODE (!shoal_layer_set_carried_state (fc, SHOAL_PHASE_TRAIN, 0, FALSE, state, 4, error), SHOAL_ERROR_CONF);

  EXPECT_CRITICAL (shoal_layer_lookup (NULL) == NULL);
  g_assert_null (shoal_layer_lookup ("no-such-type"));
  EXPECT_CRITICAL (!shoal_layer_register (NULL, NULL));
  static const ShoalLayerOps nameless = { .summary = "no type" };
  EXPECT_CODE (!shoal_layer_register (&nameless, error), SHOAL_ERROR_INTERNAL);
  EXPECT_CODE (!shoal_layer_register (shoal_layer_lookup ("dense"), error), SHOAL_ERROR_CONF);
  /* tables that break the contract: they registered, and their getters
   * logged "was not validated" at every use */
  EXPECT_CODE (!shoal_layer_register (&empty_name, error), SHOAL_ERROR_INTERNAL);
  EXPECT_CODE (!shoal_layer_register (&bad_default, error), SHOAL_ERROR_INTERNAL);
  EXPECT_CODE (!shoal_layer_register (&bad_type, error), SHOAL_ERROR_INTERNAL);
  EXPECT_CODE (!shoal_layer_register (&twice, error), SHOAL_ERROR_INTERNAL);
  g_assert_null (shoal_layer_lookup ("pre_bad_default"));
  EXPECT_CRITICAL_VOID (shoal_layer_register_gpu (NULL, NULL));
  EXPECT_CRITICAL (shoal_layer_gpu_ops (NULL) == NULL);
  shoal_net_free (net);
  shoal_conf_free (conf);
}

typedef struct {
  const char *path;
  void (*calls) (void);
} Group;

static const Group groups[] = {
  { "/preconditions/conf", conf_calls },
  { "/preconditions/net", net_calls },
  { "/preconditions/gradcheck", gradcheck_calls },
  { "/preconditions/model", model_calls },
  { "/preconditions/job", job_calls },
  { "/preconditions/plugin", plugin_calls },
  { "/preconditions/param-updater", param_calls },
  { "/preconditions/tensor-budget-rng", tensor_calls },
  { "/preconditions/layer", layer_calls },
};

/* The parent runs each group in a child: it passes when the child ran every
 * call to the end (no signal, no failed assertion). */
static void
run_group (gconstpointer data)
{
  const Group *g = data;
  if (g_test_subprocess ())
    {
      g->calls ();
      return;
    }
  g_test_trap_subprocess (NULL, 60 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed ();
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS (groups); i++)
    g_test_add_data_func (groups[i].path, &groups[i], run_group);
  return g_test_run ();
}
