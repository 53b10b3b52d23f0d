/* calibrate/ (prefix cal_): fits the cost model's parameters to measured times.
 *
 * Owns the fit: which parameters a set of measurements informs, GSL's nonlinear least squares
 * (gsl_multifit_nlinear, trust region) on the log of predicted over measured time, an optional
 * robust (Cauchy) reweighting, the parameters' uncertainties from the Jacobian, and the error
 * before and after on the fitted and on held-out measurements; and a calibration's JSON (the
 * fitted values, read back by `--calibration`). Depends on costmodel/ (the prediction of each
 * measurement, the parameter table cm_params_get/set/bounds), GSL (linked only here) and
 * Jansson; it reads store.h's measurement rows but never opens the store: study/ (the
 * calibration jobs, study_calib.c) reads the measurements and stores the calibration. */
#ifndef PODPLAN_CAL_H
#define PODPLAN_CAL_H

#include <stddef.h>
#include <stdint.h>

#include "podplan/cm.h"
#include "podplan/err.h"
#include "podplan/spec.h"
#include "podplan/store.h"

/* What was measured. */
typedef enum {
  CAL_COLL, /* a collective on the cluster's first `ranks` GPUs (as predict --collective) */
  CAL_GEMM, /* an m x n x k GEMM on one GPU (batch of them when batch > 1) */
  CAL_OP,   /* another op of a run priced alone (cm_lop_time): attention, memory-bound */
  CAL_ITER, /* a whole iteration of a plan (a published run, a backend run) */
  CAL_NKINDS
} cal_kind;

typedef struct cal_obs {
  cal_kind kind;
  int64_t id;      /* the measurement's row in the store (0: none) */
  double time_s;   /* measured seconds (> 0) */
  cm_coll coll;    /* CAL_COLL */
  double bytes;    /* CAL_COLL: nccl-tests' size (predict --collective's --bytes) */
  int ranks;       /* CAL_COLL */
  int stride;      /* CAL_COLL: GPU stride of the group from GPU 0 (0 or 1: consecutive) */
  double m, n, k;  /* CAL_GEMM, CAL_OP attention */
  double batch;    /* CAL_GEMM, CAL_OP attention: 0 or 1 for one */
  cm_lop_kind lop; /* CAL_OP: CM_LOP_ATTN (m, n, k, batch, causal, backward) or CM_LOP_MEM
                      (bytes) */
  int causal;      /* CAL_OP attention */
  int backward;    /* CAL_OP attention: its whole backward (cm_attn_time) */
  int attn_product; /* CAL_GEMM: a backward attention's score product (cal_obs_fold_attn adds
                       its time to that attention's backward) */
  /* CAL_ITER: the run's own model, cluster, resolved plan and parameters (its software
   * settings; the fitted values go on top) */
  const spec_model *model;
  const spec_cluster *cluster;
  const spec_plan *plan;
  const cm_params *base;
  int aside;       /* 1: never fitted (kept aside to check the model); reported as held out */
  int group;       /* cross-validation holds out a group's observations together (a run's
                      ops and its iteration); 0: a group of its own */
} cal_obs;

/* The parameters measurements of each kind can inform, by name (NULL-terminated). */
const char *const *cal_candidates(cal_kind k);

typedef struct cal_opts {
  const char *const *names; /* the parameters to fit (NULL-terminated); NULL: the candidates of
                               every kind present */
  double holdout;           /* fraction of the observations kept out of the fit, 0 .. 0.9 */
  unsigned seed;            /* which ones (the same seed, the same choice) */
  int robust;               /* 1: Cauchy weights, refitted until they settle */
  int max_iter;             /* trust-region iterations (0: 200) */
  /* Regularisation toward the priors: the fit minimises sum r_i^2 + s^2 sum z_j^2, z_j the
   * j-th fitted parameter's distance from its prior in units of its band (cm_params_band;
   * a factor e without one), s = prior_noise the measurements' noise in log the bands are
   * weighed against (a MAP estimate with Gaussian priors). 0: none (the plain fit);
   * CAL_PRIOR_AUTO: chosen by cross-validation among cal_prior_noises (folds: cv_folds, by
   * group), the plain fit included. */
  double prior_noise;
  int cv_folds;             /* CAL_PRIOR_AUTO: folds (0: 5) */
} cal_opts;
#define CAL_PRIOR_AUTO (-1.0)
/* The prior_noise values CAL_PRIOR_AUTO tries (0: the plain fit), terminated by a negative. */
extern const double cal_prior_noises[];

typedef struct cal_param {
  char name[40];
  double prior;  /* the value before (the caller's parameters) */
  double value;  /* fitted; the prior when not informed */
  double sigma;  /* one standard deviation of value (from the Jacobian; 0 when not fitted;
                    for an undetermined one, the sigma that made it so, or 0) */
  int informed;  /* 0: left at its prior (nothing depends on it, or undetermined) */
  int undetermined; /* 1: the measurements leave it uncertain by more than a factor e (most
                       often: it moves the predictions only as other parameters together
                       do): at its prior (informed 0) where the rest refitted fits as well,
                       else informed with the value the fit's predictions use; the others'
                       sigmas are taken with it held */
} cal_param;

typedef struct cal_result {
  cal_param *params;
  size_t nparams, nfitted;   /* all tried, and those informed and fitted */
  size_t nobs, nfit, nheld;  /* observations: all, fitted, held out */
  unsigned char *held;       /* [nobs] 1: held out */
  double *before, *after;    /* [nobs] predicted seconds with the prior and fitted values */
  double mape_before, mape_after;           /* fitted observations, percent */
  double held_mape_before, held_mape_after; /* held-out ones, percent (0 when none) */
  double bias_before, bias_after;           /* mean signed error of the fitted ones, percent */
  double fit_error;          /* RMS of log(predicted / measured) after, fitted observations */
  double fit_error_before;   /* the same with the prior values (what the fit lowers) */
  int iterations;            /* trust-region iterations (summed over robust passes) */
  double prior_noise;        /* the regularisation used (0: none) */
  /* CAL_PRIOR_AUTO: RMS of log(predicted / measured) of the fitted observations, each
   * predicted by the fit of the other folds at the chosen prior_noise, and with the prior
   * values (0 when not cross-validated) */
  double cv_error, cv_error_prior;
  int worse;                 /* 1: the fit predicts measurements it did not see worse than the
                                priors do (cross-validated, or on the held-out ones): not to
                                be taken as the cluster's calibration unasked */
  int ndrivers;              /* the observations that moved the fit most (Cook's distance at */
  size_t driver[3];          /* the end point), most first: indices into the observations */
  double driver_cook[3];
} cal_result;

/* Fits the parameters to the observations on cluster c (model m only supplies what the cost
 * model needs to exist; no observation kind here depends on it), starting from `prior`.
 * PP_INPUT for bad observations (a time not > 0 or not finite, a group larger than the
 * cluster, an unknown parameter), for fewer fitted observations than informed parameters + 1
 * (without a prior) and for a fit that does not converge or where no parameter moves the predictions at the
 * end point; out is then empty. A parameter the measurements leave undetermined is flagged
 * (cal_param.undetermined), not refused. */
int cal_fit(const spec_model *m, const spec_cluster *c, const cm_params *prior,
            const cal_obs *obs, size_t n, const cal_opts *o, cal_result *out, pp_err *err);
/* Predicted seconds of each observation with a fit's informed values on top of `prior` (or of
 * a CAL_ITER observation's own parameters). */
int cal_predict(const spec_model *m, const spec_cluster *c, const cm_params *prior,
                const cal_result *fit, const cal_obs *obs, size_t n, double *pred, pp_err *err);
/* k-fold cross-validation: the observations not aside, their groups (cal_obs.group) shuffled
 * by o->seed into k folds; each fold predicted (cv[i]) by the fit of the other k - 1
 * (o->holdout ignored; o->prior_noise as given: CAL_PRIOR_AUTO chooses again in each fold).
 * cv[i] of an observation aside is 0. */
int cal_cv(const spec_model *m, const spec_cluster *c, const cm_params *prior, const cal_obs *obs,
           size_t n, const cal_opts *o, int k, double *cv, pp_err *err);
/* cal_cv, and in *nfolds the folds that held observations. */
int cal_cv_folds(const spec_model *m, const spec_cluster *c, const cm_params *prior,
                 const cal_obs *obs, size_t n, const cal_opts *o, int k, double *cv, int *nfolds,
                 pp_err *err);
void cal_result_free(cal_result *r);

/* The fitted values as JSON: {"name": {"prior": p, "value": v, "sigma": s, "informed": b,
 * "undetermined": b}, ...} (malloc'd; NULL when out of memory). */
char *cal_params_json(const cal_result *r);
/* Applies a calibration's JSON (cal_params_json) to p: every informed parameter's value.
 * PP_INPUT naming `origin` and the field for malformed JSON or an out-of-range value. */
int cal_params_apply(cm_params *p, const char *json, const char *origin, pp_err *err);
/* The same values as a cm_params_apply list ("name=value,...") in buf[n]. */
int cal_params_list(const char *json, const char *origin, char *buf, size_t n, pp_err *err);
/* The same list with each informed parameter's sigma (its posterior's standard deviation)
 * instead of its value; parameters without a positive finite sigma are left out. */
int cal_params_sigmas(const char *json, const char *origin, char *buf, size_t n, pp_err *err);

/* A stored measurement (row id `id`) as an observation on cluster c: 1, or 0 with the reason
 * it is left out in *why (another kind, a CPU measurement on a GPU cluster, a run's collective
 * without its own time or on a group placed otherwise than cm_place_group places one). */
int cal_obs_from_row(const store_measurement *r, int64_t id, const spec_cluster *c,
                     cal_obs *out, const char **why);

/* Merges the CAL_GEMM, CAL_OP and CAL_COLL observations of one run (the same key[i], e.g. the
 * run's key; NULL keys are never merged) and one shape (a collective: its kind, bytes, ranks
 * and stride) into the first of them, with their mean time: a run repeats each layer's ops on
 * every member, and a fit should weigh shapes, not repetitions. Others keep
 * their order; obs and key are compacted in place. Returns the new count. NOMEM leaves them
 * as they were (returns n). */
size_t cal_obs_merge(cal_obs *obs, const char **key, size_t n);

/* After cal_obs_merge: each backward attention of a run (its two passes, one observation of
 * the pass's mean) becomes one observation of the whole backward, 2 passes + its score product
 * (a GEMM of m x k x n/2 of the same run), as cm_attn_time prices it; the product stays a GEMM
 * observation as well (its shape informs the GEMM model). A backward attention without its
 * product (flash attention off: the layer cost prices no attention kernel) is dropped and
 * counted in *unpaired. Compacts obs and key in place and returns the new count. */
size_t cal_obs_fold_attn(cal_obs *obs, const char **key, size_t n, size_t *unpaired);

/* What a calibration records (malloc'd JSON; NULL when out of memory): per observation its id,
 * measured, before and after seconds and whether it was held out; and the summary (counts,
 * MAPE and bias before and after, fitted and held out, collectives by size range). */
char *cal_residuals_json(const cal_result *r, const cal_obs *obs);
char *cal_summary_json(const cal_result *r, const cal_obs *obs);

/* Plots with gnuplot in dir (which must exist): <tag>-fit.{png,svg} (predicted against
 * measured before and after, log-log, y = x) and <tag>-residuals.{png,svg} (the error against
 * message bytes, GEMM FLOPs or published time), from <tag>.dat and <tag>-{png,svg}.gp.
 * PP_IO when gnuplot cannot run or fails. */
int cal_plots(const char *dir, const char *tag, const char *title, const cal_result *r,
              const cal_obs *obs, pp_err *err);

/* Collectives' error by message size: < 1 MiB, 1-64 MiB, >= 64 MiB (every observation). */
#define CAL_NRANGES 3
typedef struct cal_range_error {
  const char *range;
  int n;
  double mape_before, mape_after; /* percent */
} cal_range_error;
void cal_range_errors(const cal_result *r, const cal_obs *obs, cal_range_error out[CAL_NRANGES]);

/* Errors per group of observations (e.g. the source of published runs), in percent: MAPE and
 * bias (mean signed error) before, after the fit (in-sample) and cross-validated (cv: each
 * predicted by the fit that left it out; may be NULL) over the fitted ones, and before and
 * after over those aside. Groups in the order first seen, then one named "all". Returns the
 * number of groups written (at most max). */
typedef struct cal_group_error {
  const char *name;
  int n, aside;
  double mape_before, mape_after, mape_cv, bias_before, bias_after, bias_cv;
  double aside_mape_before, aside_mape_after, aside_bias_before, aside_bias_after;
} cal_group_error;
int cal_group_errors(const cal_obs *obs, const char *const *group, size_t n, const double *before,
                     const double *after, const double *cv, cal_group_error *out, int max);

#endif
