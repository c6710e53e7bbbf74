/* Statistics in the param store: values a layer computes in its forward
 * (batchnorm's running mean and variance) and reads at test time, which
 * no gradient or updater moves.  They used to lie among the trained
 * params, inside server slices, so under every scheme with servers a
 * pull overwrote each worker's running statistics with the servers'
 * copy, which nothing ever updated: the test pass normalised with nearly
 * the initial statistics.  Like PyTorch's buffers (in the state dict,
 * not in the optimiser), they now lie in the store's tail, past
 * `served`: servers slice [0, served) only, so a unit keeps what it
 * computed, and it saves them with its own checkpoint state
 * (partition/group_state.c) and by name in the params a run saves. */
#include "core/param.h"

#include "core/error.h"

#define PARAM_ALIGN_FLOATS 16  /* 64 bytes, as core/param.c */

static size_t
padded (size_t count)
{
  return (count + PARAM_ALIGN_FLOATS - 1) / PARAM_ALIGN_FLOATS * PARAM_ALIGN_FLOATS;
}

void
shoal_param_store_place_statistics (ShoalParamStore *store)
{
  g_return_if_fail (!store->allocated);
  size_t at = 0;
  for (int statistics = 0; statistics < 2; statistics++)
    {
      for (guint i = 0; i < store->params->len; i++)
        {
          ShoalParam *p = g_ptr_array_index (store->params, i);
          if (p->statistic != statistics)
            continue;
          p->offset = at;
          at += padded (p->count);
        }
      if (!statistics)
        store->served = at;
    }
  g_assert (at == store->total);
}

gboolean
shoal_param_is_statistic (const ShoalParam *param)
{
  g_return_val_if_fail (param != NULL, FALSE);
  return param->statistic;
}

guint
shoal_param_store_n_statistics (const ShoalParamStore *store)
{
  guint n = 0;
  for (guint i = 0; i < store->params->len; i++)
    n += ((ShoalParam *) g_ptr_array_index (store->params, i))->statistic;
  return n;
}

gboolean
shoal_param_store_load_statistics (ShoalParamStore *store, GBytes *bytes, const char *origin,
                                   GError **error)
{
  guint want = shoal_param_store_n_statistics (store);
  int copied = 0;
  if (want == 0)
    return TRUE;
  if (!shoal_param_store_load_bytes (store, bytes, origin, SHOAL_PARAMS_BY_NAME_ANY, &copied, error))
    return FALSE;
  /* the bytes hold statistics only (of this net, each once) */
  if ((guint) copied != want)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                   "%s: %d of this net's %u running statistics are there: they are another model's",
                   origin, copied, want);
      return FALSE;
    }
  return TRUE;
}
