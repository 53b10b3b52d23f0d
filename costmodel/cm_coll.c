/* Collectives: one row per collective, four algorithms, times on placed groups.
 *
 * Conventions are nccl-tests' (doc/PERFORMANCE.md): `bytes` is the per-rank buffer, algbw =
 * bytes / time, busbw = algbw * factor(n). A ring moves factor(n) * bytes through every rank
 * (2(n-1)/n for all-reduce), so its time is latency + factor * bytes / B, B the slowest level
 * the ring crosses. NVLS (NVLink SHARP) reduces in the switch: each rank sends its buffer and
 * receives the result, (n+1)/n * bytes, at the switch-reduction efficiency, so its busbw
 * grows as 2(n-1)/(n+1) (420/440/460/480 GB/s for 5..8 H100s in nccl_busbw.csv). Tree
 * (NCCL's double binary tree across nodes) halves algbw (NCCL tuning.cc: Tree algBw = 0.5 *
 * busBw, busBw <= 0.92 of ring's) for log-depth latency. Hierarchical all-reduce:
 * reduce-scatter inside the NVLink domain, all-reduce of 1/per_domain of the buffer between
 * domains, all-gather inside. Every algorithm's bandwidth follows the ramp of cm__ramp. */
#include <math.h>
#include <string.h>

#include "cm_int.h"

static const char *const algo_names[CM_NALGOS] = {"ring", "tree", "nvls", "hier"};
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
    [CM_ALL_REDUCE] = {"all_reduce", 2, 1, 2, A(RING) | A(TREE) | A(NVLS) | A(HIER)},
    [CM_ALL_GATHER] = {"all_gather", 1, 1, 1, A(RING)},
    [CM_REDUCE_SCATTER] = {"reduce_scatter", 1, 1, 1, A(RING)},
    [CM_ALL_TO_ALL] = {"alltoall", 1, 1, 1, A(RING)},
    [CM_BROADCAST] = {"broadcast", 0, 0, 1, A(RING)},
    [CM_SEND_RECV] = {"sendrecv", 0, 0, 0, A(RING)},
};
#undef A

const char *cm_coll_name(cm_coll c) { return (unsigned)c < CM_NCOLLS ? colls[c].name : "?"; }

double cm_coll_busbw_factor(cm_coll c, int n) {
  if ((unsigned)c >= CM_NCOLLS || n < 1) return 0;
  const coll_row *r = &colls[c];
  return r->vol_num ? r->vol_num * (n - r->vol_off) / n : 1.0;
}

double cm__ramp(const cm_algo_params *a, double bytes) {
  if (bytes <= 0) return 1;
  return 1.0 / (1.0 + pow(a->half_bytes / bytes, a->gamma));
}

#define HAS(pl, l) ((pl)->levels & (1u << (l)))

/* Slowest bandwidth over the levels crossed (GB/s); 0 when none. */
static double min_bw(const cm_place *pl) {
  double b = 0;
  for (int l = 0; l < CM_NLEVELS; l++)
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

/* The pieces of a ring (also broadcast and send/recv): latency of its steps, the volume each
 * rank moves, the slowest level's bandwidth. */
static int ring_split(const cm_model *cm, cm_coll c, double S, const cm_place *pl,
                      cm_coll_parts *o) {
  int n = pl->ranks;
  const coll_row *r = &colls[c];
  double B = min_bw(pl);
  memset(o, 0, sizeof *o);
  o->ramp = 1;
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
  o->ramp = cm__ramp(a, S);
  o->bw_Bps = B * 1e9;
  return PP_OK;
}

static int tree_split(const cm_model *cm, double S, const cm_place *pl, cm_coll_parts *o) {
  if (pl->nodes <= 1 || HAS(pl, CM_LVL_TORUS)) return PP_INPUT;
  double in, out;
  hop_lat(pl, &in, &out);
  const cm_algo_params *a = &cm->p.algo[CM_ALGO_TREE];
  o->lat_s = (a->base_us + 2.0 * ((pl->per_node - 1) * in + log2((double)pl->nodes) * out)) * 1e-6;
  o->vol_bytes = 2.0 * S / 0.92; /* NCCL: tree algbw = 0.5 busbw, busbw <= 0.92 of ring's */
  o->ramp = cm__ramp(a, S);
  o->bw_Bps = min_bw(pl) * 1e9;
  return PP_OK;
}

static int nvls_split(const cm_model *cm, double S, const cm_place *pl, cm_coll_parts *o) {
  const spec_nvlink *nv = &cm->c.nvlink;
  int n = pl->ranks;
  if (!nv->in_network_reduce || pl->domains > 1 || n < 2 || !HAS(pl, CM_LVL_NVLINK))
    return PP_INPUT;
  const cm_algo_params *a = &cm->p.algo[CM_ALGO_NVLS];
  o->vol_bytes = S * (n + 1.0) / n;
  o->bw_Bps = nv->gbps_per_gpu * cm->p.nvls_eff * 1e9;
  o->lat_s = (a->base_us + 2.0 * nv->latency_us) * 1e-6;
  if (HAS(pl, CM_LVL_NVLINK_UP)) {
    /* partial sums go up and the result comes down through the node's share of the uplink */
    double up = pl->bw_gbps[CM_LVL_NVLINK_UP] * 1e9 * (n + 1.0) / n;
    if (up < o->bw_Bps) o->bw_Bps = up;
    o->lat_s += 2.0 * pl->lat_us[CM_LVL_NVLINK_UP] * 1e-6;
  }
  o->ramp = cm__ramp(a, S);
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
  case CM_ALGO_NVLS: return nvls_split(cm, bytes, pl, o);
  default: return PP_INPUT;
  }
}

static double parts_time(const cm_coll_parts *o) {
  return o->lat_s + (o->vol_bytes > 0 ? o->vol_bytes / (o->ramp * o->bw_Bps) : 0);
}

static double ring_time(const cm_model *cm, cm_coll c, double S, const cm_place *pl) {
  cm_coll_parts o;
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
  return (a->base_us + 2.0 * fmax(in, out)) * 1e-6 + t / cm__ramp(a, S);
}

double cm_coll_time(const cm_model *cm, cm_coll c, cm_algo a, double bytes, const cm_place *pl) {
  if ((unsigned)c >= CM_NCOLLS || (unsigned)a >= CM_NALGOS) return -1;
  if (!(colls[c].algos & (1u << a))) return -1;
  if (pl->ranks <= 1 || bytes <= 0) return 0;
  if (c == CM_ALL_TO_ALL) return a2a_time(cm, bytes, pl);
  switch (a) {
  case CM_ALGO_HIER: return hier_time(cm, bytes, pl);
  default: {
    cm_coll_parts o;
    return cm_coll_split(cm, c, a, bytes, pl, &o) ? -1 : parts_time(&o);
  }
  }
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
  double best = -1;
  cm_algo which = CM_ALGO_RING;
  for (int a = 0; a < CM_NALGOS; a++) {
    double t = cm_coll_time(cm, c, (cm_algo)a, bytes, pl);
    if (t >= 0 && (best < 0 || t < best)) best = t, which = (cm_algo)a;
  }
  if (best < 0) best = 0;
  if (chosen) *chosen = which;
  if (slot) *slot = (cm__coll_entry){pl->key, bytes, (int)c, (int)which, best};
  return best;
}
