/* `shoal certs`: a job's TLS credentials (rpc/tls_certs.h), for ranks
 * that an existing launcher starts (mpirun, srun): a CA made for the job
 * and one certificate and key per rank, in a directory of mode 0700.  The
 * CA's key is not kept: nobody can issue one more certificate for the
 * job.  docs/SECURITY.md says how to hand them out. */
#include <glib.h>
#include <stdio.h>

#include "cluster/layout.h"
#include "core/error.h"
#include "rpc/tls_certs.h"
#include "tools/commands.h"

int
shoal_cmd_certs (int argc, char **argv)
{
  char *out = NULL, *name = NULL;
  int ranks = 0, days = 7;
  GOptionEntry entries[] = {
    { "out", 'o', 0, G_OPTION_ARG_FILENAME, &out, "directory to write (made mode 0700)", "DIR" },
    { "ranks", 'n', 0, G_OPTION_ARG_INT, &ranks, "ranks of the job (default: the JOB.conf's layout)", "N" },
    { "days", 0, 0, G_OPTION_ARG_INT, &days, "days the certificates are valid (default 7)", "D" },
    { "name", 0, 0, G_OPTION_ARG_STRING, &name, "job name in the certificates (default: the conf's [job] name)",
      "NAME" },
    { NULL, 0, 0, 0, NULL, NULL, NULL }
  };
  GOptionContext *ctx = g_option_context_new ("[JOB.conf] --out DIR - make a job's CA and per-rank TLS certificates");
  g_option_context_add_main_entries (ctx, entries, NULL);
  GError *error = NULL;
  ShoalJob *job = NULL;
  ShoalLayout *layout = NULL;
  int status = 2;

  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    goto out;
  if (out == NULL || argc > 2 || (argc == 1 && ranks <= 0))
    {
      g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_CONF, "give --out DIR and JOB.conf or --ranks N");
      goto out;
    }
  if (days < 1 || days > 3650 || ranks < 0)
    {
      g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_CONF, "--days must be 1..3650 and --ranks positive");
      goto out;
    }
  status = 1;
  if (argc == 2)
    {
      job = shoal_job_load (argv[1], NULL, &error);
      layout = job != NULL ? shoal_layout_new (&job->cluster, job->conf, &error) : NULL;
      if (layout == NULL)
        goto out;
      if (ranks == 0)
        ranks = layout->nprocs;
    }
  if (!shoal_tls_make_job_certs (out, name != NULL ? name : job != NULL ? job->name : "shoal", ranks, days, &error))
    goto out;
  printf ("%s: the job's CA (ca.crt) and %d ranks' certificates and keys, valid %d days\n", out, ranks, days);
  status = 0;

out:
  if (error != NULL)
    {
      fprintf (stderr, "shoal certs: %s\n", error->message);
      g_error_free (error);
    }
  shoal_layout_free (layout);
  shoal_job_free (job);
  g_free (out);
  g_free (name);
  g_option_context_free (ctx);
  return status;
}
