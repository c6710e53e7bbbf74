/* One live run per workspace.
 *
 * A run holds a lock on WORKSPACE/lock for as long as it runs: an OFD
 * (open file description) record lock taken with fcntl (F_OFD_SETLK),
 * which the kernel drops when the last descriptor of the holder closes -
 * the run ends, is killed, or its host's NFS lease expires - so a stale
 * claim is never left behind, and which NFS (v3 through lockd, v4 in the
 * protocol) carries to every host sharing the disk.  A run that finds it
 * held is refused at once, naming the holder (host, pid, start) that the
 * file records.
 *
 * - A run of one process, a virtual-clock run and `shoal run`'s launcher
 *   lock the whole file.  The launcher's ranks inherit its descriptor
 *   (SHOAL_WORKSPACE_LOCK_FD), so the claim holds until the last process
 *   of the job has ended, even one that outlives its launcher.
 * - A rank started by another launcher (mpirun, srun: each host runs its
 *   own ranks) locks byte R + 1 for rank R: two such jobs collide at
 *   their common ranks, and any of their ranks collides with a whole-file
 *   holder.
 * - Where the file system has no locks (ENOLCK), the recorded holder is
 *   checked instead: a live process of this host and boot refuses the
 *   run; another host's record cannot be checked and is taken over, with
 *   a warning. */
#ifndef SHOAL_WORKSPACE_LOCK_H
#define SHOAL_WORKSPACE_LOCK_H

#include <glib.h>

G_BEGIN_DECLS

/* Takes the workspace (a directory that exists) for this process: the
 * whole of it (rank < 0) or one rank of a job.  Taking one this process
 * holds, or that its launcher passed down, succeeds.  FALSE with error
 * (SHOAL_ERROR_IO) naming the run that holds it. */
gboolean shoal_workspace_lock (const char *workspace, int rank, GError **error);

/* The descriptor holding `workspace`'s lock, for a launcher's children
 * to inherit; -1 when this process holds none. */
int shoal_workspace_lock_fd (const char *workspace);

/* Gives the workspace back (nothing when this process does not hold
 * it, or holds it through its launcher). */
void shoal_workspace_unlock (const char *workspace);

G_END_DECLS

#endif
