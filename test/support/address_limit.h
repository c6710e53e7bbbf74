/* Capping a test subprocess's address space (test support, not in
 * libshoal): the next allocation, map or thread stack larger than the
 * room left fails there and nowhere else, as under ulimit -v. */
#ifndef SHOAL_TEST_ADDRESS_LIMIT_H
#define SHOAL_TEST_ADDRESS_LIMIT_H

#include <glib.h>

/* Caps this process's address space (the soft RLIMIT_AS) at what it maps
 * now plus `extra` bytes; shoal_test_uncap_address_space undoes it. */
void shoal_test_cap_address_space (guint64 extra);
/* The cap with room for small allocations (1 MiB), not for one more
 * thread: every thread's stack is made 16 MiB first, whatever ulimit -s
 * says.  g_thread_try_new fails from then on, as under ulimit -u. */
void shoal_test_refuse_threads (void);
/* Before the subprocess ends: OpenBLAS's thread, if it started under the
 * cap, retries its buffer's allocation for ever, and its library
 * destructor waits for that thread. */
void shoal_test_uncap_address_space (void);

#endif
