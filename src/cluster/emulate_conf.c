/* [emulate]: stragglers, slow links, a lost group and the virtual clock,
 * read once from an option table and checked against the layout they
 * emulate (emulate.h says what each key does).  The per-unit slowdown
 * and its seeded delay streams live here too, so the real-time worker
 * loop and the virtual-time scheduler draw exactly the same numbers. */
#include "cluster/emulate_conf.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/layout.h"
#include "core/error.h"

const ShoalOption shoal_emulate_options[] = {
  { "clock", SHOAL_OPT_STRING, "real", SHOAL_UNBOUNDED, "real|virtual",
    "real: the job runs as always, slowed as below; virtual: every unit in one process on a "
    "discrete-event clock, as if each worker had a machine of its own" },
  { "step_ms", SHOAL_OPT_FLOAT, "0", 0, 1e9, NULL,
    "virtual clock: milliseconds one step of a group's batch costs one machine (a group of k "
    "workers takes step_ms / k); 0 = measured once at the start" },
  { "slow_groups", SHOAL_OPT_INT_LIST, "", SHOAL_UNBOUNDED, NULL, "worker groups slowed (0-based)" },
  { "slow_workers", SHOAL_OPT_STRING_LIST, "", SHOAL_UNBOUNDED, NULL,
    "single workers slowed: GROUP.WORKER, or group * nworkers_per_group + worker" },
  { "slow_factor", SHOAL_OPT_FLOAT_LIST, "", SHOAL_UNBOUNDED, NULL,
    "a slowed unit's step takes this many times its compute time (1 to 1e6); one value, or one per "
    "slowed unit (slow_groups', then slow_workers')" },
  { "slow_extra_ms", SHOAL_OPT_FLOAT_LIST, "", SHOAL_UNBOUNDED, NULL,
    "fixed extra milliseconds per step of a slowed unit (at most 3.6e6, an hour); one value or one per "
    "unit" },
  { "slow_delay", SHOAL_OPT_STRING, "none", SHOAL_UNBOUNDED, NULL,
    "random extra milliseconds per step of a slowed unit: exponential(MEAN), uniform(LOW, HIGH), "
    "normal(MEAN, SD) truncated at 0, lognormal(MU, SIGMA), pareto(SCALE, SHAPE) or none; seeded "
    "from the job seed and the worker" },
  { "bandwidth_mbit", SHOAL_OPT_FLOAT, "", SHOAL_UNBOUNDED, NULL,
    "Mbit/s of every link between two processes (a token bucket in shoal's socket transport); "
    "absent: no limit" },
  { "latency_ms", SHOAL_OPT_FLOAT, "0", 0, 1e6, NULL, "one-way milliseconds added to every message between processes" },
  { "nic_mbit", SHOAL_OPT_STRING, "", SHOAL_UNBOUNDED, NULL,
    "virtual clock: Mbit/s of every process's NIC, each way (full duplex), shared max-min fairly by the "
    "messages crossing it (pushes into a server queue at its NIC); absent: bandwidth_mbit's (a process's "
    "links leave through its one NIC), or no limit where bandwidth_mbit is absent too; unlimited: no NIC "
    "limit beside the links (as the real clock's per-socket limit)" },
  { "core_mbit", SHOAL_OPT_FLOAT, "", SHOAL_UNBOUNDED, NULL,
    "virtual clock: Mbit/s of an oversubscribed core every message between processes crosses, shared "
    "by all of them; absent: a full-bisection network" },
  { "update_ns_per_byte", SHOAL_OPT_FLOAT, "", 0, 1e6, NULL,
    "virtual clock: nanoseconds a server's update costs per byte of gradient (one core per server "
    "process, pushes queue for it); absent: the calibration file's, else 0" },
  { "process_cores", SHOAL_OPT_INT, "0", 0, 4096, NULL,
    "virtual clock: cores every process has; its workers compute on them and its other work (server "
    "updates, in-process copies, syncs, decoding messages) takes one from them while all compute; "
    "0 = that other work has a core of its own" },
  { "step_delay", SHOAL_OPT_STRING, "none", SHOAL_UNBOUNDED, NULL,
    "virtual clock: random extra milliseconds of every unit's every step (a distribution as slow_delay's: "
    "pareto for a long tail), seeded per unit" },
  { "machine_factor", SHOAL_OPT_STRING, "none", SHOAL_UNBOUNDED, NULL,
    "virtual clock: each unit's machine computes this factor times slower, drawn once per unit from a "
    "distribution as slow_delay's (its draws taken as factors, e.g. lognormal(0, 0.2)); none: all alike" },
  { "calibration", SHOAL_OPT_STRING, "", SHOAL_UNBOUNDED, NULL,
    "virtual clock: a file `shoal calibrate` wrote for this model: each step's time is drawn from its "
    "measured steps, its update cost per byte is the servers'" },
  { "fault_group", SHOAL_OPT_INT, "-1", -1, 4095, NULL,
    "this worker group's processes die (as kill -9 would) at fault_at; -1 = none" },
  { "fault_at", SHOAL_OPT_FLOAT, "", 0, 1e9, NULL,
    "seconds into the job (virtual seconds with clock = virtual) at which fault_group dies" },
  SHOAL_OPTION_END
};

#define G "emulate"

/* ---- distributions ----------------------------------------------------- */

typedef struct {
  const char *name;
  ShoalDelayKind kind;
  int nparams;
  const char *params;
} DelayName;

static const DelayName delay_names[] = {
  { "exponential", SHOAL_DELAY_EXPONENTIAL, 1, "MEAN_MS" },
  { "uniform", SHOAL_DELAY_UNIFORM, 2, "LOW_MS, HIGH_MS" },
  { "normal", SHOAL_DELAY_NORMAL, 2, "MEAN_MS, SD_MS" },
  { "lognormal", SHOAL_DELAY_LOGNORMAL, 2, "MU, SIGMA" },
  { "pareto", SHOAL_DELAY_PARETO, 2, "SCALE_MS, SHAPE" },
  { NULL, 0, 0, NULL }
};

static const char *
delay_known (void)
{
  return "exponential(MEAN_MS), uniform(LOW_MS, HIGH_MS), normal(MEAN_MS, SD_MS), lognormal(MU, SIGMA), "
         "pareto(SCALE_MS, SHAPE) or none";
}

gboolean
shoal_delay_parse (const char *text, ShoalDelay *delay, GError **error)
{
  memset (delay, 0, sizeof *delay);
  char *s = g_strstrip (g_strdup (text));
  gboolean ok = FALSE;
  if (*s == '\0' || strcmp (s, "none") == 0)
    {
      g_free (s);
      return TRUE;
    }
  char *open = strchr (s, '(');
  size_t len = strlen (s);
  if (open == NULL || s[len - 1] != ')')
    {
      /* a bare name of a distribution: say which numbers it needs */
      for (const DelayName *d = delay_names; d->name != NULL; d++)
        if (strcmp (s, d->name) == 0)
          {
            g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "%s needs its parameters: %s(%s)", s, s, d->params);
            g_free (s);
            return FALSE;
          }
      if (open == NULL && strspn (s, "abcdefghijklmnopqrstuvwxyz_") == len)
        g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "unknown distribution '%s' (known: %s)", s,
                     delay_known ());
      else
        g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "'%s' is not NAME(NUMBERS), e.g. exponential(20)", s);
      g_free (s);
      return FALSE;
    }
  *open = '\0';
  s[len - 1] = '\0';
  char *name = g_strstrip (s);
  const DelayName *found = NULL;
  for (const DelayName *d = delay_names; d->name != NULL; d++)
    if (strcmp (name, d->name) == 0)
      found = d;
  if (found == NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "unknown distribution '%s' (known: %s)", name,
                   delay_known ());
      g_free (s);
      return FALSE;
    }
  char **items = g_strsplit (open + 1, ",", -1);
  int n = (int) g_strv_length (items);
  double p[2] = { 0, 0 };
  if (n == 1 && *g_strstrip (items[0]) == '\0')
    n = 0;
  if (n != found->nparams)
    g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "%s takes %d number%s (%s), got %d", name, found->nparams,
                 found->nparams == 1 ? "" : "s", found->params, n);
  else
    {
      ok = TRUE;
      for (int i = 0; ok && i < n; i++)
        {
          char *item = g_strstrip (items[i]), *end = NULL;
          p[i] = g_ascii_strtod (item, &end);
          if (*item == '\0' || end == NULL || *end != '\0' || !isfinite (p[i]))
            {
              g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "%s: '%s' is not a number", name, item);
              ok = FALSE;
            }
        }
    }
  g_strfreev (items);
  const char *why = NULL;
  if (ok)
    switch (found->kind)
      {
      case SHOAL_DELAY_EXPONENTIAL:
        why = p[0] > 0 ? NULL : "the mean must be above 0";
        break;
      case SHOAL_DELAY_UNIFORM:
        why = p[0] < 0 ? "the low end must be at least 0" : p[1] < p[0] ? "the high end is below the low end" : NULL;
        break;
      case SHOAL_DELAY_NORMAL:
        /* truncated at 0 by drawing again: a mean >= 0 keeps that cheap */
        why = p[0] < 0 ? "the mean must be at least 0" : p[1] < 0 ? "the sd must be at least 0" : NULL;
        break;
      case SHOAL_DELAY_LOGNORMAL:
        why = p[1] < 0 ? "sigma must be at least 0" : p[0] > 20 ? "mu above 20 means delays of days (exp (mu) ms)" : NULL;
        break;
      case SHOAL_DELAY_PARETO:
        why = p[0] <= 0 ? "the scale must be above 0" : p[1] <= 0 ? "the shape must be above 0" : NULL;
        break;
      case SHOAL_DELAY_NONE:
        break;
      }
  if (why != NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "%s(%s): %s", name, open + 1, why);
      ok = FALSE;
    }
  if (ok)
    *delay = (ShoalDelay) { found->kind, p[0], p[1] };
  g_free (s);
  return ok;
}

/* Uniform in (0, 1), never 0 or 1, with 32 bits. */
static double
open_uniform (ShoalRng *rng)
{
  return ((double) shoal_rng_u32 (rng) + 0.5) / 4294967296.0;
}

static double
gaussian (ShoalRng *rng)
{
  double u1 = open_uniform (rng), u2 = open_uniform (rng);
  return sqrt (-2.0 * log (u1)) * cos (2.0 * G_PI * u2);
}

static double
draw_ms (const ShoalDelay *d, ShoalRng *rng)
{
  switch (d->kind)
    {
    case SHOAL_DELAY_EXPONENTIAL:
      return -d->p1 * log (open_uniform (rng));
    case SHOAL_DELAY_UNIFORM:
      return d->p1 + (d->p2 - d->p1) * open_uniform (rng);
    case SHOAL_DELAY_NORMAL:
      /* truncated: a draw below 0 is drawn again; with mean >= 0 each try
       * succeeds with probability >= 1/2, so 64 tries fail 1 in 2^64 */
      for (int i = 0; i < 64; i++)
        {
          double v = d->p1 + d->p2 * gaussian (rng);
          if (v >= 0)
            return v;
        }
      return 0;
    case SHOAL_DELAY_LOGNORMAL:
      return exp (d->p1 + d->p2 * gaussian (rng));
    case SHOAL_DELAY_PARETO:
      return d->p1 / pow (open_uniform (rng), 1.0 / d->p2);
    case SHOAL_DELAY_NONE:
      break;
    }
  return 0;
}

double
shoal_delay_draw_ms (const ShoalDelay *d, ShoalRng *rng)
{
  /* a heavy tail (pareto with a small shape, lognormal with a large
   * sigma) draws numbers past any clock: 1e30 ms once overflowed the
   * virtual clock's nanoseconds and spun it forever */
  double ms = draw_ms (d, rng);
  return isfinite (ms) ? MIN (ms, SHOAL_DELAY_MAX_MS) : SHOAL_DELAY_MAX_MS;
}

double
shoal_delay_mean_ms (const ShoalDelay *d)
{
  switch (d->kind)
    {
    case SHOAL_DELAY_EXPONENTIAL:
      return d->p1;
    case SHOAL_DELAY_UNIFORM:
      return (d->p1 + d->p2) / 2;
    case SHOAL_DELAY_NORMAL:
      {
        /* of the normal truncated at 0 */
        if (d->p2 == 0)
          return d->p1;
        double a = -d->p1 / d->p2;
        double phi = exp (-a * a / 2) / sqrt (2 * G_PI), tail = 0.5 * erfc (a / sqrt (2.0));
        return d->p1 + d->p2 * phi / tail;
      }
    case SHOAL_DELAY_LOGNORMAL:
      return exp (d->p1 + d->p2 * d->p2 / 2);
    case SHOAL_DELAY_PARETO:
      return d->p2 > 1 ? d->p2 * d->p1 / (d->p2 - 1) : G_MAXDOUBLE;
    case SHOAL_DELAY_NONE:
      break;
    }
  return 0;
}

static char *
delay_text (const ShoalDelay *d)
{
  for (const DelayName *n = delay_names; n->name != NULL; n++)
    if (n->kind == d->kind)
      return n->nparams == 1 ? g_strdup_printf ("%s(%g)", n->name, d->p1)
                             : g_strdup_printf ("%s(%g, %g)", n->name, d->p1, d->p2);
  return g_strdup ("none");
}

/* ---- the conf ------------------------------------------------------------ */

/* A slow_workers item: "G.W" or a global index. */
static gboolean
parse_worker (ShoalConf *conf, const ShoalClusterConf *c, const char *item, int *group, int *worker,
              GError **error)
{
  int k = c->nworkers_per_group, total = c->nworker_groups * k;
  gint64 g = -1, w = -1;
  const char *dot = strchr (item, '.');
  gboolean ok;
  if (dot != NULL)
    {
      char *gs = g_strndup (item, (gsize) (dot - item));
      ok = g_ascii_string_to_signed (gs, 10, 0, G_MAXINT, &g, NULL)
           && g_ascii_string_to_signed (dot + 1, 10, 0, G_MAXINT, &w, NULL);
      g_free (gs);
    }
  else
    {
      gint64 n = -1;
      ok = g_ascii_string_to_signed (item, 10, 0, G_MAXINT, &n, NULL);
      if (ok && n >= total)
        {
          shoal_conf_error (conf, error, G, "slow_workers",
                            "worker %s does not exist: the layout has %d workers (%d group%s of %d), 0 .. %d",
                            item, total, c->nworker_groups, c->nworker_groups == 1 ? "" : "s", k, total - 1);
          return FALSE;
        }
      g = n / k;
      w = n % k;
    }
  if (!ok)
    {
      shoal_conf_error (conf, error, G, "slow_workers",
                        "'%s' is neither GROUP.WORKER nor a worker's index (group * nworkers_per_group + worker)",
                        item);
      return FALSE;
    }
  if (g >= c->nworker_groups || w >= k)
    {
      shoal_conf_error (conf, error, G, "slow_workers",
                        "worker %s does not exist: the layout has groups 0 .. %d of workers 0 .. %d", item,
                        c->nworker_groups - 1, k - 1);
      return FALSE;
    }
  *group = (int) g;
  *worker = (int) w;
  return TRUE;
}

/* slow_factor / slow_extra_ms: one value or one per slowed unit, each
 * in [min, max] (past max: `above` says why). */
static gboolean
per_unit_values (ShoalConf *conf, const char *key, int nunits, double fallback, double min, const char *below,
                 double max, const char *above, double *out, gboolean *given, GError **error)
{
  gsize n = 0;
  double *v = shoal_conf_get_float_list (conf, G, shoal_emulate_options, key, &n);
  gboolean ok = TRUE;
  *given = n > 0;
  if (n > 0 && nunits == 0)
    {
      shoal_conf_error (conf, error, G, key, "no unit is slowed: give slow_groups or slow_workers");
      ok = FALSE;
    }
  else if (n > 1 && (int) n != nunits)
    {
      shoal_conf_error (conf, error, G, key,
                        "%zu values for %d slowed unit%s (slow_groups', then slow_workers'): give one for "
                        "all or one each", n, nunits, nunits == 1 ? "" : "s");
      ok = FALSE;
    }
  for (gsize i = 0; ok && i < n; i++)
    if (v[i] < min || v[i] > max)
      {
        char buf[G_ASCII_DTOSTR_BUF_SIZE];
        shoal_conf_error (conf, error, G, key, "%s is %s %g (%s)", g_ascii_formatd (buf, sizeof buf, "%g", v[i]),
                          v[i] < min ? "below" : "above", v[i] < min ? min : max, v[i] < min ? below : above);
        ok = FALSE;
      }
  for (int u = 0; ok && u < nunits; u++)
    out[u] = n == 0 ? fallback : v[n == 1 ? 0 : u];
  g_free (v);
  return ok;
}

static gboolean
read_slow (ShoalConf *conf, const ShoalClusterConf *c, ShoalEmulateConf *e, GError **error)
{
  gsize ngroups = 0, nworkers = 0;
  gint *groups = shoal_conf_get_int_list (conf, G, shoal_emulate_options, "slow_groups", &ngroups);
  char **workers = shoal_conf_get_string_list (conf, G, shoal_emulate_options, "slow_workers", &nworkers);
  int n = (int) (ngroups + nworkers);
  gboolean ok = TRUE;
  e->slow = g_new0 (ShoalSlowEntry, MAX (n, 1));
  for (gsize i = 0; ok && i < ngroups; i++)
    {
      if (groups[i] < 0 || groups[i] >= c->nworker_groups)
        {
          shoal_conf_error (conf, error, G, "slow_groups", "group %d does not exist: the layout has %d worker "
                            "group%s, 0 .. %d", groups[i], c->nworker_groups, c->nworker_groups == 1 ? "" : "s",
                            c->nworker_groups - 1);
          ok = FALSE;
        }
      for (gsize j = 0; ok && j < i; j++)
        if (groups[j] == groups[i])
          {
            shoal_conf_error (conf, error, G, "slow_groups", "group %d is named twice", groups[i]);
            ok = FALSE;
          }
      e->slow[e->nslow++] = (ShoalSlowEntry) { groups[i], -1, 1, 0 };
    }
  for (gsize i = 0; ok && i < nworkers; i++)
    {
      int g = 0, w = 0;
      ok = parse_worker (conf, c, workers[i], &g, &w, error);
      for (int j = (int) ngroups; ok && j < e->nslow; j++)
        if (e->slow[j].group == g && e->slow[j].worker == w)
          {
            shoal_conf_error (conf, error, G, "slow_workers", "worker %d.%d is named twice", g, w);
            ok = FALSE;
          }
      e->slow[e->nslow++] = (ShoalSlowEntry) { g, w, 1, 0 };
    }
  g_free (groups);
  g_strfreev (workers);

  double *factor = g_new0 (double, MAX (n, 1)), *extra = g_new0 (double, MAX (n, 1));
  gboolean has_factor = FALSE, has_extra = FALSE;
  ok = ok
       && per_unit_values (conf, "slow_factor", n, 1, 1,
                           "a factor makes a step take factor x its measured compute time; 1 = no slowdown",
                           SHOAL_SLOW_FACTOR_MAX, "a step a million times slower is as far as an emulation goes",
                           factor, &has_factor, error)
       && per_unit_values (conf, "slow_extra_ms", n, 0, 0, "extra milliseconds per step", SHOAL_DELAY_MAX_MS,
                           "an hour per step, the most an emulated delay adds", extra, &has_extra, error);
  for (int u = 0; ok && u < n; u++)
    {
      e->slow[u].factor = factor[u];
      e->slow[u].extra_ms = extra[u];
    }
  g_free (factor);
  g_free (extra);

  if (ok)
    {
      char *text = shoal_conf_get_string (conf, G, shoal_emulate_options, "slow_delay");
      GError *local = NULL;
      if (!shoal_delay_parse (text, &e->delay, &local))
        {
          shoal_conf_error (conf, error, G, "slow_delay", "%s", local->message);
          g_error_free (local);
          ok = FALSE;
        }
      g_free (text);
    }
  if (ok && e->delay.kind != SHOAL_DELAY_NONE && n == 0)
    {
      shoal_conf_error (conf, error, G, "slow_delay", "no unit is slowed: give slow_groups or slow_workers");
      ok = FALSE;
    }
  if (ok && n > 0 && !has_factor && !has_extra && e->delay.kind == SHOAL_DELAY_NONE)
    {
      shoal_conf_error (conf, error, G, ngroups > 0 ? "slow_groups" : "slow_workers",
                        "slowed by nothing: give slow_factor, slow_extra_ms or slow_delay");
      ok = FALSE;
    }
  return ok;
}

/* Real clock: a lost group must be processes of its own. */
static gboolean
check_fault_layout (ShoalConf *conf, const ShoalClusterConf *c, int group, GError **error)
{
  ShoalLayout *layout = shoal_layout_new (c, conf, error);
  if (layout == NULL)
    return FALSE;
  gboolean ok = TRUE;
  if (layout->nprocs == 1)
    {
      shoal_conf_error (conf, error, G, "fault_group",
                        "the whole job runs in one process: losing group %d would end it all (give the group "
                        "processes of its own, or clock = virtual)", group);
      ok = FALSE;
    }
  for (int r = 0; ok && r < layout->nprocs; r++)
    {
      const ShoalProcess *p = &layout->procs[r];
      gboolean has = FALSE, others = FALSE;
      for (guint i = 0; i < p->workers->len; i++)
        {
          int g = g_array_index (p->workers, ShoalMember, i).group;
          has |= g == group;
          others |= g != group;
        }
      if (has && others)
        {
          shoal_conf_error (conf, error, G, "fault_group",
                            "group %d shares process %d with other groups' workers: losing the process would "
                            "lose them too", group, r);
          ok = FALSE;
        }
    }
  shoal_layout_free (layout);
  return ok;
}

/* Mbit/s a bandwidth key may give. */
static gboolean
is_bandwidth (double mbit)
{
  return mbit > 0 && mbit <= 1e7;
}

/* A bandwidth key, absent (0: no limit) or above 0. */
static gboolean
read_mbit (ShoalConf *conf, const char *key, double *mbit, GError **error)
{
  *mbit = 0;
  if (!g_key_file_has_key (shoal_conf_keyfile (conf), G, key, NULL))
    return TRUE;
  *mbit = shoal_conf_get_float (conf, G, shoal_emulate_options, key);
  if (is_bandwidth (*mbit))
    return TRUE;
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  shoal_conf_error (conf, error, G, key,
                    "%s is not a bandwidth: give Mbit/s above 0 and at most 1e7 (leave the key out for no limit)",
                    g_ascii_formatd (buf, sizeof buf, "%g", *mbit));
  return FALSE;
}

/* nic_mbit: Mbit/s, "unlimited", or absent.  Absent on the virtual clock
 * with links limited, every process's NIC takes a link's speed: each
 * process is a machine whose links all leave through its one NIC, so n
 * workers pushing into one server share that server's NIC (incast); per-pair
 * links alone would let every process send and take in any number of
 * links' worth at once, the linear speedup no real cluster shows.
 * "unlimited" keeps the links alone: what the real clock's limiter does
 * (one token bucket per socket), for predicting such runs. */
static gboolean
read_nic (ShoalConf *conf, ShoalEmulateConf *e, GError **error)
{
  e->nic_mbit = 0;
  e->nic_from_links = FALSE;
  if (!g_key_file_has_key (shoal_conf_keyfile (conf), G, "nic_mbit", NULL))
    {
      e->nic_from_links = e->clock == SHOAL_CLOCK_VIRTUAL && e->bandwidth_mbit > 0;
      if (e->nic_from_links)
        e->nic_mbit = e->bandwidth_mbit;
      return TRUE;
    }
  char *text = g_strstrip (shoal_conf_get_string (conf, G, shoal_emulate_options, "nic_mbit"));
  char *end = NULL;
  double mbit = g_ascii_strtod (text, &end);
  gboolean ok = TRUE;
  if (strcmp (text, "unlimited") == 0)
    e->nic_mbit = 0;
  else if (*text != '\0' && end != NULL && *end == '\0' && is_bandwidth (mbit))
    e->nic_mbit = mbit;
  else
    {
      shoal_conf_error (conf, error, G, "nic_mbit",
                        "%s is not a bandwidth: give Mbit/s above 0 and at most 1e7, or unlimited for no NIC "
                        "limit beside the links (leave the key out for bandwidth_mbit's)",
                        *text != '\0' ? text : "''");
      ok = FALSE;
    }
  g_free (text);
  return ok;
}

static gboolean
read_bandwidth (ShoalConf *conf, double *mbit, GError **error)
{
  return read_mbit (conf, "bandwidth_mbit", mbit, error);
}

/* A distribution key (slow_delay's syntax); errors name it. */
static gboolean
read_distribution (ShoalConf *conf, const char *key, ShoalDelay *d, GError **error)
{
  char *text = shoal_conf_get_string (conf, G, shoal_emulate_options, key);
  GError *local = NULL;
  gboolean ok = shoal_delay_parse (text, d, &local);
  if (!ok)
    {
      shoal_conf_error (conf, error, G, key, "%s", local->message);
      g_error_free (local);
    }
  g_free (text);
  return ok;
}

/* The virtual clock's own keys: the real clock refuses them by name. */
static gboolean
read_virtual_model (ShoalConf *conf, ShoalEmulateConf *e, GError **error)
{
  GKeyFile *kf = shoal_conf_keyfile (conf);
  static const char *const virtual_only[] = { "nic_mbit", "core_mbit", "update_ns_per_byte", "step_delay",
                                              "machine_factor", "calibration", "process_cores", NULL };
  for (int i = 0; virtual_only[i] != NULL; i++)
    if (g_key_file_has_key (kf, G, virtual_only[i], NULL) && e->clock != SHOAL_CLOCK_VIRTUAL)
      {
        shoal_conf_error (conf, error, G, virtual_only[i], "only the virtual clock uses it (clock = virtual)");
        return FALSE;
      }
  if (!read_nic (conf, e, error) || !read_mbit (conf, "core_mbit", &e->core_mbit, error)
      || !read_distribution (conf, "step_delay", &e->step_delay, error)
      || !read_distribution (conf, "machine_factor", &e->machine_factor, error))
    return FALSE;
  e->update_ns_per_byte = g_key_file_has_key (kf, G, "update_ns_per_byte", NULL)
                            ? shoal_conf_get_float (conf, G, shoal_emulate_options, "update_ns_per_byte")
                            : -1;
  e->process_cores = (int) shoal_conf_get_int (conf, G, shoal_emulate_options, "process_cores");
  char *cal = shoal_conf_get_string (conf, G, shoal_emulate_options, "calibration");
  e->calibration = cal != NULL && *g_strstrip (cal) != '\0' ? g_strdup (cal) : NULL;
  g_free (cal);
  return TRUE;
}

gboolean
shoal_emulate_conf_read (ShoalConf *conf, const ShoalClusterConf *c, ShoalEmulateConf *e, GError **error)
{
  memset (e, 0, sizeof *e);
  e->fault_group = -1;
  GKeyFile *kf = shoal_conf_keyfile (conf);
  const ShoalOption *const tables[] = { shoal_emulate_options, NULL };
  if (!shoal_conf_check_group (conf, G, tables, NULL, NULL, error))
    return FALSE;
  char *clock = shoal_conf_get_string (conf, G, shoal_emulate_options, "clock");
  e->clock = strcmp (clock, "virtual") == 0 ? SHOAL_CLOCK_VIRTUAL : SHOAL_CLOCK_REAL;
  g_free (clock);
  e->step_ms = shoal_conf_get_float (conf, G, shoal_emulate_options, "step_ms");
  e->latency_ms = shoal_conf_get_float (conf, G, shoal_emulate_options, "latency_ms");
  if (g_key_file_has_key (kf, G, "step_ms", NULL) && e->clock != SHOAL_CLOCK_VIRTUAL)
    {
      shoal_conf_error (conf, error, G, "step_ms", "only the virtual clock uses it (clock = virtual)");
      return FALSE;
    }
  if (!read_bandwidth (conf, &e->bandwidth_mbit, error))
    return FALSE;
  if (!read_virtual_model (conf, e, error) || !read_slow (conf, c, e, error))
    {
      shoal_emulate_conf_clear (e);
      return FALSE;
    }
  e->fault_group = (int) shoal_conf_get_int (conf, G, shoal_emulate_options, "fault_group");
  gboolean has_at = g_key_file_has_key (kf, G, "fault_at", NULL);
  gboolean ok = TRUE;
  if (e->fault_group >= 0 && !has_at)
    {
      shoal_conf_error (conf, error, G, "fault_group", "give fault_at, the seconds into the job at which group "
                        "%d dies", e->fault_group);
      ok = FALSE;
    }
  else if (has_at && e->fault_group < 0)
    {
      shoal_conf_error (conf, error, G, "fault_at", "give fault_group, the group that dies then");
      ok = FALSE;
    }
  else if (e->fault_group >= c->nworker_groups)
    {
      shoal_conf_error (conf, error, G, "fault_group", "group %d does not exist: the layout has %d worker "
                        "group%s, 0 .. %d", e->fault_group, c->nworker_groups, c->nworker_groups == 1 ? "" : "s",
                        c->nworker_groups - 1);
      ok = FALSE;
    }
  if (ok && e->fault_group >= 0)
    {
      e->fault_at = shoal_conf_get_float (conf, G, shoal_emulate_options, "fault_at");
      if (e->clock == SHOAL_CLOCK_REAL)
        ok = check_fault_layout (conf, c, e->fault_group, error);
    }
  if (!ok)
    shoal_emulate_conf_clear (e);
  return ok;
}

char **
shoal_emulate_file_overrides (const char *path, GError **error)
{
  ShoalConf *conf = shoal_conf_load_file (path, error);
  if (conf == NULL)
    return NULL;
  GKeyFile *kf = shoal_conf_keyfile (conf);
  char **groups = g_key_file_get_groups (kf, NULL);
  gboolean ok = TRUE;
  for (int i = 0; ok && groups[i] != NULL; i++)
    if (strcmp (groups[i], G) != 0)
      {
        shoal_conf_error (conf, error, groups[i], NULL, "an emulation file holds only an [emulate] section");
        ok = FALSE;
      }
  g_strfreev (groups);
  if (ok && !g_key_file_has_group (kf, G))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "%s: no [emulate] section", path);
      ok = FALSE;
    }
  const ShoalOption *const tables[] = { shoal_emulate_options, NULL };
  double mbit = 0;
  ok = ok && shoal_conf_check_group (conf, G, tables, NULL, NULL, error) && read_bandwidth (conf, &mbit, error);
  if (ok && g_key_file_has_key (kf, G, "slow_delay", NULL))
    {
      /* the distribution alone, so its errors name this file's line */
      char *text = shoal_conf_get_string (conf, G, shoal_emulate_options, "slow_delay");
      ShoalDelay d;
      GError *local = NULL;
      if (!shoal_delay_parse (text, &d, &local))
        {
          shoal_conf_error (conf, error, G, "slow_delay", "%s", local->message);
          g_error_free (local);
          ok = FALSE;
        }
      g_free (text);
    }
  GPtrArray *out = g_ptr_array_new_with_free_func (g_free);
  if (ok)
    {
      gsize n = 0;
      char **keys = g_key_file_get_keys (kf, G, &n, NULL);
      for (gsize i = 0; i < n; i++)
        {
          char *value = g_key_file_get_value (kf, G, keys[i], NULL);
          g_ptr_array_add (out, g_strdup_printf ("emulate.%s=%s", keys[i], g_strstrip (value)));
          g_free (value);
        }
      g_strfreev (keys);
    }
  shoal_conf_free (conf);
  if (!ok)
    {
      g_ptr_array_free (out, TRUE);
      return NULL;
    }
  g_ptr_array_add (out, NULL);
  return (char **) g_ptr_array_free (out, FALSE);
}

void
shoal_emulate_conf_clear (ShoalEmulateConf *e)
{
  g_clear_pointer (&e->slow, g_free);
  g_clear_pointer (&e->calibration, g_free);
  e->nslow = 0;
}

void
shoal_emulate_conf_copy (ShoalEmulateConf *dst, const ShoalEmulateConf *src)
{
  *dst = *src;
  dst->slow = g_memdup2 (src->slow, sizeof (ShoalSlowEntry) * (gsize) MAX (src->nslow, 1));
  dst->calibration = g_strdup (src->calibration);
}

gboolean
shoal_emulate_active (const ShoalEmulateConf *e)
{
  return e->clock == SHOAL_CLOCK_VIRTUAL || e->nslow > 0 || e->bandwidth_mbit > 0 || e->latency_ms > 0
         || e->fault_group >= 0;
}

/* ---- per unit ---------------------------------------------------------- */

typedef struct {
  double factor, extra_ms;
  gboolean delayed;
  ShoalRng rng;        /* this worker's delay stream */
} SlowWorker;

struct _ShoalSlowdown {
  ShoalDelay delay;
  int n;
  SlowWorker *workers;
};

/* The delay streams: the job seed mixed with "emulate", one stream per
 * worker, so no layer's or data stream draws the same numbers. */
#define DELAY_SEED_MIX G_GUINT64_CONSTANT (0x656d756c61746521)

ShoalSlowdown *
shoal_slowdown_new (const ShoalEmulateConf *e, const ShoalClusterConf *c, guint64 seed, int group,
                    int first_worker, int nworkers)
{
  ShoalSlowdown *s = NULL;
  for (int w = first_worker; w < first_worker + nworkers; w++)
    {
      SlowWorker sw = { 1, 0, FALSE, { 0, 0 } };
      gboolean slowed = FALSE;
      for (int i = 0; i < e->nslow; i++)
        {
          const ShoalSlowEntry *en = &e->slow[i];
          if (en->group != group || (en->worker >= 0 && en->worker != w))
            continue;
          /* named as a group and as a worker: the slower of each */
          sw.factor = MAX (sw.factor, en->factor);
          sw.extra_ms = MAX (sw.extra_ms, en->extra_ms);
          slowed = TRUE;
        }
      if (!slowed)
        continue;
      sw.delayed = e->delay.kind != SHOAL_DELAY_NONE;
      shoal_rng_seed (&sw.rng, seed ^ DELAY_SEED_MIX, (guint64) group * (guint64) c->nworkers_per_group + (guint64) w);
      if (s == NULL)
        {
          s = g_new0 (ShoalSlowdown, 1);
          s->delay = e->delay;
          s->workers = g_new0 (SlowWorker, nworkers);
        }
      s->workers[s->n++] = sw;
    }
  return s;
}

void
shoal_slowdown_free (ShoalSlowdown *s)
{
  if (s == NULL)
    return;
  g_free (s->workers);
  g_free (s);
}

double
shoal_slowdown_extra_s (ShoalSlowdown *s, double compute_s)
{
  if (s == NULL)
    return 0;
  double most = 0;
  for (int i = 0; i < s->n; i++)
    {
      SlowWorker *w = &s->workers[i];
      double extra = (w->factor - 1) * compute_s + w->extra_ms / 1000;
      if (w->delayed)
        extra += shoal_delay_draw_ms (&s->delay, &w->rng) / 1000;
      most = MAX (most, extra);
    }
  /* a bound every clock can hold (factor x a long step could pass it) */
  return MIN (most, SHOAL_DELAY_MAX_MS / 1000);
}

char *
shoal_slowdown_describe (const ShoalSlowdown *s)
{
  if (s == NULL)
    return g_strdup ("not slowed");
  double factor = 1, extra = 0;
  gboolean delayed = FALSE;
  for (int i = 0; i < s->n; i++)
    {
      factor = MAX (factor, s->workers[i].factor);
      extra = MAX (extra, s->workers[i].extra_ms);
      delayed |= s->workers[i].delayed;
    }
  GString *out = g_string_new (NULL);
  if (factor > 1)
    g_string_append_printf (out, "%gx its compute time", factor);
  if (extra > 0)
    g_string_append_printf (out, "%s%g ms", out->len > 0 ? " + " : "", extra);
  if (delayed)
    {
      char *d = delay_text (&s->delay);
      g_string_append_printf (out, "%s%s ms", out->len > 0 ? " + " : "", d);
      g_free (d);
    }
  g_string_append_printf (out, " per step (%d slowed worker%s)", s->n, s->n == 1 ? "" : "s");
  return g_string_free (out, FALSE);
}
