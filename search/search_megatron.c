/* megatron: the heuristic of Narayanan et al., "Efficient Large-Scale Language Model Training
 * on GPU Clusters Using Megatron-LM", SC'21, Sec. 5 (takeaways 1-3), as one configures
 * Megatron-LM by hand:
 *   1. tensor parallelism up to the GPUs of a server, then pipeline parallelism across
 *      servers: model-parallel sizes M = tp * pp are tried in ascending order, and for each
 *      the largest tp <= GPUs per node that divides M (and the model's heads);
 *   2. the smallest M whose plan fits in memory; data parallelism takes the rest;
 *   3. the microbatch size (and the interleaving, the paper's schedule for pp > 1) by trying
 *      the few values the paper measures and keeping the fastest; selective recomputation
 *      (Korthikanti et al. 2022) when it fits, full recomputation otherwise; the distributed
 *      optimizer (ZeRO-1) and sequence parallelism, today's Megatron-LM defaults. No context
 *      or expert parallelism (the paper predates them).
 * Restrictions of the space are respected: a value it forbids is not tried. One unit. */
#include <math.h>
#include <stdlib.h>

#include "search_int.h"

static int mg_units(search__run *run, int *n, pp_err *err) {
  (void)run, (void)err;
  *n = 1;
  return PP_OK;
}

static double mg_space(search__run *run) {
  (void)run;
  return 0; /* set by the unit: the plans it tried */
}

static int allowed(unsigned bits, int v) { return (bits >> v) & 1; }
static int within(int v, int max) { return max == 0 || v <= max; }

/* The distributed optimizer when allowed, else the lowest allowed ZeRO stage that pp allows. */
static int pick_zero(const search_space *s, int pp) {
  if (allowed(s->zero, 1)) return 1;
  for (int z = 0; z < 4; z++)
    if (allowed(s->zero, z) && (z < 2 || pp == 1)) return z;
  return -1;
}

/* Tries the hand-tuned variants of (tp, pp); returns how many fitted. */
static int try_shape(search__unit *u, int tp, int pp, spec_recompute rc, pp_err *err, int *fits) {
  const search_space *s = &u->run->o->space;
  const spec_model *m = &u->run->m;
  int N = u->run->c.gpus, dp = N / (tp * pp);
  int zero = pick_zero(s, pp);
  *fits = 0;
  if (zero < 0 || !within(dp, s->max_dp)) return PP_OK;
  static const int mbs_tried[] = {1, 2, 4, 8};
  for (int a = 0; a < 4; a++) {
    int mbs = mbs_tried[a];
    for (int vpp = 1; vpp <= (pp > 1 ? m->layers / pp : 1); vpp++) {
      if (!within(mbs, s->max_mbs) || !within(vpp, s->max_vpp)) continue;
      spec_schedule sch = vpp > 1 ? SPEC_SCHED_INTERLEAVED : SPEC_SCHED_1F1B;
      if (!allowed(s->schedules, sch)) continue;
      int sp = tp > 1 && allowed(s->sp, 1) ? 1 : 0;
      if (!allowed(s->sp, sp)) continue;
      spec_plan p = {.tp = tp, .pp = pp, .dp = dp, .cp = 1, .ep = 1, .mbs = mbs, .gbs = s->gbs,
                     .vpp = vpp, .sp = sp, .recompute = rc, .zero = zero, .schedule = sch};
      pp_err ve = {0};
      if (spec_plan_validate(&p, m, &u->run->c, &ve)) continue;
      cm_result r;
      if (search__eval(u, &p, &r, err)) return err->code;
      *fits += r.feasible;
    }
  }
  return PP_OK;
}

/* The first model-parallel size M (ascending) whose plan fits with recomputation rc; 1 when
 * one fitted (the fastest of its variants is then the unit's best). */
static int first_fit(search__unit *u, spec_recompute rc, int *found, pp_err *err) {
  const search_space *s = &u->run->o->space;
  const spec_model *m = &u->run->m;
  int N = u->run->c.gpus, g = u->run->c.gpus_per_node;
  *found = 0;
  for (int M = 1; M <= N && !*found; M++) {
    if (N % M) continue;
    int tp = 0;
    for (int t = M < g ? M : g; t >= 1 && !tp; t--)
      if (M % t == 0 && within(t, s->max_tp) && m->heads % t == 0 && m->kv_heads % t == 0 &&
          m->ffn_hidden % t == 0)
        tp = t;
    int pp = tp ? M / tp : 0;
    if (!tp || pp > m->layers || !within(pp, s->max_pp)) continue;
    if (try_shape(u, tp, pp, rc, err, found)) return err->code;
  }
  return PP_OK;
}

static int mg_unit(search__unit *u, pp_err *err) {
  /* selective recomputation when some M fits with it, else full, else none */
  static const spec_recompute order[] = {SPEC_RECOMPUTE_SELECTIVE, SPEC_RECOMPUTE_FULL,
                                         SPEC_RECOMPUTE_NONE};
  for (int k = 0; k < 3; k++) {
    if (!allowed(u->run->o->space.recompute, order[k])) continue;
    int found = 0;
    if (first_fit(u, order[k], &found, err)) return err->code;
    if (found) return PP_OK;
  }
  return PP_OK;
}

const search__method search__megatron = {
    SEARCH_MEGATRON, "megatron", NULL, mg_units, mg_unit, NULL, mg_space,
};
