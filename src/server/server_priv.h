/* What server.c, server_sync.c and server_checkpoint.c share (internal
 * to src/server): a server's slices and segments, and the checks every
 * call on a slice makes. */
#ifndef SHOAL_SERVER_PRIV_H
#define SHOAL_SERVER_PRIV_H

#include "server/server.h"
#include "server/ssp.h"

G_BEGIN_DECLS

#define SLICE_ALIGN 16

typedef struct {
  size_t begin, end;
  gboolean hosted;
  gint64 version;          /* updates applied */
  int contributions;       /* SYNC: gradients summed for step == version */
  float *accumulator;      /* SYNC with several contributors: the running sum; owned */
  float *baseline;         /* Hogwild: values at the last sync; owned, NULL until first take */
  float *center;           /* EASGD master: the center variable; owned, NULL without elastic_center */
  gint64 updates_since_sync;
  ShoalClocks *clocks;     /* SSP: the pushing units' clocks; owned, NULL without SSP */
  int readers;             /* replies sending the values in place (shoal_server_pull_pinned) */
  gint writers_waiting;    /* atomic: writers waiting for them (wait_readers) */
  GMutex lock;
  GCond changed;
} Slice;

typedef struct {
  size_t offset, count;
  float lr_scale, wd_scale;
  gint updates;    /* Adam's bias-correction count (what the checkpoint keeps); atomic */
} Segment;

struct _ShoalServer {
  ShoalUpdaterConf updater;
  ShoalServerOptions opts;
  size_t total;
  float *values;            /* own_values, or the storage adopted (shoal_server_adopt_values) */
  float *own_values;        /* what the server allocated; freed with it */
  gboolean values_lent;     /* shoal_server_values gave the buffer out: never replaced */
  gpointer adopted;         /* the adopted storage's owner, released with the server */
  GDestroyNotify adopted_release;
  float *state;             /* state_per_value * total */
  int state_per_value;
  Slice *slices;
  int nsegments;
  /* [slice * nsegments + segment]: updates of the segment's values inside
   * the slice (under the slice's lock).  A param that spans slices gets
   * one update per slice, in whatever order the slices arrive: each part
   * counts its own, so Adam corrects every value by the updates its
   * moments saw (one count per param lagged a step for the parts applied
   * before the part holding the param's start). */
  gint *part_updates;
  Segment *segments;        /* params in offset order */
  gint stopping;            /* atomic */
  gint64 stop_step;         /* SYNC: the job stops here (shoal_server_stop_at); G_MAXINT64 none;
                             * atomic, set before each slice's waiters are woken */
  GMutex checkpoint_lock;
  gint64 last_checkpoint;   /* step of the last save; -1 none */
  GMutex sync_lock;         /* Hogwild: wakes the sync thread after updates */
  GCond sync_due;
  ShoalServerStats stats;   /* atomics */
  GMutex staleness_lock;    /* taken inside slice locks */
  ShoalStaleness staleness; /* since the last shoal_server_take_staleness */
  /* On a device (server_device.c, shoal_server_move_to_device): updates
   * run there; values and state above are its host copies, brought up to
   * date by shoal_server_sync_host when something reads them. */
  ShoalDevice device;
  ShoalStream *stream;      /* borrowed: where updates are enqueued */
  float *dev_values;        /* borrowed: the full layout's values on the device */
  float *dev_state;         /* owned: state_per_value * total floats on the device */
  gint host_stale;          /* atomic: the device changed values since the last sync */
};

/* Device mode (server_device.c).  The update of [begin, end) of a slice's
 * segment on the device: value and state at offset a, grad a device
 * pointer (zeroed as read when clear). */
void shoal_server_device_apply (ShoalServer *server, int step, gint64 t, float lr_scale, float wd_scale,
                                size_t a, const float *grad, size_t n, gboolean clear);
/* Zeroes a pusher's gradient wherever it lives (device mode: on the device). */
void shoal_server_clear_grad (ShoalServer *server, float *grad, size_t n);
/* After host values[begin, end) changed (a put, a restore): the same on the device. */
void shoal_server_device_upload (ShoalServer *server, size_t begin, size_t end);

/* The slice a call of `what` names, checked: known, hosted here, n
 * values long, the server not stopping; NULL and an error otherwise. */
Slice *shoal_server_checked_slice (ShoalServer *server, const char *what, int slice, size_t n,
                                   GError **error);
/* Under the slice's lock, before its values change: waits until no
 * reply sends them in place (shoal_server_pull_pinned). */
void shoal_server_wait_readers (Slice *s);
/* counter += v on one of the server's atomic statistics */
void shoal_server_stat_add (gint64 *counter, gint64 v);

G_END_DECLS

#endif /* SHOAL_SERVER_PRIV_H */
