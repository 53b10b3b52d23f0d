/* podplan store: one SQLite file (WAL mode) holding specs, plans, search runs and their
 * checkpoints, scores, measurements and calibrations. Owns the schema and its migrations by
 * version. Every multi-row write runs inside one transaction; specs and plans are stored once,
 * by hash. Depends on spec.h and SQLite. */
#ifndef PODPLAN_STORE_H
#define PODPLAN_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "podplan/err.h"
#include "podplan/spec.h"

#define STORE_DEFAULT_PATH "podplan.db"
#define STORE_SCHEMA_VERSION 4

typedef struct store store;

typedef struct store_opts {
  int readonly;        /* 1: open an existing file read-only; no migration */
  int busy_timeout_ms; /* wait this long for another writer's lock; 0 = 5000 */
  int older_ok;        /* with readonly: also open a file of an older schema, as it is (its
                          readers check store_schema_version; store_report.c does) */
} store_opts;

/* Opens (creating when missing) and migrates the file to STORE_SCHEMA_VERSION. A file from a
 * newer podplan, a file that is not a database, or a lock held past the timeout fail with a
 * message naming the file. opts may be NULL. */
int store_open(const char *path, const store_opts *opts, store **out, pp_err *err);
/* Closes; NULL does nothing. An open transaction is rolled back. */
void store_close(store *s);
const char *store_path(const store *s);
int store_schema_version(store *s, int *version, pp_err *err);

/* Write transactions (BEGIN IMMEDIATE). Writes outside one run in their own transaction. */
int store_begin(store *s, pp_err *err);
int store_commit(store *s, pp_err *err);
void store_rollback(store *s);

/* Specs and plans, stored once by the hash of their canonical JSON; *id gets the row id of
 * the new or the existing row. A plan must be resolved (dp known). */
int store_put_model(store *s, const spec_model *m, int64_t *id, pp_err *err);
int store_put_cluster(store *s, const spec_cluster *c, int64_t *id, pp_err *err);
int store_put_plan(store *s, const spec_plan *p, int64_t *id, pp_err *err);
/* Reads back a plan by row id (PP_NOTFOUND when absent); spec_plan_clear() the result. */
int store_get_plan(store *s, int64_t id, spec_plan *out, pp_err *err);

/* Reads back a model by row id (PP_NOTFOUND when absent). */
int store_get_model(store *s, int64_t id, spec_model *out, pp_err *err);
/* The models a plan has scores on (distinct, newest score first): up to max ids in ids[],
 * *n gets how many there are in all. */
int store_plan_models(store *s, int64_t plan_id, int64_t *ids, int max, int *n, pp_err *err);

/* One score of a plan on a model and cluster by one source. */
typedef enum {
  STORE_SRC_COSTMODEL,
  STORE_SRC_SIM,
  STORE_SRC_BACKEND,
  STORE_SRC_PUBLISHED
} store_source;
const char *store_source_name(store_source s);

typedef struct store_score {
  int64_t plan_id, model_id, cluster_id;
  store_source source;
  int64_t calibration_id;  /* 0: none */
  int64_t search_run_id;   /* 0: none */
  double iter_time_s;      /* seconds per training iteration */
  double tokens_per_s;     /* whole cluster */
  double mfu;              /* model FLOP utilisation, 0..1 */
  double mem_gib;          /* peak memory per GPU */
  int feasible;            /* 1 when the plan fits and runs */
  const char *breakdown_json; /* object of seconds by component; NULL = {} */
  const char *params;      /* cost-model parameters set beyond the defaults and the
                              calibration, "name=value,..." (cm_params_override); NULL: none */
} store_score;

/* Inserts or, for the same (plan, model, cluster, source, calibration, search run, params),
 * replaces the score: a rerun does not duplicate rows. */
int store_put_score(store *s, const store_score *sc, int64_t *id, pp_err *err);

/* One measured time (a GEMM, a collective, an op, an iteration). */
typedef struct store_measurement {
  const char *run_key;    /* what produced it: a run id or "nccl-tests:<file hash>" */
  int seq;                /* position in that run; (run_key, seq) is unique */
  const char *kind;       /* "gemm", "coll", "p2p", "mem", "op", "iter" */
  const char *name;       /* e.g. "all_reduce", "gemm_bf16" */
  int64_t cluster_id;     /* 0: none */
  const char *device;     /* "cpu", "cuda", "nccl-tests" */
  const char *shape_json; /* e.g. {"m":..,"n":..,"k":..}; NULL = {} */
  double bytes;           /* message or tensor size; 0 when not applicable */
  int ranks;              /* ranks in the group; 0 when not applicable */
  const char *placement;  /* levels the group crosses, e.g. "nvlink" or "ib:2nodes"; may be NULL */
  double time_s;          /* measured seconds (> 0) */
  double algbw_gbps;      /* GB/s, 0 when not applicable */
  double busbw_gbps;      /* GB/s, 0 when not applicable */
  const char *source;     /* file or command it came from; may be NULL */
} store_measurement;

/* Writes n measurements in one transaction (or inside the caller's). Rows whose
 * (run_key, seq) already exists are left as they are, so a rerun resumes without duplicates.
 * *added (may be NULL) gets the number of new rows. */
int store_put_measurements(store *s, const store_measurement *m, size_t n, size_t *added,
                           pp_err *err);

/* ---- what a command stores, each in one transaction (store_save.c) ------------------------
 * Each opens the file at `path` (creating and migrating it when needed), writes in one
 * transaction and closes it; a failure leaves the file as it was. Specs and plans are stored
 * once, by hash. Commands call these and hold no transaction logic of their own. */

/* A scored plan (predict, simulate, run) or measurements (bench): the cluster (when c), the
 * model, the plan and the score (when sc: its spec ids are filled in; m and p needed then),
 * and n measurements tied to the cluster. *added (may be NULL) gets the number of new
 * measurement rows. */
int store_save(const char *path, const spec_model *m, const spec_cluster *c, const spec_plan *p,
               store_score *sc, store_measurement *ms, size_t n, size_t *added, pp_err *err);

/* Specs alone (check): models[0..nm), then clusters[0..nc), then the plan p (when not NULL,
 * resolved). model_ids[i], cluster_ids[i] and *plan_id (each may be NULL) get the row ids. */
int store_save_specs(const char *path, const spec_model *models, size_t nm,
                     const spec_cluster *clusters, size_t nc, const spec_plan *p,
                     int64_t *model_ids, int64_t *cluster_ids, int64_t *plan_id, pp_err *err);

/* One batch of measurements (one imported log) and how many of its rows were new. */
typedef struct store_batch {
  store_measurement *ms; /* the rows; their cluster_id is filled in here */
  size_t n;
  size_t added;          /* out: rows new to the store (a rerun adds none) */
} store_batch;
/* Imported measurements (import): the cluster c (when not NULL) and every batch, tied to it. */
int store_import_measurements(const char *path, const spec_cluster *c, store_batch *b,
                              size_t nb, pp_err *err);

/* ---- search runs --------------------------------------------------------------------------
 * A search run is known by its key: (method, model, cluster, params), params being the
 * canonical text of the options that change its result (space restrictions, global batch,
 * top K, method options; not threads or time limits). Its work units are checkpointed one by
 * one (search.h), each with its counts and its best plans, so that a killed run resumes: a
 * run with the same key and the same number of units that is still 'running' (killed),
 * 'failed', or 'done' but cut short (complete = 0: a time limit) is continued; a run that
 * searched everything is not: the same search again starts a new run. Every call writes in
 * one transaction: a failure leaves nothing of it. */

/* A plan with its score, as the search writes it. */
typedef struct store_scored_plan {
  const spec_plan *plan; /* resolved */
  store_score score;     /* iter_time_s .. breakdown_json; the ids, the source and the
                            search run are filled in by the store */
} store_scored_plan;

/* A plan a resumed run had found, read back. */
typedef struct store_search_plan {
  int64_t plan_id;
  spec_plan plan;        /* owned (store_search_state_clear) */
  int unit;              /* the work unit that found it */
  double iter_time_s;    /* its costmodel score in this run */
  double tokens_per_s, mfu, mem_gib;
} store_search_plan;

/* Where a run stands when it begins. */
typedef struct store_search_state {
  int64_t run_id, model_id, cluster_id;
  int resumed;                /* 1: an unfinished or cut-short run with this key continues */
  int units;                  /* work units of the run */
  unsigned char *units_done;  /* [units]: 1 = its checkpoint is committed and complete */
  int nunits_done;
  long long evaluations, feasible, pruned; /* sums over the done units */
  double bound_s;             /* min of the done units' bounds (0: none) */
  store_search_plan *plans;   /* the done units' best plans, fastest first, each plan once */
  int nplans;
} store_search_state;
void store_search_state_clear(store_search_state *st);

/* Stores the model and the cluster (once, by hash) and finds the unfinished run with this key
 * and `units` units to resume, or creates a new one ('running'). params_json (may be NULL:
 * "{}") records every option of the command, for people. */
int store_search_begin(store *s, const char *method, const spec_model *m, const spec_cluster *c,
                       const char *params, const char *params_json, int units,
                       store_search_state *out, pp_err *err);

/* One finished unit: its counts and best plans (stored with their costmodel scores, tied to
 * the run). A unit stored again replaces its checkpoint (a unit cut short by a time limit,
 * complete = 0, is searched again on resume). Also brings the run's running totals up to
 * date. */
typedef struct store_search_unit {
  int unit;
  long long evaluations, feasible, pruned;
  double bound_s;        /* global: the unit's lower bound; 0 otherwise */
  int complete;          /* 0: cut short by a time limit */
  const store_scored_plan *top;
  int ntop;
} store_search_unit;
int store_search_unit_done(store *s, int64_t run_id, const store_search_unit *u, pp_err *err);

/* The end of a run: the merged best plans (stored with their costmodel scores; top[0] is the
 * best) and the totals; status becomes 'done'. *best_plan_id (may be NULL) gets top[0]'s id
 * (0 when ntop is 0). */
typedef struct store_search_summary {
  long long evaluations, feasible, pruned;
  int units_done;
  int complete;          /* 1: every unit searched to its end */
  double space_size;     /* plans in the method's space */
  double wall_s;         /* of the invocation that finished the run */
  double lower_bound_s;  /* global; 0 otherwise */
  double gap;            /* global; 0 otherwise */
  const store_scored_plan *top;
  int ntop;
} store_search_summary;
int store_search_finish(store *s, int64_t run_id, const store_search_summary *r,
                        int64_t *best_plan_id, pp_err *err);
/* Marks a run 'failed' (it stays resumable). */
int store_search_fail(store *s, int64_t run_id, pp_err *err);
/* The simulator's score of one of the run's plans (source sim, tied to the run). *plan_id
 * (may be NULL) gets the plan's id. */
int store_search_sim_score(store *s, int64_t run_id, const store_scored_plan *p,
                           int64_t *plan_id, pp_err *err);

/* Row count of a table of the schema (for reports and tests). */
int store_count(store *s, const char *table, int64_t *n, pp_err *err);

/* ---- measurements read back, calibrations (store_cal.c) ------------------------------------ */

/* Measurements read back: rows[i] (its strings owned by the list) and its row id ids[i]. */
typedef struct store_meas_list {
  store_measurement *rows;
  int64_t *ids;
  size_t n;
} store_meas_list;
/* The measurements of kind `kind` (NULL: every kind) tied to a cluster named `cluster_name`
 * (of any size: a cluster is stored once per size), oldest first. */
int store_get_measurements(store *s, const char *cluster_name, const char *kind,
                           store_meas_list *out, pp_err *err);
void store_meas_list_free(store_meas_list *l);

/* A plan run on the backend (`podplan run`), read back from its score: the specs as run
 * (canonical JSON, the model as reduced by --layers/--shrink), the measured iteration and the
 * run's key and device (from the score's breakdown). Strings malloc'd. */
typedef struct store_backend_run {
  int64_t score_id, plan_id;
  char *model_json, *cluster_json, *plan_json, *run_key, *device;
  double iter_time_s;
} store_backend_run;
/* The backend runs on clusters named `cluster_name` (any size), oldest first. */
int store_get_backend_runs(store *s, const char *cluster_name, store_backend_run **out,
                           size_t *n, pp_err *err);
void store_backend_runs_free(store_backend_run *r, size_t n);

/* The k fastest feasible plans of search run `run_id` by its costmodel scores (plan ids and
 * seconds in ids[k], secs[k]; *n found) and the run's model and cluster (canonical JSON,
 * malloc'd). PP_NOTFOUND when no run has that id. */
int store_get_search_top(store *s, int64_t run_id, int k, int64_t *ids, double *secs, int *n,
                         char **model_json, char **cluster_json, pp_err *err);

/* A calibration: the fitted parameters, what they were fitted to, and how well. */
typedef struct store_calibration {
  int64_t id;                 /* filled by store_put_calibration */
  int64_t cluster_id;
  const char *method;         /* e.g. "gsl-nlinear-lm", "gsl-nlinear-lm+cauchy" */
  const char *params_json;    /* cal_params_json */
  const char *inputs_json;    /* the measurements used: ids, kinds, counts */
  const char *residuals_json; /* per measurement: id, measured, before, after, held */
  double fit_error;           /* RMS of log(predicted / measured) after the fit */
  const char *holdout_json;   /* error before and after, fitted and held out */
  const char *created_at;     /* read back only */
  char *cluster_name;         /* read back only: the cluster's name */
} store_calibration;
int store_put_calibration(store *s, store_calibration *c, pp_err *err);
/* Reads calibration id (its strings malloc'd: store_calibration_clear); PP_NOTFOUND when none. */
int store_get_calibration(store *s, int64_t id, store_calibration *out, pp_err *err);
void store_calibration_clear(store_calibration *c);
/* The newest calibration of a cluster of that name (any size; NULL: of any cluster) that is
 * not flagged worse than the priors (its summary's worse_than_prior); PP_NOTFOUND when none. */
int store_latest_calibration(store *s, const char *cluster_name, int64_t *id, pp_err *err);
/* Stores the cluster and the calibration in one transaction (cal->cluster_id, cal->id set). */
int store_save_calibration(const char *path, const spec_cluster *c, store_calibration *cal,
                           pp_err *err);

/* ---- cases of studies (store_study.c) --------------------------------------------------------
 * A study (pillar, capacity) is a list of cases; each finished case is one row keyed by
 * (study, case_key), case_key holding every input that changes its result, so that the same
 * study run again skips it. */
typedef struct store_study_case {
  const char *study, *case_key;
  const spec_model *m;     /* stored once, by hash; may be NULL */
  const spec_cluster *c;   /* may be NULL */
  int64_t calibration_id;  /* 0: none */
  const char *result_json; /* the case's figures */
  double wall_s;
} store_study_case;
/* Writes (or replaces) the case, its model and its cluster in one transaction. */
int store_put_study_case(store *s, const store_study_case *k, int64_t *id, pp_err *err);
/* The stored result of a case (malloc'd JSON text, *wall_s may be NULL); PP_NOTFOUND when the
 * case has no row. */
int store_get_study_case(store *s, const char *study, const char *case_key, char **result_json,
                         double *wall_s, pp_err *err);

/* ---- what a report reads (store_report.c) ---- */
/* Every read of a report, read-only, from a store of this schema or an older one (a table or a
 * column the file's schema lacks reads as no rows or as not recorded). Each fills a malloc'd
 * array of rows (*n of them; NULL when none) that its _free function releases with the rows'
 * strings. Missing values: NAN for doubles, 0 for ids, NULL for strings. */

/* Opens path for a report: read-only, never creating or migrating it, of any schema up to
 * this podplan's (store_opts.older_ok); *version gets the file's schema version. PP_INPUT
 * naming the file when it does not exist or is not a regular file. */
int store_report_open(const char *path, store **out, int *version, pp_err *err);

/* A search run with its specs' names and its best plan. */
typedef struct store_report_run {
  int64_t id;
  char *model, *cluster;   /* names */
  int gpus;                /* of the cluster as searched */
  char *method, *params_json, *status;
  long long evaluations, plans_found;
  double wall_s;           /* of the invocation that finished it; NAN: not recorded */
  double best_iter_time_s; /* the cost model's time of its best plan; NAN: none */
  double lower_bound_s;    /* global's certified bound; NAN: none */
  double gap;              /* (best - bound) / bound as stored (or from the two in an older
                              schema); NAN: none */
  int64_t best_plan_id;    /* 0: none */
  char *best_plan;         /* its string form; NULL: none or non-uniform */
  double best_sim_s;       /* the run's 'sim' score of its best plan; NAN: not simulated */
} store_report_run;
/* Every search run, oldest first. */
int store_report_runs(store *s, store_report_run **out, size_t *n, pp_err *err);
void store_report_runs_free(store_report_run *r, size_t n);

/* Two scores of one plan on one model and cluster: a reference (published, or simulated) and
 * the cost model's. */
typedef struct store_report_pair {
  int64_t plan_id;
  int64_t search_run_id;   /* both scores' run; 0: none */
  int64_t calibration_id;  /* the cost model's score's; 0: none */
  char *model, *cluster;
  int gpus;
  char *plan;              /* string form; NULL: non-uniform */
  double ref_s;            /* the reference's seconds per iteration */
  double costmodel_s;      /* the cost model's */
  int feasible;            /* the cost model's verdict */
} store_report_pair;
/* Pairs of a score of source ref (STORE_SRC_PUBLISHED: study validate's; STORE_SRC_SIM:
 * simulate's or search --simulate's) with the costmodel score of the same plan, model, cluster
 * and search run (for sim: and the same calibration), both times > 0; by plan, then run. */
int store_report_pairs(store *s, store_source ref, store_report_pair **out, size_t *n,
                       pp_err *err);
void store_report_pairs_free(store_report_pair *p, size_t n);

/* Every calibration with its cluster's name (store_calibration: every field read back), oldest
 * first. */
int store_report_calibrations(store *s, store_calibration **out, size_t *n, pp_err *err);
void store_report_calibrations_free(store_calibration *c, size_t n);

/* The cases of each study (study_cases, schema 3): how many and their summed wall time. */
typedef struct store_report_study {
  char *study;
  long long cases;
  double wall_s;           /* sum over its cases; NAN: none recorded */
} store_report_study;
int store_report_studies(store *s, store_report_study **out, size_t *n, pp_err *err);
void store_report_studies_free(store_report_study *st, size_t n);

/* A trace file a score records (its breakdown's "trace": simulate --trace, run --trace). */
typedef struct store_report_trace {
  int64_t score_id, plan_id;
  char *path;              /* as recorded (absolute when written by this podplan) */
  char *source;            /* 'sim' or 'backend' */
  char *model, *cluster;
  int gpus;
  char *plan;              /* string form; NULL: non-uniform */
  double iter_time_s;      /* the score's */
  char *created_at;
} store_report_trace;
int store_report_traces(store *s, store_report_trace **out, size_t *n, pp_err *err);
void store_report_traces_free(store_report_trace *t, size_t n);

#endif
