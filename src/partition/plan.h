/* The partitioner's plan (internal to src/partition): which layers each
 * worker of a group runs and which connection layers join them, written
 * as one conf per worker.  group_net.c builds the sub-nets from these
 * confs and runs them; docs/PARTITIONING.md has the rules. */
#ifndef SHOAL_PLAN_H
#define SHOAL_PLAN_H

#include <glib.h>

#include "core/conf.h"
#include "net/net.h"

G_BEGIN_DECLS

typedef enum {
  NODE_PART,         /* a worker's part of an original layer */
  NODE_CONCAT,
  NODE_SLICE,
  NODE_BRIDGE_SRC,
  NODE_BRIDGE_DST
} PlanNodeRole;

typedef struct {
  char *name;
  const char *type;        /* static string */
  PlanNodeRole role;
  int orig;                /* the original layer it is (a part) or carries (connections) */
  int worker;
  int dim;                 /* partition_dim written into the sub-net's conf */
  GPtrArray *srcs;         /* char *, owned */
  GPtrArray *keys, *values;  /* options beyond the original group's, owned */
} PlanNode;

/* An original layer: what the plan needs, and at run time its parts. */
typedef struct {
  char *name;
  char *group;                       /* "layer NAME" */
  const ShoalLayerOps *ops;
  int dim;
  int srcs[SHOAL_LAYER_MAX_SRCS];    /* indices of original layers */
  int nsrcs;
  ShoalShape shape;                  /* out of the unpartitioned net */
  gboolean label, needs_grad;
  int label_steps;                   /* labels per row (sequences: > 1) */
  int units;                         /* dim 1 with ops->split.units_key: the whole count */
  size_t param_floats;               /* its params' values */
  size_t in_floats;                  /* values of one row of its first source */
  int batch_rows;                    /* rows of its batch (of srcs[0] for losses, metrics) */
  /* plan caches, names borrowed from nodes; [k] or [k * k] */
  const char **native, **whole, **rows, **features, **bridged;
  ShoalLayer **parts;                /* run time: [k] the workers' parts, NULL where absent */
  ShoalLayer *proxy;                 /* shoal_group_net_layer: a description, the group net's */
  int param_layer;                   /* index into params layers, or -1 */
} PlanLayer;

typedef struct {
  int src_worker, dst_worker;
  PlanNode *src, *dst;
} PlanPair;

typedef struct {
  ShoalConf *conf;
  int k;
  PlanLayer *origs;
  int norig;
  GHashTable *orig_index;            /* name -> index + 1 */
  GPtrArray **nodes;                 /* [k] of PlanNode *, creation order */
  GPtrArray *pairs;                  /* PlanPair *, owned */
  int input;                         /* first input layer among origs, or -1 */
  gboolean spread;                   /* the group is spread over processes: partition_dim auto
                                      * splits by batch (activations would cross processes) */
} Plan;

/* [cluster] partition_dim = auto, as the plan's net-wide default. */
#define SHOAL_PLAN_DIM_AUTO 2

/* Reads the original layers of `full` (the unpartitioned net; splits left
 * out, sources followed through them) for a group of k workers.  Free
 * with shoal_plan_clear. */
void shoal_plan_read (Plan *pl, ShoalConf *conf, int k, ShoalNet *full);
/* Chooses every layer's dim (explicit, [cluster] partition_dim, fallback)
 * and plans every worker's nodes.  FALSE with error (file, line, layer,
 * dim) when a split is impossible. */
gboolean shoal_plan_make (Plan *pl, GError **error);
/* Worker w's sub-net as a conf (shoal_conf_free), NULL with error. */
ShoalConf *shoal_plan_subnet_conf (Plan *pl, int w, GError **error);
/* Whether an input layer is split by batch (each worker reads a shard). */
gboolean shoal_plan_split_input (const Plan *pl);
/* Whether worker w has a part of layer o. */
gboolean shoal_plan_has_part (const PlanLayer *o, int worker);
const char *shoal_plan_dim_name (int dim);
/* Frees the nodes and pairs (once the sub-nets are built). */
void shoal_plan_drop_nodes (Plan *pl);
/* Frees everything the plan holds but the layers' proxies. */
void shoal_plan_clear (Plan *pl);

G_END_DECLS

#endif
