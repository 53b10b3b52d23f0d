/* Lowering: a plan becomes one program per rank. Who talks to whom and the order of the
 * pipeline steps come from the plan's layout (spec_layout, shared with the simulator); the
 * ops of every layer, the embedding and the head come from the cost model (cm_part_ops), so
 * the shapes run are the shapes scored. The data-parallel tail (gradient reduction, optimizer,
 * parameter all-gather under ZeRO) follows the last backward; under ZeRO-3 the collectives
 * of the cost model's schedule (cm_zero3_plan_sched: each module's gathers before it, the
 * gradient buckets, the last after the layers' backward) in its order, and the tail keeps only
 * the optimizer. Nothing is overlapped, as on one stream. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "be_int.h"

static const char *const op_names[BE_NOPKINDS] = {"gemm", "attn", "mem",    "coll",
                                                  "send", "recv", "barrier"};
static const char *const ev_names[BE_NEVS] = {"forward", "backward", "tp",  "cp",
                                              "ep",      "p2p",      "dp", "optimizer"};
const char *be_op_kind_name(be_op_kind k) { return (unsigned)k < BE_NOPKINDS ? op_names[k] : "?"; }
const char *be_ev_name(be_ev e) { return (unsigned)e < BE_NEVS ? ev_names[e] : "?"; }

void be_plan_free(be_plan *bp) {
  if (!bp) return;
  for (int i = 0; i < bp->nranks; i++) free(bp->progs[i].ops), free(bp->progs[i].peers);
  for (int i = 0; i < bp->ngroups; i++) free(bp->groups[i].ranks);
  free(bp->progs), free(bp->groups);
  free(bp);
}

int be_group_stride(const be_plan *bp, int grp, const spec_cluster *c) {
  const be_group *G = &bp->groups[grp];
  int gpn = c->gpus_per_node, dom = c->nvlink.domain_gpus > gpn ? c->nvlink.domain_gpus : gpn;
  if (G->n < 1 || gpn < 1) return 0;
  int g0 = bp->progs[G->ranks[0]].gpu;
  int stride = G->n > 1 ? bp->progs[G->ranks[1]].gpu - g0 : 1;
  if (stride < 1) return 0;
  for (int k = 1; k < G->n; k++)
    if (bp->progs[G->ranks[k]].gpu != g0 + k * stride) return 0;
  int in_node = g0 % gpn + (G->n - 1) * stride < gpn;
  return g0 % dom == 0 || in_node ? stride : 0;
}

/* ---- the model and plan as run ------------------------------------------------------------ */

static int shrink_model(spec_model *m, int w, pp_err *err) {
  if (w <= 1) return PP_OK;
  struct {
    const char *field;
    int *v;
  } dims[] = {{"hidden", &m->hidden}, {"heads", &m->heads}, {"kv_heads", &m->kv_heads},
              {"ffn_hidden", &m->ffn_hidden}};
  for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
    if (*dims[i].v % w)
      return pp_err_set(err, PP_INPUT, "--shrink %d: %s %d is not divisible by %d", w,
                        dims[i].field, *dims[i].v, w);
    *dims[i].v /= w;
  }
  m->vocab = (m->vocab + w - 1) / w;
  return PP_OK;
}

/* Non-uniform plans at reduced depth: each stage keeps its share of the layers (>= 1). */
static int rescale_stages(spec_plan *p, int full, int L, pp_err *err) {
  if (L < p->nstages)
    return pp_err_set(err, PP_INPUT, "--layers %d: the plan has %d stages", L, p->nstages);
  int at = 0;
  for (int i = 0; i < p->nstages; i++) {
    spec_stage *st = &p->stages[i];
    int left = p->nstages - i - 1;
    int n = (int)lround((double)(st->layer_end - st->layer_begin) * L / full);
    if (n < 1) n = 1;
    if (n > L - at - left) n = L - at - left;
    if (i == p->nstages - 1) n = L - at;
    st->layer_begin = at, st->layer_end = at + n;
    at += n;
  }
  return PP_OK;
}

/* ---- programs ----------------------------------------------------------------------------- */

typedef struct lower {
  be_plan *bp;
  cm_model *cm;
  const spec_layout *lay;
  const spec_plan *p;
  pp_err *err;
  int rc;
} lower;

static int iceil(double x) { return x < 1 ? 1 : (int)ceil(x - 1e-9); }

static void push(lower *L, be_prog *pg, be_op op) {
  if (L->rc) return;
  if (pg->nops == pg->cap) {
    int cap = pg->cap ? 2 * pg->cap : 256;
    be_op *o = realloc(pg->ops, (size_t)cap * sizeof *o);
    if (!o) {
      L->rc = pp_err_set(L->err, PP_NOMEM, "backend: out of memory (%d ops)", cap);
      return;
    }
    pg->ops = o, pg->cap = cap;
  }
  be_plan *bp = L->bp;
  double mk = (double)op.batch * op.m * op.k, kn = (double)op.batch * op.k * op.n,
         mn = (double)op.batch * op.m * op.n;
  /* GEMM: A, B and C in the operand buffers. Attention: Q and O (m x k), K and V (n x k) in
   * them; only its score block (m x n) in the attention buffer */
  if (op.kind == BE_OP_GEMM) bp->max_gemm_elems = fmax(bp->max_gemm_elems, fmax(mk, fmax(kn, mn)));
  if (op.kind == BE_OP_ATTN) {
    bp->max_gemm_elems = fmax(bp->max_gemm_elems, fmax(mk, (double)op.batch * op.n * op.k));
    bp->max_attn_elems = fmax(bp->max_attn_elems, mn);
  }
  if ((op.kind == BE_OP_COLL || op.kind == BE_OP_SEND || op.kind == BE_OP_RECV) &&
      op.bytes > bp->max_msg_bytes)
    bp->max_msg_bytes = op.bytes;
  pg->ops[pg->nops++] = op;
}

static const be_ev coll_ev[SPEC_NGRPS] = {BE_EV_TP, BE_EV_CP, BE_EV_DP, BE_EV_EP, BE_EV_DP};

/* A collective of microbatch mb (-1: the tail) on a group (none when of one rank). */
static void coll_mb(lower *L, be_prog *pg, be_ev ev, const char *name, int group, cm_coll c,
                    double bytes, int mb, int chunk) {
  if (group < 0 || L->lay->groups[group].n <= 1 || bytes <= 0) return;
  push(L, pg, (be_op){.kind = BE_OP_COLL, .ev = ev, .name = name, .mb = mb, .chunk = chunk,
                      .coll = c, .bytes = bytes, .group = group});
}

static void coll(lower *L, be_prog *pg, be_ev ev, const char *name, int group, cm_coll c,
                 double bytes) {
  coll_mb(L, pg, ev, name, group, c, bytes, -1, -1);
}

/* ZeRO-3's collectives of module t of the cost model's schedule (cm_zero3_plan_sched): its
 * gathers, then the gradient bucket its start reduces; on one stream, nothing prefetched. */
static void zero3_mod(lower *L, be_prog *pg, const spec_slot *sl, const cm_z3_sched *z, long t,
                      int mb, int chunk) {
  const cm_z3_mod *m = &z->mods[t];
  for (int c = 0; c < m->gathers; c++)
    coll_mb(L, pg, BE_EV_DP, "zero3_gather", sl->group[m->group], CM_ALL_GATHER, m->gather_bytes,
            mb, chunk);
  coll_mb(L, pg, BE_EV_DP, "zero3_reduce", sl->group[SPEC_GRP_DP], z->reduce, m->reduce_bytes, mb,
          chunk);
}

/* The cost model's ops of one part, as this rank's ops; under ZeRO-3 (z, a layer's pass whose
 * modules begin at t0 in the schedule) each module's collectives before the ops where its
 * share of the pass's compute begins. */
static void part(lower *L, be_prog *pg, const spec_slot *sl, cm_part what, int fwd, int mb,
                 int chunk, const int deg[4], int mbs, spec_recompute rc, const cm_z3_sched *z,
                 long t0) {
  cm_lop ops[CM_LOPS_MAX];
  int n = cm_part_ops(L->cm, what, deg[0], deg[1], deg[2], mbs, L->p->sp, rc, fwd, ops);
  be_ev ev = fwd ? BE_EV_FORWARD : BE_EV_BACKWARD;
  int nm = z && z->mods && what == CM_PART_LAYER ? (fwd ? z->nu : z->nb) : 0, k = 0;
  double total = 0, cum = 0, share = 0, comp = 0;
  for (int i = 0; i < n && nm; i++) total += cm_lop_time(L->cm, &ops[i]);
  for (int j = 0; j < nm; j++) comp += z->mods[t0 + j].comp_s;
  for (int i = 0; i < n; i++) {
    const cm_lop *o = &ops[i];
    for (; k < nm && share <= cum + 1e-12 * total; k++) { /* modules that begin here */
      zero3_mod(L, pg, sl, z, t0 + k, mb, chunk);
      share += comp > 0 ? z->mods[t0 + k].comp_s / comp * total : 0;
    }
    cum += cm_lop_time(L->cm, o);
    be_op b = {.ev = ev, .name = o->name, .mb = mb, .chunk = chunk, .recompute = o->recompute};
    switch (o->kind) {
    case CM_LOP_GEMM:
    case CM_LOP_ATTN:
      b.kind = o->kind == CM_LOP_GEMM ? BE_OP_GEMM : BE_OP_ATTN;
      b.m = iceil(o->m), b.n = iceil(o->n), b.k = iceil(o->k), b.batch = iceil(o->batch);
      b.causal = o->causal;
      break;
    case CM_LOP_MEM:
      b.kind = BE_OP_MEM, b.bytes = o->bytes;
      break;
    case CM_LOP_COLL:
      if (L->lay->groups[sl->group[o->group]].n <= 1) continue; /* a group of one: no-op */
      b.kind = BE_OP_COLL, b.ev = coll_ev[o->group], b.coll = o->coll, b.bytes = o->bytes;
      b.group = sl->group[o->group];
      break;
    }
    push(L, pg, b);
  }
  for (; k < nm; k++) zero3_mod(L, pg, sl, z, t0 + k, mb, chunk);
}

/* The open p2p batch of a program. */
typedef struct batch {
  int n;         /* sends and receives in it */
  double recv_b; /* bytes of its receives (they land side by side in the receive buffer) */
} batch;

/* One message per peer of gpus[0..n), into the open batch. */
static void p2p(lower *L, be_prog *pg, batch *b, be_op_kind k, const int *gpus, int n,
                double bytes, int mb, int chunk) {
  for (int i = 0; i < n; i++) {
    push(L, pg, (be_op){.kind = k, .ev = BE_EV_P2P, .name = k == BE_OP_SEND ? "send" : "recv",
                        .mb = mb, .chunk = chunk, .bytes = bytes,
                        .peer = L->lay->slot_of_gpu[gpus[i]]});
    b->n++;
    if (k == BE_OP_RECV) b->recv_b += bytes;
  }
}

/* Closes the open batch (none open: nothing): its last op gets batch_end. */
static void batch_end(lower *L, be_prog *pg, batch *b) {
  if (L->rc || !b->n) return;
  pg->ops[pg->nops - 1].batch_end = 1;
  if (b->recv_b > L->bp->max_msg_bytes) L->bp->max_msg_bytes = b->recv_b;
  *b = (batch){0, 0};
}


/* One rank's program: its schedule, then the data-parallel tail. */
static void program(lower *L, int slot, spec_step *steps) {
  const spec_layout *lay = L->lay;
  const spec_plan *p = L->p;
  const spec_model *m = &L->bp->model;
  const spec_slot *sl = &lay->slots[slot];
  be_prog *pg = &L->bp->progs[slot];
  pg->rank = slot, pg->gpu = sl->gpu, pg->stage = sl->stage;
  int uni = p->nstages == 0, P = lay->nstages, v = lay->vpp, r = sl->stage, nvs = P * v;
  const spec_stage *st = uni ? NULL : &p->stages[r];
  int deg[4] = {uni ? p->tp : st->tp, uni ? p->cp : st->cp, uni ? p->ep : st->ep,
                uni ? p->dp : st->dp};
  int mbs = uni ? p->mbs : p->gbs / p->microbatches / st->dp;
  spec_recompute rc = uni ? p->recompute : st->recompute;
  cm_layer_profile pr;
  if (cm_layer_profile_get(L->cm, deg[0], deg[1], deg[2], deg[3], mbs, p->sp && deg[0] > 1, rc,
                           &pr)) {
    L->rc = pp_err_set(L->err, PP_PLAN, "backend: stage %d has no layer profile", r);
    return;
  }
  double act = (double)p->gbs / lay->microbatches * m->seq_len * m->hidden * 2;
  double in_b = uni ? pr.p2p_bytes : act / sl->prev_split;
  double out_b = uni ? pr.p2p_bytes : act / sl->next_split;
  int n = spec_schedule_steps(p->schedule, P, r, lay->microbatches, v, steps);
  /* interleaved: warm-up forwards, then `steady` forward-backward pairs */
  int warm = spec_schedule_warmup(p->schedule, P, r, lay->microbatches, v);
  int steady = v > 1 ? lay->microbatches * v - warm : 0;
  /* Units of the schedule and one p2p batch after each: the sends of what the unit produced
   * and the receives of what the next unit needs (a batch before the first unit receives its
   * inputs). Megatron-LM's p2p order: interleaved runs warm-up forwards, steady forward +
   * backward pairs and cool-down backwards as units (send_forward_recv_forward, then
   * send_forward_backward_recv_forward_backward, then send_backward_recv_backward); 1F1B and
   * GPipe run every step as a unit (send_forward_recv_backward, send_backward_recv_forward).
   * When an interleaved rank has no steady pair, the sends of its last forward and the
   * receive of its first backward are two batches, as there (send_forward_recv_forward, then
   * recv_backward). */
  int pb = 0, pe = 0; /* the previous unit: steps [pb, pe) */
  cm_z3_sched z = {0}; /* ZeRO-3's schedule for a chunk of z.layers layers */
  for (int i = 0; !L->rc;) {
    int j = i == n ? n : i + 1;
    if (i >= warm && i < warm + 2 * steady && (i - warm) % 2 == 0) j = i + 2;
    int split = v > 1 && steady == 0 && pe == warm && i == warm && i < n;
    batch b = {0, 0};
    for (int k = pb; k < pe; k++) { /* sends of the previous unit */
      spec_step s = steps[k];
      int vs = s.chunk * P + r;
      if (s.fwd && vs != nvs - 1) p2p(L, pg, &b, BE_OP_SEND, sl->next, sl->nnext, out_b, s.mb, s.chunk);
      if (!s.fwd && vs != 0) p2p(L, pg, &b, BE_OP_SEND, sl->prev, sl->nprev, in_b, s.mb, s.chunk);
    }
    for (int k = i; k < j; k++) { /* receives of this one */
      spec_step s = steps[k];
      int vs = s.chunk * P + r;
      if (split && k == i) batch_end(L, pg, &b);
      if (s.fwd && vs != 0) p2p(L, pg, &b, BE_OP_RECV, sl->prev, sl->nprev, in_b, s.mb, s.chunk);
      if (!s.fwd && vs != nvs - 1) p2p(L, pg, &b, BE_OP_RECV, sl->next, sl->nnext, out_b, s.mb, s.chunk);
    }
    batch_end(L, pg, &b);
    if (i == n) break;
    for (int k = i; k < j; k++) { /* the unit's compute */
      spec_step s = steps[k];
      int vs = s.chunk * P + r, first = vs == 0, last = vs == nvs - 1;
      int layers = lay->layers[vs]; /* non-uniform: vs == r */
      cm_z3_sched *zs = NULL;
      if (p->zero >= 3 && layers > 0 && !L->rc) { /* ZeRO-3: the cost model's schedule */
        if (z.layers != layers) {
          cm_zero3_sched_free(&z);
          L->rc = cm_zero3_plan_sched(L->cm, p, r, layers, &z, L->err);
        }
        zs = &z;
      }
      long nf = zs ? (long)layers * z.nu : 0;
      if (s.fwd) {
        if (first) part(L, pg, sl, CM_PART_EMBED, 1, s.mb, s.chunk, deg, mbs, rc, NULL, 0);
        for (int l = 0; l < layers; l++)
          part(L, pg, sl, CM_PART_LAYER, 1, s.mb, s.chunk, deg, mbs, rc, zs, l * (long)z.nu);
        if (last) part(L, pg, sl, CM_PART_HEAD, 1, s.mb, s.chunk, deg, mbs, rc, NULL, 0);
      } else {
        if (last) part(L, pg, sl, CM_PART_HEAD, 0, s.mb, s.chunk, deg, mbs, rc, NULL, 0);
        for (int l = 0; l < layers; l++)
          part(L, pg, sl, CM_PART_LAYER, 0, s.mb, s.chunk, deg, mbs, rc, zs, nf + l * (long)z.nb);
        if (zs) { /* the last bucket, after the layers' backward */
          coll_mb(L, pg, BE_EV_DP, "zero3_reduce", sl->group[SPEC_GRP_DP], z.reduce, z.last_bytes,
                  s.mb, s.chunk);
        }
        if (first) part(L, pg, sl, CM_PART_EMBED, 0, s.mb, s.chunk, deg, mbs, rc, NULL, 0);
      }
    }
    pb = i, pe = j, i = j;
  }
  /* data-parallel tail: the parameters this rank holds, their gradients reduced over DP
   * (experts over expert-DP), Adam on the shard, the shards gathered back under ZeRO */
  cm_tail tail;
  cm_dp_tail(L->cm, &pr, lay->layers, r, P, nvs, deg[1] * deg[3], deg[2], p->zero >= 1, &tail);
  cm_zero3_sched_free(&z);
  int z3 = p->zero >= 3; /* ZeRO-3 reduced and gathered per module */
  if (!z3) {
    coll(L, pg, BE_EV_DP, "grads", sl->group[SPEC_GRP_DP], tail.reduce, tail.dense_grad_bytes);
    coll(L, pg, BE_EV_DP, "grads", sl->group[SPEC_GRP_EDP], tail.reduce, tail.expert_grad_bytes);
  }
  push(L, pg, (be_op){.kind = BE_OP_MEM, .ev = BE_EV_OPTIMIZER, .name = "adam", .mb = -1,
                      .chunk = -1, .bytes = CM_ADAM_BYTES_PER_PARAM * tail.shard_params});
  if (!z3)
    coll(L, pg, BE_EV_DP, "params", sl->group[SPEC_GRP_DP], CM_ALL_GATHER, tail.gather_bytes);
}

/* The ranks a program sends to or receives from, ascending, without itself. */
static void peers(lower *L, be_prog *pg, int nranks) {
  if (L->rc) return;
  unsigned char *is = calloc((size_t)nranks, 1);
  if (!is) {
    L->rc = pp_err_set(L->err, PP_NOMEM, "backend: out of memory");
    return;
  }
  int n = 0;
  for (int i = 0; i < pg->nops; i++) {
    const be_op *o = &pg->ops[i];
    if ((o->kind == BE_OP_SEND || o->kind == BE_OP_RECV) && o->peer != pg->rank && !is[o->peer])
      is[o->peer] = 1, n++;
  }
  pg->peers = malloc((size_t)(n ? n : 1) * sizeof *pg->peers);
  if (!pg->peers) L->rc = pp_err_set(L->err, PP_NOMEM, "backend: out of memory");
  for (int r = 0; r < nranks && pg->peers; r++)
    if (is[r]) pg->peers[pg->npeers++] = r;
  free(is);
}

void be_cm_params(const spec_model *m, cm_params *p) {
  cm_params_default(m, p);
  p->overlap_grad_reduce = 0;
  p->overlap_param_gather = 0;
  p->tp_comm_overlap = 0;
}

int be_lower_model(const spec_model *m, const be_lower_opts *o, spec_model *out, pp_err *err) {
  int shrink = o && o->shrink > 1 ? o->shrink : 1, layers = o ? o->layers : 0;
  *out = *m;
  if (layers > 0 && layers > m->layers)
    return pp_err_set(err, PP_INPUT, "--layers %d: the model has %d", layers, m->layers);
  if (shrink_model(out, shrink, err)) return err->code;
  if (layers > 0) out->layers = layers;
  if (out->layers != m->layers || shrink > 1) { /* not the model itself */
    char name[SPEC_NAME_MAX];
    snprintf(name, sizeof name, "%.*s.l%d.w%d", SPEC_NAME_MAX - 24, m->name, out->layers,
             shrink);
    memcpy(out->name, name, sizeof name);
    if (spec_model_validate(out, err))
      return pp_err_prefix(err, "reduced model (%d layers, width / %d)", out->layers, shrink);
  }
  return PP_OK;
}

/* 0 when a and b hold the same spec (by canonical JSON), else 1 (also when out of memory). */
static int differ(char *a, char *b) {
  int d = !a || !b || strcmp(a, b) != 0;
  free(a), free(b);
  return d;
}

/* The cost model the programs are priced with: o->run_cm (or cm) must be of the model as run
 * on cm's cluster. */
static int run_model(cm_model *cm, const be_lower_opts *o, const spec_model *as_run,
                     cm_model **out, pp_err *err) {
  *out = o->run_cm ? o->run_cm : cm;
  const spec_model *rm = cm_model_spec(*out);
  if (differ(spec_model_json(rm), spec_model_json(as_run)))
    return pp_err_set(err, PP_INPUT, "backend: the run's cost model is of model %s, not of the "
                      "model as run, %s (be_lower_model)", rm->name, as_run->name);
  if (differ(spec_cluster_json(cm_model_cluster(*out)), spec_cluster_json(cm_model_cluster(cm))))
    return pp_err_set(err, PP_INPUT, "backend: the run's cost model is of another cluster");
  return PP_OK;
}

int be_lower(cm_model *cm, const spec_plan *p0, const be_lower_opts *o, be_plan **out,
             pp_err *err) {
  *out = NULL;
  be_lower_opts dflt = {0, 1, NULL};
  if (!o) o = &dflt;
  const spec_model *m0 = cm_model_spec(cm);
  const spec_cluster *c = cm_model_cluster(cm);
  be_plan *bp = calloc(1, sizeof *bp);
  spec_plan p;
  memset(&p, 0, sizeof p);
  spec_layout lay;
  memset(&lay, 0, sizeof lay);
  cm_model *rcm = NULL;
  spec_step *steps = NULL;
  int rc = bp ? PP_OK : pp_err_set(err, PP_NOMEM, "backend: out of memory");
  if (!rc) {
    bp->layers_full = m0->layers;
    bp->shrink = o->shrink > 1 ? o->shrink : 1;
    bp->dtype = m0->dtype;
    rc = be_lower_model(m0, o, &bp->model, err);
  }
  if (!rc) rc = run_model(cm, o, &bp->model, &rcm, err);
  if (!rc) rc = spec_plan_copy(&p, p0, err);
  if (!rc && p.nstages && o->layers > 0) rc = rescale_stages(&p, m0->layers, o->layers, err);
  if (!rc && (o->layers > 0 || bp->shrink > 1) && spec_plan_validate(&p, &bp->model, c, err))
    rc = pp_err_prefix(err, "reduced model (%d layers, width / %d)", bp->model.layers,
                       bp->shrink);
  if (!rc) rc = spec_layout_build(&p, &bp->model, c->gpus, &lay, err);
  cm_result res;
  if (!rc) rc = cm_eval(rcm, &p, &res, err);
  if (!rc) {
    bp->model_flops = res.model_flops;
    bp->nranks = lay.nslots;
    bp->ngroups = lay.ngroups;
    bp->progs = calloc((size_t)lay.nslots, sizeof *bp->progs);
    bp->groups = calloc((size_t)lay.ngroups, sizeof *bp->groups);
    steps = malloc((size_t)2 * lay.microbatches * lay.vpp * sizeof *steps);
    if (!bp->progs || !bp->groups || !steps) rc = pp_err_set(err, PP_NOMEM, "backend: out of memory");
  }
  for (int i = 0; !rc && i < lay.ngroups; i++) {
    be_group *g = &bp->groups[i];
    g->kind = lay.groups[i].kind, g->n = lay.groups[i].n;
    g->ranks = malloc((size_t)g->n * sizeof *g->ranks);
    if (!g->ranks) rc = pp_err_set(err, PP_NOMEM, "backend: out of memory");
    for (int k = 0; !rc && k < g->n; k++) g->ranks[k] = lay.slot_of_gpu[lay.groups[i].gpus[k]];
  }
  if (!rc) {
    lower L = {bp, rcm, &lay, &p, err, 0};
    for (int s = 0; s < lay.nslots && !L.rc; s++) program(&L, s, steps);
    for (int s = 0; s < lay.nslots && !L.rc; s++) peers(&L, &bp->progs[s], lay.nslots);
    rc = L.rc;
  }
  free(steps);
  spec_layout_free(&lay);
  spec_plan_clear(&p);
  if (rc) be_plan_free(bp);
  else *out = bp;
  return rc;
}
