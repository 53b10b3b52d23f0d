/* The schema, as an ordered list of migrations. Never edit a released step: add a new one.
 * Version 1 holds the tables of docs/specs.md (the store); version 2 adds the search runs'
 * keys and their per-unit checkpoints. */
#include "store_int.h"

const char *const store__migrations[] = {
    /* 0 -> 1 */
    "CREATE TABLE schema_version (version INTEGER NOT NULL);"
    "INSERT INTO schema_version VALUES (0);"
    "CREATE TABLE models ("
    "  id INTEGER PRIMARY KEY,"
    "  hash TEXT NOT NULL UNIQUE,"          /* spec_hash of json */
    "  name TEXT NOT NULL,"
    "  params REAL NOT NULL,"               /* parameter count */
    "  json TEXT NOT NULL,"                 /* canonical JSON */
    "  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')));"
    "CREATE TABLE clusters ("
    "  id INTEGER PRIMARY KEY,"
    "  hash TEXT NOT NULL UNIQUE,"
    "  name TEXT NOT NULL,"
    "  gpus INTEGER NOT NULL,"
    "  gpu TEXT NOT NULL,"
    "  json TEXT NOT NULL,"
    "  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')));"
    "CREATE TABLE plans ("
    "  id INTEGER PRIMARY KEY,"
    "  hash TEXT NOT NULL UNIQUE,"
    "  text TEXT,"                          /* string form; NULL for non-uniform plans */
    "  uniform INTEGER NOT NULL CHECK (uniform IN (0, 1)),"
    "  json TEXT NOT NULL,"
    "  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')));"
    "CREATE TABLE calibrations ("
    "  id INTEGER PRIMARY KEY,"
    "  cluster_id INTEGER NOT NULL REFERENCES clusters(id),"
    "  method TEXT NOT NULL,"
    "  params_json TEXT NOT NULL,"          /* fitted parameters */
    "  inputs_json TEXT NOT NULL,"          /* measurement ids or selection used */
    "  residuals_json TEXT,"
    "  fit_error REAL,"
    "  holdout_json TEXT,"                  /* error before/after on held-back measurements */
    "  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')));"
    "CREATE TABLE search_runs ("
    "  id INTEGER PRIMARY KEY,"
    "  method TEXT NOT NULL,"
    "  model_id INTEGER NOT NULL REFERENCES models(id),"
    "  cluster_id INTEGER NOT NULL REFERENCES clusters(id),"
    "  params_json TEXT NOT NULL,"
    "  status TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed')),"
    "  evaluations INTEGER NOT NULL DEFAULT 0,"
    "  plans_found INTEGER NOT NULL DEFAULT 0,"
    "  wall_s REAL,"
    "  best_plan_id INTEGER REFERENCES plans(id),"
    "  best_iter_time_s REAL,"
    "  lower_bound_s REAL,"
    "  started_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),"
    "  finished_at TEXT);"
    "CREATE TABLE scores ("
    "  id INTEGER PRIMARY KEY,"
    "  plan_id INTEGER NOT NULL REFERENCES plans(id),"
    "  model_id INTEGER NOT NULL REFERENCES models(id),"
    "  cluster_id INTEGER NOT NULL REFERENCES clusters(id),"
    "  source TEXT NOT NULL CHECK (source IN ('costmodel', 'sim', 'backend', 'published')),"
    "  calibration_id INTEGER REFERENCES calibrations(id),"
    "  search_run_id INTEGER REFERENCES search_runs(id),"
    "  iter_time_s REAL,"
    "  tokens_per_s REAL,"
    "  mfu REAL,"
    "  mem_gib REAL,"
    "  feasible INTEGER NOT NULL CHECK (feasible IN (0, 1)),"
    "  breakdown_json TEXT NOT NULL DEFAULT '{}',"
    "  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')));"
    "CREATE UNIQUE INDEX scores_key ON scores (plan_id, model_id, cluster_id, source,"
    "  IFNULL(calibration_id, 0), IFNULL(search_run_id, 0));"
    "CREATE TABLE measurements ("
    "  id INTEGER PRIMARY KEY,"
    "  run_key TEXT NOT NULL,"
    "  seq INTEGER NOT NULL,"
    "  kind TEXT NOT NULL CHECK (kind IN ('gemm', 'coll', 'p2p', 'mem', 'op', 'iter')),"
    "  name TEXT NOT NULL,"
    "  cluster_id INTEGER REFERENCES clusters(id),"
    "  device TEXT NOT NULL,"
    "  shape_json TEXT NOT NULL DEFAULT '{}',"
    "  bytes REAL NOT NULL DEFAULT 0,"
    "  ranks INTEGER NOT NULL DEFAULT 0,"
    "  placement TEXT,"
    "  time_s REAL NOT NULL CHECK (time_s > 0),"
    "  algbw_gbps REAL NOT NULL DEFAULT 0,"
    "  busbw_gbps REAL NOT NULL DEFAULT 0,"
    "  source TEXT,"
    "  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),"
    "  UNIQUE (run_key, seq));"
    "CREATE INDEX measurements_kind ON measurements (kind, name, cluster_id);"
    "CREATE INDEX scores_plan ON scores (model_id, cluster_id, source);",
    /* 1 -> 2: search runs known by their key, checkpointed per work unit (resume) */
    "ALTER TABLE search_runs ADD COLUMN params_key TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE search_runs ADD COLUMN units INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE search_runs ADD COLUMN units_done INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE search_runs ADD COLUMN feasible INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE search_runs ADD COLUMN pruned INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE search_runs ADD COLUMN complete INTEGER CHECK (complete IN (0, 1));"
    "ALTER TABLE search_runs ADD COLUMN space_size REAL;"
    "ALTER TABLE search_runs ADD COLUMN gap REAL;"
    "CREATE INDEX search_runs_key ON search_runs"
    "  (method, model_id, cluster_id, params_key, status);"
    "CREATE TABLE search_checkpoints ("
    "  id INTEGER PRIMARY KEY,"
    "  search_run_id INTEGER NOT NULL REFERENCES search_runs(id),"
    "  unit INTEGER NOT NULL CHECK (unit >= 0),"
    "  evaluations INTEGER NOT NULL,"
    "  feasible INTEGER NOT NULL,"
    "  pruned INTEGER NOT NULL,"
    "  bound_s REAL,"                       /* global: the unit's lower bound */
    "  complete INTEGER NOT NULL CHECK (complete IN (0, 1)),"
    "  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),"
    "  UNIQUE (search_run_id, unit));"
    "CREATE TABLE search_checkpoint_plans ("   /* a unit's best plans, fastest first */
    "  checkpoint_id INTEGER NOT NULL REFERENCES search_checkpoints(id) ON DELETE CASCADE,"
    "  rank INTEGER NOT NULL CHECK (rank >= 0),"
    "  plan_id INTEGER NOT NULL REFERENCES plans(id),"
    "  PRIMARY KEY (checkpoint_id, rank));"
    "CREATE INDEX scores_run ON scores (search_run_id);",
    /* 2 -> 3: the cases of studies (pillar, capacity): one row per finished case, so that a
     * study run again with the same arguments skips them */
    "CREATE TABLE study_cases ("
    "  id INTEGER PRIMARY KEY,"
    "  study TEXT NOT NULL,"                /* 'pillar', 'capacity', ... */
    "  case_key TEXT NOT NULL,"             /* every input that changes the case's result */
    "  model_id INTEGER REFERENCES models(id),"
    "  cluster_id INTEGER REFERENCES clusters(id),"
    "  calibration_id INTEGER REFERENCES calibrations(id),"
    "  result_json TEXT NOT NULL,"          /* the case's figures (study.h) */
    "  wall_s REAL,"
    "  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),"
    "  UNIQUE (study, case_key));",
    /* 3 -> 4: the cost-model parameters a score was computed with beyond the defaults and
     * its calibration ("name=value,...", as --param sets them; '' for none), part of its key:
     * a prediction with other parameters is another score, not a replacement */
    "ALTER TABLE scores ADD COLUMN params TEXT NOT NULL DEFAULT '';"
    "DROP INDEX scores_key;"
    "CREATE UNIQUE INDEX scores_key ON scores (plan_id, model_id, cluster_id, source,"
    "  IFNULL(calibration_id, 0), IFNULL(search_run_id, 0), params);",
};

const int store__nmigrations = (int)(sizeof store__migrations / sizeof store__migrations[0]);
