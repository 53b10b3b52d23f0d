/* Internals of sim/: the fabric as links and routes (sim_topo.c), the SimGrid platform writer,
 * the per-GPU programs an iteration lowers to (sim_prog.c), the collectives actors run
 * (sim_coll.c) and the child process that runs SimGrid (sim_engine.c). */
#ifndef PODPLAN_SIM_INT_H
#define PODPLAN_SIM_INT_H

#include <simgrid/forward.h>
#include <stdio.h>

#include "podplan/sim.h"

/* ---- the fabric --------------------------------------------------------------------------- */

typedef enum {
  SIM__L_NVL,  /* a GPU's NVLink port (split duplex: UP leaves the GPU) */
  SIM__L_UP,   /* a node's NVLink uplink in a multi-node domain */
  SIM__L_NIC,  /* one NIC */
  SIM__L_LEAF, /* a leaf's uplink to the spine */
  SIM__L_TOR,  /* one torus link, one direction */
  SIM__NLINKKINDS
} sim__link_kind;

typedef struct sim__topo {
  const spec_cluster *c;
  cm_fabric f;
  int ngpu, gpn, dom, nodes, nics, rail, leaf_nodes, nleaves;
  int has_nvl, has_up, torus;
  int dims[3], wrap;
  int nvs_node, nvs_dom; /* NVLS switch hosts: per node, per multi-node domain */
  /* link index ranges: [first[k], first[k] + count[k]) */
  int first[SIM__NLINKKINDS], count[SIM__NLINKKINDS], nlinks;
} sim__topo;

/* One hop of a route: a link and, for split-duplex links, its direction (1 = UP). */
typedef struct sim__hop {
  int link;
  int up;
} sim__hop;

void sim__topo_init(sim__topo *t, const spec_cluster *c, const cm_model *cm);
double sim__link_bw(const sim__topo *t, int link);
/* PP_INPUT when the fabric needs more than two switch levels (leaves per rail > radix). */
int sim__topo_check(const sim__topo *t, pp_err *err);
sim__link_kind sim__link_kind_of(const sim__topo *t, int link);
void sim__link_name(const sim__topo *t, int link, char *buf, size_t n);
/* Hosts: GPUs 0..ngpu-1, then NVLS switches (node ones, then domain ones). */
int sim__nhosts(const sim__topo *t);
void sim__host_name(const sim__topo *t, int host, char *buf, size_t n);
int sim__nvs_of(const sim__topo *t, int gpu, int domain_level);
/* The route between two hosts (at most SIM__MAXHOPS hops); returns the number of hops. */
#define SIM__MAXHOPS 64
int sim__route(const sim__topo *t, int src, int dst, sim__hop *hops);
/* A hop's link direction as an index: [2 l] UP (or a torus link), [2 l + 1] DOWN (the order of
 * sim__world.link_bytes). */
int sim__hop_key(const sim__topo *t, const sim__hop *h);

/* The set of (src, dst) host pairs a run needs routes for. */
typedef struct sim__pairs {
  unsigned long long *keys; /* src << 32 | dst, open addressing; ~0 = empty */
  size_t cap, n;
} sim__pairs;
int sim__pairs_add(sim__pairs *p, int src, int dst);
void sim__pairs_free(sim__pairs *p);
/* Writes the platform: hosts, links, and the routes of `pairs` (both directions). */
int sim__platform_write(const sim__topo *t, const sim__pairs *pairs, FILE *f);

/* ---- programs ----------------------------------------------------------------------------- */

/* A group of GPUs that runs collectives together. */
typedef struct sim__group {
  int n;
  int *gpus;
  cm_place pl;       /* placement (for latency, ramp and bandwidth of its collectives) */
  int nch;           /* ring channels: the NICs a multi-node ring spreads over, or the torus
                        links (dimension and direction) a torus group sends on */
  int *succ;         /* [ch * n + member]: the member it sends to in channel ch */
  int relay_node, relay_dom; /* NVLS: 1 when relays at those levels serve this group */
  int actor0;        /* the program that runs member 0's collectives (its GPU by default) */
  sg_mailbox_t *box; /* in the run: [ch * n + member] the ring mailbox a member receives on in
                        channel ch, looked up on first use (sim_coll.c) */
  int *pred;         /* [ch * n + m]: the member that sends to m in channel ch */
  /* A private ring (sim__mark_private): no other flow of the run, and no other flow of the
   * ring, crosses a link direction its flows cross. NULL otherwise. */
  double *spb;       /* [ch * n + m]: seconds per byte of m's flow to its successor */
  struct sim__priv *run; /* in the run: its state (sim_coll.c) */
  struct sim__nvls *nvls; /* in the run: its NVLS mailboxes and relays (sim_coll.c) */
  struct sim__tree *tree; /* in the run: its trees, mailboxes and flow factor (sim_tree.c) */
  int *nt; /* NVLSTree (sim__nvlstree_prepare): [4 m] member m's domain sub-group, its index
              there, its cross-domain sub-group (position m's in every domain), its index
              there; NULL: the group's NVLSTree all-reduces run as ring flows */
} sim__group;

typedef enum {
  SIM__OP_SLEEP,    /* t seconds of compute (or a known delay), recorded as kind ev */
  SIM__OP_COLL,     /* a collective on a group, recorded as kind ev */
  SIM__OP_BATCH,    /* consecutive ring-form collectives of one group aggregated: ring flows of
                       `bytes` per rank, then their latencies `t` (recorded as kind ev) */
  SIM__OP_SEND,     /* asynchronous send of bytes to peer */
  SIM__OP_RECV,     /* blocking receive from peer, then t seconds of latency */
  SIM__OP_ASYNC,    /* start ops [a, b) of this GPU's list in helper actor `slot` (the main
                       actor skips them) */
  SIM__OP_JOIN,     /* wait for helper `slot`; the wait is recorded as kind ev */
  SIM__OP_CALL,     /* run ops [a, b) (a part's template) `count` times */
  SIM__OP_BEGIN,    /* from here on, events belong to microbatch mb, model chunk `chunk` */
  SIM__OP_POST,     /* release this GPU's semaphore `slot` (between its actor and helpers) */
  SIM__OP_WAIT      /* acquire this GPU's semaphore `slot`; the main actor's wait is recorded
                       as kind ev (a helper's is idle time, not recorded) */
} sim__op_kind;

#define SIM__SLOTS 4 /* helper actors a GPU may have at once: DP tail, ZeRO-3, layer comm */
#define SIM__SEMS 2  /* semaphores of a GPU (OP_POST, OP_WAIT), all at 0 when a run starts */

typedef struct sim__op {
  sim__op_kind kind;
  int group;           /* OP_COLL, OP_BATCH */
  cm_coll coll;        /* OP_COLL */
  cm_algo algo;        /* OP_COLL */
  double bytes;        /* per-rank buffer (OP_COLL), flow bytes (OP_BATCH, SEND) */
  double t;            /* OP_SLEEP seconds; OP_COLL, OP_BATCH delay after; OP_RECV latency */
  int peer;            /* OP_SEND/RECV: GPU id */
  int a, b;            /* OP_ASYNC, OP_CALL: op range */
  int count;           /* OP_CALL */
  int slot;            /* OP_ASYNC, OP_JOIN; OP_POST, OP_WAIT: the semaphore */
  int ev;              /* sim_ev_kind of SLEEP/COLL/BATCH/JOIN; OP_SEND/RECV: 0 fwd, 1 bwd */
  int member;          /* OP_COLL, OP_BATCH: this GPU's index in the group */
  int mb, chunk;       /* OP_BEGIN */
} sim__op;

typedef struct sim__prog {
  sim__op *ops;
  int n, cap;
  int main_at;         /* the program runs ops [main_at, n); the parts' templates before */
} sim__prog;

typedef struct sim__world {
  sim__topo topo;
  cm_model *cm;       /* the caller's cost model (borrowed: its caches fill as we lower) */
  int ngpu;           /* programs (one per GPU in an iteration) */
  sim__prog *prog;    /* ngpu programs */
  int *host_of;       /* host (GPU) each program runs on; NULL: program i on GPU i */
  sim__group *groups;
  int ngroups, capgroups;
  sim_fidelity fidelity;
  int per_layer;      /* sim_opts.per_layer (always 1 at SIM_STEP) */
  int want_events;
  int all_flows;      /* sim_opts.all_flows */
  long long nops;     /* operations lowered so far, all programs */
  long long max_ops;  /* more: PP_LIMIT (the programs would not fit in memory) */
#define SIM_MAX_OPS 50000000LL /* about 4 GiB of sim__op */
  double deadline;    /* CLOCK_MONOTONIC seconds the lowering must end by (0: none) */
  /* filled by the run */
  sim_event *events;
  size_t nevents, capevents;
  long messages;
  int live;              /* in the run: GPU actors not finished yet */
  double *link_bytes; /* per link: bytes carried up [2 l] and down [2 l + 1] (torus links:
                         [2 l] only), from SimGrid's link-load plugin at the end of the run */
  double end_time;
  double *gpu_end;    /* per GPU: when its program finished */
  double (*gpu_kind)[SIM_NEVKINDS]; /* per GPU: seconds spent per event kind */
  sg_sem_t *sems;     /* in the run: per GPU, SIM__SEMS semaphores ([gpu * SIM__SEMS + k]) */
} sim__world;

int sim__group_add(sim__world *w, const int *gpus, int n, pp_err *err);
/* The group with exactly these members in this order, added when the world has none. */
int sim__group_find(sim__world *w, const int *gpus, int n, pp_err *err);
/* Makes group gi's NVLSTree sub-groups (sim__group.nt): the members of each NVLink domain (in
 * GPU order) and the members at each position of every domain; none (nt stays NULL) when its
 * domains hold unequal numbers of members, fewer than two, or there is one domain or a torus. */
int sim__nvlstree_prepare(sim__world *w, int gi, pp_err *err);
/* by[0..n) = the member indices ordered by GPU id (nodes and domains are ranges of ids). */
void sim__by_gpu(const int *gpus, int n, int *by);
int sim__op_push(sim__prog *p, const sim__op *op, pp_err *err);
void sim__world_free(sim__world *w);
/* Every (src, dst) pair the programs and collectives will use. */
int sim__collect_pairs(const sim__world *w, sim__pairs *pairs, pp_err *err);
/* Finds the private rings (sim__group.spb) unless w->all_flows. */
int sim__mark_private(sim__world *w, pp_err *err);

/* Lowers a plan to per-GPU programs. */
int sim__lower(sim__world *w, const spec_model *m, const spec_plan *p, pp_err *err);

/* ---- running ------------------------------------------------------------------------------- */

/* In the SimGrid child: creates the actors of every program (and NVLS relays) and runs. */
void sim__run_world(sim__world *w);
/* Posts a message of `bytes` from host src to host dst on mailbox mb (inside an actor) and
 * counts it; the bytes each link carries come from SimGrid's link-load plugin (child()). */
sg_comm_t sim__put(sim__world *w, int src, int dst, sg_mailbox_t mb, double bytes);
/* The same, sent without waiting for it (an asynchronous pipeline send). */
void sim__put_detached(sim__world *w, int src, int dst, sg_mailbox_t mb, double bytes);
/* SimGrid helpers of the collectives (sim_coll.c): a mailbox by printf-style name, waiting for
 * communications, sleeping (nothing when s <= 0). */
sg_mailbox_t sim__mbox(const char *fmt, ...);
void sim__wait_all(sg_comm_t *c, size_t n);
void sim__sleep(double s);
/* The collective a member of a group runs (inside its actor). */
void sim__coll_exec(sim__world *w, int gi, int member, cm_coll c, cm_algo a, double bytes);
/* Collective c of `bytes` with algorithm *a on placement pl in ring form: the bytes its ring
 * flows carry (*a's volume over its ramp, scaled by the ring's bandwidth over *a's, so that on
 * an idle fabric the flows, which run at the ring's bandwidth, take *a's time) and *a's
 * latency (*lat_s); an algorithm the cost model cannot split for this group runs as the ring
 * (*a becomes CM_ALGO_RING). */
double sim__ring_form(const cm_model *cm, cm_coll c, cm_algo *a, double bytes,
                      const cm_place *pl, double *lat_s);
/* After the run: adds the bytes private rings sent to link_bytes ([2 l] UP, [2 l + 1] DOWN),
 * frees their run state. */
void sim__private_done(sim__world *w);
/* When the last GPU actor ends: the NVLS relays stop (sim_coll.c). */
void sim__nvls_quit(sim__world *w);
/* After the run: frees the groups' NVLS mailboxes and relays (sim_coll.c). */
void sim__nvls_done(sim__world *w);
/* The ring flows of an OP_BATCH; returns the seconds until they are done that the caller has
 * to sleep (with the op's delay, which sim_engine.c defers too). */
double sim__batch_exec(sim__world *w, int gi, int member, double flow_bytes);
/* 1 when collective c can run with NVLS on group gi (inside one NVLink domain whose switches
 * reduce, and priced by the cost model); else sim__coll_exec runs it as a ring. */
int sim__nvls_ok(const sim__world *w, int gi, cm_coll c, double bytes);
/* Trees (sim_tree.c). NCCL's tree channels of group g, 2 per ring channel: 0 when the group
 * cannot run a tree (one NVLink domain, a torus); with parent, parent[k * n + m] = the member m
 * sends its partial sums to in channel k (-1: the root). */
int sim__tree_parents(const sim__world *w, const sim__group *g, int *parent);
/* 1 when collective c of `bytes` on group gi runs as a tree (an all-reduce the cost model
 * prices as a tree there, across NVLink domains); else sim__coll_exec runs ring flows. */
int sim__tree_ok(const sim__world *w, int gi, cm_coll c, double bytes);
/* One member's part of a tree all-reduce (inside its actor); 0 when it cannot run as a tree. */
int sim__tree_exec(sim__world *w, int gi, int member, double bytes);
/* The fast form's flows and words of a tree all-reduce of a `bytes` buffer (no ramp applied, no
 * latency) on a group that can run a tree (NVLSTree's part between domains). */
void sim__tree_flows(sim__world *w, int gi, int member, double bytes);
/* After the run: frees the groups' tree state. */
void sim__tree_done(sim__world *w);
/* PAT (sim_coll.c): NCCL's all-gather / reduce-scatter with one rank per NVLink domain as a
 * distance-reversed Bruck exchange over n members: D = ceil(log2 n) steps, step j to the member
 * dist[j] = 2^(D-1-j) places on, count[j] blocks of S/n (2^j, the last n - 2^(D-1): n - 1 in
 * all, the ring's volume; the most data to the nearest member). Returns D. */
int sim__pat_steps(int n, int *dist, int *count);
/* 1 when collective c of `bytes` on group gi runs as PAT (an all-gather or reduce-scatter the
 * cost model can price as PAT there: one member per NVLink domain, not a torus); else
 * sim__coll_exec runs a ring. */
int sim__pat_ok(const sim__world *w, int gi, cm_coll c, double bytes);
/* 1 when collective c of `bytes` on group gi runs as NVLSTree (an all-reduce the cost model
 * prices as NVLSTree there, whose sub-groups sim__nvlstree_prepare made); else
 * sim__coll_exec runs ring flows with its volume. */
int sim__nvlstree_ok(const sim__world *w, int gi, cm_coll c, double bytes);
#define SIM__PAT_MAXSTEPS 24 /* 2^24 members */
/* NVLSTree's step form (sim_coll.c): a member's stream to its switch in chunks of this many
 * bytes, at most this many. */
#define SIM__NVLSTREE_CHUNK (4.0 * 1024 * 1024)
#define SIM__NVLSTREE_MAXCHUNKS 16
#define SIM__PAT_CHUNK (512.0 * 1024)
#define SIM__PAT_MAXCHUNKS 64
/* Chunking of the step forms (sim_coll.c): an NVLS pipeline's chunk on a member's NVLink
 * port and the most chunks one all-reduce is cut into; an all-to-all pair's chunk and the most
 * rounds. NVLS relays are actors on the switch hosts, pooled and kept for the run (a member
 * that finds its node's relays busy starts another). */
#define SIM__NVLS_CHUNK (256.0 * 1024)
#define SIM__NVLS_MAXCHUNKS 1024
/* Ring channels of a group at most (NCCL's MAXCHANNELS). */
#define SIM__MAXCH 32
#define SIM__A2A_CHUNK (1024.0 * 1024)
#define SIM__A2A_MAXROUNDS 16

/* Seconds on the monotonic clock (the time limits' deadlines). */
double sim__mono_s(void);
/* Runs the world in a child process (SimGrid's state dies with it); deadline > 0 (sim__mono_s
 * seconds): the child is killed when it passes and PP_LIMIT returned. */
int sim__in_child(sim__world *w, const char *platform_out, double deadline, sim_result *res,
                  pp_err *err);

#endif
