/* Assertions shared by the layer tests (test support, not in libshoal). */
#ifndef SHOAL_TEST_EXPECT_H
#define SHOAL_TEST_EXPECT_H

/* Builds a net from conf_text (which must load) and asserts that building
 * fails with an error whose message contains `fragment`. */
void shoal_expect_net_error (const char *conf_text, const char *fragment);

#endif
