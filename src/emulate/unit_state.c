/* One net borrowed by the virtual clock's units; what each unit keeps
 * while another holds it (unit_state.h). */
#include "emulate/unit_state.h"

#include <string.h>

#include "core/param.h"

ShoalSharedNet *
shoal_shared_net_new (ShoalGroupNet *net, int nslices, const size_t *begin, const size_t *end)
{
  ShoalSharedNet *sn = g_new0 (ShoalSharedNet, 1);
  sn->net = net;
  sn->store = shoal_group_net_params (net);
  sn->nslices = nslices;
  sn->begin = g_memdup2 (begin, sizeof *begin * (gsize) nslices);
  sn->end = g_memdup2 (end, sizeof *end * (gsize) nslices);
  sn->spare = g_new0 (float *, nslices);
  sn->initial = shoal_alloc_floats (sn->store->served);
  memcpy (sn->initial, sn->store->values, sn->store->served * sizeof (float));
  return sn;
}

void
shoal_shared_net_free (ShoalSharedNet *sn)
{
  if (sn == NULL)
    return;
  shoal_group_net_free (sn->net);
  shoal_free_aligned (sn->initial);
  for (int s = 0; s < sn->nslices; s++)
    while (sn->spare[s] != NULL)
      {
        float *buf = sn->spare[s];
        memcpy (&sn->spare[s], buf, sizeof (float *));
        shoal_free_aligned (buf);
      }
  g_free (sn->spare);
  g_free (sn->begin);
  g_free (sn->end);
  g_free (sn);
}

static size_t
slice_count (const ShoalSharedNet *sn, int s)
{
  return sn->end[s] - sn->begin[s];
}

/* A buffer for slice s.  Buffers let go go back to their slice's free
 * list, not to malloc: slices of about 512 KiB come and go on every
 * event, and malloc's heap, once its mmap threshold has risen above
 * them, kept about 3 MiB a unit of freed holes (256 units of the MLP:
 * 2.7 GiB resident for 1.8 GiB held). */
static float *
take (ShoalSharedNet *sn, int s)
{
  sn->held += slice_count (sn, s) * sizeof (float);
  sn->held_peak = MAX (sn->held_peak, sn->held);
  float *buf = sn->spare[s];
  if (buf == NULL)
    return shoal_alloc_floats (slice_count (sn, s));
  memcpy (&sn->spare[s], buf, sizeof (float *));
  return buf;
}

/* A copy of slice s of `from` that u keeps while the net is another's. */
static float *
keep (ShoalSharedNet *sn, int s, const float *from)
{
  float *copy = take (sn, s);
  memcpy (copy, from + sn->begin[s], slice_count (sn, s) * sizeof (float));
  return copy;
}

static void
let_go (ShoalSharedNet *sn, int s, float **slot)
{
  if (*slot == NULL)
    return;
  sn->held -= slice_count (sn, s) * sizeof (float);
  memcpy (*slot, &sn->spare[s], sizeof (float *));
  sn->spare[s] = *slot;
  *slot = NULL;
}

gboolean
shoal_unit_state_init (ShoalSharedNet *sn, ShoalUnitState *u, const ShoalNetOptions *place, GError **error)
{
  g_return_val_if_fail (sn->holder == NULL, FALSE);
  u->place = *place;
  shoal_group_net_move (sn->net, place);
  u->state = shoal_group_net_save_state (sn->net, error);
  if (u->state == NULL)
    return FALSE;
  u->values = g_new0 (float *, sn->nslices);
  u->grads = g_new0 (float *, sn->nslices);
  u->live = g_new (guint8, sn->nslices);
  memset (u->live, SHOAL_UNIT_VALUES, (gsize) sn->nslices);
  return TRUE;
}

void
shoal_unit_state_clear (ShoalSharedNet *sn, ShoalUnitState *u)
{
  if (u->live == NULL)
    return;
  for (int s = 0; s < sn->nslices; s++)
    {
      let_go (sn, s, &u->values[s]);
      let_go (sn, s, &u->grads[s]);
    }
  if (sn->holder == u)
    sn->holder = NULL;
  if (u->state != NULL)
    g_bytes_unref (u->state);
  g_free (u->values);
  g_free (u->grads);
  g_free (u->live);
  memset (u, 0, sizeof *u);
}

/* The holder's live slices and state leave the net. */
static gboolean
evict (ShoalSharedNet *sn, GError **error)
{
  ShoalUnitState *h = sn->holder;
  if (h == NULL)
    return TRUE;
  GBytes *state = shoal_group_net_save_state (sn->net, error);
  if (state == NULL)
    return FALSE;
  g_bytes_unref (h->state);
  h->state = state;
  for (int s = 0; s < sn->nslices; s++)
    {
      if (h->live[s] & SHOAL_UNIT_VALUES)
        h->values[s] = keep (sn, s, sn->store->values);
      if (h->live[s] & SHOAL_UNIT_GRADS)
        h->grads[s] = keep (sn, s, sn->store->grads);
    }
  sn->holder = NULL;
  return TRUE;
}

gboolean
shoal_shared_net_borrow (ShoalSharedNet *sn, ShoalUnitState *u, GError **error)
{
  ShoalParamStore *store = sn->store;
  if (sn->holder != u)
    {
      if (!evict (sn, error))
        return FALSE;
      shoal_group_net_move (sn->net, &u->place);
      if (!shoal_group_net_load_state (sn->net, u->state, error))
        return FALSE;
      sn->holder = u;
      for (int s = 0; s < sn->nslices; s++)
        if (u->live[s] & SHOAL_UNIT_VALUES)
          {
            const float *from = u->values[s] != NULL ? u->values[s] : sn->initial;
            memcpy (store->values + sn->begin[s], from + (u->values[s] != NULL ? 0 : sn->begin[s]),
                    slice_count (sn, s) * sizeof (float));
            let_go (sn, s, &u->values[s]);
          }
    }
  /* its unpushed gradients, zero elsewhere (the next step adds to them) */
  gboolean any = FALSE;
  for (int s = 0; s < sn->nslices && !any; s++)
    any = (u->live[s] & SHOAL_UNIT_GRADS) != 0;
  if (!any)
    {
      shoal_param_store_zero_grads (store);
      return TRUE;
    }
  for (int s = 0; s < sn->nslices; s++)
    {
      float *to = store->grads + sn->begin[s];
      if (!(u->live[s] & SHOAL_UNIT_GRADS))
        memset (to, 0, slice_count (sn, s) * sizeof (float));
      else if (u->grads[s] != NULL)
        {
          memcpy (to, u->grads[s], slice_count (sn, s) * sizeof (float));
          let_go (sn, s, &u->grads[s]);
        }
    }
  return TRUE;
}

void
shoal_unit_state_computed (ShoalSharedNet *sn, ShoalUnitState *u)
{
  g_return_if_fail (sn->holder == u);
  for (int s = 0; s < sn->nslices; s++)
    u->live[s] |= SHOAL_UNIT_GRADS;
}

void
shoal_unit_state_drop_values (ShoalSharedNet *sn, ShoalUnitState *u)
{
  for (int s = 0; s < sn->nslices; s++)
    {
      let_go (sn, s, &u->values[s]);
      u->live[s] &= (guint8) ~SHOAL_UNIT_VALUES;
    }
}

const float *
shoal_unit_state_grads (ShoalSharedNet *sn, ShoalUnitState *u, int s)
{
  g_return_val_if_fail (u->live[s] & SHOAL_UNIT_GRADS, NULL);
  return sn->holder == u ? sn->store->grads + sn->begin[s] : u->grads[s];
}

void
shoal_unit_state_pushed (ShoalSharedNet *sn, ShoalUnitState *u, int s)
{
  let_go (sn, s, &u->grads[s]);
  u->live[s] &= (guint8) ~SHOAL_UNIT_GRADS;
}

float *
shoal_unit_state_values_slot (ShoalSharedNet *sn, ShoalUnitState *u, int s)
{
  u->live[s] |= SHOAL_UNIT_VALUES;
  if (sn->holder == u)
    return sn->store->values + sn->begin[s];
  if (u->values[s] == NULL)
    u->values[s] = take (sn, s);
  return u->values[s];
}
