/* The two-level method (search/search_twolevel.c):
 *  - Alpa's inter-op DP (t_max enumeration, early stop, memory by stages in flight) equals a
 *    brute force over every slicing of the clusters into stages and every sub-mesh shape per
 *    stage, on 200 random tables (5 clusters; shapes of 1, 2, 4, 8 devices covering 8 or 6;
 *    at most 5 or 3 stages; 1, 2, 7 or 64 microbatches; two configurations per entry with their
 *    own memory limits), same objective to 1e-12;
 *  - Alpa's placement of sub-meshes (largest first, whole islands, then packed in islands);
 *  - GPT-3 175B on 8 V100s fits no slicing: search_run returns no plan and says why;
 *  - through search_run, the plans Alpa published for its GPT benchmarks on 8-GPU V100 nodes with 25 Gbit/s
 *    between them (notes/alpa.md), with --alpa-defaults (gbs 1024, 1F1B, full recompute, its
 *    alpha-beta ILP weights, 16 layer clusters, microbatch counts grid-searched) on the
 *    cost model's defaults: GPT-39B on 64 GPUs of p3.16xlarge: 16 stages of (1, 4), logical
 *    mesh (1, 4) (tp 4), 1024 microbatches, as published; on 1024 of those GPUs 16 stages of
 *    at most 4 nodes cannot cover the cluster, so the sub-meshes widen (a stage of more than
 *    32 GPUs, stages summing to 1024, the note says so). GPT-15B on 32 GPUs: not reproduced,
 *    and the test pins why: Alpa's plan (4 stages of (1, 8), logical (2, 4), 128
 *    microbatches) needs more than the V100's 16 GiB in the cost model's memory (fp32 main
 *    gradients, 3 GiB overhead); where memory does not bind (a 32 GiB variant of the cluster)
 *    two-level's plan is at least as fast as Alpa's in the cost model and is 8 stages of
 *    (1, 4), two per node (each stage then waits on one slow boundary per microbatch, not
 *    two), not Alpa's 4 x (1, 8).
 *  - ZeRO beyond 1 (Alpa's force_zero_stage_3 and reduce-scattered accumulated gradients): on
 *    Llama 3 8B, 16 A100s, gbs 64, a stage of every GPU also takes ZeRO 2 and 3 when the space
 *    allows them, so the space grows and the best plan improves (memory lets ZeRO-2 run dp 16
 *    without TP: 7.97 s against 8.25 s at ZeRO 1); every plan of ZeRO 2-3 has one stage; with
 *    --alpa-defaults (its GPT suite sets neither) the space is that of ZeRO 0-1, and a space
 *    of ZeRO 2-3 only is empty, which the why says. */
#include <stdlib.h>

#include "check.h"
#include "podplan/search.h"
#include "search_ilp.h"
#include "search_twolevel.h"

/* ---- DP against brute force --------------------------------------------------------------- */

static unsigned long long rng = 88172645463325252ull;
static unsigned rnd(unsigned n) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (unsigned)(rng % n);
}

static void dp_vs_brute(void) {
  int sizes8[] = {1, 2, 4, 8}, sizes6[] = {1, 2, 4};
  int Bs[] = {1, 2, 7, 64};
  for (int trial = 0; trial < 200; trial++) {
    int L = 5, M = trial % 2 ? 4 : 3, D = M == 4 ? 8 : 6, S = trial % 3 ? 5 : 3;
    int B = Bs[trial % 4];
    long nt = (long)L * L * M * S;
    double *t = malloc(sizeof *t * (size_t)nt);
    search__tl_table tab = {L, M, D, S, B, M == 4 ? sizes8 : sizes6, t};
    for (int k = 0; k < L; k++)
      for (int i = 0; i < L; i++)
        for (int m = 0; m < M; m++) {
          /* two configurations: times in ms steps, each fitting up to `succ` stages after */
          double r[2];
          int succ[2];
          for (int c = 0; c < 2; c++) {
            r[c] = (1 + rnd(1000)) * 1e-3 * (i - k + 1) / tab.size[m];
            succ[c] = (int)rnd(7) - 1;
          }
          for (int s = 1; s <= S; s++) {
            double v = INFINITY;
            for (int c = 0; c < 2; c++)
              if (i >= k && s - 1 <= succ[c] && r[c] < v) v = r[c];
            if (rnd(10) == 0) v = INFINITY;
            t[search__tl_at(&tab, k, i, m, s)] = v;
          }
        }
    search__tl_path dp, bf;
    pp_err err = {0};
    CHECK_EQ(search__tl_dp(&tab, 1e-6, &dp, &err), PP_OK);
    CHECK_EQ(search__tl_brute(&tab, &bf, &err), PP_OK);
    CHECK_EQ(dp.n > 0, bf.n > 0);
    if (dp.n && bf.n) {
      if (!(fabs(dp.total - bf.total) <= 1e-12 * bf.total))
        fprintf(stderr, "trial %d: DP %.15g, brute force %.15g\n", trial, dp.total, bf.total);
      CHECK_NEAR(dp.total, bf.total, 1e-12);
      /* the DP's path is a valid slicing whose objective is what it says */
      int k = 0, d = 0;
      double sum = 0, mx = 0;
      for (int j = 0; j < dp.n; j++) {
        CHECK_EQ(dp.st[j].k, k);
        k = dp.st[j].i + 1;
        d += tab.size[dp.st[j].shape];
        double e = t[search__tl_at(&tab, dp.st[j].k, dp.st[j].i, dp.st[j].shape, dp.n - j)];
        CHECK(isfinite(e));
        sum += e, mx = e > mx ? e : mx;
      }
      CHECK_EQ(k, L);
      CHECK_EQ(d, D);
      CHECK(dp.n <= S);
      CHECK_NEAR(sum + (B - 1) * mx, dp.total, 1e-12);
    }
    free(t);
  }
}

static void placement(void) {
  int first[8];
  int a[] = {4, 8, 2, 2, 16};
  CHECK_EQ(search__tl_place(a, 5, 8, first), 0);
  /* 16 on islands 0-1, 8 on island 2, then 4, 2, 2 packed in island 3 */
  CHECK_EQ(first[4], 0);
  CHECK_EQ(first[1], 16);
  CHECK_EQ(first[0], 24);
  CHECK_EQ(first[2], 28);
  CHECK_EQ(first[3], 30);
  int b[] = {4, 4, 4, 4};
  CHECK_EQ(search__tl_place(b, 4, 8, first), 0);
  CHECK_EQ(first[0], 0);
  CHECK_EQ(first[3], 12);
  int c[] = {8, 4}; /* does not fill island 1 */
  CHECK(search__tl_place(c, 2, 8, first) != 0);
  int d[] = {12, 4}; /* 12 is neither a divisor nor a multiple of 8 */
  CHECK(search__tl_place(d, 2, 8, first) != 0);
}

/* ---- Alpa's published plans ---------------------------------------------------------------- */

typedef struct tl_result {
  int n;           /* stages of the best plan (0: none) */
  int gpus[64], tp[64], dp[64];
  int microbatches;
  double iter_s;
  char note[512];
} tl_result;

/* Runs two-level through search_run with --alpa-defaults on the default space of global batch
 * 1024 (full recompute, sp off follow from --alpa-defaults). */
static void run_alpa(const char *model, const spec_cluster *c, tl_result *out) {
  memset(out, 0, sizeof *out);
  spec_model m;
  pp_err err = {0};
  CHECK_EQ(spec_model_load(model, &m, &err), PP_OK);
  cm_model *cm = NULL;
  CHECK_EQ(cm_model_create(&m, c, NULL, &cm, &err), PP_OK);
  search_opts o;
  search_opts_default(SEARCH_TWO_LEVEL, 1024, &o);
  o.top = 3;
  o.threads = 1;
  o.alpa_defaults = 1;
  search_result res;
  int rc = search_run(cm, &o, &res, &err);
  if (rc) fprintf(stderr, "%s: %s\n", model, err.msg);
  CHECK_EQ(rc, PP_OK);
  if (!rc) {
    CHECK(res.space_size > 0);
    CHECK(res.evaluations > 0);
    CHECK_EQ(res.units, 1);
    CHECK(res.complete);
    fprintf(stderr, "%s on %d GPUs of %s: %s (%.2f s)\n", model, c->gpus, c->name,
            res.ntop ? res.note : res.why, res.wall_s);
  }
  if (!rc && res.ntop) {
    const spec_plan *p = &res.top[0].plan;
    out->n = p->nstages;
    for (int j = 0; j < p->nstages && j < 64; j++)
      out->gpus[j] = p->stages[j].ngpus, out->tp[j] = p->stages[j].tp,
      out->dp[j] = p->stages[j].dp;
    out->microbatches = p->microbatches;
    out->iter_s = res.top[0].cm.iter_time_s;
    CHECK_CONTAINS(res.note, "stage costs from the cost model, not profiled");
    snprintf(out->note, sizeof out->note, "%s", res.note);
  }
  if (!rc) search_result_clear(&res);
  cm_model_destroy(cm);
}

/* The cost model's score of a plan of n equal stages of `gpus` contiguous GPUs. */
static cm_result score_uniform_stages(const char *model, const spec_cluster *c, int n,
                                      int gpus, int tp, int dp, int microbatches) {
  spec_model m;
  pp_err err = {0};
  cm_result r;
  memset(&r, 0, sizeof r);
  CHECK_EQ(spec_model_load(model, &m, &err), PP_OK);
  search_stage st[64];
  for (int j = 0; j < n; j++)
    st[j] = (search_stage){m.layers / n, j * gpus, gpus, tp, 1, dp, 1, SPEC_RECOMPUTE_FULL};
  spec_plan p;
  CHECK_EQ(search_plan_build(st, n, 1024, microbatches, 0, 1, &m, c, &p, &err), PP_OK);
  cm_model *cm = NULL;
  CHECK_EQ(cm_model_create(&m, c, NULL, &cm, &err), PP_OK);
  CHECK_EQ(cm_eval(cm, &p, &r, &err), PP_OK);
  cm_model_destroy(cm);
  spec_plan_clear(&p);
  return r;
}

static void alpa_gpt39b(void) {
  spec_cluster c;
  pp_err err = {0};
  CHECK_EQ(spec_cluster_load("p3.16xlarge", 64, &c, &err), PP_OK);
  tl_result r;
  run_alpa("gpt-39b-alpa", &c, &r);
  CHECK_EQ(r.n, 16);
  for (int j = 0; j < r.n; j++) {
    CHECK_EQ(r.gpus[j], 4);
    CHECK_EQ(r.tp[j], 4);
    CHECK_EQ(r.dp[j], 1);
  }
  CHECK_EQ(r.microbatches, 1024);
  CHECK_CONTAINS(r.note, "16x[3 layers (1,4) logical (1,4) tp4 dp1 full]");
  CHECK(!strstr(r.note, "small_power_of_two cannot cover"));
}

/* Past 512 GPUs, 16 stages of at most 4 nodes cannot cover the cluster: the sub-meshes widen
 * to every power of two of nodes, so some stage holds more than 32 GPUs, and the note says so. */
static void alpa_wide(void) {
  spec_cluster c;
  pp_err err = {0};
  CHECK_EQ(spec_cluster_load("p3.16xlarge", 1024, &c, &err), PP_OK);
  tl_result r;
  run_alpa("gpt-39b-alpa", &c, &r);
  CHECK(r.n > 0 && r.n <= 16);
  int most = 0, sum = 0;
  for (int j = 0; j < r.n; j++) {
    most = r.gpus[j] > most ? r.gpus[j] : most;
    sum += r.gpus[j];
  }
  CHECK(most > 32);
  CHECK_EQ(sum, 1024);
  CHECK_CONTAINS(r.note, "small_power_of_two cannot cover the cluster");
}

static void alpa_gpt15b(void) {
  spec_cluster c;
  pp_err err = {0};
  CHECK_EQ(spec_cluster_load("p3.16xlarge", 32, &c, &err), PP_OK);
  /* Alpa's plan does not fit the cost model's memory of a 16 GiB V100 */
  cm_result pub = score_uniform_stages("gpt-15b", &c, 4, 8, 4, 2, 128);
  CHECK(!pub.feasible);
  CHECK(pub.mem_gib_per_gpu > 16.5);
  tl_result r;
  run_alpa("gpt-15b", &c, &r);
  CHECK(r.n > 0);
  /* with memory out of the way, two-level's plan is at least as fast as Alpa's */
  spec_cluster big = c;
  big.gpu.hbm_gib = 32;
  snprintf(big.gpu.name, sizeof big.gpu.name, "v100-32g");
  pub = score_uniform_stages("gpt-15b", &big, 4, 8, 4, 2, 128);
  CHECK(pub.feasible);
  run_alpa("gpt-15b", &big, &r);
  CHECK(r.n > 0);
  if (r.n) CHECK(r.iter_s <= pub.iter_time_s);
  /* Regression pin, not validation (Alpa's published plan, 4 stages of 8 GPUs, is the one
   * checked above): the shape two-level finds today, 8 stages of (1, 4), two per node, whose
   * boundary inside a node is NVLink, so each stage waits on one 25 Gbit/s boundary per
   * microbatch where Alpa's one-stage-per-node waits on two (cm_eval: a stage pays the mean of
   * its two boundaries, twice per microbatch). The line printed below gives the shape and the
   * times; update the pin only for a deliberate change of the cost model or the search. */
  if (r.n != 8) fprintf(stderr, "regression pin: gpt-15b 32 GiB: %d stages, pinned 8\n", r.n);
  CHECK_EQ(r.n, 8);
  for (int j = 0; j < r.n; j++) CHECK_EQ(r.gpus[j], 4);
  fprintf(stderr, "gpt-15b, 32 GiB variant: two-level %.2f s per iteration, Alpa's plan %.2f s\n",
          r.iter_s, pub.iter_time_s);
}

/* A model that fits no slicing: no plan, and the run says why. */
static void nothing_fits(void) {
  spec_model m;
  spec_cluster c;
  pp_err err = {0};
  CHECK_EQ(spec_model_load("gpt3-175b", &m, &err), PP_OK);
  CHECK_EQ(spec_cluster_load("p3.16xlarge", 8, &c, &err), PP_OK);
  cm_model *cm = NULL;
  CHECK_EQ(cm_model_create(&m, &c, NULL, &cm, &err), PP_OK);
  search_opts o;
  search_opts_default(SEARCH_TWO_LEVEL, 64, &o);
  o.threads = 1;
  search_result res;
  CHECK_EQ(search_run(cm, &o, &res, &err), PP_OK);
  CHECK_EQ(res.ntop, 0);
  CHECK_CONTAINS(res.why, "two-level: no slicing into stages fits in memory");
  search_result_clear(&res);
  cm_model_destroy(cm);
}

/* Logical meshes "all" (Alpa's GPT suite): on 4 nodes of 8 V100s a sub-mesh of 2 or 4 nodes
 * also takes logical meshes with mp over its nodes, so the space grows; on one node (no
 * sub-mesh spans islands) it is the same, and both find a plan. Runs two-level on GPT 2.6B. */
static void logical_all(void) {
  spec_model m;
  pp_err err = {0};
  CHECK_EQ(spec_model_load("gpt3-2.6b", &m, &err), PP_OK);
  static const int gpus[2] = {32, 8};
  for (int k = 0; k < 2; k++) {
    spec_cluster c;
    CHECK_EQ(spec_cluster_load("p3.16xlarge", gpus[k], &c, &err), PP_OK);
    cm_model *cm = NULL;
    CHECK_EQ(cm_model_create(&m, &c, NULL, &cm, &err), PP_OK);
    search_result r[2];
    for (int all = 0; all < 2; all++) {
      search_opts o;
      search_opts_default(SEARCH_TWO_LEVEL, 128, &o);
      o.threads = 1, o.top = 3, o.alpa_defaults = 1, o.logical_all = all;
      CHECK_EQ(search_run(cm, &o, &r[all], &err), PP_OK);
    }
    fprintf(stderr, "logical meshes on %d GPUs: single-node %.9g plans, best %.4f s; all %.9g "
            "plans, best %.4f s\n", gpus[k], r[0].space_size, r[0].best_s, r[1].space_size,
            r[1].best_s);
    if (k == 0) CHECK(r[1].space_size > r[0].space_size);
    else CHECK(r[1].space_size == r[0].space_size);
    CHECK(r[0].ntop > 0 && r[1].ntop > 0);
    search_result_clear(&r[0]);
    search_result_clear(&r[1]);
    cm_model_destroy(cm);
  }
}

/* Alpa's layer-cluster grid (layer_sweep: 8 and 16 clusters, the best kept) returns the better
 * of the two runs with 8 and with 16 clusters, and their evaluations together. Runs two-level
 * on GPT 2.6B on 32 V100s. */
static void layer_sweep(void) {
  spec_model m;
  spec_cluster c;
  pp_err err = {0};
  CHECK_EQ(spec_model_load("gpt3-2.6b", &m, &err), PP_OK);
  CHECK_EQ(spec_cluster_load("p3.16xlarge", 32, &c, &err), PP_OK);
  cm_model *cm = NULL;
  CHECK_EQ(cm_model_create(&m, &c, NULL, &cm, &err), PP_OK);
  search_result r[3];
  static const int lc[3] = {8, 16, 0};
  for (int k = 0; k < 3; k++) {
    search_opts o;
    search_opts_default(SEARCH_TWO_LEVEL, 128, &o);
    o.threads = 1, o.top = 3, o.alpa_defaults = 1, o.logical_all = 1;
    o.layer_clusters = lc[k], o.layer_sweep = k == 2;
    CHECK_EQ(search_run(cm, &o, &r[k], &err), PP_OK);
  }
  fprintf(stderr, "layer clusters 8: %.6f s, 16: %.6f s, Alpa's grid: %.6f s\n", r[0].best_s,
          r[1].best_s, r[2].best_s);
  CHECK(r[0].ntop > 0 && r[1].ntop > 0 && r[2].ntop > 0);
  CHECK(r[2].best_s == fmin(r[0].best_s, r[1].best_s));
  CHECK_EQ(r[2].evaluations, r[0].evaluations + r[1].evaluations);
  for (int k = 0; k < 3; k++) search_result_clear(&r[k]);
  cm_model_destroy(cm);
}

/* Two-level on Llama 3 8B, 16 A100s, gbs 64, ZeRO bits z, Alpa's defaults or not. */
static void run_zero(unsigned z, int alpa, search_result *r) {
  spec_model m;
  spec_cluster c;
  pp_err err = {0};
  CHECK_EQ(spec_model_load("llama3-8b", &m, &err), PP_OK);
  CHECK_EQ(spec_cluster_load("dgx-a100", 16, &c, &err), PP_OK);
  cm_model *cm = NULL;
  CHECK_EQ(cm_model_create(&m, &c, NULL, &cm, &err), PP_OK);
  search_opts o;
  search_opts_default(SEARCH_TWO_LEVEL, 64, &o);
  o.threads = 1, o.top = 5, o.alpa_defaults = alpa, o.space.zero = z;
  int rc = search_run(cm, &o, r, &err);
  if (rc) fprintf(stderr, "zero %#x: %s\n", z, err.msg);
  CHECK_EQ(rc, PP_OK);
  cm_model_destroy(cm);
}

static void zero_stages(void) {
  search_result lo, hi, alo, ahi, a23;
  run_zero(3u, 0, &lo);
  run_zero(15u, 0, &hi);
  fprintf(stderr, "ZeRO 0-1: %.9g plans, best %.4f s; ZeRO 0-3: %.9g plans, best %.4f s (%s)\n",
          lo.space_size, lo.best_s, hi.space_size, hi.best_s, hi.ntop ? hi.note : hi.why);
  CHECK(lo.ntop > 0 && hi.ntop > 0);
  CHECK(hi.space_size > lo.space_size);
  CHECK(hi.best_s < lo.best_s * 0.99);
  for (int i = 0; i < lo.ntop; i++) CHECK(lo.top[i].plan.zero <= 1);
  int deep = 0;
  for (int i = 0; i < hi.ntop; i++) {
    const spec_plan *p = &hi.top[i].plan;
    deep += p->zero >= 2;
    if (p->zero >= 2) CHECK_EQ(p->nstages, 1);
  }
  CHECK(deep > 0);
  if (hi.ntop) CHECK(hi.top[0].plan.zero >= 2);
  run_zero(3u, 1, &alo);
  run_zero(15u, 1, &ahi);
  CHECK(alo.space_size > 0);
  CHECK(ahi.space_size == alo.space_size);
  CHECK(ahi.best_s == alo.best_s);
  run_zero(12u, 1, &a23);
  CHECK_EQ(a23.ntop, 0);
  CHECK_CONTAINS(a23.why, "Alpa's GPT suite shards no more than ZeRO 1");
  search_result_clear(&lo);
  search_result_clear(&hi);
  search_result_clear(&alo);
  search_result_clear(&ahi);
  search_result_clear(&a23);
}

int main(void) {
  if (!search__ilp_have_cbc()) {
    fprintf(stderr, "built without CBC: skipped\n");
    return 77;
  }
  dp_vs_brute();
  nothing_fits();
  placement();
  alpa_gpt39b();
  alpa_wide();
  alpa_gpt15b();
  logical_all();
  layer_sweep();
  zero_stages();
  return check_status();
}
