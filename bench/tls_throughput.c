/* The parameter service through TLS against the same over plain TCP, on
 * loopback: push then pull of one slice, the two links taking turns
 * operation by operation (interleaved A/B), so that load from other
 * processes hits both alike.
 *
 * Two server processes are forked, one with [tls] mode = all (the job's
 * CA and rank certificates made here, in a temporary directory) and one
 * without; TLS is a process's setting (rpc/tls.h), so each server needs
 * its own process.  The parent holds one client of each and times, per
 * size, push then pull of the whole slice (an async server: each push
 * is applied, each pull answers the current values).  A link's first
 * call (and its handshake) is left out: a job's connections live for the
 * whole job.
 *
 * Usage: tls_throughput [--sizes 1,4,16] [--seconds 1]
 * Output: one line per size: "tls_throughput size_mib=S plain=MiB/s tls=MiB/s ratio=R"
 * (MiB/s of slice bytes both ways over the median time of one push+pull;
 * ratio = median plain time / median TLS time, the pairs' median). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <glib/gstdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rpc/tls.h"
#include "rpc/tls_certs.h"
#include "median.h"
#include "server/rpc_client.h"
#include "server/rpc_server.h"
#include "server/server.h"

#define MIB (1024.0 * 1024.0)
#define TOKEN "bench-tls-token"

static void
die (const char *what, GError *error)
{
  fprintf (stderr, "tls_throughput: %s: %s\n", what, error != NULL ? error->message : g_strerror (errno));
  exit (1);
}

/* A server of one slice of n floats in a child process; returns its
 * port.  tls_dir NULL: in clear.  The child lives until it is killed. */
static int
spawn_server (const char *tls_dir, size_t n, pid_t *pid)
{
  int p[2];
  if (pipe (p) < 0)
    die ("pipe", NULL);
  *pid = fork ();
  if (*pid < 0)
    die ("fork", NULL);
  if (*pid > 0)
    {
      int port = 0;
      close (p[1]);
      if (read (p[0], &port, sizeof port) != (gssize) sizeof port)
        die ("a server did not start", NULL);
      close (p[0]);
      return port;
    }
  close (p[0]);
  GError *error = NULL;
  if (tls_dir != NULL)
    {
      char *ca = shoal_tls_ca_path (tls_dir), *cert = shoal_tls_cert_path (tls_dir, 0),
           *key = shoal_tls_key_path (tls_dir, 0);
      ShoalTls *tls = shoal_tls_new (SHOAL_TLS_ALL, ca, cert, key, &error);
      if (tls == NULL)
        die ("server TLS", error);
      shoal_tls_set_default (tls);
    }
  ShoalParamStore *layout = shoal_param_store_new ();
  ShoalInitSpec init = { 0 };
  ShoalShape s = shoal_shape_make (1, (int) n);
  shoal_param_store_declare (layout, "w", &s, &init, 1, 1, 1.0f, 1.0f);
  if (!shoal_param_store_allocate (layout, NULL))
    die ("allocating", NULL);
  ShoalUpdaterConf upd;
  shoal_updater_conf_defaults (&upd, SHOAL_UPDATER_SGD);
  upd.schedule.lr = 0.001f;
  ShoalServerOptions so = { .mode = SHOAL_UPDATE_ASYNC, .sync_contributors = 1, .nslices = 1 };
  ShoalServer *server = shoal_server_new (layout, &upd, &so, NULL);
  shoal_server_host_slice (server, 0);
  ShoalRpcServerOptions ro = { .bind_address = "127.0.0.1", .token = TOKEN };
  ShoalRpcServer *rpc = shoal_rpc_server_start (server, &ro, &error);
  if (rpc == NULL)
    die ("server", error);
  int port = shoal_rpc_server_port (rpc);
  if (write (p[1], &port, sizeof port) != (gssize) sizeof port)
    _exit (1);
  for (;;)
    pause ();
}

static gint64
push_pull (ShoalRpcClient *c, const float *g, float *v, size_t n)
{
  GError *error = NULL;
  gint64 t0 = g_get_monotonic_time ();
  if (!shoal_rpc_client_push (c, 0, g, n, 0, &error) || !shoal_rpc_client_pull (c, 0, v, n, 0, NULL, &error))
    die ("push+pull", error);
  return g_get_monotonic_time () - t0;
}

int
main (int argc, char **argv)
{
  char *sizes_arg = NULL;
  double seconds = 1.0;
  GOptionEntry entries[] = {
    { "sizes", 0, 0, G_OPTION_ARG_STRING, &sizes_arg, "slice sizes in MiB (default 1,4,16)", "LIST" },
    { "seconds", 0, 0, G_OPTION_ARG_DOUBLE, &seconds, "time per size (default 1)", "S" },
    { NULL, 0, 0, 0, NULL, NULL, NULL }
  };
  GOptionContext *ctx = g_option_context_new ("- TLS against plain TCP");
  g_option_context_add_main_entries (ctx, entries, NULL);
  GError *error = NULL;
  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    die ("options", error);
  char **sizes = g_strsplit (sizes_arg != NULL ? sizes_arg : "1,4,16", ",", -1);

  char *dir = g_dir_make_tmp ("shoal-bench-tls-XXXXXX", &error);
  if (dir == NULL || !shoal_tls_make_job_certs (dir, "bench", 2, 1, &error))
    die ("certificates", error);
  char *ca = shoal_tls_ca_path (dir), *cert = shoal_tls_cert_path (dir, 1), *key = shoal_tls_key_path (dir, 1);
  ShoalTls *tls = shoal_tls_new (SHOAL_TLS_ALL, ca, cert, key, &error);
  if (tls == NULL)
    die ("client TLS", error);

  for (int s = 0; sizes[s] != NULL; s++)
    {
      double mib = g_ascii_strtod (sizes[s], NULL);
      size_t n = (size_t) (mib * MIB / sizeof (float));
      pid_t plain_pid, tls_pid;
      int plain_port = spawn_server (NULL, n, &plain_pid), tls_port = spawn_server (dir, n, &tls_pid);
      ShoalRpcClientOptions po = { .host = "127.0.0.1", .port = plain_port, .token = TOKEN };
      ShoalRpcClientOptions to = po;
      to.port = tls_port;
      to.tls = tls;
      ShoalRpcClient *plain = shoal_rpc_client_connect (&po, &error);
      ShoalRpcClient *sealed = plain != NULL ? shoal_rpc_client_connect (&to, &error) : NULL;
      if (sealed == NULL)
        die ("connecting", error);
      float *g = g_new0 (float, n), *v = g_new (float, n);
      push_pull (plain, g, v, n);
      push_pull (sealed, g, v, n);
      int cap = 4096, k = 0;
      double *tp = g_new (double, cap), *tt = g_new (double, cap), *ratio = g_new (double, cap);
      gint64 until = g_get_monotonic_time () + (gint64) (seconds * G_USEC_PER_SEC);
      while (k < cap && (k < 5 || g_get_monotonic_time () < until))
        {
          /* alternate which goes first, so neither always follows the other */
          if (k % 2 == 0)
            {
              tp[k] = (double) push_pull (plain, g, v, n);
              tt[k] = (double) push_pull (sealed, g, v, n);
            }
          else
            {
              tt[k] = (double) push_pull (sealed, g, v, n);
              tp[k] = (double) push_pull (plain, g, v, n);
            }
          ratio[k] = tp[k] / tt[k];
          k++;
        }
      double mr = median (ratio, k), mp = median (tp, k), mt = median (tt, k);
      printf ("tls_throughput size_mib=%s plain=%.0f tls=%.0f ratio=%.3f pairs=%d\n", sizes[s],
              2 * mib / (mp / 1e6), 2 * mib / (mt / 1e6), mr, k);
      fflush (stdout);
      shoal_rpc_client_free (plain);
      shoal_rpc_client_free (sealed);
      kill (plain_pid, SIGKILL);
      kill (tls_pid, SIGKILL);
      waitpid (plain_pid, NULL, 0);
      waitpid (tls_pid, NULL, 0);
      g_free (g);
      g_free (v);
      g_free (tp);
      g_free (tt);
      g_free (ratio);
    }
  shoal_tls_free (tls);
  char *files[] = { ca, cert, key, shoal_tls_cert_path (dir, 0), shoal_tls_key_path (dir, 0) };
  for (gsize i = 0; i < G_N_ELEMENTS (files); i++)
    {
      g_unlink (files[i]);
      g_free (files[i]);
    }
  g_rmdir (dir);
  g_free (dir);
  g_strfreev (sizes);
  g_free (sizes_arg);
  g_option_context_free (ctx);
  return 0;
}
