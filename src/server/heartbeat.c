/* The heartbeat thread; see server/heartbeat.h. */
#include "server/heartbeat.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/thread_start.h"

struct _ShoalHeartbeat {
  ShoalHeartbeatOptions o;
  ShoalRpcClientOptions *peers;   /* [nranks], strings owned */
  ShoalRpcClient **clients;       /* [nranks], connected when first needed */
  gboolean *refused;              /* [nranks]: its refusal was reported */
  gboolean *answered;             /* [nranks]: it answered a beat once */
  GThread *thread;
  GMutex lock;
  GCond wake;
  gboolean stop;                  /* under lock */
};

int
shoal_heartbeat_pipe_from_env (void)
{
  const char *v = g_getenv ("SHOAL_HEARTBEAT_FD");
  gint64 fd = -1;
  if (v == NULL || !g_ascii_string_to_signed (v, 10, 0, 65535, &fd, NULL))
    return -1;
  /* the launcher's: it is open and a pipe, or it is not ours */
  int flags = fcntl ((int) fd, F_GETFL);
  if (flags < 0)
    return -1;
  fcntl ((int) fd, F_SETFL, flags | O_NONBLOCK);
  fcntl ((int) fd, F_SETFD, FD_CLOEXEC);
  return (int) fd;
}

void
shoal_heartbeat_pipe_fatal (int pipe_fd, int rank, const char *why)
{
  if (pipe_fd < 0 || why == NULL)
    return;
  G_STATIC_ASSERT (sizeof (ShoalBeatRecord) + SHOAL_BEAT_TEXT_MAX <= PIPE_BUF);
  gsize len = MIN (strlen (why), (gsize) SHOAL_BEAT_TEXT_MAX);
  guint8 buf[sizeof (ShoalBeatRecord) + SHOAL_BEAT_TEXT_MAX];
  ShoalBeatRecord rec = { rank, SHOAL_BEAT_FATAL, (gint64) len };
  memcpy (buf, &rec, sizeof rec);
  memcpy (buf + sizeof rec, why, len);
  /* one write up to PIPE_BUF: atomic, never interleaved with beats */
  if (write (pipe_fd, buf, sizeof rec + len) < 0)
    g_debug ("rank %d: cannot tell the launcher why it stops: %s", rank, g_strerror (errno));
}

void
shoal_heartbeat_pipe_stop (int pipe_fd, int rank, int sig)
{
  ShoalBeatRecord rec = { rank, SHOAL_BEAT_STOP, sig };
  /* from a signal handler: nothing but the write */
  if (pipe_fd >= 0 && write (pipe_fd, &rec, sizeof rec) < 0)
    return;
}

static void
write_pipe (ShoalHeartbeat *hb, gint64 progress)
{
  if (hb->o.pipe_fd < 0)
    return;
  ShoalBeatRecord rec = { hb->o.rank, SHOAL_BEAT_PROGRESS, progress };
  /* non-blocking: a launcher that stopped reading loses beats, nothing waits */
  if (write (hb->o.pipe_fd, &rec, sizeof rec) < 0 && errno != EAGAIN && errno != EINTR)
    hb->o.pipe_fd = -1;
}

static void
beat_peer (ShoalHeartbeat *hb, int r, gint64 progress)
{
  ShoalRankState state = shoal_liveness_state (hb->o.liveness, r);
  if (state == SHOAL_RANK_LOST)
    return;
  GError *e = NULL;
  if (hb->clients[r] == NULL)
    hb->clients[r] = shoal_rpc_client_connect (&hb->peers[r], &e);
  GBytes *lost = NULL;
  gboolean ok = hb->clients[r] != NULL
                && shoal_rpc_client_heartbeat (hb->clients[r], hb->o.rank, shoal_liveness_incarnation (), progress,
                                               hb->o.rejoin, &lost, &e);
  /* a peer sent a stop signal answers, but stops the job */
  gboolean stopping = g_error_matches (e, SHOAL_ERROR, SHOAL_ERROR_STOPPED);
  if (ok || stopping)
    {
      hb->answered[r] = TRUE;
      shoal_liveness_heard (hb->o.liveness, r, 0, SHOAL_PROGRESS_UNKNOWN, FALSE, g_get_monotonic_time (),
                            NULL);
    }
  if (ok)
    {
      gsize len = 0;
      const guint8 *list = g_bytes_get_data (lost, &len);
      shoal_liveness_learn (hb->o.liveness, r, list, len);
      g_bytes_unref (lost);
    }
  else if (stopping && hb->o.on_stopping != NULL)
    hb->o.on_stopping (hb->o.data, r);
  else if (g_error_matches (e, SHOAL_ERROR, SHOAL_ERROR_LOST) && !hb->refused[r])
    {
      hb->refused[r] = TRUE;
      if (hb->o.on_refused != NULL)
        hb->o.on_refused (hb->o.data, r, e);
    }
  /* anything else: the peer stays silent, and the rules decide */
  g_clear_error (&e);
}

/* A peer that never answered (not listening yet at the start) is tried
 * this often until it does, so that it hears from this process soon after
 * it comes up: a process stopped right after its first steps is then
 * known to the others, which find it silent within heartbeat_timeout
 * rather than never heard from within progress_timeout. */
#define FIRST_CONTACT_US (100 * 1000)

static gpointer
beat_main (gpointer data)
{
  ShoalHeartbeat *hb = data;
  gint64 interval_us = (gint64) (hb->o.interval_s * 1e6);
  gint64 next_round = g_get_monotonic_time () + interval_us;
  g_mutex_lock (&hb->lock);
  while (!hb->stop)
    {
      g_mutex_unlock (&hb->lock);
      gint64 now = g_get_monotonic_time ();
      gboolean round = now >= next_round;
      gint64 progress = shoal_progress_value ();
      if (round)
        {
          next_round = now + interval_us;
          write_pipe (hb, progress);
        }
      gboolean waiting = FALSE;
      for (int r = 0; r < hb->o.nranks; r++)
        if (r != hb->o.rank && hb->peers[r].host != NULL && (round || !hb->answered[r]))
          {
            beat_peer (hb, r, progress);
            waiting |= !hb->answered[r] && shoal_liveness_state (hb->o.liveness, r) != SHOAL_RANK_LOST;
          }
      if (round)
        shoal_liveness_check (hb->o.liveness, g_get_monotonic_time ());
      gint64 next = waiting ? MIN (next_round, g_get_monotonic_time () + FIRST_CONTACT_US) : next_round;
      g_mutex_lock (&hb->lock);
      while (!hb->stop && g_get_monotonic_time () < next)
        g_cond_wait_until (&hb->wake, &hb->lock, next);
    }
  g_mutex_unlock (&hb->lock);
  return NULL;
}

static void
heartbeat_free (ShoalHeartbeat *hb)
{
  for (int r = 0; r < hb->o.nranks; r++)
    {
      shoal_rpc_client_free (hb->clients[r]);
      g_free ((char *) hb->peers[r].host);
      g_free ((char *) hb->peers[r].token);
    }
  g_free (hb->clients);
  g_free (hb->peers);
  g_free (hb->refused);
  g_free (hb->answered);
  g_mutex_clear (&hb->lock);
  g_cond_clear (&hb->wake);
  g_free (hb);
}

ShoalHeartbeat *
shoal_heartbeat_start (const ShoalHeartbeatOptions *opts, GError **error)
{
  g_return_val_if_fail (opts != NULL && opts->liveness != NULL && opts->interval_s > 0
                          && opts->call_timeout_ms > 0 && opts->nranks >= 1, NULL);
  ShoalHeartbeat *hb = g_new0 (ShoalHeartbeat, 1);
  hb->o = *opts;
  g_mutex_init (&hb->lock);
  g_cond_init (&hb->wake);
  hb->peers = g_new0 (ShoalRpcClientOptions, opts->nranks);
  hb->clients = g_new0 (ShoalRpcClient *, opts->nranks);
  hb->refused = g_new0 (gboolean, opts->nranks);
  hb->answered = g_new0 (gboolean, opts->nranks);
  for (int r = 0; r < opts->nranks; r++)
    if (opts->peers != NULL && opts->peers[r].host != NULL)
      {
        hb->peers[r] = opts->peers[r];
        hb->peers[r].host = g_strdup (opts->peers[r].host);
        hb->peers[r].token = g_strdup (opts->peers[r].token);
        hb->peers[r].timeout_ms = opts->call_timeout_ms;
        hb->peers[r].connect_retries = 1;   /* the next beat tries again */
        hb->peers[r].max_message_bytes = 1 << 20;
      }
  /* the first round before anything else: who is there, who is lost */
  gint64 progress = shoal_progress_value ();
  write_pipe (hb, progress);
  for (int r = 0; r < hb->o.nranks; r++)
    if (r != hb->o.rank && hb->peers[r].host != NULL)
      beat_peer (hb, r, progress);
  hb->thread = shoal_thread_start ("heartbeat", beat_main, hb, error);
  if (hb->thread == NULL)
    {
      g_prefix_error (error, "heartbeat: ");
      heartbeat_free (hb);
      return NULL;
    }
  return hb;
}

void
shoal_heartbeat_stop (ShoalHeartbeat *hb)
{
  if (hb == NULL)
    return;
  g_mutex_lock (&hb->lock);
  hb->stop = TRUE;
  g_cond_broadcast (&hb->wake);
  g_mutex_unlock (&hb->lock);
  g_thread_join (hb->thread);
  heartbeat_free (hb);
}
