/* Collectives as SimGrid communications, run inside the members' actors.
 *
 * Every collective takes its latency, volume, ramp and bandwidth from the cost model
 * (cm_coll_split), so that alone on the fabric it takes the cost model's time; what the
 * simulator adds is what the flows do to each other when they share links.
 *   ring (and tree, broadcast, send/recv): each member sends to its successor in each of the
 *     group's ring channels. SIM_FAST: the whole volume (divided by the ramp) as one message
 *     per channel, then the latency as a delay; SIM_STEP: every step's chunk as a message,
 *     the fixed latency first and a hop's latency after each step.
 *   all-to-all: a message to every other member, S/n each.
 *   NVLS: each member streams its buffer to the switch (a relay actor on the NVLS host of its
 *     node, and of its domain when the group spans nodes of a multi-node domain) and gets the
 *     result back; sizes are scaled so that the GPU's NVLink port alone gives the cost model's
 *     NVLS bandwidth.
 * Messages to one mailbox keep their order, so every (group, member, channel) has its own. */
#include <math.h>
#include <simgrid/actor.h>
#include <simgrid/comm.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <simgrid/mailbox.h>
#include <stdlib.h>
#include <string.h>

#include "sim_int.h"

static char dummy_payload; /* SimGrid refuses a NULL payload; nothing is ever read from it */

static sg_mailbox_t mbox(const char *fmt, int a, int b, int c) {
  char name[64];
  snprintf(name, sizeof name, fmt, a, b, c);
  return sg_mailbox_by_name(name);
}

/* Counts the message and the bytes it puts on every link of its route. */
static void account(sim__world *w, int src, int dst, double bytes);

sg_comm_t sim__put(sim__world *w, int src, int dst, sg_mailbox_t mb, double bytes) {
  long n = bytes < 1 ? 1 : (long)(bytes + 0.5);
  account(w, src, dst, (double)n);
  return sg_mailbox_put_async(mb, &dummy_payload, n);
}

void sim__put_detached(sim__world *w, int src, int dst, sg_mailbox_t mb, double bytes) {
  long n = bytes < 1 ? 1 : (long)(bytes + 0.5);
  account(w, src, dst, (double)n);
  sg_comm_detach(sg_mailbox_put_init(mb, &dummy_payload, n), NULL);
}

static void wait_all(sg_comm_t *c, size_t n) {
  for (size_t i = 0; i < n; i++) sg_comm_wait(c[i]);
}

/* Ring flows: `flow` bytes per rank in total, split over channels and steps. */
static void ring_flows(sim__world *w, int gi, int member, double flow, int steps, double base_s,
                       double hop_s) {
  const sim__group *g = &w->groups[gi];
  int n = g->n, me = g->gpus[member];
  sg_comm_t comms[2 * 64];
  void *data;
  if (base_s > 0) sg_actor_sleep_for(base_s);
  int nch = g->nch > 64 ? 64 : g->nch;
  for (int s = 0; s < steps; s++) {
    size_t k = 0;
    for (int ch = 0; ch < nch; ch++) {
      int succ = g->succ[ch * n + member];
      if (succ == member) continue;
      comms[k++] = sg_mailbox_get_async(mbox("g%d.%d.%d", gi, member, ch), &data);
      comms[k++] = sim__put(w, me, g->gpus[succ], mbox("g%d.%d.%d", gi, succ, ch),
                            flow / nch / steps);
    }
    wait_all(comms, k);
    if (hop_s > 0) sg_actor_sleep_for(hop_s);
  }
}

void sim__batch_exec(sim__world *w, int gi, int member, double flow_bytes, double delay) {
  const sim__group *g = &w->groups[gi];
  if (g->n > 1 && flow_bytes > 0) ring_flows(w, gi, member, flow_bytes, 1, 0, 0);
  if (delay > 0) sg_actor_sleep_for(delay);
}

static void a2a(sim__world *w, int gi, int member, double bytes) {
  const sim__group *g = &w->groups[gi];
  const cm_params *p = cm_model_params(w->cm);
  int n = g->n, me = g->gpus[member];
  cm_coll_parts parts;
  cm_coll_split(w->cm, CM_ALL_GATHER, CM_ALGO_RING, bytes, &g->pl, &parts); /* for the ramp */
  double lat = p->algo[CM_ALGO_RING].base_us * 1e-6 +
               2.0 * fmax(w->topo.f.nvlink_lat_s, fmax(w->topo.f.net_lat_s, w->topo.f.torus_lat_s));
  sg_comm_t *c = malloc((size_t)2 * n * sizeof *c);
  void *data;
  size_t k = 0;
  for (int j = 0; j < n; j++) {
    if (j == member) continue;
    c[k++] = sg_mailbox_get_async(mbox("a%d.%d.%d", gi, member, 0), &data);
    c[k++] = sim__put(w, me, g->gpus[j], mbox("a%d.%d.%d", gi, j, 0), bytes / n / parts.ramp);
  }
  wait_all(c, k);
  free(c);
  sg_actor_sleep_for(lat);
}

/* NVLS: stream up to the node's (or domain's) switch relay and back. */
static void nvls(sim__world *w, int gi, int member, const cm_coll_parts *parts) {
  const sim__group *g = &w->groups[gi];
  int me = g->gpus[member];
  double scale = w->topo.f.nvlink_Bps / (w->topo.c->nvlink.gbps_per_gpu * 1e9 *
                                         cm_model_params(w->cm)->nvls_eff);
  double flow = parts->vol_bytes / parts->ramp * scale;
  int relay = sim__nvs_of(&w->topo, me, 0);
  void *data;
  sg_comm_t c[2];
  c[0] = sg_mailbox_get_async(mbox("g%d.%d.%d", gi, member, 0), &data);
  c[1] = sim__put(w, me, relay, mbox("v%d.n%d.%d", gi, relay, 0), flow);
  wait_all(c, 2);
  sg_actor_sleep_for(parts->lat_s);
}

void sim__coll_exec(sim__world *w, int gi, int member, cm_coll c, cm_algo a, double bytes) {
  const sim__group *g = &w->groups[gi];
  if (g->n <= 1 || bytes <= 0) return;
  if (c == CM_ALL_TO_ALL) {
    a2a(w, gi, member, bytes);
    return;
  }
  cm_coll_parts parts;
  if (cm_coll_split(w->cm, c, a, bytes, &g->pl, &parts))
    cm_coll_split(w->cm, c, CM_ALGO_RING, bytes, &g->pl, &parts);
  if (a == CM_ALGO_NVLS && g->relay_node) {
    nvls(w, gi, member, &parts);
    return;
  }
  int n = g->n;
  int steps = c == CM_ALL_REDUCE ? 2 * (n - 1) : c == CM_SEND_RECV ? 1 : n - 1;
  double base = cm_model_params(w->cm)->algo[a].base_us * 1e-6;
  if (base > parts.lat_s) base = parts.lat_s;
  double flow = parts.bw_Bps > 0 ? parts.vol_bytes / parts.ramp : 0;
  /* the ring's flows run at the slowest link's speed in the platform; the cost model's
   * bandwidth for this group is the same link's share, so alone the times agree */
  if (w->fidelity == SIM_STEP)
    ring_flows(w, gi, member, flow, steps, base, (parts.lat_s - base) / steps);
  else
    ring_flows(w, gi, member, flow, 1, 0, parts.lat_s);
}

/* ---- NVLS relays --------------------------------------------------------------------------- */

typedef struct relay {
  sim__world *w;
  int gi;          /* group */
  int host;        /* this relay's switch host */
  int domain;      /* 1: the domain-level relay */
  int nmembers;    /* GPUs (node relay) or node relays (domain relay) it serves */
  int *members;    /* member indices (node relay) or node switch hosts (domain relay) */
  int ninst;
  double *bytes;   /* per NVLS collective of the group, in order */
} relay;

static void relay_main(int argc, char **argv) {
  (void)argc, (void)argv;
  relay *r = sg_actor_self_get_data();
  sim__world *w = r->w;
  const sim__group *g = &w->groups[r->gi];
  int two = g->relay_dom, n = r->nmembers;
  sg_comm_t *c = malloc((size_t)(2 * n + 2) * sizeof *c);
  void *data;
  double scale = w->topo.f.nvlink_Bps / (w->topo.c->nvlink.gbps_per_gpu * 1e9 *
                                         cm_model_params(w->cm)->nvls_eff);
  for (int i = 0; i < r->ninst; i++) {
    cm_coll_parts parts;
    cm_coll_split(w->cm, CM_ALL_REDUCE, CM_ALGO_NVLS, r->bytes[i], &g->pl, &parts);
    double down = parts.vol_bytes / parts.ramp * scale, up = r->bytes[i] / parts.ramp;
    size_t k = 0;
    if (!r->domain) {
      for (int j = 0; j < n; j++) {
        c[k++] = sg_mailbox_get_async(mbox("v%d.n%d.%d", r->gi, r->host, 0), &data);
        int m = r->members[j];
        c[k++] = sim__put(w, r->host, g->gpus[m], mbox("g%d.%d.%d", r->gi, m, 0), down);
      }
      if (two) {
        int dom = sim__nvs_of(&w->topo, g->gpus[r->members[0]], 1);
        c[k++] = sim__put(w, r->host, dom, mbox("v%d.d%d.%d", r->gi, dom, 0), up);
        c[k++] = sg_mailbox_get_async(mbox("v%d.n%d.%d", r->gi, r->host, 1), &data);
      }
    } else {
      for (int j = 0; j < n; j++) {
        c[k++] = sg_mailbox_get_async(mbox("v%d.d%d.%d", r->gi, r->host, 0), &data);
        c[k++] = sim__put(w, r->host, r->members[j], mbox("v%d.n%d.%d", r->gi, r->members[j], 1),
                          up);
      }
    }
    wait_all(c, k);
  }
  free(c);
}

void sim__relays_start(sim__world *w) {
  for (int gi = 0; gi < w->ngroups; gi++) {
    sim__group *g = &w->groups[gi];
    if (!g->relay_node) continue;
    /* the NVLS collectives of this group, from its first member's program */
    const sim__prog *pg = &w->prog[g->actor0];
    int ninst = 0;
    for (int i = 0; i < pg->n; i++)
      ninst += pg->ops[i].kind == SIM__OP_COLL && pg->ops[i].group == gi &&
               pg->ops[i].algo == CM_ALGO_NVLS;
    if (!ninst) continue;
    double *bytes = malloc((size_t)ninst * sizeof *bytes);
    int k = 0;
    for (int i = 0; i < pg->n; i++)
      if (pg->ops[i].kind == SIM__OP_COLL && pg->ops[i].group == gi &&
          pg->ops[i].algo == CM_ALGO_NVLS)
        bytes[k++] = pg->ops[i].bytes;
    /* one relay per node the group touches, one per domain above them */
    int *hosts = malloc((size_t)g->n * sizeof *hosts), nh = 0;
    for (int m = 0; m < g->n; m++) {
      int h = sim__nvs_of(&w->topo, g->gpus[m], 0), seen = 0;
      for (int j = 0; j < nh; j++) seen |= hosts[j] == h;
      if (!seen) hosts[nh++] = h;
    }
    for (int j = 0; j < nh; j++) {
      relay *r = calloc(1, sizeof *r);
      r->w = w, r->gi = gi, r->host = hosts[j], r->ninst = ninst, r->bytes = bytes;
      r->members = malloc((size_t)g->n * sizeof *r->members);
      for (int m = 0; m < g->n; m++)
        if (sim__nvs_of(&w->topo, g->gpus[m], 0) == hosts[j]) r->members[r->nmembers++] = m;
      char name[48], hn[48];
      sim__host_name(&w->topo, hosts[j], hn, sizeof hn);
      snprintf(name, sizeof name, "relay%d.%d", gi, j);
      sg_actor_t a = sg_actor_init(name, sg_host_by_name(hn));
      sg_actor_set_data(a, r);
      sg_actor_start_(a, relay_main, 0, NULL);
    }
    if (g->relay_dom) {
      relay *r = calloc(1, sizeof *r);
      r->w = w, r->gi = gi, r->domain = 1, r->ninst = ninst, r->bytes = bytes;
      r->host = sim__nvs_of(&w->topo, g->gpus[0], 1);
      r->members = hosts, r->nmembers = nh;
      char name[48], hn[48];
      sim__host_name(&w->topo, r->host, hn, sizeof hn);
      snprintf(name, sizeof name, "relayd%d", gi);
      sg_actor_t a = sg_actor_init(name, sg_host_by_name(hn));
      sg_actor_set_data(a, r);
      sg_actor_start_(a, relay_main, 0, NULL);
    } else {
      free(hosts);
    }
  }
}

/* ---- accounting ------------------------------------------------------------------------------ */

static void account(sim__world *w, int src, int dst, double bytes) {
  w->messages++;
  double *lb = w->link_bytes;
  if (!lb) return;
  sim__hop h[SIM__MAXHOPS];
  int n = sim__route(&w->topo, src, dst, h);
  for (int i = 0; i < n && i < SIM__MAXHOPS; i++) lb[2 * h[i].link + (h[i].up ? 0 : 1)] += bytes;
}
