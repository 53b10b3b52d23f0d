/* two-level: Alpa's search as published (Zheng et al., OSDI'22; alpa-projects/alpa
 * pipeline_parallel/stage_construction.py, stage_profiling.py, shard_parallel/auto_sharding.py),
 * on podplan's cost model instead of compiling and profiling every stage.
 *
 * 1. Layer clustering: GPT-style layers are identical, so Alpa's clustering DP (layers of
 *    balanced FLOPs) comes to L clusters of layers/L layers (extra layers to the middle
 *    clusters first; the embedding sits with the first, the LM head with the last).
 * 2. Sub-mesh shapes (get_submesh_choices): (1, 2^k) inside an island (the node, or with
 *    island_domain the NVLink domain) and (n, M) whole islands, n a power of two ("power_of_two",
 *    the code's default; --alpa-defaults: n <= 4, "small_power_of_two" as its GPT benchmarks).
 * 3. Logical meshes per sub-mesh (get_one_submesh_autosharding_config_choices,
 *    "single_node_model_parallel"): (dp, mp) with mp <= the sub-mesh's devices per island,
 *    dp dividing the microbatch's sequences, the batch forced onto axis 0; and (devices, 1)
 *    with the ILP free. With logical_all ("all", what Alpa's GPT suite,
 *    benchmark/alpa/suite_auto_gpt.py, passes) mp runs to every device of the sub-mesh.
 * 4. Intra-op pass per (sub-mesh, logical mesh): the ILP of search_ilp.c on one layer; its
 *    solution maps to (tp, dp) (search__ilp_map_solution), which the cost model prices on the
 *    sub-mesh's GPUs: cm_stage_coef_get, cm_stage_time per layer count (Alpa profiles the
 *    compiled stage instead), with each allowed recompute setting as its own configuration
 *    (--alpa-defaults: full recompute, as its benchmarks). Memory: a stage with s - 1 stages
 *    after it holds min(s, microbatches) microbatches of activations (cm_stage_memory);
 *    Alpa's max_n_succ_stages is the same test on profiled memory.
 * 5. Inter-op DP (search__tl_dp) over clusters x shapes with the t_max enumeration, early stop
 *    and eps-skip of training_dp. --alpa-defaults also applies the GPT benchmarks'
 *    stage_imbalance_tolerance 1.0 (a slice is tried on a sub-mesh only when its share of the
 *    devices is within 2x of its share of the layers); a sub-mesh of all devices only takes
 *    all layers (both as generate_training_stages_2d).
 * 6. The microbatch count is an input to Alpa (its benchmarks grid-search it outside the
 *    tool): one pass per divisor of the global batch, ascending; so is sequence parallelism
 *    (one pass per allowed value; --alpa-defaults: off). ZeRO: 1 when allowed (Alpa's
 *    prefer_reduce_scatter, which its GPT suite sets, shards the update), else 0; the ILP
 *    prices the weights' state so (search_ilp.c). A stage of every GPU (pp = 1, Alpa's
 *    shard-parallel mesh) also takes ZeRO 2 and 3 where allowed, each its own configuration
 *    (the reduce-scatter of accumulated gradients and force_zero_stage_3; not with
 *    --alpa-defaults, whose GPT suite sets neither).
 * 7. The DP's stages are placed as Alpa places sub-meshes (search__tl_place), built into a
 *    non-uniform 1F1B plan (search_plan_build) and scored by the full cost model
 *    (search__eval: pipeline bubble, stage-to-stage transfers, the data-parallel tail, which
 *    the DP does not see); every pass offers its plan, the best one wins.
 * The unit's note tells the best plan's stages, sub-meshes, logical meshes and microbatches. */
#include <assert.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search_ilp.h"
#include "search_int.h"
#include "search_twolevel.h"

/* ---- the DP --------------------------------------------------------------------------- */

static int cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

typedef struct dp_work {
  const search__tl_table *tab;
  long nstate;          /* (S + 1) (L + 1) (D + 1) */
  double *f, *fmax;
  int *arg;             /* i * nshapes + m of the best transition; -1 none */
} dp_work;

static long st_at(const dp_work *w, int s, int k, int d) {
  const search__tl_table *t = w->tab;
  return ((long)s * (t->L + 1) + k) * (t->D + 1) + d;
}

/* One pass at t_max; returns the best s (0: none) and its F in *F. */
static int dp_pass(dp_work *w, double tmax, double *F) {
  const search__tl_table *t = w->tab;
  int L = t->L, D = t->D, M = t->nshapes;
  for (long x = 0; x < w->nstate; x++) w->f[x] = INFINITY, w->fmax[x] = 0, w->arg[x] = -1;
  w->f[st_at(w, 0, L, 0)] = 0;
  for (int s = 1; s <= t->S; s++)
    for (int k = L - 1; k >= 0; k--) {
      if (s > L - k) continue; /* every stage takes at least one cluster */
      double *fo = &w->f[st_at(w, s, k, 0)], *mo = &w->fmax[st_at(w, s, k, 0)];
      int *ao = &w->arg[st_at(w, s, k, 0)];
      for (int i = k; i < L; i++)
        for (int m = 0; m < M; m++) {
          double e = t->t[search__tl_at(t, k, i, m, s)];
          if (!(e <= tmax)) continue;
          int sz = t->size[m];
          const double *fi = &w->f[st_at(w, s - 1, i + 1, 0)];
          const double *mi = &w->fmax[st_at(w, s - 1, i + 1, 0)];
          for (int d = sz; d <= D; d++) {
            double prev = fi[d - sz];
            if (prev == INFINITY) continue;
            double v = prev + e;
            if (v < fo[d]) {
              fo[d] = v;
              mo[d] = mi[d - sz] > e ? mi[d - sz] : e;
              ao[d] = i * M + m;
            }
          }
        }
    }
  int best = 0;
  *F = INFINITY;
  for (int s = 1; s <= t->S; s++) {
    double v = w->f[st_at(w, s, 0, D)];
    if (v < *F) *F = v, best = s;
  }
  return best;
}

static void dp_path(const dp_work *w, int s, search__tl_path *out) {
  const search__tl_table *t = w->tab;
  int k = 0, d = t->D, n = 0;
  out->sum = 0, out->tmax = 0;
  while (s > 0) {
    int a = w->arg[st_at(w, s, k, d)];
    assert(a >= 0);
    int i = a / t->nshapes, m = a % t->nshapes;
    double e = t->t[search__tl_at(t, k, i, m, s)];
    out->st[n++] = (search__tl_stage){k, i, m, e};
    out->sum += e;
    if (e > out->tmax) out->tmax = e;
    d -= t->size[m];
    k = i + 1;
    s--;
  }
  assert(k == t->L && d == 0);
  out->n = n;
}

int search__tl_dp(const search__tl_table *t, double eps, search__tl_path *out, pp_err *err) {
  memset(out, 0, sizeof *out);
  if (t->L < 1 || t->L > SEARCH__TL_MAX_CLUSTERS || t->S < 1 || t->D < 1)
    return pp_err_set(err, PP_INPUT, "two-level DP: %d clusters, %d stages, %d devices", t->L,
                      t->S, t->D);
  long nt = (long)t->L * t->L * t->nshapes * t->S;
  dp_work w = {t, (long)(t->S + 1) * (t->L + 1) * (t->D + 1), NULL, NULL, NULL};
  double *cand = malloc((size_t)nt * sizeof *cand);
  w.f = malloc((size_t)w.nstate * sizeof *w.f);
  w.fmax = malloc((size_t)w.nstate * sizeof *w.fmax);
  w.arg = malloc((size_t)w.nstate * sizeof *w.arg);
  int rc = PP_OK;
  if (!cand || !w.f || !w.fmax || !w.arg) {
    rc = pp_err_set(err, PP_NOMEM, "two-level DP: out of memory (%ld states)", w.nstate);
    goto done;
  }
  long nc = 0;
  for (long x = 0; x < nt; x++)
    if (isfinite(t->t[x])) cand[nc++] = t->t[x];
  qsort(cand, (size_t)nc, sizeof *cand, cmp_dbl);
  long u = 0;
  for (long x = 0; x < nc; x++)
    if (u == 0 || cand[x] != cand[u - 1]) cand[u++] = cand[x];
  nc = u;
  out->candidates = nc;
  if (!nc) goto done;
  /* the smallest t_max with a solution: feasibility only grows with t_max */
  double F;
  long lo = 0, hi = nc - 1;
  out->dp_runs++;
  if (!dp_pass(&w, cand[hi], &F)) goto done;
  while (lo < hi) {
    long mid = lo + (hi - lo) / 2;
    out->dp_runs++;
    if (dp_pass(&w, cand[mid], &F))
      hi = mid;
    else
      lo = mid + 1;
  }
  /* Alpa's loop from there */
  double best = INFINITY, last = 0;
  for (long x = lo; x < nc; x++) {
    double tm = cand[x];
    if (tm * t->B >= best) break;
    if (tm - last < eps) continue;
    out->dp_runs++;
    int s = dp_pass(&w, tm, &F);
    last = tm;
    if (!s) continue;
    double total = F + (t->B - 1) * w.fmax[st_at(&w, s, 0, t->D)];
    if (total < best) {
      best = total;
      dp_path(&w, s, out);
      out->total = total;
    }
  }
done:
  free(cand);
  free(w.f);
  free(w.fmax);
  free(w.arg);
  return rc;
}

/* ---- brute force ------------------------------------------------------------------------ */

typedef struct brute {
  const search__tl_table *t;
  int n, k[SEARCH__TL_MAX_CLUSTERS], i[SEARCH__TL_MAX_CLUSTERS], m[SEARCH__TL_MAX_CLUSTERS];
  search__tl_path *out;
} brute;

static void brute_rec(brute *b, int k, int d) {
  const search__tl_table *t = b->t;
  if (k == t->L) {
    if (d != 0 || b->n > t->S) return;
    double sum = 0, mx = 0;
    for (int j = 0; j < b->n; j++) {
      double e = t->t[search__tl_at(t, b->k[j], b->i[j], b->m[j], b->n - j)];
      if (!isfinite(e)) return;
      sum += e;
      if (e > mx) mx = e;
    }
    double total = sum + (t->B - 1) * mx;
    if (total < b->out->total) {
      b->out->total = total, b->out->sum = sum, b->out->tmax = mx, b->out->n = b->n;
      for (int j = 0; j < b->n; j++) {
        double e = t->t[search__tl_at(t, b->k[j], b->i[j], b->m[j], b->n - j)];
        b->out->st[j] = (search__tl_stage){b->k[j], b->i[j], b->m[j], e};
      }
    }
    return;
  }
  if (b->n >= t->S) return;
  for (int i = k; i < t->L; i++)
    for (int m = 0; m < t->nshapes; m++) {
      if (t->size[m] > d) continue;
      b->k[b->n] = k, b->i[b->n] = i, b->m[b->n] = m;
      b->n++;
      brute_rec(b, i + 1, d - t->size[m]);
      b->n--;
    }
}

int search__tl_brute(const search__tl_table *t, search__tl_path *out, pp_err *err) {
  memset(out, 0, sizeof *out);
  if (t->L < 1 || t->L > 24)
    return pp_err_set(err, PP_INPUT, "two-level brute force: %d clusters", t->L);
  brute *b = calloc(1, sizeof *b);
  if (!b) return pp_err_set(err, PP_NOMEM, "two-level brute force: out of memory");
  b->t = t;
  b->out = out;
  out->total = INFINITY;
  brute_rec(b, 0, t->D);
  if (out->n == 0) out->total = 0;
  free(b);
  return PP_OK;
}

/* ---- placement ---------------------------------------------------------------------------- */

int search__tl_place(const int *sizes, int n, int island, int *first) {
  int order[SEARCH__TL_MAX_CLUSTERS];
  if (n > SEARCH__TL_MAX_CLUSTERS) return -1;
  for (int j = 0; j < n; j++) order[j] = j;
  /* largest first, stable (insertion sort) */
  for (int a = 1; a < n; a++) {
    int x = order[a], b = a;
    while (b > 0 && sizes[order[b - 1]] < sizes[x]) order[b] = order[b - 1], b--;
    order[b] = x;
  }
  int host = 0, dev = 0;
  for (int a = 0; a < n; a++) {
    int j = order[a], sz = sizes[j];
    if (sz >= island) {
      if (sz % island || dev != 0) return -1;
      first[j] = host * island;
      host += sz / island;
    } else {
      if (island % sz || dev + sz > island) return -1;
      first[j] = host * island + dev;
      dev += sz;
      if (dev == island) host++, dev = 0;
    }
  }
  return dev == 0 ? 0 : -1;
}

/* ---- the method ------------------------------------------------------------------------- */

#define MAX_SHAPES 64
#define MAX_LMESH 64  /* logical meshes of one shape */
#define MAX_OPTS (MAX_LMESH * 3 * 3) /* configurations of one shape: logical meshes x
                                      * recompute x ZeRO */

typedef struct tl_shape {
  int n, m, size;     /* islands, devices per island, devices */
} tl_shape;

/* What prepare works out once (read-only while the unit runs). */
typedef struct tl_state {
  int L, cnt[SEARCH__TL_MAX_CLUSTERS], cum[SEARCH__TL_MAX_CLUSTERS + 1];
  int island, islands;
  int nshapes;
  tl_shape shape[MAX_SHAPES];
  int nB, *Bs;               /* microbatch counts, ascending */
  int nsp, sps[2];
  int nrc;
  spec_recompute rcs[3];
  int zero;                  /* ZeRO of pipelines (-1: none allowed) */
  int nzw, zw[3];            /* ZeRO stages a stage of every GPU takes (pp = 1) */
  int S;                     /* most stages */
  int lm_all;                /* logical meshes "all": mp up to the sub-mesh's devices */
  int widened;               /* Alpa's defaults, sub-meshes widened past 4 islands to cover */
  double tol;                /* stage imbalance tolerance (INFINITY: none) */
  double space;              /* plans in the space (paths x configurations, all passes) */
  char why[256];             /* non-empty: the space is empty, and why */
} tl_state;

/* One configuration of a shape. */
typedef struct tl_opt {
  int lmesh[2], force;       /* logical mesh, batch forced on axis 0 */
  int tp, dp, expressible;
  int zero;
  spec_recompute rc;
  cm_stage_coef coef;
} tl_opt;

static int is_pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }

/* Logical meshes (dp, mp) Alpa offers a shape for microbatches of `samples` sequences:
 * forced ones first, then (devices, 1) free. Returns the count. mp runs to the devices per
 * island of the sub-mesh ("single_node_model_parallel", Alpa's GPT default) or, with
 * all (submesh_logical_shape_space "all"), to every device of it: model parallelism across
 * its islands. */
static int logical_meshes(const tl_shape *sh, int samples, int all, int out[][3]) {
  int n = 0, most = all ? sh->size : sh->m;
  for (int mp = 1; mp <= most && mp <= sh->size && n < MAX_LMESH - 1; mp++) {
    if (sh->size % mp) continue;
    int dp = sh->size / mp;
    if (samples % dp) continue;
    out[n][0] = dp, out[n][1] = mp, out[n][2] = 1;
    n++;
  }
  out[n][0] = sh->size, out[n][1] = 1, out[n][2] = 0;
  return n + 1;
}

/* Counting the space: paths of the DP (slicings x shapes) times the configurations of each
 * stage, before memory. */
static double count_paths(const tl_state *st, const double *opts) {
  int L = st->L, D = st->island * st->islands, M = st->nshapes, S = st->S;
  long n = (long)(S + 1) * (L + 1) * (D + 1);
  double *w = calloc((size_t)n, sizeof *w);
  if (!w) return 0;
#define W(s, k, d) w[((long)(s) * (L + 1) + (k)) * (D + 1) + (d)]
  W(0, L, 0) = 1;
  for (int s = 1; s <= S; s++)
    for (int k = L - 1; k >= 0; k--)
      for (int i = k; i < L; i++)
        for (int m = 0; m < M; m++) {
          int sz = st->shape[m].size;
          int layers = st->cum[i + 1] - st->cum[k];
          if (sz == D && (k != 0 || i != L - 1)) continue;
          if (isfinite(st->tol)) {
            double dev = (double)sz / D, fl = (double)layers / st->cum[L];
            if (dev > fl * (1 + st->tol) || dev < fl / (1 + st->tol)) continue;
          }
          for (int d = sz; d <= D; d++) W(s, k, d) += opts[m] * W(s - 1, i + 1, d - sz);
        }
  double tot = 0;
  for (int s = 1; s <= S; s++) tot += W(s, 0, D);
#undef W
  free(w);
  return tot;
}

/* The ZeRO stages shape m's configurations take (into z where given); returns the count. */
static int shape_zeros(const tl_state *st, int m, int *z) {
  if (st->shape[m].size == st->island * st->islands) {
    if (z) memcpy(z, st->zw, sizeof st->zw);
    return st->nzw;
  }
  if (st->zero < 0) return 0;
  if (z) z[0] = st->zero;
  return 1;
}

/* The whole space: every pass's paths (passes whose shapes offer as many configurations
 * share one count). */
static double count_space(const tl_state *st, int gbs) {
  int M = st->nshapes;
  double *seen = malloc(sizeof *seen * (size_t)st->nB * (M + 1));
  if (!seen) return 0;
  int nseen = 0;
  double tot = 0;
  for (int b = 0; b < st->nB; b++) {
    double opts[MAX_SHAPES];
    for (int m = 0; m < M; m++) {
      int lm[MAX_LMESH][3];
      opts[m] = (double)logical_meshes(&st->shape[m], gbs / st->Bs[b], st->lm_all, lm) *
                st->nrc * shape_zeros(st, m, NULL);
    }
    int j;
    for (j = 0; j < nseen; j++)
      if (!memcmp(&seen[j * (M + 1)], opts, sizeof *opts * (size_t)M)) break;
    if (j == nseen) {
      memcpy(&seen[j * (M + 1)], opts, sizeof *opts * (size_t)M);
      seen[j * (M + 1) + M] = count_paths(st, opts);
      nseen++;
    }
    tot += seen[j * (M + 1) + M];
  }
  free(seen);
  return tot * st->nsp;
}

static void tl_release(search__run *run) {
  tl_state *st = run->state;
  if (!st) return;
  free(st->Bs);
  free(st);
  run->state = NULL;
}

static int tl_prepare(search__run *run, pp_err *err) {
  const search_opts *o = run->o;
  const search_space *sp = &o->space;
  const spec_model *m = &run->m;
  const spec_cluster *c = &run->c;
  tl_state *st = calloc(1, sizeof *st);
  if (!st) return pp_err_set(err, PP_NOMEM, "two-level: out of memory");
  run->state = st;
  /* layer clusters: Alpa's GPT benchmarks use 16 (suite_auto_gpt.py) */
  int L = o->layer_clusters > 0 ? o->layer_clusters : 16;
  if (L > m->layers) L = m->layers;
  if (L > SEARCH__TL_MAX_CLUSTERS) L = SEARCH__TL_MAX_CLUSTERS;
  st->L = L;
  st->lm_all = o->logical_all;
  int base = m->layers / L, rem = m->layers % L;
  for (int k = 0; k < L; k++) st->cnt[k] = base;
  /* extra layers to the middle clusters first (the ends hold the embedding and the head) */
  for (int r = 0; r < rem; r++) {
    int best = -1;
    double bd = 0;
    for (int k = 0; k < L; k++) {
      if (st->cnt[k] > base) continue;
      double dist = fabs(k - (L - 1) / 2.0);
      if (best < 0 || dist < bd) best = k, bd = dist;
    }
    st->cnt[best]++;
  }
  st->cum[0] = 0;
  for (int k = 0; k < L; k++) st->cum[k + 1] = st->cum[k] + st->cnt[k];
  /* islands */
  int isl = c->gpus_per_node;
  if (o->island_domain && c->nvlink.domain_gpus > 1) isl = c->nvlink.domain_gpus;
  if (isl > c->gpus) isl = c->gpus;
  if (c->gpus % isl) {
    snprintf(st->why, sizeof st->why, "two-level: %d GPUs are not whole islands of %d", c->gpus,
             isl);
    return PP_OK;
  }
  st->island = isl;
  st->islands = c->gpus / isl;
  /* shapes: (1, 2^k) for 2^k dividing the island, (1, island) when it is no power of two,
   * then whole islands */
  for (int k = 1; k <= isl && st->nshapes < MAX_SHAPES; k *= 2)
    if (isl % k == 0) st->shape[st->nshapes++] = (tl_shape){1, k, k};
  if (!is_pow2(isl)) st->shape[st->nshapes++] = (tl_shape){1, isl, isl};
  st->S = L;
  if (sp->max_pp > 0 && sp->max_pp < st->S) st->S = sp->max_pp;
  /* Alpa's GPT benchmark takes sub-meshes of at most 4 islands ("small_power_of_two"); where
   * S stages of 4 islands cannot cover the cluster (beyond 512 GPUs of 8 per node with 16
   * clusters), it takes every power of two ("power_of_two"), as a user of Alpa there must */
  int nmax = st->islands;
  if (o->alpa_defaults && st->islands > 4) {
    if ((long)st->S * 4 * isl >= c->gpus)
      nmax = 4;
    else
      st->widened = 1;
  }
  for (int n = 2; n <= nmax && st->nshapes < MAX_SHAPES; n *= 2)
    st->shape[st->nshapes++] = (tl_shape){n, isl, n * isl};
  /* microbatch counts: the divisors of the global batch */
  int ndiv = 0;
  for (int b = 1; b <= sp->gbs; b++) ndiv += sp->gbs % b == 0;
  st->Bs = malloc(sizeof *st->Bs * (size_t)ndiv);
  if (!st->Bs) return pp_err_set(err, PP_NOMEM, "two-level: out of memory");
  for (int b = 1; b <= sp->gbs; b++)
    if (sp->gbs % b == 0) st->Bs[st->nB++] = b;
  /* sequence parallelism, recompute, ZeRO */
  unsigned spbits = sp->sp ? sp->sp : 1;
  if (o->alpa_defaults && (spbits & 1)) spbits = 1;
  for (int v = 0; v < 2; v++)
    if (spbits & (1u << v)) st->sps[st->nsp++] = v;
  unsigned rcb = sp->recompute ? sp->recompute : 1u << SPEC_RECOMPUTE_NONE;
  if (o->alpa_defaults && (rcb & (1u << SPEC_RECOMPUTE_FULL))) rcb = 1u << SPEC_RECOMPUTE_FULL;
  for (int v = 0; v < 3; v++)
    if (rcb & (1u << v)) st->rcs[st->nrc++] = (spec_recompute)v;
  unsigned zb = sp->zero ? sp->zero : 1;
  st->zero = zb & 2 ? 1 : zb & 1 ? 0 : -1;
  if (st->zero >= 0) st->zw[st->nzw++] = st->zero;
  for (int z = 2; z <= 3 && !o->alpa_defaults; z++)
    if (zb & (1u << z)) st->zw[st->nzw++] = z;
  if (!st->nzw)
    snprintf(st->why, sizeof st->why,
             "two-level: pipelines need ZeRO 0 or 1 (ZeRO 2 and 3 need pp = 1%s)",
             o->alpa_defaults ? "; Alpa's GPT suite shards no more than ZeRO 1" : "");
  if (sp->schedules && !(sp->schedules & (1u << SPEC_SCHED_1F1B)))
    snprintf(st->why, sizeof st->why, "two-level: its plans run 1F1B, which the space excludes");
  st->tol = o->alpa_defaults ? 1.0 : INFINITY;
  if (!st->why[0])
    st->space = count_space(st, sp->gbs);
  return PP_OK;
}

static int tl_units(search__run *run, int *n, pp_err *err) {
  (void)run, (void)err;
  *n = 1;
  return PP_OK;
}

static double tl_space_size(search__run *run) {
  const tl_state *st = run->state;
  return st ? st->space : 0;
}

/* A pass's facts, for the note. */
typedef struct tl_pass {
  int B, sp, nstages;
  int stage_opt[SEARCH__TL_MAX_CLUSTERS];
  search__tl_path path;
  tl_opt opt[SEARCH__TL_MAX_CLUSTERS];
  double iter_s;
  int feasible;
} tl_pass;

/* The counts of a unit's whole run, for the note. */
typedef struct tl_counts {
  long long ilps, inexpressible, dp_runs, passes, nopath;
} tl_counts;

static int valid_cfg(const search__run *run, int tp, int dp, int samples, int sp) {
  const spec_model *m = &run->m;
  const search_space *s = &run->o->space;
  if (m->heads % tp || m->kv_heads % tp || m->ffn_hidden % tp) return 0;
  if (sp && tp > 1 && m->seq_len % tp) return 0;
  if (samples % dp) return 0;
  if (s->max_tp > 0 && tp > s->max_tp) return 0;
  if (s->max_dp > 0 && dp > s->max_dp) return 0;
  if (s->max_mbs > 0 && samples / dp > s->max_mbs) return 0;
  return 1;
}

/* The configurations of every shape for one pass: ILPs, mapping, stage coefficients. */
static int pass_options(search__unit *u, const tl_state *st, int B, int sp, tl_opt *opts,
                        int *nopt, tl_counts *cnt, pp_err *err) {
  search__run *run = u->run;
  const search_opts *o = run->o;
  int samples = o->space.gbs / B;
  int *gpus = malloc(sizeof *gpus * (size_t)(st->island * st->islands));
  if (!gpus) return pp_err_set(err, PP_NOMEM, "two-level: out of memory");
  for (int g = 0; g < st->island * st->islands; g++) gpus[g] = g;
  int rc = PP_OK;
  for (int m = 0; m < st->nshapes; m++) {
    const tl_shape *sh = &st->shape[m];
    tl_opt *ob = &opts[m * MAX_OPTS];
    int n = 0;
    int lm[MAX_LMESH][3], zs[3];
    int nl = logical_meshes(sh, samples, st->lm_all, lm), nz = shape_zeros(st, m, zs);
    for (int zl = 0; zl < nz * nl; zl++) {
      int zi = zl / nl, l = zl % nl;
      search__ilp_mesh mesh = {{lm[l][0], lm[l][1]}, gpus, lm[l][2]};
      search__ilp_costs co;
      search__ilp_costs_alpa(&co, samples);
      if (!o->alpa_defaults) {
        co.alpa = 0;
        co.cm = u->cm;
        co.grad_bytes = cm_model_params(u->cm)->grad_comm_bytes;
        co.state_bytes = 2 + cm_model_params(u->cm)->grad_bytes + 12;
      }
      co.allow_seq = sp, co.zero = zs[zi];
      search__ilp_graph g;
      pp_err e2 = {0};
      if (search__ilp_layer(&run->m, &mesh, &co, &g, &e2)) {
        if (e2.code != PP_INPUT) { /* no strategy fits this mesh: not a configuration */
          rc = pp_err_set(err, e2.code, "%s", e2.msg);
          goto done;
        }
        continue;
      }
      search__ilp_sol sol;
      rc = search__ilp_solve(&g, &sol, err);
      search__ilp_map mp;
      if (!rc) search__ilp_map_solution(&g, &sol, &mp);
      search__ilp_graph_free(&g);
      if (rc) goto done;
      cnt->ilps++;
      if (!mp.expressible) cnt->inexpressible++;
      if (!valid_cfg(run, mp.tp, mp.dp, samples, sp)) continue;
      int dup = 0;
      for (int q = 0; q < n; q++)
        if (ob[q].tp == mp.tp && ob[q].dp == mp.dp && ob[q].zero == zs[zi]) dup = 1;
      if (dup) continue;
      for (int r = 0; r < st->nrc; r++) {
        if (n >= MAX_OPTS) {
          rc = pp_err_set(err, PP_INTERNAL, "two-level: more than %d configurations of a shape",
                          MAX_OPTS);
          goto done;
        }
        tl_opt *x = &ob[n];
        x->lmesh[0] = lm[l][0], x->lmesh[1] = lm[l][1], x->force = lm[l][2];
        x->tp = mp.tp, x->dp = mp.dp, x->expressible = mp.expressible;
        x->zero = zs[zi], x->rc = st->rcs[r];
        cm_stage_cfg cfg = {mp.tp, 1, mp.dp, 1, samples / mp.dp, sp, st->rcs[r]};
        if ((rc = cm_stage_coef_get(u->cm, &cfg, gpus, sh->size, &x->coef, err))) goto done;
        n++;
      }
    }
    nopt[m] = n;
  }
done:
  free(gpus);
  return rc;
}

/* The stage-cost table of a pass: the cheapest configuration of every (slice, shape, stages
 * in flight), and which one it is. */
static int pass_table(search__unit *u, const tl_state *st, int B, const tl_opt *opts,
                      const int *nopt, double *t, int *arg) {
  const spec_cluster *c = &u->run->c;
  int L = st->L, M = st->nshapes, S = st->S, D = st->island * st->islands;
  search__tl_table tab = {L, M, D, S, B, NULL, t};
  long nt = (long)L * L * M * S;
  for (long x = 0; x < nt; x++) t[x] = INFINITY, arg[x] = -1;
  for (int k = 0; k < L; k++)
    for (int i = k; i < L; i++)
      for (int m = 0; m < M; m++) {
        int sz = st->shape[m].size, layers = st->cum[i + 1] - st->cum[k];
        if (sz == D && (k != 0 || i != L - 1)) continue;
        if (isfinite(st->tol)) {
          double dev = (double)sz / D, fl = (double)layers / st->cum[L];
          if (dev > fl * (1 + st->tol) || dev < fl / (1 + st->tol)) continue;
        }
        for (int q = 0; q < nopt[m]; q++) {
          const tl_opt *x = &opts[m * MAX_OPTS + q];
          int first = k == 0, last = i == L - 1;
          double time = cm_stage_time(u->cm, &x->coef, layers, first, last, x->zero);
          cm_memory m0, m1;
          cm_stage_memory(u->cm, &x->coef, layers, first, last, x->zero, 0, &m0);
          cm_stage_memory(u->cm, &x->coef, layers, first, last, x->zero, 1, &m1);
          double act = m1.total_gib - m0.total_gib, cap = c->gpu.hbm_gib;
          /* the most stages after it: in flight min(s, B) microbatches must fit */
          int succ;
          if (m1.total_gib > cap)
            succ = -1;
          else if (m0.total_gib + act * B <= cap)
            succ = S;
          else
            succ = (int)floor((cap - m0.total_gib) / act) - 1;
          for (int s = 1; s <= S && s - 1 <= succ; s++) {
            long at = search__tl_at(&tab, k, i, m, s);
            if (time < t[at]) t[at] = time, arg[at] = q;
          }
        }
      }
  return PP_OK;
}

static void stage_name(const tl_state *st, const search__tl_stage *s, const tl_opt *x, char *b,
                       size_t n) {
  const tl_shape *sh = &st->shape[s->shape];
  snprintf(b, n, "%d layers (%d,%d) logical (%d,%d)%s tp%d dp%d %s", st->cum[s->i + 1] - st->cum[s->k],
           sh->n, sh->m, x->lmesh[0], x->lmesh[1], x->force ? "" : " free", x->tp, x->dp,
           spec_recompute_name(x->rc));
}

static void make_note(const tl_state *st, const tl_pass *p, const tl_counts *k, char *note,
                      size_t n) {
  int len = snprintf(note, n, "Alpa two-level: %d stages, %d microbatches, sp %s, zero %d: ",
                     p->path.n, p->B, p->sp ? "on" : "off", p->opt[0].zero);
  for (int j = 0; j < p->path.n && len < (int)n;) {
    char a[128], b[128];
    stage_name(st, &p->path.st[j], &p->opt[j], a, sizeof a);
    int r = j + 1;
    while (r < p->path.n) {
      stage_name(st, &p->path.st[r], &p->opt[r], b, sizeof b);
      if (strcmp(a, b)) break;
      r++;
    }
    len += snprintf(note + len, n - (size_t)len, "%s%dx[%s]", j ? " + " : "", r - j, a);
    j = r;
  }
  if (len < (int)n)
    len += snprintf(note + len, n - (size_t)len,
                    "; %d clusters; DP %.4g s (t_max tries %lld); ILPs %lld (%lld inexpressible); "
                    "stage costs from the cost model, not profiled%s",
                    st->L, p->path.total, k->dp_runs, k->ilps, k->inexpressible,
                    st->widened ? "; sub-meshes of every power of two of islands (Alpa's "
                                  "small_power_of_two cannot cover the cluster)"
                                : "");
  (void)len;
}

static int tl_search(search__unit *u, pp_err *err);

/* Alpa's GPT suite grid-searches the layer-cluster count (num_auto_layers: 8 and 16 for its
 * models of 2.6B parameters and more, suite_auto_gpt.py) and keeps the best run. */
static const int sweep_clusters[] = {8, 16};

/* Folds one pass t into u: its plans offered, its counts added, its note kept when its plan
 * is the best so far. */
static int tl_merge(search__unit *u, const search__unit *t, pp_err *err) {
  double was = u->top.n ? u->top.e[0].cm.iter_time_s : INFINITY;
  for (int i = 0; i < t->top.n; i++)
    if (search__top_offer(&u->top, &t->top.e[i].plan, &t->top.e[i].cm, u->unit, err) < 0)
      return err->code;
  u->evaluations += t->evaluations, u->feasible += t->feasible, u->pruned += t->pruned;
  u->complete &= t->complete;
  if (t->top.n && t->top.e[0].cm.iter_time_s < was) memcpy(u->note, t->note, sizeof u->note);
  if (!u->top.n && t->why[0]) {
    memcpy(u->why, t->why, sizeof u->why);
    u->min_excess_gib = t->min_excess_gib;
  }
  return PP_OK;
}

/* layer_sweep: one pass per count of sweep_clusters (a count above the layers is the layers,
 * taken once), each prepared and searched as a run of its own. */
static int tl_sweep(search__unit *u, pp_err *err) {
  search__run *run = u->run;
  int last = 0, rc = PP_OK;
  u->complete = 1;
  for (size_t i = 0; i < sizeof sweep_clusters / sizeof sweep_clusters[0] && !rc; i++) {
    int L = sweep_clusters[i] < run->m.layers ? sweep_clusters[i] : run->m.layers;
    if (L == last) continue;
    last = L;
    search_opts o2 = *run->o;
    o2.layer_clusters = L, o2.layer_sweep = 0;
    search__run sub = *run;
    sub.o = &o2, sub.state = NULL;
    search__unit t = {.run = &sub, .cm = u->cm, .unit = u->unit, .complete = 1,
                      .min_excess_gib = INFINITY};
    rc = search__top_init(&t.top, run->o->top, err);
    if (!rc) rc = tl_prepare(&sub, err);
    if (!rc) rc = tl_search(&t, err);
    tl_release(&sub);
    if (!rc) rc = tl_merge(u, &t, err);
    search__top_free(&t.top);
  }
  return rc;
}

/* The unit, through the caller's cache (search_cache): a search that asks two-level what an
 * earlier one on the same cost model asked (global's unit 1 of each rung) takes its answer. */
static int tl_unit(search__unit *u, pp_err *err) {
  char key[256];
  int hit = 0;
  search__tl_key(u->run->o, key, sizeof key);
  if (search__cache_get(u->run->o->cache, key, u, &hit, err)) return err->code;
  if (hit) return PP_OK;
  if ((u->run->o->layer_sweep ? tl_sweep : tl_search)(u, err)) return err->code;
  return search__cache_put(u->run->o->cache, key, u, err);
}

static int tl_search(search__unit *u, pp_err *err) {
  search__run *run = u->run;
  const tl_state *st = run->state;
  const search_opts *o = run->o;
  u->complete = 1;
  if (st->why[0]) {
    snprintf(u->why, sizeof u->why, "%s", st->why);
    u->min_excess_gib = DBL_MAX;
    return PP_OK;
  }
  int L = st->L, M = st->nshapes, S = st->S, D = st->island * st->islands;
  long nt = (long)L * L * M * S;
  tl_opt *opts = malloc(sizeof *opts * (size_t)(M * MAX_OPTS));
  int *nopt = calloc((size_t)M, sizeof *nopt);
  double *t = malloc(sizeof *t * (size_t)nt);
  int *arg = malloc(sizeof *arg * (size_t)nt);
  tl_pass *pass = malloc(sizeof *pass), *best = calloc(1, sizeof *best);
  search_stage *stages = malloc(sizeof *stages * (size_t)L);
  int *sizes = malloc(sizeof *sizes * (size_t)L), *first = malloc(sizeof *first * (size_t)L);
  tl_counts cnt = {0};
  int rc = PP_OK;
  if (!opts || !nopt || !t || !arg || !pass || !best || !stages || !sizes || !first) {
    rc = pp_err_set(err, PP_NOMEM, "two-level: out of memory");
    goto done;
  }
  best->iter_s = INFINITY;
  int any_path = 0;
  char plan_why[256] = "";
  for (int bi = 0; bi < st->nB; bi++)
    for (int si = 0; si < st->nsp; si++) {
      if (search__expired(run)) {
        u->complete = 0;
        goto out;
      }
      int B = st->Bs[bi], sp = st->sps[si];
      memset(nopt, 0, sizeof *nopt * (size_t)M);
      if ((rc = pass_options(u, st, B, sp, opts, nopt, &cnt, err))) goto done;
      pass_table(u, st, B, opts, nopt, t, arg);
      int sizes_m[MAX_SHAPES];
      for (int m = 0; m < M; m++) sizes_m[m] = st->shape[m].size;
      search__tl_table tab = {L, M, D, S, B, sizes_m, t};
      memset(pass, 0, sizeof *pass);
      if ((rc = search__tl_dp(&tab, 1e-6, &pass->path, err))) goto done;
      cnt.dp_runs += pass->path.dp_runs;
      cnt.passes++;
      if (pass->path.n == 0) {
        cnt.nopath++;
        continue;
      }
      any_path = 1;
      pass->B = B, pass->sp = sp;
      int n = pass->path.n;
      for (int j = 0; j < n; j++) {
        const search__tl_stage *s = &pass->path.st[j];
        int q = arg[search__tl_at(&tab, s->k, s->i, s->shape, n - j)];
        assert(q >= 0);
        pass->opt[j] = opts[s->shape * MAX_OPTS + q];
        sizes[j] = st->shape[s->shape].size;
      }
      if (search__tl_place(sizes, n, st->island, first)) {
        snprintf(plan_why, sizeof plan_why, "two-level: sub-meshes that do not pack");
        continue;
      }
      for (int j = 0; j < n; j++) {
        const search__tl_stage *s = &pass->path.st[j];
        const tl_opt *x = &pass->opt[j];
        stages[j] = (search_stage){st->cum[s->i + 1] - st->cum[s->k], first[j], sizes[j], x->tp,
                                   1, x->dp, 1, x->rc};
      }
      spec_plan plan;
      pp_err e2 = {0};
      if (search_plan_build(stages, n, o->space.gbs, B, sp, pass->opt[0].zero, &run->m, &run->c,
                            &plan, &e2)) {
        if (e2.code != PP_PLAN) {
          rc = pp_err_set(err, e2.code, "%s", e2.msg);
          goto done;
        }
        snprintf(plan_why, sizeof plan_why, "two-level: %.200s", e2.msg);
        continue;
      }
      cm_result r;
      rc = search__eval(u, &plan, &r, err);
      spec_plan_clear(&plan);
      if (rc) goto done;
      pass->iter_s = r.iter_time_s;
      pass->feasible = r.feasible;
      if (r.feasible && r.iter_time_s < best->iter_s) {
        tl_pass *sw = best;
        best = pass;
        pass = sw;
      }
    }
out:
  if (isfinite(best->iter_s)) {
    make_note(st, best, &cnt, u->note, sizeof u->note);
  } else if (!any_path || (plan_why[0] && !u->why[0])) {
    /* nothing was scored: say why (a finite excess makes the run report this why) */
    u->min_excess_gib = DBL_MAX;
    int most = st->shape[st->nshapes - 1].size;
    if (!any_path && (long)st->S * most < D)
      snprintf(u->why, sizeof u->why,
               "two-level: no slicing covers the %d GPUs (at most %d stages of at most %d GPUs)",
               D, st->S, most);
    else if (!any_path)
      snprintf(u->why, sizeof u->why,
               "two-level: no slicing into stages fits in memory for any of the %d microbatch "
               "counts (%lld ILPs, %lld DP passes)",
               st->nB, cnt.ilps, cnt.dp_runs);
    else
      snprintf(u->why, sizeof u->why, "%s", plan_why);
  }
done:
  free(opts);
  free(nopt);
  free(t);
  free(arg);
  free(pass);
  free(best);
  free(stages);
  free(sizes);
  free(first);
  return rc;
}

const search__method search__two_level = {SEARCH_TWO_LEVEL, "two-level", tl_prepare, tl_units,
                                          tl_unit, tl_release, tl_space_size};
