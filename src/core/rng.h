/* Seeded random numbers (PCG32).
 *
 * Why not GRand: a ShoalRng is a plain 16-byte value that can be copied,
 * split into independent streams (one per worker) and written into a
 * checkpoint, so a resumed run draws exactly the numbers it would have. */
#ifndef SHOAL_RNG_H
#define SHOAL_RNG_H

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

typedef struct {
  uint64_t state;
  uint64_t inc;     /* stream selector, always odd */
} ShoalRng;

/* Same seed and stream give the same sequence on every machine. */
void shoal_rng_seed (ShoalRng *rng, uint64_t seed, uint64_t stream);
uint32_t shoal_rng_u32 (ShoalRng *rng);
uint32_t shoal_rng_below (ShoalRng *rng, uint32_t bound);   /* uniform in [0, bound) */
float shoal_rng_uniform (ShoalRng *rng);                    /* uniform in [0, 1) */
float shoal_rng_gaussian (ShoalRng *rng);                   /* mean 0, std 1 */
void shoal_rng_shuffle_u32 (ShoalRng *rng, uint32_t *items, size_t n);

G_END_DECLS

#endif
