/* Guards around LMDB's data file: LMDB trusts that data.mdb holds every
 * page its meta page names (a short file is a SIGBUS on the first read
 * through the map) and reports a write that came back short, the usual
 * face of a full disk, as EIO.  Both checks live here so the dataset
 * reader, the dataset writer and the checkpoint store word them alike. */
#include "data/lmdb_file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "core/error.h"
#include "core/tensor.h"

static char *
data_file (const char *dir)
{
  return g_build_filename (dir, "data.mdb", NULL);
}

/* The smallest page LMDB writes is the smallest OS page, 4 KiB; an
 * environment starts with its two meta pages. */
#define MIN_FILE_SIZE (2 * 4096)

gboolean
shoal_lmdb_check_meta_pages (const char *dir, GError **error)
{
  struct stat fst;
  char *file = data_file (dir);
  gboolean ok = TRUE;

  if (stat (file, &fst) == 0 && S_ISREG (fst.st_mode) && fst.st_size < MIN_FILE_SIZE)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                   "%s: truncated: the file has %" G_GUINT64_FORMAT " bytes, fewer than LMDB's two "
                   "meta pages (%d bytes at least)", file, (guint64) fst.st_size, MIN_FILE_SIZE);
      ok = FALSE;
    }
  g_free (file);
  return ok;
}

int
shoal_lmdb_map_pages_in_use (MDB_env *env)
{
  /* mdb_env_open raises a configured size below the committed data to
   * that size, (last page + 1) x page size; one page is below any file */
  return mdb_env_set_mapsize (env, 4096);
}

gboolean
shoal_lmdb_check_size (MDB_env *env, const char *dir, GError **error)
{
  MDB_envinfo info;
  MDB_stat st;
  struct stat fst;
  char *file = data_file (dir);
  gboolean ok = FALSE;
  int rc;

  rc = mdb_env_info (env, &info);
  if (rc == 0)
    rc = mdb_env_stat (env, &st);
  if (rc != 0)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA, "%s: %s", file, mdb_strerror (rc));
  else if (stat (file, &fst) != 0)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: %s", file, g_strerror (errno));
  else
    {
      guint64 need = ((guint64) info.me_last_pgno + 1) * st.ms_psize;
      if ((guint64) fst.st_size < need)
        g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                     "%s: truncated: the file has %" G_GUINT64_FORMAT " bytes, its pages in use "
                     "end at byte %" G_GUINT64_FORMAT " (a partial copy or a damaged file)",
                     file, (guint64) fst.st_size, need);
      else
        ok = TRUE;
    }
  g_free (file);
  return ok;
}

gboolean
shoal_lmdb_reserve_disk (MDB_env *env, size_t extra, GError **error)
{
  MDB_envinfo info;
  MDB_stat st;
  mdb_filehandle_t fd;
  int rc;

  rc = mdb_env_info (env, &info);
  if (rc == 0)
    rc = mdb_env_stat (env, &st);
  if (rc == 0)
    rc = mdb_env_get_fd (env, &fd);
  if (rc != 0)
    return TRUE;   /* nothing to go by: the write itself will tell */
  off_t start = (off_t) (info.me_last_pgno + 1) * (off_t) st.ms_psize;
  /* KEEP_SIZE: blocks past the end without changing the size LMDB sees */
  if (fallocate (fd, FALLOC_FL_KEEP_SIZE, start, (off_t) extra) == 0)
    return TRUE;
  int e = errno;
  if (e != ENOSPC && e != EDQUOT && e != EFBIG)
    return TRUE;   /* EOPNOTSUPP and the like: no reservation on this file system */
  char *size = shoal_format_bytes (extra);
  g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "needs %s more on disk: %s", size, g_strerror (e));
  g_free (size);
  return FALSE;
}

guint64
shoal_lmdb_free_bytes (const char *path)
{
  struct statvfs vfs;

  if (statvfs (path, &vfs) != 0)
    return G_MAXUINT64;
  return (guint64) vfs.f_bavail * vfs.f_frsize;
}
