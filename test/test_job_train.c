/* marks: threads (they start threads: TSan runs this file in `make SANITIZE=thread test-threads`) */
/* shoal_job_train (shoal/job.h) from a program's threads.  A run sets
 * state the whole process shares (BLAS and worker thread counts, the RPC
 * client's peer names, the stop and abort flags), so one job trains at a
 * time: a second call while one trains is refused with
 * SHOAL_ERROR_UNSUPPORTED, and a call after it ends trains.  The first
 * job holds still inside its run (a layer type of this file waits in its
 * forward) until the second call has answered, so the overlap is certain,
 * not a matter of timing. */
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include <shoal/shoal.h>

#include "core/tensor.h"
#include "data/dataset.h"
#include "data/record.h"
#include "support/temp_tree.h"

/* ---- hold: passes its source through; its first train forward waits ---- */

static struct {
  GMutex lock;
  GCond cond;
  gboolean inside;     /* the first job's run reached the forward */
  gboolean released;   /* the second call answered */
} hold;

static gboolean
hold_setup (ShoalLayer *layer, GError **error)
{
  (void) error;
  shoal_layer_set_out_shape (layer, shoal_tensor_shape (shoal_layer_src_out (layer, 0)));
  return TRUE;
}

static void
hold_forward (ShoalLayer *layer, ShoalPhase phase)
{
  ShoalTensor *in = shoal_layer_src_out (layer, 0), *out = shoal_layer_out (layer);
  memcpy (shoal_tensor_data (out), shoal_tensor_data (in), shoal_tensor_count (in) * sizeof (float));
  if (phase != SHOAL_PHASE_TRAIN)
    return;
  g_mutex_lock (&hold.lock);
  hold.inside = TRUE;
  g_cond_broadcast (&hold.cond);
  while (!hold.released)
    g_cond_wait (&hold.cond, &hold.lock);
  g_mutex_unlock (&hold.lock);
}

static void
hold_backward (ShoalLayer *layer)
{
  ShoalTensor *dx = shoal_layer_src_grad (layer, 0);
  if (dx != NULL)
    memcpy (shoal_tensor_data (dx), shoal_tensor_data (shoal_layer_grad (layer)),
            shoal_tensor_count (dx) * sizeof (float));
}

static const ShoalLayerOps hold_ops = {
  .type = "test_hold",
  .summary = "passes its source through; the first train forward waits to be released",
  .split = { .dims = SHOAL_SPLIT_BATCH | SHOAL_SPLIT_FEATURE },
  .min_srcs = 1, .max_srcs = 1,
  .setup = hold_setup, .forward = hold_forward, .backward = hold_backward,
};

/* ---- a dataset and two jobs over it ---------------------------------------- */

static void
make_dataset (const char *path, int n)
{
  GError *error = NULL;
  ShoalDatasetWriter *w = shoal_dataset_writer_new_full (path, 64 << 10, 64, &error);
  g_assert_no_error (error);
  float x[4];
  ShoalRecordView rec = { .shape = shoal_shape_make (1, 4), .kind = SHOAL_RECORD_FLOATS, .floats = x };
  for (int i = 0; i < n; i++)
    {
      for (int j = 0; j < 4; j++)
        x[j] = (float) ((i * 7 + j * 3) % 11) / 11.0f;
      rec.label = i % 2;
      g_assert_true (shoal_dataset_writer_put_record (w, &rec, &error));
    }
  g_assert_true (shoal_dataset_writer_finish (w, &error));
  g_assert_no_error (error);
  shoal_dataset_writer_free (w);
}

static char *
job_text (const char *data, const char *act)
{
  return g_strdup_printf ("[job]\ntrain_steps = 2\ntest_freq = 2\nseed = 1\n"
                          "[layer data]\ntype = lmdb_input\ntrain = %s\ntest = %s\nbatch_size = 4\n"
                          "[layer fc]\ntype = dense\nsrc = data\nnum_output = 2\n"
                          "[layer act]\ntype = %s\nsrc = fc\n"
                          "[layer loss]\ntype = softmax_loss\nsrc = act, data\n", data, data, act);
}

typedef struct {
  ShoalJob *job;
  char *workspace;
  gboolean ok;
} Training;

static gpointer
train (gpointer data)
{
  Training *t = data;
  GError *error = NULL;
  t->ok = shoal_job_train (t->job, t->workspace, FALSE, NULL, &error);
  g_assert_no_error (error);
  return NULL;
}

static void
test_one_at_a_time (void)
{
  GError *error = NULL;
  g_assert_true (shoal_layer_register (&hold_ops, &error));
  char *dir = g_dir_make_tmp ("shoal-test-job-XXXXXX", &error);
  g_assert_no_error (error);
  char *data = g_build_filename (dir, "data", NULL);
  make_dataset (data, 16);
  char *held_text = job_text (data, "test_hold"), *plain_text = job_text (data, "relu");
  ShoalJob *held = shoal_job_load_data (held_text, "held.conf", NULL, &error);
  g_assert_no_error (error);
  ShoalJob *plain = shoal_job_load_data (plain_text, "plain.conf", NULL, &error);
  g_assert_no_error (error);

  Training first = { held, g_build_filename (dir, "first", NULL), FALSE };
  GThread *thread = g_thread_new ("first job", train, &first);
  g_mutex_lock (&hold.lock);
  while (!hold.inside)
    g_cond_wait (&hold.cond, &hold.lock);
  g_mutex_unlock (&hold.lock);

  /* the first job is inside its run: the second call is refused at once */
  char *second_ws = g_build_filename (dir, "second", NULL);
  g_assert_false (shoal_job_train (plain, second_ws, FALSE, NULL, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_UNSUPPORTED);
  g_assert_nonnull (strstr (error->message, "plain.conf: another job is training in this process"));
  g_clear_error (&error);
  g_assert_false (g_file_test (second_ws, G_FILE_TEST_EXISTS));

  g_mutex_lock (&hold.lock);
  hold.released = TRUE;
  g_cond_broadcast (&hold.cond);
  g_mutex_unlock (&hold.lock);
  g_thread_join (thread);
  g_assert_true (first.ok);

  /* once it ended, the next trains */
  ShoalTrainResult result;
  g_assert_true (shoal_job_train (plain, second_ws, FALSE, &result, &error));
  g_assert_no_error (error);
  g_assert_cmpint (result.steps, ==, 2);

  shoal_job_free (held);
  shoal_job_free (plain);
  shoal_test_remove_tree (dir);
  g_free (first.workspace);
  g_free (second_ws);
  g_free (held_text);
  g_free (plain_text);
  g_free (data);
  g_free (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/job-train/one-at-a-time", test_one_at_a_time);
  return g_test_run ();
}
