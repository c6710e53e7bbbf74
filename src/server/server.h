/* A parameter server: holds the values of a range of slices of the param
 * store, with their optimiser state, and applies the updater to each
 * gradient pushed to it.
 *
 * The flat param buffer is cut into `nslices` near-equal slices (server
 * groups and servers own whole slices); every slice has a lock and a
 * version, the number of the last step applied to it.  Updates are
 * applied per param segment, so per-param lr_scale and wd_scale hold even
 * where a slice boundary cuts a param.  Thread-safe: pushes to different
 * slices run in parallel, pushes to one slice are serialised. */
#ifndef SHOAL_SERVER_H
#define SHOAL_SERVER_H

#include <glib.h>

#include "core/param.h"
#include "core/updater.h"

G_BEGIN_DECLS

typedef struct _ShoalServer ShoalServer;

/* `layout` gives the param table (names, offsets, scales) and initial
 * values, which are copied; it may be freed afterwards.  Returns a new
 * server; free with shoal_server_free. */
ShoalServer *shoal_server_new (const ShoalParamStore *layout, const ShoalUpdaterConf *updater,
                               int nslices);
void shoal_server_free (ShoalServer *server);

/* The server's value buffer (layout->total floats).  Borrowed: valid while
 * the server lives.  An in-process worker reads params from it directly. */
float *shoal_server_values (ShoalServer *server);
size_t shoal_server_total (ShoalServer *server);
int shoal_server_n_slices (ShoalServer *server);
/* [begin, end) of slice i in floats. */
void shoal_server_slice_range (ShoalServer *server, int slice, size_t *begin, size_t *end);
gint64 shoal_server_slice_version (ShoalServer *server, int slice);

/* Applies the update of 0-based `step` for values [begin, end), whose
 * gradient is grad[0 .. end-begin).  grad is only read. */
void shoal_server_update (ShoalServer *server, size_t begin, size_t end, const float *grad, int step);

/* Copies values [begin, end) into dst. */
void shoal_server_read (ShoalServer *server, size_t begin, size_t end, float *dst);

G_END_DECLS

#endif
