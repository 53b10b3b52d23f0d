/* podplan calibrate: fit the cost model's parameters to a cluster's stored measurements and
 * store the calibration (calibrate/ fits; store/ reads and writes, the calibration in one
 * transaction); --show prints a stored one. */
#include <errno.h>
#include <math.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#ifdef PODPLAN_GSL
#include "podplan/be.h"
#include "podplan/cal.h"
#include "podplan/fs.h"
#include "podplan/study.h"
#endif

static const char usage[] =
    "usage: podplan calibrate --cluster C [--gpus N] [--db F] [--kind coll|gemm|iter]\n"
    "                         [--fit NAME,NAME...] [--holdout F|plans] [--seed S] [--robust]\n"
    "                         [--plots DIR] [--json]\n"
    "       podplan calibrate --from-search RUN --launch CMD [--top K] [--spread]\n"
    "                         [--device cpu|cuda] [--layers L] [--shrink W] [--iters N]\n"
    "                         [--holdout F|plans] [--fit ...] [--seed S] [--plots DIR] [--db F]\n"
    "                         [--json]\n"
    "       podplan calibrate --runs F.csv [--folds K] [--fit NAME,...] [--seed S] [--robust]\n"
    "                         [--plots DIR] [--db F] [--json]\n"
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
    "\n"
    "  --cluster C     the cluster (preset, JSON or file) whose measurements to fit\n"
    "  --gpus N        its size (default: the largest group measured)\n"
    "  --db F          store file (default podplan.db)\n"
    "  --kind K        only measurements of kind coll or gemm, or only runs' iterations (iter)\n"
    "  --fit LIST      only these parameters (names of `predict --param`)\n"
    "  --holdout F     fraction of the measurements kept out of the fit (0 .. 0.9), to report\n"
    "                  the error on them before and after; 'plans': a third of the runs, every\n"
    "                  measurement of them\n"
    "  --seed S        which ones (default 1)\n"
    "  --robust        Cauchy weights: outliers count less\n"
    "  --plots DIR     also draw with gnuplot (PNG and SVG): predicted against measured before\n"
    "                  and after, and the error by size (calibration-ID-*.png|svg); DIR\n"
    "                  is made with its missing parents\n"
    "  --from-search RUN  run plans of search run RUN (its id in the store) first\n"
    "  --launch CMD    the launcher, split at blanks (no shell), e.g. \"mpirun -n 2\"\n"
    "  --top K         the K fastest plans of the run (default 12, at most 256)\n"
    "  --spread        K plans spread evenly over the run's stored ranking instead (search\n"
    "                  with a large --top), first and last included\n"
    "  --device D      cpu or cuda (default: cpu for a cluster of CPU ranks, else cuda)\n"
    "  --layers L      --shrink W  run fewer layers, a narrower model (podplan run's)\n"
    "  --iters N       timed iterations per run (default 3)\n"
    "  --runs F        published runs (CSV) instead of stored measurements\n"
    "  --folds K       cross-validation folds for --runs (default 5)\n"
    "  --show ID       print stored calibration ID\n"
    "  --json          calibration_id, measurements, params_fitted (name: value, sigma, prior),\n"
    "                  not_informed, undetermined, mape_before/after, bias_before/after,\n"
    "                  holdout_mape_before/after, rms_log_before/after, collectives_by_size,\n"
    "                  by_kind, skipped, merged, folded; with runs: plans,\n"
    "                  kendall_tau_before/after, holdout_kendall_tau_before/after; with\n"
    "                  --runs calibration_ids, by_source, ranking (docs/cli.md lists them)\n"
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
  int gpus, json, robust, show, folds, holdout_plans, spread;
  unsigned seed;
  double holdout;
  /* --from-search */
  long long search;
  int top, layers, shrink, iters;
  const char *launch, *device;
} cal_args;

/* A backend run's specs as run, and the settings the backend runs them with. */
typedef struct run_spec {
  spec_model m;
  spec_cluster c;
  spec_plan p;
  cm_params prm;
} run_spec;

/* The observations: stored measurements and backend runs of the cluster (only the runs in
 * `only` when given), and counts of the ones left out by reason. */
typedef struct inputs {
  store_meas_list rows;
  store_backend_run *runs;
  size_t nruns;
  run_spec *specs;   /* [nruns] */
  cal_obs *obs;
  const char **key;  /* [n] the run key of an observation of a run (NULL: none) */
  int *run_of;       /* [n] the run of an iteration observation, else -1 */
  size_t n;
  const char *why[12];
  int why_n[12], nwhy;
  int max_ranks;
  size_t merged;     /* a run's GEMMs, ops and collectives merged into one per shape and run */
  size_t folded;     /* backward attentions whose score product was folded in */
  const char *const *only; /* run keys (NULL-terminated), or NULL: every run */
} inputs;

static void inputs_free(inputs *in) {
  store_meas_list_free(&in->rows);
  for (size_t i = 0; in->specs && i < in->nruns; i++) spec_plan_clear(&in->specs[i].p);
  store_backend_runs_free(in->runs, in->nruns);
  free(in->specs), free(in->obs), free(in->key), free(in->run_of);
}

static void skip(inputs *in, const char *why) {
  for (int k = 0; k < in->nwhy; k++)
    if (strcmp(in->why[k], why) == 0) {
      in->why_n[k]++;
      return;
    }
  if (in->nwhy < 12) in->why[in->nwhy] = why, in->why_n[in->nwhy++] = 1;
}

static int wanted(const inputs *in, const char *key) {
  if (!in->only) return 1;
  for (const char *const *k = in->only; *k; k++)
    if (key && strcmp(*k, key) == 0) return 1;
  return 0;
}

static int read_inputs(const cal_args *a, const char *cluster_name, inputs *in, pp_err *err) {
  store *s = NULL;
  store_opts ro = {.readonly = 1};
  int iters_only = a->kind && strcmp(a->kind, "iter") == 0;
  int rc = store_open(a->db, &ro, &s, err);
  if (!rc && !iters_only) rc = store_get_measurements(s, cluster_name, a->kind, &in->rows, err);
  if (!rc && (!a->kind || iters_only))
    rc = store_get_backend_runs(s, cluster_name, &in->runs, &in->nruns, err);
  store_close(s);
  if (rc) return rc;
  for (size_t i = 0; i < in->rows.n; i++)
    if (in->rows.rows[i].ranks > in->max_ranks) in->max_ranks = in->rows.rows[i].ranks;
  size_t cap = in->rows.n + in->nruns + 1;
  in->obs = calloc(cap, sizeof *in->obs);
  in->key = calloc(cap, sizeof *in->key);
  in->run_of = calloc(cap, sizeof *in->run_of);
  in->specs = calloc(in->nruns + 1, sizeof *in->specs);
  if (!in->obs || !in->key || !in->run_of || !in->specs)
    return pp_err_set(err, PP_NOMEM, "calibrate: out of memory");
  return PP_OK;
}

/* A backend run as an iteration observation: its specs parsed, the backend's settings. */
static const char *run_obs(inputs *in, size_t i, const spec_cluster *c, pp_err *err) {
  const store_backend_run *r = &in->runs[i];
  run_spec *x = &in->specs[i];
  if ((strcmp(r->device, "cpu") == 0) != c->gpu.cpu)
    return c->gpu.cpu ? "a run on GPUs; the cluster's ranks are CPU processes"
                      : "a run on CPUs, not on the cluster's GPUs";
  if (spec_model_load(r->model_json, &x->m, err) ||
      spec_cluster_load(r->cluster_json, 0, &x->c, err) || spec_plan_parse(r->plan_json, &x->p, err))
    return "a run whose stored specs do not load";
  if (spec_plan_resolve(&x->p, &x->m, &x->c, err)) return "a run whose plan does not resolve";
  be_cm_params(&x->m, &x->prm);
  in->obs[in->n] = (cal_obs){.kind = CAL_ITER, .id = r->score_id, .time_s = r->iter_time_s,
                             .model = &x->m, .cluster = &x->c, .plan = &x->p, .base = &x->prm};
  in->key[in->n] = r->run_key;
  in->run_of[in->n++] = (int)i;
  return NULL;
}

static void to_obs(inputs *in, const spec_cluster *c) {
  for (size_t i = 0; i < in->rows.n; i++) {
    const store_measurement *r = &in->rows.rows[i];
    const char *why;
    int of_run = strncmp(r->run_key, "run:", 4) == 0;
    if ((of_run || in->only) && !wanted(in, r->run_key)) continue; /* --from-search: its runs */
    if (!cal_obs_from_row(r, in->rows.ids[i], c, &in->obs[in->n], &why)) {
      skip(in, why);
      continue;
    }
    in->key[in->n] = of_run ? r->run_key : NULL;
    in->run_of[in->n++] = -1;
  }
  /* a run's GEMMs, ops, collectives: one observation per shape (runs repeat each layer's) */
  size_t n0 = in->n, unpaired = 0;
  in->n = cal_obs_merge(in->obs, in->key, in->n);
  in->merged = n0 - in->n;
  in->n = cal_obs_fold_attn(in->obs, in->key, in->n, &unpaired);
  for (size_t i = 0; i < in->n; i++) {
    const cal_obs *ob = &in->obs[i];
    in->folded += ob->kind == CAL_OP && ob->lop == CM_LOP_ATTN && ob->backward;
  }
  for (size_t k = 0; k < unpaired; k++)
    skip(in, "a backward attention without its score product (flash attention off)");
  for (size_t i = 0; i < in->nruns; i++) {
    if (!wanted(in, in->runs[i].run_key)) continue;
    pp_err e = {0};
    const char *why = run_obs(in, i, c, &e);
    if (why) skip(in, why);
  }
}

/* --holdout plans: a third of the runs (seeded), every observation of them, out of the fit. */
static int hold_out_plans(const cal_args *a, inputs *in) {
  int nr = 0, idx[4096];
  for (size_t i = 0; i < in->n && nr < 4096; i++)
    if (in->run_of[i] >= 0) idx[nr++] = (int)i;
  int k = (nr + 1) / 3;
  if (nr < 3) return 0;
  unsigned st = a->seed * 2654435761u + 1u;
  for (int i = nr - 1; i > 0; i--) {
    st = st * 1103515245u + 12345u;
    int j = (int)((st >> 8) % (unsigned)(i + 1)), t = idx[i];
    idx[i] = idx[j], idx[j] = t;
  }
  for (int h = 0; h < k; h++) {
    const char *key = in->key[idx[h]];
    for (size_t i = 0; i < in->n; i++)
      if (in->key[i] && strcmp(in->key[i], key) == 0) in->obs[i].aside = 1;
  }
  return k;
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

static const char *const kind_group[CAL_NKINDS] = {"collectives", "GEMMs", "ops", "iterations"};

/* Errors per kind of observation (fitted and held out), and the runs' Kendall tau. */
typedef struct fit_report {
  cal_group_error g[CAL_NKINDS + 1];
  int ng, nplans, nheld_plans;
  double tau_before, tau_after, held_tau_before, held_tau_after; /* NAN: fewer than 3 runs */
} fit_report;

static double runs_tau(const inputs *in, const cal_result *r, int held_only, int after) {
  double meas[4096], pred[4096];
  int k = 0;
  for (size_t i = 0; i < in->n && k < 4096; i++)
    if (in->run_of[i] >= 0 && (!held_only || r->held[i]))
      meas[k] = in->obs[i].time_s, pred[k++] = after ? r->after[i] : r->before[i];
  return k >= 3 ? study_kendall_tau(pred, meas, k, NULL, NULL) : NAN;
}

static void make_report(const inputs *in, const cal_result *r, fit_report *f) {
  const char **grp = malloc((in->n + 1) * sizeof *grp);
  memset(f, 0, sizeof *f);
  if (grp) {
    for (size_t i = 0; i < in->n; i++) grp[i] = kind_group[in->obs[i].kind];
    f->ng = cal_group_errors(in->obs, grp, in->n, r->before, r->after, NULL, f->g, CAL_NKINDS + 1);
    free(grp);
  }
  for (size_t i = 0; i < in->n; i++)
    if (in->run_of[i] >= 0) f->nplans++, f->nheld_plans += r->held[i];
  f->tau_before = runs_tau(in, r, 0, 0), f->tau_after = runs_tau(in, r, 0, 1);
  f->held_tau_before = runs_tau(in, r, 1, 0), f->held_tau_after = runs_tau(in, r, 1, 1);
}

/* Run k's plan as text ("-" for one that has none: non-uniform). */
static void plan_text(const inputs *in, int k, char text[SPEC_PLAN_STR_MAX]) {
  pp_err e = {0};
  if (spec_plan_format(&in->specs[k].p, text, SPEC_PLAN_STR_MAX, &e))
    snprintf(text, SPEC_PLAN_STR_MAX, "-");
}

/* The runs' plans: measured, predicted before and after, held out or fitted. */
static json_t *plans_json(const inputs *in, const cal_result *r) {
  json_t *arr = json_array();
  for (size_t i = 0; i < in->n; i++) {
    int k = in->run_of[i];
    if (k < 0) continue;
    char text[SPEC_PLAN_STR_MAX];
    plan_text(in, k, text);
    json_array_append_new(arr, json_pack("{s:I, s:s, s:s, s:f, s:f, s:f, s:b}", "plan_id",
                                         (json_int_t)in->runs[k].plan_id, "plan", text, "model",
                                         in->specs[k].m.name, "measured_s", in->obs[i].time_s,
                                         "before_s", r->before[i], "after_s", r->after[i],
                                         "held", r->held[i]));
  }
  return arr;
}

static json_t *kinds_json(const fit_report *f) {
  json_t *o = json_object();
  for (int k = 0; k < f->ng; k++) {
    const cal_group_error *g = &f->g[k];
    if (strcmp(g->name, "all") == 0) continue;
    json_object_set_new(o, g->name, json_pack("{s:i, s:i, s:f, s:f, s:f, s:f, s:f}", "fitted",
                                              g->n, "held_out", g->aside, "mape_before",
                                              g->mape_before, "mape_after", g->mape_after,
                                              "holdout_mape_before", g->aside_mape_before,
                                              "holdout_mape_after", g->aside_mape_after,
                                              "bias_before", g->bias_before));
  }
  return o;
}

static json_t *num_or_null(double v) { return isnan(v) ? json_null() : json_real(v); }

static void print_plans(const inputs *in, const cal_result *r, const fit_report *f) {
  printf("  %-6s %10s %10s %10s %16s %-8s %s\n", "id", "measured", "before", "after",
         "error b -> a", "", "plan");
  for (size_t i = 0; i < in->n; i++) {
    int k = in->run_of[i];
    if (k < 0) continue;
    char text[SPEC_PLAN_STR_MAX];
    plan_text(in, k, text);
    double m = in->obs[i].time_s;
    printf("  %-6lld %9.4fs %9.4fs %9.4fs %+6.1f%% %+6.1f%% %-8s %s\n",
           (long long)in->runs[k].plan_id, m, r->before[i], r->after[i],
           100 * (r->before[i] / m - 1), 100 * (r->after[i] / m - 1), r->held[i] ? "held" : "",
           text);
  }
  const spec_model *mr = &in->specs[in->run_of[in->n - 1]].m;
  printf("  model as run: %s (%d layers, hidden %d; `run --layers/--shrink` reduce it)\n",
         mr->name, mr->layers, mr->hidden);
  if (!isnan(f->tau_before))
    printf("  Kendall's tau, predicted vs measured iteration: %+.2f -> %+.2f over %d runs",
           f->tau_before, f->tau_after, f->nplans);
  if (!isnan(f->held_tau_before))
    printf("; held out %+.2f -> %+.2f", f->held_tau_before, f->held_tau_after);
  if (!isnan(f->tau_before)) putchar('\n');
}

static void print_fit(const cal_result *r, const inputs *in, const fit_report *f,
                      const spec_cluster *c, int64_t id, const char *db) {
  size_t nk[CAL_NKINDS] = {0};
  for (size_t i = 0; i < in->n; i++) nk[in->obs[i].kind]++;
  printf("calibrate %s (%d %s): %zu measurements (%zu collectives, %zu GEMMs, %zu other ops, "
         "%zu iterations), %zu fitted, %zu held out\n", c->name, c->gpus,
         c->gpu.cpu ? "ranks" : "GPUs", in->n, nk[CAL_COLL], nk[CAL_GEMM], nk[CAL_OP],
         nk[CAL_ITER], r->nfit, r->nheld);
  if (in->merged)
    printf("  merged: %zu repeats of an op's shape within a run (one observation per shape, the "
           "mean time)\n", in->merged);
  if (in->folded)
    printf("  folded: %zu backward attentions (two passes and the score product, one observation "
           "of the whole backward; the product also a GEMM)\n", in->folded);
  for (int k = 0; k < in->nwhy; k++) printf("  left out: %d, %s\n", in->why_n[k], in->why[k]);
  print_params(r);
  print_unfitted(r, 0, "  not informed (kept): ");
  print_unfitted(r, 1, "  undetermined, left at their prior: ");
  printf("  %-26s %8s %8s\n", "error (MAPE)", "before", "after");
  printf("    %-24s %7.2f%% %7.2f%%   (bias %+.2f%% -> %+.2f%%)\n", "fitted", r->mape_before,
         r->mape_after, r->bias_before, r->bias_after);
  if (r->nheld)
    printf("    %-24s %7.2f%% %7.2f%%\n", "held out", r->held_mape_before, r->held_mape_after);
  for (int k = 0; f->ng > 2 && k < f->ng; k++) {
    const cal_group_error *g = &f->g[k];
    if (strcmp(g->name, "all") == 0) continue;
    if (g->n)
      printf("    %-12s fitted (%3d) %7.2f%% %7.2f%%\n", g->name, g->n, g->mape_before, g->mape_after);
    if (g->aside)
      printf("    %-12s held   (%3d) %7.2f%% %7.2f%%\n", g->name, g->aside, g->aside_mape_before,
             g->aside_mape_after);
  }
  cal_range_error re[CAL_NRANGES];
  cal_range_errors(r, in->obs, re);
  for (int k = 0; k < CAL_NRANGES; k++)
    if (re[k].n)
      printf("    collectives %-12s %7.2f%% %7.2f%%   (%d)\n", re[k].range, re[k].mape_before,
             re[k].mape_after, re[k].n);
  if (f->nplans) print_plans(in, r, f);
  printf("  RMS of log(predicted / measured), fitted: %.4f -> %.4f (what the fit lowers)\n",
         r->fit_error_before, r->fit_error);
  printf("  %d iterations; calibration %lld stored in %s\n", r->iterations, (long long)id, db);
}

static void print_json(const cal_result *r, const inputs *in, const fit_report *f, int64_t id) {
  json_t *ni, *un, *pf = params_fitted_json(r, &ni, &un), *sk = json_object();
  for (int k = 0; k < in->nwhy; k++) json_object_set_new(sk, in->why[k], json_integer(in->why_n[k]));
  char *sum = cal_summary_json(r, in->obs);
  json_t *o = sum ? json_loads(sum, 0, NULL) : json_object();
  free(sum);
  json_object_set_new(o, "calibration_id", json_integer(id));
  json_object_set_new(o, "params_fitted", pf);
  json_object_set_new(o, "not_informed", ni);
  json_object_set_new(o, "undetermined", un);
  json_object_set_new(o, "skipped", sk);
  json_object_set_new(o, "merged", json_integer((json_int_t)in->merged));
  json_object_set_new(o, "folded", json_integer((json_int_t)in->folded));
  json_object_set_new(o, "by_kind", kinds_json(f));
  if (f->nplans) {
    json_object_set_new(o, "plans", plans_json(in, r));
    json_object_set_new(o, "kendall_tau_before", num_or_null(f->tau_before));
    json_object_set_new(o, "kendall_tau_after", num_or_null(f->tau_after));
    json_object_set_new(o, "holdout_kendall_tau_before", num_or_null(f->held_tau_before));
    json_object_set_new(o, "holdout_kendall_tau_after", num_or_null(f->held_tau_after));
  }
  json_dumpf(o, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
  putchar('\n');
  json_decref(o);
}

/* --plots DIR: the calibration's plots (the folder made with its missing parents). */
static int plots(const cal_args *a, long long id, const char *what, const cal_result *r,
                 const cal_obs *obs, pp_err *err) {
  if (!a->plots) return PP_OK;
  if (pp_mkdirs(a->plots, err)) return err->code;
  char tag[64], title[160];
  snprintf(tag, sizeof tag, "calibration-%lld", id);
  snprintf(title, sizeof title, "calibration %lld (%s)", id, what);
  return cal_plots(a->plots, tag, title, r, obs, err);
}

/* What a calibration was fitted to (its inputs_json). */
static char *inputs_json(const cal_args *a, const inputs *in, int nheld_plans) {
  json_t *ids = json_array(), *keys = json_array();
  for (size_t i = 0; i < in->n; i++) {
    json_array_append_new(ids, json_integer(in->obs[i].id));
    if (in->run_of[i] >= 0) json_array_append_new(keys, json_string(in->key[i]));
  }
  json_t *o = json_pack("{s:s, s:s?, s:o, s:o}", "selection",
                        a->search ? "from-search" : "cluster name", "kind", a->kind,
                        "measurement_ids", ids, "run_keys", keys);
  if (a->search) {
    json_object_set_new(o, "spread", json_boolean(a->spread));
    json_object_set_new(o, "search_run", json_integer(a->search));
    json_object_set_new(o, "top", json_integer(a->top));
    json_object_set_new(o, "launch", json_string(a->launch));
  }
  if (a->holdout_plans) json_object_set_new(o, "held_out_plans", json_integer(nheld_plans));
  char *s = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  return s;
}

/* The fit and its calibration row (one transaction). */
static int fit_and_store(const cal_args *a, const spec_cluster *c, inputs *in, pp_err *err) {
  /* collectives and GEMMs do not depend on the model (a run's ops take the dtype of the first
   * run's), a run's iteration on its own */
  spec_model m;
  int k = -1;
  for (size_t i = 0; i < in->n && k < 0; i++) k = in->run_of[i];
  if (k >= 0) m = in->specs[k].m;
  else if (spec_model_load("gpt3-175b", &m, err)) return err->code;
  cm_params prior;
  cm_params_default(&m, &prior);
  char buf[1024];
  const char *names[64];
  cal_opts o = {.holdout = a->holdout, .seed = a->seed, .robust = a->robust};
  int nheld_plans = a->holdout_plans ? hold_out_plans(a, in) : 0;
  if (a->holdout_plans && nheld_plans == 0)
    return pp_err_set(err, PP_INPUT, "--holdout plans: %s has fewer than 3 runs of the cluster's "
                      "ranks to hold some out", a->db);
  if (a->fit) {
    if (fit_names(a->fit, buf, sizeof buf, names, 64) < 1)
      return pp_err_set(err, PP_INPUT, "--fit: give parameter names separated by commas");
    o.names = names;
  }
  cal_result r;
  int rc = cal_fit(&m, c, &prior, in->obs, in->n, &o, &r, err);
  if (rc) return rc;
  fit_report f;
  make_report(in, &r, &f);
  char *pj = cal_params_json(&r), *rj = cal_residuals_json(&r, in->obs);
  char *sum = cal_summary_json(&r, in->obs), *hj = NULL;
  json_t *sj = sum ? json_loads(sum, 0, NULL) : NULL;
  if (sj) {
    json_object_set_new(sj, "by_kind", kinds_json(&f));
    if (f.nplans) json_object_set_new(sj, "plans", plans_json(in, &r));
    hj = json_dumps(sj, JSON_COMPACT);
  }
  json_decref(sj);
  free(sum);
  char *ij = inputs_json(a, in, nheld_plans);
  store_calibration cal = {.method = a->robust ? "gsl-nlinear-lm+cauchy" : "gsl-nlinear-lm",
                           .params_json = pj, .inputs_json = ij, .residuals_json = rj,
                           .fit_error = r.fit_error, .holdout_json = hj};
  if (!pj || !rj || !hj || !ij) rc = pp_err_set(err, PP_NOMEM, "calibrate: out of memory");
  if (!rc) rc = store_save_calibration(a->db, c, &cal, err);
  if (!rc) rc = plots(a, cal.id, c->name, &r, in->obs, err);
  if (!rc && a->json) print_json(&r, in, &f, cal.id);
  if (!rc && !a->json) print_fit(&r, in, &f, c, cal.id, a->db);
  free(pj), free(rj), free(hj), free(ij);
  cal_result_free(&r);
  return rc;
}

/* ---- --from-search: the top plans of a search run on the backend, then fitted ------------- */

extern char **environ;

/* Runs one plan: launch words + this program's `run`, its JSON read from a pipe. The run's
 * key (malloc'd) and measured time on success. */
static int launch_plan(const cal_args *a, int64_t plan_id, const char *model_json,
                       const char *cluster_json, const char *self, char **key, double *meas,
                       pp_err *err) {
  char words[1024], id[32], iters[16], layers[16], shrink[16];
  if (strlen(a->launch) >= sizeof words)
    return pp_err_set(err, PP_USAGE, "--launch: longer than %zu characters", sizeof words - 1);
  strcpy(words, a->launch);
  char *argv[96];
  int n = 0;
  for (char *save = NULL, *t = strtok_r(words, " \t", &save); t && n < 64;
       t = strtok_r(NULL, " \t", &save))
    argv[n++] = t;
  snprintf(id, sizeof id, "%lld", (long long)plan_id);
  snprintf(iters, sizeof iters, "%d", a->iters);
  const char *tail[] = {self, "run", "--plan-id", id, "--model", model_json, "--cluster",
                        cluster_json, "--db", a->db, "--device", a->device, "--iters", iters,
                        "--json", NULL};
  for (int k = 0; tail[k]; k++) argv[n++] = (char *)tail[k];
  if (a->layers) {
    snprintf(layers, sizeof layers, "%d", a->layers);
    argv[n++] = "--layers", argv[n++] = layers;
  }
  if (a->shrink > 1) {
    snprintf(shrink, sizeof shrink, "%d", a->shrink);
    argv[n++] = "--shrink", argv[n++] = shrink;
  }
  argv[n] = NULL;
  int fd[2];
  if (pipe(fd)) return pp_err_set(err, PP_IO, "--launch: pipe: %s", strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fd[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&fa, fd[0]);
  pid_t pid;
  int st = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fd[1]);
  if (st) {
    close(fd[0]);
    return pp_err_set(err, PP_USAGE, "--launch: cannot start '%s': %s", argv[0], strerror(st));
  }
  size_t len = 0, cap = 4096;
  char *out = malloc(cap);
  ssize_t got;
  while (out && (got = read(fd[0], out + len, cap - len - 1)) > 0)
    if ((len += (size_t)got) + 1 == cap) {
      char *bigger = realloc(out, cap *= 2);
      if (!bigger) free(out);
      out = bigger;
    }
  close(fd[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  if (!out) return pp_err_set(err, PP_NOMEM, "calibrate: out of memory");
  out[len] = 0;
  int rc = PP_OK;
  if (!WIFEXITED(status) || WEXITSTATUS(status)) {
    rc = pp_err_set(err, PP_DEVICE, "--from-search: plan %lld: '%s ... run' %s %d (its error is "
                    "above)", (long long)plan_id, a->launch,
                    WIFEXITED(status) ? "exited with status" : "was killed by signal",
                    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  } else {
    /* mpirun passes on rank 0's JSON; the object is the last thing printed */
    const char *brace = strchr(out, '{');
    json_t *j = brace ? json_loads(brace, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
    const char *k = json_string_value(json_object_get(j, "run_key"));
    *meas = json_number_value(json_object_get(j, "iter_time_s"));
    if (!k || !(*meas > 0))
      rc = pp_err_set(err, PP_DEVICE, "--from-search: plan %lld: the run printed no iteration "
                      "time and run key", (long long)plan_id);
    else if (!(*key = strdup(k)))
      rc = pp_err_set(err, PP_NOMEM, "calibrate: out of memory");
    json_decref(j);
  }
  free(out);
  return rc;
}

/* Runs the top K plans of search run a->search; their keys in keys[] (NULL-terminated). */
#define CAL_RANKED_MAX 4096 /* plans of a search's ranking --spread picks from */

static int launch_top(cal_args *a, spec_cluster *c, char **keys, pp_err *err) {
  int64_t *ids = malloc(CAL_RANKED_MAX * sizeof *ids);
  double *secs = malloc(CAL_RANKED_MAX * sizeof *secs);
  int n = 0;
  if (!ids || !secs) {
    free(ids), free(secs);
    return pp_err_set(err, PP_NOMEM, "calibrate: out of memory");
  }
  char *mj = NULL, *cj = NULL, self[4096];
  store *s = NULL;
  store_opts ro = {.readonly = 1};
  int rc = store_open(a->db, &ro, &s, err);
  if (!rc) rc = store_get_search_top(s, a->search, a->spread ? CAL_RANKED_MAX : a->top, ids, secs,
                                     &n, &mj, &cj, err);
  store_close(s);
  if (!rc && a->spread && n > a->top) { /* K of the ranking, first and last included */
    for (int i = 0; i < a->top; i++) {
      int at = a->top > 1 ? (int)((double)i * (n - 1) / (a->top - 1) + 0.5) : 0;
      ids[i] = ids[at], secs[i] = secs[at];
    }
    n = a->top;
  }
  if (!rc) rc = spec_cluster_load(cj, 0, c, err);
  if (!rc && !a->device) a->device = c->gpu.cpu ? "cpu" : "cuda";
  if (!rc && (strcmp(a->device, "cpu") == 0) != c->gpu.cpu)
    rc = pp_err_set(err, PP_USAGE, "--device %s: search run %lld is on %s, whose ranks are %s "
                    "(search a cluster of this device's ranks, e.g. cpu-host for --device cpu)",
                    a->device, a->search, c->name, c->gpu.cpu ? "CPU processes" : "GPUs");
  if (!rc && n == 0)
    rc = pp_err_set(err, PP_INPUT, "%s: search run %lld has no feasible plan to run", a->db,
                    a->search);
  ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
  if (!rc && sl <= 0) rc = pp_err_set(err, PP_IO, "/proc/self/exe: %s", strerror(errno));
  if (!rc) self[sl] = 0;
  int tty = isatty(STDERR_FILENO);
  if (!rc && n < a->top)
    fprintf(stderr, "podplan calibrate: search run %lld has %d feasible plans; running all of "
            "them\n", a->search, n);
  for (int i = 0; !rc && i < n; i++) {
    double meas = 0;
    if (tty) fprintf(stderr, "\rpodplan calibrate: running plan %d of %d (id %lld) ...", i + 1, n,
                     (long long)ids[i]);
    rc = launch_plan(a, ids[i], mj, cj, self, &keys[i], &meas, err);
    if (tty && !rc) fprintf(stderr, " %.4f s", meas);
  }
  if (tty && n) fputc('\n', stderr);
  free(mj), free(cj), free(ids), free(secs);
  return rc;
}

static int calibrate_from_search(const cal_args *in_args) {
  cal_args a = *in_args;
  pp_err err = {0};
  spec_cluster cl;
  char *keys[257] = {0}; /* --top is at most 256 */
  inputs in = {0};
  int rc = launch_top(&a, &cl, keys, &err);
  in.only = (const char *const *)keys;
  if (!rc) rc = read_inputs(&a, cl.name, &in, &err);
  if (!rc) {
    to_obs(&in, &cl);
    rc = fit_and_store(&a, &cl, &in, &err);
  }
  inputs_free(&in);
  for (int i = 0; keys[i]; i++) free(keys[i]);
  return rc ? cli_fail(CMD, &err) : 0;
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
    json_t *ni, *un, *pf = params_fitted_json(&f->r, &ni, &un);
    json_t *o = json_pack("{s:o, s:i, s:I, s:I, s:i, s:o, s:o, s:o, s:i, s:o, s:f, s:f}",
                          "calibration_ids", ids, "measurements", f->n, "fitted",
                          (json_int_t)f->r.nfit, "aside", (json_int_t)f->r.nheld, "skipped",
                          f->skipped, "params_fitted", pf, "not_informed", ni, "undetermined", un,
                          "folds", a->folds, "by_source", groups_json(f), "rms_log_before",
                          f->r.fit_error_before, "rms_log_after", f->r.fit_error);
    json_object_set_new(o, "ranking", ranking_json(f));
    json_dumpf(o, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
    putchar('\n');
    json_decref(o);
    return;
  }
  printf("calibrate --runs %s: %d runs (%zu fitted, %zu kept aside, %d rows not usable), %d folds\n",
         a->runs, f->n, f->r.nfit, f->r.nheld, f->skipped, a->folds);
  print_params(&f->r);
  print_unfitted(&f->r, 1, "  undetermined, left at their prior: ");
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
  static const struct option longs[] = {
      {"cluster", required_argument, NULL, 'c'}, {"gpus", required_argument, NULL, 'g'},
      {"db", required_argument, NULL, 'd'},      {"kind", required_argument, NULL, 'k'},
      {"fit", required_argument, NULL, 'f'},     {"holdout", required_argument, NULL, 'H'},
      {"seed", required_argument, NULL, 's'},    {"robust", no_argument, NULL, 'r'},
      {"show", required_argument, NULL, 'S'},    {"json", no_argument, NULL, 'j'},
      {"runs", required_argument, NULL, 'R'},    {"folds", required_argument, NULL, 'F'},
      {"plots", required_argument, NULL, 'G'},   {"from-search", required_argument, NULL, 'X'},
      {"top", required_argument, NULL, 'K'},     {"launch", required_argument, NULL, 'L'},
      {"device", required_argument, NULL, 'D'},  {"layers", required_argument, NULL, 'l'},
      {"shrink", required_argument, NULL, 'W'},  {"iters", required_argument, NULL, 'n'},
      {"spread", no_argument, NULL, 'p'},
      {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
  cal_args a = {.db = STORE_DEFAULT_PATH, .seed = 1, .folds = 5, .top = 12, .iters = 3};
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
      if (strcmp(optarg, "coll") && strcmp(optarg, "gemm") && strcmp(optarg, "iter"))
        return cli_usage_error(CMD, "--kind: '%s' is not coll, gemm or iter", optarg);
      a.kind = optarg;
      break;
    case 'f': a.fit = optarg; break;
    case 'H':
      if (strcmp(optarg, "plans") == 0) {
        a.holdout_plans = 1;
        break;
      }
      a.holdout = strtod(optarg, &end);
      if (end == optarg || *end || !(a.holdout >= 0 && a.holdout <= 0.9))
        return cli_usage_error(CMD, "--holdout: '%s' is not a fraction 0 .. 0.9 or 'plans'",
                               optarg);
      break;
    case 'X': {
      int id = 0;
      if (cli_int(CMD, "--from-search", optarg, 1, 2147483647, &id)) return 2;
      a.search = id;
      break;
    }
    case 'K':
      if (cli_int(CMD, "--top", optarg, 1, 256, &a.top)) return 2;
      break;
    case 'L': a.launch = optarg; break;
    case 'D':
      if (strcmp(optarg, "cpu") && strcmp(optarg, "cuda"))
        return cli_usage_error(CMD, "--device: '%s' is not cpu or cuda", optarg);
      a.device = optarg;
      break;
    case 'l':
      if (cli_int(CMD, "--layers", optarg, 1, 100000, &a.layers)) return 2;
      break;
    case 'W':
      if (cli_int(CMD, "--shrink", optarg, 1, 1024, &a.shrink)) return 2;
      break;
    case 'n':
      if (cli_int(CMD, "--iters", optarg, 1, 100000, &a.iters)) return 2;
      break;
    case 'p': a.spread = 1; break;
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
  if ((a.launch || a.device || a.layers || a.shrink || a.spread) && !a.search)
    return cli_usage_error(CMD, "--launch, --device, --layers, --shrink and --spread go with "
                                "--from-search");
  if (a.search) {
    if (!a.launch) return cli_usage_error(CMD, "--from-search needs --launch (e.g. \"mpirun -n 4\")");
    if (a.cluster || a.runs || a.kind)
      return cli_usage_error(CMD, "--from-search takes no --cluster, --runs or --kind (the "
                                  "search run names its cluster)");
    pp_err perr = {0}; /* the plots' folder before the runs: one that cannot be made fails now */
    if (a.plots && pp_mkdirs(a.plots, &perr)) return cli_fail(CMD, &perr);
    return calibrate_from_search(&a);
  }
  if (a.runs) {
    if (a.cluster || a.kind || a.holdout > 0 || a.holdout_plans)
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
