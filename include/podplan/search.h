/* podplan search: the plan space every method shares and the four methods on one cost model:
 * exhaustive (every uniform plan), megatron (the published heuristic), two-level (Alpa:
 * inter-op DP over layer slices x sub-meshes, intra-op ILP per stage solved with CBC) and
 * global (a joint DP over stage slicing, device blocks and per-stage configuration, with a
 * certified lower bound and so an optimality gap). Owns the plan space, the methods and the
 * ranking of their plans; the simulator's re-scoring (the funnel), the store and MPI are the
 * caller's (the CLI hands in hooks). Depends on spec.h and cm.h; CBC is linked only here.
 *
 * Work is split into numbered units (exhaustive: slices of the uniform space; global: its
 * uniform part, two-level's plans, then one per (microbatch count, sp, ZeRO); two-level and
 * megatron: one unit) so that a search can be sharded
 * over MPI ranks (unit u on rank u mod R) and resumed after a kill (units already done are
 * skipped, their best plans handed back in). Every unit is searched by one thread with its
 * own cost model, in a fixed order, so the plans found and the evaluation count do not depend
 * on the number of threads or ranks. */
#ifndef PODPLAN_SEARCH_H
#define PODPLAN_SEARCH_H

#include <stddef.h>

#include "podplan/cm.h"
#include "podplan/err.h"
#include "podplan/spec.h"

typedef enum {
  SEARCH_EXHAUSTIVE,
  SEARCH_MEGATRON,
  SEARCH_TWO_LEVEL,
  SEARCH_GLOBAL,
  SEARCH_NMETHODS
} search_method;
const char *search_method_name(search_method m);
/* "exhaustive", "megatron", "two-level", "global"; PP_USAGE naming the choices otherwise. */
int search_method_parse(const char *name, search_method *out, pp_err *err);

/* ---- the plan space ---------------------------------------------------------------------
 * One description for every method. The global batch is an input (a training recipe fixes
 * it); everything else is searched within the limits below. A limit of 0 means none. */
typedef struct search_space {
  int gbs;               /* global batch, sequences per iteration (required) */
  int max_tp, max_pp, max_dp, max_cp, max_ep, max_vpp, max_mbs;
  unsigned recompute;    /* bit (1 << spec_recompute) per allowed value */
  unsigned zero;         /* bit per allowed ZeRO stage 0..3 */
  unsigned schedules;    /* bit (1 << spec_schedule) per allowed schedule */
  unsigned sp;           /* bit 0: sequence parallelism off allowed, bit 1: on allowed */
  int uniform_only;      /* global: no non-uniform stages (the uniform space only) */
  int same_recompute;    /* global: every stage of a plan recomputes alike (no per-stage
                            recomputation) */
  int hierarchy;         /* SEARCH_HIER_*: the plans a two-level decomposition can express */
} search_space;
/* --hierarchy: off (every plan), or the two-level space with islands of whole nodes or of
 * whole NVLink domains (search_island_gpus): every stage on 2^k GPUs inside one island or on
 * whole islands (Alpa's sub-mesh shapes, the island in the role of Alpa's host), and its
 * model-parallel groups (TP, CP, EP) inside one island; data parallelism may cross islands. */
enum { SEARCH_HIER_OFF, SEARCH_HIER_NODE, SEARCH_HIER_DOMAIN };
/* "off", "node" or "domain" (the option's own words). */
const char *search_hierarchy_name(int h);
/* GPUs of one island of the space on cluster c (0: no hierarchy). */
int search_island_gpus(const search_space *s, const spec_cluster *c);
/* Whether a stage on the n GPUs gpus[] (in rank order) with tp, cp, ep lies in the two-level
 * space of islands of I GPUs (I = 0: always). */
int search_island_stage_ok(int I, const int *gpus, int n, int tp, int cp, int ep);
/* The same for the block of GPUs [d, d + S) without its groups (tp = cp = ep = 1): what a
 * search that places contiguous blocks checks first. */
int search_island_block_ok(int I, int d, int S);
/* 1 when --hierarchy is on and one island holds every GPU of c: the two-level space is then
 * the whole space, and a search asked for it is bad usage (PP_USAGE from search_run). */
int search_island_single(const search_space *s, const spec_cluster *c);
/* Whether plan p (uniform or not) lies in space s's two-level space on cluster c. */
int search_island_plan_ok(const search_space *s, const spec_cluster *c, const spec_plan *p);
/* Whether plan p (uniform or not) lies in space s on cluster c: every restriction of s, the
 * two-level space included. Conservative: 0 where p does not show it (a non-uniform plan
 * under --max-mbs). A result of a search over a larger space whose best plans all lie in s is
 * then the result of s (the study's knob rungs use it). */
int search_space_plan_ok(const search_space *s, const spec_cluster *c, const spec_plan *p);
/* Everything allowed (tp, cp and ep then follow the model: divisors of heads, seq_len and
 * experts), for a global batch of gbs sequences. */
void search_space_default(int gbs, search_space *out);

/* The options that restrict a space, one table for the CLI's option text and parsing:
 * "max-tp" N, ..., "no-cp", "no-ep", "recompute" LIST (none,selective,full), "zero" LIST
 * (0,1,2,3), "schedules" LIST (gpipe,1f1b,interleaved), "sp" LIST (off,on), "hierarchy" one of
 * off,node,domain. */
typedef struct search_space_opt {
  const char *name;  /* long option without the dashes */
  const char *arg;   /* metavariable for the help text; NULL: a flag */
  const char *help;
} search_space_opt;
size_t search_space_opt_count(void);
const search_space_opt *search_space_opt_get(size_t i);
/* Applies option `name` with `value` (NULL for flags); PP_USAGE naming the option and the
 * reason on a bad value. */
int search_space_set(search_space *s, const char *name, const char *value, pp_err *err);
/* "max-tp=8,no-cp,..." : the non-default restrictions in option order (for the store and for
 * recognising the same search again). Writes at most n bytes. */
void search_space_describe(const search_space *s, char *buf, size_t n);

/* The uniform space on a (model, cluster): every combination of tp, pp, dp, cp, ep, mbs, vpp,
 * recompute, zero, sp and schedule that validates, in a fixed order; index i names one plan. */
typedef struct search_uspace search_uspace;
int search_uspace_build(const search_space *s, const spec_model *m, const spec_cluster *c,
                        search_uspace **out, pp_err *err);
void search_uspace_free(search_uspace *u);
size_t search_uspace_size(const search_uspace *u);
/* Plan i (resolved and valid; uniform plans own no memory). */
void search_uspace_plan(const search_uspace *u, size_t i, spec_plan *out);

/* One stage of a non-uniform plan on a contiguous block of GPUs [first_gpu, first_gpu+ngpus)
 * (a block may straddle nodes; the cost model prices where it sits). */
typedef struct search_stage {
  int layers;            /* transformer blocks; stages take them in order from layer 0 */
  int first_gpu, ngpus;  /* ngpus == tp * cp * dp */
  int tp, cp, dp, ep;
  spec_recompute recompute;
} search_stage;
/* Builds the non-uniform plan of n stages (plan-level: gbs, microbatches, sp, zero, 1F1B)
 * and resolves it; PP_PLAN naming the rule when it is not valid. */
int search_plan_build(const search_stage *st, int n, int gbs, int microbatches, int sp, int zero,
                      const spec_model *m, const spec_cluster *c, spec_plan *out, pp_err *err);

/* ---- results ----------------------------------------------------------------------------- */
typedef struct search_entry {
  spec_plan plan;        /* owned: spec_plan_clear */
  cm_result cm;          /* the cost model's score */
  int simulated;         /* 1 when sim_iter_s holds the simulator's score */
  double sim_iter_s;
  int unit;              /* work unit that found it */
} search_entry;

typedef struct search_result {
  search_method method;
  double space_size;     /* plans in the space the method searches (a double: it can exceed
                            2^63 for the global space; exact below 2^53) */
  long long evaluations; /* full cost-model evaluations */
  long long feasible;    /* evaluated plans that fit in memory */
  long long pruned;      /* plans skipped by a bound that provably keeps the optimum */
  double wall_s;
  int units, units_done; /* work units of the search and how many were searched */
  int units_carried;     /* ... of units_done: done in an earlier run (from its checkpoints) */
  int units_searched;    /* ... of units_done: searched by this call, on every rank */
  int complete;          /* 1: every unit searched to the end (global: 0 also when a unit's
                            enumeration of the plans near its bound passed its cap) */
  int certified;         /* global: best - bound <= gap * bound with the gap asked for, over a
                            bound from every unit (each unit's bound is valid however it
                            stopped: a search cut short by the time limit or the enumeration
                            cap is certified only when its bound still meets the gap) */
  double best_s;         /* best iteration time found (cost model); 0 when none */
  double lower_bound_s;  /* global: no plan of its space is faster (0 for other methods) */
  double gap;            /* global: (best - bound) / bound */
  int ntop;
  search_entry *top;     /* the best ntop feasible plans, fastest first */
  char why[256];         /* ntop == 0: why no plan is feasible */
  char note[512];        /* method-specific facts for the report (two-level: its stages,
                            sub-meshes and logical meshes; global: the bound's parts) */
} search_result;
void search_result_clear(search_result *r);

/* ---- running ----------------------------------------------------------------------------- */
typedef struct search_progress {
  int units, units_done;
  long long done, total; /* evaluations done, and expected (0: unknown) */
  double elapsed_s, evals_per_s;
  double best_s;         /* 0: none yet */
  double bound_s, gap;   /* global: 0 when not yet known */
} search_progress;

/* What a finished unit hands the caller (to checkpoint it): its counts and best plans. */
typedef struct search_unit_report {
  int unit;
  long long evaluations, feasible, pruned;
  double bound_s;        /* global: the unit's lower bound; 0 otherwise */
  int complete;          /* 0: stopped early by the time limit */
  const search_entry *top;
  int ntop;
} search_unit_report;

/* Sharding over the ranks of a job (MPI), supplied by the caller: search/ never calls MPI.
 * gather: every rank passes n bytes; rank 0 gets back all ranks' buffers concatenated (malloc'd,
 * *all) with lens[rank] bytes each (malloc'd, *lens); other ranks get NULL. bcast: rank 0's
 * *n bytes at *buf to every rank (others get a malloc'd copy). */
typedef struct search_comm {
  int rank, size;
  int (*gather)(void *ctx, const void *buf, size_t n, void **all, size_t **lens, pp_err *err);
  int (*bcast)(void *ctx, void **buf, size_t *n, pp_err *err);
  void *ctx;
} search_comm;

/* A cache of the two-level runs global makes (its unit 1: two-level with global's options),
 * for a caller that runs several global searches on one cost model (the pillar study's rungs:
 * the hierarchy on, a knob removed): a run whose two-level part reads the options alike takes
 * the cached one's plans instead of running two-level again. One cache per cost model (the
 * same model, cluster and parameters); not for searches that run at the same time. */
typedef struct search_cache search_cache;
search_cache *search_cache_new(void);
void search_cache_free(search_cache *c);

enum { SEARCH_P2P_AUTO, SEARCH_P2P_FIRST, SEARCH_P2P_SHARED };

typedef struct search_opts {
  search_method method;
  search_space space;
  int top;               /* best plans kept (default 10) */
  int threads;           /* 0: the online CPUs */
  double time_limit_s;   /* 0: none; the best plan, bound and gap so far are returned */
  double gap;            /* global: stop when the gap is at most this (default 0.01; 0: prove
                            the optimum) */
  int p2p_way;           /* global: how the bound takes the slowest pipeline boundary
                            (search_global.c, p2p_bound): SEARCH_P2P_AUTO (default) the first
                            boundary, and the per-stage share where that stops short; _FIRST or
                            _SHARED one way only (tests, comparisons) */
  /* two-level (Alpa) */
  int island_domain;     /* 1: the fast island is the whole NVLink domain, not the node */
  int alpa_defaults;     /* Alpa's GPT benchmark settings (power-of-two sub-meshes, recompute,
                            its alpha-beta weights in the ILP) */
  int layer_clusters;    /* layers clustered for the inter-op DP; 0: Alpa's default */
  int layer_sweep;       /* 1: one pass per layer-cluster count of Alpa's GPT grid search (8
                            and 16), the best kept (layer_clusters then unused) */
  int logical_all;       /* logical meshes "all" (Alpa's submesh_logical_shape_space): model
                            parallelism over every GPU of a sub-mesh, across its islands; 0:
                            inside one island (its GPT benchmarks' default) */
  /* sharding, resuming, progress, the two-level cache (all optional) */
  search_cache *cache;
  const search_comm *comm;
  const unsigned char *units_done;   /* [units]: 1 = done in an earlier run; skipped */
  size_t nunits_done;
  const search_entry *prior;         /* the best plans of those units (re-evaluated here) */
  int nprior;
  long long prior_evaluations, prior_feasible, prior_pruned;
  double prior_bound_s;              /* global: min of the done units' bounds (0: none) */
  /* called on the calling thread (rank 0 only for progress) */
  int (*on_unit)(const search_unit_report *r, void *ctx);  /* non-zero aborts the search */
  void (*progress)(const search_progress *p, void *ctx);
  void *ctx;
} search_opts;
void search_opts_default(search_method m, int gbs, search_opts *out);

/* The number of work units the search with these options has (to size units_done) and the
 * size of its space (plans; space_size may be NULL), known before it runs. */
int search_units(cm_model *cm, const search_opts *o, int *units, double *space_size,
                 pp_err *err);

/* Runs the search on the cost model's (model, cluster, parameters). With o->comm, every rank
 * calls it; rank 0 gets the merged result, the others their own part. No feasible plan is a
 * result (ntop == 0, why says why), not an error. */
int search_run(cm_model *cm, const search_opts *o, search_result *out, pp_err *err);

#endif
