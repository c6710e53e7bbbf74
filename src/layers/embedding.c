/* The embedding layer: ids -> vectors, torch.nn.Embedding's lookup.
 *
 * The source holds ids stored as floats, any shape (batch first); out
 * appends embedding_dim: ids (B, T) -> (B, T, E).  The weight is
 * (vocab_size, embedding_dim), row i the vector of id i, initialised
 * N(0, 1) as torch's.  A negative value -(id + 1) is id (text_input marks
 * a row's first batch of a stream that way, see recurrent.h).  An id
 * outside [0, vocab_size) looks up a zero vector and is reported once:
 * forward cannot fail, and a model that sees such ids was set up with
 * the wrong vocab_size (a job checks it against its text_input's data,
 * job/families.h).  Backward adds each row of the output gradient
 * into the weight row it was read from; the ids get no gradient. */
#include "layers/layer.h"

#include <math.h>
#include <string.h>

typedef struct {
  int vocab, dim;
  gboolean warned;
} EmbeddingPriv;

static const char *const embedding_params[] = { "weight", NULL };

static const ShoalOption embedding_options[] = {
  { "vocab_size", SHOAL_OPT_INT, NULL, 1, 1 << 24, NULL, "number of ids (`shoal import text` prints it)" },
  { "embedding_dim", SHOAL_OPT_INT, NULL, 1, 1 << 20, NULL, "length E of each vector" },
  SHOAL_OPTION_END
};

static gboolean
embedding_setup (ShoalLayer *layer, GError **error)
{
  EmbeddingPriv *p = layer->priv;
  const ShoalShape *in = &layer->srcs[0]->out.shape;

  p->vocab = (int) shoal_layer_opt_int (layer, "vocab_size");
  p->dim = (int) shoal_layer_opt_int (layer, "embedding_dim");
  if (in->ndim >= SHOAL_MAX_DIMS)
    {
      char *s = shoal_shape_to_string (in);
      shoal_layer_error (layer, error, "src", "ids '%s' (%s) have %d dims; at most %d leave room for the vectors",
                         layer->srcs[0]->name, s, in->ndim, SHOAL_MAX_DIMS - 1);
      g_free (s);
      return FALSE;
    }
  layer->out.shape = *in;
  layer->out.shape.dim[layer->out.shape.ndim++] = p->dim;
  ShoalInitSpec init = { .kind = SHOAL_INIT_GAUSSIAN, .mean = 0, .std = 1 };
  ShoalShape w = shoal_shape_make (2, p->vocab, p->dim);
  return shoal_layer_declare_param (layer, "weight", &w, p->dim, p->dim, &init, error) != NULL;
}

/* The id of a stored value, or -1 when it is not one of [0, vocab). */
static inline int
id_of (float v, int vocab)
{
  if (v < 0.0f)
    v = -v - 1.0f;
  if (!(v >= 0.0f && v < (float) vocab) || v != floorf (v))
    return -1;
  return (int) v;
}

static void
embedding_forward (ShoalLayer *layer, ShoalPhase phase)
{
  EmbeddingPriv *p = layer->priv;
  const ShoalTensor *ids = &layer->srcs[0]->out;
  const size_t n = shoal_tensor_count (ids), row = (size_t) p->dim * sizeof (float);
  const float *w = layer->params[0]->value.data;
  (void) phase;

  for (size_t i = 0; i < n; i++)
    {
      int id = id_of (ids->data[i], p->vocab);
      float *y = layer->out.data + i * p->dim;
      if (id >= 0)
        memcpy (y, w + (size_t) id * p->dim, row);
      else
        {
          if (!p->warned)
            g_warning ("layer '%s': id %g is not one of [0, %d): a zero vector instead "
                       "(is vocab_size the dataset's?)", layer->name, ids->data[i], p->vocab);
          p->warned = TRUE;
          memset (y, 0, row);
        }
    }
}

static void
embedding_backward (ShoalLayer *layer)
{
  EmbeddingPriv *p = layer->priv;
  const ShoalTensor *ids = &layer->srcs[0]->out;
  const size_t n = shoal_tensor_count (ids);
  float *dw = layer->params[0]->grad.data;

  for (size_t i = 0; i < n; i++)
    {
      int id = id_of (ids->data[i], p->vocab);
      if (id < 0)
        continue;
      float *restrict d = dw + (size_t) id * p->dim;
      const float *restrict g = layer->grad.data + i * p->dim;
      for (int j = 0; j < p->dim; j++)
        d[j] += g[j];
    }
  if (layer->src_grad[0] != NULL)
    {
      shoal_tensor_set_rows (layer->src_grad[0], shoal_tensor_rows (ids));
      shoal_tensor_fill (layer->src_grad[0], 0.0f);
    }
}

const ShoalLayerOps shoal_layer_embedding_ops = {
  .type = "embedding",
  .summary = "ids -> vectors (B, T) -> (B, T, embedding_dim), as torch.nn.Embedding "
             "(weight: vocab_size x embedding_dim)",
  .split = { .dims = SHOAL_SPLIT_BATCH },
  .min_srcs = 1,
  .max_srcs = 1,
  .options = embedding_options,
  .param_names = embedding_params,
  .priv_size = sizeof (EmbeddingPriv),
  .setup = embedding_setup,
  .forward = embedding_forward,
  .backward = embedding_backward,
};
