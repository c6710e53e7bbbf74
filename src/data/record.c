/* Record <-> bytes with the Thrift binary protocol.
 *
 * Two things of c_glib 0.17 shape this file:
 *  - ThriftMemoryBuffer's read returns short counts at the end of its
 *    data and the transport's read_all loops until it has everything, so a
 *    truncated record makes the decoder spin forever (measured: a Record
 *    cut by 2 bytes never returns).  Its read also copies the input once
 *    and memmoves the rest of the buffer on every field.  ShoalRecordBuffer
 *    subclasses it: reads come straight from the caller's bytes, bounded,
 *    and fail when the data ends; writes (encoding) are inherited.
 *  - The generated reader appends to the shape list and frees a binary
 *    field it meets twice with g_free (heap corruption: the array came from
 *    g_slice).  The decode struct is reset by hand before every read, and
 *    the hardened protocol of rpc/thrift_protocol.h rejects records that
 *    repeat a field (and bounds lengths and counts by the bytes left). */
#include "data/record.h"

#include <string.h>

#include <thrift/c_glib/thrift.h>
#include <thrift/c_glib/transport/thrift_memory_buffer.h>

#include "core/error.h"
#include "rpc/thrift_protocol.h"
#include "rpc/thrift_types.h"
#include "shoal_record_types.h"

/* ---- a memory transport that reads from borrowed bytes --------------- */

typedef struct {
  ThriftMemoryBuffer parent;
  const guint8 *rd;      /* borrowed for the duration of one decode */
  gsize rd_len, rd_pos;
} ShoalRecordBuffer;

typedef struct {
  ThriftMemoryBufferClass parent;
} ShoalRecordBufferClass;

GType shoal_record_buffer_get_type (void);
G_DEFINE_TYPE (ShoalRecordBuffer, shoal_record_buffer, THRIFT_TYPE_MEMORY_BUFFER)

static gint32
record_buffer_read (ThriftTransport *transport, gpointer buf, guint32 len, GError **error)
{
  ShoalRecordBuffer *self = (ShoalRecordBuffer *) transport;

  if (len > self->rd_len - self->rd_pos)
    {
      g_set_error (error, THRIFT_TRANSPORT_ERROR, THRIFT_TRANSPORT_ERROR_RECEIVE,
                   "data ends at byte %zu, %u more wanted", self->rd_len,
                   (guint) (len - (self->rd_len - self->rd_pos)));
      return -1;
    }
  memcpy (buf, self->rd + self->rd_pos, len);
  self->rd_pos += len;
  return (gint32) len;
}

/* Called with the declared length of a binary field or list before the
 * protocol allocates it: a corrupt length fails here, not in g_malloc. */
static gboolean
record_buffer_check_available (ThriftTransport *transport, glong nbytes, GError **error)
{
  ShoalRecordBuffer *self = (ShoalRecordBuffer *) transport;

  if (nbytes < 0 || (gsize) nbytes > self->rd_len - self->rd_pos)
    {
      /* the binary protocol passes -1 * count for an unknown list element
       * type after setting its own error */
      if (error != NULL && *error != NULL)
        return FALSE;
      g_set_error (error, THRIFT_TRANSPORT_ERROR, THRIFT_TRANSPORT_ERROR_RECEIVE,
                   "a field declares %ld bytes at byte %zu but only %zu follow",
                   nbytes, self->rd_pos, self->rd_len - self->rd_pos);
      return FALSE;
    }
  return TRUE;
}

static void
shoal_record_buffer_init (ShoalRecordBuffer *self)
{
  self->rd = NULL;
}

/* ThriftMemoryBuffer's finalize frees its buffer but does not chain up
 * (32 bytes lost per object); this one does its work and skips to the
 * transport's finalize. */
static void
record_buffer_finalize (GObject *object)
{
  ThriftMemoryBuffer *mb = THRIFT_MEMORY_BUFFER (object);

  if (mb->owner && mb->buf != NULL)
    g_byte_array_unref (mb->buf);
  mb->buf = NULL;
  G_OBJECT_CLASS (g_type_class_peek (THRIFT_TYPE_TRANSPORT))->finalize (object);
}

static void
shoal_record_buffer_class_init (ShoalRecordBufferClass *klass)
{
  ThriftTransportClass *ttc = THRIFT_TRANSPORT_CLASS (klass);

  G_OBJECT_CLASS (klass)->finalize = record_buffer_finalize;
  ttc->read = record_buffer_read;
  ttc->read_all = record_buffer_read;   /* read is all-or-nothing already */
  ttc->checkReadBytesAvailable = record_buffer_check_available;
}

/* ---- types ------------------------------------------------------------ */

void
shoal_record_types_init (void)
{
  static gsize done = 0;

  if (g_once_init_enter (&done))
    {
      shoal_thrift_types_init ();
      g_type_ensure (THRIFT_TYPE_MEMORY_BUFFER);
      g_type_ensure (SHOAL_TYPE_RECORD);
      g_type_ensure (shoal_record_buffer_get_type ());
      g_once_init_leave (&done, 1);
    }
}

/* ---- codec ------------------------------------------------------------- */

struct _ShoalRecordCodec {
  ShoalRecordBuffer *buffer;
  ShoalThriftProtocol *protocol;
  ShoalRecord *dec;           /* reset before every decode */
  ShoalRecord *enc;           /* its byte arrays are reused across encodes */
};

ShoalRecordCodec *
shoal_record_codec_new (void)
{
  ShoalRecordCodec *codec = g_new0 (ShoalRecordCodec, 1);

  shoal_record_types_init ();
  codec->buffer = g_object_new (shoal_record_buffer_get_type (), NULL);
  codec->protocol = shoal_thrift_protocol_new (THRIFT_TRANSPORT (codec->buffer));
  /* the shape (field 2) is read as i32 whatever its list declares */
  shoal_thrift_protocol_expect_list (codec->protocol, 1, 2, T_I32);
  codec->dec = g_object_new (SHOAL_TYPE_RECORD, NULL);
  codec->enc = g_object_new (SHOAL_TYPE_RECORD, NULL);
  codec->enc->pixels = g_byte_array_new ();
  codec->enc->floats = g_byte_array_new ();
  codec->enc->targets = g_byte_array_new ();
  return codec;
}

void
shoal_record_codec_free (ShoalRecordCodec *codec)
{
  if (codec == NULL)
    return;
  g_object_unref (codec->dec);
  g_object_unref (codec->enc);
  g_object_unref (codec->protocol);
  g_object_unref (codec->buffer);
  g_free (codec);
}

/* Validates the dims of a shape read from a record or given by a caller;
 * returns the element count or 0 with error set. */
static size_t
check_dims (const gint32 *dims, guint ndim, const char *what, GError **error)
{
  size_t count = 1;

  if (ndim == 0 || ndim > SHOAL_RECORD_MAX_DIMS)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                   "%s: shape has %u dims, records hold 1 to %d", what, ndim,
                   SHOAL_RECORD_MAX_DIMS);
      return 0;
    }
  for (guint i = 0; i < ndim; i++)
    {
      if (dims[i] <= 0)
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                       "%s: shape dim %u is %d, must be positive", what, i, dims[i]);
          return 0;
        }
      count *= (size_t) dims[i];
      if (count > G_MAXINT32)
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                       "%s: shape holds more than %d values", what, G_MAXINT32);
          return 0;
        }
    }
  return count;
}

static void
bytes_set (GByteArray *array, const void *data, size_t n)
{
  g_byte_array_set_size (array, (guint) n);
  memcpy (array->data, data, n);
}

#if G_BYTE_ORDER == G_BIG_ENDIAN
static void
swap_floats (guint8 *bytes, size_t n)
{
  guint32 *w = (guint32 *) bytes;
  for (size_t i = 0; i < n; i++)
    w[i] = GUINT32_SWAP_LE_BE (w[i]);
}
#endif

gboolean
shoal_record_codec_encode (ShoalRecordCodec *codec, const ShoalRecordView *rec,
                           const guint8 **bytes, gsize *len, GError **error)
{
  ShoalRecord *r = codec->enc;
  GByteArray *out = codec->buffer->parent.buf;
  gint32 dims[SHOAL_MAX_DIMS];
  size_t count;
  GError *terr = NULL;

  if (rec->shape.ndim < 0 || rec->shape.ndim > SHOAL_RECORD_MAX_DIMS)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                   "record to encode: shape has %d dims, records hold 1 to %d",
                   rec->shape.ndim, SHOAL_RECORD_MAX_DIMS);
      return FALSE;
    }
  for (int i = 0; i < rec->shape.ndim; i++)
    dims[i] = rec->shape.dim[i];
  count = check_dims (dims, (guint) rec->shape.ndim, "record to encode", error);
  if (count == 0)
    return FALSE;
  if ((rec->kind == SHOAL_RECORD_PIXELS && rec->pixels == NULL)
      || (rec->kind == SHOAL_RECORD_FLOATS && rec->floats == NULL)
      || (rec->ntargets > 0 && rec->targets == NULL))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                   "record to encode: no data for its kind");
      return FALSE;
    }

  r->label = rec->label;
  r->__isset_label = TRUE;
  g_array_set_size (r->shape, 0);
  g_array_append_vals (r->shape, dims, (guint) rec->shape.ndim);
  r->__isset_shape = TRUE;
  r->__isset_pixels = rec->kind == SHOAL_RECORD_PIXELS;
  r->__isset_floats = rec->kind == SHOAL_RECORD_FLOATS;
  r->__isset_targets = rec->ntargets > 0;
  if (rec->kind == SHOAL_RECORD_PIXELS)
    bytes_set (r->pixels, rec->pixels, count);
  else
    bytes_set (r->floats, rec->floats, count * sizeof (float));
  if (rec->ntargets > 0)
    bytes_set (r->targets, rec->targets, rec->ntargets * sizeof (float));
#if G_BYTE_ORDER == G_BIG_ENDIAN
  if (rec->kind == SHOAL_RECORD_FLOATS)
    swap_floats (r->floats->data, count);
  swap_floats (r->targets->data, rec->ntargets);
#endif

  g_byte_array_set_size (out, 0);
  if (thrift_struct_write (THRIFT_STRUCT (r), shoal_thrift_protocol_base (codec->protocol), &terr)
      < 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL,
                   "record to encode: %s", terr ? terr->message : "write failed");
      g_clear_error (&terr);
      return FALSE;
    }
  *bytes = out->data;
  *len = out->len;
  return TRUE;
}

static void
clear_bytes (GByteArray **array, gboolean *isset)
{
  if (*array != NULL)
    g_byte_array_unref (*array);
  *array = NULL;
  *isset = FALSE;
}

gboolean
shoal_record_codec_decode (ShoalRecordCodec *codec, const void *bytes, gsize len,
                           const char *what, ShoalRecordView *rec, GError **error)
{
  ShoalRecord *r = codec->dec;
  ShoalRecordBuffer *in = codec->buffer;
  GError *terr = NULL;
  gint32 ret;
  size_t count;

  r->label = -1;
  r->__isset_label = FALSE;
  g_array_set_size (r->shape, 0);
  r->__isset_shape = FALSE;
  clear_bytes (&r->pixels, &r->__isset_pixels);
  clear_bytes (&r->floats, &r->__isset_floats);
  clear_bytes (&r->targets, &r->__isset_targets);

  in->rd = bytes;
  in->rd_len = len;
  in->rd_pos = 0;
  shoal_thrift_protocol_reset (codec->protocol);
  ret = thrift_struct_read (THRIFT_STRUCT (r), shoal_thrift_protocol_base (codec->protocol), &terr);
  in->rd = NULL;
  if (ret < 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA, "%s: not a Record (%zu bytes): %s",
                   what, len, terr ? terr->message : "read failed");
      g_clear_error (&terr);
      return FALSE;
    }
  if (in->rd_pos != len)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                   "%s: not a Record: %zu stray bytes after its end at byte %zu",
                   what, len - in->rd_pos, in->rd_pos);
      return FALSE;
    }
  if (!r->__isset_shape)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA, "%s: record has no shape", what);
      return FALSE;
    }
  count = check_dims ((const gint32 *) (void *) r->shape->data, r->shape->len, what, error);
  if (count == 0)
    return FALSE;
  if ((r->pixels != NULL) == (r->floats != NULL))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA, "%s: record holds %s", what,
                   r->pixels ? "both pixels and floats" : "neither pixels nor floats");
      return FALSE;
    }

  memset (rec, 0, sizeof *rec);
  rec->label = r->label;
  rec->shape.ndim = (int) r->shape->len;
  for (guint i = 0; i < r->shape->len; i++)
    rec->shape.dim[i] = g_array_index (r->shape, gint32, i);

  if (r->pixels != NULL)
    {
      if (r->pixels->len != count)
        goto bad_length;
      rec->kind = SHOAL_RECORD_PIXELS;
      rec->pixels = r->pixels->data;
    }
  else
    {
      if (r->floats->len != count * sizeof (float))
        goto bad_length;
#if G_BYTE_ORDER == G_BIG_ENDIAN
      swap_floats (r->floats->data, count);
#endif
      rec->kind = SHOAL_RECORD_FLOATS;
      rec->floats = (const float *) (void *) r->floats->data;   /* g_malloc'd: aligned */
    }
  if (r->targets != NULL && r->targets->len > 0)
    {
      if (r->targets->len % sizeof (float) != 0)
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                       "%s: targets hold %u bytes, not a whole number of floats", what,
                       r->targets->len);
          return FALSE;
        }
      rec->ntargets = r->targets->len / sizeof (float);
#if G_BYTE_ORDER == G_BIG_ENDIAN
      swap_floats (r->targets->data, rec->ntargets);
#endif
      rec->targets = (const float *) (void *) r->targets->data;
    }
  return TRUE;

bad_length:
  {
    char *s = shoal_shape_to_string (&rec->shape);
    gboolean px = r->pixels != NULL;
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                 "%s: shape %s needs %zu %s bytes, record holds %u", what, s,
                 px ? count : count * sizeof (float), px ? "pixel" : "float",
                 px ? r->pixels->len : r->floats->len);
    g_free (s);
    return FALSE;
  }
}

void
shoal_record_to_floats (const ShoalRecordView *rec, float mul, float add, float *restrict out)
{
  size_t n = shoal_shape_count (&rec->shape);

  if (rec->kind == SHOAL_RECORD_PIXELS)
    {
      const guint8 *restrict p = rec->pixels;
      for (size_t i = 0; i < n; i++)
        out[i] = (float) p[i] * mul + add;
    }
  else
    {
      const float *restrict f = rec->floats;
      for (size_t i = 0; i < n; i++)
        out[i] = f[i] * mul + add;
    }
}
