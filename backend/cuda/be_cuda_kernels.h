/* The cuda device's own kernels: buffer fills (random operands, verification patterns), the
 * attention row softmax and the memory-bound op, each behind an extern "C" launcher that
 * takes a stream and returns the launch's cudaError_t. Internal to backend/cuda; depends on
 * the CUDA runtime only. */
#ifndef PODPLAN_BE_CUDA_KERNELS_H
#define PODPLAN_BE_CUDA_KERNELS_H

#include <cuda_runtime.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types of the device's buffers. */
typedef enum { BE_CUDA_BF16, BE_CUDA_FP16, BE_CUDA_FP32 } be_cuda_dt;

/* Modulus of the verification pattern: values 1..251 are exact in bf16, fp16 and fp32. */
#define BE_CUDA_PATTERN_MOD 251

/* p[i] = uniform in [-1, 1), a hash of (seed, i): never all zeros (zeros lower the power a
 * GEMM draws and flatter its speed, docs/models.md). */
cudaError_t be_cuda__fill_random(void *p, be_cuda_dt t, size_t n, unsigned long long seed,
                                 cudaStream_t s);
/* p[i] = v. */
cudaError_t be_cuda__fill_value(void *p, be_cuda_dt t, size_t n, float v, cudaStream_t s);
/* p[i] = 1 + (c0 + c1 * j) mod 251 with j = i / chunk (c0, c1 >= 0): the verification
 * pattern, small integers exact in every type. */
cudaError_t be_cuda__fill_pattern(void *p, be_cuda_dt t, size_t n, size_t chunk, int c0, int c1,
                                  cudaStream_t s);
/* In-place softmax over the first len elements of each row: nbatch batches of rows rows,
 * rows ld elements apart, batches bstride elements apart (fp32 math, 2-byte types only). */
cudaError_t be_cuda__softmax_rows(void *p, be_cuda_dt t, int nbatch, int rows, int len,
                                  long long ld, long long bstride, cudaStream_t s);
/* y[i] = 0.999 x[i] + 0.001 over n elements: reads n and writes n elements (16-byte vectors,
 * grid-stride; x and y 16-byte aligned; 2-byte types only). */
cudaError_t be_cuda__axpb(const void *x, void *y, be_cuda_dt t, size_t n, cudaStream_t s);
/* out[i] = (float)src[idx[i]] for i < n (idx and out in device memory). */
cudaError_t be_cuda__gather(const void *src, be_cuda_dt t, const long long *idx, int n,
                            float *out, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
