/* What the backend's calls and the GPU layers do for CUDA graphs of a
 * net's step (graph.c; core/device.h says what a step graph is).  The
 * calls that take a per-step scalar ask here first: in the calling
 * thread's capture they read it from the graph's argument block, in its
 * replay they only write it there, in its rerun they take the one the
 * step resolved already, and otherwise (every step without a graph) they
 * run as they always did. */
#ifndef SHOAL_GPU_GRAPH_H
#define SHOAL_GPU_GRAPH_H

#include <stdint.h>

#include "gpu/gpu.h"
#include "gpu/kernels_update.h"

G_BEGIN_DECLS

/* A dropout forward's seed: drawn from the layer's stream (two u32, the
 * high one first), or in a rerun the one the step drew already.  Returns
 * where on the device a captured kernel reads it, or NULL: pass *seed. */
const uint64_t *shoal_gpu_step_seed (ShoalLayer *layer, uint64_t *seed);
/* An update of the server's (update.c): TRUE when the step graph took
 * it (captured, reading its scalars from the argument block, or, in a
 * replay, its scalars written there); FALSE: launch it as usual. */
gboolean shoal_gpu_step_update (cudaStream_t s, const ShoalKUpdate *k, float *w, float *g, float *a, float *b,
                                size_t n, int clear);
/* A zero fill enqueued by the backend: TRUE when a replay took it (the
 * graph makes it); FALSE: enqueue it (a capture records it). */
gboolean shoal_gpu_step_zero (cudaStream_t s, void *p, size_t bytes);
/* Any other enqueue of the backend (`what`): a replay's host half that
 * makes one differs from the captured step. */
void shoal_gpu_step_other (const char *what);
/* TRUE while the calling thread captures: a failed enqueue is then the
 * capture's, which end_capture reports, not a failure to log. */
gboolean shoal_gpu_step_capturing (void);

/* The backend's step graph entries (core/device_backend.h). */
ShoalStepGraph *shoal_cuda_graph_new (ShoalDeviceContext *ctx, GError **error);
void shoal_cuda_graph_free (ShoalStepGraph *graph);
const char *shoal_cuda_graph_refuses (gconstpointer gpu_ops);
gboolean shoal_cuda_graph_ready (ShoalStepGraph *graph);
gboolean shoal_cuda_graph_begin_capture (ShoalStepGraph *graph, GError **error);
gboolean shoal_cuda_graph_end_capture (ShoalStepGraph *graph, GError **error);
void shoal_cuda_graph_begin_replay (ShoalStepGraph *graph);
gboolean shoal_cuda_graph_end_replay (ShoalStepGraph *graph, GError **error);
gboolean shoal_cuda_graph_launch (ShoalStepGraph *graph, GError **error);
void shoal_cuda_graph_begin_rerun (ShoalStepGraph *graph);
void shoal_cuda_graph_end_rerun (ShoalStepGraph *graph);

G_END_DECLS

#endif
