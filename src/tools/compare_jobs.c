/* shoal compare's runs, one at a time or --jobs at a time.
 *
 * A scale sweep's points are independent virtual-clock runs, each one
 * core's work (the emulator is one thread), so a machine with c cores
 * runs c of them at once.  Each concurrent run is a process of its own
 * (fork after its job was prepared here): a run keeps process-wide state
 * - the BLAS threads, the stop request, its datasets' maps - that two
 * runs in one process would share.  The report reads what each run
 * wrote in its workspace, as for one-at-a-time runs, so --jobs changes
 * no number of a virtual-clock comparison (real-clock runs are timed
 * against the machine: they run one at a time). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/error.h"
#include "tools/compare.h"

gboolean
shoal_compare_resolve_jobs (Plan *plan, int asked, GError **error)
{
  if (asked < 0 || asked > 1024)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "--jobs %d: give 1 to 1024 runs at once (0: the default)",
                   asked);
      return FALSE;
    }
  if (!plan->virtual_clock && asked > 1)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                   "--jobs %d: real-clock runs measure their own speed on this machine, so they run one at a "
                   "time (-o emulate.clock=virtual runs several at once)", asked);
      return FALSE;
    }
  int cores = (int) MAX (g_get_num_processors (), 1u);
  plan->jobs = asked > 0 ? asked : plan->virtual_clock ? cores : 1;
  return TRUE;
}

char **
shoal_compare_jobs_overrides (const Plan *plan, char **overrides)
{
  if (plan->jobs <= 1)
    return overrides;
  for (int i = 0; overrides != NULL && overrides[i] != NULL; i++)
    if (g_str_has_prefix (overrides[i], "job.threads="))
      return overrides;
  /* the cores shared by the runs at once: BLAS threads of their own
   * would only queue for the same cores */
  guint n = overrides != NULL ? g_strv_length (overrides) : 0;
  overrides = g_renew (char *, overrides, n + 2);
  overrides[n] = g_strdup_printf ("job.threads=%d", MAX ((int) g_get_num_processors () / plan->jobs, 1));
  overrides[n + 1] = NULL;
  return overrides;
}

typedef struct {
  pid_t pid;
  Scheme *scheme;
  Run *run;
} Child;

/* The status a child's wait status stands for, as a shell gives it. */
static int
exit_status (int wstatus)
{
  if (WIFEXITED (wstatus))
    return WEXITSTATUS (wstatus);
  return WIFSIGNALED (wstatus) ? 128 + WTERMSIG (wstatus) : 1;
}

static void
finished (Scheme *s, Run *run, int status, gboolean *interrupted, int *failed)
{
  run->status = status;
  shoal_compare_collect (run, s);
  *interrupted = *interrupted || status == 130 || status == 128 + SIGINT;
  *failed += status != 0;
}

/* Waits for one child and takes what it left. */
static void
reap (GArray *children, gboolean *interrupted, int *failed)
{
  int wstatus = 0;
  pid_t pid;
  do
    pid = waitpid (-1, &wstatus, 0);
  while (pid < 0 && errno == EINTR);
  for (guint i = 0; i < children->len; i++)
    {
      Child *c = &g_array_index (children, Child, i);
      if (pid >= 0 && c->pid != pid)
        continue;
      /* pid < 0 (no child left: not ours to wait for): the run is lost */
      finished (c->scheme, c->run, pid >= 0 ? exit_status (wstatus) : 1, interrupted, failed);
      g_array_remove_index (children, i);
      return;
    }
}

void
shoal_compare_run_points (Plan *plan, GPtrArray *schemes, ShoalComparePrepare prepare, gboolean *interrupted,
                          int *failed)
{
  GArray *children = g_array_new (FALSE, FALSE, sizeof (Child));
  for (int r = 0; r < plan->repeats && !*interrupted; r++)
    for (guint i = 0; i < schemes->len && !*interrupted; i++)
      {
        Scheme *s = g_ptr_array_index (schemes, i);
        GError *e = NULL;
        Run *run = NULL;
        ShoalJob *job = prepare (plan, s, r, &run, &e);
        if (job == NULL)
          {
            fprintf (stderr, "shoal compare: %s: %s\n", s->name, e->message);
            g_error_free (e);
            *failed += 1;
            continue;
          }
        if (plan->jobs <= 1)
          {
            int status = shoal_compare_execute (plan, s, job, run);
            shoal_job_free (job);
            finished (s, run, status, interrupted, failed);
            continue;
          }
        while (children->len >= (guint) plan->jobs)
          reap (children, interrupted, failed);
        if (*interrupted)
          {
            shoal_job_free (job);
            break;
          }
        fflush (stdout);
        fflush (stderr);
        pid_t pid = fork ();
        if (pid == 0)
          {
            int status = shoal_compare_execute (plan, s, job, run);
            fflush (stdout);
            fflush (stderr);
            _exit (status);
          }
        shoal_job_free (job);
        if (pid < 0)
          {
            fprintf (stderr, "shoal compare: %s: cannot start a process for the run: %s\n", s->name,
                     g_strerror (errno));
            *failed += 1;
            continue;
          }
        Child c = { pid, s, run };
        g_array_append_val (children, c);
      }
  while (children->len > 0)
    reap (children, interrupted, failed);
  g_array_free (children, TRUE);
}
