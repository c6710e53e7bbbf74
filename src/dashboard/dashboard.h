/* The dashboard: an HTTP server (libsoup 3) over the runs under some
 * folders, serving one page (web/, with Debian's Chart.js) and the runs'
 * metrics as they grow (Server-Sent Events).  README.md, "Watching a
 * run", lists what the page shows; docs/ARCHITECTURE.md its endpoints.
 *
 * Safe by default: it listens on loopback unless told otherwise, and a
 * listen address that is not loopback needs a token, which every request
 * for data (/api/) must then carry; it only reads, and only the runs found under its
 * folders (dashboard/runs.h); on loopback it answers only requests whose
 * Host is loopback (a page elsewhere cannot reach it by rebinding a name
 * to 127.0.0.1). */
#ifndef SHOAL_DASHBOARD_H
#define SHOAL_DASHBOARD_H

#include <glib.h>

G_BEGIN_DECLS

/* where `shoal serve` listens when not told */
#define SHOAL_DASHBOARD_DEFAULT_LISTEN "127.0.0.1:6070"

typedef struct {
  char **dirs;              /* the folders to serve (NULL-terminated) */
  const char *listen;       /* "PORT", "HOST:PORT" or "[V6]:PORT"; HOST an address or localhost */
  const char *token;        /* NULL: none; needed for a listen address that is not loopback */
  gboolean token_if_remote; /* ask for the token only when the address is not loopback */
  gboolean allow_no_runs;   /* a run about to start: its folder has no metrics yet */
} ShoalDashboardOptions;

typedef struct _ShoalDashboard ShoalDashboard;

/* Finds the runs, loads the page's files and starts listening (port 0:
 * any free port).  Errors say what is wrong: a folder missing or with no
 * runs, a port in use, a listen address that is not loopback without a
 * token, the page's files or Chart.js missing. */
ShoalDashboard *shoal_dashboard_new (const ShoalDashboardOptions *o, GError **error);
/* Stops serving (and its thread, if it has one); NULL is fine. */
void shoal_dashboard_free (ShoalDashboard *d);

/* The page's address, the token in it where one is needed. */
const char *shoal_dashboard_url (const ShoalDashboard *d);
/* What it serves, found when it started, newly allocated: "3 runs (1
 * compare folder) under /tmp/cmp, workspace".  Before the server's
 * thread starts. */
char *shoal_dashboard_describe (const ShoalDashboard *d);

/* Serves in this thread until SIGINT or SIGTERM. */
void shoal_dashboard_run (ShoalDashboard *d);
/* Serves from a thread of its own (with every signal blocked: the
 * caller's signal handling is left as it was). */
void shoal_dashboard_start_thread (ShoalDashboard *d);

G_END_DECLS

#endif
