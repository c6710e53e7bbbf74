/* What every layer shares: option getters over its conf group, param
 * declaration from <param>_* keys, error messages, and the registry of
 * layer types (built-ins from layer_list.h plus run-time registrations). */
#include "layers/layer.h"

#include <stdarg.h>
#include <string.h>

#include "core/error.h"

const ShoalOption shoal_layer_common_options[] = {
  { "type", SHOAL_OPT_STRING, NULL, SHOAL_UNBOUNDED, NULL, "layer type, see `shoal layers`" },
  { "src", SHOAL_OPT_STRING_LIST, "", SHOAL_UNBOUNDED, NULL, "comma list of source layers" },
  { "partition_dim", SHOAL_OPT_INT, "0", -1, 1, NULL,
    "0 batch, 1 feature, -1 whole layer on one worker" },
  { "loss_weight", SHOAL_OPT_FLOAT, "1", 0, 1e9, NULL, "loss layers: weight of this loss" },
  SHOAL_OPTION_END
};

const ShoalOption shoal_param_options[] = {
  { "init", SHOAL_OPT_STRING, NULL, SHOAL_UNBOUNDED,
    "constant|gaussian|uniform|gaussian_sqrt_fan_in|uniform_sqrt_fan_in|xavier|glorot_uniform|glorot_normal",
    "initialiser" },
  { "value", SHOAL_OPT_FLOAT, "0", SHOAL_UNBOUNDED, NULL, "constant init value" },
  { "mean", SHOAL_OPT_FLOAT, "0", SHOAL_UNBOUNDED, NULL, "gaussian mean" },
  { "std", SHOAL_OPT_FLOAT, "0.01", 0, 1e9, NULL, "gaussian standard deviation" },
  { "low", SHOAL_OPT_FLOAT, "-0.05", SHOAL_UNBOUNDED, NULL, "uniform lower bound" },
  { "high", SHOAL_OPT_FLOAT, "0.05", SHOAL_UNBOUNDED, NULL, "uniform upper bound" },
  { "lr_scale", SHOAL_OPT_FLOAT, "1", 0, 1e9, NULL, "multiplies the learning rate" },
  { "wd_scale", SHOAL_OPT_FLOAT, "1", 0, 1e9, NULL, "multiplies the weight decay" },
  { "init_from", SHOAL_OPT_STRING, "", SHOAL_UNBOUNDED, NULL,
    "with [job] init_from: the checkpointed param that initialises this one, NAME or NAME^T "
    "(transposed; e.g. a decoder's weight from its encoder's); default: its own name" },
  SHOAL_OPTION_END
};

gint64
shoal_layer_opt_int (const ShoalLayer *layer, const char *key)
{
  g_return_val_if_fail (layer != NULL && key != NULL, 0);
  return shoal_conf_get_int (layer->conf, layer->group, layer->ops->options, key);
}

double
shoal_layer_opt_float (const ShoalLayer *layer, const char *key)
{
  g_return_val_if_fail (layer != NULL && key != NULL, 0);
  return shoal_conf_get_float (layer->conf, layer->group, layer->ops->options, key);
}

gboolean
shoal_layer_opt_bool (const ShoalLayer *layer, const char *key)
{
  g_return_val_if_fail (layer != NULL && key != NULL, FALSE);
  return shoal_conf_get_bool (layer->conf, layer->group, layer->ops->options, key);
}

char *
shoal_layer_opt_string (const ShoalLayer *layer, const char *key)
{
  g_return_val_if_fail (layer != NULL && key != NULL, NULL);
  return shoal_conf_get_string (layer->conf, layer->group, layer->ops->options, key);
}

gint *
shoal_layer_opt_int_list (const ShoalLayer *layer, const char *key, gsize *n)
{
  g_return_val_if_fail (layer != NULL && key != NULL && n != NULL, NULL);
  return shoal_conf_get_int_list (layer->conf, layer->group, layer->ops->options, key, n);
}

int
shoal_layer_opt_int_or (const ShoalLayer *layer, const char *key, int unset, const char *fallback)
{
  int v = (int) shoal_layer_opt_int (layer, key);
  return v == unset ? (int) shoal_layer_opt_int (layer, fallback) : v;
}

gboolean
shoal_layer_opt_is_set (const ShoalLayer *layer, const char *key)
{
  g_return_val_if_fail (layer != NULL && key != NULL, FALSE);
  return g_key_file_has_key (shoal_conf_keyfile (layer->conf), layer->group, key, NULL);
}

void
shoal_layer_error (const ShoalLayer *layer, GError **error, const char *key, const char *format, ...)
{
  g_return_if_fail (layer != NULL && format != NULL);
  va_list ap;
  va_start (ap, format);
  char *msg = g_strdup_vprintf (format, ap);
  va_end (ap);
  shoal_conf_error (layer->conf, error, layer->group, key, "%s", msg);
  g_free (msg);
}

void
shoal_layer_error_nomem (const ShoalLayer *layer, GError **error, GError *local, const char *what)
{
  GError *placed = NULL;
  shoal_layer_error (layer, &placed, NULL, "%s: %s", what, local->message);
  g_set_error_literal (error, local->domain, local->code, placed->message);
  g_error_free (placed);
  g_error_free (local);
}

float *
shoal_layer_alloc_floats (const ShoalLayer *layer, size_t count, const char *what, GError **error)
{
  GError *local = NULL;
  float *p = shoal_try_alloc_floats (count, &local);
  if (p == NULL)
    shoal_layer_error_nomem (layer, error, local, what);
  return p;
}

gboolean
shoal_layer_alloc_tensor (const ShoalLayer *layer, ShoalTensor *t, const ShoalShape *shape,
                          const char *what, GError **error)
{
  GError *local = NULL;
  ShoalShape copy = *shape;  /* shape may point into t */
  if (shoal_tensor_try_alloc (t, &copy, &local))
    return TRUE;
  char *dims = shoal_shape_to_string (&copy);
  char *w = g_strdup_printf ("%s %s", what, dims);
  shoal_layer_error_nomem (layer, error, local, w);
  g_free (w);
  g_free (dims);
  return FALSE;
}

/* Reads <pname>_<suffix> as a float into *out when present. */
static void
param_key_float (const ShoalLayer *layer, const char *pname, const char *suffix, float *out)
{
  char *key = g_strconcat (pname, "_", suffix, NULL);
  GKeyFile *kf = shoal_conf_keyfile (layer->conf);
  if (g_key_file_has_key (kf, layer->group, key, NULL))
    {
      char *raw = g_key_file_get_value (kf, layer->group, key, NULL);
      *out = (float) g_ascii_strtod (g_strstrip (raw), NULL);
      g_free (raw);
    }
  g_free (key);
}

ShoalParam *
shoal_layer_declare_param (ShoalLayer *layer, const char *pname, const ShoalShape *shape,
                           int fan_in, int fan_out, const ShoalInitSpec *default_init,
                           GError **error)
{
  g_return_val_if_fail (layer != NULL && pname != NULL && shape != NULL && default_init != NULL, NULL);
  g_return_val_if_fail (shape->ndim >= 1 && shape->ndim <= SHOAL_MAX_DIMS, NULL);
  g_return_val_if_fail (layer->nparams < SHOAL_LAYER_MAX_PARAMS, NULL);
  ShoalInitSpec init = *default_init;
  float lr_scale = 1.0f, wd_scale = 1.0f;
  char *init_key = g_strconcat (pname, "_init", NULL);
  GKeyFile *kf = shoal_conf_keyfile (layer->conf);

  if (g_key_file_has_key (kf, layer->group, init_key, NULL))
    {
      char *name = g_strstrip (g_key_file_get_value (kf, layer->group, init_key, NULL));
      gboolean ok = shoal_init_kind_parse (name, &init.kind);
      if (!ok)
        shoal_layer_error (layer, error, init_key, "unknown initialiser '%s'", name);
      g_free (name);
      if (!ok)
        {
          g_free (init_key);
          return NULL;
        }
    }
  g_free (init_key);
  param_key_float (layer, pname, "value", &init.value);
  param_key_float (layer, pname, "mean", &init.mean);
  param_key_float (layer, pname, "std", &init.std);
  param_key_float (layer, pname, "low", &init.low);
  param_key_float (layer, pname, "high", &init.high);
  param_key_float (layer, pname, "lr_scale", &lr_scale);
  param_key_float (layer, pname, "wd_scale", &wd_scale);

  if ((init.kind == SHOAL_INIT_UNIFORM || init.kind == SHOAL_INIT_UNIFORM_SQRT_FAN_IN)
      && !(init.low < init.high))
    {
      char *key = g_strconcat (pname, "_low", NULL);
      shoal_layer_error (layer, error, key, "uniform init needs low < high (%g, %g)", init.low,
                         init.high);
      g_free (key);
      return NULL;
    }

  guint64 count = 1;
  for (int i = 0; i < shape->ndim; i++)
    count *= (guint64) MAX (shape->dim[i], 0);
  if (count == 0 || count > G_MAXINT32)
    {
      char *s = shoal_shape_to_string (shape);
      shoal_layer_error (layer, error, NULL, "param %s of %s is empty or holds more than 2^31 values",
                         pname, s);
      g_free (s);
      return NULL;
    }

  char *full = g_strconcat (layer->name, "/", pname, NULL);
  ShoalParam *p = shoal_param_store_declare (layer->store, full, shape, &init, fan_in, fan_out,
                                             lr_scale, wd_scale);
  g_free (full);
  layer->params[layer->nparams++] = p;
  return p;
}

ShoalParam *
shoal_layer_declare_statistic (ShoalLayer *layer, const char *pname, const ShoalShape *shape,
                               const ShoalInitSpec *default_init, GError **error)
{
  g_return_val_if_fail (layer != NULL && pname != NULL && shape != NULL && default_init != NULL, NULL);
  g_return_val_if_fail (shape->ndim >= 1 && shape->ndim <= SHOAL_MAX_DIMS, NULL);
  int c = (int) MIN (shoal_shape_count (shape), (size_t) G_MAXINT);
  ShoalParam *p = shoal_layer_declare_param (layer, pname, shape, c, c, default_init, error);
  if (p != NULL)
    {
      p->lr_scale = p->wd_scale = 0;
      p->statistic = TRUE;
    }
  return p;
}

gboolean
shoal_layer_param_range (const ShoalLayer *layer, size_t *begin, size_t *end)
{
  gboolean any = FALSE;
  for (int p = 0; p < layer->nparams; p++)
    {
      const ShoalParam *param = layer->params[p];
      if (param->statistic)
        continue;   /* in the store's tail, in no slice */
      if (!any)
        *begin = *end = param->offset;
      any = TRUE;
      *begin = MIN (*begin, param->offset);
      *end = MAX (*end, param->offset + param->count);
    }
  return any;
}

gboolean
shoal_layer_check_labels (const ShoalLayer *layer, GError **error)
{
  g_return_val_if_fail (layer != NULL, FALSE);
  if (layer->nsrcs < 2)
    {
      shoal_layer_error (layer, error, "src", "needs two sources, the scores and the layer carrying "
                         "their labels, not %d", layer->nsrcs);
      return FALSE;
    }
  const ShoalLayer *logits = layer->srcs[0], *labels = layer->srcs[1];
  if (labels->label.data == NULL)
    {
      shoal_layer_error (layer, error, "src", "source '%s' carries no labels", labels->name);
      return FALSE;
    }
  if (shoal_tensor_rows (&labels->label) != shoal_tensor_rows (&logits->out))
    {
      shoal_layer_error (layer, error, "src", "'%s' has %d rows but '%s' has %d labels",
                         logits->name, shoal_tensor_rows (&logits->out), labels->name,
                         shoal_tensor_rows (&labels->label));
      return FALSE;
    }
  return TRUE;
}

gboolean
shoal_layer_check_window (const ShoalLayer *layer, const char *key, const char *window, int h, int w,
                          int kh, int kw, int ph, int pw, GError **error)
{
  g_return_val_if_fail (layer != NULL && key != NULL && window != NULL, FALSE);
  gint64 ph_in = (gint64) h + 2 * (gint64) ph, pw_in = (gint64) w + 2 * (gint64) pw;
  if (ph_in < kh || pw_in < kw)
    {
      shoal_layer_error (layer, error, key, "%s %dx%d is larger than the padded input %" G_GINT64_FORMAT
                         "x%" G_GINT64_FORMAT, window, kh, kw, ph_in, pw_in);
      return FALSE;
    }
  if (ph_in > G_MAXINT || pw_in > G_MAXINT || ph_in * pw_in > G_MAXINT)
    {
      shoal_layer_error (layer, error, key, "the padded input %" G_GINT64_FORMAT "x%" G_GINT64_FORMAT
                         " (input %dx%d, padding %d, %d) has more than 2^31 - 1 positions",
                         ph_in, pw_in, h, w, ph, pw);
      return FALSE;
    }
  return TRUE;
}

gboolean
shoal_layer_check_step_labels (const ShoalLayer *layer, int *steps, int *classes, GError **error)
{
  g_return_val_if_fail (layer != NULL && steps != NULL && classes != NULL, FALSE);
  if (!shoal_layer_check_labels (layer, error))
    return FALSE;
  const ShoalLayer *logits = layer->srcs[0];
  int n = (int) shoal_tensor_row_size (&layer->srcs[1]->label);
  size_t width = shoal_tensor_row_size (&logits->out);
  if (n < 1 || width % (size_t) n != 0)
    {
      char *s = shoal_shape_to_string (&logits->out.shape);
      shoal_layer_error (layer, error, "src", "logits '%s' (%s) are not %d steps of classes, one per label of a row",
                         logits->name, s, n);
      g_free (s);
      return FALSE;
    }
  *steps = n;
  *classes = (int) (width / (size_t) n);
  return TRUE;
}

/* ---- accessors (what plugins use instead of the struct) ------------------- */

const char *
shoal_layer_name (const ShoalLayer *layer)
{
  g_return_val_if_fail (layer != NULL, NULL);
  return layer->name;
}

const ShoalLayerOps *
shoal_layer_ops (const ShoalLayer *layer)
{
  g_return_val_if_fail (layer != NULL, NULL);
  return layer->ops;
}

int
shoal_layer_n_srcs (const ShoalLayer *layer)
{
  g_return_val_if_fail (layer != NULL, 0);
  return layer->nsrcs;
}

ShoalLayer *
shoal_layer_src (const ShoalLayer *layer, int i)
{
  g_return_val_if_fail (layer != NULL, NULL);
  return i >= 0 && i < layer->nsrcs ? layer->srcs[i] : NULL;
}

ShoalTensor *
shoal_layer_src_out (const ShoalLayer *layer, int i)
{
  g_return_val_if_fail (layer != NULL, NULL);
  return i >= 0 && i < layer->nsrcs ? &layer->srcs[i]->out : NULL;
}

ShoalTensor *
shoal_layer_src_grad (const ShoalLayer *layer, int i)
{
  g_return_val_if_fail (layer != NULL, NULL);
  return i >= 0 && i < layer->nsrcs ? layer->src_grad[i] : NULL;
}

ShoalTensor *
shoal_layer_out (ShoalLayer *layer)
{
  g_return_val_if_fail (layer != NULL, NULL);
  return &layer->out;
}

ShoalTensor *
shoal_layer_grad (ShoalLayer *layer)
{
  g_return_val_if_fail (layer != NULL, NULL);
  return layer->grad.data != NULL ? &layer->grad : NULL;
}

ShoalTensor *
shoal_layer_label (ShoalLayer *layer)
{
  g_return_val_if_fail (layer != NULL, NULL);
  return layer->label.data != NULL ? &layer->label : NULL;
}

void
shoal_layer_set_out_shape (ShoalLayer *layer, const ShoalShape *shape)
{
  g_return_if_fail (layer != NULL && shape != NULL);
  g_return_if_fail (shape->ndim >= 0 && shape->ndim <= SHOAL_MAX_DIMS);
  /* setup only: once the net allocated the output for this shape, another
   * one would make forward write past it */
  g_return_if_fail (layer->out.data == NULL);
  layer->out.shape = *shape;
}

int
shoal_layer_n_params (const ShoalLayer *layer)
{
  g_return_val_if_fail (layer != NULL, 0);
  return layer->nparams;
}

ShoalParam *
shoal_layer_param (const ShoalLayer *layer, int i)
{
  g_return_val_if_fail (layer != NULL, NULL);
  return i >= 0 && i < layer->nparams ? layer->params[i] : NULL;
}

void *
shoal_layer_priv (ShoalLayer *layer)
{
  g_return_val_if_fail (layer != NULL, NULL);
  return layer->priv;
}

ShoalRng *
shoal_layer_rng (ShoalLayer *layer)
{
  g_return_val_if_fail (layer != NULL, NULL);
  return &layer->rng;
}

int
shoal_layer_loss_rows (const ShoalLayer *layer, int rows)
{
  int norm = layer->loss_norm > 0 ? layer->loss_norm : rows;
  return MAX (norm, 1);
}

float
shoal_layer_loss_scale (const ShoalLayer *layer, int rows)
{
  g_return_val_if_fail (layer != NULL, 0);
  return layer->loss_weight / (float) shoal_layer_loss_rows (layer, rows);
}

ShoalDevice
shoal_layer_device (const ShoalLayer *layer)
{
  g_return_val_if_fail (layer != NULL, (ShoalDevice) { 0 });
  return layer->ctx->device;
}

/* ---- registry ---------------------------------------------------------- */

#define SHOAL_LAYER_CPU_ONLY(type, why) SHOAL_LAYER (type)
#define SHOAL_LAYER(type) extern const ShoalLayerOps shoal_layer_##type##_ops;
#include "layers/layer_list.h"
#undef SHOAL_LAYER

#define SHOAL_LAYER(type) &shoal_layer_##type##_ops,
static const ShoalLayerOps *const builtin_layers[] = {
#include "layers/layer_list.h"
};
#undef SHOAL_LAYER
#undef SHOAL_LAYER_CPU_ONLY

/* The split layer is inserted by the net itself; confs cannot name it. */
extern const ShoalLayerOps shoal_layer_split_ops;

static GMutex registry_lock;
static GPtrArray *custom_layers;  /* const ShoalLayerOps * */

/* The registered type called `type`, or NULL; registry_lock held. */
static const ShoalLayerOps *
find_registered (const char *type)
{
  for (guint i = 0; custom_layers != NULL && i < custom_layers->len; i++)
    {
      const ShoalLayerOps *ops = g_ptr_array_index (custom_layers, i);
      if (strcmp (ops->type, type) == 0)
        return ops;
    }
  return NULL;
}

static const ShoalLayerOps *
find_builtin (const char *type)
{
  for (gsize i = 0; i < G_N_ELEMENTS (builtin_layers); i++)
    if (strcmp (builtin_layers[i]->type, type) == 0)
      return builtin_layers[i];
  return NULL;
}

const ShoalLayerOps *
shoal_layer_lookup (const char *type)
{
  g_return_val_if_fail (type != NULL, NULL);
  const ShoalLayerOps *found = find_builtin (type);
  if (found != NULL)
    return found;
  g_mutex_lock (&registry_lock);
  found = find_registered (type);
  g_mutex_unlock (&registry_lock);
  return found;
}

/* The partitioner writes a worker's share into ops->split's keys: they
 * must be options of the type, of a type it can write. */
static gboolean
split_keys_ok (const ShoalLayerOps *ops, const char **bad_key)
{
  const ShoalOption *units = ops->split.units_key != NULL
                               ? shoal_option_find (ops->options, ops->split.units_key) : NULL;
  const ShoalOption *rows = ops->split.rows_key != NULL
                              ? shoal_option_find (ops->options, ops->split.rows_key) : NULL;
  if (ops->split.units_key != NULL && (units == NULL || units->type != SHOAL_OPT_INT))
    *bad_key = ops->split.units_key;
  else if (ops->split.rows_key != NULL
           && (rows == NULL || (rows->type != SHOAL_OPT_INT && rows->type != SHOAL_OPT_INT_LIST)))
    *bad_key = ops->split.rows_key;
  else
    return TRUE;
  return FALSE;
}

gboolean
shoal_layer_register (const ShoalLayerOps *ops, GError **error)
{
  g_return_val_if_fail (ops != NULL, FALSE);
  if (ops->type == NULL || ops->type[0] == '\0' || ops->setup == NULL || ops->forward == NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL,
                   "layer ops need a type name, setup and forward");
      return FALSE;
    }
  if (ops->min_srcs < 0 || ops->max_srcs > SHOAL_LAYER_MAX_SRCS || ops->min_srcs > ops->max_srcs)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL,
                   "layer type '%s': sources must be within 0..%d", ops->type, SHOAL_LAYER_MAX_SRCS);
      return FALSE;
    }
  char *owner = g_strdup_printf ("layer type '%s'", ops->type);
  gboolean table_ok = shoal_option_table_check (ops->options, owner, error);
  g_free (owner);
  if (!table_ok)
    return FALSE;
  const char *bad_key = NULL;
  if (!split_keys_ok (ops, &bad_key))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL,
                   "layer type '%s': split key '%s' is not an option of the type (units: an int; "
                   "rows: an int or an int list)", ops->type, bad_key);
      return FALSE;
    }
  /* the check and the addition under one lock: of two threads registering
   * one name, one gets it and the other the error */
  g_mutex_lock (&registry_lock);
  gboolean taken = find_builtin (ops->type) != NULL || find_registered (ops->type) != NULL
                   || strcmp (ops->type, shoal_layer_split_ops.type) == 0;
  if (!taken)
    {
      if (custom_layers == NULL)
        custom_layers = g_ptr_array_new ();
      g_ptr_array_add (custom_layers, (gpointer) ops);
    }
  g_mutex_unlock (&registry_lock);
  if (taken)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "layer type '%s' is already registered", ops->type);
  return !taken;
}

static gint
compare_names (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

const char **
shoal_layer_types (void)
{
  GPtrArray *names = g_ptr_array_new ();
  for (gsize i = 0; i < G_N_ELEMENTS (builtin_layers); i++)
    g_ptr_array_add (names, (gpointer) builtin_layers[i]->type);
  g_mutex_lock (&registry_lock);
  for (guint i = 0; custom_layers != NULL && i < custom_layers->len; i++)
    g_ptr_array_add (names, (gpointer) ((const ShoalLayerOps *) g_ptr_array_index (custom_layers, i))->type);
  g_mutex_unlock (&registry_lock);
  g_ptr_array_sort (names, compare_names);
  g_ptr_array_add (names, NULL);
  return (const char **) g_ptr_array_free (names, FALSE);
}

/* ---- GPU paths registered by name ----------------------------------------- */

static GHashTable *gpu_paths;   /* type name -> const ShoalLayerGpuOps *, under registry_lock */

void
shoal_layer_register_gpu (const char *type, const ShoalLayerGpuOps *gpu)
{
  g_return_if_fail (type != NULL);
  g_mutex_lock (&registry_lock);
  if (gpu_paths == NULL)
    gpu_paths = g_hash_table_new (g_str_hash, g_str_equal);
  g_hash_table_insert (gpu_paths, (gpointer) type, (gpointer) gpu);
  g_mutex_unlock (&registry_lock);
}

const ShoalLayerGpuOps *
shoal_layer_gpu_ops (const ShoalLayerOps *ops)
{
  g_return_val_if_fail (ops != NULL, NULL);
  if (ops->gpu != NULL)
    return ops->gpu;
  g_mutex_lock (&registry_lock);
  const ShoalLayerGpuOps *gpu = gpu_paths != NULL ? g_hash_table_lookup (gpu_paths, ops->type) : NULL;
  g_mutex_unlock (&registry_lock);
  return gpu;
}
