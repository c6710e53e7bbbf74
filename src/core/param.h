/* The param store (its public face: shoal/param.h): every parameter of a net in one contiguous buffer,
 * every gradient in a second one and the optimiser state in a third, so
 * that a slice sent to a server is a pointer range.
 *
 * Use: layers declare their params during set-up (shoal_param_store_declare),
 * then the net calls shoal_param_store_allocate once; only after that do
 * ShoalParam.value / .grad point at memory.  Each param starts on a 64-byte
 * boundary. */
#ifndef SHOAL_PARAM_H
#define SHOAL_PARAM_H

#include <glib.h>

#include <shoal/param.h>

#include "core/init.h"
#include "core/tensor.h"

G_BEGIN_DECLS

struct _ShoalParam {
  char *name;            /* "<layer>/<param>", e.g. "fc1/weight"; owned by the param */
  ShoalShape shape;
  size_t offset;         /* index of the first float in the store's buffers */
  size_t count;          /* floats, without padding */
  ShoalInitSpec init;
  int fan_in, fan_out;
  float lr_scale, wd_scale;
  /* A statistic (batchnorm's running mean and variance; PyTorch's
   * "buffer"): written by its layer's forward, not trained.  It lies in
   * the store's tail past `served` (core/param_statistics.c), outside
   * every server slice: no updater moves it, no push or pull carries it,
   * and the unit that computed it keeps it (checkpointed with the unit's
   * state, saved by name with the other params). */
  gboolean statistic;
  ShoalTensor value;     /* view into store->values after allocation */
  ShoalTensor grad;      /* view into store->grads after allocation */
};

struct _ShoalParamStore {
  GPtrArray *params;     /* ShoalParam *, declaration order; owned */
  size_t total;          /* floats in each buffer, padding included */
  size_t served;         /* floats [0, served) hold every param but the statistics:
                          * what servers slice; == total when there are none */
  float *values;         /* owned unless values_borrowed */
  float *grads;          /* owned */
  float *state;          /* optimiser state, state_per_value * total floats; owned; NULL until asked */
  int state_per_value;
  gboolean allocated;
  gboolean values_borrowed;
  gboolean grads_borrowed;   /* shoal_param_store_move_to */
  gpointer memory_owner;     /* what holds borrowed values and grads; released with the store */
  GDestroyNotify release_memory;
  /* GPU nets (shoal_param_store_allocate_device): every param's value and
   * grad views point at these device copies, while values and grads above
   * stay on the host (pinned) as what servers and param clients use. */
  ShoalDevice device;    /* where the views point; CPU: values and grads */
  float *dev_values;     /* device, total floats, owned; NULL on the CPU */
  float *dev_grads;
  gboolean host_pinned;  /* values (unless borrowed) and grads are pinned host memory */
  gboolean borrowed_pinned;  /* this store pinned the borrowed values */
};

ShoalParamStore *shoal_param_store_new (void);
void shoal_param_store_free (ShoalParamStore *store);

/* Returns a param owned by the store, valid until the store is freed.
 * Its value/grad views are valid only after allocation. */
ShoalParam *shoal_param_store_declare (ShoalParamStore *store, const char *name,
                                       const ShoalShape *shape, const ShoalInitSpec *init,
                                       int fan_in, int fan_out,
                                       float lr_scale, float wd_scale);

/* Allocates zeroed values and grads and binds every param's views.
 * Statistics move to the tail first (shoal_param_store_place_statistics).
 * FALSE with SHOAL_ERROR_MEMORY when memory is short ("values of 6
 * params (largest: fc2/weight 500000x1024, 1.9 GiB): out of memory
 * allocating N bytes (2.0 GiB)"); the store is then as before. */
gboolean shoal_param_store_allocate (ShoalParamStore *store, GError **error);
/* Makes params read values from memory owned by someone else (an
 * in-process server); `values` must hold store->total floats and outlive
 * the binding. */
void shoal_param_store_borrow_values (ShoalParamStore *store, float *values);
/* Moves values and grads, contents kept, into memory of someone else (a
 * shared-memory region, rpc/shm_region.h): `values` and `grads` hold
 * store->total floats each, 64-byte aligned; the store keeps `owner` and
 * calls release (owner) when it is freed.  Views are rebound; a group
 * net rebinds its workers' views when it sees the new values pointer.
 * FALSE, nothing changed, for a store on a device or one that borrows
 * already. */
gboolean shoal_param_store_move_to (ShoalParamStore *store, float *values, float *grads,
                                    gpointer owner, GDestroyNotify release);
/* After allocation, for a net on a GPU: makes zeroed device copies of
 * values and grads, moves the host buffers to pinned memory (so copies
 * run asynchronously) and points every param's views at the device
 * copies.  FALSE with error when device or pinned memory is short. */
gboolean shoal_param_store_allocate_device (ShoalParamStore *store, ShoalDevice device,
                                            GError **error);
/* Allocates (zeroed) optimiser state of per_value floats per value;
 * FALSE with SHOAL_ERROR_MEMORY when memory is short. */
gboolean shoal_param_store_allocate_state (ShoalParamStore *store, int per_value, GError **error);

/* Prefixes an out-of-memory error about buffers of this store's size with
 * "WHAT of N params (largest: NAME SHAPE, X GiB): ", naming the layer
 * that most likely made it too big. */
void shoal_param_store_prefix_nomem (const ShoalParamStore *store, GError **error, const char *what);
/* The store's largest param, NULL when it has none. */
const ShoalParam *shoal_param_store_largest (const ShoalParamStore *store);

/* ---- statistics (core/param_statistics.c) ---------------------------------- */
/* Before allocation: gives every param its offset, the others first in
 * declaration order, then the statistics, and sets `served`.  Two stores
 * declaring the same params with the same flags get the same layout. */
void shoal_param_store_place_statistics (ShoalParamStore *store);
guint shoal_param_store_n_statistics (const ShoalParamStore *store);
/* The statistics alone by name (shoal_param_store_to_bytes' format). */
GBytes *shoal_param_store_statistics_to_bytes (const ShoalParamStore *store);
/* The bytes of a params file (shoal_net_save_params's), a new GBytes, or
 * NULL with SHOAL_ERROR_IO and the system's reason. */
GBytes *shoal_param_file_read (const char *path, GError **error);
/* Copies every statistic of the store from such bytes; FALSE with
 * SHOAL_ERROR_DATA (naming `origin`) when one is missing or damaged. */
gboolean shoal_param_store_load_statistics (ShoalParamStore *store, GBytes *bytes, const char *origin,
                                            GError **error);

G_END_DECLS

#endif
