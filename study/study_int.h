/* Internals of study/: a CSV reader (RFC 4180: quoted fields, doubled quotes, CRLF), the
 * built-in copies of benchmarks/data/published_runs.csv, nccl_busbw.csv and pillar_grid.csv,
 * what the pillar study's run and its output share, a capacity point, and the readers of
 * stored study cases. */
#ifndef PODPLAN_STUDY_INT_H
#define PODPLAN_STUDY_INT_H

#include <stddef.h>
#include <stdio.h>

#include "podplan/err.h"

typedef struct study__csv {
  int nrows;      /* data rows (header excluded) */
  int ncols;      /* columns of the header */
  char **header;  /* ncols names */
  char ***rows;   /* nrows x ncols fields ("" when a row is short) */
  char *buf;      /* storage of every field */
} study__csv;

/* Parses text (len bytes). A row with more fields than the header, an unterminated quote,
 * text after a closing quote ("a"b) or an empty header fail with a message naming `origin`
 * and the line. */
int study__csv_parse(const char *text, size_t len, const char *origin, study__csv *out,
                     pp_err *err);
void study__csv_free(study__csv *c);
/* Writes one field, quoted (RFC 4180) when it holds a comma, a quote or a line break. */
void study__csv_field(FILE *f, const char *s);
/* Column index by name, or -1. */
int study__csv_col(const study__csv *c, const char *name);

/* benchmarks/data/published_runs.csv and nccl_busbw.csv as built into the binary
 * (study/CMakeLists.txt embeds them). */
extern const unsigned char study__published_runs[];
extern const size_t study__published_runs_len;
extern const unsigned char study__nccl_busbw[];
extern const size_t study__nccl_busbw_len;
extern const unsigned char study__pillar_grid[];   /* benchmarks/data/pillar_grid.csv */
extern const size_t study__pillar_grid_len;

/* Reads a CSV file, or the built-in text when path is NULL. */
int study__csv_load(const char *path, const unsigned char *builtin, size_t builtin_len,
                    const char *name, study__csv *out, pp_err *err);

/* ---- the pillar study (study_pillar.c runs the cases, study_pillar_out.c writes them) ---- */
typedef enum {
  STUDY__PM_MEGATRON,
  STUDY__PM_TWO_LEVEL,        /* Alpa's defaults, the island is the node */
  STUDY__PM_TWO_LEVEL_DOMAIN, /* Alpa's defaults, the island is the NVLink domain */
  STUDY__PM_TWO_LEVEL_ALL,    /* Alpa as its GPT suite runs: its defaults, logical meshes
                                 "all", layer clusters 8 and 16; the island is the node */
  STUDY__PM_TWO_LEVEL_OPEN,   /* without Alpa's defaults (every recompute and SP choice, the
                                 cost model's weights in its ILP), the island is the node */
  STUDY__PM_EXHAUSTIVE,       /* the uniform space */
  STUDY__PM_SPACE_NODE,       /* global restricted to the two-level space, island = node */
  STUDY__PM_SPACE_DOMAIN,     /* ... island = NVLink domain */
  STUDY__PM_GLOBAL,
  /* global with one knob removed (what each knob is worth): */
  STUDY__PM_NO_CP,            /* no context parallelism */
  STUDY__PM_NO_EP,            /* no expert parallelism (MoE models only) */
  STUDY__PM_NO_ZERO23,        /* ZeRO 0 or 1 only */
  STUDY__PM_NO_INTERLEAVED,   /* no interleaved schedule */
  STUDY__PM_SAME_RECOMPUTE,   /* one recomputation for every stage */
  STUDY__PM_UNIFORM,          /* uniform plans only: equal stages of one configuration */
  STUDY__PM_TP_IN_NODE,       /* tensor parallelism inside a node (max-tp = GPUs per node) */
  STUDY__PM_INTER_ONLY,       /* ablation: two-level with one GPU per stage (no intra-op) */
  STUDY__PM_INTRA_ONLY,       /* ablation: two-level with one stage (no inter-op) */
  STUDY__PM_N
} study__pm;
extern const char *const study__pm_name[STUDY__PM_N];
#define STUDY__PM_KNOB_FIRST STUDY__PM_NO_CP
#define STUDY__PM_KNOB_LAST STUDY__PM_TP_IN_NODE
/* What a knob rung removes, for the tables ("context parallelism", ...); NULL for the others. */
const char *study__pm_knob(study__pm m);

/* The best plans each search of the ladder keeps: what the robustness pass re-scores and what
 * a rung must hold to take global's result. */
#define STUDY__TOP 3

/* One method's outcome on one case (stored as the case's JSON). */
typedef struct study__pres {
  int ran;                /* 1: this method belongs to the case */
  int found;              /* a feasible plan */
  char why[256];          /* !found: why not */
  double cm_s;            /* best iteration time, cost model */
  double sim_s;           /* the chosen plan (fastest simulated of the top 3), simulated */
  double sim_cm_s;        /* ... and its cost-model time */
  int sim_stopped;        /* of its best K, simulations stopped by --sim-time-limit */
  double mfu;             /* cost model, best plan */
  double tflops;          /* ... model TFLOP/s per GPU */
  double mem_gib;
  double wall_s;          /* search wall time (the search alone, without the simulator) */
  double space;           /* plans in the method's space */
  long long evaluations;
  double bound_s, gap;    /* global: lower bound and its gap */
  int complete;           /* searched to the end (no time limit) */
  long long run_id;       /* the search run in the store */
  char plan[512];         /* the best plan (cost model), briefly */
  char traits[512];       /* global: what its best plan does that two-level cannot */
  int resumed;            /* read back from the store, not searched in this invocation */
  int copied;             /* not searched, another rung's result (not stored apart): 1 the
                             node rung's (a domain rung where the NVLink domain is the node),
                             2 global's (its best plans all lie in this rung's space) */
} study__pres;

/* The verdicts the robustness pass judges per case (study__verdict_text): two-level's
 * variants within 1%, the hierarchy's price, the winner of the practical methods, then one
 * per knob rung ("worth more than 1%"). */
#define STUDY__V_WINNER 5
#define STUDY__V_KNOB 6
#define STUDY__NVERDICT (STUDY__V_KNOB + STUDY__PM_KNOB_LAST - STUDY__PM_KNOB_FIRST + 1)
extern const char *const study__verdict_text[STUDY__NVERDICT];
extern const char *const study__verdict_short[STUDY__NVERDICT]; /* table headers */


typedef struct study__robust {
  int draws;                      /* parameter draws judged (0: not computed) */
  int nominal[STUDY__NVERDICT];   /* at the nominal parameters: 1 holds, 0 not, -1 n/a */
  int held[STUDY__NVERDICT];      /* draws in which it holds */
  int judged[STUDY__NVERDICT];    /* draws in which it applies */
  int sim_flip[STUDY__NVERDICT];  /* the simulated times decide it the other way */
  int winner;                     /* the nominal winner (a study__pm), -1: none */
} study__robust;

typedef struct study__pcase {
  char set[16];           /* quick, full, ablation */
  char fabric[64], model[64];
  char model_arg[1024];   /* preset name or inline JSON */
  int gpus, gbs;
  char na[256];           /* not on this fabric: why (no method ran) */
  study__pres res[STUDY__PM_N];
  study__robust rob;
} study__pcase;
/* "model xGPUs" naming case k among cases[0..n), with " gbs B" where another case has the
 * same model and GPU count at another batch (the weak-scaling rows). */
void study__case_label(const study__pcase *cases, int n, const study__pcase *k, char *buf,
                       size_t len);
/* Verdict v on case k: -1 n/a (or no draws), 0 robustly false, 1 robustly true (the nominal
 * verdict holds in >= 90% of the draws that judged it), 2 unresolved; *frac the share of
 * draws in which it holds. */
int study__verdict(const study__pcase *k, int v, double *frac);

/* The trait of a plan that recomputes less than Alpa's defaults (the open two-level could). */
#define STUDY__TRAIT_RECOMPUTE "no full recompute (Alpa's defaults recompute every layer)"

/* Re-scores each case's rungs under `draws` draws of the cost-model parameters (the
 * calibration's posterior on calib_cluster's cases: calib_sigmas "name=sigma,...", else each
 * parameter's error band) and fills every case's rob (study_pillar_robust.c). */
struct store;
int study__pillar_robust(study__pcase *cases, int n, struct store *st, int draws,
                         const char *calib_cluster, const char *calib_params,
                         const char *calib_sigmas, pp_err *err);

/* Writes DIR/pillar.csv, pillar.md and the plots; prints the tables to out. */
typedef struct study__pillar_run {
  study__pcase *cases;
  int ncases;
  double wall_s;
  int quick;
  const char *db;
  double gap_target;
  int simulate, sim_max_gpus; /* each method's best K simulated on cases up to this many GPUs
                                 (0: every case) */
  double sim_time_limit_s;    /* per simulation (0: none) */
  int draws;                  /* parameter draws of the robustness pass (0: not made) */
  int posterior;              /* 1: a calibration's posterior drove some of them */
} study__pillar_run;
int study__pillar_write(const study__pillar_run *r, const char *out_dir, FILE *out, int *plots,
                        pp_err *err);
/* The gap of a method's best to global's lower bound: (t - bound) / bound; -1 when unknown. */
double study__pillar_gap(const study__pcase *k, study__pm m);

/* ---- the capacity study (study_capacity.c): one point of a fabric ----------------------- */
typedef enum {
  STUDY__CAP_OK,      /* a plan fits: its figures */
  STUDY__CAP_MEMORY,  /* below the memory lower bound: not searched */
  STUDY__CAP_NOPLAN,  /* the search found no feasible plan (why says why) */
} study__cap_status;

typedef struct study__cap_point {
  int fabric, gpus;
  study__cap_status status;
  char why[320];
  char plan[1024];       /* the best plan in full (uniform string or its stages) */
  char brief[96];        /* ... briefly, for the table */
  double cm_s;           /* cost model's iteration time of the best plan */
  double sim_s;          /* simulated (0: not simulated) */
  int simulated;
  double mfu;            /* at the time used (simulated when simulated) */
  double mem_gib;
  double bound_s, gap;   /* global's lower bound and gap */
  int complete;
  long long run_id;      /* the search run */
  double wall_s;         /* the point's search and simulation, in the run that did it */
  int resumed;           /* read back from the store */
  /* derived (not stored: they depend on tokens, prices and deadline) */
  double iter_s, days, gpu_hours, cost;
  int meets;
} study__cap_point;

/* ---- stored study cases read back (study_stored.c) ----------------------------------------
 * The result_json of a study case, as study_pillar.c and study_capacity.c write it, parsed
 * into a pillar method's result or a capacity point's stored fields (the others are left as
 * they are). Text that is no such object (a key missing or of another type, a negative count
 * or id, a sim_stopped that is no int, a status other than ok and no-plan) fails with
 * PP_INPUT and one line naming the case ("study case 'KEY': result_json: ..."). */
int study__pres_parse(const char *text, const char *key, study__pres *r, pp_err *err);
int study__point_parse(const char *text, const char *key, study__cap_point *p, pp_err *err);

#endif
