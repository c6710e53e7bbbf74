/* The rule of a resume (workspace/run_identity.h): which changes of a
 * job's conf a resumed run may make (the updater's rates, a dataset's
 * path, how long and how often) and which it may not (a layer's type or
 * shape, the layers' order, the updater's type, the batch size), the
 * model fingerprint they move or leave alone, and the refusal's words. */
#include <glib.h>
#include <string.h>

#include "core/error.h"
#include "workspace/run_identity.h"

static const char base[] =
  "[job]\nname = t\ntrain_steps = 100\n"
  "[updater]\ntype = sgd\nmomentum = 0.9\nlr_list = 0.1\n"
  "[cluster]\nnworker_groups = 1\n"
  "[layer data]\ntype = lmdb_input\ntrain = /data/a/train\ntest = /data/a/test\nbatch_size = 64\n"
  "[layer fc1]\ntype = dense\nsrc = data\nnum_output = 32\n"
  "[layer act]\ntype = relu\nsrc = fc1\n"
  "[layer fc2]\ntype = dense\nsrc = act\nnum_output = 32\n"
  "[layer loss]\ntype = softmax_loss\nsrc = fc2, data\n";

static GKeyFile *
conf (const char *text)
{
  GKeyFile *kf = g_key_file_new ();
  g_assert_true (g_key_file_load_from_data (kf, text, -1, G_KEY_FILE_NONE, NULL));
  return kf;
}

/* base with [group] key set to value (NULL: removed) */
static GKeyFile *
changed (const char *group, const char *key, const char *value)
{
  GKeyFile *kf = conf (base);
  if (value != NULL)
    g_key_file_set_value (kf, group, key, value);
  else
    g_assert_true (g_key_file_remove_key (kf, group, key, NULL));
  return kf;
}

/* whether a run of `now` may resume base's; the refusal in *message */
static gboolean
resumes (GKeyFile *now, char **message)
{
  GKeyFile *was = conf (base);
  GError *error = NULL;
  gboolean ok = shoal_run_identity_check ("ws", "ws/job.conf", was, now, &error);
  if (!ok)
    {
      g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
      if (message != NULL)
        *message = g_strdup (error->message);
      g_error_free (error);
    }
  else
    g_assert_no_error (error);
  g_key_file_free (was);
  g_key_file_free (now);
  return ok;
}

static gboolean
same_fingerprint (GKeyFile *now)
{
  GKeyFile *was = conf (base);
  char *a = shoal_model_fingerprint (was), *b = shoal_model_fingerprint (now);
  g_assert_cmpint ((int) strlen (a), ==, 16);
  gboolean same = strcmp (a, b) == 0;
  g_free (a);
  g_free (b);
  g_key_file_free (was);
  g_key_file_free (now);
  return same;
}

/* what a demanding user changes on purpose: resumed, the same model */
static void
test_allowed (void)
{
  static const char *const allowed[][3] = {
    { "updater", "lr_list", "0.01" },          /* a lowered lr */
    { "updater", "momentum", "0.5" },
    { "updater", "lr_policy", "step" },
    { "layer data", "train", "/data/b/train" }, /* the dataset moved */
    { "layer data", "test", "/data/b/test" },
    { "job", "train_steps", "500" },
    { "job", "checkpoint_freq", "10" },
    { "cluster", "heartbeat_timeout", "30" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (allowed); i++)
    {
      g_test_message ("[%s] %s = %s", allowed[i][0], allowed[i][1], allowed[i][2]);
      g_assert_true (resumes (changed (allowed[i][0], allowed[i][1], allowed[i][2]), NULL));
      g_assert_true (same_fingerprint (changed (allowed[i][0], allowed[i][1], allowed[i][2])));
    }
  /* sgd written out or left to its default: one updater */
  g_assert_true (resumes (changed ("updater", "type", NULL), NULL));
  g_assert_true (same_fingerprint (changed ("updater", "type", NULL)));
  /* defaults written out or left to the job: alg = bp, cd_k = 1 under cd */
  g_assert_true (resumes (changed ("job", "alg", "bp"), NULL));
  g_assert_true (same_fingerprint (changed ("job", "alg", "bp")));
  GKeyFile *cd = changed ("job", "alg", "cd"), *cd1 = changed ("job", "alg", "cd");
  g_key_file_set_value (cd1, "job", "cd_k", "1");
  char *a = shoal_model_fingerprint (cd), *b = shoal_model_fingerprint (cd1);
  g_assert_cmpstr (a, ==, b);
  g_key_file_set_value (cd1, "job", "cd_k", "2");
  g_free (b);
  b = shoal_model_fingerprint (cd1);
  g_assert_cmpstr (a, !=, b);
  g_free (a);
  g_free (b);
  g_key_file_free (cd);
  g_key_file_free (cd1);
  /* the keys of a section in another order: the same model */
  GKeyFile *keys_moved = conf (base);
  g_assert_true (g_key_file_remove_key (keys_moved, "layer fc1", "type", NULL));
  g_key_file_set_value (keys_moved, "layer fc1", "type", "dense");
  g_assert_true (same_fingerprint (keys_moved));
}

/* another model: refused, the fingerprint moves; another run (not the
 * model): refused, the fingerprint stays */
static void
test_refused (void)
{
  static const struct {
    const char *group, *key, *value;
    gboolean model;
  } refused[] = {
    { "layer act", "type", "tanh", TRUE },            /* another activation, the same sizes */
    { "layer loss", "type", "euclidean_loss", TRUE }, /* another loss */
    { "layer fc1", "num_output", "64", TRUE },
    { "layer fc2", "src", "fc1", TRUE },
    { "updater", "type", "nesterov", TRUE },          /* another updater, one state float as sgd */
    { "job", "alg", "cd", TRUE },
    { "layer data", "batch_size", "32", FALSE },
    { "cluster", "nworker_groups", "2", FALSE },
    { "job", "seed", "7", FALSE },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (refused); i++)
    {
      g_test_message ("[%s] %s = %s", refused[i].group, refused[i].key, refused[i].value);
      char *why = NULL;
      g_assert_false (resumes (changed (refused[i].group, refused[i].key, refused[i].value), &why));
      g_assert_nonnull (strstr (why, refused[i].model ? "its checkpoints belong to another model"
                                                      : "its checkpoints belong to another run"));
      g_assert_true ((strstr (why, "model fingerprint ") != NULL) == refused[i].model);
      g_free (why);
      g_assert_true (same_fingerprint (changed (refused[i].group, refused[i].key, refused[i].value))
                     == !refused[i].model);
    }
}

static void
test_message (void)
{
  char *why = NULL;
  g_assert_false (resumes (changed ("layer act", "type", "tanh"), &why));
  GKeyFile *was = conf (base), *now = changed ("layer act", "type", "tanh");
  char *a = shoal_model_fingerprint (was), *b = shoal_model_fingerprint (now);
  char *want = g_strdup_printf ("ws: cannot resume: its checkpoints belong to another model: [layer act] type is "
                                "relu in ws/job.conf, tanh in this job (model fingerprint %s there, %s in this job; "
                                "--resume continues only the same model, data and layout: put it back as it was, "
                                "or start this job without --resume, or in another --workspace)", a, b);
  g_assert_cmpstr (why, ==, want);
  g_free (want);
  g_free (why);
  g_free (a);
  g_free (b);
  g_key_file_free (was);
  g_key_file_free (now);

  /* the same sections in another order: the params' order in the store */
  const char *fc1 = strstr (base, "[layer fc1]"), *act = strstr (base, "[layer act]");
  GString *swapped = g_string_new_len (base, fc1 - base);
  g_string_append_len (swapped, act, strstr (base, "[layer fc2]") - act);
  g_string_append_len (swapped, fc1, act - fc1);
  g_string_append (swapped, strstr (base, "[layer fc2]"));
  g_assert_false (resumes (conf (swapped->str), &why));
  g_assert_nonnull (strstr (why, "the [layer] sections are in another order: data, fc1, act, fc2, loss in "
                                 "ws/job.conf, data, act, fc1, fc2, loss in this job (model fingerprint "));
  g_free (why);
  g_assert_false (same_fingerprint (conf (swapped->str)));
  g_string_free (swapped, TRUE);

  /* a key only one side has */
  g_assert_false (resumes (changed ("layer fc1", "num_output", NULL), &why));
  g_assert_nonnull (strstr (why, "[layer fc1] num_output is 32 in ws/job.conf, (not set) in this job"));
  g_free (why);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/run-identity/allowed", test_allowed);
  g_test_add_func ("/run-identity/refused", test_refused);
  g_test_add_func ("/run-identity/message", test_message);
  return g_test_run ();
}
