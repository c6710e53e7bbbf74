/* The net's backward hook for a worker's param client: the adapter
 * between a net, which says which layer finished its backward
 * (ShoalParamsReadyFunc, shoal/net.h), and the param client, which moves
 * ranges of the param store and knows no layer
 * (shoal_param_client_range_done).  It lives here, with the caller that
 * joins the two, so that comm/ never asks a layer anything. */
#ifndef SHOAL_PUSH_HOOK_H
#define SHOAL_PUSH_HOOK_H

#include <glib.h>

#include "comm/param_client.h"
#include "layers/layer.h"

G_BEGIN_DECLS

/* The hook's data: the client and the step being computed. */
typedef struct {
  ShoalParamClient *client;
  gint64 step;
} ShoalPushStep;

/* Where the params whose gradients `layer`'s backward completed begin:
 * once it is done, every gradient from there to the store's end is final
 * in the step (the layers above finished before it); G_MAXSIZE for a
 * layer without params, which completes nothing. */
size_t shoal_worker_ready_from (ShoalLayer *layer);

/* A ShoalParamsReadyFunc: tells push_step's client that the store's
 * gradients from where `layer`'s params begin are final in its step.  A
 * layer with statistics alone still marks the step (its range is empty). */
void shoal_worker_push_ready (ShoalLayer *layer, gpointer push_step);

G_END_DECLS

#endif
