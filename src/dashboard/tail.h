/* Following a growing metrics.jsonl (or any JSON-lines file) without
 * reading it twice: a tail remembers how far it read, reads only the
 * bytes appended since, and keeps the complete lines that parse as JSON
 * objects, in order, for every reader that comes later.
 *
 * A line counts once its newline is there: a line still being written
 * waits in the tail until it is finished.  A finished line that is not a
 * JSON object (damaged, or cut by a crash and followed by another) is
 * skipped and counted.  A file replaced or cut shorter (a new run moved
 * the old one aside) starts the tail over: its `generation` goes up, so
 * readers know their line numbers are void. */
#ifndef SHOAL_DASHBOARD_TAIL_H
#define SHOAL_DASHBOARD_TAIL_H

#include <glib.h>

G_BEGIN_DECLS

typedef struct _ShoalTail ShoalTail;

ShoalTail *shoal_tail_new (const char *path);
void shoal_tail_free (ShoalTail *tail);

/* Reads what was appended since the last call.  Returns the number of new
 * valid lines (0: nothing new, or the file is gone: a missing file is an
 * empty one).  A file that was replaced or truncated restarts the tail. */
guint shoal_tail_poll (ShoalTail *tail);

/* The valid lines so far. */
guint shoal_tail_lines (const ShoalTail *tail);
/* Lines skipped: complete, but not a JSON object. */
guint shoal_tail_damaged (const ShoalTail *tail);
/* Bumped each time the tail starts over. */
guint shoal_tail_generation (const ShoalTail *tail);

/* Appends lines [from, to) to out joined by commas: a JSON array's
 * elements (each is an object). */
void shoal_tail_append_json (const ShoalTail *tail, guint from, guint to, GString *out);

G_END_DECLS

#endif
