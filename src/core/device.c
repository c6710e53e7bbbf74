/* The device interface: the CPU handled here, GPUs forwarded to the
 * backend that registered itself (src/gpu in a CUDA build).  Keeping the
 * dispatch in one place is what lets the rest of shoal (tensors, params,
 * nets, tests) compile identically with and without CUDA; core names no
 * backend. */
#include "core/device_backend.h"

#include <string.h>

#include "core/error.h"

/* Set once, before any GPU is asked for (the backend registers itself
 * when it is loaded). */
static const ShoalDeviceBackend *gpu_backend;

void
shoal_device_register_backend (const ShoalDeviceBackend *backend)
{
  gpu_backend = backend;
}

static gint precision = SHOAL_PRECISION_FP32;   /* atomic */

void
shoal_device_set_precision (ShoalPrecision p)
{
  g_atomic_int_set (&precision, p);
}

ShoalPrecision
shoal_device_precision (void)
{
  return (ShoalPrecision) g_atomic_int_get (&precision);
}

/* Each precision's name in [job] precision, in the enum's order. */
static const char *const precision_names[] = {
  [SHOAL_PRECISION_FP32] = "fp32",
  [SHOAL_PRECISION_TF32] = "tf32",
  [SHOAL_PRECISION_BF16] = "bf16",
};

gboolean
shoal_precision_parse (const char *name, ShoalPrecision *p)
{
  g_return_val_if_fail (name != NULL && p != NULL, FALSE);
  for (guint i = 0; i < G_N_ELEMENTS (precision_names); i++)
    if (strcmp (name, precision_names[i]) == 0)
      {
        *p = (ShoalPrecision) i;
        return TRUE;
      }
  return FALSE;
}

const char *
shoal_precision_name (ShoalPrecision p)
{
  return (guint) p < G_N_ELEMENTS (precision_names) ? precision_names[p] : precision_names[SHOAL_PRECISION_FP32];
}

const ShoalDeviceBackend *
shoal_device_gpu_backend (void)
{
  return gpu_backend;
}

gboolean
shoal_device_cuda_built (void)
{
  return gpu_backend != NULL;
}

int
shoal_device_count (void)
{
  return gpu_backend != NULL ? gpu_backend->count () : 0;
}

gboolean
shoal_device_check (ShoalDevice device, GError **error)
{
  if (device.kind == SHOAL_DEVICE_CPU)
    return TRUE;
  if (device.kind != SHOAL_DEVICE_CUDA || device.index < 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_UNSUPPORTED, "unknown device (kind %d, index %d)",
                   (int) device.kind, device.index);
      return FALSE;
    }
  if (gpu_backend == NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_UNSUPPORTED,
                   "cuda:%d was asked for, but shoal was built without CUDA (rebuild with make CUDA=1)",
                   device.index);
      return FALSE;
    }
  return gpu_backend->check (device.index, error);
}

char *
shoal_device_to_string (ShoalDevice device)
{
  if (device.kind == SHOAL_DEVICE_CPU)
    return g_strdup ("cpu");
  return g_strdup_printf ("cuda:%d", device.index);
}

char *
shoal_device_describe (ShoalDevice device)
{
  if (device.kind == SHOAL_DEVICE_CPU || gpu_backend == NULL)
    return shoal_device_to_string (device);
  return gpu_backend->describe (device.index);
}

void
shoal_device_activate (ShoalDevice device)
{
  if (device.kind != SHOAL_DEVICE_CPU && gpu_backend != NULL)
    gpu_backend->activate (device.index);
}

/* The GPU backend, or NULL with error for a GPU request in a CPU build. */
static const ShoalDeviceBackend *
backend_for (ShoalDevice device, GError **error)
{
  if (gpu_backend == NULL)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_UNSUPPORTED,
                 "cuda:%d: shoal was built without CUDA (rebuild with make CUDA=1)", device.index);
  return gpu_backend;
}

void *
shoal_device_alloc (ShoalDevice device, size_t bytes, GError **error)
{
  if (device.kind == SHOAL_DEVICE_CPU)
    return shoal_try_alloc_floats ((bytes + sizeof (float) - 1) / sizeof (float), error);
  const ShoalDeviceBackend *b = backend_for (device, error);
  return b != NULL ? b->alloc (device.index, bytes, error) : NULL;
}

void
shoal_device_free (ShoalDevice device, void *p)
{
  if (p == NULL)
    return;
  if (device.kind == SHOAL_DEVICE_CPU)
    shoal_free_aligned (p);
  else if (gpu_backend != NULL)
    gpu_backend->free (device.index, p);
}

gboolean
shoal_device_copy (void *dst, const void *src, size_t bytes, GError **error)
{
  if (bytes == 0)
    return TRUE;
  /* without a device every pointer is host memory (and CUDA calls would
   * fail for want of a driver) */
  if (gpu_backend == NULL || gpu_backend->count () == 0)
    {
      memmove (dst, src, bytes);
      return TRUE;
    }
  return gpu_backend->copy (dst, src, bytes, error);
}

gboolean
shoal_device_zero (ShoalDevice device, void *p, size_t bytes, GError **error)
{
  if (bytes == 0)
    return TRUE;
  if (device.kind == SHOAL_DEVICE_CPU)
    {
      memset (p, 0, bytes);
      return TRUE;
    }
  const ShoalDeviceBackend *b = backend_for (device, error);
  return b != NULL && b->zero (device.index, p, bytes, error);
}

void *
shoal_device_host_alloc (ShoalDevice device, size_t bytes, GError **error)
{
  if (device.kind == SHOAL_DEVICE_CPU)
    return shoal_try_alloc_floats ((bytes + sizeof (float) - 1) / sizeof (float), error);
  const ShoalDeviceBackend *b = backend_for (device, error);
  return b != NULL ? b->host_alloc (device.index, bytes, error) : NULL;
}

void
shoal_device_host_free (ShoalDevice device, void *p)
{
  if (p == NULL)
    return;
  if (device.kind == SHOAL_DEVICE_CPU)
    shoal_free_aligned (p);
  else if (gpu_backend != NULL)
    gpu_backend->host_free (device.index, p);
}

gboolean
shoal_device_host_register (ShoalDevice device, void *p, size_t bytes)
{
  if (device.kind == SHOAL_DEVICE_CPU || gpu_backend == NULL || p == NULL || bytes == 0)
    return FALSE;
  return gpu_backend->host_register (device.index, p, bytes);
}

void
shoal_device_host_unregister (ShoalDevice device, void *p)
{
  if (device.kind != SHOAL_DEVICE_CPU && gpu_backend != NULL && p != NULL)
    gpu_backend->host_unregister (device.index, p);
}

/* ---- streams, events, contexts: GPU only ------------------------------- */

ShoalStream *
shoal_stream_new (ShoalDevice device, GError **error)
{
  if (device.kind == SHOAL_DEVICE_CPU)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL, "the CPU has no streams");
      return NULL;
    }
  const ShoalDeviceBackend *b = backend_for (device, error);
  return b != NULL ? b->stream_new (device.index, error) : NULL;
}

void
shoal_stream_free (ShoalStream *stream)
{
  if (stream != NULL && gpu_backend != NULL)
    gpu_backend->stream_free (stream);
}

gboolean
shoal_stream_sync (ShoalStream *stream, GError **error)
{
  g_return_val_if_fail (stream != NULL && gpu_backend != NULL, FALSE);
  return gpu_backend->stream_sync (stream, error);
}

void
shoal_stream_copy (ShoalStream *stream, void *dst, const void *src, size_t bytes)
{
  g_return_if_fail (stream != NULL && gpu_backend != NULL);
  if (bytes > 0)
    gpu_backend->stream_copy (stream, dst, src, bytes);
}

void
shoal_stream_zero (ShoalStream *stream, void *p, size_t bytes)
{
  g_return_if_fail (stream != NULL && gpu_backend != NULL);
  if (bytes > 0)
    gpu_backend->stream_zero (stream, p, bytes);
}

void
shoal_stream_wait (ShoalStream *stream, ShoalEvent *event)
{
  g_return_if_fail (stream != NULL && event != NULL && gpu_backend != NULL);
  gpu_backend->stream_wait (stream, event);
}

ShoalEvent *
shoal_event_new (ShoalDevice device, GError **error)
{
  if (device.kind == SHOAL_DEVICE_CPU)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL, "the CPU has no events");
      return NULL;
    }
  const ShoalDeviceBackend *b = backend_for (device, error);
  return b != NULL ? b->event_new (device.index, error) : NULL;
}

void
shoal_event_free (ShoalEvent *event)
{
  if (event != NULL && gpu_backend != NULL)
    gpu_backend->event_free (event);
}

void
shoal_event_record (ShoalEvent *event, ShoalStream *stream)
{
  g_return_if_fail (event != NULL && stream != NULL && gpu_backend != NULL);
  gpu_backend->event_record (event, stream);
}

gboolean
shoal_event_done (ShoalEvent *event)
{
  g_return_val_if_fail (event != NULL && gpu_backend != NULL, TRUE);
  return gpu_backend->event_done (event);
}

gboolean
shoal_event_sync (ShoalEvent *event, GError **error)
{
  g_return_val_if_fail (event != NULL && gpu_backend != NULL, FALSE);
  return gpu_backend->event_sync (event, error);
}

ShoalDeviceContext *
shoal_device_context_new (ShoalDevice device, GError **error)
{
  if (!shoal_device_check (device, error))
    return NULL;
  if (device.kind == SHOAL_DEVICE_CPU)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL, "the CPU needs no device context");
      return NULL;
    }
  return gpu_backend->context_new (device.index, error);
}

void
shoal_device_context_free (ShoalDeviceContext *ctx)
{
  if (ctx != NULL && gpu_backend != NULL)
    gpu_backend->context_free (ctx);
}

ShoalDevice
shoal_device_context_device (const ShoalDeviceContext *ctx)
{
  g_return_val_if_fail (ctx != NULL && gpu_backend != NULL, ((ShoalDevice) { SHOAL_DEVICE_CPU, 0 }));
  return gpu_backend->context_device (ctx);
}

ShoalStream *
shoal_device_context_compute (ShoalDeviceContext *ctx)
{
  g_return_val_if_fail (ctx != NULL && gpu_backend != NULL, NULL);
  return gpu_backend->context_compute (ctx);
}

ShoalStream *
shoal_device_context_copy (ShoalDeviceContext *ctx)
{
  g_return_val_if_fail (ctx != NULL && gpu_backend != NULL, NULL);
  return gpu_backend->context_copy (ctx);
}

gboolean
shoal_device_context_ready (ShoalDeviceContext *ctx, GError **error)
{
  g_return_val_if_fail (ctx != NULL && gpu_backend != NULL, FALSE);
  return gpu_backend->context_ready (ctx, error);
}

gboolean
shoal_device_context_sync (ShoalDeviceContext *ctx, GError **error)
{
  g_return_val_if_fail (ctx != NULL && gpu_backend != NULL, FALSE);
  return gpu_backend->context_sync (ctx, error);
}

gboolean
shoal_device_context_check (ShoalDeviceContext *ctx, GError **error)
{
  g_return_val_if_fail (ctx != NULL && gpu_backend != NULL, FALSE);
  return gpu_backend->context_check (ctx, error);
}

/* ---- step graphs: only with a backend (a context exists only there) ---- */

ShoalStepGraph *
shoal_step_graph_new (ShoalDeviceContext *ctx, GError **error)
{
  g_return_val_if_fail (ctx != NULL, NULL);
  if (gpu_backend == NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_UNSUPPORTED, "CUDA graphs: built without CUDA");
      return NULL;
    }
  return gpu_backend->graph_new (ctx, error);
}

void
shoal_step_graph_free (ShoalStepGraph *graph)
{
  if (graph != NULL && gpu_backend != NULL)
    gpu_backend->graph_free (graph);
}

const char *
shoal_step_graph_refuses (gconstpointer gpu_ops)
{
  return gpu_backend != NULL ? gpu_backend->graph_refuses (gpu_ops) : "built without CUDA";
}

gboolean
shoal_step_graph_ready (ShoalStepGraph *graph)
{
  return graph != NULL && gpu_backend != NULL && gpu_backend->graph_ready (graph);
}

gboolean
shoal_step_graph_begin_capture (ShoalStepGraph *graph, GError **error)
{
  g_return_val_if_fail (graph != NULL && gpu_backend != NULL, FALSE);
  return gpu_backend->graph_begin_capture (graph, error);
}

gboolean
shoal_step_graph_end_capture (ShoalStepGraph *graph, GError **error)
{
  g_return_val_if_fail (graph != NULL && gpu_backend != NULL, FALSE);
  return gpu_backend->graph_end_capture (graph, error);
}

void
shoal_step_graph_begin_replay (ShoalStepGraph *graph)
{
  g_return_if_fail (graph != NULL && gpu_backend != NULL);
  gpu_backend->graph_begin_replay (graph);
}

gboolean
shoal_step_graph_end_replay (ShoalStepGraph *graph, GError **error)
{
  g_return_val_if_fail (graph != NULL && gpu_backend != NULL, FALSE);
  return gpu_backend->graph_end_replay (graph, error);
}

gboolean
shoal_step_graph_launch (ShoalStepGraph *graph, GError **error)
{
  g_return_val_if_fail (graph != NULL && gpu_backend != NULL, FALSE);
  return gpu_backend->graph_launch (graph, error);
}

void
shoal_step_graph_begin_rerun (ShoalStepGraph *graph)
{
  g_return_if_fail (graph != NULL && gpu_backend != NULL);
  gpu_backend->graph_begin_rerun (graph);
}

void
shoal_step_graph_end_rerun (ShoalStepGraph *graph)
{
  g_return_if_fail (graph != NULL && gpu_backend != NULL);
  gpu_backend->graph_end_rerun (graph);
}
