/* The pillar study's verdicts under the cost model's uncertainty (study_int.h). For each case,
 * the best plans every rung stored (its search run's top 3, read back from the store) are
 * re-scored under K draws of the cost-model parameters; in each draw a rung's time is the
 * least of its plans, and global's is the least over every rung whose space lies in global's
 * (global, the two-level-space rungs, the knob rungs, exhaustive, Megatron). A verdict's
 * fraction is the share of draws in which it holds.
 *
 * The draws. A parameter the case's calibration fitted (informed) is drawn from its
 * posterior: normal around the fitted value with the fit's sigma. Every other parameter of
 * the band table (cm_params_band) is drawn log-normally around its value, exp(N(0, s))
 * times it, with s its validated relative error (the README's accuracy table: the end-to-end
 * error of the Megatron recipes for the compute efficiencies, the nccl-tests fits for the
 * collectives).
 * Draws are clamped to the parameter's range (cm_params_bounds); they are independent (no
 * correlation between parameters is known). GSL's Mersenne Twister, seeded per case from
 * its key, so a rerun gives the same fractions. */
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "podplan/cal.h"
#include "podplan/cm.h"
#include "podplan/store.h"
#include "study_int.h"


/* The rungs whose spaces lie in global's: the least of them is global's time in a draw. */
static int in_global(study__pm m) {
  return m == STUDY__PM_GLOBAL || m == STUDY__PM_SPACE_NODE || m == STUDY__PM_SPACE_DOMAIN ||
         m == STUDY__PM_EXHAUSTIVE || m == STUDY__PM_MEGATRON ||
         (m >= STUDY__PM_KNOB_FIRST && m <= STUDY__PM_KNOB_LAST);
}

/* The practical methods the winner verdict compares. */
static const study__pm contenders[] = {STUDY__PM_MEGATRON, STUDY__PM_TWO_LEVEL,
                                       STUDY__PM_TWO_LEVEL_DOMAIN, STUDY__PM_TWO_LEVEL_ALL,
                                       STUDY__PM_TWO_LEVEL_OPEN};
#define NCONT 5

typedef struct rplans {
  spec_plan p[STUDY__TOP];
  int n;
} rplans;

/* The verdicts on one set of rung times (t[m] <= 0: no time); held[v] 1/0, or -1 where the
 * verdict does not apply. winner: the contender index that must win for the last verdict
 * (-1: the nominal run, which sets it). */
static void judge(const double *t, int *winner, int held[STUDY__NVERDICT]) {
  double g = INFINITY;
  for (int m = 0; m < STUDY__PM_N; m++)
    if (in_global((study__pm)m) && t[m] > 0 && t[m] < g) g = t[m];
  for (int v = 0; v < STUDY__NVERDICT; v++) held[v] = -1;
  if (!isfinite(g)) return;
  static const struct {
    study__pm m;
    double lim;
    int above;
  } rule[STUDY__V_WINNER] = { /* the verdicts before the winner's, in their text's order */
      {STUDY__PM_TWO_LEVEL, 0.01, 0},   {STUDY__PM_TWO_LEVEL_OPEN, 0.01, 0},
      {STUDY__PM_SPACE_NODE, 0.01, 0},  {STUDY__PM_SPACE_NODE, 0.05, 1},
      {STUDY__PM_SPACE_DOMAIN, 0.01, 0}};
  for (int v = 0; v < STUDY__V_WINNER; v++) {
    double x = t[rule[v].m];
    if (x > 0) held[v] = rule[v].above ? x / g - 1 > rule[v].lim : x / g - 1 <= rule[v].lim;
  }
  int best = -1;
  for (int j = 0; j < NCONT; j++)
    if (t[contenders[j]] > 0 && (best < 0 || t[contenders[j]] < t[contenders[best]])) best = j;
  if (best >= 0) {
    if (*winner < 0) *winner = best;
    held[STUDY__V_WINNER] = best == *winner;
  }
  for (int m = STUDY__PM_KNOB_FIRST; m <= STUDY__PM_KNOB_LAST; m++)
    if (t[m] > 0) held[STUDY__V_KNOB + m - STUDY__PM_KNOB_FIRST] = t[m] / g - 1 > 0.01;
}

/* Reads back rung m's top plans (its search run) into out. */
static int load_plans(store *st, const study__pres *r, rplans *out, pp_err *err) {
  int64_t ids[STUDY__TOP];
  double secs[STUDY__TOP];
  char *mj = NULL, *cj = NULL;
  out->n = 0;
  if (!r->ran || !r->found || r->run_id <= 0) return PP_OK;
  int n = 0,
      rc = store_get_search_top(st, r->run_id, STUDY__TOP, ids, secs, &n, &mj, &cj, err);
  free(mj), free(cj);
  for (int i = 0; !rc && i < n; i++)
    if (!(rc = store_get_plan(st, ids[i], &out->p[out->n], err))) out->n++;
  return rc;
}

/* The value of name in a "name=x,..." list (0: not there). */
static double list_value(const char *list, const char *name) {
  size_t n = strlen(name);
  for (const char *p = list; p && *p;) {
    const char *e = strchr(p, ',');
    if (!strncmp(p, name, n) && p[n] == '=') return strtod(p + n + 1, NULL);
    p = e ? e + 1 : NULL;
  }
  return 0;
}

/* One draw of the parameters around base (posterior list: "name=sigma,..." of the
 * calibration's fitted parameters, or NULL). */
static int draw(gsl_rng *g, const cm_params *base, const char *posterior, cm_params *out,
                pp_err *err) {
  *out = *base;
  for (size_t i = 0; i < cm_params_band_count(); i++) {
    const char *name = cm_params_band_name(i);
    double v, lo, hi, band, sigma = list_value(posterior, name);
    int is_int;
    if (cm_params_get(base, name, &v) || cm_params_bounds(name, &lo, &hi, &is_int) ||
        cm_params_band(name, &band))
      continue;
    double x = sigma > 0 ? v + gsl_ran_gaussian(g, sigma) : v * exp(gsl_ran_gaussian(g, band));
    if (cm_params_set(out, name, fmin(hi, fmax(lo, x)), err)) return err->code;
  }
  return PP_OK;
}

/* Every rung's time under parameters p: the least of its plans that the model finds
 * feasible (0: none). */
static int rung_times(const spec_model *m, const spec_cluster *c, const cm_params *p,
                      const rplans *rp, double *t, pp_err *err) {
  cm_model *cm = NULL;
  if (cm_model_create(m, c, p, &cm, err)) return err->code;
  int rc = PP_OK;
  for (int k = 0; k < STUDY__PM_N && !rc; k++) {
    t[k] = 0;
    for (int i = 0; i < rp[k].n && !rc; i++) {
      cm_result r;
      if ((rc = cm_eval(cm, &rp[k].p[i], &r, err))) break;
      if (r.feasible && (t[k] <= 0 || r.iter_time_s < t[k])) t[k] = r.iter_time_s;
    }
  }
  cm_model_destroy(cm);
  return rc;
}

/* A seed from the case (its fabric, model and size): the same case, the same draws. */
static unsigned long case_seed(const study__pcase *k) {
  unsigned long h = 5381;
  for (const char *s = k->fabric; *s; s++) h = h * 33 + (unsigned char)*s;
  for (const char *s = k->model_arg; *s; s++) h = h * 33 + (unsigned char)*s;
  return h * 33 + (unsigned long)k->gpus * 7919u + (unsigned long)k->gbs;
}

/* The verdicts by the simulator: each rung's simulated best where both it and global's
 * family were simulated; sim_flip[v] when that verdict differs from the cost model's. */
static void sim_verdicts(study__pcase *k, int winner) {
  double t[STUDY__PM_N];
  for (int m = 0; m < STUDY__PM_N; m++)
    t[m] = k->res[m].ran && k->res[m].found ? k->res[m].sim_s : 0;
  int held[STUDY__NVERDICT], w = winner;
  judge(t, &w, held);
  for (int v = 0; v < STUDY__NVERDICT; v++)
    k->rob.sim_flip[v] = held[v] >= 0 && k->rob.nominal[v] >= 0 && held[v] != k->rob.nominal[v];
}

static int robust_case(study__pcase *k, store *st, int draws, const char *calib_params,
                       const char *posterior, pp_err *err) {
  spec_model m;
  spec_cluster c;
  memset(&k->rob, 0, sizeof k->rob);
  if (k->na[0] || !strcmp(k->set, "ablation")) return PP_OK;
  if (spec_model_load(k->model_arg, &m, err) || spec_cluster_load(k->fabric, k->gpus, &c, err))
    return err->code;
  cm_params base;
  cm_params_default(&m, &base);
  if (calib_params && cm_params_apply(&base, calib_params, err)) return err->code;
  rplans *rp = calloc(STUDY__PM_N, sizeof *rp);
  gsl_rng *g = gsl_rng_alloc(gsl_rng_mt19937);
  int rc = rp && g ? PP_OK : pp_err_set(err, PP_NOMEM, "pillar: out of memory");
  for (int j = 0; !rc && j < STUDY__PM_N; j++) rc = load_plans(st, &k->res[j], &rp[j], err);
  double t[STUDY__PM_N];
  int winner = -1;
  if (!rc) rc = rung_times(&m, &c, &base, rp, t, err);
  if (!rc) {
    judge(t, &winner, k->rob.nominal);
    k->rob.winner = winner >= 0 ? (int)contenders[winner] : -1;
    gsl_rng_set(g, case_seed(k));
  }
  for (int d = 0; !rc && d < draws && winner >= 0; d++) {
    cm_params p;
    int held[STUDY__NVERDICT];
    if ((rc = draw(g, &base, posterior, &p, err)) || (rc = rung_times(&m, &c, &p, rp, t, err)))
      break;
    judge(t, &winner, held);
    for (int v = 0; v < STUDY__NVERDICT; v++) {
      k->rob.held[v] += held[v] == 1;
      k->rob.judged[v] += held[v] >= 0;
    }
  }
  if (!rc && winner >= 0) {
    k->rob.draws = draws;
    sim_verdicts(k, winner);
  }
  for (int j = 0; rp && j < STUDY__PM_N; j++)
    for (int i = 0; i < rp[j].n; i++) spec_plan_clear(&rp[j].p[i]);
  free(rp);
  gsl_rng_free(g);
  return rc;
}

int study__pillar_robust(study__pcase *cases, int n, store *st, int draws,
                         const char *calib_cluster, const char *calib_params,
                         const char *calib_sigmas, pp_err *err) {
  for (int i = 0; i < n; i++) {
    int cal = calib_cluster && !strcmp(calib_cluster, cases[i].fabric);
    if (robust_case(&cases[i], st, draws, cal ? calib_params : NULL, cal ? calib_sigmas : NULL,
                    err))
      return pp_err_prefix(err, "pillar: robustness of %s on %s x%d", cases[i].model,
                           cases[i].fabric, cases[i].gpus);
  }
  return PP_OK;
}
