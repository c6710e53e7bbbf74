/* Trained models: a job's net with the params a run saved, for
 * predictions on new data (what `shoal predict` and `shoal eval` use). */
#ifndef SHOAL_PUBLIC_MODEL_H
#define SHOAL_PUBLIC_MODEL_H

#include <glib.h>

#include <shoal/net.h>

G_BEGIN_DECLS

typedef struct _ShoalModel ShoalModel;

typedef struct {
  const char *const *overrides;  /* "section.key=value" over the conf, as -o; may be NULL */
  const char *output;            /* the layer whose output is the prediction; NULL: the scores
                                  * (first source) of the first loss layer */
  gboolean probabilities;        /* softmax over each output row (scores of a classifier) */
  gboolean partial;              /* load the params by name that both have, ignore the rest
                                  * (SHOAL_PARAMS_BY_NAME_ANY); FALSE: the params must be
                                  * exactly the net's (SHOAL_PARAMS_EXACT) */
} ShoalModelOptions;

/* The net of the job conf at conf_path (the workspace's job.conf is the
 * conf as run), built for testing, with the params of `params_from`: a
 * workspace (its newest checkpointed params) or a file written by
 * shoal_net_save_params.  The params must be exactly the net's - every
 * param of the net there, and none the net has not (a conf of another
 * model is an error naming the params) - unless opts->partial.  opts may
 * be NULL.  The conf's input layer must be able to take caller rows (a
 * feed, or lmdb_input, whose datasets must exist).  Returns a new model
 * (shoal_model_free) or NULL with the conf's and net's errors
 * (SHOAL_ERROR_CONF, SHOAL_ERROR_SHAPE, ...), SHOAL_ERROR_DATA when the
 * params are missing, damaged or another model's, SHOAL_ERROR_SHAPE when
 * a param has another shape, SHOAL_ERROR_IO. */
ShoalModel *shoal_model_load (const char *conf_path, const char *params_from,
                              const ShoalModelOptions *opts, GError **error);
void shoal_model_free (ShoalModel *model);

/* The model's net (borrowed). */
ShoalNet *shoal_model_net (ShoalModel *model);
/* Floats of one input row, and of one output row. */
size_t shoal_model_input_size (ShoalModel *model);
size_t shoal_model_output_size (ShoalModel *model);

/* Runs `rows` rows of raw input (as the input layer takes them, see
 * shoal_net_feed) forward in batches and writes rows * output_size
 * floats to out.  FALSE with SHOAL_ERROR_SHAPE when rows < 1, or on a
 * GPU net the device's error. */
gboolean shoal_model_predict (ShoalModel *model, const float *data, int rows, float *out,
                              GError **error);

G_END_DECLS

#endif
