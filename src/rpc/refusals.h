/* What a listener refused, per peer host: how many connections or calls
 * and the last reason.  A rank that is never heard from (one started with
 * another job's certificates, in clear among TLS ranks, with a wrong
 * token) cannot say so itself: what its host's connections were refused
 * for is then the best word the other ranks have (run/membership.c adds
 * it to the rank's loss).  Thread-safe; bounded: at most
 * SHOAL_REFUSALS_HOSTS hosts are kept, later ones are not. */
#ifndef SHOAL_REFUSALS_H
#define SHOAL_REFUSALS_H

#include <glib.h>

G_BEGIN_DECLS

#define SHOAL_REFUSALS_HOSTS 256

typedef struct _ShoalRefusals ShoalRefusals;

ShoalRefusals *shoal_refusals_new (void);
void shoal_refusals_free (ShoalRefusals *r);
/* peer: "host:port" or "[v6 host]:port", as the listener names it */
void shoal_refusals_note (ShoalRefusals *r, const char *peer, const char *why);
/* The numeric addresses host (a name or an address) resolves to, each
 * once (g_strfreev); NULL where it resolves to none.  Apart from
 * describe, so that a caller holding a lock does not wait for a resolver
 * under it. */
char **shoal_refusals_resolve (const char *host);
/* NULL when nothing from these addresses (as shoal_refusals_resolve
 * gives them) was refused; else, newly allocated, "N from ADDRESS (the
 * last: WHY)", one such part per address, joined by "; ". */
char *shoal_refusals_describe (ShoalRefusals *r, const char *const *addresses);

G_END_DECLS

#endif
