/* Loading podplan's modules (mod.h). The dynamic loader keeps what is loaded: nothing here
 * holds state of its own. */
#include "podplan/mod.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef PODPLAN_MODULE_RELDIR
#define PODPLAN_MODULE_RELDIR "../lib/podplan" /* from the executable's directory */
#endif
#ifndef PODPLAN_MODULE_INSTALL_DIR
#define PODPLAN_MODULE_INSTALL_DIR "/usr/local/lib/podplan"
#endif

/* dir of /proc/self/exe into buf; 0 when unknown */
static int exe_dir(char *buf, size_t n) {
  ssize_t len = readlink("/proc/self/exe", buf, n - 1);
  if (len <= 0) return 0;
  buf[len] = 0;
  char *slash = strrchr(buf, '/');
  if (!slash) return 0;
  *slash = 0;
  return 1;
}

int pp_mod_load(const char *file, const char *symbol, const char *version, size_t size,
                const void **out, pp_err *err) {
  char exe[PATH_MAX], dirs[4][PATH_MAX], path[PATH_MAX], tried[1024] = "";
  int ndirs = 0;
  const char *env = getenv("PODPLAN_MODULE_DIR");
  *out = NULL;
  if (env && *env) {
    if (snprintf(dirs[ndirs], PATH_MAX, "%s", env) < PATH_MAX) ndirs++;
  } else {
    if (exe_dir(exe, sizeof exe)) {
      if (snprintf(dirs[ndirs], PATH_MAX, "%s/../lib/podplan", exe) < PATH_MAX) ndirs++;
      if (strcmp(PODPLAN_MODULE_RELDIR, "../lib/podplan") != 0 &&
          snprintf(dirs[ndirs], PATH_MAX, "%s/%s", exe, PODPLAN_MODULE_RELDIR) < PATH_MAX)
        ndirs++;
    }
    if (snprintf(dirs[ndirs], PATH_MAX, "%s", PODPLAN_MODULE_INSTALL_DIR) < PATH_MAX) ndirs++;
  }
  for (int i = 0; i < ndirs; i++) {
    int n = snprintf(path, sizeof path, "%s/%s", dirs[i], file);
    if (n < 0 || n >= (int)sizeof path || access(path, F_OK) != 0) {
      size_t t = strlen(tried);
      if (t + 3 < sizeof tried) {
        n = snprintf(tried + t, sizeof tried - t, "%s%s", t ? ", " : "", dirs[i]);
        if (n < 0 || (size_t)n >= sizeof tried - t) tried[t] = 0;
      }
      continue;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!h) {
      const char *why = dlerror();
      return pp_err_set(err, PP_DEVICE, "cannot load %s: %s", path, why ? why : "dlopen failed");
    }
    const pp_mod_head *head = dlsym(h, symbol);
    if (!head)
      return pp_err_set(err, PP_DEVICE, "%s: no table '%s' (not a podplan module?)", path, symbol);
    if (strcmp(head->version, version) != 0 || head->size != size)
      return pp_err_set(err, PP_DEVICE, "%s: built for podplan %s, this is %s (rebuild it)", path,
                        head->version, version);
    *out = head;
    return PP_OK;
  }
  return pp_err_set(err, PP_DEVICE, "%s not found (looked in %s; set PODPLAN_MODULE_DIR)", file,
                    tried);
}
