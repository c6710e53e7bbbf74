/* A program that uses shoal as a library, through <shoal/shoal.h> only:
 * it builds a net from conf text, trains it on its own arrays (a noisy
 * three-armed spiral) with its own loop and a ShoalUpdater, saves the
 * params, loads them into a fresh net and checks that it predicts exactly
 * what the trained one did.  With --plugin it first loads a layer plugin
 * (libswish.so, built from swish.c) and checks the plugin's gradient, and
 * the conf may then use its type:
 *
 *   app --plugin ./libswish.so -o "layer act.type=swish" -o "layer act.beta=2"
 *
 * Build: `make` next to this file (pkg-config shoal).  See README.md. */
#include <shoal/shoal.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#define BATCH 64
#define CLASSES 3
#define PER_CLASS 130
#define POINTS (PER_CLASS * CLASSES)  /* 390: six full batches and one of 6 rows */

/* The net: 2 inputs -> 64 hidden units -> 3 class scores.  `labels = true`
 * makes the feed carry one label per row, given with the data. */
static const char net_conf[] =
  "[layer data]\n"
  "type = feed\n"
  "shape = 64, 2\n"
  "labels = true\n"
  "\n"
  "[layer fc1]\n"
  "type = dense\n"
  "src = data\n"
  "num_output = 64\n"
  "weight_init = glorot_uniform\n"
  "\n"
  "[layer act]\n"
  "type = relu\n"
  "src = fc1\n"
  "\n"
  "[layer fc2]\n"
  "type = dense\n"
  "src = act\n"
  "num_output = 3\n"
  "\n"
  "[layer loss]\n"
  "type = softmax_loss\n"
  "src = fc2, data\n"
  "\n"
  "[layer accuracy]\n"
  "type = accuracy\n"
  "src = fc2, data\n";

/* A tiny net around the plugin's layer for the gradient check: the
 * checker fills the feed with gaussian data and compares the layer's
 * backward with central differences (need_grad asks for d/d input). */
static const char swish_check_conf[] =
  "[layer x]\ntype = feed\nshape = 4, 5\nneed_grad = true\n"
  "[layer y]\ntype = swish\nsrc = x\nbeta = 1.7\n";

/* ---- the data: three interleaved spiral arms, noisy ---------------------- */
static void
make_spiral (float *xy, float *label, ShoalRng *rng)
{
  for (int c = 0; c < CLASSES; c++)
    for (int i = 0; i < PER_CLASS; i++)
      {
        int k = c * PER_CLASS + i;
        float r = (float) i / PER_CLASS;
        float t = 4.0f * r + 2.0f * (float) G_PI * c / CLASSES + 0.15f * shoal_rng_gaussian (rng);
        xy[2 * k] = r * sinf (t);
        xy[2 * k + 1] = r * cosf (t);
        label[k] = (float) c;
      }
}

static void
read_metrics (ShoalNet *net, double *loss, double *acc)
{
  ShoalMetric m[4];
  guint n = shoal_net_metrics (net, m, G_N_ELEMENTS (m));
  for (guint i = 0; i < n; i++)
    {
      if (strcmp (m[i].layer, "loss") == 0)
        *loss = m[i].value;
      else if (strcmp (m[i].layer, "accuracy") == 0)
        *acc = m[i].value;
    }
}

/* Runs every point forward in order, in batches (the last one partial),
 * for the mean loss and accuracy; copies the class scores (fc2's output,
 * POINTS x CLASSES floats) to `scores` when it is not NULL. */
static gboolean
evaluate (ShoalNet *net, const float *xy, const float *label, double *loss, double *acc,
          float *scores, GError **error)
{
  double sum_loss = 0, sum_acc = 0;
  for (int first = 0; first < POINTS; first += BATCH)
    {
      int rows = MIN (BATCH, POINTS - first);
      double l = 0, a = 0;
      if (!shoal_net_feed (net, "data", xy + 2 * first, rows, label + first, error))
        return FALSE;
      shoal_net_forward (net, SHOAL_PHASE_TEST);
      read_metrics (net, &l, &a);
      sum_loss += l * rows;
      sum_acc += a * rows;
      if (scores != NULL)
        {
          /* borrowed from the net: copy it before the next forward */
          ShoalTensor *out = shoal_layer_out (shoal_net_find (net, "fc2"));
          memcpy (scores + (size_t) first * CLASSES, shoal_tensor_data (out),
                  shoal_tensor_count (out) * sizeof (float));
        }
    }
  *loss = sum_loss / POINTS;
  *acc = sum_acc / POINTS;
  return TRUE;
}

/* Loads the plugin and checks its layer's gradient. */
static gboolean
load_plugin (const char *path, GError **error)
{
  if (!shoal_plugin_load (path, error))
    return FALSE;
  ShoalGradcheckOptions opts;
  shoal_gradcheck_options_init (&opts);
  int checked = 0;
  if (!shoal_layer_gradcheck (swish_check_conf, "y", &opts, 11, &checked, error))
    return FALSE;
  printf ("swish gradient check: ok, %d elements compared\n", checked);
  return TRUE;
}

/* The conf with the command line's overrides on top, as a net seeded 7. */
static ShoalNet *
build_net (ShoalConf **conf, char **overrides, GError **error)
{
  *conf = shoal_conf_load_data (net_conf, "app.conf", error);
  if (*conf == NULL)
    return NULL;
  for (int i = 0; overrides != NULL && overrides[i] != NULL; i++)
    if (!shoal_conf_override (*conf, overrides[i], error))
      return NULL;
  ShoalNetOptions opts = { .seed = 7, .shard_count = 1 };
  return shoal_net_new (*conf, &opts, error);
}

int
main (int argc, char **argv)
{
  char *plugin = NULL, *params_path = NULL;
  char **overrides = NULL;
  int steps = 600;
  GOptionEntry entries[] = {
    { "plugin", 'p', 0, G_OPTION_ARG_FILENAME, &plugin, "load a layer plugin and check its gradient", "LIB.so" },
    { "override", 'o', 0, G_OPTION_ARG_STRING_ARRAY, &overrides,
      "change the net's conf (repeatable)", "\"layer NAME.key=value\"" },
    { "steps", 0, 0, G_OPTION_ARG_INT, &steps, "training steps (default 600)", "N" },
    { "params", 0, 0, G_OPTION_ARG_FILENAME, &params_path,
      "where to save the trained params (default: a temporary file, removed)", "FILE" },
    { NULL, 0, 0, 0, NULL, NULL, NULL }
  };
  GError *error = NULL;
  GOptionContext *context = g_option_context_new ("- train, save, reload and predict with libshoal");
  g_option_context_add_main_entries (context, entries, NULL);
  gboolean parsed = g_option_context_parse (context, &argc, &argv, &error);
  g_option_context_free (context);
  if (!parsed || steps < 1)
    {
      fprintf (stderr, "app: %s\n", parsed ? "--steps must be at least 1" : error->message);
      g_clear_error (&error);
      return 2;
    }
  printf ("libshoal %s (headers %s)\n", shoal_version (), SHOAL_VERSION_STRING);

  ShoalConf *conf = NULL, *conf2 = NULL;
  ShoalNet *net = NULL, *net2 = NULL;
  ShoalUpdater *updater = NULL;
  float *xy = g_new (float, 2 * POINTS), *label = g_new (float, POINTS);
  float *scores = g_new (float, POINTS * CLASSES), *scores2 = g_new (float, POINTS * CLASSES);
  gboolean temp_params = params_path == NULL;
  char *temp_dir = NULL;
  int status = 1;

  if (plugin != NULL && !load_plugin (plugin, &error))
    goto out;
  net = build_net (&conf, overrides, &error);
  if (net == NULL)
    goto out;
  shoal_net_log_summary (net);

  /* params start from their conf specs (glorot here), the same for a seed */
  ShoalParamStore *store = shoal_net_params (net);
  shoal_param_store_init_values (store, 7);
  ShoalUpdaterConf rule;
  shoal_updater_conf_defaults (&rule, SHOAL_UPDATER_SGD);
  rule.schedule.lr = 0.2f;
  rule.momentum = 0.9f;
  rule.weight_decay = 1e-4f;
  updater = shoal_updater_new (&rule, store);  /* keeps the momentum in the store */

  ShoalRng rng;
  shoal_rng_seed (&rng, 2024, 0);
  make_spiral (xy, label, &rng);
  double first_loss = 0, first_acc = 0, loss = 0, acc = 0;
  if (!evaluate (net, xy, label, &first_loss, &first_acc, NULL, &error))
    goto out;
  printf ("before training: loss %.4f accuracy %.3f\n", first_loss, first_acc);

  /* Each step: a shuffled batch of rows gathered into arrays, fed,
   * forward, zeroed gradients, backward (which adds into them), update. */
  guint32 order[POINTS];
  float batch_xy[2 * BATCH], batch_label[BATCH];
  for (guint32 i = 0; i < POINTS; i++)
    order[i] = i;
  int epoch_pos = POINTS;  /* shuffle before the first batch */
  for (int step = 0; step < steps; step++)
    {
      if (epoch_pos + BATCH > POINTS)
        {
          shoal_rng_shuffle_u32 (&rng, order, POINTS);
          epoch_pos = 0;
        }
      for (int i = 0; i < BATCH; i++)
        {
          guint32 k = order[epoch_pos + i];
          batch_xy[2 * i] = xy[2 * k];
          batch_xy[2 * i + 1] = xy[2 * k + 1];
          batch_label[i] = label[k];
        }
      epoch_pos += BATCH;
      if (!shoal_net_feed (net, "data", batch_xy, BATCH, batch_label, &error))
        goto out;
      shoal_net_forward (net, SHOAL_PHASE_TRAIN);
      shoal_param_store_zero_grads (store);
      shoal_net_backward (net);
      shoal_updater_step (updater, step);
      if ((step + 1) % 200 == 0)
        {
          read_metrics (net, &loss, &acc);
          printf ("step %4d: batch loss %.4f accuracy %.3f\n", step + 1, loss, acc);
        }
    }

  if (!evaluate (net, xy, label, &loss, &acc, scores, &error))
    goto out;
  printf ("after %d steps: loss %.4f accuracy %.3f\n", steps, loss, acc);
  printf ("first_loss=%.6f final_loss=%.6f final_accuracy=%.4f\n", first_loss, loss, acc);
  if (!isfinite (loss) || !(loss < first_loss))
    {
      fprintf (stderr, "app: the loss did not go down (%.4f -> %.4f)\n", first_loss, loss);
      goto out;
    }

  /* Save, then a fresh net of the same conf takes every param by name. */
  if (temp_params)
    {
      temp_dir = g_dir_make_tmp ("shoal-app-XXXXXX", &error);
      if (temp_dir == NULL)
        goto out;
      params_path = g_build_filename (temp_dir, "app.params", NULL);
    }
  if (!shoal_net_save_params (net, params_path, &error))
    goto out;
  net2 = build_net (&conf2, overrides, &error);
  if (net2 == NULL
      || !shoal_net_load_params (net2, params_path, SHOAL_PARAMS_BY_NAME_ALL, &error))
    goto out;
  double loss2 = 0, acc2 = 0;
  if (!evaluate (net2, xy, label, &loss2, &acc2, scores2, &error))
    goto out;
  printf ("reloaded from %s: loss %.4f accuracy %.3f\n", temp_params ? "a temporary file" : params_path,
          loss2, acc2);
  for (int i = 0; i < POINTS * CLASSES; i++)
    if (memcmp (&scores[i], &scores2[i], sizeof (float)) != 0)
      {
        fprintf (stderr, "app: the reloaded net predicts otherwise: row %d score %d: %.9g, was %.9g\n",
                 i / CLASSES, i % CLASSES, scores2[i], scores[i]);
        goto out;
      }
  printf ("predictions after reload: %d rows x %d scores, bit-identical\n", POINTS, CLASSES);
  status = 0;

out:
  if (error != NULL)
    {
      fprintf (stderr, "app: %s\n", error->message);
      g_error_free (error);
    }
  if (temp_dir != NULL)
    {
      remove (params_path);
      remove (temp_dir);
      g_free (temp_dir);
    }
  shoal_updater_free (updater);
  shoal_net_free (net2);
  shoal_net_free (net);
  shoal_conf_free (conf2);
  shoal_conf_free (conf);
  g_free (scores2);
  g_free (scores);
  g_free (label);
  g_free (xy);
  g_strfreev (overrides);
  g_free (params_path);
  g_free (plugin);
  return status;
}
