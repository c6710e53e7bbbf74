/* The [emulate] section of a job conf: a cluster that is not there.
 *
 * On one machine every scheme shares the same cores and the same
 * loopback, so nothing straggles and no link is slow; this section makes
 * them so, on purpose and reproducibly.  It is emulation, not
 * measurement: a slowed worker sleeps, a limited link waits, and what
 * the run shows is what the scheme does under those conditions, not how
 * a real cluster of that shape would perform (docs/SCHEMES.md,
 * "Emulation").
 *
 *   clock = real | virtual
 *       real: the job runs as always, its workers sleeping and its links
 *       waiting as below.  virtual: every unit of the layout runs in one
 *       process, driven by a discrete-event scheduler in virtual time
 *       (emulate/emulator.h): as if each worker had a machine of its own.
 *   step_ms = MS
 *       virtual: what one step of a group's batch costs one machine; a
 *       unit of a group of k workers takes step_ms / k.  0: measured once
 *       at the start (then the curves repeat but the times do not).
 *   slow_groups = G, ...        groups slowed (0-based)
 *   slow_workers = W, ...       single workers: GROUP.WORKER, or the global
 *                               index group * nworkers_per_group + worker
 *   slow_factor = F, ...        >= 1: a step takes F x its compute time
 *   slow_extra_ms = MS, ...     fixed extra time per step
 *   slow_delay = DIST           random extra time per step, drawn from
 *       exponential(MEAN_MS) | uniform(LOW_MS, HIGH_MS) |
 *       normal(MEAN_MS, SD_MS) (truncated at 0) | lognormal(MU, SIGMA)
 *       (of the delay in ms) | pareto(SCALE_MS, SHAPE) | none,
 *       one stream per worker seeded from the job seed and the worker
 *   slow_factor and slow_extra_ms hold one value for every slowed unit or
 *   one per unit, slow_groups' first, then slow_workers'.
 *   bandwidth_mbit = MBIT       every link between two processes
 *   latency_ms = MS             one way, per message
 * The virtual clock's timing model (docs/SCALE.md; the real clock
 * refuses these keys by name):
 *   nic_mbit = MBIT | unlimited every process's NIC, in and out, shared
 *                               max-min fairly by its messages; absent:
 *                               bandwidth_mbit's (unlimited: the links alone)
 *   core_mbit = MBIT            an oversubscribed core all messages share
 *   update_ns_per_byte = NS     a server's update cost (one core each)
 *   process_cores = N           the cores of every process: its workers
 *                               compute on them, its other work (updates,
 *                               copies, syncs, decoding) takes one while
 *                               all compute; 0: that work has its own core
 *   step_delay = DIST           extra ms of every unit's every step
 *   machine_factor = DIST       each unit's slowdown, drawn once
 *   calibration = FILE          `shoal calibrate`'s measured steps and
 *                               update cost for this model
 *   fault_group = G, fault_at = S   group G's processes die (as kill -9)
 *                               S seconds into the job (virtual seconds
 *                               with the virtual clock)
 * Every error names the key: "[emulate] slow_factor: 0.5 is below 1 ...". */
#ifndef SHOAL_EMULATE_H
#define SHOAL_EMULATE_H

#include <glib.h>

#include "cluster/cluster_conf.h"
#include "core/conf.h"
#include "core/rng.h"

G_BEGIN_DECLS

typedef enum {
  SHOAL_CLOCK_REAL,
  SHOAL_CLOCK_VIRTUAL
} ShoalClockMode;

typedef enum {
  SHOAL_DELAY_NONE,
  SHOAL_DELAY_EXPONENTIAL,  /* p1 = mean ms */
  SHOAL_DELAY_UNIFORM,      /* p1 = low ms, p2 = high ms */
  SHOAL_DELAY_NORMAL,       /* p1 = mean ms, p2 = sd ms; draws below 0 are drawn again */
  SHOAL_DELAY_LOGNORMAL,    /* exp (N (p1, p2^2)) ms */
  SHOAL_DELAY_PARETO        /* p1 = scale (the smallest delay) ms, p2 = shape */
} ShoalDelayKind;

typedef struct {
  ShoalDelayKind kind;
  double p1, p2;
} ShoalDelay;

/* One slowed unit as the conf names it. */
typedef struct {
  int group;
  int worker;          /* -1: every worker of the group */
  double factor;       /* >= 1 */
  double extra_ms;     /* >= 0 */
} ShoalSlowEntry;

typedef struct {
  ShoalClockMode clock;
  double step_ms;          /* virtual: a group's batch on one machine; 0: measured */
  ShoalSlowEntry *slow;    /* nslow entries; owned (shoal_emulate_conf_clear) */
  int nslow;
  ShoalDelay delay;        /* of every slowed unit */
  double bandwidth_mbit;   /* 0: no limit */
  double latency_ms;
  int fault_group;         /* -1: none */
  double fault_at;         /* seconds of the job's clock */
  /* the virtual clock's timing model (docs/SCALE.md) */
  double nic_mbit;         /* every process's NIC, each way; 0: no limit */
  gboolean nic_from_links; /* nic_mbit absent: the NICs take bandwidth_mbit's speed */
  double core_mbit;        /* an oversubscribed core; 0: none */
  double update_ns_per_byte;  /* a server's update per byte; < 0: the calibration's, else 0 */
  int process_cores;       /* every process's cores; 0: its other work has a core of its own */
  ShoalDelay step_delay;   /* extra ms of every step of every unit */
  ShoalDelay machine_factor;  /* each unit's slowdown factor, drawn once; NONE: 1 */
  char *calibration;       /* `shoal calibrate`'s file, resolved; owned; NULL: none */
} ShoalEmulateConf;

extern const ShoalOption shoal_emulate_options[];

/* Reads and checks [emulate] (the section may be absent: nothing is
 * emulated) against the cluster it emulates.  FALSE with an error naming
 * the conf place and the key. */
gboolean shoal_emulate_conf_read (ShoalConf *conf, const ShoalClusterConf *cluster, ShoalEmulateConf *emu,
                                  GError **error);
void shoal_emulate_conf_clear (ShoalEmulateConf *emu);
/* Deep copy of src into dst (dst is overwritten, not cleared). */
void shoal_emulate_conf_copy (ShoalEmulateConf *dst, const ShoalEmulateConf *src);
/* Whether anything is emulated at all. */
gboolean shoal_emulate_active (const ShoalEmulateConf *emu);

/* An emulation file (`shoal compare --emulate FILE`): a conf holding only
 * an [emulate] section, its keys checked against the table (errors name
 * its lines), as overrides "emulate.KEY=VALUE" (g_strfreev), or NULL with
 * error.  What depends on the layout is checked when a job loads them. */
char **shoal_emulate_file_overrides (const char *path, GError **error);

/* "exponential(20)" and the like; FALSE with a message (no conf place). */
gboolean shoal_delay_parse (const char *text, ShoalDelay *delay, GError **error);
/* One draw in ms, in [0, SHOAL_DELAY_MAX_MS]: an hour per step bounds a
 * heavy tail's draws (pareto(1, 0.01) draws 1e30 ms) so that every clock
 * can hold them, far above any delay a study means. */
#define SHOAL_DELAY_MAX_MS 3.6e6
/* slow_factor's most: its extra (factor - 1) x compute is bounded by
 * SHOAL_DELAY_MAX_MS too; a factor past a million is a typo. */
#define SHOAL_SLOW_FACTOR_MAX 1e6
double shoal_delay_draw_ms (const ShoalDelay *delay, ShoalRng *rng);
/* The distribution's mean in ms (G_MAXDOUBLE for a Pareto shape <= 1). */
double shoal_delay_mean_ms (const ShoalDelay *delay);

/* ---- per unit ---------------------------------------------------------- */

/* How much longer a unit's steps take: the unit is `nworkers` workers of
 * `group` from `first_worker` on (a group running as one net, or one
 * worker), and waits for its slowest: every step each slowed worker w
 * adds (factor_w - 1) x compute + extra_w + a draw from its own stream,
 * and the unit adds the largest of those. */
typedef struct _ShoalSlowdown ShoalSlowdown;

/* NULL when no worker of the unit is slowed. */
ShoalSlowdown *shoal_slowdown_new (const ShoalEmulateConf *emu, const ShoalClusterConf *cluster, guint64 seed,
                                   int group, int first_worker, int nworkers);
void shoal_slowdown_free (ShoalSlowdown *slow);
/* The extra seconds of this step, whose compute took compute_s (draws
 * the next delays). */
double shoal_slowdown_extra_s (ShoalSlowdown *slow, double compute_s);
/* "3x + 20 ms + exponential(20) ms" for logs (g_free). */
char *shoal_slowdown_describe (const ShoalSlowdown *slow);

G_END_DECLS

#endif
