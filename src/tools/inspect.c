/* shoal inspect JOB.conf: how a job's net is split among the workers of a
 * group - each layer's partition dim, each worker's sub-net - and, with
 * --graph, the partitioned net as Graphviz DOT (--png renders it). */
#include <errno.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>

#include "partition/partition.h"
#include "tools/commands.h"
#include "job/job.h"

static void
print_partition (ShoalGroupNet *g)
{
  int k = shoal_group_net_size (g);
  printf ("%d worker%s per group\n\n%-16s %-14s %-8s %s\n", k, k == 1 ? "" : "s", "layer", "type",
          "split", "out (whole)");
  for (guint i = 0; i < shoal_group_net_n_layers (g); i++)
    {
      ShoalLayer *l = shoal_group_net_layer (g, i);
      char *shape = shoal_shape_to_string (&l->out.shape);
      const char *dim = l->partition_dim == 0 ? "batch" : l->partition_dim == 1 ? "feature" : "whole";
      printf ("%-16s %-14s %-8s %s\n", l->name, l->ops->type, k == 1 ? "-" : dim, shape);
      g_free (shape);
    }
  for (int w = 0; k > 1 && w < k; w++)
    {
      ShoalNet *net = shoal_group_net_worker (g, w);
      printf ("\nworker %d:\n", w);
      for (guint i = 0; i < shoal_net_n_layers (net); i++)
        {
          ShoalLayer *l = shoal_net_layer (net, i);
          char *shape = shoal_shape_to_string (&l->out.shape);
          printf ("  %-20s %-12s %s\n", l->name, l->ops->type, shape);
          g_free (shape);
        }
    }
}

static gboolean
render_png (const char *dot_path, const char *png_path, GError **error)
{
  char *dot = g_find_program_in_path ("dot");
  if (dot == NULL)
    {
      g_set_error (error, G_SPAWN_ERROR, G_SPAWN_ERROR_NOENT,
                   "--png needs graphviz's `dot` in PATH (apt-get install graphviz); %s is written, "
                   "render it elsewhere with `dot -Tpng %s -o %s`", dot_path, dot_path, png_path);
      return FALSE;
    }
  char *argv[] = { dot, (char *) "-Tpng", (char *) dot_path, (char *) "-o", (char *) png_path, NULL };
  char *err = NULL;
  int status = 0;
  gboolean ok = g_spawn_sync (NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, NULL, &err, &status, error)
                && g_spawn_check_wait_status (status, error);
  if (!ok && err != NULL && *err != '\0' && error != NULL && *error != NULL)
    g_prefix_error (error, "dot: %s", err);
  g_free (err);
  g_free (dot);
  return ok;
}

int
shoal_cmd_inspect (int argc, char **argv)
{
  char **overrides = NULL;
  char *graph = NULL, *png = NULL, *topology = NULL;
  int workers = 0;
  GOptionEntry entries[] = {
    { "graph", 'g', 0, G_OPTION_ARG_FILENAME, &graph,
      "write the partitioned net as Graphviz DOT ('-': standard output)", "OUT.dot" },
    { "png", 0, 0, G_OPTION_ARG_FILENAME, &png, "also render the graph with graphviz (needs --graph)",
      "OUT.png" },
    { "workers", 'k', 0, G_OPTION_ARG_INT, &workers,
      "workers per group (default: [cluster] nworkers_per_group)", "K" },
    { "topology", 't', 0, G_OPTION_ARG_FILENAME, &topology,
      "a conf with only a [cluster] section whose keys replace the job's scheme keys (gpus and "
      "partition_dim stay)", "FILE" },
    { "override", 'o', 0, G_OPTION_ARG_STRING_ARRAY, &overrides,
      "set a conf key, e.g. -o 'layer fc1.partition_dim=1'", "SECTION.KEY=VALUE" },
    { NULL, 0, 0, 0, NULL, NULL, NULL }
  };
  GOptionContext *ctx = g_option_context_new ("JOB.conf - show how the net is split among a group's workers");
  g_option_context_add_main_entries (ctx, entries, NULL);
  GError *error = NULL;
  ShoalJob *job = NULL;
  ShoalGroupNet *g = NULL;
  int status = 0;

  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    {
      fprintf (stderr, "shoal inspect: %s\n", error->message);
      status = 2;
      goto out;
    }
  if (argc != 2 || (png != NULL && (graph == NULL || strcmp (graph, "-") == 0)) || workers < 0)
    {
      fprintf (stderr, "shoal inspect: %s\n",
               argc != 2 ? "expected one JOB.conf" : workers < 0 ? "--workers must be at least 1"
                                                               : "--png needs --graph FILE");
      status = 2;
      goto out;
    }
  job = shoal_job_load_topology (argv[1], topology, (const char *const *) overrides, &error);
  if (job == NULL)
    {
      fprintf (stderr, "shoal inspect: %s\n", error->message);
      status = 1;
      goto out;
    }
  int k = workers > 0 ? workers : job->cluster.nworkers_per_group;
  ShoalNetOptions opts = { .seed = job->seed, .shard_count = 1, .cd_k = job->cd_k, .budget = job->memory_budget };
  g = shoal_group_net_new (job->conf, k, &opts, &error);
  if (g == NULL)
    {
      fprintf (stderr, "shoal inspect: %s\n", error->message);
      status = 1;
      goto out;
    }
  if (graph == NULL || strcmp (graph, "-") != 0)
    print_partition (g);
  if (graph != NULL)
    {
      char *dot = shoal_group_net_to_dot (g);
      if (strcmp (graph, "-") == 0)
        fputs (dot, stdout);
      else if (!g_file_set_contents (graph, dot, -1, &error))
        {
          fprintf (stderr, "shoal inspect: %s\n", error->message);
          status = 1;
        }
      else
        printf ("\ngraph written to %s\n", graph);
      g_free (dot);
    }
  if (status == 0 && png != NULL)
    {
      if (!render_png (graph, png, &error))
        {
          fprintf (stderr, "shoal inspect: %s\n", error->message);
          status = 1;
        }
      else
        printf ("picture written to %s\n", png);
    }

out:
  shoal_group_net_free (g);
  shoal_job_free (job);
  g_clear_error (&error);
  g_strfreev (overrides);
  g_free (graph);
  g_free (png);
  g_free (topology);
  g_option_context_free (ctx);
  return status;
}
