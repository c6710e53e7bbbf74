/* Liveness: which ranks of a job this process knows alive, done or lost.
 *
 * Every process sends a heartbeat every [cluster] heartbeat_interval to
 * every rank that takes calls (server/heartbeat.h), carrying its
 * progress: the steps and test batches of its units so far, or -1 while
 * none trains.  A rank that takes calls hears every other rank's
 * heartbeats; one that does not (a Downpour worker process) hears the
 * replies of the ranks it sends to.  Either way this table decides:
 * - a rank silent for `lost_after` since it was last heard is lost
 *   (stopped, hung, or its machine gone);
 * - a rank whose progress stayed the same for `stalled_after` while it
 *   trains is lost (wedged: a thread spinning or stuck);
 * - a rank never heard from `stalled_after` after this table began is
 *   lost (it never came up);
 * - a rank that said it is done (the shutdown call) is no longer watched.
 * Lost is for good for that process (its incarnation): a heartbeat from
 * it is refused with LOST, so a process stopped and continued learns
 * that it was dropped.  A restarted process (another incarnation) that
 * says it rejoins is taken back; the rank stays "demoted" (it was lost
 * once), which Hogwild uses to pick slice masters every process agrees
 * on.  Heartbeat replies carry the lost (rank, incarnation) pairs, so
 * views converge even where a process hears only some ranks.
 *
 * What a lost rank means for the job (a group dropped, the job failed)
 * is the caller's business: the on_lost and on_rejoin callbacks, called
 * without the table's lock held, from whichever thread noticed.
 *
 * Also here: this process's progress counter, which the worker loop
 * moves and the heartbeat sends. */
#ifndef SHOAL_LIVENESS_H
#define SHOAL_LIVENESS_H

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  gint64 lost_after_us;      /* [cluster] heartbeat_timeout */
  gint64 stalled_after_us;   /* [cluster] progress_timeout */
} ShoalLivenessRules;

typedef enum {
  SHOAL_RANK_UNWATCHED,  /* this process expects nothing from it (itself, or not heard by design) */
  SHOAL_RANK_WAITING,    /* watched, never heard yet */
  SHOAL_RANK_ALIVE,
  SHOAL_RANK_DONE,       /* said it is done */
  SHOAL_RANK_LOST
} ShoalRankState;

/* What became of a heartbeat. */
typedef enum {
  SHOAL_HEARD_OK,
  SHOAL_HEARD_REFUSED    /* the sender was lost (or restarted without rejoin): answer LOST */
} ShoalHeard;

typedef struct _ShoalLiveness ShoalLiveness;

/* How the loss of a rank never heard from begins its why ("never heard
 * from in 300 s (...)"): the caller adds what it knows of such a rank. */
#define SHOAL_LIVENESS_NEVER_HEARD "never heard from"

/* rank lost: why reads "no heartbeat for 15.2 s", ... */
typedef void (*ShoalLostFunc) (gpointer data, int rank, const char *why);
typedef void (*ShoalRejoinFunc) (gpointer data, int rank);
/* rank said it is done (shoal_liveness_done) */
typedef void (*ShoalDoneFunc) (gpointer data, int rank);

/* A table of nranks ranks, seen from rank `self` (never watched);
 * nothing is watched until shoal_liveness_watch.  Clocks start at
 * now_us (monotonic microseconds). */
ShoalLiveness *shoal_liveness_new (int nranks, int self, const ShoalLivenessRules *rules, gint64 now_us);
void shoal_liveness_free (ShoalLiveness *lv);
void shoal_liveness_set_callbacks (ShoalLiveness *lv, ShoalLostFunc on_lost, ShoalRejoinFunc on_rejoin,
                                   gpointer data);
/* Also on_done (with the data of shoal_liveness_set_callbacks), called
 * outside the table's lock. */
void shoal_liveness_set_on_done (ShoalLiveness *lv, ShoalDoneFunc on_done);
int shoal_liveness_nranks (ShoalLiveness *lv);

/* Starts expecting word from `rank`, which holds workers (it says done
 * when they finish) and/or servers (it serves until every worker process
 * is done). */
void shoal_liveness_watch (ShoalLiveness *lv, int rank, gboolean has_workers, gboolean has_servers);

/* Progress of a word that tells nothing about it (a reply). */
#define SHOAL_PROGRESS_UNKNOWN (-2)
/* Word from `rank`: a heartbeat it sent (rejoin as it said), or a reply
 * to one of ours (incarnation 0: unknown, progress
 * SHOAL_PROGRESS_UNKNOWN).  *why (may be NULL) gets the reason of a
 * refusal, to be freed. */
ShoalHeard shoal_liveness_heard (ShoalLiveness *lv, int rank, gint64 incarnation, gint64 progress,
                                 gboolean rejoin, gint64 now_us, char **why);
/* `rank` said it is done.  It is no longer watched, unless it serves:
 * then it waits for this process too and is watched until this process
 * is done as well (a lost rank stays lost). */
void shoal_liveness_done (ShoalLiveness *lv, int rank);
/* This process said it is done: ranks that said so too, and ranks
 * without workers, are no longer watched. */
void shoal_liveness_self_done (ShoalLiveness *lv);
/* Declares `rank` lost now, for `why` (a caller that knows better, e.g. a
 * peer's process seen gone).  Nothing when it is lost already. */
void shoal_liveness_declare_lost (ShoalLiveness *lv, int rank, const char *why);
/* Applies the rules at now_us; ranks found lost get on_lost. */
void shoal_liveness_check (ShoalLiveness *lv, gint64 now_us);

/* The lost (rank, incarnation) pairs as heartbeat replies carry them:
 * per pair an int32 rank, int32 flags and an int64 incarnation,
 * little-endian.  Flag SHOAL_LOST_LIST_BACK: the rank's lost process was
 * replaced by one that rejoined and is heard (older senders write 0). */
#define SHOAL_LOST_LIST_BACK 1
GBytes *shoal_liveness_lost_list (ShoalLiveness *lv);
/* A peer's list (from rank `from`): a pair of the incarnation this table
 * knows (or of a rank never heard) makes the rank lost here too; the
 * rank is demoted either way.  `from`'s pair about itself only demotes
 * it (a rejoined process lists itself).  A pair flagged BACK takes a
 * lost rank this table does not watch back (on_rejoin): it hears of it
 * only from peers.  Malformed lists are ignored. */
void shoal_liveness_learn (ShoalLiveness *lv, int from, const guint8 *list, gsize len);

ShoalRankState shoal_liveness_state (ShoalLiveness *lv, int rank);
/* Lost at some time, whether or not it rejoined since. */
gboolean shoal_liveness_demoted (ShoalLiveness *lv, int rank);
/* Marks `rank` demoted (a rank that rejoins knows it was lost). */
void shoal_liveness_demote (ShoalLiveness *lv, int rank);

/* ---- this process's progress ---------------------------------------- */

/* A unit begins (TRUE) or ends (FALSE) training. */
void shoal_progress_training (gboolean begins);
/* A step or a test batch done. */
void shoal_progress_note (void);
/* Steps and test batches so far; -1 while no unit trains. */
gint64 shoal_progress_value (void);

/* A number for the life of this process, for heartbeats (pid and start
 * time mixed: a restarted rank differs). */
gint64 shoal_liveness_incarnation (void);

G_END_DECLS

#endif
