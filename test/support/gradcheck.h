/* Gradient checks in GTest tests: shoal_layer_gradcheck (the library's,
 * shoal/layer.h) with a failure reported through g_test_message and
 * g_test_fail, so a test checks a layer in one line. */
#ifndef SHOAL_TEST_GRADCHECK_H
#define SHOAL_TEST_GRADCHECK_H

#include <glib.h>

#include "net/net.h"

/* Builds the net from `conf_text`, initialises params with `seed` and
 * checks `layer`; on a mismatch the current test fails with the report.
 * Returns the number of elements compared. */
int shoal_gradcheck_conf (const char *conf_text, const char *layer,
                          const ShoalGradcheckOptions *opts, guint64 seed);

/* Same on a net you built (feed data and params already set). */
int shoal_gradcheck_net (ShoalNet *net, const char *layer, const ShoalGradcheckOptions *opts);

#endif
