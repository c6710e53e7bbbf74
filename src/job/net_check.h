/* The launcher's check of a job's net before it takes a workspace. */
#ifndef SHOAL_NET_CHECK_H
#define SHOAL_NET_CHECK_H

#include "job/job.h"

G_BEGIN_DECLS

/* Builds the job's net once as a group of nworkers_per_group workers in
 * this process (its layers, their options and splits, its data inputs)
 * and frees it: FALSE with the error a rank would report (file, line,
 * layer and key of the job's own conf) when a rank could not build it. */
gboolean shoal_job_check_net (ShoalJob *job, GError **error);

G_END_DECLS

#endif
