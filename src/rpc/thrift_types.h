/* The GObject types of Thrift c_glib and of rpc/, registered once.
 *
 * Generated and library get_type functions are not thread-safe (an
 * unlocked static): every entry point of the RPC code and the Record
 * codec calls shoal_thrift_types_init before threads can race.  It also
 * mends two leaks of c_glib 0.17's processor classes (thrift_types.c). */
#ifndef SHOAL_THRIFT_TYPES_H
#define SHOAL_THRIFT_TYPES_H

#include <glib.h>

G_BEGIN_DECLS

/* Registers the thrift library's and these types once (thread-safe).
 * Generated and library get_type functions are not: call this (and
 * g_type_ensure the generated types you use) before starting threads. */
void shoal_thrift_types_init (void);

G_END_DECLS

#endif
