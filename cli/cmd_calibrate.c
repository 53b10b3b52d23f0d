/* podplan calibrate: the options of the calibration jobs (study/study_calib.c: the fit of a
 * cluster's stored measurements, the funnel's last step from a search, the fit of published
 * runs) and the printing of their results; --show prints a stored calibration. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#ifdef PODPLAN_GSL
#include "podplan/cal.h"
#include "podplan/fs.h"
#include "podplan/study.h"
#endif

static const char usage[] =
    "usage: podplan calibrate --cluster C [--gpus N] [--db F] [--kind coll|gemm|iter]\n"
    "                         [--fit NAME,NAME...] [--holdout F|plans] [--seed S] [--robust]\n"
    "                         [--prior-noise auto|off|S] [--plots DIR] [--json]\n"
    "       podplan calibrate --from-search RUN --launch CMD [--top K] [--spread]\n"
    "                         [--device cpu|cuda] [--layers L] [--shrink W] [--iters N]\n"
    "                         [--holdout F|plans] [--fit ...] [--seed S] [--plots DIR] [--db F]\n"
    "                         [--prior-noise auto|off|S] [--json]\n"
    "       podplan calibrate --runs F.csv [--folds K] [--fit NAME,...] [--seed S] [--robust]\n"
    "                         [--prior-noise auto|off|S] [--plots DIR] [--db F] [--json]\n"
    "       podplan calibrate --show ID [--db F] [--json]\n"
    "\n"
    "Fits the cost model's parameters to the measurements stored for the cluster (every size of\n"
    "it): collectives imported from nccl-tests logs or measured by `bench coll` (bandwidth\n"
    "efficiency per level, NVLS efficiency and cap, each algorithm's ramp and latency), GEMMs\n"
    "of `bench gemm` and of `podplan run` (GEMM efficiency, k-loop, kernel overhead), a run's\n"
    "attention (the forward, and the whole backward) and memory-bound ops (attention and\n"
    "memory-bound efficiency) and its iteration time (all of these, priced as the backend runs\n"
    "it: nothing overlapped), with GSL's nonlinear least squares on log(predicted /\n"
    "measured). A run's ops of one shape count once (their mean). CPU measurements inform\n"
    "only a cluster of CPU ranks (cpu-host), GPU ones only GPUs. A parameter no measurement\n"
    "informs keeps its value and is listed as such; one the measurements leave uncertain by\n"
    "more than a factor e is flagged undetermined (back at its prior where the rest then fits\n"
    "as well, else kept where the fit put it).\n"
    "The fit is regularised toward the priors (each parameter's validated error band, weighed\n"
    "against measurements of log noise S, chosen by cross-validation among 0, 0.3, 0.1 and\n"
    "0.03 unless --prior-noise says). A fit that predicts what it did not see (the folds, or the\n"
    "held-out measurements) worse than the priors do is stored flagged and never taken as\n"
    "`--calibration latest`; the measurements that drove it most are named.\n"
    "Prints each fitted value with its uncertainty and the error before and after (fitted,\n"
    "held out, per kind, collectives by size; each run's plan with Kendall's tau), and stores\n"
    "the calibration with its inputs and residuals. A run's collectives count with their own\n"
    "time (without the members' waiting for the last one). Left out and counted: collectives\n"
    "of a run without it or on groups placed otherwise, a backward attention without its\n"
    "score product, p2p messages.\n"
    "\n"
    "With --from-search, first runs plans of a stored search on the backend, one after another\n"
    "as `CMD podplan run --plan-id ID ... --json` (e.g. --launch \"mpirun -n 4\"), then fits\n"
    "the measurements of these runs alone and prints each plan measured, before and after: the\n"
    "funnel's last step (search -> run -> calibrate). The search's cluster must be of the\n"
    "device's ranks (cpu-host for --device cpu).\n"
    "\n"
    "With --runs, fits constants every run shares (GEMM, attention and memory-bound efficiency,\n"
    "NVLink and NIC efficiency; never one per run) to the iteration times of published runs in\n"
    "the format of benchmarks/data/published_runs.csv, each run with its own model, cluster,\n"
    "plan and settings: prints per source the error before, after (in-sample) and\n"
    "cross-validated (K folds), the rows kept aside (set holdout) before and after, never\n"
    "fitted, and Kendall's tau per set of runs of one model; stores the calibration once per\n"
    "cluster of the fitted runs.\n"
    "\n";

/* The options: getopt's table and the help's text. */
static const cli_opt opts[] = {
    {"cluster", "C", 'c', "the cluster (preset, JSON or file) whose measurements to fit"},
    {"gpus", "N", 'g', "its size (default: the largest group measured)"},
    {"db", "F", 'd', "store file (default podplan.db)"},
    {"kind", "K", 'k', "only measurements of kind coll or gemm, or only runs' iterations (iter)"},
    {"fit", "LIST", 'f', "only these parameters (names of `predict --param`)"},
    {"holdout", "F", 'H',
     "fraction of the measurements kept out of the fit (0 .. 0.9), to report\n"
     "the error on them before and after; 'plans': a third of the runs, every\n"
     "measurement of them"},
    {"seed", "S", 's', "which ones (default 1)"},
    {"robust", NULL, 'r', "Cauchy weights: outliers count less"},
    {"prior-noise", "S", 'P',
     "regularisation toward the priors: auto (default: chosen by cross-\n"
     "validation), off, or the measurements' noise in log the bands are\n"
     "weighed against (e.g. 0.1)"},
    {"plots", "DIR", 'G',
     "also draw with gnuplot (PNG and SVG): predicted against measured before\n"
     "and after, and the error by size (calibration-ID-*.png|svg); DIR\n"
     "is made with its missing parents"},
    {"from-search", "RUN", 'X', "run plans of search run RUN (its id in the store) first"},
    {"launch", "CMD", 'L', "the launcher, split at blanks (no shell), e.g. \"mpirun -n 2\""},
    {"top", "K", 'K', "the K fastest plans of the run (default 12, at most 256)"},
    {"spread", NULL, 'p',
     "K plans spread evenly over the run's stored ranking instead (search\n"
     "with a large --top), first and last included"},
    {"device", "D", 'D', "cpu or cuda (default: cpu for a cluster of CPU ranks, else cuda)"},
    {"layers", "L", 'l', "run fewer layers (podplan run's)"},
    {"shrink", "W", 'W', "a narrower model (podplan run's)"},
    {"iters", "N", 'n', "timed iterations per run (default 3)"},
    {"runs", "F", 'R', "published runs (CSV) instead of stored measurements"},
    {"folds", "K", 'F', "cross-validation folds for --runs (default 5)"},
    {"show", "ID", 'S', "print stored calibration ID"},
    {"json", NULL, 'j',
     "calibration_id, measurements, params_fitted (name: value, sigma, prior),\n"
     "not_informed, undetermined, mape_before/after, bias_before/after,\n"
     "holdout_mape_before/after, rms_log_before/after, collectives_by_size,\n"
     "by_kind, skipped, merged, folded, prior_noise, cv_rms_log(_prior),\n"
     "worse_than_prior, drivers; with runs: plans,\n"
     "kendall_tau_before/after, holdout_kendall_tau_before/after; with\n"
     "--runs calibration_ids, by_source, ranking (docs/cli.md lists them)"},
    {"help", NULL, 'h', "this text"},
};
#define NOPTS (sizeof opts / sizeof opts[0])

static const char *const CMD = "calibrate";

#ifndef PODPLAN_GSL
int cmd_calibrate(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      fputs(usage, stdout);
      cli_opts_help(stdout, opts, NOPTS, 15);
      return 0;
    }
  fprintf(stderr, "podplan %s: built without GSL (libgsl-dev; cmake -DPODPLAN_GSL=ON)\n", CMD);
  return 1;
}
#else

typedef struct cal_args {
  const char *cluster;
  int gpus, json, show;
  study_cal_opts o;
} cal_args;

/* The fitted parameters (name -> value, sigma, prior, undetermined); the names of those not
 * informed (kept at their prior) and of those undetermined (at their prior or not) into the
 * two arrays. */
static json_t *params_fitted_json(const cal_result *r, json_t **not_informed, json_t **undet) {
  json_t *o = json_object();
  *not_informed = json_array(), *undet = json_array();
  for (size_t j = 0; j < r->nparams; j++) {
    const cal_param *q = &r->params[j];
    if (q->informed)
      json_object_set_new(o, q->name, json_pack("{s:f, s:f, s:f, s:b}", "value", q->value,
                                                "sigma", q->sigma, "prior", q->prior,
                                                "undetermined", q->undetermined));
    if (q->undetermined || !q->informed)
      json_array_append_new(q->undetermined ? *undet : *not_informed, json_string(q->name));
  }
  return o;
}

/* "<label>a, b, c" of the parameters left at their prior, undetermined or not as asked. */
static void print_unfitted(const cal_result *r, int undet, const char *label) {
  int first = 1;
  for (size_t j = 0; j < r->nparams; j++)
    if (!r->params[j].informed && r->params[j].undetermined == undet) {
      printf("%s%s", first ? label : ", ", r->params[j].name);
      first = 0;
    }
  if (!first) putchar('\n');
}

/* The table of fitted parameters, the undetermined ones marked. */
static void print_params(const cal_result *r) {
  printf("  %-20s %14s %14s %12s\n", "parameter", "prior", "fitted", "sigma");
  for (size_t j = 0; j < r->nparams; j++)
    if (r->params[j].informed)
      printf("  %-20s %14.6g %14.6g %12.3g%s\n", r->params[j].name, r->params[j].prior,
             r->params[j].value, r->params[j].sigma,
             r->params[j].undetermined ? "  undetermined (kept where the fit put it)" : "");
}

static json_t *num_or_null(double v) { return isnan(v) ? json_null() : json_real(v); }

/* The regularisation used, the flag and the drivers (obs ids, named `what`). */
static void print_regularised(const cal_result *r, const cal_obs *obs, const char *what) {
  if (r->prior_noise > 0 && r->cv_error > 0)
    printf("  regularised toward the priors: noise %g in log, chosen by cross-validation (RMS "
           "log %.4f; the priors' %.4f)\n", r->prior_noise, r->cv_error, r->cv_error_prior);
  else if (r->prior_noise > 0)
    printf("  regularised toward the priors: noise %g in log\n", r->prior_noise);
  else if (r->cv_error > 0)
    printf("  not regularised: the plain fit cross-validates best (RMS log %.4f; the priors' "
           "%.4f)\n", r->cv_error, r->cv_error_prior);
  if (r->ndrivers) {
    printf("  drivers (Cook's distance):");
    for (int k = 0; k < r->ndrivers; k++)
      printf("%s %s %lld (%.3g)", k ? "," : "", what, (long long)obs[r->driver[k]].id,
             r->driver_cook[k]);
    putchar('\n');
  }
  if (r->worse)
    printf("  warning: this fit predicts measurements it did not see worse than the priors do; "
           "stored flagged: `--calibration latest` passes it over (name its id to use it)\n");
}

static void print_plans(const study_cal_job *j) {
  const cal_result *r = &j->r;
  printf("  %-6s %10s %10s %10s %16s %-8s %s\n", "id", "measured", "before", "after",
         "error b -> a", "", "plan");
  for (size_t i = 0; i < j->n; i++) {
    int k = j->run_of[i];
    if (k < 0) continue;
    double m = j->obs[i].time_s;
    printf("  %-6lld %9.4fs %9.4fs %9.4fs %+6.1f%% %+6.1f%% %-8s %s\n",
           (long long)j->runs[k].plan_id, m, r->before[i], r->after[i],
           100 * (r->before[i] / m - 1), 100 * (r->after[i] / m - 1), r->held[i] ? "held" : "",
           j->specs[k].plan_text);
  }
  const spec_model *mr = &j->specs[j->run_of[j->n - 1]].m;
  printf("  model as run: %s (%d layers, hidden %d; `run --layers/--shrink` reduce it)\n",
         mr->name, mr->layers, mr->hidden);
  if (!isnan(j->tau_before))
    printf("  Kendall's tau, predicted vs measured iteration: %+.2f -> %+.2f over %d runs",
           j->tau_before, j->tau_after, j->nplans);
  if (!isnan(j->held_tau_before))
    printf("; held out %+.2f -> %+.2f", j->held_tau_before, j->held_tau_after);
  if (!isnan(j->tau_before)) putchar('\n');
}

static void print_fit(const study_cal_job *j, const char *db) {
  const cal_result *r = &j->r;
  const spec_cluster *c = &j->cluster;
  size_t nk[CAL_NKINDS] = {0};
  for (size_t i = 0; i < j->n; i++) nk[j->obs[i].kind]++;
  printf("calibrate %s (%d %s): %zu measurements (%zu collectives, %zu GEMMs, %zu other ops, "
         "%zu iterations), %zu fitted, %zu held out\n", c->name, c->gpus,
         c->gpu.cpu ? "ranks" : "GPUs", j->n, nk[CAL_COLL], nk[CAL_GEMM], nk[CAL_OP],
         nk[CAL_ITER], r->nfit, r->nheld);
  if (j->merged)
    printf("  merged: %zu repeats of an op's shape within a run (one observation per shape, the "
           "mean time)\n", j->merged);
  if (j->folded)
    printf("  folded: %zu backward attentions (two passes and the score product, one observation "
           "of the whole backward; the product also a GEMM)\n", j->folded);
  for (int k = 0; k < j->nwhy; k++) printf("  left out: %d, %s\n", j->why_n[k], j->why[k]);
  print_params(r);
  print_unfitted(r, 0, "  not informed (kept): ");
  print_unfitted(r, 1, "  undetermined, left at their prior: ");
  printf("  %-26s %8s %8s\n", "error (MAPE)", "before", "after");
  printf("    %-24s %7.2f%% %7.2f%%   (bias %+.2f%% -> %+.2f%%)\n", "fitted", r->mape_before,
         r->mape_after, r->bias_before, r->bias_after);
  if (r->nheld)
    printf("    %-24s %7.2f%% %7.2f%%\n", "held out", r->held_mape_before, r->held_mape_after);
  for (int k = 0; j->ng > 2 && k < j->ng; k++) {
    const cal_group_error *g = &j->g[k];
    if (strcmp(g->name, "all") == 0) continue;
    if (g->n)
      printf("    %-12s fitted (%3d) %7.2f%% %7.2f%%\n", g->name, g->n, g->mape_before, g->mape_after);
    if (g->aside)
      printf("    %-12s held   (%3d) %7.2f%% %7.2f%%\n", g->name, g->aside, g->aside_mape_before,
             g->aside_mape_after);
  }
  cal_range_error re[CAL_NRANGES];
  cal_range_errors(r, j->obs, re);
  for (int k = 0; k < CAL_NRANGES; k++)
    if (re[k].n)
      printf("    collectives %-12s %7.2f%% %7.2f%%   (%d)\n", re[k].range, re[k].mape_before,
             re[k].mape_after, re[k].n);
  if (j->nplans) print_plans(j);
  printf("  RMS of log(predicted / measured), fitted: %.4f -> %.4f (what the fit lowers)\n",
         r->fit_error_before, r->fit_error);
  print_regularised(r, j->obs, "measurement");
  printf("  %d iterations; calibration %lld stored in %s\n", r->iterations, (long long)j->id, db);
}

/* --json: the stored summary (cal_summary_json's keys, by_kind, plans) and the rest. */
static void print_json(const study_cal_job *j) {
  json_t *ni, *un, *pf = params_fitted_json(&j->r, &ni, &un), *sk = json_object();
  for (int k = 0; k < j->nwhy; k++) json_object_set_new(sk, j->why[k], json_integer(j->why_n[k]));
  json_t *o = j->summary_json ? json_loads(j->summary_json, 0, NULL) : NULL;
  if (!o) o = json_object();
  json_object_set_new(o, "calibration_id", json_integer(j->id));
  json_object_set_new(o, "params_fitted", pf);
  json_object_set_new(o, "not_informed", ni);
  json_object_set_new(o, "undetermined", un);
  json_object_set_new(o, "skipped", sk);
  json_object_set_new(o, "merged", json_integer((json_int_t)j->merged));
  json_object_set_new(o, "folded", json_integer((json_int_t)j->folded));
  if (j->nplans) {
    json_object_set_new(o, "kendall_tau_before", num_or_null(j->tau_before));
    json_object_set_new(o, "kendall_tau_after", num_or_null(j->tau_after));
    json_object_set_new(o, "holdout_kendall_tau_before", num_or_null(j->held_tau_before));
    json_object_set_new(o, "holdout_kendall_tau_after", num_or_null(j->held_tau_after));
  }
  json_dumpf(o, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
  putchar('\n');
  json_decref(o);
}

/* A fit of stored measurements (--cluster) or of a search's runs (--from-search), printed. */
static int calibrate_job(const cal_args *a) {
  pp_err err = {0};
  study_cal_job j;
  int rc = a->o.search ? study_cal_from_search(&a->o, &j, &err)
                       : study_cal_stored(&a->o, a->cluster, a->gpus, &j, &err);
  if (!rc && a->json) print_json(&j);
  if (!rc && !a->json) print_fit(&j, a->o.db);
  study_cal_job_free(&j);
  return rc ? cli_fail(CMD, &err) : 0;
}

static void runs_print(const cal_args *a, const study_cal_runs *f) {
  if (a->json) {
    json_t *ni, *un, *pf = params_fitted_json(&f->r, &ni, &un);
    json_t *o = json_pack("{s:O, s:i, s:I, s:I, s:i, s:o, s:o, s:o, s:i, s:O, s:f, s:f}",
                          "calibration_ids", f->ids, "measurements", f->n, "fitted",
                          (json_int_t)f->r.nfit, "aside", (json_int_t)f->r.nheld, "skipped",
                          f->skipped, "params_fitted", pf, "not_informed", ni, "undetermined", un,
                          "folds", a->o.folds, "by_source", f->by_source, "rms_log_before",
                          f->r.fit_error_before, "rms_log_after", f->r.fit_error);
    json_object_set_new(o, "prior_noise", json_real(f->r.prior_noise));
    json_object_set_new(o, "cv_rms_log", json_real(f->r.cv_error));
    json_object_set_new(o, "cv_rms_log_prior", json_real(f->r.cv_error_prior));
    json_object_set_new(o, "worse_than_prior", json_boolean(f->r.worse));
    json_object_set(o, "ranking", f->ranking);
    json_dumpf(o, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
    putchar('\n');
    json_decref(o);
    return;
  }
  printf("calibrate --runs %s: %d runs (%zu fitted, %zu kept aside, %d rows not usable), %d folds\n",
         a->o.runs, f->n, f->r.nfit, f->r.nheld, f->skipped, a->o.folds);
  print_params(&f->r);
  print_unfitted(&f->r, 1, "  undetermined, left at their prior: ");
  print_regularised(&f->r, f->obs, "CSV row");
  printf("  %-14s %5s %22s %22s %8s %16s\n", "source", "rows", "MAPE before/after/cv",
         "bias before/after/cv", "aside", "aside MAPE b/a");
  for (int k = 0; k < f->ng; k++) {
    const cal_group_error *g = &f->g[k];
    char in[40] = "-", bi[40] = "-", as[40] = "-";
    if (g->n) {
      snprintf(in, sizeof in, "%5.1f %5.1f %5.1f%%", g->mape_before, g->mape_after, g->mape_cv);
      snprintf(bi, sizeof bi, "%+5.1f %+5.1f %+5.1f%%", g->bias_before, g->bias_after, g->bias_cv);
    }
    if (g->aside) snprintf(as, sizeof as, "%5.1f %5.1f%%", g->aside_mape_before, g->aside_mape_after);
    printf("  %-14.14s %5d %22s %22s %8d %16s\n", g->name, g->n, in, bi, g->aside, as);
  }
  printf("  Kendall's tau of predicted vs published, per set of runs of one model (>= 3 rows): of\n"
         "  the iteration time, and of the GPU-seconds per sequence (what a plan costs):\n");
  json_t *e;
  size_t at;
  json_array_foreach(f->ranking, at, e) {
    printf("    %-12s %-36.36s %3d rows  time %+5.2f -> %+5.2f (cv %+5.2f), cost %+5.2f -> %+5.2f "
           "(cv %+5.2f)%s\n",
           json_string_value(json_object_get(e, "source")),
           json_string_value(json_object_get(e, "model")),
           (int)json_integer_value(json_object_get(e, "rows")),
           json_real_value(json_object_get(e, "tau_before")),
           json_real_value(json_object_get(e, "tau_after")),
           json_real_value(json_object_get(e, "tau_cv")),
           json_real_value(json_object_get(e, "tau_cost_before")),
           json_real_value(json_object_get(e, "tau_cost_after")),
           json_real_value(json_object_get(e, "tau_cost_cv")),
           json_is_true(json_object_get(e, "aside")) ? "  kept aside" : "");
  }
  printf("  RMS of log(predicted / published), fitted: %.4f -> %.4f; calibrations", f->r.fit_error_before,
         f->r.fit_error);
  for (size_t i = 0; i < json_array_size(f->ids); i++)
    printf(" %lld", (long long)json_integer_value(json_array_get(f->ids, i)));
  printf(" stored in %s\n", a->o.db);
}

static int calibrate_runs(const cal_args *a) {
  pp_err err = {0};
  study_cal_runs f;
  int rc = study_cal_published(&a->o, &f, &err);
  if (!rc) runs_print(a, &f);
  study_cal_runs_free(&f);
  return rc ? cli_fail(CMD, &err) : 0;
}

static int show(const cal_args *a) {
  pp_err err = {0};
  store *s = NULL;
  store_opts ro = {.readonly = 1};
  store_calibration k;
  if (store_open(a->o.db, &ro, &s, &err) || store_get_calibration(s, a->show, &k, &err)) {
    store_close(s);
    return cli_fail(CMD, &err);
  }
  store_close(s);
  if (a->json) {
    json_t *o = json_pack("{s:I, s:s, s:s, s:s, s:f}", "calibration_id", (json_int_t)k.id,
                          "cluster", k.cluster_name, "method", k.method, "created_at",
                          k.created_at ? k.created_at : "", "fit_error", k.fit_error);
    json_object_set_new(o, "params", json_loads(k.params_json, 0, NULL));
    if (k.holdout_json) json_object_set_new(o, "summary", json_loads(k.holdout_json, 0, NULL));
    json_dumpf(o, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
    putchar('\n');
    json_decref(o);
  } else {
    printf("calibration %lld of %s, %s, %s; RMS log error %.4f\n", (long long)k.id,
           k.cluster_name, k.method, k.created_at ? k.created_at : "", k.fit_error);
    json_t *p = json_loads(k.params_json, 0, NULL), *e;
    const char *name;
    json_object_foreach(p, name, e) {
      if (json_is_true(json_object_get(e, "informed")))
        printf("  %-20s %14.6g (prior %.6g, sigma %.3g)%s\n", name,
               json_number_value(json_object_get(e, "value")),
               json_number_value(json_object_get(e, "prior")),
               json_number_value(json_object_get(e, "sigma")),
               json_is_true(json_object_get(e, "undetermined")) ? " undetermined" : "");
    }
    json_decref(p);
    if (k.holdout_json) printf("  %s\n", k.holdout_json);
  }
  store_calibration_clear(&k);
  return 0;
}

int cmd_calibrate(int argc, char **argv) {
  struct option longs[NOPTS + 1];
  cli_opts_longs(opts, NOPTS, longs);
  cal_args a = {.o = {.db = STORE_DEFAULT_PATH, .seed = 1, .folds = 5, .top = 12, .iters = 3,
                      .prior_noise = CAL_PRIOR_AUTO}};
  int first = 1, c, seed = 1;
  char *end;
  while ((c = cli_getopt(CMD, argc, argv, "h", longs, &first)) != -1) {
    switch (c) {
    case 'h':
      fputs(usage, stdout);
      cli_opts_help(stdout, opts, NOPTS, 15);
      return 0;
    case 'c': a.cluster = optarg; break;
    case 'g':
      if (cli_int(CMD, "--gpus", optarg, 2, SPEC_MAX_GPUS, &a.gpus)) return 2;
      break;
    case 'd': a.o.db = optarg; break;
    case 'k':
      if (strcmp(optarg, "coll") && strcmp(optarg, "gemm") && strcmp(optarg, "iter"))
        return cli_usage_error(CMD, "--kind: '%s' is not coll, gemm or iter", optarg);
      a.o.kind = optarg;
      break;
    case 'f': a.o.fit = optarg; break;
    case 'H':
      if (strcmp(optarg, "plans") == 0) {
        a.o.holdout_plans = 1;
        break;
      }
      a.o.holdout = strtod(optarg, &end);
      if (end == optarg || *end || !(a.o.holdout >= 0 && a.o.holdout <= 0.9))
        return cli_usage_error(CMD, "--holdout: '%s' is not a fraction 0 .. 0.9 or 'plans'",
                               optarg);
      break;
    case 'X': {
      int id = 0;
      if (cli_int(CMD, "--from-search", optarg, 1, 2147483647, &id)) return 2;
      a.o.search = id;
      break;
    }
    case 'K':
      if (cli_int(CMD, "--top", optarg, 1, 256, &a.o.top)) return 2;
      break;
    case 'L': a.o.launch = optarg; break;
    case 'D':
      if (strcmp(optarg, "cpu") && strcmp(optarg, "cuda"))
        return cli_usage_error(CMD, "--device: '%s' is not cpu or cuda", optarg);
      a.o.device = optarg;
      break;
    case 'l':
      if (cli_int(CMD, "--layers", optarg, 1, 100000, &a.o.layers)) return 2;
      break;
    case 'W':
      if (cli_int(CMD, "--shrink", optarg, 1, 1024, &a.o.shrink)) return 2;
      break;
    case 'n':
      if (cli_int(CMD, "--iters", optarg, 1, 100000, &a.o.iters)) return 2;
      break;
    case 'p': a.o.spread = 1; break;
    case 's':
      if (cli_int(CMD, "--seed", optarg, 0, 2147483647, &seed)) return 2;
      a.o.seed = (unsigned)seed;
      break;
    case 'r': a.o.robust = 1; break;
    case 'P':
      if (strcmp(optarg, "auto") == 0) {
        a.o.prior_noise = CAL_PRIOR_AUTO;
      } else if (strcmp(optarg, "off") == 0) {
        a.o.prior_noise = 0;
      } else {
        a.o.prior_noise = strtod(optarg, &end);
        if (end == optarg || *end || !(a.o.prior_noise > 0 && a.o.prior_noise <= 10))
          return cli_usage_error(CMD, "--prior-noise: '%s' is not auto, off or a noise in log "
                                 "0 .. 10", optarg);
      }
      break;
    case 'S':
      if (cli_int(CMD, "--show", optarg, 1, 2147483647, &a.show)) return 2;
      break;
    case 'j': a.json = 1; break;
    case 'R': a.o.runs = optarg; break;
    case 'G': a.o.plots = optarg; break;
    case 'F':
      if (cli_int(CMD, "--folds", optarg, 2, 100, &a.o.folds)) return 2;
      break;
    default: return 2;
    }
  }
  if (optind < argc) return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
  if (a.show) return show(&a);
  if ((a.o.launch || a.o.device || a.o.layers || a.o.shrink || a.o.spread) && !a.o.search)
    return cli_usage_error(CMD, "--launch, --device, --layers, --shrink and --spread go with "
                                "--from-search");
  if (a.o.search) {
    if (!a.o.launch) return cli_usage_error(CMD, "--from-search needs --launch (e.g. \"mpirun -n 4\")");
    if (a.cluster || a.o.runs || a.o.kind)
      return cli_usage_error(CMD, "--from-search takes no --cluster, --runs or --kind (the "
                                  "search run names its cluster)");
    pp_err perr = {0}; /* the plots' folder before the runs: one that cannot be made fails now */
    if (a.o.plots && pp_mkdirs(a.o.plots, &perr)) return cli_fail(CMD, &perr);
    return calibrate_job(&a);
  }
  if (a.o.runs) {
    if (a.cluster || a.o.kind || a.o.holdout > 0 || a.o.holdout_plans)
      return cli_usage_error(CMD, "--runs takes no --cluster, --kind or --holdout (runs name their "
                                  "clusters; the set column keeps rows aside)");
    return calibrate_runs(&a);
  }
  if (!a.cluster) return cli_usage_error(CMD, "--cluster is required");
  return calibrate_job(&a);
}
#endif
