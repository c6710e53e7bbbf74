/* Parameter initialisers: the distributions named in init.h, drawn from a
 * caller-owned ShoalRng so that the param store can give every param its
 * own reproducible stream. */
#include "core/init.h"

#include <math.h>
#include <string.h>

static const char *const init_names[] = {
  [SHOAL_INIT_CONSTANT] = "constant",
  [SHOAL_INIT_GAUSSIAN] = "gaussian",
  [SHOAL_INIT_UNIFORM] = "uniform",
  [SHOAL_INIT_GAUSSIAN_SQRT_FAN_IN] = "gaussian_sqrt_fan_in",
  [SHOAL_INIT_UNIFORM_SQRT_FAN_IN] = "uniform_sqrt_fan_in",
  [SHOAL_INIT_GLOROT_UNIFORM] = "glorot_uniform",
  [SHOAL_INIT_GLOROT_NORMAL] = "glorot_normal",
};
G_STATIC_ASSERT (G_N_ELEMENTS (init_names) == SHOAL_INIT_COUNT);

const char *
shoal_init_kind_name (ShoalInitKind kind)
{
  g_return_val_if_fail ((unsigned) kind < SHOAL_INIT_COUNT, NULL);
  return init_names[kind];
}

gboolean
shoal_init_kind_parse (const char *name, ShoalInitKind *kind)
{
  g_return_val_if_fail (name != NULL && kind != NULL, FALSE);
  for (int k = 0; k < SHOAL_INIT_COUNT; k++)
    if (strcmp (name, init_names[k]) == 0)
      {
        *kind = (ShoalInitKind) k;
        return TRUE;
      }
  if (strcmp (name, "xavier") == 0)
    {
      *kind = SHOAL_INIT_GLOROT_UNIFORM;
      return TRUE;
    }
  return FALSE;
}

static void
fill_gaussian (ShoalRng *rng, float mean, float std, float *data, size_t n)
{
  for (size_t i = 0; i < n; i++)
    data[i] = mean + std * shoal_rng_gaussian (rng);
}

static void
fill_uniform (ShoalRng *rng, float low, float high, float *data, size_t n)
{
  float width = high - low;
  for (size_t i = 0; i < n; i++)
    data[i] = low + width * shoal_rng_uniform (rng);
}

void
shoal_init_fill (const ShoalInitSpec *spec, int fan_in, int fan_out,
                 ShoalRng *rng, float *data, size_t n)
{
  g_return_if_fail (spec != NULL && rng != NULL && (data != NULL || n == 0));
  g_return_if_fail ((unsigned) spec->kind < SHOAL_INIT_COUNT);

  switch (spec->kind)
    {
    case SHOAL_INIT_CONSTANT:
      for (size_t i = 0; i < n; i++)
        data[i] = spec->value;
      break;
    case SHOAL_INIT_GAUSSIAN:
      fill_gaussian (rng, spec->mean, spec->std, data, n);
      break;
    case SHOAL_INIT_UNIFORM:
      fill_uniform (rng, spec->low, spec->high, data, n);
      break;
    case SHOAL_INIT_GAUSSIAN_SQRT_FAN_IN:
    case SHOAL_INIT_UNIFORM_SQRT_FAN_IN:
      {
        g_return_if_fail (fan_in > 0);
        /* scaling mean and spread alike is the same as dividing each draw */
        float s = (float) (1.0 / sqrt ((double) fan_in));
        if (spec->kind == SHOAL_INIT_GAUSSIAN_SQRT_FAN_IN)
          fill_gaussian (rng, spec->mean * s, spec->std * s, data, n);
        else
          fill_uniform (rng, spec->low * s, spec->high * s, data, n);
      }
      break;
    case SHOAL_INIT_GLOROT_UNIFORM:
      {
        g_return_if_fail (fan_in + fan_out > 0);
        float a = (float) sqrt (6.0 / (double) (fan_in + fan_out));
        fill_uniform (rng, -a, a, data, n);
      }
      break;
    case SHOAL_INIT_GLOROT_NORMAL:
      {
        g_return_if_fail (fan_in + fan_out > 0);
        float std = (float) sqrt (2.0 / (double) (fan_in + fan_out));
        fill_gaussian (rng, 0.0f, std, data, n);
      }
      break;
    case SHOAL_INIT_COUNT:
      break;  /* rejected above */
    }
}
