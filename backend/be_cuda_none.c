/* The CUDA probe of a build without CUDA. */
#include <string.h>

#include "podplan/be.h"

int be_cuda_probe(be_cuda_info *out, pp_err *err) {
  memset(out, 0, sizeof *out);
  return pp_err_set(err, PP_DEVICE, "cuda: built without CUDA (PODPLAN_CUDA=OFF or toolkit/NCCL not found)");
}
