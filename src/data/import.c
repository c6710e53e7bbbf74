/* IDX and CSV files to LMDB datasets.  Inputs are streamed (a dataset
 * never has to fit in memory twice) through zlib's gz* functions, which
 * read plain files as they are. */
#include "data/import.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "core/error.h"
#include "data/dataset.h"

#define IDX_IMAGES_MAGIC 0x00000803u
#define IDX_LABELS_MAGIC 0x00000801u
#define IO_BUFFER (256u << 10)

/* Removes what a failed import wrote into out. */
static void
remove_dataset_files (const char *out)
{
  static const char *const names[] = { "data.mdb", "lock.mdb" };
  for (gsize i = 0; i < G_N_ELEMENTS (names); i++)
    {
      char *f = g_build_filename (out, names[i], NULL);
      g_unlink (f);
      g_free (f);
    }
}

static gzFile
open_input (const char *path, GError **error)
{
  gzFile f;

  errno = 0;
  f = gzopen (path, "rb");
  if (f == NULL)
    {
      int e = errno;
      g_set_error (error, SHOAL_ERROR, e == ENOENT ? SHOAL_ERROR_DATA : SHOAL_ERROR_IO,
                   "%s: cannot open: %s", path, e ? g_strerror (e) : "out of memory");
      return NULL;
    }
  gzbuffer (f, IO_BUFFER);
  return f;
}

/* Reads up to len bytes; returns how many (short only at the end of the
 * data), or -1 with error set.  A gzip stream that stops early counts as
 * the end of the data: callers report the truncation in their own terms. */
static gssize
read_bytes (gzFile f, const char *path, void *buf, size_t len, GError **error)
{
  size_t have = 0;

  while (have < len)
    {
      unsigned chunk = (unsigned) MIN (len - have, (size_t) 1 << 30);
      int n = gzread (f, (char *) buf + have, chunk);
      if (n < 0)
        {
          int errnum;
          const char *msg = gzerror (f, &errnum);
          if (errnum == Z_BUF_ERROR)
            break;
          g_set_error (error, SHOAL_ERROR, errnum == Z_ERRNO ? SHOAL_ERROR_IO : SHOAL_ERROR_DATA,
                       "%s: read error: %s", path, errnum == Z_ERRNO ? g_strerror (errno) : msg);
          return -1;
        }
      if (n == 0)
        break;
      have += (size_t) n;
    }
  return (gssize) have;
}

/* Reads the magic and the ndims big-endian dims of an IDX header. */
static gboolean
read_idx_header (gzFile f, const char *path, guint32 magic, const char *kind, int ndims,
                 guint32 *dims, GError **error)
{
  guint8 head[16];
  size_t len = 4 + 4 * (size_t) ndims;
  gssize got = read_bytes (f, path, head, len, error);

  if (got < 0)
    return FALSE;
  if (got >= 4)
    {
      guint32 m = (guint32) head[0] << 24 | (guint32) head[1] << 16 | (guint32) head[2] << 8 | head[3];
      if (m != magic)
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                       "%s: not an IDX %s file: magic 0x%08x, expected 0x%08x", path, kind, m, magic);
          return FALSE;
        }
    }
  if ((size_t) got < len)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                   "%s: truncated: the IDX header needs %zu bytes, file holds %zd", path, len, got);
      return FALSE;
    }
  for (int d = 0; d < ndims; d++)
    {
      const guint8 *b = head + 4 + 4 * d;
      dims[d] = (guint32) b[0] << 24 | (guint32) b[1] << 16 | (guint32) b[2] << 8 | b[3];
    }
  return TRUE;
}

static void
fill_stats (ShoalImportStats *stats, ShoalDatasetWriter *w, const ShoalShape *shape,
            ShoalRecordKind kind)
{
  if (stats == NULL)
    return;
  stats->records = shoal_dataset_writer_count (w);
  stats->shape = *shape;
  stats->kind = kind;
  stats->map_grows = shoal_dataset_writer_n_grows (w);
}

/* Finishes or abandons the writer; on failure removes what it wrote. */
static gboolean
close_writer (ShoalDatasetWriter *w, const char *out, gboolean ok, GError **error)
{
  if (w == NULL)
    return FALSE;
  if (ok)
    ok = shoal_dataset_writer_finish (w, error);
  shoal_dataset_writer_free (w);
  if (!ok)
    remove_dataset_files (out);
  return ok;
}

gboolean
shoal_import_idx (const char *images, const char *labels, const char *out,
                  ShoalImportProgress progress, gpointer user_data, ShoalImportStats *stats,
                  GError **error)
{
  gzFile fi = NULL, fl = NULL;
  guint32 nlab, idims[3];
  guint8 *labs = NULL, *pix = NULL;
  ShoalDatasetWriter *w = NULL;
  gboolean ok = FALSE;
  gssize got;

  fl = open_input (labels, error);
  if (fl == NULL || !read_idx_header (fl, labels, IDX_LABELS_MAGIC, "label", 1, &nlab, error))
    goto done;
  fi = open_input (images, error);
  if (fi == NULL || !read_idx_header (fi, images, IDX_IMAGES_MAGIC, "image", 3, idims, error))
    goto done;
  if (idims[0] != nlab)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                   "%s holds %u images but %s holds %u labels", images, idims[0], labels, nlab);
      goto done;
    }
  if (idims[1] == 0 || idims[2] == 0 || idims[1] > 1u << 15 || idims[2] > 1u << 15)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA, "%s: images of %u x %u pixels", images,
                   idims[1], idims[2]);
      goto done;
    }

  labs = g_malloc (MAX (nlab, 1u));
  got = read_bytes (fl, labels, labs, nlab, error);
  if (got < 0)
    goto done;
  if ((guint32) got < nlab)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                   "%s: truncated: expected %u labels, file holds %zd", labels, nlab, got);
      goto done;
    }

  w = shoal_dataset_writer_new (out, error);
  if (w == NULL)
    goto done;

  const size_t img = (size_t) idims[1] * idims[2];
  const guint32 chunk = 1024;
  ShoalRecordView rec = {
    .shape = shoal_shape_make (3, 1, (int) idims[1], (int) idims[2]),
    .kind = SHOAL_RECORD_PIXELS,
  };
  pix = g_malloc (img * chunk);
  for (guint32 i = 0; i < nlab; i += chunk)
    {
      guint32 n = MIN (chunk, nlab - i);
      got = read_bytes (fi, images, pix, img * n, error);
      if (got < 0)
        goto done;
      if ((size_t) got < img * n)
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                       "%s: truncated: expected %u images, file holds %" G_GUINT64_FORMAT, images,
                       nlab, (guint64) i + (guint64) got / img);
          goto done;
        }
      for (guint32 k = 0; k < n; k++)
        {
          rec.label = labs[i + k];
          rec.pixels = pix + k * img;
          if (!shoal_dataset_writer_put_record (w, &rec, error))
            goto done;
        }
      if (progress != NULL)
        progress (i + n, nlab, user_data);
    }
  if (gzread (fi, pix, 1) > 0)
    g_warning ("%s: data after the last of its %u images ignored", images, nlab);
  fill_stats (stats, w, &rec.shape, rec.kind);
  ok = TRUE;

done:
  ok = close_writer (w, out, ok, error) && ok;
  if (fi != NULL)
    gzclose (fi);
  if (fl != NULL)
    gzclose (fl);
  g_free (labs);
  g_free (pix);
  return ok;
}

/* ---- CSV ----------------------------------------------------------------- */

/* Reads one line (without its end) into line; FALSE at the end of input. */
static gboolean
read_line (gzFile f, const char *path, GString *line, GError **error)
{
  char buf[8192];
  gboolean any = FALSE;

  g_string_truncate (line, 0);
  for (;;)
    {
      if (gzgets (f, buf, sizeof buf) == NULL)
        {
          int errnum;
          const char *msg = gzerror (f, &errnum);
          if (errnum != Z_OK && errnum != Z_BUF_ERROR)
            g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_IO, "%s: read error: %s", path,
                         errnum == Z_ERRNO ? g_strerror (errno) : msg);
          return any;
        }
      any = TRUE;
      size_t n = strlen (buf);
      if (n > 0 && buf[n - 1] == '\n')
        {
          g_string_append_len (line, buf, (gssize) n - 1);
          if (line->len > 0 && line->str[line->len - 1] == '\r')
            g_string_truncate (line, line->len - 1);
          return TRUE;
        }
      g_string_append_len (line, buf, (gssize) n);
    }
}

static gboolean
blank (const char *s)
{
  for (; *s; s++)
    if (!g_ascii_isspace (*s))
      return FALSE;
  return TRUE;
}

/* Parses a number filling the whole field (spaces around it allowed) into
 * a finite float.  NaN and infinities are refused here: a net trained on
 * them reports only a NaN loss, far from the cell that caused it.  Returns
 * NULL, or why the field is refused. */
static const char *
parse_number (char *field, double *value)
{
  char *end;
  g_strstrip (field);
  if (*field == '\0')
    return "is not a number";
  errno = 0;
  *value = g_ascii_strtod (field, &end);
  if (*end != '\0')
    return "is not a number";
  if (isnan (*value))
    return "is not a number (NaN cannot be trained on)";
  if (isinf (*value) && errno != ERANGE)
    return "is infinite (cannot be trained on)";
  if (errno == ERANGE && fabs (*value) >= 1.0)   /* underflow to 0 or a denormal is fine */
    return "is out of range";
  if (!isfinite ((float) *value))
    return "is out of a float's range (+-3.4e38)";
  return NULL;
}

gboolean
shoal_import_csv (const char *in, const char *out, int label_column, gboolean skip_header,
                  ShoalImportProgress progress, gpointer user_data, ShoalImportStats *stats,
                  GError **error)
{
  gzFile f;
  GString *line = g_string_new (NULL);
  GError *local = NULL;
  ShoalDatasetWriter *w = NULL;
  float *features = NULL;
  guint ncols = 0, nfeat = 0;
  guint64 lineno = 0, size = 0;
  gboolean ok = FALSE, header_done = !skip_header;
  struct stat st;
  ShoalRecordView rec = { .kind = SHOAL_RECORD_FLOATS };

  f = open_input (in, error);
  if (f == NULL)
    goto done;
  if (stat (in, &st) == 0)
    size = (guint64) st.st_size;
  w = shoal_dataset_writer_new (out, error);
  if (w == NULL)
    goto done;

  while (read_line (f, in, line, &local))
    {
      lineno++;
      if (blank (line->str))
        continue;
      if (!header_done)
        {
          header_done = TRUE;
          continue;
        }
      char **fields = g_strsplit (line->str, ",", -1);
      guint n = g_strv_length (fields);
      if (ncols == 0)
        {
          if (label_column >= (int) n)
            {
              g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                           "%s:%" G_GUINT64_FORMAT ": label column %d but the row has %u columns",
                           in, lineno, label_column, n);
              g_strfreev (fields);
              goto done;
            }
          ncols = n;
          nfeat = label_column >= 0 ? n - 1 : n;
          if (nfeat == 0)
            {
              g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                           "%s:%" G_GUINT64_FORMAT ": no feature columns", in, lineno);
              g_strfreev (fields);
              goto done;
            }
          features = g_new (float, nfeat);
          rec.shape = shoal_shape_make (1, (int) nfeat);
          rec.floats = features;
        }
      if (n != ncols)
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                       "%s:%" G_GUINT64_FORMAT ": %u columns, the first row has %u", in, lineno,
                       n, ncols);
          g_strfreev (fields);
          goto done;
        }
      rec.label = -1;
      for (guint c = 0, k = 0; c < n; c++)
        {
          double v;
          const char *why = parse_number (fields[c], &v);
          if (why != NULL)
            {
              g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                           "%s:%" G_GUINT64_FORMAT ": column %u: '%s' %s", in, lineno, c,
                           fields[c], why);
              g_strfreev (fields);
              goto done;
            }
          if ((int) c == label_column)
            {
              if (v != floor (v) || v < 0 || v > G_MAXINT32)
                {
                  g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                               "%s:%" G_GUINT64_FORMAT ": column %u: label '%s' is not an "
                               "integer >= 0", in, lineno, c, fields[c]);
                  g_strfreev (fields);
                  goto done;
                }
              rec.label = (gint32) v;
            }
          else
            features[k++] = (float) v;
        }
      g_strfreev (fields);
      if (!shoal_dataset_writer_put_record (w, &rec, error))
        goto done;
      if (progress != NULL && (shoal_dataset_writer_count (w) & 1023) == 0)
        progress ((guint64) gzoffset (f), size, user_data);
    }
  if (local != NULL)
    {
      g_propagate_error (error, local);
      goto done;
    }
  if (shoal_dataset_writer_count (w) == 0)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA, "%s: no data rows", in);
      goto done;
    }
  if (progress != NULL)
    progress (size, size, user_data);
  fill_stats (stats, w, &rec.shape, rec.kind);
  ok = TRUE;

done:
  ok = close_writer (w, out, ok, error) && ok;
  if (f != NULL)
    gzclose (f);
  g_string_free (line, TRUE);
  g_free (features);
  return ok;
}
