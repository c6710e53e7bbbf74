/* The device side of a GPU worker's gradient traffic (grad_encoder.h).
 * One device buffer and one pinned host buffer hold every slice's
 * encoding, slice after slice (each 16-byte aligned), so a batch of
 * consecutive slices comes down in one copy. */
#include "comm/grad_encoder.h"

#include "core/error.h"

struct _ShoalGradEncoder {
  ShoalDevice device;
  ShoalStream *compute;          /* the net's, borrowed */
  ShoalStream *copy;             /* the copies down, owned */
  float *grads;                  /* store->dev_grads, borrowed */
  int nslices;
  size_t *begin, *end;
  ShoalCodec *codec;
  size_t *offset;                /* per slice, and [nslices]: the bytes of all */
  guint8 *dev_wire, *host_wire;  /* device; pinned host */
  float *residual, *residual_next;  /* device, store->total floats; NULL when no slice quantises */
  size_t total;
  ShoalEvent **encoded;          /* per batch (its first slice): compute stream, encodings done */
  ShoalEvent **arrived;          /* per batch: copy stream, bytes on the host */
};

static float *
device_zeros (ShoalDevice device, size_t n, GError **error)
{
  float *p = shoal_device_alloc (device, MAX (n, (size_t) 1) * sizeof (float), error);
  if (p != NULL && !shoal_device_zero (device, p, MAX (n, (size_t) 1) * sizeof (float), error))
    {
      shoal_device_free (device, p);
      return NULL;
    }
  return p;
}

ShoalGradEncoder *
shoal_grad_encoder_new (ShoalParamStore *store, int nslices, const size_t *begin, const size_t *end,
                        const ShoalCodec *codecs, ShoalStream *compute, GError **error)
{
  if (store->dev_grads == NULL || shoal_device_is_cpu (store->device))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "the gradients are not on a GPU");
      return NULL;
    }
  ShoalGradEncoder *enc = g_new0 (ShoalGradEncoder, 1);
  enc->device = store->device;
  enc->compute = compute;
  enc->grads = store->dev_grads;
  enc->nslices = nslices;
  enc->total = store->total;
  enc->begin = g_memdup2 (begin, nslices * sizeof (size_t));
  enc->end = g_memdup2 (end, nslices * sizeof (size_t));
  enc->codec = g_memdup2 (codecs, nslices * sizeof (ShoalCodec));
  enc->offset = g_new0 (size_t, nslices + 1);
  enc->encoded = g_new0 (ShoalEvent *, nslices);
  enc->arrived = g_new0 (ShoalEvent *, nslices);
  gboolean quantises = FALSE;
  for (int s = 0; s < nslices; s++)
    {
      size_t bytes = shoal_codec_bytes (codecs[s], end[s] - begin[s]);
      enc->offset[s + 1] = enc->offset[s] + (bytes + 15) / 16 * 16;
      quantises |= shoal_codec_lossy_feedback (codecs[s]);
    }
  size_t wire = MAX (enc->offset[nslices], (size_t) 16);
  shoal_device_activate (enc->device);
  gboolean ok = (enc->copy = shoal_stream_new (enc->device, error)) != NULL
                && (enc->dev_wire = shoal_device_alloc (enc->device, wire, error)) != NULL
                && (enc->host_wire = shoal_device_host_alloc (enc->device, wire, error)) != NULL
                && (!quantises
                    || ((enc->residual = device_zeros (enc->device, store->total, error)) != NULL
                        && (enc->residual_next = device_zeros (enc->device, store->total, error)) != NULL));
  for (int s = 0; s < nslices && ok; s++)
    ok = (enc->encoded[s] = shoal_event_new (enc->device, error)) != NULL
         && (enc->arrived[s] = shoal_event_new (enc->device, error)) != NULL;
  if (!ok)
    {
      char *where = shoal_device_to_string (enc->device);
      g_prefix_error (error, "encoding the gradients on %s: ", where);
      g_free (where);
      shoal_grad_encoder_free (enc);
      return NULL;
    }
  return enc;
}

gboolean
shoal_grad_encoder_enqueue (ShoalGradEncoder *enc, int from, int to, float scale)
{
  gboolean residual_written = FALSE;
  g_return_val_if_fail (from >= 0 && from < to && to <= enc->nslices, FALSE);
  shoal_device_activate (enc->device);
  for (int s = from; s < to; s++)
    {
      size_t b = enc->begin[s];
      gboolean lossy = shoal_codec_lossy_feedback (enc->codec[s]);
      shoal_codec_encode_on (enc->compute, enc->codec[s], enc->grads + b, scale, TRUE,
                             lossy ? enc->residual + b : NULL, lossy ? enc->residual_next + b : NULL,
                             enc->end[s] - b, enc->dev_wire + enc->offset[s]);
      residual_written |= lossy;
    }
  shoal_event_record (enc->encoded[from], enc->compute);
  shoal_stream_wait (enc->copy, enc->encoded[from]);
  shoal_stream_copy (enc->copy, enc->host_wire + enc->offset[from], enc->dev_wire + enc->offset[from],
                     enc->offset[to] - enc->offset[from]);
  shoal_event_record (enc->arrived[from], enc->copy);
  return residual_written;
}

gboolean
shoal_grad_encoder_wait (ShoalGradEncoder *enc, int from, GError **error)
{
  return shoal_event_sync (enc->arrived[from], error);
}

const guint8 *
shoal_grad_encoder_bytes (ShoalGradEncoder *enc, int s)
{
  return enc->host_wire + enc->offset[s];
}

void
shoal_grad_encoder_commit (ShoalGradEncoder *enc)
{
  float *t = enc->residual;
  enc->residual = enc->residual_next;
  enc->residual_next = t;
}

gboolean
shoal_grad_encoder_get_residual (ShoalGradEncoder *enc, float *host, GError **error)
{
  return enc->residual == NULL || shoal_device_copy (host, enc->residual, enc->total * sizeof (float), error);
}

gboolean
shoal_grad_encoder_set_residual (ShoalGradEncoder *enc, const float *host, GError **error)
{
  return enc->residual == NULL || shoal_device_copy (enc->residual, host, enc->total * sizeof (float), error);
}

void
shoal_grad_encoder_free (ShoalGradEncoder *enc)
{
  if (enc == NULL)
    return;
  if (enc->copy != NULL)
    {
      GError *error = NULL;
      if (!shoal_stream_sync (enc->copy, &error))
        {
          g_warning ("encoding the gradients on the GPU: %s", error->message);
          g_error_free (error);
        }
    }
  for (int s = 0; s < enc->nslices; s++)
    {
      shoal_event_free (enc->encoded[s]);
      shoal_event_free (enc->arrived[s]);
    }
  shoal_stream_free (enc->copy);
  shoal_device_free (enc->device, enc->dev_wire);
  shoal_device_host_free (enc->device, enc->host_wire);
  shoal_device_free (enc->device, enc->residual);
  shoal_device_free (enc->device, enc->residual_next);
  g_free (enc->encoded);
  g_free (enc->arrived);
  g_free (enc->offset);
  g_free (enc->codec);
  g_free (enc->begin);
  g_free (enc->end);
  g_free (enc);
}
