/* Internals of costmodel/: the model handle with what is precomputed per (model, cluster),
 * per-layer costs, and helpers shared by the topology, collective, compute, memory and
 * pipeline parts. */
#ifndef PODPLAN_CM_INT_H
#define PODPLAN_CM_INT_H

#include "podplan/cm.h"

#define CM_GIB (1024.0 * 1024.0 * 1024.0)

/* Caches shared by evaluations of one model (direct-mapped; a miss recomputes). */
#define CM__COLL_CACHE 4096
#define CM__LAYER_CACHE 1024
#define CM__PLACE_CACHE 256
typedef struct cm__coll_entry {
  unsigned long long pl_key; /* 0 = empty */
  double bytes;
  int coll;
  int algo;
  double time;
} cm__coll_entry;

typedef struct cm__cache cm__cache;

struct cm_model {
  spec_model m;
  spec_cluster c;
  cm_params p;
  /* precomputed */
  double peak_flops;       /* dense peak of the model's dtype, FLOP/s */
  double peak_bf16_flops;  /* bf16 peak (attention runs in bf16 under fp8 training) */
  double hbm_bps;          /* effective HBM bandwidth, B/s */
  double act_bytes;        /* bytes per activation element (2) */
  int dh;                  /* head dimension */
  double layer_params;     /* parameters of one transformer layer (all experts) */
  double layer_dense_params; /* attention, norms and (dense models) the MLP of a layer */
  double layer_expert_params; /* all experts' MLP weights of a layer (0 when dense) */
  double embed_params;     /* input embedding */
  double head_params;      /* LM head; a tied head is still a copy on the last stage */
  double flops_per_token;  /* model FLOPs per token (6N + causal attention), fwd+bwd */
  double recompute_full_per_token;      /* extra FLOPs per token of full recompute */
  double recompute_selective_per_token; /* extra FLOPs per token of selective recompute */
  double gpu_bytes;        /* GPU memory, bytes */
  /* fabric */
  int gpn, dom;            /* GPUs per node, per NVLink domain */
  int leaf_nodes;          /* nodes under one leaf (per rail when rail-optimized) */
  cm__cache *cache;        /* mutable even through a const cm_model */
};

/* Cost of one transformer layer for one microbatch on one rank of a stage. */
typedef struct cm__layer {
  double fwd_s, bwd_s, recomp_s;          /* compute (GEMMs, attention, memory-bound ops) */
  double tp_fwd_s, tp_bwd_s, tp_recomp_s; /* exposed TP/SP collectives */
  double cp_fwd_s, cp_bwd_s;              /* exposed ring-attention exchanges */
  double ep_fwd_s, ep_bwd_s, ep_recomp_s; /* MoE all-to-all */
  double act_bytes;                       /* activations kept for backward */
  double work_bytes;                      /* transient working set (recompute, backward) */
  /* what the communication is made of, for the simulator */
  double tp_bytes;                        /* buffer of each TP collective */
  double cp_step_bytes;                   /* K and V of one ring-attention step (forward) */
  double ep_bytes;                        /* tokens one rank dispatches to its experts */
} cm__layer;

typedef struct cm__layer_entry {
  int valid, tp, cp, ep, mbs, sp, recompute;
  cm__layer layer;
  double emb_f, emb_b, emb_mem, head_f, head_b, head_mem;
} cm__layer_entry;

/* A placement of cm_place_group, by its key (n, stride); key 0: empty. */
typedef struct cm__place_entry {
  unsigned long long key;
  cm_place pl;
} cm__place_entry;

struct cm__cache {
  cm__coll_entry coll[CM__COLL_CACHE];
  cm__layer_entry layer[CM__LAYER_CACHE];
  cm__place_entry place[CM__PLACE_CACHE];
};

/* The degrees a stage runs with, and where its groups sit. */
typedef struct cm__cfg {
  int tp, cp, dp, ep;
  int mbs;                 /* sequences per microbatch on one data-parallel rank */
  int sp;
  spec_recompute recompute;
  cm_place tp_pl, cp_pl, dp_pl, ep_pl, edp_pl; /* edp: expert data parallelism (dp / ep) */
} cm__cfg;

/* The collective parameters of cm_params_default (cm_params.c). */
void cm__coll_defaults(cm_params *p);
/* The ramp of an algorithm's bandwidth with the per-rank share of a message. */
double cm__ramp(const cm_algo_params *a, double bytes);
/* Layer cost of a configuration. */
void cm__layer_cost(const cm_model *cm, const cm__cfg *g, cm__layer *out);
/* Extra time and memory of the first stage (embedding) and of the last (final norm, LM head,
 * loss), per microbatch. */
void cm__embed_cost(const cm_model *cm, const cm__cfg *g, double *fwd_s, double *bwd_s,
                    double *mem_bytes);
void cm__head_cost(const cm_model *cm, const cm__cfg *g, double *fwd_s, double *bwd_s,
                   double *mem_bytes);
/* Time of a memory-bound op moving `bytes`. */
double cm__mem_time(const cm_model *cm, double bytes);
/* GEMM time with a batch count (batched GEMMs of the same shape). */
double cm__gemm(const cm_model *cm, double m, double n, double k, double batch, double peak,
                double *eff);

/* cm_fingerprint with `params` ("name=value,...", or NULL) applied to every probe after its
 * defaults are mixed in, so a change seen only through the probes' predictions; *refused (may
 * be NULL) counts the probes the model refused. cm_fingerprint() is cm__fingerprint_with(NULL). */
unsigned long long cm__fingerprint_with(const char *params, int *refused);

#endif
