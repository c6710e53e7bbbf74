/* The text_input layer: ids and next-id targets of a `shoal import text`
 * directory (data/text.h), as consecutive streams per row so that a
 * stateful recurrent layer carries each row's state from batch to batch.
 *
 * Training: this net's shard (a contiguous block of the training
 * sequences: shard i of n) is cut into batch_size streams of L
 * consecutive sequences; batch j gives row r the stream's j-th sequence:
 *   out   (batch, seq_len)  ids of its first seq_len bytes
 *   label (batch, seq_len)  ids of its last seq_len bytes (the next bytes)
 * An epoch is L batches, in order (shuffling would break the streams).
 * Testing walks the validation sequences the same way with up to
 * batch_size streams over the whole set (testers are not sharded).
 * The first batch of every stream stores its row's first id negated,
 * -(id + 1), which tells recurrent layers to start that row afresh and
 * which embedding reads as the id (recurrent.h). */
#include "data/data_layers.h"

#include <string.h>

#include "core/error.h"
#include "data/dataset.h"
#include "data/text.h"

static const ShoalOption text_input_options[] = {
  { "data", SHOAL_OPT_PATH, NULL, SHOAL_UNBOUNDED, NULL,
    "directory made by `shoal import text` (train/, val/, vocab.ini)" },
  { "batch_size", SHOAL_OPT_INT, NULL, 1, 1 << 20, NULL, "streams read side by side (per shard)" },
  SHOAL_OPTION_END
};

typedef struct {
  guint8 *ids;      /* (n, seq_len + 1) */
  guint64 n;        /* sequences */
  int rows;         /* streams */
  guint64 length;   /* sequences per stream: batches per pass */
  guint64 pos;      /* next batch of the pass */
} Part;

typedef struct {
  int batch, seq_len, vocab;
  Part train, test;
  guint64 epochs;   /* training passes begun */
  gboolean warned;
  char *train_dir;
  guint64 total;    /* sequences in train_dir */
  int shard, shards;        /* of train (the context at set-up or the last move) */
  GHashTable *parts;        /* after a move: every shard's Part read so far (owning their ids) by shard_key */
} TextInputPriv;

static gint64
shard_key (int shard, int shards)
{
  return ((gint64) shards << 32) | shard;
}

/* Reads sequences [first, first + n) of the dataset at dir. */
static gboolean
load_part (ShoalLayer *layer, const char *dir, guint64 first, guint64 n, Part *part, GError **error)
{
  TextInputPriv *p = layer->priv;
  const size_t width = (size_t) p->seq_len + 1;
  GError *local = NULL;
  ShoalDataset *ds = shoal_dataset_open (dir, &local);
  ShoalDatasetCursor *cur = ds ? shoal_dataset_cursor_new (ds, &local) : NULL;
  ShoalRecordCodec *codec = shoal_record_codec_new ();
  gboolean ok = cur != NULL;

  part->ids = g_malloc (MAX (n, (guint64) 1) * width);
  part->n = n;
  for (guint64 i = 0; ok && i < n; i++)
    {
      ShoalRecordView rec;
      ok = shoal_dataset_cursor_read_record (cur, codec, first + i, &rec, &local);
      if (ok && (rec.kind != SHOAL_RECORD_PIXELS || shoal_shape_count (&rec.shape) != width))
        {
          char key[SHOAL_DATASET_KEY_LEN + 1];
          shoal_dataset_format_key (first + i, key);
          g_set_error (&local, SHOAL_ERROR, SHOAL_ERROR_DATA,
                       "%s: key %s: not a sequence of seq_len + 1 = %zu ids", dir, key, width);
          ok = FALSE;
        }
      for (size_t j = 0; ok && j < width; j++)
        if (rec.pixels[j] >= p->vocab)
          {
            g_set_error (&local, SHOAL_ERROR, SHOAL_ERROR_DATA, "%s: id %d is beyond the vocabulary of %d",
                         dir, rec.pixels[j], p->vocab);
            ok = FALSE;
          }
      if (ok)
        memcpy (part->ids + i * width, rec.pixels, width);
    }
  shoal_record_codec_free (codec);
  shoal_dataset_cursor_free (cur);
  if (ds != NULL)
    shoal_dataset_unref (ds);
  if (!ok)
    {
      shoal_layer_error (layer, error, "data", "%s", local->message);
      g_error_free (local);
    }
  return ok;
}

static guint64
dataset_count (const char *dir, GError **error)
{
  ShoalDataset *ds = shoal_dataset_open (dir, error);
  if (ds == NULL)
    return 0;
  guint64 n = shoal_dataset_count (ds);
  shoal_dataset_unref (ds);
  return n;
}

/* Shard i of n of the training set: a contiguous block, so that its
 * streams are text. */
static gboolean
load_shard (ShoalLayer *layer, int shard, int shards, Part *part, GError **error)
{
  TextInputPriv *p = layer->priv;
  guint64 first = p->total * (guint64) shard / (guint64) shards;
  guint64 n = p->total * (guint64) (shard + 1) / (guint64) shards - first;
  p->shard = shard;
  p->shards = shards;
  if (n / (guint64) p->batch == 0)
    {
      shoal_layer_error (layer, error, "batch_size",
                         "%s holds %" G_GUINT64_FORMAT " sequences of seq_len %d for shard %d of %d, "
                         "fewer than %d streams of one sequence each: lower batch_size or import "
                         "with a smaller --seq-len", p->train_dir, n, p->seq_len, shard, shards, p->batch);
      return FALSE;
    }
  if (!load_part (layer, p->train_dir, first, n, part, error))
    return FALSE;
  part->rows = p->batch;
  part->length = n / (guint64) p->batch;
  return TRUE;
}

static void
part_free (gpointer data)
{
  Part *part = data;
  g_free (part->ids);
  g_free (part);
}

/* After shoal_net_move the context names another unit: the training
 * part becomes that unit's shard (read once, then kept) with its cursors
 * at their start, as its own set-up leaves them; its state, loaded next,
 * puts them where that unit was. */
static gboolean
follow_context (ShoalLayer *layer, GError **error)
{
  TextInputPriv *p = layer->priv;
  int shard = layer->ctx->shard_index, shards = MAX (layer->ctx->shard_count, 1);
  if (shard == p->shard && shards == p->shards)
    return TRUE;
  if (p->parts == NULL)
    {
      /* the set-up's part goes into the table, which owns it from now on */
      p->parts = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, part_free);
      gint64 *key = g_new (gint64, 1);
      *key = shard_key (p->shard, p->shards);
      g_hash_table_insert (p->parts, key, g_memdup2 (&p->train, sizeof p->train));
    }
  gint64 want = shard_key (shard, shards);
  Part *part = g_hash_table_lookup (p->parts, &want);
  if (part == NULL)
    {
      part = g_new0 (Part, 1);
      if (!load_shard (layer, shard, shards, part, error))
        {
          part_free (part);
          return FALSE;
        }
      gint64 *key = g_new (gint64, 1);
      *key = want;
      g_hash_table_insert (p->parts, key, part);
    }
  p->shard = shard;
  p->shards = shards;
  p->train = *part;
  p->train.pos = p->test.pos = 0;
  p->epochs = 0;
  return TRUE;
}

static gboolean
text_input_setup (ShoalLayer *layer, GError **error)
{
  TextInputPriv *p = layer->priv;
  char *data = shoal_layer_opt_string (layer, "data");
  char *train = g_build_filename (data, "train", NULL), *val = g_build_filename (data, "val", NULL);
  ShoalTextVocab vocab;
  GError *local = NULL;
  gboolean ok = TRUE;
  const int shard = layer->ctx->shard_index, shards = MAX (layer->ctx->shard_count, 1);

  p->batch = (int) shoal_layer_opt_int (layer, "batch_size");
  if (!shoal_text_vocab_load (data, &vocab, &local))
    {
      shoal_layer_error (layer, error, "data", "%s", local->message);
      g_error_free (local);
      ok = FALSE;
    }
  guint64 total = 0;
  if (ok)
    {
      p->seq_len = vocab.seq_len;
      p->vocab = vocab.size;
      total = dataset_count (train, &local);
      if (local != NULL)
        {
          shoal_layer_error (layer, error, "data", "%s", local->message);
          g_error_free (local);
          ok = FALSE;
        }
    }
  p->total = total;
  p->train_dir = g_strdup (train);
  if (ok)
    ok = load_shard (layer, shard, shards, &p->train, error);
  if (ok && g_file_test (val, G_FILE_TEST_IS_DIR))
    {
      guint64 n = dataset_count (val, &local);
      if (local != NULL)
        {
          shoal_layer_error (layer, error, "data", "%s", local->message);
          g_error_free (local);
          ok = FALSE;
        }
      else if ((ok = load_part (layer, val, 0, n, &p->test, error)))
        {
          p->test.rows = (int) MIN ((guint64) p->batch, n);
          p->test.length = n / (guint64) p->test.rows;
        }
    }
  if (ok)
    {
      layer->out.shape = shoal_shape_make (2, p->batch, p->seq_len);
      ok = shoal_layer_alloc_tensor (layer, &layer->label, &layer->out.shape, "labels", error);
    }
  g_free (train);
  g_free (val);
  g_free (data);
  return ok;
}

static void
text_input_finalize (ShoalLayer *layer)
{
  TextInputPriv *p = layer->priv;
  if (p->parts != NULL)
    g_hash_table_destroy (p->parts);   /* owns train.ids */
  else
    g_free (p->train.ids);
  p->parts = NULL;
  g_free (p->train_dir);
  p->train_dir = NULL;
  g_free (p->test.ids);
  p->train.ids = p->test.ids = NULL;
}

/* The next batch of part into out and label; returns its rows. */
static int
next_batch (TextInputPriv *p, Part *part, float *out, float *label)
{
  const int T = p->seq_len;
  for (int r = 0; r < part->rows; r++)
    {
      const guint8 *seq = part->ids + ((guint64) r * part->length + part->pos) * (guint64) (T + 1);
      float *x = out + (size_t) r * T, *y = label + (size_t) r * T;
      for (int t = 0; t < T; t++)
        {
          x[t] = seq[t];
          y[t] = seq[t + 1];
        }
      if (part->pos == 0)
        x[0] = -x[0] - 1.0f;  /* the stream starts here */
    }
  if (++part->pos == part->length)
    part->pos = 0;
  return part->rows;
}

static void
text_input_forward (ShoalLayer *layer, ShoalPhase phase)
{
  TextInputPriv *p = layer->priv;
  int rows;
  if (phase == SHOAL_PHASE_TRAIN)
    {
      if (p->train.pos == 0)
        p->epochs++;
      rows = next_batch (p, &p->train, layer->out.data, layer->label.data);
    }
  else if (p->test.ids != NULL)
    rows = next_batch (p, &p->test, layer->out.data, layer->label.data);
  else
    {
      if (!p->warned)
        g_warning ("text_input %s: a test forward, but the data has no val/ split (imported with "
                   "--val-fraction 0): an empty batch", layer->name);
      p->warned = TRUE;
      rows = 0;
    }
  shoal_tensor_set_rows (&layer->out, rows);
  shoal_tensor_set_rows (&layer->label, rows);
}

static gint64
text_input_num_records (ShoalLayer *layer, ShoalPhase phase)
{
  TextInputPriv *p = layer->priv;
  /* a pass is `length` batches: as many records as that many full batches */
  const Part *part = phase == SHOAL_PHASE_TRAIN ? &p->train : &p->test;
  return (gint64) (part->length * (guint64) p->batch);
}

#define STATE_MAGIC 0x54585431u  /* "TXT1" */

static GBytes *
text_input_save_state (ShoalLayer *layer)
{
  TextInputPriv *p = layer->priv;
  GError *error = NULL;
  if (!follow_context (layer, &error))
    {
      /* the caller moved the net without loading a state first */
      g_critical ("%s", error->message);
      g_error_free (error);
    }
  guint64 s[4] = { STATE_MAGIC, p->epochs, p->train.pos, p->test.pos };
  return g_bytes_new (s, sizeof s);
}

static gboolean
text_input_load_state (ShoalLayer *layer, GBytes *state, GError **error)
{
  TextInputPriv *p = layer->priv;
  if (!follow_context (layer, error))
    return FALSE;
  guint64 s[4];
  gsize len = 0;
  const void *d = g_bytes_get_data (state, &len);
  if (len == sizeof s)
    memcpy (s, d, sizeof s);
  if (len != sizeof s || s[0] != STATE_MAGIC || s[2] >= MAX (p->train.length, (guint64) 1)
      || s[3] >= MAX (p->test.length, (guint64) 1))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                   "layer '%s': the checkpointed text cursor does not fit this data (another "
                   "import or batch_size?)", layer->name);
      return FALSE;
    }
  p->epochs = s[1];
  p->train.pos = s[2];
  p->test.pos = s[3];
  return TRUE;
}

const ShoalLayerOps shoal_layer_text_input_ops = {
  .type = "text_input",
  .summary = "ids (batch, seq_len) and next-id targets (labels) of a `shoal import text` directory, "
             "row r reading one stream from batch to batch (for stateful gru/lstm)",
  .flags = SHOAL_LAYER_INPUT | SHOAL_LAYER_OWN_ROWS,
  .split = { .dims = SHOAL_SPLIT_BATCH, .rows_key = "batch_size" },
  .min_srcs = 0,
  .max_srcs = 0,
  .options = text_input_options,
  .priv_size = sizeof (TextInputPriv),
  .setup = text_input_setup,
  .forward = text_input_forward,
  .finalize = text_input_finalize,
  .num_records = text_input_num_records,
  .save_state = text_input_save_state,
  .load_state = text_input_load_state,
};
