/* Slurm's environment without Slurm (cluster/slurm.h): host lists
 * expanded as `scontrol show hostnames` does (each case's expansion was
 * checked against scontrol of slurm-wlm 22.05, but for "gpu[1-2]-ib":
 * that scontrol refuses text after a last bracket, which a node list
 * never holds and we expand), bad lists refused with
 * their fault, tasks per node, and ranks placed block and cyclic. */
#include <string.h>

#include "cluster/slurm.h"
#include "core/error.h"

static void
assert_hosts (char **got, const char *want)
{
  char *joined = got != NULL ? g_strjoinv (" ", got) : g_strdup ("(null)");
  if (strcmp (joined, want) != 0)
    g_error ("got \"%s\", want \"%s\"", joined, want);
  g_free (joined);
  g_strfreev (got);
}

static void
test_expand (void)
{
  struct { const char *list, *hosts; } cases[] = {
    { "vm", "vm" },
    { "node[01-03,7]", "node01 node02 node03 node7" },
    { "node[8-11]", "node8 node9 node10 node11" },
    { "node[098-101]", "node098 node099 node100 node101" },
    { "a,b[1-2],c", "a b1 b2 c" },
    { "gpu[1-2]-ib", "gpu1-ib gpu2-ib" },
    { "r[1-2]-n[1-2]", "r1-n1 r1-n2 r2-n1 r2-n2" },
    { "n[3],m[0-0]", "n3 m0" },
    { "login1.cluster.org,cn[5-6]", "login1.cluster.org cn5 cn6" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      GError *error = NULL;
      char **hosts = shoal_slurm_expand_hostlist (cases[i].list, &error);
      g_assert_no_error (error);
      assert_hosts (hosts, cases[i].hosts);
    }
}

static void
test_bad_lists (void)
{
  struct { const char *list, *says; } cases[] = {
    { "node[1-3", "a '[' without its ']'" },
    { "node1-3]", "a ']' without its '['" },
    { "node[3-1]", "a range runs backwards" },
    { "node[a-b]", "something other than numbers" },
    { "node[]", "empty brackets" },
    { "node[1-99999999]", "more than 65536 hosts" },
    { "node[[1-2]]", "brackets inside brackets" },
    { " , ", "no hosts" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      GError *error = NULL;
      g_assert_null (shoal_slurm_expand_hostlist (cases[i].list, &error));
      g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
      if (strstr (error->message, cases[i].says) == NULL || strstr (error->message, cases[i].list) == NULL)
        g_error ("'%s': \"%s\" does not say \"%s\"", cases[i].list, error->message, cases[i].says);
      g_error_free (error);
    }
}

static void
test_tasks_per_node (void)
{
  GError *error = NULL;
  int *c = shoal_slurm_tasks_per_node ("2(x3),1", 4, &error);
  g_assert_no_error (error);
  g_assert_cmpint (c[0], ==, 2);
  g_assert_cmpint (c[2], ==, 2);
  g_assert_cmpint (c[3], ==, 1);
  g_free (c);
  const char *bad[] = { "2(x3),1", "2(x3", "x", "" };
  int nodes[] = { 3, 3, 1, 1 };
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_assert_null (shoal_slurm_tasks_per_node (bad[i], nodes[i], &error));
      g_assert_nonnull (error);
      g_clear_error (&error);
    }
}

static void
test_place (void)
{
  char *nodes[] = { "a", "b", "c", NULL };
  int counts[] = { 2, 2, 1 };
  GError *error = NULL;
  assert_hosts (shoal_slurm_place_ranks (nodes, counts, 5, NULL, &error), "a a b b c");
  assert_hosts (shoal_slurm_place_ranks (nodes, counts, 5, "block", &error), "a a b b c");
  assert_hosts (shoal_slurm_place_ranks (nodes, counts, 5, "cyclic", &error), "a b c a b");
  assert_hosts (shoal_slurm_place_ranks (nodes, counts, 5, "cyclic:block", &error), "a b c a b");
  g_assert_no_error (error);
  g_assert_null (shoal_slurm_place_ranks (nodes, counts, 5, "plane=2", &error));
  g_assert_true (strstr (error->message, "give --hostfile") != NULL);
  g_clear_error (&error);
  g_assert_null (shoal_slurm_place_ranks (nodes, counts, 4, NULL, &error));
  g_assert_true (strstr (error->message, "add up to 5, not SLURM_NTASKS=4") != NULL);
  g_clear_error (&error);
}

/* The whole environment of a step's task, scontrol out of the way. */
static void
test_environment (void)
{
  g_setenv ("PATH", "/nonexistent", TRUE);
  g_setenv ("SLURM_PROCID", "3", TRUE);
  g_setenv ("SLURM_NTASKS", "4", TRUE);
  g_setenv ("SLURM_JOB_NODELIST", "cn[7-9]", TRUE);
  g_setenv ("SLURM_STEP_NODELIST", "cn[8-9]", TRUE);
  g_setenv ("SLURM_STEP_TASKS_PER_NODE", "3,1", TRUE);
  g_unsetenv ("SLURM_DISTRIBUTION");
  int rank = -1, n = 0;
  g_assert_true (shoal_slurm_task (&rank, &n));
  g_assert_cmpint (rank, ==, 3);
  g_assert_cmpint (n, ==, 4);
  GError *error = NULL;
  assert_hosts (shoal_slurm_rank_hosts (n, &error), "cn8 cn8 cn8 cn9");
  g_assert_no_error (error);
  g_unsetenv ("SLURM_STEP_TASKS_PER_NODE");
  g_unsetenv ("SLURM_TASKS_PER_NODE");
  g_assert_null (shoal_slurm_rank_hosts (n, &error));
  g_assert_true (strstr (error->message, "SLURM_TASKS_PER_NODE is not set") != NULL);
  g_clear_error (&error);
  g_setenv ("SLURM_JOB_ID", "12345", TRUE);
  g_setenv ("SLURM_STEP_ID", "0", TRUE);
  int base = shoal_slurm_base_port ();
  g_assert_cmpint (base, >=, 30000);
  g_assert_cmpint (base, <=, 61984);
  g_setenv ("SLURM_STEP_ID", "1", TRUE);
  g_assert_cmpint (shoal_slurm_base_port (), !=, base);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/slurm/expand", test_expand);
  g_test_add_func ("/slurm/bad-lists", test_bad_lists);
  g_test_add_func ("/slurm/tasks-per-node", test_tasks_per_node);
  g_test_add_func ("/slurm/place", test_place);
  g_test_add_func ("/slurm/environment", test_environment);
  return g_test_run ();
}
