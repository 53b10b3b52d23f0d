/* GPU and cluster specs: JSON field tables, fabric-size validation, torus shapes. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec_int.h"

/* ---- GPU -------------------------------------------------------------------------------- */

static const char *const device_names[] = {"gpu", "cpu", NULL};
#define G(name, lo, hi, open, req, unit) \
  {#name, SPEC__DBL, offsetof(spec_gpu, name), lo, hi, open, req, 0, NULL, 0, unit}
static const spec__field gpu_fields[] = {
    {"name", SPEC__STR, offsetof(spec_gpu, name), 0, 0, 0, 1, 0, NULL, 0, NULL},
    G(bf16_tflops, 0, 1e6, 1, 1, "TFLOP/s"),
    G(fp8_tflops, 0, 1e6, 0, 0, "TFLOP/s"),
    G(hbm_gib, 0, 1e5, 1, 1, "GiB"),
    G(hbm_tbps, 0, 1e3, 1, 1, "TB/s"),
    {"sms", SPEC__INT, offsetof(spec_gpu, sms), 0, 4096, 0, 0, 0, NULL, 0, NULL},
    {"device", SPEC__ENUM, offsetof(spec_gpu, cpu), 0, 0, 0, 0, 0, device_names, 0, NULL},
};
#undef G
#define NGPU (sizeof gpu_fields / sizeof gpu_fields[0])

static int gpu_check(const spec_gpu *g, const char *o, const char *path, pp_err *err) {
  char f[80];
  snprintf(f, sizeof f, "%sname", path);
  if (spec__check_name(g->name, strlen(g->name), o, f, err)) return err->code;
  for (size_t i = 1; i < NGPU; i++) {
    if (gpu_fields[i].kind == SPEC__ENUM) continue;
    const char *p = (const char *)g + gpu_fields[i].off;
    double v = gpu_fields[i].kind == SPEC__DBL ? *(const double *)p : *(const int *)p;
    if (spec__check_range(&gpu_fields[i], v, o, path, err)) return err->code;
  }
  return PP_OK;
}

int spec_gpu_validate(const spec_gpu *g, pp_err *err) {
  char o[SPEC_NAME_MAX + 8];
  snprintf(o, sizeof o, "gpu %s", g->name);
  return gpu_check(g, o, "", err);
}

int spec__gpu_from_json(const json_t *j, const char *origin, const char *path, spec_gpu *out,
                        pp_err *err) {
  if (json_is_string(j)) {
    const spec_gpu *p = spec__gpu_preset_find(json_string_value(j));
    if (!p) {
      char names[512];
      spec__preset_names(names, sizeof names, 1);
      return pp_err_set(err, PP_INPUT, "%s: %s: unknown GPU '%.64s' (presets: %s; or an object)",
                        origin, path, json_string_value(j), names);
    }
    *out = *p;
    return PP_OK;
  }
  char sub[80];
  snprintf(sub, sizeof sub, "%s.", path);
  spec_gpu g;
  memset(&g, 0, sizeof g);
  if (spec__read(j, gpu_fields, NGPU, &g, 0, origin, *path ? sub : "", NULL, err))
    return err->code;
  if (gpu_check(&g, origin, *path ? sub : "", err)) return err->code;
  *out = g;
  return PP_OK;
}

void spec__gpu_emit(json_t *obj, const spec_gpu *g) {
  spec__emit(obj, gpu_fields, NGPU, g, 0);
  if (!g->cpu) json_object_del(obj, "device"); /* GPUs' JSON (and hashes) as before */
}

char *spec_gpu_json(const spec_gpu *g) {
  json_t *o = json_object();
  spec__gpu_emit(o, g);
  char *s = spec__dump(o);
  json_decref(o);
  return s;
}

int spec_gpu_load(const char *arg, spec_gpu *out, pp_err *err) {
  const spec_gpu *p = spec__gpu_preset_find(arg);
  if (p) {
    *out = *p;
    return PP_OK;
  }
  if (!spec__looks_like_file(arg)) {
    char names[512];
    spec__preset_names(names, sizeof names, 1);
    return pp_err_set(err, PP_NOTFOUND, "gpu: unknown preset '%.64s' (presets: %s; or a JSON file)",
                      arg, names);
  }
  json_t *j = NULL;
  const char *origin;
  if (spec__load_json(arg, "GPU", &j, &origin, err)) return err->code;
  int rc = spec__gpu_from_json(j, origin, "", out, err);
  json_decref(j);
  return rc;
}

/* ---- cluster tables ------------------------------------------------------------------------ */

enum { NV_MULTI = 1 };                    /* nvlink variants: fields used when domain_gpus > 1 */
enum { NET_FT = 1 << SPEC_NET_FAT_TREE, NET_TORUS = 1 << SPEC_NET_TORUS };

#define NV(name, kind, lo, hi, open, req, def, mask, unit) \
  {#name, kind, offsetof(spec_nvlink, name), lo, hi, open, req, def, NULL, mask, unit}
/* JSON domain_gpus is read into domain_gpus and domain_gpus_used into partition_gpus;
 * partition_resolve() then makes domain_gpus the partition the job uses. */
enum { NVF_DOMAIN, NVF_USED, NVF_GBPS, NVF_LATENCY, NVF_TAPER, NVF_INR };
static const spec__field nvlink_fields[] = {
    [NVF_DOMAIN] = NV(domain_gpus, SPEC__INT, 1, SPEC_MAX_GPUS, 0, 1, 1, 0, "GPUs"),
    [NVF_USED] = {"domain_gpus_used", SPEC__INT, offsetof(spec_nvlink, partition_gpus), 1,
                  SPEC_MAX_GPUS, 0, 0, 0, NULL, NV_MULTI, "GPUs"},
    [NVF_GBPS] = NV(gbps_per_gpu, SPEC__DBL, 0, 1e5, 1, 1, 0, NV_MULTI, "GB/s"),
    [NVF_LATENCY] = NV(latency_us, SPEC__DBL, 0, 1e6, 0, 0, 0, NV_MULTI, "us"),
    [NVF_TAPER] = NV(taper, SPEC__DBL, 1, 1000, 0, 0, 1, NV_MULTI, NULL),
    [NVF_INR] = NV(in_network_reduce, SPEC__BOOL, 0, 1, 0, 0, 0, NV_MULTI, NULL),
};
#undef NV
#define NNV (sizeof nvlink_fields / sizeof nvlink_fields[0])

#define NET(name, kind, lo, hi, open, req, def, names, mask, unit) \
  {#name, kind, offsetof(spec_network, name), lo, hi, open, req, def, names, mask, unit}
enum {
  NETF_KIND, NETF_NIC, NETF_RAIL, NETF_NIC_GBPS, NETF_NICS, NETF_OVERSUB, NETF_RADIX, NETF_INR,
  NETF_DIMS, NETF_LINK, NETF_WRAP, NETF_LATENCY
};
static const spec__field net_fields[] = {
    [NETF_KIND] = NET(kind, SPEC__ENUM, 0, 0, 0, 1, 0, spec__net_names, 0, NULL),
    [NETF_NIC] = NET(nic, SPEC__ENUM, 0, 0, 0, 0, 0, spec__nic_names, NET_FT, NULL),
    [NETF_RAIL] = NET(rail_optimized, SPEC__BOOL, 0, 1, 0, 0, 0, NULL, NET_FT, NULL),
    [NETF_NIC_GBPS] = NET(nic_gbps, SPEC__DBL, 0, 1e6, 1, 0, 0, NULL, NET_FT, "Gbit/s"),
    [NETF_NICS] = NET(nics_per_node, SPEC__INT, 1, 1024, 0, 1, 0, NULL, NET_FT, NULL),
    [NETF_OVERSUB] = NET(oversubscription, SPEC__DBL, 1, 1000, 0, 0, 1, NULL, NET_FT, NULL),
    [NETF_RADIX] = NET(switch_radix, SPEC__INT, 4, 65536, 0, 0, 64, NULL, NET_FT, "ports"),
    [NETF_INR] = NET(in_network_reduce, SPEC__BOOL, 0, 1, 0, 0, 0, NULL, NET_FT, NULL),
    [NETF_DIMS] = NET(dims, SPEC__INT3, 1, SPEC_MAX_GPUS, 0, 0, 0, NULL, NET_TORUS, NULL),
    [NETF_LINK] = NET(link_gbps, SPEC__DBL, 0, 1e5, 1, 1, 0, NULL, NET_TORUS, "GB/s"),
    [NETF_WRAP] = NET(wraparound, SPEC__BOOL, 0, 1, 0, 0, 1, NULL, NET_TORUS, NULL),
    [NETF_LATENCY] = NET(latency_us, SPEC__DBL, 0, 1e6, 0, 0, 0, NULL, NET_FT | NET_TORUS, "us"),
};
#undef NET
#define NNET (sizeof net_fields / sizeof net_fields[0])

#define CL(name, kind, lo, hi, req) \
  {#name, kind, offsetof(spec_cluster, name), lo, hi, 0, req, 0, NULL, 0, NULL}
static const spec__field cluster_fields[] = {
    CL(name, SPEC__STR, 0, 0, 1),
    CL(gpu, SPEC__SKIP, 0, 0, 1),
    CL(gpus, SPEC__INT, 1, SPEC_MAX_GPUS, 0),
    CL(gpus_per_node, SPEC__INT, 1, 1024, 1),
    CL(nvlink, SPEC__SKIP, 0, 0, 0),
    CL(network, SPEC__SKIP, 0, 0, 0),
};
#undef CL
#define NCL (sizeof cluster_fields / sizeof cluster_fields[0])

/* ---- torus shapes ------------------------------------------------------------------------------ */

/* TPU-v4-style slices: 1..32 chips as powers of two, else whole 4x4x4 cubes (every dimension a
 * multiple of 4). Picks the most cubic shape (smallest largest dimension), ascending. */
static int torus_shape(int n, int dims[3]) {
  if (n < 64) {
    if (n & (n - 1)) return -1;
    int d[3] = {1, 1, 1}, k = 0;
    for (int m = n; m > 1; m /= 2) d[2 - (k++ % 3)] *= 2;
    int t;
    if (d[0] > d[1]) t = d[0], d[0] = d[1], d[1] = t;
    if (d[1] > d[2]) t = d[1], d[1] = d[2], d[2] = t;
    if (d[0] > d[1]) t = d[0], d[0] = d[1], d[1] = t;
    memcpy(dims, d, sizeof d);
    return 0;
  }
  if (n % 64) return -1;
  int best = -1;
  for (int a = 4; (long)a * a * a <= n; a += 4) {
    if (n % a) continue;
    for (int b = a; (long)a * b * b <= n; b += 4) {
      if ((n / a) % b) continue;
      int c = n / a / b;
      if (c % 4 || c < b) continue;
      if (best < 0 || c < best) best = c, dims[0] = a, dims[1] = b, dims[2] = c;
    }
  }
  return best < 0 ? -1 : 0;
}

/* ---- validation ---------------------------------------------------------------------------- */

int spec_cluster_nodes(const spec_cluster *c) {
  return (c->gpus + c->gpus_per_node - 1) / c->gpus_per_node;
}

int spec_cluster_domains(const spec_cluster *c) {
  return (c->gpus + c->nvlink.domain_gpus - 1) / c->nvlink.domain_gpus;
}

int spec_cluster_domain_hw(const spec_cluster *c) {
  return c->nvlink.domain_gpus_hw ? c->nvlink.domain_gpus_hw : c->nvlink.domain_gpus;
}

/* The partition a job of g GPUs uses when the spec names none: the whole domain when the job
 * fits in one or fills whole domains, else the largest multiple of the node size no larger
 * than the domain that divides g (GB200 NVL72: 128, 256, 512 GPUs -> 64 per domain). */
static int partition_auto(int phys, int g, int gpn) {
  if (phys <= gpn || g <= phys || g % phys == 0) return phys;
  for (int p = phys - phys % gpn; p >= gpn; p -= gpn)
    if (g % p == 0) return p;
  return phys; /* g is not whole nodes: cluster_check says so */
}

/* Makes nvlink.domain_gpus the partition the job uses (the one asked for, or partition_auto)
 * and domain_gpus_hw the physical domain when they differ. */
static void partition_resolve(spec_cluster *c) {
  spec_nvlink *nv = &c->nvlink;
  int phys = spec_cluster_domain_hw(c);
  if (phys <= 1) return;
  int part = nv->partition_gpus ? nv->partition_gpus : partition_auto(phys, c->gpus, c->gpus_per_node);
  nv->domain_gpus = part;
  nv->domain_gpus_hw = part != phys ? phys : 0;
}

/* A partition is whole nodes of one domain. */
static int partition_check(const spec_cluster *c, const char *o, pp_err *err) {
  const spec_nvlink *nv = &c->nvlink;
  int part = nv->domain_gpus, phys = nv->domain_gpus_hw, gpn = c->gpus_per_node;
  if (part > phys)
    return pp_err_set(err, PP_INPUT,
                      "%s: nvlink.domain_gpus_used: %d is more than the %d GPUs of the NVLink "
                      "domain",
                      o, part, phys);
  if (part % gpn)
    return pp_err_set(err, PP_INPUT,
                      "%s: nvlink.domain_gpus_used: %d does not split the %d-GPU domain into "
                      "whole nodes of %d GPUs",
                      o, part, phys, gpn);
  return PP_OK;
}

int spec_cluster_partition_text(const spec_cluster *c, char *buf, size_t n) {
  const spec_nvlink *nv = &c->nvlink;
  if (!nv->domain_gpus_hw) return 0;
  if (nv->partition_gpus)
    snprintf(buf, n, "%d of the %d GPUs of each NVLink domain (%d partition%s; given by "
             "nvlink.domain_gpus_used)",
             nv->domain_gpus, nv->domain_gpus_hw, spec_cluster_domains(c),
             spec_cluster_domains(c) == 1 ? "" : "s");
  else
    snprintf(buf, n, "%d of the %d GPUs of each NVLink domain (%d partitions; derived: the "
             "largest multiple of %d GPUs per node up to %d that divides %d GPUs)",
             nv->domain_gpus, nv->domain_gpus_hw, spec_cluster_domains(c), c->gpus_per_node,
             nv->domain_gpus_hw, c->gpus);
  return 1;
}

static int cluster_check(const spec_cluster *c, const char *o, pp_err *err) {
  const spec_nvlink *nv = &c->nvlink;
  const spec_network *net = &c->network;
  if (spec__check_name(c->name, strlen(c->name), o, "name", err)) return err->code;
  if (gpu_check(&c->gpu, o, "gpu.", err)) return err->code;
  for (size_t i = 2; i < 4; i++)
    if (spec__check_range(&cluster_fields[i], *(const int *)((const char *)c + cluster_fields[i].off),
                          o, "", err))
      return err->code;
  unsigned nvv = nv->domain_gpus > 1 ? NV_MULTI : 0;
  for (size_t i = 0; i < NNV; i++) {
    const spec__field *f = &nvlink_fields[i];
    if ((f->mask && !(f->mask & nvv)) || i == NVF_USED) continue;
    const char *p = (const char *)nv + f->off;
    double v = f->kind == SPEC__DBL ? *(const double *)p : *(const int *)p;
    if (spec__check_range(f, v, o, "nvlink.", err)) return err->code;
  }
  if ((unsigned)net->kind > SPEC_NET_TORUS)
    return pp_err_set(err, PP_INPUT, "%s: network.kind: out of range", o);
  if ((unsigned)net->nic >= SPEC_NNICS)
    return pp_err_set(err, PP_INPUT, "%s: network.nic: out of range", o);
  unsigned netv = 1u << net->kind;
  for (size_t i = 1; i < NNET; i++) {
    const spec__field *f = &net_fields[i];
    if (!(f->mask & netv) || f->kind == SPEC__INT3 || f->kind == SPEC__ENUM) continue;
    const char *p = (const char *)net + f->off;
    double v = f->kind == SPEC__DBL ? *(const double *)p : *(const int *)p;
    if (spec__check_range(f, v, o, "network.", err)) return err->code;
  }

  int g = c->gpus, gpn = c->gpus_per_node, dom = nv->domain_gpus;
  if (nv->domain_gpus_hw) {
    if (partition_check(c, o, err)) return err->code;
  } else if (dom > 1 && dom % gpn && gpn % dom) {
    return pp_err_set(err, PP_INPUT,
                      "%s: nvlink.domain_gpus: %d is neither a divisor nor a multiple of "
                      "gpus_per_node %d",
                      o, dom, gpn);
  }
  if (g < gpn) {
    if (gpn % g)
      return pp_err_set(err, PP_INPUT,
                        "%s: gpus: %d GPUs fill part of one node; they must divide gpus_per_node %d",
                        o, g, gpn);
  } else if (g % gpn) {
    return pp_err_set(err, PP_INPUT, "%s: gpus: %d is not a multiple of gpus_per_node %d", o, g,
                      gpn);
  }
  if (dom > gpn && g > dom && g % dom)
    return pp_err_set(err, PP_INPUT,
                      "%s: %s: %d GPUs exceed one NVLink domain%s of %d; beyond one the count "
                      "must be a multiple of %d (whole %ss joined by the network)",
                      o, nv->domain_gpus_hw ? "nvlink.domain_gpus_used" : "gpus", g,
                      nv->domain_gpus_hw ? " partition" : "", dom, dom,
                      nv->domain_gpus_hw ? "partition" : "domain");
  int domains = spec_cluster_domains(c);
  if (net->kind == SPEC_NET_NONE && domains > 1)
    return pp_err_set(err, PP_INPUT,
                      "%s: network: kind none, but %d GPUs span %d NVLink domains of %d; a network "
                      "must join them",
                      o, g, domains, dom);
  if (net->kind == SPEC_NET_FAT_TREE) {
    if (net->rail_optimized && gpn % net->nics_per_node && net->nics_per_node % gpn)
      return pp_err_set(err, PP_INPUT,
                        "%s: network.nics_per_node: a rail-optimized fabric needs NICs and GPUs "
                        "per node to divide one another, got %d NICs for %d GPUs",
                        o, net->nics_per_node, gpn);
    long long nics = (long long)spec_cluster_nodes(c) * net->nics_per_node;
    long long ends = net->rail_optimized ? spec_cluster_nodes(c) : nics;
    long long k = net->switch_radix, cap = k * k * k / 4;
    if (ends > cap)
      return pp_err_set(err, PP_INPUT,
                        "%s: network.switch_radix: a 3-tier fat tree of radix-%lld switches "
                        "connects at most %lld NICs%s; this cluster needs %lld",
                        o, k, cap, net->rail_optimized ? " per rail" : "", ends);
  }
  if (net->kind == SPEC_NET_TORUS) {
    long long prod = (long long)net->dims[0] * net->dims[1] * net->dims[2];
    if (prod != g)
      return pp_err_set(err, PP_INPUT, "%s: network.dims: %dx%dx%d = %lld chips, but gpus is %d",
                        o, net->dims[0], net->dims[1], net->dims[2], prod, g);
  }
  return PP_OK;
}

int spec_cluster_validate(const spec_cluster *c, pp_err *err) {
  char o[SPEC_NAME_MAX + 10];
  snprintf(o, sizeof o, "cluster %s", c->name);
  return cluster_check(c, o, err);
}

static int cluster_size(spec_cluster *c, int gpus, const char *o, pp_err *err) {
  if (gpus < 1 || gpus > SPEC_MAX_GPUS)
    return pp_err_set(err, PP_INPUT, "%s: gpus: must be 1..%d, got %d", o, SPEC_MAX_GPUS, gpus);
  c->gpus = gpus;
  partition_resolve(c);
  if (c->network.kind == SPEC_NET_TORUS && torus_shape(gpus, c->network.dims))
    return pp_err_set(err, PP_INPUT,
                      "%s: gpus: %d chips form no torus slice (1..32 as a power of two, or "
                      "whole 4x4x4 cubes: a multiple of 64)",
                      o, gpus);
  return cluster_check(c, o, err);
}

int spec_cluster_resize(spec_cluster *c, int gpus, pp_err *err) {
  return cluster_size(c, gpus, c->name, err);
}

/* The figures a spec left out that have defaults (spec_def bits), from the fields of the
 * nvlink and network objects it gave (bit per field). */
static unsigned missing_figures(const spec_cluster *c, uint32_t nv_seen, uint32_t net_seen) {
  static const struct {
    int nvlink;      /* 1: an nvlink field, 0: a network field */
    int field;       /* its index in the table */
    spec_def def;
    unsigned applies; /* network kinds it applies to (nvlink: multi-GPU domains) */
  } figs[] = {
      {1, NVF_LATENCY, SPEC_DEF_NVL_LATENCY, 0},  {1, NVF_INR, SPEC_DEF_NVL_INR, 0},
      {1, NVF_TAPER, SPEC_DEF_NVL_TAPER, 0},
      {0, NETF_NIC_GBPS, SPEC_DEF_NET_NIC_GBPS, NET_FT},
      {0, NETF_LATENCY, SPEC_DEF_NET_LATENCY, NET_FT | NET_TORUS},
      {0, NETF_RADIX, SPEC_DEF_NET_RADIX, NET_FT}, {0, NETF_INR, SPEC_DEF_NET_INR, NET_FT},
      {0, NETF_OVERSUB, SPEC_DEF_NET_OVERSUB, NET_FT}, {0, NETF_RAIL, SPEC_DEF_NET_RAIL, NET_FT},
  };
  unsigned missing = 0, kind = 1u << c->network.kind;
  for (size_t i = 0; i < sizeof figs / sizeof figs[0]; i++) {
    if (figs[i].nvlink ? c->nvlink.domain_gpus <= 1 : !(figs[i].applies & kind)) continue;
    /* the taper only applies to a domain larger than a node */
    if (figs[i].def == SPEC_DEF_NVL_TAPER && c->nvlink.domain_gpus <= c->gpus_per_node) continue;
    if (!((figs[i].nvlink ? nv_seen : net_seen) & (1u << figs[i].field)))
      missing |= 1u << figs[i].def;
  }
  return missing;
}

static int cluster_from_json(const json_t *j, const char *o, int gpus, spec_cluster *out,
                             pp_err *err) {
  spec_cluster c;
  memset(&c, 0, sizeof c);
  uint32_t seen = 0, nv_seen = 0, net_seen = 0;
  if (spec__read(j, cluster_fields, NCL, &c, 0, o, "", &seen, err)) return err->code;
  if (spec__gpu_from_json(spec__get(j, "gpu"), o, "gpu", &c.gpu, err)) return err->code;

  const json_t *nv = spec__get(j, "nvlink");
  c.nvlink.domain_gpus = 1;
  if (nv) {
    const json_t *d = spec__get(nv, "domain_gpus");
    if (json_is_object(nv) && !d)
      return pp_err_set(err, PP_INPUT, "%s: nvlink.domain_gpus: missing", o);
    if (d && !json_is_integer(d))
      return pp_err_set(err, PP_INPUT, "%s: nvlink.domain_gpus: must be an integer", o);
    unsigned var = json_is_integer(d) && json_integer_value(d) > 1 ? NV_MULTI : 0;
    if (spec__read(nv, nvlink_fields, NNV, &c.nvlink, var, o, "nvlink.", &nv_seen, err))
      return err->code;
  }
  const json_t *net = spec__get(j, "network");
  c.network.kind = SPEC_NET_NONE;
  if (net) {
    const json_t *k = spec__get(net, "kind");
    unsigned var = 0;
    for (int i = 0; json_is_string(k) && spec__net_names[i]; i++)
      if (strcmp(json_string_value(k), spec__net_names[i]) == 0) var = 1u << i;
    if (json_is_object(net) && !k)
      return pp_err_set(err, PP_INPUT, "%s: network.kind: missing", o);
    if (json_is_object(net) && !var)
      return pp_err_set(err, PP_INPUT, "%s: network.kind: must be one of none, fat-tree, torus",
                        o);
    if (spec__read(net, net_fields, NNET, &c.network, var, o, "network.", &net_seen, err))
      return err->code;
  }
  if (gpus <= 0 && !(seen & (1u << 2)))
    return pp_err_set(err, PP_INPUT, "%s: gpus: missing (give it in the spec or with --gpus)", o);
  if (spec__cluster_fill_defaults(&c, missing_figures(&c, nv_seen, net_seen), o, err))
    return err->code;
  if (gpus > 0 || (c.network.kind == SPEC_NET_TORUS && !c.network.dims[0])) {
    if (cluster_size(&c, gpus > 0 ? gpus : c.gpus, o, err)) return err->code;
  } else {
    partition_resolve(&c);
    if (cluster_check(&c, o, err)) return err->code;
  }
  *out = c;
  return PP_OK;
}

int spec_cluster_parse(const char *text, size_t len, const char *origin, int gpus,
                       spec_cluster *out, pp_err *err) {
  json_t *j = NULL;
  if (spec__parse_json(text, len, origin, &j, err)) return err->code;
  int rc = cluster_from_json(j, origin, gpus, out, err);
  json_decref(j);
  return rc;
}

int spec_cluster_load(const char *arg, int gpus, spec_cluster *out, pp_err *err) {
  const spec_cluster *p = spec__cluster_preset_find(arg);
  if (p) {
    spec_cluster c = *p;
    if (gpus > 0 && cluster_size(&c, gpus, c.name, err)) return err->code;
    *out = c;
    return PP_OK;
  }
  if (!spec__looks_like_file(arg)) {
    char names[512];
    spec__preset_names(names, sizeof names, 2);
    return pp_err_set(err, PP_NOTFOUND,
                      "cluster: unknown preset '%.64s' (presets: %s; or a JSON file)", arg, names);
  }
  json_t *j = NULL;
  const char *origin;
  if (spec__load_json(arg, "cluster", &j, &origin, err)) return err->code;
  int rc = cluster_from_json(j, origin, gpus, out, err);
  json_decref(j);
  return rc;
}

char *spec_cluster_json(const spec_cluster *c) {
  json_t *o = json_object(), *g = json_object(), *nv = json_object(), *net = json_object();
  spec__emit(o, cluster_fields, NCL, c, 0);
  spec__gpu_emit(g, &c->gpu);
  json_object_set_new(o, "gpu", g);
  /* JSON domain_gpus is the physical domain, domain_gpus_used the partition (when one) */
  spec_nvlink v = c->nvlink;
  v.domain_gpus = spec_cluster_domain_hw(c);
  v.partition_gpus = c->nvlink.domain_gpus_hw ? c->nvlink.domain_gpus : 0;
  spec__emit(nv, nvlink_fields, NNV, &v, v.domain_gpus > 1 ? NV_MULTI : 0);
  if (!v.partition_gpus) json_object_del(nv, "domain_gpus_used");
  json_object_set_new(o, "nvlink", nv);
  spec__emit(net, net_fields, NNET, &c->network, 1u << c->network.kind);
  if (c->network.nic == SPEC_NIC_AUTO) json_object_del(net, "nic");
  json_object_set_new(o, "network", net);
  char *s = spec__dump(o);
  json_decref(o);
  return s;
}

int spec_pair_validate(const spec_model *m, const spec_cluster *c, pp_err *err) {
  if (m->dtype == SPEC_DTYPE_FP8 && c->gpu.fp8_tflops <= 0)
    return pp_err_set(err, PP_INPUT, "model %s: dtype: fp8 needs fp8 tensor cores, which %s lacks",
                      m->name, c->gpu.name);
  return PP_OK;
}
