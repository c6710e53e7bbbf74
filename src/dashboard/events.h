/* The live feed: Server-Sent Events (text/event-stream) to each open
 * page, one connection per page for all the runs it shows.  While a page
 * is connected, the runs' files are polled every POLL_MS (a stat each
 * when nothing changed) and the folders walked every SCAN_MS; each page
 * gets what is new after the line it said it has:
 *   event: lines   {"run", "generation", "from", "next", "damaged", "lines": [...]}
 *   event: reset   {"run", "generation"}   the file was replaced: read it again
 *   event: runs    {}                      runs came or went: ask /api/runs again
 * A page that does not read what it is sent (more than CLIENT_QUEUE_MAX
 * bytes waiting) is disconnected, so it costs bounded memory. */
#ifndef SHOAL_DASHBOARD_EVENTS_H
#define SHOAL_DASHBOARD_EVENTS_H

#include <json-glib/json-glib.h>
#include <libsoup/soup.h>

#include "dashboard/runs.h"

G_BEGIN_DECLS

typedef struct _ShoalEventFeed ShoalEventFeed;

/* Its timers run in `context`. */
ShoalEventFeed *shoal_event_feed_new (ShoalRuns *runs, GMainContext *context);
void shoal_event_feed_free (ShoalEventFeed *feed);

/* Answers msg with an event stream for the runs in `watch` ({ID: the
 * number of lines the page has, ...}; a run not found yet is watched
 * for, all its lines sent when it comes; a name no run can have is left
 * out).
 * Runs on the server's thread. */
void shoal_event_feed_add (ShoalEventFeed *feed, SoupServerMessage *msg, JsonObject *watch);

/* Pages connected now. */
guint shoal_event_feed_clients (const ShoalEventFeed *feed);

G_END_DECLS

#endif
