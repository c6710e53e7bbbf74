/* The net's backward hook for a param client; see push_hook.h. */
#include "worker/push_hook.h"

void
shoal_worker_push_ready (ShoalLayer *layer, gpointer push_step)
{
  ShoalPushStep *p = push_step;
  size_t begin, end;
  shoal_param_client_range_done (p->client, shoal_layer_param_range (layer, &begin, &end) ? begin : G_MAXSIZE,
                                 p->step);
}
