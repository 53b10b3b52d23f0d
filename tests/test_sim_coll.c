/* The simulator's collectives on real SimGrid runs (sim_collectives): the fast form of every
 * algorithm against its step form (different code: one flow per successor against every ring
 * step; NVLS streams against a chunk pipeline; a tree's edge flows against its chunk pipeline
 * in rounds; node-aggregated all-to-all against every pair in chunks; PAT's steps at once
 * against its steps in turn, in chunks; NVLSTree's two pieces over the whole buffer against
 * chunk by chunk), each alone on the cost
 * model's time where the cost model prices it, and hand-computed max-min answers where groups
 * share links: NVLS on the h100-nvl256 pod alone and as 8 groups through the 2:1 NVLink Switch
 * taper, a tree all-reduce over 8 nodes under 4 oversubscribed leaves alone and as 8 trees at
 * once (NCCL's double binary tree's edges), a PAT all-gather over the same leaves alone and as
 * 8 groups at once (its distance-reversed Bruck steps), an expert-parallel all-to-all across two nodes'
 * NICs, DP pairs through one NIC, TP and DP on the taper, and DP pairs through an
 * oversubscribed leaf uplink (the spine level). Hand answers use zero link latencies (CM02,
 * max-min sharing) and a ramp of 1 (half size 1 byte, gamma 5); a ring's messages are counted
 * where its channels to one successor are one flow. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "podplan/sim.h"
#include "simtest.h"

/* Alpha-beta parameters for hand answers: no ramp (half size 1 byte, gamma 5) and no fixed
 * latency for ring and tree; NVLS keeps its 4 us fixed latency (the step form takes its
 * pipeline fill out of the latency; a zero latency would leave nothing to take it from). */
static cm_params pure(void) {
  cm_params p;
  pp_err err = {0};
  cm_params_default(NULL, &p);
  int rc = cm_params_apply(&p, "ring.half_bytes=1,ring.gamma=5,ring.base_us=0,"
                               "tree.half_bytes=1,tree.gamma=5,tree.base_us=0,"
                               "nvls.half_bytes=1,nvls.gamma=5,nvls.base_us=4,"
                               "pat.half_bytes=1,pat.gamma=5,pat.base_us=0", &err);
  assert(rc == PP_OK);
  return p;
}

static void run(const spec_cluster *c, const cm_params *p, sim_coll_job *j, int n,
                sim_fidelity f) {
  pp_err err = {0};
  cm_model *cm = coll_model(c, p);
  int rc = sim_collectives(cm, j, n, f, &err);
  if (rc) fprintf(stderr, "%s: %s\n", c->name, err.msg);
  CHECK_EQ(rc, PP_OK);
  cm_model_destroy(cm);
}

/* The cost model's time of a job on its GPUs. */
static double cm_time(const spec_cluster *c, const cm_params *p, const sim_coll_job *j) {
  cm_model *cm = coll_model(c, p);
  cm_place pl;
  cm_place_list(cm, j->gpus, j->n, &pl);
  double t = cm_coll_time(cm, j->coll, j->algo, j->bytes, &pl);
  cm_model_destroy(cm);
  return t;
}

/* A plain (not rail-optimized) fat tree of 8-GPU H100 nodes with one 400 Gb/s NIC each;
 * radix 0: one leaf; else radix-port switches at 2:1 oversubscription. */
static spec_cluster one_nic(const char *name, int gpus, int radix) {
  char json[512], sw[64] = "";
  if (radix) snprintf(sw, sizeof sw, "\"switch_radix\":%d,\"oversubscription\":2,", radix);
  snprintf(json, sizeof json,
           "{\"name\":\"%s\",\"gpu\":\"h100-sxm\",\"gpus\":%d,\"gpus_per_node\":8,"
           "\"nvlink\":{\"domain_gpus\":8,\"gbps_per_gpu\":450,\"latency_us\":0.6},"
           "\"network\":{\"kind\":\"fat-tree\",\"rail_optimized\":false,\"nic_gbps\":400,"
           "\"nics_per_node\":1,%s\"latency_us\":2.7}}",
           name, gpus, sw);
  spec_cluster c;
  pp_err err = {0};
  CHECK_EQ(spec_cluster_load(json, 0, &c, &err), PP_OK);
  return c;
}

/* ---- fast against step ------------------------------------------------------------------ */

typedef struct set {
  const char *what;   /* what runs, for the failure message */
  int njobs;
  sim_coll_job jobs[8];
  int alone_cm;       /* 1: one job alone where the cost model prices it: both forms on its time */
} set;

/* On every preset fabric (64 GPUs; 144 = two NVL72 racks on gb200-nvl72), each set below runs
 * at both fidelities and every job's fast time must be within 2% of its step time. The sets
 * (S = 64 MiB per rank, GPUs 0-7 = the first node, 8 nodes of 8 on the 8-GPU-node fabrics, 16
 * trays of 4 on gb200, 16 hosts of 4 chips on the torus):
 *   ring all-reduce, all-gather, reduce-scatter on GPUs 0-7; ring broadcast on 0-7;
 *   all-to-all on 0-7, on all 64 (across the NICs on the DGX fabrics, across the pod's
 *   NVLink Switch on h100-nvl256 and gb200, across the torus) and on 0-11 (8 + 4 GPUs on two
 *   nodes where nodes have 8: the fast form sends every pair, as the step form in one round);
 *   ring all-reduce on all 64; 8 ring all-reduces at once on the groups {t, t+8, ..., t+56};
 *   tree all-reduce on all 64 (along NCCL's tree on the DGX fabrics, 8 domains of 8: 16 tree
 *   channels, chains of 8; in one NVLink domain (h100-nvl256, gb200) and on the torus it falls
 *   back to ring flows with the tree's volume); on gb200 also on all 144 (two NVL72 racks: 64
 *   channels, chains of 72);
 *   hierarchical all-reduce on all 64 (8 domains on the DGX fabrics; on the single-domain and
 *   torus fabrics it falls back to a ring all-reduce);
 *   PAT all-gather and reduce-scatter on {0, 8, ..., 56} (one GPU per node: PAT's exchange on
 *   the DGX fabrics, where the cost model prices it; inside one NVLink domain (h100-nvl256,
 *   gb200) and on the torus it falls back to a ring);
 *   NVLSTree all-reduce on all 64 (dgx-h100, dgx-b200: NVLS in each of the 8 nodes beside 8
 *   trees over the nodes, one per position; elsewhere ring flows with its volume: no NVLS on
 *   dgx-a100 and the torus, one domain on h100-nvl256) and on gb200 on all 144 (two NVL72
 *   racks: NVLS in each rack through the tray relays and the rack's, 72 trees of 2);
 *   where the switches reduce (dgx-h100, dgx-b200, h100-nvl256, gb200): NVLS all-reduce on
 *   GPUs 0-7 alone, and (h100-nvl256, gb200: one NVLink domain) on the 8 groups
 *   {t, t+8, ..., t+56} at once, through the node relays and the domain relay.
 * Where one job runs alone on an algorithm the cost model prices (ring, broadcast, tree and
 * NVLSTree across NVLink domains, NVLS, PAT, and all-to-all where the NVLink domain is the
 * node: its cm_coll_time, which must then give a time), both forms must take that time
 * within 1%. Not the all-to-all on the torus (the cost model counts average hops)
 * nor in multi-node NVLink domains, where the cost model puts only the node's own parts on a
 * GPU's NVLink port, though its parts for the domain's other nodes cross it too (gb200, GPUs
 * 0-7 on two trays: simulated 0.120 ms, cost model 0.071 ms). */
static void fast_vs_step(void) {
  const char *fabrics[] = {"dgx-a100", "dgx-h100", "dgx-b200", "h100-nvl256", "gb200-nvl72",
                           "tpu-v4-torus"};
  double S = 64.0 * 1024 * 1024;
  int in8[8], dp[8][8], all[64], all144[144];
  for (int i = 0; i < 144; i++) all144[i] = i;
  for (int i = 0; i < 8; i++) in8[i] = i;
  for (int t = 0; t < 8; t++)
    for (int d = 0; d < 8; d++) dp[t][d] = t + 8 * d;
  for (int i = 0; i < 64; i++) all[i] = i;
  for (size_t f = 0; f < sizeof fabrics / sizeof fabrics[0]; f++) {
    int gpus = strcmp(fabrics[f], "gb200-nvl72") == 0 ? 144 : 64;
    spec_cluster c = cluster(fabrics[f], gpus);
    int nvls = c.nvlink.in_network_reduce, one_domain = c.nvlink.domain_gpus >= 64;
    set sets[24];
    int ns = 0;
    sets[ns++] = (set){"ring all-reduce on 0-7", 1, {{CM_ALL_REDUCE, CM_ALGO_RING, S, 8, in8}}, 1};
    sets[ns++] = (set){"ring all-gather on 0-7", 1, {{CM_ALL_GATHER, CM_ALGO_RING, S, 8, in8}}, 1};
    sets[ns++] = (set){"ring reduce-scatter on 0-7", 1,
                       {{CM_REDUCE_SCATTER, CM_ALGO_RING, S, 8, in8}}, 1};
    sets[ns++] = (set){"ring broadcast on 0-7", 1, {{CM_BROADCAST, CM_ALGO_RING, S, 8, in8}}, 1};
    int torus = c.network.kind == SPEC_NET_TORUS;
    int a2a_cm = !torus && c.nvlink.domain_gpus == c.gpus_per_node;
    sets[ns++] = (set){"all-to-all on 0-7", 1, {{CM_ALL_TO_ALL, CM_ALGO_RING, S, 8, in8}}, a2a_cm};
    sets[ns++] = (set){"all-to-all on 0-63", 1, {{CM_ALL_TO_ALL, CM_ALGO_RING, S, 64, all}}, a2a_cm};
    sets[ns++] = (set){"all-to-all on 0-11 (nodes holding unequal counts on the 8-GPU-node "
                       "fabrics)", 1, {{CM_ALL_TO_ALL, CM_ALGO_RING, S, 12, all}}, 0};
    sets[ns++] = (set){"ring all-reduce on 0-63", 1, {{CM_ALL_REDUCE, CM_ALGO_RING, S, 64, all}}, 1};
    set dps = {"8 ring all-reduces on {t, t+8, ..., t+56} at once", 8, {{0}}, 0};
    for (int t = 0; t < 8; t++) dps.jobs[t] = (sim_coll_job){CM_ALL_REDUCE, CM_ALGO_RING, S, 8, dp[t]};
    sets[ns++] = dps;
    /* the cost model prices a tree only across NVLink domains (NCCL's trees link nodes) */
    sets[ns++] = (set){"tree all-reduce on 0-63", 1, {{CM_ALL_REDUCE, CM_ALGO_TREE, S, 64, all}},
                       !torus && !one_domain};
    if (gpus == 144)
      sets[ns++] = (set){"tree all-reduce on 0-143 (two NVL72 racks)", 1,
                         {{CM_ALL_REDUCE, CM_ALGO_TREE, S, 144, all144}}, 1};
    sets[ns++] = (set){"hierarchical all-reduce on 0-63", 1,
                       {{CM_ALL_REDUCE, CM_ALGO_HIER, S, 64, all}}, 0};
    int node_domain = !torus && c.nvlink.domain_gpus == c.gpus_per_node;
    sets[ns++] = (set){"PAT all-gather on {0, 8, ..., 56}", 1,
                       {{CM_ALL_GATHER, CM_ALGO_PAT, S, 8, dp[0]}}, node_domain};
    sets[ns++] = (set){"PAT reduce-scatter on {0, 8, ..., 56}", 1,
                       {{CM_REDUCE_SCATTER, CM_ALGO_PAT, S, 8, dp[0]}}, node_domain};
    if (gpus == 144)
      sets[ns++] = (set){"NVLSTree all-reduce on 0-143 (two NVL72 racks)", 1,
                         {{CM_ALL_REDUCE, CM_ALGO_NVLSTREE, S, 144, all144}}, 1};
    else
      sets[ns++] = (set){"NVLSTree all-reduce on 0-63", 1,
                         {{CM_ALL_REDUCE, CM_ALGO_NVLSTREE, S, 64, all}}, nvls && !one_domain};
    if (nvls)
      sets[ns++] = (set){"NVLS all-reduce on 0-7", 1, {{CM_ALL_REDUCE, CM_ALGO_NVLS, S, 8, in8}}, 1};
    if (nvls && one_domain) {
      set nv = {"8 NVLS all-reduces on {t, t+8, ..., t+56} at once", 8, {{0}}, 0};
      for (int t = 0; t < 8; t++) nv.jobs[t] = (sim_coll_job){CM_ALL_REDUCE, CM_ALGO_NVLS, S, 8, dp[t]};
      sets[ns++] = nv;
    }
    for (int s = 0; s < ns; s++) {
      sim_coll_job a[8], b[8];
      memcpy(a, sets[s].jobs, sizeof a);
      memcpy(b, sets[s].jobs, sizeof b);
      run(&c, NULL, a, sets[s].njobs, SIM_FAST);
      run(&c, NULL, b, sets[s].njobs, SIM_STEP);
      CHECK(a[0].messages > 0 && b[0].messages > a[0].messages); /* step simulates more */
      for (int k = 0; k < sets[s].njobs; k++) {
        if (fabs(a[k].time_s / b[k].time_s - 1) > 0.02)
          fprintf(stderr, "%s, %s, job %d: fast %.6f step %.6f\n", fabrics[f], sets[s].what, k,
                  a[k].time_s, b[k].time_s);
        CHECK(a[k].time_s > 0);
        CHECK_NEAR(a[k].time_s, b[k].time_s, 0.02);
      }
      if (sets[s].alone_cm) { /* the cost model prices it there: -1 (it cannot) fails */
        double t = cm_time(&c, NULL, &sets[s].jobs[0]);
        if (!(t > 0))
          fprintf(stderr, "%s, %s: the cost model gives %g\n", fabrics[f], sets[s].what, t);
        CHECK(t > 0);
        if (fabs(a[0].time_s / t - 1) > 0.01 || fabs(b[0].time_s / t - 1) > 0.01)
          fprintf(stderr, "%s, %s: fast %.6f step %.6f cost model %.6f\n", fabrics[f],
                  sets[s].what, a[0].time_s, b[0].time_s, t);
        CHECK_NEAR(a[0].time_s, t, 0.01);
        CHECK_NEAR(b[0].time_s, t, 0.01);
      }
    }
  }
}

/* ---- NVLS by hand -------------------------------------------------------------------------- */

/* NVLS all-reduces of S = 256 MiB on h100-nvl256 (8 nodes, 64 GPUs, one NVLink domain), at both
 * fidelities, against hand answers and the cost model (cm_coll_time). Per direction: a GPU's
 * NVLink port B = 450 * 0.82 = 369 GB/s, NVLS streams at 450 * 0.714 = 321.3 GB/s (eff.nvls), a
 * node's NVLink Switch uplink U = 8 * 450 / 2 * 0.82 = 1476 GB/s (2:1 taper). Latency: 4 us
 * fixed + 2 * 0.7 us NVLink hops, + 2 * 0.7 us more through the domain's switch level.
 *   1. GPUs 0-7 (one node): each streams 9/8 S to its node's switch and gets 9/8 S back:
 *      t = 9/8 S / 321.3e9 + 5.4 us.
 *   2. GPUs 0-15 (two nodes): 17/16 S on each port; each node's uplink carries one partial sum
 *      of S up and the result down, S / U, far less. The switch caps NVLS busbw at
 *      nvls.cap 1.31 * 0.85 (Hopper's NVLS efficiency) * 450 GB/s, which for m = 16 members
 *      is a stream rate of 450 * 1.31 * 0.85 * 17 / 30 = 283.9 GB/s, below eff.nvls's 321.3
 *      (for m = 8 the cap, 450 * 1.31 * 0.85 * 9 / 14 = 322.1 GB/s, does not bind):
 *      t = 17/16 S / 283.9e9 + 6.8 us.
 *   3. 8 groups at once, group l = GPU l of each of the 8 nodes: each port streams 9/8 S
 *      (0.94 ms at 321.3 GB/s); each node's uplink carries 8 groups' partial sums of S, 8 flows
 *      sharing U: S / (U/8) = S / 184.5e9 = 1.45 ms: the taper decides, t = S / 184.5e9 +
 *      6.8 us. A member finishes only after its result came back through the domain's
 *      switch, which sends it only when every node's partial sum has arrived; a relay that
 *      sent results before its inputs were in would end at the port's 0.94 ms. (The cost
 *      model refuses NVLS for a group with one GPU per node; the simulator runs it.) */
static void nvls_hand(void) {
  cm_params p = pure();
  spec_cluster c = cluster("h100-nvl256", 64);
  double S = 256.0 * 1024 * 1024, nvls = 450e9 * 0.714, U = 8 * 450e9 / 2 * 0.82;
  int g16[16], dp[8][8];
  for (int i = 0; i < 16; i++) g16[i] = i;
  for (int t = 0; t < 8; t++)
    for (int d = 0; d < 8; d++) dp[t][d] = t + 8 * d;
  for (int f = 0; f < 2; f++) {
    sim_fidelity fid = f ? SIM_STEP : SIM_FAST;
    sim_coll_job one = {CM_ALL_REDUCE, CM_ALGO_NVLS, S, 8, g16};
    run(&c, &p, &one, 1, fid);
    CHECK_NEAR(one.time_s, 9.0 / 8 * S / nvls + 5.4e-6, 1e-3);
    CHECK_NEAR(one.time_s, cm_time(&c, &p, &one), 1e-3);
    sim_coll_job two = {CM_ALL_REDUCE, CM_ALGO_NVLS, S, 16, g16};
    run(&c, &p, &two, 1, fid);
    CHECK_NEAR(two.time_s, 17.0 / 16 * S / (450e9 * 1.31 * 0.85 * 17 / 30) + 6.8e-6, 1e-3);
    CHECK_NEAR(two.time_s, cm_time(&c, &p, &two), 1e-3);
    sim_coll_job eight[8];
    for (int t = 0; t < 8; t++) eight[t] = (sim_coll_job){CM_ALL_REDUCE, CM_ALGO_NVLS, S, 8, dp[t]};
    run(&c, &p, eight, 8, fid);
    /* the step form's fill (3 of its 1024 chunks) is taken out of the latency at the idle
     * port's rate; through the shared uplink it takes 1.5 times as long: 0.1% more */
    for (int t = 0; t < 8; t++) CHECK_NEAR(eight[t].time_s, S / (U / 8) + 6.8e-6, f ? 2e-3 : 1e-3);
  }
  /* with the default parameters (ramp, 4 us fixed latency), one group alone takes the cost
   * model's time at both fidelities */
  for (int f = 0; f < 2; f++) {
    sim_coll_job one = {CM_ALL_REDUCE, CM_ALGO_NVLS, 64.0 * 1024 * 1024, 8, g16};
    run(&c, NULL, &one, 1, f ? SIM_STEP : SIM_FAST);
    CHECK_NEAR(one.time_s, cm_time(&c, NULL, &one), 1e-3);
  }
}

/* ---- all-to-all by hand ----------------------------------------------------------------- */

/* An expert-parallel all-to-all of S = 256 MiB per rank on GPUs 0-15 of dgx-h100 (2 nodes, 8
 * rails of one 400 Gb/s NIC per GPU, B_nic = 50 * 0.96 = 48 GB/s per direction), at both
 * fidelities. Each GPU sends S/16 to each of the 15 others; half of it (8 S/16) crosses to the
 * other node. Step (every pair): GPU l's part for GPU j of the other node goes over NVLink to
 * GPU j of its own node and out through NIC j (PXN), so NIC j carries the 8 parts of its node
 * for GPU j, 8 flows of S/16 sharing 48 GB/s: S/2 / B_nic. Fast: GPU l sends its 8 parts for
 * the other node in one flow through NIC l: S/2 / B_nic. NVLink (369 GB/s) carries at most
 * 14 S/16 per port and is never the bottleneck. Latency 2 * 2.7 us (a network hop each way):
 * t = S / (2 B_nic) + 5.4 us, which is also the cost model's all-to-all time. */
static void a2a_hand(void) {
  cm_params p = pure();
  spec_cluster c = cluster("dgx-h100", 16);
  double S = 256.0 * 1024 * 1024, Bnic = 50e9 * 0.96;
  int g[16];
  for (int i = 0; i < 16; i++) g[i] = i;
  for (int f = 0; f < 2; f++) {
    sim_coll_job j = {CM_ALL_TO_ALL, CM_ALGO_RING, S, 16, g};
    run(&c, &p, &j, 1, f ? SIM_STEP : SIM_FAST);
    CHECK_NEAR(j.time_s, S / (2 * Bnic) + 5.4e-6, 1e-3);
    CHECK_NEAR(j.time_s, cm_time(&c, &p, &j), 1e-3);
  }
}

/* ---- contention by hand ------------------------------------------------------------------ */

/* Ring all-reduces of S = 1 GiB where groups share links (fast form). */
static void contention(void) {
  cm_params p = pure();
  double S = 1 << 30;
  /* 1. Eight DP pairs (GPU l of node 0 with GPU l of node 1) on a plain fat tree with one
   *    400 Gb/s NIC per node: every pair's flow leaves node 0 through the same NIC, so each
   *    gets 1/8 of it. A ring all-reduce of 2 ranks moves S per rank: t = 8 S / B_nic + 2 a.
   *    Then one pair alone: the whole NIC, t = S / B_nic + 2 a. */
  spec_cluster c = one_nic("one-nic", 16, 0);
  int pairs[8][2];
  sim_coll_job jobs[8];
  for (int l = 0; l < 8; l++) {
    pairs[l][0] = l, pairs[l][1] = l + 8;
    jobs[l] = (sim_coll_job){CM_ALL_REDUCE, CM_ALGO_RING, S, 2, pairs[l]};
  }
  run(&c, &p, jobs, 8, SIM_FAST);
  double Bnic = 400e9 / 8 * 0.96, a = 2.7e-6;
  for (int l = 0; l < 8; l++) CHECK_NEAR(jobs[l].time_s, 8 * S / Bnic + 2 * a, 1e-4);
  run(&c, &p, jobs, 1, SIM_FAST);
  CHECK_NEAR(jobs[0].time_s, S / Bnic + 2 * a, 1e-4);

  /* 2. TP and DP on the same NVLink Switch taper: GPUs 0-15 of h100-nvl256 (two nodes of one
   *    domain), two TP rings of 8 (one per node) and eight DP pairs (l, l+8), all-reduces of S
   *    at once. Each GPU port (B = 450 * 0.82 GB/s per direction) carries a TP and a DP flow;
   *    each node's uplink (8 * 450 / 2 * 0.82 = 4 B) carries 8 DP flows: all flows get B / 2.
   *    The DP pairs move S and end at 2 S / B; the TP rings move 1.75 S: 2 S / B at B/2 gets
   *    them to S, the last 0.75 S at B: 2.75 S / B. Then the two TP rings alone: 1.75 S / B;
   *    the eight DP pairs alone: 2 S / B (the taper: 8 flows of S on 4 B). */
  spec_cluster nvl = cluster("h100-nvl256", 16);
  int tp[2][8];
  sim_coll_job mix[10];
  for (int k = 0; k < 2; k++) {
    for (int i = 0; i < 8; i++) tp[k][i] = 8 * k + i;
    mix[k] = (sim_coll_job){CM_ALL_REDUCE, CM_ALGO_RING, S, 8, tp[k]};
  }
  for (int l = 0; l < 8; l++) mix[2 + l] = (sim_coll_job){CM_ALL_REDUCE, CM_ALGO_RING, S, 2, pairs[l]};
  run(&nvl, &p, mix, 10, SIM_FAST);
  double B = 450e9 * 0.82, anv = 0.7e-6;
  for (int k = 0; k < 2; k++) CHECK_NEAR(mix[k].time_s, 2.75 * S / B + 14 * anv, 1e-4);
  for (int l = 0; l < 8; l++) CHECK_NEAR(mix[2 + l].time_s, 2 * S / B + 2 * anv, 1e-4);
  run(&nvl, &p, mix, 2, SIM_FAST);
  CHECK_NEAR(mix[0].time_s, 1.75 * S / B + 14 * anv, 1e-4);
  run(&nvl, &p, mix + 2, 8, SIM_FAST);
  CHECK_NEAR(mix[2].time_s, 2 * S / B + 2 * anv, 1e-4);

  /* 3. A ring's channels to one successor are one flow: a ring all-reduce over GPUs 0-15 of
   *    h100-nvl256 has 8 channels, channel c entering each node at its member c, so a member
   *    sends to its neighbour in 7 channels and to the other node in one: 2 messages a member,
   *    32 (one a channel: 128), in the same time as the cost model's. */
  int all16[16];
  for (int i = 0; i < 16; i++) all16[i] = i;
  sim_coll_job ring16 = {CM_ALL_REDUCE, CM_ALGO_RING, S, 16, all16};
  run(&nvl, &p, &ring16, 1, SIM_FAST);
  CHECK_EQ(ring16.messages, 32);
  CHECK_NEAR(ring16.time_s, cm_time(&nvl, &p, &ring16), 1e-3);
}

/* ---- the spine ------------------------------------------------------------------------------ */

/* Oversubscription sits on the leaf uplinks. A plain fat tree of 4 nodes of 8 GPUs, one 400
 * Gb/s NIC per node, 4-port switches (2 nodes per leaf, 2 leaves) and 2:1 oversubscription: a
 * leaf's uplink carries 2 * 50 / 2 * 0.96 = 48 GB/s per direction. Sixteen DP pairs of ring
 * all-reduces of S = 1 GiB at once, GPU l of node 0 with GPU l of node 2 and GPU l of node 1
 * with GPU l of node 3: each node's NIC (48 GB/s) carries 8 flows, leaf 0's uplink carries all
 * 16: 3 GB/s each, t = S / 3e9 + 2 * 2.7 us, the cost model's time for such a pair (the spine
 * level's share). The spine switches themselves are not links: in a two-level Clos every leaf
 * has a port on every spine switch and a spine switch is non-blocking, so a flow between two
 * leaves crosses only the two leaf uplinks. Then every preset fat tree at 4608 GPUs (64 NVL72
 * racks, 576 nodes of 8) fits two levels and a 1 MiB ring all-reduce on its GPUs 0 and 4600
 * simulates; dgx-a100 at 8192 GPUs (1024 nodes, 20 per leaf per rail: 52 leaves per rail for
 * 40-port spine switches) would need a third level and is refused with PP_INPUT, as is an
 * NVLS all-reduce across two dgx-h100 nodes (two NVLink domains). */
static void spine(void) {
  cm_params p = pure();
  double S_1G = 1 << 30;
  spec_cluster c = one_nic("two-leaves", 32, 4);
  pp_err err = {0};
  int pairs[16][2];
  sim_coll_job jobs[16];
  for (int l = 0; l < 16; l++) {
    pairs[l][0] = l, pairs[l][1] = l + 16; /* node 0 -> node 2, node 1 -> node 3 */
    jobs[l] = (sim_coll_job){CM_ALL_REDUCE, CM_ALGO_RING, S_1G, 2, pairs[l]};
  }
  for (int f = 0; f < 2; f++) {
    run(&c, &p, jobs, 16, f ? SIM_STEP : SIM_FAST);
    for (int l = 0; l < 16; l++) CHECK_NEAR(jobs[l].time_s, S_1G / 3e9 + 5.4e-6, 1e-4);
  }
  CHECK_NEAR(jobs[0].time_s, cm_time(&c, &p, &jobs[0]), 1e-4);
  int two[2] = {0, 4608 - 8};
  for (size_t i = 0; i < spec_cluster_preset_count(); i++) {
    const spec_cluster *pc = spec_cluster_preset(i);
    if (pc->network.kind != SPEC_NET_FAT_TREE) continue;
    spec_cluster big = cluster(pc->name, 4608);
    sim_coll_job j = {CM_ALL_REDUCE, CM_ALGO_RING, 1 << 20, 2, two};
    run(&big, NULL, &j, 1, SIM_FAST);
    CHECK(j.time_s > 0);
  }
  /* NVLS across two DGX H100 nodes (two NVLink domains) cannot run: refused in one line */
  spec_cluster h100 = cluster("dgx-h100", 16);
  cm_model *hm = coll_model(&h100, NULL);
  int across[2] = {0, 8};
  sim_coll_job nv = {CM_ALL_REDUCE, CM_ALGO_NVLS, 1 << 20, 2, across};
  CHECK_EQ(sim_collectives(hm, &nv, 1, SIM_FAST, &err), PP_INPUT);
  CHECK_CONTAINS(err.msg, "job 0: NVLS cannot run all_reduce there");
  cm_model_destroy(hm);
  spec_cluster a100 = cluster("dgx-a100", 8192);
  cm_model *cm = coll_model(&a100, NULL);
  sim_coll_job j = {CM_ALL_REDUCE, CM_ALGO_RING, 1 << 20, 2, two};
  CHECK_EQ(sim_collectives(cm, &j, 1, SIM_FAST, &err), PP_INPUT);
  CHECK_CONTAINS(err.msg, "third switch level");
  cm_model_destroy(cm);
}

/* ---- a tree by hand ------------------------------------------------------------------------ */

/* A tree all-reduce runs along NCCL's tree, not between ring neighbours. GPU l of each of 8
 * nodes (8 GPUs, one 400 Gb/s NIC each) of a plain fat tree with 4-port switches (2 nodes per
 * leaf, 4 leaves) and 2:1 oversubscription: a leaf's uplink carries 2 * 50 / 2 * 0.96 = 48
 * GB/s per direction, as does each NIC. One member per node: one head position, 2 channels
 * (NCCL's double binary tree over the 8 nodes), each reducing S/2 of S = 1 GiB. Tree 0: 0 <- 4,
 * 4 <- 2 and 6, 2 <- 1 and 3, 6 <- 5 and 7; tree 1 (mirrored): 7 <- 3, 3 <- 5 and 1, 5 <- 6
 * and 4, 1 <- 2 and 0. Each edge carries S/2 up and S/2 down. Edges leaving leaf 1 (nodes 2,
 * 3): 4-2 and 2-1 of tree 0, 7-3, 3-5, 3-1 and 1-2 of tree 1: 6 edges, 3 S each way, as for
 * leaf 2 (nodes 4, 5); leaves 0 and 3 carry 2 S, and every edge between leaves touches leaf 1
 * or 2. The busiest NIC (node 4: 3 shares in tree 0, 1 in tree 1) carries 2 S. Latency 2
 * log2(8) * 2.7 us = 16.2 us. At both fidelities:
 *   1. the tree of GPU 0 of every node alone: t = 3 S / 48e9 + 16.2 us (a ring's flows with
 *      the tree's volume, the form before trees had their own, cross each leaf once each way:
 *      2 S / 48e9);
 *   2. the 8 trees of GPU l of every node at once (as a DP group of each TP rank): 48 flows of
 *      S/2 through the uplinks of leaves 1 and 2, 1 GB/s each: t = 24 S / 48e9 + 16.2 us. The
 *      cost model, which puts every node's 2 S per group on its share of the spine, prices such
 *      a group at 32 S / 48e9 + 16.2 us. */
static void tree_hand(void) {
  cm_params p = pure();
  double S = 1 << 30, B = 48e9;
  spec_cluster c = one_nic("four-leaves", 64, 4);
  int dp[8][8];
  sim_coll_job jobs[8];
  for (int l = 0; l < 8; l++) {
    for (int i = 0; i < 8; i++) dp[l][i] = l + 8 * i;
    jobs[l] = (sim_coll_job){CM_ALL_REDUCE, CM_ALGO_TREE, S, 8, dp[l]};
  }
  CHECK_NEAR(cm_time(&c, &p, &jobs[0]), 32 * S / B + 16.2e-6, 1e-4);
  for (int f = 0; f < 2; f++) {
    const char *form = f ? "step" : "fast";
    run(&c, &p, jobs, 1, f ? SIM_STEP : SIM_FAST);
    if (fabs(jobs[0].time_s / (3 * S / B + 16.2e-6) - 1) > 1e-3)
      fprintf(stderr, "tree by hand, alone, %s: %.6f s\n", form, jobs[0].time_s);
    CHECK_NEAR(jobs[0].time_s, 3 * S / B + 16.2e-6, 1e-3);
    run(&c, &p, jobs, 8, f ? SIM_STEP : SIM_FAST);
    for (int l = 0; l < 8; l++) {
      if (fabs(jobs[l].time_s / (24 * S / B + 16.2e-6) - 1) > 1e-3)
        fprintf(stderr, "tree by hand, 8 at once, %s, group %d: %.6f s\n", form, l,
                jobs[l].time_s);
      CHECK_NEAR(jobs[l].time_s, 24 * S / B + 16.2e-6, 1e-3);
    }
  }
}

/* ---- PAT by hand ------------------------------------------------------------------------- */

/* PAT runs its distance-reversed Bruck exchange, not a ring. GPU l of each of the 8 nodes of the
 * four-leaves fabric of tree_hand (leaf k holds nodes 2k and 2k+1; a NIC and a leaf uplink each
 * carry 48 GB/s per direction), an all-gather of S = 1 GiB: steps to the member 4, 2 and 1
 * places on with 1, 2 and 4 blocks. A block is S/8 over PAT's bandwidth (0.75 of the ring's):
 * b = S/6. Leaf 0's uplink carries node 0's steps to nodes 4 and 2 (3 b) and all of node 1's,
 * to 5, 3 and 2 (7 b): 10 b each way, the most of any link; a node's NIC 7 b. Latency
 * log2(8) * 2.7 / 3.5 + 2.8 * 8 = 24.714 us (NCCL's PAT formula, base 0). At both fidelities:
 *   1. GPU 0 of every node alone: t = 10 b / 48e9 + 24.714 us (the ring's flows with PAT's
 *      volume, the form before PAT had its own, cross each uplink once each way: 7 b / 48e9);
 *   2. the 8 groups of GPU l of every node at once: 80 b through each uplink, t = 80 b / 48e9
 *      + 24.714 us for every group. */
static void pat_hand(void) {
  cm_params p = pure();
  double S = 1 << 30, B = 48e9, b = S / 6, lat = 3 * 2.7e-6 / 3.5 + 2.8e-6 * 8;
  spec_cluster c = one_nic("four-leaves", 64, 4);
  int dp[8][8];
  sim_coll_job jobs[8];
  for (int l = 0; l < 8; l++) {
    for (int i = 0; i < 8; i++) dp[l][i] = l + 8 * i;
    jobs[l] = (sim_coll_job){CM_ALL_GATHER, CM_ALGO_PAT, S, 8, dp[l]};
  }
  for (int f = 0; f < 2; f++) {
    const char *form = f ? "step" : "fast";
    run(&c, &p, jobs, 1, f ? SIM_STEP : SIM_FAST);
    if (fabs(jobs[0].time_s / (10 * b / B + lat) - 1) > 1e-3)
      fprintf(stderr, "PAT by hand, alone, %s: %.6f s\n", form, jobs[0].time_s);
    CHECK_NEAR(jobs[0].time_s, 10 * b / B + lat, 1e-3);
    run(&c, &p, jobs, 8, f ? SIM_STEP : SIM_FAST);
    for (int l = 0; l < 8; l++) {
      if (fabs(jobs[l].time_s / (80 * b / B + lat) - 1) > 1e-3)
        fprintf(stderr, "PAT by hand, 8 at once, %s, group %d: %.6f s\n", form, l,
                jobs[l].time_s);
      CHECK_NEAR(jobs[l].time_s, 80 * b / B + lat, 1e-3);
    }
  }
}

int main(void) {
  pat_hand();
  fast_vs_step();
  tree_hand();
  nvls_hand();
  a2a_hand();
  contention();
  spine();
  return check_status();
}
