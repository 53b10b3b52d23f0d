/* podplan calibrate: fit the cost model's parameters to a cluster's stored measurements and
 * store the calibration (calibrate/ fits; store/ reads and writes, the calibration in one
 * transaction); --show prints a stored one. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#ifdef PODPLAN_GSL
#include "podplan/cal.h"
#include "podplan/study.h"
#endif

static const char usage[] =
    "usage: podplan calibrate --cluster C [--gpus N] [--db F] [--kind coll|gemm]\n"
    "                         [--fit NAME,NAME...] [--holdout F] [--seed S] [--robust]\n"
    "                         [--plots DIR] [--json]\n"
    "       podplan calibrate --runs F.csv [--folds K] [--fit NAME,...] [--seed S] [--robust]\n"
    "                         [--plots DIR] [--db F] [--json]\n"
    "       podplan calibrate --show ID [--db F] [--json]\n"
    "\n"
    "Fits the cost model's parameters to the measurements stored for the cluster (every size of\n"
    "it): collectives imported from nccl-tests logs or measured by `bench coll` (bandwidth\n"
    "efficiency per level, NVLS efficiency and cap, each algorithm's ramp and latency) and GPU\n"
    "GEMMs of `bench gemm --device cuda` (GEMM efficiency, k-loop, kernel overhead), with GSL's\n"
    "nonlinear least squares on log(predicted / measured). A parameter no measurement informs\n"
    "keeps its value and is listed as such. Prints each fitted value with its uncertainty and\n"
    "the error before and after (fitted, held out, collectives by size), and stores the\n"
    "calibration with its inputs and residuals. Measurements of other kinds, of a run's groups\n"
    "or of CPUs are left out and counted.\n"
    "\n"
    "With --runs, fits constants every run shares (GEMM, attention and memory-bound efficiency,\n"
    "NVLink and NIC efficiency; never one per run) to the iteration times of published runs in\n"
    "the format of benchmarks/data/published_runs.csv, each run with its own model, cluster,\n"
    "plan and settings: prints per source the error before, after (in-sample) and\n"
    "cross-validated (K folds), the rows kept aside (set holdout) before and after, never\n"
    "fitted, and Kendall's tau per set of runs of one model; stores the calibration once per\n"
    "cluster of the fitted runs.\n"
    "\n"
    "  --cluster C     the cluster (preset, JSON or file) whose measurements to fit\n"
    "  --gpus N        its size (default: the largest group measured)\n"
    "  --db F          store file (default podplan.db)\n"
    "  --kind K        only measurements of kind coll or gemm\n"
    "  --fit LIST      only these parameters (names of `predict --param`)\n"
    "  --holdout F     fraction of the measurements kept out of the fit (0 .. 0.9), to report\n"
    "                  the error on them before and after\n"
    "  --seed S        which ones (default 1)\n"
    "  --robust        Cauchy weights: outliers count less\n"
    "  --plots DIR     also draw with gnuplot (PNG and SVG): predicted against measured before\n"
    "                  and after, and the error by size (calibration-ID-*.png|svg)\n"
    "  --runs F        published runs (CSV) instead of stored measurements\n"
    "  --folds K       cross-validation folds for --runs (default 5)\n"
    "  --show ID       print stored calibration ID\n"
    "  --json          calibration_id, measurements, params_fitted (name: value, sigma, prior),\n"
    "                  not_informed, mape_before/after, bias_before/after, holdout_mape_before/\n"
    "                  after, rms_log_before/after, collectives_by_size, skipped; with --runs\n"
    "                  calibration_ids, by_source, ranking (docs/cli.md lists them)\n"
    "  -h, --help      this text\n";

static const char *const CMD = "calibrate";

#ifndef PODPLAN_GSL
int cmd_calibrate(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      fputs(usage, stdout);
      return 0;
    }
  fprintf(stderr, "podplan %s: built without GSL (libgsl-dev; cmake -DPODPLAN_GSL=ON)\n", CMD);
  return 1;
}
#else

typedef struct cal_args {
  const char *cluster, *db, *kind, *fit, *runs, *plots;
  int gpus, json, robust, show, folds;
  unsigned seed;
  double holdout;
} cal_args;

/* The observations of the stored measurements, and counts of the ones left out by reason. */
typedef struct inputs {
  store_meas_list rows;
  cal_obs *obs;
  size_t n;
  const char *why[8];
  int why_n[8], nwhy;
  int max_ranks;
} inputs;

static void inputs_free(inputs *in) {
  store_meas_list_free(&in->rows);
  free(in->obs);
}

static void skip(inputs *in, const char *why) {
  for (int k = 0; k < in->nwhy; k++)
    if (strcmp(in->why[k], why) == 0) {
      in->why_n[k]++;
      return;
    }
  if (in->nwhy < 8) in->why[in->nwhy] = why, in->why_n[in->nwhy++] = 1;
}

static int read_inputs(const cal_args *a, const char *cluster_name, inputs *in, pp_err *err) {
  store *s = NULL;
  store_opts ro = {.readonly = 1};
  int rc = store_open(a->db, &ro, &s, err);
  if (!rc) rc = store_get_measurements(s, cluster_name, a->kind, &in->rows, err);
  store_close(s);
  if (rc) return rc;
  for (size_t i = 0; i < in->rows.n; i++)
    if (in->rows.rows[i].ranks > in->max_ranks) in->max_ranks = in->rows.rows[i].ranks;
  in->obs = calloc(in->rows.n + 1, sizeof *in->obs);
  return in->obs ? PP_OK : pp_err_set(err, PP_NOMEM, "calibrate: out of memory");
}

static void to_obs(inputs *in, const spec_cluster *c) {
  for (size_t i = 0; i < in->rows.n; i++) {
    const char *why;
    if (cal_obs_from_row(&in->rows.rows[i], in->rows.ids[i], c, &in->obs[in->n], &why))
      in->n++;
    else
      skip(in, why);
  }
}

/* --fit a,b,c as a NULL-terminated list (in buf). */
static int fit_names(const char *list, char *buf, size_t nbuf, const char **names, int max) {
  if (strlen(list) >= nbuf) return -1;
  strcpy(buf, list);
  int k = 0;
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && k < max - 1;
       t = strtok_r(NULL, ",", &save))
    names[k++] = t;
  names[k] = NULL;
  return k;
}

static json_t *params_fitted_json(const cal_result *r, json_t **not_informed) {
  json_t *o = json_object();
  *not_informed = json_array();
  for (size_t j = 0; j < r->nparams; j++) {
    const cal_param *q = &r->params[j];
    if (q->informed)
      json_object_set_new(o, q->name, json_pack("{s:f, s:f, s:f}", "value", q->value, "sigma",
                                                q->sigma, "prior", q->prior));
    else
      json_array_append_new(*not_informed, json_string(q->name));
  }
  return o;
}

static void print_fit(const cal_result *r, const cal_obs *obs, const inputs *in,
                      const spec_cluster *c, int64_t id, const char *db) {
  size_t nc = 0;
  for (size_t i = 0; i < in->n; i++) nc += obs[i].kind == CAL_COLL;
  printf("calibrate %s (%d GPUs): %zu measurements (%zu collectives, %zu GEMMs), %zu fitted, "
         "%zu held out\n", c->name, c->gpus, in->n, nc, in->n - nc, r->nfit, r->nheld);
  for (int k = 0; k < in->nwhy; k++) printf("  left out: %d, %s\n", in->why_n[k], in->why[k]);
  printf("  %-20s %14s %14s %12s\n", "parameter", "prior", "fitted", "sigma");
  for (size_t j = 0; j < r->nparams; j++)
    if (r->params[j].informed)
      printf("  %-20s %14.6g %14.6g %12.3g\n", r->params[j].name, r->params[j].prior,
             r->params[j].value, r->params[j].sigma);
  int first = 1;
  for (size_t j = 0; j < r->nparams; j++)
    if (!r->params[j].informed) {
      printf("%s%s", first ? "  not informed (kept): " : ", ", r->params[j].name);
      first = 0;
    }
  if (!first) putchar('\n');
  printf("  %-26s %8s %8s\n", "error (MAPE)", "before", "after");
  printf("    %-24s %7.2f%% %7.2f%%   (bias %+.2f%% -> %+.2f%%)\n", "fitted", r->mape_before,
         r->mape_after, r->bias_before, r->bias_after);
  if (r->nheld)
    printf("    %-24s %7.2f%% %7.2f%%\n", "held out", r->held_mape_before, r->held_mape_after);
  cal_range_error re[CAL_NRANGES];
  cal_range_errors(r, obs, re);
  for (int k = 0; k < CAL_NRANGES; k++)
    if (re[k].n)
      printf("    collectives %-12s %7.2f%% %7.2f%%   (%d)\n", re[k].range, re[k].mape_before,
             re[k].mape_after, re[k].n);
  printf("  RMS of log(predicted / measured), fitted: %.4f -> %.4f (what the fit lowers)\n",
         r->fit_error_before, r->fit_error);
  printf("  %d iterations; calibration %lld stored in %s\n", r->iterations, (long long)id, db);
}

static void print_json(const cal_result *r, const cal_obs *obs, const inputs *in, int64_t id) {
  json_t *ni, *pf = params_fitted_json(r, &ni), *sk = json_object();
  for (int k = 0; k < in->nwhy; k++) json_object_set_new(sk, in->why[k], json_integer(in->why_n[k]));
  char *sum = cal_summary_json(r, obs);
  json_t *o = sum ? json_loads(sum, 0, NULL) : json_object();
  free(sum);
  json_object_set_new(o, "calibration_id", json_integer(id));
  json_object_set_new(o, "params_fitted", pf);
  json_object_set_new(o, "not_informed", ni);
  json_object_set_new(o, "skipped", sk);
  json_dumpf(o, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
  putchar('\n');
  json_decref(o);
}

/* --plots DIR: the calibration's plots (the directory made when missing). */
static int plots(const cal_args *a, long long id, const char *what, const cal_result *r,
                 const cal_obs *obs, pp_err *err) {
  if (!a->plots) return PP_OK;
  if (mkdir(a->plots, 0777) && errno != EEXIST)
    return pp_err_set(err, PP_IO, "%s: cannot create: %s", a->plots, strerror(errno));
  char tag[64], title[160];
  snprintf(tag, sizeof tag, "calibration-%lld", id);
  snprintf(title, sizeof title, "calibration %lld (%s)", id, what);
  return cal_plots(a->plots, tag, title, r, obs, err);
}

/* The fit and its calibration row (one transaction). */
static int fit_and_store(const cal_args *a, const spec_cluster *c, inputs *in, pp_err *err) {
  spec_model m;
  if (spec_model_load("gpt3-175b", &m, err)) return err->code; /* collectives and GEMMs do not
                                                                   depend on the model */
  cm_params prior;
  cm_params_default(&m, &prior);
  char buf[1024];
  const char *names[64];
  cal_opts o = {.holdout = a->holdout, .seed = a->seed, .robust = a->robust};
  if (a->fit) {
    if (fit_names(a->fit, buf, sizeof buf, names, 64) < 1)
      return pp_err_set(err, PP_INPUT, "--fit: give parameter names separated by commas");
    o.names = names;
  }
  cal_result r;
  int rc = cal_fit(&m, c, &prior, in->obs, in->n, &o, &r, err);
  if (rc) return rc;
  char *pj = cal_params_json(&r), *rj = cal_residuals_json(&r, in->obs);
  char *hj = cal_summary_json(&r, in->obs);
  json_t *ids = json_array();
  for (size_t i = 0; ids && i < in->n; i++) json_array_append_new(ids, json_integer(in->obs[i].id));
  json_t *inp = json_pack("{s:s, s:s?, s:o}", "selection", "cluster name", "kind", a->kind,
                          "measurement_ids", ids ? ids : json_null());
  char *ij = inp ? json_dumps(inp, JSON_COMPACT) : NULL;
  json_decref(inp);
  store_calibration cal = {.method = a->robust ? "gsl-nlinear-lm+cauchy" : "gsl-nlinear-lm",
                           .params_json = pj, .inputs_json = ij, .residuals_json = rj,
                           .fit_error = r.fit_error, .holdout_json = hj};
  if (!pj || !rj || !hj || !ij) rc = pp_err_set(err, PP_NOMEM, "calibrate: out of memory");
  if (!rc) rc = store_save_calibration(a->db, c, &cal, err);
  if (!rc) rc = plots(a, cal.id, c->name, &r, in->obs, err);
  if (!rc && a->json) print_json(&r, in->obs, in, cal.id);
  if (!rc && !a->json) print_fit(&r, in->obs, in, c, cal.id, a->db);
  free(pj), free(rj), free(hj), free(ij);
  cal_result_free(&r);
  return rc;
}

/* --runs: iteration times of published runs, each on its own model, cluster and plan. */
typedef struct runs_fit {
  study_run *runs;
  int n, skipped;
  cal_obs *obs;
  const char **group;
  double *cv;
  cal_result r;
  cal_group_error g[34];
  int ng;
} runs_fit;

static void runs_fit_free(runs_fit *f) {
  study_runs_free(f->runs, f->n);
  free(f->obs), free(f->group), free(f->cv);
  cal_result_free(&f->r);
}

static int runs_do_fit(const cal_args *a, runs_fit *f, pp_err *err) {
  int rc = study_runs_load(a->runs, &f->runs, &f->n, &f->skipped, err);
  if (rc) return rc;
  if (f->n < 2) return pp_err_set(err, PP_INPUT, "%s: %d usable runs: too few to fit", a->runs, f->n);
  f->obs = calloc((size_t)f->n, sizeof *f->obs);
  f->group = calloc((size_t)f->n, sizeof *f->group);
  f->cv = calloc((size_t)f->n, sizeof *f->cv);
  if (!f->obs || !f->group || !f->cv) return pp_err_set(err, PP_NOMEM, "calibrate: out of memory");
  for (int i = 0; i < f->n; i++) {
    study_run *x = &f->runs[i];
    f->obs[i] = (cal_obs){.kind = CAL_ITER, .id = x->row, .time_s = x->published_s,
                          .model = &x->m, .cluster = &x->c, .plan = &x->p, .base = &x->prm,
                          .aside = strcmp(x->set, "holdout") == 0};
    f->group[i] = x->source;
  }
  char buf[1024];
  const char *names[64];
  cal_opts o = {.seed = a->seed, .robust = a->robust};
  if (a->fit) {
    if (fit_names(a->fit, buf, sizeof buf, names, 64) < 1)
      return pp_err_set(err, PP_INPUT, "--fit: give parameter names separated by commas");
    o.names = names;
  }
  const study_run *x0 = &f->runs[0];
  if ((rc = cal_fit(&x0->m, &x0->c, &x0->prm, f->obs, (size_t)f->n, &o, &f->r, err))) return rc;
  if ((rc = cal_cv(&x0->m, &x0->c, &x0->prm, f->obs, (size_t)f->n, &o, a->folds, f->cv, err)))
    return rc;
  f->ng = cal_group_errors(f->obs, f->group, (size_t)f->n, f->r.before, f->r.after, f->cv, f->g,
                           34);
  return PP_OK;
}

static json_t *groups_json(const runs_fit *f) {
  json_t *a = json_array();
  for (int k = 0; k < f->ng; k++) {
    const cal_group_error *g = &f->g[k];
    json_array_append_new(
        a, json_pack("{s:s, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "source",
                     g->name, "rows", g->n, "aside", g->aside, "mape_before", g->mape_before,
                     "mape_after", g->mape_after, "cv_mape_after", g->mape_cv, "bias_before",
                     g->bias_before, "bias_after", g->bias_after, "cv_bias_after", g->bias_cv,
                     "aside_mape_before", g->aside_mape_before, "aside_mape_after",
                     g->aside_mape_after, "aside_bias_after", g->aside_bias_after));
  }
  return a;
}

/* One calibration per cluster (by name) of the fitted runs, the same values in each. */
static int runs_store(const cal_args *a, runs_fit *f, json_t *ids, pp_err *err) {
  char *pj = cal_params_json(&f->r), *rj = cal_residuals_json(&f->r, f->obs);
  json_t *sum = json_pack("{s:s, s:i, s:o}", "runs", a->runs, "folds", a->folds, "by_source",
                          groups_json(f));
  char *hj = sum ? json_dumps(sum, JSON_COMPACT) : NULL;
  json_decref(sum);
  int rc = pj && rj && hj ? PP_OK : pp_err_set(err, PP_NOMEM, "calibrate: out of memory");
  for (int i = 0; !rc && i < f->n; i++) {
    int seen = 0;
    for (int j = 0; j < i && !seen; j++)
      seen = !f->obs[j].aside && strcmp(f->runs[j].c.name, f->runs[i].c.name) == 0;
    if (seen || f->obs[i].aside) continue;
    json_t *inp = json_pack("{s:s, s:s, s:i}", "selection", "published runs", "runs", a->runs,
                            "rows_fitted", (int)f->r.nfit);
    char *ij = inp ? json_dumps(inp, JSON_COMPACT) : NULL;
    json_decref(inp);
    store_calibration cal = {.method = a->robust ? "gsl-nlinear-lm+cauchy runs" : "gsl-nlinear-lm runs",
                             .params_json = pj, .inputs_json = ij, .residuals_json = rj,
                             .fit_error = f->r.fit_error, .holdout_json = hj};
    rc = ij ? store_save_calibration(a->db, &f->runs[i].c, &cal, err)
            : pp_err_set(err, PP_NOMEM, "calibrate: out of memory");
    if (!rc) json_array_append_new(ids, json_integer(cal.id));
    free(ij);
  }
  free(pj), free(rj), free(hj);
  return rc;
}

/* Kendall's tau before, after and cross-validated (rows kept aside: after) of each set of runs
 * of one model with at least 3 rows, as a JSON array. */
static json_t *ranking_json(const runs_fit *f) {
  json_t *arr = json_array();
  for (int i = 0; i < f->n; i++) {
    if (f->runs[i].rank_set != i) continue;
    double pub[256], b[256], af[256], cv[256];
    int k = 0;
    for (int j = i; j < f->n && k < 256; j++)
      if (f->runs[j].rank_set == i) {
        pub[k] = f->obs[j].time_s, b[k] = f->r.before[j], af[k] = f->r.after[j];
        cv[k++] = f->obs[j].aside ? f->r.after[j] : f->cv[j];
      }
    if (k < 3) continue;
    json_array_append_new(
        arr, json_pack("{s:s, s:s, s:i, s:b, s:f, s:f, s:f}", "source", f->runs[i].source, "model",
                       f->runs[i].m.name, "rows", k, "aside", f->obs[i].aside, "tau_before",
                       study_kendall_tau(b, pub, k, NULL, NULL), "tau_after",
                       study_kendall_tau(af, pub, k, NULL, NULL), "tau_cv",
                       study_kendall_tau(cv, pub, k, NULL, NULL)));
  }
  return arr;
}

static void runs_print(const cal_args *a, const runs_fit *f, json_t *ids) {
  if (a->json) {
    json_t *ni, *pf = params_fitted_json(&f->r, &ni);
    json_t *o = json_pack("{s:o, s:i, s:I, s:I, s:i, s:o, s:o, s:i, s:o, s:f, s:f}",
                          "calibration_ids", ids, "measurements", f->n, "fitted",
                          (json_int_t)f->r.nfit, "aside", (json_int_t)f->r.nheld, "skipped",
                          f->skipped, "params_fitted", pf, "not_informed", ni, "folds",
                          a->folds, "by_source", groups_json(f), "rms_log_before",
                          f->r.fit_error_before, "rms_log_after", f->r.fit_error);
    json_object_set_new(o, "ranking", ranking_json(f));
    json_dumpf(o, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
    putchar('\n');
    json_decref(o);
    return;
  }
  printf("calibrate --runs %s: %d runs (%zu fitted, %zu kept aside, %d rows not usable), %d folds\n",
         a->runs, f->n, f->r.nfit, f->r.nheld, f->skipped, a->folds);
  printf("  %-20s %14s %14s %12s\n", "parameter", "prior", "fitted", "sigma");
  for (size_t j = 0; j < f->r.nparams; j++)
    if (f->r.params[j].informed)
      printf("  %-20s %14.6g %14.6g %12.3g\n", f->r.params[j].name, f->r.params[j].prior,
             f->r.params[j].value, f->r.params[j].sigma);
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
  printf("  Kendall's tau of predicted vs published time, per set of runs of one model (>= 3 rows):\n");
  json_t *rk = ranking_json(f), *e;
  size_t at;
  json_array_foreach(rk, at, e) {
    printf("    %-12s %-36.36s %3d rows  %+5.2f -> %+5.2f (cv %+5.2f)%s\n",
           json_string_value(json_object_get(e, "source")),
           json_string_value(json_object_get(e, "model")),
           (int)json_integer_value(json_object_get(e, "rows")),
           json_real_value(json_object_get(e, "tau_before")),
           json_real_value(json_object_get(e, "tau_after")),
           json_real_value(json_object_get(e, "tau_cv")),
           json_is_true(json_object_get(e, "aside")) ? "  kept aside" : "");
  }
  json_decref(rk);
  printf("  RMS of log(predicted / published), fitted: %.4f -> %.4f; calibrations", f->r.fit_error_before,
         f->r.fit_error);
  for (size_t i = 0; i < json_array_size(ids); i++)
    printf(" %lld", (long long)json_integer_value(json_array_get(ids, i)));
  printf(" stored in %s\n", a->db);
}

static int calibrate_runs(const cal_args *a) {
  pp_err err = {0};
  runs_fit f = {0};
  json_t *ids = json_array();
  int rc = runs_do_fit(a, &f, &err);
  if (!rc) rc = runs_store(a, &f, ids, &err);
  if (!rc) rc = plots(a, json_integer_value(json_array_get(ids, 0)), "published runs", &f.r, f.obs,
                      &err);
  if (!rc) runs_print(a, &f, ids);
  else json_decref(ids);
  runs_fit_free(&f);
  return rc ? cli_fail(CMD, &err) : 0;
}

static int show(const cal_args *a) {
  pp_err err = {0};
  store *s = NULL;
  store_opts ro = {.readonly = 1};
  store_calibration k;
  if (store_open(a->db, &ro, &s, &err) || store_get_calibration(s, a->show, &k, &err)) {
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
        printf("  %-20s %14.6g (prior %.6g, sigma %.3g)\n", name,
               json_number_value(json_object_get(e, "value")),
               json_number_value(json_object_get(e, "prior")),
               json_number_value(json_object_get(e, "sigma")));
    }
    json_decref(p);
    if (k.holdout_json) printf("  %s\n", k.holdout_json);
  }
  store_calibration_clear(&k);
  return 0;
}

int cmd_calibrate(int argc, char **argv) {
  static const struct option longs[] = {
      {"cluster", required_argument, NULL, 'c'}, {"gpus", required_argument, NULL, 'g'},
      {"db", required_argument, NULL, 'd'},      {"kind", required_argument, NULL, 'k'},
      {"fit", required_argument, NULL, 'f'},     {"holdout", required_argument, NULL, 'H'},
      {"seed", required_argument, NULL, 's'},    {"robust", no_argument, NULL, 'r'},
      {"show", required_argument, NULL, 'S'},    {"json", no_argument, NULL, 'j'},
      {"runs", required_argument, NULL, 'R'},    {"folds", required_argument, NULL, 'F'},
      {"plots", required_argument, NULL, 'G'},
      {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
  cal_args a = {.db = STORE_DEFAULT_PATH, .seed = 1, .folds = 5};
  int first = 1, c, seed = 1;
  char *end;
  while ((c = cli_getopt(CMD, argc, argv, "h", longs, &first)) != -1) {
    switch (c) {
    case 'h': fputs(usage, stdout); return 0;
    case 'c': a.cluster = optarg; break;
    case 'g':
      if (cli_int(CMD, "--gpus", optarg, 2, SPEC_MAX_GPUS, &a.gpus)) return 2;
      break;
    case 'd': a.db = optarg; break;
    case 'k':
      if (strcmp(optarg, "coll") && strcmp(optarg, "gemm"))
        return cli_usage_error(CMD, "--kind: '%s' is not coll or gemm", optarg);
      a.kind = optarg;
      break;
    case 'f': a.fit = optarg; break;
    case 'H':
      a.holdout = strtod(optarg, &end);
      if (end == optarg || *end || !(a.holdout >= 0 && a.holdout <= 0.9))
        return cli_usage_error(CMD, "--holdout: '%s' is not a fraction 0 .. 0.9", optarg);
      break;
    case 's':
      if (cli_int(CMD, "--seed", optarg, 0, 2147483647, &seed)) return 2;
      a.seed = (unsigned)seed;
      break;
    case 'r': a.robust = 1; break;
    case 'S':
      if (cli_int(CMD, "--show", optarg, 1, 2147483647, &a.show)) return 2;
      break;
    case 'j': a.json = 1; break;
    case 'R': a.runs = optarg; break;
    case 'G': a.plots = optarg; break;
    case 'F':
      if (cli_int(CMD, "--folds", optarg, 2, 100, &a.folds)) return 2;
      break;
    default: return 2;
    }
  }
  if (optind < argc) return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
  if (a.show) return show(&a);
  if (a.runs) {
    if (a.cluster || a.kind || a.holdout > 0)
      return cli_usage_error(CMD, "--runs takes no --cluster, --kind or --holdout (runs name their "
                                  "clusters; the set column keeps rows aside)");
    return calibrate_runs(&a);
  }
  if (!a.cluster) return cli_usage_error(CMD, "--cluster is required");
  pp_err err = {0};
  spec_cluster cl;
  if (spec_cluster_load(a.cluster, a.gpus, &cl, &err)) return cli_fail(CMD, &err);
  inputs in = {0};
  int rc = read_inputs(&a, cl.name, &in, &err);
  /* without --gpus, the cluster is as large as the largest group measured */
  if (!rc && !a.gpus && in.max_ranks > cl.gpus)
    rc = spec_cluster_load(a.cluster, in.max_ranks, &cl, &err);
  if (!rc) {
    to_obs(&in, &cl);
    if (in.n == 0)
      rc = pp_err_set(&err, PP_INPUT, "%s: no measurement of cluster %s that a fit can use "
                      "(%zu stored; import nccl-tests logs or run `bench` with --cluster)",
                      a.db, cl.name, in.rows.n);
  }
  if (!rc) rc = fit_and_store(&a, &cl, &in, &err);
  inputs_free(&in);
  return rc ? cli_fail(CMD, &err) : 0;
}
#endif
