/* How the processes of a worker group spread over processes reach each
 * other: the group net (partition.h) sends bridge data, the leader's
 * commands and the followers' results as messages on numbered channels.
 * Over Thrift it is src/comm/thrift_wire.c; tests also run two halves of
 * a group in one process over a shared mailbox.
 *
 * Process j of the group holds workers j*per .. (j+1)*per - 1, per =
 * k / nprocs; process 0 (worker 0's) is the leader. */
#ifndef SHOAL_GROUP_WIRE_H
#define SHOAL_GROUP_WIRE_H

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  int nprocs;       /* processes holding the group's workers, >= 2 */
  int this_proc;    /* which of them this one is */
  /* Delivers msg (borrowed) to process `proc`'s queue of `channel` and
   * returns once it is there (not once it is taken).  Called from several
   * threads at once; messages one thread sends on one channel arrive in
   * order.  FALSE with error when the peer cannot be reached. */
  gboolean (*send) (gpointer data, int proc, guint32 channel, GBytes *msg, GError **error);
  /* The next message sent to this process on `channel`, waiting at most
   * timeout_ms; a new reference, or NULL with error. */
  GBytes *(*recv) (gpointer data, guint32 channel, gint64 timeout_ms, GError **error);
  /* Whether process `proc` is still there (FALSE with error when it is
   * gone), so that a wait for it ends when it dies, not at the timeout.
   * Cheap: called about once a second while waiting.  May be NULL. */
  gboolean (*alive) (gpointer data, int proc, GError **error);
  gpointer data;
} ShoalGroupWire;

G_END_DECLS

#endif
