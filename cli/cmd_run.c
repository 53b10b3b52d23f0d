/* podplan run: a plan's training iteration executed for real, one rank per GPU (or CPU
 * process) under mpirun/srun. Rank 0 gathers every rank's op times and writes the score
 * (source backend), the per-op measurements and a trace; errors every rank shares (bad
 * input) are printed once, by rank 0; a failing rank prints its own and aborts the job so
 * that no rank hangs. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "podplan/be.h"
#include "podplan/store.h"
#include "podplan/tr.h"

static const char usage[] =
    "usage: podplan run (--model M --cluster C [--gpus N] (--plan P | --plan-id ID))\n"
    "                   [--device cpu|cuda] [--layers L] [--shrink W] [--warmup W] [--iters N]\n"
    "                   [--no-verify] [--timeout S] [--trace out.json] [--db F] [--json]\n"
    "                   [--inject fail:R|hang:R]\n"
    "\n"
    "Executes the plan's training iteration for real, one rank per GPU (or CPU process), under\n"
    "mpirun or srun (mpirun -n <ranks the plan uses> podplan run ...): GEMMs, attention,\n"
    "memory-bound ops, TP/CP/EP collectives and pipeline sends in the schedule's order, then the\n"
    "data-parallel reduction and the optimizer, with the shapes the cost model prices. The first\n"
    "iteration checks every collective and message; W warm-up and N timed iterations follow.\n"
    "Rank 0 stores the iteration time as a score (source 'backend'), every op's mean time as a\n"
    "measurement, and writes a Perfetto trace (a track per rank). It also prints the cost\n"
    "model's time for the plan as run (nothing overlapped, as the backend runs it): what a\n"
    "calibration from runs (calibrate --from-search) makes agree with the measurement.\n"
    "\n";

/* The options: getopt's table and the help's text. */
static const cli_opt opts[] = {
    {"model", "M", 'm', "as for predict"},
    {"cluster", "C", 'c', "as for predict"},
    {"gpus", "N", 'g', "as for predict"},
    {"plan", "P", 'p', "as for predict"},
    {"plan-id", "ID", 'P', "a plan stored in the database (with --model and --cluster)"},
    {"device", "D", 'D', "cpu: OpenBLAS + MPI (default); cuda: cuBLAS + NCCL"},
    {"layers", "L", 'L', "run L transformer layers instead of all (spread like the plan's)"},
    {"shrink", "W", 'W', "divide hidden, ffn, heads, kv heads and vocab by W (small machines)"},
    {"warmup", "W", 'w', "untimed iterations after the checking one (default 1)"},
    {"iters", "N", 'n', "timed iterations (default 3)"},
    {"no-verify", NULL, 'V', "skip the checking iteration"},
    {"timeout", "S", 't', "a rank waiting longer than S seconds on a peer fails (default 120)"},
    {"trace", "F", 'T', "write the last timed iteration as a Perfetto trace"},
    {"db", "F", 'd', "database (default podplan.db)"},
    {"json", NULL, 'j', "on rank 0: iter_time_s, ranks, device, verified, predicted_s, ..."},
    {"inject", "X", 'i',
     "fail:R: rank R exits before the timed iterations (to check failure\n"
     "handling); hang:R: rank R stops answering instead"},
    {"help", NULL, 'h', "this text"},
};
#define NOPTS (sizeof opts / sizeof opts[0])

static const char *const CMD = "run";

typedef struct run_opts {
  const char *model, *cluster, *plan, *device, *trace, *db;
  long long plan_id;
  int gpus, layers, shrink, warmup, iters, verify, json, inject_rank, inject_hang;
  double timeout_s;
} run_opts;

/* Prints an error every rank shares, once. */
static int fail_once(int rank, const pp_err *err) {
  if (rank == 0) return cli_fail(CMD, err);
  return pp_exit_status(err->code);
}

static int parse(int argc, char **argv, run_opts *o) {
  struct option longs[NOPTS + 1];
  cli_opts_longs(opts, NOPTS, longs);
  int first = 1, c, tmo = 120;
  while ((c = cli_getopt(CMD, argc, argv, "h", longs, &first)) != -1) {
    switch (c) {
    case 'h':
      fputs(usage, stdout);
      cli_opts_help(stdout, opts, NOPTS, 19);
      return -1;
    case 'm': o->model = optarg; break;
    case 'c': o->cluster = optarg; break;
    case 'p': o->plan = optarg; break;
    case 'D': o->device = optarg; break;
    case 'T': o->trace = optarg; break;
    case 'd': o->db = optarg; break;
    case 'j': o->json = 1; break;
    case 'V': o->verify = 0; break;
    case 'g': if (cli_int(CMD, "--gpus", optarg, 1, SPEC_MAX_GPUS, &o->gpus)) return 2; break;
    case 'L': if (cli_int(CMD, "--layers", optarg, 1, 100000, &o->layers)) return 2; break;
    case 'W': if (cli_int(CMD, "--shrink", optarg, 1, 1024, &o->shrink)) return 2; break;
    case 'w': if (cli_int(CMD, "--warmup", optarg, 0, 1000, &o->warmup)) return 2; break;
    case 'n': if (cli_int(CMD, "--iters", optarg, 1, 100000, &o->iters)) return 2; break;
    case 't': if (cli_int(CMD, "--timeout", optarg, 1, 86400, &tmo)) return 2; break;
    case 'P': {
      int id = 0;
      if (cli_int(CMD, "--plan-id", optarg, 1, 2147483647, &id)) return 2;
      o->plan_id = id;
      break;
    }
    case 'i': {
      const char *colon = strchr(optarg, ':');
      int r = 0;
      if (!colon || (strncmp(optarg, "fail:", 5) && strncmp(optarg, "hang:", 5)) ||
          cli_int(CMD, "--inject", colon + 1, 0, 1 << 20, &r))
        return cli_usage_error(CMD, "--inject: '%s' is not fail:RANK or hang:RANK", optarg);
      o->inject_rank = r, o->inject_hang = optarg[0] == 'h';
      break;
    }
    default: return 2;
    }
  }
  if (optind < argc) return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
  o->timeout_s = tmo;
  if (!o->model || !o->cluster || (!o->plan && !o->plan_id))
    return cli_usage_error(CMD, "--model, --cluster and --plan (or --plan-id) are required");
  if (o->plan && o->plan_id) return cli_usage_error(CMD, "give --plan or --plan-id, not both");
  return 0;
}

/* Specs and plan, identically on every rank. */
static int load(const run_opts *o, spec_model *m, spec_cluster *c, spec_plan *p, pp_err *err) {
  memset(p, 0, sizeof *p);
  if (spec_model_load(o->model, m, err) || spec_cluster_load(o->cluster, o->gpus, c, err) ||
      spec_pair_validate(m, c, err))
    return err->code;
  if (o->plan_id) {
    store *s = NULL;
    int rc = store_open(o->db, NULL, &s, err);
    if (!rc) rc = store_get_plan(s, o->plan_id, p, err);
    store_close(s);
    if (rc) return rc;
  } else if (spec_plan_parse(o->plan, p, err)) {
    return err->code;
  }
  if (spec_plan_resolve(p, m, c, err)) {
    spec_plan_clear(p);
    return err->code;
  }
  return PP_OK;
}

static const char *const meas_kind[BE_NOPKINDS] = {"gemm", "op", "mem", "coll", "p2p", "p2p", "op"};

static int save(const run_opts *o, const be_plan *bp, const spec_cluster *c, const spec_plan *p,
                const be_job_result *g, const cm_result *at, double predicted_s,
                const char *run_key, const double kinds[BE_NEVS], int *stored, pp_err *err) {
  size_t total = 0;
  for (int r = 0; r < g->nranks; r++) total += (size_t)g->nops[r];
  store_measurement *ms = calloc(total + (size_t)g->iters, sizeof *ms);
  char **shapes = calloc(total, sizeof *shapes);
  double *own = calloc(total + 1, sizeof *own);
  int *stride = calloc((size_t)bp->ngroups + 1, sizeof *stride);
  char place[SPEC_NGRPS][32];
  for (int k = 0; k < SPEC_NGRPS; k++) snprintf(place[k], sizeof place[k], "%s", spec_grp_name(k));
  if (!ms || !shapes || !own || !stride) {
    free(ms), free(shapes), free(own), free(stride);
    return pp_err_set(err, PP_NOMEM, "run: out of memory");
  }
  be_job_coll_own(bp, g, own);
  for (int k = 0; k < bp->ngroups; k++) stride[k] = be_group_stride(bp, k, c);
  size_t n = 0;
  for (int r = 0; r < g->nranks; r++)
    for (int i = 0; i < g->nops[r]; i++) {
      const be_op *op = &bp->progs[r].ops[i];
      double t = g->op_s[g->displ[r] + i];
      if (!(t > 0)) continue;
      json_t *sh = json_pack("{s:i,s:s,s:s,s:i,s:i}", "rank", r, "ev", be_ev_name(op->ev), "op",
                             be_op_kind_name(op->kind), "mb", op->mb, "index", i);
      if (op->kind == BE_OP_GEMM || op->kind == BE_OP_ATTN) {
        json_object_set_new(sh, "m", json_integer(op->m));
        json_object_set_new(sh, "n", json_integer(op->n));
        json_object_set_new(sh, "k", json_integer(op->k));
        json_object_set_new(sh, "batch", json_integer(op->batch));
      }
      if (op->kind == BE_OP_ATTN) { /* calibrate tells a recomputed forward from a backward */
        json_object_set_new(sh, "causal", json_boolean(op->causal));
        json_object_set_new(sh, "recompute", json_boolean(op->recompute));
      }
      if (op->kind == BE_OP_SEND || op->kind == BE_OP_RECV)
        json_object_set_new(sh, "peer", json_integer(op->peer));
      if (op->kind == BE_OP_COLL) { /* calibrate fits own_s where the stride places the group */
        double o_s = own[g->displ[r] + i];
        if (o_s > 0) json_object_set_new(sh, "own_s", json_real(o_s));
        if (stride[op->group]) json_object_set_new(sh, "stride", json_integer(stride[op->group]));
      }
      shapes[n] = json_dumps(sh, JSON_COMPACT | JSON_SORT_KEYS);
      json_decref(sh);
      store_measurement *m = &ms[n];
      m->run_key = run_key, m->seq = (int)n, m->kind = meas_kind[op->kind];
      m->name = op->kind == BE_OP_COLL ? cm_coll_name(op->coll) : op->name;
      m->device = o->device, m->shape_json = shapes[n], m->bytes = op->bytes, m->time_s = t;
      m->source = "podplan run";
      if (op->kind == BE_OP_COLL) {
        const be_group *grp = &bp->groups[op->group];
        m->ranks = grp->n, m->placement = place[grp->kind];
        m->algbw_gbps = op->bytes / t / 1e9;
        m->busbw_gbps = m->algbw_gbps * cm_coll_busbw_factor(op->coll, grp->n);
      }
      n++;
    }
  size_t nops_rows = n;
  for (int it = 0; it < g->iters; it++)
    ms[n++] = (store_measurement){.run_key = run_key, .seq = (int)(nops_rows + it), .kind = "iter",
                                  .name = "iteration", .device = o->device,
                                  .time_s = g->job_s[it], .ranks = g->nranks,
                                  .source = "podplan run"};
  cm_breakdown t = {.compute_s = kinds[BE_EV_FORWARD] + kinds[BE_EV_BACKWARD],
                    .tp_comm_s = kinds[BE_EV_TP], .cp_comm_s = kinds[BE_EV_CP],
                    .ep_comm_s = kinds[BE_EV_EP], .pp_p2p_s = kinds[BE_EV_P2P],
                    .dp_comm_s = kinds[BE_EV_DP], .optimizer_s = kinds[BE_EV_OPTIMIZER]};
  json_t *bd = cli_breakdown_json(&t);
  json_object_update_new(bd, json_pack("{s:s,s:i,s:i,s:i,s:s,s:f}", "device", o->device,
                                       "layers_run", bp->model.layers, "shrink", bp->shrink,
                                       "ranks", bp->nranks, "run_key", run_key, "predicted_s",
                                       predicted_s));
  if (!(predicted_s > 0)) json_object_del(bd, "predicted_s");
  if (o->trace) json_object_set_new(bd, "trace", cli_path_json(o->trace)); /* podplan report */
  store_score sc = {.source = STORE_SRC_BACKEND, .iter_time_s = at->iter_time_s,
                    .tokens_per_s = at->tokens_per_s, .mfu = at->mfu, .feasible = 1};
  size_t added = 0;
  int rc = cli_save(o->db, &bp->model, c, p, &sc, bd, ms, n, &added, err);
  *stored = (int)added;
  for (size_t i = 0; i < nops_rows; i++) free(shapes[i]);
  free(shapes), free(ms), free(own), free(stride);
  return rc;
}

static int write_trace(const char *path, const be_plan *bp, const be_job_result *g,
                       const char *title, pp_err *err) {
  size_t total = 0;
  for (int r = 0; r < g->nranks; r++) total += (size_t)g->nops[r];
  tr_slice *s = malloc((total + 1) * sizeof *s);
  if (!s) return pp_err_set(err, PP_NOMEM, "%s: out of memory", path);
  size_t n = 0;
  for (int r = 0; r < g->nranks; r++) {
    const double *t = g->start + g->displ[r] + r;
    for (int i = 0; i < g->nops[r]; i++) {
      const be_op *op = &bp->progs[r].ops[i];
      s[n++] = (tr_slice){r, op->kind == BE_OP_COLL ? cm_coll_name(op->coll) : op->name,
                          be_ev_name(op->ev), t[i], t[i + 1], op->mb, op->chunk < 0 ? 0 : op->chunk};
    }
  }
  int rc = tr_chrome_write(path, title, "rank", s, n, g->nranks, err);
  free(s);
  return rc;
}

/* ---- the command ------------------------------------------------------------------------ */

/* rcm: the cost model of the model as run, for the throughput at the measured time and the
 * prediction to compare with it. */
static int report(const run_opts *o, const be_plan *bp, cm_model *rcm, const spec_model *m0,
                  const spec_plan *p, const be_job_result *g, pp_err *err) {
  const spec_cluster *c = cm_model_cluster(rcm);
  double iter, lo, hi;
  int slow;
  be_job_iter_stats(g, &iter, &lo, &hi, &slow);
  cm_result at = {.iter_time_s = iter}, pred;
  cm_throughput(rcm, p, iter, &at);
  /* the cost model's time for the model as run, with the backend's settings (be_cm_params) */
  if (cm_eval(rcm, p, &pred, err)) return err->code;
  /* a cluster of GPUs does not describe a run on CPUs, nor the other way round */
  int comparable = c->gpu.cpu == (strcmp(o->device, "cpu") == 0);
  if (!comparable) pred.iter_time_s = 0;
  /* cm_throughput counts every GPU of the cluster; a non-uniform plan may leave some idle */
  double tflops = at.model_tflops_per_gpu * ((double)c->gpus / bp->nranks);
  double kinds[BE_NEVS] = {0};
  for (int i = 0; i < g->nops[slow]; i++)
    kinds[bp->progs[slow].ops[i].ev] += g->op_s[g->displ[slow] + i];
  char run_key[128];
  char hash[SPEC_HASH_LEN];
  spec_plan_hash(p, hash);
  snprintf(run_key, sizeof run_key, "run:%s:%s:%ld:%d", hash, o->device, (long)time(NULL),
           (int)getpid());
  int stored = 0;
  if (save(o, bp, c, p, g, &at, pred.iter_time_s, run_key, kinds, &stored, err))
    return err->code;
  char title[256];
  snprintf(title, sizeof title, "podplan run: %s on %s (%d ranks, %s)", bp->model.name, c->name,
           bp->nranks, o->device);
  if (o->trace && write_trace(o->trace, bp, g, title, err)) return err->code;
  if (o->json) {
    json_t *out = json_pack("{s:f,s:i,s:s,s:b,s:f,s:f,s:i,s:f,s:f,s:i,s:i,s:i,s:s,s:i,s:f}",
                            "iter_time_s", iter, "ranks", bp->nranks, "device", o->device,
                            "verified", g->verified, "iter_min_s", lo, "iter_max_s", hi, "iters",
                            g->iters, "model_flops", at.model_flops, "tflops_per_rank", tflops,
                            "layers_run", bp->model.layers, "layers_model", bp->layers_full,
                            "shrink", bp->shrink, "run_key", run_key, "measurements", stored,
                            "predicted_s", pred.iter_time_s);
    if (!comparable) json_object_set_new(out, "predicted_s", json_null());
    json_dumpf(out, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
    putchar('\n');
    json_decref(out);
    return PP_OK;
  }
  char text[512];
  if (spec_plan_format(p, text, sizeof text, err)) snprintf(text, sizeof text, "(non-uniform)");
  printf("%s on %s (%d ranks), plan %s, device %s\n", m0->name, c->name, bp->nranks, text,
         o->device);
  if (bp->model.layers != bp->layers_full || bp->shrink > 1)
    printf("  model as run        %d of %d layers, width / %d (hidden %d, heads %d, ffn %d, "
           "vocab %d)\n", bp->model.layers, bp->layers_full, bp->shrink, bp->model.hidden,
           bp->model.heads, bp->model.ffn_hidden, bp->model.vocab);
  printf("  iteration           %.6f s mean of %d (min %.6f, max %.6f)%s\n", iter, g->iters, lo,
         hi, g->verified ? "; collectives and messages verified" : "");
  printf("  model TFLOP/s       %.4f per rank\n", tflops);
  if (comparable)
    printf("  cost model          %.6f s (%+.1f%%; %s, nothing overlapped as run, no "
           "calibration)\n", pred.iter_time_s, 100 * (pred.iter_time_s / iter - 1), c->name);
  else
    printf("  cost model          not compared (%s describes %s; this ran on %s)\n", c->name,
           c->gpu.cpu ? "CPU processes" : "GPUs", o->device);
  printf("  slowest rank (%d)   seconds by kind:", slow);
  for (int k = 0; k < BE_NEVS; k++) printf(" %s %.6f", be_ev_name(k), kinds[k]);
  printf("\n  stored              1 score (backend), %d measurements in %s (run %s)\n", stored,
         o->db, run_key);
  if (o->trace) printf("  trace               %s\n", o->trace);
  return PP_OK;
}

/* The programs of every rank: *cm is the model's cost model, *rcm the reduced model's when
 * --layers or --shrink reduce it (NULL otherwise); both the caller's to destroy. */
static int lower(const run_opts *o, const spec_model *m, const spec_cluster *c,
                 const spec_plan *p, cm_model **cm, cm_model **rcm, be_plan **bp, pp_err *err) {
  spec_model mr;
  be_lower_opts lo = {o->layers, o->shrink, NULL};
  cm_params prm, rprm;
  *cm = *rcm = NULL;
  if (be_lower_model(m, &lo, &mr, err)) return err->code;
  be_cm_params(m, &prm);
  be_cm_params(&mr, &rprm);
  if (cm_model_create(m, c, &prm, cm, err) ||
      ((o->layers > 0 || o->shrink > 1) && cm_model_create(&mr, c, &rprm, rcm, err)))
    return err->code;
  lo.run_cm = *rcm;
  return be_lower(*cm, p, &lo, bp, err);
}

/* The job must have as many ranks as the plan. */
static int job_size_ok(const be_plan *bp, pp_err *err) {
  int nranks = be_job_size();
  if (bp->nranks == nranks) return PP_OK;
  if (!be_job_has_mpi())
    return pp_err_set(err, PP_USAGE, "the plan uses %d ranks; this build has no MPI "
                      "(PODPLAN_MPI=OFF) and runs plans of one rank only", bp->nranks);
  return pp_err_set(err, PP_USAGE, "the plan uses %d ranks; this job has %d (mpirun -n %d "
                    "podplan run ...)", bp->nranks, nranks, bp->nranks);
}

int cmd_run(int argc, char **argv) {
  run_opts o = {.device = "cpu", .db = "podplan.db", .shrink = 1, .warmup = 1, .iters = 3,
                .verify = 1, .inject_rank = -1};
  int rc = parse(argc, argv, &o);
  if (rc) return rc < 0 ? 0 : rc;
  /* what every rank would find wrong is found before MPI starts, and said once */
  pp_err err = {0};
  spec_model m;
  spec_cluster c;
  spec_plan p;
  cm_model *cm = NULL, *rcm = NULL;
  be_plan *bp = NULL;
  be_dev *d = NULL;
  const be_device *dv = be_device_find(o.device);
  be_exec_result r = {0};
  be_job_result g = {0};
  int rank = be_job_launcher_rank();
  if (!dv) {
    pp_err_set(&err, PP_USAGE, "--device: '%s' is not one of this build's devices (%s)",
               o.device, be_device_names());
    return fail_once(rank, &err);
  }
  if (load(&o, &m, &c, &p, &err)) return fail_once(rank, &err);
  if (lower(&o, &m, &c, &p, &cm, &rcm, &bp, &err)) {
    rc = fail_once(rank, &err);
    goto done;
  }
  if (be_job_init(1, &err)) {
    rc = cli_fail(CMD, &err);
    goto done;
  }
  rank = be_job_rank();
  if (job_size_ok(bp, &err)) {
    rc = fail_once(rank, &err);
    goto cleanup;
  }
  be_dev_cfg cfg = {.groups = bp->groups, .ngroups = bp->ngroups, .dtype = bp->model.dtype,
                    .max_gemm_elems = bp->max_gemm_elems, .max_attn_elems = bp->max_attn_elems,
                    .max_msg_bytes = bp->max_msg_bytes, .timeout_s = o.timeout_s,
                    .peers = bp->progs[rank].peers, .npeers = bp->progs[rank].npeers};
  if (be_job_open(dv, &cfg, &d, &err)) goto device_failed;
  if (rank == o.inject_rank) {
    fprintf(stderr, "podplan run: rank %d: %s on purpose (--inject)\n", rank,
            o.inject_hang ? "stops answering" : "exits");
    if (!o.inject_hang) _exit(3);
    for (;;) pause();
  }
  be_exec_opts eo = {o.warmup, o.iters, o.verify};
  if (be_exec(dv, d, &bp->progs[rank], &eo, &r, &err)) goto device_failed;
  dv->close(d, 0);
  d = NULL;
  if (be_job_gather(&r, &g, &err)) {
    rc = fail_once(rank, &err);
    goto cleanup;
  }
  rc = 0;
  if (rank == 0 && report(&o, bp, rcm ? rcm : cm, &m, &p, &g, &err)) rc = cli_fail(CMD, &err);
  goto cleanup;

device_failed:
  /* this rank's own failure: say so, then take the job down so no peer waits forever */
  cli_fail(CMD, &err);
  if (d) dv->close(d, 1);
  be_job_abort(1);
cleanup:
  be_exec_result_clear(&r);
  be_job_result_clear(&g);
  be_job_finalize();
done:
  be_plan_free(bp);
  cm_model_destroy(rcm);
  cm_model_destroy(cm);
  spec_plan_clear(&p);
  return rc;
}
