/* Seeded random numbers (PCG32).
 *
 * Why not GRand: a ShoalRng is a plain 16-byte value that can be copied,
 * split into independent streams (one per worker) and written into a
 * checkpoint, so a resumed run draws exactly the numbers it would have. */
#ifndef SHOAL_RNG_H
#define SHOAL_RNG_H

#include <glib.h>
#include <stdint.h>

#include <shoal/rng.h>

#endif
