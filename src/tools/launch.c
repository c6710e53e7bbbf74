/* Starting the processes of a cluster layout.
 *
 * `shoal run` on one machine is its own launcher: it resolves the conf
 * once (topology and overrides applied), takes the workspace for the run
 * (workspace/workspace_claim.h: an earlier run's files move aside, a resume
 * must continue the same run), writes the conf with a fresh job token
 * into it, picks free loopback ports for the ranks that listen
 * (shoal_layout_rank_listens: servers, workers of a group spread over
 * processes) and forks one `shoal proc` per rank.  It then waits: it
 * forwards SIGINT/SIGTERM, hears every rank's heartbeat on a pipe
 * (server/heartbeat.h) and kills a rank that went silent or stopped
 * making progress (server/liveness.h's rules, the [cluster] timeouts),
 * and a watchdog stops the survivors when a failure leaves them waiting
 * for a peer that is gone, so a run always ends.  A lost worker group of
 * an asynchronous scheme is restarted with --rejoin when asked.  On a
 * cluster an existing launcher (mpirun, srun) starts `shoal proc`
 * itself; the rank comes from its environment and the endpoints from a
 * hostfile, and the ranks' own heartbeats decide who is lost. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/token.h"
#include "cluster/endpoints.h"
#include "cluster/layout.h"
#include "server/heartbeat.h"
#include "rpc/tls_certs.h"
#include "tools/commands.h"
#include "metrics/cluster_log.h"
#include "job/net_check.h"
#include "metrics/metrics.h"
#include "run/runner.h"
#include "workspace/resume_plan.h"
#include "workspace/workspace.h"
#include "workspace/workspace_claim.h"
#include "workspace/workspace_lock.h"

/* After the last worker process ended, server-only processes get this
 * long to notice and exit before they are stopped. */
#define SERVER_GRACE_S 10
/* After SIGTERM, survivors get this long before SIGKILL. */
#define KILL_GRACE_S 10

/* What the launcher takes synchronously (sigtimedwait): the user's stop
 * signals and its children's ends. */
static void
launcher_signals (sigset_t *set)
{
  sigemptyset (set);
  sigaddset (set, SIGINT);
  sigaddset (set, SIGTERM);
  sigaddset (set, SIGHUP);
  sigaddset (set, SIGCHLD);
}

/* Written with mode 0600 even when the file existed with another mode:
 * whoever reads the token can call every server of the job. */
static gboolean
write_token (const char *path, const char *token, GError **error)
{
  int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  gboolean ok = fd >= 0 && fchmod (fd, 0600) == 0;
  size_t len = strlen (token);
  ok = ok && write (fd, token, len) == (ssize_t) len && write (fd, "\n", 1) == 1;
  if (!ok)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: cannot write the job token: %s", path,
                 g_strerror (errno));
  if (fd >= 0 && close (fd) != 0 && ok)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: %s", path, g_strerror (errno));
      ok = FALSE;
    }
  return ok;
}


typedef struct {
  pid_t pid;
  int status;
  gboolean running;
  gboolean has_workers;
  gboolean stopped;      /* signalled by the launcher (a stop, not a loss) */
  gboolean lost;         /* killed by the launcher: silent or wedged */
  char *lost_why;
  gboolean heard;        /* a heartbeat came */
  double heard_at, progress_at;
  gint64 progress;
  int rejoins;           /* times this rank was restarted to rejoin */
  gboolean rejoining;    /* its running process is such a restart */
  const char *shown;     /* the state the last "cluster" line gave it (metrics/cluster_log.h) */
} Child;

/* One start of the job's processes. */
typedef struct {
  const ShoalLayout *layout;
  const ShoalLaunchOptions *o;
  const char *workspace;
  const char *conf_path, *token_path, *metrics_path;
  char *tls_dir;            /* credentials this launcher made ([tls] mode = all without any); NULL: none */
  char *endpoint_list;
  const ShoalResumePlan *resume;  /* NULL for a fresh run */
  char host_workers[16];
  int beat[2];                 /* the heartbeat pipe: read end here, write end in every child */
  int lock_fd;                 /* the workspace's lock (workspace/workspace_lock.h), inherited by every child */
  sigset_t old_mask;
  pid_t parent;
  Child *children;
  int restarts;                /* group restarts, all ranks together */
  int first_failed;            /* the rank that failed first (-1: none), and how */
  char *first_failed_how;
  int fatal_rank;              /* the first rank that said why it stops the job (-1: none), and why */
  char *fatal_why;
  int stop_rank, stop_sig;     /* the first rank sent a stop signal by someone else (-1: none), and which */
  ShoalMetricsWriter *cluster_log;  /* the "cluster" lines of metrics.jsonl */
} Launch;

static double
now_s (void)
{
  return (double) g_get_monotonic_time () / 1e6;
}

static char *
describe_rank (const ShoalLayout *layout, int r)
{
  return shoal_layout_describe_rank (layout, r);
}

static char *
describe_status (int status)
{
  if (WIFEXITED (status))
    return g_strdup_printf ("exit %d", WEXITSTATUS (status));
  if (WIFSIGNALED (status))
    return g_strdup_printf ("killed by signal %d (%s)", WTERMSIG (status), g_strsignal (WTERMSIG (status)));
  return g_strdup_printf ("status %d", status);
}

static void
signal_running (Child *children, int n, int sig)
{
  for (int r = 0; r < n; r++)
    if (children[r].running)
      {
        kill (children[r].pid, sig);
        children[r].stopped = TRUE;
      }
}

static goffset
file_size (const char *path)
{
  GStatBuf st;
  return g_stat (path, &st) == 0 ? (goffset) st.st_size : -1;
}

/* Forks rank r as a `shoal proc` child (rejoin: a restart that joins the
 * running job).  FALSE with error when fork fails. */
static gboolean
spawn (Launch *L, int r, gboolean rejoin, GError **error)
{
  char rank[16], resume_step[32];
  g_snprintf (rank, sizeof rank, "%d", r);
  const char *argv[24] = { "shoal", "proc", L->conf_path, "--rank", rank, "--endpoints", L->endpoint_list,
                           "--token-file", L->token_path, "--workspace", L->workspace,
                           "--host-workers", L->host_workers };
  int argc = 13;
  if (rejoin)
    argv[argc++] = "--rejoin";
  else if (L->resume != NULL)
    {
      g_snprintf (resume_step, sizeof resume_step, "%" G_GINT64_FORMAT, L->resume->rank_steps[r]);
      argv[argc++] = "--resume-step";
      argv[argc++] = resume_step;
    }
  if (L->o->quiet)
    argv[argc++] = "--quiet";
  if (L->tls_dir != NULL)
    {
      argv[argc++] = "--tls-dir";
      argv[argc++] = L->tls_dir;
    }
  argv[argc] = NULL;
  fflush (NULL);
  pid_t pid = fork ();
  if (pid == 0)
    {
      /* own process group: a terminal's Ctrl-C reaches the launcher,
       * which forwards it once; and a launcher that dies takes its
       * children with it */
      setpgid (0, 0);
      prctl (PR_SET_PDEATHSIG, SIGTERM);
      if (getppid () != L->parent)
        _exit (1);
      /* the heartbeat pipe's write end stays open across exec, and so
       * does the workspace's lock: the claim lasts while any rank runs */
      fcntl (L->beat[1], F_SETFD, 0);
      if (L->lock_fd >= 0)
        fcntl (L->lock_fd, F_SETFD, 0);
      sigprocmask (SIG_SETMASK, &L->old_mask, NULL);
      execv ("/proc/self/exe", (char **) argv);
      _exit (127);
    }
  if (pid < 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "fork: %s", g_strerror (errno));
      return FALSE;
    }
  Child *c = &L->children[r];
  int rejoins = c->rejoins;
  g_free (c->lost_why);
  *c = (Child) { .pid = pid, .running = TRUE, .has_workers = L->layout->procs[r].workers->len > 0,
                 .heard_at = now_s (), .progress_at = now_s (), .progress = -1, .rejoins = rejoins,
                 .rejoining = rejoin };
  return TRUE;
}

/* Every beat in the pipe: who is alive, and their progress. */
static void
read_beats (Launch *L, double now)
{
  ShoalBeatRecord rec;
  while (read (L->beat[0], &rec, sizeof rec) == (ssize_t) sizeof rec)
    {
      if (rec.kind == SHOAL_BEAT_FATAL)
        {
          /* its text came in the same (atomic) write */
          char text[SHOAL_BEAT_TEXT_MAX + 1];
          gint64 len = CLAMP (rec.progress, 0, SHOAL_BEAT_TEXT_MAX);
          ssize_t got = len > 0 ? read (L->beat[0], text, (size_t) len) : 0;
          if (got < 0)
            continue;
          text[got] = '\0';
          if (L->fatal_why == NULL && rec.rank >= 0 && rec.rank < L->layout->nprocs)
            {
              L->fatal_rank = rec.rank;
              L->fatal_why = g_strdup (text);
            }
          continue;
        }
      if (rec.kind == SHOAL_BEAT_STOP)
        {
          if (L->stop_rank < 0 && rec.rank >= 0 && rec.rank < L->layout->nprocs)
            {
              L->stop_rank = rec.rank;
              L->stop_sig = (int) rec.progress;
            }
          continue;
        }
      if (rec.rank < 0 || rec.rank >= L->layout->nprocs || !L->children[rec.rank].running)
        continue;
      Child *c = &L->children[rec.rank];
      c->heard = TRUE;
      c->heard_at = now;
      if (rec.progress != c->progress || rec.progress < 0)
        c->progress_at = now;
      c->progress = rec.progress;
    }
}

/* The liveness rules (server/liveness.h) on what the pipe said: why rank
 * r is lost, or NULL. */
static char *
lost_why (Launch *L, const Child *c, double now, double started)
{
  const ShoalClusterConf *cc = &L->layout->conf;
  if (!c->heard && now - started >= cc->progress_timeout)
    return g_strdup_printf ("never heard from in %.0f s", now - started);
  if (c->heard && now - c->heard_at >= cc->heartbeat_timeout)
    return g_strdup_printf ("no heartbeat for %.1f s (stopped, hung, or out of the machine's reach)",
                            now - c->heard_at);
  if (c->heard && c->progress >= 0 && now - c->progress_at >= cc->progress_timeout)
    return g_strdup_printf ("alive but no step done for %.0f s (wedged?)", now - c->progress_at);
  return NULL;
}

/* What the dashboard shows of rank r: a "cluster" line when it changed. */
static void
show_state (Launch *L, int r, double now)
{
  Child *c = &L->children[r];
  const char *state;
  char *why = NULL;
  if (!c->running)
    {
      gboolean killed = WIFSIGNALED (c->status) && !c->stopped;
      state = c->lost || killed ? "lost"
              : WIFEXITED (c->status) && WEXITSTATUS (c->status) == 0 ? "done" : c->stopped ? "stopped" : "failed";
      why = c->lost ? g_strdup (c->lost_why) : describe_status (c->status);
    }
  else if (!c->heard)
    state = "waiting";
  else if (now - c->heard_at > SHOAL_LATE_BEATS * L->layout->conf.heartbeat_interval)
    {
      state = "late";
      why = g_strdup_printf ("no heartbeat for %.1f s", now - c->heard_at);
    }
  else
    state = c->rejoining ? "rejoined" : "alive";
  if (c->shown != state)
    shoal_cluster_log_rank (L->cluster_log, r, state, (int) c->pid, why);
  c->shown = state;
  g_free (why);
}

/* A worker group of an asynchronous scheme whose loss the job survives:
 * its workers all in this rank (its servers, in Hogwild, are its own). */
static gboolean
tolerated_group_rank (const ShoalLayout *layout, int r)
{
  const ShoalProcess *p = &layout->procs[r];
  const ShoalClusterConf *c = &layout->conf;
  return layout->mode == SHOAL_UPDATE_ASYNC && !c->all_groups_required && p->workers->len > 0
         && c->nworkers_per_procs >= c->nworkers_per_group && (p->servers->len == 0 || layout->group_sync);
}

/* Waits for every child, forwarding signals, hearing heartbeats and
 * running the watchdog.  Returns TRUE when the launcher itself was
 * interrupted. */
static gboolean
supervise (Launch *L)
{
  const ShoalLayout *layout = L->layout;
  Child *children = L->children;
  int n = layout->nprocs;
  int running = n;
  gboolean interrupted = FALSE, failed = FALSE, stopping = FALSE;
  double started = now_s ();
  double kill_at = 0, workers_done_at = 0, progress_at = started;
  double fatal_death_at = 0;   /* when a rank the job cannot do without ended (0: none) */
  goffset metrics_seen = file_size (L->metrics_path);
  sigset_t set;
  launcher_signals (&set);

  while (running > 0)
    {
      struct timespec tick = { 0, 250 * 1000 * 1000 };
      int sig = sigtimedwait (&set, NULL, &tick);
      double now = now_s ();
      read_beats (L, now);
      if (L->stop_rank >= 0 && !children[L->stop_rank].has_workers && !failed && !interrupted && !stopping)
        {
          /* a signal to a server process alone (a scheduler preempting
           * its node): it serves on until the workers say done, which
           * they do only when they stop too, so the whole job stops as
           * on Ctrl-C, everyone with a checkpoint.  It once served 5 s,
           * exited, and the workers failed on its closed port. */
          char *who = describe_rank (layout, L->stop_rank);
          fprintf (stderr, "shoal run: %s was sent %s; stopping %d process%s with a checkpoint\n", who,
                   L->stop_sig == SIGINT ? "SIGINT" : L->stop_sig == SIGTERM ? "SIGTERM" : g_strsignal (L->stop_sig),
                   running, running == 1 ? "" : "es");
          g_free (who);
          signal_running (children, n, SIGINT);
          interrupted = TRUE;
          kill_at = now + KILL_GRACE_S;
        }

      int status;
      pid_t pid;
      while ((pid = waitpid (-1, &status, WNOHANG)) > 0)
        for (int r = 0; r < n; r++)
          if (children[r].running && children[r].pid == pid)
            {
              Child *c = &children[r];
              c->running = FALSE;
              c->status = status;
              running--;
              gboolean clean = WIFEXITED (status) && WEXITSTATUS (status) == 0;
              if (WIFEXITED (status) && WEXITSTATUS (status) == 130 && !failed && !interrupted && !stopping)
                {
                  /* a signal sent to one rank alone (a scheduler preempting its
                   * node): the job stops with it, everyone with a checkpoint.
                   * The first rank to end need not be the one signalled (a SYNC
                   * group's other processes stop at the same step), so the
                   * message says only what is known */
                  char *who = describe_rank (layout, r);
                  fprintf (stderr, "shoal run: %s stopped with a checkpoint (a stop request); stopping %d "
                           "process%s\n", who, running, running == 1 ? "" : "es");
                  g_free (who);
                  signal_running (children, n, SIGINT);
                  interrupted = TRUE;
                  kill_at = now + KILL_GRACE_S;
                  continue;
                }
              if (clean || interrupted || stopping)
                continue;
              gboolean others_train = FALSE;
              for (int q = 0; q < n; q++)
                others_train |= q != r && children[q].running && children[q].has_workers;
              if (L->o->rejoin && tolerated_group_rank (layout, r) && others_train
                  && L->restarts < L->o->max_restarts)
                {
                  /* the others go on; the group comes back with the current values */
                  char *who = describe_rank (layout, r);
                  char *how = c->lost ? g_strdup_printf ("lost: %s", c->lost_why) : describe_status (status);
                  L->restarts++;
                  c->rejoins++;
                  fprintf (stderr, "shoal run: %s: %s; restarting it to rejoin the running job (restart %d of "
                           "%d)\n", who, how, L->restarts, L->o->max_restarts);
                  show_state (L, r, now);
                  shoal_cluster_log_restart (L->cluster_log, r, L->restarts, L->o->max_restarts, how);
                  g_free (how);
                  g_free (who);
                  GError *e = NULL;
                  if (spawn (L, r, TRUE, &e))
                    running++;
                  else
                    {
                      fprintf (stderr, "shoal run: %s\n", e->message);
                      g_error_free (e);
                    }
                  continue;
                }
              if (!failed)
                {
                  char *who = describe_rank (layout, r);
                  char *how = c->lost ? g_strdup_printf ("lost: %s; killed", c->lost_why) : describe_status (status);
                  if (tolerated_group_rank (layout, r))
                    fprintf (stderr, "shoal run: %s failed: %s; the others go on without its group\n", who, how);
                  else
                    fprintf (stderr, "shoal run: %s failed: %s; the others get %.1f s to find it lost before "
                             "they are stopped\n", who, how,
                             layout->conf.heartbeat_timeout + 2 * layout->conf.heartbeat_interval);
                  g_free (who);
                  L->first_failed = r;
                  L->first_failed_how = how;
                  failed = TRUE;
                  progress_at = now;
                  fatal_death_at = tolerated_group_rank (layout, r) ? 0 : now;
                }
            }

      if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP)
        {
          if (!interrupted)
            {
              fprintf (stderr, "shoal run: %s: stopping %d process%s\n", g_strsignal (sig), running,
                       running == 1 ? "" : "es");
              signal_running (children, n, sig);
              interrupted = TRUE;
              kill_at = now + KILL_GRACE_S;
            }
          else
            signal_running (children, n, SIGKILL);
        }

      /* liveness: a rank silent or wedged too long is lost; killed, it
       * counts as a rank that died (the rules below decide the rest) */
      if (!interrupted && !stopping)
        for (int r = 0; r < n; r++)
          {
            Child *c = &children[r];
            char *why = c->running && !c->lost && !c->stopped ? lost_why (L, c, now, started) : NULL;
            if (why == NULL)
              continue;
            char *who = describe_rank (layout, r);
            fprintf (stderr, "shoal run: %s lost: %s; killing it\n", who, why);
            g_free (who);
            c->lost = TRUE;
            c->lost_why = why;
            kill (c->pid, SIGKILL);
          }

      for (int r = 0; r < n; r++)
        show_state (L, r, now);
      gboolean workers_running = FALSE;
      for (int r = 0; r < n; r++)
        workers_running |= children[r].running && children[r].has_workers;
      if (!workers_running && workers_done_at == 0)
        workers_done_at = now;
      goffset size = file_size (L->metrics_path);
      if (size != metrics_seen)
        {
          metrics_seen = size;
          progress_at = now;
        }

      if (!stopping && !interrupted && running > 0)
        {
          const char *why = NULL;
          if (!workers_running && now - workers_done_at >= SERVER_GRACE_S)
            why = "the worker processes ended but server processes are still waiting";
          else if (failed && now - progress_at >= L->o->grace_s)
            why = "no progress since a process failed";
          else if (fatal_death_at > 0
                   && now - fatal_death_at >= layout->conf.heartbeat_timeout + 2 * layout->conf.heartbeat_interval)
            /* the others find a lost rank within heartbeat_timeout and
             * stop the job themselves, saying why; one they never heard
             * from (killed as it started) they would wait for as slow to
             * start for progress_timeout (300 s), training on without a
             * group the job cannot do without */
            why = "the others went on after a process the job needs ended";
          if (why != NULL)
            {
              fprintf (stderr, "shoal run: %s; stopping %d process%s\n", why, running,
                       running == 1 ? "" : "es");
              signal_running (children, n, SIGTERM);
              stopping = TRUE;
              kill_at = now + KILL_GRACE_S;
            }
        }
      if ((stopping || interrupted) && kill_at > 0 && now >= kill_at)
        {
          signal_running (children, n, SIGKILL);
          kill_at = 0;
        }
    }
  /* what the last ranks wrote before they ended */
  read_beats (L, now_s ());
  for (int r = 0; r < n; r++)
    show_state (L, r, now_s ());
  return interrupted;
}

typedef struct {
  gboolean seen;
  gint64 step;
  double loss, accuracy;   /* accuracy < 0: none */
} GroupResult;


/* The last test line of each group in metrics.jsonl. */
static GroupResult *
read_results (const char *path, int ngroups)
{
  GroupResult *res = g_new0 (GroupResult, ngroups);
  char *text = NULL;
  if (!g_file_get_contents (path, &text, NULL, NULL))
    return res;
  char **lines = g_strsplit (text, "\n", -1);
  for (int i = 0; lines[i] != NULL; i++)
    {
      double group, step, loss, acc;
      if (strstr (lines[i], "\"phase\":\"test\"") == NULL || !shoal_metrics_line_number (lines[i], "group", &group)
          || !shoal_metrics_line_number (lines[i], "step", &step) || !shoal_metrics_line_number (lines[i], "loss", &loss))
        continue;
      int g = (int) group;
      if (g < 0 || g >= ngroups)
        continue;
      res[g] = (GroupResult) { TRUE, (gint64) step, loss,
                               shoal_metrics_line_number (lines[i], "accuracy", &acc) ? acc : -1 };
    }
  g_strfreev (lines);
  g_free (text);
  return res;
}

/* Every rank runs here: their processes and worker threads share this
 * machine's cores; and the ranks build the net after the workspace is
 * taken, so a net they cannot build must fail here, before an earlier
 * run is moved aside. */
static gboolean
check_launch (ShoalJob *job, const ShoalLayout *layout, const ShoalLaunchOptions *o, GError **error)
{
  int threads = 0;
  for (int r = 0; r < layout->nprocs; r++)
    threads += (int) layout->procs[r].workers->len;
  return shoal_cluster_check_host_procs (job->conf, &layout->conf, layout->nprocs, threads,
                                         (int) g_get_num_processors (), o->oversubscribe, "--oversubscribe", error)
         && shoal_job_check_net (job, error);
}

/* The heartbeat pipe and the workspace, locked: no other live run may use
 * it, taken before its checkpoints are read, held until the last rank
 * ended. */
static gboolean
open_launch (Launch *L, GError **error)
{
  if (pipe2 (L->beat, O_CLOEXEC | O_NONBLOCK) != 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "heartbeat pipe: %s", g_strerror (errno));
      return FALSE;
    }
  /* beats are read, never waited for: the write end must never block a rank */
  fcntl (L->beat[1], F_SETFL, fcntl (L->beat[1], F_GETFL) | O_NONBLOCK);
  if (g_mkdir_with_parents (L->workspace, 0755) != 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: cannot create workspace: %s", L->workspace,
                   g_strerror (errno));
      return FALSE;
    }
  return shoal_workspace_lock (L->workspace, -1, error);
}

/* One start takes the workspace: a resumed run continues from its ranks'
 * checkpoints (*plan, and *ckpt_clock its time; workspace/resume_plan.h),
 * a refused one leaves job.conf as it was; the children read this conf
 * (topology and overrides applied), the new job token (*token) and the
 * metrics.jsonl begun or trimmed to the checkpoint. */
static gboolean
take_workspace (Launch *L, ShoalJob *job, gboolean resume, gboolean own_restart, ShoalResumePlan **plan,
                double *ckpt_clock, char **token, GError **error)
{
  const char *workspace = L->workspace;
  g_clear_pointer (plan, shoal_resume_plan_free);
  *ckpt_clock = -1;
  if (resume)
    {
      *plan = shoal_resume_plan_new (L->layout, workspace, error);
      if (*plan == NULL)
        {
          g_prefix_error (error, "%s: cannot resume: ", workspace);
          return FALSE;
        }
      *ckpt_clock = (*plan)->clock;
    }
  L->resume = *plan;
  char *moved = NULL;
  gboolean claimed = shoal_workspace_claim (workspace, job->conf, resume, L->o->overwrite || own_restart, &moved,
                                            error);
  if (moved != NULL)
    fprintf (stderr, "shoal run: %s held an earlier run: its checkpoint, job.conf and metrics.jsonl moved to %s\n",
             workspace, moved);
  g_free (moved);
  if (!claimed)
    return FALSE;
  L->lock_fd = shoal_workspace_lock_fd (workspace);
  char *lock_fd = g_strdup_printf ("%d", L->lock_fd);
  g_setenv ("SHOAL_WORKSPACE_LOCK_FD", lock_fd, TRUE);
  g_free (lock_fd);
  if (resume && !L->o->quiet)
    {
      char *at = shoal_resume_plan_describe (*plan);
      printf ("shoal run: resuming at %s\n", at);
      g_free (at);
    }
  if (*token != NULL)
    explicit_bzero (*token, strlen (*token));
  g_free (*token);
  return (*token = shoal_token_new (error)) != NULL && write_token (L->token_path, *token, error)
         && (resume || g_file_set_contents (L->metrics_path, "", 0, error))
         && (!resume || shoal_workspace_trim_metrics (workspace, (*plan)->rank_steps[0], (*plan)->group_steps,
                                                      (*plan)->ngroups, *ckpt_clock, ckpt_clock, error));
}

/* What one start of the ranks needs besides the workspace: [tls] mode =
 * all on one machine makes a fresh CA and certificates per start, like
 * the token (docs/SECURITY.md); the loopback endpoints (*endpoints); the
 * children's records cleared. */
static gboolean
prepare_ranks (Launch *L, ShoalJob *job, char ***endpoints, GError **error)
{
  const ShoalLayout *layout = L->layout;
  if (job->tls.mode == SHOAL_TLS_ALL && job->tls.dir == NULL && job->tls.ca == NULL)
    {
      g_free (L->tls_dir);
      L->tls_dir = g_build_filename (L->workspace, "tls", NULL);
      if (!shoal_tls_make_job_certs (L->tls_dir, job->name, layout->nprocs, 7, error))
        return FALSE;
    }
  g_strfreev (*endpoints);
  g_free (L->endpoint_list);
  L->endpoint_list = NULL;
  *endpoints = shoal_endpoints_loopback (layout, error);
  if (*endpoints == NULL)
    return FALSE;
  L->endpoint_list = g_strjoinv (",", *endpoints);
  for (int r = 0; r < layout->nprocs; r++)
    g_free (L->children[r].lost_why);
  memset (L->children, 0, sizeof (Child) * (gsize) layout->nprocs);
  L->restarts = 0;
  g_clear_pointer (&L->first_failed_how, g_free);
  g_clear_pointer (&L->fatal_why, g_free);
  L->first_failed = L->fatal_rank = L->stop_rank = -1;
  return TRUE;
}

/* Starts every rank with the launcher's signals blocked (the caller
 * restores L->old_mask after supervising them); a rank that cannot start
 * stops the ones started before it. */
static gboolean
start_ranks (Launch *L, char **endpoints, double ckpt_clock, int restarts, GError **error)
{
  const ShoalLayout *layout = L->layout;
  sigset_t set;
  launcher_signals (&set);
  sigprocmask (SIG_BLOCK, &set, &L->old_mask);
  /* one clock origin for every process's metrics.jsonl lines; a resumed
   * run's goes on from its checkpoint's time */
  char *start_us = g_strdup_printf ("%" G_GINT64_FORMAT,
                                    g_get_real_time () - (ckpt_clock > 0 ? (gint64) (ckpt_clock * 1e6) : 0));
  g_setenv ("SHOAL_JOB_START_US", start_us, TRUE);
  g_free (start_us);
  L->parent = getpid ();
  /* a rank ignores a second stop signal from its launcher (tools/run.c) */
  char *launcher = g_strdup_printf ("%d", (int) L->parent);
  g_setenv ("SHOAL_LAUNCHER_PID", launcher, TRUE);
  g_free (launcher);
  /* the launcher's own lines, on the ranks' clock */
  shoal_metrics_close (L->cluster_log);
  L->cluster_log = shoal_metrics_open (L->metrics_path, TRUE, NULL);
  shoal_cluster_log_layout (L->cluster_log, layout, endpoints);
  if (restarts > 0)
    shoal_cluster_log_restart (L->cluster_log, -1, restarts, L->o->max_restarts,
                               "a server process died: the job restarted from its last checkpoint");
  char *beat_fd = g_strdup_printf ("%d", L->beat[1]);
  g_setenv ("SHOAL_HEARTBEAT_FD", beat_fd, TRUE);
  g_free (beat_fd);
  int started = 0;
  /* every rank runs here: their worker threads share this machine's cores */
  int all_workers = 0;
  for (int r = 0; r < layout->nprocs; r++)
    all_workers += (int) layout->procs[r].workers->len;
  g_snprintf (L->host_workers, sizeof L->host_workers, "%d", all_workers);
  for (int r = 0; r < layout->nprocs && spawn (L, r, FALSE, error); r++)
    started++;
  if (started == layout->nprocs)
    return TRUE;
  for (int r = 0; r < started; r++)
    {
      kill (L->children[r].pid, SIGTERM);
      waitpid (L->children[r].pid, NULL, 0);
    }
  sigprocmask (SIG_SETMASK, &L->old_mask, NULL);
  return FALSE;
}

/* How the ranks of one start ended. */
typedef struct {
  int nfailed;          /* ranks that failed (lost asynchronous groups aside) */
  int lost_groups;      /* asynchronous groups the job went on without */
  int server_deaths;    /* processes with servers killed from outside or lost */
  GString *lost_names;  /* "group 1, group 3" */
} RankTally;

/* One line per rank on how it ended, and the tally. */
static void
tally_ranks (Launch *L, gboolean interrupted, RankTally *t)
{
  const ShoalLayout *layout = L->layout;
  *t = (RankTally) { .lost_names = g_string_new (NULL) };
  for (int r = 0; r < layout->nprocs; r++)
    {
      Child *c = &L->children[r];
      char *who = describe_rank (layout, r);
      char *how = c->lost ? g_strdup_printf ("lost: %s; killed by shoal run", c->lost_why)
                          : describe_status (c->status);
      gboolean ok = WIFEXITED (c->status) && WEXITSTATUS (c->status) == 0;
      gboolean servers = layout->procs[r].servers->len > 0;
      /* a process killed from outside (not stopped by this launcher), or lost */
      gboolean died = (WIFSIGNALED (c->status) && !c->stopped) || c->lost;
      if (!ok && died && servers && !tolerated_group_rank (layout, r) && !layout->group_sync)
        t->server_deaths++;
      if (!ok && tolerated_group_rank (layout, r) && !interrupted)
        {
          /* an asynchronous scheme goes on without this group */
          t->lost_groups++;
          g_string_append_printf (t->lost_names, "%sgroup %d", t->lost_names->len ? ", " : "",
                                  g_array_index (layout->procs[r].workers, ShoalMember, 0).group);
          fprintf (stderr, "shoal run: %s: %s: the group is lost; the others go on\n", who, how);
        }
      else
        {
          if (!ok)
            t->nfailed++;
          fprintf (ok ? stdout : stderr, "%s%s: %s%s%s\n", ok ? "" : "shoal run: ", who, how,
                   !ok && c->stopped && !c->lost ? " (stopped by shoal run)" : "",
                   ok && c->rejoining ? " (restarted, rejoined the job)" : "");
        }
      g_free (how);
      g_free (who);
    }
}

/* A server process died: whether the job starts again (*restarts below
 * --max-restarts), from the last checkpoint when there is one (*resume). */
static gboolean
restart_after_server_death (const Launch *L, int *restarts, gboolean *resume)
{
  const ShoalLaunchOptions *o = L->o;
  if (*restarts >= o->max_restarts)
    {
      fprintf (stderr, "shoal run: a server process died%s; the job stops here. Its workspace keeps the "
                       "last checkpoint: continue with `shoal run ... --resume`\n",
               o->max_restarts == 0 ? " and --no-restart was given" : " too often");
      return FALSE;
    }
  (*restarts)++;
  fprintf (stderr, "shoal run: a server process died; restarting from the last checkpoint "
                   "(restart %d of %d)\n", *restarts, o->max_restarts);
  *resume = TRUE;
  GError *probe = NULL;
  ShoalResumePlan *at = shoal_resume_plan_new (L->layout, L->workspace, &probe);
  if (at == NULL)
    {
      fprintf (stderr, "shoal run: no checkpoint yet (%s); starting over\n", probe->message);
      *resume = FALSE;
    }
  shoal_resume_plan_free (at);
  g_clear_error (&probe);
  return TRUE;
}

/* Each group's test result and the job's last word; returns the exit
 * status. */
static int
report_results (const Launch *L, gboolean interrupted, const RankTally *t)
{
  const ShoalLayout *layout = L->layout;
  const char *metrics_path = L->metrics_path;
  int status;
  int ngroups = layout->conf.nworker_groups;
  GroupResult *res = read_results (metrics_path, ngroups);
  for (int g = 0; g < ngroups; g++)
    if (!res[g].seen)
      printf ("group %d: no test result\n", g);
    else if (res[g].accuracy >= 0)
      printf ("group %d: test accuracy %.4f, loss %.6f at step %" G_GINT64_FORMAT "\n", g,
              res[g].accuracy, res[g].loss, res[g].step);
    else
      printf ("group %d: test loss %.6f at step %" G_GINT64_FORMAT "\n", g, res[g].loss, res[g].step);
  printf ("metrics in %s\n", metrics_path);
  if (interrupted)
    {
      fprintf (stderr, "shoal run: interrupted\n");
      status = 130;
    }
  else if (t->nfailed > 0)
    {
      /* the job's last word names what was lost and why, not what the
       * last ranks saw (a server process that stopped the job and exited:
       * "connection closed") */
      fprintf (stderr, "shoal run: %d of %d processes failed", t->nfailed, layout->nprocs);
      /* the rank that stopped the job says more than its exit status */
      if (L->first_failed >= 0 && L->first_failed != L->fatal_rank)
        {
          char *who = describe_rank (layout, L->first_failed);
          fprintf (stderr, "; first %s: %s", who, L->first_failed_how);
          g_free (who);
        }
      if (L->fatal_why != NULL)
        {
          char *who = describe_rank (layout, L->fatal_rank);
          fprintf (stderr, "; %s stopped the job: %s", who, L->fatal_why);
          g_free (who);
        }
      fputc ('\n', stderr);
      status = 1;
    }
  else
    {
      /* the first group with a result speaks for the job (group 0 unless it was lost) */
      int g0 = 0;
      while (g0 < ngroups && !res[g0].seen)
        g0++;
      if (g0 == ngroups)
        {
          fprintf (stderr, "shoal run: %s has no test result of any group\n", metrics_path);
          status = 1;
        }
      else
        {
          if (t->lost_groups > 0)
            printf ("%d worker group%s lost (%s); the job finished without %s\n", t->lost_groups,
                    t->lost_groups == 1 ? "" : "s", t->lost_names->str, t->lost_groups == 1 ? "it" : "them");
          if (res[g0].accuracy >= 0)
            printf ("final test accuracy: %.4f\n", res[g0].accuracy);
          else
            printf ("final test loss: %.6f\n", res[g0].loss);
          status = 0;
        }
    }
  g_free (res);
  return status;
}

/* What the launcher held, given back whatever the outcome. */
static void
release_launch (Launch *L)
{
  for (int r = 0; r < L->layout->nprocs; r++)
    g_free (L->children[r].lost_why);
  g_free (L->first_failed_how);
  g_free (L->fatal_why);
  shoal_metrics_close (L->cluster_log);
  g_free (L->children);
  g_free (L->endpoint_list);
  if (L->beat[0] >= 0)
    {
      close (L->beat[0]);
      close (L->beat[1]);
    }
  shoal_workspace_unlock (L->workspace);
  g_free (L->tls_dir);
}

int
shoal_launch (ShoalJob *job, const ShoalLayout *layout, const char *workspace, const ShoalLaunchOptions *o)
{
  GError *error = NULL;
  char *conf_path = g_build_filename (workspace, "job.conf", NULL);
  char *token_path = g_build_filename (workspace, "token", NULL);
  char *metrics_path = g_build_filename (workspace, "metrics.jsonl", NULL);
  char **endpoints = NULL;
  Launch L = { .layout = layout, .o = o, .workspace = workspace, .conf_path = conf_path,
               .token_path = token_path, .metrics_path = metrics_path, .beat = { -1, -1 }, .lock_fd = -1,
               .first_failed = -1, .fatal_rank = -1, .stop_rank = -1 };
  L.children = g_new0 (Child, layout->nprocs);
  gboolean resume = o->resume;
  gboolean own_restart = FALSE;   /* a restart of this run: its files are its own */
  ShoalResumePlan *plan = NULL;
  int status = 1, restarts = 0;
  char *token = NULL;

  if (!check_launch (job, layout, o, &error) || !open_launch (&L, &error))
    goto out;
  for (;;)
    {
      double ckpt_clock = -1;
      if (!take_workspace (&L, job, resume, own_restart, &plan, &ckpt_clock, &token, &error)
          || !prepare_ranks (&L, job, &endpoints, &error) || !start_ranks (&L, endpoints, ckpt_clock, restarts, &error))
        goto out;
      if (!o->quiet)
        fprintf (stderr, "shoal run: %d processes on loopback, workspace %s\n", layout->nprocs, workspace);
      gboolean interrupted = supervise (&L);
      sigprocmask (SIG_SETMASK, &L.old_mask, NULL);
      RankTally tally;
      tally_ranks (&L, interrupted, &tally);
      if (tally.server_deaths > 0 && !interrupted)
        {
          g_string_truncate (tally.lost_names, 0);
          if (restart_after_server_death (&L, &restarts, &resume))
            {
              own_restart = TRUE;
              g_string_free (tally.lost_names, TRUE);
              continue;
            }
        }
      status = report_results (&L, interrupted, &tally);
      g_string_free (tally.lost_names, TRUE);
      break;
    }

out:
  if (error != NULL)
    {
      fprintf (stderr, "shoal run: %s\n", error->message);
      g_error_free (error);
    }
  if (token != NULL)
    explicit_bzero (token, strlen (token));
  g_free (token);
  release_launch (&L);
  g_strfreev (endpoints);
  shoal_resume_plan_free (plan);
  g_free (metrics_path);
  g_free (token_path);
  g_free (conf_path);
  return status;
}
