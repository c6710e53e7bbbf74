/* Checkpoint blobs in LMDB.  Keys: "<name>@<step, 20 digits>" for blobs
 * (a blob over PIECE bytes: its first PIECE there, the rest in pieces
 * "<name>@<step>+<k>", k = 1, 2, ...), "<name>@<step>#sum" for the blob's
 * length and CRC-32, "<name>" for the list of kept steps (two gint64,
 * newest first, -1 when absent).  One write transaction per save keeps it
 * atomic. */
#include "data/checkpoint.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <lmdb.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "core/error.h"
#include "data/lmdb_file.h"
#include "core/tensor.h"

/* Grown before saves that need it; a huge first map would only cost
 * address space, but some environments (valgrind, ulimit -v) refuse it. */
#define INITIAL_MAP_SIZE ((size_t) 256 << 20)
#define MAX_MAP_SIZE ((size_t) 1 << 40)

/* The most one mdb_put writes.  LMDB 0.9.24 (bookworm's) allocates a
 * 1 MiB spill list for a write transaction whenever one put's pages,
 * doubled, exceed the room left in its dirty list (2^17 entries: a value
 * over ~256 MiB with 4 KiB pages), and never frees it for a top-level
 * transaction (fixed upstream in 0.9.25: mdb_txn_end frees mt_spill_pgs of
 * every transaction): every save of a 611 MiB server blob lost 1 MiB.
 * Values of 64 MiB never come near it; a blob is stored in such pieces. */
#define PIECE ((size_t) 64 << 20)

struct _ShoalCheckpoint {
  MDB_env *env;
  MDB_dbi dbi;
  char *dir;
};

static gboolean
lmdb_fail (GError **error, const char *dir, const char *what, int rc)
{
  g_set_error (error, SHOAL_ERROR, rc == ENOENT ? SHOAL_ERROR_IO : SHOAL_ERROR_DATA,
               "%s: checkpoint %s: %s", dir, what, mdb_strerror (rc));
  return FALSE;
}

ShoalCheckpoint *
shoal_checkpoint_open (const char *dir, gboolean create, GError **error)
{
  if (create && g_mkdir_with_parents (dir, 0755) != 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: cannot create: %s", dir, g_strerror (errno));
      return NULL;
    }
  if (!create && !g_file_test (dir, G_FILE_TEST_IS_DIR))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: no checkpoint here", dir);
      return NULL;
    }
  if (!shoal_lmdb_check_meta_pages (dir, error))
    {
      g_prefix_error (error, "checkpoint: ");
      return NULL;
    }
  ShoalCheckpoint *c = g_new0 (ShoalCheckpoint, 1);
  c->dir = g_strdup (dir);
  int rc = mdb_env_create (&c->env);
  if (rc == 0)
    rc = mdb_env_set_mapsize (c->env, INITIAL_MAP_SIZE);
  if (rc == 0)
    /* MDB_NOTLS: a read transaction's reader slot belongs to the
     * transaction, not the thread; a thread that opens and closes a
     * store, then opens it again (the resume step, the checkpoint's
     * clock, then the run's own store) would otherwise find the closed
     * environment's slot in its thread-local key: MDB_BAD_RSLOT */
    rc = mdb_env_open (c->env, dir, (create ? 0 : MDB_RDONLY) | MDB_NOTLS, 0644);
  /* before the first transaction reads a page through the map */
  if (rc == 0 && !shoal_lmdb_check_size (c->env, dir, error))
    {
      g_prefix_error (error, "checkpoint: ");
      shoal_checkpoint_close (c);
      return NULL;
    }
  MDB_txn *txn = NULL;
  if (rc == 0)
    rc = mdb_txn_begin (c->env, NULL, create ? 0 : MDB_RDONLY, &txn);
  if (rc == 0)
    rc = mdb_dbi_open (txn, NULL, 0, &c->dbi);
  if (rc == 0)
    rc = mdb_txn_commit (txn);
  else if (txn != NULL)
    mdb_txn_abort (txn);
  if (rc != 0)
    {
      lmdb_fail (error, dir, "open", rc);
      shoal_checkpoint_close (c);
      return NULL;
    }
  return c;
}

void
shoal_checkpoint_close (ShoalCheckpoint *c)
{
  if (c == NULL)
    return;
  if (c->env != NULL)
    mdb_env_close (c->env);
  g_free (c->dir);
  g_free (c);
}

/* The key of piece k of name's blob at step (0: the first, the blob's own key). */
static char *
blob_key (const char *name, gint64 step, int k)
{
  return k == 0 ? g_strdup_printf ("%s@%020" G_GINT64_FORMAT, name, step)
                : g_strdup_printf ("%s@%020" G_GINT64_FORMAT "+%d", name, step, k);
}

/* LMDB checks no data: a bit flipped on disk (or in a copy) in a blob
 * reads back as other floats, and a resume trained on from them silently
 * or ended in "the loss is nan".  Each blob carries its length and CRC-32
 * (zlib's, ~1 GB/s, a fraction of LMDB's write); a store saved before it
 * has none and is read as it is. */
typedef struct
{
  guint64 len;
  guint32 crc;
  guint32 zero;
} BlobSum;

static char *
sum_key (const char *name, gint64 step)
{
  return g_strdup_printf ("%s@%020" G_GINT64_FORMAT "#sum", name, step);
}

static guint32
crc_of (const guint8 *data, gsize len, guint32 crc)
{
  return (guint32) crc32_z (crc, data, len);
}

/* Deletes the pieces of name's blob at step from piece `from` on; an LMDB
 * code (0 also when there was none). */
static int
del_blob (MDB_txn *txn, MDB_dbi dbi, const char *name, gint64 step, int from)
{
  for (int k = from;; k++)
    {
      char *key = blob_key (name, step, k);
      MDB_val kv = { strlen (key), key };
      int rc = mdb_del (txn, dbi, &kv, NULL);
      g_free (key);
      if (rc == MDB_NOTFOUND)
        return 0;
      if (rc != 0)
        return rc;
    }
}

/* Writes name's blob at step in pieces of at most PIECE bytes, dropping
 * the pieces a longer blob of the same step left; an LMDB code. */
static int
put_blob (MDB_txn *txn, MDB_dbi dbi, const char *name, gint64 step, GBytes *blob)
{
  gsize len = 0;
  const guint8 *data = g_bytes_get_data (blob, &len);
  int k = 0, rc = 0;
  for (gsize at = 0; rc == 0 && (at < len || k == 0); at += PIECE, k++)
    {
      char *key = blob_key (name, step, k);
      MDB_val kv = { strlen (key), key }, v = { MIN (PIECE, len - at), (void *) (data + at) };
      rc = mdb_put (txn, dbi, &kv, &v, 0);
      g_free (key);
    }
  if (rc == 0)
    {
      BlobSum sum = { len, crc_of (data, len, (guint32) crc32_z (0, NULL, 0)), 0 };
      char *key = sum_key (name, step);
      MDB_val kv = { strlen (key), key }, v = { sizeof sum, &sum };
      rc = mdb_put (txn, dbi, &kv, &v, 0);
      g_free (key);
    }
  return rc == 0 ? del_blob (txn, dbi, name, step, k) : rc;
}

/* Deletes name's blob at step and its sum. */
static int
del_step (MDB_txn *txn, MDB_dbi dbi, const char *name, gint64 step)
{
  char *key = sum_key (name, step);
  MDB_val kv = { strlen (key), key };
  int rc = mdb_del (txn, dbi, &kv, NULL);
  g_free (key);
  return rc == 0 || rc == MDB_NOTFOUND ? del_blob (txn, dbi, name, step, 0) : rc;
}

static void
read_steps (MDB_txn *txn, MDB_dbi dbi, const char *name, gint64 steps[2])
{
  MDB_val k = { strlen (name), (void *) name }, v;
  steps[0] = steps[1] = -1;
  if (mdb_get (txn, dbi, &k, &v) == 0 && v.mv_size == 2 * sizeof (gint64))
    memcpy (steps, v.mv_data, 2 * sizeof (gint64));
}

static int save_once (ShoalCheckpoint *c, gint64 step, const char *const *names, GBytes *const *blobs);

/* Grows the map before a save that may not fit: LMDB's own MDB_MAP_FULL
 * error path leaks its page lists, so it stays the rare fallback. */
static int
reserve (ShoalCheckpoint *c, GBytes *const *blobs, size_t *need_out)
{
  MDB_envinfo info;
  MDB_stat st;
  int rc = mdb_env_info (c->env, &info);
  if (rc == 0)
    rc = mdb_env_stat (c->env, &st);
  if (rc != 0)
    return rc;
  size_t need = 0;
  for (int i = 0; blobs[i] != NULL; i++)
    need += g_bytes_get_size (blobs[i]) + 64 * (size_t) st.ms_psize;
  *need_out = need;
  size_t used = (info.me_last_pgno + 1) * (size_t) st.ms_psize;
  size_t size = info.me_mapsize;
  /* the old step's pages are freed only after this write: room for both */
  while (size < used + 2 * need && size < MAX_MAP_SIZE)
    size *= 2;
  return size == info.me_mapsize ? 0 : mdb_env_set_mapsize (c->env, size);
}

static void narrow_steps (ShoalCheckpoint *c, gint64 cand[2], gboolean *first, gboolean verify, gboolean *damaged);

/* Every failed save says where, which step and which step's checkpoint
 * is still there: a save never touches the steps it keeps.  That is the
 * newest step every name of the store has, not the failing blob's: a
 * server's slices saved at a step whose unit state then did not fit
 * are no checkpoint of that step. */
static gboolean
save_fail (ShoalCheckpoint *c, gint64 step, const char *what, GError **error)
{
  gint64 kept[2] = { -1, -1 };
  gboolean first = TRUE, damaged = FALSE;
  narrow_steps (c, kept, &first, FALSE, &damaged);
  gint64 newest = MAX (kept[0], kept[1]);
  char *file = g_build_filename (c->dir, "data.mdb", NULL);
  char *also = newest >= 0 ? g_strdup_printf (" (the checkpoint of step %" G_GINT64_FORMAT " is kept)", newest)
                           : g_strdup ("");
  g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: checkpoint of step %" G_GINT64_FORMAT ": %s%s",
               file, step, what, also);
  g_free (also);
  g_free (file);
  return FALSE;
}

gboolean
shoal_checkpoint_save (ShoalCheckpoint *c, gint64 step, const char *const *names,
                       GBytes *const *blobs, GError **error)
{
  size_t need = 0;
  int rrc = reserve (c, blobs, &need);
  if (rrc != 0)
    return lmdb_fail (error, c->dir, "growing the map", rrc);
  /* A full disk found here leaves the file as it was; found by LMDB in the
   * middle of its page writes it reads EIO (a short write). */
  GError *local = NULL;
  if (!shoal_lmdb_reserve_disk (c->env, need, &local))
    {
      gboolean r = save_fail (c, step, local->message, error);
      g_error_free (local);
      return r;
    }
  for (;;)
    {
      int rc = save_once (c, step, names, blobs);
      if (rc == 0)
        return TRUE;
      MDB_envinfo info;
      if ((rc == EIO || rc == ENOSPC) && shoal_lmdb_free_bytes (c->dir) < need)
        {
          char *size = shoal_format_bytes (need);
          char *what = g_strdup_printf ("writing %s: %s", size, g_strerror (ENOSPC));
          g_free (size);
          save_fail (c, step, what, error);
          g_free (what);
          return FALSE;
        }
      if (rc != MDB_MAP_FULL || mdb_env_info (c->env, &info) != 0 || info.me_mapsize >= MAX_MAP_SIZE
          || mdb_env_set_mapsize (c->env, info.me_mapsize * 2) != 0)
        return save_fail (c, step, mdb_strerror (rc), error);
    }
}

/* One attempt; returns an LMDB code (MDB_MAP_FULL: grow and retry). */
static int
save_once (ShoalCheckpoint *c, gint64 step, const char *const *names, GBytes *const *blobs)
{
  MDB_txn *txn = NULL;
  int rc = mdb_txn_begin (c->env, NULL, 0, &txn);
  for (int i = 0; rc == 0 && names[i] != NULL; i++)
    {
      gint64 steps[2];
      read_steps (txn, c->dbi, names[i], steps);
      if (steps[0] != step)
        {
          /* the step before the previous one goes */
          if (steps[1] >= 0)
            rc = del_step (txn, c->dbi, names[i], steps[1]);
          steps[1] = steps[0];
          steps[0] = step;
        }
      if (rc == 0)
        rc = put_blob (txn, c->dbi, names[i], step, blobs[i]);
      MDB_val sk = { strlen (names[i]), (void *) names[i] }, sv = { sizeof steps, steps };
      if (rc == 0)
        rc = mdb_put (txn, c->dbi, &sk, &sv, 0);
    }
  if (rc == 0)
    return mdb_txn_commit (txn);
  if (txn != NULL)
    mdb_txn_abort (txn);
  return rc;
}

/* Reads name's blob at step and checks it against its sum: with `out`,
 * a copy of it (new reference); without, the check alone (no copy of a
 * blob of hundreds of MiB).  FALSE with error naming the file and what is
 * wrong; *damaged tells a blob that is there but damaged from one that
 * is not there. */
static gboolean
read_blob (ShoalCheckpoint *c, const char *name, gint64 step, GBytes **out, gboolean *damaged, GError **error)
{
  MDB_txn *txn = NULL;
  char *damage = NULL;
  *damaged = FALSE;
  int rc = mdb_txn_begin (c->env, NULL, MDB_RDONLY, &txn);
  if (rc == 0)
    {
      /* the pieces, then one copy of them all (LMDB's memory lives only
       * until the txn ends) */
      GArray *pieces = g_array_new (FALSE, FALSE, sizeof (MDB_val));
      gsize len = 0;
      for (int k = 0;; k++)
        {
          char *key = blob_key (name, step, k);
          MDB_val kv = { strlen (key), key }, v;
          int grc = mdb_get (txn, c->dbi, &kv, &v);
          g_free (key);
          if (grc != 0)
            {
              rc = k == 0 || grc != MDB_NOTFOUND ? grc : 0;
              break;
            }
          g_array_append_val (pieces, v);
          len += v.mv_size;
        }
      if (rc == 0)
        {
          char *key = sum_key (name, step);
          MDB_val kv = { strlen (key), key }, v;
          int src = mdb_get (txn, c->dbi, &kv, &v);
          g_free (key);
          BlobSum sum;
          if (src == 0 && v.mv_size == sizeof sum)
            {
              memcpy (&sum, v.mv_data, sizeof sum);
              guint32 crc = (guint32) crc32_z (0, NULL, 0);
              for (guint k = 0; k < pieces->len; k++)
                crc = crc_of (g_array_index (pieces, MDB_val, k).mv_data, g_array_index (pieces, MDB_val, k).mv_size,
                              crc);
              if (sum.len != len)
                damage = g_strdup_printf ("it has %zu bytes, %" G_GUINT64_FORMAT " were saved", len, sum.len);
              else if (crc != sum.crc)
                damage = g_strdup_printf ("its %zu bytes do not match the checksum saved with them", len);
            }
          else if (src == 0)
            damage = g_strdup_printf ("its checksum record has %zu bytes, not %zu", v.mv_size, sizeof sum);
          else if (src != MDB_NOTFOUND)
            rc = src;
        }
      if (rc == 0 && damage == NULL && out != NULL)
        {
          guint8 *all = g_malloc (len), *at = all;
          for (guint k = 0; k < pieces->len; k++)
            {
              MDB_val *v = &g_array_index (pieces, MDB_val, k);
              memcpy (at, v->mv_data, v->mv_size);
              at += v->mv_size;
            }
          *out = g_bytes_new_take (all, len);
        }
      g_array_free (pieces, TRUE);
      mdb_txn_abort (txn);
    }
  if (damage != NULL)
    {
      *damaged = TRUE;
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                   "%s/data.mdb: the checkpoint of '%s' at step %" G_GINT64_FORMAT " is damaged: %s (bits changed "
                   "on disk or in a copy)", c->dir, name, step, damage);
      g_free (damage);
      return FALSE;
    }
  if (rc != 0)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA, "%s: no checkpoint of '%s' at step %" G_GINT64_FORMAT ": %s",
                 c->dir, name, step, mdb_strerror (rc));
  return rc == 0;
}

GBytes *
shoal_checkpoint_load (ShoalCheckpoint *c, const char *name, gint64 step, GError **error)
{
  GBytes *out = NULL;
  gboolean damaged;
  read_blob (c, name, step, &out, &damaged, error);
  return out;
}

gboolean
shoal_checkpoint_intact (ShoalCheckpoint *c, const char *name, gint64 step, GError **error)
{
  gboolean damaged;
  GError *local = NULL;
  if (read_blob (c, name, step, NULL, &damaged, &local) || !damaged)
    {
      g_clear_error (&local);
      return TRUE;
    }
  g_propagate_error (error, local);
  return FALSE;
}

int
shoal_checkpoint_steps (ShoalCheckpoint *c, const char *name, gint64 steps[2])
{
  MDB_txn *txn = NULL;
  steps[0] = steps[1] = -1;
  if (mdb_txn_begin (c->env, NULL, MDB_RDONLY, &txn) != 0)
    return 0;
  read_steps (txn, c->dbi, name, steps);
  mdb_txn_abort (txn);
  return (steps[0] >= 0) + (steps[1] >= 0);
}

gboolean
shoal_checkpoint_has (ShoalCheckpoint *c, const char *name, gint64 step)
{
  gint64 steps[2];
  shoal_checkpoint_steps (c, name, steps);
  return step >= 0 && (steps[0] == step || steps[1] == step);
}

char **
shoal_checkpoint_names (ShoalCheckpoint *c)
{
  GPtrArray *names = g_ptr_array_new ();
  MDB_txn *txn = NULL;
  MDB_cursor *cur = NULL;
  if (mdb_txn_begin (c->env, NULL, MDB_RDONLY, &txn) == 0 && mdb_cursor_open (txn, c->dbi, &cur) == 0)
    {
      MDB_val k, v;
      for (int rc = mdb_cursor_get (cur, &k, &v, MDB_FIRST); rc == 0;
           rc = mdb_cursor_get (cur, &k, &v, MDB_NEXT))
        if (memchr (k.mv_data, '@', k.mv_size) == NULL)
          g_ptr_array_add (names, g_strndup (k.mv_data, k.mv_size));
      mdb_cursor_close (cur);
    }
  if (txn != NULL)
    mdb_txn_abort (txn);
  g_ptr_array_add (names, NULL);
  return (char **) g_ptr_array_free (names, FALSE);
}

/* Narrows cand (the steps every name seen so far has; *first: none seen
 * yet) to those every name of store c has too; with `verify`, a damaged
 * step counts as absent (a warning names it, *damaged says so). */
static void
narrow_steps (ShoalCheckpoint *c, gint64 cand[2], gboolean *first, gboolean verify, gboolean *damaged)
{
  char **names = shoal_checkpoint_names (c);
  for (int i = 0; names[i] != NULL; i++)
    {
      gint64 s[2];
      shoal_checkpoint_steps (c, names[i], s);
      for (int j = 0; verify && j < 2; j++)
        {
          /* the store keeps two steps so that one can go back: a
           * damaged one is left out, saying so */
          GError *damage = NULL;
          if (s[j] >= 0 && !shoal_checkpoint_intact (c, names[i], s[j], &damage))
            {
              g_warning ("%s; step %" G_GINT64_FORMAT " is left out of the resume", damage->message, s[j]);
              g_error_free (damage);
              s[j] = -1;
              *damaged = TRUE;
            }
        }
      if (*first)
        {
          cand[0] = s[0];
          cand[1] = s[1];
          *first = FALSE;
          continue;
        }
      for (int j = 0; j < 2; j++)
        if (cand[j] >= 0 && cand[j] != s[0] && cand[j] != s[1])
          cand[j] = -1;
    }
  g_strfreev (names);
}

gint64
shoal_checkpoint_common_step (const char *const *dirs, GError **error)
{
  /* candidates: the steps of the first name seen; keep those every name has */
  gint64 cand[2] = { -1, -1 };
  gboolean first = TRUE, damaged = FALSE;
  for (int d = 0; dirs[d] != NULL; d++)
    {
      ShoalCheckpoint *c = shoal_checkpoint_open (dirs[d], FALSE, error);
      if (c == NULL)
        return -1;
      narrow_steps (c, cand, &first, TRUE, &damaged);
      shoal_checkpoint_close (c);
    }
  gint64 best = MAX (cand[0], cand[1]);
  if (best < 0)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA, "no checkpoint step is common to every process's checkpoint%s",
                 damaged ? " and intact (the damaged steps are named above)" : "");
  return best;
}
