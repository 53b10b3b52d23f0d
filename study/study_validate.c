/* podplan study validate: the cost model against published training runs.
 *
 * Each usable row of benchmarks/data/published_runs.csv (published training runs with the
 * columns this study needs added, see benchmarks/data/README.md) becomes a model, a cluster,
 * a plan and the training-software settings of its source; the cost model predicts its
 * iteration time, which is compared with the published one: printed when the row has it,
 * from tokens/s per GPU (gbs * seq / (tokens/s/GPU * GPUs)) when it has that, else from
 * TFLOP/s per GPU through the row's own FLOP formula:
 *   sc21: F = k B s l h^2 (1 + s/(6h) + V/(16 l h)), k = 96 with full recompute, else 72
 *         (Narayanan et al. SC'21 eq. 3), iteration time = F / (TFLOP/s * 1e12 * GPUs).
 * Error = predicted / published - 1; Kendall's tau-b ranks each set of runs of one model. The same cost-model parameters serve every row; only
 * what the source states (or its own scripts show) about the software differs. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "podplan/cm.h"
#include "podplan/fs.h"
#include "podplan/spec.h"
#include "podplan/store.h"
#include "podplan/study.h"
#include "study_int.h"

typedef struct row_result {
  int row;
  const char *set, *source, *model, *basis;
  int gpus;
  char plan[SPEC_PLAN_STR_MAX];
  double published_s, predicted_s, err_pct, mem_gib;
  int feasible;
  int calibrated;       /* 1: the calibration's values were applied */
  char params[1024];    /* the row's software parameters that differ (cm_params_override) */
  cm_result r;
  spec_model m;
  spec_cluster c;
  spec_plan p;
} row_result;

/* Field by column name ("" when the column is missing). */
static const char *F(const study__csv *c, char **row, const char *name) {
  int k = study__csv_col(c, name);
  return k < 0 ? "" : row[k];
}

static int num(const char *s, double *v) {
  char *e;
  if (!*s) return 0;
  *v = strtod(s, &e);
  return *e == '\0';
}

static int build_model(const study__csv *c, char **row, const char *origin, spec_model *m,
                       pp_err *err) {
  json_t *o = json_object();
  json_object_set_new(o, "name", json_string(F(c, row, "model_name")));
  const char *ints[] = {"layers", "hidden", "heads", "kv_heads", "ffn_hidden", "seq_len",
                        "vocab", "experts", "top_k"};
  const char *keys[] = {"layers", "hidden", "heads", "kv_heads", "ffn_hidden", "seq_len",
                        "vocab", "experts", "top_k"};
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
    double v;
    if (num(F(c, row, ints[i]), &v)) json_object_set_new(o, keys[i], json_integer((json_int_t)v));
  }
  json_object_set_new(o, "ffn", json_string(F(c, row, "ffn")));
  json_object_set_new(o, "dtype", json_string(F(c, row, "dtype")));
  json_object_set_new(o, "tied_embeddings", json_boolean(strcmp(F(c, row, "tied"), "1") == 0));
  char *text = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  int rc = spec_model_parse(text, strlen(text), origin, m, err);
  free(text);
  return rc;
}

static int build_row(const study__csv *c, char **row, const study_validate_opts *o,
                     row_result *rr, cm_params *prm, pp_err *err) {
  char origin[64];
  snprintf(origin, sizeof origin, "row %s", F(c, row, "row"));
  double gpus;
  if (!num(F(c, row, "num_gpus"), &gpus))
    return pp_err_set(err, PP_INPUT, "%s: num_gpus: not a number", origin);
  rr->gpus = (int)gpus;
  if (build_model(c, row, origin, &rr->m, err)) return err->code;
  if (spec_cluster_load(F(c, row, "cluster"), rr->gpus, &rr->c, err)) return err->code;
  const char *gov = F(c, row, "gpu_override");
  if (*gov) {
    if (spec_gpu_load(gov, &rr->c.gpu, err) || spec_cluster_validate(&rr->c, err)) return err->code;
    snprintf(rr->c.name, sizeof rr->c.name, "%.40s-%.20s", F(c, row, "cluster"), gov);
  }
  char plan[512];
  const char *cp = F(c, row, "cp");
  snprintf(plan, sizeof plan,
           "tp=%s,pp=%s,dp=%s,cp=%s,mbs=%s,gbs=%s,vpp=%s,sp=%s,recompute=%s,zero=%s,schedule=%s",
           F(c, row, "tp"), F(c, row, "pp"), F(c, row, "dp"), *cp ? cp : "1",
           F(c, row, "micro_batch"), F(c, row, "global_batch"), F(c, row, "vpp"),
           F(c, row, "sp"), F(c, row, "recompute"), F(c, row, "zero"), F(c, row, "schedule"));
  if (spec_plan_parse(plan, &rr->p, err) || spec_plan_resolve(&rr->p, &rr->m, &rr->c, err))
    return pp_err_prefix(err, "%s", origin);
  spec_plan_format(&rr->p, rr->plan, sizeof rr->plan, err);
  cm_params_default(&rr->m, prm);
  if (o->calib_params && o->calib_cluster && strcmp(F(c, row, "cluster"), o->calib_cluster) == 0) {
    if (cm_params_apply(prm, o->calib_params, err))
      return pp_err_prefix(err, "%s: calibration %lld", origin, o->calib_id);
    rr->calibrated = 1;
  }
  if (cm_params_override(prm, F(c, row, "params"), rr->params, sizeof rr->params, err))
    return pp_err_prefix(err, "%s", origin);
  return PP_OK;
}

/* The published iteration time of a row by its comparison basis. */
static int published_time(const study__csv *c, char **row, const row_result *rr, double *t,
                          pp_err *err) {
  const char *how = F(c, row, "compare");
  double v, n = rr->gpus, gbs = rr->p.gbs, s = rr->m.seq_len;
  if (strcmp(how, "iter") == 0 && num(F(c, row, "measured_iter_time_s"), &v)) {
    *t = v;
    return PP_OK;
  }
  if (strcmp(how, "tokens") == 0 && num(F(c, row, "tokens_per_s_per_gpu"), &v)) {
    *t = gbs * s / (v * n);
    return PP_OK;
  }
  if (strcmp(how, "sc21") == 0 && num(F(c, row, "measured_tflops_per_gpu"), &v)) {
    double l = rr->m.layers, h = rr->m.hidden, V = rr->m.vocab;
    double k = rr->p.recompute == SPEC_RECOMPUTE_FULL ? 96 : 72;
    double flops = k * gbs * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
    *t = flops / (v * 1e12 * n);
    return PP_OK;
  }
  return pp_err_set(err, PP_INPUT, "row %s: compare '%s' without the figure it needs",
                    F(c, row, "row"), how);
}

static const char *basis_text(const char *how) {
  if (strcmp(how, "iter") == 0) return "iteration time";
  if (strcmp(how, "tokens") == 0) return "tokens/s/GPU";
  return "TFLOP/s via SC'21 formula";
}

typedef struct acc {
  const char *name;
  int n;
  double sum, max;
} acc;

static void acc_add(acc *a, int *na, int cap, const char *name, double e) {
  int i;
  for (i = 0; i < *na; i++)
    if (strcmp(a[i].name, name) == 0) break;
  if (i == *na) {
    if (*na == cap) return;
    a[(*na)++] = (acc){name, 0, 0, 0};
  }
  a[i].n++;
  a[i].sum += fabs(e);
  if (fabs(e) > a[i].max) a[i].max = fabs(e);
}

static int write_csv(const char *dir, const row_result *rs, int n, pp_err *err) {
  if (pp_mkdirs(dir, err)) return err->code;
  char path[4096], tmp[4200];
  snprintf(path, sizeof path, "%s/validate.csv", dir);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) return pp_err_set(err, PP_IO, "%s: cannot write: %s", tmp, strerror(errno));
  fprintf(f, "row,set,source,model,gpus,plan,basis,published_s,predicted_s,error_pct,"
             "mem_gib_per_gpu,feasible,mfu,compute_s,tp_comm_s,pp_bubble_s,dp_comm_s\n");
  for (int i = 0; i < n; i++) {
    const row_result *r = &rs[i];
    fprintf(f, "%d,%s,\"%s\",%s,%d,\"%s\",%s,%.6g,%.6g,%.2f,%.2f,%d,%.4f,%.6g,%.6g,%.6g,%.6g\n",
            r->row, r->set, r->source, r->model, r->gpus, r->plan, r->basis, r->published_s,
            r->predicted_s, r->err_pct, r->mem_gib, r->feasible, r->r.mfu, r->r.t.compute_s,
            r->r.t.tp_comm_s, r->r.t.pp_bubble_s, r->r.t.dp_comm_s);
  }
  if (fclose(f) != 0 || rename(tmp, path) != 0) {
    remove(tmp);
    return pp_err_set(err, PP_IO, "%s: cannot write: %s", path, strerror(errno));
  }
  return PP_OK;
}

double study_kendall_tau(const double *x, const double *y, int n, int *concordant,
                         int *discordant) {
  long c = 0, d = 0, tx = 0, ty = 0, pairs = 0;
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) {
      int sx = (x[i] > x[j]) - (x[i] < x[j]), sy = (y[i] > y[j]) - (y[i] < y[j]);
      pairs++;
      tx += sx == 0;
      ty += sy == 0;
      if (sx && sy && sx == sy) c++;
      if (sx && sy && sx != sy) d++;
    }
  if (concordant) *concordant = (int)c;
  if (discordant) *discordant = (int)d;
  double den = sqrt((double)(pairs - tx) * (double)(pairs - ty));
  return den > 0 ? (double)(c - d) / den : 0;
}

/* Runs of one model: one source, one GPU type and the same model shape. */
static int same_shape(const char *sa, const spec_cluster *ca, const spec_model *x, const char *sb,
                      const spec_cluster *cb, const spec_model *y) {
  return strcmp(sa, sb) == 0 && strcmp(ca->gpu.name, cb->gpu.name) == 0 &&
         x->layers == y->layers && x->hidden == y->hidden && x->heads == y->heads &&
         x->ffn_hidden == y->ffn_hidden && x->seq_len == y->seq_len && x->vocab == y->vocab &&
         x->experts == y->experts;
}

static int same_set(const row_result *a, const row_result *b) {
  return same_shape(a->source, &a->c, &a->m, b->source, &b->c, &b->m);
}

/* Kendall's tau per set of runs of one model with at least 3 rows (several plans). */
static void rank_sets(const row_result *rs, int n, FILE *out, study_validate_summary *sum) {
  fprintf(out, "\nRanking: Kendall's tau-b of predicted vs published iteration time, per set of "
               "runs\nof one model (one source, one GPU type, the same model shape; at least 3 "
               "rows):\n");
  fprintf(out, "  %-12s %-40s %-10s %4s %4s %4s %7s\n", "source", "model (first row)", "GPU",
          "rows", "conc", "disc", "tau");
  for (int i = 0; i < n; i++) {
    int first = 1, k = 0;
    for (int j = 0; j < i; j++) first &= !same_set(&rs[j], &rs[i]);
    if (!first) continue;
    double pub[256], pred[256];
    for (int j = i; j < n && k < 256; j++)
      if (same_set(&rs[j], &rs[i])) pub[k] = rs[j].published_s, pred[k++] = rs[j].predicted_s;
    if (k < 3 || sum->rank_groups == STUDY_RANK_GROUPS) continue;
    study_rank_group *g = &sum->rank[sum->rank_groups++];
    snprintf(g->name, sizeof g->name, "%s %s", rs[i].source, rs[i].model);
    g->rows = k;
    g->tau = study_kendall_tau(pred, pub, k, &g->concordant, &g->discordant);
    fprintf(out, "  %-12s %-40.40s %-10.10s %4d %4d %4d %+7.2f\n", rs[i].source, rs[i].model,
            rs[i].c.gpu.name, k, g->concordant, g->discordant, g->tau);
  }
}

static int write_rank_csv(const char *dir, const study_validate_summary *sum, pp_err *err) {
  char path[4096], tmp[4200];
  snprintf(path, sizeof path, "%s/validate_rank.csv", dir);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) return pp_err_set(err, PP_IO, "%s: cannot write: %s", tmp, strerror(errno));
  fprintf(f, "set,rows,concordant,discordant,tau\n");
  for (int i = 0; i < sum->rank_groups; i++) {
    const study_rank_group *g = &sum->rank[i];
    fprintf(f, "\"%s\",%d,%d,%d,%.4f\n", g->name, g->rows, g->concordant, g->discordant, g->tau);
  }
  if (fclose(f) != 0 || rename(tmp, path) != 0) {
    remove(tmp);
    return pp_err_set(err, PP_IO, "%s: cannot write: %s", path, strerror(errno));
  }
  return PP_OK;
}

static int store_rows(const char *db, const row_result *rs, int n, long long calib_id,
                      pp_err *err) {
  store *s = NULL;
  if (store_open(db, NULL, &s, err) || store_begin(s, err)) {
    store_close(s);
    return err->code;
  }
  for (int i = 0; i < n; i++) {
    const row_result *r = &rs[i];
    store_score sc = {.feasible = 1, .params = r->params}; /* both scores: one pair */
    if (store_put_model(s, &r->m, &sc.model_id, err) ||
        store_put_cluster(s, &r->c, &sc.cluster_id, err) ||
        store_put_plan(s, &r->p, &sc.plan_id, err))
      goto fail;
    sc.source = STORE_SRC_PUBLISHED;
    sc.iter_time_s = r->published_s;
    sc.tokens_per_s = r->p.gbs * (double)r->m.seq_len / r->published_s;
    if (store_put_score(s, &sc, NULL, err)) goto fail;
    sc.source = STORE_SRC_COSTMODEL;
    sc.calibration_id = r->calibrated ? calib_id : 0;
    sc.iter_time_s = r->predicted_s;
    sc.tokens_per_s = r->r.tokens_per_s;
    sc.mfu = r->r.mfu;
    sc.mem_gib = r->mem_gib;
    sc.feasible = r->feasible;
    if (store_put_score(s, &sc, NULL, err)) goto fail;
  }
  if (store_commit(s, err)) goto fail;
  store_close(s);
  return PP_OK;
fail:
  store_close(s);
  return err->code;
}

/* "365-370" -> 367.5, "~480" -> 480, "2-4 GiB" -> 3 GiB; -1 when not a number */
static double loose_num(const char *s) {
  while (*s == '~' || *s == ' ') s++;
  char *e;
  double a = strtod(s, &e);
  if (e == s) return -1;
  if (*e == '-') a = (a + strtod(e + 1, &e)) / 2;
  while (*e == ' ') e++;
  if (strncmp(e, "GiB", 3) == 0) return a * 1024.0 * 1024 * 1024;
  if (*e && strncmp(e, "per", 3) != 0) return -1;
  return a;
}

/* One published bus bandwidth against the cost model: the row's cluster (a preset or inline
 * JSON, sized to the row's GPUs), a group of all of them placed as the cluster orders its
 * GPUs, the algorithm the row forced (Ring, Tree) or NCCL's own choice. Returns the predicted
 * busbw (GB/s) and the algorithm, or a negative value when the row cannot be priced. */
static int coll_point(const char *cluster, cm_coll coll, int gpus, const char *algo, double size,
                      double *pred, char *used, size_t cap, pp_err *err) {
  spec_model m;
  spec_cluster cl;
  cm_model *cm = NULL;
  if (spec_model_load("gpt3-175b", &m, err) || spec_cluster_load(cluster, gpus, &cl, err) ||
      cm_model_create(&m, &cl, NULL, &cm, err))
    return err->code;
  cm_place pl;
  cm_place_group(cm, gpus, 1, &pl);
  cm_algo a = CM_ALGO_RING;
  int forced = strncmp(algo, "Ring", 4) == 0 || strncmp(algo, "Tree", 4) == 0;
  if (strncmp(algo, "Tree", 4) == 0) a = CM_ALGO_TREE;
  double t = forced ? cm_coll_time(cm, coll, a, size, &pl) : cm_coll_best(cm, coll, size, &pl, &a);
  cm_model_destroy(cm);
  *pred = t > 0 ? cm_coll_busbw_factor(coll, gpus) * size / t / 1e9 : -1;
  snprintf(used, cap, "%s%s", forced ? "forced " : "", cm_algo_name(a));
  return PP_OK;
}

/* Predicted against published bus bandwidth: every row of nccl_busbw.csv with a cluster, a
 * GPU count, a message of at least 64 MiB and a busbw (all-reduce, all-gather,
 * reduce-scatter). Rows whose authors report an underperforming system are printed and
 * flagged, not counted. */
static int coll_curves(const char *path, FILE *out, study_validate_summary *sum, pp_err *err) {
  study__csv c;
  const char *origin = path ? path : "built-in nccl_busbw.csv";
  if (study__csv_load(path, study__nccl_busbw, study__nccl_busbw_len, origin, &c, err))
    return err->code;
  fprintf(out, "\nBus bandwidth, predicted vs published nccl-tests (>= 64 MiB):\n");
  fprintf(out, "  %-40s %-14s %5s %5s %-15s %12s %9s %9s %8s\n", "system", "collective", "GPUs",
          "nodes", "algorithm", "bytes", "published", "predicted", "error%");
  double multi_abs = 0;
  for (int i = 0; i < c.nrows; i++) {
    char **row = c.rows[i];
    const char *sys = F(&c, row, "system"), *algo = F(&c, row, "algorithm");
    const char *cluster = F(&c, row, "cluster"), *name = F(&c, row, "collective");
    double gpus = loose_num(F(&c, row, "gpus")), nodes = loose_num(F(&c, row, "nodes"));
    double size = loose_num(F(&c, row, "message_size_bytes"));
    double bus = loose_num(F(&c, row, "busbw_gb_s"));
    char cname[32];
    snprintf(cname, sizeof cname, "%.*s", (int)strcspn(name, " "), name);
    cm_coll coll;
    if (cm_coll_lookup(cname, &coll) || !*cluster || gpus < 2 || nodes < 1 ||
        size < 64.0 * 1024 * 1024 || bus <= 0)
      continue;
    double pred = -1;
    char used[40];
    if (coll_point(cluster, coll, (int)gpus, algo, size, &pred, used, sizeof used, err)) {
      pp_err_prefix(err, "%s: row %d", origin, i + 1);
      study__csv_free(&c);
      return err->code;
    }
    double e = 100 * (pred / bus - 1);
    int flagged = strstr(F(&c, row, "measured_or_expected"), "underperforming") != NULL;
    fprintf(out, "  %-40.40s %-14s %5.0f %5.0f %-15s %12.0f %9.1f %9.1f %+7.1f%%%s\n", sys,
            cname, gpus, nodes, used, size, bus, pred, e,
            flagged ? "  (reported underperforming)" : "");
    if (flagged) {
      sum->coll_flagged++;
      continue;
    }
    sum->coll_points++;
    if (gpus == 8 && nodes == 1) {
      if (fabs(e) > sum->coll_max_err) sum->coll_max_err = fabs(e);
    } else {
      sum->coll_multi_points++;
      sum->coll_multi_within += fabs(e) <= 15.0;
      multi_abs += fabs(e);
      if (fabs(e) > sum->coll_multi_max_err) sum->coll_multi_max_err = fabs(e);
    }
  }
  fprintf(out, "  %d points; largest |error| on one 8-GPU node: %.1f%%\n", sum->coll_points,
          sum->coll_max_err);
  fprintf(out, "  across nodes and NVLink domains: %d points, %d within 15%%, mean |error| %.1f%%, "
               "largest %.1f%%; %d flagged points not counted\n",
          sum->coll_multi_points, sum->coll_multi_within,
          sum->coll_multi_points ? multi_abs / sum->coll_multi_points : 0.0,
          sum->coll_multi_max_err, sum->coll_flagged);
  study__csv_free(&c);
  return PP_OK;
}

/* Adds one evaluated row to the memory check. */
static void note_memory(study_validate_summary *sum, int row, const spec_cluster *c,
                        const cm_result *r) {
  double room = c->gpu.hbm_gib - r->mem_gib_per_gpu;
  if (sum->mem_rows == 0 || room < sum->min_headroom_gib)
    sum->min_headroom_gib = room, sum->min_headroom_row = row;
  sum->mem_rows++;
  sum->mem_infeasible += !r->feasible;
}

/* A row that study validate skips still names a configuration that trained: its memory is
 * checked when it states what memory depends on (the model's name, the plan, the
 * batch, recompute, the cluster); otherwise it is counted as incomplete. */
static int skipped_memory(const study__csv *c, char **row, const study_validate_opts *o,
                          study_validate_summary *sum, pp_err *err) {
  const char *need[] = {"model_name", "tp",        "pp",         "dp",
                        "micro_batch", "global_batch", "recompute", "cluster"};
  for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
    if (!*F(c, row, need[i])) {
      sum->mem_incomplete++;
      return PP_OK;
    }
  row_result rr = {0};
  cm_params prm;
  cm_model *cm = NULL;
  int rc = PP_OK;
  if (build_row(c, row, o, &rr, &prm, err) || cm_model_create(&rr.m, &rr.c, &prm, &cm, err) ||
      cm_eval(cm, &rr.p, &rr.r, err))
    rc = err->code;
  else
    note_memory(sum, atoi(F(c, row, "row")), &rr.c, &rr.r);
  cm_model_destroy(cm);
  spec_plan_clear(&rr.p);
  return rc;
}

int study_validate(const study_validate_opts *o, study_validate_summary *sum, pp_err *err) {
  FILE *out = o->out ? o->out : stdout;
  memset(sum, 0, sizeof *sum);
  study__csv csv;
  const char *origin = o->data ? o->data : "built-in published_runs.csv";
  int rc = study__csv_load(o->data, study__published_runs, study__published_runs_len, origin,
                           &csv, err);
  if (rc) return rc;
  const char *need[] = {"row", "set", "short", "model_name", "num_gpus", "cluster", "tp", "pp",
                        "dp", "micro_batch", "global_batch", "compare", "params"};
  for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
    if (study__csv_col(&csv, need[i]) < 0) {
      rc = pp_err_set(err, PP_INPUT, "%s: column '%s' missing", origin, need[i]);
      study__csv_free(&csv);
      return rc;
    }

  row_result *rs = calloc((size_t)csv.nrows + 1, sizeof *rs);
  if (!rs) {
    study__csv_free(&csv);
    return pp_err_set(err, PP_NOMEM, "out of memory");
  }
  int n = 0;
  acc by_src[32], by_set[4];
  int nsrc = 0, nset = 0;
  fprintf(out, "%-4s %-8s %-12s %-22s %5s %-26s %11s %11s %8s %6s\n", "row", "set", "source",
          "model", "GPUs", "tp/pp/dp/cp mbs vpp rc", "published_s", "predicted_s", "error%",
          "GiB");
  for (int i = 0; i < csv.nrows; i++) {
    char **row = csv.rows[i];
    sum->rows++;
    const char *set = F(&csv, row, "set");
    if (strcmp(set, "target") && strcmp(set, "holdout")) {
      sum->skipped++;
      fprintf(out, "%-4s %-8s skipped: %s\n", F(&csv, row, "row"), "-", F(&csv, row, "skip_reason"));
      if ((rc = skipped_memory(&csv, row, o, sum, err))) goto done;
      continue;
    }
    row_result *rr = &rs[n];
    cm_params prm;
    cm_model *cm = NULL;
    if (build_row(&csv, row, o, rr, &prm, err) || cm_model_create(&rr->m, &rr->c, &prm, &cm, err) ||
        cm_eval(cm, &rr->p, &rr->r, err) || published_time(&csv, row, rr, &rr->published_s, err)) {
      cm_model_destroy(cm);
      spec_plan_clear(&rr->p);
      rc = err->code;
      goto done;
    }
    cm_model_destroy(cm);
    rr->row = atoi(F(&csv, row, "row"));
    rr->set = set;
    rr->source = F(&csv, row, "short");
    rr->model = F(&csv, row, "model_name");
    rr->basis = basis_text(F(&csv, row, "compare"));
    rr->predicted_s = rr->r.iter_time_s;
    rr->err_pct = 100.0 * (rr->predicted_s / rr->published_s - 1);
    rr->mem_gib = rr->r.mem_gib_per_gpu;
    rr->feasible = rr->r.feasible;
    char shape[64];
    snprintf(shape, sizeof shape, "%d/%d/%d/%d %d %d %c", rr->p.tp, rr->p.pp, rr->p.dp, rr->p.cp,
             rr->p.mbs, rr->p.vpp, "nsf"[rr->p.recompute]);
    fprintf(out, "%-4d %-8s %-12s %-22.22s %5d %-26s %11.3f %11.3f %+7.1f%% %6.1f%s\n", rr->row,
            set, rr->source, rr->model, rr->gpus, shape, rr->published_s, rr->predicted_s,
            rr->err_pct, rr->mem_gib, rr->feasible ? "" : " DOES NOT FIT");
    sum->used++;
    sum->calibrated += rr->calibrated;
    note_memory(sum, rr->row, &rr->c, &rr->r);
    sum->infeasible += !rr->feasible;
    sum->target_infeasible += !rr->feasible && strcmp(set, "target") == 0;
    acc_add(by_src, &nsrc, 32, rr->source, rr->err_pct);
    acc_add(by_set, &nset, 4, set, rr->err_pct);
    n++;
  }
  if (o->calib_params)
    fprintf(out, "\ncalibration %lld (cluster %s) applied to %d of the predicted rows\n",
            o->calib_id, o->calib_cluster, sum->calibrated);
  fprintf(out, "\nMAPE of iteration time (error = predicted / published - 1):\n");
  for (int i = 0; i < nsrc; i++)
    fprintf(out, "  %-12s %3d rows  MAPE %5.1f%%  max %5.1f%%\n", by_src[i].name, by_src[i].n,
            by_src[i].sum / by_src[i].n, by_src[i].max);
  for (int i = 0; i < nset; i++) {
    double mape = by_set[i].sum / by_set[i].n;
    fprintf(out, "  %-12s %3d rows  MAPE %5.1f%%  max %5.1f%%%s\n", by_set[i].name, by_set[i].n,
            mape, by_set[i].max,
            strcmp(by_set[i].name, "target") == 0 ? "   (SC'21 Table 1, Korthikanti, MT-NLG)"
                                                  : "   (kept aside to check the model)");
    if (strcmp(by_set[i].name, "target") == 0)
      sum->target_rows = by_set[i].n, sum->target_mape = mape, sum->target_max = by_set[i].max;
    else
      sum->holdout_rows = by_set[i].n, sum->holdout_mape = mape, sum->holdout_max = by_set[i].max;
  }
  fprintf(out, "  %d rows predicted, %d skipped, %d predicted not to fit\n", sum->used,
          sum->skipped, sum->infeasible);
  rank_sets(rs, n, out, sum);
  fprintf(out,
          "\nMemory of every published configuration: %d rows evaluated (%d skipped rows lack "
          "the plan, batch, recompute or cluster), %d predicted not to fit; tightest headroom "
          "%.1f GiB (row %d)\n",
          sum->mem_rows, sum->mem_incomplete, sum->mem_infeasible, sum->min_headroom_gib,
          sum->min_headroom_row);
  if ((rc = coll_curves(o->busbw, out, sum, err))) goto done;
  if (o->out_dir && ((rc = write_csv(o->out_dir, rs, n, err)) ||
                     (rc = write_rank_csv(o->out_dir, sum, err))))
    goto done;
  if (o->db && (rc = store_rows(o->db, rs, n, o->calib_id, err))) goto done;
done:
  for (int i = 0; i < n; i++) spec_plan_clear(&rs[i].p);
  free(rs);
  study__csv_free(&csv);
  return rc;
}

void study_runs_free(study_run *r, int n) {
  for (int i = 0; r && i < n; i++) spec_plan_clear(&r[i].p);
  free(r);
}

int study_runs_load(const char *path, study_run **out, int *n, int *skipped, pp_err *err) {
  *out = NULL, *n = 0, *skipped = 0;
  study__csv csv;
  const char *origin = path ? path : "built-in published_runs.csv";
  int rc = study__csv_load(path, study__published_runs, study__published_runs_len, origin, &csv,
                           err);
  if (rc) return rc;
  study_run *r = calloc((size_t)csv.nrows + 1, sizeof *r);
  if (!r) rc = pp_err_set(err, PP_NOMEM, "out of memory");
  study_validate_opts none = {0};
  for (int i = 0; !rc && i < csv.nrows; i++) {
    char **row = csv.rows[i];
    const char *set = F(&csv, row, "set");
    if (strcmp(set, "target") && strcmp(set, "holdout")) {
      (*skipped)++;
      continue;
    }
    row_result rr = {0};
    study_run *x = &r[*n];
    if (build_row(&csv, row, &none, &rr, &x->prm, err) ||
        published_time(&csv, row, &rr, &x->published_s, err)) {
      spec_plan_clear(&rr.p);
      rc = pp_err_prefix(err, "%s", origin);
      break;
    }
    x->row = atoi(F(&csv, row, "row"));
    snprintf(x->set, sizeof x->set, "%s", set);
    snprintf(x->source, sizeof x->source, "%s", F(&csv, row, "short"));
    x->m = rr.m, x->c = rr.c, x->p = rr.p;
    x->rank_set = *n;
    for (int j = 0; j < *n; j++)
      if (same_shape(r[j].source, &r[j].c, &r[j].m, x->source, &x->c, &x->m)) {
        x->rank_set = r[j].rank_set;
        break;
      }
    (*n)++;
  }
  study__csv_free(&csv);
  if (rc) {
    study_runs_free(r, *n);
    *n = 0;
    return rc;
  }
  *out = r;
  return PP_OK;
}
