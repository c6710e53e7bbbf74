/* The table a GPU backend fills in for core/device.c (internal to
 * shoal: src/core and src/gpu).  core/device.c handles the CPU itself and
 * forwards everything about GPUs to the backend registered with
 * shoal_device_register_backend; without one (a build without CUDA)
 * every GPU request fails with a message saying so.
 * Devices are given by index (the GPU ordinal). */
#ifndef SHOAL_DEVICE_BACKEND_H
#define SHOAL_DEVICE_BACKEND_H

#include "core/device.h"
#include "core/codec.h"
#include "core/updater.h"

G_BEGIN_DECLS

typedef struct {
  const char *name;                                   /* "cuda" */
  int (*count) (void);
  gboolean (*check) (int index, GError **error);
  char *(*describe) (int index);
  void (*activate) (int index);

  void *(*alloc) (int index, size_t bytes, GError **error);
  void (*free) (int index, void *p);
  gboolean (*copy) (void *dst, const void *src, size_t bytes, GError **error);
  gboolean (*zero) (int index, void *p, size_t bytes, GError **error);
  void *(*host_alloc) (int index, size_t bytes, GError **error);
  void (*host_free) (int index, void *p);
  gboolean (*host_register) (int index, void *p, size_t bytes);
  void (*host_unregister) (int index, void *p);

  ShoalStream *(*stream_new) (int index, GError **error);
  void (*stream_free) (ShoalStream *stream);
  gboolean (*stream_sync) (ShoalStream *stream, GError **error);
  void (*stream_copy) (ShoalStream *stream, void *dst, const void *src, size_t bytes);
  void (*stream_zero) (ShoalStream *stream, void *p, size_t bytes);
  void (*stream_wait) (ShoalStream *stream, ShoalEvent *event);
  ShoalEvent *(*event_new) (int index, GError **error);
  void (*event_free) (ShoalEvent *event);
  void (*event_record) (ShoalEvent *event, ShoalStream *stream);
  gboolean (*event_done) (ShoalEvent *event);
  gboolean (*event_sync) (ShoalEvent *event, GError **error);

  ShoalDeviceContext *(*context_new) (int index, GError **error);
  void (*context_free) (ShoalDeviceContext *ctx);
  ShoalDevice (*context_device) (const ShoalDeviceContext *ctx);
  ShoalStream *(*context_compute) (ShoalDeviceContext *ctx);
  ShoalStream *(*context_copy) (ShoalDeviceContext *ctx);
  gboolean (*context_ready) (ShoalDeviceContext *ctx, GError **error);
  gboolean (*context_sync) (ShoalDeviceContext *ctx, GError **error);
  gboolean (*context_check) (ShoalDeviceContext *ctx, GError **error);

  /* core/updater.h on the device: one update of n values, and clipping */
  void (*update) (ShoalStream *stream, const ShoalUpdateScalars *k, float *value, float *grad,
                  float *state_a, float *state_b, size_t n, gboolean clear_grad);
  void (*clip) (ShoalStream *stream, float *grad, size_t n, float clip_value, float clip_norm,
                double *scratch);

  /* core/codec.h on the device (shoal_codec_encode_on, _decode_on) */
  void (*codec_encode) (ShoalStream *stream, ShoalCodec codec, float *src, float scale, gboolean clear_src,
                        const float *residual_in, float *residual_out, size_t n, guint8 *out);
  void (*codec_decode) (ShoalStream *stream, ShoalCodec codec, const guint8 *in, float *out, size_t n);

  /* core/device.h's step graphs */
  ShoalStepGraph *(*graph_new) (ShoalDeviceContext *ctx, GError **error);
  void (*graph_free) (ShoalStepGraph *graph);
  const char *(*graph_refuses) (gconstpointer gpu_ops);
  gboolean (*graph_ready) (ShoalStepGraph *graph);
  gboolean (*graph_begin_capture) (ShoalStepGraph *graph, GError **error);
  gboolean (*graph_end_capture) (ShoalStepGraph *graph, GError **error);
  void (*graph_begin_replay) (ShoalStepGraph *graph);
  gboolean (*graph_end_replay) (ShoalStepGraph *graph, GError **error);
  gboolean (*graph_launch) (ShoalStepGraph *graph, GError **error);
  void (*graph_begin_rerun) (ShoalStepGraph *graph);
  void (*graph_end_rerun) (ShoalStepGraph *graph);
} ShoalDeviceBackend;

/* Makes `backend` (static, never freed) the GPU backend; called once by
 * the backend when it is loaded (src/gpu/register.c). */
void shoal_device_register_backend (const ShoalDeviceBackend *backend);
/* The registered GPU backend; NULL in a build without one. */
const ShoalDeviceBackend *shoal_device_gpu_backend (void);

G_END_DECLS

#endif
