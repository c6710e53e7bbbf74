/* Slurm's environment for `shoal proc`; see cluster/slurm.h. */
#include "cluster/slurm.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

#define MAX_HOSTS 65536

static gboolean
bad (GError **error, const char *list, const char *why)
{
  g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "Slurm host list '%s': %s", list, why);
  return FALSE;
}

/* One bracket's ranges ("01-03,7") appended to out as strings. */
static gboolean
expand_ranges (const char *list, const char *ranges, GPtrArray *out, GError **error)
{
  char **parts = g_strsplit (ranges, ",", -1);
  gboolean ok = parts[0] != NULL;
  for (int i = 0; ok && parts[i] != NULL; i++)
    {
      char *dash = strchr (parts[i], '-');
      const char *lo = parts[i], *hi = dash != NULL ? dash + 1 : parts[i];
      if (dash != NULL)
        *dash = '\0';
      guint64 a, b;
      if (*lo == '\0' || *hi == '\0' || !g_ascii_string_to_unsigned (lo, 10, 0, G_MAXUINT32, &a, NULL)
          || !g_ascii_string_to_unsigned (hi, 10, 0, G_MAXUINT32, &b, NULL) || strspn (lo, "0123456789") != strlen (lo)
          || strspn (hi, "0123456789") != strlen (hi))
        ok = bad (error, list, "a range holds something other than numbers");
      else if (a > b)
        ok = bad (error, list, "a range runs backwards");
      else if (b - a >= MAX_HOSTS || out->len + (b - a) >= MAX_HOSTS)
        ok = bad (error, list, "more than 65536 hosts");
      else
        for (guint64 v = a; v <= b; v++)
          g_ptr_array_add (out, g_strdup_printf ("%0*" G_GUINT64_FORMAT, (int) strlen (lo), v));
    }
  if (parts[0] == NULL)
    ok = bad (error, list, "empty brackets");
  g_strfreev (parts);
  return ok;
}

/* One element ("rack[1-2]-n[01-02]") into hosts: the product of its groups. */
static gboolean
expand_element (const char *list, const char *elem, GPtrArray *hosts, GError **error)
{
  GPtrArray *cur = g_ptr_array_new_with_free_func (g_free);
  g_ptr_array_add (cur, g_strdup (""));
  gboolean ok = TRUE;
  for (const char *p = elem; ok && *p != '\0';)
    {
      GPtrArray *pieces = g_ptr_array_new_with_free_func (g_free);
      if (*p == '[')
        {
          const char *close = strchr (p, ']');
          if (close == NULL)
            ok = bad (error, list, "a '[' without its ']'");
          else
            {
              char *ranges = g_strndup (p + 1, (gsize) (close - p - 1));
              ok = expand_ranges (list, ranges, pieces, error);
              g_free (ranges);
              p = close + 1;
            }
        }
      else
        {
          gsize n = strcspn (p, "[]");
          if (n == 0)
            ok = bad (error, list, "a ']' without its '['");
          g_ptr_array_add (pieces, g_strndup (p, n));
          p += n;
        }
      if (ok && (guint64) cur->len * pieces->len > MAX_HOSTS)
        ok = bad (error, list, "more than 65536 hosts");
      GPtrArray *next = g_ptr_array_new_with_free_func (g_free);
      for (guint i = 0; ok && i < cur->len; i++)
        for (guint j = 0; j < pieces->len; j++)
          g_ptr_array_add (next, g_strconcat (cur->pdata[i], pieces->pdata[j], NULL));
      g_ptr_array_free (pieces, TRUE);
      g_ptr_array_free (cur, TRUE);
      cur = next;
    }
  for (guint i = 0; ok && i < cur->len; i++)
    g_ptr_array_add (hosts, g_strdup (cur->pdata[i]));
  g_ptr_array_free (cur, TRUE);
  return ok;
}

char **
shoal_slurm_expand_hostlist (const char *list, GError **error)
{
  GPtrArray *hosts = g_ptr_array_new_with_free_func (g_free);
  gboolean ok = TRUE;
  int depth = 0;
  const char *start = list;
  for (const char *p = list;; p++)
    {
      if (*p == '[')
        depth++;
      else if (*p == ']')
        depth--;
      if (depth < 0 || depth > 1)
        {
          ok = bad (error, list, depth < 0 ? "a ']' without its '['" : "brackets inside brackets");
          break;
        }
      if ((*p == ',' && depth == 0) || *p == '\0')
        {
          char *elem = g_strstrip (g_strndup (start, (gsize) (p - start)));
          if (*elem != '\0')
            ok = expand_element (list, elem, hosts, error);
          g_free (elem);
          start = p + 1;
        }
      if (!ok || *p == '\0')
        break;
    }
  if (ok && depth != 0)
    ok = bad (error, list, "a '[' without its ']'");
  if (ok && hosts->len == 0)
    ok = bad (error, list, "no hosts");
  if (!ok)
    {
      g_ptr_array_free (hosts, TRUE);
      return NULL;
    }
  g_ptr_array_add (hosts, NULL);
  return (char **) g_ptr_array_free (hosts, FALSE);
}

char **
shoal_slurm_hostnames (const char *list, GError **error)
{
  char *scontrol = g_find_program_in_path ("scontrol");
  if (scontrol != NULL)
    {
      const char *argv[] = { scontrol, "show", "hostnames", list, NULL };
      char *out = NULL;
      int status = 0;
      gboolean ran = g_spawn_sync (NULL, (char **) argv, NULL, G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &out, NULL,
                                   &status, NULL);
      g_free (scontrol);
      if (ran && g_spawn_check_wait_status (status, NULL))
        {
          char **hosts = g_strsplit (g_strstrip (out), "\n", -1);
          g_free (out);
          if (hosts[0] != NULL && *hosts[0] != '\0')
            return hosts;
          g_strfreev (hosts);
        }
      else
        g_free (out);
      /* scontrol that fails (no slurm.conf on this node): expand it ourselves */
    }
  return shoal_slurm_expand_hostlist (list, error);
}

int *
shoal_slurm_tasks_per_node (const char *spec, int nnodes, GError **error)
{
  int *counts = g_new0 (int, MAX (nnodes, 1));
  char **parts = g_strsplit (spec, ",", -1);
  int k = 0;
  gboolean ok = TRUE;
  for (int i = 0; ok && parts[i] != NULL; i++)
    {
      char *x = strstr (parts[i], "(x");
      guint64 n, rep = 1;
      if (x != NULL)
        {
          *x = '\0';
          char *end = strchr (x + 2, ')');
          if (end == NULL || end[1] != '\0')
            ok = FALSE;
          else
            {
              *end = '\0';
              ok = g_ascii_string_to_unsigned (x + 2, 10, 1, MAX_HOSTS, &rep, NULL);
            }
        }
      ok = ok && g_ascii_string_to_unsigned (g_strstrip (parts[i]), 10, 0, 1 << 20, &n, NULL);
      for (guint64 r = 0; ok && r < rep; r++)
        {
          if (k >= nnodes)
            ok = FALSE;
          else
            counts[k++] = (int) n;
        }
    }
  g_strfreev (parts);
  if (!ok || k != nnodes)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "Slurm tasks per node '%s': not %d counts like 2(x3),1",
                   spec, nnodes);
      g_free (counts);
      return NULL;
    }
  return counts;
}

char **
shoal_slurm_place_ranks (char **nodes, const int *counts, int ntasks, const char *distribution, GError **error)
{
  int nnodes = (int) g_strv_length (nodes), total = 0;
  for (int i = 0; i < nnodes; i++)
    total += counts[i];
  /* "block", "cyclic", and their forms with a socket and core part ("block:cyclic") */
  gboolean cyclic = distribution != NULL && g_str_has_prefix (distribution, "cyclic");
  if (distribution != NULL && *distribution != '\0' && !cyclic && !g_str_has_prefix (distribution, "block"))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                   "SLURM_DISTRIBUTION=%s: shoal places ranks for block and cyclic only; give --hostfile", distribution);
      return NULL;
    }
  if (total != ntasks)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "Slurm's tasks per node add up to %d, not SLURM_NTASKS=%d",
                   total, ntasks);
      return NULL;
    }
  char **hosts = g_new0 (char *, ntasks + 1);
  int *left = g_memdup2 (counts, sizeof (int) * (gsize) MAX (nnodes, 1));
  for (int r = 0, node = 0; r < ntasks; r++)
    {
      if (cyclic)
        while (left[node % nnodes] == 0)
          node++;
      else
        while (left[node] == 0)
          node++;
      int at = cyclic ? node % nnodes : node;
      hosts[r] = g_strdup (nodes[at]);
      left[at]--;
      if (cyclic)
        node++;
    }
  g_free (left);
  return hosts;
}

gboolean
shoal_slurm_task (int *rank, int *ntasks)
{
  gint64 r, n;
  const char *pid = g_getenv ("SLURM_PROCID"), *nt = g_getenv ("SLURM_NTASKS");
  if (pid == NULL || nt == NULL || !g_ascii_string_to_signed (pid, 10, 0, G_MAXINT, &r, NULL)
      || !g_ascii_string_to_signed (nt, 10, 1, G_MAXINT, &n, NULL))
    return FALSE;
  *rank = (int) r;
  *ntasks = (int) n;
  return TRUE;
}

/* The step's variable, else the job's. */
static const char *
step_or_job (const char *step, const char *job, const char **which)
{
  const char *v = g_getenv (step);
  *which = step;
  if (v == NULL || *v == '\0')
    {
      v = g_getenv (job);
      *which = job;
    }
  return v;
}

char **
shoal_slurm_rank_hosts (int ntasks, GError **error)
{
  const char *list_var, *tasks_var;
  const char *list = step_or_job ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", &list_var);
  const char *tasks = step_or_job ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", &tasks_var);
  if (list == NULL || tasks == NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                   "under srun but %s is not set: give --hostfile", list == NULL ? list_var : tasks_var);
      return NULL;
    }
  char **nodes = shoal_slurm_hostnames (list, error);
  if (nodes == NULL)
    {
      g_prefix_error (error, "%s: ", list_var);
      return NULL;
    }
  int *counts = shoal_slurm_tasks_per_node (tasks, (int) g_strv_length (nodes), error);
  char **hosts = counts != NULL ? shoal_slurm_place_ranks (nodes, counts, ntasks, g_getenv ("SLURM_DISTRIBUTION"), error)
                                : NULL;
  if (counts == NULL)
    g_prefix_error (error, "%s: ", tasks_var);
  g_free (counts);
  g_strfreev (nodes);
  return hosts;
}

int
shoal_slurm_base_port (void)
{
  guint64 job = 0, step = 0;
  const char *j = g_getenv ("SLURM_JOB_ID"), *s = g_getenv ("SLURM_STEP_ID");
  if (j != NULL)
    g_ascii_string_to_unsigned (j, 10, 0, G_MAXUINT32, &job, NULL);
  if (s != NULL)
    g_ascii_string_to_unsigned (s, 10, 0, G_MAXUINT32, &step, NULL);
  return 30000 + (int) ((job * 7 + step) % 2000) * 16;
}
