/* Trained models; the public half is shoal/model.h.  What the tools
 * (predict, eval) use beside it. */
#ifndef SHOAL_MODEL_H
#define SHOAL_MODEL_H

#include <shoal/model.h>

#include "partition/partition.h"
#include "job/job.h"

G_BEGIN_DECLS

/* The model's net as a group net of one worker (what
 * shoal_worker_evaluate runs), and the layer it predicts with.
 * Borrowed. */
ShoalGroupNet *shoal_model_group_net (ShoalModel *model);
ShoalLayer *shoal_model_output (ShoalModel *model);

/* Softmax over each of n rows of `width` floats, in place. */
void shoal_model_softmax_rows (float *rows, int n, size_t width);

G_END_DECLS

#endif
