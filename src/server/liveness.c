/* The liveness table and the process's progress counter; see
 * server/liveness.h.  Pure bookkeeping on a clock the caller gives, so
 * that the rules are tested without waiting (test/test_liveness.c). */
#include "server/liveness.h"

#include <string.h>
#include <unistd.h>

typedef struct {
  ShoalRankState state;
  gboolean has_workers;   /* says done when its workers finish */
  gboolean has_servers;   /* serves until every worker process is done */
  gboolean said_done;
  gboolean demoted;       /* lost at some time */
  gboolean watched;       /* this table expects word from it (else it learns of it from peers only) */
  gint64 incarnation;     /* 0: not known */
  gint64 lost_incarnation;  /* the incarnation that was lost; 0: none */
  gint64 heard_at;        /* last word; the table's start until the first */
  gint64 progress;        /* last progress heard; -1: not training */
  gint64 progress_at;     /* when progress last changed (or training began) */
} Peer;

typedef struct {
  int rank;
  char *why;              /* NULL: a rejoin */
} Event;

struct _ShoalLiveness {
  GMutex lock;
  int nranks, self;
  gboolean self_done;
  ShoalLivenessRules rules;
  gint64 started_at;
  Peer *peers;
  ShoalLostFunc on_lost;
  ShoalRejoinFunc on_rejoin;
  ShoalDoneFunc on_done;
  gpointer data;
};

ShoalLiveness *
shoal_liveness_new (int nranks, int self, const ShoalLivenessRules *rules, gint64 now_us)
{
  g_return_val_if_fail (nranks >= 1 && rules != NULL, NULL);
  ShoalLiveness *lv = g_new0 (ShoalLiveness, 1);
  g_mutex_init (&lv->lock);
  lv->nranks = nranks;
  lv->self = self;
  lv->rules = *rules;
  lv->started_at = now_us;
  lv->peers = g_new0 (Peer, nranks);
  for (int r = 0; r < nranks; r++)
    lv->peers[r] = (Peer) { .state = SHOAL_RANK_UNWATCHED, .heard_at = now_us, .progress = -1,
                            .progress_at = now_us };
  return lv;
}

void
shoal_liveness_free (ShoalLiveness *lv)
{
  if (lv == NULL)
    return;
  g_mutex_clear (&lv->lock);
  g_free (lv->peers);
  g_free (lv);
}

void
shoal_liveness_set_callbacks (ShoalLiveness *lv, ShoalLostFunc on_lost, ShoalRejoinFunc on_rejoin,
                              gpointer data)
{
  g_mutex_lock (&lv->lock);
  lv->on_lost = on_lost;
  lv->on_rejoin = on_rejoin;
  lv->data = data;
  g_mutex_unlock (&lv->lock);
}

void
shoal_liveness_set_on_done (ShoalLiveness *lv, ShoalDoneFunc on_done)
{
  g_mutex_lock (&lv->lock);
  lv->on_done = on_done;
  g_mutex_unlock (&lv->lock);
}

int
shoal_liveness_nranks (ShoalLiveness *lv)
{
  return lv->nranks;
}

static gboolean
valid (ShoalLiveness *lv, int rank)
{
  return rank >= 0 && rank < lv->nranks && rank != lv->self;
}

/* Under the lock: the peer becomes lost; the event goes into events. */
static void
lose (ShoalLiveness *lv, int rank, char *why, GArray *events)
{
  Peer *p = &lv->peers[rank];
  p->state = SHOAL_RANK_LOST;
  p->demoted = TRUE;
  p->lost_incarnation = p->incarnation;
  Event e = { rank, why };
  g_array_append_val (events, e);
}

/* Calls the callbacks of the events, without the lock, and frees them. */
static void
dispatch (ShoalLiveness *lv, GArray *events)
{
  g_mutex_lock (&lv->lock);
  ShoalLostFunc on_lost = lv->on_lost;
  ShoalRejoinFunc on_rejoin = lv->on_rejoin;
  gpointer data = lv->data;
  g_mutex_unlock (&lv->lock);
  for (guint i = 0; i < events->len; i++)
    {
      Event *e = &g_array_index (events, Event, i);
      if (e->why != NULL && on_lost != NULL)
        on_lost (data, e->rank, e->why);
      else if (e->why == NULL && on_rejoin != NULL)
        on_rejoin (data, e->rank);
      g_free (e->why);
    }
  g_array_free (events, TRUE);
}

/* Under the lock: whether word from a done peer is still expected - one
 * that serves waits for this process too, until this one is done. */
static void
settle_done (ShoalLiveness *lv, Peer *p)
{
  if (p->state != SHOAL_RANK_WAITING && p->state != SHOAL_RANK_ALIVE)
    return;
  if ((p->said_done && (!p->has_servers || lv->self_done)) || (lv->self_done && !p->has_workers))
    p->state = SHOAL_RANK_DONE;
}

void
shoal_liveness_watch (ShoalLiveness *lv, int rank, gboolean has_workers, gboolean has_servers)
{
  if (!valid (lv, rank))
    return;
  g_mutex_lock (&lv->lock);
  Peer *p = &lv->peers[rank];
  p->has_workers = has_workers;
  p->has_servers = has_servers;
  p->watched = TRUE;
  if (p->state == SHOAL_RANK_UNWATCHED)
    p->state = p->incarnation != 0 ? SHOAL_RANK_ALIVE : SHOAL_RANK_WAITING;
  g_mutex_unlock (&lv->lock);
}

ShoalHeard
shoal_liveness_heard (ShoalLiveness *lv, int rank, gint64 incarnation, gint64 progress, gboolean rejoin,
                      gint64 now_us, char **why)
{
  if (why != NULL)
    *why = NULL;
  if (!valid (lv, rank))
    return SHOAL_HEARD_OK;
  GArray *events = g_array_new (FALSE, FALSE, sizeof (Event));
  ShoalHeard heard = SHOAL_HEARD_OK;
  g_mutex_lock (&lv->lock);
  Peer *p = &lv->peers[rank];
  gboolean other = incarnation != 0 && p->incarnation != 0 && incarnation != p->incarnation;
  if (other && p->state != SHOAL_RANK_LOST && p->state != SHOAL_RANK_DONE)
    /* the process we knew is gone: a new one took its rank */
    lose (lv, rank, g_strdup ("restarted (a new process took its rank)"), events);
  if (p->state == SHOAL_RANK_LOST)
    {
      gboolean same = incarnation == 0 || incarnation == p->lost_incarnation
                      || (p->lost_incarnation == 0 && !rejoin);
      if (same || !rejoin)
        {
          heard = SHOAL_HEARD_REFUSED;
          if (why != NULL)
            *why = same ? g_strdup_printf ("rank %d was declared lost by rank %d and is dropped from the job",
                                           rank, lv->self)
                        : g_strdup_printf ("rank %d was declared lost by rank %d; a restarted rank joins "
                                           "the running job only with --rejoin", rank, lv->self);
        }
      else
        {
          /* a new process that rejoins: watched again, demoted for good */
          p->state = SHOAL_RANK_ALIVE;
          p->said_done = FALSE;
          p->incarnation = incarnation;
          p->heard_at = now_us;
          p->progress = progress == SHOAL_PROGRESS_UNKNOWN ? -1 : progress;
          p->progress_at = now_us;
          Event e = { rank, NULL };
          g_array_append_val (events, e);
        }
    }
  else
    {
      if (incarnation != 0)
        p->incarnation = incarnation;
      p->heard_at = now_us;
      if (progress != SHOAL_PROGRESS_UNKNOWN)
        {
          if (progress != p->progress || progress < 0)
            p->progress_at = now_us;
          p->progress = progress;
        }
      if (p->state == SHOAL_RANK_WAITING)
        p->state = SHOAL_RANK_ALIVE;
    }
  g_mutex_unlock (&lv->lock);
  dispatch (lv, events);
  return heard;
}

void
shoal_liveness_done (ShoalLiveness *lv, int rank)
{
  if (!valid (lv, rank))
    return;
  g_mutex_lock (&lv->lock);
  lv->peers[rank].said_done = TRUE;
  settle_done (lv, &lv->peers[rank]);
  ShoalDoneFunc on_done = lv->peers[rank].state != SHOAL_RANK_LOST ? lv->on_done : NULL;
  gpointer data = lv->data;
  g_mutex_unlock (&lv->lock);
  if (on_done != NULL)
    on_done (data, rank);
}

void
shoal_liveness_self_done (ShoalLiveness *lv)
{
  g_mutex_lock (&lv->lock);
  lv->self_done = TRUE;
  for (int r = 0; r < lv->nranks; r++)
    settle_done (lv, &lv->peers[r]);
  g_mutex_unlock (&lv->lock);
}

void
shoal_liveness_declare_lost (ShoalLiveness *lv, int rank, const char *why)
{
  if (!valid (lv, rank))
    return;
  GArray *events = g_array_new (FALSE, FALSE, sizeof (Event));
  g_mutex_lock (&lv->lock);
  if (lv->peers[rank].state != SHOAL_RANK_LOST)
    lose (lv, rank, g_strdup (why), events);
  g_mutex_unlock (&lv->lock);
  dispatch (lv, events);
}

void
shoal_liveness_check (ShoalLiveness *lv, gint64 now_us)
{
  GArray *events = g_array_new (FALSE, FALSE, sizeof (Event));
  g_mutex_lock (&lv->lock);
  for (int r = 0; r < lv->nranks; r++)
    {
      Peer *p = &lv->peers[r];
      if (p->state == SHOAL_RANK_WAITING && now_us - lv->started_at >= lv->rules.stalled_after_us)
        lose (lv, r, g_strdup_printf (SHOAL_LIVENESS_NEVER_HEARD " in %.0f s (it did not start, or cannot reach "
                                      "this process)", (double) (now_us - lv->started_at) / 1e6),
              events);
      else if (p->state == SHOAL_RANK_ALIVE && now_us - p->heard_at >= lv->rules.lost_after_us)
        lose (lv, r, g_strdup_printf ("no heartbeat for %.1f s (stopped, hung, or unreachable)",
                                      (double) (now_us - p->heard_at) / 1e6), events);
      else if (p->state == SHOAL_RANK_ALIVE && p->progress >= 0
               && now_us - p->progress_at >= lv->rules.stalled_after_us)
        lose (lv, r, g_strdup_printf ("alive but no step done for %.0f s (wedged?)",
                                      (double) (now_us - p->progress_at) / 1e6), events);
    }
  g_mutex_unlock (&lv->lock);
  dispatch (lv, events);
}

GBytes *
shoal_liveness_lost_list (ShoalLiveness *lv)
{
  GByteArray *a = g_byte_array_new ();
  g_mutex_lock (&lv->lock);
  for (int r = 0; r < lv->nranks; r++)
    if (lv->peers[r].demoted)
      {
        guint8 rec[16] = { 0 };
        gint32 rank = GINT32_TO_LE (r);
        /* a rank lost once and heard again since (a process that rejoined) */
        gint32 flags = GINT32_TO_LE (lv->peers[r].state != SHOAL_RANK_LOST && lv->peers[r].lost_incarnation != 0
                                     ? SHOAL_LOST_LIST_BACK : 0);
        gint64 inc = GINT64_TO_LE (lv->peers[r].lost_incarnation);
        memcpy (rec, &rank, 4);
        memcpy (rec + 4, &flags, 4);
        memcpy (rec + 8, &inc, 8);
        g_byte_array_append (a, rec, sizeof rec);
      }
  g_mutex_unlock (&lv->lock);
  return g_byte_array_free_to_bytes (a);
}

void
shoal_liveness_learn (ShoalLiveness *lv, int from, const guint8 *list, gsize len)
{
  if (list == NULL || len % 16 != 0)
    return;
  GArray *events = g_array_new (FALSE, FALSE, sizeof (Event));
  g_mutex_lock (&lv->lock);
  for (gsize off = 0; off < len; off += 16)
    {
      gint32 rank, flags;
      gint64 inc;
      memcpy (&rank, list + off, 4);
      memcpy (&flags, list + off + 4, 4);
      memcpy (&inc, list + off + 8, 8);
      rank = GINT32_FROM_LE (rank);
      flags = GINT32_FROM_LE (flags);
      inc = GINT64_FROM_LE (inc);
      if (rank < 0 || rank >= lv->nranks)
        continue;
      Peer *p = &lv->peers[rank];
      p->demoted = TRUE;
      /* a rank's word about itself says it was lost once (a restarted
       * process that rejoined demotes itself), not that it is lost */
      if (rank == lv->self || rank == from)
        continue;
      /* the process the peer lost is the one known here (or none is) */
      gboolean same = p->incarnation == 0 || inc == 0 || inc == p->incarnation;
      if ((flags & SHOAL_LOST_LIST_BACK) != 0)
        {
          /* the peer heard a restart of the rank rejoin.  A rank this
           * table watches is taken back when it is heard itself (its new
           * incarnation); one it only learns of from peers (a Downpour
           * worker process hears no other worker process) is taken back
           * now, its lost process's incarnation forgotten, so that a loss
           * of the new process is learned again. */
          if (!p->watched && p->state == SHOAL_RANK_LOST && (inc == 0 || inc == p->lost_incarnation))
            {
              p->state = SHOAL_RANK_UNWATCHED;
              p->incarnation = 0;
              Event e = { rank, NULL };
              g_array_append_val (events, e);
            }
          continue;
        }
      if (same && p->state != SHOAL_RANK_LOST && p->state != SHOAL_RANK_DONE)
        {
          if (p->incarnation == 0)
            p->incarnation = inc;
          lose (lv, rank, g_strdup_printf ("declared lost by rank %d", from), events);
        }
    }
  g_mutex_unlock (&lv->lock);
  dispatch (lv, events);
}

ShoalRankState
shoal_liveness_state (ShoalLiveness *lv, int rank)
{
  if (rank < 0 || rank >= lv->nranks)
    return SHOAL_RANK_UNWATCHED;
  g_mutex_lock (&lv->lock);
  ShoalRankState s = lv->peers[rank].state;
  g_mutex_unlock (&lv->lock);
  return s;
}

gboolean
shoal_liveness_demoted (ShoalLiveness *lv, int rank)
{
  if (rank < 0 || rank >= lv->nranks)
    return FALSE;
  g_mutex_lock (&lv->lock);
  gboolean d = lv->peers[rank].demoted;
  g_mutex_unlock (&lv->lock);
  return d;
}

void
shoal_liveness_demote (ShoalLiveness *lv, int rank)
{
  if (rank < 0 || rank >= lv->nranks)
    return;
  g_mutex_lock (&lv->lock);
  lv->peers[rank].demoted = TRUE;
  g_mutex_unlock (&lv->lock);
}

/* ---- progress -------------------------------------------------------- */

static gint training_units;   /* atomic */
static gint64 progress_count; /* atomic */

void
shoal_progress_training (gboolean begins)
{
  if (begins)
    g_atomic_int_inc (&training_units);
  else
    g_atomic_int_dec_and_test (&training_units);
}

void
shoal_progress_note (void)
{
  __atomic_add_fetch (&progress_count, 1, __ATOMIC_RELAXED);
}

gint64
shoal_progress_value (void)
{
  if (g_atomic_int_get (&training_units) <= 0)
    return -1;
  return __atomic_load_n (&progress_count, __ATOMIC_RELAXED);
}

gint64
shoal_liveness_incarnation (void)
{
  static gint64 value;
  static gsize once;
  if (g_once_init_enter (&once))
    {
      /* pid and start time: positive, never 0 (0 means "unknown") */
      value = ((g_get_real_time () & G_GINT64_CONSTANT (0x7fffffffffff)) << 16) ^ (gint64) getpid ();
      if (value <= 0)
        value = 1;
      g_once_init_leave (&once, 1);
    }
  return value;
}
