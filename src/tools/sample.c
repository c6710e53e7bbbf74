/* shoal sample JOB.conf --from WORKSPACE: text from a trained character
 * model.  The job's net is rebuilt for one row and one step - its
 * text_input becomes a feed layer of shape (1, 1), its loss and metric
 * layers are left out, its recurrent layers keep their state from step
 * to step - and takes the workspace's checkpointed params by name.  The
 * prime is fed byte by byte; then each step draws the next byte from
 * softmax(logits / temperature) with a PCG32 stream seeded by --seed and
 * feeds it back.  The prime and what follows go to stdout. */
#include <glib.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/rng.h"
#include "data/text.h"
#include "layers/recurrent.h"
#include "net/net.h"
#include "tools/commands.h"
#include "job/job.h"
#include "job/named_params.h"

typedef struct {
  char *input;     /* the text_input layer's name */
  char *data;      /* its data directory */
  char *logits;    /* the layer whose out the loss reads */
} Roles;

static void
roles_clear (Roles *r)
{
  g_free (r->input);
  g_free (r->data);
  g_free (r->logits);
}

/* Finds the text input, the logits, and rewrites the conf for sampling. */
static gboolean
make_sampling_conf (ShoalConf *conf, Roles *r, GError **error)
{
  GKeyFile *kf = shoal_conf_keyfile (conf);
  char **groups = g_key_file_get_groups (kf, NULL);
  const ShoalLayerOps *text_input = shoal_layer_lookup ("text_input");
  const ShoalLayerOps *softmax_loss = shoal_layer_lookup ("softmax_loss");
  gboolean ok = TRUE;

  for (int i = 0; groups[i] != NULL; i++)
    {
      const char *g = groups[i];
      if (!g_str_has_prefix (g, "layer "))
        continue;
      char *type = g_key_file_get_value (kf, g, "type", NULL);
      const ShoalLayerOps *ops = type ? shoal_layer_lookup (g_strstrip (type)) : NULL;
      if (ops == text_input && r->input == NULL)
        {
          r->input = g_strdup (g + strlen ("layer "));
          r->data = g_key_file_get_value (kf, g, "data", NULL);
          if (r->data != NULL)
            g_strstrip (r->data);
          g_key_file_remove_group (kf, g, NULL);
          g_key_file_set_value (kf, g, "type", "feed");
          g_key_file_set_value (kf, g, "shape", "1, 1");
        }
      else if (ops != NULL && (ops->flags & (SHOAL_LAYER_LOSS | SHOAL_LAYER_METRIC)))
        {
          if (ops == softmax_loss && r->logits == NULL)
            {
              char *value = g_key_file_get_value (kf, g, "src", NULL);
              char **srcs = g_strsplit (value ? value : "", ",", -1);
              if (srcs[0] != NULL && *g_strstrip (srcs[0]) != '\0')
                r->logits = g_strdup (srcs[0]);
              g_strfreev (srcs);
              g_free (value);
            }
          g_key_file_remove_group (kf, g, NULL);
        }
      else if (ops != NULL && ops->options == shoal_recurrent_options)
        g_key_file_set_value (kf, g, "stateful", "true");  /* one step per forward */
      g_free (type);
    }
  g_strfreev (groups);
  if (r->input == NULL || r->data == NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                   "%s: no text_input layer: shoal sample generates text from character models",
                   shoal_conf_origin (conf));
      ok = FALSE;
    }
  else if (r->logits == NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                   "%s: no softmax_loss layer says which layer's out are the logits",
                   shoal_conf_origin (conf));
      ok = FALSE;
    }
  return ok;
}

/* Draws an id from softmax(logits / temperature). */
static int
draw (const float *logits, int k, double temperature, ShoalRng *rng, double *p)
{
  double m = -INFINITY, sum = 0;
  for (int i = 0; i < k; i++)
    m = fmax (m, logits[i] / temperature);
  for (int i = 0; i < k; i++)
    sum += (p[i] = exp (logits[i] / temperature - m));
  double u = shoal_rng_uniform (rng) * sum, acc = 0;
  for (int i = 0; i < k; i++)
    if ((acc += p[i]) > u)
      return i;
  return k - 1;
}

int
shoal_cmd_sample (int argc, char **argv)
{
  /* `shoal sample ... | head` ends with its reader, as text tools do (main
   * ignores SIGPIPE for the RPC sockets; sampling has none) */
  signal (SIGPIPE, SIG_DFL);
  char **overrides = NULL, *from = NULL, *prime = NULL;
  int length = 200;
  double temperature = 1.0;
  gint64 seed = 1;
  GOptionEntry entries[] = {
    { "from", 'f', 0, G_OPTION_ARG_FILENAME, &from, "workspace of the trained job (its checkpoint's params), or a params file",
      "WORKSPACE" },
    { "prime", 'p', 0, G_OPTION_ARG_STRING, &prime, "text to start from (default: a newline)", "TEXT" },
    { "length", 'n', 0, G_OPTION_ARG_INT, &length, "bytes to generate (default 200)", "N" },
    { "temperature", 't', 0, G_OPTION_ARG_DOUBLE, &temperature,
      "divides the logits: below 1 is more conservative, above more varied (default 1)", "T" },
    { "seed", 's', 0, G_OPTION_ARG_INT64, &seed, "seed of the draws (default 1)", "S" },
    { "override", 'o', 0, G_OPTION_ARG_STRING_ARRAY, &overrides, "set a conf key, as for shoal run",
      "SECTION.KEY=VALUE" },
    { NULL, 0, 0, 0, NULL, NULL, NULL }
  };
  GOptionContext *ctx = g_option_context_new ("JOB.conf - generate text with a trained character model");
  g_option_context_add_main_entries (ctx, entries, NULL);
  GError *error = NULL;
  int status = 1;
  ShoalJob *job = NULL;
  ShoalNet *net = NULL;
  Roles roles = { 0 };
  double *prob = NULL;

  if (!g_option_context_parse (ctx, &argc, &argv, &error))
    {
      fprintf (stderr, "shoal sample: %s\n", error->message);
      status = 2;
      goto out;
    }
  if (argc != 2 || from == NULL)
    {
      fprintf (stderr, "shoal sample: expected one JOB.conf and --from WORKSPACE\n");
      status = 2;
      goto out;
    }
  if (length < 0 || !(temperature > 0) || seed < 0)
    {
      fprintf (stderr, "shoal sample: --length must be >= 0, --temperature > 0 and --seed >= 0\n");
      status = 2;
      goto out;
    }
  if (prime == NULL)
    prime = g_strdup ("\n");
  if (*prime == '\0')
    {
      fprintf (stderr, "shoal sample: --prime must hold at least one byte\n");
      status = 2;
      goto out;
    }

  job = shoal_job_load (argv[1], (const char *const *) overrides, &error);
  if (job == NULL || !make_sampling_conf (job->conf, &roles, &error))
    goto fail;
  ShoalTextVocab vocab;
  if (!shoal_text_vocab_load (roles.data, &vocab, &error))
    goto fail;
  ShoalNetOptions nopts = { .seed = job->seed, .shard_count = 1, .budget = job->memory_budget };
  net = shoal_net_new (job->conf, &nopts, &error);
  if (net == NULL)
    goto fail;
  ShoalParamStore *store = shoal_net_params (net);
  const char *const workspaces[] = { from, NULL };
  int copied = 0;
  if (!shoal_named_params_init (store, NULL, workspaces, &copied, &error))
    goto fail;
  if (copied != (int) store->params->len)
    {
      g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                   "%s holds %d of the %u params of this net: trained with another conf?", from, copied,
                   store->params->len);
      goto fail;
    }
  ShoalLayer *input = shoal_net_find (net, roles.input), *logits = shoal_net_find (net, roles.logits);
  if (logits == NULL)
    {
      g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_CONF, "%s: the loss reads '%s', which is no layer",
                   argv[1], roles.logits);
      goto fail;
    }
  int k = (int) shoal_tensor_row_size (&logits->out);
  if (k != vocab.size)
    {
      g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                   "%s: layer '%s' gives %d logits per step, the vocabulary of %s has %d bytes",
                   argv[1], roles.logits, k, roles.data, vocab.size);
      goto fail;
    }
  for (const guint8 *c = (const guint8 *) prime; *c; c++)
    if (vocab.ids[*c] < 0)
      {
        g_set_error (&error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                     "--prime: byte 0x%02x ('%c') is not in the vocabulary of %s", *c,
                     g_ascii_isprint (*c) ? *c : '?', roles.data);
        goto fail;
      }

  ShoalRng rng;
  shoal_rng_seed (&rng, (guint64) seed, 0x5a3b1e);
  prob = g_new (double, k);
  fputs (prime, stdout);
  for (const guint8 *c = (const guint8 *) prime; *c; c++)
    {
      input->out.data[0] = vocab.ids[*c];
      shoal_net_forward (net, SHOAL_PHASE_TEST);
    }
  for (int i = 0; i < length; i++)
    {
      int id = draw (logits->out.data, k, temperature, &rng, prob);
      fputc (vocab.bytes[id], stdout);
      input->out.data[0] = (float) id;
      shoal_net_forward (net, SHOAL_PHASE_TEST);
    }
  fputc ('\n', stdout);
  status = 0;
  goto out;

fail:
  fprintf (stderr, "shoal sample: %s\n", error->message);
out:
  g_clear_error (&error);
  g_free (prob);
  roles_clear (&roles);
  shoal_net_free (net);
  shoal_job_free (job);
  g_option_context_free (ctx);
  g_strfreev (overrides);
  g_free (from);
  g_free (prime);
  return status;
}
