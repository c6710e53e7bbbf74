/* One process's share of a job: its worker threads with their param
 * clients, around the servers run/runner_servers.c starts (their RPC
 * service and, in Hogwild, the group sync with the slices' masters).
 * The same code runs a one-process job (every slice local, no Thrift at
 * all) and rank R of a cluster. */
#include "run/runner_process.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>

#include "cluster/endpoints.h"
#include "cluster/layout.h"
#include "comm/thrift_wire.h"
#include "comm/mailbox.h"
#include "comm/param_client.h"
#include "partition/partition.h"
#include "core/error.h"
#include "core/memory_budget.h"
#include "core/param.h"
#include "server/group_sync.h"
#include "server/rpc_client.h"
#include "server/rpc_server.h"
#include "server/server.h"
#include "rpc/link_limit.h"
#include "emulate/emulator.h"
#include "emulate/fault_timer.h"
#include "run/membership.h"
#include "metrics/metrics.h"
#include "metrics/process_report.h"
#include "worker/threads.h"
#include "worker/worker.h"
#include "workspace/run_identity.h"
#include "workspace/workspace.h"
#include "workspace/workspace_claim.h"
#include "workspace/workspace_lock.h"

/* *created_top: the topmost folder this made, NULL when the workspace was
 * there (a refused run removes what it made again while it is empty, see
 * release_process). */
static gboolean
prepare_workspace (const ShoalRunOptions *opts, char **created_top, GError **error)
{
  return shoal_workspace_make (opts->workspace, created_top, error);
}

/* Whether every server rank's checkpoint fits this job (its sizes, at
 * its newest step): a rank resumed without a launcher asks before it
 * drops a metrics line, as the server ranks' own restores, which refuse
 * another model, come only after the worker ranks trimmed theirs. */
static gboolean
server_checkpoints_fit (RunnerProcess *p, GError **error)
{
  gboolean ok = TRUE;
  for (int r = 0; ok && r < p->layout->nprocs; r++)
    {
      if (p->layout->procs[r].servers->len == 0)
        continue;
      char *dir = shoal_checkpoint_dir (p->opts->workspace, r);
      const char *dirs[] = { dir, NULL };
      gint64 step = shoal_checkpoint_common_step (dirs, error);
      ShoalCheckpoint *c = step >= 0 ? shoal_checkpoint_open (dir, FALSE, error) : NULL;
      ok = c != NULL && shoal_server_checkpoint_fits (c, step, shoal_group_net_params (p->layout_net),
                                                      p->job->updater.kind, p->nslices, error);
      if (!ok)
        g_prefix_error (error, "%s: cannot resume: %s: ", p->opts->workspace, dir);
      shoal_checkpoint_close (c);
      g_free (dir);
    }
  return ok;
}

/* Whether a rank resumed without a launcher (mpirun, srun: no job.conf)
 * continues the run of its workspace: the conf each rank's units saved
 * with their newest checkpoint is compared with this job's by the rule a
 * launcher applies to job.conf (workspace/run_identity.h), on every rank
 * before any changes anything; a model of the same sizes passes the
 * servers' own check.  Checkpoints made before units saved their conf
 * have nothing to compare (their sizes still are). */
static gboolean
checkpoints_same_run (RunnerProcess *p, GError **error)
{
  const char *workspace = p->opts->workspace;
  gboolean ok = TRUE, compared = FALSE;
  for (int r = 0; ok && r < p->layout->nprocs; r++)
    {
      char *dir = shoal_checkpoint_dir (workspace, r);
      ShoalCheckpoint *c = g_file_test (dir, G_FILE_TEST_IS_DIR) ? shoal_checkpoint_open (dir, FALSE, NULL) : NULL;
      gint64 steps[2] = { -1, -1 }, step = -1;
      int n = c != NULL ? shoal_checkpoint_steps (c, SHOAL_RUN_IDENTITY_BLOB, steps) : 0;
      GBytes *blob = NULL;
      /* a damaged step: the other one kept (the resume plan leaves it out too) */
      for (int i = 0; blob == NULL && i < n; i++)
        blob = shoal_checkpoint_load (c, SHOAL_RUN_IDENTITY_BLOB, step = steps[i], NULL);
      shoal_checkpoint_close (c);
      if (blob != NULL)
        {
          gsize len = 0;
          const char *text = g_bytes_get_data (blob, &len);
          GKeyFile *was = g_key_file_new ();
          char *where = g_strdup_printf ("the checkpoint of step %" G_GINT64_FORMAT " (%s)", step, dir);
          GError *e = NULL;
          if (g_key_file_load_from_data (was, text, len, G_KEY_FILE_NONE, &e))
            ok = shoal_run_identity_check (workspace, where, was, shoal_conf_keyfile (p->job->conf), error);
          else
            {
              g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA, "%s: cannot resume: %s: its job's conf: %s",
                           workspace, where, e->message);
              g_error_free (e);
              ok = FALSE;
            }
          compared = TRUE;
          g_free (where);
          g_key_file_free (was);
          g_bytes_unref (blob);
        }
      g_free (dir);
    }
  if (ok && !compared)
    g_debug ("%s: its checkpoints were made before they kept their job's conf: only their sizes are compared",
             workspace);
  return ok;
}

/* Whether a resumed run continues its workspace's run, before anything
 * there changes: one process compares job.conf, a rank resumed without a
 * launcher its checkpoints' conf (a launcher's ranks: their launcher
 * compared job.conf). */
static gboolean
resumes_same_run (RunnerProcess *p, GError **error)
{
  if (p->opts->endpoints == NULL)
    return shoal_workspace_check_resume (p->opts->workspace, p->job->conf, error);
  return p->opts->trim_metrics == NULL || checkpoints_same_run (p, error);
}

/* A one-process run takes its workspace once it knows it can start (the
 * launcher does this for its ranks): a refused resume leaves job.conf as
 * it was; a fresh run moves an earlier run's files aside; a resumed one
 * keeps the metrics up to its checkpoint - a rank resumed without a
 * launcher its own lines up to the job's resume plan. */
static gboolean
claim_workspace (RunnerProcess *p, double *resume_clock, GError **error)
{
  ShoalJob *job = p->job;
  const ShoalRunOptions *opts = p->opts;
  if (opts->endpoints != NULL)
    return opts->trim_metrics == NULL
           || (server_checkpoints_fit (p, error) && opts->trim_metrics (opts->trim_data, resume_clock, error));
  char *moved = NULL;
  if (!shoal_workspace_claim (opts->workspace, job->conf, p->resume_step >= 0, opts->overwrite, &moved, error))
    return FALSE;
  if (moved != NULL)
    g_message ("%s held an earlier run: its checkpoint, job.conf and metrics.jsonl moved to %s",
               opts->workspace, moved);
  g_free (moved);
  return p->resume_step < 0
         || shoal_workspace_trim_metrics (opts->workspace, p->resume_step, NULL, 0,
                                          shoal_workspace_checkpoint_clock (opts->workspace, 0, p->resume_step),
                                          resume_clock, error);
}


typedef struct {
  ShoalWorker worker;
  ShoalGroupNet *net;     /* owned unless it is the layout net */
  ShoalParamClient *client;
  ShoalSlowdown *slowdown; /* [emulate]; owned, NULL when not slowed */
  GThread *thread;
  gboolean ok;
  gboolean follower;      /* a spread net's follower: runs its leader's commands */
} WorkerSlot;

static char *
unit_name (const ShoalWorker *w)
{
  return g_strdup_printf ("unit-%d-%d", w->group, w->worker);
}

/* The servers' slices, this unit's cursors and streams, and (group 0's
 * first unit) the params by name, all as of `step`.  A unit that began
 * `step` and gave it up (a stop elsewhere) has read its batch: it saves
 * the state kept from the step's start; its params never left `step`. */
static gboolean
worker_checkpoint (ShoalWorker *w, gint64 step, GError **error)
{
  RunnerProcess *p = w->checkpoint_data;
  if (!shoal_param_client_checkpoint (w->client, p->ckpt, step, error))
    return FALSE;
  char *name = unit_name (w);
  GBytes *state = w->gave_up_step ? g_bytes_ref (w->step_state)
                                  : shoal_group_net_save_state (w->net, error);
  if (state == NULL)
    {
      g_free (name);
      return FALSE;
    }
  gboolean keeps_params = w->group == 0 && w->worker == 0;
  /* values decoded on the GPU reach the host store first */
  if (keeps_params && !shoal_param_client_values_to_host (w->client, error))
    {
      g_bytes_unref (state);
      g_free (name);
      return FALSE;
    }
  GBytes *params = keeps_params ? shoal_param_store_to_bytes (shoal_group_net_params (w->net)) : NULL;
  /* quantised gradients: what the unit has not sent yet, for an exact resume */
  GBytes *residuals = shoal_param_client_save_residuals (w->client);
  char *residual_name = g_strconcat (name, "/residuals", NULL);
  /* the job's clock, so that a resumed run's metrics go on from it */
  GBytes *clock = shoal_workspace_clock_blob (p->metrics != NULL ? shoal_metrics_elapsed (p->metrics) : 0);
  /* its samples counter and display window: a resumed run's metrics go on as if never stopped */
  GBytes *progress = shoal_worker_save_progress (w);
  char *progress_name = g_strconcat (name, "/progress", NULL);
  /* the conf, so that a rank resumed without a launcher (no job.conf) knows which run this is */
  const char *names[7] = { name, "clock", progress_name, SHOAL_RUN_IDENTITY_BLOB, NULL, NULL, NULL };
  GBytes *blobs[7] = { state, clock, progress, p->conf_blob, NULL, NULL, NULL };
  int nb = 4;
  if (params != NULL)
    names[nb] = "params", blobs[nb++] = params;
  if (residuals != NULL)
    names[nb] = residual_name, blobs[nb++] = residuals;
  gboolean ok = shoal_checkpoint_save (p->ckpt, step, names, blobs, error);
  shoal_progress_note ();   /* a long checkpoint is not a wedged process */
  g_bytes_unref (state);
  g_bytes_unref (clock);
  g_bytes_unref (progress);
  g_free (progress_name);
  if (params)
    g_bytes_unref (params);
  if (residuals)
    g_bytes_unref (residuals);
  g_free (residual_name);
  g_free (name);
  return ok;
}

/* Resume of a unit whose gradients are quantised: its residuals as the
 * checkpoint kept them; a checkpoint of a run without them (another
 * wire_grads) starts from zero, saying so. */
static gboolean
load_residuals (RunnerProcess *p, WorkerSlot *slot, GError **error)
{
  char *unit = unit_name (&slot->worker);
  char *name = g_strconcat (unit, "/residuals", NULL);
  gboolean ok = TRUE;
  if (!shoal_checkpoint_has (p->ckpt, name, p->resume_step))
    g_message ("%s: the checkpoint of step %" G_GINT64_FORMAT " holds no gradient residuals; "
               "they start from zero", unit, p->resume_step);
  else
    {
      /* there, but damaged: an error, not zeros */
      GBytes *blob = shoal_checkpoint_load (p->ckpt, name, p->resume_step, error);
      ok = blob != NULL && shoal_param_client_load_residuals (slot->client, blob, error);
      if (blob != NULL)
        g_bytes_unref (blob);
    }
  g_free (name);
  g_free (unit);
  return ok;
}

/* Resume: the unit's samples counter and display window as its
 * checkpoint kept them; a checkpoint made before they were kept starts
 * them from zero. */
static gboolean
load_progress (RunnerProcess *p, ShoalWorker *w, GError **error)
{
  char *unit = unit_name (w);
  char *name = g_strconcat (unit, "/progress", NULL);
  gboolean ok = TRUE;
  if (shoal_checkpoint_has (p->ckpt, name, p->resume_step))
    {
      GBytes *blob = shoal_checkpoint_load (p->ckpt, name, p->resume_step, error);
      ok = blob != NULL && shoal_worker_load_progress (w, blob, error);
      if (blob != NULL)
        g_bytes_unref (blob);
    }
  g_free (name);
  g_free (unit);
  return ok;
}

static gpointer
worker_thread (gpointer data)
{
  WorkerSlot *slot = data;
  if (slot->follower)
    slot->ok = shoal_group_net_serve (slot->net, &slot->worker.error);
  else
    slot->ok = shoal_worker_train (&slot->worker);
  /* the followers stop with their leader, failed or not */
  shoal_group_net_finish (slot->net, slot->ok);
  return NULL;
}

static ShoalGroupNet *
build_net (RunnerProcess *p, ShoalMember unit, GError **error)
{
  /* a process of servers only builds the net for its layout: no GPU */
  return shoal_runner_unit_net (p->job, &p->layout->conf, unit, p->unit_size, p->whole_groups || p->spread_net,
                                p->units->len > 0, p->wire, error);
}

/* The units of this process: one per group whose workers all live here,
 * else one per worker. */
static gboolean
plan_units (RunnerProcess *p, GError **error)
{
  const ShoalClusterConf *c = &p->layout->conf;
  if (!shoal_runner_groups_as_one (p->job, c, &p->whole_groups, &p->spread_net, error))
    return FALSE;
  p->unit_size = p->whole_groups || p->spread_net ? c->nworkers_per_group : 1;
  p->units = g_array_new (FALSE, FALSE, sizeof (ShoalMember));
  for (guint i = 0; i < p->proc->workers->len; i++)
    {
      ShoalMember m = g_array_index (p->proc->workers, ShoalMember, i);
      if (i > 0 && (p->whole_groups || p->spread_net)
          && g_array_index (p->units, ShoalMember, p->units->len - 1).group == m.group)
        continue;  /* the group's net runs all its workers here */
      g_array_append_val (p->units, m);
    }
  return TRUE;
}

/* What the process holds besides the allocations the budget counts -
 * its code and libraries, the datasets' pages the first net read through
 * their maps, GLib's and LMDB's own - measured once the first net is
 * built, and charged with the rest, so that [job] memory_limit bounds
 * the process as the kernel sees it. */
static gboolean
charge_process_rest (RunnerProcess *p, GError **error)
{
  guint64 rss = shoal_memory_of_process ("VmRSS"), counted = shoal_memory_budget_used (p->job->memory_budget);
  ShoalMemoryCharge charge;
  shoal_memory_charge_begin (&charge, p->job->memory_budget);
  gboolean ok = rss <= counted || shoal_memory_charge (&charge, rss - counted, FALSE, error);
  shoal_memory_charge_end (&charge);
  p->memory_held += charge.charged;
  if (!ok)
    g_prefix_error (error, "rank %d: the process itself (code, libraries, the datasets read): ", p->proc->rank);
  return ok;
}

/* A checkpoint copies what it saves: the servers' slices (values and
 * optimiser state) into one blob, group 0's first unit the params into
 * another, and LMDB holds a blob's pages in memory until its transaction
 * commits - twice the bytes.  The two saves come one after the other,
 * each blob freed before the next: the larger counts.  It is reserved
 * against [job] memory_limit at the start, so a run whose first
 * checkpoint would pass the limit is refused now, not killed then. */
static gboolean
reserve_checkpoint_memory (RunnerProcess *p, GError **error)
{
  guint64 bytes = 2 * p->server_bytes;
  for (guint i = 0; i < p->units->len; i++)
    {
      ShoalMember m = g_array_index (p->units, ShoalMember, i);
      if (m.group == 0 && m.index == 0)
        bytes = MAX (bytes, 2 * (guint64) shoal_group_net_params (p->layout_net)->total * sizeof (float));
    }
  ShoalMemoryCharge charge;
  shoal_memory_charge_begin (&charge, p->job->memory_budget);
  gboolean ok = shoal_memory_charge (&charge, bytes, FALSE, error);
  shoal_memory_charge_end (&charge);
  p->memory_held += charge.charged;
  if (!ok)
    g_prefix_error (error, "rank %d: checkpoint buffers (the servers' slices and the params, copied for the "
                    "store): ", p->proc->rank);
  return ok;
}

/* Resume: whether every unit of this process that saves state has it at
 * the resume step.  A save that failed (the first checkpoint on a full
 * disk: the servers' slices were written, the unit's state was not)
 * leaves a step that only looks common. */
static gboolean
units_saved (RunnerProcess *p, const char *ckpt_dir, GError **error)
{
  ShoalCheckpoint *c = shoal_checkpoint_open (ckpt_dir, FALSE, error);
  gboolean ok = c != NULL;
  for (guint i = 0; ok && i < p->units->len; i++)
    {
      ShoalMember m = g_array_index (p->units, ShoalMember, i);
      if (p->spread_net && m.index > 0)
        continue;  /* a follower saves nothing of its own */
      char *name = g_strdup_printf ("unit-%d-%d", m.group, m.index);
      ok = shoal_checkpoint_has (c, name, p->resume_step);
      if (!ok)
        g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_DATA,
                     "%s: the checkpoint of step %" G_GINT64_FORMAT " holds no state of %s (its save "
                     "failed: a full disk?)", ckpt_dir, p->resume_step, name);
      g_free (name);
    }
  shoal_checkpoint_close (c);
  return ok;
}

/* Whether `unit` runs its group leader's commands (a spread net's
 * process that does not hold worker 0). */
static gboolean
is_follower (const RunnerProcess *p, ShoalMember unit)
{
  return p->wire != NULL && unit.index > 0;
}

/* Spread net: this process's mailbox and its wire to the other processes
 * of its group (a process holds workers of one group only). */
static gboolean
open_wire (RunnerProcess *p, GError **error)
{
  const ShoalClusterConf *c = &p->layout->conf;
  ShoalMember unit = g_array_index (p->units, ShoalMember, 0);
  int per = c->nworkers_per_procs, nprocs = c->nworkers_per_group / per;
  ShoalRpcClientOptions *peers = g_new0 (ShoalRpcClientOptions, nprocs);
  char **hosts = g_new0 (char *, nprocs);
  gboolean ok = TRUE;
  for (int j = 0; ok && j < nprocs; j++)
    {
      int rank = shoal_layout_worker_rank (p->layout, unit.group, j * per);
      if (rank == p->proc->rank)
        continue;
      ok = runner_endpoint_options (p, rank, &peers[j], &hosts[j], error);
    }
  if (ok)
    {
      p->mailbox = shoal_mailbox_new ();
      p->wire = shoal_thrift_wire_new (unit.group, nprocs, unit.index / per, peers, p->mailbox);
    }
  for (int j = 0; j < nprocs; j++)
    g_free (hosts[j]);  /* this process's entry is NULL: not a strv */
  g_free (hosts);
  g_free (peers);
  return ok;
}

/* The id of a pushing unit: its group where a group pushes as one, else
 * group * nworkers_per_group + worker (SSP's clocks, ShoalPushOrigin). */
static int
unit_id (const RunnerProcess *p, int group, int worker)
{
  return p->whole_groups || p->spread_net ? group : group * p->layout->conf.nworkers_per_group + worker;
}

/* A worker on a GPU whose server is this process's: the params and the
 * updater's state stay on the GPU and the server updates them there
 * ([job] device_update; docs/GPU.md). */
static gboolean
keep_params_on_device (RunnerProcess *p, WorkerSlot *slot, GError **error)
{
  ShoalNet *net = shoal_group_net_worker (slot->net, 0);
  if (!p->job->device_update || net == NULL || shoal_device_is_cpu (shoal_net_device (net)))
    return TRUE;
  ShoalDevice device = shoal_net_device (net);
  if (!shoal_net_keep_params_on_device (net, error)
      || !shoal_server_move_to_device (p->server, shoal_net_params (net)->dev_values, device,
                                       shoal_net_compute_stream (net), error))
    return FALSE;
  char *where = shoal_device_to_string (device);
  g_debug ("rank %d: params, optimiser state and updates on %s", p->proc->rank, where);
  g_free (where);
  return TRUE;
}

/* A GPU worker whose slices go to servers in other processes through a
 * wire codec ([cluster] wire_grads, wire_values): the client encodes the
 * gradients and decodes the values on the GPU, and the net leaves both
 * to it ([job] device_codecs; docs/GPU.md).  Where that cannot be, one message says
 * why and the host encodes and decodes, as before. */
static void
codecs_on_device (RunnerProcess *p, WorkerSlot *slot)
{
  ShoalNet *net = shoal_group_net_worker (slot->net, 0);
  ShoalParamStore *store = shoal_group_net_params (slot->net);
  gboolean coded = p->layout->conf.wire_grads != SHOAL_CODEC_FP32 || p->layout->conf.wire_values != SHOAL_CODEC_FP32;
  if (!p->job->device_codecs || !coded || net == NULL
      || shoal_device_is_cpu (shoal_net_device (net)) || shoal_net_params (net) != store)
    return;
  GError *error = NULL;
  char *where = shoal_device_to_string (shoal_net_device (net));
  if (shoal_net_set_grads_on_device (net, TRUE, &error)
      && !shoal_param_client_codecs_on_device (slot->client, shoal_net_compute_stream (net), &error))
    shoal_net_set_grads_on_device (net, FALSE, NULL);
  if (error != NULL)
    {
      g_message ("rank %d: the wire codecs (%s gradients, %s values) run on the host, not on %s: %s", p->proc->rank,
                 shoal_codec_name (p->layout->conf.wire_grads), shoal_codec_name (p->layout->conf.wire_values),
                 where, error->message);
      g_error_free (error);
    }
  else
    {
      /* the client puts every value on the device; the running
       * statistics (the store's tail) go up once, then their layers keep
       * them there */
      shoal_net_set_param_upload (net, FALSE);
      shoal_net_upload_params (net, store->served, store->total);
      g_debug ("rank %d: the wire codecs run on %s", p->proc->rank, where);
    }
  g_free (where);
}

/* [job] cuda_graph: on for a worker net whose params stay on its GPU.
 * Elsewhere (CPU workers, the host update, several workers in a net, a
 * layer a graph cannot hold) it is a no-op: a conf that asks for graphs
 * still runs on a machine without a GPU, as its precision does.  Said
 * once where the conf asks for graphs itself; the default (on) says
 * nothing of the CPU runs it cannot apply to but in the debug log. */
static void
use_cuda_graph (RunnerProcess *p, WorkerSlot *slot)
{
  if (!p->job->cuda_graph)
    return;
  ShoalNet *net = shoal_group_net_worker (slot->net, 0);
  GError *error = NULL;
  if (net != NULL && shoal_group_net_size (slot->net) == 1 && shoal_net_set_cuda_graph (net, TRUE, &error))
    return;
  /* whether the conf says cuda_graph itself, read from the conf here: a
   * field of ShoalJob for it broke the public ABI (e2e/abi) */
  gboolean asked = g_key_file_has_key (shoal_conf_keyfile (p->job->conf), "job", "cuda_graph", NULL);
  if (!p->cuda_graph_noted)
    g_log (G_LOG_DOMAIN, asked ? G_LOG_LEVEL_MESSAGE : G_LOG_LEVEL_DEBUG,
           "rank %d: [job] cuda_graph = true does nothing for this process's workers: %s", p->proc->rank,
           error != NULL ? error->message : "a worker group of several workers in one net");
  p->cuda_graph_noted = TRUE;
  g_clear_error (&error);
}

static gboolean
connect_client (RunnerProcess *p, WorkerSlot *slot, int group, GError **error)
{
  ShoalParamStore *store = shoal_group_net_params (slot->net);
  if (shoal_runner_reads_server_in_place (p->layout, (int) p->units->len))
    {
      slot->client = shoal_param_client_new_shared (store, p->server);
      return keep_params_on_device (p, slot, error);
    }
  slot->client = shoal_param_client_new (store, p->nslices, p->layout->mode);
  shoal_param_client_set_unit (slot->client, unit_id (p, group, slot->worker.worker));
  if (p->layout->mode == SHOAL_UPDATE_ASYNC)
    shoal_param_client_set_frequency (slot->client, p->layout->conf.n_push, p->layout->conf.n_fetch);
  /* an emulated link ([emulate] bandwidth_mbit, latency_ms) lives in the
   * socket: shared memory would go around it */
  ShoalLinkLimit link = shoal_link_limit_get_default ();
  shoal_param_client_set_shared_memory (slot->client, p->layout->conf.shared_memory && link.bytes_per_s <= 0
                                                        && link.latency_us <= 0);
  if (!shoal_param_client_set_codecs (slot->client, p->layout->conf.wire_values, p->layout->conf.wire_grads,
                                      error))
    return FALSE;
  int sg = shoal_layout_server_group_of (p->layout, group);
  for (int s = 0; s < p->nslices; s++)
    {
      int rank = shoal_layout_server_rank (p->layout, sg, shoal_layout_server_of_slice (p->layout, s % p->layout->nslices));
      if (rank == p->proc->rank)
        shoal_param_client_route_local (slot->client, s, p->server);
      else
        {
          ShoalRpcClientOptions o;
          char *host = NULL;
          if (!runner_endpoint_options (p, rank, &o, &host, error))
            return FALSE;
          shoal_param_client_route_remote (slot->client, s, &o);
          g_free (host);
        }
    }
  codecs_on_device (p, slot);
  return shoal_param_client_start (slot->client, error);
}

/* Tells every other server process that this worker process is done. */
static void
say_done (RunnerProcess *p)
{
  for (int r = 0; r < p->layout->nprocs; r++)
    {
      if (r == p->proc->rank || p->layout->procs[r].servers->len == 0)
        continue;
      ShoalRpcClientOptions o;
      char *host = NULL;
      GError *error = NULL;
      ShoalRpcClient *c = NULL;
      if (runner_endpoint_options (p, r, &o, &host, &error))
        {
          o.connect_retries = 5;
          c = shoal_rpc_client_connect (&o, &error);
        }
      if (c != NULL && !shoal_rpc_client_shutdown (c, p->proc->rank, &error)
          && strstr (error->message, "closed by the peer") != NULL)
        {
          /* the last shutdown lets the server stop before its reply is out */
          g_debug ("rank %d: rank %d closed after the shutdown call", p->proc->rank, r);
          g_clear_error (&error);
        }
      if (error != NULL)
        {
          g_warning ("rank %d: could not tell rank %d it is done: %s", p->proc->rank, r, error->message);
          g_error_free (error);
        }
      shoal_rpc_client_free (c);
      g_free (host);
    }
}

static gboolean
run_workers (RunnerProcess *p, ShoalRunResult *result, GError **error)
{
  guint n = p->units->len;
  WorkerSlot *slots = g_new0 (WorkerSlot, n);
  gboolean ok = TRUE;
  /* a batch-split group spread over processes: its units push for the
   * same SYNC steps from several processes, which may pick different
   * stop steps (worker.c, stop_with_group) */
  gboolean keep_step_state = p->layout->mode == SHOAL_UPDATE_SYNC && !p->whole_groups && !p->spread_net
                             && p->layout->conf.nworkers_per_group > 1;

  for (guint i = 0; ok && i < n; i++)
    {
      ShoalMember m = g_array_index (p->units, ShoalMember, i);
      slots[i].net = i == 0 ? p->layout_net : build_net (p, m, error);
      slots[i].follower = is_follower (p, m);
      slots[i].worker.worker = m.index;
      ok = slots[i].net != NULL && (slots[i].follower || connect_client (p, &slots[i], m.group, error));
      if (!ok)
        break;
      if (!slots[i].follower)
        use_cuda_graph (p, &slots[i]);
      /* a unit of several workers (a group net) waits for its slowest */
      slots[i].slowdown = shoal_slowdown_new (&p->job->emulate, &p->job->cluster, p->job->seed, m.group,
                                              p->unit_size > 1 ? 0 : m.index, p->unit_size);
      if (slots[i].slowdown != NULL && !slots[i].follower)
        {
          char *how = shoal_slowdown_describe (slots[i].slowdown);
          g_message ("[group %d worker %d] [emulate] slowed: %s", m.group, m.index, how);
          g_free (how);
        }
      slots[i].worker = (ShoalWorker) { .job = p->job, .net = slots[i].net, .client = slots[i].client,
                                        .slowdown = slots[i].slowdown,
                                        .metrics = p->metrics, .group = m.group, .worker = m.index,
                                        .log_progress = !p->opts->quiet,
                                        .tester = shoal_job_tests (p->job, m.group, m.index),
                                        .test_accuracy = -1, .checkpoint = worker_checkpoint,
                                        .checkpoint_data = p, .stop_step = &p->stop_step,
                                        .keep_step_state = keep_step_state,
                                        .start_step = MAX (p->resume_step, 0) };
      if (p->resume_step >= 0 && !slots[i].follower)
        {
          char *name = unit_name (&slots[i].worker);
          GBytes *state = shoal_checkpoint_load (p->ckpt, name, p->resume_step, error);
          g_free (name);
          ok = state != NULL && shoal_group_net_load_state (slots[i].net, state, error);
          if (state != NULL)
            g_bytes_unref (state);
          if (ok)
            ok = load_progress (p, &slots[i].worker, error);
          if (ok && slots[i].client != NULL && shoal_param_client_has_residuals (slots[i].client))
            ok = load_residuals (p, &slots[i], error);
          if (!ok)
            break;
        }
    }
  if (ok && !p->opts->quiet)
    {
      char *held = shoal_format_bytes (shoal_memory_budget_used (p->job->memory_budget));
      g_message ("rank %d: %s counted against [job] memory_limit (nets, servers, checkpoint buffers)",
                 p->proc->rank, held);
      g_free (held);
    }
  for (guint i = 0; ok && i < n; i++)
    {
      char *name = g_strdup_printf ("worker-%d-%d", slots[i].worker.group, slots[i].worker.worker);
      GError *e = NULL;
      /* g_thread_new aborts where no stack can be mapped (ulimit -v, too
       * many threads): an error names the worker instead, and the workers
       * already started are asked to stop so that the joins below end */
      slots[i].thread = g_thread_try_new (name, worker_thread, &slots[i], &e);
      if (slots[i].thread == NULL)
        {
          g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_MEMORY,
                       "rank %d: cannot start worker thread %s: %s (no room for its stack under "
                       "ulimit -v, or too many threads: ulimit -u)", p->proc->rank, name, e->message);
          g_error_free (e);
          if (i > 0)
            shoal_worker_request_stop ();
          ok = FALSE;
        }
      g_free (name);
    }
  for (guint i = 0; i < n; i++)
    if (slots[i].thread != NULL)
      {
        g_thread_join (slots[i].thread);
        if (!slots[i].ok && ok)
          {
            ok = FALSE;
            g_propagate_error (error, slots[i].worker.error);
            slots[i].worker.error = NULL;
          }
        g_clear_error (&slots[i].worker.error);
      }
  /* a server that updated on a worker's GPU: its host buffers are its
   * values again before that net goes (final params, server checkpoints) */
  if (p->server != NULL && shoal_server_on_device (p->server))
    {
      GError *e = NULL;
      if (!shoal_server_move_to_host (p->server, &e) && ok)
        {
          ok = FALSE;
          g_propagate_error (error, e);
        }
      g_clear_error (&e);
    }
  if (ok && n > 0 && result != NULL)
    *result = (ShoalRunResult) { .group = slots[0].worker.group, .worker = slots[0].worker.worker,
                                 .steps = slots[0].worker.steps_done,
                                 .test_loss = slots[0].worker.test_loss,
                                 .test_accuracy = slots[0].worker.test_accuracy,
                                 .samples_per_sec = slots[0].worker.train_samples_per_sec,
                                 /* the time budget's end is the run's end, not a stop */
                                 .stopped = slots[0].worker.stopped && !slots[0].worker.budget_end,
                                 .follower = slots[0].follower };
  for (guint i = 0; i < n; i++)
    {
      shoal_slowdown_free (slots[i].slowdown);
      shoal_param_client_free (slots[i].client);
      if (slots[i].net != p->layout_net)
        shoal_group_net_free (slots[i].net);
    }
  g_free (slots);
  return ok;
}

/* On hosts a hostfile or Slurm named, errors about a call name the rank
 * called too ("rank 1 (2 servers) at 10.0.0.2:47001"), not only its
 * address: which machine went is what a cluster's user asks first. */
static void
name_peers (const ShoalLayout *layout, const ShoalRunOptions *opts)
{
  if (opts->hosts == NULL || opts->endpoints == NULL)
    {
      shoal_rpc_client_set_peer_names (NULL, NULL);
      return;
    }
  char **names = g_new0 (char *, layout->nprocs + 1);
  for (int r = 0; r < layout->nprocs; r++)
    {
      char *who = shoal_layout_describe_rank (layout, r);
      names[r] = g_strdup_printf ("%s at %s", who, opts->endpoints[r]);
      g_free (who);
    }
  shoal_rpc_client_set_peer_names (opts->endpoints, names);
  g_strfreev (names);
}

/* [emulate] clock = virtual: the whole layout in this process. */
static gboolean
run_virtual (ShoalJob *job, const ShoalRunOptions *opts, ShoalRunResult *result, GError **error)
{
  if (opts->endpoints != NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                   "%s: [emulate] clock = virtual runs every unit in one process: start it with `shoal run`, "
                   "not as rank %d", shoal_conf_origin (job->conf), opts->rank);
      return FALSE;
    }
  gboolean done = shoal_emulator_run (job, opts, result, error);
  shoal_workspace_unlock (opts->workspace);
  return done;
}

/* This process's place in the layout: p->proc, and its rank. */
static gboolean
find_rank (RunnerProcess *p, int *rank, GError **error)
{
  const ShoalRunOptions *opts = p->opts;
  *rank = opts->endpoints != NULL ? opts->rank : 0;
  if (opts->endpoints == NULL && p->layout->nprocs > 1)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                   "%s: this cluster layout needs %d processes; start it with `shoal run` or `shoal proc`",
                   shoal_conf_origin (p->job->conf), p->layout->nprocs);
      return FALSE;
    }
  if (*rank < 0 || *rank >= p->layout->nprocs)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "rank %d does not exist: the layout has %d processes",
                   *rank, p->layout->nprocs);
      return FALSE;
    }
  p->proc = &p->layout->procs[*rank];
  return TRUE;
}

/* [emulate] links and [tls]: before this process opens or accepts any
 * connection. */
static gboolean
set_up_links (RunnerProcess *p, int rank, GError **error)
{
  ShoalJob *job = p->job;
  const ShoalRunOptions *opts = p->opts;
  ShoalLinkLimit link = { shoal_link_limit_bytes_per_s (job->emulate.bandwidth_mbit),
                          (gint64) (job->emulate.latency_ms * 1000) };
  shoal_link_limit_set_default (&link);
  if ((link.bytes_per_s > 0 || link.latency_us > 0) && rank == 0)
    g_message ("[emulate] every link between processes: %s%g Mbit/s, %g ms latency",
               link.bytes_per_s > 0 ? "" : "no bandwidth limit, ", job->emulate.bandwidth_mbit,
               job->emulate.latency_ms);
  ShoalTls *tls = NULL;
  char **hosts = opts->hosts != NULL || opts->endpoints == NULL ? NULL : shoal_hosts_from_endpoints (opts->endpoints);
  gboolean tls_ok = shoal_tls_conf_open (&job->tls, job->conf, rank, opts->hosts != NULL ? opts->hosts : hosts,
                                         opts->tls_dir, &tls, error);
  g_strfreev (hosts);
  if (!tls_ok)
    return FALSE;
  shoal_tls_set_default (tls);
  name_peers (p->layout, opts);
  if (tls != NULL && rank == 0)
    g_message ("[tls] links %s run TLS 1.3 with the job's certificates",
               shoal_tls_mode (tls) == SHOAL_TLS_ALL ? "between all ranks" : "between hosts");
  return TRUE;
}

/* p->resume_step: where a rejoining or resumed rank goes on from (-1: a
 * fresh start). */
static gboolean
find_resume_step (RunnerProcess *p, int rank, const char *ckpt_dir, GError **error)
{
  const ShoalRunOptions *opts = p->opts;
  const char *dirs[] = { ckpt_dir, NULL };
  if (opts->rejoin)
    {
      /* this rank's own newest checkpoint, if it made one: its units go on
       * from there, with the job's current values */
      GError *none = NULL;
      p->resume_step = g_file_test (ckpt_dir, G_FILE_TEST_IS_DIR) ? shoal_checkpoint_common_step (dirs, &none) : -1;
      if (none != NULL)
        g_message ("rank %d: rejoining at step 0 (%s)", rank, none->message);
      else
        g_message ("rank %d: rejoining at step %" G_GINT64_FORMAT " with the job's current values", rank,
                   p->resume_step);
      g_clear_error (&none);
    }
  else if (opts->resume)
    {
      p->resume_step = opts->resume_step;
      if (p->resume_step < 0)
        p->resume_step = shoal_checkpoint_common_step (dirs, error);
      if (p->resume_step < 0)
        {
          g_prefix_error (error, "%s: cannot resume: ", opts->workspace);
          return FALSE;
        }
    }
  return TRUE;
}

/* Multi-process: heartbeats from now on, since building the net and
 * loading data may take a while. */
static gboolean
start_membership (RunnerProcess *p, int rank, GError **error)
{
  const ShoalRunOptions *opts = p->opts;
  if (opts->endpoints == NULL)
    return TRUE;
  ShoalMembershipOptions mo = { .layout = p->layout, .rank = rank, .endpoints = opts->endpoints, .hosts = opts->hosts,
                                .token = opts->token, .group_pushes = p->whole_groups || p->spread_net,
                                .rejoin = opts->rejoin, .on_fatal = opts->on_fatal,
                                .data = opts->fatal_data };
  p->membership = shoal_membership_start (&mo, error);
  return p->membership != NULL;
}

/* The first unit's net (the param layout), the job's epochs in steps and
 * the slice count. */
static gboolean
build_layout_net (RunnerProcess *p, int rank, GError **error)
{
  ShoalJob *job = p->job;
  if (!p->whole_groups && !p->spread_net
      && !shoal_runner_share_batch (job, p->layout->conf.nworkers_per_group, error))
    return FALSE;
  if (p->spread_net && p->units->len > 0 && !open_wire (p, error))
    return FALSE;
  ShoalMember first = { 0, 0 };
  if (p->units->len > 0)
    first = g_array_index (p->units, ShoalMember, 0);
  p->layout_net = build_net (p, first, error);
  if (p->layout_net == NULL)
    return FALSE;
  ShoalLayer *input = shoal_group_net_input (p->layout_net);
  /* a spread net's follower takes its steps from the leader: its workers
   * may have no input of their own */
  gboolean follower = p->units->len > 0 && is_follower (p, g_array_index (p->units, ShoalMember, 0));
  if (!follower && (input == NULL || input->ops->num_records == NULL))
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "%s: the net has no data input layer",
                   shoal_conf_origin (job->conf));
      return FALSE;
    }
  int batch = input != NULL ? shoal_tensor_rows (&input->out) : 0;
  if (!follower)
    shoal_job_resolve_epochs (job, input->ops->num_records (input, SHOAL_PHASE_TRAIN), batch);
  p->nslices = shoal_runner_slice_count (p->layout, shoal_group_net_params (p->layout_net)->served);
  if (!p->opts->quiet && rank == 0)
    {
      g_message ("job '%s': %" G_GINT64_FORMAT " steps of batch %d per worker, updater %s, lr %g, %d slices",
                 job->name, job->train_steps, batch, shoal_updater_kind_name (job->updater.kind),
                 job->updater.schedule.lr, p->nslices);
      shoal_group_net_log_summary (p->layout_net);
      shoal_layout_log (p->layout);
    }
  return TRUE;
}

/* Every process writes metrics: workers their steps and tests, every
 * process its traffic and its server's staleness; and in the lost group
 * of [emulate] fault_group, the fault timer (*fault). */
static gboolean
start_reporting (RunnerProcess *p, int rank, double resume_clock, ShoalFaultTimer **fault, GError **error)
{
  ShoalJob *job = p->job;
  const ShoalRunOptions *opts = p->opts;
  char *metrics_path = g_build_filename (opts->workspace, "metrics.jsonl", NULL);
  p->metrics = shoal_metrics_open (metrics_path, opts->append_metrics || opts->resume, error);
  g_free (metrics_path);
  if (p->metrics == NULL)
    return FALSE;
  if (p->resume_step >= 0
      && (opts->endpoints == NULL || (opts->trim_metrics != NULL && g_getenv ("SHOAL_JOB_START_US") == NULL)))
    /* a resumed run's time goes on from its checkpoint's (the launcher
     * does this for its ranks with SHOAL_JOB_START_US) */
    shoal_metrics_continue_clock (p->metrics, resume_clock);
  p->report = shoal_process_report_start (p->metrics, rank, p->server, job->metrics_interval, error);
  if (p->report == NULL)
    return FALSE;
  if (job->emulate.fault_group >= 0 && p->proc->workers->len > 0
      && g_array_index (p->proc->workers, ShoalMember, 0).group == job->emulate.fault_group)
    {
      /* emulate_conf.c made sure the group has processes of its own */
      char *what = g_strdup_printf ("rank %d (group %d)", rank, job->emulate.fault_group);
      *fault = shoal_fault_timer_start (job->emulate.fault_at, p->metrics, what, error);
      g_free (what);
      if (*fault == NULL)
        return FALSE;
    }
  return TRUE;
}

/* After the workers ended (ok: they succeeded): the group sync's result,
 * the other ranks told, the RPC service drained and stopped, and a lost
 * rank made the cause of whatever failed.  Returns the run's outcome. */
static gboolean
finish_run (RunnerProcess *p, gboolean ok, ShoalRunResult *result, GError **error)
{
  if (p->group_sync != NULL)
    {
      /* a sync that failed fails the run, unless the run failed first */
      GError *sync_error = NULL;
      if (!shoal_group_sync_stop (g_steal_pointer (&p->group_sync), &sync_error) && ok)
        {
          /* stolen: freeing sync_error below must not free what *error holds
           * (it once printed "(null)") */
          g_propagate_error (error, g_steal_pointer (&sync_error));
          ok = FALSE;
        }
      g_clear_error (&sync_error);
    }
  if (p->opts->endpoints != NULL && p->proc->workers->len > 0)
    say_done (p);
  shoal_membership_self_done (p->membership);
  if (p->rpc != NULL)
    {
      /* a process of servers alone, stopped while a worker process was
       * still out: a stop, not the job's end (it said "servers done" and
       * exited 0, and the job's failure was blamed on the workers that
       * lost it) */
      if (ok && p->server != NULL && !shoal_rpc_server_wait (p->rpc) && result != NULL
          && p->proc->workers->len == 0)
        result->stopped = TRUE;
      shoal_membership_attach (p->membership, NULL, NULL);
      shoal_rpc_server_stop (p->rpc);
      p->rpc = NULL;
    }
  GError *lost = NULL;
  if (!shoal_membership_check (p->membership, ok, &lost))
    {
      g_clear_error (error);
      g_propagate_error (error, lost);
      ok = FALSE;
    }
  if (result != NULL)
    result->lost_groups = shoal_membership_lost_groups (p->membership);
  return ok;
}

/* Everything the run held, whether it succeeded (ok) or not; a run that
 * failed early may have failed because a rank was lost, which then is
 * its error. */
static void
release_process (RunnerProcess *p, gboolean ok, ShoalFaultTimer *fault, const char *created_top, GError **error)
{
  const ShoalRunOptions *opts = p->opts;
  if (p->membership != NULL && !ok && error != NULL && *error != NULL
      && !g_error_matches (*error, SHOAL_ERROR, SHOAL_ERROR_LOST))
    {
      GError *lost = NULL;
      if (!shoal_membership_check (p->membership, FALSE, &lost))
        {
          g_clear_error (error);
          g_propagate_error (error, lost);
        }
    }
  shoal_membership_attach (p->membership, NULL, NULL);
  shoal_fault_timer_stop (fault);
  shoal_process_report_stop (p->report);
  shoal_group_sync_stop (p->group_sync, NULL);
  if (p->layout_net != NULL)
    shoal_group_net_finish (p->layout_net, ok);
  if (p->rpc != NULL)
    shoal_rpc_server_stop (p->rpc);
  shoal_metrics_close (p->metrics);
  /* worker 0's store may borrow the server's values: free the nets first */
  shoal_group_net_free (p->layout_net);
  shoal_thrift_wire_free (p->wire);
  shoal_mailbox_free (p->mailbox);
  if (p->units != NULL)
    g_array_free (p->units, TRUE);
  shoal_server_free (p->server);
  shoal_memory_budget_release (p->job->memory_budget, p->memory_held);
  shoal_checkpoint_close (p->ckpt);
  g_clear_pointer (&p->conf_blob, g_bytes_unref);
  shoal_membership_free (p->membership);
  shoal_layout_free (p->layout);
  shoal_workspace_unlock (opts->workspace);
  /* a run refused before it wrote anything leaves no empty folder behind,
   * nor the parents it made for it (g_rmdir removes only an empty one; the
   * lock file is this run's) */
  if (!ok && created_top != NULL)
    {
      char *lock = g_build_filename (opts->workspace, "lock", NULL);
      g_unlink (lock);
      g_free (lock);
      shoal_workspace_unmake (opts->workspace, created_top);
    }
}

gboolean
shoal_run_job (ShoalJob *job, const ShoalRunOptions *opts, ShoalRunResult *result, GError **error)
{
  /* before any net of this process is made */
  shoal_device_set_precision (job->precision);
  if (job->emulate.clock == SHOAL_CLOCK_VIRTUAL)
    return run_virtual (job, opts, result, error);
  RunnerProcess p = { .job = job, .opts = opts, .server_group = -1, .resume_step = -1,
                      .stop_step = G_MAXINT64 };
  double resume_clock = -1;   /* a resumed one-process run's clock goes on from here */
  ShoalFaultTimer *fault = NULL;
  gboolean ok = FALSE;
  char *created_top = NULL;
  if (result != NULL)
    *result = (ShoalRunResult) { .group = -1, .worker = -1, .test_accuracy = -1 };
  shoal_worker_abort_reset ();
  char *ckpt_dir = NULL;
  int rank = 0;

  p.layout = shoal_layout_new (&job->cluster, job->conf, error);
  if (p.layout == NULL)
    return FALSE;
  if (!find_rank (&p, &rank, error) || !prepare_workspace (opts, &created_top, error))
    goto out;
  /* before its checkpoints are read: another live run's are not this one's
   * (a rank: its launcher's claim, or under mpirun / srun its rank's) */
  if (!shoal_workspace_lock (opts->workspace, opts->endpoints != NULL ? rank : -1, error)
      || !set_up_links (&p, rank, error))
    goto out;
  ckpt_dir = shoal_checkpoint_dir (opts->workspace, rank);
  if (!find_resume_step (&p, rank, ckpt_dir, error))
    goto out;
  shoal_threads_apply (job->threads, (int) p.proc->workers->len, opts->host_workers);

  if (!plan_units (&p, error))
    goto out;
  if (opts->resume && !opts->rejoin)
    {
      if (!units_saved (&p, ckpt_dir, error))
        {
          g_prefix_error (error, "%s: cannot resume: ", opts->workspace);
          goto out;
        }
      g_message ("rank %d: resuming at step %" G_GINT64_FORMAT, rank, p.resume_step);
    }
  if (!start_membership (&p, rank, error) || !build_layout_net (&p, rank, error)
      || !charge_process_rest (&p, error))
    goto out;
  /* the run is accepted (conf, net and data are good): now it takes the
   * workspace, so a run that failed before leaves it as it was; a fresh
   * run before it opens its checkpoint store (an earlier run's moves
   * aside), a resumed one once its job.conf (a rank without a launcher:
   * its checkpoints' conf) was compared and its servers took the
   * checkpoint up (their check refused another model only after
   * metrics.jsonl was trimmed, and passes one of the same sizes) */
  gboolean resumed = p.resume_step >= 0;
  if (resumed ? !resumes_same_run (&p, error) : !claim_workspace (&p, &resume_clock, error))
    goto out;
  p.ckpt = shoal_checkpoint_open (ckpt_dir, TRUE, error);
  if (p.ckpt == NULL)
    goto out;
  gsize conf_len = 0;
  char *conf_text = g_key_file_to_data (shoal_conf_keyfile (job->conf), &conf_len, NULL);
  p.conf_blob = g_bytes_new_take (conf_text, conf_len);
  if (!runner_start_servers (&p, error) || !reserve_checkpoint_memory (&p, error)
      || (resumed && !claim_workspace (&p, &resume_clock, error)))
    goto out;
  shoal_membership_attach (p.membership, p.server, p.rpc);
  if (p.server != NULL && p.layout->group_sync && !runner_start_group_sync (&p, error))
    goto out;
  if (!start_reporting (&p, rank, resume_clock, &fault, error))
    goto out;
  ok = p.proc->workers->len > 0 ? run_workers (&p, result, error) : TRUE;
  ok = finish_run (&p, ok, result, error);

out:
  g_free (ckpt_dir);
  release_process (&p, ok, fault, created_top, error);
  g_free (created_top);
  return ok;
}
