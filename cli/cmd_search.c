/* podplan search: one search method on the cost model (search/), the best K re-scored by the
 * simulator, the run checkpointed unit by unit into the store so that a killed search resumes,
 * and, under mpirun, its units sharded over the ranks (rank 0 prints and writes). */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "podplan/be.h"
#include "podplan/search.h"
#include "podplan/sim.h"
#include "podplan/store.h"
#include "podplan/study.h"

static const char *const CMD = "search";

static const char usage_head[] =
    "usage: podplan search --model M --cluster C [--gpus N] --gbs N\n"
    "                      --method exhaustive|megatron|two-level|global|all\n"
    "                      [--top K] [--simulate K] [--threads N] [--time-limit S]\n"
    "                      [--gap G] [--island node|domain] [--alpa-defaults]\n"
    "                      [--layer-clusters L|alpa] [--logical-meshes single-node|all]\n"
    "                      [space options] [--calibration SEL]\n"
    "                      [--param name=value,...] [--db F] [--json]\n"
    "\n"
    "Searches the plans of a model on a cluster for a global batch with one method on the\n"
    "cost model, re-scores the best K with the simulator, and stores the run, checkpointed\n"
    "unit by unit: the same command after a kill resumes where the last checkpoint left off.\n"
    "Under mpirun the work units are shared over the ranks; rank 0 prints and stores.\n"
    "\n"
    "  --model M          preset name, JSON file or inline JSON\n"
    "  --cluster C        preset name, JSON file or inline JSON; --gpus N sizes it\n"
    "  --gbs N            global batch, sequences per iteration (required: a recipe fixes it)\n"
    "  --method NAME      exhaustive: every uniform plan; megatron: the published heuristic;\n"
    "                     two-level: Alpa's inter-op DP + intra-op ILP (CBC);\n"
    "                     global: joint search with a lower bound and an optimality gap;\n"
    "                     all: each of them in turn (each stored as its own run), then a\n"
    "                     table of how they compare with global's lower bound\n"
    "  --top K            keep and report the best K plans (default 10)\n"
    "  --simulate K       re-score the best K (K <= top) with the simulator; the chosen plan\n"
    "                     is the fastest simulated one\n"
    "  --threads N        threads (default: the online CPUs)\n"
    "  --time-limit S     stop after S seconds with the best plan so far (0: none)\n"
    "  --gap G            global: stop when (best - bound) / bound <= G (default 0.01)\n"
    "  --island I         two-level: the fast island is the node (default) or the NVLink domain\n"
    "  --alpa-defaults    two-level: Alpa's GPT benchmark settings\n"
    "  --layer-clusters L two-level: layers clustered for the inter-op DP (default 16); alpa:\n"
    "                     Alpa's GPT grid search, 8 and 16, the best kept\n"
    "  --logical-meshes M two-level: single-node (model parallelism inside an island, Alpa's\n"
    "                     GPT default) or all (over every GPU of a sub-mesh)\n"
    "  --calibration SEL  a stored calibration of the cluster (id or latest; default none: the\n"
    "                     published defaults), as for predict; a calibrated search is its own\n"
    "                     run, its scores record the calibration\n"
    "  --param LIST       override cost-model parameters as for predict (podplan predict\n"
    "                     --param help lists them), after --calibration's values: the search\n"
    "                     runs on the software or hardware the list describes; a search with\n"
    "                     overrides is its own run, which records them\n"
    "  --db F             store file (default podplan.db)\n"
    "  --json             one JSON object: method, evaluations, wall_s, best, best_iter_time_s,\n"
    "                     lower_bound_s and gap (global), space_size, plans_found,\n"
    "                     search_run_id, top (the best K), ...\n"
    "  -h, --help         this text\n"
    "\n"
    "space options (restrict the plans searched):\n";
static const char usage_tail[] =
    "\n"
    "exit status: 0 a plan was found; 1 runtime failure, or no feasible plan (the output says\n"
    "why); 2 bad usage or bad input\n";

/* ---- options ----------------------------------------------------------------------------- */

enum { O_BASE = 256, O_SPACE = 512 };
enum {
  O_MODEL = O_BASE, O_CLUSTER, O_GPUS, O_GBS, O_METHOD, O_TOP, O_SIMULATE, O_THREADS,
  O_TIME_LIMIT, O_GAP, O_ISLAND, O_ALPA, O_LAYER_CLUSTERS, O_LOGICAL, O_CALIBRATION, O_PARAM,
  O_DB, O_JSON
};

static const struct option fixed_longs[] = {
    {"model", required_argument, NULL, O_MODEL},
    {"cluster", required_argument, NULL, O_CLUSTER},
    {"gpus", required_argument, NULL, O_GPUS},
    {"gbs", required_argument, NULL, O_GBS},
    {"method", required_argument, NULL, O_METHOD},
    {"top", required_argument, NULL, O_TOP},
    {"simulate", required_argument, NULL, O_SIMULATE},
    {"threads", required_argument, NULL, O_THREADS},
    {"time-limit", required_argument, NULL, O_TIME_LIMIT},
    {"gap", required_argument, NULL, O_GAP},
    {"island", required_argument, NULL, O_ISLAND},
    {"alpa-defaults", no_argument, NULL, O_ALPA},
    {"layer-clusters", required_argument, NULL, O_LAYER_CLUSTERS},
    {"logical-meshes", required_argument, NULL, O_LOGICAL},
    {"calibration", required_argument, NULL, O_CALIBRATION},
    {"param", required_argument, NULL, O_PARAM},
    {"db", required_argument, NULL, O_DB},
    {"json", no_argument, NULL, O_JSON},
    {"help", no_argument, NULL, 'h'},
};
#define NFIXED (sizeof fixed_longs / sizeof fixed_longs[0])
#define MAX_SPACE_OPTS 64

static void print_usage(void) {
  fputs(usage_head, stdout);
  for (size_t i = 0; i < search_space_opt_count(); i++) {
    const search_space_opt *o = search_space_opt_get(i);
    char left[40];
    snprintf(left, sizeof left, "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
    printf("  %-18s %s\n", left, o->help);
  }
  fputs(usage_tail, stdout);
}

typedef struct args {
  const char *model, *cluster, *method_name, *db, *island, *calibration, *params;
  int gpus, gbs, top, simulate, threads, layer_clusters, alpa, json, logical_all, layer_sweep;
  double time_limit_s, gap;
  int gap_set;
  /* space options in the order given: applied once the space exists */
  int nspace;
  const char *space_name[MAX_SPACE_OPTS], *space_value[MAX_SPACE_OPTS];
  /* the cost model's parameters: the defaults, then the --calibration's values (calib_id),
   * then --param's; param_key: those --param changed, canonical (empty: none) */
  cm_params prm;
  int64_t calib_id;
  char param_key[1024];
} args;

/* A number of seconds or a gap: finite and >= 0. */
static int parse_nonneg(const char *opt, const char *val, double *out) {
  char *end;
  errno = 0;
  double v = strtod(val, &end);
  if (errno || end == val || *end || !isfinite(v) || v < 0)
    return cli_usage_error(CMD, "%s: '%s' is not a number >= 0", opt, val);
  *out = v;
  return 0;
}

static int parse_args(int argc, char **argv, args *a) {
  struct option longs[NFIXED + MAX_SPACE_OPTS + 1];
  size_t n = 0;
  for (size_t i = 0; i < NFIXED; i++) longs[n++] = fixed_longs[i];
  for (size_t i = 0; i < search_space_opt_count() && i < MAX_SPACE_OPTS; i++) {
    const search_space_opt *o = search_space_opt_get(i);
    longs[n++] = (struct option){o->name, o->arg ? required_argument : no_argument, NULL,
                                 O_SPACE + (int)i};
  }
  longs[n] = (struct option){NULL, 0, NULL, 0};
  memset(a, 0, sizeof *a);
  a->db = STORE_DEFAULT_PATH;
  a->top = 10;
  a->gap = 0.01;
  int first = 1, c;
  while ((c = cli_getopt(CMD, argc, argv, "h", longs, &first)) != -1) {
    switch (c) {
    case 'h': print_usage(); return -1;
    case O_MODEL: a->model = optarg; break;
    case O_CLUSTER: a->cluster = optarg; break;
    case O_GPUS:
      if (cli_int(CMD, "--gpus", optarg, 1, SPEC_MAX_GPUS, &a->gpus)) return 2;
      break;
    case O_GBS:
      if (cli_int(CMD, "--gbs", optarg, 1, 1 << 30, &a->gbs)) return 2;
      break;
    case O_METHOD: a->method_name = optarg; break;
    case O_TOP:
      if (cli_int(CMD, "--top", optarg, 1, 1000, &a->top)) return 2;
      break;
    case O_SIMULATE:
      if (cli_int(CMD, "--simulate", optarg, 0, 1000, &a->simulate)) return 2;
      break;
    case O_THREADS:
      if (cli_int(CMD, "--threads", optarg, 0, 256, &a->threads)) return 2;
      break;
    case O_TIME_LIMIT:
      if (parse_nonneg("--time-limit", optarg, &a->time_limit_s)) return 2;
      break;
    case O_GAP:
      if (parse_nonneg("--gap", optarg, &a->gap)) return 2;
      a->gap_set = 1;
      break;
    case O_ISLAND:
      if (strcmp(optarg, "node") && strcmp(optarg, "domain"))
        return cli_usage_error(CMD, "--island: '%s' is not node or domain", optarg);
      a->island = optarg;
      break;
    case O_ALPA: a->alpa = 1; break;
    case O_LOGICAL:
      if (strcmp(optarg, "single-node") && strcmp(optarg, "all"))
        return cli_usage_error(CMD, "--logical-meshes: '%s' is not single-node or all", optarg);
      a->logical_all = !strcmp(optarg, "all");
      break;
    case O_LAYER_CLUSTERS:
      if (!strcmp(optarg, "alpa")) {
        a->layer_sweep = 1;
        break;
      }
      if (cli_int(CMD, "--layer-clusters", optarg, 1, 1 << 20, &a->layer_clusters)) return 2;
      break;
    case O_CALIBRATION: a->calibration = optarg; break;
    case O_PARAM: a->params = optarg; break;
    case O_DB: a->db = optarg; break;
    case O_JSON: a->json = 1; break;
    default:
      if (c >= O_SPACE && c < O_SPACE + MAX_SPACE_OPTS && a->nspace < MAX_SPACE_OPTS) {
        a->space_name[a->nspace] = search_space_opt_get((size_t)(c - O_SPACE))->name;
        a->space_value[a->nspace++] = optarg;
        break;
      }
      return 2;
    }
  }
  if (optind < argc) return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
  if (!a->model || !a->cluster || !a->gbs || !a->method_name)
    return cli_usage_error(CMD, "--model, --cluster, --gbs and --method are required");
  if (a->simulate > a->top)
    return cli_usage_error(CMD, "--simulate %d: at most --top (%d) plans are kept", a->simulate,
                           a->top);
  return 0;
}

/* Options of one method given to another: bad usage. */
static int check_method_opts(const args *a, search_method m) {
  if (m != SEARCH_GLOBAL && a->gap_set)
    return cli_usage_error(CMD, "--gap is an option of --method global");
  if (m != SEARCH_TWO_LEVEL &&
      (a->island || a->alpa || a->layer_clusters || a->layer_sweep || a->logical_all))
    return cli_usage_error(CMD, "--island, --alpa-defaults, --layer-clusters and "
                                "--logical-meshes are options of --method two-level");
  return 0;
}

/* ---- checkpoints and progress -------------------------------------------------------------- */

/* What the progress line needs: whether stderr is a terminal and a line is shown. */
typedef struct run_ctx {
  int tty;             /* stderr is a terminal: show progress */
  int shown;           /* a progress line is on the screen */
} run_ctx;

static void human(double v, char *buf, size_t n) {
  if (v >= 1e9)
    snprintf(buf, n, "%.2fG", v / 1e9);
  else if (v >= 1e6)
    snprintf(buf, n, "%.2fM", v / 1e6);
  else if (v >= 1e3)
    snprintf(buf, n, "%.1fk", v / 1e3);
  else
    snprintf(buf, n, "%.0f", v);
}

static void on_progress(const search_progress *p, void *vctx) {
  run_ctx *x = vctx;
  if (!x->tty || p->elapsed_s < 1.0) return;
  char done[32], total[40] = "", rate[32], line[256];
  human((double)p->done, done, sizeof done);
  if (p->total > 0) {
    total[0] = '/';
    human((double)p->total, total + 1, sizeof total - 1);
  }
  human(p->evals_per_s, rate, sizeof rate);
  int k = snprintf(line, sizeof line, "  units %d/%d  %s%s evaluations (%s/s)", p->units_done,
                   p->units, done, total, rate);
  if (p->best_s > 0 && k > 0 && (size_t)k < sizeof line)
    k += snprintf(line + k, sizeof line - (size_t)k, "  best %.4f s", p->best_s);
  if (p->bound_s > 0 && k > 0 && (size_t)k < sizeof line)
    snprintf(line + k, sizeof line - (size_t)k, "  bound %.4f s  gap %.2f%%", p->bound_s,
             100 * p->gap);
  fprintf(stderr, "\r%s\033[K", line);
  fflush(stderr);
  x->shown = 1;
}

static void progress_clear(run_ctx *x) {
  if (x->shown) fputs("\r\033[K", stderr);
  x->shown = 0;
}

/* ---- output ------------------------------------------------------------------------------ */

/* "0-7" or "0-3,8-11" */
static void gpu_ranges(const int *g, int n, char *buf, size_t cap) {
  size_t k = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && k < cap;) {
    int j = i;
    while (j + 1 < n && g[j + 1] == g[j] + 1) j++;
    int w = j > i ? snprintf(buf + k, cap - k, "%s%d-%d", k ? "," : "", g[i], g[j])
                  : snprintf(buf + k, cap - k, "%s%d", k ? "," : "", g[i]);
    if (w < 0) break;
    k += (size_t)w;
    i = j + 1;
  }
}

static void print_plan_text(const spec_plan *p, const char *indent) {
  char s[SPEC_PLAN_STR_MAX];
  if (!p->nstages && !spec_plan_format(p, s, sizeof s, NULL)) {
    printf("%s\n", s);
    return;
  }
  printf("non-uniform: %d stage%s, %d microbatch%s, sp=%d, zero=%d, schedule=%s\n", p->nstages,
         p->nstages == 1 ? "" : "s", p->microbatches, p->microbatches == 1 ? "" : "es", p->sp,
         p->zero, spec_schedule_name(p->schedule));
  for (int i = 0; i < p->nstages; i++) {
    const spec_stage *st = &p->stages[i];
    char g[256], ep[24] = "";
    gpu_ranges(st->gpus, st->ngpus, g, sizeof g);
    if (st->ep > 1) snprintf(ep, sizeof ep, ", ep %d", st->ep);
    printf("%sstage %d: layers %d-%d, GPUs %s, tp/cp/dp %d/%d/%d%s, recompute %s\n", indent, i,
           st->layer_begin, st->layer_end - 1, g, st->tp, st->cp, st->dp, ep,
           spec_recompute_name(st->recompute));
  }
}

static json_t *plan_json(const spec_plan *p) {
  char s[SPEC_PLAN_STR_MAX];
  if (!p->nstages && !spec_plan_format(p, s, sizeof s, NULL)) return json_string(s);
  char *j = spec_plan_json(p);
  json_t *o = j ? json_loads(j, 0, NULL) : NULL;
  free(j);
  return o ? o : json_null();
}

/* ---- the command ------------------------------------------------------------------------- */

static void print_text(const args *a, const spec_model *m, const spec_cluster *c,
                       const study_search_out *out, int threads, int ranks) {
  const search_result *r = &out->r;
  char rate[32];
  human(r->wall_s > 0 ? (double)r->evaluations / r->wall_s : 0, rate, sizeof rate);
  printf("%s: %lld evaluations, %lld fit, %lld pruned; %d of %d units%s; %.2f s (%s evals/s), "
         "%d thread%s%s",
         search_method_name(r->method), r->evaluations, r->feasible, r->pruned, r->units_done,
         r->units, r->complete ? "" : " (stopped early)", r->wall_s, rate, threads,
         threads == 1 ? "" : "s", ranks > 1 ? "" : "\n");
  if (ranks > 1) printf(" x %d ranks\n", ranks);
  printf("search run %lld in %s", (long long)out->run_id, a->db);
  if (out->resumed)
    printf(" (resumed: %d of %d units were done, carried over from its checkpoints; %d searched"
           " now)", r->units_carried, out->units, r->units_searched);
  printf("\n");
  if (r->method == SEARCH_GLOBAL && r->lower_bound_s > 0)
    printf("lower bound %.4f s; gap %.2f%%; %s\n", r->lower_bound_s, 100 * r->gap,
           r->certified ? "certified (the gap asked is met)"
                        : "not certified (stopped before the gap asked was met)");
  else if (r->method == SEARCH_GLOBAL && r->units_done < r->units)
    printf("no lower bound (stopped before every unit was searched); not certified\n");
  if (r->note[0]) printf("%s\n", r->note);
  if (!r->ntop) {
    printf("no feasible plan: %s\n", r->why);
    return;
  }
  printf("\n%4s %10s %6s %8s", "rank", "iter s", "MFU", "mem GiB");
  if (out->nsim) printf(" %10s %4s", "sim s", "sim");
  printf("  plan\n");
  for (int i = 0; i < r->ntop; i++) {
    const search_entry *e = &r->top[i];
    printf("%4d %10.4f %5.1f%% %8.2f", i + 1, e->cm.iter_time_s, 100 * e->cm.mfu,
           e->cm.mem_gib_per_gpu);
    if (out->nsim) {
      if (i < out->nsim && e->simulated)
        printf(" %10.4f %3d%s", e->sim_iter_s, out->sim_rank[i],
               out->sim_rank[i] != i + 1 ? "*" : " ");
      else
        printf(" %10s %4s", "", "");
    }
    printf("  ");
    print_plan_text(&e->plan, "        ");
  }
  if (out->nsim) {
    int moved = 0;
    for (int i = 0; i < out->nsim; i++) moved += r->top[i].simulated && out->sim_rank[i] != i + 1;
    printf("%s\n", moved ? "* the simulator ranks this plan differently from the cost model"
                         : "the simulator keeps the cost model's ranking");
  }
  const search_entry *b = &r->top[out->chosen];
  printf("\nbest (plan %lld in %s): ", (long long)out->best_plan_id, a->db);
  print_plan_text(&b->plan, "  ");
  printf("  %.4f s per iteration (cost model)", b->cm.iter_time_s);
  if (b->simulated) printf(", %.4f s simulated", b->sim_iter_s);
  printf(", MFU %.1f%%, %.2f GiB per GPU (%s, %d GPUs, gbs %d)\n", 100 * b->cm.mfu,
         b->cm.mem_gib_per_gpu, m->name, c->gpus, a->gbs);
}

static void print_json(const args *a, const spec_model *m, const spec_cluster *c,
                       const study_search_out *out, int ranks) {
  const search_result *r = &out->r;
  json_t *o = json_object();
  const search_entry *b = r->ntop ? &r->top[out->chosen] : NULL;
  json_object_set_new(o, "method", json_string(search_method_name(r->method)));
  json_object_set_new(o, "evaluations", json_integer(r->evaluations));
  json_object_set_new(o, "wall_s", json_real(r->wall_s));
  json_object_set_new(o, "calibration_id", a->calib_id ? json_integer(a->calib_id) : json_null());
  json_object_set_new(o, "params", a->param_key[0] ? json_string(a->param_key) : json_null());
  json_object_set_new(o, "best", b ? plan_json(&b->plan) : json_null());
  json_object_set_new(o, "best_plan_id", b ? json_integer(out->best_plan_id) : json_null());
  json_object_set_new(o, "best_iter_time_s", b ? json_real(b->cm.iter_time_s) : json_null());
  if (b && b->simulated)
    json_object_set_new(o, "best_sim_iter_time_s", json_real(b->sim_iter_s));
  if (r->method == SEARCH_GLOBAL) {
    json_object_set_new(o, "lower_bound_s",
                        r->lower_bound_s > 0 ? json_real(r->lower_bound_s) : json_null());
    json_object_set_new(o, "gap", r->lower_bound_s > 0 ? json_real(r->gap) : json_null());
    json_object_set_new(o, "certified", json_boolean(r->certified));
  }
  json_object_set_new(o, "space_size", json_real(r->space_size));
  json_object_set_new(o, "plans_found", json_integer(r->feasible));
  json_object_set_new(o, "pruned", json_integer(r->pruned));
  json_object_set_new(o, "units", json_integer(r->units));
  json_object_set_new(o, "units_done", json_integer(r->units_done));
  json_object_set_new(o, "units_carried", json_integer(r->units_carried));
  json_object_set_new(o, "units_searched", json_integer(r->units_searched));
  json_object_set_new(o, "complete", json_boolean(r->complete));
  json_object_set_new(o, "search_run_id", json_integer(out->run_id));
  json_object_set_new(o, "resumed", json_boolean(out->resumed));
  json_object_set_new(o, "ranks", json_integer(ranks));
  json_object_set_new(o, "model", json_string(m->name));
  json_object_set_new(o, "cluster", json_string(c->name));
  json_object_set_new(o, "gpus", json_integer(c->gpus));
  json_object_set_new(o, "gbs", json_integer(a->gbs));
  json_t *top = json_array();
  for (int i = 0; i < r->ntop; i++) {
    const search_entry *e = &r->top[i];
    json_t *t = json_pack("{s:i, s:o, s:f, s:f, s:f, s:f}", "rank", i + 1, "plan",
                          plan_json(&e->plan), "iter_time_s", e->cm.iter_time_s, "mfu", e->cm.mfu,
                          "tokens_per_s", e->cm.tokens_per_s, "mem_gib_per_gpu",
                          e->cm.mem_gib_per_gpu);
    if (e->simulated) {
      json_object_set_new(t, "sim_iter_time_s", json_real(e->sim_iter_s));
      json_object_set_new(t, "sim_rank", json_integer(out->sim_rank[i]));
    }
    json_array_append_new(top, t);
  }
  json_object_set_new(o, "top", top);
  if (!r->ntop) json_object_set_new(o, "why", json_string(r->why));
  if (r->note[0]) json_object_set_new(o, "note", json_string(r->note));
  json_dumpf(o, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
  putchar('\n');
  json_decref(o);
}

/* Prints err on rank 0 (errors of other ranks too, prefixed), then takes the job down when
 * other ranks may be waiting. */
static int fail(const cli_job *j, const pp_err *err, int abort_job) {
  int st = pp_exit_status(err->code);
  if (j->rank == 0 || abort_job) {
    if (j->rank == 0)
      cli_fail(CMD, err);
    else
      fprintf(stderr, "podplan %s: rank %d: %s\n", CMD, j->rank, err->msg);
  }
  if (abort_job && j->size > 1) be_job_abort(st ? st : 1);
  return st;
}

/* What a run of one method gives the comparison of --method all. */
typedef struct cmp_row {
  search_method method;
  int found, status;
  double best_s, mfu, bound_s, wall_s;
  long long evaluations;
  int64_t run_id;
} cmp_row;

static void progress_cb(const search_progress *p, void *ctx) { on_progress(p, ctx); }

/* One method through the funnel (study_search: the run, its checkpoints, the simulator) and
 * its report. Returns the exit status. */
static int search_one(const args *a, search_method method, const spec_model *mm,
                      const spec_cluster *cc, const cli_job *jp, search_comm *commp, cmp_row *row) {
  spec_model m = *mm;
  spec_cluster c = *cc;
  cli_job j = *jp;
  pp_err err = {0};
  study_search_req q = {.m = &m, .c = &c, .simulate = a->simulate, .calib_id = a->calib_id,
                        .params = a->param_key, .progress = progress_cb};
  search_opts_default(method, a->gbs, &q.o);
  for (int i = 0; i < a->nspace; i++)
    if (search_space_set(&q.o.space, a->space_name[i], a->space_value[i], &err))
      return fail(&j, &err, 0);
  q.o.top = a->top;
  q.o.threads = a->threads;
  q.o.time_limit_s = a->time_limit_s;
  q.o.gap = a->gap;
  q.o.island_domain = a->island && !strcmp(a->island, "domain");
  q.o.alpa_defaults = a->alpa;
  q.o.layer_clusters = a->layer_clusters;
  q.o.logical_all = a->logical_all;
  q.o.layer_sweep = a->layer_sweep;
  if (j.size > 1) q.o.comm = commp;
  cm_params prm = a->prm;
  run_ctx x = {.tty = isatty(2)};
  q.ctx = &x;
  study_search_out out;
  memset(&out, 0, sizeof out);
  int units = 0, status = 0;
  int threads = q.o.threads;
  if (threads <= 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    threads = n > 0 ? (int)n : 1;
  }
  /* errors every rank finds alike (the cost model, the units) need no abort */
  double space = 0;
  if (cm_model_create(&m, &c, &prm, &q.cm, &err) ||
      search_units(q.cm, &q.o, &units, &space, &err)) {
    status = fail(&j, &err, 0);
    goto done;
  }
  if (j.rank == 0 && !a->json) {
    printf("%s on %s (%d GPUs), global batch %d, method %s", m.name, c.name, c.gpus, a->gbs,
           search_method_name(method));
    if (a->calib_id) printf(", calibration %lld", (long long)a->calib_id);
    if (a->param_key[0]) printf(", parameters %s", a->param_key);
    putchar('\n');
    /* the space is known before the search: say how large it is */
    if (space < 1e15)
      printf("space: %.0f plans in %d units\n", space, units);
    else
      printf("space: %.3g plans in %d units\n", space, units);
    fflush(stdout);
  }
  q.db = a->db;
  int rc = study_search(&q, &out, &err);
  progress_clear(&x);
  if (rc) {
    if (!out.began) /* rank 0 could not begin: it says why, the others stop quietly */
      status = j.rank == 0 ? fail(&j, &err, 0) : pp_exit_status(err.code);
    else
      status = fail(&j, &err, !out.searched);
    goto done;
  }
  if (j.rank != 0) goto done;
  const search_result *r = &out.r;
  if (a->json)
    print_json(a, &m, &c, &out, j.size);
  else
    print_text(a, &m, &c, &out, threads, j.size);
  status = r->ntop ? 0 : 1;
  if (row) {
    row->found = r->ntop > 0;
    row->best_s = r->best_s, row->mfu = r->ntop ? r->top[0].cm.mfu : 0;
    row->bound_s = r->lower_bound_s, row->wall_s = r->wall_s, row->evaluations = r->evaluations;
    row->run_id = out.run_id;
  }

done:
  study_search_out_clear(&out);
  cm_model_destroy(q.cm);
  return status;
}

/* --method all: each method in turn (stored as its own run), then how they compare. */
static void print_comparison(const cmp_row *rows, int n, const spec_model *m,
                             const spec_cluster *c, int gbs) {
  double bound = 0;
  for (int i = 0; i < n; i++)
    if (rows[i].method == SEARCH_GLOBAL && rows[i].bound_s > 0) bound = rows[i].bound_s;
  printf("\ncomparison: %s on %d GPUs of %s, global batch %d\n", m->name, c->gpus, c->name, gbs);
  printf("%-11s %10s %7s %13s %12s %9s  %s\n", "method", "iter s", "MFU", "vs bound",
         "evaluations", "wall s", "run");
  for (int i = 0; i < n; i++) {
    const cmp_row *w = &rows[i];
    char vs[32] = "-";
    if (w->found && bound > 0) snprintf(vs, sizeof vs, "+%.2f%%", 100 * (w->best_s - bound) / bound);
    if (w->found)
      printf("%-11s %10.4f %6.1f%% %13s %12lld %9.2f  %lld\n", search_method_name(w->method),
             w->best_s, 100 * w->mfu, vs, w->evaluations, w->wall_s, (long long)w->run_id);
    else
      printf("%-11s %10s %7s %13s %12s %9s  %s\n", search_method_name(w->method), "-", "-", "-",
             "-", "-", w->status == 1 ? "no feasible plan" : "failed");
  }
  if (bound > 0)
    printf("vs bound: how far each method's best is above global's lower bound (%.4f s): no plan "
           "of global's space is faster than the bound\n", bound);
}

int cmd_search(int argc, char **argv) {
  args a;
  int rc = parse_args(argc, argv, &a);
  if (rc) return rc < 0 ? 0 : rc;
  /* until MPI starts, errors every rank finds alike are printed by the first one only */
  const cli_job pre = {be_job_launcher_rank(), 1};
  pp_err err = {0};
  int all = !strcmp(a.method_name, "all");
  search_method method = SEARCH_EXHAUSTIVE;
  if (!all && search_method_parse(a.method_name, &method, &err)) {
    pp_err_set(&err, PP_USAGE,
               "--method: '%s' is not a method (exhaustive, megatron, two-level, global, all)",
               a.method_name);
    return fail(&pre, &err, 0);
  }
  if (!all && (rc = check_method_opts(&a, method))) return rc;
  search_space probe;
  search_space_default(a.gbs, &probe);
  for (int i = 0; i < a.nspace; i++)
    if (search_space_set(&probe, a.space_name[i], a.space_value[i], &err))
      return fail(&pre, &err, 0);
  spec_model m;
  spec_cluster c;
  if (spec_model_load(a.model, &m, &err) || spec_cluster_load(a.cluster, a.gpus, &c, &err) ||
      spec_pair_validate(&m, &c, &err))
    return fail(&pre, &err, 0);
  cm_params_default(&m, &a.prm);
  if ((rc = cli_calibration(CMD, a.calibration, a.db, &c, &a.prm, &a.calib_id))) return rc;
  if (a.params && cm_params_override(&a.prm, a.params, a.param_key, sizeof a.param_key, &err))
    return fail(&pre, &err, 0);

  cli_job j;
  if (cli_job_init(&j, &err)) return fail(&pre, &err, 0);
  search_comm comm;
  cli_job_comm(&j, &comm);
  int status = 0;
  if (!all) {
    status = search_one(&a, method, &m, &c, &j, &comm, NULL);
  } else {
    cmp_row rows[SEARCH_NMETHODS];
    int worst = 0;
    for (int k = 0; k < SEARCH_NMETHODS; k++) {
      rows[k] = (cmp_row){.method = (search_method)k};
      if (j.rank == 0 && !a.json) printf("%s== %s\n", k ? "\n" : "", search_method_name(k));
      fflush(stdout);
      rows[k].status = search_one(&a, (search_method)k, &m, &c, &j, &comm, &rows[k]);
      if (rows[k].status > worst) worst = rows[k].status;
      if (rows[k].status == 2) break; /* bad input is bad for every method */
    }
    if (j.rank == 0 && !a.json && worst < 2) print_comparison(rows, SEARCH_NMETHODS, &m, &c, a.gbs);
    status = worst;
  }
  be_job_finalize();
  return status;
}
