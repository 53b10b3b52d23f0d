/* The pillar study (study.h): where Alpa's two-level split still finds the best plan, fabric
 * by fabric. For every case of the grid (benchmarks/data/pillar_grid.csv: fabric, model, GPUs,
 * global batch) each method searches through the funnel (study_search: stored, its top 3
 * simulated); the case's figures are stored per (case, method) in the store's study cases, so
 * that a study killed and run again skips what is done. What the best global plan does that
 * two-level cannot is read off its layout (spec_layout_build). study_pillar_out.c writes the
 * tables, the conclusion and the plots. Depends on search.h, store.h, spec.h. */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "podplan/fs.h"
#include "podplan/search.h"
#include "podplan/sim.h"
#include "podplan/store.h"
#include "podplan/study.h"
#include "study_int.h"

const char *const study__pm_name[STUDY__PM_N] = {
    "megatron",        "two-level",   "two-level-domain", "two-level-all", "two-level-open",
    "exhaustive",
    "two-level-space", "two-level-space-domain", "global", "global-no-cp", "global-no-ep",
    "global-zero01",   "global-no-interleaved", "global-same-recompute", "global-uniform",
    "global-tp-in-node", "inter-op-only", "intra-op-only"};

/* How each method is searched: the search method, two-level's island, and the restrictions
 * of the space: global in the two-level space (--hierarchy node or domain: the hierarchy as a
 * switch on one optimizer), global with one knob removed (the value "gpus-per-node" stands
 * for the cluster's), and the ablation (Alpa's inter-op only: one GPU per stage;
 * intra-op only: one stage). knob: what the rung removes. */
static const struct pm_def {
  search_method method;
  int island_domain, alpa_defaults;
  const char *opt[2], *val[2];
  const char *knob;
  int published; /* Alpa's GPT suite: logical meshes "all", its layer-cluster grid */
} pm_defs[STUDY__PM_N] = {
    {SEARCH_MEGATRON, 0, 0, {NULL, NULL}, {NULL, NULL}},
    {SEARCH_TWO_LEVEL, 0, 1, {NULL, NULL}, {NULL, NULL}},
    {SEARCH_TWO_LEVEL, 1, 1, {NULL, NULL}, {NULL, NULL}},
    {SEARCH_TWO_LEVEL, 0, 1, {NULL, NULL}, {NULL, NULL}, NULL, 1},
    {SEARCH_TWO_LEVEL, 0, 0, {NULL, NULL}, {NULL, NULL}},
    {SEARCH_EXHAUSTIVE, 0, 0, {NULL, NULL}, {NULL, NULL}},
    {SEARCH_GLOBAL, 0, 0, {"hierarchy", NULL}, {"node", NULL}},
    {SEARCH_GLOBAL, 0, 0, {"hierarchy", NULL}, {"domain", NULL}},
    {SEARCH_GLOBAL, 0, 0, {NULL, NULL}, {NULL, NULL}},
    {SEARCH_GLOBAL, 0, 0, {"no-cp", NULL}, {NULL, NULL}, "context parallelism"},
    {SEARCH_GLOBAL, 0, 0, {"no-ep", NULL}, {NULL, NULL}, "expert parallelism"},
    {SEARCH_GLOBAL, 0, 0, {"zero", NULL}, {"0,1", NULL}, "ZeRO-2/3"},
    {SEARCH_GLOBAL, 0, 0, {"schedules", NULL}, {"gpipe,1f1b", NULL}, "interleaving"},
    {SEARCH_GLOBAL, 0, 0, {"same-recompute", NULL}, {NULL, NULL}, "per-stage recomputation"},
    {SEARCH_GLOBAL, 0, 0, {"uniform-only", NULL}, {NULL, NULL},
     "non-uniform pipelines (uneven stages, per-stage configurations)"},
    {SEARCH_GLOBAL, 0, 0, {"max-tp", NULL}, {"gpus-per-node", NULL}, "TP across nodes"},
    {SEARCH_TWO_LEVEL, 0, 1, {"max-tp", "max-dp"}, {"1", "1"}},
    {SEARCH_TWO_LEVEL, 0, 1, {"max-pp", NULL}, {"1", NULL}},
};

const char *study__pm_knob(study__pm m) { return pm_defs[m].knob; }

static int in_list(const char *list, const char *name);

/* The methods of a case: the main grid's ladder (every method but the ablation's); Alpa's
 * ablation: Megatron, two-level, its two halves and global; --rungs keeps the named ones
 * (and global, which every figure is measured against). */
static int pm_in_set(study__pm m, const char *set, const char *rungs) {
  if (m != STUDY__PM_GLOBAL && !in_list(rungs, study__pm_name[m])) return 0;
  if (m == STUDY__PM_INTER_ONLY || m == STUDY__PM_INTRA_ONLY) return !strcmp(set, "ablation");
  if (m == STUDY__PM_MEGATRON || m == STUDY__PM_TWO_LEVEL || m == STUDY__PM_GLOBAL) return 1;
  return strcmp(set, "ablation") != 0;
}

/* A space option's value on cluster c: "gpus-per-node" is its GPUs per node. */
static const char *pm_value(const char *v, const spec_cluster *c, char buf[16]) {
  if (!v || strcmp(v, "gpus-per-node")) return v;
  snprintf(buf, 16, "%d", c->gpus_per_node);
  return buf;
}

/* Applies method pm's space options to s on cluster c. */
static int pm_space(study__pm pm, const spec_cluster *c, search_space *s, pp_err *err) {
  const struct pm_def *d = &pm_defs[pm];
  char buf[16];
  for (int i = 0; i < 2 && d->opt[i]; i++)
    if (search_space_set(s, d->opt[i], pm_value(d->val[i], c, buf), err)) return err->code;
  return PP_OK;
}

/* A rung that would search global's own space on this case is not searched and shows as not
 * run: the two-level space where one island holds every GPU (256 GPUs of one NVLink domain),
 * expert parallelism removed from a dense model. */
static int pm_same_as_global(const spec_model *m, const spec_cluster *c, study__pm pm) {
  pp_err err = {0};
  search_space s;
  search_space_default(1, &s);
  if (pm_space(pm, c, &s, &err)) return 0;
  return search_island_single(&s, c) || (pm == STUDY__PM_NO_EP && m->experts == 0);
}

/* A rung whose island is the NVLink domain on a cluster whose domain is its node (DGX, the V100
 * and TPU clusters): the same search as its node rung (returned), which it copies. */
static study__pm pm_domain_is_node(const spec_cluster *c, study__pm pm) {
  if (c->nvlink.domain_gpus > c->gpus_per_node) return pm;
  return pm == STUDY__PM_TWO_LEVEL_DOMAIN ? STUDY__PM_TWO_LEVEL
         : pm == STUDY__PM_SPACE_DOMAIN   ? STUDY__PM_SPACE_NODE
                                          : pm;
}

/* ---- the grid -------------------------------------------------------------------------- */

/* A two-level-space rung asked by name where one island holds every GPU of every case of the
 * grid (its space is global's there): bad usage, named. */
static int check_rung_islands(const study_pillar_opts *o, const study__pcase *cases, int n,
                              pp_err *err) {
  static const study__pm hier[] = {STUDY__PM_SPACE_NODE, STUDY__PM_SPACE_DOMAIN};
  for (int j = 0; o->rungs && j < 2; j++) {
    if (!in_list(o->rungs, study__pm_name[hier[j]])) continue;
    int some = 0;
    for (int i = 0; i < n && !some; i++) {
      spec_cluster c;
      pp_err e2 = {0};
      search_space s;
      search_space_default(1, &s);
      some = spec_cluster_load(cases[i].fabric, cases[i].gpus, &c, &e2) ||
             pm_space(hier[j], &c, &s, &e2) || !search_island_single(&s, &c);
    }
    if (!some)
      return pp_err_set(err, PP_USAGE, "--rungs: %s: one island holds every GPU of every case "
                        "asked for (its space is global's)", study__pm_name[hier[j]]);
  }
  return PP_OK;
}

/* 1 when name is in the comma list (NULL: every name). */
static int in_list(const char *list, const char *name) {
  if (!list) return 1;
  size_t n = strlen(name);
  for (const char *p = list; *p;) {
    const char *e = strchr(p, ',');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    if (l == n && !strncmp(p, name, n)) return 1;
    p += l + (e ? 1 : 0);
  }
  return 0;
}

/* Every name of a comma list must be one of vals[0..n) (a value of the grid's column, a
 * method's name): an unknown one is bad usage, named with `why` and the known ones. */
static int check_names(const char *list, const char *what, const char *const *vals, int n,
                       const char *why, pp_err *err) {
  if (!list) return PP_OK;
  if (!*list) return pp_err_set(err, PP_USAGE, "--%s: empty list", what);
  char known[1024] = "";
  size_t kn = 0;
  for (int r = 0; r < n; r++)
    if (vals[r][0] != '{' && !strstr(known, vals[r]) && kn + strlen(vals[r]) + 3 < sizeof known)
      kn += (size_t)snprintf(known + kn, sizeof known - kn, "%s%s", kn ? ", " : "", vals[r]);
  for (const char *p = list; *p;) {
    const char *e = strchr(p, ',');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    int found = 0;
    for (int r = 0; r < n && !found; r++) found = strlen(vals[r]) == l && !strncmp(vals[r], p, l);
    if (!found)
      return pp_err_set(err, PP_USAGE, "--%s: '%.*s' %s (%s)", what, (int)l, p, why, known);
    p += l + (e ? 1 : 0);
  }
  return PP_OK;
}

/* --fabrics, --scales (values of their columns) and --models (each row's model by name: a
 * preset's, or an inline model's JSON name) checked against the grid. */
static int check_lists(const study_pillar_opts *o, const study__csv *g, int cf, int cg, int cm,
                       const char *origin, pp_err *err) {
  const char **vals = calloc((size_t)(g->nrows ? g->nrows : 1), sizeof *vals);
  char (*names)[SPEC_NAME_MAX] = calloc((size_t)(g->nrows ? g->nrows : 1), sizeof *names);
  int rc = vals && names ? PP_OK : pp_err_set(err, PP_NOMEM, "pillar: out of memory");
  const int cols[2] = {cf, cg};
  const char *lists[2] = {o->fabrics, o->scales}, *whats[2] = {"fabrics", "scales"};
  for (int k = 0; k < 2 && !rc; k++) {
    for (int r = 0; r < g->nrows; r++) vals[r] = g->rows[r][cols[k]];
    rc = check_names(lists[k], whats[k], vals, g->nrows, "is not in the pillar grid", err);
  }
  for (int r = 0; !rc && o->models && r < g->nrows; r++) {
    spec_model m;
    if (spec_model_load(g->rows[r][cm], &m, err)) {
      rc = pp_err_prefix(err, "%s: row %d: model", origin, r + 2);
      break;
    }
    snprintf(names[r], sizeof names[r], "%s", m.name);
    vals[r] = names[r];
  }
  if (!rc && o->models)
    rc = check_names(o->models, "models", vals, g->nrows, "is not in the pillar grid", err);
  free(vals), free(names);
  return rc;
}

static int parse_int_field(const char *v, const char *origin, int row, const char *col,
                           int *out, pp_err *err) {
  char *end;
  long x = strtol(v, &end, 10);
  if (end == v || *end || x < 1 || x > SPEC_MAX_GPUS * 1024L)
    return pp_err_set(err, PP_INPUT, "%s: row %d: %s: '%s' is not a positive integer", origin,
                      row + 2, col, v);
  *out = (int)x;
  return PP_OK;
}

/* The cases of the grid this study runs: quick: the rows of set quick; otherwise the rows of
 * sets quick, full and ablation, and with --large those of set large too; then the
 * --fabrics/--models/--scales lists. */
static int load_cases(const study_pillar_opts *o, study__pcase **out, int *n, pp_err *err) {
  study__csv g;
  const char *origin = o->grid ? o->grid : "pillar_grid.csv (built in)";
  if (study__csv_load(o->grid, study__pillar_grid, study__pillar_grid_len, "pillar grid", &g,
                      err))
    return err->code;
  int cs = study__csv_col(&g, "set"), cf = study__csv_col(&g, "fabric"),
      cm = study__csv_col(&g, "model"), cg = study__csv_col(&g, "gpus"),
      cb = study__csv_col(&g, "gbs");
  int rc = PP_OK;
  if (cs < 0 || cf < 0 || cm < 0 || cg < 0 || cb < 0)
    rc = pp_err_set(err, PP_INPUT, "%s: the header needs set, fabric, model, gpus and gbs",
                    origin);
  if (!rc) rc = check_lists(o, &g, cf, cg, cm, origin, err);
  if (!rc && !(*out = calloc((size_t)(g.nrows ? g.nrows : 1), sizeof **out)))
    rc = pp_err_set(err, PP_NOMEM, "pillar: out of memory");
  *n = 0;
  for (int r = 0; !rc && r < g.nrows; r++) {
    char **f = g.rows[r];
    if (strcmp(f[cs], "quick") && strcmp(f[cs], "full") && strcmp(f[cs], "ablation") &&
        strcmp(f[cs], "large")) {
      rc = pp_err_set(err, PP_INPUT,
                      "%s: row %d: set: '%s' is not quick, full, large or ablation", origin,
                      r + 2, f[cs]);
      break;
    }
    if ((o->quick && strcmp(f[cs], "quick")) || (!o->large && !strcmp(f[cs], "large")))
      continue;
    study__pcase *k = &(*out)[*n];
    memset(k, 0, sizeof *k);
    if ((rc = parse_int_field(f[cg], origin, r, "gpus", &k->gpus, err)) ||
        (rc = parse_int_field(f[cb], origin, r, "gbs", &k->gbs, err)))
      break;
    snprintf(k->set, sizeof k->set, "%s", f[cs]);
    snprintf(k->fabric, sizeof k->fabric, "%s", f[cf]);
    snprintf(k->model_arg, sizeof k->model_arg, "%s", f[cm]);
    spec_model m;
    if (spec_model_load(k->model_arg, &m, err)) {
      rc = pp_err_prefix(err, "%s: row %d: model", origin, r + 2);
      break;
    }
    snprintf(k->model, sizeof k->model, "%s", m.name);
    char scale[16];
    snprintf(scale, sizeof scale, "%d", k->gpus);
    if (!in_list(o->fabrics, k->fabric) || !in_list(o->models, k->model) ||
        !in_list(o->scales, scale))
      continue;
    (*n)++;
  }
  study__csv_free(&g);
  if (!rc && !*n)
    rc = pp_err_set(err, PP_USAGE, "pillar: no case of the grid matches the lists given");
  if (rc) {
    free(*out);
    *out = NULL;
  }
  return rc;
}

/* ---- what a plan does that two-level cannot ------------------------------------------- */

static int is_pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }

/* Appends one trait ("; " between). */
static void trait(char *buf, size_t n, const char *fmt, ...) {
  size_t k = strlen(buf);
  if (k + 3 >= n) return;
  if (k) k += (size_t)snprintf(buf + k, n - k, "; ");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + k, n - k, fmt, ap);
  va_end(ap);
}

/* Reads the plan's layout: a TP group over GPUs of several nodes, a stage's block that is
 * neither a (1, 2^k) sub-mesh inside a node nor whole nodes (Alpa's sub-mesh shapes), stages
 * of unequal depth; and what two-level's space leaves out: context parallelism, schedules
 * other than 1F1B, ZeRO beyond stage 1, layers not recomputed (Alpa's defaults recompute
 * every layer; the recompute trait comes last, STUDY__TRAIT_RECOMPUTE). */
static void plan_traits(const spec_plan *p, const spec_model *m, const spec_cluster *c,
                        char *buf, size_t n) {
  buf[0] = '\0';
  spec_layout l;
  pp_err err = {0};
  if (spec_layout_build(p, m, c->gpus, &l, &err)) {
    snprintf(buf, n, "(layout: %.400s)", err.msg);
    return;
  }
  int node = c->gpus_per_node > 0 ? c->gpus_per_node : 1, minl = 1 << 30, maxl = 0;
  int tp_nodes = 1, tp_n = 1, odd_block = 0, odd_n = 0, straddle = 0, norecomp = 0;
  for (int s = 0; s < l.nstages; s++) {
    const spec_slot *first = NULL;
    int ng = 0, lo = 1 << 30, hi = -1;
    for (int i = 0; i < l.nslots; i++)
      if (l.slots[i].stage == s) {
        if (!first) first = &l.slots[i];
        ng++;
        if (l.slots[i].gpu < lo) lo = l.slots[i].gpu;
        if (l.slots[i].gpu > hi) hi = l.slots[i].gpu;
      }
    if (!first) continue;
    const spec_group *tg = &l.groups[first->group[SPEC_GRP_TP]];
    int nodes = 1;
    for (int i = 1; i < tg->n; i++) nodes += tg->gpus[i] / node != tg->gpus[i - 1] / node;
    if (nodes > tp_nodes) tp_nodes = nodes, tp_n = tg->n;
    int in_node = ng <= node && lo / node == hi / node && is_pow2(ng);
    int whole = ng % node == 0 && lo % node == 0;
    if (!in_node && !whole) {
      odd_block = 1, odd_n = ng;
      straddle |= lo / node != hi / node;
    }
    int layers = p->nstages ? p->stages[s].layer_end - p->stages[s].layer_begin
                            : l.layers[s * l.vpp];
    if (layers < minl) minl = layers;
    if (layers > maxl) maxl = layers;
    spec_recompute rc = p->nstages ? p->stages[s].recompute : p->recompute;
    norecomp |= rc != SPEC_RECOMPUTE_FULL;
  }
  if (tp_nodes > 1)
    trait(buf, n, "TP over %d GPUs of %d nodes%s", tp_n, tp_nodes,
          c->nvlink.domain_gpus > node ? " in one NVLink domain" : "");
  if (odd_block)
    trait(buf, n, "a stage on %d GPUs%s (not an Alpa sub-mesh)", odd_n,
          straddle ? " straddling nodes" : "");
  if (l.nstages > 1 && maxl != minl) trait(buf, n, "uneven stages (%d to %d layers)", minl, maxl);
  int cp = 1;
  for (int s = 0; s < p->nstages; s++)
    if (p->stages[s].cp > cp) cp = p->stages[s].cp;
  if (!p->nstages) cp = p->cp;
  if (cp > 1) trait(buf, n, "context parallelism over %d GPUs (two-level: none)", cp);
  if (p->schedule == SPEC_SCHED_INTERLEAVED)
    trait(buf, n, "interleaved 1F1B, %d chunks per stage (two-level: 1F1B)", p->vpp);
  else if (p->schedule != SPEC_SCHED_1F1B)
    trait(buf, n, "the %s schedule (two-level: 1F1B)", spec_schedule_name(p->schedule));
  if (p->zero >= 2) trait(buf, n, "ZeRO-%d (Alpa's GPT suite: ZeRO-1 at most)", p->zero);
  if (norecomp) trait(buf, n, "%s", STUDY__TRAIT_RECOMPUTE);
  spec_layout_free(&l);
}

/* A plan briefly: the uniform string, or its stages ("2 stages: 0-47 L on 128 GPUs tp8 dp16;
 * ..."). */
static void plan_brief(const spec_plan *p, char *buf, size_t n) {
  if (!p->nstages && !spec_plan_format(p, buf, n, NULL)) return;
  int k = snprintf(buf, n, "%d stage%s, %d microbatches, zero=%d:", p->nstages,
                   p->nstages == 1 ? "" : "s", p->microbatches, p->zero);
  for (int s = 0; s < p->nstages && k > 0 && (size_t)k < n; s++) {
    const spec_stage *st = &p->stages[s];
    k += snprintf(buf + k, n - (size_t)k, " [L%d-%d %d GPUs@%d tp%d cp%d dp%d%s%s]",
                  st->layer_begin, st->layer_end - 1, st->ngpus, st->gpus[0], st->tp, st->cp,
                  st->dp, st->ep > 1 ? " ep" : "",
                  st->recompute == SPEC_RECOMPUTE_FULL ? " rc" :
                  st->recompute == SPEC_RECOMPUTE_SELECTIVE ? " sel" : "");
  }
}

/* ---- one method's figures as JSON (study__pres_parse reads them back) ----------------- */

static char *pres_json(const study__pres *r) {
  json_t *o = json_pack("{s:b, s:s, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:I, s:f, s:f, s:b,"
                        " s:I, s:s, s:s}",
                        "found", r->found, "why", r->why, "cm_s", r->cm_s, "sim_s", r->sim_s,
                        "sim_cm_s", r->sim_cm_s, "mfu", r->mfu, "tflops", r->tflops, "mem_gib",
                        r->mem_gib, "wall_s",
                        r->wall_s, "space", r->space, "evaluations", (json_int_t)r->evaluations,
                        "bound_s", r->bound_s, "gap", r->gap, "complete", r->complete, "run_id",
                        (json_int_t)r->run_id, "plan", r->plan, "traits", r->traits);
  if (o && r->sim_stopped) json_object_set_new(o, "sim_stopped", json_integer(r->sim_stopped));
  char *s = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17)) : NULL;
  json_decref(o);
  return s;
}

/* ---- running a case ---------------------------------------------------------------------- */

typedef struct prun {
  const study_pillar_opts *o;
  store *st;                /* rank 0 */
  int rank0;
  int done, total;          /* (case, method) pairs */
  int searched;             /* ... searched in this invocation */
  double t0, searched_s;    /* start; seconds spent on the pairs searched */
  const char *current;      /* "llama3-70b on h100-nvl256 x256: global" */
  unsigned long long cm_fp; /* cm_fingerprint(): in every case's key */
} prun;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void progress_line(const prun *x) {
  if (!x->rank0 || !x->o->progress) return;
  double el = now_s() - x->t0;
  char eta[48] = "";
  if (x->searched > 0 && x->done < x->total)
    snprintf(eta, sizeof eta, ", about %.0f s left",
             x->searched_s / x->searched * (x->total - x->done));
  fprintf(stderr, "\r  [%d/%d] %s  %.0f s elapsed%s\033[K", x->done, x->total,
          x->current ? x->current : "", el, eta);
  fflush(stderr);
}

static int sim_count(const study_pillar_opts *o, const study__pcase *k);
static double sim_limit(const study_pillar_opts *o);

/* Everything that changes a (case, method)'s result, and the models that computed it: the cost
 * model's fingerprint and, where it simulates, the simulator's revision (a store written by
 * another version is searched again, not read back). */
static void case_key(const prun *x, const study__pcase *k, study__pm pm, char *buf, size_t n) {
  const study_pillar_opts *o = x->o;
  int sim = sim_count(o, k);
  int w = snprintf(buf, n, "model=%s;fabric=%s;gpus=%d;gbs=%d;method=%s;gap=%.17g;"
                           "time_limit=%.17g;simulate=%d;calibration=%lld;cm=%016llx",
                   k->model_arg, k->fabric, k->gpus, k->gbs, study__pm_name[pm], o->gap,
                   o->time_limit_s, sim,
                   o->calib_cluster && !strcmp(o->calib_cluster, k->fabric) ? o->calib_id : 0LL,
                   x->cm_fp);
  if (sim && w > 0 && (size_t)w < n)
    w += snprintf(buf + w, n - (size_t)w, ";sim=%d", SIM_REVISION);
  if (sim && sim_limit(o) > 0 && w > 0 && (size_t)w < n)
    snprintf(buf + w, n - (size_t)w, ";sim_time_limit=%.17g", sim_limit(o));
}

/* The options' simulation defaults: each rung's best simulated (K = 1), on cases of at most
 * this many GPUs (256; 0: every case), a simulation stopped after 120 s of wall time (0: no
 * limit). SimGrid runs every GPU as an actor: a plan of many microbatches on 1024 GPUs takes
 * a minute or more, and the full grid holds 31 such cases. */
static int sim_k(const study_pillar_opts *o) { return o->simulate >= 0 ? o->simulate : 1; }
static int sim_max(const study_pillar_opts *o) {
  return o->sim_max_gpus < 0 ? 256 : o->sim_max_gpus;
}
static double sim_limit(const study_pillar_opts *o) {
  return o->sim_time_limit_s < 0 ? 120 : o->sim_time_limit_s;
}

/* The plans of each method the simulator re-scores on case k. */
static int sim_count(const study_pillar_opts *o, const study__pcase *k) {
  return sim_max(o) > 0 && k->gpus > sim_max(o) ? 0 : sim_k(o);
}

/* Searches one method on a case through the funnel and fills r (rank 0). */
static int search_pm(prun *x, cm_model *cm, study_sim_cache *cache, search_cache *tl,
                     const spec_model *m,
                     const spec_cluster *c, const study__pcase *k, study__pm pm, study__pres *r,
                     pp_err *err) {
  const struct pm_def *d = &pm_defs[pm];
  int calibrated = x->o->calib_cluster && !strcmp(x->o->calib_cluster, k->fabric);
  study_search_req q = {.cm = cm, .m = m, .c = c, .simulate = sim_count(x->o, k), .db = x->o->db,
                        .cache = cache, .calib_id = calibrated ? x->o->calib_id : 0,
                        .sim_time_limit_s = sim_limit(x->o)};
  search_opts_default(d->method, k->gbs, &q.o);
  if (pm_space(pm, c, &q.o.space, err)) return err->code;
  q.o.top = STUDY__TOP;
  q.o.threads = x->o->threads;
  q.o.time_limit_s = x->o->time_limit_s;
  q.o.gap = x->o->gap;
  q.o.island_domain = d->island_domain;
  q.o.alpa_defaults = d->alpa_defaults;
  q.o.logical_all = q.o.layer_sweep = d->published;
  q.o.cache = tl;
  q.o.comm = x->o->comm && x->o->comm->size > 1 ? x->o->comm : NULL;
  study_search_out out;
  int rc = study_search(&q, &out, err);
  if (rc) {
    study_search_out_clear(&out);
    return rc;
  }
  const search_result *s = &out.r;
  memset(r, 0, sizeof *r);
  r->ran = 1;
  r->found = s->ntop > 0;
  r->wall_s = s->wall_s, r->space = s->space_size, r->evaluations = s->evaluations;
  r->bound_s = s->lower_bound_s, r->gap = s->gap, r->complete = s->complete;
  r->run_id = out.run_id;
  r->sim_stopped = out.sim_stopped;
  if (!r->found) snprintf(r->why, sizeof r->why, "%s", s->why);
  if (r->found) {
    const search_entry *b = &s->top[0], *ch = &s->top[out.chosen];
    r->cm_s = b->cm.iter_time_s, r->mfu = b->cm.mfu, r->mem_gib = b->cm.mem_gib_per_gpu;
    r->tflops = b->cm.model_tflops_per_gpu;
    r->sim_s = ch->simulated ? ch->sim_iter_s : 0, r->sim_cm_s = ch->cm.iter_time_s;
    plan_brief(&b->plan, r->plan, sizeof r->plan);
    if (pm == STUDY__PM_GLOBAL) plan_traits(&b->plan, m, c, r->traits, sizeof r->traits);
  }
  study_search_out_clear(&out);
  return PP_OK;
}

/* Whether global's best plans (its stored top) all lie in rung pm's space, which global's
 * contains (rank 0): they are then the rung's best plans and global's bound bounds the rung,
 * so the rung's search would only repeat global's (what makes a knob worth 0 cost nothing).
 * Rungs of another method than global, and a global without a plan: 0. */
static int global_covers(const prun *x, const study__pcase *k, const spec_cluster *c,
                         study__pm pm, int *covers, pp_err *err) {
  const study__pres *g = &k->res[STUDY__PM_GLOBAL];
  *covers = 0;
  if (pm == STUDY__PM_GLOBAL || pm_defs[pm].method != SEARCH_GLOBAL || !g->ran || !g->found ||
      g->run_id <= 0)
    return PP_OK;
  search_space space;
  search_space_default(k->gbs, &space);
  if (pm_space(pm, c, &space, err)) return err->code;
  int64_t ids[STUDY__TOP];
  double secs[STUDY__TOP];
  char *mj = NULL, *cj = NULL;
  int n = 0,
      rc = store_get_search_top(x->st, g->run_id, STUDY__TOP, ids, secs, &n, &mj, &cj, err);
  free(mj), free(cj);
  int ok = n > 0;
  for (int i = 0; !rc && ok && i < n; i++) {
    spec_plan p;
    if ((rc = store_get_plan(x->st, ids[i], &p, err))) break;
    ok = search_space_plan_ok(&space, c, &p);
    spec_plan_clear(&p);
  }
  *covers = !rc && ok;
  return rc;
}

/* Rank 0 says whether the pair is done (1) and every rank learns it. */
static int share_flag(const prun *x, int *flag, pp_err *err) {
  const search_comm *comm = x->o->comm;
  if (!comm || comm->size < 2) return PP_OK;
  unsigned char b = (unsigned char)*flag;
  void *buf = &b;
  size_t n = 1;
  if (comm->bcast(comm->ctx, &buf, &n, err)) return err->code;
  if (!x->rank0) {
    *flag = n == 1 ? ((unsigned char *)buf)[0] : 1;
    free(buf);
  }
  return PP_OK;
}

/* One case: its specs (a fabric that cannot hold it: the case says why), then every method
 * not stored yet. */
static int run_case(prun *x, study__pcase *k, pp_err *err) {
  spec_model m;
  spec_cluster c;
  pp_err e2 = {0};
  int nm = 0;
  for (int pm = 0; pm < STUDY__PM_N; pm++) nm += pm_in_set((study__pm)pm, k->set, x->o->rungs);
  if (spec_model_load(k->model_arg, &m, &e2) || spec_cluster_load(k->fabric, k->gpus, &c, &e2) ||
      spec_pair_validate(&m, &c, &e2)) {
    snprintf(k->na, sizeof k->na, "%.250s", e2.msg);
    x->done += nm;
    return PP_OK;
  }
  cm_params prm;
  cm_params_default(&m, &prm);
  if (x->o->calib_cluster && !strcmp(x->o->calib_cluster, k->fabric) &&
      cm_params_apply(&prm, x->o->calib_params, err))
    return pp_err_prefix(err, "calibration %lld", x->o->calib_id);
  cm_model *cm = NULL;
  if (cm_model_create(&m, &c, &prm, &cm, err)) return err->code;
  study_sim_cache *cache = study_sim_cache_new(); /* NULL: each plan simulated every time */
  search_cache *tl = search_cache_new(); /* global's two-level part, once per case (NULL:
                                            every time) */
  int rc = PP_OK;
  /* global first: the rungs whose space holds its best plans take its result */
  for (int i = 0; i < STUDY__PM_N && !rc; i++) {
    int pm = i == 0 ? STUDY__PM_GLOBAL : i <= STUDY__PM_GLOBAL ? i - 1 : i;
    if (!pm_in_set((study__pm)pm, k->set, x->o->rungs)) continue;
    study__pres *r = &k->res[pm];
    if (pm_same_as_global(&m, &c, (study__pm)pm)) { /* global's space: not run */
      x->done++;
      continue;
    }
    /* the node rung's search, copied (decided alike on every rank: rank 0 alone reads the
     * store, so only its results say what was read back) */
    study__pm same = pm_domain_is_node(&c, (study__pm)pm);
    if ((int)same != pm && pm_in_set(same, k->set, x->o->rungs)) {
      *r = k->res[same];
      r->copied = 1;
      x->done++;
      continue;
    }
    int covers = 0;
    if (x->rank0 && (rc = global_covers(x, k, &c, (study__pm)pm, &covers, err))) break;
    if ((rc = share_flag(x, &covers, err))) break;
    if (covers) {
      *r = k->res[STUDY__PM_GLOBAL];
      r->copied = 2, r->traits[0] = '\0';
      x->done++;
      continue;
    }
    char key[2048], cur[256];
    case_key(x, k, (study__pm)pm, key, sizeof key);
    snprintf(cur, sizeof cur, "%s on %s x%d: %s", k->model, k->fabric, k->gpus,
             study__pm_name[pm]);
    x->current = cur;
    progress_line(x);
    int done = 0;
    char *json = NULL;
    if (x->rank0) {
      pp_err ge = {0};
      int g = store_get_study_case(x->st, "pillar", key, &json, NULL, &ge);
      if (g && g != PP_NOTFOUND) {
        *err = ge;
        rc = g;
      }
      done = g == PP_OK;
      if (done && (rc = study__pres_parse(json, key, r, err))) done = 0;
      r->ran = r->resumed = done;
      free(json);
    }
    if (rc) break;
    if ((rc = share_flag(x, &done, err))) break;
    if (!done) {
      double t = now_s();
      if ((rc = search_pm(x, cm, cache, tl, &m, &c, k, (study__pm)pm, r, err))) break;
      x->searched++, x->searched_s += now_s() - t;
      if (x->rank0) {
        char *rj = pres_json(r);
        store_study_case sc = {"pillar", key, &m, &c,
                               x->o->calib_cluster && !strcmp(x->o->calib_cluster, k->fabric)
                                   ? x->o->calib_id : 0,
                               rj ? rj : "{}", now_s() - t};
        rc = rj ? store_put_study_case(x->st, &sc, NULL, err)
                : pp_err_set(err, PP_NOMEM, "pillar: out of memory");
        free(rj);
      }
    }
    x->done++;
  }
  study_sim_cache_free(cache);
  search_cache_free(tl);
  cm_model_destroy(cm);
  return rc;
}

int study_pillar(const study_pillar_opts *o, study_pillar_summary *sum, pp_err *err) {
  memset(sum, 0, sizeof *sum);
  study__pcase *cases = NULL;
  int n = 0, rc;
  if (o->perturb == 0)
    return pp_err_set(err, PP_USAGE, "--perturb: 0 draws judge nothing (at least 1)");
  if ((rc = check_names(o->rungs, "rungs", study__pm_name, STUDY__PM_N, "is no rung", err)) ||
      (rc = load_cases(o, &cases, &n, err)) ||
      (rc = check_rung_islands(o, cases, n, err))) {
    free(cases);
    return rc;
  }
  prun x = {.o = o, .rank0 = !o->comm || o->comm->rank == 0, .t0 = now_s(),
            .cm_fp = cm_fingerprint()};
  for (int i = 0; i < n; i++)
    for (int pm = 0; pm < STUDY__PM_N; pm++)
      x.total += pm_in_set((study__pm)pm, cases[i].set, o->rungs);
  /* the output folder first: a study that cannot write its answer fails before its work;
   * under mpirun every rank learns whether rank 0 could start */
  if (x.rank0 && o->out_dir) rc = pp_mkdirs(o->out_dir, err);
  if (x.rank0 && !rc) rc = store_open(o->db, NULL, &x.st, err);
  int started = !rc;
  pp_err e0 = {0};
  if (share_flag(&x, &started, &e0) && !rc) rc = (*err = e0).code;
  if (!rc && !started)
    rc = pp_err_set(err, PP_IO, "pillar: rank 0 could not open the store or the output folder");
  for (int i = 0; i < n && !rc; i++) rc = run_case(&x, &cases[i], err);
  if (x.rank0 && o->progress) fputs("\r\033[K", stderr);
  sum->cases = n;
  for (int i = 0; i < n; i++) {
    int resumed = 1, any = 0;
    for (int pm = 0; pm < STUDY__PM_N; pm++)
      if (cases[i].res[pm].ran) any = 1, resumed &= cases[i].res[pm].resumed;
    sum->cases_na += cases[i].na[0] != 0;
    sum->cases_resumed += any && resumed;
  }
  sum->searches = x.searched;
  sum->wall_s = now_s() - x.t0;
  int draws = o->perturb < 0 ? 32 : o->perturb;
#ifdef PODPLAN_GSL
  if (!rc && x.rank0)
    rc = study__pillar_robust(cases, n, x.st, draws, o->calib_cluster, o->calib_params,
                              o->calib_sigmas, err);
#else
  draws = 0; /* no GSL: no generator for the draws */
#endif
  if (!rc && x.rank0) {
    study__pillar_run run = {cases, n, sum->wall_s, o->quick, o->db, o->gap,
                             sim_k(o), sim_max(o), sim_limit(o), draws,
                             o->calib_cluster && o->calib_sigmas && o->calib_sigmas[0]};
    rc = study__pillar_write(&run, o->out_dir, o->out ? o->out : stdout, &sum->plots, err);
    sum->draws = draws;
    for (int i = 0; i < n; i++)
      for (int v = 0; v < STUDY__NVERDICT; v++) {
        double frac;
        int s = study__verdict(&cases[i], v, &frac);
        sum->verdicts += s >= 0;
        sum->robust += s == 0 || s == 1;
      }
    for (int i = 0; i < n; i++) {
      const study__pcase *k = &cases[i];
      if (k->na[0] || !strcmp(k->set, "ablation") || study__pillar_gap(k, STUDY__PM_GLOBAL) < 0)
        continue;
      sum->compared++;
      static const study__pm v[STUDY_PILLAR_NV] = {STUDY__PM_TWO_LEVEL, STUDY__PM_TWO_LEVEL_OPEN,
                                                   STUDY__PM_SPACE_NODE, STUDY__PM_SPACE_DOMAIN};
      for (int j = 0; j < STUDY_PILLAR_NV; j++) {
        sum->ran[j] += k->res[v[j]].ran;
        double g = study__pillar_gap(k, v[j]);
        if (g < 0) {
          sum->no_plan[j] += k->res[v[j]].ran && !k->res[v[j]].found;
          continue;
        }
        double vs = k->res[v[j]].cm_s / k->res[STUDY__PM_GLOBAL].cm_s - 1;
        sum->within_1pct[j] += vs <= 0.01;
        sum->certified_1pct[j] += g <= 0.01;
        if (vs > sum->max_gap[j]) {
          sum->max_gap[j] = vs;
          char lab[160];
          study__case_label(cases, n, k, lab, sizeof lab);
          snprintf(sum->max_gap_case[j], sizeof sum->max_gap_case[j], "%.100s on %.50s", lab,
                   k->fabric);
        }
      }
    }
  }
  store_close(x.st);
  free(cases);
  return rc;
}
