/* A client that reads slowly (test support, not in libshoal). */
#ifndef SHOAL_TEST_SLOW_READER_H
#define SHOAL_TEST_SLOW_READER_H

/* A socket connected to 127.0.0.1:port with a 16 KiB receive buffer and
 * a 20 s receive timeout: a large reply to it stays stuck in the server's
 * send until the test reads, so a test can hold a reply in flight (the
 * server's pinned-reply rules).  Asserts on failure; the caller closes
 * it. */
int shoal_test_slow_reader (int port);

#endif
