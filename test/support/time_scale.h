/* The tests' time scale for GTests (test support, not in libshoal). */
#ifndef SHOAL_TEST_TIME_SCALE_H
#define SHOAL_TEST_TIME_SCALE_H

#include <glib.h>

/* us times SHOAL_TEST_TIME_SCALE (a number >= 1; 1 when unset), which
 * test/run-tests.sh sets for the whole suite from the build's kind
 * (test/e2e/lib/time_scale.sh): an upper bound on how long the product
 * may take, or a test's own wait, written for a plain build, holds for a
 * sanitized one that runs several times slower.  Lower bounds ("waited
 * at least the timeout") are not scaled: slowness never makes them
 * false.  A value that is not a number >= 1 aborts the test. */
gint64 shoal_test_scaled_us (gint64 us);

#endif
