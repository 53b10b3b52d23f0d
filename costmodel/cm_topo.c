/* Topology levels and where a group of ranks sits on them.
 *
 * A cluster is GPUs in nodes (NVLink inside), nodes in NVLink domains (NVLink Switch above
 * the node, tapered), domains joined by a fat tree (NIC rails, leaves, oversubscribed spine)
 * or a torus. A group crosses a level when two of its members are joined only through it.
 * Groups of one kind (all TP groups, all DP groups) run their collectives at once, so the
 * links of a node above the GPU are shared by every group with a member in that node: a node
 * with `sharing` such groups gives each 1/sharing of its uplink or NIC capacity. For a ring,
 * the traffic a node sends upward per group equals the per-rank ring volume whatever the
 * number of members in the node (one ring edge leaves the node per channel), which is why
 * the per-node share compares directly with a GPU's own NVLink bandwidth. */
#include <stdlib.h>
#include <string.h>

#include "cm_int.h"

static const char *const level_names[CM_NLEVELS] = {"nvlink", "nvlink-up", "net", "spine",
                                                    "torus"};

const char *cm_level_name(cm_level l) { return (unsigned)l < CM_NLEVELS ? level_names[l] : "?"; }

static int imin(int a, int b) { return a < b ? a : b; }
static int imax(int a, int b) { return a > b ? a : b; }
static int ceil_div(int a, int b) { return (a + b - 1) / b; }

void cm_fabric_info(const cm_model *cm, cm_fabric *f) {
  const spec_cluster *c = &cm->c;
  const double *eff = cm->p.level_eff;
  memset(f, 0, sizeof *f);
  if (cm->dom > 1) {
    f->nvlink_Bps = c->nvlink.gbps_per_gpu * 1e9 * eff[CM_LVL_NVLINK];
    f->nvlink_lat_s = c->nvlink.latency_us * 1e-6;
  }
  if (cm->dom > cm->gpn)
    f->up_Bps = cm->gpn * c->nvlink.gbps_per_gpu / c->nvlink.taper * 1e9 * eff[CM_LVL_NVLINK_UP];
  if (c->network.kind == SPEC_NET_FAT_TREE) {
    f->nic_Bps = c->network.nic_gbps / 8.0 * 1e9 * eff[CM_LVL_NET];
    f->leaf_up_Bps = c->network.nics_per_node * c->network.nic_gbps / 8.0 * 1e9 /
                     c->network.oversubscription * eff[CM_LVL_SPINE];
    f->net_lat_s = c->network.latency_us * 1e-6;
  }
  if (c->network.kind == SPEC_NET_TORUS) {
    f->torus_Bps = c->network.link_gbps * 1e9 * eff[CM_LVL_TORUS];
    f->torus_lat_s = c->network.latency_us * 1e-6;
  }
  f->leaf_nodes = cm->leaf_nodes;
}

/* Bandwidths (the group's share) and latencies of the levels a placement crosses. */
static void fill_levels(const cm_model *cm, cm_place *pl, int node_span) {
  const spec_cluster *c = &cm->c;
  cm_fabric f;
  cm_fabric_info(cm, &f);
  int n = pl->ranks;
  pl->levels = 0;
  if (n <= 1) return;
  if (c->network.kind == SPEC_NET_TORUS) {
    pl->levels |= 1u << CM_LVL_TORUS;
    double links = pl->torus_dims * (pl->torus_wrap ? 2.0 : 1.0);
    pl->bw_gbps[CM_LVL_TORUS] = f.torus_Bps * links / 1e9;
    pl->lat_us[CM_LVL_TORUS] = f.torus_lat_s * 1e6;
    return;
  }
  int dom = cm->dom;
  if (dom > 1 && pl->per_node > 1 && pl->per_domain > 1) {
    pl->levels |= 1u << CM_LVL_NVLINK;
    pl->bw_gbps[CM_LVL_NVLINK] = f.nvlink_Bps / 1e9;
    pl->lat_us[CM_LVL_NVLINK] = f.nvlink_lat_s * 1e6;
  }
  if (dom > cm->gpn && pl->per_domain > pl->per_node) {
    pl->levels |= 1u << CM_LVL_NVLINK_UP;
    pl->bw_gbps[CM_LVL_NVLINK_UP] = f.up_Bps / pl->sharing / 1e9;
    pl->lat_us[CM_LVL_NVLINK_UP] = f.nvlink_lat_s * 1e6;
  }
  if (pl->domains > 1 || (dom <= 1 && n > 1)) {
    pl->levels |= 1u << CM_LVL_NET;
    /* the node's NICs, shared by the groups on the node; without NVLink every member on the
     * node sends through them too (each its own NIC's share), with NVLink the ring leaves
     * the node once per channel and NCCL spreads the channels over all the NICs */
    double users = pl->sharing * (dom <= 1 ? pl->per_node : 1);
    pl->bw_gbps[CM_LVL_NET] = c->network.nics_per_node * f.nic_Bps / users / 1e9;
    pl->lat_us[CM_LVL_NET] = f.net_lat_s * 1e6;
    if (ceil_div(node_span, cm->leaf_nodes) > 1) {
      pl->levels |= 1u << CM_LVL_SPINE;
      pl->bw_gbps[CM_LVL_SPINE] = f.leaf_up_Bps / pl->sharing / 1e9;
      pl->lat_us[CM_LVL_SPINE] = f.net_lat_s * 1e6;
    }
  }
}

/* Distinct coordinates a progression 0, s, 2s, ... (n terms) takes along each torus dim. */
static void torus_span(const int dims[3], int n, int s, int cnt[3]) {
  int X = dims[0], Y = dims[1], Z = dims[2];
  cnt[0] = cnt[1] = cnt[2] = 1;
  if (s < X) {
    cnt[0] = imin(n, imax(1, X / s));
    int rest = ceil_div(n, cnt[0]);
    cnt[1] = imin(Y, rest);
    cnt[2] = imin(Z, ceil_div(rest, Y));
  } else if (s < X * Y) {
    int sy = s / X;
    cnt[1] = imin(n, imax(1, Y / sy));
    cnt[2] = imin(Z, ceil_div(n, cnt[1]));
  } else {
    int sz = s / (X * Y);
    cnt[2] = imin(n, imax(1, Z / sz));
  }
}

static void torus_fill(const cm_model *cm, cm_place *pl, const int cnt[3]) {
  const int *dims = cm->c.network.dims;
  pl->torus_dims = 0;
  pl->torus_wrap = 1;
  for (int d = 0; d < 3; d++) {
    if (cnt[d] <= 1) continue;
    pl->torus_dims++;
    if (!(cm->c.network.wraparound && cnt[d] == dims[d] && dims[d] > 2)) pl->torus_wrap = 0;
  }
  if (!pl->torus_dims) pl->torus_wrap = 0;
}

static void place_group(const cm_model *cm, int n, int stride, cm_place *pl);

/* A pure function of (n, stride) for a model: cached (the search places the same few groups
 * for millions of plans). */
void cm_place_group(const cm_model *cm, int n, int stride, cm_place *pl) {
  unsigned long long key =
      1ull << 63 | (unsigned long long)(unsigned)n << 32 | (unsigned)(stride < 1 ? 1 : stride);
  cm__place_entry *e = NULL;
  if (cm->cache) {
    unsigned long long h = key * 0x9E3779B97F4A7C15ull;
    e = &cm->cache->place[(h >> 40) % CM__PLACE_CACHE];
    if (e->key == key) {
      *pl = e->pl;
      return;
    }
  }
  place_group(cm, n, stride, pl);
  pl->key = key;
  if (e) e->key = key, e->pl = *pl;
}

/* The copies of a group kind start at b + j n s (0 <= b < s): the layout tiles the cluster
 * with them. Where the group's span divides the NVLink domain and the node, the copy at GPU 0
 * spans as few of them as any; where it does not (CP pairs 8 apart on 144 GPUs of NVL72: GPUs
 * 64 and 72 sit in two racks), some copy spans more, and the collective of every copy is as
 * slow as that one's. The first GPU of the copy spanning the most domains, then nodes (0 when
 * none spans more than the copy at 0). Members s < domain apart fill every domain between
 * their first and last, so a span's domains are counted from its ends. */
static int worst_start(const cm_model *cm, int n, int s) {
  int N = cm->c.gpus, gpn = cm->gpn, dom = cm->dom, best = 0;
  long span = (long)(n - 1) * s, bd = -1, bn = -1;
  if (cm->c.network.kind == SPEC_NET_TORUS || (s >= dom && s >= gpn)) return 0;
  for (int b = 0; b < s; b++)
    for (long o = b; o + span < N; o += (long)n * s) {
      long e = o + span, d = s < dom && dom > 1 ? e / dom - o / dom : 0,
           k = s < gpn ? e / gpn - o / gpn : 0;
      if (d > bd || (d == bd && k > bn)) bd = d, bn = k, best = (int)o;
    }
  return best;
}

static void place_group(const cm_model *cm, int n, int stride, cm_place *pl) {
  if (n > 1 && stride >= 1) {
    int o = worst_start(cm, n, stride);
    int *ids = o ? malloc((size_t)n * sizeof *ids) : NULL;
    if (ids) {
      for (int i = 0; i < n; i++) ids[i] = o + i * stride;
      cm_place_list(cm, ids, n, pl);
      free(ids);
      return;
    }
  }
  memset(pl, 0, sizeof *pl);
  pl->ranks = n;
  pl->per_node = pl->per_domain = pl->nodes = pl->domains = pl->sharing = 1;
  if (n <= 1) return;
  if (stride < 1) stride = 1;
  int gpn = cm->gpn, dom = cm->dom;
  pl->per_node = stride >= gpn ? 1 : imin(n, imax(1, gpn / stride));
  pl->nodes = ceil_div(n, pl->per_node);
  pl->per_domain = dom <= 1 ? 1 : stride >= dom ? 1 : imin(n, imax(1, dom / stride));
  pl->domains = ceil_div(n, pl->per_domain);
  pl->sharing = imax(1, gpn / pl->per_node);
  int node_stride = stride >= gpn ? stride / gpn : 1;
  int span = (pl->nodes - 1) * node_stride + 1;
  if (cm->c.network.kind == SPEC_NET_TORUS) {
    int cnt[3];
    torus_span(cm->c.network.dims, n, stride, cnt);
    torus_fill(cm, pl, cnt);
  }
  fill_levels(cm, pl, span);
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* Largest multiplicity and number of distinct values of keys[0..n) (sorted in place; keys of
 * GPUs listed in ascending order, the common case, are sorted already). */
static void count_keys(int *keys, int n, int *most, int *distinct) {
  int sorted = 1;
  for (int i = 1; i < n && sorted; i++) sorted = keys[i - 1] <= keys[i];
  if (!sorted) qsort(keys, (size_t)n, sizeof *keys, cmp_int);
  *most = 0;
  *distinct = 0;
  for (int i = 0; i < n;) {
    int j = i;
    while (j < n && keys[j] == keys[i]) j++;
    if (j - i > *most) *most = j - i;
    (*distinct)++;
    i = j;
  }
}

void cm_place_list(const cm_model *cm, const int *gpus, int n, cm_place *pl) {
  memset(pl, 0, sizeof *pl);
  pl->ranks = n;
  pl->per_node = pl->per_domain = pl->nodes = pl->domains = pl->sharing = 1;
  if (n <= 1) return;
  int *k = malloc((size_t)n * sizeof *k);
  if (!k) return;
  int gpn = cm->gpn, dom = cm->dom, lo = gpus[0], hi = gpus[0];
  for (int i = 0; i < n; i++) {
    k[i] = gpus[i] / gpn;
    lo = gpus[i] < lo ? gpus[i] : lo;
    hi = gpus[i] > hi ? gpus[i] : hi;
  }
  count_keys(k, n, &pl->per_node, &pl->nodes);
  if (dom > 1) {
    for (int i = 0; i < n; i++) k[i] = gpus[i] / dom;
    count_keys(k, n, &pl->per_domain, &pl->domains);
  } else {
    pl->per_domain = 1;
    pl->domains = n;
  }
  pl->sharing = imax(1, gpn / pl->per_node);
  if (cm->c.network.kind == SPEC_NET_TORUS) {
    const int *d = cm->c.network.dims;
    int cnt[3];
    for (int a = 0; a < 3; a++) {
      for (int i = 0; i < n; i++) {
        int g = gpus[i];
        k[i] = a == 0 ? g % d[0] : a == 1 ? g / d[0] % d[1] : g / (d[0] * d[1]);
      }
      int most;
      count_keys(k, n, &most, &cnt[a]);
    }
    torus_fill(cm, pl, cnt);
  }
  free(k);
  fill_levels(cm, pl, hi / gpn - lo / gpn + 1);
}
