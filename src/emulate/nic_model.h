/* The virtual clock's network (emulate/emulator.c): messages between the
 * processes of a layout as fluid flows through the NICs they cross.
 *
 * Every process (node) has a NIC with an out and an in bandwidth of its
 * own (full duplex); every flow from node a to node b crosses a's out
 * side and b's in side, optionally a per-pair link cap (the real
 * transport's per-socket limit, [emulate] bandwidth_mbit) and optionally
 * one shared core of the given capacity (an oversubscribed bisection:
 * every flow between two nodes crosses it).  The flows in progress share
 * each of these max-min fairly (progressive filling, Bertsekas and
 * Gallager, "Data Networks", 6.5.2): two flows out of one NIC get half
 * each; n pushes into one server's NIC (incast) share its in side and
 * finish together at n x bytes / bandwidth.  Rates are recomputed each
 * time a flow begins or ends; between those instants they hold, so a
 * flow's end is exact, not stepped.  Latency is not here: the caller
 * adds it once per message (emulator.c).
 *
 * Deterministic: ties (flows ending at the same nanosecond) come out in
 * the order the flows began. */
#ifndef SHOAL_NIC_MODEL_H
#define SHOAL_NIC_MODEL_H

#include <glib.h>

#include "emulate/event_queue.h"

G_BEGIN_DECLS

typedef struct _ShoalNicModel ShoalNicModel;

/* nnodes nodes whose NICs move nic_bytes_per_s each way (0: unlimited),
 * each pair's link at most link_bytes_per_s (0: no per-link cap) and all
 * inter-node flows together at most core_bytes_per_s (0: no core). */
ShoalNicModel *shoal_nic_model_new (int nnodes, double nic_bytes_per_s, double link_bytes_per_s,
                                    double core_bytes_per_s);
void shoal_nic_model_free (ShoalNicModel *model);
/* One node's NIC, out and in (0: unlimited), in place of the default. */
void shoal_nic_model_set_nic (ShoalNicModel *model, int node, double out_bytes_per_s, double in_bytes_per_s);
/* Whether any limit is set: without one every message takes no time. */
gboolean shoal_nic_model_limited (const ShoalNicModel *model);

/* A message of `bytes` from node src to node dst (src != dst) begins at
 * `now` (not before the last call's time); `what` comes back when it has
 * crossed (its t is set then). */
void shoal_nic_model_start (ShoalNicModel *model, gint64 now, int src, int dst, guint64 bytes,
                            const ShoalTimedEvent *what);
/* When the next flow ends (virtual ns); G_MAXINT64 when none is in flight. */
gint64 shoal_nic_model_next_end (const ShoalNicModel *model);
/* Ends the flow that ends first: advances the model to its end and
 * returns its `what` with t = that end.  FALSE when none is in flight. */
gboolean shoal_nic_model_pop (ShoalNicModel *model, ShoalTimedEvent *what);
/* Flows in flight. */
guint shoal_nic_model_in_flight (const ShoalNicModel *model);

G_END_DECLS

#endif /* SHOAL_NIC_MODEL_H */
