/* A group net's checkpoint state: every worker's net state in one blob,
 * the same whether the group runs in one process or spread over several
 * (the followers' states travel to and from the leader), and the group's
 * running statistics, which are its own (core/param_statistics.c). */
#include <string.h>

#include "core/error.h"
#include "net/net.h"
#include "partition/group_priv.h"

#define STATISTICS_MAGIC 0x54415453u  /* "STAT" */

/* Records: u32 length, one worker's net state; k of them.  Then, when
 * the net has statistics: u32 STATISTICS_MAGIC, u32 length, the group
 * store's statistics by name (a spread group's leader holds its
 * followers' too: they come back with every forward). */
GBytes *
shoal_group_net_save_state (ShoalGroupNet *g, GError **error)
{
  GBytes **states = g_new0 (GBytes *, g->k);
  for (int w = g->first; w < g->first + g->nlocal; w++)
    states[w] = shoal_net_save_state (g->nets[w]);
  gboolean ok = g->wire == NULL || spread_save_states (g, states, error);
  GByteArray *b = g_byte_array_new ();
  for (int w = 0; w < g->k; w++)
    {
      if (ok)
        {
          gsize len = 0;
          gconstpointer data = g_bytes_get_data (states[w], &len);
          guint32 n = (guint32) len;
          g_byte_array_append (b, (guint8 *) &n, sizeof n);
          g_byte_array_append (b, data, n);
        }
      if (states[w] != NULL)
        g_bytes_unref (states[w]);
    }
  g_free (states);
  if (!ok)
    {
      g_byte_array_unref (b);
      return NULL;
    }
  if (shoal_param_store_n_statistics (g->store) > 0)
    {
      GBytes *stats = shoal_param_store_statistics_to_bytes (g->store);
      gsize len = 0;
      gconstpointer data = g_bytes_get_data (stats, &len);
      guint32 head[2] = { STATISTICS_MAGIC, (guint32) len };
      g_byte_array_append (b, (guint8 *) head, sizeof head);
      g_byte_array_append (b, data, (guint) len);
      g_bytes_unref (stats);
    }
  return g_byte_array_free_to_bytes (b);
}

gboolean
shoal_group_net_load_state (ShoalGroupNet *g, GBytes *state, GError **error)
{
  gsize len = 0;
  const guint8 *p = g_bytes_get_data (state, &len), *end = p + len;
  GBytes **states = g_new0 (GBytes *, g->k);
  gboolean ok = TRUE;
  for (int w = 0; ok && w < g->k; w++)
    {
      guint32 n;
      if ((gsize) (end - p) < sizeof n || (memcpy (&n, p, sizeof n), (gsize) (end - p) - sizeof n < n))
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                       "the checkpointed state is of a group of another size or damaged");
          ok = FALSE;
          break;
        }
      states[w] = g_bytes_new (p + sizeof n, n);
      p += sizeof n + n;
    }
  guint32 head[2];
  if (ok && (gsize) (end - p) >= sizeof head && (memcpy (head, p, sizeof head), head[0] == STATISTICS_MAGIC)
      && (gsize) (end - p) - sizeof head >= head[1])
    {
      GBytes *stats = g_bytes_new (p + sizeof head, head[1]);
      ok = shoal_param_store_load_statistics (g->store, stats, "the checkpointed state", error);
      g_bytes_unref (stats);
      p += sizeof head + head[1];
      /* a GPU net (a plain one: the group store is its own) reads its
       * statistics on the device */
      if (ok && g->k == 1)
        shoal_net_upload_params (g->nets[0], g->store->served, g->store->total);
    }
  else if (ok && shoal_param_store_n_statistics (g->store) > 0)
    {
      /* an older shoal's: its servers' slices have the statistics among
       * the trained params, at other offsets than this layout's */
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                   "the checkpointed state holds no running statistics: it was written by a shoal that kept "
                   "them in the servers' slices, laid out otherwise; this checkpoint cannot be resumed "
                   "(start afresh, or init_from its params)");
      ok = FALSE;
    }
  if (ok && p != end)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                   "the checkpointed state is of a group of another size");
      ok = FALSE;
    }
  for (int w = g->first; ok && w < g->first + g->nlocal; w++)
    ok = shoal_net_load_state (g->nets[w], states[w], error);
  if (ok && g->wire != NULL)
    ok = spread_load_states (g, states, error);
  for (int w = 0; w < g->k; w++)
    if (states[w] != NULL)
      g_bytes_unref (states[w]);
  g_free (states);
  return ok;
}

void
shoal_group_net_move (ShoalGroupNet *g, const ShoalNetOptions *opts)
{
  g_return_if_fail (g != NULL && g->wire == NULL && opts != NULL);
  for (int w = 0; w < g->k; w++)
    {
      ShoalNetOptions sub = group_worker_options (g, opts, w);
      shoal_net_move (g->nets[w], sub.group, sub.worker, sub.shard_index, sub.shard_count);
    }
}
