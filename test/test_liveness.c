/* Liveness without waiting: the rules of server/liveness.h on a clock the
 * test moves, the lost lists peers exchange, SSP dropping a lost unit,
 * Hogwild's slice masters moving off a lost group, and the workspace
 * claim (workspace/workspace_claim.h): an earlier run moved aside, a resume
 * of another run refused without touching job.conf, metrics trimmed to
 * the checkpoint. */
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "core/conf.h"
#include "core/error.h"
#include "server/group_sync.h"
#include "server/liveness.h"
#include "server/ssp.h"
#include "workspace/workspace_claim.h"

#define S(x) ((gint64) ((x) * 1e6))

typedef struct {
  GPtrArray *lost;   /* "rank: why" */
  int rejoined;
} Seen;

static void
on_lost (gpointer data, int rank, const char *why)
{
  Seen *s = data;
  g_ptr_array_add (s->lost, g_strdup_printf ("%d: %s", rank, why));
}

static void
on_rejoin (gpointer data, int rank)
{
  Seen *s = data;
  (void) rank;
  s->rejoined++;
}

static ShoalLiveness *
table (Seen *seen, int nranks)
{
  ShoalLivenessRules rules = { S (15), S (300) };
  ShoalLiveness *lv = shoal_liveness_new (nranks, 0, &rules, 0);
  seen->lost = g_ptr_array_new_with_free_func (g_free);
  seen->rejoined = 0;
  shoal_liveness_set_callbacks (lv, on_lost, on_rejoin, seen);
  return lv;
}

static void
test_silent_rank_lost (void)
{
  Seen seen;
  ShoalLiveness *lv = table (&seen, 3);
  shoal_liveness_watch (lv, 1, TRUE, FALSE);
  shoal_liveness_watch (lv, 2, FALSE, TRUE);
  g_assert_cmpint (shoal_liveness_state (lv, 1), ==, SHOAL_RANK_WAITING);
  shoal_liveness_heard (lv, 1, 11, 5, FALSE, S (1), NULL);
  shoal_liveness_heard (lv, 2, 22, -1, FALSE, S (1), NULL);
  /* rank 1 keeps beating; rank 2 stops at 1 s */
  for (int t = 2; t <= 15; t++)
    {
      shoal_liveness_heard (lv, 1, 11, 5 + t, FALSE, S (t), NULL);
      shoal_liveness_check (lv, S (t));
    }
  g_assert_cmpuint (seen.lost->len, ==, 0);
  shoal_liveness_check (lv, S (16.2));
  g_assert_cmpuint (seen.lost->len, ==, 1);
  g_assert_cmpstr (g_ptr_array_index (seen.lost, 0), ==,
                   "2: no heartbeat for 15.2 s (stopped, hung, or unreachable)");
  g_assert_cmpint (shoal_liveness_state (lv, 2), ==, SHOAL_RANK_LOST);
  g_assert_true (shoal_liveness_demoted (lv, 2));
  g_assert_cmpint (shoal_liveness_state (lv, 1), ==, SHOAL_RANK_ALIVE);
  /* lost is for good: another check reports nothing new */
  shoal_liveness_check (lv, S (40));
  g_assert_cmpuint (seen.lost->len, ==, 2);   /* rank 1 went silent meanwhile */
  g_assert_cmpstr (g_ptr_array_index (seen.lost, 1), ==,
                   "1: no heartbeat for 25.0 s (stopped, hung, or unreachable)");
  shoal_liveness_free (lv);
  g_ptr_array_free (seen.lost, TRUE);
}

static void
test_wedged_and_never_heard (void)
{
  Seen seen;
  ShoalLiveness *lv = table (&seen, 3);
  shoal_liveness_watch (lv, 1, TRUE, FALSE);
  shoal_liveness_watch (lv, 2, TRUE, FALSE);
  /* rank 1 beats every second but its progress stays at 7 */
  for (int t = 1; t <= 299; t++)
    {
      shoal_liveness_heard (lv, 1, 11, 7, FALSE, S (t), NULL);
      shoal_liveness_check (lv, S (t));
    }
  /* rank 2 was never heard from: lost at progress_timeout */
  g_assert_cmpuint (seen.lost->len, ==, 0);
  shoal_liveness_heard (lv, 1, 11, 7, FALSE, S (301), NULL);
  shoal_liveness_check (lv, S (301));
  g_assert_cmpuint (seen.lost->len, ==, 2);
  g_assert_cmpstr (g_ptr_array_index (seen.lost, 0), ==, "1: alive but no step done for 300 s (wedged?)");
  g_assert_cmpstr (g_ptr_array_index (seen.lost, 1), ==,
                   "2: never heard from in 301 s (it did not start, or cannot reach this process)");
  shoal_liveness_free (lv);
  g_ptr_array_free (seen.lost, TRUE);
}

static void
test_not_training_is_not_wedged (void)
{
  Seen seen;
  ShoalLiveness *lv = table (&seen, 2);
  shoal_liveness_watch (lv, 1, FALSE, TRUE);
  /* a server-only rank says -1 (no unit trains) for as long as it likes */
  for (int t = 1; t <= 1000; t += 5)
    {
      shoal_liveness_heard (lv, 1, 11, -1, FALSE, S (t), NULL);
      shoal_liveness_check (lv, S (t));
    }
  g_assert_cmpuint (seen.lost->len, ==, 0);
  shoal_liveness_free (lv);
  g_ptr_array_free (seen.lost, TRUE);
}

static void
test_refused_and_rejoin (void)
{
  Seen seen;
  ShoalLiveness *lv = table (&seen, 2);
  shoal_liveness_watch (lv, 1, TRUE, FALSE);
  shoal_liveness_heard (lv, 1, 11, 3, FALSE, S (1), NULL);
  shoal_liveness_check (lv, S (20));
  g_assert_cmpint (shoal_liveness_state (lv, 1), ==, SHOAL_RANK_LOST);
  /* the stopped process continues: it learns it was dropped */
  char *why = NULL;
  g_assert_cmpint (shoal_liveness_heard (lv, 1, 11, 4, FALSE, S (21), &why), ==, SHOAL_HEARD_REFUSED);
  g_assert_cmpstr (why, ==, "rank 1 was declared lost by rank 0 and is dropped from the job");
  g_free (why);
  /* a restart without --rejoin is refused too */
  g_assert_cmpint (shoal_liveness_heard (lv, 1, 12, 0, FALSE, S (22), &why), ==, SHOAL_HEARD_REFUSED);
  g_assert_cmpstr (why, ==, "rank 1 was declared lost by rank 0; a restarted rank joins the running job only "
                            "with --rejoin");
  g_free (why);
  /* a restart that rejoins is taken back, demoted for good */
  g_assert_cmpint (shoal_liveness_heard (lv, 1, 12, 0, TRUE, S (23), NULL), ==, SHOAL_HEARD_OK);
  g_assert_cmpint (seen.rejoined, ==, 1);
  g_assert_cmpint (shoal_liveness_state (lv, 1), ==, SHOAL_RANK_ALIVE);
  g_assert_true (shoal_liveness_demoted (lv, 1));
  /* the rejoined process knows it was lost (it demotes itself) and its
   * replies list that, with no incarnation: word about itself, not a
   * loss (this dropped every rejoined Hogwild rank half a second after
   * it came back, test/e2e/rejoin.sh) */
  guint lost_before = seen.lost->len;
  ShoalLivenessRules rules = { S (15), S (300) };
  ShoalLiveness *itself = shoal_liveness_new (2, 1, &rules, 0);
  shoal_liveness_demote (itself, 1);
  GBytes *list = shoal_liveness_lost_list (itself);
  gsize len = 0;
  const guint8 *data = g_bytes_get_data (list, &len);
  g_assert_cmpuint (len, ==, 16);
  shoal_liveness_learn (lv, 1, data, len);
  g_assert_cmpint (shoal_liveness_state (lv, 1), ==, SHOAL_RANK_ALIVE);
  g_assert_cmpuint (seen.lost->len, ==, lost_before);
  g_assert_cmpint (shoal_liveness_heard (lv, 1, 12, 5, TRUE, S (24), NULL), ==, SHOAL_HEARD_OK);
  g_bytes_unref (list);
  shoal_liveness_free (itself);
  shoal_liveness_free (lv);
  g_ptr_array_free (seen.lost, TRUE);
}

static void
test_done_is_not_lost (void)
{
  Seen seen;
  ShoalLiveness *lv = table (&seen, 3);
  shoal_liveness_watch (lv, 1, TRUE, FALSE);   /* a worker process */
  shoal_liveness_watch (lv, 2, FALSE, TRUE);   /* a server process */
  shoal_liveness_heard (lv, 1, 11, 3, FALSE, S (1), NULL);
  shoal_liveness_heard (lv, 2, 22, -1, FALSE, S (1), NULL);
  shoal_liveness_done (lv, 1);
  g_assert_cmpint (shoal_liveness_state (lv, 1), ==, SHOAL_RANK_DONE);
  /* the server waits for this process: still watched until self is done */
  shoal_liveness_self_done (lv);
  g_assert_cmpint (shoal_liveness_state (lv, 2), ==, SHOAL_RANK_DONE);
  shoal_liveness_check (lv, S (100));
  g_assert_cmpuint (seen.lost->len, ==, 0);
  shoal_liveness_free (lv);
  g_ptr_array_free (seen.lost, TRUE);
}

static void
test_lost_lists_converge (void)
{
  Seen a, b;
  ShoalLiveness *la = table (&a, 3), *lb = table (&b, 3);
  for (int r = 1; r < 3; r++)
    {
      shoal_liveness_watch (la, r, TRUE, TRUE);
      shoal_liveness_watch (lb, r, TRUE, TRUE);
      shoal_liveness_heard (la, r, 10 + r, 1, FALSE, S (1), NULL);
      shoal_liveness_heard (lb, r, 10 + r, 1, FALSE, S (1), NULL);
    }
  shoal_liveness_declare_lost (la, 2, "its process ended");
  GBytes *list = shoal_liveness_lost_list (la);
  gsize len = 0;
  const guint8 *p = g_bytes_get_data (list, &len);
  g_assert_cmpuint (len, ==, 16);
  shoal_liveness_learn (lb, 7, p, len);
  g_assert_cmpint (shoal_liveness_state (lb, 2), ==, SHOAL_RANK_LOST);
  g_assert_cmpstr (g_ptr_array_index (b.lost, 0), ==, "2: declared lost by rank 7");
  /* malformed lists are ignored */
  shoal_liveness_learn (lb, 7, p, len - 1);
  g_assert_cmpint (shoal_liveness_state (lb, 1), ==, SHOAL_RANK_ALIVE);
  g_bytes_unref (list);
  shoal_liveness_free (la);
  shoal_liveness_free (lb);
  g_ptr_array_free (a.lost, TRUE);
  g_ptr_array_free (b.lost, TRUE);
}

/* A Downpour worker process (rank 0) hears only the server process
 * (rank 2), and learns of worker rank 1 from rank 2's lists: lost, then
 * back once rank 2 heard a restart rejoin - its summary no longer lists
 * the group - and lost again if the new process is lost. */
static void
test_rejoin_learned_from_peer (void)
{
  Seen w;
  ShoalLiveness *worker = table (&w, 3);
  ShoalLivenessRules rules = { S (15), S (300) };
  ShoalLiveness *server = shoal_liveness_new (3, 2, &rules, 0);
  shoal_liveness_watch (worker, 2, FALSE, TRUE);
  shoal_liveness_watch (server, 0, TRUE, FALSE);
  shoal_liveness_watch (server, 1, TRUE, FALSE);
  shoal_liveness_heard (server, 1, 11, 1, FALSE, S (1), NULL);
  shoal_liveness_declare_lost (server, 1, "its process ended");

  GBytes *list = shoal_liveness_lost_list (server);
  gsize len = 0;
  const guint8 *p = g_bytes_get_data (list, &len);
  shoal_liveness_learn (worker, 2, p, len);
  g_bytes_unref (list);
  g_assert_cmpint (shoal_liveness_state (worker, 1), ==, SHOAL_RANK_LOST);
  g_assert_cmpuint (w.lost->len, ==, 1);
  /* a list from before the rejoin again: nothing new */
  list = shoal_liveness_lost_list (server);
  p = g_bytes_get_data (list, &len);
  shoal_liveness_learn (worker, 2, p, len);
  g_bytes_unref (list);
  g_assert_cmpint (w.rejoined, ==, 0);

  /* the restart rejoins at the server; its list says the rank is back */
  g_assert_cmpint (shoal_liveness_heard (server, 1, 12, 0, TRUE, S (20), NULL), ==, SHOAL_HEARD_OK);
  list = shoal_liveness_lost_list (server);
  p = g_bytes_get_data (list, &len);
  g_assert_cmpuint (len, ==, 16);
  shoal_liveness_learn (worker, 2, p, len);
  shoal_liveness_learn (worker, 2, p, len);   /* heard twice: taken back once */
  g_bytes_unref (list);
  g_assert_cmpint (w.rejoined, ==, 1);
  g_assert_cmpint (shoal_liveness_state (worker, 1), ==, SHOAL_RANK_UNWATCHED);
  g_assert_true (shoal_liveness_demoted (worker, 1));
  g_assert_cmpuint (w.lost->len, ==, 1);

  /* the new process is lost as well: learned again */
  shoal_liveness_declare_lost (server, 1, "its process ended");
  list = shoal_liveness_lost_list (server);
  p = g_bytes_get_data (list, &len);
  shoal_liveness_learn (worker, 2, p, len);
  g_bytes_unref (list);
  g_assert_cmpint (shoal_liveness_state (worker, 1), ==, SHOAL_RANK_LOST);
  g_assert_cmpuint (w.lost->len, ==, 2);

  /* a rank the table watches itself is taken back only when heard */
  Seen h;
  ShoalLiveness *hog = table (&h, 3);
  shoal_liveness_watch (hog, 1, TRUE, TRUE);
  shoal_liveness_heard (hog, 1, 11, 1, FALSE, S (1), NULL);
  shoal_liveness_declare_lost (hog, 1, "its process ended");
  shoal_liveness_heard (server, 1, 13, 0, TRUE, S (30), NULL);
  list = shoal_liveness_lost_list (server);
  p = g_bytes_get_data (list, &len);
  shoal_liveness_learn (hog, 2, p, len);
  g_bytes_unref (list);
  g_assert_cmpint (h.rejoined, ==, 0);
  g_assert_cmpint (shoal_liveness_heard (hog, 1, 13, 0, TRUE, S (31), NULL), ==, SHOAL_HEARD_OK);
  g_assert_cmpint (h.rejoined, ==, 1);

  shoal_liveness_free (hog);
  shoal_liveness_free (worker);
  shoal_liveness_free (server);
  g_ptr_array_free (h.lost, TRUE);
  g_ptr_array_free (w.lost, TRUE);
}

static void
test_ssp_drops_lost_unit (void)
{
  ShoalClocks *c = shoal_clocks_new (3);
  shoal_clocks_advance (c, 0, 9);
  shoal_clocks_advance (c, 1, 9);
  shoal_clocks_advance (c, 2, 2);   /* unit 2 stalls at 3 */
  g_assert_false (shoal_clocks_may_go_on (c, 9, 2));
  shoal_clocks_drop (c, 2);
  g_assert_true (shoal_clocks_dropped (c, 2));
  g_assert_cmpint (shoal_clocks_slowest (c, NULL), ==, 10);
  g_assert_true (shoal_clocks_may_go_on (c, 9, 2));
  /* a rejoined unit counts again once it caught up with the slowest */
  shoal_clocks_advance (c, 2, 5);
  g_assert_true (shoal_clocks_dropped (c, 2));
  shoal_clocks_advance (c, 2, 9);
  g_assert_false (shoal_clocks_dropped (c, 2));
  /* every unit dropped: nobody waits */
  for (int u = 0; u < 3; u++)
    shoal_clocks_drop (c, u);
  int which = 0;
  g_assert_cmpint (shoal_clocks_slowest (c, &which), ==, G_MAXINT64);
  g_assert_cmpint (which, ==, -1);
  shoal_clocks_free (c);
}

static gboolean
demoted_1 (gpointer data, int group)
{
  (void) data;
  return group == 1;
}

static void
test_masters_move (void)
{
  /* 3 groups of 2 servers; slice 0 mastered by group 1 at its server 1 */
  ShoalSliceMaster masters[2] = { { 1, 3 }, { 0, 0 } };
  ShoalGroupSyncOptions o = { .masters = masters, .nserver_groups = 3, .servers_per_group = 2 };
  int ep = -1;
  g_assert_cmpint (shoal_group_sync_master (&o, 0, &ep), ==, 1);
  g_assert_cmpint (ep, ==, 3);
  o.demoted = demoted_1;
  /* every group that shares the view picks the next group in order */
  g_assert_cmpint (shoal_group_sync_master (&o, 0, &ep), ==, 2);
  g_assert_cmpint (ep, ==, 5);
  g_assert_cmpint (shoal_group_sync_master (&o, 1, &ep), ==, 0);
  g_assert_cmpint (ep, ==, 0);
}

/* ---- the workspace claim ----------------------------------------------- */

static ShoalConf *
conf_with (const char *num_output)
{
  char *text = g_strdup_printf ("[job]\nname = t\ntrain_steps = 10\n[layer fc]\ntype = dense\nnum_output = %s\n",
                                num_output);
  ShoalConf *c = shoal_conf_load_data (text, "t.conf", NULL);
  g_assert_nonnull (c);
  g_free (text);
  return c;
}

static char *
read_text (const char *dir, const char *name)
{
  char *path = g_build_filename (dir, name, NULL), *text = NULL;
  if (!g_file_get_contents (path, &text, NULL, NULL))
    text = NULL;
  g_free (path);
  return text;
}

static void
write_text (const char *dir, const char *name, const char *text)
{
  char *path = g_build_filename (dir, name, NULL);
  g_assert_true (g_file_set_contents (path, text, -1, NULL));
  g_free (path);
}

static void
test_claim (void)
{
  char *ws = g_dir_make_tmp ("claim-XXXXXX", NULL);
  ShoalConf *a = conf_with ("10"), *b = conf_with ("20");
  GError *error = NULL;
  char *moved = NULL;
  g_assert_true (shoal_workspace_claim (ws, a, FALSE, FALSE, &moved, &error));
  g_assert_no_error (error);
  g_assert_null (moved);
  char *ckpt = g_build_filename (ws, "checkpoint", NULL);
  g_assert_cmpint (g_mkdir (ckpt, 0755), ==, 0);
  write_text (ws, "metrics.jsonl", "{\"step\":1}\n");

  /* a resume of another model is refused; job.conf stays the first run's */
  g_assert_false (shoal_workspace_claim (ws, b, TRUE, FALSE, NULL, &error));
  char *want = g_strdup_printf ("%s: cannot resume: its checkpoints belong to another model: [layer fc] num_output "
                                "is 10 in %s/job.conf, 20 in this job (model fingerprint ", ws, ws);
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
  g_assert_true (g_str_has_prefix (error->message, want));
  g_clear_error (&error);
  g_free (want);
  char *conf = read_text (ws, "job.conf");
  g_assert_nonnull (strstr (conf, "num_output=10"));
  g_free (conf);

  /* the same run may resume with another length */
  ShoalConf *longer = conf_with ("10");
  g_key_file_set_value (shoal_conf_keyfile (longer), "job", "train_steps", "50");
  g_assert_true (shoal_workspace_claim (ws, longer, TRUE, FALSE, NULL, &error));
  g_assert_no_error (error);

  /* a fresh run moves the earlier run aside and says where */
  g_assert_true (shoal_workspace_claim (ws, b, FALSE, FALSE, &moved, &error));
  g_assert_no_error (error);
  char *prev = g_build_filename (ws, "previous", "1", NULL);
  g_assert_cmpstr (moved, ==, prev);
  char *old_metrics = read_text (prev, "metrics.jsonl");
  g_assert_cmpstr (old_metrics, ==, "{\"step\":1}\n");
  g_assert_false (g_file_test (ckpt, G_FILE_TEST_EXISTS));
  char *prev_ckpt = g_build_filename (prev, "checkpoint", NULL);
  g_assert_true (g_file_test (prev_ckpt, G_FILE_TEST_IS_DIR));
  /* and --resume now cannot continue the old run */
  g_assert_false (shoal_workspace_claim (ws, a, TRUE, FALSE, NULL, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
  g_clear_error (&error);

  g_free (prev_ckpt);
  g_free (old_metrics);
  g_free (prev);
  g_free (moved);
  g_free (ckpt);
  shoal_conf_free (a);
  shoal_conf_free (b);
  shoal_conf_free (longer);
  char *cmd = g_strdup_printf ("rm -rf '%s'", ws);
  g_assert_cmpint (system (cmd), ==, 0);
  g_free (cmd);
  g_free (ws);
}

static void
test_trim_metrics (void)
{
  char *ws = g_dir_make_tmp ("trim-XXXXXX", NULL);
  write_text (ws, "metrics.jsonl",
              "{\"time\":1.0,\"step\":100,\"phase\":\"train\"}\n"
              "{\"time\":2.0,\"rank\":0,\"phase\":\"process\"}\n"
              "{\"time\":3.0,\"step\":200,\"phase\":\"train\"}\n"
              "{\"time\":3.5,\"step\":200,\"phase\":\"test\"}\n"
              "{\"time\":4.0,\"step\":300,\"phase\":\"train\"}\n"
              "{\"time\":5.0,\"rank\":0,\"phase\":\"process\"}\n");
  const char *lines = "{\"time\":1.0,\"step\":100,\"phase\":\"train\"}\n"
                      "{\"time\":2.0,\"rank\":0,\"phase\":\"process\"}\n"
                      "{\"time\":3.0,\"step\":200,\"phase\":\"train\"}\n"
                      "{\"time\":3.5,\"step\":200,\"phase\":\"test\"}\n";
  GError *error = NULL;
  double resume_clock = 0;
  g_assert_true (shoal_workspace_trim_metrics (ws, 200, NULL, 0, 3.6, &resume_clock, &error));
  g_assert_no_error (error);
  g_assert_cmpfloat (resume_clock, ==, 3.6);
  char *text = read_text (ws, "metrics.jsonl");
  g_assert_cmpstr (text, ==, lines);
  g_free (text);
  /* a test pass of the checkpoint's step ends after the checkpoint was
   * taken: its line stays, and the resumed clock goes on from it */
  g_assert_true (shoal_workspace_trim_metrics (ws, 200, NULL, 0, 3.2, &resume_clock, &error));
  g_assert_no_error (error);
  g_assert_cmpfloat (resume_clock, ==, 3.5);
  text = read_text (ws, "metrics.jsonl");
  g_assert_cmpstr (text, ==, lines);
  g_free (text);
  /* asynchronous groups resume each at its own step */
  write_text (ws, "metrics.jsonl",
              "{\"time\":1.0,\"step\":100,\"group\":0,\"phase\":\"train\"}\n"
              "{\"time\":1.1,\"step\":100,\"group\":1,\"phase\":\"train\"}\n"
              "{\"time\":2.0,\"step\":110,\"group\":0,\"phase\":\"train\"}\n"
              "{\"time\":2.1,\"step\":106,\"group\":1,\"phase\":\"train\"}\n"
              "{\"time\":2.2,\"step\":110,\"group\":1,\"phase\":\"train\"}\n");
  const gint64 group_steps[2] = { 105, 106 };
  g_assert_true (shoal_workspace_trim_metrics (ws, 106, group_steps, 2, 2.15, &resume_clock, &error));
  g_assert_no_error (error);
  text = read_text (ws, "metrics.jsonl");
  g_assert_cmpstr (text, ==, "{\"time\":1.0,\"step\":100,\"group\":0,\"phase\":\"train\"}\n"
                             "{\"time\":1.1,\"step\":100,\"group\":1,\"phase\":\"train\"}\n"
                             "{\"time\":2.1,\"step\":106,\"group\":1,\"phase\":\"train\"}\n");
  g_free (text);
  GBytes *blob = shoal_workspace_clock_blob (12.5);
  g_assert_cmpmem (g_bytes_get_data (blob, NULL), g_bytes_get_size (blob), "12.500000", 9);
  g_bytes_unref (blob);
  char *cmd = g_strdup_printf ("rm -rf '%s'", ws);
  g_assert_cmpint (system (cmd), ==, 0);
  g_free (cmd);
  g_free (ws);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/liveness/silent-rank-lost", test_silent_rank_lost);
  g_test_add_func ("/liveness/wedged-and-never-heard", test_wedged_and_never_heard);
  g_test_add_func ("/liveness/not-training-is-not-wedged", test_not_training_is_not_wedged);
  g_test_add_func ("/liveness/refused-and-rejoin", test_refused_and_rejoin);
  g_test_add_func ("/liveness/done-is-not-lost", test_done_is_not_lost);
  g_test_add_func ("/liveness/lost-lists-converge", test_lost_lists_converge);
  g_test_add_func ("/liveness/rejoin-learned-from-peer", test_rejoin_learned_from_peer);
  g_test_add_func ("/liveness/ssp-drops-lost-unit", test_ssp_drops_lost_unit);
  g_test_add_func ("/liveness/masters-move", test_masters_move);
  g_test_add_func ("/liveness/claim", test_claim);
  g_test_add_func ("/liveness/trim-metrics", test_trim_metrics);
  return g_test_run ();
}
