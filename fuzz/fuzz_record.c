/* libFuzzer target: shoal_record_codec_decode on arbitrary bytes.
 *
 * Records come from LMDB files that may be truncated or written by another
 * program; decode must turn every byte string into a view or an error,
 * never a crash, a hang or a leak.  One codec serves all inputs, as one
 * serves all records of a shard in lmdb_input, so state left behind by a
 * bad record is exercised against the next one. */
#include <stdint.h>
#include <string.h>

#include "data/record.h"
#include "fuzz_common.h"

static ShoalRecordCodec *codec;

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  if (codec == NULL)
    {
      fuzz_common_init ();
      codec = shoal_record_codec_new ();
    }
  /* a copy of exactly `size` bytes: ASan then sees any read past the end */
  guint8 *copy = g_memdup2 (data, size);
  ShoalRecordView rec;
  GError *error = NULL;

  if (shoal_record_codec_decode (codec, copy, size, "fuzz", &rec, &error))
    {
      /* the view must be what the header promises: touch every value */
      size_t n = 1;
      g_assert (rec.shape.ndim >= 1 && rec.shape.ndim <= SHOAL_RECORD_MAX_DIMS);
      for (int i = 0; i < rec.shape.ndim; i++)
        {
          g_assert (rec.shape.dim[i] > 0);
          n *= (size_t) rec.shape.dim[i];
        }
      float *out = g_new (float, n);
      shoal_record_to_floats (&rec, 1.0f, 0.0f, out);
      float sum = 0;
      for (size_t i = 0; i < rec.ntargets; i++)
        sum += rec.targets[i];
      (void) sum;
      g_free (out);

      /* what decodes re-encodes to bytes that decode to the same record */
      ShoalRecordView again = rec;
      const guint8 *bytes;
      gsize len;
      GError *enc_error = NULL;
      float *vals = rec.kind == SHOAL_RECORD_FLOATS ? g_memdup2 (rec.floats, n * sizeof (float)) : NULL;
      guint8 *pix = rec.kind == SHOAL_RECORD_PIXELS ? g_memdup2 (rec.pixels, n) : NULL;
      float *tg = rec.ntargets ? g_memdup2 (rec.targets, rec.ntargets * sizeof (float)) : NULL;
      again.floats = vals;
      again.pixels = pix;
      again.targets = tg;
      if (!shoal_record_codec_encode (codec, &again, &bytes, &len, &enc_error))
        g_error ("a decoded record does not encode: %s", enc_error->message);
      guint8 *enc = g_memdup2 (bytes, len);
      ShoalRecordView back;
      if (!shoal_record_codec_decode (codec, enc, len, "re-encoded", &back, &enc_error))
        g_error ("a re-encoded record does not decode: %s", enc_error->message);
      g_assert_cmpint (back.label, ==, again.label);
      g_assert_true (shoal_shape_equal (&back.shape, &again.shape));
      g_assert_cmpint (back.kind, ==, again.kind);
      g_assert_cmpuint (back.ntargets, ==, again.ntargets);
      if (back.kind == SHOAL_RECORD_PIXELS)
        g_assert_true (memcmp (back.pixels, pix, n) == 0);
      else
        g_assert_true (memcmp (back.floats, vals, n * sizeof (float)) == 0);
      if (back.ntargets > 0)
        g_assert_true (memcmp (back.targets, tg, back.ntargets * sizeof (float)) == 0);
      g_free (enc);
      g_free (vals);
      g_free (pix);
      g_free (tg);
      if (fuzz_verbose)
        g_printerr ("fuzz: record of %zu values, %zu targets\n", n, rec.ntargets);
    }
  else
    {
      g_assert (error != NULL && error->message != NULL);
      fuzz_note_error ("decode", error);
      g_error_free (error);
    }
  g_free (copy);
  return 0;
}
