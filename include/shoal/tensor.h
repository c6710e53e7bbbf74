/* Tensors: float32 arrays of up to four dimensions, batch first.
 *
 * Tensors belong to what made them: a layer's output and gradient to the
 * layer (so to its net), a param's value and gradient to the param store.
 * Applications get them through accessors (shoal_layer_out,
 * shoal_param_value, ...) as borrowed pointers, valid while the owner
 * lives; they read and write the floats in place but never free them.
 * Tensors of a net on a GPU hold device memory: shoal_tensor_data is then
 * a device pointer (see shoal_tensor_device). */
#ifndef SHOAL_PUBLIC_TENSOR_H
#define SHOAL_PUBLIC_TENSOR_H

#include <glib.h>
#include <stddef.h>

G_BEGIN_DECLS

#define SHOAL_MAX_DIMS 4

typedef enum {
  SHOAL_DEVICE_CPU = 0,
  SHOAL_DEVICE_CUDA = 1
} ShoalDeviceKind;

/* Where memory lives: the CPU, or CUDA GPU number `index`. */
typedef struct {
  ShoalDeviceKind kind;
  int index;             /* GPU ordinal; 0 for the CPU */
} ShoalDevice;

/* A shape: dims[0] is the batch ("rows") wherever a tensor holds samples. */
typedef struct {
  int ndim;
  int dim[SHOAL_MAX_DIMS];
} ShoalShape;

typedef struct _ShoalTensor ShoalTensor;

/* ---- shapes (values: nothing to free) ------------------------------------ */

/* shoal_shape_make (2, 64, 784); ndim 0 .. SHOAL_MAX_DIMS, every dim >= 0
 * (else a critical and the shape of ndim 0). */
ShoalShape shoal_shape_make (int ndim, ...);
/* Product of all dims (1 for ndim 0); a shape with a negative dim: a
 * critical and 0, as row_size. */
size_t shoal_shape_count (const ShoalShape *shape);
/* Product of dims 1.. (the floats of one row). */
size_t shoal_shape_row_size (const ShoalShape *shape);
gboolean shoal_shape_equal (const ShoalShape *a, const ShoalShape *b);
/* "64x1x28x28": newly allocated, g_free it. */
char *shoal_shape_to_string (const ShoalShape *shape);

/* ---- tensors (borrowed from their owner) ---------------------------------- */

/* The floats, row-major; NULL before the owner allocated them.  Device
 * memory on a GPU net: never dereference it on the CPU then. */
float *shoal_tensor_data (const ShoalTensor *t);
/* The current shape; dims[0] may be smaller than at set-up (the last,
 * partial batch).  Borrowed, valid until the tensor changes. */
const ShoalShape *shoal_tensor_shape (const ShoalTensor *t);
/* dims[0], or 1 for a 0-d tensor. */
int shoal_tensor_rows (const ShoalTensor *t);
size_t shoal_tensor_count (const ShoalTensor *t);
size_t shoal_tensor_row_size (const ShoalTensor *t);
ShoalDevice shoal_tensor_device (const ShoalTensor *t);

/* ---- float buffers for layer state ---------------------------------------- */

/* count zeroed floats, 64-byte aligned; free with shoal_free_aligned.
 * Aborts like g_malloc when memory cannot be had: use it for small state,
 * and shoal_try_alloc_floats where the size comes from a user. */
float *shoal_alloc_floats (size_t count);
/* The same, NULL with SHOAL_ERROR_MEMORY ("out of memory allocating N
 * bytes (X GiB)") on failure. */
float *shoal_try_alloc_floats (size_t count, GError **error);
void shoal_free_aligned (void *p);
/* The same for bytes of any type (zeroed, 64-byte aligned, counted like
 * floats; free with shoal_free_aligned). */
void *shoal_try_alloc_bytes (size_t bytes, GError **error);

/* ---- memory budgets -------------------------------------------------------- */

/* A cap on the host memory the nets given it (ShoalNetOptions.budget)
 * allocate, summed over all of them: outputs, gradients, params and
 * their gradients, and whatever a layer's set-up allocates with the
 * functions above (workspaces such as a convolution's column buffer).
 * While a net is set up, every such allocation on its thread is charged
 * before malloc is asked; one that would cross the limit fails with
 * SHOAL_ERROR_MEMORY, and the net's set-up fails naming the layer and
 * the bytes.  A net gives its bytes back when freed.  limit 0 counts
 * without a cap.  `name` is how errors call the limit ("job.memory_limit");
 * copied.  Thread-safe: the nets of several threads may share one. */
typedef struct _ShoalMemoryBudget ShoalMemoryBudget;
ShoalMemoryBudget *shoal_memory_budget_new (guint64 limit, const char *name);
void shoal_memory_budget_free (ShoalMemoryBudget *budget);    /* after every net using it; NULL ignored */
guint64 shoal_memory_budget_limit (const ShoalMemoryBudget *budget);
guint64 shoal_memory_budget_used (ShoalMemoryBudget *budget); /* bytes charged to it now */

G_END_DECLS

#endif
