/* Params by name (named_params.h): what [job] init_from and `shoal
 * sample` read from workspaces, with renames and transposes so that a
 * decoder can start from its encoder's weights.  The blob's format is
 * core/param_blob.c's (shoal/param.h); the renames need each entry by
 * name, so this reads the entries itself. */
#include "job/named_params.h"

#include <stdarg.h>
#include <string.h>

#include "core/error.h"
#include "layers/layer.h"
#include "workspace/workspace.h"

/* Where one param of the store comes from. */
typedef struct {
  ShoalParam *param;
  char *source;        /* a param name of the blobs */
  gboolean transpose;
  char *group, *key;   /* the conf line that renamed it, or NULL */
  gboolean found;
} Target;

typedef struct {
  const char *name;    /* into the blob: valid while it lives */
  guint32 nlen;
  ShoalShape shape;
  guint64 count;
  const float *values; /* unaligned: memcpy */
} Entry;

/* The next entry at *q, or FALSE (*damaged set when it does not fit). */
static gboolean
next_entry (const guint8 **q, const guint8 *end, Entry *e, gboolean *damaged)
{
  guint32 ndim;
  *damaged = FALSE;
  if (*q == end)
    return FALSE;
  *damaged = TRUE;
  if ((gsize) (end - *q) < sizeof e->nlen)
    return FALSE;
  memcpy (&e->nlen, *q, sizeof e->nlen);
  *q += sizeof e->nlen;
  if ((gsize) (end - *q) < (gsize) e->nlen + sizeof ndim)
    return FALSE;
  e->name = (const char *) *q;
  *q += e->nlen;
  memcpy (&ndim, *q, sizeof ndim);
  *q += sizeof ndim;
  if (ndim > SHOAL_MAX_DIMS || (gsize) (end - *q) < ndim * sizeof (gint32) + sizeof e->count)
    return FALSE;
  e->shape = (ShoalShape) { .ndim = (int) ndim };
  for (guint32 d = 0; d < ndim; d++, *q += sizeof (gint32))
    memcpy (&e->shape.dim[d], *q, sizeof (gint32));
  memcpy (&e->count, *q, sizeof e->count);
  *q += sizeof e->count;
  if (e->count != shoal_shape_count (&e->shape) || (gsize) (end - *q) / sizeof (float) < e->count)
    return FALSE;
  e->values = (const float *) *q;
  *q += e->count * sizeof (float);
  *damaged = FALSE;
  return TRUE;
}

static void
targets_free (GArray *targets)
{
  for (guint i = 0; i < targets->len; i++)
    {
      Target *t = &g_array_index (targets, Target, i);
      g_free (t->source);
      g_free (t->group);
      g_free (t->key);
    }
  g_array_free (targets, TRUE);
}

/* Every param with its source name, from <param>_init_from keys. */
static GArray *
make_targets (ShoalParamStore *store, ShoalConf *conf)
{
  GArray *targets = g_array_new (FALSE, TRUE, sizeof (Target));
  GKeyFile *kf = conf != NULL ? shoal_conf_keyfile (conf) : NULL;
  for (guint i = 0; i < store->params->len; i++)
    {
      ShoalParam *prm = g_ptr_array_index (store->params, i);
      Target t = { .param = prm };
      const char *slash = strrchr (prm->name, '/');
      if (kf != NULL && slash != NULL)
        {
          char *layer = g_strndup (prm->name, (gsize) (slash - prm->name));
          char *group = g_strconcat ("layer ", layer, NULL);
          char *key = g_strconcat (slash + 1, "_init_from", NULL);
          char *value = g_key_file_get_value (kf, group, key, NULL);
          if (value != NULL && *g_strstrip (value) != '\0')
            {
              gsize len = strlen (value);
              t.transpose = len > 2 && strcmp (value + len - 2, "^T") == 0;
              t.source = t.transpose ? g_strndup (value, len - 2) : g_strdup (value);
              g_strstrip (t.source);
              t.group = group;
              t.key = key;
              group = key = NULL;
            }
          g_free (value);
          g_free (group);
          g_free (key);
          g_free (layer);
        }
      if (t.source == NULL)
        t.source = g_strdup (prm->name);
      g_array_append_val (targets, t);
    }
  return targets;
}

static void
init_error (ShoalConf *conf, const Target *t, GError **error, const char *fmt, ...) G_GNUC_PRINTF (4, 5);

static void
init_error (ShoalConf *conf, const Target *t, GError **error, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  char *msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  if (conf != NULL)
    shoal_conf_error (conf, error, t && t->group ? t->group : "job", t && t->key ? t->key : "init_from",
                      "%s", msg);
  else
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "%s", msg);
  g_free (msg);
}

/* Copies blob entry e into target t. */
static gboolean
copy_entry (ShoalParamStore *store, ShoalConf *conf, Target *t, const Entry *e, const char *ws,
            GError **error)
{
  ShoalParam *prm = t->param;
  ShoalShape want = prm->shape;
  if (t->transpose)
    {
      if (prm->shape.ndim != 2)
        {
          init_error (conf, t, error, "%s^T: only a 2-D param can be transposed; %s has %d dims",
                      t->source, prm->name, prm->shape.ndim);
          return FALSE;
        }
      want.dim[0] = prm->shape.dim[1];
      want.dim[1] = prm->shape.dim[0];
    }
  if (!shoal_shape_equal (&e->shape, &want))
    {
      char *a = shoal_shape_to_string (&e->shape), *b = shoal_shape_to_string (&prm->shape);
      if (t->transpose || strcmp (t->source, prm->name) != 0)
        init_error (conf, t, error, "param %s is %s in %s, but %s is %s here%s", t->source, a, ws, prm->name, b,
                    t->transpose ? " (before transposing)" : "");
      else
        init_error (conf, t, error, "param %s is %s in %s but %s here", prm->name, a, ws, b);
      g_free (a);
      g_free (b);
      return FALSE;
    }
  float *dst = store->values + prm->offset;
  if (!t->transpose)
    memcpy (dst, e->values, e->count * sizeof (float));
  else
    {
      const int rows = e->shape.dim[0], cols = e->shape.dim[1];
      for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
          memcpy (dst + (size_t) j * rows + i, e->values + (size_t) i * cols + j, sizeof (float));
    }
  t->found = TRUE;
  return TRUE;
}

gboolean
shoal_named_params_init (ShoalParamStore *store, ShoalConf *conf, const char *const *workspaces,
                         int *copied, GError **error)
{
  GArray *targets = make_targets (store, conf);
  /* source name -> GPtrArray of Target * (a blob param may start several) */
  GHashTable *by_source = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
                                                 (GDestroyNotify) g_ptr_array_unref);
  gboolean ok = TRUE;

  for (guint i = 0; i < targets->len; i++)
    {
      Target *t = &g_array_index (targets, Target, i);
      GPtrArray *list = g_hash_table_lookup (by_source, t->source);
      if (list == NULL)
        {
          list = g_ptr_array_new ();
          g_hash_table_insert (by_source, t->source, list);
        }
      g_ptr_array_add (list, t);
    }
  for (int w = 0; ok && workspaces != NULL && workspaces[w] != NULL; w++)
    {
      const char *ws = workspaces[w];
      GError *local = NULL;
      GBytes *blob = shoal_workspace_params_from (ws, &local);
      if (blob == NULL)
        {
          init_error (conf, NULL, error, "%s", local->message);
          g_error_free (local);
          ok = FALSE;
          break;
        }
      gsize len = 0;
      const guint8 *q = g_bytes_get_data (blob, &len), *end = q + len;
      if (len >= 16 && memcmp (q, "SHOALPRM", 8) == 0)
        q += 16;  /* the header: magic, version, count (shoal_param_store_to_bytes) */
      Entry e;
      gboolean damaged = FALSE;
      int used = 0;
      while (ok && next_entry (&q, end, &e, &damaged))
        {
          char *name = g_strndup (e.name, e.nlen);
          GPtrArray *list = g_hash_table_lookup (by_source, name);
          for (guint i = 0; ok && list != NULL && i < list->len; i++)
            {
              ok = copy_entry (store, conf, g_ptr_array_index (list, i), &e, ws, error);
              used++;
            }
          g_free (name);
        }
      g_bytes_unref (blob);
      if (ok && damaged)
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA, "%s: the checkpointed params are damaged", ws);
          ok = FALSE;
        }
      if (ok && used == 0)
        {
          init_error (conf, NULL, error, "%s has no param named like one of this net's", ws);
          ok = FALSE;
        }
    }
  int n = 0;
  for (guint i = 0; ok && i < targets->len; i++)
    {
      Target *t = &g_array_index (targets, Target, i);
      n += t->found;
      if (!t->found && t->key != NULL)
        {
          char *list = g_strjoinv (", ", (char **) workspaces);
          init_error (conf, t, error, "no param %s in %s", t->source, list);
          g_free (list);
          ok = FALSE;
        }
    }
  if (copied != NULL)
    *copied = n;
  g_hash_table_destroy (by_source);
  targets_free (targets);
  return ok;
}
