/* The gru layer: torch.nn.GRU's cell (batch_first), unrolled by
 * recurrent.c.  Per step, with x-projections xr, xz, xn (bias_ih
 * included) and recurrent projections hr, hz, hn (bias_hh included):
 *   r = sigmoid(xr + hr)   z = sigmoid(xz + hz)   n = tanh(xn + r * hn)
 *   h = (1 - z) * n + z * h_prev
 * The cell keeps r, z, n in place of the x-projection and hn in aux, all
 * that its backward needs. */
#pragma GCC optimize ("tree-vectorize", "no-trapping-math")

#include "layers/recurrent.h"
#include "layers/vmath.h"

static inline float
sigmoid (float x)
{
  return 1.0f / (1.0f + shoal_vexpf (-x));
}

static void
gru_cell_forward (const ShoalCellForward *f)
{
  const int H = f->hidden, GH = 3 * H;
  for (int b = 0; b < f->rows; b++)
    {
      float *restrict g = f->gates + (size_t) b * f->gates_stride;
      const float *restrict hp = f->hproj + (size_t) b * GH;
      const float *restrict h_prev = f->h_prev + (size_t) b * f->h_prev_stride;
      float *restrict hn = f->aux + (size_t) b * f->aux_stride;
      float *restrict h = f->h + (size_t) b * f->h_stride;
      for (int j = 0; j < H; j++)
        {
          float r = sigmoid (g[j] + hp[j]);
          float z = sigmoid (g[H + j] + hp[H + j]);
          float n = shoal_vtanhf (g[2 * H + j] + r * hp[2 * H + j]);
          hn[j] = hp[2 * H + j];
          h[j] = (1.0f - z) * n + z * h_prev[j];
          g[j] = r;
          g[H + j] = z;
          g[2 * H + j] = n;
        }
    }
}

static void
gru_cell_backward (const ShoalCellBackward *c)
{
  const int H = c->hidden;
  for (int b = 0; b < c->rows; b++)
    {
      const float *restrict g = c->gates + (size_t) b * c->gates_stride;
      const float *restrict h_prev = c->h_prev + (size_t) b * c->h_prev_stride;
      const float *restrict hn = c->aux + (size_t) b * c->aux_stride;
      const float *restrict dh = c->dh + (size_t) b * H;
      float *restrict dgx = c->dgx + (size_t) b * c->dgx_stride;
      float *restrict dgh = c->dgh + (size_t) b * c->dgh_stride;
      float *restrict dh_prev = c->dh_prev + (size_t) b * H;
      for (int j = 0; j < H; j++)
        {
          float r = g[j], z = g[H + j], n = g[2 * H + j];
          float dn = dh[j] * (1.0f - z);
          float dz = dh[j] * (h_prev[j] - n);
          float dan = dn * (1.0f - n * n);
          float dar = dan * hn[j] * r * (1.0f - r);
          float daz = dz * z * (1.0f - z);
          dgx[j] = dar;
          dgx[H + j] = daz;
          dgx[2 * H + j] = dan;
          dgh[j] = dar;
          dgh[H + j] = daz;
          dgh[2 * H + j] = dan * r;
          dh_prev[j] = dh[j] * z;
        }
    }
}

static const ShoalCellType gru_cell = {
  .name = "GRU",
  .gates = 3,
  .has_cell = FALSE,
  .dgh_is_dgx = FALSE,
  .forward = gru_cell_forward,
  .backward = gru_cell_backward,
};

static gboolean
gru_setup (ShoalLayer *layer, GError **error)
{
  return shoal_recurrent_setup (layer, &gru_cell, error);
}

const ShoalLayerOps shoal_layer_gru_ops = {
  .type = "gru",
  .summary = "GRU over (batch, steps, features) -> (batch, steps, hidden_size), stacked, stateful "
             "(truncated BPTT; src 2, optional: where streams restart); weights laid out as "
             "torch.nn.GRU's (weight_ih_l0 = [W_ir; W_iz; W_in], gates r, z, n)",
  .split_dims = SHOAL_SPLIT_BATCH,
  .min_srcs = 1,
  .max_srcs = 2,
  .options = shoal_recurrent_options,
  .param_names = shoal_recurrent_param_names,
  .priv_size = sizeof (ShoalRecurrentPriv),
  .setup = gru_setup,
  .forward = shoal_recurrent_forward,
  .backward = shoal_recurrent_backward,
  .finalize = shoal_recurrent_finalize,
  .save_state = shoal_recurrent_save_state,
  .load_state = shoal_recurrent_load_state,
  .gpu = SHOAL_LAYER_GPU (gru),
};
