/* RLIMIT_AS a little above what a test subprocess maps; see
 * address_limit.h. */
#include "address_limit.h"

#include <pthread.h>
#include <string.h>
#include <sys/resource.h>

static struct rlimit saved_limit;

void
shoal_test_cap_address_space (guint64 extra)
{
  char *status = NULL;
  g_assert_true (g_file_get_contents ("/proc/self/status", &status, NULL, NULL));
  const char *line = strstr (status, "VmSize:");
  g_assert_nonnull (line);
  guint64 kb = g_ascii_strtoull (line + strlen ("VmSize:"), NULL, 10);
  g_free (status);
  g_assert_cmpint (getrlimit (RLIMIT_AS, &saved_limit), ==, 0);
  struct rlimit r = saved_limit;
  r.rlim_cur = kb * 1024 + extra;
  g_assert_cmpint (setrlimit (RLIMIT_AS, &r), ==, 0);
}

void
shoal_test_uncap_address_space (void)
{
  g_assert_cmpint (setrlimit (RLIMIT_AS, &saved_limit), ==, 0);
}

void
shoal_test_refuse_threads (void)
{
  pthread_attr_t attr;
  g_assert_cmpint (pthread_getattr_default_np (&attr), ==, 0);
  g_assert_cmpint (pthread_attr_setstacksize (&attr, (size_t) 16 << 20), ==, 0);
  g_assert_cmpint (pthread_setattr_default_np (&attr), ==, 0);
  pthread_attr_destroy (&attr);
  shoal_test_cap_address_space ((guint64) 1 << 20);
}
