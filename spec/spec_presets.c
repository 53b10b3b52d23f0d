/* Built-in presets: models, GPUs and clusters, each row with the source of its figures.
 * Hardware figures come from benchmarks/data/hardware.csv (copied where noted); latencies are
 * NCCL's per-hop figures (nccl src/graph/tuning.cc, LL protocol: NVLink 0.6 us, network
 * 2.7 us) unless a row says otherwise. Calibration replaces efficiencies and latencies later;
 * these are the published starting points. */
#include <stdio.h>
#include <string.h>

#include "spec_int.h"

/* ---- models --------------------------------------------------------------------------------
 * name, layers, hidden, heads, kv_heads, ffn_hidden, ffn, seq_len, vocab, experts, top_k,
 * dtype, tied_embeddings */
#define GELU SPEC_FFN_GELU
#define SWIGLU SPEC_FFN_SWIGLU
#define RELU SPEC_FFN_RELU
#define BF16 SPEC_DTYPE_BF16
#define FP16 SPEC_DTYPE_FP16

static const struct {
  spec_model m;
  const char *source;
} models[] = {
    /* GPT-3 shapes as Megatron-LM and Alpa run them: Brown et al. 2020 Table 2.1 (layers,
     * width, context 2048), heads as in Alpa's benchmark suite (suite_manual_gpt.py) and
     * Megatron's examples; vocab 50257 padded to 51200 as Megatron does for GPT-2 BPE. */
    {{"gpt3-1.3b", 24, 2048, 32, 32, 8192, GELU, 2048, 51200, 0, 0, BF16, 1},
     "GPT-3 XL: Brown et al. 2020 Table 2.1; 32 heads as Alpa suite_manual_gpt.py"},
    {{"gpt3-2.6b", 32, 2560, 32, 32, 10240, GELU, 2048, 51200, 0, 0, BF16, 1},
     "GPT-3 2.7B: Brown et al. 2020 Table 2.1; Alpa's 2.6B shape"},
    {{"gpt3-6.7b", 32, 4096, 32, 32, 16384, GELU, 2048, 51200, 0, 0, BF16, 1},
     "GPT-3 6.7B: Brown et al. 2020 Table 2.1"},
    {{"gpt3-13b", 40, 5120, 40, 40, 20480, GELU, 2048, 51200, 0, 0, BF16, 1},
     "GPT-3 13B: Brown et al. 2020 Table 2.1 (width 5140 rounded to 5120 as Megatron runs it)"},
    {{"gpt3-39b", 48, 8192, 64, 64, 32768, GELU, 2048, 51200, 0, 0, BF16, 1},
     "GPT 39.1B: Narayanan et al. SC'21 Table 1 and Alpa's 39B benchmark shape"},
    {{"gpt3-175b", 96, 12288, 96, 96, 49152, GELU, 2048, 51200, 0, 0, BF16, 1},
     "GPT-3 175B: Brown et al. 2020 Table 2.1; Narayanan et al. SC'21 (174.6B)"},
    {{"opt-175b", 96, 12288, 96, 96, 49152, RELU, 2048, 50272, 0, 0, BF16, 1},
     "OPT-175B: Zhang et al. 2022 Table 1 (ReLU MLP, vocab 50272, tied embeddings)"},
    {{"megatron-1t", 128, 25600, 160, 160, 102400, GELU, 2048, 51200, 0, 0, BF16, 1},
     "GPT 1T: Narayanan et al. SC'21 Table 1"},
    {{"llama3-8b", 32, 4096, 32, 8, 14336, SWIGLU, 8192, 128256, 0, 0, BF16, 0},
     "Llama 3 8B: Llama Team 2024 'The Llama 3 Herd of Models' Table 3; HF config (vocab 128256)"},
    {{"llama3-70b", 80, 8192, 64, 8, 28672, SWIGLU, 8192, 128256, 0, 0, BF16, 0},
     "Llama 3 70B: Llama Team 2024 Table 3; HF config"},
    {{"llama3-405b", 126, 16384, 128, 8, 53248, SWIGLU, 8192, 128256, 0, 0, BF16, 0},
     "Llama 3 405B: Llama Team 2024 Table 3; HF config"},
    {{"mixtral-8x7b", 32, 4096, 32, 8, 14336, SWIGLU, 4096, 32000, 8, 2, BF16, 0},
     "Mixtral 8x7B: Jiang et al. 2024 Table 1 (8 experts, top-2; 46.7B total, 12.9B active); "
     "trained here at seq 4096 as Megatron-Core's Mixtral recipes do (the model's window is 32k)"},
    {{"mixtral-8x22b", 56, 6144, 48, 8, 16384, SWIGLU, 4096, 32768, 8, 2, BF16, 0},
     "Mixtral 8x22B: Mistral AI, April 2024, HF config.json (56 layers, hidden 6144, 48/8 "
     "heads, FFN 16384, 8 experts top-2, vocab 32768; 141B total, 39B active); trained here at "
     "seq 4096 as the 8x7B"},
    /* Alpa's GPT benchmark shapes (Zheng et al. OSDI'22 Table 4; alpa-projects/alpa
     * benchmark/alpa/suite_manual_gpt.py gpt_specs: seq 1024, hidden, layers, heads, vocab
     * 51200), trained in fp16 on V100s */
    {{"gpt-15b", 48, 5120, 40, 40, 20480, GELU, 1024, 51200, 0, 0, FP16, 1},
     "Alpa's GPT-15B: Zheng et al. OSDI'22 Table 4 and alpa benchmark/alpa/suite_manual_gpt.py "
     "(hidden 5120, 48 layers, 40 heads, seq 1024, vocab 51200); fp16 as on its V100s"},
    {{"gpt-39b-alpa", 48, 8192, 64, 64, 32768, GELU, 1024, 51200, 0, 0, FP16, 1},
     "Alpa's GPT-39B: Zheng et al. OSDI'22 Table 4 and alpa suite_manual_gpt.py (hidden 8192, "
     "48 layers, 64 heads, seq 1024 where gpt3-39b has 2048); fp16 as on its V100s"},
};

/* ---- GPUs ----------------------------------------------------------------------------------
 * name, bf16 dense TFLOP/s, fp8 dense TFLOP/s, HBM GiB (datasheet GB), HBM TB/s, SMs */
/* SMs: A100 108, H100/H200 132 (NVIDIA whitepapers), B200 148 (2 dies x 74, Chips and Cheese
 * "Nvidia's B200"); TPU v4: 2 TensorCores x 4 MXUs = 8 matrix units (ISCA'23). */
#define A100_40G {"a100-40g", 312, 0, 40, 1.555, 108}
#define A100_80G {"a100-80g", 312, 0, 80, 2.039, 108}
#define H100_SXM {"h100-sxm", 989.4, 1978.9, 80, 3.35, 132}
#define H200 {"h200", 989.4, 1978.9, 141, 4.8, 132}
#define B200 {"b200", 2250, 4500, 180, 8, 148}
#define GB200 {"gb200", 2450, 4900, 186, 8, 148}
#define TPU_V4 {"tpu-v4", 275, 0, 32, 1.2, 8}
/* V100 SXM2 16GB: 125 TFLOP/s is the fp16 tensor-core peak (no bf16 on Volta; the field holds
 * the 16-bit peak), 80 SMs (Volta whitepaper) */
#define V100_16G {"v100-16g", 125, 0, 16, 0.9, 80}
/* One CPU process of `podplan run --device cpu` in place of a GPU (device "cpu"): one x86-64
 * core with two 256-bit FMA units at 4 GHz, the highest boost clock of current server cores
 * (2 x 8 fp32 lanes x 2 flops x 4e9 = 128 GFLOP/s fp32, in the bf16 field: the CPU backend
 * runs its GEMMs in fp32), a ~10 GB/s share of DRAM bandwidth and 8 GiB of it; no SMs (no wave
 * quantization). A peak, not a typical rate: efficiencies are fractions of it and cannot pass
 * 1 (with 80 GFLOP/s, the figure at 2.5 GHz, OpenBLAS GEMMs on a boosting AMD EPYC core ran
 * at up to 85 GFLOP/s and calibration hit the bound). Priors only: a calibration from the host's own runs (calibrate --from-search)
 * replaces them; a core with two 512-bit FMA units needs a cluster JSON of twice the peak. */
#define CPU_CORE {"cpu-core", 0.128, 0, 8, 0.01, 0, 1}

static const struct {
  spec_gpu g;
  const char *source;
} gpus[] = {
    {A100_40G, "hardware.csv 'A100 SXM4 40GB' (NVIDIA A100 datasheet)"},
    {A100_80G, "hardware.csv 'A100 SXM4 80GB' (NVIDIA A100 datasheet)"},
    {H100_SXM,
     "hardware.csv 'H100 SXM5 80GB' (NVIDIA H100 datasheet; dgxc-benchmarking MFU denominators)"},
    {H200, "hardware.csv 'H200 SXM 141GB' (MLCommons v4.1; NVIDIA)"},
    {B200, "hardware.csv 'B200' (dgxc-benchmarking peak table)"},
    {GB200, "hardware.csv 'GB200' (dgxc-benchmarking; MLCommons v6.1)"},
    {TPU_V4, "hardware.csv 'TPU v4' (Google Cloud TPU v4 docs; ISCA'23)"},
    {V100_16G,
     "V100-SXM2-16GB: NVIDIA Tesla V100 datasheet (125 TFLOP/s fp16 tensor core, 16 GB HBM2 at "
     "900 GB/s) and Volta whitepaper (80 SMs); not in hardware.csv"},
    {CPU_CORE,
     "x86-64 core at its peak (AVX2: 2 FMA x 8 fp32 lanes x 2 flops x 4 GHz boost = 128 "
     "GFLOP/s), 10 GB/s of DRAM bandwidth; a prior for calibration, not a measurement"},
};

/* ---- clusters ------------------------------------------------------------------------------ */
/* A rail-optimized fat tree: one leaf per rail, NIC i of every node on rail i. */
#define RAIL_FAT_TREE(gbit, nics, radix)                                                  \
  {.kind = SPEC_NET_FAT_TREE, .rail_optimized = 1, .nic_gbps = gbit, .nics_per_node = nics, \
   .oversubscription = 1, .switch_radix = radix, .latency_us = 2.7}
#define NVLINK(domain, gbps, lat, tap, nvls) \
  {.domain_gpus = domain, .gbps_per_gpu = gbps, .latency_us = lat, .taper = tap, .in_network_reduce = nvls}

static const struct {
  spec_cluster c;
  const char *source;
} clusters[] = {
    {{.name = "dgx-a100", .gpu = A100_80G, .gpus = 64, .gpus_per_node = 8,
      .nvlink = NVLINK(8, 300, 0.6, 1, 0), .network = RAIL_FAT_TREE(200, 8, 40)},
     "Selene-like DGX A100: hardware.csv 'DGX A100' (8x A100-80GB, NVLink3 600 GB/s bidir = 300 "
     "per direction, 6x NVSwitch gen2, no NVLS), 8x 200 Gb/s HDR rail-optimized fat tree "
     "(Narayanan et al. SC'21 Sec. 5) of 40-port QM8700 switches"},
    {{.name = "dgx-h100", .gpu = H100_SXM, .gpus = 64, .gpus_per_node = 8,
      .nvlink = NVLINK(8, 450, 0.6, 1, 1), .network = RAIL_FAT_TREE(400, 8, 64)},
     "DGX H100: hardware.csv 'DGX H100' (NVLink4 900 GB/s bidir, NVSwitch gen3 with NVLS), "
     "8x 400 Gb/s NDR rail-optimized fat tree of 64-port QM9700 switches (dgxc-benchmarking "
     "EOS reference)"},
    {{.name = "dgx-b200", .gpu = B200, .gpus = 64, .gpus_per_node = 8,
      .nvlink = NVLINK(8, 900, 0.6, 1, 1), .network = RAIL_FAT_TREE(400, 8, 64)},
     "DGX B200: hardware.csv 'B200' (8 per DGX, NVLink5 1800 GB/s bidir, NVLS); 8x 400 Gb/s "
     "ConnectX-7 rail-optimized fat tree as the DGX B200 datasheet (not in hardware.csv)"},
    {{.name = "h100-nvl256", .gpu = H100_SXM, .gpus = 256, .gpus_per_node = 8,
      .nvlink = NVLINK(256, 450, 0.7, 2, 1), .network = RAIL_FAT_TREE(400, 8, 64)},
     "DGX H100 SuperPOD with NVLink Switch System: hardware.csv (256 GPUs in one NVLink domain, "
     "72 NVLink4 ports per node to the second level = 2:1 taper); NDR rail-optimized IB between "
     "pods; 0.7 us NVLink latency assumed (NCCL's 0.6 us hop, and an extra switch level)"},
    {{.name = "gb200-nvl72", .gpu = GB200, .gpus = 72, .gpus_per_node = 4,
      .nvlink = NVLINK(72, 900, 0.6, 1, 1), .network = RAIL_FAT_TREE(400, 4, 64)},
     "GB200 NVL72: hardware.csv (72 GPUs, NVLink5 1800 GB/s bidir per GPU, 18 NVSwitch chips, "
     "4 GPUs per compute tray); 400 Gb/s per GPU between racks (ConnectX-7; assumed, "
     "hardware.csv names ConnectX-7 or -8 per compute tray)"},
    {{.name = "tpu-v4-torus", .gpu = TPU_V4, .gpus = 64, .gpus_per_node = 4,
      .nvlink = {.domain_gpus = 1, .taper = 1},
      .network = {.kind = SPEC_NET_TORUS, .dims = {4, 4, 4}, .link_gbps = 50, .wraparound = 1,
                  .oversubscription = 1, .latency_us = 1.0}},
     "TPU v4: hardware.csv (3-D torus of 4x4x4 cubes, 6 ICI links per chip, 4 chips per host); "
     "ICI 400 Gbit/s = 50 GB/s per direction per link and 1 us per hop are unverified "
     "(hardware.csv says so)"},
    {{.name = "p3.16xlarge", .gpu = V100_16G, .gpus = 64, .gpus_per_node = 8,
      .nvlink = NVLINK(8, 150, 0.6, 1, 0),
      .network = {.kind = SPEC_NET_FAT_TREE, .rail_optimized = 0, .nic_gbps = 25,
                  .nics_per_node = 1, .oversubscription = 1, .switch_radix = 64,
                  .latency_us = 25}},
     "AWS p3.16xlarge-like, the cluster of Alpa's GPT benchmarks (Zheng et al. OSDI'22 Sec. 8: "
     "8 nodes of 8 V100-16GB, NVLink inside, 25 Gbps between): AWS P3 page (8x V100, NVLink 300 "
     "GB/s, network 25 Gbps, one ENA interface); NVLink2 is 6 links x 25 GB/s = 150 GB/s per "
     "direction per GPU (V100 datasheet 300 GB/s bidirectional; Dell measured 143.7 GB/s "
     "unidirectional p2p on V100-SXM2). The hybrid cube mesh has no NVSwitch: modelled as a "
     "switch with 150 GB/s per GPU, which overstates pairs joined by one link (25 GB/s direct). "
     "No EFA on p3.16xlarge: NCCL runs over TCP sockets; 25 us per hop and the radix are "
     "assumed, not measured"},
    {{.name = "cpu-host", .gpu = CPU_CORE, .gpus = 2, .gpus_per_node = 64,
      .nvlink = NVLINK(64, 5, 1, 1, 0), .network = {.kind = SPEC_NET_NONE}},
     "this host under `mpirun podplan run --device cpu`: one process per rank (--gpus N, up to "
     "64), ranks joined by shared memory, modelled as one NVLink domain of 5 GB/s per rank per "
     "direction and 1 us (nominal Open MPI vader figures); priors for calibration, not "
     "measurements"},
};

#define N(a) (sizeof(a) / sizeof((a)[0]))

size_t spec_model_preset_count(void) { return N(models); }
const spec_model *spec_model_preset(size_t i) { return i < N(models) ? &models[i].m : NULL; }
const char *spec_model_preset_source(size_t i) { return i < N(models) ? models[i].source : NULL; }
size_t spec_gpu_preset_count(void) { return N(gpus); }
const spec_gpu *spec_gpu_preset(size_t i) { return i < N(gpus) ? &gpus[i].g : NULL; }
const char *spec_gpu_preset_source(size_t i) { return i < N(gpus) ? gpus[i].source : NULL; }
size_t spec_cluster_preset_count(void) { return N(clusters); }
const char *spec_cluster_preset_source(size_t i) {
  return i < N(clusters) ? clusters[i].source : NULL;
}

const spec_cluster *spec_cluster_preset(size_t i) {
  return i < N(clusters) ? &clusters[i].c : NULL;
}

const spec_model *spec__model_preset_find(const char *name) {
  for (size_t i = 0; i < N(models); i++)
    if (strcmp(models[i].m.name, name) == 0) return &models[i].m;
  return NULL;
}

const spec_gpu *spec__gpu_preset_find(const char *name) {
  for (size_t i = 0; i < N(gpus); i++)
    if (strcmp(gpus[i].g.name, name) == 0) return &gpus[i].g;
  return NULL;
}

const spec_cluster *spec__cluster_preset_find(const char *name) {
  for (size_t i = 0; i < N(clusters); i++)
    if (strcmp(clusters[i].c.name, name) == 0) return &clusters[i].c;
  return NULL;
}

void spec__preset_names(char *buf, size_t n, int which) {
  size_t count = which == 0 ? N(models) : which == 1 ? N(gpus) : N(clusters);
  buf[0] = '\0';
  for (size_t i = 0; i < count; i++) {
    const char *name = which == 0   ? models[i].m.name
                       : which == 1 ? gpus[i].g.name
                                    : clusters[i].c.name;
    size_t len = strlen(buf);
    snprintf(buf + len, n - len, "%s%s", i ? ", " : "", name);
  }
}
