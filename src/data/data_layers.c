/* Registers the data module's layer types; see data/data_layers.h. */
#include "data/data_layers.h"

static const ShoalLayerOps *const data_layers[] = {
  &shoal_layer_lmdb_input_ops,
  &shoal_layer_text_input_ops,
};

void
shoal_data_register_layers (void)
{
  static gsize done;

  if (!g_once_init_enter (&done))
    return;
  for (gsize i = 0; i < G_N_ELEMENTS (data_layers); i++)
    {
      GError *error = NULL;
      /* a failure is a programming error of this table (the names are ours) */
      if (!shoal_layer_register (data_layers[i], &error))
        g_critical ("data layers: %s", error->message);
      g_clear_error (&error);
    }
  g_once_init_leave (&done, 1);
}

/* Loading the module (the shared library, or this object in a static
 * link) makes its types available, like the built-in ones. */
__attribute__ ((constructor)) static void
data_layers_load (void)
{
  shoal_data_register_layers ();
}
