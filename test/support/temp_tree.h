/* Temporary folders of the tests (test support, not in libshoal). */
#ifndef SHOAL_TEST_TEMP_TREE_H
#define SHOAL_TEST_TEMP_TREE_H

#include <glib.h>

/* Removes path and everything below it (files and folders, at any depth;
 * links are removed, not followed).  Returns whether path is gone. */
gboolean shoal_test_remove_tree (const char *path);

#endif
