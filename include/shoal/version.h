/* shoal's version, the one place it is written (the Makefile reads it
 * from here for the library's soname and shoal.pc). */
#ifndef SHOAL_PUBLIC_VERSION_H
#define SHOAL_PUBLIC_VERSION_H

#define SHOAL_MAJOR_VERSION 0
#define SHOAL_MINOR_VERSION 2
#define SHOAL_MICRO_VERSION 0
#define SHOAL_VERSION_STRING "0.2.0"

/* TRUE when the headers are at least version major.minor.micro, for
 * #if SHOAL_CHECK_VERSION (0, 2, 0). */
#define SHOAL_CHECK_VERSION(major, minor, micro)                                      \
  (SHOAL_MAJOR_VERSION > (major)                                                    \
   || (SHOAL_MAJOR_VERSION == (major) && SHOAL_MINOR_VERSION > (minor))             \
   || (SHOAL_MAJOR_VERSION == (major) && SHOAL_MINOR_VERSION == (minor)             \
       && SHOAL_MICRO_VERSION >= (micro)))

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version, "0.2.0" (static), which may be newer than the
 * headers' SHOAL_VERSION_STRING when a program runs against a newer
 * libshoal.so of the same major version. */
const char *shoal_version (void);

#ifdef __cplusplus
}
#endif

#endif
