/* Measurements as observations, and what a calibration records of them (cal.h). */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "podplan/cal.h"

/* A stored measurement's use: the observation, or why it is left out. */
int cal_obs_from_row(const store_measurement *r, int64_t id, const spec_cluster *c,
                     cal_obs *out, const char **why) {
  memset(out, 0, sizeof *out);
  out->id = id;
  out->time_s = r->time_s;
  *why = NULL;
  /* CPU processes (`run --device cpu`) inform a cluster of them (device "cpu"), never GPUs */
  int on_cpu = strcmp(r->device, "cpu") == 0;
  const char *other = c->gpu.cpu ? "measured on GPUs; the cluster's ranks are CPU processes"
                                 : "measured on CPUs, not on the cluster's GPUs";
  if (strcmp(r->kind, "coll") == 0) {
    /* nccl-tests logs and `bench coll` run on ranks 0..n-1, as predict --collective places a
     * group, with every member there at the start. A run's collectives (placement set) are on
     * its TP/DP/... groups, and each member's time includes waiting for the last to arrive:
     * their own time (own_s: the earliest member's end after the last one's start, which
     * podplan run records) is fitted where the group sits as cm_place_group puts one of its
     * stride (docs: calibrate/README.md) */
    int of_run = r->placement && r->placement[0];
    if (of_run) {
      json_t *s = json_loads(r->shape_json ? r->shape_json : "{}", 0, NULL);
      out->time_s = json_number_value(json_object_get(s, "own_s"));
      out->stride = (int)json_integer_value(json_object_get(s, "stride"));
      json_decref(s);
    }
    if (of_run && !(out->time_s > 0))
      *why = "a run's collectives without their own time (a run before podplan recorded it, or "
             "members whose marks did not overlap)";
    else if (of_run && out->stride < 1)
      *why = "a run's collectives on a group placed otherwise than from GPU 0 with a stride";
    else if (on_cpu != c->gpu.cpu) *why = other;
    else if (cm_coll_lookup(r->name, &out->coll)) *why = "a collective the cost model does not price";
    else if (r->ranks < 2) *why = "a collective on one rank";
    else if ((long)(r->ranks - 1) * (out->stride > 1 ? out->stride : 1) + 1 > c->gpus)
      *why = "a group larger than the cluster (--gpus)";
    if (*why) return 0;
    out->kind = CAL_COLL;
    out->bytes = r->bytes;
    out->ranks = r->ranks;
    return 1;
  }
  if (strcmp(r->kind, "gemm") == 0) {
    if (on_cpu != c->gpu.cpu) {
      *why = other;
      return 0;
    }
    json_t *s = json_loads(r->shape_json ? r->shape_json : "{}", 0, NULL);
    json_t *b = json_object_get(s, "batch");
    const char *ev = json_string_value(json_object_get(s, "ev"));
    out->attn_product = strcmp(r->name, "attn") == 0 && ev && strcmp(ev, "backward") == 0;
    out->m = json_number_value(json_object_get(s, "m"));
    out->n = json_number_value(json_object_get(s, "n"));
    out->k = json_number_value(json_object_get(s, "k"));
    out->batch = b ? json_number_value(b) : 1;
    json_decref(s);
    if (!(out->batch >= 1)) *why = "a GEMM with a batch below 1";
    else if (!(out->m >= 1 && out->n >= 1 && out->k >= 1)) *why = "a GEMM without its shape";
    if (*why) return 0;
    out->kind = CAL_GEMM;
    return 1;
  }
  if (strcmp(r->kind, "mem") == 0 || strcmp(r->kind, "op") == 0) {
    json_t *s = json_loads(r->shape_json ? r->shape_json : "{}", 0, NULL);
    const char *op = json_string_value(json_object_get(s, "op"));
    const char *ev = json_string_value(json_object_get(s, "ev"));
    json_t *causal = json_object_get(s, "causal"), *rc = json_object_get(s, "recompute");
    int fwd = ev && strcmp(ev, "forward") == 0, bwd = ev && strcmp(ev, "backward") == 0;
    out->kind = CAL_OP;
    if (on_cpu != c->gpu.cpu) {
      *why = other;
    } else if (strcmp(r->kind, "mem") == 0) {
      out->lop = CM_LOP_MEM, out->bytes = r->bytes;
      if (!(r->bytes > 0)) *why = "a memory-bound op without its bytes";
    } else if (!op || strcmp(op, "attn")) {
      *why = "an op the cost model does not price alone (barrier)";
    } else if (!fwd && !bwd) {
      *why = "an attention outside the forward and backward passes";
    } else if (!json_is_boolean(causal)) {
      *why = "an attention without its causal flag (a run before podplan recorded it)";
    } else if (bwd && !json_is_boolean(rc)) {
      *why = "a backward attention without its recompute flag (a run before podplan recorded it)";
    } else {
      /* a recomputed forward runs as the forward; the backward's two passes, with its score
       * product, become one observation of the whole backward (cal_obs_fold_attn) */
      out->lop = CM_LOP_ATTN, out->causal = json_is_true(causal);
      out->backward = bwd && !json_is_true(rc);
      out->m = json_number_value(json_object_get(s, "m"));
      out->n = json_number_value(json_object_get(s, "n"));
      out->k = json_number_value(json_object_get(s, "k"));
      out->batch = json_number_value(json_object_get(s, "batch"));
      if (!(out->m >= 1 && out->n >= 1 && out->k >= 1 && out->batch >= 1))
        *why = "an attention without its shape";
    }
    json_decref(s);
    return *why == NULL;
  }
  *why = strcmp(r->kind, "iter") == 0
             ? "a run's iterations (fitted once, from the run's score)"
             : "p2p messages (the cost model prices pipeline sends per microbatch)";
  return 0;
}

/* An op of a run, for merging its repeats (same run key and shape). */
typedef struct gemm_ref {
  const cal_obs *o;
  const char *key;
  size_t at;
} gemm_ref;

static int gemm_cmp(const void *a, const void *b) {
  const gemm_ref *x = a, *y = b;
  int c = strcmp(x->key, y->key);
  if (c) return c;
  if (x->o->m != y->o->m) return x->o->m < y->o->m ? -1 : 1;
  if (x->o->n != y->o->n) return x->o->n < y->o->n ? -1 : 1;
  if (x->o->k != y->o->k) return x->o->k < y->o->k ? -1 : 1;
  if (x->o->kind != y->o->kind) return x->o->kind < y->o->kind ? -1 : 1;
  if (x->o->lop != y->o->lop) return x->o->lop < y->o->lop ? -1 : 1;
  if (x->o->batch != y->o->batch) return x->o->batch < y->o->batch ? -1 : 1;
  if (x->o->bytes != y->o->bytes) return x->o->bytes < y->o->bytes ? -1 : 1;
  if (x->o->causal != y->o->causal) return x->o->causal < y->o->causal ? -1 : 1;
  if (x->o->backward != y->o->backward) return x->o->backward < y->o->backward ? -1 : 1;
  if (x->o->attn_product != y->o->attn_product)
    return x->o->attn_product < y->o->attn_product ? -1 : 1;
  if (x->o->coll != y->o->coll) return x->o->coll < y->o->coll ? -1 : 1;
  if (x->o->ranks != y->o->ranks) return x->o->ranks < y->o->ranks ? -1 : 1;
  if (x->o->stride != y->o->stride) return x->o->stride < y->o->stride ? -1 : 1;
  return x->at < y->at ? -1 : x->at > y->at;
}

static int same_shape(const gemm_ref *x, const gemm_ref *y) {
  gemm_ref a = *x, b = *y;
  a.at = b.at = 0;
  return gemm_cmp(&a, &b) == 0;
}

size_t cal_obs_merge(cal_obs *obs, const char **key, size_t n) {
  gemm_ref *r = malloc((n + 1) * sizeof *r);
  size_t *into = malloc((n + 1) * sizeof *into);
  double *sum = calloc(n + 1, sizeof *sum);
  int *cnt = calloc(n + 1, sizeof *cnt);
  if (!r || !into || !sum || !cnt) {
    free(r), free(into), free(sum), free(cnt);
    return n;
  }
  size_t nr = 0;
  for (size_t i = 0; i < n; i++) {
    into[i] = i;
    if ((obs[i].kind == CAL_GEMM || obs[i].kind == CAL_OP || obs[i].kind == CAL_COLL) && key[i])
      r[nr++] = (gemm_ref){&obs[i], key[i], i};
  }
  qsort(r, nr, sizeof *r, gemm_cmp);
  for (size_t a = 0; a < nr;) {
    size_t b = a + 1, first = r[a].at;
    while (b < nr && same_shape(&r[a], &r[b]))
      first = r[b].at < first ? r[b].at : first, b++;
    for (size_t j = a; j < b; j++) into[r[j].at] = first;
    a = b;
  }
  for (size_t i = 0; i < n; i++) sum[into[i]] += obs[i].time_s, cnt[into[i]]++;
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (into[i] == i) {
      obs[m] = obs[i], key[m] = key[i];
      obs[m++].time_s = sum[i] / cnt[i];
    }
  free(r), free(into), free(sum), free(cnt);
  return m;
}

/* 1 when g is the score product of the backward attention a (the same run). */
static int product_of(const cal_obs *a, const char *ka, const cal_obs *g, const char *kg) {
  return g->kind == CAL_GEMM && g->attn_product && ka && kg && strcmp(ka, kg) == 0 &&
         g->m == a->m && g->n == a->k && g->k == ceil(a->n / 2) &&
         (g->batch > 1 ? g->batch : 1) == (a->batch > 1 ? a->batch : 1);
}

size_t cal_obs_fold_attn(cal_obs *obs, const char **key, size_t n, size_t *unpaired) {
  unsigned char *gone = calloc(n + 1, 1);
  *unpaired = 0;
  if (!gone) return n;
  for (size_t i = 0; i < n; i++) {
    cal_obs *a = &obs[i];
    if (a->kind != CAL_OP || a->lop != CM_LOP_ATTN || !a->backward) continue;
    size_t j = 0;
    while (j < n && !product_of(a, key[i], &obs[j], key[j])) j++;
    if (j == n)
      gone[i] = 1, ++*unpaired;
    else
      a->time_s = 2 * a->time_s + obs[j].time_s;
  }
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (!gone[i]) obs[m] = obs[i], key[m++] = key[i];
  free(gone);
  return m;
}

char *cal_residuals_json(const cal_result *r, const cal_obs *obs) {
  json_t *a = json_array();
  for (size_t i = 0; a && i < r->nobs; i++) {
    json_t *e = json_pack("{s:I, s:f, s:f, s:f, s:b}", "id", (json_int_t)obs[i].id, "measured_s",
                          obs[i].time_s, "before_s", r->before[i], "after_s", r->after[i], "held",
                          r->held[i]);
    if (!e || json_array_append_new(a, e)) {
      json_decref(a);
      return NULL;
    }
  }
  char *s = a ? json_dumps(a, JSON_COMPACT) : NULL;
  json_decref(a);
  return s;
}

/* The size ranges collective errors are reported in. */
static const struct {
  const char *name;
  double lo, hi;
} ranges[CAL_NRANGES] = {
    {"< 1 MiB", 0, 1 << 20},
    {"1 - 64 MiB", 1 << 20, 64.0 * (1 << 20)},
    {">= 64 MiB", 64.0 * (1 << 20), INFINITY},
};

void cal_range_errors(const cal_result *r, const cal_obs *obs, cal_range_error out[CAL_NRANGES]) {
  for (int k = 0; k < CAL_NRANGES; k++) {
    double b = 0, a = 0;
    int n = 0;
    for (size_t i = 0; i < r->nobs; i++)
      if (obs[i].kind == CAL_COLL && obs[i].bytes >= ranges[k].lo && obs[i].bytes < ranges[k].hi) {
        b += fabs(r->before[i] / obs[i].time_s - 1);
        a += fabs(r->after[i] / obs[i].time_s - 1);
        n++;
      }
    out[k] = (cal_range_error){ranges[k].name, n, n ? 100 * b / n : 0, n ? 100 * a / n : 0};
  }
}

char *cal_summary_json(const cal_result *r, const cal_obs *obs) {
  cal_range_error re[CAL_NRANGES];
  cal_range_errors(r, obs, re);
  json_t *rg = json_array();
  for (int k = 0; rg && k < CAL_NRANGES; k++)
    if (re[k].n)
      json_array_append_new(rg, json_pack("{s:s, s:i, s:f, s:f}", "range", re[k].range, "n",
                                          re[k].n, "mape_before", re[k].mape_before,
                                          "mape_after", re[k].mape_after));
  json_t *o = json_pack("{s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:o}",
                        "measurements",
                        (json_int_t)r->nobs, "fitted", (json_int_t)r->nfit, "held_out",
                        (json_int_t)r->nheld, "mape_before", r->mape_before, "mape_after",
                        r->mape_after, "bias_before", r->bias_before, "bias_after", r->bias_after,
                        "holdout_mape_before", r->held_mape_before, "holdout_mape_after",
                        r->held_mape_after, "rms_log_before", r->fit_error_before,
                        "rms_log_after", r->fit_error, "collectives_by_size",
                        rg ? rg : json_null());
  json_t *dr = json_array();
  for (int k = 0; dr && k < r->ndrivers; k++)
    json_array_append_new(dr, json_pack("{s:I, s:f}", "id", (json_int_t)obs[r->driver[k]].id,
                                        "cook", r->driver_cook[k]));
  if (o) {
    json_object_set_new(o, "prior_noise", json_real(r->prior_noise));
    json_object_set_new(o, "cv_rms_log", json_real(r->cv_error));
    json_object_set_new(o, "cv_rms_log_prior", json_real(r->cv_error_prior));
    json_object_set_new(o, "worse_than_prior", json_boolean(r->worse));
    json_object_set_new(o, "drivers", dr ? dr : json_null());
  } else {
    json_decref(dr);
  }
  char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  return s;
}

typedef struct sums {
  double b, a, c, sb, sa, sc; /* |errors| and errors: before, after, cv */
} sums;

static void add(sums *x, double meas, double before, double after, double cv) {
  double eb = before / meas - 1, ea = after / meas - 1, ec = cv > 0 ? cv / meas - 1 : 0;
  x->b += fabs(eb), x->a += fabs(ea), x->c += fabs(ec), x->sb += eb, x->sa += ea, x->sc += ec;
}

static void finish(cal_group_error *g, const sums *in, const sums *out) {
  double n = g->n ? g->n : 1, m = g->aside ? g->aside : 1;
  g->mape_before = 100 * in->b / n, g->mape_after = 100 * in->a / n, g->mape_cv = 100 * in->c / n;
  g->bias_before = 100 * in->sb / n, g->bias_after = 100 * in->sa / n, g->bias_cv = 100 * in->sc / n;
  g->aside_mape_before = 100 * out->b / m, g->aside_mape_after = 100 * out->a / m;
  g->aside_bias_before = 100 * out->sb / m, g->aside_bias_after = 100 * out->sa / m;
}

int cal_group_errors(const cal_obs *obs, const char *const *group, size_t n, const double *before,
                     const double *after, const double *cv, cal_group_error *out, int max) {
  if (max < 1) return 0;
  int k = 0;
  sums in[64] = {{0}}, as[64] = {{0}}, all_in = {0}, all_as = {0};
  cal_group_error all = {.name = "all"};
  for (size_t i = 0; i < n; i++) {
    int g = 0;
    while (g < k && strcmp(out[g].name, group[i])) g++;
    if (g == k) {
      if (k >= max - 1 || k >= 64) continue;
      out[k++] = (cal_group_error){.name = group[i]};
    }
    double c = cv ? cv[i] : 0;
    if (obs[i].aside) {
      out[g].aside++, all.aside++;
      add(&as[g], obs[i].time_s, before[i], after[i], 0);
      add(&all_as, obs[i].time_s, before[i], after[i], 0);
    } else {
      out[g].n++, all.n++;
      add(&in[g], obs[i].time_s, before[i], after[i], c);
      add(&all_in, obs[i].time_s, before[i], after[i], c);
    }
  }
  for (int g = 0; g < k; g++) finish(&out[g], &in[g], &as[g]);
  finish(&all, &all_in, &all_as);
  out[k++] = all;
  return k;
}