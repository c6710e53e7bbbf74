/* Which run a workspace's checkpoints are: the one rule both kinds of
 * --resume apply, and the model's fingerprint.
 * - A resumed run is the same model, data and layout as the run whose
 *   checkpoints it continues; it may change how long and how often
 *   ([job] train_steps, epochs, test and display frequencies,
 *   checkpoint_freq, max_seconds, metrics_interval, threads), the
 *   updater's rates (every [updater] key but type), the [cluster]
 *   timeouts and limits, and where a data layer reads (its train, test
 *   and data paths: a dataset moved to another disk, the same records;
 *   lmdb_input refuses one of another size only when a unit restores its
 *   cursor, after the workspace was claimed).  Every other key must be as it was,
 *   and the [layer] sections in the same order (the order of the params
 *   in the servers' store).
 * - The model: every key of the [layer] sections but the data paths and
 *   batch_size (steps of another batch are the same model), the
 *   [updater] type (unset: sgd) and [job] alg and cd_k.  Its fingerprint
 *   names it in a refusal and in a calibration file (emulate/calibration.h:
 *   a model's step times, whatever its rates or data paths).
 * - Where the run was: a launcher's or one process's WORKSPACE/job.conf,
 *   and for ranks started by mpirun or srun (no job.conf) the conf every
 *   unit saves with each checkpoint step ("job.conf" blob). */
#ifndef SHOAL_RUN_IDENTITY_H
#define SHOAL_RUN_IDENTITY_H

#include <glib.h>

G_BEGIN_DECLS

/* The name of the blob of the job's conf in a checkpoint step. */
#define SHOAL_RUN_IDENTITY_BLOB "job.conf"

/* Whether [group] key is part of the model (see above). */
gboolean shoal_run_identity_is_model_key (const char *group, const char *key);

/* Whether a resumed run may set [group] key otherwise than the run it
 * continues. */
gboolean shoal_run_identity_may_change (const char *group, const char *key);

/* The model's fingerprint in `conf`: 16 hex digits of the SHA-256 of its
 * model keys' values, the [layer] sections in their order and each
 * section's keys sorted (g_free). */
char *shoal_model_fingerprint (GKeyFile *conf);
/* A fingerprint's form: the first 16 hex digits of the SHA-256 of
 * `text` (g_free); the one every fingerprint of a model is written in,
 * calibration's earlier rule too (emulate/calibration.c). */
char *shoal_fingerprint_of_text (const char *text);

/* Whether a run of the conf `now` may resume the run of the conf `was`
 * (read from `where`: "WS/job.conf", or a checkpoint step).  FALSE with
 * SHOAL_ERROR_CONF otherwise, naming `workspace`, the first key that
 * differs and its two values, both fingerprints where it is the model's,
 * and how to go on. */
gboolean shoal_run_identity_check (const char *workspace, const char *where, GKeyFile *was, GKeyFile *now,
                                   GError **error);

G_END_DECLS

#endif
