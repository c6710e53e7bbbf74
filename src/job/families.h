/* Job checks for the recurrent and RBM model families, made on the conf
 * before any net or process exists, so that a mismatch fails at once with
 * the conf line:
 *  - `[job] alg = cd` needs layers that contrastive divergence trains
 *    (layer types flagged SHOAL_LAYER_CD: rbm_visible, rbm_hidden), and
 *    back-propagation cannot train them;
 *  - an embedding that reads a text_input must have the vocabulary of the
 *    text (`shoal import text` wrote it to DATA/vocab.ini). */
#ifndef SHOAL_FAMILIES_H
#define SHOAL_FAMILIES_H

#include <glib.h>

#include "core/conf.h"

G_BEGIN_DECLS

/* FALSE with SHOAL_ERROR_CONF naming file, line, group and key. */
gboolean shoal_job_check_families (ShoalConf *conf, int cd_k, GError **error);

G_END_DECLS

#endif
