/* shoal run JOB.conf: train and print the final test accuracy; in this
 * process when the cluster layout has one process, else through the
 * launcher (launch.c), one child per rank on loopback. */
#include <glib.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tools/commands.h"
#include "job/job.h"
#include "run/runner.h"
#include "server/heartbeat.h"
#include "worker/worker.h"

static volatile sig_atomic_t stop_signals;
/* A rank started by `shoal run`'s launcher: the launcher's pid.  It
 * forwards a stop to every rank once, also to one that is already
 * stopping on a signal of its own (a rank signalled alone); that second
 * signal must not end the rank before its checkpoint is written.  The
 * launcher escalates itself (SIGKILL after its grace). */
static pid_t launcher_pid;
/* Its heartbeat pipe and this rank, to tell it of a signal it did not
 * send (-1: not a launcher's rank). */
static int launcher_pipe = -1, launcher_rank = -1;
/* [cluster] stop_timeout, whole seconds for alarm(2) */
static unsigned stop_bound_s;

/* The stop did not end in time: whatever it waits for (a stalled link, a
 * peer that is gone) would hold this process for minutes or for ever. */
static void
on_stop_overdue (int sig)
{
  (void) sig;
  static const char msg[] = "shoal: the stop did not end within [cluster] stop_timeout (a peer or link "
                            "that does not answer?); exiting now\n";
  if (write (STDERR_FILENO, msg, sizeof msg - 1) < 0)
    _exit (1);
  _exit (1);
}

static void
on_stop_signal (int sig, siginfo_t *info, void *context)
{
  (void) context;
  if (stop_signals == 0)
    alarm (stop_bound_s);
  if (stop_signals++ > 0)
    {
      if (launcher_pid > 0 && info != NULL && info->si_pid == launcher_pid)
        return;
      /* a second signal: stop now, as the user asks */
      signal (sig, SIG_DFL);
      raise (sig);
      return;
    }
  if (launcher_pipe >= 0 && (info == NULL || info->si_pid != launcher_pid))
    shoal_heartbeat_pipe_stop (launcher_pipe, launcher_rank, sig);
  shoal_worker_request_stop ();
}

gboolean
shoal_stop_has_launcher (void)
{
  return launcher_pid != 0;
}

void
shoal_install_stop_handlers (double stop_timeout_s, int rank)
{
  stop_bound_s = (unsigned) MAX (1.0, ceil (stop_timeout_s));
  signal (SIGALRM, on_stop_overdue);
  const char *launcher = g_getenv ("SHOAL_LAUNCHER_PID");
  if (launcher != NULL && (pid_t) g_ascii_strtoll (launcher, NULL, 10) == getppid ())
    {
      launcher_pid = getppid ();
      launcher_rank = rank;
      launcher_pipe = rank >= 0 ? shoal_heartbeat_pipe_from_env () : -1;
    }
  struct sigaction sa;
  memset (&sa, 0, sizeof sa);
  sa.sa_sigaction = on_stop_signal;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset (&sa.sa_mask);
  sigaction (SIGINT, &sa, NULL);
  sigaction (SIGTERM, &sa, NULL);
}

int
shoal_cmd_run (int argc, char **argv)
{
  char **overrides = NULL;
  char *workspace = NULL;
  char *topology = NULL;
  char **plugins = NULL;
  char *serve = NULL;
  int grace = 60;
  gboolean quiet = FALSE, resume = FALSE, no_restart = FALSE, force = FALSE, oversubscribe = FALSE;
  gboolean rejoin = FALSE;
  GOptionEntry entries[] = {
    { "no-restart", 0, 0, G_OPTION_ARG_NONE, &no_restart,
      "when a server process dies, stop (keeping the checkpoint) instead of restarting from it", NULL },
    { "resume", 'r', 0, G_OPTION_ARG_NONE, &resume,
      "continue from the workspace's checkpoint (the newest step every process has); refused when the "
      "checkpoints belong to another model, data or layout", NULL },
    { "force", 'f', 0, G_OPTION_ARG_NONE, &force,
      "a fresh run into a workspace an earlier run wrote removes that run's checkpoint, job.conf and "
      "metrics.jsonl (without it they move to WORKSPACE/previous/N)", NULL },
    { "rejoin", 0, 0, G_OPTION_ARG_NONE, &rejoin,
      "asynchronous schemes with [cluster] all_groups_required = false: restart a lost worker group "
      "while the others train; it rejoins with the current values (at most 3 times)", NULL },
    { "oversubscribe", 0, 0, G_OPTION_ARG_NONE, &oversubscribe,
      "start the job's processes even when they pass [cluster] max_procs_per_core on this machine", NULL },
    { "override", 'o', 0, G_OPTION_ARG_STRING_ARRAY, &overrides,
      "set a conf key, e.g. -o updater.lr=0.05 or -o 'layer fc1.num_output=512'", "SECTION.KEY=VALUE" },
    { "workspace", 'w', 0, G_OPTION_ARG_FILENAME, &workspace,
      "directory for metrics.jsonl and job.conf (default: workspace/JOBNAME)", "DIR" },
    { "topology", 't', 0, G_OPTION_ARG_FILENAME, &topology,
      "a conf with only a [cluster] section whose keys replace the job's scheme keys; the job's "
      "gpus and partition_dim stay (e.g. conf/downpour.conf); -o overrides apply after it", "FILE" },
    { "grace", 0, 0, G_OPTION_ARG_INT, &grace,
      "multi-process runs: after a process failed, seconds without new metrics before the others "
      "are stopped (default 60)", "SECONDS" },
    { "plugin", 'p', 0, G_OPTION_ARG_FILENAME_ARRAY, &plugins,
      "load layer types from this shared library (repeatable; added to [job] plugins)", "LIB.so" },
    { "quiet", 'q', 0, G_OPTION_ARG_NONE, &quiet, "no progress lines", NULL },
    { "serve", 0, 0, G_OPTION_ARG_STRING, &serve,
      "watch the run in a browser while it trains (shoal serve); a port alone listens on loopback", "[ADDRESS:]PORT" },
    { NULL, 0, 0, 0, NULL, NULL, NULL }
  };
  GOptionContext *ctx = g_option_context_new ("JOB.conf - train a job");
  g_option_context_add_main_entries (ctx, entries, NULL);
  GError *error = NULL;
  int status = 0;

  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    {
      fprintf (stderr, "shoal run: %s\n", error->message);
      status = 2;
      goto out;
    }
  if (argc != 2)
    {
      fprintf (stderr, "shoal run: expected one JOB.conf\n");
      status = 2;
      goto out;
    }

  if (grace < 1)
    {
      fprintf (stderr, "shoal run: --grace must be at least 1 second\n");
      status = 2;
      goto out;
    }

  ShoalJob *job = shoal_job_load_topology (argv[1], topology, (const char *const *) overrides, &error);
  if (job != NULL && plugins != NULL && !shoal_job_add_plugins (job, (const char *const *) plugins, &error))
    g_clear_pointer (&job, shoal_job_free);
  if (job == NULL)
    {
      fprintf (stderr, "shoal run: %s\n", error->message);
      status = 1;
      goto out;
    }
  char *ws = workspace ? g_strdup (workspace) : g_build_filename ("workspace", job->name, NULL);
  ShoalDashboard *dashboard = NULL;
  if (serve != NULL && (dashboard = shoal_serve_beside (ws, serve, "shoal run", &error)) == NULL)
    {
      fprintf (stderr, "shoal run: %s\n", error->message);
      g_free (ws);
      shoal_job_free (job);
      status = 1;
      goto out;
    }
  /* the job loaded, so the layout is valid */
  ShoalLayout *layout = shoal_layout_new (&job->cluster, job->conf, NULL);
  /* the virtual clock runs every unit in this process */
  if (layout->nprocs > 1 && job->emulate.clock != SHOAL_CLOCK_VIRTUAL)
    {
      ShoalLaunchOptions lo = { .quiet = quiet, .grace_s = grace, .resume = resume,
                                .max_restarts = no_restart ? 0 : 3, .rejoin = rejoin, .overwrite = force,
                                .oversubscribe = oversubscribe };
      status = shoal_launch (job, layout, ws, &lo);
      shoal_dashboard_free (dashboard);
      shoal_layout_free (layout);
      g_free (ws);
      shoal_job_free (job);
      goto out;
    }
  /* one process: its worker threads share this machine's cores (the
   * virtual clock runs them one at a time) */
  if (job->emulate.clock != SHOAL_CLOCK_VIRTUAL
      && !shoal_cluster_check_host_procs (job->conf, &layout->conf, 1, (int) layout->procs[0].workers->len,
                                          (int) g_get_num_processors (), oversubscribe, "--oversubscribe",
                                          &error))
    {
      fprintf (stderr, "shoal run: %s\n", error->message);
      shoal_dashboard_free (dashboard);
      shoal_layout_free (layout);
      g_free (ws);
      shoal_job_free (job);
      status = 1;
      goto out;
    }
  shoal_layout_free (layout);
  ShoalRunOptions opts = { .workspace = ws, .quiet = quiet, .resume = resume, .resume_step = -1,
                           .overwrite = force };
  ShoalRunResult result = { 0 };
  shoal_install_stop_handlers (job->cluster.stop_timeout, -1);
  if (!shoal_run_job (job, &opts, &result, &error))
    {
      fprintf (stderr, "shoal run: %s\n", error->message);
      status = 1;
    }
  else if (result.stopped && job->emulate.clock == SHOAL_CLOCK_VIRTUAL)
    {
      printf ("stopped at step %" G_GINT64_FORMAT " (a virtual-clock run keeps no checkpoint: run it again, "
              "it repeats exactly)\n", result.steps);
      status = 130;
    }
  else if (result.stopped)
    {
      printf ("stopped at step %" G_GINT64_FORMAT " with a checkpoint; continue with --resume\n",
              result.steps);
      status = 130;
    }
  else
    {
      printf ("trained %" G_GINT64_FORMAT " steps at %.0f samples/s; metrics in %s/metrics.jsonl\n",
              result.steps, result.samples_per_sec, ws);
      /* group 0 lost ([emulate] fault_group): a survivor's numbers */
      char *whose = result.group > 0 ? g_strdup_printf (" (group %d; group 0 was lost)", result.group) : g_strdup ("");
      if (result.test_accuracy >= 0)
        printf ("final test accuracy: %.4f%s\n", result.test_accuracy, whose);
      else
        printf ("final test loss: %.6f%s\n", result.test_loss, whose);
      g_free (whose);
    }
  shoal_dashboard_free (dashboard);
  g_free (ws);
  shoal_job_free (job);

out:
  g_clear_error (&error);
  g_strfreev (overrides);
  g_free (workspace);
  g_free (topology);
  g_free (serve);
  g_strfreev (plugins);
  g_option_context_free (ctx);
  return status;
}
