/* The walk uses openat/fstatat on folder descriptors with
 * AT_SYMLINK_NOFOLLOW and O_NOFOLLOW: what it finds is under the root as
 * the kernel sees it, not as a path string says. */
#include "dashboard/runs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

/* Folders below a root: ROOT/runs/SCHEME-rN/previous/N is 3 down. */
#define MAX_DEPTH 4

typedef struct {
  char *name;   /* the root's name in run ids */
  char *dir;    /* resolved */
} Root;

struct _ShoalRuns {
  GArray *roots;          /* Root */
  GPtrArray *runs;        /* ShoalRun, in the order found (sorted by id) */
  GPtrArray *compares;    /* ShoalCompareDir */
};

static void
run_free (gpointer p)
{
  ShoalRun *r = p;
  g_free (r->id);
  g_free (r->dir);
  g_free (r->compare);
  shoal_tail_free (r->metrics);
  g_free (r);
}

static void
compare_free (gpointer p)
{
  ShoalCompareDir *c = p;
  g_free (c->id);
  g_free (c->dir);
  g_free (c);
}

ShoalRuns *
shoal_runs_new (char **dirs, GError **error)
{
  ShoalRuns *runs = g_new0 (ShoalRuns, 1);
  runs->roots = g_array_new (FALSE, TRUE, sizeof (Root));
  runs->runs = g_ptr_array_new_with_free_func (run_free);
  runs->compares = g_ptr_array_new_with_free_func (compare_free);
  for (int i = 0; dirs[i] != NULL; i++)
    {
      char *real = realpath (dirs[i], NULL);
      struct stat st;
      if (real == NULL || stat (real, &st) != 0 || !S_ISDIR (st.st_mode))
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: %s", dirs[i],
                       real == NULL ? g_strerror (errno) : "not a folder");
          free (real);
          shoal_runs_free (runs);
          return NULL;
        }
      /* the root's name: its folder's name, made unique */
      char *base = g_path_get_basename (real);
      char *name = g_strdup (strcmp (base, "/") == 0 ? "root" : base);
      for (int n = 2;; n++)
        {
          gboolean taken = FALSE;
          for (guint j = 0; j < runs->roots->len; j++)
            taken |= strcmp (g_array_index (runs->roots, Root, j).name, name) == 0;
          if (!taken)
            break;
          g_free (name);
          name = g_strdup_printf ("%s~%d", base, n);
        }
      g_free (base);
      Root root = { .name = name, .dir = g_strdup (real) };
      free (real);
      g_array_append_val (runs->roots, root);
    }
  shoal_runs_scan (runs);
  return runs;
}

void
shoal_runs_free (ShoalRuns *runs)
{
  if (runs == NULL)
    return;
  for (guint i = 0; i < runs->roots->len; i++)
    {
      g_free (g_array_index (runs->roots, Root, i).name);
      g_free (g_array_index (runs->roots, Root, i).dir);
    }
  g_array_free (runs->roots, TRUE);
  g_ptr_array_free (runs->runs, TRUE);
  g_ptr_array_free (runs->compares, TRUE);
  g_free (runs);
}

static gboolean
regular_at (int dfd, const char *name)
{
  struct stat st;
  return fstatat (dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG (st.st_mode);
}

static gboolean
folder_at (int dfd, const char *name)
{
  struct stat st;
  return fstatat (dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR (st.st_mode);
}

static ShoalRun *
lookup (GPtrArray *runs, const char *id)
{
  for (guint i = 0; i < runs->len; i++)
    if (strcmp (((ShoalRun *) runs->pdata[i])->id, id) == 0)
      return runs->pdata[i];
  return NULL;
}

static ShoalCompareDir *
lookup_compare (GPtrArray *compares, const char *id)
{
  for (guint i = 0; i < compares->len; i++)
    if (strcmp (((ShoalCompareDir *) compares->pdata[i])->id, id) == 0)
      return compares->pdata[i];
  return NULL;
}

typedef struct {
  ShoalRuns *runs;
  gboolean changed;
} Walk;

/* The folder `dfd` (id, path) and the ones below it. */
static void
walk (Walk *w, int dfd, const char *id, const char *path, int depth)
{
  if (regular_at (dfd, "metrics.jsonl"))
    {
      ShoalRun *r = lookup (w->runs->runs, id);
      if (r == NULL)
        {
          r = g_new0 (ShoalRun, 1);
          r->id = g_strdup (id);
          r->dir = g_strdup (path);
          char *metrics = g_build_filename (path, "metrics.jsonl", NULL);
          r->metrics = shoal_tail_new (metrics);
          g_free (metrics);
          g_ptr_array_add (w->runs->runs, r);
          w->changed = TRUE;
        }
      r->seen = TRUE;
    }
  /* a compare folder: its runs are in runs/ (report.md comes at its end) */
  if (folder_at (dfd, "runs"))
    {
      ShoalCompareDir *c = lookup_compare (w->runs->compares, id);
      if (c == NULL)
        {
          c = g_new0 (ShoalCompareDir, 1);
          c->id = g_strdup (id);
          c->dir = g_strdup (path);
          g_ptr_array_add (w->runs->compares, c);
          w->changed = TRUE;
        }
      c->seen = TRUE;
    }
  if (depth >= MAX_DEPTH)
    return;
  int fd = dup (dfd);
  DIR *d = fd >= 0 ? fdopendir (fd) : NULL;
  if (d == NULL)
    {
      if (fd >= 0)
        close (fd);
      return;
    }
  GPtrArray *names = g_ptr_array_new_with_free_func (g_free);
  struct dirent *e;
  while ((e = readdir (d)) != NULL)
    if (e->d_name[0] != '.' && strcmp (e->d_name, "checkpoint") != 0 && strcmp (e->d_name, "data") != 0)
      g_ptr_array_add (names, g_strdup (e->d_name));
  closedir (d);
  for (guint i = 0; i < names->len; i++)
    {
      const char *name = names->pdata[i];
      int sub = openat (dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub < 0)
        continue;   /* not a folder, or a link */
      char *sub_id = g_strconcat (id, "/", name, NULL);
      char *sub_path = g_build_filename (path, name, NULL);
      walk (w, sub, sub_id, sub_path, depth + 1);
      g_free (sub_id);
      g_free (sub_path);
      close (sub);
    }
  g_ptr_array_free (names, TRUE);
}

static gint
by_id (gconstpointer a, gconstpointer b)
{
  return strcmp ((*(ShoalRun *const *) a)->id, (*(ShoalRun *const *) b)->id);
}

gboolean
shoal_runs_scan (ShoalRuns *runs)
{
  Walk w = { .runs = runs };
  for (guint i = 0; i < runs->runs->len; i++)
    ((ShoalRun *) runs->runs->pdata[i])->seen = FALSE;
  for (guint i = 0; i < runs->compares->len; i++)
    ((ShoalCompareDir *) runs->compares->pdata[i])->seen = FALSE;
  for (guint i = 0; i < runs->roots->len; i++)
    {
      Root *root = &g_array_index (runs->roots, Root, i);
      int fd = open (root->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0)
        continue;
      walk (&w, fd, root->name, root->dir, 0);
      close (fd);
    }
  for (guint i = runs->runs->len; i-- > 0;)
    if (!((ShoalRun *) runs->runs->pdata[i])->seen)
      {
        g_ptr_array_remove_index (runs->runs, i);
        w.changed = TRUE;
      }
  for (guint i = runs->compares->len; i-- > 0;)
    if (!((ShoalCompareDir *) runs->compares->pdata[i])->seen)
      {
        g_ptr_array_remove_index (runs->compares, i);
        w.changed = TRUE;
      }
  if (w.changed)
    {
      g_ptr_array_sort (runs->runs, by_id);
      /* a compare folder's runs: the workspaces right in its runs/ */
      for (guint i = 0; i < runs->runs->len; i++)
        {
          ShoalRun *r = runs->runs->pdata[i];
          g_clear_pointer (&r->compare, g_free);
          const char *runs_part = g_strrstr (r->id, "/runs/");
          if (runs_part == NULL || strchr (runs_part + 6, '/') != NULL)
            continue;
          char *parent = g_strndup (r->id, (gsize) (runs_part - r->id));
          if (lookup_compare (runs->compares, parent) != NULL)
            r->compare = parent;
          else
            g_free (parent);
        }
    }
  return w.changed;
}

gboolean
shoal_runs_poll (ShoalRuns *runs)
{
  gboolean any = FALSE;
  for (guint i = 0; i < runs->runs->len; i++)
    {
      ShoalRun *r = runs->runs->pdata[i];
      guint generation = shoal_tail_generation (r->metrics);
      any |= shoal_tail_poll (r->metrics) > 0 || shoal_tail_generation (r->metrics) != generation;
    }
  return any;
}

guint
shoal_runs_count (const ShoalRuns *runs)
{
  return runs->runs->len;
}

ShoalRun *
shoal_runs_get (const ShoalRuns *runs, guint i)
{
  return runs->runs->pdata[i];
}

guint
shoal_runs_compare_count (const ShoalRuns *runs)
{
  return runs->compares->len;
}

ShoalCompareDir *
shoal_runs_compare_get (const ShoalRuns *runs, guint i)
{
  return runs->compares->pdata[i];
}

/* Why `id` can never name a run, or NULL. */
static const char *
bad_name (const char *id)
{
  if (id == NULL || id[0] == '\0')
    return "no run named";
  if (id[0] == '/')
    return "an absolute path is not a run's name";
  for (const char *p = id; *p; p++)
    if ((unsigned char) *p < 0x20 || *p == '\\')
      return "a run's name has no control characters or backslashes";
  char **parts = g_strsplit (id, "/", -1);
  const char *why = NULL;
  for (int i = 0; parts[i] != NULL && why == NULL; i++)
    if (strcmp (parts[i], "..") == 0)
      why = "'..' leads out of the served folders";
    else if (parts[i][0] == '\0' || strcmp (parts[i], ".") == 0)
      why = "a run's name has no empty or '.' parts";
  g_strfreev (parts);
  return why;
}

ShoalRun *
shoal_runs_find (const ShoalRuns *runs, const char *id, guint *status, const char **why)
{
  if ((*why = bad_name (id)) != NULL)
    {
      *status = 400;
      return NULL;
    }
  ShoalRun *r = lookup (runs->runs, id);
  if (r == NULL)
    {
      *status = 404;
      *why = "no such run under the served folders";
    }
  return r;
}

ShoalCompareDir *
shoal_runs_find_compare (const ShoalRuns *runs, const char *id, guint *status, const char **why)
{
  if ((*why = bad_name (id)) != NULL)
    {
      *status = 400;
      return NULL;
    }
  ShoalCompareDir *c = lookup_compare (runs->compares, id);
  if (c == NULL)
    {
      *status = 404;
      *why = "no such compare folder under the served folders";
    }
  return c;
}

guint
shoal_runs_root_count (const ShoalRuns *runs)
{
  return runs->roots->len;
}

const char *
shoal_runs_root_name (const ShoalRuns *runs, guint i)
{
  return g_array_index (runs->roots, Root, i).name;
}

const char *
shoal_runs_root_dir (const ShoalRuns *runs, guint i)
{
  return g_array_index (runs->roots, Root, i).dir;
}
