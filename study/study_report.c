/* podplan report (study.h, "reports"): what a store holds, as tables and plots. Reads the store
 * through store_report_* (read-only), derives the method comparison and the calibrations'
 * errors, and builds one table per section; one printer each writes a table as text, as CSV
 * and as markdown (report.md), and a section with rows draws its plot with gnuplot
 * (study_plot). The sections are the rows of one table (`sections` below). Depends on store.h,
 * Jansson (the runs' params, the calibrations' residuals) and study_plot.c. */
#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "podplan/fs.h"
#include "podplan/store.h"
#include "podplan/study.h"
#include "study_int.h"

/* Appends to b (n bytes) at *k, never past its end. */
static void appendf(char *b, size_t n, size_t *k, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static void appendf(char *b, size_t n, size_t *k, const char *fmt, ...) {
  if (*k >= n) return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(b + *k, n - *k, fmt, ap);
  va_end(ap);
  if (w > 0) *k = *k + (size_t)w < n ? *k + (size_t)w : n - 1;
}

/* ---- a table of cells, text or numbers, and its three printers ----------------------------- */

typedef struct rcol {
  const char *csv;  /* CSV header */
  const char *head; /* text and markdown header; NULL: the column is in the CSV only */
  const char *fmt;  /* printf of a number in text and markdown; NULL: a text column */
} rcol;

typedef struct rtab {
  const rcol *cols;
  int ncols;
  char **text;   /* [cell]: a text cell's text (owned; NULL: empty) */
  double *num;   /* [cell]: a number cell's value (NAN: empty) */
  size_t n, cap; /* cells */
  int oom;       /* a cell could not be added */
} rtab;

static int rt_grow(rtab *t) {
  if (t->oom) return 1;
  if (t->n < t->cap) return 0;
  size_t c = t->cap ? 2 * t->cap : 64;
  char **x = realloc(t->text, c * sizeof *x);
  if (x) t->text = x;
  double *v = x ? realloc(t->num, c * sizeof *v) : NULL;
  if (v) t->num = v;
  if (!x || !v) return t->oom = 1;
  t->cap = c;
  return 0;
}

static void rt_text(rtab *t, const char *s) {
  if (rt_grow(t)) return;
  t->text[t->n] = s ? strdup(s) : NULL;
  t->num[t->n++] = NAN;
  if (s && !t->text[t->n - 1]) t->oom = 1;
}

static void rt_num(rtab *t, double v) {
  if (rt_grow(t)) return;
  t->text[t->n] = NULL;
  t->num[t->n++] = v;
}

static size_t rt_rows(const rtab *t) { return t->n / (size_t)t->ncols; }

static void rt_free(rtab *t) {
  for (size_t i = 0; i < t->n; i++) free(t->text[i]);
  free(t->text), free(t->num);
  memset(t, 0, sizeof *t);
}

/* Cell i as text: a text cell's own text, or the number formatted into buf (csv: every digit
 * that matters; empty cells "" in a CSV, "-" elsewhere). */
static const char *cell(const rtab *t, size_t i, int csv, char *buf, size_t n) {
  const rcol *c = &t->cols[i % (size_t)t->ncols];
  if (!c->fmt) return t->text[i] ? t->text[i] : (csv ? "" : "-");
  if (isnan(t->num[i])) return csv ? "" : "-";
  snprintf(buf, n, csv ? "%.10g" : c->fmt, t->num[i]);
  return buf;
}

#define RT_MAXCOLS 24

static void print_text(FILE *f, const rtab *t) {
  size_t w[RT_MAXCOLS] = {0}, rows = rt_rows(t);
  char buf[64];
  int last = -1;
  for (int j = 0; j < t->ncols; j++)
    if (t->cols[j].head) w[j] = strlen(t->cols[j].head), last = j;
  for (size_t i = 0; i < t->n; i++) {
    size_t j = i % (size_t)t->ncols, l = strlen(cell(t, i, 0, buf, sizeof buf));
    if (t->cols[j].head && l > w[j]) w[j] = l;
  }
  for (size_t r = 0; r <= rows; r++) { /* row 0: the header */
    fputs("  ", f);
    for (int j = 0; j < t->ncols; j++) {
      if (!t->cols[j].head) continue;
      const char *s = r ? cell(t, (r - 1) * t->ncols + j, 0, buf, sizeof buf) : t->cols[j].head;
      int left = !t->cols[j].fmt;
      fprintf(f, left ? "%-*s" : "%*s", j == last && left ? 0 : (int)w[j], s);
      if (j != last) fputs("  ", f);
    }
    fputc('\n', f);
  }
}

static void print_csv(FILE *f, const rtab *t) {
  char buf[64];
  for (int j = 0; j < t->ncols; j++) fprintf(f, "%s%s", j ? "," : "", t->cols[j].csv);
  fputc('\n', f);
  for (size_t i = 0; i < t->n; i++) {
    study__csv_field(f, cell(t, i, 1, buf, sizeof buf));
    fputc((i + 1) % (size_t)t->ncols ? ',' : '\n', f);
  }
}

static void print_md(FILE *f, const rtab *t) {
  char buf[64];
  for (int pass = 0; pass < 2; pass++) {
    for (int j = 0; j < t->ncols; j++)
      if (t->cols[j].head)
        fprintf(f, "| %s ", pass ? (t->cols[j].fmt ? "---:" : "---") : t->cols[j].head);
    fputs("|\n", f);
  }
  for (size_t i = 0; i < t->n; i++) {
    size_t j = i % (size_t)t->ncols;
    if (t->cols[j].head) {
      fputs("| ", f);
      for (const char *s = cell(t, i, 0, buf, sizeof buf); *s; s++)
        fputs(*s == '|' ? "\\|" : (char[2]){*s, 0}, f);
      fputc(' ', f);
    }
    if (j + 1 == (size_t)t->ncols) fputs("|\n", f);
  }
}

/* ---- what the report read, and what it derives ---------------------------------------------- */

/* One set of comparable search runs and one method's best in it. */
typedef struct mrow {
  int set;            /* index into rpt.sets */
  int rank;           /* the method's place in method_order (or after them, by name) */
  char method[64];     /* the method and its variant (method_label) */
  int runs;
  double best_s;      /* the fastest best_iter_time_s of its runs */
  int64_t best_run;
  double vs_fastest;  /* best_s / the set's fastest */
} mrow;

/* A calibration's mean absolute errors, percent, from its residuals (NAN: none). */
typedef struct calerr {
  int n, held;            /* measurements; of them held out of the fit */
  double fb, fa, hb, ha;  /* fitted before/after, held out before/after */
} calerr;

typedef struct rpt {
  int version;
  store_report_run *runs;
  size_t nruns;
  store_report_pair *val, *sim;
  size_t nval, nsim;
  store_calibration *cals;
  size_t ncals;
  store_report_study *studies;
  size_t nstudies;
  store_report_trace *traces;
  size_t ntraces;
  char (*sets)[2048];  /* labels of the sets of comparable runs */
  int nsets;
  mrow *m;
  int nm;
  calerr *ce;         /* [ncals] */
} rpt;

static void rpt_free(rpt *r) {
  store_report_runs_free(r->runs, r->nruns);
  store_report_pairs_free(r->val, r->nval);
  store_report_pairs_free(r->sim, r->nsim);
  store_report_calibrations_free(r->cals, r->ncals);
  store_report_studies_free(r->studies, r->nstudies);
  store_report_traces_free(r->traces, r->ntraces);
  free(r->sets), free(r->m), free(r->ce);
}

static int rpt_read(const char *db, rpt *r, pp_err *err) {
  store *s = NULL;
  int rc = store_report_open(db, &s, &r->version, err);
  if (!rc) rc = store_report_runs(s, &r->runs, &r->nruns, err);
  if (!rc) rc = store_report_pairs(s, STORE_SRC_PUBLISHED, &r->val, &r->nval, err);
  if (!rc) rc = store_report_pairs(s, STORE_SRC_SIM, &r->sim, &r->nsim, err);
  if (!rc) rc = store_report_calibrations(s, &r->cals, &r->ncals, err);
  if (!rc) rc = store_report_studies(s, &r->studies, &r->nstudies, err);
  if (!rc) rc = store_report_traces(s, &r->traces, &r->ntraces, err);
  store_close(s);
  return rc;
}

/* The search methods in the order the comparison shows them; others follow by name. */
static const char *const method_order[] = {"exhaustive", "megatron", "two-level", "global"};
#define NMETHOD_ORDER ((int)(sizeof method_order / sizeof method_order[0]))

static int method_rank(const char *m) { /* m: a method or its label (the method first) */
  size_t n = strcspn(m, " ");
  for (int i = 0; i < NMETHOD_ORDER; i++)
    if (strlen(method_order[i]) == n && strncmp(m, method_order[i], n) == 0) return i;
  return NMETHOD_ORDER;
}

static int mrow_cmp(const void *a, const void *b) {
  const mrow *x = a, *y = b;
  if (x->set != y->set) return x->set - y->set;
  if (x->rank != y->rank) return x->rank - y->rank;
  return strcmp(x->method, y->method);
}

/* The label of a run's set of comparable runs: model, cluster, GPUs, global batch, the
 * space restrictions and the cost model's calibration and parameters (from its params: runs
 * on another cost model are not compared). */
static void set_label(const store_report_run *u, char *buf, size_t n) {
  json_t *pj = u->params_json ? json_loads(u->params_json, 0, NULL) : NULL;
  long long gbs = json_integer_value(json_object_get(pj, "gbs"));
  long long cal = json_integer_value(json_object_get(pj, "calibration_id"));
  const char *space = json_string_value(json_object_get(pj, "space"));
  const char *param = json_string_value(json_object_get(pj, "param"));
  int k = snprintf(buf, n, "%s on %s, %d GPUs", u->model, u->cluster, u->gpus);
  if (gbs > 0 && k >= 0 && (size_t)k < n) k += snprintf(buf + k, n - k, ", gbs %lld", gbs);
  if (space && *space && k >= 0 && (size_t)k < n) k += snprintf(buf + k, n - k, ", %s", space);
  if (cal > 0 && k >= 0 && (size_t)k < n) k += snprintf(buf + k, n - k, ", calibration %lld", cal);
  if (param && *param && k >= 0 && (size_t)k < n) snprintf(buf + k, n - k, ", param %s", param);
  json_decref(pj);
}

/* A run's method with the options that make it another search: two-level's island, Alpa's
 * defaults and layer clusters (the pillar study runs three variants on one case). */
static void method_label(const store_report_run *u, char *buf, size_t n) {
  json_t *pj = u->params_json ? json_loads(u->params_json, 0, NULL) : NULL;
  const char *island = json_string_value(json_object_get(pj, "island"));
  int alpa = json_is_true(json_object_get(pj, "alpa_defaults"));
  long long lc = json_integer_value(json_object_get(pj, "layer_clusters"));
  int k = snprintf(buf, n, "%s", u->method);
  if (strcmp(u->method, "two-level") == 0 && k >= 0 && (size_t)k < n) {
    int open = !alpa && (!island || strcmp(island, "domain") != 0) && lc <= 0;
    k += snprintf(buf + k, n - (size_t)k, "%s%s%s", alpa ? " alpa-defaults" : "",
                  island && strcmp(island, "domain") == 0 ? " island=domain" : "",
                  open ? " open" : "");
    if (lc > 0 && k >= 0 && (size_t)k < n) snprintf(buf + k, n - (size_t)k, " clusters=%lld", lc);
  }
  json_decref(pj);
}

/* The method comparison: finished runs with a best plan, grouped by set and method (with its
 * variant: method_label). */
static int derive_methods(rpt *r, pp_err *err) {
  r->sets = calloc(r->nruns + 1, sizeof *r->sets);
  r->m = calloc(r->nruns + 1, sizeof *r->m);
  if (!r->sets || !r->m) return pp_err_set(err, PP_NOMEM, "report: out of memory");
  for (size_t i = 0; i < r->nruns; i++) {
    const store_report_run *u = &r->runs[i];
    if (strcmp(u->status, "done") != 0 || !(u->best_iter_time_s > 0)) continue;
    char label[2048];
    set_label(u, label, sizeof label);
    int g = 0, k = 0;
    while (g < r->nsets && strcmp(r->sets[g], label) != 0) g++;
    if (g == r->nsets) memcpy(r->sets[r->nsets++], label, sizeof label);
    char meth[64];
    method_label(u, meth, sizeof meth);
    while (k < r->nm && !(r->m[k].set == g && strcmp(r->m[k].method, meth) == 0)) k++;
    if (k == r->nm) {
      mrow *x = &r->m[r->nm++];
      *x = (mrow){g, method_rank(u->method), "", 0, INFINITY, 0, NAN};
      memcpy(x->method, meth, sizeof meth);
    }
    mrow *x = &r->m[k];
    x->runs++;
    if (u->best_iter_time_s < x->best_s) x->best_s = u->best_iter_time_s, x->best_run = u->id;
  }
  qsort(r->m, (size_t)r->nm, sizeof *r->m, mrow_cmp);
  for (int k = 0; k < r->nm; k++) {
    double fastest = INFINITY;
    for (int j = 0; j < r->nm; j++)
      if (r->m[j].set == r->m[k].set && r->m[j].best_s < fastest) fastest = r->m[j].best_s;
    r->m[k].vs_fastest = r->m[k].best_s / fastest;
  }
  return PP_OK;
}

/* MAPE before and after over the fitted and the held-out measurements of a calibration's
 * residuals ([{measured_s, before_s, after_s, held}]); the summary's figures when it has none. */
static calerr cal_errors(const store_calibration *c) {
  calerr e = {0, 0, NAN, NAN, NAN, NAN};
  json_t *res = c->residuals_json ? json_loads(c->residuals_json, 0, NULL) : NULL;
  double s[2][2] = {{0}}; /* [held][after] */
  int n[2] = {0};
  for (size_t i = 0; i < json_array_size(res); i++) {
    json_t *x = json_array_get(res, i);
    double meas = json_number_value(json_object_get(x, "measured_s"));
    if (!(meas > 0)) continue;
    int h = json_is_true(json_object_get(x, "held"));
    s[h][0] += fabs(json_number_value(json_object_get(x, "before_s")) / meas - 1);
    s[h][1] += fabs(json_number_value(json_object_get(x, "after_s")) / meas - 1);
    n[h]++;
  }
  json_decref(res);
  e.n = n[0] + n[1], e.held = n[1];
  if (n[0]) e.fb = 100 * s[0][0] / n[0], e.fa = 100 * s[0][1] / n[0];
  if (n[1]) e.hb = 100 * s[1][0] / n[1], e.ha = 100 * s[1][1] / n[1];
  if (e.n) return e;
  json_t *h = c->holdout_json ? json_loads(c->holdout_json, 0, NULL) : NULL;
  static const struct {
    const char *key;
    size_t off;
  } keys[] = {{"mape_before", offsetof(calerr, fb)},
              {"mape_after", offsetof(calerr, fa)},
              {"holdout_mape_before", offsetof(calerr, hb)},
              {"holdout_mape_after", offsetof(calerr, ha)}};
  for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
    if (json_is_number(json_object_get(h, keys[k].key)))
      *(double *)((char *)&e + keys[k].off) = json_number_value(json_object_get(h, keys[k].key));
  e.n = (int)json_integer_value(json_object_get(h, "measurements"));
  e.held = (int)json_integer_value(json_object_get(h, "held_out"));
  json_decref(h);
  return e;
}

static int derive(rpt *r, pp_err *err) {
  if (derive_methods(r, err)) return err->code;
  r->ce = calloc(r->ncals + 1, sizeof *r->ce);
  if (!r->ce) return pp_err_set(err, PP_NOMEM, "report: out of memory");
  for (size_t i = 0; i < r->ncals; i++) r->ce[i] = cal_errors(&r->cals[i]);
  return PP_OK;
}

/* ---- the sections' tables ------------------------------------------------------------------ */

static double id_or_nan(int64_t id) { return id ? (double)id : NAN; }
static double pct(double x, double ref) { return 100 * (x / ref - 1); }

/* Whether a trace file is there now, and its size (NAN when not). */
static int trace_there(const char *path, double *size) {
  struct stat sb;
  int there = stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
  *size = there ? (double)sb.st_size : NAN;
  return there;
}

static const rcol run_cols[] = {
    {"id", "run", "%.0f"},          {"model", "model", NULL},
    {"cluster", "cluster", NULL},   {"gpus", "GPUs", "%.0f"},
    {"gbs", "gbs", "%.0f"},         {"method", "method", NULL},
    {"status", "status", NULL},     {"evaluations", "evals", "%.0f"},
    {"plans_found", "plans", "%.0f"}, {"wall_s", "wall s", "%.2f"},
    {"best_iter_time_s", "best s", "%.4f"}, {"best_sim_s", "sim s", "%.4f"},
    {"lower_bound_s", "bound s", "%.4f"}, {"gap_pct", "gap %", "%.2f"},
    {"best_plan_id", NULL, "%.0f"}, {"best_plan", "best plan", NULL},
    {"params_json", NULL, NULL}};

static void fill_runs(const rpt *r, rtab *t) {
  for (size_t i = 0; i < r->nruns; i++) {
    const store_report_run *u = &r->runs[i];
    json_t *pj = u->params_json ? json_loads(u->params_json, 0, NULL) : NULL;
    json_t *gbs = json_object_get(pj, "gbs");
    rt_num(t, (double)u->id), rt_text(t, u->model), rt_text(t, u->cluster);
    rt_num(t, u->gpus), rt_num(t, json_is_integer(gbs) ? (double)json_integer_value(gbs) : NAN);
    char meth[64];
    method_label(u, meth, sizeof meth);
    rt_text(t, meth), rt_text(t, u->status);
    rt_num(t, (double)u->evaluations), rt_num(t, (double)u->plans_found), rt_num(t, u->wall_s);
    rt_num(t, u->best_iter_time_s), rt_num(t, u->best_sim_s), rt_num(t, u->lower_bound_s);
    rt_num(t, 100 * u->gap), rt_num(t, id_or_nan(u->best_plan_id));
    rt_text(t, u->best_plan ? u->best_plan : (u->best_plan_id ? "(non-uniform)" : NULL));
    rt_text(t, u->params_json);
    json_decref(pj);
  }
}

static const rcol method_cols[] = {
    {"set", "set of runs", NULL},   {"method", "method", NULL},
    {"runs", "runs", "%.0f"},       {"best_iter_time_s", "best s", "%.4f"},
    {"vs_fastest", "x fastest", "%.3f"}, {"best_run", "run", "%.0f"}};

static void fill_methods(const rpt *r, rtab *t) {
  for (int k = 0; k < r->nm; k++) {
    const mrow *x = &r->m[k];
    rt_text(t, r->sets[x->set]), rt_text(t, x->method), rt_num(t, x->runs);
    rt_num(t, x->best_s), rt_num(t, x->vs_fastest), rt_num(t, (double)x->best_run);
  }
}

static const rcol val_cols[] = {
    {"model", "model", NULL},       {"cluster", "cluster", NULL},
    {"gpus", "GPUs", "%.0f"},       {"calibration_id", "calib", "%.0f"},
    {"published_s", "published s", "%.4f"}, {"predicted_s", "predicted s", "%.4f"},
    {"error_pct", "error %", "%+.1f"}, {"feasible", "fits", NULL},
    {"plan_id", NULL, "%.0f"},      {"plan", "plan", NULL}};

static void fill_validation(const rpt *r, rtab *t) {
  for (size_t i = 0; i < r->nval; i++) {
    const store_report_pair *p = &r->val[i];
    rt_text(t, p->model), rt_text(t, p->cluster), rt_num(t, p->gpus);
    rt_num(t, id_or_nan(p->calibration_id)), rt_num(t, p->ref_s), rt_num(t, p->costmodel_s);
    rt_num(t, pct(p->costmodel_s, p->ref_s)), rt_text(t, p->feasible ? "yes" : "no");
    rt_num(t, (double)p->plan_id), rt_text(t, p->plan ? p->plan : "(non-uniform)");
  }
}

static const rcol sim_cols[] = {
    {"search_run_id", "run", "%.0f"}, {"model", "model", NULL},
    {"cluster", "cluster", NULL},     {"gpus", "GPUs", "%.0f"},
    {"calibration_id", "calib", "%.0f"}, {"costmodel_s", "cost model s", "%.4f"},
    {"sim_s", "simulated s", "%.4f"}, {"diff_pct", "sim vs cm %", "%+.2f"},
    {"plan_id", NULL, "%.0f"},        {"plan", "plan", NULL}};

static void fill_sim(const rpt *r, rtab *t) {
  for (size_t i = 0; i < r->nsim; i++) {
    const store_report_pair *p = &r->sim[i];
    rt_num(t, id_or_nan(p->search_run_id)), rt_text(t, p->model), rt_text(t, p->cluster);
    rt_num(t, p->gpus), rt_num(t, id_or_nan(p->calibration_id)), rt_num(t, p->costmodel_s);
    rt_num(t, p->ref_s), rt_num(t, pct(p->ref_s, p->costmodel_s)), rt_num(t, (double)p->plan_id);
    rt_text(t, p->plan ? p->plan : "(non-uniform)");
  }
}

static const rcol cal_cols[] = {
    {"id", "id", "%.0f"},              {"cluster", "cluster", NULL},
    {"method", "method", NULL},        {"created_at", "created", NULL},
    {"measurements", "meas", "%.0f"},  {"held_out", "held", "%.0f"},
    {"mape_before_pct", "MAPE before %", "%.1f"}, {"mape_after_pct", "after %", "%.1f"},
    {"held_mape_before_pct", "held before %", "%.1f"},
    {"held_mape_after_pct", "held after %", "%.1f"},
    {"fit_error", "rms log", "%.4f"},  {"params_json", NULL, NULL},
    {"holdout_json", NULL, NULL}};

static void fill_cals(const rpt *r, rtab *t) {
  for (size_t i = 0; i < r->ncals; i++) {
    const store_calibration *c = &r->cals[i];
    const calerr *e = &r->ce[i];
    rt_num(t, (double)c->id), rt_text(t, c->cluster_name), rt_text(t, c->method);
    rt_text(t, c->created_at), rt_num(t, e->n), rt_num(t, e->held), rt_num(t, e->fb);
    rt_num(t, e->fa), rt_num(t, e->hb), rt_num(t, e->ha), rt_num(t, c->fit_error);
    rt_text(t, c->params_json), rt_text(t, c->holdout_json);
  }
}

static const rcol study_cols[] = {
    {"study", "study", NULL}, {"cases", "cases", "%.0f"}, {"wall_s", "wall s", "%.1f"}};

static void fill_studies(const rpt *r, rtab *t) {
  for (size_t i = 0; i < r->nstudies; i++)
    rt_text(t, r->studies[i].study), rt_num(t, (double)r->studies[i].cases),
        rt_num(t, r->studies[i].wall_s);
}

static const rcol trace_cols[] = {
    {"score_id", "score", "%.0f"},  {"source", "source", NULL},
    {"exists", "exists", NULL},     {"size_bytes", "bytes", "%.0f"},
    {"model", "model", NULL},       {"cluster", "cluster", NULL},
    {"gpus", "GPUs", "%.0f"},       {"iter_time_s", "iter s", "%.4f"},
    {"created_at", NULL, NULL},     {"plan_id", NULL, "%.0f"},
    {"plan", "plan", NULL},         {"path", "path", NULL}};

static void fill_traces(const rpt *r, rtab *t) {
  for (size_t i = 0; i < r->ntraces; i++) {
    const store_report_trace *x = &r->traces[i];
    double size;
    int there = trace_there(x->path, &size);
    rt_num(t, (double)x->score_id), rt_text(t, x->source), rt_text(t, there ? "yes" : "no");
    rt_num(t, size), rt_text(t, x->model), rt_text(t, x->cluster);
    rt_num(t, x->gpus), rt_num(t, x->iter_time_s), rt_text(t, x->created_at);
    rt_num(t, (double)x->plan_id), rt_text(t, x->plan ? x->plan : "(non-uniform)");
    rt_text(t, x->path);
  }
}

/* ---- the sections' notes ------------------------------------------------------------------- */

static void note_runs(const rpt *r, char *b, size_t n) {
  int done = 0;
  for (size_t i = 0; i < r->nruns; i++) done += strcmp(r->runs[i].status, "done") == 0;
  snprintf(b, n, "%zu runs, %d done; best s is the cost model's time of the run's best plan, "
           "sim s the simulator's of the same plan", r->nruns, done);
}

static void note_methods(const rpt *r, char *b, size_t n) {
  size_t k = 0;
  appendf(b, n, &k, "%d set%s of comparable runs (model, cluster, GPUs, global batch, space, "
          "the cost model's calibration and parameters); x fastest: best s over the set's "
          "fastest best s", r->nsets, r->nsets == 1 ? "" : "s");
  for (int g = 0; g < r->nsets; g++) {
    appendf(b, n, &k, "; fastest in set %d:", g + 1);
    for (int j = 0, first = 1; j < r->nm; j++)
      if (r->m[j].set == g && r->m[j].vs_fastest == 1)
        appendf(b, n, &k, "%s %s", first ? "" : ",", r->m[j].method), first = 0;
  }
}

/* MAPE and the largest |error| of a over b, percent, over the pairs with calibration or not. */
static int pair_errors(const store_report_pair *p, size_t np, int calibrated, int sim,
                       double *mape, double *max) {
  int k = 0;
  *mape = *max = 0;
  for (size_t i = 0; i < np; i++) {
    if ((p[i].calibration_id != 0) != calibrated) continue;
    double e = fabs(sim ? pct(p[i].ref_s, p[i].costmodel_s) : pct(p[i].costmodel_s, p[i].ref_s));
    *mape += e, k++;
    if (e > *max) *max = e;
  }
  if (k) *mape /= k;
  return k;
}

static void note_pairs(const store_report_pair *p, size_t np, int sim, char *b, size_t n) {
  size_t k = 0;
  b[0] = '\0';
  for (int cal = 0; cal < 2; cal++) {
    double mape, max;
    int m = pair_errors(p, np, cal, sim, &mape, &max);
    if (m)
      appendf(b, n, &k, "%s%d pair%s%s: mean |%s| %.2f%%, largest %.2f%%", k ? "; " : "", m,
              m == 1 ? "" : "s", cal ? " with a calibration" : "",
              sim ? "simulated / cost model - 1" : "predicted / published - 1", mape, max);
  }
}

static void note_val(const rpt *r, char *b, size_t n) { note_pairs(r->val, r->nval, 0, b, n); }
static void note_sim(const rpt *r, char *b, size_t n) { note_pairs(r->sim, r->nsim, 1, b, n); }

static void note_cals(const rpt *r, char *b, size_t n) {
  snprintf(b, n, "%zu calibration%s; MAPE over the fitted measurements (before, after) and the "
           "held-out ones, from each calibration's residuals", r->ncals, r->ncals == 1 ? "" : "s");
}

static void note_traces(const rpt *r, char *b, size_t n) {
  int gone = 0;
  double size;
  for (size_t i = 0; i < r->ntraces; i++) gone += !trace_there(r->traces[i].path, &size);
  snprintf(b, n, "%zu trace file%s recorded by scores, %d no longer there (Chrome/Perfetto JSON: "
           "https://ui.perfetto.dev opens them)", r->ntraces, r->ntraces == 1 ? "" : "s", gone);
}

/* ---- the plots ------------------------------------------------------------------------------ */

/* A name as a gnuplot string in double quotes (where "\n" breaks a line): the characters that
 * would end or escape it replaced by spaces. */
static void gp_label(const char *in, char *out, size_t n) {
  study_plot_quote(in, out, n);
  for (char *c = out; *c; c++)
    if (*c == '"') *c = ' ';
}

/* Opens dir/name.dat for writing; path gets its name. */
static FILE *dat_open(const char *dir, const char *name, char *path, size_t n, pp_err *err) {
  snprintf(path, n, "%s/%s.dat", dir, name);
  FILE *f = fopen(path, "w");
  if (!f) pp_err_set(err, PP_IO, "%s: cannot write: %s", path, strerror(errno));
  return f;
}

static int dat_close(FILE *f, const char *path, pp_err *err) {
  if (fclose(f)) return pp_err_set(err, PP_IO, "%s: cannot write: %s", path, strerror(errno));
  return PP_OK;
}

/* Runs body (a memstream's text) through study_plot; frees it. */
static int plot_body(const char *dir, const char *name, int w, int h, char *body, size_t len,
                     pp_err *err) {
  int rc = body && len ? study_plot(dir, name, w, h, body, err)
                       : pp_err_set(err, PP_NOMEM, "report: out of memory");
  free(body);
  return rc;
}

static int meth_cmp(const void *a, const void *b) {
  const char *x = *(const char *const *)a, *y = *(const char *const *)b;
  int rx = method_rank(x), ry = method_rank(y);
  return rx != ry ? rx - ry : strcmp(x, y);
}

/* (a) Best iteration time per method in each set of comparable runs, over the set's fastest:
 * a column of points per set, one point style per method, a dashed line at 1. */
static int plot_methods(const rpt *r, const char *dir, const char *name, pp_err *err) {
  enum { MAXM = 16 };
  const char *meth[MAXM];
  int nmeth = 0;
  for (int k = 0; k < r->nm; k++) {
    int j = 0;
    while (j < nmeth && strcmp(meth[j], r->m[k].method) != 0) j++;
    if (j == nmeth && nmeth < MAXM) meth[nmeth++] = r->m[k].method;
  }
  qsort(meth, (size_t)nmeth, sizeof *meth, meth_cmp);
  char path[4096], lab[200];
  FILE *f = dat_open(dir, name, path, sizeof path, err);
  if (!f) return err->code;
  fprintf(f, "# set, then best s / the set's fastest per method:");
  for (int j = 0; j < nmeth; j++) fprintf(f, " %s", meth[j]);
  for (int g = 0; g < r->nsets; g++) {
    fprintf(f, "\n%d", g);
    for (int j = 0; j < nmeth; j++) {
      int k = 0;
      while (k < r->nm && !(r->m[k].set == g && strcmp(r->m[k].method, meth[j]) == 0)) k++;
      if (k < r->nm) fprintf(f, " %.8g", r->m[k].vs_fastest);
      else fputs(" ?", f);
    }
  }
  fputc('\n', f);
  if (dat_close(f, path, err)) return err->code;
  char *body = NULL;
  size_t len = 0;
  FILE *b = open_memstream(&body, &len);
  if (!b) return pp_err_set(err, PP_NOMEM, "report: out of memory");
  fprintf(b, "set termoption noenhanced\nset datafile missing '?'\n"
             "set title 'Search methods: the best plan of each, relative to the fastest method "
             "(cost model)'\nset ylabel 'best iteration time / fastest method (x)'\n"
             "set xlabel 'set of comparable runs (model on cluster, GPUs, global batch)' "
             "offset 0,-1.2\nset bmargin 6\nset grid ytics\nset key outside right top\n"
             "set xrange [-0.5:%d.5]\nset offsets 0, 0, graph 0.08, graph 0.08\nset xtics (",
          r->nsets - 1);
  for (int g = 0; g < r->nsets; g++) {
    gp_label(r->sets[g], lab, sizeof lab);
    char *comma = strstr(lab, ", ");
    if (comma) *comma = '\0';
    fprintf(b, "%s\"%s%s%s\" %d", g ? ", " : "", lab, comma ? "\\n" : "", comma ? comma + 2 : "",
            g);
  }
  fprintf(b, ")\nplot 1 with lines dashtype 2 linecolor 'gray40' title 'fastest'");
  static const int pt[] = {7, 5, 9, 11, 13, 15};
  static const char *const color[] = {"#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e",
                                      "#a6761d"};
  for (int j = 0; j < nmeth; j++) {
    double dx = (j - (nmeth - 1) / 2.0) * 0.1;
    fprintf(b, ", '%s' using ($1%+.3f):%d with points pointtype %d pointsize 2 linecolor rgb "
               "'%s' title '%s', '' using ($1%+.3f):%d:($%d > 1.0005 ? sprintf('+%%.1f%%%%', "
               "100 * ($%d - 1)) : '') with labels offset 0,1.2 notitle",
            path, dx, j + 2, pt[j % 6], color[j % 6], meth[j], dx, j + 2, j + 2, j + 2);
  }
  fputc('\n', b);
  fclose(b);
  int w = 300 + 260 * r->nsets;
  return plot_body(dir, name, w < 1000 ? 1000 : w, 600, body, len, err);
}

/* Tics of a log axis over [lo, hi]: the first mantissa set that gives at least 4 of them, so a
 * range narrower than a decade still has labelled tics. */
static void log_tics(FILE *b, const char *axis, double lo, double hi) {
  static const double sets[][10] = {{1}, {1, 2, 5}, {1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8}};
  static const int nset[] = {1, 3, 10};
  for (int s = 0; s < 3; s++) {
    double v[64];
    int n = 0;
    for (double d = pow(10, floor(log10(lo))); d <= hi && n < 64; d *= 10)
      for (int k = 0; k < nset[s] && n < 64; k++)
        if (d * sets[s][k] >= lo && d * sets[s][k] <= hi) v[n++] = d * sets[s][k];
    if (n < 4 && s < 2) continue;
    fprintf(b, "set %stics (", axis);
    for (int k = 0; k < n; k++) fprintf(b, "%s\"%g\" %g", k ? ", " : "", v[k], v[k]);
    fputs(")\n", b);
    return;
  }
}

/* A log-log scatter of the pairs' cost model time against their reference (published: x is
 * the reference; sim: x is the cost model), with y = x and a dashed band of +-band percent. */
typedef struct scatter {
  const char *title, *xlabel, *ylabel, *series0, *series1;
  double band;      /* percent */
  int sim;          /* 1: x = cost model, y = simulated; series by search run (1) or not (0) */
} scatter;

static int plot_scatter(const store_report_pair *p, size_t np, const scatter *sc,
                        const char *dir, const char *name, pp_err *err) {
  char path[4096];
  FILE *f = dat_open(dir, name, path, sizeof path, err);
  if (!f) return err->code;
  double lo = INFINITY, hi = 0;
  int has[2] = {0};
  fprintf(f, "# x y series (%s, %s)\n", sc->xlabel, sc->ylabel);
  for (size_t i = 0; i < np; i++) {
    double x = sc->sim ? p[i].costmodel_s : p[i].ref_s, y = sc->sim ? p[i].ref_s : p[i].costmodel_s;
    int series = sc->sim ? p[i].search_run_id != 0 : p[i].calibration_id != 0;
    fprintf(f, "%.10g %.10g %d\n", x, y, series);
    lo = fmin(lo, fmin(x, y)), hi = fmax(hi, fmax(x, y));
    has[series] = 1;
  }
  if (dat_close(f, path, err)) return err->code;
  lo /= 1.5, hi *= 1.5;
  char *body = NULL;
  size_t len = 0;
  FILE *b = open_memstream(&body, &len);
  if (!b) return pp_err_set(err, PP_NOMEM, "report: out of memory");
  fprintf(b, "set termoption noenhanced\nset title '%s'\nset xlabel '%s'\nset ylabel '%s'\n"
             "set logscale xy\nset xrange [%g:%g]\nset yrange [%g:%g]\nset size square\n"
             "set grid\nset key top left box opaque\nset samples 200\n",
          sc->title, sc->xlabel, sc->ylabel, lo, hi, lo, hi);
  log_tics(b, "x", lo, hi);
  log_tics(b, "y", lo, hi);
  fprintf(b, "plot x with lines linewidth 2 linecolor 'black' title 'y = x', "
             "%g*x with lines dashtype 2 linecolor 'gray50' title 'y = x +/- %g%%', "
             "%g*x with lines dashtype 2 linecolor 'gray50' notitle",
          1 + sc->band / 100, sc->band, 1 - sc->band / 100);
  static const struct {
    int pt;
    const char *color;
  } style[2] = {{7, "#1f77b4"}, {5, "#d62728"}};
  for (int k = 0; k < 2; k++)
    if (has[k])
      fprintf(b, ", '%s' using 1:($3 == %d ? $2 : 1/0) with points pointtype %d pointsize 1.2 "
                 "linecolor rgb '%s' title '%s'", path, k, style[k].pt, style[k].color,
              k ? sc->series1 : sc->series0);
  fputc('\n', b);
  fclose(b);
  return plot_body(dir, name, 900, 860, body, len, err);
}

/* (b) The cost model against published runs. */
static int plot_validation(const rpt *r, const char *dir, const char *name, pp_err *err) {
  char title[160];
  double mape, max;
  int n = pair_errors(r->val, r->nval, 0, 0, &mape, &max);
  snprintf(title, sizeof title, "Cost model against published runs (%zu runs; MAPE %.1f%% without "
           "a calibration)", r->nval, mape);
  if (!n) snprintf(title, sizeof title, "Cost model against published runs (%zu runs)", r->nval);
  scatter sc = {title, "published iteration time (s)", "predicted iteration time, cost model (s)",
                "cost model, defaults", "cost model, calibrated", 10, 0};
  return plot_scatter(r->val, r->nval, &sc, dir, name, err);
}

/* (d) The simulator against the cost model, plan by plan. */
static int plot_sim(const rpt *r, const char *dir, const char *name, pp_err *err) {
  char title[160];
  snprintf(title, sizeof title, "Simulator against cost model, per plan (%zu pairs)", r->nsim);
  scatter sc = {title, "cost model iteration time (s)", "simulated iteration time (s)",
                "simulate", "search --simulate", 3, 1};
  return plot_scatter(r->sim, r->nsim, &sc, dir, name, err);
}

/* (c) Each calibration's MAPE before and after, fitted and held out: grouped bars with their
 * values on top. */
static int plot_cals(const rpt *r, const char *dir, const char *name, pp_err *err) {
  int held = 0;
  for (size_t i = 0; i < r->ncals; i++) held |= !isnan(r->ce[i].hb);
  char path[4096], lab[200];
  FILE *f = dat_open(dir, name, path, sizeof path, err);
  if (!f) return err->code;
  fputs("# calibration index, MAPE % fitted before, after, held out before, after\n", f);
  for (size_t i = 0; i < r->ncals; i++) {
    const calerr *e = &r->ce[i];
    double v[4] = {e->fb, e->fa, e->hb, e->ha};
    fprintf(f, "%zu", i);
    for (int k = 0; k < 4; k++)
      if (isnan(v[k])) fputs(" ?", f);
      else fprintf(f, " %.6g", v[k]);
    fputc('\n', f);
  }
  if (dat_close(f, path, err)) return err->code;
  static const char *const series[] = {"fitted, before", "fitted, after", "held out, before",
                                       "held out, after"};
  static const char *const color[] = {"#9ecae1", "#08519c", "#fdae6b", "#a63603"};
  int ns = held ? 4 : 2;
  double bw = 0.8 / ns;
  char *body = NULL;
  size_t len = 0;
  FILE *b = open_memstream(&body, &len);
  if (!b) return pp_err_set(err, PP_NOMEM, "report: out of memory");
  fprintf(b, "set termoption noenhanced\nset datafile missing '?'\n"
             "set title 'Calibrations: mean absolute error of the model, before and after "
             "the fit'\n"
             "set ylabel 'MAPE against the measurements (%%)'\n"
             "set xlabel 'calibration (id, cluster)' offset 0,-1.2\nset bmargin 6\n"
             "set yrange [0:*]\nset offsets 0, 0, graph 0.1, 0\nset grid ytics\n"
             "set key outside right top\nset style fill solid 0.9 border -1\nset boxwidth %g\n"
             "set xrange [-0.5:%zu.5]\nset xtics (", bw, r->ncals - 1);
  for (size_t i = 0; i < r->ncals; i++) {
    gp_label(r->cals[i].cluster_name, lab, sizeof lab);
    fprintf(b, "%s\"%lld\\n%s\" %zu", i ? ", " : "", (long long)r->cals[i].id, lab, i);
  }
  fputs(")\nplot ", b);
  for (int k = 0; k < ns; k++)
    fprintf(b, "%s'%s' using ($1%+.4f):%d with boxes linecolor rgb '%s' title '%s', "
               "'' using ($1%+.4f):%d:(sprintf('%%.1f', $%d)) with labels offset 0,0.8 notitle",
            k ? ", " : "", path, (k - (ns - 1) / 2.0) * bw, k + 2, color[k], series[k],
            (k - (ns - 1) / 2.0) * bw, k + 2, k + 2);
  fputc('\n', b);
  fclose(b);
  int w = 300 + 240 * (int)r->ncals;
  return plot_body(dir, name, w < 1000 ? 1000 : w, 600, body, len, err);
}

/* ---- the sections ---------------------------------------------------------------------------- */

typedef struct section {
  const char *key;   /* file stem: key.csv, and the plot's key.png, key.svg */
  const char *title;
  const char *none;  /* what stores its rows, said when there are none */
  const rcol *cols;
  int ncols;
  void (*fill)(const rpt *r, rtab *t);
  void (*note)(const rpt *r, char *b, size_t n);
  int (*plot)(const rpt *r, const char *dir, const char *name, pp_err *err); /* NULL: none */
  size_t count;      /* offsetof its row count in study_report_summary */
} section;

#define COLS(a) a, (int)(sizeof(a) / sizeof((a)[0]))
static const section sections[] = {
    {"search_runs", "Search runs", "podplan search --db F stores them", COLS(run_cols), fill_runs,
     note_runs, NULL, offsetof(study_report_summary, search_runs)},
    {"methods", "Method comparison", "finished search runs with a best plan make it",
     COLS(method_cols), fill_methods, note_methods, plot_methods,
     offsetof(study_report_summary, methods)},
    {"validation", "Cost model against published runs",
     "podplan study validate --db F stores the pairs", COLS(val_cols), fill_validation, note_val,
     plot_validation, offsetof(study_report_summary, validation)},
    {"sim_vs_costmodel", "Simulator against cost model",
     "podplan search --simulate K --db F, or simulate and predict of one plan with --db F, "
     "store the pairs", COLS(sim_cols), fill_sim, note_sim, plot_sim,
     offsetof(study_report_summary, sim_pairs)},
    {"calibrations", "Calibrations", "podplan calibrate --db F stores them", COLS(cal_cols),
     fill_cals, note_cals, plot_cals, offsetof(study_report_summary, calibrations)},
    {"studies", "Study cases", "podplan study pillar|capacity --db F stores them",
     COLS(study_cols), fill_studies, NULL, NULL, offsetof(study_report_summary, studies)},
    {"traces", "Trace files", "simulate --trace T --db F or run --trace T records one",
     COLS(trace_cols), fill_traces, note_traces, NULL, offsetof(study_report_summary, traces)},
};
#define NSECTIONS ((int)(sizeof sections / sizeof sections[0]))

static int build(const rpt *r, rtab *tabs, study_report_summary *sum, pp_err *err) {
  for (int i = 0; i < NSECTIONS; i++) {
    const section *x = &sections[i];
    assert(x->ncols <= RT_MAXCOLS);
    tabs[i].cols = x->cols, tabs[i].ncols = x->ncols;
    x->fill(r, &tabs[i]);
    if (tabs[i].oom) return pp_err_set(err, PP_NOMEM, "report: out of memory (%s)", x->key);
    *(int *)((char *)sum + x->count) = (int)rt_rows(&tabs[i]);
  }
  sum->schema_version = r->version;
  sum->method_groups = r->nsets;
  for (size_t i = 0; i < r->nstudies; i++) sum->study_cases += (int)r->studies[i].cases;
  double size;
  for (size_t i = 0; i < r->ntraces; i++)
    sum->traces_missing += !trace_there(r->traces[i].path, &size);
  return PP_OK;
}

static int empty(const rtab *tabs) {
  for (int i = 0; i < NSECTIONS; i++)
    if (rt_rows(&tabs[i])) return 0;
  return 1;
}

static const char nothing[] = "nothing to report: the store holds no search runs, no scores "
                              "to compare, no calibrations, no study cases and no trace files";

/* The heading of the text and of report.md: the file (between q and q) and its schema. */
static void heading(const char *db, const char *q, int version, char *b, size_t n) {
  if (version == 0)
    snprintf(b, n, "%s%s%s (an empty database: no podplan tables)", q, db, q);
  else if (version < STORE_SCHEMA_VERSION)
    snprintf(b, n, "%s%s%s (schema %d, older than this podplan's %d: read as it is, not "
             "migrated)", q, db, q, version, STORE_SCHEMA_VERSION);
  else
    snprintf(b, n, "%s%s%s (schema %d)", q, db, q, version);
}

static void print_text_report(FILE *out, const study_report_opts *o, const rpt *r,
                              const rtab *tabs) {
  char b[2048];
  heading(o->db, "", r->version, b, sizeof b);
  fprintf(out, "podplan report of %s\n", b);
  if (empty(tabs)) {
    fprintf(out, "%s\n", nothing);
    return;
  }
  for (int i = 0; i < NSECTIONS; i++) {
    const section *x = &sections[i];
    size_t n = rt_rows(&tabs[i]);
    if (!n) {
      fprintf(out, "\n%s: none (%s)\n", x->title, x->none);
      continue;
    }
    fprintf(out, "\n%s (%zu)\n", x->title, n);
    if (x->note) {
      x->note(r, b, sizeof b);
      fprintf(out, "  %s\n", b);
    }
    print_text(out, &tabs[i]);
  }
}

/* ---- the files ------------------------------------------------------------------------------- */

/* Writes dir/name through a temporary file renamed into place. */
static int write_file(const char *dir, const char *name, void (*fn)(FILE *, const void *),
                      const void *arg, pp_err *err) {
  char path[4096], tmp[4200];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) return pp_err_set(err, PP_IO, "%s: cannot write: %s", tmp, strerror(errno));
  fn(f, arg);
  if (ferror(f) | fclose(f) || rename(tmp, path) != 0) {
    int e = errno;
    remove(tmp);
    return pp_err_set(err, PP_IO, "%s: cannot write: %s", path, strerror(e));
  }
  return PP_OK;
}

static void csv_fn(FILE *f, const void *t) { print_csv(f, t); }

/* What report.md is written from. */
typedef struct md_args {
  const study_report_opts *o;
  const rpt *r;
  const rtab *tabs;
  const int *plotted;
} md_args;

static void md_fn(FILE *f, const void *arg) {
  const md_args *a = arg;
  char b[2048];
  heading(a->o->db, "`", a->r->version, b, sizeof b);
  fprintf(f, "# podplan report\n\nStore: %s. Written by `podplan report`; every table is also "
             "a CSV file in this folder.\n", b);
  if (empty(a->tabs)) fprintf(f, "\n%s.\n", nothing);
  for (int i = 0; i < NSECTIONS && !empty(a->tabs); i++) {
    const section *x = &sections[i];
    size_t n = rt_rows(&a->tabs[i]);
    fprintf(f, "\n## %s\n\n", x->title);
    if (!n) {
      fprintf(f, "None: %s. ([%s.csv](%s.csv))\n", x->none, x->key, x->key);
      continue;
    }
    if (x->note) {
      x->note(a->r, b, sizeof b);
      fprintf(f, "%s.\n\n", b);
    }
    if (a->plotted[i])
      fprintf(f, "![%s](%s.png)\n\n([SVG](%s.svg), [data](%s.dat), [gnuplot](%s.gp))\n\n",
              x->title, x->key, x->key, x->key, x->key);
    print_md(f, &a->tabs[i]);
    fprintf(f, "\n[%s.csv](%s.csv)\n", x->key, x->key);
  }
}

/* The CSVs, the plots of the sections with rows, then report.md; says what it wrote. */
static int write_files(FILE *out, const study_report_opts *o, const rpt *r, const rtab *tabs,
                       study_report_summary *sum, pp_err *err) {
  const char *dir = o->out_dir;
  int plotted[NSECTIONS] = {0};
  char name[256];
  fprintf(out, "\nfiles written to %s:", dir);
  for (int i = 0; i < NSECTIONS; i++) {
    snprintf(name, sizeof name, "%s.csv", sections[i].key);
    if (write_file(dir, name, csv_fn, &tabs[i], err)) return err->code;
    sum->csvs++;
    fprintf(out, " %s", name);
  }
  for (int i = 0; i < NSECTIONS; i++) {
    if (!sections[i].plot) continue;
    if (!rt_rows(&tabs[i])) {
      sum->plots_skipped++;
      continue;
    }
    if (sections[i].plot(r, dir, sections[i].key, err)) return err->code;
    plotted[i] = 1, sum->plots++;
    fprintf(out, " %s.png %s.svg", sections[i].key, sections[i].key);
  }
  md_args a = {o, r, tabs, plotted};
  if (write_file(dir, "report.md", md_fn, &a, err)) return err->code;
  fputs(" report.md\n", out);
  for (int i = 0; i < NSECTIONS; i++)
    if (sections[i].plot && !plotted[i])
      fprintf(out, "plot %s: skipped, no data\n", sections[i].key);
  return PP_OK;
}

/* The folder: no character gnuplot's quoted strings cannot hold; made when missing. */
static int check_dir(const char *dir, int make, pp_err *err) {
  if (strpbrk(dir, "'\"\\\n"))
    return pp_err_set(err, PP_INPUT, "--out %s: a folder name with quotes, backslashes or "
                      "newlines cannot be passed to gnuplot", dir);
  if (!make) return PP_OK;
  return pp_mkdirs(dir, err);
}

int study_report(const study_report_opts *o, study_report_summary *sum, pp_err *err) {
  FILE *out = o->out ? o->out : stdout;
  rpt r;
  rtab tabs[NSECTIONS];
  memset(&r, 0, sizeof r);
  memset(tabs, 0, sizeof tabs);
  memset(sum, 0, sizeof *sum);
  int rc = o->out_dir ? check_dir(o->out_dir, 0, err) : PP_OK;
  if (!rc) rc = rpt_read(o->db, &r, err);
  if (!rc) rc = derive(&r, err);
  if (!rc) rc = build(&r, tabs, sum, err);
  if (!rc && o->out_dir) rc = check_dir(o->out_dir, 1, err);
  if (!rc) print_text_report(out, o, &r, tabs);
  if (!rc && o->out_dir) rc = write_files(out, o, &r, tabs, sum, err);
  if (!rc && !o->out_dir) fputs("\n(no --out: no files written)\n", out);
  for (int i = 0; i < NSECTIONS; i++) rt_free(&tabs[i]);
  rpt_free(&r);
  return rc;
}
