/* The heartbeat thread of a process (server/liveness.h): every interval
 * it writes the process's progress to the launcher's pipe (when `shoal
 * run` started it), sends a heartbeat to every other rank that takes
 * calls, records who answered and what they hold lost, and applies the
 * liveness rules, whose callbacks then say what a lost rank means.
 *
 * A call to a stopped peer waits for call_timeout_ms; a peer held lost
 * gets no more heartbeats, so one stopped peer slows the rounds only
 * until it is declared lost. */
#ifndef SHOAL_HEARTBEAT_H
#define SHOAL_HEARTBEAT_H

#include <glib.h>

#include "server/liveness.h"
#include "server/rpc_client.h"

G_BEGIN_DECLS

/* A refusal from a peer: it declared this process lost (dropped), or it
 * stops the job (error SHOAL_ERROR_LOST, naming the peer and why). */
typedef void (*ShoalRefusedFunc) (gpointer data, int peer, const GError *why);
/* A peer answered that it was sent a stop signal (STOPPING): the job
 * stops with a checkpoint. */
typedef void (*ShoalStoppingFunc) (gpointer data, int peer);

typedef struct {
  int rank;                              /* this process */
  int nranks;
  const ShoalRpcClientOptions *peers;    /* [nranks] (copied); host NULL: a rank that takes no calls */
  double interval_s;                     /* > 0 */
  gint64 call_timeout_ms;                /* > 0 */
  int pipe_fd;                           /* the launcher's heartbeat pipe, -1: none */
  gboolean rejoin;                       /* a restarted rank joining the running job */
  ShoalLiveness *liveness;               /* borrowed: replies recorded here, rules applied */
  ShoalRefusedFunc on_refused;           /* may be NULL */
  ShoalStoppingFunc on_stopping;         /* may be NULL */
  gpointer data;
} ShoalHeartbeatOptions;

/* What the launcher reads from its pipe, one record per beat (writes of
 * this size are atomic on a pipe), or per reason a rank stops the job
 * (kind SHOAL_BEAT_FATAL: `progress` bytes of text follow in the same
 * write, at most SHOAL_BEAT_TEXT_MAX, so the launcher's last word names
 * what was lost even when the rank that knew exits before the others
 * hear it). */
typedef struct {
  gint32 rank;
  gint32 kind;       /* SHOAL_BEAT_PROGRESS or SHOAL_BEAT_FATAL */
  gint64 progress;   /* shoal_progress_value (): -1 while no unit trains; FATAL: the text's length */
} ShoalBeatRecord;

#define SHOAL_BEAT_PROGRESS 0
#define SHOAL_BEAT_FATAL 1
/* a stop signal came to the rank from someone other than the launcher
 * (`progress`: the signal): a rank without workers cannot stop the job
 * with a checkpoint by itself, so the launcher forwards the stop */
#define SHOAL_BEAT_STOP 2
#define SHOAL_BEAT_TEXT_MAX 2000

typedef struct _ShoalHeartbeat ShoalHeartbeat;

/* One round at once (so a rejoining rank learns who is lost before it
 * picks masters), then the thread.  NULL with error when no thread can
 * be started. */
ShoalHeartbeat *shoal_heartbeat_start (const ShoalHeartbeatOptions *opts, GError **error);
/* Stops and joins the thread.  NULL is fine. */
void shoal_heartbeat_stop (ShoalHeartbeat *hb);

/* The launcher's pipe from $SHOAL_HEARTBEAT_FD, or -1. */
int shoal_heartbeat_pipe_from_env (void);
/* Tells the launcher on pipe_fd (-1: none, nothing done) why rank `rank`
 * stops the job; a longer reason is cut at SHOAL_BEAT_TEXT_MAX bytes. */
void shoal_heartbeat_pipe_fatal (int pipe_fd, int rank, const char *why);
/* Tells the launcher on pipe_fd (-1: none) that rank `rank` was sent
 * signal `sig` by someone else.  Async-signal-safe (one write). */
void shoal_heartbeat_pipe_stop (int pipe_fd, int rank, int sig);

G_END_DECLS

#endif
