/* Bridge layers: the two ends of an edge of a partitioned net that
 * crosses from one worker's sub-net to another's.
 *
 * bridge_src sits in the producing worker's sub-net with the bridged
 * layer as its source; bridge_dst sits in the consuming worker's sub-net
 * with no source and the same output shape (option `shape`).  The
 * partitioner pairs them with a ShoalBridgeLink whose transport moves the
 * data:
 *   forward   bridge_src: transport->send_data once src->out (and label)
 *             hold this step's data; bridge_dst: transport->recv_data,
 *             which blocks until then and leaves the data in dst->out
 *             (and dst->label) - a view or a copy, the transport decides;
 *   backward  bridge_dst: transport->send_grad once dst->grad holds
 *             d loss / d out; bridge_src: transport->recv_grad, which
 *             blocks until then and leaves it in *src->src_grad[0].
 * A pair made with `grad = false` (nothing downstream learns from the
 * data) exchanges no gradient: bridge_src writes zeros.
 *
 * The layers know nothing of threads or sockets: the in-process transport
 * (src/partition) hands pointers over between threads; a transport for
 * workers in different processes (Thrift) implements the same four calls. */
#ifndef SHOAL_BRIDGE_H
#define SHOAL_BRIDGE_H

#include "layers/layer.h"

G_BEGIN_DECLS

extern const ShoalLayerOps shoal_layer_bridge_src_ops;
extern const ShoalLayerOps shoal_layer_bridge_dst_ops;

typedef struct _ShoalBridgeLink ShoalBridgeLink;

typedef struct {
  /* once both ends are set up, before the first forward; may be NULL */
  void (*attach) (ShoalBridgeLink *link);
  void (*send_data) (ShoalBridgeLink *link, ShoalLayer *src);
  void (*recv_data) (ShoalBridgeLink *link, ShoalLayer *dst);
  void (*send_grad) (ShoalBridgeLink *link, ShoalLayer *dst);
  void (*recv_grad) (ShoalBridgeLink *link, ShoalLayer *src);
} ShoalBridgeTransport;

/* Owned by whoever made the pair (the group net); must outlive both layers'
 * forward and backward calls. */
struct _ShoalBridgeLink {
  const ShoalBridgeTransport *transport;
  gpointer data;         /* the transport's own state */
  ShoalLayer *src;       /* the bridge_src end */
  ShoalLayer *dst;       /* the bridge_dst end */
};

/* Attaches the link to both of its ends (after both sub-nets were set
 * up) and calls the transport's attach.  FALSE with error when the ends
 * do not match (shapes, labels, gradient exchange). */
gboolean shoal_bridge_link_attach (ShoalBridgeLink *link, GError **error);

/* Whether the pair exchanges gradients (its `grad` option). */
gboolean shoal_bridge_exchanges_grad (const ShoalLayer *bridge);

/* Private state shared by both ends (their priv). */
typedef struct {
  ShoalBridgeLink *link;
  gboolean grad;
  gboolean warned;
} ShoalBridgePriv;

G_END_DECLS

#endif
