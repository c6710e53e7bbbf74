/* Topology files (the files in conf/): a [cluster] section alone, which takes
 * the place of a job's own (`shoal run JOB --topology FILE`), so the
 * same model and data train under each scheme. */
#include "cluster/topology.h"

#include <string.h>

#include "cluster/cluster_conf.h"
#include "core/error.h"
#include "partition/partition.h"

gboolean
shoal_topology_key_is_placement (const char *key)
{
  /* how and where this job runs, not the scheme: liveness, limits, GPUs */
  static const char *const kept[] = { "gpus", "heartbeat_interval", "heartbeat_timeout", "progress_timeout",
                                      "max_procs_per_core", "rpc_max_connections", "rpc_idle_timeout",
                                      "rpc_threads", NULL };
  return g_strv_contains (kept, key) || shoal_option_find (shoal_partition_options, key) != NULL;
}

/* The job text with the scheme keys of its [cluster] section blanked out
 * line by line, so every other key keeps its line number in messages;
 * its placement keys stay, as they say where this job's parts run
 * whichever scheme the topology picks. */
char *
shoal_topology_blank_cluster (const char *text, const char *topology_path)
{
  char **lines = g_strsplit (text, "\n", -1);
  gboolean in_cluster = FALSE;
  for (int i = 0; lines[i] != NULL; i++)
    {
      char *trimmed = g_strstrip (g_strdup (lines[i]));
      if (trimmed[0] == '[')
        in_cluster = strcmp (trimmed, "[cluster]") == 0;
      else if (in_cluster && trimmed[0] != '#' && strchr (trimmed, '=') != NULL)
        {
          char *key = g_strstrip (g_strndup (trimmed, (gsize) (strchr (trimmed, '=') - trimmed)));
          if (!shoal_topology_key_is_placement (key))
            {
              g_free (lines[i]);
              lines[i] = g_strdup_printf ("# replaced by %s", topology_path);
            }
          g_free (key);
        }
      g_free (trimmed);
    }
  char *out = g_strjoinv ("\n", lines);
  g_strfreev (lines);
  return out;
}

/* The topology file alone must be a valid [cluster] section; its keys
 * become overrides placed before the user's.  Returns the overrides
 * "cluster.KEY=VALUE" (g_strfreev) or NULL with error. */
char **
shoal_topology_overrides (const char *path, GError **error)
{
  char *text = NULL;
  if (!shoal_file_read (path, &text, NULL, error))
    return NULL;
  ShoalConf *topo = shoal_conf_load_data (text, path, error);
  if (topo == NULL)
    {
      g_free (text);
      return NULL;
    }
  GKeyFile *kf = shoal_conf_keyfile (topo);
  char **groups = g_key_file_get_groups (kf, NULL);
  gboolean ok = TRUE;
  for (int i = 0; ok && groups[i] != NULL; i++)
    if (strcmp (groups[i], "cluster") != 0)
      {
        shoal_conf_error (topo, error, groups[i], NULL,
                          "a topology file holds only a [cluster] section (it replaces the job's)");
        ok = FALSE;
      }
  g_strfreev (groups);
  if (ok && !g_key_file_has_group (kf, "cluster"))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "%s: no [cluster] section", path);
      ok = FALSE;
    }
  if (ok)
    {
      /* the section's keys and the layout they make, naming this file's lines */
      const ShoalOption *const tables[] = { shoal_cluster_options, shoal_partition_options, NULL };
      ShoalClusterConf cluster;
      ok = shoal_conf_check_group (topo, "cluster", tables, NULL, NULL, error)
           && shoal_cluster_conf_read (topo, &cluster, error);
    }
  GPtrArray *out = NULL;
  if (ok)
    {
      out = g_ptr_array_new ();
      char **keys = g_key_file_get_keys (kf, "cluster", NULL, NULL);
      for (int i = 0; keys[i] != NULL; i++)
        {
          char *value = g_key_file_get_value (kf, "cluster", keys[i], NULL);
          g_ptr_array_add (out, g_strdup_printf ("cluster.%s=%s", keys[i], value));
          g_free (value);
        }
      g_strfreev (keys);
      g_ptr_array_add (out, NULL);
    }
  shoal_conf_free (topo);
  g_free (text);
  return out ? (char **) g_ptr_array_free (out, FALSE) : NULL;
}
