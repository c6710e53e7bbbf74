/* The SIGBUS of a data file cut short while mapped; see
 * data/lmdb_map_guard.h. */
#include "data/lmdb_map_guard.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define SLOTS 1024
#define MESSAGE_MAX 600

typedef struct {
  gint used;                 /* atomic: 1 while the slot describes a live map */
  const char *begin, *end;
  char message[MESSAGE_MAX];
  size_t message_len;
} Slot;

static Slot slots[SLOTS];
static struct sigaction previous;

static void
on_sigbus (int sig, siginfo_t *info, void *context)
{
  const char *at = info != NULL ? info->si_addr : NULL;
  for (int i = 0; at != NULL && i < SLOTS; i++)
    if (g_atomic_int_get (&slots[i].used) && at >= slots[i].begin && at < slots[i].end)
      {
        if (write (STDERR_FILENO, slots[i].message, slots[i].message_len) < 0)
          _exit (1);
        _exit (1);
      }
  /* not ours: as it would have ended without this handler */
  sigaction (SIGBUS, &previous, NULL);
  if (previous.sa_flags & SA_SIGINFO && previous.sa_sigaction != NULL)
    previous.sa_sigaction (sig, info, context);
  else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN)
    previous.sa_handler (sig);
  /* SIG_DFL: returning retries the access, which now ends the process */
}

static void
install (void)
{
  static gsize once;
  if (g_once_init_enter (&once))
    {
      struct sigaction sa;
      memset (&sa, 0, sizeof sa);
      sa.sa_sigaction = on_sigbus;
      sa.sa_flags = SA_SIGINFO;
      sigemptyset (&sa.sa_mask);
      sigaction (SIGBUS, &sa, &previous);
      g_once_init_leave (&once, 1);
    }
}

/* Where the file behind fd is mapped in this process: LMDB does not say
 * (mdb_env_info's me_mapaddr is only the address asked for with
 * MDB_FIXEDMAP), /proc/self/maps does.  FALSE when no map is found. */
static gboolean
find_map (int fd, const char **begin, const char **end)
{
  struct stat st;
  char *maps = NULL;
  if (fstat (fd, &st) != 0 || !g_file_get_contents ("/proc/self/maps", &maps, NULL, NULL))
    return FALSE;
  gboolean found = FALSE;
  char **lines = g_strsplit (maps, "\n", -1);
  /* one map, which the kernel may show as several adjacent areas */
  for (int i = 0; lines[i] != NULL; i++)
    {
      unsigned long long from, to, inode;
      unsigned major, minor;
      if (sscanf (lines[i], "%llx-%llx %*s %*s %x:%x %llu", &from, &to, &major, &minor, &inode) == 5
          && inode == (unsigned long long) st.st_ino && makedev (major, minor) == st.st_dev)
        {
          const char *b = (const char *) (gsize) from, *e = (const char *) (gsize) to;
          *begin = found ? MIN (*begin, b) : b;
          *end = found ? MAX (*end, e) : e;
          found = TRUE;
        }
    }
  g_strfreev (lines);
  g_free (maps);
  return found;
}

void
shoal_lmdb_map_guard (MDB_env *env, const char *path)
{
  int fd = -1;
  const char *begin = NULL, *end = NULL;
  if (env == NULL || mdb_env_get_fd (env, &fd) != 0 || !find_map (fd, &begin, &end))
    return;
  install ();
  for (int i = 0; i < SLOTS; i++)
    {
      Slot *s = &slots[i];
      /* 2: being filled, not yet seen by the handler */
      if (!g_atomic_int_compare_and_exchange (&s->used, 0, 2))
        continue;
      s->begin = begin;
      s->end = end;
      int n = g_snprintf (s->message, sizeof s->message,
                          "shoal: %s/data.mdb: the file shrank while this process read it (truncated or "
                          "rewritten by another program?); exiting\n", path);
      s->message_len = MIN ((size_t) MAX (n, 0), sizeof s->message - 1);
      g_atomic_int_set (&s->used, 1);
      return;
    }
}

void
shoal_lmdb_map_unguard (MDB_env *env)
{
  int fd = -1;
  const char *begin = NULL, *end = NULL;
  if (env == NULL || mdb_env_get_fd (env, &fd) != 0 || fd < 0 || !find_map (fd, &begin, &end))
    return;
  for (int i = 0; i < SLOTS; i++)
    if (g_atomic_int_get (&slots[i].used) == 1 && slots[i].begin == begin)
      {
        g_atomic_int_set (&slots[i].used, 0);
        return;
      }
}
