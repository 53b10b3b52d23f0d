/* bench_simcoll: the simulator's collectives at both fidelities (sim_collectives).
 *
 *   1. per algorithm, one group alone at 1, 16 and 256 MiB per rank: the simulated time of
 *      the fast and the step form, their messages and wall time, and the cost model's time
 *      (cm_coll_time; "-" where it refuses the job: NVLS with one GPU per node);
 *   2. 8 groups at once through the NVLink Switch taper of h100-nvl256, both forms;
 *   3. many groups at once on 1024 GPUs (128 groups of 8, 16 MiB each), fast form: what one
 *      collective costs to simulate when every TP group of a large job runs one.
 * Wall time includes forking, writing and loading the platform.
 *
 * usage: bench_simcoll */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "podplan/sim.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

typedef struct row {
  const char *cluster;
  int gpus;          /* cluster size */
  const char *group; /* what the group is */
  cm_coll coll;
  cm_algo algo;
  int n, stride;     /* members: 0, stride, 2 stride, ... */
} row;

static int run(cm_model *cm, sim_coll_job *j, int n, sim_fidelity f, double *wall) {
  pp_err err = {0};
  double t0 = now();
  int rc = sim_collectives(cm, j, n, f, &err);
  *wall = now() - t0;
  if (rc) fprintf(stderr, "bench_simcoll: %s\n", err.msg);
  return rc;
}

static cm_model *model_on(const char *cluster, int gpus, spec_cluster *c) {
  spec_model m;
  cm_model *cm = NULL;
  pp_err err = {0};
  if (spec_model_load("gpt3-175b", &m, &err) || spec_cluster_load(cluster, gpus, c, &err) ||
      cm_model_create(&m, c, NULL, &cm, &err)) {
    fprintf(stderr, "bench_simcoll: %s\n", err.msg);
    return NULL;
  }
  return cm;
}

static int alone(void) {
  static const row rows[] = {
      {"dgx-h100", 64, "8 GPUs of a node", CM_ALL_REDUCE, CM_ALGO_RING, 8, 1},
      {"dgx-h100", 64, "64 GPUs (8 nodes)", CM_ALL_REDUCE, CM_ALGO_RING, 64, 1},
      {"dgx-h100", 64, "64 GPUs (8 nodes)", CM_ALL_REDUCE, CM_ALGO_TREE, 64, 1},
      {"dgx-h100", 64, "64 GPUs (8 nodes)", CM_ALL_REDUCE, CM_ALGO_HIER, 64, 1},
      {"dgx-h100", 64, "8 GPUs of a node", CM_ALL_REDUCE, CM_ALGO_NVLS, 8, 1},
      {"h100-nvl256", 64, "GPU 0 of 8 nodes", CM_ALL_REDUCE, CM_ALGO_NVLS, 8, 8},
      {"h100-nvl256", 64, "64 GPUs (8 nodes)", CM_ALL_REDUCE, CM_ALGO_NVLS, 64, 1},
      {"dgx-h100", 64, "16 GPUs (2 nodes)", CM_ALL_TO_ALL, CM_ALGO_RING, 16, 1},
      {"dgx-h100", 64, "64 GPUs (8 nodes)", CM_ALL_TO_ALL, CM_ALGO_RING, 64, 1},
  };
  const double sizes[] = {1 << 20, 16 << 20, 256 << 20};
  printf("%-12s %-18s %-9s %4s %11s %10s %7s %6s %10s %7s %6s\n", "cluster", "group", "coll", "MiB",
         "model ms", "fast ms", "msgs", "wall", "step ms", "msgs", "wall");
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    const row *r = &rows[i];
    spec_cluster c;
    cm_model *cm = model_on(r->cluster, r->gpus, &c);
    if (!cm) return 1;
    int *g = malloc((size_t)r->n * sizeof *g);
    for (int k = 0; k < r->n; k++) g[k] = k * r->stride;
    cm_place pl;
    cm_place_list(cm, g, r->n, &pl);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
      sim_coll_job a = {r->coll, r->algo, sizes[s], r->n, g, 0, 0}, b = a;
      double wa, wb, t = cm_coll_time(cm, r->coll, r->algo, sizes[s], &pl);
      if (run(cm, &a, 1, SIM_FAST, &wa) || run(cm, &b, 1, SIM_STEP, &wb)) return 1;
      char tcm[32], name[32];
      if (t > 0) snprintf(tcm, sizeof tcm, "%.4f", 1e3 * t);
      else snprintf(tcm, sizeof tcm, "-");
      snprintf(name, sizeof name, "%s %s", cm_algo_name(r->algo),
               r->coll == CM_ALL_TO_ALL ? "a2a" : "AR");
      printf("%-12s %-18s %-9s %4.0f %11s %10.4f %7ld %5.2fs %10.4f %7ld %5.2fs\n", r->cluster,
             r->group, name, sizes[s] / (1 << 20), tcm, 1e3 * a.time_s, a.messages, wa,
             1e3 * b.time_s, b.messages, wb);
    }
    free(g);
    cm_model_destroy(cm);
  }
  return 0;
}

/* 128 groups of 8 GPUs on 1024 GPUs, all at once, 16 MiB each, fast form. */
static int many(void) {
  static const struct {
    const char *cluster;
    cm_coll coll;
    cm_algo algo;
  } rows[] = {
      {"h100-nvl256", CM_ALL_REDUCE, CM_ALGO_RING},
      {"h100-nvl256", CM_ALL_REDUCE, CM_ALGO_NVLS},
      {"dgx-h100", CM_ALL_TO_ALL, CM_ALGO_RING},
  };
  printf("\n128 groups of 8 (a node each) on 1024 GPUs at once, 16 MiB, fast form\n");
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    spec_cluster c;
    cm_model *cm = model_on(rows[i].cluster, 1024, &c);
    if (!cm) return 1;
    int *g = malloc(1024 * sizeof *g);
    sim_coll_job j[128];
    for (int k = 0; k < 1024; k++) g[k] = k;
    for (int k = 0; k < 128; k++)
      j[k] = (sim_coll_job){rows[i].coll, rows[i].algo, 16 << 20, 8, g + 8 * k, 0, 0};
    double w;
    if (run(cm, j, 128, SIM_FAST, &w)) return 1;
    printf("  %-12s %-5s %-4s  simulated %.4f ms  %6ld msgs  wall %.3f s\n", rows[i].cluster,
           cm_algo_name(rows[i].algo), rows[i].coll == CM_ALL_TO_ALL ? "a2a" : "AR",
           1e3 * j[0].time_s, j[0].messages, w);
    free(g);
    cm_model_destroy(cm);
  }
  return 0;
}

/* 8 groups {t, t+8, ..., t+56} at once on 64 GPUs of h100-nvl256 (one per node each, all
 * through the nodes' 2:1 NVLink Switch uplinks), 256 MiB, both forms. */
static int contended(void) {
  static const cm_algo algos[] = {CM_ALGO_RING, CM_ALGO_NVLS};
  printf("\n8 groups {t, t+8, ..., t+56} at once on 64 GPUs of h100-nvl256, 256 MiB all-reduce\n");
  int g[8][8];
  for (int t = 0; t < 8; t++)
    for (int d = 0; d < 8; d++) g[t][d] = t + 8 * d;
  for (size_t i = 0; i < sizeof algos / sizeof algos[0]; i++) {
    spec_cluster c;
    cm_model *cm = model_on("h100-nvl256", 64, &c);
    if (!cm) return 1;
    sim_coll_job a[8], b[8];
    for (int t = 0; t < 8; t++)
      a[t] = b[t] = (sim_coll_job){CM_ALL_REDUCE, algos[i], 256 << 20, 8, g[t], 0, 0};
    double wa, wb;
    if (run(cm, a, 8, SIM_FAST, &wa) || run(cm, b, 8, SIM_STEP, &wb)) return 1;
    printf("  %-5s fast %.4f ms %7ld msgs %5.2fs   step %.4f ms %7ld msgs %5.2fs\n",
           cm_algo_name(algos[i]), 1e3 * a[0].time_s, a[0].messages, wa, 1e3 * b[0].time_s,
           b[0].messages, wb);
    cm_model_destroy(cm);
  }
  return 0;
}

int main(int argc, char **argv) {
  (void)argv;
  if (argc > 1) {
    fprintf(stderr, "usage: bench_simcoll\n");
    return 2;
  }
  return alone() || contended() || many();
}
