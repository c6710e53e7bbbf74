/* libFuzzer target: job conf text through loading, job validation and net
 * construction (every layer's set-up), without training.
 *
 * A conf is the one input every user writes by hand; any text must give a
 * conf or an error that names a place, never a crash or a leak.  Every
 * net is built under a memory budget (FUZZ_MEMORY_LIMIT), as shoal run
 * builds them under [job] memory_limit, and must give back all it was
 * charged when freed. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/conf.h"
#include "fuzz_common.h"
#include "net/net.h"
#include "job/job.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

/* What the nets of one input may allocate: well under libFuzzer's 2 GiB
 * malloc and RSS limits, so a legal conf asking for more (a conv layer
 * whose column buffer is 2.2 GB) is refused by the budget, naming the
 * layer, instead of ending the run as an out-of-memory "crash". */
#define FUZZ_MEMORY_LIMIT ((guint64) 256 << 20)

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static ShoalMemoryBudget *budget;
  if (budget == NULL)
    {
      fuzz_common_init ();
      budget = shoal_memory_budget_new (FUZZ_MEMORY_LIMIT, "the fuzz harness's memory limit");
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
      ShoalNetOptions opts = { .seed = 1, .shard_index = 0, .shard_count = 1, .budget = budget };
      ShoalNet *net = shoal_net_new (job->conf, &opts, &error);
      if (net == NULL)
        {
          g_assert (error != NULL);
          fuzz_note_error ("net", error);
          g_clear_error (&error);
        }
      else if (fuzz_verbose)
        g_printerr ("fuzz: net of %u layers, %zu params, %" G_GUINT64_FORMAT " bytes\n",
                    shoal_net_n_layers (net), shoal_net_params (net)->total,
                    shoal_memory_budget_used (budget));
      shoal_net_free (net);
      if (shoal_memory_budget_used (budget) != 0)
        g_error ("a freed net left %" G_GUINT64_FORMAT " bytes charged to its budget",
                 shoal_memory_budget_used (budget));
      shoal_job_free (job);
    }
  g_free (text);
  return 0;
}
