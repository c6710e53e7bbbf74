/* shoal run JOB.conf: train and print the final test accuracy. */
#include <glib.h>
#include <stdio.h>

#include "tools/commands.h"
#include "worker/job.h"
#include "worker/runner.h"

int
shoal_cmd_run (int argc, char **argv)
{
  char **overrides = NULL;
  char *workspace = NULL;
  gboolean quiet = FALSE;
  GOptionEntry entries[] = {
    { "override", 'o', 0, G_OPTION_ARG_STRING_ARRAY, &overrides,
      "set a conf key, e.g. -o updater.lr=0.05 or -o 'layer fc1.num_output=512'", "SECTION.KEY=VALUE" },
    { "workspace", 'w', 0, G_OPTION_ARG_FILENAME, &workspace,
      "directory for metrics.jsonl and job.conf (default: workspace/JOBNAME)", "DIR" },
    { "quiet", 'q', 0, G_OPTION_ARG_NONE, &quiet, "no progress lines", NULL },
    { NULL, 0, 0, 0, NULL, NULL, NULL }
  };
  GOptionContext *ctx = g_option_context_new ("JOB.conf - train a job");
  g_option_context_add_main_entries (ctx, entries, NULL);
  GError *error = NULL;
  int status = 0;

  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    {
      fprintf (stderr, "shoal run: %s\n", error->message);
      status = 2;
      goto out;
    }
  if (argc != 2)
    {
      fprintf (stderr, "shoal run: expected one JOB.conf\n");
      status = 2;
      goto out;
    }

  ShoalJob *job = shoal_job_load (argv[1], (const char *const *) overrides, &error);
  if (job == NULL)
    {
      fprintf (stderr, "shoal run: %s\n", error->message);
      status = 1;
      goto out;
    }
  char *ws = workspace ? g_strdup (workspace) : g_build_filename ("workspace", job->name, NULL);
  ShoalRunOptions opts = { .workspace = ws, .quiet = quiet };
  ShoalRunResult result = { 0 };
  if (!shoal_run_job (job, &opts, &result, &error))
    {
      fprintf (stderr, "shoal run: %s\n", error->message);
      status = 1;
    }
  else
    {
      printf ("trained %" G_GINT64_FORMAT " steps at %.0f samples/s; metrics in %s/metrics.jsonl\n",
              result.steps, result.samples_per_sec, ws);
      if (result.test_accuracy >= 0)
        printf ("final test accuracy: %.4f\n", result.test_accuracy);
      else
        printf ("final test loss: %.6f\n", result.test_loss);
    }
  g_free (ws);
  shoal_job_free (job);

out:
  g_clear_error (&error);
  g_strfreev (overrides);
  g_free (workspace);
  g_option_context_free (ctx);
  return status;
}
