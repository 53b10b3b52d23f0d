/* Collectives as SimGrid communications, run inside the members' actors.
 *
 * Every collective takes its latency, volume and ramp from the cost model (cm_coll_split,
 * cm_coll_time), so that alone on the fabric it takes the cost model's time; what the
 * simulator adds is what the flows do to each other when they share links. Each algorithm
 * has two forms (the table `forms`): SIM_STEP simulates every step or chunk; SIM_FAST its
 * steady state in a few flows, so that a 1024-GPU iteration stays cheap.
 *   ring (all-reduce, all-gather, reduce-scatter, broadcast, send/recv): each member sends to
 *     its successor in each of the group's ring channels. step: every step's chunk as a
 *     message (2(n-1) steps for all-reduce), the fixed latency first and a hop's latency after
 *     each step; fast: the whole volume (divided by the ramp) as one message, then the latency.
 *     In both, the channels in which a member has the same successor are one message.
 *   tree all-reduce: along NCCL's tree, in sim_tree.c (its top comment has both forms).
 *   PAT (all-gather, reduce-scatter with one rank per NVLink domain): the distance-reversed
 *     Bruck exchange of NCCL's PAT, log2(n) steps to members 2^k places on, the most data to
 *     the nearest (sim__pat_steps). step: the steps in turn, each in chunks; fast: every
 *     step's message at once, then the latency.
 *   NVLSTree all-reduce: NVLS through the relays of each member's domain beside a tree of its
 *     1/p share with the members at its position in the other domains (sim__tree_flows),
 *     ending on the relay's word that every input and every tree of the domain is in. fast:
 *     the whole buffer; step: chunk by chunk.
 *   a tree inside one NVLink domain or on a torus, and NVLSTree where the domains hold
 *     unequal numbers of members: the ring's flows carrying the algorithm's volume, scaled by the ring's
 *     bandwidth over the algorithm's so that alone they take its time, with its latency, at
 *     both fidelities (sim/README.md says what that misses).
 *   NVLS: each member streams its buffer to the NVLink Switch (a relay actor on the node's
 *     NVLS host, and on the domain's when the group spans nodes of a multi-node domain) and
 *     gets the result back. step: a chunk pipeline in lockstep rounds; a relay sends a chunk's
 *     result down only in the round after the last input of that chunk arrived; the
 *     pipeline's fill is taken out of the latency delay. fast: the pipeline's steady state:
 *     every member's upward and downward stream as one flow each, at once; a relay tells its
 *     members it is done only when every input has arrived, and a member finishes when its
 *     result and that word are in.
 *   all-to-all: step: every pair of members exchanges its part, in lockstep rounds of chunks;
 *     fast: one message per peer inside the node and one per other node, carrying all that
 *     node's parts to the member on the same rail (the same bytes on every NIC, leaf uplink
 *     and NVLink Switch uplink as the pairs; a torus gets one message per pair).
 *   hierarchical all-reduce: reduce-scatter inside each NVLink domain, all-reduce of 1/n_in of
 *     the buffer among the members at the same position of every domain (the algorithm the
 *     cost model picks for that group), all-gather inside; each part in the fidelity's form.
 * Messages to one mailbox keep their order, so every (group, member, channel) has its own.
 * A group's ring whose link directions no other flow crosses (sim__mark_private) runs its
 * steps without messages, with the times its flows would take (priv_step). */
#include <math.h>
#include <stdarg.h>
#include <simgrid/actor.h>
#include <simgrid/comm.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <simgrid/mailbox.h>
#include <simgrid/semaphore.h>
#include <stdlib.h>
#include <string.h>

#include "sim_int.h"

static char dummy_payload; /* SimGrid refuses a NULL payload; nothing is ever read from it */

sg_mailbox_t sim__mbox(const char *fmt, ...) {
  char name[64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(name, sizeof name, fmt, ap);
  va_end(ap);
  return sg_mailbox_by_name(name);
}

/* Bytes a message carries: at least one (SimGrid needs a size), rounded. */
static long msg_bytes(double bytes) { return bytes < 1 ? 1 : (long)(bytes + 0.5); }

sg_comm_t sim__put(sim__world *w, int src, int dst, sg_mailbox_t mb, double bytes) {
  (void)src, (void)dst;
  w->messages++;
  return sg_mailbox_put_async(mb, &dummy_payload, msg_bytes(bytes));
}

void sim__put_detached(sim__world *w, int src, int dst, sg_mailbox_t mb, double bytes) {
  (void)src, (void)dst;
  w->messages++;
  sg_comm_detach(sg_mailbox_put_init(mb, &dummy_payload, msg_bytes(bytes)), NULL);
}

void sim__wait_all(sg_comm_t *c, size_t n) {
  for (size_t i = 0; i < n; i++) sg_comm_wait(c[i]);
}

void sim__sleep(double s) {
  if (s > 0) sg_actor_sleep_for(s);
}

/* The latency part of a collective's cost-model time: its time on the same placement with
 * every level's bandwidth made enormous (the volume term vanishes), so that the latency is
 * computed in one place, the cost model. */
static double lat_of(const sim__world *w, cm_coll c, cm_algo a, double bytes, const cm_place *pl) {
  cm_place fast = *pl;
  fast.key = 0;
  for (int l = 0; l < CM_NLEVELS; l++) fast.bw_gbps[l] = 1e30;
  double t = cm_coll_time(w->cm, c, a, bytes, &fast);
  return t > 0 ? t : 0;
}

/* A ring over some GPUs: the group's own (its channels) or a part of a hierarchical one. */
typedef struct rview {
  int n, me;          /* members, this actor's index */
  const int *gpus;    /* member -> GPU */
  int nch;            /* channels */
  const int *succ;    /* [ch * n + member] -> member it sends to; NULL: member + 1 */
  const int *pred;    /* [ch * n + member] -> member it receives from; NULL: member - 1 */
  char tag;           /* mailbox namespace: 'g' the group's ring, 'i'/'o' hierarchical parts */
  int id, sub;        /* group, and which part */
  sg_mailbox_t *box;  /* the group's ring: its cache of mailboxes ([ch * n + m]); else NULL */
} rview;

static int succ_of(const rview *r, int ch, int m) {
  return r->succ ? r->succ[ch * r->n + m] : (m + 1) % r->n;
}

static int pred_of(const rview *r, int ch, int m) {
  return r->pred ? r->pred[ch * r->n + m] : (m + r->n - 1) % r->n;
}

static sg_mailbox_t ring_box(const rview *r, int m, int ch) {
  sg_mailbox_t *slot = r->box ? &r->box[ch * r->n + m] : NULL;
  if (slot && *slot) return *slot;
  char fmt[] = "?%d.%d.%d.%d";
  fmt[0] = r->tag;
  sg_mailbox_t b = sim__mbox(fmt, r->id, r->sub, m, ch);
  if (slot) *slot = b;
  return b;
}

/* ---- private rings: no SimGrid flows -------------------------------------------------------- */

/* A private ring's flows (sim__mark_private) cross link directions no other flow crosses, one
 * flow each: member m's flow to its successor starts when both have arrived at the step (as a
 * SimGrid message starts when its send and receive are both posted) and lasts bytes * spb,
 * whatever else runs. So a member waits until its neighbours have arrived (on its semaphore,
 * woken by the last of them), then sleeps until its own flows and the flows into it are done:
 * the times SimGrid's flows give, without its work per message (a route, the sharing solver).
 * A neighbour is at most one step ahead, so two arrival times per member suffice. */
typedef struct sim__priv {
  long *cnt;      /* [m] the step m has arrived at (counting every step of every collective) */
  long *waiting;  /* [m] the step at which m waits for its neighbours; 0 none */
  double *arrive; /* [2 m + step % 2] when m arrived there */
  sg_sem_t *sem;  /* [m] */
  double *sent;   /* [ch * n + m] bytes m has sent in channel ch (link loads) */
} sim__priv;

static sim__priv *priv_of(sim__group *g) {
  if (!g->run) {
    sim__priv *p = calloc(1, sizeof *p);
    if (!p) abort(); /* the child reports a crash as a failed run */
    p->cnt = calloc((size_t)g->n, sizeof *p->cnt);
    p->waiting = calloc((size_t)g->n, sizeof *p->waiting);
    p->arrive = calloc((size_t)2 * g->n, sizeof *p->arrive);
    p->sem = malloc((size_t)g->n * sizeof *p->sem);
    p->sent = calloc((size_t)g->n * g->nch, sizeof *p->sent);
    if (!p->cnt || !p->waiting || !p->arrive || !p->sem || !p->sent) abort();
    for (int m = 0; m < g->n; m++) p->sem[m] = sg_sem_init(0);
    g->run = p;
  }
  return g->run;
}

/* 1 when every neighbour of m (in every channel) has arrived at step k. */
static int neighbours_in(const sim__group *g, const sim__priv *p, int m, long k) {
  for (int ch = 0; ch < g->nch; ch++)
    if (p->cnt[g->pred[ch * g->n + m]] < k || p->cnt[g->succ[ch * g->n + m]] < k) return 0;
  return 1;
}

static void wake_if_ready(const sim__group *g, sim__priv *p, int x, long k) {
  if (p->waiting[x] == k && neighbours_in(g, p, x, k)) {
    p->waiting[x] = 0;
    sg_sem_release(p->sem[x]);
  }
}

/* Returns the seconds left until the member's flows are done (the caller sleeps them). */
static double priv_step(sim__world *w, sim__group *g, int me, double bytes) {
  sim__priv *p = priv_of(g);
  int n = g->n;
  long k = ++p->cnt[me];
  int par = (int)(k & 1);
  p->arrive[2 * me + par] = simgrid_get_clock();
  for (int ch = 0; ch < g->nch; ch++) {
    p->sent[ch * n + me] += bytes;
    w->messages++;
    wake_if_ready(g, p, g->pred[ch * n + me], k);
    wake_if_ready(g, p, g->succ[ch * n + me], k);
  }
  if (!neighbours_in(g, p, me, k)) {
    p->waiting[me] = k;
    sg_sem_acquire(p->sem[me]);
  }
  double a = p->arrive[2 * me + par], end = a;
  for (int ch = 0; ch < g->nch; ch++) {
    int pr = g->pred[ch * n + me], su = g->succ[ch * n + me];
    double ap = p->arrive[2 * pr + par], as = p->arrive[2 * su + par];
    double in = (ap > a ? ap : a) + bytes * g->spb[ch * n + pr];
    double out = (as > a ? as : a) + bytes * g->spb[ch * n + me];
    end = in > end ? in : end;
    end = out > end ? out : end;
  }
  double left = end - simgrid_get_clock();
  return left > 0 ? left : 0;
}

void sim__private_done(sim__world *w) {
  const sim__topo *t = &w->topo;
  sim__hop h[SIM__MAXHOPS];
  for (int i = 0; i < w->ngroups; i++) {
    sim__group *g = &w->groups[i];
    sim__priv *p = g->run;
    if (!p) continue;
    for (int f = 0; f < g->n * g->nch && w->link_bytes; f++) {
      int m = f % g->n, s = g->succ[f];
      int nh = s == m ? 0 : sim__route(t, g->gpus[m], g->gpus[s], h);
      for (int j = 0; j < nh && j < SIM__MAXHOPS; j++)
        w->link_bytes[sim__hop_key(t, &h[j])] += p->sent[f];
    }
    for (int m = 0; m < g->n; m++) sg_sem_destroy(p->sem[m]);
    free(p->cnt), free(p->waiting), free(p->arrive), free(p->sem), free(p->sent), free(p);
    g->run = NULL;
  }
}

/* ---- rings ----------------------------------------------------------------------------------- */

/* `flow` bytes per rank in total, split over channels and `steps` messages per channel; the
 * members advance a step together (each waits for its predecessor's chunk), with hop_s after
 * each step. The channels in which a member sends to the same successor (in a ring across
 * multi-node NVLink domains, all but the one that leaves the domain there) are one message
 * carrying their bytes, on the first one's mailbox: the same bytes on every link with a flow,
 * not a channel, sharing a link with other flows. A group's private ring runs without SimGrid
 * flows (above). Returns the seconds the caller still has to sleep (the last step's, which an
 * OP_BATCH's actor adds to the delay it sleeps later). */
static double ring_flows(sim__world *w, const rview *r, double flow, int steps, double hop_s) {
  enum { MAXCH = 64 };
  sg_comm_t comms[2 * MAXCH];
  void *data;
  int nch = r->nch > MAXCH ? MAXCH : r->nch, me = r->gpus[r->me];
  sim__group *pg = r->box && w->groups[r->id].spb ? &w->groups[r->id] : NULL;
  for (int s = 0; s < steps; s++) {
    double left = 0;
    if (pg) {
      left = priv_step(w, pg, r->me, flow / pg->nch / steps);
    } else {
      size_t k = 0;
      for (int ch = 0; ch < nch; ch++) {
        int succ = succ_of(r, ch, r->me), pred = pred_of(r, ch, r->me), out = 1, in = 1;
        for (int c = 0; c < ch; c++) {
          out &= succ_of(r, c, r->me) != succ;
          in &= pred_of(r, c, r->me) != pred;
        }
        if (in && pred != r->me) comms[k++] = sg_mailbox_get_async(ring_box(r, r->me, ch), &data);
        if (!out || succ == r->me) continue;
        int same = 1;
        for (int c = ch + 1; c < nch; c++) same += succ_of(r, c, r->me) == succ;
        comms[k++] =
            sim__put(w, me, r->gpus[succ], ring_box(r, succ, ch), flow * same / nch / steps);
      }
      sim__wait_all(comms, k);
    }
    if (s == steps - 1) return left + hop_s;
    sim__sleep(left + hop_s);
  }
  return 0;
}

/* Ring steps of a collective (all-reduce 2(n-1), send/recv 1, the others n-1). */
static int ring_steps(cm_coll c, int n) {
  return c == CM_ALL_REDUCE ? 2 * (n - 1) : c == CM_SEND_RECV ? 1 : n - 1;
}

double sim__ring_form(const cm_model *cm, cm_coll c, cm_algo *a, double bytes,
                      const cm_place *pl, double *lat_s) {
  cm_coll_parts p, ring;
  cm_coll_split(cm, c, CM_ALGO_RING, bytes, pl, &ring);
  if (*a == CM_ALGO_RING || cm_coll_split(cm, c, *a, bytes, pl, &p)) *a = CM_ALGO_RING, p = ring;
  /* the ring's flows run at the ring's bandwidth on an idle fabric (its slowest level, the
   * cost model's ring bandwidth); another algorithm's volume is scaled by the ratio of the
   * bandwidths, so that alone its flows take its own time */
  *lat_s = p.lat_s;
  return p.bw_Bps > 0 && ring.bw_Bps > 0 ? p.vol_bytes / p.ramp * (ring.bw_Bps / p.bw_Bps) : 0;
}

/* A ring collective (or another algorithm run as ring flows) on a view; pl its placement. */
static void ring_run(sim__world *w, const rview *r, const cm_place *pl, cm_coll c, cm_algo a,
                     double bytes) {
  if (r->n <= 1 || bytes <= 0) return;
  double lat, flow = sim__ring_form(w->cm, c, &a, bytes, pl, &lat);
  if (w->fidelity == SIM_STEP) {
    int steps = ring_steps(c, r->n);
    double base = cm_model_params(w->cm)->algo[a].base_us * 1e-6;
    if (base > lat) base = lat;
    sim__sleep(base);
    sim__sleep(ring_flows(w, r, flow, steps, (lat - base) / steps));
  } else {
    sim__sleep(ring_flows(w, r, flow, 1, 0) + lat);
  }
}

/* The group's ring; its mailbox cache is made on first use (a group's members run in one
 * process, one actor at a time). */
static rview group_ring(sim__world *w, int gi, int member) {
  sim__group *g = &w->groups[gi];
  if (!g->box) {
    g->box = calloc((size_t)g->n * (g->nch > 0 ? g->nch : 1), sizeof *g->box);
    if (!g->box) abort(); /* the child reports a crash as a failed run */
  }
  return (rview){g->n, member, g->gpus, g->nch, g->succ, g->pred, 'g', gi, 0, g->box};
}

static void coll_ring(sim__world *w, int gi, int member, cm_coll c, cm_algo a, double bytes) {
  rview r = group_ring(w, gi, member);
  ring_run(w, &r, &w->groups[gi].pl, c, a, bytes);
}

double sim__batch_exec(sim__world *w, int gi, int member, double flow_bytes) {
  const sim__group *g = &w->groups[gi];
  rview r = group_ring(w, gi, member);
  return g->n > 1 && flow_bytes > 0 ? ring_flows(w, &r, flow_bytes, 1, 0) : 0;
}

/* ---- all-to-all --------------------------------------------------------------------------- */

/* Bytes each pair exchanges (ramp applied) and the latency, from the cost model. */
static void a2a_parts(const sim__world *w, const sim__group *g, double bytes, double *pair,
                      double *lat) {
  cm_coll_parts p; /* the all-to-all uses the ring's ramp (cm_coll.c) */
  cm_coll_split(w->cm, CM_ALL_GATHER, CM_ALGO_RING, bytes, &g->pl, &p);
  *pair = bytes / g->n / p.ramp;
  *lat = lat_of(w, CM_ALL_TO_ALL, CM_ALGO_RING, bytes, &g->pl);
}

/* Every pair exchanges its part, in `rounds` chunks; all pairs advance a chunk together. */
static void a2a_pairs(sim__world *w, int gi, int member, double bytes, int rounds) {
  const sim__group *g = &w->groups[gi];
  int n = g->n, me = g->gpus[member];
  double pair, lat;
  a2a_parts(w, g, bytes, &pair, &lat);
  sg_comm_t *cm = malloc((size_t)2 * n * sizeof *cm);
  void *data;
  for (int r = 0; r < rounds; r++) {
    size_t k = 0;
    for (int j = 0; j < n; j++) {
      if (j == member) continue;
      cm[k++] = sg_mailbox_get_async(sim__mbox("a%d.%d.%d", gi, member, j), &data);
      cm[k++] = sim__put(w, me, g->gpus[j], sim__mbox("a%d.%d.%d", gi, j, member), pair / rounds);
    }
    sim__wait_all(cm, k);
  }
  free(cm);
  sim__sleep(lat);
}

/* step: chunks of SIM__A2A_CHUNK bytes per pair (at most SIM__A2A_MAXROUNDS rounds). */
static void a2a_step(sim__world *w, int gi, int member, cm_coll c, cm_algo a, double bytes) {
  (void)c, (void)a;
  const sim__group *g = &w->groups[gi];
  double pair, lat;
  a2a_parts(w, g, bytes, &pair, &lat);
  double r = ceil(pair / SIM__A2A_CHUNK);
  a2a_pairs(w, gi, member, bytes, r < 1 ? 1 : r > SIM__A2A_MAXROUNDS ? SIM__A2A_MAXROUNDS : (int)r);
}

/* fast: inside the node one message per peer; to each other node one message carrying all its
 * members' parts, to the member at the same place among its node's members (the same rail when
 * the nodes hold the group alike), and one message back from it. When the nodes hold unequal
 * numbers of members, every pair, one message each (unequal aggregates share links worse than
 * the pairs do: 26% slower for 8 + 4 GPUs across two nodes of h100-nvl256). O(n + nodes
 * spanned) per member. */
static void a2a_fast(sim__world *w, int gi, int member, cm_coll c, cm_algo a, double bytes) {
  const sim__group *g = &w->groups[gi];
  const sim__topo *t = &w->topo;
  (void)c, (void)a;
  if (t->torus) { /* a torus routes chip by chip: every pair, one message */
    a2a_pairs(w, gi, member, bytes, 1);
    return;
  }
  int n = g->n, me = g->gpus[member], gpn = t->gpn, lo = me / gpn, hi = lo;
  double pair, lat;
  a2a_parts(w, g, bytes, &pair, &lat);
  for (int i = 0; i < n; i++) {
    int node = g->gpus[i] / gpn;
    lo = node < lo ? node : lo, hi = node > hi ? node : hi;
  }
  int R = hi - lo + 1;
  /* members by node (counting sort): node k's members are by[first[k] .. first[k+1]), in
   * group order, so a member's place is its position there */
  int *first = calloc((size_t)R + 1, sizeof *first), *by = malloc((size_t)n * sizeof *by);
  sg_comm_t *cm = malloc((size_t)2 * n * sizeof *cm);
  for (int i = 0; i < n; i++) first[g->gpus[i] / gpn - lo + 1]++;
  for (int k = 0; k < R; k++) first[k + 1] += first[k];
  int *at = malloc((size_t)R * sizeof *at), myplace = 0, mynode = me / gpn - lo;
  memcpy(at, first, (size_t)R * sizeof *at);
  for (int i = 0; i < n; i++) {
    int k = g->gpus[i] / gpn - lo;
    if (i == member) myplace = at[k] - first[k];
    by[at[k]++] = i;
  }
  int mine = first[mynode + 1] - first[mynode], even = 1;
  for (int k = 0; k < R; k++) {
    int m = first[k + 1] - first[k];
    even &= m == 0 || m == mine;
  }
  if (!even) {
    free(cm), free(first), free(by), free(at);
    a2a_pairs(w, gi, member, bytes, 1);
    return;
  }
  void *data;
  size_t q = 0;
  for (int k = 0; k < R; k++) {
    int m = first[k + 1] - first[k];
    if (m == 0) continue;
    if (k == mynode) { /* the peers in this node */
      for (int p = first[k]; p < first[k + 1]; p++) {
        int j = by[p];
        if (j == member) continue;
        cm[q++] = sg_mailbox_get_async(sim__mbox("a%d.%d.%dn", gi, member, j), &data);
        cm[q++] = sim__put(w, me, g->gpus[j], sim__mbox("a%d.%d.%dn", gi, j, member), pair);
      }
      continue;
    }
    /* m parts to the member at my place there, and one message from it */
    int target = by[first[k] + myplace];
    cm[q++] = sim__put(w, me, g->gpus[target], sim__mbox("a%d.%d.%dx", gi, target, mynode + lo),
                       m * pair);
    cm[q++] = sg_mailbox_get_async(sim__mbox("a%d.%d.%dx", gi, member, k + lo), &data);
  }
  sim__wait_all(cm, q);
  free(cm), free(first), free(by), free(at);
  sim__sleep(lat);
}

/* ---- NVLS ---------------------------------------------------------------------------------- */

/* One NVLS all-reduce as the relays see it. */
typedef struct nvls_inst {
  double port;   /* bytes each member streams up, and gets down, through its NVLink port */
  double upl;    /* bytes each node relay streams up to the domain relay, and gets down */
  double lat;    /* the delay after the transfers */
  int chunks;    /* step: chunks of the pipeline */
  int depth;     /* stages a chunk crosses: 2 (GPU, switch, GPU), 4 through the domain */
  int step;
  int tree;      /* NVLSTree's NVLS part: the relays also wait for every member's word that its
                    tree between domains is done (fast form only) */
} nvls_inst;

/* A relay: the node's NVLink switch (or the domain's) reducing one NVLS collective at a time.
 * Relays are kept for the whole run (sim__nvls): creating an actor per collective (a stack, a
 * context) cost a fifth of a run's wall time. A relay waits on `work` for an instance; a
 * member that finds every relay of its node busy starts another one, as the old one-shot
 * relays ran side by side. The last GPU actor to end stops them (sim__nvls_quit). */
typedef struct relay {
  sim__world *w;
  int gi, host;
  int n;         /* members (node relay) or node relays (domain relay) */
  int *who;      /* member indices (node relay) or node relay hosts (domain relay) */
  int dom;       /* node relay: the domain relay's host, -1 without one */
  int is_dom;    /* 1: the domain relay */
  sg_mailbox_t up, down, done, tup; /* node relay: du, dd, dz, dt of its host */
  sg_mailbox_t *dup, *ddown, *ddone, *dtree; /* domain relay: [j] du, dd, dz, dt of node relay
                                                who[j] */
  nvls_inst in;
  sg_sem_t work;
  int busy, quit;
  struct relay *next; /* the other relays of its pool */
} relay;

/* A group's NVLS state in the run: its members' mailboxes, its relays' pools. */
typedef struct sim__nvls {
  sg_mailbox_t *nu, *nd, *nz, *nt; /* [member]; nt: NVLSTree's words that a tree is done */
  relay **node;               /* [member]: the pool of the node whose first member it is */
  relay *dom;                 /* the domain relays' pool */
} sim__nvls;

/* Member m's NVLS mailbox of kind `kind` ("nu" up, "nd" down, "nz" done) of group gi. */
static sg_mailbox_t nv_box(sg_mailbox_t *tab, const char *kind, int gi, int m) {
  if (!tab[m]) tab[m] = sim__mbox("%s%d.%d", kind, gi, m);
  return tab[m];
}

/* A group's NVLS state, made by the first member to need it before anything yields (a
 * mailbox lookup is a simcall: the other actors run meanwhile); its mailboxes are looked up on
 * first use (nv_box). */
static sim__nvls *nvls_of(sim__group *g) {
  if (!g->nvls) {
    sim__nvls *v = calloc(1, sizeof *v);
    if (!v) abort(); /* the child reports a crash as a failed run */
    v->nu = calloc((size_t)g->n, sizeof *v->nu);
    v->nd = calloc((size_t)g->n, sizeof *v->nd);
    v->nz = calloc((size_t)g->n, sizeof *v->nz);
    v->nt = calloc((size_t)g->n, sizeof *v->nt);
    v->node = calloc((size_t)g->n, sizeof *v->node);
    if (!v->nu || !v->nd || !v->nz || !v->nt || !v->node) abort();
    g->nvls = v;
  }
  return g->nvls;
}

static void relay_free(relay *R) {
  while (R) {
    relay *nx = R->next;
    sg_sem_destroy(R->work);
    free(R->who), free(R->dup), free(R->ddown), free(R->ddone), free(R->dtree), free(R);
    R = nx;
  }
}

static void relay_quit(relay *R) {
  for (; R; R = R->next) {
    R->quit = 1;
    sg_sem_release(R->work);
  }
}

/* fn on every relay pool of the run. */
static void each_pool(sim__world *w, void (*fn)(relay *)) {
  for (int i = 0; i < w->ngroups; i++) {
    sim__nvls *v = w->groups[i].nvls;
    for (int m = 0; v && m < w->groups[i].n; m++) fn(v->node[m]);
    if (v) fn(v->dom);
  }
}

void sim__nvls_quit(sim__world *w) { each_pool(w, relay_quit); }

void sim__nvls_done(sim__world *w) {
  each_pool(w, relay_free);
  for (int i = 0; i < w->ngroups; i++) {
    sim__nvls *v = w->groups[i].nvls;
    if (!v) continue;
    free(v->nu), free(v->nd), free(v->nz), free(v->nt), free(v->node), free(v);
    w->groups[i].nvls = NULL;
  }
}

/* The placement NVLS is priced on: the group's, with the GPUs' NVLink level marked crossed
 * (cm_topo.c leaves it out for a group with one GPU per node, and cm_coll.c then refuses NVLS,
 * though every member streams through its own port to the switch). */
static cm_place nvls_place(const sim__group *g) {
  cm_place pl = g->pl;
  pl.key = 0;
  pl.levels |= 1u << CM_LVL_NVLINK;
  return pl;
}

/* The cost model's parts of one NVLS collective c (all-reduce; whichever others the cost model
 * prices with NVLS) on g and what the relays move: each member streams the cost model's volume
 * up and down through its port, a node relay the buffer up and down through its node's
 * uplink; PP_INPUT when it cannot run there. */
static int nvls_inst_get(const sim__world *w, const sim__group *g, cm_coll c, double bytes,
                         nvls_inst *o) {
  cm_coll_parts p, node;
  cm_place pl = nvls_place(g);
  if (cm_coll_split(w->cm, c, CM_ALGO_NVLS, bytes, &pl, &p)) return PP_INPUT;
  /* the switch's rate: the same placement without the level above the node */
  cm_place inside = pl;
  inside.levels &= ~(1u << CM_LVL_NVLINK_UP);
  if (cm_coll_split(w->cm, c, CM_ALGO_NVLS, bytes, &inside, &node)) return PP_INPUT;
  memset(o, 0, sizeof *o);
  o->port = p.vol_bytes / p.ramp * (w->topo.f.nvlink_Bps / node.bw_Bps);
  o->upl = bytes / p.ramp;
  o->depth = g->relay_dom ? 4 : 2;
  o->step = w->fidelity == SIM_STEP;
  o->lat = p.lat_s;
  if (o->step) {
    /* chunks of SIM__NVLS_CHUNK, or more when the fill (depth - 1 chunk times of the slowest
     * stage on an idle fabric), which is part of the cost model's latency, would not fit in
     * it; at most SIM__NVLS_MAXCHUNKS. Under contention the fill stretches with the stage. */
    const cm_fabric *f = &w->topo.f;
    double tbw = fmax(o->port / f->nvlink_Bps,
                      g->relay_dom && f->up_Bps > 0 ? o->upl / f->up_Bps : 0);
    double k = fmax(ceil(o->port / SIM__NVLS_CHUNK),
                    o->lat > 0 ? ceil((o->depth - 1) * tbw / o->lat) : 1);
    o->chunks = k < 1 ? 1 : k > SIM__NVLS_MAXCHUNKS ? SIM__NVLS_MAXCHUNKS : (int)k;
    o->lat -= (o->depth - 1.0) / o->chunks * tbw;
  }
  return PP_OK;
}

/* In round r of the pipeline, the chunk a stage at `lag` rounds handles (-1: none). */
static int at(const nvls_inst *in, int r, int lag) {
  int k = r - lag;
  return k >= 0 && k < in->chunks ? k : -1;
}

/* One collective at a node relay. */
static void node_relay_run(relay *R, sg_comm_t *c) {
  sim__world *w = R->w;
  const sim__group *g = &w->groups[R->gi];
  const sim__nvls *v = g->nvls;
  const nvls_inst *in = &R->in;
  int n = R->n, two = R->dom >= 0;
  void *data;
  if (in->step) {
    for (int r = 0; r < in->chunks + in->depth - 1; r++) {
      size_t k = 0;
      for (int j = 0; j < n && at(in, r, 0) >= 0; j++)
        c[k++] = sg_mailbox_get_async(nv_box(v->nu, "nu", R->gi, R->who[j]), &data);
      for (int j = 0; j < n && at(in, r, in->depth - 1) >= 0; j++)
        c[k++] = sim__put(w, R->host, g->gpus[R->who[j]], nv_box(v->nd, "nd", R->gi, R->who[j]),
                          in->port / in->chunks);
      if (two && at(in, r, 1) >= 0)
        c[k++] = sim__put(w, R->host, R->dom, R->up, in->upl / in->chunks);
      if (two && at(in, r, 2) >= 0) c[k++] = sg_mailbox_get_async(R->down, &data);
      sim__wait_all(c, k);
    }
  } else {
    /* inputs first: the members' streams and the domain's word that all of its arrived */
    size_t k = 0, nin;
    for (int j = 0; j < n; j++)
      c[k++] = sg_mailbox_get_async(nv_box(v->nu, "nu", R->gi, R->who[j]), &data);
    if (two) c[k++] = sg_mailbox_get_async(R->done, &data);
    nin = k;
    for (int j = 0; j < n; j++)
      c[k++] = sim__put(w, R->host, g->gpus[R->who[j]], nv_box(v->nd, "nd", R->gi, R->who[j]),
                        in->port);
    if (two) {
      c[k++] = sim__put(w, R->host, R->dom, R->up, in->upl);
      c[k++] = sg_mailbox_get_async(R->down, &data);
    }
    if (in->tree) {
      /* the members' inputs, then their words that their trees are done (and this node's word
       * up to the domain relay), then the domain relay's word */
      sim__wait_all(c, (size_t)n);
      for (int j = 0; j < n; j++)
        c[k + j] = sg_mailbox_get_async(nv_box(v->nt, "nt", R->gi, R->who[j]), &data);
      sim__wait_all(c + k, (size_t)n);
      if (two) sg_comm_wait(sim__put(w, R->host, R->dom, R->tup, 1));
      sim__wait_all(c + n, nin - n);
    } else {
      sim__wait_all(c, nin);
    }
    for (int j = 0; j < n; j++)
      c[k++] = sim__put(w, R->host, g->gpus[R->who[j]], nv_box(v->nz, "nz", R->gi, R->who[j]), 1);
    sim__wait_all(c + nin, k - nin);
  }
}

/* One collective at a domain relay. */
static void dom_relay_run(relay *R, sg_comm_t *c) {
  sim__world *w = R->w;
  const nvls_inst *in = &R->in;
  int n = R->n;
  void *data;
  if (in->step) {
    for (int r = 1; r < in->chunks + 2; r++) {
      size_t k = 0;
      for (int j = 0; j < n && at(in, r, 1) >= 0; j++)
        c[k++] = sg_mailbox_get_async(R->dup[j], &data);
      for (int j = 0; j < n && at(in, r, 2) >= 0; j++)
        c[k++] = sim__put(w, R->host, R->who[j], R->ddown[j], in->upl / in->chunks);
      sim__wait_all(c, k);
    }
  } else {
    size_t k = 0;
    for (int j = 0; j < n; j++) c[k++] = sg_mailbox_get_async(R->dup[j], &data);
    for (int j = 0; j < n; j++) c[k++] = sim__put(w, R->host, R->who[j], R->ddown[j], in->upl);
    sim__wait_all(c, (size_t)n);
    if (in->tree) { /* every node relay's word that its members' trees are done */
      for (int j = 0; j < n; j++) c[k + j] = sg_mailbox_get_async(R->dtree[j], &data);
      sim__wait_all(c + k, (size_t)n);
    }
    for (int j = 0; j < n; j++) c[k++] = sim__put(w, R->host, R->who[j], R->ddone[j], 1);
    sim__wait_all(c + n, k - n);
  }
}

static void relay_main(int argc, char **argv) {
  (void)argc, (void)argv;
  relay *R = sg_actor_self_get_data();
  sg_comm_t *c = malloc((size_t)(4 * R->n + 4) * sizeof *c);
  if (!c) abort();
  for (;;) {
    sg_sem_acquire(R->work);
    if (R->quit) break;
    if (R->is_dom) dom_relay_run(R, c);
    else node_relay_run(R, c);
    R->busy = 0;
  }
  free(c);
}

/* An idle relay of the pool at *pool, or a new one made by mk (its members and mailboxes). */
static relay *relay_get(relay **pool, sim__world *w, int gi, int host,
                        relay *(*mk)(sim__world *, int, int)) {
  relay *R = *pool;
  while (R && R->busy) R = R->next;
  if (R) return R;
  R = mk(w, gi, host);
  R->work = sg_sem_init(0);
  R->next = *pool;
  *pool = R;
  char hn[48];
  sim__host_name(&w->topo, host, hn, sizeof hn);
  sg_actor_t a = sg_actor_init("nvls", sg_host_by_name(hn));
  sg_actor_set_data(a, R);
  sg_actor_start_(a, relay_main, 0, NULL);
  return R;
}

/* A relay of group gi at `host`, room for a member list, nothing else filled in. */
static relay *relay_new(sim__world *w, int gi, int host) {
  relay *R = calloc(1, sizeof *R);
  if (!R || !(R->who = malloc((size_t)w->groups[gi].n * sizeof *R->who))) abort();
  R->w = w, R->gi = gi, R->host = host, R->dom = -1;
  return R;
}

/* A node relay of group gi at NVLink switch `host`: the members on it. */
static relay *mk_node(sim__world *w, int gi, int host) {
  const sim__group *g = &w->groups[gi];
  const sim__topo *t = &w->topo;
  relay *R = relay_new(w, gi, host);
  for (int i = 0; i < g->n; i++)
    if (sim__nvs_of(t, g->gpus[i], 0) == host) {
      if (R->n == 0 && g->relay_dom) R->dom = sim__nvs_of(t, g->gpus[i], 1);
      R->who[R->n++] = i;
    }
  if (R->dom >= 0) {
    R->up = sim__mbox("du%d.%d", gi, host);
    R->down = sim__mbox("dd%d.%d", gi, host);
    R->done = sim__mbox("dz%d.%d", gi, host);
    R->tup = sim__mbox("dt%d.%d", gi, host);
  }
  return R;
}

/* The domain relay of group gi at `host`: the node relays' hosts. */
static relay *mk_dom(sim__world *w, int gi, int host) {
  const sim__group *g = &w->groups[gi];
  const sim__topo *t = &w->topo;
  relay *R = relay_new(w, gi, host);
  R->is_dom = 1;
  for (int i = 0; i < g->n; i++) {
    int h = sim__nvs_of(t, g->gpus[i], 0), seen = 0;
    for (int j = 0; j < R->n; j++) seen |= R->who[j] == h;
    if (!seen) R->who[R->n++] = h;
  }
  R->dup = malloc((size_t)R->n * sizeof *R->dup);
  R->ddown = malloc((size_t)R->n * sizeof *R->ddown);
  R->ddone = malloc((size_t)R->n * sizeof *R->ddone);
  R->dtree = malloc((size_t)R->n * sizeof *R->dtree);
  if (!R->dup || !R->ddown || !R->ddone || !R->dtree) abort();
  for (int j = 0; j < R->n; j++) {
    R->dup[j] = sim__mbox("du%d.%d", gi, R->who[j]);
    R->ddown[j] = sim__mbox("dd%d.%d", gi, R->who[j]);
    R->ddone[j] = sim__mbox("dz%d.%d", gi, R->who[j]);
    R->dtree[j] = sim__mbox("dt%d.%d", gi, R->who[j]);
  }
  return R;
}

/* Hands an instance to a relay. */
static void relay_go(relay *R, const nvls_inst *in) {
  R->in = *in;
  R->busy = 1;
  sg_sem_release(R->work);
}

/* The relays of one NVLS all-reduce: its node's, started by the node's first member, and the
 * domain's, started by member 0. */
static void relays_for(sim__world *w, int gi, int member, const nvls_inst *in) {
  sim__group *g = &w->groups[gi];
  const sim__topo *t = &w->topo;
  int host = sim__nvs_of(t, g->gpus[member], 0);
  for (int i = 0; i < member; i++)
    if (sim__nvs_of(t, g->gpus[i], 0) == host) return; /* not this node's first member */
  sim__nvls *v = nvls_of(g);
  relay *R = relay_get(&v->node[member], w, gi, host, mk_node);
  relay_go(R, in);
  if (member != 0 || !g->relay_dom) return;
  relay_go(relay_get(&v->dom, w, gi, R->dom, mk_dom), in);
}

int sim__nvls_ok(const sim__world *w, int gi, cm_coll c, double bytes) {
  const sim__group *g = &w->groups[gi];
  nvls_inst in;
  return g->relay_node && !nvls_inst_get(w, g, c, bytes, &in);
}

static void coll_nvls(sim__world *w, int gi, int member, cm_coll c, cm_algo a, double bytes) {
  const sim__group *g = &w->groups[gi];
  nvls_inst in;
  (void)a;
  if (!g->relay_node || nvls_inst_get(w, g, c, bytes, &in)) {
    /* NVLS cannot run there (sim_collectives refuses such jobs; the cost model never picks
     * it there): a ring, on the routes of the group's ring if the run has them */
    coll_ring(w, gi, member, c, CM_ALGO_RING, bytes);
    return;
  }
  relays_for(w, gi, member, &in);
  const sim__nvls *v = nvls_of(&w->groups[gi]);
  int me = g->gpus[member], sw = sim__nvs_of(&w->topo, me, 0);
  sg_comm_t cm[3];
  void *data;
  if (in.step) {
    for (int r = 0; r < in.chunks + in.depth - 1; r++) {
      size_t k = 0;
      if (at(&in, r, 0) >= 0)
        cm[k++] = sim__put(w, me, sw, nv_box(v->nu, "nu", gi, member), in.port / in.chunks);
      if (at(&in, r, in.depth - 1) >= 0)
        cm[k++] = sg_mailbox_get_async(nv_box(v->nd, "nd", gi, member), &data);
      sim__wait_all(cm, k);
    }
  } else {
    cm[0] = sim__put(w, me, sw, nv_box(v->nu, "nu", gi, member), in.port);
    cm[1] = sg_mailbox_get_async(nv_box(v->nd, "nd", gi, member), &data);
    cm[2] = sg_mailbox_get_async(nv_box(v->nz, "nz", gi, member), &data);
    sim__wait_all(cm, 3);
  }
  sim__sleep(in.lat);
}

/* ---- NVLSTree ------------------------------------------------------------------------------- */

/* One member's part of one NVLSTree instance (its NVLS part `in`, a tree of a `tree_bytes`
 * buffer between domains): its stream up to its node's switch relay and the result's down,
 * posted first; while they run, its tree with the members at its position in the other
 * domains; then its word to the relay that the tree is done, and the relay's word that every
 * input and every tree of the domain is. */
static void nvlstree_part(sim__world *w, const sim__group *g, int member, const nvls_inst *in,
                          double tree_bytes) {
  const int *nt = g->nt + 4 * member;
  int ds = nt[0], md = nt[1], me = g->gpus[member], sw = sim__nvs_of(&w->topo, me, 0);
  relays_for(w, ds, md, in);
  sim__nvls *v = nvls_of(&w->groups[ds]);
  sg_comm_t cm[3];
  void *data;
  cm[0] = sim__put(w, me, sw, nv_box(v->nu, "nu", ds, md), in->port);
  cm[1] = sg_mailbox_get_async(nv_box(v->nd, "nd", ds, md), &data);
  cm[2] = sg_mailbox_get_async(nv_box(v->nz, "nz", ds, md), &data);
  sim__tree_flows(w, nt[2], nt[3], tree_bytes);
  sg_comm_wait(sim__put(w, me, sw, nv_box(v->nt, "nt", ds, md), 1));
  sim__wait_all(cm, 3);
}

/* NVLSTree all-reduce (NCCL's: NVLS inside each NVLink domain, pipelined with a tree between
 * the domains in which each member carries its 1/p share over its own NIC): each piece carries
 * the volume that alone takes the cost model's time for it (cm_nvlstree_pieces: the NVLS part
 * on the switch relays of the member's domain, the part between domains, the tree or NCCL's
 * per-head cap, on the tree of the members at its position). fast: both pieces at once, then
 * the latency; step: the buffer in chunks of SIM__NVLSTREE_CHUNK per member's stream (at most
 * SIM__NVLSTREE_MAXCHUNKS), one after another, each chunk's pieces at once and ending on the
 * relay's word, then the latency. Without sub-groups (domains holding unequal numbers of
 * members), ring flows with its volume. */
/* What member's part of an NVLSTree all-reduce of group gi moves: its NVLS instance *in, its
 * tree's buffer and the latency; PP_INPUT where it cannot run as NVLSTree. The NVLS streams
 * are scaled from the cost model's NVLS on the domain's members (what nvls_inst_get moves) to
 * NVLSTree's NVLS piece; the tree's buffer from the cost model's tree of one share on the
 * members at this position to NVLSTree's piece between domains. */
static int nvlstree_setup(const sim__world *w, int gi, int member, cm_coll c, double bytes,
                          nvls_inst *in, double *tree_bytes, double *lat) {
  const sim__group *g = &w->groups[gi];
  cm_coll_parts pin, pout, pn, pc;
  if (c != CM_ALL_REDUCE || !g->nt || cm_nvlstree_pieces(w->cm, bytes, &g->pl, &pin, &pout))
    return PP_INPUT;
  const sim__group *gd = &w->groups[g->nt[4 * member]], *gc = &w->groups[g->nt[4 * member + 2]];
  cm_place pl = nvls_place(gd);
  double share = bytes / gd->n;
  if (!gd->relay_node || nvls_inst_get(w, gd, CM_ALL_REDUCE, bytes, in) ||
      cm_coll_split(w->cm, CM_ALL_REDUCE, CM_ALGO_NVLS, bytes, &pl, &pn) ||
      cm_coll_split(w->cm, CM_ALL_REDUCE, CM_ALGO_TREE, share, &gc->pl, &pc) ||
      pn.bw_Bps <= 0 || pc.bw_Bps <= 0 || pc.vol_bytes <= 0 || pin.bw_Bps <= 0 ||
      pout.bw_Bps <= 0 || sim__tree_parents(w, gc, NULL) <= 0)
    return PP_INPUT;
  double f = (pin.vol_bytes / pin.bw_Bps / pin.ramp) / (pn.vol_bytes / pn.bw_Bps / pn.ramp);
  in->port *= f, in->upl *= f;
  in->step = 0, in->tree = 1;
  *tree_bytes = share * (pout.vol_bytes / pout.bw_Bps / pout.ramp) / (pc.vol_bytes / pc.bw_Bps);
  *lat = pin.lat_s;
  return PP_OK;
}

static void coll_nvlstree(sim__world *w, int gi, int member, cm_coll c, cm_algo a,
                          double bytes) {
  nvls_inst in;
  double tree_bytes, lat;
  if (nvlstree_setup(w, gi, member, c, bytes, &in, &tree_bytes, &lat)) {
    coll_ring(w, gi, member, c, a, bytes);
    return;
  }
  int K = 1;
  if (w->fidelity == SIM_STEP) {
    double k = ceil(in.port / SIM__NVLSTREE_CHUNK);
    K = k < 1 ? 1 : k > SIM__NVLSTREE_MAXCHUNKS ? SIM__NVLSTREE_MAXCHUNKS : (int)k;
    in.port /= K, in.upl /= K;
  }
  for (int i = 0; i < K; i++) nvlstree_part(w, &w->groups[gi], member, &in, tree_bytes / K);
  sim__sleep(lat);
}

int sim__nvlstree_ok(const sim__world *w, int gi, cm_coll c, double bytes) {
  nvls_inst in;
  double tree_bytes, lat;
  return w->groups[gi].n > 1 && !nvlstree_setup(w, gi, 0, c, bytes, &in, &tree_bytes, &lat);
}

/* ---- hierarchical ------------------------------------------------------------------------- */

/* Reduce-scatter inside the domain, all-reduce across domains among the members at the same
 * position, all-gather inside. */
static void coll_hier(sim__world *w, int gi, int member, cm_coll c, cm_algo a, double bytes) {
  (void)a;
  const sim__group *g = &w->groups[gi];
  int n = g->n, dom = w->topo.dom > 1 ? w->topo.dom : 1, me = g->gpus[member];
  if (c != CM_ALL_REDUCE || dom <= 1 || w->topo.torus) {
    coll_ring(w, gi, member, c, CM_ALGO_RING, bytes); /* no domains to split on */
    return;
  }
  int *in = malloc((size_t)n * sizeof *in), *out = malloc((size_t)n * sizeof *out);
  int nin = 0, nout = 0, pos = 0, mydom = me / dom, di = 0;
  for (int i = 0; i < n; i++)
    if (g->gpus[i] / dom == mydom) {
      if (i == member) pos = nin;
      in[nin++] = g->gpus[i];
    }
  /* one member per domain: the one at `pos` among its domain's members, in group order */
  for (int d0 = 0; d0 < n; d0++) {
    int dd = g->gpus[d0] / dom, first = 1, k = 0;
    for (int j = 0; j < d0; j++) first &= g->gpus[j] / dom != dd;
    if (!first) continue;
    if (dd == mydom) di = nout;
    for (int i = 0; i < n; i++)
      if (g->gpus[i] / dom == dd && k++ == pos) out[nout++] = g->gpus[i];
  }
  int oi = 0;
  for (int i = 0; i < nout; i++)
    if (out[i] == me) oi = i;
  cm_place pin, pout;
  cm_place_list(w->cm, in, nin, &pin);
  cm_place_list(w->cm, out, nout, &pout);
  rview rin = {nin, pos, in, 1, NULL, NULL, 'i', gi, mydom, NULL};
  rview rout = {nout, oi, out, 1, NULL, NULL, 'o', gi, pos, NULL};
  (void)di;
  cm_algo ao = CM_ALGO_RING;
  cm_coll_best(w->cm, CM_ALL_REDUCE, bytes / nin, &pout, &ao);
  if (ao != CM_ALGO_TREE) ao = CM_ALGO_RING; /* NVLS and HIER cannot span domains */
  ring_run(w, &rin, &pin, CM_REDUCE_SCATTER, CM_ALGO_RING, bytes);
  ring_run(w, &rout, &pout, CM_ALL_REDUCE, ao, bytes / nin);
  ring_run(w, &rin, &pin, CM_ALL_GATHER, CM_ALGO_RING, bytes);
  free(in), free(out);
}

/* ---- PAT ----------------------------------------------------------------------------------- */

int sim__pat_steps(int n, int *dist, int *count) {
  int D = 0;
  while ((1 << D) < n && D < SIM__PAT_MAXSTEPS) D++;
  for (int j = 0; j < D; j++) {
    dist[j] = 1 << (D - 1 - j);
    count[j] = j < D - 1 ? 1 << j : n - (1 << (D - 1));
  }
  return D;
}

int sim__pat_ok(const sim__world *w, int gi, cm_coll c, double bytes) {
  const sim__group *g = &w->groups[gi];
  cm_coll_parts p;
  return (c == CM_ALL_GATHER || c == CM_REDUCE_SCATTER) && bytes > 0 && g->n > 1 &&
         !cm_coll_split(w->cm, c, CM_ALGO_PAT, bytes, &g->pl, &p);
}

/* Member m's PAT mailbox of step j in group gi. */
static sg_mailbox_t pat_box(int gi, int m, int j) { return sim__mbox("p%d.%d.%d", gi, m, j); }

/* PAT: the distance-reversed Bruck exchange of sim__pat_steps among the members in group order,
 * each step's blocks carrying the cost model's PAT volume scaled as sim__ring_form scales it
 * (so that alone, bound by a member's NIC, it takes the cost model's time). fast: every step's
 * message at once (the pipeline's steady state: NCCL's PAT keeps every dimension busy once its
 * buffers are full), then the latency; step: the steps one after another (reduce-scatter in the
 * reverse order), each in chunks of SIM__PAT_CHUNK sent in lockstep with the chunk coming in,
 * the fixed latency first and an equal share of the rest after each step. */
static void coll_pat(sim__world *w, int gi, int member, cm_coll c, cm_algo a, double bytes) {
  const sim__group *g = &w->groups[gi];
  if (!sim__pat_ok(w, gi, c, bytes)) { /* more than one rank in a domain, or a torus */
    coll_ring(w, gi, member, c, a, bytes);
    return;
  }
  int n = g->n, dist[SIM__PAT_MAXSTEPS], cnt[SIM__PAT_MAXSTEPS], me = g->gpus[member];
  int D = sim__pat_steps(n, dist, cnt);
  double lat, blk = sim__ring_form(w->cm, c, &a, bytes, &g->pl, &lat) / (n - 1);
  sg_comm_t cm[2 * SIM__PAT_MAXSTEPS];
  void *data;
  if (w->fidelity != SIM_STEP) {
    size_t k = 0;
    for (int j = 0; j < D; j++) {
      int to = (member + dist[j]) % n;
      cm[k++] = sg_mailbox_get_async(pat_box(gi, member, j), &data);
      cm[k++] = sim__put(w, me, g->gpus[to], pat_box(gi, to, j), cnt[j] * blk);
    }
    sim__wait_all(cm, k);
    sim__sleep(lat);
    return;
  }
  double base = cm_model_params(w->cm)->algo[CM_ALGO_PAT].base_us * 1e-6;
  if (base > lat) base = lat;
  sim__sleep(base);
  for (int s = 0; s < D; s++) {
    int j = c == CM_REDUCE_SCATTER ? D - 1 - s : s, to = (member + dist[j]) % n;
    double k = ceil(cnt[j] * blk / SIM__PAT_CHUNK);
    int K = k < 1 ? 1 : k > SIM__PAT_MAXCHUNKS ? SIM__PAT_MAXCHUNKS : (int)k;
    for (int r = 0; r < K; r++) {
      cm[0] = sg_mailbox_get_async(pat_box(gi, member, j), &data);
      cm[1] = sim__put(w, me, g->gpus[to], pat_box(gi, to, j), cnt[j] * blk / K);
      sim__wait_all(cm, 2);
    }
    sim__sleep((lat - base) / D);
  }
}

/* ---- trees --------------------------------------------------------------------------------- */

/* A tree all-reduce along the tree's edges (sim_tree.c); where it cannot run as a tree (one
 * NVLink domain, a torus) or for another collective, the ring's flows with the tree's volume. */
static void coll_tree(sim__world *w, int gi, int member, cm_coll c, cm_algo a, double bytes) {
  if (c != CM_ALL_REDUCE || !sim__tree_exec(w, gi, member, bytes))
    coll_ring(w, gi, member, c, a, bytes);
}

/* ---- dispatch --------------------------------------------------------------------------- */

typedef void (*coll_form)(sim__world *, int, int, cm_coll, cm_algo, double);

/* Each algorithm's forms: [SIM_FAST], [SIM_STEP]; the two forms differ inside ring_run,
 * sim__tree_exec, coll_nvls, coll_nvlstree and coll_pat. */
static const coll_form forms[CM_NALGOS][2] = {
    [CM_ALGO_RING] = {coll_ring, coll_ring},
    [CM_ALGO_TREE] = {coll_tree, coll_tree},
    [CM_ALGO_NVLS] = {coll_nvls, coll_nvls},
    [CM_ALGO_HIER] = {coll_hier, coll_hier},
    [CM_ALGO_PAT] = {coll_pat, coll_pat},
    [CM_ALGO_NVLSTREE] = {coll_nvlstree, coll_nvlstree},
};
static const coll_form a2a_forms[2] = {a2a_fast, a2a_step};

void sim__coll_exec(sim__world *w, int gi, int member, cm_coll c, cm_algo a, double bytes) {
  const sim__group *g = &w->groups[gi];
  if (g->n <= 1 || bytes <= 0) return;
  int f = w->fidelity == SIM_STEP;
  coll_form fn = c == CM_ALL_TO_ALL                          ? a2a_forms[f]
                 : (unsigned)a < CM_NALGOS && forms[a][f] ? forms[a][f]
                                                            : coll_ring;
  fn(w, gi, member, c, (unsigned)a < CM_NALGOS ? a : CM_ALGO_RING, bytes);
}
