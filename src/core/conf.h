/* Job configuration: a GKeyFile with [job], [updater], [cluster] and one
 * [layer NAME] group per layer, plus `-o section.key=value` overrides.
 *
 * Keys are described once, in tables of ShoalOption (name, type, default,
 * bounds, help).  shoal_conf_check_group rejects unknown keys, values that
 * do not parse and values out of bounds; after it passed, the getters
 * cannot fail and return the default for absent keys.  Every error names
 * the file, the line, the group and the key:
 *   "conf/x.conf:12: [layer fc1] num_output: expected an integer, got 'ten'" */
#ifndef SHOAL_CONF_H
#define SHOAL_CONF_H

#include <glib.h>

G_BEGIN_DECLS

typedef enum {
  SHOAL_OPT_INT,
  SHOAL_OPT_FLOAT,
  SHOAL_OPT_BOOL,
  SHOAL_OPT_STRING,      /* with choices "a|b|c" it must be one of them */
  SHOAL_OPT_INT_LIST,    /* "1, 2, 3" */
  SHOAL_OPT_FLOAT_LIST,
  SHOAL_OPT_STRING_LIST
} ShoalOptType;

typedef struct {
  const char *key;
  ShoalOptType type;
  const char *default_value;  /* as it would be written in the file; NULL = required */
  double min, max;            /* inclusive bounds for numbers and list items; min > max: none */
  const char *choices;        /* SHOAL_OPT_STRING only: "a|b|c", or NULL for any */
  const char *help;
} ShoalOption;

/* Terminates option tables. */
#define SHOAL_OPTION_END { NULL, 0, NULL, 0, 0, NULL, NULL }
/* No bounds. */
#define SHOAL_UNBOUNDED 1, 0

typedef struct _ShoalConf ShoalConf;

/* Returns a new conf (free with shoal_conf_free) or NULL with error set. */
ShoalConf *shoal_conf_load_file (const char *path, GError **error);
/* `origin` names the text in messages (a file name, "test"). */
ShoalConf *shoal_conf_load_data (const char *text, const char *origin, GError **error);
void shoal_conf_free (ShoalConf *conf);

/* "section.key=value"; a layer section is written "layer NAME.key=value".
 * Sets the key (creating it if absent); later validation names "-o". */
gboolean shoal_conf_override (ShoalConf *conf, const char *assignment, GError **error);

/* Borrowed; valid while conf lives. */
GKeyFile *shoal_conf_keyfile (ShoalConf *conf);
const char *shoal_conf_origin (ShoalConf *conf);
/* 1-based line of the key (or of the group when key is NULL); 0 if unknown. */
int shoal_conf_line (ShoalConf *conf, const char *group, const char *key);
/* Whether -o set the key. */
gboolean shoal_conf_is_override (ShoalConf *conf, const char *group, const char *key);

/* Sets *error (SHOAL_ERROR_CONF) to "ORIGIN:LINE: [GROUP] KEY: message". */
void shoal_conf_error (ShoalConf *conf, GError **error, const char *group, const char *key,
                       const char *format, ...) G_GNUC_PRINTF (5, 6);

/* Checks every key of `group` against the NULL-terminated list of option
 * tables; keys accepted by `accept_extra` (may be NULL) are skipped.
 * Missing required keys are errors too. */
typedef gboolean (*ShoalConfKeyFilter) (const char *key, gpointer user_data);
gboolean shoal_conf_check_group (ShoalConf *conf, const char *group,
                                 const ShoalOption *const *tables,
                                 ShoalConfKeyFilter accept_extra, gpointer user_data,
                                 GError **error);

/* Getters: the key's value, or the table default when absent.  The key
 * must be in `table` (programming error otherwise).  Values were checked
 * by shoal_conf_check_group. */
gint64 shoal_conf_get_int (ShoalConf *conf, const char *group, const ShoalOption *table, const char *key);
double shoal_conf_get_float (ShoalConf *conf, const char *group, const ShoalOption *table, const char *key);
gboolean shoal_conf_get_bool (ShoalConf *conf, const char *group, const ShoalOption *table, const char *key);
/* Returns a newly allocated string (g_free), or NULL for an absent key without default. */
char *shoal_conf_get_string (ShoalConf *conf, const char *group, const ShoalOption *table, const char *key);
/* Newly allocated arrays (g_free / g_strfreev); *n gets the length. */
gint *shoal_conf_get_int_list (ShoalConf *conf, const char *group, const ShoalOption *table, const char *key, gsize *n);
double *shoal_conf_get_float_list (ShoalConf *conf, const char *group, const ShoalOption *table, const char *key, gsize *n);
char **shoal_conf_get_string_list (ShoalConf *conf, const char *group, const ShoalOption *table, const char *key, gsize *n);

/* Finds the option for key in table, or NULL. */
const ShoalOption *shoal_option_find (const ShoalOption *table, const char *key);

G_END_DECLS

#endif
