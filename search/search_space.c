/* The plan space every method shares: its restrictions (one option table for the CLI), the
 * uniform space as an indexed list of valid plans, and non-uniform plans built from stages on
 * contiguous GPU blocks. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search_int.h"

void search_space_default(int gbs, search_space *s) {
  memset(s, 0, sizeof *s);
  s->gbs = gbs;
  s->recompute = (1u << SPEC_RECOMPUTE_NONE) | (1u << SPEC_RECOMPUTE_SELECTIVE) |
                 (1u << SPEC_RECOMPUTE_FULL);
  s->zero = 0xF;
  s->schedules = (1u << SPEC_SCHED_GPIPE) | (1u << SPEC_SCHED_1F1B) |
                 (1u << SPEC_SCHED_INTERLEAVED);
  s->sp = 3;
}

/* ---- the option table -------------------------------------------------------------------- */

typedef enum { K_MAX, K_FLAG, K_LIST, K_ONE } opt_kind;

typedef struct opt_row {
  search_space_opt o;
  opt_kind kind;
  size_t off;              /* K_MAX: the int limit; K_LIST: the unsigned bit set; K_ONE: the
                              int index of one word */
  const char *const *words; /* K_LIST: value names, bit i for words[i]; K_ONE: index i */
} opt_row;

static const char *const w_recompute[] = {"none", "selective", "full", NULL};
static const char *const w_zero[] = {"0", "1", "2", "3", NULL};
static const char *const w_sched[] = {"gpipe", "1f1b", "interleaved", NULL};
static const char *const w_sp[] = {"off", "on", NULL};
static const char *const w_hier[] = {"off", "node", "domain", NULL}; /* SEARCH_HIER_* */

#define OFF(f) offsetof(search_space, f)
static const opt_row rows[] = {
    {{"max-tp", "N", "tensor-parallel degree at most N"}, K_MAX, OFF(max_tp), NULL},
    {{"max-pp", "N", "pipeline stages at most N"}, K_MAX, OFF(max_pp), NULL},
    {{"max-dp", "N", "data-parallel degree at most N"}, K_MAX, OFF(max_dp), NULL},
    {{"max-cp", "N", "context-parallel degree at most N"}, K_MAX, OFF(max_cp), NULL},
    {{"max-ep", "N", "expert-parallel degree at most N"}, K_MAX, OFF(max_ep), NULL},
    {{"max-vpp", "N", "virtual stages per pipeline rank at most N"}, K_MAX, OFF(max_vpp), NULL},
    {{"max-mbs", "N", "microbatch size at most N sequences"}, K_MAX, OFF(max_mbs), NULL},
    {{"no-cp", NULL, "no context parallelism (same as --max-cp 1)"}, K_FLAG, OFF(max_cp), NULL},
    {{"no-ep", NULL, "no expert parallelism (same as --max-ep 1)"}, K_FLAG, OFF(max_ep), NULL},
    {{"recompute", "LIST", "recomputation allowed: none,selective,full"}, K_LIST, OFF(recompute),
     w_recompute},
    {{"zero", "LIST", "ZeRO stages allowed: 0,1,2,3"}, K_LIST, OFF(zero), w_zero},
    {{"schedules", "LIST", "pipeline schedules allowed: gpipe,1f1b,interleaved"}, K_LIST,
     OFF(schedules), w_sched},
    {{"sp", "LIST", "sequence parallelism allowed: off,on"}, K_LIST, OFF(sp), w_sp},
    {{"uniform-only", NULL, "global: search the uniform space only"}, K_FLAG,
     OFF(uniform_only), NULL},
    {{"same-recompute", NULL, "global: one recomputation for every stage of a plan (no "
                              "per-stage recomputation)"},
     K_FLAG, OFF(same_recompute), NULL},
    {{"hierarchy", "ISLAND", "only plans a two-level decomposition can express, islands = "
                             "off, node or domain (NVLink domain): stages on 2^k GPUs inside "
                             "an island or on whole islands, TP/CP/EP inside an island"},
     K_ONE, OFF(hierarchy), w_hier},
};
#undef OFF
#define NROWS (sizeof rows / sizeof rows[0])

size_t search_space_opt_count(void) { return NROWS; }
const search_space_opt *search_space_opt_get(size_t i) { return i < NROWS ? &rows[i].o : NULL; }

static int parse_list(const opt_row *r, const char *value, unsigned *out, pp_err *err) {
  unsigned bits = 0;
  const char *p = value;
  while (p && *p) {
    const char *e = strchr(p, ',');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    int k;
    for (k = 0; r->words[k]; k++)
      if (strlen(r->words[k]) == n && !strncmp(r->words[k], p, n)) break;
    if (!r->words[k]) {
      char choices[128] = "";
      for (int j = 0; r->words[j]; j++)
        snprintf(choices + strlen(choices), sizeof choices - strlen(choices), "%s%s",
                 j ? "," : "", r->words[j]);
      return pp_err_set(err, PP_USAGE, "--%s: '%.*s' is not one of %s", r->o.name, (int)n, p,
                        choices);
    }
    bits |= 1u << k;
    p = e ? e + 1 : NULL;
  }
  if (!bits) return pp_err_set(err, PP_USAGE, "--%s: an empty list allows nothing", r->o.name);
  *out = bits;
  return PP_OK;
}

static int parse_one(const opt_row *r, const char *value, int *out, pp_err *err) {
  char choices[128] = "";
  for (int k = 0; r->words[k]; k++) {
    if (!strcmp(r->words[k], value)) {
      *out = k;
      return PP_OK;
    }
    snprintf(choices + strlen(choices), sizeof choices - strlen(choices), "%s%s", k ? ", " : "",
             r->words[k]);
  }
  return pp_err_set(err, PP_USAGE, "--%s: '%s' is not one of %s", r->o.name, value, choices);
}

int search_space_set(search_space *s, const char *name, const char *value, pp_err *err) {
  for (size_t i = 0; i < NROWS; i++) {
    const opt_row *r = &rows[i];
    if (strcmp(r->o.name, name)) continue;
    char *field = (char *)s + r->off;
    if (r->kind == K_FLAG) {
      *(int *)field = 1;
      return PP_OK;
    }
    if (!value) return pp_err_set(err, PP_USAGE, "--%s needs a value", name);
    if (r->kind == K_LIST) return parse_list(r, value, (unsigned *)field, err);
    if (r->kind == K_ONE) return parse_one(r, value, (int *)field, err);
    char *end;
    long v = strtol(value, &end, 10);
    if (*value == '\0' || *end || v < 1 || v > SPEC_MAX_GPUS)
      return pp_err_set(err, PP_USAGE, "--%s: '%s' is not a whole number from 1 to %d", name,
                        value, SPEC_MAX_GPUS);
    *(int *)field = (int)v;
    return PP_OK;
  }
  return pp_err_set(err, PP_USAGE, "unknown space option --%s", name);
}

void search_space_describe(const search_space *s, char *buf, size_t n) {
  search_space d;
  search_space_default(s->gbs, &d);
  size_t used = 0;
  if (n) buf[0] = '\0';
  for (size_t i = 0; i < NROWS && used < n; i++) {
    const opt_row *r = &rows[i];
    const char *f = (const char *)s + r->off, *fd = (const char *)&d + r->off;
    const char *sep = used ? "," : "";
    if (r->kind == K_FLAG) continue; /* no-cp / no-ep show as max-cp=1 / max-ep=1 */
    if (r->kind == K_MAX && *(const int *)f != *(const int *)fd)
      used += (size_t)snprintf(buf + used, n - used, "%s%s=%d", sep, r->o.name, *(const int *)f);
    if (r->kind == K_ONE && *(const int *)f != *(const int *)fd)
      used += (size_t)snprintf(buf + used, n - used, "%s%s=%s", sep, r->o.name,
                               r->words[*(const int *)f]);
    if (r->kind == K_LIST && *(const unsigned *)f != *(const unsigned *)fd) {
      used += (size_t)snprintf(buf + used, n - used, "%s%s=", sep, r->o.name);
      int first = 1;
      for (int k = 0; r->words[k] && used < n; k++)
        if (*(const unsigned *)f & (1u << k))
          used += (size_t)snprintf(buf + used, n - used, "%s%s", first ? "" : "+", r->words[k]),
              first = 0;
    }
  }
  if (s->uniform_only && used < n)
    used += (size_t)snprintf(buf + used, n - used, "%suniform-only", used ? "," : "");
  if (s->same_recompute && used < n)
    snprintf(buf + used, n - used, "%ssame-recompute", used ? "," : "");
}

/* ---- the uniform space ------------------------------------------------------------------- */

typedef struct uplan {
  uint32_t tp, pp, dp, cp, ep, mbs, vpp;
  uint8_t rc, zero, sp, sched;
} uplan;

struct search_uspace {
  uplan *v;
  size_t n, cap;
  int gbs;
};

static int within(int v, int max) { return max == 0 || v <= max; }

static int push(search_uspace *u, const uplan *p) {
  if (u->n == u->cap) {
    size_t cap = u->cap ? 2 * u->cap : 1024;
    uplan *v = realloc(u->v, cap * sizeof *v);
    if (!v) return -1;
    u->v = v, u->cap = cap;
  }
  u->v[u->n++] = *p;
  return 0;
}

static void to_plan(const uplan *q, int gbs, spec_plan *p) {
  memset(p, 0, sizeof *p);
  p->tp = (int)q->tp, p->pp = (int)q->pp, p->dp = (int)q->dp, p->cp = (int)q->cp;
  p->ep = (int)q->ep, p->mbs = (int)q->mbs, p->vpp = (int)q->vpp, p->gbs = gbs;
  p->recompute = (spec_recompute)q->rc, p->zero = q->zero, p->sp = q->sp;
  p->schedule = (spec_schedule)q->sched;
}

/* The per-replica choices of one (tp, pp, dp, cp, ep): mbs, vpp, schedule, recompute, ZeRO,
 * sp. Each combination that validates goes in. */
static int add_choices(search_uspace *u, const search_space *s, const spec_model *m,
                       const spec_cluster *c, uplan q) {
  int per = s->gbs / (int)q.dp;
  for (int mbs = 1; mbs <= per; mbs++) {
    if (per % mbs || !within(mbs, s->max_mbs)) continue;
    int mb = per / mbs;
    for (int vpp = 1; vpp * (int)q.pp <= m->layers; vpp++) {
      if (!within(vpp, s->max_vpp)) break;
      if (vpp > 1 && (q.pp == 1 || m->layers % ((int)q.pp * vpp) || mb % (int)q.pp)) continue;
      for (int sch = 0; sch < 3; sch++) {
        if (!(s->schedules & (1u << sch))) continue;
        if ((vpp > 1) != (sch == SPEC_SCHED_INTERLEAVED)) continue;
        for (int rc = 0; rc < 3; rc++) {
          if (!(s->recompute & (1u << rc))) continue;
          for (int z = 0; z < 4; z++) {
            if (!(s->zero & (1u << z)) || (z >= 2 && q.pp > 1)) continue;
            for (int sp = 0; sp < 2; sp++) {
              if (!(s->sp & (1u << sp)) || (sp && q.tp == 1)) continue;
              uplan r = q;
              r.mbs = (uint32_t)mbs, r.vpp = (uint32_t)vpp, r.sched = (uint8_t)sch;
              r.rc = (uint8_t)rc, r.zero = (uint8_t)z, r.sp = (uint8_t)sp;
              spec_plan p;
              to_plan(&r, s->gbs, &p);
              pp_err ve = {0};
              if (spec_plan_validate(&p, m, c, &ve)) continue;
              if (push(u, &r)) return -1;
            }
          }
        }
      }
    }
  }
  return 0;
}

/* ---- the two-level space (--hierarchy) ---------------------------------------------------
 * Alpa places each stage on a sub-mesh of shape (1, 2^k) inside a host or (n, M) whole hosts
 * and shards inside it; with the island (a node, or an NVLink domain) in the host's role: a
 * stage's GPUs are 2^k GPUs of one island or whole islands, and its model-parallel groups (TP:
 * tp consecutive ranks; CP and EP: cp or ep ranks stride tp, so tp x cp or tp x ep
 * consecutive ranks) lie inside one island. */

const char *search_hierarchy_name(int h) {
  return h >= 0 && h < (int)(sizeof w_hier / sizeof w_hier[0]) - 1 ? w_hier[h] : "?";
}

int search_island_gpus(const search_space *s, const spec_cluster *c) {
  if (s->hierarchy == SEARCH_HIER_NODE) return c->gpus_per_node;
  if (s->hierarchy == SEARCH_HIER_DOMAIN) return c->nvlink.domain_gpus;
  return 0;
}

int search_island_single(const search_space *s, const spec_cluster *c) {
  int I = search_island_gpus(s, c);
  return I > 0 && I >= c->gpus;
}

/* Whether ranks [r, r + len) of the stage lie in one island, for every r = 0, len, ... */
static int chunks_in_island(int I, const int *gpus, int n, int len) {
  for (int r = 0; r < n; r += len)
    for (int j = r + 1; j < r + len && j < n; j++)
      if (gpus[j] / I != gpus[r] / I) return 0;
  return 1;
}

int search_island_block_ok(int I, int d, int S) {
  if (I <= 0) return 1;
  if (S < I) return (S & (S - 1)) == 0 && d / I == (d + S - 1) / I; /* 2^k GPUs of one island */
  return S % I == 0 && d % I == 0;                                   /* whole islands */
}

int search_island_stage_ok(int I, const int *gpus, int n, int tp, int cp, int ep) {
  if (I <= 0) return 1;
  if (n < I) /* 2^k GPUs of one island */
    return (n & (n - 1)) == 0 && chunks_in_island(I, gpus, n, n);
  if (n % I) return 0;
  /* whole islands: n distinct GPUs within n / I consecutive islands fill them */
  int lo = gpus[0] / I, hi = lo;
  for (int i = 1; i < n; i++) {
    int k = gpus[i] / I;
    lo = k < lo ? k : lo, hi = k > hi ? k : hi;
  }
  if ((hi - lo + 1) * I != n) return 0;
  return chunks_in_island(I, gpus, n, tp * cp) && chunks_in_island(I, gpus, n, tp * ep);
}

int search_island_plan_ok(const search_space *s, const spec_cluster *c, const spec_plan *p) {
  int I = search_island_gpus(s, c);
  if (!I) return 1;
  for (int i = 0; i < p->nstages; i++) {
    const spec_stage *st = &p->stages[i];
    if (!search_island_stage_ok(I, st->gpus, st->ngpus, st->tp, st->cp, st->ep)) return 0;
  }
  if (p->nstages) return 1;
  int S = p->tp * p->cp * p->dp, ok = 1, *ids = malloc((size_t)S * sizeof *ids);
  if (!ids) return 0;
  for (int i = 0; ok && i < c->gpus / S; i++) { /* stage i holds GPUs [iS, (i + 1)S) */
    for (int j = 0; j < S; j++) ids[j] = i * S + j;
    ok = search_island_stage_ok(I, ids, S, p->tp, p->cp, p->ep);
  }
  free(ids);
  return ok;
}

/* ---- membership --------------------------------------------------------------------------
 * What a plan uses, against what the space allows: every degree within its limit, its
 * recomputation(s), ZeRO stage, schedule and sequence parallelism among the allowed ones, the
 * flags (uniform only, one recomputation for all stages) and the two-level space. A limit a
 * non-uniform plan does not carry (the microbatch size of every stage) counts as not met: the
 * answer is never "inside" for a plan that might not be. */

static int stage_ok(const search_space *s, int tp, int dp, int cp, int ep, spec_recompute rc) {
  return within(tp, s->max_tp) && within(dp, s->max_dp) && within(cp, s->max_cp) &&
         within(ep, s->max_ep) && (s->recompute & (1u << rc));
}

int search_space_plan_ok(const search_space *s, const spec_cluster *c, const spec_plan *p) {
  if (p->gbs != s->gbs || !(s->zero & (1u << p->zero)) || !(s->schedules & (1u << p->schedule)) ||
      !(s->sp & (1u << (p->sp ? 1 : 0))))
    return 0;
  if (p->nstages == 0) {
    int dp = p->dp ? p->dp : c->gpus / (p->tp * p->pp * p->cp);
    if (!stage_ok(s, p->tp, dp, p->cp, p->ep, p->recompute) || !within(p->pp, s->max_pp) ||
        !within(p->vpp, s->max_vpp) || !within(p->mbs, s->max_mbs))
      return 0;
  } else {
    if (s->uniform_only || s->max_mbs || !within(p->nstages, s->max_pp) ||
        !within(p->vpp, s->max_vpp))
      return 0;
    for (int i = 0; i < p->nstages; i++) {
      const spec_stage *st = &p->stages[i];
      if (!stage_ok(s, st->tp, st->dp, st->cp, st->ep, st->recompute) ||
          (s->same_recompute && st->recompute != p->stages[0].recompute))
        return 0;
    }
  }
  return search_island_plan_ok(s, c, p);
}

int search_uspace_build(const search_space *s, const spec_model *m, const spec_cluster *c,
                        search_uspace **out, pp_err *err) {
  *out = NULL;
  if (s->gbs < 1) return pp_err_set(err, PP_USAGE, "search: the global batch (gbs) must be >= 1");
  search_uspace *u = calloc(1, sizeof *u);
  if (!u) return pp_err_set(err, PP_NOMEM, "search: out of memory");
  u->gbs = s->gbs;
  int N = c->gpus;
  for (int tp = 1; tp <= N; tp++) {
    if (N % tp || !within(tp, s->max_tp)) continue;
    for (int pp = 1; pp <= N / tp && pp <= m->layers; pp++) {
      if ((N / tp) % pp || !within(pp, s->max_pp)) continue;
      for (int cp = 1; cp <= N / tp / pp; cp++) {
        if ((N / tp / pp) % cp || !within(cp, s->max_cp)) continue;
        int dp = N / tp / pp / cp;
        if (!within(dp, s->max_dp) || s->gbs % dp) continue;
        for (int ep = 1; ep <= dp * cp; ep++) {
          if (!within(ep, s->max_ep) || dp % ep || (ep > 1 && (!m->experts || m->experts % ep)))
            continue;
          uplan q = {(uint32_t)tp, (uint32_t)pp, (uint32_t)dp, (uint32_t)cp, (uint32_t)ep,
                     1, 1, 0, 0, 0, 0};
          spec_plan shape = {.tp = tp, .pp = pp, .dp = dp, .cp = cp, .ep = ep};
          if (!search_island_plan_ok(s, c, &shape)) continue;
          if (add_choices(u, s, m, c, q)) {
            search_uspace_free(u);
            return pp_err_set(err, PP_NOMEM, "search: out of memory");
          }
        }
      }
    }
  }
  *out = u;
  return PP_OK;
}

void search_uspace_free(search_uspace *u) {
  if (!u) return;
  free(u->v);
  free(u);
}

size_t search_uspace_size(const search_uspace *u) { return u->n; }

void search_uspace_plan(const search_uspace *u, size_t i, spec_plan *out) {
  to_plan(&u->v[i], u->gbs, out);
}

/* ---- non-uniform plans ------------------------------------------------------------------- */

int search_plan_build(const search_stage *st, int n, int gbs, int microbatches, int sp, int zero,
                      const spec_model *m, const spec_cluster *c, spec_plan *out, pp_err *err) {
  memset(out, 0, sizeof *out);
  if (n < 1) return pp_err_set(err, PP_PLAN, "plan: no stages");
  out->stages = calloc((size_t)n, sizeof *out->stages);
  if (!out->stages) return pp_err_set(err, PP_NOMEM, "search: out of memory");
  out->nstages = n;
  out->gbs = gbs, out->microbatches = microbatches, out->sp = sp, out->zero = zero;
  out->schedule = SPEC_SCHED_1F1B;
  int layer = 0;
  for (int i = 0; i < n; i++) {
    spec_stage *s = &out->stages[i];
    s->layer_begin = layer;
    s->layer_end = layer += st[i].layers;
    s->tp = st[i].tp, s->cp = st[i].cp, s->dp = st[i].dp, s->ep = st[i].ep;
    s->recompute = st[i].recompute;
    s->ngpus = st[i].ngpus;
    s->gpus = malloc((size_t)s->ngpus * sizeof *s->gpus);
    if (!s->gpus) {
      spec_plan_clear(out);
      return pp_err_set(err, PP_NOMEM, "search: out of memory");
    }
    for (int g = 0; g < s->ngpus; g++) s->gpus[g] = st[i].first_gpu + g;
  }
  int rc = spec_plan_resolve(out, m, c, err);
  if (rc) spec_plan_clear(out);
  return rc;
}
