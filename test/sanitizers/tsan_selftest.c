/* Checks that a TSan build with tsan_glib.c sees through GLib: run with
 * an argument, this program does one thing and TSan must (or must not)
 * complain.  Driven by test/e2e/tsan_glib.sh.
 *   locked    two threads add to a counter under a GMutex: no report
 *   cond      a value handed over with GMutex + GCond: no report
 *   queue     a buffer handed over through a GAsyncQueue: no report
 *   once      data set up under g_once_init_enter/leave: no report
 *   race      two threads add to a counter without the mutex: a data race
 *   inversion two mutexes taken in both orders: a lock-order inversion */
#include <glib.h>
#include <string.h>

static GMutex lock_a, lock_b;
static GCond cond;
static int counter, ready, handed;

static gpointer
add_locked (gpointer data)
{
  (void) data;
  for (int i = 0; i < 1000; i++)
    {
      g_mutex_lock (&lock_a);
      counter++;
      g_mutex_unlock (&lock_a);
    }
  return NULL;
}

static gpointer
add_racy (gpointer data)
{
  (void) data;
  for (int i = 0; i < 1000; i++)
    counter++;
  return NULL;
}

static gpointer
producer (gpointer data)
{
  (void) data;
  handed = 42;
  g_mutex_lock (&lock_a);
  ready = 1;
  g_cond_broadcast (&cond);
  g_mutex_unlock (&lock_a);
  return NULL;
}

static gpointer
queue_consumer (gpointer data)
{
  int *buf = g_async_queue_pop (data);
  int sum = buf[0] + buf[1];
  g_free (buf);
  return GINT_TO_POINTER (sum);
}

static int *table;

static int *
get_table (void)
{
  static gsize done = 0;
  if (g_once_init_enter (&done))
    {
      table = g_new (int, 4);
      for (int i = 0; i < 4; i++)
        table[i] = i * i;
      g_once_init_leave (&done, 1);
    }
  return table;
}

static gpointer
read_table (gpointer data)
{
  (void) data;
  return GINT_TO_POINTER (get_table ()[3]);
}

static gpointer
lock_ba (gpointer data)
{
  (void) data;
  g_mutex_lock (&lock_b);
  g_mutex_lock (&lock_a);
  g_mutex_unlock (&lock_a);
  g_mutex_unlock (&lock_b);
  return NULL;
}

int
main (int argc, char **argv)
{
  const char *what = argc > 1 ? argv[1] : "";
  GThread *t1, *t2;

  if (strcmp (what, "locked") == 0 || strcmp (what, "race") == 0)
    {
      GThreadFunc f = what[0] == 'l' ? add_locked : add_racy;
      t1 = g_thread_new ("a", f, NULL);
      t2 = g_thread_new ("b", f, NULL);
      g_thread_join (t1);
      g_thread_join (t2);
      g_print ("counter %d\n", counter);
    }
  else if (strcmp (what, "cond") == 0)
    {
      t1 = g_thread_new ("producer", producer, NULL);
      g_mutex_lock (&lock_a);
      while (!ready)
        g_cond_wait (&cond, &lock_a);
      g_mutex_unlock (&lock_a);
      g_print ("handed %d\n", handed);
      g_thread_join (t1);
    }
  else if (strcmp (what, "queue") == 0)
    {
      GAsyncQueue *q = g_async_queue_new ();
      t1 = g_thread_new ("consumer", queue_consumer, q);
      int *buf = g_new (int, 2);
      buf[0] = 20;
      buf[1] = 22;
      g_async_queue_push (q, buf);
      g_print ("sum %d\n", GPOINTER_TO_INT (g_thread_join (t1)));
      g_async_queue_unref (q);
    }
  else if (strcmp (what, "once") == 0)
    {
      t1 = g_thread_new ("a", read_table, NULL);
      t2 = g_thread_new ("b", read_table, NULL);
      int s = GPOINTER_TO_INT (g_thread_join (t1)) + GPOINTER_TO_INT (g_thread_join (t2));
      g_print ("table %d\n", s + get_table ()[2]);
      g_free (table);
    }
  else if (strcmp (what, "inversion") == 0)
    {
      g_mutex_lock (&lock_a);
      g_mutex_lock (&lock_b);
      g_mutex_unlock (&lock_b);
      g_mutex_unlock (&lock_a);
      t1 = g_thread_new ("ba", lock_ba, NULL);
      g_thread_join (t1);
    }
  else
    {
      g_printerr ("usage: tsan_selftest locked|cond|queue|once|race|inversion\n");
      return 2;
    }
  return 0;
}
