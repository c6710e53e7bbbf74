/* Optimiser rules and learning-rate schedules (formulas in updater.h).
 *
 * shoal_updater_apply runs on every server for every value of the model at
 * every step, so each rule is one flat loop over restrict pointers with all
 * per-call constants (lr, weight decay, bias corrections) hoisted out, and
 * an AVX2 clone beside the baseline one.  The rules with a square root are
 * only vectorised when sqrtf need not set errno (-fno-math-errno): the
 * state under the root is never negative, so nothing is lost by that. */
#include "core/updater.h"

#include <math.h>
#include <string.h>

static const char *const updater_names[] = {
  [SHOAL_UPDATER_SGD] = "sgd",
  [SHOAL_UPDATER_NESTEROV] = "nesterov",
  [SHOAL_UPDATER_ADAGRAD] = "adagrad",
  [SHOAL_UPDATER_RMSPROP] = "rmsprop",
  [SHOAL_UPDATER_ADADELTA] = "adadelta",
  [SHOAL_UPDATER_ADAM] = "adam",
};
G_STATIC_ASSERT (G_N_ELEMENTS (updater_names) == SHOAL_UPDATER_COUNT);

static const char *const lr_policy_names[] = {
  [SHOAL_LR_FIXED] = "fixed",
  [SHOAL_LR_STEP] = "step",
  [SHOAL_LR_FIXED_STEP] = "fixed_step",
  [SHOAL_LR_EXPONENTIAL] = "exponential",
  [SHOAL_LR_INVERSE] = "inverse",
};
G_STATIC_ASSERT (G_N_ELEMENTS (lr_policy_names) == SHOAL_LR_COUNT);

static const int state_per_value[] = {
  [SHOAL_UPDATER_SGD] = 1,        /* velocity (untouched while momentum is 0) */
  [SHOAL_UPDATER_NESTEROV] = 1,   /* velocity */
  [SHOAL_UPDATER_ADAGRAD] = 1,    /* sum of squared gradients */
  [SHOAL_UPDATER_RMSPROP] = 1,    /* running mean of squared gradients */
  [SHOAL_UPDATER_ADADELTA] = 2,   /* squared gradients, squared updates */
  [SHOAL_UPDATER_ADAM] = 2,       /* first and second moments */
};
G_STATIC_ASSERT (G_N_ELEMENTS (state_per_value) == SHOAL_UPDATER_COUNT);

const char *
shoal_updater_kind_name (ShoalUpdaterKind kind)
{
  g_return_val_if_fail ((unsigned) kind < SHOAL_UPDATER_COUNT, NULL);
  return updater_names[kind];
}

gboolean
shoal_updater_kind_parse (const char *name, ShoalUpdaterKind *kind)
{
  g_return_val_if_fail (name != NULL && kind != NULL, FALSE);
  for (int k = 0; k < SHOAL_UPDATER_COUNT; k++)
    if (strcmp (name, updater_names[k]) == 0)
      {
        *kind = (ShoalUpdaterKind) k;
        return TRUE;
      }
  return FALSE;
}

const char *
shoal_lr_policy_name (ShoalLrPolicy policy)
{
  g_return_val_if_fail ((unsigned) policy < SHOAL_LR_COUNT, NULL);
  return lr_policy_names[policy];
}

gboolean
shoal_lr_policy_parse (const char *name, ShoalLrPolicy *policy)
{
  g_return_val_if_fail (name != NULL && policy != NULL, FALSE);
  for (int p = 0; p < SHOAL_LR_COUNT; p++)
    if (strcmp (name, lr_policy_names[p]) == 0)
      {
        *policy = (ShoalLrPolicy) p;
        return TRUE;
      }
  return FALSE;
}

void
shoal_updater_conf_defaults (ShoalUpdaterConf *conf, ShoalUpdaterKind kind)
{
  g_return_if_fail (conf != NULL);
  g_return_if_fail ((unsigned) kind < SHOAL_UPDATER_COUNT);
  memset (conf, 0, sizeof *conf);
  conf->kind = kind;
  conf->schedule.policy = SHOAL_LR_FIXED;
  conf->schedule.lr = 0.01f;
  /* neutral values: a policy picked without its parameters does not decay */
  conf->schedule.gamma = 1.0f;
  conf->schedule.power = 0.0f;
  conf->schedule.step_size = 1;
  conf->momentum = 0.0f;
  conf->beta1 = 0.9f;
  conf->beta2 = 0.999f;
  conf->rho = kind == SHOAL_UPDATER_ADADELTA ? 0.95f : 0.9f;
  switch (kind)
    {
    case SHOAL_UPDATER_ADAGRAD:
    case SHOAL_UPDATER_RMSPROP:
    case SHOAL_UPDATER_ADADELTA:
      conf->epsilon = 1e-6f;
      break;
    default:
      conf->epsilon = 1e-8f;
      break;
    }
}

float
shoal_lr_at (const ShoalLrSchedule *s, int step)
{
  g_return_val_if_fail (s != NULL, 0.0f);
  if (step < 0)
    step = 0;
  /* a step_size below 1 would divide by zero; it means "every step" */
  double step_size = s->step_size > 0 ? (double) s->step_size : 1.0;
  double lr = s->lr;

  switch (s->policy)
    {
    case SHOAL_LR_FIXED:
      break;
    case SHOAL_LR_STEP:
      lr *= pow (s->gamma, floor ((double) step / step_size));
      break;
    case SHOAL_LR_FIXED_STEP:
      {
        int n = MIN (s->nsteps, SHOAL_LR_MAX_STEPS);
        if (n <= 0)
          break;  /* no list: stay at lr */
        int i = 0;
        while (i + 1 < n && s->step_list[i + 1] <= step)
          i++;
        lr = s->lr_list[i];
      }
      break;
    case SHOAL_LR_EXPONENTIAL:
      lr *= pow (s->gamma, (double) step / step_size);
      break;
    case SHOAL_LR_INVERSE:
      lr *= pow (1.0 + (double) s->gamma * step, -(double) s->power);
      break;
    case SHOAL_LR_COUNT:
      g_return_val_if_reached (0.0f);
    }

  if (s->warmup_steps > 0 && step < s->warmup_steps)
    lr *= (double) (step + 1) / (double) s->warmup_steps;
  return (float) lr;
}

int
shoal_updater_state_per_value (ShoalUpdaterKind kind)
{
  g_return_val_if_fail ((unsigned) kind < SHOAL_UPDATER_COUNT, 0);
  return state_per_value[kind];
}

/* ---- the rules ----------------------------------------------------------
 * g = grad + wd * w in every loop; wd = 0 costs nothing extra since w is
 * loaded anyway.
 *
 * At -O2 GCC only vectorises a loop whose trip count is known to be a
 * multiple of the vector width, so each rule runs its body over the
 * largest multiple of VEC_SPLIT values, then over the few left. */

#define VEC_SPLIT 16
/* Not under TSan: the clones' ifunc resolver runs while the dynamic
 * linker relocates, before TSan's runtime is up, and the instrumented
 * resolver crashes every program at start. */
#if defined(__x86_64__) && defined(__has_attribute) && !defined(__SANITIZE_THREAD__)
#if __has_attribute(target_clones)
#define HOT_LOOP __attribute__ ((target_clones ("avx2", "default")))
#endif
#endif
#ifndef HOT_LOOP
#define HOT_LOOP
#endif
#define BODY static inline __attribute__ ((always_inline)) void

#define SPLIT_RUN(body, ...)                                    \
  do {                                                          \
    size_t nv_ = n & ~(size_t) (VEC_SPLIT - 1);                 \
    body (0, nv_, __VA_ARGS__);                                 \
    body (nv_, n, __VA_ARGS__);                                 \
  } while (0)

BODY
sgd_body (size_t from, size_t to, float lr, float wd,
          float *restrict w, const float *restrict grad)
{
  for (size_t i = from; i < to; i++)
    w[i] -= lr * (grad[i] + wd * w[i]);
}

HOT_LOOP static void
rule_sgd (float lr, float wd, float *restrict w, const float *restrict grad, size_t n)
{
  SPLIT_RUN (sgd_body, lr, wd, w, grad);
}

BODY
momentum_body (size_t from, size_t to, float lr, float wd, float mom,
               float *restrict w, const float *restrict grad, float *restrict v)
{
  for (size_t i = from; i < to; i++)
    {
      float g = grad[i] + wd * w[i];
      float vn = mom * v[i] - lr * g;
      v[i] = vn;
      w[i] += vn;
    }
}

HOT_LOOP static void
rule_momentum (float lr, float wd, float mom, float *restrict w, const float *restrict grad,
               float *restrict v, size_t n)
{
  SPLIT_RUN (momentum_body, lr, wd, mom, w, grad, v);
}

BODY
nesterov_body (size_t from, size_t to, float lr, float wd, float mom,
               float *restrict w, const float *restrict grad, float *restrict v)
{
  float mom1 = 1.0f + mom;
  for (size_t i = from; i < to; i++)
    {
      float g = grad[i] + wd * w[i];
      float vo = v[i];
      float vn = mom * vo - lr * g;
      v[i] = vn;
      w[i] += mom1 * vn - mom * vo;
    }
}

HOT_LOOP static void
rule_nesterov (float lr, float wd, float mom, float *restrict w, const float *restrict grad,
               float *restrict v, size_t n)
{
  SPLIT_RUN (nesterov_body, lr, wd, mom, w, grad, v);
}

BODY
adagrad_body (size_t from, size_t to, float lr, float wd, float eps,
              float *restrict w, const float *restrict grad, float *restrict h)
{
  for (size_t i = from; i < to; i++)
    {
      float g = grad[i] + wd * w[i];
      float hn = h[i] + g * g;
      h[i] = hn;
      w[i] -= lr * g / (sqrtf (hn) + eps);
    }
}

HOT_LOOP static void
rule_adagrad (float lr, float wd, float eps, float *restrict w, const float *restrict grad,
              float *restrict h, size_t n)
{
  SPLIT_RUN (adagrad_body, lr, wd, eps, w, grad, h);
}

BODY
rmsprop_body (size_t from, size_t to, float lr, float wd, float rho, float eps,
              float *restrict w, const float *restrict grad, float *restrict h)
{
  float rho1 = 1.0f - rho;
  for (size_t i = from; i < to; i++)
    {
      float g = grad[i] + wd * w[i];
      float hn = rho * h[i] + rho1 * g * g;
      h[i] = hn;
      w[i] -= lr * g / (sqrtf (hn) + eps);
    }
}

HOT_LOOP static void
rule_rmsprop (float lr, float wd, float rho, float eps, float *restrict w,
              const float *restrict grad, float *restrict h, size_t n)
{
  SPLIT_RUN (rmsprop_body, lr, wd, rho, eps, w, grad, h);
}

BODY
adadelta_body (size_t from, size_t to, float lr, float wd, float rho, float eps,
               float *restrict w, const float *restrict grad,
               float *restrict h, float *restrict u)
{
  float rho1 = 1.0f - rho;
  for (size_t i = from; i < to; i++)
    {
      float g = grad[i] + wd * w[i];
      float hn = rho * h[i] + rho1 * g * g;
      float d = -sqrtf (u[i] + eps) / sqrtf (hn + eps) * g;
      h[i] = hn;
      u[i] = rho * u[i] + rho1 * d * d;
      w[i] += lr * d;
    }
}

HOT_LOOP static void
rule_adadelta (float lr, float wd, float rho, float eps, float *restrict w,
               const float *restrict grad, float *restrict h, float *restrict u, size_t n)
{
  SPLIT_RUN (adadelta_body, lr, wd, rho, eps, w, grad, h, u);
}

/* lr_c = lr / (1 - b1^t) and rs = 1 / sqrt(1 - b2^t): the bias
 * corrections fold into two scalars. */
BODY
adam_body (size_t from, size_t to, float lr_c, float rs, float wd,
           float b1, float b2, float eps, float *restrict w, const float *restrict grad,
           float *restrict m, float *restrict v)
{
  float b1c = 1.0f - b1, b2c = 1.0f - b2;
  for (size_t i = from; i < to; i++)
    {
      float g = grad[i] + wd * w[i];
      float mn = b1 * m[i] + b1c * g;
      float vn = b2 * v[i] + b2c * g * g;
      m[i] = mn;
      v[i] = vn;
      w[i] -= lr_c * mn / (sqrtf (vn) * rs + eps);
    }
}

HOT_LOOP static void
rule_adam (float lr_c, float rs, float wd, float b1, float b2, float eps,
           float *restrict w, const float *restrict grad,
           float *restrict m, float *restrict v, size_t n)
{
  SPLIT_RUN (adam_body, lr_c, rs, wd, b1, b2, eps, w, grad, m, v);
}

void
shoal_updater_scalars (const ShoalUpdaterConf *conf, int step, gint64 t, float lr_scale, float wd_scale,
                       ShoalUpdateScalars *out)
{
  g_return_if_fail (conf != NULL && out != NULL);
  *out = (ShoalUpdateScalars) {
    .kind = conf->kind,
    .momentum = conf->momentum != 0.0f,
    .lr = shoal_lr_at (&conf->schedule, step) * lr_scale,
    .wd = conf->weight_decay * wd_scale,
    .mom = conf->momentum,
    .rho = conf->rho,
    .eps = conf->epsilon,
    .b1 = conf->beta1,
    .b2 = conf->beta2,
  };
  if (conf->kind == SHOAL_UPDATER_ADAM)
    {
      double bc1 = 1.0 - pow (conf->beta1, (double) MAX (t, 1));
      double bc2 = 1.0 - pow (conf->beta2, (double) MAX (t, 1));
      out->lr_c = (float) (out->lr / bc1);
      out->rs = (float) (1.0 / sqrt (bc2));
    }
}

void
shoal_updater_apply (const ShoalUpdaterConf *conf, int step, gint64 t,
                     float lr_scale, float wd_scale,
                     float *value, const float *grad,
                     float *state_a, float *state_b, size_t n)
{
  g_return_if_fail (conf != NULL);
  if (n == 0)
    return;
  g_return_if_fail (value != NULL && grad != NULL);
  g_return_if_fail (conf->kind != SHOAL_UPDATER_ADAM || t >= 1);

  ShoalUpdateScalars k;
  shoal_updater_scalars (conf, step, t, lr_scale, wd_scale, &k);
  switch (conf->kind)
    {
    case SHOAL_UPDATER_SGD:
      if (!k.momentum)
        rule_sgd (k.lr, k.wd, value, grad, n);
      else
        {
          g_return_if_fail (state_a != NULL);
          rule_momentum (k.lr, k.wd, k.mom, value, grad, state_a, n);
        }
      break;
    case SHOAL_UPDATER_NESTEROV:
      g_return_if_fail (state_a != NULL);
      rule_nesterov (k.lr, k.wd, k.mom, value, grad, state_a, n);
      break;
    case SHOAL_UPDATER_ADAGRAD:
      g_return_if_fail (state_a != NULL);
      rule_adagrad (k.lr, k.wd, k.eps, value, grad, state_a, n);
      break;
    case SHOAL_UPDATER_RMSPROP:
      g_return_if_fail (state_a != NULL);
      rule_rmsprop (k.lr, k.wd, k.rho, k.eps, value, grad, state_a, n);
      break;
    case SHOAL_UPDATER_ADADELTA:
      g_return_if_fail (state_a != NULL && state_b != NULL);
      rule_adadelta (k.lr, k.wd, k.rho, k.eps, value, grad, state_a, state_b, n);
      break;
    case SHOAL_UPDATER_ADAM:
      g_return_if_fail (state_a != NULL && state_b != NULL);
      rule_adam (k.lr_c, k.rs, k.wd, k.b1, k.b2, k.eps, value, grad, state_a, state_b, n);
      break;
    case SHOAL_UPDATER_COUNT:
      g_return_if_reached ();
    }
}

/* ---- clipping ---------------------------------------------------------- */

/* Sums of squares are kept in double over CLIP_LANES independent lanes,
 * so the compiler keeps them in vector registers without having to
 * reassociate anything itself. */
#define CLIP_LANES 8

/* Returns the sum of squares of x; with c > 0 also clamps x to +-c and
 * stores the sum of squares after clamping in *clamped_sumsq. */
HOT_LOOP static double
sumsq_clamp (float *restrict x, size_t n, float c, double *clamped_sumsq)
{
  double before[CLIP_LANES] = { 0 }, after[CLIP_LANES] = { 0 };
  size_t nv = n & ~(size_t) (CLIP_LANES - 1);
  if (c > 0.0f)
    {
      for (size_t i = 0; i < nv; i += CLIP_LANES)
        for (int j = 0; j < CLIP_LANES; j++)
          {
            float v = x[i + j];
            before[j] += (double) v * (double) v;
            v = v > c ? c : v;
            v = v < -c ? -c : v;
            x[i + j] = v;
            after[j] += (double) v * (double) v;
          }
    }
  else
    {
      for (size_t i = 0; i < nv; i += CLIP_LANES)
        for (int j = 0; j < CLIP_LANES; j++)
          before[j] += (double) x[i + j] * (double) x[i + j];
    }
  for (size_t i = nv; i < n; i++)
    {
      float v = x[i];
      before[0] += (double) v * (double) v;
      if (c > 0.0f)
        {
          v = v > c ? c : (v < -c ? -c : v);
          x[i] = v;
          after[0] += (double) v * (double) v;
        }
    }
  double sb = 0.0, sa = 0.0;
  for (int j = 0; j < CLIP_LANES; j++)
    {
      sb += before[j];
      sa += after[j];
    }
  *clamped_sumsq = c > 0.0f ? sa : sb;
  return sb;
}

BODY
scale_body (size_t from, size_t to, float s, float *restrict x)
{
  for (size_t i = from; i < to; i++)
    x[i] *= s;
}

HOT_LOOP static void
scale_values (float *restrict x, size_t n, float s)
{
  SPLIT_RUN (scale_body, s, x);
}

/* The norm is returned before any clipping, so that the caller can log how
 * large the raw gradient was; clip_norm acts on the value-clipped one. */
double
shoal_clip_gradients (float *grad, size_t n, float clip_value, float clip_norm)
{
  g_return_val_if_fail (grad != NULL || n == 0, 0.0);
  double clamped_sumsq;
  double norm = sqrt (sumsq_clamp (grad, n, clip_value, &clamped_sumsq));
  double clamped_norm = sqrt (clamped_sumsq);
  if (clip_norm > 0.0f && clamped_norm > clip_norm)
    scale_values (grad, n, (float) (clip_norm / clamped_norm));
  return norm;
}
