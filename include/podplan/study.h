/* podplan studies (study/, library podplan_study): the funnel every search goes through (a
 * search run stored, resumable, its best simulated), the validation of the cost model against
 * published training runs, the pillar study (two-level against global search, fabric by
 * fabric), capacity planning, the calibration jobs of `podplan calibrate`, the report of a
 * store, and their plots (gnuplot). Owns the study code and the built-in copies of the
 * published data and the pillar grid (benchmarks/data keeps the files). Depends on spec.h,
 * cm.h, search.h, sim.h, store.h and, for the calibration jobs, cal.h and be.h. */
#ifndef PODPLAN_STUDY_H
#define PODPLAN_STUDY_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "podplan/cal.h"
#include "podplan/cm.h"
#include "podplan/err.h"
#include "podplan/search.h"
#include "podplan/spec.h"
#include "podplan/store.h"

typedef struct study_validate_opts {
  const char *data;    /* a published-runs CSV; NULL: the copy built into podplan */
  const char *busbw;   /* a published nccl-tests bandwidth CSV; NULL: the built-in copy */
  const char *out_dir; /* where validate.csv goes; NULL: nowhere */
  const char *db;      /* store the published and predicted scores here; NULL: nowhere */
  FILE *out;           /* the table and the MAPE summary; NULL: stdout */
  /* a calibration (podplan calibrate): the rows on a cluster named calib_cluster take its
   * values (calib_params, a cm_params_apply list) before their own settings, and their
   * costmodel scores record calib_id; NULL: none */
  const char *calib_cluster, *calib_params;
  long long calib_id;
} study_validate_opts;

/* Kendall's rank correlation of one set of published runs of one model with several plans:
 * the rows of one source whose models have the same shape (layers, hidden, heads, FFN, sequence,
 * vocabulary, experts), predicted against published iteration time. */
#define STUDY_RANK_GROUPS 16
typedef struct study_rank_group {
  char name[64];        /* "<source> <model name of its first row>" */
  int rows;
  int concordant, discordant; /* pairs ordered alike / oppositely (ties in either: neither) */
  double tau;           /* Kendall's tau-b */
} study_rank_group;

typedef struct study_validate_summary {
  int rows, used, skipped;     /* rows read, predicted, not usable */
  int target_rows;             /* rows of the accuracy target (SC'21 Table 1, Korthikanti, MT-NLG) */
  double target_mape;          /* mean |error| of iteration time over the target rows, percent */
  double target_max;           /* largest |error| among the target rows, percent */
  int holdout_rows;
  double holdout_mape;         /* the rows kept aside to check the model, percent */
  double holdout_max;
  int infeasible;              /* published configurations the model says do not fit */
  int target_infeasible;       /* ... among the target rows */
  int mem_rows;                /* rows whose memory was evaluated: every predicted row and the
                                  skipped ones that state the plan, batch, recompute and cluster */
  int mem_incomplete;          /* skipped rows without what memory needs */
  int mem_infeasible;          /* ... of mem_rows, predicted not to fit */
  double min_headroom_gib;     /* smallest GPU memory minus predicted peak among mem_rows */
  int min_headroom_row;        /* the row it belongs to */
  int coll_points;             /* bus bandwidths compared (messages >= 64 MiB, all collectives) */
  double coll_max_err;         /* largest |error| among the 8-GPU, one-node points, percent */
  int coll_multi_points;       /* ... of them across nodes or in a larger NVLink domain */
  int coll_multi_within;       /* ... of those within 15% */
  double coll_multi_max_err;   /* largest |error| among them, percent */
  int coll_flagged;            /* points of systems their authors report as underperforming
                                  (printed, not counted above) */
  int calibrated;              /* predicted rows that took the calibration's values */
  int rank_groups;             /* sets of runs of one model with at least 3 rows */
  study_rank_group rank[STUDY_RANK_GROUPS];
} study_validate_summary;

/* Kendall's tau-b of x against y over n pairs: (C - D) / sqrt((P - Tx)(P - Ty)), P = n(n-1)/2
 * pairs, C and D the concordant and discordant pairs, Tx and Ty the pairs tied in x and in y.
 * 0 when every pair ties in x or in y (or n < 2). concordant and discordant may be NULL. */
double study_kendall_tau(const double *x, const double *y, int n, int *concordant,
                         int *discordant);

/* Predicts every usable row, prints the per-row table and the MAPE per source, per set and
 * overall, Kendall's tau per set of runs of one model (study_rank_group), the memory check over
 * every row complete enough to evaluate (the skipped rows included) with the tightest headroom,
 * then the predicted against the published bus bandwidths (all-reduce, all-gather,
 * reduce-scatter; one node, several nodes, NVLink domains); writes out_dir/validate.csv and
 * out_dir/validate_rank.csv (one line per set of runs of one model: set (its source and
 * model), rows, concordant, discordant, tau) and stores the scores (source published and costmodel) in one
 * transaction. */
int study_validate(const study_validate_opts *o, study_validate_summary *sum, pp_err *err);

/* The usable rows of a published-runs CSV as the cost model sees them (for calibrate --runs):
 * the model, the cluster, the resolved plan, the parameters (defaults, then the row's
 * settings) and the published iteration time. */
typedef struct study_run {
  int row;
  char set[16];      /* "target" or "holdout" (kept aside to check the model) */
  char source[48];   /* the short name of its source */
  spec_model m;
  spec_cluster c;
  spec_plan p;
  cm_params prm;
  double published_s;
  int rank_set;      /* the index of the first run of its set of runs of one model (one source,
                        one GPU type, the same model shape), as study validate ranks them */
} study_run;
/* Reads path (NULL: the built-in copy); *skipped gets the rows not usable. */
int study_runs_load(const char *path, study_run **out, int *n, int *skipped, pp_err *err);
void study_runs_free(study_run *r, int n);

/* ---- calibration jobs (study_calib.c; built with calibrate/, PODPLAN_GSL) ------------------
 * What `podplan calibrate` runs, each ending in stored calibrations (store_save_calibration:
 * one transaction each) and, with plots, their gnuplot plots (cal_plots). */
typedef struct study_cal_opts {
  const char *db;     /* the store: measurements read, calibrations written */
  const char *kind;   /* only stored measurements of kind coll or gemm, or only runs' iterations
                         (iter); NULL: all */
  const char *fit;    /* "a,b,c": only these parameters (cm_params names); NULL: the candidates */
  double holdout;     /* fraction of the measurements kept out of the fit (0 .. 0.9) */
  int holdout_plans;  /* a third of the runs kept out, every measurement of them */
  unsigned seed;      /* which ones */
  int robust;         /* Cauchy weights */
  double prior_noise; /* regularisation toward the priors (cal_opts.prior_noise: 0 none,
                         CAL_PRIOR_AUTO chosen by cross-validation, the CLI's default) */
  const char *plots;  /* draw the calibration's plots here (the folder made); NULL: none */
  /* study_cal_from_search: search run `search`, its `top` fastest plans (or `top` spread over
   * its ranking), each run as `launch` + this program's `run` on `device` (NULL: cpu for a
   * cluster of CPU ranks, else cuda) with `iters` timed iterations, `layers` (0: all) and
   * `shrink` (<= 1: none) */
  long long search;
  int top, spread, iters, layers, shrink;
  const char *launch, *device;
  /* study_cal_published: the runs' CSV (NULL: the built-in copy) and the folds */
  const char *runs;
  int folds;
} study_cal_opts;

#define STUDY_CAL_WHY 12          /* reasons a measurement is left out, counted apart */
#define STUDY_CAL_TOP_MAX 256     /* plans one --from-search runs */
#define STUDY_CAL_RANKED_MAX 4096 /* plans of a search's ranking `spread` picks from */

/* A backend run's specs as run, the settings the backend runs them with, the plan's text
 * ("-": non-uniform, no string form). */
typedef struct study_cal_run {
  spec_model m;
  spec_cluster c;
  spec_plan p;
  cm_params prm;
  char plan_text[SPEC_PLAN_STR_MAX];
} study_cal_run;

/* One fit of stored measurements and backend runs of a cluster, and its report. */
typedef struct study_cal_job {
  spec_cluster cluster;    /* as fitted (sized to the largest group measured without gpus) */
  const char *device;      /* from a search: the device its plans ran on */
  char **launched;         /* from a search: the keys of the runs made (NULL-terminated) */
  store_meas_list rows;    /* what the store holds of the cluster */
  store_backend_run *runs;
  size_t nruns;
  study_cal_run *specs;    /* [nruns] */
  cal_obs *obs;            /* [n] the observations fitted or held out */
  const char **key;        /* [n] the run key of an observation of a run (NULL: none) */
  int *run_of;             /* [n] the run of an iteration observation, else -1 */
  size_t n;
  const char *why[STUDY_CAL_WHY]; /* measurements left out, by reason */
  int why_n[STUDY_CAL_WHY], nwhy;
  int max_ranks;           /* the largest group measured */
  size_t merged;           /* a run's ops merged into one per shape and run */
  size_t folded;           /* backward attentions whose score product was folded in */
  int nheld_out;           /* holdout_plans: runs held out */
  cal_result r;
  cal_group_error g[CAL_NKINDS + 1]; /* per kind of observation, and "all" */
  int ng, nplans, nheld_plans;       /* runs' iterations, of them held out */
  double tau_before, tau_after, held_tau_before, held_tau_after; /* NAN: fewer than 3 runs */
  char *summary_json;      /* the stored summary: cal_summary_json, by_kind, plans */
  int64_t id;              /* the calibration stored */
} study_cal_job;

/* Fits the measurements and backend runs stored for cluster (a preset, JSON or file, sized by
 * gpus when > 0, else by the largest group measured) and stores the calibration. PP_INPUT when
 * none can be used; the fit's errors (cal_fit). *j is the caller's to free either way. */
int study_cal_stored(const study_cal_opts *o, const char *cluster, int gpus, study_cal_job *j,
                     pp_err *err);
/* The funnel's last step: runs the chosen plans of search run o->search one after another on
 * the backend (their measurements stored by `podplan run`), then fits those runs' measurements
 * alone and stores the calibration. Progress on a terminal (stderr). PP_DEVICE naming the plan
 * when a run fails. */
int study_cal_from_search(const study_cal_opts *o, study_cal_job *j, pp_err *err);
void study_cal_job_free(study_cal_job *j);

#define STUDY_CAL_SOURCES 34 /* sources (and "all") reported apart */

/* The fit of published runs' iteration times (constants every run shares; rows of set holdout
 * kept aside), k-fold cross-validated, one calibration stored per cluster of the fitted rows. */
typedef struct study_cal_runs {
  study_run *runs;
  int n, skipped;          /* usable rows, rows not usable */
  cal_obs *obs;            /* [n] */
  const char **group;      /* [n] its source */
  double *cv;              /* [n] predicted by the fit without its fold */
  cal_result r;
  cal_group_error g[STUDY_CAL_SOURCES];
  int ng;
  json_t *by_source;       /* g as JSON (source, rows, aside, mape_before ... aside_bias_after) */
  json_t *ranking;         /* Kendall's tau per set of runs of one model with >= 3 rows */
  json_t *ids;             /* the calibrations stored */
} study_cal_runs;
int study_cal_published(const study_cal_opts *o, study_cal_runs *f, pp_err *err);
void study_cal_runs_free(study_cal_runs *f);

/* ---- the funnel (study_search.c) -----------------------------------------------------------
 * One search method on a (model, cluster) stored as a search run: checkpointed unit by unit
 * (the same search after a kill resumes where its last checkpoint left off), its best K
 * re-scored by the simulator (fast mode) and those scores stored. `podplan search` and the
 * studies run every search through here. Sharded when o.comm is set: every rank calls it,
 * rank 0 alone opens the store and gets the merged result. */
/* Simulated plans kept between searches on one cost model (the same model, cluster and
 * parameters): a plan several methods find is simulated once. */
typedef struct study_sim_cache study_sim_cache;
study_sim_cache *study_sim_cache_new(void);
void study_sim_cache_free(study_sim_cache *c);

typedef struct study_search_req {
  cm_model *cm;              /* the model, the cluster and the parameters searched on */
  const spec_model *m;       /* as stored with the run */
  const spec_cluster *c;
  search_opts o;             /* the method and its options; the hooks (on_unit, progress,
                                ctx) and the resume fields are the funnel's own */
  int simulate;              /* re-score the best K (K <= o.top) with the simulator */
  double sim_time_limit_s;   /* > 0: a plan whose simulation runs longer stays unsimulated */
  int64_t calib_id;          /* the calibration of cm's parameters (0: none): part of the
                                run's key, recorded in every score */
  const char *params;        /* cm's parameters set beyond the defaults and the calibration,
                                "name=value,..." (NULL or "": none): part of the run's key,
                                recorded in its parameters */
  const char *db;            /* the store file (rank 0 opens it; created when missing) */
  study_sim_cache *cache;    /* plans simulated before on cm (NULL: none) */
  void (*progress)(const search_progress *p, void *ctx); /* rank 0; may be NULL */
  void *ctx;
} study_search_req;

typedef struct study_search_out {
  search_result r;           /* rank 0: the merged result (top[i].simulated, sim_iter_s) */
  int64_t run_id;            /* the search run in the store */
  int began;                 /* the run began in the store */
  int searched;              /* the search ended: a failure after it was rank 0's alone (on a
                                failure before it, other ranks may be waiting) */
  int resumed, units;          /* an unfinished run was continued; its work units */
  int nsim;                  /* top[0 .. nsim-1] went to the simulator */
  int *sim_rank;             /* [nsim]: 1-based rank by simulated time (0: not simulated) */
  int sim_stopped;           /* of the nsim, stopped by sim_time_limit_s (top[i].simulated 0) */
  int chosen;                /* the plan chosen: the fastest simulated (0 without) */
  int64_t best_plan_id;      /* the chosen plan's id in the store */
} study_search_out;

int study_search(const study_search_req *q, study_search_out *out, pp_err *err);
void study_search_out_clear(study_search_out *o);
/* The key a search run is known by in the store: the options that change its result. */
void study_search_key(const search_opts *o, int64_t calib_id, char *buf, size_t n);
/* A cost-model or simulator breakdown as a JSON object of seconds (the scores' breakdown). */
json_t *study_breakdown_json(const cm_breakdown *t);

/* ---- the pillar study (study_pillar.c, study_pillar_out.c) ---------------------------------
 * For every case of a grid of fabrics x models x scales (benchmarks/data/pillar_grid.csv,
 * built in): megatron, two-level (Alpa's defaults, island = node), two-level with the NVLink
 * domain as island, two-level without Alpa's defaults ("open": every recompute and SP choice,
 * the cost model's weights in its ILP), exhaustive (the uniform space) and global each search
 * through the funnel
 * (stored, top 3 simulated); Alpa's ablation on the V100 cluster (set "ablation") runs
 * megatron, inter-op only, intra-op only, two-level (both) and global. Each (case, method) is
 * stored as a study case when done: the same study again skips it. Writes out_dir/pillar.csv,
 * pillar.md (tables and a conclusion drawn from the numbers) and the plots. */
typedef struct study_pillar_opts {
  int quick;                 /* the rows of set quick only (3 fabrics x 2 models x 256 GPUs) */
  int large;                 /* also the rows of set large (8192 GPUs: about 10 minutes a case) */
  const char *grid;          /* a grid CSV (set,fabric,model,gpus,gbs); NULL: the built-in */
  const char *fabrics, *models, *scales; /* comma lists restricting the grid; NULL: all */
  const char *rungs;         /* comma list of methods (study pillar -h lists them); NULL: the
                                whole ladder; global is always run */
  const char *db;            /* the store (created when missing) */
  const char *out_dir;       /* NULL: no files */
  FILE *out;                 /* the tables; NULL: stdout */
  int progress;              /* 1: a progress line on stderr (a terminal) */
  double time_limit_s;       /* per search; 0: none */
  double gap;                /* global's target gap */
  int threads;               /* 0: the online CPUs */
  int simulate;              /* each method's best K simulated; < 0: 1 */
  int sim_max_gpus;          /* cases on more GPUs are not simulated (SimGrid of thousands of
                                GPUs takes minutes per plan); < 0: 256; 0: no limit */
  double sim_time_limit_s;   /* > 0: a plan simulated longer keeps its cost-model time; 0: no
                                limit; < 0: 120 s */
  /* a calibration: the cases on the fabric named calib_cluster take its values; the draws
   * take its fitted parameters' sigmas ("name=sigma,...": its posterior) */
  const char *calib_cluster, *calib_params, *calib_sigmas;
  long long calib_id;
  int perturb;               /* draws of the cost-model parameters each case's verdicts are
                                judged under; < 0: 32 (0 is bad usage: PP_USAGE) */
  const search_comm *comm;   /* under mpirun: searches sharded; rank 0 stores and writes */
} study_pillar_opts;

typedef struct study_pillar_summary {
  int cases, cases_na;       /* cases of the grid run; those the fabric cannot hold */
  int cases_resumed;         /* cases found whole in the store */
  int searches;              /* (case, method) searched in this invocation */
  int compared;              /* cases (ablation aside) where global found a plan */
  /* [0]: two-level with Alpa's defaults (island = node); [1]: without them (open); [2], [3]:
   * global restricted to the two-level space (--hierarchy), island = node and = NVLink
   * domain: their gap to global's best is the price of the hierarchy itself */
#define STUDY_PILLAR_NV 4
  int ran[STUDY_PILLAR_NV];            /* ... it ran (a two-level-space rung does not where one
                                          island holds every GPU) */
  int within_1pct[STUDY_PILLAR_NV];    /* ... its best within 1% of global's best */
  int certified_1pct[STUDY_PILLAR_NV]; /* ... within 1% of global's lower bound */
  int no_plan[STUDY_PILLAR_NV];        /* ... it found no feasible plan */
  double max_gap[STUDY_PILLAR_NV];     /* the largest gap to global's best */
  char max_gap_case[STUDY_PILLAR_NV][160];
  int plots;                 /* plot files written (PNG and SVG count apart) */
  int draws;                 /* parameter draws each case's verdicts were judged under */
  int verdicts, robust;      /* verdicts judged; of them robust (>= 90% of the draws agree
                                with the nominal one); the rest are unresolved */
  double wall_s;
} study_pillar_summary;
int study_pillar(const study_pillar_opts *o, study_pillar_summary *sum, pp_err *err);

/* ---- capacity planning (study_capacity.c) ---------------------------------------------------
 * For each fabric (cluster preset) and GPU count (powers of two and whole NVLink domains up to
 * gpus_max): the best plan (global search through the funnel, its best simulated), the time to
 * train `tokens` tokens, GPU-hours, cost where a price is given, MFU; the smallest cluster per
 * fabric that meets the deadline; a fabric that cannot fit the model says so and why. Writes
 * out_dir/capacity.csv, capacity.md and the scaling plot (time to train against GPUs, per
 * fabric); every point is a study case in the store (a rerun skips it). */
typedef struct study_capacity_opts {
  const char *model;         /* preset name, JSON file or inline JSON */
  double tokens;             /* tokens to train on (> 0) */
  double deadline_s;         /* the time to train them in; 0: none */
  int gpus_max;              /* the largest cluster considered; 0: 8192 */
  const char *clusters;      /* comma list of cluster presets; NULL: every GPU fabric preset */
  const char *prices;        /* "2.5" (every fabric) or "dgx-h100=2.5,gb200-nvl72=6" (USD per
                                GPU-hour); NULL: no cost */
  int gbs;                   /* global batch in sequences; 0: the number of sequences nearest
                                4 Mi tokens (4 * 2^20 / seq_len), rounded to a multiple of 8,
                                at least 8 (2048 for a 2048-token sequence) */
  const char *db;            /* the store (created when missing) */
  const char *out_dir;       /* NULL: no files */
  FILE *out;                 /* the tables; NULL: stdout */
  int progress;              /* 1: a progress line on stderr */
  double time_limit_s, gap;  /* per search (0: none); global's target gap */
  int threads;
  const char *calib_cluster, *calib_params; /* a calibration of one fabric (as for pillar) */
  long long calib_id;
  int sim_max_gpus;          /* the best plan is simulated on clusters up to this many GPUs,
                                the cost model's time used above (SimGrid takes minutes per
                                plan on thousands of GPUs); 0: 1024; < 0: never simulate */
  double sim_time_limit_s;   /* > 0: a plan simulated longer keeps its cost-model time */
} study_capacity_opts;

typedef struct study_capacity_summary {
  int fabrics;               /* fabrics considered */
  int points;                /* (fabric, GPU count) searched or read back */
  int feasible;              /* ... with a plan that fits */
  int meeting;               /* fabrics with a cluster that meets the deadline */
  int plots;                 /* plot files written (PNG and SVG count apart) */
  int searched;              /* points searched in this invocation (the others read back) */
  int resumed;               /* points read back from the store */
  double wall_s;
} study_capacity_summary;
int study_capacity(const study_capacity_opts *o, study_capacity_summary *sum, pp_err *err);
/* "30" or "30d" (days), "720h" (hours): seconds in *out; PP_USAGE otherwise (err may be
 * NULL). */
int study_capacity_parse_deadline(const char *s, double *out, pp_err *err);

/* ---- plots (study_plot.c) ----------------------------------------------------------------
 * gnuplot draws every plot of a study or a report: body is a gnuplot script without terminal
 * or output (it reads its data files by the paths it names); study_plot writes dir/name.gp
 * that runs it twice and makes dir/name.png and dir/name.svg (width x height pixels). PP_IO
 * naming the script when gnuplot cannot run or fails. */
int study_plot(const char *dir, const char *name, int width, int height, const char *body,
               pp_err *err);
/* Copies in to out (n bytes) with the characters that would end a gnuplot single-quoted
 * string (' and \) replaced by spaces: for titles and labels taken from names. */
void study_plot_quote(const char *in, char *out, size_t n);

/* ---- reports (study_report.c) ----------------------------------------------------------------
 * What a store holds, as tables and plots: the search runs and, per set of comparable runs
 * (same model, cluster, GPUs, global batch and space), the best iteration time per method
 * relative to the fastest; the cost model against published runs (scores of study validate);
 * the simulator against the cost model per plan (simulate, search --simulate); the
 * calibrations' error before and after (from their residuals); the study cases per study; the
 * trace files scores record. Reads the store read-only (store_report_open: never created,
 * never migrated). */
typedef struct study_report_opts {
  const char *db;      /* the store; it must exist */
  const char *out_dir; /* CSVs, report.md and the plots (PNG, SVG) go here, the folder made
                          when missing; NULL: the text alone */
  FILE *out;           /* the text tables; NULL: stdout */
} study_report_opts;

typedef struct study_report_summary {
  int schema_version;  /* of the store read */
  int search_runs;     /* rows of each table */
  int method_groups;   /* sets of comparable search runs */
  int methods;         /* (set, method) rows of the method comparison */
  int validation;      /* published vs cost model pairs */
  int sim_pairs;       /* simulated vs cost model pairs */
  int calibrations;
  int studies;         /* studies with cases ... */
  int study_cases;     /* ... and their cases */
  int traces;          /* trace files recorded ... */
  int traces_missing;  /* ... of which no longer there */
  int csvs;            /* CSV files written (with report.md: every table) */
  int plots;           /* plots written, each a PNG and an SVG */
  int plots_skipped;   /* plots without data: no file */
} study_report_summary;

/* Prints the tables to o->out and, with o->out_dir, writes search_runs.csv, methods.csv,
 * validation.csv, sim_vs_costmodel.csv, calibrations.csv, studies.csv, traces.csv, report.md
 * and the plots methods, validation, calibrations and sim_vs_costmodel (.png, .svg, the .gp
 * script and its .dat). PP_INPUT naming the file when the store does not exist or is not one;
 * PP_IO when a file cannot be written or gnuplot fails. */
int study_report(const study_report_opts *o, study_report_summary *sum, pp_err *err);

#endif
