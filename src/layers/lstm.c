/* The lstm layer: torch.nn.LSTM's cell (batch_first, no projection),
 * unrolled by recurrent.c.  Per step, with a = x-projection + recurrent
 * projection (both biases included) cut into four blocks of H:
 *   i = sigmoid(a_i)  f = sigmoid(a_f)  g = tanh(a_g)  o = sigmoid(a_o)
 *   c = f * c_prev + i * g              h = o * tanh(c)
 * The cell keeps i, f, g, o in place of the x-projection and c in aux.
 * Both projections see the same pre-activations, so their gradients are
 * one buffer. */
#pragma GCC optimize ("tree-vectorize", "no-trapping-math")

#include "layers/recurrent.h"
#include "layers/vmath.h"

static inline float
sigmoid (float x)
{
  return 1.0f / (1.0f + shoal_vexpf (-x));
}

static void
lstm_cell_forward (const ShoalCellForward *f)
{
  const int H = f->hidden, GH = 4 * H;
  for (int b = 0; b < f->rows; b++)
    {
      float *restrict g = f->gates + (size_t) b * f->gates_stride;
      const float *restrict hp = f->hproj + (size_t) b * GH;
      const float *restrict c_prev = f->c_prev + (size_t) b * f->c_prev_stride;
      float *restrict c = f->aux + (size_t) b * f->aux_stride;
      float *restrict h = f->h + (size_t) b * f->h_stride;
      for (int j = 0; j < H; j++)
        {
          float i = sigmoid (g[j] + hp[j]);
          float fg = sigmoid (g[H + j] + hp[H + j]);
          float gg = shoal_vtanhf (g[2 * H + j] + hp[2 * H + j]);
          float o = sigmoid (g[3 * H + j] + hp[3 * H + j]);
          float cn = fg * c_prev[j] + i * gg;
          c[j] = cn;
          h[j] = o * shoal_vtanhf (cn);
          g[j] = i;
          g[H + j] = fg;
          g[2 * H + j] = gg;
          g[3 * H + j] = o;
        }
    }
}

static void
lstm_cell_backward (const ShoalCellBackward *c)
{
  const int H = c->hidden;
  for (int b = 0; b < c->rows; b++)
    {
      const float *restrict g = c->gates + (size_t) b * c->gates_stride;
      const float *restrict c_prev = c->c_prev + (size_t) b * c->c_prev_stride;
      const float *restrict cell = c->aux + (size_t) b * c->aux_stride;
      const float *restrict dh = c->dh + (size_t) b * H;
      float *restrict dc = c->dc + (size_t) b * H;
      float *restrict dg = c->dgx + (size_t) b * c->dgx_stride;
      float *restrict dh_prev = c->dh_prev + (size_t) b * H;
      for (int j = 0; j < H; j++)
        {
          float i = g[j], f = g[H + j], gg = g[2 * H + j], o = g[3 * H + j];
          float tc = shoal_vtanhf (cell[j]);
          float dct = dc[j] + dh[j] * o * (1.0f - tc * tc);
          dg[j] = dct * gg * i * (1.0f - i);
          dg[H + j] = dct * c_prev[j] * f * (1.0f - f);
          dg[2 * H + j] = dct * i * (1.0f - gg * gg);
          dg[3 * H + j] = dh[j] * tc * o * (1.0f - o);
          dc[j] = dct * f;
          dh_prev[j] = 0.0f;
        }
    }
}

static const ShoalCellType lstm_cell = {
  .name = "LSTM",
  .gates = 4,
  .has_cell = TRUE,
  .dgh_is_dgx = TRUE,
  .forward = lstm_cell_forward,
  .backward = lstm_cell_backward,
};

static gboolean
lstm_setup (ShoalLayer *layer, GError **error)
{
  return shoal_recurrent_setup (layer, &lstm_cell, error);
}

const ShoalLayerOps shoal_layer_lstm_ops = {
  .type = "lstm",
  .summary = "LSTM over (batch, steps, features) -> (batch, steps, hidden_size), stacked, stateful "
             "(truncated BPTT; src 2, optional: where streams restart); weights laid out as "
             "torch.nn.LSTM's (weight_ih_l0 = [W_ii; W_if; W_ig; W_io], gates i, f, g, o)",
  .split_dims = SHOAL_SPLIT_BATCH,
  .min_srcs = 1,
  .max_srcs = 2,
  .options = shoal_recurrent_options,
  .param_names = shoal_recurrent_param_names,
  .priv_size = sizeof (ShoalRecurrentPriv),
  .setup = lstm_setup,
  .forward = shoal_recurrent_forward,
  .backward = shoal_recurrent_backward,
  .finalize = shoal_recurrent_finalize,
  .save_state = shoal_recurrent_save_state,
  .load_state = shoal_recurrent_load_state,
  .gpu = SHOAL_LAYER_GPU (lstm),
};
