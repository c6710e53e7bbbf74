/* A group net's checkpoint state: every worker's net state in one blob,
 * the same whether the group runs in one process or spread over several
 * (the followers' states travel to and from the leader). */
#include <string.h>

#include "core/error.h"
#include "partition/group_priv.h"

/* Records: u32 length, one worker's net state; k of them. */
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
