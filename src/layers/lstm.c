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

/* One row; separate restrict pointers per gate block let GCC vectorise. */
static void
lstm_row_forward (int H, float *restrict gi, float *restrict gf, float *restrict gg, float *restrict go,
                  const float *restrict hi, const float *restrict hf, const float *restrict hg,
                  const float *restrict ho, const float *restrict c_prev, float *restrict c, float *restrict h)
{
  for (int j = 0; j < H; j++)
    {
      float i = shoal_vsigmoidf (gi[j] + hi[j]);
      float f = shoal_vsigmoidf (gf[j] + hf[j]);
      float g = shoal_vtanhf (gg[j] + hg[j]);
      float o = shoal_vsigmoidf (go[j] + ho[j]);
      float cn = f * c_prev[j] + i * g;
      c[j] = cn;
      h[j] = o * shoal_vtanhf (cn);
      gi[j] = i;
      gf[j] = f;
      gg[j] = g;
      go[j] = o;
    }
}

static void
lstm_cell_forward (const ShoalCellForward *f)
{
  const int H = f->hidden, GH = 4 * H;
  for (int b = 0; b < f->rows; b++)
    {
      float *g = f->gates + (size_t) b * f->gates_stride;
      const float *hp = f->hproj + (size_t) b * GH;
      lstm_row_forward (H, g, g + H, g + 2 * H, g + 3 * H, hp, hp + H, hp + 2 * H, hp + 3 * H,
                        f->c_prev + (size_t) b * f->c_prev_stride, f->aux + (size_t) b * f->aux_stride,
                        f->h + (size_t) b * f->h_stride);
    }
}

static void
lstm_row_backward (int H, const float *restrict gi, const float *restrict gf, const float *restrict gg,
                   const float *restrict go, const float *restrict c_prev, const float *restrict cell,
                   const float *restrict dh, float *restrict dc, float *restrict di, float *restrict df,
                   float *restrict dgg, float *restrict dgo, float *restrict dh_prev)
{
  for (int j = 0; j < H; j++)
    {
      float i = gi[j], f = gf[j], g = gg[j], o = go[j];
      float tc = shoal_vtanhf (cell[j]);
      float dct = dc[j] + dh[j] * o * (1.0f - tc * tc);
      di[j] = dct * g * i * (1.0f - i);
      df[j] = dct * c_prev[j] * f * (1.0f - f);
      dgg[j] = dct * i * (1.0f - g * g);
      dgo[j] = dh[j] * tc * o * (1.0f - o);
      dc[j] = dct * f;
      dh_prev[j] = 0.0f;
    }
}

static void
lstm_cell_backward (const ShoalCellBackward *c)
{
  const int H = c->hidden;
  for (int b = 0; b < c->rows; b++)
    {
      const float *g = c->gates + (size_t) b * c->gates_stride;
      float *dg = c->dgx + (size_t) b * c->dgx_stride;
      lstm_row_backward (H, g, g + H, g + 2 * H, g + 3 * H, c->c_prev + (size_t) b * c->c_prev_stride,
                         c->aux + (size_t) b * c->aux_stride, c->dh + (size_t) b * H, c->dc + (size_t) b * H,
                         dg, dg + H, dg + 2 * H, dg + 3 * H, c->dh_prev + (size_t) b * H);
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

const ShoalLayerOps shoal_layer_lstm_ops = SHOAL_RECURRENT_OPS (
  "lstm",
  "LSTM over (batch, steps, features) -> (batch, steps, hidden_size), stacked, stateful "
  "(truncated BPTT; src 2, optional: where streams restart); weights laid out as "
  "torch.nn.LSTM's (weight_ih_l0 = [W_ii; W_if; W_ig; W_io], gates i, f, g, o)",
  lstm_setup);
