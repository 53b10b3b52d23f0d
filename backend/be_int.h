/* Backend internals shared by its files (not installed). */
#ifndef PODPLAN_BE_INT_H
#define PODPLAN_BE_INT_H

#include "podplan/be.h"
#include "podplan/mod.h"

extern const be_device be_cpu_device;  /* in the module podplan_cpu.so */
extern const be_device be_cuda_device; /* in the module podplan_cuda.so */

/* What a device module exports as BE_MOD_SYMBOL (be_devices.c loads it when the device is
 * opened or probed; the module's entry file defines it). */
typedef struct be_device_module {
  pp_mod_head head;        /* {PODPLAN_VERSION, sizeof(be_device_module)} */
  const be_device *device; /* the device's table */
  int (*cuda_probe)(be_cuda_info *out, pp_err *err); /* cuda: be_cuda_probe; else NULL */
} be_device_module;
#define BE_MOD_SYMBOL "podplan_device_module"

#endif
