/* A job step started by Slurm's srun: the ranks, their number and the
 * host of every rank from the step's environment, so that `srun -n N
 * shoal proc JOB.conf` needs no hostfile (examples/slurm/README.md). */
#ifndef SHOAL_SLURM_H
#define SHOAL_SLURM_H

#include <glib.h>

G_BEGIN_DECLS

/* Expands a Slurm host list as Slurm does ("node[01-03,7],login1,
 * rack[1-2]-n[1-2]": ranges keep the lower bound's zero padding, several
 * bracket groups multiply, top-level commas separate) without calling
 * Slurm (text after the last bracket, which scontrol refuses, is kept).  NULL with an error naming the list and what is wrong. */
char **shoal_slurm_expand_hostlist (const char *list, GError **error);

/* The same through `scontrol show hostnames` where scontrol is on PATH
 * (Slurm's own expansion), else shoal_slurm_expand_hostlist. */
char **shoal_slurm_hostnames (const char *list, GError **error);

/* Slurm's tasks per node ("2(x3),1" = 2, 2, 2, 1): one count per node of
 * nnodes.  NULL with an error otherwise. */
int *shoal_slurm_tasks_per_node (const char *spec, int nnodes, GError **error);

/* Each rank's host for ntasks ranks on these nodes with these counts,
 * laid out as Slurm's distribution says (NULL or "block": consecutive
 * ranks per node; "cyclic": one per node in turn).  NULL with an error
 * for another distribution or counts that do not add up. */
char **shoal_slurm_place_ranks (char **nodes, const int *counts, int ntasks, const char *distribution,
                                GError **error);

/* Whether this process is a task of an srun step (SLURM_PROCID and
 * SLURM_NTASKS set); *rank and *ntasks from them. */
gboolean shoal_slurm_task (int *rank, int *ntasks);

/* Each rank's host of this srun step, from SLURM_STEP_NODELIST (or
 * SLURM_JOB_NODELIST), SLURM_STEP_TASKS_PER_NODE (or
 * SLURM_TASKS_PER_NODE) and SLURM_DISTRIBUTION.  NULL with an error
 * naming the variable. */
char **shoal_slurm_rank_hosts (int ntasks, GError **error);

/* A base port for this step's ranks (base + rank) that two steps sharing
 * a node are unlikely to share: from SLURM_JOB_ID and SLURM_STEP_ID,
 * in 30000..61999 in steps of 16. */
int shoal_slurm_base_port (void);

G_END_DECLS

#endif
