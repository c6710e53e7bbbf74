/* Confs: a job's or a net's description in GLib key-file syntax, one
 * [layer NAME] group per layer (and [job], [updater], [cluster] for a
 * job), read once and checked against option tables that also give
 * defaults and `shoal layers` help.
 *
 * A layer type declares its keys in a ShoalOption table; the net checks
 * every [layer NAME] group against it, so a layer's setup reads options
 * that are known to parse (shoal_layer_opt_*). */
#ifndef SHOAL_PUBLIC_CONF_H
#define SHOAL_PUBLIC_CONF_H

#include <glib.h>

G_BEGIN_DECLS

typedef enum {
  SHOAL_OPT_INT,
  SHOAL_OPT_FLOAT,
  SHOAL_OPT_BOOL,
  SHOAL_OPT_STRING,      /* with choices "a|b|c" it must be one of them */
  SHOAL_OPT_INT_LIST,    /* "1, 2, 3" */
  SHOAL_OPT_FLOAT_LIST,
  SHOAL_OPT_STRING_LIST,
  SHOAL_OPT_PATH         /* a file or folder, relative to the working directory; a job's conf as
                          * run (the workspace's job.conf) holds it made absolute, so the
                          * workspace evaluates and predicts from any folder */
} ShoalOptType;

/* One key of a table.  Tables are static arrays ending in SHOAL_OPTION_END. */
typedef struct {
  const char *key;
  ShoalOptType type;
  const char *default_value;  /* as it would be written in the file; NULL = required */
  double min, max;            /* inclusive bounds for numbers and list items; min > max: none */
  const char *choices;        /* SHOAL_OPT_STRING only: "a|b|c", or NULL for any */
  const char *help;           /* one line for `shoal layers` */
} ShoalOption;

#define SHOAL_OPTION_END { NULL, 0, NULL, 0, 0, NULL, NULL }
/* min, max of an option without bounds */
#define SHOAL_UNBOUNDED 1, 0

typedef struct _ShoalConf ShoalConf;

/* Reads the key file at `path`.  Returns a new conf (free with
 * shoal_conf_free), or NULL with SHOAL_ERROR_IO (cannot read) or
 * SHOAL_ERROR_CONF (not a key file; the message names the line). */
ShoalConf *shoal_conf_load_file (const char *path, GError **error);
/* The same from text; `origin` names the text in messages ("app.conf",
 * "built-in"), is copied, and may be NULL (messages then say "conf
 * text"). */
ShoalConf *shoal_conf_load_data (const char *text, const char *origin, GError **error);
/* NULL is ignored.  A conf must outlive every net built from it. */
void shoal_conf_free (ShoalConf *conf);

/* Applies "section.key=value" (a layer: "layer NAME.key=value") over the
 * conf, as `shoal run -o` does; later errors about the key name the -o.
 * FALSE with SHOAL_ERROR_CONF when the assignment is not of that form. */
gboolean shoal_conf_override (ShoalConf *conf, const char *assignment, GError **error);

/* What messages call the conf: the path, or load_data's origin.
 * Borrowed, valid while the conf lives. */
const char *shoal_conf_origin (ShoalConf *conf);

G_END_DECLS

#endif
