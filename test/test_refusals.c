/* rpc/refusals.h: what a listener refused, per peer host, as the loss of
 * a rank never heard from reports it. */
#include <string.h>

#include "rpc/refusals.h"

/* shoal_refusals_describe of what host resolves to, newly allocated */
static char *
describe (ShoalRefusals *r, const char *host)
{
  char **addresses = shoal_refusals_resolve (host);
  char *s = shoal_refusals_describe (r, (const char *const *) addresses);
  g_strfreev (addresses);
  return s;
}

static void
test_per_host (void)
{
  ShoalRefusals *r = shoal_refusals_new ();
  g_assert_null (describe (r, "10.0.0.1"));
  shoal_refusals_note (r, "10.0.0.1:47001", "TLS handshake: the peer refused this rank (tlsv1 alert unknown ca)");
  shoal_refusals_note (r, "10.0.0.1:52000", "refused a plain (unencrypted) call");
  shoal_refusals_note (r, "10.0.0.2:47001", "a call with a wrong job token");
  shoal_refusals_note (r, "[::1]:47001", "a call with a wrong job token");
  char *s = describe (r, "10.0.0.1");
  g_assert_cmpstr (s, ==, "2 from 10.0.0.1 (the last: refused a plain (unencrypted) call)");
  g_free (s);
  s = describe (r, "::1");
  g_assert_cmpstr (s, ==, "1 from ::1 (the last: a call with a wrong job token)");
  g_free (s);
  /* another host: nothing */
  g_assert_null (describe (r, "10.0.0.3"));
  shoal_refusals_free (r);
}

/* a name counts every address it resolves to */
static void
test_host_name (void)
{
  ShoalRefusals *r = shoal_refusals_new ();
  shoal_refusals_note (r, "127.0.0.1:40000", "a call with a wrong job token");
  char *s = describe (r, "localhost");
  g_assert_nonnull (s);
  g_assert_nonnull (strstr (s, "1 from 127.0.0.1 (the last: a call with a wrong job token)"));
  g_free (s);
  shoal_refusals_free (r);
}

/* connections from ever new hosts keep at most SHOAL_REFUSALS_HOSTS of them */
static void
test_bounded (void)
{
  ShoalRefusals *r = shoal_refusals_new ();
  for (int i = 0; i < 2 * SHOAL_REFUSALS_HOSTS; i++)
    {
      char peer[32];
      g_snprintf (peer, sizeof peer, "10.1.%d.%d:1", i / 250, i % 250 + 1);
      shoal_refusals_note (r, peer, "refused");
    }
  char *first = describe (r, "10.1.0.1");
  g_assert_cmpstr (first, ==, "1 from 10.1.0.1 (the last: refused)");
  g_free (first);
  char last[32];
  int i = 2 * SHOAL_REFUSALS_HOSTS - 1;
  g_snprintf (last, sizeof last, "10.1.%d.%d", i / 250, i % 250 + 1);
  g_assert_null (describe (r, last));
  shoal_refusals_free (r);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/refusals/per-host", test_per_host);
  g_test_add_func ("/refusals/host-name", test_host_name);
  g_test_add_func ("/refusals/bounded", test_bounded);
  return g_test_run ();
}
