/* Refusals per peer host (rpc/refusals.h). */
#include "rpc/refusals.h"

#include <netdb.h>
#include <string.h>
#include <sys/socket.h>

typedef struct {
  guint count;
  char *last;
} Refused;

struct _ShoalRefusals {
  GMutex lock;
  GHashTable *hosts;   /* numeric address -> Refused */
};

static void
refused_free (gpointer data)
{
  Refused *r = data;
  g_free (r->last);
  g_free (r);
}

ShoalRefusals *
shoal_refusals_new (void)
{
  ShoalRefusals *r = g_new0 (ShoalRefusals, 1);
  g_mutex_init (&r->lock);
  r->hosts = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, refused_free);
  return r;
}

void
shoal_refusals_free (ShoalRefusals *r)
{
  if (r == NULL)
    return;
  g_hash_table_destroy (r->hosts);
  g_mutex_clear (&r->lock);
  g_free (r);
}

/* "10.0.0.1:47001" -> "10.0.0.1", "[::1]:47001" -> "::1" */
static char *
host_of_peer (const char *peer)
{
  if (peer[0] == '[')
    {
      const char *end = strchr (peer, ']');
      return end != NULL ? g_strndup (peer + 1, (gsize) (end - peer - 1)) : g_strdup (peer);
    }
  const char *colon = strrchr (peer, ':');
  return colon != NULL ? g_strndup (peer, (gsize) (colon - peer)) : g_strdup (peer);
}

void
shoal_refusals_note (ShoalRefusals *r, const char *peer, const char *why)
{
  char *host = host_of_peer (peer);
  g_mutex_lock (&r->lock);
  Refused *x = g_hash_table_lookup (r->hosts, host);
  if (x == NULL && g_hash_table_size (r->hosts) < SHOAL_REFUSALS_HOSTS)
    {
      x = g_new0 (Refused, 1);
      g_hash_table_insert (r->hosts, g_steal_pointer (&host), x);
    }
  if (x != NULL)
    {
      x->count++;
      g_free (x->last);
      x->last = g_strdup (why);
    }
  g_mutex_unlock (&r->lock);
  g_free (host);
}

char **
shoal_refusals_resolve (const char *host)
{
  struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *list = NULL;
  if (getaddrinfo (host, NULL, &hints, &list) != 0)
    return NULL;
  GPtrArray *out = g_ptr_array_new ();
  for (struct addrinfo *a = list; a != NULL; a = a->ai_next)
    {
      char addr[NI_MAXHOST];
      if (getnameinfo (a->ai_addr, a->ai_addrlen, addr, sizeof addr, NULL, 0, NI_NUMERICHOST) != 0)
        continue;
      gboolean seen = FALSE;
      for (guint i = 0; i < out->len && !seen; i++)
        seen = strcmp (out->pdata[i], addr) == 0;
      if (!seen)
        g_ptr_array_add (out, g_strdup (addr));
    }
  freeaddrinfo (list);
  g_ptr_array_add (out, NULL);
  return (char **) g_ptr_array_free (out, FALSE);
}

char *
shoal_refusals_describe (ShoalRefusals *r, const char *const *addresses)
{
  GString *s = g_string_new (NULL);
  g_mutex_lock (&r->lock);
  for (int i = 0; addresses != NULL && addresses[i] != NULL; i++)
    {
      Refused *x = g_hash_table_lookup (r->hosts, addresses[i]);
      if (x != NULL)
        g_string_append_printf (s, "%s%u from %s (the last: %s)", s->len > 0 ? "; " : "", x->count, addresses[i],
                                x->last);
    }
  g_mutex_unlock (&r->lock);
  return g_string_free (s, s->len == 0);
}
