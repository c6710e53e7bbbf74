/* Two plugins that break the contract, for test/e2e/valgrind_api.sh:
 * built with -DINIT_FAILS_SILENTLY, an init that fails without saying
 * why (SHOAL_ERROR_INTERNAL); without it, no init at all. */
#include <shoal/shoal.h>

#ifdef INIT_FAILS_SILENTLY
static gboolean
silent_init (GError **error)
{
  (void) error;
  return FALSE;
}
SHOAL_PLUGIN_DEFINE ("silent", "an init that fails without an error", silent_init);
#else
SHOAL_PLUGIN_DEFINE ("noinit", "no init function", NULL);
#endif
