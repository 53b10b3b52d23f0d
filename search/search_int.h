/* Internals of search/: the run that every method's units share (options, specs, the
 * shared read-only state a method prepares once), a unit's state (its own cost model, its
 * best plans, its counts), and the table of methods. */
#ifndef PODPLAN_SEARCH_INT_H
#define PODPLAN_SEARCH_INT_H

#include "podplan/search.h"

/* The best K plans of a unit (or of a run), fastest first. */
typedef struct search__top {
  int k, n;
  search_entry *e; /* k slots, n used */
} search__top;
int search__top_init(search__top *t, int k, pp_err *err);
void search__top_free(search__top *t);
/* The iteration time a plan must beat to enter (INFINITY while not full). */
double search__top_cut(const search__top *t);
/* Offers a scored plan: copied in when feasible and among the best K (ties: the plan with the
 * smaller canonical hash wins, so the order never depends on who found it first). Returns 1
 * when it went in. */
int search__top_offer(search__top *t, const spec_plan *p, const cm_result *r, int unit,
                      pp_err *err);

typedef struct search__run search__run;

/* One unit being searched, on one thread. */
typedef struct search__unit {
  search__run *run;
  cm_model *cm;               /* this thread's own cost model (caches are not shared) */
  int unit;
  search__top top;
  long long evaluations, feasible, pruned;
  double bound_s;             /* global: lower bound over the unit's space */
  int complete;               /* 0 when the deadline stopped it */
  char why[256];              /* why nothing fitted (the smallest excess seen) */
  double min_excess_gib;
  char note[512];             /* method-specific facts about the unit's best plan (two-level:
                                 stages, sub-meshes, logical meshes, microbatches); the run's
                                 note is the note of the unit that found its best plan */
} search__unit;

/* The two-level cache (search_cache.c): the key of what two-level reads of o; a hit (*hit 1)
 * copies the cached run's best plans and counts into u; a put keeps u's when it was searched
 * to the end (c NULL: no cache). */
void search__tl_key(const search_opts *o, char *buf, size_t n);
int search__cache_get(search_cache *c, const char *key, search__unit *u, int *hit,
                      pp_err *err);
int search__cache_put(search_cache *c, const char *key, const search__unit *u, pp_err *err);

/* Scores a resolved plan with the unit's cost model and offers it; counts it. *r (may be
 * NULL) gets the score. */
int search__eval(search__unit *u, const spec_plan *p, cm_result *r, pp_err *err);
/* Searches plans [first, end) of the uniform space into the unit (exhaustive, global). */
int search__uniform_range(search__unit *u, const search_uspace *us, size_t first, size_t end,
                          pp_err *err);
/* 1 once the run's time limit has passed (methods poll it between plans). */
int search__expired(const search__run *run);

/* A method: how many units, then each unit (on any thread, in any order). `prepare` builds
 * read-only state once per run (run->state), `release` frees it. */
typedef struct search__method {
  search_method id;
  const char *name;
  int (*prepare)(search__run *run, pp_err *err);
  int (*units)(search__run *run, int *n, pp_err *err);
  int (*unit)(search__unit *u, pp_err *err);
  void (*release)(search__run *run);
  /* the size of the method's space (plans), for the report */
  double (*space_size)(search__run *run);
} search__method;

struct search__run {
  const search_opts *o;
  const search__method *method;
  cm_model *cm;               /* the caller's (read-only here: units use their own copies) */
  spec_model m;
  spec_cluster c;
  cm_params p;
  double deadline;            /* monotonic seconds; 0: none */
  void *state;                /* the method's prepared state */
  int sizing;                 /* 1: prepared only to count units and the space (search_units):
                                 nothing is searched */
};

extern const search__method search__exhaustive;
extern const search__method search__megatron;
extern const search__method search__two_level;
extern const search__method search__global;

/* Monotonic clock, seconds. */
double search__now(void);

#endif
