/* A parameter server: the slices of the param store that one process
 * serves, their optimiser state, versions and update rule.
 *
 * Every process of a job cuts the flat param buffer the same way, into
 * `nslices` near-equal slices (shoal_slice_range), so a slice id means the
 * same float range everywhere.  A server keeps a buffer of the full
 * layout (offsets stay global; only hosted slices are ever touched) and
 * serves the slices it was given with shoal_server_host_slice.
 *
 * Versions: a slice's version counts the updates applied to it; it starts
 * at 0.  In SYNC mode (BSP) the server waits for `sync_contributors`
 * gradients of a slice for the same step, averages them, applies one
 * update (version becomes step + 1) and wakes every pull waiting for it.
 * In ASYNC mode each gradient is applied as it arrives (version + 1).
 * Waiting uses condition variables, never sleep-polling.
 *
 * Thread-safe: each slice has its own lock; calls on different slices run
 * in parallel. */
#ifndef SHOAL_SERVER_H
#define SHOAL_SERVER_H

#include <glib.h>

#include "data/checkpoint.h"
#include "core/param.h"
#include "core/updater.h"
#include "server/staleness.h"

G_BEGIN_DECLS

typedef enum {
  SHOAL_UPDATE_SYNC,
  SHOAL_UPDATE_ASYNC
} ShoalUpdateMode;

typedef struct {
  ShoalUpdateMode mode;
  int sync_contributors;  /* SYNC: gradients per slice and step (workers of the group); >= 1 */
  int nslices;            /* how the buffer is cut; the same in every process of the job */
  gboolean keep_baseline; /* Hogwild groups: remember values at the last sync (take_delta) */
  float lr_scale;         /* multiplies every update's learning rate; 0 means 1 */
  int lr_warmup;          /* lr_scale rises linearly from 1 over the first lr_warmup steps; 0: none */
  float delta_scale;      /* multiplies the deltas apply_delta adds; 0 means 1 */
  /* Hogwild with elastic averaging (EASGD, Zhang, Choromanska, LeCun
   * 2015): keep a center variable beside each hosted slice, from the
   * initial values, for shoal_server_elastic_exchange. */
  gboolean elastic_center;
  /* SYNC, Sandblaster with backup workers (Chen et al. 2016): a step is
   * applied with the first sync_contributors - backup_workers gradients;
   * later ones for that step are dropped (counted in stats.dropped).
   * 0 .. sync_contributors - 1. */
  int backup_workers;
  /* ASYNC, SSP (Ho et al. 2013; ssp.h): units pushing, clock ids 0 ..
   * ssp_units - 1; 0: no bound.  A unit that pushed step t waits in
   * shoal_server_wait_bound until every unit pushed step t - ssp_bound. */
  int ssp_units;
  int ssp_bound;
  /* ASYNC (Zhang et al. 2016): each update's lr is divided by the
   * update's staleness (at least 1); pushes without a base version count
   * as staleness 0. */
  gboolean lr_by_staleness;
} ShoalServerOptions;

typedef struct {
  gint64 pushes, pulls, updates, deltas;   /* calls served since start */
  gint64 bytes_in, bytes_out;
  gint64 dropped;                          /* late SYNC gradients dropped (backup_workers) */
} ShoalServerStats;

/* Where a pushed gradient comes from. */
typedef struct {
  gint64 base_version;  /* the slice's version the gradient was computed on (the version of the
                         * values its worker last received); < 0: unknown, staleness not recorded */
  int unit;             /* SSP: the pushing unit's clock id; < 0: none */
} ShoalPushOrigin;

typedef struct _ShoalServer ShoalServer;

/* [begin, end) in floats of slice `slice` of `nslices` over `total` floats.
 * Boundaries fall on 16-float (64-byte) multiples where total allows. */
void shoal_slice_range (size_t total, int nslices, int slice, size_t *begin, size_t *end);

/* `layout` gives the param table (names, offsets, scales) and the initial
 * values, which are copied; it may be freed afterwards.  Hosts no slice
 * until shoal_server_host_slice.  Free with shoal_server_free.  NULL with
 * SHOAL_ERROR_MEMORY when the values or the optimiser state do not fit
 * in memory. */
ShoalServer *shoal_server_new (const ShoalParamStore *layout, const ShoalUpdaterConf *updater,
                               const ShoalServerOptions *opts, GError **error);
void shoal_server_free (ShoalServer *server);

void shoal_server_host_slice (ShoalServer *server, int slice);
void shoal_server_host_all (ShoalServer *server);
gboolean shoal_server_hosts (ShoalServer *server, int slice);

/* The full-layout value buffer (shoal_server_total floats).  Borrowed,
 * valid while the server lives.  An in-process worker reads hosted slices
 * in place, after shoal_server_pull with dst NULL told it the version is
 * there. */
float *shoal_server_values (ShoalServer *server);
/* Makes `values` (shoal_server_total floats in the job's flat layout: a
 * worker's shared-memory region) the server's value storage.  The hosted
 * slices' values are copied there, and from then on updates, pulls and
 * checkpoints use it, and the worker whose region it is reads every new
 * value in place: an update mirrored into it, or a pull into it, makes no
 * copy (what a one-process worker gets by borrowing the server's buffer).
 * release (owner) is called when the server is freed; the server's own
 * buffer stays allocated till then (replies under way may be sending
 * from it).  Only where the values are stable (shoal_server_values_stable:
 * they change only while every contributor waits for them), the buffer
 * was never lent (shoal_server_values) and nothing was adopted before;
 * FALSE otherwise, and nothing changes.  The region's owner must not
 * write its values: in SYNC a worker only reads them. */
gboolean shoal_server_adopt_values (ShoalServer *server, float *values, gpointer owner,
                                    GDestroyNotify release);
size_t shoal_server_total (ShoalServer *server);
int shoal_server_n_slices (ShoalServer *server);
void shoal_server_slice_range (ShoalServer *server, int slice, size_t *begin, size_t *end);
gint64 shoal_server_slice_version (ShoalServer *server, int slice);

/* A gradient of the whole slice (n must be its length) for 0-based step.
 * SYNC: the step must be the slice's current version (the step being
 * aggregated); ASYNC: any step (its lr is used).  Does not wait.
 * Errors (SHOAL_ERROR_RPC): slice not hosted or unknown, wrong length,
 * SYNC step out of turn; SHOAL_ERROR_STOPPED: a SYNC step at or beyond
 * the stop step (shoal_server_stop_at). */
gboolean shoal_server_push (ShoalServer *server, int slice, const float *grad, size_t n,
                            gint64 step, GError **error);
/* The same, telling where the gradient comes from (origin may be NULL):
 * the update's staleness, version now - origin->base_version, goes into
 * the server's histogram (shoal_server_take_staleness), and under SSP
 * the unit's clock moves to step + 1.  *ready_version (may be NULL) is
 * the first version that holds this gradient, which a pull then waits
 * for: SYNC step + 1, ASYNC the version it made.  SYNC with backup
 * workers: a gradient of a step already applied is dropped - TRUE, and
 * *ready_version is the current version, so its worker gets the newest
 * values at once and goes on at their step. */
gboolean shoal_server_push_from (ShoalServer *server, int slice, const float *grad, size_t n,
                                 gint64 step, const ShoalPushOrigin *origin, gint64 *ready_version,
                                 GError **error);
/* The same, and where this push makes the update (the last gradient of a
 * SYNC step, or any ASYNC one) the new values are written into `mirror`
 * (n floats, or NULL) too, in the same pass: *mirrored says so, and the
 * pusher then has the values of *ready_version without a pull.  Not under
 * SSP where the push's unit must wait for the slowest (its reply carries
 * the values of when the bound is met: pull them after
 * shoal_server_wait_bound). */
gboolean shoal_server_push_mirrored (ShoalServer *server, int slice, const float *grad, size_t n,
                                     gint64 step, const ShoalPushOrigin *origin, float *mirror,
                                     gint64 *ready_version, gboolean *mirrored, GError **error);
/* The same for a pusher done with its gradient: grad[0 .. n) is zero on
 * return, whatever became of it (applied, summed into the step, dropped
 * or refused).  The update clears each chunk right after reading it,
 * while it is in cache, so the pusher makes no pass of its own over the
 * gradients before its next backward adds into them. */
gboolean shoal_server_push_consume (ShoalServer *server, int slice, float *grad, size_t n, gint64 step,
                                    const ShoalPushOrigin *origin, float *mirror, gint64 *ready_version,
                                    gboolean *mirrored, GError **error);
/* SSP: waits until unit `unit`, having pushed `step` to the slice, may
 * begin step + 1 (every unit pushed step - ssp_bound), at most
 * timeout_us (< 0: forever; then SHOAL_ERROR_TIMEOUT naming the slowest
 * unit).  TRUE at once without SSP or for unit < 0. */
gboolean shoal_server_wait_bound (ShoalServer *server, int slice, int unit, gint64 step,
                                  gint64 timeout_us, GError **error);

/* The same rule without waiting: whether unit `unit`, having pushed
 * `step` to the slice, may begin step + 1 now (TRUE without SSP). */
gboolean shoal_server_bound_ok (ShoalServer *server, int slice, int unit, gint64 step);

/* What shoal_server_push_from recorded since the last take (then reset):
 * the staleness of every applied gradient with a known base version. */
void shoal_server_take_staleness (ShoalServer *server, ShoalStaleness *out);

/* Waits until the slice's version >= min_version, at most timeout_us
 * (< 0: forever; on timeout an error), then copies the slice into dst
 * (skipped when dst is NULL) and stores the version in *version (may be
 * NULL).  SHOAL_ERROR_STOPPED when min_version lies beyond the stop step
 * and is not there. */
gboolean shoal_server_pull (ShoalServer *server, int slice, float *dst, size_t n,
                            gint64 min_version, gint64 timeout_us, gint64 *version, GError **error);

/* The same without a copy, for a reply that sends the values: *values
 * points at them in the server's buffer, pinned - every change to the
 * slice's values (an update, put, delta, merge, restore) waits until
 * shoal_server_unpin - so that the reply sends the values of *version
 * whole.  A reply must send them without waiting on its peer while
 * shoal_server_pin_wanted says a writer waits (copy what is left and
 * unpin; rpc/thrift_socket.h, shoal_thrift_socket_write_pinned).  While
 * a writer waits no new pin is given: TRUE with *values NULL, and the
 * caller copies with shoal_server_pull. */
gboolean shoal_server_pull_pinned (ShoalServer *server, int slice, size_t n, gint64 min_version,
                                   gint64 timeout_us, gint64 *version, const float **values,
                                   GError **error);
void shoal_server_unpin (ShoalServer *server, int slice);
/* Whether a writer waits for a slice's pins; any thread, no lock. */
gboolean shoal_server_pin_wanted (ShoalServer *server, int slice);

/* Device mode, for a worker on a GPU whose server is in its own process
 * (one process, one worker unit, SYNC with one contributor): from now on
 * the server's values are `dev_values` (the worker net's device copy of
 * the full layout, borrowed) and its optimiser state lives on `device`
 * too; every update runs there as a kernel enqueued on `stream` (the
 * worker net's compute stream, borrowed), with the gradient the pusher
 * gives as a device pointer, so nothing crosses PCIe in a step.  The
 * hosted slices' values and state are uploaded now.  The host buffers
 * (shoal_server_values, the state) become copies, brought up to date by
 * shoal_server_sync_host, which checkpoints and pulls call themselves;
 * puts and restores upload what they write.  Pushes must then come from
 * the thread driving the worker net.  FALSE (nothing changed) with
 * SHOAL_ERROR_CONF for a server that is not of that kind (several
 * contributors, backup workers, ASYNC, Hogwild or elastic state, adopted
 * shared-memory storage) and SHOAL_ERROR_MEMORY when the device state
 * does not fit. */
gboolean shoal_server_move_to_device (ShoalServer *server, float *dev_values, ShoalDevice device,
                                      ShoalStream *stream, GError **error);
/* Leaves device mode: the host buffers are brought up to date and are
 * the server's values again; the device state is freed (the device
 * values are the net's).  Call before the worker net goes.  TRUE at
 * once for a server on the host; FALSE with the device's error (the
 * host buffers then hold the last values that came down). */
gboolean shoal_server_move_to_host (ShoalServer *server, GError **error);
/* Whether the server runs its updates on a device. */
gboolean shoal_server_on_device (ShoalServer *server);
/* Device mode: copies the hosted slices' values and state down into the
 * host buffers when the device changed them (waits for the updates
 * enqueued so far).  TRUE at once otherwise.  FALSE with the device's
 * error. */
gboolean shoal_server_sync_host (ShoalServer *server, GError **error);

/* Whether a slice's values stay as they are while a worker that asked
 * for them reads them: SYNC without backup workers (not Hogwild), where
 * the values of step t + 1 change only once every contributor pushed
 * step t + 1, which a worker does only after it received them.  (A
 * client that pushes for others could break that; it could as well send
 * garbage gradients.) */
gboolean shoal_server_values_stable (ShoalServer *server);
/* Where values are stable, after shoal_server_pull (dst NULL) saw the
 * version the worker waits for: the slice's values in the server's
 * buffer, to be read in place (sent to the worker straight from there)
 * instead of copied. */
const float *shoal_server_lend_values (ShoalServer *server, int slice);

/* Versions a put may set: 0 .. 2^62, so that counting updates on from
 * any of them never overflows. */
#define SHOAL_SERVER_MAX_VERSION (G_GINT64_CONSTANT (1) << 62)

/* Replaces a slice's values and version (initial values from a worker, a
 * restored checkpoint) and wakes waiting pulls.  Fails for a version
 * outside 0 .. SHOAL_SERVER_MAX_VERSION. */
gboolean shoal_server_put (ShoalServer *server, int slice, const float *values, size_t n,
                           gint64 version, GError **error);

/* Hogwild, master side: values += delta, then copies the new values into
 * values_out (may alias delta). */
gboolean shoal_server_apply_delta (ShoalServer *server, int slice, const float *delta,
                                   float *values_out, size_t n, GError **error);
/* Hogwild, group side: writes values - baseline (what this group learned
 * since the last sync) into delta_out and moves the baseline to the
 * current values.  Then send the delta to the master and give its answer
 * to shoal_server_merge_master, which sets values to the master's plus
 * whatever was learned locally in between. */
gboolean shoal_server_take_delta (ShoalServer *server, int slice, float *delta_out, size_t n,
                                  GError **error);
gboolean shoal_server_merge_master (ShoalServer *server, int slice, const float *master_values,
                                    size_t n, GError **error);
/* Hogwild with elastic averaging (EASGD), master side: the center c of
 * the slice and a group's replica x move toward each other: d = alpha
 * (x - c), c += d; d goes into diff_out (may alias replica), which the
 * group subtracts from its replica (shoal_server_elastic_merge).  Needs a
 * server made with elastic_center; 0 < alpha <= 1. */
gboolean shoal_server_elastic_exchange (ShoalServer *server, int slice, const float *replica, float *diff_out,
                                        size_t n, float alpha, GError **error);
/* Group side: copies the slice's values (the replica to send) and
 * restarts its count of updates since the last sync. */
gboolean shoal_server_take_values (ShoalServer *server, int slice, float *values_out, size_t n,
                                   GError **error);
/* Group side: values -= diff (the master's answer to the exchange). */
gboolean shoal_server_elastic_merge (ShoalServer *server, int slice, const float *diff, size_t n,
                                     GError **error);
/* Updates applied to a slice since its last take_delta (Hogwild's sync_freq). */
gint64 shoal_server_updates_since_sync (ShoalServer *server, int slice);

/* Hogwild's sync thread: waits until some hosted slice has had at least
 * `sync_freq` updates since its last take_delta and returns it; -1 after
 * timeout_us (< 0: no timeout) or once the server stops. */
int shoal_server_wait_sync_due (ShoalServer *server, gint64 sync_freq, gint64 timeout_us);
/* The same, passing over slice i while the monotonic clock is before
 * not_before_us[i] (a slice whose master did not answer waits a little). */
int shoal_server_wait_sync_due_after (ShoalServer *server, gint64 sync_freq, gint64 timeout_us,
                                      const gint64 *not_before_us);

/* Liveness (server/liveness.h): SSP no longer waits for unit `unit`,
 * whose process was lost (ssp.h: it counts again once it caught up). */
void shoal_server_drop_unit (ShoalServer *server, int unit);
/* Hogwild: the weight of the deltas apply_delta adds (1 / the groups
 * still syncing, once some were lost); > 0. */
void shoal_server_set_delta_scale (ShoalServer *server, float scale);
/* EASGD: this server becomes the slice's master (the one before was
 * lost): its center starts from its replica. */
gboolean shoal_server_adopt_center (ShoalServer *server, int slice, GError **error);

void shoal_server_stats (ShoalServer *server, ShoalServerStats *stats);

/* Checkpoints: the hosted slices (values, optimiser state, versions) and
 * the per-param update counts.  In SYNC mode call it while the slices are
 * at version `step` - e.g. from a worker that waits for version step and
 * has not pushed step's gradient yet: no slice can move on without it.
 * Saves once per step (later calls for the same or an older step do
 * nothing); thread-safe. */
gboolean shoal_server_checkpoint (ShoalServer *server, ShoalCheckpoint *ckpt, gint64 step,
                                  GError **error);
/* Whether the servers' checkpoint of `step` is one a server of `layout`'s
 * params, an updater of `kind` and `nslices` slices would restore (its
 * sizes; read only); FALSE with shoal_server_restore's error if not. */
gboolean shoal_server_checkpoint_fits (ShoalCheckpoint *ckpt, gint64 step, const ShoalParamStore *layout,
                                       ShoalUpdaterKind kind, int nslices, GError **error);
/* Restores what shoal_server_checkpoint saved at `step`; fails with a
 * message when the checkpoint was made for another model or layout. */
gboolean shoal_server_restore (ShoalServer *server, ShoalCheckpoint *ckpt, gint64 step,
                               GError **error);

/* SYNC: a worker of the group stops at `step` (SIGINT/SIGTERM) and will
 * not push it, so the step never completes.  From now on a push of that
 * step or a later one, and a pull for a version beyond it (waiting ones
 * are woken), fail with SHOAL_ERROR_STOPPED: workers in other processes
 * that went on into `step` stop there too, and nothing of it is kept (a
 * partial sum never reaches values or checkpoints).  The lowest step
 * given holds.  With backup workers the step may be applied already
 * (without the caller's gradient): the stop then falls at the first step
 * no slice has applied.  *stopped_at (may be NULL) gets the step the
 * server stops at, which the caller checkpoints as.  ASYNC: does nothing
 * (groups stop on their own; *stopped_at = step).  Fails for a step
 * outside 0 .. SHOAL_SERVER_MAX_VERSION. */
gboolean shoal_server_stop_at (ShoalServer *server, gint64 step, gint64 *stopped_at, GError **error);
/* The step shoal_server_stop_at set, or -1. */
gint64 shoal_server_stop_step (ShoalServer *server);

/* Wakes every waiting pull with an error ("server stopping"); later calls fail too. */
void shoal_server_stop (ShoalServer *server);

G_END_DECLS

#endif
