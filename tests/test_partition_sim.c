/* NVLink partitions in the simulator, on real SimGrid runs: on a 128-GPU GB200 NVL72 job
 * (two derived 64-GPU partitions) an all-reduce between GPUs 0 and 64 crosses the network
 * (a NIC), between GPUs 0 and 4 it stays on NVLink; at 144 GPUs (whole 72-GPU domains) GPUs
 * 0 and 64 share a domain and talk over NVLink. A simulated iteration of a MoE plan whose TP
 * and EP groups stay inside a partition puts traffic on the network (the DP groups between
 * partitions) and agrees with the cost model as closely as test_sim's other cases do. */
#include <stdlib.h>

#include "check.h"
#include "podplan/sim.h"

static cm_model *model_on(const char *cluster, int gpus, spec_cluster *c) {
  spec_model m;
  cm_model *cm = NULL;
  pp_err err = {0};
  if (spec_model_load("mixtral-8x7b", &m, &err) || spec_cluster_load(cluster, gpus, c, &err) ||
      cm_model_create(&m, c, NULL, &cm, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    abort();
  }
  return cm;
}

/* Time of one 1 GiB ring all-reduce between two GPUs, alone on the fabric. */
static double pair_time(cm_model *cm, int a, int b) {
  int gpus[2] = {a, b};
  sim_coll_job j = {CM_ALL_REDUCE, CM_ALGO_RING, 1 << 30, 2, gpus, 0};
  pp_err err = {0};
  int rc = sim_collectives(cm, &j, 1, SIM_FAST, &err);
  if (rc) fprintf(stderr, "%s\n", err.msg);
  CHECK_EQ(rc, PP_OK);
  return j.time_s;
}

static void pairs(void) {
  spec_cluster c128, c144;
  cm_model *part = model_on("gb200-nvl72", 128, &c128);
  cm_model *whole = model_on("gb200-nvl72", 144, &c144);
  CHECK_EQ(c128.nvlink.domain_gpus, 64);
  CHECK_EQ(c144.nvlink.domain_gpus, 72);
  double across = pair_time(part, 0, 64), inside = pair_time(part, 0, 4);
  double same_domain = pair_time(whole, 0, 64);
  /* NVLink5 900 GB/s per GPU against one 400 Gb/s (50 GB/s) NIC */
  if (!(across > 10 * inside))
    fprintf(stderr, "0-64 %.6f s, 0-4 %.6f s (128 GPUs), 0-64 %.6f s (144)\n", across, inside,
            same_domain);
  CHECK(across > 10 * inside);
  CHECK_NEAR(same_domain, inside, 1e-6);
  cm_model_destroy(part);
  cm_model_destroy(whole);
}

static void iteration(void) {
  spec_cluster c;
  cm_model *cm = model_on("gb200-nvl72", 128, &c);
  spec_model m;
  spec_plan p;
  cm_result pr;
  sim_result sr;
  pp_err err = {0};
  memset(&p, 0, sizeof p);
  int rc = spec_model_load("mixtral-8x7b", &m, &err) ||
           spec_plan_parse("tp=4,ep=8,mbs=1,gbs=256,zero=1", &p, &err) ||
           spec_plan_resolve(&p, &m, &c, &err) || cm_eval(cm, &p, &pr, &err) ||
           sim_run(cm, &p, NULL, &sr, &err);
  if (rc) fprintf(stderr, "%s\n", err.msg);
  CHECK_EQ(rc, 0);
  if (!rc) {
    CHECK_EQ(sr.ranks, 128);
    CHECK(sr.levels_present & (1 << CM_LVL_NET));
    CHECK(sr.util_max[CM_LVL_NET] > 0);
    CHECK(sr.util_max[CM_LVL_NVLINK_UP] > 0);
    if (fabs(sr.iter_time_s / pr.iter_time_s - 1) > 0.03)
      fprintf(stderr, "sim %.4f s, cost model %.4f s\n", sr.iter_time_s, pr.iter_time_s);
    CHECK_NEAR(sr.iter_time_s, pr.iter_time_s, 0.03);
    sim_result_clear(&sr);
  }
  spec_plan_clear(&p);
  cm_model_destroy(cm);
}

int main(void) {
  pairs();
  iteration();
  return check_status();
}
