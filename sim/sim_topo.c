/* The fabric as SimGrid links and routes, from the cost model's cm_fabric (the same
 * bandwidths, level efficiencies applied), and the platform XML.
 *
 * Links (all with zero latency: SimGrid's CM02 shares a bottleneck in proportion to 1/latency,
 * which is not how NVLink or RDMA share, so latencies are added as delays by the collectives,
 * see docs/models.md):
 *   nvl<g>    a GPU's NVLink port to the node's switches, split duplex (UP leaves the GPU);
 *             the NVSwitches themselves are non-blocking and not modelled as links
 *   up<n>     a node's NVLink uplink to the second level of a multi-node domain (taper)
 *   nic<n>_<k> NIC k of node n; GPU l of a node uses NIC l * nics / gpus_per_node
 *   leaf<l>   a leaf switch's uplink to the spine (its nodes' NIC capacity / oversubscription);
 *             a rail-optimized fabric has one leaf per rail per group of leaf_nodes nodes
 *   t<g>_<d><p|m> the torus link leaving chip g along dimension d in the + or - direction
 * The spine switches are not links: in a two-level Clos every leaf has a port on every spine
 * switch and a spine switch is non-blocking, so a flow between leaves crosses only the two
 * leaf uplinks (oversubscription sits there); a fabric with more leaves per rail than a
 * spine switch has ports would need a third level, which sim__topo_check refuses.
 * Routes: NVLink inside a domain (through the node uplinks when nodes differ), else NIC, leaf
 * uplinks when the leaves differ, NIC; on a rail-optimized fabric a GPU whose NIC is on another
 * rail than the destination's first hands the data over NVLink to the GPU on that rail (PXN,
 * as NCCL does); dimension-ordered shortest paths on a torus. NVLS
 * in-switch reduction gets a host per node (and per multi-node domain) to relay through. */
#include <stdlib.h>
#include <string.h>

#include "sim_int.h"

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

void sim__topo_init(sim__topo *t, const spec_cluster *c, const cm_model *cm) {
  memset(t, 0, sizeof *t);
  t->c = c;
  cm_fabric_info(cm, &t->f);
  t->ngpu = c->gpus;
  t->gpn = c->gpus_per_node;
  t->dom = c->nvlink.domain_gpus;
  t->nodes = ceil_div(t->ngpu, t->gpn);
  t->has_nvl = t->dom > 1;
  t->has_up = t->dom > t->gpn;
  t->torus = c->network.kind == SPEC_NET_TORUS;
  if (c->network.kind == SPEC_NET_FAT_TREE) {
    t->nics = c->network.nics_per_node;
    t->rail = c->network.rail_optimized;
    t->leaf_nodes = t->f.leaf_nodes;
    int groups = ceil_div(t->nodes, t->leaf_nodes);
    t->nleaves = t->rail ? groups * t->nics : groups;
  }
  if (t->torus) {
    memcpy(t->dims, c->network.dims, sizeof t->dims);
    t->wrap = c->network.wraparound;
  }
  if (c->nvlink.in_network_reduce && t->has_nvl) {
    t->nvs_node = t->nodes;
    t->nvs_dom = t->has_up ? ceil_div(t->ngpu, t->dom) : 0;
  }
  int counts[SIM__NLINKKINDS] = {t->has_nvl ? t->ngpu : 0, t->has_up ? t->nodes : 0,
                                 t->nodes * t->nics, t->nleaves, t->torus ? t->ngpu * 6 : 0};
  int at = 0;
  for (int k = 0; k < SIM__NLINKKINDS; k++) {
    t->first[k] = at;
    t->count[k] = counts[k];
    at += counts[k];
  }
  t->nlinks = at;
}

int sim__topo_check(const sim__topo *t, pp_err *err) {
  int groups = (t->nodes + t->leaf_nodes - 1) / (t->leaf_nodes > 0 ? t->leaf_nodes : 1);
  int radix = t->c->network.switch_radix;
  if (t->nics && radix > 0 && groups > radix)
    return pp_err_set(err, PP_INPUT,
                      "sim: %s: %d leaves per rail exceed the %d ports of a spine switch; a "
                      "third switch level is not modelled (at most %d nodes)",
                      t->c->name, groups, radix, radix * t->leaf_nodes);
  return PP_OK;
}

sim__link_kind sim__link_kind_of(const sim__topo *t, int link) {
  for (int k = SIM__NLINKKINDS - 1; k >= 0; k--)
    if (t->count[k] && link >= t->first[k]) return (sim__link_kind)k;
  return SIM__L_NVL;
}

double sim__link_bw(const sim__topo *t, int link) {
  sim__link_kind k = sim__link_kind_of(t, link);
  int i = link - t->first[k];
  switch (k) {
  case SIM__L_NVL: return t->f.nvlink_Bps;
  case SIM__L_UP: return t->f.up_Bps;
  case SIM__L_NIC: return t->f.nic_Bps;
  case SIM__L_LEAF: {
    int group = t->rail ? i / t->nics : i;
    int first = group * t->leaf_nodes, nodes = t->nodes - first;
    if (nodes > t->leaf_nodes) nodes = t->leaf_nodes;
    return nodes * t->f.leaf_up_Bps / (t->rail ? t->nics : 1);
  }
  case SIM__L_TOR: return t->f.torus_Bps;
  default: return 0;
  }
}

void sim__link_name(const sim__topo *t, int link, char *buf, size_t n) {
  sim__link_kind k = sim__link_kind_of(t, link);
  int i = link - t->first[k];
  switch (k) {
  case SIM__L_NVL: snprintf(buf, n, "nvl%d", i); break;
  case SIM__L_UP: snprintf(buf, n, "up%d", i); break;
  case SIM__L_NIC: snprintf(buf, n, "nic%d_%d", i / t->nics, i % t->nics); break;
  case SIM__L_LEAF: snprintf(buf, n, "leaf%d", i); break;
  case SIM__L_TOR: snprintf(buf, n, "t%d_%d%c", i / 6, i % 6 / 2, i % 2 ? 'm' : 'p'); break;
  default: snprintf(buf, n, "?%d", link);
  }
}

int sim__nhosts(const sim__topo *t) { return t->ngpu + t->nvs_node + t->nvs_dom; }

void sim__host_name(const sim__topo *t, int host, char *buf, size_t n) {
  if (host < t->ngpu)
    snprintf(buf, n, "gpu%d", host);
  else if (host < t->ngpu + t->nvs_node)
    snprintf(buf, n, "nvsn%d", host - t->ngpu);
  else
    snprintf(buf, n, "nvsd%d", host - t->ngpu - t->nvs_node);
}

int sim__nvs_of(const sim__topo *t, int gpu, int domain_level) {
  if (domain_level) return t->nvs_dom ? t->ngpu + t->nvs_node + gpu / t->dom : -1;
  return t->nvs_node ? t->ngpu + gpu / t->gpn : -1;
}

static int nvl(const sim__topo *t, int g) { return t->first[SIM__L_NVL] + g; }
static int upl(const sim__topo *t, int node) { return t->first[SIM__L_UP] + node; }
static int nic_of(const sim__topo *t, int g) {
  int node = g / t->gpn, local = g % t->gpn;
  return node * t->nics + local * t->nics / t->gpn;
}
static int leaf_of(const sim__topo *t, int nic) {
  int node = nic / t->nics, k = nic % t->nics, group = node / t->leaf_nodes;
  return t->rail ? group * t->nics + k : group;
}

static int push(sim__hop *h, int n, int link, int up) {
  if (n < SIM__MAXHOPS) h[n].link = link, h[n].up = up;
  return n + 1;
}

static int torus_route(const sim__topo *t, int s, int d, sim__hop *h) {
  int n = 0, cs[3] = {s % t->dims[0], s / t->dims[0] % t->dims[1], s / (t->dims[0] * t->dims[1])};
  int cd[3] = {d % t->dims[0], d / t->dims[0] % t->dims[1], d / (t->dims[0] * t->dims[1])};
  for (int dim = 0; dim < 3; dim++) {
    int size = t->dims[dim], fwd = (cd[dim] - cs[dim] + size) % size, back = size - fwd;
    int step = 1, hops = fwd;
    if (t->wrap && size > 2) {
      if (back < fwd) step = -1, hops = back;
    } else if (cd[dim] < cs[dim]) {
      step = -1, hops = cs[dim] - cd[dim];
    }
    for (int k = 0; k < hops; k++) {
      int chip = cs[0] + t->dims[0] * (cs[1] + t->dims[1] * cs[2]);
      n = push(h, n, t->first[SIM__L_TOR] + chip * 6 + dim * 2 + (step < 0), 0);
      cs[dim] = (cs[dim] + step + size) % size;
    }
  }
  return n;
}

int sim__hop_key(const sim__topo *t, const sim__hop *h) {
  return 2 * h->link + (sim__link_kind_of(t, h->link) != SIM__L_TOR && !h->up);
}

int sim__route(const sim__topo *t, int src, int dst, sim__hop *h) {
  int n = 0, G = t->ngpu;
  if (src == dst) return 0;
  if (src >= G || dst >= G) { /* a GPU and an NVLS switch, or two switches */
    int s_sw = src >= G, d_sw = dst >= G;
    int sw = s_sw ? src : dst, gpu = s_sw ? dst : src, dom_sw = sw >= G + t->nvs_node;
    if (s_sw && d_sw) { /* node switch <-> domain switch */
      int node = (src < dst ? src : dst) - G;
      return push(h, 0, upl(t, node), src < dst);
    }
    if (!s_sw) { /* GPU -> switch */
      n = push(h, n, nvl(t, gpu), 1);
      if (dom_sw) n = push(h, n, upl(t, gpu / t->gpn), 1);
    } else { /* switch -> GPU */
      if (dom_sw) n = push(h, n, upl(t, gpu / t->gpn), 0);
      n = push(h, n, nvl(t, gpu), 0);
    }
    return n;
  }
  if (t->has_nvl && src / t->dom == dst / t->dom) {
    n = push(h, n, nvl(t, src), 1);
    if (src / t->gpn != dst / t->gpn) {
      n = push(h, n, upl(t, src / t->gpn), 1);
      n = push(h, n, upl(t, dst / t->gpn), 0);
    }
    return push(h, n, nvl(t, dst), 0);
  }
  if (t->torus) return torus_route(t, src, dst, h);
  if (!t->nics) return 0; /* a single NVLink domain has no other path */
  int a = nic_of(t, src), b = nic_of(t, dst);
  if (t->rail && t->has_nvl && a % t->nics != b % t->nics) {
    /* PXN (NCCL >= 2.12): hand the data over NVLink to the GPU of the node on the
     * destination's rail, which sends it through its own NIC */
    int proxy = src / t->gpn * t->gpn + (dst % t->gpn);
    n = push(h, n, nvl(t, src), 1);
    n = push(h, n, nvl(t, proxy), 0);
    a = nic_of(t, proxy);
  }
  n = push(h, n, t->first[SIM__L_NIC] + a, 1);
  if (leaf_of(t, a) != leaf_of(t, b)) {
    n = push(h, n, t->first[SIM__L_LEAF] + leaf_of(t, a), 1);
    n = push(h, n, t->first[SIM__L_LEAF] + leaf_of(t, b), 0);
  }
  return push(h, n, t->first[SIM__L_NIC] + b, 0);
}

/* ---- the pairs a run needs ---------------------------------------------------------------- */

int sim__pairs_add(sim__pairs *p, int src, int dst) {
  if (src == dst) return 0;
  if (2 * (p->n + 1) > p->cap) {
    size_t cap = p->cap ? 2 * p->cap : 1024;
    unsigned long long *k = malloc(cap * sizeof *k);
    if (!k) return -1;
    memset(k, 0xff, cap * sizeof *k);
    for (size_t i = 0; i < p->cap; i++) {
      if (p->keys[i] == ~0ull) continue;
      size_t j = (p->keys[i] * 0x9E3779B97F4A7C15ull >> 20) & (cap - 1);
      while (k[j] != ~0ull) j = (j + 1) & (cap - 1);
      k[j] = p->keys[i];
    }
    free(p->keys);
    p->keys = k;
    p->cap = cap;
  }
  unsigned long long key = (unsigned long long)src << 32 | (unsigned)dst;
  size_t j = (key * 0x9E3779B97F4A7C15ull >> 20) & (p->cap - 1);
  while (p->keys[j] != ~0ull) {
    if (p->keys[j] == key) return 0;
    j = (j + 1) & (p->cap - 1);
  }
  p->keys[j] = key;
  p->n++;
  return 0;
}

void sim__pairs_free(sim__pairs *p) {
  free(p->keys);
  memset(p, 0, sizeof *p);
}

/* ---- the platform ------------------------------------------------------------------------- */

int sim__platform_write(const sim__topo *t, const sim__pairs *pairs, FILE *f) {
  char a[48], b[48];
  fprintf(f, "<?xml version='1.0'?>\n"
             "<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
             "<!-- generated by podplan: %s, %d GPUs; bandwidths are the cost model's (level\n"
             "     efficiencies applied); latencies are added by the collectives -->\n"
             "<platform version=\"4.1\">\n<zone id=\"fabric\" routing=\"Full\">\n",
          t->c->name, t->ngpu);
  for (int h = 0; h < sim__nhosts(t); h++) {
    sim__host_name(t, h, a, sizeof a);
    fprintf(f, "<host id=\"%s\" speed=\"1f\"/>\n", a);
  }
  /* a split-duplex link is written as its two directions, <name>_UP and <name>_DOWN, each a
   * shared link of its own: what SPLITDUPLEX makes, except that SimGrid 3.32's link-load
   * plugin can track them (it crashes on the halves of a SPLITDUPLEX link) */
  for (int l = 0; l < t->nlinks; l++) {
    sim__link_name(t, l, a, sizeof a);
    double bw = sim__link_bw(t, l);
    if (sim__link_kind_of(t, l) == SIM__L_TOR) {
      fprintf(f, "<link id=\"%s\" bandwidth=\"%.6eBps\" latency=\"0s\"/>\n", a, bw);
      continue;
    }
    for (int d = 0; d < 2; d++)
      fprintf(f, "<link id=\"%s_%s\" bandwidth=\"%.6eBps\" latency=\"0s\"/>\n", a,
              d ? "DOWN" : "UP", bw);
  }
  sim__hop hops[SIM__MAXHOPS];
  for (size_t i = 0; i < pairs->cap; i++) {
    unsigned long long k = pairs->keys[i];
    if (k == ~0ull) continue;
    int s = (int)(k >> 32), d = (int)(k & 0xffffffffu);
    int n = sim__route(t, s, d, hops);
    if (n > SIM__MAXHOPS || n == 0) continue;
    sim__host_name(t, s, a, sizeof a);
    sim__host_name(t, d, b, sizeof b);
    fprintf(f, "<route src=\"%s\" dst=\"%s\" symmetrical=\"NO\">", a, b);
    for (int j = 0; j < n; j++) {
      sim__link_name(t, hops[j].link, a, sizeof a);
      if (sim__link_kind_of(t, hops[j].link) == SIM__L_TOR)
        fprintf(f, "<link_ctn id=\"%s\"/>", a);
      else
        fprintf(f, "<link_ctn id=\"%s_%s\"/>", a, hops[j].up ? "UP" : "DOWN");
    }
    fprintf(f, "</route>\n");
  }
  fprintf(f, "</zone>\n</platform>\n");
  return ferror(f) ? -1 : 0;
}
