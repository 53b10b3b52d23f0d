/* TEMPORARY stand-in for the search core (search/search.c, search_space.c) until it lands on
 * main: the few internals the two-level method calls, in their simplest form, so that its tests
 * run on this branch. Removed when main's core is merged. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "search_int.h"

double search__now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int search__expired(const search__run *run) {
  return run->deadline > 0 && search__now() > run->deadline;
}

int search__top_init(search__top *t, int k, pp_err *err) {
  t->k = k, t->n = 0;
  t->e = calloc((size_t)k, sizeof *t->e);
  return t->e ? PP_OK : pp_err_set(err, PP_NOMEM, "out of memory");
}

void search__top_free(search__top *t) {
  for (int i = 0; i < t->n; i++) spec_plan_clear(&t->e[i].plan);
  free(t->e);
  t->e = NULL, t->n = 0;
}

double search__top_cut(const search__top *t) {
  return t->n < t->k ? INFINITY : t->e[t->n - 1].cm.iter_time_s;
}

int search__top_offer(search__top *t, const spec_plan *p, const cm_result *r, int unit,
                      pp_err *err) {
  if (!r->feasible || r->iter_time_s >= search__top_cut(t)) return 0;
  if (t->n == t->k) spec_plan_clear(&t->e[--t->n].plan);
  int i = t->n;
  while (i > 0 && t->e[i - 1].cm.iter_time_s > r->iter_time_s) t->e[i] = t->e[i - 1], i--;
  memset(&t->e[i], 0, sizeof t->e[i]);
  if (spec_plan_copy(&t->e[i].plan, p, err)) return -1;
  t->e[i].cm = *r;
  t->e[i].unit = unit;
  t->n++;
  return 1;
}

int search__eval(search__unit *u, const spec_plan *p, cm_result *r, pp_err *err) {
  cm_result tmp;
  if (!r) r = &tmp;
  if (cm_eval(u->cm, p, r, err)) return err->code;
  u->evaluations++;
  if (r->feasible) u->feasible++;
  else if (u->min_excess_gib == 0 || r->mem_excess_gib < u->min_excess_gib) {
    u->min_excess_gib = r->mem_excess_gib;
    snprintf(u->why, sizeof u->why, "the best plan needs %.2f GiB more than the GPU has",
             r->mem_excess_gib);
  }
  return search__top_offer(&u->top, p, r, u->unit, err) < 0 ? err->code : PP_OK;
}

int search_plan_build(const search_stage *st, int n, int gbs, int microbatches, int sp, int zero,
                      const spec_model *m, const spec_cluster *c, spec_plan *out, pp_err *err) {
  memset(out, 0, sizeof *out);
  out->gbs = gbs, out->microbatches = microbatches, out->sp = sp, out->zero = zero;
  out->schedule = SPEC_SCHED_1F1B, out->nstages = n, out->pp = n;
  out->stages = calloc((size_t)n, sizeof *out->stages);
  if (!out->stages) return pp_err_set(err, PP_NOMEM, "out of memory");
  int layer = 0;
  for (int i = 0; i < n; i++) {
    spec_stage *s = &out->stages[i];
    s->layer_begin = layer, s->layer_end = layer += st[i].layers;
    s->tp = st[i].tp, s->dp = st[i].dp, s->cp = st[i].cp, s->ep = st[i].ep;
    s->recompute = st[i].recompute;
    s->ngpus = st[i].ngpus;
    s->gpus = malloc((size_t)s->ngpus * sizeof *s->gpus);
    if (!s->gpus) {
      spec_plan_clear(out);
      return pp_err_set(err, PP_NOMEM, "out of memory");
    }
    for (int g = 0; g < s->ngpus; g++) s->gpus[g] = st[i].first_gpu + g;
  }
  int rc = spec_plan_resolve(out, m, c, err);
  if (rc) spec_plan_clear(out);
  return rc;
}
