/* The slice layer: one block of its source along rows (axis 0) or along
 * dim 1 (features / channels), the inverse of concat.  The partitioner
 * inserts it where a worker needs its block of a tensor that it holds
 * whole; confs may use it too.
 *
 * shoal_block_range is THE rule for cutting n items among parts (rows of
 * a batch among workers, output units or filters among workers); the
 * partitioner and the slice layer both use it, so that blocks agree. */
#ifndef SHOAL_SLICE_H
#define SHOAL_SLICE_H

#include "layers/layer.h"

G_BEGIN_DECLS

extern const ShoalLayerOps shoal_layer_slice_ops;

/* [*begin, *end): block `index` of n items cut into `parts` blocks whose
 * sizes differ by at most one, the larger ones first (10 in 4: 3 3 2 2).
 * Blocks are empty when n < parts. */
void shoal_block_range (int n, int parts, int index, int *begin, int *end);

G_END_DECLS

#endif
