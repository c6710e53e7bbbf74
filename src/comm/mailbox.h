/* A process's mailbox for the messages of worker groups spread over
 * processes: one FIFO queue of GBytes per (group, channel), filled by
 * the rpc_server's send_bridge handler (or by a sender in the same
 * process) and emptied by the group net's threads.  Thread-safe. */
#ifndef SHOAL_MAILBOX_H
#define SHOAL_MAILBOX_H

#include <glib.h>

G_BEGIN_DECLS

typedef struct _ShoalMailbox ShoalMailbox;

/* An empty, open mailbox; free with shoal_mailbox_free. */
ShoalMailbox *shoal_mailbox_new (void);
/* Frees the mailbox and every message still queued; nobody may be
 * waiting in it.  NULL is ignored. */
void shoal_mailbox_free (ShoalMailbox *mb);

/* Queues msg under (group, channel) and wakes its takers; dropped once
 * the mailbox is closed.  Takes over the caller's reference: a message
 * has one owner at a time, handed over under the mailbox's lock
 * (ThreadSanitizer sees that, not GLib's atomic reference counts). */
void shoal_mailbox_put (ShoalMailbox *mb, int group, guint32 channel, GBytes *msg);
/* shoal_mailbox_put with the mailbox as a gpointer: the bridge sink of
 * an RPC server (server/rpc_server.h's ShoalBridgeSink). */
void shoal_mailbox_sink (gpointer mailbox, int group, guint32 channel, GBytes *msg);
/* The oldest message under (group, channel), waiting at most timeout_ms
 * for one: a reference the caller owns, or NULL with error:
 * SHOAL_ERROR_TIMEOUT on timeout, SHOAL_ERROR_RPC once the mailbox is
 * closed. */
GBytes *shoal_mailbox_take (ShoalMailbox *mb, int group, guint32 channel, gint64 timeout_ms,
                            GError **error);
/* Makes every waiting and later take fail with `why` (copied). */
void shoal_mailbox_close (ShoalMailbox *mb, const char *why);
/* Messages queued, all queues together. */
guint shoal_mailbox_pending (ShoalMailbox *mb);

G_END_DECLS

#endif
