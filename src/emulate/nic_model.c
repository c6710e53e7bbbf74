/* Fluid flows through NICs, a per-pair link and a core, shared max-min
 * fairly (nic_model.h).  A recomputation runs at every flow's start and
 * end: the flows' bytes are advanced at their old rates to now, then
 * progressive filling gives every flow its new rate - raise all rates
 * together; the resource that fills first freezes the flows through it
 * at its fair share; repeat with what the others have left. */
#include "emulate/nic_model.h"

#include <math.h>

/* a flow with fewer bytes left than this has crossed (rounding of the
 * rates over many recomputations leaves crumbs) */
#define DONE_BYTES 1e-3

typedef struct {
  int src, dst;
  double left;        /* bytes still to cross */
  double rate;        /* bytes/s since `at` */
  guint64 seq;        /* begin order: ties end in it */
  ShoalTimedEvent what;
} Flow;

struct _ShoalNicModel {
  int n;
  double *out, *in;   /* per node, bytes/s; 0: unlimited */
  double link, core;
  GArray *flows;      /* Flow, in begin order */
  gint64 at;          /* the time the flows' `left` is of */
  guint64 next_seq;
  /* scratch of the filling, kept between calls */
  GArray *cap, *users;   /* per resource: capacity left, unfrozen flows through it */
  GArray *res;           /* per flow: its resources, 4 each (-1: none) */
  GHashTable *pairs;     /* (src, dst) -> link resource, per filling */
};

ShoalNicModel *
shoal_nic_model_new (int nnodes, double nic_bytes_per_s, double link_bytes_per_s, double core_bytes_per_s)
{
  ShoalNicModel *m = g_new0 (ShoalNicModel, 1);
  m->n = nnodes;
  m->out = g_new (double, nnodes);
  m->in = g_new (double, nnodes);
  for (int i = 0; i < nnodes; i++)
    m->out[i] = m->in[i] = MAX (nic_bytes_per_s, 0);
  m->link = MAX (link_bytes_per_s, 0);
  m->core = MAX (core_bytes_per_s, 0);
  m->flows = g_array_new (FALSE, FALSE, sizeof (Flow));
  m->cap = g_array_new (FALSE, FALSE, sizeof (double));
  m->users = g_array_new (FALSE, FALSE, sizeof (int));
  m->res = g_array_new (FALSE, FALSE, sizeof (int));
  m->pairs = g_hash_table_new (g_int64_hash, g_int64_equal);
  return m;
}

void
shoal_nic_model_free (ShoalNicModel *m)
{
  if (m == NULL)
    return;
  g_free (m->out);
  g_free (m->in);
  g_array_free (m->flows, TRUE);
  g_array_free (m->cap, TRUE);
  g_array_free (m->users, TRUE);
  g_array_free (m->res, TRUE);
  g_hash_table_destroy (m->pairs);
  g_free (m);
}

void
shoal_nic_model_set_nic (ShoalNicModel *m, int node, double out_bytes_per_s, double in_bytes_per_s)
{
  g_return_if_fail (node >= 0 && node < m->n);
  m->out[node] = MAX (out_bytes_per_s, 0);
  m->in[node] = MAX (in_bytes_per_s, 0);
}

gboolean
shoal_nic_model_limited (const ShoalNicModel *m)
{
  if (m->link > 0 || m->core > 0)
    return TRUE;
  for (int i = 0; i < m->n; i++)
    if (m->out[i] > 0 || m->in[i] > 0)
      return TRUE;
  return FALSE;
}

guint
shoal_nic_model_in_flight (const ShoalNicModel *m)
{
  return m->flows->len;
}

/* The flows' bytes at time t, at the rates they had since m->at. */
static void
advance (ShoalNicModel *m, gint64 t)
{
  double dt = (double) (t - m->at) / 1e9;
  if (dt > 0)
    for (guint i = 0; i < m->flows->len; i++)
      {
        Flow *f = &g_array_index (m->flows, Flow, i);
        f->left = MAX (f->left - f->rate * dt, 0);
      }
  m->at = MAX (m->at, t);
}

static int
add_resource (ShoalNicModel *m, double capacity)
{
  int zero = 0;
  g_array_append_val (m->cap, capacity);
  g_array_append_val (m->users, zero);
  return (int) m->cap->len - 1;
}

/* Progressive filling over the flows in flight. */
static void
fill (ShoalNicModel *m)
{
  guint nf = m->flows->len;
  if (nf == 0)
    return;
  g_array_set_size (m->cap, 0);
  g_array_set_size (m->users, 0);
  g_hash_table_remove_all (m->pairs);
  /* resources 0 .. n-1: out sides, n .. 2n-1: in sides, 2n: the core,
   * then one link per (src, dst) pair in flight */
  for (int i = 0; i < m->n; i++)
    add_resource (m, m->out[i]);
  for (int i = 0; i < m->n; i++)
    add_resource (m, m->in[i]);
  add_resource (m, m->core);
  gint64 *keys = g_new (gint64, nf);
  g_array_set_size (m->res, nf * 4);
  int *res = (int *) (gpointer) m->res->data;
  for (guint i = 0; i < nf; i++)
    {
      Flow *f = &g_array_index (m->flows, Flow, i);
      int *r = &res[i * 4];
      r[0] = m->out[f->src] > 0 ? f->src : -1;
      r[1] = m->in[f->dst] > 0 ? m->n + f->dst : -1;
      r[2] = m->core > 0 ? 2 * m->n : -1;
      r[3] = -1;
      if (m->link > 0)
        {
          keys[i] = (gint64) f->src * m->n + f->dst;
          gpointer found = g_hash_table_lookup (m->pairs, &keys[i]);
          r[3] = found != NULL ? GPOINTER_TO_INT (found) - 1 : add_resource (m, m->link);
          if (found == NULL)
            g_hash_table_insert (m->pairs, &keys[i], GINT_TO_POINTER (r[3] + 1));
        }
      f->rate = -1;   /* not frozen yet */
      for (int k = 0; k < 4; k++)
        if (r[k] >= 0)
          g_array_index (m->users, int, r[k])++;
    }
  double *cap = (double *) (gpointer) m->cap->data;
  int *users = (int *) (gpointer) m->users->data;
  guint frozen = 0;
  while (frozen < nf)
    {
      /* the resource that fills first: the lowest fair share */
      int bottleneck = -1;
      double share = G_MAXDOUBLE;
      for (guint k = 0; k < m->cap->len; k++)
        if (users[k] > 0 && cap[k] / users[k] < share)
          {
            share = MAX (cap[k], 0) / users[k];
            bottleneck = (int) k;
          }
      if (bottleneck < 0)
        {
          /* flows through no limited resource: they cross at once */
          for (guint i = 0; i < nf; i++)
            if (g_array_index (m->flows, Flow, i).rate < 0)
              g_array_index (m->flows, Flow, i).rate = G_MAXDOUBLE;
          break;
        }
      for (guint i = 0; i < nf; i++)
        {
          Flow *f = &g_array_index (m->flows, Flow, i);
          int *r = &res[i * 4];
          if (f->rate >= 0 || (r[0] != bottleneck && r[1] != bottleneck && r[2] != bottleneck && r[3] != bottleneck))
            continue;
          f->rate = share;
          frozen++;
          for (int k = 0; k < 4; k++)
            if (r[k] >= 0)
              {
                cap[r[k]] -= share;
                users[r[k]]--;
              }
        }
    }
  g_hash_table_remove_all (m->pairs);   /* its keys live in `keys` */
  g_free (keys);
}

void
shoal_nic_model_start (ShoalNicModel *m, gint64 now, int src, int dst, guint64 bytes, const ShoalTimedEvent *what)
{
  g_return_if_fail (src >= 0 && src < m->n && dst >= 0 && dst < m->n && src != dst);
  advance (m, now);
  Flow f = { src, dst, (double) bytes, 0, m->next_seq++, *what };
  g_array_append_val (m->flows, f);
  fill (m);
}

/* When flow f ends at its rate. */
static gint64
end_of (const ShoalNicModel *m, const Flow *f)
{
  if (f->left <= DONE_BYTES || f->rate >= G_MAXDOUBLE)
    return m->at;
  if (f->rate <= 0)
    return G_MAXINT64;
  double ns = ceil (f->left / f->rate * 1e9);
  return ns >= (double) (G_MAXINT64 - m->at) ? G_MAXINT64 : m->at + (gint64) ns;
}

/* The index of the flow that ends first (the earliest begun of a tie). */
static int
first_end (const ShoalNicModel *m, gint64 *t)
{
  int best = -1;
  *t = G_MAXINT64;
  for (guint i = 0; i < m->flows->len; i++)
    {
      gint64 e = end_of (m, &g_array_index (m->flows, Flow, i));
      if (best < 0 || e < *t)
        {
          best = (int) i;
          *t = e;
        }
    }
  return best;
}

gint64
shoal_nic_model_next_end (const ShoalNicModel *m)
{
  gint64 t;
  first_end (m, &t);
  return t;
}

gboolean
shoal_nic_model_pop (ShoalNicModel *m, ShoalTimedEvent *what)
{
  gint64 t;
  int i = first_end (m, &t);
  if (i < 0)
    return FALSE;
  advance (m, t);
  *what = g_array_index (m->flows, Flow, i).what;
  what->t = t;
  g_array_remove_index (m->flows, (guint) i);
  fill (m);
  return TRUE;
}
