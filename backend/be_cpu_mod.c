/* The module podplan_cpu.so: the cpu device (OpenBLAS + MPI), loaded by be_devices.c. */
#include "be_int.h"

PP_MOD_EXPORT const be_device_module podplan_device_module = {
    {PODPLAN_VERSION, sizeof(be_device_module)}, &be_cpu_device, NULL};
