/* The lowering of plans to per-GPU programs, on real SimGrid runs:
 *   - the 21 plans of benchmarks/sim_plans.h (every cluster preset, uniform and non-uniform,
 *     TP/SP/CP/EP/PP/ZeRO) simulate to the cost model's time within 3%, except the three that
 *     say why not (the table is printed; `bench_sim --table` prints it too);
 *   - the fast fidelity's aggregate (the ring-form collectives of a chunk as one flow per group)
 *     agrees within 0.5% with every collective of every layer simulated by itself, on plans
 *     with TP, SP, CP, EP, ZeRO-1, interleaving, a multi-node NVLink domain, a torus and
 *     non-uniform stages;
 *   - ZeRO-3: the lowered programs gather twice and reduce-scatter once per microbatch exactly
 *     the rank's parameters, as the cost model charges (bf16 gathers, gradients at
 *     grad_comm_bytes), and simulate to its time within 3% when uncontended. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../benchmarks/sim_plans.h"
#include "../sim/sim_int.h"
#include "check.h"
#include "podplan/sim.h"

typedef struct loaded {
  spec_model m;
  spec_cluster c;
  spec_plan p;
  cm_model *cm;
} loaded;

static int load(const sim_plan_case *k, loaded *x) {
  pp_err err = {0};
  cm_params prm;
  cm_params_default(NULL, &prm);
  memset(x, 0, sizeof *x);
  int rc = spec_model_load(k->model, &x->m, &err) ||
           spec_cluster_load(k->cluster, k->gpus, &x->c, &err) ||
           (k->params && cm_params_apply(&prm, k->params, &err)) ||
           spec_plan_parse(k->plan, &x->p, &err) || spec_plan_resolve(&x->p, &x->m, &x->c, &err) ||
           cm_model_create(&x->m, &x->c, &prm, &x->cm, &err);
  if (rc) fprintf(stderr, "%s %s: %s\n", k->model, k->plan, err.msg);
  return rc;
}

static void unload(loaded *x) {
  cm_model_destroy(x->cm);
  spec_plan_clear(&x->p);
}

static double simulate(loaded *x, int per_layer, sim_result *r) {
  pp_err err = {0};
  sim_opts o = {.fidelity = SIM_FAST, .per_layer = per_layer};
  int rc = sim_run(x->cm, &x->p, &o, r, &err);
  if (rc) fprintf(stderr, "sim: %s\n", err.msg);
  CHECK_EQ(rc, PP_OK);
  return rc ? -1 : r->iter_time_s;
}

static void table(void) {
  for (int i = 0; i < SIM_PLAN_NCASES; i++) {
    const sim_plan_case *k = &sim_plan_cases[i];
    loaded x;
    if (load(k, &x)) {
      CHECK(0);
      continue;
    }
    cm_result pr;
    pp_err err = {0};
    CHECK_EQ(cm_eval(x.cm, &x.p, &pr, &err), PP_OK);
    sim_result r;
    double s = simulate(&x, 0, &r);
    double dev = s / pr.iter_time_s - 1;
    printf("%2d %-12s %-12s %4d %+6.2f%%", i + 1, k->model, k->cluster, k->gpus, 100 * dev);
    for (int l = 0; l < CM_NLEVELS; l++)
      if (r.levels_present & (1 << l))
        printf(" %s %.0f/%.0f%%", cm_level_name((cm_level)l), 100 * r.util_mean[l],
               100 * r.util_max[l]);
    printf("%s%s\n", k->why ? " -- not held: " : "", k->why ? k->why : "");
    if (!k->why) CHECK_NEAR(s, pr.iter_time_s, 0.03);
    CHECK(r.messages > 0);
    sim_result_clear(&r);
    unload(&x);
  }
}

/* The aggregate runs OP_BATCH flows, per_layer runs each collective (sim__coll_exec). */
static void aggregate_vs_per_layer(void) {
  const int pick[] = {1, 3, 5, 10, 16, 18};
  for (size_t i = 0; i < sizeof pick / sizeof pick[0]; i++) {
    loaded x;
    if (load(&sim_plan_cases[pick[i]], &x)) {
      CHECK(0);
      continue;
    }
    sim_result a, b;
    double ta = simulate(&x, 0, &a), tb = simulate(&x, 1, &b);
    printf("aggregate vs per-layer, case %d: %.5f s (%ld msgs) vs %.5f s (%ld msgs)\n",
           pick[i] + 1, ta, a.messages, tb, b.messages);
    CHECK_NEAR(ta, tb, 0.005);
    CHECK(b.messages > a.messages); /* the two forms did run different programs */
    sim_result_clear(&a), sim_result_clear(&b);
    unload(&x);
  }
}

/* Bytes of collectives of kind c recorded as DP that a GPU's program runs, walking its
 * calls and the ranges it hands to helpers. */
static double walk(const sim__prog *pg, int from, int to, cm_coll c) {
  double sum = 0;
  for (int i = from; i < to; i++) {
    const sim__op *o = &pg->ops[i];
    if (o->kind == SIM__OP_COLL && o->ev == SIM_EV_DP && o->coll == c) sum += o->bytes;
    if (o->kind == SIM__OP_CALL) sum += o->count * walk(pg, o->a, o->b, c);
    if (o->kind == SIM__OP_ASYNC) {
      sum += walk(pg, o->a, o->b, c);
      if (o->a == i + 1) i = o->b - 1;
    }
  }
  return sum;
}

static void zero3(void) {
  const sim_plan_case *k = &sim_plan_cases[7];
  CHECK_CONTAINS(k->plan, "zero=3");
  loaded x;
  if (load(k, &x)) {
    CHECK(0);
    return;
  }
  /* the cost model's bytes: 2 gathers and 1 reduce-scatter of every part per microbatch */
  const spec_plan *p = &x.p;
  cm_layer_profile pr;
  CHECK_EQ(cm_layer_profile_get(x.cm, p->tp, p->cp, p->ep, p->dp, p->mbs, p->sp, p->recompute,
                                &pr), PP_OK);
  /* the rank's parameters (the head's are the embedding's when tied), bf16 gathers */
  double params = x.m.layers * pr.layer_params + pr.embed_params +
                  (x.m.tied_embeddings ? 0 : pr.head_params);
  double ag = 2 * params * 2, rs = params * cm_model_params(x.cm)->grad_comm_bytes;
  cm_lop z[2];
  CHECK_EQ(cm_zero3_ops(x.cm, &pr, CM_PART_LAYER, 0, z), 2);
  CHECK_EQ(cm_zero3_ops(x.cm, &pr, CM_PART_HEAD, 1, z), x.m.tied_embeddings ? 0 : 1);
  int mb = p->gbs / (p->mbs * p->dp);
  /* the programs, lowered as sim_run lowers them */
  sim__world w;
  memset(&w, 0, sizeof w);
  w.cm = x.cm;
  sim__topo_init(&w.topo, cm_model_cluster(x.cm), x.cm);
  w.ngpu = x.c.gpus;
  w.prog = calloc((size_t)w.ngpu, sizeof *w.prog);
  pp_err err = {0};
  CHECK_EQ(sim__lower(&w, &x.m, p, &err), PP_OK);
  for (int g = 0; g < w.ngpu; g++) {
    const sim__prog *pg = &w.prog[g];
    CHECK_NEAR(walk(pg, pg->main_at, pg->n, CM_ALL_GATHER), mb * ag, 1e-9);
    CHECK_NEAR(walk(pg, pg->main_at, pg->n, CM_REDUCE_SCATTER), mb * rs, 1e-9);
  }
  sim__world_free(&w);
  /* and the time, uncontended */
  cm_result cr;
  CHECK_EQ(cm_eval(x.cm, p, &cr, &err), PP_OK);
  sim_result r;
  double s = simulate(&x, 0, &r);
  printf("zero=3 %s: sim %.4f s, cost model %.4f s\n", k->plan, s, cr.iter_time_s);
  CHECK_NEAR(s, cr.iter_time_s, 0.03);
  CHECK(r.t.dp_comm_s >= 0);
  sim_result_clear(&r);
  unload(&x);
}

int main(void) {
  table();
  aggregate_vs_per_layer();
  zero3();
  return check_status();
}
