/* podplan cost model: scores a plan analytically (compute, memory, collectives, pipeline
 * schedule) in microseconds. A cm_model holds one (model, cluster, parameters) triple and
 * everything about it that does not depend on the plan. Parameters are the published
 * defaults until a calibration replaces them. Depends on spec.h; knows nothing of SimGrid. */
#ifndef PODPLAN_CM_H
#define PODPLAN_CM_H

#include <stddef.h>

#include "podplan/err.h"
#include "podplan/spec.h"

/* ---- topology ------------------------------------------------------------------------------
 * A cluster compiles to levels a group of ranks may cross, innermost first. */
typedef enum {
  CM_LVL_NVLINK,    /* GPU <-> NVSwitch inside a node */
  CM_LVL_NVLINK_UP, /* above the node inside a multi-node NVLink domain (tapered) */
  CM_LVL_NET,       /* NICs between NVLink domains (fat tree: leaf) */
  CM_LVL_SPINE,     /* fat-tree spine (oversubscribed) */
  CM_LVL_TORUS,     /* torus links */
  CM_NLEVELS
} cm_level;
const char *cm_level_name(cm_level l);

/* Where one group of a plan sits: which levels it crosses and who shares them. */
typedef struct cm_place {
  int ranks;            /* group size n */
  int per_node;         /* members in one node */
  int nodes;            /* nodes spanned */
  int per_domain;       /* members in one NVLink domain */
  int domains;          /* NVLink domains spanned */
  int sharing;          /* groups of this kind with members in one node (share its links) */
  unsigned levels;      /* bit (1 << cm_level) per level crossed */
  int torus_dims;       /* torus: dimensions spanned */
  int torus_wrap;       /* torus: 1 when every spanned dimension closes into a ring */
  unsigned long long key;      /* identifies a placement from cm_place_group (cache key); 0 for
                                * explicit lists and derived placements */
  double bw_gbps[CM_NLEVELS];  /* GB/s per direction this group gets at each level it crosses
                                * (per rank for NVLINK/TORUS, per node share otherwise) */
  double lat_us[CM_NLEVELS];   /* one hop at each level */
} cm_place;

/* ---- collectives ---------------------------------------------------------------------------
 * One row per collective; sizes follow nccl-tests: `bytes` is the per-rank buffer (all-gather:
 * the gathered output; reduce-scatter: the input; all-to-all: the total a rank sends and
 * receives incl. its own part). */
typedef enum {
  CM_ALL_REDUCE,
  CM_ALL_GATHER,
  CM_REDUCE_SCATTER,
  CM_ALL_TO_ALL,
  CM_BROADCAST,
  CM_SEND_RECV,
  CM_NCOLLS
} cm_coll;
/* NCCL's algorithms (ring, tree, NVLS, NVLSTree, PAT) and one of ours (hier: reduce-scatter
 * in the NVLink domain, all-reduce between domains, all-gather; NCCL has no such algorithm,
 * so cm_coll_best never picks it; cm_coll_time prices it on request). */
typedef enum {
  CM_ALGO_RING,
  CM_ALGO_TREE,
  CM_ALGO_NVLS,
  CM_ALGO_HIER,
  CM_ALGO_NVLSTREE,
  CM_ALGO_PAT,
  CM_NALGOS
} cm_algo;
const char *cm_coll_name(cm_coll c);
const char *cm_algo_name(cm_algo a);
/* The collective named as cm_coll_name prints it ("all_reduce", ...); PP_NOTFOUND otherwise. */
int cm_coll_lookup(const char *name, cm_coll *out);
/* nccl-tests bus-bandwidth factor: busbw = algbw * factor(n). */
double cm_coll_busbw_factor(cm_coll c, int n);

/* ---- parameters ---------------------------------------------------------------------------- */

/* How fast one collective algorithm runs: a bandwidth ramp and a fixed latency. The ramp is
 * eff(S) = 1 / (1 + (half / S)^gamma) on top of the level efficiencies. */
typedef struct cm_algo_params {
  double half_bytes; /* per-rank share (bytes / ranks) at which the ramp reaches one half */
  double gamma;      /* steepness of the ramp in log size */
  double base_us;    /* fixed latency per call (launch, synchronisation) */
} cm_algo_params;

typedef struct cm_params {
  /* GEMMs: time = flops / (peak * gemm_eff * wave(m, n) * kloop(k)) + kernel_us */
  double gemm_eff;      /* large, square GEMMs: fraction of the dense peak */
  int gemm_tile_m;      /* output tile the SMs work on (wave quantisation) */
  int gemm_tile_n;
  double gemm_k_half;   /* K at which the k-loop alone would run at half speed */
  double kernel_us;     /* fixed cost per kernel (launch, tail) */
  /* attention (flash-style, causal): fraction of the dense peak, forward and backward */
  double attn_fwd_eff;
  double attn_bwd_eff;
  /* memory-bound ops: fraction of HBM bandwidth */
  double hbm_eff;
  /* collectives: bandwidth efficiency of each level, then ramp and latency per algorithm */
  double level_eff[CM_NLEVELS];
  double nvls_eff;      /* in-switch reduction: fraction of NVLink bandwidth */
  double nvls_cap;      /* NVLS all-reduce busbw cap: nvls_cap * NCCL's per-architecture NVLS
                           efficiency (Hopper 0.85, Blackwell 0.74) * NVLink bandwidth */
  cm_algo_params algo[CM_NALGOS];
  /* memory */
  double mem_overhead_gib;   /* CUDA context, NCCL buffers, allocator fragmentation */
  double grad_bytes;         /* bytes per gradient element kept (4: fp32 main grads) */
  double grad_comm_bytes;    /* bytes per gradient element reduced over data parallelism */
  int fp8_params;             /* fp8 models: 1 when the weights are kept in fp8 (TE
                                fp8_model_init, Megatron --fp8-param-gather, NeMo fp8_params);
                                0: bf16 weights plus TE's cached fp8 copy and transpose */
  /* the training software being modelled */
  int flash_attention;       /* 0: unfused softmax with s^2 activations (Megatron 2021) */
  int dropout;               /* 1: dropout layers (GPT-era), 0: none (Llama-era) */
  int overlap_grad_reduce;   /* DP reduction overlaps the last backward */
  int overlap_param_gather;  /* distributed-optimizer all-gather overlaps the next forward */
  int tp_comm_overlap;       /* TP collectives overlap GEMMs (Transformer Engine) */
  int pp_scatter_gather;     /* 1: each TP rank sends 1/tp of a stage's activation (Megatron,
                                SC'21 Sec. 4.1); 0: every TP rank sends all of it */
  int pp_p2p_per_mb;         /* transfers per microbatch on a stage's critical path: 2 when
                                send and receive are combined (Megatron), 4 when each is a
                                separate blocking call (DeepSpeed's 2021 pipeline engine) */
  /* ZeRO-3 as DeepSpeed runs it: one all-gather per parameter, per module (defaults of
   * deepspeed/runtime/zero/constants.py v0.3.13-v0.5.0, 2021, and config.py today:
   * the sizes are the same) */
  double z3_persist_numel;   /* stage3_param_persistence_threshold: smaller ones stay whole */
  double z3_prefetch_numel;  /* stage3_prefetch_bucket_size: elements prefetched ahead */
  double z3_live_numel;      /* stage3_max_live_parameters: no prefetch while this many are
                                gathered */
  double z3_reuse_numel;     /* stage3_max_reuse_distance: a parameter reused within this
                                many elements stays gathered */
  double z3_bucket_numel;    /* reduce_bucket_size: gradient elements per reduction */
  int z3_grad_allreduce;     /* 1: gradient buckets all-reduced (contiguous_gradients off, the
                                ZeRO-3 default of v0.3); 0: reduce-scattered (today) */
  int z3_prefetch;           /* 0: no prefetch and nothing kept for reuse (DeepSpeed
                                v0.3.13-v0.5.10: the step trace is off by one, issue #1069) */
  int z3_sync;               /* 1: DeepSpeed v0.3: one gather per parameter into a list of
                                per-rank views, the device synchronised at every module;
                                0: today's: gathers into one buffer, event waits */
  double z3_rank_us;         /* v0.3 (z3_sync): host us per rank before each gather, its Python
                                loop over the ranks (a narrow view of the output, get_rank) */
} cm_params;

/* Defaults from published figures and measurements (benchmarks/data, docs/models.md), the
 * software defaults of today's Megatron-Core, and dropout as the model family trains. */
void cm_params_default(const spec_model *m, cm_params *out);

/* The parameter table: names ("gemm_eff", "eff.nvlink", "ring.half_bytes", "flash_attention",
 * ...), their values, and "name=value,name=value" lists (PP_INPUT on an unknown name or a
 * value out of range). */
size_t cm_params_count(void);
const char *cm_params_name(size_t i);
const char *cm_params_help(size_t i);
int cm_params_get(const cm_params *p, const char *name, double *value);
/* The range cm_params_set accepts, and whether the parameter is an integer (PP_NOTFOUND). */
int cm_params_bounds(const char *name, double *lo, double *hi, int *is_int);
/* A parameter's validated error band: one standard deviation of its relative error, in log
 * space (the value is good to within a factor exp(band)), from the accuracy the project
 * measures (README); PP_NOTFOUND for a parameter without one. The bands are the priors'
 * spread that calibration weighs a fit against and the pillar study draws from. */
int cm_params_band(const char *name, double *band);
/* The parameters with a band, i < cm_params_band_count(). */
size_t cm_params_band_count(void);
const char *cm_params_band_name(size_t i);
int cm_params_set(cm_params *p, const char *name, double value, pp_err *err);
int cm_params_apply(cm_params *p, const char *list, pp_err *err);
/* cm_params_apply, and in key the parameters it changed as "name=value,..." in the table's
 * order, values with %.17g ("" when it changed none; PP_INPUT when they do not fit n). */
int cm_params_override(cm_params *p, const char *list, char *key, size_t n, pp_err *err);

/* ---- results ------------------------------------------------------------------------------- */

/* Seconds on the critical path of one iteration; they add up to the iteration time. */
typedef struct cm_breakdown {
  double compute_s;   /* forward, backward and recompute of the slowest stage, all microbatches */
  double tp_comm_s;   /* exposed tensor/sequence-parallel collectives */
  double cp_comm_s;   /* exposed context-parallel (ring attention) exchanges */
  double ep_comm_s;   /* expert-parallel all-to-all */
  double pp_bubble_s; /* pipeline fill and drain */
  double pp_p2p_s;    /* stage-to-stage sends */
  double dp_comm_s;   /* exposed data-parallel gradient reduction and parameter gathers */
  double optimizer_s; /* optimizer step */
} cm_breakdown;

/* Peak memory per GPU of the fullest stage, GiB. */
typedef struct cm_memory {
  double weights_gib;
  double grads_gib;
  double optimizer_gib;
  double activations_gib; /* in-flight microbatches of the schedule */
  double other_gib;       /* logits, embedding/LM-head buffers, recompute working set */
  double overhead_gib;    /* framework overhead */
  double total_gib;
} cm_memory;

typedef struct cm_result {
  double iter_time_s;
  double tokens_per_s;          /* whole cluster */
  double model_tflops_per_gpu;  /* 6*N*tokens + causal attention, recompute not counted */
  double mfu;                   /* model_tflops_per_gpu / peak */
  double hfu;                   /* hardware FLOPs (recompute counted) / peak */
  double sc21_tflops_per_gpu;   /* Narayanan et al. SC'21: 96 (full recompute) or 72 */
  double model_flops;           /* per iteration */
  double hw_flops;              /* per iteration, recompute counted */
  double sc21_flops;            /* per iteration */
  cm_breakdown t;
  cm_memory mem;
  double mem_gib_per_gpu;       /* == mem.total_gib */
  int feasible;                 /* 1 when the fullest stage fits in the GPU's memory */
  double mem_excess_gib;        /* how far over the GPU's memory (0 when feasible) */
  int microbatches;
  int bottleneck_stage;         /* pipeline stage with the longest time per microbatch */
} cm_result;

/* ---- the model ------------------------------------------------------------------------------
 * A cm_model caches layer costs and collective times between evaluations (the search loop
 * scores millions of plans that share them): use one cm_model per thread. */
typedef struct cm_model cm_model;

/* p may be NULL for the defaults. */
int cm_model_create(const spec_model *m, const spec_cluster *c, const cm_params *p,
                    cm_model **out, pp_err *err);
void cm_model_destroy(cm_model *cm);
/* What the model was created from (the model, the cluster, the parameters in force): callers
 * that take a cm_model read the specs here instead of taking them again. */
const spec_model *cm_model_spec(const cm_model *cm);
const spec_cluster *cm_model_cluster(const cm_model *cm);
const cm_params *cm_model_params(const cm_model *cm);

/* Scores a resolved, valid plan (uniform or non-uniform). An infeasible plan is a result,
 * not an error: feasible = 0 and mem_excess_gib say by how much. */
int cm_eval(cm_model *cm, const spec_plan *p, cm_result *out, pp_err *err);
/* A hash of the model's behaviour: its default parameters and what it predicts for a fixed
 * set of plans on every kind of fabric (cm_fingerprint.c). Stored results keep it in their
 * keys, so that results of another version of the model are not read back as this one's.
 * About a millisecond. */
unsigned long long cm_fingerprint(void);
/* The throughput fields of a result (tokens_per_s, model_tflops_per_gpu, mfu, hfu,
 * sc21_tflops_per_gpu and the three FLOP counts) for plan p run in iter_time_s: the one place
 * they are computed, for the cost model's own time (cm_eval) and for a time another model
 * measured (the simulator's). MFU and HFU are taken against the dense bf16 peak. */
void cm_throughput(const cm_model *cm, const spec_plan *p, double iter_time_s, cm_result *out);

/* ---- one stage priced alone --------------------------------------------------------------
 * What cm_eval charges one stage of a non-uniform plan, split so that a search can price a
 * stage of any layer count from one set of coefficients: a stage's time per microbatch and
 * its memory are linear in its layer count plus the embedding (first stage) and the LM head
 * (last stage), except under ZeRO-3, whose exposed gathers and reductions depend on the whole
 * module sequence (the first gather and the last gradient bucket once per microbatch,
 * prefetch limits): ZeRO-3 plans have one stage. cm_eval prices non-uniform stages through these very functions, so a search
 * that adds them up sees exactly what cm_eval will charge for the stages (the pipeline
 * bubble, stage-to-stage transfers and the data-parallel tail are added by cm_eval). */
typedef struct cm_stage_cfg {
  int tp, cp, dp, ep;
  int mbs;                /* sequences per microbatch on one data-parallel rank */
  int sp;                 /* sequence parallelism (ignored at tp = 1) */
  spec_recompute recompute;
} cm_stage_cfg;

typedef struct cm_stage_coef {
  cm_stage_cfg cfg;
  /* per layer, per microbatch, per rank */
  double comp_s, tp_s, cp_s, ep_s; /* forward + backward (+ recompute) */
  double bwd_s;                    /* backward part of the above */
  double params, expert_params;    /* parameters per GPU */
  double act_bytes;                /* activations kept for the backward */
  double work_bytes;               /* transient working set (not multiplied by layers) */
  double zero3_gather_bytes;       /* ZeRO-3: gathered parameters (and gradients) held at once */
  double recomp_s;                 /* recomputed forward (+ its TP/EP) inside bwd_s */
  /* the first stage's embedding and the last stage's final norm, LM head and loss */
  double embed_comp_s, embed_bwd_s, embed_params, embed_mem_bytes;
  double head_comp_s, head_bwd_s, head_params, head_mem_bytes;
  cm_place tp_pl, cp_pl, ep_pl;    /* where its groups sit: the layer's TP, CP and EP */
  cm_place dp_pl, edp_pl;          /* collectives were priced there; DP and expert-DP: the
                                    * gradient reduction and ZeRO-3's gathers */
} cm_stage_coef;

/* Coefficients of a stage with configuration g on the n GPUs `gpus` (rank order: tp fastest,
 * then cp, then dp). PP_PLAN when n != tp*cp*dp or a degree is below 1. */
int cm_stage_coef_get(cm_model *cm, const cm_stage_cfg *g, const int *gpus, int n,
                      cm_stage_coef *out, pp_err *err);
/* The parameters ZeRO-3 gathers for one layer of a stage, in forward order, as cm_eval prices
 * them (DeepSpeed: one all-gather per parameter before each forward, recomputed forward and
 * backward; docs/models.md): elements of one parameter, parameters of that shape gathered one
 * after another (local experts), 1 when over the expert-data-parallel group, and whether it is
 * gathered at all (below zero3.persist_numel it stays whole). Returns how many (at most
 * CM_Z3_UNITS). */
#define CM_Z3_UNITS 6
typedef struct cm_z3_unit {
  double numel;
  int count;
  int expert;
  int gathered;
} cm_z3_unit;
int cm_zero3_units(const cm_model *cm, const cm_stage_coef *s, cm_z3_unit *out);

/* ZeRO-3's schedule of one microbatch on a rank of `layers` layers of a stage, as cm_eval
 * times it (docs/models.md, "Pipeline, data-parallel tail"): every layer's forward modules,
 * then every layer's backward modules in reverse (the recomputed forwards first under full
 * recompute); the embedding and the LM head are not gathered and not in it. The simulator and
 * the backend lower exactly these collectives. */
typedef struct cm_z3_mod {
  int pat;               /* its place in a layer: 0..nu-1 the forward's units, nu..nu+nb-1 the
                            backward's modules (the recomputed forward's, then the backward's) */
  int layer;
  double comp_s;         /* its compute: its unit's share of the layer's pass */
  int gathers;           /* all-gathers before it, one after another (0: none) */
  double gather_bytes;   /* bytes of each (bf16, the rank's output buffer) */
  spec_grp group;        /* SPEC_GRP_DP, or SPEC_GRP_EDP for an expert's */
  double gather_extra_s; /* each: the copies around it (zero3.sync = 1), on the stream */
  double host_s;         /* the host before launching them: v0.3's loop over the ranks
                            (zero3.sync = 1, zero3.rank_us each) */
  long issue;            /* the module whose start issues its gathers; itself when it is
                            reached (sync: waited for in full; else when the module before
                            ends) */
  double reduce_bytes;   /* the gradient bucket reduced from its start on (0: none), on the
                            stream behind its gathers, over the DP group */
  double reduce_extra_s; /* the bucket's copies, on the stream */
} cm_z3_mod;
typedef struct cm_z3_sched {
  int sync;              /* zero3.sync: module windows (device synchronised); else pipelined */
  cm_coll reduce;        /* CM_REDUCE_SCATTER, or CM_ALL_REDUCE (zero3.grad_allreduce) */
  int nu, nb;            /* modules of one layer's forward and backward */
  int layers;            /* layers it is for */
  long n;                /* modules: layers * (nu + nb) */
  cm_z3_mod *mods;
  double last_bytes, last_extra_s; /* the last bucket, after the backward, waited for */
  double exposed_s;      /* what cm_eval charges per microbatch for it */
} cm_z3_sched;
/* Fills s (empty when the stage has no DP group or no layers). PP_NOMEM. */
int cm_zero3_sched(const cm_model *cm, const cm_stage_coef *s, int layers, cm_z3_sched *out,
                   pp_err *err);
void cm_zero3_sched_free(cm_z3_sched *s);
/* The schedule cm_eval walks for `layers` layers of stage `stage` of plan p (uniform plans:
 * every stage alike, `stage` ignored). */
int cm_zero3_plan_sched(cm_model *cm, const spec_plan *p, int stage, int layers,
                        cm_z3_sched *out, pp_err *err);

/* Time per microbatch of a stage of `layers` layers (first: it holds the embedding; last: the
 * LM head) under ZeRO stage `zero`: compute and exposed TP/CP/EP communication (and, under
 * ZeRO-3, the per-microbatch gathers the compute does not hide). */
double cm_stage_time(cm_model *cm, const cm_stage_coef *s, int layers, int first, int last,
                     int zero);
/* Peak memory per GPU of that stage with `inflight` microbatches of activations alive. */
void cm_stage_memory(const cm_model *cm, const cm_stage_coef *s, int layers, int first, int last,
                     int zero, double inflight, cm_memory *out);

/* What cm_eval's data-parallel tail charges for that stage after its last backward: the
 * gradient reduction not hidden by its own backward and `slack_s` more (the backward of the
 * stages before it, which finish later), the gather of the distributed optimizer when not
 * overlapped, and the optimizer step. The iteration's tail is the largest over stages. */
double cm_stage_tail(const cm_model *cm, const cm_stage_coef *s, int layers, int first, int last,
                     int zero, double slack_s);

/* One stage-to-stage transfer of a non-uniform plan (per microbatch, each way): the sending
 * stage's n_a GPUs a (tensor-parallel degree tp_a) to the next stage's GPUs b, `samples`
 * sequences per microbatch, as cm_eval charges it (per microbatch cm_eval adds pp_p2p_per_mb
 * times the largest, over stages, mean of a stage's two boundaries, plus the pipeline's fill
 * and drain). */
double cm_stage_p2p(const cm_model *cm, const int *a, int na, int tp_a, const int *b, int nb,
                    double samples);

/* Placement of a group of n ranks whose GPU ids step by `stride` (uniform plans: TP stride 1,
 * CP stride tp, DP stride tp, n = dp*cp). The groups of the same kind tile the cluster (copies
 * from b + j n stride, 0 <= b < stride) and run at once: `sharing` of them share each node's
 * links above the GPU. The copy placed is the one spanning the most NVLink domains, then
 * nodes: GPU 0's where the group's span divides the domain and the node, else a straddling
 * one (CP pairs 8 apart on 144 GPUs of NVL72: GPUs 64 and 72). */
void cm_place_group(const cm_model *cm, int n, int stride, cm_place *out);
/* Placement of an explicit list of GPU ids (non-uniform plans). */
void cm_place_list(const cm_model *cm, const int *gpus, int n, cm_place *out);
/* Where cm_eval prices the groups of pipeline stage `stage` of a resolved plan, indexed by
 * spec_grp: the placements of the very coefficients cm_eval evaluates the stage with.
 * Non-uniform stages: the groups of the stage's first rank, from its GPU ids (cm_place_list);
 * uniform plans: each kind's shape by count and stride (cm_place_group), alike for every
 * stage. PP_PLAN for a stage out of range. */
int cm_stage_places(cm_model *cm, const spec_plan *p, int stage, cm_place out[SPEC_NGRPS],
                    pp_err *err);

/* The physical links of the fabric with the bandwidth the model gives them (bytes/s, per
 * direction, level efficiencies applied) and their one-hop latencies: the topology object the
 * cost model prices groups on and the simulator builds its platform from. */
typedef struct cm_fabric {
  double nvlink_Bps;   /* a GPU's NVLink port to its node's switches (0: no NVLink) */
  double up_Bps;       /* a node's NVLink uplink into a multi-node domain (0: none) */
  double nic_Bps;      /* one NIC */
  double leaf_up_Bps;  /* per node attached to a leaf: its share of the leaf's spine uplink */
  double torus_Bps;    /* one torus link, one direction */
  double nvlink_lat_s, net_lat_s, torus_lat_s;
  int leaf_nodes;      /* nodes under one leaf (per rail when rail-optimized) */
} cm_fabric;
void cm_fabric_info(const cm_model *cm, cm_fabric *out);

/* A collective's cost in pieces: time = lat_s + vol_bytes / (ramp * bw_Bps), vol_bytes what
 * each rank moves through its slowest level (2(n-1)/n * bytes for a ring all-reduce; (n+1)/n *
 * bytes through the switch for NVLS), bw_Bps that level's bandwidth for this group. PP_INPUT
 * when the algorithm cannot run there or is composite (hierarchical, all-to-all). */
typedef struct cm_coll_parts {
  double lat_s, vol_bytes, ramp, bw_Bps;
} cm_coll_parts;
int cm_coll_split(const cm_model *cm, cm_coll c, cm_algo a, double bytes, const cm_place *pl,
                  cm_coll_parts *out);
/* An NVLSTree all-reduce's two pieces, which NCCL pipelines (its time is the latency plus the
 * slower piece over the ramp): *in the NVLS part inside each NVLink domain, *out the part
 * between domains (the tree over the domains' NICs or NCCL's per-head cap, whichever is
 * slower); each with the algorithm's latency and ramp. PP_INPUT where NVLSTree cannot run. */
int cm_nvlstree_pieces(const cm_model *cm, double bytes, const cm_place *pl, cm_coll_parts *in,
                       cm_coll_parts *out);

/* Time of one collective of `bytes` on a placed group with a given algorithm (a negative
 * time when the algorithm cannot run there, e.g. NVLS outside one NVLink domain), and the
 * fastest algorithm, as NCCL would pick it. */
double cm_coll_time(const cm_model *cm, cm_coll c, cm_algo a, double bytes, const cm_place *pl);
double cm_coll_best(const cm_model *cm, cm_coll c, double bytes, const cm_place *pl,
                    cm_algo *chosen);

/* What one transformer layer costs one rank for one microbatch under a stage's degrees (groups
 * placed as Megatron orders ranks: tp, cp, dp, pp), and what its communication is made of:
 * the simulator replays it with every group's traffic on the links at once. */
typedef struct cm_layer_profile {
  double fwd_s, bwd_s, recomp_s;          /* compute: GEMMs, attention, memory-bound ops */
  double tp_fwd_s, tp_bwd_s, tp_recomp_s; /* exposed TP/SP collectives */
  double cp_fwd_s, cp_bwd_s;              /* exposed ring-attention exchanges */
  double ep_fwd_s, ep_bwd_s, ep_recomp_s; /* MoE all-to-alls */
  int tp_sp;              /* 1: each call is an all-gather plus a reduce-scatter; 0: an all-reduce */
  int tp_calls_fwd, tp_calls_bwd, tp_calls_recomp; /* TP calls per phase (AR, or AG+RS pairs) */
  double tp_bytes;        /* buffer of each TP call */
  int cp_steps;           /* ring steps per phase (c - 1); backward moves twice the bytes */
  double cp_step_bytes;
  int ep_calls_fwd, ep_calls_bwd, ep_calls_recomp;
  double ep_bytes;
  double embed_fwd_s, embed_bwd_s; /* the first stage's embedding (its TP reduction included) */
  double head_fwd_s, head_bwd_s;   /* the last stage's final norm, LM head and loss */
  double p2p_bytes;       /* what one rank sends the next stage per microbatch */
  double layer_params;    /* parameters per GPU of one layer (dense / tp + experts / (tp ep)) */
  double layer_expert_params; /* ... of which expert weights */
  double embed_params, head_params; /* per GPU, on the first and last stage */
} cm_layer_profile;
int cm_layer_profile_get(cm_model *cm, int tp, int cp, int ep, int dp, int mbs, int sp,
                         spec_recompute rc, cm_layer_profile *out);
/* The data-parallel tail of one pipeline rank (the simulator and the backend run it): the
 * parameters it holds over its virtual stages r, r+P, ... < nvs (layers[j] layers each; the
 * embedding on stage 0, the LM head on the last), their gradients reduced over the DP group
 * (experts over expert-DP), the shard Adam updates, and what ZeRO gathers back after. */
typedef struct cm_tail {
  cm_coll reduce;           /* reduce-scatter under ZeRO >= 1, else all-reduce */
  double dense_grad_bytes;  /* over the DP group (dp * cp ranks) */
  double expert_grad_bytes; /* over the expert-DP group */
  double shard_params;      /* parameters of this rank's optimizer step */
  double gather_bytes;      /* ZeRO >= 1: parameters all-gathered after the step */
} cm_tail;
void cm_dp_tail(const cm_model *cm, const cm_layer_profile *pr, const int *layers, int r, int P,
                int nvs, int dpcp, int ep, int zero, cm_tail *out);

/* Bytes Adam moves per parameter: reads weight, gradient, m, v (fp32); writes weight, m, v and
 * the bf16 copy. */
#define CM_ADAM_BYTES_PER_PARAM 30.0
/* Optimizer step time for `params` parameters held by one GPU (Adam, fp32 master weights). */
double cm_optimizer_time(const cm_model *cm, double params);

/* ---- the ops of one rank, as the cost model prices them (the backend runs these) ---------- */
typedef enum { CM_PART_LAYER, CM_PART_EMBED, CM_PART_HEAD } cm_part;
typedef enum { CM_LOP_GEMM, CM_LOP_ATTN, CM_LOP_MEM, CM_LOP_COLL } cm_lop_kind;
typedef struct cm_lop {
  cm_lop_kind kind;
  const char *name;       /* static: "qkv", "attn", "fc1", "norm1", "tp", "dispatch", ... */
  double m, n, k, batch;  /* GEMM: batch products m x n x k; ATTN: batch = sequences x heads
                             of this rank, m queries, n keys, k head dim */
  int causal;             /* ATTN */
  int backward;           /* ATTN: a piece of the attention's backward (at attn_bwd_eff) */
  int recompute;          /* 1: recomputation in the backward (not model FLOPs) */
  double bytes;           /* MEM: bytes read and written; COLL: per-rank buffer */
  cm_coll coll;           /* COLL */
  spec_grp group;         /* COLL: TP, CP or EP */
} cm_lop;
#define CM_LOPS_MAX 64
/* The ops of one part of a stage (a transformer layer, the embedding, or the final norm, LM
 * head and loss) for one microbatch on one rank, forward (fwd = 1) or backward, in the order
 * Megatron-LM runs them, with the shapes cm_eval prices (the backward of a recomputed layer
 * begins with what it recomputes). Attention backward is two forward-sized attentions and a
 * product of the output's size (5 products where the forward has 2). Returns the count. */
int cm_part_ops(const cm_model *cm, cm_part part, int tp, int cp, int ep, int mbs, int sp,
                spec_recompute rc, int fwd, cm_lop *out);
/* FLOPs of an op (GEMM and ATTN; causal attention counts half its square), 0 otherwise. */
double cm_lop_flops(const cm_lop *op);
/* Time of a compute op as the cost model prices it alone (GEMM exactly as in a layer's cost;
 * ATTN at the forward attention efficiency, a backward piece at the backward's; MEM at HBM
 * bandwidth; COLL 0): the simulator uses
 * these as the shares of a part's compute time between its collectives. */
double cm_lop_time(const cm_model *cm, const cm_lop *op);
/* Flash attention as a layer's cost prices it: `batch` sequences x heads of m queries, n keys,
 * head dim k (causal keeps half); the forward's FLOPs at attn_fwd_eff, or (backward = 1) the
 * whole backward, its two passes and the recomputed score product, 2.5 x the forward's FLOPs at
 * attn_bwd_eff; plus one kernel's overhead. */
double cm_attn_time(const cm_model *cm, double m, double n, double k, double batch, int causal,
                    int backward);
/* Time of one GEMM (m x n x k, the model's dtype) and its efficiency (fraction of peak). */
double cm_gemm_time(const cm_model *cm, double m, double n, double k, double *eff);

#endif
