/* The search methods on the real cost model. Runs:
 * - the space: search_uspace_build on a 4-GPU cluster (2 nodes of 2) for a 4-layer model with
 *   gbs 4 and the space cut to tp, pp, dp <= 2, no cp, recompute none, ZeRO 0, 1F1B: the plans
 *   counted by hand (tp x pp x dp = 4 with each at most 2: (2,2,1) (2,1,2) (1,2,2), with their
 *   mbs and sp choices: 12 plans; see space_by_hand), and a space option error (an unknown
 *   list word) names the option;
 * - known optimum: on that space only one plan fits a GPU whose memory is cut so that
 *   anything but the fully sharded model (tp=2, pp=2) overflows; exhaustive and global return
 *   it; with an even smaller GPU nothing fits and the result says why;
 * - GPipe only: with schedules gpipe global returns only uniform GPipe plans (its 1F1B-only
 *   non-uniform part left out) and exhaustive's best;
 * - determinism: exhaustive on GPT-3 13B / 64 GPUs of dgx-h100 with 1 and 2 threads gives the
 *   same best plan and the same evaluation and pruning counts;
 * - megatron: on GPT-3 175B / 1024 GPUs of dgx-h100 (gbs 1536) it uses tp = 8 (a node) and
 *   the smallest pp that fits; its plan is never faster than exhaustive's;
 * - global against brute force, 12 random tiny instances (3-5 layers, 2-8 GPUs, 1-4 GPUs per
 *   node, random HBM, NVLink and NIC bandwidths, gbs 2-8): a brute-force enumeration of the
 *   global space (every 1F1B pipeline of consecutive layers on consecutive blocks of the
 *   allowed sizes, every stage configuration, microbatch count, sp, ZeRO 0/1, each scored by
 *   cm_eval) and the uniform space: global's lower bound is <= the brute-force optimum, its
 *   best is no worse than exhaustive's, and within its reported gap of the brute force;
 *   two-level and megatron (when they return a plan) are never better than global's best;
 * - the torus period global relies on: on tpu-v4-torus at 4096 chips (16 x 16 x 16), blocks of
 *   4, 64, 256 and 1024 chips at offsets 0, 4, 60 and 128 are priced (stage time, TP/CP
 *   communication, memory; tp 1, 4, 16, cp 1 and 2) exactly as the same block one plane (256
 *   ids) further on, and a 64-chip block with TP 8 starting mid-row (offset 12) is priced
 *   unlike the one at 0 (so the check compares placements that can differ);
 * - the time limit on a large torus: global on GPT-3 39B / 4096 TPU v4 chips (gbs 1536) with a
 *   2 s limit returns, not complete, with a best plan and a lower bound in (0, best]. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "podplan/search.h"

static unsigned rs = 2024;
static int rnd(int n) {
  rs = rs * 1103515245u + 12345u;
  return (int)((rs >> 16) % (unsigned)n);
}

static void tiny(int layers, int gpus, int gpn, double hbm, spec_model *m, spec_cluster *c) {
  pp_err err = {0};
  CHECK(spec_model_load("gpt3-1.3b", m, &err) == PP_OK);
  m->layers = layers, m->hidden = 512, m->heads = 8, m->kv_heads = 8, m->ffn_hidden = 2048;
  m->seq_len = 512, m->vocab = 4096;
  snprintf(m->name, sizeof m->name, "tiny");
  CHECK(spec_model_validate(m, &err) == PP_OK);
  CHECK(spec_cluster_load("dgx-h100", 0, c, &err) == PP_OK);
  c->gpus = gpus, c->gpus_per_node = gpn, c->nvlink.domain_gpus = gpn;
  c->network.nics_per_node = 1;
  c->gpu.hbm_gib = hbm;
  if (spec_cluster_validate(c, &err)) fprintf(stderr, "tiny cluster: %s\n", err.msg);
  CHECK(err.code == PP_OK);
}

/* The 4-layer tiny model on 4 GPUs (2 nodes of 2) and the default space for gbs 4. */
static void tiny_space(spec_model *m, spec_cluster *c, search_space *s) {
  tiny(4, 4, 2, 80, m, c);
  search_space_default(4, s);
}

static int run(cm_model *cm, search_method me, int gbs, const search_space *sp, int threads,
               double gap, search_result *r) {
  search_opts o;
  search_opts_default(me, gbs, &o);
  if (sp) o.space = *sp;
  o.threads = threads, o.gap = gap, o.top = 5;
  pp_err err = {0};
  int rc = search_run(cm, &o, r, &err);
  if (rc && rc != PP_NOTIMPL) fprintf(stderr, "%s: %s\n", search_method_name(me), err.msg);
  return rc;
}

/* tp, pp, dp <= 2 with tp*pp*dp = 4 on 4 GPUs: (2,2,1) (2,1,2) (1,2,2); gbs 4: mbs divides
 * gbs/dp: dp=1 -> 1,2,4; dp=2 -> 1,2. sp on/off where tp=2 (both: tp=2 in the first two).
 * (2,2,1): 3 mbs x 2 sp = 6; (2,1,2): 2 x 2 = 4; (1,2,2): 2 x 1 = 2. Total 12. */
static void space_by_hand(void) {
  spec_model m;
  spec_cluster c;
  search_space s;
  tiny_space(&m, &c, &s);
  pp_err err = {0};
  CHECK(search_space_set(&s, "max-tp", "2", &err) == PP_OK);
  CHECK(search_space_set(&s, "max-pp", "2", &err) == PP_OK);
  CHECK(search_space_set(&s, "max-dp", "2", &err) == PP_OK);
  CHECK(search_space_set(&s, "no-cp", NULL, &err) == PP_OK);
  CHECK(search_space_set(&s, "recompute", "none", &err) == PP_OK);
  CHECK(search_space_set(&s, "zero", "0", &err) == PP_OK);
  CHECK(search_space_set(&s, "schedules", "1f1b", &err) == PP_OK);
  search_uspace *u = NULL;
  CHECK(search_uspace_build(&s, &m, &c, &u, &err) == PP_OK);
  CHECK_EQ((long)search_uspace_size(u), 12L);
  search_uspace_free(u);
  CHECK(search_space_set(&s, "recompute", "none,some", &err) == PP_USAGE);
  CHECK(strstr(err.msg, "--recompute") && strstr(err.msg, "'some'"));
  char d[256];
  search_space_describe(&s, d, sizeof d);
  CHECK(strstr(d, "max-tp=2") && strstr(d, "recompute=none"));
}

/* The GPU memory between the fully sharded plan's need and the next smallest. */
static void known_optimum(void) {
  spec_model m;
  spec_cluster c;
  tiny(4, 4, 2, 80, &m, &c);
  m.hidden = 4096, m.heads = 32, m.kv_heads = 32, m.ffn_hidden = 16384, m.vocab = 32000;
  search_space s;
  search_space_default(4, &s);
  pp_err err = {0};
  search_space_set(&s, "max-tp", "2", &err), search_space_set(&s, "max-pp", "2", &err);
  search_space_set(&s, "no-cp", NULL, &err), search_space_set(&s, "recompute", "none", &err);
  search_space_set(&s, "zero", "0", &err), search_space_set(&s, "schedules", "1f1b", &err);
  search_space_set(&s, "max-mbs", "1", &err);
  /* memory of every plan of the space at full HBM, to find the threshold */
  search_uspace *u = NULL;
  CHECK(search_uspace_build(&s, &m, &c, &u, &err) == PP_OK);
  cm_model *cm = NULL;
  CHECK(cm_model_create(&m, &c, NULL, &cm, &err) == PP_OK);
  double least = INFINITY, second = INFINITY;
  spec_plan best = {0};
  for (size_t i = 0; i < search_uspace_size(u); i++) {
    spec_plan p;
    cm_result r;
    search_uspace_plan(u, i, &p);
    CHECK(cm_eval(cm, &p, &r, &err) == PP_OK);
    if (r.mem_gib_per_gpu < least) second = least, least = r.mem_gib_per_gpu, best = p;
    else if (r.mem_gib_per_gpu < second) second = r.mem_gib_per_gpu;
  }
  cm_model_destroy(cm);
  search_uspace_free(u);
  CHECK(best.tp == 2 && best.pp == 2);
  CHECK(second > least);
  c.gpu.hbm_gib = 0.5 * (least + second);
  CHECK(cm_model_create(&m, &c, NULL, &cm, &err) == PP_OK);
  search_result r;
  for (int me = SEARCH_EXHAUSTIVE; me <= SEARCH_GLOBAL; me += SEARCH_GLOBAL) {
    CHECK(run(cm, (search_method)me, 4, &s, 1, 0, &r) == PP_OK);
    CHECK(r.ntop >= 1);
    if (r.ntop) CHECK(r.top[0].plan.nstages == 0 && r.top[0].plan.tp == 2 && r.top[0].plan.pp == 2);
    search_result_clear(&r);
  }
  cm_model_destroy(cm);
  c.gpu.hbm_gib = 0.5 * least;
  CHECK(cm_model_create(&m, &c, NULL, &cm, &err) == PP_OK);
  CHECK(run(cm, SEARCH_EXHAUSTIVE, 4, &s, 1, 0, &r) == PP_OK);
  CHECK_EQ(r.ntop, 0);
  CHECK(strstr(r.why, "GiB over") != NULL);
  search_result_clear(&r);
  cm_model_destroy(cm);
}

/* A space of GPipe plans only (schedules gpipe) on 4 GPUs (2 nodes of 2) for a 4-layer
 * model: global's plans are all uniform GPipe ones (its non-uniform part, 1F1B only, is left
 * out; it used to offer 1F1B plans the space excludes) and its best is exhaustive's. */
static void gpipe_only(void) {
  spec_model m;
  spec_cluster c;
  search_space s;
  tiny_space(&m, &c, &s);
  pp_err err = {0};
  CHECK(search_space_set(&s, "schedules", "gpipe", &err) == PP_OK);
  cm_model *cm = NULL;
  CHECK(cm_model_create(&m, &c, NULL, &cm, &err) == PP_OK);
  search_result g, x;
  CHECK(run(cm, SEARCH_GLOBAL, 8, &s, 1, 0, &g) == PP_OK);
  CHECK(run(cm, SEARCH_EXHAUSTIVE, 8, &s, 1, 0, &x) == PP_OK);
  CHECK(g.ntop >= 1 && x.ntop >= 1);
  for (int i = 0; i < g.ntop; i++) {
    const spec_plan *p = &g.top[i].plan;
    if (p->nstages || p->schedule != SPEC_SCHED_GPIPE)
      fprintf(stderr, "gpipe only: global's plan %d is %s\n", i,
              p->nstages ? "non-uniform" : spec_schedule_name(p->schedule));
    CHECK(p->nstages == 0 && p->schedule == SPEC_SCHED_GPIPE);
  }
  if (g.ntop && x.ntop) CHECK_NEAR(g.top[0].cm.iter_time_s, x.top[0].cm.iter_time_s, 1e-12);
  search_result_clear(&g), search_result_clear(&x);
  cm_model_destroy(cm);
}

/* The cost model of a preset model on a preset cluster of `gpus` GPUs. */
static cm_model *preset_cm(const char *model, const char *cluster, int gpus) {
  spec_model m;
  spec_cluster c;
  pp_err err = {0};
  cm_model *cm = NULL;
  CHECK(spec_model_load(model, &m, &err) == PP_OK);
  CHECK(spec_cluster_load(cluster, gpus, &c, &err) == PP_OK);
  CHECK(cm_model_create(&m, &c, NULL, &cm, &err) == PP_OK);
  return cm;
}

static void determinism(void) {
  cm_model *cm = preset_cm("gpt3-13b", "dgx-h100", 64);
  search_result a, b;
  CHECK(run(cm, SEARCH_EXHAUSTIVE, 512, NULL, 1, 0, &a) == PP_OK);
  CHECK(run(cm, SEARCH_EXHAUSTIVE, 512, NULL, 2, 0, &b) == PP_OK);
  CHECK(a.ntop > 0 && b.ntop > 0);
  CHECK_EQ(a.evaluations, b.evaluations);
  CHECK_EQ(a.pruned, b.pruned);
  CHECK(a.evaluations + a.pruned == (long long)a.space_size);
  char ha[SPEC_HASH_LEN], hb[SPEC_HASH_LEN];
  spec_plan_hash(&a.top[0].plan, ha);
  spec_plan_hash(&b.top[0].plan, hb);
  CHECK(!strcmp(ha, hb));
  search_result_clear(&a);
  search_result_clear(&b);
  cm_model_destroy(cm);
}

static void megatron(void) {
  cm_model *cm = preset_cm("gpt3-175b", "dgx-h100", 1024);
  search_result r, x;
  CHECK(run(cm, SEARCH_MEGATRON, 1536, NULL, 1, 0, &r) == PP_OK);
  CHECK(r.ntop > 0);
  if (r.ntop) {
    const spec_plan *p = &r.top[0].plan;
    CHECK_EQ(p->tp, 8);
    CHECK(p->pp >= 2 && p->cp == 1 && p->zero == 1 && p->sp == 1);
    /* the smallest pp that fits: one pipeline stage less does not fit with tp 8 */
    spec_plan q = *p;
    q.pp = p->pp / 2, q.dp = 1024 / (8 * q.pp), q.vpp = 1, q.schedule = SPEC_SCHED_1F1B;
    q.mbs = 1, q.recompute = SPEC_RECOMPUTE_FULL;
    cm_result rq;
    pp_err err = {0};
    if (!spec_plan_validate(&q, cm_model_spec(cm), cm_model_cluster(cm), &err)) {
      CHECK(cm_eval(cm, &q, &rq, &err) == PP_OK);
      CHECK(!rq.feasible);
    }
  }
  CHECK(run(cm, SEARCH_EXHAUSTIVE, 1536, NULL, 2, 0, &x) == PP_OK);
  CHECK(x.ntop > 0 && r.ntop > 0 && x.best_s <= r.best_s);
  search_result_clear(&r);
  search_result_clear(&x);
  cm_model_destroy(cm);
}

/* ---- brute force of the global space on tiny instances --------------------------------- */

typedef struct bf {
  cm_model *cm;
  const spec_model *m;
  const spec_cluster *c;
  int gbs, mb, sp, zero, samples;
  search_stage st[16];
  double best;
  long plans;
} bf;

static int sizes_of(const spec_cluster *c, int *out) {
  int n = 0, gpn = c->gpus_per_node;
  for (int g = 1; g < gpn; g *= 2)
    if (gpn % g == 0) out[n++] = g;
  for (int k = 1; k * gpn <= c->gpus; k++) out[n++] = k * gpn;
  return n;
}

static void score(bf *b, int n) {
  spec_plan p;
  pp_err err = {0};
  if (search_plan_build(b->st, n, b->gbs, b->mb, b->sp, b->zero, b->m, b->c, &p, &err)) return;
  cm_result r;
  CHECK(cm_eval(b->cm, &p, &r, &err) == PP_OK);
  b->plans++;
  if (r.feasible && r.iter_time_s < b->best) b->best = r.iter_time_s;
  spec_plan_clear(&p);
}

/* Stages from layer k on GPU d onwards; n stages so far. */
static void enumerate(bf *b, int k, int d, int n) {
  if (k == b->m->layers) {
    score(b, n);
    return;
  }
  int sizes[64], ns = sizes_of(b->c, sizes), gpn = b->c->gpus_per_node;
  for (int z = 0; z < ns; z++) {
    int S = sizes[z];
    if (d + S > b->c->gpus || (S < gpn ? d % gpn + S > gpn : d % gpn != 0)) continue;
    for (int tp = 1; tp <= S; tp++)
      for (int cp = 1; cp <= S / tp; cp++) {
        if (S % tp || (S / tp) % cp) continue;
        int dp = S / tp / cp;
        if (b->samples % dp) continue;
        for (int rc = 0; rc < 3; rc++)
          for (int c = 1; k + c <= b->m->layers; c++) {
            b->st[n] = (search_stage){c, d, S, tp, cp, dp, 1, (spec_recompute)rc};
            enumerate(b, k + c, d + S, n + 1);
          }
      }
  }
}

static void brute_force(void) {
  for (int inst = 0; inst < 12; inst++) {
    int gpn = 1 << rnd(3), nodes = 1 + rnd(gpn == 4 ? 2 : 4);
    if (gpn * nodes < 2) nodes = 2;
    int layers = 3 + rnd(3), gbs = 2 << rnd(3);
    spec_model m;
    spec_cluster c;
    tiny(layers, gpn * nodes, gpn, 80, &m, &c);
    m.hidden = 1024 << rnd(3), m.heads = 16, m.kv_heads = 16, m.ffn_hidden = 4 * m.hidden;
    m.seq_len = 1024;
    c.nvlink.gbps_per_gpu = 50 + rnd(400);
    c.network.nic_gbps = 25 + rnd(400);
    /* memory from roomy to tight */
    c.gpu.hbm_gib = 4 + rnd(40);
    pp_err err = {0};
    cm_model *cm = NULL;
    if (spec_cluster_validate(&c, &err) || cm_model_create(&m, &c, NULL, &cm, &err)) {
      fprintf(stderr, "instance %d: %s\n", inst, err.msg);
      CHECK(0);
      continue;
    }
    bf b = {.cm = cm, .m = &m, .c = &c, .gbs = gbs, .best = INFINITY};
    for (b.mb = 1; b.mb <= gbs; b.mb++) {
      if (gbs % b.mb) continue;
      b.samples = gbs / b.mb;
      for (b.sp = 0; b.sp < 2; b.sp++)
        for (b.zero = 0; b.zero < 2; b.zero++) enumerate(&b, 0, 0, 0);
    }
    search_result g, x, t, mg;
    CHECK(run(cm, SEARCH_GLOBAL, gbs, NULL, 2, 0, &g) == PP_OK);
    CHECK(run(cm, SEARCH_EXHAUSTIVE, gbs, NULL, 2, 0, &x) == PP_OK);
    double bfbest = b.best < x.best_s || !x.ntop ? b.best : x.best_s;
    printf("instance %d: %d layers, %d GPUs (%d/node), gbs %d, hbm %.0f GiB: brute force %ld "
           "plans, best %.6g s; exhaustive %.6g s; global %.6g s, bound %.6g s, gap %.3f%%\n",
           inst, layers, c.gpus, gpn, gbs, c.gpu.hbm_gib, b.plans, b.best, x.best_s, g.best_s,
           g.lower_bound_s, 100 * g.gap);
    if (bfbest < INFINITY) {
      CHECK(g.ntop > 0);
      CHECK(g.lower_bound_s <= bfbest * (1 + 1e-9));
      CHECK(g.best_s <= bfbest * (1 + g.gap) * (1 + 1e-9));
      if (x.ntop) CHECK(g.best_s <= x.best_s * 1.001);
    } else {
      CHECK_EQ(g.ntop, 0);
    }
    if (run(cm, SEARCH_TWO_LEVEL, gbs, NULL, 2, 0, &t) == PP_OK) {
      if (t.ntop && g.ntop) CHECK(t.best_s >= g.best_s * (1 - 1e-9));
      search_result_clear(&t);
    }
    if (run(cm, SEARCH_MEGATRON, gbs, NULL, 1, 0, &mg) == PP_OK) {
      if (mg.ntop && g.ntop) CHECK(mg.best_s >= g.best_s * (1 - 1e-9));
      search_result_clear(&mg);
    }
    search_result_clear(&g);
    search_result_clear(&x);
    cm_model_destroy(cm);
  }
}

static void stage_price(cm_model *cm, const cm_stage_cfg *g, int d, int S, double out[5]) {
  pp_err err = {0};
  int *gpus = malloc((size_t)S * sizeof *gpus);
  CHECK(gpus != NULL);
  for (int i = 0; i < S; i++) gpus[i] = d + i;
  cm_stage_coef co;
  CHECK(cm_stage_coef_get(cm, g, gpus, S, &co, &err) == PP_OK);
  cm_memory mem;
  cm_stage_memory(cm, &co, 4, 0, 0, 1, 1, &mem);
  out[0] = cm_stage_time(cm, &co, 4, 0, 0, 1);
  out[1] = co.tp_s, out[2] = co.cp_s, out[3] = co.comp_s, out[4] = mem.total_gib;
  free(gpus);
}

static void torus_period(void) {
  cm_model *cm = preset_cm("gpt3-39b", "tpu-v4-torus", 4096);
  const spec_cluster *c = cm_model_cluster(cm);
  CHECK(c->network.dims[0] * c->network.dims[1] == 256);
  static const int sizes[] = {4, 64, 256, 1024}, offs[] = {0, 4, 60, 128}, tps[] = {1, 4, 16};
  int compared = 0, differs = 0;
  for (int a = 0; a < 4; a++)
    for (int b = 0; b < 4; b++)
      for (int t = 0; t < 3; t++)
        for (int cp = 1; cp <= 2; cp++) {
          int S = sizes[a], d = offs[b], tp = tps[t];
          if (tp * cp > S) continue;
          cm_stage_cfg g = {tp, cp, S / tp / cp, 1, 1, 0, SPEC_RECOMPUTE_NONE};
          double x[5], y[5];
          stage_price(cm, &g, d, S, x);
          stage_price(cm, &g, d + 256, S, y);
          for (int i = 0; i < 5; i++) CHECK_DEQ(x[i], y[i]);
          compared++;
        }
  /* TP 8 from chip 12: x 12..15 of one row and 0..3 of the next, two torus dims (from chip 0:
   * one, without its wrap-around) */
  cm_stage_cfg g = {8, 1, 8, 1, 1, 0, SPEC_RECOMPUTE_NONE};
  double x[5], y[5];
  stage_price(cm, &g, 0, 64, x);
  stage_price(cm, &g, 12, 64, y);
  for (int i = 0; i < 5; i++) differs += x[i] != y[i];
  CHECK(compared > 30);
  CHECK(differs > 0);
  cm_model_destroy(cm);
}

static void time_limit_torus(void) {
  cm_model *cm = preset_cm("gpt3-39b", "tpu-v4-torus", 4096);
  pp_err err = {0};
  search_opts o;
  search_opts_default(SEARCH_GLOBAL, 1536, &o);
  o.threads = 2, o.top = 3, o.time_limit_s = 2;
  search_result r;
  CHECK(search_run(cm, &o, &r, &err) == PP_OK);
  CHECK(!r.complete);
  CHECK(r.ntop > 0);
  CHECK(r.lower_bound_s > 0 && r.lower_bound_s <= r.best_s);
  search_result_clear(&r);
  cm_model_destroy(cm);
}

int main(void) {
  space_by_hand();
  known_optimum();
  gpipe_only();
  determinism();
  megatron();
  brute_force();
  torus_period();
  time_limit_torus();
  return check_status();
}
