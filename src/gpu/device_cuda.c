/* The CUDA backend of core/device.h: device and pinned memory, streams,
 * events and the per-net context (streams, cuBLAS and cuDNN handles,
 * shared workspace), plus the helpers the GPU layers share.
 *
 * Streams are created blocking (not cudaStreamNonBlocking) on purpose:
 * the synchronous copies and fills of core/device.h run on the legacy
 * default stream, which then waits for the nets' streams, so a test or a
 * checkpoint that reads device memory between calls never races them. */
#include "gpu/gpu.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "gpu/graph.h"

/* ---- errors --------------------------------------------------------------- */

static GError *
layer_error (const ShoalLayer *layer, const char *phase, const char *what, const char *status)
{
  char *dev = shoal_device_to_string (layer->ctx->device);
  GError *e = g_error_new (SHOAL_ERROR, SHOAL_ERROR_INTERNAL, "layer '%s' (%s) %s on %s: %s: %s",
                           layer->name, layer->ops->type, phase, dev, what, status);
  g_free (dev);
  return e;
}

static void
record (const ShoalLayer *layer, GError *e)
{
  ShoalDeviceContext *ctx = shoal_gpu_ctx (layer);
  if (ctx->error == NULL)
    ctx->error = e;
  else
    g_error_free (e);
}

/* A failed runtime call stays the thread's last error until read: reset
 * it, or the next kernel wrapper (kernels.cu returns cudaGetLastError)
 * reports this failure again as its own, possibly in a later pass.
 * Sticky errors (a faulting kernel) survive the reset and still show. */
static void
clear_last_error (void)
{
  cudaGetLastError ();
}

gboolean
shoal_gpu_cuda_ok (const ShoalLayer *layer, const char *phase, cudaError_t status, const char *what)
{
  if (status == cudaSuccess)
    return TRUE;
  clear_last_error ();
  record (layer, layer_error (layer, phase, what, cudaGetErrorString (status)));
  return FALSE;
}

gboolean
shoal_gpu_blas_ok (const ShoalLayer *layer, const char *phase, cublasStatus_t status, const char *what)
{
  if (status == CUBLAS_STATUS_SUCCESS)
    return TRUE;
  record (layer, layer_error (layer, phase, what, cublasGetStatusString (status)));
  return FALSE;
}

gboolean
shoal_gpu_dnn_ok (const ShoalLayer *layer, const char *phase, cudnnStatus_t status, const char *what)
{
  if (status == CUDNN_STATUS_SUCCESS)
    return TRUE;
  record (layer, layer_error (layer, phase, what, cudnnGetErrorString (status)));
  return FALSE;
}

gboolean
shoal_gpu_dnn_setup (const ShoalLayer *layer, cudnnStatus_t status, const char *what, GError **error)
{
  if (status == CUDNN_STATUS_SUCCESS)
    return TRUE;
  g_propagate_error (error, layer_error (layer, "set-up", what, cudnnGetErrorString (status)));
  return FALSE;
}

gboolean
shoal_gpu_cuda_setup (const ShoalLayer *layer, cudaError_t status, const char *what, GError **error)
{
  if (status == cudaSuccess)
    return TRUE;
  clear_last_error ();
  g_propagate_error (error, layer_error (layer, "set-up", what, cudaGetErrorString (status)));
  return FALSE;
}

/* A backend-level failure of `what` on device `index`. */
static gboolean
cuda_fail (GError **error, int index, cudaError_t status, const char *what)
{
  if (status == cudaSuccess)
    return TRUE;
  clear_last_error ();
  g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL, "cuda:%d: %s: %s", index, what,
               cudaGetErrorString (status));
  return FALSE;
}

/* ---- devices -------------------------------------------------------------- */

static int
cuda_count (void)
{
  static gsize once = 0;
  static int count = 0;
  if (g_once_init_enter (&once))
    {
      int n = 0;
      cudaError_t status = cudaGetDeviceCount (&n);
      if (status != cudaSuccess)
        {
          /* no driver or no device: a CPU-only machine, not an error */
          g_debug ("no CUDA device: cudaGetDeviceCount: %s", cudaGetErrorString (status));
          cudaGetLastError ();
          n = 0;
        }
      count = n;
      g_once_init_leave (&once, 1);
    }
  return count;
}

static gboolean
cuda_check (int index, GError **error)
{
  int n = cuda_count ();
  if (index < n)
    return TRUE;
  if (n == 0)
    {
      int m = 0;
      cudaError_t status = cudaGetDeviceCount (&m);
      cudaGetLastError ();
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_UNSUPPORTED,
                   "cuda:%d was asked for, but this machine has no CUDA device (%s)", index,
                   status == cudaSuccess ? "none found" : cudaGetErrorString (status));
    }
  else if (n == 1)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_UNSUPPORTED,
                 "cuda:%d was asked for, but this process sees 1 CUDA device (cuda:0)", index);
  else
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_UNSUPPORTED,
                 "cuda:%d was asked for, but this process sees %d CUDA devices (cuda:0 to cuda:%d)",
                 index, n, n - 1);
  return FALSE;
}

static char *
cuda_describe (int index)
{
  struct cudaDeviceProp prop;
  if (cudaGetDeviceProperties (&prop, index) != cudaSuccess)
    {
      cudaGetLastError ();
      return g_strdup_printf ("cuda:%d (properties unavailable)", index);
    }
  return g_strdup_printf ("cuda:%d %s (sm_%d%d, %.1f GiB)", index, prop.name, prop.major, prop.minor,
                          (double) prop.totalGlobalMem / (1 << 30));
}

static void
cuda_activate (int index)
{
  cudaError_t status = cudaSetDevice (index);
  if (status != cudaSuccess)
    {
      g_critical ("cudaSetDevice (%d): %s", index, cudaGetErrorString (status));
      cudaGetLastError ();
    }
}

/* ---- memory --------------------------------------------------------------- */

static void *
cuda_alloc (int index, size_t bytes, GError **error)
{
  void *p = NULL;
  cudaError_t status = cudaSetDevice (index);
  if (status == cudaSuccess)
    status = cudaMalloc (&p, MAX (bytes, (size_t) 1));
  if (status != cudaSuccess)
    {
      cudaGetLastError ();
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL,
                   "cuda:%d: cannot allocate %.1f MiB of device memory: %s", index,
                   (double) bytes / (1 << 20), cudaGetErrorString (status));
      return NULL;
    }
  status = cudaMemset (p, 0, bytes);
  if (status == cudaSuccess)
    status = cudaStreamSynchronize (0);
  if (!cuda_fail (error, index, status, "zeroing new device memory"))
    {
      cudaFree (p);
      return NULL;
    }
  return p;
}

static void
cuda_free (int index, void *p)
{
  int current = -1;
  cudaGetDevice (&current);
  if (current != index)
    cudaSetDevice (index);
  cudaError_t status = cudaFree (p);
  if (status != cudaSuccess)
    {
      g_warning ("cuda:%d: cudaFree: %s", index, cudaGetErrorString (status));
      cudaGetLastError ();
    }
}

static gboolean
cuda_copy (void *dst, const void *src, size_t bytes, GError **error)
{
  cudaError_t status = cudaMemcpy (dst, src, bytes, cudaMemcpyDefault);
  /* device-to-device cudaMemcpy does not wait on the host */
  if (status == cudaSuccess)
    status = cudaStreamSynchronize (0);
  if (status != cudaSuccess)
    {
      int current = -1;
      cudaGetDevice (&current);
      return cuda_fail (error, current, status, "cudaMemcpy");
    }
  return TRUE;
}

static gboolean
cuda_zero (int index, void *p, size_t bytes, GError **error)
{
  cudaError_t status = cudaSetDevice (index);
  if (status == cudaSuccess)
    status = cudaMemset (p, 0, bytes);
  if (status == cudaSuccess)
    status = cudaStreamSynchronize (0);
  return cuda_fail (error, index, status, "cudaMemset");
}

static void *
cuda_host_alloc (int index, size_t bytes, GError **error)
{
  void *p = NULL;
  cudaError_t status = cudaHostAlloc (&p, MAX (bytes, (size_t) 1), cudaHostAllocPortable);
  if (status != cudaSuccess)
    {
      cudaGetLastError ();
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL,
                   "cuda:%d: cannot allocate %.1f MiB of pinned host memory: %s", index,
                   (double) bytes / (1 << 20), cudaGetErrorString (status));
      return NULL;
    }
  memset (p, 0, bytes);
  return p;
}

static void
cuda_host_free (int index, void *p)
{
  cudaError_t status = cudaFreeHost (p);
  if (status != cudaSuccess)
    {
      g_warning ("cuda:%d: cudaFreeHost: %s", index, cudaGetErrorString (status));
      cudaGetLastError ();
    }
}

static gboolean
cuda_host_register (int index, void *p, size_t bytes)
{
  cudaError_t status = cudaHostRegister (p, bytes, cudaHostRegisterPortable);
  if (status != cudaSuccess)
    {
      /* already pinned by someone else, or not pinnable: copies still work */
      g_debug ("cuda:%d: cudaHostRegister of %zu bytes: %s", index, bytes, cudaGetErrorString (status));
      cudaGetLastError ();
      return FALSE;
    }
  return TRUE;
}

static void
cuda_host_unregister (int index, void *p)
{
  if (cudaHostUnregister (p) != cudaSuccess)
    {
      g_debug ("cuda:%d: cudaHostUnregister failed", index);
      cudaGetLastError ();
    }
}

/* ---- streams and events ------------------------------------------------- */

/* cudaStream_t and cudaEvent_t are pointers to opaque driver structs;
 * core/device.h's opaque types are those pointers. */
#define STREAM(s) ((cudaStream_t) (s))
#define EVENT(e) ((cudaEvent_t) (e))

static void
enqueue_failed (const char *what, cudaError_t status)
{
  if (status != cudaSuccess)
    {
      /* while capturing, the capture's end reports it */
      if (!shoal_gpu_step_capturing ())
        g_critical ("%s: %s", what, cudaGetErrorString (status));
      cudaGetLastError ();
    }
}

static ShoalStream *
cuda_stream_new (int index, GError **error)
{
  cudaStream_t s = NULL;
  cudaError_t status = cudaSetDevice (index);
  if (status == cudaSuccess)
    status = cudaStreamCreate (&s);
  return cuda_fail (error, index, status, "cudaStreamCreate") ? (ShoalStream *) s : NULL;
}

static void
cuda_stream_free (ShoalStream *stream)
{
  cudaStreamDestroy (STREAM (stream));
}

static gboolean
cuda_stream_sync (ShoalStream *stream, GError **error)
{
  cudaError_t status = cudaStreamSynchronize (STREAM (stream));
  if (status != cudaSuccess)
    {
      int current = -1;
      cudaGetDevice (&current);
      return cuda_fail (error, current, status, "cudaStreamSynchronize");
    }
  return TRUE;
}

static void
cuda_stream_copy (ShoalStream *stream, void *dst, const void *src, size_t bytes)
{
  shoal_gpu_step_other ("a copy");
  enqueue_failed ("cudaMemcpyAsync", cudaMemcpyAsync (dst, src, bytes, cudaMemcpyDefault, STREAM (stream)));
}

static void
cuda_stream_zero (ShoalStream *stream, void *p, size_t bytes)
{
  if (shoal_gpu_step_zero (STREAM (stream), p, bytes))
    return;
  enqueue_failed ("cudaMemsetAsync", cudaMemsetAsync (p, 0, bytes, STREAM (stream)));
}

static void
cuda_stream_wait (ShoalStream *stream, ShoalEvent *event)
{
  shoal_gpu_step_other ("an event wait");
  enqueue_failed ("cudaStreamWaitEvent", cudaStreamWaitEvent (STREAM (stream), EVENT (event), 0));
}

static ShoalEvent *
cuda_event_new (int index, GError **error)
{
  cudaEvent_t e = NULL;
  cudaError_t status = cudaSetDevice (index);
  if (status == cudaSuccess)
    status = cudaEventCreateWithFlags (&e, cudaEventDisableTiming);
  return cuda_fail (error, index, status, "cudaEventCreate") ? (ShoalEvent *) e : NULL;
}

static void
cuda_event_free (ShoalEvent *event)
{
  cudaEventDestroy (EVENT (event));
}

static void
cuda_event_record (ShoalEvent *event, ShoalStream *stream)
{
  shoal_gpu_step_other ("an event record");
  /* captured, an external record is a node of the graph: each launch
   * records the event, which the host can wait for */
  if (shoal_gpu_step_capturing ())
    enqueue_failed ("cudaEventRecordWithFlags",
                    cudaEventRecordWithFlags (EVENT (event), STREAM (stream), cudaEventRecordExternal));
  else
    enqueue_failed ("cudaEventRecord", cudaEventRecord (EVENT (event), STREAM (stream)));
}

static gboolean
cuda_event_done (ShoalEvent *event)
{
  cudaError_t status = cudaEventQuery (EVENT (event));
  if (status == cudaErrorNotReady)
    {
      /* NotReady is kept as the thread's last error (cuda_runtime_api.h,
       * cudaGetLastError): left there, the next kernel wrapper's
       * cudaGetLastError would report it as that layer's failure */
      cudaGetLastError ();
      return FALSE;
    }
  /* any other error is reported by the sync that follows */
  return TRUE;
}

static gboolean
cuda_event_sync (ShoalEvent *event, GError **error)
{
  cudaError_t status = cudaEventSynchronize (EVENT (event));
  if (status != cudaSuccess)
    {
      int current = -1;
      cudaGetDevice (&current);
      return cuda_fail (error, current, status, "cudaEventSynchronize");
    }
  return TRUE;
}

/* ---- contexts ----------------------------------------------------------- */

static void cuda_context_free (ShoalDeviceContext *ctx);

static ShoalDeviceContext *
cuda_context_new (int index, GError **error)
{
  ShoalDeviceContext *ctx = g_new0 (ShoalDeviceContext, 1);
  ctx->device = (ShoalDevice) { SHOAL_DEVICE_CUDA, index };
  ctx->tf32 = shoal_device_precision () != SHOAL_PRECISION_FP32;
  ctx->bf16 = shoal_device_precision () == SHOAL_PRECISION_BF16;

  cudaError_t status = cudaSetDevice (index);
  if (status == cudaSuccess)
    status = cudaStreamCreate (&ctx->compute);
  if (status == cudaSuccess)
    status = cudaStreamCreate (&ctx->copy);
  if (!cuda_fail (error, index, status, "creating streams"))
    {
      cuda_context_free (ctx);
      return NULL;
    }
  /* cuBLAS's workspace is ours, allocated now: a step captured into a
   * CUDA graph must not allocate, and eager steps use the same one so
   * that they pick the same kernels (the size NVIDIA advises: 32 MiB
   * from Hopper on, 4 MiB before) */
  int major = 0;
  cudaDeviceGetAttribute (&major, cudaDevAttrComputeCapabilityMajor, index);
  ctx->blas_workspace_bytes = (size_t) (major >= 9 ? 32 : 4) << 20;
  status = cudaMalloc (&ctx->blas_workspace, ctx->blas_workspace_bytes);
  if (!cuda_fail (error, index, status, "cuBLAS's workspace"))
    {
      ctx->blas_workspace = NULL;
      cuda_context_free (ctx);
      return NULL;
    }
  cublasStatus_t bs = cublasCreate (&ctx->blas);
  if (bs == CUBLAS_STATUS_SUCCESS)
    bs = cublasSetStream (ctx->blas, ctx->compute);
  /* after the stream: setting one resets the workspace */
  if (bs == CUBLAS_STATUS_SUCCESS)
    bs = cublasSetWorkspace (ctx->blas, ctx->blas_workspace, ctx->blas_workspace_bytes);
  if (bs == CUBLAS_STATUS_SUCCESS)
    bs = cublasSetMathMode (ctx->blas, ctx->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
  if (bs != CUBLAS_STATUS_SUCCESS)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL, "cuda:%d: cuBLAS: %s", index,
                   cublasGetStatusString (bs));
      cuda_context_free (ctx);
      return NULL;
    }
  cudnnStatus_t ds = cudnnCreate (&ctx->dnn);
  if (ds == CUDNN_STATUS_SUCCESS)
    ds = cudnnSetStream (ctx->dnn, ctx->compute);
  if (ds != CUDNN_STATUS_SUCCESS)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL, "cuda:%d: cuDNN %zu: %s", index,
                   cudnnGetVersion (), cudnnGetErrorString (ds));
      cuda_context_free (ctx);
      return NULL;
    }
  return ctx;
}

static void
cuda_context_free (ShoalDeviceContext *ctx)
{
  if (ctx == NULL)
    return;
  cudaSetDevice (ctx->device.index);
  if (ctx->compute != NULL)
    cudaStreamSynchronize (ctx->compute);
  if (ctx->copy != NULL)
    cudaStreamSynchronize (ctx->copy);
  if (ctx->dnn != NULL)
    cudnnDestroy (ctx->dnn);
  if (ctx->blas != NULL)
    cublasDestroy (ctx->blas);
  cudaFree (ctx->workspace);
  cudaFree (ctx->ones);
  cudaFree (ctx->blas_workspace);
  if (ctx->copy != NULL)
    cudaStreamDestroy (ctx->copy);
  if (ctx->compute != NULL)
    cudaStreamDestroy (ctx->compute);
  cudaGetLastError ();
  g_clear_error (&ctx->error);
  g_free (ctx);
}

static ShoalDevice
cuda_context_device (const ShoalDeviceContext *ctx)
{
  return ctx->device;
}

static ShoalStream *
cuda_context_compute (ShoalDeviceContext *ctx)
{
  return (ShoalStream *) ctx->compute;
}

static ShoalStream *
cuda_context_copy (ShoalDeviceContext *ctx)
{
  return (ShoalStream *) ctx->copy;
}

void
shoal_gpu_workspace_reserve (ShoalDeviceContext *ctx, size_t bytes)
{
  ctx->workspace_want = MAX (ctx->workspace_want, bytes);
}

void
shoal_gpu_ones_reserve (ShoalDeviceContext *ctx, size_t count)
{
  ctx->ones_want = MAX (ctx->ones_want, count);
}

static gboolean
cuda_context_ready (ShoalDeviceContext *ctx, GError **error)
{
  int index = ctx->device.index;
  cudaSetDevice (index);
  if (ctx->workspace_want > ctx->workspace_bytes)
    {
      cudaFree (ctx->workspace);
      ctx->workspace = NULL;
      ctx->workspace_bytes = 0;
      cudaError_t status = cudaMalloc (&ctx->workspace, ctx->workspace_want);
      if (status != cudaSuccess)
        {
          cudaGetLastError ();
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL,
                       "cuda:%d: cannot allocate the layers' %.1f MiB workspace: %s", index,
                       (double) ctx->workspace_want / (1 << 20), cudaGetErrorString (status));
          ctx->workspace = NULL;
          return FALSE;
        }
      ctx->workspace_bytes = ctx->workspace_want;
    }
  if (ctx->ones_want > ctx->ones_count)
    {
      float *host = g_new (float, ctx->ones_want);
      for (size_t i = 0; i < ctx->ones_want; i++)
        host[i] = 1.0f;
      cudaFree (ctx->ones);
      ctx->ones = NULL;
      ctx->ones_count = 0;
      cudaError_t status = cudaMalloc ((void **) &ctx->ones, ctx->ones_want * sizeof (float));
      if (status == cudaSuccess)
        status = cudaMemcpy (ctx->ones, host, ctx->ones_want * sizeof (float), cudaMemcpyHostToDevice);
      g_free (host);
      if (!cuda_fail (error, index, status, "a vector of ones"))
        return FALSE;
      ctx->ones_count = ctx->ones_want;
    }
  return TRUE;
}

static gboolean
cuda_context_sync (ShoalDeviceContext *ctx, GError **error)
{
  cudaError_t status = cudaStreamSynchronize (ctx->compute);
  if (status != cudaSuccess && ctx->error == NULL)
    {
      g_set_error (&ctx->error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL,
                   "cuda:%d: the net's work failed: %s", ctx->device.index, cudaGetErrorString (status));
      cudaGetLastError ();
    }
  if (ctx->error != NULL)
    {
      g_propagate_error (error, ctx->error);
      ctx->error = NULL;
      return FALSE;
    }
  return TRUE;
}

static gboolean
cuda_context_check (ShoalDeviceContext *ctx, GError **error)
{
  if (ctx->error == NULL)
    return TRUE;
  g_propagate_error (error, ctx->error);
  ctx->error = NULL;
  return FALSE;
}

void *
shoal_gpu_workspace (const ShoalLayer *layer, size_t bytes)
{
  ShoalDeviceContext *ctx = shoal_gpu_ctx (layer);
  if (bytes <= ctx->workspace_bytes)
    return ctx->workspace;
  /* cudaFree waits for the device: fine for this rare case */
  cudaFree (ctx->workspace);
  ctx->workspace = NULL;
  ctx->workspace_bytes = 0;
  if (!GPU_CUDA (layer, "workspace", cudaMalloc (&ctx->workspace, bytes)))
    {
      ctx->workspace = NULL;
      return NULL;
    }
  ctx->workspace_bytes = ctx->workspace_want = bytes;
  ctx->workspace_generation++;
  return ctx->workspace;
}

float *
shoal_gpu_alloc_floats (const ShoalLayer *layer, size_t count, GError **error)
{
  GError *local = NULL;
  float *p = shoal_device_alloc (layer->ctx->device, MAX (count, (size_t) 1) * sizeof (float), &local);
  if (p == NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL, "layer '%s': %s", layer->name, local->message);
      g_error_free (local);
    }
  return p;
}

void
shoal_gpu_free (void *p)
{
  if (p == NULL)
    return;
  cudaError_t status = cudaFree (p);
  if (status != cudaSuccess)
    {
      /* not left as the last error for the next launch to report */
      g_warning ("cudaFree: %s", cudaGetErrorString (status));
      clear_last_error ();
    }
}

gboolean
shoal_gpu_set_4d (cudnnTensorDescriptor_t desc, int n, int c, int h, int w)
{
  return cudnnSetTensor4dDescriptor (desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, MAX (n, 1), c, h, w)
         == CUDNN_STATUS_SUCCESS;
}

void
shoal_gpu_tag (const ShoalLayer *layer, ShoalTensor *t)
{
  t->device = layer->ctx->device;
}

gboolean
shoal_gpu_move_to_device (const ShoalLayer *layer, ShoalTensor *t, GError **error)
{
  ShoalTensor dev = { 0 };
  ShoalShape full = t->shape;
  size_t rows_cap = t->shape.ndim > 0 && shoal_shape_row_size (&t->shape) > 0
                      ? t->capacity / shoal_shape_row_size (&t->shape) : 1;
  if (t->shape.ndim > 0)
    full.dim[0] = (int) rows_cap;
  GError *local = NULL;
  if (!shoal_tensor_alloc_on (&dev, &full, layer->ctx->device, &local)
      || !shoal_device_copy (dev.data, t->data, t->capacity * sizeof (float), &local))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL, "layer '%s': %s", layer->name, local->message);
      g_error_free (local);
      shoal_tensor_clear (&dev);
      return FALSE;
    }
  dev.shape = t->shape;
  shoal_tensor_clear (t);
  *t = dev;
  return TRUE;
}

const ShoalDeviceBackend shoal_cuda_backend = {
  .name = "cuda",
  .count = cuda_count,
  .check = cuda_check,
  .describe = cuda_describe,
  .activate = cuda_activate,
  .alloc = cuda_alloc,
  .free = cuda_free,
  .copy = cuda_copy,
  .zero = cuda_zero,
  .host_alloc = cuda_host_alloc,
  .host_free = cuda_host_free,
  .host_register = cuda_host_register,
  .host_unregister = cuda_host_unregister,
  .stream_new = cuda_stream_new,
  .stream_free = cuda_stream_free,
  .stream_sync = cuda_stream_sync,
  .stream_copy = cuda_stream_copy,
  .stream_zero = cuda_stream_zero,
  .stream_wait = cuda_stream_wait,
  .event_new = cuda_event_new,
  .event_free = cuda_event_free,
  .event_record = cuda_event_record,
  .event_done = cuda_event_done,
  .event_sync = cuda_event_sync,
  .context_new = cuda_context_new,
  .context_free = cuda_context_free,
  .context_device = cuda_context_device,
  .context_compute = cuda_context_compute,
  .context_copy = cuda_context_copy,
  .context_ready = cuda_context_ready,
  .context_sync = cuda_context_sync,
  .context_check = cuda_context_check,
  .update = shoal_cuda_update,
  .clip = shoal_cuda_clip,
  .codec_encode = shoal_cuda_codec_encode,
  .codec_decode = shoal_cuda_codec_decode,
  .graph_new = shoal_cuda_graph_new,
  .graph_free = shoal_cuda_graph_free,
  .graph_refuses = shoal_cuda_graph_refuses,
  .graph_ready = shoal_cuda_graph_ready,
  .graph_begin_capture = shoal_cuda_graph_begin_capture,
  .graph_end_capture = shoal_cuda_graph_end_capture,
  .graph_begin_replay = shoal_cuda_graph_begin_replay,
  .graph_end_replay = shoal_cuda_graph_end_replay,
  .graph_launch = shoal_cuda_graph_launch,
  .graph_begin_rerun = shoal_cuda_graph_begin_rerun,
  .graph_end_rerun = shoal_cuda_graph_end_rerun,
};
