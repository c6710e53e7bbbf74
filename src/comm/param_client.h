/* The worker side of the server protocol: one interface, several
 * backends.  The in-process backend calls the server directly, with no
 * copy and no serialisation; a Thrift backend (server groups in other
 * processes) implements the same ops.
 *
 * Ranges are float offsets into the param store, the same on the worker
 * and the server. */
#ifndef SHOAL_PARAM_CLIENT_H
#define SHOAL_PARAM_CLIENT_H

#include <glib.h>

#include "server/server.h"

G_BEGIN_DECLS

typedef struct _ShoalParamClient ShoalParamClient;

typedef struct {
  const char *name;
  /* sends the gradient of values [begin, end) for 0-based step */
  gboolean (*push) (ShoalParamClient *client, size_t begin, size_t end, const float *grad,
                    int step, GError **error);
  /* copies current values [begin, end) into dst */
  gboolean (*pull) (ShoalParamClient *client, size_t begin, size_t end, float *dst, GError **error);
  /* values the worker may read in place, or NULL when it must pull */
  float *(*shared_values) (ShoalParamClient *client);
  void (*free) (ShoalParamClient *client);
} ShoalParamClientOps;

struct _ShoalParamClient {
  const ShoalParamClientOps *ops;
};

/* In-process backend over `server` (borrowed; must outlive the client). */
ShoalParamClient *shoal_param_client_new_local (ShoalServer *server);

static inline gboolean
shoal_param_client_push (ShoalParamClient *c, size_t begin, size_t end, const float *grad, int step,
                         GError **error)
{
  return c->ops->push (c, begin, end, grad, step, error);
}

static inline gboolean
shoal_param_client_pull (ShoalParamClient *c, size_t begin, size_t end, float *dst, GError **error)
{
  return c->ops->pull (c, begin, end, dst, error);
}

static inline float *
shoal_param_client_shared_values (ShoalParamClient *c)
{
  return c->ops->shared_values ? c->ops->shared_values (c) : NULL;
}

void shoal_param_client_free (ShoalParamClient *client);

G_END_DECLS

#endif
