/* podplan predict: score one plan with the analytical cost model. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "podplan/cm.h"
#include "podplan/store.h"

static const char usage[] =
    "usage: podplan predict --model M --cluster C [--gpus N] --plan P [--param name=value,...]\n"
    "                       [--calibration ID] [--db F] [--json]\n"
    "\n"
    "Scores one plan with the analytical cost model: iteration time and its breakdown (compute,\n"
    "exposed TP/CP/EP communication, pipeline bubble, p2p, DP communication, optimizer),\n"
    "tokens/s, model TFLOP/s per GPU, MFU, HFU, memory per GPU and whether it fits. A plan\n"
    "that does not fit is a result (feasible false, and by how much), not an error.\n"
    "\n"
    "  --model M          preset name, JSON file or inline JSON (podplan presets lists presets)\n"
    "  --cluster C        preset name, JSON file or inline JSON\n"
    "  --gpus N           size the cluster to N GPUs\n"
    "  --plan P           \"tp=8,pp=16,dp=8,mbs=1,gbs=1536,...\" or a plan JSON file\n"
    "  --param LIST       override cost-model parameters, e.g. flash_attention=0,eff.net=0.9\n"
    "                     (--param help lists them with their defaults)\n"
    "  --calibration ID   use that stored calibration (calibrations arrive with 'calibrate')\n"
    "  --db F             store the score (source costmodel) in F\n"
    "  --json             one JSON object: iter_time_s, tokens_per_s, model_tflops_per_gpu, mfu,\n"
    "                     hfu, mem_gib_per_gpu, feasible, breakdown (seconds), memory (GiB), ...\n"
    "  -h, --help         this text\n";

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

static int save_score(const char *db, const spec_model *m, const spec_cluster *c,
                       const spec_plan *p, const cm_result *r, pp_err *err) {
  store_score sc = {.source = STORE_SRC_COSTMODEL, .iter_time_s = r->iter_time_s,
                    .tokens_per_s = r->tokens_per_s, .mfu = r->mfu,
                    .mem_gib = r->mem_gib_per_gpu, .feasible = r->feasible};
  return cli_save(db, m, c, p, &sc, cli_breakdown_json(&r->t), NULL, 0, NULL, err);
}

int cmd_predict(int argc, char **argv) {
  static const struct option longs[] = {
      {"model", required_argument, NULL, 'm'},   {"cluster", required_argument, NULL, 'c'},
      {"gpus", required_argument, NULL, 'g'},    {"plan", required_argument, NULL, 'p'},
      {"param", required_argument, NULL, 'P'},   {"calibration", required_argument, NULL, 'C'},
      {"db", required_argument, NULL, 'd'},      {"json", no_argument, NULL, 'j'},
      {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
  const char *model = NULL, *cluster = NULL, *plan = NULL, *db = NULL, *params = NULL;
  int gpus = 0, json = 0, first = 1, c, calib = 0;
  while ((c = cli_getopt(CMD, argc, argv, "h", longs, &first)) != -1) {
    switch (c) {
    case 'h': fputs(usage, stdout); return 0;
    case 'm': model = optarg; break;
    case 'c': cluster = optarg; break;
    case 'g':
      if (cli_int(CMD, "--gpus", optarg, 1, SPEC_MAX_GPUS, &gpus)) return 2;
      break;
    case 'p': plan = optarg; break;
    case 'P': params = optarg; break;
    case 'C':
      if (cli_int(CMD, "--calibration", optarg, 1, 2147483647, &calib)) return 2;
      break;
    case 'd': db = optarg; break;
    case 'j': json = 1; break;
    default: return 2;
    }
  }
  if (optind < argc) return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
  spec_model m;
  pp_err err = {0};
  if (params && strcmp(params, "help") == 0) {
    if (model && spec_model_load(model, &m, &err)) return cli_fail(CMD, &err);
    param_help(model ? &m : NULL);
    return 0;
  }
  if (calib) {
    pp_err_set(&err, PP_NOTFOUND, "--calibration %d: no calibrations exist yet", calib);
    return cli_fail(CMD, &err);
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
  if ((params && cm_params_apply(&prm, params, &err)) || cm_model_create(&m, &cl, &prm, &cm, &err) ||
      cm_eval(cm, &p, &r, &err) || (db && save_score(db, &m, &cl, &p, &r, &err))) {
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
