/* The unrolled recurrent layer behind gru and lstm (see recurrent.h).
 *
 * Why the work is laid out this way: the input projections of all steps
 * do not depend on the recurrence, so each level computes them in one
 * GEMM over batch * steps rows before the time loop; only the (rows, H) x
 * (H, G*H) recurrent product is left per step.  Backward mirrors it: the
 * time loop computes the gate gradients and the recurrent product, and
 * dW_ih, dW_hh, the biases and the input gradient are one GEMM (or sum)
 * each over all steps.  Step t of row b lives at row b * steps + t of
 * every (batch, steps, X) buffer, so "all rows at step t" is a strided
 * matrix cblas reads in place (lda = steps * X). */
#pragma GCC optimize ("tree-vectorize", "no-trapping-math")

#include "layers/recurrent.h"

#include <cblas.h>
#include <string.h>

#include "core/error.h"

const ShoalOption shoal_recurrent_options[] = {
  { "hidden_size", SHOAL_OPT_INT, NULL, 1, 1 << 16, NULL, "hidden units H of every level" },
  { "num_layers", SHOAL_OPT_INT, "1", 1, SHOAL_RECURRENT_MAX_LEVELS, NULL,
    "stacked levels; level l > 0 reads level l - 1's outputs" },
  { "dropout", SHOAL_OPT_FLOAT, "0", 0, 1, NULL,
    "train phase: dropout on every level's output but the last, as torch's dropout" },
  { "bias", SHOAL_OPT_BOOL, "true", SHOAL_UNBOUNDED, NULL, "learn bias_ih and bias_hh" },
  { "stateful", SHOAL_OPT_BOOL, "true", SHOAL_UNBOUNDED, NULL,
    "start each batch from the rows' final states of the last batch of the same phase "
    "(truncated BPTT); false: from zeros" },
  SHOAL_OPTION_END
};

#define LEVEL_NAMES(l) "weight_ih_l" #l, "weight_hh_l" #l, "bias_ih_l" #l, "bias_hh_l" #l
const char *const shoal_recurrent_param_names[] = {
  LEVEL_NAMES (0), LEVEL_NAMES (1), LEVEL_NAMES (2), LEVEL_NAMES (3),
  LEVEL_NAMES (4), LEVEL_NAMES (5), LEVEL_NAMES (6), LEVEL_NAMES (7), NULL
};
G_STATIC_ASSERT (G_N_ELEMENTS (shoal_recurrent_param_names) == 4 * SHOAL_RECURRENT_MAX_LEVELS + 1);
G_STATIC_ASSERT (4 * SHOAL_RECURRENT_MAX_LEVELS <= SHOAL_LAYER_MAX_PARAMS);

/* A buffer whose size the conf sets: refused (naming the layer) rather
 * than aborting when memory or the job's budget is short. */
static gboolean
take (ShoalLayer *layer, float **buffer, size_t count, const char *what, GError **error)
{
  return (*buffer = shoal_layer_alloc_floats (layer, count, what, error)) != NULL;
}

gboolean
shoal_recurrent_setup (ShoalLayer *layer, const ShoalCellType *cell, GError **error)
{
  ShoalRecurrentPriv *p = layer->priv;
  GError *local = NULL;
  const ShoalTensor *x = &layer->srcs[0]->out;

  p->cell = cell;
  if (x->shape.ndim != 3)
    {
      char *s = shoal_shape_to_string (&x->shape);
      shoal_layer_error (layer, error, "src",
                         "a %s layer reads a (batch, steps, features) source; '%s' is %s",
                         layer->ops->type, layer->srcs[0]->name, s);
      g_free (s);
      return FALSE;
    }
  if (layer->nsrcs == 2 && shoal_tensor_rows (&layer->srcs[1]->out) != shoal_tensor_rows (x))
    {
      shoal_layer_error (layer, error, "src",
                         "the stream source '%s' has %d rows, the sequence '%s' %d",
                         layer->srcs[1]->name, shoal_tensor_rows (&layer->srcs[1]->out),
                         layer->srcs[0]->name, shoal_tensor_rows (x));
      return FALSE;
    }
  p->cap = x->shape.dim[0];
  p->steps = x->shape.dim[1];
  p->input = x->shape.dim[2];
  p->hidden = (int) shoal_layer_opt_int (layer, "hidden_size");
  p->levels = (int) shoal_layer_opt_int (layer, "num_layers");
  p->bias = shoal_layer_opt_bool (layer, "bias");
  p->stateful = shoal_layer_opt_bool (layer, "stateful");
  double dropout = shoal_layer_opt_float (layer, "dropout");
  if (!(dropout < 1.0))
    {
      shoal_layer_error (layer, error, "dropout", "must be below 1 (1 drops every unit), got %g", dropout);
      return FALSE;
    }
  p->dropout = (float) dropout;
  p->gh = cell->gates * p->hidden;
  const int H = p->hidden, T = p->steps, cap = p->cap;
  const size_t seq = (size_t) cap * T;
  if ((double) seq * p->gh > G_MAXINT32)
    {
      shoal_layer_error (layer, error, "hidden_size", "batch x steps x %d gates x %d units holds more than 2^31 values",
                         cell->gates, H);
      return FALSE;
    }
  layer->out.shape = shoal_shape_make (3, cap, T, H);

  /* torch's default: every weight and bias uniform in +-1/sqrt(H) */
  ShoalInitSpec init = { .kind = SHOAL_INIT_UNIFORM_SQRT_FAN_IN, .low = -1, .high = 1, .std = 1 };
  for (int l = 0; l < p->levels; l++)
    {
      ShoalRecurrentLevel *lv = &p->level[l];
      const char *const *names = shoal_recurrent_param_names + 4 * l;
      lv->in = l == 0 ? p->input : H;
      ShoalShape wih = shoal_shape_make (2, p->gh, lv->in), whh = shoal_shape_make (2, p->gh, H);
      ShoalShape b = shoal_shape_make (1, p->gh);
      if ((lv->w_ih = shoal_layer_declare_param (layer, names[0], &wih, H, p->gh, &init, error)) == NULL
          || (lv->w_hh = shoal_layer_declare_param (layer, names[1], &whh, H, p->gh, &init, error)) == NULL)
        return FALSE;
      if (p->bias
          && ((lv->b_ih = shoal_layer_declare_param (layer, names[2], &b, H, p->gh, &init, error)) == NULL
              || (lv->b_hh = shoal_layer_declare_param (layer, names[3], &b, H, p->gh, &init, error)) == NULL))
        return FALSE;
      if (!take (layer, &lv->gates, seq * p->gh, "gates", error)
          || !take (layer, &lv->aux, seq * H, "cell state", error)
          || !take (layer, &lv->hprev, seq * H, "previous hidden state", error)
          || !take (layer, &lv->h0, (size_t) cap * H, "initial hidden state", error)
          || (cell->has_cell && !take (layer, &lv->c0, (size_t) cap * H, "initial cell state", error)))
        return FALSE;
      if (l + 1 < p->levels
          && (!take (layer, &lv->hout, seq * H, "level output", error)
              || !take (layer, &lv->dout, seq * H, "level output gradient", error)
              || (p->dropout > 0
                  && (!take (layer, &lv->mask, seq * H, "dropout mask", error)
                      || !take (layer, &lv->dropped, seq * H, "dropped output", error)))))
        return FALSE;
    }
  for (int ph = 0; ph < 2; ph++)
    if (!take (layer, &p->state_h[ph], (size_t) p->levels * cap * H, "carried hidden state", error)
        || (cell->has_cell
            && !take (layer, &p->state_c[ph], (size_t) p->levels * cap * H, "carried cell state", error)))
      return FALSE;
  if (!take (layer, &p->hproj, (size_t) cap * p->gh, "hidden projection", error)
      || !take (layer, &p->dgx, seq * p->gh, "gate gradient", error)
      || (!cell->dgh_is_dgx && !take (layer, &p->dgh, seq * p->gh, "recurrent gate gradient", error))
      || !take (layer, &p->dh, (size_t) cap * H, "hidden gradient", error)
      || !take (layer, &p->dh_rec, (size_t) cap * H, "recurrent hidden gradient", error)
      || !take (layer, &p->dc, (size_t) cap * H, "cell gradient", error))
    return FALSE;
  if (cell->dgh_is_dgx)
    p->dgh = p->dgx;
  p->restart = shoal_try_alloc_bytes (cap, &local);
  if (p->restart == NULL)
    {
      shoal_layer_error_nomem (layer, error, local, "restart flags");
      return FALSE;
    }
  return TRUE;
}

void
shoal_recurrent_finalize (ShoalLayer *layer)
{
  ShoalRecurrentPriv *p = layer->priv;
  for (int l = 0; l < SHOAL_RECURRENT_MAX_LEVELS; l++)
    {
      ShoalRecurrentLevel *lv = &p->level[l];
      shoal_free_aligned (lv->gates);
      shoal_free_aligned (lv->aux);
      shoal_free_aligned (lv->hout);
      shoal_free_aligned (lv->hprev);
      shoal_free_aligned (lv->h0);
      shoal_free_aligned (lv->c0);
      shoal_free_aligned (lv->mask);
      shoal_free_aligned (lv->dropped);
      shoal_free_aligned (lv->dout);
    }
  for (int ph = 0; ph < 2; ph++)
    {
      shoal_free_aligned (p->state_h[ph]);
      shoal_free_aligned (p->state_c[ph]);
    }
  if (p->dgh != p->dgx)
    shoal_free_aligned (p->dgh);
  shoal_free_aligned (p->dgx);
  shoal_free_aligned (p->hproj);
  shoal_free_aligned (p->dh);
  shoal_free_aligned (p->dh_rec);
  shoal_free_aligned (p->dc);
  shoal_free_aligned (p->restart);
  memset (p, 0, sizeof *p);
}

gboolean
shoal_recurrent_restarts (const ShoalLayer *layer, int rows, guint8 *restart)
{
  if (layer->nsrcs < 2)
    return FALSE;
  const ShoalTensor *s = &layer->srcs[1]->out;
  size_t width = shoal_tensor_row_size (s);
  for (int b = 0; b < rows; b++)
    restart[b] = s->data[(size_t) b * width] < 0.0f;
  return TRUE;
}

float *
shoal_recurrent_state (ShoalLayer *layer, ShoalPhase phase, int level, gboolean cell)
{
  ShoalRecurrentPriv *p = layer->priv;
  if (level < 0 || level >= p->levels || (cell && !p->cell->has_cell))
    return NULL;
  float *base = cell ? p->state_c[phase == SHOAL_PHASE_TEST] : p->state_h[phase == SHOAL_PHASE_TEST];
  return base + (size_t) level * p->cap * p->hidden;
}

/* Each row's initial state of this batch: the carried one, or zeros where
 * the layer is stateless or the row's stream restarts. */
static void
initial_states (ShoalLayer *layer, ShoalPhase phase, int rows)
{
  ShoalRecurrentPriv *p = layer->priv;
  const int H = p->hidden;
  const size_t hbytes = (size_t) H * sizeof (float);
  gboolean marks = shoal_recurrent_restarts (layer, rows, p->restart);
  int ph = phase == SHOAL_PHASE_TEST;

  for (int l = 0; l < p->levels; l++)
    {
      ShoalRecurrentLevel *lv = &p->level[l];
      const float *sh = p->state_h[ph] + (size_t) l * p->cap * H;
      const float *sc = p->cell->has_cell ? p->state_c[ph] + (size_t) l * p->cap * H : NULL;
      for (int b = 0; b < rows; b++)
        {
          gboolean fresh = !p->stateful || (marks && p->restart[b]);
          float *h0 = lv->h0 + (size_t) b * H;
          if (fresh)
            memset (h0, 0, hbytes);
          else
            memcpy (h0, sh + (size_t) b * H, hbytes);
          if (sc != NULL)
            {
              float *c0 = lv->c0 + (size_t) b * H;
              if (fresh)
                memset (c0, 0, hbytes);
              else
                memcpy (c0, sc + (size_t) b * H, hbytes);
            }
        }
    }
}

/* Keeps every row's final state for the next batch of the phase. */
static void
keep_final_states (ShoalLayer *layer, ShoalPhase phase, int rows)
{
  ShoalRecurrentPriv *p = layer->priv;
  const int H = p->hidden, T = p->steps;
  const size_t hbytes = (size_t) H * sizeof (float);
  int ph = phase == SHOAL_PHASE_TEST;

  for (int l = 0; l < p->levels; l++)
    {
      ShoalRecurrentLevel *lv = &p->level[l];
      const float *hout = l + 1 < p->levels ? lv->hout : layer->out.data;
      float *sh = p->state_h[ph] + (size_t) l * p->cap * H;
      float *sc = p->cell->has_cell ? p->state_c[ph] + (size_t) l * p->cap * H : NULL;
      for (int b = 0; b < rows; b++)
        {
          size_t last = ((size_t) b * T + (T - 1)) * H;
          memcpy (sh + (size_t) b * H, hout + last, hbytes);
          if (sc != NULL)
            memcpy (sc + (size_t) b * H, lv->aux + last, hbytes);
        }
    }
}

static void
draw_mask (ShoalRng *rng, float *mask, size_t n, float p)
{
  float keep = 1.0f / (1.0f - p);
  for (size_t i = 0; i < n; i++)
    mask[i] = shoal_rng_uniform (rng) < p ? 0.0f : keep;
}

static void
multiply (const float *restrict a, const float *restrict b, float *restrict y, size_t n)
{
  for (size_t i = 0; i < n; i++)
    y[i] = a[i] * b[i];
}

static void
multiply_in_place (float *restrict y, const float *restrict b, size_t n)
{
  for (size_t i = 0; i < n; i++)
    y[i] *= b[i];
}

/* rows of gates = x W_ih^T + b_ih for all rows * steps at once */
static void
input_projection (const ShoalRecurrentPriv *p, const ShoalRecurrentLevel *lv, const float *x, int n)
{
  float beta = 0.0f;
  if (lv->b_ih != NULL)
    {
      const float *b = lv->b_ih->value.data;
      for (int i = 0; i < n; i++)
        memcpy (lv->gates + (size_t) i * p->gh, b, (size_t) p->gh * sizeof (float));
      beta = 1.0f;
    }
  cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasTrans, n, p->gh, lv->in, 1.0f, x, lv->in,
               lv->w_ih->value.data, lv->in, beta, lv->gates, p->gh);
}

/* The states step t starts from: the carried (or zero) initial states at
 * t = 0, else step t - 1's outputs (h) and cell states (c, kept in aux). */
typedef struct
{
  const float *h, *c;
  size_t h_stride, c_stride;
} PrevStates;

static PrevStates
prev_states (const ShoalRecurrentPriv *p, const ShoalRecurrentLevel *lv, const float *hout, int t)
{
  const size_t H = (size_t) p->hidden, T = (size_t) p->steps;
  PrevStates s = { .h = t == 0 ? lv->h0 : hout + (size_t) (t - 1) * H, .h_stride = t == 0 ? H : T * H };
  if (p->cell->has_cell)
    {
      s.c = t == 0 ? lv->c0 : lv->aux + (size_t) (t - 1) * H;
      s.c_stride = s.h_stride;
    }
  return s;
}

static void
forward_level (ShoalLayer *layer, int l, const float *x, float *hout, int rows)
{
  ShoalRecurrentPriv *p = layer->priv;
  ShoalRecurrentLevel *lv = &p->level[l];
  const int H = p->hidden, T = p->steps, GH = p->gh;
  const size_t hbytes = (size_t) H * sizeof (float);

  input_projection (p, lv, x, rows * T);
  for (int t = 0; t < T; t++)
    {
      PrevStates prev = prev_states (p, lv, hout, t);
      /* hproj = h_prev W_hh^T + b_hh */
      float beta = 0.0f;
      if (lv->b_hh != NULL)
        {
          for (int b = 0; b < rows; b++)
            memcpy (p->hproj + (size_t) b * GH, lv->b_hh->value.data, (size_t) GH * sizeof (float));
          beta = 1.0f;
        }
      cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasTrans, rows, GH, H, 1.0f, prev.h,
                   (int) prev.h_stride, lv->w_hh->value.data, H, beta, p->hproj, GH);
      /* h_prev of every row at step t, for dW_hh */
      for (int b = 0; b < rows; b++)
        memcpy (lv->hprev + ((size_t) b * T + t) * H, prev.h + (size_t) b * prev.h_stride, hbytes);
      ShoalCellForward f = {
        .rows = rows, .hidden = H,
        .gates = lv->gates + (size_t) t * GH, .gates_stride = (size_t) T * GH,
        .hproj = p->hproj,
        .h_prev = prev.h, .h_prev_stride = prev.h_stride,
        .c_prev = prev.c, .c_prev_stride = prev.c_stride,
        .aux = lv->aux + (size_t) t * H, .aux_stride = (size_t) T * H,
        .h = hout + (size_t) t * H, .h_stride = (size_t) T * H,
      };
      p->cell->forward (&f);
    }
}

void
shoal_recurrent_forward (ShoalLayer *layer, ShoalPhase phase)
{
  ShoalRecurrentPriv *p = layer->priv;
  const int rows = shoal_tensor_rows (&layer->srcs[0]->out);
  const size_t n = (size_t) rows * p->steps * p->hidden;
  gboolean drop = phase == SHOAL_PHASE_TRAIN && p->dropout > 0;

  initial_states (layer, phase, rows);
  const float *x = layer->srcs[0]->out.data;
  for (int l = 0; l < p->levels; l++)
    {
      ShoalRecurrentLevel *lv = &p->level[l];
      gboolean top = l + 1 == p->levels;
      float *hout = top ? layer->out.data : lv->hout;
      forward_level (layer, l, x, hout, rows);
      x = hout;
      if (!top && drop)
        {
          draw_mask (&layer->rng, lv->mask, n, p->dropout);
          multiply (hout, lv->mask, lv->dropped, n);
          x = lv->dropped;
        }
    }
  p->dropped_last = drop;
  keep_final_states (layer, phase, rows);
}

static void
column_sums_add (const float *restrict m, int rows, int cols, float *restrict sum)
{
  for (int i = 0; i < rows; i++)
    {
      const float *restrict row = m + (size_t) i * cols;
      for (int j = 0; j < cols; j++)
        sum[j] += row[j];
    }
}

/* BPTT through one level: dY (rows, T, H) -> param grads and dX (or not). */
static void
backward_level (ShoalLayer *layer, int l, const float *x, const float *hout, const float *dy,
                float *dx, int rows)
{
  ShoalRecurrentPriv *p = layer->priv;
  ShoalRecurrentLevel *lv = &p->level[l];
  const int H = p->hidden, T = p->steps, GH = p->gh, n = rows * T;
  const size_t hn = (size_t) rows * H;

  memset (p->dh_rec, 0, hn * sizeof (float));   /* nothing flows back from the next batch */
  memset (p->dc, 0, hn * sizeof (float));
  for (int t = T - 1; t >= 0; t--)
    {
      /* dh = dY[:, t] + what step t + 1 sent back */
      for (int b = 0; b < rows; b++)
        {
          const float *restrict d = dy + ((size_t) b * T + t) * H;
          const float *restrict r = p->dh_rec + (size_t) b * H;
          float *restrict o = p->dh + (size_t) b * H;
          for (int j = 0; j < H; j++)
            o[j] = d[j] + r[j];
        }
      PrevStates prev = prev_states (p, lv, hout, t);
      ShoalCellBackward bw = {
        .rows = rows, .hidden = H,
        .gates = lv->gates + (size_t) t * GH, .gates_stride = (size_t) T * GH,
        .h_prev = prev.h, .h_prev_stride = prev.h_stride,
        .c_prev = prev.c, .c_prev_stride = prev.c_stride,
        .aux = lv->aux + (size_t) t * H, .aux_stride = (size_t) T * H,
        .dh = p->dh, .dc = p->dc,
        .dgx = p->dgx + (size_t) t * GH, .dgx_stride = (size_t) T * GH,
        .dgh = p->dgh + (size_t) t * GH, .dgh_stride = (size_t) T * GH,
        .dh_prev = p->dh_rec,
      };
      p->cell->backward (&bw);
      if (t > 0)
        /* dh_prev += dgh[:, t] W_hh  (the gradient into h0 is not needed: truncated) */
        cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, H, GH, 1.0f,
                     p->dgh + (size_t) t * GH, T * GH, lv->w_hh->value.data, H, 1.0f, p->dh_rec, H);
    }
  /* dW_ih += dgx^T x, dW_hh += dgh^T hprev, biases: column sums */
  cblas_sgemm (CblasRowMajor, CblasTrans, CblasNoTrans, GH, lv->in, n, 1.0f, p->dgx, GH, x, lv->in,
               1.0f, lv->w_ih->grad.data, lv->in);
  cblas_sgemm (CblasRowMajor, CblasTrans, CblasNoTrans, GH, H, n, 1.0f, p->dgh, GH, lv->hprev, H,
               1.0f, lv->w_hh->grad.data, H);
  if (lv->b_ih != NULL)
    {
      column_sums_add (p->dgx, n, GH, lv->b_ih->grad.data);
      column_sums_add (p->dgh, n, GH, lv->b_hh->grad.data);
    }
  if (dx != NULL)
    cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasNoTrans, n, lv->in, GH, 1.0f, p->dgx, GH,
                 lv->w_ih->value.data, lv->in, 0.0f, dx, lv->in);
}

void
shoal_recurrent_backward (ShoalLayer *layer)
{
  ShoalRecurrentPriv *p = layer->priv;
  const int rows = shoal_tensor_rows (&layer->srcs[0]->out);
  const size_t n = (size_t) rows * p->steps * p->hidden;

  if (layer->src_grad[1] != NULL)
    {
      /* the stream source gets no gradient */
      shoal_tensor_set_rows (layer->src_grad[1], shoal_tensor_rows (&layer->srcs[1]->out));
      shoal_tensor_fill (layer->src_grad[1], 0.0f);
    }
  const float *dy = layer->grad.data;
  for (int l = p->levels - 1; l >= 0; l--)
    {
      ShoalRecurrentLevel *lv = &p->level[l];
      gboolean top = l + 1 == p->levels;
      const float *hout = top ? layer->out.data : lv->hout;
      const float *x;
      float *dx;
      if (l == 0)
        {
          x = layer->srcs[0]->out.data;
          dx = layer->src_grad[0] != NULL ? layer->src_grad[0]->data : NULL;
          if (dx != NULL)
            shoal_tensor_set_rows (layer->src_grad[0], rows);
        }
      else
        {
          ShoalRecurrentLevel *below = &p->level[l - 1];
          x = p->dropped_last ? below->dropped : below->hout;
          dx = below->dout;
        }
      backward_level (layer, l, x, hout, dy, dx, rows);
      if (l > 0 && p->dropped_last)
        multiply_in_place (p->level[l - 1].dout, p->level[l - 1].mask, n);
      dy = l > 0 ? p->level[l - 1].dout : NULL;
    }
}

/* State blob: a header (magic, levels, hidden, capacity, cell), the
 * layer's random stream, then per phase every level's h (and c). */
#define STATE_MAGIC 0x52454331u  /* "REC1" */

GBytes *
shoal_recurrent_save_state (ShoalLayer *layer)
{
  ShoalRecurrentPriv *p = layer->priv;
  guint32 head[5] = { STATE_MAGIC, (guint32) p->levels, (guint32) p->hidden, (guint32) p->cap,
                      (guint32) p->cell->has_cell };
  size_t n = (size_t) p->levels * p->cap * p->hidden * sizeof (float);
  GByteArray *b = g_byte_array_new ();
  g_byte_array_append (b, (guint8 *) head, sizeof head);
  g_byte_array_append (b, (guint8 *) &layer->rng, sizeof layer->rng);
  for (int ph = 0; ph < 2; ph++)
    {
      g_byte_array_append (b, (guint8 *) p->state_h[ph], (guint) n);
      if (p->cell->has_cell)
        g_byte_array_append (b, (guint8 *) p->state_c[ph], (guint) n);
    }
  return g_byte_array_free_to_bytes (b);
}

gboolean
shoal_recurrent_load_state (ShoalLayer *layer, GBytes *state, GError **error)
{
  ShoalRecurrentPriv *p = layer->priv;
  guint32 head[5] = { STATE_MAGIC, (guint32) p->levels, (guint32) p->hidden, (guint32) p->cap,
                      (guint32) p->cell->has_cell };
  size_t n = (size_t) p->levels * p->cap * p->hidden * sizeof (float);
  size_t want = sizeof head + sizeof layer->rng + 2 * n * (p->cell->has_cell ? 2 : 1);
  gsize len = 0;
  const guint8 *d = g_bytes_get_data (state, &len);
  if (len != want || memcmp (d, head, sizeof head) != 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                   "layer '%s': the checkpointed recurrent state is of another shape "
                   "(levels, hidden_size or batch changed?)", layer->name);
      return FALSE;
    }
  d += sizeof head;
  memcpy (&layer->rng, d, sizeof layer->rng);
  d += sizeof layer->rng;
  for (int ph = 0; ph < 2; ph++)
    {
      memcpy (p->state_h[ph], d, n);
      d += n;
      if (p->cell->has_cell)
        {
          memcpy (p->state_c[ph], d, n);
          d += n;
        }
    }
  return TRUE;
}

/* ---- the public getter and setter (shoal/layer.h) ---------------------------- */

/* The carried state a caller names, or NULL with the error. */
static float *
carried_state (ShoalLayer *layer, ShoalPhase phase, int level, gboolean cell, size_t n,
               const char *what, GError **error)
{
  if (layer->ops->save_state != shoal_recurrent_save_state)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "%s: layer '%s' (type %s) is not recurrent",
                   what, layer->name, layer->ops->type);
      return NULL;
    }
  ShoalRecurrentPriv *p = layer->priv;
  float *state = shoal_recurrent_state (layer, phase, level, cell);
  if (state == NULL)
    {
      if (cell && !p->cell->has_cell)
        g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "%s: layer '%s' (type %s) has no cell state",
                     what, layer->name, layer->ops->type);
      else
        g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "%s: layer '%s' has levels 0 to %d, not %d",
                     what, layer->name, p->levels - 1, level);
      return NULL;
    }
  size_t want = (size_t) p->cap * p->hidden;
  if (n != want)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_SHAPE,
                   "%s: layer '%s' carries %d rows x %d units = %zu floats per level, not %zu", what,
                   layer->name, p->cap, p->hidden, want, n);
      return NULL;
    }
  return state;
}

gboolean
shoal_layer_get_carried_state (ShoalLayer *layer, ShoalPhase phase, int level, gboolean cell, float *out,
                               size_t n, GError **error)
{
  g_return_val_if_fail (layer != NULL && out != NULL, FALSE);
  g_return_val_if_fail (phase == SHOAL_PHASE_TRAIN || phase == SHOAL_PHASE_TEST, FALSE);
  const float *state = carried_state (layer, phase, level, cell, n, "carried state", error);
  if (state == NULL)
    return FALSE;
  memcpy (out, state, n * sizeof (float));
  return TRUE;
}

gboolean
shoal_layer_set_carried_state (ShoalLayer *layer, ShoalPhase phase, int level, gboolean cell,
                               const float *values, size_t n, GError **error)
{
  g_return_val_if_fail (layer != NULL && values != NULL, FALSE);
  g_return_val_if_fail (phase == SHOAL_PHASE_TRAIN || phase == SHOAL_PHASE_TEST, FALSE);
  float *state = carried_state (layer, phase, level, cell, n, "set carried state", error);
  if (state == NULL)
    return FALSE;
  ShoalRecurrentPriv *p = layer->priv;
  if (!p->stateful)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                   "set carried state: layer '%s' has stateful = false: every batch starts from zeros",
                   layer->name);
      return FALSE;
    }
  memcpy (state, values, n * sizeof (float));
  return TRUE;
}
