/* marks: threads (they start threads: TSan runs this file in `make SANITIZE=thread test-threads`) */
/* Out of memory where a conf decides the size (a layer's width, a net's
 * params): an error naming the layer or param and the bytes, never an
 * abort.  Sizes past the address space fail everywhere at once; the
 * allocations that come after others that succeeded are made to fail in a
 * subprocess whose address space is capped (RLIMIT_AS) a little above
 * what it already uses. */
#include <glib.h>
#include <stdio.h>
#include <string.h>

#include "comm/param_client.h"
#include "core/error.h"
#include "core/param.h"
#include "net/net.h"
#include "server/server.h"
#include "support/address_limit.h"

#define MiB ((guint64) 1 << 20)
/* The address space a subprocess may add where 128 MiB must fit and 128
 * MiB more must not: room for the 128 and for what else the process may
 * map meanwhile (a thread's 64 MiB malloc arena and its stack: with 192
 * MiB the values themselves failed once in six full suites under load). */
#define ROOM_FOR_ONE_128 (224 * MiB)

/* 2^46 floats, 256 TiB: more than a 47-bit user address space holds */
static const ShoalShape huge_shape = { 3, { 65536, 65536, 16384 } };

static void
test_try_alloc (void)
{
  GError *error = NULL;
  g_assert_null (shoal_try_alloc_floats ((size_t) 1 << 46, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_MEMORY);
  g_assert_cmpstr (error->message, ==, "out of memory allocating 281474976710656 bytes (256.0 TiB)");
  g_clear_error (&error);

  g_assert_null (shoal_try_alloc_floats (G_MAXSIZE / 2, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_MEMORY);
  g_assert_cmpstr (error->message, ==,
                   "out of memory allocating 9223372036854775807 floats (more bytes than size_t holds)");
  g_clear_error (&error);

  ShoalTensor t = { 0 };
  g_assert_false (shoal_tensor_try_alloc (&t, &huge_shape, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_MEMORY);
  g_clear_error (&error);
  g_assert_null (t.data);
  g_assert_cmpuint (t.capacity, ==, 0);
  shoal_tensor_clear (&t);

  /* and a size that fits still works */
  float *p = shoal_try_alloc_floats (1000, &error);
  g_assert_no_error (error);
  g_assert_cmpfloat (p[999], ==, 0.0f);
  shoal_free_aligned (p);
}

static ShoalParamStore *
store_of (const char *name, const ShoalShape *shape)
{
  ShoalParamStore *store = shoal_param_store_new ();
  ShoalInitSpec init = { .kind = SHOAL_INIT_CONSTANT };
  ShoalShape small = shoal_shape_make (1, 10);
  shoal_param_store_declare (store, "small/bias", &small, &init, 1, 1, 1, 1);
  shoal_param_store_declare (store, name, shape, &init, 1, 1, 1, 1);
  return store;
}

static void
test_param_store (void)
{
  GError *error = NULL;
  ShoalParamStore *store = store_of ("huge/weight", &huge_shape);
  g_assert_false (shoal_param_store_allocate (store, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_MEMORY);
  g_assert_cmpstr (error->message, ==,
                   "values of 2 params (largest: huge/weight 65536x65536x16384, 256.0 TiB): "
                   "out of memory allocating 281474976710720 bytes (256.0 TiB)");
  g_clear_error (&error);
  g_assert_false (store->allocated);
  g_assert_null (store->values);

  g_assert_false (shoal_param_store_allocate_state (store, 2, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_MEMORY);
  g_assert_true (g_str_has_prefix (error->message, "optimiser state of 2 params (largest: huge/weight"));
  g_clear_error (&error);
  g_assert_null (store->state);
  shoal_param_store_free (store);
}

/* Values fit, gradients do not: the store stays unallocated, nothing leaks. */
static void
test_param_store_grads (void)
{
  if (g_test_subprocess ())
    {
      GError *error = NULL;
      ShoalShape shape = shoal_shape_make (2, 32768, 1024);   /* 128 MiB */
      ShoalParamStore *store = store_of ("wide/weight", &shape);
      shoal_test_cap_address_space (ROOM_FOR_ONE_128);
      g_assert_false (shoal_param_store_allocate (store, &error));
      g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_MEMORY);
      g_assert_cmpstr (error->message, ==,
                       "gradients of 2 params (largest: wide/weight 32768x1024, 128.0 MiB): "
                       "out of memory allocating 134217792 bytes (128.0 MiB)");
      g_error_free (error);
      g_assert_false (store->allocated);
      shoal_param_store_free (store);
      shoal_test_uncap_address_space ();
      return;
    }
  g_test_trap_subprocess (NULL, 60 * G_USEC_PER_SEC, 0);
  g_test_trap_assert_passed ();
}

/* The server copies the values (fits) and makes Adam's two moments per
 * value (does not). */
static void
test_server (void)
{
  if (g_test_subprocess ())
    {
      GError *error = NULL;
      ShoalShape shape = shoal_shape_make (2, 32768, 1024);   /* 128 MiB */
      ShoalParamStore *layout = store_of ("wide/weight", &shape);
      g_assert_true (shoal_param_store_allocate (layout, &error));
      ShoalUpdaterConf u;
      shoal_updater_conf_defaults (&u, SHOAL_UPDATER_ADAM);
      ShoalServerOptions o = { .mode = SHOAL_UPDATE_SYNC, .sync_contributors = 1, .nslices = 2 };
      shoal_test_cap_address_space (ROOM_FOR_ONE_128);
      g_assert_null (shoal_server_new (layout, &u, &o, &error));
      g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_MEMORY);
      g_assert_cmpstr (error->message, ==,
                       "server: optimiser state of 2 params (largest: wide/weight 32768x1024, 128.0 MiB): "
                       "out of memory allocating 268435584 bytes (256.0 MiB)");
      g_error_free (error);
      shoal_param_store_free (layout);
      shoal_test_uncap_address_space ();
      return;
    }
  g_test_trap_subprocess (NULL, 60 * G_USEC_PER_SEC, 0);
  g_test_trap_assert_passed ();
}

static void
test_param_client (void)
{
  if (g_test_subprocess ())
    {
      GError *error = NULL;
      ShoalShape shape = shoal_shape_make (2, 32768, 1024);   /* 128 MiB */
      ShoalParamStore *store = store_of ("wide/weight", &shape);
      g_assert_true (shoal_param_store_allocate (store, &error));
      shoal_test_cap_address_space (64 * MiB);
      ShoalParamClient *client = shoal_param_client_new (store, 2, SHOAL_UPDATE_ASYNC);
      g_assert_false (shoal_param_client_set_codecs (client, SHOAL_CODEC_FP32, SHOAL_CODEC_1BIT, &error));
      g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_MEMORY);
      g_assert_cmpstr (error->message, ==,
                       "param client: gradient residuals of 2 params (largest: wide/weight 32768x1024, 128.0 MiB): "
                       "out of memory allocating 134217792 bytes (128.0 MiB)");
      g_error_free (error);
      shoal_param_client_free (client);
      shoal_param_store_free (store);
      shoal_test_uncap_address_space ();
      return;
    }
  g_test_trap_subprocess (NULL, 60 * G_USEC_PER_SEC, 0);
  g_test_trap_assert_passed ();
}

static void
expect_net_nomem (const char *text, const char *want)
{
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data (text, "huge.conf", &error);
  g_assert_no_error (error);
  g_assert_null (shoal_net_new (conf, NULL, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_MEMORY);
  g_assert_cmpstr (error->message, ==, want);
  g_error_free (error);
  shoal_conf_free (conf);
}

/* A net whose layer is too big: the error is placed at the layer. */
static void
test_net (void)
{
  if (g_test_subprocess ())
    {
      shoal_test_cap_address_space (512 * MiB);
      /* a 1.2 GiB weight */
      expect_net_nomem ("[layer in]\ntype = feed\nshape = 2,784\nnum_classes = 10\n"
                        "[layer fc]\ntype = dense\nsrc = in\nnum_output = 400000\n"
                        "[layer out]\ntype = dense\nsrc = fc\nnum_output = 10\n"
                        "[layer loss]\ntype = softmax_loss\nsrc = out, in\n",
                        "huge.conf:5: [layer fc] values of 4 params (largest: fc/weight 400000x784, "
                        "1.2 GiB): out of memory allocating 1272000064 bytes (1.2 GiB)");
      /* a 3.8 GiB output */
      expect_net_nomem ("[layer in]\ntype = feed\nshape = 256,4\nnum_classes = 10\n"
                        "[layer fc]\ntype = dense\nsrc = in\nnum_output = 4000000\n"
                        "[layer loss]\ntype = softmax_loss\nsrc = fc, in\n",
                        "huge.conf:5: [layer fc] output 256x4000000: out of memory allocating "
                        "4096000000 bytes (3.8 GiB)");
      shoal_test_uncap_address_space ();
      return;
    }
  g_test_trap_subprocess (NULL, 60 * G_USEC_PER_SEC, 0);
  g_test_trap_assert_passed ();
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/oom/try-alloc", test_try_alloc);
  g_test_add_func ("/oom/param-store", test_param_store);
  g_test_add_func ("/oom/param-store-grads", test_param_store_grads);
  g_test_add_func ("/oom/server", test_server);
  g_test_add_func ("/oom/param-client", test_param_client);
  g_test_add_func ("/oom/net", test_net);
  return g_test_run ();
}
