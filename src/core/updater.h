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

#include "core/param.h"

G_BEGIN_DECLS

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

/* Clips in place: each element to +-clip_value, then the whole vector to
 * L2 norm clip_norm (either 0 = off).  Returns the norm before clipping. */
double shoal_clip_gradients (float *grad, size_t n, float clip_value, float clip_norm);

G_END_DECLS

#endif
