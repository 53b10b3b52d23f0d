/* podplan modules: the parts of podplan with heavy dependencies (the cuda device: cuBLAS +
 * NCCL; the cpu device: OpenBLAS; the simulator: SimGrid) are shared modules loaded on demand,
 * so that commands that never use them start without them. A module exports one table named
 * by its owner (backend, sim) whose first member is a pp_mod_head. Depends on err.h. */
#ifndef PODPLAN_MOD_H
#define PODPLAN_MOD_H

#include <stddef.h>

#include "podplan/err.h"

/* A module's exported table: visible outside the module (the build hides everything else). */
#if defined(__GNUC__)
#define PP_MOD_EXPORT __attribute__((visibility("default")))
#else
#define PP_MOD_EXPORT
#endif

/* First member of every module table: the loader refuses a module of another build. */
typedef struct pp_mod_head {
  const char *version; /* PODPLAN_VERSION of the build that made it */
  size_t size;         /* sizeof the whole table */
} pp_mod_head;

/* Loads module `file` (e.g. "podplan_cuda.so") and returns its table `symbol` in *out, checking
 * its head against version and size. Looked for, in order: in $PODPLAN_MODULE_DIR when set
 * (only there), then in <dir of the executable>/../lib/podplan (the build tree and an install
 * with lib/), <dir of the executable>/<install-relative dir>, and the install directory.
 * Loaded once per process (the loader keeps it), never unloaded, with its dependencies kept
 * local to it (SimGrid's MPI_* never shadow Open MPI's). On failure: PP_DEVICE with one line
 * naming the file, where it was looked for or the loader's reason. */
int pp_mod_load(const char *file, const char *symbol, const char *version, size_t size,
                const void **out, pp_err *err);

#endif
