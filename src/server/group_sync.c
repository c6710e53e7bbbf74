/* Hogwild's group sync thread; see server/group_sync.h. */
#include "server/group_sync.h"

#include "core/error.h"
#include "core/tensor.h"

struct _ShoalGroupSync {
  ShoalServer *server;
  int server_group;
  int sync_freq;
  float elastic_alpha;          /* 0: averaging deltas */
  ShoalSliceMaster *masters;
  ShoalRpcClientOptions *endpoints;
  char **hosts;                 /* the endpoints' host strings, owned */
  char **tokens;
  int nendpoints;
  ShoalRpcClient **clients;     /* [nendpoints], connected when first needed */
  GThread *thread;
  gint stop;                    /* atomic */
  GError *error;                /* what ended the thread early */
};

/* EASGD: the replica goes to the master's center, d comes back. */
static gboolean
sync_elastic (ShoalGroupSync *gs, int s, float *x, size_t n, GError **error)
{
  const ShoalSliceMaster *m = &gs->masters[s];
  if (!shoal_server_take_values (gs->server, s, x, n, error))
    return FALSE;
  if (m->group == gs->server_group)
    return shoal_server_elastic_exchange (gs->server, s, x, x, n, gs->elastic_alpha, error)
           && shoal_server_elastic_merge (gs->server, s, x, n, error);
  if (gs->clients[m->endpoint] == NULL
      && (gs->clients[m->endpoint] = shoal_rpc_client_connect (&gs->endpoints[m->endpoint], error)) == NULL)
    return FALSE;
  return shoal_rpc_client_elastic_exchange (gs->clients[m->endpoint], s, x, x, n, gs->elastic_alpha, error)
         && shoal_server_elastic_merge (gs->server, s, x, n, error);
}

static gboolean
sync_slice (ShoalGroupSync *gs, int s, float *buf, GError **error)
{
  size_t b, e;
  shoal_server_slice_range (gs->server, s, &b, &e);
  float *delta = buf + b;
  const ShoalSliceMaster *m = &gs->masters[s];
  if (gs->elastic_alpha > 0)
    return sync_elastic (gs, s, delta, e - b, error);
  if (m->group == gs->server_group)
    /* the master's own values are the reference: just restart the count */
    return shoal_server_take_delta (gs->server, s, delta, e - b, error);

  if (gs->clients[m->endpoint] == NULL
      && (gs->clients[m->endpoint] = shoal_rpc_client_connect (&gs->endpoints[m->endpoint], error)) == NULL)
    return FALSE;
  return shoal_server_take_delta (gs->server, s, delta, e - b, error)
         && shoal_rpc_client_apply_delta (gs->clients[m->endpoint], s, delta, delta, e - b, error)
         && shoal_server_merge_master (gs->server, s, delta, e - b, error);
}

static gpointer
sync_main (gpointer data)
{
  ShoalGroupSync *gs = data;
  float *buf = shoal_alloc_floats (shoal_server_total (gs->server));
  GError *error = NULL;

  while (!g_atomic_int_get (&gs->stop))
    {
      /* wakes every 100 ms to look at the stop flag */
      int s = shoal_server_wait_sync_due (gs->server, gs->sync_freq, 100 * 1000);
      if (s >= 0 && !sync_slice (gs, s, buf, &error))
        break;
    }
  gs->error = error;
  shoal_free_aligned (buf);
  return NULL;
}

static void
group_sync_free (ShoalGroupSync *gs)
{
  for (int i = 0; i < gs->nendpoints; i++)
    {
      shoal_rpc_client_free (gs->clients[i]);
      g_free (gs->hosts[i]);
      g_free (gs->tokens[i]);
    }
  g_free (gs->clients);
  g_free (gs->hosts);
  g_free (gs->tokens);
  g_free (gs->endpoints);
  g_free (gs->masters);
  g_clear_error (&gs->error);
  g_free (gs);
}

ShoalGroupSync *
shoal_group_sync_start (const ShoalGroupSyncOptions *opts, GError **error)
{
  g_return_val_if_fail (opts != NULL && opts->server != NULL && opts->sync_freq >= 1, NULL);
  ShoalGroupSync *gs = g_new0 (ShoalGroupSync, 1);
  int nslices = shoal_server_n_slices (opts->server);
  gs->server = opts->server;
  gs->server_group = opts->server_group;
  gs->sync_freq = opts->sync_freq;
  gs->elastic_alpha = opts->elastic_alpha;
  gs->masters = g_memdup2 (opts->masters, sizeof (ShoalSliceMaster) * (gsize) nslices);
  gs->nendpoints = opts->nendpoints;
  gs->endpoints = g_new0 (ShoalRpcClientOptions, MAX (opts->nendpoints, 1));
  gs->hosts = g_new0 (char *, MAX (opts->nendpoints, 1));
  gs->tokens = g_new0 (char *, MAX (opts->nendpoints, 1));
  for (int i = 0; i < opts->nendpoints; i++)
    {
      gs->endpoints[i] = opts->endpoints[i];
      gs->endpoints[i].host = gs->hosts[i] = g_strdup (opts->endpoints[i].host);
      gs->endpoints[i].token = gs->tokens[i] = g_strdup (opts->endpoints[i].token);
    }
  gs->clients = g_new0 (ShoalRpcClient *, MAX (opts->nendpoints, 1));
  GError *e = NULL;
  gs->thread = g_thread_try_new ("group-sync", sync_main, gs, &e);
  if (gs->thread == NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL, "group sync: no thread: %s", e->message);
      g_error_free (e);
      group_sync_free (gs);
      return NULL;
    }
  return gs;
}

gboolean
shoal_group_sync_stop (ShoalGroupSync *gs, GError **error)
{
  if (gs == NULL)
    return TRUE;
  g_atomic_int_set (&gs->stop, TRUE);
  g_thread_join (gs->thread);
  gboolean ok = gs->error == NULL;
  if (!ok)
    g_propagate_error (error, g_steal_pointer (&gs->error));
  group_sync_free (gs);
  return ok;
}
