/* shoal layers: every layer type with its keys, from the option tables,
 * those of plugins too (--plugin: what a plugin's author checks first). */
#include <glib.h>
#include <stdio.h>

#include <shoal/plugin.h>

#include "layers/layer.h"
#include "tools/commands.h"

static void
print_options (const ShoalOption *opt, const char *indent)
{
  for (; opt != NULL && opt->key != NULL; opt++)
    printf ("%s%-16s %s%s%s%s\n", indent, opt->key, opt->help ? opt->help : "",
            opt->default_value ? " [default: " : " [required", opt->default_value ? opt->default_value : "",
            "]");
}

int
shoal_cmd_layers (int argc, char **argv)
{
  char **plugins = NULL;
  GOptionEntry entries[] = {
    { "plugin", 'p', 0, G_OPTION_ARG_FILENAME_ARRAY, &plugins,
      "also list the layer types of this plugin (repeatable)", "LIB.so" },
    { NULL, 0, 0, 0, NULL, NULL, NULL }
  };
  GOptionContext *ctx = g_option_context_new ("- list layer types and their conf keys");
  g_option_context_add_main_entries (ctx, entries, NULL);
  GError *error = NULL;
  gboolean ok = g_option_context_parse (ctx, &argc, &argv, &error);
  g_option_context_free (ctx);
  if (ok && argc > 1)
    g_set_error (&error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED, "unexpected argument '%s'", argv[1]);
  int status = error != NULL ? 2 : 0;
  for (int i = 0; error == NULL && plugins != NULL && plugins[i] != NULL; i++)
    if (!shoal_plugin_load (plugins[i], &error))
      status = 1;
  g_strfreev (plugins);
  if (error != NULL)
    {
      fprintf (stderr, "shoal layers: %s\n", error->message);
      g_error_free (error);
      return status;
    }

  const char **types = shoal_layer_types ();
  printf ("keys of every [layer NAME]:\n");
  print_options (shoal_layer_common_options, "  ");
  printf ("\nper param P (e.g. weight_init): P_init, P_value, P_mean, P_std, P_low, P_high, "
          "P_lr_scale, P_wd_scale, P_init_from\n");
  for (int i = 0; types[i] != NULL; i++)
    {
      const ShoalLayerOps *ops = shoal_layer_lookup (types[i]);
      printf ("\n%s: %s\n", ops->type, ops->summary ? ops->summary : "");
      if (ops->param_names != NULL)
        {
          printf ("  params:");
          int n = 0;
          for (const char *const *p = ops->param_names; *p; p++, n++)
            if (n < 8)
              printf (" %s", *p);
          if (n > 8)
            printf (" ... (%d in all)", n);  /* a stacked recurrent layer's levels */
          printf ("\n");
        }
      print_options (ops->options, "  ");
    }
  g_free (types);
  return 0;
}
