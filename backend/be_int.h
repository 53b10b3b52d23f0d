/* Backend internals shared by its files (not installed). */
#ifndef PODPLAN_BE_INT_H
#define PODPLAN_BE_INT_H

#include "podplan/be.h"

extern const be_device be_cpu_device;
#ifdef PODPLAN_HAVE_CUDA
extern const be_device be_cuda_device;
#endif

#endif
