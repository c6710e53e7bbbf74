/* The matrix product of the GPU layers at the net's precision.
 *
 * fp32 and tf32 go through cublasSgemm (the context's cuBLAS handle
 * carries the TF32 math mode).  bf16 asks cublasGemmEx for
 * CUBLAS_COMPUTE_32F_FAST_16BF: cuBLAS may round the FP32 operands to
 * bfloat16 inside the kernel (or to TF32, where that kernel is faster)
 * and sums in FP32, so no bfloat16 copy of the weights or activations is
 * made or kept, and the FP32 values stay the master copy the updater
 * works on.  The same permission as PyTorch's
 * torch.set_float32_matmul_precision ("medium"). */
#include "gpu/gpu.h"

cublasStatus_t
shoal_gpu_gemm (const ShoalDeviceContext *ctx, cublasOperation_t op_a, cublasOperation_t op_b, int m, int n,
                int k, float alpha, const float *a, int lda, const float *b, int ldb, float beta, float *c,
                int ldc)
{
  if (!ctx->bf16)
    return cublasSgemm (ctx->blas, op_a, op_b, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc);
  return cublasGemmEx (ctx->blas, op_a, op_b, m, n, k, &alpha, a, CUDA_R_32F, lda, b, CUDA_R_32F, ldb, &beta, c,
                       CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT);
}
