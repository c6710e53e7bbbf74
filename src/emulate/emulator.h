/* The virtual clock ([emulate] clock = virtual): a cluster with one
 * machine per worker, emulated deterministically on one machine.
 *
 * On a shared machine the cores decide which scheme wins, not the
 * scheme.  Here every unit of the layout (a group running as one net, or
 * one worker of a group spread over processes) and every server group
 * run in this one process, with real nets and real in-process
 * ShoalServers (no Thrift), driven by a discrete-event scheduler in
 * virtual time instead of threads:
 *   - a unit runs the real workers' step (worker.h: the runner's net
 *     with its data shard and training algorithm, compute, clipping,
 *     the train and test lines, the param client's push rule); its
 *     forward and backward really run, serially in event order, so the
 *     curves are real and only time is emulated.  The step costs
 *     step_ms / k (k workers share a group's batch), or a step drawn
 *     from the [emulate] calibration scaled to its rows, times its
 *     machine_factor, plus step_delay and its slowdown;
 *   - after its step a unit exchanges its slices one after another as
 *     its comm thread does (a push, then the reply), each message
 *     between two processes of the layout a flow through the per-pair
 *     link, the two processes' NICs and the core, shared max-min
 *     fairly with the flows in flight (emulate/nic_model.h), then the
 *     latency; a call to a server of its own process costs nothing;
 *   - a push waits for its server process's core (update_ns_per_byte);
 *     servers apply pushes in virtual-arrival order (ties in the order
 *     the events were made, which is deterministic); a SYNC step is
 *     applied at its last arrival (with backup workers the (k - b)-th),
 *     SSP replies wait for the bound, n_push / n_fetch skip pushes and
 *     fetches, Hogwild's group sync sends each due slice to its master
 *     and back over the links - the servers' own rules, in virtual time;
 *   - test passes cost no virtual time.
 * metrics.jsonl gets "vtime" beside "time" on every line; compute_s,
 * wait_s and samples_per_sec are virtual.  The same conf and seed give
 * the same lines but for "time" (test/e2e/virtual_clock.sh).  With
 * step_ms = 0 the step is measured once first: the curves repeat, the
 * virtual times do not.  A virtual run keeps no checkpoint but the final
 * params (so `shoal predict` and `shoal eval` work on its workspace) and
 * cannot be resumed; it repeats exactly instead. */
#ifndef SHOAL_EMULATOR_H
#define SHOAL_EMULATOR_H

#include <glib.h>

#include "job/job.h"
#include "worker/job_run.h"

G_BEGIN_DECLS

/* Runs the whole job on the virtual clock in this process (opts as for
 * shoal_run_job, endpoints NULL).  result's numbers are group 0's first
 * unit's (where group 0 was lost, the first surviving group's),
 * samples_per_sec in virtual time. */
gboolean shoal_emulator_run (ShoalJob *job, const ShoalRunOptions *opts, ShoalRunResult *result,
                             GError **error);

/* The median wall time of one training step of the job's net on a
 * group's batch (a plain net of one worker, this machine's cores), in
 * ms: what [emulate] step_ms = 0 measures, and what `shoal compare`
 * measures once and gives every run so that all repeat exactly. */
gboolean shoal_emulator_measure_step_ms (ShoalJob *job, double *step_ms, GError **error);

G_END_DECLS

#endif
