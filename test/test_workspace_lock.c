/* One live run per workspace (workspace/workspace_lock.h): another process
 * holding it refuses the run, naming the holder; rank locks of jobs
 * started by other launchers collide only at a common rank; a holder that
 * ended leaves no claim; a record left by a dead process is no claim. */
#include <glib.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/error.h"
#include "support/temp_tree.h"
#include "workspace/workspace_lock.h"

typedef struct {
  pid_t pid;
  int release;   /* write end: closing it ends the holder */
} Holder;

/* A child process that takes `rank`'s lock (-1 the whole workspace) and
 * holds it until told to end. */
static Holder
hold_in_child (const char *ws, int rank)
{
  int ready[2], release[2];
  g_assert_cmpint (pipe (ready), ==, 0);
  g_assert_cmpint (pipe (release), ==, 0);
  pid_t pid = fork ();
  g_assert_cmpint (pid, >=, 0);
  if (pid == 0)
    {
      close (ready[0]);
      close (release[1]);
      char ok = shoal_workspace_lock (ws, rank, NULL) ? 'y' : 'n';
      if (write (ready[1], &ok, 1) != 1)
        _exit (2);
      char c;
      while (read (release[0], &c, 1) > 0)
        ;
      _exit (0);
    }
  close (ready[1]);
  close (release[0]);
  char ok = 0;
  g_assert_cmpint (read (ready[0], &ok, 1), ==, 1);
  g_assert_cmpint (ok, ==, 'y');
  close (ready[0]);
  return (Holder) { pid, release[1] };
}

static void
end_holder (Holder h)
{
  close (h.release);
  int status = 0;
  g_assert_cmpint (waitpid (h.pid, &status, 0), ==, h.pid);
  g_assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
}

static void
assert_refused (const char *ws, int rank, const char *says)
{
  GError *error = NULL;
  g_assert_false (shoal_workspace_lock (ws, rank, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_IO);
  g_test_message ("%s", error->message);
  g_assert_nonnull (strstr (error->message, "in use by another run"));
  g_assert_nonnull (strstr (error->message, says));
  g_error_free (error);
}

static void
test_whole_workspace (void)
{
  char *ws = g_dir_make_tmp ("wslock-XXXXXX", NULL);
  Holder h = hold_in_child (ws, -1);
  char *pid = g_strdup_printf ("pid %d on host %s", (int) h.pid, g_get_host_name ());
  assert_refused (ws, -1, pid);
  assert_refused (ws, 0, pid);
  assert_refused (ws, 3, pid);
  g_assert_cmpint (shoal_workspace_lock_fd (ws), ==, -1);
  end_holder (h);
  /* the holder ended: its claim went with it, though its record stays */
  GError *error = NULL;
  g_assert_true (shoal_workspace_lock (ws, -1, &error));
  g_assert_no_error (error);
  g_assert_cmpint (shoal_workspace_lock_fd (ws), >=, 0);
  /* taking it again in the same process is not a conflict */
  g_assert_true (shoal_workspace_lock (ws, -1, &error));
  shoal_workspace_unlock (ws);
  g_assert_cmpint (shoal_workspace_lock_fd (ws), ==, -1);
  g_free (pid);
  shoal_test_remove_tree (ws);
  g_free (ws);
}

static void
test_ranks (void)
{
  char *ws = g_dir_make_tmp ("wslock-XXXXXX", NULL);
  Holder h = hold_in_child (ws, 0);
  /* another job's rank 0 and a whole-workspace run collide with it ... */
  assert_refused (ws, 0, "rank 0 of a job started by another launcher");
  assert_refused (ws, -1, "rank 0 of a job started by another launcher");
  /* ... a rank it does not hold does not */
  GError *error = NULL;
  g_assert_true (shoal_workspace_lock (ws, 1, &error));
  g_assert_no_error (error);
  shoal_workspace_unlock (ws);
  end_holder (h);
  g_assert_true (shoal_workspace_lock (ws, -1, &error));
  g_assert_no_error (error);
  shoal_workspace_unlock (ws);
  shoal_test_remove_tree (ws);
  g_free (ws);
}

/* A record a killed run left (a dead pid) is not a claim. */
static void
test_stale_record (void)
{
  char *ws = g_dir_make_tmp ("wslock-XXXXXX", NULL);
  Holder h = hold_in_child (ws, -1);
  kill (h.pid, SIGKILL);
  close (h.release);
  waitpid (h.pid, NULL, 0);
  char *path = g_build_filename (ws, "lock", NULL);
  char *text = NULL;
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  char *pid = g_strdup_printf ("pid=%d", (int) h.pid);
  g_assert_nonnull (strstr (text, pid));
  GError *error = NULL;
  g_assert_true (shoal_workspace_lock (ws, -1, &error));
  g_assert_no_error (error);
  shoal_workspace_unlock (ws);
  g_free (pid);
  g_free (text);
  g_free (path);
  shoal_test_remove_tree (ws);
  g_free (ws);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/workspace-lock/whole", test_whole_workspace);
  g_test_add_func ("/workspace-lock/ranks", test_ranks);
  g_test_add_func ("/workspace-lock/stale-record", test_stale_record);
  return g_test_run ();
}
