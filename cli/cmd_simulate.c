/* podplan simulate: one training iteration of a plan in SimGrid, every group's traffic on the
 * links at once. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "podplan/cm.h"
#include "podplan/sim.h"
#include "podplan/store.h"
#include "podplan/tr.h"

static const char usage[] =
    "usage: podplan simulate --model M --cluster C [--gpus N] --plan P [--param name=value,...]\n"
    "                        [--fidelity fast|step] [--per-layer] [--trace out.json]\n"
    "                        [--platform-out F.xml] [--calibration ID|latest|none] [--db F]\n"
    "                        [--json]\n"
    "\n"
    "Simulates one training iteration of the plan in SimGrid: every GPU runs its pipeline\n"
    "schedule (compute times from the cost model), its TP/SP, CP and EP communication, its\n"
    "pipeline sends and receives and its data-parallel reduction on the fabric's links, all at\n"
    "once, so that groups sharing NICs, rails, NVLink Switch tapers and spines slow each other\n"
    "down. Prints the keys of predict from the simulated time, the cost model's prediction\n"
    "beside it, the wall time of the simulation and the utilisation of each level's links.\n"
    "\n";

/* The options: getopt's table and the help's text. */
static const cli_opt opts[] = {
    {"model", "M", 'm', "as for predict"},
    {"cluster", "C", 'c', "as for predict"},
    {"gpus", "N", 'g', "as for predict"},
    {"plan", "P", 'p', "as for predict"},
    {"param", "LIST", 'P', "as for predict"},
    {"calibration", "SEL", 'C',
     "as for predict: the simulator's collectives and compute take the\n"
     "calibrated values (they come from the cost model)"},
    {"fidelity", "F", 'f',
     "fast: each collective's steady-state flows (default); step: every\n"
     "message of every ring step (slow beyond a few hundred GPUs)"},
    {"per-layer", NULL, 'L',
     "run every collective of every layer by itself (fast fidelity's\n"
     "default: a chunk's ring-form collectives that nothing overlaps as\n"
     "one aggregated flow per group, its NVLS ones as one collective\n"
     "per group and kind, its CP exchanges as one flow beside their\n"
     "attention; the same bytes and latencies)"},
    {"trace", "out.json", 't', "write a Perfetto/Chrome trace, a track per GPU"},
    {"platform-out", "F", 'x', "write the generated SimGrid platform (XML)"},
    {"db", "F", 'd', "store the score with source 'sim'"},
    {"json", NULL, 'j',
     "one JSON object: the keys of predict plus sim_wall_s,\n"
     "predicted_iter_time_s, messages and link_utilisation"},
    {"help", NULL, 'h', "this text"},
};
#define NOPTS (sizeof opts / sizeof opts[0])

static const char *const CMD = "simulate";

static const char *ev_cat(sim_ev_kind k) {
  switch (k) {
  case SIM_EV_FORWARD:
  case SIM_EV_BACKWARD: return "compute";
  case SIM_EV_P2P: return "pipeline";
  case SIM_EV_DP:
  case SIM_EV_OPTIMIZER: return "tail";
  default: return "comm";
  }
}

static int write_trace(const char *path, const sim_result *r, int gpus, const char *title,
                       pp_err *err) {
  tr_slice *s = malloc((r->nevents + 1) * sizeof *s);
  if (!s) return pp_err_set(err, PP_NOMEM, "%s: out of memory", path);
  for (size_t i = 0; i < r->nevents; i++) {
    const sim_event *e = &r->events[i];
    s[i] = (tr_slice){e->gpu, sim_ev_name(e->kind), ev_cat(e->kind), e->start_s, e->end_s,
                      e->microbatch, e->chunk};
  }
  int rc = tr_chrome_write(path, title, "GPU", s, r->nevents, gpus, err);
  free(s);
  return rc;
}

static int save(const char *db, const spec_model *m, const spec_cluster *c, const spec_plan *p,
                const sim_result *r, double tokens_per_s, double mfu, const cm_result *pr,
                int64_t calib, const char *params, const char *trace, pp_err *err) {
  json_t *bd = cli_breakdown_json(&r->t);
  /* how the simulation ran, so a stored score says what produced it */
  json_object_set_new(bd, "sim_wall_s", json_real(r->sim_wall_s));
  json_object_set_new(bd, "messages", json_integer((json_int_t)r->messages));
  if (trace) json_object_set_new(bd, "trace", cli_path_json(trace)); /* podplan report's index */
  store_score sc = {.source = STORE_SRC_SIM, .calibration_id = calib, .params = params,
                    .iter_time_s = r->iter_time_s,
                    .tokens_per_s = tokens_per_s, .mfu = mfu, .mem_gib = pr->mem_gib_per_gpu,
                    .feasible = pr->feasible};
  return cli_save(db, m, c, p, &sc, bd, NULL, 0, NULL, err);
}

int cmd_simulate(int argc, char **argv) {
  struct option longs[NOPTS + 1];
  cli_opts_longs(opts, NOPTS, longs);
  const char *model = NULL, *cluster = NULL, *plan = NULL, *params = NULL, *trace = NULL,
             *platform = NULL, *db = NULL, *calib = NULL;
  int gpus = 0, json = 0, first = 1, c, per_layer = 0;
  sim_fidelity fid = SIM_FAST;
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
    case 'f':
      if (strcmp(optarg, "fast") == 0)
        fid = SIM_FAST;
      else if (strcmp(optarg, "step") == 0)
        fid = SIM_STEP;
      else
        return cli_usage_error(CMD, "--fidelity: '%s' is not fast or step", optarg);
      break;
    case 't': trace = optarg; break;
    case 'x': platform = optarg; break;
    case 'd': db = optarg; break;
    case 'j': json = 1; break;
    case 'L': per_layer = 1; break;
    case 'C': calib = optarg; break;
    default: return 2;
    }
  }
  if (optind < argc) return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
  spec_model m;
  spec_cluster cl;
  spec_plan p;
  int rc = cli_load_specs(CMD, model, cluster, gpus, plan, &m, &cl, &p);
  if (rc) return rc;
  pp_err err = {0};
  cm_params prm;
  cm_params_default(&m, &prm);
  cm_model *cm = NULL;
  cm_result pr;
  sim_result r;
  memset(&r, 0, sizeof r);
  sim_opts o = {fid, platform, trace != NULL, per_layer};
  int64_t cid = 0;
  char pkey[1024] = "";
  if ((rc = cli_calibration(CMD, calib, db, &cl, &prm, &cid))) goto done;
  if ((params && cm_params_override(&prm, params, pkey, sizeof pkey, &err)) ||
      cm_model_create(&m, &cl, &prm, &cm, &err) || cm_eval(cm, &p, &pr, &err) ||
      sim_run(cm, &p, &o, &r, &err)) {
    rc = cli_fail(CMD, &err);
    goto done;
  }
  double T = r.iter_time_s;
  cm_result at = pr; /* the cost model's result, its throughput at the simulated time */
  cm_throughput(cm, &p, T, &at);
  double tps = at.tokens_per_s, mfu = at.mfu, hfu = at.hfu;
  char text[SPEC_PLAN_STR_MAX] = "(non-uniform)";
  if (!p.nstages) spec_plan_format(&p, text, sizeof text, &err);
  if (trace) {
    char title[512];
    snprintf(title, sizeof title, "podplan simulate %s on %s (%d GPUs) %s", m.name, cl.name,
             cl.gpus, text);
    if (write_trace(trace, &r, cl.gpus, title, &err)) {
      rc = cli_fail(CMD, &err);
      goto done;
    }
  }
  if (db && save(db, &m, &cl, &p, &r, tps, mfu, &pr, cid, pkey, trace, &err)) {
    rc = cli_fail(CMD, &err);
    goto done;
  }
  if (json) {
    json_t *util = json_object();
    for (int l = 0; l < CM_NLEVELS; l++)
      if (r.levels_present & (1 << l))
        json_object_set_new(util, cm_level_name((cm_level)l),
                            json_pack("{s:f,s:f}", "mean", r.util_mean[l], "max", r.util_max[l]));
    char *pj = spec_plan_json(&p);
    json_t *out = json_pack(
        "{s:f,s:f,s:f,s:f,s:f,s:f,s:b,s:o,s:f,s:f,s:I,s:o,s:s,s:s,s:i,s:s,s:o}",
        "iter_time_s", T, "tokens_per_s", tps, "model_tflops_per_gpu",
        at.model_tflops_per_gpu, "mfu", mfu, "hfu", hfu, "mem_gib_per_gpu",
        pr.mem_gib_per_gpu, "feasible", pr.feasible, "breakdown", cli_breakdown_json(&r.t),
        "sim_wall_s", r.sim_wall_s, "predicted_iter_time_s",
        pr.iter_time_s, "messages", (json_int_t)r.messages, "link_utilisation", util, "model",
        m.name, "cluster", cl.name, "gpus", cl.gpus, "fidelity",
        fid == SIM_FAST ? "fast" : "step", "plan", json_loads(pj, 0, NULL));
    free(pj);
    json_object_set_new(out, "calibration_id", cid ? json_integer(cid) : json_null());
    json_object_set_new(out, "params", pkey[0] ? json_string(pkey) : json_null());
    json_dumpf(out, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
    putchar('\n');
    json_decref(out);
  } else {
    printf("%s on %s (%d GPUs), plan %s\n", m.name, cl.name, cl.gpus, text);
    printf("  simulated iteration %10.4f s   (cost model %.4f s, %+.1f%%)\n", T, pr.iter_time_s,
           100 * (T / pr.iter_time_s - 1));
    printf("  tokens/s            %10.4g\n", tps);
    printf("  model TFLOP/s       %10.1f per GPU   MFU %.1f%%   HFU %.1f%%\n",
           at.model_tflops_per_gpu, 100 * mfu, 100 * hfu);
    printf("  slowest GPU's time  %10s %7s\n", "seconds", "%");
    struct {
      const char *name;
      double v;
    } rows[] = {{"compute", r.t.compute_s},       {"TP/SP comm", r.t.tp_comm_s},
                {"CP comm", r.t.cp_comm_s},       {"EP comm", r.t.ep_comm_s},
                {"pipeline wait", r.t.pp_bubble_s}, {"DP comm", r.t.dp_comm_s},
                {"optimizer", r.t.optimizer_s}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
      printf("    %-16s %10.4f %7.1f\n", rows[i].name, rows[i].v, 100 * rows[i].v / T);
    printf("  link utilisation    %10s %7s\n", "mean", "max");
    for (int l = 0; l < CM_NLEVELS; l++)
      if (r.levels_present & (1 << l))
        printf("    %-16s %9.1f%% %6.1f%%\n", cm_level_name((cm_level)l), 100 * r.util_mean[l],
               100 * r.util_max[l]);
    printf("  memory per GPU      %10.2f GiB (cost model): %s\n", pr.mem_gib_per_gpu,
           pr.feasible ? "fits" : "does NOT fit");
    printf("  simulation          %10.3f s wall, %ld messages, %d GPUs, %s fidelity%s\n",
           r.sim_wall_s, r.messages, r.ranks, fid == SIM_FAST ? "fast" : "step",
           fid == SIM_FAST && per_layer ? ", every collective by itself" : "");
  }
done:
  sim_result_clear(&r);
  cm_model_destroy(cm);
  spec_plan_clear(&p);
  return rc;
}
