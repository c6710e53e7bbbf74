/* ShoalUpdater: an update rule applied to a whole param store, for
 * programs that train a net in their own loop (shoal/updater.h).  The
 * servers apply the same rule slice by slice (server/server.c); this is
 * the one-store case: clip the whole gradient, then update param by
 * param with its own lr and weight-decay scales and its own count of
 * updates (Adam's bias correction). */
#include "core/updater.h"

struct _ShoalUpdater {
  ShoalUpdaterConf conf;
  ShoalParamStore *store;    /* borrowed */
  gint64 *updates;           /* per param: updates applied */
};

ShoalUpdater *
shoal_updater_new (const ShoalUpdaterConf *conf, ShoalParamStore *store)
{
  g_return_val_if_fail (conf != NULL && store != NULL, NULL);
  /* a rule or schedule none of the enums names would update nothing, silently */
  g_return_val_if_fail ((unsigned) conf->kind < SHOAL_UPDATER_COUNT, NULL);
  g_return_val_if_fail ((unsigned) conf->schedule.policy < SHOAL_LR_COUNT, NULL);
  ShoalUpdater *u = g_new0 (ShoalUpdater, 1);
  u->conf = *conf;
  u->store = store;
  u->updates = g_new0 (gint64, MAX (store->params->len, 1));
  int per = shoal_updater_state_per_value (conf->kind);
  GError *error = NULL;
  /* the public API says it never fails: out of memory aborts, as g_malloc
   * does, but says how much (an API that reports it is for later) */
  if (per > 0 && (store->state == NULL || store->state_per_value < per)
      && !shoal_param_store_allocate_state (store, per, &error))
    g_error ("shoal_updater_new: %s", error->message);
  return u;
}

double
shoal_updater_step (ShoalUpdater *u, gint64 step)
{
  g_return_val_if_fail (u != NULL && step >= 0, 0);
  ShoalParamStore *s = u->store;
  double norm = shoal_clip_gradients (s->grads, s->total, u->conf.clip_value, u->conf.clip_norm);
  int per = shoal_updater_state_per_value (u->conf.kind);
  for (guint i = 0; i < s->params->len; i++)
    {
      ShoalParam *p = g_ptr_array_index (s->params, i);
      float *state_a = per > 0 ? s->state + p->offset : NULL;
      float *state_b = per > 1 ? s->state + s->total + p->offset : NULL;
      shoal_updater_apply (&u->conf, (int) MIN (step, G_MAXINT), ++u->updates[i], p->lr_scale,
                           p->wd_scale, s->values + p->offset, s->grads + p->offset, state_a, state_b,
                           p->count);
    }
  return norm;
}

void
shoal_updater_free (ShoalUpdater *u)
{
  if (u == NULL)
    return;
  g_free (u->updates);
  g_free (u);
}
