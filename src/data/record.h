/* One example of a dataset: the Record struct of thrift/record.thrift,
 * serialised with the Thrift binary protocol.
 *
 * The rest of shoal sees records only through ShoalRecordView, a plain C
 * struct, so that no GObject type leaks out of src/data.  A ShoalRecordCodec
 * keeps one transport, one protocol and one struct alive across calls:
 * decoding runs once per example on the training hot path. */
#ifndef SHOAL_RECORD_H
#define SHOAL_RECORD_H

#include <glib.h>
#include <stddef.h>

#include "core/tensor.h"

G_BEGIN_DECLS

/* Records hold one example of at most 3 dims (the batch dim comes on top). */
#define SHOAL_RECORD_MAX_DIMS (SHOAL_MAX_DIMS - 1)

typedef enum {
  SHOAL_RECORD_PIXELS,   /* uint8 values, e.g. image pixels */
  SHOAL_RECORD_FLOATS    /* float32 values, e.g. CSV features */
} ShoalRecordKind;

typedef struct {
  gint32 label;              /* class label; -1 when the record has none */
  ShoalShape shape;          /* one example, no batch dim; 1..3 dims, all > 0 */
  ShoalRecordKind kind;
  const guint8 *pixels;      /* kind PIXELS: shoal_shape_count (&shape) bytes; else NULL */
  const float *floats;       /* kind FLOATS: shoal_shape_count (&shape) floats; else NULL */
  const float *targets;      /* optional regression targets; NULL when absent */
  size_t ntargets;
} ShoalRecordView;

/* Registers the generated GObject types once (thread-safe).  Their
 * generated get_type functions are not: a first use from two threads at
 * once can crash, so every entry point of src/data calls this first and
 * main() may call it before starting threads. */
void shoal_record_types_init (void);

/* Encoder and decoder for one thread at a time.  Free with
 * shoal_record_codec_free. */
typedef struct _ShoalRecordCodec ShoalRecordCodec;

ShoalRecordCodec *shoal_record_codec_new (void);
void shoal_record_codec_free (ShoalRecordCodec *codec);

/* Serialises rec.  On success *bytes points to *len bytes owned by the
 * codec, valid until its next call.  Fails (SHOAL_ERROR_DATA) when rec is
 * inconsistent: bad shape, or no data pointer for its kind. */
gboolean shoal_record_codec_encode (ShoalRecordCodec *codec, const ShoalRecordView *rec,
                                    const guint8 **bytes, gsize *len, GError **error);

/* Parses len bytes into *rec.  The pointers in *rec are owned by the codec
 * and valid until its next call; `bytes` is not referenced after return.
 * `what` names the record in errors, e.g. "data/train: key 0000000042".
 * Fails (SHOAL_ERROR_DATA) on bytes that are not a Record, trailing bytes,
 * a missing or bad shape, neither or both of pixels and floats, and data
 * whose length does not fit the shape. */
gboolean shoal_record_codec_decode (ShoalRecordCodec *codec, const void *bytes, gsize len,
                                    const char *what, ShoalRecordView *rec, GError **error);

/* out[i] = value[i] * mul + add for the record's shoal_shape_count values. */
void shoal_record_to_floats (const ShoalRecordView *rec, float mul, float add, float *out);

G_END_DECLS

#endif
