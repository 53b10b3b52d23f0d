/* Tree all-reduce as SimGrid flows along the tree's own edges.
 *
 * The layout is NCCL's (graph/trees.cc, graph/connect.cc): a group's NVLink domains (NCCL's
 * nodes), in GPU order, are joined by a double binary tree. Tree 0 is NCCL's binary tree (rank
 * 0 the root, with one child; a rank's parent clears its lowest set bit and sets the next one,
 * or only clears it when that is past the last rank), tree 1 the same mirrored (an even count
 * of domains) or shifted by one rank (odd), so that a domain is inner in at most one of them.
 * Inside a domain the members form a chain down from a head. A group of h ring channels (the
 * NICs it spreads over, sim_prog.c) has 2h tree channels: channel k has its heads at position
 * k % h of every domain's members (the same rail in every domain) and runs tree k / h, so that
 * each head's NIC carries one channel of each tree, as NCCL's doubled channels do. A channel
 * reduces 1/(2h) of the buffer: its partial sums go up every edge, the result comes down.
 *
 * Volumes: an edge between domains carries the channel's share (over the cost model's ramp),
 * which puts on each head's NIC what the cost model's NIC part counts (v(N) S per domain: a
 * domain inner in one tree sends 3 shares on its NIC, 1 as a leaf of the other). An edge inside
 * a domain carries the share times `nvl`: the factor that makes the busiest link's time alone
 * the cost model's NVLink part of the tree (2S at 0.92 of the NVLink bandwidth: NCCL's busBw/2
 * convention, which a chain's ports do not all carry), found from the routes' loads.
 *
 * fast: the partial sums a member sends a peer over all channels as one flow and the results
 * as another, every flow at once (the pipeline's steady state), then the latency. A member is
 * done only when the word that every flow is done reaches it: a word goes up channel 0's tree
 * from each member once its own flows and its children's words are in, and one comes down from
 * the root, so that an input slowed by another group's traffic holds every result back.
 * step: the chunk pipeline in rounds: the buffer cut into K chunks of about 512 KiB per channel
 * (NCCL's tree chunk, 4 MiB buffers over 8 steps), or more when the pipeline's fill would not
 * fit in the latency (at most SIM__TREE_MAXCHUNKS); a member sends chunk i up in round i + its
 * height and down in round i + the root's height + its depth, everything it sends one member
 * in a round as one message. The fill, the rounds' time on an idle fabric beyond the steady
 * state's (from the routes' loads round by round), is taken out of the latency. */
#include <math.h>
#include <simgrid/actor.h>
#include <simgrid/comm.h>
#include <simgrid/mailbox.h>
#include <stdlib.h>
#include <string.h>

#include "sim_int.h"

#define SIM__TREE_CHUNK (512.0 * 1024)
#define SIM__TREE_MAXCHUNKS 1024

/* ---- the layout ------------------------------------------------------------------------------ */

/* NCCL's node: the NVLink domain, or the host where GPUs have no NVLink. */
static int tree_unit(const sim__topo *t) { return t->dom > 1 ? t->dom : t->gpn; }

/* 1 when the group's members are in more than one of NCCL's nodes and the fabric is not a
 * torus: the groups sim__tree_parents builds a tree for (told without sorting them). */
static int many_domains(const sim__world *w, const sim__group *g) {
  int unit = tree_unit(&w->topo);
  for (int i = 1; i < g->n; i++)
    if (g->gpus[i] / unit != g->gpus[0] / unit) return !w->topo.torus;
  return 0;
}

/* The parent of rank r in NCCL's binary tree over n ranks (-1: the root, rank 0). */
static int btree_up(int n, int r) {
  if (r <= 0) return -1;
  int bit = r & -r, up = (r ^ bit) | (bit << 1);
  return up < n ? up : r ^ bit;
}

/* The parent of rank r in tree t (0 or 1) of NCCL's double binary tree over n ranks. */
static int dtree_up(int n, int r, int t) {
  if (!t) return btree_up(n, r);
  if (n % 2) {
    int u = btree_up(n, (r + n - 1) % n);
    return u < 0 ? -1 : (u + 1) % n;
  }
  int u = btree_up(n, n - 1 - r);
  return u < 0 ? -1 : n - 1 - u;
}

int sim__tree_parents(const sim__world *w, const sim__group *g, int *parent) {
  const sim__topo *t = &w->topo;
  int n = g->n, unit = tree_unit(t), h = g->nch > 0 ? g->nch : 1;
  if (!many_domains(w, g)) return 0;
  if (!parent) return 2 * h;
  int *by = malloc((size_t)n * sizeof *by), *first = malloc(((size_t)n + 1) * sizeof *first);
  if (!by || !first) {
    free(by), free(first);
    return -1;
  }
  sim__by_gpu(g->gpus, n, by);
  int D = 0;
  for (int i = 0; i < n; i++)
    if (i == 0 || g->gpus[by[i]] / unit != g->gpus[by[i - 1]] / unit) first[D++] = i;
  first[D] = n;
  for (int k = 0; k < 2 * h; k++) {
    int pos = k % h, tr = k / h;
    for (int d = 0; d < D; d++) {
      int c = first[d + 1] - first[d], head = pos % c;
      for (int j = 0; j < c; j++) {
        int m = by[first[d] + (head + j) % c], up = -1;
        if (j > 0) {
          up = by[first[d] + (head + j - 1) % c];
        } else {
          int pd = dtree_up(D, d, tr);
          if (pd >= 0) up = by[first[pd] + pos % (first[pd + 1] - first[pd])];
        }
        parent[k * n + m] = up;
      }
    }
  }
  free(by), free(first);
  return 2 * h;
}

int sim__tree_ok(const sim__world *w, int gi, cm_coll c, double bytes) {
  const sim__group *g = &w->groups[gi];
  cm_coll_parts p;
  return c == CM_ALL_REDUCE && bytes > 0 && g->n > 1 && many_domains(w, g) &&
         !cm_coll_split(w->cm, c, CM_ALGO_TREE, bytes, &g->pl, &p);
}

/* ---- a group's trees in the run ------------------------------------------------------------ */

typedef struct sim__tree {
  int n, nch;
  int *up;                /* [k * n + m]: the parent, -1 for the root */
  int *kid0, *kids;       /* children of (k, m): kids[kid0[k * n + m] .. kid0[k * n + m + 1]) */
  int *hu, *hd;           /* [k * n + m]: chunk i goes up in round i + hu, down in i + hd */
  int extra;              /* rounds beyond the chunks */
  unsigned char *in;      /* [k * n + m]: its edge to its parent stays in an NVLink domain */
  int *peer0, *peers;     /* who m exchanges with: peers[peer0[m] .. peer0[m + 1]) */
  int *pslot, *kslot;     /* the parent's slot among m's peers ([k * n + m]); a child's ([j]) */
  int *hop0, *hops;       /* the route's link directions to peer j: hops[hop0[j] .. hop0[j + 1]) */
  double nvl;             /* flow bytes per byte of share on an edge inside a domain */
  int gi;                 /* the group */
  /* mailboxes, looked up on first use (a lookup is a simcall: other actors run meanwhile) */
  sg_mailbox_t *wu, *wd;  /* [m] (fast): its word up, the word down to it */
  sg_mailbox_t *inbox;    /* [2 j + up]: m's from its peer j: results (or, in the step form, a
                             round's everything), and partial sums (fast) */
  int *outidx;            /* [j]: peer j's inbox entry for m */
  double step_bytes, step_lat; /* the step form's last buffer, and its latency after the fill */
  int step_k;
} sim__tree;

static void *xalloc(size_t n) {
  void *p = calloc(n ? n : 1, 1);
  if (!p) abort(); /* the child reports a crash as a failed run */
  return p;
}

/* Children, heights and depths of every channel; the rounds beyond the chunks. */
static void tree_shape(sim__tree *T) {
  int n = T->n, nch = T->nch;
  T->kid0 = xalloc(((size_t)nch * n + 1) * sizeof *T->kid0);
  T->kids = xalloc((size_t)nch * n * sizeof *T->kids);
  T->hu = xalloc((size_t)nch * n * sizeof *T->hu);
  T->hd = xalloc((size_t)nch * n * sizeof *T->hd);
  int *order = xalloc((size_t)n * sizeof *order), *fill = xalloc((size_t)n * sizeof *fill);
  for (int k = 0; k < nch; k++) {
    const int *up = T->up + k * n;
    int *kid0 = T->kid0 + k * n, base = k ? T->kid0[k * n] : 0;
    memset(fill, 0, (size_t)n * sizeof *fill);
    for (int m = 0; m < n; m++)
      if (up[m] >= 0) fill[up[m]]++;
    for (int m = 0, at = base; m < n; m++) kid0[m] = at, at += fill[m];
    T->kid0[(k + 1) * n] = kid0[n - 1] + fill[n - 1];
    for (int m = 0; m < n; m++) fill[m] = kid0[m];
    int root = -1;
    for (int m = 0; m < n; m++) {
      if (up[m] >= 0) T->kids[fill[up[m]]++] = m;
      else root = m;
    }
    /* breadth first from the root: depths; then heights from the leaves up */
    int *hu = T->hu + k * n, *hd = T->hd + k * n, q = 0;
    order[q++] = root;
    hd[root] = 0;
    for (int i = 0; i < q; i++)
      for (int j = kid0[order[i]]; j < T->kid0[k * n + order[i] + 1]; j++) {
        hd[T->kids[j]] = hd[order[i]] + 1;
        order[q++] = T->kids[j];
      }
    for (int i = q - 1; i >= 0; i--) {
      int m = order[i];
      hu[m] = 0;
      for (int j = kid0[m]; j < T->kid0[k * n + m + 1]; j++)
        if (hu[T->kids[j]] + 1 > hu[m]) hu[m] = hu[T->kids[j]] + 1;
    }
    for (int m = 0; m < n; m++) hd[m] += hu[root];
    for (int m = 0; m < n; m++)
      if (up[m] >= 0 && hd[up[m]] > T->extra) T->extra = hd[up[m]];
  }
  free(order), free(fill);
}

/* The members each one exchanges with, slots of parents and children among them, and the
 * routes to them. */
static void tree_peers(const sim__world *w, const sim__group *g, sim__tree *T) {
  int n = T->n, nch = T->nch;
  int *deg = xalloc((size_t)n * sizeof *deg), *stamp = xalloc((size_t)n * sizeof *stamp);
  int *list = xalloc((size_t)n * sizeof *list);
  T->peer0 = xalloc(((size_t)n + 1) * sizeof *T->peer0);
  /* a member's peers: its parents and children over all channels (few: two in its chain and
   * a head's tree neighbours) */
  size_t cap = 8 * (size_t)n, used = 0;
  T->peers = xalloc(cap * sizeof *T->peers);
  for (int m = 0; m < n; m++) stamp[m] = -1;
  for (int m = 0; m < n; m++) {
    int c = 0;
    for (int k = 0; k < nch; k++) {
      int p = T->up[k * n + m];
      if (p >= 0 && stamp[p] != m) stamp[p] = m, list[c++] = p;
      for (int j = T->kid0[k * n + m]; j < T->kid0[k * n + m + 1]; j++)
        if (stamp[T->kids[j]] != m) stamp[T->kids[j]] = m, list[c++] = T->kids[j];
    }
    if (used + c > cap) {
      while (used + c > cap) cap *= 2;
      T->peers = realloc(T->peers, cap * sizeof *T->peers);
      if (!T->peers) abort();
    }
    T->peer0[m] = (int)used;
    memcpy(T->peers + used, list, (size_t)c * sizeof *list);
    used += c;
    deg[m] = c;
  }
  T->peer0[n] = (int)used;
  T->pslot = xalloc((size_t)nch * n * sizeof *T->pslot);
  T->kslot = xalloc((size_t)T->kid0[nch * n] * sizeof *T->kslot + 1);
  for (int m = 0; m < n; m++) {
    const int *pm = T->peers + T->peer0[m];
    for (int s = 0; s < deg[m]; s++) stamp[pm[s]] = s; /* slot of each peer of m */
    for (int k = 0; k < nch; k++) {
      int p = T->up[k * n + m];
      T->pslot[k * n + m] = p >= 0 ? stamp[p] : -1;
      for (int j = T->kid0[k * n + m]; j < T->kid0[k * n + m + 1]; j++)
        T->kslot[j] = stamp[T->kids[j]];
    }
    for (int s = 0; s < deg[m]; s++) stamp[pm[s]] = -1;
  }
  /* routes, as link directions */
  T->hop0 = xalloc(((size_t)used + 1) * sizeof *T->hop0);
  size_t hcap = 4 * used + 4, hn = 0;
  T->hops = xalloc(hcap * sizeof *T->hops);
  sim__hop h[SIM__MAXHOPS];
  for (int m = 0; m < n; m++)
    for (int j = T->peer0[m]; j < T->peer0[m + 1]; j++) {
      int nh = sim__route(&w->topo, g->gpus[m], g->gpus[T->peers[j]], h);
      if (nh > SIM__MAXHOPS) nh = SIM__MAXHOPS;
      if (hn + nh > hcap) {
        while (hn + nh > hcap) hcap *= 2;
        T->hops = realloc(T->hops, hcap * sizeof *T->hops);
        if (!T->hops) abort();
      }
      T->hop0[j] = (int)hn;
      for (int x = 0; x < nh; x++) T->hops[hn++] = sim__hop_key(&w->topo, &h[x]);
    }
  T->hop0[used] = (int)hn;
  free(deg), free(stamp), free(list);
}

/* The slot of peer q's route from m (j in m's peer list). */
static int slot_of(const sim__tree *T, int m, int q) {
  for (int j = T->peer0[m]; j < T->peer0[m + 1]; j++)
    if (T->peers[j] == q) return j - T->peer0[m];
  return -1;
}

/* Seconds a link direction takes for `bytes`. */
static double key_time(const sim__topo *t, int key, double bytes) {
  double bw = sim__link_bw(t, key / 2);
  return bw > 0 ? bytes / bw : 0;
}

/* The factor on edges inside a domain: the cost model's NVLink part of the tree over the
 * busiest link's time when those edges carry one share each (network edges left out). */
static double tree_nvl(const sim__world *w, const sim__group *g, const sim__tree *T) {
  const sim__topo *t = &w->topo;
  int n = T->n, any = 0;
  double *load = xalloc(2 * (size_t)(t->nlinks + 1) * sizeof *load);
  for (int k = 0; k < T->nch; k++)
    for (int m = 0; m < n; m++) {
      int p = T->up[k * n + m];
      if (p < 0 || !T->in[k * n + m]) continue;
      any = 1;
      int a = T->peer0[m] + T->pslot[k * n + m], b = T->peer0[p] + slot_of(T, p, m);
      for (int x = T->hop0[a]; x < T->hop0[a + 1]; x++) load[T->hops[x]] += 1.0 / T->nch;
      for (int x = T->hop0[b]; x < T->hop0[b + 1]; x++) load[T->hops[x]] += 1.0 / T->nch;
    }
  double worst = 0;
  for (int key = 0; key < 2 * t->nlinks; key++)
    if (load[key] > 0) worst = fmax(worst, key_time(t, key, load[key]));
  free(load);
  if (!any || worst <= 0) return 1;
  /* the cost model's NVLink part: the tree on the group's placement with an enormous network */
  cm_place fast = g->pl;
  cm_coll_parts p;
  double S = 1 << 20;
  fast.key = 0;
  for (int l = CM_LVL_NET; l <= CM_LVL_SPINE; l++) fast.bw_gbps[l] = 1e30;
  if (cm_coll_split(w->cm, CM_ALL_REDUCE, CM_ALGO_TREE, S, &fast, &p) || p.bw_Bps <= 0) return 1;
  return p.vol_bytes / p.bw_Bps / S / worst;
}

/* A group's trees, made by the first member to need them before anything yields. */
static sim__tree *tree_of(sim__world *w, int gi) {
  sim__group *g = &w->groups[gi];
  if (g->tree) return g->tree;
  int n = g->n, nch = sim__tree_parents(w, g, NULL);
  if (nch < 0) abort();
  if (nch == 0) return NULL;
  sim__tree *T = xalloc(sizeof *T);
  T->n = n, T->nch = nch;
  T->up = xalloc((size_t)nch * n * sizeof *T->up);
  if (sim__tree_parents(w, g, T->up) != nch) abort();
  tree_shape(T);
  tree_peers(w, g, T);
  const sim__topo *t = &w->topo;
  int unit = tree_unit(t);
  T->in = xalloc((size_t)nch * n);
  for (int k = 0; k < nch; k++)
    for (int m = 0; m < n; m++) {
      int p = T->up[k * n + m];
      T->in[k * n + m] = p >= 0 && t->has_nvl && g->gpus[m] / unit == g->gpus[p] / unit;
    }
  T->nvl = tree_nvl(w, g, T);
  T->gi = gi;
  T->wu = xalloc((size_t)n * sizeof *T->wu);
  T->wd = xalloc((size_t)n * sizeof *T->wd);
  int np = T->peer0[n];
  T->inbox = xalloc(2 * ((size_t)np + 1) * sizeof *T->inbox);
  T->outidx = xalloc(((size_t)np + 1) * sizeof *T->outidx);
  for (int m = 0; m < n; m++)
    for (int j = T->peer0[m]; j < T->peer0[m + 1]; j++) {
      int q = T->peers[j];
      T->outidx[j] = T->peer0[q] + slot_of(T, q, m);
    }
  T->step_bytes = -1;
  g->tree = T;
  return T;
}

void sim__tree_done(sim__world *w) {
  for (int i = 0; i < w->ngroups; i++) {
    sim__tree *T = w->groups[i].tree;
    if (!T) continue;
    free(T->up), free(T->kid0), free(T->kids), free(T->hu), free(T->hd), free(T->in);
    free(T->peer0), free(T->peers), free(T->pslot), free(T->kslot), free(T->hop0), free(T->hops);
    free(T->wu), free(T->wd), free(T->inbox), free(T->outidx);
    free(T);
    w->groups[i].tree = NULL;
  }
}

/* The mailboxes, looked up on first use: m's word up, the word down to it; its inboxes from its
 * peer entry j (partial sums or results in the fast form; a round's everything in the step). */
static sg_mailbox_t box_word(sim__tree *T, int up, int m) {
  sg_mailbox_t *b = up ? &T->wu[m] : &T->wd[m];
  return *b ? *b : (*b = sim__mbox(up ? "tw%d.%d" : "tg%d.%d", T->gi, m));
}
static sg_mailbox_t box_in(sim__tree *T, int m, int j, int up) {
  sg_mailbox_t *b = &T->inbox[2 * j + up];
  return *b ? *b : (*b = sim__mbox("t%c%d.%d.%d", up ? 'u' : 's', T->gi, m, T->peers[j]));
}

/* Flow bytes of channel k's edge between m and its parent, per byte of share. */
static double edge(const sim__tree *T, int k, int m) { return T->in[k * T->n + m] ? T->nvl : 1; }

/* ---- fast ------------------------------------------------------------------------------------ */

/* What member m sends each peer over all channels (bytes per byte of share) as partial sums
 * (up[slot]) and as results (down[slot]), and from whom it gets which (hu[slot], hd[slot]). */
static void flows_of(const sim__tree *T, int m, double *up, double *down, int *hu, int *hd) {
  int n = T->n, np = T->peer0[m + 1] - T->peer0[m];
  for (int s = 0; s < np; s++) up[s] = down[s] = 0, hu[s] = hd[s] = 0;
  for (int k = 0; k < T->nch; k++) {
    int p = T->up[k * n + m];
    if (p >= 0) up[T->pslot[k * n + m]] += edge(T, k, m), hd[T->pslot[k * n + m]] = 1;
    for (int j = T->kid0[k * n + m]; j < T->kid0[k * n + m + 1]; j++)
      down[T->kslot[j]] += edge(T, k, T->kids[j]), hu[T->kslot[j]] = 1;
  }
}

static void tree_fast(sim__world *w, const sim__group *g, sim__tree *T, int member,
                      double share, double lat) {
  int np = T->peer0[member + 1] - T->peer0[member], me = g->gpus[member];
  double *up = xalloc(((size_t)np + 1) * sizeof *up);
  double *down = xalloc(((size_t)np + 1) * sizeof *down);
  int *hu = xalloc(((size_t)np + 1) * sizeof *hu), *hd = xalloc(((size_t)np + 1) * sizeof *hd);
  sg_comm_t *c = xalloc((4 * (size_t)np + 2 * (size_t)(T->kid0[member + 1] - T->kid0[member]) + 2) *
                        sizeof *c);
  size_t q = 0;
  void *data;
  flows_of(T, member, up, down, hu, hd);
  for (int s = 0; s < np; s++) {
    int j = T->peer0[member] + s, peer = g->gpus[T->peers[j]], o = T->outidx[j];
    if (hu[s]) c[q++] = sg_mailbox_get_async(box_in(T, member, j, 1), &data);
    if (hd[s]) c[q++] = sg_mailbox_get_async(box_in(T, member, j, 0), &data);
    if (up[s] > 0) c[q++] = sim__put(w, me, peer, box_in(T, T->peers[j], o, 1), up[s] * share);
    if (down[s] > 0) c[q++] = sim__put(w, me, peer, box_in(T, T->peers[j], o, 0), down[s] * share);
  }
  sim__wait_all(c, q);
  /* the word up channel 0's tree once this member's flows and those of every member below it
   * are done; then the word down that all of them are */
  q = 0;
  for (int j = T->kid0[member]; j < T->kid0[member + 1]; j++) {
    sg_comm_t x = sg_mailbox_get_async(box_word(T, 1, T->kids[j]), &data);
    sg_comm_wait(x);
  }
  int p0 = T->up[member];
  if (p0 >= 0) {
    c[q++] = sim__put(w, me, g->gpus[p0], box_word(T, 1, member), 1);
    sg_comm_t x = sg_mailbox_get_async(box_word(T, 0, member), &data);
    sg_comm_wait(x);
  }
  for (int j = T->kid0[member]; j < T->kid0[member + 1]; j++)
    c[q++] = sim__put(w, me, g->gpus[T->kids[j]], box_word(T, 0, T->kids[j]), 1);
  sim__wait_all(c, q);
  free(up), free(down), free(hu), free(hd), free(c);
  sim__sleep(lat);
}

/* ---- step ------------------------------------------------------------------------------------ */

/* What member m sends each peer (bytes per byte of chunk, out[slot]) and whom it hears from
 * (heard[slot]) in round r of a K-chunk pipeline. */
static void round_of(const sim__tree *T, int m, int r, int K, double *out, int *heard) {
  int n = T->n, np = T->peer0[m + 1] - T->peer0[m];
  for (int s = 0; s < np; s++) out[s] = 0, heard[s] = 0;
  for (int k = 0; k < T->nch; k++) {
    int p = T->up[k * n + m], i;
    if (p >= 0) {
      i = r - T->hu[k * n + m];
      if (i >= 0 && i < K) out[T->pslot[k * n + m]] += edge(T, k, m);
      i = r - T->hd[k * n + p];
      if (i >= 0 && i < K) heard[T->pslot[k * n + m]] = 1;
    }
    for (int j = T->kid0[k * n + m]; j < T->kid0[k * n + m + 1]; j++) {
      int c = T->kids[j];
      i = r - T->hu[k * n + c];
      if (i >= 0 && i < K) heard[T->kslot[j]] = 1;
      i = r - T->hd[k * n + m];
      if (i >= 0 && i < K) out[T->kslot[j]] += edge(T, k, c);
    }
  }
}

/* The pipeline's fill on an idle fabric for K chunks of `chunk` bytes: the rounds' time (each
 * its busiest link's) beyond the steady state's (all rounds' bytes on the busiest link). */
static double tree_fill(const sim__world *w, const sim__tree *T, int K, double chunk) {
  const sim__topo *t = &w->topo;
  int n = T->n, maxdeg = 1;
  for (int m = 0; m < n; m++)
    if (T->peer0[m + 1] - T->peer0[m] > maxdeg) maxdeg = T->peer0[m + 1] - T->peer0[m];
  size_t nk = 2 * (size_t)(t->nlinks + 1);
  double *load = xalloc(nk * sizeof *load), *total = xalloc(nk * sizeof *total);
  double *out = xalloc((size_t)maxdeg * sizeof *out), rounds = 0;
  int *heard = xalloc((size_t)maxdeg * sizeof *heard), *touched = xalloc(nk * sizeof *touched);
  for (int r = 0; r < K + T->extra; r++) {
    size_t nt = 0;
    for (int m = 0; m < n; m++) {
      round_of(T, m, r, K, out, heard);
      for (int s = 0; s < T->peer0[m + 1] - T->peer0[m]; s++) {
        if (out[s] <= 0) continue;
        int j = T->peer0[m] + s;
        for (int x = T->hop0[j]; x < T->hop0[j + 1]; x++) {
          int key = T->hops[x];
          if (load[key] == 0) touched[nt++] = key;
          load[key] += out[s] * chunk;
        }
      }
    }
    double rt = 0;
    for (size_t i = 0; i < nt; i++) {
      rt = fmax(rt, key_time(t, touched[i], load[touched[i]]));
      total[touched[i]] += load[touched[i]];
      load[touched[i]] = 0;
    }
    rounds += rt;
  }
  double steady = 0;
  for (size_t key = 0; key + 1 < nk; key++)
    if (total[key] > 0) steady = fmax(steady, key_time(t, (int)key, total[key]));
  free(load), free(total), free(out), free(heard), free(touched);
  return rounds - steady;
}

static void tree_step(sim__world *w, int gi, sim__tree *T, int member, double bytes,
                      double share, double lat) {
  const sim__group *g = &w->groups[gi];
  if (T->step_bytes != bytes) { /* once per buffer: the chunks and the latency left */
    double k = ceil(share / SIM__TREE_CHUNK), fill;
    int K = k < 1 ? 1 : k > SIM__TREE_MAXCHUNKS ? SIM__TREE_MAXCHUNKS : (int)k;
    fill = tree_fill(w, T, K, share / K);
    for (int tries = 0; fill > lat && K < SIM__TREE_MAXCHUNKS && tries < 4; tries++) {
      /* the fill falls about as 1/K once K passes the pipeline's depth */
      k = ceil(K * 1.25 * fill / fmax(lat, 1e-12));
      K = k > SIM__TREE_MAXCHUNKS ? SIM__TREE_MAXCHUNKS : (int)k;
      fill = tree_fill(w, T, K, share / K);
    }
    T->step_bytes = bytes, T->step_k = K, T->step_lat = fmax(0, lat - fill);
    }
  int K = T->step_k, np = T->peer0[member + 1] - T->peer0[member], me = g->gpus[member];
  double *out = xalloc(((size_t)np + 1) * sizeof *out), chunk = share / K;
  int *heard = xalloc(((size_t)np + 1) * sizeof *heard);
  sg_comm_t *c = xalloc(2 * ((size_t)np + 1) * sizeof *c);
  void *data;
  for (int r = 0; r < K + T->extra; r++) {
    round_of(T, member, r, K, out, heard);
    size_t q = 0;
    for (int s = 0; s < np; s++) {
      int j = T->peer0[member] + s;
      if (heard[s]) c[q++] = sg_mailbox_get_async(box_in(T, member, j, 0), &data);
      if (out[s] > 0)
        c[q++] = sim__put(w, me, g->gpus[T->peers[j]], box_in(T, T->peers[j], T->outidx[j], 0),
                          out[s] * chunk);
    }
    sim__wait_all(c, q);
  }
  free(out), free(heard), free(c);
  sim__sleep(T->step_lat);
}

int sim__tree_exec(sim__world *w, int gi, int member, double bytes) {
  const sim__group *g = &w->groups[gi];
  cm_coll_parts p;
  if (bytes <= 0 || g->n < 2 ||
      cm_coll_split(w->cm, CM_ALL_REDUCE, CM_ALGO_TREE, bytes, &g->pl, &p))
    return 0;
  sim__tree *T = tree_of(w, gi); /* NULL: one domain, or a torus */
  if (!T) return 0;
  double share = bytes / T->nch / p.ramp;
  if (w->fidelity == SIM_STEP) tree_step(w, gi, T, member, bytes, share, p.lat_s);
  else tree_fast(w, g, T, member, share, p.lat_s);
  return 1;
}

void sim__tree_flows(sim__world *w, int gi, int member, double bytes) {
  sim__tree *T = tree_of(w, gi);
  if (T) tree_fast(w, &w->groups[gi], T, member, bytes / T->nch, 0);
}
