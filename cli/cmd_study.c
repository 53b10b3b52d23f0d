/* podplan study: validate (the cost model against published training runs), pillar (where
 * Alpa's two-level search still finds the best plan, fabric by fabric) and capacity (cluster
 * sizing). Parses the options (one table: names, arguments, help, which study takes them) and
 * calls study/; under mpirun the pillar study's searches are sharded over the ranks. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "podplan/be.h"
#include "podplan/study.h"

static const char *const CMD = "study";

enum { S_VALIDATE = 1, S_PILLAR = 2, S_CAPACITY = 4, S_ALL = 7 };

enum {
  O_DB = 256, O_OUT, O_DATA, O_CALIBRATION, O_QUICK, O_LARGE, O_GRID, O_FABRICS, O_MODELS, O_SCALES,
  O_TIME_LIMIT, O_GAP, O_THREADS, O_MODEL, O_TOKENS, O_DEADLINE, O_GPUS_MAX, O_CLUSTERS,
  O_PRICE, O_GBS, O_SIMULATE, O_SIM_MAX_GPUS, O_SIM_TIME_LIMIT, O_RUNGS, O_PERTURB, O_HELP
};

/* Every option once: its name, argument, help and the studies that take it. */
static const struct opt {
  const char *name, *arg;
  int id, studies;
  const char *help;
} opts[] = {
    {"db", "F", O_DB, S_ALL, "the store (default podplan.db; validate: only with --db)"},
    {"out", "DIR", O_OUT, S_ALL,
     "write the CSVs, the markdown and the plots to DIR (made with its missing parents, "
     "before the study starts)"},
    {"calibration", "SEL", O_CALIBRATION, S_ALL,
     "a stored calibration (an id, latest: the newest of any cluster, or none): the cases "
     "on its cluster take its fitted values and record it"},
    {"data", "F", O_DATA, S_VALIDATE,
     "validate: a published-runs CSV instead of the built-in copy (benchmarks/data/"
     "published_runs.csv; its README lists the columns)"},
    {"quick", NULL, O_QUICK, S_PILLAR,
     "pillar: 3 fabrics x 2 models x 256 GPUs (the rows of set quick)"},
    {"large", NULL, O_LARGE, S_PILLAR,
     "pillar: also the rows of set large (8192 GPUs; one global search there takes about a "
     "minute, a case's ladder about ten)"},
    {"grid", "F", O_GRID, S_PILLAR,
     "pillar: a grid CSV (set,fabric,model,gpus,gbs) instead of the built-in "
     "benchmarks/data/pillar_grid.csv"},
    {"fabrics", "LIST", O_FABRICS, S_PILLAR, "pillar: only these fabrics (cluster presets)"},
    {"models", "LIST", O_MODELS, S_PILLAR, "pillar: only these models"},
    {"scales", "LIST", O_SCALES, S_PILLAR, "pillar: only these GPU counts"},
    {"rungs", "LIST", O_RUNGS, S_PILLAR,
     "pillar: only these methods of the ladder (megatron, two-level, two-level-domain, "
     "two-level-all, two-level-open, exhaustive, two-level-space, two-level-space-domain, "
     "global-no-cp, global-no-ep, global-zero01, global-no-interleaved, "
     "global-same-recompute, global-uniform, global-tp-in-node; ablation: inter-op-only, "
     "intra-op-only); global always runs"},
    {"perturb", "K", O_PERTURB, S_PILLAR,
     "pillar: judge each case's verdicts under K draws of the cost-model parameters (each "
     "parameter's error band; a calibration's posterior on its cluster) (default 32)"},
    {"time-limit", "S", O_TIME_LIMIT, S_PILLAR | S_CAPACITY,
     "stop each search after S seconds with its best so far (default 0: none)"},
    {"gap", "G", O_GAP, S_PILLAR | S_CAPACITY,
     "global search's target gap to its lower bound (default 0.001)"},
    {"threads", "N", O_THREADS, S_PILLAR | S_CAPACITY, "search threads (default: the online CPUs)"},
    {"simulate", "K", O_SIMULATE, S_PILLAR,
     "pillar: each method's best K re-scored by the simulator (default 1)"},
    {"sim-max-gpus", "N", O_SIM_MAX_GPUS, S_PILLAR | S_CAPACITY,
     "simulate cases of at most N GPUs (default: pillar 256, capacity 1024; 0: every case): "
     "SimGrid of thousands of GPUs takes minutes per plan"},
    {"sim-time-limit", "S", O_SIM_TIME_LIMIT, S_PILLAR | S_CAPACITY,
     "stop a plan's simulation after S seconds of wall time; that plan keeps its cost-model "
     "time and is counted as not simulated (default: pillar 120, capacity 0: none)"},
    {"model", "M", O_MODEL, S_CAPACITY, "capacity: the model (preset, JSON file or inline JSON)"},
    {"tokens", "T", O_TOKENS, S_CAPACITY, "capacity: tokens to train on (e.g. 300e9)"},
    {"deadline", "D", O_DEADLINE, S_CAPACITY,
     "capacity: the time to train them in: days (30 or 30d) or hours (720h)"},
    {"gpus-max", "N", O_GPUS_MAX, S_CAPACITY, "capacity: the largest cluster considered"},
    {"clusters", "LIST", O_CLUSTERS, S_CAPACITY,
     "capacity: the fabrics considered (cluster presets; default: every GPU fabric preset)"},
    {"price-per-gpu-hour", "LIST", O_PRICE, S_CAPACITY,
     "capacity: a price for all (2.5) or per fabric (dgx-h100=2.5,gb200-nvl72=6)"},
    {"gbs", "N", O_GBS, S_CAPACITY,
     "capacity: global batch in sequences (default: 4M tokens' worth, a multiple of 8)"},
    {"help", NULL, O_HELP, S_ALL, "this text"},
};
#define NOPTS (sizeof opts / sizeof opts[0])

static void print_usage(void) {
  fputs("usage: podplan study validate [--data F] [--db F] [--out DIR] [--calibration SEL]\n"
        "       podplan study pillar [--quick | --large] [--fabrics L] [--models L] [--scales L]\n"
        "                            [--rungs L] [--perturb K] [--db F] [--out DIR]\n"
        "                            [--calibration SEL] [--time-limit S]\n"
        "       podplan study capacity --model M --tokens T [--deadline D] [--gpus-max N]\n"
        "                            [--clusters L] [--price-per-gpu-hour P] [--db F] [--out DIR]\n"
        "\n"
        "  validate   the cost model against published training runs (SC'21, Korthikanti et al.,\n"
        "             MT-NLG; NeMo, MPT and SC'21 Table 2 kept aside): per-row predicted vs\n"
        "             published iteration time, MAPE per source and per set (target, holdout),\n"
        "             Kendall's tau per set of runs of one model, and whether every\n"
        "             published configuration fits (the tightest headroom)\n"
        "  pillar     what Alpa's two-level hierarchy costs, fabric by fabric: on every case\n"
        "             of the grid a ladder of searches, each one's best simulated (cases\n"
        "             of at most 256 GPUs): megatron, two-level (Alpa's defaults, island =\n"
        "             node and = NVLink domain; open), exhaustive, global restricted to the\n"
        "             two-level space (island = node, = domain: the price of the hierarchy),\n"
        "             global, and global with one knob removed (what each knob is worth; a\n"
        "             rung whose space holds global's best plans takes global's result); the\n"
        "             verdicts re-judged under --perturb draws of the cost-model parameters;\n"
        "             Alpa's ablation on the V100 cluster. Cases already in the store are\n"
        "             skipped (a killed study resumes); under mpirun the searches are sharded\n"
        "  capacity   cluster sizing: the best plan per fabric and GPU count, time and cost to\n"
        "             train T tokens, the smallest cluster per fabric that meets the deadline\n"
        "\n",
        stdout);
  for (size_t i = 0; i < NOPTS; i++) {
    char left[48];
    snprintf(left, sizeof left, "%s--%s%s%s", opts[i].id == O_HELP ? "-h, " : "",
             opts[i].name, opts[i].arg ? " " : "", opts[i].arg ? opts[i].arg : "");
    /* wrap the help at 60 columns */
    const char *h = opts[i].help;
    int first = 1;
    while (*h) {
      size_t n = strlen(h);
      if (n > 60) {
        n = 60;
        while (n > 0 && h[n] != ' ') n--;
        if (!n) n = 60;
      }
      printf("  %-24s %.*s\n", first ? left : "", (int)n, h);
      h += n;
      while (*h == ' ') h++;
      first = 0;
    }
  }
  fputs("\nexit status: 0 done; 1 runtime failure; 2 bad usage or bad input\n", stdout);
}

typedef struct args {
  int study;                 /* S_* */
  study_validate_opts v;
  study_pillar_opts p;
  study_capacity_opts k;
  const char *calibration, *db, *out;
  int deadline_given;
} args;

static int parse_double(const char *opt, const char *val, double lo, double *out) {
  char *end;
  errno = 0;
  double v = strtod(val, &end);
  if (errno || end == val || *end || !isfinite(v) || v < lo)
    return cli_usage_error(CMD, "%s: '%s' is not a number >= %g", opt, val, lo);
  *out = v;
  return 0;
}

/* One option's value into a (the study is not known yet: each goes where it belongs). */
static int take(args *a, int id, const char *v) {
  switch (id) {
  case O_DB: a->db = v; return 0;
  case O_OUT: a->out = v; return 0;
  case O_CALIBRATION: a->calibration = v; return 0;
  case O_DATA: a->v.data = v; return 0;
  case O_QUICK: a->p.quick = 1; return 0;
  case O_LARGE: a->p.large = 1; return 0;
  case O_GRID: a->p.grid = v; return 0;
  case O_FABRICS: a->p.fabrics = v; return 0;
  case O_MODELS: a->p.models = v; return 0;
  case O_SCALES: a->p.scales = v; return 0;
  case O_RUNGS: a->p.rungs = v; return 0;
  case O_PERTURB: return cli_int(CMD, "--perturb", v, 1, 100000, &a->p.perturb);
  case O_TIME_LIMIT:
    if (parse_double("--time-limit", v, 0, &a->p.time_limit_s)) return 2;
    a->k.time_limit_s = a->p.time_limit_s;
    return 0;
  case O_GAP:
    if (parse_double("--gap", v, 0, &a->p.gap)) return 2;
    a->k.gap = a->p.gap;
    return 0;
  case O_THREADS:
    if (cli_int(CMD, "--threads", v, 0, 256, &a->p.threads)) return 2;
    a->k.threads = a->p.threads;
    return 0;
  case O_MODEL: a->k.model = v; return 0;
  case O_TOKENS: return parse_double("--tokens", v, 1, &a->k.tokens);
  case O_DEADLINE:
    a->deadline_given = 1;
    if (study_capacity_parse_deadline(v, &a->k.deadline_s, NULL) || !(a->k.deadline_s > 0))
      return cli_usage_error(CMD, "--deadline: '%s' is not a duration (30, 30d or 720h)", v);
    return 0;
  case O_GPUS_MAX: return cli_int(CMD, "--gpus-max", v, 1, SPEC_MAX_GPUS, &a->k.gpus_max);
  case O_CLUSTERS: a->k.clusters = v; return 0;
  case O_PRICE: a->k.prices = v; return 0;
  case O_GBS: return cli_int(CMD, "--gbs", v, 1, 1 << 30, &a->k.gbs);
  case O_SIMULATE: return cli_int(CMD, "--simulate", v, 0, 3, &a->p.simulate);
  case O_SIM_TIME_LIMIT:
    if (parse_double("--sim-time-limit", v, 0, &a->p.sim_time_limit_s)) return 2;
    a->k.sim_time_limit_s = a->p.sim_time_limit_s;
    return 0;
  case O_SIM_MAX_GPUS:
    if (cli_int(CMD, "--sim-max-gpus", v, 0, SPEC_MAX_GPUS, &a->p.sim_max_gpus)) return 2;
    /* capacity's field: 0 is its default (1024); every size is SPEC_MAX_GPUS */
    a->k.sim_max_gpus = a->p.sim_max_gpus ? a->p.sim_max_gpus : SPEC_MAX_GPUS;
    return 0;
  default: return 2;
  }
}

static int parse_args(int argc, char **argv, args *a) {
  struct option longs[NOPTS + 1];
  for (size_t i = 0; i < NOPTS; i++)
    longs[i] = (struct option){opts[i].name, opts[i].arg ? required_argument : no_argument, NULL,
                               opts[i].id};
  longs[NOPTS] = (struct option){NULL, 0, NULL, 0};
  memset(a, 0, sizeof *a);
  a->p.gap = a->k.gap = 0.001;
  a->p.simulate = a->p.sim_max_gpus = a->p.perturb = -1;
  a->p.sim_time_limit_s = -1; /* the pillar's default (capacity's: none) */
  int first = 1, c, rc, seen[NOPTS] = {0};
  while ((c = cli_getopt(CMD, argc, argv, "h", longs, &first)) != -1) {
    if (c == 'h' || c == O_HELP) {
      print_usage();
      return -1;
    }
    size_t i = 0;
    while (i < NOPTS && opts[i].id != c) i++;
    if (i == NOPTS) return 2;
    seen[i] = 1;
    if ((rc = take(a, c, optarg))) return rc;
  }
  if (optind >= argc) return cli_usage_error(CMD, "name a study: pillar, validate or capacity");
  static const struct {
    const char *name;
    int id;
  } studies[] = {{"validate", S_VALIDATE}, {"pillar", S_PILLAR}, {"capacity", S_CAPACITY}};
  const char *which = argv[optind];
  for (size_t i = 0; i < sizeof studies / sizeof studies[0]; i++)
    if (!strcmp(which, studies[i].name)) a->study = studies[i].id;
  if (!a->study)
    return cli_usage_error(CMD, "unknown study '%s' (pillar, validate, capacity)", which);
  if (optind + 1 < argc) return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind + 1]);
  for (size_t i = 0; i < NOPTS; i++) /* an option of another study: bad usage, named */
    if (seen[i] && !(opts[i].studies & a->study))
      return cli_usage_error(CMD, "--%s is not an option of study %s", opts[i].name, which);
  if (a->study == S_CAPACITY && (!a->k.model || !(a->k.tokens > 0)))
    return cli_usage_error(CMD, "capacity needs --model and --tokens");
  return 0;
}

/* validate: the store only with --db (its published and predicted scores). */
static int run_validate(args *a, const char *cal_cluster, const char *cal_list, int64_t cid) {
  a->v.db = a->db;
  a->v.out_dir = a->out;
  if (cid) a->v.calib_cluster = cal_cluster, a->v.calib_params = cal_list, a->v.calib_id = cid;
  study_validate_summary sum;
  pp_err err = {0};
  return study_validate(&a->v, &sum, &err) ? cli_fail(CMD, &err) : 0;
}

/* pillar: under mpirun every rank runs the grid (the searches sharded), rank 0 stores and
 * writes; an error on one rank takes the job down. */
static int run_pillar(args *a, const char *cal_cluster, const char *cal_list, int64_t cid) {
  pp_err err = {0};
  cli_job j;
  if (cli_job_init(&j, &err)) return cli_fail(CMD, &err);
  search_comm comm;
  cli_job_comm(&j, &comm);
  a->p.db = a->db ? a->db : STORE_DEFAULT_PATH;
  a->p.out_dir = j.rank == 0 ? a->out : NULL;
  a->p.progress = j.rank == 0 && isatty(2);
  if (j.size > 1) a->p.comm = &comm;
  if (cid) a->p.calib_cluster = cal_cluster, a->p.calib_params = cal_list, a->p.calib_id = cid;
  study_pillar_summary sum;
  int status = 0;
  if (study_pillar(&a->p, &sum, &err)) {
    status = pp_exit_status(err.code);
    if (j.rank == 0)
      cli_fail(CMD, &err);
    else
      fprintf(stderr, "podplan %s: rank %d: %s\n", CMD, j.rank, err.msg);
    if (j.size > 1) be_job_abort(status ? status : 1);
  } else if (j.rank == 0) {
    printf("\n%d cases (%d not on their fabric, %d read back from %s), %d searches run, %.1f s",
           sum.cases, sum.cases_na, sum.cases_resumed, a->p.db, sum.searches, sum.wall_s);
    if (j.size > 1) printf(" on %d ranks", j.size);
    static const char *const what[STUDY_PILLAR_NV] = {
        "two-level with Alpa's defaults", "two-level open (without them)",
        "the two-level space (global, island = node)",
        "the two-level space (global, island = NVLink domain)"};
    for (int v = 0; v < STUDY_PILLAR_NV; v++) {
      printf("\n%s: within 1%% of global in %d of %d cases (certified by global's "
             "bound in %d), no feasible plan in %d",
             what[v], sum.within_1pct[v], sum.ran[v], sum.certified_1pct[v], sum.no_plan[v]);
      if (sum.max_gap_case[v][0])
        printf("; largest gap to global's best +%.1f%% (%s)", 100 * sum.max_gap[v],
               sum.max_gap_case[v]);
    }
    if (sum.draws)
      printf("\nverdicts under %d parameter draws: %d of %d robust (>= 90%% of the draws agree), "
             "%d unresolved", sum.draws, sum.robust, sum.verdicts, sum.verdicts - sum.robust);
    printf("\n");
  }
  be_job_finalize();
  return status;
}

/* capacity: exit 1 when a deadline was given and no cluster meets it (the answer says so). */
static int run_capacity(args *a, const char *cal_cluster, const char *cal_list, int64_t cid) {
  pp_err err = {0};
  a->k.db = a->db ? a->db : STORE_DEFAULT_PATH;
  a->k.out_dir = a->out;
  a->k.progress = isatty(2);
  if (cid) a->k.calib_cluster = cal_cluster, a->k.calib_params = cal_list, a->k.calib_id = cid;
  study_capacity_summary sum;
  if (study_capacity(&a->k, &sum, &err)) return cli_fail(CMD, &err);
  printf("\n%d points (%d read back from %s), %d searches run, %.1f s\n", sum.points,
         sum.resumed, a->k.db, sum.searched, sum.wall_s);
  return a->deadline_given && sum.meeting == 0 ? 1 : 0;
}

int cmd_study(int argc, char **argv) {
  args a;
  int rc = parse_args(argc, argv, &a);
  if (rc) return rc < 0 ? 0 : rc;
  char cal_cluster[64], cal_list[1024], cal_sigmas[1024];
  int64_t cid = 0;
  /* validate reads a calibration from --db or podplan.db; the others from their store */
  if ((rc = cli_calibration_list(CMD, a.calibration, a.db, cal_cluster, sizeof cal_cluster,
                                 cal_list, cal_sigmas, sizeof cal_list, &cid)))
    return rc;
  a.p.calib_sigmas = cal_sigmas;
  static int (*const run[])(args *, const char *, const char *, int64_t) = {
      NULL, run_validate, run_pillar, NULL, run_capacity};
  return run[a.study](&a, cal_cluster, cal_list, cid);
}
