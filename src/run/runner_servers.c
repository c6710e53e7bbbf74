/* The server side of one process's share of a job (run/runner.c runs
 * the workers): how many slices, the server group's options under each
 * scheme, the server group itself with its RPC service, and in Hogwild
 * the sync of this server group with the slices' masters. */
#include "run/runner_process.h"

#include <string.h>

#include "cluster/endpoints.h"
#include "core/error.h"
#include "core/memory_budget.h"
#include "worker/worker.h"
#include "workspace/workspace.h"

/* A connection that sent no call with the job token this long after it
 * was accepted is closed (rpc/listener.h); the job's own send one at once. */
#define UNPROVEN_TIMEOUT_S 10
gboolean
runner_endpoint_options (RunnerProcess *p, int rank, ShoalRpcClientOptions *o, char **host, GError **error)
{
  if (p->opts->endpoints == NULL || rank >= p->layout->nprocs || !p->opts->endpoints[rank]
      || !*p->opts->endpoints[rank])
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "rank %d has no endpoint",
                   rank);
      return FALSE;
    }
  memset (o, 0, sizeof *o);
  if (!shoal_endpoint_parse (p->opts->endpoints[rank], host, &o->port, error))
    return FALSE;
  o->host = *host;
  o->token = p->opts->token;
  return TRUE;
}

/* On SIGINT/SIGTERM the workers everywhere stop at their next step, save a
 * checkpoint through these servers and say they are done; servers go on
 * serving for that.  Only when done never comes (a worker process died)
 * does a stop request end the wait, 5 s after it came. */
static gboolean
servers_give_up (void)
{
  static gint64 asked_at;  /* read by the one thread that waits */
  if (!shoal_worker_stop_requested ())
    return FALSE;
  if (asked_at == 0)
    asked_at = g_get_monotonic_time ();
  return g_get_monotonic_time () - asked_at > 5 * G_USEC_PER_SEC;
}

/* The process's RPC service: its server slices and, for a spread net,
 * the messages of its group's other processes. */
static gboolean
start_rpc (RunnerProcess *p, GError **error)
{
  ShoalProcess *proc = p->proc;
  char *host = NULL;
  ShoalRpcServerOptions ropts = { 0 };
  if (!shoal_endpoint_parse (p->opts->endpoints[proc->rank], &host, &ropts.port, error))
    return FALSE;
  ropts.bind_address = host;
  ropts.token = p->opts->token;
  ropts.checkpoint = p->server != NULL ? p->ckpt : NULL;
  ropts.give_up = servers_give_up;
  /* a signal sent to this process alone stops every rank with a checkpoint */
  ropts.stop_signalled = shoal_worker_stop_requested;
  if (p->mailbox != NULL)
    {
      ropts.bridge_sink = shoal_mailbox_sink;
      ropts.bridge_data = p->mailbox;
    }
  if (p->wire != NULL)
    ropts.bridge_message_bytes = shoal_group_net_max_message_bytes (p->layout_net);
  ropts.liveness = shoal_membership_liveness (p->membership);
  ropts.max_connections = p->layout->conf.rpc_max_connections;
  ropts.idle_timeout_ms = (gint64) (p->layout->conf.rpc_idle_timeout * 1000);
  /* token holders first: half the places may go to connections that
   * have not shown the job token, for UNPROVEN_TIMEOUT_S at most (under
   * a small cap, up to 16: a job's own burst of new connections is not
   * cut short before their first calls) */
  int cap = p->layout->conf.rpc_max_connections;
  ropts.max_unproven = MAX (cap / 2, MIN (cap, 16));
  ropts.unproven_timeout_ms = UNPROVEN_TIMEOUT_S * 1000;
  ropts.threads = p->layout->conf.rpc_threads;
  /* every worker process but this one says when it is done */
  ropts.expected_shutdowns = p->layout->nworker_procs - (proc->workers->len > 0 ? 1 : 0);
  p->rpc = shoal_rpc_server_start (p->server, &ropts, error);
  g_free (host);
  return p->rpc != NULL;
}

gboolean
runner_start_servers (RunnerProcess *p, GError **error)
{
  ShoalProcess *proc = p->proc;
  if (proc->servers->len == 0)
    return p->wire == NULL || start_rpc (p, error);
  p->server_group = g_array_index (proc->servers, ShoalMember, 0).group;
  for (guint i = 1; i < proc->servers->len; i++)
    if (g_array_index (proc->servers, ShoalMember, i).group != p->server_group)
      {
        g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                     "rank %d would host servers of two server groups; give each server group its own processes",
                     proc->rank);
        return FALSE;
      }
  /* a group in one process sends one summed gradient; a group spread
   * over processes sends one per worker */
  gboolean group_pushes = p->whole_groups || p->spread_net;
  const ShoalClusterConf *c = &p->layout->conf;
  if (p->layout->mode == SHOAL_UPDATE_SYNC && c->backup_workers > 0 && group_pushes)
    {
      shoal_conf_error (p->job->conf, error, "cluster", "backup_workers",
                        "this group runs as one net spread over processes (its layers are not all "
                        "split by batch) and pushes one gradient per step: there is no late "
                        "worker's gradient to drop");
      return FALSE;
    }
  ShoalServerOptions sopts;
  shoal_runner_server_options (p->layout, group_pushes, p->nslices, &sopts);
  /* the slices' values and optimiser state count against [job]
   * memory_limit with the nets (core/memory_budget.h): refused before
   * they are allocated when they would pass it */
  ShoalMemoryCharge charge;
  shoal_memory_charge_begin (&charge, p->job->memory_budget);
  p->server = shoal_server_new (shoal_group_net_params (p->layout_net), &p->job->updater, &sopts, error);
  shoal_memory_charge_end (&charge);
  p->memory_held += charge.charged;
  p->server_bytes = charge.charged;
  if (p->server == NULL)
    {
      g_prefix_error (error, "rank %d: its servers' slices: ", proc->rank);
      return FALSE;
    }
  for (int s = 0; s < p->nslices; s++)
    for (guint i = 0; i < proc->servers->len; i++)
      if (g_array_index (proc->servers, ShoalMember, i).index == shoal_layout_server_of_slice (p->layout, s % p->layout->nslices))
        shoal_server_host_slice (p->server, s);
  /* before any worker can pull; a rejoining group takes the masters'
   * values instead (runner_start_group_sync) */
  if (p->resume_step >= 0 && !p->opts->rejoin
      && !shoal_server_restore (p->server, p->ckpt, p->resume_step, error))
    {
      char *dir = shoal_checkpoint_dir (p->opts->workspace, proc->rank);
      g_prefix_error (error, "%s: cannot resume: %s: ", p->opts->workspace, dir);
      g_free (dir);
      return FALSE;
    }

  if (p->opts->endpoints == NULL)
    return TRUE;
  return start_rpc (p, error);
}

/* Hogwild: the sync thread beside this process's server group, told
 * where each slice's master lives. */
gboolean
runner_start_group_sync (RunnerProcess *p, GError **error)
{
  const ShoalLayout *l = p->layout;
  int per = l->conf.nservers_per_group, nend = l->conf.nserver_groups * per;
  ShoalSliceMaster *masters = g_new0 (ShoalSliceMaster, p->nslices);
  ShoalRpcClientOptions *endpoints = g_new0 (ShoalRpcClientOptions, nend);
  char **hosts = g_new0 (char *, nend);
  gboolean ok = TRUE;

  for (int s = 0; s < p->nslices; s++)
    {
      masters[s].group = shoal_layout_master_group_of_slice (l, s % l->nslices);
      masters[s].endpoint = masters[s].group * per + shoal_layout_server_of_slice (l, s % l->nslices);
    }
  for (int g = 0; ok && g < l->conf.nserver_groups; g++)
    for (int si = 0; ok && si < per && g != p->server_group; si++)
      {
        ok = runner_endpoint_options (p, shoal_layout_server_rank (l, g, si), &endpoints[g * per + si],
                               &hosts[g * per + si], error);
        /* a master that stopped answering holds the sync about as long as
         * the liveness rules take to move its slices elsewhere */
        endpoints[g * per + si].timeout_ms = (gint64) MAX (2000.0, l->conf.heartbeat_timeout * 1000);
        endpoints[g * per + si].connect_retries = 5;
      }
  if (ok)
    {
      ShoalGroupSyncOptions o = { .server = p->server, .server_group = p->server_group,
                                  .sync_freq = l->conf.sync_freq, .masters = masters,
                                  .elastic_alpha = l->conf.hogwild_sync == SHOAL_HOGWILD_ELASTIC
                                                     ? (float) l->conf.elastic_alpha : 0,
                                  .endpoints = endpoints, .nendpoints = nend,
                                  .nserver_groups = l->conf.nserver_groups, .servers_per_group = per,
                                  .demoted = p->membership != NULL ? shoal_membership_group_demoted : NULL,
                                  .data = p->membership };
      if (p->opts->rejoin)
        ok = shoal_group_sync_take_masters (&o, error);
      if (ok)
        p->group_sync = shoal_group_sync_start (&o, error);
      ok = ok && p->group_sync != NULL;
    }
  for (int i = 0; i < nend; i++)
    g_free (hosts[i]);
  g_free (hosts);
  g_free (endpoints);
  g_free (masters);
  return ok;
}
