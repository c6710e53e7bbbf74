/* Text files to sequence datasets and their vocabulary (see text.h).
 *
 * The whole corpus is held in memory once: character models train on a
 * few to a few hundred megabytes, and the vocabulary and the split need
 * the whole text before the first record is written. */
#include "data/text.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>
#include <zlib.h>

#include "core/error.h"
#include "core/memory_budget.h"
#include "data/dataset.h"

#define READ_CHUNK (1u << 20)

/* The most text one import holds: a GByteArray's length is a guint, and
 * the corpus (with the records written from it) must fit in memory: a
 * quarter of it, as the array grows by doubling (its old and new buffer
 * then take up to three times what it holds).  An endless input (/dev/zero, a
 * pipe that never ends) stops here with an error instead of ending the
 * process in GLib's overflow or out-of-memory abort. */
static guint64
max_text_bytes (void)
{
  guint64 limit = G_MAXUINT32 - READ_CHUNK;
  guint64 machine = shoal_memory_of_machine ();
  return machine > 0 ? MIN (limit, machine / 4) : limit;
}

/* Appends the (gzip or plain) file to text, up to `limit` bytes in all. */
static gboolean
read_file (const char *path, GByteArray *text, guint64 limit, GError **error)
{
  errno = 0;
  gzFile f = gzopen (path, "rb");
  if (f == NULL)
    {
      int e = errno;
      g_set_error (error, SHOAL_ERROR, e == ENOENT ? SHOAL_ERROR_DATA : SHOAL_ERROR_IO,
                   "%s: cannot open: %s", path, e ? g_strerror (e) : "out of memory");
      return FALSE;
    }
  guint8 *buf = g_malloc (READ_CHUNK);
  gboolean ok = TRUE;
  for (;;)
    {
      int n = gzread (f, buf, READ_CHUNK);
      if (n < 0)
        {
          int errnum;
          const char *msg = gzerror (f, &errnum);
          g_set_error (error, SHOAL_ERROR, errnum == Z_ERRNO ? SHOAL_ERROR_IO : SHOAL_ERROR_DATA,
                       "%s: read error: %s", path, errnum == Z_ERRNO ? g_strerror (errno) : msg);
          ok = FALSE;
          break;
        }
      if (n == 0)
        break;
      if ((guint64) text->len + (guint64) n > limit)
        {
          char *most = g_format_size_full (limit, G_FORMAT_SIZE_IEC_UNITS);
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                       "%s: the text passes %s, the most one import holds (the whole corpus is held in "
                       "memory: under 4 GiB and a quarter of this machine's); give less text", path, most);
          g_free (most);
          ok = FALSE;
          break;
        }
      g_byte_array_append (text, buf, (guint) n);
    }
  g_free (buf);
  gzclose (f);
  return ok;
}

/* The file's bytes [from, text->len) are text: no NUL, valid UTF-8. */
static gboolean
check_text (const char *path, const GByteArray *text, gsize from, GError **error)
{
  const guint8 *p = text->data + from;
  gsize n = text->len - from;
  const char *end = NULL;
  const void *nul = memchr (p, 0, n);
  if (nul != NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                   "%s: not text: a NUL byte at offset %zu; for a byte-level corpus use --bytes", path,
                   (gsize) ((const guint8 *) nul - p));
      return FALSE;
    }
  if (!g_utf8_validate ((const char *) p, (gssize) n, &end))
    {
      gsize at = (gsize) ((const guint8 *) end - p);
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                   "%s: not UTF-8 text: byte 0x%02x at offset %zu; for a byte-level corpus use --bytes",
                   path, p[at], at);
      return FALSE;
    }
  return TRUE;
}

static void
remove_dataset (const char *dir)
{
  static const char *const names[] = { "data.mdb", "lock.mdb" };
  for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
    {
      char *f = g_build_filename (dir, names[i], NULL);
      g_unlink (f);
      g_free (f);
    }
  g_rmdir (dir);
}

/* Writes the sequences of ids[0, n) into dataset dir. */
static gboolean
write_part (const char *dir, const guint8 *ids, guint64 n, int seq_len, guint64 *sequences,
            GError **error)
{
  guint64 count = (n - 1) / (guint64) seq_len;
  ShoalDatasetWriter *w = shoal_dataset_writer_new (dir, error);
  if (w == NULL)
    return FALSE;
  ShoalRecordView rec = { .label = -1, .shape = shoal_shape_make (1, seq_len + 1),
                          .kind = SHOAL_RECORD_PIXELS };
  gboolean ok = TRUE;
  for (guint64 i = 0; ok && i < count; i++)
    {
      rec.pixels = ids + i * (guint64) seq_len;
      ok = shoal_dataset_writer_put_record (w, &rec, error);
    }
  ok = ok && shoal_dataset_writer_finish (w, error);
  shoal_dataset_writer_free (w);
  *sequences = count;
  return ok;
}

static gboolean
write_vocab (const char *out, const guint8 *bytes, int size, int seq_len,
             const ShoalTextStats *st, const char *const *files, GError **error)
{
  GKeyFile *kf = g_key_file_new ();
  gint *list = g_new (gint, size);
  for (int i = 0; i < size; i++)
    list[i] = bytes[i];
  g_key_file_set_comment (kf, NULL, NULL,
                          " shoal import text: id i is the byte vocab[i]; every record of train/ and val/ "
                          "holds seq_len + 1 ids", NULL);
  g_key_file_set_integer (kf, "text", "seq_len", seq_len);
  g_key_file_set_integer (kf, "text", "vocab_size", size);
  g_key_file_set_integer_list (kf, "text", "vocab", list, (gsize) size);
  g_key_file_set_uint64 (kf, "text", "bytes", st->bytes);
  g_key_file_set_uint64 (kf, "text", "train_sequences", st->train_sequences);
  g_key_file_set_uint64 (kf, "text", "val_sequences", st->val_sequences);
  g_key_file_set_string_list (kf, "text", "files", files, g_strv_length ((char **) files));
  char *path = g_build_filename (out, SHOAL_TEXT_VOCAB_FILE, NULL);
  gboolean ok = g_key_file_save_to_file (kf, path, error);
  g_free (path);
  g_free (list);
  g_key_file_free (kf);
  return ok;
}

gboolean
shoal_import_text (const char *const *files, const char *out, int seq_len, double val_fraction,
                   gboolean any_bytes, ShoalImportProgress progress, gpointer user_data,
                   ShoalTextStats *stats, GError **error)
{
  ShoalTextStats st = { 0 };
  if (files == NULL || files[0] == NULL || seq_len < 1 || !(val_fraction >= 0 && val_fraction < 1))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                   "import text: needs input files, seq_len >= 1 and a validation fraction in [0, 1)");
      return FALSE;
    }
  guint nfiles = g_strv_length ((char **) files);
  GByteArray *text = g_byte_array_new ();
  guint64 limit = max_text_bytes ();
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < nfiles; i++)
    {
      gsize from = text->len;
      ok = read_file (files[i], text, limit, error);
      if (ok && text->len == from)
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA, "%s: empty file: nothing to learn from", files[i]);
          ok = FALSE;
        }
      if (ok && !any_bytes)
        ok = check_text (files[i], text, from, error);
      if (ok && progress != NULL)
        progress (i + 1, nfiles, user_data);
    }
  if (!ok)
    {
      g_byte_array_unref (text);
      return FALSE;
    }
  st.bytes = text->len;
  st.val_bytes = (guint64) (val_fraction * (double) text->len);
  st.train_bytes = st.bytes - st.val_bytes;
  if (st.train_bytes < (guint64) seq_len + 1)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                   "the training text holds %" G_GUINT64_FORMAT " bytes (of %" G_GUINT64_FORMAT
                   "), fewer than one sequence of seq_len + 1 = %d: lower --seq-len or give more text",
                   st.train_bytes, st.bytes, seq_len + 1);
      g_byte_array_unref (text);
      return FALSE;
    }
  if (st.val_bytes > 0 && st.val_bytes < (guint64) seq_len + 1)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                   "the validation text (--val-fraction %g of %" G_GUINT64_FORMAT " bytes) holds %"
                   G_GUINT64_FORMAT " bytes, fewer than one sequence of seq_len + 1 = %d: "
                   "raise --val-fraction, lower --seq-len or give 0 for no validation",
                   val_fraction, st.bytes, st.val_bytes, seq_len + 1);
      g_byte_array_unref (text);
      return FALSE;
    }
  if (st.train_bytes / (guint64) seq_len > G_MAXUINT32)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA, "the text makes more than %u sequences: raise --seq-len",
                   G_MAXUINT32);
      g_byte_array_unref (text);
      return FALSE;
    }

  /* ids in increasing byte order */
  gboolean seen[256] = { FALSE };
  for (guint i = 0; i < text->len; i++)
    seen[text->data[i]] = TRUE;
  guint8 bytes[256];
  gint16 ids[256];
  int size = 0;
  for (int b = 0; b < 256; b++)
    {
      ids[b] = seen[b] ? (gint16) size : -1;
      if (seen[b])
        bytes[size++] = (guint8) b;
    }
  for (guint i = 0; i < text->len; i++)
    text->data[i] = (guint8) ids[text->data[i]];
  st.vocab_size = size;

  char *train = g_build_filename (out, "train", NULL);
  char *val = g_build_filename (out, "val", NULL);
  ok = g_mkdir_with_parents (out, 0755) == 0;
  if (!ok)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: cannot create: %s", out, g_strerror (errno));
  ok = ok && write_part (train, text->data, st.train_bytes, seq_len, &st.train_sequences, error);
  if (ok && st.val_bytes > 0)
    ok = write_part (val, text->data + st.train_bytes, st.val_bytes, seq_len, &st.val_sequences, error);
  else if (ok)
    remove_dataset (val);  /* an older import's, replaced with --force */
  ok = ok && write_vocab (out, bytes, size, seq_len, &st, files, error);
  if (!ok)
    {
      remove_dataset (train);
      remove_dataset (val);
    }
  g_free (train);
  g_free (val);
  g_byte_array_unref (text);
  if (ok && stats != NULL)
    *stats = st;
  return ok;
}

gboolean
shoal_text_vocab_load (const char *dir, ShoalTextVocab *vocab, GError **error)
{
  char *path = g_build_filename (dir, SHOAL_TEXT_VOCAB_FILE, NULL);
  GKeyFile *kf = g_key_file_new ();
  GError *local = NULL;
  gsize n = 0;
  gint *list = NULL;
  gboolean ok = g_key_file_load_from_file (kf, path, G_KEY_FILE_NONE, &local);
  if (ok)
    vocab->seq_len = g_key_file_get_integer (kf, "text", "seq_len", &local);
  if (local == NULL)
    list = g_key_file_get_integer_list (kf, "text", "vocab", &n, &local);
  ok = local == NULL;
  if (ok && (vocab->seq_len < 1 || n < 1 || n > 256))
    {
      g_set_error (&local, SHOAL_ERROR, SHOAL_ERROR_DATA, "seq_len %d or a vocabulary of %zu bytes is impossible",
                   vocab->seq_len, n);
      ok = FALSE;
    }
  if (ok)
    {
      vocab->size = (int) n;
      for (int b = 0; b < 256; b++)
        vocab->ids[b] = -1;
      for (gsize i = 0; ok && i < n; i++)
        {
          if (list[i] < 0 || list[i] > 255 || vocab->ids[list[i]] >= 0)
            {
              g_set_error (&local, SHOAL_ERROR, SHOAL_ERROR_DATA, "vocab: %d is not a new byte value", list[i]);
              ok = FALSE;
              break;
            }
          vocab->bytes[i] = (guint8) list[i];
          vocab->ids[list[i]] = (gint16) i;
        }
    }
  if (!ok)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA, "%s: %s (made by `shoal import text`?)", path,
                   local->message);
      g_error_free (local);
    }
  g_free (list);
  g_key_file_free (kf);
  g_free (path);
  return ok;
}
