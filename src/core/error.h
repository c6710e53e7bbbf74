/* Error domain and codes shared by every part of shoal.
 *
 * Library code reports recoverable failures through GError with
 * SHOAL_ERROR; it never exits the process.  Messages name the place:
 * "conf/x.conf:12: [layer fc1] unknown key 'foo'". */
#ifndef SHOAL_ERROR_H
#define SHOAL_ERROR_H

#include <glib.h>

#include <shoal/error.h>

G_BEGIN_DECLS

/* g_file_get_contents with its failure as SHOAL_ERROR_IO (GLib's
 * message, which names the file and why): *text newly allocated,
 * NUL-terminated; length may be NULL. */
gboolean shoal_file_read (const char *path, char **text, gsize *length, GError **error);

G_END_DECLS

#endif
