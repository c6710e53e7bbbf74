/* Checks on an LMDB environment's data file that LMDB itself leaves to
 * the caller.  LMDB maps data.mdb and reads its pages through the map:
 * a file cut short (a partial copy, a full disk, a crash of the copying
 * tool) makes the first read past its end a SIGBUS, not an error code.
 *
 * Also: the free space of a store's file system, for write errors that
 * LMDB reports as EIO when a write came back short because the disk was
 * full. */
#ifndef SHOAL_LMDB_FILE_H
#define SHOAL_LMDB_FILE_H

#include <glib.h>
#include <lmdb.h>

G_BEGIN_DECLS

/* Call before mdb_env_open() on an existing environment: DIR/data.mdb
 * must hold LMDB's two meta pages (pages are at least 4 KiB), or LMDB
 * answers with a puzzling code (EBADF for an empty file, MDB_INVALID).
 * Returns FALSE with SHOAL_ERROR_DATA naming the file; a missing file is
 * left for the caller (LMDB creates it when asked to). */
gboolean shoal_lmdb_check_meta_pages (const char *dir, GError **error);

/* Call before mdb_env_open() on an environment opened MDB_RDONLY that no
 * process writes while it is open (a dataset): LMDB then maps the pages
 * in use and no more, where it would otherwise map the size the writer
 * last set (256 MiB and up however little the file holds), address space
 * every open dataset of every worker takes, and that counts against
 * ulimit -v.  A writer growing the file later makes the reader's next
 * transaction fail with MDB_MAP_RESIZED, never a read past the map. */
int shoal_lmdb_map_pages_in_use (MDB_env *env);

/* Call right after mdb_env_open() and before the first transaction:
 * mdb_env_open has read the two meta pages with pread() (a file too short
 * for them fails there with MDB_INVALID), and no data page has been read
 * through the map yet.  Returns FALSE with SHOAL_ERROR_DATA naming
 * DIR/data.mdb when the file does not reach the last page its newest meta
 * page says is in use. */
gboolean shoal_lmdb_check_size (MDB_env *env, const char *dir, GError **error);

/* Makes sure the environment's data file has disk blocks for `extra`
 * bytes past the last page in use (fallocate, keeping the size LMDB sees;
 * file systems without it are left alone), so a write transaction of that
 * size cannot run out of space halfway.  Returns FALSE with
 * SHOAL_ERROR_IO, "needs 3.2 MiB more on disk: No space left on device",
 * when the file system cannot hold them (the caller names the file). */
gboolean shoal_lmdb_reserve_disk (MDB_env *env, size_t extra, GError **error);

/* Free bytes for an unprivileged writer on the file system of path, or
 * G_MAXUINT64 when it cannot be told. */
guint64 shoal_lmdb_free_bytes (const char *path);

G_END_DECLS

#endif
