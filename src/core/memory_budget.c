/* A memory budget: a cap on the host memory that nets may allocate,
 * shared by every net of a job in one process (its workers' nets, a
 * conf check's net), so that a legal conf asking for more than the
 * machine can give is refused with an error naming the layer instead of
 * meeting the OOM killer (Linux overcommits: malloc rarely fails) or a
 * sanitizer's malloc limit.
 *
 * Why a counted allocator and not a per-layer "planned bytes" hook: a
 * hook has to be written, and kept true, for every layer type (plugins
 * included), and a wrong one goes unnoticed.  Here the count is the
 * allocation itself: while a net is set up, its thread has a charge
 * (shoal_memory_charge_begin) and every shoal_try_alloc_floats /
 * shoal_alloc_floats / shoal_try_alloc_bytes on that thread is charged
 * to the net's budget before it reaches malloc, and refused when it
 * would cross the limit.  Built-in layers and plugins get the same
 * treatment without knowing of it; the net names the layer whose set-up
 * was allocating.  The bytes a net was charged are given back when it
 * is freed. */
#include "core/memory_budget.h"

#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/error.h"

struct _ShoalMemoryBudget {
  GMutex lock;
  guint64 limit;    /* 0: counts only */
  guint64 used;
  char *name;       /* how errors call the limit, e.g. "job.memory_limit" */
};

static GPrivate current_charge;  /* ShoalMemoryCharge * of this thread, or NULL */

ShoalMemoryBudget *
shoal_memory_budget_new (guint64 limit, const char *name)
{
  ShoalMemoryBudget *b = g_new0 (ShoalMemoryBudget, 1);
  g_mutex_init (&b->lock);
  b->limit = limit;
  b->name = g_strdup (name != NULL ? name : "the memory budget");
  return b;
}

void
shoal_memory_budget_free (ShoalMemoryBudget *budget)
{
  if (budget == NULL)
    return;
  g_mutex_clear (&budget->lock);
  g_free (budget->name);
  g_free (budget);
}

guint64
shoal_memory_budget_limit (const ShoalMemoryBudget *budget)
{
  g_return_val_if_fail (budget != NULL, 0);
  return budget->limit;
}

guint64
shoal_memory_budget_used (ShoalMemoryBudget *budget)
{
  g_return_val_if_fail (budget != NULL, 0);
  g_mutex_lock (&budget->lock);
  guint64 used = budget->used;
  g_mutex_unlock (&budget->lock);
  return used;
}

/* Adds bytes unless that crosses the limit (force: adds anyway).  TRUE
 * when the budget holds what it was charged. */
static gboolean
budget_add (ShoalMemoryBudget *b, guint64 bytes, gboolean force, guint64 *after)
{
  g_mutex_lock (&b->lock);
  guint64 total = b->used + bytes;
  gboolean fits = b->limit == 0 || (total >= b->used && total <= b->limit);
  if (fits || force)
    b->used = total;
  g_mutex_unlock (&b->lock);
  *after = total;
  return fits;
}

void
shoal_memory_budget_release (ShoalMemoryBudget *budget, guint64 bytes)
{
  if (budget == NULL || bytes == 0)
    return;
  g_mutex_lock (&budget->lock);
  g_warn_if_fail (bytes <= budget->used);
  budget->used -= MIN (bytes, budget->used);
  g_mutex_unlock (&budget->lock);
}

void
shoal_memory_over_error (ShoalMemoryBudget *budget, GError **error, guint64 bytes, guint64 total)
{
  char *b = shoal_format_bytes (bytes);
  char *t = shoal_format_bytes (total);
  char *l = shoal_format_bytes (budget->limit);
  g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_MEMORY,
               "needs %s, which brings what the job holds in this process to %s; %s is %s", b, t,
               budget->name, l);
  g_free (l);
  g_free (t);
  g_free (b);
}

void
shoal_memory_charge_begin (ShoalMemoryCharge *charge, ShoalMemoryBudget *budget)
{
  *charge = (ShoalMemoryCharge) { .budget = budget, .outer = g_private_get (&current_charge) };
  g_private_set (&current_charge, charge);
}

void
shoal_memory_charge_end (ShoalMemoryCharge *charge)
{
  g_return_if_fail (g_private_get (&current_charge) == charge);
  g_private_set (&current_charge, charge->outer);
}

gboolean
shoal_memory_charge (ShoalMemoryCharge *charge, guint64 bytes, gboolean force, GError **error)
{
  if (charge == NULL || charge->budget == NULL)
    return TRUE;
  guint64 after;
  gboolean fits = budget_add (charge->budget, bytes, force, &after);
  if (fits || force)
    charge->charged += bytes;
  if (!fits && force && charge->over_by == 0)
    {
      charge->over_by = bytes;
      charge->over_total = after;
    }
  if (!fits && !force)
    shoal_memory_over_error (charge->budget, error, bytes, after);
  return fits;
}

void
shoal_memory_uncharge (ShoalMemoryCharge *charge, guint64 bytes)
{
  if (charge == NULL || charge->budget == NULL)
    return;
  bytes = MIN (bytes, charge->charged);
  charge->charged -= bytes;
  shoal_memory_budget_release (charge->budget, bytes);
}

ShoalMemoryCharge *
shoal_memory_charge_current (void)
{
  return g_private_get (&current_charge);
}

guint64
shoal_memory_of_process (const char *field)
{
  char *status = NULL;
  guint64 kib = 0;
  if (g_file_get_contents ("/proc/self/status", &status, NULL, NULL))
    {
      char *key = g_strdup_printf ("\n%s:", field);
      const char *line = strstr (status, key);
      if (line != NULL)
        kib = g_ascii_strtoull (line + strlen (key), NULL, 10);
      g_free (key);
    }
  g_free (status);
  return kib * 1024;
}

guint64
shoal_memory_of_machine (void)
{
  long pages = sysconf (_SC_PHYS_PAGES);
  long page = sysconf (_SC_PAGESIZE);
  guint64 bytes = pages > 0 && page > 0 ? (guint64) pages * (guint64) page : 0;
  struct rlimit as;
  if (getrlimit (RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY
      && (bytes == 0 || (guint64) as.rlim_cur < bytes))
    bytes = (guint64) as.rlim_cur;
  return bytes;
}
