/* Groups, per-GPU programs and the lowering of a plan to them.
 *
 * A GPU's program is the sequence Megatron's schedule runs: for each (forward or backward,
 * microbatch, model chunk) its compute as a delay (the cost model's time for those layers),
 * then its exposed TP/SP, CP and EP communication replayed on the group's links, and its
 * pipeline sends (asynchronous) and receives (blocking); then the data-parallel gradient
 * reduction (in a helper actor from the last backward on when the software overlaps it), the
 * optimizer step and the distributed optimizer's parameter gather. Every GPU of the plan runs
 * its own program, so every group's traffic is on the links at once. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
  if (t->torus) return torus_channels(w, g, err) ? -1 : w->ngroups++;
  /* a ring that leaves its nodes spreads over as many channels as a node has NICs (and
   * members), each leaving the node through another NIC, as NCCL's rings do */
  g->nch = 1;
  if (t->nics && g->pl.nodes > 1 && g->pl.per_node > 1)
    g->nch = g->pl.per_node < t->nics ? g->pl.per_node : t->nics;
  g->succ = malloc((size_t)g->nch * n * sizeof *g->succ);
  int *byrank = malloc((size_t)n * sizeof *byrank), *order = malloc((size_t)n * sizeof *order);
  if (!g->succ || !byrank || !order) {
    free(byrank), free(order);
    return -pp_err_set(err, PP_NOMEM, "sim: out of memory");
  }
  /* members sorted by GPU id (nodes are ranges of ids) */
  for (int i = 0; i < n; i++) byrank[i] = i;
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && gpus[byrank[j - 1]] > gpus[byrank[j]]; j--) {
      int x = byrank[j];
      byrank[j] = byrank[j - 1];
      byrank[j - 1] = x;
    }
  for (int ch = 0; ch < g->nch; ch++) {
    /* within each node, start the node's run at its ch-th member */
    int at = 0;
    for (int i = 0; i < n;) {
      int node = gpus[byrank[i]] / t->gpn, j = i;
      while (j < n && gpus[byrank[j]] / t->gpn == node) j++;
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
  return w->ngroups++;
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

enum { USE_RING = 1, USE_A2A = 2, USE_NVLS = 4 };

static int group_pairs(const sim__world *w, const sim__group *g, unsigned use, sim__pairs *pp) {
  int rc = 0;
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

int sim__collect_pairs(const sim__world *w, sim__pairs *pp, pp_err *err) {
  unsigned *use = calloc((size_t)w->ngroups + 1, sizeof *use);
  if (!use) return pp_err_set(err, PP_NOMEM, "sim: out of memory");
  int rc = 0;
  for (int g = 0; g < w->ngpu; g++)
    for (int i = 0; i < w->prog[g].n; i++) {
      const sim__op *o = &w->prog[g].ops[i];
      switch (o->kind) {
      case SIM__OP_BATCH: use[o->group] |= USE_RING; break;
      case SIM__OP_COLL:
        use[o->group] |= o->coll == CM_ALL_TO_ALL    ? USE_A2A
                         : o->algo == CM_ALGO_NVLS   ? USE_NVLS
                         : o->algo == CM_ALGO_HIER   ? USE_A2A /* sub-rings: any pair */
                                                     : USE_RING;
        break;
      case SIM__OP_SEND: rc |= sim__pairs_add(pp, w->host_of ? w->host_of[g] : g, o->peer); break;
      case SIM__OP_RECV: rc |= sim__pairs_add(pp, o->peer, w->host_of ? w->host_of[g] : g); break;
      default: break;
      }
    }
  for (int i = 0; i < w->ngroups && !rc; i++)
    if (use[i]) rc |= group_pairs(w, &w->groups[i], use[i], pp);
  free(use);
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

static void emit(lower *L, int gpu, sim__op op) {
  if (!L->rc) L->rc = sim__op_push(&L->w->prog[gpu], &op, L->err);
}

static void emit_sleep(lower *L, int gpu, double t) {
  if (t > 0) emit(L, gpu, (sim__op){.kind = SIM__OP_SLEEP, .t = t});
}

static void emit_begin(lower *L, int gpu, sim_ev_kind k, int mb, int chunk) {
  emit(L, gpu, (sim__op){.kind = SIM__OP_BEGIN, .ev = k, .mb = mb, .chunk = chunk});
}

static void emit_end(lower *L, int gpu) { emit(L, gpu, (sim__op){.kind = SIM__OP_END}); }

/* The member index of a GPU in a group (-1 when not a member). */
static int member_of(const sim__group *g, int gpu) {
  for (int i = 0; i < g->n; i++)
    if (g->gpus[i] == gpu) return i;
  return -1;
}

/* The group with exactly these members (in this order), created when new. */
static int find_group(lower *L, const int *gpus, int n) {
  sim__world *w = L->w;
  for (int i = w->ngroups - 1; i >= 0; i--) {
    const sim__group *g = &w->groups[i];
    if (g->n == n && memcmp(g->gpus, gpus, (size_t)n * sizeof *gpus) == 0) return i;
  }
  int id = sim__group_add(w, gpus, n, L->err);
  if (id < 0) L->rc = L->err->code;
  return id;
}

/* Communication the cost model says is exposed for `seconds`, made of ring collectives moving
 * `vol` bytes per rank (ramp applied): replayed as ring flows of `vol` bytes plus a delay for
 * the rest, so that alone it takes exactly `seconds` and slows down under contention. */
static void emit_exposed(lower *L, int gpu, int group, sim_ev_kind k, double seconds, double vol,
                         double bw) {
  if (seconds <= 0) return;
  double flow = vol, delay = 0;
  if (bw <= 0 || vol <= 0) {
    flow = 0, delay = seconds;
  } else if (vol / bw > seconds) {
    flow = seconds * bw; /* partly hidden (overlap): only what shows is replayed */
  } else {
    delay = seconds - vol / bw;
  }
  emit_begin(L, gpu, k, -1, 0);
  emit(L, gpu, (sim__op){.kind = SIM__OP_BATCH, .group = group, .bytes = flow, .t = delay,
                         .member = member_of(&L->w->groups[group], gpu)});
  emit_end(L, gpu);
}

/* A collective with the algorithm the cost model (as NCCL) picks for the group; a
 * hierarchical all-reduce becomes a reduce-scatter inside each NVLink domain, an all-reduce
 * across domains among the members at the same position, and an all-gather inside. */
static void emit_coll(lower *L, int gpu, int group, cm_coll c, double bytes) {
  sim__world *w = L->w;
  const sim__group *g = &w->groups[group];
  cm_algo a = CM_ALGO_RING;
  cm_coll_best(w->cm, c, bytes, &g->pl, &a);
  if (a != CM_ALGO_HIER) {
    emit(L, gpu, (sim__op){.kind = SIM__OP_COLL, .group = group, .coll = c, .algo = a,
                           .bytes = bytes, .member = member_of(g, gpu)});
    return;
  }
  int dom = w->topo.dom, n = g->n, me = gpu / dom, pos = 0, nin = 0, nout = 0;
  int *in = malloc((size_t)n * sizeof *in), *out = malloc((size_t)n * sizeof *out);
  if (!in || !out) {
    free(in), free(out);
    L->rc = pp_err_set(L->err, PP_NOMEM, "sim: out of memory");
    return;
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
  int gi = find_group(L, in, nin), go = find_group(L, out, nout);
  if (gi >= 0 && go >= 0) {
    const sim__group *gin = &w->groups[gi], *gout = &w->groups[go];
    cm_algo ai = CM_ALGO_RING;
    cm_coll_best(w->cm, CM_ALL_REDUCE, bytes / nin, &gout->pl, &ai);
    if (ai == CM_ALGO_HIER) ai = CM_ALGO_RING;
    int mi = member_of(gin, gpu), mo = member_of(gout, gpu);
    emit(L, gpu, (sim__op){.kind = SIM__OP_COLL, .group = gi, .coll = CM_REDUCE_SCATTER,
                           .algo = CM_ALGO_RING, .bytes = bytes, .member = mi});
    emit(L, gpu, (sim__op){.kind = SIM__OP_COLL, .group = go, .coll = CM_ALL_REDUCE, .algo = ai,
                           .bytes = bytes / nin, .member = mo});
    emit(L, gpu, (sim__op){.kind = SIM__OP_COLL, .group = gi, .coll = CM_ALL_GATHER,
                           .algo = CM_ALGO_RING, .bytes = bytes, .member = mi});
  }
  free(in), free(out);
}

/* Volume per rank (ramp applied) and bandwidth of `calls` collectives of `bytes` on a group. */
static void ring_volume(const sim__world *w, const sim__group *g, cm_coll c, double bytes,
                        int calls, double *vol, double *bw) {
  cm_coll_parts parts;
  if (calls <= 0 || g->n <= 1 || cm_coll_split(w->cm, c, CM_ALGO_RING, bytes, &g->pl, &parts))
    return;
  *vol += calls * parts.vol_bytes / parts.ramp;
  *bw = parts.bw_Bps;
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
  int gtp, gcp, gdp, gep, gedp; /* its groups */
  int dp, cp, ep, zero;
  peers prev, next; /* the stage before (activations in, gradients out) and after */
} gpu_plan;

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

/* One GPU's program: its schedule's items, then the data-parallel tail. */
static void emit_gpu(lower *L, const gpu_plan *gp, spec_step *items) {
  sim__world *w = L->w;
  const cm_layer_profile *pr = gp->pr;
  const cm_params *prm = cm_model_params(w->cm);
  int g = gp->g, r = gp->r, P = gp->P, nvs = gp->nvs;
  int n = spec_schedule_steps(L->p->schedule, P, r, gp->mb, gp->v, items);
  const sim__group *gt = &w->groups[gp->gtp], *gc = &w->groups[gp->gcp],
                   *ge = &w->groups[gp->gep];
  /* per-layer exposed communication as ring flows on each group */
  double tvf = 0, tvb = 0, tvr = 0, tbw = 0, cvf = 0, cvb = 0, cbw = 0, evf = 0, evb = 0,
         evr = 0, ebw = 0;
  cm_coll c1 = pr->tp_sp ? CM_ALL_GATHER : CM_ALL_REDUCE;
  ring_volume(w, gt, c1, pr->tp_bytes, pr->tp_calls_fwd, &tvf, &tbw);
  ring_volume(w, gt, c1, pr->tp_bytes, pr->tp_calls_bwd, &tvb, &tbw);
  ring_volume(w, gt, c1, pr->tp_bytes, pr->tp_calls_recomp, &tvr, &tbw);
  if (pr->tp_sp) {
    ring_volume(w, gt, CM_REDUCE_SCATTER, pr->tp_bytes, pr->tp_calls_fwd, &tvf, &tbw);
    ring_volume(w, gt, CM_REDUCE_SCATTER, pr->tp_bytes, pr->tp_calls_bwd, &tvb, &tbw);
    ring_volume(w, gt, CM_REDUCE_SCATTER, pr->tp_bytes, pr->tp_calls_recomp, &tvr, &tbw);
  }
  ring_volume(w, gc, CM_SEND_RECV, pr->cp_step_bytes, pr->cp_steps, &cvf, &cbw);
  ring_volume(w, gc, CM_SEND_RECV, 2 * pr->cp_step_bytes, pr->cp_steps, &cvb, &cbw);
  /* an all-to-all moves (n-1)/n of its buffer per rank, as an all-gather does: its volume is
   * replayed as ring flows on the EP group */
  ring_volume(w, ge, CM_ALL_GATHER, pr->ep_bytes, pr->ep_calls_fwd, &evf, &ebw);
  ring_volume(w, ge, CM_ALL_GATHER, pr->ep_bytes, pr->ep_calls_bwd, &evb, &ebw);
  ring_volume(w, ge, CM_ALL_GATHER, pr->ep_bytes, pr->ep_calls_recomp, &evr, &ebw);
  int last_b = -1;
  for (int i = 0; i < n; i++)
    if (!items[i].fwd) last_b = i;
  int dp_async = prm->overlap_grad_reduce && gp->dp * gp->cp > 1;
  for (int i = 0; i < n && !L->rc; i++) {
    spec_step it = items[i];
    int vs = it.chunk * P + r; /* virtual stage */
    double layers = gp->counts[vs];
    int first = vs == 0, last = vs == nvs - 1;
    if (it.fwd) {
      if (!first) emit_recvs(L, g, &gp->prev, 0);
      emit_begin(L, g, SIM_EV_FORWARD, it.mb, it.chunk);
      emit_sleep(L, g, layers * pr->fwd_s + (first ? pr->embed_fwd_s : 0) +
                           (last ? pr->head_fwd_s : 0));
      emit_end(L, g);
      emit_exposed(L, g, gp->gtp, SIM_EV_TP, layers * pr->tp_fwd_s, layers * tvf, tbw);
      emit_exposed(L, g, gp->gcp, SIM_EV_CP, layers * pr->cp_fwd_s, layers * cvf, cbw);
      emit_exposed(L, g, gp->gep, SIM_EV_EP, layers * pr->ep_fwd_s, layers * evf, ebw);
      if (!last) emit_sends(L, g, &gp->next, 0);
    } else {
      if (i == last_b && dp_async) /* DP reduction overlaps the last backward */
        emit(L, g, (sim__op){.kind = SIM__OP_ASYNC, .a = -1});
      if (!last) emit_recvs(L, g, &gp->next, 1);
      emit_begin(L, g, SIM_EV_BACKWARD, it.mb, it.chunk);
      emit_sleep(L, g, layers * (pr->bwd_s + pr->recomp_s) + (first ? pr->embed_bwd_s : 0) +
                           (last ? pr->head_bwd_s : 0));
      emit_end(L, g);
      emit_exposed(L, g, gp->gtp, SIM_EV_TP, layers * (pr->tp_bwd_s + pr->tp_recomp_s),
                   layers * (tvb + tvr), tbw);
      emit_exposed(L, g, gp->gcp, SIM_EV_CP, layers * pr->cp_bwd_s, layers * cvb, cbw);
      emit_exposed(L, g, gp->gep, SIM_EV_EP, layers * (pr->ep_bwd_s + pr->ep_recomp_s),
                   layers * (evb + evr), ebw);
      if (!first) emit_sends(L, g, &gp->prev, 1);
    }
  }
  /* the data-parallel tail */
  int D = gp->dp * gp->cp;
  cm_tail tail;
  cm_dp_tail(w->cm, pr, gp->counts, r, P, nvs, D, gp->ep, gp->zero >= 1, &tail);
  sim__prog *pg = &w->prog[g];
  int async_at = -1;
  if (dp_async)
    for (int k = 0; k < pg->n; k++)
      if (pg->ops[k].kind == SIM__OP_ASYNC) async_at = k;
  int tail_start = pg->n;
  emit_begin(L, g, SIM_EV_DP, -1, 0);
  if (D > 1) emit_coll(L, g, gp->gdp, tail.reduce, tail.dense_grad_bytes);
  if (tail.expert_grad_bytes > 0 && D / gp->ep > 1)
    emit_coll(L, g, gp->gedp, tail.reduce, tail.expert_grad_bytes);
  emit_end(L, g);
  int tail_end = pg->n;
  if (async_at >= 0) {
    pg->ops[async_at].a = tail_start, pg->ops[async_at].b = tail_end;
    emit(L, g, (sim__op){.kind = SIM__OP_JOIN});
  }
  emit_begin(L, g, SIM_EV_OPTIMIZER, -1, 0);
  emit_sleep(L, g, cm_optimizer_time(w->cm, tail.shard_params));
  emit_end(L, g);
  if (tail.gather_bytes > 0 && D > 1 && !prm->overlap_param_gather) {
    emit_begin(L, g, SIM_EV_DP, -1, 0);
    emit_coll(L, g, gp->gdp, CM_ALL_GATHER, tail.gather_bytes);
    emit_end(L, g);
  }
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
    gpu_plan gp = {g, sl->stage, P, v, mb, lay->layers, P * v, pr,
                   sl->group[SPEC_GRP_TP], sl->group[SPEC_GRP_CP], sl->group[SPEC_GRP_DP],
                   sl->group[SPEC_GRP_EP], sl->group[SPEC_GRP_EDP],
                   uni ? p->dp : st->dp, uni ? p->cp : st->cp, uni ? p->ep : st->ep, p->zero,
                   {sl->nprev, sl->prev, bp, lp}, {sl->nnext, sl->next, bn, ln}};
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
