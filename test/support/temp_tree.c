/* Removing the temporary folders tests make; see temp_tree.h. */
#include "temp_tree.h"

#include <glib/gstdio.h>

gboolean
shoal_test_remove_tree (const char *path)
{
  /* g_file_test follows links: a link to a folder must not be entered */
  GDir *dir = g_file_test (path, G_FILE_TEST_IS_DIR) && !g_file_test (path, G_FILE_TEST_IS_SYMLINK)
                ? g_dir_open (path, 0, NULL) : NULL;
  if (dir != NULL)
    {
      const char *name;
      while ((name = g_dir_read_name (dir)) != NULL)
        {
          char *child = g_build_filename (path, name, NULL);
          shoal_test_remove_tree (child);
          g_free (child);
        }
      g_dir_close (dir);
    }
  g_remove (path);
  return !g_file_test (path, G_FILE_TEST_EXISTS) && !g_file_test (path, G_FILE_TEST_IS_SYMLINK);
}
