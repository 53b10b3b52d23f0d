/* Internals of the two-level method (search_twolevel.c) shared with its test: Alpa's inter-
 * operator dynamic program on a table of stage costs, a brute force over the same space, and
 * Alpa's placement of sub-meshes on the cluster. */
#ifndef PODPLAN_SEARCH_TWOLEVEL_H
#define PODPLAN_SEARCH_TWOLEVEL_H

#include "podplan/err.h"

#define SEARCH__TL_MAX_CLUSTERS 512

/* Stage costs for the DP: L layer clusters, sub-mesh shapes of size[m] devices, D devices to
 * cover exactly, at most S stages, B microbatches. t[search__tl_at(tab, k, i, m, s)] is the
 * time per microbatch of a stage holding clusters k..i on shape m when it and the s - 1 stages
 * after it are in flight (its memory must hold s microbatches, at most B): the cheapest
 * configuration that fits, INFINITY when none does. */
typedef struct search__tl_table {
  int L, nshapes, D, S, B;
  const int *size;
  const double *t;
} search__tl_table;
static inline long search__tl_at(const search__tl_table *tab, int k, int i, int m, int s) {
  return (((long)k * tab->L + i) * tab->nshapes + m) * tab->S + (s - 1);
}

typedef struct search__tl_stage {
  int k, i;     /* clusters k..i */
  int shape;
  double t;     /* its time per microbatch */
} search__tl_stage;

typedef struct search__tl_path {
  int n;                                   /* stages; 0: no solution */
  search__tl_stage st[SEARCH__TL_MAX_CLUSTERS];
  double total;                            /* sum t + (B - 1) max t */
  double sum, tmax;
  long long dp_runs;                       /* DP passes (one per t_max tried) */
  long long candidates;                    /* distinct stage costs (t_max candidates) */
} search__tl_path;

/* Alpa's DP (stage_construction.py training_dp): for t_max ascending over the distinct stage
 * costs, F(s, k, d; t_max) = min over i >= k and shapes m of size <= d of t(k..i, m, s) +
 * F(s - 1, i + 1, d - size), stages costing more than t_max left out; the best s gives
 * F + (B - 1) * (the largest stage cost on its path); stop once B * t_max >= the best total,
 * skip a t_max within eps of the last one tried. The smallest t_max with any solution is found
 * by bisection first (feasibility only grows with t_max). PP_NOMEM; no solution is out->n == 0. */
int search__tl_dp(const search__tl_table *tab, double eps, search__tl_path *out, pp_err *err);
/* The same objective by enumerating every slicing of the clusters into stages and every
 * shape of each stage (tests, small tables). */
int search__tl_brute(const search__tl_table *tab, search__tl_path *out, pp_err *err);

/* Alpa's assignment of sub-meshes to devices (device_mesh get_sliced_virtual_submeshes):
 * sub-meshes by size, largest first (stable), whole islands first from island 0, smaller ones
 * packed inside islands in order. sizes[j] is a divisor of `island` or a multiple of it; the
 * sizes add up to the cluster. Writes first[j]; -1 when they do not pack. */
int search__tl_place(const int *sizes, int n, int island, int *first);

#endif
