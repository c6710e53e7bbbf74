/* Hogwild's group sync thread; see server/group_sync.h. */
#include "server/group_sync.h"

#include "core/error.h"
#include "core/thread_start.h"
#include "core/tensor.h"

/* A master that did not answer is tried again this much later. */
#define RETRY_US (500 * 1000)

struct _ShoalGroupSync {
  ShoalGroupSyncOptions o;      /* masters, endpoints copied below */
  ShoalServer *server;
  int server_group;
  int sync_freq;
  float elastic_alpha;          /* 0: averaging deltas */
  ShoalSliceMaster *masters;    /* each slice's first master */
  int *current;                 /* each slice's master at its last sync; -1 before */
  gint64 *not_before;           /* each slice's next try after a failed call */
  int called;                   /* the endpoint the last sync called; -1: its own group's (no call) */
  ShoalRpcClientOptions *endpoints;
  char **hosts;                 /* the endpoints' host strings, owned */
  char **tokens;
  int nendpoints;
  ShoalRpcClient **clients;     /* [nendpoints], connected when first needed */
  GThread *thread;
  gint stop;                    /* atomic */
  GError *error;                /* what ended the thread early */
};

int
shoal_group_sync_master (const ShoalGroupSyncOptions *o, int slice, int *endpoint)
{
  const ShoalSliceMaster *m = &o->masters[slice];
  int groups = o->nserver_groups, per = o->servers_per_group;
  int group = m->group, ep = m->endpoint;
  if (groups > 0 && per > 0 && o->demoted != NULL)
    for (int k = 0; k < groups; k++)
      {
        int g = (m->group + k) % groups;
        if (!o->demoted (o->data, g))
          {
            group = g;
            ep = g * per + m->endpoint % per;
            break;
          }
      }
  if (endpoint != NULL)
    *endpoint = ep;
  return group;
}

gboolean
shoal_group_sync_take_masters (const ShoalGroupSyncOptions *o, GError **error)
{
  int nslices = shoal_server_n_slices (o->server);
  ShoalRpcClient **clients = g_new0 (ShoalRpcClient *, MAX (o->nendpoints, 1));
  float *buf = shoal_alloc_floats (shoal_server_total (o->server));
  gboolean ok = TRUE;
  int taken = 0;
  for (int s = 0; ok && s < nslices; s++)
    {
      int endpoint;
      int master = shoal_group_sync_master (o, s, &endpoint);
      if (!shoal_server_hosts (o->server, s) || master == o->server_group)
        continue;
      size_t b, e;
      gint64 version = 0;
      shoal_server_slice_range (o->server, s, &b, &e);
      if (clients[endpoint] == NULL)
        clients[endpoint] = shoal_rpc_client_connect (&o->endpoints[endpoint], error);
      ok = clients[endpoint] != NULL
           && shoal_rpc_client_pull (clients[endpoint], s, buf + b, e - b, 0, &version, error)
           && shoal_server_put (o->server, s, buf + b, e - b, version, error);
      if (!ok)
        g_prefix_error (error, "rejoining: the values of slice %d from master group %d: ", s, master);
      taken++;
    }
  if (ok)
    g_message ("group %d rejoins with the current values of %d slices from their masters", o->server_group,
               taken);
  for (int i = 0; i < o->nendpoints; i++)
    shoal_rpc_client_free (clients[i]);
  g_free (clients);
  shoal_free_aligned (buf);
  return ok;
}

static ShoalRpcClient *
client_of (ShoalGroupSync *gs, int endpoint, GError **error)
{
  if (gs->clients[endpoint] == NULL)
    gs->clients[endpoint] = shoal_rpc_client_connect (&gs->endpoints[endpoint], error);
  return gs->clients[endpoint];
}

/* EASGD: the replica goes to the master's center, d comes back. */
static gboolean
sync_elastic (ShoalGroupSync *gs, int s, int master, int endpoint, float *x, size_t n, GError **error)
{
  if (!shoal_server_take_values (gs->server, s, x, n, error))
    return FALSE;
  if (master == gs->server_group)
    return shoal_server_elastic_exchange (gs->server, s, x, x, n, gs->elastic_alpha, error)
           && shoal_server_elastic_merge (gs->server, s, x, n, error);
  ShoalRpcClient *c = client_of (gs, endpoint, error);
  return c != NULL && shoal_rpc_client_elastic_exchange (c, s, x, x, n, gs->elastic_alpha, error)
         && shoal_server_elastic_merge (gs->server, s, x, n, error);
}

/* The slice's master changed (the one before was lost). */
static gboolean
master_moved (ShoalGroupSync *gs, int s, int master, GError **error)
{
  int before = gs->current[s];
  gs->current[s] = master;
  if (before < 0 || before == master)
    return TRUE;
  g_message ("group sync: slice %d: master group %d was lost; group %d masters it now", s, before, master);
  if (master == gs->server_group && gs->elastic_alpha > 0)
    return shoal_server_adopt_center (gs->server, s, error);
  return TRUE;
}

static gboolean
sync_slice (ShoalGroupSync *gs, int s, float *buf, GError **error)
{
  size_t b, e;
  shoal_server_slice_range (gs->server, s, &b, &e);
  float *delta = buf + b;
  int endpoint;
  int master = shoal_group_sync_master (&gs->o, s, &endpoint);
  gs->called = master == gs->server_group ? -1 : endpoint;
  if (!master_moved (gs, s, master, error))
    return FALSE;
  if (gs->elastic_alpha > 0)
    return sync_elastic (gs, s, master, endpoint, delta, e - b, error);
  if (master == gs->server_group)
    /* the master's own values are the reference: just restart the count */
    return shoal_server_take_delta (gs->server, s, delta, e - b, error);

  ShoalRpcClient *c = client_of (gs, endpoint, error);
  return c != NULL && shoal_server_take_delta (gs->server, s, delta, e - b, error)
         && shoal_rpc_client_apply_delta (c, s, delta, delta, e - b, error)
         && shoal_server_merge_master (gs->server, s, delta, e - b, error);
}

/* Whether a failed sync may be tried again: the master it called did not
 * answer (its connection is gone), as opposed to refusing the call.  The
 * master called, not the slice's master now: the rules may have moved
 * the slice to this group while the call to a killed master spent its
 * connect attempts (that failed a Hogwild job at its end with "cannot
 * connect", test/e2e/rejoin_mpirun.sh). */
static gboolean
transient (ShoalGroupSync *gs)
{
  if (gs->called < 0)
    return FALSE;
  ShoalRpcClient *c = gs->clients[gs->called];
  return c == NULL || shoal_rpc_client_peer_closed (c);
}

static gpointer
sync_main (gpointer data)
{
  ShoalGroupSync *gs = data;
  float *buf = shoal_alloc_floats (shoal_server_total (gs->server));
  GError *error = NULL;

  while (!g_atomic_int_get (&gs->stop))
    {
      /* wakes every 100 ms to look at the stop flag and at slices to retry */
      int s = shoal_server_wait_sync_due_after (gs->server, gs->sync_freq, 100 * 1000, gs->not_before);
      if (s < 0 || sync_slice (gs, s, buf, &error))
        continue;
      if (!transient (gs))
        break;
      /* a master that is gone or stopped: the liveness rules will say so
       * (and the slice moves), or it answers again */
      g_debug ("group sync: slice %d: %s; trying again", s, error->message);
      g_clear_error (&error);
      gs->not_before[s] = g_get_monotonic_time () + RETRY_US;
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
  g_free (gs->current);
  g_free (gs->not_before);
  g_clear_error (&gs->error);
  g_free (gs);
}

ShoalGroupSync *
shoal_group_sync_start (const ShoalGroupSyncOptions *opts, GError **error)
{
  g_return_val_if_fail (opts != NULL && opts->server != NULL && opts->sync_freq >= 1, NULL);
  ShoalGroupSync *gs = g_new0 (ShoalGroupSync, 1);
  int nslices = shoal_server_n_slices (opts->server);
  gs->o = *opts;
  gs->server = opts->server;
  gs->server_group = opts->server_group;
  gs->sync_freq = opts->sync_freq;
  gs->elastic_alpha = opts->elastic_alpha;
  gs->masters = g_memdup2 (opts->masters, sizeof (ShoalSliceMaster) * (gsize) nslices);
  gs->o.masters = gs->masters;
  gs->current = g_new (int, nslices);
  for (int s = 0; s < nslices; s++)
    gs->current[s] = -1;
  gs->not_before = g_new0 (gint64, nslices);
  gs->called = -1;
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
  gs->o.endpoints = gs->endpoints;
  gs->clients = g_new0 (ShoalRpcClient *, MAX (opts->nendpoints, 1));
  gs->thread = shoal_thread_start ("group-sync", sync_main, gs, error);
  if (gs->thread == NULL)
    {
      g_prefix_error (error, "group sync: ");
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
