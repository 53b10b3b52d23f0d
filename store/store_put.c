/* Writes and reads of specs, plans, scores and measurements. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_int.h"

static const char *const source_names[] = {"costmodel", "sim", "backend", "published"};

const char *store_source_name(store_source s) {
  return (unsigned)s < 4 ? source_names[s] : "?";
}

int store__prepare(store *s, const char *sql, sqlite3_stmt **st, pp_err *err) {
  int rc = sqlite3_prepare_v2(s->db, sql, -1, st, NULL);
  if (rc != SQLITE_OK) return store__fail(s->db, s->path, "preparing a statement", rc, err);
  return PP_OK;
}

static void bind_text(sqlite3_stmt *st, int i, const char *v) {
  if (v)
    sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
  else
    sqlite3_bind_null(st, i);
}

static void bind_id(sqlite3_stmt *st, int i, int64_t id) {
  if (id > 0)
    sqlite3_bind_int64(st, i, id);
  else
    sqlite3_bind_null(st, i);
}

/* Inserts (hash, json, ...) unless the hash is there, then returns the row's id. `json` is
 * the canonical JSON (malloc'd, taken over and freed here; NULL means allocation failed). An
 * existing row must hold the same text: a different one is a hash collision. */
static int put_by_hash(store *s, const char *table, const char *insert_sql, char *json,
                       void (*bind_rest)(sqlite3_stmt *, const void *), const void *arg,
                       int64_t *id, pp_err *err) {
  if (!json) return pp_err_set(err, PP_NOMEM, "%s: out of memory", s->path);
  char hash[SPEC_HASH_LEN], sql[96];
  spec_hash(json, hash);
  sqlite3_stmt *st = NULL;
  int ret = PP_OK, rc;
  if ((ret = store__prepare(s, insert_sql, &st, err))) goto done;
  sqlite3_bind_text(st, 1, hash, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, json, -1, SQLITE_STATIC);
  bind_rest(st, arg);
  rc = sqlite3_step(st);
  sqlite3_finalize(st);
  st = NULL;
  if (rc != SQLITE_DONE) {
    ret = store__fail(s->db, s->path, table, rc, err);
    goto done;
  }
  snprintf(sql, sizeof sql, "SELECT id, json FROM %s WHERE hash = ?", table);
  if ((ret = store__prepare(s, sql, &st, err))) goto done;
  sqlite3_bind_text(st, 1, hash, -1, SQLITE_STATIC);
  rc = sqlite3_step(st);
  if (rc != SQLITE_ROW)
    ret = store__fail(s->db, s->path, table, rc, err);
  else if (strcmp((const char *)sqlite3_column_text(st, 1), json) != 0)
    ret = pp_err_set(err, PP_DB, "%s: %s: hash %s collides with a different row", s->path, table,
                     hash);
  else
    *id = sqlite3_column_int64(st, 0);
done:
  sqlite3_finalize(st);
  free(json);
  return ret;
}

static void bind_model(sqlite3_stmt *st, const void *arg) {
  const spec_model *m = arg;
  sqlite3_bind_text(st, 3, m->name, -1, SQLITE_STATIC);
  sqlite3_bind_double(st, 4, spec_model_params(m));
}

int store_put_model(store *s, const spec_model *m, int64_t *id, pp_err *err) {
  return put_by_hash(s, "models",
                     "INSERT INTO models (hash, json, name, params) VALUES (?, ?, ?, ?) "
                     "ON CONFLICT (hash) DO NOTHING",
                     spec_model_json(m), bind_model, m, id, err);
}

static void bind_cluster(sqlite3_stmt *st, const void *arg) {
  const spec_cluster *c = arg;
  sqlite3_bind_text(st, 3, c->name, -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 4, c->gpus);
  sqlite3_bind_text(st, 5, c->gpu.name, -1, SQLITE_STATIC);
}

int store_put_cluster(store *s, const spec_cluster *c, int64_t *id, pp_err *err) {
  return put_by_hash(s, "clusters",
                     "INSERT INTO clusters (hash, json, name, gpus, gpu) VALUES (?, ?, ?, ?, ?) "
                     "ON CONFLICT (hash) DO NOTHING",
                     spec_cluster_json(c), bind_cluster, c, id, err);
}

static void bind_plan(sqlite3_stmt *st, const void *arg) {
  const char *text = arg;
  bind_text(st, 3, text);
  sqlite3_bind_int(st, 4, text != NULL);
}

int store_put_plan(store *s, const spec_plan *p, int64_t *id, pp_err *err) {
  if (!p->nstages && p->dp < 1)
    return pp_err_set(err, PP_INTERNAL, "%s: plans: an unresolved plan cannot be stored", s->path);
  char text[SPEC_PLAN_STR_MAX];
  if (!p->nstages && spec_plan_format(p, text, sizeof text, err)) return err->code;
  return put_by_hash(s, "plans",
                     "INSERT INTO plans (hash, json, text, uniform) VALUES (?, ?, ?, ?) "
                     "ON CONFLICT (hash) DO NOTHING",
                     spec_plan_json(p), bind_plan, p->nstages ? NULL : text, id, err);
}

int store_get_plan(store *s, int64_t id, spec_plan *out, pp_err *err) {
  sqlite3_stmt *st = NULL;
  if (store__prepare(s, "SELECT json FROM plans WHERE id = ?", &st, err)) return err->code;
  sqlite3_bind_int64(st, 1, id);
  int rc = sqlite3_step(st), ret;
  if (rc == SQLITE_ROW)
    ret = spec_plan_parse((const char *)sqlite3_column_text(st, 0), out, err);
  else if (rc == SQLITE_DONE)
    ret = pp_err_set(err, PP_NOTFOUND, "%s: no plan with id %lld", s->path, (long long)id);
  else
    ret = store__fail(s->db, s->path, "reading a plan", rc, err);
  sqlite3_finalize(st);
  return ret;
}

int store_get_model(store *s, int64_t id, spec_model *out, pp_err *err) {
  sqlite3_stmt *st = NULL;
  if (store__prepare(s, "SELECT json FROM models WHERE id = ?", &st, err)) return err->code;
  sqlite3_bind_int64(st, 1, id);
  int rc = sqlite3_step(st), ret;
  if (rc == SQLITE_ROW) {
    char origin[64];
    snprintf(origin, sizeof origin, "model %lld", (long long)id);
    ret = spec_model_parse((const char *)sqlite3_column_text(st, 0),
                           (size_t)sqlite3_column_bytes(st, 0), origin, out, err);
  } else if (rc == SQLITE_DONE) {
    ret = pp_err_set(err, PP_NOTFOUND, "%s: no model with id %lld", s->path, (long long)id);
  } else {
    ret = store__fail(s->db, s->path, "reading a model", rc, err);
  }
  sqlite3_finalize(st);
  return ret;
}

int store_plan_models(store *s, int64_t plan_id, int64_t *ids, int max, int *n, pp_err *err) {
  sqlite3_stmt *st = NULL;
  if (store__prepare(s,
                     "SELECT model_id FROM scores WHERE plan_id = ? GROUP BY model_id"
                     " ORDER BY max(id) DESC",
                     &st, err))
    return err->code;
  sqlite3_bind_int64(st, 1, plan_id);
  int rc, k = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (k < max) ids[k] = sqlite3_column_int64(st, 0);
    k++;
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return store__fail(s->db, s->path, "reading a plan's models", rc, err);
  *n = k;
  return PP_OK;
}

int store_put_score(store *s, const store_score *sc, int64_t *id, pp_err *err) {
  if ((unsigned)sc->source > STORE_SRC_PUBLISHED)
    return pp_err_set(err, PP_INTERNAL, "%s: scores: bad source %d", s->path, (int)sc->source);
  sqlite3_stmt *st = NULL;
  if (store__prepare(s,
                     "INSERT INTO scores (plan_id, model_id, cluster_id, source, calibration_id,"
                     " search_run_id, iter_time_s, tokens_per_s, mfu, mem_gib, feasible,"
                     " breakdown_json, params)"
                     " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                     " ON CONFLICT DO UPDATE SET iter_time_s = excluded.iter_time_s,"
                     " tokens_per_s = excluded.tokens_per_s, mfu = excluded.mfu,"
                     " mem_gib = excluded.mem_gib, feasible = excluded.feasible,"
                     " breakdown_json = excluded.breakdown_json,"
                     " created_at = strftime('%Y-%m-%dT%H:%M:%fZ','now')"
                     " RETURNING id",
                     &st, err))
    return err->code;
  sqlite3_bind_int64(st, 1, sc->plan_id);
  sqlite3_bind_int64(st, 2, sc->model_id);
  sqlite3_bind_int64(st, 3, sc->cluster_id);
  sqlite3_bind_text(st, 4, source_names[sc->source], -1, SQLITE_STATIC);
  bind_id(st, 5, sc->calibration_id);
  bind_id(st, 6, sc->search_run_id);
  sqlite3_bind_double(st, 7, sc->iter_time_s);
  sqlite3_bind_double(st, 8, sc->tokens_per_s);
  sqlite3_bind_double(st, 9, sc->mfu);
  sqlite3_bind_double(st, 10, sc->mem_gib);
  sqlite3_bind_int(st, 11, sc->feasible != 0);
  sqlite3_bind_text(st, 12, sc->breakdown_json ? sc->breakdown_json : "{}", -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 13, sc->params ? sc->params : "", -1, SQLITE_STATIC);
  int rc = sqlite3_step(st), ret = PP_OK;
  if (rc == SQLITE_ROW) {
    if (id) *id = sqlite3_column_int64(st, 0);
    rc = sqlite3_step(st);
  }
  if (rc != SQLITE_DONE) ret = store__fail(s->db, s->path, "writing a score", rc, err);
  sqlite3_finalize(st);
  return ret;
}

int store_put_measurements(store *s, const store_measurement *m, size_t n, size_t *added,
                           pp_err *err) {
  int own = !s->in_tx;
  size_t count = 0;
  sqlite3_stmt *st = NULL;
  if (own && store_begin(s, err)) return err->code;
  if (store__prepare(s,
                     "INSERT INTO measurements (run_key, seq, kind, name, cluster_id, device,"
                     " shape_json, bytes, ranks, placement, time_s, algbw_gbps, busbw_gbps, source)"
                     " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                     " ON CONFLICT (run_key, seq) DO NOTHING",
                     &st, err))
    goto fail;
  for (size_t i = 0; i < n; i++) {
    const store_measurement *r = &m[i];
    sqlite3_reset(st);
    bind_text(st, 1, r->run_key);
    sqlite3_bind_int(st, 2, r->seq);
    bind_text(st, 3, r->kind);
    bind_text(st, 4, r->name);
    bind_id(st, 5, r->cluster_id);
    bind_text(st, 6, r->device);
    sqlite3_bind_text(st, 7, r->shape_json ? r->shape_json : "{}", -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 8, r->bytes);
    sqlite3_bind_int(st, 9, r->ranks);
    bind_text(st, 10, r->placement);
    sqlite3_bind_double(st, 11, r->time_s);
    sqlite3_bind_double(st, 12, r->algbw_gbps);
    sqlite3_bind_double(st, 13, r->busbw_gbps);
    bind_text(st, 14, r->source);
    int rc = sqlite3_step(st);
    if (rc != SQLITE_DONE) {
      char what[96];
      snprintf(what, sizeof what, "writing measurement %zu of %zu", i + 1, n);
      store__fail(s->db, s->path, what, rc, err);
      goto fail;
    }
    count += (size_t)sqlite3_changes(s->db);
  }
  sqlite3_finalize(st);
  st = NULL;
  if (own && store_commit(s, err)) return err->code;
  if (added) *added = count;
  return PP_OK;
fail:
  sqlite3_finalize(st);
  if (own) store_rollback(s);
  return err->code;
}
