/* Upper bound on MLP training speed from OpenBLAS alone.
 *
 * A training step of the Fashion-MNIST MLP (784-1024-1024-10, batch 64) is
 * mostly matrix products.  Timing exactly those products with cblas_sgemm,
 * and nothing else, gives the samples/s that no framework running these products through
 * this BLAS can beat;
 * bench/run.sh divides shoal's speed by it.  The input layer's dX is not
 * part of a step (nothing consumes it), so the bound leaves it out; it is
 * timed separately because a framework that computes it anyway pays for it.
 *
 * Row-major, batch rows.  Two layouts of a dense layer's weights W:
 *   in_out (in x out):  Y = X·W    dW = X'·dY   dX = dY·W'
 *   out_in (out x in):  Y = X·W'   dW = dY'·X   dX = dY·W     (PyTorch's)
 * They hit different OpenBLAS kernels; the bound is the faster of the two,
 * and both are printed so a layer author can pick.
 *
 * Usage: sgemm_bound [-t THREADS[,THREADS...]] [-r REPS] [-v]
 * Prints per thread count one line per layout and the bound:
 *   sgemm_bound threads=2 batch=64 layout=out_in step_ms=... samples_per_sec=... ...
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BATCH 64
#define NLAYERS 3

static const int widths[NLAYERS + 1] = { 784, 1024, 1024, 10 };

typedef enum { LAYOUT_IN_OUT, LAYOUT_OUT_IN, LAYOUT_COUNT } Layout;
static const char *const layout_names[LAYOUT_COUNT] = { "in_out", "out_in" };

typedef struct {
  char name[64];
  enum CBLAS_TRANSPOSE ta, tb;
  int m, n, k;
  const float *a, *b;
  float *c;
  int lda, ldb;
  float beta;   /* 1 for dW: backward accumulates into gradients */
} Gemm;

/* act[l]: layer l's input (BATCH x widths[l]); grad[l] its gradient;
 * w[l], dw[l]: weights and their gradient, in the layout being timed. */
typedef struct {
  float *act[NLAYERS + 1], *grad[NLAYERS + 1], *w[NLAYERS], *dw[NLAYERS];
} Buffers;

static double
now (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static float *
filled (size_t n, unsigned *seed)
{
  float *p = malloc (n * sizeof *p);
  if (!p) {
    fprintf (stderr, "sgemm_bound: out of memory\n");
    exit (1);
  }
  for (size_t i = 0; i < n; i++) {
    *seed = *seed * 1103515245u + 12345u;
    p[i] = (float) ((*seed >> 9) & 0xffff) / 65536.0f - 0.5f;
  }
  return p;
}

static Gemm
gemm (enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k,
      const float *a, const float *b, float *c, float beta)
{
  Gemm g = { .ta = ta, .tb = tb, .m = m, .n = n, .k = k, .a = a, .b = b, .c = c,
             .beta = beta };
  g.lda = ta == CblasNoTrans ? k : m;
  g.ldb = tb == CblasNoTrans ? n : k;
  return g;
}

/* Layer l's three products in `layout`: 0 forward, 1 dW, 2 dX. */
static Gemm
layer_gemm (const Buffers *b, Layout layout, int l, int which)
{
  int in = widths[l], out = widths[l + 1];
  Gemm g;
  if (layout == LAYOUT_IN_OUT) {
    if (which == 0)
      g = gemm (CblasNoTrans, CblasNoTrans, BATCH, out, in, b->act[l], b->w[l], b->act[l + 1], 0);
    else if (which == 1)
      g = gemm (CblasTrans, CblasNoTrans, in, out, BATCH, b->act[l], b->grad[l + 1], b->dw[l], 1);
    else
      g = gemm (CblasNoTrans, CblasTrans, BATCH, in, out, b->grad[l + 1], b->w[l], b->grad[l], 0);
  } else {
    if (which == 0)
      g = gemm (CblasNoTrans, CblasTrans, BATCH, out, in, b->act[l], b->w[l], b->act[l + 1], 0);
    else if (which == 1)
      g = gemm (CblasTrans, CblasNoTrans, out, in, BATCH, b->grad[l + 1], b->act[l], b->dw[l], 1);
    else
      g = gemm (CblasNoTrans, CblasNoTrans, BATCH, in, out, b->grad[l + 1], b->w[l], b->grad[l], 0);
  }
  static const char *const what[3] = { "fwd  Y", "bwd dW", "bwd dX" };
  snprintf (g.name, sizeof g.name, "%s%d %c%c %4dx%4dx%4d%s", what[which], l + 1,
            g.ta == CblasTrans ? 'T' : 'N', g.tb == CblasTrans ? 'T' : 'N', g.m, g.n, g.k,
            which == 2 && l == 0 ? " (unused)" : "");
  return g;
}

static void
run_gemm (const Gemm *g)
{
  cblas_sgemm (CblasRowMajor, g->ta, g->tb, g->m, g->n, g->k, 1.0f,
               g->a, g->lda, g->b, g->ldb, g->beta, g->c, g->n);
}

static double
gemm_flops (const Gemm *g)
{
  return 2.0 * g->m * g->n * g->k;
}

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

#define TRIALS 7

/* The fastest of TRIALS timings of `reps` passes over gemms[0..n), in
 * seconds per pass: a bound wants the best the BLAS can do, and on a
 * shared machine the slower trials measure the neighbours. */
static double
time_gemms (const Gemm *gemms, int n, int reps)
{
  double t[TRIALS];
  for (int r = 0; r < reps / 4 + 1; r++)
    for (int i = 0; i < n; i++)
      run_gemm (&gemms[i]);
  for (int tr = 0; tr < TRIALS; tr++) {
    double t0 = now ();
    for (int r = 0; r < reps; r++)
      for (int i = 0; i < n; i++)
        run_gemm (&gemms[i]);
    t[tr] = (now () - t0) / reps;
  }
  qsort (t, TRIALS, sizeof t[0], cmp_double);
  return t[0];
}

int
main (int argc, char **argv)
{
  int threads[8] = { 1, 2 }, nthreads = 2, reps = 40, verbose = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp (argv[i], "-t") && i + 1 < argc) {
      nthreads = 0;
      for (char *s = strtok (argv[++i], ","); s && nthreads < 8; s = strtok (NULL, ","))
        threads[nthreads++] = atoi (s);
    } else if (!strcmp (argv[i], "-r") && i + 1 < argc) {
      reps = atoi (argv[++i]);
    } else if (!strcmp (argv[i], "-v")) {
      verbose = 1;
    } else {
      fprintf (stderr, "usage: %s [-t THREADS[,THREADS...]] [-r REPS] [-v]\n", argv[0]);
      return 2;
    }
  }
  if (reps < 1 || nthreads < 1) {
    fprintf (stderr, "sgemm_bound: -r and -t need positive numbers\n");
    return 2;
  }
  for (int t = 0; t < nthreads; t++)
    if (threads[t] < 1) {
      fprintf (stderr, "sgemm_bound: thread counts must be positive\n");
      return 2;
    }

  unsigned seed = 42;
  Buffers buf;
  for (int l = 0; l <= NLAYERS; l++) {
    buf.act[l] = filled ((size_t) BATCH * widths[l], &seed);
    buf.grad[l] = filled ((size_t) BATCH * widths[l], &seed);
  }
  for (int l = 0; l < NLAYERS; l++) {
    buf.w[l] = filled ((size_t) widths[l] * widths[l + 1], &seed);
    buf.dw[l] = filled ((size_t) widths[l] * widths[l + 1], &seed);
  }

  /* Each layout's step in execution order: forward up, then dW and dX
   * down; the input layer's dX sits apart, at the end. */
  Gemm step[LAYOUT_COUNT][3 * NLAYERS];
  int nstep = 0;
  for (int lay = 0; lay < LAYOUT_COUNT; lay++) {
    int n = 0;
    for (int l = 0; l < NLAYERS; l++)
      step[lay][n++] = layer_gemm (&buf, lay, l, 0);
    for (int l = NLAYERS - 1; l >= 0; l--) {
      step[lay][n++] = layer_gemm (&buf, lay, l, 1);
      if (l > 0)
        step[lay][n++] = layer_gemm (&buf, lay, l, 2);
    }
    nstep = n;
    step[lay][n] = layer_gemm (&buf, lay, 0, 2);
  }
  double step_flops = 0;
  for (int i = 0; i < nstep; i++)
    step_flops += gemm_flops (&step[0][i]);

  for (int t = 0; t < nthreads; t++) {
    openblas_set_num_threads (threads[t]);
    double best = 0, best_dx = 0;
    Layout best_layout = LAYOUT_IN_OUT;
    for (int lay = 0; lay < LAYOUT_COUNT; lay++) {
      if (verbose)
        for (int i = 0; i <= nstep; i++) {
          double s = time_gemms (&step[lay][i], 1, reps);
          printf ("  threads=%d layout=%s %s %8.1f us %6.1f GFLOP/s\n", threads[t],
                  layout_names[lay], step[lay][i].name, s * 1e6,
                  gemm_flops (&step[lay][i]) / s * 1e-9);
        }
      double s = time_gemms (step[lay], nstep, reps);
      double s_dx1 = time_gemms (&step[lay][nstep], 1, reps);
      printf ("sgemm_layout threads=%d batch=%d layout=%s step_ms=%.3f samples_per_sec=%.0f "
              "gflops=%.1f with_input_dx_samples_per_sec=%.0f\n",
              threads[t], BATCH, layout_names[lay], s * 1e3, BATCH / s,
              step_flops / s * 1e-9, BATCH / (s + s_dx1));
      if (best == 0 || s < best) {
        best = s;
        best_dx = s + s_dx1;
        best_layout = lay;
      }
    }
    printf ("sgemm_bound threads=%d batch=%d layout=%s step_ms=%.3f samples_per_sec=%.0f "
            "gflops=%.1f mflop_per_sample=%.2f with_input_dx_samples_per_sec=%.0f\n",
            threads[t], BATCH, layout_names[best_layout], best * 1e3, BATCH / best,
            step_flops / best * 1e-9, step_flops / BATCH * 1e-6, BATCH / best_dx);
    fflush (stdout);
  }

  for (int l = 0; l <= NLAYERS; l++) {
    free (buf.act[l]);
    free (buf.grad[l]);
  }
  for (int l = 0; l < NLAYERS; l++) {
    free (buf.w[l]);
    free (buf.dw[l]);
  }
  return 0;
}
