/* podplan predict: score one plan with the analytical cost model, or price one collective
 * (--collective) on a group of all the cluster's GPUs. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "podplan/cm.h"
#include "podplan/store.h"

static const char usage[] =
    "usage: podplan predict --model M --cluster C [--gpus N] --plan P [--param name=value,...]\n"
    "                       [--calibration ID|latest|none] [--db F] [--json]\n"
    "       podplan predict --cluster C [--gpus N] --collective NAME --bytes S[,S...]\n"
    "                       [--param name=value,...] [--calibration ID|latest|none] [--json]\n"
    "\n"
    "Scores one plan with the analytical cost model: iteration time and its breakdown (compute,\n"
    "exposed TP/CP/EP communication, pipeline bubble, p2p, DP communication, optimizer),\n"
    "tokens/s, model TFLOP/s per GPU, MFU, HFU, memory per GPU and whether it fits. A plan\n"
    "that does not fit is a result (feasible false, and by how much), not an error.\n"
    "\n";

/* The options: getopt's table and the help's text. */
static const cli_opt opts[] = {
    {"model", "M", 'm', "preset name, JSON file or inline JSON (podplan presets lists presets)"},
    {"cluster", "C", 'c', "preset name, JSON file or inline JSON"},
    {"gpus", "N", 'g', "size the cluster to N GPUs"},
    {"plan", "P", 'p', "\"tp=8,pp=16,dp=8,mbs=1,gbs=1536,...\" or a plan JSON file"},
    {"param", "LIST", 'P',
     "override cost-model parameters, e.g. flash_attention=0,eff.net=0.9\n"
     "(--param help lists them with their defaults)"},
    {"calibration", "SEL", 'C',
     "the fitted values of a stored calibration of this cluster (an id, or\n"
     "latest; default none: the published defaults), read from --db or\n"
     "podplan.db; --param still overrides them; the score records it"},
    {"db", "F", 'd',
     "store the score (source costmodel) in F (with --collective: only\n"
     "where --calibration is read from)"},
    {"json", NULL, 'j',
     "one JSON object: iter_time_s, tokens_per_s, model_tflops_per_gpu, mfu,\n"
     "hfu, mem_gib_per_gpu, feasible, breakdown (seconds), memory (GiB), ..."},
    {"collective", "NAME", 'L',
     "instead of a plan: one collective on a group of all N GPUs, placed as\n"
     "the cluster orders them: all_reduce, all_gather, reduce_scatter,\n"
     "alltoall, broadcast or sendrecv; prints per size the time, the\n"
     "algorithm NCCL's tuner would pick, algbw and busbw (nccl-tests'\n"
     "conventions); --json: collective, cluster, gpus and rows of bytes,\n"
     "time_s, algorithm, algbw_gbps, busbw_gbps"},
    {"bytes", "S[,S...]", 'B',
     "per-rank buffer sizes as nccl-tests counts them: bytes, or with K, M,\n"
     "G (KiB, MiB, GiB), e.g. 64M,1G,8G"},
    {"help", NULL, 'h', "this text"},
};
#define NOPTS (sizeof opts / sizeof opts[0])

static const char *const CMD = "predict";

static void param_help(const spec_model *m) {
  cm_params p;
  cm_params_default(m, &p);
  printf("cost-model parameters (defaults%s%s):\n", m ? " for " : "", m ? m->name : "");
  for (size_t i = 0; i < cm_params_count(); i++) {
    double v = 0;
    cm_params_get(&p, cm_params_name(i), &v);
    printf("  %-22s %-12g %s\n", cm_params_name(i), v, cm_params_help(i));
  }
}

static json_t *memory_json(const cm_memory *m) {
  return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "weights_gib", m->weights_gib,
                   "grads_gib", m->grads_gib, "optimizer_gib", m->optimizer_gib,
                   "activations_gib", m->activations_gib, "other_gib", m->other_gib,
                   "overhead_gib", m->overhead_gib, "total_gib", m->total_gib);
}

static void print_text(const spec_model *m, const spec_cluster *c, const char *plan,
                       const cm_result *r) {
  printf("%s on %s (%d GPUs), plan %s\n", m->name, c->name, c->gpus, plan);
  char part[256];
  if (spec_cluster_partition_text(c, part, sizeof part)) printf("  NVLink partition %s\n", part);
  printf("  iteration        %10.4f s   (%d microbatches; slowest pipeline stage %d)\n",
         r->iter_time_s, r->microbatches, r->bottleneck_stage);
  printf("  tokens/s         %10.4g\n", r->tokens_per_s);
  printf("  model TFLOP/s    %10.1f per GPU   MFU %.1f%%   HFU %.1f%%  (peak %g TFLOP/s)\n",
         r->model_tflops_per_gpu, 100 * r->mfu, 100 * r->hfu, c->gpu.bf16_tflops);
  printf("  SC'21 formula    %10.1f TFLOP/s per GPU (96 B s l h^2 (1 + s/6h + V/16lh); 72 "
         "without full recompute)\n",
         r->sc21_tflops_per_gpu);
  const cm_breakdown *t = &r->t;
  struct {
    const char *name;
    double v;
  } rows[] = {{"compute", t->compute_s},   {"TP/SP comm", t->tp_comm_s},
              {"CP comm", t->cp_comm_s},   {"EP comm", t->ep_comm_s},
              {"PP bubble", t->pp_bubble_s}, {"PP p2p", t->pp_p2p_s},
              {"DP comm", t->dp_comm_s},   {"optimizer", t->optimizer_s}};
  printf("  breakdown        %10s %7s\n", "seconds", "%");
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
    printf("    %-14s %10.4f %7.1f\n", rows[i].name, rows[i].v, 100 * rows[i].v / r->iter_time_s);
  const cm_memory *mm = &r->mem;
  printf("  memory per GPU   %10s (fullest stage)\n", "GiB");
  struct {
    const char *name;
    double v;
  } mem[] = {{"weights", mm->weights_gib},         {"gradients", mm->grads_gib},
             {"optimizer", mm->optimizer_gib},     {"activations", mm->activations_gib},
             {"other", mm->other_gib},             {"overhead", mm->overhead_gib}};
  for (size_t i = 0; i < sizeof mem / sizeof mem[0]; i++)
    printf("    %-14s %10.2f\n", mem[i].name, mem[i].v);
  printf("    %-14s %10.2f of %g GiB: %s\n", "total", mm->total_gib, c->gpu.hbm_gib,
         r->feasible ? "fits" : "does NOT fit");
  if (!r->feasible)
    printf("  infeasible: %.2f GiB per GPU more than the %g GiB of %s\n", r->mem_excess_gib,
           c->gpu.hbm_gib, c->gpu.name);
}

/* --bytes: sizes with an optional K/M/G (binary) suffix; a one-line error and 2 otherwise. */
#define MAX_SIZES 64
static int parse_sizes(const char *arg, double *out, int *n) {
  *n = 0;
  const char *p = arg;
  while (*p) {
    char *end;
    errno = 0;
    double v = strtod(p, &end);
    if (end == p || errno || !(v > 0))
      return cli_usage_error(CMD, "--bytes: '%.40s' is not a positive size", p);
    double mul = *end == 'K' ? 1024.0 : *end == 'M' ? 1048576.0 : *end == 'G' ? 1073741824.0 : 1;
    if (mul > 1) end++;
    if (*end && *end != ',')
      return cli_usage_error(CMD, "--bytes: '%.40s' is not a size (bytes, or with K, M, G)", p);
    if (*n == MAX_SIZES) return cli_usage_error(CMD, "--bytes: more than %d sizes", MAX_SIZES);
    if (v * mul > 1e15) return cli_usage_error(CMD, "--bytes: %.40s is over 1e15 bytes", p);
    out[(*n)++] = v * mul;
    p = *end ? end + 1 : end;
    if (*end == ',' && !*p) return cli_usage_error(CMD, "--bytes: empty size after ','");
  }
  return *n ? 0 : cli_usage_error(CMD, "--bytes: no sizes");
}

/* --collective: the collective on a group of all the cluster's GPUs, GPU ids in order. */
static int predict_collective(const char *model, const char *cluster, int gpus, const char *name,
                              const char *bytes, const char *params, const char *calib,
                              const char *db, int json) {
  cm_coll coll;
  if (cm_coll_lookup(name, &coll))
    return cli_usage_error(CMD, "--collective: unknown collective '%.40s' (all_reduce, "
                                "all_gather, reduce_scatter, alltoall, broadcast, sendrecv)",
                           name);
  double sizes[MAX_SIZES];
  int ns;
  if (!bytes) return cli_usage_error(CMD, "--collective needs --bytes");
  if (parse_sizes(bytes, sizes, &ns)) return 2;
  if (!cluster) return cli_usage_error(CMD, "--collective needs --cluster");
  pp_err err = {0};
  spec_model m;
  spec_cluster cl;
  cm_params prm;
  cm_model *cm = NULL;
  /* the collective does not depend on the model; cm_model takes one */
  if (spec_model_load(model ? model : "gpt3-175b", &m, &err) ||
      spec_cluster_load(cluster, gpus, &cl, &err))
    return cli_fail(CMD, &err);
  cm_params_default(&m, &prm);
  int64_t cid;
  int rc = cli_calibration(CMD, calib, db, &cl, &prm, &cid);
  if (rc) return rc;
  if ((params && cm_params_apply(&prm, params, &err)) || cm_model_create(&m, &cl, &prm, &cm, &err))
    return cli_fail(CMD, &err);
  cm_place pl;
  cm_place_group(cm, cl.gpus, 1, &pl);
  json_t *rows = json_array();
  if (!json)
    printf("%s on %s, %d GPUs (%d per node, %d nodes, %d NVLink domains)\n  %14s %12s %-9s %10s "
           "%10s\n",
           name, cl.name, cl.gpus, pl.per_node, pl.nodes, pl.domains, "bytes", "time_us",
           "algorithm", "algbw_GB/s", "busbw_GB/s");
  for (int i = 0; i < ns; i++) {
    cm_algo a = CM_ALGO_RING;
    double t = cm_coll_best(cm, coll, sizes[i], &pl, &a);
    double alg = t > 0 ? sizes[i] / t / 1e9 : 0;
    double bus = alg * cm_coll_busbw_factor(coll, cl.gpus);
    const char *an = cl.gpus > 1 ? cm_algo_name(a) : "none";
    if (json)
      json_array_append_new(rows, json_pack("{s:f, s:f, s:s, s:f, s:f}", "bytes", sizes[i],
                                            "time_s", t, "algorithm", an, "algbw_gbps", alg,
                                            "busbw_gbps", bus));
    else
      printf("  %14.0f %12.2f %-9s %10.2f %10.2f\n", sizes[i], t * 1e6, an, alg, bus);
  }
  if (json) {
    json_t *o = json_pack("{s:s, s:s, s:i, s:o}", "collective", name, "cluster", cl.name, "gpus",
                          cl.gpus, "rows", rows);
    json_object_set_new(o, "calibration_id", cid ? json_integer(cid) : json_null());
    json_dumpf(o, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
    putchar('\n');
    json_decref(o);
  } else {
    json_decref(rows);
  }
  cm_model_destroy(cm);
  return 0;
}

static int save_score(const char *db, const spec_model *m, const spec_cluster *c,
                       const spec_plan *p, const cm_result *r, int64_t calib,
                       const char *params, pp_err *err) {
  store_score sc = {.source = STORE_SRC_COSTMODEL, .calibration_id = calib, .params = params,
                    .iter_time_s = r->iter_time_s,
                    .tokens_per_s = r->tokens_per_s, .mfu = r->mfu,
                    .mem_gib = r->mem_gib_per_gpu, .feasible = r->feasible};
  return cli_save(db, m, c, p, &sc, cli_breakdown_json(&r->t), NULL, 0, NULL, err);
}

int cmd_predict(int argc, char **argv) {
  struct option longs[NOPTS + 1];
  cli_opts_longs(opts, NOPTS, longs);
  const char *model = NULL, *cluster = NULL, *plan = NULL, *db = NULL, *params = NULL;
  const char *coll = NULL, *bytes = NULL, *calib = NULL;
  int gpus = 0, json = 0, first = 1, c;
  while ((c = cli_getopt(CMD, argc, argv, "h", longs, &first)) != -1) {
    switch (c) {
    case 'h':
      fputs(usage, stdout);
      cli_opts_help(stdout, opts, NOPTS, 18);
      return 0;
    case 'm': model = optarg; break;
    case 'c': cluster = optarg; break;
    case 'g':
      if (cli_int(CMD, "--gpus", optarg, 1, SPEC_MAX_GPUS, &gpus)) return 2;
      break;
    case 'p': plan = optarg; break;
    case 'P': params = optarg; break;
    case 'C': calib = optarg; break;
    case 'd': db = optarg; break;
    case 'j': json = 1; break;
    case 'L': coll = optarg; break;
    case 'B': bytes = optarg; break;
    default: return 2;
    }
  }
  if (optind < argc) return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
  if (coll || bytes) {
    if (!coll) return cli_usage_error(CMD, "--bytes needs --collective");
    if (plan) return cli_usage_error(CMD, "--collective takes no --plan");
    return predict_collective(model, cluster, gpus, coll, bytes, params, calib, db, json);
  }
  spec_model m;
  pp_err err = {0};
  if (params && strcmp(params, "help") == 0) {
    if (model && spec_model_load(model, &m, &err)) return cli_fail(CMD, &err);
    param_help(model ? &m : NULL);
    return 0;
  }
  spec_cluster cl;
  spec_plan p;
  int rc = cli_load_specs(CMD, model, cluster, gpus, plan, &m, &cl, &p);
  if (rc) return rc;
  cm_params prm;
  cm_params_default(&m, &prm);
  cm_model *cm = NULL;
  cm_result r;
  char text[SPEC_PLAN_STR_MAX] = "(non-uniform)";
  int64_t cid = 0;
  char pkey[1024] = "";
  if ((rc = cli_calibration(CMD, calib, db, &cl, &prm, &cid))) goto done;
  if ((params && cm_params_override(&prm, params, pkey, sizeof pkey, &err)) ||
      cm_model_create(&m, &cl, &prm, &cm, &err) || cm_eval(cm, &p, &r, &err) ||
      (db && save_score(db, &m, &cl, &p, &r, cid, pkey, &err))) {
    rc = cli_fail(CMD, &err);
    goto done;
  }
  if (!p.nstages) spec_plan_format(&p, text, sizeof text, &err);
  if (json) {
    char *pj = spec_plan_json(&p);
    json_t *o = json_pack(
        "{s:f, s:f, s:f, s:f, s:f, s:f, s:b, s:f, s:o, s:o, s:f, s:f, s:f, s:f, s:i, s:i, s:s, "
        "s:s, s:i, s:o}",
        "iter_time_s", r.iter_time_s, "tokens_per_s", r.tokens_per_s, "model_tflops_per_gpu",
        r.model_tflops_per_gpu, "mfu", r.mfu, "hfu", r.hfu, "mem_gib_per_gpu",
        r.mem_gib_per_gpu, "feasible", r.feasible, "mem_excess_gib", r.mem_excess_gib,
        "breakdown", cli_breakdown_json(&r.t), "memory", memory_json(&r.mem),
        "sc21_tflops_per_gpu", r.sc21_tflops_per_gpu, "model_flops", r.model_flops, "hw_flops",
        r.hw_flops, "sc21_flops", r.sc21_flops, "microbatches", r.microbatches,
        "bottleneck_stage", r.bottleneck_stage, "model", m.name, "cluster", cl.name, "gpus",
        cl.gpus, "plan", json_loads(pj, 0, NULL));
    free(pj);
    json_object_set_new(o, "calibration_id", cid ? json_integer(cid) : json_null());
    json_object_set_new(o, "params", pkey[0] ? json_string(pkey) : json_null());
    if (cl.nvlink.domain_gpus_hw) /* the job uses a partition of each NVLink domain */
      json_object_set_new(o, "nvlink_partition",
                          json_pack("{s:i, s:i}", "domain_gpus_used", cl.nvlink.domain_gpus,
                                    "domain_gpus", cl.nvlink.domain_gpus_hw));
    json_dumpf(o, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
    putchar('\n');
    json_decref(o);
  } else {
    print_text(&m, &cl, text, &r);
  }
done:
  cm_model_destroy(cm);
  spec_plan_clear(&p);
  return rc;
}
