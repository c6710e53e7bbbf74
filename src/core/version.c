/* The library's own version, for programs linked against a libshoal.so
 * other than the one whose headers they were built with. */
#include <shoal/version.h>

const char *
shoal_version (void)
{
  return SHOAL_VERSION_STRING;
}
