/* A checkpoint store: an LMDB environment holding named blobs per step,
 * e.g. "server" (a server's slices, optimiser state and versions) or
 * "unit-0-0" (a worker's data cursors and random streams).
 *
 * Every save is one LMDB transaction, so a crash mid-write leaves the
 * previous checkpoint intact.  For each name the store keeps the last two
 * steps: processes of one job checkpoint independently, and a resume
 * picks the newest step that every process has. */
#ifndef SHOAL_CHECKPOINT_H
#define SHOAL_CHECKPOINT_H

#include <glib.h>

G_BEGIN_DECLS

typedef struct _ShoalCheckpoint ShoalCheckpoint;

/* Opens (create: creating) the store in directory dir.  Returns NULL with
 * error (SHOAL_ERROR_IO / _DATA) naming the directory. */
ShoalCheckpoint *shoal_checkpoint_open (const char *dir, gboolean create, GError **error);
void shoal_checkpoint_close (ShoalCheckpoint *ckpt);

/* Saves the blobs of one step under their names, all in one transaction;
 * names and blobs are NULL-terminated parallel arrays.  Keeps the last two
 * steps of each name and drops older ones. */
gboolean shoal_checkpoint_save (ShoalCheckpoint *ckpt, gint64 step, const char *const *names,
                                GBytes *const *blobs, GError **error);
/* The blob of name at step (new reference), or NULL with error: absent,
 * or damaged (its bytes do not match the length and CRC-32 saved with
 * them; a blob saved before sums were kept has none and is not checked). */
GBytes *shoal_checkpoint_load (ShoalCheckpoint *ckpt, const char *name, gint64 step, GError **error);
/* FALSE with error when name's blob at step is there but damaged; TRUE
 * when it is intact or absent.  Reads it without copying it. */
gboolean shoal_checkpoint_intact (ShoalCheckpoint *ckpt, const char *name, gint64 step, GError **error);
/* The steps kept for name, newest first; returns how many (0, 1 or 2). */
int shoal_checkpoint_steps (ShoalCheckpoint *ckpt, const char *name, gint64 steps[2]);
/* Whether the store keeps name at step. */
gboolean shoal_checkpoint_has (ShoalCheckpoint *ckpt, const char *name, gint64 step);
/* Every name in the store (g_strfreev). */
char **shoal_checkpoint_names (ShoalCheckpoint *ckpt);

/* The newest step that every name of every store in `dirs` has intact
 * (a damaged step is left out with a warning naming it), or -1. */
gint64 shoal_checkpoint_common_step (const char *const *dirs, GError **error);

G_END_DECLS

#endif
