/* Alpa's intra-operator ILP: the operator graph of one transformer layer on a 2-D logical mesh,
 * its strategies and costs, the integer program solved with CBC (through its C interface), a
 * brute-force enumerator of the same objective for tests, and what a solution means as a
 * Megatron stage configuration.
 *
 * Strategies. Each mesh axis independently gives an operator one mode (search__ax_mode); a
 * strategy is the pair of modes. An axis of size 1 only replicates. With force_batch0 (Alpa's
 * 2-D logical meshes), axis 0 splits the batch of every operator. What the modes cost, per
 * microbatch, forward and backward together, on axis j of n_j devices (bytes shrink by the
 * other axis's split where that axis splits the same tensor):
 *   matmul Y = X W: N  all-reduce of dX in the backward (Megatron's f);
 *                   K  all-reduce of Y in the forward (Megatron's g);
 *                   KRS reduce-scatter of Y in the forward, all-gather of dY in the backward;
 *                   B, S  the weight's state on a data axis (below);
 *   other operators: no communication of their own.
 * The weight's state on a data axis (B or S) of n devices, by costs.zero (Alpa's
 * prefer_reduce_scatter and force_zero_stage_3), g = grad_bytes and w = act_bytes (weights are
 * held in the activations' precision) times the weight's elements on the axis group; a term
 * paid once per iteration is charged 1/microbatches of it per microbatch (default costs, where
 * the caller sets microbatches; two-level leaves it at 1 and so charges all of it, as Alpa's
 * ILP, which does not see gradient accumulation, does):
 *   zero 0     all-reduce(g) per iteration;
 *   zero 1, 2  reduce-scatter(g) + all-gather(w) per iteration; Alpa's costs keep all-reduce(g):
 *              its objective prices the all-reduce it rewrites after solving (alpa
 *              tests/shard_parallel: a data-parallel objective is the parameters' all-reduce
 *              with prefer_reduce_scatter too);
 *   zero 3     all-gather(w) for the forward, again for the backward, and reduce-scatter(g),
 *              every microbatch.
 * Memory row: state_bytes per weight element over the weight's split; over the data axes'
 * devices too, from zero 1 the optimizer's 12 bytes (fp32 master weights, two Adam moments),
 * from zero 2 the gradient (state_bytes - 12 - act_bytes), at zero 3 the weights (act_bytes).
 * Compute (default costs only): an operator split over k of the mesh's n devices costs its
 * time x (1/k - 1/n), so an even split costs nothing and replication its redundant work (Alpa
 * sets compute to zero and does not allow replicated heavy operators; its costs do the same).
 * Resharding on an edge, per axis, from the producer's output mode p to the mode q the
 * consumer reads: p = q free; split -> replicated: all-gather in the forward; replicated ->
 * split: free in the forward, all-gather of the gradient in the backward; one split to
 * another: all-to-all both ways.
 *
 * Collective costs: default, the cost model's time (cm_coll_best) on the placement of the
 * axis's first group of physical GPUs; Alpa's alpha-beta weights otherwise (alpa
 * shard_parallel/auto_sharding.py LogicalDeviceMesh: all-gather a + b(n-1)/n B + 0.1,
 * all-reduce a + 2b(n-1)/n B + 0.01, reduce-scatter a + b(n-1)/n B + 0.001, all-to-all
 * a + b(n-1)/n^2 B n/2 + 0.001, B the bytes over the group). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if PODPLAN_HAVE_CBC
#include <coin/Cbc_C_Interface.h>
#endif

#include "search_ilp.h"

/* ---- graphs ---------------------------------------------------------------------------- */

void search__ilp_graph_init(search__ilp_graph *g) { memset(g, 0, sizeof *g); }

void search__ilp_graph_free(search__ilp_graph *g) {
  for (int i = 0; i < g->nops; i++) free(g->op[i].s);
  for (int i = 0; i < g->nedges; i++) free(g->edge[i].r);
  search__ilp_graph_init(g);
}

int search__ilp_op_add(search__ilp_graph *g, const char *name, int n, const double *cost,
                       const double *mem, pp_err *err) {
  if (g->nops >= SEARCH__ILP_MAX_OPS || n < 1) {
    pp_err_set(err, PP_INTERNAL, "ilp: operator %s: %s", name,
               n < 1 ? "no strategy" : "too many operators");
    return -1;
  }
  search__ilp_op *o = &g->op[g->nops];
  memset(o, 0, sizeof *o);
  o->s = calloc((size_t)n, sizeof *o->s);
  if (!o->s) {
    pp_err_set(err, PP_NOMEM, "ilp: out of memory");
    return -1;
  }
  snprintf(o->name, sizeof o->name, "%s", name);
  o->nstrat = n;
  for (int i = 0; i < n; i++) {
    o->s[i].cost = cost ? cost[i] : 0;
    o->s[i].mem = mem ? mem[i] : 0;
  }
  return g->nops++;
}

int search__ilp_edge_add(search__ilp_graph *g, int u, int v, const double *r, pp_err *err) {
  if (g->nedges >= SEARCH__ILP_MAX_EDGES || u < 0 || v < 0 || u >= g->nops || v >= g->nops ||
      u == v)
    return pp_err_set(err, PP_INTERNAL, "ilp: bad edge %d -> %d", u, v);
  size_t n = (size_t)g->op[u].nstrat * (size_t)g->op[v].nstrat;
  search__ilp_edge *e = &g->edge[g->nedges];
  e->r = malloc(n * sizeof *e->r);
  if (!e->r) return pp_err_set(err, PP_NOMEM, "ilp: out of memory");
  memcpy(e->r, r, n * sizeof *e->r);
  e->u = u, e->v = v;
  g->nedges++;
  return PP_OK;
}

double search__ilp_objective(const search__ilp_graph *g, const int *choice) {
  double obj = 0, mem = 0;
  for (int v = 0; v < g->nops; v++) {
    obj += g->op[v].s[choice[v]].cost;
    mem += g->op[v].s[choice[v]].mem;
  }
  for (int k = 0; k < g->nedges; k++) {
    const search__ilp_edge *e = &g->edge[k];
    obj += e->r[choice[e->u] * g->op[e->v].nstrat + choice[e->v]];
  }
  if (g->mem_budget > 0 && mem > g->mem_budget) return INFINITY;
  return obj;
}

/* ---- the layer graph --------------------------------------------------------------------- */

void search__ilp_strat_name(const search__ilp_strat *s, char *out) {
  static const char *const names[SEARCH__AX_N_MODES] = {"R", "B", "S", "D", "N", "K", "Krs"};
  snprintf(out, 16, "%s,%s", names[s->mode[0] < SEARCH__AX_N_MODES ? s->mode[0] : 0],
           names[s->mode[1] < SEARCH__AX_N_MODES ? s->mode[1] : 0]);
}

void search__ilp_costs_alpa(search__ilp_costs *c, int samples) {
  memset(c, 0, sizeof *c);
  c->alpa = 1;
  c->alpha[0] = c->alpha[1] = 1;
  c->beta[0] = 1, c->beta[1] = 0.1;
  c->samples = samples;
  c->microbatches = 1;
  c->act_bytes = 2;
  c->grad_bytes = 2;
  c->state_bytes = 16;
}

/* An activation tensor: elements, and what its dimensions may be split by. */
typedef struct tensor {
  double elems;
  int batch, seq;   /* sizes of the batch and sequence dimensions */
  int last, last2;  /* divisors the last dimension's split must divide (last2: 0 = none) */
} tensor;

#define MAX_STRAT 64

typedef struct build {
  const search__ilp_mesh *mesh;
  const search__ilp_costs *c;
  int n[2];
  cm_place place[2];    /* default costs: the first group along each axis */
  double peak, hbm_Bps; /* default costs: compute rates */
  /* per operator: the layouts of its strategies */
  unsigned char lin[SEARCH__ILP_MAX_OPS][MAX_STRAT][2], lout[SEARCH__ILP_MAX_OPS][MAX_STRAT][2];
  const tensor *tout[SEARCH__ILP_MAX_OPS];
} build;

/* A collective along axis j; `bytes` is the tensor the axis group holds (all-reduce: the
 * buffer; all-gather: the gathered output; reduce-scatter: the input; all-to-all: the whole
 * tensor, of which each rank holds 1/n). */
static double coll(const build *b, int j, cm_coll kind, double bytes) {
  int n = b->n[j];
  if (n <= 1 || bytes <= 0) return 0;
  const search__ilp_costs *c = b->c;
  if (c->alpa) {
    double a = c->alpha[j], be = c->beta[j], f = (n - 1.0) / n;
    switch (kind) {
    case CM_ALL_GATHER: return a + be * f * bytes + 0.1;
    case CM_ALL_REDUCE: return a + be * 2 * f * bytes + 0.01;
    case CM_REDUCE_SCATTER: return a + be * f * bytes + 0.001;
    default: return a + be * f / n * bytes * (n / 2.0) + 0.001;
    }
  }
  if (kind == CM_ALL_TO_ALL) bytes /= n;
  return cm_coll_best(c->cm, kind, bytes, &b->place[j], NULL);
}

/* Does layout l fit tensor t on the mesh (every split divides its dimension)? */
static int layout_ok(const build *b, const unsigned char l[2], const tensor *t) {
  int pb = 1, ps = 1, pd = 1;
  for (int j = 0; j < 2; j++) {
    if (l[j] == SEARCH__AX_B) pb *= b->n[j];
    if (l[j] == SEARCH__AX_S) ps *= b->n[j];
    if (l[j] == SEARCH__AX_D) pd *= b->n[j];
  }
  return t->batch % pb == 0 && t->seq % ps == 0 && t->last % pd == 0 &&
         (!t->last2 || t->last2 % pd == 0);
}

/* Layouts a matmul mode reads and writes. */
static unsigned char mm_in(unsigned char m) {
  return m == SEARCH__AX_N ? SEARCH__AX_R : m == SEARCH__AX_K || m == SEARCH__AX_KRS ? SEARCH__AX_D : m;
}
static unsigned char mm_out(unsigned char m) {
  return m == SEARCH__AX_N ? SEARCH__AX_D : m == SEARCH__AX_K ? SEARCH__AX_R
                                                : m == SEARCH__AX_KRS ? SEARCH__AX_S : m;
}
static int is_weight_split(unsigned char m) {
  return m == SEARCH__AX_N || m == SEARCH__AX_K || m == SEARCH__AX_KRS;
}
static int is_data(unsigned char m) { return m == SEARCH__AX_B || m == SEARCH__AX_S; }

/* A weight's state on data axis j, per microbatch (the header's table); elems: the weight's
 * elements on the axis group. */
static double weight_sync(const build *b, int j, double elems) {
  const search__ilp_costs *c = b->c;
  double g = c->grad_bytes * elems, w = c->act_bytes * elems;
  double per = c->alpa ? 1.0 : 1.0 / (c->microbatches > 0 ? c->microbatches : 1);
  if (c->zero >= 3)
    return 2 * coll(b, j, CM_ALL_GATHER, w) + coll(b, j, CM_REDUCE_SCATTER, g);
  if (c->zero >= 1 && !c->alpa)
    return per * (coll(b, j, CM_REDUCE_SCATTER, g) + coll(b, j, CM_ALL_GATHER, w));
  return per * coll(b, j, CM_ALL_REDUCE, g);
}

/* Bytes per device of a weight of `elems` elements split `wsplit` ways by the model axes and
 * held by `dsplit` devices of data axes (the header's memory row). */
static double weight_memory(const search__ilp_costs *c, double elems, double wsplit,
                            double dsplit) {
  double opt = 12, w = c->act_bytes, gr = c->state_bytes - opt - w;
  if (gr < 0) gr = 0, opt = c->state_bytes - w > 0 ? c->state_bytes - w : 0;
  double per = (c->zero >= 3 ? w / dsplit : w) + (c->zero >= 2 ? gr / dsplit : gr) +
               (c->zero >= 1 ? opt / dsplit : opt);
  return per * elems / wsplit;
}

/* Modes axis j offers an operator of kind k. */
static int axis_modes(const build *b, int j, search__op_kind k, unsigned char *out) {
  if (b->n[j] == 1) {
    out[0] = SEARCH__AX_R;
    return 1;
  }
  if (j == 0 && b->mesh->force_batch0) {
    out[0] = SEARCH__AX_B;
    return 1;
  }
  int heavy = k == SEARCH__OP_MATMUL || k == SEARCH__OP_ATTN, n = 0;
  for (unsigned char m = 0; m < SEARCH__AX_N_MODES; m++) {
    if (m == SEARCH__AX_R && heavy && b->c->alpa) continue;
    if ((m == SEARCH__AX_S || m == SEARCH__AX_KRS) && !b->c->allow_seq) continue;
    int ok;
    switch (k) {
    case SEARCH__OP_MATMUL: ok = m != SEARCH__AX_D; break;
    case SEARCH__OP_ATTN: ok = m == SEARCH__AX_R || m == SEARCH__AX_B || m == SEARCH__AX_D; break;
    case SEARCH__OP_NORM: ok = m <= SEARCH__AX_S; break;
    default: ok = m <= SEARCH__AX_D; break;
    }
    if (ok) out[n++] = m;
  }
  return n;
}

/* One operator of the layer graph. */
typedef struct lop {
  const char *name;
  search__op_kind kind;
  int nin, in[2];             /* producers */
  const tensor *tin, *tout;
  double K, N;                /* matmul weight K x N */
  double tokens;              /* matmul rows */
  double time_s, flops;       /* unsplit forward + backward (default costs), FLOPs */
} lop;

static int add_op(build *b, search__ilp_graph *g, const lop *o, pp_err *err) {
  unsigned char m0[SEARCH__AX_N_MODES], m1[SEARCH__AX_N_MODES];
  int n0 = axis_modes(b, 0, o->kind, m0), n1 = axis_modes(b, 1, o->kind, m1);
  double cost[MAX_STRAT], mem[MAX_STRAT];
  unsigned char modes[MAX_STRAT][2];
  int v = g->nops, ns = 0;
  const search__ilp_costs *c = b->c;
  for (int i0 = 0; i0 < n0; i0++)
    for (int i1 = 0; i1 < n1; i1++) {
      unsigned char md[2] = {m0[i0], m1[i1]}, li[2], lo[2];
      int mm = o->kind == SEARCH__OP_MATMUL;
      for (int j = 0; j < 2; j++) {
        li[j] = mm ? mm_in(md[j]) : md[j];
        lo[j] = mm ? mm_out(md[j]) : md[j];
      }
      if ((o->tin && !layout_ok(b, li, o->tin)) || !layout_ok(b, lo, o->tout)) continue;
      if (mm) { /* the weight's split dimensions must divide too */
        int pn = 1, pk = 1;
        for (int j = 0; j < 2; j++) {
          if (md[j] == SEARCH__AX_N) pn *= b->n[j];
          if (md[j] == SEARCH__AX_K || md[j] == SEARCH__AX_KRS) pk *= b->n[j];
        }
        if (fmod(o->N, pn) != 0 || fmod(o->K, pk) != 0) continue;
      }
      double t = 0, wsplit = 1, dsplit = 1, k = 1;
      for (int j = 0; j < 2; j++) {
        int ot = 1 - j, nj = b->n[j];
        if (md[j] != SEARCH__AX_R) k *= nj;
        if (mm && is_weight_split(md[j])) wsplit *= nj;
        if (mm && is_data(md[j])) dsplit *= nj;
        if (nj <= 1 || !mm) continue;
        double in_o = li[ot] != SEARCH__AX_R ? b->n[ot] : 1;
        double out_o = lo[ot] != SEARCH__AX_R ? b->n[ot] : 1;
        double w_o = is_weight_split(md[ot]) ? b->n[ot] : 1;
        double ab = c->act_bytes;
        switch (md[j]) {
        case SEARCH__AX_N: t += coll(b, j, CM_ALL_REDUCE, ab * o->tin->elems / in_o); break;
        case SEARCH__AX_K: t += coll(b, j, CM_ALL_REDUCE, ab * o->tout->elems / out_o); break;
        case SEARCH__AX_KRS:
          t += coll(b, j, CM_REDUCE_SCATTER, ab * o->tout->elems / out_o) +
               coll(b, j, CM_ALL_GATHER, ab * o->tout->elems / out_o);
          break;
        case SEARCH__AX_B:
        case SEARCH__AX_S: t += weight_sync(b, j, o->K * o->N / w_o); break;
        default: break;
        }
      }
      if (!c->alpa) t += o->time_s * (1.0 / k - 1.0 / (b->n[0] * b->n[1]));
      if (ns >= MAX_STRAT) return pp_err_set(err, PP_INTERNAL, "ilp: too many strategies");
      cost[ns] = t;
      mem[ns] = mm ? weight_memory(c, o->K * o->N, wsplit, dsplit) : 0;
      memcpy(modes[ns], md, 2);
      memcpy(b->lin[v][ns], li, 2);
      memcpy(b->lout[v][ns], lo, 2);
      ns++;
    }
  if (!ns)
    return pp_err_set(err, PP_INPUT, "ilp: no strategy of %s fits the %dx%d mesh", o->name,
                      b->n[0], b->n[1]);
  if (search__ilp_op_add(g, o->name, ns, cost, mem, err) < 0) return err->code;
  search__ilp_op *op = &g->op[v];
  op->kind = o->kind;
  op->flops = o->flops;
  for (int i = 0; i < ns; i++) memcpy(op->s[i].mode, modes[i], 2);
  b->tout[v] = o->tout;
  /* edges from the producers */
  for (int e = 0; e < o->nin; e++) {
    int u = o->in[e];
    const search__ilp_op *pu = &g->op[u];
    double *r = malloc((size_t)pu->nstrat * ns * sizeof *r);
    if (!r) return pp_err_set(err, PP_NOMEM, "ilp: out of memory");
    for (int i = 0; i < pu->nstrat; i++)
      for (int q = 0; q < ns; q++)
        r[i * ns + q] = 0;
    for (int i = 0; i < pu->nstrat; i++)
      for (int q = 0; q < ns; q++) {
        const unsigned char *p = b->lout[u][i], *w = b->lin[v][q];
        double t = 0;
        for (int j = 0; j < 2; j++) {
          int ot = 1 - j;
          if (b->n[j] <= 1 || p[j] == w[j]) continue;
          double other = p[ot] == w[ot] && p[ot] != SEARCH__AX_R ? b->n[ot] : 1;
          double bytes = c->act_bytes * b->tout[u]->elems / other;
          if (p[j] == SEARCH__AX_R || w[j] == SEARCH__AX_R)
            t += coll(b, j, CM_ALL_GATHER, bytes);
          else
            t += 2 * coll(b, j, CM_ALL_TO_ALL, bytes);
        }
        r[i * ns + q] = t;
      }
    int rc = search__ilp_edge_add(g, u, v, r, err);
    free(r);
    if (rc) return rc;
  }
  return PP_OK;
}

int search__ilp_layer(const spec_model *m, const search__ilp_mesh *mesh,
                      const search__ilp_costs *c, search__ilp_graph *g, pp_err *err) {
  search__ilp_graph_init(g);
  build *b = calloc(1, sizeof *b);
  if (!b) return pp_err_set(err, PP_NOMEM, "ilp: out of memory");
  int rc = PP_OK;
  b->mesh = mesh;
  b->c = c;
  b->n[0] = mesh->shape[0], b->n[1] = mesh->shape[1];
  g->mesh[0] = b->n[0], g->mesh[1] = b->n[1];
  if (b->n[0] < 1 || b->n[1] < 1 || c->samples < 1) {
    rc = pp_err_set(err, PP_INPUT, "ilp: mesh %dx%d, %d sequences", b->n[0], b->n[1], c->samples);
    goto done;
  }
  if (!c->alpa) {
    int ids[1024], n1 = b->n[1], n0 = b->n[0];
    if (!c->cm || !mesh->gpus || n0 > 1024 || n1 > 1024) {
      rc = pp_err_set(err, PP_INPUT, "ilp: the default costs need a cost model and GPU ids");
      goto done;
    }
    cm_place_list(c->cm, mesh->gpus, n1, &b->place[1]);            /* row 0 */
    for (int i = 0; i < n0; i++) ids[i] = mesh->gpus[i * n1];        /* column 0 */
    cm_place_list(c->cm, ids, n0, &b->place[0]);
    const spec_cluster *cl = cm_model_cluster(c->cm);
    b->peak = cl->gpu.bf16_tflops * 1e12;
    b->hbm_Bps = cl->gpu.hbm_tbps * 1e12 * cm_model_params(c->cm)->hbm_eff;
  }
  {
    double bs = c->samples, s = m->seq_len, h = m->hidden, a = m->heads, kv = m->kv_heads;
    double dh = h / a, f = m->ffn_hidden, topk = m->experts ? m->top_k : 1;
    int swiglu = m->ffn == SPEC_FFN_SWIGLU;
    double tok = bs * s;
    tensor X = {tok * h, c->samples, m->seq_len, m->hidden, 0};
    tensor QKV = {tok * (a + 2 * kv) * dh, c->samples, m->seq_len, m->heads, m->kv_heads};
    tensor ATT = {tok * a * dh, c->samples, m->seq_len, m->heads, 0};
    tensor F = {tok * topk * f, c->samples, m->seq_len, m->ffn_hidden, 0};
    const cm_params *cp = c->cm ? cm_model_params(c->cm) : NULL;
    /* unsplit times (default costs) and FLOPs */
#define MM(nm, kk, nn, tk, ti, to, src)                                                  \
  (lop){nm, SEARCH__OP_MATMUL, 1, {src, 0}, ti, to, kk, nn, tk,                          \
        c->alpa ? 0 : 3 * cm_gemm_time(c->cm, tk, nn, kk, NULL), 6 * (tk) * (kk) * (nn)}
#define LIGHT(nm, kd, ti, to, n_, s0, s1)                                                \
  (lop){nm, kd, n_, {s0, s1}, ti, to, 0, 0, 0,                                            \
        c->alpa ? 0 : 6.0 * c->act_bytes * (to)->elems * (n_ + 1) / 2 / b->hbm_Bps, 0}
    double attn_fl = 2.0 * bs * a * s * s * dh; /* causal: half of 4 b a s^2 dh */
    double attn_t = c->alpa ? 0
                            : attn_fl / (b->peak * cp->attn_fwd_eff) +
                                  2.5 * attn_fl / (b->peak * cp->attn_bwd_eff);
    lop ops[12];
    int n = 0;
    ops[n++] = (lop){"input", SEARCH__OP_INPUT, 0, {0, 0}, NULL, &X, 0, 0, 0, 0, 0}; /* 0 */
    ops[n++] = LIGHT("norm1", SEARCH__OP_NORM, &X, &X, 1, 0, 0);                      /* 1 */
    ops[n++] = MM("qkv", h, (a + 2 * kv) * dh, tok, &X, &QKV, 1);                      /* 2 */
    ops[n++] = (lop){"attn", SEARCH__OP_ATTN, 1, {2, 0}, &QKV, &ATT, 0, 0, 0, attn_t,
                     3.5 * attn_fl};                                                   /* 3 */
    ops[n++] = MM("proj", a * dh, h, tok, &ATT, &X, 3);                                /* 4 */
    ops[n++] = LIGHT("add1", SEARCH__OP_ADD, &X, &X, 2, 0, 4);                         /* 5 */
    ops[n++] = LIGHT("norm2", SEARCH__OP_NORM, &X, &X, 1, 5, 0);                      /* 6 */
    int act_in0 = n, act_in1 = 0, nact = 1;
    ops[n++] = MM(swiglu ? "gate" : "fc1", h, f, tok * topk, &X, &F, 6);               /* 7 */
    if (swiglu) {
      act_in1 = n, nact = 2;
      ops[n++] = MM("up", h, f, tok * topk, &X, &F, 6);                                 /* 8 */
    }
    int act = n, fc2 = n + 1;
    ops[n++] = LIGHT("act", SEARCH__OP_ACT, &F, &F, nact, act_in0, act_in1);
    ops[n++] = MM("fc2", f, h, tok * topk, &F, &X, act);
    ops[n++] = LIGHT("add2", SEARCH__OP_ADD, &X, &X, 2, 5, fc2);
#undef MM
#undef LIGHT
    for (int i = 0; i < n; i++)
      if ((rc = add_op(b, g, &ops[i], err))) goto done;
    /* the next layer reads this one's output as its input */
    int last = n - 1;
    const search__ilp_op *pu = &g->op[last], *pv = &g->op[0];
    double *r = malloc((size_t)pu->nstrat * pv->nstrat * sizeof *r);
    if (!r) {
      rc = pp_err_set(err, PP_NOMEM, "ilp: out of memory");
      goto done;
    }
    for (int i = 0; i < pu->nstrat; i++)
      for (int q = 0; q < pv->nstrat; q++) {
        const unsigned char *p = b->lout[last][i], *w = b->lout[0][q];
        double t = 0;
        for (int j = 0; j < 2; j++) {
          int ot = 1 - j;
          if (b->n[j] <= 1 || p[j] == w[j]) continue;
          double other = p[ot] == w[ot] && p[ot] != SEARCH__AX_R ? b->n[ot] : 1;
          double bytes = c->act_bytes * X.elems / other;
          t += p[j] == SEARCH__AX_R || w[j] == SEARCH__AX_R ? coll(b, j, CM_ALL_GATHER, bytes)
                                                           : 2 * coll(b, j, CM_ALL_TO_ALL, bytes);
        }
        r[i * pv->nstrat + q] = t;
      }
    rc = search__ilp_edge_add(g, last, 0, r, err);
    free(r);
  }
done:
  free(b);
  if (rc) search__ilp_graph_free(g);
  return rc;
}

/* ---- CBC --------------------------------------------------------------------------------- */

int search__ilp_have_cbc(void) { return PODPLAN_HAVE_CBC; }

#if !PODPLAN_HAVE_CBC
int search__ilp_solve(const search__ilp_graph *g, search__ilp_sol *out, pp_err *err) {
  (void)g;
  memset(out, 0, sizeof *out);
  return pp_err_set(err, PP_NOTIMPL,
                    "two-level: built without CBC (coinor-libcbc-dev; cmake -DPODPLAN_CBC=ON)");
}
#else
int search__ilp_solve(const search__ilp_graph *g, search__ilp_sol *out, pp_err *err) {
  memset(out, 0, sizeof *out);
  int trivial = 1;
  for (int v = 0; v < g->nops; v++) trivial &= g->op[v].nstrat == 1;
  if (trivial) { /* one strategy each: nothing to choose (a 1x1 mesh, or axis 0 forced) */
    out->objective = search__ilp_objective(g, out->choice);
    if (!isfinite(out->objective))
      return pp_err_set(err, PP_INTERNAL, "ilp: the only assignment violates the memory row");
    out->optimal = 1;
    return PP_OK;
  }
  /* columns: s_vi (binary), then e_uv,ij (continuous in [0, 1]: with s integral, the row and
   * column constraints and sum e = 1 leave exactly e_ij = s_ui s_vj, so they need not be
   * integer, which is what Alpa's binary e variables also come to); edges whose costs are
   * all zero are left out (they cannot change the objective) */
  int scol[SEARCH__ILP_MAX_OPS], erow[SEARCH__ILP_MAX_EDGES];
  int ncols = 0, nrows = g->nops, nnz = 0;
  int used[SEARCH__ILP_MAX_EDGES];
  double maxc = 0;
  for (int v = 0; v < g->nops; v++) {
    scol[v] = ncols;
    ncols += g->op[v].nstrat;
    for (int i = 0; i < g->op[v].nstrat; i++) maxc = fmax(maxc, g->op[v].s[i].cost);
  }
  for (int k = 0; k < g->nedges; k++) {
    const search__ilp_edge *e = &g->edge[k];
    int nu = g->op[e->u].nstrat, nv = g->op[e->v].nstrat;
    used[k] = 0;
    for (int i = 0; i < nu * nv; i++)
      if (e->r[i] != 0) used[k] = 1, maxc = fmax(maxc, e->r[i]);
    if (!used[k]) continue;
    erow[k] = nrows;
    ncols += nu * nv;
    nrows += 1 + nu + nv;
    nnz += 3 * nu * nv + nu + nv; /* e in 3 rows; s_u, s_v in their edge rows */
  }
  nnz += ncols; /* s in its operator row (an over-estimate: e columns are not in op rows) */
  int memrow = -1;
  if (g->mem_budget > 0) memrow = nrows++, nnz += ncols;
  /* scale the objective so that the largest coefficient is 1e4: CBC's tolerances are absolute */
  double scale = maxc > 0 ? 1e4 / maxc : 1;

  int rc = PP_OK;
  CoinBigIndex *start = malloc((size_t)(ncols + 1) * sizeof *start);
  int *index = malloc((size_t)nnz * sizeof *index);
  double *value = malloc((size_t)nnz * sizeof *value);
  double *obj = malloc((size_t)ncols * sizeof *obj), *clb = calloc((size_t)ncols, sizeof *clb);
  double *cub = malloc((size_t)ncols * sizeof *cub);
  double *rlb = malloc((size_t)nrows * sizeof *rlb), *rub = malloc((size_t)nrows * sizeof *rub);
  Cbc_Model *model = NULL;
  if (!start || !index || !value || !obj || !clb || !cub || !rlb || !rub) {
    rc = pp_err_set(err, PP_NOMEM, "ilp: out of memory");
    goto done;
  }
  int col = 0, z = 0;
  for (int v = 0; v < g->nops; v++)
    for (int i = 0; i < g->op[v].nstrat; i++, col++) {
      start[col] = z;
      obj[col] = g->op[v].s[i].cost * scale;
      cub[col] = 1;
      index[z] = v, value[z++] = 1;
      for (int k = 0; k < g->nedges; k++) {
        if (!used[k]) continue;
        const search__ilp_edge *e = &g->edge[k];
        if (e->u == v) index[z] = erow[k] + 1 + i, value[z++] = -1;
        if (e->v == v) index[z] = erow[k] + 1 + g->op[e->u].nstrat + i, value[z++] = -1;
      }
      if (memrow >= 0 && g->op[v].s[i].mem != 0)
        index[z] = memrow, value[z++] = g->op[v].s[i].mem;
    }
  for (int k = 0; k < g->nedges; k++) {
    if (!used[k]) continue;
    const search__ilp_edge *e = &g->edge[k];
    int nu = g->op[e->u].nstrat, nv = g->op[e->v].nstrat;
    for (int i = 0; i < nu; i++)
      for (int j = 0; j < nv; j++, col++) {
        start[col] = z;
        obj[col] = e->r[i * nv + j] * scale;
        cub[col] = 1;
        index[z] = erow[k], value[z++] = 1;
        index[z] = erow[k] + 1 + i, value[z++] = 1;
        index[z] = erow[k] + 1 + nu + j, value[z++] = 1;
      }
  }
  start[col] = z;
  for (int r = 0; r < nrows; r++) rlb[r] = -DBL_MAX, rub[r] = 0;
  for (int v = 0; v < g->nops; v++) rlb[v] = rub[v] = 1;
  for (int k = 0; k < g->nedges; k++)
    if (used[k]) rlb[erow[k]] = rub[erow[k]] = 1;
  if (memrow >= 0) rub[memrow] = g->mem_budget;

  model = Cbc_newModel();
  if (!model) {
    rc = pp_err_set(err, PP_NOMEM, "ilp: CBC: out of memory");
    goto done;
  }
  Cbc_loadProblem(model, ncols, nrows, start, index, value, clb, cub, obj, rlb, rub);
  for (int c = 0; c < scol[g->nops - 1] + g->op[g->nops - 1].nstrat; c++) Cbc_setInteger(model, c);
  Cbc_setLogLevel(model, 0);
  Cbc_setParameter(model, "log", "0");
  Cbc_setParameter(model, "slog", "0");
  /* serial: CBC's "threads 1" runs the tree search on one helper thread, and its hand-over
   * sometimes stalls in a 10 s timed wait (CbcThread::waitThread) before it resumes */
  Cbc_setParameter(model, "threads", "0");
  Cbc_setParameter(model, "preprocess", "off");
  Cbc_setParameter(model, "cuts", "off");
  Cbc_setAllowableGap(model, 1e-7);
  Cbc_setAllowableFractionGap(model, 1e-9);
  Cbc_solve(model);
  if (!Cbc_isProvenOptimal(model)) {
    rc = pp_err_set(err, PP_INTERNAL, "ilp: CBC found no optimum (status %d, secondary %d)",
                    Cbc_status(model), Cbc_secondaryStatus(model));
    goto done;
  }
  const double *x = Cbc_getColSolution(model);
  for (int v = 0; v < g->nops; v++) {
    int best = 0;
    for (int i = 1; i < g->op[v].nstrat; i++)
      if (x[scol[v] + i] > x[scol[v] + best]) best = i;
    out->choice[v] = best;
  }
  out->objective = search__ilp_objective(g, out->choice);
  out->optimal = 1;
  out->nodes = Cbc_getNodeCount(model);

done:
  if (model) Cbc_deleteModel(model);
  free(start);
  free(index);
  free(value);
  free(obj);
  free(clb);
  free(cub);
  free(rlb);
  free(rub);
  return rc;
}
#endif

/* ---- brute force ------------------------------------------------------------------------- */

typedef struct brute {
  const search__ilp_graph *g;
  int choice[SEARCH__ILP_MAX_OPS];
  double rest[SEARCH__ILP_MAX_OPS + 1]; /* least strategy costs of operators v.. together */
  double best, max_visits, visits;
  int best_choice[SEARCH__ILP_MAX_OPS];
  long long leaves;
  int aborted;
} brute;

/* Cost op v adds with strategy i given ops 0..v-1 assigned: its own and its edges to them. */
static double added(const brute *b, int v, int i) {
  const search__ilp_graph *g = b->g;
  double t = g->op[v].s[i].cost;
  for (int k = 0; k < g->nedges; k++) {
    const search__ilp_edge *e = &g->edge[k];
    int nv = g->op[e->v].nstrat;
    if (e->v == v && e->u < v) t += e->r[b->choice[e->u] * nv + i];
    else if (e->u == v && e->v < v) t += e->r[i * nv + b->choice[e->v]];
  }
  return t;
}

static void dfs(brute *b, int v, double partial, double mem) {
  const search__ilp_graph *g = b->g;
  if (b->aborted) return;
  if (++b->visits > b->max_visits) {
    b->aborted = 1;
    return;
  }
  if (v == g->nops) {
    b->leaves++;
    if (partial < b->best) {
      b->best = partial;
      memcpy(b->best_choice, b->choice, sizeof b->choice);
    }
    return;
  }
  for (int i = 0; i < g->op[v].nstrat; i++) {
    double m = mem + g->op[v].s[i].mem;
    if (g->mem_budget > 0 && m > g->mem_budget) continue;
    b->choice[v] = i;
    double p = partial + added(b, v, i);
    if (p + b->rest[v + 1] >= b->best) continue; /* the rest adds at least its least costs */
    dfs(b, v + 1, p, m);
  }
}

int search__ilp_brute(const search__ilp_graph *g, double max_assignments, search__ilp_sol *out,
                      pp_err *err) {
  memset(out, 0, sizeof *out);
  for (int v = 0; v < g->nops; v++)
    for (int i = 0; i < g->op[v].nstrat; i++)
      if (g->op[v].s[i].cost < 0)
        return pp_err_set(err, PP_INPUT, "ilp brute force: negative cost at %s", g->op[v].name);
  brute *b = calloc(1, sizeof *b);
  if (!b) return pp_err_set(err, PP_NOMEM, "ilp: out of memory");
  b->g = g;
  b->best = INFINITY;
  for (int v = g->nops - 1; v >= 0; v--) {
    double lo = INFINITY;
    for (int i = 0; i < g->op[v].nstrat; i++) lo = fmin(lo, g->op[v].s[i].cost);
    b->rest[v] = b->rest[v + 1] + lo;
  }
  b->max_visits = max_assignments;
  dfs(b, 0, 0, 0);
  int rc = PP_OK;
  if (b->aborted)
    rc = pp_err_set(err, PP_INPUT, "ilp brute force: more than %.0f partial assignments",
                    max_assignments);
  else if (!isfinite(b->best))
    rc = pp_err_set(err, PP_INPUT, "ilp brute force: no assignment fits the memory row");
  else {
    memcpy(out->choice, b->best_choice, sizeof out->choice);
    out->objective = search__ilp_objective(g, out->choice);
    out->optimal = 1;
    out->nodes = b->leaves;
  }
  free(b);
  return rc;
}

/* ---- mapping ------------------------------------------------------------------------------ */

static search__role mode_role(unsigned char m) {
  if (m == SEARCH__AX_R) return SEARCH__ROLE_REP;
  return m == SEARCH__AX_B || m == SEARCH__AX_S ? SEARCH__ROLE_DATA : SEARCH__ROLE_MODEL;
}

void search__ilp_map_solution(const search__ilp_graph *g, const search__ilp_sol *s,
                              search__ilp_map *out) {
  memset(out, 0, sizeof *out);
  out->tp = out->dp = 1;
  out->expressible = 1;
  for (int j = 0; j < 2; j++) {
    int n = g->mesh[j];
    if (n <= 1) continue;
    double w[4] = {0};
    for (int v = 0; v < g->nops; v++) {
      const search__ilp_op *o = &g->op[v];
      if (o->kind == SEARCH__OP_MATMUL || o->kind == SEARCH__OP_ATTN)
        w[mode_role(o->s[s->choice[v]].mode[j])] += o->flops > 0 ? o->flops : 1;
    }
    search__role r = SEARCH__ROLE_DATA;
    if (w[SEARCH__ROLE_MODEL] > w[r]) r = SEARCH__ROLE_MODEL;
    if (w[SEARCH__ROLE_REP] > w[r]) r = SEARCH__ROLE_REP;
    out->role[j] = r;
    if (r == SEARCH__ROLE_REP) out->expressible = 0;
    for (int v = 0; v < g->nops; v++) {
      const search__ilp_op *o = &g->op[v];
      unsigned char m = o->s[s->choice[v]].mode[j];
      if ((o->kind == SEARCH__OP_MATMUL || o->kind == SEARCH__OP_ATTN) && mode_role(m) != r)
        out->expressible = 0;
      if (r == SEARCH__ROLE_MODEL && m == SEARCH__AX_S &&
          (o->kind == SEARCH__OP_NORM || o->kind == SEARCH__OP_ADD ||
           o->kind == SEARCH__OP_INPUT))
        out->seq_split = 1;
    }
    if (r == SEARCH__ROLE_MODEL)
      out->tp *= n;
    else
      out->dp *= n;
  }
}
