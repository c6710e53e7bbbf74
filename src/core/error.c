#include "core/error.h"

G_DEFINE_QUARK (shoal-error-quark, shoal_error)

gboolean
shoal_file_read (const char *path, char **text, gsize *length, GError **error)
{
  GError *local = NULL;
  if (g_file_get_contents (path, text, length, &local))
    return TRUE;
  g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s", local->message);
  g_error_free (local);
  return FALSE;
}
