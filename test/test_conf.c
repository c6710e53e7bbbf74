/* Conf errors are the user interface of a job file: these tests pin the
 * exact messages (file, line, group, key, what is wrong) for bad layer
 * groups, bad graphs, bad values, -o overrides and the [job] / [updater]
 * / [cluster] sections, and check the generic getters and lists. */
#include <glib.h>
#include <string.h>

#include "core/error.h"
#include "net/net.h"
#include "job/job.h"

/* Lines 1-10; groups appended by a test start at line 11. */
#define BASE                                                                   \
  "# a small net\n"       /*  1 */                                             \
  "[layer in]\n"          /*  2 */                                             \
  "type = feed\n"         /*  3 */                                             \
  "shape = 4,3\n"         /*  4 */                                             \
  "num_classes = 2\n"     /*  5 */                                             \
  "\n"                    /*  6 */                                             \
  "[layer fc1]\n"         /*  7 */                                             \
  "type = dense\n"        /*  8 */                                             \
  "src = in\n"            /*  9 */                                             \
  "num_output = 2\n"      /* 10 */

/* Loads `text` as "x.conf" with the overrides and builds the net; both
 * steps may fail.  Returns the error message (g_free) or NULL when the
 * net was built. */
static char *
net_error_o (const char *text, const char *const *overrides)
{
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data (text, "x.conf", &error);
  for (int i = 0; conf != NULL && overrides != NULL && overrides[i] != NULL; i++)
    if (!shoal_conf_override (conf, overrides[i], &error))
      break;
  if (conf != NULL && error == NULL)
    {
      ShoalNet *net = shoal_net_new (conf, NULL, &error);
      g_assert_true ((net == NULL) == (error != NULL));
      shoal_net_free (net);
    }
  shoal_conf_free (conf);
  if (error == NULL)
    return NULL;
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
  char *msg = g_strdup (error->message);
  g_error_free (error);
  return msg;
}

static char *
net_error (const char *text)
{
  return net_error_o (text, NULL);
}

/* Error message of shoal_job_load_data (g_free), or NULL when it loaded. */
static char *
job_error (const char *text, const char *const *overrides)
{
  GError *error = NULL;
  ShoalJob *job = shoal_job_load_data (text, "x.conf", overrides, &error);
  g_assert_true ((job == NULL) == (error != NULL));
  shoal_job_free (job);
  if (error == NULL)
    return NULL;
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
  char *msg = g_strdup (error->message);
  g_error_free (error);
  return msg;
}

#define assert_message(expr, want)                                             \
  G_STMT_START                                                                 \
  {                                                                            \
    char *msg_ = (expr);                                                       \
    g_assert_cmpstr (msg_, ==, (want));                                        \
    g_free (msg_);                                                             \
  }                                                                            \
  G_STMT_END

static void
test_base_builds (void)
{
  /* every other test breaks this one conf; it must be fine as it is */
  g_assert_null (net_error (BASE));
}

static void
test_unknown_key (void)
{
  assert_message (net_error (BASE "num_ouput = 3\n"),
                  "x.conf:11: [layer fc1] num_ouput: unknown key (did you mean 'num_output'?)");
  /* param keys are offered too */
  assert_message (net_error (BASE "weight_sdt = 0.1\n"),
                  "x.conf:11: [layer fc1] weight_sdt: unknown key (did you mean 'weight_std'?)");
  /* nothing close: no hint */
  assert_message (net_error (BASE "colour = red\n"), "x.conf:11: [layer fc1] colour: unknown key");
  /* keys of another layer type are unknown here */
  assert_message (net_error (BASE "negative_slope = 0.1\n"),
                  "x.conf:11: [layer fc1] negative_slope: unknown key");
  /* a feed layer has no params, so no param keys */
  assert_message (net_error (BASE "\n[layer in2]\ntype = feed\nshape = 1\nweight_std = 1\n"),
                  "x.conf:15: [layer in2] weight_std: unknown key");
}

static void
test_unknown_type (void)
{
  assert_message (net_error (BASE "\n[layer fc2]\ntype = conv3d\nsrc = fc1\n"),
                  "x.conf:13: [layer fc2] type: unknown layer type 'conv3d'");
  /* the split layer is the net's own */
  assert_message (net_error (BASE "\n[layer s]\ntype = split\nsrc = fc1\n"),
                  "x.conf:13: [layer s] type: unknown layer type 'split'");
  assert_message (net_error (BASE "\n[layer fc2]\nsrc = fc1\n"),
                  "x.conf:12: [layer fc2] missing required key 'type'");
}

static void
test_missing_source (void)
{
  assert_message (net_error (BASE "[layer fc2]\ntype = dense\nsrc = fc9\nnum_output = 2\n"),
                  "x.conf:13: [layer fc2] src: unknown source layer 'fc9'");
  /* the second of two sources */
  assert_message (net_error (BASE "[layer cat]\ntype = concat\nsrc = fc1, nope\n"),
                  "x.conf:13: [layer cat] src: unknown source layer 'nope'");
}

static void
test_cycles (void)
{
  assert_message (net_error (BASE
                             "[layer a]\ntype = dense\nsrc = b\nnum_output = 2\n"   /* 11-14 */
                             "[layer b]\ntype = dense\nsrc = a\nnum_output = 2\n"), /* 15-18 */
                  "x.conf:13: [layer a] src: the layers a, b form a cycle");
  assert_message (net_error (BASE
                             "[layer a]\ntype = dense\nsrc = c\nnum_output = 2\n"
                             "[layer b]\ntype = dense\nsrc = a\nnum_output = 2\n"
                             "[layer c]\ntype = dense\nsrc = b\nnum_output = 2\n"),
                  "x.conf:13: [layer a] src: the layers a, b, c form a cycle");
  /* layers fed by a cycle, and a concat with one source from outside the
   * cycle, are not part of it */
  assert_message (net_error (BASE
                             "[layer d]\ntype = dense\nsrc = b\nnum_output = 2\n"   /* 11-14 */
                             "[layer b]\ntype = concat\nsrc = fc1, c\n"             /* 15-17 */
                             "[layer c]\ntype = relu\nsrc = b\n"                    /* 18-20 */
                             "[layer e]\ntype = relu\nsrc = d\n"),
                  "x.conf:17: [layer b] src: the layers b, c form a cycle");
}

static void
test_self_feed (void)
{
  assert_message (net_error (BASE "[layer r]\ntype = relu\nsrc = r\n"),
                  "x.conf:13: [layer r] src: a layer cannot feed itself");
}

static void
test_source_count (void)
{
  assert_message (net_error (BASE "[layer fc2]\ntype = dense\nsrc = in, fc1\nnum_output = 2\n"),
                  "x.conf:13: [layer fc2] src: a dense layer takes 1 source, got 2");
  assert_message (net_error (BASE "[layer cat]\ntype = concat\nsrc = fc1\n"),
                  "x.conf:13: [layer cat] src: a concat layer takes 2 to 8 sources, got 1");
  assert_message (net_error (BASE "[layer in2]\ntype = feed\nshape = 1\nsrc = in\n"),
                  "x.conf:14: [layer in2] src: a feed layer takes 0 sources, got 1");
  /* no src key at all: the message points at the group */
  assert_message (net_error (BASE "[layer fc2]\ntype = dense\nnum_output = 2\n"),
                  "x.conf:11: [layer fc2] src: a dense layer takes 1 source, got 0");
}

static void
test_duplicates (void)
{
  /* GKeyFile would merge these two groups into one */
  assert_message (net_error (BASE "[layer fc1]\ntype = relu\n"),
                  "x.conf:11: [layer fc1] section written twice (first at line 7)");
  assert_message (net_error (BASE "[layer  fc1]\ntype = relu\nsrc = in\n"),
                  "x.conf:11: [layer  fc1] layer 'fc1' is defined twice");
  /* ... and keep the last of two values */
  assert_message (net_error (BASE "num_output = 3\n"),
                  "x.conf:11: [layer fc1] num_output: set twice (first at line 10)");
}

static void
test_bad_names (void)
{
  assert_message (net_error (BASE "[layer fc.2]\ntype = relu\nsrc = fc1\n"),
                  "x.conf:11: [layer fc.2] layer name 'fc.2' must be non-empty without '.', '/', ',' or spaces");
  assert_message (net_error (BASE "[layer a/b]\ntype = relu\nsrc = fc1\n"),
                  "x.conf:11: [layer a/b] layer name 'a/b' must be non-empty without '.', '/', ',' or spaces");
  assert_message (net_error (BASE "[layer a b]\ntype = relu\nsrc = fc1\n"),
                  "x.conf:11: [layer a b] layer name 'a b' must be non-empty without '.', '/', ',' or spaces");
  assert_message (net_error (BASE "[layer a,b]\ntype = relu\nsrc = fc1\n"),
                  "x.conf:11: [layer a,b] layer name 'a,b' must be non-empty without '.', '/', ',' or spaces");
  assert_message (net_error ("[layer ]\ntype = feed\nshape = 1\n"),
                  "x.conf:1: [layer ] layer name '' must be non-empty without '.', '/', ',' or spaces");
  assert_message (net_error ("[job]\ntrain_steps = 1\n"), "x.conf: no [layer NAME] groups");
}

static void
test_bad_numbers (void)
{
  assert_message (net_error ("[layer in]\ntype = feed\nshape = 4,3\n"
                             "[layer fc1]\ntype = dense\nsrc = in\nnum_output = ten\n"),
                  "x.conf:7: [layer fc1] num_output: expected an integer, got 'ten'");
  assert_message (net_error (BASE "[layer r]\ntype = relu\nsrc = fc1\nnegative_slope = 1.5\n"),
                  "x.conf:14: [layer r] negative_slope: 1.5 is out of range [0, 1]");
  assert_message (net_error (BASE "[layer r]\ntype = relu\nsrc = fc1\nnegative_slope = abc\n"),
                  "x.conf:14: [layer r] negative_slope: expected a number, got 'abc'");
  assert_message (net_error (BASE "[layer r]\ntype = relu\nsrc = fc1\nnegative_slope = nan\n"),
                  "x.conf:14: [layer r] negative_slope: expected a number, got 'nan'");
  assert_message (net_error (BASE "[layer r]\ntype = relu\nsrc = fc1\nnegative_slope = 0.1x\n"),
                  "x.conf:14: [layer r] negative_slope: expected a number, got '0.1x'");
  assert_message (net_error (BASE "[layer r]\ntype = relu\nsrc = fc1\nnegative_slope =\n"),
                  "x.conf:14: [layer r] negative_slope: empty value");
  assert_message (net_error (BASE "[layer fc2]\ntype = dense\nsrc = fc1\nnum_output = 1.5\n"),
                  "x.conf:14: [layer fc2] num_output: expected an integer, got '1.5'");
  /* param keys are checked like the layer's own (a typo used to read as 0) */
  assert_message (net_error (BASE "weight_std = 0.O1\n"),
                  "x.conf:11: [layer fc1] weight_std: expected a number, got '0.O1'");
  assert_message (net_error (BASE "bias_lr_scale = -1\n"),
                  "x.conf:11: [layer fc1] bias_lr_scale: -1 is out of range [0, 1000000000]");
}

static void
test_out_of_range (void)
{
  assert_message (net_error (BASE "[layer fc2]\ntype = dense\nsrc = fc1\nnum_output = 0\n"),
                  "x.conf:14: [layer fc2] num_output: 0 is out of range [1, 16777216]");
  /* list items */
  assert_message (net_error (BASE "[layer in2]\ntype = feed\nshape = 4, 0\n"),
                  "x.conf:13: [layer in2] shape: 0 is out of range [1, 1073741824]");
  assert_message (net_error (BASE "[layer cat]\ntype = concat\nsrc = fc1, in\naxis = 2\n"),
                  "x.conf:14: [layer cat] axis: 2 is out of range [0, 1]");
  assert_message (net_error (BASE "loss_weight = -0.5\n"),
                  "x.conf:11: [layer fc1] loss_weight: -0.5 is out of range [0, 1000000000]");
  assert_message (net_error (BASE "partition_dim = 2\n"),
                  "x.conf:11: [layer fc1] partition_dim: 2 is out of range [-1, 1]");
}

static void
test_bools (void)
{
  assert_message (net_error (BASE "bias = maybe\n"),
                  "x.conf:11: [layer fc1] bias: expected true or false, got 'maybe'");
  const char *spellings[] = { "true", "TRUE", "yes", "1", "false", "False", "no", "0" };
  for (gsize i = 0; i < G_N_ELEMENTS (spellings); i++)
    {
      char *conf = g_strdup_printf (BASE "bias = %s\n", spellings[i]);
      GError *error = NULL;
      ShoalConf *c = shoal_conf_load_data (conf, "x.conf", &error);
      g_assert_no_error (error);
      ShoalNet *net = shoal_net_new (c, NULL, &error);
      g_assert_no_error (error);
      /* a dense layer without bias has one param */
      g_assert_cmpint (shoal_net_find (net, "fc1")->nparams, ==, i < 4 ? 2 : 1);
      shoal_net_free (net);
      shoal_conf_free (c);
      g_free (conf);
    }
}

static void
test_choices (void)
{
  assert_message (net_error (BASE "weight_init = gausian\n"),
                  "x.conf:11: [layer fc1] weight_init: 'gausian' is not one of "
                  "constant|gaussian|uniform|gaussian_sqrt_fan_in|uniform_sqrt_fan_in|xavier|"
                  "glorot_uniform|glorot_normal");
  assert_message (job_error ("[job]\ntrain_steps = 5\n[updater]\ntype = sgdd\n", NULL),
                  "x.conf:4: [updater] type: 'sgdd' is not one of sgd|nesterov|adagrad|rmsprop|adadelta|adam");
  assert_message (job_error ("[job]\ntrain_steps = 5\n[updater]\nlr_policy = Fixed\n", NULL),
                  "x.conf:4: [updater] lr_policy: 'Fixed' is not one of fixed|step|fixed_step|exponential|inverse");
  /* uniform bounds are checked when the param is declared */
  assert_message (net_error (BASE "weight_init = uniform\nweight_low = 1\nweight_high = 1\n"),
                  "x.conf:12: [layer fc1] weight_low: uniform init needs low < high (1, 1)");
}

static void
test_missing_required (void)
{
  assert_message (net_error (BASE "\n[layer fc2]\ntype = dense\nsrc = fc1\n"),
                  "x.conf:12: [layer fc2] missing required key 'num_output' (number of output units)");
  assert_message (net_error ("[layer in]\ntype = feed\n"),
                  "x.conf:1: [layer in] missing required key 'shape' (output shape, batch first: N,C,H,W or N,D)");
}

static void
test_unknown_section (void)
{
  assert_message (job_error ("[job]\ntrain_steps = 5\n\n[jobb]\nname = x\n", NULL),
                  "x.conf:4: [jobb] unknown section (expected [job], [updater], [cluster], [emulate], [tls] or [layer NAME])");
  assert_message (job_error ("[job]\ntrain_steps = 5\n[layerfc]\ntype = relu\n", NULL),
                  "x.conf:3: [layerfc] unknown section (expected [job], [updater], [cluster], [emulate], [tls] or [layer NAME])");
  assert_message (job_error ("[job]\ntrain_steps = 5\ntest_frq = 5\n", NULL),
                  "x.conf:3: [job] test_frq: unknown key (did you mean 'test_freq'?)");
}

static void
test_override_replaces (void)
{
  const char *const o[] = { "layer fc1.num_output = 7", "layer in.shape=5, 3", NULL };
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data (BASE, "x.conf", &error);
  g_assert_no_error (error);
  for (int i = 0; o[i] != NULL; i++)
    {
      g_assert_true (shoal_conf_override (conf, o[i], &error));
      g_assert_no_error (error);
    }
  ShoalNet *net = shoal_net_new (conf, NULL, &error);
  g_assert_no_error (error);
  ShoalLayer *fc1 = shoal_net_find (net, "fc1");
  g_assert_cmpint (fc1->out.shape.dim[0], ==, 5);
  g_assert_cmpint (fc1->out.shape.dim[1], ==, 7);
  shoal_net_free (net);
  shoal_conf_free (conf);

  /* through the job loader; a value may contain '=' */
  const char *const jo[] = { "job.train_steps=42", "job.name=a=b", "updater.lr=0.5", NULL };
  ShoalJob *job = shoal_job_load_data ("[job]\ntrain_steps = 10\nname = j\n", "x.conf", jo, &error);
  g_assert_no_error (error);
  g_assert_cmpint (job->train_steps, ==, 42);
  g_assert_cmpstr (job->name, ==, "a=b");
  g_assert_cmpfloat (job->updater.schedule.lr, ==, 0.5f);
  shoal_job_free (job);

  /* train_steps and epochs give the same length: the command line's wins */
  const char *const steps[] = { "job.train_steps=5", NULL };
  job = shoal_job_load_data ("[job]\nepochs = 3\n", "x.conf", steps, &error);
  g_assert_no_error (error);
  g_assert_cmpint (job->train_steps, ==, 5);
  g_assert_cmpfloat (job->epochs, ==, 0);
  g_assert_false (g_key_file_has_key (shoal_conf_keyfile (job->conf), "job", "epochs", NULL));
  shoal_job_free (job);
  const char *const epochs[] = { "job.epochs=0.5", NULL };
  job = shoal_job_load_data ("[job]\ntrain_steps = 10\n", "x.conf", epochs, &error);
  g_assert_no_error (error);
  g_assert_cmpint (job->train_steps, ==, 0);
  g_assert_cmpfloat (job->epochs, ==, 0.5);
  shoal_job_free (job);
  /* epochs = 0 on the command line keeps the file's train_steps */
  const char *const zero[] = { "job.epochs=0", NULL };
  job = shoal_job_load_data ("[job]\ntrain_steps = 10\n", "x.conf", zero, &error);
  g_assert_no_error (error);
  g_assert_cmpint (job->train_steps, ==, 10);
  shoal_job_free (job);
  /* both in the file, or both on the command line: an error */
  assert_message (job_error ("[job]\ntrain_steps = 10\nepochs = 1\n", NULL),
                  "x.conf:3: [job] epochs: give train_steps or epochs, not both");
  const char *const both[] = { "job.train_steps=5", "job.epochs=1", NULL };
  assert_message (job_error ("[job]\nepochs = 3\n", both),
                  "-o job.epochs: [job] epochs: give train_steps or epochs, not both");
}

static void
test_override_errors (void)
{
  const char *const bad_int[] = { "layer fc1.num_output=ten", NULL };
  assert_message (net_error_o (BASE, bad_int),
                  "-o layer fc1.num_output: [layer fc1] num_output: expected an integer, got 'ten'");
  const char *const bad_key[] = { "layer fc1.num_ouput=3", NULL };
  assert_message (net_error_o (BASE, bad_key),
                  "-o layer fc1.num_ouput: [layer fc1] num_ouput: unknown key (did you mean 'num_output'?)");
  const char *const bad_src[] = { "layer fc1.src=nowhere", NULL };
  assert_message (net_error_o (BASE, bad_src),
                  "-o layer fc1.src: [layer fc1] src: unknown source layer 'nowhere'");
  /* keys not overridden keep their lines */
  const char *const fine[] = { "layer fc1.num_output=3", NULL };
  assert_message (net_error_o (BASE "bias = maybe\n", fine),
                  "x.conf:11: [layer fc1] bias: expected true or false, got 'maybe'");
  /* -o naming a layer the conf lacks: the -o is to blame, not the file */
  const char *const new_layer[] = { "layer fc9.num_output=3", NULL };
  assert_message (net_error_o (BASE, new_layer),
                  "-o layer fc9.num_output: x.conf has no [layer fc9] (did you mean 'layer fc1.num_output'?)");
  const char *const far_layer[] = { "layer classifier.type=dense", NULL };
  assert_message (net_error_o (BASE, far_layer), "-o layer classifier.type: x.conf has no [layer classifier]");
  assert_message (job_error ("[job]\ntrain_steps = 10\n" BASE, new_layer),
                  "-o layer fc9.num_output: x.conf has no [layer fc9] (did you mean 'layer fc1.num_output'?)");
  /* a section only -o wrote: errors about it name the -o */
  const char *const typo_section[] = { "layre fc1.num_output=3", NULL };
  assert_message (job_error ("[job]\ntrain_steps = 10\n" BASE, typo_section),
                  "-o layre fc1.num_output: [layre fc1] unknown section (expected [job], [updater], [cluster], [emulate], [tls] "
                  "or [layer NAME])");

  /* the job loader and the net see the same overridden conf */
  const char *const jo[] = { "job.train_steps=abc", NULL };
  assert_message (job_error ("[job]\ntrain_steps = 10\n", jo),
                  "-o job.train_steps: [job] train_steps: expected an integer, got 'abc'");
  GError *error = NULL;
  const char *const lo[] = { "layer fc1.num_output=-3", NULL };
  ShoalJob *job = shoal_job_load_data ("[job]\ntrain_steps = 10\n" BASE, "x.conf", lo, &error);
  g_assert_no_error (error);
  ShoalNet *net = shoal_net_new (job->conf, NULL, &error);
  g_assert_null (net);
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
  g_assert_cmpstr (error->message, ==,
                   "-o layer fc1.num_output: [layer fc1] num_output: -3 is out of range [1, 16777216]");
  g_clear_error (&error);
  shoal_job_free (job);
}

static void
test_override_malformed (void)
{
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data (BASE, "x.conf", &error);
  g_assert_no_error (error);
  struct { const char *in, *msg; } cases[] = {
    { "fc1", "-o fc1: expected section.key=value" },
    { "layer fc1=3",
      "-o layer fc1=3: expected section.key=value (a layer section is written 'layer NAME.key=value')" },
    { ".num_output=3",
      "-o .num_output=3: expected section.key=value (a layer section is written 'layer NAME.key=value')" },
    { "job.=3", "-o job.=3: expected section.key=value (a layer section is written 'layer NAME.key=value')" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_assert_false (shoal_conf_override (conf, cases[i].in, &error));
      g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
      g_assert_cmpstr (error->message, ==, cases[i].msg);
      g_clear_error (&error);
    }
  shoal_conf_free (conf);

  const char *const o[] = { "job.train_steps=5", "train_steps", NULL };
  assert_message (job_error ("[job]\ntrain_steps = 10\n", o), "-o train_steps: expected section.key=value");
}

static void
test_shape_errors (void)
{
  /* concat along features needs equal rows and equal other dims */
  assert_message (net_error (BASE "[layer a]\ntype = feed\nshape = 4,3\n"      /* 11-13 */
                             "[layer b]\ntype = feed\nshape = 4,2,2\n"         /* 14-16 */
                             "[layer cat]\ntype = concat\nsrc = a, b\n"),      /* 17-19 */
                  "x.conf:19: [layer cat] src: sources 'a' (4x3) and 'b' (4x2x2) differ outside axis 1");
  assert_message (net_error (BASE "[layer a]\ntype = feed\nshape = 4,3\n"
                             "[layer b]\ntype = feed\nshape = 5,3\n"
                             "[layer cat]\ntype = concat\nsrc = a, b\n"),
                  "x.conf:19: [layer cat] src: sources 'a' (4x3) and 'b' (5x3) differ outside axis 1");
  /* the labels' source has none */
  assert_message (net_error (BASE "[layer t]\ntype = feed\nshape = 4,2\n"
                             "[layer loss]\ntype = softmax_loss\nsrc = fc1, t\n"),
                  "x.conf:16: [layer loss] src: source 't' carries no labels");
  assert_message (net_error (BASE "[layer t]\ntype = feed\nshape = 5,2\nnum_classes = 2\n"
                             "[layer loss]\ntype = softmax_loss\nsrc = fc1, t\n"),
                  "x.conf:17: [layer loss] src: 'fc1' has 4 rows but 't' has 5 labels");
  assert_message (net_error (BASE "[layer t]\ntype = feed\nshape = 4,3\n"
                             "[layer loss]\ntype = euclidean_loss\nsrc = fc1, t\n"),
                  "x.conf:16: [layer loss] src: prediction 'fc1' (4x2) and target 't' (4x3) differ in rows or row size");
  assert_message (net_error (BASE "[layer in2]\ntype = feed\nshape = 1,2,3,4,5\n"),
                  "x.conf:13: [layer in2] shape: needs 1 to 4 dims, got 5");
}

/* A table of every kind, for the generic getters. */
static const ShoalOption test_options[] = {
  { "count", SHOAL_OPT_INT, "3", 0, 100, NULL, "an int" },
  { "rate", SHOAL_OPT_FLOAT, "0.25", SHOAL_UNBOUNDED, NULL, "a float" },
  { "on", SHOAL_OPT_BOOL, "true", SHOAL_UNBOUNDED, NULL, "a bool" },
  { "mode", SHOAL_OPT_STRING, "fast", SHOAL_UNBOUNDED, "fast|slow", "a choice" },
  { "label", SHOAL_OPT_STRING, NULL, SHOAL_UNBOUNDED, NULL, "a required string" },
  { "dims", SHOAL_OPT_INT_LIST, "1, 2", 1, 10, NULL, "an int list" },
  { "lrs", SHOAL_OPT_FLOAT_LIST, "", SHOAL_UNBOUNDED, NULL, "a float list" },
  { "names", SHOAL_OPT_STRING_LIST, "a,b", SHOAL_UNBOUNDED, NULL, "a string list" },
  SHOAL_OPTION_END
};

static ShoalConf *
checked (const char *text, GError **error)
{
  ShoalConf *conf = shoal_conf_load_data (text, "t.conf", error);
  g_assert_nonnull (conf);
  const ShoalOption *const tables[] = { test_options, NULL };
  if (!shoal_conf_check_group (conf, "g", tables, NULL, NULL, error))
    {
      shoal_conf_free (conf);
      return NULL;
    }
  return conf;
}

static void
assert_check_error (const char *text, const char *want)
{
  GError *error = NULL;
  ShoalConf *conf = checked (text, &error);
  g_assert_null (conf);
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
  g_assert_cmpstr (error->message, ==, want);
  g_error_free (error);
}

static void
test_lists (void)
{
  GError *error = NULL;
  ShoalConf *conf = checked ("[g]\nlabel = x\ndims = 4 , 5,6\nlrs = 0.5, 1e-3,-2\nnames = one, two ,three\n",
                             &error);
  g_assert_no_error (error);
  gsize n = 0;
  gint *dims = shoal_conf_get_int_list (conf, "g", test_options, "dims", &n);
  g_assert_cmpuint (n, ==, 3);
  g_assert_cmpint (dims[0], ==, 4);
  g_assert_cmpint (dims[1], ==, 5);
  g_assert_cmpint (dims[2], ==, 6);
  g_free (dims);
  double *lrs = shoal_conf_get_float_list (conf, "g", test_options, "lrs", &n);
  g_assert_cmpuint (n, ==, 3);
  g_assert_cmpfloat (lrs[0], ==, 0.5);
  g_assert_cmpfloat (lrs[1], ==, 1e-3);
  g_assert_cmpfloat (lrs[2], ==, -2);
  g_free (lrs);
  char **names = shoal_conf_get_string_list (conf, "g", test_options, "names", &n);
  g_assert_cmpuint (n, ==, 3);
  g_assert_cmpstr (names[0], ==, "one");
  g_assert_cmpstr (names[1], ==, "two");
  g_assert_cmpstr (names[2], ==, "three");
  g_assert_null (names[3]);
  g_strfreev (names);
  shoal_conf_free (conf);

  assert_check_error ("[g]\nlabel = x\ndims = 1, x, 3\n", "t.conf:3: [g] dims: expected an integer, got 'x'");
  assert_check_error ("[g]\nlabel = x\ndims = 1, 2,\n", "t.conf:3: [g] dims: expected an integer, got ''");
  assert_check_error ("[g]\nlabel = x\ndims = 1, 11\n", "t.conf:3: [g] dims: 11 is out of range [1, 10]");
  assert_check_error ("[g]\nlabel = x\nlrs = 0.1, fast\n", "t.conf:3: [g] lrs: expected a number, got 'fast'");
  assert_check_error ("[g]\nlabel = x\nnames = a,,b\n", "t.conf:3: [g] names: empty item in list");
}

static void
test_getter_defaults (void)
{
  GError *error = NULL;
  ShoalConf *conf = checked ("[g]\nlabel = here\n", &error);
  g_assert_no_error (error);
  g_assert_cmpint (shoal_conf_get_int (conf, "g", test_options, "count"), ==, 3);
  g_assert_cmpfloat (shoal_conf_get_float (conf, "g", test_options, "rate"), ==, 0.25);
  g_assert_true (shoal_conf_get_bool (conf, "g", test_options, "on"));
  char *s = shoal_conf_get_string (conf, "g", test_options, "mode");
  g_assert_cmpstr (s, ==, "fast");
  g_free (s);
  s = shoal_conf_get_string (conf, "g", test_options, "label");
  g_assert_cmpstr (s, ==, "here");
  g_free (s);
  gsize n = 99;
  gint *dims = shoal_conf_get_int_list (conf, "g", test_options, "dims", &n);
  g_assert_cmpuint (n, ==, 2);
  g_assert_cmpint (dims[0], ==, 1);
  g_assert_cmpint (dims[1], ==, 2);
  g_free (dims);
  double *lrs = shoal_conf_get_float_list (conf, "g", test_options, "lrs", &n);
  g_assert_cmpuint (n, ==, 0);
  g_free (lrs);
  char **names = shoal_conf_get_string_list (conf, "g", test_options, "names", &n);
  g_assert_cmpuint (n, ==, 2);
  g_assert_cmpstr (names[1], ==, "b");
  g_strfreev (names);
  /* a group that is not there at all: defaults, NULL for no default */
  g_assert_cmpint (shoal_conf_get_int (conf, "none", test_options, "count"), ==, 3);
  g_assert_null (shoal_conf_get_string (conf, "none", test_options, "label"));
  shoal_conf_free (conf);

  /* values given replace the defaults */
  conf = checked ("[g]\nlabel = x\ncount = 100\nrate = -1.5e2\non = no\nmode = slow\n", &error);
  g_assert_no_error (error);
  g_assert_cmpint (shoal_conf_get_int (conf, "g", test_options, "count"), ==, 100);
  g_assert_cmpfloat (shoal_conf_get_float (conf, "g", test_options, "rate"), ==, -150);
  g_assert_false (shoal_conf_get_bool (conf, "g", test_options, "on"));
  s = shoal_conf_get_string (conf, "g", test_options, "mode");
  g_assert_cmpstr (s, ==, "slow");
  g_free (s);
  shoal_conf_free (conf);

  assert_check_error ("[g]\ncount = 1\n", "t.conf:1: [g] missing required key 'label' (a required string)");
  assert_check_error ("[g]\nlabel = x\nmode = medium\n", "t.conf:3: [g] mode: 'medium' is not one of fast|slow");
  assert_check_error ("[g]\nlabel = x\ncount = 101\n", "t.conf:3: [g] count: 101 is out of range [0, 100]");
  g_assert_nonnull (shoal_option_find (test_options, "rate"));
  g_assert_null (shoal_option_find (test_options, "rat"));
}

static void
test_lines_and_load (void)
{
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data ("# c\n\n[a]\n  x = 1\n# y = 2\n\n[b]\ny=2\n", "t.conf", &error);
  g_assert_no_error (error);
  g_assert_cmpstr (shoal_conf_origin (conf), ==, "t.conf");
  g_assert_cmpint (shoal_conf_line (conf, "a", NULL), ==, 3);
  g_assert_cmpint (shoal_conf_line (conf, "a", "x"), ==, 4);
  g_assert_cmpint (shoal_conf_line (conf, "a", "y"), ==, 0);
  g_assert_cmpint (shoal_conf_line (conf, "b", "y"), ==, 8);
  g_assert_cmpint (shoal_conf_line (conf, "c", NULL), ==, 0);
  shoal_conf_error (conf, &error, "b", "y", "bad %d", 7);
  g_assert_cmpstr (error->message, ==, "t.conf:8: [b] y: bad 7");
  g_clear_error (&error);
  /* an unknown key falls back to its group's line */
  shoal_conf_error (conf, &error, "a", "zz", "bad");
  g_assert_cmpstr (error->message, ==, "t.conf:3: [a] zz: bad");
  g_clear_error (&error);
  shoal_conf_free (conf);

  /* text GKeyFile cannot read */
  conf = shoal_conf_load_data ("[a]\nthis is not a key\n", "t.conf", &error);
  g_assert_null (conf);
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
  g_assert_true (g_str_has_prefix (error->message, "t.conf: "));
  g_clear_error (&error);
  conf = shoal_conf_load_file ("/nonexistent/x.conf", &error);
  g_assert_null (conf);
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_IO);
  g_clear_error (&error);
}

/* ---- [job], [updater], [cluster] ---------------------------------------- */

static void
test_job_length (void)
{
  assert_message (job_error ("[job]\ntrain_steps = 10\nepochs = 2\n", NULL),
                  "x.conf:3: [job] epochs: give train_steps or epochs, not both");
  assert_message (job_error ("[job]\nname = j\n", NULL), "x.conf:1: [job] missing train_steps or epochs");
  assert_message (job_error (BASE, NULL), "x.conf: [job] missing train_steps or epochs");
  assert_message (job_error ("[job]\nepochs = -1\n", NULL), "x.conf:2: [job] epochs: -1 is out of range [0, 1000000]");

  GError *error = NULL;
  ShoalJob *job = shoal_job_load_data ("[job]\nepochs = 2.5\n", "x.conf", NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpint (job->train_steps, ==, 0);
  shoal_job_resolve_epochs (job, 1000, 64);
  g_assert_cmpint (job->train_steps, ==, 40);  /* ceil (2.5 * 1000 / 64) */
  shoal_job_free (job);
}

static void
test_job_fixed_step (void)
{
  assert_message (job_error ("[job]\ntrain_steps = 10\n[updater]\nlr_policy = fixed_step\n"
                             "step_list = 0, 100, 200\nlr_list = 0.1, 0.01\n", NULL),
                  "x.conf:5: [updater] step_list: fixed_step needs step_list and lr_list of the same "
                  "length (1 to 16), got 3 and 2");
  assert_message (job_error ("[job]\ntrain_steps = 10\n[updater]\nlr_policy = fixed_step\n", NULL),
                  "x.conf:3: [updater] step_list: fixed_step needs step_list and lr_list of the same "
                  "length (1 to 16), got 0 and 0");
  assert_message (job_error ("[job]\ntrain_steps = 10\n[updater]\nlr_policy = fixed_step\n"
                             "step_list = 10, 100\nlr_list = 0.1, 0.01\n", NULL),
                  "x.conf:5: [updater] step_list: must start at 0 and increase");
  assert_message (job_error ("[job]\ntrain_steps = 10\n[updater]\nlr_policy = fixed_step\n"
                             "step_list = 0, 100, 100\nlr_list = 0.1, 0.01, 0.001\n", NULL),
                  "x.conf:5: [updater] step_list: must start at 0 and increase");

  GError *error = NULL;
  ShoalJob *job = shoal_job_load_data ("[job]\ntrain_steps = 10\n[updater]\nlr_policy = fixed_step\n"
                                       "step_list = 0, 100\nlr_list = 0.1, 0.01\n",
                                       "x.conf", NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpint (job->updater.schedule.policy, ==, SHOAL_LR_FIXED_STEP);
  g_assert_cmpint (job->updater.schedule.nsteps, ==, 2);
  g_assert_cmpint (job->updater.schedule.step_list[1], ==, 100);
  g_assert_cmpfloat (job->updater.schedule.lr_list[1], ==, 0.01f);
  g_assert_cmpfloat (shoal_lr_at (&job->updater.schedule, 150), ==, 0.01f);
  shoal_job_free (job);
}

static void
test_job_cluster (void)
{
  /* possible layouts load; impossible ones are refused by the layout (test_layout has them all) */
  ShoalJob *job = shoal_job_load_data ("[job]\ntrain_steps = 10\n[cluster]\nnworkers_per_group = 2\n",
                                       "x.conf", NULL, NULL);
  g_assert_nonnull (job);
  shoal_job_free (job);
  char *msg = job_error ("[job]\ntrain_steps = 10\n[cluster]\nnworkers_per_group = 4\nnworkers_per_procs = 3\n", NULL);
  g_assert_true (g_str_has_prefix (msg, "x.conf:"));
  g_assert_nonnull (strstr (msg, "nworkers_per_procs"));
  g_free (msg);
  assert_message (job_error ("[job]\ntrain_steps = 10\n[cluster]\nnworker_groups = 0\n", NULL),
                  "x.conf:4: [cluster] nworker_groups: 0 is out of range [1, 4096]");
  /* the same layout from -o names the override */
  const char *const o[] = { "cluster.nworkers_per_group=4", "cluster.nworkers_per_procs=3", NULL };
  msg = job_error ("[job]\ntrain_steps = 10\n", o);
  g_assert_nonnull (msg);
  g_assert_nonnull (strstr (msg, "-o cluster."));
  g_free (msg);
}

static void
test_job_values (void)
{
  GError *error = NULL;
  ShoalJob *job = shoal_job_load_data ("[job]\ntrain_steps = 10\nname = mine\nseed = 7\n"
                                       "[updater]\ntype = adam\nlr = 0.002\nweight_decay = 1e-4\n"
                                       "[cluster]\nsync_freq = 3\n",
                                       "x.conf", NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (job->name, ==, "mine");
  g_assert_cmpint (job->seed, ==, 7);
  g_assert_cmpint (job->disp_freq, ==, 100);   /* default */
  g_assert_cmpint (job->test_freq, ==, 0);
  g_assert_cmpint (job->updater.kind, ==, SHOAL_UPDATER_ADAM);
  g_assert_cmpfloat (job->updater.schedule.lr, ==, 0.002f);
  g_assert_cmpfloat (job->updater.weight_decay, ==, 1e-4f);
  g_assert_cmpfloat (job->updater.beta2, ==, 0.999f);
  g_assert_cmpint (job->cluster.sync_freq, ==, 3);
  g_assert_cmpint (job->cluster.nworkers_per_group, ==, 1);
  shoal_job_free (job);

  assert_message (job_error ("[job]\ntrain_steps = 10\n[updater]\ntype = adam\nbeta1 = 1\n", NULL),
                  "x.conf:5: [updater] beta1: must be below 1");
  assert_message (job_error ("[job]\ntrain_steps = 10\n[updater]\nmomentum = 1.5\n", NULL),
                  "x.conf:4: [updater] momentum: 1.5 is out of range [0, 1]");
  /* the name is the default workspace's folder: ".." made the current
   * folder the workspace, "../../x" one outside workspace/ */
  const char *names[] = { "..", "../../escape", "", ".", "a/b", NULL };
  for (int i = 0; names[i] != NULL; i++)
    {
      char *text = g_strdup_printf ("[job]\ntrain_steps = 10\nname = %s\n", names[i]);
      char *want = g_strdup_printf ("x.conf:3: [job] name: '%s' cannot name the job's folder workspace/NAME: give a "
                                    "name without '/' that is not empty, '.' or '..'", names[i]);
      assert_message (job_error (text, NULL), want);
      g_free (want);
      g_free (text);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/conf/base-builds", test_base_builds);
  g_test_add_func ("/conf/unknown-key", test_unknown_key);
  g_test_add_func ("/conf/unknown-type", test_unknown_type);
  g_test_add_func ("/conf/missing-source", test_missing_source);
  g_test_add_func ("/conf/cycles", test_cycles);
  g_test_add_func ("/conf/self-feed", test_self_feed);
  g_test_add_func ("/conf/source-count", test_source_count);
  g_test_add_func ("/conf/duplicates", test_duplicates);
  g_test_add_func ("/conf/bad-names", test_bad_names);
  g_test_add_func ("/conf/bad-numbers", test_bad_numbers);
  g_test_add_func ("/conf/out-of-range", test_out_of_range);
  g_test_add_func ("/conf/bools", test_bools);
  g_test_add_func ("/conf/choices", test_choices);
  g_test_add_func ("/conf/missing-required", test_missing_required);
  g_test_add_func ("/conf/unknown-section", test_unknown_section);
  g_test_add_func ("/conf/override-replaces", test_override_replaces);
  g_test_add_func ("/conf/override-errors", test_override_errors);
  g_test_add_func ("/conf/override-malformed", test_override_malformed);
  g_test_add_func ("/conf/shape-errors", test_shape_errors);
  g_test_add_func ("/conf/lists", test_lists);
  g_test_add_func ("/conf/getter-defaults", test_getter_defaults);
  g_test_add_func ("/conf/lines-and-load", test_lines_and_load);
  g_test_add_func ("/conf/job-length", test_job_length);
  g_test_add_func ("/conf/job-fixed-step", test_job_fixed_step);
  g_test_add_func ("/conf/job-cluster", test_job_cluster);
  g_test_add_func ("/conf/job-values", test_job_values);
  return g_test_run ();
}
