/* The CUDA backend's updater entries (core/device_backend.h: update,
 * clip): core/updater.h's resolved scalars into the kernels of
 * kernels_update.cu, on the caller's stream.  Like every enqueue of the
 * backend, a failed launch is logged here and surfaces again at the
 * stream's next synchronisation. */
#include "gpu/graph.h"

static ShoalKRule
rule_of (const ShoalUpdateScalars *k)
{
  switch (k->kind)
    {
    case SHOAL_UPDATER_SGD:
      return k->momentum ? SHOAL_K_MOMENTUM : SHOAL_K_SGD;
    case SHOAL_UPDATER_NESTEROV:
      return SHOAL_K_NESTEROV;
    case SHOAL_UPDATER_ADAGRAD:
      return SHOAL_K_ADAGRAD;
    case SHOAL_UPDATER_RMSPROP:
      return SHOAL_K_RMSPROP;
    case SHOAL_UPDATER_ADADELTA:
      return SHOAL_K_ADADELTA;
    case SHOAL_UPDATER_ADAM:
    case SHOAL_UPDATER_COUNT:
      break;
    }
  return SHOAL_K_ADAM;
}

void
shoal_gpu_launch_failed (const char *what, cudaError_t status)
{
  if (status != cudaSuccess && shoal_gpu_step_capturing ())
    cudaGetLastError ();   /* the capture's end reports it */
  else if (status != cudaSuccess)
    {
      g_critical ("%s: %s", what, cudaGetErrorString (status));
      cudaGetLastError ();
    }
}

void
shoal_cuda_update (ShoalStream *stream, const ShoalUpdateScalars *k, float *value, float *grad,
                   float *state_a, float *state_b, size_t n, gboolean clear_grad)
{
  ShoalKUpdate ku = {
    .rule = rule_of (k), .lr = k->lr, .wd = k->wd, .mom = k->mom, .rho = k->rho, .eps = k->eps,
    .b1 = k->b1, .b2 = k->b2, .lr_c = k->lr_c, .rs = k->rs,
  };
  /* a step graph's capture or replay takes it (gpu/graph.c) */
  if (shoal_gpu_step_update ((cudaStream_t) stream, &ku, value, grad, state_a, state_b, n, clear_grad ? 1 : 0))
    return;
  shoal_gpu_launch_failed ("update kernel", shoal_k_update (&ku, value, grad, state_a, state_b, n, clear_grad ? 1 : 0,
                                                            (cudaStream_t) stream));
}

void
shoal_cuda_clip (ShoalStream *stream, float *grad, size_t n, float clip_value, float clip_norm, double *scratch)
{
  shoal_gpu_step_other ("clipping");
  shoal_gpu_launch_failed ("clip kernels",
                           shoal_k_clip (grad, n, clip_value, clip_norm, scratch, (cudaStream_t) stream));
}
