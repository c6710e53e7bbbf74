/* Random tokens (core/token.h). */
#include "core/token.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/random.h>

#include "core/error.h"

char *
shoal_token_new (GError **error)
{
  guint8 bytes[16];
  gsize got = 0;
  while (got < sizeof bytes)
    {
      ssize_t n = getrandom (bytes + got, sizeof bytes - got, 0);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "cannot make a token: getrandom: %s", g_strerror (errno));
          return NULL;
        }
      got += (gsize) n;
    }
  char *hex = g_malloc (2 * sizeof bytes + 1);
  for (gsize i = 0; i < sizeof bytes; i++)
    g_snprintf (hex + 2 * i, 3, "%02x", bytes[i]);
  return hex;
}

gboolean
shoal_token_check (const char *token, const char *where, GError **error)
{
  gsize len = strlen (token);
  if (len >= SHOAL_TOKEN_MIN_CHARS)
    return TRUE;
  g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
               "%s: the token has %" G_GSIZE_FORMAT " character%s, at least %d are needed (a short one can be "
               "guessed): make one with `od -An -tx1 -N16 /dev/urandom | tr -d ' \\n'`",
               where, len, len == 1 ? "" : "s", SHOAL_TOKEN_MIN_CHARS);
  return FALSE;
}

char *
shoal_token_derive (const char *token, const char *purpose)
{
  char *mac = g_compute_hmac_for_string (G_CHECKSUM_SHA256, (const guchar *) token, strlen (token), purpose, -1);
  mac[32] = '\0';
  return mac;
}

char *
shoal_token_read_file (const char *path, GError **error)
{
  char *text = NULL;
  if (!shoal_file_read (path, &text, NULL, error))
    return NULL;
  g_strstrip (text);
  if (*text == '\0')
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "%s: the token is empty", path);
  if (*text == '\0' || !shoal_token_check (text, path, error))
    {
      g_free (text);
      return NULL;
    }
  GStatBuf st;
  if (g_stat (path, &st) == 0 && (st.st_mode & 077) != 0)
    g_warning ("%s: the token is readable by other users (mode %03o); chmod 600 it", path,
               (unsigned) (st.st_mode & 0777));
  return text;
}
