/* Error domain and codes shared by every part of shoal.
 *
 * Library code reports recoverable failures through GError with
 * SHOAL_ERROR; it never exits the process.  Messages name the place:
 * "conf/x.conf:12: [layer fc1] unknown key 'foo'". */
#ifndef SHOAL_ERROR_H
#define SHOAL_ERROR_H

#include <glib.h>

G_BEGIN_DECLS

#define SHOAL_ERROR (shoal_error_quark ())
GQuark shoal_error_quark (void);

typedef enum {
  SHOAL_ERROR_CONF,        /* the job conf is wrong */
  SHOAL_ERROR_SHAPE,       /* shapes of neighbouring layers do not fit */
  SHOAL_ERROR_DATA,        /* a data file or record is missing or malformed */
  SHOAL_ERROR_IO,          /* reading or writing a file failed */
  SHOAL_ERROR_UNSUPPORTED, /* valid request this build or layer cannot do */
  SHOAL_ERROR_RPC,         /* a remote call failed */
  SHOAL_ERROR_INTERNAL,
  SHOAL_ERROR_TIMEOUT,     /* nothing came from a peer in the time allowed */
  SHOAL_ERROR_STOPPED,     /* SYNC: the job stops at an earlier step (a worker stopped on
                            * SIGINT/SIGTERM): this step is never aggregated */
  SHOAL_ERROR_NO_MEMORY    /* an allocation whose size a conf decides failed */
} ShoalErrorCode;

G_END_DECLS

#endif
