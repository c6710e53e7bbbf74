/* One live run per workspace; see workspace/workspace_lock.h. */
#include "workspace/workspace_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "rpc/shm_region.h"

#define LOCK_NAME "lock"
#define INHERITED_ENV "SHOAL_WORKSPACE_LOCK_FD"

typedef struct {
  dev_t dev;
  ino_t ino;
  int fd;
  gboolean inherited;   /* the launcher's descriptor: never closed here */
} Held;

static GMutex held_lock;
static GSList *held;    /* Held *, every workspace this process holds */

static Held *
find_held (dev_t dev, ino_t ino)
{
  for (GSList *l = held; l != NULL; l = l->next)
    {
      Held *h = l->data;
      if (h->dev == dev && h->ino == ino)
        return h;
    }
  return NULL;
}

static void
add_held (const struct stat *st, int fd, gboolean inherited)
{
  Held *h = g_new (Held, 1);
  *h = (Held) { st->st_dev, st->st_ino, fd, inherited };
  held = g_slist_prepend (held, h);
}

/* A process's start (clock ticks after boot, /proc/PID/stat field 22):
 * with the boot id it tells a live holder from a reused pid.  0 unknown. */
static guint64
process_start (pid_t pid)
{
  char *path = g_strdup_printf ("/proc/%d/stat", (int) pid);
  char *text = NULL;
  guint64 start = 0;
  if (g_file_get_contents (path, &text, NULL, NULL))
    {
      /* the name (field 2) may hold spaces and ')': fields count from the last ')' */
      const char *p = strrchr (text, ')');
      for (int field = 2; p != NULL && field < 22; field++)
        p = strchr (p + 1, ' ');
      if (p != NULL)
        start = g_ascii_strtoull (p + 1, NULL, 10);
    }
  g_free (text);
  g_free (path);
  return start;
}

/* The holder's record: host, boot, pid, its start and the wall time. */
static void
write_record (int fd)
{
  GKeyFile *kf = g_key_file_new ();
  GDateTime *now = g_date_time_new_now_local ();
  char *since = g_date_time_format_iso8601 (now);
  g_key_file_set_string (kf, "run", "host", g_get_host_name ());
  g_key_file_set_string (kf, "run", "boot", shoal_shm_host_id ());
  g_key_file_set_int64 (kf, "run", "pid", getpid ());
  g_key_file_set_uint64 (kf, "run", "start", process_start (getpid ()));
  g_key_file_set_string (kf, "run", "since", since);
  gsize len = 0;
  char *text = g_key_file_to_data (kf, &len, NULL);
  /* a record is only for messages: a short write leaves a vaguer one */
  if (ftruncate (fd, 0) != 0 || pwrite (fd, text, len, 0) != (ssize_t) len)
    g_debug ("workspace lock record: %s", g_strerror (errno));
  g_free (text);
  g_free (since);
  g_date_time_unref (now);
  g_key_file_free (kf);
}

typedef struct {
  char *host, *since;
  gint64 pid;
  guint64 start;
  gboolean this_boot;   /* this host, this boot: the pid can be checked */
} Record;

static gboolean
read_record (int fd, Record *r)
{
  *r = (Record) { 0 };
  char buf[1024];
  ssize_t n = pread (fd, buf, sizeof buf - 1, 0);
  if (n <= 0)
    return FALSE;
  buf[n] = '\0';
  GKeyFile *kf = g_key_file_new ();
  gboolean ok = g_key_file_load_from_data (kf, buf, (gsize) n, G_KEY_FILE_NONE, NULL);
  if (ok)
    {
      r->host = g_key_file_get_string (kf, "run", "host", NULL);
      r->since = g_key_file_get_string (kf, "run", "since", NULL);
      r->pid = g_key_file_get_int64 (kf, "run", "pid", NULL);
      r->start = g_key_file_get_uint64 (kf, "run", "start", NULL);
      char *boot = g_key_file_get_string (kf, "run", "boot", NULL);
      r->this_boot = r->host != NULL && boot != NULL && strcmp (r->host, g_get_host_name ()) == 0
                     && strcmp (boot, shoal_shm_host_id ()) == 0;
      g_free (boot);
      ok = r->host != NULL && r->pid > 0;
    }
  g_key_file_free (kf);
  return ok;
}

static void
record_clear (Record *r)
{
  g_free (r->host);
  g_free (r->since);
}

/* Whether the recorded process still runs (on this host and boot). */
static gboolean
record_alive (const Record *r)
{
  return r->this_boot && r->pid > 0 && r->pid <= G_MAXINT && kill ((pid_t) r->pid, 0) == 0
         && (r->start == 0 || process_start ((pid_t) r->pid) == r->start);
}

static char *
describe_record (const Record *r)
{
  return g_strdup_printf ("pid %" G_GINT64_FORMAT " on host %s, since %s%s", r->pid, r->host,
                          r->since != NULL ? r->since : "(unknown)",
                          r->this_boot && !record_alive (r) ? "; that process is gone, its ranks still run" : "");
}

/* Who holds the lock that `want` collides with. */
static char *
describe_holder (int fd, const struct flock *want)
{
  struct flock other = *want;
  if (fcntl (fd, F_OFD_GETLK, &other) == 0 && other.l_type != F_UNLCK && other.l_len == 1 && other.l_start >= 1)
    return g_strdup_printf ("rank %lld of a job started by another launcher (mpirun, srun)",
                            (long long) other.l_start - 1);
  Record r;
  char *who = read_record (fd, &r) ? describe_record (&r) : g_strdup ("a process that left no record");
  record_clear (&r);
  return who;
}

/* No locks on this file system: the record decides. */
static gboolean
lock_by_record (const char *path, int fd, int rank, GError **error)
{
  Record r;
  gboolean known = read_record (fd, &r);
  gboolean ok = TRUE;
  if (known && record_alive (&r) && r.pid != getpid ())
    {
      char *who = describe_record (&r);
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO,
                   "%s: the workspace is in use by another run (%s; the file system takes no locks, "
                   "the record says so); wait for it to end or give another --workspace", path, who);
      g_free (who);
      ok = FALSE;
    }
  else
    {
      if (known && !r.this_boot)
        g_warning ("%s: the file system takes no locks: the run recorded there (pid %" G_GINT64_FORMAT
                   " on host %s) cannot be checked from here; taking the workspace", path, r.pid, r.host);
      if (rank < 0)
        write_record (fd);
    }
  record_clear (&r);
  return ok;
}

gboolean
shoal_workspace_lock (const char *workspace, int rank, GError **error)
{
  char *path = g_build_filename (workspace, LOCK_NAME, NULL);
  int fd = open (path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  struct stat st;
  if (fd < 0 || fstat (fd, &st) != 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: cannot open the workspace's lock: %s", path,
                   g_strerror (errno));
      if (fd >= 0)
        close (fd);
      g_free (path);
      return FALSE;
    }
  g_mutex_lock (&held_lock);
  gboolean ok = TRUE;
  struct stat inherited_st;
  const char *env = g_getenv (INHERITED_ENV);
  int inherited = env != NULL ? (int) g_ascii_strtoll (env, NULL, 10) : -1;
  if (find_held (st.st_dev, st.st_ino) != NULL)
    close (fd);
  else if (inherited > 2 && fstat (inherited, &inherited_st) == 0 && inherited_st.st_dev == st.st_dev
           && inherited_st.st_ino == st.st_ino)
    {
      /* the launcher's claim covers its ranks; keeping the descriptor
       * keeps the claim while this rank runs */
      close (fd);
      add_held (&st, inherited, TRUE);
    }
  else
    {
      struct flock want = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = rank < 0 ? 0 : rank + 1,
                            .l_len = rank < 0 ? 0 : 1 };
      if (fcntl (fd, F_OFD_SETLK, &want) == 0)
        {
          if (rank < 0)
            write_record (fd);
        }
      else if (errno == EAGAIN || errno == EACCES)
        {
          char *who = describe_holder (fd, &want);
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO,
                       "%s: the workspace is in use by another run (%s); wait for it to end, stop it, or "
                       "give another --workspace", workspace, who);
          g_free (who);
          ok = FALSE;
        }
      else if (errno == ENOLCK || errno == EOPNOTSUPP || errno == EINVAL)
        ok = lock_by_record (path, fd, rank, error);
      else
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: cannot lock: %s", path, g_strerror (errno));
          ok = FALSE;
        }
      if (ok)
        add_held (&st, fd, FALSE);
      else
        close (fd);
    }
  g_mutex_unlock (&held_lock);
  g_free (path);
  return ok;
}

static Held *
held_for (const char *workspace)
{
  char *path = g_build_filename (workspace, LOCK_NAME, NULL);
  struct stat st;
  Held *h = stat (path, &st) == 0 ? find_held (st.st_dev, st.st_ino) : NULL;
  g_free (path);
  return h;
}

int
shoal_workspace_lock_fd (const char *workspace)
{
  g_mutex_lock (&held_lock);
  Held *h = held_for (workspace);
  int fd = h != NULL ? h->fd : -1;
  g_mutex_unlock (&held_lock);
  return fd;
}

void
shoal_workspace_unlock (const char *workspace)
{
  g_mutex_lock (&held_lock);
  Held *h = held_for (workspace);
  if (h != NULL && !h->inherited)
    {
      /* closing the only descriptor of the description drops its lock */
      close (h->fd);
      held = g_slist_remove (held, h);
      g_free (h);
    }
  g_mutex_unlock (&held_lock);
}
