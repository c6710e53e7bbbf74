/* Params by name as bytes; the format is in shoal/param.h. Blobs written
 * before the header existed (the records alone, no magic) load too. */
#include "core/param.h"

#include <string.h>

#include "core/error.h"

#define MAGIC "SHOALPRM"
#define VERSION 1u

#if G_BYTE_ORDER != G_LITTLE_ENDIAN
#error "param blobs are written in host byte order, which must be little-endian"
#endif

/* Every param, or the statistics alone. */
static GBytes *
to_bytes (const ShoalParamStore *store, gboolean statistics_only)
{
  GByteArray *b = g_byte_array_new ();
  guint32 version = VERSION, n = 0;
  for (guint i = 0; i < store->params->len; i++)
    n += !statistics_only || ((ShoalParam *) g_ptr_array_index (store->params, i))->statistic;
  g_byte_array_append (b, (const guint8 *) MAGIC, 8);
  g_byte_array_append (b, (guint8 *) &version, sizeof version);
  g_byte_array_append (b, (guint8 *) &n, sizeof n);
  for (guint i = 0; i < store->params->len; i++)
    {
      ShoalParam *prm = g_ptr_array_index (store->params, i);
      if (statistics_only && !prm->statistic)
        continue;
      guint32 nlen = (guint32) strlen (prm->name), ndim = (guint32) prm->shape.ndim;
      guint64 count = prm->count;
      g_byte_array_append (b, (guint8 *) &nlen, sizeof nlen);
      g_byte_array_append (b, (guint8 *) prm->name, nlen);
      g_byte_array_append (b, (guint8 *) &ndim, sizeof ndim);
      for (int d = 0; d < prm->shape.ndim; d++)
        {
          gint32 dim = prm->shape.dim[d];
          g_byte_array_append (b, (guint8 *) &dim, sizeof dim);
        }
      g_byte_array_append (b, (guint8 *) &count, sizeof count);
      /* the host store, also for a GPU net (whose views are on the device) */
      g_byte_array_append (b, (guint8 *) (store->values + prm->offset), (guint) (count * sizeof (float)));
    }
  return g_byte_array_free_to_bytes (b);
}

GBytes *
shoal_param_file_read (const char *path, GError **error)
{
  char *data = NULL;
  gsize len = 0;
  if (!shoal_file_read (path, &data, &len, error))
    return NULL;
  return g_bytes_new_take (data, len);
}

GBytes *
shoal_param_store_to_bytes (const ShoalParamStore *store)
{
  g_return_val_if_fail (store != NULL, NULL);
  return to_bytes (store, FALSE);
}

GBytes *
shoal_param_store_statistics_to_bytes (const ShoalParamStore *store)
{
  return to_bytes (store, TRUE);
}

/* A reader over the blob's bytes; every take checks what is left. */
typedef struct {
  const guint8 *p, *end;
} Reader;

static gboolean
take (Reader *r, void *dst, gsize n)
{
  if ((gsize) (r->end - r->p) < n)
    return FALSE;
  if (dst != NULL)
    memcpy (dst, r->p, n);
  r->p += n;
  return TRUE;
}

static gboolean
damaged (GError **error, const char *origin, const char *what)
{
  g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA, "%s: the params are damaged (%s)", origin, what);
  return FALSE;
}

gboolean
shoal_param_store_load_bytes (ShoalParamStore *store, GBytes *blob, const char *origin,
                              ShoalParamsMatch match, int *copied_out, GError **error)
{
  g_return_val_if_fail (store != NULL && blob != NULL, FALSE);
  gsize len = 0;
  const guint8 *data = g_bytes_get_data (blob, &len);
  Reader r = { data, data + len };
  gint64 expected = -1;      /* params the header announces; -1: an old blob without one */
  if (len >= 8 && memcmp (data, MAGIC, 8) == 0)
    {
      guint32 version, n;
      r.p += 8;
      if (!take (&r, &version, sizeof version) || !take (&r, &n, sizeof n))
        return damaged (error, origin, "header cut short");
      if (version != VERSION)
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                       "%s: params of format version %u; this shoal reads version %u", origin,
                       version, VERSION);
          return FALSE;
        }
      expected = n;
    }

  GHashTable *seen = g_hash_table_new (g_str_hash, g_str_equal);
  GPtrArray *strangers = g_ptr_array_new_with_free_func (g_free);  /* names the store has not */
  int copied = 0;
  gint64 read = 0;
  gboolean ok = TRUE;
  while (ok && r.p < r.end)
    {
      guint32 nlen, ndim = 0;
      guint64 count;
      ShoalShape shape = { 0 };
      if (!take (&r, &nlen, sizeof nlen) || (gsize) (r.end - r.p) < nlen)
        {
          ok = damaged (error, origin, "a name cut short");
          break;
        }
      char *name = g_strndup ((const char *) r.p, nlen);
      r.p += nlen;
      if (!take (&r, &ndim, sizeof ndim) || ndim > SHOAL_MAX_DIMS)
        ok = damaged (error, origin, "a shape cut short or of too many dims");
      shape.ndim = (int) ndim;
      for (guint32 d = 0; ok && d < ndim; d++)
        ok = (take (&r, &shape.dim[d], sizeof (gint32)) && shape.dim[d] > 0)
             || damaged (error, origin, "a shape cut short or not positive");
      if (ok && (!take (&r, &count, sizeof count) || count != shoal_shape_count (&shape)
                 || (gsize) (r.end - r.p) / sizeof (float) < count))
        ok = damaged (error, origin, "values cut short or not what the shape holds");
      ShoalParam *prm = ok ? shoal_param_store_find (store, name) : NULL;
      if (prm != NULL && !shoal_shape_equal (&prm->shape, &shape))
        {
          char *a = shoal_shape_to_string (&shape), *b = shoal_shape_to_string (&prm->shape);
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_SHAPE, "param %s is %s in %s but %s here",
                       name, a, origin, b);
          g_free (a);
          g_free (b);
          ok = FALSE;
        }
      else if (prm != NULL)
        {
          memcpy (store->values + prm->offset, r.p, count * sizeof (float));
          g_hash_table_add (seen, prm->name);
          copied++;
        }
      else if (ok)
        g_ptr_array_add (strangers, g_strdup (name));
      if (ok)
        {
          r.p += count * sizeof (float);
          read++;
        }
      g_free (name);
    }
  if (ok && expected >= 0 && read != expected)
    ok = damaged (error, origin, "fewer params than its header says");
  if (ok && match == SHOAL_PARAMS_EXACT && strangers->len > 0)
    {
      /* the first few by name: a conf of fewer layers than the params' model */
      GString *names = g_string_new (NULL);
      for (guint i = 0; i < MIN (strangers->len, 4u); i++)
        g_string_append_printf (names, "%s%s", i > 0 ? ", " : "", (char *) g_ptr_array_index (strangers, i));
      if (strangers->len > 4)
        g_string_append_printf (names, " and %u more", strangers->len - 4);
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                   "%s holds %u param%s this net has not (%s): they are another model's", origin,
                   strangers->len, strangers->len == 1 ? "" : "s", names->str);
      g_string_free (names, TRUE);
      ok = FALSE;
    }
  if (ok && (match == SHOAL_PARAMS_BY_NAME_ALL || match == SHOAL_PARAMS_EXACT))
    for (guint i = 0; ok && i < store->params->len; i++)
      {
        ShoalParam *prm = g_ptr_array_index (store->params, i);
        if (!g_hash_table_contains (seen, prm->name))
          {
            g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                         "param %s is not in %s (%d of this net's %u params are): "
                         "they are another model's", prm->name, origin, copied, store->params->len);
            ok = FALSE;
          }
      }
  if (ok && copied == 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA, "%s has no param named like one of this net's",
                   origin);
      ok = FALSE;
    }
  g_hash_table_destroy (seen);
  g_ptr_array_free (strangers, TRUE);
  if (copied_out != NULL)
    *copied_out = copied;
  return ok;
}
