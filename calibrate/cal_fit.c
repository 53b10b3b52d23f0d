/* The fit of calibrate/ (cal.h).
 *
 * Residuals: r_i = log(predicted_i / measured_i), so that a collective of 20 us and one of
 * 20 ms weigh the same and a factor of two is a factor of two either way. Each parameter is
 * fitted as the log of its value (ranges over decades: a ramp's half share, a latency), of its
 * value + prior / 1000 when its lower bound is 0 (so that the bound is a finite point), or as
 * itself when its prior is not positive, and clamped into the range the parameter table
 * allows (cm_params_bounds). A parameter is informed when moving it by 0.1% (either way) moves
 * some fitted residual; the others stay at their prior and are reported so. GSL's trust-region
 * Levenberg-Marquardt minimises sum w_i r_i^2 with a finite-difference Jacobian, from the prior
 * and seven points drawn around it (the lowest end wins: predictions that take the faster of
 * two algorithms have kinks a descent can stop at); with `robust`, w_i are Cauchy weights 1 / (1 + (r_i / (2.385 s))^2), s the residuals' median
 * absolute value / 0.6745, refitted until they settle (iteratively reweighted least squares).
 * Uncertainty: the covariance (J^T W J)^-1 scaled by the residual variance
 * sum w r^2 / (n - p), mapped from log space by the delta method
 * (sigma_v = (v + shift) sigma_u). A parameter the measurements leave uncertain by more than
 * a factor e even at 1% scatter (most often: one that moves the predictions only as others
 * together do) is undetermined: it goes back to its prior and the rest is refitted, unless
 * that fits worse by more than one residual variance, when it keeps its fitted value (what
 * the fit's predictions are made with); the others' sigmas are taken with it held.
 * Regularisation (prior_noise s > 0): one more residual per fitted parameter,
 * s (u_j - u0_j) / b_j, u0_j its prior and b_j its band (cm_params_band; 1, a factor e,
 * without one) in fit space (a parameter fitted as itself: the band times the prior's
 * magnitude, or a quarter of its range), so the fit is the MAP estimate under Gaussian priors
 * of those widths and measurements of log noise s; the covariance is then the posterior's.
 * CAL_PRIOR_AUTO picks s among cal_prior_noises by k-fold cross-validation over groups (the
 * plain fit is one of them), and flags a fit whose cross-validated error is above the priors'.
 * Drivers: Cook's distance D_i = f_i^2 h_ii / (p s2 (1 - h_ii)^2) of each fitted observation
 * at the end point (f the weighted residual, h_ii the leverage from J (J^T W J)^-1 J^T). */
#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_matrix.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <gsl/gsl_vector.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podplan/cal.h"

/* ---- what each kind of measurement informs ------------------------------------------------ */

static const char *const coll_names[] = {
    "eff.nvlink",      "eff.nvlink_up",   "eff.net",          "eff.spine",
    "eff.nvls",        "nvls.cap",        "ring.half_bytes",  "ring.gamma",
    "ring.base_us",    "tree.half_bytes", "tree.gamma",       "tree.base_us",
    "nvls.half_bytes", "nvls.gamma",      "nvls.base_us",     "nvlstree.half_bytes",
    "nvlstree.gamma",  "nvlstree.base_us", "pat.half_bytes",  "pat.gamma",
    "pat.base_us",     NULL};
static const char *const gemm_names[] = {"gemm_eff", "gemm_k_half", "kernel_us", NULL};
static const char *const op_names[] = {"attn_fwd_eff", "attn_bwd_eff", "hbm_eff", "kernel_us",
                                       NULL};
/* whole iterations: constants every run shares (never one per run) */
static const char *const iter_names[] = {"gemm_eff", "attn_fwd_eff", "attn_bwd_eff", "hbm_eff",
                                         "eff.nvlink", "eff.net", NULL};
static const char *const *const candidates[CAL_NKINDS] = {coll_names, gemm_names, op_names,
                                                          iter_names};

const char *const *cal_candidates(cal_kind k) {
  return (unsigned)k < CAL_NKINDS ? candidates[k] : NULL;
}

/* ---- the problem ---------------------------------------------------------------------------- */

typedef struct fitp {
  const char *name;
  double lo, hi, prior;
  int logscale; /* fitted as log(value + shift) */
  double shift; /* 0, or a thousandth of the prior where the lower bound is 0, so that the
                   bound sits at a finite point of the fit space (log(shift)) */
} fitp;

typedef struct problem {
  const spec_model *m;
  const spec_cluster *c;
  const cm_params *base;
  const cal_obs *obs;
  size_t *use, nuse; /* the fitted observations */
  fitp *p;
  size_t np;         /* every parameter tried */
  size_t *act, nact; /* the informed ones, fitted (indices into p) */
  double *u;         /* [np] current point, in fit space */
  unsigned char *kept;         /* [np] 1: fitted, then held at its value out of the fit */
  unsigned char *undetermined; /* [np] 1: left uncertain by more than a factor e (or moving
                                  nothing nearby): at its prior, or kept, out of the fit */
  double pw;         /* the prior rows' weight: prior_noise^2 (0: none) */
  double *u0, *band; /* [np] prior and band in fit space */
  pp_err *err;
  int failed;        /* a model could not be built (err says why) */
} problem;

/* Rows of the least-squares system: the fitted observations, then one per fitted parameter
 * when regularised. */
static size_t nrows(const problem *P) { return P->nuse + (P->pw > 0 ? P->nact : 0); }

const double cal_prior_noises[] = {0, 0.3, 0.1, 0.03, -1};

/* The value at fit-space point u before clamping into the bounds. */
static double raw_value(const fitp *f, double u) { return f->logscale ? exp(u) - f->shift : u; }

/* The value at u, clamped into the bounds; within a billionth of the prior of a bound, the
 * bound (a log-space descent towards 0 ends at 4e-19, not at 0). */
static double to_value(const fitp *f, double u) {
  double v = raw_value(f, u), tol = 1e-9 * fabs(f->prior);
  return v <= f->lo + tol ? f->lo : v >= f->hi - tol ? f->hi : v;
}

static int on_bound(const fitp *f, double u) {
  double v = to_value(f, u);
  return v == f->lo || v == f->hi;
}

static double to_fit(const fitp *f, double v) { return f->logscale ? log(v + f->shift) : v; }

static double predict_one(cm_model *cm, const cal_obs *o) {
  if (o->kind == CAL_OP && o->lop == CM_LOP_ATTN)
    return cm_attn_time(cm, o->m, o->n, o->k, o->batch > 1 ? o->batch : 1, o->causal,
                        o->backward);
  if (o->kind == CAL_GEMM || o->kind == CAL_OP) {
    cm_lop op = {.kind = o->kind == CAL_GEMM ? CM_LOP_GEMM : o->lop, .m = o->m, .n = o->n,
                 .k = o->k, .batch = o->batch > 1 ? o->batch : 1, .bytes = o->bytes};
    return cm_lop_time(cm, &op);
  }
  cm_place pl;
  cm_place_group(cm, o->ranks, o->stride > 1 ? o->stride : 1, &pl);
  return cm_coll_best(cm, o->coll, o->bytes, &pl, NULL);
}

/* Sets the values (of names[0..n)) on p. */
static int set_all(cm_params *p, const char *const *names, const double *v, size_t n,
                   pp_err *err) {
  for (size_t j = 0; j < n; j++)
    if (cm_params_set(p, names[j], v[j], err)) return err->code;
  return PP_OK;
}

/* Predicted seconds of observations idx[0..n) with values v of parameters names[0..np) on top
 * of `prior` (collectives, GEMMs: one model of cluster c) or of a run's own parameters. */
static int predict_with(const spec_model *m, const spec_cluster *c, const cm_params *prior,
                        const char *const *names, const double *v, size_t np, const cal_obs *obs,
                        const size_t *idx, size_t n, double *pred, pp_err *err) {
  cm_model *shared = NULL;
  int rc = PP_OK;
  for (size_t i = 0; i < n && !rc; i++) {
    const cal_obs *o = &obs[idx ? idx[i] : i];
    if (o->kind != CAL_ITER) {
      if (!shared) {
        cm_params prm = *prior;
        if ((rc = set_all(&prm, names, v, np, err)) ||
            (rc = cm_model_create(m, c, &prm, &shared, err)))
          break;
      }
      pred[i] = predict_one(shared, o);
      continue;
    }
    cm_params prm = *o->base;
    cm_model *cm = NULL;
    cm_result res;
    if ((rc = set_all(&prm, names, v, np, err)) ||
        (rc = cm_model_create(o->model, o->cluster, &prm, &cm, err)) ||
        (rc = cm_eval(cm, o->plan, &res, err)))
      rc = pp_err_prefix(err, "calibrate: measurement %zu", (idx ? idx[i] : i) + 1);
    else
      pred[i] = res.iter_time_s;
    cm_model_destroy(cm);
  }
  cm_model_destroy(shared);
  return rc;
}

/* Predicted seconds of observations idx[0..n) at point u (every tried parameter). */
static int predict_at(problem *P, const double *u, const size_t *idx, size_t n, double *pred) {
  const char *names[64];
  double v[64];
  for (size_t j = 0; j < P->np && j < 64; j++) names[j] = P->p[j].name, v[j] = to_value(&P->p[j], u[j]);
  return predict_with(P->m, P->c, P->base, names, v, P->np, P->obs, idx, n, pred, P->err);
}

int cal_predict(const spec_model *m, const spec_cluster *c, const cm_params *prior,
                const cal_result *fit, const cal_obs *obs, size_t n, double *pred, pp_err *err) {
  const char *names[64] = {NULL};
  double v[64] = {0};
  size_t k = 0;
  for (size_t j = 0; fit && j < fit->nparams && k < 64; j++)
    if (fit->params[j].informed) names[k] = fit->params[j].name, v[k++] = fit->params[j].value;
  return predict_with(m, c, prior, names, v, k, obs, NULL, n, pred, err);
}

/* log(predicted / measured); a prediction that is not a positive number counts as off by
 * a factor e^10 (the fit moves away from it). */
static double resid(double pred, double meas) {
  return pred > 0 && isfinite(pred) ? log(pred / meas) : 10.0;
}

static int residuals_at(problem *P, const double *u, double *r) {
  double *pred = malloc(P->nuse * sizeof *pred);
  if (!pred) return pp_err_set(P->err, PP_NOMEM, "calibrate: out of memory");
  int rc = predict_at(P, u, P->use, P->nuse, pred);
  for (size_t i = 0; !rc && i < P->nuse; i++) r[i] = resid(pred[i], P->obs[P->use[i]].time_s);
  free(pred);
  return rc;
}

/* GSL's residual function: x holds the fitted parameters (P->act), the others stay put. */
static int gsl_f(const gsl_vector *x, void *arg, gsl_vector *f) {
  problem *P = arg;
  for (size_t a = 0; a < P->nact; a++) P->u[P->act[a]] = gsl_vector_get(x, a);
  double *r = malloc(P->nuse * sizeof *r);
  if (!r || residuals_at(P, P->u, r)) {
    if (!r) pp_err_set(P->err, PP_NOMEM, "calibrate: out of memory");
    free(r);
    P->failed = 1;
    return GSL_EFAILED;
  }
  for (size_t i = 0; i < P->nuse; i++) gsl_vector_set(f, i, r[i]);
  for (size_t a = 0; P->pw > 0 && a < P->nact; a++) {
    size_t j = P->act[a];
    gsl_vector_set(f, P->nuse + a, sqrt(P->pw) * (P->u[j] - P->u0[j]) / P->band[j]);
  }
  free(r);
  return GSL_SUCCESS;
}

/* ---- helpers ----------------------------------------------------------------------------- */

static double mape(const double *pred, const cal_obs *obs, const unsigned char *held, size_t n,
                   int want_held, double *bias) {
  double s = 0, b = 0;
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (held[i] == want_held) {
      double e = pred[i] / obs[i].time_s - 1;
      s += fabs(e), b += e, k++;
    }
  if (bias) *bias = k ? 100 * b / (double)k : 0;
  return k ? 100 * s / (double)k : 0;
}

/* Marks round(frac * n) observations held out (at most n - 1), chosen by a seeded shuffle. */
static size_t choose_held(size_t n, double frac, unsigned seed, unsigned char *held) {
  size_t k = (size_t)(frac * (double)n + 0.5);
  if (k > n - 1) k = n - 1;
  size_t *idx = malloc(n * sizeof *idx);
  if (!idx) return (size_t)-1;
  for (size_t i = 0; i < n; i++) idx[i] = i;
  unsigned s = seed ? seed : 0x9e3779b9u;
  for (size_t i = n; i > 1; i--) { /* Fisher-Yates with xorshift32 */
    s ^= s << 13, s ^= s >> 17, s ^= s << 5;
    size_t j = s % i, t = idx[i - 1];
    idx[i - 1] = idx[j], idx[j] = t;
  }
  for (size_t i = 0; i < k; i++) held[idx[i]] = 1;
  free(idx);
  return k;
}

static int check_obs(const spec_cluster *c, const cal_obs *o, size_t i, pp_err *err) {
  if (!(o->time_s > 0) || !isfinite(o->time_s))
    return pp_err_set(err, PP_INPUT, "calibrate: measurement %zu (id %lld): time %g is not a "
                      "positive number", i + 1, (long long)o->id, o->time_s);
  if ((unsigned)o->kind >= CAL_NKINDS)
    return pp_err_set(err, PP_INPUT, "calibrate: measurement %zu: unknown kind", i + 1);
  long span = o->kind == CAL_COLL ? (long)(o->ranks - 1) * (o->stride > 1 ? o->stride : 1) + 1 : 0;
  if (o->kind == CAL_COLL && (o->ranks < 2 || span > c->gpus || !(o->bytes > 0)))
    return pp_err_set(err, PP_INPUT, "calibrate: measurement %zu (id %lld): a collective of %d "
                      "ranks (stride %d) and %g bytes on %s's %d GPUs", i + 1, (long long)o->id,
                      o->ranks, o->stride > 1 ? o->stride : 1, o->bytes, c->name, c->gpus);
  if (o->kind == CAL_ITER && !(o->model && o->cluster && o->plan && o->base))
    return pp_err_set(err, PP_INPUT, "calibrate: measurement %zu: an iteration without its "
                      "model, cluster, plan and parameters", i + 1);
  int shaped = o->kind == CAL_GEMM || (o->kind == CAL_OP && o->lop == CM_LOP_ATTN);
  if (shaped && !(o->m >= 1 && o->n >= 1 && o->k >= 1))
    return pp_err_set(err, PP_INPUT, "calibrate: measurement %zu (id %lld): %s shape %gx%gx%g",
                      i + 1, (long long)o->id, o->kind == CAL_GEMM ? "GEMM" : "attention", o->m,
                      o->n, o->k);
  if (o->kind == CAL_OP && o->lop != CM_LOP_ATTN && !(o->lop == CM_LOP_MEM && o->bytes > 0))
    return pp_err_set(err, PP_INPUT, "calibrate: measurement %zu (id %lld): an op that is neither "
                      "attention nor memory-bound with its bytes", i + 1, (long long)o->id);
  return PP_OK;
}

/* The parameters to try: o->names, or the candidates of every kind present. */
static int tried_params(const cal_obs *obs, size_t n, const cal_opts *o, const cm_params *prior,
                        fitp **out, size_t *np, pp_err *err) {
  const char *list[64];
  size_t k = 0;
  if (o->names) {
    for (size_t i = 0; o->names[i] && k < 64; i++) list[k++] = o->names[i];
  } else {
    int present[CAL_NKINDS] = {0};
    for (size_t i = 0; i < n; i++) present[obs[i].kind] = 1;
    for (int kd = 0; kd < CAL_NKINDS; kd++)
      for (size_t i = 0; present[kd] && candidates[kd][i] && k < 64; i++) {
        size_t j = 0; /* each parameter once (GEMMs and iterations share gemm_eff) */
        while (j < k && strcmp(list[j], candidates[kd][i])) j++;
        if (j == k) list[k++] = candidates[kd][i];
      }
  }
  fitp *p = calloc(k + 1, sizeof *p);
  if (!p) return pp_err_set(err, PP_NOMEM, "calibrate: out of memory");
  for (size_t j = 0; j < k; j++) {
    int is_int;
    if (cm_params_bounds(list[j], &p[j].lo, &p[j].hi, &is_int) || is_int) {
      free(p);
      return pp_err_set(err, PP_INPUT, "calibrate: '%.40s' is not a parameter a fit can move "
                        "(the real-valued ones of `podplan predict --param`)", list[j]);
    }
    p[j].name = list[j];
    cm_params_get(prior, list[j], &p[j].prior);
    p[j].logscale = p[j].prior > 0 && p[j].lo >= 0;
    p[j].shift = p[j].logscale && p[j].lo <= 0 ? 1e-3 * p[j].prior : 0;
  }
  *out = p, *np = k;
  return PP_OK;
}

/* ---- the fit ----------------------------------------------------------------------------- */

/* Which tried parameters move a fitted residual (P->act). */
/* Whether moving tried parameter j by 0.1% either way (from P->u) moves some fitted residual
 * from r0 by more than 1e-9 (*moves); r is scratch. P->u is left as it was. */
static int moves_residuals(problem *P, size_t j, const double *r0, double *r, int *moves) {
  double u0 = P->u[j], h = P->p[j].logscale ? 1e-3 : 1e-3 * (fabs(u0) > 1e-3 ? fabs(u0) : 1);
  int rc = PP_OK;
  *moves = 0;
  for (int sgn = -1; sgn <= 1 && !*moves && !rc; sgn += 2) {
    P->u[j] = u0 + sgn * h;
    rc = residuals_at(P, P->u, r);
    for (size_t i = 0; !rc && i < P->nuse && !*moves; i++) *moves = fabs(r[i] - r0[i]) > 1e-9;
  }
  P->u[j] = u0;
  return rc;
}

static int find_informed(problem *P, const double *r0) {
  double *r = malloc(P->nuse * sizeof *r);
  P->act = malloc((P->np + 1) * sizeof *P->act);
  int rc = !r || !P->act ? pp_err_set(P->err, PP_NOMEM, "calibrate: out of memory") : PP_OK;
  P->nact = 0;
  for (size_t j = 0; !rc && j < P->np; j++) {
    int moves;
    rc = moves_residuals(P, j, r0, r, &moves);
    if (!rc && moves) P->act[P->nact++] = j;
  }
  free(r);
  return rc;
}

/* Cauchy weights from the residuals at the current point; returns the largest change. */
static double reweight(const gsl_vector *f, const gsl_vector *wts_old, gsl_vector *wts) {
  size_t n = f->size;
  double *a = malloc(n * sizeof *a);
  if (!a) return 0;
  for (size_t i = 0; i < n; i++) {
    double w = gsl_vector_get(wts_old, i);
    a[i] = w > 0 ? fabs(gsl_vector_get(f, i)) / sqrt(w) : 0; /* f holds sqrt(w) r */
  }
  double *s = malloc(n * sizeof *s), med = 0;
  if (s) {
    memcpy(s, a, n * sizeof *s);
    for (size_t i = 1; i < n; i++) /* insertion sort: n is a few thousand at most */
      for (size_t j = i; j > 0 && s[j - 1] > s[j]; j--) {
        double t = s[j];
        s[j] = s[j - 1], s[j - 1] = t;
      }
    med = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  }
  double scale = med / 0.6745, change = 0;
  if (!(scale > 1e-12)) scale = 1e-12;
  for (size_t i = 0; i < n; i++) {
    double z = a[i] / (2.385 * scale), w = 1 / (1 + z * z);
    double d = fabs(w - gsl_vector_get(wts_old, i));
    if (d > change) change = d;
    gsl_vector_set(wts, i, w);
  }
  free(a), free(s);
  return change;
}

/* One trust-region run from x (weights wts); x gets the end point, *chi2 its weighted sum of
 * squares. PP_OK when converged, RUN_MORE when it used every iteration (x and chi2 still
 * filled: the descent only went down), else an error. */
enum { RUN_MORE = -1 };

static int run_lm(problem *P, gsl_multifit_nlinear_workspace *w, gsl_vector *x,
                  const gsl_vector *wts, int maxit, double *chi2, int *iters) {
  gsl_multifit_nlinear_fdf fdf = {.f = gsl_f, .df = NULL, .fvv = NULL, .n = nrows(P),
                                  .p = P->nact, .params = P};
  gsl_vector_const_view wv = gsl_vector_const_subvector(wts, 0, nrows(P));
  int info, st = gsl_multifit_nlinear_winit(x, &wv.vector, &fdf, w);
  if (!st)
    st = gsl_multifit_nlinear_driver((size_t)maxit, 1e-10, 1e-10, 1e-12, NULL, NULL, &info, w);
  *iters += (int)gsl_multifit_nlinear_niter(w);
  if (P->failed) return P->err->code;
  if (st && st != GSL_ENOPROG && st != GSL_EMAXITER)
    return pp_err_set(P->err, PP_INPUT, "calibrate: the fit failed: %s; nothing stored",
                      gsl_strerror(st));
  gsl_vector_memcpy(x, gsl_multifit_nlinear_position(w));
  gsl_blas_ddot(gsl_multifit_nlinear_residual(w), gsl_multifit_nlinear_residual(w), chi2);
  return st == GSL_EMAXITER ? RUN_MORE : PP_OK;
}

/* Starting points: the current point, then others drawn around it (a factor of about 2 either
 * way in log space, 50% in linear space), since a prediction that takes the faster of several
 * algorithms is piecewise and a single descent can stop at a kink; the lowest end wins. */
#define CAL__STARTS 8

static void start_point(const problem *P, int s, unsigned *rng, gsl_vector *x) {
  for (size_t a = 0; a < P->nact; a++) {
    const fitp *f = &P->p[P->act[a]];
    double u = P->u[P->act[a]];
    if (s > 0) {
      *rng ^= *rng << 13, *rng ^= *rng >> 17, *rng ^= *rng << 5;
      double z = 2.0 * ((*rng + 0.5) / 4294967296.0) - 1; /* -1 .. 1 */
      u = f->logscale ? u + 0.7 * z : u * (1 + 0.5 * z);
      double v = raw_value(f, u);
      if (v < f->lo || v > f->hi) u = P->u[P->act[a]];
    }
    gsl_vector_set(x, a, u);
  }
}

/* Descends from `starts` points over the parameters in P->act (weights wts) and moves P->u
 * to the lowest end; a best end that used every iteration goes on for four times as many,
 * and is refused if it still has not converged. */
static int descend(problem *P, const cal_opts *o, int starts, const gsl_vector *wts,
                   cal_result *r) {
  size_t p = P->nact;
  gsl_multifit_nlinear_parameters fp = gsl_multifit_nlinear_default_parameters();
  gsl_multifit_nlinear_workspace *w = gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust,
                                                                 &fp, nrows(P), p);
  gsl_vector *x = gsl_vector_alloc(p), *best = gsl_vector_alloc(p);
  int rc = PP_OK, maxit = o->max_iter > 0 ? o->max_iter : 200, found = 0, more = 0;
  double best_chi2 = INFINITY, chi2;
  unsigned rng = o->seed * 2654435761u + 1;
  if (!w || !x || !best) {
    rc = pp_err_set(P->err, PP_NOMEM, "calibrate: out of memory");
    goto done;
  }
  for (int s = 0; s < starts; s++) {
    start_point(P, s, &rng, x);
    int st = run_lm(P, w, x, wts, maxit, &chi2, &r->iterations);
    if (st > 0) { /* failed: a model cannot be built, or GSL gave up; another start may do */
      if (P->failed || (!found && s == starts - 1)) {
        rc = st;
        goto done;
      }
      continue;
    }
    if (chi2 < best_chi2) best_chi2 = chi2, gsl_vector_memcpy(best, x), found = 1, more = st;
  }
  if (!found) { /* every start failed; err holds the last reason */
    rc = P->err->code ? P->err->code : PP_INPUT;
    goto done;
  }
  if (more) {
    gsl_vector_memcpy(x, best);
    int st = run_lm(P, w, x, wts, 4 * maxit, &chi2, &r->iterations);
    if (st == RUN_MORE)
      rc = pp_err_set(P->err, PP_INPUT, "calibrate: the fit did not converge in %d iterations "
                      "(the measurements disagree with the model's form); nothing stored",
                      5 * maxit);
    else if (st)
      rc = st;
    else
      gsl_vector_memcpy(best, x);
  }
  if (!rc) {
    for (size_t a = 0; a < p; a++) P->u[P->act[a]] = gsl_vector_get(best, a);
    pp_err_clear(P->err);
  }
done:
  gsl_multifit_nlinear_free(w);
  gsl_vector_free(x), gsl_vector_free(best);
  return rc;
}

/* Whether the residuals at P->u equal r0 (within 1e-9 each); r is scratch. */
static int same_residuals(problem *P, const double *r0, double *r, int *same) {
  int rc = residuals_at(P, P->u, r);
  *same = 1;
  for (size_t i = 0; !rc && i < P->nuse && *same; i++) *same = fabs(r[i] - r0[i]) <= 1e-9;
  return rc;
}

/* At the end point some fitted parameters may no longer move any prediction nearby (the
 * algorithm they price is no longer the fastest anywhere, or a ramp saturated at a bound).
 * One that moves nothing at its prior either goes back there, out of the fit, not informed
 * (*dropped counts those: the rest is refitted). One whose prior would move the predictions
 * keeps its fitted value, out of the fit but informed (P->kept): at a bound it is that bound,
 * else it is undetermined (nothing nearby pins it). A parameter the descent pushed past one of
 * its bounds (in fit space, where nothing bounds it) is first put back on the bound, so that
 * it is tested where it takes effect. */
static int recheck(problem *P, size_t *dropped) {
  double *r0 = malloc(P->nuse * sizeof *r0), *r = malloc(P->nuse * sizeof *r);
  *dropped = 0;
  for (size_t a = 0; a < P->nact; a++) {
    const fitp *f = &P->p[P->act[a]];
    double v = to_value(f, P->u[P->act[a]]);
    if (v + f->shift > 0 || !f->logscale) P->u[P->act[a]] = to_fit(f, v);
  }
  int rc = !r0 || !r ? pp_err_set(P->err, PP_NOMEM, "calibrate: out of memory")
                     : residuals_at(P, P->u, r0);
  size_t keep = 0;
  for (size_t a = 0; !rc && a < P->nact; a++) {
    size_t j = P->act[a];
    const fitp *f = &P->p[j];
    int moves, same;
    rc = moves_residuals(P, j, r0, r, &moves);
    if (rc || moves) {
      P->act[keep++] = j;
      continue;
    }
    double u = P->u[j], v = to_value(f, u);
    P->u[j] = to_fit(f, f->prior);
    if ((rc = same_residuals(P, r0, r, &same))) break;
    if (same) {
      (*dropped)++;
      continue;
    }
    P->u[j] = u, P->kept[j] = 1;
    P->undetermined[j] = v > f->lo && v < f->hi;
  }
  if (!rc) P->nact = keep;
  free(r0), free(r);
  return rc;
}

/* sigma of each fitted parameter: the covariance at the end point scaled by the residual
 * variance. A parameter off its bounds that the measurements leave undetermined (its sigma in
 * fit space, with the residual variance taken as at least CAL__SCATTER^2, above 1: uncertain
 * by more than a factor e; no variance at all when GSL's pivoted QR finds its column of the
 * Jacobian in the others' span) is marked and taken out of the fit, the worst first
 * (try_prior: back at its prior, or held at its fitted value), and the others' sigmas are
 * taken again without it. */
#define CAL__SCATTER 0.01 /* the least scatter of real measurements, in log: 1% */

/* A fitted parameter's sigma in fit space for residual variance s2 (covariance c), relative
 * for one fitted as itself; INFINITY when it has no variance. */
static double spread(const fitp *f, double u, double c, double s2) {
  if (!(c > 0 && isfinite(c))) return INFINITY;
  double su = sqrt(c * s2);
  return f->logscale ? su : su / (fabs(u) > 0 ? fabs(u) : 1e-300);
}

/* The three fitted observations of the largest Cook's distance at the end point (J, f: the
 * weighted Jacobian and residuals, cov = (J^T W J)^-1, s2 the residual variance) into r. */
static void drivers(const problem *P, const gsl_matrix *J, const gsl_vector *f,
                    const gsl_matrix *cov, double s2, cal_result *r) {
  size_t p = P->nact;
  r->ndrivers = 0;
  for (size_t i = 0; i < P->nuse && s2 > 0 && p > 0; i++) {
    double h = 0;
    for (size_t a = 0; a < p; a++)
      for (size_t b = 0; b < p; b++)
        h += gsl_matrix_get(J, i, a) * gsl_matrix_get(cov, a, b) * gsl_matrix_get(J, i, b);
    double fi = gsl_vector_get(f, i);
    double d = h < 1 ? fi * fi * h / ((double)p * s2 * (1 - h) * (1 - h)) : INFINITY;
    int n = r->ndrivers;
    if (!(d > 0) || (n == 3 && d <= r->driver_cook[2])) continue;
    int k = n < 3 ? n : 2;
    if (n < 3) r->ndrivers++;
    for (; k > 0 && r->driver_cook[k - 1] < d; k--)
      r->driver[k] = r->driver[k - 1], r->driver_cook[k] = r->driver_cook[k - 1];
    r->driver[k] = P->use[i], r->driver_cook[k] = d;
  }
}

/* One pass over P->act: the sigmas into r, and in *worst the index (into P->act) of the most
 * undetermined parameter, (size_t)-1 when none is. */
static int sigmas(problem *P, const gsl_vector *wts, cal_result *r, size_t *worst) {
  size_t n = nrows(P), p = P->nact;
  gsl_multifit_nlinear_fdf fdf = {.f = gsl_f, .df = NULL, .fvv = NULL, .n = n, .p = p,
                                  .params = P};
  gsl_multifit_nlinear_parameters fp = gsl_multifit_nlinear_default_parameters();
  gsl_multifit_nlinear_workspace *w = gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust,
                                                                 &fp, n, p);
  gsl_vector *x = gsl_vector_alloc(p);
  gsl_matrix *cov = gsl_matrix_alloc(p, p);
  int rc = PP_OK;
  *worst = (size_t)-1;
  if (!w || !x || !cov) {
    rc = pp_err_set(P->err, PP_NOMEM, "calibrate: out of memory");
    goto done;
  }
  for (size_t a = 0; a < p; a++) gsl_vector_set(x, a, P->u[P->act[a]]);
  gsl_vector_const_view wv = gsl_vector_const_subvector(wts, 0, n);
  gsl_multifit_nlinear_winit(x, &wv.vector, &fdf, w); /* evaluates f and J at x */
  if (P->failed) {
    rc = P->err->code;
    goto done;
  }
  gsl_multifit_nlinear_covar(gsl_multifit_nlinear_jac(w), 1e-12, cov);
  double chi2;
  gsl_blas_ddot(gsl_multifit_nlinear_residual(w), gsl_multifit_nlinear_residual(w), &chi2);
  double s2 = chi2 / (double)(n - p), floor2 = CAL__SCATTER * CAL__SCATTER, most = 1;
  for (size_t a = 0; a < p; a++) {
    size_t j = P->act[a];
    const fitp *f = &P->p[j];
    double u = P->u[j], v = to_value(f, u), c = gsl_matrix_get(cov, a, a);
    if (on_bound(f, u)) { /* held by a bound: no spread around it */
      r->params[j].sigma = 0;
      continue;
    }
    double sp = spread(f, u, c, s2 > floor2 ? s2 : floor2);
    if (sp > most) most = sp, *worst = a;
    double su = c > 0 && isfinite(c) ? sqrt(c * s2) : 0;
    r->params[j].sigma = f->logscale ? (v + f->shift) * su : su;
  }
  drivers(P, gsl_multifit_nlinear_jac(w), gsl_multifit_nlinear_residual(w), cov, s2, r);
done:
  gsl_multifit_nlinear_free(w);
  gsl_vector_free(x);
  gsl_matrix_free(cov);
  return rc;
}

/* Sum of w_i r_i^2 over the fitted observations at P->u. */
static int chi2_at(problem *P, const gsl_vector *wts, double *chi2) {
  double *r = malloc(P->nuse * sizeof *r);
  int rc = r ? residuals_at(P, P->u, r) : pp_err_set(P->err, PP_NOMEM, "calibrate: out of memory");
  *chi2 = 0;
  for (size_t i = 0; !rc && i < P->nuse; i++) *chi2 += gsl_vector_get(wts, i) * r[i] * r[i];
  free(r);
  return rc;
}

/* Undetermined parameter j (out of P->act) back at its prior, the rest refitted from where
 * they are: kept so when the fit's weighted sum of squares rises by at most one residual
 * variance (the prior is as consistent with the measurements as the fitted value), else
 * everything goes back to where it was and j keeps its fitted value (P->kept). */
static int try_prior(problem *P, const cal_opts *o, const gsl_vector *wts, cal_result *r,
                     size_t j) {
  double c0, c1, *save = malloc(P->np * sizeof *save);
  if (!save) return pp_err_set(P->err, PP_NOMEM, "calibrate: out of memory");
  memcpy(save, P->u, P->np * sizeof *save);
  int rc = chi2_at(P, wts, &c0), ok = 0;
  if (!rc) {
    size_t dof = P->nuse > P->nact + 1 ? P->nuse - P->nact - 1 : 1;
    double var = c0 / (double)dof, floor2 = CAL__SCATTER * CAL__SCATTER;
    P->u[j] = to_fit(&P->p[j], P->p[j].prior);
    int st = P->nact ? descend(P, o, 1, wts, r) : PP_OK;
    if (P->failed) rc = P->err->code;
    else if (!st && !(rc = chi2_at(P, wts, &c1))) ok = c1 <= c0 + (var > floor2 ? var : floor2);
    if (!P->failed) pp_err_clear(P->err);
  }
  if (!ok) memcpy(P->u, save, P->np * sizeof *save);
  P->kept[j] = !ok;
  free(save);
  return rc;
}

static int uncertainty(problem *P, const cal_opts *o, const gsl_vector *wts, cal_result *r) {
  size_t worst;
  int rc = PP_OK;
  while (P->nact && !(rc = sigmas(P, wts, r, &worst)) && worst != (size_t)-1) {
    size_t j = P->act[worst];
    P->undetermined[j] = 1; /* its sigma: this pass's */
    memmove(P->act + worst, P->act + worst + 1, (P->nact - worst - 1) * sizeof *P->act);
    P->nact--;
    if ((rc = try_prior(P, o, wts, r, j))) break;
  }
  return rc;
}

/* The descent over P->act: several starts, parameters that stop mattering dropped (and the
 * rest refitted), the robust passes (wts updated). */
static int fit_active(problem *P, const cal_opts *o, gsl_vector *wts, gsl_vector *wn,
                      cal_result *r) {
  int rc = descend(P, o, CAL__STARTS, wts, r);
  for (size_t dropped = 1; !rc && dropped && P->nact;) {
    rc = recheck(P, &dropped);
    size_t nkept = 0;
    for (size_t j = 0; j < P->np; j++) nkept += P->kept[j];
    if (!rc && P->nact == 0 && nkept == 0)
      rc = pp_err_set(P->err, PP_INPUT, "calibrate: no parameter moves the predictions at the "
                      "fitted point; nothing stored");
    if (!rc && dropped && P->nact) rc = descend(P, o, 1, wts, r);
  }
  for (int pass = 0; !rc && o->robust && P->nact && pass < 8; pass++) {
    double *res = malloc(P->nuse * sizeof *res), change = 0;
    rc = res ? residuals_at(P, P->u, res) : pp_err_set(P->err, PP_NOMEM, "calibrate: out of memory");
    if (!rc) {
      gsl_vector_view rv = gsl_vector_view_array(res, P->nuse);
      for (size_t i = 0; i < P->nuse; i++) /* reweight() takes sqrt(w) r */
        res[i] *= sqrt(gsl_vector_get(wts, i));
      change = reweight(&rv.vector, wts, wn);
      gsl_vector_memcpy(wts, wn);
      rc = descend(P, o, 1, wts, r);
    }
    free(res);
    if (change < 1e-3) break;
  }
  return rc;
}

/* The fit, then the uncertainties. */
static int solve(problem *P, const cal_opts *o, cal_result *r) {
  gsl_vector *wts = gsl_vector_alloc(P->nuse + P->np + 1),
             *wn = gsl_vector_alloc(P->nuse + P->np + 1);
  if (!wts || !wn) {
    gsl_vector_free(wts), gsl_vector_free(wn);
    return pp_err_set(P->err, PP_NOMEM, "calibrate: out of memory");
  }
  gsl_vector_set_all(wts, 1.0); /* the prior rows keep weight 1 */
  gsl_vector_set_all(wn, 1.0);
  int rc = fit_active(P, o, wts, wn, r);
  if (!rc) rc = uncertainty(P, o, wts, r);
  gsl_vector_free(wts), gsl_vector_free(wn);
  return rc;
}

void cal_result_free(cal_result *r) {
  if (!r) return;
  free(r->params), free(r->held), free(r->before), free(r->after);
  memset(r, 0, sizeof *r);
}

/* Each tried parameter's prior and band in fit space (P->u0, P->band). */
static int prior_rows(problem *P) {
  P->u0 = calloc(P->np + 1, sizeof *P->u0);
  P->band = calloc(P->np + 1, sizeof *P->band);
  if (!P->u0 || !P->band) return pp_err_set(P->err, PP_NOMEM, "calibrate: out of memory");
  for (size_t j = 0; j < P->np; j++) {
    const fitp *f = &P->p[j];
    double b;
    if (cm_params_band(f->name, &b)) b = 1; /* no validated band: a factor e */
    P->u0[j] = to_fit(f, f->prior);
    P->band[j] = f->logscale ? b : b * (fabs(f->prior) > 0 ? fabs(f->prior) : (f->hi - f->lo) / 4);
  }
  return PP_OK;
}

/* The fit at o->prior_noise (>= 0). */
static int fit_once(const spec_model *m, const spec_cluster *c, const cm_params *prior,
                    const cal_obs *obs, size_t n, const cal_opts *o, cal_result *out,
                    pp_err *err) {
  problem P = {.m = m, .c = c, .base = prior, .obs = obs, .err = err};
  P.pw = o->prior_noise > 0 ? o->prior_noise * o->prior_noise : 0;
  int rc = tried_params(obs, n, o, prior, &P.p, &P.np, err);
  if (rc) return rc;
  out->prior_noise = o->prior_noise > 0 ? o->prior_noise : 0;
  out->nobs = n;
  out->nparams = P.np;
  out->params = calloc(P.np + 1, sizeof *out->params);
  out->held = calloc(n, 1);
  out->before = calloc(n, sizeof *out->before);
  out->after = calloc(n, sizeof *out->after);
  P.u = calloc(P.np + 1, sizeof *P.u);
  P.undetermined = calloc(P.np + 1, 1);
  P.kept = calloc(P.np + 1, 1);
  P.use = malloc(n * sizeof *P.use);
  size_t *all = malloc(n * sizeof *all);
  double *r0 = malloc(n * sizeof *r0);
  if (!out->params || !out->held || !out->before || !out->after || !P.u || !P.undetermined ||
      !P.kept || !P.use || !all || !r0) {
    rc = pp_err_set(err, PP_NOMEM, "calibrate: out of memory");
    goto done;
  }
  if ((rc = prior_rows(&P))) goto done;
  for (size_t j = 0; j < P.np; j++) {
    snprintf(out->params[j].name, sizeof out->params[j].name, "%s", P.p[j].name);
    out->params[j].prior = out->params[j].value = P.p[j].prior;
    P.u[j] = to_fit(&P.p[j], P.p[j].prior);
  }
  out->nheld = choose_held(n, o->holdout, o->seed, out->held);
  if (out->nheld == (size_t)-1) {
    rc = pp_err_set(err, PP_NOMEM, "calibrate: out of memory");
    goto done;
  }
  out->nheld = 0;
  for (size_t i = 0; i < n; i++) {
    all[i] = i;
    out->held[i] |= obs[i].aside != 0; /* kept aside: never fitted, reported as held out */
    out->nheld += out->held[i];
    if (!out->held[i]) P.use[P.nuse++] = i;
  }
  out->nfit = P.nuse;
  if ((rc = predict_at(&P, P.u, all, n, out->before))) goto done;
  for (size_t i = 0; i < P.nuse; i++) r0[i] = resid(out->before[P.use[i]], obs[P.use[i]].time_s);
  if ((rc = find_informed(&P, r0))) goto done;
  if (P.nact == 0) {
    rc = pp_err_set(err, PP_INPUT, "calibrate: none of the %zu parameters tried moves the "
                    "prediction of these %zu measurements; nothing to fit", P.np, P.nuse);
    goto done;
  }
  if (P.pw == 0 && P.nuse < P.nact + 1) {
    rc = pp_err_set(err, PP_INPUT, "calibrate: %zu fitted measurements for %zu informed "
                    "parameters: at least %zu needed; nothing stored", P.nuse, P.nact,
                    P.nact + 1);
    goto done;
  }
  if ((rc = solve(&P, o, out))) goto done;
  out->nfitted = P.nact;
  for (size_t a = 0; a < P.nact; a++) out->params[P.act[a]].informed = 1;
  for (size_t j = 0; j < P.np; j++) {
    cal_param *q = &out->params[j];
    q->undetermined = P.undetermined[j];
    q->informed |= P.kept[j];
    out->nfitted += P.kept[j];
    if (q->informed) q->value = to_value(&P.p[j], P.u[j]);
  }
  if ((rc = predict_at(&P, P.u, all, n, out->after))) goto done;
  out->mape_before = mape(out->before, obs, out->held, n, 0, &out->bias_before);
  out->mape_after = mape(out->after, obs, out->held, n, 0, &out->bias_after);
  out->held_mape_before = mape(out->before, obs, out->held, n, 1, NULL);
  out->held_mape_after = mape(out->after, obs, out->held, n, 1, NULL);
  double s = 0, s0 = 0;
  for (size_t i = 0; i < P.nuse; i++) {
    double e = resid(out->after[P.use[i]], obs[P.use[i]].time_s);
    s += e * e, s0 += r0[i] * r0[i];
  }
  out->fit_error = sqrt(s / (double)P.nuse);
  out->fit_error_before = sqrt(s0 / (double)P.nuse);
  out->worse = out->nheld > 0 && out->held_mape_after > out->held_mape_before;
done:
  free(P.p), free(P.u), free(P.undetermined), free(P.kept), free(P.use), free(P.act), free(all);
  free(P.u0), free(P.band);
  free(r0);
  if (rc) cal_result_free(out);
  return rc;
}

/* RMS of log(pred / measured) over obs[0..n). */
static double rms_log(const double *pred, const cal_obs *obs, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++) {
    double e = resid(pred[i], obs[i].time_s);
    s += e * e;
  }
  return n ? sqrt(s / (double)n) : 0;
}

/* CAL_PRIOR_AUTO: the prior_noise of cal_prior_noises whose fit predicts the observations the
 * fit uses (not aside, not held out) best in cross-validation (*noise, *cv_best), and the
 * priors' error on them (*cv_prior). A candidate a fold cannot fit (too few observations, no
 * convergence) is passed over; when none can be cross-validated (fewer than 2 groups), 0.1
 * and errors 0. */
static int choose_noise(const spec_model *m, const spec_cluster *c, const cm_params *prior,
                        const cal_obs *obs, size_t n, const cal_opts *o, double *noise,
                        double *cv_best, double *cv_prior, pp_err *err) {
  unsigned char *held = calloc(n + 1, 1);
  cal_obs *sub = malloc((n + 1) * sizeof *sub);
  double *cv = malloc((n + 1) * sizeof *cv), *pred = malloc((n + 1) * sizeof *pred);
  size_t ns = 0;
  int rc = held && sub && cv && pred && choose_held(n, o->holdout, o->seed, held) != (size_t)-1
               ? PP_OK
               : pp_err_set(err, PP_NOMEM, "calibrate: out of memory");
  *noise = 0.1, *cv_best = *cv_prior = 0;
  for (size_t i = 0; !rc && i < n; i++)
    if (!held[i] && !obs[i].aside) sub[ns++] = obs[i];
  if (!rc) rc = cal_predict(m, c, prior, NULL, sub, ns, pred, err);
  double best = INFINITY;
  int k = o->cv_folds > 1 ? o->cv_folds : 5;
  for (size_t q = 0; !rc && cal_prior_noises[q] >= 0; q++) {
    cal_opts fo = *o;
    fo.prior_noise = cal_prior_noises[q], fo.holdout = 0;
    int folds = 0;
    rc = cal_cv_folds(m, c, prior, sub, ns, &fo, k, cv, &folds, err);
    if (rc == PP_INPUT) { /* some fold cannot be fitted at this value */
      pp_err_clear(err);
      rc = PP_OK;
      continue;
    }
    if (rc || folds < 2) break;
    double e = rms_log(cv, sub, ns);
    if (e < best - 1e-12) best = e, *noise = cal_prior_noises[q];
  }
  if (!rc && isfinite(best)) *cv_best = best, *cv_prior = rms_log(pred, sub, ns);
  free(held), free(sub), free(cv), free(pred);
  return rc;
}

int cal_fit(const spec_model *m, const spec_cluster *c, const cm_params *prior,
            const cal_obs *obs, size_t n, const cal_opts *o, cal_result *out, pp_err *err) {
  cal_opts dflt = {0};
  if (!o) o = &dflt;
  memset(out, 0, sizeof *out);
  gsl_set_error_handler_off(); /* GSL reports through return codes here, never aborts */
  if (n < 2) return pp_err_set(err, PP_INPUT, "calibrate: %zu measurement(s): too few to fit", n);
  if (!(o->holdout >= 0 && o->holdout <= 0.9))
    return pp_err_set(err, PP_INPUT, "calibrate: holdout %g: must be 0 .. 0.9", o->holdout);
  if (!(o->prior_noise >= 0 || o->prior_noise == CAL_PRIOR_AUTO))
    return pp_err_set(err, PP_INPUT, "calibrate: prior noise %g: must be >= 0 (or auto)",
                      o->prior_noise);
  for (size_t i = 0; i < n; i++)
    if (check_obs(c, &obs[i], i, err)) return err->code;
  if (o->prior_noise >= 0) return fit_once(m, c, prior, obs, n, o, out, err);
  double noise, cv_best, cv_prior;
  int rc = choose_noise(m, c, prior, obs, n, o, &noise, &cv_best, &cv_prior, err);
  if (rc) return rc;
  cal_opts fo = *o;
  fo.prior_noise = noise;
  if ((rc = fit_once(m, c, prior, obs, n, &fo, out, err))) return rc;
  out->cv_error = cv_best, out->cv_error_prior = cv_prior;
  out->worse |= cv_prior > 0 && cv_best > cv_prior;
  return PP_OK;
}

/* ---- a calibration's JSON ----------------------------------------------------------------- */

char *cal_params_json(const cal_result *r) {
  json_t *o = json_object();
  for (size_t j = 0; o && j < r->nparams; j++) {
    const cal_param *q = &r->params[j];
    json_t *e = json_pack("{s:f, s:f, s:f, s:b, s:b}", "prior", q->prior, "value", q->value,
                          "sigma", q->sigma, "informed", q->informed, "undetermined",
                          q->undetermined);
    if (!e || json_object_set_new(o, q->name, e)) {
      json_decref(o);
      return NULL;
    }
  }
  char *s = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  json_decref(o);
  return s;
}

/* "name=x,..." of the informed parameters, x their value or (sigma) their sigma where it is
 * positive and finite. */
static int params_field(const char *json, const char *origin, int sigma, char *buf, size_t n,
                        pp_err *err);

int cal_params_list(const char *json, const char *origin, char *buf, size_t n, pp_err *err) {
  return params_field(json, origin, 0, buf, n, err);
}

int cal_params_sigmas(const char *json, const char *origin, char *buf, size_t n, pp_err *err) {
  return params_field(json, origin, 1, buf, n, err);
}

static int params_field(const char *json, const char *origin, int sigma, char *buf, size_t n,
                        pp_err *err) {
  json_error_t je;
  json_t *o = json_loads(json ? json : "", 0, &je);
  if (!o || !json_is_object(o)) {
    json_decref(o);
    return pp_err_set(err, PP_INPUT, "%s: parameters: not a JSON object (%s)", origin,
                      o ? "another type" : je.text);
  }
  const char *name;
  json_t *e;
  int rc = PP_OK;
  size_t at = 0;
  buf[0] = '\0';
  json_object_foreach(o, name, e) {
    json_t *v = json_object_get(e, "value"), *inf = json_object_get(e, "informed");
    if (!json_is_object(e) || !json_is_number(v) || !json_is_boolean(inf)) {
      rc = pp_err_set(err, PP_INPUT, "%s: parameters.%.40s: needs a number 'value' and a "
                      "boolean 'informed'", origin, name);
      break;
    }
    if (!json_is_true(inf)) continue;
    double x = json_number_value(v);
    if (sigma) {
      json_t *sg = json_object_get(e, "sigma");
      x = json_is_number(sg) ? json_number_value(sg) : 0;
      if (!(x > 0 && isfinite(x))) continue;
    }
    int k = snprintf(buf + at, n - at, "%s%s=%.17g", at ? "," : "", name, x);
    if (k < 0 || (size_t)k >= n - at) {
      rc = pp_err_set(err, PP_INPUT, "%s: parameters: too many to list", origin);
      break;
    }
    at += (size_t)k;
  }
  json_decref(o);
  return rc;
}

int cal_params_apply(cm_params *p, const char *json, const char *origin, pp_err *err) {
  char list[1024];
  if (cal_params_list(json, origin, list, sizeof list, err)) return err->code;
  if (list[0] && cm_params_apply(p, list, err)) return pp_err_prefix(err, "%s", origin);
  return PP_OK;
}

/* Each non-aside observation's fold: its group's position in a seeded shuffle of the groups
 * (in order of first appearance; an observation of group 0 is a group of its own), modulo k.
 * fold[i] = -1 for one aside. Returns the number of groups, or -1 when out of memory. */
static long fold_of(const cal_obs *obs, size_t n, int k, unsigned seed, int *fold) {
  long *key = malloc((n + 1) * sizeof *key);
  size_t *gi = malloc((n + 1) * sizeof *gi), *perm = malloc((n + 1) * sizeof *perm), ng = 0;
  if (!key || !gi || !perm) {
    free(key), free(gi), free(perm);
    return -1;
  }
  for (size_t i = 0; i < n; i++) {
    fold[i] = -1;
    if (obs[i].aside) continue;
    long kk = obs[i].group > 0 ? obs[i].group : -(long)i - 1;
    size_t g = 0;
    while (g < ng && key[g] != kk) g++;
    if (g == ng) key[ng++] = kk;
    gi[i] = g;
  }
  for (size_t g = 0; g < ng; g++) perm[g] = g;
  unsigned s = seed ? seed : 0x9e3779b9u;
  for (size_t i = ng; i > 1; i--) { /* the same shuffle as the hold-out's */
    s ^= s << 13, s ^= s >> 17, s ^= s << 5;
    size_t j = s % i, t = perm[i - 1];
    perm[i - 1] = perm[j], perm[j] = t;
  }
  for (size_t a = 0; a < ng; a++) key[perm[a]] = (long)(a % (size_t)k); /* group -> fold */
  for (size_t i = 0; i < n; i++)
    if (!obs[i].aside) fold[i] = (int)key[gi[i]];
  free(key), free(gi), free(perm);
  return (long)ng;
}

int cal_cv_folds(const spec_model *m, const spec_cluster *c, const cm_params *prior,
                 const cal_obs *obs, size_t n, const cal_opts *o, int k, double *cv, int *nfolds,
                 pp_err *err) {
  *nfolds = 0;
  if (k < 2) return pp_err_set(err, PP_INPUT, "calibrate: %d folds: at least 2", k);
  int *fold = malloc((n + 1) * sizeof *fold);
  cal_obs *train = malloc((n + 1) * sizeof *train), *test = malloc((n + 1) * sizeof *test);
  size_t *where = malloc((n + 1) * sizeof *where);
  double *pred = malloc((n + 1) * sizeof *pred);
  long ng = fold && train && test && where && pred ? fold_of(obs, n, k, o->seed, fold) : -1;
  int rc = ng >= 0 ? PP_OK : pp_err_set(err, PP_NOMEM, "calibrate: out of memory");
  for (size_t i = 0; i < n; i++) cv[i] = 0;
  cal_opts fo = *o;
  fo.holdout = 0;
  for (int f = 0; !rc && f < k; f++) {
    size_t ntr = 0, nte = 0;
    for (size_t i = 0; i < n; i++)
      if (fold[i] == f)
        where[nte] = i, test[nte++] = obs[i];
      else if (fold[i] >= 0)
        train[ntr++] = obs[i];
    if (!nte) continue;
    cal_result r;
    if ((rc = cal_fit(m, c, prior, train, ntr, &fo, &r, err))) {
      pp_err_prefix(err, "fold %d of %d", f + 1, k);
      break;
    }
    rc = cal_predict(m, c, prior, &r, test, nte, pred, err);
    for (size_t t = 0; !rc && t < nte; t++) cv[where[t]] = pred[t];
    cal_result_free(&r);
    (*nfolds)++;
  }
  free(fold), free(train), free(test), free(where), free(pred);
  return rc;
}

int cal_cv(const spec_model *m, const spec_cluster *c, const cm_params *prior, const cal_obs *obs,
           size_t n, const cal_opts *o, int k, double *cv, pp_err *err) {
  int folds;
  return cal_cv_folds(m, c, prior, obs, n, o, k, cv, &folds, err);
}
