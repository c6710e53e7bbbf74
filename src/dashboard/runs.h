/* The runs a dashboard shows: every workspace (a folder with a
 * metrics.jsonl) found under the folders it was given, and every compare
 * folder (runs/ of workspaces, report.md) among them.
 *
 * A run is named by its path from its root folder, the root's own name
 * first ("cmp/runs/ssp-r1"); a name asked for is looked up among the
 * runs found, never opened as a path, so nothing outside the roots can
 * be named.  The walk does not follow symbolic links (a link to a folder
 * elsewhere is not a run) and each root is resolved once, at the start.
 * The walk goes MAX_DEPTH folders down and skips checkpoints. */
#ifndef SHOAL_DASHBOARD_RUNS_H
#define SHOAL_DASHBOARD_RUNS_H

#include <glib.h>

#include "dashboard/tail.h"

G_BEGIN_DECLS

typedef struct {
  char *id;             /* "ROOT/rel/path" */
  char *dir;            /* its folder, resolved */
  char *compare;        /* the id of the compare folder it belongs to, or NULL */
  ShoalTail *metrics;   /* its metrics.jsonl (the launcher's "cluster" lines included) */
  gboolean seen;        /* found by the last scan */
} ShoalRun;

typedef struct {
  char *id;
  char *dir;
  gboolean seen;
} ShoalCompareDir;

typedef struct _ShoalRuns ShoalRuns;

/* Roots: folders that must exist.  An error names the folder. */
ShoalRuns *shoal_runs_new (char **dirs, GError **error);
void shoal_runs_free (ShoalRuns *runs);

/* Walks the roots again: new runs are added, runs gone are dropped.
 * TRUE when the list changed. */
gboolean shoal_runs_scan (ShoalRuns *runs);
/* Polls every run's files; TRUE when anything new came. */
gboolean shoal_runs_poll (ShoalRuns *runs);

guint shoal_runs_count (const ShoalRuns *runs);
ShoalRun *shoal_runs_get (const ShoalRuns *runs, guint i);
guint shoal_runs_compare_count (const ShoalRuns *runs);
ShoalCompareDir *shoal_runs_compare_get (const ShoalRuns *runs, guint i);

/* Checks a name from a request: NULL with *status 400 and *why for a
 * name that can never be a run's (empty, absolute, "..", "." or empty
 * parts, control characters), 404 for one that is not a run found. */
ShoalRun *shoal_runs_find (const ShoalRuns *runs, const char *id, guint *status, const char **why);
ShoalCompareDir *shoal_runs_find_compare (const ShoalRuns *runs, const char *id, guint *status,
                                          const char **why);

/* The roots' names and folders, for messages and the page. */
guint shoal_runs_root_count (const ShoalRuns *runs);
const char *shoal_runs_root_name (const ShoalRuns *runs, guint i);
const char *shoal_runs_root_dir (const ShoalRuns *runs, guint i);

G_END_DECLS

#endif
