/* The cost model against hand-computed values: ring all-reduce = 2(n-1)/n S/B + 2(n-1) a,
 * NCCL's algorithm choice and busbw across nodes (NVLSTree on 2 x 8 H100 and B200, ring on
 * 4 x 8, tree between GB200 NVL4 partitions, ring on 2 A100 nodes though tree is faster,
 * PAT at one rank per node) and NVLS over 5, 8, 36 and 72 GPUs (the switch's cap),
 * FLOP counts, Korthikanti et al. 2022 activation memory (Table 2), GEMM efficiency at the
 * measured point; monotonicity (more data parallelism never raises memory per GPU, a slower
 * fabric never makes a plan faster); throughput and MFU at another iteration time
 * (cm_throughput, as the simulator's caller uses it); an infeasible plan says by how much;
 * ZeRO-3's per-module gathers stop SC'21 Table 2's plans from scaling (zero3_scaling);
 * sharing: a DP group of 16 nodes crosses the spine of a plain 2:1 fat tree (half the NIC
 * share, over 1.5x slower) but not a rail-optimized one, and DP groups on the NVL256 pod get
 * the 2:1 taper's share; a non-uniform plan laid out as a uniform one scores alike (time
 * within 1%, memory and FLOPs equal), and giving one stage more GPUs moves the bottleneck
 * (nonuniform); the ops the backend runs sum to the model's FLOPs over every rank and
 * microbatch (ops_flops); a uniform pipeline whose stage boundaries alternate between NVLink
 * and the network charges each stage one transfer of each (p2p_boundaries); a group kind is
 * placed at its copy that spans the most NVLink domains (group_copies). */
#include <stdlib.h>

#include "../costmodel/cm_int.h"
#include "check.h"
#include "podplan/cm.h"

static cm_model *make(const char *model, const char *cluster, int gpus, const char *params) {
  spec_model m;
  spec_cluster c;
  cm_params p;
  pp_err err = {0};
  cm_model *cm = NULL;
  if (spec_model_load(model, &m, &err) || spec_cluster_load(cluster, gpus, &c, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    abort();
  }
  cm_params_default(&m, &p);
  if (params && cm_params_apply(&p, params, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    abort();
  }
  if (cm_model_create(&m, &c, &p, &cm, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    abort();
  }
  return cm;
}

static int eval(cm_model *cm, const char *model, const char *cluster, int gpus, const char *plan,
                cm_result *r) {
  spec_model m;
  spec_cluster c;
  spec_plan p;
  pp_err err = {0};
  int rc = spec_model_load(model, &m, &err) || spec_cluster_load(cluster, gpus, &c, &err) ||
           spec_plan_parse(plan, &p, &err) || spec_plan_resolve(&p, &m, &c, &err) ||
           cm_eval(cm, &p, r, &err);
  if (rc) fprintf(stderr, "%s: %s\n", plan, err.msg);
  spec_plan_clear(&p);
  return rc;
}

static void ring_formula(void) {
  /* no ramp (half size 1 byte) and no fixed latency: pure alpha-beta */
  const char *pure = "ring.half_bytes=1,ring.gamma=5,ring.base_us=0";
  cm_model *cm = make("gpt3-175b", "dgx-h100", 1024, pure);
  cm_place pl;
  double S = 1 << 30;
  /* 8 GPUs of one node over NVLink: B = 450 GB/s * 0.82, alpha = 0.6 us */
  cm_place_group(cm, 8, 1, &pl);
  CHECK(pl.levels == (1u << CM_LVL_NVLINK));
  double B = 450e9 * 0.82, a = 0.6e-6, n = 8;
  double want = 2 * (n - 1) / n * S / B + 2 * (n - 1) * a;
  CHECK_NEAR(cm_coll_time(cm, CM_ALL_REDUCE, CM_ALGO_RING, S, &pl), want, 1e-6);
  /* 16 GPUs one per node (a DP group of a TP=8 plan): each gets one of the node's 8 NICs */
  cm_place_group(cm, 16, 8, &pl);
  CHECK_EQ(pl.per_node, 1);
  CHECK_EQ(pl.sharing, 8);
  CHECK(pl.levels & (1u << CM_LVL_NET));
  B = 8 * 400e9 / 8 / 8 * 0.96, a = 2.7e-6, n = 16;
  want = 2 * (n - 1) / n * S / B + 2 * (n - 1) * a;
  CHECK_NEAR(cm_coll_time(cm, CM_ALL_REDUCE, CM_ALGO_RING, S, &pl), want, 1e-6);
  /* all-gather and reduce-scatter move half of an all-reduce */
  CHECK_NEAR(cm_coll_time(cm, CM_ALL_GATHER, CM_ALGO_RING, S, &pl),
             (n - 1) / n * S / B + (n - 1) * a, 1e-6);
  /* NVLS cannot run across NVLink domains (nor all-gather's NVLS: no CollNet); tree and
   * NVLSTree need several domains, NVLSTree two ranks in each; PAT one rank per domain */
  CHECK(cm_coll_time(cm, CM_ALL_REDUCE, CM_ALGO_NVLS, S, &pl) < 0);
  CHECK(cm_coll_time(cm, CM_ALL_GATHER, CM_ALGO_NVLS, S, &pl) < 0);
  CHECK(cm_coll_time(cm, CM_ALL_REDUCE, CM_ALGO_NVLSTREE, S, &pl) < 0);
  CHECK(cm_coll_time(cm, CM_ALL_GATHER, CM_ALGO_PAT, S, &pl) > 0);
  cm_place_group(cm, 8, 1, &pl);
  CHECK(cm_coll_time(cm, CM_ALL_REDUCE, CM_ALGO_TREE, S, &pl) < 0);
  CHECK(cm_coll_time(cm, CM_ALL_GATHER, CM_ALGO_PAT, S, &pl) < 0);
  /* all-gather's NVLS runs in one node but is slower than the ring there (NCCL: "not
   * faster"), so the ring is chosen */
  cm_algo alg = CM_ALGO_NVLS;
  CHECK(cm_coll_time(cm, CM_ALL_GATHER, CM_ALGO_NVLS, S, &pl) >
        cm_coll_time(cm, CM_ALL_GATHER, CM_ALGO_RING, S, &pl));
  cm_coll_best(cm, CM_ALL_GATHER, S, &pl, &alg);
  CHECK_EQ(alg, CM_ALGO_RING);
  cm_model_destroy(cm);
}

/* busbw (GB/s) of a collective of S bytes on the first n GPUs of cluster C (sized to n, or
 * to the next multiple of 8) with algorithm a (or NCCL's choice, written to *chosen, when
 * a < 0), without ramp or fixed latency. */
static double busbw(const char *cluster, int n, cm_coll c, int a, double S, cm_algo *chosen) {
  const char *pure = "ring.half_bytes=1,ring.gamma=5,ring.base_us=0,tree.half_bytes=1,"
                     "tree.gamma=5,tree.base_us=0,nvls.half_bytes=1,nvls.gamma=5,nvls.base_us=0,"
                     "nvlstree.half_bytes=1,nvlstree.gamma=5,nvlstree.base_us=0";
  cm_model *cm = make("gpt3-175b", cluster, (n + 7) / 8 * 8, pure);
  cm_place pl;
  cm_place_group(cm, n, 1, &pl);
  cm_algo got = (cm_algo)a;
  double t = a >= 0 ? cm_coll_time(cm, c, (cm_algo)a, S, &pl) : cm_coll_best(cm, c, S, &pl, &got);
  if (chosen) *chosen = got;
  cm_model_destroy(cm);
  return cm_coll_busbw_factor(c, n) * S / t / 1e9;
}

static void nccl_across_nodes(void) {
  const double G = 1024.0 * 1024 * 1024, S = 64 * G; /* latencies negligible at 64 GiB */
  cm_algo a;
  /* 2 x 8 H100: NCCL's NVLSTree reduces in the node and sends a 1/8 share over each NIC;
   * its busbw is NCCL's per-head cap, 8 NICs x 57.7 GB/s, above the 8 x 48 of the NICs and
   * above the flat ring (NVLink-bound, 450 * 0.82); the hierarchical all-reduce is slower */
  double nt = busbw("dgx-h100", 16, CM_ALL_REDUCE, -1, S, &a);
  CHECK_EQ(a, CM_ALGO_NVLSTREE);
  CHECK_NEAR(nt, 8 * 57.7, 1e-3);
  CHECK_NEAR(busbw("dgx-h100", 16, CM_ALL_REDUCE, CM_ALGO_RING, S, NULL), 450 * 0.82, 1e-3);
  CHECK(busbw("dgx-h100", 16, CM_ALL_REDUCE, CM_ALGO_HIER, S, NULL) < nt);
  /* 2 x 8 B200: the NICs bind: the tree on two nodes sends S per node, busbw 2(n-1)/n x 384 */
  CHECK_NEAR(busbw("dgx-b200", 16, CM_ALL_REDUCE, -1, S, &a), 2 * 15.0 / 16 * 8 * 48, 1e-3);
  CHECK_EQ(a, CM_ALGO_NVLSTREE);
  /* 4 x 8 H100: NCCL's ring runs at bwInter (8 x 48 = 384) above NVLSTree's 8 x 45.5 cap on
   * more than two nodes, so large messages take the ring (NVLink-bound: 369); small ones
   * NVLSTree for its log-depth latency */
  CHECK_NEAR(busbw("dgx-h100", 32, CM_ALL_REDUCE, -1, S, &a), 450 * 0.82, 1e-3);
  CHECK_EQ(a, CM_ALGO_RING);
  busbw("dgx-h100", 32, CM_ALL_REDUCE, -1, 1 << 20, &a);
  CHECK_EQ(a, CM_ALGO_NVLSTREE);
  /* tree between 3 NVLink domains of 4 GB200 (4 NICs each, NVLS off): the busiest domain
   * sends 1.5 buffers, so busbw = 2(n-1)/n * 192 / 1.5 (nccl#1801 measured 234.4) */
  const char *nvl4 =
      "{\"name\":\"nvl4x3\",\"gpu\":\"gb200\",\"gpus\":12,\"gpus_per_node\":4,"
      "\"nvlink\":{\"domain_gpus\":4,\"gbps_per_gpu\":900,\"latency_us\":0.6,"
      "\"in_network_reduce\":false},"
      "\"network\":{\"kind\":\"fat-tree\",\"nic_gbps\":400,\"nics_per_node\":4,"
      "\"latency_us\":2.7,\"switch_radix\":64}}";
  CHECK_NEAR(busbw(nvl4, 12, CM_ALL_REDUCE, CM_ALGO_TREE, S, NULL), 2 * 11.0 / 12 * 192 / 1.5,
             1e-3);
  /* ... and NCCL's tuner still picks the ring there (its tree estimate is 0.92 * 192 / 2) */
  CHECK_NEAR(busbw(nvl4, 12, CM_ALL_REDUCE, -1, S, &a), 192, 1e-3);
  CHECK_EQ(a, CM_ALGO_RING);
  /* the choice is NCCL's, not the fastest: two A100 nodes with 4 x 200G NICs, where NCCL
   * prices ring and tree on NVLink (<= 2 nodes) and picks the ring, which the NICs hold to
   * 96 GB/s (nccl-tests#100 measured 91) while the tree would send only S per node */
  const char *a100 =
      "{\"name\":\"a100x4nic\",\"gpu\":\"a100-80g\",\"gpus\":16,\"gpus_per_node\":8,"
      "\"nvlink\":{\"domain_gpus\":8,\"gbps_per_gpu\":300,\"latency_us\":0.6},"
      "\"network\":{\"kind\":\"fat-tree\",\"nic_gbps\":200,\"nics_per_node\":4,"
      "\"latency_us\":3,\"switch_radix\":40}}";
  double ring = busbw(a100, 16, CM_ALL_REDUCE, -1, S, &a);
  CHECK_EQ(a, CM_ALGO_RING);
  CHECK_NEAR(ring, 4 * 24.0, 1e-3);
  CHECK(busbw(a100, 16, CM_ALL_REDUCE, CM_ALGO_TREE, S, NULL) > 1.5 * ring);
  /* all-gather across nodes: ring (NCCL has no multi-node NVLS all-gather without CollNet);
   * with one rank per node PAT wins small messages (latency log2(N)) and the ring large ones */
  busbw("dgx-h100", 32, CM_ALL_GATHER, -1, S, &a);
  CHECK_EQ(a, CM_ALGO_RING);
  cm_model *cm = make("gpt3-175b", "dgx-h100", 128, NULL);
  cm_place pl;
  cm_place_group(cm, 16, 8, &pl);
  cm_coll_best(cm, CM_ALL_GATHER, 1 << 16, &pl, &a);
  CHECK_EQ(a, CM_ALGO_PAT);
  cm_coll_best(cm, CM_ALL_GATHER, S, &pl, &a);
  CHECK_EQ(a, CM_ALGO_RING);
  cm_model_destroy(cm);
}

static void nvls_domain_size(void) {
  const double S = 64.0 * 1024 * 1024 * 1024;
  cm_algo a;
  /* NVLS busbw grows as 2(n-1)/(n+1) * B * 0.714 (8 H100: 500 GB/s) until the switch's cap,
   * 1.31 * NCCL's NVLS efficiency of the architecture * B: 1.31 * 0.85 * 450 = 501 on
   * Hopper; on 72 GB200 the cap binds, 1.31 * 0.74 * 900 = 872, not 2 * 71/73 * 900 * 0.714
   * = 1250 (measured 835-847, coreweave/nccl-tests#43) */
  CHECK_NEAR(busbw("dgx-h100", 8, CM_ALL_REDUCE, -1, S, &a), 2 * 7.0 / 9 * 450 * 0.714, 1e-3);
  CHECK_EQ(a, CM_ALGO_NVLS);
  CHECK_NEAR(busbw("gb200-nvl72", 72, CM_ALL_REDUCE, -1, S, &a), 1.31 * 0.74 * 900, 1e-3);
  CHECK_EQ(a, CM_ALGO_NVLS);
  /* the same cap holds for 8 B200 and for 36 GB200 of the rack */
  CHECK_NEAR(busbw("dgx-b200", 8, CM_ALL_REDUCE, -1, S, NULL), 1.31 * 0.74 * 900, 1e-3);
  CHECK_NEAR(busbw("gb200-nvl72", 36, CM_ALL_REDUCE, -1, S, NULL), 1.31 * 0.74 * 900, 1e-3);
  /* 5 H100 sit below the cap: 2 * 4/6 * 450 * 0.714 (nccl#1455: 420 measured) */
  CHECK_NEAR(busbw("dgx-h100", 5, CM_ALL_REDUCE, -1, S, NULL), 2 * 4.0 / 6 * 450 * 0.714, 1e-3);
}

static void sharing(void) {
  /* a rail-optimized and a plain fat tree give DP groups the same NIC share, but a group
   * spanning more nodes than a leaf holds crosses the spine and its oversubscription */
  const char *plain =
      "{\"name\":\"plain\",\"gpu\":\"h100-sxm\",\"gpus\":1024,\"gpus_per_node\":8,"
      "\"nvlink\":{\"domain_gpus\":8,\"gbps_per_gpu\":450,\"latency_us\":0.6},"
      "\"network\":{\"kind\":\"fat-tree\",\"rail_optimized\":false,\"nic_gbps\":400,"
      "\"nics_per_node\":8,\"latency_us\":2.7,\"switch_radix\":64,\"oversubscription\":2}}";
  cm_model *rail = make("gpt3-175b", "dgx-h100", 1024, NULL), *flat = make("gpt3-175b", plain, 0, NULL);
  cm_place a, b;
  cm_place_group(rail, 16, 8, &a); /* 16 nodes: one rail leaf holds 32 nodes */
  cm_place_group(flat, 16, 8, &b); /* a plain leaf holds 32 ports / 8 NICs = 4 nodes */
  CHECK(!(a.levels & (1u << CM_LVL_SPINE)));
  CHECK(b.levels & (1u << CM_LVL_SPINE));
  CHECK_NEAR(b.bw_gbps[CM_LVL_SPINE], a.bw_gbps[CM_LVL_NET] / 2, 1e-9);
  double S = 1 << 28;
  CHECK(cm_coll_best(flat, CM_ALL_REDUCE, S, &b, NULL) > 1.5 * cm_coll_best(rail, CM_ALL_REDUCE, S, &a, NULL));
  /* TP=8 and DP groups on the 256-GPU NVLink domain share the 2:1 taper above the node */
  cm_model *nvl = make("gpt3-175b", "h100-nvl256", 256, NULL);
  cm_place dp;
  cm_place_group(nvl, 32, 8, &dp);
  CHECK(dp.levels == (1u << CM_LVL_NVLINK_UP));
  CHECK_NEAR(dp.bw_gbps[CM_LVL_NVLINK_UP], 8 * 450.0 / 2 / 8 * 0.82, 1e-9);
  cm_model_destroy(rail);
  cm_model_destroy(flat);
  cm_model_destroy(nvl);
}

static void flops_and_memory(void) {
  /* GPT-3 175B, one microbatch of one sequence on tp=8: Korthikanti et al. 2022 Table 2 */
  const char *sw = "flash_attention=0,dropout=1";
  const double s = 2048, b = 1, h = 12288, a = 96, L = 96, t = 8, V = 51200, G = 1024.0 * 1024 * 1024;
  struct {
    const char *plan;
    double per_layer; /* bytes */
  } act[] = {
      {"tp=8,mbs=1,gbs=1,recompute=none", s * b * h * (10 + 24 / t + 5 * a * s / (h * t))},
      {"tp=8,mbs=1,gbs=1,sp=1,recompute=none", s * b * h / t * (34 + 5 * a * s / h)},
      {"tp=8,mbs=1,gbs=1,sp=1,recompute=selective", 34 * s * b * h / t},
      {"tp=8,mbs=1,gbs=1,recompute=full", 2 * s * b * h},
  };
  cm_model *cm = make("gpt3-175b", "dgx-a100", 8, sw);
  for (size_t i = 0; i < sizeof act / sizeof act[0]; i++) {
    cm_result r;
    CHECK_EQ(eval(cm, "gpt3-175b", "dgx-a100", 8, act[i].plan, &r), 0);
    CHECK_NEAR(r.mem.activations_gib, L * act[i].per_layer / G, 1e-9);
  }
  /* FLOPs: 6 N per token plus causal attention = 72 B s l h^2 (1 + s/12h + V/12lh) up to the
   * norms; the SC'21 count with full recompute is 96 B s l h^2 (1 + s/6h + V/16lh) */
  cm_result r;
  CHECK_EQ(eval(cm, "gpt3-175b", "dgx-a100", 8, "tp=8,mbs=1,gbs=8,recompute=full", &r), 0);
  double B = 8;
  CHECK_NEAR(r.model_flops, 72 * B * s * L * h * h * (1 + s / (12 * h) + V / (12 * L * h)), 1e-3);
  CHECK_NEAR(r.sc21_flops, 96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h)), 1e-12);
  CHECK(r.hfu > r.mfu);
  /* breakdown adds up to the iteration */
  const cm_breakdown *k = &r.t;
  CHECK_NEAR(k->compute_s + k->tp_comm_s + k->cp_comm_s + k->ep_comm_s + k->pp_bubble_s +
                 k->pp_p2p_s + k->dp_comm_s + k->optimizer_s,
             r.iter_time_s, 1e-9);
  /* throughput at another iteration time (as simulate uses it): MFU = model FLOPs / (time *
   * GPUs * bf16 peak of the A100, 312 TFLOP/s); twice the time halves tokens/s and MFU */
  spec_plan pl;
  pp_err perr = {0};
  CHECK_EQ(spec_plan_parse("tp=8,mbs=1,gbs=8,recompute=full", &pl, &perr), PP_OK);
  cm_result at = r;
  cm_throughput(cm, &pl, 2 * r.iter_time_s, &at);
  CHECK_NEAR(at.mfu, r.model_flops / (2 * r.iter_time_s * 8 * 312e12), 1e-9);
  CHECK_NEAR(at.mfu, r.mfu / 2, 1e-12);
  CHECK_NEAR(at.tokens_per_s, 8 * s / (2 * r.iter_time_s), 1e-12);
  CHECK_NEAR(at.hfu / at.mfu, r.hfu / r.mfu, 1e-12);
  spec_plan_clear(&pl);
  cm_model_destroy(cm);

  /* the GEMM default reproduces the measured 8192^3 bf16 point on an H200 (78-81%) */
  cm_model *h200 = make("gpt3-175b",
                        "{\"name\":\"one\",\"gpu\":\"h200\",\"gpus\":1,\"gpus_per_node\":1}", 0,
                        NULL);
  double eff;
  cm_gemm_time(h200, 8192, 8192, 8192, &eff);
  CHECK(eff > 0.78 && eff < 0.82);
  double small;
  cm_gemm_time(h200, 256, 1024, 128, &small);
  CHECK(small < eff / 2); /* thin shapes leave the SMs idle */
  cm_model_destroy(h200);
}

static void monotone(void) {
  /* more data parallelism never raises memory per GPU (ZeRO 0..3, with and without pp) */
  const char *plans[] = {"tp=8,pp=4,mbs=1,gbs=512,zero=0", "tp=8,pp=4,mbs=1,gbs=512,zero=1",
                         "tp=4,pp=1,mbs=2,gbs=512,zero=3,recompute=full",
                         "tp=8,pp=8,vpp=2,mbs=1,gbs=512,zero=1,sp=1,recompute=selective"};
  for (size_t i = 0; i < sizeof plans / sizeof plans[0]; i++) {
    double prev = 1e300;
    for (int dp = 1; dp <= 16; dp *= 2) {
      int mp = strstr(plans[i], "pp=8") ? 64 : strstr(plans[i], "pp=4") ? 32 : 4;
      cm_model *cm = make("gpt3-39b", "dgx-h100", mp * dp, NULL);
      cm_result r;
      CHECK_EQ(eval(cm, "gpt3-39b", "dgx-h100", mp * dp, plans[i], &r), 0);
      CHECK(r.mem_gib_per_gpu <= prev + 1e-9);
      prev = r.mem_gib_per_gpu;
      cm_model_destroy(cm);
    }
  }
  /* a slower fabric never makes a plan faster (one switch radix throughout: left out, it
   * would follow the NIC generation, 40 ports for HDR 200G, 64 for NDR 400G) */
  const char *fabric = "{\"name\":\"f\",\"gpu\":\"h100-sxm\",\"gpus\":512,\"gpus_per_node\":8,"
                       "\"nvlink\":{\"domain_gpus\":8,\"gbps_per_gpu\":%g,\"latency_us\":%g},"
                       "\"network\":{\"kind\":\"fat-tree\",\"rail_optimized\":true,\"nic_gbps\":%g,"
                       "\"nics_per_node\":8,\"latency_us\":%g,\"oversubscription\":%g,"
                       "\"switch_radix\":64}}";
  const double steps[][5] = {{450, 0.6, 400, 2.7, 1}, {450, 0.6, 200, 2.7, 1},
                             {300, 0.6, 200, 2.7, 1}, {300, 1.5, 200, 5, 1},
                             {300, 1.5, 200, 5, 3},   {100, 3, 100, 10, 4}};
  const char *p2[] = {"tp=8,pp=8,mbs=1,gbs=512,sp=1,recompute=selective",
                      "tp=2,pp=2,mbs=2,gbs=512,zero=1", "tp=4,pp=1,cp=2,mbs=1,gbs=512,zero=3",
                      "tp=8,pp=16,vpp=3,mbs=1,gbs=512,zero=1"};
  for (size_t i = 0; i < sizeof p2 / sizeof p2[0]; i++) {
    double prev = 0;
    for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
      char js[1024];
      snprintf(js, sizeof js, fabric, steps[k][0], steps[k][1], steps[k][2], steps[k][3],
               steps[k][4]);
      cm_model *cm = make("gpt3-175b", js, 0, NULL);
      cm_result r;
      CHECK_EQ(eval(cm, "gpt3-175b", js, 0, p2[i], &r), 0);
      CHECK(r.iter_time_s >= prev);
      prev = r.iter_time_s;
      cm_model_destroy(cm);
    }
  }
}

static void infeasible(void) {
  cm_model *cm = make("gpt3-175b", "dgx-h100", 8, NULL);
  cm_result r;
  CHECK_EQ(eval(cm, "gpt3-175b", "dgx-h100", 8, "tp=8,mbs=1,gbs=8", &r), 0);
  CHECK_EQ(r.feasible, 0);
  /* 175B / 8 GPUs x 18 bytes per parameter alone is ~366 GiB */
  CHECK(r.mem_excess_gib > 250);
  CHECK_NEAR(r.mem_excess_gib, r.mem_gib_per_gpu - 80, 1e-9);
  CHECK(r.mem.optimizer_gib > r.mem.weights_gib);
  cm_model_destroy(cm);
}

/* A non-uniform plan laid out as a uniform one is scored like it. */
static void nonuniform(void) {
  cm_model *cm = make("gpt3-1.3b", "dgx-h100", 16, NULL);
  cm_result u, n;
  CHECK_EQ(eval(cm, "gpt3-1.3b", "dgx-h100", 16, "tp=4,pp=2,dp=2,mbs=1,gbs=64,zero=1", &u), 0);
  const char *nu = "{\"gbs\":64,\"microbatches\":32,\"zero\":1,\"stages\":["
                   "{\"layers\":[0,12],\"gpus\":[0,1,2,3,4,5,6,7],\"tp\":4,\"dp\":2},"
                   "{\"layers\":[12,24],\"gpus\":[8,9,10,11,12,13,14,15],\"tp\":4,\"dp\":2}]}";
  CHECK_EQ(eval(cm, "gpt3-1.3b", "dgx-h100", 16, nu, &n), 0);
  CHECK_NEAR(n.iter_time_s, u.iter_time_s, 0.01);
  CHECK_NEAR(n.mem_gib_per_gpu, u.mem_gib_per_gpu, 1e-6);
  CHECK_NEAR(n.model_flops, u.model_flops, 1e-12);
  /* giving the second stage more GPUs (tp=8) makes it faster per microbatch: the pipeline's
   * slowest stage becomes the first */
  const char *skew = "{\"gbs\":64,\"microbatches\":32,\"zero\":1,\"stages\":["
                     "{\"layers\":[0,12],\"gpus\":[0,1,2,3],\"tp\":4},"
                     "{\"layers\":[12,24],\"gpus\":[8,9,10,11,12,13,14,15],\"tp\":8}]}";
  cm_result k;
  CHECK_EQ(eval(cm, "gpt3-1.3b", "dgx-h100", 16, skew, &k), 0);
  CHECK_EQ(k.bottleneck_stage, 0);
  cm_model_destroy(cm);
}

/* Pipeline transfers where the boundaries differ: GPT-3 175B on 256 GB200s (NVLink partitions
 * of 64), tp=2 pp=8 dp=16 interleaved (v = 12): stage i holds GPUs [32i, 32i+32), so the
 * boundaries 0>1, 2>3, 4>5, 6>7 stay in a partition and 1>2, 3>4, 5>6 and 7>0 (the next
 * chunk) cross the network. Each stage has one of each: the p2p charged is pp_p2p_per_mb (2)
 * x (m v + P - 2) x the mean of the two transfer times (t_in: GPUs 0 and 32; t_out: GPUs 32
 * and 64), each 2 x 2048 x 12288 x 2 / tp bytes. Stage 0 to 1
 * alone (before) charged t_in twice. On 64 GPUs (one partition) with dp=4 every boundary
 * is inside it and the charge is 2 x (m v + P - 2) x t (GPUs 0 and 8). */
static void p2p_boundaries(void) {
  cm_model *cm = make("gpt3-175b", "gb200-nvl72", 256, NULL);
  cm_result r;
  const char *plan = "tp=2,pp=8,dp=16,mbs=2,gbs=1536,vpp=12,sp=1,recompute=none,zero=1,"
                     "schedule=interleaved";
  CHECK_EQ(eval(cm, "gpt3-175b", "gb200-nvl72", 256, plan, &r), 0);
  double bytes = 2.0 * 2048 * 12288 * 2 / 2;
  cm_place in, out;
  int pin[2] = {0, 32}, pair[2] = {32, 64};
  cm_place_list(cm, pin, 2, &in);
  cm_place_list(cm, pair, 2, &out);
  double t_in = cm_coll_best(cm, CM_SEND_RECV, bytes, &in, NULL);
  double t_out = cm_coll_best(cm, CM_SEND_RECV, bytes, &out, NULL);
  CHECK(t_out > 5 * t_in); /* the NIC against NVLink */
  double m = 1536 / 16 / 2, v = 12, P = 8;
  CHECK_NEAR(r.t.pp_p2p_s, 2 * (m * v + P - 2) * (t_in + t_out) / 2, 1e-9);
  cm_model_destroy(cm);
  cm = make("gpt3-175b", "gb200-nvl72", 64, NULL);
  const char *one = "tp=2,pp=8,dp=4,mbs=2,gbs=1536,vpp=12,sp=1,recompute=none,zero=1,"
                    "schedule=interleaved";
  CHECK_EQ(eval(cm, "gpt3-175b", "gb200-nvl72", 64, one, &r), 0);
  int p8[2] = {0, 8};
  cm_place_list(cm, p8, 2, &in);
  double t = cm_coll_best(cm, CM_SEND_RECV, bytes, &in, NULL);
  m = 1536 / 4 / 2;
  CHECK_NEAR(r.t.pp_p2p_s, 2 * (m * v + P - 2) * t, 1e-9);
  cm_model_destroy(cm);
}

/* Groups placed at their slowest copy: CP pairs 8 GPUs apart (tp=8, cp=2) tile 144 GPUs of
 * two NVL72 racks, and the copy of GPUs 64-71 with 72-79 straddles the racks: the kind's
 * placement spans 2 domains with 1 member in each (the network), where the copy at GPU 0
 * would stay in one rack; on 128 GPUs (partitions of 64) every copy stays in one, as a TP
 * group of 8 does on 144. */
static void group_copies(void) {
  cm_model *cm = make("llama3-8b", "gb200-nvl72", 144, NULL);
  cm_place pl;
  cm_place_group(cm, 2, 8, &pl);
  CHECK_EQ(pl.domains, 2);
  CHECK_EQ(pl.per_domain, 1);
  CHECK(pl.levels & (1u << CM_LVL_NET));
  cm_place_group(cm, 8, 1, &pl);
  CHECK_EQ(pl.domains, 1);
  cm_model_destroy(cm);
  cm = make("llama3-8b", "gb200-nvl72", 128, NULL);
  cm_place_group(cm, 2, 8, &pl);
  CHECK_EQ(pl.domains, 1);
  CHECK_EQ(pl.per_domain, 2);
  CHECK(!(pl.levels & (1u << CM_LVL_NET)));
  cm_model_destroy(cm);
}

/* The ops the backend runs carry the model's FLOPs: summed over every rank and microbatch
 * (recomputation left out) they make cm_eval's model FLOPs, and their memory-bound and
 * compute parts are what the layer profile prices. */
static void ops_flops(void) {
  struct {
    const char *model, *plan, *params;
    int gpus;
  } cases[] = {
      {"gpt3-1.3b", "tp=2,dp=4,mbs=2,gbs=32,recompute=full", NULL, 8},
      {"llama3-8b", "tp=4,cp=2,mbs=1,gbs=8,sp=1,recompute=selective", NULL, 8},
      {"mixtral-8x7b", "tp=2,ep=4,mbs=1,gbs=16,sp=1", NULL, 8},
      {"gpt3-1.3b", "tp=8,mbs=1,gbs=8", "flash_attention=0", 8},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cm_model *cm = make(cases[i].model, "dgx-h100", cases[i].gpus, cases[i].params);
    cm_result r;
    spec_model m;
    spec_cluster c;
    spec_plan p;
    pp_err err = {0};
    CHECK_EQ(spec_model_load(cases[i].model, &m, &err), PP_OK);
    CHECK_EQ(spec_cluster_load("dgx-h100", cases[i].gpus, &c, &err), PP_OK);
    CHECK_EQ(spec_plan_parse(cases[i].plan, &p, &err), PP_OK);
    CHECK_EQ(spec_plan_resolve(&p, &m, &c, &err), PP_OK);
    CHECK_EQ(cm_eval(cm, &p, &r, &err), PP_OK);
    cm_lop ops[CM_LOPS_MAX];
    double per_mb = 0, rec = 0;
    for (int part = 0; part < 3; part++)
      for (int fwd = 0; fwd < 2; fwd++) {
        int n = cm_part_ops(cm, (cm_part)part, p.tp, p.cp, p.ep, p.mbs, p.sp, p.recompute, fwd,
                            ops);
        CHECK(n > 0 && n <= CM_LOPS_MAX);
        for (int k = 0; k < n; k++) {
          double fl = cm_lop_flops(&ops[k]) * (part == CM_PART_LAYER ? m.layers : 1);
          if (ops[k].recompute) rec += fl;
          else per_mb += fl;
        }
      }
    double ranks = p.tp * p.cp * p.dp, mbs = spec_plan_microbatches(&p);
    /* 6N also counts the norms' and biases' parameters, which no GEMM multiplies (~1e-4) */
    CHECK_NEAR(per_mb * ranks * mbs, r.model_flops, 1e-3);
    if (p.recompute != SPEC_RECOMPUTE_NONE) CHECK(rec > 0);
    /* the layer's GEMMs priced one by one make the profile's compute with attention and
     * memory-bound ops: a real part of it, never all of it (forward) */
    cm_layer_profile pr;
    CHECK_EQ(cm_layer_profile_get(cm, p.tp, p.cp, p.ep, p.dp, p.mbs, p.sp, p.recompute, &pr),
             PP_OK);
    int n = cm_part_ops(cm, CM_PART_LAYER, p.tp, p.cp, p.ep, p.mbs, p.sp, p.recompute, 1, ops);
    double gemms = 0;
    for (int k = 0; k < n; k++)
      if (ops[k].kind == CM_LOP_GEMM)
        gemms += ops[k].batch * cm_gemm_time(cm, ops[k].m, ops[k].n, ops[k].k, NULL);
    if (!(gemms > 0.2 * pr.fwd_s && gemms < pr.fwd_s))
      fprintf(stderr, "%s %s: GEMMs %g s of the layer's %g s\n", cases[i].model, cases[i].plan,
              gemms, pr.fwd_s);
    CHECK(gemms > 0.2 * pr.fwd_s && gemms < pr.fwd_s);
    spec_plan_clear(&p);
    cm_model_destroy(cm);
  }
}

/* ZeRO-3 as DeepSpeed v0.3 runs it (zero3.sync=1, zero3.grad_allreduce=1), on SC'21 Table 2's
 * GPT-175B plans (dgx-a100, gbs 1536, full recompute, 2021 software): doubling the GPUs from
 * 768 to 1536 (mbs 2 -> 1) no longer halves the iteration time, because every module's gathers
 * cross all ranks and their cost per rank does not shrink; disabling prefetch
 * (zero3.live_numel below every parameter) exposes more, keeping every parameter whole
 * (zero3.persist_numel above every parameter) exposes only the gradient reductions; a
 * reduce-scatter of the buckets changes the exposed time (at 1536 ranks NCCL runs the bucket's
 * all-reduce as a tree, log-depth latency, but a reduce-scatter only as a ring of n-1 steps, so
 * neither is faster for every bucket size), and today's DeepSpeed
 * (zero3.sync=0: the pipelined path) less than v0.3's device synchronisation per module;
 * without prefetch and reuse (zero3.prefetch=0, DeepSpeed's off-by-one trace) both paths
 * expose more; there v0.3's host loop over the ranks before each gather adds exactly
 * gathers x ranks x zero3.rank_us, and nothing on today's path;
 * cm_zero3_units lists GPT-3 175B's four gathered matrices per layer. */
/* GPT-3 175B's exposed DP time on 1536 A100s with the parameters sw and then variant. */
static double zero3_dp_1536(const char *sw, const char *variant, const char *plan) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s%s", sw, variant);
  cm_model *cm = make("gpt3-175b", "dgx-a100", 1536, buf);
  cm_result r;
  CHECK_EQ(eval(cm, "gpt3-175b", "dgx-a100", 1536, plan, &r), 0);
  cm_model_destroy(cm);
  return r.t.dp_comm_s;
}

static void zero3_scaling(void) {
  const char *sw = "flash_attention=0,dropout=1,overlap_grad_reduce=0,overlap_param_gather=0,"
                   "grad_comm_bytes=2,zero3.sync=1,zero3.grad_allreduce=1";
  const char *plans[] = {"dp=384,mbs=4,gbs=1536,recompute=full,zero=3",
                         "dp=768,mbs=2,gbs=1536,recompute=full,zero=3",
                         "dp=1536,mbs=1,gbs=1536,recompute=full,zero=3"};
  int gpus[] = {384, 768, 1536};
  double t[3], dp[3];
  for (int i = 0; i < 3; i++) {
    cm_model *cm = make("gpt3-175b", "dgx-a100", gpus[i], sw);
    cm_result r;
    CHECK_EQ(eval(cm, "gpt3-175b", "dgx-a100", gpus[i], plans[i], &r), 0);
    t[i] = r.iter_time_s, dp[i] = r.t.dp_comm_s;
    cm_model_destroy(cm);
  }
  CHECK(dp[0] < dp[1] && dp[1] < dp[2]);
  CHECK(t[1] / t[2] < 1.8); /* the whole-model collective of before gave 1.93 */
  const char *variants[] = {"", ",zero3.live_numel=1e8", ",zero3.persist_numel=1e13",
                            ",zero3.grad_allreduce=0", ",zero3.sync=0", ",zero3.prefetch=0",
                            ",zero3.sync=0,zero3.prefetch=0"};
  double v[7];
  for (int i = 0; i < 7; i++) v[i] = zero3_dp_1536(sw, variants[i], plans[2]);
  CHECK(v[1] > v[0] * 1.2);
  CHECK(v[2] < v[0] && v[2] > 0);
  CHECK(v[3] != v[0]);
  CHECK(v[4] < v[0]);
  CHECK(v[5] > v[1]); /* no prefetch and no reuse: more than no prefetch alone */
  CHECK(v[6] > v[4]);
  /* v0.3's loop over the ranks before each gather (zero3.rank_us per rank): without prefetch
   * every gather is waited for with its loop, 96 layers x 4 matrices x 3 passes (forward,
   * recomputed forward, backward) x 1536 ranks x 4 us; today's path has no such loop */
  const char *host[] = {",zero3.prefetch=0,zero3.rank_us=0", ",zero3.prefetch=0,zero3.rank_us=4",
                        ",zero3.sync=0,zero3.rank_us=0", ",zero3.sync=0,zero3.rank_us=4"};
  double hv[4];
  for (int i = 0; i < 4; i++) hv[i] = zero3_dp_1536(sw, host[i], plans[2]);
  CHECK_NEAR(hv[1] - hv[0], 96 * 4 * 3 * 1536 * 4e-6, 1e-9);
  CHECK_EQ(hv[3] == hv[2], 1);
  /* the units it gathers per layer: QKV 3h^2, projection h^2, fc1 and fc2 4h^2 each (tp=1) */
  cm_model *cm = make("gpt3-175b", "dgx-a100", 8, NULL);
  int ids[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  cm_stage_cfg cfg = {1, 1, 8, 1, 1, 0, SPEC_RECOMPUTE_FULL};
  cm_stage_coef co;
  pp_err err = {0};
  CHECK_EQ(cm_stage_coef_get(cm, &cfg, ids, 8, &co, &err), 0);
  cm_z3_unit u[CM_Z3_UNITS];
  double h = 12288;
  CHECK_EQ(cm_zero3_units(cm, &co, u), 4);
  CHECK_DEQ(u[0].numel, 3 * h * h);
  CHECK_DEQ(u[1].numel, h * h);
  CHECK_DEQ(u[2].numel, 4 * h * h);
  CHECK_DEQ(u[3].numel, 4 * h * h);
  CHECK(u[0].gathered && u[3].count == 1 && !u[3].expert);
  cm_model_destroy(cm);
  fprintf(stderr, "zero3: 175B %.1f/%.1f/%.1f s; exposed %.1f, no prefetch %.1f, whole %.1f, "
                  "reduce-scatter %.1f, today's %.1f, trace off by one %.1f (today's %.1f) s\n",
          t[0], t[1], t[2], v[0], v[1], v[2], v[3], v[4], v[5], v[6]);
}

/* The fingerprint studies and searches key their results by (cm_fingerprint.c) sees a change
 * of every parameter of the table through its probes' predictions alone (cm__fingerprint_with
 * applies it after the defaults were mixed in): a 0/1 switch flipped, an integer moved by one,
 * a real multiplied and divided by 4 within its bounds (either must change the hash), the
 * ZeRO-3 thresholds moved past a whole unit of the probes' models; the model refuses none of
 * the probes, and with no change the hash is cm_fingerprint()'s. The parameters no probe can
 * read are named below with why. */
static void fingerprint(void) {
  static const char *unread[] = {
      "hier.half_bytes", "hier.gamma", "hier.base_us", /* no collective's choice is HIER */
  };
  static const struct {
    const char *name;
    double value;
  } moved[] = {
      /* GPT-3 6.7B's smallest gathered unit is h^2 = 16.8M elements */
      {"zero3.persist_numel", 1e8}, /* every unit stays whole */
      {"zero3.live_numel", 1e7},    /* below one unit: no prefetch */
      {"zero3.reuse_numel", 0},     /* nothing kept from the recomputed forward */
  };
  int refused = -1;
  unsigned long long base = cm__fingerprint_with(NULL, &refused);
  CHECK(base == cm_fingerprint());
  CHECK_EQ(refused, 0);
  cm_params def;
  spec_model m;
  pp_err err = {0};
  CHECK_EQ(spec_model_load("gpt3-175b", &m, &err), PP_OK);
  cm_params_default(&m, &def);
  int escaped = 0;
  for (size_t k = 0; k < cm_params_count(); k++) {
    const char *name = cm_params_name(k);
    double v = 0, lo = 0, hi = 0, w[2];
    int is_int = 0, listed = 0, n = 2, seen = 0;
    CHECK_EQ(cm_params_get(&def, name, &v), PP_OK);
    CHECK_EQ(cm_params_bounds(name, &lo, &hi, &is_int), PP_OK);
    if (is_int)
      w[0] = hi - lo == 1 ? lo + hi - v : v + 1 <= hi ? v + 1 : v - 1, n = 1;
    else
      w[0] = fmin(v == 0 ? lo + 0.01 * (hi - lo) : 4 * v, hi), w[1] = fmax(v / 4, lo);
    for (size_t u = 0; u < sizeof moved / sizeof moved[0]; u++)
      if (!strcmp(moved[u].name, name)) w[0] = moved[u].value, n = 1;
    for (size_t u = 0; u < sizeof unread / sizeof unread[0]; u++)
      listed |= !strcmp(unread[u], name);
    for (int j = 0; j < n; j++) {
      char set[96];
      int r = -1;
      snprintf(set, sizeof set, "%s=%.17g", name, w[j]);
      seen |= cm__fingerprint_with(set, &r) != base;
      CHECK_EQ(r, 0);
    }
    if (seen == listed) {
      fprintf(stderr, "fingerprint: %s (%g) %s\n", name, v,
              listed ? "is listed as unread but changes it" : "escapes it");
      escaped++;
    }
  }
  CHECK_EQ(escaped, 0);
}

int main(void) {
  fingerprint();
  p2p_boundaries();
  group_copies();
  zero3_scaling();
  ops_flops();
  nonuniform();
  ring_formula();
  nccl_across_nodes();
  nvls_domain_size();
  sharing();
  flops_and_memory();
  monotone();
  infeasible();
  return check_status();
}
