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

/* The installed plugin directory relative to the library's own (the
 * Makefile's PLUGINDIR from LIBDIR): not a path compiled in, so an
 * installed tree that moves (DESTDIR, a relocated prefix) finds its
 * plugins where it is now. */
#ifndef SHOAL_PLUGIN_RELDIR
#define SHOAL_PLUGIN_RELDIR "shoal/plugins"
#endif

/* ---- SHOAL_PLUGIN_ABI and the layout it stands for ----------------------------
 * A plugin fills in these structs and passes them in: their size and
 * every field's offset are part of the plugin ABI.  The record below is
 * ABI 1's (LP64: x86_64, aarch64); a change to any of these structs stops
 * the build here until SHOAL_PLUGIN_ABI is raised and the record of the
 * new layout written beside it (print it with offsetof).  Plugins built
 * for another ABI are refused at load. */
#define ABI_SIZE(type, bytes) G_STATIC_ASSERT (sizeof (type) == (bytes))
#define ABI_FIELD(type, field, offset) G_STATIC_ASSERT (G_STRUCT_OFFSET (type, field) == (offset))
#if GLIB_SIZEOF_VOID_P == 8 && GLIB_SIZEOF_SIZE_T == 8
#if SHOAL_PLUGIN_ABI == 1
ABI_SIZE (ShoalLayerOps, 160);
ABI_FIELD (ShoalLayerOps, type, 0);
ABI_FIELD (ShoalLayerOps, summary, 8);
ABI_FIELD (ShoalLayerOps, flags, 16);
ABI_FIELD (ShoalLayerOps, split, 24);
ABI_FIELD (ShoalLayerOps, min_srcs, 56);
ABI_FIELD (ShoalLayerOps, max_srcs, 60);
ABI_FIELD (ShoalLayerOps, options, 64);
ABI_FIELD (ShoalLayerOps, param_names, 72);
ABI_FIELD (ShoalLayerOps, priv_size, 80);
ABI_FIELD (ShoalLayerOps, setup, 88);
ABI_FIELD (ShoalLayerOps, forward, 96);
ABI_FIELD (ShoalLayerOps, backward, 104);
ABI_FIELD (ShoalLayerOps, finalize, 112);
ABI_FIELD (ShoalLayerOps, num_records, 120);
ABI_FIELD (ShoalLayerOps, feed, 128);
ABI_FIELD (ShoalLayerOps, save_state, 136);
ABI_FIELD (ShoalLayerOps, load_state, 144);
ABI_FIELD (ShoalLayerOps, gpu, 152);
ABI_SIZE (ShoalSplitRule, 32);
ABI_FIELD (ShoalSplitRule, dims, 0);
ABI_FIELD (ShoalSplitRule, units_key, 8);
ABI_FIELD (ShoalSplitRule, rows_key, 16);
ABI_FIELD (ShoalSplitRule, refuse, 24);
ABI_SIZE (ShoalLayerGpuOps, 32);
ABI_FIELD (ShoalLayerGpuOps, setup, 0);
ABI_FIELD (ShoalLayerGpuOps, forward, 8);
ABI_FIELD (ShoalLayerGpuOps, backward, 16);
ABI_FIELD (ShoalLayerGpuOps, finalize, 24);
ABI_SIZE (ShoalOption, 56);
ABI_FIELD (ShoalOption, key, 0);
ABI_FIELD (ShoalOption, type, 8);
ABI_FIELD (ShoalOption, default_value, 16);
ABI_FIELD (ShoalOption, min, 24);
ABI_FIELD (ShoalOption, max, 32);
ABI_FIELD (ShoalOption, choices, 40);
ABI_FIELD (ShoalOption, help, 48);
ABI_SIZE (ShoalPluginInfo, 32);
ABI_FIELD (ShoalPluginInfo, abi, 0);
ABI_FIELD (ShoalPluginInfo, name, 8);
ABI_FIELD (ShoalPluginInfo, description, 16);
ABI_FIELD (ShoalPluginInfo, init, 24);
ABI_SIZE (ShoalShape, 20);
ABI_FIELD (ShoalShape, ndim, 0);
ABI_FIELD (ShoalShape, dim, 4);
ABI_SIZE (ShoalInitSpec, 24);
ABI_FIELD (ShoalInitSpec, kind, 0);
ABI_FIELD (ShoalInitSpec, value, 4);
ABI_FIELD (ShoalInitSpec, mean, 8);
ABI_FIELD (ShoalInitSpec, std, 12);
ABI_FIELD (ShoalInitSpec, low, 16);
ABI_FIELD (ShoalInitSpec, high, 20);
#else
#error "SHOAL_PLUGIN_ABI changed: record the new layout of the plugin structs here"
#endif
#endif
#undef ABI_SIZE
#undef ABI_FIELD

static GMutex plugins_lock;
static GHashTable *loaded;   /* resolved path -> TRUE, under plugins_lock */

/* The installed plugin directory of the libshoal this code is in (a new
 * string): SHOAL_PLUGIN_RELDIR beside the file the dynamic loader loaded
 * it from.  In a program linked with libshoal.a that is the program's
 * folder; such a program cannot load plugins anyway (same_library). */
static char *
shoal_plugin_dir (void)
{
  Dl_info where;
  if (dladdr ((void *) shoal_plugin_dir, &where) == 0 || where.dli_fname == NULL)
    return g_strdup (SHOAL_PLUGIN_RELDIR);
  char *lib_dir = g_path_get_dirname (where.dli_fname);
  char *joined = g_build_filename (lib_dir, SHOAL_PLUGIN_RELDIR, NULL);
  char *dir = g_canonicalize_filename (joined, NULL);
  g_free (joined);
  g_free (lib_dir);
  return dir;
}

/* A name without '/': the first file of that name in SHOAL_PLUGIN_PATH's
 * directories, then the installed plugin directory; else NULL.  Never
 * the working directory (as dlopen): a conf naming libx.so must not load
 * whatever file of that name the folder a run starts in holds. */
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
      char *dir = shoal_plugin_dir ();
      char *path = g_build_filename (dir, name, NULL);
      g_free (dir);
      if (g_file_test (path, G_FILE_TEST_IS_REGULAR))
        found = path;
      else
        g_free (path);
    }
  return found;
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
  if (path == NULL || !g_file_test (path, G_FILE_TEST_IS_REGULAR))
    {
      char *dir = strchr (name, '/') == NULL ? shoal_plugin_dir () : NULL;
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "plugin %s: no such file%s%s%s", name,
                   dir != NULL ? " (looked in SHOAL_PLUGIN_PATH and " : "", dir != NULL ? dir : "",
                   dir != NULL ? ")" : "");
      g_free (dir);
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
