/* podplan specs: the model, GPU, cluster and plan descriptions every module reads. Owns JSON
 * parsing (Jansson, kept out of this header), the built-in presets, validation, the canonical
 * JSON form and its stable hash. Depends on err.h only.
 *
 * Units: bandwidths are GB/s (1e9 B/s) per direction unless a name says otherwise;
 * network.nic_gbps is Gbit/s as vendors print it. Sizes of memory are GiB. */
#ifndef PODPLAN_SPEC_H
#define PODPLAN_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include "podplan/err.h"

#define SPEC_NAME_MAX 64 /* names, including the terminating NUL */
#define SPEC_HASH_LEN 17 /* 16 hex digits and a NUL */
#define SPEC_PLAN_STR_MAX 256
#define SPEC_MAX_GPUS (1 << 20)

/* ---- model ---------------------------------------------------------------------------- */

typedef enum { SPEC_FFN_GELU, SPEC_FFN_SWIGLU, SPEC_FFN_RELU } spec_ffn;
typedef enum { SPEC_DTYPE_BF16, SPEC_DTYPE_FP16, SPEC_DTYPE_FP8 } spec_dtype;

typedef struct spec_model {
  char name[SPEC_NAME_MAX];
  int layers;          /* transformer blocks */
  int hidden;          /* model width h */
  int heads;           /* attention (query) heads; hidden % heads == 0 */
  int kv_heads;        /* key/value heads (GQA); == heads for multi-head attention */
  int ffn_hidden;      /* MLP inner width; per expert for MoE */
  spec_ffn ffn;        /* gelu/relu: 2 GEMMs; swiglu: 3 GEMMs (gate, up, down) */
  int seq_len;         /* training sequence length, tokens */
  int vocab;           /* vocabulary size (as trained, padding included) */
  int experts;         /* experts per MoE layer; 0 = dense */
  int top_k;           /* experts per token; 0 when dense */
  spec_dtype dtype;    /* compute dtype of the GEMMs */
  int tied_embeddings; /* 1: the LM head shares the input embedding's weights */
} spec_model;

/* ---- GPU ------------------------------------------------------------------------------ */

typedef struct spec_gpu {
  char name[SPEC_NAME_MAX];
  double bf16_tflops; /* peak dense bf16/fp16 tensor-core TFLOP/s */
  double fp8_tflops;  /* peak dense fp8 TFLOP/s; 0 when the GPU has no fp8 */
  double hbm_gib;     /* HBM capacity, GiB (as printed on the datasheet) */
  double hbm_tbps;    /* HBM bandwidth, TB/s */
  int sms;            /* streaming multiprocessors (TPU: matrix units); 0 = unknown */
  int cpu;            /* 1: a CPU process stands for the GPU (JSON "device": "cpu"; podplan run
                         --device cpu on this host): bf16_tflops is then its fp32 peak and
                         hbm_tbps its share of memory bandwidth. Emitted only when 1, so every
                         GPU's canonical JSON and hash is as before */
} spec_gpu;

/* ---- cluster -------------------------------------------------------------------------- */

typedef enum { SPEC_NET_NONE, SPEC_NET_FAT_TREE, SPEC_NET_TORUS } spec_net_kind;

/* NVLink domains and partitions. A job may use only part of each NVLink domain (e.g. 64 GPUs,
 * 16 of the 18 compute trays of a GB200 NVL72 rack, the others idle or spare). The job's effective NVLink domain is then the partition: domain_gpus
 * holds it, and every model (placement, collectives, the simulator's platform, the searches)
 * reads domain_gpus alone. In JSON, nvlink.domain_gpus is the physical domain and
 * nvlink.domain_gpus_used the partition. */
typedef struct spec_nvlink {
  int domain_gpus;       /* GPUs of one NVLink domain the job uses (the partition when the
                            domain is partitioned); 1 = no NVLink */
  int domain_gpus_hw;    /* GPUs the physical domain has when partitioned (> domain_gpus);
                            0 = not partitioned (domain_gpus is the whole domain) */
  int partition_gpus;    /* the partition the spec asked for (nvlink.domain_gpus_used); 0 =
                            derived from the job's size (spec_cluster_resize) */
  double gbps_per_gpu;   /* GB/s per direction from each GPU into the domain's switches */
  double latency_us;     /* one hop GPU -> switch -> GPU */
  double taper;          /* in-node / above-node bandwidth ratio inside a multi-node domain */
  int in_network_reduce; /* NVLink SHARP (NVLS) in the switches */
} spec_nvlink;

/* Scale-out NIC generations with listed defaults (network.nic); SPEC_NIC_AUTO ("auto", the
 * default): the generation nic_gbps stands for (100 EDR, 200 HDR, 400 NDR, 800 XDR: the
 * InfiniBand of that speed; 25: 25 GbE, which no InfiniBand runs at), if any. */
typedef enum {
  SPEC_NIC_AUTO,     /* not named: inferred from nic_gbps */
  SPEC_NIC_HDR,      /* InfiniBand HDR, 200 Gbit/s */
  SPEC_NIC_NDR,      /* InfiniBand NDR, 400 Gbit/s */
  SPEC_NIC_XDR,      /* InfiniBand XDR, 800 Gbit/s */
  SPEC_NIC_ROCE400,  /* RoCE over 400 GbE */
  SPEC_NIC_EDR,      /* InfiniBand EDR, 100 Gbit/s */
  SPEC_NIC_OPA100,   /* Intel Omni-Path, 100 Gbit/s */
  SPEC_NIC_ROCE100,  /* RoCE over 100 GbE */
  SPEC_NIC_ROCE25,   /* RoCE over 25 GbE */
  SPEC_NNICS
} spec_nic;

typedef struct spec_network {
  spec_net_kind kind;      /* none: a single NVLink domain; fat-tree; torus */
  /* fat-tree */
  spec_nic nic;            /* NIC generation as the spec named it; AUTO: inferred from
                              nic_gbps where one InfiniBand generation runs at that speed */
  int rail_optimized;      /* NIC i of every node on rail i (its own leaf switches) */
  double nic_gbps;         /* Gbit/s per NIC, per direction */
  int nics_per_node;       /* compute NICs per node */
  double oversubscription; /* leaf down/up bandwidth ratio, >= 1 */
  int switch_radix;        /* ports per switch */
  int in_network_reduce;   /* SHARP in the switches */
  /* torus */
  int dims[3];             /* torus shape x,y,z; product == gpus */
  double link_gbps;        /* GB/s per direction per torus link */
  int wraparound;          /* dimensions of size > 2 close into rings */
  /* both */
  double latency_us;       /* one hop between nodes (fat-tree: NIC to NIC) */
} spec_network;

/* Figures a cluster spec may leave out. Each is filled from the GPU's generation (NVLink) or
 * the NIC's generation (network), or is a fixed assumption (taper, oversubscription, rails);
 * spec_cluster_defaults() says which were and where each value comes from. */
typedef enum {
  SPEC_DEF_NVL_LATENCY,  /* nvlink.latency_us: GPU generation (no default: error) */
  SPEC_DEF_NVL_INR,      /* nvlink.in_network_reduce: GPU generation (NVLS), else false */
  SPEC_DEF_NVL_TAPER,    /* nvlink.taper: 1 */
  SPEC_DEF_NET_NIC_GBPS, /* network.nic_gbps: from network.nic */
  SPEC_DEF_NET_LATENCY,  /* network.latency_us: NIC generation (no default: error) */
  SPEC_DEF_NET_RADIX,    /* network.switch_radix: NIC generation, else 64 */
  SPEC_DEF_NET_INR,      /* network.in_network_reduce: NIC generation (SHARP), else false */
  SPEC_DEF_NET_OVERSUB,  /* network.oversubscription: 1 */
  SPEC_DEF_NET_RAIL,     /* network.rail_optimized: false */
  SPEC_NDEFS
} spec_def;

typedef struct spec_cluster {
  char name[SPEC_NAME_MAX];
  spec_gpu gpu;
  int gpus;                /* GPUs in the cluster */
  int gpus_per_node;
  spec_nvlink nvlink;
  spec_network network;
  unsigned defaulted;      /* bit (1u << spec_def) per figure filled by a default when the
                              spec was read; not part of the canonical JSON, which carries the
                              figures themselves */
} spec_cluster;

/* One defaulted figure, for printing. */
typedef struct spec_default_info {
  const char *field;      /* "nvlink.latency_us" */
  double value;           /* the value used (booleans 0/1) */
  int boolean;            /* 1: the field is true/false */
  int integer;            /* 1: the field is an integer */
  const char *from;       /* the generation it comes from ("h100-sxm: Hopper, NVLink4, NVSwitch
                             gen3"), or "assumed" */
  const char *source;     /* the public source of the figure */
  int inferred;           /* 1: the NIC generation was inferred from network.nic_gbps */
} spec_default_info;

/* ---- plan ----------------------------------------------------------------------------- */

typedef enum { SPEC_RECOMPUTE_NONE, SPEC_RECOMPUTE_SELECTIVE, SPEC_RECOMPUTE_FULL } spec_recompute;
typedef enum { SPEC_SCHED_GPIPE, SPEC_SCHED_1F1B, SPEC_SCHED_INTERLEAVED } spec_schedule;

/* One pipeline stage of a non-uniform plan. */
typedef struct spec_stage {
  int layer_begin, layer_end; /* transformer blocks [begin, end) */
  int tp, dp, cp, ep;         /* this stage's parallel degrees */
  spec_recompute recompute;
  int ngpus;                  /* == tp * dp * cp */
  int *gpus;                  /* ngpus GPU ids (0 .. cluster gpus - 1), owned by the plan */
} spec_stage;

/* A plan. Uniform (nstages == 0): the Megatron-style degrees below. Non-uniform
 * (nstages > 0): stages[] with their own degrees and GPUs; tp/pp/dp/cp/ep/mbs/vpp/recompute
 * of the plan are then unused (0) and microbatches says how the batch is split. */
typedef struct spec_plan {
  int tp, pp, dp, cp, ep;   /* parallel degrees; dp == 0: derive from the cluster */
  int mbs;                  /* sequences per microbatch per data-parallel replica */
  int gbs;                  /* global batch, sequences per iteration */
  int vpp;                  /* virtual stages per pipeline rank (interleaved 1F1B) */
  int sp;                   /* 1: Megatron sequence parallelism */
  spec_recompute recompute; /* activation recomputation */
  int zero;                 /* ZeRO stage 0..3 (1 = distributed optimizer) */
  spec_schedule schedule;
  int nstages;              /* 0 = uniform */
  spec_stage *stages;       /* nstages stages, owned by the plan */
  int microbatches;         /* non-uniform only: microbatches per iteration */
} spec_plan;

/* ---- names of enum values (for printing) ---------------------------------------------- */
const char *spec_ffn_name(spec_ffn f);
const char *spec_dtype_name(spec_dtype d);
const char *spec_net_kind_name(spec_net_kind k);
const char *spec_recompute_name(spec_recompute r);
const char *spec_schedule_name(spec_schedule s);

/* ---- presets -------------------------------------------------------------------------- */
size_t spec_model_preset_count(void);
const spec_model *spec_model_preset(size_t i);
const char *spec_model_preset_source(size_t i); /* where the figures come from */
size_t spec_gpu_preset_count(void);
const spec_gpu *spec_gpu_preset(size_t i);
const char *spec_gpu_preset_source(size_t i);
size_t spec_cluster_preset_count(void);
const spec_cluster *spec_cluster_preset(size_t i); /* at its default size */
const char *spec_cluster_preset_source(size_t i);

/* ---- loading ---------------------------------------------------------------------------
 * `arg` is a preset name, inline JSON (starting with '{'), or the path of a JSON file.
 * Errors name the file (or "<inline>"), the field and the reason; unknown fields, duplicate
 * keys, wrong types and out-of-range values are rejected (PP_INPUT / PP_NOTFOUND). */
int spec_model_load(const char *arg, spec_model *out, pp_err *err);
int spec_gpu_load(const char *arg, spec_gpu *out, pp_err *err);
/* gpus > 0 resizes the cluster (as --gpus N does); 0 keeps the spec's own size. Figures a
 * JSON spec leaves out are filled from the GPU and NIC generation (spec_cluster_defaults). */
int spec_cluster_load(const char *arg, int gpus, spec_cluster *out, pp_err *err);
/* Parses JSON text of `len` bytes; `origin` names it in messages. */
int spec_model_parse(const char *text, size_t len, const char *origin, spec_model *out,
                     pp_err *err);
int spec_cluster_parse(const char *text, size_t len, const char *origin, int gpus,
                       spec_cluster *out, pp_err *err);

/* ---- validation ---------------------------------------------------------------------- */
int spec_model_validate(const spec_model *m, pp_err *err);
int spec_gpu_validate(const spec_gpu *g, pp_err *err);
/* Checks the cluster's fabric at its size (node, NVLink-domain and switch granularity). */
int spec_cluster_validate(const spec_cluster *c, pp_err *err);
/* Sets the cluster's GPU count (re-deriving a torus shape, and the NVLink partition unless
 * the spec named one) and validates it. */
int spec_cluster_resize(spec_cluster *c, int gpus, pp_err *err);
/* Checks a model can be trained on a cluster's GPUs at all (e.g. fp8 needs fp8 tensor cores). */
int spec_pair_validate(const spec_model *m, const spec_cluster *c, pp_err *err);

/* ---- derived figures ------------------------------------------------------------------ */
/* Parameter count (embeddings and the LM head included, all experts counted). */
double spec_model_params(const spec_model *m);
/* Parameters used per token (MoE: top_k experts); == spec_model_params for dense models. */
double spec_model_active_params(const spec_model *m);
/* Nodes and NVLink domains the cluster has at its size. */
int spec_cluster_nodes(const spec_cluster *c);
int spec_cluster_domains(const spec_cluster *c);
/* GPUs the physical NVLink domain has (== nvlink.domain_gpus unless partitioned). */
int spec_cluster_domain_hw(const spec_cluster *c);
/* When the job uses a partition of each NVLink domain: a one-line description ("64 of the 72
 * GPUs of each NVLink domain (2 partitions; derived: ...)") in buf, and 1; else 0. */
int spec_cluster_partition_text(const spec_cluster *c, char *buf, size_t n);
/* The figures of c that were filled by defaults when it was read: up to n of them into out;
 * returns how many there are. */
int spec_cluster_defaults(const spec_cluster *c, spec_default_info *out, int n);
/* The NIC generation names ("auto", "hdr", "ndr", "xdr", "roce-400g"), index = spec_nic. */
const char *spec_nic_name(spec_nic k);

/* ---- canonical JSON and hash ------------------------------------------------------------
 * Canonical JSON: every field with defaults filled in, keys sorted, no spaces. The hash is
 * FNV-1a 64 of that text, as 16 hex digits: stable across runs, versions and machines as long
 * as the canonical form is. The returned strings are malloc'd; free() them. */
char *spec_model_json(const spec_model *m);
char *spec_gpu_json(const spec_gpu *g);
char *spec_cluster_json(const spec_cluster *c);
void spec_hash(const char *text, char out[SPEC_HASH_LEN]);

/* ---- plans -----------------------------------------------------------------------------
 * `text` is the string form ("tp=8,pp=16,dp=8,mbs=1,gbs=1536,..."), inline JSON, or the path
 * of a JSON file (uniform or non-uniform). Keys left out take defaults (tp=pp=cp=ep=vpp=mbs=1,
 * sp=0, recompute=none, zero=0, schedule=1f1b, dp derived); gbs is required. The result is
 * owned by the caller: spec_plan_clear() it. */
int spec_plan_parse(const char *text, spec_plan *out, pp_err *err);
void spec_plan_clear(spec_plan *p);
int spec_plan_copy(spec_plan *dst, const spec_plan *src, pp_err *err);
/* Fills what the cluster determines (dp when 0), canonicalises (sp off at tp=1; 1f1b with
 * vpp>1 is interleaved) and validates against model and cluster. Errors name the rule. */
int spec_plan_resolve(spec_plan *p, const spec_model *m, const spec_cluster *c, pp_err *err);
int spec_plan_validate(const spec_plan *p, const spec_model *m, const spec_cluster *c,
                       pp_err *err);
/* String form of a uniform plan, every key in canonical order; PP_INPUT for non-uniform. */
int spec_plan_format(const spec_plan *p, char *buf, size_t n, pp_err *err);
/* Canonical JSON (malloc'd) and hash. An unresolved dp (0) is left out, as in the string
 * form; the JSON parses back to the same canonical JSON. */
char *spec_plan_json(const spec_plan *p);
void spec_plan_hash(const spec_plan *p, char out[SPEC_HASH_LEN]);
/* Microbatches per iteration: gbs / (dp * mbs) for uniform plans. */
int spec_plan_microbatches(const spec_plan *p);
/* Layers of each of the pp*vpp virtual stages of a uniform plan, in virtual-stage order
 * (virtual stage j = chunk j / pp of pipeline rank j % pp). When layers do not divide, the
 * extra layers go to the middle stages first, the first and last stages (which also hold the
 * embedding and the LM head) last, as Megatron's uneven split does. `counts` holds pp*vpp. */
void spec_plan_stage_layers(const spec_plan *p, const spec_model *m, int *counts);

/* ---- layout: who does what in a plan (shared by the simulator and the backend) ---------
 * Uniform plans follow Megatron's rank order (tp fastest, then cp, dp, pp): GPU g is rank g.
 * Non-uniform plans: each stage's GPUs in the order given, tp fastest, then cp, then dp. */
typedef enum {
  SPEC_GRP_TP,  /* tensor parallel */
  SPEC_GRP_CP,  /* context parallel */
  SPEC_GRP_DP,  /* data parallel over dp * cp ranks (gradients) */
  SPEC_GRP_EP,  /* expert parallel: ep consecutive ranks of the dp*cp dimension */
  SPEC_GRP_EDP, /* expert data parallel: the same EP index across EP groups */
  SPEC_NGRPS
} spec_grp;
const char *spec_grp_name(spec_grp k);

/* Group membership, the one rule the layout and the cost model share. Rank k of a stage of
 * tp*cp*dp ranks (tp fastest, then cp, then dp): a group of each kind has `count` members
 * `stride` ranks apart, starting at every rank for which spec_grp_leads() holds (rank 0
 * leads a group of every kind). */
typedef struct spec_grp_rule {
  int count;  /* members */
  int stride; /* ranks between consecutive members */
} spec_grp_rule;
void spec_grp_rules(int tp, int cp, int dp, int ep, spec_grp_rule out[SPEC_NGRPS]);
int spec_grp_leads(spec_grp kind, int k, int tp, int cp, int ep);
/* The members of the group that rank `first` leads, from the stage's GPUs G (rank order):
 * writes r->count GPU ids to out and returns the count. */
int spec_grp_members(const spec_grp_rule *r, const int *G, int first, int *out);

typedef struct spec_group {
  spec_grp kind;
  int stage;
  int n;
  int *gpus; /* members in rank order */
} spec_group;

/* One GPU's place in the plan. */
typedef struct spec_slot {
  int gpu;
  int stage;                /* pipeline rank 0 .. nstages-1 */
  int local;                /* index in its stage */
  int group[SPEC_NGRPS];    /* index into spec_layout.groups */
  /* pipeline neighbours: activations arrive from prev[] and leave to next[] (gradients the
   * other way), one message of 1/prev_split (1/next_split) of a microbatch's activation each;
   * uniform plans: one peer each side, the ring closing for interleaved schedules */
  int nprev, nnext;
  int *prev, *next;
  int prev_split, next_split;
} spec_slot;

typedef struct spec_layout {
  int nstages;          /* pipeline ranks */
  int vpp;              /* model chunks per pipeline rank */
  int microbatches;     /* per iteration, per pipeline */
  int nslots;           /* GPUs the plan uses */
  spec_slot *slots;     /* stage by stage; uniform: slots[g].gpu == g */
  int *slot_of_gpu;     /* [cluster gpus]: slot index or -1 */
  int ngpus;            /* cluster GPUs */
  int ngroups;
  spec_group *groups;   /* per GPU in slot order: TP, CP, DP, EP, EDP groups as they first
                           appear */
  int *layers;          /* layers of each virtual stage (nstages * vpp; non-uniform: per
                           stage) */
} spec_layout;

/* Builds the layout of a resolved, valid plan on a cluster of `gpus` GPUs. */
int spec_layout_build(const spec_plan *p, const spec_model *m, int gpus, spec_layout *out,
                      pp_err *err);
void spec_layout_free(spec_layout *l);

/* One step of a pipeline rank's schedule. */
typedef struct spec_step {
  int fwd;   /* 1 forward, 0 backward */
  int mb;    /* microbatch */
  int chunk; /* model chunk (interleaved) */
} spec_step;
/* The steps of pipeline rank r of P with m microbatches and v chunks, in the order the
 * schedule runs them (GPipe: all forwards then all backwards; 1F1B and interleaved 1F1B as
 * Megatron-LM orders them: warm-up forwards, one-forward-one-backward, cool-down backwards).
 * out holds 2*m*v; returns the count. */
int spec_schedule_steps(spec_schedule s, int P, int r, int m, int v, spec_step *out);
/* The warm-up of that order: how many forwards run before the first forward-backward pair
 * (then m * v - warm-up pairs, then warm-up cool-down backwards); GPipe: m. */
int spec_schedule_warmup(spec_schedule s, int P, int r, int m, int v);

#endif
