/* The virtual clock: every unit and server group of a layout in this
 * process, on a discrete-event scheduler (emulator.h says what is
 * emulated and how).
 *
 * Why one process and no threads: a unit's step only reads its own
 * params, so its forward and backward can run the moment the step
 * begins, however much virtual time they are said to take; what the
 * servers see is then only a matter of when each push arrives, which the
 * scheduler decides.  Events are kept in a heap ordered by (virtual
 * nanoseconds, creation number), so ties are broken the same way every
 * run and nothing depends on which thread ran first.
 *
 * A unit's life: STEP (begin step t: test if due, cost T -> TESTED; compute, cost c) ->
 * SEND at +c of its first slice -> ARRIVE at the server (push_from) ->
 * the reply leaves once the server's rule allows it (SYNC: the step is
 * applied; SSP: the bound holds) and comes back as REPLY -> SEND of the
 * next slice ... -> after the last REPLY, STEP t + 1.  Hogwild's group
 * sync: a slice due after a push goes to its master (SYNC_ARRIVE) and
 * back (SYNC_REPLY), one slice at a time per server group. */
#include "emulate/emulator.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/emulate_conf.h"
#include "cluster/layout.h"
#include "core/codec.h"
#include "core/error.h"
#include "core/memory_budget.h"
#include "core/param.h"
#include "comm/param_client.h"
#include "partition/partition.h"
#include "rpc/link_limit.h"
#include "server/server.h"
#include "emulate/calibration.h"
#include "emulate/event_queue.h"
#include "emulate/nic_model.h"
#include "emulate/unit_state.h"
#include "metrics/metrics.h"
#include "worker/threads.h"
#include "worker/worker.h"
#include "workspace/workspace.h"
#include "workspace/workspace_claim.h"

/* The most virtual nanoseconds a run counts to (31.7 years): a time
 * past it is a sum that overflowed or is about to (each unit's step of
 * step_ms = 1e9 ms, the conf's most, made 20,000 steps 2e19 ns, past
 * gint64, and the run spun with its clock wrapped) */
#define VCLOCK_MAX_NS ((gint64) 1000000000 * 1000000000)

/* ---- events ---------------------------------------------------------------- */

typedef enum {
  EV_STEP,         /* a: unit */
  EV_COMPUTED,     /* a: unit: its step's compute may be done (a process's cores may have stretched it) */
  EV_TESTED,       /* a: unit: its test pass may be done (as EV_COMPUTED): its step's compute begins */
  EV_SEND,         /* a: unit: the backward may have completed its chain's next slice (it may have stretched) */
  EV_ARRIVE,       /* a: unit, b: slice, step */
  EV_REPLY,        /* a: unit */
  EV_SYNC_SEND,    /* a: server group, b: slice: its delta was taken, it leaves for the master */
  EV_SYNC_ARRIVE,  /* a: server group, b: slice */
  EV_SYNC_BACK,    /* a: server group, b: slice: the master applied it, the reply leaves */
  EV_SYNC_REPLY,   /* a: server group, b: slice */
  EV_SYNC_MERGED,  /* a: server group, b: slice: the replica merged the master's values */
  EV_APPLY,        /* a: unit, b: slice, step: a server core is done with the push */
  EV_PUSH_ENCODED, /* a: unit, b: slice, step: its process encoded the push (wire_grads): it leaves */
  EV_VALUES_ENCODED, /* a: unit, b: slice, step: the server's process encoded the reply's values: it leaves */
  EV_FAULT,
  EV_TICK          /* process lines */
} EventKind;

/* ---- the model ------------------------------------------------------------- */

typedef struct {
  int group, first_worker, nworkers;
  int id;                    /* ShoalPushOrigin.unit: SSP's clock id */
  int rank;                  /* the process it would run in */
  int server_group;
  ShoalUnitState hold;       /* its values, gradients and net state between its events */
  ShoalSlowdown *slowdown;
  ShoalRng rng;              /* its step times' draws (calibrated steps, step_delay) */
  double machine;            /* its machine's factor ([emulate] machine_factor) */
  double rows_factor;        /* calibrated steps: its rows per thread / the calibration's rows */
  int cores_here;            /* its workers in its process, each computing on a core (a process's cores) */
  gint64 *have_version;      /* per slice */
  float *residual;           /* a quantising wire_grads' error feedback, every param (comm/param_client.c);
                              * NULL until its first push to another process */
  gboolean tester, dead, finished, budget_end;

  gint64 step;               /* the step in flight (between STEP and the last REPLY) */
  int chain;                 /* slices of the step sent so far */
  int *order;                /* the order its comm thread sends them in (plan_chain) */
  gboolean fetch;            /* this step's replies carry values */
  gboolean pushing;          /* this step's gradients go out (as backward completes them, or after it) */
  gboolean overlaps;         /* its slices leave during backward, as their layers finish (the
                              * calibration's hand-offs); else when its compute is done, as a real
                              * straggler's or a clipped step's do (worker/worker.c) */
  gboolean line_due;         /* the step ends a train line's window */
  gboolean computing;        /* between STEP and COMPUTED, or a test pass's STEP and TESTED */
  gboolean testing;          /* computing a test pass (its time is neither compute nor training time) */
  gint64 compute_start, compute_end;  /* virtual ns */
  gint64 next_test;
  gint64 steps_done, steps_skipped, samples_seen;

  ShoalTrainWindow win;      /* the train line's window (virtual seconds) */
  gint64 w_start;
  double train_seconds;      /* virtual, the whole run */
  double test_loss, test_accuracy;
} Unit;

/* A reply a server holds back until its rule allows it. */
typedef struct {
  int unit;
  gint64 step, ready;
  gboolean fetch;
} Waiting;

typedef struct {
  gboolean busy;
  float *buf;                /* the slice in flight (delta, or replica and d) */
} SyncState;

typedef struct {
  ShoalJob *job;
  const ShoalRunOptions *opts;
  ShoalLayout *layout;
  int nslices;
  gboolean group_pushes;
  int unit_size;
  ShoalSharedNet *shared;    /* the one net the units borrow for their steps */
  Unit *units;
  int nunits;
  int nsg;                   /* server groups */
  ShoalServer **servers;     /* per server group */
  gboolean *server_dead;     /* per server group: its processes were lost */
  GArray **waiting;          /* per server group x slice: Waiting */
  SyncState *sync;           /* per server group (Hogwild) */
  ShoalGroupNet *net;        /* while building: the net, before it is shared */
  ShoalMetricsWriter *metrics;
  ShoalEventQueue queue;
  gint64 now;                /* virtual ns */
  ShoalNicModel *nic;        /* the links, NICs and core between processes */
  gint64 latency_ns;
  gint64 step_ns;            /* one unit's compute per step, before its slowdown (no calibration) */
  ShoalCalibration cal;      /* [emulate] calibration: measured steps; nsteps 0: none */
  double *slice_ready;       /* per slice: the fraction of a step after which its gradients are final
                              * (shoal_calibration_ready_fraction); NULL without hand-offs */
  double update_ns_per_byte; /* a server core's update cost */
  gint64 *core_free;         /* per rank: when its other work's core is free (virtual ns) */
  int process_cores;         /* [emulate] process_cores; 0: that core is a core of its own */
  GArray **rank_units;       /* per rank: the units (int) computing there */
  ShoalCodec grads_codec, values_codec;  /* [cluster] wire_grads, wire_values: between processes */
  float *coded;              /* a slice as its codec left it (the largest slice's floats) */
  size_t params;             /* floats of every slice together */
  guint8 *wire;              /* its encoding */
  guint64 *sent, *received;  /* per rank, bytes between processes */
  gboolean *rank_moved;      /* per rank: something to report since the last tick */
  gint64 *decided_step;      /* SYNC time budget: per group, the step whose boundary decided */
  gboolean *decided_stop;
  gint64 *sg_updates, *sg_dropped;  /* per server group: the counts at the last process lines */
  gint64 pending;            /* events of units and syncs in the heap: the run goes on while > 0 */
  GError *failure;
  gboolean stopped;
} Emu;

static void
schedule (Emu *e, gint64 t, EventKind kind, int a, int b, gint64 step)
{
  /* a tick or a fault alone does not keep the run going */
  if (kind != EV_TICK && kind != EV_FAULT)
    e->pending++;
  shoal_event_queue_push (&e->queue, t, kind, a, b, step);
}

static double
vseconds (gint64 ns)
{
  return (double) ns / 1e9;
}

/* What a message between processes costs beyond its wire time: the
 * real transport's fixed part (the calls into the kernel, the
 * receiver's wake-up) and its serialising and copies, the calibration's
 * rpc_us_per_message and rpc_ns_per_byte (emulate/calibration.c,
 * measure_rpc), after the wire: the receiver reads a message's last
 * bytes, and decodes it, once they have crossed. */
static gint64
transport_ns (Emu *e, gsize bytes)
{
  return (gint64) llround (e->cal.rpc_us_per_message * 1e3 + (double) bytes * e->cal.rpc_ns_per_byte);
}

static int
server_rank (Emu *e, int sg, int slice)
{
  return shoal_layout_server_rank (e->layout, sg, shoal_layout_server_of_slice (e->layout, slice % e->layout->nslices));
}

/* ---- a process's cores ---------------------------------------------------------
 *
 * Beside its workers' compute a process does other work: its server's
 * updates, the comm thread's copy of values from a server in the same
 * process, Hogwild's sync passes and, with process_cores, decoding the
 * messages it receives.  That work goes one job at a time on the
 * process's service timeline (core_free), each job from when it is due
 * or when the one before is done.  With [emulate] process_cores = 0 the
 * timeline is a core of its own, as if every process had a core more
 * than its workers.  With process_cores = N the job takes one of the
 * process's N cores: while its workers keep all N busy computing, the
 * job preempts them (Linux's CFS runs the woken short job at once) and
 * every computing unit's step stretches by the job's time / N (N cores'
 * worth of work, one core's worth lost for the job's time).  Measured
 * where it matters (docs/SCALE.md, "A process's cores"): a real Hogwild
 * process of 2 groups on 2 cores spends ~1.3 ms of each 7.9 ms step on
 * its comm, sync and RPC threads. */

static gboolean
computing_at (const Unit *u, gint64 at)
{
  return u->computing && !u->dead && u->compute_start <= at && at < u->compute_end;
}

/* Workers of the units of `rank` computing at virtual time `at`. */
static int
computing_workers (Emu *e, int rank, gint64 at)
{
  GArray *on = e->rank_units[rank];
  int busy = 0;
  for (guint i = 0; i < on->len; i++)
    {
      const Unit *u = &e->units[g_array_index (on, int, i)];
      if (computing_at (u, at))
        busy += u->cores_here;
    }
  return busy;
}

/* Every unit of rank computing at `at` stretches by ns / N. */
static void
stretch_computing (Emu *e, int rank, gint64 at, gint64 ns)
{
  gint64 by = (gint64) llround ((double) ns / e->process_cores);
  GArray *on = e->rank_units[rank];
  for (guint i = 0; i < on->len && by > 0; i++)
    {
      Unit *u = &e->units[g_array_index (on, int, i)];
      if (computing_at (u, at))
        {
          u->compute_end += by;
          if (!u->testing)
            u->win.compute_s += vseconds (by);
        }
    }
}

/* A job of `ns` of rank's other work, due at `at`: when it is done. */
static gint64
service_work (Emu *e, int rank, gint64 at, gint64 ns)
{
  gint64 begin = MAX (at, e->core_free[rank]);
  e->core_free[rank] = begin + ns;
  if (e->process_cores > 0 && ns > 0 && computing_workers (e, rank, begin) >= e->process_cores)
    stretch_computing (e, rank, begin, ns);
  return begin + ns;
}

/* Unit u begins computing now: other work still queued on its process's
 * timeline now contends for the cores u takes. */
static void
compute_begins (Emu *e, Unit *u)
{
  gint64 queued = e->core_free[u->rank] - e->now;
  if (e->process_cores <= 0 || queued <= 0)
    return;
  int busy = computing_workers (e, u->rank, e->now);
  if (busy >= e->process_cores && busy - u->cores_here < e->process_cores)
    stretch_computing (e, u->rank, e->now, queued);
}

/* The CPU time of `bytes` of a pass at ns_per_byte. */
static gint64
pass_ns (size_t bytes, double ns_per_byte)
{
  return (gint64) llround ((double) bytes * ns_per_byte);
}

/* The process an event's message is for. */
static int
receiver_rank (Emu *e, EventKind kind, int a, int b)
{
  switch (kind)
    {
    case EV_ARRIVE:
      return server_rank (e, e->units[a].server_group, b);
    case EV_REPLY:
      return e->units[a].rank;
    case EV_SYNC_ARRIVE:
      return server_rank (e, shoal_layout_master_group_of_slice (e->layout, b % e->layout->nslices), b);
    case EV_SYNC_REPLY:
      return server_rank (e, a, b);
    default:
      g_return_val_if_reached (0);
    }
}

static gint64 decode_ns (Emu *e, EventKind kind, int a, int b, gsize bytes);

/* A message of `bytes` whose last bytes reach its process at `at` (the
 * wire and latency behind it): the event once it is read and decoded,
 * transport_ns later (and a wire codec's decoding, decode_ns); with
 * process_cores that work is the receiving process's, on its cores.  The
 * event was counted in e->pending. */
static void
deliver (Emu *e, gint64 at, gsize bytes, EventKind kind, int a, int b, gint64 step)
{
  gint64 work = transport_ns (e, bytes) + decode_ns (e, kind, a, b, bytes);
  gint64 read = e->process_cores > 0 ? service_work (e, receiver_rank (e, kind, a, b), at, work) : at + work;
  shoal_event_queue_push (&e->queue, read, kind, a, b, step);
}

/* A message of `bytes` from rank `from` to rank `to` begins now: the
 * event comes when it has crossed the NICs, links and core it shares
 * with the other messages in flight (nic_model.h) and the latency after
 * that, and has been read (deliver); inside a process at once.  Counts
 * the bytes for the process lines. */
static void
transmit (Emu *e, int from, int to, gsize bytes, EventKind kind, int a, int b, gint64 step)
{
  if (from == to)
    {
      schedule (e, e->now, kind, a, b, step);
      return;
    }
  e->sent[from] += bytes;
  e->received[to] += bytes;
  e->rank_moved[from] = e->rank_moved[to] = TRUE;
  if (bytes == 0 || !shoal_nic_model_limited (e->nic))
    {
      e->pending++;
      deliver (e, e->now + e->latency_ns, bytes, kind, a, b, step);
      return;
    }
  ShoalTimedEvent ev = { .kind = kind, .a = a, .b = b, .step = step };
  e->pending++;   /* it is queued when it has crossed */
  shoal_nic_model_start (e->nic, e->now, from, to, bytes, &ev);
}

static size_t
slice_floats (Emu *e, int slice, size_t *begin)
{
  size_t b, end;
  shoal_server_slice_range (e->servers[0], slice, &b, &end);
  if (begin != NULL)
    *begin = b;
  return end - b;
}

/* ---- the wire codecs ---------------------------------------------------------
 *
 * Between processes the real param client sends gradients in wire_grads
 * and the server answers with values in wire_values ([cluster]; a server
 * in the client's own process gets floats): the bytes on the virtual
 * wire are the codec's, and what arrives is what the codec let through,
 * each slice encoded and decoded by core/codec.c as the two ends do, the
 * quantisers with the unit's residual (error feedback). */

static gboolean
crosses_processes (Emu *e, const Unit *u, int s)
{
  return server_rank (e, u->server_group, s) != u->rank;
}

/* The bytes a push (grads) or a reply's values of slice s take between
 * unit u's process and its server's. */
static gsize
wire_bytes (Emu *e, const Unit *u, int s, gboolean grads)
{
  size_t n = slice_floats (e, s, NULL);
  ShoalCodec codec = grads ? e->grads_codec : e->values_codec;
  return crosses_processes (e, u, s) ? shoal_codec_bytes (codec, n) : n * sizeof (float);
}

/* Slice s of unit u's gradient as its server receives it: the held
 * floats, or where a codec is between them e->coded after the codec. */
static const float *
pushed_grads (Emu *e, Unit *u, int s)
{
  const float *grad = shoal_unit_state_grads (e->shared, &u->hold, s);
  if (e->grads_codec == SHOAL_CODEC_FP32 || !crosses_processes (e, u, s))
    return grad;
  size_t b = 0, n = slice_floats (e, s, &b);
  float *residual = NULL;
  if (shoal_codec_lossy_feedback (e->grads_codec))
    {
      if (u->residual == NULL)
        u->residual = g_new0 (float, e->params);
      residual = u->residual + b;
    }
  shoal_codec_encode (e->grads_codec, grad, residual, n, e->wire);
  /* its own encoding: the length and codes are right */
  shoal_codec_decode (e->grads_codec, e->wire, shoal_codec_bytes (e->grads_codec, n), e->coded, n);
  return e->coded;
}

/* ns of a wire codec's pass over slice s: encoding (the sender's) or
 * decoding (the receiver's), the calibration's cost per value; none for
 * fp32 (the transport's part per byte is its serialising) or within a
 * process. */
static gint64
codec_ns (Emu *e, const Unit *u, int s, gboolean grads, gboolean encode)
{
  ShoalCodec codec = grads ? e->grads_codec : e->values_codec;
  if (codec == SHOAL_CODEC_FP32 || !crosses_processes (e, u, s))
    return 0;
  double per_value = encode ? e->cal.encode_ns_per_value[codec] : e->cal.decode_ns_per_value[codec];
  return (gint64) llround ((double) slice_floats (e, s, NULL) * per_value);
}

/* The bytes of a message that crossed the NICs: a push's or a reply's
 * in its codec, a Hogwild sync's floats. */
static gsize
message_bytes (Emu *e, EventKind kind, int a, int b)
{
  if (kind == EV_ARRIVE || kind == EV_REPLY)
    return wire_bytes (e, &e->units[a], b, kind == EV_ARRIVE);
  return slice_floats (e, b, NULL) * sizeof (float);
}

/* The receiver's decoding of a message of `bytes` (deliver): a push's
 * gradient, a reply's values (a reply without values has no bytes). */
static gint64
decode_ns (Emu *e, EventKind kind, int a, int b, gsize bytes)
{
  if (bytes == 0 || (kind != EV_ARRIVE && kind != EV_REPLY))
    return 0;
  return codec_ns (e, &e->units[a], b, kind == EV_ARRIVE, FALSE);
}

/* Work of `ns` at `rank` before a message leaves it (a wire codec's
 * encoding), as deliver charges a receiver's: on the process's cores
 * with process_cores, else a delay; when it is done. */
static gint64
before_sending (Emu *e, int rank, gint64 ns)
{
  return e->process_cores > 0 ? service_work (e, rank, e->now, ns) : e->now + ns;
}

/* Values of slice s just pulled into `to` for unit u, as the reply's
 * codec lets them through. */
static void
received_values (Emu *e, const Unit *u, int s, float *to)
{
  if (e->values_codec == SHOAL_CODEC_FP32 || !crosses_processes (e, u, s))
    return;
  size_t n = slice_floats (e, s, NULL);
  shoal_codec_encode (e->values_codec, to, NULL, n, e->wire);
  shoal_codec_decode (e->values_codec, e->wire, shoal_codec_bytes (e->values_codec, n), to, n);
}

static void
fail (Emu *e, GError *error)
{
  if (e->failure == NULL)
    e->failure = error;
  else
    g_error_free (error);
}

/* The param client's rule (comm/param_client.h); n_push and n_fetch are
 * 1 in SYNC, as the runner sets them only for the asynchronous schemes. */
static int
n_push (Emu *e)
{
  return e->layout->mode == SHOAL_UPDATE_ASYNC ? e->layout->conf.n_push : 1;
}

static int
n_fetch (Emu *e)
{
  return e->layout->mode == SHOAL_UPDATE_ASYNC ? e->layout->conf.n_fetch : 1;
}

/* ---- metrics ---------------------------------------------------------------- */

/* The net is u's from now on (unit_state.h). */
static gboolean
borrow (Emu *e, Unit *u)
{
  GError *err = NULL;
  if (shoal_shared_net_borrow (e->shared, &u->hold, &err))
    return TRUE;
  g_prefix_error (&err, "[group %d worker %d] ", u->group, u->first_worker);
  fail (e, err);
  return FALSE;
}

/* The virtual time of a test pass of unit u: its batches
 * (shoal_worker_evaluate's) at the calibration's test_batch_ms, their
 * rows scaled to the unit's as a step's are, times its machine's factor.
 * [emulate] slowdown slows a real worker's training steps, not its test
 * pass (worker/worker.c, compute_step), so not here either.  0 without a
 * calibration that measured it: the pass costs no time. */
static gint64
test_ns (Emu *e, const Unit *u)
{
  if (e->cal.test_batch_ms <= 0)
    return 0;
  int batches = shoal_worker_test_batches (e->shared->net, e->job->test_steps);
  double ns = batches * e->cal.test_batch_ms * u->rows_factor * u->machine * 1e6;
  /* past what the clock counts: its events then say so (vtime_ok) */
  return ns <= (double) VCLOCK_MAX_NS ? (gint64) llround (ns) : VCLOCK_MAX_NS + 1;
}

/* Unit u's test pass at `step`, now: its line is stamped at the pass's
 * end, as a real tester writes it after its evaluation.  Returns the
 * pass's virtual time. */
static gint64
run_test (Emu *e, Unit *u, gint64 step)
{
  if (!borrow (e, u))
    return 0;
  gint64 cost = test_ns (e, u);
  shoal_metrics_set_vtime (e->metrics, vseconds (e->now + cost));
  ShoalEvalResult r = shoal_worker_test (e->shared->net, e->job, e->metrics, !e->opts->quiet, u->group, u->first_worker,
                                         step, u->samples_seen);
  u->test_loss = r.loss;
  u->test_accuracy = r.accuracy;
  return cost;
}

/* The train line of the window ending with step `last` at `at`. */
static void
train_line (Emu *e, Unit *u, gint64 last, gint64 at)
{
  double secs = vseconds (at - u->w_start);
  u->train_seconds += secs;
  shoal_metrics_set_vtime (e->metrics, vseconds (at));
  shoal_train_window_line (&u->win, e->metrics, !e->opts->quiet, u->group, u->first_worker, last, u->samples_seen,
                           secs, 0, " (virtual)");
  u->w_start = at;
}

/* A "process" line per rank that moved bytes or serves slices. */
static void
process_lines (Emu *e, gboolean final)
{
  shoal_metrics_set_vtime (e->metrics, vseconds (e->now));
  for (int sg = 0; sg < e->nsg; sg++)
    {
      ShoalServerStats st;
      shoal_server_stats (e->servers[sg], &st);
      ShoalStaleness h;
      shoal_server_take_staleness (e->servers[sg], &h);
      gint64 updates = st.updates - e->sg_updates[sg], dropped = st.dropped - e->sg_dropped[sg];
      e->sg_updates[sg] = st.updates;
      e->sg_dropped[sg] = st.dropped;
      int rank = server_rank (e, sg, 0);
      if (updates == 0 && dropped == 0 && h.count == 0 && !final)
        continue;
      ShoalProcessRecord r = { .rank = rank, .bytes_sent = e->sent[rank], .bytes_received = e->received[rank],
                               .serves = TRUE, .updates = updates, .dropped = dropped, .staleness = &h };
      shoal_metrics_write_process (e->metrics, &r);
      e->rank_moved[rank] = FALSE;
    }
  for (int r = 0; r < e->layout->nprocs; r++)
    if (e->rank_moved[r] || (final && (e->sent[r] > 0 || e->received[r] > 0)))
      {
        ShoalProcessRecord rec = { .rank = r, .bytes_sent = e->sent[r], .bytes_received = e->received[r] };
        shoal_metrics_write_process (e->metrics, &rec);
        e->rank_moved[r] = FALSE;
      }
}

/* ---- units ------------------------------------------------------------------ */

static gboolean
any_running (Emu *e)
{
  for (int i = 0; i < e->nunits; i++)
    if (!e->units[i].dead && !e->units[i].finished)
      return TRUE;
  return FALSE;
}

static void
finish_unit (Emu *e, Unit *u)
{
  u->finished = TRUE;
  if (u->win.steps > 0)
    train_line (e, u, u->steps_done, u->compute_end);
  if (u->tester)
    run_test (e, u, u->steps_done);
}

/* [job] max_seconds in virtual seconds.  A SYNC group's units stop at
 * the same step: the first of them at a boundary decides for all. */
static gboolean
budget_spent (Emu *e, Unit *u, gint64 step)
{
  double max = e->job->max_seconds;
  if (max <= 0)
    return FALSE;
  gboolean spent = vseconds (e->now) >= max;
  if (e->layout->mode != SHOAL_UPDATE_SYNC)
    return spent;
  int g = u->group;
  if (step == e->decided_step[g])
    return e->decided_stop[g];
  if (step < e->decided_step[g])
    return FALSE;  /* a late backup worker behind its group: it catches up first */
  e->decided_step[g] = step;
  e->decided_stop[g] = spent;
  return spent;
}

static void on_send (Emu *e, Unit *u);
static void compute_step (Emu *e, Unit *u);

/* One step's compute on the unit's machine: a measured step drawn from
 * the calibration (else step_ms), its share of the group's batch, times
 * its machine's factor, plus [emulate] step_delay. */
static double
step_seconds (Emu *e, Unit *u)
{
  double ms;
  if (e->cal.nsteps > 0)
    ms = e->cal.step_ms[shoal_rng_u32 (&u->rng) % (guint32) e->cal.nsteps] * u->rows_factor;
  else
    ms = (double) e->step_ns / 1e6;
  ms *= u->machine;
  if (e->job->emulate.step_delay.kind != SHOAL_DELAY_NONE)
    ms += shoal_delay_draw_ms (&e->job->emulate.step_delay, &u->rng);
  return ms / 1e3;
}

static void
on_step (Emu *e, Unit *u)
{
  if (u->dead || u->finished)
    return;
  const ShoalJob *job = e->job;
  gint64 step = u->step;
  if (step > 0)
    u->win.wait_s += vseconds (e->now - u->compute_end);
  /* backup workers: a unit whose gradients came late got newer values
   * and goes on at their step (shoal_param_client_catch_up_step) */
  if (e->layout->mode == SHOAL_UPDATE_SYNC && step > 0)
    {
      gint64 at = G_MAXINT64;
      for (int s = 0; s < e->nslices; s++)
        at = MIN (at, u->have_version[s]);
      if (at > step)
        {
          u->steps_skipped += at - step;
          step = u->step = MIN (at, job->train_steps);
          u->steps_done = step;
        }
    }
  if (step >= job->train_steps)
    {
      finish_unit (e, u);
      return;
    }
  if (step > 0 && budget_spent (e, u, step))
    {
      g_message ("[group %d worker %d] time budget of %g virtual s spent at step %" G_GINT64_FORMAT, u->group,
                 u->first_worker, job->max_seconds, step);
      u->budget_end = TRUE;
      finish_unit (e, u);
      return;
    }
  if (shoal_worker_stop_requested ())
    {
      e->stopped = TRUE;
      return;
    }
  if (u->tester && step > 0 && step >= u->next_test)
    {
      gint64 cost = run_test (e, u, step);
      u->next_test = (step / job->test_freq + 1) * job->test_freq;
      if (cost > 0)
        {
          /* the pass takes the unit's cores for its time, as a step's
           * compute does; its step begins after it (on_tested), so the
           * units of a synchronous group wait for its push that much
           * longer, as in a real run */
          u->testing = u->computing = TRUE;
          u->compute_start = e->now;
          u->compute_end = e->now + cost;
          compute_begins (e, u);
          schedule (e, u->compute_end, EV_TESTED, (int) (u - e->units), 0, step);
          return;
        }
    }
  compute_step (e, u);
}

/* The test pass is done unless its process's other work stretched it
 * since (then later): the unit's step begins.  Its train window leaves
 * the pass out, as a real tester's does (worker/worker.c, ends_before):
 * its samples/s are of training time. */
static void
on_tested (Emu *e, Unit *u)
{
  if (u->dead || u->finished)
    return;
  if (e->now < u->compute_end)
    {
      schedule (e, u->compute_end, EV_TESTED, (int) (u - e->units), 0, u->step);
      return;
    }
  u->testing = u->computing = FALSE;
  u->w_start += e->now - u->compute_start;
  compute_step (e, u);
}

/* Unit u's step u->step: its computation, now, as a real worker runs it;
 * its cost in virtual time. */
static void
compute_step (Emu *e, Unit *u)
{
  const ShoalJob *job = e->job;
  gint64 step = u->step;
  if (!borrow (e, u))
    return;
  ShoalGroupNet *net = e->shared->net;
  ShoalParamStore *store = e->shared->store;
  double loss = shoal_worker_compute_step (net, &job->updater, NULL, NULL);
  shoal_unit_state_computed (e->shared, &u->hold);
  if (!isfinite (loss))
    {
      GError *err = NULL;
      g_set_error (&err, SHOAL_ERROR, SHOAL_ERROR_INTERNAL,
                   "[group %d worker %d] step %" G_GINT64_FORMAT ": the loss is %g; lower [updater] lr?", u->group,
                   u->first_worker, step, loss);
      fail (e, err);
      return;
    }
  double c = step_seconds (e, u);
  c += shoal_slowdown_extra_s (u->slowdown, c);
  gint64 cost = (gint64) llround (c * 1e9);
  u->compute_start = e->now;
  u->compute_end = e->now + cost;
  u->computing = TRUE;
  u->win.compute_s += c;
  compute_begins (e, u);

  int rows = shoal_train_window_add (&u->win, net, loss);
  u->samples_seen += rows;
  u->steps_done = step + 1;
  u->line_due = u->win.steps == job->disp_freq || step + 1 == job->train_steps;
  u->pushing = shoal_push_due (n_push (e), step);
  if (u->pushing)
    {
      /* the comm thread's send buffer is the store's gradients (the mean
       * of the summed steps): nothing writes them before the next step,
       * which begins after the last reply (so a unit holds no second
       * copy) */
      shoal_push_mean (store->grads, store->total, n_push (e));
      u->chain = 0;
      u->fetch = shoal_fetch_due (n_fetch (e), step);
      if (u->fetch)
        shoal_unit_state_drop_values (e->shared, &u->hold);  /* the replies bring the next step's */
    }
  schedule (e, u->compute_end, EV_COMPUTED, (int) (u - e->units), 0, step);
  if (u->pushing && u->overlaps)
    on_send (e, u);
}

/* The step's compute is done unless its process's other work stretched
 * it since (a process's cores): then later.  Its train line, and then its
 * first slice leaves, or (gradients adding up) the next step begins. */
static void
on_computed (Emu *e, Unit *u)
{
  if (u->dead)
    return;
  if (e->now < u->compute_end)
    {
      schedule (e, u->compute_end, EV_COMPUTED, (int) (u - e->units), 0, u->step);
      return;
    }
  u->computing = FALSE;
  if (u->line_due)
    train_line (e, u, u->steps_done, u->compute_end);
  u->line_due = FALSE;
  if (u->pushing && !u->overlaps)
    on_send (e, u);
  else if (!u->pushing || u->chain >= e->nslices)
    {
      u->step++;
      on_step (e, u);
    }
  /* else its chain, sending since backward began, ends the step */
}

/* The slice the comm thread sends next (plan_chain's order). */
static int
chain_slice (const Unit *u)
{
  return u->order[u->chain];
}

/* When the backward of unit u's step completes slice s (its process's
 * other work may have stretched the step since it began). */
static gint64
slice_ready_at (Emu *e, const Unit *u, int s)
{
  if (!u->computing)
    return e->now;
  return u->compute_start + (gint64) llround (e->slice_ready[s] * (double) (u->compute_end - u->compute_start));
}

/* Slice s of unit u's push leaves for its server (encoded, where a wire
 * codec is between them). */
static void
on_push_encoded (Emu *e, Unit *u, int s, gint64 step)
{
  if (u->dead)
    return;
  transmit (e, u->rank, server_rank (e, u->server_group, s), wire_bytes (e, u, s, TRUE), EV_ARRIVE,
            (int) (u - e->units), s, step);
}

/* The chain's next slice leaves, once its backward is done. */
static void
on_send (Emu *e, Unit *u)
{
  if (u->dead)
    return;
  int s = chain_slice (u);
  if (u->overlaps)
    {
      gint64 ready = slice_ready_at (e, u, s);
      if (ready > e->now)
        {
          schedule (e, ready, EV_SEND, (int) (u - e->units), 0, u->step);
          return;
        }
    }
  gint64 encode = codec_ns (e, u, s, TRUE, TRUE);
  if (encode > 0)
    schedule (e, before_sending (e, u->rank, encode), EV_PUSH_ENCODED, (int) (u - e->units), s, u->step);
  else
    on_push_encoded (e, u, s, u->step);
}

/* Whether unit u's client reads the one server of its process in place
 * (shoal_runner_reads_server_in_place, as the runner decides): no copy
 * of values back, and its updates on the worker's own thread. */
static gboolean
reads_in_place (Emu *e, const Unit *u)
{
  return shoal_runner_reads_server_in_place (e->layout, (int) e->rank_units[u->rank]->len);
}

/* A held reply whose rule now allows it: its values leave the server
 * now (into the unit's params: nothing reads them before the reply
 * arrives) and arrive after the link.  From a server in the unit's own
 * process the comm thread copies them (pull_ns_per_byte, on the
 * process's cores), unless its client reads the server's values in
 * place. */
static void
release (Emu *e, int sg, int s, const Waiting *w)
{
  Unit *u = &e->units[w->unit];
  size_t n = slice_floats (e, s, NULL);
  gsize bytes = 0;
  if (w->fetch)
    {
      GError *err = NULL;
      float *to = shoal_unit_state_values_slot (e->shared, &u->hold, s);
      if (!shoal_server_pull (e->servers[sg], s, to, n, w->ready, 0, &u->have_version[s], &err))
        {
          fail (e, err);
          return;
        }
      received_values (e, u, s, to);
      bytes = wire_bytes (e, u, s, FALSE);
    }
  int from = server_rank (e, sg, s);
  gint64 copy = pass_ns (bytes, e->cal.pull_ns_per_byte);
  gint64 encode = w->fetch ? codec_ns (e, u, s, FALSE, TRUE) : 0;
  if (from == u->rank && copy > 0 && !reads_in_place (e, u))
    schedule (e, service_work (e, from, e->now, copy), EV_REPLY, w->unit, s, w->step);
  else if (encode > 0)
    schedule (e, before_sending (e, from, encode), EV_VALUES_ENCODED, w->unit, s, w->step);
  else
    transmit (e, from, u->rank, bytes, EV_REPLY, w->unit, s, w->step);
}

/* The reply with slice s's values for unit u leaves its server, encoded
 * in wire_values. */
static void
on_values_encoded (Emu *e, Unit *u, int s, gint64 step)
{
  if (u->dead)
    return;
  transmit (e, server_rank (e, u->server_group, s), u->rank, wire_bytes (e, u, s, FALSE), EV_REPLY,
            (int) (u - e->units), s, step);
}

/* Releases, in arrival order, every held reply of the slice whose rule
 * holds now (SYNC: the step was applied; SSP: the bound). */
static void
release_ready (Emu *e, int sg, int s)
{
  GArray *list = e->waiting[sg * e->nslices + s];
  ShoalServer *server = e->servers[sg];
  gint64 version = shoal_server_slice_version (server, s);
  for (guint i = 0; i < list->len;)
    {
      Waiting w = g_array_index (list, Waiting, i);
      Unit *u = &e->units[w.unit];
      if (u->dead)
        {
          g_array_remove_index (list, i);
          continue;
        }
      if (version >= w.ready && shoal_server_bound_ok (server, s, u->id, w.step))
        {
          g_array_remove_index (list, i);
          release (e, sg, s, &w);
          continue;
        }
      i++;
    }
}

static void start_syncs (Emu *e, int sg);
static void on_sync_send (Emu *e, int sg, int s);
static void on_apply (Emu *e, Unit *u, int s, gint64 step);

/* A push that reached its server waits for the server process's other
 * work (a process's cores: one job at a time, update_ns_per_byte each
 * byte) and is applied when that is done with it (on_apply).  A client
 * that reads its server in place applies it on the worker's own thread
 * (comm/param_client.c, queue_slices): in the backward it was handed
 * off in, which it lengthens, or after it. */
static void
on_arrive (Emu *e, Unit *u, int s, gint64 step)
{
  if (u->dead)
    return;
  if (e->update_ns_per_byte <= 0)
    {
      on_apply (e, u, s, step);
      return;
    }
  int rank = server_rank (e, u->server_group, s);
  size_t n = slice_floats (e, s, NULL);
  gint64 update = pass_ns (n * sizeof (float), e->update_ns_per_byte);
  if (rank == u->rank && reads_in_place (e, u))
    {
      if (u->computing)
        {
          u->compute_end += update;
          u->win.compute_s += vseconds (update);
        }
      schedule (e, e->now + update, EV_APPLY, (int) (u - e->units), s, step);
      return;
    }
  gint64 done = service_work (e, rank, e->now, update);
  schedule (e, done, EV_APPLY, (int) (u - e->units), s, step);
}

static void
on_apply (Emu *e, Unit *u, int s, gint64 step)
{
  if (u->dead)
    return;
  int sg = u->server_group;
  size_t n = slice_floats (e, s, NULL);
  ShoalPushOrigin origin = { u->have_version[s], u->id };
  gint64 ready = 0;
  GError *err = NULL;
  if (!shoal_server_push_from (e->servers[sg], s, pushed_grads (e, u, s), n, step, &origin, &ready, &err))
    {
      fail (e, err);
      return;
    }
  shoal_unit_state_pushed (e->shared, &u->hold, s);
  Waiting w = { (int) (u - e->units), step, ready, u->fetch };
  g_array_append_val (e->waiting[sg * e->nslices + s], w);
  release_ready (e, sg, s);
  if (e->layout->group_sync)
    start_syncs (e, sg);
}

static void
on_reply (Emu *e, Unit *u)
{
  if (u->dead)
    return;
  u->chain++;
  if (u->chain < e->nslices)
    on_send (e, u);
  else if (!u->computing)
    {
      u->step++;
      on_step (e, u);
    }
  /* else the step's compute is not done: its end goes on (on_computed) */
}

/* ---- Hogwild's group sync ---------------------------------------------------- */

static gboolean
elastic (Emu *e)
{
  return e->layout->conf.hogwild_sync == SHOAL_HOGWILD_ELASTIC;
}

/* The sync thread of server group sg, if idle: the lowest due slice
 * (shoal_server_wait_sync_due's order) goes to its master.  Each pass
 * over a slice (take, the master's apply, the merge; elastic averaging's
 * passes alike) is work of its process (a process's cores, the
 * calibration's sync_*_ns_per_byte): the message leaves, the reply
 * leaves and the thread takes the next slice once its pass is done. */
static void
start_syncs (Emu *e, int sg)
{
  SyncState *st = &e->sync[sg];
  ShoalServer *server = e->servers[sg];
  float alpha = (float) e->layout->conf.elastic_alpha;
  while (!st->busy && !e->server_dead[sg] && e->failure == NULL)
    {
      int due = -1;
      for (int s = 0; s < e->nslices && due < 0; s++)
        if (shoal_server_updates_since_sync (server, s) >= e->layout->conf.sync_freq)
          due = s;
      if (due < 0)
        return;
      size_t b = 0, n = slice_floats (e, due, &b);
      float *buf = st->buf + b;
      int master = shoal_layout_master_group_of_slice (e->layout, due % e->layout->nslices);
      GError *err = NULL;
      gboolean ok = elastic (e) ? shoal_server_take_values (server, due, buf, n, &err)
                                : shoal_server_take_delta (server, due, buf, n, &err);
      if (ok && master == sg && elastic (e))
        /* the group's own center, in its process */
        ok = shoal_server_elastic_exchange (server, due, buf, buf, n, alpha, &err)
             && shoal_server_elastic_merge (server, due, buf, n, &err);
      if (!ok)
        {
          fail (e, err);
          return;
        }
      gsize bytes = n * sizeof (float);
      gint64 work = pass_ns (bytes, e->cal.sync_take_ns_per_byte);
      if (master == sg && elastic (e))
        work += pass_ns (bytes, e->cal.sync_apply_ns_per_byte) + pass_ns (bytes, e->cal.sync_merge_ns_per_byte);
      int rank = server_rank (e, sg, due);
      gint64 taken = work > 0 ? service_work (e, rank, e->now, work) : e->now;
      if (master == sg || e->server_dead[master])
        continue;  /* its own master; or a master lost with its group: the replica goes on alone */
      st->busy = TRUE;
      if (taken > e->now)
        schedule (e, taken, EV_SYNC_SEND, sg, due, 0);
      else
        on_sync_send (e, sg, due);
    }
}

static void
on_sync_send (Emu *e, int sg, int s)
{
  if (e->server_dead[sg])
    {
      e->sync[sg].busy = FALSE;
      return;
    }
  int master = shoal_layout_master_group_of_slice (e->layout, s % e->layout->nslices);
  transmit (e, server_rank (e, sg, s), server_rank (e, master, s), slice_floats (e, s, NULL) * sizeof (float),
            EV_SYNC_ARRIVE, sg, s, 0);
}

/* The master's reply (its values after the delta) leaves. */
static void
on_sync_back (Emu *e, int sg, int s)
{
  int master = shoal_layout_master_group_of_slice (e->layout, s % e->layout->nslices);
  if (e->server_dead[master])
    {
      e->sync[sg].busy = FALSE;
      start_syncs (e, sg);
      return;
    }
  transmit (e, server_rank (e, master, s), server_rank (e, sg, s), slice_floats (e, s, NULL) * sizeof (float),
            EV_SYNC_REPLY, sg, s, 0);
}

static void
on_sync_merged (Emu *e, int sg)
{
  e->sync[sg].busy = FALSE;
  if (!e->server_dead[sg])
    start_syncs (e, sg);
}

static void
on_sync_arrive (Emu *e, int sg, int s)
{
  int master = shoal_layout_master_group_of_slice (e->layout, s % e->layout->nslices);
  size_t b = 0, n = slice_floats (e, s, &b);
  float *buf = e->sync[sg].buf + b;
  GError *err = NULL;
  if (e->server_dead[master])
    {
      e->sync[sg].busy = FALSE;
      start_syncs (e, sg);
      return;
    }
  gboolean ok = elastic (e) ? shoal_server_elastic_exchange (e->servers[master], s, buf, buf, n,
                                                             (float) e->layout->conf.elastic_alpha, &err)
                            : shoal_server_apply_delta (e->servers[master], s, buf, buf, n, &err);
  if (!ok)
    {
      fail (e, err);
      return;
    }
  gint64 work = pass_ns (n * sizeof (float), e->cal.sync_apply_ns_per_byte);
  if (work > 0)
    schedule (e, service_work (e, server_rank (e, master, s), e->now, work), EV_SYNC_BACK, sg, s, 0);
  else
    on_sync_back (e, sg, s);
}

static void
on_sync_reply (Emu *e, int sg, int s)
{
  SyncState *st = &e->sync[sg];
  if (e->server_dead[sg])
    {
      st->busy = FALSE;
      return;
    }
  size_t b = 0, n = slice_floats (e, s, &b);
  GError *err = NULL;
  gboolean ok = elastic (e) ? shoal_server_elastic_merge (e->servers[sg], s, st->buf + b, n, &err)
                            : shoal_server_merge_master (e->servers[sg], s, st->buf + b, n, &err);
  if (!ok)
    {
      fail (e, err);
      return;
    }
  gint64 work = pass_ns (n * sizeof (float), e->cal.sync_merge_ns_per_byte);
  if (work > 0)
    schedule (e, service_work (e, server_rank (e, sg, s), e->now, work), EV_SYNC_MERGED, sg, s, 0);
  else
    on_sync_merged (e, sg);
}

/* ---- a lost group ---------------------------------------------------------- */

static void
on_fault (Emu *e)
{
  const ShoalClusterConf *c = &e->layout->conf;
  int g = e->job->emulate.fault_group;
  g_message ("[emulate] fault: group %d is lost at virtual %.3f s", g, vseconds (e->now));
  for (int i = 0; i < e->nunits; i++)
    if (e->units[i].group == g && !e->units[i].finished)
      e->units[i].dead = TRUE;
  /* the server group living in its processes (Hogwild) goes with it */
  if (!c->server_worker_separate && e->layout->mode == SHOAL_UPDATE_ASYNC && e->nsg > 1)
    e->server_dead[shoal_layout_server_group_of (e->layout, g)] = TRUE;
  GError *err = NULL;
  if (e->layout->mode == SHOAL_UPDATE_SYNC)
    g_set_error (&err, SHOAL_ERROR, SHOAL_ERROR_INTERNAL,
                 "[emulate] group %d was lost at virtual %.3f s: a synchronous step needs every worker of the "
                 "group, so the job fails (as under shoal run)", g, vseconds (e->now));
  else if (c->all_groups_required)
    g_set_error (&err, SHOAL_ERROR, SHOAL_ERROR_INTERNAL,
                 "[emulate] group %d was lost at virtual %.3f s and [cluster] all_groups_required = true: the "
                 "job fails (false: the other groups finish it)", g, vseconds (e->now));
  if (err != NULL)
    fail (e, err);
}

/* ---- building ------------------------------------------------------------------ */

/* the step-time streams: the job seed mixed with "steptime" */
#define STEP_SEED_MIX G_GUINT64_CONSTANT (0x7374657074696d65)

/* Units as the runner makes them in its processes, all here, and the
 * one net they borrow (unit_state.h), built as unit 0's. */
static gboolean
build_units (Emu *e, GError **error)
{
  const ShoalClusterConf *c = &e->layout->conf;
  int k = c->nworkers_per_group;
  gboolean whole = FALSE, spread_net = FALSE;
  if (!shoal_runner_groups_as_one (e->job, c, &whole, &spread_net, error))
    return FALSE;
  /* a group spread over processes as one net: one net here too (its
   * results equal the spread ones; the bridges cost nothing) */
  gboolean per_group = whole || spread_net;
  if (!per_group && !shoal_runner_share_batch (e->job, k, error))
    return FALSE;
  e->group_pushes = per_group;
  e->unit_size = per_group ? k : 1;
  e->nunits = per_group ? c->nworker_groups : c->nworker_groups * k;
  e->units = g_new0 (Unit, e->nunits);
  ShoalMember first = { 0, 0 };
  e->net = shoal_runner_unit_net (e->job, c, first, e->unit_size, per_group, TRUE, NULL, error);
  if (e->net == NULL)
    return FALSE;
  for (int i = 0; i < e->nunits; i++)
    {
      Unit *u = &e->units[i];
      u->group = per_group ? i : i / k;
      u->first_worker = per_group ? 0 : i % k;
      u->nworkers = e->unit_size;
      u->id = i;
      u->rank = shoal_layout_worker_rank (e->layout, u->group, u->first_worker);
      u->server_group = shoal_layout_server_group_of (e->layout, u->group);
      u->tester = shoal_job_tests (e->job, u->group, u->first_worker);
      u->test_accuracy = -1;
      u->next_test = e->job->test_freq > 0 ? e->job->test_freq : G_MAXINT64;
      ShoalMember m = { u->group, u->first_worker };
      u->hold.place = shoal_runner_unit_options (e->job, c, m, per_group, TRUE);
      u->slowdown = shoal_slowdown_new (&e->job->emulate, &e->job->cluster, e->job->seed, u->group, u->first_worker,
                                        u->nworkers);
      /* a calibrated step of cal.batch rows scaled to the rows each of
       * its threads computes */
      if (e->cal.batch > 0)
        u->rows_factor = (double) shoal_group_net_batch_size (e->net) / e->cal.batch / e->unit_size;
      /* its own stream for step times, apart from the slowdown's */
      shoal_rng_seed (&u->rng, e->job->seed ^ STEP_SEED_MIX, (guint64) i);
      u->machine = 1;
      if (e->job->emulate.machine_factor.kind != SHOAL_DELAY_NONE)
        u->machine = MAX (shoal_delay_draw_ms (&e->job->emulate.machine_factor, &u->rng), 1e-3);
      if (u->slowdown != NULL)
        {
          char *how = shoal_slowdown_describe (u->slowdown);
          g_message ("[group %d worker %d] [emulate] slowed: %s", u->group, u->first_worker, how);
          g_free (how);
        }
    }
  return TRUE;
}

/* Each process's units (a process's cores); with [emulate] process_cores
 * every worker of a process computes on a core of its own, so it must
 * have as many.  A group spread over processes and run as one net is one
 * unit in its first worker's process, which holds that process's share
 * of its workers. */
static gboolean
place_units (Emu *e, GError **error)
{
  e->process_cores = e->job->emulate.process_cores;
  e->rank_units = g_new0 (GArray *, e->layout->nprocs);
  for (int r = 0; r < e->layout->nprocs; r++)
    e->rank_units[r] = g_array_new (FALSE, FALSE, sizeof (int));
  for (int i = 0; i < e->nunits; i++)
    {
      Unit *u = &e->units[i];
      g_array_append_val (e->rank_units[u->rank], i);
      u->cores_here = MIN (u->nworkers, (int) e->layout->procs[u->rank].workers->len);
    }
  for (int r = 0; r < e->layout->nprocs && e->process_cores > 0; r++)
    {
      int workers = (int) e->layout->procs[r].workers->len;
      if (workers > e->process_cores)
        {
          shoal_conf_error (e->job->conf, error, "emulate", "process_cores",
                            "%d core%s cannot hold process %d's %d workers: each computes on a core of its own "
                            "(give at least %d, or 0 for a core beside them)", e->process_cores,
                            e->process_cores == 1 ? "" : "s", r, workers, workers);
          return FALSE;
        }
    }
  return TRUE;
}

/* The net goes to the units in turn; each unit begins with the servers'
 * first values (its first fetch: every slice at version 0, free), which
 * are the net's own. */
static gboolean
share_net (Emu *e, GError **error)
{
  size_t *begin = g_new (size_t, e->nslices), *end = g_new (size_t, e->nslices);
  for (int s = 0; s < e->nslices; s++)
    shoal_server_slice_range (e->servers[0], s, &begin[s], &end[s]);
  e->shared = shoal_shared_net_new (g_steal_pointer (&e->net), e->nslices, begin, end);
  g_free (begin);
  g_free (end);
  gboolean ok = TRUE;
  for (int sg = 0; ok && sg < e->nsg; sg++)
    for (int s = 0; ok && s < e->nslices; s++)
      {
        size_t b = 0, n = slice_floats (e, s, &b);
        float *first = shoal_alloc_floats (n);
        gint64 version = 0;
        ok = shoal_server_pull (e->servers[sg], s, first, n, 0, 0, &version, error);
        if (ok && memcmp (first, e->shared->initial + b, n * sizeof (float)) != 0)
          {
            g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL,
                         "[emulate] server group %d's first values of slice %d are not the net's", sg, s);
            ok = FALSE;
          }
        shoal_free_aligned (first);
      }
  for (int i = 0; ok && i < e->nunits; i++)
    {
      Unit *u = &e->units[i];
      u->have_version = g_new0 (gint64, e->nslices);
      for (int s = 0; s < e->nslices; s++)
        u->have_version[s] = shoal_server_slice_version (e->servers[u->server_group], s);
      ShoalNetOptions place = u->hold.place;
      ok = shoal_unit_state_init (e->shared, &u->hold, &place, error);
    }
  return ok;
}

static gboolean
build_servers (Emu *e, GError **error)
{
  const ShoalClusterConf *c = &e->layout->conf;
  ShoalParamStore *layout_store = shoal_group_net_params (e->net);
  e->nslices = shoal_runner_slice_count (e->layout, layout_store->served);
  e->nsg = c->nserver_groups;
  if (e->layout->mode == SHOAL_UPDATE_SYNC && c->backup_workers > 0 && e->group_pushes)
    {
      shoal_conf_error (e->job->conf, error, "cluster", "backup_workers",
                        "this group runs as one net and pushes one gradient per step: there is no late "
                        "worker's gradient to drop");
      return FALSE;
    }
  ShoalServerOptions sopts;
  shoal_runner_server_options (e->layout, e->group_pushes, e->nslices, &sopts);
  e->servers = g_new0 (ShoalServer *, e->nsg);
  e->server_dead = g_new0 (gboolean, e->nsg);
  e->sync = g_new0 (SyncState, e->nsg);
  e->sg_updates = g_new0 (gint64, e->nsg);
  e->sg_dropped = g_new0 (gint64, e->nsg);
  e->waiting = g_new0 (GArray *, (gsize) e->nsg * (gsize) e->nslices);
  for (int sg = 0; sg < e->nsg; sg++)
    {
      e->servers[sg] = shoal_server_new (layout_store, &e->job->updater, &sopts, error);
      if (e->servers[sg] == NULL)
        return FALSE;
      shoal_server_host_all (e->servers[sg]);
      if (e->layout->group_sync)
        e->sync[sg].buf = shoal_alloc_floats (layout_store->total);
      for (int s = 0; s < e->nslices; s++)
        e->waiting[sg * e->nslices + s] = g_array_new (FALSE, FALSE, sizeof (Waiting));
    }
  return share_net (e, error);
}

/* When each slice's gradients are final within a step (the
 * calibration's hand-offs), and the units whose comm thread sends them
 * then: a real worker hands its client every layer as backward
 * finishes it unless the step is clipped as a whole or an emulated
 * straggler's (worker/worker.c, compute_step). */
static void
plan_hand_offs (Emu *e)
{
  const ShoalUpdaterConf *up = &e->job->updater;
  if (e->cal.n_ready == 0 || up->clip_value > 0 || up->clip_norm > 0)
    return;
  e->slice_ready = g_new (double, e->nslices);
  for (int s = 0; s < e->nslices; s++)
    {
      size_t begin = 0;
      slice_floats (e, s, &begin);
      e->slice_ready[s] = shoal_calibration_ready_fraction (&e->cal, begin);
    }
  for (int i = 0; i < e->nunits; i++)
    e->units[i].overlaps = e->units[i].slowdown == NULL;
}

/* When unit u's slice s is handed to its comm thread: the fraction of
 * the step (1: at its end). */
static double
handed_at (Emu *e, const Unit *u, int s)
{
  return u->overlaps ? e->slice_ready[s] : 1.0;
}

/* The order in which unit u's comm thread sends its slices, as
 * exchange_batch does (comm/param_client.c): the slices handed to it
 * together (one batch; all of them at the step's end without hand-offs)
 * go grouped by the process that serves them, the groups in the order
 * of their top slice, each slice by slice from the top; batch after
 * batch from the top of the store down.  (AllReduce's worker sends all
 * of a batch's slices of one process, then the other's: both workers
 * meet at each slice's server in turn, and no exchange overlaps another
 * in the other direction.) */
static void
plan_chain (Emu *e, Unit *u)
{
  int n = e->nslices, k = 0;
  u->order = g_new (int, n);
  gboolean *taken = g_new0 (gboolean, n);
  for (int top = n - 1; top >= 0;)
    {
      int low = top;
      while (low > 0 && handed_at (e, u, low - 1) == handed_at (e, u, top))
        low--;
      for (int t = top; t >= low; t--)
        {
          if (taken[t])
            continue;
          int rank = server_rank (e, u->server_group, t);
          for (int s = t; s >= low; s--)
            if (!taken[s] && server_rank (e, u->server_group, s) == rank)
              {
                taken[s] = TRUE;
                u->order[k++] = s;
              }
        }
      top = low - 1;
    }
  g_free (taken);
}

static void
emu_free (Emu *e)
{
  for (int i = 0; i < e->nunits; i++)
    {
      Unit *u = &e->units[i];
      shoal_unit_state_clear (e->shared, &u->hold);
      shoal_slowdown_free (u->slowdown);
      g_free (u->have_version);
      g_free (u->order);
      g_free (u->residual);
    }
  g_free (e->coded);
  g_free (e->wire);
  g_free (e->units);
  shoal_shared_net_free (e->shared);
  shoal_group_net_free (e->net);
  for (int sg = 0; sg < e->nsg; sg++)
    {
      shoal_server_free (e->servers[sg]);
      shoal_free_aligned (e->sync[sg].buf);
      for (int s = 0; s < e->nslices; s++)
        g_array_free (e->waiting[sg * e->nslices + s], TRUE);
    }
  g_free (e->servers);
  g_free (e->slice_ready);
  g_free (e->server_dead);
  g_free (e->sync);
  g_free (e->waiting);
  g_free (e->sg_updates);
  g_free (e->sg_dropped);
  g_free (e->sent);
  g_free (e->received);
  g_free (e->rank_moved);
  g_free (e->decided_step);
  g_free (e->decided_stop);
  shoal_event_queue_clear (&e->queue);
  shoal_nic_model_free (e->nic);
  g_free (e->core_free);
  for (int r = 0; e->rank_units != NULL && r < e->layout->nprocs; r++)
    g_array_free (e->rank_units[r], TRUE);
  g_free (e->rank_units);
  shoal_calibration_clear (&e->cal);
  shoal_metrics_close (e->metrics);
  shoal_layout_free (e->layout);
  if (e->failure != NULL)
    g_error_free (e->failure);
}


static gboolean
vtime_ok (Emu *e, gint64 t)
{
  if (t >= 0 && t <= VCLOCK_MAX_NS)
    return TRUE;
  gint64 most = 0;
  for (int i = 0; i < e->nunits; i++)
    most = MAX (most, e->units[i].step);
  g_set_error (&e->failure, SHOAL_ERROR, SHOAL_ERROR_CONF,
               "[emulate] the virtual clock passed 31 years (1e18 ns) at step %" G_GINT64_FORMAT ", past what "
               "it counts: the emulated times (step_ms, the slowdowns and delays, the links, the calibration's "
               "costs) are too long for this many steps",
               most);
  return FALSE;
}

/* What holds the units that never finished (the queue ran dry). */
static GError *
deadlock_error (Emu *e)
{
  GString *who = g_string_new (NULL);
  for (int i = 0; i < e->nunits; i++)
    if (!e->units[i].dead && !e->units[i].finished)
      g_string_append_printf (who, "%s%d.%d at step %" G_GINT64_FORMAT, who->len ? ", " : "", e->units[i].group,
                              e->units[i].first_worker, e->units[i].step);
  GError *err = NULL;
  gboolean lost = e->job->emulate.fault_group >= 0;
  g_set_error (&err, SHOAL_ERROR, SHOAL_ERROR_INTERNAL,
               "virtual %.3f s: units %s wait for pushes that never come%s", vseconds (e->now), who->str,
               lost && e->layout->conf.staleness >= 0
                 ? " (SSP: the lost group's clock never moves on, as under shoal run until the RPC timeout)"
               : lost ? " (from the lost group)" : "");
  g_string_free (who, TRUE);
  return err;
}

/* ---- the run -------------------------------------------------------------------- */

/* The unit whose numbers are the job's: group 0's first, or where group
 * 0 was lost the first unit of the lowest group that finished (a lost
 * group's last test is no result of the job). */
static Unit *
result_unit (Emu *e)
{
  Unit *u = &e->units[0];
  for (int i = 0; u->dead && i < e->nunits; i++)
    if (!e->units[i].dead && e->units[i].tester)
      u = &e->units[i];
  return u;
}

/* What the run held, from /proc/self/status: the e2e memory test and
 * docs/SCALE.md read this line. */
static void
log_memory (Emu *e)
{
  double mib = 1024.0 * 1024.0;
  double held = (double) e->shared->held_peak / mib;
  int with_residual = 0;
  for (int i = 0; i < e->nunits; i++)
    with_residual += e->units[i].residual != NULL;
  char *residuals = with_residual > 0
                      ? g_strdup_printf ("; %d units keep a residual of %s's error feedback, %.1f MiB", with_residual,
                                         shoal_codec_name (e->grads_codec),
                                         (double) with_residual * (double) e->params * sizeof (float) / mib)
                      : g_strdup ("");
  g_message ("[emulate] memory: peak resident %.1f MiB (VmHWM), resident %.1f MiB, anonymous %.1f MiB; the "
             "%d units held at most %.1f MiB of slices between their steps (%.2f MiB a unit)%s",
             (double) shoal_memory_of_process ("VmHWM") / mib, (double) shoal_memory_of_process ("VmRSS") / mib,
             (double) shoal_memory_of_process ("RssAnon") / mib, e->nunits, held, held / e->nunits, residuals);
  g_free (residuals);
}

/* The result unit's params. */
static gboolean
save_params (Emu *e, GError **error)
{
  Unit *u = result_unit (e);
  if (!shoal_shared_net_borrow (e->shared, &u->hold, error))
    return FALSE;
  char *dir = shoal_checkpoint_dir (e->opts->workspace, 0);
  ShoalCheckpoint *ckpt = shoal_checkpoint_open (dir, TRUE, error);
  g_free (dir);
  if (ckpt == NULL)
    return FALSE;
  GBytes *params = shoal_param_store_to_bytes (e->shared->store);
  const char *names[] = { "params", NULL };
  GBytes *blobs[] = { params, NULL };
  gboolean ok = shoal_checkpoint_save (ckpt, u->steps_done, names, blobs, error);
  g_bytes_unref (params);
  shoal_checkpoint_close (ckpt);
  return ok;
}

gboolean
shoal_emulator_measure_step_ms (ShoalJob *job, double *step_ms, GError **error)
{
  ShoalNetOptions nopts = { .seed = job->seed, .shard_count = 1, .cd_k = job->cd_k, .budget = job->memory_budget };
  ShoalGroupNet *net = shoal_group_net_new (job->conf, 1, &nopts, error);
  if (net == NULL)
    return FALSE;
  ShoalParamStore *store = shoal_group_net_params (net);
  shoal_param_store_init_values (store, job->seed);
  shoal_threads_apply (job->threads, 1, 0);
  enum { WARM = 2, TIMED = 9 };
  double t[TIMED];
  for (int i = 0; i < WARM + TIMED; i++)
    {
      gint64 t0 = g_get_monotonic_time ();
      shoal_group_net_train_step (net, NULL, NULL);
      if (i >= WARM)
        t[i - WARM] = (double) (g_get_monotonic_time () - t0) / 1000.0;
      shoal_param_store_zero_grads (store);
    }
  shoal_group_net_free (net);
  /* the median */
  for (int i = 1; i < TIMED; i++)
    for (int j = i; j > 0 && t[j - 1] > t[j]; j--)
      {
        double x = t[j];
        t[j] = t[j - 1];
        t[j - 1] = x;
      }
  *step_ms = t[TIMED / 2];
  return TRUE;
}

gboolean
shoal_emulator_run (ShoalJob *job, const ShoalRunOptions *opts, ShoalRunResult *result, GError **error)
{
  if (result != NULL)
    *result = (ShoalRunResult) { .group = -1, .worker = -1, .test_accuracy = -1 };
  if (opts->resume)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                   "%s: a virtual-clock run keeps no checkpoint to resume from; run it again: it repeats exactly",
                   shoal_conf_origin (job->conf));
      return FALSE;
    }
  Emu emu = { .job = job, .opts = opts }, *e = &emu;
  gboolean ok = FALSE;
  e->layout = shoal_layout_new (&job->cluster, job->conf, error);
  if (e->layout == NULL)
    return FALSE;
  double step_ms = job->emulate.step_ms;
  if (job->emulate.calibration != NULL)
    {
      /* measured steps, drawn one per step; the file says where from */
      if (!shoal_calibration_load (job->emulate.calibration, job, &e->cal, error))
        {
          shoal_layout_free (e->layout);
          return FALSE;
        }
      g_message ("[emulate] calibration %s (model %s, measured on %s with %d BLAS thread%s, %d worker%s stepping at "
                 "once): %d steps, median %.3f ms; a server's update %.4f ns/byte; a message's transport %.1f us "
                 "+ %.4f ns/byte",
                 job->emulate.calibration, e->cal.model, e->cal.host != NULL ? e->cal.host : "?", e->cal.threads,
                 e->cal.threads == 1 ? "" : "s", e->cal.concurrent, e->cal.concurrent == 1 ? "" : "s", e->cal.nsteps,
                 shoal_calibration_median_ms (&e->cal), e->cal.update_ns_per_byte, e->cal.rpc_us_per_message,
                 e->cal.rpc_ns_per_byte);
      if (e->cal.test_batch_ms <= 0)
        g_message ("[emulate] calibration %s has no test_batch_ms (made before `shoal calibrate` measured the test "
                   "pass, or the model has no test data): test passes cost no virtual time, and a synchronous "
                   "group's units do not wait for its tester's; `shoal calibrate` the job again to measure them",
                   job->emulate.calibration);
      if (step_ms <= 0)
        step_ms = shoal_calibration_median_ms (&e->cal);
      else
        e->cal.nsteps = 0;   /* a fixed step_ms given beside it wins */
    }
  /* an earlier run's files move aside (workspace/workspace_claim.h) */
  char *moved = NULL;
  ok = shoal_workspace_claim (opts->workspace, job->conf, FALSE, opts->overwrite, &moved, error);
  if (moved != NULL)
    g_message ("%s held an earlier run: its files moved to %s", opts->workspace, moved);
  g_free (moved);
  if (!ok)
    {
      shoal_calibration_clear (&e->cal);
      shoal_layout_free (e->layout);
      return FALSE;
    }
  ok = FALSE;

  e->update_ns_per_byte = job->emulate.update_ns_per_byte >= 0 ? job->emulate.update_ns_per_byte
                                                                 : e->cal.update_ns_per_byte;
  if (step_ms <= 0)
    {
      if (!shoal_emulator_measure_step_ms (job, &step_ms, error))
        goto out;
      g_message ("[emulate] measured one step of a group's batch: %.3f ms; give -o emulate.step_ms=%.3f to "
                 "repeat this run's times exactly", step_ms, step_ms);
    }
  const ShoalClusterConf *c = &e->layout->conf;
  shoal_threads_apply (job->threads, c->nworkers_per_procs >= c->nworkers_per_group ? c->nworkers_per_group : 1, 0);
  if (!build_units (e, error) || !build_servers (e, error))
    goto out;
  plan_hand_offs (e);
  for (int i = 0; i < e->nunits; i++)
    plan_chain (e, &e->units[i]);
  e->grads_codec = e->layout->conf.wire_grads;
  e->values_codec = e->layout->conf.wire_values;
  if (e->grads_codec != SHOAL_CODEC_FP32 || e->values_codec != SHOAL_CODEC_FP32)
    {
      size_t largest = 0;
      for (int s = 0; s < e->nslices; s++)
        {
          size_t b = 0, n = slice_floats (e, s, &b);
          largest = MAX (largest, n);
          e->params = MAX (e->params, b + n);
        }
      e->coded = g_new (float, MAX (largest, (size_t) 1));
      e->wire = g_malloc (MAX (shoal_codec_bytes (SHOAL_CODEC_FP32, largest), (size_t) 1));
    }
  ShoalLayer *input = shoal_group_net_input (e->shared->net);
  if (input == NULL || input->ops->num_records == NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "%s: the net has no data input layer",
                   shoal_conf_origin (job->conf));
      goto out;
    }
  /* [job] epochs, as the runner reads them */
  shoal_job_resolve_epochs (job, input->ops->num_records (input, SHOAL_PHASE_TRAIN), shoal_tensor_rows (&input->out));
  /* a unit of a group's k workers computes its share of the batch */
  e->step_ns = (gint64) llround (step_ms * 1e6 / (double) c->nworkers_per_group);
  e->nic = shoal_nic_model_new (e->layout->nprocs, shoal_link_limit_bytes_per_s (job->emulate.nic_mbit),
                                shoal_link_limit_bytes_per_s (job->emulate.bandwidth_mbit),
                                shoal_link_limit_bytes_per_s (job->emulate.core_mbit));
  e->core_free = g_new0 (gint64, e->layout->nprocs);
  if (!place_units (e, error))
    goto out;
  e->latency_ns = (gint64) llround (job->emulate.latency_ms * 1e6);
  e->sent = g_new0 (guint64, e->layout->nprocs);
  e->received = g_new0 (guint64, e->layout->nprocs);
  e->rank_moved = g_new0 (gboolean, e->layout->nprocs);
  e->decided_step = g_new0 (gint64, c->nworker_groups);
  e->decided_stop = g_new0 (gboolean, c->nworker_groups);
  for (int g = 0; g < c->nworker_groups; g++)
    e->decided_step[g] = -1;

  char *metrics_path = g_build_filename (opts->workspace, "metrics.jsonl", NULL);
  e->metrics = shoal_metrics_open (metrics_path, FALSE, error);
  g_free (metrics_path);
  if (e->metrics == NULL)
    goto out;
  if (!opts->quiet)
    {
      g_message ("job '%s' on the virtual clock: %d units, %d server group%s, %d slices, %" G_GINT64_FORMAT
                 " steps of batch %d per unit, one step %.3f ms per unit%s; links %g Mbit/s, NICs %g Mbit/s%s, "
                 "core %g Mbit/s (0: no limit), %g ms; server update %.4f ns/byte; process cores %d (0: their "
                 "other work on a core beside the workers); a test batch %.3f ms%s",
                 job->name, e->nunits, e->nsg, e->nsg == 1 ? "" : "s", e->nslices, job->train_steps,
                 shoal_tensor_rows (&input->out), vseconds (e->step_ns) * 1e3,
                 e->cal.nsteps > 0 ? " (median; drawn from the calibration)" : "", job->emulate.bandwidth_mbit,
                 job->emulate.nic_mbit, job->emulate.nic_from_links ? " (bandwidth_mbit's: no nic_mbit given)" : "",
                 job->emulate.core_mbit, job->emulate.latency_ms, e->update_ns_per_byte,
                 e->process_cores, e->cal.test_batch_ms,
                 e->cal.test_batch_ms > 0 ? " (the calibration's, at its rows)"
                                          : " (no calibration measured it: test passes cost no time)");
      if (e->grads_codec != SHOAL_CODEC_FP32 || e->values_codec != SHOAL_CODEC_FP32)
        g_message ("between processes gradients go as %s (%.2f + %.2f ns a value to encode and decode), values as "
                   "%s (%.2f + %.2f)%s", shoal_codec_name (e->grads_codec), e->cal.encode_ns_per_value[e->grads_codec],
                   e->cal.decode_ns_per_value[e->grads_codec], shoal_codec_name (e->values_codec),
                   e->cal.encode_ns_per_value[e->values_codec], e->cal.decode_ns_per_value[e->values_codec],
                   e->cal.nsteps > 0 ? "" : " (no calibration: the codecs cost no time)");
      shoal_layout_log (e->layout);
    }

  for (int i = 0; i < e->nunits; i++)
    schedule (e, 0, EV_STEP, i, 0, 0);
  if (job->emulate.fault_group >= 0)
    schedule (e, (gint64) llround (job->emulate.fault_at * 1e9), EV_FAULT, 0, 0, 0);
  gint64 tick_ns = (gint64) llround (job->metrics_interval * 1e9);
  if (tick_ns > 0)
    schedule (e, tick_ns, EV_TICK, 0, 0, 0);

  while (e->pending > 0 && e->failure == NULL && !e->stopped)
    {
      /* a stop request ends the run at once, whatever the units wait for
       * (SSP's held replies once let it run on) */
      if (shoal_worker_stop_requested ())
        {
          e->stopped = TRUE;
          break;
        }
      if (shoal_nic_model_next_end (e->nic) <= shoal_event_queue_next_time (&e->queue))
        {
          /* a message has crossed: it arrives a latency later */
          ShoalTimedEvent crossed;
          shoal_nic_model_pop (e->nic, &crossed);
          if (!vtime_ok (e, crossed.t))
            break;
          e->now = crossed.t;
          /* every message that crosses is one slice's (a push, a reply
           * with values, a Hogwild sync), in its codec */
          deliver (e, crossed.t + e->latency_ns, message_bytes (e, crossed.kind, crossed.a, crossed.b), crossed.kind,
                   crossed.a, crossed.b, crossed.step);
          continue;
        }
      ShoalTimedEvent ev = shoal_event_queue_pop (&e->queue);
      if (!vtime_ok (e, ev.t))
        break;
      e->now = ev.t;
      if (ev.kind != EV_TICK && ev.kind != EV_FAULT)
        e->pending--;
      switch (ev.kind)
        {
        case EV_STEP:
          on_step (e, &e->units[ev.a]);
          break;
        case EV_COMPUTED:
          on_computed (e, &e->units[ev.a]);
          break;
        case EV_TESTED:
          on_tested (e, &e->units[ev.a]);
          break;
        case EV_SEND:
          on_send (e, &e->units[ev.a]);
          break;
        case EV_ARRIVE:
          on_arrive (e, &e->units[ev.a], ev.b, ev.step);
          break;
        case EV_PUSH_ENCODED:
          on_push_encoded (e, &e->units[ev.a], ev.b, ev.step);
          break;
        case EV_VALUES_ENCODED:
          on_values_encoded (e, &e->units[ev.a], ev.b, ev.step);
          break;
        case EV_APPLY:
          on_apply (e, &e->units[ev.a], ev.b, ev.step);
          break;
        case EV_REPLY:
          on_reply (e, &e->units[ev.a]);
          break;
        case EV_SYNC_SEND:
          on_sync_send (e, ev.a, ev.b);
          break;
        case EV_SYNC_ARRIVE:
          on_sync_arrive (e, ev.a, ev.b);
          break;
        case EV_SYNC_BACK:
          on_sync_back (e, ev.a, ev.b);
          break;
        case EV_SYNC_MERGED:
          on_sync_merged (e, ev.a);
          break;
        case EV_SYNC_REPLY:
          on_sync_reply (e, ev.a, ev.b);
          break;
        case EV_FAULT:
          if (any_running (e))
            on_fault (e);
          break;
        case EV_TICK:
          {
            process_lines (e, FALSE);
            /* a tick where nothing moved writes nothing: the next one is
             * the first after the next event (steps of days once made a
             * tick a virtual second, millions of them between two steps) */
            gint64 next = e->now + tick_ns;
            gint64 upcoming = MIN (shoal_event_queue_next_time (&e->queue), shoal_nic_model_next_end (e->nic));
            if (upcoming != G_MAXINT64 && upcoming > next)
              next += (upcoming - next) / tick_ns * tick_ns;
            schedule (e, next, EV_TICK, 0, 0, 0);
            break;
          }
        }
    }
  process_lines (e, TRUE);
  if (e->failure == NULL && !e->stopped && any_running (e))
    e->failure = deadlock_error (e);
  if (e->failure != NULL)
    {
      g_propagate_error (error, g_steal_pointer (&e->failure));
      goto out;
    }
  if (!e->stopped && !save_params (e, error))
    goto out;
  ok = TRUE;
  if (result != NULL)
    {
      Unit *u = result_unit (e);
      *result = (ShoalRunResult) { .group = u->group, .worker = u->first_worker, .steps = u->steps_done,
                                   .test_loss = u->test_loss, .test_accuracy = u->test_accuracy,
                                   .samples_per_sec = u->train_seconds > 0 ? (double) u->samples_seen / u->train_seconds : 0,
                                   .stopped = e->stopped };
    }
  if (e->stopped)
    g_message ("stopped on request at virtual %.3f s (a virtual run keeps no checkpoint)", vseconds (e->now));
  log_memory (e);

out:
  emu_free (e);
  return ok;
}
