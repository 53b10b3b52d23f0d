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
 *   cm_eval) and the uniform space: asked for gap 0, global is certified and its best is the
 *   brute-force optimum (its bound at most that), no worse than exhaustive's (so too with the
 *   slowest pipeline boundary bounded per stage only, SEARCH_P2P_SHARED); two-level and
 *   megatron (when they return a plan) are never better than global's best;
 * - global against brute force on 11 instances with several stage-count classes (8-12 layers;
 *   2-4 nodes of 2 or 4 GPUs, so blocks inside a node and of whole nodes, NVLink domains of 1,
 *   2 and 4 nodes; 9 and 10 nodes of one GPU) on a restricted space (tp <= 2, no cp,
 *   recompute none/full, ZeRO 0/1, 1F1B, at most 4 stages): at gap 0 and at 1% global is
 *   certified, and at gap 0 with either way of bounding the slowest pipeline boundary alone
 *   (SEARCH_P2P_FIRST, _SHARED) it proves the same optimum; a brute force of the non-uniform
 *   part (every pipeline of consecutive blocks, pruned where sum t_i + (m - 1) max t_i of its
 *   stages so far already reaches global's best, a claim checked against cm_eval at every
 *   plan it scores) finds no plan below global's gap-0 best, and finds that plan when it is
 *   one of that part; the 1% run's bound is at most the optimum and its best within 1% of
 *   its bound;
 * - the two-level space's rule (search_island_stage_ok, islands of 8): blocks inside one island
 *   or on aligned, consecutive whole islands, TP/CP/EP groups inside one, and the contiguous
 *   form global uses (search_island_block_ok) agrees on every block; islands of a node and
 *   of an NVLink domain on h100-nvl256; --hierarchy's option error names the option and value;
 *   three of the brute-force instances above run with --hierarchy node or domain (the brute
 *   force then walks only stages the rule accepts); and on GPT-3 6.7B / 40 GPUs of
 *   h100-nvl256 global with --hierarchy node is certified, returns only plans of that space
 *   and none below the unrestricted run's bound, while --hierarchy domain (the 40 GPUs are one
 *   island) is bad usage naming the option;
 * - neighbours: on four pipelined cases (GPT-3 2.6B / 24 GPUs of dgx-h100 at 8 GiB, 13B / 24
 *   of dgx-a100 at 24 GiB, 6.7B / 40 of h100-nvl256 at 16 GiB, and 39B / 64 V100s of
 *   p3.16xlarge, gbs 1536, bounded with the slowest boundary shared over the stages only;
 *   ZeRO 0/1, 1F1B) global at 1% is certified, its bound at most its best and at most the
 *   best of a run with the other way of bounding the slowest boundary (and that run's bound
 *   at most its best), and no plan one step from a pipeline of its top 5 (a stage boundary
 *   moved by a layer, one stage's block split differently into tp x cp x dp, one stage's
 *   recomputation changed) scores below its bound;
 * - the torus period global relies on: on tpu-v4-torus at 4096 chips (16 x 16 x 16), blocks of
 *   4, 64, 256 and 1024 chips at offsets 0, 4, 60 and 128 are priced (stage time, TP/CP
 *   communication, memory; tp 1, 4, 16, cp 1 and 2) exactly as the same block one plane (256
 *   ids) further on, and a 64-chip block with TP 8 starting mid-row (offset 12) is priced
 *   unlike the one at 0 (so the check compares placements that can differ);
 * - membership (search_space_plan_ok): on the tiny model on 8 GPUs, for 13 restrictions a
 *   uniform plan lies in the restricted space exactly when that space's enumeration lists it;
 *   in the same-recompute runs every plan returned lies in its space, and global's best,
 *   faster than one recomputation's optimum, lies outside it;
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

static int run_way(cm_model *cm, search_method me, int gbs, const search_space *sp,
                   int threads, double gap, int p2p_way, search_result *r) {
  search_opts o;
  search_opts_default(me, gbs, &o);
  if (sp) o.space = *sp;
  o.threads = threads, o.gap = gap, o.top = 5, o.p2p_way = p2p_way;
  pp_err err = {0};
  int rc = search_run(cm, &o, r, &err);
  if (rc && rc != PP_NOTIMPL) fprintf(stderr, "%s: %s\n", search_method_name(me), err.msg);
  return rc;
}

static int run(cm_model *cm, search_method me, int gbs, const search_space *sp, int threads,
               double gap, search_result *r) {
  return run_way(cm, me, gbs, sp, threads, gap, SEARCH_P2P_AUTO, r);
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
  CHECK(search_space_set(&s, "hierarchy", "rack", &err) == PP_USAGE);
  CHECK(strstr(err.msg, "--hierarchy") && strstr(err.msg, "'rack'"));
  CHECK(search_space_set(&s, "hierarchy", "domain", &err) == PP_OK);
  search_space_describe(&s, d, sizeof d);
  CHECK(strstr(d, "hierarchy=domain") != NULL);
}

/* The two-level space's rule on islands of 8 GPUs: 2^k GPUs of one island, or consecutive
 * whole islands with TP (and tp x cp, tp x ep) groups inside one island. */
static void island_rule(void) {
  int ids[64];
  for (int i = 0; i < 64; i++) ids[i] = i;
  CHECK(search_island_stage_ok(0, ids + 3, 5, 1, 1, 1));      /* no hierarchy */
  CHECK(search_island_stage_ok(8, ids + 4, 4, 4, 1, 1));      /* half an island */
  CHECK(!search_island_stage_ok(8, ids + 6, 4, 1, 1, 1));     /* straddles two */
  CHECK(!search_island_stage_ok(8, ids, 6, 1, 1, 1));         /* not 2^k */
  CHECK(search_island_stage_ok(8, ids + 8, 24, 8, 1, 1));     /* three whole islands */
  CHECK(!search_island_stage_ok(8, ids + 4, 16, 1, 1, 1));    /* not island-aligned */
  CHECK(!search_island_stage_ok(8, ids, 16, 16, 1, 1));       /* TP across islands */
  CHECK(!search_island_stage_ok(8, ids, 16, 4, 4, 1));        /* tp x cp = 16 */
  CHECK(!search_island_stage_ok(8, ids, 16, 2, 1, 8));        /* tp x ep = 16 */
  CHECK(search_island_stage_ok(8, ids, 16, 2, 2, 2));
  /* the contiguous-block form global uses is the same rule */
  for (int d = 0; d < 32; d++)
    for (int S = 1; d + S <= 64; S++)
      CHECK_EQ(search_island_block_ok(8, d, S), search_island_stage_ok(8, ids + d, S, 1, 1, 1));
  int gaps[16]; /* islands 0 and 2: whole, but not consecutive */
  for (int i = 0; i < 16; i++) gaps[i] = i < 8 ? i : i + 8;
  CHECK(!search_island_stage_ok(8, gaps, 16, 1, 1, 1));
  spec_cluster c;
  pp_err err = {0};
  CHECK(spec_cluster_load("h100-nvl256", 512, &c, &err) == PP_OK);
  search_space s;
  search_space_default(512, &s);
  s.hierarchy = SEARCH_HIER_NODE;
  CHECK_EQ(search_island_gpus(&s, &c), 8);
  s.hierarchy = SEARCH_HIER_DOMAIN;
  CHECK_EQ(search_island_gpus(&s, &c), 256);
  /* uniform: tp 16 over two nodes is inside a 256-GPU domain, not inside a node */
  spec_plan u = {.tp = 16, .pp = 2, .dp = 16, .cp = 1, .ep = 1};
  CHECK(search_island_plan_ok(&s, &c, &u));
  s.hierarchy = SEARCH_HIER_NODE;
  CHECK(!search_island_plan_ok(&s, &c, &u));
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
    search_result g, gs, x, t, mg;
    CHECK(run(cm, SEARCH_GLOBAL, gbs, NULL, 2, 0, &g) == PP_OK);
    CHECK(run_way(cm, SEARCH_GLOBAL, gbs, NULL, 2, 0, SEARCH_P2P_SHARED, &gs) == PP_OK);
    CHECK(run(cm, SEARCH_EXHAUSTIVE, gbs, NULL, 2, 0, &x) == PP_OK);
    double bfbest = b.best < x.best_s || !x.ntop ? b.best : x.best_s;
    printf("instance %d: %d layers, %d GPUs (%d/node), gbs %d, hbm %.0f GiB: brute force %ld "
           "plans, best %.6g s; exhaustive %.6g s; global %.6g s, bound %.6g s, gap %.3f%%\n",
           inst, layers, c.gpus, gpn, gbs, c.gpu.hbm_gib, b.plans, b.best, x.best_s, g.best_s,
           g.lower_bound_s, 100 * g.gap);
    if (bfbest < INFINITY) {
      CHECK(g.ntop > 0);
      CHECK(g.lower_bound_s <= bfbest * (1 + 1e-9));
      /* asked for gap 0: the optimum, certified */
      CHECK(g.certified);
      CHECK(g.best_s <= bfbest * (1 + 1e-9));
      if (x.ntop) CHECK(g.best_s <= x.best_s * 1.001);
      /* the slowest boundary shared over the stages alone: the same proof */
      CHECK(gs.certified && gs.lower_bound_s <= bfbest * (1 + 1e-9));
      CHECK(gs.ntop && gs.best_s <= bfbest * (1 + 1e-9));
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
    search_result_clear(&gs);
    search_result_clear(&x);
    cm_model_destroy(cm);
  }
}

/* ---- brute force below a threshold, on instances with several stage-count classes -------- */

/* Every non-uniform plan of global's space on a restricted space (no cp, tp <= 2, recompute
 * none or full, ZeRO 0/1, 1F1B), depth first, taking a stage only while the stage times so far
 * keep sum t_i + (m - 1) max t_i below thr: cm_eval charges a 1F1B plan at least that (the
 * argument at the top of search_global.c; checked here at every plan scored), so no plan left
 * out scores below thr. best gets the least score found below thr (INFINITY: none). */
typedef struct bfx {
  cm_model *cm;
  const spec_model *m;
  const spec_cluster *c;
  const search_space *s;
  int gbs, mb, sp, zero, samples, sub_node;
  int island, d;            /* --hierarchy: GPUs per island (0: off); the block's first GPU */
  double thr, best;
  long scored, under_claim; /* plans scored; plans cm_eval charged less than the claim */
  search_stage st[16];
  char why[1024];           /* the best plan found */
} bfx;

/* The block sizes global takes: inside a node on at most 8 nodes, any count of whole nodes. */
static int bfx_sizes(const bfx *b, int *out) {
  int n = 0, gpn = b->c->gpus_per_node;
  for (int g = 1; b->sub_node && g < gpn; g *= 2)
    if (gpn % g == 0) out[n++] = g;
  for (int k = 1; k * gpn <= b->c->gpus; k++) out[n++] = k * gpn;
  return n;
}

static int bfx_cfg_ok(const bfx *b, int tp, int dp) {
  if (b->island) { /* the two-level space: the library's rule on the block and its groups */
    int ids[64], S = tp * dp;
    for (int i = 0; i < S; i++) ids[i] = b->d + i;
    if (!search_island_stage_ok(b->island, ids, S, tp, 1, 1)) return 0;
  }
  const spec_model *m = b->m;
  if ((b->s->max_tp && tp > b->s->max_tp) || b->samples % dp) return 0;
  if (m->heads % tp || m->kv_heads % tp || m->ffn_hidden % tp) return 0;
  return !(b->sp && tp > 1 && m->seq_len % tp);
}

static void bfx_score(bfx *b, int n, double claim) {
  spec_plan p;
  pp_err err = {0};
  if (search_plan_build(b->st, n, b->gbs, b->mb, b->sp, b->zero, b->m, b->c, &p, &err)) {
    fprintf(stderr, "brute force: %s\n", err.msg);
    CHECK(0);
    return;
  }
  cm_result r;
  CHECK(cm_eval(b->cm, &p, &r, &err) == PP_OK);
  b->scored++;
  if (r.feasible && r.iter_time_s < claim * (1 - 1e-9)) b->under_claim++;
  if (r.feasible && r.iter_time_s < b->thr && r.iter_time_s < b->best) {
    b->best = r.iter_time_s;
    int w = snprintf(b->why, sizeof b->why, "microbatches %d, sp %d, ZeRO %d:", b->mb, b->sp,
                     b->zero);
    for (int i = 0; i < n && w > 0 && (size_t)w < sizeof b->why; i++)
      w += snprintf(b->why + w, sizeof b->why - (size_t)w, " [%d layers on GPUs %d+%d, tp %d, "
                    "recompute %s]", b->st[i].layers, b->st[i].first_gpu, b->st[i].ngpus,
                    b->st[i].tp, spec_recompute_name(b->st[i].recompute));
  }
  spec_plan_clear(&p);
}

/* Stages from layer k on GPU d; n stages so far, their sum and largest time. */
static void bfx_walk(bfx *b, int k, int d, int n, double sum, double mx) {
  int sizes[64], ns = bfx_sizes(b, sizes), gpn = b->c->gpus_per_node, K = b->m->layers;
  for (int z = 0; z < ns; z++) {
    int S = sizes[z], gpus[64];
    if (d + S > b->c->gpus || (S < gpn ? d % gpn + S > gpn : d % gpn != 0)) continue;
    for (int i = 0; i < S; i++) gpus[i] = d + i;
    b->d = d;
    for (int tp = 1; tp <= S; tp *= 2) {
      if (S % tp || !bfx_cfg_ok(b, tp, S / tp)) continue;
      for (int rc = 0; rc < 3; rc++) {
        if (!(b->s->recompute & (1u << rc))) continue;
        cm_stage_cfg g = {tp, 1, S / tp, 1, b->samples / (S / tp), b->sp, (spec_recompute)rc};
        cm_stage_coef co;
        pp_err err = {0};
        CHECK(cm_stage_coef_get(b->cm, &g, gpus, S, &co, &err) == PP_OK);
        for (int c = 1; k + c <= K; c++) {
          if (k == 0 && c == K && S == b->c->gpus) continue; /* the uniform part's */
          double t = cm_stage_time(b->cm, &co, c, k == 0, k + c == K, b->zero);
          double s2 = sum + t, m2 = t > mx ? t : mx;
          if (s2 + (b->mb - 1) * m2 >= b->thr) break; /* more layers only take longer */
          b->st[n] = (search_stage){c, d, S, tp, 1, S / tp, 1, (spec_recompute)rc};
          if (k + c == K)
            bfx_score(b, n + 1, s2 + (b->mb - 1) * m2);
          else if (n + 1 < b->s->max_pp)
            bfx_walk(b, k + c, d + S, n + 1, s2, m2);
        }
      }
    }
  }
}

/* The least score below thr over the non-uniform part of space s (INFINITY: none). */
static double bfx_run(cm_model *cm, const spec_model *m, const spec_cluster *c,
                      const search_space *s, double thr, long *scored, long *under,
                      char why[1024]) {
  bfx b = {.cm = cm, .m = m, .c = c, .s = s, .gbs = s->gbs, .thr = thr, .best = INFINITY,
           .sub_node = c->gpus / c->gpus_per_node <= 8, .island = search_island_gpus(s, c)};
  for (b.mb = 1; b.mb <= b.gbs; b.mb++) {
    if (b.gbs % b.mb) continue;
    b.samples = b.gbs / b.mb;
    for (b.sp = 0; b.sp < 2; b.sp++)
      for (b.zero = 0; b.zero < 2; b.zero++) bfx_walk(&b, 0, 0, 0, 0, 0);
  }
  *scored = b.scored, *under = b.under_claim;
  memcpy(why, b.why, sizeof b.why);
  return b.best;
}

static void restricted_space(int gbs, search_space *s) {
  pp_err err = {0};
  search_space_default(gbs, s);
  CHECK(search_space_set(s, "max-tp", "2", &err) == PP_OK);
  CHECK(search_space_set(s, "no-cp", NULL, &err) == PP_OK);
  CHECK(search_space_set(s, "recompute", "none,full", &err) == PP_OK);
  CHECK(search_space_set(s, "zero", "0,1", &err) == PP_OK);
  CHECK(search_space_set(s, "schedules", "1f1b", &err) == PP_OK);
  CHECK(search_space_set(s, "max-pp", "4", &err) == PP_OK);
}

/* A random instance: `nodes` nodes of gpn GPUs, NVLink domains of dom GPUs (a multiple of
 * gpn: several nodes), `layers` layers. */
static void mid_instance(int layers, int nodes, int gpn, int dom, spec_model *m,
                         spec_cluster *c) {
  tiny(layers, nodes * gpn, gpn, 80, m, c);
  m->hidden = 1024 << rnd(2), m->heads = 16, m->kv_heads = 16, m->ffn_hidden = 4 * m->hidden;
  m->seq_len = 1024;
  c->nvlink.domain_gpus = dom;
  c->nvlink.gbps_per_gpu = 50 + rnd(400);
  c->network.nic_gbps = 25 + rnd(200);
  c->gpu.hbm_gib = 6 + rnd(20);
}

/* A non-uniform plan of stages on consecutive blocks from GPU 0 (the part bfx walks). */
static int contiguous(const spec_plan *p) {
  int d = 0;
  for (int i = 0; i < p->nstages; i++)
    for (int j = 0; j < p->stages[i].ngpus; j++)
      if (p->stages[i].gpus[j] != d++) return 0;
  return p->nstages >= 1;
}

static void brute_force_classes(void) {
  /* {layers, nodes, GPUs per node, GPUs per NVLink domain, gbs, --hierarchy} */
  static const int shapes[][6] = {
      {8, 2, 2, 2, 4, 0},  {10, 3, 2, 2, 4, 0}, {12, 2, 4, 4, 8, 0}, {9, 4, 2, 4, 4, 0},
      {10, 2, 2, 4, 8, 0}, {8, 4, 2, 8, 4, 0},  {8, 10, 1, 1, 4, 0}, {9, 9, 1, 3, 4, 0},
      {9, 4, 2, 4, 4, SEARCH_HIER_NODE},        {9, 4, 2, 4, 4, SEARCH_HIER_DOMAIN},
      {10, 4, 2, 8, 8, SEARCH_HIER_NODE},
  };
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    const int *sh = shapes[i];
    spec_model m;
    spec_cluster c;
    mid_instance(sh[0], sh[1], sh[2], sh[3], &m, &c);
    pp_err err = {0};
    cm_model *cm = NULL;
    if (spec_cluster_validate(&c, &err) || cm_model_create(&m, &c, NULL, &cm, &err)) {
      fprintf(stderr, "classes %zu: %s\n", i, err.msg);
      CHECK(0);
      continue;
    }
    search_space s;
    restricted_space(sh[4], &s);
    s.hierarchy = sh[5];
    search_result g0, g1, x, t, w[2];
    CHECK(run(cm, SEARCH_GLOBAL, sh[4], &s, 2, 0, &g0) == PP_OK);
    CHECK(run_way(cm, SEARCH_GLOBAL, sh[4], &s, 2, 0, SEARCH_P2P_FIRST, &w[0]) == PP_OK);
    CHECK(run_way(cm, SEARCH_GLOBAL, sh[4], &s, 2, 0, SEARCH_P2P_SHARED, &w[1]) == PP_OK);
    CHECK(run(cm, SEARCH_GLOBAL, sh[4], &s, 2, 0.01, &g1) == PP_OK);
    CHECK(run(cm, SEARCH_EXHAUSTIVE, sh[4], &s, 2, 0, &x) == PP_OK);
    int tl = run(cm, SEARCH_TWO_LEVEL, sh[4], &s, 1, 0, &t) == PP_OK;
    long scored = 0, under = 0;
    double bfb = INFINITY;
    char why[1024] = "";
    if (g0.ntop) bfb = bfx_run(cm, &m, &c, &s, g0.best_s * (1 + 1e-6), &scored, &under, why);
    printf("classes %zu: %d layers, %d x %d GPUs, domain %d, gbs %d, hierarchy %d, hbm %.0f GiB: "
           "global at gap "
           "0: %.6g s (%d stages), bound %.6g s, %s; at 1%%: %.6g s, bound %.6g s, gap %.3f%%; "
           "brute force %ld plans, best %.6g s; exhaustive %.6g s\n",
           i, sh[0], sh[1], sh[2], sh[3], sh[4], sh[5], c.gpu.hbm_gib, g0.best_s,
           g0.ntop ? g0.top[0].plan.nstages : 0, g0.lower_bound_s,
           g0.certified ? "certified" : "NOT certified", g1.best_s, g1.lower_bound_s,
           100 * g1.gap, scored, bfb, x.best_s);
    CHECK(g0.ntop > 0);
    CHECK(g0.certified && g1.certified);
    CHECK_EQ(under, 0); /* cm_eval never charges less than the stage-time claim */
    if (g0.ntop) {
      /* at gap 0 the best is the optimum: no plan of the space scores below it */
      CHECK(g0.lower_bound_s >= g0.best_s * (1 - 1e-9));
      CHECK(bfb >= g0.best_s * (1 - 1e-9));
      if (bfb < g0.best_s * (1 - 1e-9)) fprintf(stderr, "  brute force's best: %s\n", why);
      if (x.ntop) CHECK(x.best_s >= g0.best_s * (1 - 1e-9));
      if (tl && t.ntop && search_island_plan_ok(&s, &c, &t.top[0].plan))
        CHECK(t.best_s >= g0.best_s * (1 - 1e-9));
      for (int k = 0; k < g0.ntop; k++) CHECK(search_island_plan_ok(&s, &c, &g0.top[k].plan));
      /* the brute force finds global's plan when it is one of the part it walks */
      if (contiguous(&g0.top[0].plan)) CHECK(bfb <= g0.best_s * (1 + 1e-9));
      /* each way of bounding the slowest boundary alone proves the same optimum */
      for (int k = 0; k < 2; k++) {
        CHECK(w[k].certified);
        CHECK(w[k].ntop && fabs(w[k].best_s - g0.best_s) <= 1e-9 * g0.best_s);
        CHECK(w[k].lower_bound_s <= g0.best_s * (1 + 1e-9));
      }
      /* at 1%: the bound is below the optimum and the gap is met */
      CHECK(g1.lower_bound_s <= g0.best_s * (1 + 1e-9));
      CHECK(g1.ntop && g1.best_s <= g1.lower_bound_s * 1.01 * (1 + 1e-9));
    }
    if (tl) search_result_clear(&t);
    search_result_clear(&g0);
    search_result_clear(&g1);
    search_result_clear(&x);
    search_result_clear(&w[0]);
    search_result_clear(&w[1]);
    cm_model_destroy(cm);
  }
}

/* --same-recompute: global at gap 0 with one recomputation for every stage finds the least
 * of global's optima with the space's recomputation fixed to each allowed value (each of
 * those checked against brute force above); its plans' stages recompute alike, and the open
 * space's optimum is no slower. Runs global searches on random mid-size instances. */
static void same_recompute(void) {
  /* {layers, nodes, GPUs per node, GPUs per domain, gbs, HBM GiB, seed}: on the last two,
   * memory so tight that the best plan recomputes in its first stages only (global is faster
   * than every plan of one recomputation); on the first, one recomputation loses nothing */
  static const int shapes[][7] = {
      {8, 2, 2, 2, 4, 4, 100}, {12, 2, 2, 2, 8, 4, 124}, {12, 4, 2, 4, 8, 4, 132}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    const int *sh = shapes[i];
    spec_model m;
    spec_cluster c;
    rs = (unsigned)sh[6];
    mid_instance(sh[0], sh[1], sh[2], sh[3], &m, &c);
    c.gpu.hbm_gib = sh[5];
    pp_err err = {0};
    cm_model *cm = NULL;
    if (spec_cluster_validate(&c, &err) || cm_model_create(&m, &c, NULL, &cm, &err)) {
      fprintf(stderr, "same-recompute %zu: %s\n", i, err.msg);
      CHECK(0);
      continue;
    }
    search_space s, one;
    restricted_space(sh[4], &s);
    one = s;
    CHECK(search_space_set(&one, "same-recompute", NULL, &err) == PP_OK);
    search_result g, a;
    CHECK(run(cm, SEARCH_GLOBAL, sh[4], &s, 2, 0, &g) == PP_OK);
    CHECK(run(cm, SEARCH_GLOBAL, sh[4], &one, 2, 0, &a) == PP_OK);
    double least = INFINITY;
    static const char *const rcs[] = {"none", "full"};
    for (int r = 0; r < 2; r++) {
      search_space f = s;
      search_result x;
      CHECK(search_space_set(&f, "recompute", rcs[r], &err) == PP_OK);
      CHECK(run(cm, SEARCH_GLOBAL, sh[4], &f, 2, 0, &x) == PP_OK);
      CHECK(x.certified);
      if (x.ntop && x.best_s < least) least = x.best_s;
      search_result_clear(&x);
    }
    printf("same-recompute %zu: global %.6g s, one recomputation %.6g s (bound %.6g s, %s), "
           "least over fixed recomputations %.6g s\n",
           i, g.best_s, a.best_s, a.lower_bound_s, a.certified ? "certified" : "NOT certified",
           least);
    CHECK(a.certified && g.certified);
    CHECK(a.ntop > 0 && isfinite(least));
    if (a.ntop) {
      CHECK(fabs(a.best_s - least) <= 1e-9 * least);
      CHECK(g.best_s <= a.best_s * (1 + 1e-9));
      if (i > 0) CHECK(g.best_s < a.best_s * (1 - 1e-3)); /* per-stage recomputation pays */
      for (int k = 0; k < a.ntop; k++) {
        const spec_plan *p = &a.top[k].plan;
        for (int j = 1; j < p->nstages; j++)
          CHECK(p->stages[j].recompute == p->stages[0].recompute);
        CHECK(search_space_plan_ok(&one, &c, p)); /* what it returns lies in its space */
      }
      /* global's best lies in its own space, and, faster than every plan of one
       * recomputation, not in that one (search_space_plan_ok on non-uniform plans) */
      CHECK(g.ntop > 0 && search_space_plan_ok(&s, &c, &g.top[0].plan));
      if (i > 0 && g.ntop) CHECK(!search_space_plan_ok(&one, &c, &g.top[0].plan));
    }
    search_result_clear(&g);
    search_result_clear(&a);
    cm_model_destroy(cm);
  }
}

/* The two-level cache: global searches sharing one (the plain space, then the two-level
 * space, then ZeRO 0/1 only: the same two-level part each time), and two-level itself after
 * them, find the same best plans, bounds and evaluation counts as the same searches without
 * it. Runs global and two-level searches on a random mid-size instance. */
static void two_level_cache(void) {
  spec_model m;
  spec_cluster c;
  rs = 77;
  mid_instance(10, 4, 2, 4, &m, &c);
  pp_err err = {0};
  cm_model *cm = NULL;
  CHECK(spec_cluster_validate(&c, &err) == PP_OK && cm_model_create(&m, &c, NULL, &cm, &err) == PP_OK);
  if (!cm) return;
  search_cache *cache = search_cache_new();
  CHECK(cache != NULL);
  static const char *const opt[3][2] = {{NULL, NULL}, {"hierarchy", "node"}, {"zero", "0,1"}};
  for (int i = 0; i < 3; i++) {
    search_opts o;
    search_opts_default(SEARCH_GLOBAL, 8, &o);
    restricted_space(8, &o.space);
    if (opt[i][0]) CHECK(search_space_set(&o.space, opt[i][0], opt[i][1], &err) == PP_OK);
    o.threads = 2, o.gap = 0, o.top = 5;
    search_result a, b;
    CHECK(search_run(cm, &o, &a, &err) == PP_OK);
    o.cache = cache;
    CHECK(search_run(cm, &o, &b, &err) == PP_OK);
    printf("two-level cache %d: %.6g s (%lld evaluations) without, %.6g s (%lld) with\n", i,
           a.best_s, a.evaluations, b.best_s, b.evaluations);
    CHECK(a.ntop == b.ntop && a.best_s == b.best_s && a.lower_bound_s == b.lower_bound_s);
    CHECK_EQ(a.evaluations, b.evaluations);
    for (int k = 0; k < a.ntop && k < b.ntop; k++)
      CHECK(a.top[k].cm.iter_time_s == b.top[k].cm.iter_time_s);
    search_result_clear(&a);
    search_result_clear(&b);
  }
  /* two-level itself, after the globals filled the cache with its run: the same answer */
  search_opts o;
  search_opts_default(SEARCH_TWO_LEVEL, 8, &o);
  restricted_space(8, &o.space);
  o.threads = 2, o.top = 5;
  search_result a, b;
  CHECK(search_run(cm, &o, &a, &err) == PP_OK);
  o.cache = cache;
  CHECK(search_run(cm, &o, &b, &err) == PP_OK);
  CHECK(a.ntop > 0 && a.ntop == b.ntop && a.best_s == b.best_s);
  CHECK_EQ(a.evaluations, b.evaluations);
  search_result_clear(&a);
  search_result_clear(&b);
  search_cache_free(cache);
  cm_model_destroy(cm);
}

/* ---- neighbours of global's best ----------------------------------------------------------- */

typedef struct nbr {
  cm_model *cm;
  const spec_model *m;
  const spec_cluster *c;
  const spec_plan *p;
  double bound;
  long scored, below;
} nbr;

static void nbr_score(nbr *b, const search_stage *st, int n) {
  spec_plan q;
  pp_err err = {0};
  if (search_plan_build(st, n, b->p->gbs, spec_plan_microbatches(b->p), b->p->sp, b->p->zero,
                        b->m, b->c, &q, &err))
    return; /* not a valid plan (a degree the model does not divide) */
  cm_result r;
  CHECK(cm_eval(b->cm, &q, &r, &err) == PP_OK);
  if (r.feasible) {
    b->scored++;
    if (r.iter_time_s < b->bound * (1 - 1e-9)) b->below++;
  }
  spec_plan_clear(&q);
}

/* Every plan one step from p: a stage boundary moved by one layer, one stage's block split
 * differently into tp x cp x dp, one stage's recomputation changed. */
static int neighbours(nbr *b) {
  const spec_plan *p = b->p;
  int n = p->nstages;
  search_stage st[64], w[64];
  for (int i = 0; i < n; i++) {
    const spec_stage *s = &p->stages[i];
    st[i] = (search_stage){s->layer_end - s->layer_begin, s->gpus[0], s->ngpus, s->tp, s->cp,
                           s->dp, s->ep, s->recompute};
  }
  if (!n) { /* a uniform 1F1B pipeline: stage i on GPUs [iS, (i + 1)S) */
    if (p->pp < 2 || p->pp > 64 || p->vpp > 1 || p->zero > 1 || p->schedule != SPEC_SCHED_1F1B)
      return 0;
    n = p->pp;
    int S = p->tp * p->cp * p->dp, K = b->m->layers;
    for (int i = 0; i < n; i++)
      st[i] = (search_stage){K / n + (i < K % n), i * S, S, p->tp, p->cp, p->dp, p->ep,
                             p->recompute};
  }
  for (int i = 0; i + 1 < n; i++)
    for (int dir = -1; dir <= 1; dir += 2) {
      memcpy(w, st, (size_t)n * sizeof *w);
      w[i].layers += dir, w[i + 1].layers -= dir;
      if (w[i].layers >= 1 && w[i + 1].layers >= 1) nbr_score(b, w, n);
    }
  for (int i = 0; i < n; i++) {
    int S = st[i].ngpus;
    for (int tp = 1; tp <= S; tp++)
      for (int cp = 1; S % tp == 0 && cp <= S / tp; cp++) {
        if ((S / tp) % cp || (tp == st[i].tp && cp == st[i].cp)) continue;
        memcpy(w, st, (size_t)n * sizeof *w);
        w[i].tp = tp, w[i].cp = cp, w[i].dp = S / tp / cp, w[i].ep = 1;
        nbr_score(b, w, n);
      }
    for (int r = 0; r < 3; r++) {
      if ((spec_recompute)r == st[i].recompute) continue;
      memcpy(w, st, (size_t)n * sizeof *w);
      w[i].recompute = (spec_recompute)r;
      nbr_score(b, w, n);
    }
  }
  return 1;
}

static void neighbour_property(void) {
  /* {model, cluster, GPUs, gbs, HBM GiB, p2p way}: memory cut so that pipelines win; the
   * last, 16 GiB V100s on 25 Gb/s Ethernet, pipelines across nodes after stages inside one,
   * bounded with the slowest boundary shared over the stages only (the first boundary,
   * inside a node, bounds it far below the others there) */
  static const struct {
    const char *model, *cluster;
    int gpus, gbs;
    double hbm;
    int way;
  } cases[] = {
      {"gpt3-2.6b", "dgx-h100", 24, 48, 8, SEARCH_P2P_AUTO},
      {"gpt3-13b", "dgx-a100", 24, 48, 24, SEARCH_P2P_AUTO},
      {"gpt3-6.7b", "h100-nvl256", 40, 40, 16, SEARCH_P2P_AUTO},
      {"gpt3-39b", "p3.16xlarge", 64, 1536, 16, SEARCH_P2P_SHARED},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    spec_model m;
    spec_cluster c;
    pp_err err = {0};
    cm_model *cm = NULL;
    CHECK(spec_model_load(cases[i].model, &m, &err) == PP_OK);
    CHECK(spec_cluster_load(cases[i].cluster, cases[i].gpus, &c, &err) == PP_OK);
    c.gpu.hbm_gib = cases[i].hbm;
    CHECK(cm_model_create(&m, &c, NULL, &cm, &err) == PP_OK);
    /* ZeRO 0/1 and 1F1B only: the pipelines' own space, where the neighbours lie */
    search_space s;
    search_space_default(cases[i].gbs, &s);
    CHECK(search_space_set(&s, "zero", "0,1", &err) == PP_OK);
    CHECK(search_space_set(&s, "schedules", "1f1b", &err) == PP_OK);
    search_result g;
    CHECK(run_way(cm, SEARCH_GLOBAL, cases[i].gbs, &s, 2, 0.01, cases[i].way, &g) == PP_OK);
    nbr b = {.cm = cm, .m = &m, .c = &c, .bound = g.lower_bound_s};
    int plans = 0;
    for (int k = 0; k < g.ntop; k++) {
      b.p = &g.top[k].plan;
      plans += neighbours(&b);
    }
    printf("neighbours: %s on %d GPUs of %s (%.0f GiB), gbs %d: global %.6g s (%d stages), bound %.6g s, "
           "%s; %d pipelines of its top, %ld neighbours that fit, %ld below the bound\n",
           cases[i].model, cases[i].gpus, cases[i].cluster, cases[i].hbm, cases[i].gbs, g.best_s,
           g.ntop ? g.top[0].plan.nstages : 0, g.lower_bound_s,
           g.certified ? "certified" : "NOT certified", plans, b.scored, b.below);
    CHECK(g.certified);
    CHECK(g.ntop && g.lower_bound_s <= g.best_s * (1 + 1e-9));
    CHECK(b.scored > 0); /* the property was checked at all */
    CHECK_EQ(b.below, 0);
    /* the other way of bounding the slowest boundary: each bound is at most either best */
    search_result o;
    int other = cases[i].way == SEARCH_P2P_SHARED ? SEARCH_P2P_FIRST : SEARCH_P2P_SHARED;
    CHECK(run_way(cm, SEARCH_GLOBAL, cases[i].gbs, &s, 2, 0.01, other, &o) == PP_OK);
    printf("  the other way: %.6g s, bound %.6g s\n", o.best_s, o.lower_bound_s);
    CHECK(o.ntop && o.lower_bound_s <= g.best_s * (1 + 1e-9));
    CHECK(g.lower_bound_s <= o.best_s * (1 + 1e-9));
    search_result_clear(&o);
    search_result_clear(&g);
    cm_model_destroy(cm);
  }
}

/* The two-level space inside global's: GPT-3 6.7B on 40 GPUs of h100-nvl256 (one 40-GPU
 * domain of 5 nodes) at 16 GiB, ZeRO 0/1, 1F1B: with --hierarchy node global is certified to
 * 1%, returns only plans of that space, and none better than global's bound without the
 * restriction (whose space holds it); --hierarchy domain there (one island) is PP_USAGE. */
static void hierarchy_inside(void) {
  spec_model m;
  spec_cluster c;
  pp_err err = {0};
  cm_model *cm = NULL;
  CHECK(spec_model_load("gpt3-6.7b", &m, &err) == PP_OK);
  CHECK(spec_cluster_load("h100-nvl256", 40, &c, &err) == PP_OK);
  c.gpu.hbm_gib = 16;
  CHECK(cm_model_create(&m, &c, NULL, &cm, &err) == PP_OK);
  search_space s;
  search_space_default(40, &s);
  CHECK(search_space_set(&s, "zero", "0,1", &err) == PP_OK);
  CHECK(search_space_set(&s, "schedules", "1f1b", &err) == PP_OK);
  search_result off;
  CHECK(run(cm, SEARCH_GLOBAL, 40, &s, 2, 0.01, &off) == PP_OK);
  /* the 40 GPUs are one NVLink domain: the two-level space of domains is the whole space, and
   * asking for it is bad usage that names the option */
  s.hierarchy = SEARCH_HIER_DOMAIN;
  search_opts o;
  search_opts_default(SEARCH_GLOBAL, 40, &o);
  o.space = s;
  search_result r0;
  CHECK(search_run(cm, &o, &r0, &err) == PP_USAGE);
  CHECK(strstr(err.msg, "--hierarchy domain") != NULL);
  {
    s.hierarchy = SEARCH_HIER_NODE;
    search_result r;
    CHECK(run(cm, SEARCH_GLOBAL, 40, &s, 2, 0.01, &r) == PP_OK);
    printf("hierarchy node: global %.6g s (bound %.6g s, %s) against %.6g s (bound %.6g s) "
           "without\n", r.best_s, r.lower_bound_s, r.certified ? "certified" : "NOT certified",
           off.best_s, off.lower_bound_s);
    CHECK(r.certified && r.ntop > 0);
    CHECK(r.best_s >= off.lower_bound_s * (1 - 1e-9));
    for (int k = 0; k < r.ntop; k++) CHECK(search_island_plan_ok(&s, &c, &r.top[k].plan));
    search_result_clear(&r);
  }
  search_result_clear(&off);
  cm_model_destroy(cm);
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

/* search_space_plan_ok on the uniform space: the 4-layer tiny model on 8 GPUs (4 nodes of 2),
 * gbs 8; for each restriction (every option of the space, alone and two together), a plan of
 * the unrestricted space lies in the restricted one exactly when search_uspace_build of the
 * restricted space lists it. */
static int same_uplan(const spec_plan *a, const spec_plan *b) {
  return a->tp == b->tp && a->pp == b->pp && a->dp == b->dp && a->cp == b->cp &&
         a->ep == b->ep && a->mbs == b->mbs && a->vpp == b->vpp && a->sp == b->sp &&
         a->recompute == b->recompute && a->zero == b->zero && a->schedule == b->schedule;
}

static void plan_membership(void) {
  static const char *const opts[][4] = {
      {"max-tp", "1", NULL, NULL},         {"max-pp", "2", NULL, NULL},
      {"max-dp", "2", NULL, NULL},         {"no-cp", NULL, NULL, NULL},
      {"max-vpp", "1", NULL, NULL},        {"max-mbs", "1", NULL, NULL},
      {"recompute", "full", NULL, NULL},   {"zero", "0,1", NULL, NULL},
      {"schedules", "gpipe,1f1b", NULL, NULL}, {"sp", "off", NULL, NULL},
      {"hierarchy", "node", NULL, NULL},   {"zero", "2,3", "max-tp", "2"},
      {"max-cp", "2", "recompute", "none,selective"}};
  spec_model m;
  spec_cluster c;
  tiny(4, 8, 2, 80, &m, &c);
  search_space all;
  search_space_default(8, &all);
  pp_err err = {0};
  search_uspace *u = NULL;
  CHECK(search_uspace_build(&all, &m, &c, &u, &err) == PP_OK);
  size_t nu = u ? search_uspace_size(u) : 0;
  CHECK(nu > 100);
  for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++) {
    search_space s = all;
    for (int j = 0; j < 4 && opts[k][j]; j += 2)
      CHECK(search_space_set(&s, opts[k][j], opts[k][j + 1], &err) == PP_OK);
    search_uspace *r = NULL;
    CHECK(search_uspace_build(&s, &m, &c, &r, &err) == PP_OK);
    size_t nr = r ? search_uspace_size(r) : 0, in = 0, wrong = 0;
    for (size_t i = 0; i < nu; i++) {
      spec_plan p, q;
      search_uspace_plan(u, i, &p);
      int listed = 0;
      for (size_t j = 0; j < nr && !listed; j++) {
        search_uspace_plan(r, j, &q);
        listed = same_uplan(&p, &q);
      }
      int ok = search_space_plan_ok(&s, &c, &p);
      in += ok, wrong += ok != listed;
    }
    printf("membership --%s %s: %zu of %zu plans inside, %zu listed, %zu wrong\n", opts[k][0],
           opts[k][1] ? opts[k][1] : "", in, nu, nr, wrong);
    CHECK(nr > 0 && nr < nu && in == nr);
    CHECK_EQ((long)wrong, 0L);
    search_uspace_free(r);
  }
  search_uspace_free(u);
}

int main(void) {
  plan_membership();
  space_by_hand();
  known_optimum();
  gpipe_only();
  determinism();
  megatron();
  brute_force();
  island_rule();
  brute_force_classes();
  same_recompute();
  two_level_cache();
  neighbour_property();
  hierarchy_inside();
  torus_period();
  time_limit_torus();
  return check_status();
}
