/* bench_costmodel: cost-model evaluations per second on one core.
 *
 * Enumerates every valid uniform plan of a model on a cluster (tp, pp, cp dividing the GPUs;
 * dp derived; mbs 1..8; vpp 1..4; sp; recompute none/selective/full; zero 0/1), then evaluates
 * the whole set over and over for at least --seconds and reports
 *   evaluations per second = evaluations / wall seconds (CLOCK_MONOTONIC, one thread).
 * It also reports the first pass alone, when the model's caches of layer costs and collective
 * times are still empty. Before it reports, it verifies: every result is finite and positive, and a second pass over
 * a sample gives bit-identical iteration times (the model is deterministic).
 *
 * usage: bench_costmodel [--model M] [--cluster C] [--gpus N] [--seconds S] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "podplan/cm.h"
#include "podplan/spec.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  const char *model = "gpt3-175b", *cluster = "dgx-h100";
  int gpus = 1024;
  double seconds = 2.0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--model")) model = argv[i + 1];
    else if (!strcmp(argv[i], "--cluster")) cluster = argv[i + 1];
    else if (!strcmp(argv[i], "--gpus")) gpus = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
    else {
      fprintf(stderr, "usage: bench_costmodel [--model M] [--cluster C] [--gpus N] [--seconds S]\n");
      return 2;
    }
  }
  pp_err err = {0};
  spec_model m;
  spec_cluster c;
  if (spec_model_load(model, &m, &err) || spec_cluster_load(cluster, gpus, &c, &err)) {
    fprintf(stderr, "bench_costmodel: %s\n", err.msg);
    return 2;
  }
  /* the plan space */
  size_t cap = 1 << 16, n = 0;
  spec_plan *plans = malloc(cap * sizeof *plans);
  int gbs = 1536;
  for (int tp = 1; tp <= 64; tp *= 2)
    for (int pp = 1; pp <= m.layers; pp++)
      for (int cp = 1; cp <= 8; cp *= 2)
        for (int mbs = 1; mbs <= 8; mbs *= 2)
          for (int vpp = 1; vpp <= 4; vpp++)
            for (int sp = 0; sp <= 1; sp++)
              for (int rc = 0; rc <= 2; rc++)
                for (int zero = 0; zero <= 1; zero++) {
                  long long mp = (long long)tp * pp * cp;
                  if (mp > c.gpus || c.gpus % mp) continue;
                  spec_plan p = {.tp = tp, .pp = pp, .cp = cp, .ep = 1, .mbs = mbs, .gbs = gbs,
                                 .vpp = vpp, .sp = sp, .recompute = (spec_recompute)rc,
                                 .zero = zero, .schedule = SPEC_SCHED_1F1B};
                  pp_err e = {0};
                  if (spec_plan_resolve(&p, &m, &c, &e)) continue;
                  if (n == cap) plans = realloc(plans, (cap *= 2) * sizeof *plans);
                  plans[n++] = p;
                }
  cm_model *cm = NULL;
  if (!n || cm_model_create(&m, &c, NULL, &cm, &err)) {
    fprintf(stderr, "bench_costmodel: %s\n", n ? err.msg : "no valid plan");
    return 1;
  }
  /* cold: one pass over every plan with empty caches (layer costs and collective times are
   * cached per model across evaluations) */
  double c0 = now();
  for (size_t i = 0; i < n; i++) {
    cm_result r;
    cm_eval(cm, &plans[i], &r, &err);
  }
  double cold = n / (now() - c0);
  /* verify */
  double *first = malloc(n * sizeof *first);
  for (size_t i = 0; i < n; i++) {
    cm_result r;
    if (cm_eval(cm, &plans[i], &r, &err) || !isfinite(r.iter_time_s) || r.iter_time_s <= 0) {
      fprintf(stderr, "bench_costmodel: plan %zu: bad result (%s)\n", i, err.msg);
      return 1;
    }
    first[i] = r.iter_time_s;
  }
  for (size_t i = 0; i < n; i += 97) {
    cm_result r;
    cm_eval(cm, &plans[i], &r, &err);
    if (r.iter_time_s != first[i]) {
      fprintf(stderr, "bench_costmodel: plan %zu: not deterministic\n", i);
      return 1;
    }
  }
  /* measure */
  size_t evals = 0;
  double sink = 0, t0 = now(), t1;
  do {
    for (size_t i = 0; i < n; i++) {
      cm_result r;
      cm_eval(cm, &plans[i], &r, &err);
      sink += r.iter_time_s;
    }
    evals += n;
    t1 = now();
  } while (t1 - t0 < seconds);
  double rate = evals / (t1 - t0);
  printf("bench_costmodel: %s on %s (%d GPUs): %zu distinct valid uniform plans\n", m.name,
         c.name, c.gpus, n);
  printf("  %zu evaluations in %.3f s on one core: %.0f evaluations/s (%.0f ns each)\n", evals,
         t1 - t0, rate, 1e9 / rate);
  printf("  first pass with empty caches: %.0f evaluations/s (%.0f ns each)\n", cold, 1e9 / cold);
  printf("  verified: all finite and positive, deterministic (checksum %.6g)\n", sink / evals);
  cm_model_destroy(cm);
  free(first);
  free(plans);
  return 0;
}
