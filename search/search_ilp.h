/* Alpa's intra-operator pass (Zheng et al., OSDI'22, Sec. 4) for one transformer layer on a 2-D
 * logical device mesh: every operator has a set of sharding strategies, each with a
 * communication and a compute cost; an edge between a producer and a consumer costs the
 * resharding between the producer's output layout and the layout the consumer needs. The
 * integer program picks one strategy per operator (one-hot s_v), the quadratic resharding
 * term s_u' R_uv s_v linearised with edge variables e_uv (sum e = 1, e <= s on rows and
 * columns), and an optional memory row; CBC solves it. Internal to search/ (the two-level
 * method and its test); CBC is linked only here. */
#ifndef PODPLAN_SEARCH_ILP_H
#define PODPLAN_SEARCH_ILP_H

#include "podplan/cm.h"
#include "podplan/err.h"
#include "podplan/spec.h"

#define SEARCH__ILP_MAX_OPS 24
#define SEARCH__ILP_MAX_EDGES 32

/* What one mesh axis does in an operator's strategy (layer graphs). Activation layouts use
 * R, B, S, D (the last dimension: hidden, heads or the MLP width); matmuls also N (Megatron
 * column split: weight split on its output dimension), K (row split: the contraction
 * dimension split, the output all-reduced) and KRS (row split, the output reduce-scattered
 * over the sequence, as Megatron's sequence parallelism does). */
typedef enum {
  SEARCH__AX_R,   /* replicated along this axis */
  SEARCH__AX_B,   /* batch split */
  SEARCH__AX_S,   /* sequence split */
  SEARCH__AX_D,   /* last dimension split */
  SEARCH__AX_N,   /* matmul: column split */
  SEARCH__AX_K,   /* matmul: row split, all-reduce */
  SEARCH__AX_KRS, /* matmul: row split, reduce-scatter */
  SEARCH__AX_N_MODES
} search__ax_mode;

/* Operator kinds of the layer graph (OTHER: a hand-made graph). Heavy kinds (MATMUL, ATTN)
 * decide what an axis does in the solution's mapping. */
typedef enum {
  SEARCH__OP_OTHER,
  SEARCH__OP_INPUT,   /* the layer's input (its strategies are layouts; it costs nothing) */
  SEARCH__OP_NORM,
  SEARCH__OP_MATMUL,
  SEARCH__OP_ATTN,    /* attention core: scores, softmax, weighted sum */
  SEARCH__OP_ADD,     /* residual add (dropout folded in) */
  SEARCH__OP_ACT      /* activation (gelu/relu; swiglu: the gate product) */
} search__op_kind;

typedef struct search__ilp_strat {
  double cost;        /* c_v + d_v: communication and compute beyond an even split */
  double mem;         /* bytes per device (the memory row) */
  unsigned char mode[2]; /* per mesh axis (search__ax_mode; layer graphs) */
} search__ilp_strat;

typedef struct search__ilp_op {
  char name[16];
  search__op_kind kind;
  double flops;       /* heavy ops: FLOPs of forward and backward (weights the mapping) */
  int nstrat;
  search__ilp_strat *s; /* nstrat strategies (owned) */
} search__ilp_op;

typedef struct search__ilp_edge {
  int u, v;           /* producer, consumer */
  double *r;          /* nstrat(u) x nstrat(v) resharding costs, row-major (owned) */
} search__ilp_edge;

typedef struct search__ilp_graph {
  int nops, nedges;
  search__ilp_op op[SEARCH__ILP_MAX_OPS];
  search__ilp_edge edge[SEARCH__ILP_MAX_EDGES];
  double mem_budget;  /* bytes per device; 0: no memory row */
  int mesh[2];        /* layer graphs: the logical mesh the strategies are for */
} search__ilp_graph;

/* An empty graph; ops and edges are added in order. search__ilp_graph_free frees what they
 * own (and leaves an empty graph). */
void search__ilp_graph_init(search__ilp_graph *g);
void search__ilp_graph_free(search__ilp_graph *g);
/* Adds an operator with n strategies of the given costs (mem may be NULL: 0); returns its
 * index, or -1 with err set. */
int search__ilp_op_add(search__ilp_graph *g, const char *name, int n, const double *cost,
                       const double *mem, pp_err *err);
/* Adds an edge u -> v with its nstrat(u) x nstrat(v) resharding costs (row-major). */
int search__ilp_edge_add(search__ilp_graph *g, int u, int v, const double *r, pp_err *err);

/* The logical mesh a layer graph is built for: shape[0] x shape[1] devices, device (i, j) is
 * gpus[i * shape[1] + j] (axis 1 fastest, as Alpa's logical meshes reshape the device list). */
typedef struct search__ilp_mesh {
  int shape[2];
  const int *gpus;    /* shape[0]*shape[1] GPU ids; only the default costs read them */
  int force_batch0;   /* Alpa's force_batch_dim_to_mesh_dim = 0: axis 0 splits the batch */
} search__ilp_mesh;

/* How a layer graph's strategies are priced. */
typedef struct search__ilp_costs {
  /* 0: seconds from the cost model (cm_coll_best on where each axis's group sits, compute from
   * the GEMM model); 1: Alpa's alpha-beta weights (relative units, no compute costs,
   * replicated heavy operators not allowed) */
  int alpa;
  double alpha[2], beta[2]; /* alpa: per mesh axis (Alpa's defaults: (1, 1) and (1, 0.1)) */
  cm_model *cm;          /* default costs: the cost model (cm_coll_best, cm_gemm_time) */
  int samples;           /* sequences per microbatch on the whole mesh */
  int microbatches;      /* default costs: weight gradients are reduced once per iteration,
                            so their all-reduce is charged 1/microbatches per microbatch
                            (two-level leaves it at 1: charged in full, as Alpa does) */
  int allow_seq;         /* strategies that split the sequence (S, KRS) are offered */
  double act_bytes;      /* bytes per activation element (2) */
  double grad_bytes;     /* bytes per gradient element reduced */
  double state_bytes;    /* memory row: bytes per parameter (weights, gradients, optimizer) */
  /* How the data axes (batch or sequence split) hold a weight's state and reduce its gradient,
   * as Alpa's auto-sharding options: 0 replicated, gradients all-reduced; 1-2
   * prefer_reduce_scatter (ZeRO-1 and -2): gradients reduce-scattered, the update sharded, the
   * weights all-gathered, optimizer state (and at 2 gradients) sharded; 3 force_zero_stage_3:
   * everything sharded, the weights all-gathered for the forward and again for the backward
   * of every microbatch, gradients reduce-scattered every microbatch. */
  int zero;
} search__ilp_costs;
/* Alpa's defaults: alpha (1, 1), beta (1, 0.1), 2-byte activations and gradients, 16 bytes of
 * state per parameter (fp16 weights and gradients, fp32 master weights and Adam moments),
 * zero 0 (its GPT suite sets prefer_reduce_scatter: zero 1). */
void search__ilp_costs_alpa(search__ilp_costs *c, int samples);

/* Builds the operator graph of one transformer layer of model m: input, norm, QKV, attention,
 * output projection, residual add, norm, FC1 (swiglu: gate and up), activation, FC2, residual
 * add, and an edge from the output back to the input (the next identical layer reads it).
 * MoE layers are priced as one dense MLP carrying top_k times the tokens (no expert
 * parallelism). PP_INPUT when the mesh admits no strategy for some operator. */
int search__ilp_layer(const spec_model *m, const search__ilp_mesh *mesh,
                      const search__ilp_costs *c, search__ilp_graph *out, pp_err *err);

typedef struct search__ilp_sol {
  int choice[SEARCH__ILP_MAX_OPS]; /* strategy of each operator */
  double objective;
  int optimal;        /* 1: proven optimal (CBC) or enumerated */
  long long nodes;    /* CBC: branch-and-bound nodes; brute force: complete assignments */
} search__ilp_sol;

/* The objective of a choice (sum of strategy costs and of the chosen resharding costs); INFINITY
 * when the memory row is violated. */
double search__ilp_objective(const search__ilp_graph *g, const int *choice);
/* 1 when built with CBC (PODPLAN_CBC); without it search__ilp_solve returns PP_NOTIMPL. */
int search__ilp_have_cbc(void);
/* Solves the ILP with CBC (quiet, one thread). PP_INTERNAL when CBC finds no optimum. */
int search__ilp_solve(const search__ilp_graph *g, search__ilp_sol *out, pp_err *err);
/* The same objective by enumerating every assignment, depth-first in operator order, cutting a
 * branch once its partial cost plus the least strategy costs of the operators still open
 * reaches the best complete assignment (all costs are >= 0, so no better one lies below it):
 * for tests on small graphs. PP_INPUT when more than max_assignments partial assignments
 * would be visited, or a cost is negative. */
int search__ilp_brute(const search__ilp_graph *g, double max_assignments, search__ilp_sol *out,
                      pp_err *err);

/* What a layer graph's solution means for the cost model. Each mesh axis of size > 1 plays a
 * role by what the heavy operators (matmuls, attention) do on it, weighted by their FLOPs:
 * data (batch or sequence split), model (Megatron column/row split, heads split) or
 * replicated; tp = product of the model axes, dp = product of the others. */
typedef enum { SEARCH__ROLE_NONE, SEARCH__ROLE_DATA, SEARCH__ROLE_MODEL, SEARCH__ROLE_REP } search__role;
typedef struct search__ilp_map {
  search__role role[2];
  int tp, dp;
  int expressible;    /* 1: every heavy operator agrees with its axis's role and no axis is
                         replicated (else the cost model prices the nearest Megatron plan) */
  int seq_split;      /* a light operator splits the sequence on a model axis (Megatron-SP) */
} search__ilp_map;
void search__ilp_map_solution(const search__ilp_graph *g, const search__ilp_sol *s,
                              search__ilp_map *out);

/* "B,N" style name of a layer-graph strategy (out holds at least 16 bytes). */
void search__ilp_strat_name(const search__ilp_strat *s, char *out);

#endif
