/* podplan folders: an output folder (--out DIR, --plots DIR) made with its missing parents, as
 * `mkdir -p` does, so that a command can make it before its work and fail at once when it
 * cannot. Depends on err.h. */
#ifndef PODPLAN_FS_H
#define PODPLAN_FS_H

#include "podplan/err.h"

/* Makes folder `dir` and each missing parent (mode 0777 less the umask); an existing folder
 * is fine. On failure: PP_IO (PP_INPUT for an empty name), naming the part that could not be
 * made or that is not a folder. */
int pp_mkdirs(const char *dir, pp_err *err);

#endif
