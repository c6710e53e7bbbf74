/* `shoal proc`: one rank of a job, started by `shoal run`'s launcher or by
 * an existing launcher on a cluster (mpirun, srun): the rank from its
 * environment, the endpoints from --endpoints, a hostfile or (under srun,
 * with neither) Slurm's node list, the job token from a file or
 * SHOAL_TOKEN. */
#include <glib.h>
#include <stdio.h>
#include <string.h>

#include "cluster/cluster_conf.h"
#include "cluster/endpoints.h"
#include "cluster/slurm.h"
#include "core/error.h"
#include "core/thread_start.h"
#include "core/token.h"
#include "tools/commands.h"
#include "run/runner.h"
#include "worker/worker.h"
#include "workspace/resume_plan.h"
#include "workspace/workspace.h"
#include "workspace/workspace_claim.h"

/* Rank r listens on this + r unless --base-port says otherwise. */
#define DEFAULT_BASE_PORT 47000

/* A process that must stop the job (a rank it needs was lost) and whose
 * threads do not end - a worker wedged in a computation, or in a call on
 * a link gone dark - exits [cluster] stop_timeout after it knew, the
 * bound of every stop, so that it never hangs its launcher. */
typedef struct {
  int rank;
  double grace_s;
} FatalExit;

typedef struct {
  char *why;
  double grace_s;
} ExitLater;

static gpointer
exit_later (gpointer data)
{
  ExitLater *e = data;
  g_usleep ((gulong) (e->grace_s * G_USEC_PER_SEC));
  fprintf (stderr, "shoal proc %s; its threads did not end within [cluster] stop_timeout (%g s): exiting\n", e->why,
           e->grace_s);
  fflush (NULL);
  _exit (1);
  return NULL;
}

/* The job is failing already (the others heard why through the
 * launcher's pipe).  Where not even the thread bounding its end can
 * start (ulimit -u, ulimit -v), the end itself may wait for ever: this
 * process exits now, as it would after the grace. */
static void
on_fatal (gpointer data, const GError *why)
{
  const FatalExit *f = data;
  ExitLater *e = g_new (ExitLater, 1);
  /* "(rank R): WHY", as the process's last line names its rank */
  e->why = g_strdup_printf ("(rank %d): %s", f->rank, why->message);
  e->grace_s = f->grace_s;
  GError *error = NULL;
  GThread *timer = shoal_thread_start ("fatal-exit", exit_later, e, &error);
  if (timer != NULL)
    {
      g_thread_unref (timer);
      return;
    }
  fprintf (stderr, "shoal proc %s; %s: exiting now\n", e->why, error->message);
  fflush (NULL);
  _exit (1);
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
      return shoal_token_check (env, "SHOAL_TOKEN", error) ? g_strdup (env) : NULL;
    }
  return shoal_token_read_file (token_file, error);
}

/* resume_at: nothing to resume, start from step 0 (--resume-or-start) */
#define NOTHING_SAVED (-2)

/* --resume without a launcher (mpirun, srun requeue): the step this rank
 * goes on from, as the launcher would give it - the resume plan's
 * (*plan), so that an asynchronous scheme's groups go on each from its
 * own step (workspace/resume_plan.h).  Nothing in the workspace changes
 * for a resume here: the rank drops its metrics lines past the plan
 * (trim_rank_lines) only once its servers took the checkpoint up.  -1
 * with error when there is none; with or_start, NOTHING_SAVED where no
 * rank saved anything yet (the rank's earlier lines dropped). */
static gint64
resume_at (const ShoalLayout *layout, const char *ws, int rank, gboolean quiet, gboolean or_start,
           ShoalResumePlan **plan, GError **error)
{
  *plan = shoal_resume_plan_new (layout, ws, error);
  if (*plan == NULL && or_start && shoal_resume_plan_nothing_saved (layout, ws))
    {
      /* a job requeued before its first save: it starts over, without
       * the lines its earlier attempt wrote (each rank drops its own) */
      g_clear_error (error);
      gint64 *zeros = g_new0 (gint64, MAX (layout->conf.nworker_groups, 1));
      gboolean trimmed = shoal_workspace_trim_rank_metrics (ws, layout, rank, 0, zeros, layout->conf.nworker_groups,
                                                            0, NULL, error);
      g_free (zeros);
      if (!trimmed)
        return -1;
      /* said even with -q: the job's earlier work is gone, not resumed */
      g_message ("rank %d: %s holds no checkpoint yet: starting from step 0", rank, ws);
      return NOTHING_SAVED;
    }
  if (*plan == NULL)
    {
      g_prefix_error (error, "--resume: %s: ", ws);
      return -1;
    }
  if (!quiet)
    {
      char *at = shoal_resume_plan_describe (*plan);
      g_message ("rank %d: resuming at step %" G_GINT64_FORMAT " (the job: %s)", rank, (*plan)->rank_steps[rank],
                 at);
      g_free (at);
    }
  return (*plan)->rank_steps[rank];
}

typedef struct {
  const ShoalLayout *layout;
  const char *ws;
  int rank;
  const ShoalResumePlan *plan;
} TrimRankLines;

/* ShoalRunOptions.trim_metrics: this rank's lines past the plan dropped;
 * the job's clock goes on from the checkpoint's. */
static gboolean
trim_rank_lines (gpointer data, double *clock, GError **error)
{
  const TrimRankLines *t = data;
  const ShoalResumePlan *plan = t->plan;
  return shoal_workspace_trim_rank_metrics (t->ws, t->layout, t->rank, plan->rank_steps[0], plan->group_steps,
                                            plan->ngroups, plan->clock, clock, error);
}

int
shoal_cmd_proc (int argc, char **argv)
{
  int rank = -1, base_port = 0, host_workers = 0, slurm_rank = -1, slurm_ntasks = 0;
  char *endpoints_arg = NULL, *hostfile = NULL, *token_file = NULL, *workspace = NULL, *tls_dir = NULL;
  gboolean quiet = FALSE, rejoin = FALSE, oversubscribe = FALSE, resume = FALSE, resume_or_start = FALSE,
           slurm = FALSE;
  gint64 resume_step = -1;
  GOptionEntry entries[] = {
    { "rejoin", 0, 0, G_OPTION_ARG_NONE, &rejoin,
      "a restart of this rank that joins its running job (asynchronous schemes): its units go on from "
      "its newest checkpoint (or step 0) with the job's current values", NULL },
    { "oversubscribe", 0, 0, G_OPTION_ARG_NONE, &oversubscribe,
      "with --hostfile: start even when this host's ranks pass [cluster] max_procs_per_core", NULL },
    { "resume-step", 0, 0, G_OPTION_ARG_INT64, &resume_step,
      "resume from the checkpoint of this step (the launcher passes it)", "STEP" },
    { "resume-or-start", 0, 0, G_OPTION_ARG_NONE, &resume_or_start,
      "as --resume, but a workspace whose checkpoints hold nothing yet (a batch job requeued before its "
      "first save) starts from step 0, the lines its earlier attempt wrote dropped", NULL },
    { "resume", 0, 0, G_OPTION_ARG_NONE, &resume,
      "resume from the newest checkpoint every rank of the workspace has (a requeued Slurm job; the "
      "workspace must be shared by the ranks)", NULL },
    { "rank", 'r', 0, G_OPTION_ARG_INT, &rank,
      "this process's rank (default: OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID)", "R" },
    { "endpoints", 'e', 0, G_OPTION_ARG_STRING, &endpoints_arg,
      "host:port of every rank, comma-separated, empty for ranks that take no calls (no "
      "servers, no workers of a group spread over processes)", "LIST" },
    { "hostfile", 'H', 0, G_OPTION_ARG_FILENAME, &hostfile,
      "hosts of the ranks, one per line ('host' or 'host slots=N'); port = base port + rank.  Under srun "
      "without --hostfile or --endpoints: Slurm's node list and tasks per node", "FILE" },
    { "base-port", 'p', 0, G_OPTION_ARG_INT, &base_port,
      "first port with --hostfile (default 47000) or under srun (default: from the job and step ids)", "PORT" },
    { "token-file", 't', 0, G_OPTION_ARG_FILENAME, &token_file,
      "file holding the job token (default: $SHOAL_TOKEN)", "FILE" },
    { "tls-dir", 0, 0, G_OPTION_ARG_FILENAME, &tls_dir,
      "the job's TLS credentials as `shoal certs` writes them (over [tls] dir, ca, cert, key)", "DIR" },
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
  char **endpoints = NULL, **hosts = NULL;
  char *token = NULL;
  char *ws = NULL;
  ShoalResumePlan *plan = NULL;

  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    goto out;
  if (argc != 2)
    {
      g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_CONF, "expected one JOB.conf");
      goto out;
    }
  if (endpoints_arg != NULL && hostfile != NULL)
    {
      g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_CONF, "give --endpoints or --hostfile, not both");
      goto out;
    }
  if (endpoints_arg == NULL && hostfile == NULL)
    {
      slurm = shoal_slurm_task (&slurm_rank, &slurm_ntasks);
      if (!slurm)
        {
          g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                       "give --endpoints or --hostfile (under srun Slurm gives the hosts)");
          goto out;
        }
    }
  if (base_port == 0)
    base_port = slurm ? shoal_slurm_base_port () : DEFAULT_BASE_PORT;
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
  /* before the rank's own check: every task of a wrong srun -n says the same */
  if (slurm && slurm_ntasks != layout->nprocs)
    {
      g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_CONF, "srun started %d tasks (SLURM_NTASKS), the layout has %d "
                   "process%s: srun -n %d%s", slurm_ntasks, layout->nprocs, layout->nprocs == 1 ? "" : "es",
                   layout->nprocs,
                   layout->nprocs == 1 ? " (the conf has no [cluster] for several processes: append a topology, "
                                         "e.g. cat conf/sandblaster.conf >>JOB.conf)" : "");
      goto out;
    }
  if (rank >= layout->nprocs)
    {
      g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_CONF, "rank %d does not exist: the layout has %d processes",
                   rank, layout->nprocs);
      goto out;
    }
  if (hostfile != NULL || slurm)
    {
      if (base_port + layout->nprocs - 1 > 65535)
        {
          g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_CONF, "--base-port %d + %d ranks passes 65535",
                       base_port, layout->nprocs);
          goto out;
        }
      hosts = slurm ? shoal_slurm_rank_hosts (slurm_ntasks, &error)
                    : shoal_hosts_from_hostfile (hostfile, layout->nprocs, &error);
      if (hosts == NULL)
        goto out;
      int hosted = 0, host_procs = 0;
      endpoints = shoal_endpoints_from_hosts (hosts, layout, base_port, rank, &hosted, &host_procs);
      if (host_workers == 0)
        host_workers = hosted;
      /* the ranks the hostfile puts on this host share its cores */
      if (!shoal_cluster_check_host_procs (job->conf, &layout->conf, host_procs, hosted,
                                           (int) g_get_num_processors (),
                                           oversubscribe, "--oversubscribe", &error))
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
  if (rejoin + resume + resume_or_start + (resume_step >= 0) > 1)
    {
      g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                   "--rejoin joins a running job, --resume and --resume-step restart a stopped one: give one");
      goto out;
    }
  if (resume || resume_or_start)
    {
      resume_step = resume_at (layout, ws, rank, quiet, resume_or_start, &plan, &error);
      if (resume_step == NOTHING_SAVED)
        resume_step = -1;   /* from step 0 */
      else if (resume_step < 0)
        goto out;
    }
  TrimRankLines trim = { .layout = layout, .ws = ws, .rank = rank, .plan = plan };
  static FatalExit fatal_exit;
  fatal_exit = (FatalExit) { .rank = rank, .grace_s = job->cluster.stop_timeout };
  ShoalRunOptions opts = { .workspace = ws, .quiet = quiet, .rank = rank, .endpoints = endpoints,
                           .token = token, .tls_dir = tls_dir, .hosts = hosts, .append_metrics = TRUE, .resume = resume_step >= 0,
                           .resume_step = resume_step, .host_workers = MAX (host_workers, 0),
                           .rejoin = rejoin, .on_fatal = on_fatal, .fatal_data = &fatal_exit,
                           .trim_metrics = plan != NULL ? trim_rank_lines : NULL, .trim_data = &trim };
  shoal_install_stop_handlers (job->cluster.stop_timeout, rank);
  ShoalRunResult result = { 0 };
  if (!shoal_run_job (job, &opts, &result, &error))
    goto out;
  /* under mpirun or srun a process of servers alone that the job's stop
   * ended says so, as its workers do (130, as shoal run's); under shoal
   * run the launcher says how the job ended (it stops the servers once
   * the workers ended) */
  gboolean servers_stopped = result.group < 0 && shoal_worker_stop_requested () && !shoal_stop_has_launcher ();
  /* worker 0 of each group runs the tests; the others have no test numbers */
  if (result.stopped && result.group < 0)
    printf ("rank %d: servers stopped (a stop request) before every worker process was done\n", rank);
  else if (result.follower)
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
  else if (servers_stopped)
    printf ("rank %d: servers stopped with the job (a stop request)\n", rank);
  else
    printf ("rank %d: servers done\n", rank);
  if (result.lost_groups != NULL)
    printf ("rank %d: worker groups lost and dropped: %s; the others finished\n", rank, result.lost_groups);
  g_free (result.lost_groups);
  status = result.stopped || servers_stopped ? 130 : 0;

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
  g_strfreev (hosts);
  shoal_resume_plan_free (plan);
  shoal_layout_free (layout);
  shoal_job_free (job);
  g_free (endpoints_arg);
  g_free (hostfile);
  g_free (token_file);
  g_free (tls_dir);
  g_free (workspace);
  g_option_context_free (ctx);
  return status;
}
