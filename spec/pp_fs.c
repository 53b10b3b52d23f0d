/* Output folders made with their parents (fs.h). */
#include "podplan/fs.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

/* Makes one folder; an existing folder is fine, an existing file is not. */
static int mkdir_one(const char *path, const char *dir, pp_err *err) {
  struct stat sb;
  if (mkdir(path, 0777) == 0) return PP_OK;
  int e = errno;
  if (e == EEXIST && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return PP_OK;
  if (e == EEXIST) return pp_err_set(err, PP_IO, "%s: cannot create the folder: %s is not a folder",
                                     dir, path);
  if (strcmp(path, dir) == 0)
    return pp_err_set(err, PP_IO, "%s: cannot create the folder: %s", dir, strerror(e));
  return pp_err_set(err, PP_IO, "%s: cannot create the folder %s: %s", dir, path, strerror(e));
}

int pp_mkdirs(const char *dir, pp_err *err) {
  char path[4096];
  size_t n = dir ? strlen(dir) : 0;
  if (n == 0) return pp_err_set(err, PP_INPUT, "an output folder's name is empty");
  if (n >= sizeof path) return pp_err_set(err, PP_IO, "%.64s...: the folder's name is too long", dir);
  memcpy(path, dir, n + 1);
  while (n > 1 && path[n - 1] == '/') path[--n] = '\0'; /* "out/" is "out" */
  for (char *p = path + 1; *p; p++) {
    if (*p != '/' || p[-1] == '/') continue;
    *p = '\0';
    int rc = mkdir_one(path, dir, err);
    *p = '/';
    if (rc) return rc;
  }
  return mkdir_one(path, dir, err);
}
