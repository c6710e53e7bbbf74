/* Seeded random numbers (PCG32): the same seed and stream give the same
 * sequence on every machine.  A ShoalRng is a 16-byte value that can be
 * copied and checkpointed; each layer has its own (shoal_layer_rng),
 * seeded from the job seed, the worker and the layer, so results do not
 * depend on thread timing. */
#ifndef SHOAL_PUBLIC_RNG_H
#define SHOAL_PUBLIC_RNG_H

#include <glib.h>
#include <stddef.h>
#include <stdint.h>

G_BEGIN_DECLS

typedef struct {
  uint64_t state;
  uint64_t inc;     /* stream selector, always odd */
} ShoalRng;

void shoal_rng_seed (ShoalRng *rng, uint64_t seed, uint64_t stream);
uint32_t shoal_rng_u32 (ShoalRng *rng);
uint32_t shoal_rng_below (ShoalRng *rng, uint32_t bound);   /* uniform in [0, bound); bound 0: a critical, 0 */
float shoal_rng_uniform (ShoalRng *rng);                    /* uniform in [0, 1) */
float shoal_rng_gaussian (ShoalRng *rng);                   /* mean 0, std 1 */
void shoal_rng_shuffle_u32 (ShoalRng *rng, uint32_t *items, size_t n);

G_END_DECLS

#endif
