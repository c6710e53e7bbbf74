/* Making datasets (data/dataset.h) from common file formats.  The
 * `shoal import` command is a thin shell over these; custom apps and tests
 * call them directly.
 *
 * Inputs are read through zlib, so every file may be gzip-compressed or
 * plain.  `out` is created if missing and must not hold records already;
 * on failure the LMDB files written so far are removed again. */
#ifndef SHOAL_IMPORT_H
#define SHOAL_IMPORT_H

#include <glib.h>

#include "data/record.h"

G_BEGIN_DECLS

/* Called now and then while importing: `done` of `total` units (records
 * for IDX, input bytes for CSV). */
typedef void (*ShoalImportProgress) (guint64 done, guint64 total, gpointer user_data);

typedef struct {
  guint64 records;
  ShoalShape shape;          /* of every record */
  ShoalRecordKind kind;
  guint map_grows;           /* how often the LMDB map was grown */
} ShoalImportStats;

/* IDX (MNIST, Fashion-MNIST): an image file (magic 0x00000803, N x rows x
 * cols bytes) and a label file (magic 0x00000801, N bytes) become N pixel
 * records of shape 1 x rows x cols.  Errors (SHOAL_ERROR_DATA) name the
 * file: wrong magic, counts that differ, "F: truncated: expected N images,
 * file holds M".  progress and stats may be NULL. */
gboolean shoal_import_idx (const char *images, const char *labels, const char *out,
                           ShoalImportProgress progress, gpointer user_data,
                           ShoalImportStats *stats, GError **error);

/* CSV: one example per line, comma-separated numbers; column
 * `label_column` (0-based; -1: none, labels are -1) is the integer label,
 * the others become a float record of shape D.  Blank lines are skipped;
 * with skip_header the first non-blank line is.  Errors name file and
 * line: "F:12: column 3: 'x' is not a number". */
gboolean shoal_import_csv (const char *in, const char *out, int label_column,
                           gboolean skip_header, ShoalImportProgress progress, gpointer user_data,
                           ShoalImportStats *stats, GError **error);

G_END_DECLS

#endif
