/* The net's backward hook for a param client; see push_hook.h. */
#include "worker/push_hook.h"

size_t
shoal_worker_ready_from (ShoalLayer *layer)
{
  size_t begin, end;
  return shoal_layer_param_range (layer, &begin, &end) ? begin : G_MAXSIZE;
}

void
shoal_worker_push_ready (ShoalLayer *layer, gpointer push_step)
{
  ShoalPushStep *p = push_step;
  shoal_param_client_range_done (p->client, shoal_worker_ready_from (layer), p->step);
}
