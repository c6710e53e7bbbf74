/* Text corpora for character (byte) models: `shoal import text` and what
 * text_input and `shoal sample` read back.
 *
 * An import directory holds
 *   train/      LMDB dataset: the training text as sequences
 *   val/        LMDB dataset: the validation text (absent with fraction 0)
 *   vocab.ini   GKeyFile [text]: seq_len, vocab (the byte of each id, in
 *               increasing byte order), the sequence and byte counts and
 *               the input files
 * Every record is one sequence of seq_len + 1 ids (pixel bytes, shape
 * (seq_len + 1), label -1): record i holds ids i * seq_len .. (i + 1) *
 * seq_len of its part, so consecutive records are consecutive text and
 * each overlaps the next by one id - the last target of a sequence is the
 * first input of the next.  The validation part is the last `fraction`
 * of the concatenated files (so it is text the model never trained on). */
#ifndef SHOAL_TEXT_H
#define SHOAL_TEXT_H

#include <glib.h>

#include "data/import.h"

G_BEGIN_DECLS

#define SHOAL_TEXT_VOCAB_FILE "vocab.ini"

typedef struct {
  int seq_len;
  int size;                 /* ids 0..size-1 */
  guint8 bytes[256];        /* bytes[id] */
  gint16 ids[256];          /* ids[byte], -1 for bytes not in the corpus */
} ShoalTextVocab;

typedef struct {
  guint64 bytes;            /* of all input files */
  guint64 train_sequences, val_sequences;
  guint64 train_bytes, val_bytes;
  int vocab_size;
} ShoalTextStats;

/* Concatenates `files` (NULL-terminated, in the order given; gzip or
 * plain) into `out` as described above.  Errors (SHOAL_ERROR_DATA) name
 * the file: an empty file, a NUL byte or invalid UTF-8 unless any_bytes
 * ("F: not UTF-8 text: byte 0xff at offset 12; for a byte-level corpus
 * use --bytes"), a text too short for one sequence of seq_len + 1 bytes,
 * a validation part too short for one.  `out` must hold no dataset yet;
 * on failure what was written is removed.  progress (input bytes) and
 * stats may be NULL. */
gboolean shoal_import_text (const char *const *files, const char *out, int seq_len,
                            double val_fraction, gboolean any_bytes, ShoalImportProgress progress,
                            gpointer user_data, ShoalTextStats *stats, GError **error);

/* Reads DIR/vocab.ini.  FALSE with error naming the file. */
gboolean shoal_text_vocab_load (const char *dir, ShoalTextVocab *vocab, GError **error);

G_END_DECLS

#endif
