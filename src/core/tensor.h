/* Float32 tensors of up to four dimensions (the public half, the shapes
 * and accessors, is shoal/tensor.h).
 *
 * A tensor either owns its memory (shoal_tensor_alloc) or views memory
 * owned by someone else (shoal_tensor_view), for instance a range of the
 * param store.  The first dimension is the batch ("rows") wherever a
 * tensor holds per-sample data.  `capacity` is what was allocated; a
 * layer may shrink shape[0] at forward time (the last, partial test
 * batch) without reallocating. */
#ifndef SHOAL_TENSOR_H
#define SHOAL_TENSOR_H

#include <glib.h>
#include <stddef.h>

#include <shoal/tensor.h>

G_BEGIN_DECLS

struct _ShoalTensor {
  float *data;       /* NULL until allocated or viewed */
  ShoalShape shape;
  size_t capacity;   /* floats available at data */
  ShoalDevice device;
  gboolean owns_data;
};

/* Tensors.  A zero-initialised ShoalTensor is empty and valid to clear.
 * shoal_tensor_alloc aborts when memory is short (as g_malloc does): use
 * it for tensors whose size the caller bounds; shoal_tensor_try_alloc
 * returns FALSE with SHOAL_ERROR_MEMORY (naming the bytes) instead and
 * leaves t empty. */
void shoal_tensor_alloc (ShoalTensor *t, const ShoalShape *shape);  /* zero-filled, 64-byte aligned */
gboolean shoal_tensor_try_alloc (ShoalTensor *t, const ShoalShape *shape, GError **error);
/* "1.2 GiB": bytes in binary units, one decimal, plain ASCII (g_format_size
 * puts a no-break space in); g_free it. */
char *shoal_format_bytes (guint64 bytes);
void shoal_tensor_view (ShoalTensor *t, float *data, const ShoalShape *shape);
void shoal_tensor_clear (ShoalTensor *t);                           /* frees owned memory */

/* Device tensors (core/device.h).  shoal_tensor_alloc_on allocates
 * zero-filled memory on `device` (the CPU included); FALSE with error
 * when out of device memory.  shoal_tensor_view_on views memory that
 * lives on `device`.  shoal_tensor_clear frees owned memory wherever it
 * is.  Device data is never read by the CPU: upload and download copy
 * the tensor's current count of floats, synchronously, in either case. */
gboolean shoal_tensor_alloc_on (ShoalTensor *t, const ShoalShape *shape, ShoalDevice device,
                                GError **error);
void shoal_tensor_view_on (ShoalTensor *t, float *data, const ShoalShape *shape, ShoalDevice device);
gboolean shoal_tensor_upload (ShoalTensor *t, const float *host, GError **error);
gboolean shoal_tensor_download (const ShoalTensor *t, float *host, GError **error);
/* Sets shape[0] to rows; rows * row_size must fit the capacity. */
void shoal_tensor_set_rows (ShoalTensor *t, int rows);

/* CPU tensors only. */
void shoal_tensor_fill (ShoalTensor *t, float value);
void shoal_tensor_copy (ShoalTensor *dst, const ShoalTensor *src); /* counts must match */

G_END_DECLS

#endif
