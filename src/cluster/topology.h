/* Topology files: a conf holding only a [cluster] section (the files in conf/)
 * whose keys replace the scheme keys of a job's [cluster].  The job loader (job/job.h,
 * shoal_job_load_topology) applies one as overrides on the job text with
 * its own [cluster] blanked out, so every other key keeps its line. */
#ifndef SHOAL_TOPOLOGY_H
#define SHOAL_TOPOLOGY_H

#include <glib.h>

G_BEGIN_DECLS

/* The topology file at `path` checked as a [cluster] section alone (its
 * keys and the layout they make; errors name its own lines), as
 * overrides "cluster.KEY=VALUE": a newly allocated NULL-terminated list
 * (g_strfreev), or NULL with error. */
char **shoal_topology_overrides (const char *path, GError **error);

/* [cluster] keys that say where and how a job's parts run rather than
 * which scheme runs (gpus, partition_dim, the liveness timeouts and the
 * limits): a topology keeps the job's. */
gboolean shoal_topology_key_is_placement (const char *key);

/* The job conf text with the scheme keys of its [cluster] section blanked
 * out line by line (each becomes a comment naming topology_path), so
 * every other key keeps its line number in messages; the placement keys
 * stay.  Newly allocated. */
char *shoal_topology_blank_cluster (const char *text, const char *topology_path);

G_END_DECLS

#endif
