/* marks: threads (they start threads: TSan runs this file in `make SANITIZE=thread test-threads`) */
/* The partitioner's invariant: a net split among k workers by batch, by
 * feature, or both (hybrid), with whole layers on worker 0, computes the
 * same loss and the same gradient of every param as the unpartitioned net
 * on the same batch, for k = 2, 3, 4 and sizes that k does not divide; N
 * SGD steps on the group store equal N steps of the plain net.  Also:
 * the order and timing of backward notifications, values re-bound under
 * the group, short batches, the graph, and the errors for impossible
 * splits. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "comm/mailbox.h"
#include "core/error.h"
#include "layers/layer.h"
#include "layers/slice.h"
#include "net/net.h"
#include "partition/partition.h"
#include "support/gradcheck.h"

/* Sizes no k of 2..4 divides: rows 22, hidden 10, classes 7. */
#define ROWS 22

static const char mlp_text[] =
  "[layer in]\ntype = feed\nshape = 22, 30\nnum_classes = 7\n"
  "[layer fc1]\ntype = dense\nsrc = in\nnum_output = 10\n"
  "[layer relu1]\ntype = relu\nsrc = fc1\n"
  "[layer fc2]\ntype = dense\nsrc = relu1\nnum_output = 10\n"
  "[layer act2]\ntype = tanh\nsrc = fc2\n"
  "[layer fc3]\ntype = dense\nsrc = act2\nnum_output = 7\n"
  "[layer loss]\ntype = softmax_loss\nsrc = fc3, in\n"
  "[layer accuracy]\ntype = accuracy\nsrc = fc3, in\n";

static const char cnn_text[] =
  "[layer in]\ntype = feed\nshape = 22, 2, 12, 12\nnum_classes = 7\n"
  "[layer conv1]\ntype = conv\nsrc = in\nnum_filters = 6\nkernel = 3\n"
  "[layer pool1]\ntype = pooling\nsrc = conv1\npool = max\nkernel = 2\nstride = 2\n"
  "[layer conv2]\ntype = conv\nsrc = pool1\nnum_filters = 5\nkernel = 2\npad = 1\n"
  "[layer pool2]\ntype = pooling\nsrc = conv2\npool = max\nkernel = 2\nstride = 2\n"
  "[layer fc1]\ntype = dense\nsrc = pool2\nnum_output = 10\n"
  "[layer relu1]\ntype = relu\nsrc = fc1\n"
  "[layer fc2]\ntype = dense\nsrc = relu1\nnum_output = 7\n"
  "[layer loss]\ntype = softmax_loss\nsrc = fc2, in\n"
  "[layer accuracy]\ntype = accuracy\nsrc = fc2, in\n";

/* `base` with "name=dim" assignments (space separated) as partition_dim
 * keys, and an optional [cluster] partition_dim default. */
static char *
with_dims (const char *base, const char *dims, const char *cluster_default)
{
  GKeyFile *kf = g_key_file_new ();
  g_assert_true (g_key_file_load_from_data (kf, base, (gsize) -1, G_KEY_FILE_NONE, NULL));
  char **items = g_strsplit (dims ? dims : "", " ", -1);
  for (int i = 0; items[i] != NULL; i++)
    {
      if (*items[i] == '\0')
        continue;
      char **kv = g_strsplit (items[i], "=", 2);
      char *group = g_strconcat ("layer ", kv[0], NULL);
      g_assert_true (g_key_file_has_group (kf, group));
      g_key_file_set_value (kf, group, "partition_dim", kv[1]);
      g_free (group);
      g_strfreev (kv);
    }
  g_strfreev (items);
  if (cluster_default != NULL)
    g_key_file_set_value (kf, "cluster", "partition_dim", cluster_default);
  char *text = g_key_file_to_data (kf, NULL, NULL);
  g_key_file_free (kf);
  return text;
}

/* A group "spread over processes" inside this test: each process's group
 * net on its own threads, the wire a shared mailbox keyed by the
 * receiving process. */
typedef struct {
  ShoalGroupWire wire;
  ShoalMailbox *mailbox;
  gboolean *dead;          /* [nprocs]: sends to these fail */
  gint *garble;            /* messages on this channel arrive as garbage (-1: none) */
} LocalWire;

static gboolean
local_send (gpointer data, int proc, guint32 channel, GBytes *msg, GError **error)
{
  LocalWire *lw = data;
  if (lw->dead[proc])
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "process %d is gone", proc);
      return FALSE;
    }
  /* msg is borrowed: the receiving "process" gets a copy of its own */
  gsize len = 0;
  gconstpointer bytes = g_bytes_get_data (msg, &len);
  if ((gint) channel == g_atomic_int_get (lw->garble))
    shoal_mailbox_put (lw->mailbox, proc, channel, g_bytes_new ("garbage", 7));
  else
    shoal_mailbox_put (lw->mailbox, proc, channel, g_bytes_new (bytes, len));
  return TRUE;
}

static gboolean
local_alive (gpointer data, int proc, GError **error)
{
  LocalWire *lw = data;
  if (lw->dead[proc])
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "process %d is gone", proc);
  return !lw->dead[proc];
}

static GBytes *
local_recv (gpointer data, guint32 channel, gint64 timeout_ms, GError **error)
{
  LocalWire *lw = data;
  return shoal_mailbox_take (lw->mailbox, lw->wire.this_proc, channel, timeout_ms, error);
}

typedef struct {
  ShoalConf *conf;
  ShoalNet *ref;
  ShoalGroupNet *group;    /* in one process, or the spread group's leader */
  int k;
  int nprocs;              /* 1: in one process */
  ShoalGroupNet *procs[4];
  GThread *serving[4];
  GError *served[4];
  LocalWire wires[4];
  ShoalMailbox *mailbox;
  gboolean dead[4];
  gint garble;
} Pair;

typedef struct {
  ShoalGroupNet *net;
  GError **error;
} Serve;

static gpointer
serve_main (gpointer data)
{
  Serve *s = data;
  gboolean ok = shoal_group_net_serve (s->net, s->error);
  g_free (s);
  return GINT_TO_POINTER (ok);
}

static void
pair_init_spread (Pair *p, const char *text, int k, int nprocs, guint64 seed)
{
  GError *error = NULL;
  memset (p, 0, sizeof *p);
  p->k = k;
  p->nprocs = nprocs;
  p->garble = -1;
  p->conf = shoal_conf_load_data (text, "test.conf", &error);
  g_assert_no_error (error);
  ShoalNetOptions opts = { .seed = seed, .shard_count = 1 };
  p->ref = shoal_net_new (p->conf, &opts, &error);
  g_assert_no_error (error);
  if (nprocs == 1)
    p->group = shoal_group_net_new (p->conf, k, &opts, &error);
  else
    {
      p->mailbox = shoal_mailbox_new ();
      for (int j = 0; j < nprocs; j++)
        {
          p->wires[j] = (LocalWire) { { .nprocs = nprocs, .this_proc = j, .send = local_send, .recv = local_recv,
                                        .alive = local_alive, .data = &p->wires[j] },
                                      p->mailbox, p->dead, &p->garble };
          p->procs[j] = shoal_group_net_new_spread (p->conf, k, &opts, &p->wires[j].wire, &error);
          g_assert_no_error (error);
        }
      for (int j = 1; j < nprocs; j++)
        {
          Serve *s = g_new (Serve, 1);
          *s = (Serve) { p->procs[j], &p->served[j] };
          p->serving[j] = g_thread_new ("follower", serve_main, s);
        }
      p->group = p->procs[0];
    }
  g_assert_no_error (error);
  g_assert_cmpint (shoal_group_net_size (p->group), ==, k);
  shoal_param_store_init_values (shoal_net_params (p->ref), seed);
  shoal_param_store_init_values (shoal_group_net_params (p->group), seed);
}

static void
pair_init (Pair *p, const char *text, int k, guint64 seed)
{
  pair_init_spread (p, text, k, 1, seed);
}

/* Worker w's part of layer `name`, in whichever process holds it. */
static ShoalLayer *
part_of (Pair *p, int w, const char *name)
{
  ShoalGroupNet *g = p->nprocs == 1 ? p->group : p->procs[w / (p->k / p->nprocs)];
  return shoal_group_net_find (g, w, name);
}

/* Ends the followers (the leader's free tells them); TRUE when they all
 * served without an error. */
static gboolean
pair_clear (Pair *p)
{
  gboolean ok = TRUE, leader_ok = shoal_group_net_ok (p->group, NULL);
  shoal_group_net_free (p->group);
  for (int j = 1; j < p->nprocs; j++)
    {
      ok &= GPOINTER_TO_INT (g_thread_join (p->serving[j]));
      if (p->served[j] != NULL)
        g_test_message ("follower %d: %s", j, p->served[j]->message);
      g_clear_error (&p->served[j]);
      shoal_group_net_free (p->procs[j]);
    }
  if (p->mailbox != NULL)
    {
      /* a failed step may leave messages nobody waited for */
      if (ok && leader_ok)
        g_assert_cmpuint (shoal_mailbox_pending (p->mailbox), ==, 0);
      shoal_mailbox_free (p->mailbox);
    }
  shoal_net_free (p->ref);
  shoal_conf_free (p->conf);
  return ok;
}

/* Fresh gaussian data and labels in the reference's input, copied into
 * the group: whole to worker 0, or each worker's rows. */
static void
feed_inputs (Pair *p, ShoalRng *rng, int rows)
{
  for (guint i = 0; i < shoal_group_net_n_layers (p->group); i++)
    {
      ShoalLayer *desc = shoal_group_net_layer (p->group, i);
      if (!(desc->ops->flags & SHOAL_LAYER_INPUT))
        continue;
      ShoalLayer *in = shoal_net_find (p->ref, desc->name);
      shoal_tensor_set_rows (&in->out, rows);
      size_t row = shoal_tensor_row_size (&in->out);
      for (size_t j = 0; j < rows * row; j++)
        in->out.data[j] = shoal_rng_gaussian (rng);
      int classes = 7;
      size_t lrow = in->label.data != NULL ? shoal_tensor_row_size (&in->label) : 0;  /* sequences: > 1 */
      if (in->label.data != NULL)
        {
          shoal_tensor_set_rows (&in->label, rows);
          for (size_t r = 0; r < rows * lrow; r++)
            in->label.data[r] = (float) shoal_rng_below (rng, (guint32) classes);
        }
      for (int w = 0; w < p->k; w++)
        {
          ShoalLayer *part = part_of (p, w, desc->name);
          if (part == NULL)
            continue;
          int lo = 0, hi = rows;
          if (desc->partition_dim == 0)
            shoal_block_range (rows, p->k, w, &lo, &hi);
          shoal_tensor_set_rows (&part->out, hi - lo);
          memcpy (part->out.data, in->out.data + (size_t) lo * row, (size_t) (hi - lo) * row * sizeof (float));
          if (in->label.data != NULL)
            {
              shoal_tensor_set_rows (&part->label, hi - lo);
              memcpy (part->label.data, in->label.data + lo * lrow, (size_t) (hi - lo) * lrow * sizeof (float));
            }
        }
    }
}

static gboolean
close_to (double a, double b, double rtol)
{
  return fabs (a - b) <= rtol * MAX (fabs (b), 1e-3);
}

/* Every param's gradient: same layout, same values within float error. */
static void
assert_same_grads (Pair *p, const char *what)
{
  ShoalParamStore *a = shoal_group_net_params (p->group), *b = shoal_net_params (p->ref);
  g_assert_cmpuint (a->params->len, ==, b->params->len);
  g_assert_cmpuint (a->total, ==, b->total);
  /* float noise is relative to the largest gradient of the net: a bias
   * before batchnorm has a gradient of zero plus rounding */
  float global = 0;
  for (size_t j = 0; j < b->total; j++)
    global = MAX (global, fabsf (b->grads[j]));
  for (guint i = 0; i < b->params->len; i++)
    {
      ShoalParam *pa = g_ptr_array_index (a->params, i), *pb = g_ptr_array_index (b->params, i);
      g_assert_cmpstr (pa->name, ==, pb->name);
      g_assert_cmpuint (pa->offset, ==, pb->offset);
      float scale = 0;
      for (size_t j = 0; j < pb->count; j++)
        scale = MAX (scale, fabsf (pb->grad.data[j]));
      /* a gradient that is all zeros proves nothing, unless the param does
       * not learn (batchnorm's running statistics) */
      g_assert_true (scale > 0 || pb->lr_scale == 0);
      for (size_t j = 0; j < pb->count; j++)
        {
          float ga = pa->grad.data[j], gb = pb->grad.data[j];
          if (fabsf (ga - gb) > 1e-4f * fabsf (gb) + 2e-5f * scale + 1e-6f * global)
            {
              g_test_message ("%s, k=%d: %s[%zu]: group %.8g, net %.8g", what, p->k, pb->name, j,
                              ga, gb);
              g_test_fail ();
              return;
            }
        }
    }
}

/* Values written in forward (batchnorm's running statistics) agree too. */
static void
assert_same_values (Pair *p, const char *what)
{
  ShoalParamStore *a = shoal_group_net_params (p->group), *b = shoal_net_params (p->ref);
  for (size_t i = 0; i < b->total; i++)
    if (fabsf (a->values[i] - b->values[i]) > 1e-5f * (1 + fabsf (b->values[i])))
      {
        g_test_message ("%s, k=%d: value %zu: group %.8g, net %.8g", what, p->k, i, a->values[i],
                        b->values[i]);
        g_test_fail ();
        return;
      }
}

/* One forward and backward of both on the same batch; `fused`: the group
 * does them as one train step. */
static void
check_step (Pair *p, ShoalRng *rng, const char *what, gboolean fused)
{
  feed_inputs (p, rng, ROWS);
  shoal_param_store_zero_grads (shoal_net_params (p->ref));
  shoal_param_store_zero_grads (shoal_group_net_params (p->group));
  double lr = shoal_net_forward (p->ref, SHOAL_PHASE_TRAIN);
  double lg = fused ? shoal_group_net_train_step (p->group, NULL, NULL)
                    : shoal_group_net_forward (p->group, SHOAL_PHASE_TRAIN);
  if (!close_to (lg, lr, 1e-5))
    {
      g_test_message ("%s, k=%d: loss %.9g, net %.9g", what, p->k, lg, lr);
      g_test_fail ();
    }
  ShoalMetric mr[8], mg[8];
  guint nr = shoal_net_metrics (p->ref, mr, 8), ng = shoal_group_net_metrics (p->group, mg, 8);
  g_assert_cmpuint (nr, ==, ng);
  for (guint i = 0; i < nr; i++)
    {
      g_assert_cmpstr (mr[i].layer, ==, mg[i].layer);
      g_assert_true (close_to (mg[i].value, mr[i].value, 1e-5));
    }
  g_assert_cmpint (shoal_group_net_batch_rows (p->group), ==, ROWS);
  shoal_net_backward (p->ref);
  if (!fused)
    shoal_group_net_backward (p->group);
  assert_same_grads (p, what);
  assert_same_values (p, what);
}

/* For k = 2, 3, 4 in one process, and spread over every count of
 * processes that shares the workers evenly. */
static void
check_equivalent (const char *base, const char *dims, const char *cluster_default,
                  const char *what)
{
  char *text = with_dims (base, dims, cluster_default);
  for (int k = 2; k <= 4; k++)
    for (int nprocs = 1; nprocs <= k; nprocs++)
      {
        if (k % nprocs != 0)
          continue;
        Pair p;
        pair_init_spread (&p, text, k, nprocs, 100 + k);
        ShoalRng rng;
        shoal_rng_seed (&rng, 7, (guint64) k);
        char *label = g_strdup_printf ("%s, %d process%s", what, nprocs, nprocs > 1 ? "es" : "");
        /* spread: the leader runs only its own workers */
        g_assert_true ((shoal_group_net_find (p.group, k - 1, "fc1") == NULL) == (nprocs > 1));
        check_step (&p, &rng, label, FALSE);
        /* a second step, as one train step: nothing stale survives from the first */
        check_step (&p, &rng, label, TRUE);
        g_assert_true (pair_clear (&p));
        g_free (label);
      }
  g_free (text);
}

/* The dim each layer got. */
static int
dim_of (ShoalGroupNet *g, const char *name)
{
  for (guint i = 0; i < shoal_group_net_n_layers (g); i++)
    if (strcmp (shoal_group_net_layer (g, i)->name, name) == 0)
      return shoal_group_net_layer (g, i)->partition_dim;
  g_assert_not_reached ();
}

/* partition_dim = auto: dense layers whose weights outweigh twice their
 * batch of inputs by feature, with the element-wise layers after them;
 * the rest by batch; a group spread over processes all by batch. */
static const char wide_text[] =
  "[layer in]\ntype = feed\nshape = 22, 20\nnum_classes = 7\n"
  "[layer fc1]\ntype = dense\nsrc = in\nnum_output = 64\n"
  "[layer relu1]\ntype = relu\nsrc = fc1\n"
  "[layer fc2]\ntype = dense\nsrc = relu1\nnum_output = 64\n"
  "[layer act2]\ntype = tanh\nsrc = fc2\n"
  "[layer fc3]\ntype = dense\nsrc = act2\nnum_output = 7\n"
  "[layer loss]\ntype = softmax_loss\nsrc = fc3, in\n"
  "[layer accuracy]\ntype = accuracy\nsrc = fc3, in\n";

static void
test_auto (void)
{
  char *text = with_dims (wide_text, NULL, "auto");
  Pair p;
  pair_init (&p, text, 2, 1);
  g_assert_cmpint (dim_of (p.group, "in"), ==, -1);
  g_assert_cmpint (dim_of (p.group, "fc1"), ==, 1);
  g_assert_cmpint (dim_of (p.group, "relu1"), ==, 1);
  g_assert_cmpint (dim_of (p.group, "fc2"), ==, 1);
  g_assert_cmpint (dim_of (p.group, "act2"), ==, 1);
  g_assert_cmpint (dim_of (p.group, "fc3"), ==, 0);
  g_assert_cmpint (dim_of (p.group, "loss"), ==, 0);
  pair_clear (&p);
  /* the gradients of the unsplit net, in one process and spread */
  check_equivalent (wide_text, NULL, "auto", "wide auto");
  /* spread over processes: all by batch, so each worker runs a plain net */
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data (text, "test.conf", &error);
  g_assert_no_error (error);
  gboolean batch_only = FALSE;
  g_assert_true (shoal_partition_batch_only (conf, 2, NULL, &batch_only, &error));
  g_assert_no_error (error);
  g_assert_true (batch_only);
  shoal_conf_free (conf);
  /* an LeNet's dense layer by feature, its convolutions by batch */
  check_equivalent (cnn_text, NULL, "auto", "cnn auto");
  g_free (text);
}

static void
test_mlp_batch (void)
{
  check_equivalent (mlp_text, NULL, NULL, "mlp batch");
}

static void
test_mlp_feature (void)
{
  /* net-wide default 1: types that cannot (loss, accuracy) fall back to batch */
  check_equivalent (mlp_text, NULL, "1", "mlp feature");
  char *text = with_dims (mlp_text, NULL, "1");
  Pair p;
  pair_init (&p, text, 3, 1);
  g_assert_cmpint (dim_of (p.group, "in"), ==, -1);
  g_assert_cmpint (dim_of (p.group, "fc1"), ==, 1);
  g_assert_cmpint (dim_of (p.group, "act2"), ==, 1);
  g_assert_cmpint (dim_of (p.group, "loss"), ==, 0);
  /* worker 1 owns its block of rows of fc1's weight: 10 units in 3 -> 4 3 3 */
  ShoalLayer *fc1 = shoal_group_net_find (p.group, 1, "fc1");
  g_assert_cmpint (fc1->params[0]->shape.dim[0], ==, 3);
  ShoalParam *full = shoal_param_store_find (shoal_group_net_params (p.group), "fc1/weight");
  g_assert_true (fc1->params[0]->value.data == full->value.data + 4 * 30);
  pair_clear (&p);
  g_free (text);
}

static void
test_mlp_hybrid (void)
{
  check_equivalent (mlp_text, "fc2=1 act2=1 fc3=1", NULL, "mlp hybrid");
  /* whole layers in the middle and at the end */
  check_equivalent (mlp_text, "fc2=-1 fc3=1 loss=-1", NULL, "mlp with whole layers");
  check_equivalent (mlp_text, "fc1=1 relu1=-1 fc2=0 accuracy=-1", NULL, "mlp mixed");
}

/* batchnorm cannot be split by batch in a group: by default it takes
 * feature, which is exact (per-feature statistics over the whole batch),
 * and its running statistics, written in forward, agree. */
static const char bn_text[] =
  "[layer in]\ntype = feed\nshape = 22, 30\nnum_classes = 7\n"
  "[layer fc1]\ntype = dense\nsrc = in\nnum_output = 10\n"
  "[layer bn]\ntype = batchnorm\nsrc = fc1\n"
  "[layer relu1]\ntype = relu\nsrc = bn\n"
  "[layer fc2]\ntype = dense\nsrc = relu1\nnum_output = 7\n"
  "[layer loss]\ntype = softmax_loss\nsrc = fc2, in\n";

static void
test_batchnorm (void)
{
  check_equivalent (bn_text, NULL, NULL, "batchnorm after batch-split dense");
  check_equivalent (bn_text, "fc1=1", NULL, "batchnorm after feature-split dense");
  char *text = with_dims (bn_text, NULL, NULL);
  Pair p;
  pair_init (&p, text, 2, 1);
  g_assert_cmpint (dim_of (p.group, "bn"), ==, 1);
  pair_clear (&p);
  g_free (text);
}

static void
test_mlp_batch_input (void)
{
  /* every worker reads its own rows (its shard in a real job) */
  check_equivalent (mlp_text, "in=0", NULL, "mlp batch-split input");
  check_equivalent (mlp_text, "in=0 fc1=1 relu1=1 fc2=1 act2=1", NULL, "mlp batch-split input, features");
}

/* Recurrent layers split by batch: each worker's part unrolls its rows
 * and carries their state; the second step of check_equivalent starts
 * from the states the first left.  A restart source (in) marks rows with
 * a negative first value.  Sequence labels (5 per row) travel through
 * slices and bridges with their rows. */
static const char rnn_text[] =
  "[layer in]\ntype = feed\nshape = 22, 5, 4\nnum_classes = 7\nlabel_steps = 5\n"
  "[layer fc1]\ntype = dense\nsrc = in\nnum_output = 6\naxis = 2\n"
  "[layer rnn]\ntype = %s\nsrc = fc1, in\nhidden_size = 6\nnum_layers = 2\n"
  "[layer fc2]\ntype = dense\nsrc = rnn\nnum_output = 7\naxis = 2\n"
  "[layer loss]\ntype = softmax_loss\nsrc = fc2, in\n"
  "[layer accuracy]\ntype = accuracy\nsrc = fc2, in\n";

static void
test_recurrent_batch (void)
{
  const char *types[] = { "gru", "lstm" };
  for (int i = 0; i < 2; i++)
    {
      char *text = g_strdup_printf (rnn_text, types[i]);
      check_equivalent (text, NULL, NULL, types[i]);
      check_equivalent (text, "in=0", NULL, types[i]);
      /* a whole recurrent layer between batch-split ones */
      check_equivalent (text, "rnn=-1", NULL, types[i]);
      check_equivalent (text, "fc2=-1 loss=-1 accuracy=-1", NULL, types[i]);
      /* feature splits of recurrent units are refused */
      char *bad = with_dims (text, "rnn=1", NULL);
      GError *error = NULL;
      ShoalConf *conf = shoal_conf_load_data (bad, "test.conf", &error);
      g_assert_no_error (error);
      g_assert_null (shoal_group_net_new (conf, 2, NULL, &error));
      g_assert_nonnull (error);
      char *want = g_strdup_printf ("a %s layer cannot be split by feature (partition_dim 1): its type does "
                                    "not support it; it can be split by batch (0) or whole (-1)", types[i]);
      if (strstr (error->message, want) == NULL)
        g_error ("%s lacks %s", error->message, want);
      g_free (want);
      g_clear_error (&error);
      shoal_conf_free (conf);
      g_free (bad);
      g_free (text);
    }
}

static void
test_cnn_batch (void)
{
  check_equivalent (cnn_text, NULL, NULL, "cnn batch");
}

static void
test_cnn_feature (void)
{
  check_equivalent (cnn_text, NULL, "1", "cnn feature");
}

static void
test_cnn_hybrid (void)
{
  /* the LeNet split of examples/fashion-mnist/hybrid.conf */
  check_equivalent (cnn_text, "fc1=1 relu1=1 fc2=1", NULL, "cnn hybrid");
  check_equivalent (cnn_text, "conv1=1 pool1=1 conv2=0 pool2=-1 fc1=0 fc2=1", NULL, "cnn mixed");
}

static void
test_one_worker_is_the_net (void)
{
  Pair p;
  pair_init (&p, mlp_text, 1, 3);
  ShoalRng rng;
  shoal_rng_seed (&rng, 3, 3);
  check_step (&p, &rng, "k=1", FALSE);
  check_step (&p, &rng, "k=1", TRUE);
  g_assert_true (shoal_net_params (shoal_group_net_worker (p.group, 0)) == shoal_group_net_params (p.group));
  pair_clear (&p);
}

/* Plain SGD on the full-layout store: N steps partitioned == N plain. */
static void
train (ShoalParamStore *store, float lr)
{
  for (size_t i = 0; i < store->total; i++)
    store->values[i] -= lr * store->grads[i];
}

static void
test_training_steps (void)
{
  const char *const dims[] = { NULL, "fc1=1 relu1=1 fc2=1", "conv2=-1 fc1=1 relu1=1 fc2=0" };
  for (gsize d = 0; d < G_N_ELEMENTS (dims); d++)
    {
      char *text = with_dims (cnn_text, dims[d], NULL);
      Pair p;
      pair_init (&p, text, 2 + (int) d, 11);
      ShoalRng rng;
      shoal_rng_seed (&rng, 11, d);
      double last_ref = 0, last_group = 0, first = 0;
      for (int step = 0; step < 8; step++)
        {
          feed_inputs (&p, &rng, ROWS);
          shoal_param_store_zero_grads (shoal_net_params (p.ref));
          shoal_param_store_zero_grads (shoal_group_net_params (p.group));
          last_ref = shoal_net_forward (p.ref, SHOAL_PHASE_TRAIN);
          last_group = shoal_group_net_forward (p.group, SHOAL_PHASE_TRAIN);
          shoal_net_backward (p.ref);
          shoal_group_net_backward (p.group);
          train (shoal_net_params (p.ref), 0.5f);
          train (shoal_group_net_params (p.group), 0.5f);
          g_assert_true (close_to (last_group, last_ref, 1e-4));
          if (step == 0)
            first = last_ref;
        }
      g_assert_cmpfloat (last_ref, !=, first);  /* the params moved */
      ShoalParamStore *a = shoal_group_net_params (p.group), *b = shoal_net_params (p.ref);
      for (size_t i = 0; i < b->total; i++)
        g_assert_true (fabsf (a->values[i] - b->values[i]) <= 1e-4f * (1 + fabsf (b->values[i])));
      pair_clear (&p);
      g_free (text);
    }
}

/* backward_notify: every layer with params once, in decreasing offsets,
 * each when its gradient is already the whole group's. */
typedef struct {
  Pair *pair;
  size_t last_begin;
  int calls;
  gboolean complete;
  GThread *thread;
} NotifyCheck;

static void
on_ready (ShoalLayer *layer, gpointer data)
{
  NotifyCheck *c = data;
  size_t begin, end;
  g_assert_true (g_thread_self () == c->thread);
  g_assert_true (shoal_layer_param_range (layer, &begin, &end));
  g_assert_cmpuint (begin, <, c->last_begin);
  c->last_begin = begin;
  c->calls++;
  ShoalParamStore *ref = shoal_net_params (c->pair->ref);
  for (int i = 0; i < layer->nparams; i++)
    {
      ShoalParam *pa = layer->params[i], *pb = shoal_param_store_find (ref, pa->name);
      g_assert_true (pa->grad.data == shoal_group_net_params (c->pair->group)->grads + pa->offset);
      for (size_t j = 0; j < pb->count; j++)
        if (fabsf (pa->grad.data[j] - pb->grad.data[j]) > 1e-4f * (1 + fabsf (pb->grad.data[j])))
          c->complete = FALSE;
    }
}

static void
test_backward_notify (void)
{
  char *text = with_dims (cnn_text, "conv2=-1 fc1=1 relu1=1 fc2=1", NULL);
  Pair p;
  pair_init (&p, text, 3, 5);
  ShoalRng rng;
  shoal_rng_seed (&rng, 5, 5);
  feed_inputs (&p, &rng, ROWS);
  shoal_param_store_zero_grads (shoal_net_params (p.ref));
  shoal_param_store_zero_grads (shoal_group_net_params (p.group));
  shoal_net_forward (p.ref, SHOAL_PHASE_TRAIN);
  shoal_net_backward (p.ref);
  shoal_group_net_forward (p.group, SHOAL_PHASE_TRAIN);
  NotifyCheck c = { &p, G_MAXSIZE, 0, TRUE, g_thread_self () };
  shoal_group_net_backward_notify (p.group, on_ready, &c);
  g_assert_cmpint (c.calls, ==, 4);  /* conv1, conv2, fc1, fc2 */
  g_assert_true (c.complete);
  /* the same through a train step, on the next batch */
  feed_inputs (&p, &rng, ROWS);
  shoal_param_store_zero_grads (shoal_net_params (p.ref));
  shoal_param_store_zero_grads (shoal_group_net_params (p.group));
  shoal_net_forward (p.ref, SHOAL_PHASE_TRAIN);
  shoal_net_backward (p.ref);
  c = (NotifyCheck) { &p, G_MAXSIZE, 0, TRUE, g_thread_self () };
  shoal_group_net_train_step (p.group, on_ready, &c);
  g_assert_cmpint (c.calls, ==, 4);
  g_assert_true (c.complete);
  pair_clear (&p);
  g_free (text);
}

/* A server re-binds the values: the next forward reads them. */
static void
test_borrowed_values (void)
{
  char *text = with_dims (mlp_text, "fc2=1 act2=1", NULL);
  Pair p;
  pair_init (&p, text, 2, 9);
  ShoalParamStore *store = shoal_group_net_params (p.group), *ref = shoal_net_params (p.ref);
  float *server = shoal_alloc_floats (store->total);
  for (size_t i = 0; i < store->total; i++)
    {
      server[i] = 0.9f * store->values[i] + 0.01f;
      ref->values[i] = server[i];
    }
  shoal_param_store_borrow_values (store, server);
  ShoalRng rng;
  shoal_rng_seed (&rng, 9, 9);
  check_step (&p, &rng, "borrowed values", TRUE);
  pair_clear (&p);
  shoal_free_aligned (server);
  g_free (text);
}

/* A short last batch (test phase): every worker cuts the rows it has. */
static void
test_short_batch (void)
{
  char *text = with_dims (cnn_text, "fc1=1 relu1=1 fc2=1", NULL);
  for (int k = 2; k <= 4; k++)
    {
      Pair p;
      pair_init (&p, text, k, 21);
      ShoalRng rng;
      shoal_rng_seed (&rng, 21, (guint64) k);
      feed_inputs (&p, &rng, 9);
      double lr = shoal_net_forward (p.ref, SHOAL_PHASE_TEST);
      double lg = shoal_group_net_forward (p.group, SHOAL_PHASE_TEST);
      g_assert_true (close_to (lg, lr, 1e-5));
      g_assert_cmpint (shoal_group_net_batch_rows (p.group), ==, 9);
      g_assert_cmpint (shoal_group_net_batch_size (p.group), ==, ROWS);
      /* and a full batch again */
      check_step (&p, &rng, "after a short batch", FALSE);
      pair_clear (&p);
    }
  g_free (text);
}

static void
test_graph (void)
{
  char *text = with_dims (cnn_text, "fc1=1 relu1=1 fc2=1", NULL);
  Pair p;
  pair_init (&p, text, 2, 1);
  char *dot = shoal_group_net_to_dot (p.group);
  g_assert_true (g_str_has_prefix (dot, "digraph"));
  g_assert_nonnull (strstr (dot, "subgraph cluster_w0"));
  g_assert_nonnull (strstr (dot, "subgraph cluster_w1"));
  g_assert_null (strstr (dot, "cluster_w2"));
  g_assert_nonnull (strstr (dot, "style=dashed, color="));
  g_assert_nonnull (strstr (dot, "pool2:whole"));
  g_assert_nonnull (strstr (dot, "bridge_dst"));
  /* every cross edge names two existing nodes */
  g_assert_null (strstr (dot, "w-1_"));
  g_free (dot);
  pair_clear (&p);
  g_free (text);
}

/* Errors name the file, line, layer and dim. */
static void
expect_error (const char *text, int k, const char *message)
{
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data (text, "test.conf", &error);
  g_assert_no_error (error);
  ShoalGroupNet *g = shoal_group_net_new (conf, k, NULL, &error);
  g_assert_null (g);
  g_assert_nonnull (error);
  if (strstr (error->message, message) == NULL)
    {
      g_test_message ("expected '%s' in '%s'", message, error->message);
      g_test_fail ();
    }
  g_error_free (error);
  shoal_conf_free (conf);
}

static void
test_errors (void)
{
  expect_error ("[layer in]\ntype = feed\nshape = 8, 4\nnum_classes = 3\n"
                "[layer fc]\ntype = dense\nsrc = in\nnum_output = 3\n"
                "[layer loss]\ntype = softmax_loss\nsrc = fc, in\npartition_dim = 1\n",
                2, "test.conf:12: [layer loss] partition_dim: a softmax_loss layer cannot be split "
                "by feature (partition_dim 1): its type does not support it; it can be split by "
                "batch (0) or whole (-1)");
  expect_error ("[layer in]\ntype = feed\nshape = 8, 4\n"
                "[layer bn]\ntype = batchnorm\nsrc = in\npartition_dim = 0\n",
                2, "test.conf:7: [layer bn] partition_dim: a batchnorm layer cannot be split by "
                "batch (partition_dim 0): each worker would normalise");
  expect_error ("[layer a]\ntype = feed\nshape = 8, 4\n[layer b]\ntype = feed\nshape = 8, 4\n"
                "[layer cat]\ntype = concat\nsrc = a, b\npartition_dim = 1\n",
                3, "[layer cat] partition_dim: a concat layer cannot be split by feature");
  expect_error ("[layer in]\ntype = feed\nshape = 8, 4\n"
                "[layer fc]\ntype = dense\nsrc = in\nnum_output = 3\npartition_dim = 1\n",
                4, "test.conf:7: [layer fc] num_output: 3 cannot be split by feature among 4 workers");
  expect_error ("[layer in]\ntype = feed\nshape = 3, 4\n"
                "[layer fc]\ntype = dense\nsrc = in\nnum_output = 3\n",
                4, "[layer fc] its batch of 3 rows cannot be split by batch among 4 workers");
  expect_error ("[cluster]\npartition_dim = 2\n[layer in]\ntype = feed\nshape = 8, 4\n",
                2, "test.conf:2: [cluster] partition_dim");
  expect_error ("[layer in]\ntype = feed\nshape = 8, 4\n[layer a:b]\ntype = relu\nsrc = in\n",
                2, "[layer a:b] layer names of a partitioned net cannot hold ':'");
  expect_error ("[layer in]\ntype = feed\nshape = 8, 4\n", 0, "at least 1 worker");
  /* a bad conf fails with the user's file and line, not a generated one */
  expect_error ("[layer in]\ntype = feed\nshape = 8, 4\n[layer fc]\ntype = dense\nsrc = in\n", 2,
                "test.conf:4: [layer fc] missing required key 'num_output'");
}

/* The slice layer alone: gradient checks for uneven blocks on both axes,
 * and the block rule. */
static void
test_slice (void)
{
  int lo, hi;
  const int sizes[][2] = { { 10, 4 }, { 7, 3 }, { 4, 4 }, { 22, 3 } };
  for (gsize i = 0; i < G_N_ELEMENTS (sizes); i++)
    {
      int n = sizes[i][0], parts = sizes[i][1], next = 0, largest = 0, smallest = n;
      for (int b = 0; b < parts; b++)
        {
          shoal_block_range (n, parts, b, &lo, &hi);
          g_assert_cmpint (lo, ==, next);
          largest = MAX (largest, hi - lo);
          smallest = MIN (smallest, hi - lo);
          next = hi;
        }
      g_assert_cmpint (next, ==, n);
      g_assert_cmpint (largest - smallest, <=, 1);
    }
  shoal_block_range (10, 4, 2, &lo, &hi);
  g_assert_cmpint (lo, ==, 6);
  g_assert_cmpint (hi, ==, 8);

  const char *rows =
    "[layer a]\ntype = feed\nshape = 7, 3\nneed_grad = true\n"
    "[layer s]\ntype = slice\nsrc = a\naxis = 0\nparts = 3\nindex = 1\n";
  g_assert_cmpint (shoal_gradcheck_conf (rows, "s", NULL, 41), >, 0);
  const char *channels =
    "[layer a]\ntype = feed\nshape = 2, 5, 2, 3\nneed_grad = true\n"
    "[layer s]\ntype = slice\nsrc = a\naxis = 1\nparts = 2\nindex = 1\n";
  g_assert_cmpint (shoal_gradcheck_conf (channels, "s", NULL, 42), >, 0);

  /* the block's values, and labels following the rows */
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data (
    "[layer a]\ntype = feed\nshape = 7, 3\nnum_classes = 5\n"
    "[layer r]\ntype = slice\nsrc = a\naxis = 0\nparts = 3\nindex = 2\n"
    "[layer f]\ntype = slice\nsrc = a\naxis = 1\nparts = 2\nindex = 1\n", "test", &error);
  g_assert_no_error (error);
  ShoalNet *net = shoal_net_new (conf, NULL, &error);
  g_assert_no_error (error);
  shoal_net_forward (net, SHOAL_PHASE_TEST);
  ShoalLayer *a = shoal_net_find (net, "a"), *r = shoal_net_find (net, "r"), *f = shoal_net_find (net, "f");
  g_assert_cmpint (shoal_tensor_rows (&r->out), ==, 2);  /* 7 rows in 3: 3 2 2 */
  g_assert_cmpfloat (r->out.data[0], ==, a->out.data[5 * 3]);
  g_assert_cmpfloat (r->label.data[1], ==, a->label.data[6]);
  g_assert_cmpint (f->out.shape.dim[1], ==, 1);  /* 3 features in 2: 2 1 */
  g_assert_cmpfloat (f->out.data[4], ==, a->out.data[4 * 3 + 2]);
  /* a short batch is cut by the rows it has */
  shoal_tensor_set_rows (&a->out, 4);
  shoal_tensor_set_rows (&a->label, 4);
  shoal_net_forward (net, SHOAL_PHASE_TEST);
  g_assert_cmpint (shoal_tensor_rows (&r->out), ==, 1);  /* 4 rows in 3: 2 1 1 */
  g_assert_cmpfloat (r->out.data[0], ==, a->out.data[3 * 3]);
  shoal_net_free (net);
  shoal_conf_free (conf);

  conf = shoal_conf_load_data ("[layer a]\ntype = feed\nshape = 2, 3\n"
                               "[layer s]\ntype = slice\nsrc = a\naxis = 1\nparts = 4\n", "test", &error);
  g_assert_no_error (error);
  g_assert_null (shoal_net_new (conf, NULL, &error));
  g_assert_nonnull (strstr (error->message, "test:8: [layer s] parts: source 'a' (2x3) cannot be cut into 4 blocks along axis 1"));
  g_clear_error (&error);
  shoal_conf_free (conf);
}

/* A group spread over processes is the group in one process to the bit:
 * N SGD steps (hybrid CNN: bridges both ways, summed batch-split
 * gradients, whole layers), its checkpointed state, and its test
 * forwards. */
static void
test_spread_steps (void)
{
  const char *dims = "conv2=-1 fc1=1 relu1=1 fc2=0";
  char *text = with_dims (cnn_text, dims, NULL);
  const int k = 4;
  Pair one, spread;
  pair_init (&one, text, k, 5);
  pair_init_spread (&spread, text, k, 2, 5);
  ShoalRng rng_a, rng_b;
  shoal_rng_seed (&rng_a, 5, 1);
  shoal_rng_seed (&rng_b, 5, 1);
  for (int step = 0; step < 6; step++)
    {
      feed_inputs (&one, &rng_a, ROWS - step);  /* short batches too */
      feed_inputs (&spread, &rng_b, ROWS - step);
      ShoalParamStore *a = shoal_group_net_params (one.group), *b = shoal_group_net_params (spread.group);
      shoal_param_store_zero_grads (a);
      shoal_param_store_zero_grads (b);
      double la = shoal_group_net_train_step (one.group, NULL, NULL);
      double lb = shoal_group_net_train_step (spread.group, NULL, NULL);
      g_assert_cmpfloat (la, ==, lb);
      g_assert_cmpint (shoal_group_net_batch_rows (spread.group), ==, ROWS - step);
      g_assert_cmpmem (a->grads, a->total * sizeof (float), b->grads, b->total * sizeof (float));
      train (a, 0.3f);
      train (b, 0.3f);
      ShoalMetric ma[4], mb[4];
      guint na = shoal_group_net_metrics (one.group, ma, 4), nb = shoal_group_net_metrics (spread.group, mb, 4);
      g_assert_cmpuint (na, ==, nb);
      for (guint i = 0; i < na; i++)
        g_assert_cmpfloat (ma[i].value, ==, mb[i].value);
    }
  /* test forwards: the followers' values are sent once per test pass,
   * unless they changed (here: a step of plain SGD between two forwards) */
  for (int pass = 0; pass < 3; pass++)
    {
      feed_inputs (&one, &rng_a, ROWS);
      feed_inputs (&spread, &rng_b, ROWS);
      g_assert_cmpfloat (shoal_group_net_forward (one.group, SHOAL_PHASE_TEST), ==,
                         shoal_group_net_forward (spread.group, SHOAL_PHASE_TEST));
      if (pass == 1)
        {
          train (shoal_group_net_params (one.group), 0.3f);
          train (shoal_group_net_params (spread.group), 0.3f);
        }
    }

  /* the state of a spread group is the state of the group in one process */
  GError *error = NULL;
  GBytes *sa = shoal_group_net_save_state (one.group, &error);
  g_assert_no_error (error);
  GBytes *sb = shoal_group_net_save_state (spread.group, &error);
  g_assert_no_error (error);
  g_assert_true (g_bytes_equal (sa, sb));
  g_assert_true (shoal_group_net_load_state (spread.group, sa, &error));
  g_assert_no_error (error);
  GBytes *bad = g_bytes_new ("xyz", 3);
  g_assert_false (shoal_group_net_load_state (spread.group, bad, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA);
  g_clear_error (&error);
  g_bytes_unref (bad);
  g_bytes_unref (sa);
  g_bytes_unref (sb);
  g_assert_true (shoal_group_net_ok (spread.group, NULL));
  pair_clear (&one);
  g_assert_true (pair_clear (&spread));
  g_free (text);
}

/* A follower that cannot be reached: the step's loss is NaN, the error
 * says which process, and nothing hangs. */
static void
test_spread_dead_follower (void)
{
  char *text = with_dims (mlp_text, "fc1=1 relu1=1", NULL);
  Pair p;
  pair_init_spread (&p, text, 2, 2, 9);
  ShoalRng rng;
  shoal_rng_seed (&rng, 9, 9);
  feed_inputs (&p, &rng, ROWS);
  g_assert_true (isfinite (shoal_group_net_train_step (p.group, NULL, NULL)));
  p.dead[1] = TRUE;
  feed_inputs (&p, &rng, ROWS);
  g_test_expect_message (G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*group net, process 0 of 2: process 1 is gone*");
  g_assert_true (isnan (shoal_group_net_train_step (p.group, NULL, NULL)));
  GError *error = NULL;
  g_assert_false (shoal_group_net_ok (p.group, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC);
  g_assert_nonnull (strstr (error->message, "process 1 is gone"));
  g_clear_error (&error);
  g_test_assert_expected_messages ();
  g_assert_null (shoal_group_net_save_state (p.group, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC);
  g_clear_error (&error);
  /* the follower learns of it from a timeout in a real job; here it is
   * told directly, and serve ends with an error */
  p.dead[1] = FALSE;
  g_assert_false (pair_clear (&p));
  g_free (text);
}

/* A damaged bridge message in the middle of a step: the follower that
 * gets it still sends what the others wait for and reports the failure,
 * so the leader's step ends at once with it (not at a timeout). */
static void
test_spread_damaged_message (void)
{
  char *text = with_dims (mlp_text, "fc1=1 relu1=1", NULL);
  Pair p;
  pair_init_spread (&p, text, 2, 2, 9);
  ShoalRng rng;
  shoal_rng_seed (&rng, 9, 9);
  feed_inputs (&p, &rng, ROWS);
  g_assert_true (isfinite (shoal_group_net_train_step (p.group, NULL, NULL)));
  g_atomic_int_set (&p.garble, 0);  /* pair 0's data: the first bridge of the step */
  feed_inputs (&p, &rng, ROWS);
  g_test_expect_message (G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*damaged or unexpected bridge data*");
  g_test_expect_message (G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*process 1 of the group failed*");
  g_assert_true (isnan (shoal_group_net_train_step (p.group, NULL, NULL)));
  g_test_assert_expected_messages ();
  GError *error = NULL;
  g_assert_false (shoal_group_net_ok (p.group, &error));
  g_assert_nonnull (strstr (error->message, "process 1 of the group failed"));
  g_clear_error (&error);
  g_assert_false (pair_clear (&p));
  g_free (text);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/partition/mlp-batch", test_mlp_batch);
  g_test_add_func ("/partition/mlp-feature", test_mlp_feature);
  g_test_add_func ("/partition/mlp-hybrid", test_mlp_hybrid);
  g_test_add_func ("/partition/auto", test_auto);
  g_test_add_func ("/partition/mlp-batch-input", test_mlp_batch_input);
  g_test_add_func ("/partition/batchnorm", test_batchnorm);
  g_test_add_func ("/partition/cnn-batch", test_cnn_batch);
  g_test_add_func ("/partition/recurrent-batch", test_recurrent_batch);
  g_test_add_func ("/partition/cnn-feature", test_cnn_feature);
  g_test_add_func ("/partition/cnn-hybrid", test_cnn_hybrid);
  g_test_add_func ("/partition/one-worker", test_one_worker_is_the_net);
  g_test_add_func ("/partition/training-steps", test_training_steps);
  g_test_add_func ("/partition/backward-notify", test_backward_notify);
  g_test_add_func ("/partition/borrowed-values", test_borrowed_values);
  g_test_add_func ("/partition/short-batch", test_short_batch);
  g_test_add_func ("/partition/graph", test_graph);
  g_test_add_func ("/partition/errors", test_errors);
  g_test_add_func ("/partition/slice", test_slice);
  g_test_add_func ("/partition/spread-steps", test_spread_steps);
  g_test_add_func ("/partition/spread-dead-follower", test_spread_dead_follower);
  g_test_add_func ("/partition/spread-damaged-message", test_spread_damaged_message);
  return g_test_run ();
}
