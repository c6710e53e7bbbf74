/* Secrets made here: a job's token (the launcher) and a dashboard's. */
#ifndef SHOAL_TOKEN_H
#define SHOAL_TOKEN_H

#include <glib.h>

G_BEGIN_DECLS

/* 32 hex characters from the kernel's random source (getrandom), newly
 * allocated; NULL with SHOAL_ERROR_IO saying why when it cannot be read. */
char *shoal_token_new (GError **error);

G_END_DECLS

#endif
