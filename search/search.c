/* The search driver: the method table, a run's units spread over threads (and over the ranks
 * of a job through the caller's search_comm), the best plans of units merged into the
 * result, checkpoints and progress handed to the caller's hooks on the calling thread. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "search_int.h"

static const search__method *const methods[SEARCH_NMETHODS] = {
    [SEARCH_EXHAUSTIVE] = &search__exhaustive,
    [SEARCH_MEGATRON] = &search__megatron,
    [SEARCH_TWO_LEVEL] = &search__two_level,
    [SEARCH_GLOBAL] = &search__global,
};
static const char *const method_names[SEARCH_NMETHODS] = {"exhaustive", "megatron", "two-level",
                                                          "global"};

const char *search_method_name(search_method m) {
  return (unsigned)m < SEARCH_NMETHODS ? method_names[m] : "?";
}

int search_method_parse(const char *name, search_method *out, pp_err *err) {
  for (int i = 0; i < SEARCH_NMETHODS; i++)
    if (name && !strcmp(name, method_names[i])) {
      *out = (search_method)i;
      return PP_OK;
    }
  return pp_err_set(err, PP_USAGE,
                    "--method: '%s' is not a method (exhaustive, megatron, two-level, global)",
                    name ? name : "");
}

double search__now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void search_opts_default(search_method m, int gbs, search_opts *o) {
  memset(o, 0, sizeof *o);
  o->method = m;
  search_space_default(gbs, &o->space);
  o->top = 10;
  o->gap = 0.01;
}

void search_result_clear(search_result *r) {
  if (!r) return;
  for (int i = 0; i < r->ntop; i++) spec_plan_clear(&r->top[i].plan);
  free(r->top);
  memset(r, 0, sizeof *r);
}

/* ---- the best K -------------------------------------------------------------------------- */

int search__top_init(search__top *t, int k, pp_err *err) {
  t->k = k < 1 ? 1 : k;
  t->n = 0;
  t->e = calloc((size_t)t->k, sizeof *t->e);
  return t->e ? PP_OK : pp_err_set(err, PP_NOMEM, "search: out of memory");
}

void search__top_free(search__top *t) {
  for (int i = 0; i < t->n; i++) spec_plan_clear(&t->e[i].plan);
  free(t->e);
  memset(t, 0, sizeof *t);
}

double search__top_cut(const search__top *t) {
  return t->n < t->k ? INFINITY : t->e[t->n - 1].cm.iter_time_s;
}

/* a before b: faster, or as fast with the smaller hash (the same order whoever found them) */
static int before(const spec_plan *pa, double ta, const spec_plan *pb, double tb) {
  if (ta != tb) return ta < tb;
  char ha[SPEC_HASH_LEN], hb[SPEC_HASH_LEN];
  spec_plan_hash(pa, ha);
  spec_plan_hash(pb, hb);
  return strcmp(ha, hb) < 0;
}

static int same_plan(const spec_plan *a, const spec_plan *b) {
  char ha[SPEC_HASH_LEN], hb[SPEC_HASH_LEN];
  spec_plan_hash(a, ha);
  spec_plan_hash(b, hb);
  return !strcmp(ha, hb);
}

int search__top_offer(search__top *t, const spec_plan *p, const cm_result *r, int unit,
                      pp_err *err) {
  if (!r->feasible || !(r->iter_time_s < INFINITY)) return 0;
  if (t->n == t->k && !before(p, r->iter_time_s, &t->e[t->n - 1].plan, t->e[t->n - 1].cm.iter_time_s))
    return 0;
  for (int i = 0; i < t->n; i++)
    if (t->e[i].cm.iter_time_s == r->iter_time_s && same_plan(&t->e[i].plan, p)) return 0;
  search_entry ne = {.cm = *r, .unit = unit};
  if (spec_plan_copy(&ne.plan, p, err)) return -1;
  if (t->n == t->k) spec_plan_clear(&t->e[--t->n].plan);
  int at = t->n;
  while (at > 0 && before(p, r->iter_time_s, &t->e[at - 1].plan, t->e[at - 1].cm.iter_time_s)) {
    t->e[at] = t->e[at - 1];
    at--;
  }
  t->e[at] = ne;
  t->n++;
  return 1;
}

/* ---- evaluation -------------------------------------------------------------------------- */

int search__eval(search__unit *u, const spec_plan *p, cm_result *out, pp_err *err) {
  cm_result r;
  if (cm_eval(u->cm, p, &r, err)) return err->code;
  u->evaluations++;
  if (r.feasible)
    u->feasible++;
  else if (r.mem_excess_gib < u->min_excess_gib) {
    u->min_excess_gib = r.mem_excess_gib;
    char s[SPEC_PLAN_STR_MAX];
    if (spec_plan_format(p, s, sizeof s, NULL)) snprintf(s, sizeof s, "a %d-stage plan", p->nstages);
    snprintf(u->why, sizeof u->why, "the closest plan (%.150s) needs %.1f GiB per GPU, %.1f GiB over",
             s, r.mem_gib_per_gpu, r.mem_excess_gib);
  }
  if (out) *out = r;
  return search__top_offer(&u->top, p, &r, u->unit, err) < 0 ? err->code : PP_OK;
}

int search__expired(const search__run *run) {
  return run->deadline > 0 && search__now() > run->deadline;
}

/* ---- threads ----------------------------------------------------------------------------- */

typedef struct pool {
  search__run *run;
  int *todo;          /* units this rank searches, in order */
  int ntodo, next;    /* next index to hand out */
  search__unit *done; /* finished units, waiting for the calling thread */
  int ndone, nfinished, stop;
  long long evals_live; /* evaluations of finished units (progress) */
  pp_err err;
  pthread_mutex_t mu;
  pthread_cond_t cv;
} pool;

static void *worker(void *arg) {
  pool *P = arg;
  search__run *run = P->run;
  cm_model *cm = NULL;
  pp_err err = {0};
  if (cm_model_create(&run->m, &run->c, &run->p, &cm, &err)) goto fail;
  for (;;) {
    pthread_mutex_lock(&P->mu);
    int i = P->stop || P->next >= P->ntodo ? -1 : P->next++;
    pthread_mutex_unlock(&P->mu);
    if (i < 0) break;
    search__unit u = {.run = run, .cm = cm, .unit = P->todo[i], .complete = 1,
                      .min_excess_gib = INFINITY};
    if (search__top_init(&u.top, run->o->top, &err) || run->method->unit(&u, &err)) {
      search__top_free(&u.top);
      goto fail;
    }
    pthread_mutex_lock(&P->mu);
    P->done[P->ndone++] = u;
    pthread_cond_signal(&P->cv);
    pthread_mutex_unlock(&P->mu);
  }
  cm_model_destroy(cm);
  return NULL;
fail:
  cm_model_destroy(cm);
  pthread_mutex_lock(&P->mu);
  if (!P->err.code) P->err = err;
  P->stop = 1;
  pthread_cond_signal(&P->cv);
  pthread_mutex_unlock(&P->mu);
  return NULL;
}

/* What the run has gathered so far (this rank's units). */
typedef struct acc {
  search__top top;
  long long evaluations, feasible, pruned;
  double bound;       /* min over units (global); INFINITY until one reports */
  int complete;
  int units_carried;  /* units done in an earlier run (rank 0 holds them) */
  int units_searched; /* units searched here; with the carried ones, the units done */
  double min_excess;
  char why[256];
  char note[512];     /* the note of the unit whose plan leads (search__unit.note) */
} acc;

static int absorb(const search_opts *o, acc *a, search__unit *u, pp_err *err) {
  a->evaluations += u->evaluations, a->feasible += u->feasible, a->pruned += u->pruned;
  if (u->bound_s > 0 && u->bound_s < a->bound) a->bound = u->bound_s;
  a->units_searched++;
  if (!u->complete) a->complete = 0;
  if (u->min_excess_gib < a->min_excess) {
    a->min_excess = u->min_excess_gib;
    memcpy(a->why, u->why, sizeof a->why);
  }
  for (int i = 0; i < u->top.n; i++)
    if (search__top_offer(&a->top, &u->top.e[i].plan, &u->top.e[i].cm, u->unit, err) < 0)
      return err->code;
  if (u->note[0] && a->top.n && a->top.e[0].unit == u->unit)
    memcpy(a->note, u->note, sizeof a->note);
  if (o->on_unit) {
    search_unit_report r = {u->unit, u->evaluations, u->feasible, u->pruned, u->bound_s,
                            u->complete, u->top.e, u->top.n};
    if (o->on_unit(&r, o->ctx))
      return pp_err_set(err, PP_IO, "search: stopped: the checkpoint of unit %d failed", u->unit);
  }
  return PP_OK;
}

static void report_progress(const search__run *run, const acc *a, double t0, int units,
                            long long live) {
  const search_opts *o = run->o;
  if (!o->progress || (o->comm && o->comm->rank)) return;
  search_progress p = {units, a->units_carried + a->units_searched, a->evaluations + live, 0, search__now() - t0, 0,
                       a->top.n ? a->top.e[0].cm.iter_time_s : 0, 0, 0};
  p.evals_per_s = p.elapsed_s > 0 ? (double)p.done / p.elapsed_s : 0;
  if (a->bound < INFINITY && a->bound > 0) {
    p.bound_s = a->bound;
    if (p.best_s > 0) p.gap = (p.best_s - p.bound_s) / p.bound_s;
  }
  o->progress(&p, o->ctx);
}

static int threads_for(const search_opts *o, int n) {
  int t = o->threads;
  if (t <= 0) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    t = c > 0 ? (int)c : 1;
  }
  return t < n ? t : n < 1 ? 1 : n;
}

/* Runs this rank's units on threads; the calling thread checkpoints and reports progress. */
static int run_units(search__run *run, int units, acc *a, double t0, pp_err *err) {
  const search_opts *o = run->o;
  int rank = o->comm ? o->comm->rank : 0, size = o->comm ? o->comm->size : 1;
  pool P = {.run = run};
  P.todo = malloc((size_t)(units + 1) * sizeof *P.todo);
  P.done = malloc((size_t)(units + 1) * sizeof *P.done);
  if (!P.todo || !P.done) {
    free(P.todo), free(P.done);
    return pp_err_set(err, PP_NOMEM, "search: out of memory");
  }
  for (int u = rank; u < units; u += size)
    if (!(o->units_done && (size_t)u < o->nunits_done && o->units_done[u])) P.todo[P.ntodo++] = u;
  pthread_mutex_init(&P.mu, NULL);
  pthread_cond_init(&P.cv, NULL);
  int nt = threads_for(o, P.ntodo);
  pthread_t th[256];
  if (nt > 256) nt = 256;
  int started = 0;
  for (; started < nt && P.ntodo; started++)
    if (pthread_create(&th[started], NULL, worker, &P)) break;
  int rc = PP_OK;
  pthread_mutex_lock(&P.mu);
  while (P.nfinished < P.ntodo && !P.stop) {
    if (P.ndone == 0) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_nsec += 200000000L;
      if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
      pthread_cond_timedwait(&P.cv, &P.mu, &ts);
    }
    while (P.ndone > 0 && rc == PP_OK) {
      search__unit u = P.done[--P.ndone];
      P.nfinished++;
      pthread_mutex_unlock(&P.mu);
      rc = absorb(o, a, &u, err);
      search__top_free(&u.top);
      pthread_mutex_lock(&P.mu);
    }
    if (rc) P.stop = 1;
    pthread_mutex_unlock(&P.mu);
    report_progress(run, a, t0, units, 0);
    pthread_mutex_lock(&P.mu);
  }
  P.stop = 1;
  pthread_mutex_unlock(&P.mu);
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < P.ndone; i++) search__top_free(&P.done[i].top);
  if (!rc && P.err.code) *err = P.err, rc = err->code;
  if (!rc && started == 0 && P.ntodo)
    rc = pp_err_set(err, PP_INTERNAL, "search: could not start a thread");
  pthread_mutex_destroy(&P.mu);
  pthread_cond_destroy(&P.cv);
  free(P.todo);
  free(P.done);
  return rc;
}

/* ---- ranks ------------------------------------------------------------------------------- */

/* This rank's part as text: a line of counts, then "unit<TAB>plan json" per best plan. */
static char *pack(const acc *a, size_t *len) {
  size_t cap = 256, n = 0;
  char *s = malloc(cap);
  if (!s) return NULL;
  n = (size_t)snprintf(s, cap, "%lld %lld %lld %.17g %d %.17g %d %d\n", a->evaluations,
                       a->feasible, a->pruned, a->bound, a->complete, a->min_excess,
                       a->units_carried, a->units_searched);
  for (int i = 0; i < a->top.n; i++) {
    char *j = spec_plan_json(&a->top.e[i].plan);
    if (!j) return free(s), NULL;
    size_t need = n + strlen(j) + 32;
    if (need > cap) {
      char *t = realloc(s, cap = 2 * need);
      if (!t) return free(j), free(s), NULL;
      s = t;
    }
    n += (size_t)snprintf(s + n, cap - n, "%d\t%s\n", a->top.e[i].unit, j);
    free(j);
  }
  *len = n;
  return s;
}

/* Rank 0: adds another rank's part (its plans re-scored here: the same model gives the same
 * scores). */
static int unpack(search__run *run, cm_model *cm, const char *s, size_t len, acc *a,
                  pp_err *err) {
  char *t = malloc(len + 1);
  if (!t) return pp_err_set(err, PP_NOMEM, "search: out of memory");
  memcpy(t, s, len);
  t[len] = '\0';
  long long ev = 0, fe = 0, pr = 0;
  double bound = INFINITY, excess = INFINITY;
  int comp = 1, uc = 0, us = 0, rc = PP_OK;
  char *line = strtok(t, "\n");
  if (!line || sscanf(line, "%lld %lld %lld %lg %d %lg %d %d", &ev, &fe, &pr, &bound, &comp,
                      &excess, &uc, &us) != 8) {
    free(t);
    return pp_err_set(err, PP_INTERNAL, "search: a rank's result is malformed");
  }
  a->evaluations += ev, a->feasible += fe, a->pruned += pr;
  a->units_carried += uc, a->units_searched += us;
  if (bound < a->bound) a->bound = bound;
  if (!comp) a->complete = 0;
  if (excess < a->min_excess) a->min_excess = excess;
  while (rc == PP_OK && (line = strtok(NULL, "\n"))) {
    char *tab = strchr(line, '\t');
    if (!tab) continue;
    spec_plan p;
    cm_result r;
    if ((rc = spec_plan_parse(tab + 1, &p, err))) break;
    if (!(rc = spec_plan_resolve(&p, &run->m, &run->c, err)) && !(rc = cm_eval(cm, &p, &r, err)))
      rc = search__top_offer(&a->top, &p, &r, atoi(line), err) < 0 ? err->code : PP_OK;
    spec_plan_clear(&p);
  }
  free(t);
  return rc;
}

static int merge_ranks(search__run *run, acc *a, pp_err *err) {
  const search_comm *cc = run->o->comm;
  size_t len = 0;
  char *mine = pack(a, &len);
  if (!mine) return pp_err_set(err, PP_NOMEM, "search: out of memory");
  void *all = NULL;
  size_t *lens = NULL;
  int rc = cc->gather(cc->ctx, mine, len, &all, &lens, err);
  free(mine);
  if (rc || cc->rank != 0) {
    free(all), free(lens);
    return rc;
  }
  /* rank 0 starts again from nothing but its own top, and adds everyone's part */
  acc b = {.bound = INFINITY, .complete = 1, .min_excess = INFINITY};
  memcpy(b.why, a->why, sizeof b.why);
  memcpy(b.note, a->note, sizeof b.note); /* rank 0's: two-level's one unit runs there */
  cm_model *cm = NULL;
  if ((rc = search__top_init(&b.top, run->o->top, err)) ||
      (rc = cm_model_create(&run->m, &run->c, &run->p, &cm, err))) {
    search__top_free(&b.top);
    free(all), free(lens);
    return rc;
  }
  size_t off = 0;
  for (int r = 0; r < cc->size && rc == PP_OK; r++) {
    rc = unpack(run, cm, (const char *)all + off, lens[r], &b, err);
    off += lens[r];
  }
  cm_model_destroy(cm);
  free(all), free(lens);
  if (rc) {
    search__top_free(&b.top);
    return rc;
  }
  search__top_free(&a->top);
  *a = b;
  return PP_OK;
}

/* ---- the run ----------------------------------------------------------------------------- */

static int check_opts(const search_opts *o, pp_err *err) {
  if ((unsigned)o->method >= SEARCH_NMETHODS)
    return pp_err_set(err, PP_USAGE, "search: unknown method %d", (int)o->method);
  if (o->space.gbs < 1) return pp_err_set(err, PP_USAGE, "search: --gbs must be >= 1");
  if (o->top < 1) return pp_err_set(err, PP_USAGE, "search: --top must be >= 1");
  if (!(o->time_limit_s >= 0) || !(o->gap >= 0))
    return pp_err_set(err, PP_USAGE, "search: the time limit and gap must be >= 0");
  return PP_OK;
}

static int prepare(cm_model *cm, const search_opts *o, double t0, search__run *run, int sizing,
                   pp_err *err) {
  memset(run, 0, sizeof *run);
  run->sizing = sizing;
  if (check_opts(o, err)) return err->code;
  if (o->time_limit_s > 0) run->deadline = t0 + o->time_limit_s;
  run->o = o;
  run->method = methods[o->method];
  run->cm = cm;
  run->m = *cm_model_spec(cm);
  run->c = *cm_model_cluster(cm);
  run->p = *cm_model_params(cm);
  if (search_island_single(&o->space, &run->c))
    return pp_err_set(err, PP_USAGE,
                      "--hierarchy %s: the %d GPUs are one island of %d, so the two-level "
                      "space is the whole space (nothing to compare)",
                      search_hierarchy_name(o->space.hierarchy), run->c.gpus,
                      search_island_gpus(&o->space, &run->c));
  return run->method->prepare ? run->method->prepare(run, err) : PP_OK;
}

int search_units(cm_model *cm, const search_opts *o, int *units, double *space_size,
                 pp_err *err) {
  search__run run;
  int rc = prepare(cm, o, search__now(), &run, 1, err);
  if (!rc) rc = run.method->units(&run, units, err);
  if (!rc && space_size) *space_size = run.method->space_size ? run.method->space_size(&run) : 0;
  if (run.method && run.method->release) run.method->release(&run);
  return rc;
}

/* Offers the plans of earlier runs (re-scored with this model). */
static int take_prior(search__run *run, acc *a, pp_err *err) {
  const search_opts *o = run->o;
  if (o->comm && o->comm->rank != 0) return PP_OK; /* rank 0 holds them for everyone */
  a->evaluations += o->prior_evaluations, a->feasible += o->prior_feasible;
  a->pruned += o->prior_pruned;
  if (o->prior_bound_s > 0 && o->prior_bound_s < a->bound) a->bound = o->prior_bound_s;
  for (size_t i = 0; o->units_done && i < o->nunits_done; i++)
    a->units_carried += o->units_done[i] != 0;
  for (int i = 0; i < o->nprior; i++) {
    cm_result r;
    if (cm_eval(run->cm, &o->prior[i].plan, &r, err)) return err->code;
    if (search__top_offer(&a->top, &o->prior[i].plan, &r, o->prior[i].unit, err) < 0)
      return err->code;
  }
  return PP_OK;
}

static int finish(search__run *run, acc *a, int units, double t0, search_result *out,
                  pp_err *err) {
  out->method = run->o->method;
  out->space_size = run->method->space_size ? run->method->space_size(run) : 0;
  out->evaluations = a->evaluations, out->feasible = a->feasible, out->pruned = a->pruned;
  int done = a->units_carried + a->units_searched;
  out->units = units, out->units_done = done;
  out->units_carried = a->units_carried, out->units_searched = a->units_searched;
  out->complete = a->complete && done == units;
  out->ntop = a->top.n;
  out->top = a->top.e;
  a->top.e = NULL, a->top.n = 0;
  out->best_s = out->ntop ? out->top[0].cm.iter_time_s : 0;
  if (run->o->method == SEARCH_GLOBAL && a->bound < INFINITY) {
    /* the bound of units not searched is unknown: no bound over the whole space then */
    out->lower_bound_s = done == units ? a->bound : 0;
    if (out->lower_bound_s > 0 && out->ntop)
      out->gap = (out->best_s - out->lower_bound_s) / out->lower_bound_s;
    /* a bound above a plan of the space is a bug in the bound, never clamped */
    if (out->gap < -1e-9)
      return pp_err_set(err, PP_INTERNAL,
                        "search: global's lower bound %.9g s exceeds its best plan %.9g s "
                        "(a bug in the bound)", out->lower_bound_s, out->best_s);
    /* every unit's bound is valid however it stopped (time limit, enumeration cap): the
     * certificate is the gap asked, met against it */
    out->certified = out->lower_bound_s > 0 &&
                     (!out->ntop || out->gap <= run->o->gap * (1 + 1e-9) + 1e-12);
  }
  if (!out->ntop)
    snprintf(out->why, sizeof out->why, "%s", a->why[0] ? a->why : "the space has no valid plan");
  else
    memcpy(out->note, a->note, sizeof out->note);
  out->wall_s = search__now() - t0;
  return PP_OK;
}

int search_run(cm_model *cm, const search_opts *o, search_result *out, pp_err *err) {
  memset(out, 0, sizeof *out);
  double t0 = search__now();
  search__run run;
  /* the deadline holds from the start: a method's prepare may search too (global) */
  int units = 0, rc = prepare(cm, o, t0, &run, 0, err);
  if (!rc) rc = run.method->units(&run, &units, err);
  if (rc) {
    if (run.method && run.method->release) run.method->release(&run);
    return rc;
  }
  acc a = {.bound = INFINITY, .complete = 1, .min_excess = INFINITY};
  if (!(rc = search__top_init(&a.top, o->top, err)) && !(rc = take_prior(&run, &a, err)) &&
      !(rc = run_units(&run, units, &a, t0, err)) && o->comm && o->comm->size > 1)
    rc = merge_ranks(&run, &a, err);
  if (!rc) rc = finish(&run, &a, units, t0, out, err);
  if (run.method->release) run.method->release(&run);
  search__top_free(&a.top);
  if (rc) search_result_clear(out);
  return rc;
}
