/* Plots of a calibration with gnuplot (cal.h): measured against predicted before and after
 * (log-log, the line y = x), and the residuals against what sets each measurement's size
 * (message bytes, GEMM FLOPs, a run's published time). gnuplot draws; this file writes its data
 * and script and runs it (posix_spawnp: no shell), once for PNG and once for SVG. */
#include <errno.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "podplan/cal.h"

extern char **environ;

/* What a residual is plotted against, and its axis label. */
static double size_of(const cal_obs *o) {
  switch (o->kind) {
  case CAL_COLL: return o->bytes;
  case CAL_GEMM: return 2 * o->m * o->n * o->k * (o->batch > 1 ? o->batch : 1);
  case CAL_OP: return o->lop == CM_LOP_MEM ? o->bytes : 4 * o->m * o->n * o->k * o->batch;
  default: return o->time_s;
  }
}

static const char *const size_label[CAL_NKINDS] = {"message size (bytes)", "GEMM FLOPs",
                                                   "attention FLOPs or memory-bound bytes",
                                                   "measured iteration time (s)"};

static int write_data(const char *path, const cal_result *r, const cal_obs *obs, pp_err *err) {
  FILE *f = fopen(path, "w");
  if (!f) return pp_err_set(err, PP_IO, "%s: cannot write: %s", path, strerror(errno));
  fprintf(f, "# size measured_s before_s after_s held kind\n");
  for (size_t i = 0; i < r->nobs; i++)
    fprintf(f, "%.9g %.9g %.9g %.9g %d %d\n", size_of(&obs[i]), obs[i].time_s, r->before[i],
            r->after[i], r->held[i], (int)obs[i].kind);
  if (fclose(f)) return pp_err_set(err, PP_IO, "%s: cannot write: %s", path, strerror(errno));
  return PP_OK;
}

/* The script for one terminal ("pngcairo size 900,700" or "svg size 900,700"). */
static int write_script(const char *path, const char *dat, const char *out_fit,
                        const char *out_res, const char *term, const char *title,
                        const char *xlabel, pp_err *err) {
  char t[256];
  snprintf(t, sizeof t, "%s", title);
  for (char *c = t; *c; c++)
    if (*c == '\'' || *c == '\\') *c = ' '; /* inside gnuplot's single quotes */
  title = t;
  FILE *f = fopen(path, "w");
  if (!f) return pp_err_set(err, PP_IO, "%s: cannot write: %s", path, strerror(errno));
  fprintf(f,
          "set terminal %s\n"
          "set datafile commentschars '#'\n"
          "set grid\nset key top left\n"
          "set output '%s'\n"
          "set title '%s: predicted against measured'\n"
          "set logscale xy\nset format x '10^{%%L}'\nset format y '10^{%%L}'\n"
          "set xlabel 'measured (s)'\nset ylabel 'predicted (s)'\n"
          "plot '%s' using 2:3 with points pt 6 lc rgb '#999999' title 'before', \\\n"
          "     '' using 2:($5 == 0 ? $4 : 1/0) with points pt 7 lc rgb '#1f77b4' title 'after (fitted)', \\\n"
          "     '' using 2:($5 == 1 ? $4 : 1/0) with points pt 9 lc rgb '#d62728' title 'after (held out)', \\\n"
          "     x with lines lc rgb 'black' dt 2 title 'y = x'\n"
          "set output '%s'\n"
          "set title '%s: error by size'\n"
          "unset logscale y\nset format y '%%g'\n"
          "set xlabel '%s'\nset ylabel 'predicted / measured - 1 (%%)'\n"
          "plot '%s' using 1:(100*($3/$2-1)) with points pt 6 lc rgb '#999999' title 'before', \\\n"
          "     '' using 1:($5 == 0 ? 100*($4/$2-1) : 1/0) with points pt 7 lc rgb '#1f77b4' title 'after (fitted)', \\\n"
          "     '' using 1:($5 == 1 ? 100*($4/$2-1) : 1/0) with points pt 9 lc rgb '#d62728' title 'after (held out)', \\\n"
          "     0 with lines lc rgb 'black' dt 2 notitle\n",
          term, out_fit, title, dat, out_res, title, xlabel, dat);
  if (fclose(f)) return pp_err_set(err, PP_IO, "%s: cannot write: %s", path, strerror(errno));
  return PP_OK;
}

static int run_gnuplot(const char *script, pp_err *err) {
  char *argv[] = {"gnuplot", (char *)script, NULL};
  pid_t pid;
  int st = posix_spawnp(&pid, "gnuplot", NULL, NULL, argv, environ);
  if (st) return pp_err_set(err, PP_IO, "plots: cannot run gnuplot: %s", strerror(st));
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return pp_err_set(err, PP_IO, "plots: waiting for gnuplot: %s", strerror(errno));
  if (!WIFEXITED(status) || WEXITSTATUS(status))
    return pp_err_set(err, PP_IO, "plots: gnuplot failed on %s (exit %d)", script,
                      WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return PP_OK;
}

int cal_plots(const char *dir, const char *tag, const char *title, const cal_result *r,
              const cal_obs *obs, pp_err *err) {
  char dat[4096], gp[4096], fit[4096], res[4096];
  int kind = (int)obs[0].kind, mixed = 0;
  for (size_t i = 1; i < r->nobs; i++) mixed |= (int)obs[i].kind != kind;
  snprintf(dat, sizeof dat, "%s/%s.dat", dir, tag);
  int rc = write_data(dat, r, obs, err);
  static const struct {
    const char *ext, *term;
  } terms[] = {{"png", "pngcairo size 900,700 font 'sans,11'"},
               {"svg", "svg size 900,700 dynamic font 'sans,11'"}};
  for (size_t t = 0; !rc && t < sizeof terms / sizeof terms[0]; t++) {
    snprintf(gp, sizeof gp, "%s/%s-%s.gp", dir, tag, terms[t].ext);
    snprintf(fit, sizeof fit, "%s/%s-fit.%s", dir, tag, terms[t].ext);
    snprintf(res, sizeof res, "%s/%s-residuals.%s", dir, tag, terms[t].ext);
    rc = write_script(gp, dat, fit, res, terms[t].term, title,
                      mixed ? "message bytes, GEMM FLOPs" : size_label[kind], err);
    if (!rc) rc = run_gnuplot(gp, err);
  }
  return rc;
}
