/* Numerical gradient checks for layers (test support, not in libshoal).
 *
 * The check builds a net from conf text, runs it forward, and uses the
 * objective  J = sum_i out[i] * r[i]  of the layer under test, with r a
 * fixed random vector (or J = out when the layer is a loss).  It then
 * compares the analytic gradients from backward with central finite
 * differences (J(x+eps) - J(x-eps)) / 2eps for
 *   - every param of the layer, and
 *   - the outputs of every source layer that needs a gradient
 *     (feed layers with need_grad = true).
 * Param gradients start from a known non-zero pattern and the check
 * compares what backward added to it: backward must ADD into them
 * (layer.h), never overwrite.
 * Elements whose finite difference straddles a kink (ReLU at 0, a max-pool
 * tie) are skipped: an element is skipped when the one-sided differences
 * disagree by more than `kink`.  A check fails when
 *   |analytic - numeric| > atol + rtol * max(|analytic|, |numeric|). */
#ifndef SHOAL_TEST_GRADCHECK_H
#define SHOAL_TEST_GRADCHECK_H

#include <glib.h>

#include "partition/net.h"

typedef struct {
  float eps;       /* finite-difference step; default 1e-2 */
  float rtol;      /* default 2e-2 */
  float atol;      /* default 1e-3 */
  float kink;      /* default 5e-2 (relative, see above) */
  int max_checks;  /* elements checked per tensor, spread evenly; 0 = all (default 200) */
  ShoalPhase phase;
} ShoalGradcheckOptions;

void shoal_gradcheck_options_init (ShoalGradcheckOptions *opts);

/* Builds the net from `conf_text`, initialises params with `seed`, fills
 * feed layers with gaussian data, and checks `layer`.  Reports every
 * mismatch with g_test_message and fails the current GTest test.
 * Returns the number of elements compared (> 0 when something was checked). */
int shoal_gradcheck_conf (const char *conf_text, const char *layer,
                          const ShoalGradcheckOptions *opts, guint64 seed);

/* Same on a net you built (feed data and params already set). */
int shoal_gradcheck_net (ShoalNet *net, const char *layer, const ShoalGradcheckOptions *opts);

#endif
