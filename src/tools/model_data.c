/* What `shoal predict` and `shoal eval` share: a trained model of a job
 * whose input layer reads its test set from the data the user names (an
 * LMDB dataset, or a CSV file imported into a temporary one). */
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "core/error.h"
#include "data/import.h"
#include "layers/layer.h"
#include "tools/commands.h"
#include "job/job.h"

#include <shoal/plugin.h>

/* "layer NAME.test=DATA" for the conf's input layer whose type reads a
 * test set from a `test` key (lmdb_input and its kin); NULL with error
 * when there is none. */
static char *
test_override (const char *conf_path, const char *data, GError **error)
{
  ShoalConf *conf = shoal_conf_load_file (conf_path, error);
  if (conf == NULL)
    return NULL;
  char **groups = g_key_file_get_groups (shoal_conf_keyfile (conf), NULL);
  char *found = NULL;
  for (int i = 0; found == NULL && groups[i] != NULL; i++)
    {
      if (!g_str_has_prefix (groups[i], "layer "))
        continue;
      char *type = g_key_file_get_string (shoal_conf_keyfile (conf), groups[i], "type", NULL);
      const ShoalLayerOps *ops = type != NULL ? shoal_layer_lookup (g_strstrip (type)) : NULL;
      if (ops != NULL && (ops->flags & SHOAL_LAYER_INPUT) && shoal_option_find (ops->options, "test") != NULL)
        found = g_strdup_printf ("%s.test=%s", groups[i], data);
      g_free (type);
    }
  if (found == NULL)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                 "%s: no input layer reads a test set (a `test` key) for --data", conf_path);
  g_strfreev (groups);
  shoal_conf_free (conf);
  return found;
}

void
shoal_tool_model_add_options (GOptionContext *ctx, ShoalToolModelArgs *a)
{
  GOptionEntry entries[] = {
    { "from", 'f', 0, G_OPTION_ARG_FILENAME, &a->from,
      "the trained params: a run's workspace, or a file of shoal_net_save_params", "WORKSPACE" },
    { "data", 'd', 0, G_OPTION_ARG_FILENAME, &a->data,
      "the samples: an LMDB dataset (shoal import) or a .csv file (default: the conf's test set)",
      "DATA" },
    { "label-column", 0, 0, G_OPTION_ARG_INT, &a->label_column,
      "CSV data: 0-based column of the label, -1 for none (default 0)", "N" },
    { "header", 0, 0, G_OPTION_ARG_NONE, &a->skip_header, "CSV data: skip the first line", NULL },
    { "override", 'o', 0, G_OPTION_ARG_STRING_ARRAY, &a->overrides, "set a conf key",
      "SECTION.KEY=VALUE" },
    { "plugin", 'p', 0, G_OPTION_ARG_FILENAME_ARRAY, &a->plugins,
      "load a layer plugin first (repeatable; the conf's [job] plugins load too)", "LIB.so" },
    { "partial", 0, 0, G_OPTION_ARG_NONE, &a->partial,
      "load the params whose names the net has and ignore the rest (default: the params must be "
      "exactly the net's, or it is an error naming them)", NULL },
    { NULL, 0, 0, 0, NULL, NULL, NULL }
  };
  g_option_context_add_main_entries (ctx, entries, NULL);
}

void
shoal_tool_model_args_clear (ShoalToolModelArgs *a)
{
  g_clear_pointer (&a->from, g_free);
  g_clear_pointer (&a->data, g_free);
  g_clear_pointer (&a->overrides, g_strfreev);
  g_clear_pointer (&a->plugins, g_strfreev);
}

ShoalModel *
shoal_tool_model_open (const ShoalToolModelArgs *a, char **tmpdir, GError **error)
{
  *tmpdir = NULL;
  for (int i = 0; a->plugins != NULL && a->plugins[i] != NULL; i++)
    if (!shoal_plugin_load (a->plugins[i], error))
      {
        g_prefix_error (error, "--plugin: ");
        return NULL;
      }
  /* the job's plugins and data layers must be known to find the input */
  ShoalJob *job = shoal_job_load (a->conf, (const char *const *) a->overrides, error);
  if (job == NULL)
    return NULL;
  shoal_job_free (job);

  const char *data = a->data;
  if (data != NULL && g_str_has_suffix (data, ".csv"))
    {
      *tmpdir = g_dir_make_tmp ("shoal-data-XXXXXX", NULL);
      char *dir = g_build_filename (*tmpdir, "data", NULL);
      gboolean ok = shoal_import_csv (data, dir, a->label_column, a->skip_header, NULL, NULL, NULL, error);
      if (!ok)
        {
          g_free (dir);
          return NULL;
        }
      data = dir;
    }
  char *imported = data != a->data ? (char *) data : NULL;
  GPtrArray *all = g_ptr_array_new_with_free_func (g_free);
  for (int i = 0; a->overrides != NULL && a->overrides[i] != NULL; i++)
    g_ptr_array_add (all, g_strdup (a->overrides[i]));
  if (data != NULL)
    {
      char *o = test_override (a->conf, data, error);
      if (o == NULL)
        {
          g_ptr_array_free (all, TRUE);
          g_free (imported);
          return NULL;
        }
      g_ptr_array_add (all, o);
    }
  g_ptr_array_add (all, NULL);
  ShoalModelOptions mopts = { .overrides = (const char *const *) all->pdata, .output = a->output,
                              .probabilities = a->probabilities, .partial = a->partial };
  ShoalModel *m = shoal_model_load (a->conf, a->from, &mopts, error);
  g_ptr_array_free (all, TRUE);
  g_free (imported);
  return m;
}

/* Removes a directory tree of plain files (the imported dataset). */
static void
remove_tree (const char *path)
{
  GDir *dir = g_dir_open (path, 0, NULL);
  if (dir != NULL)
    {
      const char *name;
      while ((name = g_dir_read_name (dir)) != NULL)
        {
          char *child = g_build_filename (path, name, NULL);
          if (g_file_test (child, G_FILE_TEST_IS_DIR))
            remove_tree (child);
          else
            g_unlink (child);
          g_free (child);
        }
      g_dir_close (dir);
    }
  g_rmdir (path);
}

void
shoal_tool_model_cleanup (char *tmpdir)
{
  if (tmpdir != NULL)
    remove_tree (tmpdir);
  g_free (tmpdir);
}
