/* Parameter initialisers.
 *
 * Conf keys (per param, prefixed by the param's name, e.g. weight_init):
 *   init  = constant | gaussian | uniform | gaussian_sqrt_fan_in |
 *           uniform_sqrt_fan_in | xavier (= glorot_uniform) | glorot_normal
 *   value (constant), mean + std (gaussian*), low + high (uniform*).
 * The *_sqrt_fan_in kinds draw as gaussian/uniform and divide by
 * sqrt(fan_in): std = 1 gives LeCun, std = sqrt(2) gives He/Kaiming.
 * Glorot: uniform in +-sqrt(6 / (fan_in + fan_out)), normal with
 * std sqrt(2 / (fan_in + fan_out)). */
#ifndef SHOAL_INIT_H
#define SHOAL_INIT_H

#include <glib.h>

#include <shoal/param.h>

#include "core/rng.h"

G_BEGIN_DECLS

/* Name as written in confs ("xavier" is accepted as an alias when parsing). */
const char *shoal_init_kind_name (ShoalInitKind kind);
gboolean shoal_init_kind_parse (const char *name, ShoalInitKind *kind);

/* Fills data[0..n) according to spec. */
void shoal_init_fill (const ShoalInitSpec *spec, int fan_in, int fan_out,
                      ShoalRng *rng, float *data, size_t n);

G_END_DECLS

#endif
