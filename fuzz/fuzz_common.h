/* Shared set-up of the libFuzzer targets: quiet logs (a message per input
 * would dominate the run), and criticals fatal, because a g_critical is a
 * broken precondition inside shoal, i.e. a bug the fuzzer should report. */
#ifndef SHOAL_FUZZ_COMMON_H
#define SHOAL_FUZZ_COMMON_H

#include <glib.h>

static gboolean fuzz_verbose;

static void
fuzz_quiet_log (const char *domain, GLogLevelFlags level, const char *message, gpointer data)
{
  (void) domain;
  (void) data;
  if (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL | G_LOG_FLAG_FATAL))
    g_printerr ("fuzz: fatal log: %s\n", message);
  else if (fuzz_verbose)
    g_printerr ("fuzz: log: %s\n", message);
}

/* SHOAL_FUZZ_VERBOSE=1 prints why each input was refused and every log
 * line (checking seeds). */

G_GNUC_UNUSED static void
fuzz_note_error (const char *stage, const GError *error)
{
  if (fuzz_verbose)
    g_printerr ("fuzz: %s: %s\n", stage, error->message);
}

static void
fuzz_common_init (void)
{
  fuzz_verbose = g_getenv ("SHOAL_FUZZ_VERBOSE") != NULL;
  g_log_set_default_handler (fuzz_quiet_log, NULL);
  g_log_set_always_fatal (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL);
}

#endif
