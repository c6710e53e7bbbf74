/* GPU nets: a net whose layers run their GPU paths on a device.  The
 * layers run on the context's compute stream.  Param values go up and
 * gradients come down on its copy stream, ordered by events, so that a
 * layer waits only for its own params in forward and a layer's gradient
 * travels while the layers below compute in backward.  Every entry point
 * returns with both streams idle, so the host buffers are the caller's
 * again (param clients write values and read grads between steps). */
#include "net/net_priv.h"

#include <math.h>

#include "core/error.h"
#include "core/updater.h"
#include "layers/split.h"

/* A loss's or metric's 1-element out stays on the host on a GPU net:
 * the net and the workers read it after every forward. */
static gboolean
keeps_host_out (const ShoalLayer *layer)
{
  return (layer->ops->flags & (SHOAL_LAYER_LOSS | SHOAL_LAYER_METRIC)) != 0;
}

/* The GPU part of a layer's set-up, after ops->setup: out and grad in
 * device memory, then the layer's own GPU set-up, then a check that
 * nothing the next layers read was left on the host. */
gboolean
shoal_net_gpu_setup_layer (ShoalNet *net, ShoalLayer *layer, GError **error)
{
  const ShoalLayerGpuOps *gpu = shoal_layer_gpu_ops (layer->ops);
  ShoalDevice dev = net->ctx.device;
  ShoalDevice cpu = { SHOAL_DEVICE_CPU, 0 };
  char *where = shoal_device_to_string (dev);
  gboolean ok = TRUE;

  if (gpu == NULL || gpu->forward == NULL || (layer->ops->backward != NULL && gpu->backward == NULL))
    {
      shoal_layer_error (layer, error, "type",
                         "layer '%s' (type %s) has no GPU path, and this net runs on %s "
                         "(a GPU worker never falls back to the CPU): run this worker on the CPU "
                         "or use layers that have one (`shoal layers`)",
                         layer->name, layer->ops->type, where);
      ok = FALSE;
    }
  layer->gpu = ok ? gpu : NULL;
  if (ok)
    {
      GError *local = NULL;
      if (layer->out.data == NULL && keeps_host_out (layer))
        {
          /* pinned, the copy of a loss or metric into it does not make
           * the host wait in the middle of a forward, and a CUDA graph
           * can capture it.  Allocated pinned, not pinned afterwards: a
           * loss and a metric of a few bytes each share a page, and a
           * second cudaHostRegister of a page fails, leaving that copy
           * pageable (synchronous, and refused inside a capture) */
          size_t bytes = MAX (shoal_shape_count (&layer->out.shape), (size_t) 1) * sizeof (float);
          float *pinned = shoal_device_host_alloc (dev, bytes, &local);
          ok = pinned != NULL;
          if (ok)
            {
              shoal_tensor_view_on (&layer->out, pinned, &layer->out.shape, cpu);
              if (net->pinned_outs == NULL)
                net->pinned_outs = g_ptr_array_new ();
              g_ptr_array_add (net->pinned_outs, pinned);
            }
        }
      else if (layer->out.data == NULL)
        ok = shoal_tensor_alloc_on (&layer->out, &layer->out.shape, dev, &local);
      if (ok && layer->needs_grad && layer->grad.data == NULL && layer->ops != &shoal_layer_split_ops)
        ok = shoal_tensor_alloc_on (&layer->grad, &layer->out.shape, dev, &local);
      if (!ok)
        {
          shoal_layer_error (layer, error, NULL, "layer '%s': %s", layer->name, local->message);
          g_error_free (local);
        }
    }
  if (ok && gpu->setup != NULL)
    {
      GError *local = NULL;
      ok = gpu->setup (layer, &local);
      if (!ok && local == NULL)
        shoal_layer_error (layer, &local, NULL, "GPU set-up of layer '%s' on %s failed", layer->name,
                           where);
      if (!ok)
        g_propagate_error (error, local);
    }
  gboolean out_on_host = !keeps_host_out (layer) && layer->out.device.kind != dev.kind;
  gboolean labels_on_host = layer->label.data != NULL && layer->label.device.kind != dev.kind;
  if (ok && (out_on_host || labels_on_host))
    {
      shoal_layer_error (layer, error, NULL, "GPU set-up of layer '%s' (%s) left its %s on the host",
                         layer->name, layer->ops->type, out_on_host ? "output" : "labels");
      ok = FALSE;
    }
  g_free (where);
  return ok;
}

/* Keeps the first device error and reports it once. */
static void
device_failed (ShoalNet *net, GError *error)
{
  if (net->device_error == NULL)
    {
      char *where = shoal_device_to_string (net->ctx.device);
      g_critical ("net on %s: %s", where, error->message);
      g_free (where);
      net->device_error = error;
    }
  else
    g_error_free (error);
}

gboolean
shoal_net_gpu_prepare (ShoalNet *net, GError **error)
{
  ShoalDevice dev = net->ctx.device;
  guint n = net->layers->len;

  if (!shoal_param_store_allocate_device (net->store, dev, error))
    return FALSE;
  net->staging = shoal_device_host_alloc (dev, MAX (net->store->total, (size_t) 1) * sizeof (float),
                                          error);
  if (net->staging == NULL)
    return FALSE;
  net->uploaded = g_new0 (ShoalEvent *, n);
  net->computed = g_new0 (ShoalEvent *, n);
  net->downloaded = g_new0 (ShoalEvent *, n);
  net->manual_upload = shoal_event_new (dev, error);
  if (net->manual_upload == NULL)
    return FALSE;
  for (guint i = 0; i < n; i++)
    {
      ShoalLayer *layer = g_ptr_array_index (net->layers, i);
      if (layer->nparams == 0)
        continue;
      if ((net->uploaded[i] = shoal_event_new (dev, error)) == NULL
          || (net->computed[i] = shoal_event_new (dev, error)) == NULL
          || (net->downloaded[i] = shoal_event_new (dev, error)) == NULL)
        return FALSE;
    }
  return shoal_device_context_ready (net->ctx.gpu, error);
}

/* Every layer's param values, host -> device, in layer order. */
static void
upload_all (ShoalNet *net)
{
  ShoalStream *copy = shoal_device_context_copy (net->ctx.gpu);
  /* the statistics (the store's tail, in no layer's range): first on the
   * copy stream, so every layer's event below comes after them */
  if (net->store->served < net->store->total)
    shoal_stream_copy (copy, net->store->dev_values + net->store->served, net->store->values + net->store->served,
                       (net->store->total - net->store->served) * sizeof (float));
  for (guint i = 0; i < net->layers->len; i++)
    {
      size_t b, e;
      if (net->uploaded[i] == NULL || !shoal_layer_param_range (g_ptr_array_index (net->layers, i), &b, &e))
        continue;
      shoal_stream_copy (copy, net->store->dev_values + b, net->store->values + b, (e - b) * sizeof (float));
      shoal_event_record (net->uploaded[i], copy);
    }
}

/* The layers whose forward a step graph leaves out: the inputs, which
 * read on the host and upload into their fixed device buffers before
 * the graph runs. */
static gboolean
before_graph (const ShoalLayer *layer)
{
  return (layer->ops->flags & SHOAL_LAYER_INPUT) && layer->nsrcs == 0;
}

typedef enum { LAYERS_ALL, LAYERS_INPUTS, LAYERS_BODY } LayerSet;

/* The param uploads a forward waits for (every forward's, or the
 * caller's); first in a step, before any layer. */
static void
enqueue_uploads (ShoalNet *net)
{
  ShoalStream *compute = shoal_device_context_compute (net->ctx.gpu);
  shoal_device_activate (net->ctx.device);
  if (net->upload_every_forward)
    upload_all (net);
  if (net->manual_pending)
    {
      shoal_stream_wait (compute, net->manual_upload);
      net->manual_pending = FALSE;
    }
}

/* Enqueues the forward of the layers of `which`, in order. */
static void
enqueue_layers (ShoalNet *net, ShoalPhase phase, LayerSet which)
{
  ShoalStream *compute = shoal_device_context_compute (net->ctx.gpu);
  for (guint i = 0; i < net->layers->len; i++)
    {
      ShoalLayer *layer = g_ptr_array_index (net->layers, i);
      if ((which == LAYERS_INPUTS && !before_graph (layer)) || (which == LAYERS_BODY && before_graph (layer)))
        continue;
      shoal_net_follow_rows (layer);
      if (net->upload_every_forward && net->uploaded[i] != NULL)
        shoal_stream_wait (compute, net->uploaded[i]);
      layer->gpu->forward (layer, phase);
    }
}

/* Enqueues every layer's forward (and the param uploads it waits for). */
static void
enqueue_forward (ShoalNet *net, ShoalPhase phase)
{
  enqueue_uploads (net);
  enqueue_layers (net, phase, LAYERS_ALL);
}

/* The weighted losses, once the forward's copies are in. */
static double
losses (ShoalNet *net)
{
  double loss = 0;
  for (guint i = 0; i < net->layers->len; i++)
    {
      ShoalLayer *layer = g_ptr_array_index (net->layers, i);
      if (layer->ops->flags & SHOAL_LAYER_LOSS)
        loss += layer->loss_weight * layer->out.data[0];
    }
  return loss;
}

double
shoal_net_gpu_forward (ShoalNet *net, ShoalPhase phase)
{
  enqueue_forward (net, phase);
  GError *error = NULL;
  if (!shoal_device_context_sync (net->ctx.gpu, &error))
    {
      device_failed (net, error);
      return NAN;
    }
  return losses (net);
}

/* ---- the step of a net whose params stay on the device ---------------
 * The host enqueues the forward and the backward (whose layers hand their
 * gradients to the updates), records where the forward ends, and
 * returns; whoever wants the loss waits for that point only
 * (shoal_net_gpu_finish_step): the device goes from forward to backward
 * without an idle gap, and the host prepares the next step while the
 * backward and the updates run.  Read late (shoal_net_train_step_late)
 * the next step waits first only for this step's input uploads (its
 * host buffers are then free), reads its batch and does its host half,
 * and only then, before its forward would overwrite this step's losses
 * and metrics, waits for this step's forward (by then long done unless
 * the host outruns the device) and takes its values.
 *
 * With CUDA graphs on (shoal_net_set_cuda_graph) a full batch's step,
 * after GRAPH_WARMUP eager ones, is captured once (core/device.h,
 * ShoalStepGraph) and replayed from then on: the inputs upload into
 * their fixed buffers, the host does the step's host half (the dropout
 * draws, the `ready` calls with the server's bookkeeping), and one
 * launch does the rest.  A short batch (an epoch's last) runs eagerly
 * and the graph stays for the next full one.  Whatever stops a graph
 * (a layer it cannot hold, a failed capture, a step whose host half
 * differs from the captured one) turns it off with one message, and
 * that step's device work runs eagerly (the rerun) without its host half
 * running twice. */

/* Eager full-batch steps before the capture: the first step's lazy
 * set-ups (module loading, library handles' first calls) stay out of
 * the capture. */
#define GRAPH_WARMUP 1

static void
graph_off (ShoalNet *net, const char *why)
{
  char *where = shoal_device_to_string (net->ctx.device);
  g_message ("net on %s: CUDA graph off, its steps run eagerly: %s", where, why);
  g_free (where);
  net->graph_wanted = FALSE;
  shoal_step_graph_free (net->graph);
  net->graph = NULL;
}

/* Every input holds a whole batch (the rows a graph is captured with). */
static gboolean
full_batch (ShoalNet *net)
{
  for (guint i = 0; i < net->layers->len; i++)
    {
      ShoalLayer *layer = g_ptr_array_index (net->layers, i);
      size_t row = shoal_tensor_row_size (&layer->out);
      if (before_graph (layer) && row > 0 && (size_t) shoal_tensor_rows (&layer->out) != layer->out.capacity / row)
        return FALSE;
    }
  return TRUE;
}

/* Why the first layer a graph cannot hold cannot be held (newly
 * allocated), or NULL where every layer can. */
static char *
graph_refusal (ShoalNet *net)
{
  for (guint i = 0; i < net->layers->len; i++)
    {
      ShoalLayer *layer = g_ptr_array_index (net->layers, i);
      const char *why = shoal_step_graph_refuses (layer->gpu);
      if (why != NULL)
        return g_strdup_printf ("layer '%s' (%s): %s", layer->name, layer->ops->type, why);
    }
  return NULL;
}

static gboolean
graph_prepare (ShoalNet *net)
{
  /* shoal_net_set_cuda_graph refused such nets; a layer added to the
   * refusals since is still caught here */
  char *why = graph_refusal (net);
  if (why != NULL)
    {
      graph_off (net, why);
      g_free (why);
      return FALSE;
    }
  GError *error = NULL;
  net->graph = shoal_step_graph_new (net->ctx.gpu, &error);
  if (net->graph == NULL)
    {
      graph_off (net, error->message);
      g_error_free (error);
      return FALSE;
    }
  return TRUE;
}

typedef enum { PATH_EAGER, PATH_CAPTURE, PATH_REPLAY } StepPath;

static StepPath
step_path (ShoalNet *net)
{
  if (!net->graph_wanted || !full_batch (net) || (net->graph == NULL && !graph_prepare (net)))
    return PATH_EAGER;
  if (shoal_step_graph_ready (net->graph))
    return PATH_REPLAY;
  if (net->graph_warmup < GRAPH_WARMUP)
    {
      net->graph_warmup++;
      return PATH_EAGER;
    }
  return PATH_CAPTURE;
}

/* The step's forward after the inputs, its end recorded, its backward. */
static void
enqueue_body (ShoalNet *net, ShoalParamsReadyFunc ready, gpointer user_data)
{
  enqueue_layers (net, SHOAL_PHASE_TRAIN, LAYERS_BODY);
  shoal_event_record (net->forward_done, shoal_device_context_compute (net->ctx.gpu));
  shoal_net_backward_notify (net, ready, user_data);
}

/* A step whose host half ran (its capture failed, or its replay
 * differed) but whose device work did not: enqueued eagerly with the
 * seeds and update scalars the host half resolved; then no more graph. */
static void
rerun (ShoalNet *net, const char *why)
{
  shoal_step_graph_begin_rerun (net->graph);
  enqueue_body (net, NULL, NULL);
  shoal_step_graph_end_rerun (net->graph);
  graph_off (net, why);
}

static void
launch (ShoalNet *net)
{
  GError *error = NULL;
  if (shoal_step_graph_launch (net->graph, &error))
    net->graph_steps++;
  else
    {
      rerun (net, error->message);
      g_error_free (error);
    }
}

static void
capture (ShoalNet *net, ShoalParamsReadyFunc ready, gpointer user_data)
{
  GError *error = NULL;
  shoal_net_take_pending (net);
  /* what the inputs met is theirs, not the capture's (which discards
   * the layers' failures as its own) */
  if (!shoal_device_context_check (net->ctx.gpu, &error))
    {
      device_failed (net, error);
      enqueue_body (net, ready, user_data);
      return;
    }
  if (!shoal_step_graph_begin_capture (net->graph, &error))
    {
      graph_off (net, error->message);
      g_error_free (error);
      enqueue_body (net, ready, user_data);
      return;
    }
  enqueue_body (net, ready, user_data);
  if (shoal_step_graph_end_capture (net->graph, &error))
    launch (net);
  else
    {
      rerun (net, error->message);
      g_error_free (error);
    }
}

/* The host half of the captured step, then its graph. */
static void
replay (ShoalNet *net, ShoalParamsReadyFunc ready, gpointer user_data)
{
  shoal_step_graph_begin_replay (net->graph);
  /* the `ready` calls shoal_net_backward_notify makes, in its order */
  for (guint i = net->layers->len; ready != NULL && i-- > 0;)
    {
      ShoalLayer *layer = g_ptr_array_index (net->layers, i);
      if (layer->needs_grad && layer->ops->backward != NULL && layer->nparams > 0)
        ready (layer, user_data);
    }
  GError *error = NULL;
  gboolean same = shoal_step_graph_end_replay (net->graph, &error);
  /* the step before, before this one's forward overwrites its outputs */
  shoal_net_take_pending (net);
  if (same)
    launch (net);
  else
    {
      rerun (net, error->message);
      g_error_free (error);
    }
}

void
shoal_net_gpu_train_step_begin (ShoalNet *net, ShoalParamsReadyFunc ready, gpointer user_data)
{
  GError *error = NULL;
  if ((net->forward_done == NULL && (net->forward_done = shoal_event_new (net->ctx.device, &error)) == NULL)
      || (net->inputs_done == NULL && (net->inputs_done = shoal_event_new (net->ctx.device, &error)) == NULL)
      || !shoal_event_sync (net->inputs_done, &error))
    {
      shoal_net_take_pending (net);
      device_failed (net, error);
      net->step_failed = TRUE;
      return;
    }
  /* the previous step's inputs are on the device: their buffers are free */
  enqueue_uploads (net);
  enqueue_layers (net, SHOAL_PHASE_TRAIN, LAYERS_INPUTS);
  shoal_event_record (net->inputs_done, shoal_device_context_compute (net->ctx.gpu));
  switch (step_path (net))
    {
    case PATH_EAGER:
      shoal_net_take_pending (net);
      enqueue_body (net, ready, user_data);
      break;
    case PATH_CAPTURE:
      capture (net, ready, user_data);
      break;
    case PATH_REPLAY:
      replay (net, ready, user_data);
      break;
    }
}

double
shoal_net_gpu_finish_step (ShoalNet *net)
{
  GError *error = NULL;
  if (net->step_failed)
    {
      net->step_failed = FALSE;
      return NAN;
    }
  shoal_device_activate (net->ctx.device);
  if (!shoal_event_sync (net->forward_done, &error) || !shoal_device_context_check (net->ctx.gpu, &error))
    {
      device_failed (net, error);
      return NAN;
    }
  return losses (net);
}

/* A training step, its loss read at once. */
double
shoal_net_gpu_train_step (ShoalNet *net, ShoalParamsReadyFunc ready, gpointer user_data)
{
  if (!net->params_resident)
    {
      double loss = shoal_net_gpu_forward (net, SHOAL_PHASE_TRAIN);
      shoal_net_backward_notify (net, ready, user_data);
      return loss;
    }
  shoal_net_gpu_train_step_begin (net, ready, user_data);
  return shoal_net_gpu_finish_step (net);
}

gboolean
shoal_net_set_cuda_graph (ShoalNet *net, gboolean on, GError **error)
{
  g_return_val_if_fail (net != NULL, FALSE);
  if (on && net->ctx.gpu == NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "CUDA graphs: the net runs on the CPU");
      return FALSE;
    }
  char *refusal = on ? graph_refusal (net) : NULL;
  if (refusal != NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "CUDA graphs: %s", refusal);
      g_free (refusal);
      return FALSE;
    }
  if (on && !net->params_resident)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF,
                   "CUDA graphs: the net's params do not stay on the device (its server is not in its process, "
                   "or [job] device_update is false), so its step waits on the host for its gradients");
      return FALSE;
    }
  if (!on && net->graph != NULL)
    {
      shoal_step_graph_free (net->graph);
      net->graph = NULL;
    }
  net->graph_wanted = on;
  net->graph_warmup = 0;
  return TRUE;
}

gboolean
shoal_net_cuda_graph (ShoalNet *net)
{
  g_return_val_if_fail (net != NULL, FALSE);
  return net->graph_wanted;
}

guint64
shoal_net_cuda_graph_steps (ShoalNet *net)
{
  g_return_val_if_fail (net != NULL, 0);
  return net->graph_steps;
}

void
shoal_net_gpu_release (ShoalNet *net)
{
  if (net->pinned_outs != NULL)
    {
      /* the layers' outs are views on them, never read after this */
      for (guint i = 0; i < net->pinned_outs->len; i++)
        shoal_device_host_free (net->ctx.device, g_ptr_array_index (net->pinned_outs, i));
      g_ptr_array_free (net->pinned_outs, TRUE);
      net->pinned_outs = NULL;
    }
  shoal_event_free (net->forward_done);
  net->forward_done = NULL;
  shoal_event_free (net->inputs_done);
  net->inputs_done = NULL;
  shoal_step_graph_free (net->graph);
  net->graph = NULL;
  if (net->clip_scratch != NULL)
    shoal_device_free (net->ctx.device, net->clip_scratch);
  net->clip_scratch = NULL;
}

/* Adds the downloaded gradients of the pending layers into the host
 * grads, oldest first, and hands each layer to `ready`; without `block`
 * only while their copies are done. */
static void
deliver (ShoalNet *net, GQueue *pending, gboolean block, ShoalParamsReadyFunc ready,
         gpointer user_data)
{
  while (!g_queue_is_empty (pending))
    {
      guint i = GPOINTER_TO_UINT (g_queue_peek_head (pending)) - 1;
      ShoalLayer *layer = g_ptr_array_index (net->layers, i);
      GError *error = NULL;
      if (!block && !shoal_event_done (net->downloaded[i]))
        return;
      g_queue_pop_head (pending);
      if (!shoal_event_sync (net->downloaded[i], &error))
        device_failed (net, error);
      else
        {
          size_t b, e;
          shoal_layer_param_range (layer, &b, &e);
          float *restrict g = net->store->grads + b;
          const float *restrict d = net->staging + b;
          for (size_t j = 0; j < e - b; j++)
            g[j] += d[j];
        }
      if (ready != NULL)
        ready (layer, user_data);
    }
}

void
shoal_net_gpu_backward (ShoalNet *net, ShoalParamsReadyFunc ready, gpointer user_data)
{
  ShoalStream *compute = shoal_device_context_compute (net->ctx.gpu);
  ShoalStream *copy = shoal_device_context_copy (net->ctx.gpu);
  float *dev_grads = net->store->dev_grads;
  GQueue pending = G_QUEUE_INIT;

  shoal_device_activate (net->ctx.device);
  for (guint i = net->layers->len; i-- > 0;)
    {
      ShoalLayer *layer = g_ptr_array_index (net->layers, i);
      size_t b, e;
      if (!layer->needs_grad || layer->ops->backward == NULL)
        continue;
      layer->gpu->backward (layer);
      if (shoal_layer_param_range (layer, &b, &e))
        {
          size_t bytes = (e - b) * sizeof (float);
          shoal_event_record (net->computed[i], compute);
          shoal_stream_wait (copy, net->computed[i]);
          shoal_stream_copy (copy, net->staging + b, dev_grads + b, bytes);
          shoal_stream_zero (copy, dev_grads + b, bytes);
          shoal_event_record (net->downloaded[i], copy);
          g_queue_push_tail (&pending, GUINT_TO_POINTER (i + 1));
        }
      deliver (net, &pending, FALSE, ready, user_data);
    }
  deliver (net, &pending, TRUE, ready, user_data);
  GError *error = NULL;
  if (!shoal_device_context_sync (net->ctx.gpu, &error))
    device_failed (net, error);
}

/* The device buffer of shoal_net_clip_gradients' sums. */
static gboolean
clip_scratch_ready (ShoalNet *net, GError **error)
{
  return net->clip_scratch != NULL
         || (net->clip_scratch = shoal_device_alloc (net->ctx.device, 2 * sizeof (double), error)) != NULL;
}

gboolean
shoal_net_keep_params_on_device (ShoalNet *net, GError **error)
{
  g_return_val_if_fail (net != NULL, FALSE);
  if (net->ctx.gpu == NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "params can stay on a device only in a net on a GPU");
      return FALSE;
    }
  if (net->params_resident)
    return TRUE;
  shoal_device_activate (net->ctx.device);
  if (!clip_scratch_ready (net, error))
    return FALSE;
  if (!shoal_device_context_sync (net->ctx.gpu, error)
      || !shoal_device_copy (net->store->dev_values, net->store->values, net->store->total * sizeof (float), error))
    return FALSE;
  net->params_resident = TRUE;
  net->upload_every_forward = FALSE;
  return TRUE;
}

gboolean
shoal_net_set_grads_on_device (ShoalNet *net, gboolean on, GError **error)
{
  g_return_val_if_fail (net != NULL, FALSE);
  if (on && net->ctx.gpu == NULL)
    {
      g_set_error (error, SHOAL_ERROR, SHOAL_ERROR_CONF, "gradients can stay on a device only in a net on a GPU");
      return FALSE;
    }
  if (on)
    {
      shoal_device_activate (net->ctx.device);
      if (!clip_scratch_ready (net, error))
        return FALSE;
    }
  net->grads_resident = on;
  return TRUE;
}

gboolean
shoal_net_grads_on_device (ShoalNet *net)
{
  return net->grads_resident;
}

gboolean
shoal_net_params_on_device (ShoalNet *net)
{
  return net->params_resident;
}

ShoalStream *
shoal_net_compute_stream (ShoalNet *net)
{
  return net->ctx.gpu != NULL ? shoal_device_context_compute (net->ctx.gpu) : NULL;
}

void
shoal_net_clip_gradients (ShoalNet *net, float clip_value, float clip_norm)
{
  if (net->params_resident || net->grads_resident)
    {
      shoal_device_activate (net->ctx.device);
      shoal_clip_gradients_on (shoal_device_context_compute (net->ctx.gpu), net->store->dev_grads, net->store->total,
                               clip_value, clip_norm, net->clip_scratch);
    }
  else
    shoal_clip_gradients (net->store->grads, net->store->total, clip_value, clip_norm);
}

ShoalDevice
shoal_net_device (ShoalNet *net)
{
  return net->ctx.device;
}

void
shoal_net_set_param_upload (ShoalNet *net, gboolean every_forward)
{
  net->upload_every_forward = every_forward && net->ctx.gpu != NULL;
}

void
shoal_net_upload_params (ShoalNet *net, size_t begin, size_t end)
{
  if (net->ctx.gpu == NULL || end <= begin)
    return;
  g_return_if_fail (end <= net->store->total);
  ShoalStream *copy = shoal_device_context_copy (net->ctx.gpu);
  shoal_device_activate (net->ctx.device);
  shoal_stream_copy (copy, net->store->dev_values + begin, net->store->values + begin,
                     (end - begin) * sizeof (float));
  shoal_event_record (net->manual_upload, copy);
  net->manual_pending = TRUE;
}

gboolean
shoal_net_device_error (ShoalNet *net, GError **error)
{
  if (net->device_error == NULL)
    return TRUE;
  g_propagate_error (error, g_error_copy (net->device_error));
  return FALSE;
}
