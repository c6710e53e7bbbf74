/* The device side of a GPU worker's wire (device_wire.h).  One device
 * buffer and one pinned host buffer hold every slice's gradient encoding,
 * slice after slice (each 16-byte aligned), so a batch of consecutive
 * slices comes down in one copy; two more hold the encoded values. */
#include "comm/device_wire.h"

#include "core/error.h"

/* One direction's encodings of every slice, at 16-byte aligned offsets. */
typedef struct {
  size_t *offset;        /* per slice, and [nslices]: the bytes of all */
  guint8 *dev, *host;    /* device; pinned host */
} Wires;

struct _ShoalDeviceWire {
  ShoalDevice device;
  ShoalStream *compute;          /* the net's, borrowed */
  ShoalStream *down;             /* gradients' encoding and copies down, owned */
  ShoalStream *up;               /* values' uploads and decoding, owned */
  float *grads, *values;         /* store->dev_grads and dev_values, borrowed */
  int nslices;
  size_t *begin, *end;
  ShoalCodec *grad_codec, *value_codec;
  Wires grads_wire, values_wire;
  float *residual, *residual_next;  /* device, store->total floats; NULL when no slice quantises */
  size_t total;
  ShoalEvent **computed;         /* per batch (its first slice): compute stream, its backward done */
  ShoalEvent **arrived;          /* per batch: down stream, its bytes on the host */
};

static float *
device_zeros (ShoalDevice device, size_t n, GError **error)
{
  size_t bytes = MAX (n, (size_t) 1) * sizeof (float);
  float *p = shoal_device_alloc (device, bytes, error);
  if (p != NULL && !shoal_device_zero (device, p, bytes, error))
    {
      shoal_device_free (device, p);
      return NULL;
    }
  return p;
}

/* Offsets for codecs[s] of each slice, and both buffers. */
static gboolean
wires_alloc (ShoalDeviceWire *w, Wires *wires, const ShoalCodec *codecs, GError **error)
{
  wires->offset = g_new0 (size_t, w->nslices + 1);
  for (int s = 0; s < w->nslices; s++)
    wires->offset[s + 1] = wires->offset[s] + (shoal_codec_bytes (codecs[s], w->end[s] - w->begin[s]) + 15) / 16 * 16;
  size_t bytes = MAX (wires->offset[w->nslices], (size_t) 16);
  return (wires->dev = shoal_device_alloc (w->device, bytes, error)) != NULL
         && (wires->host = shoal_device_host_alloc (w->device, bytes, error)) != NULL;
}

static void
wires_free (ShoalDeviceWire *w, Wires *wires)
{
  shoal_device_free (w->device, wires->dev);
  shoal_device_host_free (w->device, wires->host);
  g_free (wires->offset);
}

ShoalDeviceWire *
shoal_device_wire_new (ShoalParamStore *store, int nslices, const size_t *begin, const size_t *end,
                       const ShoalCodec *grad_codecs, const ShoalCodec *value_codecs, ShoalStream *compute,
                       GError **error)
{
  if (store->dev_grads == NULL || shoal_device_is_cpu (store->device))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "the params are not on a GPU");
      return NULL;
    }
  g_return_val_if_fail (compute != NULL, NULL);
  ShoalDeviceWire *w = g_new0 (ShoalDeviceWire, 1);
  w->device = store->device;
  w->compute = compute;
  w->grads = store->dev_grads;
  w->values = store->dev_values;
  w->nslices = nslices;
  w->total = store->total;
  w->begin = g_memdup2 (begin, nslices * sizeof (size_t));
  w->end = g_memdup2 (end, nslices * sizeof (size_t));
  w->grad_codec = g_memdup2 (grad_codecs, nslices * sizeof (ShoalCodec));
  w->value_codec = g_memdup2 (value_codecs, nslices * sizeof (ShoalCodec));
  w->computed = g_new0 (ShoalEvent *, nslices);
  w->arrived = g_new0 (ShoalEvent *, nslices);
  gboolean quantises = FALSE;
  for (int s = 0; s < nslices; s++)
    quantises |= shoal_codec_lossy_feedback (grad_codecs[s]);
  shoal_device_activate (w->device);
  gboolean ok = (w->down = shoal_stream_new (w->device, error)) != NULL
                && (w->up = shoal_stream_new (w->device, error)) != NULL
                && wires_alloc (w, &w->grads_wire, grad_codecs, error)
                && wires_alloc (w, &w->values_wire, value_codecs, error)
                && (!quantises
                    || ((w->residual = device_zeros (w->device, store->total, error)) != NULL
                        && (w->residual_next = device_zeros (w->device, store->total, error)) != NULL));
  for (int s = 0; s < nslices && ok; s++)
    ok = (w->computed[s] = shoal_event_new (w->device, error)) != NULL
         && (w->arrived[s] = shoal_event_new (w->device, error)) != NULL;
  if (!ok)
    {
      char *where = shoal_device_to_string (w->device);
      g_prefix_error (error, "the wire codecs on %s: ", where);
      g_free (where);
      shoal_device_wire_free (w);
      return NULL;
    }
  return w;
}

gboolean
shoal_device_wire_encode (ShoalDeviceWire *w, int from, int to, float scale)
{
  gboolean residual_written = FALSE;
  g_return_val_if_fail (from >= 0 && from < to && to <= w->nslices, FALSE);
  Wires *g = &w->grads_wire;
  shoal_device_activate (w->device);
  /* after the backward that completed the slices, beside the backward
   * of the layers below (which touches neither their gradients nor the
   * residuals) */
  shoal_event_record (w->computed[from], w->compute);
  shoal_stream_wait (w->down, w->computed[from]);
  for (int s = from; s < to; s++)
    {
      size_t b = w->begin[s];
      gboolean lossy = shoal_codec_lossy_feedback (w->grad_codec[s]);
      shoal_codec_encode_on (w->down, w->grad_codec[s], w->grads + b, scale, TRUE,
                             lossy ? w->residual + b : NULL, lossy ? w->residual_next + b : NULL, w->end[s] - b,
                             g->dev + g->offset[s]);
      residual_written |= lossy;
    }
  shoal_stream_copy (w->down, g->host + g->offset[from], g->dev + g->offset[from], g->offset[to] - g->offset[from]);
  shoal_event_record (w->arrived[from], w->down);
  return residual_written;
}

gboolean
shoal_device_wire_wait (ShoalDeviceWire *w, int from, GError **error)
{
  shoal_device_activate (w->device);   /* the comm thread's first call may be this */
  return shoal_event_sync (w->arrived[from], error);
}

const guint8 *
shoal_device_wire_grad_bytes (ShoalDeviceWire *w, int s)
{
  return w->grads_wire.host + w->grads_wire.offset[s];
}

void
shoal_device_wire_commit (ShoalDeviceWire *w)
{
  float *t = w->residual;
  w->residual = w->residual_next;
  w->residual_next = t;
}

gboolean
shoal_device_wire_get_residual (ShoalDeviceWire *w, float *host, GError **error)
{
  return w->residual == NULL || shoal_device_copy (host, w->residual, w->total * sizeof (float), error);
}

gboolean
shoal_device_wire_set_residual (ShoalDeviceWire *w, const float *host, GError **error)
{
  return w->residual == NULL || shoal_device_copy (w->residual, host, w->total * sizeof (float), error);
}

guint8 *
shoal_device_wire_value_bytes (ShoalDeviceWire *w, int s)
{
  return w->value_codec[s] != SHOAL_CODEC_FP32 ? w->values_wire.host + w->values_wire.offset[s] : NULL;
}

void
shoal_device_wire_values_arrived (ShoalDeviceWire *w, int s, const float *host)
{
  size_t b = w->begin[s], n = w->end[s] - b;
  Wires *v = &w->values_wire;
  shoal_device_activate (w->device);
  if (host != NULL)
    {
      shoal_stream_copy (w->up, w->values + b, host, n * sizeof (float));
      return;
    }
  shoal_stream_copy (w->up, v->dev + v->offset[s], v->host + v->offset[s], shoal_codec_bytes (w->value_codec[s], n));
  shoal_codec_decode_on (w->up, w->value_codec[s], v->dev + v->offset[s], w->values + b, n);
}

gboolean
shoal_device_wire_values_sync (ShoalDeviceWire *w, GError **error)
{
  return shoal_stream_sync (w->up, error);
}

void
shoal_device_wire_free (ShoalDeviceWire *w)
{
  if (w == NULL)
    return;
  for (int i = 0; i < 2; i++)
    {
      ShoalStream *stream = i == 0 ? w->down : w->up;
      GError *error = NULL;
      if (stream != NULL && !shoal_stream_sync (stream, &error))
        {
          g_warning ("the wire codecs on the GPU: %s", error->message);
          g_error_free (error);
        }
    }
  for (int s = 0; s < w->nslices; s++)
    {
      shoal_event_free (w->computed[s]);
      shoal_event_free (w->arrived[s]);
    }
  shoal_stream_free (w->down);
  shoal_stream_free (w->up);
  wires_free (w, &w->grads_wire);
  wires_free (w, &w->values_wire);
  shoal_device_free (w->device, w->residual);
  shoal_device_free (w->device, w->residual_next);
  g_free (w->computed);
  g_free (w->arrived);
  g_free (w->grad_codec);
  g_free (w->value_codec);
  g_free (w->begin);
  g_free (w->end);
  g_free (w);
}
