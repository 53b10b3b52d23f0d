/* bench_search: wall time of the search methods on one case, and what each found.
 *
 * For each method asked (default: exhaustive, megatron, two-level, global) it runs
 * search_run on the model and cluster with the given global batch and threads, and prints
 * one line: method, wall seconds (CLOCK_MONOTONIC around search_run), cost-model evaluations,
 * plans pruned, best iteration time, the lower bound and gap (global), and the best plan.
 * A method that fails prints its error and the benchmark goes on.
 *
 * usage: bench_search [--model M] [--cluster C] [--gpus N] [--gbs B] [--threads T]
 *                     [--gap G] [--time-limit S] [--methods a,b,...] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podplan/search.h"

static void describe(const spec_plan *p, char *buf, size_t n) {
  if (!spec_plan_format(p, buf, n, NULL)) return;
  size_t used = (size_t)snprintf(buf, n, "%d stages m=%d sp=%d zero=%d:", p->nstages,
                                 p->microbatches, p->sp, p->zero);
  for (int i = 0; i < p->nstages && used < n; i++) {
    const spec_stage *s = &p->stages[i];
    used += (size_t)snprintf(buf + used, n - used, " [L%d-%d g%d+%d t%d c%d d%d %s]",
                             s->layer_begin, s->layer_end - 1, s->gpus[0], s->ngpus, s->tp, s->cp,
                             s->dp, spec_recompute_name(s->recompute));
  }
}

int main(int argc, char **argv) {
  const char *model = "gpt3-175b", *cluster = "dgx-h100", *methods = "exhaustive,megatron,two-level,global";
  int gpus = 1024, gbs = 1536, threads = 0;
  double gap = 0.01, limit = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const char *o = argv[i], *v = argv[i + 1];
    if (!strcmp(o, "--model")) model = v;
    else if (!strcmp(o, "--cluster")) cluster = v;
    else if (!strcmp(o, "--gpus")) gpus = atoi(v);
    else if (!strcmp(o, "--gbs")) gbs = atoi(v);
    else if (!strcmp(o, "--threads")) threads = atoi(v);
    else if (!strcmp(o, "--gap")) gap = atof(v);
    else if (!strcmp(o, "--time-limit")) limit = atof(v);
    else if (!strcmp(o, "--methods")) methods = v;
    else {
      fprintf(stderr, "usage: bench_search [--model M] [--cluster C] [--gpus N] [--gbs B] "
                      "[--threads T] [--gap G] [--time-limit S] [--methods a,b,...]\n");
      return 2;
    }
  }
  pp_err err = {0};
  spec_model m;
  spec_cluster c;
  cm_model *cm = NULL;
  if (spec_model_load(model, &m, &err) || spec_cluster_load(cluster, gpus, &c, &err) ||
      cm_model_create(&m, &c, NULL, &cm, &err)) {
    fprintf(stderr, "bench_search: %s\n", err.msg);
    return 2;
  }
  printf("bench_search: %s on %d GPUs of %s, gbs %d\n", model, c.gpus, cluster, gbs);
  char list[256];
  snprintf(list, sizeof list, "%s", methods);
  for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
    search_opts o;
    search_method me;
    if (search_method_parse(tok, &me, &err)) {
      fprintf(stderr, "bench_search: %s\n", err.msg);
      return 2;
    }
    search_opts_default(me, gbs, &o);
    o.threads = threads, o.gap = gap, o.time_limit_s = limit, o.top = 5;
    search_result r;
    if (search_run(cm, &o, &r, &err)) {
      printf("%-10s error: %s\n", tok, err.msg);
      pp_err_clear(&err);
      continue;
    }
    char plan[2048] = "-";
    if (r.ntop) describe(&r.top[0].plan, plan, sizeof plan);
    printf("%-10s wall %7.2f s  evals %9lld  pruned %9lld  space %.3g  units %d/%d  best %.4f s"
           "  bound %.4f s  gap %.2f%%%s\n  best: %s\n",
           tok, r.wall_s, r.evaluations, r.pruned, r.space_size, r.units_done, r.units, r.best_s,
           r.lower_bound_s, 100 * r.gap, r.complete ? "" : "  (stopped early)", plan);
    if (!r.ntop) printf("  no feasible plan: %s\n", r.why);
    search_result_clear(&r);
  }
  cm_model_destroy(cm);
  return 0;
}
