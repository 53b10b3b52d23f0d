/* podplan bench: microbenchmarks through the backend's devices, stored as measurements.
 *   gemm  a sweep of GEMM shapes on one rank (squares, or the shapes a plan runs);
 *   coll  a sweep of collective sizes over every rank of the job (under mpirun), printed in
 *         nccl-tests' format so `podplan import nccl-tests` reads it back.
 * The sweeps are the backend's (be_bench_*) and the job its be_job_*; this file parses the
 * options, calls them, prints and stores the rows. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "podplan/be.h"
#include "podplan/store.h"

static const char usage[] =
    "usage: podplan bench gemm [--device cpu|cuda] [--shapes MxNxK,...] [--reps N]\n"
    "                          [--cluster C [--gpus N]] [--db F] [--json]\n"
    "       podplan bench coll [--device cpu|cuda] [--op NAME] [-b MIN] [-e MAX] [-f FACTOR]\n"
    "                          [--iters N] [--warmup W] [--cluster C [--gpus N]] [--db F]\n"
    "\n"
    "  gemm   time GEMMs of each shape on one rank (default: squares 256 to 2048 on cpu, 1024\n"
    "         to 16384 on cuda; on cpu one BLAS thread, a core, unless OPENBLAS_NUM_THREADS\n"
    "         says otherwise) and store them as measurements (kind gemm): the efficiency\n"
    "         surface calibration fits; \"of peak\" is of the device's peak (cuda) or of the\n"
    "         --cluster's GPU figure (cpu)\n"
    "  coll   time a collective over all ranks of the job (mpirun -n R podplan bench coll),\n"
    "         sizes MIN to MAX bytes by FACTOR; prints nccl-tests' table (out-of-place; the\n"
    "         in-place columns repeat the measurement: podplan's devices keep separate\n"
    "         buffers) and stores measurements (kind coll)\n"
    "\n"
    "  --device D          cpu (OpenBLAS + MPI, default) or cuda (cuBLAS + NCCL)\n"
    "  --shapes LIST       GEMM shapes, e.g. 4096x4096x4096,8192x1536x12288\n"
    "  --reps N            GEMMs per timing (default 10; 3 more warm up)\n"
    "  --op NAME           all_reduce (default), all_gather, reduce_scatter, alltoall,\n"
    "                      broadcast, sendrecv\n"
    "  -b, -e, -f          smallest and largest size in bytes (K, M, G suffixes), step factor\n"
    "                      (defaults 1K, 64M, 2)\n"
    "  --iters N, --warmup W   timed and untimed runs per size (defaults 20, 5)\n"
    "  --cluster C         the cluster the measurements belong to (stored with them)\n"
    "  --db F              store file (default podplan.db)\n"
    "  --json              gemm: one JSON object with the rows\n"
    "  -h, --help          this text\n";

static const char *const CMD = "bench";

typedef struct bench_opts {
  const char *device, *db, *cluster, *shapes, *op;
  int gpus, reps, iters, warmup, json;
  double min_b, max_b, factor;
} bench_opts;

static int parse_bytes(const char *opt, const char *s, double *out) {
  char *end = NULL;
  double v = strtod(s, &end);
  if (end == s) return cli_usage_error(CMD, "%s: '%s' is not a size", opt, s);
  static const struct {
    char c;
    double mul;
  } units[] = {{'K', 1024.0}, {'M', 1048576.0}, {'G', 1073741824.0}};
  for (size_t i = 0; *end && i < sizeof units / sizeof units[0]; i++)
    if (*end == units[i].c || *end == units[i].c + 32) v *= units[i].mul, end++;
  if (*end || !(v >= 1) || v > 1e12)
    return cli_usage_error(CMD, "%s: '%s' is not a size of 1 byte to 1 TB", opt, s);
  *out = v;
  return 0;
}

/* ---- shared set-up: the job, the cluster, the device -------------------------------------- */

typedef struct bench_env {
  int rank, nranks, inited;
  spec_cluster cl;
  int have_cluster;
  const be_device *dv;
  be_dev *d;
  be_group world_group;
} bench_env;

static int env_open(const bench_opts *o, bench_env *e, double gemm_elems, double attn_elems,
                    double msg_bytes, int group_of_all) {
  pp_err err = {0};
  /* bad input every rank would see is reported once, before MPI starts */
  int lrank = be_job_launcher_rank();
  if (o->cluster && spec_cluster_load(o->cluster, o->gpus, &e->cl, &err))
    return lrank == 0 ? cli_fail(CMD, &err) : 2;
  e->have_cluster = o->cluster != NULL;
  e->dv = be_device_find(o->device);
  if (!e->dv) {
    pp_err_set(&err, PP_USAGE, "--device: '%s' is not one of this build's devices (%s)",
               o->device, be_device_names());
    return lrank == 0 ? cli_fail(CMD, &err) : 2;
  }
  if (be_job_init(1, &err)) return cli_fail(CMD, &err);
  e->inited = 1;
  e->rank = be_job_rank();
  e->nranks = be_job_size();
  e->world_group.kind = SPEC_GRP_DP;
  e->world_group.n = e->nranks;
  e->world_group.ranks = malloc((size_t)e->nranks * sizeof(int));
  if (!e->world_group.ranks) return 1;
  for (int i = 0; i < e->nranks; i++) e->world_group.ranks[i] = i;
  be_dev_cfg cfg = {.groups = group_of_all ? &e->world_group : NULL,
                    .ngroups = group_of_all ? 1 : 0, .dtype = SPEC_DTYPE_BF16,
                    .max_gemm_elems = gemm_elems, .max_attn_elems = attn_elems,
                    .max_msg_bytes = msg_bytes, .timeout_s = 120};
  if (be_job_open(e->dv, &cfg, &e->d, &err)) {
    cli_fail(CMD, &err);
    return 1;
  }
  return 0;
}

static void env_close(bench_env *e, int failed) {
  if (e->d) e->dv->close(e->d, failed);
  free(e->world_group.ranks);
  if (e->inited) be_job_finalize();
}

/* ---- gemm -------------------------------------------------------------------------------- */

static int parse_shapes(const char *list, be_bench_gemm_row *out, int cap, int *n) {
  *n = 0;
  const char *p = list;
  while (*p) {
    be_bench_gemm_row s = {0};
    int used = 0;
    if (sscanf(p, "%dx%dx%d%n", &s.m, &s.n, &s.k, &used) != 3 || s.m < 1 || s.n < 1 ||
        s.k < 1 || (p[used] && p[used] != ','))
      return cli_usage_error(CMD, "--shapes: '%s' is not MxNxK[,MxNxK...]", list);
    if (*n == cap) return cli_usage_error(CMD, "--shapes: more than %d shapes", cap);
    out[(*n)++] = s;
    p += used + (p[used] == ',');
  }
  if (!*n) return cli_usage_error(CMD, "--shapes: empty");
  return 0;
}

static void print_gemm(const bench_opts *o, const be_bench_gemm_row *rows, int ns,
                       const char *name, double peak, size_t added, const char *run_key) {
  if (o->json) {
    json_t *jr = json_array();
    for (int i = 0; i < ns; i++)
      json_array_append_new(jr, json_pack("{s:i,s:i,s:i,s:f,s:f,s:f}", "m", rows[i].m, "n",
                                          rows[i].n, "k", rows[i].k, "time_s", rows[i].time_s,
                                          "tflops", rows[i].tflops, "peak_fraction",
                                          peak > 0 ? rows[i].tflops * 1e12 / peak : 0.0));
    json_t *out = json_pack("{s:s,s:s,s:f,s:o,s:i}", "device", o->device, "name", name,
                            "peak_flops", peak, "rows", jr, "stored", (int)added);
    json_dumpf(out, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(8));
    putchar('\n');
    json_decref(out);
    return;
  }
  printf("# podplan bench gemm: device %s, %s, %d GEMMs per timing after 3 warm-ups\n",
         o->device, name, o->reps);
  printf("#%7s %7s %7s %12s %10s %8s\n", "m", "n", "k", "time (us)", "TFLOP/s", "of peak");
  for (int i = 0; i < ns; i++) {
    printf(" %7d %7d %7d %12.2f %10.4f", rows[i].m, rows[i].n, rows[i].k, rows[i].time_s * 1e6,
           rows[i].tflops);
    if (peak > 0) printf(" %7.1f%%", 100 * rows[i].tflops * 1e12 / peak);
    putchar('\n');
  }
  printf("# %zu measurements stored in %s (run %s)\n", added, o->db, run_key);
}

static int bench_gemm(const bench_opts *o) {
  be_bench_gemm_row rows[64];
  int ns = 0;
  if (o->shapes) {
    if (parse_shapes(o->shapes, rows, 64, &ns)) return 2;
  } else {
    ns = be_bench_gemm_shapes(o->device, rows, 64);
  }
  bench_env e = {0};
  int rc = env_open(o, &e, be_bench_gemm_elems(rows, ns), 0, 1024, 0);
  if (rc) {
    env_close(&e, 1);
    return rc;
  }
  pp_err err = {0};
  store_measurement *ms = calloc((size_t)ns, sizeof *ms);
  char (*shape_json)[96] = calloc((size_t)ns, sizeof *shape_json);
  char run_key[96];
  snprintf(run_key, sizeof run_key, "bench-gemm:%s:%ld:%d", o->device, (long)time(NULL),
           (int)getpid());
  double peak = e.dv->peak_flops(e.d); /* 0 on the cpu device: the cluster's figure then */
  if (!(peak > 0) && e.have_cluster) peak = e.cl.gpu.bf16_tflops * 1e12;
  const char *name = strcmp(o->device, "cpu") == 0 ? "gemm_fp32" : "gemm_bf16";
  if (!ms || !shape_json) rc = pp_err_set(&err, PP_NOMEM, "bench: out of memory");
  if (!rc) rc = be_bench_gemm(e.dv, e.d, rows, ns, o->reps, &err);
  for (int i = 0; i < ns && !rc; i++) {
    snprintf(shape_json[i], sizeof shape_json[i], "{\"k\":%d,\"m\":%d,\"n\":%d}", rows[i].k,
             rows[i].m, rows[i].n);
    ms[i] = (store_measurement){.run_key = run_key, .seq = i, .kind = "gemm", .name = name,
                                .device = o->device, .shape_json = shape_json[i],
                                .time_s = rows[i].time_s, .source = "podplan bench gemm"};
  }
  size_t added = 0;
  if (!rc) rc = cli_save(o->db, NULL, e.have_cluster ? &e.cl : NULL, NULL, NULL, NULL, ms,
                             (size_t)ns, &added, &err);
  if (rc)
    cli_fail(CMD, &err);
  else
    print_gemm(o, rows, ns, name, peak, added, run_key);
  free(ms), free(shape_json);
  env_close(&e, rc != 0);
  return rc ? pp_exit_status(rc) : 0;
}

/* ---- coll -------------------------------------------------------------------------------- */

typedef struct coll_print {
  const bench_opts *o;
  int rank;
  const char *redop;
  int root;
} coll_print;

/* One size, as nccl-tests prints it (rank 0). A size whose check fails ends the sweep with an
 * error, so every row printed has #wrong 0. */
static void print_row(const be_bench_coll_row *r, void *arg) {
  const coll_print *cp = arg;
  if (cp->rank == 0)
    printf(" %11.0f %12.0f %8s %6s %6d %8.2f %7.2f %7.2f %6d %8.2f %7.2f %7.2f %6d\n", r->bytes,
           r->count, "float", cp->redop, cp->root, r->time_s[0] * 1e6, r->algbw_gbps[0],
           r->busbw_gbps[0], 0, r->time_s[1] * 1e6, r->algbw_gbps[1], r->busbw_gbps[1], 0);
}

/* nccl-tests' header: every rank's device line, gathered and printed by rank 0. */
static int print_head(const bench_opts *o, const bench_env *e, pp_err *err) {
  char line[256], host[64] = "?";
  gethostname(host, sizeof host);
  host[sizeof host - 1] = '\0';
  snprintf(line, sizeof line, "#  Rank %2d Group  0 Pid %6d on %10s device  %d [%s] %s\n",
           e->rank, (int)getpid(), host, 0, o->device, o->device);
  void *all = NULL;
  size_t n = 0;
  if (be_job_gather_bytes(line, strlen(line), &all, &n, NULL, err)) return err->code;
  if (e->rank == 0) {
    printf("# Collective test starting: %s_perf\n", o->op);
    printf("# podplan bench coll (nccl-tests format): %s, %d ranks, device %s\n", o->op,
           e->nranks, o->device);
    printf("# in-place columns repeat the measurement (podplan's devices keep separate buffers)\n");
    printf("#\n#  Using devices\n");
    fwrite(all, 1, n, stdout);
    printf("#\n#%79s%34s\n", "out-of-place", "in-place");
    printf("#%11s %12s %8s %6s %6s %8s %7s %7s %6s %8s %7s %7s %6s\n", "size", "count", "type",
           "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
           "#wrong");
    printf("#%11s %12s %8s %6s %6s %8s %7s %7s %6s %8s %7s %7s %6s\n", "(B)", "(elements)", "",
           "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
    fflush(stdout);
  }
  free(all);
  return PP_OK;
}

static int bench_coll(const bench_opts *o) {
  int ci = -1;
  for (int i = 0; i < CM_NCOLLS; i++)
    if (strcmp(o->op, cm_coll_name((cm_coll)i)) == 0) ci = i;
  if (ci < 0) return cli_usage_error(CMD, "--op: unknown collective '%s'", o->op);
  if (o->min_b > o->max_b) return cli_usage_error(CMD, "-b is larger than -e");
  cm_coll c = (cm_coll)ci;
  bench_env e = {0};
  int rc = env_open(o, &e, 0, 0, o->max_b, 1);
  if (rc) {
    env_close(&e, 1);
    return rc;
  }
  pp_err err = {0};
  coll_print cp = {o, e.rank, c == CM_ALL_REDUCE || c == CM_REDUCE_SCATTER ? "sum" : "none",
                   c == CM_BROADCAST ? 0 : -1};
  be_bench_coll_opts bo = {c, o->min_b, o->max_b, o->factor, o->iters, o->warmup, print_row, &cp};
  int nsizes = be_bench_coll_sizes(&bo), rows = 0;
  be_bench_coll_row *res = calloc((size_t)nsizes, sizeof *res);
  store_measurement *ms = calloc((size_t)nsizes * 2, sizeof *ms);
  char run_key[96];
  snprintf(run_key, sizeof run_key, "bench-coll:%s:%s:%ld:%d", o->device, o->op,
           (long)time(NULL), (int)getpid());
  if (!ms || !res) rc = pp_err_set(&err, PP_NOMEM, "bench: out of memory");
  if (!rc) rc = print_head(o, &e, &err);
  if (!rc) rc = be_bench_coll(e.dv, e.d, &bo, res, &rows, &err);
  double sum_bus = 0; /* nccl-tests' "Avg bus bandwidth": the mean busbw of every timing */
  for (int i = 0; i < rows && !rc; i++)
    for (int k = 0; k < 2; k++) {
      sum_bus += res[i].busbw_gbps[k];
      ms[2 * i + k] = (store_measurement){.run_key = run_key, .seq = 2 * i + k, .kind = "coll",
                                          .name = o->op, .device = o->device,
                                          .bytes = res[i].bytes, .ranks = e.nranks,
                                          .time_s = res[i].time_s[k],
                                          .algbw_gbps = res[i].algbw_gbps[k],
                                          .busbw_gbps = res[i].busbw_gbps[k],
                                          .source = "podplan bench coll"};
    }
  size_t added = 0;
  if (!rc && e.rank == 0) {
    printf("# Out of bounds values : 0 OK\n"); /* a size that fails its check ends the sweep */
    printf("# Avg bus bandwidth    : %g \n#\n", rows ? sum_bus / (2 * rows) : 0);
    rc = cli_save(o->db, NULL, e.have_cluster ? &e.cl : NULL, NULL, NULL, NULL, ms,
                  (size_t)rows * 2, &added, &err);
    if (!rc) printf("# %zu measurements stored in %s (run %s)\n", added, o->db, run_key);
  }
  if (rc) cli_fail(CMD, &err);
  free(ms), free(res);
  if (rc && e.nranks > 1) be_job_abort(1);
  env_close(&e, rc != 0);
  return rc ? pp_exit_status(rc) : 0;
}

int cmd_bench(int argc, char **argv) {
  static const struct option longs[] = {
      {"device", required_argument, NULL, 'D'}, {"shapes", required_argument, NULL, 's'},
      {"reps", required_argument, NULL, 'r'},   {"cluster", required_argument, NULL, 'c'},
      {"gpus", required_argument, NULL, 'g'},   {"db", required_argument, NULL, 'd'},
      {"json", no_argument, NULL, 'j'},         {"op", required_argument, NULL, 'o'},
      {"iters", required_argument, NULL, 'n'},  {"warmup", required_argument, NULL, 'w'},
      {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
  bench_opts o = {.device = "cpu", .db = "podplan.db", .op = "all_reduce", .reps = 10,
                  .iters = 20, .warmup = 5, .min_b = 1024, .max_b = 64 * 1048576.0, .factor = 2};
  int first = 1, c;
  if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
    fputs(usage, stdout);
    return 0;
  }
  if (argc < 2 || argv[1][0] == '-')
    return cli_usage_error(CMD, "name a benchmark: gemm or coll");
  const char *what = argv[1];
  if (strcmp(what, "gemm") && strcmp(what, "coll"))
    return cli_usage_error(CMD, "unknown benchmark '%s' (gemm or coll)", what);
  argc--, argv++;
  while ((c = cli_getopt(CMD, argc, argv, "hb:e:f:", longs, &first)) != -1) {
    switch (c) {
    case 'h': fputs(usage, stdout); return 0;
    case 'D': o.device = optarg; break;
    case 's': o.shapes = optarg; break;
    case 'c': o.cluster = optarg; break;
    case 'd': o.db = optarg; break;
    case 'o': o.op = optarg; break;
    case 'j': o.json = 1; break;
    case 'r': if (cli_int(CMD, "--reps", optarg, 1, 1000000, &o.reps)) return 2; break;
    case 'g': if (cli_int(CMD, "--gpus", optarg, 1, SPEC_MAX_GPUS, &o.gpus)) return 2; break;
    case 'n': if (cli_int(CMD, "--iters", optarg, 1, 1000000, &o.iters)) return 2; break;
    case 'w': if (cli_int(CMD, "--warmup", optarg, 0, 1000000, &o.warmup)) return 2; break;
    case 'b': if (parse_bytes("-b", optarg, &o.min_b)) return 2; break;
    case 'e': if (parse_bytes("-e", optarg, &o.max_b)) return 2; break;
    case 'f': {
      char *end = NULL;
      o.factor = strtod(optarg, &end);
      if (end == optarg || *end || !(o.factor > 1) || o.factor > 1024)
        return cli_usage_error(CMD, "-f: '%s' is not a factor above 1", optarg);
      break;
    }
    default: return 2;
    }
  }
  if (optind < argc) return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
  return strcmp(what, "gemm") == 0 ? bench_gemm(&o) : bench_coll(&o);
}
