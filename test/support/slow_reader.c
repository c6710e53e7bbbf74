/* See slow_reader.h. */
#include "slow_reader.h"

#include <arpa/inet.h>
#include <glib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

int
shoal_test_slow_reader (int port)
{
  int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int small = 16 * 1024;
  struct timeval tv = { 20, 0 };
  struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons ((uint16_t) port),
                           .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (setsockopt (fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small), ==, 0);
  g_assert_cmpint (connect (fd, (struct sockaddr *) &a, sizeof a), ==, 0);
  g_assert_cmpint (setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), ==, 0);
  return fd;
}
