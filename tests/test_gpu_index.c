/* The GPU a rank picks: its node-local rank modulo the GPUs it sees, so that ranks that each
 * see only their own GPU (CUDA_VISIBLE_DEVICES, a scheduler's binding) all use index 0, and
 * ranks that see all of a node's GPUs spread over them. */
#include "check.h"
#include "podplan/be.h"

int main(void) {
  for (int lr = 0; lr < 16; lr++) {
    CHECK_EQ(be_gpu_index(lr, 8), lr % 8); /* all 8 of the node visible */
    CHECK_EQ(be_gpu_index(lr, 1), 0);      /* one GPU per rank */
  }
  CHECK_EQ(be_gpu_index(5, 4), 1); /* more ranks than GPUs: shared, wraps */
  CHECK_EQ(be_gpu_index(0, 0), -1); /* none visible */
  CHECK_EQ(be_gpu_index(-1, 8), -1);
  return check_status();
}
