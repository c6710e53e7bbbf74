/* The lmdb_input layer: batches from LMDB datasets of Records, the input
 * of every model trained on files.
 *
 * Each net trains on its shard (records i with i % shard_count ==
 * shard_index), so no two workers read the same training record in an
 * epoch.  Training walks the shard in a fresh random order every epoch and
 * never returns a short batch (an epoch boundary falls inside a batch).
 * Testing is not sharded: it walks the whole test set in order, ends a
 * pass with a partial batch, then starts over.
 *
 * A prefetch thread decodes the next training batch into the back buffer
 * while the net trains on the front one; forward swaps them, so out.data
 * changes between forwards (the split layer re-binds every forward).  All
 * records are decoded once at set-up: a record that does not decode or
 * whose shape differs from the first fails set-up, naming its key, instead
 * of surfacing mid-run where forward cannot report errors. */
#include "data/data_layers.h"

#include <string.h>
#include <zlib.h>

#include "core/error.h"
#include "core/thread_start.h"
#include "data/dataset.h"

static const ShoalOption lmdb_input_options[] = {
  { "train", SHOAL_OPT_PATH, NULL, SHOAL_UNBOUNDED, NULL, "training dataset directory (shoal import)" },
  { "test", SHOAL_OPT_PATH, "", SHOAL_UNBOUNDED, NULL, "test dataset directory; empty: none" },
  { "batch_size", SHOAL_OPT_INT, NULL, 1, 1 << 24, NULL, "examples per batch (per shard)" },
  { "shuffle", SHOAL_OPT_BOOL, "true", SHOAL_UNBOUNDED, NULL,
    "train in a new random order every epoch" },
  { "scale", SHOAL_OPT_FLOAT, "0.00392156862745098", SHOAL_UNBOUNDED, NULL,
    "multiplier of raw values; unset: 1/255 for pixel records, 1 for float records" },
  { "mean", SHOAL_OPT_FLOAT, "0", SHOAL_UNBOUNDED, NULL, "value = (raw * scale - mean) / std" },
  { "std", SHOAL_OPT_FLOAT, "1", 1e-30, 1e30, NULL, "value = (raw * scale - mean) / std" },
  { "prefetch", SHOAL_OPT_BOOL, "true", SHOAL_UNBOUNDED, NULL,
    "decode the next training batch in a thread while the current one trains" },
  SHOAL_OPTION_END
};

typedef struct {
  ShoalDataset *ds;
  ShoalDatasetCursor *cur;   /* used by one thread only: prefetch (train) or caller (test) */
  ShoalRecordCodec *codec;
  guint64 n;                 /* records in this shard */
  int shard_index, shard_count;  /* train: this worker's shard; test: 0 of 1, the whole set */
} Source;

typedef struct {
  int batch;
  size_t row;                /* floats per example */
  ShoalShape rec_shape;      /* of the first record: every record must match */
  ShoalRecordKind kind;
  float mul, add;            /* value = raw * mul + add */
  int shard_index, shard_count;
  int group, worker;         /* the unit whose stream rng0 is (the context at set-up or the last move) */
  GHashTable *checked;       /* shards (count << 32 | index) whose records were decoded once */

  Source train, test;
  guint32 *order;            /* train shard's record indices, reshuffled per epoch */
  guint64 order_pos;         /* next entry of order; n: start a new epoch */
  guint64 epochs;            /* epochs started (order was reshuffled that often) */
  ShoalRng rng0;             /* layer->rng at set-up: replaying `epochs` shuffles from it rebuilds order */
  ShoalRng rng;              /* the shuffles' stream, from rng0: the prefetch thread's own, so that
                              * shoal_net_move's new seed in layer->rng never races with it */
  guint64 end_epochs[2], end_pos[2];  /* cursor after the batch in buf[b] */
  guint64 next_epochs, next_pos;      /* cursor after the last batch forward consumed */
  gboolean shuffle;
  guint64 test_pos;

  float *buf[2], *lab[2];    /* front = out.data, back = being filled */
  int front;

  gboolean prefetch;
  GThread *thread;
  gboolean sync_init;
  GMutex lock;
  GCond cond;
  gboolean want, ready, stop;  /* under lock */
  gint64 wait_us, waits;       /* time forward spent waiting for the thread */

  float *fed, *fed_lab;        /* rows the program gave (shoal_net_feed), for the next forward */
  int fed_rows;                /* 0: none waiting */
} LmdbInputPriv;

static guint64
shard_size (guint64 n, int index, int count)
{
  return n > (guint64) index ? (n - (guint64) index - 1) / (guint64) count + 1 : 0;
}

static inline guint64
shard_record (const Source *src, guint64 pos)
{
  return (guint64) src->shard_index + pos * (guint64) src->shard_count;
}

/* A setup failure that names the conf line, with the data error's code. */
static void
data_error (const ShoalLayer *layer, GError **error, const char *key, GError *cause)
{
  GError *local = NULL;
  shoal_layer_error (layer, &local, key, "%s", cause->message);
  g_set_error_literal (error, SHOAL_ERROR, cause->domain == SHOAL_ERROR ? cause->code
                       : SHOAL_ERROR_DATA, local->message);
  g_error_free (local);
  g_error_free (cause);
}

/* Every training record has the first one's kind and shape.  A test set
 * only needs as many values per record: data prepared elsewhere (a CSV
 * of pixel values for a model trained on images) reads as the training
 * data's shape, through the same scale, mean and std. */
static gboolean
same_layout (const LmdbInputPriv *p, const Source *src, const ShoalRecordView *rec)
{
  if (src == &p->test)
    return shoal_shape_count (&rec->shape) == p->row;
  return rec->kind == p->kind && shoal_shape_equal (&rec->shape, &p->rec_shape);
}

static void
layout_error (const LmdbInputPriv *p, const ShoalDataset *ds, guint64 index,
              const ShoalRecordView *rec, GError **error)
{
  char key[SHOAL_DATASET_KEY_LEN + 1];
  char *got = shoal_shape_to_string (&rec->shape);
  char *want = shoal_shape_to_string (&p->rec_shape);
  static const char *const kinds[] = { "pixels", "floats" };

  shoal_dataset_format_key (index, key);
  g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
               "%s: key %s: record is %s %s, the first record is %s %s",
               shoal_dataset_path (ds), key, got, kinds[rec->kind], want, kinds[p->kind]);
  g_free (got);
  g_free (want);
}

/* Decodes every record of the source's shard once (about 0.1 s for the
 * 60,000 Fashion-MNIST records). */
static gboolean
validate_shard (const LmdbInputPriv *p, Source *src, GError **error)
{
  ShoalRecordView rec;

  for (guint64 pos = 0; pos < src->n; pos++)
    {
      guint64 index = shard_record (src, pos);
      if (!shoal_dataset_cursor_read_record (src->cur, src->codec, index, &rec, error))
        return FALSE;
      if (!same_layout (p, src, &rec))
        {
          layout_error (p, src->ds, index, &rec, error);
          return FALSE;
        }
    }
  return TRUE;
}

static gboolean
open_source (ShoalLayer *layer, const char *key, const char *path, Source *src, GError **error)
{
  LmdbInputPriv *p = layer->priv;
  GError *local = NULL;

  src->ds = shoal_dataset_open (path, &local);
  if (src->ds != NULL)
    src->cur = shoal_dataset_cursor_new (src->ds, &local);
  if (src->cur == NULL)
    {
      data_error (layer, error, key, local);
      return FALSE;
    }
  src->codec = shoal_record_codec_new ();
  if (shoal_dataset_count (src->ds) > G_MAXUINT32)
    {
      shoal_layer_error (layer, error, key, "%s holds more than %u records", path, G_MAXUINT32);
      return FALSE;
    }
  /* workers share the training set; every tester sees the whole test set */
  gboolean sharded = src == &p->train;
  src->shard_index = sharded ? p->shard_index : 0;
  src->shard_count = sharded ? p->shard_count : 1;
  src->n = shard_size (shoal_dataset_count (src->ds), src->shard_index, src->shard_count);
  if (src->n == 0)
    {
      shoal_layer_error (layer, error, key,
                         "%s: shard %d of %d is empty: the dataset holds only %" G_GUINT64_FORMAT
                         " records", path, src->shard_index, src->shard_count,
                         shoal_dataset_count (src->ds));
      return FALSE;
    }
  return TRUE;
}

/* Decodes record `index` of src into one example of out and its label. */
static void
decode_into (LmdbInputPriv *p, Source *src, guint64 index, float *out, float *lab)
{
  ShoalRecordView rec;
  GError *error = NULL;

  if (!shoal_dataset_cursor_read_record (src->cur, src->codec, index, &rec, &error)
      || !same_layout (p, src, &rec))
    {
      if (error == NULL)
        layout_error (p, src->ds, index, &rec, &error);
      /* forward cannot fail: report, and train on zeros rather than garbage */
      g_critical ("lmdb_input: %s; using a zero example", error->message);
      g_error_free (error);
      memset (out, 0, p->row * sizeof (float));
      *lab = 0;
      return;
    }
  shoal_record_to_floats (&rec, p->mul, p->add, out);
  *lab = (float) rec.label;
}

/* Runs in the prefetch thread (or in forward without prefetch); the only
 * user of p->rng, order and the train cursor after set-up. */
static void
fill_train (ShoalLayer *layer, float *out, float *lab)
{
  LmdbInputPriv *p = layer->priv;

  for (int r = 0; r < p->batch; r++)
    {
      if (p->order_pos == p->train.n)
        {
          p->order_pos = 0;
          p->epochs++;
          if (p->shuffle)
            shoal_rng_shuffle_u32 (&p->rng, p->order, p->train.n);
        }
      decode_into (p, &p->train, p->order[p->order_pos++], out + (size_t) r * p->row, lab + r);
    }
  int b = out == p->buf[0] ? 0 : 1;
  p->end_epochs[b] = p->epochs;
  p->end_pos[b] = p->order_pos;
}

static gpointer
prefetch_main (gpointer data)
{
  ShoalLayer *layer = data;
  LmdbInputPriv *p = layer->priv;

  g_mutex_lock (&p->lock);
  for (;;)
    {
      while (!p->want && !p->stop)
        g_cond_wait (&p->cond, &p->lock);
      if (p->stop)
        break;
      p->want = FALSE;
      int back = 1 - p->front;
      g_mutex_unlock (&p->lock);
      fill_train (layer, p->buf[back], p->lab[back]);
      g_mutex_lock (&p->lock);
      p->ready = TRUE;
      g_cond_broadcast (&p->cond);
    }
  g_mutex_unlock (&p->lock);
  return NULL;
}

/* Starts the thread that fills the back buffer, asking it for a batch. */
static gboolean
start_prefetch (ShoalLayer *layer, GError **error)
{
  LmdbInputPriv *p = layer->priv;
  GError *local = NULL;
  p->want = TRUE;
  p->thread = shoal_thread_start ("shoal-prefetch", prefetch_main, layer, &local);
  if (p->thread == NULL)
    {
      shoal_layer_error_nomem (layer, error, local, "prefetch");
      return FALSE;
    }
  return TRUE;
}

static void
bind_front (ShoalLayer *layer, int rows)
{
  LmdbInputPriv *p = layer->priv;
  layer->out.data = p->buf[p->front];
  layer->label.data = p->lab[p->front];
  shoal_tensor_set_rows (&layer->out, rows);
  shoal_tensor_set_rows (&layer->label, rows);
}

static gint64
shard_key (const LmdbInputPriv *p)
{
  return ((gint64) p->shard_count << 32) | p->shard_index;
}

/* The training cursor of a unit that has read nothing yet. */
static void
fresh_cursor (ShoalLayer *layer)
{
  LmdbInputPriv *p = layer->priv;
  for (guint64 i = 0; i < p->train.n; i++)
    p->order[i] = (guint32) shard_record (&p->train, i);
  p->order_pos = p->train.n;   /* the first batch starts (and shuffles) an epoch */
  p->epochs = 0;
  p->next_epochs = 0;
  p->next_pos = p->order_pos;
  p->test_pos = 0;
  p->rng0 = p->rng = layer->rng;
}

static void stop_prefetch (LmdbInputPriv *p);

/* After shoal_net_move the context names another unit: the training
 * source moves to that unit's shard and the cursors to its fresh start
 * (its shard's order, layer->rng as set-up seeds it for that unit), as
 * its own set-up would leave them; its state, loaded next, puts them
 * where that unit was.  A shard's records are decoded and checked the
 * first time the layer moves to it, as set-up checks its own. */
static gboolean
follow_context (ShoalLayer *layer, GError **error)
{
  LmdbInputPriv *p = layer->priv;
  const ShoalLayerContext *ctx = layer->ctx;
  int count = MAX (ctx->shard_count, 1);
  if (p->shard_index == ctx->shard_index && p->shard_count == count && p->group == ctx->group
      && p->worker == ctx->worker)
    return TRUE;
  stop_prefetch (p);
  p->shard_index = p->train.shard_index = ctx->shard_index;
  p->shard_count = p->train.shard_count = count;
  p->group = ctx->group;
  p->worker = ctx->worker;
  p->train.n = shard_size (shoal_dataset_count (p->train.ds), p->shard_index, p->shard_count);
  if (p->train.n == 0)
    {
      shoal_layer_error (layer, error, "train", "shard %d of %d is empty: the dataset holds only %" G_GUINT64_FORMAT
                         " records", p->shard_index, p->shard_count, shoal_dataset_count (p->train.ds));
      return FALSE;
    }
  gint64 key = shard_key (p);
  if (!g_hash_table_contains (p->checked, &key))
    {
      GError *local = NULL;
      if (!validate_shard (p, &p->train, &local))
        {
          data_error (layer, error, "train", local);
          return FALSE;
        }
      gint64 *k = g_new (gint64, 1);
      *k = key;
      g_hash_table_add (p->checked, k);
    }
  g_free (p->order);
  p->order = g_new (guint32, p->train.n);
  fresh_cursor (layer);
  if (p->prefetch)
    {
      p->stop = FALSE;
      p->ready = FALSE;
      return start_prefetch (layer, error);
    }
  return TRUE;
}

static gboolean
lmdb_input_setup (ShoalLayer *layer, GError **error)
{
  LmdbInputPriv *p = layer->priv;
  GError *local = NULL;
  ShoalRecordView first;
  char *path;
  gboolean ok;

  p->batch = (int) shoal_layer_opt_int (layer, "batch_size");
  p->shuffle = shoal_layer_opt_bool (layer, "shuffle");
  p->prefetch = shoal_layer_opt_bool (layer, "prefetch");
  p->shard_index = layer->ctx->shard_index;
  p->shard_count = MAX (layer->ctx->shard_count, 1);
  p->group = layer->ctx->group;
  p->worker = layer->ctx->worker;
  if (p->shard_index < 0 || p->shard_index >= p->shard_count)
    {
      shoal_layer_error (layer, error, NULL, "shard %d of %d does not exist", p->shard_index,
                         p->shard_count);
      return FALSE;
    }

  path = shoal_layer_opt_string (layer, "train");
  ok = open_source (layer, "train", path, &p->train, error);
  g_free (path);
  if (!ok)
    return FALSE;
  if (!shoal_dataset_cursor_read_record (p->train.cur, p->train.codec, 0, &first, &local))
    {
      data_error (layer, error, "train", local);
      return FALSE;
    }
  p->rec_shape = first.shape;
  p->kind = first.kind;
  p->row = shoal_shape_count (&first.shape);

  path = shoal_layer_opt_string (layer, "test");
  if (path != NULL && *path != '\0')
    ok = open_source (layer, "test", path, &p->test, error);
  g_free (path);
  if (!ok)
    return FALSE;

  gint64 t0 = g_get_monotonic_time ();
  if (!validate_shard (p, &p->train, &local))
    {
      data_error (layer, error, "train", local);
      return FALSE;
    }
  if (p->test.ds != NULL && !validate_shard (p, &p->test, &local))
    {
      data_error (layer, error, "test", local);
      return FALSE;
    }
  p->checked = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, NULL);
  gint64 *key = g_new (gint64, 1);
  *key = shard_key (p);
  g_hash_table_add (p->checked, key);
  g_debug ("lmdb_input %s: checked %" G_GUINT64_FORMAT " records in %.0f ms", layer->name,
           p->train.n + p->test.n, (g_get_monotonic_time () - t0) / 1e3);

  double scale = shoal_layer_opt_float (layer, "scale");
  if (!shoal_layer_opt_is_set (layer, "scale"))
    scale = p->kind == SHOAL_RECORD_PIXELS ? 1.0 / 255.0 : 1.0;
  double mean = shoal_layer_opt_float (layer, "mean");
  double std = shoal_layer_opt_float (layer, "std");
  p->mul = (float) (scale / std);
  p->add = (float) (-mean / std);
  if ((guint64) p->batch * p->row > G_MAXINT32)
    {
      shoal_layer_error (layer, error, "batch_size", "%d examples of %zu values exceed 2^31 values a batch",
                         p->batch, p->row);
      return FALSE;
    }

  p->order = g_new (guint32, p->train.n);
  fresh_cursor (layer);

  for (int b = 0; b < 2; b++)
    {
      p->buf[b] = shoal_layer_alloc_floats (layer, (size_t) p->batch * p->row, "batch buffer", error);
      p->lab[b] = p->buf[b] != NULL ? shoal_layer_alloc_floats (layer, (size_t) p->batch, "label buffer", error) : NULL;
      if (p->lab[b] == NULL)
        return FALSE;
    }
  ShoalShape shape = { .ndim = first.shape.ndim + 1 };
  shape.dim[0] = p->batch;
  for (int d = 0; d < first.shape.ndim; d++)
    shape.dim[d + 1] = first.shape.dim[d];
  ShoalShape lshape = shoal_shape_make (1, p->batch);
  shoal_tensor_view (&layer->out, p->buf[0], &shape);
  shoal_tensor_view (&layer->label, p->lab[0], &lshape);
  p->front = 0;

  if (p->prefetch)
    {
      g_mutex_init (&p->lock);
      g_cond_init (&p->cond);
      p->sync_init = TRUE;
      return start_prefetch (layer, error);
    }
  return TRUE;
}

static void
forward_train (ShoalLayer *layer)
{
  LmdbInputPriv *p = layer->priv;

  if (!p->prefetch)
    {
      fill_train (layer, p->buf[p->front], p->lab[p->front]);
      p->next_epochs = p->end_epochs[p->front];
      p->next_pos = p->end_pos[p->front];
      bind_front (layer, p->batch);
      return;
    }
  gint64 t0 = g_get_monotonic_time ();
  g_mutex_lock (&p->lock);
  while (!p->ready)
    g_cond_wait (&p->cond, &p->lock);
  p->ready = FALSE;
  p->front = 1 - p->front;
  p->next_epochs = p->end_epochs[p->front];
  p->next_pos = p->end_pos[p->front];
  p->want = TRUE;          /* refill the buffer the last step used */
  g_cond_broadcast (&p->cond);
  g_mutex_unlock (&p->lock);
  p->wait_us += g_get_monotonic_time () - t0;
  p->waits++;
  bind_front (layer, p->batch);
}

static void
forward_test (ShoalLayer *layer)
{
  LmdbInputPriv *p = layer->priv;

  if (p->test.ds == NULL)
    {
      g_critical ("lmdb_input %s: test forward without a test dataset (num_records is 0)",
                  layer->name);
      bind_front (layer, 0);
      return;
    }
  /* the prefetch thread only writes the back buffer: the front is free */
  int rows = (int) MIN ((guint64) p->batch, p->test.n - p->test_pos);
  float *out = p->buf[p->front], *lab = p->lab[p->front];
  for (int r = 0; r < rows; r++)
    decode_into (p, &p->test, shard_record (&p->test, p->test_pos + (guint64) r), out + (size_t) r * p->row,
                 lab + r);
  p->test_pos += (guint64) rows;
  if (p->test_pos == p->test.n)
    p->test_pos = 0;
  bind_front (layer, rows);
}

/* Rows from the program: raw values as the records hold them, through
 * the same scale, mean and std, for the next forward of either phase. */
static gboolean
lmdb_input_feed (ShoalLayer *layer, const float *data, int rows, const float *labels, GError **error)
{
  LmdbInputPriv *p = layer->priv;
  (void) error;
  if (p->fed == NULL)
    {
      p->fed = shoal_alloc_floats ((size_t) p->batch * p->row);
      p->fed_lab = shoal_alloc_floats ((size_t) p->batch);
    }
  size_t n = (size_t) rows * p->row;
  for (size_t i = 0; i < n; i++)
    p->fed[i] = data[i] * p->mul + p->add;
  for (int r = 0; r < rows; r++)
    p->fed_lab[r] = labels != NULL ? labels[r] : 0.0f;
  p->fed_rows = rows;
  return TRUE;
}

static void
lmdb_input_forward (ShoalLayer *layer, ShoalPhase phase)
{
  LmdbInputPriv *p = layer->priv;
  if (p->fed_rows > 0)
    {
      layer->out.data = p->fed;
      layer->label.data = p->fed_lab;
      shoal_tensor_set_rows (&layer->out, p->fed_rows);
      shoal_tensor_set_rows (&layer->label, p->fed_rows);
      p->fed_rows = 0;
      return;
    }
  if (phase == SHOAL_PHASE_TRAIN)
    forward_train (layer);
  else
    forward_test (layer);
}

static gint64
lmdb_input_num_records (ShoalLayer *layer, ShoalPhase phase)
{
  LmdbInputPriv *p = layer->priv;
  return (gint64) (phase == SHOAL_PHASE_TRAIN ? p->train.n : p->test.n);
}

static void
source_close (Source *src)
{
  shoal_dataset_cursor_free (src->cur);
  shoal_record_codec_free (src->codec);
  shoal_dataset_unref (src->ds);
  memset (src, 0, sizeof *src);
}

/* The training cursor as of the next batch forward will consume: how many
 * epochs were started and the position in the current one.  Format 2
 * adds the test cursor, so that a resumed run's test passes read the
 * batches an uninterrupted run's would (format 1 restarts it at 0).
 * Format 3 adds a CRC-32 of the fields before it: loading replays one
 * shuffle of the shard per epoch, and a damaged epoch count (2^40 after
 * one flipped bit) replayed for hours instead of being refused. */
typedef struct {
  guint32 magic;
  guint32 format;
  guint64 epochs, pos, n;
  guint64 test_pos, test_n;
  guint32 crc, pad;
} CursorState;

#define CURSOR_FORMAT1_BYTES G_STRUCT_OFFSET (CursorState, test_pos)
#define CURSOR_FORMAT2_BYTES G_STRUCT_OFFSET (CursorState, crc)

static guint32
cursor_crc (const CursorState *st)
{
  return (guint32) crc32 (0, (const Bytef *) st, CURSOR_FORMAT2_BYTES);
}

#define CURSOR_MAGIC 0x52554349u  /* "ICUR" */

static GBytes *
lmdb_input_save_state (ShoalLayer *layer)
{
  LmdbInputPriv *p = layer->priv;
  GError *error = NULL;
  if (!follow_context (layer, &error))
    {
      /* the caller moved the net without loading a state first */
      g_critical ("%s", error->message);
      g_error_free (error);
    }
  CursorState st = { CURSOR_MAGIC, 3, p->next_epochs, p->next_pos, p->train.n, p->test_pos, p->test.n, 0, 0 };
  st.crc = cursor_crc (&st);
  return g_bytes_new (&st, sizeof st);
}

static void
stop_prefetch (LmdbInputPriv *p)
{
  if (p->thread == NULL)
    return;
  g_mutex_lock (&p->lock);
  p->stop = TRUE;
  g_cond_broadcast (&p->cond);
  g_mutex_unlock (&p->lock);
  g_thread_join (p->thread);
  p->thread = NULL;
}

static gboolean
lmdb_input_load_state (ShoalLayer *layer, GBytes *state, GError **error)
{
  LmdbInputPriv *p = layer->priv;
  if (!follow_context (layer, error))
    return FALSE;
  CursorState st = { 0 };
  gsize len = 0;
  const void *data = g_bytes_get_data (state, &len);
  static const gsize format_bytes[] = { 0, CURSOR_FORMAT1_BYTES, CURSOR_FORMAT2_BYTES, sizeof st };
  if (len == sizeof st || len == CURSOR_FORMAT2_BYTES || len == CURSOR_FORMAT1_BYTES)
    memcpy (&st, data, len);
  if (st.magic != CURSOR_MAGIC || st.format < 1 || st.format > 3 || len != format_bytes[st.format]
      || (st.format == 3 && st.crc != cursor_crc (&st)))
    {
      data_error (layer, error, NULL, g_error_new_literal (SHOAL_ERROR, SHOAL_ERROR_DATA,
                                                           "the checkpointed data cursor is damaged"));
      return FALSE;
    }
  if (st.format >= 2 && (st.test_n != p->test.n || st.test_pos >= MAX (p->test.n, (guint64) 1)))
    {
      data_error (layer, error, "test",
                  g_error_new (SHOAL_ERROR, SHOAL_ERROR_DATA, "the checkpoint was made with %" G_GUINT64_FORMAT
                               " test records, the dataset now gives %" G_GUINT64_FORMAT, st.test_n, p->test.n));
      return FALSE;
    }
  p->test_pos = st.test_pos;
  if (st.n != p->train.n || st.pos > p->train.n)
    {
      data_error (layer, error, "train",
                  g_error_new (SHOAL_ERROR, SHOAL_ERROR_DATA, "the checkpoint was made with %" G_GUINT64_FORMAT
                               " training records in this shard, the dataset now gives %" G_GUINT64_FORMAT,
                               st.n, p->train.n));
      return FALSE;
    }
  stop_prefetch (p);
  /* rebuild the order of the current epoch by replaying its shuffles */
  p->rng = p->rng0;
  for (guint64 i = 0; i < p->train.n; i++)
    p->order[i] = (guint32) shard_record (&p->train, i);
  if (p->shuffle)
    for (guint64 e = 0; e < st.epochs; e++)
      shoal_rng_shuffle_u32 (&p->rng, p->order, p->train.n);
  p->epochs = p->next_epochs = st.epochs;
  p->order_pos = p->next_pos = st.pos;
  if (p->prefetch)
    {
      p->stop = FALSE;
      p->ready = FALSE;
      return start_prefetch (layer, error);
    }
  return TRUE;
}

static void
lmdb_input_finalize (ShoalLayer *layer)
{
  LmdbInputPriv *p = layer->priv;

  if (p == NULL)
    return;
  shoal_free_aligned (p->fed);
  shoal_free_aligned (p->fed_lab);
  p->fed = p->fed_lab = NULL;
  if (p->thread != NULL)
    {
      stop_prefetch (p);
      if (p->waits > 0)
        g_debug ("lmdb_input %s: forward waited %.3f ms per batch for the prefetch thread",
                 layer->name, p->wait_us / 1e3 / (double) p->waits);
    }
  if (p->sync_init)
    {
      g_mutex_clear (&p->lock);
      g_cond_clear (&p->cond);
      p->sync_init = FALSE;
    }
  source_close (&p->train);
  source_close (&p->test);
  if (p->checked != NULL)
    g_hash_table_destroy (p->checked);
  p->checked = NULL;
  g_free (p->order);
  p->order = NULL;
  for (int b = 0; b < 2; b++)
    {
      shoal_free_aligned (p->buf[b]);
      shoal_free_aligned (p->lab[b]);
      p->buf[b] = p->lab[b] = NULL;
    }
  /* out and label viewed the buffers just freed */
  shoal_tensor_clear (&layer->out);
  shoal_tensor_clear (&layer->label);
}

const ShoalLayerOps shoal_layer_lmdb_input_ops = {
  .type = "lmdb_input",
  .summary = "batches of Records from LMDB datasets (shoal import), sharded, shuffled, prefetched",
  .flags = SHOAL_LAYER_INPUT | SHOAL_LAYER_OWN_ROWS,
  .split = { .dims = SHOAL_SPLIT_BATCH, .rows_key = "batch_size" },
  .min_srcs = 0,
  .max_srcs = 0,
  .options = lmdb_input_options,
  .priv_size = sizeof (LmdbInputPriv),
  .setup = lmdb_input_setup,
  .forward = lmdb_input_forward,
  .finalize = lmdb_input_finalize,
  .num_records = lmdb_input_num_records,
  .feed = lmdb_input_feed,
  .save_state = lmdb_input_save_state,
  .load_state = lmdb_input_load_state,
};
