/* The CUDA backend's probe: versions of the CUDA runtime, driver, cuBLAS and NCCL this build
 * links, and the GPUs visible. Compiled only when PODPLAN_CUDA is ON. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <library_types.h>
#include <nccl.h>
#include <stdio.h>
#include <string.h>

#include "podplan/be.h"

int be_cuda_probe(be_cuda_info *out, pp_err *err) {
  memset(out, 0, sizeof *out);
  if (cudaRuntimeGetVersion(&out->runtime_version) != cudaSuccess)
    return pp_err_set(err, PP_DEVICE, "cuda: cudaRuntimeGetVersion failed");
  if (cudaDriverGetVersion(&out->driver_version) != cudaSuccess) out->driver_version = 0;
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
    out->cublas_version = major * 10000 + minor * 100 + patch;
  ncclResult_t nr = ncclGetVersion(&out->nccl_version);
  if (nr != ncclSuccess)
    return pp_err_set(err, PP_DEVICE, "nccl: ncclGetVersion: %s", ncclGetErrorString(nr));
  int n = 0;
  cudaError_t ce = cudaGetDeviceCount(&n);
  (void)cudaGetLastError();
  /* no GPU: the driver sees none, or there is no driver at all (the runtime then calls it
   * insufficient). Anything else (a driver older than the runtime, a stub libcuda, a driver
   * that fails to initialise) is a broken installation, not a machine without a GPU. */
  if (ce == cudaErrorNoDevice || (ce == cudaErrorInsufficientDriver && !out->driver_version))
    return PP_OK;
  if (ce != cudaSuccess)
    return pp_err_set(err, PP_DEVICE, "cuda: cudaGetDeviceCount: %s (%s; driver %d, runtime %d)",
                      cudaGetErrorName(ce), cudaGetErrorString(ce), out->driver_version,
                      out->runtime_version);
  out->devices = n;
  if (n > 0) {
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess)
      return pp_err_set(err, PP_DEVICE, "cuda: cudaGetDeviceProperties(0) failed");
    snprintf(out->device0, sizeof out->device0, "%s", prop.name);
    out->device0_gib = (double)prop.totalGlobalMem / (1024.0 * 1024 * 1024);
  }
  return PP_OK;
}
