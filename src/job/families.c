/* The conf checks of families.h.  They read the [layer] groups as text
 * (types, sources, a few keys): the layer options themselves are checked
 * when the net is built. */
#include "job/families.h"

#include <string.h>

#include "core/error.h"
#include "data/text.h"
#include "layers/layer.h"

#define LAYER_PREFIX "layer "

static char *
value_of (GKeyFile *kf, const char *group, const char *key)
{
  char *v = g_key_file_get_value (kf, group, key, NULL);
  return v != NULL ? g_strstrip (v) : NULL;
}

static const ShoalLayerOps *
type_of (GKeyFile *kf, const char *group)
{
  char *type = value_of (kf, group, "type");
  const ShoalLayerOps *ops = type != NULL ? shoal_layer_lookup (type) : NULL;
  g_free (type);
  return ops;
}

static gboolean
check_algorithm (ShoalConf *conf, char **groups, int cd_k, GError **error)
{
  GKeyFile *kf = shoal_conf_keyfile (conf);
  const char *cd_group = NULL;
  for (int i = 0; groups[i] != NULL && cd_group == NULL; i++)
    {
      const ShoalLayerOps *ops = g_str_has_prefix (groups[i], LAYER_PREFIX) ? type_of (kf, groups[i]) : NULL;
      if (ops != NULL && (ops->flags & SHOAL_LAYER_CD))
        cd_group = groups[i];
    }
  if (cd_k > 0 && cd_group == NULL)
    {
      shoal_conf_error (conf, error, "job", "alg",
                        "alg = cd trains RBM layers (rbm_visible, rbm_hidden) by contrastive divergence, "
                        "and this net has none");
      return FALSE;
    }
  if (cd_k == 0 && cd_group != NULL)
    {
      char *type = value_of (kf, cd_group, "type");
      shoal_conf_error (conf, error, cd_group, "type",
                        "%s layers are trained by contrastive divergence: set [job] alg = cd", type);
      g_free (type);
      return FALSE;
    }
  return TRUE;
}

/* An embedding whose first source is a text_input: their vocabularies. */
static gboolean
check_vocabularies (ShoalConf *conf, char **groups, GError **error)
{
  GKeyFile *kf = shoal_conf_keyfile (conf);
  const ShoalLayerOps *embedding = shoal_layer_lookup ("embedding");
  const ShoalLayerOps *text_input = shoal_layer_lookup ("text_input");
  gboolean ok = TRUE;
  for (int i = 0; ok && groups[i] != NULL; i++)
    {
      if (!g_str_has_prefix (groups[i], LAYER_PREFIX) || embedding == NULL || type_of (kf, groups[i]) != embedding)
        continue;
      char *src = value_of (kf, groups[i], "src"), *vocab_text = value_of (kf, groups[i], "vocab_size");
      char **srcs = g_strsplit (src != NULL ? src : "", ",", 2);
      char *src_group = srcs[0] != NULL ? g_strconcat (LAYER_PREFIX, g_strstrip (srcs[0]), NULL) : NULL;
      char *data = NULL;
      ShoalTextVocab vocab;
      if (src_group != NULL && g_key_file_has_group (kf, src_group) && type_of (kf, src_group) == text_input
          && (data = value_of (kf, src_group, "data")) != NULL && vocab_text != NULL
          && shoal_text_vocab_load (data, &vocab, NULL))
        {
          gint64 v = g_ascii_strtoll (vocab_text, NULL, 10);
          if (v != vocab.size)
            {
              shoal_conf_error (conf, error, groups[i], "vocab_size",
                                "is %s but the text of '%s' (%s) has %d ids (`shoal import text` printed it)",
                                vocab_text, srcs[0], data, vocab.size);
              ok = FALSE;
            }
        }
      g_free (data);
      g_free (src_group);
      g_strfreev (srcs);
      g_free (src);
      g_free (vocab_text);
    }
  return ok;
}

gboolean
shoal_job_check_families (ShoalConf *conf, int cd_k, GError **error)
{
  char **groups = g_key_file_get_groups (shoal_conf_keyfile (conf), NULL);
  gboolean ok = check_algorithm (conf, groups, cd_k, error) && check_vocabularies (conf, groups, error);
  g_strfreev (groups);
  return ok;
}
