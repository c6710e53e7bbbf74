/* Updaters: the rules that turn gradients into new param values (SGD
 * with momentum, Nesterov, AdaGrad, RMSProp, AdaDelta, Adam with bias
 * correction), learning-rate schedules, warm-up, weight decay and
 * gradient clipping.  Servers apply them to their slices; an application
 * that trains a net itself applies them to the net's store with a
 * ShoalUpdater. */
#ifndef SHOAL_PUBLIC_UPDATER_H
#define SHOAL_PUBLIC_UPDATER_H

#include <glib.h>

#include <shoal/param.h>

G_BEGIN_DECLS

typedef enum {
  SHOAL_UPDATER_SGD,
  SHOAL_UPDATER_NESTEROV,
  SHOAL_UPDATER_ADAGRAD,
  SHOAL_UPDATER_RMSPROP,
  SHOAL_UPDATER_ADADELTA,
  SHOAL_UPDATER_ADAM,
  SHOAL_UPDATER_COUNT
} ShoalUpdaterKind;

typedef enum {
  SHOAL_LR_FIXED,        /* lr */
  SHOAL_LR_STEP,         /* lr * gamma^floor(step / step_size) */
  SHOAL_LR_FIXED_STEP,   /* lr_list[i] from step_list[i] on (step_list ascending, first is 0) */
  SHOAL_LR_EXPONENTIAL,  /* lr * gamma^(step / step_size) */
  SHOAL_LR_INVERSE,      /* lr * (1 + gamma*step)^(-power) */
  SHOAL_LR_COUNT
} ShoalLrPolicy;

#define SHOAL_LR_MAX_STEPS 16

typedef struct {
  ShoalLrPolicy policy;
  float lr;
  float gamma;
  float power;
  int step_size;
  int nsteps;                          /* fixed_step entries */
  int step_list[SHOAL_LR_MAX_STEPS];
  float lr_list[SHOAL_LR_MAX_STEPS];
  int warmup_steps;                    /* linear warm-up from lr/warmup to the policy's lr; 0 = none */
} ShoalLrSchedule;

typedef struct {
  ShoalUpdaterKind kind;
  ShoalLrSchedule schedule;
  float momentum;       /* sgd, nesterov */
  float weight_decay;
  float beta1, beta2;   /* adam */
  float rho;            /* rmsprop, adadelta */
  float epsilon;
  float clip_value;     /* clip each gradient element to +- clip_value; 0 = off */
  float clip_norm;      /* clip the gradient's global L2 norm; 0 = off */
} ShoalUpdaterConf;

/* A conf of `kind` with the rule's defaults (lr 0.01, fixed schedule). */
void shoal_updater_conf_defaults (ShoalUpdaterConf *conf, ShoalUpdaterKind kind);
/* "sgd", "adam", ...: static strings. */
const char *shoal_updater_kind_name (ShoalUpdaterKind kind);
gboolean shoal_updater_kind_parse (const char *name, ShoalUpdaterKind *kind);
const char *shoal_lr_policy_name (ShoalLrPolicy policy);
gboolean shoal_lr_policy_parse (const char *name, ShoalLrPolicy *policy);
/* The learning rate at 0-based `step`. */
float shoal_lr_at (const ShoalLrSchedule *schedule, int step);

typedef struct _ShoalUpdater ShoalUpdater;

/* An updater for the params of `store` (borrowed; it must outlive the
 * updater): it allocates the rule's optimiser state in the store and
 * counts each param's updates (Adam's bias correction).  `conf` is
 * copied.  Free with shoal_updater_free.  A conf whose kind or
 * schedule.policy is none of the enums' values is a programmer's error
 * (a critical, NULL); memory for the state that cannot be had aborts, as
 * g_malloc does. */
ShoalUpdater *shoal_updater_new (const ShoalUpdaterConf *conf, ShoalParamStore *store);
/* One update of every param from its gradient at 0-based training step
 * `step` (the schedule's step), with each param's lr and weight-decay
 * scales, after clipping.  Returns the gradient's global L2 norm before
 * clipping.  Leaves the gradients as they were (clipped): zero them
 * before the next backward. */
double shoal_updater_step (ShoalUpdater *updater, gint64 step);
void shoal_updater_free (ShoalUpdater *updater);

G_END_DECLS

#endif
