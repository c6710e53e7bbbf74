/* The library's error paths as a program meets them, through
 * <shoal/shoal.h> only: every call fails with the code its header lists,
 * and with each object and GError freed as the headers say, valgrind
 * finds nothing lost and no invalid access (test/e2e/valgrind_api.sh).
 * Usage: api_errors DIR (a scratch folder; plugin files in it) */
#include <shoal/shoal.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>

static int failures;

/* `call` (which passes &e where it takes a GError) must fail with code `want` */
#define EXPECT_FAIL(want, call)                                                              \
  do                                                                                         \
    {                                                                                        \
      GError *e = NULL;                                                                      \
      if (call)                                                                              \
        {                                                                                    \
          printf ("FAIL: %s succeeded\n", #call);                                            \
          failures++;                                                                        \
        }                                                                                    \
      else if (!g_error_matches (e, SHOAL_ERROR, (want)))                                    \
        {                                                                                    \
          printf ("FAIL: %s: expected code %d, got %s\n", #call, (want), e ? e->message : "no error"); \
          failures++;                                                                        \
        }                                                                                    \
      else                                                                                   \
        printf ("%d: %s\n", e->code, e->message);                                            \
      g_clear_error (&e);                                                                    \
    }                                                                                        \
  while (0)
#define ERR &e

static const char net_text[] =
  "[layer x]\ntype = feed\nshape = 4, 3\nlabels = true\n"
  "[layer fc]\ntype = dense\nsrc = x\nnum_output = 2\n"
  "[layer loss]\ntype = softmax_loss\nsrc = fc, x\n";

static char *
in_dir (const char *dir, const char *name)
{
  return g_build_filename (dir, name, NULL);
}

int
main (int argc, char **argv)
{
  if (argc != 2)
    {
      fprintf (stderr, "usage: api_errors DIR\n");
      return 2;
    }
  const char *dir = argv[1];
  char *ok_params = in_dir (dir, "ok.params"), *junk_params = in_dir (dir, "junk.params");
  char *model_conf = in_dir (dir, "m.conf"), *ws = in_dir (dir, "a/b/ws");
  char *silent = in_dir (dir, "libsilent.so"), *noinit = in_dir (dir, "libnoinit.so");

  /* confs */
  EXPECT_FAIL (SHOAL_ERROR_IO, shoal_conf_load_file ("/nonexistent/x.conf", ERR) != NULL);
  EXPECT_FAIL (SHOAL_ERROR_CONF, shoal_conf_load_data ("[layer\n", "bad", ERR) != NULL);
  ShoalConf *conf = shoal_conf_load_data (net_text, "ok.conf", NULL);
  EXPECT_FAIL (SHOAL_ERROR_CONF, shoal_conf_override (conf, "nothing", ERR));
  EXPECT_FAIL (SHOAL_ERROR_CONF, shoal_conf_override (conf, "layer nope.k=1", ERR));
  EXPECT_FAIL (SHOAL_ERROR_CONF, shoal_conf_override (conf, "a[b].k=1", ERR));

  /* nets that do not build, each giving back what it charged */
  const char *bad_nets[] = {
    "[layer x]\ntype = conv3d\n",
    "[layer x]\ntype = feed\nshape = 4, 3\n[layer fc]\ntype = dense\nsrc = x\nnum_output = ten\n",
    "[layer x]\ntype = feed\nshape = 4, 3\n[layer fc]\ntype = dense\nsrc = y\nnum_output = 2\n",
    "[layer x]\ntype = feed\nshape = 4, 3\n[layer a]\ntype = relu\nsrc = b\n[layer b]\ntype = relu\nsrc = a\n",
    "[layer x]\ntype = feed\nshape = 4, 3\n[layr fc]\ntype = dense\nsrc = x\nnum_output = 2\n",
  };
  ShoalMemoryBudget *budget = shoal_memory_budget_new (1 << 20, "the test's budget");
  for (gsize i = 0; i < G_N_ELEMENTS (bad_nets); i++)
    {
      ShoalConf *c = shoal_conf_load_data (bad_nets[i], "bad.conf", NULL);
      ShoalNetOptions o = { .budget = budget };
      EXPECT_FAIL (SHOAL_ERROR_CONF, shoal_net_new (c, &o, ERR) != NULL);
      shoal_conf_free (c);
    }
  ShoalConf *big = shoal_conf_load_data ("[layer x]\ntype = feed\nshape = 64, 4096\n[layer fc]\ntype = dense\n"
                                         "src = x\nnum_output = 4096\n", "big.conf", NULL);
  ShoalNetOptions capped = { .budget = budget };
  EXPECT_FAIL (SHOAL_ERROR_MEMORY, shoal_net_new (big, &capped, ERR) != NULL);
  shoal_conf_free (big);
  ShoalConf *data = shoal_conf_load_data ("[layer d]\ntype = lmdb_input\ntrain = /nonexistent\nbatch_size = 2\n",
                                          "data.conf", NULL);
  EXPECT_FAIL (SHOAL_ERROR_DATA, shoal_net_new (data, NULL, ERR) != NULL);
  shoal_conf_free (data);
  if (shoal_memory_budget_used (budget) != 0)
    {
      printf ("FAIL: the nets that failed left %" G_GUINT64_FORMAT " bytes charged\n", shoal_memory_budget_used (budget));
      failures++;
    }
  shoal_memory_budget_free (budget);

  /* a net, and its calls that fail */
  ShoalNet *net = shoal_net_new (conf, NULL, NULL);
  shoal_param_store_init_values (shoal_net_params (net), 1);
  float x[12] = { 0 }, y[4] = { 0, 1, 0, 1 }, g[8] = { 0 };
  EXPECT_FAIL (SHOAL_ERROR_CONF, shoal_net_feed (net, "nope", x, 4, y, ERR));
  EXPECT_FAIL (SHOAL_ERROR_SHAPE, shoal_net_feed (net, "x", x, 9, y, ERR));
  EXPECT_FAIL (SHOAL_ERROR_CONF, shoal_net_feed (net, "fc", x, 4, y, ERR));
  shoal_net_feed (net, "x", x, 4, y, NULL);
  shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  EXPECT_FAIL (SHOAL_ERROR_CONF, shoal_net_backward_from (net, "fc", g, ERR));
  EXPECT_FAIL (SHOAL_ERROR_IO, shoal_net_save_params (net, "/nonexistent/p", ERR));
  EXPECT_FAIL (SHOAL_ERROR_IO, shoal_net_load_params (net, "/nonexistent/p", SHOAL_PARAMS_EXACT, ERR));
  g_file_set_contents (junk_params, "SHOALPRM\1\0\0\0\5\0\0\0junk", 20, NULL);
  EXPECT_FAIL (SHOAL_ERROR_DATA, shoal_net_load_params (net, junk_params, SHOAL_PARAMS_EXACT, ERR));
  GBytes *junk = g_bytes_new_static ("junk", 4);
  EXPECT_FAIL (SHOAL_ERROR_DATA, shoal_net_load_state (net, junk, ERR));
  EXPECT_FAIL (SHOAL_ERROR_DATA,
               shoal_param_store_load_bytes (shoal_net_params (net), junk, "j", SHOAL_PARAMS_BY_NAME_ANY, NULL, ERR));
  g_bytes_unref (junk);
  GBytes *state = shoal_net_save_state (net);
  g_bytes_unref (state);
  EXPECT_FAIL (SHOAL_ERROR_CONF, shoal_net_gradcheck (net, "nope", NULL, NULL, ERR));
  EXPECT_FAIL (SHOAL_ERROR_CONF, shoal_layer_gradcheck ("[layer x]\ntype = feed\nshape = 2, 3\n[layer a]\ntype = relu\n"
                                                        "src = x\n", "a", NULL, 1, NULL, ERR));
  float st[4];
  EXPECT_FAIL (SHOAL_ERROR_CONF,
               shoal_layer_get_carried_state (shoal_net_find (net, "fc"), SHOAL_PHASE_TRAIN, 0, FALSE, st, 4, ERR));
  char *s = shoal_shape_to_string (shoal_tensor_shape (shoal_layer_out (shoal_net_find (net, "fc"))));
  g_free (s);
  const char **types = shoal_layer_types ();
  g_free (types);
  EXPECT_FAIL (SHOAL_ERROR_MEMORY, shoal_try_alloc_floats ((size_t) 1 << 60, ERR) != NULL);
  if (!shoal_net_save_params (net, ok_params, NULL))
    failures++;
  shoal_net_free (net);

  /* models, jobs, plugins */
  char *job_text = g_strconcat ("[job]\ntrain_steps = 1\n", net_text, NULL);
  g_file_set_contents (model_conf, job_text, -1, NULL);
  const char *const other[] = { "layer fc.num_output=3", NULL };
  ShoalModelOptions other_model = { .overrides = other };
  EXPECT_FAIL (SHOAL_ERROR_SHAPE, shoal_model_load (model_conf, ok_params, &other_model, ERR) != NULL);
  ShoalModelOptions no_output = { .output = "nope" };
  EXPECT_FAIL (SHOAL_ERROR_CONF, shoal_model_load (model_conf, ok_params, &no_output, ERR) != NULL);
  EXPECT_FAIL (SHOAL_ERROR_IO, shoal_model_load (model_conf, dir, NULL, ERR) != NULL);
  ShoalModel *m = shoal_model_load (model_conf, ok_params, NULL, NULL);
  float out[8];
  EXPECT_FAIL (SHOAL_ERROR_SHAPE, shoal_model_predict (m, x, 0, out, ERR));
  shoal_model_free (m);
  ShoalJob *job = shoal_job_load_data (job_text, "j.conf", NULL, NULL);
  EXPECT_FAIL (SHOAL_ERROR_CONF, shoal_job_train (job, ws, FALSE, NULL, ERR));
  shoal_job_free (job);
  EXPECT_FAIL (SHOAL_ERROR_IO, shoal_job_load ("/nonexistent/j.conf", NULL, ERR) != NULL);
  EXPECT_FAIL (SHOAL_ERROR_IO,
               shoal_job_load_data ("[job]\nplugins = /nonexistent/libx.so\n", "j.conf", NULL, ERR) != NULL);
  EXPECT_FAIL (SHOAL_ERROR_IO, shoal_plugin_load ("libshoal-none.so", ERR));
  EXPECT_FAIL (SHOAL_ERROR_INTERNAL, shoal_plugin_load (silent, ERR));
  EXPECT_FAIL (SHOAL_ERROR_UNSUPPORTED, shoal_plugin_load (noinit, ERR));
  g_free (job_text);
  shoal_conf_free (conf);
  g_free (ok_params);
  g_free (junk_params);
  g_free (model_conf);
  g_free (ws);
  g_free (silent);
  g_free (noinit);
  printf ("%d failures\n", failures);
  return failures == 0 ? 0 : 1;
}
