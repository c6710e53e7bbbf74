/* Errors.  Every call that can fail returns FALSE (or NULL) and sets a
 * GError in the SHOAL_ERROR domain with one of the codes below and a
 * message that names the place: "conf/x.conf:12: [layer fc1] num_output:
 * expected an integer, got 'ten'".  The library never exits the process
 * and never prints errors itself; warnings and progress go to g_log
 * (domain "shoal"). */
#ifndef SHOAL_PUBLIC_ERROR_H
#define SHOAL_PUBLIC_ERROR_H

#include <glib.h>

G_BEGIN_DECLS

#define SHOAL_ERROR (shoal_error_quark ())
GQuark shoal_error_quark (void);

typedef enum {
  SHOAL_ERROR_CONF,        /* a conf or a command-line value is wrong; the message names file:line or -o */
  SHOAL_ERROR_SHAPE,       /* shapes do not fit: neighbouring layers, saved params, caller arrays */
  SHOAL_ERROR_DATA,        /* a data file, record, checkpoint or param blob is missing or malformed */
  SHOAL_ERROR_IO,          /* reading or writing a file failed (the message has the system's reason) */
  SHOAL_ERROR_UNSUPPORTED, /* a valid request this build, device or layer cannot do */
  SHOAL_ERROR_RPC,         /* a remote call failed */
  SHOAL_ERROR_INTERNAL,    /* a broken invariant, or an application's layer ops that break the contract */
  SHOAL_ERROR_TIMEOUT,     /* nothing came from a peer in the time allowed */
  SHOAL_ERROR_STOPPED,     /* training stops at an earlier step (SIGINT/SIGTERM to a worker) */
  SHOAL_ERROR_GRADIENT,    /* a gradient check found a mismatch (shoal_layer_gradcheck) */
  SHOAL_ERROR_MEMORY,      /* memory for a tensor, layer or buffer could not be had */
  SHOAL_ERROR_LOST         /* a process of the job was lost (no heartbeat, no progress), or this one was
                            * declared lost by the others and dropped */
} ShoalErrorCode;

/* RPC, TIMEOUT, STOPPED and LOST arise between the processes of a job
 * that `shoal run` launches (or `shoal proc` under mpirun/srun); no call
 * of these headers returns them, since shoal_job_train trains a layout
 * of one process only (shoal/job.h).  Each call's comment lists the
 * codes it returns. */

G_END_DECLS

#endif
