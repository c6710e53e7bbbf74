/* Starting the processes of a cluster layout.
 *
 * `shoal run` on one machine is its own launcher: it resolves the conf
 * once (topology and overrides applied), writes it with a fresh job token
 * into the workspace, picks free loopback ports for the ranks that listen
 * (shoal_layout_rank_listens: servers, workers of a group spread over
 * processes) and forks one `shoal proc` per rank.  It then only waits: it
 * forwards SIGINT/SIGTERM, and a watchdog stops the survivors when a
 * failure leaves them waiting for a peer that is gone, so a run always
 * ends.  On a cluster an existing launcher (mpirun, srun) starts `shoal
 * proc` itself; the rank comes from its environment and the endpoints
 * from a hostfile. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "cluster/endpoints.h"
#include "cluster/layout.h"
#include "tools/commands.h"
#include "worker/runner.h"
#include "worker/workspace.h"

/* After the last worker process ended, server-only processes get this
 * long to notice and exit before they are stopped. */
#define SERVER_GRACE_S 10
/* After SIGTERM, survivors get this long before SIGKILL. */
#define KILL_GRACE_S 10

/* 32 hex characters from the kernel's random source. */
static gboolean
make_token (char out[33], GError **error)
{
  guint8 bytes[16];
  gsize got = 0;
  while (got < sizeof bytes)
    {
      ssize_t n = getrandom (bytes + got, sizeof bytes - got, 0);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "cannot make a job token: getrandom: %s",
                       g_strerror (errno));
          return FALSE;
        }
      got += (gsize) n;
    }
  for (gsize i = 0; i < sizeof bytes; i++)
    g_snprintf (out + 2 * i, 3, "%02x", bytes[i]);
  return TRUE;
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
  gboolean stopped;      /* signalled by the launcher */
} Child;

static double
now_s (void)
{
  return (double) g_get_monotonic_time () / 1e6;
}

static char *
describe_rank (const ShoalLayout *layout, int r)
{
  const ShoalProcess *p = &layout->procs[r];
  GString *s = g_string_new (NULL);
  g_string_append_printf (s, "rank %d (", r);
  if (p->workers->len > 0)
    {
      int first = g_array_index (p->workers, ShoalMember, 0).group;
      int last = g_array_index (p->workers, ShoalMember, p->workers->len - 1).group;
      g_string_append_printf (s, "%u worker%s of group %d", p->workers->len,
                              p->workers->len == 1 ? "" : "s", first);
      if (last != first)
        g_string_append_printf (s, "-%d", last);
    }
  if (p->servers->len > 0)
    g_string_append_printf (s, "%s%u server%s", p->workers->len ? ", " : "", p->servers->len,
                            p->servers->len == 1 ? "" : "s");
  g_string_append_c (s, ')');
  return g_string_free (s, FALSE);
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

/* Waits for every child, forwarding signals and running the watchdog.
 * Returns TRUE when the launcher itself was interrupted. */
static gboolean
supervise (const ShoalLayout *layout, Child *children, const sigset_t *set,
           const char *metrics_path, int grace_s)
{
  int n = layout->nprocs;
  int running = n;
  gboolean interrupted = FALSE, failed = FALSE, stopping = FALSE;
  double kill_at = 0, workers_done_at = 0, progress_at = now_s ();
  goffset metrics_seen = file_size (metrics_path);

  while (running > 0)
    {
      struct timespec tick = { 0, 250 * 1000 * 1000 };
      int sig = sigtimedwait (set, NULL, &tick);
      double now = now_s ();

      int status;
      pid_t pid;
      while ((pid = waitpid (-1, &status, WNOHANG)) > 0)
        for (int r = 0; r < n; r++)
          if (children[r].running && children[r].pid == pid)
            {
              children[r].running = FALSE;
              children[r].status = status;
              running--;
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
                }
              else if (!(WIFEXITED (status) && WEXITSTATUS (status) == 0) && !failed && !interrupted
                       && !stopping)
                {
                  char *who = describe_rank (layout, r);
                  char *how = describe_status (status);
                  fprintf (stderr, "shoal run: %s failed: %s; the others get %d s without progress "
                           "before they are stopped\n", who, how, grace_s);
                  g_free (how);
                  g_free (who);
                  failed = TRUE;
                  progress_at = now;
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

      gboolean workers_running = FALSE;
      for (int r = 0; r < n; r++)
        workers_running |= children[r].running && children[r].has_workers;
      if (!workers_running && workers_done_at == 0)
        workers_done_at = now;
      goffset size = file_size (metrics_path);
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
          else if (failed && now - progress_at >= grace_s)
            why = "no progress since a process failed";
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
  return interrupted;
}

typedef struct {
  gboolean seen;
  gint64 step;
  double loss, accuracy;   /* accuracy < 0: none */
} GroupResult;

static gboolean
json_number (const char *line, const char *key, double *out)
{
  char *pattern = g_strdup_printf ("\"%s\":", key);
  const char *p = strstr (line, pattern);
  gsize plen = strlen (pattern);
  g_free (pattern);
  if (p == NULL)
    return FALSE;
  char *end = NULL;
  *out = g_ascii_strtod (p + plen, &end);
  return end != p + plen;
}

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
      if (strstr (lines[i], "\"phase\":\"test\"") == NULL || !json_number (lines[i], "group", &group)
          || !json_number (lines[i], "step", &step) || !json_number (lines[i], "loss", &loss))
        continue;
      int g = (int) group;
      if (g < 0 || g >= ngroups)
        continue;
      res[g] = (GroupResult) { TRUE, (gint64) step, loss,
                               json_number (lines[i], "accuracy", &acc) ? acc : -1 };
    }
  g_strfreev (lines);
  g_free (text);
  return res;
}

/* The newest step every rank's checkpoint store has, or -1 with error. */
static gint64
common_checkpoint_step (const ShoalLayout *layout, const char *workspace, GError **error)
{
  GPtrArray *dirs = g_ptr_array_new_with_free_func (g_free);
  for (int r = 0; r < layout->nprocs; r++)
    g_ptr_array_add (dirs, shoal_checkpoint_dir (workspace, r));
  g_ptr_array_add (dirs, NULL);
  gint64 step = shoal_checkpoint_common_step ((const char *const *) dirs->pdata, error);
  g_ptr_array_free (dirs, TRUE);
  return step;
}

int
shoal_launch (ShoalJob *job, const ShoalLayout *layout, const char *workspace, gboolean quiet,
              int grace_s, gboolean resume, int max_restarts)
{
  int restarts = 0;
  GError *error = NULL;
  char *conf_path = g_build_filename (workspace, "job.conf", NULL);
  char *token_path = g_build_filename (workspace, "token", NULL);
  char *metrics_path = g_build_filename (workspace, "metrics.jsonl", NULL);
  char **endpoints = NULL;
  char *endpoint_list = NULL;
  Child *children = g_new0 (Child, layout->nprocs);
  int status = 1;
  char token[33];

  if (g_mkdir_with_parents (workspace, 0755) != 0)
    {
      g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: cannot create workspace: %s", workspace,
                   g_strerror (errno));
      goto out;
    }
again:;
  /* a resumed run continues from the newest step every rank checkpointed */
  char resume_arg[32] = "";
  if (resume)
    {
      gint64 step = common_checkpoint_step (layout, workspace, &error);
      if (step < 0)
        {
          g_prefix_error (&error, "%s: cannot resume: ", workspace);
          goto out;
        }
      g_snprintf (resume_arg, sizeof resume_arg, "%" G_GINT64_FORMAT, step);
      if (!quiet)
        printf ("shoal run: resuming at step %s\n", resume_arg);
    }
  /* the children read this conf: topology and overrides already applied */
  if (!g_key_file_save_to_file (shoal_conf_keyfile (job->conf), conf_path, &error)
      || !make_token (token, &error) || !write_token (token_path, token, &error)
      || (!resume && !g_file_set_contents (metrics_path, "", 0, &error)))
    goto out;
  g_strfreev (endpoints);
  g_free (endpoint_list);
  endpoints = shoal_endpoints_loopback (layout, &error);
  if (endpoints == NULL)
    goto out;
  endpoint_list = g_strjoinv (",", endpoints);
  memset (children, 0, sizeof (Child) * (gsize) layout->nprocs);

  sigset_t set, old;
  sigemptyset (&set);
  sigaddset (&set, SIGINT);
  sigaddset (&set, SIGTERM);
  sigaddset (&set, SIGHUP);
  sigaddset (&set, SIGCHLD);
  sigprocmask (SIG_BLOCK, &set, &old);
  /* one clock origin for every process's metrics.jsonl lines */
  char *start_us = g_strdup_printf ("%" G_GINT64_FORMAT, g_get_real_time ());
  g_setenv ("SHOAL_JOB_START_US", start_us, TRUE);
  g_free (start_us);
  pid_t parent = getpid ();
  /* a rank ignores a second stop signal from its launcher (tools/run.c) */
  char *launcher = g_strdup_printf ("%d", (int) parent);
  g_setenv ("SHOAL_LAUNCHER_PID", launcher, TRUE);
  g_free (launcher);
  int started = 0;
  /* every rank runs here: their worker threads share this machine's cores */
  int all_workers = 0;
  for (int r = 0; r < layout->nprocs; r++)
    all_workers += (int) layout->procs[r].workers->len;
  char host_workers[16];
  g_snprintf (host_workers, sizeof host_workers, "%d", all_workers);
  for (int r = 0; r < layout->nprocs; r++)
    {
      char rank[16];
      g_snprintf (rank, sizeof rank, "%d", r);
      const char *argv[20] = { "shoal", "proc", conf_path, "--rank", rank, "--endpoints", endpoint_list,
                               "--token-file", token_path, "--workspace", workspace,
                               "--host-workers", host_workers };
      int argc = 13;
      if (resume)
        {
          argv[argc++] = "--resume-step";
          argv[argc++] = resume_arg;
        }
      if (quiet)
        argv[argc++] = "--quiet";
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
          if (getppid () != parent)
            _exit (1);
          sigprocmask (SIG_SETMASK, &old, NULL);
          execv ("/proc/self/exe", (char **) argv);
          _exit (127);
        }
      if (pid < 0)
        {
          g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_IO, "fork: %s", g_strerror (errno));
          break;
        }
      children[r] = (Child) { .pid = pid, .running = TRUE,
                              .has_workers = layout->procs[r].workers->len > 0 };
      started++;
    }
  if (started < layout->nprocs)
    {
      for (int r = 0; r < started; r++)
        {
          kill (children[r].pid, SIGTERM);
          waitpid (children[r].pid, NULL, 0);
        }
      sigprocmask (SIG_SETMASK, &old, NULL);
      goto out;
    }
  if (!quiet)
    fprintf (stderr, "shoal run: %d processes on loopback, workspace %s\n", layout->nprocs, workspace);
  gboolean interrupted = supervise (layout, children, &set, metrics_path, grace_s);
  sigprocmask (SIG_SETMASK, &old, NULL);

  int nfailed = 0, lost_groups = 0, server_deaths = 0;
  gboolean tolerate = layout->mode == SHOAL_UPDATE_ASYNC && !layout->conf.all_groups_required;
  for (int r = 0; r < layout->nprocs; r++)
    {
      char *who = describe_rank (layout, r);
      char *how = describe_status (children[r].status);
      gboolean ok = WIFEXITED (children[r].status) && WEXITSTATUS (children[r].status) == 0;
      gboolean servers = layout->procs[r].servers->len > 0;
      /* a process killed from outside (not stopped by this launcher) */
      gboolean died = WIFSIGNALED (children[r].status) && !children[r].stopped;
      if (!ok && died && servers)
        server_deaths++;
      if (!ok && !servers && tolerate && !interrupted)
        {
          /* an asynchronous scheme goes on without this group */
          lost_groups++;
          fprintf (stderr, "shoal run: %s: %s: the group is lost; the others go on\n", who, how);
        }
      else
        {
          if (!ok)
            nfailed++;
          fprintf (ok ? stdout : stderr, "%s%s: %s%s\n", ok ? "" : "shoal run: ", who, how,
                   !ok && children[r].stopped ? " (stopped by shoal run)" : "");
        }
      g_free (how);
      g_free (who);
    }
  if (server_deaths > 0 && !interrupted)
    {
      if (restarts < max_restarts)
        {
          restarts++;
          fprintf (stderr, "shoal run: a server process died; restarting from the last checkpoint "
                           "(restart %d of %d)\n", restarts, max_restarts);
          resume = TRUE;
          GError *probe = NULL;
          if (common_checkpoint_step (layout, workspace, &probe) < 0)
            {
              fprintf (stderr, "shoal run: no checkpoint yet (%s); starting over\n", probe->message);
              resume = FALSE;
            }
          g_clear_error (&probe);
          goto again;
        }
      fprintf (stderr, "shoal run: a server process died%s; the job stops here. Its workspace keeps the "
                       "last checkpoint: continue with `shoal run ... --resume`\n",
               max_restarts == 0 ? " and --no-restart was given" : " too often");
    }

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
  else if (nfailed > 0)
    {
      fprintf (stderr, "shoal run: %d of %d processes failed\n", nfailed, layout->nprocs);
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
          if (lost_groups > 0)
            printf ("%d worker group%s lost; the job finished without %s\n", lost_groups,
                    lost_groups == 1 ? "" : "s", lost_groups == 1 ? "it" : "them");
          if (res[g0].accuracy >= 0)
            printf ("final test accuracy: %.4f\n", res[g0].accuracy);
          else
            printf ("final test loss: %.6f\n", res[g0].loss);
          status = 0;
        }
    }
  g_free (res);

out:
  if (error != NULL)
    {
      fprintf (stderr, "shoal run: %s\n", error->message);
      g_error_free (error);
    }
  explicit_bzero (token, sizeof token);
  g_free (children);
  g_free (endpoint_list);
  g_strfreev (endpoints);
  g_free (metrics_path);
  g_free (token_path);
  g_free (conf_path);
  return status;
}
