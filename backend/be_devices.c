/* The devices of this build, by name. */
#include <string.h>

#include "be_int.h"

static const be_device *const devices[] = {
    &be_cpu_device,
#ifdef PODPLAN_HAVE_CUDA
    &be_cuda_device,
#endif
};

const be_device *be_device_find(const char *name) {
  for (size_t i = 0; i < sizeof devices / sizeof devices[0]; i++)
    if (name && strcmp(devices[i]->name, name) == 0) return devices[i];
  return NULL;
}

const char *be_device_names(void) {
#ifdef PODPLAN_HAVE_CUDA
  return "cpu, cuda";
#else
  return "cpu";
#endif
}
