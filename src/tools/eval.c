/* shoal eval JOB.conf --from WORKSPACE [--data LMDB|CSV]: the loss and
 * accuracy of trained params on a dataset, computed as a run's test pass
 * computes them (shoal_worker_evaluate), so the numbers equal the run's
 * final test line on the same data. */
#include <glib.h>
#include <stdio.h>

#include "core/error.h"
#include "tools/commands.h"
#include "worker/worker.h"

int
shoal_cmd_eval (int argc, char **argv)
{
  char *from = NULL, *data = NULL;
  char **overrides = NULL;
  int label_column = 0;
  gboolean header = FALSE;
  GOptionEntry entries[] = {
    { "from", 'f', 0, G_OPTION_ARG_FILENAME, &from,
      "the trained params: a run's workspace, or a file of shoal_net_save_params", "WORKSPACE" },
    { "data", 'd', 0, G_OPTION_ARG_FILENAME, &data,
      "an LMDB dataset (shoal import) or a .csv file (default: the conf's test set)", "DATA" },
    { "label-column", 0, 0, G_OPTION_ARG_INT, &label_column,
      "CSV data: 0-based column of the label (default 0)", "N" },
    { "header", 0, 0, G_OPTION_ARG_NONE, &header, "CSV data: skip the first line", NULL },
    { "override", 'o', 0, G_OPTION_ARG_STRING_ARRAY, &overrides, "set a conf key", "SECTION.KEY=VALUE" },
    { NULL, 0, 0, 0, NULL, NULL, NULL }
  };
  GOptionContext *ctx = g_option_context_new ("JOB.conf - test a trained model on a dataset");
  g_option_context_add_main_entries (ctx, entries, NULL);
  GError *error = NULL;
  char *tmpdir = NULL;
  ShoalModel *m = NULL;
  int status = 0;

  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    status = 2;
  else if (argc != 2 || from == NULL)
    {
      g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_CONF, "expected JOB.conf and --from WORKSPACE");
      status = 2;
    }
  if (status == 0)
    {
      ShoalToolModelArgs a = { .conf = argv[1], .from = from, .data = data, .label_column = label_column,
                               .skip_header = header, .overrides = (const char *const *) overrides };
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
        }
    }
  if (error != NULL)
    fprintf (stderr, "shoal eval: %s\n", error->message);
  g_clear_error (&error);
  shoal_model_free (m);
  shoal_tool_model_cleanup (tmpdir);
  g_free (from);
  g_free (data);
  g_strfreev (overrides);
  g_option_context_free (ctx);
  return status;
}
