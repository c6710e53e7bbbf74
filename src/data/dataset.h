/* LMDB datasets: a directory holding data.mdb whose keys are the record
 * indices 0..N-1 written "%010u" (fixed width, so LMDB's byte order is
 * index order) and whose values are serialised Records (data/record.h).
 *
 * Readers open the environment MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS: no lock
 * file is touched, so any number of threads and processes can read the
 * same directory, even on a read-only file system.  The price is that a
 * dataset must not be written while someone reads it (datasets are
 * written once, by `shoal import`).
 *
 * LMDB values live in the memory map: pointers handed out by a cursor are
 * valid until that cursor is freed or rewound. */
#ifndef SHOAL_DATASET_H
#define SHOAL_DATASET_H

#include <glib.h>
#include <stddef.h>

#include "data/record.h"

G_BEGIN_DECLS

#define SHOAL_DATASET_KEY_LEN 10
#define SHOAL_DATASET_MAX_RECORDS G_GUINT64_CONSTANT (9999999999)

/* Writes the key of record `index` ("0000000042") into key, NUL-terminated. */
void shoal_dataset_format_key (guint64 index, char key[SHOAL_DATASET_KEY_LEN + 1]);

/* ---- reading ------------------------------------------------------------ */

typedef struct _ShoalDataset ShoalDataset;

/* Opens the dataset in directory `path`.  Fails (SHOAL_ERROR_DATA) naming
 * the path when it is missing, not a directory, not an LMDB environment,
 * empty, or when its keys are not 0..N-1 in the fixed-width form.
 * Safe to call from several threads.  Release with shoal_dataset_unref. */
ShoalDataset *shoal_dataset_open (const char *path, GError **error);
ShoalDataset *shoal_dataset_ref (ShoalDataset *ds);
void shoal_dataset_unref (ShoalDataset *ds);

const char *shoal_dataset_path (const ShoalDataset *ds);   /* borrowed */
guint64 shoal_dataset_count (const ShoalDataset *ds);

typedef struct {
  guint64 index;
  char key[SHOAL_DATASET_KEY_LEN + 1];
  const void *data;      /* in the memory map; see the cursor's lifetime rule */
  size_t size;
} ShoalDatasetItem;

/* A read transaction plus a cursor.  Use from one thread at a time (any
 * thread: the environment is MDB_NOTLS); open one per reading thread. */
typedef struct _ShoalDatasetCursor ShoalDatasetCursor;

/* Holds a reference on ds.  NULL with error set when LMDB refuses. */
ShoalDatasetCursor *shoal_dataset_cursor_new (ShoalDataset *ds, GError **error);
void shoal_dataset_cursor_free (ShoalDatasetCursor *cur);

/* Random access: fills *item with record `index`. */
gboolean shoal_dataset_cursor_get (ShoalDatasetCursor *cur, guint64 index,
                                   ShoalDatasetItem *item, GError **error);

/* Sequential access from the first record (or from where _seek put it).
 * Returns TRUE with *item filled, FALSE with error unset at the end,
 * FALSE with error set on failure. */
gboolean shoal_dataset_cursor_next (ShoalDatasetCursor *cur, ShoalDatasetItem *item,
                                    GError **error);
/* The next _next returns record `index` (index == count: at the end). */
void shoal_dataset_cursor_seek (ShoalDatasetCursor *cur, guint64 index);

/* Decodes record `index` with codec: get + shoal_record_codec_decode with
 * the error naming path and key.  *rec follows the codec's lifetime rule. */
gboolean shoal_dataset_cursor_read_record (ShoalDatasetCursor *cur, ShoalRecordCodec *codec,
                                           guint64 index, ShoalRecordView *rec,
                                           GError **error);

/* ---- writing ------------------------------------------------------------ */

typedef struct _ShoalDatasetWriter ShoalDatasetWriter;

#define SHOAL_DATASET_DEFAULT_MAP_SIZE ((size_t) 256 << 20)
#define SHOAL_DATASET_DEFAULT_COMMIT_EVERY 1000

/* Creates directory `path` if needed and a new, empty dataset in it; fails
 * when it already holds records.  Records are committed every
 * `commit_every` puts; when the map is full it is doubled and the pending
 * batch written again.  `map_size` is the starting map size (rounded up to
 * 64 KiB), mostly for tests: the file grows only as records are added. */
ShoalDatasetWriter *shoal_dataset_writer_new_full (const char *path, size_t map_size,
                                                   guint commit_every, GError **error);
static inline ShoalDatasetWriter *
shoal_dataset_writer_new (const char *path, GError **error)
{
  return shoal_dataset_writer_new_full (path, SHOAL_DATASET_DEFAULT_MAP_SIZE,
                                        SHOAL_DATASET_DEFAULT_COMMIT_EVERY, error);
}

/* Appends one value (copied) under the next index. */
gboolean shoal_dataset_writer_put (ShoalDatasetWriter *w, const void *data, size_t size,
                                   GError **error);
/* Encodes rec and appends it. */
gboolean shoal_dataset_writer_put_record (ShoalDatasetWriter *w, const ShoalRecordView *rec,
                                          GError **error);
guint64 shoal_dataset_writer_count (const ShoalDatasetWriter *w);   /* records put so far */
size_t shoal_dataset_writer_map_size (const ShoalDatasetWriter *w); /* current map size */
guint shoal_dataset_writer_n_grows (const ShoalDatasetWriter *w);   /* map growths so far */

/* Commits what is pending and syncs the file to disk.  The writer must
 * still be freed. */
gboolean shoal_dataset_writer_finish (ShoalDatasetWriter *w, GError **error);
/* Closes; records put since the last commit are dropped unless finished. */
void shoal_dataset_writer_free (ShoalDatasetWriter *w);

G_END_DECLS

#endif
