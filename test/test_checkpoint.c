/* The checkpoint store: the last two steps per name, one transaction per
 * save, the newest common step of several stores, damaged blobs. */
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include "data/checkpoint.h"
#include "core/error.h"
#include "support/temp_tree.h"

static void
save (ShoalCheckpoint *c, gint64 step, const char *name, const char *text)
{
  GError *error = NULL;
  GBytes *b = g_bytes_new (text, strlen (text));
  const char *names[] = { name, NULL };
  GBytes *blobs[] = { b, NULL };
  g_assert_true (shoal_checkpoint_save (c, step, names, blobs, &error));
  g_assert_no_error (error);
  g_bytes_unref (b);
}

static char *
load (ShoalCheckpoint *c, const char *name, gint64 step)
{
  GBytes *b = shoal_checkpoint_load (c, name, step, NULL);
  if (b == NULL)
    return NULL;
  gsize n;
  const char *d = g_bytes_get_data (b, &n);
  char *s = g_strndup (d, n);
  g_bytes_unref (b);
  return s;
}

static void
test_keeps_two_steps (void)
{
  char *dir = g_dir_make_tmp ("ckpt-XXXXXX", NULL);
  char *sub = g_build_filename (dir, "rank-0", NULL);
  GError *error = NULL;
  ShoalCheckpoint *c = shoal_checkpoint_open (sub, TRUE, &error);
  g_assert_no_error (error);
  save (c, 10, "server", "ten");
  save (c, 20, "server", "twenty");
  save (c, 20, "server", "twenty again");   /* the same step replaces */
  save (c, 30, "server", "thirty");
  gint64 steps[2];
  g_assert_cmpint (shoal_checkpoint_steps (c, "server", steps), ==, 2);
  g_assert_cmpint (steps[0], ==, 30);
  g_assert_cmpint (steps[1], ==, 20);
  char *s = load (c, "server", 20);
  g_assert_cmpstr (s, ==, "twenty again");
  g_free (s);
  g_assert_null (load (c, "server", 10));
  GBytes *missing = shoal_checkpoint_load (c, "nobody", 30, &error);
  g_assert_null (missing);
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA);
  g_clear_error (&error);

  save (c, 20, "unit-0-0", "cursor 20");
  save (c, 30, "unit-0-0", "cursor 30");
  char **names = shoal_checkpoint_names (c);
  g_assert_cmpint (g_strv_length (names), ==, 2);
  g_strfreev (names);
  shoal_checkpoint_close (c);

  /* a second store that has only reached 20: the common step is 20 */
  char *other = g_build_filename (dir, "rank-1", NULL);
  c = shoal_checkpoint_open (other, TRUE, &error);
  save (c, 10, "unit-0-1", "a");
  save (c, 20, "unit-0-1", "b");
  shoal_checkpoint_close (c);
  const char *both[] = { sub, other, NULL };
  g_assert_cmpint (shoal_checkpoint_common_step (both, &error), ==, 20);
  g_assert_no_error (error);

  /* one that has only 10 (which rank-0 dropped): nothing in common */
  c = shoal_checkpoint_open (other, TRUE, &error);
  shoal_checkpoint_close (c);
  char *third = g_build_filename (dir, "rank-2", NULL);
  c = shoal_checkpoint_open (third, TRUE, &error);
  save (c, 10, "unit-1-0", "old");
  shoal_checkpoint_close (c);
  const char *all[] = { sub, other, third, NULL };
  g_assert_cmpint (shoal_checkpoint_common_step (all, &error), ==, -1);
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA);
  g_clear_error (&error);

  /* no store at all */
  char *none = g_build_filename (dir, "none", NULL);
  g_assert_null (shoal_checkpoint_open (none, FALSE, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_IO);
  g_clear_error (&error);

  g_assert_true (shoal_test_remove_tree (dir));
  g_free (none);
  g_free (third);
  g_free (other);
  g_free (sub);
  g_free (dir);
}

/* Blobs bigger than the first map: the store grows it, and a blob over
 * 256 MiB loses nothing under ASan (LMDB 0.9.24 kept a 1 MiB spill list
 * of every put that large: checkpoint.c PIECE).  A step saved again with
 * a smaller blob leaves none of the larger one's pieces; a dropped step
 * takes all its pieces. */
static void
test_grows (void)
{
  char *dir = g_dir_make_tmp ("ckpt-XXXXXX", NULL);
  GError *error = NULL;
  ShoalCheckpoint *c = shoal_checkpoint_open (dir, TRUE, &error);
  g_assert_no_error (error);
  gsize n = (gsize) 300 << 20;
  guint8 *big = g_malloc (n);
  for (gsize i = 0; i < n; i++)
    big[i] = (guint8) ((i >> 20) * 7 + i % 251);   /* pieces out of order would differ */
  GBytes *b = g_bytes_new_take (big, n), *small = g_bytes_new_static ("ten bytes!", 10);
  const char *names[] = { "server", NULL };
  GBytes *blobs[] = { b, NULL }, *smalls[] = { small, NULL };
  g_assert_true (shoal_checkpoint_save (c, 1, names, blobs, &error));
  g_assert_no_error (error);
  GBytes *back = shoal_checkpoint_load (c, "server", 1, &error);
  g_assert_no_error (error);
  g_assert_true (g_bytes_equal (back, b));
  g_bytes_unref (back);

  g_assert_true (shoal_checkpoint_save (c, 1, names, smalls, &error));
  back = shoal_checkpoint_load (c, "server", 1, &error);
  g_assert_no_error (error);
  g_assert_true (g_bytes_equal (back, small));
  g_bytes_unref (back);

  g_assert_true (shoal_checkpoint_save (c, 2, names, blobs, &error));
  g_assert_true (shoal_checkpoint_save (c, 3, names, smalls, &error));
  g_assert_no_error (error);
  gint64 steps[2];
  g_assert_cmpint (shoal_checkpoint_steps (c, "server", steps), ==, 2);
  g_assert_cmpint (steps[0], ==, 3);
  g_assert_cmpint (steps[1], ==, 2);
  back = shoal_checkpoint_load (c, "server", 2, &error);
  g_assert_no_error (error);
  g_assert_true (g_bytes_equal (back, b));
  g_bytes_unref (back);
  g_assert_null (shoal_checkpoint_load (c, "server", 1, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA);
  g_clear_error (&error);
  char **all = shoal_checkpoint_names (c);
  g_assert_cmpint (g_strv_length (all), ==, 1);
  g_strfreev (all);
  g_bytes_unref (b);
  g_bytes_unref (small);
  shoal_checkpoint_close (c);
  g_assert_true (shoal_test_remove_tree (dir));
  g_free (dir);
}

/* A store whose data.mdb was cut short is an error naming the file, not a
 * SIGBUS on the first read through LMDB's map. */
static void
test_truncated (void)
{
  char *dir = g_dir_make_tmp ("ckpt-XXXXXX", NULL);
  char *file = g_build_filename (dir, "data.mdb", NULL);
  GError *error = NULL;
  ShoalCheckpoint *c = shoal_checkpoint_open (dir, TRUE, &error);
  g_assert_no_error (error);
  char *text = g_malloc (200000);
  memset (text, 'x', 199999);
  text[199999] = '\0';
  save (c, 10, "server", text);
  g_free (text);
  shoal_checkpoint_close (c);
  GStatBuf st;
  g_assert_cmpint (g_stat (file, &st), ==, 0);
  guint64 full = (guint64) st.st_size;
  g_assert_cmpint (truncate (file, 8192), ==, 0);
  for (int create = 0; create < 2; create++)
    {
      g_assert_null (shoal_checkpoint_open (dir, create, &error));
      g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA);
      char *want = g_strdup_printf ("checkpoint: %s: truncated: the file has 8192 bytes, its pages in use "
                                    "end at byte %" G_GUINT64_FORMAT " (a partial copy or a damaged file)",
                                    file, full);
      g_assert_cmpstr (error->message, ==, want);
      g_free (want);
      g_clear_error (&error);
    }
  g_assert_cmpint (truncate (file, 0), ==, 0);
  g_assert_null (shoal_checkpoint_open (dir, FALSE, &error));
  char *want = g_strdup_printf ("checkpoint: %s: truncated: the file has 0 bytes, fewer than LMDB's two "
                                "meta pages (8192 bytes at least)", file);
  g_assert_cmpstr (error->message, ==, want);
  g_free (want);
  g_clear_error (&error);
  g_assert_true (shoal_test_remove_tree (dir));
  g_free (file);
  g_free (dir);
}

/* Flips one bit in the middle of the first run of 64 bytes `fill` in
 * the store's data.mdb, as a disk or a copy may. */
static void
flip_inside (const char *dir, char fill)
{
  char *file = g_build_filename (dir, "data.mdb", NULL);
  char *data = NULL;
  gsize len = 0;
  g_assert_true (g_file_get_contents (file, &data, &len, NULL));
  char run[64];
  memset (run, fill, sizeof run);
  char *at = memmem (data, len, run, sizeof run);
  g_assert_nonnull (at);
  at[32] ^= 0x10;
  g_assert_true (g_file_set_contents (file, data, (gssize) len, NULL));
  g_free (data);
  g_free (file);
}

/* LMDB checks no data: a bit flipped in a blob read back as other floats
 * and a resume trained on from them.  Each blob's CRC-32 catches it; the
 * resume goes back to the other step kept, or fails naming the damage. */
static void
test_bit_flip (void)
{
  char *dir = g_dir_make_tmp ("ckpt-XXXXXX", NULL);
  GError *error = NULL;
  ShoalCheckpoint *c = shoal_checkpoint_open (dir, TRUE, &error);
  g_assert_no_error (error);
  char *five = g_malloc0 (20001), *ten = g_malloc0 (20001);
  memset (five, 'a', 20000);
  memset (ten, 'b', 20000);
  save (c, 5, "server", five);
  save (c, 5, "unit-0-0", "state five");
  save (c, 10, "server", ten);
  save (c, 10, "unit-0-0", "state ten");
  shoal_checkpoint_close (c);
  flip_inside (dir, 'b');

  c = shoal_checkpoint_open (dir, FALSE, &error);
  g_assert_no_error (error);
  g_assert_null (shoal_checkpoint_load (c, "server", 10, &error));
  char *want = g_strdup_printf ("%s/data.mdb: the checkpoint of 'server' at step 10 is damaged: its 20000 bytes do "
                                "not match the checksum saved with them (bits changed on disk or in a copy)", dir);
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA);
  g_assert_cmpstr (error->message, ==, want);
  g_clear_error (&error);
  g_assert_false (shoal_checkpoint_intact (c, "server", 10, &error));
  g_assert_cmpstr (error->message, ==, want);
  g_clear_error (&error);
  g_free (want);
  g_assert_true (shoal_checkpoint_intact (c, "server", 5, &error));
  g_assert_true (shoal_checkpoint_intact (c, "nobody", 5, &error));   /* absent is not damaged */
  g_assert_no_error (error);
  char *s = load (c, "server", 5);
  g_assert_cmpstr (s, ==, five);
  g_free (s);
  shoal_checkpoint_close (c);

  /* the resume goes back to step 5, saying why */
  const char *dirs[] = { dir, NULL };
  g_test_expect_message (NULL, G_LOG_LEVEL_WARNING, "*'server' at step 10 is damaged*step 10 is left out of the resume");
  g_assert_cmpint (shoal_checkpoint_common_step (dirs, &error), ==, 5);
  g_test_assert_expected_messages ();
  g_assert_no_error (error);

  /* both steps damaged: no resume, and the error says why */
  flip_inside (dir, 'a');
  g_test_expect_message (NULL, G_LOG_LEVEL_WARNING, "*'server' at step 10 is damaged*");
  g_test_expect_message (NULL, G_LOG_LEVEL_WARNING, "*'server' at step 5 is damaged*");
  g_assert_cmpint (shoal_checkpoint_common_step (dirs, &error), ==, -1);
  g_test_assert_expected_messages ();
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA);
  g_assert_cmpstr (error->message, ==, "no checkpoint step is common to every process's checkpoint and intact (the "
                                       "damaged steps are named above)");
  g_clear_error (&error);
  g_free (five);
  g_free (ten);
  g_assert_true (shoal_test_remove_tree (dir));
  g_free (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/checkpoint/keeps-two-steps", test_keeps_two_steps);
  g_test_add_func ("/checkpoint/grows", test_grows);
  g_test_add_func ("/checkpoint/truncated", test_truncated);
  g_test_add_func ("/checkpoint/bit-flip", test_bit_flip);
  return g_test_run ();
}
