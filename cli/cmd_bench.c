/* podplan bench: microbenchmarks through the backend's devices, stored as measurements.
 *   gemm  a sweep of GEMM shapes on one rank (squares, or the shapes a plan runs);
 *   coll  a sweep of collective sizes over every rank of the job (under mpirun), printed in
 *         nccl-tests' format so `podplan import nccl-tests` reads it back. */
#include <jansson.h>
#include <math.h>
#include <mpi.h>
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
    "         to 16384 on cuda) and store them as measurements (kind gemm): the efficiency\n"
    "         surface calibration fits\n"
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

/* ---- shared set-up: MPI, the cluster, the device ------------------------------------------ */

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
  int lrank = cli_launcher_rank();
  if (o->cluster && spec_cluster_load(o->cluster, o->gpus, &e->cl, &err))
    return lrank == 0 ? cli_fail(CMD, &err) : 2;
  e->have_cluster = o->cluster != NULL;
  e->dv = be_device_find(o->device);
  if (!e->dv) {
    pp_err_set(&err, PP_USAGE, "--device: '%s' is not one of this build's devices (%s)",
               o->device, be_device_names());
    return lrank == 0 ? cli_fail(CMD, &err) : 2;
  }
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited && MPI_Init(NULL, NULL) != MPI_SUCCESS) {
    fprintf(stderr, "podplan bench: MPI_Init failed\n");
    return 1;
  }
  e->inited = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &e->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &e->nranks);
  e->world_group.kind = SPEC_GRP_DP;
  e->world_group.n = e->nranks;
  e->world_group.ranks = malloc((size_t)e->nranks * sizeof(int));
  if (!e->world_group.ranks) return 1;
  for (int i = 0; i < e->nranks; i++) e->world_group.ranks[i] = i;
  MPI_Comm world = MPI_COMM_WORLD;
  be_dev_cfg cfg = {e->rank, e->nranks, &world, group_of_all ? &e->world_group : NULL,
                    group_of_all ? 1 : 0, SPEC_DTYPE_BF16, gemm_elems, attn_elems, msg_bytes,
                    120, cli_local_rank(), NULL, 0};
  if (e->dv->open(&cfg, &e->d, &err)) {
    cli_fail(CMD, &err);
    return 1;
  }
  return 0;
}

static void env_close(bench_env *e, int failed) {
  if (e->d) e->dv->close(e->d, failed);
  free(e->world_group.ranks);
  if (e->inited) MPI_Finalize();
}

/* ---- gemm -------------------------------------------------------------------------------- */

typedef struct shape3 {
  int m, n, k;
} shape3;

static int parse_shapes(const char *list, shape3 *out, int cap, int *n) {
  *n = 0;
  const char *p = list;
  while (*p) {
    shape3 s;
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

static int bench_gemm(const bench_opts *o) {
  shape3 shapes[64];
  int ns = 0;
  if (o->shapes) {
    if (parse_shapes(o->shapes, shapes, 64, &ns)) return 2;
  } else {
    int cuda = strcmp(o->device, "cuda") == 0;
    for (int s = cuda ? 1024 : 256; s <= (cuda ? 16384 : 2048); s *= 2)
      shapes[ns++] = (shape3){s, s, s};
  }
  double elems = 0;
  for (int i = 0; i < ns; i++)
    elems = fmax(elems, fmax((double)shapes[i].m * shapes[i].k,
                             fmax((double)shapes[i].k * shapes[i].n,
                                  (double)shapes[i].m * shapes[i].n)));
  bench_env e = {0};
  int rc = env_open(o, &e, elems, 0, 1024, 0);
  if (rc) {
    env_close(&e, 1);
    return rc;
  }
  pp_err err = {0};
  store_measurement *ms = calloc((size_t)ns, sizeof *ms);
  char (*shape_json)[96] = calloc((size_t)ns, sizeof *shape_json);
  double *tflops = calloc((size_t)ns, sizeof *tflops), *secs = calloc((size_t)ns, sizeof *secs);
  char run_key[96];
  snprintf(run_key, sizeof run_key, "bench-gemm:%s:%ld:%d", o->device, (long)time(NULL),
           (int)getpid());
  double peak = e.dv->peak_flops(e.d);
  const char *name = strcmp(o->device, "cpu") == 0 ? "gemm_fp32" : "gemm_bf16";
  for (int i = 0; i < ns && !rc && ms && shape_json && tflops && secs; i++) {
    shape3 s = shapes[i];
    double t[2];
    for (int w = 0; w < 3 && !rc; w++) rc = e.dv->gemm(e.d, s.m, s.n, s.k, 1, &err);
    if (!rc) rc = e.dv->mark(e.d, 0, &err);
    for (int r = 0; r < o->reps && !rc; r++) rc = e.dv->gemm(e.d, s.m, s.n, s.k, 1, &err);
    if (!rc) rc = e.dv->mark(e.d, 1, &err);
    if (!rc) rc = e.dv->fence(e.d, &err);
    if (!rc) rc = e.dv->times(e.d, 2, t, &err);
    if (rc) break;
    secs[i] = t[1] / o->reps;
    tflops[i] = 2.0 * s.m * s.n * s.k / secs[i] / 1e12;
    snprintf(shape_json[i], sizeof shape_json[i], "{\"k\":%d,\"m\":%d,\"n\":%d}", s.k, s.m, s.n);
    ms[i] = (store_measurement){.run_key = run_key, .seq = i, .kind = "gemm", .name = name,
                                .device = o->device, .shape_json = shape_json[i],
                                .time_s = secs[i], .source = "podplan bench gemm"};
  }
  size_t added = 0;
  if (!rc && (!ms || !shape_json || !tflops || !secs)) rc = pp_err_set(&err, PP_NOMEM, "bench: out of memory");
  if (!rc) rc = cli_save(o->db, NULL, e.have_cluster ? &e.cl : NULL, NULL, NULL, NULL, ms,
                             (size_t)ns, &added, &err);
  if (rc) {
    cli_fail(CMD, &err);
  } else if (o->json) {
    json_t *rows = json_array();
    for (int i = 0; i < ns; i++)
      json_array_append_new(rows, json_pack("{s:i,s:i,s:i,s:f,s:f,s:f}", "m", shapes[i].m, "n",
                                            shapes[i].n, "k", shapes[i].k, "time_s", secs[i],
                                            "tflops", tflops[i], "peak_fraction",
                                            peak > 0 ? tflops[i] * 1e12 / peak : 0.0));
    json_t *out = json_pack("{s:s,s:s,s:f,s:o,s:i}", "device", o->device, "name", name,
                            "peak_flops", peak, "rows", rows, "stored", (int)added);
    json_dumpf(out, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(8));
    putchar('\n');
    json_decref(out);
  } else {
    printf("# podplan bench gemm: device %s, %s, %d GEMMs per timing after 3 warm-ups\n",
           o->device, name, o->reps);
    printf("#%7s %7s %7s %12s %10s %8s\n", "m", "n", "k", "time (us)", "TFLOP/s", "of peak");
    for (int i = 0; i < ns; i++) {
      printf(" %7d %7d %7d %12.2f %10.4f", shapes[i].m, shapes[i].n, shapes[i].k,
             secs[i] * 1e6, tflops[i]);
      if (peak > 0) printf(" %7.1f%%", 100 * tflops[i] * 1e12 / peak);
      putchar('\n');
    }
    printf("# %zu measurements stored in %s (run %s)\n", added, o->db, run_key);
  }
  free(ms), free(shape_json), free(tflops), free(secs);
  env_close(&e, rc != 0);
  return rc ? pp_exit_status(rc) : 0;
}

/* ---- coll -------------------------------------------------------------------------------- */

/* One size: `runs` collectives between marks; returns the mean time (slowest rank). */
static int time_coll(bench_env *e, cm_coll c, double bytes, int runs, double *mean, pp_err *err) {
  double t[2];
  int rc = e->dv->barrier(e->d, err);
  if (!rc) rc = e->dv->mark(e->d, 0, err);
  for (int i = 0; i < runs && !rc; i++) rc = e->dv->coll(e->d, 0, c, bytes, err);
  if (!rc) rc = e->dv->mark(e->d, 1, err);
  if (!rc) rc = e->dv->fence(e->d, err);
  if (!rc) rc = e->dv->times(e->d, 2, t, err);
  if (rc) return rc;
  double mine = t[1] / runs;
  MPI_Allreduce(&mine, mean, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return PP_OK;
}

static int bench_coll(const bench_opts *o) {
  int ci = -1;
  for (int i = 0; i < CM_NCOLLS; i++)
    if (strcmp(o->op, cm_coll_name((cm_coll)i)) == 0) ci = i;
  if (ci < 0) return cli_usage_error(CMD, "--op: unknown collective '%s'", o->op);
  if (o->min_b > o->max_b) return cli_usage_error(CMD, "-b is larger than -e");
  cm_coll c = (cm_coll)ci;
  const char *redop = c == CM_ALL_REDUCE || c == CM_REDUCE_SCATTER ? "sum" : "none";
  bench_env e = {0};
  int rc = env_open(o, &e, 0, 0, o->max_b, 1);
  if (rc) {
    env_close(&e, 1);
    return rc;
  }
  pp_err err = {0};
  int n = e.nranks, nsizes = 0;
  for (double b = o->min_b; b <= o->max_b * 1.0000001; b *= o->factor) nsizes++;
  store_measurement *ms = calloc((size_t)nsizes * 2, sizeof *ms);
  char run_key[96];
  snprintf(run_key, sizeof run_key, "bench-coll:%s:%s:%ld:%d", o->device, o->op,
           (long)time(NULL), (int)getpid());
  double sum_bus = 0;
  int rows = 0, nerr = 0;
  if (!ms) rc = pp_err_set(&err, PP_NOMEM, "bench: out of memory");
  if (!rc && e.rank == 0) {
    printf("# Collective test starting: %s_perf\n", o->op);
    printf("# podplan bench coll (nccl-tests format): %s, %d ranks, device %s\n", o->op, n,
           o->device);
    printf("# in-place columns repeat the measurement (podplan's devices keep separate buffers)\n");
    printf("#\n#  Using devices\n");
  }
  for (int r = 0; r < n && !rc; r++) {
    if (e.rank == r) {
      char host[64] = "?";
      gethostname(host, sizeof host);
      printf("#  Rank %2d Group  0 Pid %6d on %10s device  %d [%s] %s\n", r, (int)getpid(), host,
             0, o->device, o->device);
      fflush(stdout);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  if (!rc && e.rank == 0) {
    printf("#\n#%79s%34s\n", "out-of-place", "in-place");
    printf("#%11s %12s %8s %6s %6s %8s %7s %7s %6s %8s %7s %7s %6s\n", "size", "count", "type",
           "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
           "#wrong");
    printf("#%11s %12s %8s %6s %6s %8s %7s %7s %6s %8s %7s %7s %6s\n", "(B)", "(elements)", "",
           "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  }
  for (double b = o->min_b; b <= o->max_b * 1.0000001 && !rc; b *= o->factor) {
    /* whole float elements, divisible by the ranks */
    double count = floor(b / 4 / n) * n;
    if (count < n) count = n;
    double bytes = count * 4;
    /* the first run of each size checks the result */
    e.dv->verify(e.d, 1);
    rc = e.dv->coll(e.d, 0, c, bytes, &err);
    e.dv->verify(e.d, 0);
    int wrong = rc ? 1 : 0;
    if (rc) {
      nerr++;
      break;
    }
    for (int w = 0; w < o->warmup && !rc; w++) rc = e.dv->coll(e.d, 0, c, bytes, &err);
    double t1 = 0, t2 = 0;
    if (!rc) rc = time_coll(&e, c, bytes, o->iters, &t1, &err);
    if (!rc) rc = time_coll(&e, c, bytes, o->iters, &t2, &err);
    if (rc) break;
    double f = cm_coll_busbw_factor(c, n), alg1 = bytes / t1 / 1e9, alg2 = bytes / t2 / 1e9;
    if (e.rank == 0)
      printf(" %11.0f %12.0f %8s %6s %6d %8.2f %7.2f %7.2f %6d %8.2f %7.2f %7.2f %6d\n", bytes,
             count, "float", redop, c == CM_BROADCAST ? 0 : -1, t1 * 1e6, alg1,
             alg1 * f, wrong, t2 * 1e6, alg2, alg2 * f, wrong);
    sum_bus += alg1 * f + alg2 * f;
    for (int k = 0; k < 2; k++)
      ms[2 * rows + k] = (store_measurement){.run_key = run_key, .seq = 2 * rows + k,
                                             .kind = "coll", .name = o->op, .device = o->device,
                                             .bytes = bytes, .ranks = n,
                                             .time_s = k ? t2 : t1,
                                             .algbw_gbps = k ? alg2 : alg1,
                                             .busbw_gbps = (k ? alg2 : alg1) * f,
                                             .source = "podplan bench coll"};
    rows++;
  }
  size_t added = 0;
  if (!rc && e.rank == 0) {
    printf("# Out of bounds values : %d %s\n", nerr, nerr ? "FAILED" : "OK");
    printf("# Avg bus bandwidth    : %g \n#\n", rows ? sum_bus / (2 * rows) : 0);
    rc = cli_save(o->db, NULL, e.have_cluster ? &e.cl : NULL, NULL, NULL, NULL, ms,
                  (size_t)rows * 2, &added, &err);
    if (!rc) printf("# %zu measurements stored in %s (run %s)\n", added, o->db, run_key);
  }
  if (rc) cli_fail(CMD, &err);
  free(ms);
  if (rc && e.nranks > 1) {
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
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
