/* Throughput of a partitioned worker group in one process.
 *
 * Two nets, fed from memory (no data loading in the measure):
 *   lenet  the LeNet of examples/fashion-mnist/hybrid.conf, batch 64 of
 *          1x28x28: conv/pool split by batch, dense layers by feature;
 *   dense  its dense part alone (64x800 -> fc1 500 -> relu -> fc2 10 ->
 *          softmax loss), fc1/relu1/fc2 split by feature: the layers the
 *          >= 1.6x target is about.
 * Each runs as a group of k = 1 and k = 2 workers; one BLAS thread per
 * worker (openblas_set_num_threads (1)), and k = 1 also with 2 BLAS
 * threads for reference.  A step is shoal_group_net_train_step: forward
 * and backward in one wake-up of the workers (no update).
 * Reported: samples/s over the measured steps; per layer kind the seconds
 * per step of the slowest worker; the connection layers' (concat, slice,
 * split, bridges, waits included) share of the workers' step time.
 * The machine is shared, so the configurations take turns over TRIALS
 * trials and each reports its best trial (the one least disturbed).
 *
 *   bench/partition.sh            (builds this against build/libshoal.a)
 *   build/bench/partition [STEPS [TRIALS]] */
#include <cblas.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "partition/partition.h"

static const char lenet_text[] =
  "[layer data]\ntype = feed\nshape = 64, 1, 28, 28\nnum_classes = 10\n"
  "[layer conv1]\ntype = conv\nsrc = data\nnum_filters = 20\nkernel = 5\n"
  "[layer pool1]\ntype = pooling\nsrc = conv1\npool = max\nkernel = 2\nstride = 2\n"
  "[layer conv2]\ntype = conv\nsrc = pool1\nnum_filters = 50\nkernel = 5\n"
  "[layer pool2]\ntype = pooling\nsrc = conv2\npool = max\nkernel = 2\nstride = 2\n"
  "[layer fc1]\ntype = dense\nsrc = pool2\nnum_output = 500\npartition_dim = 1\n"
  "[layer relu1]\ntype = relu\nsrc = fc1\npartition_dim = 1\n"
  "[layer fc2]\ntype = dense\nsrc = relu1\nnum_output = 10\npartition_dim = 1\n"
  "[layer loss]\ntype = softmax_loss\nsrc = fc2, data\n"
  "[layer accuracy]\ntype = accuracy\nsrc = fc2, data\n";

static const char dense_text[] =
  "[layer data]\ntype = feed\nshape = 64, 800\nnum_classes = 10\n"
  "[layer fc1]\ntype = dense\nsrc = data\nnum_output = 500\npartition_dim = 1\n"
  "[layer relu1]\ntype = relu\nsrc = fc1\npartition_dim = 1\n"
  "[layer fc2]\ntype = dense\nsrc = relu1\nnum_output = 10\npartition_dim = 1\n"
  "[layer loss]\ntype = softmax_loss\nsrc = fc2, data\n";

typedef struct {
  double samples_per_s;
  double dense_s, conv_s, connection_s;  /* per step, slowest worker */
  double connection_share;               /* connection seconds / all layer seconds, all workers */
} Result;

static gboolean
is_dense_part (const char *name)
{
  return strcmp (name, "fc1") == 0 || strcmp (name, "relu1") == 0 || strcmp (name, "fc2") == 0;
}

static gboolean
run (const char *text, int k, int blas_threads, int steps, Result *r)
{
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data (text, "bench", &error);
  ShoalNetOptions opts = { .seed = 1, .shard_count = 1 };
  ShoalGroupNet *g = conf ? shoal_group_net_new (conf, k, &opts, &error) : NULL;
  if (g == NULL)
    {
      fprintf (stderr, "partition bench: %s\n", error->message);
      g_error_free (error);
      shoal_conf_free (conf);
      return FALSE;
    }
  openblas_set_num_threads (blas_threads);
  ShoalParamStore *store = shoal_group_net_params (g);
  shoal_param_store_init_values (store, 1);

  /* gradients just accumulate: zeroing them is the param client's work */
  shoal_param_store_zero_grads (store);
  for (int i = 0; i < 5; i++)
    {
      shoal_group_net_train_step (g, NULL, NULL);
    }
  /* wall time without the clocks around layers, then a timed pass */
  gint64 t0 = g_get_monotonic_time ();
  for (int i = 0; i < steps; i++)
    {
      shoal_group_net_train_step (g, NULL, NULL);
    }
  double secs = (double) (g_get_monotonic_time () - t0) / 1e6;
  r->samples_per_s = steps * shoal_group_net_batch_size (g) / secs;

  shoal_group_net_set_timing (g, TRUE);
  for (int i = 0; i < steps; i++)
    {
      shoal_group_net_train_step (g, NULL, NULL);
    }
  double all = 0, conn_all = 0;
  r->dense_s = r->conv_s = r->connection_s = 0;
  for (int w = 0; w < k; w++)
    {
      ShoalLayerTiming t[64];
      guint n = shoal_group_net_timings (g, w, t, 64);
      double dense = 0, conv = 0, conn = 0;
      for (guint i = 0; i < n; i++)
        {
          double s = (t[i].forward + t[i].backward) / steps;
          all += s;
          if (t[i].connection)
            conn += s;
          else if (is_dense_part (t[i].layer))
            dense += s;
          else if (strcmp (t[i].type, "conv") == 0 || strcmp (t[i].type, "pooling") == 0)
            conv += s;
        }
      conn_all += conn;
      r->dense_s = MAX (r->dense_s, dense);
      r->conv_s = MAX (r->conv_s, conv);
      r->connection_s = MAX (r->connection_s, conn);
    }
  r->connection_share = all > 0 ? conn_all / all : 0;
  shoal_group_net_free (g);
  shoal_conf_free (conf);
  return TRUE;
}

static void
report (const char *net, int k, int blas, const Result *r, const Result *base)
{
  printf ("%-5s k=%d blas=%d  %7.0f samples/s (x%.2f)  dense %6.2f ms (x%.2f)  conv+pool %6.2f ms  "
          "connection %5.2f ms, %4.1f%% of layer time\n",
          net, k, blas, r->samples_per_s, r->samples_per_s / base->samples_per_s, r->dense_s * 1e3,
          r->dense_s > 0 ? base->dense_s / r->dense_s : 0, r->conv_s * 1e3, r->connection_s * 1e3,
          100 * r->connection_share);
}

int
main (int argc, char **argv)
{
  int steps = argc > 1 ? atoi (argv[1]) : 40;
  int trials = argc > 2 ? atoi (argv[2]) : 5;
  if (steps < 1 || trials < 1)
    {
      fprintf (stderr, "usage: partition [STEPS [TRIALS]]\n");
      return 2;
    }
  printf ("partition bench: %d steps of batch 64 after 5 warm-up steps, best of %d trials; %u cores\n",
          steps, trials, g_get_num_processors ());
  const struct { const char *name, *text; } nets[] = { { "dense", dense_text }, { "lenet", lenet_text } };
  const int config[3][2] = { { 1, 1 }, { 1, 2 }, { 2, 1 } };  /* k, BLAS threads */
  for (gsize i = 0; i < G_N_ELEMENTS (nets); i++)
    {
      Result best[3] = { { 0 } };
      for (int t = 0; t < trials; t++)
        for (int c = 0; c < 3; c++)
          {
            Result r;
            if (!run (nets[i].text, config[c][0], config[c][1], steps, &r))
              return 1;
            if (r.samples_per_s > best[c].samples_per_s)
              best[c] = r;
          }
      for (int c = 0; c < 3; c++)
        report (nets[i].name, config[c][0], config[c][1], &best[c], &best[0]);
    }
  return 0;
}
