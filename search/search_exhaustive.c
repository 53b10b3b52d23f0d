/* exhaustive: every plan of the uniform space, scored by the cost model. The space is cut
 * into units of UNIT_PLANS consecutive plans. Inside a unit a plan is skipped, without
 * losing any of the unit's best K, when a bound from compute alone already reaches the
 * unit's K-th best time:
 *   iteration >= microbatches * (busiest pipeline rank's time per microbatch)
 *             >= microbatches * ceil(layers / pp) * (forward + backward + recompute of a layer)
 * since the pipeline term of cm_eval is microbatches * max stage time plus a non-negative
 * bubble, a stage's time adds compute and non-negative communication, and some pipeline
 * rank holds at least ceil(layers / pp) layers. */
#include <math.h>
#include <stdlib.h>

#include "search_int.h"

#define UNIT_PLANS 4096

typedef struct ex_state {
  search_uspace *u;
} ex_state;

static int ex_prepare(search__run *run, pp_err *err) {
  ex_state *s = calloc(1, sizeof *s);
  if (!s) return pp_err_set(err, PP_NOMEM, "search: out of memory");
  run->state = s;
  return search_uspace_build(&run->o->space, &run->m, &run->c, &s->u, err);
}

static void ex_release(search__run *run) {
  ex_state *s = run->state;
  if (!s) return;
  search_uspace_free(s->u);
  free(s);
  run->state = NULL;
}

static int ex_units(search__run *run, int *n, pp_err *err) {
  (void)err;
  size_t size = search_uspace_size(((ex_state *)run->state)->u);
  *n = (int)((size + UNIT_PLANS - 1) / UNIT_PLANS);
  return PP_OK;
}

static double ex_space(search__run *run) {
  return (double)search_uspace_size(((ex_state *)run->state)->u);
}

/* The compute-only bound of a uniform plan (see the top of this file). */
static double compute_bound(search__unit *u, const spec_plan *p) {
  cm_layer_profile pr;
  if (cm_layer_profile_get(u->cm, p->tp, p->cp, p->ep, p->dp, p->mbs, p->sp, p->recompute, &pr))
    return 0;
  int L = u->run->m.layers, per_rank = (L + p->pp - 1) / p->pp;
  return spec_plan_microbatches(p) * per_rank * (pr.fwd_s + pr.bwd_s + pr.recomp_s);
}

/* Searches plans [first, end) of the uniform space into the unit. */
int search__uniform_range(search__unit *u, const search_uspace *us, size_t first, size_t end,
                          pp_err *err) {
  for (size_t i = first; i < end; i++) {
    if ((i & 255) == 0 && search__expired(u->run)) {
      u->complete = 0;
      break;
    }
    spec_plan p;
    search_uspace_plan(us, i, &p);
    double cut = search__top_cut(&u->top);
    if (cut < INFINITY && compute_bound(u, &p) >= cut) {
      u->pruned++;
      continue;
    }
    if (search__eval(u, &p, NULL, err)) return err->code;
  }
  return PP_OK;
}

static int ex_unit(search__unit *u, pp_err *err) {
  const search_uspace *us = ((ex_state *)u->run->state)->u;
  size_t first = (size_t)u->unit * UNIT_PLANS, end = first + UNIT_PLANS;
  if (end > search_uspace_size(us)) end = search_uspace_size(us);
  return search__uniform_range(u, us, first, end, err);
}

const search__method search__exhaustive = {
    SEARCH_EXHAUSTIVE, "exhaustive", ex_prepare, ex_units, ex_unit, ex_release, ex_space,
};
