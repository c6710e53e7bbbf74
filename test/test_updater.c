/* Updaters: every rule against a plain double-precision transcription of
 * the formulas in updater.h, over several steps with its state; closed
 * forms where the rule has one (momentum sums, bias-corrected Adam); lr
 * schedules at chosen steps; gradient clipping; conf names. */
#include <math.h>
#include <string.h>

#include "core/updater.h"

/* A length that is not a multiple of any vector width. */
#define NV 1003
#define NSTEPS 5

/* ---- reference ---------------------------------------------------------- */

typedef struct {
  double w[NV], a[NV], b[NV];
} RefState;

static void
ref_step (const ShoalUpdaterConf *c, double lr, double wd, gint64 t,
          RefState *r, const float *grad, size_t n)
{
  for (size_t i = 0; i < n; i++)
    {
      double w = r->w[i];
      double g = grad[i] + wd * w;
      double *a = &r->a[i], *b = &r->b[i];
      double eps = c->epsilon;
      switch (c->kind)
        {
        case SHOAL_UPDATER_SGD:
          *a = c->momentum * *a - lr * g;
          w += *a;
          break;
        case SHOAL_UPDATER_NESTEROV:
          {
            double vn = c->momentum * *a - lr * g;
            w += -c->momentum * *a + (1 + c->momentum) * vn;
            *a = vn;
          }
          break;
        case SHOAL_UPDATER_ADAGRAD:
          *a += g * g;
          w -= lr * g / (sqrt (*a) + eps);
          break;
        case SHOAL_UPDATER_RMSPROP:
          *a = c->rho * *a + (1 - c->rho) * g * g;
          w -= lr * g / (sqrt (*a) + eps);
          break;
        case SHOAL_UPDATER_ADADELTA:
          {
            *a = c->rho * *a + (1 - c->rho) * g * g;
            double d = -sqrt (*b + eps) / sqrt (*a + eps) * g;
            *b = c->rho * *b + (1 - c->rho) * d * d;
            w += lr * d;
          }
          break;
        case SHOAL_UPDATER_ADAM:
          {
            double b1 = c->beta1, b2 = c->beta2;
            *a = b1 * *a + (1 - b1) * g;
            *b = b2 * *b + (1 - b2) * g * g;
            double mh = *a / (1 - pow (b1, (double) t));
            double vh = *b / (1 - pow (b2, (double) t));
            w -= lr * mh / (sqrt (vh) + eps);
          }
          break;
        default:
          g_assert_not_reached ();
        }
      r->w[i] = w;
    }
}

static gboolean
close_enough (double got, double want)
{
  return fabs (got - want) <= 1e-5 * (1.0 + fabs (want));
}

static void
assert_array_close (const char *what, const float *got, const double *want, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (!close_enough (got[i], want[i]))
      g_error ("%s[%zu]: got %.9g, want %.9g", what, i, got[i], want[i]);
}

static void
fill_gaussian (ShoalRng *rng, float *x, size_t n, float scale)
{
  for (size_t i = 0; i < n; i++)
    x[i] = scale * shoal_rng_gaussian (rng);
}

/* A conf for `kind` whose every constant visibly changes the result:
 * epsilon large enough that sqrt(h) + eps and sqrt(h + eps) differ. */
static ShoalUpdaterConf
test_conf (ShoalUpdaterKind kind)
{
  ShoalUpdaterConf c;
  shoal_updater_conf_defaults (&c, kind);
  c.weight_decay = 0.05f;
  c.momentum = 0.9f;
  c.epsilon = 0.1f;
  c.rho = 0.8f;
  c.schedule.lr = 0.05f;
  if (kind == SHOAL_UPDATER_ADADELTA)
    {
      c.schedule.lr = 1.0f;
      c.epsilon = 1e-2f;
    }
  return c;
}

/* Runs NSTEPS updates of the library and of the reference from the same
 * start and compares values and state after each.  The float arrays start
 * one float into their allocation, so nothing is vector-aligned. */
static void
check_against_reference (const ShoalUpdaterConf *c, float lr_scale, float wd_scale, size_t n)
{
  g_assert_cmpuint (n, <=, NV);
  int nstate = shoal_updater_state_per_value (c->kind);
  float *wbuf = g_new0 (float, n + 1), *gbuf = g_new0 (float, n + 1);
  float *abuf = g_new0 (float, n + 1), *bbuf = g_new0 (float, n + 1);
  float *w = wbuf + 1, *grad = gbuf + 1;
  /* plain sgd keeps no state */
  gboolean stateless = c->kind == SHOAL_UPDATER_SGD && c->momentum == 0.0f;
  float *a = nstate >= 1 && !stateless ? abuf + 1 : NULL;
  float *b = nstate >= 2 ? bbuf + 1 : NULL;
  RefState *r = g_new0 (RefState, 1);

  ShoalRng rng;
  shoal_rng_seed (&rng, 2024, c->kind);
  fill_gaussian (&rng, w, n, 1.0f);
  for (size_t i = 0; i < n; i++)
    r->w[i] = w[i];
  float *w0 = g_memdup2 (w, n * sizeof (float));

  for (int step = 0; step < NSTEPS; step++)
    {
      fill_gaussian (&rng, grad, n, 1.0f);
      if (n > 3)
        {
          grad[2] = 0.0f;      /* no gradient: only weight decay moves it */
          grad[3] = 1e-4f;     /* tiny gradient: epsilon dominates */
        }
      gint64 t = step + 1;
      shoal_updater_apply (c, step, t, lr_scale, wd_scale, w, grad, a, b, n);
      double lr = (double) shoal_lr_at (&c->schedule, step) * lr_scale;
      ref_step (c, lr, (double) c->weight_decay * wd_scale, t, r, grad, n);

      assert_array_close ("value", w, r->w, n);
      if (a)
        assert_array_close ("state_a", a, r->a, n);
      if (b)
        assert_array_close ("state_b", b, r->b, n);
    }
  /* what was compared did move: by far more than the tolerance */
  double moved = 0;
  for (size_t i = 0; i < n; i++)
    moved = MAX (moved, fabs (w[i] - w0[i]));
  if (!(moved > 1e-3))
    g_error ("%s, n %zu: the values moved only %g", shoal_updater_kind_name (c->kind), n, moved);
  g_free (w0);
  g_free (r);
  g_free (wbuf);
  g_free (gbuf);
  g_free (abuf);
  g_free (bbuf);
}

static void
test_rule (gconstpointer data)
{
  ShoalUpdaterKind kind = GPOINTER_TO_INT (data);
  ShoalUpdaterConf c = test_conf (kind);
  check_against_reference (&c, 1.0f, 1.0f, NV);
  /* per-param scales */
  check_against_reference (&c, 0.5f, 3.0f, NV);
  check_against_reference (&c, 2.0f, 0.0f, NV);
  /* lengths below and at a vector width */
  check_against_reference (&c, 1.0f, 1.0f, 1);
  check_against_reference (&c, 1.0f, 1.0f, 16);
  /* a scheduled lr that changes between the steps */
  c.schedule.policy = SHOAL_LR_STEP;
  c.schedule.gamma = 0.5f;
  c.schedule.step_size = 2;
  c.schedule.warmup_steps = 2;
  check_against_reference (&c, 1.0f, 1.0f, NV);
  /* the defaults (tiny epsilon, no decay) */
  shoal_updater_conf_defaults (&c, kind);
  c.momentum = kind == SHOAL_UPDATER_SGD ? 0.0f : 0.9f;
  if (kind == SHOAL_UPDATER_ADADELTA)
    c.schedule.lr = 1.0f;   /* adadelta's steps are sqrt(eps)-sized */
  check_against_reference (&c, 1.0f, 1.0f, NV);
}

/* ---- closed forms -------------------------------------------------------- */

static void
test_sgd_momentum_closed_form (void)
{
  /* constant gradient g: v_k = -lr g (1 + m + ... + m^(k-1)) */
  ShoalUpdaterConf c;
  shoal_updater_conf_defaults (&c, SHOAL_UPDATER_SGD);
  c.momentum = 0.5f;
  c.schedule.lr = 0.1f;
  float w[3] = { 1.0f, -2.0f, 0.0f }, g[3] = { 1.0f, -4.0f, 0.0f }, v[3] = { 0 };
  for (int s = 0; s < 3; s++)
    shoal_updater_apply (&c, s, s + 1, 1.0f, 1.0f, w, g, v, NULL, 3);
  double sum = 1 + 0.5 + 0.25;
  g_assert_cmpfloat_with_epsilon (v[0], -0.1 * sum, 1e-6);
  g_assert_cmpfloat_with_epsilon (v[1], 0.4 * sum, 1e-6);
  /* w moved by v_1 + v_2 + v_3 = -lr g (1 + 1.5 + 1.75) */
  g_assert_cmpfloat_with_epsilon (w[0], 1.0 - 0.1 * 4.25, 1e-6);
  g_assert_cmpfloat_with_epsilon (w[1], -2.0 + 0.4 * 4.25, 1e-6);
  g_assert_cmpfloat (w[2], ==, 0.0f);

  /* without momentum, no state is needed: w -= lr (g + wd w) */
  c.momentum = 0.0f;
  c.weight_decay = 0.1f;
  float w2[2] = { 2.0f, -1.0f }, g2[2] = { 0.5f, 0.5f };
  shoal_updater_apply (&c, 0, 1, 1.0f, 1.0f, w2, g2, NULL, NULL, 2);
  g_assert_cmpfloat_with_epsilon (w2[0], 2.0 - 0.1 * (0.5 + 0.2), 1e-6);
  g_assert_cmpfloat_with_epsilon (w2[1], -1.0 - 0.1 * (0.5 - 0.1), 1e-6);

  /* lr_scale 0 freezes a param whatever its gradient */
  shoal_updater_apply (&c, 0, 1, 0.0f, 1.0f, w2, g2, NULL, NULL, 2);
  g_assert_cmpfloat_with_epsilon (w2[0], 2.0 - 0.1 * (0.5 + 0.2), 1e-6);
}

static void
test_nesterov_closed_form (void)
{
  /* first step from v = 0: v1 = -lr g, w moves (1 + m) v1 */
  ShoalUpdaterConf c;
  shoal_updater_conf_defaults (&c, SHOAL_UPDATER_NESTEROV);
  c.momentum = 0.9f;
  c.schedule.lr = 0.1f;
  float w = 1.0f, g = 2.0f, v = 0.0f;
  shoal_updater_apply (&c, 0, 1, 1.0f, 1.0f, &w, &g, &v, NULL, 1);
  g_assert_cmpfloat_with_epsilon (v, -0.2, 1e-6);
  g_assert_cmpfloat_with_epsilon (w, 1.0 - 1.9 * 0.2, 1e-6);
  /* second: v2 = 0.9 v1 - 0.2 = -0.38; w += -0.9 v1 + 1.9 v2 */
  shoal_updater_apply (&c, 1, 2, 1.0f, 1.0f, &w, &g, &v, NULL, 1);
  g_assert_cmpfloat_with_epsilon (v, -0.38, 1e-6);
  g_assert_cmpfloat_with_epsilon (w, 1.0 - 1.9 * 0.2 + 0.9 * 0.2 - 1.9 * 0.38, 1e-6);
}

static void
test_adam_bias_correction (void)
{
  /* With a constant gradient the bias-corrected moments are g and g^2 at
   * every t, so each of the first steps moves w by lr * sign(g); without
   * the correction step 1 would be lr (1 - b1) / sqrt(1 - b2) = 3.16 lr. */
  ShoalUpdaterConf c;
  shoal_updater_conf_defaults (&c, SHOAL_UPDATER_ADAM);
  c.schedule.lr = 0.01f;
  float w[2] = { 0.5f, 0.5f }, g[2] = { 3.0f, -0.02f }, m[2] = { 0 }, v[2] = { 0 };
  for (gint64 t = 1; t <= 3; t++)
    {
      shoal_updater_apply (&c, (int) t - 1, t, 1.0f, 1.0f, w, g, m, v, 2);
      g_assert_cmpfloat_with_epsilon (w[0], 0.5 - 0.01 * t, 1e-5);
      g_assert_cmpfloat_with_epsilon (w[1], 0.5 + 0.01 * t, 1e-5);
      /* the raw moments are not corrected in the state */
      g_assert_cmpfloat_with_epsilon (m[0], 3.0 * (1 - pow (0.9, (double) t)), 1e-5);
      g_assert_cmpfloat_with_epsilon (v[0], 9.0 * (1 - pow (0.999, (double) t)), 1e-5);
    }
}

static void
test_segments_equal_whole (void)
{
  /* a server slice may cut a param anywhere: updating [0, k) and [k, n)
   * separately must equal one update of [0, n) */
  for (int kind = 0; kind < SHOAL_UPDATER_COUNT; kind++)
    {
      ShoalUpdaterConf c = test_conf (kind);
      enum { M = 301, K = 37 };
      float w1[M], w2[M], g[M], a1[M] = { 0 }, a2[M] = { 0 }, b1[M] = { 0 }, b2[M] = { 0 };
      ShoalRng rng;
      shoal_rng_seed (&rng, 5, 5);
      fill_gaussian (&rng, w1, M, 1.0f);
      memcpy (w2, w1, sizeof w1);
      for (int s = 0; s < 3; s++)
        {
          fill_gaussian (&rng, g, M, 1.0f);
          shoal_updater_apply (&c, s, s + 1, 0.7f, 2.0f, w1, g, a1, b1, M);
          shoal_updater_apply (&c, s, s + 1, 0.7f, 2.0f, w2, g, a2, b2, K);
          shoal_updater_apply (&c, s, s + 1, 0.7f, 2.0f, w2 + K, g + K, a2 + K, b2 + K, M - K);
        }
      g_assert_cmpmem (w1, sizeof w1, w2, sizeof w2);
      g_assert_cmpmem (a1, sizeof a1, a2, sizeof a2);
      g_assert_cmpmem (b1, sizeof b1, b2, sizeof b2);
    }
}

/* ---- learning-rate schedules -------------------------------------------- */

static void
assert_lr (const ShoalLrSchedule *s, int step, double want)
{
  float got = shoal_lr_at (s, step);
  if (fabs (got - want) > 1e-6 * want)
    g_error ("%s: step %d: lr %.9g, want %.9g", shoal_lr_policy_name (s->policy), step, got, want);
}

static ShoalLrSchedule
schedule (ShoalLrPolicy policy)
{
  ShoalUpdaterConf c;
  shoal_updater_conf_defaults (&c, SHOAL_UPDATER_SGD);
  c.schedule.policy = policy;
  c.schedule.lr = 0.1f;
  return c.schedule;
}

static void
test_lr_policies (void)
{
  ShoalLrSchedule s = schedule (SHOAL_LR_FIXED);
  assert_lr (&s, 0, 0.1);
  assert_lr (&s, 123456, 0.1);

  s = schedule (SHOAL_LR_STEP);
  s.gamma = 0.5f;
  s.step_size = 10;
  assert_lr (&s, 0, 0.1);
  assert_lr (&s, 9, 0.1);
  assert_lr (&s, 10, 0.05);
  assert_lr (&s, 19, 0.05);
  assert_lr (&s, 20, 0.025);
  assert_lr (&s, 35, 0.0125);

  s = schedule (SHOAL_LR_EXPONENTIAL);
  s.gamma = 0.5f;
  s.step_size = 10;
  assert_lr (&s, 0, 0.1);
  assert_lr (&s, 5, 0.1 / sqrt (2.0));
  assert_lr (&s, 10, 0.05);
  assert_lr (&s, 20, 0.025);

  s = schedule (SHOAL_LR_INVERSE);
  s.gamma = 0.01f;
  s.power = 0.5f;
  assert_lr (&s, 0, 0.1);
  assert_lr (&s, 300, 0.1 / 2);    /* (1 + 3)^-0.5 */
  assert_lr (&s, 800, 0.1 / 3);    /* (1 + 8)^-0.5 */

  s = schedule (SHOAL_LR_FIXED_STEP);
  s.nsteps = 3;
  s.step_list[0] = 0;
  s.step_list[1] = 100;
  s.step_list[2] = 250;
  s.lr_list[0] = 0.3f;
  s.lr_list[1] = 0.03f;
  s.lr_list[2] = 0.003f;
  assert_lr (&s, 0, 0.3);
  assert_lr (&s, 99, 0.3);
  assert_lr (&s, 100, 0.03);
  assert_lr (&s, 249, 0.03);
  assert_lr (&s, 250, 0.003);
  assert_lr (&s, 1000000, 0.003);
  s.nsteps = SHOAL_LR_MAX_STEPS;
  for (int i = 0; i < SHOAL_LR_MAX_STEPS; i++)
    {
      s.step_list[i] = 10 * i;
      s.lr_list[i] = 1.0f / (float) (i + 1);
    }
  assert_lr (&s, 10 * SHOAL_LR_MAX_STEPS - 11, 1.0 / (SHOAL_LR_MAX_STEPS - 1));
  assert_lr (&s, 10 * SHOAL_LR_MAX_STEPS, 1.0 / SHOAL_LR_MAX_STEPS);
}

static void
test_lr_warmup (void)
{
  /* linear from lr/warmup at step 0 to the full lr at step warmup-1 */
  ShoalLrSchedule s = schedule (SHOAL_LR_FIXED);
  s.warmup_steps = 4;
  assert_lr (&s, 0, 0.025);
  assert_lr (&s, 1, 0.05);
  assert_lr (&s, 2, 0.075);
  assert_lr (&s, 3, 0.1);
  assert_lr (&s, 4, 0.1);
  assert_lr (&s, 500, 0.1);

  /* on top of a policy: the policy's lr at that step, scaled */
  s = schedule (SHOAL_LR_STEP);
  s.gamma = 0.5f;
  s.step_size = 2;
  s.warmup_steps = 4;
  assert_lr (&s, 1, 0.1 * 2 / 4);
  assert_lr (&s, 2, 0.05 * 3 / 4);
  assert_lr (&s, 4, 0.025);

  s = schedule (SHOAL_LR_FIXED_STEP);
  s.nsteps = 2;
  s.step_list[0] = 0;
  s.step_list[1] = 3;
  s.lr_list[0] = 0.2f;
  s.lr_list[1] = 0.02f;
  s.warmup_steps = 5;
  assert_lr (&s, 0, 0.2 / 5);
  assert_lr (&s, 2, 0.2 * 3 / 5);
  assert_lr (&s, 3, 0.02 * 4 / 5);
  assert_lr (&s, 5, 0.02);
}

/* ---- clipping ----------------------------------------------------------- */

static void
test_clip_value (void)
{
  float g[5] = { 3.0f, -5.0f, 0.5f, -0.2f, 1.0f };
  double norm = shoal_clip_gradients (g, 5, 1.0f, 0.0f);
  g_assert_cmpfloat_with_epsilon (norm, sqrt (9 + 25 + 0.25 + 0.04 + 1), 1e-6);
  float want[5] = { 1.0f, -1.0f, 0.5f, -0.2f, 1.0f };
  g_assert_cmpmem (g, sizeof g, want, sizeof want);
}

static void
test_clip_norm (void)
{
  float g[2] = { 3.0f, -4.0f };
  g_assert_cmpfloat_with_epsilon (shoal_clip_gradients (g, 2, 0.0f, 10.0f), 5.0, 1e-6);
  g_assert_cmpfloat (g[0], ==, 3.0f);   /* below the limit: untouched */
  g_assert_cmpfloat (g[1], ==, -4.0f);
  g_assert_cmpfloat_with_epsilon (shoal_clip_gradients (g, 2, 0.0f, 1.0f), 5.0, 1e-6);
  g_assert_cmpfloat_with_epsilon (g[0], 0.6, 1e-6);
  g_assert_cmpfloat_with_epsilon (g[1], -0.8, 1e-6);

  /* both: elementwise first, then the norm of the clamped vector */
  float h[3] = { 3.0f, -5.0f, 0.0f };
  g_assert_cmpfloat_with_epsilon (shoal_clip_gradients (h, 3, 2.0f, 1.0f), sqrt (34.0), 1e-6);
  g_assert_cmpfloat_with_epsilon (h[0], sqrt (0.5), 1e-6);
  g_assert_cmpfloat_with_epsilon (h[1], -sqrt (0.5), 1e-6);
  g_assert_cmpfloat (h[2], ==, 0.0f);

  /* off: the norm is still reported, nothing changes */
  float k[2] = { 6.0f, 8.0f };
  g_assert_cmpfloat_with_epsilon (shoal_clip_gradients (k, 2, 0.0f, 0.0f), 10.0, 1e-6);
  g_assert_cmpfloat (k[0], ==, 6.0f);
  g_assert_cmpfloat (shoal_clip_gradients (NULL, 0, 1.0f, 1.0f), ==, 0.0);
}

static void
test_clip_long_vector (void)
{
  enum { M = 100003 };
  float *g = g_new (float, M), *orig = g_new (float, M);
  ShoalRng rng;
  shoal_rng_seed (&rng, 3, 3);
  fill_gaussian (&rng, orig, M, 1.0f);
  double sumsq = 0, sumsq_clamped = 0;
  for (size_t i = 0; i < M; i++)
    {
      sumsq += (double) orig[i] * orig[i];
      double c = fmin (fmax (orig[i], -1.5), 1.5);
      sumsq_clamped += c * c;
    }
  memcpy (g, orig, M * sizeof (float));
  double norm = shoal_clip_gradients (g, M, 1.5f, 100.0f);
  g_assert_cmpfloat (fabs (norm - sqrt (sumsq)), <, 1e-9 * sqrt (sumsq));
  double scale = 100.0 / sqrt (sumsq_clamped);
  double after = 0;
  for (size_t i = 0; i < M; i++)
    {
      double want = fmin (fmax (orig[i], -1.5), 1.5) * scale;
      g_assert_cmpfloat (fabs (g[i] - want), <=, 1e-6 * fabs (want) + 1e-12);
      after += (double) g[i] * g[i];
    }
  g_assert_cmpfloat (fabs (sqrt (after) - 100.0), <, 1e-4);
  g_free (g);
  g_free (orig);
}

/* ---- names and defaults ------------------------------------------------- */

static void
test_names (void)
{
  const char *kinds[SHOAL_UPDATER_COUNT] = {
    [SHOAL_UPDATER_SGD] = "sgd", [SHOAL_UPDATER_NESTEROV] = "nesterov",
    [SHOAL_UPDATER_ADAGRAD] = "adagrad", [SHOAL_UPDATER_RMSPROP] = "rmsprop",
    [SHOAL_UPDATER_ADADELTA] = "adadelta", [SHOAL_UPDATER_ADAM] = "adam",
  };
  for (int k = 0; k < SHOAL_UPDATER_COUNT; k++)
    {
      g_assert_cmpstr (shoal_updater_kind_name (k), ==, kinds[k]);
      ShoalUpdaterKind parsed = SHOAL_UPDATER_COUNT;
      g_assert_true (shoal_updater_kind_parse (kinds[k], &parsed));
      g_assert_cmpint (parsed, ==, k);
    }
  const char *policies[SHOAL_LR_COUNT] = {
    [SHOAL_LR_FIXED] = "fixed", [SHOAL_LR_STEP] = "step",
    [SHOAL_LR_FIXED_STEP] = "fixed_step", [SHOAL_LR_EXPONENTIAL] = "exponential",
    [SHOAL_LR_INVERSE] = "inverse",
  };
  for (int p = 0; p < SHOAL_LR_COUNT; p++)
    {
      g_assert_cmpstr (shoal_lr_policy_name (p), ==, policies[p]);
      ShoalLrPolicy parsed = SHOAL_LR_COUNT;
      g_assert_true (shoal_lr_policy_parse (policies[p], &parsed));
      g_assert_cmpint (parsed, ==, p);
    }
  ShoalUpdaterKind kind = SHOAL_UPDATER_COUNT;
  ShoalLrPolicy policy = SHOAL_LR_COUNT;
  g_assert_false (shoal_updater_kind_parse ("Adam", &kind));
  g_assert_false (shoal_updater_kind_parse ("momentum", &kind));
  g_assert_false (shoal_updater_kind_parse ("", &kind));
  g_assert_false (shoal_lr_policy_parse ("steps", &policy));
  g_assert_false (shoal_lr_policy_parse ("fixed-step", &policy));
  g_assert_cmpint (kind, ==, SHOAL_UPDATER_COUNT);
  g_assert_cmpint (policy, ==, SHOAL_LR_COUNT);
}

static void
test_defaults_and_state (void)
{
  for (int k = 0; k < SHOAL_UPDATER_COUNT; k++)
    {
      ShoalUpdaterConf c;
      memset (&c, 0xff, sizeof c);
      shoal_updater_conf_defaults (&c, k);
      g_assert_cmpint (c.kind, ==, k);
      g_assert_cmpint (c.schedule.policy, ==, SHOAL_LR_FIXED);
      g_assert_cmpfloat (c.schedule.lr, ==, 0.01f);
      g_assert_cmpint (c.schedule.warmup_steps, ==, 0);
      g_assert_cmpint (c.schedule.nsteps, ==, 0);
      g_assert_cmpfloat (c.momentum, ==, 0.0f);
      g_assert_cmpfloat (c.weight_decay, ==, 0.0f);
      g_assert_cmpfloat (c.beta1, ==, 0.9f);
      g_assert_cmpfloat (c.beta2, ==, 0.999f);
      g_assert_cmpfloat (c.rho, ==, k == SHOAL_UPDATER_ADADELTA ? 0.95f : 0.9f);
      gboolean small_eps = k == SHOAL_UPDATER_SGD || k == SHOAL_UPDATER_NESTEROV
                           || k == SHOAL_UPDATER_ADAM;
      g_assert_cmpfloat (c.epsilon, ==, small_eps ? 1e-8f : 1e-6f);
      g_assert_cmpfloat (c.clip_value, ==, 0.0f);
      g_assert_cmpfloat (c.clip_norm, ==, 0.0f);
      /* the default schedule does not decay, whatever policy is chosen */
      for (int p = 0; p < SHOAL_LR_COUNT; p++)
        {
          c.schedule.policy = p;
          if (p != SHOAL_LR_FIXED_STEP)
            assert_lr (&c.schedule, 1000, 0.01);
        }
    }
  g_assert_cmpint (shoal_updater_state_per_value (SHOAL_UPDATER_SGD), ==, 1);
  g_assert_cmpint (shoal_updater_state_per_value (SHOAL_UPDATER_NESTEROV), ==, 1);
  g_assert_cmpint (shoal_updater_state_per_value (SHOAL_UPDATER_ADAGRAD), ==, 1);
  g_assert_cmpint (shoal_updater_state_per_value (SHOAL_UPDATER_RMSPROP), ==, 1);
  g_assert_cmpint (shoal_updater_state_per_value (SHOAL_UPDATER_ADADELTA), ==, 2);
  g_assert_cmpint (shoal_updater_state_per_value (SHOAL_UPDATER_ADAM), ==, 2);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  for (int k = 0; k < SHOAL_UPDATER_COUNT; k++)
    {
      char *path = g_strdup_printf ("/updater/reference/%s", shoal_updater_kind_name (k));
      g_test_add_data_func (path, GINT_TO_POINTER (k), test_rule);
      g_free (path);
    }
  g_test_add_func ("/updater/sgd-momentum", test_sgd_momentum_closed_form);
  g_test_add_func ("/updater/nesterov", test_nesterov_closed_form);
  g_test_add_func ("/updater/adam-bias-correction", test_adam_bias_correction);
  g_test_add_func ("/updater/segments", test_segments_equal_whole);
  g_test_add_func ("/updater/lr-policies", test_lr_policies);
  g_test_add_func ("/updater/lr-warmup", test_lr_warmup);
  g_test_add_func ("/updater/clip-value", test_clip_value);
  g_test_add_func ("/updater/clip-norm", test_clip_norm);
  g_test_add_func ("/updater/clip-long", test_clip_long_vector);
  g_test_add_func ("/updater/names", test_names);
  g_test_add_func ("/updater/defaults", test_defaults_and_state);
  return g_test_run ();
}
