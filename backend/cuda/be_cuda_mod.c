/* The module podplan_cuda.so: the cuda device and its probe (CUDA runtime, cuBLAS, NCCL),
 * loaded by be_devices.c when the device is opened or probed. */
#include "../be_int.h"

PP_MOD_EXPORT const be_device_module podplan_device_module = {
    {PODPLAN_VERSION, sizeof(be_device_module)}, &be_cuda_device, be_cuda_probe};
