/* Params by name as bytes (core/param_blob.h): a round trip into a store
 * laid out differently, the blob of before the header, and every refusal
 * with its message. */
#include <glib.h>
#include <string.h>

#include "core/error.h"
#include "core/param.h"

/* A store with params `names` of shapes (rows[i], 3), values i*100 + j. */
static ShoalParamStore *
store_new (const char *const *names, const int *rows)
{
  ShoalParamStore *s = shoal_param_store_new ();
  ShoalInitSpec init = { 0 };
  for (int i = 0; names[i] != NULL; i++)
    {
      ShoalShape shape = { 2, { rows[i], 3 } };
      shoal_param_store_declare (s, names[i], &shape, &init, 3, rows[i], 1, 1);
    }
  g_assert_true (shoal_param_store_allocate (s, NULL));
  for (guint i = 0; i < s->params->len; i++)
    {
      ShoalParam *p = g_ptr_array_index (s->params, i);
      for (size_t j = 0; j < p->count; j++)
        s->values[p->offset + j] = (float) (i * 100 + j);
    }
  return s;
}

static void
test_round_trip (void)
{
  const char *a_names[] = { "fc1/weight", "fc1/bias", "fc2/weight", NULL };
  const int a_rows[] = { 4, 1, 2 };
  ShoalParamStore *a = store_new (a_names, a_rows);
  GBytes *blob = shoal_param_store_to_bytes (a);

  /* another order, and a param the blob lacks: matched by name */
  const char *b_names[] = { "fc2/weight", "extra/weight", "fc1/weight", NULL };
  const int b_rows[] = { 2, 5, 4 };
  ShoalParamStore *b = store_new (b_names, b_rows);
  float extra0 = b->values[shoal_param_store_find (b, "extra/weight")->offset];
  GError *error = NULL;
  int copied = -1;
  g_assert_true (shoal_param_store_load_bytes (b, blob, "a.bin", SHOAL_PARAMS_BY_NAME_ANY, &copied, &error));
  g_assert_no_error (error);
  g_assert_cmpint (copied, ==, 2);
  ShoalParam *src = shoal_param_store_find (a, "fc1/weight"), *dst = shoal_param_store_find (b, "fc1/weight");
  g_assert_cmpmem (a->values + src->offset, src->count * 4, b->values + dst->offset, dst->count * 4);
  src = shoal_param_store_find (a, "fc2/weight");
  dst = shoal_param_store_find (b, "fc2/weight");
  g_assert_cmpmem (a->values + src->offset, src->count * 4, b->values + dst->offset, dst->count * 4);
  g_assert_cmpfloat (b->values[shoal_param_store_find (b, "extra/weight")->offset], ==, extra0);

  /* BY_NAME_ALL: the store's extra param is missing from the blob */
  g_assert_false (shoal_param_store_load_bytes (b, blob, "a.bin", SHOAL_PARAMS_BY_NAME_ALL, NULL, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA);
  g_assert_cmpstr (error->message, ==,
                   "param extra/weight is not in a.bin (2 of this net's 3 params are): they are another model's");
  g_clear_error (&error);
  g_bytes_unref (blob);
  shoal_param_store_free (a);
  shoal_param_store_free (b);
}

static void
test_refusals (void)
{
  const char *names[] = { "fc1/weight", NULL };
  const int rows[] = { 4 }, other_rows[] = { 5 };
  ShoalParamStore *a = store_new (names, rows);
  ShoalParamStore *b = store_new (names, other_rows);
  GBytes *blob = shoal_param_store_to_bytes (a);
  GError *error = NULL;

  g_assert_false (shoal_param_store_load_bytes (b, blob, "ws", SHOAL_PARAMS_BY_NAME_ANY, NULL, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_SHAPE);
  g_assert_cmpstr (error->message, ==, "param fc1/weight is 4x3 in ws but 5x3 here");
  g_clear_error (&error);

  const char *c_names[] = { "other/weight", NULL };
  ShoalParamStore *c = store_new (c_names, rows);
  g_assert_false (shoal_param_store_load_bytes (c, blob, "ws", SHOAL_PARAMS_BY_NAME_ANY, NULL, &error));
  g_assert_cmpstr (error->message, ==, "ws has no param named like one of this net's");
  g_clear_error (&error);

  /* every cut of the blob is refused as damaged, never read past its end */
  gsize len;
  const guint8 *data = g_bytes_get_data (blob, &len);
  for (gsize cut = 1; cut < len; cut++)
    {
      GBytes *part = g_bytes_new (data, cut);
      g_assert_false (shoal_param_store_load_bytes (a, part, "ws", SHOAL_PARAMS_BY_NAME_ANY, NULL, &error));
      g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA);
      g_assert_true (g_str_has_prefix (error->message, "ws: ") || g_str_has_prefix (error->message, "ws has no"));
      g_clear_error (&error);
      g_bytes_unref (part);
    }
  /* another version */
  guint8 *copy = g_memdup2 (data, len);
  copy[8] = 7;
  GBytes *v7 = g_bytes_new_take (copy, len);
  g_assert_false (shoal_param_store_load_bytes (a, v7, "ws", SHOAL_PARAMS_BY_NAME_ANY, NULL, &error));
  g_assert_cmpstr (error->message, ==, "ws: params of format version 7; this shoal reads version 1");
  g_clear_error (&error);
  g_bytes_unref (v7);

  g_bytes_unref (blob);
  shoal_param_store_free (a);
  shoal_param_store_free (b);
  shoal_param_store_free (c);
}

/* Blobs of checkpoints written before the header: the records alone. */
static void
test_headerless (void)
{
  const char *names[] = { "fc1/weight", NULL };
  const int rows[] = { 2 };
  ShoalParamStore *a = store_new (names, rows);
  GBytes *blob = shoal_param_store_to_bytes (a);
  GBytes *old = g_bytes_new_from_bytes (blob, 16, g_bytes_get_size (blob) - 16);
  memset (a->values, 0, a->total * sizeof (float));
  GError *error = NULL;
  g_assert_true (shoal_param_store_load_bytes (a, old, "old", SHOAL_PARAMS_BY_NAME_ALL, NULL, &error));
  g_assert_no_error (error);
  g_assert_cmpfloat (a->values[5], ==, 5);
  g_bytes_unref (old);
  g_bytes_unref (blob);
  shoal_param_store_free (a);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/param_blob/round-trip", test_round_trip);
  g_test_add_func ("/param_blob/refusals", test_refusals);
  g_test_add_func ("/param_blob/headerless", test_headerless);
  return g_test_run ();
}
