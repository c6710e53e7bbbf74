/* Params by name: the "params" blob a job's checkpoint keeps (group 0's
 * first unit saves it), and [job] init_from, which initialises another
 * job's params from it - pre-training, greedy stacks of RBMs, an
 * autoencoder unrolled from them, `shoal sample`.
 *
 * Blob: per param u32 name length, name, u32 ndim, i32 dims, u64 count,
 * count floats (the host values). */
#ifndef SHOAL_NAMED_PARAMS_H
#define SHOAL_NAMED_PARAMS_H

#include <glib.h>

#include "core/conf.h"
#include "core/param.h"

G_BEGIN_DECLS

/* A new blob of every param's values (the store's host buffers). */
GBytes *shoal_named_params_blob (ShoalParamStore *store);

/* The newest "params" blob of workspace's checkpoint (rank 0), or NULL
 * with error naming the workspace. */
GBytes *shoal_named_params_load_workspace (const char *workspace, GError **error);

/* Initialises the store's params from the blobs of `workspaces` (NULL-
 * terminated, in order: where two have a param, the later wins).  A param
 * P of layer L takes the blob's param of its own name, or the one that
 * [layer L] P_init_from names: "NAME" or "NAME^T" (a 2-D param transposed,
 * e.g. a decoder's weight from its encoder's).  Errors, naming the conf
 * line (conf may be NULL: no renames, plain messages): a param of another
 * shape, an init_from name no workspace has, a workspace none of whose
 * params this net has, a damaged blob.  *copied (may be NULL) gets the
 * number of params initialised. */
gboolean shoal_named_params_init (ShoalParamStore *store, ShoalConf *conf,
                                  const char *const *workspaces, int *copied, GError **error);

G_END_DECLS

#endif
