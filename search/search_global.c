/* global: a joint search over stage slicing, device blocks and per-stage configuration, with a
 * certified lower bound on the optimum of its whole space.
 *
 * The space. Every plan of the uniform space (as exhaustive), the plans two-level returns
 * (so global contains what every other method can return), and every non-uniform 1F1B
 * pipeline whose stages take consecutive layers and consecutive device blocks in stage order:
 * stage i runs on GPUs [d_i, d_i + S_i) with d_0 = 0 and d_{i+1} = d_i + S_i (GPUs past the
 * last block stay idle), with its own tp, cp, dp, ep and recomputation; the plan's microbatch
 * count, sequence parallelism and ZeRO stage (0 or 1: ZeRO >= 2 needs one stage) are shared.
 * Block sizes: whole nodes, any count (on more than 32 nodes: counts 1..8 and those of the
 * form 2^a 3^b, and the whole cluster); on clusters of at most 8 nodes also blocks inside a
 * node (1, 2, 4, ... GPUs, at any offset that stays in the node). A block of whole nodes may
 * straddle nodes and NVLink domains; the cost model prices the links its groups cross. (One
 * stage on every GPU is a uniform plan and belongs to the uniform part.) With --hierarchy the
 * space is the two-level one (search_island_stage_ok): blocks of 2^k GPUs inside an island or
 * of whole islands, TP/CP/EP groups inside an island, in both parts, and two-level's plans only
 * where they lie in it.
 *
 * The units. Unit 0 is the uniform space, searched exhaustively in prepare (its optimum is
 * also the incumbent every other unit prunes against, so that no unit depends on another's
 * timing). Unit 1 holds the plans two-level returns (two_level_unit). Units 2.. are one
 * (microbatch count m, sp, zero) each (and one recomputation, with --same-recompute: every
 * stage then takes that unit's): a DP on stage costs.
 *
 * Why the bound holds. For a non-uniform 1F1B plan of P stages, cm_eval charges
 *     T = sum_i t_i + (m - 1) max_i t_i + p2p + tail,
 * where t_i is the stage's time per microbatch, computed from the stage alone
 * (cm_stage_time: its layers, its embedding or head, its groups placed on its own GPUs:
 * nothing depends on the other stages);
 *   p2p = pp_p2p_per_mb (m + P - 2) max_s q_s >= pp_p2p_per_mb ((m - 1) max_s q_s + sum_i p2p_i)
 * where p2p_i is boundary i's transfer (P - 1 boundaries) and q_s the mean of stage s's
 * boundaries (one for the first and the last stage): the sums of q_s over stages 0..P-2 and
 * over 1..P-1 average to sum_i p2p_i, so one of them, at most (P - 1) max_s q_s, is at least
 * it; each p2p_i and each q_s is at least what the blocks alone allow, and (m - 1) max_s q_s
 * is at least (m - 1) q_0, or it joins the (m - 1) max_s t_s as (m - 1) max_s u_s, u_s =
 * t_s + pp_p2p_per_mb times q_s's bound (p2p_bound: the unit runs the first way, and the
 * second where the first stops short; let u_s = t_s in the first); tail = max over stages
 * of what cm_stage_tail charges >= the first stage's own (with nothing to hide behind but its
 * own backward, cm_stage_tail(..., 0)), and also >= cm_optimizer_time(total parameters / N)
 * (every parameter's optimizer state sits on one of at most N GPUs, and the step time grows
 * with the shard). A stage fits iff
 * cm_stage_memory with min(stages from it to the end, m) microbatches in flight fits; time
 * and memory are linear in the layer count (cm.h), so the DP uses exact per-layer
 * coefficients. For a fixed t_max, the DP F(r, k, d) = least sum, over r stages covering
 * layers [k, K) from GPU d with every u_i <= t_max, of t_i plus the boundary terms (and, for
 * the first stage, the tail term) is exact over the space, and is a lower bound of
 * T - (m - 1) max_s u_s (the first way: with (m - 1) q_0 in the sum). For every plan whose
 * max_i u_i lies in [a, b],
 *     T >= F(b) + (m - 1) a,
 * because the plan is a candidate of the DP at b. The unit splits [a0, b0] into such
 * intervals (branch and bound on t_max): a0 = K * min over stage types of (GPUs * time per
 * layer) / N (the sum over stages of GPUs * t_i is at least that, and at most N max t_i <=
 * N max u_i); b0 is the max u_i of the relaxed DP's plan without a t_max (beyond it the
 * relaxed F no longer falls and the (m - 1) t_max term only grows). A DP solution at t with
 * actual max t' <= t resolves [t', t] (F(t') = F(t)) when t' is the largest u_i of the plan
 * of least sum (score_solve). Where splitting cannot raise an interval's bound (F flat on it),
 * its plans under the target are enumerated and scored (enum_close); one cut short by its cap
 * keeps its DP bound, and the unit stops when no open interval is below it. The unit's bound
 * is the least of its intervals' bounds (the larger of the two ways'); the run's bound is the
 * least over units, and the uniform space's own optimum is its exact bound (its compute
 * bound when the time limit cut it).
 * The DP's plans (the best per stage count at each t_max tried) are scored by cm_eval: they
 * are the upper bounds; gap = (best - bound) / bound. Left out of the bound (so only
 * loosening it): the exposed DP reduction of stages after the first, how much a boundary
 * exceeds the least its blocks allow, and the slowest stage and the slowest boundary being
 * different stages. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search_int.h"

#define SUBNODE_MAX_NODES 8  /* blocks inside a node on clusters of at most this many nodes */
#define ALL_COUNTS_NODES 32  /* every node count up to this many nodes */
#define EVAL_PER_SOLVE 8     /* DP plans scored by cm_eval per t_max tried (best stage counts) */

typedef struct gl_state {
  search_uspace *u;
  search__top utop;          /* the uniform space's best plans */
  long long u_evals, u_feasible, u_pruned;
  int u_complete;
  char u_why[256];
  double u_excess;
  double incumbent;          /* the uniform optimum (INFINITY when nothing fits) */
  int *mbcount;              /* microbatch counts searched */
  int nm, sps[2], nsp, zs[2], nz;
  unsigned rmask[3];         /* recomputation per unit: every allowed value (one mask), or
                                one value per unit with --same-recompute */
  int nr;
  int *sizes, nsizes;        /* block sizes in GPUs */
  int sub_node;              /* 1: positions are GPUs; 0: nodes */
  int period;                /* position classes: d mod period */
  int island;                /* --hierarchy: GPUs of an island (0: off) */
  double nonuniform_size;    /* plans of the non-uniform part (counted in doubles) */
} gl_state;

/* ---- prepare ----------------------------------------------------------------------------- */

static int smooth(int n) {
  while (n % 2 == 0) n /= 2;
  while (n % 3 == 0) n /= 3;
  return n == 1;
}

static int gcd(int a, int b) { return b ? gcd(b, a % b) : a; }

static int block_sizes(gl_state *s, const spec_cluster *c, pp_err *err) {
  int gpn = c->gpus_per_node, nodes = c->gpus / gpn;
  s->sizes = malloc((size_t)(nodes + 32) * sizeof *s->sizes);
  if (!s->sizes) return pp_err_set(err, PP_NOMEM, "search: out of memory");
  s->sub_node = nodes <= SUBNODE_MAX_NODES;
  if (s->sub_node)
    for (int g = 1; g < gpn; g *= 2)
      if (gpn % g == 0) s->sizes[s->nsizes++] = g;
  for (int n = 1; n <= nodes; n++)
    if (nodes <= ALL_COUNTS_NODES || n <= 8 || smooth(n) || n == nodes)
      s->sizes[s->nsizes++] = n * gpn;
  if (s->island) { /* the two-level space: 2^k GPUs below an island, whole islands above */
    int w = 0, I = s->island;
    for (int z = 0; z < s->nsizes; z++) {
      int S = s->sizes[z];
      if (search_island_block_ok(I, 0, S)) s->sizes[w++] = S;
    }
    s->nsizes = w;
  }
  int dom = c->nvlink.domain_gpus;
  if (c->network.kind == SPEC_NET_TORUS) {
    /* GPU ids run x fastest: adding one plane (X * Y ids) moves every GPU one step along z,
     * an automorphism of the torus, and keeps a block's nodes, z-extent and x/y coordinates;
     * so blocks one plane apart are priced alike (cm_place_list reads nothing else) */
    int plane = c->network.dims[0] * c->network.dims[1];
    s->period = plane > 0 && plane % gpn == 0 && c->gpus % plane == 0 ? plane : c->gpus;
  } else if (dom > 1 && dom < c->gpus)
    s->period = dom / gcd(dom, gpn) * gpn;
  else
    s->period = gpn;
  return PP_OK;
}

static int valid_cfg(const search__run *run, int tp, int cp, int ep, int dp, int sp);
static int gpu_at(const gl_state *s, const spec_cluster *c, int p);
static int fits_at(const gl_state *s, const spec_cluster *c, int S, int d);

/* Configurations a block of S GPUs may run (tp, cp, dp, ep, recompute) with `samples`
 * sequences per microbatch: the count the space size multiplies by. */
static int count_cfgs(const search__run *run, int I, int S, int samples, int sp, unsigned rmask) {
  const search_space *s = &run->o->space;
  int n = 0, rcs = 0;
  for (int r = 0; r < 3; r++) rcs += (rmask >> r) & 1;
  for (int tp = 1; tp <= S; tp++)
    for (int cp = 1; S % tp == 0 && cp <= S / tp; cp++) {
      if ((S / tp) % cp) continue;
      int dp = S / tp / cp;
      if (samples % dp || (s->max_mbs && samples / dp > s->max_mbs)) continue;
      /* ep divides dp (valid_cfg); the island term is search_island_stage_ok's group rule
       * on an island-aligned block, counted without listing the block's GPUs */
      for (int ep = 1; ep <= dp; ep++)
        n += dp % ep == 0 && valid_cfg(run, tp, cp, ep, dp, sp) &&
                     (!I || S < I || (I % (tp * cp) == 0 && I % (tp * ep) == 0))
                 ? rcs
                 : 0;
    }
  return n;
}

/* Plans of the non-uniform part for one (microbatch count, sp, ZeRO): paths of stages over
 * layers and positions, each stage a block that fits where it starts, one of its
 * configurations and any layer count (a count, not a search; doubles, it can be huge). */
static double count_paths(const gl_state *s, const search__run *run, int samples, int sp,
                          unsigned rmask) {
  const spec_cluster *c = &run->c;
  int K = run->m.layers, P = s->sub_node ? c->gpus : c->gpus / c->gpus_per_node;
  double *cnt = calloc((size_t)(K + 2) * (size_t)(P + 1), sizeof *cnt); /* suffix sums over k */
  int *ncfg = malloc((size_t)s->nsizes * sizeof *ncfg);
  if (!cnt || !ncfg) {
    free(cnt), free(ncfg);
    return 0;
  }
  for (int z = 0; z < s->nsizes; z++)
    ncfg[z] = count_cfgs(run, s->island, s->sizes[z], samples, sp, rmask);
#define CNT(k, p) cnt[(size_t)(k) * (size_t)(P + 1) + (size_t)(p)]
  /* CNT(k, p) = plans of the stages from layer k at position p; S(k, p) = sum over k' >= k */
  double *suf = calloc((size_t)(K + 2) * (size_t)(P + 1), sizeof *suf);
  if (!suf) {
    free(cnt), free(ncfg);
    return 0;
  }
  for (int p = P; p >= 0; p--) {
    CNT(K, p) = 1;
    suf[(size_t)K * (P + 1) + p] = 1;
    for (int k = K - 1; k >= 0; k--) {
      double v = 0;
      int d = gpu_at(s, c, p);
      for (int z = 0; z < s->nsizes && p < P; z++) {
        int S = s->sizes[z];
        if (!fits_at(s, c, S, d) || !ncfg[z]) continue;
        if (k == 0 && p == 0 && S == c->gpus) continue; /* uniform */
        int pn = s->sub_node ? d + S : (d + S) / c->gpus_per_node;
        v += ncfg[z] * suf[(size_t)(k + 1) * (P + 1) + pn];
      }
      CNT(k, p) = v;
      suf[(size_t)k * (P + 1) + p] = v + suf[(size_t)(k + 1) * (P + 1) + p];
    }
  }
  double total = CNT(0, 0);
#undef CNT
  free(cnt), free(suf), free(ncfg);
  return total;
}

/* The non-uniform units (microbatch counts, sp, ZeRO and, with --same-recompute, the one
 * recomputation of every stage) and the size of their space. */
static int count_nonuniform(gl_state *s, const search__run *run, pp_err *err) {
  const search_space *sp = &run->o->space;
  s->mbcount = malloc((size_t)sp->gbs * sizeof *s->mbcount);
  if (!s->mbcount) return pp_err_set(err, PP_NOMEM, "search: out of memory");
  for (int m = 1; m <= sp->gbs; m++)
    if (sp->gbs % m == 0) s->mbcount[s->nm++] = m;
  for (int v = 0; v < 2; v++)
    if (sp->sp & (1u << v)) s->sps[s->nsp++] = v;
  for (int z = 0; z < 2; z++)
    if (sp->zero & (1u << z)) s->zs[s->nz++] = z;
  for (int r = 0; r < 3; r++)
    if (sp->same_recompute && (sp->recompute & (1u << r))) s->rmask[s->nr++] = 1u << r;
  if (!sp->same_recompute) s->rmask[s->nr++] = sp->recompute;
  for (int i = 0; i < s->nm; i++)
    for (int v = 0; v < s->nsp; v++)
      for (int r = 0; r < s->nr; r++)
        s->nonuniform_size +=
            s->nz * count_paths(s, run, sp->gbs / s->mbcount[i], s->sps[v], s->rmask[r]);
  return PP_OK;
}

static int gl_prepare(search__run *run, pp_err *err) {
  gl_state *s = calloc(1, sizeof *s);
  if (!s) return pp_err_set(err, PP_NOMEM, "search: out of memory");
  run->state = s;
  const search_space *sp = &run->o->space;
  int rc = search_uspace_build(sp, &run->m, &run->c, &s->u, err);
  s->island = search_island_gpus(sp, &run->c);
  if (!rc) rc = block_sizes(s, &run->c, err);
  if (rc) return rc;
  if (run->sizing) { /* counting only: the sizes below, no search */
    s->incumbent = INFINITY;
    if (!sp->uniform_only) rc = count_nonuniform(s, run, err);
    return rc;
  }
  /* the uniform space, exhaustively, on the caller's model (one thread: deterministic) */
  search__unit u = {.run = run, .cm = run->cm, .unit = 0, .complete = 1,
                    .min_excess_gib = INFINITY};
  if ((rc = search__top_init(&u.top, run->o->top, err))) return rc;
  rc = search__uniform_range(&u, s->u, 0, search_uspace_size(s->u), err);
  s->utop = u.top;
  s->u_evals = u.evaluations, s->u_feasible = u.feasible, s->u_pruned = u.pruned;
  s->u_complete = u.complete;
  s->u_excess = u.min_excess_gib;
  memcpy(s->u_why, u.why, sizeof s->u_why);
  s->incumbent = s->utop.n ? s->utop.e[0].cm.iter_time_s : INFINITY;
  if (rc || sp->uniform_only) return rc;
  return count_nonuniform(s, run, err);
}

static void gl_release(search__run *run) {
  gl_state *s = run->state;
  if (!s) return;
  search_uspace_free(s->u);
  search__top_free(&s->utop);
  free(s->mbcount);
  free(s->sizes);
  free(s);
  run->state = NULL;
}

/* Whether the space holds the non-uniform part: it runs 1F1B only, so a space of other
 * schedules (--schedules gpipe) leaves it out. */
static int nonuniform_on(const search__run *run) {
  unsigned sched = run->o->space.schedules;
  return !sched || (sched & (1u << SPEC_SCHED_1F1B));
}

static int gl_units(search__run *run, int *n, pp_err *err) {
  (void)err;
  gl_state *s = run->state;
  *n = 2 + (nonuniform_on(run) ? s->nm * s->nsp * s->nz * s->nr : 0);
  return PP_OK;
}

static double gl_space(search__run *run) {
  gl_state *s = run->state;
  return (double)search_uspace_size(s->u) + (nonuniform_on(run) ? s->nonuniform_size : 0);
}

/* ---- stage types ------------------------------------------------------------------------- */

/* One configuration of one block size at one position class, as the DP prices it. */
typedef struct gtype {
  int size;
  cm_stage_cfg cfg;
  double l;       /* time per layer per microbatch */
  double x[4];    /* extra time [first + 2 * last]: embedding, head */
  double xu[4];   /* x plus the stage's share of the slowest-boundary bound (p2p_share): what
                     the t_max of the branch and bound limits is layers * l + xu[q] */
  double mb[4];   /* memory without layers and activations, GiB [first + 2 * last] */
  double ml;      /* memory per layer without activations, GiB */
  double ma;      /* activations per layer per in-flight microbatch, GiB */
  double *tail0;  /* blocks at GPU 0: [c] the tail this block charges as the first stage
                     with c layers (cm_stage_tail, nothing later to hide behind); else NULL */
} gtype;

typedef struct gtab {
  gtype *t;
  int n, cap;
  int *first, *count; /* [size index * period + class]: types of that block, the DP's (not
                         dominated) first */
  int *all;           /* [slot]: count plus the dominated ones after them (the enumeration of
                         plans near the bound takes those too: cm_eval charges terms the DP
                         does not see, so a dominated type can still give the best plan) */
  double *bnd;        /* [slot]: the least transfer from that block to any next one, times
                         pp_p2p_per_mb (what each boundary adds to the bound: see p2p_bound) */
  int K;
} gtab;

/* b at least as good as a everywhere (time, memory, and as a first stage its tail) */
static int dominated(const gtype *a, const gtype *b, int K) {
  if (b->l > a->l || b->ml > a->ml || b->ma > a->ma) return 0;
  for (int q = 0; q < 4; q++)
    if (b->x[q] > a->x[q] || b->mb[q] > a->mb[q]) return 0;
  for (int c = 1; a->tail0 && c <= K; c++)
    if (b->tail0[c] > a->tail0[c]) return 0;
  return 1;
}

static int valid_cfg(const search__run *run, int tp, int cp, int ep, int dp, int sp) {
  const spec_model *m = &run->m;
  const search_space *s = &run->o->space;
  if ((s->max_tp && tp > s->max_tp) || (s->max_cp && cp > s->max_cp) ||
      (s->max_ep && ep > s->max_ep) || (s->max_dp && dp > s->max_dp))
    return 0;
  if (m->heads % tp || m->kv_heads % tp || m->ffn_hidden % tp) return 0;
  if (cp > 1 && m->seq_len % (2 * cp)) return 0;
  if (sp && tp > 1 && (m->seq_len / cp) % tp) return 0;
  if (ep > 1 && (!m->experts || m->experts % ep)) return 0;
  return dp % ep == 0;
}

static int add_type(gtab *T, const gtype *g, pp_err *err) {
  if (T->n == T->cap) {
    int cap = T->cap ? 2 * T->cap : 256;
    gtype *t = realloc(T->t, (size_t)cap * sizeof *t);
    if (!t) return pp_err_set(err, PP_NOMEM, "search: out of memory");
    T->t = t, T->cap = cap;
  }
  T->t[T->n++] = *g;
  return PP_OK;
}

/* Orders the n types from `first`: those no other type dominates first (of two equal types
 * the earlier stays), then the dominated; returns how many are not dominated (-1: no memory).
 * Each type is compared with the undominated so far only (domination is transitive). */
static int partition_types(gtab *T, int first, int n, pp_err *err) {
  if (n == 0) return 0; /* no type (T->t may still be NULL) */
  gtype *t = T->t + first, *tmp = malloc((size_t)n * sizeof *tmp);
  int *keep = malloc((size_t)n * sizeof *keep);
  char *dom = calloc((size_t)n, 1);
  if (!tmp || !keep || !dom) {
    free(tmp), free(keep), free(dom);
    pp_err_set(err, PP_NOMEM, "search: out of memory");
    return -1;
  }
  int nk = 0;
  for (int i = 0; i < n; i++) {
    int beaten = 0;
    for (int j = 0; j < nk && !beaten; j++) beaten = dominated(&t[i], &t[keep[j]], T->K);
    if (beaten) {
      dom[i] = 1;
      continue;
    }
    int w = 0;
    for (int j = 0; j < nk; j++)
      if (dominated(&t[keep[j]], &t[i], T->K))
        dom[keep[j]] = 1;
      else
        keep[w++] = keep[j];
    nk = w;
    keep[nk++] = i;
  }
  int w = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < n; i++)
      if (dom[i] == pass) tmp[w++] = t[i];
  memcpy(t, tmp, (size_t)n * sizeof *t);
  free(tmp), free(keep), free(dom);
  return nk;
}

/* The types of block size S starting at GPU d (a representative of its class). */
static int block_types(search__unit *u, int S, int d, int samples, int sp, int zero,
                       unsigned rmask, gtab *T, size_t slot, pp_err *err) {
  const search_space *s = &u->run->o->space;
  int *gpus = malloc((size_t)S * sizeof *gpus);
  if (!gpus) return pp_err_set(err, PP_NOMEM, "search: out of memory");
  for (int i = 0; i < S; i++) gpus[i] = d + i;
  int rc = PP_OK, first = T->n;
  for (int tp = 1; tp <= S && !rc; tp++) {
    if (S % tp) continue;
    for (int cp = 1; cp <= S / tp && !rc; cp++) {
      if ((S / tp) % cp) continue;
      int dp = S / tp / cp;
      if (samples % dp || (s->max_mbs && samples / dp > s->max_mbs)) continue;
      for (int ep = 1; ep <= dp && !rc; ep++) { /* ep divides dp (valid_cfg) */
        if (dp % ep || !valid_cfg(u->run, tp, cp, ep, dp, sp)) continue;
        if (!search_island_stage_ok(((gl_state *)u->run->state)->island, gpus, S, tp, cp, ep))
          continue;
        for (int r = 0; r < 3 && !rc; r++) {
          if (!(rmask & (1u << r))) continue;
          gtype g = {.size = S};
          g.cfg = (cm_stage_cfg){tp, cp, dp, ep, samples / dp, sp, (spec_recompute)r};
          cm_stage_coef co;
          if ((rc = cm_stage_coef_get(u->cm, &g.cfg, gpus, S, &co, err))) break;
          for (int q = 0; q < 4; q++) {
            g.x[q] = g.xu[q] = cm_stage_time(u->cm, &co, 0, q & 1, q >> 1, zero);
            cm_memory mem;
            cm_stage_memory(u->cm, &co, 0, q & 1, q >> 1, zero, 0, &mem);
            g.mb[q] = mem.total_gib;
          }
          g.l = cm_stage_time(u->cm, &co, 1, 0, 0, zero) - g.x[0];
          cm_memory m1, m1a;
          cm_stage_memory(u->cm, &co, 1, 0, 0, zero, 0, &m1);
          cm_stage_memory(u->cm, &co, 1, 0, 0, zero, 1, &m1a);
          g.ml = m1.total_gib - g.mb[0];
          g.ma = m1a.total_gib - m1.total_gib;
          if (d == 0) {
            int K = u->run->m.layers;
            if (!(g.tail0 = malloc((size_t)(K + 1) * sizeof *g.tail0))) {
              rc = pp_err_set(err, PP_NOMEM, "search: out of memory");
              break;
            }
            for (int cc = 1; cc <= K; cc++)
              g.tail0[cc] = cm_stage_tail(u->cm, &co, cc, 1, cc == K, zero, 0);
          }
          if ((rc = add_type(T, &g, err))) free(g.tail0);
        }
      }
    }
  }
  free(gpus);
  if (rc) return rc;
  T->first[slot] = first;
  T->all[slot] = T->n - first;
  T->count[slot] = partition_types(T, first, T->n - first, err);
  return T->count[slot] < 0 ? err->code : PP_OK;
}

/* Position p (GPU or node index) to GPU id. */
static int gpu_at(const gl_state *s, const spec_cluster *c, int p) {
  return s->sub_node ? p : p * c->gpus_per_node;
}

/* May a block of S GPUs start at GPU d? */
static int fits_at(const gl_state *s, const spec_cluster *c, int S, int d) {
  int gpn = c->gpus_per_node, I = s->island;
  if (d + S > c->gpus) return 0;
  if (I && !search_island_block_ok(I, d, S)) return 0;
  if (S < gpn) return s->sub_node && d % gpn + S <= gpn;
  return d % gpn == 0;
}

/* Builds the stage types of every block class; *expired is set (and the table left partial)
 * when the run's time limit passes first. */
static int build_types(search__unit *u, int samples, int sp, int zero, unsigned rmask, gtab *T,
                       int *expired, pp_err *err) {
  gl_state *s = u->run->state;
  size_t slots = (size_t)s->nsizes * (size_t)s->period;
  T->first = malloc(slots * sizeof *T->first);
  T->count = calloc(slots, sizeof *T->count);
  T->all = calloc(slots, sizeof *T->all);
  if (!T->first || !T->count || !T->all) return pp_err_set(err, PP_NOMEM, "search: out of memory");
  for (size_t i = 0; i < slots; i++) T->first[i] = -1;
  T->K = u->run->m.layers;
  const spec_cluster *c = &u->run->c;
  for (int z = 0; z < s->nsizes; z++)
    for (int d = 0; d < c->gpus && d < s->period; d++) {
      int S = s->sizes[z];
      /* the class of d is d itself: the first block that starts there represents it */
      if (!fits_at(s, c, S, d)) continue;
      if (search__expired(u->run)) {
        *expired = 1;
        return PP_OK;
      }
      size_t slot = (size_t)z * s->period + (size_t)d;
      if (block_types(u, S, d, samples, sp, zero, rmask, T, slot, err)) return err->code;
    }
  return PP_OK;
}

static void free_types(gtab *T) {
  for (int i = 0; i < T->n; i++) free(T->t[i].tail0);
  free(T->t), free(T->first), free(T->count), free(T->all), free(T->bnd);
  memset(T, 0, sizeof *T);
}

/* ---- the DP ------------------------------------------------------------------------------ */

typedef struct gdp {
  int K, R, D;        /* layers, most stages, positions (0 .. D) */
  int m;              /* microbatches */
  double hbm;         /* GiB */
  double tail_lb;     /* the tail's static bound (the first stage's own tail when larger) */
  double *G;          /* [(r * (D + 1) + p) * (K + 1) + k]: least sum, INFINITY: none */
  int32_t *ty;        /* chosen type */
  int16_t *nk;        /* next stage's first layer */
  int8_t *nc;         /* next stage's class */
  int C;              /* classes of the last solve: c < C exactly c stages from here on, C: at
                         least C (memory needs only min(stages left, m)) when open, else
                         exactly C */
  int shared;         /* 1: t_max limits u (stage time and its slowest-boundary share);
                         0: stage times, and the first boundary counts m times (p2p_bound) */
  int open;           /* 0: --max-pp cuts R below what layers and positions allow, so every
                         class is an exact count (C = R) and none continues into itself */
  double tmax_solved; /* the last finished solve's t_max and in-flight cap (mcap 0: none) */
  int mcap_solved;
  double *mrow;       /* a merged row of two classes */
  int16_t *lo, *hi;   /* [r * (D + 1) + p]: the finite k of that row lie in [lo, hi] */
  int *mid_ix, *mid_c; /* per slot, from mid_first: the types worth a middle stage at the
                           class's (t_max, in flight) and their most layers (mid_filter) */
  int *mid_first, *mid_n;
  int *dq;            /* deque: k' */
  double *dv;         /* deque: values */
} gdp;

/* Cell (r, p, k): rows of k are contiguous (the windows below run along k). */
#define ROW(D_, r, p) (((size_t)(r) * (size_t)((D_)->D + 1) + (size_t)(p)))
#define IDX(D_, r, k, p) (ROW(D_, r, p) * (size_t)((D_)->K + 1) + (size_t)(k))

/* The constant part of what t_max limits: the stage's extra time, with its share of the
 * slowest boundary when the bound shares it out (gdp.shared, p2p_bound). */
static double xt(const gtype *g, int q, int shared) { return shared ? g->xu[q] : g->x[q]; }

/* Layers a stage of type g may take within t_max and memory, with f microbatches in flight. */
static int max_layers(const gtype *g, int q, int shared, double tmax, double hbm, int f) {
  double room_t = tmax - xt(g, q, shared), room_m = hbm - g->mb[q];
  if (room_t < 0 || room_m < 0) return 0;
  double per_m = g->ml + f * g->ma;
  double ct = g->l > 0 ? floor(room_t / g->l * (1 + 1e-12)) : 1e9;
  double cm = per_m > 0 ? floor(room_m / per_m * (1 + 1e-12)) : 1e9;
  double c = ct < cm ? ct : cm;
  return c > 32767 ? 32767 : (int)c;
}


/* Middle stage of type g (index tix) from position p in class c: for every k, the best next
 * first layer k' in [k + 1, min(k + C, hi_lim)] by a sliding-window minimum of nx(k') + k' l
 * (k descending, so the window slides down). nx is the next row (lo .. hi finite). */
static void window(gdp *D, const gtype *g, int tix, int C, int c, int p, const double *nx,
                   int lo, int hi, double bnd, const int8_t *ncls) {
  double *out = D->G + IDX(D, c, 0, p);
  size_t base = IDX(D, c, 0, p);
  int hi_lim = D->K - (c - 1) < hi ? D->K - (c - 1) : hi;
  int khi = hi_lim - 1, klo = lo - C > 1 ? lo - C : 1;
  int *dq = D->dq, head = 0, tail = 0, next_add = hi_lim;
  double *dv = D->dv, l = g->l, x = g->x[0] + bnd;
  for (int k = khi; k >= klo; k--) {
    for (; next_add >= k + 1; next_add--) {
      double hv = nx[next_add];
      if (hv == INFINITY) continue;
      hv += next_add * l;
      while (tail > head && dv[tail - 1] >= hv) tail--;
      dq[tail] = next_add, dv[tail++] = hv;
    }
    while (tail > head && dq[head] > k + C) head++;
    if (tail == head) continue;
    double t = dv[head] - k * l + x;
    if (t < out[k]) {
      size_t at = base + (size_t)k;
      out[k] = t, D->ty[at] = tix, D->nk[at] = (int16_t)dq[head], D->nc[at] = ncls[dq[head]];
    }
  }
}

/* The row a stage of class c at position pn continues into: class c - 1, and for the top
 * class also itself (at least C stages may be followed by at least C). Returns the row (a
 * merged copy when two), its finite range, and per k the class it came from. */
static const double *next_row(gdp *D, int c, int pn, int *lo, int *hi, int8_t *cls) {
  int K = D->K, a = c > 1 ? c - 1 : 0, b = c == D->C && D->open ? c : 0;
  if (!b || !a) {
    int one = a ? a : b;
    *lo = D->lo[ROW(D, one, pn)], *hi = D->hi[ROW(D, one, pn)];
    for (int k = 0; k <= K; k++) cls[k] = (int8_t)one;
    return D->G + IDX(D, one, 0, pn);
  }
  const double *ra = D->G + IDX(D, a, 0, pn), *rb = D->G + IDX(D, b, 0, pn);
  for (int k = 0; k <= K; k++) {
    int fromb = rb[k] < ra[k];
    D->mrow[k] = fromb ? rb[k] : ra[k];
    cls[k] = (int8_t)(fromb ? b : a);
  }
  int la = D->lo[ROW(D, a, pn)], lb = D->lo[ROW(D, b, pn)];
  int ha = D->hi[ROW(D, a, pn)], hb = D->hi[ROW(D, b, pn)];
  *lo = la < lb ? la : lb, *hi = ha > hb ? ha : hb;
  return D->mrow;
}

/* The types a middle stage of each slot needs at (tmax, f in flight): it costs
 * (layers * l + x[0] + bnd) and takes at most C layers, so a type with l, x[0] no lower and C
 * no higher than another's can only tie it (window); those are left out. The first and last
 * stages (other x, memory and tail) take every type. */
static void mid_filter(const gl_state *s, const gtab *T, gdp *D, double tmax, int f) {
  size_t slots = (size_t)s->nsizes * (size_t)s->period;
  int w = 0;
  for (size_t slot = 0; slot < slots; slot++) {
    D->mid_first[slot] = w, D->mid_n[slot] = 0;
    if (T->first[slot] < 0) continue;
    int n0 = w;
    for (int ti = 0; ti < T->count[slot]; ti++) {
      int tix = T->first[slot] + ti, C = max_layers(&T->t[tix], 0, D->shared, tmax, D->hbm, f);
      if (C < 1) continue;
      const gtype *g = &T->t[tix];
      int beaten = 0;
      for (int j = n0; j < w && !beaten; j++) {
        const gtype *h = &T->t[D->mid_ix[j]];
        beaten = h->l <= g->l && h->x[0] <= g->x[0] && D->mid_c[j] >= C;
      }
      if (beaten) continue;
      int v = n0; /* drop the kept ones this one beats */
      for (int j = n0; j < w; j++) {
        const gtype *h = &T->t[D->mid_ix[j]];
        if (!(g->l <= h->l && g->x[0] <= h->x[0] && C >= D->mid_c[j]))
          D->mid_ix[v] = D->mid_ix[j], D->mid_c[v++] = D->mid_c[j];
      }
      w = v;
      D->mid_ix[w] = tix, D->mid_c[w++] = C;
    }
    D->mid_n[slot] = w - n0;
  }
}

/* Solves F for t_max with stages' in-flight microbatches taken as min(stages left, mcap):
 * mcap = m is exact; a smaller mcap under-counts memory, a relaxation whose values are lower
 * bounds of the exact ones (mcap = 1: one class, a fast screen). G(c, 0, 0) holds the least
 * sum with c stages (the top class: at least C). Returns 1, the table unfinished, when the
 * run's time limit passes first. */
static int dp_solve(const search__run *run, const gl_state *s, const gtab *T, gdp *D,
                    double tmax, int mcap) {
  const spec_cluster *c = &run->c;
  int K = D->K, P = D->D;
  if (D->mcap_solved == mcap && D->tmax_solved == tmax) return 0; /* the table holds it */
  D->mcap_solved = 0;
  D->C = !D->open || D->R < mcap ? D->R : mcap;
  size_t cells = (size_t)(D->C + 1) * (size_t)(P + 1) * (size_t)(K + 1);
  for (size_t i = 0; i < cells; i++) D->G[i] = INFINITY;
  for (size_t i = 0; i < (size_t)(D->C + 1) * (size_t)(P + 1); i++)
    D->lo[i] = (int16_t)(K + 1), D->hi[i] = -1;
  int8_t cls[32768];
  int f_filtered = 0; /* the in-flight count mid_filter last ran for */
  for (int cl = 1; cl <= D->C; cl++) {
    if (search__expired(run)) return 1; /* a class takes long on a large cluster */
    int f = cl < mcap ? cl : mcap;
    int last_ok = cl == 1, more_ok = cl > 1 || (D->C == 1 && D->open);
    if (more_ok && f != f_filtered) mid_filter(s, T, D, tmax, f_filtered = f);
    for (int p = P - 1; p >= 0; p--) {
      size_t row = ROW(D, cl, p);
      if (P - p < cl) continue; /* every stage takes at least one position */
      int d = gpu_at(s, c, p);
      for (int z = 0; z < s->nsizes; z++) {
        int S = s->sizes[z];
        size_t slot = (size_t)z * s->period + (size_t)(d % s->period);
        if (!fits_at(s, c, S, d) || T->first[slot] < 0) continue;
        int pn = s->sub_node ? d + S : (d + S) / c->gpus_per_node;
        int lo = K + 1, hi = -1;
        const double *nx = NULL;
        if (D->C == 1 && D->open) { /* one class: it continues into itself */
          nx = D->G + IDX(D, 1, 0, pn);
          lo = D->lo[ROW(D, 1, pn)], hi = D->hi[ROW(D, 1, pn)];
          for (int k = 0; k <= K; k++) cls[k] = 1;
        } else if (more_ok) {
          nx = next_row(D, cl, pn, &lo, &hi, cls);
        }
        for (int ti = 0; ti < T->count[slot]; ti++) {
          int tix = T->first[slot] + ti;
          const gtype *g = &T->t[tix];
          /* the last stage: layers k .. K (k = 0 only at position 0; one stage on every GPU
           * is a plan of the uniform space, searched there) */
          if (last_ok && !(p == 0 && S == c->gpus)) {
            /* layers k .. K fit within t_max and memory iff K - k <= most */
            int most = max_layers(g, (p == 0) + 2, D->shared, tmax, D->hbm, f);
            int k0 = p == 0 ? 0 : (K - most > 1 ? K - most : 1);
            for (int k = k0; k < (p == 0 ? (most >= K) : K); k++) {
              int q = (k == 0) + 2;
              double t = (K - k) * g->l + g->x[q];
              if (k == 0) t += fmax(g->tail0[K], D->tail_lb); /* the whole plan: its tail */
              size_t at = IDX(D, cl, k, p);
              if (t < D->G[at]) D->G[at] = t, D->ty[at] = tix, D->nk[at] = (int16_t)K, D->nc[at] = 0;
            }
          }
          if (!more_ok || hi < 0 || p != 0) continue;
          { /* the first stage (k = 0, only at position 0) */
            int C = max_layers(g, 1, D->shared, tmax, D->hbm, f);
            for (int cc = 1; cc <= C && cc <= K - 1 && cc <= hi; cc++) {
              if (nx[cc] == INFINITY) continue;
              /* its boundary counts once in the sum over boundaries and, unless the bound
               * shares the slowest one out, m - 1 times as a bound of it (p2p_bound) */
              double t = cc * g->l + g->x[1] + (D->shared ? 1 : D->m) * T->bnd[slot] +
                         fmax(g->tail0[cc], D->tail_lb) + nx[cc];
              size_t at = IDX(D, cl, 0, 0);
              if (t < D->G[at]) D->G[at] = t, D->ty[at] = tix, D->nk[at] = (int16_t)cc, D->nc[at] = cls[cc];
            }
          }
        }
        for (int j = 0; p != 0 && more_ok && hi >= 0 && j < D->mid_n[slot]; j++) {
          int at = D->mid_first[slot] + j;
          window(D, &T->t[D->mid_ix[at]], D->mid_ix[at], D->mid_c[at], cl, p, nx, lo, hi,
                 T->bnd[slot], cls);
        }
      }
      const double *gr = D->G + IDX(D, cl, 0, p);
      for (int k = 0; k <= K; k++)
        if (gr[k] < INFINITY) {
          if (k < D->lo[row]) D->lo[row] = (int16_t)k;
          D->hi[row] = (int16_t)k;
        }
    }
  }
  D->tmax_solved = tmax, D->mcap_solved = mcap;
  return 0;
}

/* ---- one unit: branch and bound on t_max --------------------------------------------------- */

typedef struct ival {
  double a, b, Gb; /* t_max in [a, b]; a lower bound of the least sum F(b) */
  int flat;        /* 1: Gb = F(t) for every t in [a, b]: splitting cannot raise the bound */
} ival;

typedef struct gunit {
  search__unit *u;
  const gl_state *s;
  gtab T;
  gdp D;
  int m, sp, zero, samples;
  double tail_lb;
  search_stage *st;   /* reconstruction buffer: R stages */
  double *et, *eb;    /* the enumeration's walk, per stage: its time per microbatch, and the
                         p2p of its boundary to the next stage (times pp_p2p_per_mb) */
  double *ebnd;       /* ... what the DP charged for that boundary (bnd; m times the first
                         unless shared) */
  double *eq;         /* [n]: the largest q of stages 0 .. n - 1 of the walk (p2p_bound) */
  int *ids;           /* GPU ids 0 .. N - 1 twice (blocks as pointers into it; p2p_bound) */
} gunit;

/* Rebuilds the plan of r stages from the DP at the last t_max solved; returns its largest
 * stage time (its objective is then G + (m - 1) * that). */
static double rebuild(gunit *g, int r, int *n) {
  const spec_cluster *c = &g->u->run->c;
  gdp *D = &g->D;
  int k = 0, p = 0, cl = r;
  double tmax = 0;
  *n = 0;
  while (cl >= 1 && k < D->K && *n <= D->R) {
    size_t at = IDX(D, cl, k, p);
    const gtype *t = &g->T.t[D->ty[at]];
    int nk = D->nk[at], layers = nk - k, d = gpu_at(g->s, c, p);
    int q = (k == 0) + 2 * (nk == D->K);
    double ti = layers * t->l + xt(t, q, D->shared);
    if (ti > tmax) tmax = ti;
    g->st[(*n)++] = (search_stage){layers, d, t->size, t->cfg.tp, t->cfg.cp, t->cfg.dp,
                                   t->cfg.ep, t->cfg.recompute};
    cl = D->nc[at];
    k = nk;
    p = g->s->sub_node ? d + t->size : (d + t->size) / c->gpus_per_node;
  }
  return tmax;
}

/* Builds the plan of g->st[0 .. n) and scores it with the full cost model; *t gets its
 * iteration time (INFINITY when it does not fit). */
static int score_stages(gunit *g, int n, double *t, pp_err *err) {
  const search__run *run = g->u->run;
  spec_plan p;
  if (search_plan_build(g->st, n, run->o->space.gbs, g->m, g->sp, g->zero, &run->m, &run->c,
                        &p, err))
    return err->code; /* the DP builds only valid plans: a failure is a bug */
  cm_result r;
  int rc = search__eval(g->u, &p, &r, err);
  spec_plan_clear(&p);
  if (t) *t = !rc && r.feasible ? r.iter_time_s : INFINITY;
  return rc;
}

/* Scores the plans of the last exact solve's EVAL_PER_SOLVE best stage-count classes (by DP
 * objective) with the full cost model. Returns in *Gmin the least sum F(t_max) (INFINITY when
 * nothing fits) and in *ls_tmax the largest stage time of the plan that reaches it: F is then
 * flat on [*ls_tmax, t_max] (F(*ls_tmax) <= that plan's sum = F(t_max) <= F(*ls_tmax)), which
 * is what the branch and bound may conclude; another class's plan with a smaller largest stage
 * time and a larger sum says nothing about the plans between the two. */
static int score_solve(gunit *g, double *Gmin, double *ls_tmax, pp_err *err) {
  gdp *D = &g->D;
  double val[EVAL_PER_SOLVE];
  int rr[EVAL_PER_SOLVE], nv = 0;
  *Gmin = INFINITY;
  *ls_tmax = 0;
  for (int r = 1; r <= D->C; r++) {
    double G = D->G[IDX(D, r, 0, 0)];
    if (G == INFINITY) continue;
    int n;
    double tm = rebuild(g, r, &n);
    if (G < *Gmin) *Gmin = G, *ls_tmax = tm;
    double obj = G + (g->m - 1) * tm;
    /* keep the EVAL_PER_SOLVE best objectives, in order */
    if (nv == EVAL_PER_SOLVE && obj >= val[nv - 1]) continue;
    int at = nv < EVAL_PER_SOLVE ? nv++ : nv - 1;
    for (; at > 0 && val[at - 1] > obj; at--) val[at] = val[at - 1], rr[at] = rr[at - 1];
    val[at] = obj, rr[at] = r;
  }
  for (int i = 0; i < nv; i++) {
    int n;
    rebuild(g, rr[i], &n);
    if (score_stages(g, n, NULL, err)) return err->code;
  }
  return PP_OK;
}

/* ---- closing an interval by enumeration ------------------------------------------------- */

/* Where the DP's bound stops short of what cm_eval charges (its p2p and tail terms are lower
 * bounds, dominated types are left out), splitting t_max further cannot close an interval:
 * on a flat interval the DP returns the same plan at every t_max. Such an interval [a, b] is
 * closed by scoring every plan, with every stage within b, whose DP sum + (m - 1) max(a, its
 * largest stage time) is below thr = the best known / (1 + gap): a depth-first walk of the
 * exact table solved at b, from the first stage on, that takes a stage only when the sum so
 * far, the stage, the least sum of the rest (the table's value where it leads) and (m - 1)
 * max(a, the largest stage time so far) stay within thr. Every plan left out has T >= that
 * > thr, so the interval's bound is min(thr, the best plan scored); thr falls to the best
 * plan scored as the walk goes (a plan above it cannot lower that minimum). Dominated types
 * are walked too. From the second stage on the boundary into it is known, and its actual p2p
 * replaces the DP's bound of it; a complete plan is scored by cm_eval only when its bound with
 * every term exact but the tail (enum_leaf_bound) is below thr. At most ENUM_PLANS plans
 * scored and ENUM_NODES stages taken per interval: past that the interval keeps its DP bound
 * and the unit says it did not complete. */
#define ENUM_PLANS 5000
#define ENUM_NODES (50 * ENUM_PLANS)

typedef struct genum {
  double tmax, a, thr, best; /* thr: min(the target, best) */
  double tail;               /* the first stage's tail term of the plan walked */
  long plans, nodes;         /* plans scored; stages taken */
  int stopped; /* 1: the cap or the time limit cut the walk */
} genum;

static int enum_stages(gunit *g, genum *e, int cl, int k, int p, double acc, double mx, int n,
                       pp_err *err);

/* The p2p of the boundary into stage n (n >= 1) as cm_eval prices it, times pp_p2p_per_mb:
 * never less than what the DP charged for it (p2p_bound). */
static double enum_boundary(const gunit *g, int n) {
  const search_stage *a = &g->st[n - 1], *b = &g->st[n];
  return cm_model_params(g->u->cm)->pp_p2p_per_mb *
         cm_stage_p2p(g->u->cm, g->ids + a->first_gpu, a->ngpus, a->tp, g->ids + b->first_gpu,
                      b->ngpus, g->samples);
}

/* What cm_eval charges the walked plan of n stages, but for the tail, for which it takes
 * `tail` (the first stage's own and the optimizer step's bound): the sum of the stage times,
 * (m - 1) times the largest, and the p2p term as pipeline_time charges it, (m + n - 2) times
 * the largest mean of a stage's two boundaries (one for the first and the last). */
static double enum_leaf_bound(const gunit *g, int n, double tail) {
  double sum = 0, mx = 0, qmax = 0;
  for (int i = 0; i < n; i++) {
    sum += g->et[i];
    mx = fmax(mx, g->et[i]);
    double q = n < 2        ? 0
               : i == 0     ? g->eb[0]
               : i == n - 1 ? g->eb[n - 2]
                            : 0.5 * (g->eb[i - 1] + g->eb[i]);
    qmax = fmax(qmax, q);
  }
  return sum + (g->m - 1) * mx + (n > 1 ? (g->m + n - 2) * qmax : 0) + tail;
}

/* Scores the walked plan of n stages unless its bound (enum_leaf_bound) already passes thr. */
static int enum_leaf(gunit *g, genum *e, int n, pp_err *err) {
  if (enum_leaf_bound(g, n, e->tail) > e->thr * (1 + 1e-9)) return PP_OK;
  double real;
  if (score_stages(g, n, &real, err)) return err->code;
  if (real < e->best) e->best = real;
  if (real < e->thr) e->thr = real;
  if (++e->plans >= ENUM_PLANS) e->stopped = 1;
  return PP_OK;
}

/* One stage of type t (slot's bnd) from (cl, k, p) with c layers, after stages of objective
 * acc and largest stage time mx; recurses into the rest. From the second stage on, the boundary
 * into it is known: its actual p2p replaces the DP's bound of it in acc. */
static int enum_take(gunit *g, genum *e, const gtype *t, double bnd, int cl, int k, int p,
                     int c, double acc, double mx, int n, pp_err *err) {
  gdp *D = &g->D;
  const spec_cluster *cs = &g->u->run->c;
  int K = D->K, d = gpu_at(g->s, cs, p), last = k + c == K;
  int q = (k == 0) + 2 * last;
  double ti = c * t->l + t->x[q];
  if (++e->nodes >= ENUM_NODES || ((e->nodes & 1023) == 0 && search__expired(g->u->run))) {
    e->stopped = 1;
    return PP_OK;
  }
  g->st[n] = (search_stage){c, d, t->size, t->cfg.tp, t->cfg.cp, t->cfg.dp, t->cfg.ep,
                            t->cfg.recompute};
  g->et[n] = ti;
  mx = fmax(mx, ti);
  if (k == 0) ti += e->tail = fmax(t->tail0[c], D->tail_lb);
  /* the largest q (see p2p_bound) known: of the stages before this one, exact (both their
   * boundaries are known), and this one's with its boundary in known, the one out bounded */
  double qn = last ? 0 : bnd, pipe;
  if (n > 0) {
    g->eb[n - 1] = enum_boundary(g, n);
    acc += (n == 1 && !D->shared ? D->m : 1) * g->eb[n - 1] - g->ebnd[n - 1];
    double closed = n == 1 ? g->eb[0] : 0.5 * (g->eb[n - 2] + g->eb[n - 1]);
    g->eq[n] = fmax(n > 1 ? g->eq[n - 1] : 0, closed);
    qn = fmax(g->eq[n], last ? g->eb[n - 1] : 0.5 * (g->eb[n - 1] + bnd));
  }
  /* (m - 1) x (the largest stage time + the largest q): shared, >= (m - 1) x the largest u,
   * so that of a; else acc holds (m - 1) q_0 (q_0 = eb[0] once known) and what the largest q
   * known exceeds it by is added */
  if (D->shared)
    pipe = (D->m - 1) * fmax(e->a, mx + qn);
  else
    pipe = (D->m - 1) * (fmax(e->a, mx) + (n > 0 ? fmax(0, qn - g->eb[0]) : 0));
  double slack = 1e-9 * fabs(e->thr);
  if (last) {
    if (acc + ti + pipe > e->thr + slack) return PP_OK;
    return enum_leaf(g, e, n + 1, err);
  }
  ti += g->ebnd[n] = (k == 0 && !D->shared ? D->m : 1) * bnd;
  int pn = g->s->sub_node ? d + t->size : (d + t->size) / cs->gpus_per_node;
  int next[2] = {D->C == 1 && D->open ? 1 : cl - 1, cl == D->C && D->C > 1 && D->open ? cl : 0};
  for (int i = 0; i < 2 && !e->stopped; i++) {
    if (next[i] < 1) continue;
    double rest = D->G[IDX(D, next[i], k + c, pn)];
    if (rest == INFINITY || acc + ti + rest + pipe > e->thr + slack) continue;
    if (enum_stages(g, e, next[i], k + c, pn, acc + ti, mx, n + 1, err)) return err->code;
  }
  return PP_OK;
}

/* Every stage that may start at (class cl, layer k, position p), as the DP takes them. */
static int enum_stages(gunit *g, genum *e, int cl, int k, int p, double acc, double mx, int n,
                       pp_err *err) {
  gdp *D = &g->D;
  const gl_state *s = g->s;
  const spec_cluster *c = &g->u->run->c;
  int K = D->K, d = gpu_at(s, c, p), f = cl < D->m ? cl : D->m;
  int last_ok = cl == 1, more_ok = cl > 1 || (D->C == 1 && D->open);
  for (int z = 0; z < s->nsizes && !e->stopped; z++) {
    int S = s->sizes[z];
    size_t slot = (size_t)z * s->period + (size_t)(d % s->period);
    if (!fits_at(s, c, S, d) || g->T.first[slot] < 0) continue;
    for (int ti = 0; ti < g->T.all[slot] && !e->stopped; ti++) {
      const gtype *t = &g->T.t[g->T.first[slot] + ti];
      double bnd = g->T.bnd[slot];
      /* the last stage (one stage on every GPU is the uniform part's) */
      if (last_ok && !(p == 0 && S == c->gpus) &&
          max_layers(t, (k == 0) + 2, D->shared, e->tmax, D->hbm, f) >= K - k &&
          enum_take(g, e, t, bnd, cl, k, p, K - k, acc, mx, n, err))
        return err->code;
      if (!more_ok) continue;
      int most = max_layers(t, k == 0, D->shared, e->tmax, D->hbm, f);
      for (int cc = 1; cc <= most && k + cc < K && !e->stopped; cc++)
        if (enum_take(g, e, t, bnd, cl, k, p, cc, acc, mx, n, err)) return err->code;
    }
  }
  return PP_OK;
}

/* Closes [a, b] by enumeration (see above): solves the exact table at b, walks it; *lb gets
 * the interval's bound. Returns 1 in *stopped when the cap or the time limit cut it (then
 * *lb is the interval's DP bound, unchanged). */
static int enum_close(gunit *g, double a, double b, double thr, double *lb, int *stopped,
                      pp_err *err) {
  gdp *D = &g->D;
  *stopped = 0;
  if (dp_solve(g->u->run, g->s, &g->T, D, b, g->m)) {
    *stopped = 1;
    return PP_OK;
  }
  genum e = {.tmax = b, .a = a, .thr = thr, .best = INFINITY};
  for (int r = 1; r <= D->C && !e.stopped; r++) {
    double G = D->G[IDX(D, r, 0, 0)];
    if (G == INFINITY || G + (g->m - 1) * a > e.thr * (1 + 1e-9)) continue;
    if (enum_stages(g, &e, r, 0, 0, 0, 0, 0, err)) return err->code;
  }
  *stopped = e.stopped;
  if (!e.stopped) *lb = e.best < thr ? e.best : thr;
  return PP_OK;
}

static int dp_alloc(gunit *g, pp_err *err) {
  const search__run *run = g->u->run;
  const spec_cluster *c = &run->c;
  gdp *D = &g->D;
  D->K = run->m.layers;
  D->D = g->s->sub_node ? c->gpus : c->gpus / c->gpus_per_node;
  D->R = D->K < D->D ? D->K : D->D;
  D->open = 1;
  if (run->o->space.max_pp && run->o->space.max_pp < D->R)
    D->R = run->o->space.max_pp, D->open = 0;
  D->m = g->m;
  D->hbm = c->gpu.hbm_gib;
  size_t cells = (size_t)(D->R + 1) * (size_t)(D->K + 1) * (size_t)(D->D + 1);
  D->G = malloc(cells * sizeof *D->G);
  D->ty = malloc(cells * sizeof *D->ty);
  D->nk = malloc(cells * sizeof *D->nk);
  D->nc = malloc(cells * sizeof *D->nc);
  D->mrow = malloc((size_t)(D->K + 1) * sizeof *D->mrow);
  D->dq = malloc((size_t)(D->K + 2) * sizeof *D->dq);
  size_t slots = (size_t)g->s->nsizes * (size_t)g->s->period, nt = g->T.n ? (size_t)g->T.n : 1;
  D->mid_ix = malloc(nt * sizeof *D->mid_ix);
  D->mid_c = malloc(nt * sizeof *D->mid_c);
  D->mid_first = malloc(slots * sizeof *D->mid_first);
  D->mid_n = malloc(slots * sizeof *D->mid_n);
  D->dv = malloc((size_t)(D->K + 2) * sizeof *D->dv);
  size_t rows = (size_t)(D->R + 1) * (size_t)(D->D + 1);
  D->lo = malloc(rows * sizeof *D->lo);
  D->hi = malloc(rows * sizeof *D->hi);
  g->st = malloc((size_t)(D->R + 1) * sizeof *g->st);
  g->et = malloc((size_t)(D->R + 1) * sizeof *g->et);
  g->eb = malloc((size_t)(D->R + 1) * sizeof *g->eb);
  g->ebnd = malloc((size_t)(D->R + 1) * sizeof *g->ebnd);
  g->eq = malloc((size_t)(D->R + 1) * sizeof *g->eq);
  if (!D->G || !D->ty || !D->nk || !D->nc || !D->mrow || !D->dq || !D->dv || !D->lo || !D->hi ||
      !g->st || !D->mid_ix || !D->mid_c || !D->mid_first || !D->mid_n || !g->et || !g->eb ||
      !g->ebnd || !g->eq)
    return pp_err_set(err, PP_NOMEM, "search: out of memory (global DP of %zu cells)", cells);
  return PP_OK;
}

static void dp_free(gunit *g) {
  free(g->D.G), free(g->D.ty), free(g->D.nk), free(g->D.nc), free(g->D.mrow), free(g->D.dq), free(g->D.dv), free(g->D.lo);
  free(g->D.hi), free(g->st);
  free(g->D.mid_ix), free(g->D.mid_c), free(g->D.mid_first), free(g->D.mid_n);
  free(g->et), free(g->eb), free(g->ebnd), free(g->eq), free(g->ids);
  free_types(&g->T);
}

/* The least transfer, times pp_p2p_per_mb, into a block of Sa GPUs at class d from any block
 * that may precede it (ending where it starts), at a position of d's class where both fit
 * (blocks one period apart are priced alike); 0 where none may (it is then a first stage). */
static double p2p_in(gunit *g, int Sa, int d, double per_mb) {
  const gl_state *s = g->s;
  const spec_cluster *c = &g->u->run->c;
  double best = INFINITY;
  for (int zb = 0; zb < s->nsizes; zb++) {
    int Sb = s->sizes[zb];
    int dd = d < Sb ? d + (Sb - d + s->period - 1) / s->period * s->period : d;
    if (!fits_at(s, c, Sa, dd) || !fits_at(s, c, Sb, dd - Sb)) continue;
    double t = cm_stage_p2p(g->u->cm, g->ids + dd - Sb, Sb, 1, g->ids + dd, Sa, g->samples);
    if (t < best) best = t;
  }
  return best < INFINITY ? per_mb * best : 0;
}

/* Stage-to-stage transfers in the bound. cm_eval charges p2p = pp_p2p_per_mb * (m + P - 2) *
 * max_s q_s, q_s the mean of stage s's two boundaries (its one for the first and the last
 * stage). Since (P - 1) max_s q_s >= the sum over the P - 1 boundaries (see the top),
 *     p2p >= pp_p2p_per_mb * (sum over boundaries + (m - 1) max_s q_s),
 * and (m - 1) max_s q_s is bounded one of two ways (gdp.shared):
 *   - by (m - 1) q_0, the first boundary: the DP charges it m times (once in the sum) and
 *     t_max limits stage times;
 *   - with the (m - 1) max_s t_s of the pipeline, (m - 1) (max_s t_s + max_s q_s) >=
 *     (m - 1) max_s (t_s + q_s): t_max limits u_s = t_s + the stage's bound of q_s (xu,
 *     p2p_share), never below the least first boundary (q_0 <= max_s q_s), and the DP's sum
 *     takes each boundary once.
 * Each boundary costs at least the least transfer from its sending block to any block that
 * may follow it (bnd, the sender's tp at 1: with pp_scatter_gather off the bytes grow with
 * it, with it on they do not depend on it) and at least the least transfer into its receiving
 * block from any block that may precede it (p2p_in); q_s's bound is the first for a first
 * stage, the second for a last one, their mean for a middle one. */
static int p2p_bound(gunit *g, pp_err *err) {
  const gl_state *s = g->s;
  const spec_cluster *c = &g->u->run->c;
  double per_mb = cm_model_params(g->u->cm)->pp_p2p_per_mb;
  size_t slots = (size_t)s->nsizes * (size_t)s->period;
  int *ids = g->ids = malloc((size_t)2 * c->gpus * sizeof *ids); /* kept for the walk */
  g->T.bnd = malloc(slots * sizeof *g->T.bnd);
  if (!ids || !g->T.bnd) return pp_err_set(err, PP_NOMEM, "search: out of memory");
  for (int i = 0; i < 2 * c->gpus; i++) ids[i] = i % c->gpus;
  for (int za = 0; za < s->nsizes; za++)
    for (int d = 0; d < s->period && d < c->gpus; d++) {
      size_t slot = (size_t)za * s->period + (size_t)d;
      int Sa = s->sizes[za];
      double best = INFINITY;
      if (!fits_at(s, c, Sa, d)) {
        g->T.bnd[slot] = 0;
        continue;
      }
      for (int zb = 0; zb < s->nsizes; zb++) {
        int Sb = s->sizes[zb];
        if (!fits_at(s, c, Sb, d + Sa)) continue;
        double t = cm_stage_p2p(g->u->cm, ids + d, Sa, 1, ids + d + Sa, Sb, g->samples);
        if (t < best) best = t;
      }
      g->T.bnd[slot] = best < INFINITY ? per_mb * best : 0;
    }
  return PP_OK;
}

/* Each stage type's share of the slowest boundary (xu, for gdp.shared; see p2p_bound). */
static void p2p_share(gunit *g) {
  const gl_state *s = g->s;
  const spec_cluster *c = &g->u->run->c;
  double per_mb = cm_model_params(g->u->cm)->pp_p2p_per_mb;
  /* every plan of several stages has a first one, at position 0, with a next one: the least
   * bnd of such a block bounds its q, so every stage's (max_s q_s >= q_0) */
  double first = INFINITY;
  for (int za = 0; za < s->nsizes; za++) {
    int Sa = s->sizes[za];
    if (Sa < c->gpus && fits_at(s, c, Sa, 0) && g->T.first[(size_t)za * s->period] >= 0)
      first = fmin(first, g->T.bnd[(size_t)za * s->period]);
  }
  if (first == INFINITY) first = 0;
  for (int za = 0; za < s->nsizes; za++)
    for (int d = 0; d < s->period && d < c->gpus; d++) {
      size_t slot = (size_t)za * s->period + (size_t)d;
      if (g->T.first[slot] < 0) continue;
      double out = g->T.bnd[slot], in = p2p_in(g, s->sizes[za], d, per_mb);
      double share[4] = {fmax(0.5 * (in + out), first), fmax(out, first), fmax(in, first), 0};
      for (int i = 0; i < g->T.all[slot]; i++) {
        gtype *t = &g->T.t[g->T.first[slot] + i];
        for (int q = 0; q < 4; q++) t->xu[q] = t->x[q] + share[q];
      }
    }
}

/* The least sum over every stage count of the last solve, G(c, 0, 0) least over c (with one
 * open class, G(1, 0, 0)); *cls gets its class. */
static double least_sum(const gdp *D, int *cls) {
  double best = INFINITY;
  *cls = 1;
  for (int r = 1; r <= D->C; r++)
    if (D->G[IDX(D, r, 0, 0)] < best) best = D->G[IDX(D, r, 0, 0)], *cls = r;
  return best;
}

/* a0 (see the top of the file) and the tail's lower bound. */
static void static_bounds(gunit *g, double *a0) {
  const search__run *run = g->u->run;
  double best = INFINITY, total = 0;
  for (int i = 0; i < g->T.n; i++) {
    const gtype *t = &g->T.t[i];
    double w = t->size * t->l;
    if (w < best) best = w;
  }
  *a0 = g->T.n ? run->m.layers * best / run->c.gpus : 0;
  /* total parameters from any block's coefficients: per GPU x tp (x ep for experts) */
  cm_stage_cfg one = {1, 1, 1, 1, 1, 0, SPEC_RECOMPUTE_NONE};
  cm_stage_coef co;
  int gpu0 = 0;
  if (!cm_stage_coef_get(g->u->cm, &one, &gpu0, 1, &co, NULL))
    total = run->m.layers * (co.params + co.expert_params) + co.embed_params;
  g->tail_lb = cm_optimizer_time(g->u->cm, total / run->c.gpus);
}

/* The unit's part before the branch and bound: the static bound and the tables. Returns 1
 * when the unit is settled without it (bound_s set), -1 on an error. */
static int bnb_start(gunit *g, double *a0, pp_err *err) {
  search__unit *u = g->u;
  const search__run *run = u->run;
  static_bounds(g, a0);
  if (p2p_bound(g, err)) return -1;
  double lb0 = g->m * *a0 + g->tail_lb;
  if (g->T.n == 0 || lb0 * (1 + run->o->gap) >= g->s->incumbent) { /* cannot beat the uniform optimum */
    u->bound_s = g->T.n ? lb0 : INFINITY;
    u->pruned++;
    return 1;
  }
  u->bound_s = lb0;
  if (search__expired(run)) { /* out of time before it began: only the static bound */
    u->complete = 0;
    return 1;
  }
  if (dp_alloc(g, err)) return -1;
  g->D.tail_lb = g->tail_lb;
  return 0;
}

/* The relaxed DP without a t_max: its least sum G~ is at most every plan's sum, and its plan's
 * largest stage time b0 bounds [b0, inf): there T >= G~ + (m - 1) b0. Returns 1 when that
 * settles the unit's bound (out of time, or nothing fits). */
static int bnb_relaxed(gunit *g, double *Gm, double *tm) {
  search__unit *u = g->u;
  if (dp_solve(u->run, g->s, &g->T, &g->D, INFINITY, 1)) { /* out of time: the static bound */
    u->complete = 0;
    return 1;
  }
  int cls, nst;
  *Gm = least_sum(&g->D, &cls);
  if (*Gm == INFINITY) { /* nothing fits even the relaxation: nothing fits */
    u->bound_s = INFINITY;
    return 1;
  }
  *tm = rebuild(g, cls, &nst);
  return 0;
}

/* After an exact solve at b whose least-sum plan has largest stage time tls and sum Gmin:
 * F = Gmin on [max(tls, a), b] (flat), and [a, tls] keeps F(tls) = Gmin as its bound. */
static int push_solved(ival *iv, int n, double a, double b, double Gmin, double tls) {
  if (Gmin == INFINITY) return n; /* no plan has every stage within b: [a, b] is empty */
  if (tls > a) {
    iv[n++] = (ival){tls, b, Gmin, 1};
    iv[n++] = (ival){a, tls, Gmin, 0};
  } else {
    iv[n++] = (ival){a, b, Gmin, 1};
  }
  return n;
}

/* Branch and bound on t_max (see the top of the file). The unit's bound is the least of its
 * open intervals' bounds and of the closed ones'; it stops when the open ones cannot bring
 * it below the best known / (1 + gap). */
static int bnb_run(gunit *g, double a0, pp_err *err) {
  search__unit *u = g->u;
  const search__run *run = u->run;
  double tm, Gm, stop_gap = 1 + run->o->gap;
  if (bnb_relaxed(g, &Gm, &tm)) return PP_OK;
  double resolved = INFINITY; /* least bound of the intervals closed so far */
  int cap = 64, n = 0, rc = PP_OK;
  ival *iv = malloc((size_t)cap * sizeof *iv);
  if (!iv) return pp_err_set(err, PP_NOMEM, "search: out of memory");
  if (tm > a0) iv[n++] = (ival){a0, tm, Gm, 0};
  iv[n++] = (ival){tm, INFINITY, Gm, 0}; /* [b0, inf): solved exactly without a t_max */
  for (;;) {
    int bi = -1;
    double blb = INFINITY;
    for (int i = 0; i < n; i++) {
      double lb = iv[i].Gb + (g->m - 1) * iv[i].a;
      if (lb < blb) blb = lb, bi = i;
    }
    double best_real = u->top.n ? u->top.e[0].cm.iter_time_s : INFINITY;
    double target = best_real < g->s->incumbent ? best_real : g->s->incumbent;
    u->bound_s = blb < resolved ? blb : resolved; /* the tail is inside G */
    /* closed intervals are final: the open ones cannot bring the bound below what a cut-short
     * enumeration fixed, nor matter once their bound reaches the stopping point */
    if (bi < 0 || blb * stop_gap >= target || blb >= resolved) break;
    if (search__expired(run)) {
      u->complete = 0;
      break;
    }
    if (n + 3 > cap) {
      ival *t = realloc(iv, (size_t)(cap *= 2) * sizeof *iv);
      if (!t) {
        rc = pp_err_set(err, PP_NOMEM, "search: out of memory");
        break;
      }
      iv = t;
    }
    ival I = iv[bi];
    iv[bi] = iv[--n];
    double Gmin, tls;
    if (I.flat || (I.b < INFINITY && I.b - I.a <= 1e-9 * I.b)) {
      /* splitting cannot close it: enumerate the plans its bound leaves open */
      double lb = I.Gb + (g->m - 1) * I.a;
      int stopped;
      if ((rc = enum_close(g, I.a, I.b, target / stop_gap, &lb, &stopped, err))) break;
      if (lb < resolved) resolved = lb;
      if (stopped) u->complete = 0; /* the time limit or ENUM_PLANS: its DP bound stays */
      continue;
    }
    if (I.b == INFINITY) { /* the exact DP without a t_max */
      if (dp_solve(run, g->s, &g->T, &g->D, INFINITY, g->m)) {
        u->complete = 0;
        iv[n++] = I;
        continue; /* the next round records the bound and stops */
      }
      if ((rc = score_solve(g, &Gmin, &tls, err))) break;
      n = push_solved(iv, n, I.a, INFINITY, Gmin, tls);
      continue;
    }
    /* split where the interval's bound would reach the stopping point (then one solve that
     * finds no plan within it closes the interval), else in the middle */
    double crit = (target / stop_gap - I.Gb) / (g->m - 1 > 0 ? g->m - 1 : 1);
    double w = I.b - I.a;
    double mid = crit > I.a + 0.01 * w && crit < I.b - 0.01 * w ? crit : I.a + 0.5 * w;
    /* screen with the one-class relaxation first: when even it finds nothing within mid, or
     * its bound already reaches the stopping point, the exact solve is not needed */
    if (dp_solve(run, g->s, &g->T, &g->D, mid, 1)) {
      u->complete = 0;
      iv[n++] = I;
      continue;
    }
    int cls;
    double Gr = least_sum(&g->D, &cls);
    iv[n++] = (ival){mid, I.b, I.Gb, 0};
    if (Gr == INFINITY || (Gr + (g->m - 1) * I.a) * stop_gap >= target) {
      if (Gr < INFINITY) iv[n++] = (ival){I.a, mid, Gr, 0};
      continue;
    }
    if (dp_solve(run, g->s, &g->T, &g->D, mid, g->m)) {
      u->complete = 0;
      iv[n++] = (ival){I.a, mid, Gr, 0};
      continue;
    }
    if ((rc = score_solve(g, &Gmin, &tls, err))) break;
    n = push_solved(iv, n, I.a, mid, Gmin, tls);
  }
  free(iv);
  return rc;
}

/* The unit's bound: the branch and bound with the first boundary counted m times (p2p_bound);
 * where that stops short (an enumeration cut by its cap), again with the slowest boundary
 * shared out over the stages, which is tighter where a later boundary is the slow one (a
 * pipeline across nodes after one inside a node). Both bound every plan of the unit: the
 * larger holds; the plans either scores stay. */
static int bnb(gunit *g, pp_err *err) {
  search__unit *u = g->u;
  double a0;
  int st = bnb_start(g, &a0, err);
  if (st) return st < 0 ? err->code : PP_OK;
  int way = u->run->o->p2p_way;
  double first = 0;
  if (way != SEARCH_P2P_SHARED) {
    g->D.shared = 0;
    if (bnb_run(g, a0, err)) return err->code;
    if (way == SEARCH_P2P_FIRST || u->complete || search__expired(u->run)) return PP_OK;
    first = u->bound_s;
  }
  u->complete = 1;
  p2p_share(g);
  g->D.shared = 1;
  g->D.mcap_solved = 0; /* the table holds the other way's solve */
  if (bnb_run(g, a0, err)) return err->code;
  if (first > u->bound_s) u->bound_s = first;
  return PP_OK;
}

/* Whether every stage of p recomputes alike (a uniform plan does). */
static int same_recompute(const spec_plan *p) {
  for (int i = 1; i < p->nstages; i++)
    if (p->stages[i].recompute != p->stages[0].recompute) return 0;
  return 1;
}

/* Unit 1: the plans two-level returns (Alpa places sub-meshes largest first, not in stage
 * order, and mixes node-sized and smaller blocks the DP's contiguous blocks do not cover),
 * scored by the same cost model: its plans are part of global's space, so global is never
 * worse than two-level, and this unit's bound is its best plan (a finite set, evaluated). */
static int two_level_unit(search__unit *u, pp_err *err) {
  u->bound_s = INFINITY;
  if (u->run->o->space.uniform_only) return PP_OK; /* the uniform space only: not its part */
  search__run sub = *u->run;
  sub.method = &search__two_level;
  sub.state = NULL;
  search__unit t = {.run = &sub, .cm = u->cm, .unit = 1, .complete = 1,
                    .min_excess_gib = INFINITY};
  pp_err e2 = {0};
  int rc = search__top_init(&t.top, u->run->o->top, &e2);
  if (!rc && !(rc = sub.method->prepare(&sub, &e2))) rc = sub.method->unit(&t, &e2);
  if (sub.method->release) sub.method->release(&sub);
  if (rc == PP_NOMEM || rc == PP_INTERNAL) {
    search__top_free(&t.top);
    *err = e2;
    return rc;
  }
  /* otherwise (e.g. a build without CBC) two-level returns nothing: this part is empty */
  u->evaluations = t.evaluations, u->feasible = t.feasible, u->pruned = t.pruned;
  u->complete = t.complete;
  /* with --hierarchy only its plans that lie in the two-level space (Alpa's may place a
   * stage's sub-mesh across islands of the other kind), with --same-recompute only those whose
   * stages recompute alike */
  u->bound_s = INFINITY;
  for (int i = 0; i < t.top.n && rc != -1; i++) {
    const spec_plan *p = &t.top.e[i].plan;
    if (!search_island_plan_ok(&u->run->o->space, &u->run->c, p) ||
        (u->run->o->space.same_recompute && !same_recompute(p)))
      continue;
    if (t.top.e[i].cm.iter_time_s < u->bound_s) u->bound_s = t.top.e[i].cm.iter_time_s;
    if (search__top_offer(&u->top, &t.top.e[i].plan, &t.top.e[i].cm, 1, err) < 0) rc = -1;
  }
  search__top_free(&t.top);
  return rc == -1 ? err->code : PP_OK;
}

/* A bound that needs no stage types: no plan computes the model's FLOPs faster than every GPU
 * at its highest peak (fp8 where the GPU has it, whatever the dtype: the cost model prices every
 * FLOP at an efficiency of at most 1 of its dtype's peak), iter >= model FLOPs / (N peak); the
 * model FLOPs per iteration are the same for every plan (cm_result.model_flops of the uniform
 * part's best). Without such a plan only the trivial bound (a positive epsilon, so that the
 * run's bound stays honest). */
static double compute_bound(const search__run *run, const gl_state *s) {
  const spec_gpu *g = &run->c.gpu;
  double peak = 1e12 * (g->fp8_tflops > g->bf16_tflops ? g->fp8_tflops : g->bf16_tflops);
  if (s->utop.n && s->utop.e[0].cm.model_flops > 0 && peak > 0)
    return s->utop.e[0].cm.model_flops / (run->c.gpus * peak);
  return 1e-12;
}

static int gl_unit(search__unit *u, pp_err *err) {
  gl_state *s = u->run->state;
  if (u->unit == 0) { /* the uniform space, searched in prepare */
    u->evaluations = s->u_evals, u->feasible = s->u_feasible, u->pruned = s->u_pruned;
    u->complete = s->u_complete;
    /* searched to the end, its optimum is its exact bound (INFINITY: nothing fits); cut short
     * by the time limit, its best plan bounds nothing: only compute does */
    u->bound_s = s->u_complete ? s->incumbent : compute_bound(u->run, s);
    u->min_excess_gib = s->u_excess;
    memcpy(u->why, s->u_why, sizeof u->why);
    for (int i = 0; i < s->utop.n; i++)
      if (search__top_offer(&u->top, &s->utop.e[i].plan, &s->utop.e[i].cm, 0, err) < 0)
        return err->code;
    return PP_OK;
  }
  if (u->unit == 1) return two_level_unit(u, err);
  int i = u->unit - 2;
  gunit g = {.u = u, .s = s};
  unsigned rmask = s->rmask[i % s->nr];
  i /= s->nr;
  g.zero = s->zs[i % s->nz];
  i /= s->nz;
  g.sp = s->sps[i % s->nsp];
  g.m = s->mbcount[i / s->nsp];
  g.samples = u->run->o->space.gbs / g.m;
  int expired = 0;
  int rc = build_types(u, g.samples, g.sp, g.zero, rmask, &g.T, &expired, err);
  if (!rc && expired) { /* out of time before every stage type was priced */
    u->bound_s = compute_bound(u->run, s);
    u->complete = 0;
  } else if (!rc)
    rc = bnb(&g, err);
  dp_free(&g);
  return rc;
}

const search__method search__global = {
    SEARCH_GLOBAL, "global", gl_prepare, gl_units, gl_unit, gl_release, gl_space,
};
