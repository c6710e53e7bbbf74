/* marks: threads (they start threads: TSan runs this file in `make SANITIZE=thread test-threads`) */
/* The memory budget ([job] memory_limit, ShoalNetOptions.budget): a net
 * whose set-up would cross it is refused naming the layer and the bytes,
 * before malloc is asked; what is charged is exactly what the net holds
 * (a limit of that many bytes passes, one byte less fails), shared
 * budgets add up over nets and threads, and everything comes back when a
 * net is freed. */
#include <glib.h>
#include <string.h>

#include <shoal/layer.h>

#include "core/error.h"
#include "core/memory_budget.h"
#include "net/net.h"
#include "job/job.h"

#define MiB ((guint64) 1 << 20)

/* conv1's column matrix is 16*32*32 x 65*65 floats, 265 MiB */
static const char conv_conf[] =
  "[layer data]\ntype = feed\nshape = 1,16,64,64\nnum_classes = 10\n"
  "[layer conv1]\ntype = conv\nsrc = data\nnum_filters = 4\nkernel = 32\npad = 16\n"
  "[layer fc]\ntype = dense\nsrc = conv1\nnum_output = 10\n"
  "[layer loss]\ntype = softmax_loss\nsrc = fc, data\n";

static const char mlp_conf[] =
  "[layer data]\ntype = feed\nshape = 8,100\nnum_classes = 10\n"
  "[layer fc1]\ntype = dense\nsrc = data\nnum_output = 300\n"
  "[layer relu]\ntype = relu\nsrc = fc1\n"
  "[layer fc2]\ntype = dense\nsrc = relu\nnum_output = 10\n"
  "[layer loss]\ntype = softmax_loss\nsrc = fc2, data\n"
  "[layer acc]\ntype = accuracy\nsrc = fc2, data\n";

static ShoalNet *
net_under (ShoalConf *conf, ShoalMemoryBudget *budget, GError **error)
{
  ShoalNetOptions opts = { .seed = 1, .shard_count = 1, .budget = budget };
  return shoal_net_new (conf, &opts, error);
}

static ShoalConf *
conf_of (const char *text)
{
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data (text, "budget.conf", &error);
  g_assert_no_error (error);
  return conf;
}

static void
test_refused (void)
{
  ShoalConf *conf = conf_of (conv_conf);
  ShoalMemoryBudget *budget = shoal_memory_budget_new (64 * MiB, "job.memory_limit");
  GError *error = NULL;
  g_assert_null (net_under (conf, budget, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_MEMORY);
  g_assert_cmpstr (error->message, ==,
                   "budget.conf:5: [layer conv1] column matrix: needs 265.0 MiB, which brings what the job holds "
                   "in this process to 265.3 MiB; job.memory_limit is 64.0 MiB");
  g_clear_error (&error);
  g_assert_cmpuint (shoal_memory_budget_used (budget), ==, 0);

  /* under a larger budget the same net is built */
  shoal_memory_budget_free (budget);
  budget = shoal_memory_budget_new (1024 * MiB, "job.memory_limit");
  ShoalNet *net = net_under (conf, budget, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (shoal_memory_budget_used (budget), >, 2 * 265 * MiB);
  shoal_net_free (net);
  g_assert_cmpuint (shoal_memory_budget_used (budget), ==, 0);
  shoal_memory_budget_free (budget);
  shoal_conf_free (conf);
}

/* The net's bytes, counted without a cap. */
static guint64
bytes_of (ShoalConf *conf)
{
  ShoalMemoryBudget *counter = shoal_memory_budget_new (0, "counter");
  GError *error = NULL;
  ShoalNet *net = net_under (conf, counter, &error);
  g_assert_no_error (error);
  guint64 used = shoal_memory_budget_used (counter);
  shoal_net_free (net);
  g_assert_cmpuint (shoal_memory_budget_used (counter), ==, 0);
  shoal_memory_budget_free (counter);
  return used;
}

static void
test_exact (void)
{
  ShoalConf *conf = conf_of (mlp_conf);
  guint64 used = bytes_of (conf);
  /* at least the params and their gradients, the outputs and (but the
   * input's) their gradients */
  guint64 params = (100 * 300 + 300 + 300 * 10 + 10) * 4 * 2;
  guint64 outs = 8 * 100 * 4 + (2 * 8 * 300 + 8 * 10) * 4 * 2;
  g_assert_cmpuint (used, >=, params + outs);
  g_assert_cmpuint (used, <, 2 * (params + outs));

  GError *error = NULL;
  ShoalMemoryBudget *exact = shoal_memory_budget_new (used, "job.memory_limit");
  ShoalNet *net = net_under (conf, exact, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (shoal_memory_budget_used (exact), ==, used);
  /* a second net on the same budget does not fit */
  g_assert_null (net_under (conf, exact, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_MEMORY);
  g_assert_nonnull (strstr (error->message, "budget.conf:1: [layer data] "));
  g_clear_error (&error);
  g_assert_cmpuint (shoal_memory_budget_used (exact), ==, used);
  shoal_net_free (net);
  g_assert_cmpuint (shoal_memory_budget_used (exact), ==, 0);
  shoal_memory_budget_free (exact);

  ShoalMemoryBudget *short_by_one = shoal_memory_budget_new (used - 1, "job.memory_limit");
  g_assert_null (net_under (conf, short_by_one, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_MEMORY);
  g_assert_nonnull (strstr (error->message, "; job.memory_limit is "));
  g_clear_error (&error);
  g_assert_cmpuint (shoal_memory_budget_used (short_by_one), ==, 0);
  shoal_memory_budget_free (short_by_one);

  /* an allocation outside any net's set-up is not charged */
  ShoalMemoryBudget *idle = shoal_memory_budget_new (64, "idle");
  float *p = shoal_try_alloc_floats (1000, &error);
  g_assert_no_error (error);
  shoal_free_aligned (p);
  g_assert_cmpuint (shoal_memory_budget_used (idle), ==, 0);
  shoal_memory_budget_free (idle);
  shoal_conf_free (conf);
}

typedef struct {
  ShoalConf *conf;
  ShoalMemoryBudget *budget;
  ShoalNet *net;
} Builder;

static gpointer
build (gpointer data)
{
  Builder *b = data;
  GError *error = NULL;
  b->net = net_under (b->conf, b->budget, &error);
  g_assert_no_error (error);
  return NULL;
}

/* Four worker threads' nets on one budget of exactly four nets. */
static void
test_threads (void)
{
  ShoalConf *conf = conf_of (mlp_conf);
  guint64 one = bytes_of (conf);
  ShoalMemoryBudget *budget = shoal_memory_budget_new (4 * one, "job.memory_limit");
  Builder b[4];
  GThread *t[4];
  for (int i = 0; i < 4; i++)
    {
      b[i] = (Builder) { conf, budget, NULL };
      t[i] = g_thread_new ("builder", build, &b[i]);
    }
  for (int i = 0; i < 4; i++)
    g_thread_join (t[i]);
  g_assert_cmpuint (shoal_memory_budget_used (budget), ==, 4 * one);
  for (int i = 0; i < 4; i++)
    shoal_net_free (b[i].net);
  g_assert_cmpuint (shoal_memory_budget_used (budget), ==, 0);
  shoal_memory_budget_free (budget);
  shoal_conf_free (conf);
}

/* A layer type of a program's own that takes its buffer from the
 * allocator that cannot fail: the crossing is reported after its set-up. */
typedef struct {
  float *buffer;
} Greedy;

static gboolean
greedy_setup (ShoalLayer *layer, GError **error)
{
  (void) error;
  shoal_layer_set_out_shape (layer, shoal_tensor_shape (shoal_layer_src_out (layer, 0)));
  Greedy *g = shoal_layer_priv (layer);
  g->buffer = shoal_alloc_floats (4 << 20);   /* 16 MiB */
  return TRUE;
}

static void
greedy_finalize (ShoalLayer *layer)
{
  Greedy *g = shoal_layer_priv (layer);
  shoal_free_aligned (g->buffer);
}

static void
greedy_forward (ShoalLayer *layer, ShoalPhase phase)
{
  (void) layer;
  (void) phase;
}

static const ShoalLayerOps greedy_ops = {
  .type = "budget_greedy", .summary = "takes 16 MiB it cannot be refused",
  .min_srcs = 1, .max_srcs = 1, .priv_size = sizeof (Greedy),
  .setup = greedy_setup, .forward = greedy_forward, .finalize = greedy_finalize,
};

static void
test_forced (void)
{
  GError *error = NULL;
  g_assert_true (shoal_layer_register (&greedy_ops, &error));
  ShoalConf *conf = conf_of ("[layer data]\ntype = feed\nshape = 2,4\n"
                             "[layer greedy]\ntype = budget_greedy\nsrc = data\n");
  ShoalMemoryBudget *budget = shoal_memory_budget_new (8 * MiB, "job.memory_limit");
  g_assert_null (net_under (conf, budget, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_MEMORY);
  g_assert_cmpstr (error->message, ==,
                   "budget.conf:4: [layer greedy] set-up: needs 16.0 MiB, which brings what the job holds "
                   "in this process to 16.0 MiB; job.memory_limit is 8.0 MiB");
  g_clear_error (&error);
  g_assert_cmpuint (shoal_memory_budget_used (budget), ==, 0);
  shoal_memory_budget_free (budget);
  shoal_conf_free (conf);
}

static ShoalJob *
job_with_limit (const char *limit, GError **error)
{
  char *text = g_strdup_printf ("[job]\ntrain_steps = 1\nmemory_limit = %s\n%s", limit, mlp_conf);
  ShoalJob *job = shoal_job_load_data (text, "job.conf", NULL, error);
  g_free (text);
  return job;
}

static void
test_job_option (void)
{
  static const struct {
    const char *text;
    guint64 bytes;
  } sizes[] = {
    { "0", 0 }, { "1500000000", 1500000000 }, { "512M", 512 * MiB }, { "2G", 2048 * MiB },
    { "1.5GiB", 1536 * MiB }, { "64k", 64 << 10 }, { "3T", (guint64) 3 << 40 }, { "1", 64 },
  };
  GError *error = NULL;
  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    {
      ShoalJob *job = job_with_limit (sizes[i].text, &error);
      g_assert_no_error (error);
      g_assert_cmpuint (job->memory_limit, ==, sizes[i].bytes);
      g_assert_cmpuint (shoal_memory_budget_limit (job->memory_budget), ==, sizes[i].bytes);
      shoal_job_free (job);
    }
  guint64 machine = shoal_memory_of_machine ();
  g_assert_cmpuint (machine, >, 0);
  ShoalJob *job = job_with_limit ("50%", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (job->memory_limit, ==, machine / 2);
  shoal_job_free (job);
  /* the default is 80% */
  job = shoal_job_load_data ("[job]\ntrain_steps = 1\n", "job.conf", NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (job->memory_limit, ==, (guint64) ((double) machine * 0.8));
  shoal_job_free (job);

  const char *bad[] = { "12X", "-1", "150%", "0%", "1G5", "lots", "", "2e19" };
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_assert_null (job_with_limit (bad[i], &error));
      g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
      char *want = g_strdup_printf ("job.conf:3: [job] memory_limit: '%s' is not a memory size (bytes "
                                    "with an optional K, M, G or T, N%% of the machine's memory with "
                                    "0 < N <= 100, or 0 for no limit)", bad[i]);
      g_assert_cmpstr (error->message, ==, want);
      g_free (want);
      g_clear_error (&error);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/memory-budget/refused", test_refused);
  g_test_add_func ("/memory-budget/exact", test_exact);
  g_test_add_func ("/memory-budget/threads", test_threads);
  g_test_add_func ("/memory-budget/forced", test_forced);
  g_test_add_func ("/memory-budget/job-option", test_job_option);
  return g_test_run ();
}
