/* Measurements read back for a calibration, and the calibrations themselves. */
#include <stdlib.h>
#include <string.h>

#include "store_int.h"

static char *dup_col(sqlite3_stmt *st, int i) {
  const unsigned char *t = sqlite3_column_text(st, i);
  return t ? strdup((const char *)t) : NULL;
}

static void free_row(store_measurement *r) {
  free((char *)r->run_key), free((char *)r->kind), free((char *)r->name);
  free((char *)r->device), free((char *)r->shape_json), free((char *)r->placement);
  free((char *)r->source);
}

void store_meas_list_free(store_meas_list *l) {
  if (!l) return;
  for (size_t i = 0; i < l->n; i++) free_row(&l->rows[i]);
  free(l->rows), free(l->ids);
  memset(l, 0, sizeof *l);
}

/* Appends the row under the statement's cursor; nonzero when out of memory. */
static int take_row(sqlite3_stmt *st, store_meas_list *l, size_t *cap) {
  if (l->n == *cap) {
    size_t c = *cap ? 2 * *cap : 256;
    store_measurement *r = realloc(l->rows, c * sizeof *r);
    if (!r) return 1;
    l->rows = r;
    int64_t *ids = realloc(l->ids, c * sizeof *ids);
    if (!ids) return 1;
    l->ids = ids;
    *cap = c;
  }
  store_measurement *r = &l->rows[l->n];
  memset(r, 0, sizeof *r);
  l->ids[l->n] = sqlite3_column_int64(st, 0);
  r->run_key = dup_col(st, 1);
  r->seq = sqlite3_column_int(st, 2);
  r->kind = dup_col(st, 3);
  r->name = dup_col(st, 4);
  r->cluster_id = sqlite3_column_int64(st, 5);
  r->device = dup_col(st, 6);
  r->shape_json = dup_col(st, 7);
  r->bytes = sqlite3_column_double(st, 8);
  r->ranks = sqlite3_column_int(st, 9);
  r->placement = dup_col(st, 10);
  r->time_s = sqlite3_column_double(st, 11);
  r->algbw_gbps = sqlite3_column_double(st, 12);
  r->busbw_gbps = sqlite3_column_double(st, 13);
  r->source = dup_col(st, 14);
  l->n++;
  if (!r->run_key || !r->kind || !r->name || !r->device || !r->shape_json) return 1;
  return 0;
}

int store_get_measurements(store *s, const char *cluster_name, const char *kind,
                           store_meas_list *out, pp_err *err) {
  memset(out, 0, sizeof *out);
  sqlite3_stmt *st = NULL;
  if (store__prepare(s,
                     "SELECT m.id, m.run_key, m.seq, m.kind, m.name, m.cluster_id, m.device,"
                     " m.shape_json, m.bytes, m.ranks, m.placement, m.time_s, m.algbw_gbps,"
                     " m.busbw_gbps, m.source FROM measurements m"
                     " JOIN clusters c ON c.id = m.cluster_id"
                     " WHERE c.name = ?1 AND (?2 IS NULL OR m.kind = ?2) ORDER BY m.id",
                     &st, err))
    return err->code;
  sqlite3_bind_text(st, 1, cluster_name, -1, SQLITE_STATIC);
  if (kind)
    sqlite3_bind_text(st, 2, kind, -1, SQLITE_STATIC);
  else
    sqlite3_bind_null(st, 2);
  size_t cap = 0;
  int rc, ret = PP_OK;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW)
    if (take_row(st, out, &cap)) {
      ret = pp_err_set(err, PP_NOMEM, "%s: out of memory reading measurements", s->path);
      break;
    }
  if (!ret && rc != SQLITE_DONE) ret = store__fail(s->db, s->path, "reading measurements", rc, err);
  sqlite3_finalize(st);
  if (ret) store_meas_list_free(out);
  return ret;
}

void store_backend_runs_free(store_backend_run *r, size_t n) {
  for (size_t i = 0; r && i < n; i++) {
    free(r[i].model_json), free(r[i].cluster_json), free(r[i].plan_json);
    free(r[i].run_key), free(r[i].device);
  }
  free(r);
}

int store_get_backend_runs(store *s, const char *cluster_name, store_backend_run **out,
                           size_t *n, pp_err *err) {
  *out = NULL, *n = 0;
  sqlite3_stmt *st = NULL;
  if (store__prepare(s,
                     "SELECT sc.id, sc.plan_id, m.json, c.json, p.json, sc.iter_time_s,"
                     " json_extract(sc.breakdown_json, '$.run_key'),"
                     " json_extract(sc.breakdown_json, '$.device') FROM scores sc"
                     " JOIN models m ON m.id = sc.model_id JOIN clusters c ON c.id = sc.cluster_id"
                     " JOIN plans p ON p.id = sc.plan_id"
                     " WHERE sc.source = 'backend' AND c.name = ?1 AND sc.iter_time_s > 0"
                     " ORDER BY sc.id",
                     &st, err))
    return err->code;
  sqlite3_bind_text(st, 1, cluster_name, -1, SQLITE_STATIC);
  size_t cap = 0;
  int rc, ret = PP_OK;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (*n == cap) {
      size_t c = cap ? 2 * cap : 16;
      store_backend_run *r = realloc(*out, c * sizeof *r);
      if (!r) {
        ret = pp_err_set(err, PP_NOMEM, "%s: out of memory reading runs", s->path);
        break;
      }
      *out = r, cap = c;
    }
    store_backend_run *r = &(*out)[(*n)++];
    *r = (store_backend_run){.score_id = sqlite3_column_int64(st, 0),
                             .plan_id = sqlite3_column_int64(st, 1), .model_json = dup_col(st, 2),
                             .cluster_json = dup_col(st, 3), .plan_json = dup_col(st, 4),
                             .iter_time_s = sqlite3_column_double(st, 5),
                             .run_key = dup_col(st, 6), .device = dup_col(st, 7)};
    if (!r->model_json || !r->cluster_json || !r->plan_json || !r->run_key || !r->device) {
      ret = pp_err_set(err, PP_NOMEM, "%s: out of memory (or a backend score without its run key "
                       "and device)", s->path);
      break;
    }
  }
  if (!ret && rc != SQLITE_DONE) ret = store__fail(s->db, s->path, "reading runs", rc, err);
  sqlite3_finalize(st);
  if (ret) {
    store_backend_runs_free(*out, *n);
    *out = NULL, *n = 0;
  }
  return ret;
}

int store_get_search_top(store *s, int64_t run_id, int k, int64_t *ids, double *secs, int *n,
                         char **model_json, char **cluster_json, pp_err *err) {
  *n = 0, *model_json = *cluster_json = NULL;
  sqlite3_stmt *st = NULL;
  if (store__prepare(s,
                     "SELECT m.json, c.json FROM search_runs r JOIN models m ON m.id = r.model_id"
                     " JOIN clusters c ON c.id = r.cluster_id WHERE r.id = ?1",
                     &st, err))
    return err->code;
  sqlite3_bind_int64(st, 1, run_id);
  int rc = sqlite3_step(st), ret = PP_OK;
  if (rc == SQLITE_ROW) {
    *model_json = dup_col(st, 0), *cluster_json = dup_col(st, 1);
    if (!*model_json || !*cluster_json) ret = pp_err_set(err, PP_NOMEM, "%s: out of memory", s->path);
  } else if (rc == SQLITE_DONE) {
    ret = pp_err_set(err, PP_NOTFOUND, "%s: no search run %lld", s->path, (long long)run_id);
  } else {
    ret = store__fail(s->db, s->path, "reading a search run", rc, err);
  }
  sqlite3_finalize(st);
  st = NULL;
  if (!ret && !store__prepare(s,
                              "SELECT plan_id, min(iter_time_s) AS t FROM scores"
                              " WHERE search_run_id = ?1 AND source = 'costmodel' AND feasible = 1"
                              " AND iter_time_s > 0 GROUP BY plan_id ORDER BY t, plan_id LIMIT ?2",
                              &st, err)) {
    sqlite3_bind_int64(st, 1, run_id);
    sqlite3_bind_int(st, 2, k);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW && *n < k) {
      ids[*n] = sqlite3_column_int64(st, 0);
      secs[(*n)++] = sqlite3_column_double(st, 1);
    }
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
      ret = store__fail(s->db, s->path, "reading a search run's plans", rc, err);
    sqlite3_finalize(st);
  } else if (!ret) {
    ret = err->code;
  }
  if (ret) {
    free(*model_json), free(*cluster_json);
    *model_json = *cluster_json = NULL;
    *n = 0;
  }
  return ret;
}

int store_put_calibration(store *s, store_calibration *c, pp_err *err) {
  sqlite3_stmt *st = NULL;
  if (store__prepare(s,
                     "INSERT INTO calibrations (cluster_id, method, params_json, inputs_json,"
                     " residuals_json, fit_error, holdout_json) VALUES (?, ?, ?, ?, ?, ?, ?)"
                     " RETURNING id",
                     &st, err))
    return err->code;
  sqlite3_bind_int64(st, 1, c->cluster_id);
  sqlite3_bind_text(st, 2, c->method, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, c->params_json, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 4, c->inputs_json, -1, SQLITE_STATIC);
  if (c->residuals_json)
    sqlite3_bind_text(st, 5, c->residuals_json, -1, SQLITE_STATIC);
  else
    sqlite3_bind_null(st, 5);
  sqlite3_bind_double(st, 6, c->fit_error);
  if (c->holdout_json)
    sqlite3_bind_text(st, 7, c->holdout_json, -1, SQLITE_STATIC);
  else
    sqlite3_bind_null(st, 7);
  int rc = sqlite3_step(st), ret = PP_OK;
  if (rc == SQLITE_ROW) {
    c->id = sqlite3_column_int64(st, 0);
    rc = sqlite3_step(st);
  }
  if (rc != SQLITE_DONE) ret = store__fail(s->db, s->path, "writing a calibration", rc, err);
  sqlite3_finalize(st);
  return ret;
}

void store_calibration_clear(store_calibration *c) {
  if (!c) return;
  free((char *)c->method), free((char *)c->params_json), free((char *)c->inputs_json);
  free((char *)c->residuals_json), free((char *)c->holdout_json), free((char *)c->created_at);
  free(c->cluster_name);
  memset(c, 0, sizeof *c);
}

int store_get_calibration(store *s, int64_t id, store_calibration *out, pp_err *err) {
  memset(out, 0, sizeof *out);
  sqlite3_stmt *st = NULL;
  if (store__prepare(s,
                     "SELECT k.id, k.cluster_id, k.method, k.params_json, k.inputs_json,"
                     " k.residuals_json, k.fit_error, k.holdout_json, k.created_at, c.name"
                     " FROM calibrations k JOIN clusters c ON c.id = k.cluster_id WHERE k.id = ?",
                     &st, err))
    return err->code;
  sqlite3_bind_int64(st, 1, id);
  int rc = sqlite3_step(st), ret = PP_OK;
  if (rc == SQLITE_ROW) {
    out->id = sqlite3_column_int64(st, 0);
    out->cluster_id = sqlite3_column_int64(st, 1);
    out->method = dup_col(st, 2);
    out->params_json = dup_col(st, 3);
    out->inputs_json = dup_col(st, 4);
    out->residuals_json = dup_col(st, 5);
    out->fit_error = sqlite3_column_double(st, 6);
    out->holdout_json = dup_col(st, 7);
    out->created_at = dup_col(st, 8);
    out->cluster_name = dup_col(st, 9);
    if (!out->method || !out->params_json || !out->inputs_json || !out->cluster_name)
      ret = pp_err_set(err, PP_NOMEM, "%s: out of memory reading calibration %lld", s->path,
                       (long long)id);
  } else if (rc == SQLITE_DONE) {
    ret = pp_err_set(err, PP_NOTFOUND, "%s: no calibration with id %lld", s->path,
                     (long long)id);
  } else {
    ret = store__fail(s->db, s->path, "reading a calibration", rc, err);
  }
  sqlite3_finalize(st);
  if (ret) store_calibration_clear(out);
  return ret;
}

int store_latest_calibration(store *s, const char *cluster_name, int64_t *id, pp_err *err) {
  sqlite3_stmt *st = NULL;
  if (store__prepare(s,
                     "SELECT k.id FROM calibrations k JOIN clusters c ON c.id = k.cluster_id"
                     " WHERE (?1 IS NULL OR c.name = ?1) AND NOT (json_valid(k.holdout_json)"
                     " AND coalesce(json_extract(k.holdout_json, '$.worse_than_prior'), 0))"
                     " ORDER BY k.id DESC LIMIT 1",
                     &st, err))
    return err->code;
  if (cluster_name)
    sqlite3_bind_text(st, 1, cluster_name, -1, SQLITE_STATIC);
  else
    sqlite3_bind_null(st, 1);
  int rc = sqlite3_step(st), ret = PP_OK;
  if (rc == SQLITE_ROW)
    *id = sqlite3_column_int64(st, 0);
  else if (rc == SQLITE_DONE)
    ret = pp_err_set(err, PP_NOTFOUND, "%s: no calibration%s%s (one that predicts what it did "
                     "not fit worse than the priors is never the latest: name it by id)",
                     s->path, cluster_name ? " of cluster " : "", cluster_name ? cluster_name : "");
  else
    ret = store__fail(s->db, s->path, "finding the latest calibration", rc, err);
  sqlite3_finalize(st);
  return ret;
}
