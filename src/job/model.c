/* Trained models (shoal/model.h): a job's net, built as for testing,
 * with the params a run saved; what `shoal predict` and `shoal eval` and
 * applications run forward on new data.
 *
 * The net is the job's own (one worker's, unpartitioned), so the input
 * layer's preprocessing (lmdb_input's scale, mean and std) applies to
 * caller rows exactly as it did in training. */
#include "job/model.h"

#include <math.h>
#include <string.h>

#include "core/error.h"
#include "layers/split.h"
#include "workspace/workspace.h"

struct _ShoalModel {
  ShoalJob *job;
  ShoalGroupNet *group;     /* k = 1: one plain net */
  ShoalNet *net;            /* borrowed from group */
  ShoalLayer *input, *output;
  gboolean probabilities;
  int batch;
  size_t in_size, out_size;
};

/* The layer whose output is the prediction: named, or the scores (first
 * source) of the first loss layer. */
static ShoalLayer *
find_output (ShoalModel *m, const char *name, GError **error)
{
  if (name != NULL)
    {
      ShoalLayer *l = shoal_net_find (m->net, name);
      if (l == NULL)
        g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "%s: no layer '%s' to predict with",
                     shoal_conf_origin (m->job->conf), name);
      return l;
    }
  for (guint i = 0; i < shoal_net_n_layers (m->net); i++)
    {
      ShoalLayer *l = shoal_net_layer (m->net, i);
      if ((l->ops->flags & SHOAL_LAYER_LOSS) && l->nsrcs > 0)
        {
          ShoalLayer *scores = l->srcs[0];
          /* through the split the net inserted, to the layer the conf names */
          while (scores->ops == &shoal_layer_split_ops)
            scores = scores->srcs[0];
          return scores;
        }
    }
  g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
               "%s: the net has no loss layer whose scores to predict: name the output layer",
               shoal_conf_origin (m->job->conf));
  return NULL;
}

ShoalModel *
shoal_model_load (const char *conf_path, const char *params_from, const ShoalModelOptions *opts,
                  GError **error)
{
  g_return_val_if_fail (conf_path != NULL && params_from != NULL, NULL);
  ShoalModelOptions none = { 0 };
  if (opts == NULL)
    opts = &none;
  ShoalModel *m = g_new0 (ShoalModel, 1);
  m->probabilities = opts->probabilities;
  m->job = shoal_job_load (conf_path, opts->overrides, error);
  if (m->job == NULL)
    goto fail;
  ShoalNetOptions nopts = { .seed = m->job->seed, .shard_count = 1, .budget = m->job->memory_budget };
  m->group = shoal_group_net_new (m->job->conf, 1, &nopts, error);
  if (m->group == NULL)
    goto fail;
  m->net = shoal_group_net_worker (m->group, 0);
  m->input = shoal_net_input (m->net);
  if (m->input == NULL || m->input->ops->feed == NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_UNSUPPORTED,
                   "%s: the net's input %s%s%s takes no rows from a program", conf_path,
                   m->input ? "layer '" : "", m->input ? m->input->name : "(none)", m->input ? "'" : "");
      goto fail;
    }
  if ((m->output = find_output (m, opts->output, error)) == NULL)
    goto fail;

  GBytes *bytes = shoal_workspace_params_from (params_from, error);
  if (bytes == NULL)
    goto fail;
  gboolean ok = shoal_param_store_load_bytes (shoal_net_params (m->net), bytes, params_from,
                                              opts->partial ? SHOAL_PARAMS_BY_NAME_ANY : SHOAL_PARAMS_EXACT,
                                              NULL, error);
  g_bytes_unref (bytes);
  if (!ok)
    goto fail;

  m->in_size = shoal_shape_row_size (&m->input->out.shape);
  m->batch = (int) (m->input->out.capacity / MAX (m->in_size, 1));
  m->out_size = shoal_shape_row_size (&m->output->out.shape);
  return m;

fail:
  shoal_model_free (m);
  return NULL;
}

void
shoal_model_free (ShoalModel *m)
{
  if (m == NULL)
    return;
  shoal_group_net_free (m->group);
  shoal_job_free (m->job);
  g_free (m);
}

ShoalNet *
shoal_model_net (ShoalModel *m)
{
  g_return_val_if_fail (m != NULL, NULL);
  return m->net;
}

ShoalGroupNet *
shoal_model_group_net (ShoalModel *m)
{
  return m->group;
}

ShoalLayer *
shoal_model_output (ShoalModel *m)
{
  return m->output;
}

size_t
shoal_model_input_size (ShoalModel *m)
{
  g_return_val_if_fail (m != NULL, 0);
  return m->in_size;
}

size_t
shoal_model_output_size (ShoalModel *m)
{
  g_return_val_if_fail (m != NULL, 0);
  return m->out_size;
}

void
shoal_model_softmax_rows (float *rows, int n, size_t width)
{
  for (int r = 0; r < n; r++)
    {
      float *x = rows + (size_t) r * width, most = -INFINITY;
      double sum = 0;
      for (size_t j = 0; j < width; j++)
        most = MAX (most, x[j]);
      for (size_t j = 0; j < width; j++)
        sum += x[j] = expf (x[j] - most);
      for (size_t j = 0; j < width; j++)
        x[j] = (float) (x[j] / sum);
    }
}

gboolean
shoal_model_predict (ShoalModel *m, const float *data, int rows, float *out, GError **error)
{
  g_return_val_if_fail (m != NULL && data != NULL && out != NULL, FALSE);
  if (rows < 1)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_SHAPE, "predict: %d rows (at least 1)", rows);
      return FALSE;
    }
  for (int done = 0; done < rows;)
    {
      int n = MIN (m->batch, rows - done);
      if (!shoal_net_feed (m->net, m->input->name, data + (size_t) done * m->in_size, n, NULL, error))
        return FALSE;
      shoal_net_forward (m->net, SHOAL_PHASE_TEST);
      if (!shoal_net_device_error (m->net, error))
        return FALSE;
      float *dst = out + (size_t) done * m->out_size;
      if (!shoal_tensor_download (&m->output->out, dst, error))
        return FALSE;
      if (m->probabilities)
        shoal_model_softmax_rows (dst, n, m->out_size);
      done += n;
    }
  return TRUE;
}
