/* A worker group spread over processes (nworkers_per_procs <
 * nworkers_per_group with feature or hybrid splits).
 *
 * Every process of the group builds the same plan and the sub-nets of its
 * own workers.  The leader (the process of worker 0) is the group towards
 * the servers: its store is the group's, its param client pushes the
 * group's gradient.  Each forward or step it sends every follower a
 * command with the values its workers read; the followers run their
 * sub-nets and send back their workers' gradients (a feature-split
 * param's block of rows, a batch-split param's whole gradient, which the
 * leader sums in worker order as in one process), values written in
 * forward (running statistics), and their losses and metrics.  Bridges
 * between workers of different processes carry activations and their
 * gradients as messages of their own, in both directions, while the
 * sub-nets run.  So the group computes what it computes in one process,
 * to the bit, and the servers see one group.
 *
 * Messages are flat little-endian records (the machines shoal runs on):
 * a Header, then floats.  Channels: pair i of the plan's bridges uses 2i
 * for data and 2i + 1 for the gradient; commands to process j use
 * CH_COMMAND + j, its results CH_RESULT + j. */
#include "partition/group_priv.h"

#include <string.h>

#include "core/error.h"

#define CH_COMMAND 0x40000000u
#define CH_RESULT 0x50000000u
#define WIRE_MAGIC 0x53484757u  /* "SHGW" */

/* commands beyond partition's Command */
enum { WIRE_SAVE = 100, WIRE_LOAD = 101 };

typedef struct {
  guint32 magic;
  guint32 cmd;
  guint32 phase;
  guint32 failed;   /* QUIT: the leader failed; a result: the follower failed, message follows */
  guint64 seq;
  guint32 values;   /* a forward or step: the values follow (else: as in the last command) */
  guint32 reserved;
} Header;

typedef struct {
  ShoalGroupNet *g;
  guint32 data_ch, grad_ch;
  int src_proc, dst_proc;
} WireLink;

/* Commands wait far longer than bridges: between two steps the leader
 * may wait for slow groups at the servers or write a checkpoint. */
#define COMMAND_WAIT_MS (30 * 60 * 1000)

void
spread_record_error (ShoalGroupNet *g, GError *error)
{
  g_mutex_lock (&g->lock);
  if (g->wire_error == NULL)
    {
      g_warning ("group net, process %d of %d: %s", g->wire->this_proc, g->wire->nprocs, error->message);
      g->wire_error = error;
    }
  else
    g_error_free (error);
  g_mutex_unlock (&g->lock);
}

static gboolean
wire_failed (ShoalGroupNet *g)
{
  g_mutex_lock (&g->lock);
  gboolean failed = g->wire_error != NULL;
  g_mutex_unlock (&g->lock);
  return failed;
}

static gboolean
send_msg (ShoalGroupNet *g, int proc, guint32 channel, GByteArray *b)
{
  GBytes *msg = g_byte_array_free_to_bytes (b);
  GError *error = NULL;
  gboolean ok = g->wire->send (g->wire->data, proc, channel, msg, &error);
  g_bytes_unref (msg);
  if (!ok)
    spread_record_error (g, error);
  return ok;
}

/* The next message of `channel` (sent by process `from`), or NULL (the
 * failure recorded) - at once when the wire already failed, so that one
 * dead peer does not cost a timeout per bridge, and within about a second
 * of `from` dying where the wire can tell. */
static GBytes *recv_msg_wait (ShoalGroupNet *g, guint32 channel, int from, gint64 timeout_ms);

/* recv_msg_wait, counting the wait for data and results (not a
 * follower's idle wait for commands) as the group's peer wait. */
static GBytes *
recv_msg (ShoalGroupNet *g, guint32 channel, int from, gint64 timeout_ms)
{
  gint64 t0 = g_get_monotonic_time ();
  GBytes *msg = recv_msg_wait (g, channel, from, timeout_ms);
  if (channel < CH_COMMAND || channel >= CH_RESULT)
    g_atomic_pointer_add ((gssize *) &g->peer_wait_us, (gssize) (g_get_monotonic_time () - t0));
  return msg;
}

static GBytes *
recv_msg_wait (ShoalGroupNet *g, guint32 channel, int from, gint64 timeout_ms)
{
  const ShoalGroupWire *wire = g->wire;
  gint64 deadline = g_get_monotonic_time () + timeout_ms * 1000;
  for (;;)
    {
      if (wire_failed (g))
        return NULL;
      gint64 left_ms = MAX ((deadline - g_get_monotonic_time ()) / 1000, 0);
      GError *error = NULL;
      GBytes *msg = wire->recv (wire->data, channel, wire->alive != NULL ? MIN (left_ms, 1000) : left_ms, &error);
      if (msg != NULL)
        return msg;
      if (wire->alive == NULL || left_ms <= 1000 || !g_error_matches (error, SHOAL_ERROR, SHOAL_ERROR_TIMEOUT))
        {
          spread_record_error (g, error);
          return NULL;
        }
      g_clear_error (&error);
      if (!wire->alive (wire->data, from, &error))
        {
          spread_record_error (g, error);
          return NULL;
        }
    }
}

static void
put (GByteArray *b, const void *data, size_t n)
{
  g_byte_array_append (b, data, (guint) n);
}

/* A reader over a message that fails (once, recorded) on a short one. */
typedef struct {
  const guint8 *p, *end;
  gboolean short_read;
} Reader;

static gboolean
take (Reader *r, void *dst, size_t n)
{
  if (r->short_read || (size_t) (r->end - r->p) < n)
    {
      r->short_read = TRUE;
      if (dst != NULL)
        memset (dst, 0, n);
      return FALSE;
    }
  if (dst != NULL)
    memcpy (dst, r->p, n);
  r->p += n;
  return TRUE;
}

static const guint8 *
take_floats (Reader *r, size_t count)
{
  size_t n = count * sizeof (float);
  if (r->short_read || (size_t) (r->end - r->p) < n)
    {
      r->short_read = TRUE;
      return NULL;
    }
  const guint8 *at = r->p;
  r->p += n;
  return at;
}

static Reader
reader_of (GBytes *msg)
{
  gsize len = 0;
  const guint8 *p = g_bytes_get_data (msg, &len);
  return (Reader) { p, p + len, FALSE };
}

static void
damaged (ShoalGroupNet *g, const char *what)
{
  spread_record_error (g, g_error_new (SHOAL_ERROR, SHOAL_ERROR_RPC,
                                       "a damaged or unexpected %s message between the group's processes", what));
}

/* ---- bridges between processes ----------------------------------------- */

static void
wire_send_data (ShoalBridgeLink *link, ShoalLayer *src)
{
  WireLink *wl = link->data;
  gint32 rows = shoal_tensor_rows (&src->out), labels = src->label.data != NULL;
  size_t count = (size_t) rows * shoal_tensor_row_size (&src->out);
  GByteArray *b = g_byte_array_sized_new ((guint) (8 + (count + (size_t) rows) * sizeof (float)));
  put (b, &rows, sizeof rows);
  put (b, &labels, sizeof labels);
  put (b, src->out.data, count * sizeof (float));
  if (labels)  /* several per row for sequences */
    put (b, src->label.data, (size_t) rows * shoal_tensor_row_size (&src->label) * sizeof (float));
  /* sent after a failure too: the peer must not wait for it */
  send_msg (wl->g, wl->dst_proc, wl->data_ch, b);
}

static void
wire_recv_data (ShoalBridgeLink *link, ShoalLayer *dst)
{
  WireLink *wl = link->data;
  GBytes *msg = recv_msg (wl->g, wl->data_ch, wl->src_proc, wl->g->wait_ms);
  Reader r = msg ? reader_of (msg) : (Reader) { NULL, NULL, TRUE };
  gint32 rows = 0, labels = 0;
  take (&r, &rows, sizeof rows);
  take (&r, &labels, sizeof labels);
  gint32 max_rows = (gint32) (dst->out.capacity / MAX (shoal_tensor_row_size (&dst->out), (size_t) 1));
  if (rows < 0 || rows > max_rows || (labels != 0) != (dst->label.data != NULL))
    r.short_read = TRUE;
  if (r.short_read)
    rows = shoal_tensor_rows (&dst->out);  /* a failed step still runs: zeros, the error is recorded */
  shoal_tensor_set_rows (&dst->out, rows);
  size_t count = (size_t) rows * shoal_tensor_row_size (&dst->out);
  const guint8 *data = take_floats (&r, count);
  size_t nlabels = dst->label.data != NULL ? (size_t) rows * shoal_tensor_row_size (&dst->label) : 0;
  const guint8 *label = labels && dst->label.data != NULL ? take_floats (&r, nlabels) : NULL;
  if (dst->label.data != NULL)
    shoal_tensor_set_rows (&dst->label, rows);
  if (r.short_read || r.p != r.end)
    {
      if (msg != NULL)
        damaged (wl->g, "bridge data");
      memset (dst->out.data, 0, count * sizeof (float));
      if (dst->label.data != NULL)
        memset (dst->label.data, 0, nlabels * sizeof (float));
    }
  else
    {
      memcpy (dst->out.data, data, count * sizeof (float));
      if (label != NULL)
        memcpy (dst->label.data, label, nlabels * sizeof (float));
    }
  if (msg != NULL)
    g_bytes_unref (msg);
}

static void
wire_send_grad (ShoalBridgeLink *link, ShoalLayer *dst)
{
  WireLink *wl = link->data;
  gint32 rows = shoal_tensor_rows (&dst->grad);
  size_t count = shoal_tensor_count (&dst->grad);
  GByteArray *b = g_byte_array_sized_new ((guint) (4 + count * sizeof (float)));
  put (b, &rows, sizeof rows);
  put (b, dst->grad.data, count * sizeof (float));
  send_msg (wl->g, wl->src_proc, wl->grad_ch, b);
}

static void
wire_recv_grad (ShoalBridgeLink *link, ShoalLayer *src)
{
  WireLink *wl = link->data;
  ShoalTensor *dst = src->src_grad[0];
  size_t count = shoal_tensor_count (dst);
  GBytes *msg = recv_msg (wl->g, wl->grad_ch, wl->dst_proc, wl->g->wait_ms);
  Reader r = msg ? reader_of (msg) : (Reader) { NULL, NULL, TRUE };
  gint32 rows = 0;
  take (&r, &rows, sizeof rows);
  const guint8 *data = rows == shoal_tensor_rows (dst) ? take_floats (&r, count) : NULL;
  if (data == NULL || r.p != r.end)
    {
      if (msg != NULL)
        damaged (wl->g, "bridge gradient");
      memset (dst->data, 0, count * sizeof (float));
    }
  else
    memcpy (dst->data, data, count * sizeof (float));
  if (msg != NULL)
    g_bytes_unref (msg);
}

static const ShoalBridgeTransport wire_transport = {
  .send_data = wire_send_data,
  .recv_data = wire_recv_data,
  .send_grad = wire_send_grad,
  .recv_grad = wire_recv_grad,
};

gboolean
spread_link (ShoalGroupNet *g, ShoalBridgeLink *link, int src_worker, int dst_worker, guint index,
             GError **error)
{
  WireLink *wl = g_new0 (WireLink, 1);
  *wl = (WireLink) { g, 2 * index, 2 * index + 1, g->ww[src_worker].proc, g->ww[dst_worker].proc };
  link->transport = &wire_transport;
  link->data = wl;
  ShoalLayer *end = link->src != NULL ? link->src : link->dst;
  if (end == NULL || index >= CH_COMMAND / 2)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL, "bridge %u between workers %d and %d: no end here",
                   index, src_worker, dst_worker);
      return FALSE;
    }
  /* the other end is in its own process, planned from the same conf: the
   * shapes agree by construction and are checked on every message */
  ShoalBridgePriv *priv = end->priv;
  priv->link = link;
  return TRUE;
}

/* ---- what travels with commands and results ---------------------------- */

/* The values process j's workers read: per param, the span of their
 * blocks (consecutive workers: adjacent blocks, or the whole param). */
static GArray *
values_of_proc (ShoalGroupNet *g, int j)
{
  GArray *out = g_array_new (FALSE, FALSE, sizeof (ValueRange));
  int w0 = j * g->nlocal;
  GArray *first = g->ww[w0].ranges;
  for (guint i = 0; i < first->len; i++)
    {
      size_t lo = G_MAXSIZE, hi = 0;
      for (int w = w0; w < w0 + g->nlocal; w++)
        {
          const WireRange *r = &g_array_index (g->ww[w].ranges, WireRange, i);
          lo = MIN (lo, r->offset);
          hi = MAX (hi, r->offset + r->count);
        }
      ValueRange v = { lo, hi - lo };
      g_array_append_val (out, v);
    }
  return out;
}

gboolean
spread_prepare (ShoalGroupNet *g, GError **error)
{
  int nprocs = g->wire->nprocs;
  /* every worker but 0 has a part of the same layers: equal range lists */
  int ref = g->first == 0 ? g->nlocal : g->first;
  for (int w = ref; w < g->k; w++)
    if ((g->first == 0 || group_is_local (g, w)) && g->ww[w].ranges->len != g->ww[ref].ranges->len)
      {
        g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL,
                     "spread group: worker %d has %u param blocks, worker %d %u", w,
                     g->ww[w].ranges->len, ref, g->ww[ref].ranges->len);
        return FALSE;
      }
  g->proc_values = g_new0 (GArray *, nprocs);
  if (g->first == 0)
    {
      for (int j = 1; j < nprocs; j++)
        g->proc_values[j] = values_of_proc (g, j);
      for (int w = g->nlocal; w < g->k; w++)
        {
          g->ww[w].value = g_new0 (double, g->plan.norig);
          g->ww[w].rows = g_new0 (int, g->plan.norig);
        }
    }
  else
    g->proc_values[g->wire->this_proc] = values_of_proc (g, g->wire->this_proc);
  return TRUE;
}

void
spread_free (ShoalGroupNet *g)
{
  for (int w = 0; g->ww != NULL && w < g->k; w++)
    {
      g_array_free (g->ww[w].ranges, TRUE);
      g_free (g->ww[w].value);
      g_free (g->ww[w].rows);
    }
  g_free (g->ww);
  g->ww = NULL;
  for (int j = 0; g->proc_values != NULL && j < g->wire->nprocs; j++)
    if (g->proc_values[j] != NULL)
      g_array_free (g->proc_values[j], TRUE);
  g_free (g->proc_values);
  g->proc_values = NULL;
  for (int j = 0; g->sent_values != NULL && j < g->wire->nprocs; j++)
    shoal_free_aligned (g->sent_values[j]);
  g_clear_pointer (&g->sent_values, g_free);
  if (g->land_bufs != NULL)
    g_ptr_array_free (g->land_bufs, TRUE);
  g->land_bufs = NULL;
  g_clear_error (&g->wire_error);
}

static GByteArray *
header (guint32 cmd, guint32 phase, guint32 failed, guint64 seq)
{
  Header h = { WIRE_MAGIC, cmd, phase, failed, seq, 0, 0 };
  GByteArray *b = g_byte_array_new ();
  put (b, &h, sizeof h);
  return b;
}

static gboolean
read_header (Reader *r, Header *h)
{
  return take (r, h, sizeof *h) && h->magic == WIRE_MAGIC;
}

/* The workers of the group's process j with a part of original layer l. */
static int
parts_in_proc (ShoalGroupNet *g, const PlanLayer *o, int j)
{
  int n = 0;
  for (int w = j * g->nlocal; w < (j + 1) * g->nlocal; w++)
    n += shoal_plan_has_part (o, w);
  return n;
}

/* ---- leader ------------------------------------------------------------- */

/* Whether process j's values are those its last command carried. */
static gboolean
same_as_sent (ShoalGroupNet *g, int j)
{
  if (g->sent_values == NULL || g->sent_values[j] == NULL)
    return FALSE;
  GArray *vr = g->proc_values[j];
  const float *sent = g->sent_values[j];
  for (guint i = 0; i < vr->len; i++)
    {
      const ValueRange *v = &g_array_index (vr, ValueRange, i);
      if (memcmp (sent, g->store->values + v->offset, v->count * sizeof (float)) != 0)
        return FALSE;
      sent += v->count;
    }
  return TRUE;
}

/* Keeps a copy of process j's values for the test forwards that follow
 * (keep), or forgets it (train steps change the values anyway). */
static void
remember_sent (ShoalGroupNet *g, int j, gboolean keep)
{
  if (g->sent_values == NULL)
    g->sent_values = g_new0 (float *, g->wire->nprocs);
  if (!keep)
    {
      g_clear_pointer (&g->sent_values[j], shoal_free_aligned);
      return;
    }
  GArray *vr = g->proc_values[j];
  size_t total = 0;
  for (guint i = 0; i < vr->len; i++)
    total += g_array_index (vr, ValueRange, i).count;
  if (g->sent_values[j] == NULL)
    g->sent_values[j] = shoal_alloc_floats (MAX (total, (size_t) 1));
  float *dst = g->sent_values[j];
  for (guint i = 0; i < vr->len; i++)
    {
      const ValueRange *v = &g_array_index (vr, ValueRange, i);
      memcpy (dst, g->store->values + v->offset, v->count * sizeof (float));
      dst += v->count;
    }
}

void
spread_send_command (ShoalGroupNet *g, Command cmd)
{
  if (wire_failed (g))
    return;
  g->seq++;
  /* within a test pass (a run of test forwards) the values stay: a
   * copy of what was sent tells, cheaper than sending them again */
  gboolean test = cmd == CMD_FORWARD && g->phase == SHOAL_PHASE_TEST;
  for (int j = 1; j < g->wire->nprocs; j++)
    {
      gboolean values = cmd != CMD_BACKWARD && !(test && same_as_sent (g, j));
      if (values)
        remember_sent (g, j, test);
      GByteArray *b = header (cmd, g->phase, 0, g->seq);
      ((Header *) b->data)->values = values;
      if (values)
        {
          GArray *vr = g->proc_values[j];
          for (guint i = 0; i < vr->len; i++)
            {
              const ValueRange *v = &g_array_index (vr, ValueRange, i);
              put (b, g->store->values + v->offset, v->count * sizeof (float));
            }
        }
      if (!send_msg (g, j, CH_COMMAND + (guint32) j, b))
        return;
    }
}

/* One follower's result: its workers' gradients, values and metrics. */
static void
take_result (ShoalGroupNet *g, Command cmd, int j, GBytes *msg)
{
  Reader r = reader_of (msg);
  Header h;
  if (!read_header (&r, &h) || h.seq != g->seq || h.cmd != (guint32) cmd)
    {
      damaged (g, "result");
      return;
    }
  if (h.failed)
    {
      char *why = g_strndup ((const char *) r.p, (gsize) (r.end - r.p));
      spread_record_error (g, g_error_new (SHOAL_ERROR, SHOAL_ERROR_RPC, "process %d of the group failed: %s",
                                           j, why));
      g_free (why);
      return;
    }
  for (int w = j * g->nlocal; w < (j + 1) * g->nlocal; w++)
    {
      GArray *ranges = g->ww[w].ranges;
      for (guint i = 0; cmd != CMD_FORWARD && i < ranges->len; i++)
        {
          const WireRange *rg = &g_array_index (ranges, WireRange, i);
          const guint8 *src = take_floats (&r, rg->count);
          if (src == NULL)
            break;
          if (rg->land != NULL)
            memcpy (rg->land, src, rg->count * sizeof (float));
          else
            {
              /* its block of rows: nobody else writes there */
              float *restrict dst = g->store->grads + rg->offset;
              const float *grad = (const float *) src;
              for (size_t e = 0; e < rg->count; e++)
                dst[e] += grad[e];
            }
        }
      for (guint i = 0; cmd != CMD_BACKWARD && i < ranges->len; i++)
        {
          const WireRange *rg = &g_array_index (ranges, WireRange, i);
          if (!rg->values_back)
            continue;
          const guint8 *src = take_floats (&r, rg->count);
          if (src != NULL)
            memcpy (g->store->values + rg->offset, src, rg->count * sizeof (float));
        }
      for (int l = 0; cmd != CMD_BACKWARD && l < g->plan.norig; l++)
        {
          const PlanLayer *o = &g->plan.origs[l];
          if (!shoal_plan_has_part (o, w))
            continue;
          if (o->ops->flags & (SHOAL_LAYER_LOSS | SHOAL_LAYER_METRIC))
            {
              take (&r, &g->ww[w].value[l], sizeof (double));
              take (&r, &g->ww[w].rows[l], sizeof (int));
            }
          else if (l == g->plan.input)
            take (&r, &g->ww[w].rows[l], sizeof (int));
        }
    }
  if (r.short_read || r.p != r.end)
    {
      damaged (g, "result");
      return;
    }
  for (int i = 0; cmd != CMD_FORWARD && i < g->nplayers; i++)
    group_players_done (g, i, parts_in_proc (g, &g->plan.origs[g->players[i].orig], j));
}

void
spread_collect (ShoalGroupNet *g, Command cmd)
{
  for (int j = 1; j < g->wire->nprocs; j++)
    {
      GBytes *msg = recv_msg (g, CH_RESULT + (guint32) j, j, g->wait_ms);
      if (msg == NULL)
        return;
      take_result (g, cmd, j, msg);
      g_bytes_unref (msg);
    }
}

/* A command answered with a header and a payload, the leader's side. */
static GBytes *
round_trip (ShoalGroupNet *g, int j, guint32 cmd, GByteArray *payload, GError **error)
{
  GByteArray *b = header (cmd, 0, 0, ++g->seq);
  if (payload != NULL)
    put (b, payload->data, payload->len);
  GBytes *reply = NULL;
  if (send_msg (g, j, CH_COMMAND + (guint32) j, b))
    reply = recv_msg (g, CH_RESULT + (guint32) j, j, g->wait_ms);
  Reader r = reply ? reader_of (reply) : (Reader) { NULL, NULL, TRUE };
  Header h;
  if (reply != NULL && (!read_header (&r, &h) || h.seq != g->seq || h.cmd != cmd))
    damaged (g, "state");
  else if (reply != NULL && h.failed)
    {
      char *why = g_strndup ((const char *) r.p, (gsize) (r.end - r.p));
      spread_record_error (g, g_error_new (SHOAL_ERROR, SHOAL_ERROR_RPC, "process %d of the group: %s", j, why));
      g_free (why);
    }
  if (wire_failed (g))
    {
      if (reply != NULL)
        g_bytes_unref (reply);
      shoal_group_net_ok (g, error);
      return NULL;
    }
  return reply;
}

gboolean
spread_save_states (ShoalGroupNet *g, GBytes **states, GError **error)
{
  for (int j = 1; j < g->wire->nprocs; j++)
    {
      GBytes *reply = round_trip (g, j, WIRE_SAVE, NULL, error);
      if (reply == NULL)
        return FALSE;
      Reader r = reader_of (reply);
      take (&r, NULL, sizeof (Header));
      for (int w = j * g->nlocal; w < (j + 1) * g->nlocal; w++)
        {
          guint32 n = 0;
          take (&r, &n, sizeof n);
          if (r.short_read || (size_t) (r.end - r.p) < n)
            break;
          states[w] = g_bytes_new (r.p, n);
          r.p += n;
        }
      gboolean whole = !r.short_read && r.p == r.end && states[(j + 1) * g->nlocal - 1] != NULL;
      g_bytes_unref (reply);
      if (!whole)
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC, "process %d of the group sent a damaged state", j);
          return FALSE;
        }
    }
  return TRUE;
}

gboolean
spread_load_states (ShoalGroupNet *g, GBytes **states, GError **error)
{
  for (int j = 1; j < g->wire->nprocs; j++)
    {
      GByteArray *payload = g_byte_array_new ();
      for (int w = j * g->nlocal; w < (j + 1) * g->nlocal; w++)
        {
          gsize len = 0;
          gconstpointer data = g_bytes_get_data (states[w], &len);
          guint32 n = (guint32) len;
          put (payload, &n, sizeof n);
          put (payload, data, len);
        }
      GBytes *reply = round_trip (g, j, WIRE_LOAD, payload, error);
      g_byte_array_unref (payload);
      if (reply == NULL)
        return FALSE;
      g_bytes_unref (reply);
    }
  return TRUE;
}

/* ---- follower ----------------------------------------------------------- */

static void
put_result (ShoalGroupNet *g, GByteArray *b, Command cmd)
{
  for (int w = g->first; w < g->first + g->nlocal; w++)
    {
      GArray *ranges = g->ww[w].ranges;
      for (guint i = 0; cmd != CMD_FORWARD && i < ranges->len; i++)
        {
          const WireRange *rg = &g_array_index (ranges, WireRange, i);
          put (b, rg->sub->grad.data, rg->count * sizeof (float));
        }
      for (guint i = 0; cmd != CMD_BACKWARD && i < ranges->len; i++)
        {
          const WireRange *rg = &g_array_index (ranges, WireRange, i);
          if (rg->values_back)
            put (b, g->store->values + rg->offset, rg->count * sizeof (float));
        }
      for (int l = 0; cmd != CMD_BACKWARD && l < g->plan.norig; l++)
        {
          const PlanLayer *o = &g->plan.origs[l];
          ShoalLayer *part = o->parts[w];
          if (part == NULL)
            continue;
          if (o->ops->flags & (SHOAL_LAYER_LOSS | SHOAL_LAYER_METRIC))
            {
              double v = part->out.data[0];
              int rows = part->nsrcs > 0 ? shoal_tensor_rows (&part->srcs[0]->out) : 1;
              put (b, &v, sizeof v);
              put (b, &rows, sizeof rows);
            }
          else if (l == g->plan.input)
            {
              int rows = shoal_tensor_rows (&part->out);
              put (b, &rows, sizeof rows);
            }
        }
    }
}

static gboolean
take_values (ShoalGroupNet *g, Reader *r)
{
  GArray *vr = g->proc_values[g->wire->this_proc];
  for (guint i = 0; i < vr->len; i++)
    {
      const ValueRange *v = &g_array_index (vr, ValueRange, i);
      const guint8 *src = take_floats (r, v->count);
      if (src == NULL)
        return FALSE;
      memcpy (g->store->values + v->offset, src, v->count * sizeof (float));
    }
  return r->p == r->end;
}

static GByteArray *
local_states (ShoalGroupNet *g, const Header *h)
{
  GByteArray *b = header (h->cmd, 0, 0, h->seq);
  for (int w = g->first; w < g->first + g->nlocal; w++)
    {
      GBytes *one = shoal_net_save_state (g->nets[w]);
      gsize len = 0;
      gconstpointer data = g_bytes_get_data (one, &len);
      guint32 n = (guint32) len;
      put (b, &n, sizeof n);
      put (b, data, len);
      g_bytes_unref (one);
    }
  return b;
}

static gboolean
load_local_states (ShoalGroupNet *g, Reader *r, GError **error)
{
  for (int w = g->first; w < g->first + g->nlocal; w++)
    {
      guint32 n = 0;
      if (!take (r, &n, sizeof n) || (size_t) (r->end - r->p) < n)
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA, "worker %d: a damaged state from the leader", w);
          return FALSE;
        }
      GBytes *one = g_bytes_new (r->p, n);
      r->p += n;
      gboolean ok = shoal_net_load_state (g->nets[w], one, error);
      g_bytes_unref (one);
      if (!ok)
        return FALSE;
    }
  return TRUE;
}

static GByteArray *
failure (const Header *h, const char *message)
{
  GByteArray *b = header (h->cmd, 0, 1, h->seq);
  put (b, message, strlen (message));
  return b;
}

/* How long a follower whose result could not be delivered waits for the
 * leader's quit before it calls the leader gone. */
#define QUIT_GRACE_MS 3000

/* Sends a follower's result to the leader (takes reply).  FALSE with
 * *error NULL: the send failed, but an orderly quit from the leader
 * followed - the leader puts a result in its mailbox before the RPC's
 * reply is written, may then end the run and exit before writing it, and
 * quits only once it has every result, so it had this one. */
static gboolean
send_result (ShoalGroupNet *g, guint32 me, GByteArray *reply, GError **error)
{
  GBytes *msg = g_byte_array_free_to_bytes (reply);
  GError *local = NULL;
  gboolean ok = g->wire->send (g->wire->data, 0, CH_RESULT + me, msg, &local);
  g_bytes_unref (msg);
  if (ok)
    return TRUE;
  GError *recv_error = NULL;
  GBytes *next = g->wire->recv (g->wire->data, CH_COMMAND + me, QUIT_GRACE_MS, &recv_error);
  g_clear_error (&recv_error);
  gboolean quit = FALSE;
  if (next != NULL)
    {
      Reader r = reader_of (next);
      Header h;
      quit = read_header (&r, &h) && h.cmd == CMD_QUIT && !h.failed;
      g_bytes_unref (next);
    }
  if (quit)
    g_error_free (local);
  else
    g_propagate_error (error, local);
  return FALSE;
}

gboolean
shoal_group_net_serve (ShoalGroupNet *g, GError **error)
{
  g_return_val_if_fail (g->wire != NULL && g->first > 0, FALSE);
  guint32 me = (guint32) g->wire->this_proc;
  for (;;)
    {
      GBytes *msg = recv_msg (g, CH_COMMAND + me, 0, COMMAND_WAIT_MS);
      if (msg == NULL)
        break;
      Reader r = reader_of (msg);
      Header h;
      /* a quit may follow commands that never arrived (the leader failed) */
      if (!read_header (&r, &h) || (h.seq != g->seq + 1 && h.cmd != CMD_QUIT))
        {
          g_bytes_unref (msg);
          damaged (g, "command");
          break;
        }
      g->seq = h.seq;
      GByteArray *reply = NULL;
      GError *local = NULL;
      switch (h.cmd)
        {
        case CMD_QUIT:
          g_bytes_unref (msg);
          if (h.failed)
            {
              g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_RPC,
                           "group net, process %u: the group's leader failed", me);
              return FALSE;
            }
          return TRUE;
        case CMD_FORWARD:
        case CMD_STEP:
        case CMD_BACKWARD:
          if (h.values ? !take_values (g, &r) : r.p != r.end)
            {
              damaged (g, "command");
              break;
            }
          g->phase = (ShoalPhase) h.phase;
          if (h.cmd != CMD_FORWARD)
            {
              shoal_param_store_zero_grads (g->store);
              group_arm_backward (g, NULL, NULL);
            }
          group_run_command (g, (Command) h.cmd);
          reply = wire_failed (g) ? NULL : header (h.cmd, 0, 0, h.seq);
          if (reply != NULL)
            put_result (g, reply, (Command) h.cmd);
          break;
        case WIRE_SAVE:
          reply = local_states (g, &h);
          break;
        case WIRE_LOAD:
          reply = load_local_states (g, &r, &local) ? header (h.cmd, 0, 0, h.seq) : failure (&h, local->message);
          g_clear_error (&local);
          break;
        default:
          damaged (g, "command");
        }
      g_bytes_unref (msg);
      if (reply == NULL && !wire_failed (g))
        damaged (g, "command");
      if (reply == NULL)
        {
          /* tell the leader, which would otherwise wait for this result */
          g_mutex_lock (&g->lock);
          char *why = g_strdup (g->wire_error->message);
          g_mutex_unlock (&g->lock);
          GByteArray *f = failure (&h, why);
          g_free (why);
          GBytes *fb = g_byte_array_free_to_bytes (f);
          g->wire->send (g->wire->data, 0, CH_RESULT + me, fb, NULL);
          g_bytes_unref (fb);
          break;
        }
      GError *send_error = NULL;
      if (!send_result (g, me, reply, &send_error))
        {
          if (send_error == NULL)
            return TRUE;   /* the leader took it and ended */
          spread_record_error (g, send_error);
          break;
        }
    }
  return shoal_group_net_ok (g, error);
}

/* ---- both --------------------------------------------------------------- */

void
shoal_group_net_finish (ShoalGroupNet *g, gboolean ok)
{
  if (g->wire == NULL || g->first != 0 || g->finished)
    return;
  g->finished = TRUE;
  g->seq++;
  for (int j = 1; j < g->wire->nprocs; j++)
    {
      GBytes *msg = g_byte_array_free_to_bytes (header (CMD_QUIT, 0, !ok || wire_failed (g), g->seq));
      GError *error = NULL;
      if (!g->wire->send (g->wire->data, j, CH_COMMAND + (guint32) j, msg, &error))
        {
          g_warning ("group net: cannot tell process %d of the group to stop: %s", j, error->message);
          g_error_free (error);
        }
      g_bytes_unref (msg);
    }
}

double
shoal_group_net_peer_wait_seconds (ShoalGroupNet *g)
{
  return (double) (gint64) g_atomic_pointer_get ((gssize *) &g->peer_wait_us) / 1e6;
}

gboolean
shoal_group_net_ok (ShoalGroupNet *g, GError **error)
{
  g_mutex_lock (&g->lock);
  gboolean ok = g->wire_error == NULL;
  if (!ok)
    g_propagate_error (error, g_error_copy (g->wire_error));
  g_mutex_unlock (&g->lock);
  return ok;
}

size_t
shoal_group_net_max_message_bytes (ShoalGroupNet *g)
{
  if (g->wire == NULL)
    return 0;
  /* a result: every worker's gradient of the whole store at most, and its values */
  size_t bytes = (size_t) (g->nlocal + 1) * g->store->total * sizeof (float);
  for (guint p = 0; g->links != NULL && p < g->links->len; p++)
    {
      ShoalBridgeLink *link = g_ptr_array_index (g->links, p);
      ShoalLayer *end = link->src != NULL ? link->src : link->dst;
      bytes = MAX (bytes, (shoal_tensor_count (&end->out) + (size_t) end->out.shape.dim[0]) * sizeof (float));
    }
  return bytes + (1u << 20);  /* headers, metrics, the workers' states */
}
