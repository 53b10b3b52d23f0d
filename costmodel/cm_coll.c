/* Collectives: one row per collective, NCCL's algorithms, times on placed groups.
 *
 * Conventions are nccl-tests' (doc/PERFORMANCE.md): `bytes` S is the per-rank buffer, algbw =
 * S / time, busbw = algbw * factor(n) (2(n-1)/n for all-reduce, (n-1)/n for all-gather and
 * reduce-scatter). NCCL's "node" is an NVLink domain (a node, or a whole NVL72 rack): N such
 * nodes, p = n / N ranks in each. B_in is a rank's ring bandwidth inside the domain (the
 * slowest NVLink level it crosses), B_net the NIC bandwidth of one domain's share of the group
 * (the NICs of its nodes that hold members, shared by the groups on them). Every time is
 * latency + volume / (ramp * B):
 *
 *   ring     every rank moves factor(n) * S at min(B_in, B_net) (the domain's NIC share
 *            compares directly with B_in: one ring edge leaves a domain per channel, and NCCL
 *            spreads the channels over the domain's NICs). Latency: base + (steps - inter) *
 *            hop_in + inter * hop_out.
 *   tree     NCCL's double binary tree between domains, a chain inside: a rank moves 2 S
 *            through NVLink at 0.92 B_in (NCCL tuning.cc: tree busBw <= 0.92 ring's, algBw =
 *            busBw / 2), and a domain sends v(N) * S through its NICs, v = 1 (N = 2: each
 *            tree's root exchanges half), 1.5 (N = 3), 2 (N >= 4: a node inner in one tree
 *            and a leaf in the other). Latency: base + 2((p-1) hop_in + log2(N) hop_out).
 *   nvls     NVLink SHARP inside one domain (N = 1): a rank sends S and receives the result,
 *            (n+1)/n * S, at nvls_eff of its NVLink, and the switch caps busbw at nvls_cap *
 *            NCCL's NVLS efficiency of the GPU's architecture * NVLink (480 GB/s on 8 H100,
 *            ~840 on 72 GB200: busbw grows as 2(n-1)/(n+1) until the cap).
 *            All-gather/reduce-scatter: each rank receives S at nvls_eff.
 *   nvlstree NVLS inside each domain, then a tree between domains over one share per NIC
 *            (NCCL's NVLSTree): the slowest of the NVLS part, the tree's v(N) * S over B_net
 *            (so busbw reaches 2 B_net on two nodes) and NCCL's per-NIC cap (tuning.cc
 *            perChMaxNVLSTreeBw: Hopper 57.7 GB/s on <= 2 nodes, 45.5 beyond).
 *   pat      all-gather/reduce-scatter with one rank per domain (NCCL's PAT): ring volume at
 *            0.75 of ring bandwidth, latency base + log2(N) hop_out / 3.5 + 2.8 us * n.
 *   hier     (not NCCL's) reduce-scatter in the domain, all-reduce of S/p between domains,
 *            all-gather.
 * The algorithm is the one NCCL's own tuner would pick (nccl_estimate: its busBw formulas,
 * ring and tree at B_in on <= 2 domains and at B_net beyond, and its Simple-protocol
 * latencies, with no ramp; all-reduce has no multi-domain NVLS and all-gather/reduce-scatter
 * no multi-domain NVLS or tree, as without CollNet); the time is this file's formula for
 * that algorithm, which may not be the fastest (two A100 nodes with 4 NICs: NCCL prices ring
 * and tree on NVLink and runs the NIC-bound ring). Bandwidths ramp (cm__ramp) with the share
 * a pipeline step moves: S/n for ring, NVLS and PAT (so 72-rank NVLS ramps 9x later than 8),
 * S/p for tree and NVLSTree (the domain's ranks split the buffer, the tree moves the shares
 * whole), S/8 for send/recv and broadcast (the ramp was fitted on 8-rank all-reduce, S/8). */
#include <math.h>
#include <string.h>

#include "cm_int.h"

static const char *const algo_names[CM_NALGOS] = {"ring", "tree", "nvls", "hier", "nvlstree",
                                                  "pat"};
const char *cm_algo_name(cm_algo a) { return (unsigned)a < CM_NALGOS ? algo_names[a] : "?"; }

/* The collective table: name, ring volume per buffer byte, bus-bandwidth factor, ring steps,
 * and the algorithms that can run it. */
#define A(x) (1u << CM_ALGO_##x)
typedef struct coll_row {
  const char *name;
  double vol_num, vol_off; /* ring volume = vol_num * (n - vol_off) / n; 0,0 = 1 */
  int steps_mul;           /* ring steps = steps_mul * (n - 1); 0 = 1 step */
  unsigned algos;
} coll_row;

static const coll_row colls[CM_NCOLLS] = {
    [CM_ALL_REDUCE] = {"all_reduce", 2, 1, 2,
                       A(RING) | A(TREE) | A(NVLS) | A(HIER) | A(NVLSTREE)},
    [CM_ALL_GATHER] = {"all_gather", 1, 1, 1, A(RING) | A(NVLS) | A(PAT)},
    [CM_REDUCE_SCATTER] = {"reduce_scatter", 1, 1, 1, A(RING) | A(NVLS) | A(PAT)},
    [CM_ALL_TO_ALL] = {"alltoall", 1, 1, 1, A(RING)},
    [CM_BROADCAST] = {"broadcast", 0, 0, 1, A(RING)},
    [CM_SEND_RECV] = {"sendrecv", 0, 0, 0, A(RING)},
};
#undef A

const char *cm_coll_name(cm_coll c) { return (unsigned)c < CM_NCOLLS ? colls[c].name : "?"; }

int cm_coll_lookup(const char *name, cm_coll *out) {
  for (int c = 0; c < CM_NCOLLS; c++)
    if (strcmp(name, colls[c].name) == 0) {
      *out = (cm_coll)c;
      return PP_OK;
    }
  return PP_NOTFOUND;
}

double cm_coll_busbw_factor(cm_coll c, int n) {
  if ((unsigned)c >= CM_NCOLLS || n < 1) return 0;
  const coll_row *r = &colls[c];
  return r->vol_num ? r->vol_num * (n - r->vol_off) / n : 1.0;
}

double cm__ramp(const cm_algo_params *a, double bytes) {
  if (bytes <= 0) return 1;
  return 1.0 / (1.0 + pow(a->half_bytes / bytes, a->gamma));
}

/* NCCL's per-architecture constants (tuning.cc, v2.30): NVLS efficiency and the NVLSTree
 * per-channel cap (GB/s) on <= 2 and on more nodes, keyed here by the GPU's name (NCCL keys
 * them by compute capability). Unknown names are taken as Hopper. */
typedef struct nccl_arch {
  const char *prefix;
  double nvls_eff, nvlstree_ch2, nvlstree_ch;
} nccl_arch;
static const nccl_arch archs[] = {
    {"gb", 0.74, 96.0, 80.0}, {"b", 0.74, 96.0, 80.0}, {"h", 0.85, 57.7, 45.5}};
static const nccl_arch *arch_of(const spec_gpu *g) {
  for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
    if (strncmp(g->name, archs[i].prefix, strlen(archs[i].prefix)) == 0) return &archs[i];
  return &archs[2];
}

#define HAS(pl, l) ((pl)->levels & (1u << (l)))

/* Slowest bandwidth over the levels crossed (GB/s); 0 when none. */
static double min_bw(const cm_place *pl, int lo, int hi) {
  double b = 0;
  for (int l = lo; l <= hi; l++)
    if (HAS(pl, l) && (b == 0 || pl->bw_gbps[l] < b)) b = pl->bw_gbps[l];
  return b;
}

/* Latency of an inner hop and of an outer hop (between nodes or domains). */
static void hop_lat(const cm_place *pl, double *in, double *out) {
  *in = HAS(pl, CM_LVL_NVLINK) ? pl->lat_us[CM_LVL_NVLINK]
        : HAS(pl, CM_LVL_TORUS) ? pl->lat_us[CM_LVL_TORUS]
                                : 0;
  *out = 0;
  for (int l = CM_LVL_NVLINK_UP; l <= CM_LVL_SPINE; l++)
    if (HAS(pl, l) && pl->lat_us[l] > *out) *out = pl->lat_us[l];
  if (*in == 0) *in = *out;
}

/* A group as NCCL sees it: N "nodes" (NVLink domains) of p ranks, a rank's bandwidth inside
 * the domain, a domain's NIC bandwidth for this group (GB/s), its NICs, the hop latencies. */
typedef struct view {
  int n, N, p, nics;
  double b_in, b_net, in_us, out_us;
} view;

static void view_of(const cm_model *cm, const cm_place *pl, view *v) {
  v->n = pl->ranks;
  v->N = cm->dom > 1 ? pl->domains : pl->nodes;
  v->p = cm->dom > 1 ? pl->per_domain : pl->per_node;
  v->b_in = min_bw(pl, CM_LVL_NVLINK, CM_LVL_NVLINK_UP);
  /* the domain's nodes that hold members, each giving its NIC share */
  int nodes = cm->dom > 1 ? (v->p + pl->per_node - 1) / pl->per_node : 1;
  v->b_net = min_bw(pl, CM_LVL_NET, CM_LVL_SPINE) * nodes;
  v->nics = cm->c.network.nics_per_node * nodes / pl->sharing;
  if (v->nics < 1) v->nics = 1;
  hop_lat(pl, &v->in_us, &v->out_us);
}

/* Per-domain NIC volume of a double binary tree, in buffers (see the top comment). */
static double tree_v(int N) { return N <= 2 ? 1.0 : N == 3 ? 1.5 : 2.0; }

/* The pieces of a ring (also broadcast and send/recv): latency of its steps, the volume each
 * rank moves, the slowest level's bandwidth. */
static int ring_split(const cm_model *cm, cm_coll c, double S, const cm_place *pl,
                      cm_coll_parts *o) {
  int n = pl->ranks;
  const coll_row *r = &colls[c];
  view v;
  view_of(cm, pl, &v);
  double B = v.b_in;
  if (v.b_net > 0 && (B <= 0 || v.b_net < B)) B = v.b_net;
  if (HAS(pl, CM_LVL_TORUS)) B = pl->bw_gbps[CM_LVL_TORUS];
  if (n <= 1 || B <= 0) return PP_OK;
  double vol = r->vol_num ? r->vol_num * (n - r->vol_off) / n : 1.0;
  double steps = r->steps_mul ? r->steps_mul * (n - 1.0) : 1.0;
  double in, out;
  hop_lat(pl, &in, &out);
  double outer = pl->nodes > 1 ? pl->nodes : 0; /* ring edges leaving a node */
  if (outer > n) outer = n;
  double lat = ((n - outer) * in + outer * out) / n;
  const cm_algo_params *a = &cm->p.algo[CM_ALGO_RING];
  o->lat_s = (a->base_us + steps * lat) * 1e-6;
  o->vol_bytes = vol * S;
  o->ramp = cm__ramp(a, S / (r->vol_num ? n : 8));
  o->bw_Bps = B * 1e9;
  return PP_OK;
}

/* Keep the slower of two (volume, bandwidth) pieces in o. */
static void slower(cm_coll_parts *o, double vol, double bw_Bps) {
  if (vol <= 0 || bw_Bps <= 0) return;
  if (o->bw_Bps <= 0 || vol / bw_Bps > o->vol_bytes / o->bw_Bps) {
    o->vol_bytes = vol;
    o->bw_Bps = bw_Bps;
  }
}

static int tree_split(const cm_model *cm, double S, const cm_place *pl, cm_coll_parts *o) {
  view v;
  view_of(cm, pl, &v);
  if (v.N <= 1 || HAS(pl, CM_LVL_TORUS) || v.b_net <= 0) return PP_INPUT;
  const cm_algo_params *a = &cm->p.algo[CM_ALGO_TREE];
  o->lat_s = (a->base_us + 2.0 * ((v.p - 1) * v.in_us + log2((double)v.N) * v.out_us)) * 1e-6;
  if (v.p > 1) slower(o, 2.0 * S, 0.92 * v.b_in * 1e9);
  slower(o, tree_v(v.N) * S, v.b_net * 1e9);
  o->ramp = cm__ramp(a, S / v.p);
  return PP_OK;
}

/* NVLS inside one domain of m ranks: (volume, bandwidth) of the switch part. */
static void nvls_part(const cm_model *cm, cm_coll c, double S, int m, const cm_place *pl,
                      double *vol, double *bw_Bps) {
  const spec_nvlink *nv = &cm->c.nvlink;
  double B = nv->gbps_per_gpu * 1e9, e = cm->p.nvls_eff;
  if (c == CM_ALL_REDUCE) {
    /* the cap on busbw, as an efficiency at this size: busbw = 2(m-1)/(m+1) * B * e */
    double cap = cm->p.nvls_cap * arch_of(&cm->c.gpu)->nvls_eff * (m + 1.0) / (2.0 * (m - 1));
    if (cap < e) e = cap;
    *vol = S * (m + 1.0) / m;
  } else {
    *vol = S;
  }
  *bw_Bps = B * e;
  if (HAS(pl, CM_LVL_NVLINK_UP)) {
    /* partial sums go up and the result comes down through the node's share of the uplink */
    double up = pl->bw_gbps[CM_LVL_NVLINK_UP] * 1e9 * *vol / S;
    if (up < *bw_Bps) *bw_Bps = up;
  }
}

static int nvls_split(const cm_model *cm, cm_coll c, double S, const cm_place *pl,
                      cm_coll_parts *o) {
  const spec_nvlink *nv = &cm->c.nvlink;
  int n = pl->ranks;
  if (!nv->in_network_reduce || pl->domains > 1 || n < 2 || !HAS(pl, CM_LVL_NVLINK))
    return PP_INPUT;
  const cm_algo_params *a = &cm->p.algo[CM_ALGO_NVLS];
  nvls_part(cm, c, S, n, pl, &o->vol_bytes, &o->bw_Bps);
  o->lat_s = (a->base_us + 2.0 * nv->latency_us) * 1e-6;
  if (HAS(pl, CM_LVL_NVLINK_UP)) o->lat_s += 2.0 * pl->lat_us[CM_LVL_NVLINK_UP] * 1e-6;
  o->ramp = cm__ramp(a, S / n);
  return PP_OK;
}

/* NCCL's NVLSTree cap on busbw (B/s): one head per NIC (at most NCCL_MAX_NVLS_ARITY, 32),
 * perChMaxNVLSTreeBw each. */
static double nvlstree_cap(const cm_model *cm, const view *v) {
  const nccl_arch *ar = arch_of(&cm->c.gpu);
  double heads = v->nics < 32 ? v->nics : 32;
  return heads * (v->N <= 2 ? ar->nvlstree_ch2 : ar->nvlstree_ch) * 1e9;
}

int cm_nvlstree_pieces(const cm_model *cm, double S, const cm_place *pl, cm_coll_parts *in,
                       cm_coll_parts *out) {
  view v;
  view_of(cm, pl, &v);
  memset(in, 0, sizeof *in);
  memset(out, 0, sizeof *out);
  if (!cm->c.nvlink.in_network_reduce || v.N <= 1 || v.p < 2 || !HAS(pl, CM_LVL_NVLINK) ||
      v.b_net <= 0 || S <= 0)
    return PP_INPUT;
  nvls_part(cm, CM_ALL_REDUCE, S, v.p, pl, &in->vol_bytes, &in->bw_Bps);
  slower(out, tree_v(v.N) * S, v.b_net * 1e9);
  slower(out, 2.0 * (v.n - 1.0) / v.n * S, nvlstree_cap(cm, &v));
  const cm_algo_params *a = &cm->p.algo[CM_ALGO_NVLSTREE];
  in->lat_s = out->lat_s =
      (a->base_us + 2.0 * v.in_us + 2.0 * log2((double)v.N) * v.out_us) * 1e-6;
  in->ramp = out->ramp = cm__ramp(a, S / v.p);
  return PP_OK;
}

static int nvlstree_split(const cm_model *cm, double S, const cm_place *pl, cm_coll_parts *o) {
  cm_coll_parts in, out;
  if (cm_nvlstree_pieces(cm, S, pl, &in, &out)) return PP_INPUT;
  *o = in;
  slower(o, out.vol_bytes, out.bw_Bps);
  return PP_OK;
}

static int pat_split(const cm_model *cm, cm_coll c, double S, const cm_place *pl,
                     cm_coll_parts *o) {
  view v;
  view_of(cm, pl, &v);
  if (v.p != 1 || v.N <= 1 || HAS(pl, CM_LVL_TORUS)) return PP_INPUT;
  ring_split(cm, c, S, pl, o);
  o->bw_Bps *= 0.75;
  const cm_algo_params *a = &cm->p.algo[CM_ALGO_PAT];
  o->lat_s = (a->base_us + log2((double)v.N) * v.out_us / 3.5 + 2.8 * v.n) * 1e-6;
  o->ramp = cm__ramp(a, S / v.n);
  return PP_OK;
}

int cm_coll_split(const cm_model *cm, cm_coll c, cm_algo a, double bytes, const cm_place *pl,
                  cm_coll_parts *o) {
  memset(o, 0, sizeof *o);
  o->ramp = 1;
  if ((unsigned)c >= CM_NCOLLS || (unsigned)a >= CM_NALGOS || !(colls[c].algos & (1u << a)) ||
      c == CM_ALL_TO_ALL)
    return PP_INPUT;
  if (pl->ranks <= 1 || bytes <= 0) return PP_OK;
  switch (a) {
  case CM_ALGO_RING: return ring_split(cm, c, bytes, pl, o);
  case CM_ALGO_TREE: return tree_split(cm, bytes, pl, o);
  case CM_ALGO_NVLS: return nvls_split(cm, c, bytes, pl, o);
  case CM_ALGO_NVLSTREE: return nvlstree_split(cm, bytes, pl, o);
  case CM_ALGO_PAT: return pat_split(cm, c, bytes, pl, o);
  default: return PP_INPUT;
  }
}

static double parts_time(const cm_coll_parts *o) {
  return o->lat_s + (o->vol_bytes > 0 ? o->vol_bytes / (o->ramp * o->bw_Bps) : 0);
}

static double ring_time(const cm_model *cm, cm_coll c, double S, const cm_place *pl) {
  cm_coll_parts o = {0, 0, 1, 0};
  ring_split(cm, c, S, pl, &o);
  return parts_time(&o);
}

/* The groups a hierarchical all-reduce runs: inside one domain, and across domains with one
 * member per domain (every member of the group in a node runs its own inter-domain ring). */
static void split_hier(const cm_place *pl, cm_place *intra, cm_place *inter) {
  *intra = *pl;
  intra->key = 0;
  intra->ranks = pl->per_domain;
  intra->domains = 1;
  intra->nodes = (pl->per_domain + pl->per_node - 1) / pl->per_node;
  intra->levels &= (1u << CM_LVL_NVLINK) | (1u << CM_LVL_NVLINK_UP);
  *inter = *pl;
  inter->key = 0;
  inter->ranks = pl->domains;
  inter->per_node = inter->per_domain = 1;
  inter->nodes = pl->domains;
  inter->sharing = pl->sharing * pl->per_node;
  inter->levels &= ~((1u << CM_LVL_NVLINK) | (1u << CM_LVL_NVLINK_UP));
  for (int l = CM_LVL_NET; l <= CM_LVL_SPINE; l++)
    inter->bw_gbps[l] = pl->bw_gbps[l] * pl->sharing / inter->sharing;
}

static double hier_time(const cm_model *cm, double S, const cm_place *pl) {
  if (pl->domains <= 1 || pl->per_domain <= 1 || HAS(pl, CM_LVL_TORUS)) return -1;
  cm_place intra, inter;
  split_hier(pl, &intra, &inter);
  return ring_time(cm, CM_REDUCE_SCATTER, S, &intra) +
         cm_coll_best(cm, CM_ALL_REDUCE, S / pl->per_domain, &inter, NULL) +
         ring_time(cm, CM_ALL_GATHER, S, &intra);
}

/* All-to-all: each rank sends (n-1)/n of its buffer; the slowest of its own NVLink port,
 * the node's uplink share and the node's NIC share decides. */
static double a2a_time(const cm_model *cm, double S, const cm_place *pl) {
  int n = pl->ranks;
  if (n <= 1) return 0;
  double t = 0, in, out;
  if (HAS(pl, CM_LVL_NVLINK))
    t = fmax(t, S * (pl->per_node - 1.0) / n / (pl->bw_gbps[CM_LVL_NVLINK] * 1e9));
  if (HAS(pl, CM_LVL_NVLINK_UP))
    t = fmax(t, pl->per_node * S * (pl->per_domain - pl->per_node) / n /
                    (pl->bw_gbps[CM_LVL_NVLINK_UP] * 1e9));
  for (int l = CM_LVL_NET; l <= CM_LVL_SPINE; l++)
    if (HAS(pl, l)) {
      double leave = l == CM_LVL_NET ? n - pl->per_domain : n - pl->per_node;
      t = fmax(t, pl->per_node * S * leave / n / (pl->bw_gbps[l] * 1e9));
    }
  if (HAS(pl, CM_LVL_TORUS)) {
    /* messages travel a quarter (wrap) or a third (mesh) of each spanned dimension */
    double hops = fmax(1.0, pow((double)n, 1.0 / fmax(1, pl->torus_dims)) /
                                (pl->torus_wrap ? 4.0 : 3.0) * pl->torus_dims);
    t = fmax(t, S * (n - 1.0) / n * hops / (pl->bw_gbps[CM_LVL_TORUS] * 1e9));
  }
  hop_lat(pl, &in, &out);
  const cm_algo_params *a = &cm->p.algo[CM_ALGO_RING];
  return (a->base_us + 2.0 * fmax(in, out)) * 1e-6 + t / cm__ramp(a, S / n);
}

double cm_coll_time(const cm_model *cm, cm_coll c, cm_algo a, double bytes, const cm_place *pl) {
  if ((unsigned)c >= CM_NCOLLS || (unsigned)a >= CM_NALGOS) return -1;
  if (!(colls[c].algos & (1u << a))) return -1;
  if (pl->ranks <= 1 || bytes <= 0) return 0;
  if (c == CM_ALL_TO_ALL) return a2a_time(cm, bytes, pl);
  if (a == CM_ALGO_HIER) return hier_time(cm, bytes, pl);
  cm_coll_parts o;
  return cm_coll_split(cm, c, a, bytes, pl, &o) ? -1 : parts_time(&o);
}

/* NCCL's latency of an algorithm, us (tuning.cc, Simple protocol: base + hardware
 * latencies per NVLink and network hop; rings pay 3 us of network overhead per step). */
static double nccl_latency(cm_coll c, cm_algo a, const view *v) {
  double N = v->N, lg = log2(N), p = v->p;
  int ar = c == CM_ALL_REDUCE;
  switch (a) {
  case CM_ALGO_RING: {
    double steps = colls[c].steps_mul ? colls[c].steps_mul * (v->n - 1.0) : 1.0;
    double inter = N <= 1 ? 0 : (ar ? 2.0 : 1.0) * (N - 1);
    /* NVLink hop 3.4 (NCCL takes the larger of it and 3 x 1 us of network overhead) */
    return 8.4 + (steps - inter) * 3.4 + inter * 14.0;
  }
  case CM_ALGO_TREE: return 8.4 + 2.0 * ((p - 1) * 4.0 + lg * 14.0);
  case CM_ALGO_NVLS: return 25.0 + (N > 1 ? 18.0 : 0);
  case CM_ALGO_NVLSTREE: return 25.0 + 2.0 * lg * 20.9;
  case CM_ALGO_PAT: return 8.0 + lg * 14.0 / 3.5 + 2.8 * v->n;
  default: return 0;
  }
}

/* NCCL's own estimate of an algorithm (tuning.cc, Simple protocol): its latency + S / algBw
 * with no ramp, on the bandwidths this model gives the group. Ring and tree run at their
 * graph's bandwidth, B_in on <= 2 domains and the NICs' B_net beyond (NCCL: bwIntra or
 * bwInter); tree busBw is 0.92 of it and algBw half; NVLSTree is min(NVLS part, B_net * (2 on
 * <= 2 domains), the per-head cap); NVLS and PAT their formulas above. Only used to choose;
 * -1 where NCCL would not run the algorithm. */
static double nccl_estimate(const cm_model *cm, cm_coll c, cm_algo a, double S,
                            const cm_place *pl) {
  cm_coll_parts o = {0, 0, 1, 0};
  if (a == CM_ALGO_HIER || cm_coll_split(cm, c, a, S, pl, &o)) return -1;
  view v;
  view_of(cm, pl, &v);
  int n = v.n;
  double fac = cm_coll_busbw_factor(c, n), lat = nccl_latency(c, a, &v) * 1e-6;
  if (a == CM_ALGO_NVLSTREE) {
    double vol, bw;
    nvls_part(cm, CM_ALL_REDUCE, S, v.p, pl, &vol, &bw);
    double bus = fmin(fmin(fac * S / (vol / bw), (v.N <= 2 ? 2.0 : 1.0) * v.b_net * 1e9),
                      nvlstree_cap(cm, &v));
    return lat + fac * S / bus;
  }
  double graph = v.N <= 2 || v.b_net <= 0 ? v.b_in : v.b_net;
  if ((a != CM_ALGO_RING && a != CM_ALGO_TREE) || graph <= 0)
    return lat + (o.vol_bytes > 0 ? o.vol_bytes / o.bw_Bps : 0);
  double bus = (a == CM_ALGO_TREE ? 0.92 : 1.0) * graph * 1e9;
  double alg = a == CM_ALGO_TREE ? 0.5 * bus : fac > 0 ? bus / fac : bus;
  return lat + S / alg;
}

static cm__coll_entry *cache_slot(const cm_model *cm, cm_coll c, double bytes,
                                  const cm_place *pl) {
  unsigned long long b;
  memcpy(&b, &bytes, sizeof b);
  unsigned long long h = pl->key * 0x9E3779B97F4A7C15ull ^ (b + (unsigned)c) * 0xC2B2AE3D27D4EB4Full;
  return &cm->cache->coll[(h >> 40) % CM__COLL_CACHE];
}

double cm_coll_best(const cm_model *cm, cm_coll c, double bytes, const cm_place *pl,
                    cm_algo *chosen) {
  cm__coll_entry *slot = NULL;
  if (pl->key && cm->cache) {
    slot = cache_slot(cm, c, bytes, pl);
    if (slot->pl_key == pl->key && slot->coll == (int)c && slot->bytes == bytes) {
      if (chosen) *chosen = (cm_algo)slot->algo;
      return slot->time;
    }
  }
  double est = -1;
  cm_algo which = CM_ALGO_RING;
  for (int a = 0; a < CM_NALGOS; a++) {
    double t = nccl_estimate(cm, c, (cm_algo)a, bytes, pl);
    if (t >= 0 && (est < 0 || t < est)) est = t, which = (cm_algo)a;
  }
  double best = cm_coll_time(cm, c, which, bytes, pl);
  if (best < 0) best = 0;
  if (chosen) *chosen = which;
  if (slot) *slot = (cm__coll_entry){pl->key, bytes, (int)c, (int)which, best};
  return best;
}
