/* shoal layers: every layer type with its keys, from the option tables. */
#include <glib.h>
#include <stdio.h>

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
  (void) argc;
  (void) argv;
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
