/* shoal eval JOB.conf --from WORKSPACE [--data LMDB|CSV]: the loss and
 * accuracy of trained params on a dataset, computed as a run's test pass
 * computes them (shoal_worker_evaluate), so the numbers equal the run's
 * final test line on the same data; and a digest of the params, so that
 * two runs can be checked to end with the same params to the bit. */
#include <glib.h>
#include <stdio.h>

#include "core/error.h"
#include "partition/partition.h"
#include "tools/commands.h"
#include "worker/worker.h"

int
shoal_cmd_eval (int argc, char **argv)
{
  ShoalToolModelArgs a = { 0 };
  GOptionContext *ctx = g_option_context_new ("JOB.conf - test a trained model on a dataset");
  shoal_tool_model_add_options (ctx, &a);
  GError *error = NULL;
  char *tmpdir = NULL;
  ShoalModel *m = NULL;
  int status = 0;

  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    status = 2;
  else if (argc != 2 || a.from == NULL)
    {
      g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_CONF, "expected JOB.conf and --from WORKSPACE");
      status = 2;
    }
  if (status == 0)
    {
      a.conf = argv[1];
      m = shoal_tool_model_open (&a, &tmpdir, &error);
      status = m == NULL ? 1 : 0;
    }
  if (status == 0)
    {
      ShoalEvalResult r = shoal_worker_evaluate (shoal_model_group_net (m), 0);
      if (!shoal_net_device_error (shoal_model_net (m), &error))
        status = 1;
      else if (r.samples == 0)
        {
          g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_DATA, "no test data to evaluate on");
          status = 1;
        }
      else
        {
          printf ("samples: %" G_GINT64_FORMAT "\ntest loss: %.6f\n", r.samples, r.loss);
          if (r.accuracy >= 0)
            printf ("test accuracy: %.4f\n", r.accuracy);
          ShoalParamStore *store = shoal_group_net_params (shoal_model_group_net (m));
          char *digest = g_compute_checksum_for_data (G_CHECKSUM_SHA256, (const guchar *) store->values,
                                                      store->total * sizeof (float));
          printf ("params: %zu floats, sha256 %s\n", store->total, digest);
          g_free (digest);
        }
    }
  if (error != NULL)
    fprintf (stderr, "shoal eval: %s\n", error->message);
  g_clear_error (&error);
  shoal_model_free (m);
  shoal_tool_model_cleanup (tmpdir);
  shoal_tool_model_args_clear (&a);
  g_option_context_free (ctx);
  return status;
}
