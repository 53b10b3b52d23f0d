/* Plans: the string form, the JSON forms (uniform and non-uniform), canonicalisation, the
 * validity rules against a model and a cluster, and the per-stage layer split. */
#include <ctype.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec_int.h"

enum { V_UNIFORM = 1, V_STAGES = 2 };

#define P(name, kind, lo, hi, req, def, names, mask) \
  {#name, kind, offsetof(spec_plan, name), lo, hi, 0, req, def, names, mask, NULL}
/* The order of this table is the order of the string form. */
static const spec__field plan_fields[] = {
    P(tp, SPEC__INT, 1, SPEC_MAX_GPUS, 0, 1, NULL, V_UNIFORM),
    P(pp, SPEC__INT, 1, SPEC_MAX_GPUS, 0, 1, NULL, V_UNIFORM),
    P(dp, SPEC__INT, 1, SPEC_MAX_GPUS, 0, 0, NULL, V_UNIFORM), /* 0 (absent): derive */
    P(cp, SPEC__INT, 1, SPEC_MAX_GPUS, 0, 1, NULL, V_UNIFORM),
    P(ep, SPEC__INT, 1, SPEC_MAX_GPUS, 0, 1, NULL, V_UNIFORM),
    P(mbs, SPEC__INT, 1, 1 << 24, 0, 1, NULL, V_UNIFORM),
    P(gbs, SPEC__INT, 1, 1 << 30, 1, 0, NULL, V_UNIFORM | V_STAGES),
    P(vpp, SPEC__INT, 1, 65536, 0, 1, NULL, V_UNIFORM),
    P(sp, SPEC__INT, 0, 1, 0, 0, NULL, V_UNIFORM | V_STAGES),
    P(recompute, SPEC__ENUM, 0, 0, 0, SPEC_RECOMPUTE_NONE, spec__recompute_names, V_UNIFORM),
    P(zero, SPEC__INT, 0, 3, 0, 0, NULL, V_UNIFORM | V_STAGES),
    P(schedule, SPEC__ENUM, 0, 0, 0, SPEC_SCHED_1F1B, spec__schedule_names, V_UNIFORM | V_STAGES),
    P(microbatches, SPEC__INT, 1, 1 << 30, 1, 0, NULL, V_STAGES),
    P(stages, SPEC__SKIP, 0, 0, 1, 0, NULL, V_STAGES),
};
#undef P
#define NPLAN (sizeof plan_fields / sizeof plan_fields[0])
#define NSTRING 12 /* the first 12 fields make the string form */

#define S(name, kind, lo, hi, req, def, names) \
  {#name, kind, offsetof(spec_stage, name), lo, hi, 0, req, def, names, 0, NULL}
static const spec__field stage_fields[] = {
    {"layers", SPEC__SKIP, 0, 0, 0, 0, 1, 0, NULL, 0, NULL}, /* [begin, end], read by hand */
    {"gpus", SPEC__SKIP, 0, 0, 0, 0, 1, 0, NULL, 0, NULL},   /* GPU ids, read by hand */
    S(tp, SPEC__INT, 1, SPEC_MAX_GPUS, 0, 1, NULL),
    S(dp, SPEC__INT, 1, SPEC_MAX_GPUS, 0, 1, NULL),
    S(cp, SPEC__INT, 1, SPEC_MAX_GPUS, 0, 1, NULL),
    S(ep, SPEC__INT, 1, SPEC_MAX_GPUS, 0, 1, NULL),
    S(recompute, SPEC__ENUM, 0, 0, 0, SPEC_RECOMPUTE_NONE, spec__recompute_names),
};
#undef S
#define NSTAGE (sizeof stage_fields / sizeof stage_fields[0])

void spec_plan_clear(spec_plan *p) {
  if (!p) return;
  for (int i = 0; i < p->nstages; i++) free(p->stages[i].gpus);
  free(p->stages);
  memset(p, 0, sizeof *p);
}

int spec_plan_copy(spec_plan *dst, const spec_plan *src, pp_err *err) {
  spec_plan c = *src;
  c.stages = NULL;
  if (src->nstages) {
    c.stages = calloc((size_t)src->nstages, sizeof *c.stages);
    if (!c.stages) return pp_err_set(err, PP_NOMEM, "plan: out of memory");
    for (int i = 0; i < src->nstages; i++) {
      c.stages[i] = src->stages[i];
      c.stages[i].gpus = malloc((size_t)src->stages[i].ngpus * sizeof(int));
      if (!c.stages[i].gpus) {
        c.nstages = i;
        spec_plan_clear(&c);
        return pp_err_set(err, PP_NOMEM, "plan: out of memory");
      }
      memcpy(c.stages[i].gpus, src->stages[i].gpus, (size_t)src->stages[i].ngpus * sizeof(int));
    }
  }
  *dst = c;
  return PP_OK;
}

/* ---- string form ------------------------------------------------------------------------ */

static void plan_defaults(spec_plan *p) {
  memset(p, 0, sizeof *p);
  for (size_t i = 0; i < NPLAN; i++)
    if (plan_fields[i].kind == SPEC__INT || plan_fields[i].kind == SPEC__ENUM)
      *(int *)((char *)p + plan_fields[i].off) = (int)plan_fields[i].def;
}

static int parse_string(const char *text, spec_plan *out, pp_err *err) {
  spec_plan p;
  plan_defaults(&p);
  uint32_t seen = 0;
  const char *s = text;
  while (isspace((unsigned char)*s)) s++;
  if (!*s) return pp_err_set(err, PP_PLAN, "plan: empty");
  while (*s) {
    const char *end = strchr(s, ',');
    if (!end) end = s + strlen(s);
    char item[128];
    size_t n = (size_t)(end - s);
    if (n >= sizeof item) return pp_err_set(err, PP_PLAN, "plan: item '%.40s...' too long", s);
    memcpy(item, s, n);
    item[n] = '\0';
    char *k = item;
    while (isspace((unsigned char)*k)) k++;
    char *eq = strchr(k, '=');
    if (!eq) return pp_err_set(err, PP_PLAN, "plan: '%s': expected key=value", k);
    *eq = '\0';
    char *v = eq + 1, *ke = eq;
    while (ke > k && isspace((unsigned char)ke[-1])) *--ke = '\0';
    while (isspace((unsigned char)*v)) v++;
    for (char *ve = v + strlen(v); ve > v && isspace((unsigned char)ve[-1]);) *--ve = '\0';
    size_t i;
    for (i = 0; i < NSTRING; i++)
      if (strcmp(k, plan_fields[i].name) == 0) break;
    if (i == NSTRING) {
      const char *names[NSTRING + 1];
      for (size_t j = 0; j < NSTRING; j++) names[j] = plan_fields[j].name;
      names[NSTRING] = NULL;
      const char *sug = spec__suggest(k, names);
      return pp_err_set(err, PP_PLAN, "plan: unknown key '%.40s'%s%s%s", k,
                        sug ? " (did you mean '" : "", sug ? sug : "", sug ? "'?)" : "");
    }
    if (seen & (1u << i)) return pp_err_set(err, PP_PLAN, "plan: duplicate key '%s'", k);
    seen |= 1u << i;
    const spec__field *f = &plan_fields[i];
    int *dst = (int *)((char *)&p + f->off);
    if (f->kind == SPEC__ENUM) {
      int found = -1;
      for (int e = 0; f->names[e]; e++)
        if (strcmp(v, f->names[e]) == 0) found = e;
      if (found < 0) {
        char list[128] = "";
        for (int e = 0; f->names[e]; e++)
          snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", e ? ", " : "",
                   f->names[e]);
        return pp_err_set(err, PP_PLAN, "plan: %s: '%.40s' is not one of %s", k, v, list);
      }
      *dst = found;
    } else {
      char *e;
      if (!isdigit((unsigned char)*v))
        return pp_err_set(err, PP_PLAN, "plan: %s: '%.40s' is not a non-negative integer", k, v);
      long x = strtol(v, &e, 10);
      if (*e) return pp_err_set(err, PP_PLAN, "plan: %s: '%.40s' is not an integer", k, v);
      if (x < f->lo || x > f->hi)
        return pp_err_set(err, PP_PLAN, "plan: %s: must be %.0f..%.0f, got %.40s", k, f->lo, f->hi,
                          v);
      *dst = (int)x;
    }
    s = *end ? end + 1 : end;
  }
  if (!(seen & (1u << 6)))
    return pp_err_set(err, PP_PLAN, "plan: gbs: missing (global batch size, in sequences)");
  *out = p;
  return PP_OK;
}

int spec_plan_format(const spec_plan *p, char *buf, size_t n, pp_err *err) {
  if (p->nstages)
    return pp_err_set(err, PP_INPUT, "plan: a non-uniform plan has no string form; use its JSON");
  size_t len = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < NSTRING; i++) {
    const spec__field *f = &plan_fields[i];
    int v = *(const int *)((const char *)p + f->off);
    if (strcmp(f->name, "dp") == 0 && v == 0) continue; /* unresolved: derived later */
    int w = f->kind == SPEC__ENUM
                ? snprintf(buf + len, n - len, "%s%s=%s", len ? "," : "", f->name, f->names[v])
                : snprintf(buf + len, n - len, "%s%s=%d", len ? "," : "", f->name, v);
    if (w < 0 || (size_t)w >= n - len)
      return pp_err_set(err, PP_INPUT, "plan: string form longer than %zu bytes", n);
    len += (size_t)w;
  }
  return PP_OK;
}

/* ---- JSON forms ------------------------------------------------------------------------- */

static int read_int_array(const json_t *a, const char *o, const char *what, int lo, int hi,
                          int **out, int *n, pp_err *err) {
  if (!json_is_array(a))
    return pp_err_set(err, PP_PLAN, "%s: %s: must be an array of integers", o, what);
  size_t cnt = json_array_size(a);
  if (cnt == 0 || cnt > SPEC_MAX_GPUS)
    return pp_err_set(err, PP_PLAN, "%s: %s: must hold 1..%d entries", o, what, SPEC_MAX_GPUS);
  int *v = malloc(cnt * sizeof *v);
  if (!v) return pp_err_set(err, PP_NOMEM, "%s: out of memory", o);
  for (size_t i = 0; i < cnt; i++) {
    json_t *e = json_array_get(a, i);
    if (!json_is_integer(e) || json_integer_value(e) < lo || json_integer_value(e) > hi) {
      free(v);
      return pp_err_set(err, PP_PLAN, "%s: %s[%zu]: must be an integer in %d..%d", o, what, i, lo,
                        hi);
    }
    v[i] = (int)json_integer_value(e);
  }
  *out = v;
  *n = (int)cnt;
  return PP_OK;
}

static int parse_stages(const json_t *arr, const char *o, spec_plan *p, pp_err *err) {
  if (!json_is_array(arr) || json_array_size(arr) == 0 || json_array_size(arr) > 65536)
    return pp_err_set(err, PP_PLAN, "%s: stages: must be an array of 1..65536 stage objects", o);
  p->nstages = (int)json_array_size(arr);
  p->stages = calloc((size_t)p->nstages, sizeof *p->stages);
  if (!p->stages) {
    p->nstages = 0;
    return pp_err_set(err, PP_NOMEM, "%s: out of memory", o);
  }
  for (int i = 0; i < p->nstages; i++) {
    const json_t *sj = json_array_get(arr, (size_t)i);
    spec_stage *st = &p->stages[i];
    char path[48];
    snprintf(path, sizeof path, "stages[%d].", i);
    if (spec__read(sj, stage_fields, NSTAGE, st, 0, o, path, NULL, err)) {
      err->code = PP_PLAN;
      return err->code;
    }
    int *lr = NULL, nl = 0;
    char what[64];
    snprintf(what, sizeof what, "stages[%d].layers", i);
    if (read_int_array(spec__get(sj, "layers"), o, what, 0, 1 << 20, &lr, &nl, err))
      return err->code;
    if (nl != 2) {
      free(lr);
      return pp_err_set(err, PP_PLAN, "%s: %s: must be [begin, end]", o, what);
    }
    st->layer_begin = lr[0];
    st->layer_end = lr[1];
    free(lr);
    snprintf(what, sizeof what, "stages[%d].gpus", i);
    if (read_int_array(spec__get(sj, "gpus"), o, what, 0, SPEC_MAX_GPUS - 1, &st->gpus,
                       &st->ngpus, err))
      return err->code;
  }
  return PP_OK;
}

static int parse_json(const json_t *j, const char *o, spec_plan *out, pp_err *err) {
  spec_plan p;
  plan_defaults(&p);
  unsigned var = spec__get(j, "stages") ? V_STAGES : V_UNIFORM;
  if (spec__read(j, plan_fields, NPLAN, &p, var, o, "", NULL, err)) {
    err->code = PP_PLAN;
    return err->code;
  }
  if (var == V_STAGES) {
    p.tp = p.pp = p.dp = p.cp = p.ep = p.mbs = p.vpp = 0;
    if (parse_stages(spec__get(j, "stages"), o, &p, err)) {
      spec_plan_clear(&p);
      return err->code;
    }
    p.pp = p.nstages;
  }
  *out = p;
  return PP_OK;
}

int spec_plan_parse(const char *text, spec_plan *out, pp_err *err) {
  memset(out, 0, sizeof *out);
  if (text[0] != '{' && (strchr(text, '=') || !spec__looks_like_file(text)))
    return parse_string(text, out, err);
  json_t *j = NULL;
  const char *origin;
  if (spec__load_json(text, "plan", &j, &origin, err)) {
    if (err->code == PP_INPUT) err->code = PP_PLAN;
    return err->code;
  }
  int rc = parse_json(j, origin, out, err);
  json_decref(j);
  return rc;
}

char *spec_plan_json(const spec_plan *p) {
  json_t *o = json_object();
  unsigned var = p->nstages ? V_STAGES : V_UNIFORM;
  spec__emit(o, plan_fields, NPLAN, p, var);
  /* an unresolved dp (0: derive from the cluster) is left out, as in the string form, so
   * that the JSON parses back to the same plan */
  if (!p->nstages && p->dp == 0) json_object_del(o, "dp");
  if (p->nstages) {
    json_t *arr = json_array();
    for (int i = 0; i < p->nstages; i++) {
      const spec_stage *st = &p->stages[i];
      json_t *so = json_object(), *g = json_array();
      spec__emit(so, stage_fields, NSTAGE, st, 0);
      json_object_set_new(so, "layers", json_pack("[ii]", st->layer_begin, st->layer_end));
      for (int k = 0; k < st->ngpus; k++) json_array_append_new(g, json_integer(st->gpus[k]));
      json_object_set_new(so, "gpus", g);
      json_array_append_new(arr, so);
    }
    json_object_set_new(o, "stages", arr);
  }
  char *s = spec__dump(o);
  json_decref(o);
  return s;
}

void spec_plan_hash(const spec_plan *p, char out[SPEC_HASH_LEN]) {
  char *s = spec_plan_json(p);
  spec_hash(s ? s : "", out);
  free(s);
}

/* ---- derived ---------------------------------------------------------------------------- */

int spec_plan_microbatches(const spec_plan *p) {
  if (p->nstages) return p->microbatches;
  long long per = (long long)p->dp * p->mbs;
  return per > 0 ? (int)(p->gbs / per) : 0;
}

void spec_plan_stage_layers(const spec_plan *p, const spec_model *m, int *counts) {
  int S = p->pp * p->vpp, base = m->layers / S, r = m->layers % S;
  for (int j = 0; j < S; j++) counts[j] = base;
  /* extra layers: middle stages first, then the last, then the first */
  for (int j = 1; j < S - 1 && r > 0; j++, r--) counts[j]++;
  if (r > 0 && S > 1) counts[S - 1]++, r--;
  if (r > 0) counts[0]++;
}

/* ---- rules ------------------------------------------------------------------------------ */

#define RULE(cond, id, ...)                                                         \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      char d_[256];                                                                 \
      snprintf(d_, sizeof d_, __VA_ARGS__);                                         \
      return pp_err_set(err, PP_PLAN, "%s: rule '%s': %s", where, id, d_);          \
    }                                                                               \
  } while (0)

/* Rules a group of degrees must meet whatever the plan's shape. */
static int check_degrees(const char *where, int tp, int cp, int ep, int dp, int sp,
                         const spec_model *m, pp_err *err) {
  RULE(m->heads % tp == 0, "tp divides heads", "tp=%d, heads=%d", tp, m->heads);
  RULE(m->kv_heads % tp == 0, "tp divides kv_heads", "tp=%d, kv_heads=%d", tp, m->kv_heads);
  RULE(m->ffn_hidden % tp == 0, "tp divides ffn_hidden", "tp=%d, ffn_hidden=%d", tp,
       m->ffn_hidden);
  RULE(m->seq_len % (2 * cp) == 0 || cp == 1, "2*cp divides seq_len",
       "cp=%d needs seq_len divisible by %d (load-balanced causal chunks), seq_len=%d", cp, 2 * cp,
       m->seq_len);
  RULE(!sp || (m->seq_len / cp) % tp == 0, "sp: tp divides seq_len/cp",
       "tp=%d, seq_len/cp=%d", tp, m->seq_len / cp);
  RULE(ep == 1 || m->experts > 0, "ep needs an MoE model", "ep=%d, but %s is dense", ep, m->name);
  RULE(m->experts == 0 || m->experts % ep == 0, "ep divides experts", "ep=%d, experts=%d", ep,
       m->experts);
  RULE(dp % ep == 0, "ep divides dp", "ep=%d, dp=%d (experts are sharded over data-parallel ranks)",
       ep, dp);
  return PP_OK;
}

static int check_uniform(const spec_plan *p, const spec_model *m, const spec_cluster *c,
                         pp_err *err) {
  const char *where = "plan";
  long long prod = (long long)p->tp * p->pp * p->dp * p->cp;
  RULE(prod == c->gpus, "tp*pp*dp*cp = gpus", "%d*%d*%d*%d = %lld, cluster %s has %d GPUs", p->tp,
       p->pp, p->dp, p->cp, prod, c->name, c->gpus);
  if (check_degrees(where, p->tp, p->cp, p->ep, p->dp, p->sp, m, err)) return err->code;
  long long per = (long long)p->dp * p->mbs;
  RULE(p->gbs % per == 0, "dp*mbs divides gbs", "dp*mbs = %d*%d = %lld, gbs=%d", p->dp, p->mbs,
       per, p->gbs);
  RULE((long long)p->pp * p->vpp <= m->layers, "pp*vpp <= layers",
       "pp*vpp = %d*%d stages for %d layers", p->pp, p->vpp, m->layers);
  RULE(p->vpp == 1 || p->schedule == SPEC_SCHED_INTERLEAVED, "vpp > 1 needs interleaved 1f1b",
       "vpp=%d with schedule=%s", p->vpp, spec_schedule_name(p->schedule));
  RULE(p->schedule != SPEC_SCHED_INTERLEAVED || p->vpp > 1, "interleaved needs vpp > 1",
       "vpp=%d", p->vpp);
  RULE(p->schedule != SPEC_SCHED_INTERLEAVED || p->pp > 1, "interleaved needs pp > 1", "pp=%d",
       p->pp);
  int mb = spec_plan_microbatches(p);
  RULE(p->schedule != SPEC_SCHED_INTERLEAVED || mb % p->pp == 0,
       "pp divides microbatches (interleaved)", "%d microbatches, pp=%d", mb, p->pp);
  RULE(p->zero < 2 || p->pp == 1, "zero >= 2 needs pp = 1",
       "zero=%d shards gradients, which pipeline parallelism (pp=%d) cannot accumulate", p->zero,
       p->pp);
  return PP_OK;
}

static int check_stages(const spec_plan *p, const spec_model *m, const spec_cluster *c,
                        pp_err *err) {
  const char *where = "plan";
  RULE(p->schedule != SPEC_SCHED_INTERLEAVED, "interleaved needs a uniform plan",
       "%d explicit stages", p->nstages);
  RULE(p->zero < 2 || p->nstages == 1, "zero >= 2 needs pp = 1", "zero=%d with %d stages",
       p->zero, p->nstages);
  RULE(p->gbs % p->microbatches == 0, "microbatches divides gbs", "gbs=%d, microbatches=%d",
       p->gbs, p->microbatches);
  int samples = p->gbs / p->microbatches;
  unsigned char *used = calloc((size_t)c->gpus, 1);
  if (!used) return pp_err_set(err, PP_NOMEM, "plan: out of memory");
  int rc = PP_OK, next = 0;
  for (int i = 0; i < p->nstages && rc == PP_OK; i++) {
    const spec_stage *st = &p->stages[i];
    char w[32];
    snprintf(w, sizeof w, "plan: stage %d", i);
    where = w;
#undef RULE
#define RULE(cond, id, ...)                                                          \
  if (!(cond)) {                                                                     \
    char d_[256];                                                                    \
    snprintf(d_, sizeof d_, __VA_ARGS__);                                            \
    rc = pp_err_set(err, PP_PLAN, "%s: rule '%s': %s", where, id, d_);               \
    break;                                                                           \
  }
    RULE(st->layer_begin == next && st->layer_end > st->layer_begin,
         "stages cover the layers in order", "layers [%d, %d), expected to begin at %d",
         st->layer_begin, st->layer_end, next);
    RULE(st->layer_end <= m->layers, "stages cover the layers in order",
         "layers [%d, %d) beyond the model's %d", st->layer_begin, st->layer_end, m->layers);
    next = st->layer_end;
    long long need = (long long)st->tp * st->dp * st->cp;
    RULE(st->ngpus == need, "stage gpus = tp*dp*cp", "%d GPUs for tp=%d, dp=%d, cp=%d",
         st->ngpus, st->tp, st->dp, st->cp);
    RULE(samples % st->dp == 0, "stage dp divides the microbatch",
         "dp=%d, %d sequences per microbatch", st->dp, samples);
    for (int k = 0; k < st->ngpus; k++) {
      int g = st->gpus[k];
      RULE(g < c->gpus, "gpu ids < gpus", "gpu %d, cluster %s has %d GPUs", g, c->name, c->gpus);
      RULE(!used[g], "a GPU serves one stage", "gpu %d is used twice", g);
      used[g] = 1;
    }
    if (rc) break;
    if (check_degrees(where, st->tp, st->cp, st->ep, st->dp, p->sp, m, err)) rc = err->code;
  }
  free(used);
  if (rc) return rc;
  where = "plan";
  if (next != m->layers)
    return pp_err_set(err, PP_PLAN, "%s: rule 'stages cover the layers in order': they end at %d of %d layers",
                      where, next, m->layers);
  return PP_OK;
}
#undef RULE

int spec_plan_validate(const spec_plan *p, const spec_model *m, const spec_cluster *c,
                       pp_err *err) {
  if (p->nstages) return check_stages(p, m, c, err);
  if (p->dp < 1)
    return pp_err_set(err, PP_PLAN, "plan: dp: not resolved (call spec_plan_resolve)");
  return check_uniform(p, m, c, err);
}

int spec_plan_resolve(spec_plan *p, const spec_model *m, const spec_cluster *c, pp_err *err) {
  if (!p->nstages) {
    if (p->dp == 0) {
      long long mp = (long long)p->tp * p->pp * p->cp;
      if (mp > c->gpus || c->gpus % mp)
        return pp_err_set(err, PP_PLAN,
                          "plan: rule 'tp*pp*dp*cp = gpus': tp*pp*cp = %lld does not divide the "
                          "%d GPUs of %s",
                          mp, c->gpus, c->name);
      p->dp = (int)(c->gpus / mp);
    }
    if (p->tp == 1) p->sp = 0;
    if (p->schedule == SPEC_SCHED_1F1B && p->vpp > 1) p->schedule = SPEC_SCHED_INTERLEAVED;
  }
  return spec_plan_validate(p, m, c, err);
}
