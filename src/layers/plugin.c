/* Loading plugins (shoal/plugin.h): shared libraries that register layer
 * types, opened with GModule.  A loaded plugin stays loaded (its ops
 * tables must outlive every net), and a file is loaded once per process,
 * by its resolved path, however it was named. */
#include <shoal/plugin.h>
#include <shoal/version.h>

#include <dlfcn.h>
#include <string.h>

#include "core/error.h"
#include "layers/layer.h"

#ifndef SHOAL_PLUGIN_DIR
#define SHOAL_PLUGIN_DIR "/usr/local/lib/shoal/plugins"
#endif

static GMutex plugins_lock;
static GHashTable *loaded;   /* resolved path -> TRUE, under plugins_lock */

/* A name without '/': the first file of that name in SHOAL_PLUGIN_PATH's
 * directories, then the installed plugin directory; else the name as it
 * is (relative to the working directory). */
static char *
find_plugin (const char *name)
{
  if (strchr (name, '/') != NULL)
    return g_strdup (name);
  const char *env = g_getenv ("SHOAL_PLUGIN_PATH");
  char **dirs = g_strsplit (env != NULL ? env : "", ":", -1);
  char *found = NULL;
  for (int i = 0; found == NULL && dirs[i] != NULL; i++)
    {
      if (*dirs[i] == '\0')
        continue;
      char *path = g_build_filename (dirs[i], name, NULL);
      if (g_file_test (path, G_FILE_TEST_IS_REGULAR))
        found = path;
      else
        g_free (path);
    }
  g_strfreev (dirs);
  if (found == NULL)
    {
      char *path = g_build_filename (SHOAL_PLUGIN_DIR, name, NULL);
      if (g_file_test (path, G_FILE_TEST_IS_REGULAR))
        found = path;
      else
        g_free (path);
    }
  return found != NULL ? found : g_strdup (name);
}

/* A plugin links libshoal.so.  A program linked with libshoal.a has a
 * copy of its own: the plugin would then bring a second one and register
 * its types into that copy's registry, where the program never looks.
 * The plugin's own dependencies say which copy it calls. */
static gboolean
same_library (GModule *module, char **other)
{
  gpointer theirs = NULL;
  if (!g_module_symbol (module, "shoal_plugin_load", &theirs) || theirs == NULL
      || theirs == (gpointer) shoal_plugin_load)
    return TRUE;
  Dl_info where;
  *other = g_strdup (dladdr (theirs, &where) != 0 && where.dli_fname != NULL ? where.dli_fname : "?");
  return FALSE;
}

gboolean
shoal_plugin_load (const char *name, GError **error)
{
  g_return_val_if_fail (name != NULL, FALSE);
  char *path = find_plugin (name);
  if (!g_file_test (path, G_FILE_TEST_IS_REGULAR))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "plugin %s: no such file%s", name,
                   strchr (name, '/') == NULL ? " (looked in SHOAL_PLUGIN_PATH and " SHOAL_PLUGIN_DIR ")" : "");
      g_free (path);
      return FALSE;
    }
  char *resolved = realpath (path, NULL);
  char *key = g_strdup (resolved != NULL ? resolved : path);
  free (resolved);
  g_free (path);

  g_mutex_lock (&plugins_lock);
  if (loaded == NULL)
    loaded = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  if (g_hash_table_contains (loaded, key))
    {
      g_mutex_unlock (&plugins_lock);
      g_free (key);
      return TRUE;
    }

  gboolean ok = FALSE, ran_init = FALSE;
  GModule *module = g_module_open (key, G_MODULE_BIND_LAZY | G_MODULE_BIND_LOCAL);
  gpointer symbol = NULL;
  char *other = NULL;
  if (module == NULL)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "plugin %s: cannot load: %s", key, g_module_error ());
  else if (!g_module_symbol (module, "shoal_plugin_info", &symbol) || symbol == NULL)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_UNSUPPORTED,
                 "plugin %s: not a shoal plugin (it has no shoal_plugin_info: see shoal/plugin.h)", key);
  else if (!same_library (module, &other))
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_UNSUPPORTED,
                 "plugin %s: it calls another copy of libshoal (%s) than this program's: a program "
                 "linked with libshoal.a cannot load plugins, link it with libshoal.so", key, other);
  else
    {
      const ShoalPluginInfo *info = symbol;
      if (info->abi != SHOAL_PLUGIN_ABI)
        g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_UNSUPPORTED,
                     "plugin %s: built for plugin ABI %u, this shoal (%s) has ABI %u: rebuild it", key,
                     info->abi, SHOAL_VERSION_STRING, SHOAL_PLUGIN_ABI);
      else if (info->init == NULL)
        g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_UNSUPPORTED, "plugin %s: no init function", key);
      else
        {
          GError *local = NULL;
          ran_init = TRUE;
          ok = info->init (&local);
          if (!ok)
            {
              g_set_error (error, local != NULL ? local->domain : SHOAL_ERROR,
                           local != NULL ? local->code : SHOAL_ERROR_INTERNAL, "plugin %s (%s): %s", key,
                           info->name != NULL ? info->name : "?",
                           local != NULL ? local->message : "its init failed without saying why");
              g_clear_error (&local);
            }
          else
            g_debug ("plugin %s (%s) loaded", key, info->name != NULL ? info->name : "?");
        }
    }
  if (ran_init)
    /* whatever its init registered points into it, even after a failure */
    g_module_make_resident (module);
  if (ok)
    {
      g_hash_table_add (loaded, key);
      key = NULL;
    }
  if (module != NULL && !ran_init)
    g_module_close (module);
  g_mutex_unlock (&plugins_lock);
  g_free (other);
  g_free (key);
  return ok;
}
