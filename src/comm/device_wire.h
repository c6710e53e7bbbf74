/* A GPU worker's side of the wire on its device (param_client.h,
 * shoal_param_client_codecs_on_device): gradients are encoded where
 * backward left them and only their encoding comes down; values come up
 * as they arrived and are decoded there.
 *
 * Gradients: each slice, once complete, is encoded by the wire codec's
 * kernel from store->dev_grads (cleared as read), the quantisers'
 * residuals kept in device memory; the encoding and the copy of its
 * bytes down (into pinned memory the comm thread sends from once that
 * copy alone is done) run on a stream of their own after an event on the
 * net's compute stream that follows the backward that completed the
 * slice, so both overlap the backward of the layers below.
 * Values: the comm thread receives a slice's fp16 or bf16 bytes into
 * pinned memory, and they go up and are decoded into store->dev_values
 * on a third stream; values that came as floats into store->values go
 * up as they are. */
#ifndef SHOAL_DEVICE_WIRE_H
#define SHOAL_DEVICE_WIRE_H

#include <glib.h>

#include "core/codec.h"
#include "core/device.h"
#include "core/param.h"

G_BEGIN_DECLS

typedef struct _ShoalDeviceWire ShoalDeviceWire;

/* For `store` (on a GPU) cut into nslices slices [begin[s], end[s]):
 * slice s's gradient goes out in grad_codecs[s] (fp32 for a server in
 * this process, which takes floats) and its values come in
 * value_codecs[s] (fp32: as floats, into store->values); `compute`
 * (borrowed) is the stream the net's backward runs on.  NULL with error
 * when device or pinned memory is short or the store is not on a GPU. */
ShoalDeviceWire *shoal_device_wire_new (ShoalParamStore *store, int nslices, const size_t *begin, const size_t *end,
                                        const ShoalCodec *grad_codecs, const ShoalCodec *value_codecs,
                                        ShoalStream *compute, GError **error);

/* Enqueues the encoding of slices [from, to) (each gradient times scale
 * where scale != 1: the mean of n_push steps) and their copy down.  The
 * quantisers read this step's residual and write the next one; TRUE when
 * some slice did (the next one must then be committed). */
gboolean shoal_device_wire_encode (ShoalDeviceWire *wire, int from, int to, float scale);
/* Waits until the batch encoded with `from` is on the host; FALSE with
 * the device's error. */
gboolean shoal_device_wire_wait (ShoalDeviceWire *wire, int from, GError **error);
/* Slice s's encoded gradient on the host (4-byte aligned), valid after
 * the wait for its batch until its next encoding. */
const guint8 *shoal_device_wire_grad_bytes (ShoalDeviceWire *wire, int s);
/* The step's residuals become the ones the next step adds (after a step
 * every slice of which went out). */
void shoal_device_wire_commit (ShoalDeviceWire *wire);
/* The residuals (store->total floats) to and from host memory, between
 * steps (checkpoints); FALSE with the device's error. */
gboolean shoal_device_wire_get_residual (ShoalDeviceWire *wire, float *host, GError **error);
gboolean shoal_device_wire_set_residual (ShoalDeviceWire *wire, const float *host, GError **error);

/* Where slice s's encoded values are to be received (pinned, 4-byte
 * aligned); NULL for a slice whose values come as floats. */
guint8 *shoal_device_wire_value_bytes (ShoalDeviceWire *wire, int s);
/* Slice s's new values arrived, as floats at `host` (pinned), or with
 * host NULL encoded in its value bytes: enqueues their upload (and
 * decoding) into store->dev_values.  Any thread, one at a time. */
void shoal_device_wire_values_arrived (ShoalDeviceWire *wire, int s, const float *host);
/* Waits for every upload enqueued; FALSE with the device's error.  The
 * next forward may read them after it, and the buffers be reused. */
gboolean shoal_device_wire_values_sync (ShoalDeviceWire *wire, GError **error);

void shoal_device_wire_free (ShoalDeviceWire *wire);

G_END_DECLS

#endif
