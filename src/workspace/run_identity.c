/* Which run a workspace's checkpoints are; see workspace/run_identity.h. */
#include "workspace/run_identity.h"

#include <string.h>

#include "core/error.h"
#include "core/updater.h"

/* where a data layer reads: a dataset moved elsewhere is the same run */
static gboolean
data_path_key (const char *key)
{
  return strcmp (key, "train") == 0 || strcmp (key, "test") == 0 || strcmp (key, "data") == 0;
}

static gboolean
is_layer (const char *group)
{
  return g_str_has_prefix (group, "layer ");
}

gboolean
shoal_run_identity_is_model_key (const char *group, const char *key)
{
  if (is_layer (group))
    return !data_path_key (key) && strcmp (key, "batch_size") != 0;
  if (strcmp (group, "updater") == 0)
    return strcmp (key, "type") == 0;
  if (strcmp (group, "job") == 0)
    return strcmp (key, "alg") == 0 || strcmp (key, "cd_k") == 0;
  return FALSE;
}

gboolean
shoal_run_identity_may_change (const char *group, const char *key)
{
  static const char *const job[] = { "train_steps", "epochs", "test_freq", "test_steps", "disp_freq",
                                     "checkpoint_freq", "max_seconds", "metrics_interval", "threads", NULL };
  static const char *const cluster[] = { "heartbeat_interval", "heartbeat_timeout", "progress_timeout",
                                         "stop_timeout", "max_procs_per_core", "rpc_max_connections",
                                         "rpc_idle_timeout", "rpc_threads", NULL };
  if (is_layer (group))
    return data_path_key (key);
  if (strcmp (group, "updater") == 0)
    return strcmp (key, "type") != 0;
  if (strcmp (group, "job") == 0)
    return g_strv_contains (job, key);
  if (strcmp (group, "cluster") == 0)
    return g_strv_contains (cluster, key);
  return FALSE;
}

/* The value of [group] key as the job reads it, for comparing: stripped,
 * "(not set)" when absent; the updater's type by its kind (unset: sgd),
 * and [job] alg and cd_k with job/job.c's defaults where unset (bp; 1
 * Gibbs step under alg = cd), as the job takes them: a conf that writes
 * a default out is the same model as one that leaves it to the job. */
static char *
value_of (GKeyFile *kf, const char *group, const char *key)
{
  char *v = g_key_file_get_value (kf, group, key, NULL);
  gboolean updater_type = strcmp (group, "updater") == 0 && strcmp (key, "type") == 0;
  ShoalUpdaterKind kind = SHOAL_UPDATER_SGD;
  if (updater_type && (v == NULL || shoal_updater_kind_parse (g_strstrip (v), &kind)))
    {
      g_free (v);
      return g_strdup (shoal_updater_kind_name (kind));
    }
  if (v == NULL && strcmp (group, "job") == 0 && strcmp (key, "alg") == 0)
    return g_strdup ("bp");
  if (v == NULL && strcmp (group, "job") == 0 && strcmp (key, "cd_k") == 0)
    {
      char *alg = value_of (kf, "job", "alg");
      gboolean cd = strcmp (alg, "cd") == 0;
      g_free (alg);
      if (cd)
        return g_strdup ("1");
    }
  return v != NULL ? g_strstrip (v) : g_strdup ("(not set)");
}

/* The [layer] sections of kf in their order (g_ptr_array_unref). */
static GPtrArray *
layer_groups (GKeyFile *kf)
{
  GPtrArray *layers = g_ptr_array_new_with_free_func (g_free);
  char **groups = g_key_file_get_groups (kf, NULL);
  for (int i = 0; groups[i] != NULL; i++)
    if (is_layer (groups[i]))
      g_ptr_array_add (layers, g_strdup (groups[i]));
  g_strfreev (groups);
  return layers;
}

static int
by_name (gconstpointer a, gconstpointer b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

/* "[group]" and its model keys, sorted, as key=value lines */
static void
append_model_group (GString *text, GKeyFile *kf, const char *group, const char *const *forced)
{
  char **keys = g_key_file_get_keys (kf, group, NULL, NULL);
  GPtrArray *model = g_ptr_array_new ();
  for (int k = 0; keys != NULL && keys[k] != NULL; k++)
    if (shoal_run_identity_is_model_key (group, keys[k]) && (forced == NULL || !g_strv_contains (forced, keys[k])))
      g_ptr_array_add (model, keys[k]);
  /* keys the model has even where the conf leaves them out */
  for (int k = 0; forced != NULL && forced[k] != NULL; k++)
    g_ptr_array_add (model, (char *) forced[k]);
  g_ptr_array_sort (model, by_name);
  g_string_append_printf (text, "[%s]\n", group);
  for (guint k = 0; k < model->len; k++)
    {
      char *v = value_of (kf, group, model->pdata[k]);
      g_string_append_printf (text, "%s=%s\n", (char *) model->pdata[k], v);
      g_free (v);
    }
  g_ptr_array_free (model, TRUE);
  g_strfreev (keys);
}

char *
shoal_model_fingerprint (GKeyFile *conf)
{
  GString *text = g_string_new (NULL);
  GPtrArray *layers = layer_groups (conf);
  for (guint i = 0; i < layers->len; i++)
    append_model_group (text, conf, layers->pdata[i], NULL);
  static const char *const updater[] = { "type", NULL };
  static const char *const job[] = { "alg", "cd_k", NULL };
  append_model_group (text, conf, "updater", updater);
  append_model_group (text, conf, "job", job);
  g_ptr_array_unref (layers);
  char *out = shoal_fingerprint_of_text (text->str);
  g_string_free (text, TRUE);
  return out;
}

char *
shoal_fingerprint_of_text (const char *text)
{
  char *sum = g_compute_checksum_for_string (G_CHECKSUM_SHA256, text, -1);
  char *out = g_strndup (sum, 16);
  g_free (sum);
  return out;
}

/* The first key (in either conf) that may not change and differs;
 * FALSE when there is none. */
static gboolean
first_difference (GKeyFile *was, GKeyFile *now, char **group_out, char **key_out)
{
  GKeyFile *pair[2] = { was, now };
  gboolean found = FALSE;
  for (int side = 0; side < 2 && !found; side++)
    {
      char **groups = g_key_file_get_groups (pair[side], NULL);
      for (int g = 0; groups[g] != NULL && !found; g++)
        {
          char **keys = g_key_file_get_keys (pair[side], groups[g], NULL, NULL);
          for (int k = 0; keys != NULL && keys[k] != NULL && !found; k++)
            {
              if (shoal_run_identity_may_change (groups[g], keys[k]))
                continue;
              char *a = value_of (was, groups[g], keys[k]);
              char *b = value_of (now, groups[g], keys[k]);
              found = strcmp (a, b) != 0;
              if (found)
                {
                  *group_out = g_strdup (groups[g]);
                  *key_out = g_strdup (keys[k]);
                }
              g_free (a);
              g_free (b);
            }
          g_strfreev (keys);
        }
      g_strfreev (groups);
    }
  return found;
}

/* "fc1, fc2, loss": the layers' names in their order (g_free) */
static char *
layer_order (GPtrArray *layers)
{
  GString *s = g_string_new (NULL);
  for (guint i = 0; i < layers->len; i++)
    g_string_append_printf (s, "%s%s", i > 0 ? ", " : "", (char *) layers->pdata[i] + strlen ("layer "));
  return g_string_free (s, FALSE);
}

static gboolean
same_order (GPtrArray *a, GPtrArray *b)
{
  gboolean same = a->len == b->len;
  for (guint i = 0; same && i < a->len; i++)
    same = strcmp (a->pdata[i], b->pdata[i]) == 0;
  return same;
}

gboolean
shoal_run_identity_check (const char *workspace, const char *where, GKeyFile *was, GKeyFile *now, GError **error)
{
  char *group = NULL, *key = NULL;
  GPtrArray *layers_was = layer_groups (was), *layers_now = layer_groups (now);
  gboolean differs = first_difference (was, now, &group, &key);
  gboolean reordered = !differs && !same_order (layers_was, layers_now);
  if (differs || reordered)
    {
      gboolean model = reordered || shoal_run_identity_is_model_key (group, key);
      char *fp_was = shoal_model_fingerprint (was), *fp_now = shoal_model_fingerprint (now);
      char *a = reordered ? layer_order (layers_was) : value_of (was, group, key);
      char *b = reordered ? layer_order (layers_now) : value_of (now, group, key);
      char *what = reordered ? g_strdup ("the [layer] sections are in another order:")
                             : g_strdup_printf ("[%s] %s is", group, key);
      char *fingerprints = model ? g_strdup_printf ("model fingerprint %s there, %s in this job; ", fp_was, fp_now)
                                 : g_strdup ("");
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                   "%s: cannot resume: its checkpoints belong to another %s: %s %s in %s, %s in this job (%s--resume "
                   "continues only the same model, data and layout: put %s back as it was, or start this job "
                   "without --resume, or in another --workspace)",
                   workspace, model ? "model" : "run", what, a, where, b, fingerprints,
                   reordered ? "the sections" : "it");
      g_free (fingerprints);
      g_free (what);
      g_free (a);
      g_free (b);
      g_free (fp_was);
      g_free (fp_now);
    }
  g_free (group);
  g_free (key);
  g_ptr_array_unref (layers_was);
  g_ptr_array_unref (layers_now);
  return !(differs || reordered);
}
