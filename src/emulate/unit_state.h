/* What an emulated unit keeps between its events, and the one net the
 * units of the virtual clock borrow in turn for their steps.
 *
 * A unit of the virtual clock (emulate/emulator.h) computes only during
 * its own step events, one unit at a time; between them it needs far
 * less than a net: the values of the slices it received for its next
 * step, the gradient slices it has not pushed yet, and the net's
 * per-unit state (its data shard and cursor, the layers' random streams,
 * recurrent carried state, running statistics: shoal_group_net_save_state,
 * the same bytes a checkpoint keeps).  So one net serves every unit: a
 * unit borrows it for its step (shoal_shared_net_borrow: the net moves to
 * the unit's group, worker and shard, shoal_group_net_move, and takes the
 * unit's state and slices), and keeps holding it until another unit
 * borrows it; only then are the holder's live slices and state copied
 * out.  A slice is live as values from the reply that brought them to
 * the step that computes on them, and as a gradient from that step to the
 * push that takes it; with n_push = n_fetch = 1 a slice is never both, so
 * a unit in flight holds at most about one copy of the params, and a
 * unit waiting with everything pushed holds none of a slice whose reply
 * has not come.
 *
 * The results are those of one net per unit: the borrowed net is put in
 * exactly the state the unit's own net would be in (the same state a
 * resumed run restores) and computes on exactly its values. */
#ifndef SHOAL_UNIT_STATE_H
#define SHOAL_UNIT_STATE_H

#include <glib.h>

#include "partition/partition.h"

G_BEGIN_DECLS

typedef enum {
  SHOAL_UNIT_VALUES = 1 << 0,  /* the slice's values for the next step */
  SHOAL_UNIT_GRADS = 1 << 1    /* a gradient of the slice still to be pushed */
} ShoalUnitLive;

typedef struct {
  ShoalNetOptions place;   /* the group, worker and shard its net is built for (the runner's) */
  GBytes *state;           /* the net's per-unit state while another unit holds the net */
  float **values;          /* per slice, while another unit holds the net: live values (NULL with
                            * SHOAL_UNIT_VALUES: the values every unit began with) */
  float **grads;           /* per slice, while another unit holds the net: a live gradient */
  guint8 *live;            /* per slice: ShoalUnitLive */
} ShoalUnitState;

typedef struct {
  ShoalGroupNet *net;      /* owned */
  ShoalParamStore *store;  /* the net's */
  int nslices;
  size_t *begin, *end;     /* per slice: its floats in the store */
  ShoalUnitState *holder;  /* whose the net's values, gradients and state are; NULL: no one's */
  float *initial;          /* the values every unit begins with (the servers' version 0) */
  gsize held, held_peak;   /* bytes of slices units hold while not holding the net */
  float **spare;           /* per slice: buffers no unit holds, a list linked through their first bytes */
} ShoalSharedNet;

/* Takes `net` (values initialised, no forward run yet) and the slices'
 * ranges [begin[s], end[s]) of its store. */
ShoalSharedNet *shoal_shared_net_new (ShoalGroupNet *net, int nslices, const size_t *begin, const size_t *end);
void shoal_shared_net_free (ShoalSharedNet *sn);

/* A unit whose net is built for `place`: its state is the one the net
 * has, set up for that unit, before any forward (so call it for every
 * unit before the first borrow); it begins with the initial values. */
gboolean shoal_unit_state_init (ShoalSharedNet *sn, ShoalUnitState *u, const ShoalNetOptions *place,
                                GError **error);
void shoal_unit_state_clear (ShoalSharedNet *sn, ShoalUnitState *u);

/* The net is u's from now on: its live values are the net's values, its
 * live gradients the net's gradients (the other slices' gradients zero),
 * its state the net's.  FALSE when its state does not load (a data
 * shard whose records do not decode). */
gboolean shoal_shared_net_borrow (ShoalSharedNet *sn, ShoalUnitState *u, GError **error);

/* After a step of the holder: every slice's gradient is live. */
void shoal_unit_state_computed (ShoalSharedNet *sn, ShoalUnitState *u);
/* Its values are spent: the replies to come bring the next step's. */
void shoal_unit_state_drop_values (ShoalSharedNet *sn, ShoalUnitState *u);
/* Where slice s's live gradient is, for a push to read. */
const float *shoal_unit_state_grads (ShoalSharedNet *sn, ShoalUnitState *u, int s);
/* The push of slice s took its gradient. */
void shoal_unit_state_pushed (ShoalSharedNet *sn, ShoalUnitState *u, int s);
/* Where the values of slice s that a reply brings go (they are live from
 * now on). */
float *shoal_unit_state_values_slot (ShoalSharedNet *sn, ShoalUnitState *u, int s);

G_END_DECLS

#endif
