/* Concat: gradient checks along rows and along features / channels with
 * 2 and 3 sources, exact layouts, smaller batches, sources without a
 * gradient, and shape errors. */
#include <glib.h>
#include <string.h>

#include "core/error.h"
#include "support/expect.h"
#include "support/gradcheck.h"

static ShoalNet *
build (const char *text, ShoalConf **conf)
{
  GError *error = NULL;
  *conf = shoal_conf_load_data (text, "test", &error);
  g_assert_no_error (error);
  ShoalNet *net = shoal_net_new (*conf, NULL, &error);
  g_assert_no_error (error);
  return net;
}

static void
test_gradcheck (void)
{
  const char *features2 =
    "[layer a]\ntype = feed\nshape = 4,3\nneed_grad = true\n"
    "[layer b]\ntype = feed\nshape = 4,5\nneed_grad = true\n"
    "[layer cat]\ntype = concat\nsrc = a, b\naxis = 1\n";
  g_assert_cmpint (shoal_gradcheck_conf (features2, "cat", NULL, 31), >, 0);
  const char *channels3 =
    "[layer a]\ntype = feed\nshape = 2,1,3,2\nneed_grad = true\n"
    "[layer b]\ntype = feed\nshape = 2,2,3,2\nneed_grad = true\n"
    "[layer c]\ntype = feed\nshape = 2,3,3,2\nneed_grad = true\n"
    "[layer cat]\ntype = concat\nsrc = a, b, c\n";
  g_assert_cmpint (shoal_gradcheck_conf (channels3, "cat", NULL, 32), >, 0);
  const char *rows2 =
    "[layer a]\ntype = feed\nshape = 3,4\nneed_grad = true\n"
    "[layer b]\ntype = feed\nshape = 2,4\nneed_grad = true\n"
    "[layer cat]\ntype = concat\nsrc = a, b\naxis = 0\n";
  g_assert_cmpint (shoal_gradcheck_conf (rows2, "cat", NULL, 33), >, 0);
  const char *rows3 =
    "[layer a]\ntype = feed\nshape = 1,2,3\nneed_grad = true\n"
    "[layer b]\ntype = feed\nshape = 2,2,3\nneed_grad = true\n"
    "[layer c]\ntype = feed\nshape = 3,2,3\nneed_grad = true\n"
    "[layer cat]\ntype = concat\nsrc = a, b, c\naxis = 0\n";
  g_assert_cmpint (shoal_gradcheck_conf (rows3, "cat", NULL, 34), >, 0);
}

/* Fills source i's out with 100 * (i + 1) + index. */
static void
fill_sources (ShoalNet *net, const char *const *names, int n)
{
  for (int i = 0; i < n; i++)
    {
      ShoalLayer *l = shoal_net_find (net, names[i]);
      size_t count = l->out.capacity;
      for (size_t k = 0; k < count; k++)
        l->out.data[k] = (float) (100 * (i + 1) + k);
    }
}

static void
test_channel_layout (void)
{
  ShoalConf *conf;
  ShoalNet *net = build ("[layer a]\ntype = feed\nshape = 2,1,2,2\nneed_grad = true\n"
                         "[layer b]\ntype = feed\nshape = 2,2,2,2\n"
                         "[layer c]\ntype = feed\nshape = 2,1,2,2\nneed_grad = true\n"
                         "[layer cat]\ntype = concat\nsrc = a, b, c\naxis = 1\n", &conf);
  static const char *const names[] = { "a", "b", "c" };
  fill_sources (net, names, 3);
  shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  ShoalLayer *cat = shoal_net_find (net, "cat");
  char *shape = shoal_shape_to_string (&cat->out.shape);
  g_assert_cmpstr (shape, ==, "2x4x2x2");
  g_free (shape);
  /* each row: a's 4 floats, b's 8, c's 4 */
  const float *y = cat->out.data;
  for (int r = 0; r < 2; r++)
    for (int k = 0; k < 16; k++)
      {
        float want = k < 4 ? 100 + r * 4 + k : k < 12 ? 200 + r * 8 + (k - 4) : 300 + r * 4 + (k - 12);
        g_assert_cmpfloat (y[r * 16 + k], ==, want);
      }

  /* backward cuts the same pieces; b needs no gradient and gets none */
  for (int k = 0; k < 32; k++)
    cat->grad.data[k] = (float) k;
  shoal_net_backward (net);
  ShoalLayer *a = shoal_net_find (net, "a"), *b = shoal_net_find (net, "b");
  ShoalLayer *c = shoal_net_find (net, "c");
  g_assert_null (cat->src_grad[1]);
  g_assert_null (b->grad.data);
  for (int r = 0; r < 2; r++)
    for (int k = 0; k < 4; k++)
      {
        g_assert_cmpfloat (a->grad.data[r * 4 + k], ==, (float) (r * 16 + k));
        g_assert_cmpfloat (c->grad.data[r * 4 + k], ==, (float) (r * 16 + 12 + k));
      }
  shoal_net_free (net);
  shoal_conf_free (conf);
}

/* Rows: sources stacked; a smaller batch stacks only the rows there are. */
static void
test_row_layout_and_fewer_rows (void)
{
  ShoalConf *conf;
  ShoalNet *net = build ("[layer a]\ntype = feed\nshape = 3,2\nneed_grad = true\n"
                         "[layer b]\ntype = feed\nshape = 2,2\nneed_grad = true\n"
                         "[layer cat]\ntype = concat\nsrc = a, b\naxis = 0\n", &conf);
  static const char *const names[] = { "a", "b" };
  fill_sources (net, names, 2);
  ShoalLayer *a = shoal_net_find (net, "a"), *b = shoal_net_find (net, "b");
  ShoalLayer *cat = shoal_net_find (net, "cat");
  shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  g_assert_cmpint (shoal_tensor_rows (&cat->out), ==, 5);
  const float full[10] = { 100, 101, 102, 103, 104, 105, 200, 201, 202, 203 };
  g_assert_cmpmem (cat->out.data, sizeof full, full, sizeof full);

  shoal_tensor_set_rows (&a->out, 2);
  shoal_tensor_set_rows (&b->out, 1);
  shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  g_assert_cmpint (shoal_tensor_rows (&cat->out), ==, 3);
  g_assert_cmpint (shoal_tensor_rows (&cat->grad), ==, 3);
  const float part[6] = { 100, 101, 102, 103, 200, 201 };
  g_assert_cmpmem (cat->out.data, sizeof part, part, sizeof part);

  for (int k = 0; k < 6; k++)
    cat->grad.data[k] = (float) (k + 1);
  shoal_net_backward (net);
  g_assert_cmpint (shoal_tensor_rows (&a->grad), ==, 2);
  g_assert_cmpint (shoal_tensor_rows (&b->grad), ==, 1);
  const float ga[4] = { 1, 2, 3, 4 }, gb[2] = { 5, 6 };
  g_assert_cmpmem (a->grad.data, sizeof ga, ga, sizeof ga);
  g_assert_cmpmem (b->grad.data, sizeof gb, gb, sizeof gb);
  shoal_net_free (net);
  shoal_conf_free (conf);
}

/* Labels follow the rows: stacked along axis 0, passed on along axis 1,
 * so a loss can take them from the concat. */
static void
test_labels (void)
{
  ShoalConf *conf;
  ShoalNet *net = build ("[layer a]\ntype = feed\nshape = 3,4\nnum_classes = 4\nneed_grad = true\n"
                         "[layer b]\ntype = feed\nshape = 2,4\nnum_classes = 4\n"
                         "[layer c]\ntype = feed\nshape = 3,5\n"
                         "[layer rows]\ntype = concat\nsrc = a, b\naxis = 0\n"
                         "[layer cols]\ntype = concat\nsrc = c, a\naxis = 1\n"
                         "[layer loss]\ntype = softmax_loss\nsrc = rows, rows\n"
                         "[layer d]\ntype = feed\nshape = 2,4\n"
                         "[layer nolabels]\ntype = concat\nsrc = a, d\naxis = 0\n", &conf);
  ShoalLayer *a = shoal_net_find (net, "a"), *b = shoal_net_find (net, "b");
  ShoalLayer *rows = shoal_net_find (net, "rows"), *cols = shoal_net_find (net, "cols");
  const float la[3] = { 3, 0, 2 }, lb[2] = { 1, 1 };
  memcpy (a->label.data, la, sizeof la);
  memcpy (b->label.data, lb, sizeof lb);
  shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  const float stacked[5] = { 3, 0, 2, 1, 1 };
  g_assert_cmpint (shoal_tensor_rows (&rows->label), ==, 5);
  g_assert_cmpmem (rows->label.data, sizeof stacked, stacked, sizeof stacked);
  g_assert_cmpint (shoal_tensor_rows (&cols->label), ==, 3);
  g_assert_cmpmem (cols->label.data, sizeof la, la, sizeof la);
  g_assert_null (shoal_net_find (net, "nolabels")->label.data);

  shoal_tensor_set_rows (&a->out, 1);
  shoal_tensor_set_rows (&b->out, 1);
  shoal_tensor_set_rows (&shoal_net_find (net, "c")->out, 1);
  shoal_tensor_set_rows (&shoal_net_find (net, "d")->out, 1);
  shoal_net_forward (net, SHOAL_PHASE_TRAIN);
  g_assert_cmpint (shoal_tensor_rows (&rows->label), ==, 2);
  g_assert_cmpint (shoal_tensor_rows (&cols->label), ==, 1);
  g_assert_cmpfloat (rows->label.data[1], ==, 1);
  shoal_net_free (net);
  shoal_conf_free (conf);
}

static void
test_bad_shapes (void)
{
  shoal_expect_net_error ("[layer a]\ntype = feed\nshape = 4,3\n"
                    "[layer b]\ntype = feed\nshape = 5,3\n"
                    "[layer cat]\ntype = concat\nsrc = a, b\naxis = 1\n",
                    "[layer cat] src: sources 'a' (4x3) and 'b' (5x3) differ outside axis 1");
  shoal_expect_net_error ("[layer a]\ntype = feed\nshape = 4,3\n"
                    "[layer b]\ntype = feed\nshape = 4,2\n"
                    "[layer cat]\ntype = concat\nsrc = a, b\naxis = 0\n",
                    "differ outside axis 0");
  shoal_expect_net_error ("[layer a]\ntype = feed\nshape = 4,3\n"
                    "[layer b]\ntype = feed\nshape = 4,3,1,1\n"
                    "[layer cat]\ntype = concat\nsrc = a, b\n",
                    "differ outside axis 1");
  shoal_expect_net_error ("[layer a]\ntype = feed\nshape = 4\n"
                    "[layer b]\ntype = feed\nshape = 4\n"
                    "[layer cat]\ntype = concat\nsrc = a, b\n",
                    "[layer cat] axis: source 'a' (4) has no dim 1");
  shoal_expect_net_error ("[layer a]\ntype = feed\nshape = 4,3\n"
                    "[layer cat]\ntype = concat\nsrc = a\n",
                    "a concat layer takes 2 to 8 sources, got 1");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/concat/gradcheck", test_gradcheck);
  g_test_add_func ("/concat/channel-layout", test_channel_layout);
  g_test_add_func ("/concat/row-layout-and-fewer-rows", test_row_layout_and_fewer_rows);
  g_test_add_func ("/concat/labels", test_labels);
  g_test_add_func ("/concat/bad-shapes", test_bad_shapes);
  return g_test_run ();
}
