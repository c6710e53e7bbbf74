/* bench helper: writes the params a shoal run saved in WORKSPACE (the
 * newest checkpoint's blob, shoal/param.h) to FILE, for bench/rnn_torch.py
 * --init-from.  Usage: params_blob WORKSPACE FILE */
#include <glib.h>
#include <stdio.h>

#include "workspace/workspace.h"

int
main (int argc, char **argv)
{
  GError *error = NULL;
  if (argc != 3)
    {
      fprintf (stderr, "usage: params_blob WORKSPACE FILE\n");
      return 2;
    }
  GBytes *blob = shoal_workspace_params (argv[1], NULL, &error);
  gsize n = 0;
  const void *data = blob != NULL ? g_bytes_get_data (blob, &n) : NULL;
  if (blob == NULL || !g_file_set_contents (argv[2], data, (gssize) n, &error))
    {
      fprintf (stderr, "params_blob: %s\n", error->message);
      return 1;
    }
  g_bytes_unref (blob);
  return 0;
}
