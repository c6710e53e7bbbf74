/* Dense (inner product) layer: y = x W^T + b.
 *
 * W is stored (num_output, in_features) row-major, so splitting the layer
 * by feature (output units) gives each worker a contiguous block of rows
 * of W, a contiguous param slice.
 *
 * axis (Caffe's InnerProduct axis): the dims before it are kept and the
 * rest is one input vector, so axis = 2 applies the layer at every time
 * step of a (batch, steps, features) sequence: (B, T, F) -> (B, T, O). */
#include "layers/layer.h"

#include <cblas.h>
#include <string.h>

typedef struct {
  int in_features;   /* D: product of the source's dims from axis on */
  int per_row;       /* input vectors per row: product of the dims between batch and axis */
  int num_output;    /* O */
  gboolean bias;
} DensePriv;

static const char *const dense_params[] = { "weight", "bias", NULL };

static const ShoalOption dense_options[] = {
  { "num_output", SHOAL_OPT_INT, NULL, 1, 1 << 24, NULL, "number of output units" },
  { "bias", SHOAL_OPT_BOOL, "true", SHOAL_UNBOUNDED, NULL, "add a learned bias" },
  { "axis", SHOAL_OPT_INT, "1", 1, SHOAL_MAX_DIMS - 1, NULL,
    "first input dim of the vectors; the dims before are kept (2: every step of (batch, steps, features))" },
  SHOAL_OPTION_END
};

static gboolean
dense_setup (ShoalLayer *layer, GError **error)
{
  DensePriv *priv = layer->priv;
  const ShoalTensor *x = &layer->srcs[0]->out;

  int axis = (int) shoal_layer_opt_int (layer, "axis");
  if (axis >= x->shape.ndim)
    {
      char *s = shoal_shape_to_string (&x->shape);
      shoal_layer_error (layer, error, "axis", "is %d but source '%s' (%s) has only %d dims", axis,
                         layer->srcs[0]->name, s, x->shape.ndim);
      g_free (s);
      return FALSE;
    }
  priv->in_features = 1;
  priv->per_row = 1;
  for (int i = 1; i < x->shape.ndim; i++)
    {
      if (i < axis)
        priv->per_row *= x->shape.dim[i];
      else
        priv->in_features *= x->shape.dim[i];
    }
  priv->num_output = (int) shoal_layer_opt_int (layer, "num_output");
  priv->bias = shoal_layer_opt_bool (layer, "bias");
  layer->out.shape = x->shape;
  layer->out.shape.ndim = axis + 1;
  layer->out.shape.dim[axis] = priv->num_output;

  /* PyTorch's default: uniform in +-1/sqrt(fan_in) */
  ShoalInitSpec weight_init = { .kind = SHOAL_INIT_UNIFORM_SQRT_FAN_IN, .low = -1, .high = 1, .std = 1 };
  ShoalShape wshape = shoal_shape_make (2, priv->num_output, priv->in_features);
  if (shoal_layer_declare_param (layer, "weight", &wshape, priv->in_features, priv->num_output,
                                 &weight_init, error) == NULL)
    return FALSE;
  if (priv->bias)
    {
      ShoalInitSpec bias_init = { .kind = SHOAL_INIT_CONSTANT, .value = 0 };
      ShoalShape bshape = shoal_shape_make (1, priv->num_output);
      if (shoal_layer_declare_param (layer, "bias", &bshape, priv->in_features, priv->num_output,
                                     &bias_init, error) == NULL)
        return FALSE;
    }
  return TRUE;
}

static void
dense_forward (ShoalLayer *layer, ShoalPhase phase)
{
  DensePriv *priv = layer->priv;
  const ShoalTensor *x = &layer->srcs[0]->out;
  const int n = shoal_tensor_rows (x) * priv->per_row, d = priv->in_features, o = priv->num_output;
  float *restrict y = layer->out.data;
  float beta = 0.0f;
  (void) phase;

  if (priv->bias)
    {
      /* start from the bias rows and let the GEMM add x W^T */
      const float *restrict b = layer->params[1]->value.data;
      for (int i = 0; i < n; i++)
        memcpy (y + (size_t) i * o, b, (size_t) o * sizeof (float));
      beta = 1.0f;
    }
  cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasTrans, n, o, d,
               1.0f, x->data, d, layer->params[0]->value.data, d, beta, y, o);
}

static void
dense_backward (ShoalLayer *layer)
{
  DensePriv *priv = layer->priv;
  const ShoalTensor *x = &layer->srcs[0]->out;
  const int n = shoal_tensor_rows (x) * priv->per_row, d = priv->in_features, o = priv->num_output;
  const float *dy = layer->grad.data;

  /* dW (o x d) += dy^T (o x n) . x (n x d) */
  cblas_sgemm (CblasRowMajor, CblasTrans, CblasNoTrans, o, d, n,
               1.0f, dy, o, x->data, d, 1.0f, layer->params[0]->grad.data, d);
  if (priv->bias)
    {
      float *restrict db = layer->params[1]->grad.data;
      for (int i = 0; i < n; i++)
        {
          const float *restrict row = dy + (size_t) i * o;
          for (int j = 0; j < o; j++)
            db[j] += row[j];
        }
    }
  if (layer->src_grad[0] != NULL)
    /* dx (n x d) = dy (n x o) . W (o x d) */
    cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasNoTrans, n, d, o,
                 1.0f, dy, o, layer->params[0]->value.data, d, 0.0f, layer->src_grad[0]->data, d);
}

/* A feature split hands each worker a block of dim 1's units; with axis
 * > 1 the units are the last dim of every step. */
static const char *
dense_refuse (ShoalConf *conf, const char *group, int dim)
{
  if (dim == 1 && shoal_conf_get_int (conf, group, dense_options, "axis") != 1)
    return "its output units are not dim 1 (axis > 1: units of every step)";
  return NULL;
}

const ShoalLayerOps shoal_layer_dense_ops = {
  .type = "dense",
  .summary = "inner product y = x W^T + b (W is num_output x inputs)",
  .split = { .dims = SHOAL_SPLIT_BATCH | SHOAL_SPLIT_FEATURE, .units_key = "num_output", .refuse = dense_refuse },
  .min_srcs = 1,
  .max_srcs = 1,
  .options = dense_options,
  .param_names = dense_params,
  .priv_size = sizeof (DensePriv),
  .setup = dense_setup,
  .forward = dense_forward,
  .backward = dense_backward,
};
