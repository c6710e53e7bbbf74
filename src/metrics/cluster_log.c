/* Built as text (json-glib's generator would do, at the cost of a tree
 * per line; these are few and small): strings through
 * json-glib's escaping. */
#include "metrics/cluster_log.h"

#include <json-glib/json-glib.h>
#include <string.h>

static void
put_string (GString *s, const char *key, const char *value)
{
  JsonNode *node = json_node_init_string (json_node_alloc (), value != NULL ? value : "");
  char *quoted = json_to_string (node, FALSE);
  g_string_append_printf (s, ",\"%s\":%s", key, quoted);
  g_free (quoted);
  json_node_unref (node);
}

static void
put_members (GString *s, const char *key, GArray *members)
{
  g_string_append_printf (s, ",\"%s\":[", key);
  for (guint i = 0; i < members->len; i++)
    {
      const ShoalMember *m = &g_array_index (members, ShoalMember, i);
      g_string_append_printf (s, "%s[%d,%d]", i > 0 ? "," : "", m->group, m->index);
    }
  g_string_append_c (s, ']');
}

void
shoal_cluster_log_layout (ShoalMetricsWriter *w, const ShoalLayout *layout, char **endpoints)
{
  const ShoalClusterConf *c = &layout->conf;
  char buf[3][G_ASCII_DTOSTR_BUF_SIZE];
  GString *s = g_string_new (",\"event\":\"layout\"");
  put_string (s, "host", g_get_host_name ());
  g_string_append_printf (s, ",\"heartbeat_interval\":%s,\"heartbeat_timeout\":%s,\"progress_timeout\":%s"
                          ",\"nslices\":%d,\"ranks\":[",
                          g_ascii_formatd (buf[0], sizeof buf[0], "%g", c->heartbeat_interval),
                          g_ascii_formatd (buf[1], sizeof buf[1], "%g", c->heartbeat_timeout),
                          g_ascii_formatd (buf[2], sizeof buf[2], "%g", c->progress_timeout), layout->nslices);
  for (int r = 0; r < layout->nprocs; r++)
    {
      const ShoalProcess *p = &layout->procs[r];
      g_string_append_printf (s, "%s{\"rank\":%d", r > 0 ? "," : "", r);
      if (endpoints != NULL && endpoints[r] != NULL && shoal_layout_rank_listens (layout, r))
        put_string (s, "endpoint", endpoints[r]);
      char *holds = shoal_layout_describe_rank (layout, r);
      /* "rank 1 (2 workers of group 1)": the part in brackets */
      char *open = strchr (holds, '(');
      char *inner = open != NULL ? g_strndup (open + 1, strlen (open + 1) - (g_str_has_suffix (open, ")") ? 1 : 0))
                                 : g_strdup (holds);
      put_string (s, "holds", inner);
      g_free (inner);
      g_free (holds);
      put_members (s, "workers", p->workers);
      put_members (s, "servers", p->servers);
      g_string_append (s, ",\"slices\":[");
      gboolean first = TRUE;
      for (int slice = 0; slice < layout->nslices; slice++)
        for (guint i = 0; i < p->servers->len; i++)
          if (shoal_layout_server_of_slice (layout, slice) == g_array_index (p->servers, ShoalMember, i).index)
            {
              g_string_append_printf (s, "%s%d", first ? "" : ",", slice);
              first = FALSE;
              break;
            }
      g_string_append (s, "]}");
    }
  g_string_append_c (s, ']');
  shoal_metrics_write_fields (w, "cluster", s->str);
  g_string_free (s, TRUE);
}

void
shoal_cluster_log_rank (ShoalMetricsWriter *w, int rank, const char *state, int pid, const char *why)
{
  GString *s = g_string_new (",\"event\":\"rank\"");
  g_string_append_printf (s, ",\"rank\":%d", rank);
  put_string (s, "state", state);
  g_string_append_printf (s, ",\"pid\":%d", pid);
  if (why != NULL)
    put_string (s, "why", why);
  shoal_metrics_write_fields (w, "cluster", s->str);
  g_string_free (s, TRUE);
}

void
shoal_cluster_log_restart (ShoalMetricsWriter *w, int rank, int restarts, int max_restarts, const char *why)
{
  GString *s = g_string_new (",\"event\":\"restart\"");
  g_string_append_printf (s, ",\"rank\":%d,\"restarts\":%d,\"max_restarts\":%d", rank, restarts, max_restarts);
  put_string (s, "why", why);
  shoal_metrics_write_fields (w, "cluster", s->str);
  g_string_free (s, TRUE);
}
