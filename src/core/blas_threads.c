/* BLAS threads and OpenBLAS's idle spin; see blas_threads.h.
 *
 * The spin is changed through OpenBLAS's own exported entry points,
 * looked up at run time so that a build against another BLAS still links
 * and runs (without the knob): openblas_read_env re-reads the environment
 * into the values the pool starts with, blas_thread_shutdown_ stops the
 * pool (OpenBLAS does the same before every fork) and the next call, or
 * openblas_set_num_threads, starts it again with the new spin. */
#include "core/blas_threads.h"

#include <cblas.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "core/error.h"
#include "core/memory_budget.h"
#include "core/tensor.h"

static int current_threads = 1;

void
shoal_blas_set_threads (int threads)
{
  current_threads = MAX (threads, 1);
  openblas_set_num_threads (current_threads);
}

int
shoal_blas_threads (void)
{
  return current_threads;
}

int
shoal_blas_set_idle_spin (int log2_cycles)
{
  static int in_force = -1;
  void (*read_env) (void) = (void (*) (void)) dlsym (RTLD_DEFAULT, "openblas_read_env");
  int (*shutdown) (void) = (int (*) (void)) dlsym (RTLD_DEFAULT, "blas_thread_shutdown_");
  int (*timeout) (void) = (int (*) (void)) dlsym (RTLD_DEFAULT, "openblas_thread_timeout");

  if (read_env == NULL || shutdown == NULL || timeout == NULL)
    return -1;
  const char *user = g_getenv ("OPENBLAS_THREAD_TIMEOUT");
  if (user != NULL && in_force < 0)
    return timeout ();   /* the user's, read when OpenBLAS loaded */
  log2_cycles = CLAMP (log2_cycles, 4, 30);
  if (in_force == log2_cycles)
    return in_force;
  char value[16];
  g_snprintf (value, sizeof value, "%d", log2_cycles);
  /* children (`shoal proc` ranks) read it when their OpenBLAS loads */
  g_setenv ("OPENBLAS_THREAD_TIMEOUT", value, TRUE);
  read_env ();
  shutdown ();
  openblas_set_num_threads (current_threads);   /* starts the pool with the new spin */
  in_force = log2_cycles;
  return in_force;
}

gboolean
shoal_blas_thread_headroom (GError **error)
{
  struct rlimit as;
  if (getrlimit (RLIMIT_AS, &as) != 0 || as.rlim_cur == RLIM_INFINITY)
    return TRUE;
  size_t need = SHOAL_BLAS_THREAD_BUFFER + SHOAL_BLAS_THREAD_MARGIN;
  void *probe = mmap (NULL, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (probe != MAP_FAILED)
    {
      munmap (probe, need);
      return TRUE;
    }
  char *limit = shoal_format_bytes ((guint64) as.rlim_cur);
  char *mapped = shoal_format_bytes (shoal_memory_of_process ("VmSize"));
  char *buffer = shoal_format_bytes (need);
  g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_MEMORY,
               "the address-space limit (ulimit -v %" G_GUINT64_FORMAT " KiB, %s) leaves no room for "
               "the %s that OpenBLAS maps for this thread (its buffer and a malloc arena), which it "
               "would wait for for ever; %s is mapped already (data sets and checkpoints are mapped "
               "whole): raise ulimit -v",
               (guint64) as.rlim_cur / 1024, limit, buffer, mapped);
  g_free (buffer);
  g_free (mapped);
  g_free (limit);
  return FALSE;
}
