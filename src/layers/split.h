/* The split layer: one source feeding several consumers.  The net (and
 * the partitioner) insert it; its out is a view of the source's out, and
 * each consumer ("branch") writes its gradient into a buffer of its own,
 * which backward sums into the source's gradient. */
#ifndef SHOAL_SPLIT_H
#define SHOAL_SPLIT_H

#include "layers/layer.h"

G_BEGIN_DECLS

extern const ShoalLayerOps shoal_layer_split_ops;

/* Before setup: how many consumers the split feeds. */
void shoal_split_set_branches (ShoalLayer *split, int nbranches);
/* After setup: where consumer `branch` writes its gradient (*grad; NULL
 * when the split needs no grad); marks the branch as one that writes
 * (branches never asked for are not summed).  Borrowed, valid while the
 * layer lives.  FALSE with an error naming the split when the buffer
 * cannot be allocated (memory, or the net's budget). */
gboolean shoal_split_branch_grad (ShoalLayer *split, int branch, ShoalTensor **grad, GError **error);
/* For a GPU path of backward: how many branches, and branch's gradient
 * buffer when a consumer writes it (NULL otherwise); borrowed. */
int shoal_split_n_branches (ShoalLayer *split);
ShoalTensor *shoal_split_written_branch (ShoalLayer *split, int branch);

G_END_DECLS

#endif
