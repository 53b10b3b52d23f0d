/* podplan store: one SQLite file (WAL mode) holding specs, plans, search runs, scores,
 * measurements and calibrations. Owns the schema and its migrations by version. Every
 * multi-row write runs inside one transaction; specs and plans are stored once, by hash.
 * Depends on spec.h and SQLite. */
#ifndef PODPLAN_STORE_H
#define PODPLAN_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "podplan/err.h"
#include "podplan/spec.h"

#define STORE_DEFAULT_PATH "podplan.db"
#define STORE_SCHEMA_VERSION 1

typedef struct store store;

typedef struct store_opts {
  int readonly;        /* 1: open an existing file read-only; no migration */
  int busy_timeout_ms; /* wait this long for another writer's lock; 0 = 5000 */
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
} store_score;

/* Inserts or, for the same (plan, model, cluster, source, calibration, search run), replaces
 * the score: a rerun does not duplicate rows. */
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

/* Row count of a table of the schema (for reports and tests). */
int store_count(store *s, const char *table, int64_t *n, pp_err *err);

#endif
