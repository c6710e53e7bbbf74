/* Params by name, as bytes: how trained params leave a net (the
 * "params" blob of a checkpoint, a model file written by
 * shoal_net_save_params) and how they come back into another net's store
 * by name ([job] init_from, shoal predict, shoal sample, applications).
 *
 * Format (little-endian): the 8 bytes "SHOALPRM", a u32 version (1), a
 * u32 count, then per param: u32 name length, the name (no NUL), u32
 * ndim, ndim i32 dims, u64 count of floats, the floats.  Blobs written
 * before the header existed (no magic) load too. */
#ifndef SHOAL_PARAM_BLOB_H
#define SHOAL_PARAM_BLOB_H

#include <glib.h>

#include "core/param.h"

G_BEGIN_DECLS

/* Every param of `store` with its host values; a new GBytes. */
GBytes *shoal_param_store_to_bytes (const ShoalParamStore *store);

typedef enum {
  SHOAL_PARAMS_BY_NAME_ANY,   /* copy the params whose names match; at least one must */
  SHOAL_PARAMS_BY_NAME_ALL    /* every param of the store must be in the blob */
} ShoalParamsMatch;

/* Copies the blob's params into the store's host values by name; errors
 * name `origin` (where the blob comes from: a workspace, a file).  A
 * name in both with different shapes is an error (SHOAL_ERROR_SHAPE:
 * "param fc1/weight is 10x784 in ORIGIN but 20x784 here"), as is
 * a store param the blob lacks under BY_NAME_ALL or no match at all
 * (SHOAL_ERROR_DATA), and a damaged blob (SHOAL_ERROR_DATA).  On error
 * the store may hold some of the blob's values.  *copied (may be NULL)
 * gets how many params were copied. */
gboolean shoal_param_store_load_bytes (ShoalParamStore *store, GBytes *blob, const char *origin,
                                       ShoalParamsMatch match, int *copied, GError **error);

G_END_DECLS

#endif
