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

/* One row: separate restrict pointers per gate block let GCC vectorise
 * (one pointer with offsets H and 2H looked like a dependence). */
static void
gru_row_forward (int H, float *restrict gr, float *restrict gz, float *restrict gn,
                 const float *restrict hr, const float *restrict hz, const float *restrict hnp,
                 const float *restrict h_prev, float *restrict hn, float *restrict h)
{
  for (int j = 0; j < H; j++)
    {
      float r = shoal_vsigmoidf (gr[j] + hr[j]);
      float z = shoal_vsigmoidf (gz[j] + hz[j]);
      float n = shoal_vtanhf (gn[j] + r * hnp[j]);
      hn[j] = hnp[j];
      h[j] = (1.0f - z) * n + z * h_prev[j];
      gr[j] = r;
      gz[j] = z;
      gn[j] = n;
    }
}

static void
gru_cell_forward (const ShoalCellForward *f)
{
  const int H = f->hidden, GH = 3 * H;
  for (int b = 0; b < f->rows; b++)
    {
      float *g = f->gates + (size_t) b * f->gates_stride;
      const float *hp = f->hproj + (size_t) b * GH;
      gru_row_forward (H, g, g + H, g + 2 * H, hp, hp + H, hp + 2 * H,
                       f->h_prev + (size_t) b * f->h_prev_stride, f->aux + (size_t) b * f->aux_stride,
                       f->h + (size_t) b * f->h_stride);
    }
}

static void
gru_row_backward (int H, const float *restrict gr, const float *restrict gz, const float *restrict gn,
                  const float *restrict h_prev, const float *restrict hn, const float *restrict dh,
                  float *restrict dxr, float *restrict dxz, float *restrict dxn,
                  float *restrict dhr, float *restrict dhz, float *restrict dhn, float *restrict dh_prev)
{
  for (int j = 0; j < H; j++)
    {
      float r = gr[j], z = gz[j], n = gn[j];
      float dn = dh[j] * (1.0f - z);
      float dz = dh[j] * (h_prev[j] - n);
      float dan = dn * (1.0f - n * n);
      float dar = dan * hn[j] * r * (1.0f - r);
      float daz = dz * z * (1.0f - z);
      dxr[j] = dar;
      dxz[j] = daz;
      dxn[j] = dan;
      dhr[j] = dar;
      dhz[j] = daz;
      dhn[j] = dan * r;
      dh_prev[j] = dh[j] * z;
    }
}

static void
gru_cell_backward (const ShoalCellBackward *c)
{
  const int H = c->hidden;
  for (int b = 0; b < c->rows; b++)
    {
      const float *g = c->gates + (size_t) b * c->gates_stride;
      float *dgx = c->dgx + (size_t) b * c->dgx_stride;
      float *dgh = c->dgh + (size_t) b * c->dgh_stride;
      gru_row_backward (H, g, g + H, g + 2 * H, c->h_prev + (size_t) b * c->h_prev_stride,
                        c->aux + (size_t) b * c->aux_stride, c->dh + (size_t) b * H,
                        dgx, dgx + H, dgx + 2 * H, dgh, dgh + H, dgh + 2 * H, c->dh_prev + (size_t) b * H);
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

const ShoalLayerOps shoal_layer_gru_ops = SHOAL_RECURRENT_OPS (
  "gru",
  "GRU over (batch, steps, features) -> (batch, steps, hidden_size), stacked, stateful "
  "(truncated BPTT; src 2, optional: where streams restart); weights laid out as "
  "torch.nn.GRU's (weight_ih_l0 = [W_ir; W_iz; W_in], gates r, z, n)",
  gru_setup);
