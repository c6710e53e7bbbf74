/* Internals of the group net shared by its files: group_net.c (building
 * it), group_run.c (its threads), group_state.c, group_graph.c,
 * inproc_link.c and spread.c (a group spread over processes).  Not a
 * public header. */
#ifndef SHOAL_GROUP_PRIV_H
#define SHOAL_GROUP_PRIV_H

#include "layers/bridge.h"
#include "partition/group_wire.h"
#include "partition/partition.h"
#include "partition/plan.h"

G_BEGIN_DECLS

/* Run-time state of an original layer with params. */
typedef struct {
  int orig;
  int remaining;          /* workers still to finish its backward this step */
  gboolean ready;         /* its gradients are complete in the group store */
  GArray *sums;           /* ParamSum: batch-split params summed over workers */
} ParamLayer;

typedef struct {
  size_t offset, count;   /* in the group store */
  float **priv;           /* [k]: worker w's own gradient; priv[0] is NULL (adds in place) */
} ParamSum;

typedef struct {
  ShoalParam *param;      /* a sub-net's param */
  size_t offset;          /* its first value in the group store */
  gboolean grad;          /* its gradient is in the group store too */
} ParamView;

typedef struct {
  float *data;
  size_t count;
  gboolean summed;        /* the group's sum adds it in and zeroes it: no clearing before backward */
} PrivGrad;

typedef struct {
  ShoalGroupNet *group;
  int worker;
  GArray *priv_grads;     /* PrivGrad: zero at this worker's backward (cleared there, or by the sum) */
  double *fwd_s, *bwd_s;  /* [layers of the sub-net] when timing */
} WorkerCtx;

/* CMD_STEP: a train forward and backward in one wake-up */
typedef enum { CMD_FORWARD, CMD_BACKWARD, CMD_STEP, CMD_QUIT } Command;

/* Spread groups: a block of a param that a worker's gradient covers, in
 * the order both ends of the wire walk them. */
typedef struct {
  size_t offset, count;   /* in the group store */
  int player;             /* its ParamLayer */
  ShoalParam *sub;        /* a local worker's param (its grad and values), else NULL */
  float *land;            /* leader, remote batch-split part: the gradient's buffer (the
                           * ParamSum's priv); NULL: added into the store's grads */
  gboolean values_back;   /* a statistic: forward writes the values, they travel back */
} WireRange;

/* Spread groups: what the wire knows of one worker of the group. */
typedef struct {
  int proc;               /* the group's process holding it */
  GArray *ranges;         /* WireRange; the leader's for remote workers, a follower's for its own */
  double *value;          /* [norig] leader: the remote worker's loss / metric values ... */
  int *rows;              /* [norig] ... with the rows they cover (inputs: their rows) */
} WorkerWire;

struct _ShoalGroupNet {
  int k;
  ShoalConf *conf;            /* borrowed */
  ShoalConf **confs;          /* [k] generated, owned; NULL when k = 1 */
  ShoalNet **nets;            /* [k] owned; NULL for workers in other processes */
  ShoalParamStore *store;     /* the group's params; owned unless k = 1 */
  Plan plan;                  /* origs live on; nodes are freed after building */

  ParamLayer *players;
  int nplayers;
  GArray *views;              /* ParamView */
  float *bound_values;
  GPtrArray *links;           /* ShoalBridgeLink *, each with an Inproc or a WireLink */
  WorkerCtx *wctx;            /* [k] */

  int first, nlocal;          /* the workers in this process: first .. first + nlocal - 1 */
  const ShoalGroupWire *wire; /* NULL: every worker is here */
  WorkerWire *ww;             /* [k] when spread */
  GPtrArray *land_bufs;       /* leader: the remote batch-split gradients' buffers */
  GArray **proc_values;       /* [nprocs] leader: ValueRange each follower gets before a step */
  guint64 seq;                /* commands sent (leader) or taken (follower) */
  float **sent_values;        /* [nprocs] leader: the values of the last test forward sent */
  gboolean finished;          /* the followers were told to quit */
  GError *wire_error;         /* the first failure of the wire; later waits give up at once */
  gint64 wait_ms;             /* longest wait for bridge data and results */
  gint64 peer_wait_us;        /* time local workers waited for bridge data and results from
                               * other processes, summed over threads; atomic */

  GThread **threads;          /* [k]; only local workers but `first` have one */
  GMutex lock;
  GCond wake, done;
  Command cmd;
  guint64 cmd_seq;
  int pending;                /* helpers still running the command */
  ShoalPhase phase;
  int next_notify;            /* players index to hand to `ready` next; -1: all */
  ShoalParamsReadyFunc ready;
  gpointer ready_data;
  gboolean timing;
};

typedef struct {
  size_t offset, count;
} ValueRange;

static inline gboolean
group_is_local (const ShoalGroupNet *g, int w)
{
  return w >= g->first && w < g->first + g->nlocal;
}

/* group_net.c: the options worker w's net of the group is built with
 * (its worker index and data shard). */
ShoalNetOptions group_worker_options (const ShoalGroupNet *g, const ShoalNetOptions *opts, int w);
/* group_run.c: runs `cmd` on the local workers (the leader also on the
 * followers, through spread.c), waiting for all of them. */
void group_run_command (ShoalGroupNet *g, Command cmd);
/* group_run.c: before a backward, every layer's count of workers. */
void group_arm_backward (ShoalGroupNet *g, ShoalParamsReadyFunc ready, gpointer user_data);
/* group_run.c: `n` more workers finished player i's backward; the last
 * completes its gradient in the store.  Called with g->lock NOT held. */
void group_players_done (ShoalGroupNet *g, int i, int n);

/* inproc_link.c: a bridge link between two workers of this process
 * (src and dst still to set); group_link_free frees any link. */
ShoalBridgeLink *group_inproc_link_new (void);
void group_link_free (ShoalBridgeLink *link);

/* group_run.c: sub-net params read their values in the group store; the
 * thread of a local worker but the first; joining them. */
void group_bind_values (ShoalGroupNet *g);
gpointer group_helper_thread (gpointer data);
void group_stop_threads (ShoalGroupNet *g);

/* spread.c */
gboolean spread_prepare (ShoalGroupNet *g, GError **error);   /* after map_params */
gboolean spread_link (ShoalGroupNet *g, ShoalBridgeLink *link, int src_worker, int dst_worker,
                      guint index, GError **error);
void spread_send_command (ShoalGroupNet *g, Command cmd);    /* leader, before the local run */
void spread_collect (ShoalGroupNet *g, Command cmd);         /* leader, after the local run */
void spread_record_error (ShoalGroupNet *g, GError *error);  /* takes error */
/* leader: remote workers' states into states[w] (new refs), or their load */
gboolean spread_save_states (ShoalGroupNet *g, GBytes **states, GError **error);
gboolean spread_load_states (ShoalGroupNet *g, GBytes **states, GError **error);
void spread_free (ShoalGroupNet *g);

G_END_DECLS

#endif
