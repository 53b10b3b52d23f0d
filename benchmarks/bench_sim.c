/* bench_sim: how fast and how large the simulator runs, and how it compares with the cost
 * model.
 *
 *   1. GPT-3 175B, TP=8 PP=16 DP=8 on 1024 GPUs of dgx-h100, one full iteration with every
 *      group's traffic in flight (target: <= 10 s wall, <= 2 GiB peak memory, one core);
 *   2. Llama-3 70B on the 256-GPU h100-nvl256 domain (target: <= 2 s);
 *   3. scaling: GPT-3 175B with TP=8 PP=8 and 16 microbatches on 64 .. 4096 GPUs of dgx-h100.
 * Each run at the fast fidelity with the ring-form collectives of a chunk aggregated (the
 * default) and, with --per-layer, with every collective of every layer simulated by itself;
 * --all-flows runs every ring as SimGrid flows, even the private ones (sim_opts.all_flows: the
 * same simulated times, the wall time without that shortcut).
 * Reported per run: wall seconds (fork, platform writing and loading included), peak resident
 * memory of the simulating process, simulated messages, and messages per wall second.
 * Before reporting, each run is checked against the cost model: with few links shared the two
 * must agree within 5%, else the benchmark fails.
 *
 *   --table: instead, `simulate` against `predict` on the plans of sim_plans.h (every cluster
 *   preset; uniform and non-uniform; TP/SP/CP/EP/PP/ZeRO), with each level's mean and maximum
 *   link utilisation; the plans not held to 3% say why.
 *
 * usage: bench_sim [--max-gpus N] [--per-layer] [--all-flows] [--table]   (default 4096) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podplan/sim.h"
#include "sim_plans.h"

/* Loads a case, predicts it (pr) and simulates it (r); the caller clears p, cm and r. */
static int score(const char *model, const char *cluster, int gpus, const char *plan,
                 const char *params, const sim_opts *o, spec_plan *p, cm_model **cm,
                 cm_result *pr, sim_result *r, pp_err *err) {
  spec_model m;
  spec_cluster c;
  cm_params prm;
  cm_params_default(NULL, &prm);
  return spec_model_load(model, &m, err) || spec_cluster_load(cluster, gpus, &c, err) ||
         (params && cm_params_apply(&prm, params, err)) || spec_plan_parse(plan, p, err) ||
         spec_plan_resolve(p, &m, &c, err) || cm_model_create(&m, &c, &prm, cm, err) ||
         cm_eval(*cm, p, pr, err) || sim_run(*cm, p, o, r, err);
}

static int one(const char *model, const char *cluster, int gpus, const char *plan, int per_layer,
               int all_flows) {
  spec_plan p;
  pp_err err = {0};
  cm_model *cm = NULL;
  cm_result pr;
  sim_result r;
  sim_opts o = {.fidelity = SIM_FAST, .per_layer = per_layer, .all_flows = all_flows};
  if (score(model, cluster, gpus, plan, NULL, &o, &p, &cm, &pr, &r, &err)) {
    fprintf(stderr, "bench_sim: %s %s %d %s: %s\n", model, cluster, gpus, plan, err.msg);
    return 1;
  }
  double dev = r.iter_time_s / pr.iter_time_s - 1;
  printf("  %-10s %-12s %5d GPUs  %-40s wall %7.3f s  peak %6.0f MiB  %9ld msgs  %8.0f msg/s"
         "  sim %.3f s (cost model %+.1f%%)\n",
         model, cluster, gpus, plan, r.sim_wall_s, r.peak_rss_mib, r.messages,
         r.messages / r.sim_wall_s, r.iter_time_s, 100 * dev);
  fflush(stdout);
  int bad = dev > 0.05 || dev < -0.05;
  if (bad) fprintf(stderr, "bench_sim: simulated and predicted disagree by %.1f%%\n", 100 * dev);
  sim_result_clear(&r);
  cm_model_destroy(cm);
  spec_plan_clear(&p);
  return bad;
}

/* One row of the comparison table; returns 1 when an unshared plan is off by more than 3%. */
static int row(int i, const sim_plan_case *k) {
  spec_plan p;
  pp_err err = {0};
  cm_model *cm = NULL;
  cm_result pr;
  sim_result r;
  if (score(k->model, k->cluster, k->gpus, k->plan, k->params, NULL, &p, &cm, &pr, &r, &err)) {
    fprintf(stderr, "bench_sim: case %d: %s\n", i + 1, err.msg);
    return 1;
  }
  double dev = r.iter_time_s / pr.iter_time_s - 1;
  char plan[48];
  snprintf(plan, sizeof plan, "%s", p.nstages ? "(non-uniform, see sim_plans.h)" : k->plan);
  printf("%2d %-12s %-12s %4d %-46s %-18s %8.4f %8.4f %+6.2f%% %s ", i + 1, k->model, k->cluster,
         k->gpus, plan, k->params ? k->params : "-", r.iter_time_s, pr.iter_time_s, 100 * dev,
         k->why ? "not held" : "3%      ");
  for (int l = 0; l < CM_NLEVELS; l++)
    if (r.levels_present & (1 << l))
      printf(" %s %.0f/%.0f%%", cm_level_name((cm_level)l), 100 * r.util_mean[l], 100 * r.util_max[l]);
  printf("%s%s\n", k->why ? "  -- " : "", k->why ? k->why : "");
  fflush(stdout);
  sim_result_clear(&r);
  cm_model_destroy(cm);
  spec_plan_clear(&p);
  return !k->why && fabs(dev) > 0.03;
}

int main(int argc, char **argv) {
  int max = 4096, per_layer = 0, table = 0, all_flows = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--max-gpus") == 0 && i + 1 < argc) max = atoi(argv[++i]);
    else if (strcmp(argv[i], "--per-layer") == 0) per_layer = 1;
    else if (strcmp(argv[i], "--all-flows") == 0) all_flows = 1;
    else if (strcmp(argv[i], "--table") == 0) table = 1;
    else {
      fprintf(stderr, "usage: bench_sim [--max-gpus N] [--per-layer] [--all-flows] [--table]\n");
      return 2;
    }
  }
  int bad = 0;
  if (table) {
    printf(" # model        cluster      gpus plan                                           "
           "params             sim s    predict  diff    held   utilisation mean/max per level\n");
    for (int i = 0; i < SIM_PLAN_NCASES; i++) bad |= row(i, &sim_plan_cases[i]);
    return bad;
  }
  printf("bench_sim: targets (%s%s)\n", per_layer ? "every collective of every layer" :
                                                  "ring-form collectives aggregated per chunk",
         all_flows ? "; every ring as SimGrid flows" : "");
  bad |= one("gpt3-175b", "dgx-h100", 1024, "tp=8,pp=16,dp=8,mbs=1,gbs=1536,sp=1,recompute=selective,zero=1", per_layer, all_flows);
  bad |= one("llama3-70b", "h100-nvl256", 256, "tp=8,pp=4,mbs=1,gbs=256,sp=1,recompute=selective,zero=1", per_layer, all_flows);
  printf("bench_sim: scaling (16 microbatches)\n");
  for (int g = 64; g <= max; g *= 2) {
    char plan[128];
    snprintf(plan, sizeof plan, "tp=8,pp=8,mbs=1,gbs=%d,sp=1,recompute=selective,zero=1",
             16 * (g / 64));
    bad |= one("gpt3-175b", "dgx-h100", g, plan, per_layer, all_flows);
  }
  return bad;
}
