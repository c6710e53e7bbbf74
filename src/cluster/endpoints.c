/* Endpoints: where each rank of a layout listens ("host:port", "" for a
 * rank that takes no calls), chosen on loopback by `shoal run` or read
 * from a hostfile for mpirun/srun; see cluster/endpoints.h. */
#include "cluster/endpoints.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <unistd.h>

#include "core/error.h"

/* Free loopback ports for the ranks that listen: every socket stays
 * bound until all are chosen, so no two ranks get the same port.  The
 * port is free again between this and the child's bind; another program
 * taking it in that window makes the child fail with a clear bind error. */
char **
shoal_endpoints_loopback (const ShoalLayout *layout, GError **error)
{
  char **endpoints = g_new0 (char *, layout->nprocs + 1);
  int *fds = g_new (int, layout->nprocs);
  gboolean ok = TRUE;
  /* Ports below the kernel's ephemeral range: between this probe and the
   * child's bind, no outgoing connection can take them as its source port
   * (a port from bind(0) could, and the child then fails to listen). */
  int low = 32768, high = 60999;
  char *range = NULL;
  if (g_file_get_contents ("/proc/sys/net/ipv4/ip_local_port_range", &range, NULL, NULL))
    sscanf (range, "%d %d", &low, &high);
  g_free (range);
  int first = 10000, span = MAX (low - first, 1000);
  for (int r = 0; r < layout->nprocs; r++)
    {
      fds[r] = -1;
      if (!ok || !shoal_layout_rank_listens (layout, r))
        {
          endpoints[r] = g_strdup ("");
          continue;
        }
      int port = 0;
      for (int attempt = 0; attempt < 200 && port == 0; attempt++)
        {
          int candidate = first + g_random_int_range (0, span);
          struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons ((guint16) candidate) };
          addr.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
          int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
          int one = 1;
          if (fd >= 0)
            setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
          if (fd >= 0 && bind (fd, (struct sockaddr *) &addr, sizeof addr) == 0)
            {
              fds[r] = fd;  /* held until every rank has its own port */
              port = candidate;
            }
          else if (fd >= 0)
            close (fd);
        }
      if (port == 0)
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO,
                       "cannot find a free port on 127.0.0.1 in %d..%d: %s", first, first + span - 1,
                       g_strerror (errno));
          ok = FALSE;
          endpoints[r] = g_strdup ("");
          continue;
        }
      endpoints[r] = g_strdup_printf ("127.0.0.1:%d", port);
    }
  for (int r = 0; r < layout->nprocs; r++)
    if (fds[r] >= 0)
      close (fds[r]);
  g_free (fds);
  if (!ok)
    {
      g_strfreev (endpoints);
      return NULL;
    }
  return endpoints;
}

/* Rank r's host from an Open MPI style hostfile ("host" or "host
 * slots=N" per line, # comments): hosts are expanded by their slots in
 * file order, as mpirun maps ranks by slot, and ranks beyond the slots
 * wrap around. */
/* The hosts of an Open MPI style hostfile, each repeated by its slots. */
static GPtrArray *
read_slots (const char *path, GError **error)
{
  char *text = NULL;
  if (!shoal_file_read (path, &text, NULL, error))
    return NULL;
  GPtrArray *slots = g_ptr_array_new_with_free_func (g_free);
  char **lines = g_strsplit (text, "\n", -1);
  gboolean ok = TRUE;
  for (int i = 0; ok && lines[i] != NULL; i++)
    {
      char *hash = strchr (lines[i], '#');
      if (hash != NULL)
        *hash = '\0';
      char **words = g_strsplit_set (g_strstrip (lines[i]), " \t", -1);
      const char *host = NULL;
      gint64 n = 1;
      for (int w = 0; ok && words[w] != NULL; w++)
        {
          if (words[w][0] == '\0')
            continue;
          if (host == NULL)
            host = words[w];
          else if (g_str_has_prefix (words[w], "slots="))
            {
              if (!g_ascii_string_to_signed (words[w] + 6, 10, 1, 4096, &n, NULL))
                {
                  g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                               "%s:%d: slots: expected a number from 1 to 4096, got '%s'", path,
                               i + 1, words[w] + 6);
                  ok = FALSE;
                }
            }
        }
      for (gint64 k = 0; ok && host != NULL && k < n; k++)
        g_ptr_array_add (slots, g_strdup (host));
      g_strfreev (words);
    }
  g_strfreev (lines);
  g_free (text);
  if (ok && slots->len == 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "%s: no hosts", path);
      ok = FALSE;
    }
  if (!ok)
    {
      g_ptr_array_free (slots, TRUE);
      return NULL;
    }
  return slots;
}

char **
shoal_endpoints_from_hosts (char **hosts, const ShoalLayout *layout, int base_port, int rank, int *host_workers,
                            int *host_procs)
{
  char **endpoints = g_new0 (char *, layout->nprocs + 1);
  const char *mine = hosts[rank];
  *host_workers = 0;
  if (host_procs != NULL)
    *host_procs = 0;
  for (int r = 0; r < layout->nprocs; r++)
    {
      endpoints[r] = shoal_layout_rank_listens (layout, r) ? g_strdup_printf ("%s:%d", hosts[r], base_port + r)
                                                           : g_strdup ("");
      if (strcmp (hosts[r], mine) == 0)
        *host_workers += (int) layout->procs[r].workers->len;
      if (strcmp (hosts[r], mine) == 0 && host_procs != NULL)
        (*host_procs)++;
    }
  return endpoints;
}

char **
shoal_endpoints_from_hostfile (const char *path, const ShoalLayout *layout, int base_port, int rank,
                               int *host_workers, int *host_procs, GError **error)
{
  char **hosts = shoal_hosts_from_hostfile (path, layout->nprocs, error);
  if (hosts == NULL)
    return NULL;
  char **endpoints = shoal_endpoints_from_hosts (hosts, layout, base_port, rank, host_workers, host_procs);
  g_strfreev (hosts);
  return endpoints;
}

char **
shoal_hosts_from_hostfile (const char *path, int nprocs, GError **error)
{
  GPtrArray *slots = read_slots (path, error);
  if (slots == NULL)
    return NULL;
  char **hosts = g_new0 (char *, nprocs + 1);
  for (int r = 0; r < nprocs; r++)
    hosts[r] = g_strdup (g_ptr_array_index (slots, (guint) r % slots->len));
  g_ptr_array_free (slots, TRUE);
  return hosts;
}

char **
shoal_hosts_from_endpoints (char **endpoints)
{
  guint n = g_strv_length (endpoints);
  char **hosts = g_new0 (char *, n + 1);
  for (guint r = 0; r < n; r++)
    {
      int port;
      if (*endpoints[r] == '\0' || !shoal_endpoint_parse (endpoints[r], &hosts[r], &port, NULL))
        hosts[r] = g_strdup ("");
    }
  return hosts;
}

gboolean
shoal_endpoint_parse (const char *endpoint, char **host, int *port, GError **error)
{
  const char *colon = endpoint ? strrchr (endpoint, ':') : NULL;
  gint64 p = 0;
  if (colon == NULL || colon == endpoint
      || !g_ascii_string_to_signed (colon + 1, 10, 1, 65535, &p, NULL))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "endpoint '%s' is not host:port",
                   endpoint ? endpoint : "");
      return FALSE;
    }
  *host = g_strndup (endpoint, (gsize) (colon - endpoint));
  *port = (int) p;
  return TRUE;
}
