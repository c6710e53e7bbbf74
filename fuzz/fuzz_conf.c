/* libFuzzer target: job conf text through loading, job validation and net
 * construction (every layer's set-up), without training.
 *
 * A conf is the one input every user writes by hand; any text must give a
 * conf or an error that names a place, never a crash or a leak.  Nets are
 * built only from confs whose layers stay small (see small_enough), so
 * that a valid conf asking for gigabytes is not reported as a crash. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/conf.h"
#include "fuzz_common.h"
#include "net/net.h"
#include "worker/job.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

/* Every number written in a [layer] group is at most 1024 and every list
 * of numbers multiplies to at most 2^14: a net of such layers fits in
 * memory (a dense layer at most 2^24 weights).  (Overflow of large shapes is a separate question, checked by
 * the unit tests of the layers; here it would only exhaust memory.) */
static gboolean
small_enough (ShoalConf *conf)
{
  GKeyFile *kf = shoal_conf_keyfile (conf);
  char **groups = g_key_file_get_groups (kf, NULL);
  gboolean ok = TRUE;

  for (int g = 0; ok && groups[g] != NULL; g++)
    {
      if (!g_str_has_prefix (groups[g], "layer "))
        continue;
      char **keys = g_key_file_get_keys (kf, groups[g], NULL, NULL);
      for (int k = 0; ok && keys != NULL && keys[k] != NULL; k++)
        {
          char *value = g_key_file_get_value (kf, groups[g], keys[k], NULL);
          char **items = g_strsplit (value ? value : "", ",", -1);
          double product = 1;
          for (int i = 0; items[i] != NULL; i++)
            {
              char *end;
              double v = g_ascii_strtod (g_strstrip (items[i]), &end);
              if (end != items[i] && (v > 1024 || v < -1024))
                ok = FALSE;
              if (end != items[i] && v != 0)
                product *= v < 0 ? -v : v;
            }
          if (product > 1 << 14)
            ok = FALSE;
          g_strfreev (items);
          g_free (value);
        }
      g_strfreev (keys);
    }
  g_strfreev (groups);
  return ok;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static gboolean init;
  if (!init)
    {
      fuzz_common_init ();
      init = TRUE;
    }
  /* GKeyFile takes text: the input up to its first NUL */
  char *text = g_strndup ((const char *) data, size);
  GError *error = NULL;

  ShoalConf *conf = shoal_conf_load_data (text, "fuzz.conf", &error);
  if (conf == NULL)
    {
      g_assert (error != NULL);
      fuzz_note_error ("conf", error);
      g_clear_error (&error);
    }
  else
    {
      /* a well-formed override of a layer the conf has succeeds; of one it
       * lacks, it fails naming the -o (it cannot add a layer) */
      gboolean has = g_key_file_has_group (shoal_conf_keyfile (conf), "layer fuzz");
      gboolean ok = shoal_conf_override (conf, "layer fuzz.num_output=7", &error);
      if (ok != has)
        g_error ("a well-formed override of %s layer: %s", has ? "an existing" : "a missing",
                 ok ? "accepted" : error->message);
      if (!ok && !g_str_has_prefix (error->message, "-o layer fuzz.num_output: "))
        g_error ("the refused override does not name the -o: %s", error->message);
      g_clear_error (&error);
      shoal_conf_free (conf);
    }

  ShoalJob *job = shoal_job_load_data (text, "fuzz.conf", NULL, &error);
  if (job == NULL)
    {
      g_assert (error != NULL);
      fuzz_note_error ("job", error);
      g_clear_error (&error);
    }
  else
    {
      if (!small_enough (job->conf) && fuzz_verbose)
        g_printerr ("fuzz: layers too large to build\n");
      if (small_enough (job->conf))
        {
          ShoalNetOptions opts = { .seed = 1, .shard_index = 0, .shard_count = 1 };
          ShoalNet *net = shoal_net_new (job->conf, &opts, &error);
          if (net == NULL)
            {
              g_assert (error != NULL);
              fuzz_note_error ("net", error);
              g_clear_error (&error);
            }
          else if (fuzz_verbose)
            g_printerr ("fuzz: net of %u layers, %zu params\n", shoal_net_n_layers (net),
                        shoal_net_params (net)->total);
          shoal_net_free (net);
        }
      shoal_job_free (job);
    }
  g_free (text);
  return 0;
}
