/* What a report reads (store.h, "what a report reads"): search runs, pairs of scores (published
 * or simulated against the cost model), calibrations, study cases and trace files, read-only
 * from a store of this schema or an older one. Each read is one prepared statement whose
 * columns a small table maps onto the fields of a row struct, so that one loop reads and one
 * loop frees every kind of row. Depends on store_int.h (the handle) and SQLite (JSON1). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "store_int.h"

/* ---- rows from a statement, by a table of columns ------------------------------------------ */

typedef enum { COL_I64, COL_INT, COL_LL, COL_DBL, COL_TEXT } col_kind;

/* Result column i goes to the field at offset off of a row. */
typedef struct col {
  col_kind kind;
  size_t off;
} col;

#define NCOLS(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Reads result column i into the row's field; nonzero when a string cannot be copied. */
static int take_col(sqlite3_stmt *st, int i, const col *c, char *row) {
  void *f = row + c->off;
  int null = sqlite3_column_type(st, i) == SQLITE_NULL;
  switch (c->kind) {
  case COL_I64: *(int64_t *)f = sqlite3_column_int64(st, i); return 0;
  case COL_INT: *(int *)f = sqlite3_column_int(st, i); return 0;
  case COL_LL: *(long long *)f = sqlite3_column_int64(st, i); return 0;
  case COL_DBL: *(double *)f = null ? NAN : sqlite3_column_double(st, i); return 0;
  case COL_TEXT: {
    const unsigned char *t = sqlite3_column_text(st, i);
    char *p = t ? strdup((const char *)t) : NULL;
    memcpy(f, &p, sizeof p); /* the field may be a const char * (store_calibration) */
    return t && !p;
  }
  }
  return 0;
}

static void free_rows(void *rows, size_t n, const col *cols, int ncols, size_t size) {
  for (size_t r = 0; rows && r < n; r++)
    for (int i = 0; i < ncols; i++)
      if (cols[i].kind == COL_TEXT) {
        char *p;
        memcpy(&p, (char *)rows + r * size + cols[i].off, sizeof p);
        free(p);
      }
  free(rows);
}

/* Runs sql (arg, when not NULL, bound to ?1) and reads every row into a malloc'd array of
 * rows of `size` bytes: result column i into cols[i]. `what` names the read in errors. */
static int read_rows(store *s, const char *sql, const char *arg, const col *cols, int ncols,
                     size_t size, void **out, size_t *n, const char *what, pp_err *err) {
  *out = NULL, *n = 0;
  sqlite3_stmt *st = NULL;
  if (store__prepare(s, sql, &st, err)) return err->code;
  if (arg) sqlite3_bind_text(st, 1, arg, -1, SQLITE_STATIC);
  size_t cap = 0;
  int rc, ret = PP_OK;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (*n == cap) {
      size_t c = cap ? 2 * cap : 16;
      void *p = realloc(*out, c * size);
      if (!p) {
        ret = pp_err_set(err, PP_NOMEM, "%s: out of memory reading %s", s->path, what);
        break;
      }
      *out = p, cap = c;
    }
    char *row = (char *)*out + *n * size;
    memset(row, 0, size);
    (*n)++;
    int bad = 0;
    for (int i = 0; i < ncols; i++) bad |= take_col(st, i, &cols[i], row);
    if (bad) {
      ret = pp_err_set(err, PP_NOMEM, "%s: out of memory reading %s", s->path, what);
      break;
    }
  }
  if (!ret && rc != SQLITE_DONE) ret = store__fail(s->db, s->path, what, rc, err);
  sqlite3_finalize(st);
  if (ret) {
    free_rows(*out, *n, cols, ncols, size);
    *out = NULL, *n = 0;
  }
  return ret;
}

/* The file's schema version, for reads that need a table or a column of a later one. */
static int version(store *s, int *v, pp_err *err) { return store_schema_version(s, v, err); }

/* ---- opening ------------------------------------------------------------------------------ */

int store_report_open(const char *path, store **out, int *ver, pp_err *err) {
  struct stat sb;
  *out = NULL;
  if (stat(path, &sb) != 0)
    return errno == ENOENT
               ? pp_err_set(err, PP_INPUT, "%s: no such file (a report reads an existing store)",
                            path)
               : pp_err_set(err, PP_IO, "%s: %s", path, strerror(errno));
  if (!S_ISREG(sb.st_mode)) return pp_err_set(err, PP_INPUT, "%s: not a regular file", path);
  store_opts o = {.readonly = 1, .older_ok = 1};
  if (store_open(path, &o, out, err)) return err->code;
  if (version(*out, ver, err)) {
    store_close(*out);
    *out = NULL;
    return err->code;
  }
  return PP_OK;
}

/* ---- search runs -------------------------------------------------------------------------- */

#define RUN_F(k, f) {k, offsetof(store_report_run, f)}
static const col run_cols[] = {
    RUN_F(COL_I64, id),           RUN_F(COL_TEXT, model),        RUN_F(COL_TEXT, cluster),
    RUN_F(COL_INT, gpus),         RUN_F(COL_TEXT, method),       RUN_F(COL_TEXT, params_json),
    RUN_F(COL_TEXT, status),      RUN_F(COL_LL, evaluations),    RUN_F(COL_LL, plans_found),
    RUN_F(COL_DBL, wall_s),       RUN_F(COL_DBL, best_iter_time_s),
    RUN_F(COL_DBL, lower_bound_s), RUN_F(COL_DBL, gap),          RUN_F(COL_I64, best_plan_id),
    RUN_F(COL_TEXT, best_plan),   RUN_F(COL_DBL, best_sim_s)};

/* %s: the gap; schema 1 has no gap column, so it is computed from the best and the bound */
static const char runs_sql[] =
    "SELECT r.id, m.name, c.name, c.gpus, r.method, r.params_json, r.status, r.evaluations,"
    " r.plans_found, r.wall_s, r.best_iter_time_s, r.lower_bound_s, %s, IFNULL(r.best_plan_id, 0),"
    " p.text, (SELECT x.iter_time_s FROM scores x WHERE x.search_run_id = r.id"
    "   AND x.plan_id = r.best_plan_id AND x.source = 'sim' ORDER BY x.id DESC LIMIT 1)"
    " FROM search_runs r JOIN models m ON m.id = r.model_id JOIN clusters c ON c.id = r.cluster_id"
    " LEFT JOIN plans p ON p.id = r.best_plan_id ORDER BY r.id";
#define GAP_FROM_BOUND                                                                       \
  "CASE WHEN r.lower_bound_s > 0 AND r.best_iter_time_s > 0"                                 \
  " THEN (r.best_iter_time_s - r.lower_bound_s) / r.lower_bound_s END"

int store_report_runs(store *s, store_report_run **out, size_t *n, pp_err *err) {
  int v;
  *out = NULL, *n = 0;
  if (version(s, &v, err)) return err->code;
  if (v < 1) return PP_OK;
  char sql[sizeof runs_sql + 256];
  snprintf(sql, sizeof sql, runs_sql,
           v >= 2 ? "COALESCE(r.gap, " GAP_FROM_BOUND ")" : GAP_FROM_BOUND);
  return read_rows(s, sql, NULL, run_cols, NCOLS(run_cols), sizeof **out, (void **)out, n,
                   "search runs", err);
}

void store_report_runs_free(store_report_run *r, size_t n) {
  free_rows(r, n, run_cols, NCOLS(run_cols), sizeof *r);
}

/* ---- pairs of scores ---------------------------------------------------------------------- */

#define PAIR_F(k, f) {k, offsetof(store_report_pair, f)}
static const col pair_cols[] = {
    PAIR_F(COL_I64, plan_id), PAIR_F(COL_I64, search_run_id), PAIR_F(COL_I64, calibration_id),
    PAIR_F(COL_TEXT, model),  PAIR_F(COL_TEXT, cluster),      PAIR_F(COL_INT, gpus),
    PAIR_F(COL_TEXT, plan),   PAIR_F(COL_DBL, ref_s),         PAIR_F(COL_DBL, costmodel_s),
    PAIR_F(COL_INT, feasible)};

int store_report_pairs(store *s, store_source ref, store_report_pair **out, size_t *n,
                       pp_err *err) {
  int v;
  *out = NULL, *n = 0;
  if (ref != STORE_SRC_PUBLISHED && ref != STORE_SRC_SIM)
    return pp_err_set(err, PP_INTERNAL, "%s: report pairs: source %s is not published or sim",
                      s->path, store_source_name(ref));
  if (version(s, &v, err)) return err->code;
  if (v < 1) return PP_OK;
  /* from schema 4 a score carries the cost-model parameters it was computed with: a pair is
   * two scores of the same parameters (study validate stores a published row's with its own) */
  char sql[1024];
  snprintf(sql, sizeof sql,
           "SELECT r.plan_id, IFNULL(r.search_run_id, 0), IFNULL(c.calibration_id, 0), m.name,"
           " k.name, k.gpus, p.text, r.iter_time_s, c.iter_time_s, c.feasible FROM scores r"
           " JOIN scores c ON c.plan_id = r.plan_id AND c.model_id = r.model_id"
           "  AND c.cluster_id = r.cluster_id AND c.source = 'costmodel'"
           "  AND IFNULL(c.search_run_id, 0) = IFNULL(r.search_run_id, 0)"
           "  AND (r.source = 'published'"
           "       OR IFNULL(c.calibration_id, 0) = IFNULL(r.calibration_id, 0))%s"
           " JOIN models m ON m.id = r.model_id JOIN clusters k ON k.id = r.cluster_id"
           " JOIN plans p ON p.id = r.plan_id"
           " WHERE r.source = ?1 AND r.iter_time_s > 0 AND c.iter_time_s > 0 ORDER BY r.id, c.id",
           v >= 4 ? " AND c.params = r.params" : "");
  return read_rows(
      s, sql, store_source_name(ref), pair_cols, NCOLS(pair_cols), sizeof **out, (void **)out, n,
      ref == STORE_SRC_SIM ? "simulated and predicted scores" : "published and predicted scores",
      err);
}

void store_report_pairs_free(store_report_pair *p, size_t n) {
  free_rows(p, n, pair_cols, NCOLS(pair_cols), sizeof *p);
}

/* ---- calibrations ------------------------------------------------------------------------- */

#define CAL_F(k, f) {k, offsetof(store_calibration, f)}
static const col cal_cols[] = {
    CAL_F(COL_I64, id),           CAL_F(COL_I64, cluster_id),     CAL_F(COL_TEXT, method),
    CAL_F(COL_TEXT, params_json), CAL_F(COL_TEXT, inputs_json),   CAL_F(COL_TEXT, residuals_json),
    CAL_F(COL_DBL, fit_error),    CAL_F(COL_TEXT, holdout_json),  CAL_F(COL_TEXT, created_at),
    CAL_F(COL_TEXT, cluster_name)};

int store_report_calibrations(store *s, store_calibration **out, size_t *n, pp_err *err) {
  int v;
  *out = NULL, *n = 0;
  if (version(s, &v, err)) return err->code;
  if (v < 1) return PP_OK;
  return read_rows(s,
                   "SELECT k.id, k.cluster_id, k.method, k.params_json, k.inputs_json,"
                   " k.residuals_json, k.fit_error, k.holdout_json, k.created_at, c.name"
                   " FROM calibrations k JOIN clusters c ON c.id = k.cluster_id ORDER BY k.id",
                   NULL, cal_cols, NCOLS(cal_cols), sizeof **out, (void **)out, n, "calibrations",
                   err);
}

void store_report_calibrations_free(store_calibration *c, size_t n) {
  free_rows(c, n, cal_cols, NCOLS(cal_cols), sizeof *c);
}

/* ---- study cases -------------------------------------------------------------------------- */

#define STUDY_F(k, f) {k, offsetof(store_report_study, f)}
static const col study_cols[] = {STUDY_F(COL_TEXT, study), STUDY_F(COL_LL, cases),
                                 STUDY_F(COL_DBL, wall_s)};

int store_report_studies(store *s, store_report_study **out, size_t *n, pp_err *err) {
  int v;
  *out = NULL, *n = 0;
  if (version(s, &v, err)) return err->code;
  if (v < 3) return PP_OK; /* study_cases arrived with schema 3 */
  return read_rows(s,
                   "SELECT study, count(*), sum(wall_s) FROM study_cases GROUP BY study"
                   " ORDER BY study",
                   NULL, study_cols, NCOLS(study_cols), sizeof **out, (void **)out, n,
                   "study cases", err);
}

void store_report_studies_free(store_report_study *st, size_t n) {
  free_rows(st, n, study_cols, NCOLS(study_cols), sizeof *st);
}

/* ---- trace files -------------------------------------------------------------------------- */

#define TRACE_F(k, f) {k, offsetof(store_report_trace, f)}
static const col trace_cols[] = {
    TRACE_F(COL_I64, score_id), TRACE_F(COL_I64, plan_id),   TRACE_F(COL_TEXT, path),
    TRACE_F(COL_TEXT, source),  TRACE_F(COL_TEXT, model),    TRACE_F(COL_TEXT, cluster),
    TRACE_F(COL_INT, gpus),     TRACE_F(COL_TEXT, plan),     TRACE_F(COL_DBL, iter_time_s),
    TRACE_F(COL_TEXT, created_at)};

int store_report_traces(store *s, store_report_trace **out, size_t *n, pp_err *err) {
  int v;
  *out = NULL, *n = 0;
  if (version(s, &v, err)) return err->code;
  if (v < 1) return PP_OK;
  /* CASE, not AND: json_extract fails on a breakdown that is not JSON */
  return read_rows(
      s,
      "SELECT sc.id, sc.plan_id, t.path, sc.source, m.name, k.name, k.gpus, p.text,"
      " sc.iter_time_s, sc.created_at FROM (SELECT id, CASE WHEN json_valid(breakdown_json)"
      "  THEN json_extract(breakdown_json, '$.trace') END AS path FROM scores) t"
      " JOIN scores sc ON sc.id = t.id JOIN models m ON m.id = sc.model_id"
      " JOIN clusters k ON k.id = sc.cluster_id JOIN plans p ON p.id = sc.plan_id"
      " WHERE typeof(t.path) = 'text' ORDER BY sc.id",
      NULL, trace_cols, NCOLS(trace_cols), sizeof **out, (void **)out, n, "trace files", err);
}

void store_report_traces_free(store_report_trace *t, size_t n) {
  free_rows(t, n, trace_cols, NCOLS(trace_cols), sizeof *t);
}
