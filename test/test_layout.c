/* The cluster layout decides which process runs which worker and server
 * and who serves which slice; every rank computes it on its own, so the
 * placement must be exactly the documented one.  These tests pin the
 * four schemes' layouts, the rank helpers against the process tables,
 * the slice mapping, and each rejection message. */
#include <glib.h>
#include <string.h>

#include "cluster/layout.h"
#include "job/job.h"
#include "core/error.h"

static ShoalClusterConf
cluster (int wg, int k, int sg, int s, int wpp, int spp, gboolean separate)
{
  ShoalClusterConf c = {
    .nworker_groups = wg, .nworkers_per_group = k, .nserver_groups = sg,
    .nservers_per_group = s, .nworkers_per_procs = wpp, .nservers_per_procs = spp,
    .server_worker_separate = separate, .sync_freq = 1,
  };
  return c;
}

static ShoalLayout *
layout_ok (ShoalClusterConf c)
{
  GError *error = NULL;
  ShoalLayout *l = shoal_layout_new (&c, NULL, &error);
  g_assert_no_error (error);
  g_assert_nonnull (l);
  return l;
}

/* Members of one process as "g,i g,i ..." (g_free). */
static char *
members (GArray *a)
{
  GString *s = g_string_new (NULL);
  for (guint i = 0; i < a->len; i++)
    {
      const ShoalMember *m = &g_array_index (a, ShoalMember, i);
      g_string_append_printf (s, "%s%d,%d", i ? " " : "", m->group, m->index);
    }
  return g_string_free (s, FALSE);
}

static void
assert_proc (const ShoalLayout *l, int rank, const char *workers, const char *servers)
{
  g_assert_cmpint (rank, <, l->nprocs);
  g_assert_cmpint (l->procs[rank].rank, ==, rank);
  char *w = members (l->procs[rank].workers);
  char *s = members (l->procs[rank].servers);
  g_assert_cmpstr (w, ==, workers);
  g_assert_cmpstr (s, ==, servers);
  g_free (w);
  g_free (s);
}

/* The helpers and the process tables must tell the same story: every
 * member sits in the process the helper names, exactly once. */
static void
assert_helpers_agree (const ShoalLayout *l)
{
  const ShoalClusterConf *c = &l->conf;
  int nworkers = 0, nservers = 0;
  for (int r = 0; r < l->nprocs; r++)
    {
      GArray *w = l->procs[r].workers, *s = l->procs[r].servers;
      if (r >= l->nworker_procs)
        g_assert_cmpuint (w->len, ==, 0);
      else
        g_assert_cmpuint (w->len, >, 0);
      for (guint i = 0; i < w->len; i++)
        {
          const ShoalMember *m = &g_array_index (w, ShoalMember, i);
          g_assert_cmpint (shoal_layout_worker_rank (l, m->group, m->index), ==, r);
        }
      for (guint i = 0; i < s->len; i++)
        {
          const ShoalMember *m = &g_array_index (s, ShoalMember, i);
          g_assert_cmpint (shoal_layout_server_rank (l, m->group, m->index), ==, r);
        }
      nworkers += (int) w->len;
      nservers += (int) s->len;
    }
  g_assert_cmpint (nworkers, ==, c->nworker_groups * c->nworkers_per_group);
  g_assert_cmpint (nservers, ==, c->nserver_groups * c->nservers_per_group);
  /* every server and every master group gets the same number of slices */
  int *per_server = g_new0 (int, c->nservers_per_group);
  int *per_master = g_new0 (int, c->nserver_groups);
  for (int i = 0; i < l->nslices; i++)
    {
      per_server[shoal_layout_server_of_slice (l, i)]++;
      per_master[shoal_layout_master_group_of_slice (l, i)]++;
    }
  for (int i = 0; i < c->nservers_per_group; i++)
    g_assert_cmpint (per_server[i], ==, l->nslices / c->nservers_per_group);
  for (int i = 0; i < c->nserver_groups; i++)
    g_assert_cmpint (per_master[i], ==, l->nslices / c->nserver_groups);
  g_free (per_server);
  g_free (per_master);
}

static void
test_sandblaster (void)
{
  /* one group of 2 workers in one process, 2 servers in a process of their own */
  ShoalLayout *l = layout_ok (cluster (1, 2, 1, 2, 2, 2, TRUE));
  g_assert_cmpint (l->nprocs, ==, 2);
  g_assert_cmpint (l->nworker_procs, ==, 1);
  assert_proc (l, 0, "0,0 0,1", "");
  assert_proc (l, 1, "", "0,0 0,1");
  g_assert_cmpint (l->nslices, ==, 2);
  g_assert_cmpint (l->mode, ==, SHOAL_UPDATE_SYNC);
  g_assert_cmpint (l->sync_contributors, ==, 2);
  g_assert_false (l->group_sync);
  g_assert_cmpint (shoal_layout_server_of_slice (l, 0), ==, 0);
  g_assert_cmpint (shoal_layout_server_of_slice (l, 1), ==, 1);
  g_assert_cmpint (shoal_layout_server_group_of (l, 0), ==, 0);
  assert_helpers_agree (l);
  shoal_layout_free (l);

  /* a process per worker, two servers per process: 4 + 2 processes */
  l = layout_ok (cluster (1, 4, 1, 4, 1, 2, TRUE));
  g_assert_cmpint (l->nprocs, ==, 6);
  g_assert_cmpint (l->nworker_procs, ==, 4);
  assert_proc (l, 3, "0,3", "");
  assert_proc (l, 4, "", "0,0 0,1");
  assert_proc (l, 5, "", "0,2 0,3");
  g_assert_cmpint (shoal_layout_server_rank (l, 0, 3), ==, 5);
  g_assert_cmpint (l->nslices, ==, 4);
  g_assert_cmpint (l->sync_contributors, ==, 4);
  assert_helpers_agree (l);
  shoal_layout_free (l);
}

static void
test_allreduce (void)
{
  /* a server beside each worker, a process each */
  ShoalLayout *l = layout_ok (cluster (1, 2, 1, 2, 1, 1, FALSE));
  g_assert_cmpint (l->nprocs, ==, 2);
  g_assert_cmpint (l->nworker_procs, ==, 2);
  assert_proc (l, 0, "0,0", "0,0");
  assert_proc (l, 1, "0,1", "0,1");
  g_assert_cmpint (l->nslices, ==, 2);
  g_assert_cmpint (l->mode, ==, SHOAL_UPDATE_SYNC);
  g_assert_cmpint (l->sync_contributors, ==, 2);
  g_assert_false (l->group_sync);
  assert_helpers_agree (l);
  shoal_layout_free (l);

  /* the same cluster in one process: what `shoal run` keeps in-process */
  l = layout_ok (cluster (1, 2, 1, 2, 2, 2, FALSE));
  g_assert_cmpint (l->nprocs, ==, 1);
  assert_proc (l, 0, "0,0 0,1", "0,0 0,1");
  assert_helpers_agree (l);
  shoal_layout_free (l);

  /* the default conf: one worker, one server, one process */
  l = layout_ok (cluster (1, 1, 1, 1, 1, 1, FALSE));
  g_assert_cmpint (l->nprocs, ==, 1);
  g_assert_cmpint (l->nslices, ==, 1);
  assert_proc (l, 0, "0,0", "0,0");
  shoal_layout_free (l);
}

static void
test_downpour (void)
{
  /* 2 groups of 2 workers, a process per group, one server group apart */
  ShoalLayout *l = layout_ok (cluster (2, 2, 1, 2, 2, 2, TRUE));
  g_assert_cmpint (l->nprocs, ==, 3);
  g_assert_cmpint (l->nworker_procs, ==, 2);
  assert_proc (l, 0, "0,0 0,1", "");
  assert_proc (l, 1, "1,0 1,1", "");
  assert_proc (l, 2, "", "0,0 0,1");
  g_assert_cmpint (l->mode, ==, SHOAL_UPDATE_ASYNC);
  g_assert_false (l->group_sync);
  g_assert_cmpint (shoal_layout_server_group_of (l, 0), ==, 0);
  g_assert_cmpint (shoal_layout_server_group_of (l, 1), ==, 0);
  g_assert_cmpint (shoal_layout_worker_rank (l, 1, 1), ==, 1);
  g_assert_cmpint (shoal_layout_server_rank (l, 0, 1), ==, 2);
  assert_helpers_agree (l);
  shoal_layout_free (l);

  /* two groups in one process (a multiple of the group size) */
  l = layout_ok (cluster (4, 1, 1, 1, 2, 1, TRUE));
  g_assert_cmpint (l->nprocs, ==, 3);
  assert_proc (l, 0, "0,0 1,0", "");
  assert_proc (l, 1, "2,0 3,0", "");
  assert_proc (l, 2, "", "0,0");
  assert_helpers_agree (l);
  shoal_layout_free (l);

  /* Downpour with the one server group beside group 0's workers */
  l = layout_ok (cluster (2, 2, 1, 2, 2, 2, FALSE));
  g_assert_cmpint (l->nprocs, ==, 2);
  assert_proc (l, 0, "0,0 0,1", "0,0 0,1");
  assert_proc (l, 1, "1,0 1,1", "");
  g_assert_cmpint (l->mode, ==, SHOAL_UPDATE_ASYNC);
  assert_helpers_agree (l);
  shoal_layout_free (l);
}

static void
test_hogwild (void)
{
  /* a server group inside each worker group's process */
  ShoalLayout *l = layout_ok (cluster (2, 2, 2, 2, 2, 2, FALSE));
  g_assert_cmpint (l->nprocs, ==, 2);
  g_assert_cmpint (l->nworker_procs, ==, 2);
  assert_proc (l, 0, "0,0 0,1", "0,0 0,1");
  assert_proc (l, 1, "1,0 1,1", "1,0 1,1");
  g_assert_cmpint (l->mode, ==, SHOAL_UPDATE_ASYNC);
  g_assert_true (l->group_sync);
  g_assert_cmpint (l->nslices, ==, 2);
  g_assert_cmpint (shoal_layout_server_group_of (l, 1), ==, 1);
  g_assert_cmpint (shoal_layout_master_group_of_slice (l, 0), ==, 0);
  g_assert_cmpint (shoal_layout_master_group_of_slice (l, 1), ==, 1);
  assert_helpers_agree (l);
  shoal_layout_free (l);

  /* lcm(2, 3) = 6 slices: slice 4 is served by server 1 and mastered by group 0 */
  l = layout_ok (cluster (4, 3, 2, 3, 3, 3, FALSE));
  g_assert_cmpint (l->nprocs, ==, 4);
  g_assert_cmpint (l->nslices, ==, 6);
  g_assert_cmpint (shoal_layout_server_of_slice (l, 4), ==, 1);
  g_assert_cmpint (shoal_layout_master_group_of_slice (l, 4), ==, 0);
  g_assert_cmpint (shoal_layout_master_group_of_slice (l, 5), ==, 1);
  /* groups 2 and 3 share the server groups of 0 and 1 and host none */
  assert_proc (l, 1, "1,0 1,1 1,2", "1,0 1,1 1,2");
  assert_proc (l, 2, "2,0 2,1 2,2", "");
  g_assert_cmpint (shoal_layout_server_group_of (l, 2), ==, 0);
  g_assert_cmpint (shoal_layout_server_group_of (l, 3), ==, 1);
  assert_helpers_agree (l);
  shoal_layout_free (l);

  /* a process per worker: servers follow worker s % k, so 1 server per
   * group lives in the group's first process */
  l = layout_ok (cluster (2, 2, 2, 1, 1, 1, FALSE));
  g_assert_cmpint (l->nprocs, ==, 4);
  assert_proc (l, 0, "0,0", "0,0");
  assert_proc (l, 1, "0,1", "");
  assert_proc (l, 2, "1,0", "1,0");
  assert_proc (l, 3, "1,1", "");
  assert_helpers_agree (l);
  shoal_layout_free (l);
}

/* Error message for a cluster with conf NULL (g_free). */
static char *
layout_error (ShoalClusterConf c)
{
  GError *error = NULL;
  ShoalLayout *l = shoal_layout_new (&c, NULL, &error);
  g_assert_null (l);
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
  char *msg = g_strdup (error->message);
  g_error_free (error);
  return msg;
}

static void
assert_rejected (ShoalClusterConf c, const char *want)
{
  char *msg = layout_error (c);
  g_assert_cmpstr (msg, ==, want);
  g_free (msg);
}

static void
test_rejections (void)
{
  assert_rejected (cluster (1, 4, 1, 1, 3, 1, TRUE),
                   "[cluster] nworkers_per_procs: 3 must divide nworkers_per_group (4) or be a "
                   "multiple of it: a process holds an equal part of one group or whole groups "
                   "of workers");
  assert_rejected (cluster (1, 4, 1, 1, 6, 1, TRUE),
                   "[cluster] nworkers_per_procs: 6 must divide nworkers_per_group (4) or be a "
                   "multiple of it: a process holds an equal part of one group or whole groups "
                   "of workers");
  assert_rejected (cluster (3, 2, 1, 1, 4, 1, TRUE),
                   "[cluster] nworkers_per_procs: 4 workers per process leave the last process "
                   "part-filled: nworker_groups (3) x nworkers_per_group (2) = 6 workers must be "
                   "a multiple of it");
  assert_rejected (cluster (1, 2, 1, 4, 2, 3, TRUE),
                   "[cluster] nservers_per_procs: 3 must divide nservers_per_group (4) or be a "
                   "multiple of it: a process holds an equal part of one group or whole groups "
                   "of servers");
  assert_rejected (cluster (2, 2, 2, 2, 2, 2, TRUE),
                   "[cluster] nserver_groups: 2 server groups is Hogwild, where each server group "
                   "lives in its worker group's processes; it cannot have server_worker_separate "
                   "= true (use one server group for Downpour, or servers beside the workers)");
  assert_rejected (cluster (3, 2, 2, 2, 2, 2, FALSE),
                   "[cluster] nserver_groups: 2 must divide nworker_groups (3): with "
                   "server_worker_separate = false server group g lives in worker group g's "
                   "processes and worker group w talks to server group w % nserver_groups");
  assert_rejected (cluster (1, 2, 2, 1, 2, 2, FALSE),
                   "[cluster] nserver_groups: 2 must divide nworker_groups (1): with "
                   "server_worker_separate = false server group g lives in worker group g's "
                   "processes and worker group w talks to server group w % nserver_groups");
  assert_rejected (cluster (1, 2, 1, 4, 1, 1, FALSE),
                   "[cluster] nservers_per_group: 4 servers per group beside 2 workers per group "
                   "put 2 servers into process 0, more than nservers_per_procs (1): with "
                   "server_worker_separate = false server s lives in the process of worker "
                   "s % nworkers_per_group of its group");
  /* uneven: worker 0 of 2 gets servers 0 and 2 */
  assert_rejected (cluster (1, 2, 1, 3, 2, 2, FALSE),
                   "[cluster] nservers_per_group: 3 servers per group beside 2 workers per group "
                   "put 3 servers into process 0, more than nservers_per_procs (2): with "
                   "server_worker_separate = false server s lives in the process of worker "
                   "s % nworkers_per_group of its group");

  assert_rejected (cluster (2, 1, 2, 1, 2, 2, FALSE),
                   "[cluster] nworkers_per_procs: 2 puts worker groups 0 and 1 into one process, "
                   "and with them server groups 0 and 1: Hogwild's replicas would sync over "
                   "loopback inside a process; with several server groups give each worker group "
                   "its own processes (at most nworkers_per_group = 1)");
  /* one server group may share a process with several worker groups */
  ShoalLayout *l = layout_ok (cluster (2, 1, 1, 1, 2, 1, FALSE));
  g_assert_cmpint (l->nprocs, ==, 1);
  shoal_layout_free (l);

  ShoalClusterConf c = cluster (1, 1, 1, 1, 1, 1, FALSE);
  c.sync_freq = 0;
  assert_rejected (c, "[cluster] sync_freq: 0: server groups sync after at least 1 update");
  c = cluster (1, 0, 1, 1, 1, 1, FALSE);
  assert_rejected (c, "[cluster] nworkers_per_group: 0 is out of range [1, 4096]");
  c = cluster (1, 1, 1, 1, 1, 5000, FALSE);
  assert_rejected (c, "[cluster] nservers_per_procs: 5000 is out of range [1, 4096]");
}

/* Which ranks get an endpoint: "1" for each rank that listens. */
static void
assert_listens (ShoalClusterConf c, const char *want)
{
  ShoalLayout *l = layout_ok (c);
  GString *got = g_string_new (NULL);
  for (int r = 0; r < l->nprocs; r++)
    g_string_append_c (got, shoal_layout_rank_listens (l, r) ? '1' : '0');
  g_assert_cmpstr (got->str, ==, want);
  g_assert_false (shoal_layout_rank_listens (l, -1));
  g_assert_false (shoal_layout_rank_listens (l, l->nprocs));
  g_string_free (got, TRUE);
  shoal_layout_free (l);
}

static void
test_rank_listens (void)
{
  /* servers listen; a process holding whole groups and no server does not */
  assert_listens (cluster (1, 2, 1, 2, 2, 2, TRUE), "01");
  assert_listens (cluster (2, 2, 1, 1, 2, 1, TRUE), "001");
  assert_listens (cluster (2, 2, 1, 1, 2, 1, FALSE), "10");
  /* every process of a spread group listens, with or without servers */
  assert_listens (cluster (1, 2, 1, 2, 1, 2, TRUE), "111");
  assert_listens (cluster (1, 4, 1, 1, 2, 1, FALSE), "11");
  assert_listens (cluster (2, 4, 1, 1, 2, 1, TRUE), "11111");
  /* Hogwild beside the workers: servers everywhere */
  assert_listens (cluster (2, 2, 2, 1, 2, 1, FALSE), "11");
}

/* Through the job loader: the message names the file and line of the key,
 * or the -o that set it. */
static void
test_conf_places (void)
{
  GError *error = NULL;
  ShoalJob *job = shoal_job_load_data ("[job]\ntrain_steps = 10\n"
                                       "[cluster]\n"                       /* 3 */
                                       "nworker_groups = 2\n"              /* 4 */
                                       "nserver_groups = 2\n"              /* 5 */
                                       "server_worker_separate = true\n",  /* 6 */
                                       "x.conf", NULL, &error);
  g_assert_null (job);
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
  g_assert_true (g_str_has_prefix (error->message, "x.conf:5: [cluster] nserver_groups: 2 server "
                                                   "groups is Hogwild"));
  g_clear_error (&error);

  const char *const o[] = { "cluster.nworkers_per_procs=3", NULL };
  job = shoal_job_load_data ("[job]\ntrain_steps = 10\n[cluster]\nnworkers_per_group = 4\n",
                             "x.conf", o, &error);
  g_assert_null (job);
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
  g_assert_true (g_str_has_prefix (error->message, "-o cluster.nworkers_per_procs: [cluster] "
                                                   "nworkers_per_procs: 3 must divide"));
  g_clear_error (&error);

  /* valid multi-process layouts load */
  job = shoal_job_load_data ("[job]\ntrain_steps = 10\n[cluster]\nnworker_groups = 2\n"
                             "nworkers_per_group = 2\nnworkers_per_procs = 2\n"
                             "server_worker_separate = true\nnservers_per_group = 2\n"
                             "nservers_per_procs = 2\n",
                             "x.conf", NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpint (job->cluster.nworker_groups, ==, 2);
  g_assert_true (job->cluster.server_worker_separate);
  shoal_job_free (job);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/layout/sandblaster", test_sandblaster);
  g_test_add_func ("/layout/allreduce", test_allreduce);
  g_test_add_func ("/layout/downpour", test_downpour);
  g_test_add_func ("/layout/hogwild", test_hogwild);
  g_test_add_func ("/layout/rejections", test_rejections);
  g_test_add_func ("/layout/conf-places", test_conf_places);
  g_test_add_func ("/layout/rank-listens", test_rank_listens);
  return g_test_run ();
}
