/* Memory budgets (the public half, a budget's life, is shoal/tensor.h):
 * how the allocators of core/tensor.c charge what a net allocates to the
 * budget its thread is setting up a net for (see memory_budget.c for
 * why a counted allocator). */
#ifndef SHOAL_MEMORY_BUDGET_H
#define SHOAL_MEMORY_BUDGET_H

#include <glib.h>

#include "core/tensor.h"

G_BEGIN_DECLS

/* What one net's set-up was charged; lives on the stack of whoever
 * begins it, and is the calling thread's current charge until ended
 * (charges nest: end restores the outer one). */
typedef struct _ShoalMemoryCharge ShoalMemoryCharge;
struct _ShoalMemoryCharge {
  ShoalMemoryBudget *budget;   /* borrowed; NULL: nothing is counted */
  guint64 charged;             /* bytes charged so far, given back by the owner */
  guint64 over_by;             /* a forced charge that crossed the limit (the first): its bytes */
  guint64 over_total;          /* and the total it made; 0 when none crossed */
  ShoalMemoryCharge *outer;
};

void shoal_memory_charge_begin (ShoalMemoryCharge *charge, ShoalMemoryBudget *budget);
void shoal_memory_charge_end (ShoalMemoryCharge *charge);
/* The calling thread's current charge, NULL when none. */
ShoalMemoryCharge *shoal_memory_charge_current (void);
/* Charges bytes to charge's budget (TRUE when charge is NULL or has no
 * budget).  FALSE with SHOAL_ERROR_MEMORY ("needs 2.2 GiB, which brings
 * what the job holds in this process to 2.3 GiB; job.memory_limit is 1.0
 * GiB") when it would cross the limit, and nothing charged; force
 * charges anyway (for allocators that cannot fail) and records the
 * first crossing in over_by / over_total for the net to report. */
gboolean shoal_memory_charge (ShoalMemoryCharge *charge, guint64 bytes, gboolean force, GError **error);
/* Gives back bytes charged earlier (an allocation that then failed). */
void shoal_memory_uncharge (ShoalMemoryCharge *charge, guint64 bytes);
/* The error shoal_memory_charge sets, for a crossing found later. */
void shoal_memory_over_error (ShoalMemoryBudget *budget, GError **error, guint64 bytes, guint64 total);
void shoal_memory_budget_release (ShoalMemoryBudget *budget, guint64 bytes);

/* The smaller of the machine's physical memory and this process's
 * address-space limit (ulimit -v); 0 when neither is known. */
guint64 shoal_memory_of_machine (void);
/* A size line of /proc/self/status ("VmRSS", "VmSize", "VmHWM") in
 * bytes; 0 when unknown. */
guint64 shoal_memory_of_process (const char *field);

G_END_DECLS

#endif
