/* [job] init_from: params of other jobs' workspaces (the "params" blob
 * each checkpoint keeps, workspace/workspace.h) initialise this job's by
 * name - pre-training, greedy stacks of RBMs, an autoencoder unrolled
 * from them, `shoal sample`. */
#ifndef SHOAL_NAMED_PARAMS_H
#define SHOAL_NAMED_PARAMS_H

#include <glib.h>

#include "core/conf.h"
#include "core/param.h"

G_BEGIN_DECLS

/* Initialises the store's params from the blobs of `workspaces` (NULL-
 * terminated, in order: where two have a param, the later wins); an entry
 * that is a file, not a folder, is a params file itself (the layout of
 * shoal/param.h: shoal_net_save_params's, or another program's).  A param
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
