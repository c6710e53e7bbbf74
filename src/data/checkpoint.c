/* Checkpoint blobs in LMDB.  Keys: "<name>@<step, 20 digits>" for blobs,
 * "<name>" for the list of kept steps (two gint64, newest first, -1 when
 * absent).  One write transaction per save keeps it atomic. */
#include "data/checkpoint.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <lmdb.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "data/lmdb_file.h"
#include "core/tensor.h"

/* Grown before saves that need it; a huge first map would only cost
 * address space, but some environments (valgrind, ulimit -v) refuse it.
 * LMDB 0.9.24 loses 1 MiB per growth of an open environment: growth
 * doubles, so that stays a few MiB over a store's life. */
#define INITIAL_MAP_SIZE ((size_t) 256 << 20)
#define MAX_MAP_SIZE ((size_t) 1 << 40)

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

static char *
blob_key (const char *name, gint64 step)
{
  return g_strdup_printf ("%s@%020" G_GINT64_FORMAT, name, step);
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

/* Every failed save says where, which step and which step's checkpoint
 * is still there: a save never touches the steps it keeps. */
static gboolean
save_fail (ShoalCheckpoint *c, gint64 step, const char *const *names, const char *what,
           GError **error)
{
  gint64 kept[2] = { -1, -1 };
  if (names[0] != NULL)
    shoal_checkpoint_steps (c, names[0], kept);
  char *file = g_build_filename (c->dir, "data.mdb", NULL);
  char *also = kept[0] >= 0 ? g_strdup_printf (" (the checkpoint of step %" G_GINT64_FORMAT " is kept)", kept[0])
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
      gboolean r = save_fail (c, step, names, local->message, error);
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
          save_fail (c, step, names, what, error);
          g_free (what);
          return FALSE;
        }
      if (rc != MDB_MAP_FULL || mdb_env_info (c->env, &info) != 0 || info.me_mapsize >= MAX_MAP_SIZE
          || mdb_env_set_mapsize (c->env, info.me_mapsize * 2) != 0)
        return save_fail (c, step, names, mdb_strerror (rc), error);
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
            {
              char *old = blob_key (names[i], steps[1]);
              MDB_val ok = { strlen (old), old };
              int drc = mdb_del (txn, c->dbi, &ok, NULL);
              g_free (old);
              if (drc != 0 && drc != MDB_NOTFOUND)
                rc = drc;
            }
          steps[1] = steps[0];
          steps[0] = step;
        }
      char *key = blob_key (names[i], step);
      gsize len = 0;
      gconstpointer data = g_bytes_get_data (blobs[i], &len);
      MDB_val k = { strlen (key), key }, v = { len, (void *) data };
      if (rc == 0)
        rc = mdb_put (txn, c->dbi, &k, &v, 0);
      g_free (key);
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

GBytes *
shoal_checkpoint_load (ShoalCheckpoint *c, const char *name, gint64 step, GError **error)
{
  MDB_txn *txn = NULL;
  GBytes *out = NULL;
  int rc = mdb_txn_begin (c->env, NULL, MDB_RDONLY, &txn);
  if (rc == 0)
    {
      char *key = blob_key (name, step);
      MDB_val k = { strlen (key), key }, v;
      rc = mdb_get (txn, c->dbi, &k, &v);
      if (rc == 0)
        out = g_bytes_new (v.mv_data, v.mv_size);  /* LMDB's memory lives only until the txn ends */
      g_free (key);
      mdb_txn_abort (txn);
    }
  if (out == NULL)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA, "%s: no checkpoint of '%s' at step %" G_GINT64_FORMAT ": %s",
                 c->dir, name, step, mdb_strerror (rc));
  return out;
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

gint64
shoal_checkpoint_common_step (const char *const *dirs, GError **error)
{
  /* candidates: the steps of the first name seen; keep those every name has */
  gint64 cand[2] = { -1, -1 };
  gboolean first = TRUE;
  for (int d = 0; dirs[d] != NULL; d++)
    {
      ShoalCheckpoint *c = shoal_checkpoint_open (dirs[d], FALSE, error);
      if (c == NULL)
        return -1;
      char **names = shoal_checkpoint_names (c);
      for (int i = 0; names[i] != NULL; i++)
        {
          gint64 s[2];
          shoal_checkpoint_steps (c, names[i], s);
          if (first)
            {
              cand[0] = s[0];
              cand[1] = s[1];
              first = FALSE;
              continue;
            }
          for (int j = 0; j < 2; j++)
            if (cand[j] >= 0 && cand[j] != s[0] && cand[j] != s[1])
              cand[j] = -1;
        }
      g_strfreev (names);
      shoal_checkpoint_close (c);
    }
  gint64 best = MAX (cand[0], cand[1]);
  if (best < 0)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                 "no checkpoint step is common to every process's checkpoint");
  return best;
}
