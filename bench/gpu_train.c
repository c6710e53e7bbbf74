/* Training throughput of one shoal net on one device, the way the runner
 * trains one worker whose server is in the same process: forward and
 * backward on the net's device (CPU or GPU), each layer's gradient handed
 * to a shared param client as its backward is done, and the in-process
 * server (SYNC, the runner's slicing) applying the job's [updater] to
 * each slice.  --update picks where the update runs:
 *   device  the params and the updater state stay on the GPU, the server
 *           updates them there (what `shoal run` does by default,
 *           [job] device_update): nothing crosses PCIe but data and metrics
 *   host    gradients down, the update on the host, values up at every
 *           step (what a GPU worker with a server in another process pays)
 *   none    forward and backward only (the device's own share of a step)
 * With the update on the device the loss is read a step late, as the
 * worker reads it (net.h, shoal_net_train_step_late: the host never waits
 * for the step it just enqueued); --read-now reads each step's loss at
 * once (the host waits for its forward).  --graph captures the step as a
 * CUDA graph and replays it ([job] cuda_graph; needs --update device).
 *
 *   gpu_train --conf examples/fashion-mnist/mlp.conf --data DIR --device cuda:0
 *   gpu_train --conf examples/char-rnn/char_rnn.conf -o 'layer data.data=DIR' --device cuda:0
 *
 * --data DIR points an lmdb_input layer named data at DIR/train and
 * DIR/test (shoal import idx); -o KEY=VALUE overrides the conf as `shoal
 * run -o` does.  Prints one line that bench/gpu.sh parses:
 *
 *   gpu_train samples_per_sec=... mean_samples_per_sec=... step_ms=...
 *     final_loss=... graph=on|off|fell-back graph_steps=N read=late|now
 *     device="cuda:0 NVIDIA H100 ..." ...
 *
 * samples_per_sec is the median over windows of --window steps. */
#include <cblas.h>
#include <glib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/param_client.h"
#include "worker/push_hook.h"
#include "core/device.h"
#include "core/updater.h"
#include "net/net.h"
#include "server/server.h"
#include "job/job.h"
#include "run/runner.h"

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

static gboolean
parse_device (const char *s, ShoalDevice *out)
{
  if (strcmp (s, "cpu") == 0)
    {
      *out = (ShoalDevice) { SHOAL_DEVICE_CPU, 0 };
      return TRUE;
    }
  gint64 i = 0;
  if (g_str_has_prefix (s, "cuda:") && g_ascii_string_to_signed (s + 5, 10, 0, 1023, &i, NULL))
    {
      *out = shoal_device_cuda ((int) i);
      return TRUE;
    }
  return FALSE;
}

static void
die (const char *what, GError *error)
{
  fprintf (stderr, "gpu_train: %s%s%s\n", what, error ? ": " : "", error ? error->message : "");
  exit (1);
}

int
main (int argc, char **argv)
{
  char *conf_path = NULL, *data = NULL, *device_s = NULL, *update_s = NULL;
  char **extra = NULL;
  int steps = 300, warmup = 30, window = 25, threads = 0;
  gboolean graph = FALSE, read_now = FALSE;
  GOptionEntry entries[] = {
    { "conf", 0, 0, G_OPTION_ARG_FILENAME, &conf_path, "job conf (its [updater] and layers)", "FILE" },
    { "data", 0, 0, G_OPTION_ARG_FILENAME, &data, "directory with train/ and test/ LMDB datasets", "DIR" },
    { "override", 'o', 0, G_OPTION_ARG_STRING_ARRAY, &extra, "conf override, as shoal run -o", "KEY=VALUE" },
    { "device", 0, 0, G_OPTION_ARG_STRING, &device_s, "cpu or cuda:N (default cuda:0)", "DEV" },
    { "update", 0, 0, G_OPTION_ARG_STRING, &update_s, "device (default on a GPU), host or none", "WHERE" },
    { "steps", 0, 0, G_OPTION_ARG_INT, &steps, "timed steps (default 300)", "N" },
    { "warmup", 0, 0, G_OPTION_ARG_INT, &warmup, "untimed steps first (default 30)", "N" },
    { "window", 0, 0, G_OPTION_ARG_INT, &window, "steps per rate sample (default 25)", "N" },
    { "threads", 0, 0, G_OPTION_ARG_INT, &threads, "BLAS threads (default: the job's, else cores)", "N" },
    { "graph", 0, 0, G_OPTION_ARG_NONE, &graph, "capture the step as a CUDA graph and replay it (--update device)",
      NULL },
    { "read-now", 0, 0, G_OPTION_ARG_NONE, &read_now, "read each step's loss at once, not a step late", NULL },
    { NULL, 0, 0, 0, NULL, NULL, NULL }
  };
  GError *error = NULL;
  GOptionContext *oc = g_option_context_new ("- one net's training throughput on one device");
  g_option_context_add_main_entries (oc, entries, NULL);
  if (!g_option_context_parse (oc, &argc, &argv, &error) || conf_path == NULL || steps < 1 || warmup < 0
      || window < 1)
    {
      fprintf (stderr, "gpu_train: %s\n", error ? error->message : "needs --conf; positive --steps, --window");
      return 2;
    }
  g_option_context_free (oc);
  ShoalDevice device = shoal_device_cuda (0);
  if (device_s != NULL && !parse_device (device_s, &device))
    {
      fprintf (stderr, "gpu_train: --device %s: expected cpu or cuda:N\n", device_s);
      return 2;
    }
  const char *update = update_s != NULL ? update_s : shoal_device_is_cpu (device) ? "host" : "device";
  if (strcmp (update, "device") != 0 && strcmp (update, "host") != 0 && strcmp (update, "none") != 0)
    {
      fprintf (stderr, "gpu_train: --update %s: expected device, host or none\n", update);
      return 2;
    }
  if (strcmp (update, "device") == 0 && shoal_device_is_cpu (device))
    {
      fprintf (stderr, "gpu_train: --update device needs a GPU --device\n");
      return 2;
    }
  if (graph && strcmp (update, "device") != 0)
    {
      fprintf (stderr, "gpu_train: --graph needs --update device (the params on the GPU)\n");
      return 2;
    }

  /* the conf's data paths are relative to the repository: --data points them elsewhere */
  GPtrArray *overrides = g_ptr_array_new_with_free_func (g_free);
  if (data != NULL)
    {
      g_ptr_array_add (overrides, g_strdup_printf ("layer data.train=%s/train", data));
      g_ptr_array_add (overrides, g_strdup_printf ("layer data.test=%s/test", data));
    }
  for (int i = 0; extra != NULL && extra[i] != NULL; i++)
    g_ptr_array_add (overrides, g_strdup (extra[i]));
  g_ptr_array_add (overrides, NULL);
  ShoalJob *job = shoal_job_load (conf_path, (const char *const *) overrides->pdata, &error);
  if (job == NULL)
    die (conf_path, error);
  if (threads > 0 || job->threads > 0)
    openblas_set_num_threads (threads > 0 ? threads : job->threads);
  shoal_device_set_precision (job->precision);
  ShoalNetOptions opts = { .seed = job->seed, .shard_count = 1, .device = device };
  ShoalNet *net = shoal_net_new (job->conf, &opts, &error);
  if (net == NULL)
    die ("net", error);
  ShoalParamStore *store = shoal_net_params (net);
  shoal_param_store_init_values (store, job->seed);

  /* the runner's in-process server and shared client for one worker */
  ShoalLayout *layout = shoal_layout_new (&job->cluster, job->conf, &error);
  if (layout == NULL)
    die ("layout", error);
  ShoalServerOptions so = { .mode = SHOAL_UPDATE_SYNC, .sync_contributors = 1,
                            .nslices = shoal_runner_slice_count (layout, store->served) };
  ShoalServer *server = shoal_server_new (store, &job->updater, &so, &error);
  if (server == NULL)
    die ("server", error);
  shoal_server_host_all (server);
  ShoalParamClient *client = shoal_param_client_new_shared (store, server);
  if (strcmp (update, "device") == 0
      && (!shoal_net_keep_params_on_device (net, &error)
          || !shoal_server_move_to_device (server, store->dev_values, device, shoal_net_compute_stream (net), &error)))
    die ("params on the device", error);
  if (graph && !shoal_net_set_cuda_graph (net, TRUE, &error))
    die ("--graph", error);
  if (!shoal_param_client_fetch (client, &error))
    die ("fetch", error);
  /* as the worker reads a net whose params stay on the device */
  gboolean late = !read_now && shoal_net_params_on_device (net);
  gboolean updates = strcmp (update, "none") != 0;
  gboolean clip = job->updater.clip_value > 0 || job->updater.clip_norm > 0;
  int batch = shoal_tensor_rows (&shoal_net_input (net)->out);

  int nwin = steps / window + 1;
  double *rates = g_new0 (double, nwin);
  int nrates = 0;
  double loss = 0, t0 = 0, mark = 0;
  ShoalPushStep ready = { client, 0 };
  shoal_param_store_zero_grads (store);
  for (int step = 0; step < warmup + steps; step++)
    {
      if (step == warmup)
        t0 = mark = g_get_monotonic_time () / 1e6;
      else if (step > warmup && (step - warmup) % window == 0)
        {
          double now = g_get_monotonic_time () / 1e6;
          rates[nrates++] = window * batch / (now - mark);
          mark = now;
        }
      if (step > 0 && updates && !shoal_param_client_wait (client, &error))
        die ("update", error);
      ready.step = step;
      ShoalParamsReadyFunc hand_over = updates && !clip ? shoal_worker_push_ready : NULL;
      if (late)
        {
          double previous = shoal_net_train_step_late (net, hand_over, &ready, NULL);
          loss = step > 0 ? previous : 0;
        }
      else
        loss = shoal_net_train_step (net, hand_over, &ready);
      if (!updates)
        shoal_param_store_zero_grads (store);
      else
        {
          if (clip)
            shoal_net_clip_gradients (net, job->updater.clip_value, job->updater.clip_norm);
          shoal_param_client_step_done (client, step);
        }
      if (!isfinite (loss))
        break;
    }
  if (late && isfinite (loss))
    shoal_net_finish_step (net, &loss);
  if (updates && !shoal_param_client_wait (client, &error))
    die ("update", error);
  if (!shoal_server_sync_host (server, &error))
    die ("the last update", error);
  double end = g_get_monotonic_time () / 1e6;
  if (steps % window == 0)
    rates[nrates++] = window * batch / (end - mark);
  if (!shoal_net_device_error (net, &error))
    die ("device", error);
  double mean = steps * batch / (end - t0);
  qsort (rates, nrates, sizeof (double), cmp_double);
  double median = nrates == 0 ? mean
                  : nrates % 2 ? rates[nrates / 2] : (rates[nrates / 2 - 1] + rates[nrates / 2]) / 2;
  char *dev = shoal_device_describe (device);
  /* fell-back: the net turned graphs off (its message says why) */
  const char *graph_state = !graph ? "off" : shoal_net_cuda_graph (net) ? "on" : "fell-back";
  printf ("gpu_train samples_per_sec=%.1f mean_samples_per_sec=%.1f step_ms=%.3f final_loss=%.4f "
          "graph=%s graph_steps=%" G_GUINT64_FORMAT " read=%s "
          "batch=%d steps=%d warmup=%d window=%d update=%s rule=%s precision=%s conf=%s device=\"%s\"\n",
          median, mean, 1000 * (end - t0) / steps, loss, graph_state, shoal_net_cuda_graph_steps (net),
          late ? "late" : "now", batch, steps, warmup, window, update,
          shoal_updater_kind_name (job->updater.kind), shoal_precision_name (job->precision),
          conf_path, dev);
  g_free (dev);
  g_free (rates);
  shoal_param_client_free (client);
  if (!shoal_server_move_to_host (server, &error))
    die ("server", error);
  shoal_server_free (server);
  shoal_layout_free (layout);
  shoal_net_free (net);
  shoal_job_free (job);
  g_ptr_array_free (overrides, TRUE);
  g_strfreev (extra);
  g_free (conf_path);
  g_free (data);
  g_free (device_s);
  g_free (update_s);
  return isfinite (loss) ? 0 : 1;
}
