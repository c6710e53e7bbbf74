/* What the recurrent layers (gru, lstm) share: a stack of `num_layers`
 * cells unrolled over the steps of a (batch, steps, features) source,
 * with dropout between levels, truncated back-propagation through time
 * and a hidden state carried from one batch to the next.
 *
 * Weights follow torch.nn.GRU / torch.nn.LSTM (batch_first = True), so a
 * state dict can be copied in and out by name: level l has
 *   weight_ih_l<l>  (G*H, in)   G gate blocks of H rows, in PyTorch's order
 *   weight_hh_l<l>  (G*H, H)    (GRU r, z, n; LSTM i, f, g, o)
 *   bias_ih_l<l>    (G*H)
 *   bias_hh_l<l>    (G*H)
 * A cell type says how one time step turns gate pre-activations into the
 * next state and back; recurrent.c does everything else.
 *
 * Stateful layers: each row's final state (h, and c for LSTM) of a train
 * batch is the initial state of the same row in the next train batch (the
 * test phase keeps its own), so row r of consecutive batches must read one
 * contiguous stream (text_input does).  No gradient crosses from a batch
 * into the previous one (truncated BPTT).  A row starts again from zeros
 * where the optional second source says its stream restarts: text_input
 * marks the first batch of each row's stream by storing the row's first
 * id negated (-(id + 1)); any source whose row starts with a negative
 * value resets that row. */
#ifndef SHOAL_RECURRENT_H
#define SHOAL_RECURRENT_H

#include "layers/layer.h"

G_BEGIN_DECLS

#define SHOAL_RECURRENT_MAX_LEVELS 8

/* One time step of one level for `rows` rows.  Row b of each strided
 * buffer starts at base + b * stride (floats). */
typedef struct {
  int rows, hidden;
  float *gates; size_t gates_stride;   /* in: x-projection + bias_ih; out: what backward needs */
  const float *hproj;                  /* (rows, G*H) contiguous: h_prev W_hh^T + bias_hh */
  const float *h_prev; size_t h_prev_stride;
  const float *c_prev; size_t c_prev_stride;  /* cells with a cell state */
  float *aux; size_t aux_stride;       /* out: GRU W_hn h + b_hn; LSTM the cell state c */
  float *h; size_t h_stride;           /* out: the new hidden state */
} ShoalCellForward;

typedef struct {
  int rows, hidden;
  const float *gates; size_t gates_stride;
  const float *h_prev; size_t h_prev_stride;
  const float *c_prev; size_t c_prev_stride;
  const float *aux; size_t aux_stride;
  const float *dh;                     /* (rows, H): d loss / d h of this step, all paths */
  float *dc;                           /* (rows, H) cell state cells: in d/d c, out d/d c_prev */
  float *dgx; size_t dgx_stride;       /* out: d/d x-projection pre-activations */
  float *dgh; size_t dgh_stride;       /* out: d/d recurrent projection (may alias dgx) */
  float *dh_prev;                      /* out (rows, H): d/d h_prev except through W_hh */
} ShoalCellBackward;

typedef struct {
  const char *name;        /* "GRU" */
  int gates;               /* G */
  gboolean has_cell;       /* keeps a cell state c (LSTM) */
  gboolean dgh_is_dgx;     /* the recurrent projection's gradient equals the input's */
  void (*forward) (const ShoalCellForward *f);
  void (*backward) (const ShoalCellBackward *b);
} ShoalCellType;

/* A layer's state (layer->priv); recurrent.c's, and the GPU path's. */
typedef struct {
  ShoalParam *w_ih, *w_hh, *b_ih, *b_hh;   /* biases NULL without bias */
  int in;                                  /* input features of this level */
  float *gates;     /* (cap, T, G*H): x-projection, then what the cell keeps for backward */
  float *aux;       /* (cap, T, H): GRU W_hn h + b_hn, LSTM c */
  float *hout;      /* (cap, T, H): h of every step; the top level's is layer->out */
  float *hprev;     /* (cap, T, H): h of the step before (for dW_hh) */
  float *h0, *c0;   /* (cap, H): this batch's initial state */
  float *mask;      /* (cap, T, H) levels below the top with dropout: 0 or 1 / (1 - p) */
  float *dropped;   /* (cap, T, H) hout * mask: the next level's input */
  float *dout;      /* (cap, T, H) levels below the top: d loss / d hout */
} ShoalRecurrentLevel;

typedef struct {
  const ShoalCellType *cell;
  int levels, hidden, steps, input, gh;    /* gh = G * H */
  int cap;                                 /* rows allocated */
  gboolean bias, stateful;
  float dropout;
  gboolean dropped_last;                   /* the last train forward applied dropout */
  ShoalRecurrentLevel level[SHOAL_RECURRENT_MAX_LEVELS];
  float *state_h[2], *state_c[2];          /* per phase: (levels, cap, H) carried states */
  float *hproj;                            /* (cap, G*H) scratch */
  float *dgx, *dgh;                        /* (cap, T, G*H) backward scratch; dgh may be dgx */
  float *dh, *dh_rec, *dc;                 /* (cap, H) backward scratch */
  guint8 *restart;                         /* (cap) */
} ShoalRecurrentPriv;


extern const ShoalOption shoal_recurrent_options[];
extern const char *const shoal_recurrent_param_names[];

/* The ops of a recurrent layer type (priv_size = sizeof (ShoalRecurrentPriv)). */
gboolean shoal_recurrent_setup (ShoalLayer *layer, const ShoalCellType *cell, GError **error);
void shoal_recurrent_forward (ShoalLayer *layer, ShoalPhase phase);
void shoal_recurrent_backward (ShoalLayer *layer);
void shoal_recurrent_finalize (ShoalLayer *layer);
GBytes *shoal_recurrent_save_state (ShoalLayer *layer);
gboolean shoal_recurrent_load_state (ShoalLayer *layer, GBytes *state, GError **error);

/* Everything of a recurrent type's ops table but its name, summary and
 * setup (which picks the cell): gru.c and lstm.c differ only there. */
#define SHOAL_RECURRENT_OPS(type_name, summary_text, setup_func)          \
  {                                                                        \
    .type = (type_name),                                                   \
    .summary = (summary_text),                                             \
    .split = { .dims = SHOAL_SPLIT_BATCH },                                \
    .min_srcs = 1,                                                         \
    .max_srcs = 2,                                                         \
    .options = shoal_recurrent_options,                                    \
    .param_names = shoal_recurrent_param_names,                            \
    .priv_size = sizeof (ShoalRecurrentPriv),                              \
    .setup = (setup_func),                                                 \
    .forward = shoal_recurrent_forward,                                    \
    .backward = shoal_recurrent_backward,                                  \
    .finalize = shoal_recurrent_finalize,                                  \
    .save_state = shoal_recurrent_save_state,                              \
    .load_state = shoal_recurrent_load_state,                              \
  }

/* The carried state of level `level` in `phase`: (capacity rows, H)
 * floats, h or (cell = TRUE) c; NULL when out of range.  Tests and the
 * GPU path read and write it. */
float *shoal_recurrent_state (ShoalLayer *layer, ShoalPhase phase, int level, gboolean cell);

/* Which rows restart their stream in this batch (srcs[1]), written as 0/1
 * into restart[rows]; FALSE when the layer has no such source. */
gboolean shoal_recurrent_restarts (const ShoalLayer *layer, int rows, guint8 *restart);

G_END_DECLS

#endif
