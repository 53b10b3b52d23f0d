/* Capacity planning (study.h): for each fabric (cluster preset) and GPU count (powers of two
 * from one node up, and whole NVLink domains times powers of two), the best plan of a global
 * search through the funnel (study_search: stored, its best simulated up to sim_max_gpus), the
 * time to train the tokens, GPU-hours, cost and MFU; the smallest cluster per fabric that meets
 * the deadline. Every point is a study case ("capacity"), so that a rerun searches nothing it
 * has done. A size below the memory lower bound (weights, gradients and Adam state sharded
 * over every GPU) is not searched. Writes the table, capacity.csv, capacity.md and the
 * scaling plots. Depends on search.h, store.h, spec.h, cm.h. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "podplan/fs.h"
#include "podplan/search.h"
#include "podplan/sim.h"
#include "podplan/store.h"
#include "podplan/study.h"
#include "study_int.h"

#define CAP_GPUS_MAX 8192   /* gpus_max when 0 */
#define CAP_SIM_MAX 1024    /* sim_max_gpus when 0 */
#define CAP_GBS_TOKENS (4.0 * 1024 * 1024) /* the default global batch: 4 Mi tokens */
#define CAP_MAX_SIZES 64

/* What became of a point, and a point: study__cap_status, study__cap_point (study_int.h;
 * study_stored.c reads one back). */
static const char *const cap_status_name[] = {"ok", "cannot-fit", "no-plan"};
static const char *const cap_status_text[] = {"", "cannot fit", "no plan fits"};

typedef struct cap_fabric {
  char name[SPEC_NAME_MAX], gpu[SPEC_NAME_MAX];
  int node, domain;      /* GPUs per node; of one NVLink domain */
  double price;          /* USD per GPU-hour; < 0: none */
  int min_gpus;          /* memory lower bound (GPUs); 0 when the model fits nowhere */
  char min_why[256];     /* how the bound is made */
  int first, npoints;    /* its points: pt[first .. first + npoints - 1], by GPUs */
  char skipped[256];     /* sizes the fabric cannot have ("8192, 4096") */
  char skip_why[320];    /* ... the first one's reason */
  int pick;              /* the smallest point that meets the deadline; -1: none */
} cap_fabric;

typedef struct crun {
  const study_capacity_opts *o;
  const char *db;
  spec_model m;
  char model_hash[SPEC_HASH_LEN];
  int gbs, gpus_max, sim_max;
  double tokens_per_iter;
  store *st;
  cap_fabric *fab;
  int nfab;
  study__cap_point *pt;
  int npt;
  int nosim;             /* the simulator is not built in: cost model everywhere */
  /* progress */
  int done, total, searched; /* points to search or read back (not the memory-bound ones) */
  double t0, searched_s, last_print;
  char current[160];
  unsigned long long cm_fp; /* cm_fingerprint(): in every point's key */
} crun;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- options ----------------------------------------------------------------------------- */

int study_capacity_parse_deadline(const char *s, double *out, pp_err *err) {
  static const struct {
    const char *suffix;
    double seconds;
  } units[] = {{"", 86400}, {"d", 86400}, {"h", 3600}};
  char *end;
  errno = 0;
  double v = s ? strtod(s, &end) : NAN;
  if (s && !errno && end != s && isfinite(v) && v > 0)
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
      if (!strcmp(end, units[i].suffix)) {
        *out = v * units[i].seconds;
        return PP_OK;
      }
  return pp_err_set(err, PP_USAGE, "--deadline: '%s' is not a duration (30, 30d or 720h)",
                    s ? s : "");
}

/* The global batch nearest 4 Mi tokens, in sequences: a multiple of 8, at least 8. */
static int default_gbs(const spec_model *m) {
  double seqs = CAP_GBS_TOKENS / (m->seq_len > 0 ? m->seq_len : 1);
  int g = 8 * (int)floor(seqs / 8 + 0.5);
  return g < 8 ? 8 : g;
}

static int check_opts(const study_capacity_opts *o, pp_err *err) {
  if (!o->model || !*o->model) return pp_err_set(err, PP_USAGE, "capacity: --model is required");
  if (!(o->tokens > 0) || !isfinite(o->tokens))
    return pp_err_set(err, PP_USAGE, "--tokens: %g is not a positive number of tokens", o->tokens);
  if (o->deadline_s < 0 || !isfinite(o->deadline_s))
    return pp_err_set(err, PP_USAGE, "--deadline: %g s is not a duration", o->deadline_s);
  if (o->gpus_max < 0 || o->gbs < 0)
    return pp_err_set(err, PP_USAGE, "capacity: %s %d must be positive",
                      o->gbs < 0 ? "--gbs" : "--gpus-max", o->gbs < 0 ? o->gbs : o->gpus_max);
  if (o->gap < 0 || o->time_limit_s < 0)
    return pp_err_set(err, PP_USAGE, "capacity: --gap and --time-limit must be >= 0");
  return PP_OK;
}

/* The known GPU fabrics ("dgx-a100, dgx-h100, ...") for messages. */
static void known_fabrics(char *buf, size_t n) {
  size_t k = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < spec_cluster_preset_count() && k + 2 < n; i++) {
    const spec_cluster *c = spec_cluster_preset(i);
    k += (size_t)snprintf(buf + k, n - k, "%s%s%s", k ? ", " : "", c->name,
                          c->gpu.cpu ? " (CPU)" : "");
  }
}

static int add_fabric(crun *x, const spec_cluster *c) {
  for (int i = 0; i < x->nfab; i++)
    if (!strcmp(x->fab[i].name, c->name)) return 0; /* named twice: once */
  cap_fabric *f = &x->fab[x->nfab++];
  memset(f, 0, sizeof *f);
  snprintf(f->name, sizeof f->name, "%s", c->name);
  snprintf(f->gpu, sizeof f->gpu, "%s", c->gpu.name);
  f->node = c->gpus_per_node > 0 ? c->gpus_per_node : 1;
  f->domain = spec_cluster_domain_hw(c);
  f->price = -1;
  f->pick = -1;
  return 1;
}

/* --clusters (each a cluster preset, named when not) or every preset whose GPU is a GPU. */
static int load_fabrics(crun *x, pp_err *err) {
  size_t np = spec_cluster_preset_count();
  if (!(x->fab = calloc(np + 1, sizeof *x->fab)))
    return pp_err_set(err, PP_NOMEM, "capacity: out of memory");
  const char *list = x->o->clusters;
  if (!list) {
    for (size_t i = 0; i < np; i++)
      if (!spec_cluster_preset(i)->gpu.cpu) add_fabric(x, spec_cluster_preset(i));
    return PP_OK;
  }
  char known[1024];
  known_fabrics(known, sizeof known);
  for (const char *p = list;;) {
    size_t l = strcspn(p, ",");
    const spec_cluster *hit = NULL;
    for (size_t i = 0; i < np && !hit && l; i++)
      if (strlen(spec_cluster_preset(i)->name) == l && !strncmp(spec_cluster_preset(i)->name, p, l))
        hit = spec_cluster_preset(i);
    if (!l) return pp_err_set(err, PP_USAGE, "--clusters: an empty name in '%s'", list);
    if (!hit)
      return pp_err_set(err, PP_USAGE, "--clusters: '%.*s' is not a cluster preset (%s)", (int)l,
                        p, known);
    add_fabric(x, hit);
    if (!p[l]) break;
    p += l + 1;
  }
  return PP_OK;
}

static int parse_price(const char *v, size_t l, const char *entry, size_t el, double *out,
                       pp_err *err) {
  char num[64];
  snprintf(num, sizeof num, "%.*s", (int)(l < sizeof num ? l : sizeof num - 1), v);
  char *end;
  errno = 0;
  double p = strtod(num, &end);
  if (!l || errno || end == num || *end || !isfinite(p) || p < 0)
    return pp_err_set(err, PP_USAGE,
                      "--price-per-gpu-hour: '%.*s' is not a price (USD per GPU-hour, >= 0)",
                      (int)el, entry);
  *out = p;
  return PP_OK;
}

/* "2.5" for every fabric, or "name=price,..." for the fabrics named (each one considered). */
static int parse_prices(crun *x, pp_err *err) {
  const char *list = x->o->prices;
  if (!list) return PP_OK;
  if (!strchr(list, '=')) {
    double p;
    if (parse_price(list, strlen(list), list, strlen(list), &p, err)) return err->code;
    for (int i = 0; i < x->nfab; i++) x->fab[i].price = p;
    return PP_OK;
  }
  for (const char *e = list;;) {
    size_t el = strcspn(e, ","), nl = strcspn(e, "=");
    if (nl >= el)
      return pp_err_set(err, PP_USAGE, "--price-per-gpu-hour: '%.*s' is not fabric=price",
                        (int)el, e);
    int f = -1;
    for (int i = 0; i < x->nfab && f < 0; i++)
      if (strlen(x->fab[i].name) == nl && !strncmp(x->fab[i].name, e, nl)) f = i;
    if (f < 0)
      return pp_err_set(err, PP_USAGE,
                        "--price-per-gpu-hour: '%.*s' names no fabric of the study", (int)el, e);
    if (parse_price(e + nl + 1, el - nl - 1, e, el, &x->fab[f].price, err)) return err->code;
    if (!e[el]) break;
    e += el + 1;
  }
  return PP_OK;
}

/* ---- the points ------------------------------------------------------------------------- */

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* Powers of two from one node up, and whole NVLink domains times powers of two (72, 144, ...
 * on a 72-GPU domain), up to max; sorted, each once. */
static int fabric_sizes(const cap_fabric *f, int max, int *out) {
  int n = 0;
  long p = 1;
  while (p < f->node) p *= 2;
  for (; p <= max && n < CAP_MAX_SIZES; p *= 2) out[n++] = (int)p;
  if (f->domain > 1 && (f->domain & (f->domain - 1)))
    for (long d = f->domain; d <= max && n < CAP_MAX_SIZES; d *= 2) out[n++] = (int)d;
  qsort(out, (size_t)n, sizeof *out, cmp_int);
  int k = 0;
  for (int i = 0; i < n; i++)
    if (!k || out[k - 1] != out[i]) out[k++] = out[i];
  return k;
}

/* The parameters of a fabric's cost model: the defaults, and the calibration on its fabric. */
static int fabric_params(const crun *x, const cap_fabric *f, cm_params *prm, int64_t *calib,
                         pp_err *err) {
  cm_params_default(&x->m, prm);
  *calib = 0;
  const study_capacity_opts *o = x->o;
  if (!o->calib_cluster || strcmp(o->calib_cluster, f->name)) return PP_OK;
  if (cm_params_apply(prm, o->calib_params, err))
    return pp_err_prefix(err, "calibration %lld", o->calib_id);
  *calib = o->calib_id;
  return PP_OK;
}

/* No plan fits on fewer GPUs than this: with everything sharded (ZeRO-3 over every GPU) each
 * GPU still holds its share of the bf16 weights (2 B per parameter), the gradients
 * (grad_bytes) and Adam's fp32 master weights and moments (12 B), besides the framework's
 * fixed overhead; activations only add to it. */
static void memory_bound(const crun *x, cap_fabric *f, const spec_cluster *c,
                         const cm_params *prm) {
  double bpp = 2.0 + prm->grad_bytes + 12.0, params = spec_model_params(&x->m);
  double need_gib = params * bpp / (1024.0 * 1024 * 1024);
  double usable = c->gpu.hbm_gib - prm->mem_overhead_gib;
  if (usable <= 0) {
    f->min_gpus = 0;
    snprintf(f->min_why, sizeof f->min_why, "%s has %.0f GiB, no more than the %.1f GiB of "
             "framework overhead", c->gpu.name, c->gpu.hbm_gib, prm->mem_overhead_gib);
    return;
  }
  double n = ceil(need_gib / usable);
  f->min_gpus = n > SPEC_MAX_GPUS ? SPEC_MAX_GPUS : (int)n;
  snprintf(f->min_why, sizeof f->min_why,
           "%.0f GiB of weights, gradients and Adam state (%.0f B/parameter, all sharded) over "
           "%.1f GiB per %s", need_gib, bpp, usable, c->gpu.name);
}

/* The points of one fabric: every size it can have (the others named once), each below the
 * memory bound marked as such. */
static int fabric_points(crun *x, int fi, pp_err *err) {
  cap_fabric *f = &x->fab[fi];
  int sizes[CAP_MAX_SIZES], n = fabric_sizes(f, x->gpus_max, sizes), bounded = 0;
  f->first = x->npt;
  for (int i = 0; i < n; i++) {
    spec_cluster c;
    pp_err e = {0};
    if (spec_cluster_load(f->name, sizes[i], &c, &e) || spec_pair_validate(&x->m, &c, &e)) {
      size_t k = strlen(f->skipped);
      snprintf(f->skipped + k, sizeof f->skipped - k, "%s%d", k ? ", " : "", sizes[i]);
      if (!f->skip_why[0]) snprintf(f->skip_why, sizeof f->skip_why, "%.300s", e.msg);
      continue;
    }
    if (!bounded) {
      cm_params prm;
      int64_t calib;
      if (fabric_params(x, f, &prm, &calib, err)) return err->code;
      memory_bound(x, f, &c, &prm);
      bounded = 1;
    }
    study__cap_point *p = &x->pt[x->npt++];
    memset(p, 0, sizeof *p);
    p->fabric = fi, p->gpus = sizes[i];
    if (!f->min_gpus || p->gpus < f->min_gpus) {
      p->status = STUDY__CAP_MEMORY;
      if (f->min_gpus)
        snprintf(p->why, sizeof p->why, "needs at least %d GPUs (memory lower bound)",
                 f->min_gpus);
      else
        snprintf(p->why, sizeof p->why, "%s", f->min_why);
    }
  }
  f->npoints = x->npt - f->first;
  return PP_OK;
}

/* ---- a point's figures as JSON (study__point_parse reads them back) ----------------------- */

static char *point_json(const study__cap_point *p) {
  json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:f, s:f, s:b, s:f, s:f, s:f, s:f, s:b, s:I, s:f}",
                        "status", cap_status_name[p->status], "why", p->why, "plan", p->plan,
                        "brief", p->brief, "cm_s", p->cm_s, "sim_s", p->sim_s, "simulated",
                        p->simulated, "mfu", p->mfu, "mem_gib", p->mem_gib, "bound_s",
                        p->bound_s, "gap", p->gap, "complete", p->complete, "run_id",
                        (json_int_t)p->run_id, "wall_s", p->wall_s);
  char *s = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17)) : NULL;
  json_decref(o);
  return s;
}

/* A plan in full: the uniform string, or its stages. */
static void plan_full(const spec_plan *p, char *buf, size_t n) {
  if (!p->nstages && !spec_plan_format(p, buf, n, NULL)) return;
  int k = snprintf(buf, n, "%d stages, %d microbatches, zero=%d:", p->nstages, p->microbatches,
                   p->zero);
  for (int s = 0; s < p->nstages && k > 0 && (size_t)k < n; s++) {
    const spec_stage *st = &p->stages[s];
    k += snprintf(buf + k, n - (size_t)k, " [L%d-%d %d GPUs tp%d cp%d dp%d%s%s]",
                  st->layer_begin, st->layer_end - 1, st->ngpus, st->tp, st->cp, st->dp,
                  st->ep > 1 ? " ep" : "",
                  st->recompute == SPEC_RECOMPUTE_FULL        ? " rc"
                  : st->recompute == SPEC_RECOMPUTE_SELECTIVE ? " sel"
                                                              : "");
  }
}

static const char *const rc_brief[] = {"", " sel", " full"};

/* A plan in a table cell: "tp8 pp16 dp8 mbs1 v3 sel z1", or "12 stages tp8 dp4-8 mb192 z1". */
static void plan_brief(const spec_plan *p, char *buf, size_t n) {
  char t[24], d[24];
  if (!p->nstages) {
    char v[16] = "";
    t[0] = d[0] = '\0';
    if (p->cp > 1) snprintf(t, sizeof t, " cp%d", p->cp);
    if (p->ep > 1) snprintf(d, sizeof d, " ep%d", p->ep);
    if (p->vpp > 1) snprintf(v, sizeof v, " v%d", p->vpp);
    snprintf(buf, n, "tp%d pp%d dp%d%s%s mbs%d%s%s z%d", p->tp, p->pp, p->dp, t, d, p->mbs, v,
             rc_brief[p->recompute], p->zero);
    return;
  }
  int tlo = 1 << 30, thi = 0, dlo = 1 << 30, dhi = 0, cp = 1;
  unsigned rc = 0; /* bit per recompute kind used */
  for (int s = 0; s < p->nstages; s++) {
    const spec_stage *st = &p->stages[s];
    if (st->tp < tlo) tlo = st->tp;
    if (st->tp > thi) thi = st->tp;
    if (st->dp < dlo) dlo = st->dp;
    if (st->dp > dhi) dhi = st->dp;
    if (st->cp > cp) cp = st->cp;
    rc |= 1u << st->recompute;
  }
  if (tlo == thi) snprintf(t, sizeof t, "%d", tlo); else snprintf(t, sizeof t, "%d-%d", tlo, thi);
  if (dlo == dhi) snprintf(d, sizeof d, "%d", dlo); else snprintf(d, sizeof d, "%d-%d", dlo, dhi);
  char c[16] = "";
  if (cp > 1) snprintf(c, sizeof c, " cp%d", cp);
  snprintf(buf, n, "%d stage%s tp%s%s dp%s mb%d%s%s z%d", p->nstages, p->nstages > 1 ? "s" : "",
           t, c, d, p->microbatches, rc & (1u << SPEC_RECOMPUTE_SELECTIVE) ? " sel" : "",
           rc & (1u << SPEC_RECOMPUTE_FULL) ? " full" : "", p->zero);
}

/* ---- searching a point -------------------------------------------------------------------- */

static void progress_line(crun *x, const char *extra) {
  if (!x->o->progress) return;
  double t = now_s();
  char eta[48] = "";
  if (x->searched > 0 && x->done < x->total)
    snprintf(eta, sizeof eta, ", about %.0f s left",
             x->searched_s / x->searched * (x->total - x->done));
  fprintf(stderr, "\r  [%d/%d] %s%s  %.0f s elapsed%s\033[K", x->done, x->total, x->current,
          extra ? extra : "", t - x->t0, eta);
  fflush(stderr);
  x->last_print = t;
}

static void on_search_progress(const search_progress *p, void *ctx) {
  crun *x = ctx;
  if (now_s() - x->last_print < 0.5) return;
  char extra[96];
  if (p->gap > 0)
    snprintf(extra, sizeof extra, " (global: %d/%d units, gap %.2f%%)", p->units_done, p->units,
             100 * p->gap);
  else
    snprintf(extra, sizeof extra, " (global: %d/%d units)", p->units_done, p->units);
  progress_line(x, extra);
}

/* Everything that changes a point's result: the model and the cluster (names and hashes of
 * their canonical JSON), the batch, the search's gap and time limit, the calibration, and
 * whether the point is simulated (sim_max_gpus decides only that); and the models that
 * computed it: the cost model's fingerprint and, simulated, the simulator's revision. */
static void point_key(const crun *x, const cap_fabric *f, const spec_cluster *c, int64_t calib,
                      int sim, char *buf, size_t n) {
  char *cj = spec_cluster_json(c), ch[SPEC_HASH_LEN];
  spec_hash(cj ? cj : "", ch);
  free(cj);
  int k = snprintf(buf, n, "model=%s;model_hash=%s;fabric=%s;cluster_hash=%s;gpus=%d;gbs=%d;"
                           "gap=%.17g;time_limit=%.17g;calibration=%lld;simulate=%d;cm=%016llx",
                   x->m.name, x->model_hash, f->name, ch, c->gpus, x->gbs, x->o->gap,
                   x->o->time_limit_s, (long long)calib, sim, x->cm_fp);
  if (sim && k > 0 && (size_t)k < n)
    k += snprintf(buf + k, n - (size_t)k, ";sim=%d", SIM_REVISION);
  if (sim && x->o->sim_time_limit_s > 0 && k > 0 && (size_t)k < n)
    snprintf(buf + k, n - (size_t)k, ";sim_time_limit=%.17g", x->o->sim_time_limit_s);
}

/* Global search through the funnel, the best plan simulated when sim; fills p. */
static int search_point(crun *x, cm_model *cm, const spec_cluster *c, int64_t calib, int sim,
                        study__cap_point *p, pp_err *err) {
  study_search_req q = {.cm = cm, .m = &x->m, .c = c, .simulate = sim, .calib_id = calib,
                        .sim_time_limit_s = x->o->sim_time_limit_s,
                        .db = x->db, .progress = x->o->progress ? on_search_progress : NULL,
                        .ctx = x};
  search_opts_default(SEARCH_GLOBAL, x->gbs, &q.o);
  q.o.threads = x->o->threads;
  q.o.time_limit_s = x->o->time_limit_s;
  q.o.gap = x->o->gap;
  study_search_out out;
  int rc = study_search(&q, &out, err);
  if (rc) {
    study_search_out_clear(&out);
    return rc;
  }
  const search_result *r = &out.r;
  p->run_id = out.run_id, p->bound_s = r->lower_bound_s, p->gap = r->gap;
  p->complete = r->complete;
  if (!r->ntop) {
    p->status = STUDY__CAP_NOPLAN;
    snprintf(p->why, sizeof p->why, "%.310s", r->why);
  } else {
    const search_entry *b = &r->top[out.chosen];
    p->status = STUDY__CAP_OK;
    p->cm_s = b->cm.iter_time_s, p->mfu = b->cm.mfu, p->mem_gib = b->cm.mem_gib_per_gpu;
    if (b->simulated) {
      cm_result at = b->cm;
      cm_throughput(cm, &b->plan, b->sim_iter_s, &at);
      p->simulated = 1, p->sim_s = b->sim_iter_s, p->mfu = at.mfu;
    }
    plan_full(&b->plan, p->plan, sizeof p->plan);
    plan_brief(&b->plan, p->brief, sizeof p->brief);
  }
  study_search_out_clear(&out);
  return PP_OK;
}

/* One point: read back from the store, or searched (and stored as a study case). */
static int run_point(crun *x, study__cap_point *p, pp_err *err) {
  const cap_fabric *f = &x->fab[p->fabric];
  if (p->status == STUDY__CAP_MEMORY) return PP_OK; /* not searched */
  snprintf(x->current, sizeof x->current, "%s x%d", f->name, p->gpus);
  progress_line(x, NULL);
  spec_cluster c;
  cm_params prm;
  int64_t calib;
  if (spec_cluster_load(f->name, p->gpus, &c, err) || fabric_params(x, f, &prm, &calib, err))
    return err->code;
  int sim = !x->nosim && p->gpus <= x->sim_max, rc;
  char key[1024], *json = NULL;
  point_key(x, f, &c, calib, sim, key, sizeof key);
  pp_err ge = {0};
  int g = store_get_study_case(x->st, "capacity", key, &json, NULL, &ge);
  if (g == PP_OK) {
    rc = study__point_parse(json, key, p, err);
    free(json);
    p->resumed = 1;
    x->done++;
    return rc;
  }
  if (g != PP_NOTFOUND) {
    *err = ge;
    return g;
  }
  double t = now_s();
  cm_model *cm = NULL;
  if (cm_model_create(&x->m, &c, &prm, &cm, err)) return err->code;
  rc = search_point(x, cm, &c, calib, sim, p, err);
  cm_model_destroy(cm);
  if (rc) return rc;
  p->wall_s = now_s() - t;
  x->searched++, x->searched_s += p->wall_s;
  char *rj = point_json(p);
  store_study_case sc = {"capacity", key, &x->m, &c, calib, rj ? rj : "{}", p->wall_s};
  rc = rj ? store_put_study_case(x->st, &sc, NULL, err)
          : pp_err_set(err, PP_NOMEM, "capacity: out of memory");
  free(rj);
  x->done++;
  return rc;
}

/* Time to train, GPU-hours, cost, the deadline; per fabric the smallest point meeting it. */
static void derive(crun *x) {
  double dl = x->o->deadline_s;
  for (int i = 0; i < x->npt; i++) {
    study__cap_point *p = &x->pt[i];
    cap_fabric *f = &x->fab[p->fabric];
    if (p->status != STUDY__CAP_OK) continue;
    p->iter_s = p->simulated ? p->sim_s : p->cm_s;
    double secs = x->o->tokens / x->tokens_per_iter * p->iter_s;
    p->days = secs / 86400;
    p->gpu_hours = secs / 3600 * p->gpus;
    p->cost = f->price >= 0 ? p->gpu_hours * f->price : -1;
    p->meets = dl > 0 && secs <= dl;
    if (p->meets && f->pick < 0) f->pick = i; /* points run by GPUs, smallest first */
  }
}

/* ---- the table and the answer ------------------------------------------------------------ */

/* 1234567 -> "1.23M", 45600 -> "45.6k", 12.3 -> "12.3". */
static const char *fmt_si(double v, char *buf, size_t n) {
  static const struct {
    double at;
    const char *suffix;
  } si[] = {{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}, {0, ""}};
  size_t i = 0;
  while (si[i].at > 0 && fabs(v) < si[i].at) i++;
  double s = si[i].at > 0 ? v / si[i].at : v;
  snprintf(buf, n, fabs(s) >= 100 ? "%.0f%s" : fabs(s) >= 10 ? "%.1f%s" : "%.2f%s", s,
           si[i].suffix);
  return buf;
}

/* 300e9 -> "300 B", 1.5e12 -> "1.5 T" (tokens, parameters). */
static const char *fmt_count(double v, char *buf, size_t n) {
  static const struct {
    double at;
    const char *suffix;
  } u[] = {{1e12, " T"}, {1e9, " B"}, {1e6, " M"}, {1e3, " k"}, {0, ""}};
  size_t i = 0;
  while (u[i].at > 0 && v < u[i].at) i++;
  snprintf(buf, n, "%.4g%s", u[i].at > 0 ? v / u[i].at : v, u[i].suffix);
  return buf;
}

static const char *fmt_days(double d, char *buf, size_t n) {
  snprintf(buf, n, d >= 100 ? "%.0f" : d >= 10 ? "%.1f" : d >= 1 ? "%.2f" : "%.3g", d);
  return buf;
}

static const char *fmt_cost(double c, char *buf, size_t n) {
  char s[24]; /* "%.4g" and a suffix: at most 15 */
  if (c < 0) {
    snprintf(buf, n, "-");
    return buf;
  }
  snprintf(buf, n, "$%s", fmt_si(c, s, sizeof s));
  return buf;
}

/* "30 days", "1 day", "12 hours". */
static const char *deadline_text(double secs, char *buf, size_t n) {
  if (secs >= 86400)
    snprintf(buf, n, "%g day%s", secs / 86400, secs == 86400 ? "" : "s");
  else
    snprintf(buf, n, "%g hour%s", secs / 3600, secs == 3600 ? "" : "s");
  return buf;
}

/* Where the times come from. */
static const char *sim_text(const crun *x, char *buf, size_t n) {
  if (x->nosim || !x->sim_max)
    snprintf(buf, n, "the cost model's times (%s)",
             x->nosim ? "built without the simulator" : "simulation off");
  else
    snprintf(buf, n, "its best plan simulated up to %d GPUs, the cost model's time above",
             x->sim_max);
  return buf;
}

static void print_header(const crun *x, FILE *f) {
  char tok[32], tpi[32];
  fprintf(f, "%s (%.1f B parameters): %s tokens, global batch %d sequences of %d (%s tokens per "
             "iteration)", x->m.name, spec_model_params(&x->m) / 1e9,
          fmt_count(x->o->tokens, tok, sizeof tok), x->gbs, x->m.seq_len,
          fmt_count(x->tokens_per_iter, tpi, sizeof tpi));
  char dl[48];
  if (x->o->deadline_s > 0)
    fprintf(f, ", deadline %s", deadline_text(x->o->deadline_s, dl, sizeof dl));
  char sim[96];
  fprintf(f, "\nglobal search (gap %g) per fabric and size; %s\n\n", x->o->gap,
          sim_text(x, sim, sizeof sim));
}

/* One line per point: the figures, or why no plan fits. */
static void print_table(const crun *x, FILE *f) {
  print_header(x, f);
  int priced = x->o->prices != NULL;
  fprintf(f, "%-13s %5s  %-32s %9s %-10s %8s %8s %8s %5s %s\n", "fabric", "GPUs", "plan",
          "iter (s)", "time from", "days", "GPU-h", priced ? "cost" : "", "MFU",
          x->o->deadline_s > 0 ? "meets" : "");
  for (int i = 0; i < x->npt; i++) {
    const study__cap_point *p = &x->pt[i];
    const char *fab = x->fab[p->fabric].name;
    if (p->status != STUDY__CAP_OK) {
      fprintf(f, "%-13s %5d  %s: %.200s\n", fab, p->gpus, cap_status_text[p->status], p->why);
      continue;
    }
    char d[32], gh[32], c[32];
    fprintf(f, "%-13s %5d  %-32s %9.3f %-10s %8s %8s %8s %4.1f%% %s\n", fab, p->gpus, p->brief,
            p->iter_s, p->simulated ? "simulated" : "cost model", fmt_days(p->days, d, sizeof d),
            fmt_si(p->gpu_hours, gh, sizeof gh), priced ? fmt_cost(p->cost, c, sizeof c) : "",
            100 * p->mfu, x->o->deadline_s > 0 ? (p->meets ? "yes" : "no") : "");
  }
}

/* What a fabric that fits nowhere says: the largest size tried and why. */
static int fabric_na(const crun *x, const cap_fabric *f, char *buf, size_t n) {
  for (int i = 0; i < f->npoints; i++)
    if (x->pt[f->first + i].status == STUDY__CAP_OK) return 0;
  if (f->npoints) {
    const study__cap_point *p = &x->pt[f->first + f->npoints - 1];
    snprintf(buf, n, "%s cannot fit the model on up to %d GPUs: at %d GPUs (the largest size "
             "tried) %s: %s", f->name, x->gpus_max, p->gpus, cap_status_text[p->status], p->why);
  } else if (f->skipped[0]) {
    snprintf(buf, n, "%s cannot hold the model at any size up to %d GPUs: %s", f->name,
             x->gpus_max, f->skip_why);
  } else {
    snprintf(buf, n, "%s: no size to try: --gpus-max %d is less than one node (%d GPUs)",
             f->name, x->gpus_max, f->node);
  }
  return 1;
}

/* Fabrics that fit nowhere and sizes a fabric cannot have, one line each (md: list items);
 * f NULL: only counts them. */
static int print_notes(const crun *x, FILE *f, int md) {
  int n = 0;
  for (int i = 0; i < x->nfab; i++) {
    const cap_fabric *b = &x->fab[i];
    char na[768];
    if (fabric_na(x, b, na, sizeof na) && ++n && f) fprintf(f, "%s%s\n", md ? "- " : "", na);
    int mem = 0;
    for (int j = 0; j < b->npoints; j++) mem += x->pt[b->first + j].status == STUDY__CAP_MEMORY;
    if (mem && ++n && f)
      fprintf(f, "%s%s: memory lower bound %d GPUs: %s; the %d smaller size%s not searched\n",
              md ? "- " : "", b->name, b->min_gpus, b->min_why, mem, mem > 1 ? "s were" : " was");
    if (b->skipped[0] && b->npoints && ++n && f)
      fprintf(f, "%s%s: sizes skipped, the fabric cannot have them: %s (%s)\n", md ? "- " : "",
              b->name, b->skipped, b->skip_why);
  }
  return n;
}

/* The fabrics meeting the deadline in order of GPU-hours, or of cost where priced (the
 * unpriced after); returns how many. */
static int ranked_picks(const crun *x, int *order) {
  int n = 0;
  for (int i = 0; i < x->nfab; i++)
    if (x->fab[i].pick >= 0) order[n++] = i;
  for (int i = 1; i < n; i++) /* insertion sort: a handful of fabrics */
    for (int j = i; j > 0; j--) {
      const study__cap_point *a = &x->pt[x->fab[order[j - 1]].pick],
                             *b = &x->pt[x->fab[order[j]].pick];
      int swap = (a->cost < 0) != (b->cost < 0) ? a->cost < 0
                 : a->cost >= 0                 ? a->cost > b->cost
                                                : a->gpu_hours > b->gpu_hours;
      if (!swap) break;
      int t = order[j];
      order[j] = order[j - 1], order[j - 1] = t;
    }
  return n;
}

/* The fastest point of all (or of one fabric: fab >= 0); -1 when none fits. */
static int fastest(const crun *x, int fab) {
  int best = -1;
  for (int i = 0; i < x->npt; i++)
    if (x->pt[i].status == STUDY__CAP_OK && (fab < 0 || x->pt[i].fabric == fab) &&
        (best < 0 || x->pt[i].days < x->pt[best].days))
      best = i;
  return best;
}

/* The answer to the deadline: the smallest cluster per fabric that meets it, best first; or
 * the sentence that none does, naming the fastest point. */
static void print_answer(const crun *x, FILE *f, int md) {
  if (!(x->o->deadline_s > 0)) return;
  char dl[48], d[32], gh[32], c[32];
  deadline_text(x->o->deadline_s, dl, sizeof dl);
  int order[64], n = ranked_picks(x, order), fst = fastest(x, -1);
  if (!n) {
    if (fst < 0)
      fprintf(f, "No cluster meets the deadline of %s: no fabric fits the model up to %d "
                 "GPUs.\n", dl, x->gpus_max);
    else
      fprintf(f, "No cluster meets the deadline of %s: the fastest point found is %s with "
                 "%d GPUs, %s days.\n", dl, x->fab[x->pt[fst].fabric].name, x->pt[fst].gpus,
              fmt_days(x->pt[fst].days, d, sizeof d));
    return;
  }
  fprintf(f, "The smallest cluster per fabric that trains in %s, by %s:\n", dl,
          x->o->prices ? "cost" : "GPU-hours");
  for (int k = 0; k < n; k++) {
    const cap_fabric *b = &x->fab[order[k]];
    const study__cap_point *p = &x->pt[b->pick];
    c[0] = '\0';
    if (p->cost >= 0) {
      strcpy(c, ", ");
      fmt_cost(p->cost, c + 2, sizeof c - 2);
    }
    fprintf(f, "%s%d. %s: %d GPUs, %s days, %s GPU-hours%s, MFU %.1f%% (%s)\n", md ? "" : "  ",
            k + 1, b->name, p->gpus, fmt_days(p->days, d, sizeof d),
            fmt_si(p->gpu_hours, gh, sizeof gh), c, 100 * p->mfu, p->brief);
  }
  for (int i = 0; i < x->nfab; i++) {
    int b = fastest(x, i);
    if (x->fab[i].pick >= 0 || b < 0) continue;
    fprintf(f, "%s%s: no cluster up to %d GPUs meets it (fastest: %d GPUs, %s days)\n",
            md ? "- " : "  ", x->fab[i].name, x->gpus_max, x->pt[b].gpus,
            fmt_days(x->pt[b].days, d, sizeof d));
  }
}

/* ---- files -------------------------------------------------------------------------------- */

static int write_csv(const crun *x, const char *path, pp_err *err) {
  FILE *f = fopen(path, "w");
  if (!f) return pp_err_set(err, PP_IO, "%s: cannot write: %s", path, strerror(errno));
  fputs("fabric,gpu,gpus,gbs,status,simulated,iter_s,iter_cm_s,iter_sim_s,tokens_per_s,days,"
        "gpu_hours,price_per_gpu_hour,cost_usd,mfu,mem_gib,meets_deadline,gap,search_run_id,"
        "plan,why\n", f);
  for (int i = 0; i < x->npt; i++) {
    const study__cap_point *p = &x->pt[i];
    const cap_fabric *b = &x->fab[p->fabric];
    fprintf(f, "%s,%s,%d,%d,%s,", b->name, b->gpu, p->gpus, x->gbs, cap_status_name[p->status]);
    if (p->status == STUDY__CAP_OK) {
      fprintf(f, "%d,%.9g,%.9g,", p->simulated, p->iter_s, p->cm_s);
      if (p->simulated) fprintf(f, "%.9g", p->sim_s);
      fprintf(f, ",%.6g,%.6g,%.6g,", x->tokens_per_iter / p->iter_s, p->days, p->gpu_hours);
      if (b->price >= 0) fprintf(f, "%g,%.6g", b->price, p->cost);
      else fputc(',', f);
      fprintf(f, ",%.4f,%.2f,", p->mfu, p->mem_gib);
      if (x->o->deadline_s > 0) fprintf(f, "%d", p->meets);
      fprintf(f, ",%.6g,%lld,", p->gap, p->run_id);
    } else {
      fputs(",,,,,,,,,,,,,", f);
      if (p->run_id) fprintf(f, "%lld", p->run_id);
      fputc(',', f);
    }
    study__csv_field(f, p->plan);
    fputc(',', f);
    char why[640];
    snprintf(why, sizeof why, "%s%s%s", p->why, p->status == STUDY__CAP_MEMORY ? ": " : "",
             p->status == STUDY__CAP_MEMORY ? b->min_why : "");
    study__csv_field(f, why);
    fputc('\n', f);
  }
  if (fclose(f)) return pp_err_set(err, PP_IO, "%s: cannot write: %s", path, strerror(errno));
  return PP_OK;
}

/* The options as a command line that reproduces the study. */
static void command_line(const crun *x, FILE *f) {
  const study_capacity_opts *o = x->o;
  fprintf(f, "podplan study capacity --model %s --tokens %g", o->model, o->tokens);
  if (o->deadline_s > 0) fprintf(f, " --deadline %gh", o->deadline_s / 3600);
  if (o->gpus_max) fprintf(f, " --gpus-max %d", o->gpus_max);
  if (o->clusters) fprintf(f, " --clusters %s", o->clusters);
  if (o->prices) fprintf(f, " --price-per-gpu-hour %s", o->prices);
  if (o->gbs) fprintf(f, " --gbs %d", o->gbs);
  if (o->gap != 0.001) fprintf(f, " --gap %g", o->gap);
  if (o->time_limit_s > 0) fprintf(f, " --time-limit %g", o->time_limit_s);
  if (o->sim_max_gpus > 0 && o->sim_max_gpus != CAP_SIM_MAX) /* the CLI's 0: every size */
    fprintf(f, " --sim-max-gpus %d", o->sim_max_gpus >= SPEC_MAX_GPUS ? 0 : o->sim_max_gpus);
  if (o->calib_id) fprintf(f, " --calibration %lld", o->calib_id);
  fprintf(f, " --db %s", x->db);
}

static void md_table(const crun *x, FILE *f) {
  fprintf(f, "| fabric | GPUs | plan | iteration (s) | from | days | GPU-hours | cost | MFU |%s\n"
             "|---|--:|---|--:|---|--:|--:|--:|--:|%s\n",
          x->o->deadline_s > 0 ? " meets the deadline |" : "", x->o->deadline_s > 0 ? "---|" : "");
  for (int i = 0; i < x->npt; i++) {
    const study__cap_point *p = &x->pt[i];
    const char *fab = x->fab[p->fabric].name;
    if (p->status != STUDY__CAP_OK) {
      fprintf(f, "| %s | %d | %s: %s | | | | | | |%s\n", fab, p->gpus,
              cap_status_text[p->status], p->why,
              x->o->deadline_s > 0 ? " |" : "");
      continue;
    }
    char d[32], gh[32], c[32];
    fprintf(f, "| %s | %d | %s | %.3f | %s | %s | %s | %s | %.1f%% |%s\n", fab, p->gpus, p->brief,
            p->iter_s, p->simulated ? "simulated" : "cost model", fmt_days(p->days, d, sizeof d),
            fmt_si(p->gpu_hours, gh, sizeof gh), fmt_cost(p->cost, c, sizeof c), 100 * p->mfu,
            x->o->deadline_s > 0 ? (p->meets ? " yes |" : " no |") : "");
  }
  fputc('\n', f);
}

static int write_md(const crun *x, const char *path, int plots, pp_err *err) {
  FILE *f = fopen(path, "w");
  if (!f) return pp_err_set(err, PP_IO, "%s: cannot write: %s", path, strerror(errno));
  char tok[32];
  fprintf(f, "# Capacity: %s on %s tokens\n\n`", x->m.name,
          fmt_count(x->o->tokens, tok, sizeof tok));
  command_line(x, f);
  char sim[96];
  fprintf(f, "`\n\nEvery point is a global search (target gap %g) through the funnel, stored "
             "with its search run in %s (table study_cases, study 'capacity'): %s (\"simulated\""
             " or \"cost model\" per point). Days = tokens / (global batch x sequence length) x "
             "iteration time; GPU-hours = GPUs x hours; MFU at the time used. Sizes below the "
             "memory lower bound (weights, gradients and Adam state sharded over every GPU) are "
             "not searched.\n\n", x->o->gap, x->db, sim_text(x, sim, sizeof sim));
  print_header(x, f);
  md_table(x, f);
  if (x->o->deadline_s > 0) {
    fputs("## The answer\n\n", f);
    print_answer(x, f, 1);
    fputc('\n', f);
  }
  if (print_notes(x, NULL, 1)) {
    fputs("## Notes\n\n", f);
    print_notes(x, f, 1);
    fputc('\n', f);
  }
  if (plots) {
    fputs("## Plots\n\n![time to train against GPUs](capacity-scaling.png)\n\n"
          "![GPU-hours against GPUs](capacity-gpu-hours.png)\n\n", f);
    if (x->o->prices) fputs("![cost against GPUs](capacity-cost.png)\n\n", f);
  }
  if (fclose(f)) return pp_err_set(err, PP_IO, "%s: cannot write: %s", path, strerror(errno));
  return PP_OK;
}

/* ---- plots -------------------------------------------------------------------------------- */

typedef enum { CAP_PLOT_DAYS, CAP_PLOT_GPU_HOURS, CAP_PLOT_COST } cap_plot_kind;

static const struct cap_plot_def {
  const char *name, *title, *ylabel;
} cap_plots[] = {
    {"capacity-scaling", "time to train", "days to train (log scale)"},
    {"capacity-gpu-hours", "GPU-hours to train", "GPU-hours (log scale)"},
    {"capacity-cost", "cost to train", "cost, USD (log scale)"},
};

static const char *const cap_colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                         "#9467bd", "#8c564b", "#e377c2", "#17becf"};

static double plot_value(const study__cap_point *p, cap_plot_kind k) {
  return k == CAP_PLOT_DAYS ? p->days : k == CAP_PLOT_GPU_HOURS ? p->gpu_hours : p->cost;
}

/* What a plot's data file holds: a block per fabric with points (gpus, value, simulated). */
typedef struct cap_plot_data {
  int n;                   /* blocks */
  int fab[64];             /* the fabric of each */
  int sim[64], cmo[64];    /* its simulated points; its cost-model points */
  int lo, hi;              /* GPUs */
  double vlo, vhi;         /* values */
} cap_plot_data;

static int plot_data(const crun *x, cap_plot_kind k, const char *path, cap_plot_data *d,
                     pp_err *err) {
  FILE *f = fopen(path, "w");
  if (!f) return pp_err_set(err, PP_IO, "%s: cannot write: %s", path, strerror(errno));
  memset(d, 0, sizeof *d);
  d->lo = 1 << 30, d->vlo = HUGE_VAL;
  for (int i = 0; i < x->nfab && d->n < 64; i++) {
    int rows = 0;
    for (int j = 0; j < x->fab[i].npoints; j++) {
      const study__cap_point *p = &x->pt[x->fab[i].first + j];
      double v = p->status == STUDY__CAP_OK ? plot_value(p, k) : 0;
      if (!(v > 0)) continue;
      if (!rows++) fprintf(f, "%s# %s: GPUs, %s, simulated\n", d->n ? "\n\n" : "",
                           x->fab[i].name, cap_plots[k].title);
      fprintf(f, "%d %.9g %d\n", p->gpus, v, p->simulated);
      d->sim[d->n] += p->simulated, d->cmo[d->n] += !p->simulated;
      if (p->gpus < d->lo) d->lo = p->gpus;
      if (p->gpus > d->hi) d->hi = p->gpus;
      if (v < d->vlo) d->vlo = v;
      if (v > d->vhi) d->vhi = v;
    }
    if (rows) d->fab[d->n++] = i;
  }
  if (fclose(f)) return pp_err_set(err, PP_IO, "%s: cannot write: %s", path, strerror(errno));
  return PP_OK;
}

/* Appends to body (n bytes; *b written so far). */
static void cat(char *body, size_t n, int *b, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void cat(char *body, size_t n, int *b, const char *fmt, ...) {
  if (*b < 0 || (size_t)*b >= n) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(body + *b, n - (size_t)*b, fmt, ap);
  va_end(ap);
  *b = k < 0 ? -1 : *b + k;
}

/* The plot command: per fabric a line, filled points where simulated, open ones where the
 * cost model's; the legend's two markers; the deadline (time plot). */
static void plot_cmd(const crun *x, cap_plot_kind k, const char *dat, const cap_plot_data *d,
                     char *body, size_t n, int *b) {
  static const char *const mark[2] = {"($3 == 0 ? $2 : NaN) with points pt 6",
                                      "($3 == 1 ? $2 : NaN) with points pt 7"};
  int sim = 0, cmo = 0;
  cat(body, n, b, "plot ");
  for (int i = 0; i < d->n; i++) {
    const char *c = cap_colors[i % (sizeof cap_colors / sizeof cap_colors[0])];
    char q[80];
    study_plot_quote(x->fab[d->fab[i]].name, q, sizeof q);
    cat(body, n, b, "%s'%s' index %d using 1:2 with lines lw 2 lc rgb '%s' title '%s'",
        i ? ", " : "", dat, i, c, q);
    for (int s = 0; s < 2; s++)
      if (s ? d->sim[i] : d->cmo[i])
        cat(body, n, b, ", '' index %d using 1:%s ps 1.3 lc rgb '%s' notitle", i, mark[s], c);
    sim += d->sim[i], cmo += d->cmo[i];
  }
  if (sim) cat(body, n, b, ", keyentry with points pt 7 lc rgb 'gray40' title 'simulated'");
  if (cmo) cat(body, n, b, ", keyentry with points pt 6 lc rgb 'gray40' title 'cost model'");
  if (k == CAP_PLOT_DAYS && x->o->deadline_s > 0) {
    char dl[48];
    cat(body, n, b, ", %.9g with lines dt 2 lw 2 lc rgb 'black' title 'deadline (%s)'",
        x->o->deadline_s / 86400, deadline_text(x->o->deadline_s, dl, sizeof dl));
  }
  cat(body, n, b, "\n");
}

/* Labelled y tics over [lo, hi] on a log axis: 1-2-5 steps (more when the range is narrow,
 * decades alone when it is wide), labels as 0.05, 20, 3k, 1.5M. */
static void y_tics(double lo, double hi, char *buf, size_t n) {
  static const double fine[] = {1, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9}, mid[] = {1, 2, 5},
                      coarse[] = {1};
  static const struct {
    const double *m;
    int n;
  } steps[] = {{coarse, 1}, {mid, 3}, {fine, 11}};
  int k = 0;
  for (int s = 0; s < 3; s++) {
    int cnt = 0;
    for (int e = (int)floor(log10(lo)); e <= (int)ceil(log10(hi)); e++)
      for (int j = 0; j < steps[s].n; j++) {
        double v = steps[s].m[j] * pow(10, e);
        cnt += v >= lo && v <= hi;
      }
    if (cnt < 4 && s < 2) continue; /* too few: a finer step */
    k = snprintf(buf, n, "(");
    for (int e = (int)floor(log10(lo)); e <= (int)ceil(log10(hi)); e++)
      for (int j = 0; j < steps[s].n && k > 0 && (size_t)k < n; j++) {
        double v = steps[s].m[j] * pow(10, e);
        char l[32];
        if (v < lo || v > hi) continue;
        if (v >= 1000) fmt_si(v, l, sizeof l); else snprintf(l, sizeof l, "%g", v);
        k += snprintf(buf + k, n - (size_t)k, "%s'%s' %.9g", buf[k - 1] == '(' ? "" : ", ", l, v);
      }
    if (k > 0 && (size_t)k + 2 < n) strcat(buf, ")");
    return;
  }
}

/* One plot against GPUs (log2) and its data; none when no point fits. */
static int plot_one(const crun *x, const char *dir, cap_plot_kind k, int *plots, pp_err *err) {
  char dat[4096], tok[32];
  snprintf(dat, sizeof dat, "%s/%s.dat", dir, cap_plots[k].name);
  cap_plot_data d;
  if (plot_data(x, k, dat, &d, err)) return err->code;
  if (!d.n) return PP_OK;
  if (k == CAP_PLOT_DAYS && x->o->deadline_s > 0) { /* the deadline inside the frame */
    d.vlo = fmin(d.vlo, x->o->deadline_s / 86400);
    d.vhi = fmax(d.vhi, x->o->deadline_s / 86400);
  }
  char body[16384], q[160], tics[512] = "", ytics[1024];
  int n = 0, b = 0;
  for (long g = 1; g <= d.hi; g *= 2)
    if (g >= d.lo) n += snprintf(tics + n, sizeof tics - (size_t)n, "%s%ld", n ? ", " : "", g);
  study_plot_quote(x->m.name, q, sizeof q);
  y_tics(d.vlo / 1.6, d.vhi * 1.6, ytics, sizeof ytics);
  cat(body, sizeof body, &b,
      "set title '%s: %s %s tokens (global batch %d)'\n"
      "set xlabel 'GPUs (log scale)'\nset ylabel '%s'\n"
      "set logscale x 2\nset logscale y 10\nset xrange [%g:%g]\nset yrange [%g:%g]\n"
      "set xtics (%s)\nset ytics %s\nset grid xtics ytics\nset key outside right top\n"
      "set datafile missing 'NaN'\n",
      q, cap_plots[k].title, fmt_count(x->o->tokens, tok, sizeof tok), x->gbs,
      cap_plots[k].ylabel, d.lo / 1.3, d.hi * 1.3, d.vlo / 1.6, d.vhi * 1.6, tics, ytics);
  plot_cmd(x, k, dat, &d, body, sizeof body, &b);
  if (b < 0 || (size_t)b >= sizeof body)
    return pp_err_set(err, PP_INTERNAL, "capacity: the %s plot's script is too long",
                      cap_plots[k].name);
  if (study_plot(dir, cap_plots[k].name, 1100, 600, body, err)) return err->code;
  *plots += 2;
  return PP_OK;
}

/* The table and the answer on out; with out_dir, capacity.csv, capacity.md and the plots. */
static int write_all(const crun *x, FILE *out, int *plots, pp_err *err) {
  print_table(x, out);
  fputc('\n', out);
  print_notes(x, out, 0);
  print_answer(x, out, 0);
  const char *dir = x->o->out_dir;
  if (!dir) return PP_OK;
  if (pp_mkdirs(dir, err)) return err->code;
  char path[4096];
  snprintf(path, sizeof path, "%s/capacity.csv", dir);
  if (write_csv(x, path, err)) return err->code;
  for (int k = CAP_PLOT_DAYS; k <= CAP_PLOT_COST; k++)
    if ((k != CAP_PLOT_COST || x->o->prices) && plot_one(x, dir, (cap_plot_kind)k, plots, err))
      return err->code;
  snprintf(path, sizeof path, "%s/capacity.md", dir);
  if (write_md(x, path, *plots, err)) return err->code;
  fprintf(out, "wrote %s/capacity.csv, %s/capacity.md and %d plot files\n", dir, dir, *plots);
  return PP_OK;
}

/* ---- the study ---------------------------------------------------------------------------- */

/* Everything checked before the store is opened: the options, the model, the fabrics, the
 * prices; then the points of every fabric. */
static int prepare(crun *x, pp_err *err) {
  const study_capacity_opts *o = x->o;
  if (check_opts(o, err)) return err->code;
  if (spec_model_load(o->model, &x->m, err)) return pp_err_prefix(err, "--model");
  char *mj = spec_model_json(&x->m);
  spec_hash(mj ? mj : "", x->model_hash);
  free(mj);
  x->gbs = o->gbs ? o->gbs : default_gbs(&x->m);
  x->tokens_per_iter = (double)x->gbs * x->m.seq_len;
  x->gpus_max = o->gpus_max ? o->gpus_max : CAP_GPUS_MAX;
  x->sim_max = o->sim_max_gpus ? (o->sim_max_gpus < 0 ? 0 : o->sim_max_gpus) : CAP_SIM_MAX;
  if (load_fabrics(x, err) || parse_prices(x, err)) return err->code;
  if (!(x->pt = calloc((size_t)x->nfab * CAP_MAX_SIZES + 1, sizeof *x->pt)))
    return pp_err_set(err, PP_NOMEM, "capacity: out of memory");
  for (int i = 0; i < x->nfab; i++)
    if (fabric_points(x, i, err)) return err->code;
  return PP_OK;
}

int study_capacity(const study_capacity_opts *o, study_capacity_summary *sum, pp_err *err) {
  memset(sum, 0, sizeof *sum);
  crun x = {.o = o, .db = o->db ? o->db : STORE_DEFAULT_PATH, .t0 = now_s(),
            .cm_fp = cm_fingerprint()};
  int rc = prepare(&x, err);
  /* known before the first point, so that every point's key says the same (the module is
   * loaded only where a point may be simulated) */
  pp_err se = {0};
  x.nosim = !rc && x.sim_max && sim_available(&se) == PP_NOTIMPL;
  /* the output folder before the work: a study that cannot write its answer fails at once */
  if (!rc && o->out_dir) rc = pp_mkdirs(o->out_dir, err);
  if (!rc) rc = store_open(x.db, NULL, &x.st, err);
  for (int i = 0; i < x.npt; i++) x.total += x.pt[i].status != STUDY__CAP_MEMORY;
  for (int i = 0; i < x.npt && !rc; i++) rc = run_point(&x, &x.pt[i], err);
  if (o->progress && x.total) fputs("\r\033[K", stderr);
  if (!rc) {
    derive(&x);
    rc = write_all(&x, o->out ? o->out : stdout, &sum->plots, err);
  }
  sum->fabrics = x.nfab;
  for (int i = 0; i < x.npt; i++) {
    sum->points += x.pt[i].status != STUDY__CAP_MEMORY;
    sum->feasible += x.pt[i].status == STUDY__CAP_OK;
  }
  for (int i = 0; i < x.nfab; i++) sum->meeting += x.fab[i].pick >= 0;
  sum->searched = x.searched;
  for (int i = 0; i < x.npt; i++) sum->resumed += x.pt[i].resumed;
  sum->wall_s = now_s() - x.t0;
  store_close(x.st);
  free(x.fab);
  free(x.pt);
  return rc;
}
