/* A program that uses shoal's jobs and models through <shoal/shoal.h>
 * only, as docs/LIBRARY.md's "Linking statically" builds one: trains the
 * job conf argv[1] into the workspace argv[2] (shoal_job_train), loads
 * the trained model from the workspace (shoal_model_load) and predicts
 * the rows of the dataset's three classes' centres.  Prints the numbers,
 * so that a shared and a static build can be compared line by line.
 * test/e2e/install_app.sh builds it against an installed shoal. */
#include <stdio.h>

#include <shoal/shoal.h>

static int
fail (const char *what, GError *error)
{
  fprintf (stderr, "job_app: %s: %s\n", what, error->message);
  g_error_free (error);
  return 1;
}

int
main (int argc, char **argv)
{
  if (argc != 3)
    {
      fprintf (stderr, "usage: job_app JOB.conf WORKSPACE\n");
      return 2;
    }
  GError *error = NULL;
  ShoalJob *job = shoal_job_load (argv[1], NULL, &error);
  if (job == NULL)
    return fail ("load", error);
  ShoalTrainResult r;
  gboolean trained = shoal_job_train (job, argv[2], FALSE, &r, &error);
  shoal_job_free (job);
  if (!trained)
    return fail ("train", error);
  printf ("trained %" G_GINT64_FORMAT " steps: test loss %.6f accuracy %.4f\n", r.steps, r.test_loss,
          r.test_accuracy);

  char *conf = g_build_filename (argv[2], "job.conf", NULL);
  ShoalModelOptions opts = { .probabilities = TRUE };
  ShoalModel *model = shoal_model_load (conf, argv[2], &opts, &error);
  g_free (conf);
  if (model == NULL)
    return fail ("model", error);
  if (shoal_model_input_size (model) != 3)
    {
      fprintf (stderr, "job_app: the model takes %zu floats a row, not 3\n", shoal_model_input_size (model));
      shoal_model_free (model);
      return 1;
    }
  enum { ROWS = 3 };
  const float x[ROWS * 3] = { 1.5f, 0, 0, 0, 1.5f, 0, 0, 0, 0 };
  size_t out_size = shoal_model_output_size (model);
  float *y = g_new (float, ROWS * out_size);
  gboolean predicted = shoal_model_predict (model, x, ROWS, y, &error);
  if (predicted)
    for (int i = 0; i < ROWS; i++)
      {
        printf ("row %d:", i);
        for (size_t k = 0; k < out_size; k++)
          printf (" %.6f", y[i * out_size + k]);
        printf ("\n");
      }
  g_free (y);
  shoal_model_free (model);
  if (!predicted)
    return fail ("predict", error);
  return 0;
}
