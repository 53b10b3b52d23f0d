/* The cases of studies (store.h): one row per finished case, replaced when written again. */
#include <stdlib.h>
#include <string.h>

#include "store_int.h"

int store_put_study_case(store *s, const store_study_case *k, int64_t *id, pp_err *err) {
  int64_t mid = 0, cid = 0;
  if (store_begin(s, err)) return err->code;
  if ((k->m && store_put_model(s, k->m, &mid, err)) ||
      (k->c && store_put_cluster(s, k->c, &cid, err))) {
    store_rollback(s);
    return err->code;
  }
  sqlite3_stmt *st = NULL;
  if (store__prepare(s,
                     "INSERT INTO study_cases (study, case_key, model_id, cluster_id,"
                     " calibration_id, result_json, wall_s) VALUES (?, ?, ?, ?, ?, ?, ?)"
                     " ON CONFLICT (study, case_key) DO UPDATE SET model_id = excluded.model_id,"
                     " cluster_id = excluded.cluster_id, calibration_id = excluded.calibration_id,"
                     " result_json = excluded.result_json, wall_s = excluded.wall_s,"
                     " created_at = strftime('%Y-%m-%dT%H:%M:%fZ','now') RETURNING id",
                     &st, err)) {
    store_rollback(s);
    return err->code;
  }
  sqlite3_bind_text(st, 1, k->study, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, k->case_key, -1, SQLITE_STATIC);
  if (mid) sqlite3_bind_int64(st, 3, mid); else sqlite3_bind_null(st, 3);
  if (cid) sqlite3_bind_int64(st, 4, cid); else sqlite3_bind_null(st, 4);
  if (k->calibration_id) sqlite3_bind_int64(st, 5, k->calibration_id);
  else sqlite3_bind_null(st, 5);
  sqlite3_bind_text(st, 6, k->result_json, -1, SQLITE_STATIC);
  sqlite3_bind_double(st, 7, k->wall_s);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    if (id) *id = sqlite3_column_int64(st, 0);
    rc = sqlite3_step(st);
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) {
    store__fail(s->db, s->path, "writing a study case", rc, err);
    store_rollback(s);
    return err->code;
  }
  return store_commit(s, err);
}

int store_get_study_case(store *s, const char *study, const char *case_key, char **result_json,
                         double *wall_s, pp_err *err) {
  *result_json = NULL;
  sqlite3_stmt *st = NULL;
  if (store__prepare(s, "SELECT result_json, wall_s FROM study_cases WHERE study = ? AND case_key = ?",
                     &st, err))
    return err->code;
  sqlite3_bind_text(st, 1, study, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, case_key, -1, SQLITE_STATIC);
  int rc = sqlite3_step(st), ret = PP_OK;
  if (rc == SQLITE_ROW) {
    const unsigned char *t = sqlite3_column_text(st, 0);
    if (!t || !(*result_json = strdup((const char *)t)))
      ret = pp_err_set(err, PP_NOMEM, "%s: out of memory reading a study case", s->path);
    if (wall_s) *wall_s = sqlite3_column_double(st, 1);
  } else if (rc == SQLITE_DONE) {
    ret = pp_err_set(err, PP_NOTFOUND, "%s: no %s case '%s'", s->path, study, case_key);
  } else {
    ret = store__fail(s->db, s->path, "reading a study case", rc, err);
  }
  sqlite3_finalize(st);
  return ret;
}
