/* A data file cut short while it is mapped.  LMDB reads every page
 * through its map, so a dataset that another program truncates or
 * rewrites in place while a run reads it turns the next read of a page
 * past the new end into SIGBUS, which would end the process without a
 * word (exit 135).  A guarded map's SIGBUS instead says which file shrank
 * and ends the process with status 1; a SIGBUS elsewhere ends it as
 * before.  Checkpoints lose nothing: every save is one LMDB transaction. */
#ifndef SHOAL_LMDB_MAP_GUARD_H
#define SHOAL_LMDB_MAP_GUARD_H

#include <glib.h>
#include <lmdb.h>

G_BEGIN_DECLS

/* Guards env's map (after mdb_env_open), naming `path` (the dataset) in
 * the message.  Up to 1024 maps at once; more are left unguarded. */
void shoal_lmdb_map_guard (MDB_env *env, const char *path);
/* Before mdb_env_close. */
void shoal_lmdb_map_unguard (MDB_env *env);

G_END_DECLS

#endif
