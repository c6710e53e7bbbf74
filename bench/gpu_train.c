/* Training throughput of one shoal net on one device, the way one worker
 * with its server in the same process trains: forward and backward on the
 * net's device (CPU or GPU), then the updater of the job's [updater]
 * section applied to the host param store, as the in-process server does.
 * With --no-update only forward and backward are timed (the device's own
 * share of a step).
 *
 *   gpu_train --conf examples/fashion-mnist/mlp.conf --data DIR --device cuda:0
 *
 * DIR holds the LMDB datasets train/ and test/ (shoal import idx).  Prints
 * one line that bench/gpu.sh parses:
 *
 *   gpu_train samples_per_sec=... mean_samples_per_sec=... step_ms=...
 *     final_loss=... device="cuda:0 NVIDIA H100 ..." ...
 *
 * samples_per_sec is the median over windows of --window steps. */
#include <cblas.h>
#include <glib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/device.h"
#include "core/updater.h"
#include "net/net.h"
#include "worker/job.h"

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

/* The in-process server's update of the whole store. */
static void
update (const ShoalUpdaterConf *u, ShoalParamStore *s, int step)
{
  for (guint i = 0; i < s->params->len; i++)
    {
      ShoalParam *p = g_ptr_array_index (s->params, i);
      float *a = s->state_per_value > 0 ? s->state + p->offset : NULL;
      float *b = s->state_per_value > 1 ? s->state + s->total + p->offset : NULL;
      shoal_updater_apply (u, step, step + 1, p->lr_scale, p->wd_scale, s->values + p->offset,
                           s->grads + p->offset, a, b, p->count);
    }
  shoal_param_store_zero_grads (s);
}

int
main (int argc, char **argv)
{
  char *conf_path = NULL, *data = NULL, *device_s = NULL;
  int steps = 300, warmup = 30, window = 25, threads = 0;
  gboolean no_update = FALSE;
  GOptionEntry entries[] = {
    { "conf", 0, 0, G_OPTION_ARG_FILENAME, &conf_path, "job conf (its [updater] and layers)", "FILE" },
    { "data", 0, 0, G_OPTION_ARG_FILENAME, &data, "directory with train/ and test/ LMDB datasets", "DIR" },
    { "device", 0, 0, G_OPTION_ARG_STRING, &device_s, "cpu or cuda:N (default cuda:0)", "DEV" },
    { "steps", 0, 0, G_OPTION_ARG_INT, &steps, "timed steps (default 300)", "N" },
    { "warmup", 0, 0, G_OPTION_ARG_INT, &warmup, "untimed steps first (default 30)", "N" },
    { "window", 0, 0, G_OPTION_ARG_INT, &window, "steps per rate sample (default 25)", "N" },
    { "threads", 0, 0, G_OPTION_ARG_INT, &threads, "BLAS threads (default: the job's, else cores)", "N" },
    { "no-update", 0, 0, G_OPTION_ARG_NONE, &no_update, "time forward and backward only", NULL },
    { NULL, 0, 0, 0, NULL, NULL, NULL }
  };
  GError *error = NULL;
  GOptionContext *oc = g_option_context_new ("- one net's training throughput on one device");
  g_option_context_add_main_entries (oc, entries, NULL);
  if (!g_option_context_parse (oc, &argc, &argv, &error) || conf_path == NULL || data == NULL
      || steps < 1 || warmup < 0 || window < 1)
    {
      fprintf (stderr, "gpu_train: %s\n", error ? error->message : "needs --conf and --data; positive --steps, --window");
      return 2;
    }
  g_option_context_free (oc);
  ShoalDevice device = shoal_device_cuda (0);
  if (device_s != NULL && !parse_device (device_s, &device))
    {
      fprintf (stderr, "gpu_train: --device %s: expected cpu or cuda:N\n", device_s);
      return 2;
    }

  /* the conf's data paths are relative to the repository: point them at --data */
  char *train = g_strdup_printf ("layer data.train=%s/train", data);
  char *test = g_strdup_printf ("layer data.test=%s/test", data);
  const char *overrides[] = { train, test, NULL };
  ShoalJob *job = shoal_job_load (conf_path, overrides, &error);
  if (job == NULL)
    {
      fprintf (stderr, "gpu_train: %s\n", error->message);
      return 1;
    }
  if (threads > 0 || job->threads > 0)
    openblas_set_num_threads (threads > 0 ? threads : job->threads);
  ShoalNetOptions opts = { .seed = job->seed, .shard_count = 1, .device = device };
  ShoalNet *net = shoal_net_new (job->conf, &opts, &error);
  if (net == NULL)
    {
      fprintf (stderr, "gpu_train: %s\n", error->message);
      return 1;
    }
  ShoalParamStore *store = shoal_net_params (net);
  shoal_param_store_init_values (store, job->seed);
  if (!shoal_param_store_allocate_state (store, shoal_updater_state_per_value (job->updater.kind), &error))
    {
      fprintf (stderr, "gpu_train: %s\n", error->message);
      return 1;
    }
  shoal_param_store_zero_grads (store);
  int batch = shoal_tensor_rows (&shoal_net_input (net)->out);

  int nwin = steps / window + 1;
  double *rates = g_new0 (double, nwin);
  int nrates = 0;
  double loss = 0, t0 = 0, mark = 0;
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
      loss = shoal_net_forward (net, SHOAL_PHASE_TRAIN);
      shoal_net_backward (net);
      if (no_update)
        shoal_param_store_zero_grads (store);
      else
        update (&job->updater, store, step);
      if (!isfinite (loss))
        break;
    }
  double end = g_get_monotonic_time () / 1e6;
  if (steps % window == 0)
    rates[nrates++] = window * batch / (end - mark);
  if (!shoal_net_device_error (net, &error))
    {
      fprintf (stderr, "gpu_train: %s\n", error->message);
      return 1;
    }
  double mean = steps * batch / (end - t0);
  qsort (rates, nrates, sizeof (double), cmp_double);
  double median = nrates == 0 ? mean
                  : nrates % 2 ? rates[nrates / 2] : (rates[nrates / 2 - 1] + rates[nrates / 2]) / 2;
  char *dev = shoal_device_describe (device);
  printf ("gpu_train samples_per_sec=%.1f mean_samples_per_sec=%.1f step_ms=%.3f final_loss=%.4f "
          "batch=%d steps=%d warmup=%d window=%d update=%s conf=%s device=\"%s\"\n",
          median, mean, 1000 * (end - t0) / steps, loss, batch, steps, warmup, window,
          no_update ? "none" : shoal_updater_kind_name (job->updater.kind), conf_path, dev);
  g_free (dev);
  g_free (rates);
  shoal_net_free (net);
  shoal_job_free (job);
  g_free (train);
  g_free (test);
  g_free (conf_path);
  g_free (data);
  g_free (device_s);
  return isfinite (loss) ? 0 : 1;
}
