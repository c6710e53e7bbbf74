/* marks: threads (they start threads: TSan runs this file in `make SANITIZE=thread test-threads`) */
/* shoal_parallel_for: every element exactly once whatever the threads,
 * loops from several threads at once (one gets the helpers, the others
 * run alone), and an optimiser update cut into chunks equal to the bit
 * to one call over the whole range. */
#include <glib.h>
#include <string.h>

#include "core/parallel.h"
#include "core/updater.h"

static void
count_chunk (size_t begin, size_t end, gpointer data)
{
  gint *hits = data;
  for (size_t i = begin; i < end; i++)
    g_atomic_int_inc (&hits[i]);
}

static void
check_once (size_t n, size_t grain)
{
  gint *hits = g_new0 (gint, n + 1);
  shoal_parallel_for (n, grain, count_chunk, hits);
  for (size_t i = 0; i < n; i++)
    if (hits[i] != 1)
      g_error ("n %zu grain %zu: element %zu ran %d times", n, grain, i, hits[i]);
  g_assert_cmpint (hits[n], ==, 0);
  g_free (hits);
}

static void
test_each_once (void)
{
  for (int threads = 1; threads <= 4; threads++)
    {
      shoal_parallel_set_threads (threads);
      g_assert_cmpint (shoal_parallel_threads (), ==, threads);
      const size_t sizes[] = { 0, 1, 7, 100, 1000, 1001, 65536, 100003 };
      for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
        {
          check_once (sizes[i], 1);
          check_once (sizes[i], 64);
          check_once (sizes[i], 1000);
        }
    }
  shoal_parallel_set_threads (1);
}

static gpointer
caller (gpointer data)
{
  (void) data;
  for (int i = 0; i < 200; i++)
    check_once (20000, 100);
  return NULL;
}

static void
test_concurrent_callers (void)
{
  shoal_parallel_set_threads (3);
  GThread *t[4];
  for (int i = 0; i < 4; i++)
    t[i] = g_thread_new ("caller", caller, NULL);
  for (int i = 0; i < 4; i++)
    g_thread_join (t[i]);
  shoal_parallel_set_threads (1);
}

typedef struct {
  ShoalUpdaterConf conf;
  float *v, *g, *a, *b;
} Update;

static void
update_chunk (size_t begin, size_t end, gpointer data)
{
  Update *u = data;
  shoal_updater_apply (&u->conf, 3, 7, 0.5f, 1.0f, u->v + begin, u->g + begin, u->a + begin,
                       u->b + begin, end - begin);
}

static void
test_update_bits (void)
{
  const size_t n = 200000;
  for (int kind = 0; kind < SHOAL_UPDATER_COUNT; kind++)
    {
      Update u[2];
      for (int j = 0; j < 2; j++)
        {
          shoal_updater_conf_defaults (&u[j].conf, (ShoalUpdaterKind) kind);
          u[j].conf.momentum = 0.9f;
          u[j].conf.weight_decay = 1e-3f;
          u[j].v = g_new (float, n);
          u[j].g = g_new (float, n);
          u[j].a = g_new (float, n);
          u[j].b = g_new (float, n);
          for (size_t i = 0; i < n; i++)
            {
              u[j].v[i] = (float) g_test_rand_double_range (-1, 1);
              u[j].g[i] = (float) i * 1e-6f - 0.1f;
              u[j].a[i] = (float) (i % 13) * 0.01f;
              u[j].b[i] = (float) (i % 7) * 0.02f;
            }
          if (j == 1)
            {
              memcpy (u[1].v, u[0].v, n * sizeof (float));
            }
        }
      shoal_parallel_set_threads (1);
      update_chunk (0, n, &u[0]);
      shoal_parallel_set_threads (3);
      shoal_parallel_for (n, 4096, update_chunk, &u[1]);
      g_assert_cmpmem (u[0].v, n * sizeof (float), u[1].v, n * sizeof (float));
      g_assert_cmpmem (u[0].a, n * sizeof (float), u[1].a, n * sizeof (float));
      g_assert_cmpmem (u[0].b, n * sizeof (float), u[1].b, n * sizeof (float));
      for (int j = 0; j < 2; j++)
        {
          g_free (u[j].v);
          g_free (u[j].g);
          g_free (u[j].a);
          g_free (u[j].b);
        }
    }
  shoal_parallel_set_threads (1);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/parallel/each-once", test_each_once);
  g_test_add_func ("/parallel/concurrent-callers", test_concurrent_callers);
  g_test_add_func ("/parallel/update-bits", test_update_bits);
  return g_test_run ();
}
