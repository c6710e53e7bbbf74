/* The ranks a process knows alive or lost, and what a loss means for it;
 * see run/membership.h. */
#include "run/membership.h"

#include <string.h>

#include "cluster/endpoints.h"
#include "core/error.h"
#include "rpc/refusals.h"
#include "server/heartbeat.h"
#include "worker/worker.h"

struct _ShoalMembership {
  ShoalMembershipOptions o;
  ShoalLiveness *liveness;
  ShoalHeartbeat *heartbeat;
  GMutex lock;
  ShoalServer *server;          /* under lock */
  ShoalRpcServer *rpc;          /* under lock */
  GArray *dropped;              /* int ranks dropped before attach, under lock */
  GError *fatal;                /* under lock: why this process stops the job */
  GPtrArray *lost_groups;       /* under lock: "group 1 (rank 1: why)", ..., owned */
  GArray *lost_ranks;           /* under lock: the rank of each (a rank that rejoins leaves the list) */
  gboolean *uses_server_group;  /* [nserver_groups]: this process's workers push there */
  gboolean *my_group;           /* [nworker_groups]: this process holds workers of it */
  int pipe_fd;                  /* the launcher's heartbeat pipe, -1: none */
};

/* The server and RPC server are called under m->lock, so that
 * shoal_membership_attach (m, NULL, NULL) waits for calls in flight
 * before they are freed; neither calls back into the membership with
 * its own locks held. */
static void
set_fatal (ShoalMembership *m, GError *why)
{
  g_mutex_lock (&m->lock);
  if (m->fatal != NULL)
    {
      g_mutex_unlock (&m->lock);
      g_error_free (why);
      return;
    }
  m->fatal = why;
  g_warning ("rank %d: %s", m->o.rank, why->message);
  shoal_worker_abort ();
  if (m->rpc != NULL)
    shoal_rpc_server_fail (m->rpc, why->message);
  if (m->server != NULL)
    shoal_server_stop (m->server);
  g_mutex_unlock (&m->lock);
  /* the launcher names it in the job's last word: this process may exit
   * before the others hear its refusals (they read "connection closed") */
  shoal_heartbeat_pipe_fatal (m->pipe_fd, m->o.rank, why->message);
  if (m->o.on_fatal != NULL)
    m->o.on_fatal (m->o.data, why);
}

/* SSP: the rank's units push no more; the others no longer wait for them. */
static void
drop_ssp_units (ShoalMembership *m, ShoalServer *server, int rank)
{
  const ShoalLayout *l = m->o.layout;
  const ShoalProcess *p = &l->procs[rank];
  if (server != NULL)
    for (guint i = 0; i < p->workers->len; i++)
      {
        ShoalMember w = g_array_index (p->workers, ShoalMember, i);
        /* SSP's unit ids, as the runner gives them (unit_id) */
        shoal_server_drop_unit (server, m->o.group_pushes ? w.group
                                                          : w.group * l->conf.nworkers_per_group + w.index);
      }
}

/* A worker group's rank is dropped (asynchronous schemes). */
static void
drop (ShoalMembership *m, int rank)
{
  const ShoalLayout *l = m->o.layout;
  g_mutex_lock (&m->lock);
  ShoalServer *server = m->server;
  ShoalRpcServer *rpc = m->rpc;
  if (server == NULL && rpc == NULL)
    {
      /* nothing to act on yet: done at attach */
      g_array_append_val (m->dropped, rank);
      g_mutex_unlock (&m->lock);
      return;
    }
  if (rpc != NULL)
    shoal_rpc_server_finished (rpc, rank, TRUE);
  drop_ssp_units (m, server, rank);
  if (server != NULL && l->group_sync)
    shoal_server_set_delta_scale (server, 1.0f / (float) MAX (shoal_membership_live_server_groups (m), 1));
  g_mutex_unlock (&m->lock);
}

/* "rank 2 (2 servers) on 10.0.0.3": the rank and, where the hosts are
 * known (a hostfile's, Slurm's), its host, so that a job across hosts
 * says which machine went. */
static char *
describe_where (ShoalMembership *m, int rank)
{
  char *who = shoal_layout_describe_rank (m->o.layout, rank);
  const char *host = m->o.hosts != NULL ? m->o.hosts[rank] : NULL;
  if (host == NULL || *host == '\0')
    return who;
  char *where = g_strdup_printf ("%s on %s", who, host);
  g_free (who);
  return where;
}

/* why, and for a rank never heard from what this process dropped from
 * its host: a rank that runs with another job's certificates, in clear
 * among TLS ranks or with a wrong token cannot reach this process to say
 * so; the connections refused are its last word here.  (A rank heard
 * before and lost is not: its broken calls would only blur why.) */
static char *
why_with_refusals (ShoalMembership *m, int rank, const char *why)
{
  const char *host = m->o.hosts != NULL ? m->o.hosts[rank] : NULL;
  if (host == NULL || *host == '\0' || !g_str_has_prefix (why, SHOAL_LIVENESS_NEVER_HEARD))
    return g_strdup (why);
  /* resolved before the lock: a slow resolver holds nothing else up */
  char **addresses = shoal_refusals_resolve (host);
  char *refused = NULL;
  g_mutex_lock (&m->lock);
  if (m->rpc != NULL)
    refused = shoal_rpc_server_refusals (m->rpc, (const char *const *) addresses);
  g_mutex_unlock (&m->lock);
  g_strfreev (addresses);
  char *full = refused != NULL ? g_strdup_printf ("%s; this process dropped connections from its host: %s", why,
                                                  refused)
                               : g_strdup (why);
  g_free (refused);
  return full;
}

static void
on_lost (gpointer data, int rank, const char *why_heard)
{
  ShoalMembership *m = data;
  const ShoalLayout *l = m->o.layout;
  const ShoalProcess *p = &l->procs[rank];
  const ShoalProcess *me = &l->procs[m->o.rank];
  char *who = describe_where (m, rank);
  char *why = why_with_refusals (m, rank, why_heard);

  const char *fatal = NULL;
  for (guint i = 0; i < p->workers->len && fatal == NULL; i++)
    {
      int g = g_array_index (p->workers, ShoalMember, i).group;
      if (m->my_group[g])
        fatal = "a process of this process's own worker group";
      else if (l->mode == SHOAL_UPDATE_SYNC)
        fatal = "a synchronous group cannot go on without it";
      else if (l->conf.all_groups_required)
        /* the job cannot succeed: training on would only spend the time */
        fatal = "[cluster] all_groups_required = true: the job fails without its group (false: the others "
                "go on without it)";
    }
  for (guint i = 0; i < p->servers->len && fatal == NULL; i++)
    {
      int sg = g_array_index (p->servers, ShoalMember, i).group;
      /* a Hogwild group's own servers go with its workers: the group is lost */
      if (m->uses_server_group[sg] && !(l->group_sync && p->workers->len > 0))
        fatal = "this process's workers push to its servers";
    }
  if (fatal != NULL)
    {
      set_fatal (m, g_error_new (SHOAL_ERROR, SHOAL_ERROR_LOST, "%s lost: %s; %s", who, why, fatal));
      g_free (who);
      g_free (why);
      return;
    }
  if (p->workers->len > 0)
    {
      int g = g_array_index (p->workers, ShoalMember, 0).group;
      g_mutex_lock (&m->lock);
      g_ptr_array_add (m->lost_groups, g_strdup_printf ("group %d (rank %d: %s)", g, rank, why));
      g_array_append_val (m->lost_ranks, rank);
      g_mutex_unlock (&m->lock);
      g_message ("rank %d: group %d lost: %s %s; the others go on without it", m->o.rank, g, who, why);
      drop (m, rank);
    }
  else if (me->workers->len > 0 || me->servers->len > 0)
    g_message ("rank %d: %s lost: %s", m->o.rank, who, why);
  g_free (who);
  g_free (why);
}

static void
on_rejoin (gpointer data, int rank)
{
  ShoalMembership *m = data;
  char *who = shoal_layout_describe_rank (m->o.layout, rank);
  g_message ("rank %d: %s rejoined the job (a restarted process)", m->o.rank, who);
  g_free (who);
  g_mutex_lock (&m->lock);
  for (guint i = 0; i < m->dropped->len; i++)
    if (g_array_index (m->dropped, int, i) == rank)
      g_array_remove_index (m->dropped, i--);
  /* its group is back: no longer among those the job goes on without */
  for (guint i = 0; i < m->lost_ranks->len; i++)
    if (g_array_index (m->lost_ranks, int, i) == rank)
      {
        g_array_remove_index (m->lost_ranks, i);
        g_ptr_array_remove_index (m->lost_groups, i--);
      }
  if (m->rpc != NULL)
    shoal_rpc_server_finished (m->rpc, rank, FALSE);
  g_mutex_unlock (&m->lock);
}

/* A rank said done: its workers finished, or stopped (SIGINT) at their
 * own step.  Under SSP a unit still training may wait for its clock
 * (it went ahead by the bound), which will not move again: without this
 * the stopping unit's call waited until the servers gave up, and it
 * failed without its stop checkpoint. */
static void
on_done (gpointer data, int rank)
{
  ShoalMembership *m = data;
  g_mutex_lock (&m->lock);
  drop_ssp_units (m, m->server, rank);
  g_mutex_unlock (&m->lock);
}

static void
on_refused (gpointer data, int peer, const GError *why)
{
  ShoalMembership *m = data;
  (void) peer;
  set_fatal (m, g_error_new (SHOAL_ERROR, SHOAL_ERROR_LOST, "%s", why->message));
}

/* A peer was sent a stop signal (no launcher may pass it on: mpirun,
 * srun): this process's workers stop at their next step with a
 * checkpoint, as on a signal of their own, so that no rank is left to
 * fail on a closed port. */
static void
on_stopping (gpointer data, int peer)
{
  ShoalMembership *m = data;
  if (shoal_worker_stop_requested ())
    return;
  char *who = describe_where (m, peer);
  g_message ("rank %d: %s was sent a stop signal; stopping with a checkpoint", m->o.rank, who);
  g_free (who);
  shoal_worker_request_stop ();
}

ShoalMembership *
shoal_membership_start (const ShoalMembershipOptions *opts, GError **error)
{
  const ShoalLayout *l = opts->layout;
  const ShoalClusterConf *c = &l->conf;
  ShoalMembership *m = g_new0 (ShoalMembership, 1);
  m->o = *opts;
  g_mutex_init (&m->lock);
  m->dropped = g_array_new (FALSE, FALSE, sizeof (int));
  m->lost_groups = g_ptr_array_new_with_free_func (g_free);
  m->lost_ranks = g_array_new (FALSE, FALSE, sizeof (int));
  m->uses_server_group = g_new0 (gboolean, c->nserver_groups);
  m->my_group = g_new0 (gboolean, c->nworker_groups);
  m->pipe_fd = shoal_heartbeat_pipe_from_env ();
  const ShoalProcess *me = &l->procs[opts->rank];
  for (guint i = 0; i < me->workers->len; i++)
    {
      int g = g_array_index (me->workers, ShoalMember, i).group;
      m->my_group[g] = TRUE;
      m->uses_server_group[shoal_layout_server_group_of (l, g)] = TRUE;
    }

  ShoalLivenessRules rules = { (gint64) (c->heartbeat_timeout * 1e6), (gint64) (c->progress_timeout * 1e6) };
  m->liveness = shoal_liveness_new (l->nprocs, opts->rank, &rules, g_get_monotonic_time ());
  shoal_liveness_set_callbacks (m->liveness, on_lost, on_rejoin, m);
  shoal_liveness_set_on_done (m->liveness, on_done);
  gboolean listens = shoal_layout_rank_listens (l, opts->rank);
  if (opts->rejoin)
    shoal_liveness_demote (m->liveness, opts->rank);

  /* every process beats to every rank that takes calls; one that takes
   * calls hears every other, one that does not hears the replies */
  ShoalRpcClientOptions *peers = g_new0 (ShoalRpcClientOptions, l->nprocs);
  char **hosts = g_new0 (char *, l->nprocs + 1);
  for (int r = 0; r < l->nprocs; r++)
    {
      gboolean peer_listens = shoal_layout_rank_listens (l, r);
      if (r != opts->rank && (listens || peer_listens))
        shoal_liveness_watch (m->liveness, r, l->procs[r].workers->len > 0, l->procs[r].servers->len > 0);
      if (r == opts->rank || !peer_listens || opts->endpoints == NULL || opts->endpoints[r] == NULL
          || !*opts->endpoints[r])
        continue;
      GError *e = NULL;
      if (!shoal_endpoint_parse (opts->endpoints[r], &hosts[r], &peers[r].port, &e))
        {
          /* proc.c checked the endpoints; a bad one is never heard */
          g_warning ("rank %d: heartbeats to rank %d: %s", opts->rank, r, e->message);
          g_error_free (e);
          continue;
        }
      peers[r].host = hosts[r];
      peers[r].token = opts->token;
    }
  /* a beat waits at most a fifth of the timeout for a stopped peer, so
   * the others still hear from this process in time */
  gint64 call_ms = (gint64) MAX (100.0, MIN (c->heartbeat_timeout * 1000 / 5, 5000.0));
  ShoalHeartbeatOptions ho = { .rank = opts->rank, .nranks = l->nprocs, .peers = peers,
                               .interval_s = c->heartbeat_interval, .call_timeout_ms = call_ms,
                               .pipe_fd = m->pipe_fd, .rejoin = opts->rejoin,
                               .liveness = m->liveness, .on_refused = on_refused,
                               .on_stopping = on_stopping, .data = m };
  m->heartbeat = shoal_heartbeat_start (&ho, error);
  for (int r = 0; r < l->nprocs; r++)
    g_free (hosts[r]);
  g_free (hosts);
  g_free (peers);
  if (m->heartbeat == NULL)
    {
      shoal_membership_free (m);
      return NULL;
    }
  return m;
}

void
shoal_membership_free (ShoalMembership *m)
{
  if (m == NULL)
    return;
  shoal_heartbeat_stop (m->heartbeat);
  shoal_liveness_free (m->liveness);
  g_array_free (m->dropped, TRUE);
  g_ptr_array_free (m->lost_groups, TRUE);
  g_array_free (m->lost_ranks, TRUE);
  g_clear_error (&m->fatal);
  g_free (m->uses_server_group);
  g_free (m->my_group);
  g_mutex_clear (&m->lock);
  g_free (m);
}

ShoalLiveness *
shoal_membership_liveness (ShoalMembership *m)
{
  return m != NULL ? m->liveness : NULL;
}

void
shoal_membership_attach (ShoalMembership *m, ShoalServer *server, ShoalRpcServer *rpc)
{
  if (m == NULL)
    return;
  g_mutex_lock (&m->lock);
  m->server = server;
  m->rpc = rpc;
  GArray *dropped = m->dropped;
  m->dropped = g_array_new (FALSE, FALSE, sizeof (int));
  if (m->fatal != NULL && rpc != NULL)
    shoal_rpc_server_fail (rpc, m->fatal->message);
  if (m->fatal != NULL && server != NULL)
    shoal_server_stop (server);
  g_mutex_unlock (&m->lock);
  if (server != NULL || rpc != NULL)
    for (guint i = 0; i < dropped->len; i++)
      drop (m, g_array_index (dropped, int, i));
  g_array_free (dropped, TRUE);
}

gboolean
shoal_membership_group_demoted (gpointer data, int group)
{
  ShoalMembership *m = data;
  const ShoalLayout *l = m->o.layout;
  for (int r = 0; r < l->nprocs; r++)
    {
      const ShoalProcess *p = &l->procs[r];
      gboolean holds = FALSE;
      for (guint i = 0; i < p->servers->len && !holds; i++)
        holds = g_array_index (p->servers, ShoalMember, i).group == group;
      if (holds && shoal_liveness_demoted (m->liveness, r))
        return TRUE;
    }
  return FALSE;
}

int
shoal_membership_live_server_groups (ShoalMembership *m)
{
  int n = 0;
  for (int g = 0; g < m->o.layout->conf.nserver_groups; g++)
    n += !shoal_membership_group_demoted (m, g);
  return n;
}

void
shoal_membership_self_done (ShoalMembership *m)
{
  if (m != NULL)
    shoal_liveness_self_done (m->liveness);
}

gboolean
shoal_membership_check (ShoalMembership *m, gboolean at_end, GError **error)
{
  if (m == NULL)
    return TRUE;
  g_mutex_lock (&m->lock);
  gboolean ok = TRUE;
  if (m->fatal != NULL)
    {
      g_propagate_error (error, g_error_copy (m->fatal));
      ok = FALSE;
    }
  else if (at_end && m->lost_groups->len > 0 && m->o.layout->conf.all_groups_required)
    {
      g_ptr_array_add (m->lost_groups, NULL);
      char *list = g_strjoinv (", ", (char **) m->lost_groups->pdata);
      g_ptr_array_remove_index (m->lost_groups, m->lost_groups->len - 1);
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_LOST,
                   "worker groups lost: %s; the others finished, but [cluster] all_groups_required = true "
                   "fails the job (false: it ends without them)", list);
      g_free (list);
      ok = FALSE;
    }
  g_mutex_unlock (&m->lock);
  return ok;
}

char *
shoal_membership_lost_groups (ShoalMembership *m)
{
  if (m == NULL)
    return NULL;
  g_mutex_lock (&m->lock);
  char *s = NULL;
  if (m->lost_groups->len > 0)
    {
      g_ptr_array_add (m->lost_groups, NULL);
      s = g_strjoinv (", ", (char **) m->lost_groups->pdata);
      g_ptr_array_remove_index (m->lost_groups, m->lost_groups->len - 1);
    }
  g_mutex_unlock (&m->lock);
  return s;
}
