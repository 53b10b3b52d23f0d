/* Defaults of cluster figures users rarely know, by GPU generation (NVLink) and NIC generation
 * (scale-out network), each with its public source. benchmarks/data/hardware.csv holds the
 * same rows ("default" category) and docs/specs.md the table. A spec that leaves out a latency
 * on a GPU or NIC without a row here is refused (the latencies never had a default); the
 * other figures keep their generic defaults there (no NVLS, no SHARP, radix 64). */
#include <stdio.h>
#include <string.h>

#include "spec_int.h"

#define NVL_LAT_SRC "NCCL src/graph/tuning.cc (NVIDIA/nccl 5067397) hwLatencies: NVLink Ring/LL 0.6 us, one figure for every GPU generation"
#define NET_LAT_SRC "NCCL src/graph/tuning.cc (NVIDIA/nccl 5067397) hwLatencies: network Ring/LL 2.7 us, one figure for every NIC"
#define NVLS_SRC                                                                              \
  "NCCL src/graph/tuning.cc nvlsEfficiency (0 for Volta and Ampere, 0.85 Hopper, 0.74 "       \
  "Blackwell): NVLink SHARP runs on Hopper and later NVSwitches; NVIDIA blog 'Upgrading "      \
  "Multi-GPU Interconnectivity with the Third-Generation NVIDIA NVSwitch'"

/* Ethernet switches reduce nothing. */
#define ETH_NO_SHARP                                                                          \
  "Ethernet switches have no SHARP (in-network reduction is an InfiniBand Quantum feature)"

/* Every InfiniBand generation here has SHARP in its switches, yet the default is off. */
#define SHARP_OFF                                                                             \
  "NCCL reduces in IB switches only through CollNet, which is off by default (NCCL "          \
  "src/init.cc: collnetEnable defaults to 0, NCCL_COLLNET_ENABLE) and needs a SHARP network " \
  "plugin; the cluster presets assume it off too"

/* One GPU generation: the GPU presets it covers and its NVLink figures. */
typedef struct gpu_gen {
  const char *gpus[3]; /* GPU names (presets, or an object of that name) */
  const char *what;    /* generation, as printed */
  double nvl_latency_us;
  int nvls;            /* NVLink SHARP in the NVSwitches */
} gpu_gen;

static const gpu_gen gpu_gens[] = {
    {{"v100-16g"}, "Volta V100, NVLink2 (hybrid cube mesh, or NVSwitch gen1 in DGX-2)", 0.6, 0},
    {{"a100-40g", "a100-80g"}, "Ampere A100, NVLink3, NVSwitch gen2", 0.6, 0},
    {{"h100-sxm"}, "Hopper H100, NVLink4, NVSwitch gen3", 0.6, 1},
    {{"h200"}, "Hopper H200, NVLink4, NVSwitch gen3", 0.6, 1},
    {{"b200"}, "Blackwell B200, NVLink5, NVSwitch gen4", 0.6, 1},
    {{"gb200"}, "Blackwell GB200, NVLink5, NVLink Switch trays", 0.6, 1},
};

/* One NIC generation: its speed and the switches it is commonly built with. */
typedef struct nic_gen {
  const char *name;     /* network.nic */
  const char *what;     /* as printed */
  double gbps;          /* Gbit/s per port */
  int inferable;        /* 1: the generation a bare nic_gbps of this speed means */
  double latency_us;
  int radix;
  int sharp;            /* SHARP used by default (never: see SHARP_OFF) */
  const char *radix_source;
  const char *sharp_source;
} nic_gen;

static const nic_gen nic_gens[SPEC_NNICS] = {
    [SPEC_NIC_HDR] = {"hdr", "InfiniBand HDR 200G, Quantum QM8700", 200, 1, 2.7, 40, 0,
                      "NVIDIA QM87xx 1U HDR 200Gb/s InfiniBand Switch Systems User Manual: 40 "
                      "ports of 200 Gb/s",
                      "Quantum HDR switches have SHARPv2, but " SHARP_OFF},
    [SPEC_NIC_NDR] = {"ndr", "InfiniBand NDR 400G, Quantum-2 QM9700", 400, 1, 2.7, 64, 0,
                      "NVIDIA QM97x0 user manual, Interfaces: 32 twin-port OSFP cages = 64 "
                      "ports of 400 Gb/s",
                      "Quantum-2 switches have SHARPv3, but " SHARP_OFF},
    [SPEC_NIC_XDR] = {"xdr", "InfiniBand XDR 800G, Quantum-X800 Q3400", 800, 1, 2.7, 144, 0,
                      "NVIDIA Quantum-X800 platform: Q3400-RA switch, 144 ports of 800 Gb/s",
                      "Quantum-X800 switches have SHARPv4, but " SHARP_OFF},
    [SPEC_NIC_ROCE400] = {"roce-400g", "RoCE 400GbE, Spectrum-4 SN5600", 400, 0, 2.7, 128, 0,
                          "NVIDIA Spectrum-4 SN5000 2U Switch Systems Hardware User Manual: "
                          "SN5600 64 ports of 800 GbE, each split into 2x 400 GbE",
                          ETH_NO_SHARP},
    [SPEC_NIC_EDR] = {"edr", "InfiniBand EDR 100G, Switch-IB 2 SB7800", 100, 1, 2.7, 36, 0,
                      "Mellanox SB7800 InfiniBand EDR 100Gb/s Switch System product brief: 36 "
                      "ports of 100 Gb/s",
                      "Switch-IB 2 switches have SHARP (v1), but " SHARP_OFF},
    [SPEC_NIC_OPA100] = {"opa-100", "Intel Omni-Path 100, Edge Switch 100 Series", 100, 0, 2.7,
                         48, 0,
                         "Intel Omni-Path Edge Switch 100 Series product brief: 24 or 48 ports "
                         "of 100 Gb/s (the 48-port 100SWE48)",
                         "Omni-Path switches reduce nothing for NCCL (no CollNet plugin for "
                         "them); NCCL reaches them through verbs or the OFI plugin"},
    [SPEC_NIC_ROCE100] = {"roce-100g", "RoCE 100GbE, Spectrum SN2700", 100, 0, 2.7, 32, 0,
                          "Mellanox SN2700 Open Ethernet Switch product brief: 32 ports of "
                          "100 GbE",
                          ETH_NO_SHARP},
    [SPEC_NIC_ROCE25] = {"roce-25g", "RoCE 25GbE, Spectrum SN2410", 25, 1, 2.7, 48, 0,
                         "Mellanox SN2410 Open Ethernet Switch product brief: 48 ports of "
                         "25 GbE (and 8 of 100 GbE for uplinks)",
                         ETH_NO_SHARP},
};

const char *const spec__nic_names[] = {"auto",    "hdr",       "ndr",      "xdr",
                                       "roce-400g", "edr",      "opa-100", "roce-100g",
                                       "roce-25g",  NULL};

const char *spec_nic_name(spec_nic k) {
  return (unsigned)k < SPEC_NNICS ? spec__nic_names[k] : "?";
}

static const gpu_gen *gpu_gen_of(const spec_gpu *g) {
  for (size_t i = 0; i < sizeof gpu_gens / sizeof gpu_gens[0]; i++)
    for (int k = 0; k < 3 && gpu_gens[i].gpus[k]; k++)
      if (strcmp(gpu_gens[i].gpus[k], g->name) == 0) return &gpu_gens[i];
  return NULL;
}

/* The NIC generation a network names or, when it names none, the one InfiniBand generation of
 * its speed; NULL when neither. *inferred is set when the speed decided. */
static const nic_gen *nic_gen_of(const spec_network *n, int *inferred) {
  *inferred = 0;
  if (n->nic > SPEC_NIC_AUTO && n->nic < SPEC_NNICS) return &nic_gens[n->nic];
  for (int k = SPEC_NIC_AUTO + 1; k < SPEC_NNICS; k++)
    if (nic_gens[k].inferable && nic_gens[k].gbps == n->nic_gbps) {
      *inferred = 1;
      return &nic_gens[k];
    }
  return NULL;
}

/* "hdr 200, ndr 400, ..." (with_speed) or "hdr, ndr, ...". */
static void nic_list(char *buf, size_t n, int with_speed) {
  buf[0] = '\0';
  for (int k = SPEC_NIC_AUTO + 1; k < SPEC_NNICS; k++) {
    size_t len = strlen(buf);
    if (with_speed)
      snprintf(buf + len, n - len, "%s%s %g", len ? ", " : "", nic_gens[k].name,
               nic_gens[k].gbps);
    else
      snprintf(buf + len, n - len, "%s%s", len ? ", " : "", nic_gens[k].name);
  }
}

static void gpu_list(char *buf, size_t n) {
  buf[0] = '\0';
  for (size_t i = 0; i < sizeof gpu_gens / sizeof gpu_gens[0]; i++)
    for (int k = 0; k < 3 && gpu_gens[i].gpus[k]; k++) {
      size_t len = strlen(buf);
      snprintf(buf + len, n - len, "%s%s", len ? ", " : "", gpu_gens[i].gpus[k]);
    }
}

int spec__cluster_fill_defaults(spec_cluster *c, unsigned missing, const char *o, pp_err *err) {
  spec_nvlink *nv = &c->nvlink;
  spec_network *net = &c->network;
  const gpu_gen *gg = gpu_gen_of(&c->gpu);
  if (missing & (1u << SPEC_DEF_NVL_LATENCY)) {
    if (!gg) {
      char names[256];
      gpu_list(names, sizeof names);
      return pp_err_set(err, PP_INPUT,
                        "%s: nvlink.latency_us: missing, and GPU '%s' has no listed default "
                        "(GPUs with defaults: %s)",
                        o, c->gpu.name, names);
    }
    nv->latency_us = gg->nvl_latency_us;
  }
  if ((missing & (1u << SPEC_DEF_NVL_INR)) && gg) nv->in_network_reduce = gg->nvls;
  if (net->kind == SPEC_NET_FAT_TREE) {
    if (missing & (1u << SPEC_DEF_NET_NIC_GBPS)) {
      if (net->nic == SPEC_NIC_AUTO) {
        char names[256];
        nic_list(names, sizeof names, 0);
        return pp_err_set(err, PP_INPUT,
                          "%s: network.nic_gbps: missing (give it, or network.nic: one of %s)", o,
                          names);
      }
      net->nic_gbps = nic_gens[net->nic].gbps;
    } else if (net->nic != SPEC_NIC_AUTO && net->nic_gbps != nic_gens[net->nic].gbps) {
      return pp_err_set(err, PP_INPUT,
                        "%s: network.nic_gbps: %g Gbit/s, but network.nic %s runs at %g", o,
                        net->nic_gbps, nic_gens[net->nic].name, nic_gens[net->nic].gbps);
    }
    int inferred;
    const nic_gen *ng = nic_gen_of(net, &inferred);
    if (missing & (1u << SPEC_DEF_NET_LATENCY)) {
      if (!ng) {
        char names[256];
        nic_list(names, sizeof names, 1);
        return pp_err_set(err, PP_INPUT,
                          "%s: network.latency_us: missing, and %g Gbit/s NICs have no listed "
                          "default (NICs with defaults, Gbit/s: %s; name one in network.nic or "
                          "give the latency)",
                          o, net->nic_gbps, names);
      }
      net->latency_us = ng->latency_us;
    }
    if ((missing & (1u << SPEC_DEF_NET_RADIX)) && ng) net->switch_radix = ng->radix;
    if ((missing & (1u << SPEC_DEF_NET_INR)) && ng) net->in_network_reduce = ng->sharp;
  } else if (net->kind == SPEC_NET_TORUS && (missing & (1u << SPEC_DEF_NET_LATENCY))) {
    return pp_err_set(err, PP_INPUT, "%s: network.latency_us: missing (a torus has no listed "
                      "default)", o);
  }
  c->defaulted = missing;
  return PP_OK;
}

/* Value, origin and source of one defaulted figure. */
static void describe(const spec_cluster *c, spec_def d, spec_default_info *i) {
  static const char *const fields[SPEC_NDEFS] = {
      [SPEC_DEF_NVL_LATENCY] = "nvlink.latency_us",
      [SPEC_DEF_NVL_INR] = "nvlink.in_network_reduce",
      [SPEC_DEF_NVL_TAPER] = "nvlink.taper",
      [SPEC_DEF_NET_NIC_GBPS] = "network.nic_gbps",
      [SPEC_DEF_NET_LATENCY] = "network.latency_us",
      [SPEC_DEF_NET_RADIX] = "network.switch_radix",
      [SPEC_DEF_NET_INR] = "network.in_network_reduce",
      [SPEC_DEF_NET_OVERSUB] = "network.oversubscription",
      [SPEC_DEF_NET_RAIL] = "network.rail_optimized"};
  const gpu_gen *gg = gpu_gen_of(&c->gpu);
  int inferred = 0;
  const nic_gen *ng = c->network.kind == SPEC_NET_FAT_TREE ? nic_gen_of(&c->network, &inferred)
                                                           : NULL;
  memset(i, 0, sizeof *i);
  i->field = fields[d];
  i->from = "assumed";
  switch (d) {
  case SPEC_DEF_NVL_LATENCY:
    i->value = c->nvlink.latency_us, i->source = NVL_LAT_SRC;
    if (gg) i->from = gg->what;
    break;
  case SPEC_DEF_NVL_INR:
    i->value = c->nvlink.in_network_reduce;
    i->source = gg ? NVLS_SRC : "no GPU generation listed: no NVLS assumed";
    if (gg) i->from = gg->what;
    break;
  case SPEC_DEF_NVL_TAPER:
    i->value = c->nvlink.taper, i->source = "no taper above the node unless the spec says";
    break;
  case SPEC_DEF_NET_NIC_GBPS:
    i->value = c->network.nic_gbps, i->source = "the port speed of network.nic";
    if (ng) i->from = ng->what;
    break;
  case SPEC_DEF_NET_LATENCY:
    i->value = c->network.latency_us, i->source = NET_LAT_SRC;
    if (ng) i->from = ng->what;
    break;
  case SPEC_DEF_NET_RADIX:
    i->value = c->network.switch_radix;
    i->source = ng ? ng->radix_source : "no NIC generation listed: 64-port switches assumed";
    if (ng) i->from = ng->what;
    break;
  case SPEC_DEF_NET_INR:
    i->value = c->network.in_network_reduce;
    i->source = ng ? ng->sharp_source : "no NIC generation listed: no SHARP assumed";
    if (ng) i->from = ng->what;
    break;
  case SPEC_DEF_NET_OVERSUB:
    i->value = c->network.oversubscription, i->source = "a non-blocking fat tree unless the spec says";
    break;
  case SPEC_DEF_NET_RAIL:
    i->value = c->network.rail_optimized, i->source = "a plain (not rail-optimized) fat tree unless the spec says";
    break;
  case SPEC_NDEFS: break;
  }
  i->boolean = d == SPEC_DEF_NVL_INR || d == SPEC_DEF_NET_INR || d == SPEC_DEF_NET_RAIL;
  i->integer = d == SPEC_DEF_NET_RADIX;
  /* the NIC generation decided these figures */
  i->inferred = ng && inferred && (d == SPEC_DEF_NET_LATENCY || d == SPEC_DEF_NET_RADIX ||
                                   d == SPEC_DEF_NET_INR);
}

int spec_cluster_defaults(const spec_cluster *c, spec_default_info *out, int n) {
  int k = 0;
  for (int d = 0; d < SPEC_NDEFS; d++) {
    if (!(c->defaulted & (1u << d))) continue;
    if (k < n) describe(c, (spec_def)d, &out[k]);
    k++;
  }
  return k;
}
