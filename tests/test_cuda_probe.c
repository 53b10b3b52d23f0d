/* The CUDA part of the build links and runs: CUDA runtime, cuBLAS and NCCL versions are
 * readable. Skips (77) where no GPU is visible; on a GPU machine, GPU 0 must be usable. A
 * build without CUDA must say so rather than pretend; a broken driver (anything but "no
 * driver" or "no GPU") fails instead of skipping. */
#include "check.h"
#include "podplan/be.h"

int main(void) {
  be_cuda_info ci;
  pp_err err = {0};
  int rc = be_cuda_probe(&ci, &err);
#if !PODPLAN_HAVE_CUDA
  CHECK_EQ(rc, PP_DEVICE);
  CHECK_CONTAINS(err.msg, "built without CUDA");
  CHECK_EQ(pp_exit_status(rc), 1);
  return check_status();
#else
  CHECK_EQ(rc, PP_OK);
  if (rc) {
    fprintf(stderr, "%s\n", err.msg);
    return check_status();
  }
  CHECK(ci.runtime_version >= 11000);
  CHECK(ci.nccl_version >= 21800); /* ncclCommSplit needs 2.18 */
  CHECK(ci.cublas_version > 0);
  printf("CUDA runtime %d, cuBLAS %d, NCCL %d, driver %d, %d GPU(s)\n", ci.runtime_version,
         ci.cublas_version, ci.nccl_version, ci.driver_version, ci.devices);
  if (check_status()) return 1;
  if (ci.devices == 0) {
    printf("no GPU visible: skipped\n");
    return 77;
  }
  printf("GPU 0: %s, %.1f GiB\n", ci.device0, ci.device0_gib);
  CHECK(ci.device0_gib > 1);
  CHECK(ci.driver_version > 0);
  return check_status();
#endif
}
