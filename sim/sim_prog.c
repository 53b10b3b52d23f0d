/* Groups, per-GPU programs and the lowering of a plan to them.
 *
 * A GPU's program is the sequence Megatron's schedule runs: for each (forward or backward,
 * microbatch, model chunk) the ops of its parts (embedding, layers, head) as the cost model
 * lists them (cm_part_ops): compute as delays, every TP/SP, CP and EP collective on its group
 * with the algorithm the cost model picks, overlapped communication in helper actors (ring
 * attention, TP overlap, ZeRO-3's prefetched gathers and reduce-scatters); its pipeline sends
 * (asynchronous) and receives (blocking); then the data-parallel gradient reduction (in a
 * helper from the last backward on when the software overlaps it), the optimizer step and the
 * distributed optimizer's parameter gather. Parts are templates run by OP_CALL; at the fast
 * fidelity the ring-form and NVLS collectives nothing overlaps are aggregated per chunk and
 * group (sim/README.md, "Programs"). Every GPU runs its own program, so every group's traffic is on
 * the links at once. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim_int.h"

/* ---- groups --------------------------------------------------------------------------------- */

/* A torus group sends in one channel per (dimension it spans, direction): to the next member
 * along that dimension, wrapping inside the group, so that its flows use every torus link the
 * cost model counts for it (2 per dimension when the dimension closes into a ring, else 1). */
static int torus_channels(sim__world *w, sim__group *g, pp_err *err) {
  const int *d = w->topo.dims;
  int n = g->n, dims[3], nd = 0;
  for (int a = 0; a < 3; a++) {
    int lo = 1 << 30, hi = -1;
    for (int i = 0; i < n; i++) {
      int c = a == 0 ? g->gpus[i] % d[0] : a == 1 ? g->gpus[i] / d[0] % d[1] : g->gpus[i] / (d[0] * d[1]);
      lo = c < lo ? c : lo, hi = c > hi ? c : hi;
    }
    if (hi > lo) dims[nd++] = a;
  }
  int dirs = g->pl.torus_wrap ? 2 : 1;
  g->nch = nd ? nd * dirs : 1;
  g->succ = malloc((size_t)g->nch * n * sizeof *g->succ);
  if (!g->succ) return pp_err_set(err, PP_NOMEM, "sim: out of memory");
  if (!nd) {
    for (int i = 0; i < n; i++) g->succ[i] = (i + 1) % n;
    return PP_OK;
  }
  int stride[3] = {1, d[0], d[0] * d[1]};
  for (int k = 0; k < nd; k++)
    for (int dir = 0; dir < dirs; dir++) {
      int ch = k * dirs + dir, a = dims[k];
      for (int i = 0; i < n; i++) {
        /* the member with the same other coordinates and the next (or previous) coordinate
         * along a among the group's own, cyclically */
        int ci = g->gpus[i] / stride[a] % d[a], best = -1, bestd = 1 << 30, first = -1, firstc = 1 << 30;
        for (int j = 0; j < n; j++) {
          if (g->gpus[j] - g->gpus[j] / stride[a] % d[a] * stride[a] !=
              g->gpus[i] - ci * stride[a])
            continue;
          int cj = g->gpus[j] / stride[a] % d[a];
          int delta = dir == 0 ? cj - ci : ci - cj;
          if (delta > 0 && delta < bestd) bestd = delta, best = j;
          int key = dir == 0 ? cj : -cj;
          if (key < firstc) firstc = key, first = j;
        }
        g->succ[ch * n + i] = best >= 0 ? best : first;
      }
    }
  return PP_OK;
}

void sim__by_gpu(const int *gpus, int n, int *by) {
  for (int i = 0; i < n; i++) by[i] = i;
  for (int i = 1; i < n; i++) /* insertion sort: members mostly come in order */
    for (int j = i; j > 0 && gpus[by[j - 1]] > gpus[by[j]]; j--) {
      int x = by[j];
      by[j] = by[j - 1];
      by[j - 1] = x;
    }
}

/* Each member's predecessor in every channel (succ inverted). */
static int group_pred(sim__group *g, pp_err *err) {
  int nf = g->nch * g->n;
  g->pred = malloc((size_t)(nf > 0 ? nf : 1) * sizeof *g->pred);
  if (!g->pred) return pp_err_set(err, PP_NOMEM, "sim: out of memory");
  for (int f = 0; f < nf; f++) g->pred[f / g->n * g->n + g->succ[f]] = f % g->n;
  return PP_OK;
}

int sim__group_add(sim__world *w, const int *gpus, int n, pp_err *err) {
  if (w->ngroups == w->capgroups) {
    int cap = w->capgroups ? 2 * w->capgroups : 64;
    sim__group *g = realloc(w->groups, (size_t)cap * sizeof *g);
    if (!g) return -pp_err_set(err, PP_NOMEM, "sim: out of memory");
    w->groups = g;
    w->capgroups = cap;
  }
  sim__group *g = &w->groups[w->ngroups];
  memset(g, 0, sizeof *g);
  g->n = n;
  g->gpus = malloc((size_t)n * sizeof *g->gpus);
  if (!g->gpus) return -pp_err_set(err, PP_NOMEM, "sim: out of memory");
  memcpy(g->gpus, gpus, (size_t)n * sizeof *gpus);
  cm_place_list(w->cm, gpus, n, &g->pl);
  const sim__topo *t = &w->topo;
  g->actor0 = gpus[0];
  if (t->torus) return torus_channels(w, g, err) || group_pred(g, err) ? -1 : w->ngroups++;
  /* a ring that leaves its nodes spreads over as many channels as a node has NICs (and
   * members), each leaving the node through another NIC, as NCCL's rings do. NCCL's "node" is
   * an NVLink domain: a ring across multi-node domains (NVL72 racks, NVLink Switch pods) puts
   * its channels on the NICs of all the domain's member nodes, each channel leaving the
   * domain from another member (up to NCCL's 32 channels), as the cost model prices it */
  int unit = t->gpn, per_unit = g->pl.per_node;
  g->nch = 1;
  if (t->nics && t->dom > t->gpn && g->pl.domains > 1) {
    unit = t->dom, per_unit = g->pl.per_domain;
    g->nch = per_unit < SIM__MAXCH ? per_unit : SIM__MAXCH;
  } else if (t->nics && g->pl.nodes > 1 && g->pl.per_node > 1)
    g->nch = g->pl.per_node < t->nics ? g->pl.per_node : t->nics;
  g->succ = malloc((size_t)g->nch * n * sizeof *g->succ);
  int *byrank = malloc((size_t)n * sizeof *byrank), *order = malloc((size_t)n * sizeof *order);
  if (!g->succ || !byrank || !order) {
    free(byrank), free(order);
    return -pp_err_set(err, PP_NOMEM, "sim: out of memory");
  }
  sim__by_gpu(gpus, n, byrank);
  for (int ch = 0; ch < g->nch; ch++) {
    /* within each node (domain), start its run at its ch-th member */
    int at = 0;
    for (int i = 0; i < n;) {
      int node = gpus[byrank[i]] / unit, j = i;
      while (j < n && gpus[byrank[j]] / unit == node) j++;
      int m = j - i;
      for (int k = 0; k < m; k++) order[at++] = byrank[i + (k + ch) % m];
      i = j;
    }
    for (int p = 0; p < n; p++) g->succ[ch * n + order[p]] = order[(p + 1) % n];
  }
  free(byrank), free(order);
  g->actor0 = gpus[0];
  g->relay_node = w->topo.nvs_node && g->pl.domains == 1;
  g->relay_dom = g->relay_node && w->topo.nvs_dom && g->pl.nodes > 1;
  return group_pred(g, err) ? -1 : w->ngroups++;
}

int sim__group_find(sim__world *w, const int *gpus, int n, pp_err *err) {
  for (int i = w->ngroups - 1; i >= 0; i--) {
    const sim__group *g = &w->groups[i];
    if (g->n == n && memcmp(g->gpus, gpus, (size_t)n * sizeof *gpus) == 0) return i;
  }
  return sim__group_add(w, gpus, n, err);
}

int sim__nvlstree_prepare(sim__world *w, int gi, pp_err *err) {
  const sim__topo *t = &w->topo;
  if (w->groups[gi].nt || t->torus) return PP_OK;
  int n = w->groups[gi].n, unit = t->dom > 1 ? t->dom : t->gpn, D = 0, p = 0, ok = 1;
  int *gpus = malloc((size_t)n * sizeof *gpus), *by = malloc((size_t)n * sizeof *by);
  int *sub = malloc((size_t)n * sizeof *sub), *nt = malloc(4 * (size_t)n * sizeof *nt);
  if (!gpus || !by || !sub || !nt) {
    free(gpus), free(by), free(sub), free(nt);
    return pp_err_set(err, PP_NOMEM, "sim: out of memory");
  }
  memcpy(gpus, w->groups[gi].gpus, (size_t)n * sizeof *gpus); /* adding groups moves them */
  sim__by_gpu(gpus, n, by);
  /* domains are runs of `by`: every one must hold p >= 2 members, and there must be two */
  for (int i = 0; i < n && ok;) {
    int j = i;
    while (j < n && gpus[by[j]] / unit == gpus[by[i]] / unit) j++;
    if (D++ == 0) p = j - i;
    ok = j - i == p;
    i = j;
  }
  ok = ok && D > 1 && p > 1;
  for (int d = 0; d < D && ok > 0; d++) { /* domain d: its members in GPU order */
    for (int j = 0; j < p; j++) sub[j] = gpus[by[d * p + j]];
    int id = sim__group_find(w, sub, p, err);
    if (id < 0) ok = -1;
    for (int j = 0; j < p && ok > 0; j++) nt[4 * by[d * p + j]] = id, nt[4 * by[d * p + j] + 1] = j;
  }
  for (int j = 0; j < p && ok > 0; j++) { /* position j of every domain */
    for (int d = 0; d < D; d++) sub[d] = gpus[by[d * p + j]];
    int id = sim__group_find(w, sub, D, err);
    if (id < 0) ok = -1;
    for (int d = 0; d < D && ok > 0; d++) nt[4 * by[d * p + j] + 2] = id, nt[4 * by[d * p + j] + 3] = d;
  }
  free(gpus), free(by), free(sub);
  if (ok > 0) w->groups[gi].nt = nt;
  else free(nt);
  return ok < 0 ? err->code : PP_OK;
}

int sim__op_push(sim__prog *p, const sim__op *op, pp_err *err) {
  if (p->n == p->cap) {
    int cap = p->cap ? 2 * p->cap : 64;
    sim__op *o = realloc(p->ops, (size_t)cap * sizeof *o);
    if (!o) return pp_err_set(err, PP_NOMEM, "sim: out of memory");
    p->ops = o;
    p->cap = cap;
  }
  p->ops[p->n++] = *op;
  return PP_OK;
}

void sim__world_free(sim__world *w) {
  for (int i = 0; i < w->ngroups; i++) {
    free(w->groups[i].box);
    free(w->groups[i].spb);
    free(w->groups[i].nt);
    free(w->groups[i].pred);
    free(w->groups[i].succ);
    free(w->groups[i].gpus);
  }
  free(w->groups);
  for (int i = 0; w->prog && i < w->ngpu; i++) free(w->prog[i].ops);
  free(w->prog);
  free(w->host_of);
  free(w->events);
  free(w->gpu_end);
  free(w->gpu_kind);
  memset(w, 0, sizeof *w);
}

/* ---- the routes a run needs ---------------------------------------------------------------- */

enum { USE_RING = 1, USE_A2A = 2, USE_NVLS = 4, USE_TREE = 8, USE_PAT = 16 };

/* The edges of the group's trees, both ways. */
static int tree_pairs(const sim__world *w, const sim__group *g, sim__pairs *pp) {
  int nch = sim__tree_parents(w, g, NULL), rc = nch < 0;
  int *up = nch > 0 ? malloc((size_t)nch * g->n * sizeof *up) : NULL;
  if (nch > 0 && (!up || sim__tree_parents(w, g, up) != nch)) rc = 1;
  for (int f = 0; !rc && f < nch * g->n; f++)
    if (up[f] >= 0) {
      int a = g->gpus[f % g->n], b = g->gpus[up[f]];
      rc |= sim__pairs_add(pp, a, b) | sim__pairs_add(pp, b, a);
    }
  free(up);
  return rc;
}

static int group_pairs(const sim__world *w, const sim__group *g, unsigned use, sim__pairs *pp) {
  int rc = 0;
  if (use & USE_TREE) rc |= tree_pairs(w, g, pp);
  if (use & USE_PAT) {
    int dist[SIM__PAT_MAXSTEPS], cnt[SIM__PAT_MAXSTEPS], D = sim__pat_steps(g->n, dist, cnt);
    for (int j = 0; j < D; j++)
      for (int m = 0; m < g->n; m++)
        rc |= sim__pairs_add(pp, g->gpus[m], g->gpus[(m + dist[j]) % g->n]);
  }
  if (use & USE_RING)
    for (int ch = 0; ch < g->nch; ch++)
      for (int m = 0; m < g->n; m++) rc |= sim__pairs_add(pp, g->gpus[m], g->gpus[g->succ[ch * g->n + m]]);
  if (use & USE_A2A)
    for (int i = 0; i < g->n; i++)
      for (int j = 0; j < g->n; j++) rc |= sim__pairs_add(pp, g->gpus[i], g->gpus[j]);
  if ((use & USE_NVLS) && g->relay_node)
    for (int i = 0; i < g->n; i++) {
      int x = g->gpus[i], sn = sim__nvs_of(&w->topo, x, 0);
      rc |= sim__pairs_add(pp, x, sn) | sim__pairs_add(pp, sn, x);
      if (g->relay_dom) {
        int sd = sim__nvs_of(&w->topo, x, 1);
        rc |= sim__pairs_add(pp, sn, sd) | sim__pairs_add(pp, sd, sn);
      }
    }
  return rc;
}

/* What each group runs (USE_* bits, from the programs' ops) and, into p2p, the pairs of the
 * pipeline's sends. Returns nonzero when out of memory. */
static int group_uses(const sim__world *w, unsigned *use, sim__pairs *p2p) {
  int rc = 0;
  for (int g = 0; g < w->ngpu; g++)
    for (int i = 0; i < w->prog[g].n; i++) {
      const sim__op *o = &w->prog[g].ops[i];
      int host = w->host_of ? w->host_of[g] : g;
      switch (o->kind) {
      case SIM__OP_BATCH: use[o->group] |= USE_RING; break;
      case SIM__OP_COLL:
        if (o->algo == CM_ALGO_NVLSTREE && sim__nvlstree_ok(w, o->group, o->coll, o->bytes)) {
          /* NVLS inside each domain, a tree across them at each position (sim_coll.c) */
          const sim__group *pg = &w->groups[o->group];
          for (int m = 0; m < pg->n; m++)
            use[pg->nt[4 * m]] |= USE_NVLS, use[pg->nt[4 * m + 2]] |= USE_TREE;
          break;
        }
        use[o->group] |= o->coll == CM_ALL_TO_ALL    ? USE_A2A
                         : o->algo == CM_ALGO_NVLS   ? USE_NVLS
                         : o->algo == CM_ALGO_HIER   ? USE_A2A /* sub-rings: any pair */
                         : o->algo == CM_ALGO_TREE && sim__tree_ok(w, o->group, o->coll, o->bytes)
                             ? USE_TREE
                         : o->algo == CM_ALGO_PAT && sim__pat_ok(w, o->group, o->coll, o->bytes)
                             ? USE_PAT
                             : USE_RING;
        break;
      case SIM__OP_SEND: rc |= sim__pairs_add(p2p, host, o->peer); break;
      case SIM__OP_RECV: rc |= sim__pairs_add(p2p, o->peer, host); break;
      default: break;
      }
    }
  return rc;
}

int sim__collect_pairs(const sim__world *w, sim__pairs *pp, pp_err *err) {
  unsigned *use = calloc((size_t)w->ngroups + 1, sizeof *use);
  if (!use) return pp_err_set(err, PP_NOMEM, "sim: out of memory");
  int rc = group_uses(w, use, pp);
  for (int i = 0; i < w->ngroups && !rc; i++)
    if (use[i]) rc |= group_pairs(w, &w->groups[i], use[i], pp);
  free(use);
  return rc ? pp_err_set(err, PP_NOMEM, "sim: out of memory") : PP_OK;
}

/* ---- rings on links of their own ------------------------------------------------------------ */

enum { OWN_NONE = -1, OWN_MANY = -2 };

/* Marks the link directions a flow from src to dst crosses as used by `who`; another user,
 * or with `once` a second flow of the same, makes a direction OWN_MANY. */
static void claim(const sim__topo *t, int *owner, int src, int dst, int who, int once) {
  sim__hop h[SIM__MAXHOPS];
  int n = sim__route(t, src, dst, h);
  for (int j = 0; j < n && j < SIM__MAXHOPS; j++) {
    int k = sim__hop_key(t, &h[j]);
    owner[k] = owner[k] == OWN_NONE || (owner[k] == who && !once) ? who : OWN_MANY;
  }
}

static int ring_succ(const sim__group *g, int ch, int m) { return g->succ[ch * g->n + m]; }

/* Group i's ring is private when each link direction its flows cross is crossed by no other
 * ring flow (ring[k] == i, claimed once) and by no flow of another group or of the pipeline
 * (other[k]); the group's own other collectives (NVLS, all-to-all) may share a direction only
 * when it is a member's NVLink port: a member's flows through its port start only once it has
 * entered that collective, after its ring flows through the port are done. Then each flow's
 * seconds per byte (its route's slowest link) and each member's predecessors are kept for
 * sim_coll.c (each member's predecessors are the group's, sim__group.pred). Returns nonzero when
 * out of memory. */
static int ring_private(sim__world *w, int i, const int *ring, const int *other) {
  sim__group *g = &w->groups[i];
  const sim__topo *t = &w->topo;
  sim__hop h[SIM__MAXHOPS];
  int nf = g->nch * g->n;
  if (nf <= 0) return 0;
  for (int f = 0; f < nf; f++) {
    int m = f % g->n, s = ring_succ(g, f / g->n, m);
    int n = s == m ? 0 : sim__route(t, g->gpus[m], g->gpus[s], h);
    if (n > SIM__MAXHOPS) return 0;
    for (int j = 0; j < n; j++) {
      int k = sim__hop_key(t, &h[j]);
      if (ring[k] != i || (other[k] != OWN_NONE &&
                           (other[k] != i || sim__link_kind_of(t, h[j].link) != SIM__L_NVL)))
        return 0;
    }
  }
  g->spb = calloc((size_t)nf, sizeof *g->spb);
  if (!g->spb) return -1;
  for (int f = 0; f < nf; f++) {
    int ch = f / g->n, m = f % g->n, s = ring_succ(g, ch, m);
    int n = s == m ? 0 : sim__route(t, g->gpus[m], g->gpus[s], h);
    for (int j = 0; j < n; j++) {
      double bw = sim__link_bw(t, h[j].link), spb = bw > 0 ? 1 / bw : 0;
      if (spb > g->spb[f]) g->spb[f] = spb;
    }
  }
  return 0;
}

/* The pairs of group i's collectives other than its ring, claimed for i in other[]. */
static int claim_other(const sim__world *w, int i, unsigned use, int *other) {
  sim__pairs pp = {0};
  int rc = group_pairs(w, &w->groups[i], use & ~(unsigned)USE_RING, &pp);
  for (size_t k = 0; !rc && k < pp.cap; k++)
    if (pp.keys[k] != ~0ull)
      claim(&w->topo, other, (int)(pp.keys[k] >> 32), (int)(pp.keys[k] & 0xffffffffu), i, 0);
  sim__pairs_free(&pp);
  return rc;
}

int sim__mark_private(sim__world *w, pp_err *err) {
  const sim__topo *t = &w->topo;
  size_t nkeys = t->nlinks > 0 ? 2 * (size_t)t->nlinks : 0;
  unsigned *use = calloc((size_t)w->ngroups + 1, sizeof *use);
  int *ring = malloc((nkeys + 1) * sizeof *ring), *other = malloc((nkeys + 1) * sizeof *other);
  sim__pairs p2p = {0};
  int rc = !use || !ring || !other;
  if (!rc) rc = group_uses(w, use, &p2p);
  for (size_t k = 0; !rc && k < nkeys; k++) ring[k] = other[k] = OWN_NONE;
  for (size_t k = 0; !rc && k < p2p.cap; k++)
    if (p2p.keys[k] != ~0ull)
      claim(t, other, (int)(p2p.keys[k] >> 32), (int)(p2p.keys[k] & 0xffffffffu), OWN_MANY, 0);
  for (int i = 0; i < w->ngroups && !rc; i++) {
    const sim__group *g = &w->groups[i];
    if (use[i] & ~(unsigned)USE_RING) rc = claim_other(w, i, use[i], other);
    if (use[i] & USE_RING)
      for (int f = 0; f < g->nch * g->n; f++) {
        int m = f % g->n, s = ring_succ(g, f / g->n, m);
        if (s != m) claim(t, ring, g->gpus[m], g->gpus[s], i, 1);
      }
  }
  for (int i = 0; i < w->ngroups && !rc && !w->all_flows; i++)
    if ((use[i] & USE_RING) && w->groups[i].n > 1) rc = ring_private(w, i, ring, other);
  free(use), free(ring), free(other);
  sim__pairs_free(&p2p);
  return rc ? pp_err_set(err, PP_NOMEM, "sim: out of memory") : PP_OK;
}

/* ---- lowering ------------------------------------------------------------------------------- */

typedef struct lower {
  sim__world *w;
  const spec_model *m;
  const spec_plan *p;
  pp_err *err;
  int rc;
} lower;

/* Helper-actor slots (sim__op.slot). */
enum { SLOT_DP, SLOT_ZERO3, SLOT_LAYER };

double sim__mono_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void emit(lower *L, int gpu, sim__op op) {
  if (L->rc) return;
  L->rc = sim__op_push(&L->w->prog[gpu], &op, L->err);
  sim__world *w = L->w;
  if (!L->rc && ++w->nops > w->max_ops && w->max_ops > 0)
    L->rc = pp_err_set(L->err, PP_LIMIT,
                       "sim: the plan lowers to more than %lld operations (about %.0f GiB): too "
                       "large to simulate", w->max_ops,
                       (double)w->max_ops * sizeof op / (1024.0 * 1024 * 1024));
  else if (!L->rc && w->deadline > 0 && (w->nops & 0xffff) == 0 && sim__mono_s() > w->deadline)
    L->rc = pp_err_set(L->err, PP_LIMIT, "sim: stopped while lowering the plan (its time limit)");
}

static void emit_sleep(lower *L, int gpu, double t, sim_ev_kind ev) {
  if (t > 0) emit(L, gpu, (sim__op){.kind = SIM__OP_SLEEP, .t = t, .ev = ev});
}

static void emit_begin(lower *L, int gpu, int mb, int chunk) {
  emit(L, gpu, (sim__op){.kind = SIM__OP_BEGIN, .mb = mb, .chunk = chunk});
}

/* The member index of a GPU in a group (-1 when not a member). */
static int member_of(const sim__group *g, int gpu) {
  for (int i = 0; i < g->n; i++)
    if (g->gpus[i] == gpu) return i;
  return -1;
}

/* The group with exactly these members (in this order), created when new. */
static int find_group(lower *L, const int *gpus, int n) {
  int id = sim__group_find(L->w, gpus, n, L->err);
  if (id < 0) L->rc = L->err->code;
  return id;
}

/* A collective with the algorithm the cost model (as NCCL) picks for the group; a
 * hierarchical all-reduce becomes a reduce-scatter inside each NVLink domain, an all-reduce
 * across domains among the members at the same position, and an all-gather inside. Returns
 * 1 when it runs through NVLS relays. */
static int emit_coll(lower *L, int gpu, int group, cm_coll c, double bytes, sim_ev_kind ev) {
  sim__world *w = L->w;
  const sim__group *g = &w->groups[group];
  if (g->n <= 1 || bytes <= 0) return 0;
  cm_algo a = CM_ALGO_RING;
  cm_coll_best(w->cm, c, bytes, &g->pl, &a);
  if (a == CM_ALGO_NVLSTREE && c == CM_ALL_REDUCE) {
    if (sim__nvlstree_prepare(w, group, L->err)) {
      L->rc = L->err->code;
      return 0;
    }
    g = &w->groups[group]; /* the sub-groups may have moved the groups */
  }
  if (a != CM_ALGO_HIER) {
    int nvls = c != CM_ALL_TO_ALL && a == CM_ALGO_NVLS && g->relay_node;
    int member = member_of(g, gpu);
    if (group >= 0)
      emit(L, gpu, (sim__op){.kind = SIM__OP_COLL, .group = group, .coll = c, .algo = a,
                             .bytes = bytes, .member = member, .ev = ev});
    return nvls;
  }
  int dom = w->topo.dom, n = g->n, me = gpu / dom, pos = 0, nin = 0, nout = 0;
  int *in = malloc((size_t)n * sizeof *in), *out = malloc((size_t)n * sizeof *out);
  if (!in || !out) {
    free(in), free(out);
    L->rc = pp_err_set(L->err, PP_NOMEM, "sim: out of memory");
    return 0;
  }
  for (int i = 0; i < n; i++)
    if (g->gpus[i] / dom == me) {
      if (g->gpus[i] == gpu) pos = nin;
      in[nin++] = g->gpus[i];
    }
  /* the members at the same position in every domain */
  for (int d0 = 0; d0 < n; d0++) {
    int dd = g->gpus[d0] / dom, k = 0, first = 1;
    for (int j = 0; j < d0; j++) first &= g->gpus[j] / dom != dd;
    if (!first) continue;
    for (int i = 0; i < n; i++)
      if (g->gpus[i] / dom == dd && k++ == pos) out[nout++] = g->gpus[i];
  }
  int gi = find_group(L, in, nin), go = find_group(L, out, nout), nvls = 0;
  if (gi >= 0 && go >= 0) {
    const sim__group *gin = &w->groups[gi], *gout = &w->groups[go];
    cm_algo ai = CM_ALGO_RING;
    cm_coll_best(w->cm, CM_ALL_REDUCE, bytes / nin, &gout->pl, &ai);
    if (ai == CM_ALGO_HIER) ai = CM_ALGO_RING;
    nvls = ai == CM_ALGO_NVLS && gout->relay_node;
    int mi = member_of(gin, gpu), mo = member_of(gout, gpu);
    emit(L, gpu, (sim__op){.kind = SIM__OP_COLL, .group = gi, .coll = CM_REDUCE_SCATTER,
                           .algo = CM_ALGO_RING, .bytes = bytes, .member = mi, .ev = ev});
    emit(L, gpu, (sim__op){.kind = SIM__OP_COLL, .group = go, .coll = CM_ALL_REDUCE, .algo = ai,
                           .bytes = bytes / nin, .member = mo, .ev = ev});
    emit(L, gpu, (sim__op){.kind = SIM__OP_COLL, .group = gi, .coll = CM_ALL_GATHER,
                           .algo = CM_ALGO_RING, .bytes = bytes, .member = mi, .ev = ev});
  }
  free(in), free(out);
  return nvls;
}

/* The pipeline peers a GPU receives from and sends to, one message each per microbatch. */
typedef struct peers {
  int n;
  const int *gpu;
  double bytes; /* per message, ramp applied */
  double lat;   /* latency of a transfer */
} peers;

/* Everything one GPU's program is made from. */
typedef struct gpu_plan {
  int g, r, P, v, mb;
  const int *counts; /* layers of each virtual stage (chunk * P + r) */
  int nvs;
  const cm_layer_profile *pr;
  int grp[SPEC_NGRPS]; /* its groups */
  int tp, cp, ep, dp, mbs, sp, zero;
  spec_recompute rc;
  peers prev, next; /* the stage before (activations in, gradients out) and after */
} gpu_plan;

/* ---- the parts of a chunk as templates ---------------------------------------------------- */

/* The collectives a chunk runs after its compute in aggregated mode, per group kind: the
 * ring-form ones as their flow bytes per rank and latencies (one OP_BATCH), the NVLS ones of
 * each collective as their bytes and their times alone (one NVLS collective of the bytes, then
 * a delay of the latencies that saves). Ring attention's exchanges in ring form too, with the
 * attention compute they run beside (one OP_BATCH beside it, in a helper). */
typedef struct chunk_agg {
  double flow[SPEC_NGRPS], lat[SPEC_NGRPS];
  double nvls[SPEC_NGRPS][CM_NCOLLS], nvls_alone[SPEC_NGRPS][CM_NCOLLS];
  double cp_flow, cp_lat, cp_beside;
} chunk_agg;

/* A part (a layer, the embedding, the head; forward or backward) of one GPU's microbatch,
 * lowered once into ops [a, b) of its program and run by OP_CALL as often as the schedule
 * needs it. */
typedef struct tmpl {
  int a, b;
  chunk_agg agg; /* what the template leaves out, to run after the chunk */
} tmpl;

enum { P_LAYER, P_EMBED, P_HEAD, NPARTS }; /* == cm_part */

typedef struct tb {
  lower *L;
  const gpu_plan *gp;
  int part, fwd;
  sim_ev_kind ev;     /* compute: forward or backward */
  double acc;         /* compute not yet emitted */
  double last_gemm;   /* the GEMM just before, not yet overlapped */
  tmpl *t;
  /* ZeRO-3's modules: the part cut where cum (its compute and collectives, as the cost model
   * prices them) reaches cut[k]; bound[k] the op index there; every collective by itself */
  const double *cut;
  int ncut, k, *bound;
  double cum;
} tb;

static void tb_flush(tb *B) {
  emit_sleep(B->L, B->gp->g, B->acc, B->ev);
  B->acc = 0;
}

/* t seconds of compute, cut at the module boundaries it crosses. */
static void tb_add(tb *B, double t) {
  while (B->k < B->ncut && B->cum + t >= B->cut[B->k]) {
    double d = fmax(0, B->cut[B->k] - B->cum);
    B->acc += d, B->cum += d, t -= d;
    tb_flush(B);
    B->bound[B->k++] = B->L->w->prog[B->gp->g].n;
    B->last_gemm = 0;
  }
  B->acc += t, B->cum += t;
}

static const sim_ev_kind grp_ev[SPEC_NGRPS] = {SIM_EV_TP, SIM_EV_CP, SIM_EV_DP, SIM_EV_EP,
                                               SIM_EV_DP};

/* A collective of the part run by itself, or set aside for the chunk's aggregate. */
static void tb_coll(tb *B, spec_grp k, cm_coll c, double bytes) {
  sim__world *w = B->L->w;
  int gid = B->gp->grp[k];
  const sim__group *g = &w->groups[gid];
  if (g->n <= 1 || bytes <= 0) return;
  cm_algo a = CM_ALGO_RING;
  double alone = cm_coll_best(w->cm, c, bytes, &g->pl, &a);
  B->cum += alone;
  int agg = !w->per_layer && !B->cut && c != CM_ALL_TO_ALL;
  if (agg && a == CM_ALGO_NVLS && g->relay_node) {
    B->t->agg.nvls[k][c] += bytes;
    B->t->agg.nvls_alone[k][c] += alone;
    return;
  }
  if (agg && a != CM_ALGO_HIER && a != CM_ALGO_NVLSTREE &&
      !(a == CM_ALGO_TREE && sim__tree_ok(w, gid, c, bytes)) &&
      !(a == CM_ALGO_PAT && sim__pat_ok(w, gid, c, bytes))) {
    /* the fast form of sim__coll_exec: its ring flows' bytes, then the latency */
    double lat;
    B->t->agg.flow[k] += sim__ring_form(w->cm, c, &a, bytes, &g->pl, &lat);
    B->t->agg.lat[k] += lat;
    return;
  }
  tb_flush(B);
  emit_coll(B->L, B->gp->g, gid, c, bytes, grp_ev[k]);
}

/* A collective in a helper actor beside `beside` seconds of compute. */
static void tb_overlap(tb *B, spec_grp k, cm_coll c, double bytes, double beside) {
  lower *L = B->L;
  int g = B->gp->g;
  const sim__group *gr = &L->w->groups[B->gp->grp[k]];
  if (gr->n <= 1 || bytes <= 0) {
    B->acc += beside;
    return;
  }
  tb_flush(B);
  sim__prog *pg = &L->w->prog[g];
  int at = pg->n;
  emit(L, g, (sim__op){.kind = SIM__OP_ASYNC, .slot = SLOT_LAYER, .a = at + 1});
  emit_coll(L, g, B->gp->grp[k], c, bytes, grp_ev[k]);
  if (L->rc) return;
  pg->ops[at].b = pg->n;
  emit_sleep(L, g, beside, B->ev);
  emit(L, g, (sim__op){.kind = SIM__OP_JOIN, .slot = SLOT_LAYER, .ev = grp_ev[k]});
}

/* Ring attention: each of the cp - 1 exchanges runs beside 1/cp of the attention (the
 * attention ops adjacent to them, after in the forward, before in the backward). Returns the
 * index of the op after what it lowered. */
static int tb_cp(tb *B, const cm_lop *ops, const double *t, int n, int i) {
  int j = i;
  while (j < n && ops[j].kind == CM_LOP_COLL && ops[j].group == SPEC_GRP_CP) j++;
  double A = 0;
  int next = j;
  if (j < n && strcmp(ops[j].name, "attn") == 0) {
    for (; next < n && ops[next].kind != CM_LOP_COLL && strcmp(ops[next].name, "attn") == 0; next++)
      A += t[next];
  } else {
    for (int h = i; h > 0 && ops[h - 1].kind != CM_LOP_COLL && strcmp(ops[h - 1].name, "attn") == 0; h--)
      A += t[h - 1];
    B->acc -= A;
  }
  if (next > j) B->cum += A;
  int steps = j - i;
  sim__world *w = B->L->w;
  const sim__group *g = &w->groups[B->gp->grp[SPEC_GRP_CP]];
  for (int s = 0; s < steps; s++) {
    const cm_lop *o = &ops[i + s];
    if (w->per_layer || B->cut || g->n <= 1 || o->bytes <= 0) {
      tb_overlap(B, SPEC_GRP_CP, o->coll, o->bytes, A / (steps + 1));
      continue;
    }
    /* the fast form of the exchange (a send/recv, ring-only in cm_coll.c's table: its ring
     * flows' bytes, then the latency) and the attention beside it go to the chunk's aggregate */
    cm_algo a = CM_ALGO_RING;
    double lat;
    B->t->agg.cp_flow += sim__ring_form(w->cm, o->coll, &a, o->bytes, &g->pl, &lat);
    B->t->agg.cp_lat += lat;
    B->t->agg.cp_beside += A / (steps + 1);
  }
  B->acc += A / (steps + 1);
  B->last_gemm = 0;
  return next;
}

/* The compute time of each op of a part: the cost model's time of each op alone, the
 * non-GEMM ones scaled so that the part adds up to what the cost model charges for it
 * (GEMMs keep their exact time: the TP overlap hides collectives behind them). */
static void part_times(const sim__world *w, const gpu_plan *gp, int part, int fwd,
                       const cm_lop *ops, int n, double *t) {
  const cm_layer_profile *pr = gp->pr;
  double target = part == P_LAYER ? (fwd ? pr->fwd_s : pr->bwd_s + pr->recomp_s)
                  : part == P_EMBED ? (fwd ? pr->embed_fwd_s : pr->embed_bwd_s)
                                    : (fwd ? pr->head_fwd_s : pr->head_bwd_s);
  double gemm = 0, other = 0;
  for (int i = 0; i < n; i++) {
    t[i] = cm_lop_time(w->cm, &ops[i]);
    if (ops[i].kind == CM_LOP_GEMM) gemm += t[i];
    else other += t[i];
    /* the embedding's and head's costs include their TP collectives, simulated here */
    if (ops[i].kind == CM_LOP_COLL && part != P_LAYER) {
      const sim__group *g = &w->groups[gp->grp[ops[i].group]];
      if (g->n > 1) target -= cm_coll_best(w->cm, ops[i].coll, ops[i].bytes, &g->pl, NULL);
    }
  }
  double sg = 1, so = other > 0 ? (target - gemm) / other : 1;
  if (!(so > 0)) sg = so = gemm + other > 0 ? target / (gemm + other) : 0;
  for (int i = 0; i < n; i++) t[i] *= ops[i].kind == CM_LOP_GEMM ? sg : so;
}

/* Lowers one part into a template at the end of the GPU's program; with `frac` (ZeRO-3's
 * modules), cut where the cumulative fractions frac[0..nfrac) of its time fall, the op index of
 * each cut in bound[]. */
static void build_tmpl(lower *L, const gpu_plan *gp, int part, int fwd, tmpl *t,
                       const double *frac, int nfrac, int *bound) {
  const cm_params *prm = cm_model_params(L->w->cm);
  cm_lop ops[CM_LOPS_MAX];
  double tm[CM_LOPS_MAX];
  int n = cm_part_ops(L->w->cm, (cm_part)part, gp->tp, gp->cp, gp->ep, gp->mbs, gp->sp, gp->rc,
                      fwd, ops);
  part_times(L->w, gp, part, fwd, ops, n, tm);
  memset(t, 0, sizeof *t);
  t->a = L->w->prog[gp->g].n;
  tb B = {L, gp, part, fwd, fwd ? SIM_EV_FORWARD : SIM_EV_BACKWARD, 0, 0, t, NULL, 0, 0, bound, 0};
  double cut[3 * CM_Z3_UNITS];
  if (nfrac > 0) { /* the part's time as the cost model prices it, cut at the fractions */
    double total = 0;
    for (int i = 0; i < n; i++) {
      const sim__group *g = &L->w->groups[gp->grp[ops[i].group]];
      total += ops[i].kind != CM_LOP_COLL ? tm[i]
               : g->n > 1 ? cm_coll_best(L->w->cm, ops[i].coll, ops[i].bytes, &g->pl, NULL) : 0;
    }
    for (int k = 0; k < nfrac; k++) cut[k] = frac[k] * total;
    B.cut = cut, B.ncut = nfrac;
  }
  int overlap = prm->tp_comm_overlap && part == P_LAYER && !B.cut;
  for (int i = 0; i < n && !L->rc;) {
    const cm_lop *o = &ops[i];
    if (o->kind != CM_LOP_COLL) {
      tb_add(&B, tm[i]);
      B.last_gemm = o->kind == CM_LOP_GEMM ? tm[i] : 0;
      i++;
    } else if (o->group == SPEC_GRP_CP) {
      i = tb_cp(&B, ops, tm, n, i);
    } else if (overlap && o->group == SPEC_GRP_TP && o->coll == CM_ALL_GATHER && i + 1 < n &&
               ops[i + 1].kind == CM_LOP_GEMM) {
      /* an all-gather overlaps the GEMM that consumes it */
      tb_overlap(&B, SPEC_GRP_TP, o->coll, o->bytes, tm[i + 1]);
      B.last_gemm = 0;
      i += 2;
    } else if (overlap && o->group == SPEC_GRP_TP && o->coll != CM_ALL_GATHER && B.last_gemm > 0) {
      /* a reduce-scatter or all-reduce overlaps the GEMM that produces it */
      B.acc -= B.last_gemm;
      tb_overlap(&B, SPEC_GRP_TP, o->coll, o->bytes, B.last_gemm);
      B.last_gemm = 0;
      i++;
    } else {
      tb_coll(&B, o->group, o->coll, o->bytes);
      B.last_gemm = 0;
      i++;
    }
  }
  tb_flush(&B);
  sim__prog *pg = &L->w->prog[gp->g];
  t->b = pg->n;
  for (; B.k < B.ncut; B.k++) bound[B.k] = t->b; /* rounding: at the end */
}

/* Runs a template `count` times: one OP_CALL, or one longer sleep when it is a single sleep.
 * Adds its aggregated collectives to agg. */
static void run_tmpl(lower *L, int g, const tmpl *t, int count, chunk_agg *agg) {
  sim__prog *pg = &L->w->prog[g];
  for (int k = 0; k < SPEC_NGRPS; k++) {
    agg->flow[k] += count * t->agg.flow[k], agg->lat[k] += count * t->agg.lat[k];
    for (int c = 0; c < CM_NCOLLS; c++)
      agg->nvls[k][c] += count * t->agg.nvls[k][c],
      agg->nvls_alone[k][c] += count * t->agg.nvls_alone[k][c];
  }
  agg->cp_flow += count * t->agg.cp_flow, agg->cp_lat += count * t->agg.cp_lat;
  agg->cp_beside += count * t->agg.cp_beside;
  if (count <= 0 || t->b == t->a) return;
  if (t->b == t->a + 1 && pg->ops[t->a].kind == SIM__OP_SLEEP) {
    sim__op o = pg->ops[t->a];
    o.t *= count;
    emit(L, g, o);
  } else {
    emit(L, g, (sim__op){.kind = SIM__OP_CALL, .a = t->a, .b = t->b, .count = count});
  }
}

/* ZeRO-3 as the cost model times it (cm_zero3_plan_sched): the layers' modules (templates cut
 * from the layer's passes at the shares of its units), every gather and gradient bucket of the
 * schedule on the DP (or expert-DP) group with the copies beside them as delays. */
enum { SEM_ISSUE, SEM_READY }; /* the main actor reached an issue point; a gather is done */

typedef struct zero3 {
  int on;
  cm_z3_sched s;
  int layers;                   /* the layers s is for */
  tmpl T[2];                    /* the layer's backward [0] and forward [1], cut */
  tmpl mod[3 * CM_Z3_UNITS];    /* the template of each module of a layer's pattern */
} zero3;

/* The schedule of a chunk of `layers` layers (built when the count changes). */
static int zero3_sched(lower *L, const gpu_plan *gp, zero3 *z, int layers) {
  if (z->layers == layers && z->s.mods) return 0;
  cm_zero3_sched_free(&z->s);
  z->layers = layers;
  if (!L->rc) L->rc = cm_zero3_plan_sched(L->w->cm, L->p, gp->r, layers, &z->s, L->err);
  return L->rc;
}

/* The layer's forward and backward templates cut into the modules of its pattern. */
static void zero3_build(lower *L, const gpu_plan *gp, zero3 *z) {
  if (zero3_sched(L, gp, z, gp->counts[gp->r] > 0 ? gp->counts[gp->r] : 1)) return;
  const cm_z3_sched *s = &z->s;
  double comp[3 * CM_Z3_UNITS] = {0};
  for (long t = 0; t < s->n; t++) comp[s->mods[t].pat] = s->mods[t].comp_s;
  for (int fwd = 0; fwd < 2 && !L->rc; fwd++) {
    int lo = fwd ? 0 : s->nu, n = fwd ? s->nu : s->nb, bound[3 * CM_Z3_UNITS];
    double frac[3 * CM_Z3_UNITS], sum = 0, acc = 0;
    for (int k = 0; k < n; k++) sum += comp[lo + k];
    for (int k = 0; k + 1 < n; k++) frac[k] = sum > 0 ? (acc += comp[lo + k]) / sum : 0;
    tmpl *t = &z->T[fwd];
    build_tmpl(L, gp, P_LAYER, fwd, t, frac, n - 1, bound);
    for (int k = 0; k < n; k++) {
      int a = k ? bound[k - 1] : t->a, b = k + 1 < n ? bound[k] : t->b;
      z->mod[lo + k] = (tmpl){.a = a, .b = b};
    }
  }
}

/* A module's gathers, one after another, each with its copies. */
static void zero3_gather(lower *L, const gpu_plan *gp, const cm_z3_mod *m) {
  for (int c = 0; c < m->gathers; c++) {
    emit_coll(L, gp->g, gp->grp[m->group], CM_ALL_GATHER, m->gather_bytes, SIM_EV_DP);
    emit_sleep(L, gp->g, m->gather_extra_s, SIM_EV_DP);
  }
}

static void zero3_reduce(lower *L, const gpu_plan *gp, const cm_z3_sched *s, double bytes,
                         double extra) {
  if (bytes <= 0) return;
  emit_coll(L, gp->g, gp->grp[SPEC_GRP_DP], s->reduce, bytes, SIM_EV_DP);
  emit_sleep(L, gp->g, extra, SIM_EV_DP);
}

/* The issue point of module t's gathers in a range starting at lo: 2 t when the module is
 * reached (before waiting for it), 2 j + 1 when module j starts. */
static long zero3_point(const cm_z3_mod *m, long t, long lo) {
  long x = m->issue == t ? 2 * t : 2 * m->issue + 1;
  return x < 2 * lo ? 2 * lo : x;
}

static void zero3_wait_issue(lower *L, int g, long x, long lo, long *seen, char *post) {
  if (x <= *seen) return;
  emit(L, g, (sim__op){.kind = SIM__OP_WAIT, .slot = SEM_ISSUE, .ev = SIM_EV_DP});
  post[x - 2 * lo] = 1;
  *seen = x;
}

/* Today's path (zero3.sync = 0): modules [lo, hi) with one helper as the collectives' stream,
 * running the gathers and buckets in the schedule's order, each once the main actor has
 * reached its issue point; a module waits for its own gathers only. mid: the parts run before
 * module `at` (the head between the passes). */
static void zero3_pipelined(lower *L, const gpu_plan *gp, zero3 *z, long lo, long hi,
                            const tmpl *const *mid, long at, chunk_agg *agg) {
  const cm_z3_sched *s = &z->s;
  int g = gp->g;
  sim__prog *pg = &L->w->prog[g];
  char *post = calloc((size_t)(2 * (hi - lo) + 2), 1);
  if (!post) {
    L->rc = pp_err_set(L->err, PP_NOMEM, "sim: out of memory");
    return;
  }
  long seen = -1;
  int start = pg->n;
  emit(L, g, (sim__op){.kind = SIM__OP_ASYNC, .slot = SLOT_ZERO3, .a = start + 1});
  for (long t = lo; t < hi && !L->rc; t++) {
    const cm_z3_mod *m = &s->mods[t];
    if (m->gathers) {
      zero3_wait_issue(L, g, zero3_point(m, t, lo), lo, &seen, post);
      zero3_gather(L, gp, m);
      emit(L, g, (sim__op){.kind = SIM__OP_POST, .slot = SEM_READY});
    }
    if (m->reduce_bytes > 0) {
      zero3_wait_issue(L, g, 2 * t + 1, lo, &seen, post);
      zero3_reduce(L, gp, s, m->reduce_bytes, m->reduce_extra_s);
    }
  }
  if (!L->rc) pg->ops[start].b = pg->n;
  for (long t = lo; t < hi && !L->rc; t++) {
    const cm_z3_mod *m = &s->mods[t];
    for (int k = 0; t == at && mid && k < 2; k++)
      if (mid[k]) run_tmpl(L, g, mid[k], 1, agg);
    if (post[2 * (t - lo)]) emit(L, g, (sim__op){.kind = SIM__OP_POST, .slot = SEM_ISSUE});
    if (m->gathers) emit(L, g, (sim__op){.kind = SIM__OP_WAIT, .slot = SEM_READY, .ev = SIM_EV_DP});
    if (post[2 * (t - lo) + 1]) emit(L, g, (sim__op){.kind = SIM__OP_POST, .slot = SEM_ISSUE});
    run_tmpl(L, g, &z->mod[m->pat], 1, agg);
  }
  emit(L, g, (sim__op){.kind = SIM__OP_JOIN, .slot = SLOT_ZERO3, .ev = SIM_EV_DP});
  free(post);
}

/* DeepSpeed v0.3's path (zero3.sync = 1): each module's window as the cost model's: a gather
 * nobody prefetched and every prefetched one but the last waited for (with the host's launch
 * before each), the last and the module's bucket in a helper beside its compute, joined when
 * it ends (the next fetch synchronises the device). */
static void zero3_synced(lower *L, const gpu_plan *gp, zero3 *z, long lo, long hi,
                         const tmpl *const *mid, long at, chunk_agg *agg) {
  const cm_z3_sched *s = &z->s;
  int g = gp->g;
  sim__prog *pg = &L->w->prog[g];
  long pf = lo;
  for (long t = lo; t < hi && !L->rc; t++) {
    const cm_z3_mod *m = &s->mods[t];
    for (int k = 0; t == at && mid && k < 2; k++)
      if (mid[k]) run_tmpl(L, g, mid[k], 1, agg);
    if (pf <= t) pf = t + 1;
    if (m->gathers && (m->issue == t || m->issue < lo)) {
      emit_sleep(L, g, m->host_s, SIM_EV_DP);
      zero3_gather(L, gp, m);
    }
    const cm_z3_mod *last = NULL;
    for (; pf < hi && s->mods[pf].issue == t; pf++) {
      const cm_z3_mod *x = &s->mods[pf];
      if (!x->gathers) continue;
      if (last) zero3_gather(L, gp, last); /* waited for before the next launch */
      emit_sleep(L, g, x->host_s, SIM_EV_DP);
      last = x;
    }
    int helper = last || m->reduce_bytes > 0, start = pg->n;
    if (helper) {
      emit(L, g, (sim__op){.kind = SIM__OP_ASYNC, .slot = SLOT_ZERO3, .a = start + 1});
      if (last) zero3_gather(L, gp, last);
      zero3_reduce(L, gp, s, m->reduce_bytes, m->reduce_extra_s);
      if (!L->rc) pg->ops[start].b = pg->n;
    }
    run_tmpl(L, g, &z->mod[m->pat], 1, agg);
    if (helper) emit(L, g, (sim__op){.kind = SIM__OP_JOIN, .slot = SLOT_ZERO3, .ev = SIM_EV_DP});
  }
}

/* Modules [lo, hi) of a chunk of `layers` layers; the last bucket when the range ends the
 * schedule. */
static void zero3_run(lower *L, const gpu_plan *gp, zero3 *z, int layers, int fwd, int bwd,
                      const tmpl *const *mid, chunk_agg *agg) {
  if (layers <= 0 || zero3_sched(L, gp, z, layers) || !z->s.mods) return;
  const cm_z3_sched *s = &z->s;
  long nf = (long)layers * s->nu, lo = fwd ? 0 : nf, hi = bwd ? s->n : nf;
  if (s->sync) zero3_synced(L, gp, z, lo, hi, mid, nf, agg);
  else zero3_pipelined(L, gp, z, lo, hi, mid, nf, agg);
  if (bwd) zero3_reduce(L, gp, s, s->last_bytes, s->last_extra_s);
}

/* The parts of one forward or backward of a chunk, in order: seq/cnt, returns their number. */
static int part_seq(int nl, int first, int last, int fwd, int *seq, int *cnt) {
  int ns = 0;
  if (fwd && first) seq[ns] = P_EMBED, cnt[ns++] = 1;
  if (!fwd && last) seq[ns] = P_HEAD, cnt[ns++] = 1;
  if (nl > 0) seq[ns] = P_LAYER, cnt[ns++] = nl;
  if (fwd && last) seq[ns] = P_HEAD, cnt[ns++] = 1;
  if (!fwd && first) seq[ns] = P_EMBED, cnt[ns++] = 1;
  return ns;
}

/* The chunk's ring-attention exchanges as one ring-form flow (their bytes, then their
 * latencies), in a helper beside the attention compute they overlap (ev: its kind). */
static void emit_agg_cp(lower *L, const gpu_plan *gp, const chunk_agg *agg, sim_ev_kind ev) {
  sim__world *w = L->w;
  if (!(agg->cp_flow > 0 || agg->cp_lat > 0 || agg->cp_beside > 0)) return;
  int g = gp->g, gid = gp->grp[SPEC_GRP_CP];
  sim__prog *pg = &w->prog[g];
  int at = pg->n;
  emit(L, g, (sim__op){.kind = SIM__OP_ASYNC, .slot = SLOT_LAYER, .a = at + 1});
  emit(L, g, (sim__op){.kind = SIM__OP_BATCH, .group = gid, .bytes = agg->cp_flow,
                       .t = agg->cp_lat, .member = member_of(&w->groups[gid], g),
                       .ev = SIM_EV_CP});
  if (L->rc) return;
  pg->ops[at].b = pg->n;
  emit_sleep(L, g, agg->cp_beside, ev);
  emit(L, g, (sim__op){.kind = SIM__OP_JOIN, .slot = SLOT_LAYER, .ev = SIM_EV_CP});
}

/* The chunk's aggregated collectives: ring attention's exchanges beside their compute, the
 * ring-form ones as one flow per group, then the NVLS ones as one collective per group and
 * kind and a delay of the latencies that saves (alone, the time of running them one by one). */
static void emit_agg(lower *L, const gpu_plan *gp, const chunk_agg *agg, sim_ev_kind ev) {
  sim__world *w = L->w;
  emit_agg_cp(L, gp, agg, ev);
  for (int k = 0; k < SPEC_NGRPS; k++) {
    const sim__group *g = &w->groups[gp->grp[k]];
    int member = member_of(g, gp->g);
    if (agg->flow[k] > 0 || agg->lat[k] > 0)
      emit(L, gp->g, (sim__op){.kind = SIM__OP_BATCH, .group = gp->grp[k], .bytes = agg->flow[k],
                               .t = agg->lat[k], .member = member, .ev = grp_ev[k]});
    for (int c = 0; c < CM_NCOLLS; c++) {
      double bytes = agg->nvls[k][c];
      if (!(bytes > 0)) continue;
      double once = cm_coll_time(w->cm, (cm_coll)c, CM_ALGO_NVLS, bytes, &g->pl);
      emit(L, gp->g, (sim__op){.kind = SIM__OP_COLL, .group = gp->grp[k], .coll = c,
                               .algo = CM_ALGO_NVLS, .bytes = bytes,
                               .t = agg->nvls_alone[k][c] - once, .member = member,
                               .ev = grp_ev[k]});
    }
  }
}

/* The cost model's send/recv between a GPU and a peer (ramp in the bytes, latency apart), with
 * `sharing` senders of the stage in a node. */
static void p2p_parts(sim__world *w, int g, int peer, int sharing, double bytes, double *flow,
                      double *lat) {
  *flow = *lat = 0;
  if (g == peer || bytes <= 0) return;
  cm_place pl;
  int pair[2] = {g, peer};
  cm_place_list(w->cm, pair, 2, &pl);
  for (int l = CM_LVL_NVLINK_UP; l <= CM_LVL_SPINE; l++)
    pl.bw_gbps[l] = pl.bw_gbps[l] * pl.sharing / (sharing < 1 ? 1 : sharing);
  cm_coll_parts parts;
  if (!cm_coll_split(w->cm, CM_SEND_RECV, CM_ALGO_RING, bytes, &pl, &parts)) {
    *flow = parts.vol_bytes / parts.ramp;
    *lat = parts.lat_s;
  }
}

static void emit_recvs(lower *L, int g, const peers *from, int dir) {
  for (int k = 0; k < from->n; k++)
    emit(L, g, (sim__op){.kind = SIM__OP_RECV, .peer = from->gpu[k], .bytes = from->bytes,
                         .t = from->lat, .ev = dir});
}

static void emit_sends(lower *L, int g, const peers *to, int dir) {
  for (int k = 0; k < to->n; k++)
    emit(L, g, (sim__op){.kind = SIM__OP_SEND, .peer = to->gpu[k], .bytes = to->bytes, .ev = dir});
}

/* The data-parallel tail: gradient reduction (in a helper from the last backward on when
 * async_at >= 0), optimizer, and the distributed optimizer's gather when not overlapped.
 * Under ZeRO-3 the gradients were reduce-scattered and the parameters are gathered per part,
 * so only the optimizer remains. */
static void emit_tail(lower *L, const gpu_plan *gp, int async_at) {
  sim__world *w = L->w;
  const cm_params *prm = cm_model_params(w->cm);
  int g = gp->g, D = gp->dp * gp->cp;
  cm_tail tail;
  cm_dp_tail(w->cm, gp->pr, gp->counts, gp->r, gp->P, gp->nvs, D, gp->ep, gp->zero >= 1, &tail);
  sim__prog *pg = &w->prog[g];
  emit_begin(L, g, -1, 0);
  int z3 = gp->zero >= 3, tail_start = pg->n;
  if (D > 1 && !z3) emit_coll(L, g, gp->grp[SPEC_GRP_DP], tail.reduce, tail.dense_grad_bytes, SIM_EV_DP);
  if (tail.expert_grad_bytes > 0 && D / gp->ep > 1 && !z3)
    emit_coll(L, g, gp->grp[SPEC_GRP_EDP], tail.reduce, tail.expert_grad_bytes, SIM_EV_DP);
  if (async_at >= 0 && !L->rc) {
    pg->ops[async_at].a = tail_start, pg->ops[async_at].b = pg->n;
    emit(L, g, (sim__op){.kind = SIM__OP_JOIN, .slot = SLOT_DP, .ev = SIM_EV_DP});
  }
  emit_sleep(L, g, cm_optimizer_time(w->cm, tail.shard_params), SIM_EV_OPTIMIZER);
  if (tail.gather_bytes > 0 && D > 1 && !prm->overlap_param_gather && !z3)
    emit_coll(L, g, gp->grp[SPEC_GRP_DP], CM_ALL_GATHER, tail.gather_bytes, SIM_EV_DP);
}

/* One GPU's program: the templates of its parts, then its schedule's items, then the
 * data-parallel tail. */
static void emit_gpu(lower *L, const gpu_plan *gp, spec_step *items) {
  sim__world *w = L->w;
  const cm_params *prm = cm_model_params(w->cm);
  int g = gp->g, r = gp->r, P = gp->P, nvs = gp->nvs;
  sim__prog *pg = &w->prog[g];
  tmpl T[NPARTS][2];
  for (int part = 0; part < NPARTS; part++)
    for (int fwd = 0; fwd < 2; fwd++) build_tmpl(L, gp, part, fwd, &T[part][fwd], NULL, 0, NULL);
  zero3 z = {.on = gp->zero >= 3 && w->groups[gp->grp[SPEC_GRP_DP]].n > 1};
  if (z.on) zero3_build(L, gp, &z);
  pg->main_at = pg->n; /* the program starts here */
  int n = spec_schedule_steps(L->p->schedule, P, r, gp->mb, gp->v, items);
  int last_b = -1;
  for (int i = 0; i < n; i++)
    if (!items[i].fwd) last_b = i;
  int dp_async = prm->overlap_grad_reduce && gp->dp * gp->cp > 1 && gp->zero < 3, async_at = -1;
  for (int i = 0; i < n && !L->rc; i++) {
    spec_step it = items[i];
    int vs = it.chunk * P + r; /* virtual stage */
    int first = vs == 0, last = vs == nvs - 1;
    chunk_agg agg = {{0}};
    if (!it.fwd && i == last_b && dp_async) { /* DP reduction overlaps the last backward */
      async_at = pg->n;
      emit(L, g, (sim__op){.kind = SIM__OP_ASYNC, .slot = SLOT_DP, .a = -1});
    }
    if (it.fwd && !first) emit_recvs(L, g, &gp->prev, 0);
    if (!it.fwd && !last) emit_recvs(L, g, &gp->next, 1);
    emit_begin(L, g, it.mb, it.chunk);
    if (z.on) {
      /* ZeRO-3: the forward and the backward of a microbatch that follow each other (the last
       * stage) as one schedule, the head between the passes; else each pass by itself */
      int both = it.fwd && last && i + 1 < n && !items[i + 1].fwd && items[i + 1].mb == it.mb &&
                 items[i + 1].chunk == it.chunk;
      const tmpl *mid[2] = {last ? &T[P_HEAD][1] : NULL, last ? &T[P_HEAD][0] : NULL};
      if (it.fwd && first) run_tmpl(L, g, &T[P_EMBED][1], 1, &agg);
      if (!it.fwd && last) run_tmpl(L, g, &T[P_HEAD][0], 1, &agg);
      zero3_run(L, gp, &z, gp->counts[vs], it.fwd, !it.fwd || both, both ? mid : NULL, &agg);
      if (it.fwd && last && !both) run_tmpl(L, g, &T[P_HEAD][1], 1, &agg);
      if ((!it.fwd || both) && first) run_tmpl(L, g, &T[P_EMBED][0], 1, &agg);
      if (both) i++, it = items[i];
    } else {
      int seq[3], cnt[3], ns = part_seq(gp->counts[vs], first, last, it.fwd, seq, cnt);
      for (int s = 0; s < ns; s++) run_tmpl(L, g, &T[seq[s]][it.fwd], cnt[s], &agg);
    }
    emit_agg(L, gp, &agg, it.fwd ? SIM_EV_FORWARD : SIM_EV_BACKWARD);
    if (it.fwd && !last) emit_sends(L, g, &gp->next, 0);
    if (!it.fwd && !first) emit_sends(L, g, &gp->prev, 1);
  }
  emit_tail(L, gp, async_at);
  cm_zero3_sched_free(&z.s);
}

/* Every GPU of the plan's layout: its groups (created in the layout's order, so group ids
 * are layout indices), layer profile, pipeline peers and program. */
static int lower_layout(lower *L, const spec_layout *lay) {
  sim__world *w = L->w;
  const spec_plan *p = L->p;
  const spec_model *m = L->m;
  int P = lay->nstages, v = lay->vpp, mb = lay->microbatches, uni = p->nstages == 0;
  int nprof = uni ? 1 : P;
  cm_layer_profile *prs = calloc((size_t)nprof, sizeof *prs);
  spec_step *items = malloc((size_t)2 * mb * v * sizeof *items);
  if (!prs || !items) {
    free(prs), free(items);
    return pp_err_set(L->err, PP_NOMEM, "sim: out of memory");
  }
  for (int i = 0; i < lay->ngroups && !L->rc; i++) {
    const spec_group *g = &lay->groups[i];
    int id = sim__group_add(w, g->gpus, g->n, L->err);
    if (id < 0) L->rc = L->err->code;
    assert(id < 0 || id == i);
  }
  for (int i = 0; i < nprof && !L->rc; i++) {
    const spec_stage *st = uni ? NULL : &p->stages[i];
    int tp = uni ? p->tp : st->tp, cp = uni ? p->cp : st->cp, ep = uni ? p->ep : st->ep;
    int dp = uni ? p->dp : st->dp;
    int mbs = uni ? p->mbs : p->gbs / p->microbatches / st->dp, sp = uni ? p->sp : p->sp && tp > 1;
    if (cm_layer_profile_get(w->cm, tp, cp, ep, dp, mbs, sp, uni ? p->recompute : st->recompute,
                             &prs[i]))
      L->rc = pp_err_set(L->err, PP_PLAN, "sim: stage %d has no layer profile", i);
  }
  double act = uni ? 0 : (double)p->gbs / p->microbatches * m->seq_len * m->hidden * 2;
  for (int k = 0; k < lay->nslots && !L->rc; k++) {
    const spec_slot *sl = &lay->slots[k];
    const spec_stage *st = uni ? NULL : &p->stages[sl->stage];
    const cm_layer_profile *pr = &prs[uni ? 0 : sl->stage];
    int per = uni ? p->tp * p->cp * p->dp : st->ngpus;
    int sharing = per < w->topo.gpn ? per : w->topo.gpn, g = sl->gpu;
    double bp = 0, lp = 0, bn = 0, ln = 0;
    if (uni) { /* one message of the stage's activation each way, priced on one neighbour */
      int dn = sl->nnext ? sl->next[0] : sl->nprev ? sl->prev[0] : g;
      p2p_parts(w, g, dn, sharing, pr->p2p_bytes, &bp, &lp);
      bn = bp, ln = lp;
    } else {
      if (sl->nprev) p2p_parts(w, g, sl->prev[0], sharing, act / sl->prev_split, &bp, &lp);
      if (sl->nnext) p2p_parts(w, g, sl->next[0], sharing, act / sl->next_split, &bn, &ln);
    }
    int tp = uni ? p->tp : st->tp;
    gpu_plan gp = {.g = g, .r = sl->stage, .P = P, .v = v, .mb = mb, .counts = lay->layers,
                   .nvs = P * v, .pr = pr, .tp = tp, .cp = uni ? p->cp : st->cp,
                   .ep = uni ? p->ep : st->ep, .dp = uni ? p->dp : st->dp,
                   .mbs = uni ? p->mbs : p->gbs / p->microbatches / st->dp,
                   .sp = uni ? p->sp : p->sp && tp > 1, .zero = p->zero,
                   .rc = uni ? p->recompute : st->recompute,
                   .prev = {sl->nprev, sl->prev, bp, lp}, .next = {sl->nnext, sl->next, bn, ln}};
    memcpy(gp.grp, sl->group, sizeof gp.grp);
    emit_gpu(L, &gp, items);
  }
  free(prs), free(items);
  return L->rc;
}

int sim__lower(sim__world *w, const spec_model *m, const spec_plan *p, pp_err *err) {
  lower L = {w, m, p, err, 0};
  spec_layout lay;
  if (spec_layout_build(p, m, w->ngpu, &lay, err)) return err->code;
  int rc = lower_layout(&L, &lay);
  spec_layout_free(&lay);
  return rc;
}
