/* The tests' time scale for GTests: test/support/time_scale.h. */
#include "time_scale.h"

#include <stdlib.h>

gint64
shoal_test_scaled_us (gint64 us)
{
  const char *s = g_getenv ("SHOAL_TEST_TIME_SCALE");
  if (s == NULL || *s == '\0')
    return us;
  char *end;
  double scale = g_ascii_strtod (s, &end);
  if (*end != '\0' || !(scale >= 1.0))
    g_error ("SHOAL_TEST_TIME_SCALE=%s: not a number >= 1", s);
  return (gint64) ((double) us * scale + 0.999);
}
