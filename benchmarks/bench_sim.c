/* bench_sim: how fast and how large the simulator runs.
 *
 *   1. GPT-3 175B, TP=8 PP=16 DP=8 on 1024 GPUs of dgx-h100, one full iteration with every
 *      group's traffic in flight (target: <= 10 s wall, <= 2 GiB peak memory, one core);
 *   2. Llama-3 70B on the 256-GPU h100-nvl256 domain (target: <= 2 s);
 *   3. scaling: GPT-3 175B with TP=8 PP=8 and 16 microbatches on 64 .. 4096 GPUs of dgx-h100.
 * Reported per run: wall seconds (fork, platform writing and loading included), peak resident
 * memory of the simulating process, simulated messages, and messages per wall second.
 * Before reporting, each run is checked against the cost model: with few links shared the two
 * must agree within 5%, else the benchmark fails.
 *
 * usage: bench_sim [--max-gpus N]   (default 4096) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podplan/sim.h"

static int one(const char *model, const char *cluster, int gpus, const char *plan) {
  spec_model m;
  spec_cluster c;
  spec_plan p;
  pp_err err = {0};
  cm_model *cm = NULL;
  cm_result pr;
  sim_result r;
  if (spec_model_load(model, &m, &err) || spec_cluster_load(cluster, gpus, &c, &err) ||
      spec_plan_parse(plan, &p, &err) || spec_plan_resolve(&p, &m, &c, &err) ||
      cm_model_create(&m, &c, NULL, &cm, &err) || cm_eval(cm, &p, &pr, &err) ||
      sim_run(cm, &p, NULL, &r, &err)) {
    fprintf(stderr, "bench_sim: %s %s %d %s: %s\n", model, cluster, gpus, plan, err.msg);
    return 1;
  }
  double dev = r.iter_time_s / pr.iter_time_s - 1;
  printf("  %-10s %-12s %5d GPUs  %-40s wall %7.3f s  peak %6.0f MiB  %9ld msgs  %8.0f msg/s"
         "  sim %.3f s (cost model %+.1f%%)\n",
         model, cluster, gpus, plan, r.sim_wall_s, r.peak_rss_mib, r.messages,
         r.messages / r.sim_wall_s, r.iter_time_s, 100 * dev);
  int bad = dev > 0.05 || dev < -0.05;
  if (bad) fprintf(stderr, "bench_sim: simulated and predicted disagree by %.1f%%\n", 100 * dev);
  sim_result_clear(&r);
  cm_model_destroy(cm);
  spec_plan_clear(&p);
  return bad;
}

int main(int argc, char **argv) {
  int max = 4096;
  if (argc == 3 && strcmp(argv[1], "--max-gpus") == 0) max = atoi(argv[2]);
  int bad = 0;
  printf("bench_sim: targets\n");
  bad |= one("gpt3-175b", "dgx-h100", 1024, "tp=8,pp=16,dp=8,mbs=1,gbs=1536,sp=1,recompute=selective,zero=1");
  bad |= one("llama3-70b", "h100-nvl256", 256, "tp=8,pp=4,mbs=1,gbs=256,sp=1,recompute=selective,zero=1");
  printf("bench_sim: scaling (16 microbatches)\n");
  for (int g = 64; g <= max; g *= 2) {
    char plan[128];
    snprintf(plan, sizeof plan, "tp=8,pp=8,mbs=1,gbs=%d,sp=1,recompute=selective,zero=1",
             16 * (g / 64));
    bad |= one("gpt3-175b", "dgx-h100", g, plan);
  }
  return bad;
}
