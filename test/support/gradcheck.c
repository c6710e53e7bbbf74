/* The library's gradient checks inside GTest tests; see gradcheck.h. */
#include "gradcheck.h"

static int
report (gboolean ok, int checked, GError *error)
{
  if (!ok)
    {
      g_test_message ("%s", error->message);
      g_test_fail ();
      g_error_free (error);
    }
  return checked;
}

int
shoal_gradcheck_conf (const char *conf_text, const char *layer, const ShoalGradcheckOptions *opts,
                      guint64 seed)
{
  GError *error = NULL;
  int checked = 0;
  gboolean ok = shoal_layer_gradcheck (conf_text, layer, opts, seed, &checked, &error);
  return report (ok, checked, error);
}

int
shoal_gradcheck_net (ShoalNet *net, const char *layer, const ShoalGradcheckOptions *opts)
{
  GError *error = NULL;
  int checked = 0;
  gboolean ok = shoal_net_gradcheck (net, layer, opts, &checked, &error);
  return report (ok, checked, error);
}
