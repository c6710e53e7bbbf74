/* Job conf loading and validation on top of GKeyFile.
 *
 * GKeyFile knows no line numbers, so the loader scans the text once and
 * remembers where every group and key was written; errors then point at
 * "file:line".  Keys set with -o are remembered too, and errors about
 * them say "-o group.key" instead of a line. */
#include "core/conf.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

struct _ShoalConf {
  GKeyFile *keyfile;
  char *origin;
  GHashTable *lines;      /* "group\x1fkey" or "group\x1f" -> line (GINT_TO_POINTER) */
  GHashTable *overrides;  /* "group\x1fkey" -> TRUE */
};

static char *
line_key (const char *group, const char *key)
{
  return g_strconcat (group, "\x1f", key ? key : "", NULL);
}

static guint edit_distance (const char *a, const char *b);

/* The conf's layer whose name is nearest to name (2 edits at most), newly
 * allocated, or NULL. */
static char *
closest_layer (ShoalConf *conf, const char *name)
{
  char **groups = g_key_file_get_groups (conf->keyfile, NULL);
  char *best = NULL;
  guint best_d = 3;
  for (int i = 0; groups[i] != NULL; i++)
    if (g_str_has_prefix (groups[i], "layer "))
      {
        guint d = edit_distance (name, groups[i] + strlen ("layer "));
        if (d < best_d)
          {
            best_d = d;
            g_free (best);
            best = g_strdup (groups[i] + strlen ("layer "));
          }
      }
  g_strfreev (groups);
  return best;
}

/* GKeyFile silently merges a group written twice and keeps the last of a
 * key written twice; in a job conf both are copy-paste mistakes, so the
 * scan that records lines rejects them. */
static gboolean
index_lines (ShoalConf *conf, const char *text, GError **error)
{
  char **lines = g_strsplit (text, "\n", -1);
  char *group = NULL;
  gboolean ok = TRUE;

  for (int i = 0; ok && lines[i] != NULL; i++)
    {
      char *line = g_strstrip (lines[i]);
      if (line[0] == '\0' || line[0] == '#')
        continue;
      if (line[0] == '[')
        {
          char *end = strrchr (line, ']');
          g_free (group);
          group = end ? g_strndup (line + 1, (gsize) (end - line - 1)) : g_strdup (line + 1);
          int first = shoal_conf_line (conf, group, NULL);
          if (first != 0)
            {
              g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                           "%s:%d: [%s] section written twice (first at line %d)", conf->origin,
                           i + 1, group, first);
              ok = FALSE;
            }
          g_hash_table_insert (conf->lines, line_key (group, NULL), GINT_TO_POINTER (i + 1));
          continue;
        }
      char *eq = strchr (line, '=');
      if (group == NULL || eq == NULL)
        continue;
      *eq = '\0';
      const char *key = g_strstrip (line);
      int first = shoal_conf_line (conf, group, key);
      if (first != 0)
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                       "%s:%d: [%s] %s: set twice (first at line %d)", conf->origin, i + 1, group,
                       key, first);
          ok = FALSE;
        }
      g_hash_table_insert (conf->lines, line_key (group, key), GINT_TO_POINTER (i + 1));
    }
  g_free (group);
  g_strfreev (lines);
  return ok;
}

static ShoalConf *
conf_new (const char *origin)
{
  ShoalConf *conf = g_new0 (ShoalConf, 1);
  conf->keyfile = g_key_file_new ();
  /* every message starts with the origin: one without a name says what it is */
  conf->origin = g_strdup (origin != NULL ? origin : "conf text");
  conf->lines = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  conf->overrides = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  return conf;
}

ShoalConf *
shoal_conf_load_data (const char *text, const char *origin, GError **error)
{
  g_return_val_if_fail (text != NULL, NULL);
  ShoalConf *conf = conf_new (origin);
  GError *local = NULL;

  if (!g_key_file_load_from_data (conf->keyfile, text, (gsize) -1, G_KEY_FILE_NONE, &local))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "%s: %s", conf->origin, local->message);
      g_error_free (local);
      shoal_conf_free (conf);
      return NULL;
    }
  if (!index_lines (conf, text, error))
    {
      shoal_conf_free (conf);
      return NULL;
    }
  return conf;
}

ShoalConf *
shoal_conf_load_file (const char *path, GError **error)
{
  g_return_val_if_fail (path != NULL, NULL);
  char *text = NULL;
  if (!shoal_file_read (path, &text, NULL, error))
    return NULL;
  ShoalConf *conf = shoal_conf_load_data (text, path, error);
  g_free (text);
  return conf;
}

void
shoal_conf_free (ShoalConf *conf)
{
  if (conf == NULL)
    return;
  g_key_file_free (conf->keyfile);
  g_hash_table_destroy (conf->lines);
  g_hash_table_destroy (conf->overrides);
  g_free (conf->origin);
  g_free (conf);
}

GKeyFile *
shoal_conf_keyfile (ShoalConf *conf)
{
  return conf->keyfile;
}

const char *
shoal_conf_origin (ShoalConf *conf)
{
  g_return_val_if_fail (conf != NULL, NULL);
  return conf->origin;
}

/* A section or key name a key file holds as written: not empty, no line
 * break or other control character, no brackets. */
static gboolean
name_ok (const char *name)
{
  if (*name == '\0')
    return FALSE;
  for (const char *c = name; *c != '\0'; c++)
    if (g_ascii_iscntrl (*c) || *c == '[' || *c == ']')
      return FALSE;
  return TRUE;
}

gboolean
shoal_conf_override (ShoalConf *conf, const char *assignment, GError **error)
{
  g_return_val_if_fail (conf != NULL && assignment != NULL, FALSE);
  const char *eq = strchr (assignment, '=');
  if (eq == NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                   "-o %s: expected section.key=value", assignment);
      return FALSE;
    }
  char *left = g_strndup (assignment, (gsize) (eq - assignment));
  char *dot = strrchr (left, '.');
  if (dot == NULL || dot == left || dot[1] == '\0')
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                   "-o %s: expected section.key=value (a layer section is written 'layer NAME.key=value')",
                   assignment);
      g_free (left);
      return FALSE;
    }
  *dot = '\0';
  char *group = g_strstrip (left);
  char *key = g_strstrip (dot + 1);
  /* what a key file cannot hold: GLib would refuse the name with a
   * critical, and a line break in the value would add lines of its own to
   * the workspace's job.conf as run */
  const char *bad = !name_ok (group) ? "a section name" : !name_ok (key) ? "a key name"
                    : strpbrk (eq + 1, "\r\n") != NULL ? "a value" : NULL;
  if (bad != NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                   "-o %s: not %s a conf can hold (empty, a line break, '[' or ']')", assignment, bad);
      g_free (left);
      return FALSE;
    }
  /* a layer needs its type and sources: -o changes the conf's layers, a
   * layer it names that the conf lacks is a typo to report here, at -o */
  if (g_str_has_prefix (group, "layer ") && !g_key_file_has_group (conf->keyfile, group))
    {
      char *hint = closest_layer (conf, group + strlen ("layer "));
      char *also = hint != NULL ? g_strdup_printf (" (did you mean 'layer %s.%s'?)", hint, key) : g_strdup ("");
      g_free (hint);
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "-o %s.%s: %s has no [%s]%s", group, key,
                   conf->origin, group, also);
      g_free (also);
      g_free (left);
      return FALSE;
    }
  char *value = g_strstrip (g_strdup (eq + 1));
  g_key_file_set_value (conf->keyfile, group, key, value);
  g_hash_table_add (conf->overrides, line_key (group, key));
  g_free (value);
  g_free (left);
  return TRUE;
}

gboolean
shoal_conf_check_sections (ShoalConf *conf, GError **error)
{
  char **groups = g_key_file_get_groups (conf->keyfile, NULL);
  gboolean ok = TRUE;
  for (int i = 0; ok && groups[i] != NULL; i++)
    {
      const char *g = groups[i];
      if (strcmp (g, "job") == 0 || strcmp (g, "updater") == 0 || strcmp (g, "cluster") == 0
          || strcmp (g, "emulate") == 0 || strcmp (g, "tls") == 0 || g_str_has_prefix (g, "layer "))
        continue;
      shoal_conf_error (conf, error, g, NULL,
                        "unknown section (expected [job], [updater], [cluster], [emulate], [tls] or [layer NAME])");
      ok = FALSE;
    }
  g_strfreev (groups);
  return ok;
}

/* A key -o set in group, or NULL. */
static const char *
override_key_of (ShoalConf *conf, const char *group)
{
  GHashTableIter it;
  gpointer k;
  gsize n = strlen (group);
  g_hash_table_iter_init (&it, conf->overrides);
  while (g_hash_table_iter_next (&it, &k, NULL))
    if (strncmp (k, group, n) == 0 && ((const char *) k)[n] == '\x1f')
      return (const char *) k + n + 1;
  return NULL;
}

gboolean
shoal_conf_is_override (ShoalConf *conf, const char *group, const char *key)
{
  char *k = line_key (group, key);
  gboolean is = g_hash_table_contains (conf->overrides, k);
  g_free (k);
  return is;
}

int
shoal_conf_line (ShoalConf *conf, const char *group, const char *key)
{
  char *k = line_key (group, key);
  int line = GPOINTER_TO_INT (g_hash_table_lookup (conf->lines, k));
  g_free (k);
  return line;
}

void
shoal_conf_error (ShoalConf *conf, GError **error, const char *group, const char *key,
                  const char *format, ...)
{
  va_list ap;
  va_start (ap, format);
  char *msg = g_strdup_vprintf (format, ap);
  va_end (ap);

  char *where;
  char *k = line_key (group, key);
  const char *by = NULL;
  if (key != NULL && g_hash_table_contains (conf->overrides, k))
    where = g_strdup_printf ("-o %s.%s", group, key);
  else if (key == NULL && shoal_conf_line (conf, group, NULL) == 0
           && (by = override_key_of (conf, group)) != NULL)
    where = g_strdup_printf ("-o %s.%s", group, by);   /* a section only -o wrote */
  else
    {
      int line = key ? shoal_conf_line (conf, group, key) : 0;
      if (line == 0)
        line = shoal_conf_line (conf, group, NULL);
      where = line ? g_strdup_printf ("%s:%d", conf->origin, line) : g_strdup (conf->origin);
    }
  g_free (k);

  if (key != NULL)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "%s: [%s] %s: %s", where, group, key, msg);
  else
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "%s: [%s] %s", where, group, msg);
  g_free (where);
  g_free (msg);
}

const ShoalOption *
shoal_option_find (const ShoalOption *table, const char *key)
{
  for (; table != NULL && table->key != NULL; table++)
    if (strcmp (table->key, key) == 0)
      return table;
  return NULL;
}

static gboolean
parse_int (const char *text, gint64 *out)
{
  return g_ascii_string_to_signed (text, 10, G_MININT64, G_MAXINT64, out, NULL);
}

static gboolean
parse_float (const char *text, double *out)
{
  char *end = NULL;
  if (*text == '\0')
    return FALSE;
  *out = g_ascii_strtod (text, &end);
  return end != NULL && *end == '\0' && isfinite (*out);
}

static gboolean
parse_bool (const char *text, gboolean *out)
{
  if (g_ascii_strcasecmp (text, "true") == 0 || strcmp (text, "1") == 0
      || g_ascii_strcasecmp (text, "yes") == 0)
    *out = TRUE;
  else if (g_ascii_strcasecmp (text, "false") == 0 || strcmp (text, "0") == 0
           || g_ascii_strcasecmp (text, "no") == 0)
    *out = FALSE;
  else
    return FALSE;
  return TRUE;
}

static gboolean
bounded (const ShoalOption *opt)
{
  return opt->min <= opt->max;
}

/* Checks one scalar item of an option's type; item is already stripped. */
static gboolean
check_item (ShoalConf *conf, const char *group, const ShoalOption *opt, ShoalOptType type,
            const char *item, GError **error)
{
  double number = 0;
  switch (type)
    {
    case SHOAL_OPT_INT:
    case SHOAL_OPT_INT_LIST:
      {
        gint64 v;
        if (!parse_int (item, &v))
          {
            shoal_conf_error (conf, error, group, opt->key, "expected an integer, got '%s'", item);
            return FALSE;
          }
        number = (double) v;
        break;
      }
    case SHOAL_OPT_FLOAT:
    case SHOAL_OPT_FLOAT_LIST:
      if (!parse_float (item, &number))
        {
          shoal_conf_error (conf, error, group, opt->key, "expected a number, got '%s'", item);
          return FALSE;
        }
      break;
    case SHOAL_OPT_BOOL:
      {
        gboolean b;
        if (!parse_bool (item, &b))
          {
            shoal_conf_error (conf, error, group, opt->key, "expected true or false, got '%s'", item);
            return FALSE;
          }
        return TRUE;
      }
    case SHOAL_OPT_PATH:
    case SHOAL_OPT_STRING:
      if (opt->choices != NULL)
        {
          char **choices = g_strsplit (opt->choices, "|", -1);
          gboolean ok = g_strv_contains ((const char *const *) choices, item);
          g_strfreev (choices);
          if (!ok)
            {
              shoal_conf_error (conf, error, group, opt->key, "'%s' is not one of %s", item,
                                opt->choices);
              return FALSE;
            }
        }
      return TRUE;
    case SHOAL_OPT_STRING_LIST:
      if (*item == '\0')
        {
          shoal_conf_error (conf, error, group, opt->key, "empty item in list");
          return FALSE;
        }
      return TRUE;
    }
  if (bounded (opt) && (number < opt->min || number > opt->max))
    {
      shoal_conf_error (conf, error, group, opt->key, "%s is out of range [%.15g, %.15g]", item,
                        opt->min, opt->max);
      return FALSE;
    }
  return TRUE;
}

static gboolean
is_list (ShoalOptType type)
{
  return type == SHOAL_OPT_INT_LIST || type == SHOAL_OPT_FLOAT_LIST || type == SHOAL_OPT_STRING_LIST;
}

static gboolean
check_value (ShoalConf *conf, const char *group, const ShoalOption *opt, const char *raw,
             GError **error)
{
  char *value = g_strstrip (g_strdup (raw));
  gboolean ok = TRUE;

  if (is_list (opt->type))
    {
      char **items = g_strsplit (value, ",", -1);
      for (int i = 0; ok && items[i] != NULL; i++)
        ok = check_item (conf, group, opt, opt->type, g_strstrip (items[i]), error);
      g_strfreev (items);
    }
  else
    {
      if (*value == '\0' && opt->type != SHOAL_OPT_STRING && opt->type != SHOAL_OPT_PATH)
        {
          shoal_conf_error (conf, error, group, opt->key, "empty value");
          ok = FALSE;
        }
      else
        ok = check_item (conf, group, opt, opt->type, value, error);
    }
  g_free (value);
  return ok;
}

gboolean
shoal_option_table_check (const ShoalOption *table, const char *owner, GError **error)
{
  ShoalConf *conf = conf_new (owner);
  GError *local = NULL;
  for (const ShoalOption *opt = table; table != NULL && opt->key != NULL && local == NULL; opt++)
    {
      if (!name_ok (opt->key) || strchr (opt->key, '=') != NULL || (unsigned) opt->type > SHOAL_OPT_PATH)
        g_set_error (&local, SHOAL_ERROR, SHOAL_ERROR_INTERNAL, "%s: option '%s': %s", owner, opt->key,
                     (unsigned) opt->type > SHOAL_OPT_PATH ? "not a ShoalOptType" : "not a key name");
      else if (shoal_option_find (opt + 1, opt->key) != NULL)
        g_set_error (&local, SHOAL_ERROR, SHOAL_ERROR_INTERNAL, "%s: option '%s' is in the table twice",
                     owner, opt->key);
      else if (opt->default_value != NULL && !check_value (conf, "default", opt, opt->default_value, &local))
        {
          /* the default goes where the conf says nothing: it must be a value the conf could hold */
          local->code = SHOAL_ERROR_INTERNAL;
          g_prefix_error (&local, "%s: ", owner);
        }
    }
  shoal_conf_free (conf);
  if (local != NULL)
    {
      g_propagate_error (error, local);
      return FALSE;
    }
  return TRUE;
}

static const ShoalOption *
find_in_tables (const ShoalOption *const *tables, const char *key)
{
  for (int t = 0; tables[t] != NULL; t++)
    {
      const ShoalOption *opt = shoal_option_find (tables[t], key);
      if (opt != NULL)
        return opt;
    }
  return NULL;
}

/* Edit distance for "did you mean" hints. */
static guint
edit_distance (const char *a, const char *b)
{
  gsize la = strlen (a), lb = strlen (b);
  guint *row = g_new (guint, lb + 1);
  for (gsize j = 0; j <= lb; j++)
    row[j] = (guint) j;
  for (gsize i = 1; i <= la; i++)
    {
      guint diag = row[0];
      row[0] = (guint) i;
      for (gsize j = 1; j <= lb; j++)
        {
          guint up = row[j];
          guint best = MIN (row[j] + 1, row[j - 1] + 1);
          row[j] = MIN (best, diag + (a[i - 1] != b[j - 1]));
          diag = up;
        }
    }
  guint d = row[lb];
  g_free (row);
  return d;
}

static const char *
closest_key (const ShoalOption *const *tables, const char *key)
{
  const char *best = NULL;
  guint best_d = 3;
  for (int t = 0; tables[t] != NULL; t++)
    for (const ShoalOption *opt = tables[t]; opt->key != NULL; opt++)
      {
        guint d = edit_distance (key, opt->key);
        if (d < best_d)
          {
            best_d = d;
            best = opt->key;
          }
      }
  return best;
}

/* shoal_conf_get_string unescapes through GKeyFile, which refuses text
 * that is not UTF-8 (the getter returned NULL for it: found by
 * fuzz/fuzz_conf.c, lmdb_input passed the NULL path to stat) and reports
 * unknown escapes such as "\q" while still returning a string. */
static gboolean
check_string (ShoalConf *conf, const char *group, const char *key, GError **error)
{
  GError *local = NULL;
  char *s = g_key_file_get_string (conf->keyfile, group, key, &local);
  g_free (s);
  if (local == NULL)
    return TRUE;
  if (g_error_matches (local, G_KEY_FILE_ERROR, G_KEY_FILE_ERROR_UNKNOWN_ENCODING))
    shoal_conf_error (conf, error, group, key, "the value is not valid UTF-8 text");
  else
    shoal_conf_error (conf, error, group, key,
                      "the value holds an unknown escape sequence (known: \\s \\n \\t \\r \\\\)");
  g_error_free (local);
  return FALSE;
}

gboolean
shoal_conf_check_group (ShoalConf *conf, const char *group, const ShoalOption *const *tables,
                        ShoalConfKeyFilter accept_extra, gpointer user_data, GError **error)
{
  gsize nkeys = 0;
  char **keys = g_key_file_get_keys (conf->keyfile, group, &nkeys, NULL);
  gboolean ok = TRUE;

  for (gsize i = 0; ok && keys != NULL && i < nkeys; i++)
    {
      const ShoalOption *opt = find_in_tables (tables, keys[i]);
      if (opt == NULL)
        {
          if (accept_extra != NULL && accept_extra (keys[i], user_data))
            continue;
          const char *hint = closest_key (tables, keys[i]);
          if (hint != NULL)
            shoal_conf_error (conf, error, group, keys[i], "unknown key (did you mean '%s'?)", hint);
          else
            shoal_conf_error (conf, error, group, keys[i], "unknown key");
          ok = FALSE;
          break;
        }
      char *raw = g_key_file_get_value (conf->keyfile, group, keys[i], NULL);
      ok = check_value (conf, group, opt, raw, error);
      g_free (raw);
      if (ok && (opt->type == SHOAL_OPT_STRING || opt->type == SHOAL_OPT_PATH))
        ok = check_string (conf, group, keys[i], error);
    }
  g_strfreev (keys);

  for (int t = 0; ok && tables[t] != NULL; t++)
    for (const ShoalOption *opt = tables[t]; ok && opt->key != NULL; opt++)
      if (opt->default_value == NULL && !g_key_file_has_key (conf->keyfile, group, opt->key, NULL))
        {
          shoal_conf_error (conf, error, group, NULL, "missing required key '%s' (%s)", opt->key,
                            opt->help ? opt->help : "no default");
          ok = FALSE;
        }
  return ok;
}

/* The raw text of a key, or its default; NULL when neither. Newly allocated. */
static char *
raw_value (ShoalConf *conf, const char *group, const ShoalOption *table, const char *key,
           const ShoalOption **opt_out)
{
  const ShoalOption *opt = shoal_option_find (table, key);
  *opt_out = opt;
  if (opt == NULL)
    {
      /* a programmer's error (a layer asking for a key its type does not
       * declare): logged as GLib's preconditions are, the getter returns
       * its zero value */
      g_critical ("option '%s' is not in the table for [%s]", key, group);
      return NULL;
    }
  char *raw = g_key_file_get_value (conf->keyfile, group, key, NULL);
  if (raw == NULL)
    return opt->default_value ? g_strdup (opt->default_value) : NULL;
  return g_strstrip (raw);
}

gint64
shoal_conf_get_int (ShoalConf *conf, const char *group, const ShoalOption *table, const char *key)
{
  const ShoalOption *opt;
  char *raw = raw_value (conf, group, table, key, &opt);
  gint64 v = 0;
  if (raw != NULL && !parse_int (raw, &v))
    g_critical ("[%s] %s: '%s' was not validated", group, key, raw);
  g_free (raw);
  return v;
}

double
shoal_conf_get_float (ShoalConf *conf, const char *group, const ShoalOption *table, const char *key)
{
  const ShoalOption *opt;
  char *raw = raw_value (conf, group, table, key, &opt);
  double v = 0;
  if (raw != NULL && !parse_float (raw, &v))
    g_critical ("[%s] %s: '%s' was not validated", group, key, raw);
  g_free (raw);
  return v;
}

gboolean
shoal_conf_get_bool (ShoalConf *conf, const char *group, const ShoalOption *table, const char *key)
{
  const ShoalOption *opt;
  char *raw = raw_value (conf, group, table, key, &opt);
  gboolean v = FALSE;
  if (raw != NULL && !parse_bool (raw, &v))
    g_critical ("[%s] %s: '%s' was not validated", group, key, raw);
  g_free (raw);
  return v;
}

char *
shoal_conf_get_string (ShoalConf *conf, const char *group, const ShoalOption *table, const char *key)
{
  const ShoalOption *opt;
  char *raw = raw_value (conf, group, table, key, &opt);
  if (raw == NULL || !g_key_file_has_key (conf->keyfile, group, key, NULL))
    return raw;
  g_free (raw);
  char *s = g_key_file_get_string (conf->keyfile, group, key, NULL);
  return s ? g_strstrip (s) : NULL;
}

static char **
split_list (ShoalConf *conf, const char *group, const ShoalOption *table, const char *key, gsize *n)
{
  const ShoalOption *opt;
  char *raw = raw_value (conf, group, table, key, &opt);
  *n = 0;
  if (raw == NULL || *raw == '\0')
    {
      g_free (raw);
      return g_new0 (char *, 1);
    }
  char **items = g_strsplit (raw, ",", -1);
  g_free (raw);
  for (gsize i = 0; items[i] != NULL; i++)
    g_strstrip (items[i]);
  *n = g_strv_length (items);
  return items;
}

gint *
shoal_conf_get_int_list (ShoalConf *conf, const char *group, const ShoalOption *table,
                         const char *key, gsize *n)
{
  char **items = split_list (conf, group, table, key, n);
  gint *out = g_new0 (gint, *n + 1);
  for (gsize i = 0; i < *n; i++)
    {
      gint64 v = 0;
      parse_int (items[i], &v);
      out[i] = (gint) v;
    }
  g_strfreev (items);
  return out;
}

double *
shoal_conf_get_float_list (ShoalConf *conf, const char *group, const ShoalOption *table,
                           const char *key, gsize *n)
{
  char **items = split_list (conf, group, table, key, n);
  double *out = g_new0 (double, *n + 1);
  for (gsize i = 0; i < *n; i++)
    parse_float (items[i], &out[i]);
  g_strfreev (items);
  return out;
}

char **
shoal_conf_get_string_list (ShoalConf *conf, const char *group, const ShoalOption *table,
                            const char *key, gsize *n)
{
  return split_list (conf, group, table, key, n);
}
