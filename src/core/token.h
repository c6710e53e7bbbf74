/* Secrets made here: a job's token (the launcher) and a dashboard's. */
#ifndef SHOAL_TOKEN_H
#define SHOAL_TOKEN_H

#include <glib.h>

G_BEGIN_DECLS

/* 32 hex characters from the kernel's random source (getrandom), newly
 * allocated; NULL with SHOAL_ERROR_IO saying why when it cannot be read. */
char *shoal_token_new (GError **error);

/* The fewest characters a token given from outside (a file, SHOAL_TOKEN)
 * may have: 16, 64 bits as hex (shoal's own have 32).  A shorter one can
 * be guessed by anyone who reaches a port, and is the only thing between
 * a loopback caller and the job's RPCs. */
#define SHOAL_TOKEN_MIN_CHARS 16

/* TRUE when token is long enough; else FALSE with SHOAL_ERROR_CONF
 * "WHERE: the token has N characters, at least 16 are needed ..." */
gboolean shoal_token_check (const char *token, const char *where, GError **error);

/* The token in file path (surrounding blanks dropped), newly allocated;
 * NULL with an error naming the file when it cannot be read, is empty or
 * fails shoal_token_check.  Warns when others may read the file. */
char *shoal_token_read_file (const char *path, GError **error);

/* A token for one use made from another, newly allocated: the first 32
 * hex characters of HMAC-SHA256 (key: token, message: purpose).  Whoever
 * learns it learns nothing of token: the dashboard's address carries one
 * derived from a job's token, which then never travels in clear HTTP. */
char *shoal_token_derive (const char *token, const char *purpose);

G_END_DECLS

#endif
