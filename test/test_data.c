/* marks: threads (they start threads: TSan runs this file in `make SANITIZE=thread test-threads`) */
/* The data path: Record codec, LMDB datasets, IDX/CSV import and the
 * lmdb_input layer.  Every file is made here, in a temporary directory. */
#include <glib.h>
#include <glib/gstdio.h>
#include <lmdb.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "core/error.h"
#include "data/data_layers.h"
#include "data/dataset.h"
#include "data/import.h"
#include "data/record.h"
#include "net/net.h"
#include "support/temp_tree.h"

/* ---- helpers ------------------------------------------------------------ */

static char *
tmp_dir (void)
{
  GError *error = NULL;
  char *dir = g_dir_make_tmp ("shoal-test-data-XXXXXX", &error);
  g_assert_no_error (error);
  return dir;
}

static void
write_file (const char *path, const void *data, size_t len, gboolean gz)
{
  if (gz)
    {
      gzFile f = gzopen (path, "wb");
      g_assert_nonnull (f);
      if (len > 0)
        g_assert_cmpint (gzwrite (f, data, (unsigned) len), ==, (int) len);
      g_assert_cmpint (gzclose (f), ==, Z_OK);
    }
  else
    {
      GError *error = NULL;
      g_file_set_contents (path, data, (gssize) len, &error);
      g_assert_no_error (error);
    }
}

static void
put_be32 (GByteArray *b, guint32 v)
{
  guint8 x[4] = { (guint8) (v >> 24), (guint8) (v >> 16), (guint8) (v >> 8), (guint8) v };
  g_byte_array_append (b, x, 4);
}

static void
put_be16 (GByteArray *b, guint16 v)
{
  guint8 x[2] = { (guint8) (v >> 8), (guint8) v };
  g_byte_array_append (b, x, 2);
}

static void
put_u8 (GByteArray *b, guint8 v)
{
  g_byte_array_append (b, &v, 1);
}

/* The Thrift binary encoding written by hand: field header (type, id). */
static void
put_field (GByteArray *b, guint8 type, guint16 id)
{
  put_u8 (b, type);
  put_be16 (b, id);
}

enum { T_I32 = 8, T_STRING = 11, T_LIST = 15 };

static void
put_shape (GByteArray *b, int ndim, const gint32 *dims)
{
  put_field (b, T_LIST, 2);
  put_u8 (b, T_I32);
  put_be32 (b, (guint32) ndim);
  for (int i = 0; i < ndim; i++)
    put_be32 (b, (guint32) dims[i]);
}

static void
put_binary (GByteArray *b, guint16 id, const void *data, guint32 len)
{
  put_field (b, T_STRING, id);
  put_be32 (b, len);
  g_byte_array_append (b, data, len);
}

/* pixel value of element j of record i in the synthetic datasets */
static guint8
pixel_of (guint64 i, size_t j)
{
  return (guint8) ((i * 7 + j * 3) & 0xff);
}

/* n pixel records of shape 1 x h x w, label = index (or index % 256). */
static void
make_pixel_dataset (const char *path, guint64 n, int h, int w)
{
  GError *error = NULL;
  ShoalDatasetWriter *wr = shoal_dataset_writer_new_full (path, 64 << 10, 64, &error);
  g_assert_no_error (error);
  size_t count = (size_t) h * w;
  guint8 *px = g_malloc (count);
  ShoalRecordView rec = { .shape = shoal_shape_make (3, 1, h, w), .kind = SHOAL_RECORD_PIXELS,
                          .pixels = px };
  for (guint64 i = 0; i < n; i++)
    {
      for (size_t j = 0; j < count; j++)
        px[j] = pixel_of (i, j);
      rec.label = (gint32) i;
      g_assert_true (shoal_dataset_writer_put_record (wr, &rec, &error));
      g_assert_no_error (error);
    }
  g_assert_true (shoal_dataset_writer_finish (wr, &error));
  g_assert_no_error (error);
  shoal_dataset_writer_free (wr);
  g_free (px);
}

/* ---- records ------------------------------------------------------------ */

static void
test_record_roundtrip_pixels (void)
{
  ShoalRecordCodec *enc = shoal_record_codec_new (), *dec = shoal_record_codec_new ();
  GError *error = NULL;
  const guint8 *bytes;
  gsize len;
  guint8 px[24];
  for (int i = 0; i < 24; i++)
    px[i] = (guint8) (i * 11);
  ShoalRecordView in = { .label = 7, .shape = shoal_shape_make (3, 2, 3, 4),
                         .kind = SHOAL_RECORD_PIXELS, .pixels = px }, out;

  g_assert_true (shoal_record_codec_encode (enc, &in, &bytes, &len, &error));
  g_assert_no_error (error);
  /* label, shape and pixels with their headers, plus the stop byte */
  g_assert_cmpuint (len, ==, (3 + 4) + (3 + 5 + 3 * 4) + (3 + 4 + 24) + 1);
  g_assert_true (shoal_record_codec_decode (dec, bytes, len, "r1", &out, &error));
  g_assert_no_error (error);
  g_assert_cmpint (out.label, ==, 7);
  g_assert_true (shoal_shape_equal (&out.shape, &in.shape));
  g_assert_cmpint (out.kind, ==, SHOAL_RECORD_PIXELS);
  g_assert_null (out.floats);
  g_assert_null (out.targets);
  g_assert_cmpmem (out.pixels, 24, px, 24);

  /* the same codecs again, smaller record: nothing of the first may remain */
  ShoalRecordView in2 = { .label = -1, .shape = shoal_shape_make (1, 3),
                          .kind = SHOAL_RECORD_PIXELS, .pixels = px + 5 };
  g_assert_true (shoal_record_codec_encode (enc, &in2, &bytes, &len, &error));
  g_assert_true (shoal_record_codec_decode (dec, bytes, len, "r2", &out, &error));
  g_assert_no_error (error);
  g_assert_cmpint (out.label, ==, -1);
  g_assert_cmpint (out.shape.ndim, ==, 1);
  g_assert_cmpint (out.shape.dim[0], ==, 3);
  g_assert_cmpmem (out.pixels, 3, px + 5, 3);

  /* the conversion used by the input layer */
  float f[3];
  shoal_record_to_floats (&out, 0.5f, -1.0f, f);
  for (int i = 0; i < 3; i++)
    g_assert_cmpfloat (f[i], ==, px[5 + i] * 0.5f - 1.0f);

  shoal_record_codec_free (enc);
  shoal_record_codec_free (dec);
}

static void
test_record_roundtrip_floats (void)
{
  ShoalRecordCodec *codec = shoal_record_codec_new ();
  GError *error = NULL;
  const guint8 *bytes;
  gsize len;
  const float x[5] = { 1.5f, -2.25f, 0, 3e10f, -1e-20f }, t[2] = { 0.25f, 9 };
  ShoalRecordView in = { .label = 3, .shape = shoal_shape_make (1, 5), .kind = SHOAL_RECORD_FLOATS,
                         .floats = x, .targets = t, .ntargets = 2 }, out;

  g_assert_true (shoal_record_codec_encode (codec, &in, &bytes, &len, &error));
  g_assert_no_error (error);
  /* the codec's own output buffer is reused by decode: decode a copy */
  guint8 *copy = g_memdup2 (bytes, len);
  g_assert_true (shoal_record_codec_decode (codec, copy, len, "f", &out, &error));
  g_assert_no_error (error);
  g_free (copy);
  g_assert_cmpint (out.label, ==, 3);
  g_assert_cmpint (out.kind, ==, SHOAL_RECORD_FLOATS);
  g_assert_null (out.pixels);
  g_assert_cmpmem (out.floats, sizeof x, x, sizeof x);
  g_assert_cmpuint (out.ntargets, ==, 2);
  g_assert_cmpmem (out.targets, sizeof t, t, sizeof t);

  /* a float record then a pixel record through one encoder */
  guint8 px[2] = { 1, 2 };
  ShoalRecordView in2 = { .label = 1, .shape = shoal_shape_make (1, 2), .kind = SHOAL_RECORD_PIXELS,
                          .pixels = px };
  g_assert_true (shoal_record_codec_encode (codec, &in2, &bytes, &len, &error));
  copy = g_memdup2 (bytes, len);
  g_assert_true (shoal_record_codec_decode (codec, copy, len, "p", &out, &error));
  g_assert_no_error (error);
  g_free (copy);
  g_assert_cmpint (out.kind, ==, SHOAL_RECORD_PIXELS);
  g_assert_null (out.floats);
  g_assert_null (out.targets);
  shoal_record_codec_free (codec);
}

/* Decoding must fail with SHOAL_ERROR_DATA, the message naming the record
 * and containing `part`. */
static void
assert_decode_fails (ShoalRecordCodec *codec, const void *bytes, gsize len, const char *part)
{
  ShoalRecordView out;
  GError *error = NULL;
  g_assert_false (shoal_record_codec_decode (codec, bytes, len, "db: key 0000000042", &out, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA);
  g_assert_true (g_str_has_prefix (error->message, "db: key 0000000042: "));
  if (part != NULL && strstr (error->message, part) == NULL)
    g_error ("'%s' not in error '%s'", part, error->message);
  g_error_free (error);
}

static void
test_record_corrupt (void)
{
  ShoalRecordCodec *codec = shoal_record_codec_new ();
  const guint8 *bytes;
  gsize len;
  GError *error = NULL;
  guint8 px[6] = { 1, 2, 3, 4, 5, 6 };
  ShoalRecordView in = { .label = 2, .shape = shoal_shape_make (2, 2, 3), .kind = SHOAL_RECORD_PIXELS,
                         .pixels = px };
  g_assert_true (shoal_record_codec_encode (codec, &in, &bytes, &len, &error));
  guint8 *good = g_memdup2 (bytes, len);

  /* every truncation fails, none hangs (stock ThriftMemoryBuffer spins) */
  for (gsize cut = 0; cut < len; cut++)
    assert_decode_fails (codec, good, cut, NULL);
  /* stray bytes after the stop field */
  guint8 *longer = g_malloc (len + 3);
  memcpy (longer, good, len);
  memset (longer + len, 0, 3);
  assert_decode_fails (codec, longer, len + 3, "stray");
  g_free (longer);
  /* bytes that are no Record at all; seeded garbage must never crash */
  const char *text = "this is not a thrift record at all";
  assert_decode_fails (codec, text, strlen (text), "not a Record");
  GRand *rand = g_rand_new_with_seed (5);
  guint8 junk[64];
  for (int trial = 0; trial < 2000; trial++)
    {
      gsize n = (gsize) g_rand_int_range (rand, 1, sizeof junk);
      for (gsize i = 0; i < n; i++)
        junk[i] = (guint8) g_rand_int (rand);
      if (trial % 2)
        {
          /* flip one byte of a good record instead */
          n = len;
          memcpy (junk, good, len);
          junk[g_rand_int_range (rand, 0, (gint32) len)] ^= (guint8) g_rand_int_range (rand, 1, 256);
        }
      ShoalRecordView out;
      if (!shoal_record_codec_decode (codec, junk, n, "junk", &out, &error))
        {
          g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA);
          g_clear_error (&error);
        }
      else
        /* whatever decodes is self-consistent */
        g_assert_cmpuint (shoal_shape_count (&out.shape), >, 0);
    }
  g_rand_free (rand);
  g_free (good);

  /* hand-made records that decode but are inconsistent */
  const gint32 dims[4] = { 2, 3, 1, 1 }, zero[2] = { 2, 0 };
  float fl[6] = { 0 };
  struct { const char *part; int ndim; const gint32 *dims; int px_len, fl_len; } cases[] = {
    { "needs 6 pixel bytes, record holds 5", 2, dims, 5, -1 },
    { "needs 24 float bytes, record holds 20", 2, dims, -1, 20 },
    { "neither pixels nor floats", 2, dims, -1, -1 },
    { "both pixels and floats", 2, dims, 6, 24 },
    { "no shape", 0, NULL, 6, -1 },
    { "shape has 4 dims", 4, dims, 6, -1 },
    { "shape dim 1 is 0", 2, zero, 6, -1 },
  };
  for (gsize c = 0; c < G_N_ELEMENTS (cases); c++)
    {
      GByteArray *b = g_byte_array_new ();
      put_field (b, T_I32, 1);
      put_be32 (b, 4);
      if (cases[c].dims != NULL)
        put_shape (b, cases[c].ndim, cases[c].dims);
      if (cases[c].px_len >= 0)
        put_binary (b, 3, px, (guint32) cases[c].px_len);
      if (cases[c].fl_len >= 0)
        put_binary (b, 4, fl, (guint32) cases[c].fl_len);
      put_u8 (b, 0);
      assert_decode_fails (codec, b->data, b->len, cases[c].part);
      g_byte_array_unref (b);
    }

  /* and a hand-made consistent one decodes: the wire format is Thrift's */
  GByteArray *b = g_byte_array_new ();
  put_field (b, T_I32, 1);
  put_be32 (b, 9);
  put_shape (b, 2, dims);
  put_field (b, 6 /* i16, unknown field: skipped */, 99);
  put_be16 (b, 1);
  put_binary (b, 3, px, 6);
  put_u8 (b, 0);
  ShoalRecordView out;
  g_assert_true (shoal_record_codec_decode (codec, b->data, b->len, "hand", &out, &error));
  g_assert_no_error (error);
  g_assert_cmpint (out.label, ==, 9);
  g_assert_cmpmem (out.pixels, 6, px, 6);
  g_byte_array_unref (b);

  /* what the hardened protocol (rpc/thrift_protocol.c) refuses before the
   * generated reader could leak or crash on it */
  for (int c = 0; c < 4; c++)
    {
      static const char *const parts[] = {
        "field 2 is a list of byte, not of i32",   /* read as i32 regardless */
        "a field declares 12 bytes",               /* 3 dims, 2 present */
        "field 3 appears twice",
        "unknown element type 1",
      };
      b = g_byte_array_new ();
      if (c == 0)
        {
          put_field (b, T_LIST, 2);
          put_u8 (b, 3 /* byte */);
          put_be32 (b, 2);
          put_be32 (b, 0x02030000);
        }
      else if (c == 1)
        {
          put_field (b, T_LIST, 2);
          put_u8 (b, T_I32);
          put_be32 (b, 3);
          put_be32 (b, 2);
          put_be32 (b, 3);
        }
      else if (c == 2)
        {
          put_shape (b, 2, dims);
          put_binary (b, 3, px, 6);
          put_binary (b, 3, px, 6);
        }
      else
        {
          put_field (b, T_LIST, 7);
          put_u8 (b, 1 /* void */);
          put_be32 (b, 0);
        }
      put_u8 (b, 0);
      assert_decode_fails (codec, b->data, b->len, parts[c]);
      g_byte_array_unref (b);
    }

  /* the encoder refuses what it could not write consistently */
  ShoalRecordView bad = { .shape = shoal_shape_make (1, 3), .kind = SHOAL_RECORD_FLOATS };
  g_assert_false (shoal_record_codec_encode (codec, &bad, &bytes, &len, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA);
  g_clear_error (&error);
  bad = (ShoalRecordView) { .shape = shoal_shape_make (4, 1, 1, 1, 1), .pixels = px };
  g_assert_false (shoal_record_codec_encode (codec, &bad, &bytes, &len, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA);
  g_clear_error (&error);
  shoal_record_codec_free (codec);
}

/* ---- datasets ----------------------------------------------------------- */

static void
test_dataset_write_read (void)
{
  char *dir = tmp_dir ();
  char *path = g_build_filename (dir, "ds", NULL);
  GError *error = NULL;
  const guint64 n = 3000;

  /* 64 KiB map, 100-record batches: ~700 KB of values must grow it */
  ShoalDatasetWriter *w = shoal_dataset_writer_new_full (path, 1, 100, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (shoal_dataset_writer_map_size (w), ==, 64 << 10);
  guint8 value[400];
  for (guint64 i = 0; i < n; i++)
    {
      size_t size = 100 + i % 300;
      for (size_t j = 0; j < size; j++)
        value[j] = pixel_of (i, j);
      g_assert_true (shoal_dataset_writer_put (w, value, size, &error));
      g_assert_no_error (error);
    }
  g_assert_cmpuint (shoal_dataset_writer_count (w), ==, n);
  g_assert_true (shoal_dataset_writer_finish (w, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (shoal_dataset_writer_n_grows (w), >=, 1);
  g_assert_cmpuint (shoal_dataset_writer_map_size (w), >, 64 << 10);
  shoal_dataset_writer_free (w);

  ShoalDataset *ds = shoal_dataset_open (path, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (shoal_dataset_count (ds), ==, n);
  g_assert_cmpstr (shoal_dataset_path (ds), ==, path);
  ShoalDatasetCursor *cur = shoal_dataset_cursor_new (ds, &error);
  g_assert_no_error (error);
  shoal_dataset_unref (ds);   /* the cursor keeps it alive */

  /* random access */
  ShoalDatasetItem item;
  const guint64 probes[] = { 0, 1, 99, 100, 1234, n - 1 };
  for (gsize p = 0; p < G_N_ELEMENTS (probes); p++)
    {
      guint64 i = probes[p];
      g_assert_true (shoal_dataset_cursor_get (cur, i, &item, &error));
      g_assert_no_error (error);
      g_assert_cmpuint (item.index, ==, i);
      g_assert_cmpuint (item.size, ==, 100 + i % 300);
      for (size_t j = 0; j < item.size; j++)
        g_assert_cmpuint (((const guint8 *) item.data)[j], ==, pixel_of (i, j));
    }
  g_assert_cmpstr (item.key, ==, "0000002999");
  g_assert_false (shoal_dataset_cursor_get (cur, n, &item, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA);
  g_assert_nonnull (strstr (error->message, "no record 3000"));
  g_clear_error (&error);

  /* sequential, in index order, then the end; then from a seek */
  guint64 seen = 0;
  while (shoal_dataset_cursor_next (cur, &item, &error))
    {
      g_assert_cmpuint (item.index, ==, seen);
      g_assert_cmpuint (item.size, ==, 100 + seen % 300);
      g_assert_cmpuint (((const guint8 *) item.data)[7], ==, pixel_of (seen, 7));
      seen++;
    }
  g_assert_no_error (error);
  g_assert_cmpuint (seen, ==, n);
  shoal_dataset_cursor_seek (cur, 2998);
  g_assert_true (shoal_dataset_cursor_next (cur, &item, &error));
  g_assert_cmpuint (item.index, ==, 2998);
  g_assert_true (shoal_dataset_cursor_next (cur, &item, &error));
  g_assert_false (shoal_dataset_cursor_next (cur, &item, &error));
  g_assert_no_error (error);
  shoal_dataset_cursor_free (cur);

  /* a writer never writes over records */
  w = shoal_dataset_writer_new (path, &error);
  g_assert_null (w);
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA);
  g_assert_nonnull (strstr (error->message, "already holds 3000 records"));
  g_clear_error (&error);

  shoal_test_remove_tree (dir);
  g_free (path);
  g_free (dir);
}

static void
assert_open_fails (const char *path, const char *part)
{
  GError *error = NULL;
  ShoalDataset *ds = shoal_dataset_open (path, &error);
  g_assert_null (ds);
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA);
  if (!g_str_has_prefix (error->message, path) || strstr (error->message, part) == NULL)
    g_error ("expected '%s: ...%s...', got '%s'", path, part, error->message);
  g_error_free (error);
}

static void
test_dataset_open_errors (void)
{
  char *dir = tmp_dir ();
  char *missing = g_build_filename (dir, "missing", NULL);
  char *file = g_build_filename (dir, "file", NULL);
  char *nodata = g_build_filename (dir, "nodata", NULL);
  char *garbage = g_build_filename (dir, "garbage", NULL);
  char *garbage_data = g_build_filename (garbage, "data.mdb", NULL);
  char *empty = g_build_filename (dir, "empty", NULL);
  char *badkeys = g_build_filename (dir, "badkeys", NULL);
  GError *error = NULL;

  assert_open_fails (missing, "No such file or directory");
  write_file (file, "x", 1, FALSE);
  assert_open_fails (file, "not a dataset");
  g_mkdir (nodata, 0755);
  assert_open_fails (nodata, "no data.mdb");
  g_mkdir (garbage, 0755);
  char junk[8192];
  memset (junk, 'j', sizeof junk);
  write_file (garbage_data, junk, sizeof junk, FALSE);
  assert_open_fails (garbage, "not an LMDB dataset");

  ShoalDatasetWriter *w = shoal_dataset_writer_new (empty, &error);
  g_assert_no_error (error);
  g_assert_true (shoal_dataset_writer_finish (w, &error));
  shoal_dataset_writer_free (w);
  assert_open_fails (empty, "dataset is empty (0 records)");

  /* records dropped before a commit are not in the file */
  w = shoal_dataset_writer_new (badkeys, &error);
  g_assert_true (shoal_dataset_writer_put (w, "abc", 3, &error));
  shoal_dataset_writer_free (w);
  assert_open_fails (badkeys, "empty");

  /* an LMDB whose keys are not record indices */
  MDB_env *env;
  MDB_txn *txn;
  MDB_dbi dbi;
  MDB_val k = { 3, "foo" }, v = { 3, "bar" };
  g_assert_cmpint (mdb_env_create (&env), ==, 0);
  g_assert_cmpint (mdb_env_open (env, badkeys, 0, 0664), ==, 0);
  g_assert_cmpint (mdb_txn_begin (env, NULL, 0, &txn), ==, 0);
  g_assert_cmpint (mdb_dbi_open (txn, NULL, 0, &dbi), ==, 0);
  g_assert_cmpint (mdb_put (txn, dbi, &k, &v, 0), ==, 0);
  g_assert_cmpint (mdb_txn_commit (txn), ==, 0);
  mdb_env_close (env);
  assert_open_fails (badkeys, "not a shoal dataset: its first key is 'foo', expected '0000000000'");

  shoal_test_remove_tree (dir);
  g_free (missing);
  g_free (file);
  g_free (nodata);
  g_free (garbage);
  g_free (garbage_data);
  g_free (empty);
  g_free (badkeys);
  g_free (dir);
}

/* A dataset at path of n records of RECORD_BYTES bytes, record i all
 * bytes (i & 0xff). */
#define RECORD_BYTES 1000
static void
write_filled_dataset (const char *path, guint64 n)
{
  GError *error = NULL;
  guint8 value[RECORD_BYTES];
  ShoalDatasetWriter *w = shoal_dataset_writer_new (path, &error);
  g_assert_no_error (error);
  for (guint64 i = 0; i < n; i++)
    {
      memset (value, (int) (i & 0xff), sizeof value);
      g_assert_true (shoal_dataset_writer_put (w, value, sizeof value, &error));
    }
  g_assert_true (shoal_dataset_writer_finish (w, &error));
  g_assert_no_error (error);
  shoal_dataset_writer_free (w);
}

/* Bytes of this process's address space mapped from FILE (/proc/self/maps). */
static guint64
mapped_bytes (const char *file)
{
  char *maps = NULL;
  guint64 total = 0;
  g_assert_true (g_file_get_contents ("/proc/self/maps", &maps, NULL, NULL));
  char **lines = g_strsplit (maps, "\n", -1);
  for (char **l = lines; *l != NULL; l++)
    {
      guint64 begin, end;
      const char *name = strchr (*l, '/');
      if (name != NULL && strcmp (name, file) == 0
          && sscanf (*l, "%" G_GINT64_MODIFIER "x-%" G_GINT64_MODIFIER "x", &begin, &end) == 2)
        total += end - begin;
    }
  g_strfreev (lines);
  g_free (maps);
  return total;
}

/* A reader maps the pages in use, not the 256 MiB and more the writer
 * set aside: every worker maps its train and test sets, and under
 * ulimit -v that address space is what runs out first. */
static void
test_dataset_map_size (void)
{
  char *dir = tmp_dir ();
  char *path = g_build_filename (dir, "ds", NULL);
  GError *error = NULL;

  write_filled_dataset (path, 300);

  char *real = realpath (path, NULL);
  char *file = g_build_filename (real, "data.mdb", NULL);
  GStatBuf st;
  g_assert_cmpint (g_stat (file, &st), ==, 0);
  ShoalDataset *ds = shoal_dataset_open (path, &error);
  g_assert_no_error (error);
  guint64 mapped = mapped_bytes (file);
  g_assert_cmpuint (mapped, >, 0);
  g_assert_cmpuint (mapped, <=, ((guint64) st.st_size + 4095) / 4096 * 4096);
  g_assert_cmpuint (mapped, <, 16u << 20);

  /* every record, the last included, reads through the smaller map */
  ShoalDatasetCursor *cur = shoal_dataset_cursor_new (ds, &error);
  g_assert_no_error (error);
  ShoalDatasetItem item;
  for (guint64 i = 0; i < 300; i += 299)
    {
      g_assert_true (shoal_dataset_cursor_get (cur, i, &item, &error));
      g_assert_cmpuint (item.size, ==, RECORD_BYTES);
      g_assert_cmpuint (((const guint8 *) item.data)[999], ==, (guint8) i);
    }
  shoal_dataset_cursor_free (cur);
  shoal_dataset_unref (ds);
  g_assert_cmpuint (mapped_bytes (file), ==, 0);

  free (real);
  g_free (file);
  shoal_test_remove_tree (dir);
  g_free (path);
  g_free (dir);
}

/* A data.mdb cut short (a partial copy): reading a page past its end
 * through LMDB's map would be a SIGBUS, so opening says so first. */
static void
test_dataset_truncated (void)
{
  char *dir = tmp_dir ();
  char *path = g_build_filename (dir, "ds", NULL);
  char *file = g_build_filename (path, "data.mdb", NULL);
  GError *error = NULL;

  write_filled_dataset (path, 500);
  GStatBuf st;
  g_assert_cmpint (g_stat (file, &st), ==, 0);
  guint64 full = (guint64) st.st_size;
  g_assert_cmpuint (full, >, 100 * 4096);

  /* to 8 KiB (the meta pages alone) and to half: the pages in use are past the end */
  const guint64 cuts[] = { 8192, full / 2 / 4096 * 4096, full - 4096 };
  for (gsize c = 0; c < G_N_ELEMENTS (cuts); c++)
    {
      g_assert_cmpint (truncate (file, (off_t) cuts[c]), ==, 0);
      g_assert_null (shoal_dataset_open (path, &error));
      g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA);
      char *want = g_strdup_printf ("%s: truncated: the file has %" G_GUINT64_FORMAT " bytes, its pages "
                                    "in use end at byte %" G_GUINT64_FORMAT " (a partial copy or a "
                                    "damaged file)", file, cuts[c], full);
      g_assert_cmpstr (error->message, ==, want);
      g_free (want);
      g_clear_error (&error);
      /* the writer refuses it alike, rather than appending to it */
      g_assert_null (shoal_dataset_writer_new (path, &error));
      g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA);
      g_clear_error (&error);
    }
  /* shorter than the two meta pages LMDB reads first */
  const guint64 tiny[] = { 4096, 100, 0 };
  for (gsize c = 0; c < G_N_ELEMENTS (tiny); c++)
    {
      g_assert_cmpint (truncate (file, (off_t) tiny[c]), ==, 0);
      g_assert_null (shoal_dataset_open (path, &error));
      g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA);
      char *want = g_strdup_printf ("%s: truncated: the file has %" G_GUINT64_FORMAT " bytes, fewer "
                                    "than LMDB's two meta pages (8192 bytes at least)", file, tiny[c]);
      g_assert_cmpstr (error->message, ==, want);
      g_free (want);
      g_clear_error (&error);
    }

  shoal_test_remove_tree (dir);
  g_free (file);
  g_free (path);
  g_free (dir);
}

/* ---- IDX import --------------------------------------------------------- */

typedef struct {
  char *dir, *images, *labels, *out;
} IdxFiles;

/* n images of h x w, labels i % 10; `keep_images` of them actually written. */
static void
idx_files_make (IdxFiles *f, const char *suffix, guint32 n, guint32 keep_images, int h, int w,
                guint32 images_magic, guint32 nlabels)
{
  gboolean gz = g_str_has_suffix (suffix, ".gz");
  GByteArray *img = g_byte_array_new (), *lab = g_byte_array_new ();

  f->dir = tmp_dir ();
  f->images = g_strdup_printf ("%s/images%s", f->dir, suffix);
  f->labels = g_strdup_printf ("%s/labels%s", f->dir, suffix);
  f->out = g_build_filename (f->dir, "out", NULL);
  put_be32 (img, images_magic);
  put_be32 (img, n);
  put_be32 (img, (guint32) h);
  put_be32 (img, (guint32) w);
  for (guint32 i = 0; i < keep_images; i++)
    for (int j = 0; j < h * w; j++)
      put_u8 (img, pixel_of (i, (size_t) j));
  put_be32 (lab, 0x00000801);
  put_be32 (lab, nlabels);
  for (guint32 i = 0; i < nlabels; i++)
    put_u8 (lab, (guint8) (i % 10));
  write_file (f->images, img->data, img->len, gz);
  write_file (f->labels, lab->data, lab->len, gz);
  g_byte_array_unref (img);
  g_byte_array_unref (lab);
}

static void
idx_files_free (IdxFiles *f)
{
  shoal_test_remove_tree (f->dir);
  g_free (f->dir);
  g_free (f->images);
  g_free (f->labels);
  g_free (f->out);
}

static void
count_progress (guint64 done, guint64 total, gpointer user_data)
{
  guint64 *last = user_data;
  g_assert_cmpuint (done, <=, total);
  g_assert_cmpuint (done, >=, *last);
  *last = done;
}

static void
check_idx_import (const char *suffix)
{
  IdxFiles f;
  GError *error = NULL;
  ShoalImportStats stats;
  guint64 last = 0;
  const guint32 n = 1500;   /* more than one 1024-image read chunk */

  idx_files_make (&f, suffix, n, n, 5, 4, 0x00000803, n);
  g_assert_true (shoal_import_idx (f.images, f.labels, f.out, count_progress, &last, &stats, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (last, ==, n);
  g_assert_cmpuint (stats.records, ==, n);
  g_assert_cmpint (stats.kind, ==, SHOAL_RECORD_PIXELS);
  ShoalShape want = shoal_shape_make (3, 1, 5, 4);
  g_assert_true (shoal_shape_equal (&stats.shape, &want));

  ShoalDataset *ds = shoal_dataset_open (f.out, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (shoal_dataset_count (ds), ==, n);
  ShoalDatasetCursor *cur = shoal_dataset_cursor_new (ds, &error);
  ShoalRecordCodec *codec = shoal_record_codec_new ();
  for (guint32 i = 0; i < n; i += 37)
    {
      ShoalRecordView rec;
      g_assert_true (shoal_dataset_cursor_read_record (cur, codec, i, &rec, &error));
      g_assert_no_error (error);
      g_assert_cmpint (rec.label, ==, (gint32) (i % 10));
      g_assert_true (shoal_shape_equal (&rec.shape, &want));
      for (int j = 0; j < 20; j++)
        g_assert_cmpuint (rec.pixels[j], ==, pixel_of (i, (size_t) j));
    }
  shoal_record_codec_free (codec);
  shoal_dataset_cursor_free (cur);
  shoal_dataset_unref (ds);
  idx_files_free (&f);
}

static void
test_import_idx_plain (void)
{
  check_idx_import ("");
}

static void
test_import_idx_gzip (void)
{
  check_idx_import (".gz");
}

static void
assert_idx_fails (const IdxFiles *f, const char *message)
{
  GError *error = NULL;
  g_assert_false (shoal_import_idx (f->images, f->labels, f->out, NULL, NULL, NULL, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA);
  g_assert_cmpstr (error->message, ==, message);
  g_error_free (error);
  /* nothing half-written is left behind */
  char *data = g_build_filename (f->out, "data.mdb", NULL);
  g_assert_false (g_file_test (data, G_FILE_TEST_EXISTS));
  g_free (data);
}

static void
test_import_idx_errors (void)
{
  const char *suffixes[] = { "", ".gz" };
  for (gsize s = 0; s < G_N_ELEMENTS (suffixes); s++)
    {
      IdxFiles f;
      char *msg;

      idx_files_make (&f, suffixes[s], 1200, 1100, 3, 3, 0x00000803, 1200);
      msg = g_strdup_printf ("%s: truncated: expected 1200 images, file holds 1100", f.images);
      assert_idx_fails (&f, msg);
      g_free (msg);
      idx_files_free (&f);

      idx_files_make (&f, suffixes[s], 10, 10, 3, 3, 0x00000801, 10);
      msg = g_strdup_printf ("%s: not an IDX image file: magic 0x00000801, expected 0x00000803",
                             f.images);
      assert_idx_fails (&f, msg);
      g_free (msg);
      idx_files_free (&f);

      /* the two files swapped */
      idx_files_make (&f, suffixes[s], 10, 10, 3, 3, 0x00000803, 10);
      char *tmp = f.images;
      f.images = f.labels;
      f.labels = tmp;
      msg = g_strdup_printf ("%s: not an IDX label file: magic 0x00000803, expected 0x00000801",
                             f.labels);
      assert_idx_fails (&f, msg);
      g_free (msg);
      idx_files_free (&f);

      idx_files_make (&f, suffixes[s], 10, 10, 3, 3, 0x00000803, 9);
      msg = g_strdup_printf ("%s holds 10 images but %s holds 9 labels", f.images, f.labels);
      assert_idx_fails (&f, msg);
      g_free (msg);
      idx_files_free (&f);
    }

  /* a label file cut short, a header cut short, a file that is not there */
  IdxFiles f;
  idx_files_make (&f, "", 10, 10, 3, 3, 0x00000803, 10);
  GError *error = NULL;
  char *contents;
  gsize len;
  g_file_get_contents (f.labels, &contents, &len, &error);
  write_file (f.labels, contents, len - 4, FALSE);
  char *msg = g_strdup_printf ("%s: truncated: expected 10 labels, file holds 6", f.labels);
  assert_idx_fails (&f, msg);
  g_free (msg);
  write_file (f.labels, contents, 6, FALSE);
  msg = g_strdup_printf ("%s: truncated: the IDX header needs 8 bytes, file holds 6", f.labels);
  assert_idx_fails (&f, msg);
  g_free (msg);
  g_free (contents);
  g_unlink (f.labels);
  g_assert_false (shoal_import_idx (f.images, f.labels, f.out, NULL, NULL, NULL, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA);
  g_assert_nonnull (strstr (error->message, "cannot open"));
  g_clear_error (&error);
  idx_files_free (&f);
}

/* ---- CSV import --------------------------------------------------------- */

static void
test_import_csv (void)
{
  char *dir = tmp_dir ();
  char *csv = g_build_filename (dir, "d.csv", NULL);
  char *out = g_build_filename (dir, "out", NULL);
  GError *error = NULL;
  ShoalImportStats stats;
  const char *text =
    "a,b,label,c\r\n"
    "1.5, 2 ,3,-4e1\r\n"
    "\n"
    "0,0,0,0.25\n"
    "7,8,9,10";     /* no newline at the end */

  write_file (csv, text, strlen (text), FALSE);
  g_assert_true (shoal_import_csv (csv, out, 2, TRUE, NULL, NULL, &stats, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (stats.records, ==, 3);
  g_assert_cmpint (stats.kind, ==, SHOAL_RECORD_FLOATS);
  g_assert_cmpint (stats.shape.ndim, ==, 1);
  g_assert_cmpint (stats.shape.dim[0], ==, 3);

  ShoalDataset *ds = shoal_dataset_open (out, &error);
  g_assert_no_error (error);
  ShoalDatasetCursor *cur = shoal_dataset_cursor_new (ds, &error);
  ShoalRecordCodec *codec = shoal_record_codec_new ();
  const float want[3][3] = { { 1.5f, 2, -40 }, { 0, 0, 0.25f }, { 7, 8, 10 } };
  const int labels[3] = { 3, 0, 9 };
  for (int i = 0; i < 3; i++)
    {
      ShoalRecordView rec;
      g_assert_true (shoal_dataset_cursor_read_record (cur, codec, (guint64) i, &rec, &error));
      g_assert_no_error (error);
      g_assert_cmpint (rec.label, ==, labels[i]);
      g_assert_cmpmem (rec.floats, sizeof want[i], want[i], sizeof want[i]);
    }
  shoal_record_codec_free (codec);
  shoal_dataset_cursor_free (cur);
  shoal_dataset_unref (ds);
  shoal_test_remove_tree (out);

  /* no label column, gzip input */
  char *gz = g_build_filename (dir, "d.csv.gz", NULL);
  write_file (gz, "1,2\n3,4\n", 8, TRUE);
  g_assert_true (shoal_import_csv (gz, out, -1, FALSE, NULL, NULL, &stats, &error));
  g_assert_no_error (error);
  g_assert_cmpuint (stats.records, ==, 2);
  g_assert_cmpint (stats.shape.dim[0], ==, 2);
  shoal_test_remove_tree (out);

  struct { const char *text; int label_column; const char *part; } bad[] = {
    { "1,2,3\n4,x5,6\n", 0, ":2: column 1: 'x5' is not a number" },
    { "1,2,3\n4,5\n", 0, ":2: 2 columns, the first row has 3" },
    { "1.5,2,3\n", 0, ":1: column 0: label '1.5' is not an integer >= 0" },
    { "1,2\n", 2, ":1: label column 2 but the row has 2 columns" },
    { "1,,3\n", 0, ":1: column 1: '' is not a number" },
    /* NaN and infinities import as errors naming line and column */
    { "1,2,3\n4,5, nan\n", 0, ":2: column 2: 'nan' is not a number (NaN cannot be trained on)" },
    { "1,2,3\n4,NaN,6\n", 0, ":2: column 1: 'NaN' is not a number (NaN cannot be trained on)" },
    { "1,2,3\n4,5,6\n7,-inf,9\n", 0, ":3: column 1: '-inf' is infinite (cannot be trained on)" },
    { "1,Infinity,3\n", 0, ":1: column 1: 'Infinity' is infinite (cannot be trained on)" },
    { "1,2,1e400\n", 0, ":1: column 2: '1e400' is out of range" },
    { "1,2,-1e39\n", 0, ":1: column 2: '-1e39' is out of a float's range (+-3.4e38)" },
    { "nan,2,3\n", 0, ":1: column 0: 'nan' is not a number (NaN cannot be trained on)" },
    { "inf,2,3\n", 0, ":1: column 0: 'inf' is infinite (cannot be trained on)" },
    { "\n\n", 0, ": no data rows" },
  };
  for (gsize b = 0; b < G_N_ELEMENTS (bad); b++)
    {
      write_file (csv, bad[b].text, strlen (bad[b].text), FALSE);
      g_assert_false (shoal_import_csv (csv, out, bad[b].label_column, FALSE, NULL, NULL, NULL,
                                        &error));
      g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA);
      char *want_msg = g_strconcat (csv, bad[b].part, NULL);
      g_assert_cmpstr (error->message, ==, want_msg);
      g_free (want_msg);
      g_clear_error (&error);
      char *data = g_build_filename (out, "data.mdb", NULL);
      g_assert_false (g_file_test (data, G_FILE_TEST_EXISTS));
      g_free (data);
    }

  shoal_test_remove_tree (dir);
  g_free (gz);
  g_free (csv);
  g_free (out);
  g_free (dir);
}

/* ---- the lmdb_input layer ----------------------------------------------- */

typedef struct {
  char *dir, *train, *test;
  GPtrArray *confs;   /* a conf must outlive its net: all freed at the end */
  ShoalNet *net;
} InputFixture;

static const int H = 2, W = 3;

static void
input_fixture_datasets (InputFixture *fx, guint64 ntrain, guint64 ntest)
{
  fx->dir = tmp_dir ();
  fx->train = g_build_filename (fx->dir, "train", NULL);
  fx->test = g_build_filename (fx->dir, "test", NULL);
  make_pixel_dataset (fx->train, ntrain, H, W);
  if (ntest > 0)
    make_pixel_dataset (fx->test, ntest, H, W);
}

/* Builds a one-layer net reading the fixture's datasets; `extra` adds keys. */
static ShoalNet *
input_net (InputFixture *fx, const char *extra, int shard, int nshards, guint64 seed,
           GError **error)
{
  char *text = g_strdup_printf ("[layer data]\ntype = lmdb_input\ntrain = %s\ntest = %s\n%s\n",
                                fx->train, fx->test, extra);
  ShoalNetOptions opts = { .seed = seed, .shard_index = shard, .shard_count = nshards };
  ShoalConf *conf = shoal_conf_load_data (text, "test.conf", error);
  g_free (text);
  g_assert_nonnull (conf);
  if (fx->confs == NULL)
    fx->confs = g_ptr_array_new_with_free_func ((GDestroyNotify) shoal_conf_free);
  g_ptr_array_add (fx->confs, conf);
  return shoal_net_new (conf, &opts, error);
}

static void
input_fixture_free (InputFixture *fx)
{
  shoal_net_free (fx->net);
  if (fx->confs != NULL)
    g_ptr_array_unref (fx->confs);
  shoal_test_remove_tree (fx->dir);
  g_free (fx->dir);
  g_free (fx->train);
  g_free (fx->test);
}

/* Labels (= record indices) of the next `n` training examples. */
static GArray *
next_train_labels (ShoalNet *net, guint n)
{
  ShoalLayer *in = shoal_net_input (net);
  GArray *labels = g_array_new (FALSE, FALSE, sizeof (guint));
  while (labels->len < n)
    {
      shoal_net_forward (net, SHOAL_PHASE_TRAIN);
      int rows = shoal_tensor_rows (&in->out);
      g_assert_cmpint (rows, ==, in->out.shape.dim[0]);
      g_assert_cmpint (shoal_tensor_rows (&in->label), ==, rows);
      for (int r = 0; r < rows && labels->len < n; r++)
        {
          guint label = (guint) in->label.data[r];
          /* the example is the record with that index */
          g_assert_cmpfloat_with_epsilon (in->out.data[(size_t) r * H * W + 4],
                                          pixel_of (label, 4) / 255.0f, 1e-6);
          g_array_append_val (labels, label);
        }
    }
  return labels;
}

static int
cmp_uint (gconstpointer a, gconstpointer b)
{
  guint x = *(const guint *) a, y = *(const guint *) b;
  return x < y ? -1 : x > y;
}

static void
test_input_shards (void)
{
  InputFixture fx = { 0 };
  const guint64 n = 103;
  const int nshards = 4;
  GError *error = NULL;
  guint8 *owner = g_new0 (guint8, n);

  input_fixture_datasets (&fx, n, 10);
  for (int s = 0; s < nshards; s++)
    {
      ShoalNet *net = input_net (&fx, "batch_size = 8", s, nshards, 1, &error);
      g_assert_no_error (error);
      ShoalLayer *in = shoal_net_input (net);
      g_assert_cmpstr (in->ops->type, ==, "lmdb_input");
      gint64 mine = in->ops->num_records (in, SHOAL_PHASE_TRAIN);
      g_assert_cmpint (mine, ==, (n - (guint64) s + nshards - 1) / nshards);
      /* one epoch of this shard: each of its records exactly once */
      GArray *labels = next_train_labels (net, (guint) mine);
      for (guint i = 0; i < labels->len; i++)
        {
          guint rec = g_array_index (labels, guint, i);
          g_assert_cmpuint (rec, <, n);
          g_assert_cmpuint (rec % nshards, ==, (guint) s);
          g_assert_cmpuint (owner[rec], ==, 0);
          owner[rec] = (guint8) (s + 1);
        }
      g_array_unref (labels);
      shoal_net_free (net);
    }
  for (guint64 i = 0; i < n; i++)
    g_assert_cmpuint (owner[i], ==, i % nshards + 1);
  g_free (owner);
  input_fixture_free (&fx);
}

/* Labels of the next test batch. */
static GArray *
next_test_labels (ShoalNet *net)
{
  ShoalLayer *in = shoal_net_input (net);
  shoal_net_forward (net, SHOAL_PHASE_TEST);
  GArray *labels = g_array_new (FALSE, FALSE, sizeof (guint));
  for (int r = 0; r < shoal_tensor_rows (&in->label); r++)
    {
      guint label = (guint) in->label.data[r];
      g_array_append_val (labels, label);
    }
  return labels;
}

/* One net moved between three units (the virtual clock's units borrow
 * one net, emulate/unit_state.h): each unit's state saved after the move
 * (fresh) and loaded at every visit gives exactly the batches of the
 * unit's own net - its shard, its shuffles (its group and worker seed
 * them), across epochs, and its test cursor. */
/* A saved state whose data cursor is damaged is refused with
 * SHOAL_ERROR_DATA (net.h).  The cursor's epoch count decides how many
 * shuffles of the shard a load replays: one flipped bit of it (2^20 more
 * epochs here, 2^40 for a higher one) loaded as a valid cursor - a
 * different data order silently, or hours of replay - before it carried
 * a checksum. */
static void
test_input_damaged_state (void)
{
  InputFixture fx = { 0 };
  GError *error = NULL;
  input_fixture_datasets (&fx, 20, 4);
  fx.net = input_net (&fx, "batch_size = 5", 0, 1, 3, &error);
  g_assert_no_error (error);
  shoal_net_forward (fx.net, SHOAL_PHASE_TRAIN);
  GBytes *state = shoal_net_save_state (fx.net);
  gsize len = 0;
  const guint8 *good = g_bytes_get_data (state, &len);
  const guint8 *magic = memmem (good, len, "ICUR", 4);   /* the cursor's magic, little-endian */
  g_assert_nonnull (magic);
  gsize epochs_at = (gsize) (magic - good) + 8;
  g_assert_cmpuint (epochs_at + 8, <=, len);

  guint8 *damaged = g_memdup2 (good, len);
  damaged[epochs_at + 2] ^= 0x10;
  GBytes *bad = g_bytes_new_take (damaged, len);
  g_assert_false (shoal_net_load_state (fx.net, bad, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA);
  g_assert_nonnull (strstr (error->message, "[layer data] the checkpointed data cursor is damaged"));
  g_clear_error (&error);
  /* the magic itself: the same code (it was SHOAL_ERROR_CONF) */
  damaged = g_memdup2 (good, len);
  damaged[magic - good] ^= 0x01;
  GBytes *bad_magic = g_bytes_new_take (damaged, len);
  g_assert_false (shoal_net_load_state (fx.net, bad_magic, &error));
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA);
  g_clear_error (&error);
  g_assert_true (shoal_net_load_state (fx.net, state, &error));
  g_assert_no_error (error);
  g_bytes_unref (bad);
  g_bytes_unref (bad_magic);
  g_bytes_unref (state);
  input_fixture_free (&fx);
}

static void
test_input_move (void)
{
  InputFixture fx = { 0 };
  enum { UNITS = 3, VISITS = 5, BATCHES = 3 };
  const int group[UNITS] = { 0, 1, 1 }, worker[UNITS] = { 0, 0, 1 };
  GError *error = NULL;
  input_fixture_datasets (&fx, 50, 13);
  ShoalNet *own[UNITS];
  for (int u = 0; u < UNITS; u++)
    {
      char *text = g_strdup_printf ("[layer data]\ntype = lmdb_input\ntrain = %s\ntest = %s\nbatch_size = 5\n",
                                    fx.train, fx.test);
      ShoalConf *conf = shoal_conf_load_data (text, "test.conf", &error);
      g_free (text);
      g_assert_no_error (error);
      if (fx.confs == NULL)
        fx.confs = g_ptr_array_new_with_free_func ((GDestroyNotify) shoal_conf_free);
      g_ptr_array_add (fx.confs, conf);
      ShoalNetOptions opts = { .seed = 9, .shard_index = u, .shard_count = UNITS, .group = group[u],
                               .worker = worker[u] };
      own[u] = shoal_net_new (conf, &opts, &error);
      g_assert_no_error (error);
    }
  fx.net = input_net (&fx, "batch_size = 5", 0, UNITS, 9, &error);
  g_assert_no_error (error);
  GBytes *state[UNITS];
  for (int u = 0; u < UNITS; u++)
    {
      shoal_net_move (fx.net, group[u], worker[u], u, UNITS);
      state[u] = shoal_net_save_state (fx.net);
    }
  for (int v = 0; v < VISITS; v++)
    for (int u = 0; u < UNITS; u++)
      {
        shoal_net_move (fx.net, group[u], worker[u], u, UNITS);
        g_assert_true (shoal_net_load_state (fx.net, state[u], &error));
        g_assert_no_error (error);
        GArray *want = next_train_labels (own[u], BATCHES * 5), *got = next_train_labels (fx.net, BATCHES * 5);
        g_assert_cmpmem (got->data, got->len * sizeof (guint), want->data, want->len * sizeof (guint));
        g_array_unref (want);
        g_array_unref (got);
        want = next_test_labels (own[u]);
        got = next_test_labels (fx.net);
        g_assert_cmpmem (got->data, got->len * sizeof (guint), want->data, want->len * sizeof (guint));
        g_array_unref (want);
        g_array_unref (got);
        g_bytes_unref (state[u]);
        state[u] = shoal_net_save_state (fx.net);
      }
  for (int u = 0; u < UNITS; u++)
    {
      g_bytes_unref (state[u]);
      shoal_net_free (own[u]);
    }
  input_fixture_free (&fx);
}

static void
test_input_shuffle (void)
{
  InputFixture fx = { 0 };
  const guint n = 60;
  GError *error = NULL;

  input_fixture_datasets (&fx, n, 5);
  /* batch 7 does not divide 60: epochs end inside batches */
  fx.net = input_net (&fx, "batch_size = 7", 0, 1, 42, &error);
  g_assert_no_error (error);
  GArray *all = next_train_labels (fx.net, 3 * n);
  guint *e[3];
  for (int k = 0; k < 3; k++)
    {
      e[k] = g_memdup2 (&g_array_index (all, guint, k * n), n * sizeof (guint));
      guint sorted[60];
      memcpy (sorted, e[k], sizeof sorted);
      qsort (sorted, n, sizeof (guint), cmp_uint);
      for (guint i = 0; i < n; i++)
        g_assert_cmpuint (sorted[i], ==, i);   /* each epoch: every record once */
    }
  g_assert_true (memcmp (e[0], e[1], n * sizeof (guint)) != 0);
  g_assert_true (memcmp (e[1], e[2], n * sizeof (guint)) != 0);
  gboolean in_order = TRUE;
  for (guint i = 0; i < n; i++)
    in_order &= e[0][i] == i;
  g_assert_false (in_order);

  /* the same seed without the prefetch thread: the same order */
  ShoalNet *sync = input_net (&fx, "batch_size = 7\nprefetch = false", 0, 1, 42, &error);
  g_assert_no_error (error);
  GArray *again = next_train_labels (sync, 3 * n);
  g_assert_cmpmem (again->data, 3 * n * sizeof (guint), all->data, 3 * n * sizeof (guint));
  g_array_unref (again);
  shoal_net_free (sync);

  /* shuffle = false: record order, epoch after epoch */
  ShoalNet *plain = input_net (&fx, "batch_size = 7\nshuffle = false", 0, 1, 42, &error);
  g_assert_no_error (error);
  GArray *ordered = next_train_labels (plain, 2 * n);
  for (guint i = 0; i < 2 * n; i++)
    g_assert_cmpuint (g_array_index (ordered, guint, i), ==, i % n);
  g_array_unref (ordered);
  shoal_net_free (plain);

  for (int k = 0; k < 3; k++)
    g_free (e[k]);
  g_array_unref (all);
  input_fixture_free (&fx);
}

static void
test_input_test_phase (void)
{
  InputFixture fx = { 0 };
  GError *error = NULL;

  input_fixture_datasets (&fx, 40, 23);
  fx.net = input_net (&fx, "batch_size = 10", 0, 1, 3, &error);
  g_assert_no_error (error);
  ShoalLayer *in = shoal_net_input (fx.net);
  g_assert_cmpint (in->ops->num_records (in, SHOAL_PHASE_TEST), ==, 23);
  g_assert_cmpint (in->out.shape.ndim, ==, 4);
  ShoalShape want = shoal_shape_make (4, 10, 1, H, W);
  g_assert_true (shoal_shape_equal (&in->out.shape, &want));

  /* two passes of ceil(23 / 10) = 3 forwards, a train step in between */
  const int rows[] = { 10, 10, 3, 10, 10, 3 };
  guint next = 0;
  for (int f = 0; f < 6; f++)
    {
      if (f == 3)
        {
          shoal_net_forward (fx.net, SHOAL_PHASE_TRAIN);
          g_assert_cmpint (shoal_tensor_rows (&in->out), ==, 10);
        }
      shoal_net_forward (fx.net, SHOAL_PHASE_TEST);
      g_assert_cmpint (shoal_tensor_rows (&in->out), ==, rows[f]);
      g_assert_cmpint (shoal_tensor_rows (&in->label), ==, rows[f]);
      for (int r = 0; r < rows[f]; r++)
        {
          g_assert_cmpfloat (in->label.data[r], ==, (float) next);
          g_assert_cmpfloat_with_epsilon (in->out.data[(size_t) r * H * W + 5],
                                          pixel_of (next, 5) / 255.0f, 1e-6);
          next = (next + 1) % 23;
        }
    }
  /* the train stream is not disturbed by testing: full batches */
  shoal_net_forward (fx.net, SHOAL_PHASE_TRAIN);
  g_assert_cmpint (shoal_tensor_rows (&in->out), ==, 10);

  /* the test set is not sharded: shard 1 of 2 still tests on all 23
   * records (records 0..9, 10..19, 20..22), while it trains on its half */
  ShoalNet *half = input_net (&fx, "batch_size = 10", 1, 2, 3, &error);
  g_assert_no_error (error);
  in = shoal_net_input (half);
  g_assert_cmpint (in->ops->num_records (in, SHOAL_PHASE_TEST), ==, 23);
  g_assert_cmpint (in->ops->num_records (in, SHOAL_PHASE_TRAIN), ==, 20);
  shoal_net_forward (half, SHOAL_PHASE_TEST);
  g_assert_cmpfloat (in->label.data[1], ==, 1);
  shoal_net_forward (half, SHOAL_PHASE_TEST);
  shoal_net_forward (half, SHOAL_PHASE_TEST);
  g_assert_cmpint (shoal_tensor_rows (&in->out), ==, 3);
  g_assert_cmpfloat (in->label.data[2], ==, 22);
  shoal_net_free (half);
  input_fixture_free (&fx);
}

static void
test_input_scaling (void)
{
  InputFixture fx = { 0 };
  GError *error = NULL;

  input_fixture_datasets (&fx, 5, 5);
  fx.net = input_net (&fx, "batch_size = 5\nshuffle = false\nscale = 0.5\nmean = 3\nstd = 4", 0, 1,
                      0, &error);
  g_assert_no_error (error);
  ShoalLayer *in = shoal_net_input (fx.net);
  shoal_net_forward (fx.net, SHOAL_PHASE_TRAIN);
  for (int r = 0; r < 5; r++)
    for (int j = 0; j < H * W; j++)
      g_assert_cmpfloat_with_epsilon (in->out.data[r * H * W + j],
                                      (pixel_of ((guint64) r, (size_t) j) * 0.5f - 3) / 4, 1e-5);
  shoal_net_free (fx.net);

  /* defaults: pixels / 255 */
  fx.net = input_net (&fx, "batch_size = 5\nshuffle = false\nmean = 0.5", 0, 1, 0, &error);
  g_assert_no_error (error);
  in = shoal_net_input (fx.net);
  shoal_net_forward (fx.net, SHOAL_PHASE_TEST);
  for (int j = 0; j < H * W; j++)
    g_assert_cmpfloat_with_epsilon (in->out.data[3 * H * W + j], pixel_of (3, (size_t) j) / 255.0f - 0.5f,
                                    1e-6);
  input_fixture_free (&fx);
}

static void
test_input_errors (void)
{
  InputFixture fx = { 0 };
  GError *error = NULL;

  input_fixture_datasets (&fx, 30, 0);
  /* no test dataset at that path */
  ShoalNet *net = input_net (&fx, "batch_size = 4", 0, 1, 0, &error);
  g_assert_null (net);
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA);
  g_assert_true (g_str_has_prefix (error->message, "test.conf:"));
  g_assert_nonnull (strstr (error->message, "[layer data] test: "));
  g_assert_nonnull (strstr (error->message, fx.test));
  g_clear_error (&error);

  /* a test set whose records hold another count of values: set-up names
   * the key (another shape of the same count reads as the training shape:
   * a CSV of pixels for an image model) */
  ShoalDatasetWriter *w = shoal_dataset_writer_new (fx.test, &error);
  guint8 px[12] = { 0 };
  ShoalRecordView rec = { .shape = shoal_shape_make (3, 1, H, W), .pixels = px };
  for (int i = 0; i < 5; i++)
    {
      if (i == 2)
        rec.shape = shoal_shape_make (3, 1, W, H);
      if (i == 3)
        rec.shape = shoal_shape_make (3, 1, 2, 2);
      g_assert_true (shoal_dataset_writer_put_record (w, &rec, &error));
    }
  g_assert_true (shoal_dataset_writer_finish (w, &error));
  shoal_dataset_writer_free (w);
  net = input_net (&fx, "batch_size = 4", 0, 1, 0, &error);
  g_assert_null (net);
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA);
  if (strstr (error->message, "key 0000000003: record is 1x2x2 pixels, the first record is 1x2x3 pixels") == NULL)
    g_error ("unexpected: %s", error->message);
  g_clear_error (&error);

  /* more shards than training records: an empty shard is an error */
  shoal_test_remove_tree (fx.train);
  make_pixel_dataset (fx.train, 2, H, W);
  net = input_net (&fx, "batch_size = 4", 2, 3, 0, &error);
  g_assert_null (net);
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
  g_assert_nonnull (strstr (error->message, "shard 2 of 3 is empty"));
  g_clear_error (&error);

  /* batch_size is required */
  net = input_net (&fx, "", 0, 1, 0, &error);
  g_assert_null (net);
  g_assert_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF);
  g_clear_error (&error);
  input_fixture_free (&fx);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  shoal_data_register_layers ();
  shoal_record_types_init ();
  g_test_add_func ("/data/record/roundtrip-pixels", test_record_roundtrip_pixels);
  g_test_add_func ("/data/record/roundtrip-floats", test_record_roundtrip_floats);
  g_test_add_func ("/data/record/corrupt", test_record_corrupt);
  g_test_add_func ("/data/dataset/write-read", test_dataset_write_read);
  g_test_add_func ("/data/dataset/open-errors", test_dataset_open_errors);
  g_test_add_func ("/data/dataset/truncated", test_dataset_truncated);
  g_test_add_func ("/data/dataset/map-size", test_dataset_map_size);
  g_test_add_func ("/data/import/idx-plain", test_import_idx_plain);
  g_test_add_func ("/data/import/idx-gzip", test_import_idx_gzip);
  g_test_add_func ("/data/import/idx-errors", test_import_idx_errors);
  g_test_add_func ("/data/import/csv", test_import_csv);
  g_test_add_func ("/data/lmdb-input/shards", test_input_shards);
  g_test_add_func ("/data/lmdb-input/shuffle", test_input_shuffle);
  g_test_add_func ("/data/lmdb-input/move", test_input_move);
  g_test_add_func ("/data/lmdb-input/damaged-state", test_input_damaged_state);
  g_test_add_func ("/data/lmdb-input/test-phase", test_input_test_phase);
  g_test_add_func ("/data/lmdb-input/scaling", test_input_scaling);
  g_test_add_func ("/data/lmdb-input/errors", test_input_errors);
  return g_test_run ();
}
