/* What src/gpu/kernels_codec.h takes from the CUDA runtime, for
 * test/e2e/codec_kernels.sh, which runs kernels_codec.cu on the host
 * (cuda_emulation.h) where there is no CUDA toolkit. */
#ifndef SHOAL_TEST_CUDA_SHIM_H
#define SHOAL_TEST_CUDA_SHIM_H

typedef enum { cudaSuccess = 0, cudaErrorInvalidValue = 1 } cudaError_t;
typedef enum { cudaMemcpyDeviceToDevice = 3 } cudaMemcpyKind;
typedef struct CUstream_st *cudaStream_t;

#endif
