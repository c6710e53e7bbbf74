/* Tensor storage: aligned so that BLAS and vectorised loops get whole
 * cache lines, and views so that params can live in one buffer. */
#include "core/tensor.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/device.h"
#include "core/error.h"
#include "core/memory_budget.h"

ShoalShape
shoal_shape_make (int ndim, ...)
{
  ShoalShape shape = { 0 };
  va_list ap;

  g_return_val_if_fail (ndim >= 0 && ndim <= SHOAL_MAX_DIMS, shape);
  shape.ndim = ndim;
  va_start (ap, ndim);
  gboolean negative = FALSE;
  for (int i = 0; i < ndim; i++)
    negative |= (shape.dim[i] = va_arg (ap, int)) < 0;
  va_end (ap);
  /* a negative dim would count as billions of floats (size_t) */
  g_return_val_if_fail (!negative, (ShoalShape) { 0 });
  return shape;
}

/* Whether every dim is >= 0 (shapes made by hand, not by shoal_shape_make). */
static gboolean
dims_valid (const ShoalShape *shape)
{
  for (int i = 0; i < shape->ndim; i++)
    if (shape->dim[i] < 0)
      return FALSE;
  return TRUE;
}

size_t
shoal_shape_count (const ShoalShape *shape)
{
  g_return_val_if_fail (shape != NULL && shape->ndim >= 0 && shape->ndim <= SHOAL_MAX_DIMS, 0);
  g_return_val_if_fail (dims_valid (shape), 0);
  size_t n = 1;
  for (int i = 0; i < shape->ndim; i++)
    n *= (size_t) shape->dim[i];
  return n;
}

size_t
shoal_shape_row_size (const ShoalShape *shape)
{
  g_return_val_if_fail (shape != NULL && shape->ndim >= 0 && shape->ndim <= SHOAL_MAX_DIMS, 0);
  g_return_val_if_fail (dims_valid (shape), 0);
  size_t n = 1;
  for (int i = 1; i < shape->ndim; i++)
    n *= (size_t) shape->dim[i];
  return n;
}

gboolean
shoal_shape_equal (const ShoalShape *a, const ShoalShape *b)
{
  g_return_val_if_fail (a != NULL && b != NULL, FALSE);
  g_return_val_if_fail (a->ndim >= 0 && a->ndim <= SHOAL_MAX_DIMS, FALSE);
  if (a->ndim != b->ndim)
    return FALSE;
  for (int i = 0; i < a->ndim; i++)
    if (a->dim[i] != b->dim[i])
      return FALSE;
  return TRUE;
}

char *
shoal_shape_to_string (const ShoalShape *shape)
{
  g_return_val_if_fail (shape != NULL && shape->ndim >= 0 && shape->ndim <= SHOAL_MAX_DIMS, NULL);
  GString *s = g_string_new (NULL);
  if (shape->ndim == 0)
    g_string_append (s, "scalar");
  for (int i = 0; i < shape->ndim; i++)
    g_string_append_printf (s, i ? "x%d" : "%d", shape->dim[i]);
  return g_string_free (s, FALSE);
}

char *
shoal_format_bytes (guint64 bytes)
{
  static const char *const units[] = { "bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
  double v = (double) bytes;
  int u = 0;
  while (v >= 1024 && u + 1 < (int) G_N_ELEMENTS (units))
    {
      v /= 1024;
      u++;
    }
  return u == 0 ? g_strdup_printf ("%" G_GUINT64_FORMAT " bytes", bytes) : g_strdup_printf ("%.1f %s", v, units[u]);
}

/* Charged to the calling thread's memory charge (core/memory_budget.c)
 * before malloc is asked; refused there when force is FALSE and the
 * budget would be crossed. */
static void *
alloc_aligned (size_t bytes, gboolean force, GError **error)
{
  void *p = NULL;
  bytes = (bytes + 63) & ~(size_t) 63;
  if (bytes == 0)
    bytes = 64;
  ShoalMemoryCharge *charge = shoal_memory_charge_current ();
  if (!shoal_memory_charge (charge, bytes, force, error) && !force)
    return NULL;
  if (posix_memalign (&p, 64, bytes) != 0)
    {
      shoal_memory_uncharge (charge, bytes);
      char *size = shoal_format_bytes (bytes);
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_MEMORY, "out of memory allocating %zu bytes (%s)",
                   bytes, size);
      g_free (size);
      return NULL;
    }
  memset (p, 0, bytes);
  return p;
}

static float *
alloc_floats (size_t count, gboolean force, GError **error)
{
  if (count > (G_MAXSIZE - 63) / sizeof (float))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_MEMORY,
                   "out of memory allocating %zu floats (more bytes than size_t holds)", count);
      return NULL;
    }
  return alloc_aligned (count * sizeof (float), force, error);
}

float *
shoal_try_alloc_floats (size_t count, GError **error)
{
  return alloc_floats (count, FALSE, error);
}

void *
shoal_try_alloc_bytes (size_t bytes, GError **error)
{
  if (bytes > G_MAXSIZE - 63)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_MEMORY,
                   "out of memory allocating %zu bytes (more than size_t holds)", bytes);
      return NULL;
    }
  return alloc_aligned (bytes, FALSE, error);
}

/* Cannot fail, so it is charged even past the budget; the net then
 * reports the crossing after the layer's set-up. */
float *
shoal_alloc_floats (size_t count)
{
  GError *error = NULL;
  float *p = alloc_floats (count, TRUE, &error);
  if (p == NULL)
    g_error ("%s", error->message);
  return p;
}

void
shoal_free_aligned (void *p)
{
  free (p);
}

/* ---- accessors (the public face of a tensor) ------------------------------ */

float *
shoal_tensor_data (const ShoalTensor *t)
{
  g_return_val_if_fail (t != NULL, NULL);
  return t->data;
}

const ShoalShape *
shoal_tensor_shape (const ShoalTensor *t)
{
  g_return_val_if_fail (t != NULL, NULL);
  return &t->shape;
}

int
shoal_tensor_rows (const ShoalTensor *t)
{
  g_return_val_if_fail (t != NULL, 0);
  return t->shape.ndim > 0 ? t->shape.dim[0] : 1;
}

size_t
shoal_tensor_count (const ShoalTensor *t)
{
  g_return_val_if_fail (t != NULL, 0);
  return shoal_shape_count (&t->shape);
}

size_t
shoal_tensor_row_size (const ShoalTensor *t)
{
  g_return_val_if_fail (t != NULL, 0);
  return shoal_shape_row_size (&t->shape);
}

ShoalDevice
shoal_tensor_device (const ShoalTensor *t)
{
  g_return_val_if_fail (t != NULL, (ShoalDevice) { 0 });
  return t->device;
}

void
shoal_tensor_alloc (ShoalTensor *t, const ShoalShape *shape)
{
  ShoalShape copy = *shape;  /* shape may point into t */
  shoal_tensor_clear (t);
  t->shape = copy;
  t->capacity = shoal_shape_count (shape);
  t->data = shoal_alloc_floats (t->capacity);
  t->owns_data = TRUE;
  t->device = (ShoalDevice) { SHOAL_DEVICE_CPU, 0 };
}

gboolean
shoal_tensor_try_alloc (ShoalTensor *t, const ShoalShape *shape, GError **error)
{
  ShoalShape copy = *shape;  /* shape may point into t */
  size_t count = shoal_shape_count (&copy);
  float *data = shoal_try_alloc_floats (count, error);
  shoal_tensor_clear (t);
  if (data == NULL)
    return FALSE;
  t->shape = copy;
  t->capacity = count;
  t->data = data;
  t->owns_data = TRUE;
  t->device = (ShoalDevice) { SHOAL_DEVICE_CPU, 0 };
  return TRUE;
}

void
shoal_tensor_view (ShoalTensor *t, float *data, const ShoalShape *shape)
{
  ShoalShape copy = *shape;  /* shape may point into t */
  shoal_tensor_clear (t);
  t->shape = copy;
  t->capacity = shoal_shape_count (shape);
  t->data = data;
  t->owns_data = FALSE;
  t->device = (ShoalDevice) { SHOAL_DEVICE_CPU, 0 };
}

gboolean
shoal_tensor_alloc_on (ShoalTensor *t, const ShoalShape *shape, ShoalDevice device, GError **error)
{
  if (device.kind == SHOAL_DEVICE_CPU)
    return shoal_tensor_try_alloc (t, shape, error);
  ShoalShape copy = *shape;  /* shape may point into t */
  size_t count = shoal_shape_count (&copy);
  float *data = shoal_device_alloc (device, MAX (count, (size_t) 1) * sizeof (float), error);
  if (data == NULL)
    return FALSE;
  shoal_tensor_clear (t);
  t->shape = copy;
  t->capacity = count;
  t->data = data;
  t->owns_data = TRUE;
  t->device = device;
  return TRUE;
}

void
shoal_tensor_view_on (ShoalTensor *t, float *data, const ShoalShape *shape, ShoalDevice device)
{
  shoal_tensor_view (t, data, shape);
  t->device = device;
}

gboolean
shoal_tensor_upload (ShoalTensor *t, const float *host, GError **error)
{
  size_t bytes = shoal_tensor_count (t) * sizeof (float);
  if (t->device.kind == SHOAL_DEVICE_CPU)
    {
      memmove (t->data, host, bytes);
      return TRUE;
    }
  return shoal_device_copy (t->data, host, bytes, error);
}

gboolean
shoal_tensor_download (const ShoalTensor *t, float *host, GError **error)
{
  size_t bytes = shoal_tensor_count (t) * sizeof (float);
  if (t->device.kind == SHOAL_DEVICE_CPU)
    {
      memmove (host, t->data, bytes);
      return TRUE;
    }
  return shoal_device_copy (host, t->data, bytes, error);
}

void
shoal_tensor_clear (ShoalTensor *t)
{
  if (t->owns_data)
    shoal_device_free (t->device, t->data);
  memset (t, 0, sizeof *t);
}

void
shoal_tensor_set_rows (ShoalTensor *t, int rows)
{
  g_return_if_fail (t->shape.ndim > 0);
  g_return_if_fail ((size_t) rows * shoal_shape_row_size (&t->shape) <= t->capacity);
  t->shape.dim[0] = rows;
}

void
shoal_tensor_fill (ShoalTensor *t, float value)
{
  size_t n = shoal_tensor_count (t);
  for (size_t i = 0; i < n; i++)
    t->data[i] = value;
}

void
shoal_tensor_copy (ShoalTensor *dst, const ShoalTensor *src)
{
  size_t n = shoal_tensor_count (src);
  g_return_if_fail (shoal_tensor_count (dst) == n);
  memmove (dst->data, src->data, n * sizeof (float));
}
