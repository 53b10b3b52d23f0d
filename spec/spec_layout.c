/* The layout of a plan: each GPU's pipeline stage, its TP/CP/DP/EP/EDP groups and pipeline
 * neighbours, and the order of a pipeline rank's forward and backward steps. The simulator
 * and the backend both lower plans from it, so they agree on who talks to whom. */
#include <stdlib.h>
#include <string.h>

#include "podplan/spec.h"

static const char *const grp_names[SPEC_NGRPS] = {"tp", "cp", "dp", "ep", "edp"};
const char *spec_grp_name(spec_grp k) { return (unsigned)k < SPEC_NGRPS ? grp_names[k] : "?"; }

int spec_schedule_warmup(spec_schedule s, int P, int r, int m, int v) {
  int total = m * v;
  if (s == SPEC_SCHED_GPIPE) return total;
  int warm = v == 1 ? P - r - 1 : (P - r - 1) * 2 + (v - 1) * P;
  return warm > total ? total : warm;
}

int spec_schedule_steps(spec_schedule s, int P, int r, int m, int v, spec_step *out) {
  int total = m * v, n = 0;
  if (s == SPEC_SCHED_GPIPE) {
    for (int i = 0; i < m; i++) out[n++] = (spec_step){1, i, 0};
    for (int i = 0; i < m; i++) out[n++] = (spec_step){0, i, 0};
    return n;
  }
  int warm = spec_schedule_warmup(s, P, r, m, v);
  /* k-th forward (backward) of the rank: microbatches go in groups of P per chunk */
#define FW(k) (spec_step){1, (k) / (P * v) * P + (k) % P, v == 1 ? 0 : (k) / P % v}
#define BW(k) (spec_step){0, (k) / (P * v) * P + (k) % P, v == 1 ? 0 : v - 1 - (k) / P % v}
  for (int k = 0; k < warm; k++) out[n++] = FW(k);
  for (int k = 0; k < total - warm; k++) out[n++] = FW(warm + k), out[n++] = BW(k);
  for (int k = total - warm; k < total; k++) out[n++] = BW(k);
#undef FW
#undef BW
  return n;
}

void spec_layout_free(spec_layout *l) {
  if (!l) return;
  for (int i = 0; i < l->ngroups; i++) free(l->groups[i].gpus);
  for (int i = 0; i < l->nslots; i++) free(l->slots[i].prev), free(l->slots[i].next);
  free(l->groups), free(l->slots), free(l->slot_of_gpu), free(l->layers);
  memset(l, 0, sizeof *l);
}

typedef struct build {
  spec_layout *l;
  int capgroups;
  pp_err *err;
} build;

static int add_group(build *b, spec_grp kind, int stage, const int *gpus, int n) {
  spec_layout *l = b->l;
  if (l->ngroups == b->capgroups) {
    int cap = b->capgroups ? 2 * b->capgroups : 64;
    spec_group *g = realloc(l->groups, (size_t)cap * sizeof *g);
    if (!g) return -pp_err_set(b->err, PP_NOMEM, "layout: out of memory");
    l->groups = g;
    b->capgroups = cap;
  }
  spec_group *g = &l->groups[l->ngroups];
  g->kind = kind, g->stage = stage, g->n = n;
  g->gpus = malloc((size_t)n * sizeof *g->gpus);
  if (!g->gpus) return -pp_err_set(b->err, PP_NOMEM, "layout: out of memory");
  memcpy(g->gpus, gpus, (size_t)n * sizeof *gpus);
  for (int q = 0; q < n; q++) l->slots[l->slot_of_gpu[gpus[q]]].group[kind] = l->ngroups;
  return l->ngroups++;
}

/* Rank k of a stage of tp*cp*dp ranks sits at t = k % tp, c = k / tp % cp, d = k / (tp*cp);
 * dc = c + cp*d runs over the data and context dimensions together. Megatron-Core's order:
 * TP groups are tp consecutive ranks; CP groups the cp ranks of one (t, d); DP groups (which
 * reduce gradients, so they span cp too) the dp*cp ranks of one t; EP groups ep consecutive
 * dc of one t (Megatron-Core's expert rank order tp-ep-dp over the same ranks); EDP groups
 * the same EP index across the EP groups of one t. */
void spec_grp_rules(int tp, int cp, int dp, int ep, spec_grp_rule out[SPEC_NGRPS]) {
  out[SPEC_GRP_TP] = (spec_grp_rule){tp, 1};
  out[SPEC_GRP_CP] = (spec_grp_rule){cp, tp};
  out[SPEC_GRP_DP] = (spec_grp_rule){dp * cp, tp};
  out[SPEC_GRP_EP] = (spec_grp_rule){ep, tp};
  out[SPEC_GRP_EDP] = (spec_grp_rule){dp * cp / ep, ep * tp};
}

int spec_grp_leads(spec_grp kind, int k, int tp, int cp, int ep) {
  int t = k % tp, c = k / tp % cp, dc = k / tp;
  const int leads[SPEC_NGRPS] = {
      [SPEC_GRP_TP] = t == 0,
      [SPEC_GRP_CP] = c == 0,
      [SPEC_GRP_DP] = dc == 0,
      [SPEC_GRP_EP] = dc % ep == 0,
      [SPEC_GRP_EDP] = dc < ep,
  };
  return (unsigned)kind < SPEC_NGRPS && leads[kind];
}

int spec_grp_members(const spec_grp_rule *r, const int *G, int first, int *out) {
  for (int q = 0; q < r->count; q++) out[q] = G[first + q * r->stride];
  return r->count;
}

/* The groups of one stage whose GPUs are G[0..tp*cp*dp) in rank order (tp fastest). */
static int stage_groups(build *b, int stage, const int *G, int tp, int cp, int dp, int ep,
                        int *tmp) {
  spec_grp_rule rules[SPEC_NGRPS];
  spec_grp_rules(tp, cp, dp, ep, rules);
  for (int k = 0; k < tp * cp * dp; k++)
    for (int kind = 0; kind < SPEC_NGRPS; kind++) {
      if (!spec_grp_leads(kind, k, tp, cp, ep)) continue;
      int n = spec_grp_members(&rules[kind], G, k, tmp);
      if (add_group(b, kind, stage, tmp, n) < 0) return b->err->code;
    }
  return PP_OK;
}

static int set_peers(spec_slot *s, int prev, int nprev, const int *pv, int next, int nnext,
                     const int *nx, pp_err *err) {
  s->nprev = nprev, s->nnext = nnext, s->prev_split = prev, s->next_split = next;
  s->prev = nprev ? malloc((size_t)nprev * sizeof *s->prev) : NULL;
  s->next = nnext ? malloc((size_t)nnext * sizeof *s->next) : NULL;
  if ((nprev && !s->prev) || (nnext && !s->next))
    return pp_err_set(err, PP_NOMEM, "layout: out of memory");
  if (nprev) memcpy(s->prev, pv, (size_t)nprev * sizeof *pv);
  if (nnext) memcpy(s->next, nx, (size_t)nnext * sizeof *nx);
  return PP_OK;
}

static int build_uniform(build *b, const spec_plan *p, const spec_model *m, int *tmp) {
  spec_layout *l = b->l;
  int tp = p->tp, cp = p->cp, dp = p->dp, P = p->pp, per = tp * cp * dp;
  l->nstages = P, l->vpp = p->vpp, l->microbatches = spec_plan_microbatches(p);
  l->nslots = per * P;
  if (per < 1 || P < 1 || l->nslots > l->ngpus)
    return pp_err_set(b->err, PP_PLAN, "layout: %d x %d ranks on %d GPUs", per, P, l->ngpus);
  l->layers = calloc((size_t)P * p->vpp, sizeof *l->layers);
  l->slots = calloc((size_t)l->nslots, sizeof *l->slots);
  if (!l->layers || !l->slots) return pp_err_set(b->err, PP_NOMEM, "layout: out of memory");
  spec_plan_stage_layers(p, m, l->layers);
  for (int g = 0; g < l->nslots; g++) {
    l->slots[g].gpu = g, l->slots[g].stage = g / per, l->slots[g].local = g % per;
    l->slot_of_gpu[g] = g;
  }
  for (int r = 0; r < P; r++) {
    for (int k = 0; k < per; k++) tmp[l->ngpus + k] = r * per + k;
    if (stage_groups(b, r, tmp + l->ngpus, tp, cp, dp, p->ep, tmp)) return b->err->code;
  }
  /* neighbours: the same (tp, cp, dp) index one stage away; interleaving closes the ring */
  for (int g = 0; g < l->nslots && P > 1; g++) {
    int r = g / per, up = r > 0 ? g - per : g + (P - 1) * per;
    int dn = r < P - 1 ? g + per : g - (P - 1) * per;
    int ring = p->vpp > 1;
    if (set_peers(&l->slots[g], 1, r > 0 || ring, &up, 1, r < P - 1 || ring, &dn, b->err))
      return b->err->code;
  }
  return PP_OK;
}

/* Stage i hands a microbatch's activations to stage i+1 as N = max(n_i, n_i+1) messages
 * of 1/N each, message j from member j mod n_i to member j mod n_i+1 (resharding between
 * different layouts). */
static int build_nonuniform(build *b, const spec_plan *p, int *tmp) {
  spec_layout *l = b->l;
  int P = p->nstages;
  l->nstages = P, l->vpp = 1, l->microbatches = p->microbatches;
  for (int i = 0; i < P; i++) l->nslots += p->stages[i].ngpus;
  if (P < 1 || l->nslots < 1 || l->nslots > l->ngpus)
    return pp_err_set(b->err, PP_PLAN, "layout: %d stages on %d GPUs of %d", P, l->nslots,
                      l->ngpus);
  l->layers = calloc((size_t)P, sizeof *l->layers);
  l->slots = calloc((size_t)l->nslots, sizeof *l->slots);
  if (!l->layers || !l->slots) return pp_err_set(b->err, PP_NOMEM, "layout: out of memory");
  for (int i = 0, at = 0; i < P; i++) {
    const spec_stage *st = &p->stages[i];
    l->layers[i] = st->layer_end - st->layer_begin;
    for (int k = 0; k < st->ngpus; k++, at++) {
      l->slots[at].gpu = st->gpus[k], l->slots[at].stage = i, l->slots[at].local = k;
      l->slot_of_gpu[st->gpus[k]] = at;
    }
  }
  for (int i = 0; i < P; i++) {
    const spec_stage *st = &p->stages[i];
    if (stage_groups(b, i, st->gpus, st->tp, st->cp, st->dp, st->ep, tmp)) return b->err->code;
  }
  int *pl = tmp, *nl = tmp + l->ngpus;
  for (int i = 0, at = 0; i < P; i++) {
    const spec_stage *st = &p->stages[i];
    const spec_stage *prv = i > 0 ? &p->stages[i - 1] : NULL;
    const spec_stage *nxt = i + 1 < P ? &p->stages[i + 1] : NULL;
    for (int k = 0; k < st->ngpus; k++, at++) {
      int np = 0, nn = 0, Np = 1, Nn = 1;
      if (prv) {
        Np = prv->ngpus > st->ngpus ? prv->ngpus : st->ngpus;
        for (int j = 0; j < Np; j++)
          if (j % st->ngpus == k) pl[np++] = prv->gpus[j % prv->ngpus];
      }
      if (nxt) {
        Nn = nxt->ngpus > st->ngpus ? nxt->ngpus : st->ngpus;
        for (int j = 0; j < Nn; j++)
          if (j % st->ngpus == k) nl[nn++] = nxt->gpus[j % nxt->ngpus];
      }
      if (set_peers(&l->slots[at], Np, np, pl, Nn, nn, nl, b->err)) return b->err->code;
    }
  }
  return PP_OK;
}

int spec_layout_build(const spec_plan *p, const spec_model *m, int gpus, spec_layout *out,
                      pp_err *err) {
  memset(out, 0, sizeof *out);
  out->ngpus = gpus;
  build b = {out, 0, err};
  out->slot_of_gpu = malloc((size_t)gpus * sizeof *out->slot_of_gpu);
  int *tmp = malloc((size_t)2 * gpus * sizeof *tmp);
  int rc = PP_OK;
  if (!out->slot_of_gpu || !tmp) {
    rc = pp_err_set(err, PP_NOMEM, "layout: out of memory");
  } else {
    for (int g = 0; g < gpus; g++) out->slot_of_gpu[g] = -1;
    rc = p->nstages ? build_nonuniform(&b, p, tmp) : build_uniform(&b, p, m, tmp);
  }
  free(tmp);
  if (rc) spec_layout_free(out);
  return rc;
}
