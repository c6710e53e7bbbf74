/* bn_stats CONF PARAMS LAYER SRC BATCHES: how far the running statistics
 * a trained model holds (LAYER/mean, LAYER/var, loaded from PARAMS, a
 * workspace or params file, as shoal eval loads them) are from the batch
 * statistics of the layer's input SRC at the same weights, over BATCHES
 * test batches of the conf's input.  Prints one line:
 *   mean_err M var_err V mean_init_err I digest D
 * M: the channels' average |running mean - data mean| / data std;
 * V: the channels' average |running var / data var - 1|;
 * I: M for the initial statistics (mean 0), to show what M would be if
 *    the test pass read statistics no worker computed;
 * D: sha256 of the running mean's and variance's floats, to compare
 *    the statistics of two workspaces bit for bit.
 * Built by test/e2e/bn_schemes.sh against the library (pkg-config shoal). */
#include <math.h>
#include <shoal/shoal.h>
#include <stdio.h>
#include <stdlib.h>

int
main (int argc, char **argv)
{
  if (argc != 6)
    {
      fprintf (stderr, "usage: bn_stats CONF PARAMS LAYER SRC BATCHES\n");
      return 2;
    }
  GError *error = NULL;
  ShoalModel *model = shoal_model_load (argv[1], argv[2], NULL, &error);
  if (model == NULL)
    {
      fprintf (stderr, "bn_stats: %s\n", error->message);
      return 1;
    }
  ShoalNet *net = shoal_model_net (model);
  ShoalParamStore *store = shoal_net_params (net);
  char *mname = g_strconcat (argv[3], "/mean", NULL), *vname = g_strconcat (argv[3], "/var", NULL);
  ShoalParam *mean = shoal_param_store_find (store, mname), *var = shoal_param_store_find (store, vname);
  ShoalLayer *src = shoal_net_find (net, argv[4]);
  if (mean == NULL || var == NULL || src == NULL)
    {
      fprintf (stderr, "bn_stats: no statistics %s, %s or no layer %s\n", mname, vname, argv[4]);
      return 1;
    }
  int c = (int) shoal_shape_count (shoal_param_shape (mean));
  double *sum = g_new0 (double, c), *sq = g_new0 (double, c);
  double n = 0;
  int batches = atoi (argv[5]);
  for (int b = 0; b < batches; b++)
    {
      shoal_net_forward (net, SHOAL_PHASE_TEST);
      ShoalTensor *out = shoal_layer_out (src);
      const ShoalShape *shape = shoal_tensor_shape (out);
      const float *x = shoal_tensor_data (out);
      size_t row = shoal_shape_row_size (shape), per = row / (size_t) c;
      for (int i = 0; i < shape->dim[0]; i++)
        for (size_t j = 0; j < row; j++)
          {
            double v = x[(size_t) i * row + j];
            sum[j / per] += v;
            sq[j / per] += v * v;
          }
      n += (double) shape->dim[0] * (double) per;
    }
  const float *rm = shoal_tensor_data (shoal_param_value (mean)), *rv = shoal_tensor_data (shoal_param_value (var));
  double merr = 0, verr = 0, ierr = 0;
  for (int k = 0; k < c; k++)
    {
      double dm = sum[k] / n, dv = sq[k] / n - dm * dm, sd = sqrt (dv > 1e-12 ? dv : 1e-12);
      merr += fabs (rm[k] - dm) / sd;
      verr += fabs (rv[k] / (dv > 1e-12 ? dv : 1e-12) - 1);
      ierr += fabs (dm) / sd;
    }
  GChecksum *sum256 = g_checksum_new (G_CHECKSUM_SHA256);
  g_checksum_update (sum256, (const guchar *) rm, (gssize) (c * sizeof (float)));
  g_checksum_update (sum256, (const guchar *) rv, (gssize) (c * sizeof (float)));
  printf ("mean_err %.4f var_err %.4f mean_init_err %.4f digest %s\n", merr / c, verr / c, ierr / c,
          g_checksum_get_string (sum256));
  g_checksum_free (sum256);
  g_free (sum);
  g_free (sq);
  g_free (mname);
  g_free (vname);
  shoal_model_free (model);
  return 0;
}
