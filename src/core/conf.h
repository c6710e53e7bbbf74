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

#include <shoal/conf.h>

G_BEGIN_DECLS

/* The key file itself.  Borrowed; valid while conf lives. */
GKeyFile *shoal_conf_keyfile (ShoalConf *conf);
/* 1-based line of the key (or of the group when key is NULL); 0 if unknown. */
int shoal_conf_line (ShoalConf *conf, const char *group, const char *key);
/* Whether -o set the key. */
gboolean shoal_conf_is_override (ShoalConf *conf, const char *group, const char *key);

/* Sets *error (SHOAL_ERROR_CONF) to "ORIGIN:LINE: [GROUP] KEY: message". */
void shoal_conf_error (ShoalConf *conf, GError **error, const char *group, const char *key,
                       const char *format, ...) G_GNUC_PRINTF (5, 6);

/* Checks that every section of the conf is one shoal's confs have: [job],
 * [updater], [cluster], [emulate], [tls] or [layer NAME]; else FALSE with
 * SHOAL_ERROR_CONF naming the section's line.  A net's conf is checked
 * as a job's: a misspelt [layr fc2] is an error, not a layer left out. */
gboolean shoal_conf_check_sections (ShoalConf *conf, GError **error);

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

/* Checks a table a layer type brings (its keys, their types, and that
 * every default is a value of the key's type within its bounds and
 * choices); FALSE with SHOAL_ERROR_INTERNAL naming `owner` otherwise. */
gboolean shoal_option_table_check (const ShoalOption *table, const char *owner, GError **error);

/* Finds the option for key in table, or NULL. */
const ShoalOption *shoal_option_find (const ShoalOption *table, const char *key);

G_END_DECLS

#endif
