/* CUDA graphs of a net's training step (core/device.h, ShoalStepGraph;
 * net/net_gpu.c drives them).
 *
 * A graph replays the kernels it captured with the arguments they had,
 * so a call whose scalars change from step to step takes them from the
 * argument block instead: device memory the host refills from pinned
 * memory (one copy on the compute stream) before each launch.  Each
 * such call writes its scalars at the next free place of the block, in
 * the order the step makes them: a replay's host half, making the same
 * calls in the same order, writes each where the captured kernel reads
 * it.  The calls are kept (what they were: kernel, memory, length), so
 * a replay can check that its host half made exactly the captured
 * calls before the graph runs, and a step whose device work did not
 * run (a failed capture, a replay that differed) can be rerun eagerly
 * with the scalars it resolved, without running its host half twice.
 *
 * The host side of the block is double-buffered: a step's host half
 * writes one while the previous step's copy from the other may still
 * wait on the stream; the copy of the step before that came before its
 * forward, which the host waited for before this step began. */
#include "gpu/graph.h"

#include <string.h>

#include "core/error.h"

/* Room for every scalar of one step: an update is 44 bytes, a seed 8;
 * a step makes one update per slice and param segment. */
#define ARGS_BYTES ((size_t) 1 << 20)
#define ARGS_ALIGN 16

typedef enum { OP_SEED, OP_UPDATE, OP_ZERO } OpKind;

static const char *const op_names[] = { "a dropout seed", "an update", "a gradient clear" };

/* One call of the step that takes part in the graph. */
typedef struct {
  OpKind kind;
  size_t at;              /* OP_SEED, OP_UPDATE: where its scalars are in the block */
  ShoalLayer *layer;      /* OP_SEED */
  uint64_t seed;          /* OP_SEED: this step's */
  ShoalKUpdate k;         /* OP_UPDATE: k.rule picks the kernel; the rest is this step's */
  cudaStream_t stream;    /* OP_UPDATE, OP_ZERO */
  float *w, *g, *a, *b;   /* OP_UPDATE */
  void *p;                /* OP_ZERO */
  size_t n;               /* floats (OP_UPDATE), bytes (OP_ZERO) */
  int clear;              /* OP_UPDATE */
} StepOp;

struct _ShoalStepGraph {
  ShoalDeviceContext *ctx;
  unsigned char *host_args[2];    /* pinned, ARGS_BYTES each: the steps use them in turn */
  int turn;                       /* which one this step writes */
  unsigned char *dev_args;    /* device, ARGS_BYTES */
  size_t used;                /* bytes of the block this step wrote */
  GArray *captured;           /* StepOp: the captured step's calls, in order */
  GArray *step;               /* StepOp: this step's */
  guint seed_cursor;          /* rerun: the next of this step's seeds */
  cudaGraphExec_t exec;       /* NULL until a capture succeeded */
  guint64 workspace_generation;   /* the layers' workspace the graph points into */
  const char *failed;         /* capture: why a call could not be captured */
  char *diverged;             /* replay: how the host half differed */
};

typedef enum { MODE_EAGER, MODE_CAPTURE, MODE_REPLAY, MODE_RERUN } Mode;

/* The step graph the calling thread captures, replays or reruns. */
static _Thread_local ShoalStepGraph *active;
static _Thread_local Mode mode;

gboolean
shoal_gpu_step_capturing (void)
{
  return mode == MODE_CAPTURE;
}

/* The next free place of the block for `bytes` of `value`; FALSE when full. */
static gboolean
put (ShoalStepGraph *graph, const void *value, size_t bytes, size_t *at)
{
  size_t start = (graph->used + ARGS_ALIGN - 1) / ARGS_ALIGN * ARGS_ALIGN;
  if (start + bytes > ARGS_BYTES)
    return FALSE;
  memcpy (graph->host_args[graph->turn] + start, value, bytes);
  graph->used = start + bytes;
  *at = start;
  return TRUE;
}

static uint64_t
draw_seed (ShoalLayer *layer)
{
  /* two statements: the operands of | are evaluated in no fixed order */
  uint64_t hi = shoal_rng_u32 (&layer->rng);
  return (hi << 32) | shoal_rng_u32 (&layer->rng);
}

static void
diverge (ShoalStepGraph *graph, char *why)
{
  if (graph->diverged == NULL)
    graph->diverged = why;
  else
    g_free (why);
}

/* Replay: the call just appended to graph->step against the captured one
 * at its place. */
static void
check_replayed (ShoalStepGraph *graph)
{
  guint i = graph->step->len - 1;
  const StepOp *op = &g_array_index (graph->step, StepOp, i);
  if (i >= graph->captured->len)
    {
      diverge (graph, g_strdup_printf ("its host half made more calls than the captured step's %u",
                                       graph->captured->len));
      return;
    }
  const StepOp *c = &g_array_index (graph->captured, StepOp, i);
  gboolean same = c->kind == op->kind && c->at == op->at && c->layer == op->layer && c->stream == op->stream
                  && c->w == op->w && c->g == op->g && c->a == op->a && c->b == op->b && c->p == op->p
                  && c->n == op->n && c->clear == op->clear && (c->kind != OP_UPDATE || c->k.rule == op->k.rule);
  if (!same)
    diverge (graph, g_strdup_printf ("its call %u (%s) is not the captured step's (%s)", i, op_names[op->kind],
                                     op_names[c->kind]));
}

const uint64_t *
shoal_gpu_step_seed (ShoalLayer *layer, uint64_t *seed)
{
  ShoalStepGraph *graph = active;
  if (mode == MODE_RERUN)
    {
      /* drawn by the step's host half already: not again */
      for (; graph->seed_cursor < graph->step->len; graph->seed_cursor++)
        {
          const StepOp *op = &g_array_index (graph->step, StepOp, graph->seed_cursor);
          if (op->kind == OP_SEED && op->layer == layer)
            {
              *seed = op->seed;
              graph->seed_cursor++;
              return NULL;
            }
        }
    }
  *seed = draw_seed (layer);
  if (mode != MODE_CAPTURE)
    return NULL;
  /* kept whatever happens: a rerun of the step takes it */
  StepOp op = { .kind = OP_SEED, .layer = layer, .seed = *seed };
  gboolean placed = put (graph, seed, sizeof *seed, &op.at);
  g_array_append_val (graph->step, op);
  if (!placed)
    {
      graph->failed = "the step's scalars do not fit the argument block";
      return NULL;
    }
  return (const uint64_t *) (graph->dev_args + op.at);
}

gboolean
shoal_gpu_step_update (cudaStream_t s, const ShoalKUpdate *k, float *w, float *g, float *a, float *b, size_t n,
                       int clear)
{
  ShoalStepGraph *graph = active;
  if (mode != MODE_CAPTURE && mode != MODE_REPLAY)
    return FALSE;
  /* kept whatever happens (with its scalars): a rerun of the step makes it */
  StepOp op = { .kind = OP_UPDATE, .k = *k, .stream = s, .w = w, .g = g, .a = a, .b = b, .n = n, .clear = clear };
  gboolean placed = put (graph, k, sizeof *k, &op.at);
  g_array_append_val (graph->step, op);
  if (mode == MODE_REPLAY)
    {
      if (placed)
        check_replayed (graph);
      else
        diverge (graph, g_strdup ("its scalars do not fit the argument block"));
      return TRUE;
    }
  if (!placed || s != graph->ctx->compute)
    {
      /* not in the graph: the rerun after the failed capture makes it */
      graph->failed = !placed ? "the step's scalars do not fit the argument block"
                              : "an update was enqueued on another stream than the net's";
      return TRUE;
    }
  /* a failed launch fails the capture, which end_capture reports */
  shoal_k_update_at (k, (const ShoalKUpdate *) (graph->dev_args + op.at), w, g, a, b, n, clear, s);
  return TRUE;
}

gboolean
shoal_gpu_step_zero (cudaStream_t s, void *p, size_t bytes)
{
  ShoalStepGraph *graph = active;
  if (mode != MODE_CAPTURE && mode != MODE_REPLAY)
    return FALSE;
  StepOp op = { .kind = OP_ZERO, .stream = s, .p = p, .n = bytes };
  g_array_append_val (graph->step, op);
  if (mode == MODE_REPLAY)
    {
      check_replayed (graph);
      return TRUE;
    }
  if (s != graph->ctx->compute)
    {
      graph->failed = "a gradient clear was enqueued on another stream than the net's";
      return TRUE;
    }
  return FALSE;
}

void
shoal_gpu_step_other (const char *what)
{
  if (mode == MODE_REPLAY)
    diverge (active, g_strdup_printf ("its host half made a device call (%s) that the captured step did not", what));
}

/* ---- the graph's life ---------------------------------------------------- */

static void
drop_exec (ShoalStepGraph *graph)
{
  if (graph->exec != NULL)
    cudaGraphExecDestroy (graph->exec);
  graph->exec = NULL;
  g_array_set_size (graph->captured, 0);
}

ShoalStepGraph *
shoal_cuda_graph_new (ShoalDeviceContext *ctx, GError **error)
{
  ShoalStepGraph *graph = g_new0 (ShoalStepGraph, 1);
  graph->ctx = ctx;
  graph->captured = g_array_new (FALSE, TRUE, sizeof (StepOp));
  graph->step = g_array_new (FALSE, TRUE, sizeof (StepOp));
  cudaError_t status = cudaSetDevice (ctx->device.index);
  for (int i = 0; i < 2 && status == cudaSuccess; i++)
    status = cudaHostAlloc ((void **) &graph->host_args[i], ARGS_BYTES, cudaHostAllocPortable);
  if (status == cudaSuccess)
    status = cudaMalloc ((void **) &graph->dev_args, ARGS_BYTES);
  if (status != cudaSuccess)
    {
      cudaGetLastError ();
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL, "cuda:%d: the step graph's %zu KiB argument block: %s",
                   ctx->device.index, 3 * ARGS_BYTES >> 10, cudaGetErrorString (status));
      shoal_cuda_graph_free (graph);
      return NULL;
    }
  return graph;
}

void
shoal_cuda_graph_free (ShoalStepGraph *graph)
{
  if (graph == NULL)
    return;
  cudaSetDevice (graph->ctx->device.index);
  /* a launch may still run: its graph and argument block go after it */
  cudaStreamSynchronize (graph->ctx->compute);
  drop_exec (graph);
  for (int i = 0; i < 2; i++)
    if (graph->host_args[i] != NULL)
      cudaFreeHost (graph->host_args[i]);
  if (graph->dev_args != NULL)
    cudaFree (graph->dev_args);
  cudaGetLastError ();
  g_array_free (graph->captured, TRUE);
  g_array_free (graph->step, TRUE);
  g_free (graph->diverged);
  g_free (graph);
}

/* The GPU paths declared by every built-in type (register.c's list). */
#define SHOAL_LAYER_CPU_ONLY(type, why)
#define DECLARE(type) extern const ShoalLayerGpuOps shoal_layer_##type##_gpu;
#define SHOAL_LAYER(type) DECLARE (type)
#include "layers/layer_list.h"
#undef SHOAL_LAYER
DECLARE (split)
DECLARE (lmdb_input)
DECLARE (text_input)
#undef DECLARE

const char *
shoal_cuda_graph_refuses (gconstpointer gpu_ops)
{
  if (gpu_ops == &shoal_layer_gru_gpu || gpu_ops == &shoal_layer_lstm_gpu)
    return "its hidden state goes through the host between batches";
  if (gpu_ops == &shoal_layer_rbm_hidden_gpu || gpu_ops == &shoal_layer_rbm_visible_gpu)
    return "it draws its Gibbs samples' seeds inside its forward";
#define KNOWN(type) || gpu_ops == &shoal_layer_##type##_gpu
#define SHOAL_LAYER(type) KNOWN (type)
  if (FALSE
#include "layers/layer_list.h"
      KNOWN (split) KNOWN (lmdb_input) KNOWN (text_input))
    return NULL;
#undef SHOAL_LAYER
#undef KNOWN
  return "its GPU path is not one of shoal's (a plugin's), not known to be capturable";
}

gboolean
shoal_cuda_graph_ready (ShoalStepGraph *graph)
{
  if (graph->exec != NULL && graph->workspace_generation != graph->ctx->workspace_generation)
    drop_exec (graph);   /* the captured calls point into the old workspace */
  return graph->exec != NULL;
}

static void
step_begin (ShoalStepGraph *graph, Mode m)
{
  graph->turn ^= 1;
  graph->used = 0;
  g_array_set_size (graph->step, 0);
  graph->failed = NULL;
  g_free (graph->diverged);
  graph->diverged = NULL;
  graph->seed_cursor = 0;
  active = graph;
  mode = m;
}

static void
step_end (void)
{
  active = NULL;
  mode = MODE_EAGER;
}

gboolean
shoal_cuda_graph_begin_capture (ShoalStepGraph *graph, GError **error)
{
  drop_exec (graph);
  cudaSetDevice (graph->ctx->device.index);
  cudaGetLastError ();
  /* thread-local: a call this thread must not make while capturing (an
   * allocation, a synchronisation) fails the capture; other threads'
   * work on other streams is left alone */
  cudaError_t status = cudaStreamBeginCapture (graph->ctx->compute, cudaStreamCaptureModeThreadLocal);
  if (status != cudaSuccess)
    {
      cudaGetLastError ();
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL, "cuda:%d: cudaStreamBeginCapture: %s",
                   graph->ctx->device.index, cudaGetErrorString (status));
      return FALSE;
    }
  step_begin (graph, MODE_CAPTURE);
  return TRUE;
}

/* The seeds come first in a step (the forward draws them, the backward
 * updates): a replay draws them before its `ready` calls. */
static gboolean
seeds_first (const GArray *ops)
{
  gboolean other = FALSE;
  for (guint i = 0; i < ops->len; i++)
    {
      OpKind kind = g_array_index (ops, StepOp, i).kind;
      if (kind == OP_SEED && other)
        return FALSE;
      other |= kind != OP_SEED;
    }
  return TRUE;
}

gboolean
shoal_cuda_graph_end_capture (ShoalStepGraph *graph, GError **error)
{
  ShoalDeviceContext *ctx = graph->ctx;
  step_end ();
  cudaGraph_t captured = NULL;
  cudaError_t status = cudaStreamEndCapture (ctx->compute, &captured);
  /* the layers' failures while capturing are the capture's */
  GError *layer_error = ctx->error;
  ctx->error = NULL;
  char *why = NULL;
  if (status != cudaSuccess)
    why = g_strdup_printf ("cudaStreamEndCapture: %s", cudaGetErrorString (status));
  else if (layer_error != NULL)
    why = g_strdup (layer_error->message);
  else if (graph->failed != NULL)
    why = g_strdup (graph->failed);
  else if (!seeds_first (graph->step))
    why = g_strdup ("a dropout seed was drawn after an update");
  else if ((status = cudaGraphInstantiateWithFlags (&graph->exec, captured, 0)) != cudaSuccess)
    {
      graph->exec = NULL;
      why = g_strdup_printf ("cudaGraphInstantiate: %s", cudaGetErrorString (status));
    }
  if (captured != NULL)
    cudaGraphDestroy (captured);
  cudaGetLastError ();
  g_clear_error (&layer_error);
  if (why != NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL, "cuda:%d: capturing the step: %s", ctx->device.index, why);
      g_free (why);
      return FALSE;
    }
  g_array_set_size (graph->captured, 0);
  g_array_append_vals (graph->captured, graph->step->data, graph->step->len);
  graph->workspace_generation = ctx->workspace_generation;
  return TRUE;
}

void
shoal_cuda_graph_begin_replay (ShoalStepGraph *graph)
{
  step_begin (graph, MODE_REPLAY);
  /* the forward's draws, where the captured forward made them */
  for (guint i = 0; i < graph->captured->len; i++)
    {
      const StepOp *c = &g_array_index (graph->captured, StepOp, i);
      if (c->kind != OP_SEED)
        break;
      uint64_t seed = draw_seed (c->layer);
      StepOp op = { .kind = OP_SEED, .layer = c->layer, .seed = seed };
      gboolean placed = put (graph, &seed, sizeof seed, &op.at);
      g_array_append_val (graph->step, op);
      if (placed)
        check_replayed (graph);
      else
        diverge (graph, g_strdup ("its scalars do not fit the argument block"));
    }
}

gboolean
shoal_cuda_graph_end_replay (ShoalStepGraph *graph, GError **error)
{
  step_end ();
  if (graph->diverged == NULL && graph->step->len != graph->captured->len)
    graph->diverged = g_strdup_printf ("its host half made %u of the captured step's %u calls", graph->step->len,
                                       graph->captured->len);
  if (graph->diverged == NULL)
    return TRUE;
  g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL, "cuda:%d: the step differs from the captured one: %s",
               graph->ctx->device.index, graph->diverged);
  return FALSE;
}

gboolean
shoal_cuda_graph_launch (ShoalStepGraph *graph, GError **error)
{
  ShoalDeviceContext *ctx = graph->ctx;
  cudaError_t status = cudaSuccess;
  if (graph->used > 0)
    status = cudaMemcpyAsync (graph->dev_args, graph->host_args[graph->turn], graph->used, cudaMemcpyHostToDevice,
                              ctx->compute);
  if (status == cudaSuccess)
    status = cudaGraphLaunch (graph->exec, ctx->compute);
  if (status == cudaSuccess)
    return TRUE;
  cudaGetLastError ();
  g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_INTERNAL, "cuda:%d: launching the step's graph: %s", ctx->device.index,
               cudaGetErrorString (status));
  return FALSE;
}

void
shoal_cuda_graph_begin_rerun (ShoalStepGraph *graph)
{
  /* the step's calls and scalars stay: the rerun reads them */
  graph->seed_cursor = 0;
  active = graph;
  mode = MODE_RERUN;
}

void
shoal_cuda_graph_end_rerun (ShoalStepGraph *graph)
{
  step_end ();
  for (guint i = 0; i < graph->step->len; i++)
    {
      const StepOp *op = &g_array_index (graph->step, StepOp, i);
      cudaError_t status = cudaSuccess;
      if (op->kind == OP_UPDATE)
        status = shoal_k_update (&op->k, op->w, op->g, op->a, op->b, op->n, op->clear, op->stream);
      else if (op->kind == OP_ZERO)
        status = cudaMemsetAsync (op->p, 0, op->n, op->stream);
      if (status != cudaSuccess)
        {
          cudaGetLastError ();
          if (graph->ctx->error == NULL)
            graph->ctx->error = g_error_new (SHOAL_ERROR, SHOAL_ERROR_INTERNAL, "cuda:%d: rerunning the step's %s: %s",
                                             graph->ctx->device.index, op_names[op->kind],
                                             cudaGetErrorString (status));
        }
    }
}
