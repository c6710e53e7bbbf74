/* In-process param client: the server lives in this process, so a push
 * is a direct update and params are read in place. */
#include "comm/param_client.h"

typedef struct {
  ShoalParamClient base;
  ShoalServer *server;
} LocalClient;

static gboolean
local_push (ShoalParamClient *client, size_t begin, size_t end, const float *grad, int step,
            GError **error)
{
  (void) error;
  shoal_server_update (((LocalClient *) client)->server, begin, end, grad, step);
  return TRUE;
}

static gboolean
local_pull (ShoalParamClient *client, size_t begin, size_t end, float *dst, GError **error)
{
  (void) error;
  shoal_server_read (((LocalClient *) client)->server, begin, end, dst);
  return TRUE;
}

static float *
local_shared_values (ShoalParamClient *client)
{
  return shoal_server_values (((LocalClient *) client)->server);
}

static void
local_free (ShoalParamClient *client)
{
  g_free (client);
}

static const ShoalParamClientOps local_ops = {
  .name = "in-process",
  .push = local_push,
  .pull = local_pull,
  .shared_values = local_shared_values,
  .free = local_free,
};

ShoalParamClient *
shoal_param_client_new_local (ShoalServer *server)
{
  LocalClient *c = g_new0 (LocalClient, 1);
  c->base.ops = &local_ops;
  c->server = server;
  return &c->base;
}

void
shoal_param_client_free (ShoalParamClient *client)
{
  if (client != NULL)
    client->ops->free (client);
}
