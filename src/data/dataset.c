/* LMDB datasets.  Writers append in key order (MDB_APPEND: pages fill
 * completely and no search is needed), commit in batches and keep the
 * batch in memory until it is committed, so that a full map can be
 * grown and the batch written again.  Readers validate the key range
 * once at open; after that, index i is key i. */
#include "data/dataset.h"

#include <errno.h>
#include <lmdb.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "data/lmdb_file.h"
#include "data/lmdb_map_guard.h"

#define MAP_ALIGN ((size_t) 64 << 10)
#define MAP_MAX ((size_t) 1 << 40)

void
shoal_dataset_format_key (guint64 index, char key[SHOAL_DATASET_KEY_LEN + 1])
{
  for (int i = SHOAL_DATASET_KEY_LEN - 1; i >= 0; i--)
    {
      key[i] = (char) ('0' + index % 10);
      index /= 10;
    }
  key[SHOAL_DATASET_KEY_LEN] = '\0';
}

/* ---- reading ------------------------------------------------------------ */

struct _ShoalDataset {
  gint refs;
  char *path;
  MDB_env *env;
  MDB_dbi dbi;
  guint64 count;
};

struct _ShoalDatasetCursor {
  ShoalDataset *ds;
  MDB_txn *txn;
  MDB_cursor *cursor;
  guint64 next;          /* index the next _next returns */
  gboolean positioned;   /* the LMDB cursor sits on record next - 1 */
};

static void
set_lmdb_error (GError **error, const char *path, const char *doing, int rc)
{
  g_set_error (error, SHOAL_ERROR, rc == ENOMEM || rc == ENOSPC || rc == EIO ? SHOAL_ERROR_IO
               : SHOAL_ERROR_DATA, "%s: %s: %s", path, doing, mdb_strerror (rc));
}

/* Reads the key the LMDB cursor op lands on and checks it is `index`. */
static gboolean
key_is (const MDB_val *key, guint64 index)
{
  char want[SHOAL_DATASET_KEY_LEN + 1];

  shoal_dataset_format_key (index, want);
  return key->mv_size == SHOAL_DATASET_KEY_LEN && memcmp (key->mv_data, want, SHOAL_DATASET_KEY_LEN) == 0;
}

static char *
key_to_string (const MDB_val *key)
{
  GString *s = g_string_new (NULL);
  const guchar *p = key->mv_data;
  for (size_t i = 0; i < key->mv_size && i < 32; i++)
    {
      if (g_ascii_isprint (p[i]))
        g_string_append_c (s, (char) p[i]);
      else
        g_string_append_printf (s, "\\x%02x", p[i]);
    }
  if (key->mv_size > 32)
    g_string_append (s, "...");
  return g_string_free (s, FALSE);
}

static gboolean
check_keys (ShoalDataset *ds, MDB_txn *txn, GError **error)
{
  MDB_cursor *cursor;
  MDB_val key, val;
  int rc;
  gboolean ok = TRUE;

  rc = mdb_cursor_open (txn, ds->dbi, &cursor);
  if (rc != 0)
    {
      set_lmdb_error (error, ds->path, "opening a cursor", rc);
      return FALSE;
    }
  for (int end = 0; end < 2 && ok; end++)
    {
      guint64 want = end ? ds->count - 1 : 0;
      rc = mdb_cursor_get (cursor, &key, &val, end ? MDB_LAST : MDB_FIRST);
      if (rc != 0)
        {
          set_lmdb_error (error, ds->path, "reading", rc);
          ok = FALSE;
        }
      else if (!key_is (&key, want))
        {
          char *got = key_to_string (&key);
          char expect[SHOAL_DATASET_KEY_LEN + 1];
          shoal_dataset_format_key (want, expect);
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                       "%s: not a shoal dataset: its %s key is '%s', expected '%s' "
                       "(keys are the indices 0..%" G_GUINT64_FORMAT " written %%010u)",
                       ds->path, end ? "last" : "first", got, expect, ds->count - 1);
          g_free (got);
          ok = FALSE;
        }
    }
  mdb_cursor_close (cursor);
  return ok;
}

ShoalDataset *
shoal_dataset_open (const char *path, GError **error)
{
  ShoalDataset *ds;
  struct stat st;
  char *data_file;
  gboolean has_data;
  MDB_txn *txn = NULL;
  MDB_stat ms;
  int rc;

  shoal_record_types_init ();
  if (stat (path, &st) != 0)
    {
      int e = errno;
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA, "%s: cannot open dataset: %s%s", path,
                   g_strerror (e), e == ENOENT ? " (make it with `shoal import`)" : "");
      return NULL;
    }
  if (!S_ISDIR (st.st_mode))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                   "%s: not a dataset: a dataset is a directory holding data.mdb", path);
      return NULL;
    }
  data_file = g_build_filename (path, "data.mdb", NULL);
  has_data = g_file_test (data_file, G_FILE_TEST_IS_REGULAR);
  g_free (data_file);
  if (!has_data)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                   "%s: not an LMDB dataset: the directory has no data.mdb", path);
      return NULL;
    }

  ds = g_new0 (ShoalDataset, 1);
  ds->refs = 1;
  ds->path = g_strdup (path);
  if (!shoal_lmdb_check_meta_pages (path, error))
    goto fail;
  rc = mdb_env_create (&ds->env);
  if (rc == 0)
    rc = shoal_lmdb_map_pages_in_use (ds->env);
  if (rc == 0)
    rc = mdb_env_open (ds->env, path, MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS, 0664);
  if (rc != 0)
    {
      /* ENOMEM: the map did not fit in the address space (ulimit -v) */
      set_lmdb_error (error, path, rc == ENOMEM ? "mapping the file" : "not an LMDB dataset", rc);
      goto fail;
    }
  /* before any page is read through the map: a short file is a SIGBUS there */
  if (!shoal_lmdb_check_size (ds->env, path, error))
    goto fail;
  /* and one cut short later says so (data/lmdb_map_guard.h) */
  shoal_lmdb_map_guard (ds->env, path);
  rc = mdb_txn_begin (ds->env, NULL, MDB_RDONLY, &txn);
  if (rc == 0)
    rc = mdb_dbi_open (txn, NULL, 0, &ds->dbi);
  if (rc == 0)
    rc = mdb_stat (txn, ds->dbi, &ms);
  if (rc != 0)
    {
      set_lmdb_error (error, path, "reading", rc);
      goto fail;
    }
  ds->count = ms.ms_entries;
  if (ds->count == 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA, "%s: dataset is empty (0 records)", path);
      goto fail;
    }
  if (!check_keys (ds, txn, error))
    goto fail;
  /* committing a read txn keeps the dbi handle open for the env's life */
  rc = mdb_txn_commit (txn);
  txn = NULL;
  if (rc != 0)
    {
      set_lmdb_error (error, path, "reading", rc);
      goto fail;
    }
  return ds;

fail:
  if (txn != NULL)
    mdb_txn_abort (txn);
  shoal_lmdb_map_unguard (ds->env);
  if (ds->env != NULL)
    mdb_env_close (ds->env);
  g_free (ds->path);
  g_free (ds);
  return NULL;
}

ShoalDataset *
shoal_dataset_ref (ShoalDataset *ds)
{
  g_atomic_int_inc (&ds->refs);
  return ds;
}

void
shoal_dataset_unref (ShoalDataset *ds)
{
  if (ds == NULL || !g_atomic_int_dec_and_test (&ds->refs))
    return;
  shoal_lmdb_map_unguard (ds->env);
  mdb_env_close (ds->env);
  g_free (ds->path);
  g_free (ds);
}

const char *
shoal_dataset_path (const ShoalDataset *ds)
{
  return ds->path;
}

guint64
shoal_dataset_count (const ShoalDataset *ds)
{
  return ds->count;
}

ShoalDatasetCursor *
shoal_dataset_cursor_new (ShoalDataset *ds, GError **error)
{
  ShoalDatasetCursor *cur = g_new0 (ShoalDatasetCursor, 1);
  int rc;

  rc = mdb_txn_begin (ds->env, NULL, MDB_RDONLY, &cur->txn);
  if (rc == 0)
    rc = mdb_cursor_open (cur->txn, ds->dbi, &cur->cursor);
  if (rc != 0)
    {
      set_lmdb_error (error, ds->path, "starting a read transaction", rc);
      if (cur->txn != NULL)
        mdb_txn_abort (cur->txn);
      g_free (cur);
      return NULL;
    }
  cur->ds = shoal_dataset_ref (ds);
  return cur;
}

void
shoal_dataset_cursor_free (ShoalDatasetCursor *cur)
{
  if (cur == NULL)
    return;
  mdb_cursor_close (cur->cursor);
  mdb_txn_abort (cur->txn);
  shoal_dataset_unref (cur->ds);
  g_free (cur);
}

static void
fill_item (ShoalDatasetItem *item, guint64 index, const MDB_val *val)
{
  item->index = index;
  shoal_dataset_format_key (index, item->key);
  item->data = val->mv_data;
  item->size = val->mv_size;
}

gboolean
shoal_dataset_cursor_get (ShoalDatasetCursor *cur, guint64 index, ShoalDatasetItem *item,
                          GError **error)
{
  char k[SHOAL_DATASET_KEY_LEN + 1];
  MDB_val key, val;
  int rc;

  if (index >= cur->ds->count)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                   "%s: no record %" G_GUINT64_FORMAT ", the dataset holds %" G_GUINT64_FORMAT,
                   cur->ds->path, index, cur->ds->count);
      return FALSE;
    }
  shoal_dataset_format_key (index, k);
  key.mv_size = SHOAL_DATASET_KEY_LEN;
  key.mv_data = k;
  rc = mdb_get (cur->txn, cur->ds->dbi, &key, &val);
  if (rc != 0)
    {
      char *doing = g_strdup_printf ("reading key %s", k);
      set_lmdb_error (error, cur->ds->path, doing, rc);
      g_free (doing);
      return FALSE;
    }
  fill_item (item, index, &val);
  return TRUE;
}

void
shoal_dataset_cursor_seek (ShoalDatasetCursor *cur, guint64 index)
{
  cur->next = MIN (index, cur->ds->count);
  cur->positioned = FALSE;
}

gboolean
shoal_dataset_cursor_next (ShoalDatasetCursor *cur, ShoalDatasetItem *item, GError **error)
{
  MDB_val key, val;
  int rc;

  if (cur->next >= cur->ds->count)
    return FALSE;
  if (cur->positioned)
    rc = mdb_cursor_get (cur->cursor, &key, &val, MDB_NEXT);
  else
    {
      char k[SHOAL_DATASET_KEY_LEN + 1];
      shoal_dataset_format_key (cur->next, k);
      key.mv_size = SHOAL_DATASET_KEY_LEN;
      key.mv_data = k;
      rc = mdb_cursor_get (cur->cursor, &key, &val, MDB_SET_KEY);
    }
  if (rc == 0 && !key_is (&key, cur->next))
    rc = MDB_NOTFOUND;   /* keys not contiguous: the file changed under us */
  if (rc != 0)
    {
      char k[SHOAL_DATASET_KEY_LEN + 1];
      char *doing;
      shoal_dataset_format_key (cur->next, k);
      doing = g_strdup_printf ("reading key %s", k);
      set_lmdb_error (error, cur->ds->path, doing, rc);
      g_free (doing);
      cur->positioned = FALSE;
      return FALSE;
    }
  fill_item (item, cur->next, &val);
  cur->next++;
  cur->positioned = TRUE;
  return TRUE;
}

gboolean
shoal_dataset_cursor_read_record (ShoalDatasetCursor *cur, ShoalRecordCodec *codec,
                                  guint64 index, ShoalRecordView *rec, GError **error)
{
  ShoalDatasetItem item;
  char what[512];

  if (!shoal_dataset_cursor_get (cur, index, &item, error))
    return FALSE;
  g_snprintf (what, sizeof what, "%s: key %s", cur->ds->path, item.key);
  return shoal_record_codec_decode (codec, item.data, item.size, what, rec, error);
}

/* ---- writing ------------------------------------------------------------ */

struct _ShoalDatasetWriter {
  char *path;
  MDB_env *env;
  MDB_dbi dbi;
  size_t map_size;
  guint commit_every;
  guint n_grows;
  guint64 committed;        /* records in the file */
  GByteArray *pending;      /* values of the batch not yet committed */
  GArray *ends;             /* size_t end offset of each pending value */
  ShoalRecordCodec *codec;  /* made on first put_record */
};

static size_t
align_map (size_t size)
{
  return MAX (MAP_ALIGN, (size + MAP_ALIGN - 1) / MAP_ALIGN * MAP_ALIGN);
}

ShoalDatasetWriter *
shoal_dataset_writer_new_full (const char *path, size_t map_size, guint commit_every,
                               GError **error)
{
  ShoalDatasetWriter *w;
  MDB_txn *txn = NULL;
  MDB_stat ms;
  int rc;

  if (g_mkdir_with_parents (path, 0775) != 0)
    {
      int e = errno;
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: cannot create directory: %s", path,
                   g_strerror (e));
      return NULL;
    }
  w = g_new0 (ShoalDatasetWriter, 1);
  w->path = g_strdup (path);
  w->map_size = align_map (map_size);
  w->commit_every = MAX (commit_every, 1u);
  w->pending = g_byte_array_new ();
  w->ends = g_array_new (FALSE, FALSE, sizeof (size_t));

  if (!shoal_lmdb_check_meta_pages (path, error))
    goto fail;
  rc = mdb_env_create (&w->env);
  if (rc == 0)
    rc = mdb_env_set_mapsize (w->env, w->map_size);
  /* durability comes from one mdb_env_sync in _finish, not per commit */
  if (rc == 0)
    rc = mdb_env_open (w->env, path, MDB_NOSYNC, 0664);
  if (rc != 0)
    {
      set_lmdb_error (error, path, "cannot create an LMDB dataset", rc);
      goto fail;
    }
  if (!shoal_lmdb_check_size (w->env, path, error))
    goto fail;
  rc = mdb_txn_begin (w->env, NULL, 0, &txn);
  if (rc == 0)
    rc = mdb_dbi_open (txn, NULL, 0, &w->dbi);
  if (rc == 0)
    rc = mdb_stat (txn, w->dbi, &ms);
  if (rc == 0)
    {
      rc = mdb_txn_commit (txn);
      txn = NULL;
    }
  if (rc != 0)
    {
      set_lmdb_error (error, path, "cannot create an LMDB dataset", rc);
      goto fail;
    }
  if (ms.ms_entries > 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                   "%s: already holds %zu records; not writing over them", path,
                   (size_t) ms.ms_entries);
      goto fail;
    }
  return w;

fail:
  if (txn != NULL)
    mdb_txn_abort (txn);
  shoal_dataset_writer_free (w);
  return NULL;
}

static gboolean
grow_map (ShoalDatasetWriter *w, GError **error)
{
  int rc;

  if (w->map_size >= MAP_MAX)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: dataset map would exceed %zu GiB",
                   w->path, MAP_MAX >> 30);
      return FALSE;
    }
  rc = mdb_env_set_mapsize (w->env, w->map_size * 2);
  if (rc != 0)
    {
      set_lmdb_error (error, w->path, "growing the map", rc);
      return FALSE;
    }
  w->map_size *= 2;
  w->n_grows++;
  g_debug ("%s: map grown to %zu MiB", w->path, w->map_size >> 20);
  return TRUE;
}

/* Writes the pending batch in one transaction, growing the map and
 * starting over as often as it is full. */
static gboolean
commit_pending (ShoalDatasetWriter *w, GError **error)
{
  guint n = w->ends->len;

  if (n == 0)
    return TRUE;
  for (;;)
    {
      MDB_txn *txn;
      int rc = mdb_txn_begin (w->env, NULL, 0, &txn);
      size_t start = 0;

      for (guint i = 0; rc == 0 && i < n; i++)
        {
          char k[SHOAL_DATASET_KEY_LEN + 1];
          size_t end = g_array_index (w->ends, size_t, i);
          MDB_val key = { SHOAL_DATASET_KEY_LEN, k };
          MDB_val val = { end - start, w->pending->data + start };

          shoal_dataset_format_key (w->committed + i, k);
          rc = mdb_put (txn, w->dbi, &key, &val, MDB_APPEND);
          start = end;
          if (rc != 0)
            mdb_txn_abort (txn);
        }
      if (rc == 0)
        rc = mdb_txn_commit (txn);   /* frees txn whatever it returns */
      if (rc == MDB_MAP_FULL)
        {
          if (!grow_map (w, error))
            return FALSE;
          continue;
        }
      if (rc == EIO && shoal_lmdb_free_bytes (w->path) < w->pending->len + (size_t) (64 << 10))
        rc = ENOSPC;   /* LMDB's word for a short write, which a full disk makes */
      if (rc != 0)
        {
          set_lmdb_error (error, w->path, "writing", rc);
          return FALSE;
        }
      break;
    }
  w->committed += n;
  g_byte_array_set_size (w->pending, 0);
  g_array_set_size (w->ends, 0);
  return TRUE;
}

gboolean
shoal_dataset_writer_put (ShoalDatasetWriter *w, const void *data, size_t size, GError **error)
{
  size_t end;

  if (w->committed + w->ends->len >= SHOAL_DATASET_MAX_RECORDS)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA, "%s: too many records (at most %"
                   G_GUINT64_FORMAT ")", w->path, SHOAL_DATASET_MAX_RECORDS);
      return FALSE;
    }
  g_byte_array_append (w->pending, data, (guint) size);
  end = w->pending->len;
  g_array_append_val (w->ends, end);
  if (w->ends->len >= w->commit_every)
    return commit_pending (w, error);
  return TRUE;
}

gboolean
shoal_dataset_writer_put_record (ShoalDatasetWriter *w, const ShoalRecordView *rec,
                                 GError **error)
{
  const guint8 *bytes;
  gsize len;

  if (w->codec == NULL)
    w->codec = shoal_record_codec_new ();
  if (!shoal_record_codec_encode (w->codec, rec, &bytes, &len, error))
    return FALSE;
  return shoal_dataset_writer_put (w, bytes, len, error);
}

guint64
shoal_dataset_writer_count (const ShoalDatasetWriter *w)
{
  return w->committed + w->ends->len;
}

size_t
shoal_dataset_writer_map_size (const ShoalDatasetWriter *w)
{
  return w->map_size;
}

guint
shoal_dataset_writer_n_grows (const ShoalDatasetWriter *w)
{
  return w->n_grows;
}

gboolean
shoal_dataset_writer_finish (ShoalDatasetWriter *w, GError **error)
{
  int rc;

  if (!commit_pending (w, error))
    return FALSE;
  rc = mdb_env_sync (w->env, 1);
  if (rc != 0)
    {
      set_lmdb_error (error, w->path, "syncing to disk", rc);
      return FALSE;
    }
  return TRUE;
}

void
shoal_dataset_writer_free (ShoalDatasetWriter *w)
{
  if (w == NULL)
    return;
  if (w->env != NULL)
    mdb_env_close (w->env);
  shoal_record_codec_free (w->codec);
  g_byte_array_unref (w->pending);
  g_array_unref (w->ends);
  g_free (w->path);
  g_free (w);
}
