/* One buffer for all values, one for all gradients, one for optimiser
 * state: a server slice is then a plain offset range. */
#include "core/param.h"

#include <string.h>

#include "core/device.h"

#define PARAM_ALIGN_FLOATS 16  /* 64 bytes */

ShoalParamStore *
shoal_param_store_new (void)
{
  ShoalParamStore *store = g_new0 (ShoalParamStore, 1);
  store->params = g_ptr_array_new ();
  return store;
}

static void
param_free (ShoalParam *p)
{
  g_free (p->name);
  g_free (p);
}

void
shoal_param_store_free (ShoalParamStore *store)
{
  if (store == NULL)
    return;
  for (guint i = 0; i < store->params->len; i++)
    param_free (g_ptr_array_index (store->params, i));
  g_ptr_array_free (store->params, TRUE);
  if (store->borrowed_pinned)
    shoal_device_host_unregister (store->device, store->values);
  if (store->host_pinned)
    {
      if (!store->values_borrowed)
        shoal_device_host_free (store->device, store->values);
      shoal_device_host_free (store->device, store->grads);
    }
  else
    {
      if (!store->values_borrowed)
        shoal_free_aligned (store->values);
      if (!store->grads_borrowed)
        shoal_free_aligned (store->grads);
    }
  shoal_device_free (store->device, store->dev_values);
  shoal_device_free (store->device, store->dev_grads);
  shoal_free_aligned (store->state);
  if (store->release_memory != NULL)
    store->release_memory (store->memory_owner);
  g_free (store);
}

ShoalParam *
shoal_param_store_declare (ShoalParamStore *store, const char *name, const ShoalShape *shape,
                           const ShoalInitSpec *init, int fan_in, int fan_out,
                           float lr_scale, float wd_scale)
{
  g_return_val_if_fail (!store->allocated, NULL);
  g_return_val_if_fail (shoal_param_store_find (store, name) == NULL, NULL);

  ShoalParam *p = g_new0 (ShoalParam, 1);
  p->name = g_strdup (name);
  p->shape = *shape;
  p->count = shoal_shape_count (shape);
  p->offset = store->total;
  p->init = *init;
  p->fan_in = fan_in;
  p->fan_out = fan_out;
  p->lr_scale = lr_scale;
  p->wd_scale = wd_scale;
  store->total += (p->count + PARAM_ALIGN_FLOATS - 1) / PARAM_ALIGN_FLOATS * PARAM_ALIGN_FLOATS;
  g_ptr_array_add (store->params, p);
  return p;
}

ShoalParam *
shoal_param_store_find (ShoalParamStore *store, const char *name)
{
  g_return_val_if_fail (store != NULL && name != NULL, NULL);
  for (guint i = 0; i < store->params->len; i++)
    {
      ShoalParam *p = g_ptr_array_index (store->params, i);
      if (strcmp (p->name, name) == 0)
        return p;
    }
  return NULL;
}

static void
bind_views (ShoalParamStore *store)
{
  gboolean dev = store->dev_values != NULL;
  float *values = dev ? store->dev_values : store->values;
  float *grads = dev ? store->dev_grads : store->grads;
  for (guint i = 0; i < store->params->len; i++)
    {
      ShoalParam *p = g_ptr_array_index (store->params, i);
      shoal_tensor_view_on (&p->value, values + p->offset, &p->shape, store->device);
      shoal_tensor_view_on (&p->grad, grads + p->offset, &p->shape, store->device);
    }
}

const ShoalParam *
shoal_param_store_largest (const ShoalParamStore *store)
{
  const ShoalParam *big = NULL;
  for (guint i = 0; i < store->params->len; i++)
    {
      const ShoalParam *p = g_ptr_array_index (store->params, i);
      if (big == NULL || p->count > big->count)
        big = p;
    }
  return big;
}

void
shoal_param_store_prefix_nomem (const ShoalParamStore *store, GError **error, const char *what)
{
  const ShoalParam *big = shoal_param_store_largest (store);
  if (big == NULL)
    {
      g_prefix_error (error, "%s: ", what);
      return;
    }
  char *dims = shoal_shape_to_string (&big->shape);
  char *size = shoal_format_bytes (big->count * sizeof (float));
  g_prefix_error (error, "%s of %u params (largest: %s %s, %s): ", what, store->params->len,
                  big->name, dims, size);
  g_free (size);
  g_free (dims);
}

static float *
alloc_buffer (ShoalParamStore *store, size_t count, const char *what, GError **error)
{
  float *p = shoal_try_alloc_floats (count, error);
  if (p == NULL)
    shoal_param_store_prefix_nomem (store, error, what);
  return p;
}

gboolean
shoal_param_store_allocate (ShoalParamStore *store, GError **error)
{
  g_return_val_if_fail (!store->allocated, FALSE);
  shoal_param_store_place_statistics (store);
  float *values = alloc_buffer (store, store->total, "values", error);
  float *grads = values != NULL ? alloc_buffer (store, store->total, "gradients", error) : NULL;
  if (grads == NULL)
    {
      shoal_free_aligned (values);
      return FALSE;
    }
  store->values = values;
  store->grads = grads;
  store->allocated = TRUE;
  bind_views (store);
  return TRUE;
}

gboolean
shoal_param_store_allocate_device (ShoalParamStore *store, ShoalDevice device, GError **error)
{
  g_return_val_if_fail (store->allocated && store->dev_values == NULL && !store->values_borrowed, FALSE);
  if (shoal_device_is_cpu (device))
    return TRUE;
  size_t bytes = MAX (store->total, (size_t) 1) * sizeof (float);
  float *dv = shoal_device_alloc (device, bytes, error);
  float *dg = dv != NULL ? shoal_device_alloc (device, bytes, error) : NULL;
  float *hv = dg != NULL ? shoal_device_host_alloc (device, bytes, error) : NULL;
  float *hg = hv != NULL ? shoal_device_host_alloc (device, bytes, error) : NULL;
  if (hg == NULL)
    {
      shoal_device_host_free (device, hv);
      shoal_device_free (device, dg);
      shoal_device_free (device, dv);
      return FALSE;
    }
  /* nothing was written yet: values are initialised after allocation */
  shoal_free_aligned (store->values);
  shoal_free_aligned (store->grads);
  store->values = hv;
  store->grads = hg;
  store->host_pinned = TRUE;
  store->dev_values = dv;
  store->dev_grads = dg;
  store->device = device;
  bind_views (store);
  return TRUE;
}

void
shoal_param_store_borrow_values (ShoalParamStore *store, float *values)
{
  g_return_if_fail (store->allocated);
  if (store->borrowed_pinned)
    shoal_device_host_unregister (store->device, store->values);
  store->borrowed_pinned = FALSE;
  if (!store->values_borrowed)
    {
      if (store->host_pinned)
        shoal_device_host_free (store->device, store->values);
      else
        shoal_free_aligned (store->values);
    }
  store->values = values;
  store->values_borrowed = TRUE;
  /* a GPU store uploads from these: pinned, the copies run asynchronously */
  if (store->dev_values != NULL)
    store->borrowed_pinned = shoal_device_host_register (store->device, values,
                                                         store->total * sizeof (float));
  bind_views (store);
}

gboolean
shoal_param_store_move_to (ShoalParamStore *store, float *values, float *grads, gpointer owner,
                           GDestroyNotify release)
{
  g_return_val_if_fail (store->allocated && values != NULL && grads != NULL, FALSE);
  if (store->dev_values != NULL || store->host_pinned || store->values_borrowed || store->grads_borrowed)
    return FALSE;
  memcpy (values, store->values, store->total * sizeof (float));
  memcpy (grads, store->grads, store->total * sizeof (float));
  shoal_free_aligned (store->values);
  shoal_free_aligned (store->grads);
  store->values = values;
  store->grads = grads;
  store->values_borrowed = store->grads_borrowed = TRUE;
  store->memory_owner = owner;
  store->release_memory = release;
  bind_views (store);
  return TRUE;
}

gboolean
shoal_param_store_allocate_state (ShoalParamStore *store, int per_value, GError **error)
{
  float *state = NULL;
  if (per_value > 0)
    {
      state = alloc_buffer (store, store->total * (size_t) per_value, "optimiser state", error);
      if (state == NULL)
        return FALSE;
    }
  shoal_free_aligned (store->state);
  store->state = state;
  store->state_per_value = per_value;
  return TRUE;
}

/* FNV-1a: a stable 64-bit stream id from a param name. */
static guint64
name_hash (const char *name)
{
  guint64 h = 1469598103934665603ULL;
  for (const unsigned char *c = (const unsigned char *) name; *c; c++)
    h = (h ^ *c) * 1099511628211ULL;
  return h;
}

void
shoal_param_store_init_values (ShoalParamStore *store, guint64 seed)
{
  g_return_if_fail (store != NULL);
  for (guint i = 0; i < store->params->len; i++)
    {
      ShoalParam *p = g_ptr_array_index (store->params, i);
      ShoalRng rng;
      shoal_rng_seed (&rng, seed, name_hash (p->name));
      shoal_init_fill (&p->init, p->fan_in, p->fan_out, &rng, store->values + p->offset, p->count);
    }
}

void
shoal_param_store_zero_grads (ShoalParamStore *store)
{
  g_return_if_fail (store != NULL);
  memset (store->grads, 0, store->total * sizeof (float));
  if (store->dev_grads != NULL)
    {
      GError *error = NULL;
      if (!shoal_device_zero (store->device, store->dev_grads, store->total * sizeof (float), &error))
        {
          g_critical ("zeroing the device gradients: %s", error->message);
          g_error_free (error);
        }
    }
}

/* ---- accessors (the public face of params and the store) ------------------ */

const char *
shoal_param_name (const ShoalParam *param)
{
  g_return_val_if_fail (param != NULL, NULL);
  return param->name;
}

const ShoalShape *
shoal_param_shape (const ShoalParam *param)
{
  g_return_val_if_fail (param != NULL, NULL);
  return &param->shape;
}

ShoalTensor *
shoal_param_value (ShoalParam *param)
{
  g_return_val_if_fail (param != NULL, NULL);
  return &param->value;
}

ShoalTensor *
shoal_param_grad (ShoalParam *param)
{
  g_return_val_if_fail (param != NULL, NULL);
  return &param->grad;
}

float
shoal_param_lr_scale (const ShoalParam *param)
{
  g_return_val_if_fail (param != NULL, 0);
  return param->lr_scale;
}

float
shoal_param_wd_scale (const ShoalParam *param)
{
  g_return_val_if_fail (param != NULL, 0);
  return param->wd_scale;
}

guint
shoal_param_store_n_params (const ShoalParamStore *store)
{
  g_return_val_if_fail (store != NULL, 0);
  return store->params->len;
}

ShoalParam *
shoal_param_store_get (ShoalParamStore *store, guint i)
{
  g_return_val_if_fail (store != NULL, NULL);
  return i < store->params->len ? g_ptr_array_index (store->params, i) : NULL;
}

float *
shoal_param_store_values (ShoalParamStore *store)
{
  g_return_val_if_fail (store != NULL, NULL);
  return store->values;
}

float *
shoal_param_store_grads (ShoalParamStore *store)
{
  g_return_val_if_fail (store != NULL, NULL);
  return store->grads;
}

size_t
shoal_param_store_size (const ShoalParamStore *store)
{
  g_return_val_if_fail (store != NULL, 0);
  return store->total;
}
