/* Where tensors live and how data moves between devices.
 *
 * One small interface with two backends: the CPU backend is always built
 * (plain aligned memory, no streams); the CUDA backend (src/gpu/, built
 * with `make CUDA=1`) adds GPU memory, pinned host memory, streams and
 * events.  Code outside src/gpu uses only this header, so the CPU build
 * needs no CUDA header and the same code runs either way: without the
 * CUDA backend, or without a CUDA device, shoal_device_count is 0 and
 * asking for a GPU fails with an error that says why.
 *
 * Device memory is never touched by the CPU: move it with
 * shoal_device_copy (synchronous) or a stream's copy (asynchronous).
 * With CUDA every pointer is in one address space (UVA), so copies need
 * no direction. */
#ifndef SHOAL_DEVICE_H
#define SHOAL_DEVICE_H

#include <glib.h>
#include <stddef.h>

#include "core/tensor.h"

G_BEGIN_DECLS

/* CUDA devices this process can use; 0 without the CUDA backend, without
 * a driver or without a device (the reason goes to g_debug once). */
int shoal_device_count (void);
/* TRUE when this build has the CUDA backend (make CUDA=1). */
gboolean shoal_device_cuda_built (void);
/* FALSE with an error naming the device and the reason when `device`
 * cannot be used here (not built with CUDA, no such GPU, driver errors). */
gboolean shoal_device_check (ShoalDevice device, GError **error);
/* "cpu" or "cuda:N"; newly allocated. */
char *shoal_device_to_string (ShoalDevice device);
/* "cuda:0 NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)", "cpu"; newly allocated. */
char *shoal_device_describe (ShoalDevice device);

static inline gboolean
shoal_device_is_cpu (ShoalDevice device)
{
  return device.kind == SHOAL_DEVICE_CPU;
}

static inline ShoalDevice
shoal_device_cuda (int index)
{
  return (ShoalDevice) { SHOAL_DEVICE_CUDA, index };
}

/* The arithmetic of a GPU net's matrix products and convolutions:
 * IEEE FP32 as on the CPU; TF32 tensor cores (operands rounded to
 * 10-bit mantissas, FP32 accumulation); or BF16, which lets cuBLAS run
 * the matrix products on bfloat16 tensor cores (operands rounded to
 * 7-bit mantissas, FP32 accumulation) where it has a faster kernel than
 * TF32's, with convolutions as TF32; activations, parameters,
 * gradients and the updater's state stay FP32 in memory, so the FP32
 * values are the master copy and, bfloat16 having FP32's exponent range,
 * no loss scaling is needed.  One setting per process
 * ([job] precision), read when a net's device context is made: set it
 * before making nets.  Default FP32.  CPU nets always compute in FP32. */
typedef enum {
  SHOAL_PRECISION_FP32,
  SHOAL_PRECISION_TF32,
  SHOAL_PRECISION_BF16
} ShoalPrecision;
void shoal_device_set_precision (ShoalPrecision precision);
ShoalPrecision shoal_device_precision (void);
/* "fp32", "tf32", "bf16"; FALSE for any other name. */
gboolean shoal_precision_parse (const char *name, ShoalPrecision *precision);
/* The name shoal_precision_parse reads ("fp32", "tf32", "bf16"). */
const char *shoal_precision_name (ShoalPrecision precision);

/* Makes `device` the calling thread's current GPU (CUDA keeps one per
 * thread); nothing on the CPU.  Every entry point that launches work on
 * a net's device calls it first, so nets may move between threads. */
void shoal_device_activate (ShoalDevice device);

/* Zero-filled memory of `bytes` on `device` (64-byte aligned on the CPU,
 * 256 on a GPU); NULL with error when out of memory.  Free with
 * shoal_device_free on the same device. */
void *shoal_device_alloc (ShoalDevice device, size_t bytes, GError **error);
void shoal_device_free (ShoalDevice device, void *p);
/* Synchronous copy of `bytes` between any two places (host or device):
 * returns when the data is at dst.  FALSE with error on a device error. */
gboolean shoal_device_copy (void *dst, const void *src, size_t bytes, GError **error);
/* Synchronous fill with zero bytes of memory on `device`. */
gboolean shoal_device_zero (ShoalDevice device, void *p, size_t bytes, GError **error);

/* Host memory that `device` can copy to and from asynchronously: pinned
 * (page-locked) for a GPU, plain aligned memory for the CPU.  Zero-filled;
 * NULL with error when it cannot be had.  Free with shoal_device_host_free
 * and the same device. */
void *shoal_device_host_alloc (ShoalDevice device, size_t bytes, GError **error);
void shoal_device_host_free (ShoalDevice device, void *p);
/* Pins host memory someone else allocated (for asynchronous copies);
 * returns FALSE when it was not pinned by this call (then do not
 * unregister it: copies still work, only slower and synchronously). */
gboolean shoal_device_host_register (ShoalDevice device, void *p, size_t bytes);
void shoal_device_host_unregister (ShoalDevice device, void *p);

/* Streams and events (GPU only; the CPU needs none).  A stream runs its
 * work in order; an event marks a point in a stream that other streams
 * or the host can wait for.  Errors of asynchronous work surface at the
 * next synchronisation (shoal_stream_sync, shoal_event_sync). */
typedef struct _ShoalStream ShoalStream;
typedef struct _ShoalEvent ShoalEvent;

ShoalStream *shoal_stream_new (ShoalDevice device, GError **error);
void shoal_stream_free (ShoalStream *stream);
gboolean shoal_stream_sync (ShoalStream *stream, GError **error);
/* Enqueues a copy of `bytes` (any direction; asynchronous only when the
 * host side is pinned) or a zero fill. */
void shoal_stream_copy (ShoalStream *stream, void *dst, const void *src, size_t bytes);
void shoal_stream_zero (ShoalStream *stream, void *p, size_t bytes);
/* Work enqueued on `stream` after this call starts once `event` happened. */
void shoal_stream_wait (ShoalStream *stream, ShoalEvent *event);

ShoalEvent *shoal_event_new (ShoalDevice device, GError **error);
void shoal_event_free (ShoalEvent *event);
void shoal_event_record (ShoalEvent *event, ShoalStream *stream);
/* TRUE once the work before the record is done (never blocks). */
gboolean shoal_event_done (ShoalEvent *event);
gboolean shoal_event_sync (ShoalEvent *event, GError **error);

/* What a net on a GPU shares among its layers: the compute stream the
 * layers run on, a copy stream for param traffic, the math libraries'
 * handles (cuBLAS, cuDNN) bound to the compute stream, and one scratch
 * workspace (the layers run one after another on one stream, so one
 * buffer serves all).  The GPU layers (src/gpu) see its full definition;
 * everyone else only these calls. */
typedef struct _ShoalDeviceContext ShoalDeviceContext;

ShoalDeviceContext *shoal_device_context_new (ShoalDevice device, GError **error);
void shoal_device_context_free (ShoalDeviceContext *ctx);
ShoalDevice shoal_device_context_device (const ShoalDeviceContext *ctx);
ShoalStream *shoal_device_context_compute (ShoalDeviceContext *ctx);  /* borrowed */
ShoalStream *shoal_device_context_copy (ShoalDeviceContext *ctx);     /* borrowed */
/* After every layer's GPU set-up: allocates the workspace the layers
 * asked for.  FALSE with error when out of memory. */
gboolean shoal_device_context_ready (ShoalDeviceContext *ctx, GError **error);
/* Waits for the compute stream and reports the first error any layer's
 * GPU work met (which layer, which call) since the last check. */
gboolean shoal_device_context_sync (ShoalDeviceContext *ctx, GError **error);
/* The same report without waiting: the first failure the layers met
 * when they enqueued their work since the last check (a failure in the
 * work itself shows at the next synchronisation: an event's or this
 * context's). */
gboolean shoal_device_context_check (ShoalDeviceContext *ctx, GError **error);

/* CUDA graphs of a GPU net's training step (net/net_gpu.c runs them;
 * docs/GPU.md, "CUDA graphs").  A step is captured once into a graph
 * and replayed after: one launch instead of one per kernel.  What
 * changes from step to step is never baked into the graph: the GPU
 * layers and the device updates take such scalars (a dropout seed, an
 * update's learning rate and Adam's bias correction) from a block of
 * device memory that the host refills before each launch (one copy
 * from pinned memory on the compute stream), and the batch is uploaded
 * into fixed device buffers before the launch.
 *
 *  - capture: between begin_capture and end_capture the net enqueues
 *    its step (without its inputs' uploads) as usual; the calls go into
 *    the graph, and the calls that take per-step scalars (dropout's
 *    seed, the server's updates and gradient clears) are remembered in
 *    order;
 *  - replay: between begin_replay and end_replay the host does only the
 *    host half of the step (the dropout layers' draws, made by
 *    begin_replay; the `ready` calls, whose server updates write their
 *    scalars instead of launching): end_replay says whether those calls
 *    were the captured ones (same kernels on the same memory); then
 *    launch;
 *  - rerun: where a capture failed or a replay's host half differed,
 *    that step's device work has not run and its host half must not
 *    run twice: between begin_rerun and end_rerun the net enqueues its
 *    forward and backward (no `ready`), the dropout layers take the
 *    seeds already drawn, and end_rerun enqueues the step's updates and
 *    clears with the scalars already resolved.
 * Everything runs in the calling thread (the modes are the thread's);
 * one graph per net.  In a build without CUDA _new fails and nothing
 * else is reached. */
typedef struct _ShoalStepGraph ShoalStepGraph;

ShoalStepGraph *shoal_step_graph_new (ShoalDeviceContext *ctx, GError **error);
void shoal_step_graph_free (ShoalStepGraph *graph);
/* NULL when a layer whose GPU path is `gpu_ops` (its ShoalLayerGpuOps)
 * may be captured; else why not (a static string). */
const char *shoal_step_graph_refuses (gconstpointer gpu_ops);
/* TRUE while a captured graph can be replayed (not after the layers'
 * shared workspace moved, which the graph's calls point into). */
gboolean shoal_step_graph_ready (ShoalStepGraph *graph);
gboolean shoal_step_graph_begin_capture (ShoalStepGraph *graph, GError **error);
/* Ends the capture and instantiates the graph; FALSE with why (nothing
 * of the step ran on the device: rerun it). */
gboolean shoal_step_graph_end_capture (ShoalStepGraph *graph, GError **error);
void shoal_step_graph_begin_replay (ShoalStepGraph *graph);
gboolean shoal_step_graph_end_replay (ShoalStepGraph *graph, GError **error);
/* The step's scalars up, then the graph, on the compute stream. */
gboolean shoal_step_graph_launch (ShoalStepGraph *graph, GError **error);
void shoal_step_graph_begin_rerun (ShoalStepGraph *graph);
void shoal_step_graph_end_rerun (ShoalStepGraph *graph);

G_END_DECLS

#endif
