/* What the virtual clock's timing model measures on this machine for one
 * model (docs/SCALE.md, "Calibration"): `shoal calibrate JOB.conf` writes
 * it, [emulate] calibration = FILE reads it back, so the same run,
 * compare or sweep repeats exactly and says where its times came from.
 *
 *   - the compute: every timed step of one worker's batch (after a
 *     warm-up), in the order measured; the virtual clock draws each step's
 *     time from them.  With `concurrent` = k > 1, k workers stepped at once
 *     on this host (each its own net and thread) and every step of each
 *     was timed while the others were busy: the compute of a layout that
 *     puts k workers on one host (memory bandwidth, the cores' caches and
 *     the host's other load shared), as a real run on this machine does;
 *   - the servers: the update's cost per byte of gradient, for the job's
 *     updater, on one core of this machine (a server process's update of
 *     every slice, as ShoalServer applies it);
 *   - the transport: a message's cost beside its wire time, a fixed part
 *     and a part per byte, through a real server on loopback;
 *   - a process's other passes over the params, per byte: a pull from a
 *     server in the worker's own process, and Hogwild's sync passes;
 *   - the wire codecs: encoding and decoding a value in each of them;
 *   - the test pass: a test batch's forward as shoal_worker_evaluate runs
 *     it, one timed after every 4th timed step of each of the
 *     `concurrent` workers, their mean (a pass sums tens of batches: what
 *     it costs is the mean's multiple);
 *   - memory: what one unit's net holds (resident bytes it added);
 *   - the backward's hand-offs: when, within a step, each layer's
 *     gradients were final (the push hook's calls, worker/push_hook.c),
 *     from which the virtual clock sends a slice during the backward of
 *     the layers below it, as a real worker's comm thread does.
 *
 * The file is a GKeyFile with a [calibration] group; `model` is the
 * model's fingerprint (workspace/run_identity.h: its layers, updater type
 * and alg; not the data paths, batch size or rates), so a file of
 * another model is refused by name. */
#ifndef SHOAL_CALIBRATION_H
#define SHOAL_CALIBRATION_H

#include <glib.h>

#include "core/codec.h"
#include "job/job.h"

G_BEGIN_DECLS

typedef struct {
  char *model;                 /* the fingerprint */
  char *updater;               /* the updater kind measured */
  double *step_ms;             /* nsteps, as measured */
  int nsteps;
  int batch;                   /* rows of the measured steps (the job's batch) */
  double test_batch_ms;        /* a test batch's forward as a test pass runs it (shoal_worker_evaluate), at
                                * `batch` rows: the mean over every worker's timed batches; 0 in files from
                                * before it was measured and for a model without test data (test passes
                                * then cost no time) */
  double update_ns_per_byte;
  double rpc_ns_per_byte;      /* a message's transport per byte (serialising, the kernel's copies,
                                * the receiver's copy), beside the wire time; 0 in files from before
                                * it was measured */
  double rpc_us_per_message;   /* a message's fixed transport cost (the calls into the kernel, the
                                * receiver's wake-up), beside the wire time and the part per byte; 0
                                * in files from before it was measured */
  /* the passes of a process's other threads over a slice, per byte; 0 in
   * files from before they were measured: a pull of values from a server
   * in the worker's own process (the comm thread's copy), and a Hogwild
   * group sync's passes (the replica's take_delta and merge_master, the
   * master's apply_delta) */
  double pull_ns_per_byte;
  double sync_take_ns_per_byte, sync_apply_ns_per_byte, sync_merge_ns_per_byte;
  /* the wire codecs (core/codec.c) on this machine, ns per value: a
   * sender's encoding and a receiver's decoding of a slice (fp32's 0:
   * the transport covers it); 0 in files from before they were measured */
  double encode_ns_per_value[SHOAL_CODEC_COUNT], decode_ns_per_value[SHOAL_CODEC_COUNT];
  /* the backward's hand-offs, in the order they came: at ready_fraction[i]
   * of a step (the median over the timed steps) the gradients from param
   * offset ready_from[i] to the store's end were final.  n_ready 0 in
   * files from before they were measured: every slice ready at the
   * step's end */
  int *ready_from;
  double *ready_fraction;
  int n_ready;
  gint64 unit_bytes;           /* resident bytes of one unit's net */
  int threads;                 /* BLAS threads the steps ran with */
  int concurrent;              /* workers stepping at once when timed (1 in files from before it was
                                * recorded) */
  char *host;                  /* where it was measured */
} ShoalCalibration;

/* How to measure: `steps` timed steps of each worker, or, with steps 0,
 * as many as `seconds` take (at least SHOAL_CALIBRATION_MIN_STEPS); with
 * `concurrent` workers stepping at once (1: one alone). */
typedef struct {
  int steps;
  double seconds;
  int concurrent;
} ShoalCalibrationPlan;

#define SHOAL_CALIBRATION_MIN_STEPS 50
#define SHOAL_CALIBRATION_MAX_STEPS 100000
#define SHOAL_CALIBRATION_MAX_CONCURRENT 256

/* Measures the job's model here as plan says. */
gboolean shoal_calibration_measure (ShoalJob *job, const ShoalCalibrationPlan *plan, ShoalCalibration *out,
                                    GError **error);
gboolean shoal_calibration_save (const ShoalCalibration *cal, const char *path, GError **error);
/* Reads path and checks it is of job's model; errors name the file and
 * the key. */
gboolean shoal_calibration_load (const char *path, ShoalJob *job, ShoalCalibration *out, GError **error);
void shoal_calibration_clear (ShoalCalibration *cal);
/* The median of the measured steps. */
double shoal_calibration_median_ms (const ShoalCalibration *cal);
/* The fraction of a step after which the gradients from param offset
 * `begin` on are final: the first hand-off that covers it (a real
 * client queues a slice once every layer from its begin up is done,
 * comm/param_client.c); 1 (the step's end) where none does. */
double shoal_calibration_ready_fraction (const ShoalCalibration *cal, size_t begin);

G_END_DECLS

#endif /* SHOAL_CALIBRATION_H */
