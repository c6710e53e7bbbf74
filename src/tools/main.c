/* shoal: the one binary.  `shoal COMMAND --help` explains each command. */
#include <glib.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <shoal/version.h>

#include "tools/commands.h"

typedef struct {
  const char *name;
  int (*run) (int argc, char **argv);
  const char *summary;
} Command;

static const Command commands[] = {
  { "run", shoal_cmd_run, "train a job: shoal run JOB.conf [--topology T.conf] [-o section.key=value ...]" },
  { "proc", shoal_cmd_proc, "run one rank of a job (under mpirun/srun): shoal proc JOB.conf --hostfile H" },
  { "certs", shoal_cmd_certs, "a job's CA and per-rank TLS certificates for links between hosts: shoal certs JOB.conf --out DIR" },
  { "import", shoal_cmd_import, "make an LMDB dataset: shoal import idx|csv|text ..." },
  { "layers", shoal_cmd_layers, "list layer types and their conf keys" },
  { "compare", shoal_cmd_compare, "run a job under several schemes, then a report with figures: shoal compare JOB.conf [--schemes a,b] [--budget samples=N]" },
  { "calibrate", shoal_cmd_calibrate, "measure a model's step times, update cost and memory for the virtual clock: shoal calibrate JOB.conf --out FILE" },
  { "plot", shoal_cmd_plot, "curves of finished runs: shoal plot WS... --out FILE.png [--x time|samples] [--y accuracy|loss]" },
  { "serve", shoal_cmd_serve, "watch runs live in a browser: shoal serve DIR... [--listen 127.0.0.1:PORT]" },
  { "predict", shoal_cmd_predict, "predictions of a trained model: shoal predict JOB.conf --from WS [--data D] [--out F.csv]" },
  { "eval", shoal_cmd_eval, "loss and accuracy of a trained model: shoal eval JOB.conf --from WS [--data D]" },
  { "sample", shoal_cmd_sample, "generate text with a trained character model: shoal sample JOB.conf --from WORKSPACE [--prime TEXT] [--length N] [--temperature T] [--seed S]" },
  { "inspect", shoal_cmd_inspect, "how a job's net is split among a group's workers: shoal inspect JOB.conf [--graph out.dot [--png out.png]]" },
};

/* Also the man page's text: help2man reads --help (a "Usage:" line, a
 * description, then sections) and --version (name and version). */
static void
usage (FILE *out)
{
  fprintf (out, "Usage: shoal COMMAND [ARGS]\n"
                "Train neural nets in the style of Apache SINGA: worker groups and parameter\n"
                "servers in one process or many; a job's conf picks the training scheme.\n\n"
                "Commands:\n");
  for (gsize i = 0; i < G_N_ELEMENTS (commands); i++)
    fprintf (out, "  %-8s %s\n", commands[i].name, commands[i].summary);
  fprintf (out, "\nOptions:\n"
                "  -h, --help     print this help and exit\n"
                "      --version  print the version and exit\n"
                "\n`shoal COMMAND --help` for the options of a command.\n");
}

int
main (int argc, char **argv)
{
  setlocale (LC_ALL, "");
  /* a write to a dead peer must fail the call, not kill the process */
  signal (SIGPIPE, SIG_IGN);
  g_set_prgname ("shoal");

  if (argc < 2 || strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0
      || strcmp (argv[1], "help") == 0)
    {
      usage (argc < 2 ? stderr : stdout);
      return argc < 2 ? 2 : 0;
    }
  if (strcmp (argv[1], "--version") == 0 || strcmp (argv[1], "version") == 0)
    {
      printf ("shoal %s\n", shoal_version ());
      return 0;
    }
  for (gsize i = 0; i < G_N_ELEMENTS (commands); i++)
    if (strcmp (argv[1], commands[i].name) == 0)
      return commands[i].run (argc - 1, argv + 1);
  fprintf (stderr, "shoal: unknown command '%s'\n", argv[1]);
  usage (stderr);
  return 2;
}
