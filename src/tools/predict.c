/* shoal predict JOB.conf --from WORKSPACE --data LMDB|CSV --out FILE:
 * the trained model's predictions for every sample of a dataset, one CSV
 * row each (the sample, its label when the data has one, the predicted
 * label and the top-k classes with their probabilities), and the
 * accuracy where labels are known. */
#include <glib.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "tools/commands.h"
#include "worker/worker.h"

/* The k best of n scores, best first. */
static void
top_k (const float *scores, size_t n, int k, int *best)
{
  for (int j = 0; j < k; j++)
    {
      int arg = -1;
      for (size_t c = 0; c < n; c++)
        {
          gboolean taken = FALSE;
          for (int t = 0; t < j; t++)
            taken |= best[t] == (int) c;
          if (!taken && (arg < 0 || scores[c] > scores[arg]))
            arg = (int) c;
        }
      best[j] = arg;
    }
}

static gboolean
predict_all (ShoalModel *m, FILE *out, int k, gint64 *samples, gint64 *correct, gint64 *labelled,
             GError **error)
{
  ShoalNet *net = shoal_model_net (m);
  ShoalLayer *input = shoal_net_input (net);
  ShoalLayer *output = shoal_model_output (m);
  size_t width = shoal_model_output_size (m);
  gint64 n = input->ops->num_records != NULL ? input->ops->num_records (input, SHOAL_PHASE_TEST) : 0;
  if (n <= 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA, "input layer '%s' has no test data to predict",
                   input->name);
      return FALSE;
    }
  k = (int) MIN ((size_t) k, width);
  fprintf (out, "sample,label,predicted");
  for (int j = 1; j <= k; j++)
    fprintf (out, ",top%d,p%d", j, j);
  fputc ('\n', out);

  float *scores = g_new (float, (gsize) width * (gsize) shoal_tensor_rows (&input->out));
  int *best = g_new (int, MAX (k, 1));
  *samples = *correct = *labelled = 0;
  gboolean has_labels = input->label.data != NULL;
  while (*samples < n)
    {
      shoal_net_forward (net, SHOAL_PHASE_TEST);
      if (!shoal_net_device_error (net, error))
        break;
      int rows = shoal_net_batch_rows (net);
      if (!shoal_tensor_download (&output->out, scores, error))
        break;
      shoal_model_softmax_rows (scores, rows, width);
      for (int r = 0; r < rows && *samples < n; r++, (*samples)++)
        {
          const float *row = scores + (size_t) r * width;
          top_k (row, width, k, best);
          /* -1: a row without a label (CSV imported with --label-column -1) */
          float label = has_labels ? input->label.data[r] : -1;
          *labelled += label >= 0;
          if (label >= 0 && best[0] == (int) label)
            (*correct)++;
          fprintf (out, "%" G_GINT64_FORMAT ",%g,%d", *samples, label, best[0]);
          for (int j = 0; j < k; j++)
            fprintf (out, ",%d,%.6f", best[j], row[best[j]]);
          fputc ('\n', out);
        }
    }
  g_free (best);
  g_free (scores);
  return *samples == n;
}

int
shoal_cmd_predict (int argc, char **argv)
{
  ShoalToolModelArgs a = { 0 };
  char *out_path = NULL, *output = NULL;
  int k = 3;
  GOptionEntry entries[] = {
    { "out", 0, 0, G_OPTION_ARG_FILENAME, &out_path, "where the predictions go (default: stdout)",
      "FILE.csv" },
    { "top-k", 'k', 0, G_OPTION_ARG_INT, &k, "classes and probabilities per row (default 3)", "K" },
    { "output", 0, 0, G_OPTION_ARG_STRING, &output,
      "the layer whose outputs are the scores (default: the first loss layer's)", "LAYER" },
    { NULL, 0, 0, 0, NULL, NULL, NULL }
  };
  GOptionContext *ctx = g_option_context_new ("JOB.conf - predict with a trained model");
  shoal_tool_model_add_options (ctx, &a);
  g_option_context_add_main_entries (ctx, entries, NULL);
  GError *error = NULL;
  char *tmpdir = NULL;
  ShoalModel *m = NULL;
  FILE *out = NULL;
  int status = 0;

  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    status = 2;
  else if (argc != 2 || a.from == NULL)
    {
      g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_CONF, "expected JOB.conf and --from WORKSPACE");
      status = 2;
    }
  else if (k < 1 || k > 1000)
    {
      g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_CONF, "--top-k must be 1 to 1000, got %d", k);
      status = 2;
    }
  if (status == 0)
    {
      a.conf = argv[1];
      a.output = output;
      m = shoal_tool_model_open (&a, &tmpdir, &error);
      if (m == NULL)
        status = 1;
    }
  if (status == 0)
    {
      out = out_path != NULL ? fopen (out_path, "w") : stdout;
      if (out == NULL)
        {
          g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: %s", out_path, g_strerror (errno));
          status = 1;
        }
    }
  if (status == 0)
    {
      gint64 samples = 0, correct = 0, labelled = 0;
      if (!predict_all (m, out, k, &samples, &correct, &labelled, &error))
        status = 1;
      gboolean to_stdout = out == stdout;
      if (to_stdout ? fflush (out) != 0 : fclose (out) != 0)
        {
          if (error == NULL)
            g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: %s",
                         out_path != NULL ? out_path : "stdout", g_strerror (errno));
          status = 1;
        }
      out = NULL;
      if (status == 0)
        {
          FILE *report = out_path != NULL ? stdout : stderr;
          fprintf (report, "predicted %" G_GINT64_FORMAT " samples%s%s\n", samples,
                   out_path != NULL ? " into " : "", out_path != NULL ? out_path : "");
          if (labelled > 0)
            fprintf (report, "accuracy: %.4f%s\n", (double) correct / (double) labelled,
                     labelled < samples ? " (of the rows with a label)" : "");
          else
            fprintf (report, "no labels in the data: no accuracy\n");
        }
    }
  if (error != NULL)
    fprintf (stderr, "shoal predict: %s\n", error->message);
  g_clear_error (&error);
  shoal_model_free (m);
  shoal_tool_model_cleanup (tmpdir);
  shoal_tool_model_args_clear (&a);
  g_free (out_path);
  g_free (output);
  g_option_context_free (ctx);
  return status;
}
