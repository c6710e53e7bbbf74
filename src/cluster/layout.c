/* The cluster layout: checks SINGA's [cluster] fields once, here, so
 * that the launcher, every rank and the tests agree on one placement of
 * workers, servers and slices (the rules are in layout.h).
 *
 * What SINGA allows, and why the rest is refused:
 * - Workers are packed nworkers_per_procs per process.  A process must
 *   hold whole groups or an equal part of one group (nworkers_per_procs
 *   divides nworkers_per_group or is a multiple of it); otherwise a
 *   group's barrier would span processes unevenly and a process would mix
 *   a part of one group with a part of another.  Several whole groups per
 *   process must fill every process (nworker_groups * nworkers_per_group
 *   a multiple of nworkers_per_procs).  Servers in processes of their own
 *   follow the same rules with nservers_per_procs / nservers_per_group.
 * - Servers beside workers (server_worker_separate false): server group
 *   sg lives in worker group sg's processes, server s beside worker
 *   s % nworkers_per_group.  So every server group needs a worker group
 *   to live in and the worker groups must share the server groups evenly
 *   (nserver_groups divides nworker_groups), and no process may end up
 *   with more servers than nservers_per_procs.  With several server
 *   groups a process holds at most one worker group, else two replicas
 *   would share a process and sync with each other over loopback.
 * - Several server groups are Hogwild: each worker group updates a
 *   replica in its own processes and the groups exchange deltas every
 *   sync_freq updates.  Server groups in processes of their own would put
 *   the network back between workers and their replica, so that is
 *   refused (one server group, Downpour, is what such a layout wants).
 * - A conf is checked in the order of the fields, so the first message
 *   names the first field to fix. */
#include "cluster/layout.h"

#include <stdarg.h>

#include "core/error.h"

static void
layout_error (ShoalConf *conf, GError **error, const char *key, const char *format, ...)
  G_GNUC_PRINTF (4, 5);

static void
layout_error (ShoalConf *conf, GError **error, const char *key, const char *format, ...)
{
  va_list ap;
  va_start (ap, format);
  char *msg = g_strdup_vprintf (format, ap);
  va_end (ap);
  if (conf != NULL)
    shoal_conf_error (conf, error, "cluster", key, "%s", msg);
  else
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "[cluster] %s: %s", key, msg);
  g_free (msg);
}

static int
gcd (int a, int b)
{
  while (b != 0)
    {
      int t = a % b;
      a = b;
      b = t;
    }
  return a;
}

/* per_procs members per process over groups of group_size: one of them
 * must divide the other, and whole groups must fill whole processes. */
static gboolean
check_packing (ShoalConf *conf, GError **error, const char *procs_key, int per_procs,
               const char *group_key, int group_size, const char *ngroups_key, int ngroups,
               const char *what)
{
  if (per_procs <= group_size)
    {
      if (group_size % per_procs != 0)
        {
          layout_error (conf, error, procs_key,
                        "%d must divide %s (%d) or be a multiple of it: a process holds an "
                        "equal part of one group or whole groups of %s",
                        per_procs, group_key, group_size, what);
          return FALSE;
        }
      return TRUE;
    }
  if (per_procs % group_size != 0)
    {
      layout_error (conf, error, procs_key,
                    "%d must divide %s (%d) or be a multiple of it: a process holds an "
                    "equal part of one group or whole groups of %s",
                    per_procs, group_key, group_size, what);
      return FALSE;
    }
  if ((gint64) ngroups * group_size % per_procs != 0)
    {
      layout_error (conf, error, procs_key,
                    "%d %s per process leave the last process part-filled: %s (%d) x %s (%d) "
                    "= %d %s must be a multiple of it",
                    per_procs, what, ngroups_key, ngroups, group_key, group_size,
                    ngroups * group_size, what);
      return FALSE;
    }
  return TRUE;
}

static gboolean
validate (const ShoalClusterConf *c, ShoalConf *conf, GError **error)
{
  const struct {
    const char *key;
    int value;
  } counts[] = {
    { "nworker_groups", c->nworker_groups },
    { "nworkers_per_group", c->nworkers_per_group },
    { "nserver_groups", c->nserver_groups },
    { "nservers_per_group", c->nservers_per_group },
    { "nworkers_per_procs", c->nworkers_per_procs },
    { "nservers_per_procs", c->nservers_per_procs },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (counts); i++)
    if (counts[i].value < 1 || counts[i].value > 4096)
      {
        layout_error (conf, error, counts[i].key, "%d is out of range [1, 4096]", counts[i].value);
        return FALSE;
      }
  if (c->sync_freq < 1)
    {
      layout_error (conf, error, "sync_freq",
                    "%d: server groups sync after at least 1 update", c->sync_freq);
      return FALSE;
    }
  if (!check_packing (conf, error, "nworkers_per_procs", c->nworkers_per_procs,
                      "nworkers_per_group", c->nworkers_per_group, "nworker_groups",
                      c->nworker_groups, "workers"))
    return FALSE;

  if (c->server_worker_separate)
    {
      if (c->nserver_groups > 1)
        {
          layout_error (conf, error, "nserver_groups",
                        "%d server groups is Hogwild, where each server group lives in its "
                        "worker group's processes; it cannot have server_worker_separate = true "
                        "(use one server group for Downpour, or servers beside the workers)",
                        c->nserver_groups);
          return FALSE;
        }
      return check_packing (conf, error, "nservers_per_procs", c->nservers_per_procs,
                            "nservers_per_group", c->nservers_per_group, "nserver_groups",
                            c->nserver_groups, "servers");
    }

  if (c->nserver_groups > c->nworker_groups || c->nworker_groups % c->nserver_groups != 0)
    {
      layout_error (conf, error, "nserver_groups",
                    "%d must divide nworker_groups (%d): with server_worker_separate = false "
                    "server group g lives in worker group g's processes and worker group w "
                    "talks to server group w %% nserver_groups",
                    c->nserver_groups, c->nworker_groups);
      return FALSE;
    }
  if (c->nserver_groups > 1 && c->nworkers_per_procs > c->nworkers_per_group)
    {
      layout_error (conf, error, "nworkers_per_procs",
                    "%d puts worker groups 0 and 1 into one process, and with them server "
                    "groups 0 and 1: Hogwild's replicas would sync over loopback inside a "
                    "process; with several server groups give each worker group its own "
                    "processes (at most nworkers_per_group = %d)",
                    c->nworkers_per_procs, c->nworkers_per_group);
      return FALSE;
    }
  return TRUE;
}

static int
worker_rank (const ShoalClusterConf *c, int group, int worker)
{
  return (group * c->nworkers_per_group + worker) / c->nworkers_per_procs;
}

static int
server_rank (const ShoalClusterConf *c, int nworker_procs, int server_group, int server)
{
  if (c->server_worker_separate)
    return nworker_procs + (server_group * c->nservers_per_group + server) / c->nservers_per_procs;
  return worker_rank (c, server_group, server % c->nworkers_per_group);
}

ShoalLayout *
shoal_layout_new (const ShoalClusterConf *cluster, ShoalConf *conf, GError **error)
{
  g_return_val_if_fail (cluster != NULL, NULL);
  if (!validate (cluster, conf, error))
    return NULL;

  const ShoalClusterConf *c = cluster;
  ShoalLayout *layout = g_new0 (ShoalLayout, 1);
  layout->conf = *c;
  layout->nworker_procs = c->nworker_groups * c->nworkers_per_group / c->nworkers_per_procs;
  int nserver_procs = 0;
  if (c->server_worker_separate)
    nserver_procs = c->nserver_groups * c->nservers_per_group / c->nservers_per_procs;
  layout->nprocs = layout->nworker_procs + nserver_procs;
  /* lcm: every server of a group gets the same number of slices, and so
   * does every master group.  Any multiple would keep that; a factor for
   * smaller slices of big models needs the param count, which the runner
   * knows and the cluster conf does not, so the layout stays at lcm. */
  layout->nslices = c->nserver_groups / gcd (c->nserver_groups, c->nservers_per_group)
                    * c->nservers_per_group;
  layout->mode = c->nworker_groups == 1 ? SHOAL_UPDATE_SYNC : SHOAL_UPDATE_ASYNC;
  layout->sync_contributors = c->nworkers_per_group;
  layout->group_sync = c->nserver_groups > 1;

  layout->procs = g_new0 (ShoalProcess, layout->nprocs);
  for (int r = 0; r < layout->nprocs; r++)
    {
      layout->procs[r].rank = r;
      layout->procs[r].workers = g_array_new (FALSE, FALSE, sizeof (ShoalMember));
      layout->procs[r].servers = g_array_new (FALSE, FALSE, sizeof (ShoalMember));
    }
  for (int g = 0; g < c->nworker_groups; g++)
    for (int w = 0; w < c->nworkers_per_group; w++)
      {
        ShoalMember m = { g, w };
        g_array_append_val (layout->procs[worker_rank (c, g, w)].workers, m);
      }
  for (int sg = 0; sg < c->nserver_groups; sg++)
    for (int s = 0; s < c->nservers_per_group; s++)
      {
        ShoalMember m = { sg, s };
        g_array_append_val (layout->procs[server_rank (c, layout->nworker_procs, sg, s)].servers, m);
      }

  /* beside workers, how many servers a process gets follows from the
   * placement; nservers_per_procs caps it */
  if (!c->server_worker_separate)
    for (int r = 0; r < layout->nprocs; r++)
      {
        int n = (int) layout->procs[r].servers->len;
        if (n > c->nservers_per_procs)
          {
            layout_error (conf, error, "nservers_per_group",
                          "%d servers per group beside %d workers per group put %d servers into "
                          "process %d, more than nservers_per_procs (%d): with "
                          "server_worker_separate = false server s lives in the process of "
                          "worker s %% nworkers_per_group of its group",
                          c->nservers_per_group, c->nworkers_per_group, n, r,
                          c->nservers_per_procs);
            shoal_layout_free (layout);
            return NULL;
          }
      }
  return layout;
}

void
shoal_layout_free (ShoalLayout *layout)
{
  if (layout == NULL)
    return;
  for (int r = 0; r < layout->nprocs; r++)
    {
      g_array_free (layout->procs[r].workers, TRUE);
      g_array_free (layout->procs[r].servers, TRUE);
    }
  g_free (layout->procs);
  g_free (layout);
}

int
shoal_layout_worker_rank (const ShoalLayout *layout, int group, int worker)
{
  const ShoalClusterConf *c = &layout->conf;
  g_return_val_if_fail (group >= 0 && group < c->nworker_groups, -1);
  g_return_val_if_fail (worker >= 0 && worker < c->nworkers_per_group, -1);
  return worker_rank (c, group, worker);
}

int
shoal_layout_server_rank (const ShoalLayout *layout, int server_group, int server)
{
  const ShoalClusterConf *c = &layout->conf;
  g_return_val_if_fail (server_group >= 0 && server_group < c->nserver_groups, -1);
  g_return_val_if_fail (server >= 0 && server < c->nservers_per_group, -1);
  return server_rank (c, layout->nworker_procs, server_group, server);
}

int
shoal_layout_server_group_of (const ShoalLayout *layout, int worker_group)
{
  g_return_val_if_fail (worker_group >= 0 && worker_group < layout->conf.nworker_groups, -1);
  return worker_group % layout->conf.nserver_groups;
}

int
shoal_layout_server_of_slice (const ShoalLayout *layout, int slice)
{
  g_return_val_if_fail (slice >= 0 && slice < layout->nslices, -1);
  return slice % layout->conf.nservers_per_group;
}

int
shoal_layout_master_group_of_slice (const ShoalLayout *layout, int slice)
{
  g_return_val_if_fail (slice >= 0 && slice < layout->nslices, -1);
  return slice % layout->conf.nserver_groups;
}

gboolean
shoal_layout_rank_listens (const ShoalLayout *layout, int rank)
{
  if (rank < 0 || rank >= layout->nprocs)
    return FALSE;
  const ShoalProcess *p = &layout->procs[rank];
  return p->servers->len > 0
         || (p->workers->len > 0 && layout->conf.nworkers_per_procs < layout->conf.nworkers_per_group);
}

char *
shoal_layout_describe_rank (const ShoalLayout *layout, int r)
{
  if (r < 0 || r >= layout->nprocs)
    return g_strdup_printf ("rank %d", r);
  const ShoalProcess *p = &layout->procs[r];
  GString *s = g_string_new (NULL);
  g_string_append_printf (s, "rank %d (", r);
  if (p->workers->len > 0)
    {
      int first = g_array_index (p->workers, ShoalMember, 0).group;
      int last = g_array_index (p->workers, ShoalMember, p->workers->len - 1).group;
      g_string_append_printf (s, "%u worker%s of group %d", p->workers->len,
                              p->workers->len == 1 ? "" : "s", first);
      if (last != first)
        g_string_append_printf (s, "-%d", last);
    }
  if (p->servers->len > 0)
    g_string_append_printf (s, "%s%u server%s", p->workers->len ? ", " : "", p->servers->len,
                            p->servers->len == 1 ? "" : "s");
  g_string_append_c (s, ')');
  return g_string_free (s, FALSE);
}

static void
append_members (GString *s, const char *what, GArray *members)
{
  if (members->len == 0)
    return;
  g_string_append_printf (s, " %s", what);
  for (guint i = 0; i < members->len; i++)
    {
      const ShoalMember *m = &g_array_index (members, ShoalMember, i);
      g_string_append_printf (s, "%s(%d,%d)", i ? "," : " ", m->group, m->index);
    }
}

void
shoal_layout_log (const ShoalLayout *layout)
{
  const ShoalClusterConf *c = &layout->conf;
  g_message ("layout: %d worker group(s) x %d, %d server group(s) x %d, servers %s, %d "
             "process(es), %d slice(s), %s%s",
             c->nworker_groups, c->nworkers_per_group, c->nserver_groups, c->nservers_per_group,
             c->server_worker_separate ? "separate" : "beside workers", layout->nprocs,
             layout->nslices, layout->mode == SHOAL_UPDATE_SYNC ? "sync" : "async",
             layout->group_sync ? ", server groups sync" : "");
  for (int r = 0; r < layout->nprocs; r++)
    {
      GString *s = g_string_new (NULL);
      g_string_append_printf (s, "rank %d:", r);
      append_members (s, "workers", layout->procs[r].workers);
      append_members (s, "servers", layout->procs[r].servers);
      g_message ("%s", s->str);
      g_string_free (s, TRUE);
    }
}
