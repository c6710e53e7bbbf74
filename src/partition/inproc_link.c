/* The in-process bridge link: a bridge between two workers of the same
 * process hands the pointer over under the link's lock (layers/bridge.h
 * is the transport contract; spread.c has the one between processes). */

#include "partition/group_priv.h"

typedef struct {
  GMutex lock;
  GCond cond;
  guint64 data_sent, data_taken, grad_sent, grad_taken;
} Inproc;

static void
inproc_attach (ShoalBridgeLink *link)
{
  ShoalLayer *src = link->src, *dst = link->dst;
  ShoalShape shape = dst->out.shape;
  /* the consumer's gradient is written straight where bridge_src's source reads it */
  if (shoal_bridge_exchanges_grad (dst))
    shoal_tensor_view (&dst->grad, src->src_grad[0]->data, &shape);
  /* the data is the producer's: drop the buffers the net gave the dst */
  shoal_tensor_view (&dst->out, src->out.data, &shape);
  if (dst->label.data != NULL)
    {
      ShoalShape rows = dst->label.shape;
      shoal_tensor_view (&dst->label, src->label.data, &rows);
    }
}

static void
inproc_send_data (ShoalBridgeLink *link, ShoalLayer *src)
{
  Inproc *in = link->data;
  (void) src;
  g_mutex_lock (&in->lock);
  in->data_sent++;
  g_cond_signal (&in->cond);
  g_mutex_unlock (&in->lock);
}

static void
inproc_recv_data (ShoalBridgeLink *link, ShoalLayer *dst)
{
  Inproc *in = link->data;
  g_mutex_lock (&in->lock);
  while (in->data_sent == in->data_taken)
    g_cond_wait (&in->cond, &in->lock);
  in->data_taken++;
  g_mutex_unlock (&in->lock);
  const ShoalLayer *src = link->src;
  dst->out.data = src->out.data;
  dst->out.shape = src->out.shape;
  dst->out.capacity = src->out.capacity;
  if (dst->label.data != NULL)
    {
      dst->label.data = src->label.data;
      dst->label.shape = src->label.shape;
      dst->label.capacity = src->label.capacity;
    }
}

static void
inproc_send_grad (ShoalBridgeLink *link, ShoalLayer *dst)
{
  Inproc *in = link->data;
  (void) dst;
  g_mutex_lock (&in->lock);
  in->grad_sent++;
  g_cond_signal (&in->cond);
  g_mutex_unlock (&in->lock);
}

static void
inproc_recv_grad (ShoalBridgeLink *link, ShoalLayer *src)
{
  Inproc *in = link->data;
  (void) src;
  g_mutex_lock (&in->lock);
  while (in->grad_sent == in->grad_taken)
    g_cond_wait (&in->cond, &in->lock);
  in->grad_taken++;
  g_mutex_unlock (&in->lock);
}

static const ShoalBridgeTransport inproc_transport = {
  .attach = inproc_attach,
  .send_data = inproc_send_data,
  .recv_data = inproc_recv_data,
  .send_grad = inproc_send_grad,
  .recv_grad = inproc_recv_grad,
};

void
group_link_free (ShoalBridgeLink *link)
{
  if (link->transport == &inproc_transport)
    {
      Inproc *in = link->data;
      g_mutex_clear (&in->lock);
      g_cond_clear (&in->cond);
      g_free (in);
    }
  else
    g_free (link->data);
  g_free (link);
}

ShoalBridgeLink *
group_inproc_link_new (void)
{
  ShoalBridgeLink *link = g_new0 (ShoalBridgeLink, 1);
  Inproc *in = g_new0 (Inproc, 1);
  g_mutex_init (&in->lock);
  g_cond_init (&in->cond);
  link->transport = &inproc_transport;
  link->data = in;
  return link;
}
