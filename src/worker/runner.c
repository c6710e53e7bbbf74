/* One process's share of a job.  Today's layout: one worker thread and
 * an in-process server whose values the worker reads in place. */
#include "worker/runner.h"

#include <cblas.h>
#include <errno.h>
#include <glib/gstdio.h>

#include "comm/param_client.h"
#include "core/error.h"
#include "server/server.h"
#include "worker/metrics.h"
#include "worker/worker.h"

int
shoal_set_blas_threads (int requested, int local_workers)
{
  int cores = (int) g_get_num_processors ();
  int n = requested > 0 ? requested : MAX (1, cores / MAX (local_workers, 1));
  openblas_set_num_threads (n);
  g_message ("BLAS threads: %d (%d cores, %d worker thread%s in this process)", n, cores,
             local_workers, local_workers == 1 ? "" : "s");
  return n;
}

static gpointer
worker_thread (gpointer data)
{
  ShoalWorker *w = data;
  return GINT_TO_POINTER (shoal_worker_train (w));
}

static gboolean
prepare_workspace (ShoalJob *job, const char *workspace, GError **error)
{
  if (g_mkdir_with_parents (workspace, 0755) != 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: cannot create workspace: %s", workspace,
                   g_strerror (errno));
      return FALSE;
    }
  /* the conf as run, overrides applied: the run can be repeated from it */
  char *path = g_build_filename (workspace, "job.conf", NULL);
  gboolean ok = g_key_file_save_to_file (shoal_conf_keyfile (job->conf), path, error);
  g_free (path);
  return ok;
}

gboolean
shoal_run_job (ShoalJob *job, const ShoalRunOptions *opts, ShoalRunResult *result, GError **error)
{
  if (!prepare_workspace (job, opts->workspace, error))
    return FALSE;
  shoal_set_blas_threads (job->threads, 1);

  ShoalNetOptions nopts = { .seed = job->seed, .shard_index = 0, .shard_count = 1 };
  ShoalNet *net = shoal_net_new (job->conf, &nopts, error);
  if (net == NULL)
    return FALSE;
  ShoalLayer *input = shoal_net_input (net);
  if (input == NULL || input->ops->num_records == NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "%s: the net has no data input layer",
                   shoal_conf_origin (job->conf));
      shoal_net_free (net);
      return FALSE;
    }
  int batch = shoal_tensor_rows (&input->out);
  shoal_job_resolve_epochs (job, input->ops->num_records (input, SHOAL_PHASE_TRAIN), batch);
  if (!opts->quiet)
    {
      g_message ("job '%s': %" G_GINT64_FORMAT " steps of batch %d, updater %s, lr %g",
                 job->name, job->train_steps, batch, shoal_updater_kind_name (job->updater.kind),
                 job->updater.schedule.lr);
      shoal_net_log_summary (net);
    }

  ShoalParamStore *store = shoal_net_params (net);
  shoal_param_store_init_values (store, job->seed);
  ShoalServer *server = shoal_server_new (store, &job->updater, 1);
  ShoalParamClient *client = shoal_param_client_new_local (server);
  float *shared = shoal_param_client_shared_values (client);
  if (shared != NULL)
    shoal_param_store_borrow_values (store, shared);

  char *metrics_path = g_build_filename (opts->workspace, "metrics.jsonl", NULL);
  ShoalMetricsWriter *metrics = shoal_metrics_open (metrics_path, FALSE, error);
  g_free (metrics_path);
  gboolean ok = metrics != NULL;
  if (ok)
    {
      ShoalWorker worker = { .job = job, .net = net, .client = client, .metrics = metrics,
                             .group = 0, .worker = 0, .log_progress = !opts->quiet };
      GThread *thread = g_thread_new ("worker-0-0", worker_thread, &worker);
      ok = GPOINTER_TO_INT (g_thread_join (thread));
      if (!ok)
        g_propagate_error (error, worker.error);
      if (ok && result != NULL)
        *result = (ShoalRunResult) { worker.steps_done, worker.test_loss, worker.test_accuracy,
                                     worker.train_samples_per_sec };
    }

  shoal_metrics_close (metrics);
  shoal_param_client_free (client);
  shoal_net_free (net);  /* the store borrowed the server's values: free the net first */
  shoal_server_free (server);
  return ok;
}
