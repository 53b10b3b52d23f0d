/* The cache of two-level runs (search.h): global's unit 1 is two-level with global's options,
 * and the pillar study's rungs (two-level open, global with the hierarchy on, a knob removed)
 * ask two-level the same question again on the same cost model. An entry is keyed by what
 * two-level reads of the options (search__tl_key) and holds the unit's best plans, counts,
 * note and why; only units searched to the end are kept. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search_int.h"

typedef struct tl_entry {
  char key[256];
  search__top top;
  long long evaluations, feasible, pruned;
  char why[256], note[512];
  double min_excess_gib;
} tl_entry;

struct search_cache {
  tl_entry *e;
  int n, cap;
};

search_cache *search_cache_new(void) { return calloc(1, sizeof(search_cache)); }

void search_cache_free(search_cache *c) {
  if (!c) return;
  for (int i = 0; i < c->n; i++) search__top_free(&c->e[i].top);
  free(c->e);
  free(c);
}

void search__tl_key(const search_opts *o, char *buf, size_t n) {
  const search_space *s = &o->space;
  int one_f1b = !s->schedules || (s->schedules & (1u << SPEC_SCHED_1F1B));
  snprintf(buf, n, "gbs=%d;pp=%d;tp=%d;dp=%d;mbs=%d;sp=%u;rc=%u;zero=%u;1f1b=%d;alpa=%d;"
                   "domain=%d;lc=%d;sweep=%d;lm=%d;top=%d",
           s->gbs, s->max_pp, s->max_tp, s->max_dp, s->max_mbs, s->sp, s->recompute,
           s->zero, one_f1b, o->alpa_defaults, o->island_domain, o->layer_clusters,
           o->layer_sweep, o->logical_all, o->top);
}

/* Copies the best plans of src into dst (initialised to src's k), found by unit `unit`. */
static int top_copy(search__top *dst, const search__top *src, int unit, pp_err *err) {
  if (search__top_init(dst, src->k, err)) return err->code;
  for (int i = 0; i < src->n; i++)
    if (search__top_offer(dst, &src->e[i].plan, &src->e[i].cm, unit, err) < 0) {
      search__top_free(dst);
      return err->code;
    }
  return PP_OK;
}

int search__cache_get(search_cache *c, const char *key, search__unit *u, int *hit,
                      pp_err *err) {
  *hit = 0;
  for (int i = 0; c && i < c->n; i++) {
    if (strcmp(c->e[i].key, key)) continue;
    search__top_free(&u->top);
    if (top_copy(&u->top, &c->e[i].top, u->unit, err)) return err->code;
    u->evaluations = c->e[i].evaluations, u->feasible = c->e[i].feasible;
    u->pruned = c->e[i].pruned, u->complete = 1;
    u->min_excess_gib = c->e[i].min_excess_gib;
    memcpy(u->why, c->e[i].why, sizeof u->why);
    memcpy(u->note, c->e[i].note, sizeof u->note);
    *hit = 1;
    return PP_OK;
  }
  return PP_OK;
}

int search__cache_put(search_cache *c, const char *key, const search__unit *u, pp_err *err) {
  if (!c || !u->complete) return PP_OK;
  if (c->n == c->cap) {
    int cap = c->cap ? 2 * c->cap : 8;
    tl_entry *e = realloc(c->e, (size_t)cap * sizeof *e);
    if (!e) return pp_err_set(err, PP_NOMEM, "search: out of memory");
    c->e = e, c->cap = cap;
  }
  tl_entry *x = &c->e[c->n];
  memset(x, 0, sizeof *x);
  snprintf(x->key, sizeof x->key, "%s", key);
  if (top_copy(&x->top, &u->top, 0, err)) return err->code;
  x->evaluations = u->evaluations, x->feasible = u->feasible, x->pruned = u->pruned;
  x->min_excess_gib = u->min_excess_gib;
  memcpy(x->why, u->why, sizeof x->why);
  memcpy(x->note, u->note, sizeof x->note);
  c->n++;
  return PP_OK;
}
