/* One place for "this conf must not make a net, and must say why". */
#include "expect.h"

#include <glib.h>
#include <string.h>

#include "net/net.h"

void
shoal_expect_net_error (const char *conf_text, const char *fragment)
{
  GError *error = NULL;
  ShoalConf *conf = shoal_conf_load_data (conf_text, "bad.conf", &error);
  g_assert_no_error (error);
  g_assert_null (shoal_net_new (conf, NULL, &error));
  g_assert_nonnull (error);
  g_test_message ("%s", error->message);
  if (strstr (error->message, fragment) == NULL)
    g_error ("error '%s' lacks '%s'", error->message, fragment);
  g_error_free (error);
  shoal_conf_free (conf);
}
