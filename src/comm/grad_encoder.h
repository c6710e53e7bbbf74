/* A GPU worker's gradients encoded on its device (param_client.h,
 * shoal_param_client_encode_on_device): each slice, once complete, is
 * encoded by the wire codec's kernel where backward left it
 * (store->dev_grads, cleared as read), and only the encoded bytes cross
 * PCIe, into pinned host memory the comm thread sends from.  The
 * quantisers' residuals stay in device memory.
 *
 * The encoding is enqueued on the net's compute stream right after the
 * backward that completed the slice (so it needs no event to follow it),
 * the copy down on the encoder's own stream, so it overlaps the backward
 * of the layers below; the comm thread waits for a batch's copy alone. */
#ifndef SHOAL_GRAD_ENCODER_H
#define SHOAL_GRAD_ENCODER_H

#include <glib.h>

#include "core/codec.h"
#include "core/device.h"
#include "core/param.h"

G_BEGIN_DECLS

typedef struct _ShoalGradEncoder ShoalGradEncoder;

/* For `store` (on a GPU) cut into nslices slices [begin[s], end[s]),
 * slice s encoded with codecs[s] (fp32 for a slice that goes to a server
 * in this process as floats); `compute` (borrowed) is the stream the
 * net's backward runs on.  NULL with error when device or pinned memory
 * is short or the store is not on a GPU. */
ShoalGradEncoder *shoal_grad_encoder_new (ShoalParamStore *store, int nslices, const size_t *begin,
                                          const size_t *end, const ShoalCodec *codecs, ShoalStream *compute,
                                          GError **error);
/* Enqueues the encoding of slices [from, to) (each gradient times scale
 * where scale != 1: the mean of n_push steps) and their copy down.  The
 * quantisers read this step's residual and write the next one; TRUE when
 * some slice did (the next one must then be committed). */
gboolean shoal_grad_encoder_enqueue (ShoalGradEncoder *enc, int from, int to, float scale);
/* Waits until the batch enqueued with `from` is on the host; FALSE with
 * the device's error. */
gboolean shoal_grad_encoder_wait (ShoalGradEncoder *enc, int from, GError **error);
/* Slice s's encoded bytes on the host (4-byte aligned), valid after the
 * wait for its batch until the next enqueue of it. */
const guint8 *shoal_grad_encoder_bytes (ShoalGradEncoder *enc, int s);
/* The step's residuals become the ones the next step adds (after a step
 * every slice of which went out). */
void shoal_grad_encoder_commit (ShoalGradEncoder *enc);
/* The residuals (store->total floats) to and from host memory, between
 * steps (checkpoints); FALSE with the device's error. */
gboolean shoal_grad_encoder_get_residual (ShoalGradEncoder *enc, float *host, GError **error);
gboolean shoal_grad_encoder_set_residual (ShoalGradEncoder *enc, const float *host, GError **error);
void shoal_grad_encoder_free (ShoalGradEncoder *enc);

G_END_DECLS

#endif
