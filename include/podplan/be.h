/* podplan backend: runs a plan's iteration for real on devices behind one interface (cpu:
 * MPI + OpenBLAS, always built; cuda: NCCL + cuBLAS, built when the toolkit and NCCL are
 * found). So far it reports what the CUDA side of this build links and sees. Depends on
 * err.h; never includes CUDA headers. */
#ifndef PODPLAN_BE_H
#define PODPLAN_BE_H

#include "podplan/err.h"

/* What the CUDA part of this build links against and which GPUs it sees. */
typedef struct be_cuda_info {
  int runtime_version; /* CUDA runtime linked, e.g. 13000 for 13.0 */
  int driver_version;  /* CUDA driver present; 0 when none is installed */
  int cublas_version;  /* cuBLAS, e.g. 130100 for 13.1.0 */
  int nccl_version;    /* NCCL, e.g. 22809 for 2.28.9 */
  int devices;         /* visible GPUs (0 without a driver or a GPU) */
  char device0[256];   /* name of GPU 0, "" when none */
  double device0_gib;  /* memory of GPU 0, GiB */
} be_cuda_info;

/* Fills *out. Without CUDA in the build: PP_DEVICE "built without CUDA". No GPU is not an
 * error: devices is 0. */
int be_cuda_probe(be_cuda_info *out, pp_err *err);

#endif
