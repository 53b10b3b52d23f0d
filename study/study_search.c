/* The funnel (study.h): one search method on a (model, cluster) stored as a search run,
 * checkpointed unit by unit so that a killed run resumes, its best K re-scored by the
 * simulator and stored. `podplan search` and the studies run every search through here.
 * Depends on search.h, sim.h and store.h; MPI only through the search_comm hooks. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "podplan/search.h"
#include "podplan/sim.h"
#include "podplan/store.h"
#include "podplan/study.h"

json_t *study_breakdown_json(const cm_breakdown *t) {
  return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "compute_s", t->compute_s,
                   "tp_comm_s", t->tp_comm_s, "cp_comm_s", t->cp_comm_s, "ep_comm_s",
                   t->ep_comm_s, "pp_bubble_s", t->pp_bubble_s, "pp_p2p_s", t->pp_p2p_s,
                   "dp_comm_s", t->dp_comm_s, "optimizer_s", t->optimizer_s);
}

void study_search_key(const search_opts *o, int64_t calib_id, char *buf, size_t n) {
  char space[512];
  search_space_describe(&o->space, space, sizeof space);
  int k = snprintf(buf, n, "gbs=%d,top=%d%s%s,cm=%016llx", o->space.gbs, o->top,
                   space[0] ? "," : "", space, cm_fingerprint());
  if (k < 0 || (size_t)k >= n) return;
  if (o->method == SEARCH_GLOBAL)
    k += snprintf(buf + k, n - (size_t)k, ",gap=%.17g", o->gap);
  else if (o->method == SEARCH_TWO_LEVEL)
    k += snprintf(buf + k, n - (size_t)k, ",island=%s%s,layer-clusters=%d%s%s",
                  o->island_domain ? "domain" : "node", o->alpa_defaults ? ",alpa-defaults" : "",
                  o->layer_clusters, o->layer_sweep ? ",layer-sweep" : "",
                  o->logical_all ? ",logical-meshes=all" : "");
  if (calib_id && k > 0 && (size_t)k < n) /* a calibrated search is another run */
    snprintf(buf + k, n - (size_t)k, ",calibration=%lld", (long long)calib_id);
}

/* Scored plans of search entries, for the store (breakdowns as JSON text, freed by free_scored). */
static store_scored_plan *to_scored(const search_entry *e, int n, int64_t calib,
                                    const char *params) {
  store_scored_plan *s = calloc((size_t)(n ? n : 1), sizeof *s);
  if (!s) return NULL;
  for (int i = 0; i < n; i++) {
    json_t *bd = study_breakdown_json(&e[i].cm.t);
    s[i].plan = &e[i].plan;
    s[i].score = (store_score){.calibration_id = calib, .params = params,
                               .iter_time_s = e[i].cm.iter_time_s,
                               .tokens_per_s = e[i].cm.tokens_per_s, .mfu = e[i].cm.mfu,
                               .mem_gib = e[i].cm.mem_gib_per_gpu, .feasible = e[i].cm.feasible,
                               .breakdown_json = bd ? json_dumps(bd, JSON_COMPACT) : NULL};
    json_decref(bd);
  }
  return s;
}

static void free_scored(store_scored_plan *s, int n) {
  if (!s) return;
  for (int i = 0; i < n; i++) free((char *)s[i].score.breakdown_json);
  free(s);
}

/* What the search's hooks see: the request, the run, why a checkpoint failed. */
typedef struct funnel {
  const study_search_req *q;
  store *st;       /* rank 0: the store, open from the run's beginning to its end */
  int64_t run_id;
  pp_err err;
} funnel;

static int on_unit(const search_unit_report *r, void *vctx) {
  funnel *f = vctx;
  if (!f->st) return 0; /* ranks other than 0 keep nothing: rank 0 stores the merged result */
  store_scored_plan *sp = to_scored(r->top, r->ntop, f->q->calib_id, f->q->params);
  if (!sp) {
    pp_err_set(&f->err, PP_NOMEM, "search: out of memory");
    return 1;
  }
  store_search_unit u = {r->unit, r->evaluations, r->feasible, r->pruned, r->bound_s,
                         r->complete, sp, r->ntop};
  int rc = store_search_unit_done(f->st, f->run_id, &u, &f->err);
  free_scored(sp, r->ntop);
  return rc != PP_OK;
}

static void on_progress(const search_progress *p, void *vctx) {
  const funnel *f = vctx;
  if (f->q->progress) f->q->progress(p, f->q->ctx);
}

/* The run's params for people: every option of the search. */
static char *params_json(const study_search_req *q) {
  const search_opts *o = &q->o;
  char space[512];
  search_space_describe(&o->space, space, sizeof space);
  json_t *pj = json_pack("{s:s, s:i, s:i, s:i, s:i, s:f, s:s, s:i}", "method",
                         search_method_name(o->method), "gbs", o->space.gbs, "top", o->top,
                         "simulate", q->simulate, "threads", o->threads, "time_limit_s",
                         o->time_limit_s, "space", space, "ranks",
                         o->comm ? o->comm->size : 1);
  if (!pj) return NULL;
  if (q->calib_id) json_object_set_new(pj, "calibration_id", json_integer(q->calib_id));
  if (q->params && q->params[0]) json_object_set_new(pj, "param", json_string(q->params));
  if (o->method == SEARCH_GLOBAL) json_object_set_new(pj, "gap", json_real(o->gap));
  if (o->method == SEARCH_TWO_LEVEL) {
    json_object_set_new(pj, "island", json_string(o->island_domain ? "domain" : "node"));
    json_object_set_new(pj, "alpa_defaults", json_boolean(o->alpa_defaults));
    json_object_set_new(pj, "layer_clusters", json_integer(o->layer_clusters));
    json_object_set_new(pj, "layer_sweep", json_boolean(o->layer_sweep));
    json_object_set_new(pj, "logical_meshes",
                        json_string(o->logical_all ? "all" : "single-node"));
  }
  char *s = json_dumps(pj, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(pj);
  return s;
}

/* Rank 0 opens the store and begins (or resumes) the run; every rank gets units_done. A
 * failure on rank 0 is broadcast so that every rank stops (the others' error is not for
 * printing). */
static int begin_run(const study_search_req *q, int units, funnel *f, study_search_out *out,
                     store_search_state *state, unsigned char **units_done, pp_err *err) {
  const search_comm *comm = q->o.comm;
  int rank0 = !comm || comm->rank == 0, rc = PP_OK;
  *units_done = NULL;
  memset(state, 0, sizeof *state);
  if (rank0) {
    char key[2560];
    study_search_key(&q->o, q->calib_id, key, sizeof key);
    if (q->params && q->params[0]) { /* a search on other parameters is another run */
      size_t k = strlen(key);
      snprintf(key + k, sizeof key - k, ",param=%s", q->params);
    }
    char *pjs = params_json(q);
    rc = store_open(q->db, NULL, &f->st, err);
    if (!rc)
      rc = store_search_begin(f->st, search_method_name(q->o.method), q->m, q->c, key, pjs,
                              units, state, err);
    free(pjs);
    if (!rc) out->run_id = state->run_id;
  }
  if (!comm) {
    if (!rc) *units_done = state->units_done;
    return rc;
  }
  /* rank 0's outcome and units_done to every rank: [code][units bytes] */
  size_t n = (size_t)units + 1;
  void *buf = NULL;
  if (rank0) {
    unsigned char code[1], *b = calloc(n, 1);
    if (!b && !rc) rc = pp_err_set(err, PP_NOMEM, "search: out of memory");
    if (rc) { /* the code alone */
      free(b);
      b = NULL;
      n = 1;
    }
    unsigned char *send = b ? b : code;
    send[0] = (unsigned char)rc;
    if (!rc) memcpy(send + 1, state->units_done, (size_t)units);
    buf = send;
    pp_err berr = {0};
    comm->bcast(comm->ctx, &buf, &n, &berr);
    free(b);
    if (!rc) *units_done = state->units_done;
    return rc;
  }
  if (comm->bcast(comm->ctx, &buf, &n, err)) return err->code;
  unsigned char *b = buf;
  if (n < 1 || b[0]) {
    rc = n >= 1 ? b[0] : PP_INTERNAL;
    free(buf);
    return pp_err_set(err, rc, "rank 0 could not begin the search run"); /* not printed */
  }
  if (n != (size_t)units + 1) {
    free(buf);
    return pp_err_set(err, PP_INTERNAL, "search: ranks disagree on the units (%zu, %d)", n - 1,
                      units);
  }
  memmove(b, b + 1, (size_t)units);
  *units_done = b; /* freed by the caller (state->units_done is NULL here) */
  return PP_OK;
}

/* ---- simulated plans kept for the next search on the same cost model -------------------- */

typedef struct sim_memo {
  char hash[SPEC_HASH_LEN];
  double iter_time_s, sim_wall_s;
  long messages;
  cm_breakdown t;
  int stopped;               /* its simulation ran past the time limit (not tried again) */
} sim_memo;

struct study_sim_cache {
  sim_memo *m;
  size_t n, cap;
};

study_sim_cache *study_sim_cache_new(void) { return calloc(1, sizeof(study_sim_cache)); }

void study_sim_cache_free(study_sim_cache *c) {
  if (!c) return;
  free(c->m);
  free(c);
}

static const sim_memo *memo_find(const study_sim_cache *c, const char *hash) {
  for (size_t i = 0; c && i < c->n; i++)
    if (!strcmp(c->m[i].hash, hash)) return &c->m[i];
  return NULL;
}

static void memo_add(study_sim_cache *c, const char *hash, const sim_result *r, int stopped) {
  if (!c) return;
  if (c->n == c->cap) {
    size_t cap = c->cap ? 2 * c->cap : 16;
    sim_memo *m = realloc(c->m, cap * sizeof *m);
    if (!m) return; /* a cache that cannot grow only costs time */
    c->m = m, c->cap = cap;
  }
  sim_memo *e = &c->m[c->n++];
  memcpy(e->hash, hash, SPEC_HASH_LEN);
  e->iter_time_s = r->iter_time_s, e->sim_wall_s = r->sim_wall_s;
  e->messages = r->messages, e->t = r->t;
  e->stopped = stopped;
}

/* The simulator's time of a plan: from the cache when it holds the plan, else simulated. */
static int simulate_one(const study_search_req *q, const spec_plan *p, sim_result *sr,
                        pp_err *err) {
  char hash[SPEC_HASH_LEN];
  spec_plan_hash(p, hash);
  const sim_memo *e = memo_find(q->cache, hash);
  memset(sr, 0, sizeof *sr);
  if (e && e->stopped)
    return pp_err_set(err, PP_LIMIT, "sim: stopped before, after %g s", q->sim_time_limit_s);
  if (e) {
    sr->iter_time_s = e->iter_time_s, sr->sim_wall_s = e->sim_wall_s;
    sr->messages = e->messages, sr->t = e->t;
    return PP_OK;
  }
  sim_opts so = {.fidelity = SIM_FAST, .time_limit_s = q->sim_time_limit_s};
  if (sim_run(q->cm, p, &so, sr, err)) {
    if (err->code == PP_LIMIT) memo_add(q->cache, hash, sr, 1);
    return err->code;
  }
  memo_add(q->cache, hash, sr, 0);
  return PP_OK;
}

/* Re-scores the best K with the simulator and stores the scores; ranks them by simulated
 * time and chooses the fastest. A plan whose simulation ran past sim_time_limit_s stays
 * unsimulated (counted in sim_stopped); with none simulated the cost model's best stays. */
static int simulate_top(const study_search_req *q, store *st, study_search_out *out,
                        pp_err *err) {
  search_result *r = &out->r;
  int k = q->simulate < r->ntop ? q->simulate : r->ntop;
  out->nsim = 0;
  out->chosen = 0;
  if (!k) return PP_OK;
  int64_t *ids = calloc((size_t)k, sizeof *ids);
  if (!ids || !(out->sim_rank = calloc((size_t)k, sizeof *out->sim_rank))) {
    free(ids);
    return pp_err_set(err, PP_NOMEM, "search: out of memory");
  }
  for (int i = 0; i < k; i++) {
    search_entry *e = &r->top[i];
    sim_result sr;
    int src = simulate_one(q, &e->plan, &sr, err);
    if (src == PP_LIMIT) {
      sim_result_clear(&sr);
      pp_err_clear(err);
      out->sim_stopped++;
      out->nsim = i + 1;
      continue;
    }
    if (src) {
      sim_result_clear(&sr);
      free(ids);
      return pp_err_prefix(err, "simulating plan %d of %d", i + 1, k);
    }
    e->simulated = 1;
    e->sim_iter_s = sr.iter_time_s;
    cm_result at = e->cm;
    cm_throughput(q->cm, &e->plan, sr.iter_time_s, &at);
    json_t *bd = study_breakdown_json(&sr.t);
    json_object_set_new(bd, "sim_wall_s", json_real(sr.sim_wall_s));
    json_object_set_new(bd, "messages", json_integer((json_int_t)sr.messages));
    char *bds = json_dumps(bd, JSON_COMPACT);
    json_decref(bd);
    store_scored_plan sp = {&e->plan, {.calibration_id = q->calib_id, .params = q->params,
                                       .iter_time_s = sr.iter_time_s,
                                       .tokens_per_s = at.tokens_per_s, .mfu = at.mfu,
                                       .mem_gib = e->cm.mem_gib_per_gpu,
                                       .feasible = e->cm.feasible, .breakdown_json = bds}};
    int rc = store_search_sim_score(st, out->run_id, &sp, &ids[i], err);
    free(bds);
    sim_result_clear(&sr);
    if (rc) {
      free(ids);
      return rc;
    }
    out->nsim = i + 1;
  }
  for (int i = 0; i < k; i++) {
    if (!r->top[i].simulated) continue; /* rank 0: not simulated */
    int rank = 1;
    for (int j = 0; j < k; j++)
      if (r->top[j].simulated && (r->top[j].sim_iter_s < r->top[i].sim_iter_s ||
                                  (r->top[j].sim_iter_s == r->top[i].sim_iter_s && j < i)))
        rank++;
    out->sim_rank[i] = rank;
    if (rank == 1) out->chosen = i;
  }
  if (ids[out->chosen]) out->best_plan_id = ids[out->chosen];
  free(ids);
  return PP_OK;
}

/* Rank 0, after the search: the simulator's scores, then the run's end in the store. In that
 * order: a run killed while its plans are simulated is still 'running', so the same search
 * again resumes it (every unit carried over, nothing searched) and simulates, where a run
 * already 'done' would be searched anew as another run. */
static int finish_run(const study_search_req *q, store *st, study_search_out *out, pp_err *err) {
  search_result *r = &out->r;
  if (!r->ntop && !r->complete) { /* what a time limit cut short says nothing of the rest */
    char why[sizeof r->why];
    int closest = r->feasible == 0 && r->evaluations > 0 && !strncmp(r->why, "the closest", 11);
    snprintf(why, sizeof why,
             "the time limit (%g s) stopped the search after %lld evaluations%s%.180s",
             q->o.time_limit_s, r->evaluations, closest ? "; " : "", closest ? r->why : "");
    memcpy(r->why, why, sizeof why);
  }
  int rc = simulate_top(q, st, out, err);
  if (rc) return rc;
  int64_t chosen = out->best_plan_id; /* the fastest simulated plan (0: none simulated) */
  store_scored_plan *sp = to_scored(r->top, r->ntop, q->calib_id, q->params);
  store_search_summary sum = {r->evaluations, r->feasible, r->pruned, r->units_done,
                              r->complete, r->space_size, r->wall_s, r->lower_bound_s, r->gap,
                              sp, r->ntop};
  rc = sp ? store_search_finish(st, out->run_id, &sum, &out->best_plan_id, err)
          : pp_err_set(err, PP_NOMEM, "search: out of memory");
  free_scored(sp, r->ntop);
  if (!rc && chosen) out->best_plan_id = chosen;
  return rc;
}

int study_search(const study_search_req *q, study_search_out *out, pp_err *err) {
  memset(out, 0, sizeof *out);
  const search_comm *comm = q->o.comm;
  int rank0 = !comm || comm->rank == 0, units = 0, rc;
  if ((rc = search_units(q->cm, &q->o, &units, NULL, err))) return rc;
  store_search_state state;
  unsigned char *units_done = NULL;
  search_entry *prior = NULL;
  funnel f = {q, NULL, 0, {0}};
  if ((rc = begin_run(q, units, &f, out, &state, &units_done, err))) goto done;
  out->began = 1;
  out->resumed = state.resumed;
  out->units = units;
  search_opts o = q->o;
  o.units_done = units_done;
  o.nunits_done = (size_t)units;
  if (rank0 && state.nplans) {
    if (!(prior = calloc((size_t)state.nplans, sizeof *prior))) {
      rc = pp_err_set(err, PP_NOMEM, "search: out of memory");
      goto done;
    }
    for (int i = 0; i < state.nplans; i++) {
      prior[i].plan = state.plans[i].plan; /* borrowed: the search copies what it keeps */
      prior[i].cm.iter_time_s = state.plans[i].iter_time_s;
      prior[i].cm.mfu = state.plans[i].mfu;
      prior[i].cm.mem_gib_per_gpu = state.plans[i].mem_gib;
      prior[i].cm.feasible = 1;
      prior[i].unit = state.plans[i].unit;
    }
    o.prior = prior;
    o.nprior = state.nplans;
  }
  o.prior_evaluations = state.evaluations;
  o.prior_feasible = state.feasible;
  o.prior_pruned = state.pruned;
  o.prior_bound_s = state.bound_s;
  f.run_id = out->run_id;
  o.on_unit = on_unit;
  o.progress = on_progress;
  o.ctx = &f;
  if ((rc = search_run(q->cm, &o, &out->r, err))) {
    if (f.err.code) *err = f.err; /* a checkpoint failed: say why */
    if (f.st) store_search_fail(f.st, out->run_id, NULL);
    goto done;
  }
  out->searched = 1;
  if (rank0 && (rc = finish_run(q, f.st, out, err)))
    store_search_fail(f.st, out->run_id, NULL); /* resumed by the same search again */
done:
  store_close(f.st);
  free(prior);
  if (units_done != state.units_done) free(units_done);
  store_search_state_clear(&state);
  return rc;
}

void study_search_out_clear(study_search_out *o) {
  if (!o) return;
  search_result_clear(&o->r);
  free(o->sim_rank);
  memset(o, 0, sizeof *o);
}
