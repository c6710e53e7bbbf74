/* Plugins: layer types in a shared library of their own, loaded at run
 * time with GModule by `[job] plugins = libmylayer.so, ...` or
 * `shoal run --plugin libmylayer.so` (in every process of a job), or by
 * shoal_plugin_load.
 *
 * A plugin defines its ops tables as any layer type does and exports
 * its description once:
 *
 *   static gboolean
 *   swish_init (GError **error)
 *   {
 *     return shoal_layer_register (&swish_ops, error);
 *   }
 *   SHOAL_PLUGIN_DEFINE ("swish", "x * sigmoid(x)", swish_init);
 *
 * and is built against the installed library:
 *   cc -shared -fPIC -o libswish.so swish.c $(pkg-config --cflags --libs shoal)
 * examples/custom-layer is such a plugin, with its test. */
#ifndef SHOAL_PUBLIC_PLUGIN_H
#define SHOAL_PUBLIC_PLUGIN_H

#include <glib.h>
#include <gmodule.h>

G_BEGIN_DECLS

/* The plugin ABI of these headers: it changes whenever ShoalLayerOps or
 * another table a plugin fills in changes layout.  A plugin built with
 * another one is refused. */
#define SHOAL_PLUGIN_ABI 1

typedef struct {
  guint abi;                          /* SHOAL_PLUGIN_ABI of the headers it was built with */
  const char *name;                   /* for messages: "swish" */
  const char *description;            /* one line */
  gboolean (*init) (GError **error);  /* registers the plugin's types */
} ShoalPluginInfo;

/* In a plugin, once: the exported symbol the loader looks for.  Declared
 * extern (and exported) before it is defined: a const of C++ would
 * otherwise have internal linkage and the plugin export nothing, and C's
 * -Wmissing-variable-declarations would warn. */
#define SHOAL_PLUGIN_DEFINE(name, description, init)                          \
  G_MODULE_EXPORT extern const ShoalPluginInfo shoal_plugin_info;             \
  const ShoalPluginInfo shoal_plugin_info = { SHOAL_PLUGIN_ABI, (name), (description), (init) }

/* Loads the plugin at `path` and runs its init.  A path without '/' is
 * looked for in the directories of SHOAL_PLUGIN_PATH (':'-separated),
 * then in shoal's installed plugin directory, never in the working
 * directory (write ./libx.so for that).  Loading the same file
 * again does nothing.  The library stays loaded for the life of the
 * process.  FALSE with:
 *  - SHOAL_ERROR_IO: no such file, or it cannot be loaded (the dynamic
 *    loader's message: a missing symbol, not a shared object);
 *  - SHOAL_ERROR_UNSUPPORTED: it is not a shoal plugin (no
 *    shoal_plugin_info), was built for another plugin ABI, or calls
 *    another copy of libshoal than the caller (a program linked with
 *    libshoal.a cannot load plugins: link it with libshoal.so);
 *  - its init's error, e.g. SHOAL_ERROR_CONF "layer type 'x' is already
 *    registered", or SHOAL_ERROR_INTERNAL when the init failed without
 *    setting one. */
gboolean shoal_plugin_load (const char *path, GError **error);

G_END_DECLS

#endif
