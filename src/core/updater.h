/* Updaters (the optimiser rules) and learning-rate schedules.
 *
 * The server applies an updater to a range of the flat param buffers, one
 * param segment at a time, so that every param keeps its own lr_scale and
 * wd_scale even when a server slice cuts through it.
 *
 * Rules (w value, g gradient incl. weight decay wd*w, lr the scheduled rate):
 *   sgd       v = momentum*v - lr*g;            w += v
 *   nesterov  v' = momentum*v - lr*g;           w += -momentum*v + (1+momentum)*v'
 *   adagrad   h += g^2;                         w -= lr*g / (sqrt(h) + eps)
 *   rmsprop   h = rho*h + (1-rho)*g^2;          w -= lr*g / (sqrt(h) + eps)
 *   adadelta  h = rho*h + (1-rho)*g^2; d = -sqrt(u+eps)/sqrt(h+eps)*g;
 *             u = rho*u + (1-rho)*d^2;          w += lr*d
 *   adam      m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2;
 *             w -= lr * (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps)
 * Gradient clipping (clip_value elementwise, clip_norm on the global L2
 * norm) is done by the worker on the whole gradient before it is pushed:
 * shoal_clip_gradients. */
#ifndef SHOAL_UPDATER_H
#define SHOAL_UPDATER_H

#include <glib.h>

#include <shoal/updater.h>

#include "core/device.h"
#include "core/param.h"

G_BEGIN_DECLS

/* The numbers one update of one param segment uses, resolved once from
 * the conf, the step's learning rate, the update count and the param's
 * scales: the host loops below and the device kernels (src/gpu) read the
 * same ones, so the two compute the same update. */
typedef struct {
  ShoalUpdaterKind kind;
  gboolean momentum;    /* sgd: keeps a velocity (momentum != 0) */
  float lr, wd;         /* scheduled lr times lr_scale; weight_decay times wd_scale */
  float mom, rho, eps;
  float b1, b2;
  float lr_c, rs;       /* adam: lr / (1 - b1^t), 1 / sqrt (1 - b2^t) */
} ShoalUpdateScalars;

/* Fills `out` for one update at 0-based `step`, the segment's t-th
 * (1-based; Adam's bias correction). */
void shoal_updater_scalars (const ShoalUpdaterConf *conf, int step, gint64 t, float lr_scale,
                            float wd_scale, ShoalUpdateScalars *out);

/* Floats of optimiser state per param value: 0, 1 or 2. */
int shoal_updater_state_per_value (ShoalUpdaterKind kind);

/* Applies one update to n values of one param (or a segment of it).
 * grad is read-only; state_a and state_b are the first and second state
 * arrays of the segment (NULL where the rule keeps fewer); in a param
 * store they sit at store->state + offset and store->state + total +
 * offset.  step is the 0-based step whose lr
 * is used; t is the 1-based count of updates this segment has had
 * (Adam's bias correction). */
void shoal_updater_apply (const ShoalUpdaterConf *conf, int step, gint64 t,
                          float lr_scale, float wd_scale,
                          float *value, const float *grad,
                          float *state_a, float *state_b, size_t n);

/* shoal_updater_apply on a device: value, grad and state are device
 * memory of `stream`'s GPU, and the update is enqueued on `stream`
 * (asynchronous: it runs after the work enqueued before it, such as the
 * backward that made the gradient).  With clear_grad the gradient is
 * zeroed as it is read.  Bitwise the host rule's result: the kernels make
 * the same IEEE operations in the same order (no fused multiply-add).
 * A launch failure surfaces at the stream's next synchronisation. */
void shoal_updater_apply_on (ShoalStream *stream, const ShoalUpdaterConf *conf, int step, gint64 t,
                             float lr_scale, float wd_scale, float *value, float *grad,
                             float *state_a, float *state_b, size_t n, gboolean clear_grad);

/* Clips in place: each element to +-clip_value, then the whole vector to
 * L2 norm clip_norm (either 0 = off).  Returns the norm before clipping. */
double shoal_clip_gradients (float *grad, size_t n, float clip_value, float clip_norm);
/* The same on a device, enqueued on `stream`, without the host waiting
 * for the norm: the scale factor goes from one kernel to the next in
 * device memory.  `scratch` is device memory of 2 doubles.  The norm
 * sums in double in another order than the host's, so a clipped
 * gradient may differ from the host's in the last bit of its scale. */
void shoal_clip_gradients_on (ShoalStream *stream, float *grad, size_t n, float clip_value,
                              float clip_norm, double *scratch);

G_END_DECLS

#endif
