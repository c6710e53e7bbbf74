/* 2-D convolution of (N, C, H, W) inputs as im2col + SGEMM.
 *
 * Why chunks of images: a chunk of images is unfolded into one column
 * matrix (K, chunk*OH*OW), K = C*KH*KW, so that a 12x12 LeNet image
 * (64 output pixels) does not make a GEMM of 64 columns by itself, yet
 * the column matrix stays small enough to live in L2 between im2col, the
 * GEMMs and col2im.  Measured on the 2-core EPYC VM, OpenBLAS 0.3.21,
 * LeNet conv2 (20->50, 5x5, 12x12, batch 64), one thread: the
 * forward GEMM takes 2.3 ms in chunks of 8 images and 2.8 ms as one
 * whole-batch GEMM, the weight-gradient GEMM 2.4 against 3.2 ms; chunks
 * of 1 image are as fast on one thread but twice as slow on two.
 * CONV_CHUNK_COLS sets the chunk: the fewest images giving that many
 * columns.  Columns are rebuilt in backward rather than kept from
 * forward: keeping a whole batch's columns (8 MB for conv2) made forward
 * 0.6 ms slower, its stores missing L2, and saved only 0.3 ms in backward.
 *
 * A chunk of one image needs no reshuffle: the GEMM writes straight into
 * the (F, OH*OW) output plane.  Otherwise the GEMM's (F, image, pixel)
 * order is copied to NCHW, adding the bias on the way.
 *
 * Default init: weight uniform in +-1/sqrt(C*KH*KW) (uniform_sqrt_fan_in
 * with low -1, high 1, PyTorch's default for Conv2d weights), bias 0.
 *
 * The pragma stops GCC from turning each short row copy of im2col into a
 * memmove call (im2col was 1.5x slower with one call per 8-float row),
 * and vectorises the copies even where the build says plain -O2. */
#pragma GCC optimize ("tree-vectorize", "no-tree-loop-distribute-patterns")

#include "layers/layer.h"

#include <cblas.h>
#include <string.h>

#define CONV_CHUNK_COLS 512

typedef struct {
  int c, h, w;            /* input channels and size */
  int f;                  /* filters */
  int kh, kw, sh, sw, ph, pw;
  int oh, ow;
  int k;                  /* c * kh * kw: rows of the column matrix */
  int p;                  /* oh * ow: pixels of one output plane */
  int chunk;              /* images per column matrix */
  size_t ld;              /* >= chunk * p: leading dimension of the column matrices */
  int *oh_lo, *oh_hi;     /* (kh): output rows whose input row is inside the image */
  int *ow_lo, *ow_hi;     /* (kw): the same for columns */
  float *col;             /* (k, ld): columns of one chunk */
  float *dcol;            /* (k, ld): column gradient */
  float *mat;             /* (f, ld): GEMM output, or the gathered out gradient */
  float *ones;            /* (ld) ones: the bias gradient is a GEMV */
  ShoalParam *weight;     /* (f, k) */
  ShoalParam *bias;       /* (f), or NULL */
} Conv;

static const ShoalOption conv_options[] = {
  { "num_filters", SHOAL_OPT_INT, NULL, 1, G_MAXINT, NULL, "output channels" },
  { "kernel", SHOAL_OPT_INT, "0", 0, G_MAXINT, NULL, "square kernel size (or kernel_h and kernel_w)" },
  { "kernel_h", SHOAL_OPT_INT, "0", 0, G_MAXINT, NULL, "kernel height; 0: kernel" },
  { "kernel_w", SHOAL_OPT_INT, "0", 0, G_MAXINT, NULL, "kernel width; 0: kernel" },
  { "stride", SHOAL_OPT_INT, "1", 1, G_MAXINT, NULL, "step between windows" },
  { "stride_h", SHOAL_OPT_INT, "0", 0, G_MAXINT, NULL, "vertical step; 0: stride" },
  { "stride_w", SHOAL_OPT_INT, "0", 0, G_MAXINT, NULL, "horizontal step; 0: stride" },
  { "pad", SHOAL_OPT_INT, "0", 0, G_MAXINT, NULL, "zeros added on every side" },
  { "pad_h", SHOAL_OPT_INT, "-1", -1, G_MAXINT, NULL, "zeros above and below; -1: pad" },
  { "pad_w", SHOAL_OPT_INT, "-1", -1, G_MAXINT, NULL, "zeros left and right; -1: pad" },
  { "bias", SHOAL_OPT_BOOL, "true", SHOAL_UNBOUNDED, NULL, "add a learned bias per filter" },
  SHOAL_OPTION_END
};

static const char *const conv_param_names[] = { "weight", "bias", NULL };

/* [lo, hi): the outputs o in [0, out) with o * stride - pad + k in [0, in). */
static void
valid_range (int out, int stride, int pad, int k, int in, int *lo, int *hi)
{
  int l = 0, h = out;
  while (l < h && l * stride - pad + k < 0)
    l++;
  while (h > l && (h - 1) * stride - pad + k >= in)
    h--;
  *lo = l;
  *hi = h;
}

static gboolean
conv_setup (ShoalLayer *layer, GError **error)
{
  Conv *cv = layer->priv;
  const ShoalTensor *in = &layer->srcs[0]->out;

  if (in->shape.ndim != 4)
    {
      char *s = shoal_shape_to_string (&in->shape);
      shoal_layer_error (layer, error, NULL,
                         "needs an (N, C, H, W) input, source '%s' gives %s",
                         layer->srcs[0]->name, s);
      g_free (s);
      return FALSE;
    }
  cv->c = in->shape.dim[1];
  cv->h = in->shape.dim[2];
  cv->w = in->shape.dim[3];
  cv->f = (int) shoal_layer_opt_int (layer, "num_filters");
  cv->kh = shoal_layer_opt_int_or (layer, "kernel_h", 0, "kernel");
  cv->kw = shoal_layer_opt_int_or (layer, "kernel_w", 0, "kernel");
  cv->sh = shoal_layer_opt_int_or (layer, "stride_h", 0, "stride");
  cv->sw = shoal_layer_opt_int_or (layer, "stride_w", 0, "stride");
  cv->ph = shoal_layer_opt_int_or (layer, "pad_h", -1, "pad");
  cv->pw = shoal_layer_opt_int_or (layer, "pad_w", -1, "pad");
  if (cv->kh == 0 || cv->kw == 0)
    {
      shoal_layer_error (layer, error, "kernel",
                         "needs kernel, or kernel_h and kernel_w, of at least 1");
      return FALSE;
    }
  if (!shoal_layer_check_window (layer, "kernel", "kernel", cv->h, cv->w, cv->kh, cv->kw, cv->ph, cv->pw,
                                 error))
    return FALSE;
  if ((gint64) cv->c * cv->kh * cv->kw > G_MAXINT)
    {
      shoal_layer_error (layer, error, "kernel", "a %dx%d kernel over %d channels has more than 2^31 - 1 "
                         "weights per filter", cv->kh, cv->kw, cv->c);
      return FALSE;
    }
  cv->oh = (cv->h + 2 * cv->ph - cv->kh) / cv->sh + 1;
  cv->ow = (cv->w + 2 * cv->pw - cv->kw) / cv->sw + 1;
  cv->k = cv->c * cv->kh * cv->kw;
  cv->p = cv->oh * cv->ow;

  int n = in->shape.dim[0];
  layer->out.shape = shoal_shape_make (4, n, cv->f, cv->oh, cv->ow);

  ShoalShape wshape = shoal_shape_make (2, cv->f, cv->k);
  ShoalInitSpec winit = { .kind = SHOAL_INIT_UNIFORM_SQRT_FAN_IN, .low = -1.0f, .high = 1.0f };
  cv->weight = shoal_layer_declare_param (layer, "weight", &wshape, cv->k,
                                          cv->f * cv->kh * cv->kw, &winit, error);
  if (cv->weight == NULL)
    return FALSE;
  if (shoal_layer_opt_bool (layer, "bias"))
    {
      ShoalShape bshape = shoal_shape_make (1, cv->f);
      ShoalInitSpec binit = { .kind = SHOAL_INIT_CONSTANT, .value = 0.0f };
      cv->bias = shoal_layer_declare_param (layer, "bias", &bshape, cv->k,
                                            cv->f * cv->kh * cv->kw, &binit, error);
      if (cv->bias == NULL)
        return FALSE;
    }

  cv->oh_lo = g_new (int, cv->kh);
  cv->oh_hi = g_new (int, cv->kh);
  for (int i = 0; i < cv->kh; i++)
    valid_range (cv->oh, cv->sh, cv->ph, i, cv->h, &cv->oh_lo[i], &cv->oh_hi[i]);
  cv->ow_lo = g_new (int, cv->kw);
  cv->ow_hi = g_new (int, cv->kw);
  for (int j = 0; j < cv->kw; j++)
    valid_range (cv->ow, cv->sw, cv->pw, j, cv->w, &cv->ow_lo[j], &cv->ow_hi[j]);

  /* Every column matrix has the same layout (leading dimension ld, also
   * for a last, partial chunk), so its padding entries are the zeros of
   * the allocation: im2col writes only the entries inside the image. */
  cv->chunk = CLAMP ((CONV_CHUNK_COLS + cv->p - 1) / cv->p, 1, MAX (n, 1));
  /* An odd number of cache lines between rows: with 512 columns (2 KiB)
   * every row of the column matrix fell into the same few L1 and L2 sets,
   * and im2col alone took 0.81 instead of 0.42 ms on LeNet's conv2. */
  cv->ld = ((size_t) cv->chunk * cv->p + 15) / 16 * 16;
  if ((cv->ld / 16) % 2 == 0)
    cv->ld += 16;
  if ((cv->col = shoal_layer_alloc_floats (layer, (size_t) cv->k * cv->ld, "column matrix", error)) == NULL
      || (cv->dcol = shoal_layer_alloc_floats (layer, (size_t) cv->k * cv->ld, "column gradient", error)) == NULL
      || (cv->mat = shoal_layer_alloc_floats (layer, (size_t) cv->f * cv->ld, "output matrix", error)) == NULL
      || (cv->ones = shoal_layer_alloc_floats (layer, cv->ld, "bias row", error)) == NULL)
    return FALSE;
  for (size_t i = 0; i < cv->ld; i++)
    cv->ones[i] = 1.0f;
  return TRUE;
}

/* Four floats, loaded and stored unaligned: the rows of im2col are a few
 * vectors long, too short for the vectoriser's prologue and epilogue to
 * pay off. */
typedef float v4sf __attribute__ ((vector_size (16), aligned (4), may_alias));

/* d[r * dpitch + o] = s[r * spitch + o] for r < rows, o < n */
static inline void
block_copy (float *restrict d, size_t dpitch, const float *restrict s, size_t spitch,
            int rows, int n)
{
  const int n4 = n & ~3;
  for (int r = 0; r < rows; r++, d += dpitch, s += spitch)
    {
      int o = 0;
      for (; o < n4; o += 4)
        *(v4sf *) (d + o) = *(const v4sf *) (s + o);
      for (; o < n; o++)
        d[o] = s[o];
    }
}

/* d[r * dpitch + o] += s[r * spitch + o] for r < rows, o < n */
static inline void
block_add (float *restrict d, size_t dpitch, const float *restrict s, size_t spitch,
           int rows, int n)
{
  const int n4 = n & ~3;
  for (int r = 0; r < rows; r++, d += dpitch, s += spitch)
    {
      int o = 0;
      for (; o < n4; o += 4)
        *(v4sf *) (d + o) += *(const v4sf *) (s + o);
      for (; o < n; o++)
        d[o] += s[o];
    }
}

/* Unfolds images x[0..nc) into col (k, ld): row (c, i, j), column
 * (image, oh, ow) holds x[image, c, oh*sh - ph + i, ow*sw - pw + j].
 * Only entries inside the image are written; the padding ones stay 0.
 * Image by image so that one channel plane stays in L1. */
static void
im2col (const Conv *cv, const float *x, int nc, float *col)
{
  const int ow = cv->ow, sw = cv->sw, w = cv->w;

  for (int n = 0; n < nc; n++)
    for (int c = 0; c < cv->c; c++)
      {
        const float *plane = x + ((size_t) n * cv->c + c) * cv->h * w;
        for (int i = 0; i < cv->kh; i++)
          {
            const int oh0 = cv->oh_lo[i], rows = cv->oh_hi[i] - oh0;
            for (int j = 0; j < cv->kw; j++)
              {
                const int o0 = cv->ow_lo[j], len = cv->ow_hi[j] - o0;
                float *d = col + (size_t) ((c * cv->kh + i) * cv->kw + j) * cv->ld
                           + (size_t) n * cv->p + (size_t) oh0 * ow + o0;
                const float *s = plane + (ptrdiff_t) (oh0 * cv->sh - cv->ph + i) * w
                                 + o0 * sw - cv->pw + j;
                if (sw == 1)
                  block_copy (d, ow, s, (size_t) cv->sh * w, rows, len);
                else
                  for (int r = 0; r < rows; r++, d += ow, s += (size_t) cv->sh * w)
                    for (int o = 0; o < len; o++)
                      d[o] = s[o * sw];
              }
          }
      }
}

/* The adjoint of im2col: dx[0..nc) = for every pixel, the sum of the
 * column entries copied from it (dx is overwritten). */
static void
col2im (const Conv *cv, const float *col, int nc, float *dx)
{
  const int ow = cv->ow, sw = cv->sw, w = cv->w;

  memset (dx, 0, sizeof (float) * (size_t) nc * cv->c * cv->h * w);
  for (int n = 0; n < nc; n++)
    for (int c = 0; c < cv->c; c++)
      {
        float *plane = dx + ((size_t) n * cv->c + c) * cv->h * w;
        for (int i = 0; i < cv->kh; i++)
          {
            const int oh0 = cv->oh_lo[i], rows = cv->oh_hi[i] - oh0;
            for (int j = 0; j < cv->kw; j++)
              {
                const int o0 = cv->ow_lo[j], len = cv->ow_hi[j] - o0;
                const float *s = col + (size_t) ((c * cv->kh + i) * cv->kw + j) * cv->ld
                                 + (size_t) n * cv->p + (size_t) oh0 * ow + o0;
                float *d = plane + (ptrdiff_t) (oh0 * cv->sh - cv->ph + i) * w
                           + o0 * sw - cv->pw + j;
                if (sw == 1)
                  block_add (d, (size_t) cv->sh * w, s, ow, rows, len);
                else
                  for (int r = 0; r < rows; r++, s += ow, d += (size_t) cv->sh * w)
                    for (int o = 0; o < len; o++)
                      d[o * sw] += s[o];
              }
          }
      }
}

static void
conv_forward (ShoalLayer *layer, ShoalPhase phase)
{
  Conv *cv = layer->priv;
  const float *x = layer->srcs[0]->out.data;
  const float *wt = cv->weight->value.data;
  const float *b = cv->bias ? cv->bias->value.data : NULL;
  const int rows = shoal_tensor_rows (&layer->srcs[0]->out);
  const size_t in_size = (size_t) cv->c * cv->h * cv->w;
  const size_t out_size = (size_t) cv->f * cv->p;
  float *col = cv->col;
  const int p = cv->p;

  (void) phase;
  for (int n0 = 0; n0 < rows; n0 += cv->chunk)
    {
      const int nc = MIN (cv->chunk, rows - n0);
      float *y = layer->out.data + (size_t) n0 * out_size;

      im2col (cv, x + (size_t) n0 * in_size, nc, col);
      if (nc == 1)
        {
          cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasNoTrans, cv->f, p, cv->k,
                       1.0f, wt, cv->k, col, cv->ld, 0.0f, y, p);
          for (int f = 0; b != NULL && f < cv->f; f++)
            {
              float *restrict yf = y + (size_t) f * p;
              const float bf = b[f];
              for (int q = 0; q < p; q++)
                yf[q] += bf;
            }
          continue;
        }
      cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasNoTrans, cv->f, nc * p, cv->k,
                   1.0f, wt, cv->k, col, cv->ld, 0.0f, cv->mat, cv->ld);
      /* (f, image, pixel) -> (image, f, pixel), adding the bias */
      for (int n = 0; n < nc; n++)
        for (int f = 0; f < cv->f; f++)
          {
            float *restrict yf = y + (size_t) n * out_size + (size_t) f * p;
            const float *restrict m = cv->mat + (size_t) f * cv->ld + (size_t) n * p;
            const float bf = b != NULL ? b[f] : 0.0f;
            for (int q = 0; q < p; q++)
              yf[q] = m[q] + bf;
          }
    }
}

static void
conv_backward (ShoalLayer *layer)
{
  Conv *cv = layer->priv;
  const float *x = layer->srcs[0]->out.data;
  const float *wt = cv->weight->value.data;
  float *dw = cv->weight->grad.data;
  float *db = cv->bias ? cv->bias->grad.data : NULL;
  ShoalTensor *dx = layer->src_grad[0];
  const int rows = shoal_tensor_rows (&layer->srcs[0]->out);
  const size_t in_size = (size_t) cv->c * cv->h * cv->w;
  const size_t out_size = (size_t) cv->f * cv->p;
  float *col = cv->col;
  const int p = cv->p;

  for (int n0 = 0; n0 < rows; n0 += cv->chunk)
    {
      const int nc = MIN (cv->chunk, rows - n0);
      const int cols = nc * p;
      const float *g = layer->grad.data + (size_t) n0 * out_size;
      size_t ldg = p;

      if (nc > 1)
        {
          /* (image, f, pixel) -> (f, image, pixel) */
          for (int n = 0; n < nc; n++)
            for (int f = 0; f < cv->f; f++)
              {
                float *restrict m = cv->mat + (size_t) f * cv->ld + (size_t) n * p;
                const float *restrict gs = g + (size_t) n * out_size + (size_t) f * p;
                for (int q = 0; q < p; q++)
                  m[q] = gs[q];
              }
          g = cv->mat;
          ldg = cv->ld;
        }
      if (db != NULL)
        cblas_sgemv (CblasRowMajor, CblasNoTrans, cv->f, cols, 1.0f, g, ldg,
                     cv->ones, 1, 1.0f, db, 1);

      /* forward left the columns of the last chunk only */
      if (rows > cv->chunk)
        im2col (cv, x + (size_t) n0 * in_size, nc, col);
      /* dW (f, k) += dY (f, cols) col^T (cols, k) */
      cblas_sgemm (CblasRowMajor, CblasNoTrans, CblasTrans, cv->f, cv->k, cols,
                   1.0f, g, ldg, col, cv->ld, 1.0f, dw, cv->k);
      if (dx == NULL)
        continue;
      /* dcol (k, cols) = W^T (k, f) dY (f, cols), then folded back onto dx */
      cblas_sgemm (CblasRowMajor, CblasTrans, CblasNoTrans, cv->k, cols, cv->f,
                   1.0f, wt, cv->k, g, ldg, 0.0f, cv->dcol, cv->ld);
      col2im (cv, cv->dcol, nc, dx->data + (size_t) n0 * in_size);
    }
}

static void
conv_finalize (ShoalLayer *layer)
{
  Conv *cv = layer->priv;
  g_free (cv->oh_lo);
  g_free (cv->oh_hi);
  g_free (cv->ow_lo);
  g_free (cv->ow_hi);
  shoal_free_aligned (cv->col);
  shoal_free_aligned (cv->dcol);
  shoal_free_aligned (cv->mat);
  shoal_free_aligned (cv->ones);
  memset (cv, 0, sizeof *cv);
}

const ShoalLayerOps shoal_layer_conv_ops = {
  .type = "conv",
  .summary = "2-D convolution of (N, C, H, W) data: im2col + SGEMM over chunks of the batch",
  .flags = 0,
  .split = { .dims = SHOAL_SPLIT_BATCH | SHOAL_SPLIT_FEATURE, .units_key = "num_filters" },
  .min_srcs = 1,
  .max_srcs = 1,
  .options = conv_options,
  .param_names = conv_param_names,
  .priv_size = sizeof (Conv),
  .setup = conv_setup,
  .forward = conv_forward,
  .backward = conv_backward,
  .finalize = conv_finalize,
  .num_records = NULL,
};
