/* Plots of the studies and reports with gnuplot (study.h): the caller writes the data files
 * and the body of a script; this file adds the terminal and the output twice (PNG, then SVG),
 * writes DIR/NAME.gp and runs gnuplot on it (posix_spawnp: no shell). */
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "podplan/study.h"

extern char **environ;

static int run_gnuplot(const char *script, pp_err *err) {
  char *argv[] = {"gnuplot", (char *)script, NULL};
  pid_t pid;
  int st = posix_spawnp(&pid, "gnuplot", NULL, NULL, argv, environ);
  if (st) return pp_err_set(err, PP_IO, "plots: cannot run gnuplot: %s", strerror(st));
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return pp_err_set(err, PP_IO, "plots: waiting for gnuplot: %s", strerror(errno));
  if (!WIFEXITED(status) || WEXITSTATUS(status))
    return pp_err_set(err, PP_IO, "plots: gnuplot failed on %s (exit %d)", script,
                      WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return PP_OK;
}

int study_plot(const char *dir, const char *name, int width, int height, const char *body,
               pp_err *err) {
  char gp[4096];
  snprintf(gp, sizeof gp, "%s/%s.gp", dir, name);
  FILE *f = fopen(gp, "w");
  if (!f) return pp_err_set(err, PP_IO, "%s: cannot write: %s", gp, strerror(errno));
  static const struct {
    const char *ext, *term;
  } terms[] = {{"png", "pngcairo size %d,%d font 'sans,11'"},
               {"svg", "svg size %d,%d dynamic font 'sans,11'"}};
  for (size_t t = 0; t < sizeof terms / sizeof terms[0]; t++) {
    fputs("reset\nset terminal ", f);
    fprintf(f, terms[t].term, width, height);
    fprintf(f, "\nset output '%s/%s.%s'\n%s\nunset output\n", dir, name, terms[t].ext, body);
  }
  if (fclose(f)) return pp_err_set(err, PP_IO, "%s: cannot write: %s", gp, strerror(errno));
  return run_gnuplot(gp, err);
}

void study_plot_quote(const char *in, char *out, size_t n) {
  size_t k = 0;
  for (; *in && k + 1 < n; in++) out[k++] = (*in == '\'' || *in == '\\') ? ' ' : *in;
  if (n) out[k] = '\0';
}
