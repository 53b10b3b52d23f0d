// The cuda device's own kernels (see be_cuda_kernels.h): fills, the attention row softmax and
// the memory-bound op. Launchers pick the element type and return the launch's error.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "be_cuda_kernels.h"

namespace {

const int kThreads = 256;   // threads per block
const int kMaxBlocks = 8192; // grid-stride loops cover the rest

unsigned grid_for(size_t n) {
  size_t b = (n + kThreads - 1) / kThreads;
  return (unsigned)(b < 1 ? 1 : b > (size_t)kMaxBlocks ? kMaxBlocks : b);
}

template <typename T> __device__ __forceinline__ float to_f(T v);
template <> __device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> __device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_f(float v) { return v; }

template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ __nv_bfloat16 from_f(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ __half from_f(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ float from_f(float v) { return v; }

__device__ __forceinline__ uint64_t mix64(uint64_t x) { // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

template <typename T> __global__ void fill_random_k(T *p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    uint64_t h = mix64(seed ^ mix64(i));
    float u = (float)(h >> 40) * (1.0f / 16777216.0f); // 24 bits: [0, 1)
    p[i] = from_f<T>(2.0f * u - 1.0f);
  }
}

template <typename T> __global__ void fill_value_k(T *p, size_t n, float v) {
  T x = from_f<T>(v);
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    p[i] = x;
}

template <typename T>
__global__ void fill_pattern_k(T *p, size_t n, size_t chunk, int c0, int c1) {
  const long long mod = BE_CUDA_PATTERN_MOD;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    long long j = (long long)((i / chunk) % (size_t)mod);
    long long v = 1 + ((c0 % mod) + (c1 % mod) * j % mod) % mod;
    p[i] = from_f<T>((float)v);
  }
}

// One warp per row: an online max/sum pass, then a pass writing exp(x - max) / sum. VEC reads
// and writes 8 elements (16 bytes) per lane and step.
template <typename T, bool VEC>
__global__ void softmax_k(T *p, long long nrows, int rows, int len, long long ld, long long bstride) {
  const int warps = blockDim.x >> 5, lane = threadIdx.x & 31;
  long long r = (long long)blockIdx.x * warps + (threadIdx.x >> 5);
  if (r >= nrows) return; // the whole warp leaves together
  T *row = p + (r / rows) * bstride + (r % rows) * ld;
  float m = -INFINITY, sum = 0.0f;
  if (VEC) {
    for (int j = lane * 8; j < len; j += 32 * 8) {
      uint4 v = *reinterpret_cast<const uint4 *>(row + j);
      const T *e = reinterpret_cast<const T *>(&v);
#pragma unroll
      for (int q = 0; q < 8; q++) {
        float x = to_f(e[q]), nm = fmaxf(m, x);
        sum = sum * __expf(m - nm) + __expf(x - nm);
        m = nm;
      }
    }
  } else {
    for (int j = lane; j < len; j += 32) {
      float x = to_f(row[j]), nm = fmaxf(m, x);
      sum = sum * __expf(m - nm) + __expf(x - nm);
      m = nm;
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    float om = __shfl_xor_sync(0xffffffffu, m, o), os = __shfl_xor_sync(0xffffffffu, sum, o);
    float nm = fmaxf(m, om);
    sum = (m == -INFINITY ? 0.0f : sum * __expf(m - nm)) +
          (om == -INFINITY ? 0.0f : os * __expf(om - nm));
    m = nm;
  }
  const float inv = 1.0f / sum;
  if (VEC) {
    for (int j = lane * 8; j < len; j += 32 * 8) {
      uint4 v = *reinterpret_cast<const uint4 *>(row + j);
      T *e = reinterpret_cast<T *>(&v);
#pragma unroll
      for (int q = 0; q < 8; q++) e[q] = from_f<T>(__expf(to_f(e[q]) - m) * inv);
      *reinterpret_cast<uint4 *>(row + j) = v;
    }
  } else {
    for (int j = lane; j < len; j += 32) row[j] = from_f<T>(__expf(to_f(row[j]) - m) * inv);
  }
}

// y = 0.999 x + 0.001 (a bias-dropout-add-like elementwise op): 16-byte vectors, then the tail.
template <typename T> __global__ void axpb_k(const T *x, T *y, size_t n) {
  const size_t nv = n / 8, stride = (size_t)gridDim.x * blockDim.x;
  const size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  const uint4 *xv = reinterpret_cast<const uint4 *>(x);
  uint4 *yv = reinterpret_cast<uint4 *>(y);
  for (size_t i = tid; i < nv; i += stride) {
    uint4 v = xv[i];
    T *e = reinterpret_cast<T *>(&v);
#pragma unroll
    for (int q = 0; q < 8; q++) e[q] = from_f<T>(0.999f * to_f(e[q]) + 0.001f);
    yv[i] = v;
  }
  for (size_t i = nv * 8 + tid; i < n; i += stride) y[i] = from_f<T>(0.999f * to_f(x[i]) + 0.001f);
}

template <typename T> __global__ void gather_k(const T *src, const long long *idx, int n, float *out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = to_f(src[idx[i]]);
}

} // namespace

extern "C" cudaError_t be_cuda__fill_random(void *p, be_cuda_dt t, size_t n,
                                            unsigned long long seed, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  unsigned g = grid_for(n);
  switch (t) {
  case BE_CUDA_BF16: fill_random_k<<<g, kThreads, 0, s>>>((__nv_bfloat16 *)p, n, seed); break;
  case BE_CUDA_FP16: fill_random_k<<<g, kThreads, 0, s>>>((__half *)p, n, seed); break;
  case BE_CUDA_FP32: fill_random_k<<<g, kThreads, 0, s>>>((float *)p, n, seed); break;
  default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

extern "C" cudaError_t be_cuda__fill_value(void *p, be_cuda_dt t, size_t n, float v,
                                           cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  unsigned g = grid_for(n);
  switch (t) {
  case BE_CUDA_BF16: fill_value_k<<<g, kThreads, 0, s>>>((__nv_bfloat16 *)p, n, v); break;
  case BE_CUDA_FP16: fill_value_k<<<g, kThreads, 0, s>>>((__half *)p, n, v); break;
  case BE_CUDA_FP32: fill_value_k<<<g, kThreads, 0, s>>>((float *)p, n, v); break;
  default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

extern "C" cudaError_t be_cuda__fill_pattern(void *p, be_cuda_dt t, size_t n, size_t chunk,
                                             int c0, int c1, cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  if (chunk == 0 || c0 < 0 || c1 < 0) return cudaErrorInvalidValue;
  unsigned g = grid_for(n);
  switch (t) {
  case BE_CUDA_BF16: fill_pattern_k<<<g, kThreads, 0, s>>>((__nv_bfloat16 *)p, n, chunk, c0, c1); break;
  case BE_CUDA_FP16: fill_pattern_k<<<g, kThreads, 0, s>>>((__half *)p, n, chunk, c0, c1); break;
  case BE_CUDA_FP32: fill_pattern_k<<<g, kThreads, 0, s>>>((float *)p, n, chunk, c0, c1); break;
  default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

extern "C" cudaError_t be_cuda__softmax_rows(void *p, be_cuda_dt t, int nbatch, int rows, int len,
                                             long long ld, long long bstride, cudaStream_t s) {
  if (nbatch <= 0 || rows <= 0 || len <= 0) return cudaSuccess;
  if (ld < len || (nbatch > 1 && bstride < (long long)rows * ld)) return cudaErrorInvalidValue;
  const long long nrows = (long long)nbatch * rows;
  const int warps = kThreads / 32;
  const long long blocks = (nrows + warps - 1) / warps;
  if (blocks > 0x7fffffffLL) return cudaErrorInvalidConfiguration;
  const bool vec = len % 8 == 0 && ld % 8 == 0 && bstride % 8 == 0 && ((uintptr_t)p & 15) == 0;
  switch (t) {
  case BE_CUDA_BF16:
    if (vec) softmax_k<__nv_bfloat16, true><<<(unsigned)blocks, kThreads, 0, s>>>((__nv_bfloat16 *)p, nrows, rows, len, ld, bstride);
    else softmax_k<__nv_bfloat16, false><<<(unsigned)blocks, kThreads, 0, s>>>((__nv_bfloat16 *)p, nrows, rows, len, ld, bstride);
    break;
  case BE_CUDA_FP16:
    if (vec) softmax_k<__half, true><<<(unsigned)blocks, kThreads, 0, s>>>((__half *)p, nrows, rows, len, ld, bstride);
    else softmax_k<__half, false><<<(unsigned)blocks, kThreads, 0, s>>>((__half *)p, nrows, rows, len, ld, bstride);
    break;
  default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

extern "C" cudaError_t be_cuda__axpb(const void *x, void *y, be_cuda_dt t, size_t n,
                                     cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  if ((((uintptr_t)x | (uintptr_t)y) & 15) != 0) return cudaErrorMisalignedAddress;
  unsigned g = grid_for((n + 7) / 8);
  switch (t) {
  case BE_CUDA_BF16: axpb_k<<<g, kThreads, 0, s>>>((const __nv_bfloat16 *)x, (__nv_bfloat16 *)y, n); break;
  case BE_CUDA_FP16: axpb_k<<<g, kThreads, 0, s>>>((const __half *)x, (__half *)y, n); break;
  default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

extern "C" cudaError_t be_cuda__gather(const void *src, be_cuda_dt t, const long long *idx, int n,
                                       float *out, cudaStream_t s) {
  if (n <= 0) return cudaSuccess;
  unsigned g = (unsigned)((n + kThreads - 1) / kThreads);
  switch (t) {
  case BE_CUDA_BF16: gather_k<<<g, kThreads, 0, s>>>((const __nv_bfloat16 *)src, idx, n, out); break;
  case BE_CUDA_FP16: gather_k<<<g, kThreads, 0, s>>>((const __half *)src, idx, n, out); break;
  case BE_CUDA_FP32: gather_k<<<g, kThreads, 0, s>>>((const float *)src, idx, n, out); break;
  default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}
