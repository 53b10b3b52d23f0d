/* Search runs: begin (find the unfinished run with the same key, or create one), one
 * checkpoint per finished work unit, the end of the run, and the simulator's scores of its
 * plans. Each call is one transaction (or part of the caller's). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "store_int.h"

/* Starts a transaction unless the caller has one open; *own says which. */
static int tx_begin(store *s, int *own, pp_err *err) {
  *own = !s->in_tx;
  return *own ? store_begin(s, err) : PP_OK;
}

static int tx_end(store *s, int own, int rc, pp_err *err) {
  if (!own) return rc;
  if (rc) {
    store_rollback(s);
    return rc;
  }
  return store_commit(s, err);
}

/* Runs a statement that returns no row (or whose rows are not read). */
static int step_done(store *s, sqlite3_stmt *st, const char *what, pp_err *err) {
  int rc = sqlite3_step(st);
  while (rc == SQLITE_ROW) rc = sqlite3_step(st);
  if (rc != SQLITE_DONE) return store__fail(s->db, s->path, what, rc, err);
  return PP_OK;
}

static void bind_real_or_null(sqlite3_stmt *st, int i, double v, int null_when_zero) {
  if (null_when_zero && v == 0)
    sqlite3_bind_null(st, i);
  else
    sqlite3_bind_double(st, i, v);
}

/* The model and cluster of a run; PP_NOTFOUND when there is no such run. */
static int run_specs(store *s, int64_t run_id, int64_t *mid, int64_t *cid, pp_err *err) {
  sqlite3_stmt *st = NULL;
  if (store__prepare(s, "SELECT model_id, cluster_id FROM search_runs WHERE id = ?", &st, err))
    return err->code;
  sqlite3_bind_int64(st, 1, run_id);
  int rc = sqlite3_step(st), ret = PP_OK;
  if (rc == SQLITE_ROW) {
    *mid = sqlite3_column_int64(st, 0);
    *cid = sqlite3_column_int64(st, 1);
  } else if (rc == SQLITE_DONE) {
    ret = pp_err_set(err, PP_NOTFOUND, "%s: no search run with id %lld", s->path,
                     (long long)run_id);
  } else {
    ret = store__fail(s->db, s->path, "reading a search run", rc, err);
  }
  sqlite3_finalize(st);
  return ret;
}

/* Stores a plan and its score by `source`, tied to the run. */
static int put_scored(store *s, int64_t run_id, int64_t mid, int64_t cid, store_source source,
                      const store_scored_plan *sp, int64_t *plan_id, pp_err *err) {
  store_score sc = sp->score;
  if (store_put_plan(s, sp->plan, &sc.plan_id, err)) return err->code;
  sc.model_id = mid;
  sc.cluster_id = cid;
  sc.source = source;
  sc.search_run_id = run_id;
  if (store_put_score(s, &sc, NULL, err)) return err->code;
  if (plan_id) *plan_id = sc.plan_id;
  return PP_OK;
}

void store_search_state_clear(store_search_state *st) {
  if (!st) return;
  for (int i = 0; i < st->nplans; i++) spec_plan_clear(&st->plans[i].plan);
  free(st->plans);
  free(st->units_done);
  memset(st, 0, sizeof *st);
}

/* The committed, complete units of a run: their counts, bounds and best plans. */
static int load_state(store *s, store_search_state *o, pp_err *err) {
  sqlite3_stmt *st = NULL;
  int rc, ret = PP_OK;
  if (!(o->units_done = calloc((size_t)o->units > 0 ? (size_t)o->units : 1, 1)))
    return pp_err_set(err, PP_NOMEM, "%s: out of memory", s->path);
  if (store__prepare(s,
                     "SELECT unit, evaluations, feasible, pruned, bound_s FROM search_checkpoints"
                     " WHERE search_run_id = ? AND complete = 1 ORDER BY unit",
                     &st, err))
    return err->code;
  sqlite3_bind_int64(st, 1, o->run_id);
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    int u = sqlite3_column_int(st, 0);
    if (u < 0 || u >= o->units || o->units_done[u]) continue;
    o->units_done[u] = 1;
    o->nunits_done++;
    o->evaluations += sqlite3_column_int64(st, 1);
    o->feasible += sqlite3_column_int64(st, 2);
    o->pruned += sqlite3_column_int64(st, 3);
    double b = sqlite3_column_double(st, 4);
    if (b > 0 && (o->bound_s == 0 || b < o->bound_s)) o->bound_s = b;
  }
  sqlite3_finalize(st);
  st = NULL;
  if (rc != SQLITE_DONE) return store__fail(s->db, s->path, "reading checkpoints", rc, err);

  /* each plan once (the unit that ranks it best), fastest first; ties by hash, as the
   * search breaks them */
  if (store__prepare(s,
                     "SELECT cp.plan_id, min(c.unit), p.json, sc.iter_time_s, sc.tokens_per_s,"
                     " sc.mfu, sc.mem_gib FROM search_checkpoints c"
                     " JOIN search_checkpoint_plans cp ON cp.checkpoint_id = c.id"
                     " JOIN plans p ON p.id = cp.plan_id"
                     " LEFT JOIN scores sc ON sc.plan_id = cp.plan_id"
                     "  AND sc.search_run_id = c.search_run_id AND sc.source = 'costmodel'"
                     " WHERE c.search_run_id = ? AND c.complete = 1 AND c.unit < ?"
                     " GROUP BY cp.plan_id ORDER BY sc.iter_time_s, p.hash",
                     &st, err))
    return err->code;
  sqlite3_bind_int64(st, 1, o->run_id);
  sqlite3_bind_int(st, 2, o->units);
  int cap = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (o->nplans == cap) {
      int ncap = cap ? 2 * cap : 16;
      store_search_plan *np = realloc(o->plans, (size_t)ncap * sizeof *np);
      if (!np) {
        ret = pp_err_set(err, PP_NOMEM, "%s: out of memory", s->path);
        goto done;
      }
      o->plans = np;
      cap = ncap;
    }
    store_search_plan *e = &o->plans[o->nplans];
    memset(e, 0, sizeof *e);
    e->plan_id = sqlite3_column_int64(st, 0);
    e->unit = sqlite3_column_int(st, 1);
    e->iter_time_s = sqlite3_column_double(st, 3);
    e->tokens_per_s = sqlite3_column_double(st, 4);
    e->mfu = sqlite3_column_double(st, 5);
    e->mem_gib = sqlite3_column_double(st, 6);
    if (spec_plan_parse((const char *)sqlite3_column_text(st, 2), &e->plan, err)) {
      ret = pp_err_prefix(err, "%s: plan %lld", s->path, (long long)e->plan_id);
      goto done;
    }
    o->nplans++;
  }
  if (rc != SQLITE_DONE) ret = store__fail(s->db, s->path, "reading checkpointed plans", rc, err);
done:
  sqlite3_finalize(st);
  return ret;
}

int store_search_begin(store *s, const char *method, const spec_model *m, const spec_cluster *c,
                       const char *params, const char *params_json, int units,
                       store_search_state *out, pp_err *err) {
  memset(out, 0, sizeof *out);
  if (units < 1)
    return pp_err_set(err, PP_INTERNAL, "%s: search_runs: %d units", s->path, units);
  sqlite3_stmt *st = NULL;
  int own, rc;
  if (tx_begin(s, &own, err)) return err->code;
  if ((rc = store_put_model(s, m, &out->model_id, err)) ||
      (rc = store_put_cluster(s, c, &out->cluster_id, err)))
    goto done;
  if ((rc = store__prepare(s,
                           "SELECT id FROM search_runs WHERE method = ? AND model_id = ?"
                           " AND cluster_id = ? AND params_key = ? AND units = ?"
                           " AND (status IN ('running', 'failed') OR complete = 0)"
                           " ORDER BY id DESC LIMIT 1",
                           &st, err)))
    goto done;
  sqlite3_bind_text(st, 1, method, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, out->model_id);
  sqlite3_bind_int64(st, 3, out->cluster_id);
  sqlite3_bind_text(st, 4, params, -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 5, units);
  int step = sqlite3_step(st);
  if (step == SQLITE_ROW) {
    out->run_id = sqlite3_column_int64(st, 0);
    out->resumed = 1;
  } else if (step != SQLITE_DONE) {
    rc = store__fail(s->db, s->path, "looking for an unfinished search run", step, err);
    goto done;
  }
  sqlite3_finalize(st);
  st = NULL;
  if (out->resumed) {
    if ((rc = store__prepare(s,
                             "UPDATE search_runs SET status = 'running', complete = NULL,"
                             " finished_at = NULL WHERE id = ?",
                             &st, err)))
      goto done;
    sqlite3_bind_int64(st, 1, out->run_id);
  } else {
    if ((rc = store__prepare(s,
                             "INSERT INTO search_runs (method, model_id, cluster_id, params_json,"
                             " params_key, units, status) VALUES (?, ?, ?, ?, ?, ?, 'running')",
                             &st, err)))
      goto done;
    sqlite3_bind_text(st, 1, method, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, out->model_id);
    sqlite3_bind_int64(st, 3, out->cluster_id);
    sqlite3_bind_text(st, 4, params_json ? params_json : "{}", -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, params, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 6, units);
  }
  if ((rc = step_done(s, st, "starting a search run", err))) goto done;
  if (!out->resumed) out->run_id = sqlite3_last_insert_rowid(s->db);
  out->units = units;
  rc = load_state(s, out, err);
done:
  sqlite3_finalize(st);
  rc = tx_end(s, own, rc, err);
  if (rc) store_search_state_clear(out);
  return rc;
}

int store_search_unit_done(store *s, int64_t run_id, const store_search_unit *u, pp_err *err) {
  sqlite3_stmt *st = NULL;
  int64_t mid = 0, cid = 0, ckpt = 0, *ids = NULL;
  int own, rc;
  if (u->unit < 0 || u->ntop < 0)
    return pp_err_set(err, PP_INTERNAL, "%s: checkpoint of unit %d", s->path, u->unit);
  if (tx_begin(s, &own, err)) return err->code;
  if ((rc = run_specs(s, run_id, &mid, &cid, err))) goto done;
  if (u->ntop && !(ids = malloc((size_t)u->ntop * sizeof *ids))) {
    rc = pp_err_set(err, PP_NOMEM, "%s: out of memory", s->path);
    goto done;
  }
  for (int i = 0; i < u->ntop; i++)
    if ((rc = put_scored(s, run_id, mid, cid, STORE_SRC_COSTMODEL, &u->top[i], &ids[i], err)))
      goto done;
  if ((rc = store__prepare(s,
                           "INSERT INTO search_checkpoints (search_run_id, unit, evaluations,"
                           " feasible, pruned, bound_s, complete) VALUES (?, ?, ?, ?, ?, ?, ?)"
                           " ON CONFLICT (search_run_id, unit) DO UPDATE SET"
                           " evaluations = excluded.evaluations, feasible = excluded.feasible,"
                           " pruned = excluded.pruned, bound_s = excluded.bound_s,"
                           " complete = excluded.complete,"
                           " created_at = strftime('%Y-%m-%dT%H:%M:%fZ','now')"
                           " RETURNING id",
                           &st, err)))
    goto done;
  sqlite3_bind_int64(st, 1, run_id);
  sqlite3_bind_int(st, 2, u->unit);
  sqlite3_bind_int64(st, 3, u->evaluations);
  sqlite3_bind_int64(st, 4, u->feasible);
  sqlite3_bind_int64(st, 5, u->pruned);
  bind_real_or_null(st, 6, u->bound_s, 1);
  sqlite3_bind_int(st, 7, u->complete != 0);
  int step = sqlite3_step(st);
  if (step == SQLITE_ROW) {
    ckpt = sqlite3_column_int64(st, 0);
    step = sqlite3_step(st);
  }
  if (step != SQLITE_DONE) {
    rc = store__fail(s->db, s->path, "writing a checkpoint", step, err);
    goto done;
  }
  sqlite3_finalize(st);
  st = NULL;
  if ((rc = store__prepare(s, "DELETE FROM search_checkpoint_plans WHERE checkpoint_id = ?", &st,
                           err)))
    goto done;
  sqlite3_bind_int64(st, 1, ckpt);
  if ((rc = step_done(s, st, "writing a checkpoint", err))) goto done;
  sqlite3_finalize(st);
  st = NULL;
  if ((rc = store__prepare(s,
                           "INSERT INTO search_checkpoint_plans (checkpoint_id, rank, plan_id)"
                           " VALUES (?, ?, ?)",
                           &st, err)))
    goto done;
  for (int i = 0; i < u->ntop; i++) {
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, ckpt);
    sqlite3_bind_int(st, 2, i);
    sqlite3_bind_int64(st, 3, ids[i]);
    if ((rc = step_done(s, st, "writing a checkpoint's plans", err))) goto done;
  }
  sqlite3_finalize(st);
  st = NULL;
  /* the run's running totals: what its committed units add up to */
  if ((rc = store__prepare(s,
                           "UPDATE search_runs SET (evaluations, feasible, pruned, plans_found,"
                           " units_done) = (SELECT ifnull(sum(evaluations), 0),"
                           " ifnull(sum(feasible), 0), ifnull(sum(pruned), 0),"
                           " ifnull(sum(feasible), 0), ifnull(sum(complete), 0)"
                           " FROM search_checkpoints WHERE search_run_id = ?1) WHERE id = ?1",
                           &st, err)))
    goto done;
  sqlite3_bind_int64(st, 1, run_id);
  rc = step_done(s, st, "updating a search run", err);
done:
  sqlite3_finalize(st);
  free(ids);
  return tx_end(s, own, rc, err);
}

int store_search_finish(store *s, int64_t run_id, const store_search_summary *r,
                        int64_t *best_plan_id, pp_err *err) {
  sqlite3_stmt *st = NULL;
  int64_t mid = 0, cid = 0, best = 0;
  int own, rc;
  if (tx_begin(s, &own, err)) return err->code;
  if ((rc = run_specs(s, run_id, &mid, &cid, err))) goto done;
  for (int i = 0; i < r->ntop; i++)
    if ((rc = put_scored(s, run_id, mid, cid, STORE_SRC_COSTMODEL, &r->top[i], i ? NULL : &best,
                         err)))
      goto done;
  if ((rc = store__prepare(s,
                           "UPDATE search_runs SET status = 'done', evaluations = ?,"
                           " feasible = ?, pruned = ?, plans_found = ?, units_done = ?,"
                           " complete = ?, space_size = ?, wall_s = ?, best_plan_id = ?,"
                           " best_iter_time_s = ?, lower_bound_s = ?, gap = ?,"
                           " finished_at = strftime('%Y-%m-%dT%H:%M:%fZ','now') WHERE id = ?",
                           &st, err)))
    goto done;
  sqlite3_bind_int64(st, 1, r->evaluations);
  sqlite3_bind_int64(st, 2, r->feasible);
  sqlite3_bind_int64(st, 3, r->pruned);
  sqlite3_bind_int64(st, 4, r->feasible);
  sqlite3_bind_int(st, 5, r->units_done);
  sqlite3_bind_int(st, 6, r->complete != 0);
  sqlite3_bind_double(st, 7, r->space_size);
  sqlite3_bind_double(st, 8, r->wall_s);
  if (best)
    sqlite3_bind_int64(st, 9, best);
  else
    sqlite3_bind_null(st, 9);
  if (r->ntop)
    sqlite3_bind_double(st, 10, r->top[0].score.iter_time_s);
  else
    sqlite3_bind_null(st, 10);
  bind_real_or_null(st, 11, r->lower_bound_s, 1);
  if (r->lower_bound_s > 0 && isfinite(r->gap))
    sqlite3_bind_double(st, 12, r->gap);
  else
    sqlite3_bind_null(st, 12);
  sqlite3_bind_int64(st, 13, run_id);
  rc = step_done(s, st, "finishing a search run", err);
  if (!rc && best_plan_id) *best_plan_id = best;
done:
  sqlite3_finalize(st);
  return tx_end(s, own, rc, err);
}

int store_search_fail(store *s, int64_t run_id, pp_err *err) {
  sqlite3_stmt *st = NULL;
  if (store__prepare(s, "UPDATE search_runs SET status = 'failed' WHERE id = ?", &st, err))
    return err->code;
  sqlite3_bind_int64(st, 1, run_id);
  int rc = step_done(s, st, "marking a search run failed", err);
  sqlite3_finalize(st);
  return rc;
}

int store_search_sim_score(store *s, int64_t run_id, const store_scored_plan *p,
                           int64_t *plan_id, pp_err *err) {
  int64_t mid = 0, cid = 0;
  int own, rc;
  if (tx_begin(s, &own, err)) return err->code;
  rc = run_specs(s, run_id, &mid, &cid, err);
  if (!rc) rc = put_scored(s, run_id, mid, cid, STORE_SRC_SIM, p, plan_id, err);
  return tx_end(s, own, rc, err);
}
