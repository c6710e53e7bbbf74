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
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "cluster/layout.h"
#include "tools/commands.h"
#include "worker/runner.h"

/* After the last worker process ended, server-only processes get this
 * long to notice and exit before they are stopped. */
#define SERVER_GRACE_S 10
/* After SIGTERM, survivors get this long before SIGKILL. */
#define KILL_GRACE_S 10
#define DEFAULT_BASE_PORT 47000

/* ---- topology files ---------------------------------------------------- */

/* The job text with the layout keys of its [cluster] section blanked out
 * line by line, so every other key keeps its line number in messages; its
 * placement keys (gpus, partition_dim) stay, as they say where this job's
 * parts run whichever scheme the topology picks. */
static char *
blank_cluster_section (const char *text, const char *topology_path)
{
  char **lines = g_strsplit (text, "\n", -1);
  gboolean in_cluster = FALSE;
  for (int i = 0; lines[i] != NULL; i++)
    {
      char *trimmed = g_strstrip (g_strdup (lines[i]));
      if (trimmed[0] == '[')
        in_cluster = strcmp (trimmed, "[cluster]") == 0;
      else if (in_cluster && trimmed[0] != '#' && strchr (trimmed, '=') != NULL)
        {
          char *key = g_strstrip (g_strndup (trimmed, (gsize) (strchr (trimmed, '=') - trimmed)));
          if (!shoal_cluster_key_is_placement (key))
            {
              g_free (lines[i]);
              lines[i] = g_strdup_printf ("# replaced by %s", topology_path);
            }
          g_free (key);
        }
      g_free (trimmed);
    }
  char *out = g_strjoinv ("\n", lines);
  g_strfreev (lines);
  return out;
}

/* The topology file alone must be a valid [cluster] section; its keys
 * become overrides placed before the user's.  Returns the overrides
 * "cluster.KEY=VALUE" (g_strfreev) or NULL with error. */
static char **
topology_overrides (const char *path, GError **error)
{
  char *text = NULL;
  GError *local = NULL;
  if (!g_file_get_contents (path, &text, NULL, &local))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s", local->message);
      g_error_free (local);
      return NULL;
    }
  ShoalConf *topo = shoal_conf_load_data (text, path, error);
  if (topo == NULL)
    {
      g_free (text);
      return NULL;
    }
  GKeyFile *kf = shoal_conf_keyfile (topo);
  char **groups = g_key_file_get_groups (kf, NULL);
  gboolean ok = TRUE;
  for (int i = 0; ok && groups[i] != NULL; i++)
    if (strcmp (groups[i], "cluster") != 0)
      {
        shoal_conf_error (topo, error, groups[i], NULL,
                          "a topology file holds only a [cluster] section (it replaces the job's)");
        ok = FALSE;
      }
  g_strfreev (groups);
  if (ok && !g_key_file_has_group (kf, "cluster"))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "%s: no [cluster] section", path);
      ok = FALSE;
    }
  if (ok)
    {
      /* The job loader checks the section with every key [cluster] has
       * and the layout, naming this file's lines: a [job] after the last
       * line makes the file a loadable job without moving any line. */
      char *as_job = g_strconcat (text, "\n[job]\ntrain_steps = 1\n", NULL);
      ShoalJob *job = shoal_job_load_data (as_job, path, NULL, error);
      ok = job != NULL;
      shoal_job_free (job);
      g_free (as_job);
    }
  GPtrArray *out = NULL;
  if (ok)
    {
      out = g_ptr_array_new ();
      char **keys = g_key_file_get_keys (kf, "cluster", NULL, NULL);
      for (int i = 0; keys[i] != NULL; i++)
        {
          char *value = g_key_file_get_value (kf, "cluster", keys[i], NULL);
          g_ptr_array_add (out, g_strdup_printf ("cluster.%s=%s", keys[i], value));
          g_free (value);
        }
      g_strfreev (keys);
      g_ptr_array_add (out, NULL);
    }
  shoal_conf_free (topo);
  g_free (text);
  return out ? (char **) g_ptr_array_free (out, FALSE) : NULL;
}

ShoalJob *
shoal_load_job_topology (const char *job_path, const char *topology_path,
                         const char *const *overrides, GError **error)
{
  if (topology_path == NULL)
    return shoal_job_load (job_path, overrides, error);
  char **topo = topology_overrides (topology_path, error);
  if (topo == NULL)
    return NULL;
  char *text = NULL;
  GError *local = NULL;
  if (!g_file_get_contents (job_path, &text, NULL, &local))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s", local->message);
      g_error_free (local);
      g_strfreev (topo);
      return NULL;
    }
  char *blanked = blank_cluster_section (text, topology_path);
  GPtrArray *all = g_ptr_array_new ();
  for (int i = 0; topo[i] != NULL; i++)
    g_ptr_array_add (all, topo[i]);
  for (int i = 0; overrides != NULL && overrides[i] != NULL; i++)
    g_ptr_array_add (all, (gpointer) overrides[i]);
  g_ptr_array_add (all, NULL);
  ShoalJob *job = shoal_job_load_data (blanked, job_path, (const char *const *) all->pdata, error);
  g_ptr_array_free (all, TRUE);
  g_strfreev (topo);
  g_free (blanked);
  g_free (text);
  return job;
}

/* ---- the launcher ------------------------------------------------------ */

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

/* Free loopback ports for the ranks that listen: every socket stays
 * bound until all are chosen, so no two ranks get the same port.  The
 * port is free again between this and the child's bind; another program
 * taking it in that window makes the child fail with a clear bind error. */
static char **
choose_endpoints (const ShoalLayout *layout, GError **error)
{
  char **endpoints = g_new0 (char *, layout->nprocs + 1);
  int *fds = g_new (int, layout->nprocs);
  gboolean ok = TRUE;
  /* Ports below the kernel's ephemeral range: between this probe and the
   * child's bind, no outgoing connection can take them as its source port
   * (a port from bind(0) could, and the child then fails to listen). */
  int low = 32768, high = 60999;
  char *range = NULL;
  if (g_file_get_contents ("/proc/sys/net/ipv4/ip_local_port_range", &range, NULL, NULL))
    sscanf (range, "%d %d", &low, &high);
  g_free (range);
  int first = 10000, span = MAX (low - first, 1000);
  for (int r = 0; r < layout->nprocs; r++)
    {
      fds[r] = -1;
      if (!ok || !shoal_layout_rank_listens (layout, r))
        {
          endpoints[r] = g_strdup ("");
          continue;
        }
      int port = 0;
      for (int attempt = 0; attempt < 200 && port == 0; attempt++)
        {
          int candidate = first + g_random_int_range (0, span);
          struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons ((guint16) candidate) };
          addr.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
          int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
          int one = 1;
          if (fd >= 0)
            setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
          if (fd >= 0 && bind (fd, (struct sockaddr *) &addr, sizeof addr) == 0)
            {
              fds[r] = fd;  /* held until every rank has its own port */
              port = candidate;
            }
          else if (fd >= 0)
            close (fd);
        }
      if (port == 0)
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO,
                       "cannot find a free port on 127.0.0.1 in %d..%d: %s", first, first + span - 1,
                       g_strerror (errno));
          ok = FALSE;
          endpoints[r] = g_strdup ("");
          continue;
        }
      endpoints[r] = g_strdup_printf ("127.0.0.1:%d", port);
    }
  for (int r = 0; r < layout->nprocs; r++)
    if (fds[r] >= 0)
      close (fds[r]);
  g_free (fds);
  if (!ok)
    {
      g_strfreev (endpoints);
      return NULL;
    }
  return endpoints;
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
  endpoints = choose_endpoints (layout, &error);
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

/* ---- shoal proc -------------------------------------------------------- */

/* Rank r's host from an Open MPI style hostfile ("host" or "host
 * slots=N" per line, # comments): hosts are expanded by their slots in
 * file order, as mpirun maps ranks by slot, and ranks beyond the slots
 * wrap around. */
static char **
hostfile_endpoints (const char *path, const ShoalLayout *layout, int base_port, int rank,
                    int *host_workers, GError **error)
{
  char *text = NULL;
  GError *local = NULL;
  if (!g_file_get_contents (path, &text, NULL, &local))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s", local->message);
      g_error_free (local);
      return NULL;
    }
  GPtrArray *slots = g_ptr_array_new_with_free_func (g_free);
  char **lines = g_strsplit (text, "\n", -1);
  gboolean ok = TRUE;
  for (int i = 0; ok && lines[i] != NULL; i++)
    {
      char *hash = strchr (lines[i], '#');
      if (hash != NULL)
        *hash = '\0';
      char **words = g_strsplit_set (g_strstrip (lines[i]), " \t", -1);
      const char *host = NULL;
      gint64 n = 1;
      for (int w = 0; ok && words[w] != NULL; w++)
        {
          if (words[w][0] == '\0')
            continue;
          if (host == NULL)
            host = words[w];
          else if (g_str_has_prefix (words[w], "slots="))
            {
              if (!g_ascii_string_to_signed (words[w] + 6, 10, 1, 4096, &n, NULL))
                {
                  g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                               "%s:%d: slots: expected a number from 1 to 4096, got '%s'", path,
                               i + 1, words[w] + 6);
                  ok = FALSE;
                }
            }
        }
      for (gint64 k = 0; ok && host != NULL && k < n; k++)
        g_ptr_array_add (slots, g_strdup (host));
      g_strfreev (words);
    }
  g_strfreev (lines);
  g_free (text);
  if (ok && slots->len == 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "%s: no hosts", path);
      ok = FALSE;
    }
  char **endpoints = NULL;
  if (ok)
    {
      endpoints = g_new0 (char *, layout->nprocs + 1);
      const char *mine = g_ptr_array_index (slots, (guint) rank % slots->len);
      *host_workers = 0;
      for (int r = 0; r < layout->nprocs; r++)
        {
          const char *host = g_ptr_array_index (slots, (guint) r % slots->len);
          endpoints[r] = shoal_layout_rank_listens (layout, r)
                           ? g_strdup_printf ("%s:%d", host, base_port + r)
                           : g_strdup ("");
          if (strcmp (host, mine) == 0)
            *host_workers += (int) layout->procs[r].workers->len;
        }
    }
  g_ptr_array_free (slots, TRUE);
  return endpoints;
}

static gboolean
rank_from_env (int *rank)
{
  static const char *const vars[] = { "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID" };
  for (gsize i = 0; i < G_N_ELEMENTS (vars); i++)
    {
      const char *v = g_getenv (vars[i]);
      gint64 r;
      if (v != NULL && g_ascii_string_to_signed (v, 10, 0, G_MAXINT, &r, NULL))
        {
          *rank = (int) r;
          return TRUE;
        }
    }
  return FALSE;
}

static char *
read_token (const char *token_file, GError **error)
{
  if (token_file == NULL)
    {
      const char *env = g_getenv ("SHOAL_TOKEN");
      if (env == NULL || *env == '\0')
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                       "no job token: give --token-file FILE or set SHOAL_TOKEN");
          return NULL;
        }
      return g_strdup (env);
    }
  char *text = NULL;
  GError *local = NULL;
  if (!g_file_get_contents (token_file, &text, NULL, &local))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s", local->message);
      g_error_free (local);
      return NULL;
    }
  g_strstrip (text);
  if (*text == '\0')
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "%s: the job token is empty", token_file);
      g_free (text);
      return NULL;
    }
  GStatBuf st;
  if (g_stat (token_file, &st) == 0 && (st.st_mode & 077) != 0)
    g_warning ("%s: the job token is readable by other users (mode %03o); chmod 600 it",
               token_file, (unsigned) (st.st_mode & 0777));
  return text;
}

int
shoal_cmd_proc (int argc, char **argv)
{
  int rank = -1, base_port = DEFAULT_BASE_PORT, host_workers = 0;
  char *endpoints_arg = NULL, *hostfile = NULL, *token_file = NULL, *workspace = NULL;
  gboolean quiet = FALSE;
  gint64 resume_step = -1;
  GOptionEntry entries[] = {
    { "resume-step", 0, 0, G_OPTION_ARG_INT64, &resume_step,
      "resume from the checkpoint of this step (the launcher passes it)", "STEP" },
    { "rank", 'r', 0, G_OPTION_ARG_INT, &rank,
      "this process's rank (default: OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID)", "R" },
    { "endpoints", 'e', 0, G_OPTION_ARG_STRING, &endpoints_arg,
      "host:port of every rank, comma-separated, empty for ranks that take no calls (no "
      "servers, no workers of a group spread over processes)", "LIST" },
    { "hostfile", 'H', 0, G_OPTION_ARG_FILENAME, &hostfile,
      "hosts of the ranks, one per line ('host' or 'host slots=N'); port = base port + rank", "FILE" },
    { "base-port", 'p', 0, G_OPTION_ARG_INT, &base_port, "first port with --hostfile (default 47000)", "PORT" },
    { "token-file", 't', 0, G_OPTION_ARG_FILENAME, &token_file,
      "file holding the job token (default: $SHOAL_TOKEN)", "FILE" },
    { "workspace", 'w', 0, G_OPTION_ARG_FILENAME, &workspace,
      "directory for metrics.jsonl (default: workspace/JOBNAME)", "DIR" },
    { "quiet", 'q', 0, G_OPTION_ARG_NONE, &quiet, "no progress lines", NULL },
    { "host-workers", 0, 0, G_OPTION_ARG_INT, &host_workers,
      "worker threads of all ranks on this machine, which share its cores for BLAS (default: "
      "counted from --hostfile, else this rank's)", "N" },
    { NULL, 0, 0, 0, NULL, NULL, NULL }
  };
  GOptionContext *ctx = g_option_context_new ("JOB.conf - run one rank of a multi-process job");
  g_option_context_add_main_entries (ctx, entries, NULL);
  GError *error = NULL;
  int status = 2;
  ShoalJob *job = NULL;
  ShoalLayout *layout = NULL;
  char **endpoints = NULL;
  char *token = NULL;
  char *ws = NULL;

  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    goto out;
  if (argc != 2)
    {
      g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_CONF, "expected one JOB.conf");
      goto out;
    }
  if ((endpoints_arg == NULL) == (hostfile == NULL))
    {
      g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_CONF, "give --endpoints or --hostfile");
      goto out;
    }
  if (rank < 0 && !rank_from_env (&rank))
    {
      g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                   "no rank: give --rank or start under mpirun / srun (OMPI_COMM_WORLD_RANK, "
                   "PMI_RANK, SLURM_PROCID)");
      goto out;
    }
  if (base_port < 1 || base_port > 65535)
    {
      g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_CONF, "--base-port %d is not a port", base_port);
      goto out;
    }
  token = read_token (token_file, &error);
  if (token == NULL)
    goto out;

  status = 1;
  job = shoal_job_load (argv[1], NULL, &error);
  if (job == NULL)
    goto out;
  layout = shoal_layout_new (&job->cluster, job->conf, &error);
  if (layout == NULL)
    goto out;
  if (rank >= layout->nprocs)
    {
      g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_CONF, "rank %d does not exist: the layout has %d processes",
                   rank, layout->nprocs);
      goto out;
    }
  if (hostfile != NULL)
    {
      if (base_port + layout->nprocs - 1 > 65535)
        {
          g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_CONF, "--base-port %d + %d ranks passes 65535",
                       base_port, layout->nprocs);
          goto out;
        }
      int hosted = 0;
      endpoints = hostfile_endpoints (hostfile, layout, base_port, rank, &hosted, &error);
      if (host_workers == 0)
        host_workers = hosted;
      if (endpoints == NULL)
        goto out;
    }
  else
    {
      endpoints = g_strsplit (endpoints_arg, ",", -1);
      if ((int) g_strv_length (endpoints) != layout->nprocs)
        {
          g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                       "--endpoints has %u entries, the layout has %d processes",
                       g_strv_length (endpoints), layout->nprocs);
          goto out;
        }
      for (int r = 0; r < layout->nprocs; r++)
        if (shoal_layout_rank_listens (layout, r) && *g_strstrip (endpoints[r]) == '\0')
          {
            g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                         "--endpoints: rank %d has none, but it %s", r,
                         layout->procs[r].servers->len > 0
                           ? "serves slices"
                           : "holds workers of a group spread over processes");
            goto out;
          }
    }

  ws = workspace ? g_strdup (workspace) : g_build_filename ("workspace", job->name, NULL);
  ShoalRunOptions opts = { .workspace = ws, .quiet = quiet, .rank = rank, .endpoints = endpoints,
                           .token = token, .append_metrics = TRUE, .resume = resume_step >= 0,
                           .resume_step = resume_step, .host_workers = MAX (host_workers, 0) };
  shoal_install_stop_handlers ();
  ShoalRunResult result = { 0 };
  if (!shoal_run_job (job, &opts, &result, &error))
    goto out;
  /* worker 0 of each group runs the tests; the others have no test numbers */
  if (result.follower)
    printf ("rank %d: group %d from worker %d: ran its leader's steps\n", rank, result.group, result.worker);
  else if (result.stopped)
    printf ("rank %d: group %d worker %d: stopped at step %" G_GINT64_FORMAT " with a checkpoint\n",
            rank, result.group, result.worker, result.steps);
  else if (result.group >= 0 && result.worker == 0 && result.test_accuracy >= 0)
    printf ("rank %d: group %d worker %d: %" G_GINT64_FORMAT " steps at %.0f samples/s, test accuracy %.4f\n",
            rank, result.group, result.worker, result.steps, result.samples_per_sec, result.test_accuracy);
  else if (result.group >= 0 && result.worker == 0)
    printf ("rank %d: group %d worker %d: %" G_GINT64_FORMAT " steps at %.0f samples/s, test loss %.6f\n",
            rank, result.group, result.worker, result.steps, result.samples_per_sec, result.test_loss);
  else if (result.group >= 0)
    printf ("rank %d: group %d worker %d: %" G_GINT64_FORMAT " steps at %.0f samples/s\n",
            rank, result.group, result.worker, result.steps, result.samples_per_sec);
  else
    printf ("rank %d: servers done\n", rank);
  status = result.stopped ? 130 : 0;

out:
  if (error != NULL)
    {
      if (rank >= 0)
        fprintf (stderr, "shoal proc (rank %d): %s\n", rank, error->message);
      else
        fprintf (stderr, "shoal proc: %s\n", error->message);
      g_error_free (error);
    }
  if (token != NULL)
    explicit_bzero (token, strlen (token));
  g_free (token);
  g_free (ws);
  g_strfreev (endpoints);
  shoal_layout_free (layout);
  shoal_job_free (job);
  g_free (endpoints_arg);
  g_free (hostfile);
  g_free (token_file);
  g_free (workspace);
  g_option_context_free (ctx);
  return status;
}
